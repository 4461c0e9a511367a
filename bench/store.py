"""Store write throughput: observations written per second by batch size, on PostgreSQL
and SQLite, beside a naive pipeline that writes one item at a time with plain INSERTs.

    .venv/bin/python bench/store.py [--postgres URL] [--skus N] [--passes P] [--changed F]
                                    [--repeat R]

``--postgres`` is a server URL used to create (and drop) a scratch database per run
(default ``postgresql://root@127.0.0.1/postgres``). The workload is a crawl: ``--skus``
SKUs observed ``--passes`` times each (the first pass inserts them), a fraction
``--changed`` of the re-checks with a new price. Every run starts from an empty store.
With ``--repeat R`` each configuration runs R times and the fastest run is reported (as
``timeit`` does: slower runs measure the other load on the machine, not the store).
Each backend also runs at batch 200 with the confirm-before-publish checks of a crawl
(``QuarantineConfig`` from ``settings.py``; ``pricewatch/quarantine.py``), whose price
changes here are all ordinary, so the row measures what the checks cost.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pricewatch.quarantine import QuarantineConfig
from pricewatch.storage import Observation, Store, store_from_url

BATCH_SIZES = (1, 50, 200, 1000)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def workload(skus: int, passes: int, changed: float) -> Iterator[Observation]:
    every = max(1, round(1 / changed)) if changed > 0 else 0
    for p in range(passes):
        for n in range(skus):
            version = p if every and (n + p) % every == 0 else 0
            price = Decimal(10 + n % 900) + Decimal(version) / 100
            yield Observation(
                url=f"https://shop{n % 20}.test/p/{n}",
                domain=f"shop{n % 20}.test",
                price=price,
                currency="EUR",
                raw_hash=f"{price}",
                observed_at=T0 + timedelta(hours=p, microseconds=n),
                sku=f"SKU-{n}",
                availability="InStock",
                source="jsonld",
            )


async def run_store(store: Store, observations: list[Observation], batch: int) -> float:
    await store.open()
    try:
        started = time.perf_counter()
        for i in range(0, len(observations), batch):
            await store.write(observations[i : i + batch])
        return time.perf_counter() - started
    finally:
        await store.close()


NAIVE_SELECT = "SELECT raw_hash FROM products WHERE url = $1"
NAIVE_CHANGE = (
    "INSERT INTO price_changes (url, sku, price, currency, regular_price, availability,"
    " raw_hash, observed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
)
NAIVE_PRODUCT = (
    "INSERT INTO products (url, domain, sku, price, currency, regular_price, availability,"
    " name, source, raw_hash, first_seen_at, last_checked_at, last_changed_at)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $11)"
    " ON CONFLICT (url) DO UPDATE SET price = EXCLUDED.price, currency = EXCLUDED.currency,"
    " regular_price = EXCLUDED.regular_price, availability = EXCLUDED.availability,"
    " raw_hash = EXCLUDED.raw_hash, last_checked_at = EXCLUDED.last_checked_at,"
    " last_changed_at = CASE WHEN products.raw_hash = EXCLUDED.raw_hash"
    " THEN products.last_changed_at ELSE EXCLUDED.last_changed_at END"
)


async def run_naive(url: str, observations: list[Observation]) -> float:
    """The tutorial pipeline: per item, look up the stored hash, INSERT the change, upsert
    the product; each statement its own autocommit transaction."""
    conn = await asyncpg.connect(url)
    try:
        started = time.perf_counter()
        for o in observations:
            stored = await conn.fetchval(NAIVE_SELECT, o.url)
            if stored != o.raw_hash:
                await conn.execute(
                    NAIVE_CHANGE,
                    o.url,
                    o.sku,
                    o.price,
                    o.currency,
                    o.regular_price,
                    o.availability,
                    o.raw_hash,
                    o.observed_at,
                )
            await conn.execute(
                NAIVE_PRODUCT,
                o.url,
                o.domain,
                o.sku,
                o.price,
                o.currency,
                o.regular_price,
                o.availability,
                o.name,
                o.source,
                o.raw_hash,
                o.observed_at,
            )
        return time.perf_counter() - started
    finally:
        await conn.close()


class ScratchDatabase:
    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.name = f"pricewatch_bench_{uuid.uuid4().hex[:10]}"
        self.url = urlunsplit(urlsplit(admin_url)._replace(path=f"/{self.name}"))

    async def __aenter__(self) -> str:
        conn = await asyncpg.connect(self.admin_url)
        try:
            await conn.execute(f'CREATE DATABASE "{self.name}"')  # name made of hex digits
        finally:
            await conn.close()
        return self.url

    async def __aexit__(self, *exc: object) -> None:
        conn = await asyncpg.connect(self.admin_url)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        finally:
            await conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default="postgresql://root@127.0.0.1/postgres")
    parser.add_argument("--skus", type=int, default=10_000)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--changed", type=float, default=0.1)
    parser.add_argument("--small", type=int, default=2_000, help="observations at batch 1")
    parser.add_argument("--repeat", type=int, default=1, help="runs per configuration (best)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1, got {args.repeat}")

    full = list(workload(args.skus, args.passes, args.changed))
    small = list(workload(max(1, args.small // args.passes), args.passes, args.changed))
    print(
        f"workload: {args.skus} SKUs x {args.passes} passes = {len(full)} observations,"
        f" {args.changed:.0%} of re-checks changed (batch 1 and naive: {len(small)})"
    )
    results: list[tuple[str, str, int, float]] = []

    async def naive() -> float:
        async with ScratchDatabase(args.postgres) as url:
            await store_from_url(url).migrate()
            return await run_naive(url, small)

    async def postgres(
        batch: int, observations: list[Observation], quarantine: QuarantineConfig | None = None
    ) -> float:
        async with ScratchDatabase(args.postgres) as url:
            return await run_store(store_from_url(url, quarantine=quarantine), observations, batch)

    async def sqlite(
        batch: int, observations: list[Observation], quarantine: QuarantineConfig | None = None
    ) -> float:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'bench.db'}"
            return await run_store(store_from_url(url, quarantine=quarantine), observations, batch)

    naive_seconds = min([await naive() for _ in range(args.repeat)])
    results.append(("postgresql", "naive, 1 INSERT/item", len(small), naive_seconds))
    for backend, run in (("postgresql", postgres), ("sqlite", sqlite)):
        for batch in BATCH_SIZES:
            observations = small if batch == 1 else full
            seconds = min([await run(batch, observations) for _ in range(args.repeat)])
            results.append((backend, f"batch {batch}", len(observations), seconds))
        seconds = min([await run(200, full, QuarantineConfig()) for _ in range(args.repeat)])
        results.append((backend, "batch 200, quarantine", len(full), seconds))

    naive_rate = len(small) / naive_seconds
    print(
        f"{'backend':<11} {'writes':<21} {'observations':>12} {'seconds':>8} {'obs/s':>9}"
        f" {'x naive':>8}"
    )
    for backend, label, count, seconds in results:
        rate = count / seconds
        print(
            f"{backend:<11} {label:<21} {count:>12} {seconds:>8.2f} {rate:>9,.0f}"
            f" {rate / naive_rate:>7.1f}x"
        )


if __name__ == "__main__":
    asyncio.run(main())
