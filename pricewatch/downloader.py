"""A Scrapy downloader whose per-slot concurrency limit holds under the asyncio reactor.

Enabled with ``DOWNLOADER = "pricewatch.downloader.SlotAccountingDownloader"``.

Settings read (Scrapy's own, unchanged): ``CONCURRENT_REQUESTS_PER_DOMAIN``,
``CONCURRENT_REQUESTS_PER_IP``, ``DOWNLOAD_SLOTS`` (per-slot ``concurrency``/``delay``).

The defect it fixes (see ``docs/per-domain-concurrency.md``): Scrapy's
``Downloader._process_queue`` hands queued requests to downloads while
``slot.free_transfer_slots() > 0``, but a request is only added to
``slot.transferring`` once its download coroutine starts running. With the asyncio
reactor that coroutine is scheduled with ``loop.create_task()`` and starts on a later
loop iteration, so within one ``_process_queue`` call the free count never goes down
and the whole slot queue (up to ``CONCURRENT_REQUESTS``) goes out at once. This class
counts the request as transferring at the moment it leaves the queue, synchronously,
which is what the loop condition assumes.

A second defect, in the pace of a slot with a delay: Scrapy draws the jittered delay
(``DOWNLOAD_DELAY`` x uniform(1 - ``DOWNLOAD_DELAY_JITTER``, 1 + ``DOWNLOAD_DELAY_JITTER``))
again at every look at the queue, and each time the timer set for the previous draw fires,
a new draw longer than the time already waited sets a new timer; the request goes out at the
first draw shorter than the wait. The gap between two requests is then the largest of
several draws: 0.244 s on average for a delay of 0.2 s and a jitter of 0.5 (a simulation of
that loop), a host held to 0.82 of the pace its delay allows. Here the delay is drawn once
per gap, when the slot sends a request, and kept until the next one leaves, so the gaps
average ``DOWNLOAD_DELAY`` as its documentation says.

Transfer gates: a downloader middleware may define ``before_transfer(request)``. It is
called when the request leaves its slot queue, right before the transfer starts, and may
raise (e.g. ``DomainDeferred`` when the domain's circuit opened while the request waited
in the queue: ``process_request`` ran before it was queued, so it cannot know). The
exception fails that request's download as any download error does (the middlewares'
``process_exception``, then the request's errback), and the slot moves on.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from time import monotonic
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.core.downloader import Downloader
from scrapy.utils.asyncio import call_later
from scrapy.utils.defer import _schedule_coro
from twisted.python.failure import Failure

if TYPE_CHECKING:
    from scrapy.core.downloader import Slot
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from twisted.internet.defer import Deferred

__all__ = ["SlotAccountingDownloader"]


class SlotAccountingDownloader(Downloader):
    """``scrapy.core.downloader.Downloader`` with a request counted against its slot's
    concurrency from the moment it is taken off the slot queue, not from the moment its
    download task first runs, and with transfer gates (see the module docstring)."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.gaps: dict[Slot, float] = {}  # slot -> the delay drawn for its next request
        self.transfer_gates: list[Callable[[Request], None]] = [
            mw.before_transfer
            for mw in self.middleware.middlewares
            if callable(getattr(mw, "before_transfer", None))
        ]

    def _process_queue(self, slot: Slot) -> None:
        """Scrapy's ``Downloader._process_queue`` with the delay drawn once per gap (see
        the module docstring); everything else as Scrapy does it."""
        if slot.latercall or not slot.queue:
            return
        now = monotonic()
        delay = self.gaps.get(slot)
        if delay is None:
            delay = self.gaps[slot] = slot.download_delay()
        if delay:
            penalty = delay - now + slot.lastseen
            if penalty > 0:
                slot.latercall = call_later(penalty, self._latercall, slot)
                return
        while slot.queue and slot.free_transfer_slots() > 0:
            slot.lastseen = now
            self.gaps.pop(slot, None)  # the next gap gets its own draw
            request, queue_dfd = slot.queue.popleft()
            _schedule_coro(self._wait_for_download(slot, request, queue_dfd))
            if delay:  # one request per gap: the next waits for its own delay
                self._process_queue(slot)
                break

    def _wait_for_download(  # type: ignore[override]
        self, slot: Slot, request: Request, queue_dfd: Deferred[Response]
    ) -> Coroutine[Any, Any, None]:
        # Called synchronously by _process_queue() right after popping the request, before
        # it re-checks slot.free_transfer_slots(): reserve the transfer slot now. The
        # parent's _download() adds the same request again (a set: no-op) and removes it
        # when the download ends, which releases the reservation.
        for gate in self.transfer_gates:
            try:
                gate(request)
            except Exception:
                # Not transferred: the slot stays free for the next queued request.
                return self._refuse(request, queue_dfd, Failure())
        slot.transferring.add(request)
        return super()._wait_for_download(slot, request, queue_dfd)

    async def _refuse(
        self, request: Request, queue_dfd: Deferred[Response], failure: Failure
    ) -> None:
        queue_dfd.errback(failure)  # awaited in _enqueue_request()
        self.signals.send_catch_log(
            signal=signals.request_left_downloader, request=request, spider=self.crawler.spider
        )
