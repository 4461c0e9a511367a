"""The ``listings`` spider: traverse the listings that are due, adding the products found.

``start()`` claims due listings (``PRICEWATCH_LISTING_CONCURRENCY`` at once) from the
frontier's backend; each is traversed one page at a time, through the same downloader
middlewares as products (robots.txt, destinations, circuit breaker, backoff). After every
page the product URLs found are canonicalised and added to the frontier (idempotent: a
known URL keeps its schedule), then the traversal state is saved, which extends the lease:
a crash resumes at the saved cursor, refetching at most the page that was in flight. A
traversal that ends ``done`` retires the products its listing stopped listing
(:mod:`pricewatch.listings.delisting`). Cron mode: the crawl ends when no listing is due.

A ``scroll`` page that names no JSON endpoint in its markup (none configured, none saved)
is loaded once more, through the browser, and the endpoint is taken from the JSON the page
itself requests (:mod:`pricewatch.listings.xhr`); it is then followed over plain HTTP and
saved with the traversal state, so later traversals do not start the browser. The page is
watched for at most the browser router's ``PRICEWATCH_BROWSER_WAIT_TIMEOUT``.

Settings (defaults and when to change them: ``pricewatch/settings.py``):
``PRICEWATCH_LISTING_CONCURRENCY``, ``PRICEWATCH_LISTING_LEASE_TTL``,
``PRICEWATCH_LISTING_MAX_PAGES``, ``PRICEWATCH_LISTING_RETRY_DELAY``,
``PRICEWATCH_LISTING_MAX_FAILURES``, ``PRICEWATCH_LISTING_DELIST_AFTER``; Scrapy's
``DOWNLOAD_MAXSIZE`` bounds a gzip sitemap once unpacked, ``URLLENGTH_LIMIT`` the URLs added.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider, signals
from scrapy.http import Response
from scrapy.utils.httpobj import urlparse_cached
from twisted.python.failure import Failure

from pricewatch._http import parse_retry_after
from pricewatch._urls import BadURL
from pricewatch.browser import BrowserRouter
from pricewatch.exceptions import DestinationRefused, DomainDeferred, RobotsDisallowed
from pricewatch.frontier import Entry, Frontier
from pricewatch.frontier._entries import check_entry
from pricewatch.leases import CrawlResources
from pricewatch.listings import delisting
from pricewatch.listings.model import ListingLease, Traversal
from pricewatch.listings.parse import (
    Page,
    find_endpoint,
    parse_html,
    parse_json,
    parse_sitemap,
)
from pricewatch.listings.store import ListingStore, listing_store_from_settings
from pricewatch.listings.traversal import advance, begin, end, fetch_failed
from pricewatch.listings.xhr import EndpointCapture
from pricewatch.meta import LISTING_META, LISTING_XHR_META
from pricewatch.spiders.products import _failure_outcome

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

_WAIT = 0.25  # seconds start() waits for a traversal to end before claiming again
_GONE = {404, 410}
_RETRY = {401, 403, 429}

STATS = (
    "pricewatch/listing/claimed",  # listings leased by this crawl
    "pricewatch/listing/started",  # traversals begun
    "pricewatch/listing/resumed",  # traversals taken up at their saved cursor
    "pricewatch/listing/pages",  # listing pages fetched and read
    "pricewatch/listing/items",  # product URLs found (repeats included)
    "pricewatch/listing/new",  # of which new to the frontier
    "pricewatch/listing/short_page",  # short pages mid-listing (a warning each)
    "pricewatch/listing/end/<state>",  # traversals ended: done, looped, truncated, failed
    "pricewatch/listing/fetch_failed",  # pages that could not be fetched (retried later)
    "pricewatch/listing/deferred",  # pages put off by an open circuit
    "pricewatch/listing/lease_lost",  # saves refused: the lease had expired and moved on
    "pricewatch/listing/stalled",  # page requests never answered (dropped): left for later
    "pricewatch/listing/delisted",  # products retired with reason `delisted`
    "pricewatch/listing/reinstated",  # delisted products listed again
    "pricewatch/listing/bad_url",  # product URLs refused (not http(s), too long, ...)
    "pricewatch/listing/browser_pages",  # scroll pages loaded in the browser for their endpoint
    "pricewatch/listing/endpoint_found",  # endpoints found in the page's XHR (and saved)
    "pricewatch/listing/endpoint_saved",  # traversals that followed a saved endpoint
)


@dataclass(slots=True)
class Walk:
    """One traversal in progress: its lease and its state after the last saved page."""

    lease: ListingLease
    traversal: Traversal
    moved: float = 0.0  # time.monotonic() of its last saved step


class ListingSpider(Spider):
    name = "listings"

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> ListingSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        s = crawler.settings
        spider.concurrency = s.getint("PRICEWATCH_LISTING_CONCURRENCY")
        spider.ttl = s.getfloat("PRICEWATCH_LISTING_LEASE_TTL")
        spider.max_pages = s.getint("PRICEWATCH_LISTING_MAX_PAGES")
        spider.retry_delay = s.getfloat("PRICEWATCH_LISTING_RETRY_DELAY")
        spider.max_failures = s.getint("PRICEWATCH_LISTING_MAX_FAILURES")
        spider.delist_after = s.getint("PRICEWATCH_LISTING_DELIST_AFTER")
        spider.max_size = s.getint("DOWNLOAD_MAXSIZE")
        spider.max_url_length = s.getint("URLLENGTH_LIMIT")
        for name, value, low in (
            ("PRICEWATCH_LISTING_CONCURRENCY", spider.concurrency, 1),
            ("PRICEWATCH_LISTING_MAX_PAGES", spider.max_pages, 1),
            ("PRICEWATCH_LISTING_MAX_FAILURES", spider.max_failures, 1),
            ("PRICEWATCH_LISTING_DELIST_AFTER", spider.delist_after, 0),
        ):
            if value < low:
                raise ValueError(f"{name} must be >= {low}, got {value}")
        for name, fvalue in (
            ("PRICEWATCH_LISTING_LEASE_TTL", spider.ttl),
            ("PRICEWATCH_LISTING_RETRY_DELAY", spider.retry_delay),
        ):
            if fvalue <= 0:
                raise ValueError(f"{name} must be > 0, got {fvalue}")
        spider.resources = CrawlResources.of(crawler)
        spider.store = listing_store_from_settings(s)
        spider.active = {}
        crawler.signals.connect(spider._closed, signal=signals.spider_closed)
        return spider

    concurrency: int
    ttl: float
    max_pages: int
    retry_delay: float
    max_failures: int
    delist_after: int
    max_size: int
    max_url_length: int
    resources: CrawlResources
    store: ListingStore
    active: dict[str, Walk]
    _ended: asyncio.Event | None = None
    _frontier: Frontier | None = None

    def _inc(self, name: str, count: int = 1) -> None:
        assert self.crawler.stats is not None
        if count:
            self.crawler.stats.inc_value(name, count)

    async def _closed(self) -> None:
        await self.store.close()

    async def start(self) -> AsyncIterator[Any]:
        self._frontier = await self.resources.frontier()
        await self.store.open()
        self._ended = asyncio.Event()
        while True:
            room = self.concurrency - len(self.active)
            leases = await self.store.claim(room, self.ttl) if room > 0 else []
            self._inc("pricewatch/listing/claimed", len(leases))
            for lease in leases:
                request = await self._first(lease)
                if request is not None:
                    yield request
            if not leases and not self.active:
                return
            self._ended.clear()
            try:
                await asyncio.wait_for(self._ended.wait(), _WAIT)
            except TimeoutError:
                pass
            self._drop_stalled()

    def _drop_stalled(self) -> None:
        """A page request no callback or errback ever saw (a middleware dropped it) must
        not hold a cron crawl open: after a lease's length without a step the walk is let
        go; its lease expires and the next run resumes at the saved cursor."""
        limit = time.monotonic() - self.ttl
        for walk in [w for w in self.active.values() if w.moved < limit]:
            self._inc("pricewatch/listing/stalled")
            logger.warning(
                "Listing %s: no answer to %s for %.0fs; left for the next run",
                walk.lease.listing.url,
                walk.traversal.next_url,
                self.ttl,
            )
            self._stop(walk)

    async def _first(self, lease: ListingLease) -> Request | None:
        t = lease.traversal
        if t.state == "running" and t.next_url:
            self._inc("pricewatch/listing/resumed")
            logger.info("Resuming %s at page %d: %s", lease.listing.url, t.pages + 1, t.next_url)
        else:
            t = begin(lease.listing, t, time.time())
            self._inc("pricewatch/listing/started")
        walk = Walk(lease, t)
        if not await self._save(walk, t, due_in=None):
            return None
        self.active[lease.listing.url] = walk
        return self._request(walk)

    def _request(self, walk: Walk) -> Request:
        assert walk.traversal.next_url is not None
        return Request(
            walk.traversal.next_url,
            callback=self.parse_page,
            errback=self.page_failed,
            meta={LISTING_META: walk},
            dont_filter=True,
        )

    async def _save(self, walk: Walk, t: Traversal, *, due_in: float | None) -> bool:
        saved = await self.store.save(walk.lease, t, ttl=self.ttl, due_in=due_in)
        if not saved:
            self._inc("pricewatch/listing/lease_lost")
            logger.warning(
                "Listing %s: lease lost (expired and claimed again); stopping here",
                walk.lease.listing.url,
            )
            self._stop(walk)
            return False
        walk.traversal = t
        walk.moved = time.monotonic()
        return True

    def _stop(self, walk: Walk) -> None:
        self.active.pop(walk.lease.listing.url, None)
        if self._ended is not None:
            self._ended.set()

    # -- a page -----------------------------------------------------------------------------

    def read(self, walk: Walk, response: Response) -> Page:
        listing = walk.lease.listing
        options = listing.options
        body = response.body
        if listing.kind == "sitemap":
            return parse_sitemap(body, response.url, max_size=self.max_size)
        if listing.kind == "pages":
            return parse_html(body, response.url, options)
        if listing.kind == "scroll" and walk.traversal.pages == 0:
            endpoint = listing.option("endpoint")
            page = parse_html(body, response.url, options)
            found = response.urljoin(endpoint) if endpoint else find_endpoint(body, response.url)
            if found is None and walk.traversal.endpoint:
                found = walk.traversal.endpoint  # found in the browser by an earlier traversal
                self._inc("pricewatch/listing/endpoint_saved")
            return Page(items=page.items, endpoint=found)
        return parse_json(body, response.url, options)

    def _in_browser(self, walk: Walk, response: Response, page: Page) -> Request | Page:
        """A scroll page without an endpoint in its markup: the request that loads it in the
        browser to find one in its XHR, or, without a browser, the page that ends it."""
        router = BrowserRouter.of(self.crawler)
        if router.unavailable:
            if page.items:  # the page listed its products itself: those are the listing
                return page
            return replace(
                page,
                error="no JSON endpoint in the page's markup, and no browser to find one in "
                f"its requests ({router.unavailable}); give --endpoint",
            )
        capture = EndpointCapture(walk.lease.listing, page.items)
        host = (urlparse_cached(response).hostname or "").lower()
        meta = router.browser_meta(response.url, host, "listing", on_response=capture.on_response)
        meta.update({LISTING_META: walk, LISTING_XHR_META: capture})
        self._inc("pricewatch/listing/browser_pages")
        logger.info(
            "Listing %s: no JSON endpoint in the page's markup; loading it in the browser "
            "to find the one it requests",
            walk.lease.listing.url,
        )
        return Request(
            response.url,
            callback=self.parse_page,
            errback=self.page_failed,
            meta=meta,
            dont_filter=True,
        )

    async def _watched(self, walk: Walk, response: Response, capture: EndpointCapture) -> Page:
        """The scroll page loaded in the browser: its endpoint, from the JSON it requested."""
        router = BrowserRouter.of(self.crawler)
        try:
            page = response.meta.get("playwright_page")
            if page is not None:
                # Opened pages, as the router counts a product's (and release() closed ones).
                self._inc("pricewatch/browser/pages")
                await capture.wait(page, router.wait_timeout)
        finally:
            await router.release(response.meta)
        found = capture.endpoint()
        listing = walk.lease.listing
        if found is None:
            if capture.items:  # the page listed its products itself, and loads no more
                return Page(items=capture.items)
            return Page(error=capture.reason())
        self._inc("pricewatch/listing/endpoint_found")
        logger.info(
            "Listing %s: endpoint found in the page's requests: %s (%d products of %s on its "
            "first page); saved for the next traversals",
            listing.url,
            found.url,
            found.ours,
            listing.domain,
        )
        walk.traversal = replace(walk.traversal, endpoint=found.url)
        return Page(items=capture.items, endpoint=found.url)

    async def parse_page(self, response: Response) -> AsyncIterator[Request]:
        walk: Walk = response.meta[LISTING_META]
        listing = walk.lease.listing
        capture: EndpointCapture | None = response.meta.get(LISTING_XHR_META)
        watched = await self._watched(walk, response, capture) if capture is not None else None
        status = response.status
        if status in _GONE and walk.traversal.guessed:
            page = Page()  # past the last page of a listing numbered by guess: the end
        elif status in _GONE or status in _RETRY or status >= 500:
            retry_after = parse_retry_after(response.headers.get(b"Retry-After"))
            await self._failed(walk, f"http_{status}", retry_after, final=status in _GONE)
            return
        elif watched is not None:
            page = watched
        else:
            page = self.read(walk, response)
            if (
                listing.kind == "scroll"
                and walk.traversal.pages == 0
                and page.endpoint is None
                and page.error is None
            ):
                found = self._in_browser(walk, response, page)
                if isinstance(found, Request):
                    yield found  # the same page, in the browser: counted once, when read
                    return
                page = found
        new = await self._discovered(walk, page)
        self._inc("pricewatch/listing/pages")
        self._inc("pricewatch/listing/items", len(page.items))
        self._inc("pricewatch/listing/new", new)
        max_pages = self.max_pages
        if listing.option("max_pages"):
            max_pages = int(listing.options["max_pages"])
        step = advance(listing, walk.traversal, page, new=new, max_pages=max_pages, now=time.time())
        if step.short_page:
            self._inc("pricewatch/listing/short_page")
            logger.warning(
                "Listing %s: page %d had fewer items than the first page (%d) and more "
                "pages followed: the listing may have shifted under the traversal",
                listing.url,
                step.traversal.pages - 1,
                step.traversal.expected or 0,
            )
        t = step.traversal
        if t.ended:
            await self._finish(walk, t)
            return
        if t.next_url is not None and len(t.next_url) > self.max_url_length > 0:
            # Scrapy's UrlLengthMiddleware would drop the request without a word.
            await self._finish(walk, end(t, "failed", time.time(), "next page URL too long"))
            return
        if await self._save(walk, t, due_in=None):
            yield self._request(walk)

    async def _discovered(self, walk: Walk, page: Page) -> int:
        """Add the page's product URLs to the frontier; returns how many were new to it."""
        listing = walk.lease.listing
        entries: dict[str, Entry] = {}
        importance = float(listing.options.get("importance") or 1.0)
        # `top`: only the first products of the listing (its ranking) get the importance.
        top = int(listing.options.get("top") or 0)
        position = walk.traversal.items  # items before this page
        for offset, item in enumerate(page.items):
            weight = importance if not top or position + offset < top else 1.0
            try:
                entry, domain = check_entry(
                    Entry(item.url, item.sku, weight), max_length=self.max_url_length
                )
            except BadURL:
                self._inc("pricewatch/listing/bad_url")
                continue
            if domain != listing.domain:  # another site's page is not this shop's product
                continue
            entries.setdefault(entry.url, entry)
        if not entries:
            return 0
        assert self._frontier is not None
        fresh = await self.store.mark_members(listing.url, list(entries), walk.traversal.number)
        if not fresh:
            return 0
        # Only URLs new to this listing; a product the frontier knows (seeded, or found by
        # another listing) is left as it is: its schedule, SKU and importance.
        new = await self._frontier.add([entries[url] for url in fresh], keep_known=True)
        back = await self._frontier.reinstate(fresh, delisting.REASON)
        self._inc("pricewatch/listing/reinstated", back)
        return new

    async def _finish(self, walk: Walk, t: Traversal) -> None:
        listing = walk.lease.listing
        if t.state == "failed" and t.endpoint:
            # The saved endpoint may be what failed: the next traversal looks for it again.
            t = replace(t, endpoint=None)
        self._inc(f"pricewatch/listing/end/{t.state}")
        if t.state == "done" and self.delist_after:
            assert self._frontier is not None
            delisted = await delisting.delist(
                self.store, self._frontier, listing.url, t, self.delist_after
            )
            if delisted:
                self._inc("pricewatch/listing/delisted", delisted)
                t.last["delisted"] = delisted
        log = logger.info if t.state == "done" else logger.warning
        log(
            "Listing %s: traversal %d %s after %d pages, %d items (%d new, %d delisted)%s",
            listing.url,
            t.number,
            t.state,
            t.pages,
            t.items,
            t.new,
            t.last.get("delisted", 0),
            f": {t.error}" if t.error else "",
        )
        await self._save(walk, t, due_in=listing.every)
        self._stop(walk)

    async def _failed(
        self, walk: Walk, reason: str, retry_after: float | None, *, final: bool = False
    ) -> None:
        self._inc("pricewatch/listing/fetch_failed")
        now = time.time()
        t = walk.traversal
        if final:
            t = end(t, "failed", now, reason)
        else:
            t = fetch_failed(t, reason, max_failures=self.max_failures, now=now)
        if t.ended:
            await self._finish(walk, t)
            return
        logger.info(
            "Listing %s: %s, trying again from the same page later", walk.lease.listing.url, reason
        )
        await self._save(walk, t, due_in=max(retry_after or 0.0, self.retry_delay))
        self._stop(walk)

    async def page_failed(self, failure: Failure) -> None:
        request: Request = failure.request  # type: ignore[attr-defined]
        walk: Walk | None = request.meta.get(LISTING_META)
        if walk is None:
            return
        await BrowserRouter.of(self.crawler).release(request.meta, failed=True)
        exc = failure.value
        if isinstance(exc, DomainDeferred):  # circuit open: the same page, after the cooldown
            self._inc("pricewatch/listing/deferred")
            await self._save(walk, walk.traversal, due_in=max(exc.retry_after or 0.0, 1.0))
            self._stop(walk)
            return
        _outcome, reason, retry_after = _failure_outcome(exc)
        final = isinstance(exc, RobotsDisallowed | DestinationRefused) or reason in (
            "http_404",
            "http_410",
        )
        await self._failed(walk, reason, retry_after, final=final)
