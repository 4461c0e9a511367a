"""What one source (a syntax, a rule, the visible text) says about the page's offer."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

# Stock terms, compared with case, spaces, hyphens and underscores removed, after any
# schema.org URL or prefix ("http://schema.org/InStock", "schema:InStock").
#
# schema.org ItemAvailability -> what a shopper can do today:
#   InStock, LimitedAvailability, OnlineOnly, InStoreOnly -> InStock (it can be bought);
#   PreOrder, PreSale, BackOrder, MadeToOrder -> InStock (it can be ordered now, shipped later);
#   OutOfStock, SoldOut, Discontinued, Reserved -> OutOfStock (it cannot be bought).
# Beyond schema.org: the usual shop and feed spellings, booleans, and classified-ad
# statuses ("SOLD" is gone; "NOT SOLD"/"unsold"/"for sale" is still on offer).
_IN_STOCK = {
    "instock",
    "limitedavailability",
    "onlineonly",
    "instoreonly",
    "preorder",
    "presale",
    "backorder",
    "madetoorder",
    "available",
    "availablenow",
    "true",
    "1",
    "yes",
    "notsold",
    "unsold",
    "forsale",
}
_OUT_OF_STOCK = {
    "outofstock",
    "soldout",
    "discontinued",
    "reserved",
    "sold",
    "notinstock",
    "false",
    "0",
    "no",
    "unavailable",
    "notavailable",
    "oos",
}
_TERM_NOISE = re.compile(r"[\s_\-]+")


def normalise_availability(value: object) -> str | None:
    """schema.org URLs/terms, feed and shop words, booleans -> InStock / OutOfStock / None
    (see the table above; unknown words give None, never a guess)."""
    if isinstance(value, bool):
        return "InStock" if value else "OutOfStock"
    if isinstance(value, list):
        for item in value:
            result = normalise_availability(item)
            if result:
                return result
        return None
    if isinstance(value, dict):
        return normalise_availability(value.get("@id") or value.get("name"))
    if not isinstance(value, str):
        return None
    term = value.strip().rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    term = _TERM_NOISE.sub("", term).lower()
    if term in _IN_STOCK:
        return "InStock"
    if term in _OUT_OF_STOCK:
        return "OutOfStock"
    return None


@dataclass(slots=True)
class Candidate:
    """One reading of the offer. ``price`` is already a valid Decimal (or None)."""

    source: str
    price: Decimal | None = None
    price_text: str | None = None
    currency_raw: str | None = None
    regular_price: Decimal | None = None
    regular_price_text: str | None = None
    availability: str | None = None
    sku: str | None = None
    gtin: str | None = None
    name: str | None = None
    # Alternative prices the same source offers (variants, other offers): evidence only.
    alternatives: list[Decimal] = field(default_factory=list)
    # Why the offer has no valid price (``pricewatch.extract._money.REASONS``): it was
    # missing, zero or junk. Such an offer's stock claim is suspect too.
    price_problem: str | None = None
    # What an ambiguous price text can mean ("1.099" EUR: 1.099 or 1099), while ``price``
    # is None (``price_problem`` ``price_ambiguous``): the page's own text decides.
    readings: tuple[Decimal, ...] = ()
    # Lower is more likely the page's own product (URL match, not in a related list).
    rank: int = 0
    # The reading is of the page's own product (not a listed or recommended one).
    own: bool = False

    def useful(self) -> bool:
        return self.price is not None or self.availability is not None or bool(self.sku)


_GTIN_LENGTHS = (8, 12, 13, 14)
_NON_DIGITS = re.compile(r"\D")


def valid_gtin(value: object) -> str | None:
    """A GTIN-8/12/13/14 whose check digit is right, as digits; else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None
    digits = value.strip()
    if not digits.isascii() or not digits.isdigit() or len(digits) not in _GTIN_LENGTHS:
        return None
    total = 0
    for index, char in enumerate(reversed(digits[:-1])):
        total += int(char) * (3 if index % 2 == 0 else 1)
    if (10 - total % 10) % 10 != int(digits[-1]):
        return None
    if set(digits) == {"0"}:
        return None
    return digits


def clean_text(value: object, limit: int = 300) -> str | None:
    """A short single-line string, or None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())
    if not text or len(text) > limit:
        return None
    return text


_NAME_NOISE = re.compile(r"[\W_]+")


def _normal_name(text: str | None) -> str:
    """Letters and digits only, case folded: "256GB" and "256 GB", "Pro-Max" and "Pro Max"
    are written alike."""
    return _NAME_NOISE.sub("", (text or "").casefold())


def name_affinity(name: str | None, title: str | None) -> int | None:
    """How closely ``name`` names the product of the page's ``title``, ignoring case,
    spacing and punctuation: 0 the same, 1 within the title ("iPhone 15 Pro 256 GB" in
    "Apple iPhone 15 Pro 256GB - Natural Titanium"), 2 the title and more ("... + Speakers
    Bundle"); None when neither holds the other."""
    a, b = _normal_name(name), _normal_name(title)
    if len(a) < 4 or len(b) < 4:
        return None
    if a == b:
        return 0
    if a in b:
        return 1
    return 2 if b in a else None


def names_match(name: str | None, title: str | None) -> bool:
    """``name`` and the page's ``title`` name the same product (:func:`name_affinity`)."""
    return name_affinity(name, title) is not None


def same_product(a: Candidate, b: Candidate) -> bool:
    """Two readings of one product: the same SKU, GTIN or name (two plugins writing one
    product often give it SKUs of their own)."""
    if a.sku and b.sku and a.sku.strip().lower() == b.sku.strip().lower():
        return True
    if a.gtin and b.gtin and a.gtin == b.gtin:
        return True
    return bool(a.name and b.name and _normal_name(a.name) == _normal_name(b.name))
