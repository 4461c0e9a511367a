"""Worker recycling and the memory budget: a long-running worker replaces itself cleanly.

A follow-mode worker (``-a follow=1``) that runs for days grows (allocator fragmentation, a
library's cache, a browser's processes). It recycles itself when the first of these is
reached (settings ``PRICEWATCH_RECYCLE_*``, 0 = no limit; defaults in
``pricewatch/settings.py``):

- ``AFTER_SKUS``: leases claimed by this process (the last claim is cut to the number left,
  so a worker handles exactly that many);
- ``AFTER_HOURS``: hours since the crawl started;
- ``RSS_MB``: the process's resident memory, sampled every ``CHECK_INTERVAL`` seconds
  (``/proc/self/statm``; stats ``pricewatch/memory/rss_mb``, the latest sample, and
  ``pricewatch/memory/rss_max_mb``).

Recycling stops claiming; the leases in hand are fetched, stored and acknowledged as
usual; the pipelines flush; the crawl then ends as a cron run does, with finish reason
``finished`` and exit code 0, so scrapyd, systemd (``Restart=always``) or cron starts a
fresh worker. Nothing is lost and nothing is fetched twice: no lease is abandoned. Stats
``pricewatch/recycle/reason`` (``skus``, ``hours``, ``rss``) and an INFO line say why.
Browser pages are accounted for in the stats: ``pricewatch/browser/pages`` opened,
``pages_closed`` and ``pages_open_at_close`` (leaked: still open when the crawl closed).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from scrapy import signals

from pricewatch._crawl import per_crawl
from pricewatch.leases import leases_claimed

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from pricewatch.frontier import Lease

logger = logging.getLogger(__name__)

STATS = (
    "pricewatch/recycle/reason",
    "pricewatch/memory/rss_mb",
    "pricewatch/memory/rss_max_mb",
    "pricewatch/browser/pages_open_at_close",
)
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
UNLIMITED = 1 << 62


def rss_mb() -> float | None:
    """The resident memory of this process in MB (Linux), None where unknown."""
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[1]) * _PAGE / (1024 * 1024)
    except (OSError, ValueError, IndexError):
        return None


class WorkerRecycler:
    """The extension; the spider asks :meth:`allowance` before each claim and stops
    claiming once :attr:`draining`."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        settings = crawler.settings
        self.after_skus = settings.getint("PRICEWATCH_RECYCLE_AFTER_SKUS")
        self.after_hours = settings.getfloat("PRICEWATCH_RECYCLE_AFTER_HOURS")
        self.rss_limit = settings.getfloat("PRICEWATCH_RECYCLE_RSS_MB")
        self.interval = settings.getfloat("PRICEWATCH_RECYCLE_CHECK_INTERVAL")
        for name, value in (
            ("PRICEWATCH_RECYCLE_AFTER_SKUS", self.after_skus),
            ("PRICEWATCH_RECYCLE_AFTER_HOURS", self.after_hours),
            ("PRICEWATCH_RECYCLE_RSS_MB", self.rss_limit),
        ):
            if value < 0:
                raise ValueError(f"{name} must be >= 0 (0: no limit), got {value}")
        if self.interval <= 0:
            raise ValueError(f"PRICEWATCH_RECYCLE_CHECK_INTERVAL must be > 0, got {self.interval}")
        self.claimed = 0
        self.reason: str | None = None
        self.rss_max = 0.0
        self._started = time.monotonic()
        self._task: asyncio.Task[None] | None = None
        crawler.signals.connect(self.count, signal=leases_claimed)
        crawler.signals.connect(self.engine_started, signal=signals.engine_started)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def of(cls, crawler: Crawler) -> WorkerRecycler:
        return per_crawl(crawler, cls)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WorkerRecycler:
        return cls.of(crawler)

    @property
    def draining(self) -> bool:
        return self.reason is not None

    def allowance(self) -> int:
        """Leases this worker may still claim."""
        if self.reason is not None:
            return 0
        if self.after_skus:
            return max(0, self.after_skus - self.claimed)
        return UNLIMITED

    def count(self, leases: Sequence[Lease]) -> None:
        self.claimed += len(leases)
        if self.after_skus and self.claimed >= self.after_skus:
            self._recycle("skus", f"{self.claimed} SKUs claimed (PRICEWATCH_RECYCLE_AFTER_SKUS)")

    def _recycle(self, reason: str, why: str) -> None:
        if self.reason is not None:
            return
        self.reason = reason
        stats = self.crawler.stats
        assert stats is not None
        stats.set_value("pricewatch/recycle/reason", reason)
        logger.info(
            "Recycling this worker: %s; claiming nothing more, finishing the leases in hand, "
            "then exiting 0 for a fresh worker to take over",
            why,
        )

    def engine_started(self) -> None:
        self.sample()
        self._task = asyncio.get_running_loop().create_task(self._check_loop())

    async def _check_loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.sample()

    def sample(self) -> None:
        stats = self.crawler.stats
        assert stats is not None
        rss = rss_mb()
        if rss is not None:
            self.rss_max = max(self.rss_max, rss)
            stats.set_value("pricewatch/memory/rss_mb", round(rss, 1))
            stats.set_value("pricewatch/memory/rss_max_mb", round(self.rss_max, 1))
            if self.rss_limit and rss >= self.rss_limit:
                self._recycle("rss", f"RSS {rss:.0f} MB >= PRICEWATCH_RECYCLE_RSS_MB")
        hours = (time.monotonic() - self._started) / 3600
        if self.after_hours and hours >= self.after_hours:
            self._recycle("hours", f"{hours:.2f} h running (PRICEWATCH_RECYCLE_AFTER_HOURS)")

    def spider_closed(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.sample()
        stats = self.crawler.stats
        assert stats is not None
        opened = stats.get_value("pricewatch/browser/pages", 0)
        if opened:
            closed = stats.get_value("pricewatch/browser/pages_closed", 0)
            stats.set_value("pricewatch/browser/pages_open_at_close", max(0, opened - closed))
