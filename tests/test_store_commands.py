"""``scrapy prices`` and ``scrapy db upgrade``, run as subprocesses on both backends."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from pricewatch.quarantine import QuarantineConfig
from pricewatch.storage import Observation, store_from_url
from pricewatch.storage._migrations import migrations

PROJECT = Path(__file__).resolve().parents[1]
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def scrapy(*args: str, store: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRICEWATCH_")}
    if store is not None:
        env["PRICEWATCH_STORE_URL"] = store
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def observation(url: str, price: str, minutes: int = 0, **extra: object) -> Observation:
    domain = url.split("/")[2]
    fields = {"sku": None, "regular_price": None, "availability": "InStock", **extra}
    return Observation(
        url=url,
        domain=domain,
        price=Decimal(price),
        currency=str(fields.pop("currency", "EUR")),
        raw_hash=f"{price}|{fields['availability']}|{fields['regular_price']}",
        observed_at=T0 + timedelta(minutes=minutes),
        **fields,  # type: ignore[arg-type]
    )


CATALOGUE = [
    [
        observation(
            "https://a.test/p/kettle", "19.99", sku="KET-1", regular_price=Decimal("24.50")
        ),
        observation("https://a.test/p/mug", "1E+2", currency="JPY"),
        observation("https://b.test/item/9", "0.10", sku="B-9", name="Spoon, small"),
    ],
    [
        observation(
            "https://a.test/p/kettle", "17.00", 60, sku="KET-1", config_version="0f1e2d3c4b5a"
        )
    ],
    [observation("https://a.test/p/kettle", "17.00", 120, sku="KET-1")],  # unchanged
    [observation("https://a.test/p/kettle", "17.00", 180, sku="KET-1", availability="OutOfStock")],
]


async def fill(url: str) -> None:
    async with store_from_url(url) as store:
        for batch in CATALOGUE:
            await store.write(batch)


def test_prices_table_history_and_csv(store_url: str) -> None:
    asyncio.run(fill(store_url))

    table = scrapy("prices", store=store_url)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == [
        "url", "sku", "price", "currency", "regular", "availability",
        "checked", "(UTC)", "changed", "(UTC)",
    ]  # fmt: skip
    assert [line.split()[0] for line in lines[2:]] == [
        "https://a.test/p/kettle",
        "https://a.test/p/mug",
        "https://b.test/item/9",
    ]
    # Aligned: every column starts at the same offset on every line; amounts right-aligned.
    currency_at = lines[0].index("currency")
    assert {line[currency_at : currency_at + 3] for line in lines[2:]} == {"EUR", "JPY"}
    assert {line[:currency_at].rstrip()[-5:] for line in lines[2:]} == {"17.00", "  100", " 0.10"}
    kettle = lines[2].split()
    assert kettle[1:6] == ["KET-1", "17.00", "EUR", "OutOfStock", "2026-03-01"]
    assert "3 SKUs" in table.stderr

    history = scrapy("prices", "--history", "KET-1", store=store_url)
    assert history.returncode == 0, history.stderr
    rows = [line.split() for line in history.stdout.splitlines()[2:]]
    assert [r[0] + " " + r[1] for r in rows] == [
        "2026-03-01 12:00:00",
        "2026-03-01 13:00:00",
        "2026-03-01 15:00:00",
    ]
    assert [r[2] for r in rows] == ["19.99", "17.00", "17.00"]
    assert rows[1][3:] == ["EUR", "InStock", "published", "0f1e2d3c4b5a", "https://a.test/p/kettle"]
    as_csv = scrapy("prices", "--history", "KET-1", "--csv", store=store_url)
    changes = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [c["config_version"] for c in changes] == ["", "0f1e2d3c4b5a", ""]
    assert rows[0][3:] == ["EUR", "24.50", "InStock", "published", "https://a.test/p/kettle"]
    assert rows[-1][3:] == ["EUR", "OutOfStock", "published", "https://a.test/p/kettle"]
    exported = scrapy("prices", "--csv", store=store_url)
    assert exported.returncode == 0, exported.stderr
    records = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert [
        (r["url"], r["sku"], r["price"], r["currency"], r["regular_price"]) for r in records
    ] == [
        ("https://a.test/p/kettle", "KET-1", "17.00", "EUR", ""),
        ("https://a.test/p/mug", "", "100", "JPY", ""),
        ("https://b.test/item/9", "B-9", "0.10", "EUR", ""),
    ]
    assert records[0]["availability"] == "OutOfStock"
    assert records[0]["checked_at"] == "2026-03-01T15:00:00.000000+00:00"
    assert records[0]["changed_at"] == "2026-03-01T15:00:00.000000+00:00"
    assert records[0]["first_seen_at"] == "2026-03-01T12:00:00.000000+00:00"
    assert records[2]["name"] == "Spoon, small"


def test_history_shows_held_and_rejected_changes(store_url: str) -> None:
    """`scrapy prices --history` tells a published change from one the store held."""

    async def write() -> None:
        async with store_from_url(store_url, quarantine=QuarantineConfig()) as store:
            for minutes, price in ((0, "20.00"), (60, "200.00"), (120, "20.00"), (180, "5.00")):
                await store.write([observation("https://a.test/p/k", price, minutes, sku="K")])

    asyncio.run(write())
    history = scrapy("prices", "--history", "K", store=store_url)
    assert history.returncode == 0, history.stderr
    rows = [line.split() for line in history.stdout.splitlines()[2:]]
    assert [(r[1], r[2], " ".join(r[5:-1])) for r in rows] == [
        ("12:00:00", "20.00", "published"),
        ("13:00:00", "200.00", "rejected (ratio_up)"),
        ("15:00:00", "5.00", "held (ratio_down)"),
    ]


async def test_csv_is_the_same_on_both_backends(sqlite_url: str, postgres_url: str) -> None:
    outputs = []
    for url in (sqlite_url, postgres_url):
        await fill(url)
        out = io.BytesIO()
        async with store_from_url(url) as store:
            await store.export_csv(out.write)
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1]
    assert outputs[0].count(b"\n") == 4


def test_prices_options(sqlite_url: str, tmp_path: Path) -> None:
    """Backend-independent options, on SQLite (the store methods behind them run on both
    backends in test_store_contract.py)."""
    asyncio.run(fill(sqlite_url))
    domain = scrapy("prices", "--domain", "b.test", store=sqlite_url)
    assert domain.returncode == 0, domain.stderr
    assert [line.split()[0] for line in domain.stdout.splitlines()[2:]] == ["https://b.test/item/9"]
    by_url = scrapy("prices", "--history", "https://a.test/p/kettle", store=sqlite_url)
    assert by_url.returncode == 0, by_url.stderr
    assert len(by_url.stdout.splitlines()) == 2 + 3

    missing = scrapy("prices", "--history", "NOPE", store=sqlite_url)
    assert missing.returncode == 3
    assert "no history for 'NOPE'" in missing.stderr

    other = f"sqlite:///{tmp_path / 'other.db'}"  # --store beats PRICEWATCH_STORE_URL
    result = scrapy("prices", "--csv", "--store", sqlite_url, store=other)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 4


def test_db_upgrade_is_idempotent(store_url: str) -> None:
    first = scrapy("db", "upgrade", store=store_url)
    assert first.returncode == 0, first.stderr
    backend = "sqlite" if store_url.startswith("sqlite") else "postgresql"
    versions = [m.version for m in migrations(backend)]
    assert f"applied migrations {', '.join(map(str, versions))}" in first.stdout
    again = scrapy("db", "upgrade", store=store_url)
    assert again.returncode == 0, again.stderr
    assert "schema up to date" in again.stdout
    tables = asyncio.run(_count_rows(store_url))
    assert tables == {"products": 0, "price_changes": 0, "store_migrations": len(versions)}


async def _count_rows(url: str) -> dict[str, int]:
    store = store_from_url(url, auto_migrate=False)  # refuses an unmigrated schema
    async with store:
        assert [row async for row in store.latest()] == []
    if url.startswith("sqlite"):
        import sqlite3

        from pricewatch._urls import sqlite_path

        with contextlib.closing(sqlite3.connect(sqlite_path(url))) as db:
            return {
                t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("products", "price_changes", "store_migrations")
            }
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return {
            t: await conn.fetchval(f"SELECT count(*) FROM {t}")
            for t in ("products", "price_changes", "store_migrations")
        }
    finally:
        await conn.close()


@pytest.mark.parametrize("command", [("prices",), ("db", "upgrade")])
def test_unreachable_postgresql_is_a_clear_error_with_the_password_masked(
    command: tuple[str, ...],
) -> None:
    url = "postgresql://pricewatch:s3cr3t-pw@127.0.0.1:1/pricewatch"
    result = scrapy(*command, store=url)
    assert result.returncode == 1
    assert "postgresql://pricewatch:***@127.0.0.1:1/pricewatch" in result.stderr
    assert "s3cr3t-pw" not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_prices_does_not_create_a_missing_sqlite_store(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    result = scrapy("prices", store=f"sqlite:///{missing}")
    assert result.returncode == 1
    assert "no store at" in result.stderr
    assert not missing.exists()


def test_usage_error() -> None:
    result = scrapy("db", "downgrade")
    assert result.returncode == 2
    assert "expected one action of upgrade" in result.stderr
