"""The SQLite store: the default backend, one local file, no server.

Selected by ``PRICEWATCH_STORE_URL = "sqlite:///pricewatch.db"`` (relative to the working
directory; ``sqlite:////abs/path.db`` for an absolute path). It may share its file with
the SQLite frontier (its tables are ``products``, ``price_changes``, ``store_migrations``).

Settings (read by :func:`pricewatch.storage.store_from_settings`):

- ``PRICEWATCH_STORE_URL``
- ``PRICEWATCH_STORE_AUTO_MIGRATE``: apply pending migrations in ``open()``.
- ``PRICEWATCH_STORE_TIMEOUT``: how long a write waits for a lock held by
  another process before it fails with :class:`StoreConnectionLost` (retryable).

One connection, owned by a dedicated thread (``ThreadPoolExecutor(max_workers=1)``):
every call is one hop to that thread, so the event loop never blocks on the disk. WAL
journal (readers never block the writer), ``synchronous=NORMAL`` (a committed batch
survives a crash of the process; a power cut may lose the last batches, which the
frontier then fetches again). One transaction per batch, one savepoint per observation
so a row the database rejects does not lose the rest of its batch.

Money is TEXT in the canonical fixed-point form, times ISO-8601 UTC text (see
:mod:`pricewatch.storage._values`), so both backends give back the same values.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, TypeVar

from pricewatch import settings as defaults
from pricewatch._sqlite import use_wal
from pricewatch._urls import mask_password, sqlite_path
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
from pricewatch.storage._migrations import migrations, sqlite_statements
from pricewatch.storage._values import Columns, iso_utc, parse_iso, problem, stored_text
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

T = TypeVar("T")

PAGE = 1000  # rows per hop to the store thread when streaming

_PRODUCT_COLUMNS = (
    "url, domain, sku, price, currency, regular_price, availability, name, source, "
    "first_seen_at, last_checked_at, last_changed_at, raw_hash, config_version"
)

_SELECT_PRODUCT = (
    "SELECT raw_hash, last_checked_at, price, currency, min_price, availability FROM products"
    " WHERE url = ?"
)
_INSERT_CHANGE = (
    "INSERT INTO price_changes (url, sku, price, currency, regular_price, availability,"
    " raw_hash, observed_at, config_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (url, observed_at) DO NOTHING"
)
_INSERT_PRODUCT = (
    "INSERT INTO products (url, domain, sku, price, currency, regular_price, availability,"
    " name, source, raw_hash, config_version, first_seen_at, last_checked_at, last_changed_at,"
    " min_price) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPDATE_CHANGED = (
    "UPDATE products SET domain = ?, sku = ?, price = ?, currency = ?, regular_price = ?,"
    " availability = ?, name = ?, source = ?, raw_hash = ?, config_version = ?,"
    " last_checked_at = ?, last_changed_at = ?, min_price = ? WHERE url = ?"
)
_QUARANTINED = "SELECT status FROM price_quarantine WHERE url = ? AND observed_at = ?"
_OPEN_HOLD = (
    "SELECT observed_at, price, currency, reason, attempt FROM price_quarantine"
    " WHERE url = ? AND status = 'held'"
)
_INSERT_HOLD = (
    "INSERT INTO price_quarantine (url, sku, price, currency, regular_price, availability,"
    " raw_hash, observed_at, config_version, reason, status, attempt, resolved_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_CLOSE_HOLD = (
    "UPDATE price_quarantine SET status = ?, resolved_at = ? WHERE url = ? AND status = 'held'"
)
_QUARANTINE_COLUMNS = (
    "url, sku, price, currency, regular_price, availability, observed_at, raw_hash, reason,"
    " status, attempt, resolved_at, config_version"
)
_QUARANTINE_ALL = f"SELECT {_QUARANTINE_COLUMNS} FROM price_quarantine ORDER BY observed_at, url"
_QUARANTINE_ONE = (
    f"SELECT {_QUARANTINE_COLUMNS} FROM price_quarantine"
    " WHERE url IN (SELECT ? UNION SELECT url FROM products WHERE sku = ?)"
    " ORDER BY observed_at, url"
)
_UPDATE_CHECKED = "UPDATE products SET last_checked_at = ? WHERE url = ? AND last_checked_at < ?"
_IS_CHANGE = "SELECT 1 FROM price_changes WHERE url = ? AND observed_at = ? AND raw_hash = ?"
_LATEST = f"SELECT {_PRODUCT_COLUMNS} FROM products WHERE url > ? ORDER BY url LIMIT ?"
_LATEST_DOMAIN = (
    f"SELECT {_PRODUCT_COLUMNS} FROM products WHERE domain = ? AND url > ? ORDER BY url LIMIT ?"
)
_HISTORY = (
    "SELECT url, sku, price, currency, regular_price, availability, observed_at, raw_hash,"
    " config_version FROM price_changes"
    " WHERE url IN (SELECT ? UNION SELECT url FROM products WHERE sku = ?)"
    " ORDER BY observed_at, url"
)
_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS store_migrations ("
    " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
)


def _optional_text(value: Decimal | None) -> str | None:
    return None if value is None else stored_text(value)


def _change_row(obs: Observation) -> tuple[Any, ...]:
    """The values a ``price_changes`` or ``price_quarantine`` row starts with, in the order
    of their columns (url, sku, price, currency, regular_price, availability, raw_hash,
    observed_at, config_version)."""
    return (
        obs.url,
        obs.sku,
        stored_text(obs.price),
        obs.currency,
        _optional_text(obs.regular_price),
        obs.availability,
        obs.raw_hash,
        iso_utc(obs.observed_at),
        obs.config_version,
    )


# Amounts are stored as canonical text, timestamps as ISO-8601 text.
_COLUMNS = Columns(amount=Decimal, time=parse_iso)


def _decimal(text: str | None) -> Decimal | None:
    return None if text is None else Decimal(text)


def _reason(exc: sqlite3.IntegrityError) -> str:
    """``CHECK constraint failed: currency_format`` -> ``currency_format``."""
    message = str(exc)
    if "CHECK constraint failed:" in message:
        return message.rsplit(":", 1)[1].strip()
    if "NOT NULL constraint failed:" in message:
        return message.rsplit(".", 1)[1].strip() + "_missing"
    return "integrity"


class SQLiteStore(Store):
    def __init__(
        self,
        url: str,
        *,
        auto_migrate: bool = defaults.PRICEWATCH_STORE_AUTO_MIGRATE,
        timeout: float = defaults.PRICEWATCH_STORE_TIMEOUT,
        quarantine: QuarantineConfig | None = None,
    ) -> None:
        self.url = url
        self.quarantine_config = quarantine
        self.path = sqlite_path(url)
        self.auto_migrate = auto_migrate
        self.timeout = timeout
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None  # used only on the executor's thread

    # -- plumbing ------------------------------------------------------------------------

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._executor is None:
            raise StoreUnavailable(f"store {mask_password(self.url)} is not open")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, fn, *args)

    def _connect(self) -> None:
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        try:
            use_wal(conn, self.timeout)
            conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error:
            conn.close()
            raise
        self._conn = conn

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def _db(self) -> sqlite3.Connection:
        assert self._conn is not None
        return self._conn

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        if self._executor is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pricewatch-store")
        try:
            await self._call(self._connect)
            if self.auto_migrate:
                await self._call(self._migrate_sync)
            else:
                await self._call(self._check_schema_sync)
        except (sqlite3.Error, OSError) as exc:
            await self.close()
            raise StoreUnavailable(
                f"cannot open the store {mask_password(self.url)} ({self.path}): {exc}"
            ) from exc
        except StoreUnavailable:
            await self.close()
            raise

    async def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(executor, self._disconnect)
        finally:
            executor.shutdown(wait=False)

    async def migrate(self) -> list[int]:
        opened_here = self._executor is None
        if opened_here:
            self._executor = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="pricewatch-store"
            )
        try:
            if self._conn is None:
                await self._call(self._connect)
            return await self._call(self._migrate_sync)
        except sqlite3.Error as exc:
            raise StoreUnavailable(
                f"cannot migrate the store {mask_password(self.url)}: {exc}"
            ) from exc
        finally:
            if opened_here:
                await self.close()

    def _applied(self) -> set[int]:
        self._db.execute(_MIGRATIONS_TABLE)
        return {row[0] for row in self._db.execute("SELECT version FROM store_migrations")}

    def _migrate_sync(self) -> list[int]:
        db = self._db
        db.execute("BEGIN IMMEDIATE")  # one migrator at a time across processes
        try:
            applied = self._applied()
            done = []
            for migration in migrations("sqlite"):
                if migration.version in applied:
                    continue
                for statement in sqlite_statements(migration.sql):
                    db.execute(statement)
                db.execute(
                    "INSERT INTO store_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, iso_utc(datetime.now(UTC))),
                )
                done.append(migration.version)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return done

    def _check_schema_sync(self) -> None:
        missing = {m.version for m in migrations("sqlite")} - self._applied()
        if missing:
            raise StoreUnavailable(
                f"the store {mask_password(self.url)} lacks schema migrations "
                f"{sorted(missing)} and PRICEWATCH_STORE_AUTO_MIGRATE is off: "
                "run `scrapy db upgrade`"
            )

    # -- writes --------------------------------------------------------------------------

    async def write(self, batch: Sequence[Observation]) -> WriteResult:
        if not batch:
            return WriteResult()
        try:
            return await self._call(self._write_sync, batch)
        except sqlite3.OperationalError as exc:  # locked beyond the timeout, disk full, ...
            raise StoreConnectionLost(
                f"write to the store {mask_password(self.url)} failed, nothing committed: {exc}"
            ) from exc

    def _write_sync(self, batch: Sequence[Observation]) -> WriteResult:
        result = WriteResult()
        good = []
        for obs in batch:
            reason = problem(obs)
            if reason:
                result.rejected.append(Rejected(obs, reason))
            else:
                good.append(obs)
        good.sort(key=lambda o: (o.url, o.observed_at))
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for obs in good:
                db.execute("SAVEPOINT observation")
                part = WriteResult()
                try:
                    changed = self._apply(db, obs, part)
                except sqlite3.IntegrityError as exc:
                    db.execute("ROLLBACK TO observation")
                    result.rejected.append(Rejected(obs, _reason(exc)))
                    continue
                finally:
                    db.execute("RELEASE observation")
                result.written += 1
                result.merge_quarantine(part)
                if changed:
                    result.changed.add(obs.url)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return result

    def _apply(self, db: sqlite3.Connection, obs: Observation, result: WriteResult) -> bool:
        """Apply one observation; return whether it is a recorded change (also on replay).
        Holds, confirmations and rejections of the quarantine go into ``result``."""
        at = iso_utc(obs.observed_at)
        price, regular = stored_text(obs.price), _optional_text(obs.regular_price)
        stored = db.execute(_SELECT_PRODUCT, (obs.url,)).fetchone()
        if stored is not None and self.quarantine_config is not None:
            if not self._passes_quarantine(db, obs, stored, result):
                return False
        change = _change_row(obs)
        if stored is None:
            db.execute(_INSERT_CHANGE, change)
            db.execute(
                _INSERT_PRODUCT,
                (
                    obs.url,
                    obs.domain,
                    obs.sku,
                    price,
                    obs.currency,
                    regular,
                    obs.availability,
                    obs.name,
                    obs.source,
                    obs.raw_hash,
                    obs.config_version,
                    at,
                    at,
                    at,
                    price,
                ),
            )
            return True
        stored_hash, checked_at, stored_price, stored_currency, min_price, stored_avail = stored
        if stored_hash == obs.raw_hash:
            db.execute(_UPDATE_CHECKED, (at, obs.url, at))
        elif at > checked_at:
            if (
                min_price is None
                or stored_currency != obs.currency
                or obs.price < Decimal(min_price)
            ):
                min_price = price
            if db.execute(_INSERT_CHANGE, change).rowcount == 1:
                result.published.append(
                    PublishedChange(
                        obs.url,
                        obs.sku,
                        obs.price,
                        obs.currency,
                        obs.availability,
                        obs.observed_at,
                        Decimal(stored_price),
                        stored_currency,
                        stored_avail,
                    )
                )
            db.execute(
                _UPDATE_CHANGED,
                (
                    obs.domain,
                    obs.sku,
                    price,
                    obs.currency,
                    regular,
                    obs.availability,
                    obs.name,
                    obs.source,
                    obs.raw_hash,
                    obs.config_version,
                    at,
                    at,
                    min_price,
                    obs.url,
                ),
            )
            return True
        # else: older than what is stored (a late replay): the newer offer stands.
        return db.execute(_IS_CHANGE, (obs.url, at, obs.raw_hash)).fetchone() is not None

    # -- reads ---------------------------------------------------------------------------

    async def latest(self, domain: str | None = None) -> AsyncIterator[ProductRow]:
        after = ""
        while True:
            page = await self._call(self._latest_page, domain, after)
            for row in page:
                yield row
            if len(page) < PAGE:
                return
            after = page[-1].url

    def _passes_quarantine(
        self, db: sqlite3.Connection, obs: Observation, stored: tuple[Any, ...], result: WriteResult
    ) -> bool:
        """Whether ``obs`` goes on to the product row, as the quarantine decides (see
        :mod:`pricewatch.storage.quarantine`); holds, confirmations and rejections go into
        ``result``. False for a held, discarded or replayed observation."""
        config = self.quarantine_config
        assert config is not None
        at = iso_utc(obs.observed_at)
        done = db.execute(_QUARANTINED, (obs.url, at)).fetchone()
        if done is not None:  # a replay of an observation that was not published
            if done[0] == HELD:
                hold = db.execute(_OPEN_HOLD, (obs.url,)).fetchone()
                result.held[obs.url] = hold[3]
            return False
        hold_row = db.execute(_OPEN_HOLD, (obs.url,)).fetchone()
        hold = None
        if hold_row is not None:
            hold = Hold(
                parse_iso(hold_row[0]),
                Decimal(hold_row[1]),
                hold_row[2],
                hold_row[3],
                hold_row[4],
            )
        published = Published(
            price=Decimal(stored[2]),
            currency=stored[3],
            checked_at=parse_iso(stored[1]),
            min_price=_decimal(stored[4]),
            availability=stored[5],
        )
        mass = mass_reason(self.mass_guard, published, hold, obs)
        verdict = decide(config, published, hold, obs, mass)
        action = verdict.action
        if action in (Action.CONFIRM, Action.REVERT, Action.REPLACE, Action.GIVE_UP):
            assert hold is not None
            status = CONFIRMED if action is Action.CONFIRM else REJECTED
            db.execute(_CLOSE_HOLD, (status, at, obs.url))
            if status == CONFIRMED:
                result.confirmed.add(obs.url)
            else:
                result.unconfirmed.append((obs.url, hold.reason))
        if action in (Action.HOLD, Action.REPLACE, Action.GIVE_UP, Action.DISCARD):
            assert verdict.reason is not None
            status = HELD if action in (Action.HOLD, Action.REPLACE) else REJECTED
            db.execute(
                _INSERT_HOLD,
                (
                    *_change_row(obs),
                    verdict.reason,
                    status,
                    verdict.attempt,
                    None if status == HELD else at,
                ),
            )
            if status == HELD:
                result.held[obs.url] = verdict.reason
            else:
                result.unconfirmed.append((obs.url, verdict.reason))
            return False
        return True

    def _latest_page(self, domain: str | None, after: str) -> list[ProductRow]:
        if domain is None:
            rows = self._db.execute(_LATEST, (after, PAGE))
        else:
            rows = self._db.execute(_LATEST_DOMAIN, (domain, after, PAGE))
        return [_COLUMNS.product(r) for r in rows]

    async def history(self, url_or_sku: str) -> list[ChangeRow]:
        return await self._call(self._history_sync, url_or_sku)

    async def quarantine(self, url_or_sku: str | None = None) -> list[HeldRow]:
        return await self._call(self._quarantine_sync, url_or_sku)

    def _quarantine_sync(self, url_or_sku: str | None) -> list[HeldRow]:
        if url_or_sku is None:
            rows = self._db.execute(_QUARANTINE_ALL)
        else:
            rows = self._db.execute(_QUARANTINE_ONE, (url_or_sku, url_or_sku))
        return [_COLUMNS.held(r) for r in rows]

    def _history_sync(self, url_or_sku: str) -> list[ChangeRow]:
        rows = self._db.execute(_HISTORY, (url_or_sku, url_or_sku))
        return [_COLUMNS.change(r) for r in rows]
