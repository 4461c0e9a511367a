"""Listings in the SQLite frontier's file: two tables beside ``frontier_entries``.

The store opens the frontier's own :class:`~pricewatch.frontier.sqlite.SQLiteFrontier` on
the same file and runs on its connection and thread (every call off the event loop, claims
in ``BEGIN IMMEDIATE`` transactions, so several processes never lease one listing twice).
A paused domain (``frontier_domains.paused_until``, the circuit breaker's) is not claimed.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from collections.abc import Iterable, Sequence

from pricewatch.frontier.sqlite import SQLiteFrontier
from pricewatch.listings.model import (
    Listing,
    ListingInfo,
    ListingLease,
    Traversal,
    options_from_json,
    options_to_json,
)
from pricewatch.listings.store import ListingStore

SCHEMA = """
CREATE TABLE IF NOT EXISTS listings (
    url TEXT PRIMARY KEY,
    domain TEXT NOT NULL,
    kind TEXT NOT NULL,
    every REAL NOT NULL,
    options TEXT NOT NULL DEFAULT '{}',
    due_at REAL NOT NULL,
    lease_token TEXT,
    lease_until REAL,
    traversal TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS listing_members (
    listing TEXT NOT NULL,
    url TEXT NOT NULL,
    seen INTEGER NOT NULL,
    PRIMARY KEY (listing, url)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS listing_members_url ON listing_members (url);
"""
_COLUMNS = "url, domain, kind, every, options, due_at, lease_token, lease_until, traversal"
CHUNK = 500  # URLs per statement with an IN list


def _listing(row: tuple[object, ...]) -> Listing:
    url, domain, kind, every, options = row[:5]
    return Listing(str(url), str(kind), str(domain), float(every), options_from_json(options))  # type: ignore[arg-type]


class SQLiteListingStore(ListingStore):
    def __init__(self, url: str) -> None:
        self.url = url
        self.frontier = SQLiteFrontier(url)

    async def open(self) -> None:
        await self.frontier.open()
        await self.frontier._run(lambda: self.frontier._db().executescript(SCHEMA))

    async def close(self) -> None:
        await self.frontier.close()

    async def _tx(self, fn):  # type: ignore[no-untyped-def]
        return await self.frontier._run(self.frontier._transaction, fn)

    # -- listings ---------------------------------------------------------------------------

    async def add(self, listings: Iterable[Listing]) -> int:
        rows = list(listings)

        def run(conn: sqlite3.Connection) -> int:
            now = time.time()
            new = 0
            for item in rows:
                new += conn.execute(
                    "INSERT INTO listings (url, domain, kind, every, options, due_at) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (url) DO NOTHING",
                    (
                        item.url,
                        item.domain,
                        item.kind,
                        item.every,
                        options_to_json(item.options),
                        now,
                    ),
                ).rowcount
                conn.execute(
                    "UPDATE listings SET kind = ?, every = ?, options = ? WHERE url = ?",
                    (item.kind, item.every, options_to_json(item.options), item.url),
                )
            return new

        return int(await self._tx(run))

    async def claim(self, n: int, ttl: float) -> list[ListingLease]:
        def run(conn: sqlite3.Connection) -> list[ListingLease]:
            now = time.time()
            paused = {
                d
                for (d,) in conn.execute(
                    "SELECT domain FROM frontier_domains WHERE paused_until > ?", (now,)
                )
            }
            out: list[ListingLease] = []
            for row in conn.execute(
                f"SELECT {_COLUMNS} FROM listings WHERE due_at <= ? "
                "AND (lease_token IS NULL OR lease_until <= ?) ORDER BY due_at",
                (now, now),
            ).fetchall():
                if len(out) >= n:
                    break
                listing = _listing(row)
                if listing.domain in paused:
                    continue
                token = secrets.token_hex(8)
                conn.execute(
                    "UPDATE listings SET lease_token = ?, lease_until = ? WHERE url = ?",
                    (token, now + ttl, listing.url),
                )
                out.append(
                    ListingLease(listing, Traversal.from_json(row[8]), token, now + ttl)  # type: ignore[arg-type]
                )
            return out

        return list(await self._tx(run))

    async def save(
        self, lease: ListingLease, traversal: Traversal, *, ttl: float, due_in: float | None
    ) -> bool:
        state = traversal.to_json()

        def run(conn: sqlite3.Connection) -> bool:
            now = time.time()
            if due_in is None:
                sql = (
                    "UPDATE listings SET traversal = ?, lease_until = ? "
                    "WHERE url = ? AND lease_token = ?"
                )
                args: tuple[object, ...] = (state, now + ttl, lease.listing.url, lease.token)
            else:
                sql = (
                    "UPDATE listings SET traversal = ?, due_at = ?, lease_token = NULL, "
                    "lease_until = NULL WHERE url = ? AND lease_token = ?"
                )
                args = (state, now + due_in, lease.listing.url, lease.token)
            return bool(conn.execute(sql, args).rowcount)

        return bool(await self._tx(run))

    def _info(self, conn: sqlite3.Connection, row: tuple[object, ...]) -> ListingInfo:
        now = time.time()
        members = conn.execute(
            "SELECT count(*) FROM listing_members WHERE listing = ?", (row[0],)
        ).fetchone()[0]
        leased = row[6] is not None and float(row[7] or 0) > now  # type: ignore[arg-type]
        return ListingInfo(
            _listing(row),
            Traversal.from_json(row[8]),  # type: ignore[arg-type]
            float(row[5]),  # type: ignore[arg-type]
            leased,
            int(members),
        )

    async def get(self, url: str) -> ListingInfo | None:
        def run() -> ListingInfo | None:
            conn = self.frontier._db()
            row = conn.execute(f"SELECT {_COLUMNS} FROM listings WHERE url = ?", (url,)).fetchone()
            return None if row is None else self._info(conn, row)

        return await self.frontier._run(run)

    async def all(self) -> list[ListingInfo]:
        def run() -> list[ListingInfo]:
            conn = self.frontier._db()
            rows = conn.execute(f"SELECT {_COLUMNS} FROM listings ORDER BY url").fetchall()
            return [self._info(conn, row) for row in rows]

        return await self.frontier._run(run)

    async def remove(self, url: str) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            conn.execute("DELETE FROM listing_members WHERE listing = ?", (url,))
            return bool(conn.execute("DELETE FROM listings WHERE url = ?", (url,)).rowcount)

        return bool(await self._tx(run))

    # -- members ----------------------------------------------------------------------------

    async def mark_members(self, listing: str, urls: Sequence[str], number: int) -> list[str]:
        unique = list(dict.fromkeys(urls))

        def run(conn: sqlite3.Connection) -> list[str]:
            new: list[str] = []
            for start in range(0, len(unique), CHUNK):
                chunk = unique[start : start + CHUNK]
                marks = ",".join("?" * len(chunk))
                known = {
                    url
                    for (url,) in conn.execute(
                        f"SELECT url FROM listing_members WHERE listing = ? AND url IN ({marks})",
                        (listing, *chunk),
                    )
                }
                fresh = [url for url in chunk if url not in known]
                conn.executemany(
                    "INSERT INTO listing_members (listing, url, seen) VALUES (?, ?, ?)",
                    ((listing, url, number) for url in fresh),
                )
                conn.executemany(
                    "UPDATE listing_members SET seen = ? WHERE listing = ? AND url = ? "
                    "AND seen < ?",
                    ((number, listing, url, number) for url in known),
                )
                new.extend(fresh)
            return new

        return list(await self._tx(run))

    async def stale_members(self, listing: str, before: int) -> list[str]:
        def run() -> list[str]:
            return [
                url
                for (url,) in self.frontier._db().execute(
                    "SELECT url FROM listing_members WHERE listing = ? AND seen < ?",
                    (listing, before),
                )
            ]

        return await self.frontier._run(run)

    async def drop_members(self, listing: str, urls: Sequence[str]) -> None:
        items = list(urls)

        def run(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "DELETE FROM listing_members WHERE listing = ? AND url = ?",
                ((listing, url) for url in items),
            )

        await self._tx(run)

    async def listed_elsewhere(self, listing: str, urls: Sequence[str]) -> set[str]:
        items = list(urls)

        def run() -> set[str]:
            conn = self.frontier._db()
            found: set[str] = set()
            for start in range(0, len(items), CHUNK):
                chunk = items[start : start + CHUNK]
                marks = ",".join("?" * len(chunk))
                found.update(
                    url
                    for (url,) in conn.execute(
                        "SELECT DISTINCT url FROM listing_members WHERE listing <> ? "
                        "AND listing IN (SELECT url FROM listings) "
                        f"AND url IN ({marks})",
                        (listing, *chunk),
                    )
                )
            return found

        return await self.frontier._run(run)
