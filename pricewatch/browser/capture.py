"""XHR/fetch capture: the offer from the JSON a page loads, before the page renders it.

One :class:`XhrCapture` per browser request, registered as the page's ``response`` event
handler (``playwright_page_event_handlers``) before navigation, so no response is missed.
Per-domain URL patterns (``PRICEWATCH_BROWSER_XHR_PATTERNS``) say which responses carry
the offer; without patterns, any XHR/fetch JSON response that is product-like (see
:func:`pricewatch.browser._signals.product_like`) is read and kept as a *candidate*, used
only once it is known to name the page's own product by SKU, name or URL
(:mod:`pricewatch.browser._identity`): a recommendation's or a featured product's JSON
never supplies the price.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pricewatch.browser._identity import PageIdentity, payload_identity
from pricewatch.browser._signals import product_like
from pricewatch.extract import Offer, extract_offer_from_json

logger = logging.getLogger(__name__)

XHR_TYPES = frozenset({"xhr", "fetch"})  # the resource types of a page's own API calls
MAX_JSON_BYTES = 2 * 1024 * 1024  # a JSON answer larger than this is not read


def too_large(headers: Mapping[str, str]) -> bool:
    """A response whose (lower-cased) headers announce more than ``MAX_JSON_BYTES``."""
    length = headers.get("content-length")
    return length is not None and length.isdigit() and int(length) > MAX_JSON_BYTES


class BodyReads:
    """The response bodies a page's ``response`` handler is reading; ``idle`` is set while
    it reads none, so a waiter knows every response seen so far has been read."""

    __slots__ = ("_count", "idle")

    def __init__(self) -> None:
        self._count = 0
        self.idle = asyncio.Event()
        self.idle.set()

    @contextmanager
    def reading(self) -> Iterator[None]:
        self._count += 1
        self.idle.clear()
        try:
            yield
        finally:
            self._count -= 1
            if not self._count:
                self.idle.set()


def _has_price_field(data: Any) -> bool:
    """A key naming a price at the top of ``data`` or one object down."""
    objects = [data, *(v for v in data.values() if isinstance(v, Mapping))]
    return any("price" in str(k).lower() for obj in objects for k in obj)


class XhrCapture:
    """Collects offers from a page's JSON responses. ``patterns`` None: product-like JSON
    from any URL; a sequence: only URLs matching one of them (empty: capture nothing)."""

    def __init__(
        self,
        url: str,
        patterns: Sequence[re.Pattern[str]] | None = None,
        domain_currency: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url
        self.patterns = patterns
        self.domain_currency = domain_currency
        self.offer: Offer | None = None  # with patterns: the first offer of a matching URL
        # Without patterns: product-like offers with the ids, names and URLs they carry.
        self.candidates: list[tuple[Offer, list[object], list[object], list[str]]] = []
        self._found = asyncio.Event()
        self._new = asyncio.Event()  # a candidate arrived
        self._reads = BodyReads()

    @property
    def enabled(self) -> bool:
        return self.patterns is None or bool(self.patterns)

    def wanted(self, url: str, resource_type: str, content_type: str) -> bool:
        if resource_type not in XHR_TYPES:
            return False
        if self.patterns is not None:
            return any(p.search(url) for p in self.patterns)
        return "json" in content_type.lower()

    async def on_response(self, response: Any) -> None:
        """The page's ``response`` event handler; never raises."""
        if self.offer is not None or not self.enabled:
            return
        try:
            request = response.request
            headers = response.headers  # lower-cased names
            if not self.wanted(
                response.url, request.resource_type, headers.get("content-type", "")
            ):
                return
            if response.status >= 400 or too_large(headers):
                return
        except Exception:  # a page closed under us: nothing to read
            return
        with self._reads.reading():
            try:
                body = await response.body()
                data = json.loads(body)
                self._read(data)
            except Exception as exc:  # closed page, bad JSON, anything: the DOM is the fallback
                logger.debug("Ignoring a JSON response of %s: %r", self.url, exc)

    def _read(self, data: Any) -> None:
        if self.patterns is None and not product_like(data):
            return
        offer = extract_offer_from_json(
            data, self.url, domain_currency=self.domain_currency, source="xhr"
        )
        if self.patterns is None:
            # Kept without a valid price too when it has a price field: the product's own
            # JSON saying it has none ("price on request") ends the wait (priceless_for).
            if (offer is None or offer.price is None) and not _has_price_field(data):
                return
            ids, names, urls = payload_identity(data)
            self.candidates.append((offer or Offer(source="xhr"), ids, names, urls))
            self._new.set()
            return
        if offer is None or offer.price is None:
            return
        if self.offer is None:
            self.offer = offer
            self._found.set()

    def offer_for(self, page: PageIdentity) -> Offer | None:
        """The captured offer of the page's product: with patterns, the first one; without,
        the first candidate naming the product ``page`` describes."""
        if self.offer is not None:
            return self.offer
        for offer, ids, names, urls in self.candidates:
            if offer.price is not None and page.names_product(ids, names, urls):
                return offer
        return None

    def priceless_for(self, page: PageIdentity) -> Offer | None:
        """The page product's own JSON offer that carries no valid price, if one came:
        the product's structured answer is "no price", not a price found elsewhere."""
        for offer, ids, names, urls in self.candidates:
            if offer.price is None and page.names_product(ids, names, urls):
                return offer
        return None

    def ignored(self, page: PageIdentity) -> int:
        """Candidates that do not name the page's product (another product's JSON)."""
        return sum(not page.names_product(i, n, u) for _, i, n, u in self.candidates)

    async def found(self) -> None:
        """Returns once an offer was captured (patterns) or a candidate arrived (none)."""
        if self.patterns is None:
            await self._new.wait()
            self._new.clear()
        else:
            await self._found.wait()

    async def settled(self) -> None:
        """Returns once no JSON response is being read (those already seen are done)."""
        await self._reads.idle.wait()
