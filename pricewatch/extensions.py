"""Crawl-wide extensions.

``ReactorCheck`` logs the installed Twisted reactor at INFO and refuses to crawl when it
is not the asyncio reactor: the frontier, pipelines and stores are asyncio code, and a
silent fallback to another reactor would break them in obscure ways.

``StatsFile`` writes the crawl's stats as JSON to ``PRICEWATCH_STATS_FILE`` when the
spider closes (disabled when the setting is empty), for cron monitoring and dashboards.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured
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


class StatsFile:
    def __init__(self, crawler: Crawler) -> None:
        path = crawler.settings.get("PRICEWATCH_STATS_FILE")
        if not path:
            raise NotConfigured
        self.path = Path(path)
        self.crawler = crawler
        self.reason = "unknown"
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        # Written once every spider_closed handler has added its figures.
        crawler.signals.connect(self.engine_stopped, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StatsFile:
        return cls(crawler)

    def spider_closed(self, reason: str) -> None:
        self.reason = reason

    def engine_stopped(self) -> None:
        assert self.crawler.stats is not None
        stats = dict(self.crawler.stats.get_stats())
        stats["finish_reason"] = self.reason
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps(stats, default=str, indent=1, sort_keys=True))
        os.replace(tmp, self.path)
