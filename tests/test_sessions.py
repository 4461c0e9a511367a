"""Sessions and proxies, component by component: the pools of ``PRICEWATCH_PROXIES``, the
session store on both backends (real SQLite and Redis), and the middleware's settings."""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from pricewatch.sessions import (
    Proxy,
    ProxyPools,
    SessionMiddleware,
    SessionRecord,
    SessionStore,
    proxy_id,
    session_store_from_settings,
)
from pricewatch.sessions.middleware import SessionConfig, cookie_fields, cookie_from_fields
from pricewatch.sessions.store import HealthDelta

from .helpers import project_settings

SECRET = "hunter2-Pr0xy"


# --- pools ----------------------------------------------------------------------------------


def test_a_proxy_is_named_by_a_stable_short_hash_and_shown_without_credentials() -> None:
    proxy = Proxy.parse(f"http://user:{SECRET}@proxy.example:3128")
    assert proxy.id == proxy_id(f"http://user:{SECRET}@proxy.example:3128")
    assert len(proxy.id) == 8 and int(proxy.id, 16) >= 0
    assert proxy.display == "http://***@proxy.example:3128"
    assert SECRET not in repr(proxy) and SECRET not in str(proxy)
    # Another account on the same proxy host is another proxy.
    assert Proxy.parse("http://other:pw@proxy.example:3128").id != proxy.id


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(["http://a:1", "http://b:2"], id="list"),
        pytest.param("http://a:1, http://b:2", id="comma-separated"),
        pytest.param('["http://a:1", "http://b:2"]', id="json"),
        pytest.param({"*": ["http://a:1", "http://b:2"]}, id="dict"),
    ],
)
def test_pools_from_every_form_of_the_setting(value: object) -> None:
    pools = ProxyPools.from_value(value)
    assert [p.display for p in pools.for_domain("shop.example")] == ["http://a:1", "http://b:2"]


def test_pools_per_domain_cover_subdomains_and_fall_back_to_the_star() -> None:
    pools = ProxyPools.from_value({"shop.example": ["http://a:1"], "*": ["http://b:2"]})
    assert [p.display for p in pools.for_domain("www.shop.example")] == ["http://a:1"]
    assert [p.display for p in pools.for_domain("other.example")] == ["http://b:2"]
    assert not ProxyPools.from_value({"shop.example": ["http://a:1"]}).for_domain("x.example")
    assert not ProxyPools.from_value("")


def test_pools_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "proxies.txt"
    path.write_text("# the pool\nhttp://a:1\n\nhttp://b:2  # second\n")
    assert len(ProxyPools.from_value(str(path)).for_domain("x")) == 2
    path.write_text(json.dumps({"x": ["http://a:1"]}))
    assert len(ProxyPools.from_value(str(path)).for_domain("x")) == 1


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(f"ftp://user:{SECRET}@host:21", id="scheme"),
        pytest.param(f"http://user:{SECRET}@", id="no-host"),
        pytest.param(f'["http://user:{SECRET}@host:99999999"]', id="bad-port"),
        pytest.param(f'{{"x": "http://user:{SECRET}@host:1"', id="bad-json"),
        pytest.param(f"/nonexistent/{SECRET}-proxies.txt", id="no-file"),
    ],
)
def test_a_bad_pool_names_the_setting_and_never_its_credentials(value: str) -> None:
    with pytest.raises(ValueError, match="PRICEWATCH_PROXIES") as info:
        ProxyPools.from_value(value)
    if "nonexistent" not in value:  # a path is quoted back; a URL's password never is
        assert SECRET not in str(info.value)


def test_without_proxies_the_middleware_is_not_configured() -> None:
    crawler = get_crawler(settings_dict=project_settings(PRICEWATCH_PROXIES=""))
    with pytest.raises(NotConfigured):
        SessionMiddleware(crawler)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PRICEWATCH_SESSIONS_PER_DOMAIN", 0),
        ("PRICEWATCH_PROXY_BENCH_FAILURES", 0),
        ("PRICEWATCH_PROXY_BENCH_COOLDOWN", 0),
        ("PRICEWATCH_PROXY_BENCH_FACTOR", 0.5),
        ("PRICEWATCH_SESSION_LOGIN", {"x": {"method": "POST"}}),
    ],
)
def test_invalid_settings_are_refused_by_name(name: str, value: object) -> None:
    settings = get_crawler(
        settings_dict=project_settings(PRICEWATCH_PROXIES="http://a:1", **{name: value})
    ).settings
    with pytest.raises(ValueError, match=name):
        SessionConfig.from_settings(settings)


def test_cookies_round_trip_through_json() -> None:
    cookie = http.cookiejar.Cookie(
        0, "loyalty", "abc", None, False, "shop.example", False, False, "/", True, True,
        int(time.time()) + 60, False, None, None, {"HttpOnly": None},
    )  # fmt: skip
    again = cookie_from_fields(json.loads(json.dumps(cookie_fields(cookie))))
    assert vars(again) == vars(cookie)


# --- the store, on both backends --------------------------------------------------------------


@pytest.fixture
async def store(frontier_url: str) -> AsyncIterator[SessionStore]:
    settings = get_crawler(
        settings_dict=project_settings(PRICEWATCH_FRONTIER_URL=frontier_url)
    ).settings
    async with session_store_from_settings(settings) as store:
        yield store


def record(session_id: str, slot: int = 0, proxy: str = "aaaa0001") -> SessionRecord:
    return SessionRecord(session_id, "shop.example", slot, proxy, "UA/1", time.time())


async def test_a_slot_holds_one_session_whoever_asks(store: SessionStore) -> None:
    first, second = await asyncio.gather(store.create(record("s1")), store.create(record("s2")))
    assert first == second  # both workers got the same session
    assert [r.id for r in await store.sessions("shop.example")] == [first.id]
    other = await store.create(record("s3", slot=1, proxy="aaaa0002"))
    assert other.id == "s3"
    assert [r.slot for r in await store.sessions()] == [0, 1]


async def test_cookies_are_saved_and_read_back(store: SessionStore) -> None:
    created = await store.create(record("s1"))
    jar = ({"name": "loyalty", "value": "t0k3n", "domain": "shop.example"},)
    saved = SessionRecord(**{**vars_of(created), "cookies": jar, "requests": 7})
    assert await store.save(saved)
    (read,) = await store.sessions("shop.example")
    assert read.cookies == jar and read.requests == 7 and read.proxy == "aaaa0001"


async def test_a_retired_session_is_gone_and_cannot_be_saved(store: SessionStore) -> None:
    created = await store.create(record("s1"))
    assert await store.retire(created)
    assert not await store.retire(created)
    assert not await store.save(created)
    assert await store.sessions("shop.example") == []
    assert (await store.create(record("s2"))).id == "s2"  # the slot is free again


async def test_health_adds_up_and_benches_grow_never_shrink(store: SessionStore) -> None:
    await store.add_health({("shop.example", "p1"): HealthDelta(ok=3, latency_sum=0.6)})
    await store.add_health({("shop.example", "p1"): HealthDelta(ok=1, failures=2, blocks=1)})
    (h,) = await store.health("shop.example")
    assert (h.ok, h.failures, h.blocks) == (4, 2, 1)
    assert h.success_rate == pytest.approx(4 / 7) and h.latency == pytest.approx(0.15)
    await store.bench("shop.example", "p1", 60, 60)
    await store.bench("shop.example", "p1", 1, 120)  # never shortens the longer bench
    (h,) = await store.health("shop.example")
    assert 55 < h.benched_for <= 60 and h.cooldown == 120 and h.benchings == 2
    await store.unbench("shop.example", "p1")
    (h,) = await store.health()
    assert h.benched_for == 0 and h.cooldown == 0


def vars_of(r: SessionRecord) -> dict[str, object]:
    return {name: getattr(r, name) for name in r.__slots__}  # type: ignore[attr-defined]
