"""Sessions and proxies, component by component: the pools of ``PRICEWATCH_PROXIES``, the
session store on both backends (real SQLite and Redis), and the middleware's settings."""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.downloadermiddlewares.cookies import CookiesMiddleware
from scrapy.exceptions import NotConfigured
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from pricewatch.browser import BrowserRouter
from pricewatch.exceptions import ProxiesBenched
from pricewatch.frontier import Entry
from pricewatch.leases import CrawlResources
from pricewatch.meta import PROXY_META, SESSION_META
from pricewatch.sessions import (
    Proxy,
    ProxyPools,
    SessionMiddleware,
    SessionRecord,
    SessionStore,
    proxy_id,
    session_store_from_settings,
)
from pricewatch.sessions.middleware import (
    SessionConfig,
    SessionEnded,
    cookie_fields,
    cookie_from_fields,
)
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


# --- the middleware in process, on both backends ----------------------------------------------

PROXIES = ["http://u:pw@127.0.0.1:1", "http://u:pw@127.0.0.1:2"]
SHOP = "shop.example"


def build_middleware(frontier_url: str, **settings: object) -> SessionMiddleware:
    values: dict[str, object] = {
        "PRICEWATCH_FRONTIER_URL": frontier_url,
        "PRICEWATCH_PROXIES": PROXIES,
        "PRICEWATCH_PROXY_BENCH_FAILURES": 2,
        "PRICEWATCH_PROXY_BENCH_COOLDOWN": 0.3,
        "PRICEWATCH_PROXY_BENCH_FACTOR": 2.0,
    }
    values.update(settings)
    crawler = get_crawler(settings_dict=project_settings(values))
    mw = SessionMiddleware(crawler)
    mw._cookies = CookiesMiddleware()  # the crawl's own is found through its engine
    return mw


@pytest.fixture
async def middlewares() -> AsyncIterator[list[SessionMiddleware]]:
    built: list[SessionMiddleware] = []
    yield built
    for mw in built:
        await mw._spider_closed()
        await CrawlResources.of(mw.crawler)._spider_closed()


def stat(mw: SessionMiddleware, name: str) -> int:
    return int(mw.stats.get_value(f"pricewatch/{name}", 0))


async def sent(mw: SessionMiddleware, path: str = "/p/1") -> Request:
    """A request as it leaves the middlewares: session, then Scrapy's cookies."""
    request = Request(f"http://{SHOP}{path}")
    await mw.process_request(request)
    assert mw._cookies is not None
    mw._cookies.process_request(request)
    return request


def answer(mw: SessionMiddleware, request: Request, status: int = 200, **headers: str) -> Any:
    response = HtmlResponse(request.url, status=status, body=b"<html></html>", headers=headers,
                            request=request)  # fmt: skip
    assert mw._cookies is not None
    mw._cookies.process_response(request, response)
    return mw.process_response(request, response)


async def settle(mw: SessionMiddleware) -> None:
    while mw._tasks:
        await asyncio.gather(*mw._tasks)
    await mw.flush()


class Clock:
    """The middleware's clock (``time.monotonic`` in a crawl), moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_failing_proxy_is_benched_probed_back_and_benched_longer(
    frontier_url: str, middlewares: list[SessionMiddleware]
) -> None:
    # Benches of 30 s on the middleware's own clock, which only the test moves: what is
    # benched stays benched however slow the machine (the frontier's pause lasts 20 s of real
    # time). One worker: it never re-reads the backend, whose clock the test does not move.
    mw = build_middleware(
        frontier_url, PRICEWATCH_PROXY_BENCH_COOLDOWN=30.0, PRICEWATCH_SESSION_REFRESH=3600.0
    )
    middlewares.append(mw)
    clock = Clock()
    mw.clock = clock
    first = await sent(mw)
    a = first.meta[PROXY_META]
    mw.process_exception(first, ConnectionRefusedError())
    assert stat(mw, "proxy/benched") == 0  # one failure: not yet
    mw.process_exception(await sent(mw), ConnectionRefusedError())
    assert stat(mw, "proxy/benched") == 1 and stat(mw, "sessions/retired/benched") == 1
    clock.now += 10
    second = await sent(mw)
    b = second.meta[PROXY_META]
    assert b != a  # the others carry the load
    for _ in range(2):
        mw.process_exception(await sent(mw), ConnectionRefusedError())
    # Every proxy benched: the domain waits (in the frontier too) instead of going direct,
    # until the first bench ends.
    with pytest.raises(ProxiesBenched) as info:
        await sent(mw)
    assert info.value.retry_after == pytest.approx(20.0)
    assert stat(mw, "proxy/deferred") == 1
    frontier = await CrawlResources.of(mw.crawler).frontier()
    await frontier.add([Entry(f"http://{SHOP}/p/9")])
    assert await frontier.claim(5) == []
    clock.now += 20.5
    # The first bench ended: the next session probes that proxy; a success brings it back.
    probe = await sent(mw)
    assert probe.meta[PROXY_META] == a
    assert answer(mw, probe).status == 200
    assert stat(mw, "proxy/unbenched") == 1
    await settle(mw)
    health = {h.proxy: h for h in await mw.store.health(SHOP)}
    assert health[a].cooldown == 0 and health[a].benched_for == 0
    # The other one's bench ends and its probe fails: benched again, for twice as long.
    clock.now += 10
    state = mw.domains[SHOP]
    mw._failed(state, b)
    await settle(mw)
    health = {h.proxy: h for h in await mw.store.health(SHOP)}
    assert health[b].cooldown == pytest.approx(60.0)
    assert health[b].failures == 2 and health[a].ok == 1


async def test_a_bench_written_late_never_lands_over_the_unbench_that_followed_it(
    frontier_url: str, middlewares: list[SessionMiddleware]
) -> None:
    mw = build_middleware(frontier_url, PRICEWATCH_PROXY_BENCH_COOLDOWN=30.0)
    middlewares.append(mw)
    clock = Clock()
    mw.clock = clock
    bench, held = mw.store.bench, asyncio.Event()

    async def slow_bench(*args: Any) -> float:
        await held.wait()
        return await bench(*args)

    mw.store.bench = slow_bench  # type: ignore[method-assign]
    for _ in range(2):
        failing = await sent(mw)
        mw.process_exception(failing, ConnectionRefusedError())
    a = failing.meta[PROXY_META]
    clock.now += 31  # the bench ended (its write still on its way): the probe succeeds
    probe = await sent(mw)
    assert probe.meta[PROXY_META] == a
    answer(mw, probe)
    asyncio.get_running_loop().call_later(0.2, held.set)
    await settle(mw)
    (health,) = [h for h in await mw.store.health(SHOP) if h.proxy == a]
    assert health.cooldown == 0 and health.benched_for == 0 and health.benchings == 1


async def test_a_flush_returns_once_the_flush_under_way_is_written(
    frontier_url: str, middlewares: list[SessionMiddleware]
) -> None:
    mw = build_middleware(frontier_url)
    middlewares.append(mw)
    add_health, held, writes = mw.store.add_health, asyncio.Event(), []

    async def slow_add_health(deltas: dict[tuple[str, str], HealthDelta]) -> None:
        writes.append("start")
        if len(writes) == 1:
            await held.wait()  # the periodic flush's write, slow to land
        await add_health(deltas)
        writes.append("end")

    mw.store.add_health = slow_add_health  # type: ignore[method-assign]
    mw._count(SHOP, "aaaa0001", failures=1)
    under_way = asyncio.ensure_future(mw.flush())
    await asyncio.sleep(0)  # it took the counts and writes them
    mw._count(SHOP, "aaaa0001", ok=1)
    asyncio.get_running_loop().call_later(0.2, held.set)
    await mw.flush()  # what the spider's close does: every count written when it returns
    assert writes[:3] == ["start", "end", "start"]
    await under_way
    (health,) = await mw.store.health(SHOP)
    assert (health.ok, health.failures) == (1, 1)


async def test_a_blocked_session_is_retired_and_its_request_asked_again_elsewhere(
    frontier_url: str, middlewares: list[SessionMiddleware]
) -> None:
    mw = build_middleware(frontier_url)
    middlewares.append(mw)
    request = await sent(mw)
    assert answer(mw, request, 200, **{"Set-Cookie": "sid=abc; Path=/"}).status == 200
    blocked = await sent(mw)
    assert blocked.headers.get(b"Cookie") == b"sid=abc"
    again = answer(mw, blocked, 429, **{"Retry-After": "30"})
    assert isinstance(again, Request)  # not the 429: a copy for another session
    assert stat(mw, "sessions/retired/blocked") == 1 and stat(mw, "sessions/rerouted") == 1
    assert not {"proxy", "cookiejar", SESSION_META, PROXY_META} & set(again.meta)
    assert b"Cookie" not in again.headers and b"Proxy-Authorization" not in again.headers
    await mw.process_request(again)
    assert again.meta[PROXY_META] != blocked.meta[PROXY_META]
    assert again.meta[SESSION_META] != blocked.meta[SESSION_META]
    # A request that waited in its slot while its session ended never leaves on it.
    with pytest.raises(SessionEnded):
        mw.before_transfer(blocked)
    assert isinstance(mw.process_exception(blocked, SessionEnded("ended")), Request)


async def test_a_restarted_worker_resumes_the_session_with_its_cookies(
    frontier_url: str, middlewares: list[SessionMiddleware]
) -> None:
    first = build_middleware(frontier_url)
    middlewares.append(first)
    request = await sent(first)
    answer(first, request, 200, **{"Set-Cookie": "loyalty=m3mb3r; Path=/"})
    await settle(first)
    # A new process on the same backend (the first was killed: nothing else carried over).
    second = build_middleware(frontier_url)
    middlewares.append(second)
    again = await sent(second, "/p/1")
    assert again.meta[SESSION_META] == request.meta[SESSION_META]
    assert again.meta["proxy"] == request.meta["proxy"]
    assert again.headers.get(b"Cookie") == b"loyalty=m3mb3r"
    assert stat(second, "sessions/resumed") == 1 and stat(second, "sessions/created") == 0


async def test_a_browser_page_gets_its_session_as_a_context_on_the_same_proxy(
    sqlite_frontier_url: str, middlewares: list[SessionMiddleware]
) -> None:
    mw = build_middleware(sqlite_frontier_url)
    middlewares.append(mw)
    plain = await sent(mw)
    router = BrowserRouter.of(mw.crawler)
    request = Request(
        f"http://{SHOP}/p/1", meta=router.browser_meta(f"http://{SHOP}/p/1", SHOP, "declared")
    )
    routed_to = request.meta["playwright_context"]
    await mw.process_request(request)
    meta = request.meta
    assert meta[SESSION_META] == plain.meta[SESSION_META]  # the SKU's session, as over HTTP
    assert meta["playwright_context"] == f"pricewatch-session-{meta[SESSION_META]}"
    kwargs = meta["playwright_context_kwargs"]
    assert kwargs["proxy"] == {"server": "http://127.0.0.1:1", "username": "u", "password": "pw"}
    assert kwargs["user_agent"] == plain.headers[b"User-Agent"].decode()
    assert kwargs["java_script_enabled"]  # the router's own options kept
    # No proxy meta: Scrapy would make a Proxy-Authorization header the browser sends on.
    assert "proxy" not in meta and b"Proxy-Authorization" not in request.headers
    assert router._assigned[routed_to] == 0 and router._assigned[meta["playwright_context"]] == 1


def test_the_proxies_command_shows_health_and_sessions_by_id_never_credentials() -> None:
    from pricewatch.commands.proxies import proxy_rows, session_rows, table
    from pricewatch.sessions import ProxyHealth

    pools = ProxyPools.from_value([f"http://user:{SECRET}@p1:3128", "http://p2:3128"])
    p1, p2 = pools.for_domain(SHOP)
    now = time.time()
    health = [
        ProxyHealth(SHOP, p1.id, ok=3, failures=1, latency_sum=0.3, benched_until=now + 60,
                    cooldown=60, benchings=1, now=now),
    ]  # fmt: skip
    sessions = [SessionRecord("s1", SHOP, 0, p2.id, "UA", now - 30, requests=4)]
    rows = {(r["proxy"], r["domain"]): r for r in proxy_rows(pools, health, sessions)}
    one = rows[(p1.id, SHOP)]
    assert one["url"] == "http://***@p1:3128" and one["success_rate"] == 0.75
    assert one["latency"] == pytest.approx(0.1) and 59 < one["benched_for"] <= 60
    assert rows[(p2.id, None)]["sessions"] == 0  # configured, never used yet
    (live,) = session_rows(sessions, now)
    assert live["proxy"] == p2.id and live["age"] == 30 and live["requests"] == 4
    text = table(list(rows.values()), ("proxy", "url", "domain", "ok", "benched_for"))
    assert p1.id in text and "***@p1:3128" in text and SECRET not in text
