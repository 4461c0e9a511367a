"""The ``products`` spider: fetch the SKUs the frontier says are due.

``start()`` claims leases as downloader capacity frees up (never the whole frontier at
once), carries each lease in ``request.meta["pricewatch_lease"]`` and makes sure each
lease is completed exactly once: here when a page yields no offer or the fetch failed,
by the pipelines otherwise. Cron mode (default) ends when a claim found nothing it could
claim and started after every lease of this crawl had been completed (fetched, stored and
acknowledged); ``-a follow=1`` keeps polling.

Settings (defaults and when to change them: ``pricewatch/settings.py``):
- ``PRICEWATCH_FRONTIER_CLAIM_BATCH``: leases claimed per round trip.
- ``PRICEWATCH_FRONTIER_POLL_INTERVAL``: follow-mode poll period when idle.
- ``PRICEWATCH_MAX_OUTSTANDING``: leases this process fetches at once (claimed, fetch not
  ended); unset (None), twice ``CONCURRENT_REQUESTS``. Those waiting for the store are
  bounded by ``PRICEWATCH_STORE_MAX_BUFFER``.
- ``PRICEWATCH_DOMAIN_CURRENCY``: host -> ISO code for ambiguous currency symbols.
- ``PRICEWATCH_EXTRACT_RULES_FILE``: TOML file of per-host CSS/XPath rules, tried before
  the heuristics.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider
from scrapy.exceptions import (
    CloseSpider,
    DownloadCancelledError,
    DownloadTimeoutError,
    IgnoreRequest,
)
from scrapy.http import Response
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils._compression import _DecompressionMaxSizeExceeded
from twisted.python.failure import Failure

from pricewatch._http import parse_retry_after
from pricewatch.browser import BrowserRouter
from pricewatch.exceptions import (
    Blocked,
    DestinationRefused,
    DomainDeferred,
    ProxiesBenched,
    RobotsDisallowed,
)
from pricewatch.extract import NOT_FOUND, Rules, extract_offer, load_rules
from pricewatch.frontier import Completion, FrontierUnavailable, Lease
from pricewatch.items import OfferItem
from pricewatch.leases import CrawlResources
from pricewatch.meta import LEASE_META
from pricewatch.outcomes import Outcome
from pricewatch.recycle import WorkerRecycler
from pricewatch.runs import end_run

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

# How long start() waits, at most, for a completion or release while it fetches as many
# leases as it may.
_CAPACITY_WAIT = 0.05
# How long start() waits, at most, for a completion or release before claiming again when
# the frontier had nothing to hand out (a domain at its cap, or nothing due).
_DRAIN_WAIT = 0.25
# Backoff bounds while the frontier backend is unreachable mid-crawl, in seconds.
_FRONTIER_RETRY = (0.5, 30.0)

_GONE = {404, 410}
_BLOCKED = {401, 403, 429}


def max_outstanding(settings: BaseSettings) -> int:
    """``PRICEWATCH_MAX_OUTSTANDING``, or twice ``CONCURRENT_REQUESTS`` when it is None, so
    ``-s CONCURRENT_REQUESTS=8`` also lowers the leases held."""
    if settings.get("PRICEWATCH_MAX_OUTSTANDING") is None:
        return 2 * settings.getint("CONCURRENT_REQUESTS")
    return settings.getint("PRICEWATCH_MAX_OUTSTANDING")


class ProductSpider(Spider):
    name = "products"

    def __init__(self, *args: Any, follow: str | int | bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.follow = str(follow).lower() in {"1", "true", "yes", "on"}

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> ProductSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        spider.claim_batch = settings.getint("PRICEWATCH_FRONTIER_CLAIM_BATCH")
        spider.poll_interval = settings.getfloat("PRICEWATCH_FRONTIER_POLL_INTERVAL")
        spider.max_outstanding = max_outstanding(settings)
        spider.frontier_outage_timeout = settings.getfloat("PRICEWATCH_FRONTIER_OUTAGE_TIMEOUT")
        spider.domain_currency = {
            host.lower(): code.upper()
            for host, code in settings.getdict("PRICEWATCH_DOMAIN_CURRENCY").items()
        }
        spider.rules = load_rules(settings.get("PRICEWATCH_EXTRACT_RULES_FILE"))
        for name, value in (
            ("PRICEWATCH_FRONTIER_CLAIM_BATCH", spider.claim_batch),
            ("PRICEWATCH_MAX_OUTSTANDING", spider.max_outstanding),
        ):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if not spider.frontier_outage_timeout > 0:
            raise ValueError(
                "PRICEWATCH_FRONTIER_OUTAGE_TIMEOUT must be > 0, got "
                f"{spider.frontier_outage_timeout}"
            )
        spider.resources = CrawlResources.of(crawler)
        return spider

    claim_batch: int
    poll_interval: float
    max_outstanding: int
    frontier_outage_timeout: float
    domain_currency: dict[str, str]
    rules: Rules | None
    resources: CrawlResources

    async def start(self) -> AsyncIterator[Any]:
        frontier = await self.resources.frontier()
        reaped = await frontier.reap()
        if reaped:
            logger.info("Returned %d expired leases to the schedule", reaped)
        failures = 0
        down_since = 0.0
        settled = self.resources.settled
        recycler = WorkerRecycler.of(self.crawler)
        while True:
            if recycler.draining:
                # Recycling (pricewatch/recycle.py): claim nothing more; end once every
                # lease in hand is completed, as a cron run does.
                if not self.resources.outstanding:
                    return
                settled.clear()
                await self._wait(settled, _DRAIN_WAIT)
                continue
            room = min(self.max_outstanding - self.resources.fetching, recycler.allowance())
            if room <= 0:
                settled.clear()
                await self._wait(settled, _CAPACITY_WAIT)
                continue
            # Cleared before the claim: a completion or release landing while it runs sets
            # it again, so an empty claim is only final if nothing settled meanwhile.
            settled.clear()
            try:
                leases = await self.resources.claim(min(room, self.claim_batch))
                if not leases and not self.resources.outstanding and self.follow:
                    due_in = await frontier.next_due_in()
                    await asyncio.sleep(min(due_in or self.poll_interval, self.poll_interval))
                    await frontier.reap()
                    continue
                failures = 0
            except FrontierUnavailable as exc:
                if failures == 0:
                    down_since = time.monotonic()
                elif time.monotonic() - down_since > self.frontier_outage_timeout:
                    raise self._frontier_gone(exc) from exc
                failures += 1
                delay = min(_FRONTIER_RETRY[0] * 2**failures, _FRONTIER_RETRY[1])
                self.crawler.stats.inc_value("pricewatch/frontier/claim_failed")
                logger.warning("Frontier unavailable, retrying in %.1fs: %s", delay, exc)
                await asyncio.sleep(delay)
                continue
            if leases:
                for lease in leases:
                    try:
                        request = self.request_for(lease)
                    except Exception as exc:  # this SKU's URL fails, not the crawl
                        await self._unbuildable(lease, exc)
                        continue
                    yield request
                continue
            if self.resources.outstanding or settled.is_set():
                # Completions and releases free a domain's cap (and can make work due).
                await self._wait(settled, _DRAIN_WAIT)
                continue
            # Cron mode: the claim started after every lease of this crawl was completed
            # and found nothing it could claim.
            return

    def _frontier_gone(self, exc: FrontierUnavailable) -> CloseSpider:
        """The frontier has refused every claim for longer than the outage timeout: end
        the crawl (exit code 4) instead of retrying forever. Leases not acknowledged
        expire and are fetched again by the next run."""
        logger.error(
            "Frontier unreachable for more than %.0fs: ending the crawl; %d leases not "
            "acknowledged (they will be fetched again)",
            self.frontier_outage_timeout,
            self.resources.outstanding,
        )
        return end_run(
            self.crawler,
            "frontier_unavailable",
            f"frontier unreachable for more than {self.frontier_outage_timeout:g}s; "
            f"last error: {exc}",
        )

    @staticmethod
    async def _wait(event: asyncio.Event, seconds: float) -> None:
        try:
            await asyncio.wait_for(event.wait(), seconds)
        except TimeoutError:
            pass

    async def _unbuildable(self, lease: Lease, exc: Exception) -> None:
        # A URL no request can be built from (port out of range, bad host, ...) fails its
        # own SKU: `error`, backed off by the frontier like any failure and visible in the
        # stats and the log, while the crawl goes on with the other SKUs.
        logger.warning("Cannot fetch %s, its request cannot be built: %s", lease.url, exc)
        await self.resources.end(lease, Outcome.ERROR, "bad_url")

    def request_for(self, lease: Lease, *, browser: bool = False) -> Request:
        request = Request(
            lease.url,
            callback=self.parse,
            errback=self.errback,
            meta={LEASE_META: lease},
            dont_filter=True,
        )
        # JS-only domains (PRICEWATCH_JS_DOMAINS or learned) go through the browser;
        # `browser=True` is the one browser retry of a static miss (pricewatch.browser).
        return BrowserRouter.of(self.crawler).route(request, retry=browser)

    async def parse(self, response: Response) -> AsyncIterator[OfferItem | Request]:
        # A browser page is closed whatever happens below (pricewatch.browser).
        browser = BrowserRouter.of(self.crawler)
        await browser.refresh()  # routes learned by other workers, now and then
        try:
            async for result in self._handle(response, browser):
                yield result
        finally:
            await browser.release(response.meta)

    async def _handle(
        self, response: Response, browser: BrowserRouter
    ) -> AsyncIterator[OfferItem | Request]:
        lease: Lease = response.meta[LEASE_META]
        status = response.status
        if status in _GONE:
            await self.resources.end(lease, Outcome.GONE, f"http_{status}")
            return
        if status in _BLOCKED or status >= 500:
            retry_after = parse_retry_after(response.headers.get(b"Retry-After"))
            outcome = Outcome.BLOCKED if status in _BLOCKED else Outcome.ERROR
            await self.resources.end(lease, outcome, f"http_{status}", retry_after)
            return
        if browser.handles(response):  # XHR JSON first, else the rendered DOM
            offer = await browser.extract(response, rules=self.rules)
        else:
            offer = extract_offer(
                response.body,
                response.url,
                domain_currency=self.domain_currency,
                rules=self.rules,
            )
        if offer is None or offer.price is None:
            reason = offer.no_price_reason if offer is not None else None
            if reason is None and browser.should_retry(response):
                # Client-side rendering: one browser retry, same lease, completed by it.
                # (A page whose own structured offer refuses a price needs none.)
                yield self.request_for(lease, browser=True)
                return
            reason = reason or NOT_FOUND
            self.crawler.stats.inc_value(f"pricewatch/extract/no_price/{reason}")
            logger.debug("%s has no price: %s", lease.url, reason)
            await self._complete(lease, Outcome.NO_PRICE, reason=reason)
            return
        self.crawler.stats.inc_value(f"pricewatch/extract/source/{offer.source}")
        # The fetch is over: the lease stops counting against the domain's cap while the
        # offer goes through validation and the store (which completes it).
        self.resources.release(lease)
        yield OfferItem.fetched(lease, offer)

    async def errback(self, failure: Failure) -> None:
        request: Request = failure.request  # type: ignore[attr-defined]
        lease: Lease | None = request.meta.get(LEASE_META)
        if lease is None:
            return
        await BrowserRouter.of(self.crawler).release(request.meta, failed=True)
        outcome, reason, retry_after = _failure_outcome(failure.value)
        logger.debug("%s ended as %s (%s): %r", lease.url, outcome.value, reason, failure.value)
        await self.resources.end(lease, outcome, reason, retry_after)

    async def _complete(
        self,
        lease: Lease,
        outcome: Outcome,
        retry_after: float | None = None,
        reason: str | None = None,
    ) -> None:
        await self.resources.complete(
            [Completion(lease, outcome, retry_after=retry_after, reason=reason)]
        )


def _failure_outcome(exc: BaseException) -> tuple[Outcome, str, float | None]:
    """The outcome, reason and retry-after (seconds) of a request that failed with ``exc``."""
    if isinstance(exc, Blocked):
        return Outcome.BLOCKED, "blocked", exc.retry_after
    if isinstance(exc, ProxiesBenched):
        return Outcome.SKIPPED, "proxies_benched", exc.retry_after
    if isinstance(exc, DomainDeferred):
        return Outcome.SKIPPED, "circuit_open", exc.retry_after
    if isinstance(exc, RobotsDisallowed):
        return Outcome.SKIPPED, "robots_txt", None
    if isinstance(exc, DestinationRefused):  # a non-public address (PRICEWATCH_ALLOWED_NETWORKS)
        return Outcome.SKIPPED, "destination", None
    if isinstance(exc, HttpError):  # a status HTTPERROR_ALLOWED_CODES does not let in
        status = exc.response.status
        retry_after = parse_retry_after(exc.response.headers.get(b"Retry-After"))
        if status in _GONE:
            return Outcome.GONE, f"http_{status}", retry_after
        return Outcome.ERROR, f"http_{status}", retry_after
    if isinstance(exc, DownloadCancelledError) or isinstance(
        exc.__cause__, _DecompressionMaxSizeExceeded
    ):
        return Outcome.ERROR, "too_large", None  # DOWNLOAD_MAXSIZE, on the wire or unpacked
    if isinstance(exc, DownloadTimeoutError | TimeoutError):
        return Outcome.ERROR, "timeout", None  # DOWNLOAD_TIMEOUT: the whole transfer
    if isinstance(exc, IgnoreRequest):  # too many redirects, offsite, ...
        return Outcome.ERROR, "ignored", None
    return Outcome.ERROR, type(exc).__name__, None
