"""``Progress``: a live line of where a crawl is, for an operator watching a terminal.

Every ``PRICEWATCH_PROGRESS_INTERVAL`` seconds it redraws one line on stderr::

    claimed 1,240 · stored 1,180 · no price 12 · failed 9 · in flight 39 · due 8,761

(claimed from the frontier, offers stored, fetches without a price, fetches ``blocked`` or
``error``, leases held now, and entries due in the whole frontier). Log records are written
above it: the line is cleared before each one and drawn again on the next tick.

Settings:
- ``PRICEWATCH_PROGRESS``: ``"auto"`` (draw only when stderr is a terminal: cron, scrapyd
  and pipes stay quiet), ``"on"`` or ``"off"``.
- ``PRICEWATCH_PROGRESS_INTERVAL``: seconds between two redraws.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import TYPE_CHECKING, TextIO

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.log import get_scrapy_root_handler

from pricewatch.frontier import FrontierUnavailable
from pricewatch.leases import CrawlResources
from pricewatch.outcomes import Outcome

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

_CLEAR = "\r\x1b[K"
_MODES = ("auto", "on", "off")


class _ClearLine(logging.Filter):
    """Clears the progress line before a log record is written below it."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self.progress = progress

    def filter(self, record: logging.LogRecord) -> bool:
        self.progress.clear()
        return True


class Progress:
    def __init__(self, crawler: Crawler, stream: TextIO | None = None) -> None:
        settings = crawler.settings
        mode = settings.get("PRICEWATCH_PROGRESS")
        if mode not in _MODES:
            raise ValueError(f"PRICEWATCH_PROGRESS must be one of {_MODES}, got {mode!r}")
        self.interval = settings.getfloat("PRICEWATCH_PROGRESS_INTERVAL")
        if self.interval <= 0:
            raise ValueError(f"PRICEWATCH_PROGRESS_INTERVAL must be > 0, got {self.interval}")
        self.stream = stream or sys.stderr
        if mode == "off" or (mode == "auto" and not self.stream.isatty()):
            raise NotConfigured
        self.crawler = crawler
        self._drawn = False
        self._task: asyncio.Task[None] | None = None
        self._filter = _ClearLine(self)
        crawler.signals.connect(self.engine_started, signal=signals.engine_started)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Progress:
        return cls(crawler)

    def engine_started(self) -> None:
        handler = get_scrapy_root_handler()
        if handler is not None:
            handler.addFilter(self._filter)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def spider_closed(self) -> None:
        if self._task is not None:
            self._task.cancel()
        handler = get_scrapy_root_handler()
        if handler is not None:
            handler.removeFilter(self._filter)
        self.clear()

    async def _run(self) -> None:
        resources = CrawlResources.of(self.crawler)
        while True:
            await asyncio.sleep(self.interval)
            try:
                frontier = await resources.frontier()
                due: int | str = sum(c.due for c in await frontier.counts())
            except FrontierUnavailable:
                frontier, due = None, "?"
            claimed = frontier.stats.get("pricewatch/frontier/claimed", 0) if frontier else 0
            self.draw(claimed, resources.outstanding, due)

    def draw(self, claimed: int, inflight: int, due: int | str) -> None:
        stats = self.crawler.stats
        assert stats is not None

        def outcome(*outcomes: Outcome) -> int:
            return sum(int(stats.get_value(f"pricewatch/outcome/{o.value}", 0)) for o in outcomes)

        due_text = f"{due:,}" if isinstance(due, int) else due
        line = (
            f"claimed {claimed:,} · stored {outcome(Outcome.OK):,} · "
            f"no price {outcome(Outcome.NO_PRICE):,} · "
            f"failed {outcome(Outcome.BLOCKED, Outcome.ERROR):,} · "
            f"in flight {inflight:,} · due {due_text}"
        )
        self.stream.write(_CLEAR + line)
        self.stream.flush()
        self._drawn = True

    def clear(self) -> None:
        if self._drawn:
            self.stream.write(_CLEAR)
            self.stream.flush()
            self._drawn = False
