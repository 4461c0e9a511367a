"""Visible-price heuristics: what a shopper reads as the price, stock state and title.

The scan starts at the product title (the product's ``<h1>``; on a page without one, the
element that shows the name the page's ``<title>``, ``og:title`` or own structured data
give, see :func:`named_title`) and widens one
ancestor at a time, so every candidate carries its distance to the title (the number of
levels climbed). It stops a few levels after the first good candidate, or after a bounded
number of elements: nearness to the title is evidence, and far-away prices (other
products, footers) are never even read. Pages without either are scanned whole.

Candidates are elements whose class/id/``data-*``/``itemprop`` names a price, and short
texts with a currency sign. Each is scored on general evidence:

- price-like names on the element and its close ancestors, "sale/current/final" names;
- a currency sign or code in its own text, emphasis (``strong``/``b``/headings, "big",
  "large" names), closeness to the title and to the buy button;
- excluded: strike-through (``del``, ``s``, ``strike``, ``line-through``) and list-price
  names or context ("was", "UVP", "statt", "au lieu de"...), which give the regular
  price instead; "from", "per month", instalments, shipping, savings, unit prices; other
  products (related/recommended/carousel/recently viewed containers), cart, navigation.

The best amount must win clearly (``strong``), otherwise the caller abstains.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pricewatch.currency import ISO_CODES, CurrencyHints, resolve_currency, short_symbols
from pricewatch.extract._candidate import Candidate, clean_text
from pricewatch.extract._ids import code_from_label, looks_like_label
from pricewatch.extract._money import FROM_WORDING, normalise_text, parse_amount
from pricewatch.extract._region import Region
from pricewatch.extract._stock import BUY_NAMES as _NAME_BUY
from pricewatch.extract._stock import in_chooser, says_buy, stock_from_text
from pricewatch.extract._tree import hidden, hidden_element, text_of

# Elements read per page at most; the scan widens from the title until this is spent.
SCAN_BUDGET = 3000
# Levels above the title the scan may climb.
MAX_LEVELS = 9
# Levels the scan keeps climbing after the first good candidate (to see competitors).
EXTRA_LEVELS = 1

_CURRENCY_MARKS = (
    r"[€$£¥₹₽₴₺₪₩฿₫₦₱]|\b(?:CHF|EUR|USD|GBP|PLN|SEK|NOK|DKK|RON|CZK|HUF|Kč|Ft|lei|Lei|kr|"
    r"руб|грн|Rs|TL|zł|лв)(?:\b|\.|$)|zł|руб|грн|ر\.س|د\.إ|元|円"
)


@functools.cache
def _currency_re() -> re.Pattern[str]:
    """The signs and codes that make a short text a price candidate: the common ones, and
    every short symbol of the three-decimal currencies (``KD``, ``RO``, ``JD``, ``د.ك``),
    whose shops often write no other sign (read from the currency table on first use)."""
    symbols = short_symbols(3)
    # Latin ones as shops write them, in capitals, as whole words ("KD", not "kd" in a word).
    latin = "|".join(re.escape(key.upper()) for key in symbols if key.isascii())
    other = "|".join(re.escape(key) for key in symbols if not key.isascii())
    return re.compile(rf"{_CURRENCY_MARKS}|\b(?:{latin})\b\.?|{other}")


_INTERESTING_NAME = re.compile(
    r"price|preis|prix|prezzo|precio|preco|cena|amount|stock|availab|inventory|"
    r"cart|basket|buy|kaufen",
    re.I,
)
_NAME_PRICE = re.compile(r"price|preis|prix|prezzo|precio|preco|cena|amount", re.I)
_NAME_STOCK = re.compile(r"stock|availab|inventory", re.I)
_NAME_GOOD = re.compile(
    r"sale|special|current|final|actual|now|our|selling|offer|main|primary|buybox|"
    r"product-?price|price-?(?:value|amount|current|tag|display)|big|large|huge|"
    r"\bxl\b|\blg\b|promo|deal|payable|reduced",
    re.I,
)
_NAME_REGULAR = re.compile(
    r"old|was|regular|list|strike|crossed|before|original|rrp|uvp|msrp|compare|"
    r"retail|reference|former|previous|initial|stroke|through|normal|recommended",
    re.I,
)
_NAME_REGULAR_STRONG = re.compile(
    r"old|was|strike|crossed|before|rrp|uvp|msrp|compare|former|previous|through|original",
    re.I,
)
# WooCommerce names every product's block "shipping-taxable": a tax class, not shipping.
_NAME_EXCLUDE = re.compile(
    r"unit-?price|per-?unit|base-?price|basic-?price|grundpreis|installment|instalment|"
    r"monthly|financ|credit|shipping(?![-_]?taxable)|delivery|postage|versand|saving|"
    r"you-?save|discount|percent|subtotal|total|minicart|mini-cart|wishlist|related|recommend|carousel|"
    r"similar|upsell|up-sell|crosssell|cross-sell|also|recent|viewed|accessor|bundle|"
    r"footer|\bnav|menu|sidebar|teaser|banner|newsletter|coupon|voucher|loyalty|points|"
    r"bonus|rating|review|filter|facet|breadcrumb|sponsored|\bads?\b",
    re.I,
)
_CONTEXT_REGULAR = re.compile(
    r"\b(?:was|list price|rrp|uvp|statt|vorher|before|regular|original|avant|"
    r"prix conseillé|au lieu de|invece di|prezzo consigliato|antes|era|"
    r"previously|typical price|msrp|retail|zamiast|było|prej)\b|原價|原价|定價|定价|"
    r"参考価格|通常価格|市價|市价",
    re.I,
)
_CONTEXT_EXCLUDE = re.compile(
    r"per month|/\s?mo\b|/\s?month|a month|monthly|monat|par mois|al mese|al mes|"
    r"installment|instalment|\braten?\b|finanz|\d\s?x\s?\d|\bx\s?\d|shipping|delivery|"
    r"versand|livraison|spedizione|envío|envio|porto|frete|verzending|bezorg|wysyłk|"
    r"dostaw|doprav|doručen|frakt|fragt|toimitus|доставк|kargo|משלוח|شحن|"
    r"\bsave\b|sparen|économ|risparmi|"
    r"ahorra|economize|\boff\b|%|per kg|/\s?kg|/\s?l\b|/\s?100|per 100|je kg|pro kg|"
    r"\bpro\b|\bje\b|/\s?st|grundpreis|unit price|prix unitaire|prezzo unitario|"
    rf"{FROM_WORDING}|"
    r"gift card|bonus|points|cashback|coupon|deposit|anzahlung|acompte|caparra|"
    r"\bseña\b|aanbetaling|"
    r"\bfree\b|gratis|kostenlos|省|每|起|/罐|/個|/件|送料|運費|运费",
    re.I,
)
# A price said to be without VAT (net) or with VAT (gross), in its text, the label right
# after it or before it, or its class names (``price-excluding-tax``).
_VAT_NET = re.compile(
    r"excl(?:\.|uding|usive)?\s*(?:\d+(?:[.,]\d+)?\s?%\s*)?(?:vat|tax|gst)|"
    r"\bex\.?\s*(?:vat|tax|gst)|without (?:vat|tax)|before tax|\+\s?vat|plus vat|"
    r"excluding-?tax|\bexkl\.?|zzgl\.?|ohne mwst|\bnetto?\b|\bht\b|hors tax|sans tva|"
    r"iva esclusa|sin iva|sem iva|\+\s?iva|bez dph|bez vat|bez pdv|brez ddv|bez dane|"
    r"ex\.? moms|ekskl|ilman alv|excl\.? btw|zonder btw|ex\.? btw|"
    r"price-?excl|price--net|\bnet-?price|price-?tax\b",
    re.I,
)
_VAT_GROSS = re.compile(
    r"incl(?:\.|uding|usive)?\s*(?:\d+(?:[.,]\d+)?\s?%\s*)?(?:vat|tax|gst)|"
    r"\binc\.?\s*(?:vat|tax|gst)|with vat|including-?tax|\binkl\.?\s*(?:\d+\s?%\s*)?mwst|"
    r"\bbrutto\b|\bttc\b|toutes taxes|avec tva|iva inclusa|iva incluida|con iva|com iva|"
    r"\bs dph|vč\.? dph|\bs pdv|\bz ddv|\bz vat|inkl\.? moms|inkl\.? mva|sis\.? alv|"
    r"incl\.? btw|met btw|price-?incl|price--gross|"
    r"\bgross-?price",
    re.I,
)
_VAT_MAX_RATIO = Decimal("1.3")  # gross/net: the highest VAT rates are 27%
_STRIKE_TAGS = frozenset({"del", "s", "strike"})
_EMPHASIS_TAGS = frozenset({"strong", "b", "h1", "h2", "h3", "h4", "em"})
_SKIP_TAGS = frozenset(
    {
        "script",
        "style",
        "noscript",
        "option",
        "select",
        "textarea",
        "title",
        "head",
        "svg",
        "path",
        "template",
        "iframe",
    }
)
_SUP_CENTS = re.compile(r"^\d{2}$")
_DIGIT = re.compile(r"\d")
_BARE_NUMBER = re.compile(r"^\s*\d[\d.,' \u00a0]*\s*$")
_NUMBER = re.compile(r"\d(?:[\d.,' \u00a0]*\d)?")
_MAX_TEXT = 48
_GOOD_SCORE = 6.0
_FIRST_MIN = 4.0
_FIRST_BONUS = 1.5


@dataclass(slots=True)
class _Cand:
    amount: Decimal
    text: str
    currency: str | None
    score: float
    regular: bool
    level: int
    order: int
    element: Any
    vat: str | None = None  # "net" / "gross" when the page says so


@dataclass(frozen=True, slots=True)
class VatPair:
    """The same price shown without VAT (``net``) and with it (``gross``)."""

    net: Decimal
    gross: Decimal


@dataclass(slots=True)
class VisibleReading:
    """What the visible page says."""

    price: Decimal | None = None
    price_text: str | None = None
    currency: str | None = None
    currency_text: str | None = None
    regular: Decimal | None = None
    regular_text: str | None = None
    availability: str | None = None
    buy_button: bool = False
    strong: bool = False
    title: str | None = None
    amounts: set[Decimal] = field(default_factory=set)
    regular_amounts: set[Decimal] = field(default_factory=set)
    score: float = 0.0
    scanned: bool = False
    sku: str | None = None
    vat_pair: VatPair | None = None

    def as_candidate(self) -> Candidate | None:
        if self.price is None or not self.strong:
            return None
        return Candidate(
            source="visible",
            price=self.price,
            price_text=self.price_text,
            currency_raw=self.currency,
            regular_price=self.regular if self.regular and self.regular > self.price else None,
            regular_price_text=self.regular_text,
            availability=self.availability,
        )


def _names(el: Any) -> str:
    parts = [el.get("class"), el.get("id"), el.get("itemprop")]
    for key in el.keys():
        if key.startswith("data-") and len(key) < 40:
            parts.append(key)
    return " ".join(p for p in parts if p)


def _own_text(el: Any) -> str | None:
    """The element's text, cents in ``<sup>`` joined with a dot at any depth ("$159<sup>95
    </sup>" inside a wrapper is 159.95, never 15995); None when too long."""
    text = _cents_text(el, 4 * _MAX_TEXT)
    if text is None:
        return None
    text = " ".join(text.split())
    if not text or len(text) > _MAX_TEXT:
        return None
    return text


def _cents_text(el: Any, budget: int) -> str | None:
    """All text inside ``el``, cents written apart (``<sup>``, ``<small>``, ``<span>``
    right after digits) joined with a dot; None past ``budget`` characters."""
    pieces = [el.text or ""]
    size = len(pieces[0])
    for child in el:
        tag = child.tag if isinstance(child.tag, str) else ""
        if tag in _SKIP_TAGS:
            pieces.append(child.tail or "")
            continue
        inner = _cents_text(child, budget - size)
        if inner is None:
            return None
        if tag in ("sup", "small", "span") and _SUP_CENTS.match(inner.strip()):
            so_far = "".join(pieces).rstrip()
            if so_far and so_far[-1].isdigit():
                inner = "." + inner.strip()
        pieces.append(inner)
        pieces.append(child.tail or "")
        size += len(inner) + len(child.tail or "")
        if size > budget:
            return None
    return "".join(pieces)


def _context_before(el: Any) -> str:
    """Up to ~30 characters of text right before ``el`` in its parent."""
    prev = el.getprevious()
    if prev is not None:
        text = prev.tail or ""
        if len(text.strip()) < 3:
            label = text_of(prev, 200)[-40:]
            if not _DIGIT.search(label):  # a label, not another price
                text = label + text
    else:
        parent = el.getparent()
        text = (parent.text or "") if parent is not None else ""
    return " ".join(text.split())[-30:]


def _ancestry(el: Any, levels: int = 14) -> tuple[str, bool, bool, str]:
    """(names of the 3 closest ancestors, struck through, hidden, names above them)."""
    near: list[str] = []
    far: list[str] = []
    struck = False
    concealed = False
    for depth, anc in enumerate(el.iterancestors()):
        if depth >= levels:
            break
        tag = anc.tag if isinstance(anc.tag, str) else ""
        if tag in ("body", "html"):
            break
        if tag in _SKIP_TAGS or hidden_element(anc):
            concealed = True
        if depth < 3 and (tag in _STRIKE_TAGS or "line-through" in (anc.get("style") or "")):
            struck = True
        names = (anc.get("class") or "") + " " + (anc.get("id") or "")
        (near if depth < 3 else far).append(names)
    return " ".join(near), struck, concealed, " ".join(far)


def _score(el: Any, text: str, level: int, order: int, hints: CurrencyHints) -> _Cand | None:
    amount, currency_text = parse_amount(text, hints)
    if amount is None or hidden_element(el):
        return None
    own_names = _names(el)
    near, struck, concealed, far = _ancestry(el)
    if concealed or _option_label(el):
        return None
    tag = el.tag if isinstance(el.tag, str) else ""
    style = el.get("style") or ""
    regular = struck or tag in _STRIKE_TAGS or "line-through" in style or _all_struck(el)
    score = 0.0
    if _NAME_PRICE.search(own_names):
        score += 3
    elif _NAME_PRICE.search(near):
        score += 2
    if _NAME_GOOD.search(own_names) or _NAME_GOOD.search(near):
        score += 1.5
    if _NAME_REGULAR.search(own_names):
        score -= 2.5
        if _NAME_REGULAR_STRONG.search(own_names):
            regular = True
    if _NAME_EXCLUDE.search(own_names) or _NAME_EXCLUDE.search(near):
        return None
    if _NAME_EXCLUDE.search(far):
        score -= 4
    context = _context_before(el)
    if _CONTEXT_EXCLUDE.search(text) or _CONTEXT_EXCLUDE.search(context):
        return None
    after = _label_after(el)
    if _AFTER_EXCLUDE.match(after):
        return None  # "£58 /mo", "£50 deposit", "£125 per day": not the price
    vat = _vat_kind(f"{own_names} {near} {text} {context} {after}")
    if _CONTEXT_REGULAR.search(text) or _CONTEXT_REGULAR.search(context):
        regular = True
    letters = sum(1 for ch in text if ch.isalpha())
    if letters > 12:
        score -= 2  # a sentence with a number in it, not a price label
    if len(_NUMBER.findall(text)) > 1:
        return None  # several amounts in one text (a container): its children speak
    # A code written beside a sign says which dollar it is ("$39.00 NZD").
    currency = _written_code(text) or currency_text or _currency_mark(text)
    if currency:
        score += 2
    elif not _NAME_PRICE.search(own_names):
        return None
    parent = el.getparent()
    if tag in _EMPHASIS_TAGS or (parent is not None and parent.tag in _EMPHASIS_TAGS):
        score += 1
    if style:
        score += _style_emphasis(style)
    # Nearness to the title: the scan's level is how far it climbed from the <h1>.
    score += max(0.0, 4.0 - level)
    return _Cand(amount, text, currency, score, regular, level, order, el, vat)


# Words right after an amount that make it a rate or a part payment, not the price.
_AFTER_EXCLUDE = re.compile(
    r"\W{0,3}(?:/\s?(?:mo|mth|month|day|week|wk|night|monat|mois|mes)\b|"
    r"(?:per|a|an|each|every|pro|im|par|al|por|al) (?:month|day|week|night|monat|tag|mois|"
    r"jour|mes|mese|día|dia)\b|monthly|deposit|down payment|anzahlung|acompte|caparra|"
    r"monatlich|mensuel)",
    re.I,
)
_OPTION_INPUTS = frozenset({"checkbox", "radio"})


def _option_label(el: Any) -> bool:
    """``el`` sits in the label of a checkbox or radio button: the price of an add-on, a
    service or an option ("Add a care kit £25.00"), not the product's."""
    node = el
    for _ in range(5):  # the element itself ("Gift wrap (+ £3.50)") and four levels above
        if node is None:
            return False
        if node.tag == "label":
            return any(
                (field.get("type") or "").lower() in _OPTION_INPUTS for field in node.iter("input")
            )
        node = node.getparent()
    return False


def _vat_kind(said: str) -> str | None:
    net, gross = bool(_VAT_NET.search(said)), bool(_VAT_GROSS.search(said))
    return "net" if net and not gross else "gross" if gross and not net else None


def _label_after(el: Any) -> str:
    """The short label right after ``el`` (its tail, else the next element's text); ""
    when that holds a number (another price, not a label)."""
    after = (el.tail or "").strip()
    if not after:
        nxt = el.getnext()
        after = " ".join(text_of(nxt, 60).split()) if nxt is not None else ""
    after = after[:40]
    # "incl. 19% VAT" is a label; "Excl. VAT: 36.53 €" is another price.
    return "" if _DIGIT.search(after) and "%" not in after else after


def _all_struck(el: Any) -> bool:
    """Every digit of ``el``'s text sits inside a struck-through descendant."""
    struck = False
    unstruck_text = [el.text or ""]
    for child in el:
        if not isinstance(child.tag, str):
            continue
        if child.tag in _STRIKE_TAGS or "line-through" in (child.get("style") or ""):
            struck = True
        else:
            unstruck_text.append(text_of(child, 200))
        unstruck_text.append(child.tail or "")
    return struck and not _DIGIT.search("".join(unstruck_text))


_FONT_PX = re.compile(r"font(?:-size)?\s*:[^;]*?(\d+(?:\.\d+)?)px", re.I)


def _style_emphasis(style: str) -> float:
    """Inline emphasis: bold, and a large font size."""
    bonus = 0.5 if "bold" in style else 0.0
    match = _FONT_PX.search(style)
    if match and float(match.group(1)) >= 18:
        bonus += 1.5
    return bonus


# A three-letter code right after the amount or right before it (a sign between allowed):
# "$39.00 NZD", "NZD 39.00", "NZD $39"; not a word elsewhere in the text ("TOP DEAL").
_CODE_BESIDE = re.compile(
    r"\d\s?([A-Z]{3})(?![A-Za-z])|(?<![A-Za-z])([A-Z]{3})\s?[^\w\s]{0,2}\s?\d"
)


def _written_code(text: str) -> str | None:
    """An ISO 4217 code written beside the amount in ``text``, if any."""
    for match in _CODE_BESIDE.finditer(text):
        code = match.group(1) or match.group(2)
        if code in ISO_CODES:
            return code
    return None


def _currency_mark(text: str) -> str | None:
    match = _currency_re().search(text)
    return match.group(0) if match else None


@dataclass(slots=True)
class _Scan:
    region: Region
    priced: list[tuple[int, int, Any, str]] = field(default_factory=list)
    stock: list[tuple[int, str]] = field(default_factory=list)
    codes: list[tuple[int, int, str]] = field(default_factory=list)
    buy: bool = False
    count: int = 0
    order: int = 0


def _scan_subtree(sub: Any, level: int, scan: _Scan) -> None:
    for el in sub.iter():
        tag = el.tag
        if not isinstance(tag, str) or tag in _SKIP_TAGS:
            continue
        scan.count += 1
        scan.order += 1
        cls = el.get("class")
        ident = el.get("id")
        names = f"{cls} {ident}" if ident else cls
        text = el.text
        if names and _INTERESTING_NAME.search(names):
            _classify(el, tag, names, level, scan)
        elif tag == "button" or (tag == "input" and el.get("type") in ("submit", "button")):
            _buy_label(el, tag, scan)
        elif el.get("data-price") is not None or el.get("itemprop") == "price":
            own = _own_text(el)
            if own and _DIGIT.search(own):
                scan.priced.append((level, scan.order, el, own))
        elif text and len(text) < 60 and _DIGIT.search(text):
            if _currency_re().search(text):
                own = _own_text(el) or " ".join(text.split())
                scan.priced.append((level, scan.order, el, own))
            elif _BARE_NUMBER.match(text) and len(el) == 0:
                mark = _neighbour_currency(el)
                if mark:
                    # "<b>2320</b><span>元</span>": the sign sits in the next element.
                    scan.priced.append((level, scan.order, el, f"{text.strip()} {mark}"))
        if text and len(text) <= 70 and looks_like_label(text):
            code = code_from_label(text, _following_text(el))
            if code:
                scan.codes.append((level, scan.order, code))
        tail = el.tail
        if tail and len(tail) < 40 and _currency_re().search(tail) and _DIGIT.search(tail):
            parent = el.getparent()
            if parent is not None:
                own = _own_text(parent)
                if own and _DIGIT.search(own):
                    scan.priced.append((level, scan.order, parent, own))


def _neighbour_currency(el: Any) -> str | None:
    """A currency sign written just before or after ``el``, outside it."""
    around = [el.tail or ""]
    nxt = el.getnext()
    if nxt is not None and not (el.tail or "").strip():
        around.append(nxt.text or "")
    prev = el.getprevious()
    if prev is not None:
        around.append(prev.tail if prev.tail and prev.tail.strip() else (prev.text or ""))
    else:
        parent = el.getparent()
        if parent is not None:
            around.append(parent.text or "")
    for text in around:
        text = text.strip()
        if text and len(text) <= 6:
            match = _currency_re().search(text)
            if match:
                return match.group(0)
    return None


def _following_text(el: Any) -> str | None:
    """The text right after ``el``: its tail, or the next sibling's text."""
    tail = el.tail
    if tail and tail.strip():
        return tail
    nxt = el.getnext()
    if nxt is not None:
        return " ".join(text_of(nxt, 120).split())[:60]
    return None


def _classify(el: Any, tag: str, names: str, level: int, scan: _Scan) -> None:
    named_buy = bool(_NAME_BUY.search(names))
    if tag in ("button", "input", "a") or named_buy:
        if _buy_label(el, tag, scan):
            return
        if named_buy and not _short_text(el) and el.get("disabled") is None:
            scan.buy = scan.buy or not scan.region.excludes(el)  # an image "buy" button
            return
    if _NAME_STOCK.search(names):
        label = _short_text(el)
        state = stock_from_text(label) if label else None
        if state and not hidden(el) and not in_chooser(el) and not scan.region.excludes(el):
            scan.stock.append((level, state))
    if _NAME_PRICE.search(names) or el.get("data-price") is not None:
        own = _own_text(el)
        if own is None:
            own = el.get("data-price") or el.get("content")
        if own and _DIGIT.search(own):
            scan.priced.append((level, scan.order, el, own))


def _buy_label(el: Any, tag: str, scan: _Scan) -> bool:
    if tag == "input":
        label = el.get("value") or el.get("aria-label")
    else:
        label = _short_text(el, 80) or el.get("aria-label") or el.get("title")
    if label and says_buy(label):
        if el.get("disabled") is None and "disabled" not in (el.get("class") or ""):
            scan.buy = scan.buy or not scan.region.excludes(el)
        return True
    return False


def _short_text(el: Any, limit: int = 120) -> str | None:
    text = " ".join(text_of(el, 2 * limit).split())
    if not text or len(text) > limit:
        return None
    return text


_TITLE_NAME = re.compile(r"title|name", re.I)


def product_title(headings: list[Any]) -> Any:
    """The product title among the page's ``<h1>`` elements (document order): among the
    first few, one named like a title, else the one with the most letters (a badge such as
    "15% off" can be an ``<h1>`` too)."""
    best = None
    best_key = (False, 0)
    for index, h1 in enumerate(headings):
        if index >= 10:
            break
        letters = sum(1 for ch in text_of(h1, 400) if ch.isalpha())
        if letters < 3 or hidden(h1) or _site_title(h1):
            continue
        names = (h1.get("id") or "") + " " + (h1.get("itemprop") or "")
        key = (bool(_TITLE_NAME.search(names)), min(letters, 200))
        if best is None or key > best_key:
            best, best_key = h1, key
    return best


_SITE_NAMES = re.compile(r"logo|brand|site[-_]?(?:title|name)|masthead", re.I)


def _site_title(h1: Any) -> bool:
    """The ``<h1>`` is the shop's name, not a product's: named as a logo, or all of its text
    a link to the home page (old layouts put the logo in the page's only ``<h1>``)."""
    if _SITE_NAMES.search(f"{h1.get('class') or ''} {h1.get('id') or ''}"):
        return True
    links = [a for a in h1.iter("a") if (a.get("href") or "").strip() in _HOME_LINKS]
    return bool(links) and " ".join(text_of(h1, 400).split()) == " ".join(
        " ".join(text_of(a, 400).split()) for a in links
    )


_HOME_LINKS = frozenset({"/", "./", "index.html", "/index.html", "#"})
# Between a product's name and the shop's in a <title> or og:title.
_TITLE_SEPARATORS = re.compile(
    r"\s+[-|\u2013\u2014:\u00b7\u2022/]+\s+|\s*[\uff5c\u300b\u3010\u3011]\s*"
)
_TITLE_SKIP = frozenset({"a", "option", "select", "script", "style", "title", "button", "label"})
# Where a product's name is shown without being its title: links, controls, page chrome.
_TITLE_SKIP_WITHIN = _TITLE_SKIP | {"header", "footer", "nav"}
_BREADCRUMB = re.compile(r"breadcrumb", re.I)
_NAMED_TITLE_BUDGET = 6000


def named_title(root: Any, names: list[str]) -> Any:
    """The element that shows the product's name when the page has no ``<h1>``: the first
    short element of the body (a link, an option or a list item is never it) whose whole
    text is the page's name as its ``<title>``, ``og:title`` or structured data give it,
    whole or one of its parts between separators ("Name - Shop", "Shop | Name"); one
    whose class or id says title or name wins over the rest. Links, form controls, page
    chrome and breadcrumbs, which repeat names, never count. None when no element does."""
    wanted: set[str] = set()
    for name in names:
        text = " ".join(name.split())
        for part in (text, *_TITLE_SEPARATORS.split(text)):
            part = part.strip()
            if sum(1 for ch in part if ch.isalpha()) >= 3:
                wanted.add(part.casefold())
    if not wanted:
        return None
    longest = max(len(w) for w in wanted)
    body = next(root.iter("body"), None)
    if body is None:
        return None
    best, best_key = None, (False, 0)
    for count, el in enumerate(body.iter()):
        if count >= _NAMED_TITLE_BUDGET:
            break
        tag = el.tag
        if not isinstance(tag, str) or tag in _TITLE_SKIP or not (el.text or len(el)):
            continue
        text = " ".join(text_of(el, longest + 40).split())
        if not text or len(text) > longest or text.casefold() not in wanted:
            continue
        if hidden(el) or any(
            a.tag in _TITLE_SKIP_WITHIN or _BREADCRUMB.search(a.get("class") or "")
            for a in el.iterancestors()
        ):
            continue
        names_ = (el.get("class") or "") + " " + (el.get("id") or "")
        key = (bool(_TITLE_NAME.search(names_)), -count)
        if best is None or key > best_key:
            best, best_key = el, key
    return best


# Wording by which a product's own box withholds its price, in the languages of the shops
# seen: any price read elsewhere on such a page is another product's, a deposit, a fee.
# "Request a quote" alone is not here: priced B2B pages offer quotes for bulk orders.
_WITHHELD = re.compile(
    r"price (?:up)?on (?:request|application|enquiry)|prices? (?:available )?on request|"
    r"call (?:us )?for (?:a |the |our )?pric|contact us for (?:a |the |our )?pric|"
    r"(?:enquire|inquire|ask) (?:for|about) (?:a |the |our )?pric|"
    r"unlock (?:our |the )?(?:member |members' |trade )?pric|"
    r"(?:log ?in|sign in|register)(?: now)? (?:to|for) (?:see|view|get|show)?\s*(?:the |our )?"
    r"(?:price|pricing)|request (?:a |the )?price|\bP\.?O\.?A\.?\b|"
    r"preis auf anfrage|preis anfragen|prix sur (?:demande|devis)|"
    r"prix (?:à|a) (?:demander|la demande)|precio (?:a|bajo) (?:consultar|pedido|demanda)|"
    r"consultar precio|prezzo su richiesta|prezzo a richiesta|prijs op aanvraag|"
    r"cena na (?:zapytanie|vyžádání|dotaz)|pris på (?:forespørsel|förfrågan|forespørgsel)",
    re.I,
)
# What a price slot says when it withholds the price instead of showing it: log in, ask,
# dealers and members only ("Price available after login", "Preis nur für Händler - bitte
# anmelden"). A slot with other words ("Price Match Guarantee", "incl. VAT") is no price
# slot at all: the scan looks further out.
_WITHHOLDING_WORDS = re.compile(
    r"log ?in|sign ?in|sign ?up|register|account|member|dealer|trade|wholesale|b2b|"
    r"request|enquir|inquir|contact|call us|\bask\b|quote|on application|"
    r"anmeld|einlogg|registrier|händler|haendler|anfrage|kontakt|"
    r"connect|inscri|revendeur|demande|devis|"
    r"accede|regist|distribuidor|consult|solicit|"
    r"accedi|rivenditor|richiesta|aanvraag|inloggen|zaloguj|zapytan",
    re.I,
)
# Levels above the title that still hold the product's own box, and elements read there.
_WITHHELD_LEVELS = 3
_WITHHELD_BUDGET = 400


def price_withheld(region: Region) -> bool:
    """The product's own block (a few levels above its title, outside other products and
    page chrome) withholds its price: its price slot, the price-named elements nearest the
    title outside other products' tiles, holds words and no amount ("Price available after
    login", "Preis nur für Händler"); or, with no slot showing an amount, the block says in
    words (:data:`_WITHHELD`) that the price is given on request or to logged-in buyers.
    A slot showing an amount withholds nothing ("Custom sizes: price on request" beside
    the price of the standard one)."""
    title = region.title
    if title is None:
        return False
    scope = title
    slot_shows_amount: bool | None = None
    for _ in range(_WITHHELD_LEVELS):
        parent = scope.getparent()
        if parent is None or parent.tag == "body":
            break
        if slot_shows_amount is None:
            texts = [
                " ".join(text_of(el, 200).split())
                for child in parent
                if child is not scope
                for el in child.iter()
                if isinstance(el.tag, str) and _price_slot(el, region) and not region.in_tile(el)
            ]
            texts = [t for t in texts if _DIGIT.search(t) or _WITHHOLDING_WORDS.search(t)]
            if texts:
                slot_shows_amount = any(_DIGIT.search(t) for t in texts)
                if not slot_shows_amount:
                    return True
        scope = parent
    if slot_shows_amount:
        return False
    for index, el in enumerate(scope.iter()):
        if index >= _WITHHELD_BUDGET:
            break
        if not isinstance(el.tag, str) or el.tag in ("script", "style"):
            continue
        for text in (el.text, el.tail if el is not scope else None):
            if text and len(text) < 300 and _WITHHELD.search(text):
                # The tail belongs to the parent's box, which holds the element.
                owner = el if text is el.text else el.getparent()
                if owner is not None and not region.excludes(owner) and not hidden(owner):
                    return True
    return False


def _price_slot(el: Any, region: Region) -> bool:
    """``el``, beside the title's branch, is named as the product's price (not a list
    price, a unit price, a fee, nor a price inside another product's item scope)."""
    names = _names(el)
    return bool(
        names
        and _NAME_PRICE.search(names)
        and not _NAME_REGULAR.search(names)
        and not _NAME_EXCLUDE.search(names)
        and not region.excludes(el)
        and not any(_product_item(a) for a in el.iterancestors())
        and not hidden(el)
    )


def _product_item(el: Any) -> bool:
    """``el`` opens a microdata or RDFa product item (another product's, beside the title)."""
    kind = el.get("itemtype") if el.get("itemscope") is not None else el.get("typeof")
    return kind is not None and "roduct" in kind


def read_visible(root: Any, hints: CurrencyHints, region: Region) -> VisibleReading:
    """Score the visible prices of the product's ``region``; see the module docstring."""
    reading = VisibleReading(scanned=True)
    scan = _Scan(region)
    anchor = region.title
    if anchor is None:
        body = next(root.iter("body"), None)
        _scan_subtree(body if body is not None else root, MAX_LEVELS, scan)
    else:
        reading.title = clean_text(text_of(anchor, 400))
        _scan_subtree(anchor, 0, scan)
        previous, current, level = anchor, anchor.getparent(), 1
        found_at: int | None = None
        while current is not None and level <= MAX_LEVELS and scan.count < SCAN_BUDGET:
            if current.tag in ("html",):
                break
            text = current.text
            if text and _currency_re().search(text) and _DIGIT.search(text):
                own = _own_text(current)
                if own:
                    scan.priced.append((level, scan.order, current, own))
            for child in current:
                if child is not previous:
                    _scan_subtree(child, level, scan)
                    if scan.count >= SCAN_BUDGET:
                        break
            if found_at is None and _has_good(scan):
                found_at = level
            if found_at is not None and level >= found_at + EXTRA_LEVELS:
                break
            if current.tag == "body":
                break
            previous, current, level = current, current.getparent(), level + 1
    cands = []
    for level, order, el, text in scan.priced[:400]:
        if region.excludes(el):
            continue  # another product's price, or the header's
        cand = _score(el, normalise_text(text), level, order, hints)
        if cand is not None:
            cands.append(cand)
    _choose(reading, cands, hints, anchored=anchor is not None)
    reading.buy_button = scan.buy
    if scan.codes:
        reading.sku = min(scan.codes)[2]
    if scan.stock:
        # The stock label closest to the title is the product's.
        reading.availability = min(scan.stock, key=lambda item: item[0])[1]
    return reading


def _vat_pair(cands: list[_Cand]) -> tuple[_Cand, _Cand] | None:
    """The first net and the first gross price (in page order) when both are shown and
    their ratio is a VAT rate's: (the one shown first, the other)."""
    net = min((c for c in cands if c.vat == "net" and not c.regular), key=_page_order, default=None)
    gross = min(
        (c for c in cands if c.vat == "gross" and not c.regular), key=_page_order, default=None
    )
    if net is not None and gross is None:
        # "Excl. VAT: 36.53 €" beside a plain 40.00 €: the plain one is with VAT.
        gross = min(
            (
                c
                for c in cands
                if c.vat is None
                and not c.regular
                and net.amount < c.amount <= net.amount * _VAT_MAX_RATIO
            ),
            key=_page_order,
            default=None,
        )
        if gross is not None:
            gross.vat = "gross"
    if net is None or gross is None or not net.amount < gross.amount <= net.amount * _VAT_MAX_RATIO:
        return None
    return (net, gross) if _page_order(net) < _page_order(gross) else (gross, net)


def _page_order(cand: _Cand) -> tuple[int, int]:
    return (cand.level, cand.order)


def _has_good(scan: _Scan) -> bool:
    """Cheap test: a price-named element or a currency text was seen."""
    return len(scan.priced) >= 1


def _choose(
    reading: VisibleReading,
    cands: list[_Cand],
    hints: CurrencyHints,
    anchored: bool = True,
) -> None:
    by_amount: dict[Decimal, list[_Cand]] = {}
    regulars: list[_Cand] = []
    for cand in cands:
        if cand.regular:
            regulars.append(cand)
            reading.regular_amounts.add(cand.amount)
            continue
        by_amount.setdefault(cand.amount, []).append(cand)
        reading.amounts.add(cand.amount)
    if not by_amount:
        return
    # The first plausible price after the title is the product's more often than not.
    plausible = [c for c in cands if anchored and not c.regular and c.score >= _FIRST_MIN]
    first = min(plausible, key=lambda c: (c.level, c.order)) if plausible else None
    # "was X, now Y": a price right after a higher struck-through price is the current one.
    for cand in cands:
        if not cand.regular and any(
            r.amount > cand.amount and 0 < cand.order - r.order <= 8 for r in regulars
        ):
            cand.score += 1.0
    ranked = []
    for amount, group in by_amount.items():
        best = max(group, key=lambda c: (c.score, -c.level, -c.order))
        total = best.score + (_FIRST_BONUS if first is not None and first.amount == amount else 0)
        ranked.append((total, -best.level, -best.order, amount, best))
    ranked.sort(key=lambda item: item[:3], reverse=True)
    pair = _vat_pair(cands)
    if pair is not None:
        # Net and gross side by side: the one the page shows first is the price.
        first, other = pair
        reading.vat_pair = VatPair(
            net=first.amount if first.vat == "net" else other.amount,
            gross=first.amount if first.vat == "gross" else other.amount,
        )
        ranked.sort(key=lambda item: item[3] != first.amount)
        ranked[0] = (max(ranked[0][0], _GOOD_SCORE) + 2, *ranked[0][1:])
    total, _, _, amount, best = ranked[0]
    runner_up = ranked[1][0] if len(ranked) > 1 else None
    reading.price = amount
    reading.price_text = best.text
    reading.score = total
    reading.currency_text = best.currency
    reading.currency = resolve_currency(best.currency, hints) if best.currency else None
    margin = total - runner_up if runner_up is not None else total
    reading.strong = (total >= _GOOD_SCORE and margin >= 1.5) or pair is not None
    above = [c for c in regulars if c.amount > amount and c.level <= best.level + 1]
    if above:
        closest = min(above, key=lambda c: (c.level, abs(c.order - best.order)))
        reading.regular, reading.regular_text = closest.amount, closest.text
