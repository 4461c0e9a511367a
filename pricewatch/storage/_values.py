"""Value rules shared by every store backend: the canonical text of money and time, the
row checks that mirror the database constraints, and the order a batch is applied in.

Canonical money: fixed-point text without an exponent, with the scale the value was
given (``Decimal("0.10")`` -> ``"0.10"``, ``Decimal("1E+2")`` -> ``"100"``,
``Decimal("-0.00")`` -> ``"0.00"``). It is what PostgreSQL's ``numeric`` keeps, so both
backends give back the same ``Decimal`` and the same string.

Canonical time: ISO-8601 in UTC with microseconds, ``2026-01-31T12:00:00.000000+00:00``
(fixed width, so text order is time order in SQLite; PostgreSQL keeps microseconds too).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal

from pricewatch.storage.base import Observation

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
