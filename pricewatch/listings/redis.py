"""Listings in the Redis frontier: keys ``listings``, ``listing_state``, ``listing_due``,
``listing_leases`` and ``members:<id>`` (:mod:`pricewatch.frontier.keys`).

Claim and save are Lua scripts (atomic across workers, Redis ``TIME`` as the clock, the
circuit breaker's ``paused`` hash honoured); the store runs on the connection of the
frontier's own :class:`~pricewatch.frontier.redis.RedisFrontier`, with its timeouts,
retries and password masking.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pricewatch.frontier.redis import RedisFrontier
from pricewatch.listings.model import Listing, ListingInfo, ListingLease, Traversal
from pricewatch.listings.store import ListingStore

if TYPE_CHECKING:
    from redis.commands.core import AsyncScript
    from scrapy.settings import BaseSettings

CHUNK = 1000

_TIME = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
"""
# KEYS: listings, listing_state, listing_due, listing_leases, paused.
_ADD = (
    _TIME
    + """
-- ARGV: JSON array of [url, definition JSON]. Returns how many were new.
local new = 0
for _, item in ipairs(cjson.decode(ARGV[1])) do
  if redis.call('HSET', KEYS[1], item[1], item[2]) == 1 then
    redis.call('ZADD', KEYS[3], now, item[1])
    new = new + 1
  end
end
return new
"""
)
_CLAIM = (
    _TIME
    + """
-- ARGV: n, ttl, token prefix. Returns {deadline, url, definition, state, token, ...}.
local n, ttl, prefix = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local out = {string.format('%.6f', now + ttl)}
local count = 0
for _, url in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do
  if count >= n then break end
  local free = true
  local lease = redis.call('HGET', KEYS[4], url)
  if lease then
    local _, deadline = string.match(lease, '^([^\\t]*)\\t(.*)$')
    if tonumber(deadline) > now then free = false end
  end
  local def = redis.call('HGET', KEYS[1], url)
  if free and def then
    local paused = tonumber(redis.call('HGET', KEYS[5], cjson.decode(def).domain) or '0') or 0
    if paused <= now then
      count = count + 1
      local token = prefix .. count
      redis.call('HSET', KEYS[4], url, token .. '\\t' .. string.format('%.6f', now + ttl))
      out[#out + 1] = url
      out[#out + 1] = def
      out[#out + 1] = redis.call('HGET', KEYS[2], url) or ''
      out[#out + 1] = token
    end
  end
end
return out
"""
)
_SAVE = (
    _TIME
    + """
-- ARGV: url, token, state JSON, ttl, due_in ('' = keep the lease). Returns 1, or 0 when
-- the lease is not current.
local url, token = ARGV[1], ARGV[2]
local lease = redis.call('HGET', KEYS[4], url)
if not lease or string.match(lease, '^([^\\t]*)\\t') ~= token then return 0 end
if redis.call('HEXISTS', KEYS[1], url) == 0 then return 0 end
redis.call('HSET', KEYS[2], url, ARGV[3])
if ARGV[5] == '' then
  redis.call('HSET', KEYS[4], url, token .. '\\t' .. string.format('%.6f', now + tonumber(ARGV[4])))
else
  redis.call('HDEL', KEYS[4], url)
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[5]), url)
end
return 1
"""
)
# KEYS: members hash. ARGV: number, then URLs. Returns the URLs new to the hash.
_MARK = """
local new = {}
local number = tonumber(ARGV[1])
for i = 2, #ARGV do
  local old = redis.call('HGET', KEYS[1], ARGV[i])
  if not old then
    new[#new + 1] = ARGV[i]
    redis.call('HSET', KEYS[1], ARGV[i], number)
  elseif tonumber(old) < number then
    redis.call('HSET', KEYS[1], ARGV[i], number)
  end
end
return new
"""


def _definition(listing: Listing) -> str:
    return json.dumps(
        {
            "url": listing.url,
            "kind": listing.kind,
            "domain": listing.domain,
            "every": listing.every,
            "options": listing.options,
        },
        separators=(",", ":"),
        sort_keys=True,
    )


def _listing(text: str) -> Listing:
    data = json.loads(text)
    return Listing(
        data["url"],
        data["kind"],
        data["domain"],
        float(data["every"]),
        {str(k): str(v) for k, v in (data.get("options") or {}).items()},
    )


class RedisListingStore(ListingStore):
    def __init__(self, url: str, *, settings: BaseSettings | None = None) -> None:
        self.url = url
        self.frontier = RedisFrontier(url, settings=settings)
        self.keys = self.frontier.keys
        self._scripts: dict[str, AsyncScript] = {}

    async def open(self) -> None:
        await self.frontier.open()
        client = self.frontier.client
        self._scripts = {
            name: client.register_script(source)
            for name, source in (("add", _ADD), ("claim", _CLAIM), ("save", _SAVE), ("mark", _MARK))
        }

    async def close(self) -> None:
        await self.frontier.close()

    def _keys(self) -> list[str]:
        k = self.keys
        return [k.listings, k.listing_state, k.listing_due, k.listing_leases, k.paused]

    async def _run(self, name: str, *args: Any, keys: list[str] | None = None) -> Any:
        async with self.frontier._guard():
            return await self._scripts[name](keys=keys or self._keys(), args=list(args))

    # -- listings ---------------------------------------------------------------------------

    async def add(self, listings: Iterable[Listing]) -> int:
        rows = [[item.url, _definition(item)] for item in listings]
        new = 0
        for start in range(0, len(rows), CHUNK):
            new += int(await self._run("add", json.dumps(rows[start : start + CHUNK])))
        return new

    async def claim(self, n: int, ttl: float) -> list[ListingLease]:
        if n <= 0:
            return []
        reply = await self._run("claim", n, repr(float(ttl)), secrets.token_hex(6) + "-")
        deadline = float(reply[0])
        out = []
        for i in range(1, len(reply), 4):
            _url, definition, state, token = reply[i : i + 4]
            out.append(
                ListingLease(_listing(definition), Traversal.from_json(state), token, deadline)
            )
        return out

    async def save(
        self, lease: ListingLease, traversal: Traversal, *, ttl: float, due_in: float | None
    ) -> bool:
        due = "" if due_in is None else repr(float(due_in))
        reply = await self._run(
            "save", lease.listing.url, lease.token, traversal.to_json(), repr(float(ttl)), due
        )
        return bool(int(reply))

    async def _infos(self, urls: Sequence[str]) -> list[ListingInfo]:
        k = self.keys
        client = self.frontier.client
        async with self.frontier._guard():
            pipe = client.pipeline(transaction=False)
            for url in urls:
                pipe.hget(k.listings, url)
                pipe.hget(k.listing_state, url)
                pipe.zscore(k.listing_due, url)
                pipe.hget(k.listing_leases, url)
                pipe.hlen(k.members(url))
            replies = await pipe.execute()
            now_s, now_us = await client.time()
        now = now_s + now_us / 1e6
        out = []
        for i in range(len(urls)):
            definition, state, due, lease, members = replies[i * 5 : i * 5 + 5]
            if definition is None:
                continue
            leased = bool(lease) and float(lease.split("\t")[1]) > now
            out.append(
                ListingInfo(
                    _listing(definition),
                    Traversal.from_json(state),
                    float(due or 0),
                    leased,
                    int(members),
                )
            )
        return out

    async def get(self, url: str) -> ListingInfo | None:
        found = await self._infos([url])
        return found[0] if found else None

    async def all(self) -> list[ListingInfo]:
        async with self.frontier._guard():
            urls = sorted(str(u) for u in await self.frontier.client.hkeys(self.keys.listings))
        return await self._infos(urls)

    async def remove(self, url: str) -> bool:
        k = self.keys
        async with self.frontier._guard():
            pipe = self.frontier.client.pipeline(transaction=True)
            pipe.hdel(k.listings, url)
            pipe.hdel(k.listing_state, url)
            pipe.zrem(k.listing_due, url)
            pipe.hdel(k.listing_leases, url)
            pipe.delete(k.members(url))
            removed, *_ = await pipe.execute()
        return bool(removed)

    # -- members ----------------------------------------------------------------------------

    async def mark_members(self, listing: str, urls: Sequence[str], number: int) -> list[str]:
        unique = list(dict.fromkeys(urls))
        new: list[str] = []
        key = self.keys.members(listing)
        for start in range(0, len(unique), CHUNK):
            chunk = unique[start : start + CHUNK]
            new.extend(await self._run("mark", number, *chunk, keys=[key]))
        return new

    async def stale_members(self, listing: str, before: int) -> list[str]:
        out = []
        async with self.frontier._guard():
            async for url, seen in self.frontier.client.hscan_iter(
                self.keys.members(listing), count=CHUNK
            ):
                if int(seen) < before:
                    out.append(url)
        return out

    async def drop_members(self, listing: str, urls: Sequence[str]) -> None:
        items = list(urls)
        async with self.frontier._guard():
            for start in range(0, len(items), CHUNK):
                await self.frontier.client.hdel(
                    self.keys.members(listing), *items[start : start + CHUNK]
                )

    async def listed_elsewhere(self, listing: str, urls: Sequence[str]) -> set[str]:
        items = list(urls)
        if not items:
            return set()
        client = self.frontier.client
        found: set[str] = set()
        async with self.frontier._guard():
            others = [str(u) for u in await client.hkeys(self.keys.listings) if u != listing]
            for other in others:
                key = self.keys.members(other)
                for start in range(0, len(items), CHUNK):
                    chunk = items[start : start + CHUNK]
                    values = await client.hmget(key, chunk)
                    found.update(url for url, v in zip(chunk, values, strict=True) if v)
        return found
