"""Tiered fallback: a domain's official source, used when its circuit stays open.

When the circuit breaker defers a SKU (``DomainDeferred``) of a domain whose circuit has
been open for at least ``PRICEWATCH_FALLBACK_AFTER`` seconds, or that domain blocks one of
its requests while open (a failed probe), and that domain has an official source, the SKU
is fetched from that source instead, with the same lease: its observation is stored with
``source="api"``. The shop's own pages stay paused, and the breaker's probe still goes to
the shop, so the circuit can close.

A sample of the page offers of domains with an official source (``PRICEWATCH_FALLBACK_
CROSSCHECK``) is also checked against the source: a price (or currency) that differs by
more than ``PRICEWATCH_FALLBACK_TOLERANCE`` is logged and counted.

Settings (defaults and when to change them: ``pricewatch/settings.py``):
- ``PRICEWATCH_OFFICIAL_SOURCES``: domain -> source, e.g.::

      {"shop.example": {
          "url": "https://api.shop.example/v1/products/{sku}",  # {sku}, {url}, {domain}
          "price": "price.amount",          # dotted paths into the JSON answer
          "currency": "price.currency",
          "availability": "availability",   # optional
          "regular_price": "list_price",    # optional
          "headers": {"Accept": "application/json"},  # optional
      }}

  Without ``price``, the answer is read by the generic JSON reader
  (``pricewatch.extract.extract_offer_from_json``). ``{url}`` is the product URL,
  percent-encoded.
- ``PRICEWATCH_FALLBACK_AFTER``: how long a circuit must have been open.
- ``PRICEWATCH_FALLBACK_TOLERANCE``: relative price difference that counts as a
  disagreement between the page and the official source.
- ``PRICEWATCH_FALLBACK_CROSSCHECK``: fraction of page offers checked (0 = none).

Request.meta: ``pricewatch_fallback_official`` (set on requests to an official source), see
:mod:`pricewatch.meta`.

Stats: ``pricewatch/fallback/requests``, ``pricewatch/fallback/ok``,
``pricewatch/fallback/failed``, ``pricewatch/fallback/crosschecks``,
``pricewatch/fallback/agreements``, ``pricewatch/fallback/disagreements``.
"""

from __future__ import annotations

import json
import logging
import math
import random
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from string import Formatter
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.utils.httpobj import urlparse_cached

from pricewatch._urls import site_of
from pricewatch.audit import AuditTrail
from pricewatch.currency import resolve_currency
from pricewatch.exceptions import DomainDeferred
from pricewatch.extract import Offer, extract_offer_from_json, normalise_availability, parse_machine
from pricewatch.frontier import Completion, Lease
from pricewatch.items import OfferItem
from pricewatch.leases import CrawlResources
from pricewatch.meta import (
    DONT_BREAK_CIRCUIT_META,
    FALLBACK_DEFERRED_META,
    FALLBACK_OFFICIAL_META,
    FALLBACK_PAGE_META,
    LEASE_META,
)
from pricewatch.outcomes import Outcome
from pricewatch.politeness.breaker import CircuitBreakerMiddleware

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)

_PLACEHOLDERS = {"sku", "url", "domain"}
_PATH_KEYS = ("price", "currency", "availability", "regular_price")


@dataclass(frozen=True, slots=True)
class OfficialSource:
    domain: str
    url: str
    price: str | None = None
    currency: str | None = None
    availability: str | None = None
    regular_price: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, domain: str, raw: Any) -> OfficialSource:
        where = f"PRICEWATCH_OFFICIAL_SOURCES[{domain!r}]"
        if not isinstance(raw, Mapping) or not isinstance(raw.get("url"), str):
            raise ValueError(f"{where} must be a dict with a 'url' template, got {raw!r}")
        unknown = set(raw) - {"url", "headers", *_PATH_KEYS}
        if unknown:
            raise ValueError(f"{where} has unknown key(s) {sorted(unknown)}")
        try:
            names = {name for _, name, _, _ in Formatter().parse(raw["url"]) if name is not None}
        except ValueError as exc:
            raise ValueError(f"{where}['url'] is not a valid template: {exc}") from None
        if names - _PLACEHOLDERS or not names & {"sku", "url"}:
            raise ValueError(
                f"{where}['url'] must use {{sku}} or {{url}} (and only {sorted(_PLACEHOLDERS)}), "
                f"got {raw['url']!r}"
            )
        paths = {}
        for key in _PATH_KEYS:
            value = raw.get(key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"{where}[{key!r}] must be a dotted path, got {value!r}")
            paths[key] = value
        headers = raw.get("headers") or {}
        if not isinstance(headers, Mapping):
            raise ValueError(f"{where}['headers'] must be a dict, got {headers!r}")
        return cls(domain=domain.lower(), url=raw["url"], headers=dict(headers), **paths)

    def api_url(self, url: str, sku: str | None) -> str | None:
        """The source URL for one SKU; None when the template needs a SKU it lacks."""
        if sku is None and "{sku}" in self.url:
            return None
        return self.url.format(
            sku=quote(sku or "", safe=""), url=quote(url, safe=""), domain=self.domain
        )

    def parse(self, body: bytes, url: str) -> Offer | None:
        """The offer in the source's JSON answer about product ``url``, None without a
        valid price. Numbers are read as ``Decimal`` (never float)."""
        try:
            data = json.loads(body, parse_float=Decimal)
        except (ValueError, UnicodeDecodeError):
            return None
        if self.price is None:
            return extract_offer_from_json(body, url, source="api")
        price = parse_machine(dig(data, self.price))
        if price is None:
            return None
        currency = dig(data, self.currency) if self.currency else None
        return Offer(
            price=price,
            currency=resolve_currency(currency) if isinstance(currency, str) else None,
            regular_price=(
                parse_machine(dig(data, self.regular_price)) if self.regular_price else None
            ),
            availability=(
                normalise_availability(dig(data, self.availability)) if self.availability else None
            ),
            source="api",
            price_text=str(dig(data, self.price)),
        )


def dig(data: Any, path: str) -> Any:
    """``dig({"price": {"amount": 3}}, "price.amount") == 3``; list items by index
    (``offers.0.price``); None when any step is missing."""
    for step in path.strip().split("."):
        if isinstance(data, Mapping):
            data = data.get(step)
        elif isinstance(data, list) and step.isdigit() and int(step) < len(data):
            data = data[int(step)]
        else:
            return None
    return data


@dataclass(frozen=True, slots=True)
class FallbackConfig:
    sources: Mapping[str, OfficialSource]
    after: float
    tolerance: float
    crosscheck: float

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> FallbackConfig:
        raw = settings.getdict("PRICEWATCH_OFFICIAL_SOURCES")
        sources = {
            site_of(domain): OfficialSource.from_config(domain, spec)
            for domain, spec in raw.items()
        }
        config = cls(
            sources=sources,
            after=settings.getfloat("PRICEWATCH_FALLBACK_AFTER"),
            tolerance=settings.getfloat("PRICEWATCH_FALLBACK_TOLERANCE"),
            crosscheck=settings.getfloat("PRICEWATCH_FALLBACK_CROSSCHECK"),
        )
        if not (math.isfinite(config.after) and config.after >= 0):
            raise ValueError(f"PRICEWATCH_FALLBACK_AFTER must be >= 0, got {config.after}")
        if not (math.isfinite(config.tolerance) and config.tolerance >= 0):
            raise ValueError(f"PRICEWATCH_FALLBACK_TOLERANCE must be >= 0, got {config.tolerance}")
        if not 0 <= config.crosscheck <= 1:
            raise ValueError(
                f"PRICEWATCH_FALLBACK_CROSSCHECK must be between 0 and 1, got {config.crosscheck}"
            )
        return config


def disagree(page: Offer, api: Offer, tolerance: float) -> str | None:
    """Why the page's offer and the official one disagree, None when they agree."""
    if page.currency and api.currency and page.currency != api.currency:
        return f"currency {page.currency} vs {api.currency}"
    if page.price is None or api.price is None:
        return None
    diff = abs(page.price - api.price) / max(page.price, api.price)
    if diff > Decimal(str(tolerance)):
        return f"price {page.price} vs {api.price} ({diff:.2%})"
    return None


class _Official:
    """What both fallback middlewares share: the config, the stats, request building."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.config = FallbackConfig.from_settings(crawler.settings)
        assert crawler.stats is not None
        self.stats = crawler.stats

    def request(
        self, source: OfficialSource, url: str, sku: str | None, **kwargs: Any
    ) -> Request | None:
        api_url = source.api_url(url, sku)
        if api_url is None:
            return None
        meta = {
            DONT_BREAK_CIRCUIT_META: True,
            FALLBACK_OFFICIAL_META: True,
            "handle_httpstatus_all": True,
        }
        meta.update(kwargs.pop("meta", {}))
        return Request(api_url, headers=dict(source.headers), meta=meta, dont_filter=True, **kwargs)


class OfficialSourceMiddleware(_Official):
    """Downloader middleware (560): turns a deferral of a long-open domain into a fetch
    from its official source, for the same lease."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        if not self.config.sources:
            raise NotConfigured  # off unless configured: nothing to warn about

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> OfficialSourceMiddleware:
        return cls(crawler)

    def breaker(self) -> CircuitBreakerMiddleware | None:
        """The crawl's circuit breaker (whose open circuits this middleware answers)."""
        return self.crawler.get_downloader_middleware(CircuitBreakerMiddleware)

    def process_exception(self, request: Request, exception: Exception) -> Request | None:
        if not isinstance(exception, DomainDeferred):
            return None
        return self.alternative_for(request, exception)

    def alternative_for(self, request: Request, exception: Exception) -> Request | None:
        """The official-source request for the same lease, when the request's domain has
        a source and its circuit has been open long enough; else None. Called for
        deferrals (``process_exception``) and by the breaker for blocked responses of an
        open domain (such as a failed probe)."""
        if request.meta.get(FALLBACK_OFFICIAL_META):
            return None
        lease: Lease | None = request.meta.get(LEASE_META)
        if lease is None:
            return None
        source = self.config.sources.get(lease.domain)
        breaker = self.breaker()
        if source is None or breaker is None:
            return None
        open_for = breaker.open_for(lease.domain)
        if open_for is None or open_for < self.config.after:
            return None
        official = self.request(
            source,
            lease.url,
            lease.sku,
            callback=self.parse_official,
            errback=self.official_failed,
            priority=request.priority,
            meta={
                LEASE_META: lease,
                FALLBACK_DEFERRED_META: getattr(exception, "retry_after", None),
            },
        )
        if official is None:
            return None
        self.stats.inc_value("pricewatch/fallback/requests")
        AuditTrail.of(self.crawler).decision(
            request, "fallback", source_host=urlparse_cached(official).hostname
        )
        logger.debug("%s: fetching %s from its official source", lease.url, lease.sku)
        return official

    async def parse_official(self, response: Response) -> AsyncIterator[OfferItem]:
        lease: Lease = response.meta[LEASE_META]
        source = self.config.sources[lease.domain]
        offer = source.parse(response.body, lease.url) if response.status == 200 else None
        if offer is None or offer.price is None:
            await self._failed(lease, response.meta, f"HTTP {response.status}, no price")
            return
        self.stats.inc_value("pricewatch/fallback/ok")
        yield OfferItem.fetched(lease, offer)

    async def official_failed(self, failure: Failure) -> None:
        request: Request = failure.request  # type: ignore[attr-defined]
        await self._failed(request.meta[LEASE_META], request.meta, repr(failure.value))

    async def _failed(self, lease: Lease, meta: Mapping[str, Any], why: str) -> None:
        # The page was never fetched: the SKU is skipped, as the deferral would have done.
        self.stats.inc_value("pricewatch/fallback/failed")
        logger.info("Official source failed for %s: %s", lease.url, why)
        retry_after = meta.get(FALLBACK_DEFERRED_META)
        await CrawlResources.of(self.crawler).complete(
            [Completion(lease, Outcome.SKIPPED, retry_after=retry_after, reason="fallback_failed")]
        )


class OfficialCrossCheckMiddleware(_Official):
    """Spider middleware: checks a sample of page offers against the official source."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        if not self.config.sources or not self.config.crosscheck:
            raise NotConfigured  # off unless configured: nothing to warn about
        self.rng = random.Random()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> OfficialCrossCheckMiddleware:
        return cls(crawler)

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterable[Any]:
        for item in result:
            yield item
            check = self._check_for(item)
            if check is not None:
                yield check

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        async for item in result:
            yield item
            check = self._check_for(item)
            if check is not None:
                yield check

    def _check_for(self, item: Any) -> Request | None:
        if not self.config.crosscheck or not isinstance(item, OfferItem):
            return None
        if item.offer.source == "api" or item.offer.price is None:
            return None
        source = self.config.sources.get(item.domain)
        if source is None or self.rng.random() >= self.config.crosscheck:
            return None
        sku = item.offer.sku or (item.lease.sku if item.lease else None)
        request = self.request(
            source, item.url, sku, callback=self.compare, meta={FALLBACK_PAGE_META: item}
        )
        if request is not None:
            self.stats.inc_value("pricewatch/fallback/crosschecks")
        return request

    async def compare(self, response: Response) -> None:
        page: OfferItem = response.meta[FALLBACK_PAGE_META]
        source = self.config.sources[page.domain]
        official = source.parse(response.body, page.url) if response.status == 200 else None
        if official is None:
            return
        why = disagree(page.offer, official, self.config.tolerance)
        if why is None:
            self.stats.inc_value("pricewatch/fallback/agreements")
        else:
            self.stats.inc_value("pricewatch/fallback/disagreements")
            logger.warning("Page and official source disagree on %s: %s", page.url, why)
