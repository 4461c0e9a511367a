"""``extract_offer``: one page -> one :class:`Offer`, or None.

The page is parsed once (lxml) and every reader shares the tree: operator rules for the
host (source ``rule``), JSON-LD, microdata/RDFa-lite, OpenGraph/meta, then the visible
price heuristics. Structured data is trusted unless the visible page clearly contradicts
it; a visible-only price is kept only when its evidence is strong (no answer beats a wrong
one). Pure and total: never raises, never returns a non-positive or non-finite price.

Stock: markup first, made product-level (a product whose sizes are marked up as
same-named products is in stock when any of them is; an enabled buy button in the form
that posts the product's own SKU/GTIN overrules a markup "OutOfStock"); every buy button
disabled means out of stock; else the visible stock label; else a product page with no
stock warning sells the product.

Cost: when the page writes the markup price as text (outside data and list-price
contexts), the visible scan is skipped, so most pages cost about one lxml parse plus two
attribute walks. Settings are read by the callers and passed in: ``PRICEWATCH_DOMAIN_CURRENCY``
({}: host -> ISO code for ambiguous symbols) as ``domain_currency``, and
``PRICEWATCH_EXTRACT_RULES_FILE`` ("": no rules) loaded once with
:func:`pricewatch.extract.load_rules` as ``rules``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import lxml.etree

from pricewatch.currency import (
    CurrencyHints,
    currency_hints,
    minor_units,
    resolve_currency,
    symbol_codes,
)
from pricewatch.extract._candidate import Candidate
from pricewatch.extract._ids import sku_from_code_label, sku_from_inputs, sku_from_url
from pricewatch.extract._jsonld import load_json, page_products
from pricewatch.extract._markup import (
    microdata_candidates,
    opengraph_candidate,
    rdfa_candidates,
)
from pricewatch.extract._money import (
    PRICE_AMBIGUOUS,
    PRICE_MISSING,
    PRICE_NOT_A_NUMBER,
    PRICE_SCALE,
    PRICE_WITHHELD,
    machine_readings,
    parse_amount,
)
from pricewatch.extract._region import Region
from pricewatch.extract._stock import (
    buy_controls,
    enabled_buy_buttons,
    says_out_of_stock,
    sold_out_wording,
)
from pricewatch.extract._tree import parse, text_of
from pricewatch.extract._visible import (
    VisibleReading,
    named_title,
    price_withheld,
    product_title,
    read_visible,
)
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


# Attribute nodes are cheaper to collect than elements filtered by a predicate.
_ATTRIBUTE_SCAN = lxml.etree.XPath("//@itemscope | //@property")
_LOOSE_SCAN = lxml.etree.XPath("//@itemprop")


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
    hints = currency_hints(host, domain_map, root.get("lang") or root.get("xml:lang"))

    ruled = apply_rules(rules, root, host) if rules else None

    # One pass over the few tags structured data, the title and the buy controls live
    # in, one over two attributes.
    scripts: list[str] = []
    metas: list[Any] = []
    headings: list[Any] = []
    controls: list[Any] = []
    for el in root.iter("script", "meta", "h1", "button", "input"):
        tag = el.tag
        if tag == "meta":
            metas.append(el)
        elif tag == "script":
            if "ld+json" in (el.get("type") or "").lower() and el.text:
                scripts.append(el.text)
        elif tag == "h1":
            headings.append(el)
        else:
            controls.append(el)
    structured: list[Candidate] = []

    def find_title() -> Any:
        # The <h1>; else the element showing the name <title>, og:title or the page's
        # own structured data give (pages without an <h1>).
        title = product_title(headings)
        if title is not None:
            return title
        names = [text_of(t, 300) for t in root.iter("title")][:1]
        names += [m.get("content") or "" for m in metas if m.get("property") == "og:title"]
        names += [c.name for c in structured if c.own and c.name]
        return named_title(root, names)

    region = Region(find_title, controls)
    scoped: list[Any] = []
    with_property: list[Any] = []
    loose: list[Any] = []
    for attribute in _ATTRIBUTE_SCAN(root):
        el = attribute.getparent()
        name = attribute.attrname
        if name == "itemscope":
            scoped.append(el)
        elif el.tag != "meta" or not (el.get("property") or "").startswith(("og:", "product:")):
            with_property.append(el)

    def heading() -> str | None:
        # The page's <h1>, to tell its own product among several in JSON-LD (the element
        # is not kept: the region's title is decided later, with every reading known).
        h1 = product_title(headings)
        return text_of(h1, 300) if h1 is not None else None

    payloads = [data for data in map(load_json, scripts) if data is not None]
    structured.extend(page_products(payloads, url, "jsonld", heading))
    if not scoped and not any(c.price is not None for c in structured):
        # Microdata properties outside any item scope (broken but common markup).
        loose = [
            a.getparent()
            for a in _LOOSE_SCAN(root)
            if a in ("price", "availability", "priceCurrency", "lowPrice")
        ]
    structured.extend(microdata_candidates(scoped, loose, region))
    structured.extend(rdfa_candidates(with_property, region))
    og = opengraph_candidate(metas)
    if og is not None:
        structured.append(og)

    for cand in structured:
        _apply_minor_units(cand, hints)
    priced = [c for c in structured if c.price is not None and c.own]
    if ruled is not None and ruled.price is not None:
        visible = VisibleReading()
    elif priced and _markup_price_shown(body, priced, hints):
        visible = VisibleReading()
        visible.amounts = {c.price for c in priced if c.price is not None}
    else:
        visible = read_visible(root, hints, region)
    for cand in structured:
        if cand.readings:
            _settle_readings(cand, visible)
    return decide(ruled, structured, visible, hints, root, url, region)


def _markup_code(cand: Candidate, hints: CurrencyHints) -> str | None:
    """The currency a markup reading's amounts are in: its own, else the host's."""
    if cand.currency_raw:
        return resolve_currency(cand.currency_raw, hints)
    return hints.first()


def _apply_minor_units(cand: Candidate, hints: CurrencyHints) -> None:
    """Read a markup price string with one separator before three digits (``"59.990"``)
    by the offer's currency: 59990 CLP, 29.500 KWD; ``"1.099"`` EUR can be 1.099 or 1099,
    and the page's text decides (:func:`_settle_readings`). JSON numbers are left as
    they are: their point is a decimal point."""
    if cand.price is None and cand.regular_price is None:
        return
    code = _markup_code(cand, hints)
    reread = _by_minor_units(cand.price, cand.price_text, code, hints)
    if reread is not None:
        cand.price, readings = reread
        if cand.price is None:
            cand.readings = readings
            cand.price_problem = PRICE_AMBIGUOUS if readings else PRICE_NOT_A_NUMBER
    reread = _by_minor_units(cand.regular_price, cand.regular_price_text, code, hints)
    if reread is not None:
        # An ambiguous list price is no list price (nothing is stored for it).
        cand.regular_price = reread[0]
        if cand.regular_price is None:
            cand.regular_price_text = None


def _by_minor_units(
    value: Decimal | None, text: str | None, code: str | None, hints: CurrencyHints
) -> tuple[Decimal | None, tuple[Decimal, ...]] | None:
    """A markup amount ``value`` read again from its ``text`` by the currency's minor
    units: None when the reading stands, else (the one reading, or None when there are
    several or none, and every reading)."""
    if value is None:
        return None
    readings = machine_readings(text, code, hints.language)
    if readings is None or readings == (value,):
        return None
    return (readings[0] if len(readings) == 1 else None), readings


def _settle_readings(cand: Candidate, visible: VisibleReading) -> None:
    """The reading of an ambiguous markup price that the page shows as a price, when it
    shows exactly one of them; else the price stays refused (``price_ambiguous``)."""
    shown = [amount for amount in cand.readings if amount in visible.amounts]
    if len(shown) == 1:
        cand.price, cand.price_problem, cand.readings = shown[0], None, ()


_GROUP_SEPARATORS = (",", ".", " ", "\u00a0", "\u202f", "'", "&nbsp;", "&#160;")
_NUMBER_BYTES = frozenset(b"0123456789.,")


def _price_wholes(
    price: Decimal, separators: tuple[str, ...] = _GROUP_SEPARATORS
) -> tuple[list[str], str]:
    """The ways the whole part of ``price`` is written (1299 -> 1299, 1,299, 1.299 ...)
    with the group ``separators``, and its two-digit fraction ("" for whole amounts)."""
    if price == price.to_integral():
        whole, frac = format(price.to_integral(), "f"), ""
    else:
        whole, _, frac = format(price.quantize(Decimal("0.01")), "f").partition(".")
    groups: list[str] = []
    rest = whole
    while len(rest) > 3:
        groups.insert(0, rest[-3:])
        rest = rest[:-3]
    groups.insert(0, rest)
    wholes = {whole}
    if len(groups) > 1:
        wholes.update(sep.join(groups) for sep in separators)
    return sorted(wholes), frac


_REGULAR_CONTEXT = re.compile(
    rb"<(?:del|s|strike)[\s>]|line-through|"
    rb"class=[\"'][^\"']*(?:old|was|original|regular|strike|crossed|before|rrp|uvp|msrp|compare|"
    rb"list-?price|former|previous)",
    re.I,
)


def _occurrences(
    data: bytes,
    price: Decimal,
    offset: int = 0,
    limit: int = 200,
    separators: tuple[str, ...] = _GROUP_SEPARATORS,
) -> Iterator[int]:
    """Start offsets of ``price`` written as a standalone number in ``data`` (UTF-8), in
    needle order, at most ``limit`` candidates looked at."""
    wholes, frac = _price_wholes(price, separators)
    needles = []
    for whole in wholes:
        if frac:
            fracs = [frac, frac[0]] if frac[1] == "0" else [frac]
            needles += [f"{whole}{sep}{f}".encode() for sep in ".," for f in fracs]
        else:
            needles.append(whole.encode())
    looked = 0
    for needle in needles:
        start = data.find(needle, offset)
        while start != -1 and looked < limit:
            looked += 1
            end = start + len(needle)
            after = data[end : end + 3]
            if (start == 0 or data[start - 1] not in _NUMBER_BYTES) and not after[:1].isdigit():
                # 129 must not match 129.5 (but matches 129.00, 129,- and a full stop).
                if frac or not (
                    after[:1] in (b".", b",") and after[1:2].isdigit() and after[1:3] != b"00"
                ):
                    yield start
            start = data.find(needle, end)


# A three-decimal currency's "29.500" or "29,500" is 29.5, not a grouped 29500.
_THREE_DECIMAL_GROUPS = tuple(sep for sep in _GROUP_SEPARATORS if sep not in ".,")


def _markup_price_shown(body: bytes | str, priced: list[Candidate], hints: CurrencyHints) -> bool:
    """Whether the page shows the first markup price as text, not only in data, attributes
    or a list-price/strike-through context: a cheap check that spares the visible scan
    when markup and page plainly agree."""
    price = priced[0].price
    if price is None:
        return False
    code = _markup_code(priced[0], hints)
    separators = _THREE_DECIMAL_GROUPS if code and minor_units(code) == 3 else _GROUP_SEPARATORS
    data = body.encode("utf-8", "replace") if isinstance(body, str) else body
    body_start = max(data.find(b"<body"), 0)  # the head shows nothing
    for start in _occurrences(data, price, body_start, separators=separators):
        window = data[max(0, start - 240) : start]
        tag_end = window.rfind(b">")
        if tag_end == -1 or window.rfind(b"<") > tag_end:
            continue  # inside a tag: an attribute value
        prefix = window[tag_end + 1 :]
        if len(prefix) > 24 or b"{" in prefix or b'"' in prefix or b"=" in prefix:
            continue  # script data, not a text node
        tag_start = window.rfind(b"<", 0, tag_end)
        if window[tag_start : tag_start + 7].lower() in (b"<script", b"<style ", b"<style>"):
            continue
        if _REGULAR_CONTEXT.search(window[-160:]):
            continue
        return True
    return False


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
    hints: CurrencyHints,
    root: Any,
    url: str,
    region: Region,
) -> Offer | None:
    """Pick the price by evidence and assemble the offer."""
    refusal = _refused_price(ruled, structured)
    chosen = _no_price(ruled, structured) if refusal else _chosen(ruled, structured, visible, hints)
    if chosen.price is None and chosen.price_problem == PRICE_SCALE:
        refusal = chosen.price_problem
        chosen = _no_price(ruled, structured)
    said_why: str | None = None
    if chosen.price is None:
        if not refusal and price_withheld(region):
            said_why = PRICE_WITHHELD  # the page says why it shows no price (stock may stand)
    elif (
        chosen.source != "rule"
        and (chosen.source == "visible" or chosen.price not in visible.amounts)
        and price_withheld(region)
    ):
        # The product's box withholds the price: whatever amount the page shows is another
        # product's, a deposit or a fee, and a markup price the page does not show is a
        # placeholder (0.01, 1.00) of the shop's template.
        refusal = PRICE_WITHHELD
        chosen = _no_price(ruled, structured)
    if chosen.price is not None:
        _add_list_price(chosen, visible, root, region)
    sku = _identifier(chosen, visible, root, url, region)
    # An offer refused for its price makes no stock claim either (nothing is stored).
    availability = None if refusal else _availability(chosen, structured, visible, root, region)
    if chosen.price is None and availability is None and not sku and not (refusal or said_why):
        return None
    pair = visible.vat_pair if chosen.price is not None else None
    other_price, price_kind = None, None
    if pair is not None and chosen.price in (pair.net, pair.gross):
        price_kind = "net" if chosen.price == pair.net else "gross"
        other_price = pair.gross if price_kind == "net" else pair.net
    return Offer(
        price=chosen.price,
        currency=_currency(chosen, visible, hints) if chosen.price is not None else None,
        regular_price=chosen.regular_price,
        availability=availability,
        sku=sku,
        gtin=chosen.gtin,
        name=chosen.name or visible.title,
        source=chosen.source,
        price_text=chosen.price_text,
        regular_price_text=chosen.regular_price_text,
        other_price=other_price,
        price_kind=price_kind,
        no_price_reason=refusal or said_why,
    )


def _refused_price(ruled: Candidate | None, structured: list[Candidate]) -> str | None:
    """The ``no_price`` reason when the page's own structured offer has no valid price
    (and no operator rule found one): that offer speaks for the page, so no price read
    elsewhere on it may stand in. None when a price may be looked for."""
    if ruled is not None and ruled.price is not None:
        return None
    own = [c for c in structured if c.own]
    if any(c.price is not None for c in own):
        return None
    problems = [c.price_problem for c in own if c.price_problem]
    if not problems:
        return None
    # The most telling reason: an invalid price says more than a missing one.
    return next((p for p in problems if p != PRICE_MISSING), problems[0])


def _no_price(ruled: Candidate | None, structured: list[Candidate]) -> Candidate:
    """What the page says besides a price (stock, identifiers, name), from every reading."""
    useful = [c for c in structured if c.useful() or c.own]
    if ruled is not None and ruled.useful():
        useful.insert(0, ruled)
    own = next((c for c in structured if c.own), None)
    first = own or (useful[0] if useful else None)
    chosen = Candidate(source=first.source if first is not None else "visible")
    _merge(chosen, useful)
    chosen.price = chosen.regular_price = None
    chosen.price_text = own.price_text if own is not None else None
    chosen.regular_price_text = None
    return chosen


def _chosen(
    ruled: Candidate | None,
    structured: list[Candidate],
    visible: VisibleReading,
    hints: CurrencyHints,
) -> Candidate:
    """The reading whose price is kept: the operator's rule, else the page's own structured
    data checked against the visible page, else a clear visible price; filled from the
    others. Structured readings of other products (``own`` false) never supply it. A
    candidate without a price and with ``price_scale`` when markup and page disagree by a
    power of ten that no reading explains."""
    priced = [c for c in structured if c.price is not None and c.own]
    chosen: Candidate | None = None
    if ruled is not None and ruled.price is not None:
        chosen = ruled
    elif priced:
        priced.sort(key=lambda c: _STRUCTURED_ORDER.index(c.source))
        chosen = _check_against_visible(priced[0], priced, visible, hints)
        if chosen.price is None:
            return chosen
    if chosen is None:
        chosen = visible.as_candidate()
    if chosen is None:
        return _no_price(ruled, structured)
    return _merge(chosen, ([ruled] if ruled is not None else []) + structured)


def _add_list_price(chosen: Candidate, visible: VisibleReading, root: Any, region: Region) -> None:
    """A list price above the price: markup's, else the visible one, else a struck-through
    amount beside the price."""
    assert chosen.price is not None
    if chosen.regular_price is None:
        if visible.regular is not None and visible.regular > chosen.price:
            chosen.regular_price = visible.regular
            chosen.regular_price_text = visible.regular_text
        elif not visible.scanned:
            found = _struck_beside(root, chosen.price, region)
            chosen.regular_price, chosen.regular_price_text = found
    if chosen.regular_price is not None and chosen.regular_price <= chosen.price:
        chosen.regular_price = None
        chosen.regular_price_text = None


def _identifier(
    chosen: Candidate, visible: VisibleReading, root: Any, url: str, region: Region
) -> str | None:
    """The code the page labels as such ("Product code: ...") is what shoppers and the
    shop's staff quote, then markup, the form field that posts the item to the cart, a
    labelled code near the title, the URL."""
    return (
        sku_from_code_label(root, region)
        or chosen.sku
        or sku_from_inputs(root, region)
        or visible.sku
        or sku_from_url(url)
    )


def _availability(
    chosen: Candidate,
    structured: list[Candidate],
    visible: VisibleReading,
    root: Any,
    region: Region,
) -> str | None:
    """InStock / OutOfStock from product-level evidence only.

    OutOfStock needs the product's own offer to say so (and no enabled buy button in the
    form that posts this product's SKU/GTIN, and no same-named variant in stock), or the
    product region to say so in words while its buy control is disabled (or missing, when
    markup says nothing). Sold-out sizes, "notify me" widgets and other products never
    count (see ``_stock``)."""
    availability = chosen.availability
    if availability == "OutOfStock" and _sibling_in_stock(chosen, structured):
        # Sizes or colours marked up as separate products of one name: the product can
        # be bought when any of them can.
        availability = "InStock"
    controls = buy_controls(root, region, links=False)  # links only when they matter
    could_be_out = not controls.enabled and (controls.disabled or availability is None)
    says_out = (
        visible.availability == "OutOfStock"
        or controls.sold_out_wording
        or (could_be_out and not visible.scanned and sold_out_wording(root, region))
    )
    if says_out and could_be_out:
        controls = buy_controls(root, region)
        could_be_out = not controls.enabled and (controls.disabled or availability is None)
    if says_out and could_be_out:
        # Sold-out wording in the product's region and no way to buy it (a disabled buy
        # control; or none, when markup says nothing): what the shopper sees wins over
        # markup that is often rendered from a stale template.
        availability = "OutOfStock"
    elif (
        availability == "OutOfStock"
        and chosen.source in _STRUCTURED_ORDER
        and not says_out
        and _buy_form_for((chosen.sku, chosen.gtin), region)
    ):
        # An enabled buy button in a form that posts this very product's identifier: the
        # shop takes orders for it, whatever a (often per-size or stale) markup offer says.
        availability = "InStock"
    elif availability is None and visible.availability == "InStock":
        availability = "InStock"
    if availability is None and (
        chosen.price is not None or structured or visible.title or visible.buy_button
    ):
        # A product page (a price, product markup or a title) with no product-level
        # evidence of a sell-out sells the product.
        availability = "InStock"
    return availability


def _currency(chosen: Candidate, visible: VisibleReading, hints: CurrencyHints) -> str | None:
    if chosen.currency_raw:
        # A written currency that names nothing in use (or nothing for sure) is no
        # currency: never swapped for the host's.
        return resolve_currency(chosen.currency_raw, hints)
    return visible.currency if visible.currency_text else hints.first()


def _same_name(a: str | None, b: str | None) -> bool:
    return bool(a and b and a.casefold() == b.casefold())


def _sibling_in_stock(chosen: Candidate, structured: list[Candidate]) -> bool:
    """Another product of the same syntax, name and rank (so neither is singled out by the
    URL nor sits in a related-products list) is in stock: one product's variants."""
    return any(
        other is not chosen
        and other.source == chosen.source
        and other.rank == chosen.rank
        and other.availability == "InStock"
        and _same_name(other.name, chosen.name)
        for other in structured
    )


_FORM_INPUT_LIMIT = 60


def _buy_form_for(ids: tuple[str | None, ...], region: Region) -> bool:
    """An enabled, visible buy button in the product's region sits in a form with a field
    whose value is one of ``ids`` (the product's SKU or GTIN): the form that orders it."""
    wanted = {i.strip() for i in ids if i and len(i.strip()) >= 3}
    if not wanted:
        return False
    for el in enabled_buy_buttons(region):
        form = next(el.iterancestors("form"), None)
        if form is None or says_out_of_stock(text_of(form, 400)[:400]):
            continue
        for index, field in enumerate(form.iter("input")):
            if index >= _FORM_INPUT_LIMIT:
                break
            if (field.get("value") or "").strip() in wanted:
                return True
    return False


def _struck_beside(root: Any, price: Decimal, region: Region) -> tuple[Decimal | None, str | None]:
    """A struck-through amount above ``price`` in the same small box as ``price`` in the
    product's region: the list price beside the markup price (markup rarely carries it)."""
    for index, el in enumerate(root.iter("del", "s", "strike")):
        if index >= 50:
            break
        if region.excludes(el) or region.in_tile(el):
            continue  # another product's was/now pair, however the page names its block
        text = " ".join(text_of(el, 60).split())
        if not text or len(text) > 40:
            continue
        amount, _ = parse_amount(text)
        if amount is None or not price < amount <= price * 10:
            continue
        box = el.getparent()
        for _ in range(2):
            if box is None:
                break
            box_text = text_of(box, 400)
            if len(box_text) > 400:
                break
            if next(_occurrences(box_text.encode("utf-8", "replace"), price), None) is not None:
                return amount, text
            box = box.getparent()
    return None, None


def _check_against_visible(
    chosen: Candidate, priced: list[Candidate], visible: VisibleReading, hints: CurrencyHints
) -> Candidate:
    """Keep the markup price unless the visible page clearly shows another one. When the
    page's price stands in for the markup's, the markup's currency stays if the page's sign
    can name it ("$" and priceCurrency CAD on a .com shop is CAD, not the host's USD)."""
    kept = _against_visible(chosen, priced, visible, hints)
    if kept is chosen or kept in priced or kept.price is None or not chosen.currency_raw:
        return kept
    code = resolve_currency(chosen.currency_raw, hints)
    sign = visible.currency_text
    if code and (not sign or code in symbol_codes(sign)):
        kept.currency_raw = code
    return kept


def _against_visible(
    chosen: Candidate, priced: list[Candidate], visible: VisibleReading, hints: CurrencyHints
) -> Candidate:
    if visible.price is None or visible.price == chosen.price:
        return chosen
    shown = visible.amounts
    if chosen.price in shown:
        return chosen
    # Another structured reading that the page shows wins over one it does not show.
    for other in priced[1:]:
        if other.price in shown:
            return other
    if visible.strong and chosen.price in visible.regular_amounts and visible.price < chosen.price:
        # The page shows the markup price as the struck-through list price next to a
        # clearly lower current price: the markup is stale or gives the list price.
        cand = visible.as_candidate()
        if cand is not None:
            cand.regular_price, cand.regular_price_text = chosen.price, chosen.price_text
            return cand
    if visible.strong and all(c.price not in shown for c in priced):
        if any(_close(visible.price, alt) for alt in chosen.alternatives):
            cand = visible.as_candidate()
            if cand is not None:
                cand.source = chosen.source
                return cand
    if (
        visible.strong
        and chosen.price not in visible.regular_amounts
        and all(c.price not in shown for c in priced)
    ):
        scaled = _scale_error(chosen, visible, hints)
        if scaled is not None:
            return scaled
    return chosen


_POWERS_OF_TEN = (Decimal(10), Decimal(100), Decimal(1000))


def _scale_error(
    chosen: Candidate, visible: VisibleReading, hints: CurrencyHints
) -> Candidate | None:
    """What to store when the markup price, shown nowhere on the page, is exactly 10, 100
    or 1000 times the page's strong visible price (or a tenth, a hundredth, a thousandth
    of it): one of the two is written at the wrong scale. None when they are not so.

    Only one mistake is common and explains itself: markup in the currency's minor units
    (cents, fils), i.e. markup = page x 10 ** minor units (189900 for 1.899,00 EUR, 29500
    for 29.500 KWD). Then both readings agree on the digits, the page's text is what the
    shopper pays, and its amount is taken. Any other factor (x10 in EUR, a markup price
    below the page's, an unknown currency, a page price in another currency) could be
    the markup's error as much as the page's or our reading of it, and a stored price
    off by a power of ten is worse than none: the price is refused (``price_scale``)."""
    assert chosen.price is not None and visible.price is not None
    high, low = sorted((chosen.price, visible.price), reverse=True)
    factor = high / low
    if factor not in _POWERS_OF_TEN:
        return None
    code = _markup_code(chosen, hints)
    in_minor_units = (
        code is not None
        and chosen.price == high
        and (visible.currency is None or visible.currency == code)
        and factor == 10 ** minor_units(code)
    )
    cand = visible.as_candidate() if in_minor_units else None
    if cand is not None:
        return cand
    return Candidate(source=chosen.source, price_problem=PRICE_SCALE, own=chosen.own)


def _close(a: Decimal, b: Decimal) -> bool:
    return a == b
