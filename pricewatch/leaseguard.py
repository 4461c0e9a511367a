"""Every request that carries a lease ends it, also when a component drops the request.

Enabled in ``SPIDER_MIDDLEWARES``: ``LeaseDepartureMiddleware`` closest to the spider
(after every middleware that may drop a request) and ``LeaseArrivalMiddleware`` closest to
the engine (before all of them). No setting of its own.

Where Scrapy can lose a request, and who ends its lease then:

- a downloader middleware refuses it (robots.txt, offsite, too many redirects, the circuit
  breaker, a body over ``DOWNLOAD_MAXSIZE``): it raises ``IgnoreRequest`` or another error,
  which reaches the request's errback: the spider ends the lease;
- a spider middleware leaves it out of ``process_start()`` or ``process_spider_output()``
  (``UrlLengthMiddleware`` over ``URLLENGTH_LIMIT``, ``DepthMiddleware`` over
  ``DEPTH_LIMIT``, ...): no errback, no signal. ``LeaseDepartureMiddleware`` sees each request
  leave the spider; ``LeaseArrivalMiddleware`` sees those that reach the engine. The chain of
  middlewares is pulled one item at a time, so when the next item is asked for at the
  spider's side, a request that did not arrive was dropped: its lease ends as ``error``
  (reason ``dropped``), and the log names the request;
- the scheduler refuses it (``request_dropped`` signal, e.g. a dupefilter): its lease ends
  as ``error`` (reason ``dropped``).

Stats: ``pricewatch/reason/error/dropped`` (through ``CrawlResources.end``) and
``pricewatch/leaseguard/dropped/{spider_middleware,scheduler}``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals

from pricewatch.leases import CrawlResources
from pricewatch.meta import LEASE_META
from pricewatch.outcomes import Outcome

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from pricewatch.frontier import Lease

__all__ = ["LeaseArrivalMiddleware", "LeaseDepartureMiddleware"]

logger = logging.getLogger(__name__)


def _lease(item: Any) -> Lease | None:
    if isinstance(item, Request):
        lease: Lease | None = item.meta.get(LEASE_META)
        return lease
    return None


class LeaseDepartureMiddleware:
    """Closest to the spider: records each leased request leaving it, and ends the lease of
    one that never reached :class:`LeaseArrivalMiddleware` (see the module docstring)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        # Lease tokens of requests between the two middlewares, with their request.
        self.in_transit: dict[str, Request] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        crawler.signals.connect(self._request_dropped, signal=signals.request_dropped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for item in start:
            async for out in self._watch(item):
                yield out

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        async for item in result:
            async for out in self._watch(item):
                yield out

    async def _watch(self, item: Any) -> AsyncIterator[Any]:
        lease = _lease(item)
        if lease is None:
            yield item
            return
        self.in_transit[lease.token] = item
        yield item
        # Asked for the next item: this one reached the engine, or was dropped on the way.
        request = self.in_transit.pop(lease.token, None)
        if request is not None:
            await self._end(lease, request, "spider_middleware")

    def arrived(self, item: Any) -> None:
        lease = _lease(item)
        if lease is not None:
            self.in_transit.pop(lease.token, None)

    def _request_dropped(self, request: Request) -> None:
        lease = _lease(request)
        if lease is None:
            return
        task = asyncio.get_running_loop().create_task(self._end(lease, request, "scheduler"))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _end(self, lease: Lease, request: Request, where: str) -> None:
        stats = self.crawler.stats
        assert stats is not None
        stats.inc_value(f"pricewatch/leaseguard/dropped/{where}")
        logger.warning("%s dropped %s: its lease ends as error", where.replace("_", " "), request)
        await CrawlResources.of(self.crawler).end(lease, Outcome.ERROR, "dropped")


class LeaseArrivalMiddleware:
    """Closest to the engine: marks each leased request that got through every spider
    middleware (see :class:`LeaseDepartureMiddleware`)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._departure: LeaseDepartureMiddleware | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    @property
    def departure(self) -> LeaseDepartureMiddleware:
        if self._departure is None:
            departure = self.crawler.get_spider_middleware(LeaseDepartureMiddleware)
            if departure is None:
                raise RuntimeError(
                    "LeaseArrivalMiddleware needs LeaseDepartureMiddleware in SPIDER_MIDDLEWARES"
                )
            self._departure = departure
        return self._departure

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for item in start:
            self.departure.arrived(item)
            yield item

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        async for item in result:
            self.departure.arrived(item)
            yield item
