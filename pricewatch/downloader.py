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

Transfer gates: a downloader middleware may define ``before_transfer(request)``. It is
called when the request leaves its slot queue, right before the transfer starts, and may
raise (e.g. ``DomainDeferred`` when the domain's circuit opened while the request waited
in the queue: ``process_request`` ran before it was queued, so it cannot know). The
exception fails that request's download as any download error does (the middlewares'
``process_exception``, then the request's errback), and the slot moves on.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.core.downloader import Downloader
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
        self.transfer_gates: list[Callable[[Request], None]] = [
            mw.before_transfer
            for mw in self.middleware.middlewares
            if callable(getattr(mw, "before_transfer", None))
        ]

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
