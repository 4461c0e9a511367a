"""The storage contract, run on every backend (SQLite and the real PostgreSQL)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from pricewatch.storage import (
    Observation,
    Store,
    StoreUnavailable,
    _values,
    store_from_url,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def obs(
    url: str = "https://shop.test/p/1",
    price: str = "19.99",
    at: datetime = T0,
    *,
    raw_hash: str | None = None,
    currency: str = "EUR",
    regular: str | None = None,
    availability: str | None = "InStock",
    sku: str | None = None,
    domain: str = "shop.test",
    **extra: object,
) -> Observation:
    return Observation(
        url=url,
        domain=domain,
        price=Decimal(price),
        currency=currency,
        raw_hash=f"{price}|{currency}|{regular}|{availability}" if raw_hash is None else raw_hash,
        observed_at=at,
        sku=sku,
        regular_price=None if regular is None else Decimal(regular),
        availability=availability,
        **extra,  # type: ignore[arg-type]
    )


@pytest.fixture
async def store(store_url: str):
    async with store_from_url(store_url) as opened:
        yield opened


async def latest(store: Store, domain: str | None = None):
    return [row async for row in store.latest(domain)]


async def test_first_observation_is_a_change_and_a_product(store: Store) -> None:
    result = await store.write(
        [obs(sku="SKU-1", regular="24.99", name="Kettle", source="jsonld", config_version="v3")]
    )
    assert result.written == 1
    assert result.changed == {"https://shop.test/p/1"}
    assert result.rejected == []
    [row] = await latest(store)
    assert (row.url, row.domain, row.sku, row.name, row.source) == (
        "https://shop.test/p/1",
        "shop.test",
        "SKU-1",
        "Kettle",
        "jsonld",
    )
    assert (row.price, row.currency, row.regular_price) == (
        Decimal("19.99"),
        "EUR",
        Decimal("24.99"),
    )
    assert row.first_seen_at == row.checked_at == row.changed_at == T0
    assert (row.config_version, row.raw_hash) == ("v3", "19.99|EUR|24.99|InStock")
    [change] = await store.history("https://shop.test/p/1")
    assert (change.price, change.observed_at, change.sku) == (Decimal("19.99"), T0, "SKU-1")
    assert change.config_version == "v3"


async def test_every_change_and_hold_keeps_the_config_version_that_observed_it(
    store_url: str,
) -> None:
    from pricewatch.quarantine import QuarantineConfig

    url = "https://shop.test/p/1"
    async with store_from_url(store_url, quarantine=QuarantineConfig()) as store:
        await store.write([obs(url, "10.00", T0, config_version="aaaaaaaaaaaa")])
        await store.write([obs(url, "11.00", T0 + timedelta(minutes=1))])  # an older crawl
        await store.write(
            [obs(url, "99.00", T0 + timedelta(minutes=2), config_version="bbbbbbbbbbbb")]
        )  # held: ratio_up
        history = await store.history(url)
        [held] = await store.quarantine(url)
    assert [(h.price, h.config_version) for h in history] == [
        (Decimal("10.00"), "aaaaaaaaaaaa"),
        (Decimal("11.00"), None),
    ]
    assert (held.status, held.config_version) == ("held", "bbbbbbbbbbbb")


async def test_history_records_changes_only(store: Store) -> None:
    url = "https://shop.test/p/1"
    prices = ["10.00", "10.00", "12.50", "12.50", "12.50", "9.99", "10.00"]
    changed = []
    for minute, price in enumerate(prices):
        result = await store.write([obs(url, price, T0 + timedelta(minutes=minute))])
        assert result.written == 1
        changed.append(url in result.changed)
    assert changed == [True, False, True, False, False, True, True]
    history = await store.history(url)
    assert [h.price for h in history] == [Decimal(p) for p in ("10.00", "12.50", "9.99", "10.00")]
    assert [h.observed_at for h in history] == [T0 + timedelta(minutes=m) for m in (0, 2, 5, 6)]
    [row] = await latest(store)
    assert row.price == Decimal("10.00")
    assert row.first_seen_at == T0
    assert row.changed_at == T0 + timedelta(minutes=6)
    assert row.checked_at == T0 + timedelta(minutes=6)


async def test_unchanged_observation_only_bumps_checked_at(store: Store) -> None:
    await store.write([obs(name="Old name", sku="A")])
    later = T0 + timedelta(hours=1)
    # Same offer hash, other descriptive fields: only the check time moves.
    result = await store.write([obs(at=later, name="New name", sku="B")])
    assert result.changed == set()
    [row] = await latest(store)
    assert (row.checked_at, row.changed_at, row.name, row.sku) == (later, T0, "Old name", "A")
    assert len(await store.history("https://shop.test/p/1")) == 1


OFFER_CHANGES = {
    "price": ({"price": "5.00"}, {"price": "5.01"}),
    "regular_price": ({"regular": "9.00"}, {"regular": None}),
    "currency": ({"currency": "EUR"}, {"currency": "GBP"}),
    "availability": ({"availability": "InStock"}, {"availability": "OutOfStock"}),
}


async def test_each_offer_field_change_appends_history(store: Store) -> None:
    urls = {field: f"https://shop.test/{field}" for field in OFFER_CHANGES}
    await store.write([obs(urls[f], **first) for f, (first, _) in OFFER_CHANGES.items()])
    later = T0 + timedelta(minutes=1)
    result = await store.write(
        [obs(urls[f], at=later, **second) for f, (_, second) in OFFER_CHANGES.items()]
    )
    assert result.changed == set(urls.values())
    for url in urls.values():
        assert len(await store.history(url)) == 2, url


async def test_replayed_batch_adds_no_row(store: Store) -> None:
    batch = [obs(f"https://shop.test/p/{i}", f"{i}.00", sku=f"S{i}") for i in range(1, 6)]
    first = await store.write(batch)
    second_batch = [
        obs(f"https://shop.test/p/{i}", f"{i}.50", T0 + timedelta(minutes=1)) for i in (1, 2)
    ]
    await store.write(second_batch)
    before = [await store.history(o.url) for o in batch]
    rows_before = await latest(store)
    # A crash between commit and acknowledgement: both batches are written again, in order
    # and out of order.
    assert await store.write(second_batch) == await store.write(second_batch)
    replay = await store.write(batch)
    assert replay.written == first.written == 5
    assert [await store.history(o.url) for o in batch] == before
    assert await latest(store) == rows_before


async def test_replay_reports_the_same_changes(store: Store) -> None:
    batch = [obs("https://shop.test/p/1", "1.00"), obs("https://shop.test/p/2", "2.00")]
    await store.write(batch)
    batch2 = [
        obs("https://shop.test/p/1", "1.10", T0 + timedelta(minutes=1)),
        obs("https://shop.test/p/2", "2.00", T0 + timedelta(minutes=1)),
    ]
    first = await store.write(batch2)
    again = await store.write(batch2)
    assert first.changed == again.changed == {"https://shop.test/p/1"}


async def test_late_older_observation_does_not_override_newer(store: Store) -> None:
    await store.write([obs(price="7.00", at=T0 + timedelta(minutes=10))])
    result = await store.write([obs(price="6.00", at=T0)])
    assert result.written == 1
    assert result.changed == set()
    [row] = await latest(store)
    assert row.price == Decimal("7.00")
    assert [h.price for h in await store.history("https://shop.test/p/1")] == [Decimal("7.00")]


async def test_one_url_several_times_in_one_batch(store: Store) -> None:
    url = "https://shop.test/p/1"
    batch = [
        obs(url, "3.00", T0 + timedelta(minutes=2)),
        obs(url, "1.00", T0),
        obs(url, "1.00", T0 + timedelta(minutes=1)),
        obs("https://shop.test/p/2", "5.00", T0),
    ]
    result = await store.write(batch)
    assert result.written == 4
    assert result.changed == {url, "https://shop.test/p/2"}
    assert [h.price for h in await store.history(url)] == [Decimal("1.00"), Decimal("3.00")]
    row = (await latest(store))[0]
    assert (row.price, row.checked_at, row.changed_at) == (
        Decimal("3.00"),
        T0 + timedelta(minutes=2),
        T0 + timedelta(minutes=2),
    )


BAD_ROWS = {
    "negative-price": (obs("https://shop.test/bad/1", "-1.00"), "price_nonnegative"),
    "4-letter": (obs("https://shop.test/bad/2", currency="EURO"), "currency_format"),
    "lowercase": (obs("https://shop.test/bad/3", currency="eur"), "currency_format"),
    "nan-price": (obs("https://shop.test/bad/4", "NaN"), "price_finite"),
    "inf-price": (obs("https://shop.test/bad/5", "Infinity"), "price_finite"),
    "neg-regular": (obs("https://shop.test/bad/6", regular="-5"), "regular_price_nonnegative"),
    "naive": (obs("https://shop.test/bad/7", at=datetime(2026, 3, 1, 12)), "observed_at_naive"),
    "no-hash": (obs("https://shop.test/bad/8", raw_hash=""), "raw_hash_missing"),
    "float-price": (
        Observation("https://shop.test/bad/9", "shop.test", 1.5, "EUR", "h", T0),  # type: ignore[arg-type]
        "price_type",
    ),
}


async def test_bad_rows_are_rejected_and_the_rest_commits(store: Store) -> None:
    good = [obs(f"https://shop.test/p/{i:02}", "4.20") for i in range(len(BAD_ROWS) + 1)]
    batch = [good[0]]
    for i, (bad, _) in enumerate(BAD_ROWS.values()):
        batch += [bad, good[i + 1]]
    result = await store.write(batch)
    assert result.written == len(good)
    assert [(r.observation, r.reason) for r in result.rejected] == list(BAD_ROWS.values())
    assert [row.url for row in await latest(store)] == [o.url for o in good]
    for bad, _ in BAD_ROWS.values():
        assert await store.history(bad.url) == []


@pytest.fixture
def unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows reach the database unchecked: only the schema's constraints stand."""
    for module in ("pricewatch.storage.sqlite", "pricewatch.storage.postgres"):
        monkeypatch.setattr(f"{module}.problem", lambda _obs: None)


DB_BAD_ROWS = [
    pytest.param(obs("https://shop.test/bad", "-1.00"), {"price_nonnegative"}, id="negative"),
    pytest.param(obs("https://shop.test/bad", "NaN"), {"price_finite"}, id="nan"),
    pytest.param(
        obs("https://shop.test/bad", currency="EURO"),
        {"currency_format", "value_too_long"},  # SQLite: CHECK; PostgreSQL: char(3)
        id="4-letter",
    ),
    pytest.param(obs("https://shop.test/bad", currency="usd"), {"currency_format"}, id="lower"),
    pytest.param(
        obs("https://shop.test/bad", regular="-0.01"), {"regular_price_nonnegative"}, id="regular"
    ),
]


@pytest.mark.parametrize("bad, reasons", DB_BAD_ROWS)
async def test_database_constraints_reject_unchecked_rows(
    store: Store, unchecked: None, bad: Observation, reasons: set
) -> None:
    good = [obs(f"https://shop.test/p/{i:02}", "4.20") for i in range(19)]
    result = await store.write([*good[:7], bad, *good[7:]])
    assert result.written == 19
    assert len(result.rejected) == 1
    assert result.rejected[0].observation == bad
    assert result.rejected[0].reason in reasons
    assert result.changed == {o.url for o in good}
    assert [row.url for row in await latest(store)] == [o.url for o in good]
    assert await store.history(bad.url) == []


async def test_several_unchecked_bad_rows_anywhere_in_a_batch(
    store: Store, unchecked: None
) -> None:
    good = [obs(f"https://shop.test/p/{i:03}", "1.00") for i in range(200)]
    bad = [obs(f"https://shop.test/bad/{i}", "-1") for i in range(3)]
    batch = [bad[0], *good[:100], bad[1], *good[100:], bad[2]]
    await store.write(good[:50])  # some are updates, some inserts
    result = await store.write(batch)
    assert result.written == 200
    assert sorted(r.observation.url for r in result.rejected) == [o.url for o in bad]
    assert {r.reason for r in result.rejected} == {"price_nonnegative"}
    assert len(await latest(store)) == 200


DECIMALS = [
    ("0.10", "0.10"),
    ("19999999.99", "19999999.99"),
    ("1E+2", "100"),
    ("100.00", "100.00"),
    ("0", "0"),
    ("-0.00", "0.00"),
    ("12345678901234567890.123456789", "12345678901234567890.123456789"),
    ("0.000001", "0.000001"),
    ("5E-7", "0.0000005"),
]


async def test_decimal_round_trip(store: Store) -> None:
    batch = [
        obs(f"https://shop.test/d/{i}", given, regular=given)
        for i, (given, _) in enumerate(DECIMALS)
    ]
    await store.write(batch)
    rows = {row.url: row for row in await latest(store)}
    out = io.BytesIO()
    await store.export_csv(out.write)
    records = {r["url"]: r for r in csv.DictReader(io.StringIO(out.getvalue().decode()))}
    for o, (given, text) in zip(batch, DECIMALS, strict=True):
        row = rows[o.url]
        [change] = await store.history(o.url)
        for value in (row.price, row.regular_price, change.price, change.regular_price):
            assert isinstance(value, Decimal)
            assert value == Decimal(given)
            assert value.as_tuple() == Decimal(text).as_tuple(), given  # same digits and scale
            assert _values.canonical_decimal(value) == text
        assert records[o.url]["price"] == records[o.url]["regular_price"] == text


async def test_latest_streams_in_url_order_with_domain_filter(store: Store) -> None:
    from pricewatch.storage import sqlite as sqlite_module

    n = sqlite_module.PAGE + 7  # more than one page of the SQLite store
    # About 1 KiB a row, so that the PostgreSQL export (~1 MiB) cannot arrive in one chunk:
    # asyncpg hands over what one socket read brought, and asyncio reads at most 256 KiB at
    # a time, however late the test gets to read (a ~100 KiB export came whole under load).
    name = "Kettle " + "x" * 1000
    batch = [
        obs(f"https://{d}/p/{i:05}", "1.00", domain=d, name=name)
        for i in range(n)
        for d in ("a.test", "b.test")
        if d == "a.test" or i < 3
    ]
    for start in range(0, len(batch), 500):
        await store.write(batch[start : start + 500])
    rows = await latest(store)
    assert len(rows) == n + 3
    assert [r.url for r in rows] == sorted(r.url for r in rows)
    assert [r.url for r in await latest(store, "b.test")] == [
        f"https://b.test/p/{i:05}" for i in range(3)
    ]
    assert await latest(store, "nowhere.test") == []
    chunks: list[bytes] = []
    assert await store.export_csv(chunks.append) == n + 3
    exported = b"".join(chunks)
    assert len(exported) > 1_000_000
    assert len(chunks) > 1  # streamed, not built whole in memory
    assert exported.count(b"\n") == n + 4


async def test_history_by_sku(store: Store) -> None:
    await store.write([obs("https://shop.test/p/1", "1.00", sku="KETTLE-9")])
    await store.write(
        [obs("https://shop.test/p/1", "2.00", T0 + timedelta(days=1), sku="KETTLE-9")]
    )
    await store.write([obs("https://shop.test/p/2", "3.00", sku="OTHER")])
    by_sku = await store.history("KETTLE-9")
    assert [h.price for h in by_sku] == [Decimal("1.00"), Decimal("2.00")]
    assert by_sku == await store.history("https://shop.test/p/1")
    assert await store.history("unknown") == []


async def test_export_csv(store: Store) -> None:
    await store.write(
        [
            obs("https://shop.test/p/2", "5.5", sku="B", name='Mug, "large"', regular="7.00"),
            obs("https://shop.test/p/1", "19999999.99", currency="JPY", availability=None),
        ]
    )
    out = io.BytesIO()
    assert await store.export_csv(out.write) == 2
    text = out.getvalue().decode()
    assert text.splitlines()[0] == (
        "url,domain,sku,name,price,currency,regular_price,availability,"
        "first_seen_at,checked_at,changed_at"
    )
    records = list(csv.DictReader(io.StringIO(text)))
    assert [r["url"] for r in records] == ["https://shop.test/p/1", "https://shop.test/p/2"]
    assert records[0]["price"] == "19999999.99"
    assert records[0]["currency"] == "JPY"
    assert records[0]["regular_price"] == records[0]["availability"] == ""
    assert records[1]["name"] == 'Mug, "large"'
    assert records[1]["price"] == "5.5"
    assert records[1]["checked_at"] == "2026-03-01T12:00:00.000000+00:00"
    domain_only = io.BytesIO()
    assert await store.export_csv(domain_only.write, domain="nowhere.test") == 0
    assert domain_only.getvalue().decode().count("\n") == 1


async def test_migrate_is_idempotent(store_url: str) -> None:
    from pricewatch.storage._migrations import migrations

    store = store_from_url(store_url, auto_migrate=False)
    backend = "sqlite" if store_url.startswith("sqlite") else "postgresql"
    versions = [m.version for m in migrations(backend)]
    assert versions[:2] == [1, 2]
    assert await store.migrate() == versions
    assert await store.migrate() == []
    async with store_from_url(store_url) as opened:  # auto-migrate: nothing to do
        await opened.write([obs()])
    assert await store_from_url(store_url).migrate() == []


async def test_without_auto_migrate_an_unmigrated_store_refuses_to_open(store_url: str) -> None:
    store = store_from_url(store_url, auto_migrate=False)
    with pytest.raises(StoreUnavailable, match="scrapy db upgrade"):
        await store.open()
    await store.migrate()
    async with store_from_url(store_url, auto_migrate=False) as opened:
        assert (await opened.write([obs()])).written == 1


async def test_empty_batch(store: Store) -> None:
    assert await store.write([]) == _values_empty()


def _values_empty():
    from pricewatch.storage import WriteResult

    return WriteResult()


def test_canonical_forms_are_documented_examples() -> None:
    assert _values.canonical_decimal(Decimal("1E+2")) == "100"
    assert _values.canonical_decimal(Decimal("-0")) == "0"
    with pytest.raises(ValueError):
        _values.canonical_decimal(Decimal("NaN"))
    assert _values.iso_utc(T0) == "2026-03-01T12:00:00.000000+00:00"


async def test_generated_decimals_round_trip_exactly(store: Store) -> None:
    """Amounts of every scale and exponent (seeded), written in one batch, read back with
    the same digits and the same scale on every backend."""
    import random

    rng = random.Random(20260301)
    values = [
        Decimal(rng.randrange(0, 10 ** rng.randrange(1, 16))).scaleb(rng.randrange(-9, 4))
        for _ in range(300)
    ]
    batch = [obs(f"https://shop.test/g/{i:03}", str(v)) for i, v in enumerate(values)]
    assert (await store.write(batch)).written == len(batch)
    stored = [row.price for row in await latest(store)]
    assert [s.as_tuple() for s in stored] == [
        _values.normalise_decimal(v).as_tuple() for v in values
    ]
    assert stored == values
