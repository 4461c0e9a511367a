"""Sessions, their cookie jars and proxy health, kept in the frontier's backend.

Every worker sharing a frontier shares these, and a worker that restarts (a SIGKILL, a
recycled scrapyd job) reads them back: the shop sees the same cookies over the same proxy.
Records are JSON (cookies as a list of plain fields), never pickles.

- SQLite (``sqlite:///…``, the embedded default): tables ``sessions`` and ``proxy_health``
  in the frontier's file, one short connection per call on a thread.
- Redis (``redis://…``): per session a hash ``session:<id>`` with a TTL, per domain a hash
  ``sessions:<domain>`` (slot -> session id) and ``proxy_health:<domain>`` (``<proxy
  id>:<field>`` -> number), and the set ``session_domains`` (every domain with sessions or
  health, for ``scrapy proxies``); keys in :mod:`pricewatch.frontier.keys`. A slot is taken
  with ``HSETNX`` and given back by a Lua compare-and-delete, so two workers never make two
  sessions for one slot, and a retired session is never brought back.

Times shared between processes are epoch seconds of one clock: the backend's (Redis
``TIME``; SQLite's ``time.time()`` on its one machine).

Settings: ``PRICEWATCH_FRONTIER_URL``, ``PRICEWATCH_FRONTIER_REDIS_NAMESPACE``,
``PRICEWATCH_FRONTIER_REDIS_TIMEOUT``. Failures raise :class:`SessionStoreUnavailable`
with the masked URL.
"""

from __future__ import annotations

import abc
import asyncio
import json
import sqlite3
import time
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from pricewatch import settings as defaults
from pricewatch._redis import redis_client, redis_options
from pricewatch._urls import frontier_backend, mask_password, sqlite_path

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

BUSY_TIMEOUT = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id          TEXT PRIMARY KEY,
    domain      TEXT NOT NULL,
    slot        INTEGER NOT NULL,
    proxy       TEXT NOT NULL,
    user_agent  TEXT NOT NULL,
    created_at  REAL NOT NULL,
    requests    INTEGER NOT NULL DEFAULT 0,
    established INTEGER NOT NULL DEFAULT 0,
    cookies     TEXT NOT NULL DEFAULT '[]',
    expires_at  REAL NOT NULL,
    UNIQUE (domain, slot)
);
CREATE TABLE IF NOT EXISTS proxy_health (
    domain        TEXT NOT NULL,
    proxy         TEXT NOT NULL,
    ok            INTEGER NOT NULL DEFAULT 0,
    failures      INTEGER NOT NULL DEFAULT 0,
    blocks        INTEGER NOT NULL DEFAULT 0,
    latency_sum   REAL NOT NULL DEFAULT 0,
    benched_until REAL NOT NULL DEFAULT 0,
    cooldown      REAL NOT NULL DEFAULT 0,
    benchings     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (domain, proxy)
);
"""

# Redis: give a slot back only if it still holds this session, and drop the session.
_RETIRE_LUA = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
    redis.call('HDEL', KEYS[1], ARGV[1])
    redis.call('DEL', KEYS[2])
    return 1
end
return 0
"""
# Redis: bench a proxy for a domain until Redis TIME + ARGV[2] seconds.
_BENCH_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local until_ = now + tonumber(ARGV[2])
local field = ARGV[1] .. ':benched_until'
local old = tonumber(redis.call('HGET', KEYS[1], field) or '0')
if until_ > old then redis.call('HSET', KEYS[1], field, tostring(until_)) end
redis.call('HSET', KEYS[1], ARGV[1] .. ':cooldown', ARGV[3])
redis.call('HINCRBY', KEYS[1], ARGV[1] .. ':benchings', 1)
return tostring(until_)
"""
_HEALTH_FIELDS = ("ok", "failures", "blocks", "latency_sum", "benched_until", "cooldown",
                  "benchings")  # fmt: skip


class SessionStoreUnavailable(RuntimeError):
    """The backend holding sessions cannot be reached; the message names the masked URL."""


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One session: a slot of a domain, on one proxy, with one cookie jar and user agent."""

    id: str
    domain: str
    slot: int
    proxy: str  # the proxy's id, never its URL
    user_agent: str
    created_at: float  # epoch seconds
    requests: int = 0
    established: bool = False  # the domain's login hook ran for it
    cookies: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, str]:
        values = asdict(self)
        values["cookies"] = json.dumps(list(self.cookies), separators=(",", ":"))
        values["established"] = "1" if self.established else "0"
        return {key: str(value) for key, value in values.items()}

    @classmethod
    def from_json(cls, values: dict[str, Any]) -> SessionRecord:
        return cls(
            id=str(values["id"]),
            domain=str(values["domain"]),
            slot=int(values["slot"]),
            proxy=str(values["proxy"]),
            user_agent=str(values["user_agent"]),
            created_at=float(values["created_at"]),
            requests=int(values["requests"]),
            established=str(values["established"]) in ("1", "True", "true"),
            cookies=tuple(json.loads(values["cookies"])),
        )


@dataclass(frozen=True, slots=True)
class ProxyHealth:
    """What every worker saw of one proxy on one domain."""

    domain: str
    proxy: str
    ok: int = 0
    failures: int = 0
    blocks: int = 0
    latency_sum: float = 0.0  # seconds, over the ok responses
    benched_until: float = 0.0  # epoch seconds of the backend's clock
    cooldown: float = 0.0  # seconds of the last bench (0: not benched since its last success)
    benchings: int = 0
    now: float = field(default=0.0, compare=False)  # the backend's clock when read

    @property
    def success_rate(self) -> float | None:
        total = self.ok + self.failures + self.blocks
        return None if total == 0 else self.ok / total

    @property
    def latency(self) -> float | None:
        return None if self.ok == 0 else self.latency_sum / self.ok

    @property
    def benched_for(self) -> float:
        """Seconds until the proxy may be probed again (0: usable)."""
        return max(self.benched_until - self.now, 0.0)


@dataclass(slots=True)
class HealthDelta:
    """Counts one worker adds to a proxy's health (flushed in batches)."""

    ok: int = 0
    failures: int = 0
    blocks: int = 0
    latency_sum: float = 0.0

    def __bool__(self) -> bool:
        return bool(self.ok or self.failures or self.blocks)


class SessionStore(abc.ABC):
    url: str

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Connect and create what is missing."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    @abc.abstractmethod
    async def sessions(self, domain: str | None = None) -> list[SessionRecord]:
        """The live sessions of ``domain`` (every domain: None), by domain and slot."""

    @abc.abstractmethod
    async def create(self, record: SessionRecord) -> SessionRecord:
        """Store ``record`` in its slot unless the slot holds a session already; returns
        the session the slot holds afterwards (``record``, or the other worker's)."""

    @abc.abstractmethod
    async def save(self, record: SessionRecord) -> bool:
        """Write a session's cookies, requests and ``established``, if it is still in its
        slot; renews its TTL. False if it was retired meanwhile."""

    @abc.abstractmethod
    async def retire(self, record: SessionRecord) -> bool:
        """Drop the session and free its slot, if the slot still holds it."""

    @abc.abstractmethod
    async def health(self, domain: str | None = None) -> list[ProxyHealth]:
        """Proxy health of ``domain`` (every domain: None)."""

    @abc.abstractmethod
    async def add_health(self, deltas: dict[tuple[str, str], HealthDelta]) -> None:
        """Add counts, per (domain, proxy id)."""

    @abc.abstractmethod
    async def bench(self, domain: str, proxy: str, seconds: float, cooldown: float) -> float:
        """Bench ``proxy`` for ``domain`` for ``seconds`` from the backend's now (never
        shortening a longer bench); ``cooldown`` is the length the next bench grows from.
        Returns the epoch time it is benched until."""

    @abc.abstractmethod
    async def unbench(self, domain: str, proxy: str) -> None:
        """A probe succeeded: the proxy is usable and its cooldown starts over."""

    async def __aenter__(self) -> SessionStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class SQLiteSessionStore(SessionStore):
    """Tables in the SQLite frontier file (one machine: ``time.time()`` is its clock)."""

    def __init__(self, url: str, ttl: float = defaults.PRICEWATCH_SESSION_TTL) -> None:
        self.url = url
        self.path = sqlite_path(url)
        self.ttl = ttl

    def _call(self, work: Any) -> Any:
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None)
        try:
            conn.executescript(_SCHEMA)
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = work(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result
        finally:
            conn.close()

    async def _run(self, work: Any) -> Any:
        try:
            return await asyncio.to_thread(self._call, work)
        except (sqlite3.Error, OSError) as exc:
            raise SessionStoreUnavailable(f"cannot use the sessions in {self.url}: {exc}") from exc

    async def open(self) -> None:
        if not self.path.parent.exists():
            raise SessionStoreUnavailable(
                f"cannot use the sessions in {self.url}: directory {self.path.parent} does not "
                "exist"
            )

    _COLUMNS = "id, domain, slot, proxy, user_agent, created_at, requests, established, cookies"

    def _rows(self, rows: list[tuple[Any, ...]]) -> list[SessionRecord]:
        names = [f.name for f in fields(SessionRecord)]
        return [SessionRecord.from_json(dict(zip(names, row, strict=True))) for row in rows]

    async def sessions(self, domain: str | None = None) -> list[SessionRecord]:
        def work(conn: sqlite3.Connection) -> list[SessionRecord]:
            now = time.time()
            conn.execute("DELETE FROM sessions WHERE expires_at < ?", (now,))
            where, params = ("WHERE domain = ?", (domain,)) if domain else ("", ())
            sql = f"SELECT {self._COLUMNS} FROM sessions {where} ORDER BY domain, slot"
            return self._rows(conn.execute(sql, params).fetchall())

        result: list[SessionRecord] = await self._run(work)
        return result

    async def create(self, record: SessionRecord) -> SessionRecord:
        def work(conn: sqlite3.Connection) -> SessionRecord:
            now = time.time()
            conn.execute(
                "DELETE FROM sessions WHERE domain = ? AND slot = ? AND expires_at < ?",
                (record.domain, record.slot, now),
            )
            values = record.to_json()
            conn.execute(
                f"INSERT OR IGNORE INTO sessions ({self._COLUMNS}, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*(values[name] for name in self._COLUMNS.split(", ")), now + self.ttl),
            )
            rows = conn.execute(
                f"SELECT {self._COLUMNS} FROM sessions WHERE domain = ? AND slot = ?",
                (record.domain, record.slot),
            ).fetchall()
            return self._rows(rows)[0]

        result: SessionRecord = await self._run(work)
        return result

    async def save(self, record: SessionRecord) -> bool:
        values = record.to_json()

        def work(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE sessions SET requests = ?, established = ?, cookies = ?, expires_at = ? "
                "WHERE id = ?",
                (
                    record.requests,
                    int(record.established),
                    values["cookies"],
                    time.time() + self.ttl,
                    record.id,
                ),
            )
            return cursor.rowcount > 0

        result: bool = await self._run(work)
        return result

    async def retire(self, record: SessionRecord) -> bool:
        def work(conn: sqlite3.Connection) -> bool:
            return conn.execute("DELETE FROM sessions WHERE id = ?", (record.id,)).rowcount > 0

        result: bool = await self._run(work)
        return result

    async def health(self, domain: str | None = None) -> list[ProxyHealth]:
        def work(conn: sqlite3.Connection) -> list[ProxyHealth]:
            where, params = ("WHERE domain = ?", (domain,)) if domain else ("", ())
            rows = conn.execute(
                "SELECT domain, proxy, " + ", ".join(_HEALTH_FIELDS) + " FROM proxy_health "
                f"{where} ORDER BY domain, proxy",
                params,
            ).fetchall()
            now = time.time()
            names = ("domain", "proxy", *_HEALTH_FIELDS)
            return [ProxyHealth(**dict(zip(names, row, strict=True)), now=now) for row in rows]

        result: list[ProxyHealth] = await self._run(work)
        return result

    async def add_health(self, deltas: dict[tuple[str, str], HealthDelta]) -> None:
        def work(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT INTO proxy_health (domain, proxy, ok, failures, blocks, latency_sum) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (domain, proxy) DO UPDATE SET "
                "ok = ok + excluded.ok, failures = failures + excluded.failures, "
                "blocks = blocks + excluded.blocks, "
                "latency_sum = latency_sum + excluded.latency_sum",
                [
                    (domain, proxy, d.ok, d.failures, d.blocks, d.latency_sum)
                    for (domain, proxy), d in deltas.items()
                ],
            )

        await self._run(work)

    async def bench(self, domain: str, proxy: str, seconds: float, cooldown: float) -> float:
        def work(conn: sqlite3.Connection) -> float:
            until = time.time() + seconds
            conn.execute(
                "INSERT INTO proxy_health (domain, proxy, benched_until, cooldown, benchings) "
                "VALUES (?, ?, ?, ?, 1) ON CONFLICT (domain, proxy) DO UPDATE SET "
                "benched_until = max(benched_until, excluded.benched_until), "
                "cooldown = excluded.cooldown, benchings = benchings + 1",
                (domain, proxy, until, cooldown),
            )
            return until

        result: float = await self._run(work)
        return result

    async def unbench(self, domain: str, proxy: str) -> None:
        def work(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE proxy_health SET benched_until = 0, cooldown = 0 "
                "WHERE domain = ? AND proxy = ?",
                (domain, proxy),
            )

        await self._run(work)


class RedisSessionStore(SessionStore):
    """Hashes beside the Redis frontier's keys (:mod:`pricewatch.frontier.keys`)."""

    def __init__(
        self,
        url: str,
        namespace: str = defaults.PRICEWATCH_FRONTIER_REDIS_NAMESPACE,
        timeout: float = defaults.PRICEWATCH_FRONTIER_REDIS_TIMEOUT,
        ttl: float = defaults.PRICEWATCH_SESSION_TTL,
    ) -> None:
        from pricewatch.frontier.keys import Keys
        from pricewatch.frontier.redis import split_namespace

        self.url = url
        self._redis_url, url_namespace = split_namespace(url)
        self.keys = Keys(url_namespace or namespace)
        self._timeout = timeout
        self.ttl = max(1, int(ttl))
        self._client: Any = None

    async def open(self) -> None:
        if self._client is None:
            self._client = redis_client(
                self._redis_url, self.url, self._timeout, SessionStoreUnavailable
            )

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _do(self, work: Any) -> Any:
        from redis.exceptions import RedisError

        await self.open()
        try:
            return await work(self._client)
        except (RedisError, OSError) as exc:
            raise SessionStoreUnavailable(
                f"cannot use the sessions in {mask_password(self.url)}: {exc}"
            ) from exc

    async def _domains(self, domain: str | None) -> list[str]:
        if domain is not None:
            return [domain]
        members = await self._do(lambda c: c.smembers(self.keys.session_domains))
        return sorted(members)

    async def sessions(self, domain: str | None = None) -> list[SessionRecord]:
        records: list[SessionRecord] = []
        for name in await self._domains(domain):
            slots: dict[str, str] = await self._do(lambda c, n=name: c.hgetall(self.keys.slots(n)))
            if not slots:
                continue

            ids = list(slots.values())

            async def read(client: Any, ids: list[str] = ids) -> list[Any]:
                pipe = client.pipeline(transaction=False)
                for session_id in ids:
                    pipe.hgetall(self.keys.session(session_id))
                return list(await pipe.execute())

            for slot, values in zip(slots, await self._do(read), strict=True):
                if values:
                    records.append(SessionRecord.from_json(values))
                else:  # its hash expired: free the slot for a new session
                    await self._do(
                        lambda c, n=name, s=slot, i=slots[slot]: c.eval(
                            _RETIRE_LUA, 2, self.keys.slots(n), self.keys.session(i), s, i
                        )
                    )
        return sorted(records, key=lambda r: (r.domain, r.slot))

    async def create(self, record: SessionRecord) -> SessionRecord:
        key = self.keys.session(record.id)
        slots = self.keys.slots(record.domain)

        async def work(client: Any) -> SessionRecord:
            pipe = client.pipeline(transaction=True)
            pipe.hset(key, mapping=record.to_json())
            pipe.expire(key, self.ttl)
            pipe.sadd(self.keys.session_domains, record.domain)
            await pipe.execute()
            if await client.hsetnx(slots, str(record.slot), record.id):
                return record
            await client.delete(key)
            holder = await client.hget(slots, str(record.slot))
            values = await client.hgetall(self.keys.session(holder)) if holder else {}
            if values:
                return SessionRecord.from_json(values)
            # The holder's hash expired: take the slot over.
            if holder:
                await client.eval(
                    _RETIRE_LUA, 2, slots, self.keys.session(holder), str(record.slot), holder
                )
            return await work(client)

        result: SessionRecord = await self._do(work)
        return result

    async def save(self, record: SessionRecord) -> bool:
        key = self.keys.session(record.id)
        values = record.to_json()

        async def work(client: Any) -> bool:
            if await client.hget(self.keys.slots(record.domain), str(record.slot)) != record.id:
                return False
            pipe = client.pipeline(transaction=True)
            pipe.hset(
                key,
                mapping={k: values[k] for k in ("requests", "established", "cookies")},
            )
            pipe.expire(key, self.ttl)
            await pipe.execute()
            return True

        result: bool = await self._do(work)
        return result

    async def retire(self, record: SessionRecord) -> bool:
        return bool(
            await self._do(
                lambda c: c.eval(
                    _RETIRE_LUA,
                    2,
                    self.keys.slots(record.domain),
                    self.keys.session(record.id),
                    str(record.slot),
                    record.id,
                )
            )
        )

    async def health(self, domain: str | None = None) -> list[ProxyHealth]:
        names = await self._domains(domain)

        async def read(client: Any) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            pipe.time()
            for name in names:
                pipe.hgetall(self.keys.proxy_health(name))
            return list(await pipe.execute())

        if not names:
            return []
        (seconds, micros), *replies = await self._do(read)
        now = float(seconds) + float(micros) / 1e6
        out: list[ProxyHealth] = []
        for name, values in zip(names, replies, strict=True):
            per_proxy: dict[str, dict[str, float]] = {}
            for key, value in values.items():
                proxy, _, what = key.rpartition(":")
                per_proxy.setdefault(proxy, {})[what] = float(value)
            for proxy, v in sorted(per_proxy.items()):
                out.append(
                    ProxyHealth(
                        domain=name,
                        proxy=proxy,
                        ok=int(v.get("ok", 0)),
                        failures=int(v.get("failures", 0)),
                        blocks=int(v.get("blocks", 0)),
                        latency_sum=v.get("latency_sum", 0.0),
                        benched_until=v.get("benched_until", 0.0),
                        cooldown=v.get("cooldown", 0.0),
                        benchings=int(v.get("benchings", 0)),
                        now=now,
                    )
                )
        return out

    async def add_health(self, deltas: dict[tuple[str, str], HealthDelta]) -> None:
        async def work(client: Any) -> None:
            pipe = client.pipeline(transaction=False)
            for (domain, proxy), d in deltas.items():
                key = self.keys.proxy_health(domain)
                for name in ("ok", "failures", "blocks"):
                    if getattr(d, name):
                        pipe.hincrby(key, f"{proxy}:{name}", getattr(d, name))
                if d.latency_sum:
                    pipe.hincrbyfloat(key, f"{proxy}:latency_sum", d.latency_sum)
                pipe.sadd(self.keys.session_domains, domain)
            await pipe.execute()

        await self._do(work)

    async def bench(self, domain: str, proxy: str, seconds: float, cooldown: float) -> float:
        async def work(client: Any) -> float:
            await client.sadd(self.keys.session_domains, domain)
            until = await client.eval(
                _BENCH_LUA, 1, self.keys.proxy_health(domain), proxy, seconds, cooldown
            )
            return float(until)

        result: float = await self._do(work)
        return result

    async def unbench(self, domain: str, proxy: str) -> None:
        await self._do(
            lambda c: c.hset(
                self.keys.proxy_health(domain),
                mapping={f"{proxy}:benched_until": 0, f"{proxy}:cooldown": 0},
            )
        )


def session_store_from_settings(settings: BaseSettings) -> SessionStore:
    """The session store beside the frontier named by ``PRICEWATCH_FRONTIER_URL``."""
    url = settings["PRICEWATCH_FRONTIER_URL"]
    ttl = settings.getfloat("PRICEWATCH_SESSION_TTL")
    if frontier_backend(url) == "sqlite":
        return SQLiteSessionStore(url, ttl=ttl)
    return RedisSessionStore(url, ttl=ttl, **redis_options(settings))


__all__ = [
    "HealthDelta",
    "ProxyHealth",
    "RedisSessionStore",
    "SQLiteSessionStore",
    "SessionRecord",
    "SessionStore",
    "SessionStoreUnavailable",
    "session_store_from_settings",
]
