"""The backends one crawl shares between its spider, middlewares and pipelines.

``CrawlResources.of(crawler)`` returns the crawl's single holder. The frontier is built
from ``PRICEWATCH_FRONTIER_URL`` and opened on first use, and closed on ``spider_closed``,
which Scrapy sends after the pipelines have closed (so their last acknowledgements land).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from scrapy import signals

from pricewatch.frontier import Frontier, frontier_from_settings

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

_ATTR = "_pricewatch_resources"
CLOSE_TIMEOUT = 10.0


class CrawlResources:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._frontier: Frontier | None = None
        self._lock: asyncio.Lock | None = None
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)

    @classmethod
    def of(cls, crawler: Crawler) -> CrawlResources:
        resources: CrawlResources | None = getattr(crawler, _ATTR, None)
        if resources is None:
            resources = cls(crawler)
            setattr(crawler, _ATTR, resources)
        return resources

    async def frontier(self) -> Frontier:
        """The crawl's frontier, opened once (raises ``FrontierUnavailable``)."""
        if self._frontier is not None:
            return self._frontier
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._frontier is None:
                frontier = frontier_from_settings(self.crawler.settings)
                await frontier.open()
                self._frontier = frontier
        return self._frontier

    async def _spider_closed(self) -> None:
        frontier, self._frontier = self._frontier, None
        if frontier is not None:
            await asyncio.wait_for(frontier.close(), CLOSE_TIMEOUT)
