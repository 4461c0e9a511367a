"""What every chaos scenario checks at the end, on either backend."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from decimal import Decimal
from typing import Any

import asyncpg

from pricewatch.frontier import frontier_from_url


def _sqlite_path(url: str) -> str:
    return url.removeprefix("sqlite:///")


def stored_prices(store_url: str) -> dict[str, tuple[Decimal, str]]:
    """url -> (price, currency) of every stored product."""
    query = "SELECT url, price, currency FROM products"
    if store_url.startswith("sqlite"):
        with closing(sqlite3.connect(_sqlite_path(store_url))) as conn:
            return {url: (Decimal(str(p)), c) for url, p, c in conn.execute(query)}

    async def fetch() -> dict[str, tuple[Decimal, str]]:
        conn = await asyncpg.connect(store_url)
        try:
            return {r[0]: (Decimal(r[1]), r[2]) for r in await conn.fetch(query)}
        finally:
            await conn.close()

    return asyncio.run(fetch())


def history_rows(store_url: str) -> tuple[int, int]:
    """(rows, distinct URLs) of the price history."""
    query = "SELECT count(*), count(DISTINCT url) FROM price_changes"
    if store_url.startswith("sqlite"):
        with closing(sqlite3.connect(_sqlite_path(store_url))) as conn:
            rows, urls = conn.execute(query).fetchone()
            return int(rows), int(urls)

    async def fetch() -> tuple[int, int]:
        conn = await asyncpg.connect(store_url)
        try:
            row = await conn.fetchrow(query)
            return int(row[0]), int(row[1])
        finally:
            await conn.close()

    return asyncio.run(fetch())


def frontier_totals(frontier_url: str) -> dict[str, int]:
    """Entries per state across domains: due, scheduled, inflight, retired, dead."""

    async def counts() -> dict[str, int]:
        frontier = frontier_from_url(frontier_url)
        await frontier.open()
        try:
            per_domain = await frontier.counts()
        finally:
            await frontier.close()
        states = ("due", "scheduled", "inflight", "retired", "dead")
        return {s: sum(getattr(c, s) for c in per_domain) for s in states}

    return asyncio.run(counts())


def assert_every_lease_completed(frontier_url: str, entries: int) -> None:
    totals = frontier_totals(frontier_url)
    assert totals["inflight"] == 0, totals
    assert totals["dead"] == 0, totals
    assert totals["due"] + totals["scheduled"] + totals["retired"] == entries, totals


def assert_stored_right(store_url: str, truth: dict[str, Any], expected: set[str]) -> None:
    """Exactly ``expected`` stored, each at its true price, with one history row each."""
    prices = stored_prices(store_url)
    assert set(prices) == expected, (sorted(set(prices) - expected), sorted(expected - set(prices)))
    for url, (price, currency) in prices.items():
        assert (price, currency) == (Decimal(truth[url]["price"]), truth[url]["currency"]), url
    assert history_rows(store_url) == (len(expected), len(expected))
