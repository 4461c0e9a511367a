"""The backends one crawl shares between its spider, middlewares and pipelines.

``CrawlResources.of(crawler)`` returns the crawl's single holder. The frontier is built
from ``PRICEWATCH_FRONTIER_URL`` and opened on first use, and closed on ``spider_closed``,
which Scrapy sends after the pipelines have closed (so their last acknowledgements land);
what the frontier counted (``pricewatch/frontier/*``) is copied into the crawl stats then.

Every lease is completed through :meth:`CrawlResources.complete`, which counts the
outcome (stat ``pricewatch/outcome/<outcome>``) and the leases still outstanding, so the
spider knows how much work it holds. A completion the frontier cannot take (backend
down) is logged and counted (``pricewatch/frontier/complete_failed``); its lease expires
and is reaped, so the SKU is fetched again rather than lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from scrapy import signals

from pricewatch.frontier import (
    Completion,
    Frontier,
    FrontierUnavailable,
    Lease,
    frontier_from_settings,
)

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

_ATTR = "_pricewatch_resources"
CLOSE_TIMEOUT = 10.0


class CrawlResources:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._frontier: Frontier | None = None
        self._lock: asyncio.Lock | None = None
        self._outstanding: set[str] = set()
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

    @property
    def outstanding(self) -> int:
        """Leases claimed by this crawl and not completed yet."""
        return len(self._outstanding)

    def claimed(self, leases: Sequence[Lease]) -> None:
        self._outstanding.update(lease.token for lease in leases)

    async def complete(self, completions: Sequence[Completion]) -> None:
        """Complete leases (exactly once each) and count their outcomes."""
        if not completions:
            return
        stats = self.crawler.stats
        assert stats is not None
        for completion in completions:
            self._outstanding.discard(completion.lease.token)
            stats.inc_value(f"pricewatch/outcome/{completion.outcome.value}")
        try:
            frontier = await self.frontier()
            await frontier.complete(completions)
        except FrontierUnavailable as exc:
            stats.inc_value("pricewatch/frontier/complete_failed", len(completions))
            logger.warning(
                "Could not complete %d lease(s), they will expire and be fetched again: %s",
                len(completions),
                exc,
            )

    async def _spider_closed(self) -> None:
        frontier, self._frontier = self._frontier, None
        if frontier is not None:
            stats = self.crawler.stats
            assert stats is not None
            for name, value in frontier.stats.items():
                stats.set_value(name, value)
            await asyncio.wait_for(frontier.close(), CLOSE_TIMEOUT)
