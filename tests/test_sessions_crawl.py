"""Sessions on proxies, end to end: real forward proxies on loopback (tinyproxy), each
sending from its own address, and the sandbox counting requests and cookies per address.

Crawls run as `scrapy` subprocesses; what they did is checked at the shop (``sources``
stats: requests, Cookie headers and cookieless paths per client address, so per proxy), in
the proxies' own logs (the requests each was asked to forward), and in the store.
"""

from __future__ import annotations

import base64
import http.client
import json
import signal
import sqlite3
import time
import zlib
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from .fixtures.proxies import ProxyGroup, Tinyproxy
from .fixtures.sandbox import SandboxProcess
from .helpers import scrapy, scrapy_env, start_scrapy

FAST = ["-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False"]
CREDENTIALS = ("pwuser", "Pr0xy-s3cret-XYZ")  # grepped for in every output below
REFUSED = "downloader/exception_type_count/scrapy.exceptions.DownloadConnectionRefusedError"
SOURCES = {"127.0.1.1", "127.0.1.2", "127.0.1.3"}


def login_setting(shop: dict[str, Any]) -> str:
    return json.dumps(
        {shop["host"]: {"url": shop["base_url"] + "/login", "formdata": {"card": "4242"}}}
    )


def env_for(tmp_path: Path, group: ProxyGroup, **extra: str) -> dict[str, str]:
    return scrapy_env(tmp_path, PRICEWATCH_PROXIES=",".join(group.urls()), **extra)


def seed(tmp_path: Path, urls: list[str], env: dict[str, str]) -> None:
    (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
    proc = scrapy(tmp_path, "seed", "seeds.txt", env=env)
    assert proc.returncode == 0, proc.stderr


def crawl(tmp_path: Path, env: dict[str, str], *args: str) -> tuple[dict[str, Any], str]:
    proc = scrapy(tmp_path, "crawl", "products", *FAST, *args, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats: dict[str, Any] = json.loads((tmp_path / "stats.json").read_text())
    return stats, proc.stderr


def stored(tmp_path: Path, env: dict[str, str]) -> dict[str, Decimal]:
    """The stored price of every SKU (read from the SQLite store: no subprocess)."""
    with sqlite3.connect(tmp_path / "pricewatch.db") as conn:
        rows = conn.execute("SELECT url, price FROM products").fetchall()
    return {url: Decimal(str(price)) for url, price in rows}


def cookie_tokens(cookies: dict[str, int]) -> set[str]:
    """The loyalty tokens in the Cookie headers a source sent."""
    out = set()
    for header in cookies:
        for part in header.split(";"):
            name, _, value = part.strip().partition("=")
            if name == "loyalty":
                out.add(value)
    return out


def assert_no_credential(*texts: str) -> None:
    for text in texts:
        assert CREDENTIALS[1] not in text
        assert CREDENTIALS[0] + ":" not in text


def proxy_logs(group: ProxyGroup) -> list[str]:
    """What the proxies logged: a credential there came in a request line, not its header."""
    return [proxy.log.read_text() for proxy in group]


def assert_forwarded_all_they_were_asked(group: ProxyGroup, host: dict[str, Any]) -> None:
    """Each proxy's log holds as many requests as the shop got from its address: none was
    refused (a 407 for want of credentials stops at the proxy) and none went elsewhere."""
    for proxy in group:
        logged = proxy.requests()
        source = host["sources"].get(proxy.source, {"requests": 0})
        assert len(logged) == source["requests"], (proxy.source, logged[-5:])


def fetch(proxy: Tinyproxy, url: str, credentials: tuple[str, str] | None = CREDENTIALS) -> int:
    """GET ``url`` through ``proxy``, as Scrapy sends it: credentials in Proxy-Authorization."""
    headers = {}
    if credentials:
        token = base64.b64encode(":".join(credentials).encode()).decode()
        headers["Proxy-Authorization"] = f"Basic {token}"
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    try:
        conn.request("GET", url, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_the_proxies_send_from_their_address_and_a_killed_one_comes_back(
    sandbox_factory: Callable[..., SandboxProcess],
    proxies: Callable[..., ProxyGroup],
) -> None:
    """What the crawls below rely on: a proxy forwards only with its credentials, from its
    own address; killed, it refuses connections; started again, it serves on its port."""
    sb = sandbox_factory(shops=1, products=2)
    host = sb.shops[0]["host"]
    url = sb.urls()[0]
    group = proxies(2, credentials=CREDENTIALS)
    sb.reset_stats()
    assert fetch(group[1], url, credentials=None) == 407
    assert sb.host_stats(host)["requests"] == 0
    assert fetch(group[1], url) == 200
    port = group[1].port
    group[1].kill()
    with pytest.raises(ConnectionRefusedError):
        fetch(group[1], url)
    group[1].start()
    assert group[1].port == port
    assert fetch(group[1], url) == 200
    path = urlsplit(url).path
    assert sb.host_stats(host)["sources"] == {
        "127.0.1.2": {"requests": 2, "cookies": {}, "cookieless": {path: 2}}
    }
    # Its log: the three requests it was asked (the refused one too), across the restart.
    assert [r.target for r in group[1].requests()] == [url] * 3
    assert group[0].requests() == []


def test_sessions_stick_to_their_proxy_and_keep_the_loyalty_price(
    sandbox_factory: Callable[..., SandboxProcess],
    proxies: Callable[..., ProxyGroup],
    tmp_path: Path,
) -> None:
    sb = sandbox_factory(shops=1, products=40, mode=["loyalty"])
    shop = sb.shops[0]
    group = proxies(3, credentials=CREDENTIALS)
    env = env_for(tmp_path, group)
    urls = sb.urls()
    seed(tmp_path, urls, env)
    sb.reset_stats()
    stats, log = crawl(
        tmp_path,
        env,
        "-s", "PRICEWATCH_SESSIONS_PER_DOMAIN=3",
        "-s", f"PRICEWATCH_SESSION_LOGIN={login_setting(shop)}",
        "-s", "LOG_LEVEL=DEBUG",
    )  # fmt: skip
    truth = sb.truth()
    host = sb.host_stats(shop["host"])
    sources = host["sources"]
    # Every request left through a proxy, each proxy from its own address: none direct.
    assert set(sources) == SOURCES, sources
    assert sum(s["requests"] for s in sources.values()) == host["requests"]
    # Every request a proxy was asked it forwarded: each carried the credentials (the
    # crawler saw no 407 either).
    assert_forwarded_all_they_were_asked(group, host)
    assert "downloader/response_status_count/407" not in stats
    # One login per session, three sessions, each through its own proxy.
    sessions = {k: v for k, v in stats.items() if k.startswith("pricewatch/sessions/")}
    assert host["paths"]["/login"] == 3, (sessions, host["status"])
    assert sessions["pricewatch/sessions/created"] == 3, sessions
    assert sessions["pricewatch/sessions/logins"] == 3, sessions
    for proxy in group:
        assert [r.path for r in proxy.requests()].count("/login") == 1, proxy.source
        assert {urlsplit(r.target).hostname for r in proxy.requests()} == {shop["host"]}
    # Cookies never crossed proxies: each address carried one member token, its own.
    tokens = {address: cookie_tokens(s["cookies"]) for address, s in sources.items()}
    assert all(len(t) == 1 for t in tokens.values()), tokens
    assert len(set.union(*tokens.values())) == 3
    # Every page after the login carried the session's cookie (the login itself and
    # robots.txt need none): no other path went without one, and no other cookie went.
    for address, s in sources.items():
        assert set(s["cookieless"]) <= {"/login", "/robots.txt"}, (address, s["cookieless"])
        assert all(h.startswith("loyalty=") for h in s["cookies"]), (address, s["cookies"])
    # The loyalty price, on every page of every session.
    prices = stored(tmp_path, env)
    assert sorted(prices) == sorted(urls)
    for url in urls:
        assert prices[url] == Decimal(truth[url]["loyalty_price"]), url
    assert stats["pricewatch/outcome/ok"] == len(urls)
    # No credential in the log (DEBUG), the run record, or anything stored.
    stored_bytes = [p.read_bytes().decode("latin-1") for p in tmp_path.glob("pricewatch.db*")]
    run_record = (tmp_path / "stats.json").read_text()
    assert_no_credential(log, run_record, *stored_bytes, *proxy_logs(group))


def test_a_killed_worker_resumes_its_sessions(
    sandbox_factory: Callable[..., SandboxProcess],
    proxies: Callable[..., ProxyGroup],
    tmp_path: Path,
) -> None:
    sb = sandbox_factory(shops=1, products=36, mode=["loyalty"], latency="30-60")
    shop = sb.shops[0]
    group = proxies(3, credentials=CREDENTIALS)
    env = env_for(tmp_path, group)
    urls = sb.urls()
    seed(tmp_path, urls, env)
    sb.reset_stats()
    args = [
        "crawl", "products",
        "-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False",
        "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=2",
        "-s", "PRICEWATCH_SESSIONS_PER_DOMAIN=3",
        "-s", "PRICEWATCH_FRONTIER_LEASE_TTL=2",
        "-s", f"PRICEWATCH_SESSION_LOGIN={login_setting(shop)}",
    ]  # fmt: skip
    worker = start_scrapy(tmp_path, *args, env=env)
    try:
        deadline = time.monotonic() + 60
        while (
            sum(
                n
                for path, n in sb.host_stats(shop["host"])["paths"].items()
                if path.startswith("/p")
            )
            < 15
        ):
            assert worker.poll() is None, worker.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the crawl did not get going"
            time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
        worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    before = sb.host_stats(shop["host"])
    assert before["paths"]["/login"] == 3
    tokens_before = {a: cookie_tokens(s["cookies"]) for a, s in before["sources"].items()}
    with sqlite3.connect(tmp_path / "pricewatch.db") as conn:
        sessions = conn.execute("SELECT proxy, cookies, established FROM sessions").fetchall()
    assert len(sessions) == 3 and all(established for _, _, established in sessions)
    # The stored cookie jar of each proxy's session (proxy i sends from 127.0.1.<i+1>).
    address = {p.id: f"127.0.1.{i + 1}" for i, p in enumerate(_pool(group))}
    stored_tokens = {
        address[proxy]: {c["value"] for c in json.loads(cookies) if c["name"] == "loyalty"}
        for proxy, cookies, _ in sessions
    }
    assert all(len(t) == 1 for t in stored_tokens.values()), stored_tokens
    for source, tokens in tokens_before.items():
        assert tokens <= stored_tokens[source], source
    # The killed worker's leases expire; the restarted worker resumes its sessions.
    time.sleep(2.5)
    sb.reset_stats()
    stats, log = crawl(tmp_path, env, *args[2:])
    after = sb.host_stats(shop["host"])
    assert "/login" not in after["paths"]  # no new session set-up at the shop
    assert stats["pricewatch/sessions/resumed"] == 3
    assert stats.get("pricewatch/sessions/created", 0) == 0
    assert set(after["sources"]) <= SOURCES
    for source, s in after["sources"].items():
        # Same cookie, over the same proxy (its source address), as before the kill.
        assert cookie_tokens(s["cookies"]) == stored_tokens[source], source
    truth = sb.truth()
    prices = stored(tmp_path, env)
    assert sorted(prices) == sorted(urls)
    assert all(prices[url] == Decimal(truth[url]["loyalty_price"]) for url in urls)
    assert_no_credential(log)


def test_a_failing_proxy_is_benched_and_the_others_carry_its_load(
    sandbox_factory: Callable[..., SandboxProcess],
    proxies: Callable[..., ProxyGroup],
    tmp_path: Path,
) -> None:
    sb = sandbox_factory(shops=1, products=30)
    shop = sb.shops[0]
    group = proxies(3, credentials=CREDENTIALS)
    group[1].kill()  # a dead proxy: its port refuses connections
    env = env_for(tmp_path, group)
    urls = sb.urls()
    seed(tmp_path, urls, env)
    sb.reset_stats()
    stats, log = crawl(
        tmp_path,
        env,
        "-s", "PRICEWATCH_SESSIONS_PER_DOMAIN=3",
        "-s", "PRICEWATCH_PROXY_BENCH_FAILURES=2",
        "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=2",
    )  # fmt: skip
    # Benched within the configured failures (plus what was already on its way to it):
    # the connections it refused, as Scrapy's downloader counted them.
    refused = stats.get(REFUSED, 0)
    assert 2 <= refused <= 2 + 2, {k: v for k, v in stats.items() if "exception" in k}
    assert stats["pricewatch/proxy/benched"] == 1
    assert stats["pricewatch/outcome/ok"] == len(urls)
    assert sorted(stored(tmp_path, env)) == sorted(urls)
    # The other two carried the crawl and forwarded all they were asked; nothing got
    # through the dead one.
    host = sb.host_stats(shop["host"])
    assert set(host["sources"]) == {"127.0.1.1", "127.0.1.3"}
    assert sum(s["requests"] for s in host["sources"].values()) == host["requests"]
    assert_forwarded_all_they_were_asked(group, host)
    assert_no_credential(log, (tmp_path / "stats.json").read_text())
    # What `scrapy proxies` shows: the benched proxy, and the health of the others.
    proc = scrapy(tmp_path, "proxies", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert_no_credential(proc.stdout, proc.stderr)
    rows = {row["proxy"]: row for row in json.loads(proc.stdout)["proxies"]}
    ids = [p.id for p in _pool(group)]
    assert rows[ids[1]]["benched_for"] > 0
    assert rows[ids[0]]["ok"] > 0 and rows[ids[2]]["ok"] > 0


def test_a_shop_limiting_each_address_is_crawled_without_a_429_storm(
    sandbox_factory: Callable[..., SandboxProcess],
    proxies: Callable[..., ProxyGroup],
    tmp_path: Path,
) -> None:
    # 12 pages a minute from one address; 30 SKUs over 3 proxies fit, one address does not.
    sb = sandbox_factory(
        shops=1, products=30, mode=["ratelimit:rate=12,window=60,per_source=true,retry_after=30"]
    )
    shop = sb.shops[0]
    group = proxies(3)
    env = env_for(tmp_path, group)
    urls = sb.urls()
    seed(tmp_path, urls, env)
    sb.reset_stats()
    stats, _ = crawl(tmp_path, env, "-s", "PRICEWATCH_SESSIONS_PER_DOMAIN=3")
    status = sb.host_stats(shop["host"])["status"]
    assert status.get("429", 0) <= 3, status  # at most one per address, then it is benched
    assert stats["pricewatch/outcome/ok"] == len(urls)
    assert sorted(stored(tmp_path, env)) == sorted(urls)


def _pool(group: ProxyGroup) -> list[Any]:
    from pricewatch.sessions import Proxy

    return [Proxy.parse(url) for url in group.urls()]


CHROMIUM = Path("/usr/lib/chromium/chromium")


@pytest.mark.skipif(not CHROMIUM.exists(), reason="no system Chromium")
def test_browser_pages_go_through_their_session_proxy(
    sandbox_factory: Callable[..., SandboxProcess],
    proxies: Callable[..., ProxyGroup],
    tmp_path: Path,
) -> None:
    sb = sandbox_factory(shops=1, products=4, js_shops=1, js_weight="light")
    js = sb.js_shops[0]
    group = proxies(3, credentials=CREDENTIALS)
    env = env_for(tmp_path, group)
    urls = sb.urls(host=js["host"])
    seed(tmp_path, urls, env)
    sb.reset_stats()
    # Chromium sends loopback addresses (the sandbox's) through a proxy only when told to.
    launch = {
        "executable_path": str(CHROMIUM),
        "headless": True,
        "args": ["--no-sandbox", "--disable-gpu", "--proxy-bypass-list=<-loopback>"],
    }
    stats, log = crawl(
        tmp_path,
        env,
        "-s", f"PRICEWATCH_JS_DOMAINS={js['host']}",
        "-s", f"PLAYWRIGHT_LAUNCH_OPTIONS={json.dumps(launch)}",
        "-s", "PRICEWATCH_SESSIONS_PER_DOMAIN=3",
    )  # fmt: skip
    assert stats["pricewatch/browser/pages"] >= len(urls)
    assert stats["pricewatch/outcome/ok"] == len(urls)
    host = sb.host_stats(js["host"])
    # The pages and everything they loaded left through the proxies, so with credentials
    # (the proxies forward nothing without them; Chromium sends them when asked, after a
    # 407, which is why the logs hold more requests than reached the shop).
    assert set(host["sources"]) <= SOURCES, host["sources"]
    # Each SKU's session on a proxy of its own: at least as many addresses as sessions the
    # SKUs map to (by a hash of the URL, whose port changes: all three may share one).
    slots = {zlib.crc32(url.encode()) % 3 for url in urls}
    assert len(host["sources"]) >= len(slots), (slots, host["sources"])
    assert sum(s["requests"] for s in host["sources"].values()) == host["requests"]
    assert_no_credential(log, (tmp_path / "stats.json").read_text(), *proxy_logs(group))
