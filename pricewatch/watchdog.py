"""The reactor watchdog: how late the event loop runs, and what held it up.

Everything of a crawl (downloads, extraction, the frontier, the store) shares one event
loop; a blocking call anywhere (a synchronous HTTP client in a pipeline, a huge regular
expression, a disk write on the loop) stalls all of it, and shows only as "the crawl got
slow". The watchdog measures it continuously and names the culprit:

- **Lag.** A timer scheduled every ``PRICEWATCH_WATCHDOG_INTERVAL`` seconds records how
  late it actually ran (its drift): stats ``pricewatch/watchdog/lag_p50_ms``,
  ``lag_p99_ms`` and ``lag_max_ms`` over the whole crawl (1 ms buckets), ``samples``.
- **Stalls.** A daemon thread wakes every quarter of ``PRICEWATCH_WATCHDOG_THRESHOLD``;
  when the timer has not run for longer than the threshold, it samples the stack of the
  event loop's thread (``sys._current_frames``) while the loop is still blocked and logs a
  WARNING naming the innermost frame (function, file and line) with the stack, at most once
  per ``PRICEWATCH_WATCHDOG_LOG_INTERVAL`` seconds (the next warning says how many were
  left out). Stat ``pricewatch/watchdog/stalls`` counts every timer tick later than the
  threshold, logged or not. The warning comes from the thread, so a loop that never comes
  back (a deadlock) is still reported.

The cost is one timer callback per interval on the loop (about 10 µs) and a thread that
sleeps. Settings (defaults in ``pricewatch/settings.py``): ``PRICEWATCH_WATCHDOG_ENABLED``,
``PRICEWATCH_WATCHDOG_INTERVAL``, ``PRICEWATCH_WATCHDOG_THRESHOLD``,
``PRICEWATCH_WATCHDOG_LOG_INTERVAL``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback
from collections import Counter
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured

if TYPE_CHECKING:
    from types import FrameType

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

STATS = (
    "pricewatch/watchdog/lag_p50_ms",
    "pricewatch/watchdog/lag_p99_ms",
    "pricewatch/watchdog/lag_max_ms",
    "pricewatch/watchdog/samples",
    "pricewatch/watchdog/stalls",
)
# Frames shown in the warning, innermost last.
STACK_DEPTH = 12
# Stats are refreshed every this many ticks (and at close).
_PUBLISH_EVERY = 20


def percentile(histogram: Counter[int], fraction: float) -> int:
    """The ``fraction`` quantile of a histogram of whole milliseconds (0 when empty)."""
    total = sum(histogram.values())
    if not total:
        return 0
    rank = fraction * total
    seen = 0
    for value in sorted(histogram):
        seen += histogram[value]
        if seen >= rank:
            return value
    return max(histogram)


def describe_stack(frame: FrameType | None) -> tuple[str, str]:
    """The innermost frame as ``function (file:line)``, and the stack as text."""
    if frame is None:
        return "an unknown frame", ""
    summary = traceback.extract_stack(frame, limit=STACK_DEPTH)
    if not summary:
        return "an unknown frame", ""
    inner = summary[-1]
    where = f"{inner.name} ({inner.filename}:{inner.lineno})"
    return where, "".join(traceback.format_list(summary)).rstrip()


class ReactorWatchdog:
    """The extension (``EXTENSIONS``)."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("PRICEWATCH_WATCHDOG_ENABLED"):
            raise NotConfigured
        self.crawler = crawler
        self.interval = settings.getfloat("PRICEWATCH_WATCHDOG_INTERVAL")
        self.threshold = settings.getfloat("PRICEWATCH_WATCHDOG_THRESHOLD")
        self.log_interval = settings.getfloat("PRICEWATCH_WATCHDOG_LOG_INTERVAL")
        for name, value, low in (
            ("PRICEWATCH_WATCHDOG_INTERVAL", self.interval, 0.001),
            ("PRICEWATCH_WATCHDOG_THRESHOLD", self.threshold, 0.001),
            ("PRICEWATCH_WATCHDOG_LOG_INTERVAL", self.log_interval, 0),
        ):
            if value < low:
                raise ValueError(f"{name} must be >= {low}, got {value}")
        self.histogram: Counter[int] = Counter()
        self.max_ms = 0
        self.stalls = 0
        self._ticks = 0
        self._due = 0.0  # monotonic time the next tick is due
        self._beat = 0.0  # monotonic time of the last tick (read by the sampler thread)
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._sampler: threading.Thread | None = None
        self._stop = threading.Event()
        self._reported_beat = -1.0  # the stall already sampled (one warning per stall)
        self._last_warning = float("-inf")
        self._untold = 0  # stalls not logged since the last warning (rate limit)
        crawler.signals.connect(self.engine_started, signal=signals.engine_started)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ReactorWatchdog:
        return cls(crawler)

    # -- on the event loop ---------------------------------------------------------------

    def engine_started(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        now = time.monotonic()
        self._beat = now
        self._due = now + self.interval
        self._handle = self._loop.call_at(self._loop_time(self._due), self._tick)
        self._sampler = threading.Thread(
            target=self._sample_loop, name="pricewatch-watchdog", daemon=True
        )
        self._sampler.start()

    def _loop_time(self, monotonic: float) -> float:
        assert self._loop is not None
        return self._loop.time() + (monotonic - time.monotonic())

    def _tick(self) -> None:
        now = time.monotonic()
        lag = max(0.0, now - self._due)
        self._beat = now
        lag_ms = int(lag * 1000 + 0.5)
        self.histogram[lag_ms] += 1
        self.max_ms = max(self.max_ms, lag_ms)
        if lag > self.threshold:
            self.stalls += 1
        self._ticks += 1
        if self._ticks % _PUBLISH_EVERY == 0:
            self.publish()
        self._due = now + self.interval
        assert self._loop is not None
        self._handle = self._loop.call_later(self.interval, self._tick)

    def publish(self) -> None:
        stats = self.crawler.stats
        assert stats is not None
        stats.set_value("pricewatch/watchdog/lag_p50_ms", percentile(self.histogram, 0.5))
        stats.set_value("pricewatch/watchdog/lag_p99_ms", percentile(self.histogram, 0.99))
        stats.set_value("pricewatch/watchdog/lag_max_ms", self.max_ms)
        stats.set_value("pricewatch/watchdog/samples", sum(self.histogram.values()))
        stats.set_value("pricewatch/watchdog/stalls", self.stalls)

    def spider_closed(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._sampler is not None:
            self._sampler.join(timeout=1.0)
        self.publish()

    # -- on the sampler thread -----------------------------------------------------------

    def _sample_loop(self) -> None:
        period = max(self.threshold / 4, 0.001)
        while not self._stop.wait(period):
            beat = self._beat
            late = time.monotonic() - beat - self.interval
            if late <= self.threshold or beat == self._reported_beat:
                continue
            self._reported_beat = beat
            assert self._loop_thread is not None
            frame = sys._current_frames().get(self._loop_thread)
            where, stack = describe_stack(frame)
            del frame
            now = time.monotonic()
            if now - self._last_warning < self.log_interval:
                self._untold += 1
                continue
            untold, self._untold = self._untold, 0
            self._last_warning = now
            logger.warning(
                "Event loop blocked for %.2f s so far (PRICEWATCH_WATCHDOG_THRESHOLD %.2f s), "
                "running %s%s; the event loop's stack, most recent call last:\n%s",
                late,
                self.threshold,
                where,
                f" ({untold} earlier stalls not logged)" if untold else "",
                stack,
            )
