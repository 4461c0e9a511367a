"""Crawl-wide extensions.

``ReactorCheck`` logs the installed Twisted reactor at INFO and refuses to crawl when it
is not the asyncio reactor: the frontier, pipelines and stores are asyncio code, and a
silent fallback to another reactor would break them in obscure ways.

``StatsFile`` writes the run's record (pricewatch/runs.py: pid, host, start and end, exit
status, outcome counts, finish reason, every crawl stat) as JSON to
``PRICEWATCH_STATS_FILE`` when the run starts and when it ends (disabled when the setting is
empty), for cron monitoring and dashboards.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.reactor import is_asyncio_reactor_installed

from pricewatch.runs import ExitCode, RunRecord, exit_code

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
    """Writes the run's :class:`~pricewatch.runs.RunRecord` to ``PRICEWATCH_STATS_FILE``:
    ``running`` when the crawler is built, the final record when the engine stops (or,
    for a crawl ended while it opened, when the spider closes). ``scrapy crawl`` then
    rewrites the final record with the exit code it settled on (:meth:`finish`)."""

    def __init__(self, crawler: Crawler) -> None:
        template = crawler.settings.get("PRICEWATCH_STATS_FILE")
        if not template:
            raise NotConfigured
        self.crawler = crawler
        self.record = RunRecord(template, crawler.spidercls.name)
        self.reason: str | None = None
        self._engine_started = False
        crawler.signals.connect(self.engine_started, signal=signals.engine_started)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        # Written once every spider_closed handler has added its figures.
        crawler.signals.connect(self.engine_stopped, signal=signals.engine_stopped)
        self.record.started()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StatsFile:
        return cls(crawler)

    def engine_started(self) -> None:
        self._engine_started = True

    def spider_closed(self, reason: str) -> None:
        self.reason = reason
        if not self._engine_started:  # ended while opening: no engine_stopped follows
            self.finish()

    def engine_stopped(self) -> None:
        self.finish()

    def finish(self, code: ExitCode | None = None, error: str | None = None) -> None:
        stats = self.stats()
        if code is None:
            code = exit_code(self.reason, stats)
        self.record.finished(code, self.reason, stats, error)

    def stats(self) -> dict[str, Any]:
        assert self.crawler.stats is not None
        return dict(self.crawler.stats.get_stats())
