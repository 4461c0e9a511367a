"""Learned browser routing, persisted: the set of domains that render prices in the browser.

When a static fetch of a domain yields no price and the browser then finds one, the domain
is remembered here, in the frontier backend named by ``PRICEWATCH_FRONTIER_URL``, so every
worker sharing that frontier routes it through the browser from then on, across restarts:

- SQLite: table ``browser_domains`` (domain, learned_at) in the frontier's file;
- Redis: the set ``pricewatch:{<namespace>}:browser_domains`` (``Keys.browser_domains``).

Settings: ``PRICEWATCH_FRONTIER_URL``, ``PRICEWATCH_FRONTIER_REDIS_NAMESPACE``,
``PRICEWATCH_FRONTIER_REDIS_TIMEOUT``. Calls are rare (a load at start and every
``PRICEWATCH_BROWSER_ROUTES_REFRESH`` seconds, a write per learned domain) and never block
the event loop. Failures raise :class:`RoutingUnavailable` with the masked URL.
"""

from __future__ import annotations

import abc
import asyncio
import sqlite3
import time
from typing import TYPE_CHECKING, Any

from pricewatch import settings as defaults
from pricewatch._redis import redis_client, redis_options
from pricewatch._urls import frontier_backend, mask_password, sqlite_path

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

BUSY_TIMEOUT = 30.0
_SCHEMA = """
CREATE TABLE IF NOT EXISTS browser_domains (
    domain     TEXT PRIMARY KEY,
    learned_at REAL NOT NULL
)
"""


class RoutingUnavailable(RuntimeError):
    """The backend holding the learned routes cannot be reached; names the masked URL."""


class BrowserDomains(abc.ABC):
    """The persisted set of JS-only domains (hostnames, lower case)."""

    url: str

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Connect and create what is missing."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    @abc.abstractmethod
    async def load(self) -> set[str]:
        """Every remembered domain."""

    @abc.abstractmethod
    async def add(self, domain: str) -> bool:
        """Remember ``domain``; True if it was new."""

    @abc.abstractmethod
    async def remove(self, domain: str) -> bool:
        """Forget ``domain`` (it is fetched statically again); True if it was known."""


class SQLiteBrowserDomains(BrowserDomains):
    """A table in the SQLite frontier file; one short connection per call, on a thread."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = sqlite_path(url)

    def _call(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]] | int:
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None)
        try:
            conn.execute(_SCHEMA)
            cursor = conn.execute(sql, params)
            if sql.lstrip().upper().startswith("SELECT"):
                return cursor.fetchall()
            return cursor.rowcount
        finally:
            conn.close()

    async def _run(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        try:
            return await asyncio.to_thread(self._call, sql, params)
        except (sqlite3.Error, OSError) as exc:
            raise RoutingUnavailable(f"cannot use the browser routes in {self.url}: {exc}") from exc

    async def open(self) -> None:
        if self.path.parent != self.path and not self.path.parent.exists():
            raise RoutingUnavailable(
                f"cannot use the browser routes in {self.url}: directory "
                f"{self.path.parent} does not exist"
            )

    async def load(self) -> set[str]:
        rows = await self._run("SELECT domain FROM browser_domains")
        return {row[0] for row in rows}

    async def add(self, domain: str) -> bool:
        added = await self._run(
            "INSERT OR IGNORE INTO browser_domains (domain, learned_at) VALUES (?, ?)",
            (domain.lower(), time.time()),
        )
        return bool(added)

    async def remove(self, domain: str) -> bool:
        removed = await self._run("DELETE FROM browser_domains WHERE domain = ?", (domain.lower(),))
        return bool(removed)


class RedisBrowserDomains(BrowserDomains):
    """A Redis set beside the Redis frontier's keys."""

    def __init__(
        self,
        url: str,
        namespace: str = defaults.PRICEWATCH_FRONTIER_REDIS_NAMESPACE,
        timeout: float = defaults.PRICEWATCH_FRONTIER_REDIS_TIMEOUT,
    ) -> None:
        from pricewatch.frontier.keys import Keys
        from pricewatch.frontier.redis import split_namespace

        self.url = url
        self._redis_url, url_namespace = split_namespace(url)
        self.key = Keys(url_namespace or namespace).browser_domains
        self._timeout = timeout
        self._client: Any = None

    async def open(self) -> None:
        if self._client is None:
            self._client = redis_client(
                self._redis_url, self.url, self._timeout, RoutingUnavailable
            )

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _run(self, command: str, *args: Any) -> Any:
        from redis.exceptions import RedisError

        await self.open()
        try:
            return await getattr(self._client, command)(self.key, *args)
        except (RedisError, OSError) as exc:
            raise RoutingUnavailable(
                f"cannot use the browser routes in {mask_password(self.url)}: {exc}"
            ) from exc

    async def load(self) -> set[str]:
        return set(await self._run("smembers"))

    async def add(self, domain: str) -> bool:
        return bool(await self._run("sadd", domain.lower()))

    async def remove(self, domain: str) -> bool:
        return bool(await self._run("srem", domain.lower()))


def browser_domains_from_settings(settings: BaseSettings) -> BrowserDomains:
    """The learned-routes store beside the frontier named by ``PRICEWATCH_FRONTIER_URL``."""
    url = settings["PRICEWATCH_FRONTIER_URL"]
    if frontier_backend(url) == "sqlite":
        return SQLiteBrowserDomains(url)
    return RedisBrowserDomains(url, **redis_options(settings))
