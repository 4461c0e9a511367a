"""Crawl-wide checks.

``ReactorCheck`` logs the installed Twisted reactor at INFO and refuses to crawl when it
is not the asyncio reactor: the frontier, pipelines and stores are asyncio code, and a
silent fallback to another reactor would break them in obscure ways.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.utils.reactor import is_asyncio_reactor_installed

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class ReactorNotSupported(RuntimeError):
    pass


class ReactorCheck:
    def __init__(self, crawler: Crawler) -> None:
        from twisted.internet import reactor

        name = f"{type(reactor).__module__}.{type(reactor).__name__}"
        logger.info("Twisted reactor in use: %s", name)
        if not is_asyncio_reactor_installed():
            message = (
                f"pricewatch needs the asyncio reactor, but {name} is installed; set "
                "TWISTED_REACTOR = 'twisted.internet.asyncioreactor.AsyncioSelectorReactor' "
                "(the default in pricewatch/settings.py) and do not override it"
            )
            logger.error(message)
            raise ReactorNotSupported(message)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ReactorCheck:
        return cls(crawler)
