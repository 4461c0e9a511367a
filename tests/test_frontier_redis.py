"""What only the Redis frontier has: its key layout, malformed records, an unreachable or
restarted server (through a loopback TCP proxy the test stops and starts)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.crc import key_slot
from scrapy.settings import Settings

from pricewatch.frontier import (
    Completion,
    Entry,
    FrontierConnectionLost,
    FrontierUnavailable,
    SchedulePolicy,
    frontier_from_settings,
)
from pricewatch.frontier.keys import Keys, entry_id
from pricewatch.frontier.redis import RedisFrontier, pack_url, unpack_url
from pricewatch.outcomes import Outcome
from tests.fixtures.redis import REDIS_URL
from tests.helpers import project_settings


@pytest.fixture
async def client() -> AsyncIterator[aioredis.Redis]:
    conn = aioredis.from_url(REDIS_URL)
    try:
        yield conn
    finally:
        await conn.aclose()


@pytest.fixture
async def frontier(redis_namespace: str) -> AsyncIterator[RedisFrontier]:
    frontier = RedisFrontier(REDIS_URL, SchedulePolicy(lease_ttl=0.2), namespace=redis_namespace)
    await frontier.open()
    try:
        yield frontier
    finally:
        await frontier.close()


async def locations(client: aioredis.Redis, keys: Keys) -> dict[str, list[str]]:
    """Where every entry id is: the keys of the sets holding it."""
    where: dict[str, list[str]] = {}
    async for raw_key in client.scan_iter(match=keys.pattern):
        key = raw_key.decode()
        kind = await client.type(key)
        members: list[Any] = []
        if key == keys.inflight or any(
            key.startswith(keys.prefix + part) for part in ("sched:", "retired:", "dead:")
        ):
            members = await client.zrange(key, 0, -1)
        elif key == keys.malformed:
            members = await client.hkeys(key)
        assert kind in (b"zset", b"hash", b"set")
        for member in members:
            where.setdefault(member.decode(), []).append(key)
    return where


async def test_every_key_is_namespaced_in_one_cluster_slot_and_every_entry_in_one_place(
    frontier: RedisFrontier, client: aioredis.Redis
) -> None:
    keys = frontier.keys
    await frontier.add([Entry(f"https://{d}.test/p/{i}") for d in "abc" for i in range(5)])
    leases = await frontier.claim(6)
    await frontier.complete([Completion(leases[0], Outcome.OK)])
    await frontier.complete([Completion(leases[1], Outcome.GONE)])
    await frontier.pause_domain("c.test", 60)
    all_keys = [k.decode() async for k in client.scan_iter(match=keys.pattern)]
    assert len(all_keys) >= 8
    assert {key_slot(k.encode()) for k in all_keys} == {key_slot(keys.entries.encode())}
    assert all(k.startswith(f"pricewatch:{{{keys.namespace}}}:") for k in all_keys)
    where = await locations(client, keys)
    assert len(where) == await client.hlen(keys.entries) == 15
    assert all(len(places) == 1 for places in where.values()), where  # no dupefilter copy
    assert sorted(places[0] for places in where.values()).count(keys.inflight) == 4


async def test_a_malformed_record_is_logged_and_set_aside(
    frontier: RedisFrontier, client: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    good = [Entry(f"https://a.test/p/{i}") for i in range(3)]
    await frontier.add(good)
    bad = entry_id("https://a.test/p/1")
    await client.hset(frontier.keys.entries, bad, b"\xc1 not msgpack")
    with caplog.at_level(logging.WARNING, logger="pricewatch.frontier"):
        leases = await frontier.claim(10)
    assert sorted(lease.url for lease in leases) == ["https://a.test/p/0", "https://a.test/p/2"]
    assert f"malformed entry {bad}" in caplog.text
    info = await frontier.entry("https://a.test/p/1")
    assert info is not None and info.state == "malformed"
    assert await frontier.malformed_count() == 1
    assert frontier.stats["pricewatch/frontier/malformed"] == 1
    assert await client.hget(frontier.keys.malformed, bad) == b"\xc1 not msgpack"  # kept
    # Skipped for good: later claims neither hand it out nor log it again.
    caplog.clear()
    await frontier.complete([Completion(lease, Outcome.OK) for lease in leases])
    await frontier.add([Entry("https://a.test/p/9")])
    assert [lease.url for lease in await frontier.claim(10)] == ["https://a.test/p/9"]
    assert "malformed" not in caplog.text


async def test_a_record_of_the_wrong_shape_is_malformed_too(
    frontier: RedisFrontier, client: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    await frontier.add([Entry("https://a.test/p/0"), Entry("https://a.test/p/1")])
    # A msgpack array, but of the wrong shape (the importance is a string).
    wrong = b"\x93\xa3url\xa6a.test\xa1x"
    await client.hset(frontier.keys.entries, entry_id("https://a.test/p/0"), wrong)
    with caplog.at_level(logging.WARNING, logger="pricewatch.frontier"):
        leases = await frontier.claim(10)
    assert [lease.url for lease in leases] == ["https://a.test/p/1"]
    assert "malformed entry" in caplog.text


async def test_unreachable_redis_names_the_masked_url() -> None:
    frontier = RedisFrontier("redis://:s3cret@127.0.0.1:1/0", SchedulePolicy())
    with pytest.raises(FrontierUnavailable) as caught:
        await frontier.open()
    message = str(caught.value)
    assert "redis://:***@127.0.0.1:1/0" in message
    assert "s3cret" not in message
    assert not isinstance(caught.value, FrontierConnectionLost)


async def test_namespace_and_timeout_are_validated() -> None:
    with pytest.raises(ValueError, match="PRICEWATCH_FRONTIER_REDIS_NAMESPACE .* got 'a}b'"):
        RedisFrontier(REDIS_URL, namespace="a}b")
    with pytest.raises(ValueError, match="PRICEWATCH_FRONTIER_REDIS_TIMEOUT must be > 0, got 0"):
        RedisFrontier(REDIS_URL, timeout=0)


async def test_settings_select_redis_and_its_namespace(redis_namespace: str) -> None:
    settings = Settings(
        project_settings(
            PRICEWATCH_FRONTIER_URL=REDIS_URL,
            PRICEWATCH_FRONTIER_REDIS_NAMESPACE=redis_namespace,
            PRICEWATCH_DOMAIN_MAX_INFLIGHT=3,
        )
    )
    frontier = frontier_from_settings(settings)
    assert isinstance(frontier, RedisFrontier)
    assert frontier.keys.namespace == redis_namespace
    assert frontier.policy.domain_max_inflight == 3
    # The URL's ?namespace= wins over the setting.
    other = frontier_from_settings(
        Settings({**settings, "PRICEWATCH_FRONTIER_URL": f"{REDIS_URL}?namespace=x1"})
    )
    assert isinstance(other, RedisFrontier) and other.keys.namespace == "x1"


class Proxy:
    """A loopback TCP proxy in front of Redis that the test can stop (as if Redis
    restarted or the network dropped) and start again on the same port."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in list(self.writers):
            writer.close()
        await self.server.wait_closed()
        self.server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self.writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.writers -= {writer, up_writer}


async def test_losing_redis_mid_crawl_is_retryable_and_loses_nothing(
    redis_namespace: str,
) -> None:
    proxy = Proxy(6379)
    await proxy.start()
    url = f"redis://127.0.0.1:{proxy.port}/0?namespace={redis_namespace}"
    frontier = RedisFrontier(url, SchedulePolicy(lease_ttl=0.3, domain_max_inflight=0))
    await frontier.open()
    try:
        await frontier.add([Entry(f"https://a.test/p/{i}") for i in range(20)])
        held = await frontier.claim(5)  # this worker's leases when Redis goes away
        await proxy.stop()
        with pytest.raises(FrontierConnectionLost, match=f"127.0.0.1:{proxy.port}"):
            await frontier.claim(5)
        with pytest.raises(FrontierConnectionLost):
            await frontier.complete([Completion(held[0], Outcome.OK)])
        await proxy.start()  # back, same port
        await asyncio.sleep(0.35)  # the held leases expired meanwhile
        leases = await frontier.claim(100)
        assert len(leases) == 20  # every SKU is still there
        assert {lease.url for lease in held} <= {lease.url for lease in leases}
    finally:
        await frontier.close()
        if proxy.server is not None:
            await proxy.stop()


@pytest.mark.parametrize(
    "url",
    ["https://a.test/p?x=1", "http://a.test/p", "HTTPS://a.test/upper", "ftp://a.test/f"],
)
def test_urls_are_stored_with_a_one_byte_scheme_and_restored_exactly(url: str) -> None:
    packed = pack_url(url)
    assert unpack_url(packed) == url
    if url.startswith(("https://", "http://")):
        assert len(packed) < len(url) - 5


async def test_claims_return_the_url_in_its_canonical_form(frontier: RedisFrontier) -> None:
    urls = ["http://a.test/plain", "https://b.test/tls?q=é", "HTTPS://c.test/Upper"]
    await frontier.add([Entry(url) for url in urls])
    assert sorted(lease.url for lease in await frontier.claim(10)) == [
        "http://a.test/plain",
        "https://b.test/tls?q=%C3%A9",
        "https://c.test/Upper",
    ]


async def test_records_of_an_older_release_gain_the_rate_estimate(
    frontier: RedisFrontier, client: aioredis.Redis
) -> None:
    """Records written before the budget have 9 fields: they read as "no estimate yet" and
    get the estimate's fields at their next completion; a 10th field that is not a number
    is malformed."""
    await frontier.add([Entry("https://a.test/p/0"), Entry("https://a.test/p/1")])
    old, bad = entry_id("https://a.test/p/0"), entry_id("https://a.test/p/1")
    await client.eval(  # type: ignore[misc]
        "redis.call('HSET', KEYS[1], ARGV[1], cmsgpack.pack({ARGV[3], '', 2, 0, 0, 0, 7, 3, 100}))"
        "\nredis.call('HSET', KEYS[1], ARGV[2],"
        " cmsgpack.pack({ARGV[4], '', 1, 0, 0, 0, 0, 0, 100, 'x'}))",
        1,
        frontier.keys.entries,
        old,
        bad,
        pack_url("https://a.test/p/0"),
        pack_url("https://a.test/p/1"),
    )
    [lease] = await frontier.claim(10)
    assert (lease.url, lease.checks, lease.changes, lease.importance) == (
        "https://a.test/p/0",
        7,
        3,
        2.0,
    )
    assert (lease.rate_changes, lease.rate_exposure, lease.observed_at) == (0, 0, 0)
    await frontier.complete([Completion(lease, Outcome.OK)])
    info = await frontier.entry(lease.url)
    assert info is not None and info.checks == 8
    assert info.rate_changes == frontier.policy.prior_weight
    assert info.observed_at == pytest.approx(lease.deadline - frontier.policy.lease_ttl)
    assert frontier.stats["pricewatch/frontier/malformed"] == 1
