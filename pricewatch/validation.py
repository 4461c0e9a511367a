"""The item contract: a pydantic model every observation must pass before it is stored.

Pure and synchronous: :func:`validate_batch` runs off the event loop, one executor hop per
batch (see ``ValidationPipeline``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Literal, overload

from pydantic import AwareDatetime, BaseModel, ConfigDict, ValidationError, field_validator

from pricewatch.currency import ISO_CODES
from pricewatch.items import OfferItem
from pricewatch.storage import Observation

# Most decimal places a shop price may carry (unit prices of fuel/bulk goods use 3-4).
MAX_SCALE = 4

_URL = re.compile(r"https?://[^/\s?#]+")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# Seven or more digits with phone punctuation, optionally with a leading +.
_PHONE = re.compile(r"(?<![\w.,])\+?\d[\d\s().-]{5,}\d(?![\w.,])")


def redact(text: str | None) -> str | None:
    """Remove personal data (emails, phone numbers) from a free-text field."""
    if text is None:
        return None
    text = _EMAIL.sub("[email]", text)
    text = _PHONE.sub(lambda m: "[phone]" if sum(c.isdigit() for c in m[0]) >= 7 else m[0], text)
    text = " ".join(text.split())
    return text[:500] or None


class InvalidOffer(ValueError):
    """Raised with a short reason code (the stat ``pricewatch/validate/dropped/<reason>``)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def _money(value: Decimal | None, max_price: Decimal) -> Decimal | None:
    if value is None:
        return None
    if not value.is_finite():
        raise ValueError("not_finite")
    if value <= 0:
        raise ValueError("not_positive")
    if value > max_price:
        raise ValueError("absurd")
    exponent = value.normalize().as_tuple().exponent
    assert isinstance(exponent, int)
    if -exponent > MAX_SCALE:
        raise ValueError("scale")
    return value


class PriceObservation(BaseModel):
    """The contract of a stored observation."""

    model_config = ConfigDict(frozen=True, strict=False, extra="forbid")

    url: str
    domain: str
    price: Decimal
    currency: str
    regular_price: Decimal | None = None
    availability: Literal["InStock", "OutOfStock"] | None = None
    sku: str | None = None
    name: str | None = None
    source: str | None = None
    observed_at: AwareDatetime

    @field_validator("url", mode="after")
    @classmethod
    def _url(cls, value: str) -> str:
        if not _URL.match(value):
            raise ValueError("url")
        return value

    @field_validator("currency", mode="before")
    @classmethod
    def _currency(cls, value: object) -> str:
        if not isinstance(value, str) or value.upper() not in ISO_CODES:
            raise ValueError("currency")
        return value.upper()

    @field_validator("name", "sku", mode="after")
    @classmethod
    def _free_text(cls, value: str | None) -> str | None:
        return redact(value)

    def raw_hash(self) -> str:
        """Deterministic hash of the normalised offer: equal means unchanged."""
        parts = (
            _canonical(self.price),
            _canonical(self.regular_price),
            self.currency,
            self.availability or "",
        )
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def _canonical(value: Decimal | None) -> str:
    """Fixed-point text without exponent or trailing zeros beyond the cents."""
    if value is None:
        return ""
    normal = value.normalize()
    if normal.as_tuple().exponent > -2:  # type: ignore[operator]
        normal = normal.quantize(Decimal("0.01"))
    return format(normal, "f")


@overload
def canonical_decimal(value: Decimal) -> Decimal: ...
@overload
def canonical_decimal(value: None) -> None: ...
def canonical_decimal(value: Decimal | None) -> Decimal | None:
    """The stored form: the scale as the shop wrote it, but no exponent
    (``Decimal("1E+2")`` -> ``Decimal("100")``, ``Decimal("0.10")`` unchanged)."""
    if value is None:
        return None
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    return value.quantize(Decimal(1)) if exponent > 0 else value


def validate(item: OfferItem, max_price: Decimal) -> Observation:
    """Validate one item; raises :class:`InvalidOffer` with a reason code."""
    offer = item.offer
    if offer.price is None:
        raise InvalidOffer("no_price", item.url)
    try:
        price = _money(offer.price, max_price)
        regular = _money(offer.regular_price, max_price)
    except ValueError as exc:
        raise InvalidOffer(str(exc), f"{offer.price!r} on {item.url}") from None
    if regular is not None and price is not None and regular <= price:
        # A "list price" at or below the selling price is a mis-read, not a discount.
        regular = None
    if offer.currency is None:
        raise InvalidOffer("no_currency", item.url)
    try:
        model = PriceObservation.model_validate(
            {
                "url": item.url,
                "domain": item.domain,
                "price": price,
                "currency": offer.currency,
                "regular_price": regular,
                "availability": offer.availability,
                "sku": offer.sku,
                "name": offer.name,
                "source": offer.source,
                "observed_at": item.fetched_at,
            }
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        reason = str(error.get("ctx", {}).get("error", "")) or str(error["loc"][0])
        raise InvalidOffer(reason or "invalid", f"{error['msg']} on {item.url}") from None
    return Observation(
        url=model.url,
        domain=model.domain,
        price=canonical_decimal(model.price),
        currency=model.currency,
        raw_hash=model.raw_hash(),
        observed_at=model.observed_at,
        sku=model.sku,
        regular_price=canonical_decimal(model.regular_price),
        availability=model.availability,
        name=model.name,
        source=model.source,
    )


def validate_batch(
    items: Sequence[OfferItem], max_price: Decimal
) -> list[Observation | InvalidOffer]:
    """Validate many items in one go (runs in a worker thread)."""
    results: list[Observation | InvalidOffer] = []
    for item in items:
        try:
            results.append(validate(item, max_price))
        except InvalidOffer as exc:
            results.append(exc)
    return results


def utc_now() -> datetime:
    from datetime import UTC

    return datetime.now(UTC)
