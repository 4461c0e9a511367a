"""schema.org products in JSON-LD, and in any JSON payload of the same shape.

Handles ``@graph``, top-level arrays, nested and listed ``offers``, ``ProductGroup`` with
``hasVariant``, ``AggregateOffer`` (``lowPrice``), ``priceSpecification`` lists with
``UnitPriceSpecification`` and ``priceType`` ``StrikethroughPrice``/``ListPrice`` (the
regular price). Scripts that are not strict JSON (comments, trailing commas, raw control
characters) are repaired once, then skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any
from urllib.parse import urljoin

from pricewatch.extract._candidate import (
    Candidate,
    clean_text,
    name_affinity,
    normalise_availability,
    same_product,
    valid_gtin,
)
from pricewatch.extract._money import PRICE_MISSING, parse_machine, read_machine

_PRODUCT_TYPES = {
    "product",
    "productgroup",
    "productmodel",
    "individualproduct",
    "someproducts",
    "vehicle",
    "car",
    "motorcycle",
    "book",
    "merchandise",
    "shoe",
    "clothing",
}
_OFFER_TYPES = {"offer", "aggregateoffer", "offerforpurchase"}
_REGULAR_TYPES = ("strikethrough", "listprice", "msrp", "regular", "wasprice", "srp")
_GTIN_KEYS = ("gtin13", "gtin", "gtin12", "gtin14", "gtin8", "ean", "isbn", "upc")

_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_LINE_COMMENT = re.compile(r"^\s*//.*$", re.M)
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_BACK_TO_BACK = re.compile(r"}\s*{")
_CDATA = re.compile(r"^\s*(?://\s*)?<!\[CDATA\[|(?://\s*)?\]\]>\s*$")


def load_json(text: str) -> Any:
    """Parse a JSON-LD script leniently; None when it is not JSON (or nests absurdly)."""
    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text, strict=False, parse_float=Decimal)
    except RecursionError:
        return None
    except ValueError:
        pass
    repaired = _CDATA.sub("", text)
    repaired = _BLOCK_COMMENT.sub("", repaired)
    repaired = _LINE_COMMENT.sub("", repaired)
    repaired = _TRAILING_COMMA.sub(r"\1", repaired).strip().rstrip(";")
    for candidate in (repaired, "[" + _BACK_TO_BACK.sub("},{", repaired) + "]"):
        # The second form reads several objects written one after the other.
        try:
            return json.loads(candidate, strict=False, parse_float=Decimal)
        except (ValueError, RecursionError):
            continue
    return None


def types_of(node: dict[str, Any]) -> set[str]:
    value = node.get("@type") or node.get("type")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return set()
    out = set()
    for item in value:
        if isinstance(item, str):
            out.add(item.rsplit("/", 1)[-1].rsplit(":", 1)[-1].lower())
    return out


def walk(data: Any, depth: int = 0, in_list: bool = False) -> Iterator[tuple[dict[str, Any], bool]]:
    """Every dict in ``data`` with whether it sits inside an ItemList-like container."""
    if depth > 12:
        return
    if isinstance(data, list):
        for item in data[:500]:
            yield from walk(item, depth + 1, in_list)
    elif isinstance(data, dict):
        yield data, in_list
        listish = bool(types_of(data) & {"itemlist", "offercatalog", "collectionpage"})
        for key, value in data.items():
            if key in ("offers", "hasVariant", "priceSpecification"):
                continue  # read as part of their product/offer
            if isinstance(value, (dict, list)):
                nested = (
                    in_list
                    or listish
                    or key
                    in (
                        "isRelatedTo",
                        "isSimilarTo",
                        "itemListElement",
                        "isAccessoryOrSparePartFor",
                        "isConsumableFor",
                        "relatedLink",
                        "mentions",
                    )
                )
                yield from walk(value, depth + 1, nested)


def _first(value: Any) -> Any:
    while isinstance(value, list):
        if not value:
            return None
        value = value[0]
    return value


def _text(value: Any) -> str | None:
    value = _first(value)
    if isinstance(value, dict):
        value = value.get("name") or value.get("@value")
    return clean_text(value)


def _spec_list(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, dict)]
    return []


def read_offer(offer: dict[str, Any], cand: Candidate) -> None:
    """Fill price/regular/currency/availability of ``cand`` from one offer node."""
    kinds = types_of(offer)
    raw = offer.get("price")
    if isinstance(raw, list):
        raw = _first(raw)
    if (raw is None or raw == "") and "aggregateoffer" in kinds:
        raw = offer.get("lowPrice")
    if raw is None or raw == "":
        raw = offer.get("lowPrice")
    price, problem = read_machine(raw)
    currency = _text(offer.get("priceCurrency"))
    regular = None
    regular_text = None
    for spec in _spec_list(offer.get("priceSpecification")):
        value = spec.get("price")
        if value is None or value == "":
            value = spec.get("minPrice")
        spec_price = parse_machine(value)
        if spec_price is None:
            continue
        ptype = str(_first(spec.get("priceType")) or "").lower()
        if any(marker in ptype for marker in _REGULAR_TYPES):
            if regular is None:
                regular, regular_text = spec_price, clean_text(value)
        elif (
            "referencequantity" in spec
            and "unitprice" in " ".join(types_of(spec))
            and (price is not None)
        ):
            continue  # a per-unit price (per kg, per litre) next to the offer price
        elif price is None and problem == PRICE_MISSING:
            price, raw, problem = spec_price, value, None
        currency = currency or _text(spec.get("priceCurrency"))
    if price is not None and cand.price is None:
        cand.price = price
        cand.price_text = clean_text(raw)
        cand.currency_raw = currency
        cand.price_problem = None
    elif price is None and cand.price is None and cand.price_problem in (None, PRICE_MISSING):
        cand.price_problem = problem
        cand.price_text = clean_text(raw)
    elif price is not None and price != cand.price:
        cand.alternatives.append(price)
    if regular is not None and cand.regular_price is None:
        cand.regular_price, cand.regular_price_text = regular, regular_text
    state = normalise_availability(offer.get("availability"))
    if price is None and raw not in (None, ""):
        state = None  # an offer with a zero or junk price says nothing about stock
    if cand.availability is None or state == "InStock":
        # A product is in stock when any of its offers is.
        cand.availability = state or cand.availability
    if not cand.sku:
        cand.sku = _text(offer.get("sku"))
    if not cand.gtin:
        for key in _GTIN_KEYS:
            cand.gtin = valid_gtin(_first(offer.get(key)))
            if cand.gtin:
                break


def _offers(node: dict[str, Any]) -> list[dict[str, Any]]:
    value = node.get("offers")
    out: list[dict[str, Any]] = []
    for offer in _spec_list(value):
        nested = offer.get("offers")
        if (
            "aggregateoffer" in types_of(offer)
            and not (offer.get("price") or offer.get("lowPrice"))
            and nested
        ):
            out.extend(_spec_list(nested))
        else:
            out.append(offer)
    return out


def read_product(node: dict[str, Any], source: str, url: str = "") -> Candidate:
    """The product ``node``'s reading; of its offers, the one whose ``url`` is the page's
    ``url`` (a variant page, ``?variant=5602``) is read first, else the first."""
    cand = Candidate(source=source)
    cand.name = _text(node.get("name"))
    cand.sku = _text(node.get("sku")) or _text(node.get("productID"))
    for key in _GTIN_KEYS:
        cand.gtin = valid_gtin(_first(node.get(key)))
        if cand.gtin:
            break
    offers = _offers(node)
    if url and len(offers) > 1:
        page = _norm_url(url)
        offers.sort(key=lambda o: not _same_page(o.get("url"), url, page))
    for offer in offers:
        read_offer(offer, cand)
    if cand.price is None and node.get("price") not in (None, ""):
        read_offer(node, cand)  # offer properties put straight on the product
    if cand.availability is None:
        cand.availability = normalise_availability(node.get("availability"))
    return cand


def _same_page(link: object, url: str, page: str) -> bool:
    """``link`` (absolute or relative to ``url``) is the page ``url`` (normalised: ``page``)."""
    if not isinstance(link, str) or not link.strip():
        return False
    try:
        return _norm_url(urljoin(url, link.strip())) == page
    except ValueError:
        return False


def _norm_url(url: str) -> str:
    url = url.split("#", 1)[0].rstrip("/")
    return url.split("://", 1)[-1].lower()


def _mentions_url(node: dict[str, Any], cand: Candidate, url: str) -> bool:
    """The page ``url`` is the product ``node``'s, or one of its offers' (a variant of a
    ProductGroup whose offer carries the ``?variant=`` URL), or names its SKU."""
    page = _norm_url(url)
    own = node.get("url") or node.get("@id")
    if _same_page(own, url, page):
        return True
    if any(_same_page(offer.get("url"), url, page) for offer in _offers(node)):
        return True
    sku = cand.sku
    return bool(sku and len(sku) >= 4 and sku.lower() in url.lower())


def product_candidates(
    data: Any, url: str, source: str, title: Callable[[], str | None] | None = None
) -> list[Candidate]:
    """Candidates for every top-level product in ``data`` (one payload, or a list of the
    page's scripts with ``page_products``), the page's own product first."""
    return page_products([data], url, source, title)


def page_products(
    payloads: list[Any], url: str, source: str, title: Callable[[], str | None] | None = None
) -> list[Candidate]:
    """Candidates for every top-level product of the page's ``payloads`` (its JSON-LD
    scripts, in document order), the page's own product first.

    Products inside lists (``ItemList``, ``isRelatedTo``, ``isSimilarTo``...) are other
    products and left out. The own product (``own``) is decided over the whole page, not
    per script: the one whose URL or SKU the page URL names; else, when several products
    are left, the one named like the page's ``title`` (the product's ``<h1>``: a "deal of
    the day" or a recommended product in a script of its own is not the page's product);
    else the first. Its offer speaks for the page even when its price is invalid (see
    ``core``). Other products that are the same product (same SKU, GTIN or name: the same
    product written by two plugins) are own too; every other product is another product's
    reading and never supplies the page's price."""
    products: list[Candidate] = []
    offers_only: list[Candidate] = []
    for data in payloads:
        for node, in_list in walk(data):
            kinds = types_of(node)
            if kinds & _PRODUCT_TYPES or ("offers" in node and not kinds & _OFFER_TYPES):
                if in_list:
                    continue  # another product: a list, a related or similar item
                cand = _product_or_group(node, url, source)
                cand.rank = 0 if _mentions_url(node, cand, url) else 1
                products.append(cand)
            elif kinds & _OFFER_TYPES and not in_list:
                cand = Candidate(source=source, rank=5)
                read_offer(node, cand)
                offers_only.append(cand)
    if products:
        own = _own_product(products, title)
        for cand in products:
            cand.own = cand is own or same_product(cand, own)
            if cand.price is None and not cand.own:
                cand.rank += 1
    order = {id(cand): index for index, cand in enumerate(products)}
    products.sort(key=lambda c: (not c.own, c.rank, order[id(c)]))
    if not any(c.price is not None for c in products) and offers_only:
        # An offer written apart from its product (an @graph node the product refers to
        # by @id, or offer markup without a product): the page's own offer.
        offers_only[0].own = True
        products.extend(offers_only)
    return products


def _own_product(products: list[Candidate], title: Callable[[], str | None] | None) -> Candidate:
    """The product the URL names; else, of several, those named like the page's title,
    and of those the first with a price (a reviews plugin's product without offers comes
    before the shop's own script as often as after it); else the first."""
    best = min(c.rank for c in products)
    left = [c for c in products if c.rank == best]
    if len(left) > 1 and title is not None:
        heading = title()
        affinities = [(name_affinity(c.name, heading), c) for c in left]
        named = [a for a, _ in affinities if a is not None]
        if named:
            # Named as the title, else within it, before a name that holds the title and
            # more ("... + Speakers Bundle").
            left = [c for a, c in affinities if a == min(named)]
    return next((c for c in left if c.price is not None), left[0])


def _product_or_group(node: dict[str, Any], url: str, source: str) -> Candidate:
    group = read_product(node, source, url)
    variants = [v for v in _spec_list(node.get("hasVariant"))]
    if not variants:
        return group
    chosen: Candidate | None = None
    prices: list[Decimal] = []
    readings = []
    for variant in variants[:200]:
        cand = read_product(variant, source, url)
        readings.append(cand)
        if cand.price is not None:
            prices.append(cand.price)
        if chosen is None and _mentions_url(variant, cand, url):
            chosen = cand
    matched = chosen is not None
    if chosen is None:
        if group.price is not None:
            chosen = group
        else:
            chosen = next((c for c in readings if c.price is not None), group)
    if not matched and any(c.availability == "InStock" for c in readings):
        chosen.availability = "InStock"  # some variant can be bought
    chosen.name = chosen.name or group.name
    chosen.currency_raw = chosen.currency_raw or group.currency_raw
    chosen.alternatives.extend(p for p in prices if p != chosen.price)
    if len(variants) > 1 and chosen is not group and not chosen.sku:
        chosen.sku = group.sku
    return chosen
