"""Confirm before publishing: the quarantine contract, run on every store backend (SQLite
and the real PostgreSQL), and the frontier's "confirm soon" due time on every frontier."""

from __future__ import annotations

import time
from datetime import timedelta
from decimal import Decimal

import pytest
from scrapy.settings import Settings

from pricewatch import settings as project_settings
from pricewatch.frontier import Completion, Entry, Frontier
from pricewatch.outcomes import Outcome
from pricewatch.quarantine import QuarantineConfig
from pricewatch.storage import Store, store_from_url
from tests.fixtures.redis import MakeFrontier

from .test_store_contract import T0, latest, obs

CONFIG = QuarantineConfig(
    ratio=Decimal(3), minimum_floor=Decimal("0.5"), confirm_delay=0, max_confirmations=2
)
URL = "https://shop.test/p/1"


def at(minutes: int):  # type: ignore[no-untyped-def]
    return T0 + timedelta(minutes=minutes)


@pytest.fixture
async def store(store_url: str):
    async with store_from_url(store_url, quarantine=CONFIG) as opened:
        yield opened


async def published(store: Store) -> list[tuple[Decimal, str]]:
    return [(c.price, c.currency) for c in await store.history(URL)]


async def held(store: Store) -> list[tuple[Decimal, str, str, str, int]]:
    return [
        (h.price, h.currency, h.reason, h.status, h.attempt) for h in await store.quarantine(URL)
    ]


async def test_first_observation_is_published_whatever_its_price(store: Store) -> None:
    result = await store.write([obs(price="99999.00")])
    assert result.changed == {URL} and result.held == {}
    assert await store.quarantine() == []


async def test_a_glitch_is_held_then_rejected_when_the_next_fetch_disagrees(store: Store) -> None:
    await store.write([obs(price="20.00", at=at(0))])
    result = await store.write([obs(price="200.00", at=at(1))])  # a one-fetch x10 glitch
    assert result.held == {URL: "ratio_up"}
    assert result.changed == set() and result.written == 1
    [row] = await latest(store)
    assert (row.price, row.changed_at, row.checked_at) == (Decimal("20.00"), at(0), at(0))
    assert await held(store) == [(Decimal("200.00"), "EUR", "ratio_up", "held", 1)]

    result = await store.write([obs(price="20.00", at=at(2))])  # the shop is right again
    assert result.held == {} and result.confirmed == set()
    assert result.unconfirmed == [(URL, "ratio_up")]
    assert await published(store) == [(Decimal("20.00"), "EUR")]
    [row] = await latest(store)
    assert (row.price, row.checked_at) == (Decimal("20.00"), at(2))
    [hold] = await store.quarantine(URL)
    assert (hold.status, hold.resolved_at) == ("rejected", at(2))


async def test_a_confirmed_change_is_published_by_the_second_fetch(store: Store) -> None:
    await store.write([obs(price="20.00", at=at(0), sku="S1")])
    assert (await store.write([obs(price="5.00", at=at(1), sku="S1")])).held == {URL: "ratio_down"}
    assert await published(store) == [(Decimal("20.00"), "EUR")]
    result = await store.write([obs(price="5.00", at=at(2), sku="S1")])
    assert result.confirmed == {URL} and result.changed == {URL} and result.held == {}
    assert await published(store) == [(Decimal("20.00"), "EUR"), (Decimal("5.00"), "EUR")]
    assert [c.observed_at for c in await store.history("S1")][-1] == at(2)
    assert [(h.status, h.resolved_at) for h in await store.quarantine("S1")] == [
        ("confirmed", at(2))
    ]
    [row] = await latest(store)
    assert (row.price, row.changed_at) == (Decimal("5.00"), at(2))
    # Published now: the same price again is an ordinary unchanged observation.
    assert (await store.write([obs(price="5.00", at=at(3), sku="S1")])).held == {}


async def test_a_currency_change_is_held(store: Store) -> None:
    await store.write([obs(price="20.00", at=at(0))])
    result = await store.write([obs(price="20.00", currency="USD", at=at(1))])
    assert result.held == {URL: "currency_change"}
    assert await published(store) == [(Decimal("20.00"), "EUR")]
    result = await store.write([obs(price="20.00", currency="USD", at=at(2))])
    assert result.confirmed == {URL}
    assert await published(store) == [(Decimal("20.00"), "EUR"), (Decimal("20.00"), "USD")]


async def test_ordinary_changes_are_published_at_once(store: Store) -> None:
    await store.write([obs(price="20.00", at=at(0))])
    for minute, price in enumerate(["25.00", "59.99", "21.00", "12.00"], start=1):
        result = await store.write([obs(price=price, at=at(minute))])
        assert result.changed == {URL} and result.held == {}, price
    # Stock and list-price changes are never held.
    result = await store.write([obs(price="12.00", availability="OutOfStock", at=at(9))])
    assert result.changed == {URL} and result.held == {}
    assert await store.quarantine() == []


async def test_a_new_minimum_below_the_floor_is_held(store: Store) -> None:
    await store.write([obs(price="100.00", at=at(0))])
    await store.write([obs(price="80.00", at=at(1))])  # the lowest price so far
    # Within the ratio of the current price (40 > 80 / 3) but under 0.5 x the minimum 80.
    result = await store.write([obs(price="39.00", at=at(2))])
    assert result.held == {URL: "new_minimum"}
    # 45 is above 0.5 x 80: an ordinary change (it also disagrees with the held 39).
    result = await store.write([obs(price="45.00", at=at(3))])
    assert result.unconfirmed == [(URL, "new_minimum")] and result.changed == {URL}
    assert [p for p, _ in await published(store)] == [
        Decimal("100.00"),
        Decimal("80.00"),
        Decimal("45.00"),
    ]


async def test_confirmations_are_bounded(store: Store) -> None:
    await store.write([obs(price="10.00", at=at(0))])
    assert (await store.write([obs(price="100.00", at=at(1))])).held == {URL: "ratio_up"}
    # Suspicious again, but not what was held: held in its place (attempt 2 of 2).
    result = await store.write([obs(price="300.00", at=at(2))])
    assert result.held == {URL: "ratio_up"} and result.unconfirmed == [(URL, "ratio_up")]
    # A third different value: attempts are spent, it is rejected too, nothing held.
    result = await store.write([obs(price="1000.00", at=at(3))])
    assert result.held == {} and len(result.unconfirmed) == 2
    assert await held(store) == [
        (Decimal("100.00"), "EUR", "ratio_up", "rejected", 1),
        (Decimal("300.00"), "EUR", "ratio_up", "rejected", 2),
        (Decimal("1000.00"), "EUR", "ratio_up", "rejected", 3),
    ]
    assert await published(store) == [(Decimal("10.00"), "EUR")]
    # A later fetch starts a new chain.
    assert (await store.write([obs(price="1000.00", at=at(60))])).held == {URL: "ratio_up"}


async def test_replays_are_idempotent(store: Store) -> None:
    first = [obs(price="20.00", at=at(0))]
    glitch = [obs(price="200.00", at=at(1))]
    confirm = [obs(price="200.00", at=at(2))]
    await store.write(first)
    assert (await store.write(glitch)).held == {URL: "ratio_up"}
    # A replay of the held observation: still held (its lease must still confirm soon).
    assert (await store.write(glitch)).held == {URL: "ratio_up"}
    assert len(await store.quarantine()) == 1
    assert (await store.write(confirm)).confirmed == {URL}
    for batch in (first, glitch, confirm, glitch + confirm):
        replay = await store.write(batch)
        assert replay.held == {} and replay.confirmed == set() and replay.unconfirmed == []
    assert await published(store) == [(Decimal("20.00"), "EUR"), (Decimal("200.00"), "EUR")]
    assert await held(store) == [(Decimal("200.00"), "EUR", "ratio_up", "confirmed", 1)]


async def test_hold_and_confirmation_in_one_batch(store: Store) -> None:
    await store.write([obs(price="20.00", at=at(0))])
    result = await store.write([obs(price="200.00", at=at(1)), obs(price="200.00", at=at(2))])
    assert result.confirmed == {URL} and result.changed == {URL}
    assert await published(store) == [(Decimal("20.00"), "EUR"), (Decimal("200.00"), "EUR")]


async def test_without_a_config_every_change_is_published(store_url: str) -> None:
    async with store_from_url(store_url) as plain:
        await plain.write([obs(price="20.00", at=at(0))])
        result = await plain.write([obs(price="200.00", at=at(1))])
        assert result.changed == {URL} and result.held == {}
        assert await plain.quarantine() == []


def test_config_from_the_project_settings() -> None:
    settings = Settings()
    settings.setmodule(project_settings)
    config = QuarantineConfig.from_settings(settings)
    assert config == QuarantineConfig(
        ratio=Decimal(3), minimum_floor=Decimal("0.5"), confirm_delay=300.0, max_confirmations=2
    )
    settings.set("PRICEWATCH_QUARANTINE_ENABLED", False)
    assert QuarantineConfig.from_settings(settings) is None


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PRICEWATCH_QUARANTINE_RATIO", "1", "PRICEWATCH_QUARANTINE_RATIO must be > 1, got 1"),
        ("PRICEWATCH_QUARANTINE_RATIO", "x3", "PRICEWATCH_QUARANTINE_RATIO must be a number"),
        ("PRICEWATCH_QUARANTINE_MINIMUM_FLOOR", "1.5", "MINIMUM_FLOOR must be >= 0 and < 1"),
        ("PRICEWATCH_QUARANTINE_CONFIRM_DELAY", -1, "CONFIRM_DELAY must be >= 0, got -1.0"),
        ("PRICEWATCH_QUARANTINE_MAX_CONFIRMATIONS", 0, "MAX_CONFIRMATIONS must be >= 1, got 0"),
    ],
)
def test_invalid_settings_name_the_setting(name: str, value: object, message: str) -> None:
    settings = Settings()
    settings.setmodule(project_settings)
    settings.set(name, value)
    with pytest.raises(ValueError, match=message):
        QuarantineConfig.from_settings(settings)


# -- the frontier: "confirm soon" -------------------------------------------------------------


async def test_a_held_change_is_due_again_after_the_confirm_delay(
    make_frontier: MakeFrontier,
) -> None:
    frontier: Frontier = await make_frontier(interval=3600, min_interval=300)
    await frontier.add([Entry("https://a.test/1"), Entry("https://a.test/2")])
    held_lease, plain_lease = sorted(await frontier.claim(2), key=lambda lease: lease.url)
    before = time.time()
    await frontier.complete(
        [
            Completion(held_lease, Outcome.OK, confirm_in=30),
            Completion(plain_lease, Outcome.OK),
        ]
    )
    held_entry = await frontier.entry(held_lease.url)
    plain_entry = await frontier.entry(plain_lease.url)
    assert held_entry is not None and plain_entry is not None
    assert held_entry.due_at - before == pytest.approx(30, abs=2)  # below MIN_INTERVAL
    assert plain_entry.due_at - before >= 300
    assert held_entry.checks == plain_entry.checks == 1


async def test_migration_backfills_the_lowest_published_price(store_url: str) -> None:
    """A store written before the quarantine existed (migration 1 only): migration 2 takes
    each SKU's lowest published price in its current currency from the history, so the
    new_minimum rule holds from the first write after the upgrade."""
    from pricewatch.storage._migrations import migrations

    backend = "sqlite" if store_url.startswith("sqlite") else "postgresql"
    first = migrations(backend)[0]
    history = [("80.00", "EUR", at(0)), ("60.00", "USD", at(1)), ("100.00", "EUR", at(2))]
    if store_url.startswith("sqlite"):
        import sqlite3

        from pricewatch._urls import sqlite_path
        from pricewatch.storage._migrations import sqlite_statements

        db = sqlite3.connect(sqlite_path(store_url), isolation_level=None)
        try:
            db.execute(
                "CREATE TABLE store_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                " applied_at TEXT NOT NULL)"
            )
            for statement in sqlite_statements(first.sql):
                db.execute(statement)
            db.execute("INSERT INTO store_migrations VALUES (1, ?, 'then')", (first.name,))
            for price, currency, when in history:
                db.execute(
                    "INSERT INTO price_changes (url, price, currency, raw_hash, observed_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (URL, price, currency, price + currency, when.isoformat()),
                )
            db.execute(
                "INSERT INTO products (url, domain, price, currency, raw_hash, first_seen_at,"
                " last_checked_at, last_changed_at) VALUES (?, 'shop.test', '100.00', 'EUR',"
                " '100.00EUR', ?, ?, ?)",
                (URL, at(0).isoformat(), at(2).isoformat(), at(2).isoformat()),
            )
        finally:
            db.close()
    else:
        import asyncpg

        conn = await asyncpg.connect(store_url)
        try:
            await conn.execute(
                "CREATE TABLE store_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            await conn.execute(first.sql)
            await conn.execute(
                "INSERT INTO store_migrations (version, name) VALUES (1, $1)", first.name
            )
            for price, currency, when in history:
                await conn.execute(
                    "INSERT INTO price_changes (url, price, currency, raw_hash, observed_at)"
                    " VALUES ($1, $2::numeric, $3, $4, $5)",
                    URL,
                    price,
                    currency,
                    price + currency,
                    when,
                )
            await conn.execute(
                "INSERT INTO products (url, domain, price, currency, raw_hash, first_seen_at,"
                " last_checked_at, last_changed_at) VALUES ($1, 'shop.test', 100.00, 'EUR',"
                " '100.00EUR', $2, $3, $3)",
                URL,
                at(0),
                at(2),
            )
        finally:
            await conn.close()
    async with store_from_url(store_url, quarantine=CONFIG) as store:
        # 39 is within /3 of 100 but under 0.5 x the lowest EUR price, 80 (not USD's 60).
        assert (await store.write([obs(price="39.00", at=at(3))])).held == {URL: "new_minimum"}
        assert (await store.write([obs(price="41.00", at=at(4))])).changed == {URL}
