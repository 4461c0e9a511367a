"""What extraction returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import Any


@dataclass(frozen=True, slots=True)
class Offer:
    """The offer read off one product page.

    ``price``/``regular_price`` are ``Decimal`` (never float) parsed from ``price_text``/
    ``regular_price_text``, which keep the raw text. ``currency`` is an ISO 4217 code.
    ``availability`` is ``"InStock"``, ``"OutOfStock"`` or None. ``source`` says where
    the price came from: ``jsonld``, ``microdata``, ``opengraph``, ``rule``, ``visible``,
    ``xhr`` or ``api``.

    When the page shows the price both without and with VAT, ``price`` is the one its buy
    box presents first, ``price_kind`` says which (``"net"``/``"gross"``) and
    ``other_price`` is the other one (kept with the offer only: the store keeps ``price``).
    ``no_price_reason`` says why a page whose own structured offer exists has no price
    (``pricewatch.extract.REASONS``: ``price_missing``, ``price_not_positive``,
    ``price_not_finite``, ``price_out_of_range``, ``price_exponent``,
    ``price_not_a_number``, ``price_from``, ``price_ambiguous``, ``price_scale``).
    """

    price: Decimal | None = None
    currency: str | None = None
    regular_price: Decimal | None = None
    availability: str | None = None
    sku: str | None = None
    gtin: str | None = None
    name: str | None = None
    source: str | None = None
    price_text: str | None = None
    regular_price_text: str | None = None
    other_price: Decimal | None = None
    price_kind: str | None = None
    no_price_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict: prices as decimal strings, exactly as parsed."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, Decimal):
                out[key] = str(value)
        return out
