"""The embedded frontier: one SQLite file (WAL), no server. The default.

Settings (through :class:`SchedulePolicy`, see :func:`pricewatch.frontier.policy_from_settings`;
defaults: ``pricewatch/settings.py``):
``PRICEWATCH_FRONTIER_URL``, ``PRICEWATCH_FRONTIER_LEASE_TTL``,
``PRICEWATCH_FRONTIER_INTERVAL``, ``PRICEWATCH_FRONTIER_MIN_INTERVAL``,
``PRICEWATCH_FRONTIER_MAX_INTERVAL``, ``PRICEWATCH_FRONTIER_RETRY_DELAY``,
``PRICEWATCH_FRONTIER_MAX_ATTEMPTS``, ``PRICEWATCH_FRONTIER_GONE_LIMIT``,
``PRICEWATCH_FRONTIER_VELOCITY_*``, ``PRICEWATCH_FRONTIER_HEALTH_*``,
``PRICEWATCH_FRONTIER_RETIRE_UNSEEN``, ``PRICEWATCH_DOMAIN_MAX_INFLIGHT``.

One row per URL in ``frontier_entries``; a row never leaves the table except through
``purge_domain``: it is scheduled (leased or not), retired or dead. Every call runs on a
dedicated single-thread executor that owns the connection, so the event loop never
blocks. Claims run in ``BEGIN IMMEDIATE`` transactions, so several processes sharing one
file never lease the same entry twice. The clock is epoch seconds (``time.time()``),
shared by the processes of one machine.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pricewatch._sqlite import use_wal
from pricewatch._urls import sqlite_path
from pricewatch.frontier import budget
from pricewatch.frontier._entries import counters, lookup_url, valid_entries
from pricewatch.frontier.base import (
    Allocation,
    Completion,
    DomainCounts,
    Entry,
    EntryInfo,
    Frontier,
    FrontierConnectionLost,
    FrontierUnavailable,
    Lease,
    LimitUpdate,
    RateRow,
    SchedulePolicy,
    domain_cap,
)
from pricewatch.frontier.scoring import History, transition, updated_health

logger = logging.getLogger(__name__)

T = TypeVar("T")

BUSY_TIMEOUT = 30.0  # seconds a writer waits for another process's transaction

SCHEMA = """
CREATE TABLE IF NOT EXISTS frontier_entries (
    url TEXT PRIMARY KEY,
    domain TEXT NOT NULL,
    sku TEXT,
    importance REAL NOT NULL DEFAULT 1.0,
    due_at REAL NOT NULL,
    lease_token TEXT,
    lease_until REAL,
    fetched INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    gone_count INTEGER NOT NULL DEFAULT 0,
    change_count INTEGER NOT NULL DEFAULT 0,
    checks INTEGER NOT NULL DEFAULT 0,
    seen_at REAL NOT NULL,
    rate_changes REAL NOT NULL DEFAULT 0,
    rate_exposure REAL NOT NULL DEFAULT 0,
    observed_at REAL NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT 'scheduled'
        CHECK (state IN ('scheduled', 'retired', 'dead')),
    state_reason TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS frontier_entries_ready
    ON frontier_entries (domain, due_at) WHERE state = 'scheduled' AND lease_token IS NULL;
CREATE INDEX IF NOT EXISTS frontier_entries_leased
    ON frontier_entries (lease_until) WHERE lease_token IS NOT NULL;
CREATE INDEX IF NOT EXISTS frontier_entries_domain
    ON frontier_entries (domain, state);
CREATE TABLE IF NOT EXISTS frontier_domains (
    domain TEXT PRIMARY KEY,
    paused_until REAL NOT NULL DEFAULT 0,
    health REAL NOT NULL DEFAULT 1.0,
    mu REAL NOT NULL DEFAULT 0,
    allocated_at REAL NOT NULL DEFAULT 0,
    pace REAL NOT NULL DEFAULT 0,
    tokens REAL NOT NULL DEFAULT 0,
    tokens_at REAL NOT NULL DEFAULT 0,
    claimed REAL NOT NULL DEFAULT 0,
    gain REAL NOT NULL DEFAULT 1,
    claimed_mark REAL NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS domain_limits (
    domain TEXT PRIMARY KEY,
    cap INTEGER NOT NULL,
    state TEXT NOT NULL
) WITHOUT ROWID;
"""
# Columns added since the first release, for files made before them: (table, column, type).
_ADDED_COLUMNS = (
    ("frontier_entries", "fetched", "INTEGER NOT NULL DEFAULT 0"),  # release_slots()
    ("frontier_entries", "rate_changes", "REAL NOT NULL DEFAULT 0"),  # the budget
    ("frontier_entries", "rate_exposure", "REAL NOT NULL DEFAULT 0"),
    ("frontier_entries", "observed_at", "REAL NOT NULL DEFAULT 0"),
    ("frontier_domains", "mu", "REAL NOT NULL DEFAULT 0"),
    ("frontier_domains", "allocated_at", "REAL NOT NULL DEFAULT 0"),
    ("frontier_domains", "pace", "REAL NOT NULL DEFAULT 0"),
    ("frontier_domains", "tokens", "REAL NOT NULL DEFAULT 0"),
    ("frontier_domains", "tokens_at", "REAL NOT NULL DEFAULT 0"),
    ("frontier_domains", "claimed", "REAL NOT NULL DEFAULT 0"),
    ("frontier_domains", "gain", "REAL NOT NULL DEFAULT 1"),
    ("frontier_domains", "claimed_mark", "REAL NOT NULL DEFAULT 0"),
)

_ADD = """
INSERT INTO frontier_entries (url, domain, sku, importance, due_at, seen_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (url) DO UPDATE SET
    sku = coalesce(excluded.sku, sku),
    importance = excluded.importance,
    seen_at = max(seen_at, excluded.seen_at)
"""
_ADD_NEW = """
INSERT INTO frontier_entries (url, domain, sku, importance, due_at, seen_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (url) DO NOTHING
"""
_READY = """
SELECT url, domain, sku, importance, due_at, attempts, failures, gone_count, checks,
       change_count, seen_at, rate_changes, rate_exposure, observed_at
FROM frontier_entries
WHERE domain = ? AND state = 'scheduled' AND lease_token IS NULL AND due_at <= ?
ORDER BY due_at
LIMIT ? OFFSET ?
"""
_HEAD = """
SELECT min(due_at) FROM frontier_entries
WHERE domain = ? AND state = 'scheduled' AND lease_token IS NULL
"""
_ENTRY_COLUMNS = (
    "url, domain, sku, importance, due_at, lease_token, attempts, failures, gone_count, "
    "checks, change_count, seen_at, rate_changes, rate_exposure, observed_at, state"
)


def interleave(groups: Sequence[Sequence[T]], limit: int) -> list[T]:
    """Round-robin over ``groups`` (in order) until ``limit`` items."""
    out: list[T] = []
    depth = 0
    while len(out) < limit:
        progressed = False
        for group in groups:
            if depth < len(group):
                out.append(group[depth])
                progressed = True
                if len(out) == limit:
                    return out
        if not progressed:
            break
        depth += 1
    return out


def migrate(conn: sqlite3.Connection) -> None:
    """Add the columns a file made by an older release lacks (their defaults are what a
    new entry starts with: no rate estimate yet, no allocation yet)."""
    for table in {table for table, _, _ in _ADDED_COLUMNS}:
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        for name, column, kind in _ADDED_COLUMNS:
            if name == table and column not in have:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


class SQLiteFrontier(Frontier):
    def __init__(self, url: str, policy: SchedulePolicy | None = None) -> None:
        self.url = url
        self.path = sqlite_path(url)
        self.policy = policy or SchedulePolicy()
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None

    # -- plumbing ---------------------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._executor is None:
            raise RuntimeError(f"frontier {self.url} is not open (call open() first)")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn, *args)
        except sqlite3.OperationalError as exc:
            # Locked past the busy timeout, disk full, I/O error: retryable, nothing lost.
            raise FrontierConnectionLost(f"SQLite frontier {self.url}: {exc}") from exc

    def _db(self) -> sqlite3.Connection:
        assert self._conn is not None
        return self._conn

    def _transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._db()
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    async def open(self) -> None:
        if self._executor is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pw-frontier")
        try:
            await self._run(self._open_sync)
        except (sqlite3.Error, OSError) as exc:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise FrontierUnavailable(f"cannot open the SQLite frontier {self.url}: {exc}") from exc

    def _open_sync(self) -> None:
        if self.path.parent != self.path and not self.path.parent.exists():
            raise OSError(f"directory {self.path.parent} does not exist")
        conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
        )
        try:
            use_wal(conn, BUSY_TIMEOUT)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(SCHEMA)
            migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    async def close(self) -> None:
        if self._executor is None:
            return
        try:
            await self._run(self._close_sync)
        finally:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _close_sync(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- add --------------------------------------------------------------------------------

    async def add(self, entries: Iterable[Entry], *, keep_known: bool = False) -> int:
        rows = valid_entries(entries)
        if not rows:
            return 0
        return await self._run(
            self._transaction, lambda conn: self._add_sync(conn, rows, keep_known)
        )

    def _add_sync(
        self, conn: sqlite3.Connection, rows: list[tuple[Entry, str]], keep_known: bool = False
    ) -> int:
        now = time.time()
        before = conn.execute("SELECT count(*) FROM frontier_entries").fetchone()[0]
        conn.executemany(
            _ADD_NEW if keep_known else _ADD,
            ((e.url, domain, e.sku, float(e.importance), now, now) for e, domain in rows),
        )
        conn.executemany(
            "INSERT OR IGNORE INTO frontier_domains (domain) VALUES (?)",
            ((d,) for d in {domain for _, domain in rows}),
        )
        after = conn.execute("SELECT count(*) FROM frontier_entries").fetchone()[0]
        return int(after - before)

    # -- claim ------------------------------------------------------------------------------

    async def claim(self, n: int) -> list[Lease]:
        if n <= 0:
            return []
        await self._reallocate_if_due()
        return await self._run(self._transaction, lambda conn: self._claim_sync(conn, n))

    def _claim_sync(self, conn: sqlite3.Connection, n: int) -> list[Lease]:
        now = time.time()
        self._reap_sync(conn, now)
        room, domains = self._due_domains(conn, n, now)
        paced = self._pace(conn, room, now)
        picked = self._pick_rows(conn, room, n, now)
        if paced:
            conn.executemany(
                "UPDATE frontier_domains SET tokens = ?, tokens_at = ?, claimed = claimed + ? "
                "WHERE domain = ?",
                (
                    (tokens - len(picked.get(d, ())), now, len(picked.get(d, ())), d)
                    for d, tokens in paced.items()
                ),
            )
        chosen = interleave([rows for rows in picked.values() if rows], n)
        deadline = now + self.policy.lease_ttl
        leases = [
            Lease(
                url=url,
                domain=domain,
                token=secrets.token_hex(8),
                deadline=deadline,
                health=domains.get(domain, (1.0, 0.0))[0],
                mu=domains.get(domain, (1.0, 0.0))[1],
                # sku, importance, (due_at,) attempts, failures, gone, checks, changes, seen_at,
                # rate_changes, rate_exposure, observed_at
                **counters(row[2], row[3], *row[5:]),
            )
            for row in chosen
            for url, domain in [row[:2]]
        ]
        conn.executemany(
            "UPDATE frontier_entries SET lease_token = ?, lease_until = ?, fetched = 0 "
            "WHERE url = ?",
            ((lease.token, deadline, lease.url) for lease in leases),
        )
        self.stats["pricewatch/frontier/claimed"] += len(leases)
        return leases

    def _due_domains(
        self, conn: sqlite3.Connection, n: int, now: float
    ) -> tuple[dict[str, int], dict[str, tuple[float, float]]]:
        """The unpaused domains with an entry due, most overdue first, each with the
        leases it may still take (its per-domain cap); and every domain's health and
        allocation multiplier."""
        cap = self.policy.domain_max_inflight
        learned: dict[str, int] = (
            dict(conn.execute("SELECT domain, cap FROM domain_limits").fetchall())
            if self.policy.adaptive_limits
            else {}
        )
        domains = conn.execute(
            "SELECT domain, health, mu FROM frontier_domains WHERE paused_until <= ?", (now,)
        ).fetchall()
        inflight = dict(
            conn.execute(
                "SELECT domain, count(*) FROM frontier_entries "
                "WHERE lease_token IS NOT NULL AND fetched = 0 GROUP BY domain"
            ).fetchall()
        )
        heads: list[tuple[float, str, int]] = []
        for domain, _, _ in domains:
            if self.policy.adaptive_limits:
                limit = domain_cap(cap, learned.get(domain, self.policy.limit_start))
            else:
                limit = cap
            free = n if limit <= 0 else min(n, limit - inflight.get(domain, 0))
            if free <= 0:
                continue
            head = conn.execute(_HEAD, (domain,)).fetchone()[0]
            if head is not None and head <= now:
                heads.append((head, domain, free))
        heads.sort()
        return {domain: free for _, domain, free in heads}, {d: (h, mu) for d, h, mu in domains}

    def _pace(self, conn: sqlite3.Connection, room: dict[str, int], now: float) -> dict[str, float]:
        """Hold budgeted domains of ``room`` to their budget's pace (a token bucket of
        ``PRICEWATCH_BUDGET_BURST`` seconds of budget): fewer leases, or none. Returns the
        tokens of each paced domain before this claim."""
        if not self.policy.budgeted or not room:
            return {}
        marks = ",".join("?" * len(room))
        rows = conn.execute(
            f"SELECT domain, pace, tokens, tokens_at FROM frontier_domains "
            f"WHERE pace > 0 AND domain IN ({marks})",
            list(room),
        ).fetchall()
        out = {}
        for domain, pace, tokens, at in rows:
            available = budget.refill(tokens, at, now, pace, self.policy.burst)
            out[domain] = available
            room[domain] = min(room[domain], int(available))
            if room[domain] <= 0:
                del room[domain]
        return out

    @staticmethod
    def _pick_rows(
        conn: sqlite3.Connection, room: dict[str, int], n: int, now: float
    ) -> dict[str, list[tuple[Any, ...]]]:
        """Up to ``n`` due rows, shared out in rounds between the domains of ``room`` (in
        its order: the most overdue domain is served first in every round)."""
        picked: dict[str, list[tuple[Any, ...]]] = {}
        exhausted: set[str] = set()
        remaining = n
        while remaining > 0:
            active = [d for d in room if d not in exhausted and room[d] > len(picked.get(d, ()))]
            if not active:
                break
            share = max(1, remaining // len(active))
            for domain in active:
                taken = picked.setdefault(domain, [])
                want = min(share, room[domain] - len(taken))
                rows = conn.execute(_READY, (domain, now, want, len(taken))).fetchall()
                taken.extend(rows)
                remaining -= len(rows)
                if len(rows) < want:
                    exhausted.add(domain)
                if remaining <= 0:
                    break
        return picked

    # -- release ----------------------------------------------------------------------------

    async def release_slots(self, leases: Sequence[Lease]) -> int:
        if not leases:
            return 0
        rows = [(lease.url, lease.token) for lease in leases]
        return await self._run(self._transaction, lambda conn: self._release_sync(conn, rows))

    def _release_sync(self, conn: sqlite3.Connection, rows: list[tuple[str, str]]) -> int:
        released = 0
        for url, token in rows:
            released += conn.execute(
                "UPDATE frontier_entries SET fetched = 1 "
                "WHERE url = ? AND lease_token = ? AND fetched = 0",
                (url, token),
            ).rowcount
        self.stats["pricewatch/frontier/released"] += released
        return released

    # -- complete ---------------------------------------------------------------------------

    async def complete(self, completions: Sequence[Completion]) -> int:
        if not completions:
            return 0
        items = list(completions)
        return await self._run(self._transaction, lambda conn: self._complete_sync(conn, items))

    def _complete_sync(self, conn: sqlite3.Connection, completions: list[Completion]) -> int:
        now = time.time()
        policy = self.policy
        applied = 0
        health_cache: dict[str, float] = {}
        for completion in completions:
            lease = completion.lease
            row = conn.execute(
                "SELECT failures, gone_count, checks, change_count, seen_at, rate_changes, "
                "rate_exposure, observed_at, domain "
                "FROM frontier_entries WHERE url = ? AND lease_token = ?",
                (lease.url, lease.token),
            ).fetchone()
            if row is None:
                self.stats["pricewatch/frontier/stale"] += 1
                continue
            *stored, domain = row
            if domain not in health_cache:
                found = conn.execute(
                    "SELECT health FROM frontier_domains WHERE domain = ?", (domain,)
                ).fetchone()
                health_cache[domain] = found[0] if found else 1.0
            health = health_cache[domain]
            history = History(*stored)
            step = transition(policy, history, completion, now, health)
            health_cache[domain] = updated_health(policy, health, step.health_sample)
            new = step.history
            if step.due_at is None:
                state, due_at = "retired", now
                self.stats["pricewatch/frontier/retired"] += 1
            else:
                state, due_at = "scheduled", step.due_at
            conn.execute(
                "UPDATE frontier_entries SET lease_token = NULL, lease_until = NULL, "
                "fetched = 0, attempts = 0, failures = ?, gone_count = ?, checks = ?, "
                "change_count = ?, seen_at = ?, rate_changes = ?, rate_exposure = ?, "
                "observed_at = ?, due_at = ?, state = ?, state_reason = ? "
                "WHERE url = ?",
                (
                    *new,
                    due_at,
                    state,
                    step.retired,
                    lease.url,
                ),
            )
            applied += 1
        conn.executemany(
            "UPDATE frontier_domains SET health = ? WHERE domain = ?",
            ((h, d) for d, h in health_cache.items()),
        )
        self.stats["pricewatch/frontier/completed"] += applied
        return applied

    # -- reap -------------------------------------------------------------------------------

    async def reap(self) -> int:
        return await self._run(self._transaction, lambda conn: self._reap_sync(conn, time.time()))

    def _reap_sync(self, conn: sqlite3.Connection, now: float) -> int:
        """Expired leases back to the schedule, keeping their (overdue) due time, with one
        more attempt; entries that reached the attempt limit go to the dead state."""
        cursor = conn.execute(
            "UPDATE frontier_entries SET lease_token = NULL, lease_until = NULL, fetched = 0, "
            "attempts = attempts + 1 WHERE lease_token IS NOT NULL AND lease_until <= ?",
            (now,),
        )
        reaped = cursor.rowcount
        if reaped:
            dead = conn.execute(
                "UPDATE frontier_entries SET state = 'dead', state_reason = 'attempts' "
                "WHERE state = 'scheduled' AND lease_token IS NULL AND attempts >= ?",
                (self.policy.max_attempts,),
            ).rowcount
            self.stats["pricewatch/frontier/reaped"] += reaped
            self.stats["pricewatch/frontier/dead"] += dead
        return int(reaped)

    # -- adaptive limits --------------------------------------------------------------------

    async def adjust_limits(self, domains: Sequence[str], update: LimitUpdate) -> dict[str, str]:
        if not domains:
            return {}
        wanted = sorted(set(domains))
        return await self._run(
            self._transaction, lambda conn: self._adjust_limits_sync(conn, wanted, update)
        )

    @staticmethod
    def _adjust_limits_sync(
        conn: sqlite3.Connection, domains: list[str], update: LimitUpdate
    ) -> dict[str, str]:
        now = time.time()
        out: dict[str, str] = {}
        for domain in domains:
            row = conn.execute(
                "SELECT state FROM domain_limits WHERE domain = ?", (domain,)
            ).fetchone()
            cap, state = update(domain, None if row is None else row[0], now)
            conn.execute(
                "INSERT INTO domain_limits (domain, cap, state) VALUES (?, ?, ?) "
                "ON CONFLICT (domain) DO UPDATE SET cap = excluded.cap, state = excluded.state",
                (domain, cap, state),
            )
            out[domain] = state
        return out

    async def limits(self) -> dict[str, str]:
        return await self._run(self._limits_sync)

    def _limits_sync(self) -> dict[str, str]:
        rows = self._db().execute("SELECT domain, state FROM domain_limits ORDER BY domain")
        return dict(rows.fetchall())

    # -- domains ----------------------------------------------------------------------------

    async def pause_domain(self, domain: str, seconds: float) -> None:
        await self._run(self._transaction, lambda conn: self._pause_sync(conn, domain, seconds))

    def _pause_sync(self, conn: sqlite3.Connection, domain: str, seconds: float) -> None:
        until = time.time() + max(seconds, 0.0)
        conn.execute(
            "INSERT INTO frontier_domains (domain, paused_until) VALUES (?, ?) "
            "ON CONFLICT (domain) DO UPDATE SET "
            "paused_until = max(paused_until, excluded.paused_until)",
            (domain, until),
        )

    async def counts(self) -> list[DomainCounts]:
        return await self._run(self._counts_sync)

    def _counts_sync(self) -> list[DomainCounts]:
        now = time.time()
        rows = (
            self._db()
            .execute(
                "SELECT domain, "
                "sum(state = 'scheduled' AND lease_token IS NULL AND due_at <= :now), "
                "sum(state = 'scheduled' AND lease_token IS NULL AND due_at > :now), "
                "sum(lease_token IS NOT NULL), sum(state = 'retired'), sum(state = 'dead') "
                "FROM frontier_entries GROUP BY domain ORDER BY domain",
                {"now": now},
            )
            .fetchall()
        )
        return [
            DomainCounts(d, due, sched, infl, ret, dead) for d, due, sched, infl, ret, dead in rows
        ]

    async def next_due_in(self) -> float | None:
        return await self._run(self._next_due_sync)

    def _next_due_sync(self) -> float | None:
        conn = self._db()
        now = time.time()
        best: float | None = None
        for domain, paused_until in conn.execute(
            "SELECT domain, paused_until FROM frontier_domains"
        ).fetchall():
            row = conn.execute(_HEAD, (domain,)).fetchone()
            if row[0] is not None:
                due = max(row[0], paused_until)
                best = due if best is None else min(best, due)
        row = conn.execute(
            "SELECT min(lease_until) FROM frontier_entries WHERE lease_token IS NOT NULL"
        ).fetchone()
        if row[0] is not None:
            best = row[0] if best is None else min(best, row[0])
        if best is None:
            return None
        return max(best - now, 0.0)

    async def entry(self, url: str) -> EntryInfo | None:
        return await self._run(self._entry_sync, lookup_url(url))

    def _entry_sync(self, url: str) -> EntryInfo | None:
        row = (
            self._db()
            .execute(f"SELECT {_ENTRY_COLUMNS} FROM frontier_entries WHERE url = ?", (url,))
            .fetchone()
        )
        if row is None:
            return None
        (url, domain, sku, imp, due, token, attempts, fails, gone, checks, changes, *rest) = row
        *rate, st = rest
        return EntryInfo(
            url=url,
            domain=domain,
            state="inflight" if token is not None else st,
            due_at=due,
            **counters(sku, imp, attempts, fails, gone, checks, changes, *rate),
        )

    async def requeue_domain(self, domain: str) -> int:
        return await self._run(self._transaction, lambda conn: self._requeue_sync(conn, domain))

    def _requeue_sync(self, conn: sqlite3.Connection, domain: str) -> int:
        now = time.time()
        cursor = conn.execute(
            "UPDATE frontier_entries SET state = 'scheduled', state_reason = NULL, due_at = ?, "
            "attempts = 0, failures = 0, gone_count = 0, seen_at = ? "
            "WHERE domain = ? AND state IN ('retired', 'dead')",
            (now, now, domain),
        )
        moved = int(cursor.rowcount)
        cursor = conn.execute(
            "UPDATE frontier_entries SET due_at = ? WHERE domain = ? AND state = 'scheduled' "
            "AND lease_token IS NULL AND due_at > ?",
            (now, domain, now),
        )
        return moved + int(cursor.rowcount)

    async def purge_domain(self, domain: str) -> int:
        return await self._run(self._transaction, lambda conn: self._purge_sync(conn, domain))

    def _purge_sync(self, conn: sqlite3.Connection, domain: str) -> int:
        cursor = conn.execute("DELETE FROM frontier_entries WHERE domain = ?", (domain,))
        conn.execute("DELETE FROM frontier_domains WHERE domain = ?", (domain,))
        conn.execute("DELETE FROM domain_limits WHERE domain = ?", (domain,))
        return int(cursor.rowcount)

    # -- the request budget -----------------------------------------------------------------

    async def rate_rows(self, domain: str, *, urls: bool = False) -> list[RateRow]:
        return await self._run(self._rate_rows_sync, domain, urls)

    def _rate_rows_sync(self, domain: str, urls: bool) -> list[RateRow]:
        rows = (
            self._db()
            .execute(
                "SELECT importance, rate_changes, rate_exposure, url FROM frontier_entries "
                "WHERE domain = ? AND state = 'scheduled'",
                (domain,),
            )
            .fetchall()
        )
        if urls:
            return [RateRow(*row) for row in rows]
        return [RateRow(imp, changes, exposure) for imp, changes, exposure, _ in rows]

    async def allocations(self) -> dict[str, Allocation]:
        rows = await self._run(
            lambda: (
                self._db()
                .execute(
                    "SELECT domain, mu, allocated_at, gain, claimed, claimed_mark "
                    "FROM frontier_domains"
                )
                .fetchall()
            )
        )
        return {domain: Allocation(*values) for domain, *values in rows}

    async def set_allocation(
        self, domain: str, mu: float, per_hour: float = 0.0, gain: float = 1.0, mark: float = 0.0
    ) -> None:
        await self._run(
            self._transaction,
            lambda conn: conn.execute(
                "UPDATE frontier_domains SET mu = ?, allocated_at = ?, pace = ?, gain = ?, "
                "claimed_mark = ? WHERE domain = ?",
                (mu, time.time(), per_hour / 3600.0, gain, mark, domain),
            ),
        )

    async def domains(self) -> list[str]:
        rows = await self._run(
            lambda: self._db().execute("SELECT domain FROM frontier_domains").fetchall()
        )
        return sorted(domain for (domain,) in rows)

    async def retire(self, urls: Sequence[str], reason: str) -> int:
        rows = [lookup_url(url) for url in urls]
        if not rows:
            return 0
        return await self._run(
            self._transaction, lambda conn: self._retire_sync(conn, rows, reason)
        )

    def _retire_sync(self, conn: sqlite3.Connection, urls: list[str], reason: str) -> int:
        retired = 0
        for url in urls:
            retired += conn.execute(
                "UPDATE frontier_entries SET state = 'retired', state_reason = ?, due_at = ? "
                "WHERE url = ? AND state = 'scheduled' AND lease_token IS NULL",
                (reason, time.time(), url),
            ).rowcount
        self.stats["pricewatch/frontier/retired"] += retired
        return retired

    async def reinstate(self, urls: Sequence[str], reason: str) -> int:
        rows = [lookup_url(url) for url in urls]
        if not rows:
            return 0
        return await self._run(
            self._transaction, lambda conn: self._reinstate_sync(conn, rows, reason)
        )

    def _reinstate_sync(self, conn: sqlite3.Connection, urls: list[str], reason: str) -> int:
        now = time.time()
        moved = 0
        for url in urls:
            moved += conn.execute(
                "UPDATE frontier_entries SET state = 'scheduled', state_reason = NULL, "
                "due_at = ?, attempts = 0, failures = 0, gone_count = 0, seen_at = ? "
                "WHERE url = ? AND state = 'retired' AND state_reason = ?",
                (now, now, url, reason),
            ).rowcount
        return moved
