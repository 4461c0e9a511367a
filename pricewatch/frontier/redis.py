"""The shared frontier: one schedule in Redis for many crawler processes.

Settings (defaults: ``pricewatch/settings.py``): ``PRICEWATCH_FRONTIER_URL``
(``redis://host:6379/0``; a ``?namespace=NAME`` query parameter overrides the next
setting), ``PRICEWATCH_FRONTIER_REDIS_NAMESPACE``, ``PRICEWATCH_FRONTIER_REDIS_TIMEOUT``,
and the schedule settings of :class:`SchedulePolicy` (``PRICEWATCH_FRONTIER_*``,
``PRICEWATCH_DOMAIN_MAX_INFLIGHT``).

Layout (:mod:`pricewatch.frontier.keys`): a sorted set per domain scored by due time,
a ``ready`` sorted set of domains scored by their earliest due time (so a claim visits
the most overdue domains first and round-robins between them), an ``inflight`` sorted
set scored by lease deadline, and one hash of compact msgpack records. Claim, complete,
reap and the rest are Lua scripts (``lua/*.lua``, registered once, run by EVALSHA), so
each is atomic across every worker; the clock is Redis ``TIME``. Nothing is popped
without a lease: a worker that dies holding leases loses nothing, its leases expire and
go back to the schedule. An entry id lives in exactly one set at a time, so there is no
ever-growing dupefilter.

Unreachable at ``open()``: :class:`FrontierUnavailable` naming the masked URL. Lost
mid-crawl (a restart, a timeout): :class:`FrontierConnectionLost`, retryable.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
from collections.abc import AsyncIterator, Iterable, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, WatchError
from redis.exceptions import TimeoutError as RedisTimeoutError

from pricewatch import settings as defaults
from pricewatch._urls import mask_password, url_problem
from pricewatch.frontier._entries import counters, domain_of, lookup_url, valid_entries
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
)
from pricewatch.frontier.keys import Keys, entry_id
from pricewatch.frontier.scoring import SUCCESSES, history_of, transition

if TYPE_CHECKING:
    from redis.commands.core import AsyncScript
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

SCRIPTS = (
    "add",
    "claim",
    "release",
    "complete",
    "reap",
    "pause",
    "requeue",
    "purge",
    "entry",
    "rates",
    "retire",
    "reinstate",
)
ADD_CHUNK = 1000  # entries per add script call (one call blocks Redis ~ms)
ADD_PIPELINE = 8  # add script calls per round trip
COMPLETE_CHUNK = 1000
REAP_LIMIT = 500  # expired leases returned per script call
SCAN_LIMIT = 1000  # due domains a claim looks at
RATES_CHUNK = 5000  # entries per rates script call (a reallocation's scan)
# Reconnect attempts inside one call before it fails as FrontierConnectionLost (well under
# a second or two, so the caller's own backoff takes over). Every script is safe to run
# twice: add, complete and pause are idempotent, and a claim whose reply was lost only
# leaves leases that expire and are reaped.
RETRIES = 3


def _script_source(name: str) -> str:
    package = resources.files("pricewatch.frontier") / "lua"
    common = (package / "common.lua").read_text(encoding="utf-8")
    return common + "\n" + (package / f"{name}.lua").read_text(encoding="utf-8")


def split_namespace(url: str) -> tuple[str, str | None]:
    """``redis://h/0?namespace=x`` -> (``redis://h/0``, ``x``); other query args kept."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    namespace = None
    kept = []
    for key, value in query:
        if key == "namespace":
            namespace = value
        else:
            kept.append((key, value))
    return urlunsplit(parts._replace(query=urlencode(kept))), namespace


# Records keep a URL's scheme as one control character (URLs with control characters are
# refused by add, so the two cannot be confused): 6-7 bytes less per SKU, often a smaller
# allocation class.
_SCHEMES = (("https://", "\x01"), ("http://", "\x02"))


def pack_url(url: str) -> str:
    for scheme, mark in _SCHEMES:
        if url.startswith(scheme):
            return mark + url[len(scheme) :]
    return url


def unpack_url(stored: str) -> str:
    for scheme, mark in _SCHEMES:
        if stored.startswith(mark):
            return scheme + stored[1:]
    return stored


def _opt(value: str) -> str | None:
    return value or None


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class RedisFrontier(Frontier):
    def __init__(
        self,
        url: str,
        policy: SchedulePolicy | None = None,
        *,
        settings: BaseSettings | None = None,
        namespace: str | None = None,
        timeout: float | None = None,
    ) -> None:
        self.url = url
        self.policy = policy or SchedulePolicy()
        self._redis_url, url_namespace = split_namespace(url)
        if namespace is None:
            namespace = url_namespace
        if namespace is None:
            namespace = (
                settings["PRICEWATCH_FRONTIER_REDIS_NAMESPACE"]
                if settings is not None
                else defaults.PRICEWATCH_FRONTIER_REDIS_NAMESPACE
            )
        self.keys = Keys(namespace)
        if timeout is None:
            timeout = (
                settings.getfloat("PRICEWATCH_FRONTIER_REDIS_TIMEOUT")
                if settings is not None
                else defaults.PRICEWATCH_FRONTIER_REDIS_TIMEOUT
            )
        if timeout <= 0:
            raise ValueError(f"PRICEWATCH_FRONTIER_REDIS_TIMEOUT must be > 0, got {timeout}")
        self.timeout = timeout
        self._client: aioredis.Redis | None = None
        self._scripts: dict[str, AsyncScript] = {}

    @property
    def masked_url(self) -> str:
        return mask_password(self.url)

    # -- plumbing ---------------------------------------------------------------------------

    async def open(self) -> None:
        if self._client is not None:
            return
        problem = url_problem(self._redis_url)
        if problem:
            raise FrontierUnavailable(f"invalid Redis frontier URL {self.masked_url}: {problem}")
        try:
            client = aioredis.from_url(
                self._redis_url,
                decode_responses=True,
                socket_timeout=self.timeout,
                socket_connect_timeout=self.timeout,
                health_check_interval=30,
                retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), RETRIES),
            )
        except ValueError:  # its message may quote pieces of the password
            raise FrontierUnavailable(f"invalid Redis frontier URL {self.masked_url}") from None
        try:
            await client.ping()
        except (RedisError, OSError) as exc:
            await client.aclose()
            raise FrontierUnavailable(
                f"cannot reach the Redis frontier at {self.masked_url}: {exc}"
            ) from exc
        self._client = client
        self._scripts = {name: client.register_script(_script_source(name)) for name in SCRIPTS}

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    @property
    def client(self) -> aioredis.Redis:
        if self._client is None:
            raise RuntimeError(f"frontier {self.masked_url} is not open (call open() first)")
        return self._client

    @contextlib.asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        try:
            yield
        except (TimeoutError, RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise FrontierConnectionLost(
                f"lost the Redis frontier at {self.masked_url}: {exc}"
            ) from exc

    async def _script(self, name: str, *args: Any, client: Any = None) -> Any:
        script = self._scripts[name] if self._scripts else None
        if script is None:
            raise RuntimeError(f"frontier {self.masked_url} is not open (call open() first)")
        return await script(
            keys=self.keys.script_keys(), args=[self.keys.prefix, *args], client=client
        )

    def _log_malformed(self, ids: Sequence[str], where: str) -> None:
        self.stats["pricewatch/frontier/malformed"] += len(ids)
        for id_ in ids:
            logger.warning(
                "Frontier: malformed entry %s in %s (found by %s); set aside in %s",
                id_,
                self.keys.entries,
                where,
                self.keys.malformed,
            )

    # -- the interface ----------------------------------------------------------------------

    async def add(self, entries: Iterable[Entry], *, keep_known: bool = False) -> int:
        rows = valid_entries(entries)
        new = 0
        async with self._guard():
            for start in range(0, len(rows), ADD_CHUNK * ADD_PIPELINE):
                window = rows[start : start + ADD_CHUNK * ADD_PIPELINE]
                pipe = self.client.pipeline(transaction=False)
                for offset in range(0, len(window), ADD_CHUNK):
                    payload = [
                        [entry_id(e.url), pack_url(e.url), domain, e.sku or "", float(e.importance)]
                        for e, domain in window[offset : offset + ADD_CHUNK]
                    ]
                    await self._script(
                        "add", _json(payload), "1" if keep_known else "0", client=pipe
                    )
                for added, collided, malformed in await pipe.execute():
                    new += int(added)
                    for url in collided:
                        logger.error(
                            "Frontier: skipped %r: its id collides with another URL's", url
                        )
                    self._log_malformed(malformed, "add")
        return new

    async def claim(self, n: int) -> list[Lease]:
        return await self.release_and_claim((), n)

    async def release_and_claim(self, released: Sequence[Lease], n: int) -> list[Lease]:
        if n <= 0:
            await self.release_slots(released)
            return []
        if len(released) > COMPLETE_CHUNK:  # rare: the surplus goes first, on its own
            await self.release_slots(released[COMPLETE_CHUNK:])
            released = released[:COMPLETE_CHUNK]
        await self._reallocate_if_due()
        policy = self.policy
        pairs = (
            _json([[entry_id(lease.url), lease.token] for lease in released]) if released else ""
        )
        async with self._guard():
            deadline, rows, malformed, reaped, dead, freed = await self._script(
                "claim",
                n,
                repr(policy.lease_ttl),
                policy.domain_max_inflight,
                secrets.token_hex(8),
                policy.max_attempts,
                REAP_LIMIT,
                SCAN_LIMIT,
                pairs,
                1 if policy.adaptive_limits else 0,
                policy.limit_start,
                repr(policy.burst),
            )
        self.stats["pricewatch/frontier/released"] += int(freed)
        self._log_malformed(malformed, "claim")
        self.stats["pricewatch/frontier/reaped"] += int(reaped)
        self.stats["pricewatch/frontier/dead"] += int(dead)
        until = float(deadline)
        leases = []
        for row in rows:
            (_id, token, url, domain, sku, imp, attempts, fails, gone, checks, changes, seen, h) = (
                row.split("\t")[:13]
            )
            rate_changes, rate_exposure, observed_at, mu = row.split("\t")[13:]
            leases.append(
                Lease(
                    url=unpack_url(url),
                    domain=domain,
                    token=token,
                    deadline=until,
                    health=float(h),
                    mu=float(mu),
                    **counters(
                        _opt(sku),
                        imp,
                        attempts,
                        fails,
                        gone,
                        checks,
                        changes,
                        seen,
                        rate_changes,
                        rate_exposure,
                        observed_at,
                    ),
                )
            )
        self.stats["pricewatch/frontier/claimed"] += len(leases)
        return leases

    async def release_slots(self, leases: Sequence[Lease]) -> int:
        if not leases:
            return 0
        pairs = [[entry_id(lease.url), lease.token] for lease in leases]
        released = 0
        async with self._guard():
            for start in range(0, len(pairs), COMPLETE_CHUNK):
                chunk = pairs[start : start + COMPLETE_CHUNK]
                released += int(await self._script("release", _json(chunk)))
        self.stats["pricewatch/frontier/released"] += released
        return released

    async def complete(self, completions: Sequence[Completion]) -> int:
        policy = self.policy
        items: list[list[Any]] = []
        for completion in completions:
            lease = completion.lease
            # The schedule is computed against the Redis clock as of the claim; the script
            # adds the delay to its own TIME.
            claimed_at = lease.deadline - policy.lease_ttl
            step = transition(policy, history_of(lease), completion, claimed_at, lease.health)
            new = step.history
            items.append(
                [
                    entry_id(lease.url),
                    lease.token,
                    -1 if step.due_at is None else max(step.due_at - claimed_at, 0.0),
                    new.failures,
                    new.gone,
                    new.checks,
                    new.changes,
                    1 if completion.outcome in SUCCESSES else 0,
                    -1 if step.health_sample is None else step.health_sample,
                    new.rate_changes,
                    new.rate_exposure,
                    new.observed_at,
                ]
            )
        applied = 0
        async with self._guard():
            for start in range(0, len(items), COMPLETE_CHUNK):
                chunk = items[start : start + COMPLETE_CHUNK]
                done, malformed, retired = await self._script(
                    "complete", repr(policy.health_alpha), _json(chunk)
                )
                applied += int(done)
                self._log_malformed(malformed, "complete")
                self.stats["pricewatch/frontier/retired"] += int(retired)
                self.stats["pricewatch/frontier/stale"] += len(chunk) - int(done) - len(malformed)
        self.stats["pricewatch/frontier/completed"] += applied
        return applied

    async def reap(self) -> int:
        total = 0
        async with self._guard():
            while True:
                reaped, malformed, dead = await self._script(
                    "reap", REAP_LIMIT, self.policy.max_attempts
                )
                self._log_malformed(malformed, "reap")
                total += int(reaped)
                self.stats["pricewatch/frontier/reaped"] += int(reaped)
                self.stats["pricewatch/frontier/dead"] += int(dead)
                if int(reaped) < REAP_LIMIT:
                    return total

    async def pause_domain(self, domain: str, seconds: float) -> None:
        async with self._guard():
            await self._script("pause", domain, repr(float(seconds)))

    async def adjust_limits(self, domains: Sequence[str], update: LimitUpdate) -> dict[str, str]:
        wanted = sorted(set(domains))
        if not wanted:
            return {}
        keys = self.keys
        async with self._guard():
            # Optimistic: read, compute, write unless another worker wrote in between.
            while True:
                async with self.client.pipeline(transaction=True) as pipe:
                    try:
                        await pipe.watch(keys.limits)
                        stored = await pipe.hmget(keys.limits, wanted)  # type: ignore[misc]
                        seconds, micros = await pipe.time()  # type: ignore[misc]
                        now = seconds + micros / 1_000_000
                        out: dict[str, str] = {}
                        caps: dict[str, int] = {}
                        for domain, old in zip(wanted, stored, strict=True):
                            caps[domain], out[domain] = update(
                                domain, None if old is None else str(old), now
                            )
                        pipe.multi()
                        pipe.hset(keys.limits, mapping=dict(out))  # type: ignore[arg-type]
                        pipe.hset(keys.limit_caps, mapping=dict(caps))  # type: ignore[arg-type]
                        await pipe.execute()
                        return out
                    except WatchError:
                        continue

    async def limits(self) -> dict[str, str]:
        async with self._guard():
            stored = await self.client.hgetall(self.keys.limits)  # type: ignore[misc]
        return {str(domain): str(state) for domain, state in stored.items()}

    async def _now(self) -> float:
        seconds, micros = await self.client.time()
        return seconds + micros / 1_000_000

    async def counts(self) -> list[DomainCounts]:
        keys = self.keys
        async with self._guard():
            domains: list[str] = sorted(await self.client.smembers(keys.domains))  # type: ignore[arg-type]
            now = await self._now()
            pipe = self.client.pipeline(transaction=False)
            for domain in domains:
                pipe.zcount(keys.sched(domain), "-inf", now)
                pipe.zcard(keys.sched(domain))
                pipe.hget(keys.domain_inflight, domain)
                pipe.zcard(keys.retired(domain))
                pipe.zcard(keys.dead(domain))
            values = await pipe.execute()
        out = []
        for i, domain in enumerate(domains):
            due, scheduled, inflight, retired, dead = values[i * 5 : i * 5 + 5]
            out.append(
                DomainCounts(
                    domain=domain,
                    due=int(due),
                    scheduled=int(scheduled) - int(due),
                    inflight=int(inflight or 0),
                    retired=int(retired),
                    dead=int(dead),
                )
            )
        return out

    async def malformed_count(self) -> int:
        async with self._guard():
            return int(await self.client.hlen(self.keys.malformed))

    async def next_due_in(self) -> float | None:
        async with self._guard():
            pipe = self.client.pipeline(transaction=False)
            pipe.zrange(self.keys.ready, 0, 0, withscores=True)
            pipe.zrange(self.keys.inflight, 0, 0, withscores=True)
            ready, inflight = await pipe.execute()
            now = await self._now()
        candidates = [score for _, score in ready + inflight]
        if not candidates:
            return None
        return max(min(candidates) - now, 0.0)

    async def entry(self, url: str) -> EntryInfo | None:
        url = lookup_url(url)
        domain = domain_of(url)
        if domain is None:
            return None
        async with self._guard():
            row = await self._script("entry", entry_id(url), domain)
        if not row:
            return None
        if row[0] == "malformed":
            return EntryInfo(url=url, domain=domain, state="malformed", due_at=0.0)
        state, due, stored, sku, *numbers = row
        url = unpack_url(stored)
        return EntryInfo(
            url=url,
            domain=domain,
            state=state,
            due_at=float(due),
            **counters(_opt(sku), *numbers),
        )

    async def requeue_domain(self, domain: str) -> int:
        async with self._guard():
            moved, malformed = await self._script("requeue", domain)
        self._log_malformed(malformed, "requeue")
        return int(moved)

    async def purge_domain(self, domain: str) -> int:
        async with self._guard():
            return int(await self._script("purge", domain))

    # -- the request budget -----------------------------------------------------------------

    async def rate_rows(self, domain: str, *, urls: bool = False) -> list[RateRow]:
        out: list[RateRow] = []
        offset = 0
        async with self._guard():
            while True:
                rows, malformed = await self._script(
                    "rates", domain, offset, RATES_CHUNK, 1 if urls else 0
                )
                self._log_malformed(malformed, "rates")
                for row in rows:
                    fields = row.split("\t")
                    out.append(
                        RateRow(
                            float(fields[0]),
                            float(fields[1]),
                            float(fields[2]),
                            unpack_url(fields[3]) if urls else "",
                        )
                    )
                if len(rows) + len(malformed) < RATES_CHUNK:
                    return out
                offset += RATES_CHUNK

    async def allocations(self) -> dict[str, Allocation]:
        async with self._guard():
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(self.keys.budget)
            pipe.hgetall(self.keys.budget_tokens)
            stored, buckets = await pipe.execute()
        out = {}
        for domain, value in stored.items():
            try:  # "mu at pace gain mark"
                mu, at, _, gain, mark = (float(part) for part in value.split())
                bucket = buckets.get(domain, "0 0 0").split()  # "tokens at claimed"
                claimed = float(bucket[2]) if len(bucket) > 2 else 0.0
            except ValueError:
                continue  # rewritten by the next reallocation
            out[domain] = Allocation(mu, at, gain, claimed, mark)
        return out

    async def set_allocation(
        self, domain: str, mu: float, per_hour: float = 0.0, gain: float = 1.0, mark: float = 0.0
    ) -> None:
        async with self._guard():
            now = await self._now()
            value = f"{mu!r} {now!r} {per_hour / 3600.0!r} {gain!r} {mark!r}"
            await self.client.hset(self.keys.budget, domain, value)  # type: ignore[misc]

    async def domains(self) -> list[str]:
        async with self._guard():
            return sorted(await self.client.smembers(self.keys.domains))  # type: ignore[arg-type]

    async def clock(self) -> float:
        async with self._guard():
            return await self._now()

    def _ids(self, urls: Sequence[str]) -> list[list[str]]:
        rows = []
        for url in urls:
            url = lookup_url(url)
            domain = domain_of(url)
            if domain is not None:
                rows.append([entry_id(url), domain])
        return rows

    async def retire(self, urls: Sequence[str], reason: str) -> int:
        rows = self._ids(urls)
        retired = 0
        async with self._guard():
            for start in range(0, len(rows), COMPLETE_CHUNK):
                chunk = rows[start : start + COMPLETE_CHUNK]
                retired += int(await self._script("retire", reason, _json(chunk)))
        self.stats["pricewatch/frontier/retired"] += retired
        return retired

    async def reinstate(self, urls: Sequence[str], reason: str) -> int:
        rows = self._ids(urls)
        moved = 0
        async with self._guard():
            for start in range(0, len(rows), COMPLETE_CHUNK):
                chunk = rows[start : start + COMPLETE_CHUNK]
                count, malformed = await self._script("reinstate", reason, _json(chunk))
                moved += int(count)
                self._log_malformed(malformed, "reinstate")
        return moved
