"""``extract_offer``: one page -> one :class:`Offer`, or None.

The page is parsed once (lxml) and every reader shares the tree: operator rules for the
host (source ``rule``), JSON-LD, microdata/RDFa-lite, OpenGraph/meta, then the visible
price heuristics. Structured data is trusted unless the visible page clearly contradicts
it; a visible-only price is kept only when its evidence is strong (no answer beats a wrong
one). Pure and total: never raises, never returns a non-positive or non-finite price.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from pricewatch.extract._candidate import Candidate
from pricewatch.extract._jsonld import jsonld_candidates, product_candidates
from pricewatch.extract._markup import (
    microdata_candidates,
    opengraph_candidate,
    rdfa_candidates,
)
from pricewatch.extract._money import (
    domain_currency,
    region_currency,
    resolve_currency,
    tld_currency,
)
from pricewatch.extract._tree import parse
from pricewatch.extract._visible import VisibleReading, read_visible
from pricewatch.extract.offer import Offer
from pricewatch.extract.rules import Rules, apply_rules

logger = logging.getLogger(__name__)

_STRUCTURED_ORDER = ("jsonld", "microdata", "opengraph")


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def extract_offer(
    body: bytes | str,
    url: str,
    *,
    domain_currency: Mapping[str, str] | None = None,
    rules: Rules | None = None,
) -> Offer | None:
    """The offer on the product page ``body`` served at ``url``.

    ``domain_currency`` maps hosts to ISO codes for ambiguous symbols (the
    ``PRICEWATCH_DOMAIN_CURRENCY`` setting); ``rules`` are the operator's per-domain
    selectors (:func:`pricewatch.extract.load_rules`). None when nothing useful is found.
    """
    try:
        return _extract(body, url or "", domain_currency, rules)
    except RecursionError:
        return None
    except Exception:  # extraction must never take the crawl down
        logger.exception("extraction failed on %s", url)
        return None


def _extract(
    body: bytes | str,
    url: str,
    domain_map: Mapping[str, str] | None,
    rules: Rules | None,
) -> Offer | None:
    if not isinstance(body, (bytes, str)):
        return None
    root = parse(body)
    if root is None:
        return None
    host = _host(url)
    hints = _currency_hints(root, host, domain_map)

    ruled = apply_rules(rules, root, host) if rules else None

    structured: list[Candidate] = []
    for data in jsonld_candidates(root):
        structured.extend(product_candidates(data, url, "jsonld"))
    structured.extend(microdata_candidates(root))
    structured.extend(rdfa_candidates(root))
    og = opengraph_candidate(root)
    if og is not None:
        structured.append(og)

    visible = read_visible(root, hints)
    return decide(ruled, structured, visible, hints)


def _currency_hints(
    root: Any, host: str, domain_map: Mapping[str, str] | None
) -> tuple[str | None, ...]:
    lang = root.get("lang") or root.get("xml:lang")
    return (
        domain_currency(host, domain_map),
        tld_currency(host),
        region_currency(lang),
    )


def _merge(primary: Candidate, others: list[Candidate]) -> Candidate:
    """Fill what ``primary`` lacks from the other readings (same product)."""
    for other in others:
        if other is primary:
            continue
        same_price = other.price is None or primary.price is None or other.price == primary.price
        if not primary.currency_raw and other.currency_raw and same_price:
            primary.currency_raw = other.currency_raw
        if primary.availability is None and other.availability is not None:
            primary.availability = other.availability
        if not primary.sku and other.sku:
            primary.sku = other.sku
        if not primary.gtin and other.gtin:
            primary.gtin = other.gtin
        if not primary.name and other.name:
            primary.name = other.name
        if primary.regular_price is None and other.regular_price is not None and same_price:
            primary.regular_price = other.regular_price
            primary.regular_price_text = other.regular_price_text
    return primary


def decide(
    ruled: Candidate | None,
    structured: list[Candidate],
    visible: VisibleReading,
    hints: tuple[str | None, ...],
) -> Offer | None:
    """Pick the price by evidence and assemble the offer."""
    priced = [c for c in structured if c.price is not None]
    chosen: Candidate | None = None
    if ruled is not None and ruled.price is not None:
        chosen = ruled
    elif priced:
        priced.sort(key=lambda c: _STRUCTURED_ORDER.index(c.source))
        chosen = priced[0]
        chosen = _check_against_visible(chosen, priced, visible)
    if chosen is None:
        chosen = visible.as_candidate()
    if chosen is None:
        useful = [c for c in structured if c.useful()]
        if ruled is not None and ruled.useful():
            useful.insert(0, ruled)
        if not useful:
            return None
        chosen = Candidate(source=useful[0].source)
        _merge(chosen, useful)
        chosen.price = None
        chosen.regular_price = None
    else:
        _merge(chosen, ([ruled] if ruled is not None else []) + structured)
    if chosen.price is not None and chosen.regular_price is None and visible.regular is not None:
        if visible.regular > chosen.price:
            chosen.regular_price = visible.regular
            chosen.regular_price_text = visible.regular_text
    if chosen.regular_price is not None and (
        chosen.price is None or chosen.regular_price <= chosen.price
    ):
        chosen.regular_price = None
        chosen.regular_price_text = None
    availability = chosen.availability
    if visible.availability == "OutOfStock" and chosen.source in ("visible",):
        availability = "OutOfStock"
    if availability is None:
        availability = visible.availability
    if availability is None and chosen.price is not None:
        availability = "InStock" if visible.buy_button else None
    currency = resolve_currency(chosen.currency_raw, hints)
    if currency is None and chosen.price is not None:
        currency = visible.currency or next((h for h in hints if h), None)
    if chosen.price is None and availability is None and not chosen.sku:
        return None
    return Offer(
        price=chosen.price,
        currency=currency if chosen.price is not None else None,
        regular_price=chosen.regular_price,
        availability=availability,
        sku=chosen.sku,
        gtin=chosen.gtin,
        name=chosen.name or visible.title,
        source=chosen.source,
        price_text=chosen.price_text,
        regular_price_text=chosen.regular_price_text,
    )


def _check_against_visible(
    chosen: Candidate, priced: list[Candidate], visible: VisibleReading
) -> Candidate:
    """Keep the markup price unless the visible page clearly shows another one."""
    if visible.price is None or visible.price == chosen.price:
        return chosen
    shown = visible.amounts
    if chosen.price in shown:
        return chosen
    # Another structured reading that the page shows wins over one it does not show.
    for other in priced[1:]:
        if other.price in shown:
            return other
    if visible.strong and all(c.price not in shown for c in priced):
        if any(_close(visible.price, alt) for alt in chosen.alternatives):
            cand = visible.as_candidate()
            if cand is not None:
                cand.source = chosen.source
                return cand
    return chosen


def _close(a: Decimal, b: Decimal) -> bool:
    return a == b
