"""Value rules shared by every store backend: the canonical text of money and time, the
row checks that mirror the database constraints, the order a batch is applied in, and how
a row read back becomes a :class:`ProductRow`, :class:`ChangeRow` or :class:`HeldRow`.

Canonical money: fixed-point text without an exponent, with the scale the value was
given (``Decimal("0.10")`` -> ``"0.10"``, ``Decimal("1E+2")`` -> ``"100"``,
``Decimal("-0.00")`` -> ``"0.00"``). It is what PostgreSQL's ``numeric`` keeps, so both
backends give back the same ``Decimal`` and the same string.

Canonical time: ISO-8601 in UTC with microseconds, ``2026-01-31T12:00:00.000000+00:00``
(fixed width, so text order is time order in SQLite; PostgreSQL keeps microseconds too).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from pricewatch.storage.base import ChangeRow, HeldRow, Observation, ProductRow

_CURRENCY = re.compile(r"[A-Z]{3}")


def canonical_decimal(value: Decimal) -> str:
    """Fixed-point text of a finite Decimal, scale kept, no exponent, no negative zero."""
    if not value.is_finite():
        raise ValueError(f"not a finite amount: {value!r}")
    text = format(value, "f")
    if value.is_zero():
        text = text.lstrip("-")
    return text


def normalise_decimal(value: Decimal) -> Decimal:
    """The Decimal both backends give back for ``value``."""
    return Decimal(canonical_decimal(value))


def stored_text(value: Decimal) -> str:
    """The TEXT a Decimal is stored as: canonical when finite; otherwise ``NaN`` or
    ``Infinity``, which the CHECK constraints then refuse (never silently altered)."""
    return canonical_decimal(value) if value.is_finite() else str(value)


def stored_decimal(value: Decimal) -> Decimal:
    """The Decimal sent to a ``numeric`` column (non-finite values left for the CHECKs)."""
    return normalise_decimal(value) if value.is_finite() else value


def iso_utc(moment: datetime) -> str:
    """``2026-01-31T12:00:00.000000+00:00`` for an aware datetime."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"naive datetime: {moment!r}")
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _money_problem(value: object, field: str, required: bool) -> str | None:
    if value is None:
        return f"{field}_missing" if required else None
    if not isinstance(value, Decimal):
        return f"{field}_type"
    if not value.is_finite():
        return f"{field}_finite"
    if value < 0:
        return f"{field}_nonnegative"
    return None


def problem(obs: Observation) -> str | None:
    """The reason code the database would reject ``obs`` with, or ``None`` if it is fine.

    The codes are the names of the CHECK constraints of the schema (``price_nonnegative``,
    ``currency_format``, ...), or ``<field>_missing`` / ``<field>_type`` for a missing or
    mistyped required value. Checking before writing gives the same codes on every
    backend; the database constraints stay the backstop.
    """
    for name in ("url", "domain", "raw_hash"):
        value = getattr(obs, name)
        if not isinstance(value, str) or not value:
            return f"{name}_missing"
    reason = _money_problem(obs.price, "price", required=True) or _money_problem(
        obs.regular_price, "regular_price", required=False
    )
    if reason:
        return reason
    if not isinstance(obs.currency, str) or not _CURRENCY.fullmatch(obs.currency):
        return "currency_format"
    if not isinstance(obs.observed_at, datetime):
        return "observed_at_type"
    if obs.observed_at.tzinfo is None or obs.observed_at.utcoffset() is None:
        return "observed_at_naive"
    for name in ("sku", "availability", "name", "source", "config_version"):
        value = getattr(obs, name)
        if value is not None and not isinstance(value, str):
            return f"{name}_type"
    return None


def in_rounds(batch: Sequence[Observation]) -> list[list[Observation]]:
    """Split a batch so that no round holds one URL twice, oldest observation first.

    Round ``k`` holds the ``k``-th observation of every URL of the batch (by
    ``observed_at``); a batch with distinct URLs is one round.
    """
    rounds: list[list[Observation]] = []
    seen: dict[str, int] = {}
    for obs in sorted(batch, key=lambda o: (o.url, o.observed_at)):
        k = seen.get(obs.url, 0)
        seen[obs.url] = k + 1
        if k == len(rounds):
            rounds.append([])
        rounds[k].append(obs)
    return rounds


@dataclass(frozen=True, slots=True)
class Columns:
    """How a backend's columns read back: ``amount`` turns a stored amount into the
    canonical ``Decimal``, ``time`` a stored timestamp into an aware ``datetime``. Rows are
    the columns of the backend's queries, in the same order for both backends."""

    amount: Callable[[Any], Decimal]
    time: Callable[[Any], datetime]

    def _optional_amount(self, value: Any) -> Decimal | None:
        return None if value is None else self.amount(value)

    def product(self, r: Sequence[Any]) -> ProductRow:
        return ProductRow(
            url=r[0],
            domain=r[1],
            sku=r[2],
            price=self.amount(r[3]),
            currency=r[4],
            regular_price=self._optional_amount(r[5]),
            availability=r[6],
            name=r[7],
            source=r[8],
            first_seen_at=self.time(r[9]),
            checked_at=self.time(r[10]),
            changed_at=self.time(r[11]),
            raw_hash=r[12],
            config_version=r[13],
        )

    def change(self, r: Sequence[Any]) -> ChangeRow:
        return ChangeRow(**self._change_fields(r), config_version=r[8])

    def held(self, r: Sequence[Any]) -> HeldRow:
        return HeldRow(
            **self._change_fields(r),
            reason=r[8],
            status=r[9],
            attempt=r[10],
            resolved_at=None if r[11] is None else self.time(r[11]),
            config_version=r[12],
        )

    def _change_fields(self, r: Sequence[Any]) -> dict[str, Any]:
        return {
            "url": r[0],
            "sku": r[1],
            "price": self.amount(r[2]),
            "currency": r[3].strip(),  # PostgreSQL's char(3) of the quarantine table
            "regular_price": self._optional_amount(r[4]),
            "availability": r[5],
            "observed_at": self.time(r[6]),
            "raw_hash": r[7],
        }
