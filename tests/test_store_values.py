"""The value rules every store backend shares: canonical money and time, row checks,
and the rounds a batch is applied in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pricewatch.storage import Observation
from pricewatch.storage._migrations import migrations, sqlite_statements
from pricewatch.storage._values import (
    canonical_decimal,
    in_rounds,
    iso_utc,
    parse_iso,
    problem,
    stored_decimal,
    stored_text,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
amounts = st.decimals(allow_nan=False, allow_infinity=False, min_value=0, max_value=10**12)


@given(amounts)
def test_canonical_text_is_fixed_point_and_round_trips(value: Decimal) -> None:
    text = canonical_decimal(value)
    assert "E" not in text.upper()
    assert not text.startswith("-")
    assert Decimal(text) == value
    assert canonical_decimal(Decimal(text)) == text
    # The scale is kept (trailing zeros of "19.90" stay), except positive exponents.
    assert -Decimal(text).as_tuple().exponent == max(0, -value.as_tuple().exponent)


@given(st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5, minutes=-30))])))
def test_iso_utc_is_fixed_width_and_orders_like_time(moment: datetime) -> None:
    text = iso_utc(moment)
    assert len(text) == len("2026-03-01T12:00:00.000000+00:00")
    assert text.endswith("+00:00")
    assert parse_iso(text) == moment
    later = iso_utc(moment + timedelta(microseconds=1)) if moment.year < 9999 else text
    assert later >= text


def test_naive_time_and_non_finite_amounts_are_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        iso_utc(datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="finite"):
        canonical_decimal(Decimal("Infinity"))
    # ... but kept as they are for the database constraints to refuse.
    assert stored_text(Decimal("NaN")) == "NaN"
    assert stored_decimal(Decimal("-Infinity")).is_infinite()
    assert stored_text(Decimal("1E+3")) == "1000"


def observation(url: str = "https://a.test/1", at: datetime = T0, **changes: object) -> Observation:
    fields: dict[str, object] = {
        "url": url,
        "domain": "a.test",
        "price": Decimal("1.00"),
        "currency": "EUR",
        "raw_hash": "h",
        "observed_at": at,
    }
    fields.update(changes)
    return Observation(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "changes, reason",
    [
        ({}, None),
        ({"price": Decimal("0")}, None),
        ({"regular_price": Decimal("2.00")}, None),
        ({"url": ""}, "url_missing"),
        ({"domain": None}, "domain_missing"),
        ({"price": None}, "price_missing"),
        ({"price": 1.0}, "price_type"),
        ({"price": "1.00"}, "price_type"),
        ({"price": Decimal("-0.01")}, "price_nonnegative"),
        ({"price": Decimal("sNaN")}, "price_finite"),
        ({"regular_price": Decimal("Infinity")}, "regular_price_finite"),
        ({"regular_price": Decimal("-1")}, "regular_price_nonnegative"),
        ({"currency": "EU"}, "currency_format"),
        ({"currency": "€"}, "currency_format"),
        ({"currency": None}, "currency_format"),
        ({"observed_at": "2026-01-01"}, "observed_at_type"),
        ({"observed_at": datetime(2026, 1, 1)}, "observed_at_naive"),
        ({"sku": 12}, "sku_type"),
        ({"availability": b"InStock"}, "availability_type"),
    ],
)
def test_problem_codes(changes: dict, reason: str | None) -> None:
    assert problem(observation(**changes)) == reason


def test_rounds_hold_each_url_once_oldest_first() -> None:
    a0, a1, a2 = (observation("https://a.test/1", T0 + timedelta(minutes=m)) for m in (0, 1, 2))
    b0 = observation("https://a.test/2", T0)
    rounds = in_rounds([a2, b0, a0, a1])
    assert rounds == [[a0, b0], [a1], [a2]]
    assert in_rounds([b0, a0]) == [[a0, b0]]
    assert in_rounds([]) == []


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migrations_are_numbered_from_one(backend: str) -> None:
    found = migrations(backend)
    assert [m.version for m in found] == list(range(1, len(found) + 1))
    assert all(m.sql.strip() for m in found)


def test_sqlite_statements_split_whole_statements() -> None:
    script = "-- a comment; with a semicolon\nCREATE TABLE t (a TEXT DEFAULT ';');\n\nSELECT 1;\n"
    assert sqlite_statements(script) == [
        "-- a comment; with a semicolon\nCREATE TABLE t (a TEXT DEFAULT ';');",
        "SELECT 1;",
    ]
    with pytest.raises(ValueError, match="incomplete"):
        sqlite_statements("CREATE TABLE t (a TEXT")
