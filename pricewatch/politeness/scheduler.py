"""A Scrapy scheduler that holds back requests until their ``not before`` time.

Enabled with ``SCHEDULER = "pricewatch.politeness.scheduler.BackoffScheduler"``; the
backoff retry middleware requires it.

A request whose ``Request.meta["pricewatch_not_before"]`` (``time.monotonic()`` seconds)
is in the future waits here, in a heap, instead of in the downloader. So a retry waiting
for its backoff holds no download slot and no share of ``CONCURRENT_REQUESTS``: other
domains keep their pace meanwhile. When its time comes it is handed back to the engine
(``engine.crawl``) and queued like any other request.

Settings: those of Scrapy's ``Scheduler``; nothing of its own.

Stats: ``pricewatch/backoff/held`` (requests held back), ``pricewatch/backoff/released``,
``pricewatch/backoff/abandoned`` (still held when the crawl closed: their leases expire
and the frontier hands them out again).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy.core.scheduler import Scheduler
from scrapy.utils.asyncio import CallLaterResult, call_later

from pricewatch.meta import NOT_BEFORE_META

if TYPE_CHECKING:
    from scrapy.http import Request

logger = logging.getLogger(__name__)


class BackoffScheduler(Scheduler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: list[tuple[float, int, Request]] = []
        self._seq = itertools.count()
        self._timer: CallLaterResult | None = None
        self._timer_at = 0.0
        self.clock = time.monotonic

    def enqueue_request(self, request: Request) -> bool:
        not_before = request.meta.get(NOT_BEFORE_META)
        if not_before is None or not_before <= self.clock():
            return super().enqueue_request(request)
        heapq.heappush(self._held, (float(not_before), next(self._seq), request))
        self._inc("pricewatch/backoff/held")
        self._arm()
        return True

    def has_pending_requests(self) -> bool:
        return bool(self._held) or super().has_pending_requests()

    def __len__(self) -> int:
        return super().__len__() + len(self._held)

    def close(self, reason: str) -> Any:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._held:
            self._inc("pricewatch/backoff/abandoned", len(self._held))
            logger.info(
                "%d request(s) were still waiting for their backoff when the crawl closed; "
                "their leases will expire and be fetched again",
                len(self._held),
            )
            self._held.clear()
        return super().close(reason)

    def _arm(self) -> None:
        """Make sure a timer fires at the earliest not-before time."""
        if not self._held:
            return
        at = self._held[0][0]
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer_at = at
        self._timer = call_later(max(at - self.clock(), 0.0), self._release)

    def _release(self) -> None:
        self._timer = None
        now = self.clock()
        due: list[Request] = []
        while self._held and self._held[0][0] <= now:
            due.append(heapq.heappop(self._held)[2])
        try:
            engine = self.crawler.engine if self.crawler is not None else None
        except RuntimeError:  # no crawl running (the scheduler used on its own)
            engine = None
        for request in due:
            self._inc("pricewatch/backoff/released")
            if engine is not None and engine.spider is not None:
                engine.crawl(request)  # queued (time has come) and the engine woken up
            else:
                super().enqueue_request(request)
        self._arm()

    def _inc(self, key: str, count: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(key, count)
