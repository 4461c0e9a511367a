"""Components that drop marked requests the ways Scrapy components can, for
``tests/test_dropped.py``: a spider middleware leaving requests out of its output, a
downloader middleware ignoring them, a scheduler refusing them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response

from pricewatch.meta import BROWSER_META
from pricewatch.politeness.scheduler import BackoffScheduler

DROP_IN_START = "drop-in-start"
IGNORE_IN_DOWNLOAD = "ignore-in-download"
REFUSE_IN_SCHEDULER = "refuse-in-scheduler"


class DropMarkedSpiderMiddleware:
    """Leaves out start requests whose URL has ``DROP_IN_START`` and every browser retry a
    callback yields (``BROWSER_META`` ``retry``), as a filtering spider
    middleware (``UrlLengthMiddleware``, ``DepthMiddleware``) does: no errback, no signal."""

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for item in start:
            if isinstance(item, Request) and DROP_IN_START in item.url:
                continue
            yield item

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        async for item in result:
            if isinstance(item, Request) and item.meta.get(BROWSER_META) == "retry":
                continue
            yield item


class IgnoreMarkedDownloaderMiddleware:
    def process_request(self, request: Request) -> None:
        if IGNORE_IN_DOWNLOAD in request.url:
            raise IgnoreRequest("marked")


class RefuseMarkedScheduler(BackoffScheduler):
    def enqueue_request(self, request: Request) -> bool:
        if REFUSE_IN_SCHEDULER in request.url:
            return False
        return super().enqueue_request(request)
