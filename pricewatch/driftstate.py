"""Drift alarms, persisted beside the frontier so that ``scrapy frontier`` shows which
domains are drifting, whichever worker raised the alarm.

- SQLite: table ``drift_alarms`` (domain, kind, detail, raised_at, until) in the frontier's
  file;
- Redis: the hash ``pricewatch:{<namespace>}:drift`` (``Keys.drift``), field
  ``<domain> <kind>``, value JSON ``{"detail", "raised_at", "until"}``.

An alarm lasts until ``until`` (epoch seconds: the end of the window it was raised in,
renewed while the domain keeps drifting); expired alarms are not shown and are deleted by
the next write. Calls are rare (one per alarm raised, one per ``scrapy frontier``) and
never block the event loop. Failures raise :class:`DriftStateUnavailable` naming the
masked URL.
"""

from __future__ import annotations

import abc
import asyncio
import json
import sqlite3
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pricewatch._redis import redis_client, redis_options
from pricewatch._urls import frontier_backend, mask_password, sqlite_path

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

BUSY_TIMEOUT = 30.0
_SCHEMA = """
CREATE TABLE IF NOT EXISTS drift_alarms (
    domain    TEXT NOT NULL,
    kind      TEXT NOT NULL,
    detail    TEXT NOT NULL,
    raised_at REAL NOT NULL,
    until     REAL NOT NULL,
    PRIMARY KEY (domain, kind)
)
"""


class DriftStateUnavailable(RuntimeError):
    """The backend holding the drift alarms cannot be reached; names the masked URL."""


@dataclass(frozen=True, slots=True)
class DriftAlarm:
    domain: str
    kind: str  # no_price, invalid, blocked, mass_change, mass_out_of_stock
    detail: str  # the rate, its sample and its baseline, in words
    raised_at: float  # epoch seconds
    until: float  # epoch seconds


class DriftStates(abc.ABC):
    url: str

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    @abc.abstractmethod
    async def raise_alarm(self, alarm: DriftAlarm) -> None:
        """Record ``alarm`` (replacing the same domain and kind)."""

    @abc.abstractmethod
    async def active(self, now: float | None = None) -> list[DriftAlarm]:
        """The alarms not expired at ``now`` (default: the current time), by domain, kind."""


class SQLiteDriftStates(DriftStates):
    """A table in the SQLite frontier file; one short connection per call, on a thread."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = sqlite_path(url)

    def _call(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None)
        try:
            conn.execute(_SCHEMA)
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    async def _run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            return await asyncio.to_thread(self._call, sql, params)
        except (sqlite3.Error, OSError) as exc:
            raise DriftStateUnavailable(
                f"cannot use the drift alarms in {self.url}: {exc}"
            ) from exc

    async def raise_alarm(self, alarm: DriftAlarm) -> None:
        await self._run("DELETE FROM drift_alarms WHERE until < ?", (alarm.raised_at,))
        await self._run(
            "INSERT OR REPLACE INTO drift_alarms (domain, kind, detail, raised_at, until)"
            " VALUES (?, ?, ?, ?, ?)",
            (alarm.domain, alarm.kind, alarm.detail, alarm.raised_at, alarm.until),
        )

    async def active(self, now: float | None = None) -> list[DriftAlarm]:
        if not self.path.exists():
            return []
        rows = await self._run(
            "SELECT domain, kind, detail, raised_at, until FROM drift_alarms"
            " WHERE until >= ? ORDER BY domain, kind",
            (time.time() if now is None else now,),
        )
        return [DriftAlarm(*row) for row in rows]


class RedisDriftStates(DriftStates):
    """A Redis hash beside the Redis frontier's keys."""

    def __init__(self, url: str, namespace: str, timeout: float) -> None:
        from pricewatch.frontier.keys import Keys
        from pricewatch.frontier.redis import split_namespace

        self.url = url
        self._redis_url, url_namespace = split_namespace(url)
        self.key = Keys(url_namespace or namespace).drift
        self._timeout = timeout
        self._client: Any = None

    def _open(self) -> Any:
        if self._client is None:
            self._client = redis_client(
                self._redis_url, self.url, self._timeout, DriftStateUnavailable
            )
        return self._client

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _all(self) -> dict[str, str]:
        from redis.exceptions import RedisError

        try:
            result: dict[str, str] = await self._open().hgetall(self.key)
        except (RedisError, OSError) as exc:
            raise DriftStateUnavailable(
                f"cannot use the drift alarms in {mask_password(self.url)}: {exc}"
            ) from exc
        return result

    async def raise_alarm(self, alarm: DriftAlarm) -> None:
        from redis.exceptions import RedisError

        expired = []
        for field, value in (await self._all()).items():
            decoded = _decode(field, value)
            if decoded is None or decoded.until < alarm.raised_at:
                expired.append(field)
        value = json.dumps(
            {"detail": alarm.detail, "raised_at": alarm.raised_at, "until": alarm.until}
        )
        try:
            client = self._open()
            if expired:
                await client.hdel(self.key, *expired)
            await client.hset(self.key, f"{alarm.domain} {alarm.kind}", value)
        except (RedisError, OSError) as exc:
            raise DriftStateUnavailable(
                f"cannot use the drift alarms in {mask_password(self.url)}: {exc}"
            ) from exc

    async def active(self, now: float | None = None) -> list[DriftAlarm]:
        moment = time.time() if now is None else now
        alarms = [_decode(field, value) for field, value in (await self._all()).items()]
        return sorted(
            (a for a in alarms if a is not None and a.until >= moment),
            key=lambda a: (a.domain, a.kind),
        )


def _decode(field: str, value: str) -> DriftAlarm | None:
    domain, _, kind = field.rpartition(" ")
    try:
        data = json.loads(value)
        return DriftAlarm(domain, kind, str(data["detail"]), data["raised_at"], data["until"])
    except (ValueError, KeyError, TypeError):
        return None


def drift_states_from_settings(settings: BaseSettings) -> DriftStates:
    """The drift alarms beside the frontier named by ``PRICEWATCH_FRONTIER_URL``."""
    url = settings["PRICEWATCH_FRONTIER_URL"]
    if frontier_backend(url) == "sqlite":
        return SQLiteDriftStates(url)
    return RedisDriftStates(url, **redis_options(settings))
