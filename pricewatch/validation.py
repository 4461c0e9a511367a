"""The item contract: a pydantic model every observation must pass before it is stored.

Pure and synchronous: :func:`validate_batch` runs off the event loop, one executor hop per
batch (see ``ValidationPipeline``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Annotated, Literal, overload

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from pricewatch._text import clean_text
from pricewatch.currency import ISO_CODES
from pricewatch.items import OfferItem
from pricewatch.storage import Observation

# Most decimal places a shop price may carry (unit prices of fuel/bulk goods use 3-4).
MAX_SCALE = 4
# The reason codes of the model's own rules: the types of the PydanticCustomErrors it raises.
REASONS = frozenset(
    {"no_price", "not_finite", "not_positive", "absurd", "scale", "no_currency", "currency", "url"}
)

_URL = re.compile(r"https?://[^/\s?#]+")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# Seven or more digits with phone punctuation, optionally with a leading +.
_PHONE = re.compile(r"(?<![\w.,])\+?\d[\d\s().-]{5,}\d(?![\w.,])")


def redact(text: str | None) -> str | None:
    """Remove personal data (emails, phone numbers) from a free-text field."""
    if text is None:
        return None
    text = clean_text(text)  # one form for both stores (pricewatch._text)
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


def _check_money(value: Decimal, info: ValidationInfo) -> Decimal:
    """The money rules of every amount: finite, positive, at most
    ``context["max_price"]``, at most :data:`MAX_SCALE` decimal places. A broken rule is a
    ``PydanticCustomError`` whose type is the drop reason."""
    if not value.is_finite():
        raise PydanticCustomError("not_finite", "amount {amount} is not a number", _ctx(value))
    if value <= 0:
        raise PydanticCustomError("not_positive", "amount {amount} is not positive", _ctx(value))
    max_price: Decimal = (info.context or {})["max_price"]
    if value > max_price:
        raise PydanticCustomError(
            "absurd",
            "amount {amount} is above {max_price}",
            {**_ctx(value), "max_price": str(max_price)},
        )
    exponent = value.normalize().as_tuple().exponent
    assert isinstance(exponent, int)
    if -exponent > MAX_SCALE:
        raise PydanticCustomError(
            "scale",
            "amount {amount} has more than {max_scale} decimal places",
            {**_ctx(value), "max_scale": MAX_SCALE},
        )
    return value


def _ctx(value: Decimal) -> dict[str, str]:
    return {"amount": repr(value)}


# A shop's amount: a Decimal (NaN and infinities reach the money rules, which name them).
Money = Annotated[Decimal, Field(allow_inf_nan=True), AfterValidator(_check_money)]


class PriceObservation(BaseModel):
    """The contract of a stored observation.

    Every rule it breaks is a pydantic error whose ``type`` is the drop reason (the stat
    ``pricewatch/validate/dropped/<type>``); fields are declared in the order their rules
    are checked, so the first error is the reason.
    Validate with ``context={"max_price": Decimal(...)}``.
    """

    model_config = ConfigDict(frozen=True, strict=False, extra="forbid")

    price: Money
    # A "list price" at or below the selling price is a mis-read, not a discount: dropped.
    regular_price: Money | None = None
    currency: str
    url: str
    domain: str
    availability: Literal["InStock", "OutOfStock"] | None = None
    sku: str | None = None
    name: str | None = None
    source: str | None = None
    observed_at: AwareDatetime

    @field_validator("price", mode="before")
    @classmethod
    def _price_present(cls, value: object) -> object:
        if value is None:
            raise PydanticCustomError("no_price", "the offer has no price")
        return value

    @field_validator("regular_price", mode="after")
    @classmethod
    def _a_discount(cls, value: Decimal | None, info: ValidationInfo) -> Decimal | None:
        price = info.data.get("price")
        if value is not None and price is not None and value <= price:
            return None
        return value

    @field_validator("currency", mode="before")
    @classmethod
    def _currency(cls, value: object) -> str:
        if value is None:
            raise PydanticCustomError("no_currency", "the offer has no currency")
        if not isinstance(value, str) or value.upper() not in ISO_CODES:
            raise PydanticCustomError(
                "currency", "{currency!r} is not an ISO 4217 code", {"currency": repr(value)}
            )
        return value.upper()

    @field_validator("url", mode="after")
    @classmethod
    def _url(cls, value: str) -> str:
        if not _URL.match(value):
            raise PydanticCustomError("url", "not an http(s) URL")
        return value

    @field_validator("name", "sku", mode="after")
    @classmethod
    def _free_text(cls, value: str | None) -> str | None:
        return redact(value)

    def raw_hash(self) -> str:
        """Deterministic hash of the normalised offer: equal means unchanged."""
        parts = (
            _hashed_amount(self.price),
            _hashed_amount(self.regular_price),
            self.currency,
            self.availability or "",
        )
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def _hashed_amount(value: Decimal | None) -> str:
    """An amount as the offer hash sees it: fixed-point, no trailing zeros beyond the
    cents (``19.990`` and ``19.99`` hash the same)."""
    if value is None:
        return ""
    normal = value.normalize()
    if normal.as_tuple().exponent > -2:  # type: ignore[operator]
        normal = normal.quantize(Decimal("0.01"))
    return format(normal, "f")


@overload
def without_exponent(value: Decimal) -> Decimal: ...
@overload
def without_exponent(value: None) -> None: ...
def without_exponent(value: Decimal | None) -> Decimal | None:
    """The stored form: the scale as the shop wrote it, but no exponent
    (``Decimal("1E+2")`` -> ``Decimal("100")``, ``Decimal("0.10")`` unchanged)."""
    if value is None:
        return None
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    return value.quantize(Decimal(1)) if exponent > 0 else value


def _reason(error: ErrorDetails) -> str:
    """The drop reason of a pydantic error: the type of the project's own rules
    (``PydanticCustomError``), else the field whose type or literal did not match."""
    if error["type"] in REASONS:
        return error["type"]
    return str(error["loc"][0]) if error["loc"] else "invalid"


def validate(item: OfferItem, max_price: Decimal, config_version: str | None = None) -> Observation:
    """Validate one item; raises :class:`InvalidOffer` with a reason code. The observation
    carries ``config_version`` (:mod:`pricewatch.configversion`)."""
    offer = item.offer
    try:
        model = PriceObservation.model_validate(
            {
                "price": offer.price,
                "regular_price": offer.regular_price,
                "currency": offer.currency,
                "url": item.url,
                "domain": item.domain,
                "availability": offer.availability,
                "sku": offer.sku,
                "name": offer.name,
                "source": offer.source,
                "observed_at": item.fetched_at,
            },
            context={"max_price": max_price},
        )
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        raise InvalidOffer(_reason(error), f"{error['msg']} on {item.url}") from None
    return Observation(
        url=model.url,
        domain=model.domain,
        price=without_exponent(model.price),
        currency=model.currency,
        raw_hash=model.raw_hash(),
        observed_at=model.observed_at,
        sku=model.sku,
        regular_price=without_exponent(model.regular_price),
        availability=model.availability,
        name=model.name,
        source=model.source,
        config_version=config_version,
    )


def validate_batch(
    items: Sequence[OfferItem], max_price: Decimal, config_version: str | None = None
) -> list[Observation | InvalidOffer]:
    """Validate many items in one go (runs in a worker thread)."""
    results: list[Observation | InvalidOffer] = []
    for item in items:
        try:
            results.append(validate(item, max_price, config_version))
        except InvalidOffer as exc:
            results.append(exc)
    return results
