"""What one source (a syntax, a rule, the visible text) says about the page's offer."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

_IN_STOCK = {
    "instock",
    "instoreonly",
    "onlineonly",
    "limitedavailability",
    "presale",
    "preorder",
    "backorder",
    "in stock",
    "available",
    "in_stock",
    "true",
    "1",
    "yes",
    "madetoorder",
}
_OUT_OF_STOCK = {
    "outofstock",
    "soldout",
    "discontinued",
    "out of stock",
    "out_of_stock",
    "false",
    "0",
    "no",
    "unavailable",
    "notavailable",
    "oos",
    "sold out",
}


def normalise_availability(value: object) -> str | None:
    """schema.org URLs/terms, OpenGraph words and booleans -> InStock / OutOfStock / None."""
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
    term = value.strip().rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].lower()
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
    # A price was given but is zero or junk: the offer's other claims are suspect too.
    junk_price: bool = False
    # Lower is more likely the page's own product (URL match, not in a related list).
    rank: int = 0

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
