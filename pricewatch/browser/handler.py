"""``LazyBrowserDownloadHandler``: plain HTTP, and scrapy-playwright only once it is needed.

Registered for ``http`` and ``https`` in ``DOWNLOAD_HANDLERS``. A request without
``playwright`` meta is downloaded by Scrapy's own HTTP/1.1 handler (this class is one).
scrapy-playwright's handler, which starts a Playwright driver (a Node.js process, about
0.6 s and 30 MB) as soon as the engine starts, is created when the first browser request
appears, once per crawl for both schemes, and closed with the crawl; a crawl of static
shops never starts a driver. Stat ``pricewatch/browser/handler_started``: 1 when it was.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler

from pricewatch._crawl import per_crawl

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler

logger = logging.getLogger(__name__)


class _SharedBrowserHandler:
    """The crawl's one scrapy-playwright handler, started on first use."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.handler: ScrapyPlaywrightDownloadHandler | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    @classmethod
    def of(cls, crawler: Crawler) -> _SharedBrowserHandler:
        return per_crawl(crawler, cls)

    async def get(self) -> ScrapyPlaywrightDownloadHandler:
        if self.handler is not None:
            return self.handler
        async with self._lock:
            if self.handler is None:
                if self._closed:
                    raise RuntimeError("the crawl's browser handler is closed")
                from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler

                handler = ScrapyPlaywrightDownloadHandler.from_crawler(self.crawler)
                # It launches Playwright from engine_started, which has fired already:
                # run what that signal would have run.
                await handler._maybe_launch_in_thread()
                self.handler = handler
                assert self.crawler.stats is not None
                self.crawler.stats.set_value("pricewatch/browser/handler_started", 1)
        return self.handler

    async def close(self) -> None:
        async with self._lock:
            self._closed = True
            handler, self.handler = self.handler, None
        if handler is not None:
            await handler.close()


class LazyBrowserDownloadHandler(HTTP11DownloadHandler):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self._browser = _SharedBrowserHandler.of(crawler)

    async def download_request(self, request: Request) -> Response:
        if request.meta.get("playwright"):
            handler = await self._browser.get()
            return await handler.download_request(request)
        return await super().download_request(request)

    async def close(self) -> None:
        await super().close()
        await self._browser.close()  # the first scheme to close closes it; then a no-op
