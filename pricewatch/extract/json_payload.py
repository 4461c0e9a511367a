"""``extract_offer_from_json``: an offer from a JSON payload (intercepted XHR, official API).

schema.org-shaped payloads (a ``Product`` with ``offers``) are read like JSON-LD. Other
payloads are searched for the shallowest object carrying a price key (``price``,
``salePrice``, ``currentPrice``, ``finalPrice``, ... or a ``price`` object with
``value``/``amount``/``current``), with its currency, list price, stock flag, SKU and name
from the same object. Never raises; None when no price or stock state is found.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from pricewatch.currency import currency_hints, resolve_currency
from pricewatch.extract._candidate import (
    Candidate,
    clean_text,
    normalise_availability,
    valid_gtin,
)
from pricewatch.extract._jsonld import product_candidates
from pricewatch.extract._money import PRICE_MISSING, parse_machine, read_machine
from pricewatch.extract.offer import Offer

logger = logging.getLogger(__name__)

_PRICE_KEYS = (
    "saleprice",
    "currentprice",
    "finalprice",
    "sellingprice",
    "offerprice",
    "specialprice",
    "pricenow",
    "nowprice",
    "price",
    "priceamount",
    "amount",
    "value",
    "current",
)
_REGULAR_KEYS = (
    "listprice",
    "regularprice",
    "originalprice",
    "wasprice",
    "msrp",
    "rrp",
    "compareatprice",
    "baseprice",
    "oldprice",
    "strikethroughprice",
)
_CURRENCY_KEYS = ("currency", "currencycode", "pricecurrency", "currencyiso")
_STOCK_KEYS = (
    "availability",
    "instock",
    "isinstock",
    "available",
    "isavailable",
    "stockstatus",
    "availabilitystatus",
    "instockstatus",
)
_SKU_KEYS = ("sku", "skuid", "productsku", "itemnumber", "articlenumber")
_GTIN_KEYS = ("gtin", "gtin13", "ean", "upc", "gtin14", "gtin12", "gtin8")
_NAME_KEYS = ("name", "title", "productname")


def _norm(key: str) -> str:
    return key.replace("_", "").replace("-", "").lower()


def _index(node: Mapping[str, Any]) -> dict[str, Any]:
    return {_norm(k): v for k, v in node.items() if isinstance(k, str)}


def _price_of(value: Any) -> tuple[Decimal | None, str | None, str | None]:
    """``(amount, raw, currency)`` of a price value: a number, a string or an object."""
    if isinstance(value, Mapping):
        keys = _index(value)
        currency = next((keys[k] for k in _CURRENCY_KEYS if isinstance(keys.get(k), str)), None)
        for key in ("value", "amount", "current", "price", "sale", "final", "raw", "centamount"):
            if key in keys and not isinstance(keys[key], Mapping):
                amount = parse_machine(keys[key])
                if amount is not None and key == "centamount":
                    amount = amount / 100
                if amount is not None:
                    return amount, clean_text(keys[key]), currency
        return None, None, currency
    amount = parse_machine(value)
    return amount, clean_text(value), None


def _price_problem(value: Any) -> str:
    """Why a price field's value is not a valid price (a ``REASONS`` code)."""
    if isinstance(value, Mapping):
        keys = _index(value)
        for key in ("value", "amount", "current", "price", "sale", "final", "raw", "centamount"):
            if key in keys and not isinstance(keys[key], Mapping):
                return read_machine(keys[key])[1] or PRICE_MISSING
        return PRICE_MISSING
    return read_machine(value)[1] or PRICE_MISSING


def _read_generic(data: Any, depth: int = 0) -> Candidate | None:
    if depth > 10:
        return None
    if isinstance(data, list):
        for item in data[:50]:
            found = _read_generic(item, depth + 1)
            if found is not None:
                return found
        return None
    if not isinstance(data, Mapping):
        return None
    keys = _index(data)
    cand = Candidate(source="xhr")
    problem = None
    for key in _PRICE_KEYS:
        if key in keys and key not in ("amount", "value", "current"):
            amount, raw, currency = _price_of(keys[key])
            if amount is not None:
                cand.price, cand.price_text, cand.currency_raw = amount, raw, currency
                break
            problem = problem or _price_problem(keys[key])
    if cand.price is not None:
        for key in _REGULAR_KEYS:
            if key in keys:
                amount, raw, _ = _price_of(keys[key])
                if amount is not None:
                    cand.regular_price, cand.regular_price_text = amount, raw
                    break
        if not cand.currency_raw:
            cand.currency_raw = next(
                (keys[k] for k in _CURRENCY_KEYS if isinstance(keys.get(k), str)), None
            )
        for key in _STOCK_KEYS:
            if key in keys:
                cand.availability = normalise_availability(keys[key])
                if cand.availability:
                    break
        cand.sku = next((clean_text(keys[k], 80) for k in _SKU_KEYS if keys.get(k)), None)
        cand.gtin = next((valid_gtin(keys[k]) for k in _GTIN_KEYS if keys.get(k)), None)
        cand.name = next((clean_text(keys[k]) for k in _NAME_KEYS if keys.get(k)), None)
        return cand
    sku = next((clean_text(keys[k], 80) for k in _SKU_KEYS if keys.get(k)), None)
    name = next((clean_text(keys[k]) for k in _NAME_KEYS if keys.get(k)), None)
    if problem is not None and (sku or name):
        # A product's own price field without a valid price ("price on request"): that is
        # its answer, never the price of an item nested in it (related products, bundles).
        cand.price_problem, cand.sku, cand.name = problem, sku, name
        return cand
    # Breadth first: the product's own price before prices of nested related items.
    nested = [v for v in data.values() if isinstance(v, (Mapping, list))]
    for value in nested:
        found = _read_generic(value, depth + 1)
        if found is not None:
            return found
    return None


def extract_offer_from_json(
    data: Any,
    url: str,
    *,
    domain_currency: Mapping[str, str] | None = None,
    source: str = "xhr",
) -> Offer | None:
    """The offer in a JSON payload (bytes, text or already parsed) about ``url``.

    ``source`` is ``"xhr"`` (intercepted by the browser) or ``"api"`` (official API).
    """
    try:
        return _extract(data, url or "", domain_currency, source)
    except RecursionError:
        return None
    except Exception:
        logger.exception("JSON extraction failed on %s", url)
        return None


def _extract(
    data: Any, url: str, domain_map: Mapping[str, str] | None, source: str
) -> Offer | None:
    if isinstance(data, (bytes, bytearray)):
        data = bytes(data).decode("utf-8", "replace")
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            return None
    products = product_candidates(data, url, source)
    priced = [c for c in products if c.price is not None]
    refused = next((c for c in products if c.price_problem), None)
    cand = priced[0] if priced else (refused or _read_generic(data))
    if cand is None or (
        cand.price is None and cand.availability is None and cand.price_problem is None
    ):
        return None
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        host = ""
    hints = currency_hints(host, domain_map)
    regular = cand.regular_price
    if regular is not None and (cand.price is None or regular <= cand.price):
        regular = None
    return Offer(
        price=cand.price,
        currency=(
            (resolve_currency(cand.currency_raw, hints) if cand.currency_raw else hints.first())
            if cand.price is not None
            else None
        ),
        regular_price=regular,
        # An offer refused for its price makes no stock claim either (nothing is stored).
        availability=None if cand.price is None and cand.price_problem else cand.availability,
        sku=cand.sku,
        gtin=cand.gtin,
        name=cand.name,
        source=source,
        price_text=cand.price_text,
        regular_price_text=cand.regular_price_text if regular is not None else None,
        no_price_reason=cand.price_problem if cand.price is None else None,
    )
