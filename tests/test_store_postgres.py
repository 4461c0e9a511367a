"""The PostgreSQL store when the server goes away: at start, between batches, and in the
middle of a write. The server is the real one; "down" is either a TCP relay in front of
it that we stop and start again, or ``pg_terminate_backend`` on the store's connections
(safe on a shared server: only this test's database is touched)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from pricewatch.storage import (
    Observation,
    StoreConnectionLost,
    StoreUnavailable,
    WriteResult,
    store_from_url,
)
from pricewatch.storage._migrations import migrations
from pricewatch.storage.postgres import PostgresStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def obs(n: int, version: int) -> Observation:
    """SKU ``n`` as seen at crawl ``version``: its price changes every third crawl."""
    price = Decimal(100 + n) + Decimal(version // 3) / 100
    return Observation(
        url=f"https://shop.test/p/{n:04}",
        domain="shop.test",
        price=price,
        currency="EUR",
        raw_hash=str(price),
        observed_at=T0 + timedelta(hours=version),
    )


def expected_changes(skus: int, versions: int) -> int:
    return skus * len({v // 3 for v in range(versions)})


class Relay:
    """A TCP relay on 127.0.0.1 in front of the real server, to stop and start again."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()  # the server "crashes": connections reset
        self._writers.clear()
        await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}


def via(url: str, port: int) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{port}"))


async def write_retrying(
    write: Callable[[Sequence[Observation]], Awaitable[WriteResult]],
    batch: Sequence[Observation],
    on_retry: Callable[[], Awaitable[None]] | None = None,
    attempts: int = 50,
) -> tuple[WriteResult, int]:
    """What the StorePipeline does: the same batch again after a retryable error."""
    for failures in range(attempts):
        try:
            return await write(batch), failures
        except StoreConnectionLost:
            if on_retry is not None:
                await on_retry()
            await asyncio.sleep(0.01)
    raise AssertionError(f"batch not written after {attempts} attempts")


async def table_counts(url: str) -> tuple[int, int, int]:
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM products),"
            " (SELECT count(*) FROM price_changes),"
            " (SELECT count(*) FROM (SELECT DISTINCT url, raw_hash FROM price_changes) d)"
        )
        return row[0], row[1], row[2]
    finally:
        await conn.close()


async def test_unreachable_server_at_start_names_the_masked_url() -> None:
    store = store_from_url("postgresql://pw:hunter2@127.0.0.1:1/pricewatch", timeout=5)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as caught:
        await store.open()
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert "postgresql://pw:***@127.0.0.1:1/pricewatch" in message
    assert "hunter2" not in message
    assert not isinstance(caught.value, StoreConnectionLost)


async def test_missing_database_at_start(postgres_url: str) -> None:
    url = postgres_url.rsplit("/", 1)[0] + "/pricewatch_no_such_database"
    with pytest.raises(StoreUnavailable, match="pricewatch_no_such_database"):
        await store_from_url(url).open()


async def test_write_before_open_is_unavailable(postgres_url: str) -> None:
    with pytest.raises(StoreUnavailable, match="not open"):
        await store_from_url(postgres_url).write([obs(1, 0)])


async def test_server_down_mid_crawl_then_back(postgres_url: str) -> None:
    relay = Relay(urlsplit(postgres_url).port or 5432)
    await relay.start()
    store = store_from_url(via(postgres_url, relay.port), timeout=5)
    assert isinstance(store, PostgresStore)
    skus, versions = 40, 9
    await store.open()
    try:
        for version in range(3):
            await store.write([obs(n, version) for n in range(skus)])
        await relay.stop()  # the server goes away between two batches
        down_batch = [obs(n, 3) for n in range(skus)]
        for _ in range(3):  # the pipeline's retries while it is down
            with pytest.raises(StoreConnectionLost, match=r"127\.0\.0\.1"):
                await store.write(down_batch)
        await relay.start()  # ... and comes back on the same address
        for version in range(3, versions):
            result, _ = await write_retrying(store.write, [obs(n, version) for n in range(skus)])
            assert result.written == skus
    finally:
        await store.close()
        with contextlib.suppress(AssertionError):
            await relay.stop()
    products, changes, distinct = await table_counts(postgres_url)
    assert products == skus
    assert changes == distinct == expected_changes(skus, versions)


async def test_backends_terminated_during_writes_lose_and_duplicate_nothing(
    postgres_url: str,
) -> None:
    """Connections are killed at random points of the writes (mid-COPY, mid-upsert,
    during COMMIT): every batch is eventually written once, whatever the timing."""
    store = store_from_url(postgres_url, timeout=5)
    admin = await asyncpg.connect(postgres_url)
    skus, versions = 200, 12
    kills = 0

    async def kill() -> None:
        nonlocal kills
        kills += await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND application_name = 'pricewatch'"
        )

    async def killer(stop: asyncio.Event) -> None:
        # Irregular, so kills land in every phase of a write; a bounded number of rounds,
        # so the writes make progress however slow the machine is.
        timing = random.Random(7)
        for _ in range(25):
            if stop.is_set():
                return
            await asyncio.sleep(timing.uniform(0.001, 0.06))
            await kill()

    retries = 0
    await store.open()
    try:
        stop = asyncio.Event()
        task = asyncio.create_task(killer(stop))
        try:
            for version in range(versions):
                _, failures = await write_retrying(
                    store.write, [obs(n, version) for n in range(skus)]
                )
                retries += failures
        finally:
            stop.set()
            await task
        # One more loss between batches, then a replay of the last batch (a crash
        # between commit and acknowledgement).
        await kill()
        replay, _ = await write_retrying(store.write, [obs(n, versions - 1) for n in range(skus)])
        assert replay.written == skus
    finally:
        await store.close()
        await admin.close()
    assert kills >= 1 and retries >= 1, (kills, retries)
    products, changes, distinct = await table_counts(postgres_url)
    assert products == skus
    assert changes == distinct == expected_changes(skus, versions)
    async with store_from_url(postgres_url) as check:
        latest = [row async for row in check.latest()]
    assert [row.price for row in latest] == [obs(n, versions - 1).price for n in range(skus)]


async def test_workers_starting_together_migrate_once(postgres_url: str) -> None:
    stores = [store_from_url(postgres_url) for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        await asyncio.gather(*(s.write([obs(i, 0)]) for i, s in enumerate(stores)))
    finally:
        await asyncio.gather(*(s.close() for s in stores))
    conn = await asyncpg.connect(postgres_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM store_migrations") == len(
            migrations("postgresql")
        )
        assert await conn.fetchval("SELECT count(*) FROM products") == 4
    finally:
        await conn.close()


async def test_schema_types(postgres_url: str) -> None:
    await store_from_url(postgres_url).migrate()
    conn = await asyncpg.connect(postgres_url)
    try:
        types = dict(
            await conn.fetch(
                "SELECT table_name || '.' || column_name, data_type"
                " FROM information_schema.columns WHERE table_schema = 'public'"
            )
        )
    finally:
        await conn.close()
    for table in ("products", "price_changes"):
        assert types[f"{table}.price"] == types[f"{table}.regular_price"] == "numeric"
        assert types[f"{table}.currency"] == "character"
    assert types["products.last_checked_at"] == "timestamp with time zone"
    assert types["price_changes.observed_at"] == "timestamp with time zone"


def test_a_malformed_url_is_a_configuration_error_without_the_password() -> None:
    with pytest.raises(ValueError, match="PRICEWATCH_STORE_URL") as caught:
        store_from_url("postgresql://pw:hunter2@127.0.0.1:notaport/pricewatch")
    assert "hunter2" not in str(caught.value)
