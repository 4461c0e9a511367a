"""Microdata, RDFa-lite and OpenGraph/meta readings of the shared lxml tree.

Microdata: the first top-level ``schema.org/Product`` item scope, with the properties of
nested product scopes (related products) left out; an ``Offer`` scope, or loose
``itemprop="price"`` properties, when there is no product scope. RDFa-lite:
``property="price"`` / ``schema:price`` and friends (reported as ``microdata``).
OpenGraph: ``og:price:amount``, ``product:price:amount``, their currencies,
``og:availability``/``product:availability`` and ``product:retailer_item_id``.
"""

from __future__ import annotations

from typing import Any

import lxml.etree

from pricewatch.extract._candidate import (
    Candidate,
    clean_text,
    names_match,
    normalise_availability,
    valid_gtin,
)
from pricewatch.extract._money import PRICE_MISSING, parse_machine, read_machine
from pricewatch.extract._region import Region
from pricewatch.extract._stock import enabled_buy_buttons
from pricewatch.extract._tree import text_of

_GTIN_PROPS = ("gtin13", "gtin", "gtin12", "gtin14", "gtin8", "ean", "isbn", "upc")
_REGULAR_MARKERS = ("strikethrough", "listprice", "regular", "was")


def prop_value(el: Any) -> str | None:
    tag = el.tag if isinstance(el.tag, str) else ""
    content = el.get("content")
    if content is not None:
        return content
    if tag in ("a", "link", "area"):
        return el.get("href")
    if tag in ("data", "meter", "input"):
        return el.get("value")
    if tag in ("img", "source"):
        return el.get("src")
    if tag == "time":
        return el.get("datetime") or text_of(el, 2000)
    return text_of(el, 2000)


def _is_product_scope(el: Any) -> bool:
    if el.get("itemscope") is None:
        return False
    kind = el.get("itemtype") or ""
    return "roduct" in kind or "Vehicle" in kind or "/Car" in kind or "/Book" in kind


def _scoped_props(scope: Any) -> list[Any]:
    """The itemprops of ``scope`` and its nested offers, not of nested products."""
    out = []
    for el in _SUB_PROPS(scope):
        parent = el.getparent()
        foreign = False
        while parent is not None and parent is not scope:
            if _is_product_scope(parent):
                foreign = True
                break
            parent = parent.getparent()
        if not foreign:
            out.append(el)
    return out


_SUB_PROPS = lxml.etree.XPath("descendant::*[@itemprop]")


def _fill(cand: Candidate, props: list[Any]) -> None:
    for el in props:
        names = (el.get("itemprop") or "").split()
        for name in names:
            _apply(cand, name, el)
    if cand.price is None and cand.price_problem not in (None, PRICE_MISSING):
        cand.availability = None  # a zero or junk price says nothing about stock


def _apply(cand: Candidate, name: str, el: Any) -> None:
    if name in ("price", "lowPrice"):
        raw = prop_value(el)
        price, problem = read_machine(raw)
        if price is None:
            if cand.price is None and cand.price_problem in (None, PRICE_MISSING):
                cand.price_problem, cand.price_text = problem, clean_text(raw)
            return
        if _is_regular(el):
            if cand.regular_price is None:
                cand.regular_price, cand.regular_price_text = price, clean_text(raw)
            return
        if cand.price is None:
            cand.price, cand.price_text = price, clean_text(raw)
        elif price != cand.price:
            cand.alternatives.append(price)
    elif name == "priceCurrency":
        if not cand.currency_raw:
            cand.currency_raw = clean_text(prop_value(el))
    elif name == "availability":
        state = normalise_availability(prop_value(el))
        if cand.availability is None or state == "InStock":
            # One offer of the product in stock (a size, a colour) and it can be bought.
            cand.availability = state or cand.availability
    elif name in ("sku", "productID"):
        if not cand.sku:
            cand.sku = clean_text(prop_value(el), 80)
    elif name in _GTIN_PROPS:
        if not cand.gtin:
            cand.gtin = valid_gtin(clean_text(prop_value(el)))
    elif name == "name":
        if not cand.name and el.getparent() is not None:
            cand.name = clean_text(prop_value(el))


def _is_regular(el: Any) -> bool:
    """A price inside a priceSpecification whose priceType says list/strike-through."""
    parent = el.getparent()
    depth = 0
    while parent is not None and depth < 4:
        if parent.get("itemscope") is not None:
            for child in parent.iterdescendants():
                if isinstance(child.tag, str) and child.get("itemprop") == "priceType":
                    kind = (prop_value(child) or "").lower()
                    return any(marker in kind for marker in _REGULAR_MARKERS)
            return False
        parent = parent.getparent()
        depth += 1
    return False


def microdata_candidates(scoped: list[Any], loose: list[Any], region: Region) -> list[Candidate]:
    """Readings of the item scopes in ``scoped`` (elements with ``itemscope``, document
    order) inside the product's ``region``; the ``loose`` price/availability properties
    when no scope is a product or an offer. The first product scope that is the page's own
    product (:func:`_anchored`; else the first offer scope outside other products, else
    the loose properties) is ``own``."""
    out: list[Candidate] = []
    scoped = [el for el in scoped if not region.excludes(el)]
    products = [
        el
        for el in scoped
        if _is_product_scope(el) and not any(_is_product_scope(a) for a in el.iterancestors())
    ]
    foreign = set()
    for scope in products[:5]:
        cand = Candidate(source="microdata")
        _fill(cand, _scoped_props(scope))
        if not _anchored(scope, cand.name, region):
            # Another product's scope (an accessory, a "bought together" item) that the
            # region's names did not cut out: neither it nor its offers speak for the page.
            foreign.add(scope)
            continue
        cand.own = not out
        if cand.useful() or cand.price_problem:
            out.append(cand)
    if out:
        return out
    offers = [
        el
        for el in scoped
        if "Offer" in (el.get("itemtype") or "")
        and not any(a in foreign for a in el.iterancestors())
    ]
    for scope in offers[:3]:
        cand = Candidate(source="microdata", own=not out)
        _fill(cand, _scoped_props(scope))
        if cand.useful() or cand.price_problem:
            out.append(cand)
    if out or products or offers:
        return out
    loose = [el for el in loose if not region.excludes(el)]
    if loose:
        cand = Candidate(source="microdata", own=True)
        _fill(cand, loose[:20])
        if cand.useful() or cand.price_problem:
            out.append(cand)
    return out


_RDFA_PROPS = {
    "price",
    "lowprice",
    "pricecurrency",
    "availability",
    "sku",
    "gtin13",
    "gtin",
    "name",
}


def rdfa_candidates(with_property: list[Any], region: Region) -> list[Candidate]:
    """RDFa-lite readings of the non-meta elements with a ``property`` attribute, inside
    the product's ``region`` and, when they sit in a ``typeof`` product, in the page's own
    product (see :func:`_anchored`)."""
    nodes = []
    verdicts: dict[Any, bool] = {}
    for el in with_property:
        prop = el.get("property") or ""
        if prop.startswith(("og:", "product:")):
            continue
        if "rice" in prop or "vailability" in prop or "sku" in prop or "gtin" in prop:
            if region.excludes(el):
                continue
            scope = _rdfa_product(el)
            if scope is not None:
                if scope not in verdicts:
                    verdicts[scope] = _anchored(scope, _rdfa_name(scope), region)
                if not verdicts[scope]:
                    continue
            nodes.append(el)
    if not nodes:
        return []
    cand = Candidate(source="microdata", own=True)
    for el in nodes[:30]:
        for prop in (el.get("property") or "").split():
            local = prop.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
            if local.lower() not in _RDFA_PROPS:
                continue
            name = {"lowprice": "lowPrice", "pricecurrency": "priceCurrency"}.get(
                local.lower(), local
            )
            _apply(cand, name, el)
    return [cand] if cand.useful() or cand.price_problem else []


def _anchored(scope: Any, name: str | None, region: Region) -> bool:
    """The product scope ``scope`` (named ``name``) is the page's own product: it holds the
    product's title (the page's ``<h1>``, or the element naming the product), its name is
    the title's, or it holds the product's enabled buy button (outside any tile: a scope
    around the buy box only, named "Gel-Kayano 30 - Black" under the title "ASICS
    Gel-Kayano 30 Men's Running Shoe"). A scope doing none of these describes another
    product (a "bought together" item, an add-on, an accessory card the region's names did
    not cut out), whose price must never stand for the page's. A page without a title
    keeps every scope."""
    title = region.title
    if title is None or scope is title:
        return True
    if any(ancestor is scope for ancestor in title.iterancestors()):
        return True
    if names_match(name, text_of(title, 300)):
        return True
    return any(
        any(ancestor is scope for ancestor in button.iterancestors()) and not region.in_tile(button)
        for button in enabled_buy_buttons(region)
    )


def _rdfa_product(el: Any) -> Any | None:
    """The nearest RDFa ``typeof`` product element above ``el``, if any."""
    for ancestor in el.iterancestors():
        kind = ancestor.get("typeof")
        if kind is not None:
            if "roduct" in kind:
                return ancestor
            if "Offer" not in kind:
                return None
    return None


def _rdfa_name(scope: Any) -> str | None:
    for el in scope.iterdescendants():
        if isinstance(el.tag, str) and (el.get("property") or "").rsplit(":", 1)[-1] == "name":
            if _rdfa_product(el) is scope:
                return clean_text(prop_value(el))
    return None


def opengraph_candidate(metas: list[Any]) -> Candidate | None:
    """The OpenGraph/product meta reading of the page's ``<meta>`` elements."""
    if not metas:
        return None
    cand = Candidate(source="opengraph", own=True)
    values: dict[str, str] = {}
    for meta in metas:
        key = (meta.get("property") or meta.get("name") or "").strip().lower()
        if not key.startswith(("og:", "product:")):
            continue
        content = meta.get("content")
        if content is not None and key not in values:
            values[key] = content
    for key in (
        "product:sale_price:amount",
        "product:price:amount",
        "og:price:amount",
        "product:price",
        "og:price",
    ):
        if key not in values:
            continue
        price, problem = read_machine(values[key])
        if price is None:
            cand.price_problem = cand.price_problem or problem
        else:
            cand.price_problem = None
            cand.price, cand.price_text = price, clean_text(values[key])
            prefix = key.rsplit(":", 1)[0] if key.endswith(":amount") else key
            cand.currency_raw = clean_text(
                values.get(prefix + ":currency")
                or values.get("product:price:currency")
                or values.get("og:price:currency")
            )
            break
    for key in ("product:original_price:amount", "product:regular_price:amount"):
        regular = parse_machine(values.get(key))
        if regular is not None:
            cand.regular_price, cand.regular_price_text = regular, clean_text(values[key])
            break
    cand.availability = normalise_availability(
        values.get("product:availability") or values.get("og:availability")
    )
    cand.sku = clean_text(values.get("product:retailer_item_id"), 80)
    cand.name = clean_text(values.get("og:title"))
    for key in ("product:ean", "product:gtin", "product:upc", "product:isbn"):
        cand.gtin = valid_gtin(values.get(key))
        if cand.gtin:
            break
    if cand.price_problem and cand.price is None:
        cand.availability = None  # a junk price says nothing about stock
    if cand.price is None and cand.availability is None and not cand.sku:
        return None if cand.price_problem is None else cand
    return cand
