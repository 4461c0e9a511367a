"""What only the SQLite frontier has: one file shared by processes, the file itself."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from pricewatch.frontier import Completion, Entry, FrontierUnavailable, SchedulePolicy
from pricewatch.frontier.sqlite import SQLiteFrontier
from pricewatch.outcomes import Outcome
from pricewatch.storage.sqlite import SQLiteStore

WORKER = textwrap.dedent(
    """
    import asyncio, json, sys
    from pricewatch.frontier import SchedulePolicy
    from pricewatch.frontier.sqlite import SQLiteFrontier

    async def main():
        frontier = SQLiteFrontier(sys.argv[1], SchedulePolicy(domain_max_inflight=0))
        await frontier.open()
        got = []
        while leases := await frontier.claim(5):
            got += [lease.url for lease in leases]
        await frontier.close()
        print(json.dumps(got))

    asyncio.run(main())
    """
)


async def test_processes_sharing_a_file_never_claim_the_same_entry(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'frontier.db'}"
    async with SQLiteFrontier(url) as frontier:
        await frontier.add(Entry(f"https://s{i % 4}.test/p/{i}") for i in range(2000))
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", WORKER, url, stdout=subprocess.PIPE, cwd=Path.cwd()
        )
        for _ in range(3)
    ]
    outputs = [await worker.communicate() for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0, 0]
    claimed = [url for out, _ in outputs for url in json.loads(out)]
    assert len(claimed) == 2000
    assert len(set(claimed)) == 2000
    assert sum(1 for out, _ in outputs if json.loads(out)) >= 2


async def test_calls_never_run_on_the_event_loop_thread(tmp_path: Path) -> None:
    frontier = SQLiteFrontier(f"sqlite:///{tmp_path / 'f.db'}", SchedulePolicy())
    await frontier.open()
    threads: list[str] = []
    original = frontier._claim_sync

    def spy(conn, n):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return original(conn, n)

    frontier._claim_sync = spy  # type: ignore[method-assign]
    try:
        await frontier.add([Entry("https://a.test/1")])
        assert len(await frontier.claim(1)) == 1
    finally:
        await frontier.close()
    assert threads and threads[0] != threading.current_thread().name
    assert threads[0].startswith("pw-frontier")


async def test_an_unusable_file_names_the_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'missing' / 'f.db'}"
    with pytest.raises(FrontierUnavailable, match=f"cannot open the SQLite frontier {url}"):
        await SQLiteFrontier(url).open()


async def test_the_file_shares_a_database_with_other_tables(tmp_path: Path) -> None:
    # The default store and frontier URLs name the same file: the frontier's tables are
    # prefixed and leave other tables alone.
    import sqlite3

    path = tmp_path / "pricewatch.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE products (url TEXT PRIMARY KEY)")
    async with SQLiteFrontier(f"sqlite:///{path}") as frontier:
        await frontier.add([Entry("https://a.test/1")])
    with sqlite3.connect(path) as conn:
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
    assert tables == {"products", "frontier_entries", "frontier_domains", "domain_limits"}


def _store(url: str) -> SQLiteStore:
    return SQLiteStore(url)


@pytest.mark.parametrize("opener", [SQLiteFrontier, _store], ids=["frontier", "store"])
async def test_opening_waits_for_a_write_to_the_file_in_rollback_mode(
    tmp_path: Path, opener: Callable[[str], SQLiteFrontier | SQLiteStore]
) -> None:
    """Sessions, browser routes and drift alarms keep their tables in this file too, and
    may write to it before anything switched it to WAL: the switch waits for their write
    like any other write, instead of failing the open with "database is locked"."""
    path = tmp_path / "pricewatch.db"
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY)")
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO sessions VALUES ('s1')")
        component = opener(f"sqlite:///{path}")
        opening = asyncio.ensure_future(component.open())
        done, _ = await asyncio.wait([opening], timeout=0.3)
        assert not done  # waiting for the write, not failed
        writer.execute("COMMIT")
        await opening
        await component.close()
    finally:
        writer.close()
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_a_file_of_an_older_release_gains_the_budget_columns(tmp_path: Path) -> None:
    """A frontier file made before the budget (no rate estimate, no allocation columns)
    is migrated on open: its entries keep their history and start without an estimate."""
    import sqlite3

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            """
            CREATE TABLE frontier_entries (
                url TEXT PRIMARY KEY, domain TEXT NOT NULL, sku TEXT,
                importance REAL NOT NULL DEFAULT 1.0, due_at REAL NOT NULL, lease_token TEXT,
                lease_until REAL, attempts INTEGER NOT NULL DEFAULT 0,
                failures INTEGER NOT NULL DEFAULT 0, gone_count INTEGER NOT NULL DEFAULT 0,
                change_count INTEGER NOT NULL DEFAULT 0, checks INTEGER NOT NULL DEFAULT 0,
                seen_at REAL NOT NULL, state TEXT NOT NULL DEFAULT 'scheduled',
                state_reason TEXT
            ) WITHOUT ROWID;
            CREATE TABLE frontier_domains (
                domain TEXT PRIMARY KEY, paused_until REAL NOT NULL DEFAULT 0,
                health REAL NOT NULL DEFAULT 1.0
            ) WITHOUT ROWID;
            INSERT INTO frontier_entries (url, domain, due_at, checks, change_count, seen_at)
                VALUES ('https://a.test/1', 'a.test', 0, 9, 4, 0);
            INSERT INTO frontier_domains (domain) VALUES ('a.test');
            """
        )
    policy = SchedulePolicy(budget=100.0)
    async with SQLiteFrontier(f"sqlite:///{path}", policy) as frontier:
        [lease] = await frontier.claim(5)
        assert (lease.checks, lease.changes) == (9, 4)
        assert (lease.rate_changes, lease.rate_exposure, lease.observed_at) == (0, 0, 0)
        assert lease.mu > 0  # allocated from the prior rate
        await frontier.complete([Completion(lease, Outcome.OK)])
        info = await frontier.entry(lease.url)
        assert info is not None and info.rate_changes == policy.prior_weight
