"""The PostgreSQL store: the production backend, shared by every worker, via asyncpg.

Selected by ``PRICEWATCH_STORE_URL = "postgresql://user[:password]@host[:port]/db"`` (also
from the environment). Settings (read by :func:`pricewatch.storage.store_from_settings`):

- ``PRICEWATCH_STORE_URL``
- ``PRICEWATCH_STORE_AUTO_MIGRATE``: apply pending migrations in ``open()``
  (under an advisory lock, so workers starting together migrate once).
- ``PRICEWATCH_STORE_TIMEOUT``: connect timeout and per-statement timeout;
  a batch that exceeds it fails with :class:`StoreConnectionLost` (retryable).
- ``PRICEWATCH_STORE_POOL_SIZE``: connections in the crawl's pool.

One pool per crawl, created in ``open()`` and closed in ``close()``. A batch is one
transaction: the observations are COPYed (binary) into a per-connection temporary staging
table, then one statement per *round* (a batch with distinct URLs is one round) appends
the changes to ``price_changes`` and upserts ``products``, and returns the URLs whose
observation is a recorded change. Unchanged observations only move ``last_checked_at``;
an observation older than the stored check (a late replay) changes nothing; the unique
``(url, observed_at)`` of ``price_changes`` makes a replayed batch add no row.

A batch the database refuses (a CHECK constraint, a value too long) is written again in
halves, each under a savepoint, down to the offending rows, which are returned as
rejected with the constraint's name; the rest commits. Rows are checked in Python first
(:func:`pricewatch.storage._values.problem`) so that the usual bad rows never get there.

With a quarantine config (:mod:`pricewatch.quarantine`) each round first reads, in one
query, the published offers, open holds and already-quarantined observations of its URLs,
decides in Python (the same :func:`~pricewatch.quarantine.decide` as SQLite), records
holds and their resolutions, and writes only what is published.

Concurrency: two workers writing the same URL at the same instant could both see the old
hash; the frontier's leases make that practically impossible, and the unique index keeps
the history free of duplicates anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

import asyncpg

from pricewatch import settings as defaults
from pricewatch._urls import mask_password, url_problem
from pricewatch.quarantine import (
    CONFIRMED,
    HELD,
    REJECTED,
    Action,
    Hold,
    Published,
    QuarantineConfig,
    decide,
    mass_reason,
)
from pricewatch.storage._migrations import migrations
from pricewatch.storage._values import (
    Columns,
    in_rounds,
    normalise_decimal,
    problem,
    stored_decimal,
)
from pricewatch.storage.base import (
    ChangeRow,
    HeldRow,
    Observation,
    ProductRow,
    PublishedChange,
    Rejected,
    Store,
    StoreConnectionLost,
    StoreUnavailable,
    WriteResult,
)

CLOSE_TIMEOUT = 10.0
PREFETCH = 1000  # rows per round trip when streaming latest()
# pg_advisory_xact_lock key held while migrating ("pricewat" in ASCII).
MIGRATION_LOCK = 0x7072696365776174

# Errors after which the batch may be retried as is: the connection broke (class 08, a
# closed socket), the server is shutting down or cancelled us (57), is out of resources
# (53), a serialization failure or deadlock (40), or the statement timed out. asyncpg
# raises InternalClientError when a connection the server killed is used before the
# socket's closing has been seen ("cannot switch to state ...").
RETRYABLE = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.InsufficientResourcesError,
    asyncpg.exceptions.TransactionRollbackError,
)
# Errors that one bad row causes: constraint violations (23) and bad data (22).
ROW_ERRORS = (
    asyncpg.exceptions.IntegrityConstraintViolationError,
    asyncpg.exceptions.DataError,
)

STAGING = "pricewatch_staging"
_STAGING_COLUMNS = (
    "round",
    "url",
    "domain",
    "sku",
    "price",
    "currency",
    "regular_price",
    "availability",
    "name",
    "source",
    "raw_hash",
    "config_version",
    "observed_at",
)
_CREATE_STAGING = f"""
CREATE TEMPORARY TABLE IF NOT EXISTS {STAGING} (
    round integer NOT NULL,
    url text,
    domain text,
    sku text,
    price numeric,
    currency text,
    regular_price numeric,
    availability text,
    name text,
    source text,
    raw_hash text,
    config_version text,
    observed_at timestamptz
) ON COMMIT DELETE ROWS
"""

# One round of a batch: append the changes, upsert the products, return the URLs whose
# observation is a recorded change (also when the row was there already: a replay), with
# the offer it replaced when this statement inserted the change row (``inserted``; a
# replay inserts nothing, so alerts nothing). All parts see the tables as they were
# before the statement, so ``p`` is the previous offer and the two halves are disjoint.
_WRITE_ROUND = f"""
WITH s AS (
    SELECT * FROM {STAGING} WHERE round = $1
), history AS (
    INSERT INTO price_changes AS c
        (url, sku, price, currency, regular_price, availability, raw_hash, observed_at,
         config_version)
    SELECT s.url, s.sku, s.price, s.currency, s.regular_price, s.availability, s.raw_hash,
           s.observed_at, s.config_version
    FROM s LEFT JOIN products p ON p.url = s.url
    WHERE p.url IS NULL
       OR (s.raw_hash <> p.raw_hash AND s.observed_at > p.last_checked_at)
    ON CONFLICT (url, observed_at) DO NOTHING
    RETURNING c.url, c.price, c.currency, c.availability, c.observed_at, c.sku
), upsert AS (
    INSERT INTO products AS p
        (url, domain, sku, price, currency, regular_price, availability, name, source,
         raw_hash, config_version, first_seen_at, last_checked_at, last_changed_at,
         min_price)
    SELECT url, domain, sku, price, currency, regular_price, availability, name, source,
           raw_hash, config_version, observed_at, observed_at, observed_at, price
    FROM s
    ON CONFLICT (url) DO UPDATE SET
        domain = CASE WHEN p.raw_hash = EXCLUDED.raw_hash THEN p.domain
                      ELSE EXCLUDED.domain END,
        sku = CASE WHEN p.raw_hash = EXCLUDED.raw_hash THEN p.sku ELSE EXCLUDED.sku END,
        price = CASE WHEN p.raw_hash = EXCLUDED.raw_hash THEN p.price ELSE EXCLUDED.price END,
        currency = CASE WHEN p.raw_hash = EXCLUDED.raw_hash THEN p.currency
                        ELSE EXCLUDED.currency END,
        regular_price = CASE WHEN p.raw_hash = EXCLUDED.raw_hash THEN p.regular_price
                             ELSE EXCLUDED.regular_price END,
        availability = CASE WHEN p.raw_hash = EXCLUDED.raw_hash THEN p.availability
                            ELSE EXCLUDED.availability END,
        name = CASE WHEN p.raw_hash = EXCLUDED.raw_hash THEN p.name ELSE EXCLUDED.name END,
        source = CASE WHEN p.raw_hash = EXCLUDED.raw_hash THEN p.source
                      ELSE EXCLUDED.source END,
        config_version = CASE WHEN p.raw_hash = EXCLUDED.raw_hash THEN p.config_version
                              ELSE EXCLUDED.config_version END,
        last_changed_at = CASE WHEN p.raw_hash = EXCLUDED.raw_hash THEN p.last_changed_at
                               ELSE EXCLUDED.last_changed_at END,
        min_price = CASE WHEN p.raw_hash = EXCLUDED.raw_hash THEN p.min_price
                         WHEN p.min_price IS NULL OR p.currency <> EXCLUDED.currency
                             THEN EXCLUDED.price
                         ELSE least(p.min_price, EXCLUDED.price) END,
        raw_hash = EXCLUDED.raw_hash,
        last_checked_at = EXCLUDED.last_checked_at
    WHERE EXCLUDED.last_checked_at > p.last_checked_at
)
SELECT h.url, true AS inserted, h.price, h.currency, h.availability, h.observed_at, h.sku,
       p.price AS previous_price, p.currency AS previous_currency,
       p.availability AS previous_availability
FROM history h LEFT JOIN products p ON p.url = h.url
UNION ALL
SELECT s.url, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM s JOIN price_changes c
    ON c.url = s.url AND c.observed_at = s.observed_at AND c.raw_hash = s.raw_hash
"""


def _round_changes(rows: list[asyncpg.Record], part: WriteResult) -> set[str]:
    """The changed URLs of a round of ``_WRITE_ROUND``; the changes it inserted over a
    previous offer go to ``part.published``."""
    for r in rows:
        if r["inserted"] and r["previous_price"] is not None:
            part.published.append(
                PublishedChange(
                    r["url"],
                    r["sku"],
                    r["price"],
                    r["currency"].strip(),
                    r["availability"],
                    r["observed_at"],
                    r["previous_price"],
                    r["previous_currency"].strip(),
                    r["previous_availability"],
                )
            )
    return {r["url"] for r in rows}


# Quarantine (pricewatch/quarantine.py): what the decision of one round needs to know, in
# one round trip: the published offer, the open hold, and whether the observation itself
# is already in price_quarantine (a replay). Rows of SKUs not stored yet are left out.
_DECISION_STATE = """
SELECT o.url, p.price, p.currency, p.last_checked_at, p.min_price,
       q.observed_at, q.price, q.currency, q.reason, q.attempt, d.status, p.availability
FROM unnest($1::text[], $2::timestamptz[]) AS o(url, observed_at)
JOIN products p ON p.url = o.url
LEFT JOIN price_quarantine q ON q.url = o.url AND q.status = 'held'
LEFT JOIN price_quarantine d ON d.url = o.url AND d.observed_at = o.observed_at
"""
_INSERT_HOLD = """
INSERT INTO price_quarantine (url, sku, price, currency, regular_price, availability,
    raw_hash, observed_at, reason, status, attempt, resolved_at, config_version)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (url, observed_at) DO NOTHING
"""
_CLOSE_HOLD = """
UPDATE price_quarantine SET status = $1, resolved_at = $2 WHERE url = $3 AND status = 'held'
"""
_QUARANTINE_COLUMNS = """
SELECT url, sku, price, currency, regular_price, availability, observed_at, raw_hash, reason,
       status, attempt, resolved_at, config_version
FROM price_quarantine"""
_QUARANTINE_ALL = f"{_QUARANTINE_COLUMNS} ORDER BY observed_at, url"
_QUARANTINE_ONE = f"""{_QUARANTINE_COLUMNS}
WHERE url IN (SELECT $1::text UNION SELECT url FROM products WHERE sku = $1)
ORDER BY observed_at, url"""

_PRODUCT_COLUMNS = (
    "url, domain, sku, price, currency, regular_price, availability, name, source,"
    " first_seen_at, last_checked_at, last_changed_at, raw_hash, config_version"
)
_LATEST = f"SELECT {_PRODUCT_COLUMNS} FROM products ORDER BY url"
_LATEST_DOMAIN = f"SELECT {_PRODUCT_COLUMNS} FROM products WHERE domain = $1 ORDER BY url"
# By url, or by the sku of the products (a UNION, so that both sides use an index).
_HISTORY = """
SELECT url, sku, price, currency, regular_price, availability, observed_at, raw_hash,
       config_version
FROM price_changes
WHERE url IN (SELECT $1::text UNION SELECT url FROM products WHERE sku = $1)
ORDER BY observed_at, url
"""
# The CSV of `scrapy prices --csv`: the same text as the SQLite store writes (canonical
# decimals are numeric's own text; times ISO-8601 UTC with microseconds).
_ISO = """to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')"""
# Text cells a spreadsheet would run as a formula get a leading ' (pricewatch._text.csv_cell).
_CSV_GUARD = (
    "CASE WHEN left({0}, 1) IN ('=', '+', '-', '@', chr(9), chr(13)) THEN '''' || {0}"
    " ELSE {0} END AS {0}"
)
_CSV_SELECT = (
    f"SELECT {', '.join(_CSV_GUARD.format(c) for c in ('url', 'domain', 'sku', 'name'))},"
    " price::text, currency::text, regular_price::text,"
    f" availability, {_ISO.format('first_seen_at')} AS first_seen_at,"
    f" {_ISO.format('last_checked_at')} AS checked_at,"
    f" {_ISO.format('last_changed_at')} AS changed_at FROM products"
)
_CSV = f"{_CSV_SELECT} ORDER BY url"
_CSV_DOMAIN = f"{_CSV_SELECT} WHERE domain = $1 ORDER BY url"

_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS store_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


def _reason(exc: asyncpg.PostgresError) -> str:
    """The reason code of a row the database refused."""
    constraint = getattr(exc, "constraint_name", None)
    if isinstance(exc, asyncpg.exceptions.CheckViolationError) and constraint:
        return str(constraint)
    if isinstance(exc, asyncpg.exceptions.NotNullViolationError):
        return f"{getattr(exc, 'column_name', None) or 'value'}_missing"
    if isinstance(exc, asyncpg.exceptions.StringDataRightTruncationError):
        return "value_too_long"
    if isinstance(exc, asyncpg.exceptions.NumericValueOutOfRangeError):
        return "out_of_range"
    return "integrity" if isinstance(exc, ROW_ERRORS[0]) else "invalid_data"


def _money_column(value: Decimal | None) -> Decimal | None:
    return None if value is None else stored_decimal(value)


def _records(rounds: list[list[Observation]], first: int = 0) -> list[tuple[Any, ...]]:
    return [
        (
            first + k,
            o.url,
            o.domain,
            o.sku,
            stored_decimal(o.price),
            o.currency,
            _money_column(o.regular_price),
            o.availability,
            o.name,
            o.source,
            o.raw_hash,
            o.config_version,
            o.observed_at,
        )
        for k, observations in enumerate(rounds)
        for o in observations
    ]


def _timestamp(value: datetime) -> datetime:
    return value


# asyncpg gives timestamptz as aware datetimes, and numeric as a Decimal that may carry an
# exponent (30000 as Decimal("3E+4")): amounts come back canonical, as from SQLite.
_COLUMNS = Columns(amount=normalise_decimal, time=_timestamp)


class PostgresStore(Store):
    def __init__(
        self,
        url: str,
        *,
        auto_migrate: bool = defaults.PRICEWATCH_STORE_AUTO_MIGRATE,
        timeout: float = defaults.PRICEWATCH_STORE_TIMEOUT,
        pool_size: int = defaults.PRICEWATCH_STORE_POOL_SIZE,
        quarantine: QuarantineConfig | None = None,
    ) -> None:
        self.quarantine_config = quarantine
        self._masked_url = mask_password(url)
        unreadable = url_problem(url)
        if unreadable:
            raise ValueError(
                f"PRICEWATCH_STORE_URL {self._masked_url} cannot be read: {unreadable}"
            )
        self.url = url
        self.auto_migrate = auto_migrate
        self.timeout = timeout
        self.pool_size = pool_size
        self._pool: asyncpg.Pool | None = None

    def _masked(self) -> str:
        return self._masked_url

    # -- lifecycle -----------------------------------------------------------------------

    async def _connect(self) -> asyncpg.Connection:
        try:
            return await asyncpg.connect(
                self.url, timeout=self.timeout, server_settings={"application_name": "pricewatch"}
            )
        except (*RETRYABLE, asyncpg.PostgresError) as exc:
            raise StoreUnavailable(
                f"cannot connect to the store {self._masked()}: {type(exc).__name__}: {exc}"
            ) from exc
        except ValueError:  # the DSN parser's message may quote pieces of the password
            raise StoreUnavailable(f"cannot read the store URL {self._masked()}") from None

    @staticmethod
    async def _init_connection(conn: asyncpg.Connection) -> None:
        await conn.execute(_CREATE_STAGING)

    async def open(self) -> None:
        if self._pool is not None:
            return
        if self.auto_migrate:
            await self.migrate()
        try:
            pool = await asyncpg.create_pool(
                self.url,
                min_size=1,
                max_size=self.pool_size,
                timeout=self.timeout,
                command_timeout=self.timeout,
                init=self._init_connection,
                server_settings={"application_name": "pricewatch"},
            )
        except (*RETRYABLE, asyncpg.PostgresError) as exc:
            raise StoreUnavailable(
                f"cannot connect to the store {self._masked()}: {type(exc).__name__}: {exc}"
            ) from exc
        except ValueError:  # the DSN parser's message may quote pieces of the password
            raise StoreUnavailable(f"cannot read the store URL {self._masked()}") from None
        try:
            if not self.auto_migrate:
                async with pool.acquire() as conn:
                    await self._check_schema(conn)
        except BaseException:
            pool.terminate()
            raise
        self._pool = pool

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            await asyncio.wait_for(pool.close(), CLOSE_TIMEOUT)
        except TimeoutError:
            pool.terminate()

    async def migrate(self) -> list[int]:
        conn = await self._connect()
        try:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
                await conn.execute(_MIGRATIONS_TABLE)
                applied = {r[0] for r in await conn.fetch("SELECT version FROM store_migrations")}
                done = []
                for migration in migrations("postgresql"):
                    if migration.version in applied:
                        continue
                    await conn.execute(migration.sql)
                    await conn.execute(
                        "INSERT INTO store_migrations (version, name) VALUES ($1, $2)",
                        migration.version,
                        migration.name,
                    )
                    done.append(migration.version)
            return done
        except (*RETRYABLE, asyncpg.PostgresError) as exc:
            raise StoreUnavailable(
                f"cannot migrate the store {self._masked()}: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            if not conn.is_closed():
                try:
                    await conn.close(timeout=CLOSE_TIMEOUT)
                except (*RETRYABLE, asyncpg.PostgresError):
                    conn.terminate()

    async def _check_schema(self, conn: asyncpg.Connection) -> None:
        exists = await conn.fetchval("SELECT to_regclass('store_migrations') IS NOT NULL")
        applied = (
            {r[0] for r in await conn.fetch("SELECT version FROM store_migrations")}
            if exists
            else set()
        )
        missing = {m.version for m in migrations("postgresql")} - applied
        if missing:
            raise StoreUnavailable(
                f"the store {self._masked()} lacks schema migrations {sorted(missing)} and "
                "PRICEWATCH_STORE_AUTO_MIGRATE is off: run `scrapy db upgrade`"
            )

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise StoreUnavailable(f"store {self._masked()} is not open")
        return self._pool

    # -- writes --------------------------------------------------------------------------

    async def write(self, batch: Sequence[Observation]) -> WriteResult:
        result = WriteResult()
        good = []
        for obs in batch:
            reason = problem(obs)
            if reason:
                result.rejected.append(Rejected(obs, reason))
            else:
                good.append(obs)
        if not good:
            return result
        pool = self.pool
        refused: list[Rejected] = []
        try:
            async with pool.acquire(timeout=self.timeout) as conn:
                try:
                    try:
                        part = WriteResult()
                        async with conn.transaction():
                            changed = await self._apply(conn, good, part)
                    except ROW_ERRORS:
                        part = WriteResult()
                        async with conn.transaction():
                            changed = await self._isolate(conn, good, refused, part, known_bad=True)
                except RETRYABLE:
                    conn.terminate()  # never hand a half-broken connection back to the pool
                    raise
        except RETRYABLE as exc:
            raise StoreConnectionLost(
                f"write of {len(good)} observations to the store {self._masked()} failed, "
                f"to be retried: {type(exc).__name__}: {exc}"
            ) from exc
        result.changed = changed
        result.merge_quarantine(part)
        result.written = len(good) - len(refused)
        result.rejected.extend(refused)
        return result

    async def _apply(
        self, conn: asyncpg.Connection, observations: list[Observation], part: WriteResult
    ) -> set[str]:
        rounds = in_rounds(observations)
        changed: set[str] = set()
        if self.quarantine_config is None:
            await conn.copy_records_to_table(
                STAGING, records=_records(rounds), columns=_STAGING_COLUMNS
            )
            for k in range(len(rounds)):
                changed |= _round_changes(await conn.fetch(_WRITE_ROUND, k), part)
            return changed
        for k, observations_k in enumerate(rounds):
            publish = await self._quarantine_round(conn, observations_k, part)
            if not publish:
                continue
            await conn.copy_records_to_table(
                STAGING, records=_records([publish], k), columns=_STAGING_COLUMNS
            )
            changed |= _round_changes(await conn.fetch(_WRITE_ROUND, k), part)
        return changed

    async def _quarantine_round(
        self, conn: asyncpg.Connection, observations: list[Observation], part: WriteResult
    ) -> list[Observation]:
        """Decide on one round (distinct URLs): record holds and their resolutions, and
        return the observations to write as usual."""
        config = self.quarantine_config
        assert config is not None
        state = {
            r[0]: r
            for r in await conn.fetch(
                _DECISION_STATE,
                [o.url for o in observations],
                [o.observed_at for o in observations],
            )
        }
        publish: list[Observation] = []
        closes: list[tuple[Any, ...]] = []
        inserts: list[tuple[Any, ...]] = []
        for obs in observations:
            row = state.get(obs.url)
            if row is None:
                publish.append(obs)
                continue
            if row[10] is not None:  # a replay of an observation that was not published
                if row[10] == HELD and row[8] is not None:
                    part.held[obs.url] = row[8]
                continue
            hold = None if row[5] is None else Hold(row[5], row[6], row[7].strip(), row[8], row[9])
            published = Published(
                price=row[1],
                currency=row[2].strip(),
                checked_at=row[3],
                min_price=row[4],
                availability=row[11],
            )
            mass = mass_reason(self.mass_guard, published, hold, obs)
            verdict = decide(config, published, hold, obs, mass)
            action = verdict.action
            if action in (Action.CONFIRM, Action.REVERT, Action.REPLACE, Action.GIVE_UP):
                assert hold is not None
                status = CONFIRMED if action is Action.CONFIRM else REJECTED
                closes.append((status, obs.observed_at, obs.url))
                if status == CONFIRMED:
                    part.confirmed.add(obs.url)
                else:
                    part.unconfirmed.append((obs.url, hold.reason))
            if action in (Action.HOLD, Action.REPLACE, Action.GIVE_UP, Action.DISCARD):
                assert verdict.reason is not None
                status = HELD if action in (Action.HOLD, Action.REPLACE) else REJECTED
                inserts.append(
                    (
                        obs.url,
                        obs.sku,
                        stored_decimal(obs.price),
                        obs.currency,
                        _money_column(obs.regular_price),
                        obs.availability,
                        obs.raw_hash,
                        obs.observed_at,
                        verdict.reason,
                        status,
                        verdict.attempt,
                        None if status == HELD else obs.observed_at,
                        obs.config_version,
                    )
                )
                if status == HELD:
                    part.held[obs.url] = verdict.reason
                else:
                    part.unconfirmed.append((obs.url, verdict.reason))
                continue
            publish.append(obs)
        if closes:
            await conn.executemany(_CLOSE_HOLD, closes)
        if inserts:
            await conn.executemany(_INSERT_HOLD, inserts)
        return publish

    async def _isolate(
        self,
        conn: asyncpg.Connection,
        observations: list[Observation],
        rejected: list[Rejected],
        part: WriteResult,
        known_bad: bool = False,
    ) -> set[str]:
        """Write ``observations`` in halves under savepoints, rejecting the rows the
        database refuses one by one; return the changed URLs of the rest (their quarantine
        outcomes go into ``part``)."""
        if not known_bad or len(observations) == 1:
            piece = WriteResult()
            try:
                async with conn.transaction():  # a savepoint
                    await conn.execute(f"TRUNCATE {STAGING}")
                    changed = await self._apply(conn, observations, piece)
            except ROW_ERRORS as exc:
                if len(observations) == 1:
                    rejected.append(Rejected(observations[0], _reason(exc)))
                    return set()
            else:
                part.merge_quarantine(piece)
                return changed
        middle = len(observations) // 2
        # Sorted by (url, observed_at) in _apply's rounds; halves of the sorted list keep
        # the observations of one URL in time order.
        ordered = sorted(observations, key=lambda o: (o.url, o.observed_at))
        changed = await self._isolate(conn, ordered[:middle], rejected, part)
        return changed | await self._isolate(conn, ordered[middle:], rejected, part)

    # -- reads ---------------------------------------------------------------------------

    async def latest(self, domain: str | None = None) -> AsyncIterator[ProductRow]:
        query, args = (_LATEST, ()) if domain is None else (_LATEST_DOMAIN, (domain,))
        async with self.pool.acquire(timeout=self.timeout) as conn:
            async with conn.transaction(readonly=True):
                async for r in conn.cursor(query, *args, prefetch=PREFETCH):
                    yield _COLUMNS.product(r)

    async def history(self, url_or_sku: str) -> list[ChangeRow]:
        rows = await self.pool.fetch(_HISTORY, url_or_sku)
        return [_COLUMNS.change(r) for r in rows]

    async def quarantine(self, url_or_sku: str | None = None) -> list[HeldRow]:
        if url_or_sku is None:
            rows = await self.pool.fetch(_QUARANTINE_ALL)
        else:
            rows = await self.pool.fetch(_QUARANTINE_ONE, url_or_sku)
        return [_COLUMNS.held(r) for r in rows]

    async def export_csv(self, write: Callable[[bytes], object], domain: str | None = None) -> int:
        """``COPY … TO STDOUT`` streamed to ``write``: constant memory for any size."""

        async def sink(chunk: bytes) -> None:
            write(chunk)

        query, args = (_CSV, ()) if domain is None else (_CSV_DOMAIN, (domain,))
        async with self.pool.acquire(timeout=self.timeout) as conn:
            status = await conn.copy_from_query(
                query, *args, output=sink, format="csv", header=True, timeout=None
            )
        return int(status.split()[-1])
