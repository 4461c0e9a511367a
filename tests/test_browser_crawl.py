"""JS storefronts end to end: ``scrapy crawl products`` subprocesses against the sandbox.

Static shops never touch the browser; the JS-only shop's prices, read from its XHR JSON
(or its rendered DOM), equal ``/_truth``; blocked resources never reach the shop; a
static miss that shows client rendering teaches the domain, for every later crawl; a
page that never renders a price ends as ``no_price`` with its page closed. One browser
launch per crawl, a handful of pages each.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import threading
import time
from collections import Counter
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import redis
from scrapy.settings import Settings

from pricewatch.frontier import Entry, frontier_from_settings

from .fixtures.sandbox import SandboxProcess
from .helpers import project_settings, scrapy, scrapy_env, start_scrapy

FAST = ["-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False", "-s", "LOG_LEVEL=INFO"]
# What a JS page references and the browser must not download (pricewatch.browser.blocking),
# the favicon (/static/img/favicon.png, fetched by Chromium outside request routing) included.
BLOCKED_PREFIXES = ("/static/img/", "/static/fonts/", "/static/css/", "/vendor/")


def seed(env: dict[str, str], urls: list[str]) -> None:
    """Schedule ``urls`` in the crawl's frontier (in-process: one subprocess fewer)."""

    async def add() -> None:
        settings = Settings(
            project_settings(PRICEWATCH_FRONTIER_URL=env["PRICEWATCH_FRONTIER_URL"])
        )
        frontier = frontier_from_settings(settings)
        await frontier.open()
        try:
            assert await frontier.add([Entry(url) for url in urls]) == len(urls)
        finally:
            await frontier.close()

    asyncio.run(add())


def crawl(tmp_path: Path, env: dict[str, str], *settings: str) -> dict[str, Any]:
    args: list[str] = []
    for item in settings:
        args += ["-s", item]
    proc = scrapy(tmp_path, "crawl", "products", *FAST, *args, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    stats: dict[str, Any] = json.loads((tmp_path / "stats.json").read_text())
    stats["_log"] = proc.stderr
    return stats


def stored(tmp_path: Path) -> dict[str, tuple[Any, ...]]:
    with sqlite3.connect(tmp_path / "pricewatch.db") as conn:
        rows = conn.execute(
            "SELECT url, price, currency, regular_price, availability, source FROM products"
        ).fetchall()
    return {row[0]: row[1:] for row in rows}


def assert_matches_truth(
    rows: dict[str, tuple[Any, ...]], truth: dict[str, Any], urls: list[str], *, full: bool = True
) -> None:
    """Stored offers equal the sandbox's truth (``full``: list price and stock too)."""
    for url in urls:
        assert url in rows, f"{url} not stored"
        price, currency, regular, availability, _ = rows[url]
        want = truth[url]
        assert Decimal(price) == Decimal(want["price"]), url
        assert currency == want["currency"], url
        if not full:
            continue
        assert (regular and Decimal(regular)) == (
            want["regular_price"] and Decimal(want["regular_price"])
        ), url
        assert availability == want["availability"], url


# One lease at a time, so that later pages of a domain follow the first one's outcome (an
# `ok` lease is held until its store batch commits: flush often).
ONE_AT_A_TIME = [
    "PRICEWATCH_MAX_OUTSTANDING=1",
    "PRICEWATCH_FRONTIER_CLAIM_BATCH=1",
    "PRICEWATCH_FLUSH_INTERVAL=0.1",
]


def browser_keys(stats: dict[str, Any]) -> list[str]:
    return [k for k in stats if k.startswith(("playwright/", "pricewatch/browser/"))]


def paths(sandbox: SandboxProcess, host: str) -> dict[str, int]:
    return dict(sandbox.host_stats(host)["paths"])


def test_static_shops_never_touch_the_browser(tmp_path: Path, sandbox: SandboxProcess) -> None:
    env = scrapy_env(tmp_path)
    hosts = [s["host"] for s in sandbox.html_shops[:2]]
    urls = [u for h in hosts for u in sandbox.urls(host=h)[:3]]
    seed(env, urls)
    sandbox.reset_stats()
    stats = crawl(tmp_path, env)
    assert stats["pricewatch/outcome/ok"] == len(urls)
    assert browser_keys(stats) == []  # no page, no context, no browser launched
    assert "Launching browser" not in stats["_log"]
    for host in hosts:
        fetched = paths(sandbox, host)
        assert not [p for p in fetched if p.startswith(("/static/", "/vendor/", "/api/"))]
    # Static extraction is tested elsewhere; here only the price and currency matter.
    assert_matches_truth(stored(tmp_path), sandbox.truth(), urls, full=False)


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _playwright_drivers(pid: int) -> list[str]:
    found = []
    for child in _descendants(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "run-driver" in cmdline or "playwright" in cmdline:
            found.append(cmdline)
    return found


def test_a_static_crawl_never_starts_a_playwright_driver(
    tmp_path: Path, sandbox: SandboxProcess
) -> None:
    """Follow mode keeps the crawl alive after its pages, long enough to look at its
    processes: scrapy-playwright's handler would have started its driver at engine start."""
    env = scrapy_env(tmp_path)
    urls = sandbox.urls(host=sandbox.html_shops[0]["host"])[:3]
    seed(env, urls)
    proc = start_scrapy(tmp_path, "crawl", "products", "-a", "follow=1", *FAST, env=env)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                rows = stored(tmp_path)
            except sqlite3.OperationalError:  # the store's tables are not there yet
                rows = {}
            if len(rows) == len(urls) or proc.poll() is not None:
                break
            time.sleep(0.2)
        time.sleep(1.0)  # a driver started at engine start would be up by now
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert _playwright_drivers(proc.pid) == []
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert "Starting download handler" not in stderr
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["pricewatch/outcome/ok"] == len(urls)
    assert "pricewatch/browser/handler_started" not in stats


def test_js_shop_prices_from_xhr_equal_truth_and_blocked_resources_stay_away(
    tmp_path: Path, sandbox: SandboxProcess
) -> None:
    env = scrapy_env(tmp_path)
    js_host = sandbox.js_shops[0]["host"]
    html_host = sandbox.html_shops[0]["host"]
    js_urls = sandbox.urls(host=js_host)[:5]
    html_urls = sandbox.urls(host=html_host)[:2]
    seed(env, js_urls + html_urls)
    sandbox.reset_stats()
    stats = crawl(tmp_path, env, f"PRICEWATCH_JS_DOMAINS={js_host}")

    assert stats["pricewatch/outcome/ok"] == len(js_urls) + len(html_urls)
    assert stats["pricewatch/browser/routed"] == len(js_urls)
    assert stats["pricewatch/browser/routed/declared"] == len(js_urls)
    assert "pricewatch/browser/routed/retry" not in stats
    assert stats["pricewatch/browser/offer/xhr"] == len(js_urls)
    assert stats["pricewatch/extract/source/xhr"] == len(js_urls)
    assert stats["playwright/page_count"] == len(js_urls)
    assert (
        stats["pricewatch/browser/pages"]
        == stats["pricewatch/browser/pages_closed"]
        == len(js_urls)
    )
    assert stats["playwright/browser_count"] == 1
    assert stats["pricewatch/browser/handler_started"] == 1  # once for http and https
    assert stats["playwright/request_count/aborted"] >= 4 * len(js_urls)
    truth = sandbox.truth()
    assert_matches_truth(stored(tmp_path), truth, js_urls)
    assert_matches_truth(stored(tmp_path), truth, html_urls, full=False)
    assert {row[-1] for url, row in stored(tmp_path).items() if url in js_urls} == {"xhr"}

    fetched = paths(sandbox, js_host)
    assert sum(n for p, n in fetched.items() if p.startswith("/api/offer/")) == len(js_urls)
    assert fetched["/static/js/app.js"] == len(js_urls)
    blocked = {p: n for p, n in fetched.items() if p.startswith(BLOCKED_PREFIXES)}
    assert blocked == {}
    assert sum(fetched.values()) == 1 + 3 * len(js_urls)  # robots.txt; page, app.js, JSON
    html_fetched = paths(sandbox, html_host)
    assert not [p for p in html_fetched if p.startswith(("/static/", "/vendor/", "/api/"))]


def test_dom_fallback_and_context_recycling(tmp_path: Path, sandbox: SandboxProcess) -> None:
    """No XHR pattern matches: the price is read from the rendered DOM after an explicit
    wait; 2 pages per context: 5 pages use 3 contexts, 2 of them closed when done."""
    env = scrapy_env(tmp_path)
    js_host = sandbox.js_shops[0]["host"]
    js_urls = sandbox.urls(host=js_host)[5:10]
    seed(env, js_urls)
    stats = crawl(
        tmp_path,
        env,
        f"PRICEWATCH_JS_DOMAINS={js_host}",
        f'PRICEWATCH_BROWSER_XHR_PATTERNS={{"{js_host}": []}}',
        "PRICEWATCH_BROWSER_CONTEXT_PAGES=2",
    )
    assert stats["pricewatch/outcome/ok"] == len(js_urls)
    assert stats["pricewatch/browser/offer/dom"] == len(js_urls)
    assert "pricewatch/browser/offer/xhr" not in stats
    assert "pricewatch/browser/wait_timeout" not in stats
    assert stats["playwright/context_count"] == 3
    assert stats["pricewatch/browser/contexts_recycled"] == 2
    assert stats["pricewatch/browser/pages_closed"] == len(js_urls)
    rows = stored(tmp_path)
    assert_matches_truth(rows, sandbox.truth(), js_urls)
    assert {rows[u][-1] for u in js_urls} <= {"visible", "microdata", "jsonld", "opengraph"}


def test_learned_routing_switches_after_the_first_miss_and_persists(
    tmp_path: Path, sandbox: SandboxProcess
) -> None:
    env = scrapy_env(tmp_path)
    js_host = sandbox.js_shops[0]["host"]
    urls = sandbox.urls(host=js_host)[10:15]
    first, later = urls[:3], urls[3:]

    seed(env, first)
    sandbox.reset_stats()
    stats = crawl(tmp_path, env, *ONE_AT_A_TIME)
    assert stats["pricewatch/outcome/ok"] == len(first)
    assert stats["pricewatch/browser/routed/retry"] == 1  # the first miss, retried once
    assert stats["pricewatch/browser/learned"] == 1
    assert stats["pricewatch/browser/routed/learned"] == len(first) - 1
    assert "pricewatch/outcome/no_price" not in stats  # the lease ended once, as ok
    assert f"Learned that {js_host} renders its prices in the browser" in stats["_log"]
    fetched = paths(sandbox, js_host)
    pages = {u.split(js_host, 1)[1].split("/", 1)[1]: u for u in first}
    counts = sorted(fetched["/" + p] for p in pages)
    assert counts == [1, 1, 2]  # only the first page was fetched statically, then in the browser

    # A restart (or another worker): the route comes from the frontier backend.
    seed(env, later)
    sandbox.reset_stats()
    stats = crawl(tmp_path, env)
    assert stats["pricewatch/outcome/ok"] == len(later)
    assert stats["pricewatch/browser/routed/learned"] == len(later)
    assert "pricewatch/browser/routed/retry" not in stats
    assert "pricewatch/browser/learned" not in stats
    fetched = paths(sandbox, js_host)
    assert sum(n for p, n in fetched.items() if p.startswith("/products/")) == len(later)
    assert_matches_truth(stored(tmp_path), sandbox.truth(), urls)


def test_learned_route_is_shared_through_the_redis_frontier(
    tmp_path: Path, sandbox: SandboxProcess, redis_url: str, redis_frontier_url: str
) -> None:
    """Workers sharing a Redis frontier share the learned routes (a set beside its keys)."""
    env = scrapy_env(tmp_path, PRICEWATCH_FRONTIER_URL=redis_frontier_url)
    js_host = sandbox.js_shops[0]["host"]
    urls = sandbox.urls(host=js_host)[15:17]
    seed(env, urls)
    stats = crawl(tmp_path, env, *ONE_AT_A_TIME)
    assert stats["pricewatch/outcome/ok"] == len(urls)
    assert stats["pricewatch/browser/learned"] == 1
    assert stats["pricewatch/browser/routed/retry"] == 1
    assert stats["pricewatch/browser/routed/learned"] == 1
    namespace = redis_frontier_url.rsplit("namespace=", 1)[1]
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        members = client.smembers(f"pricewatch:{{{namespace}}}:browser_domains")
    finally:
        client.close()
    assert members == {js_host}


def test_pages_are_closed_on_timeouts_and_on_errors(tmp_path: Path, sandbox_factory: Any) -> None:
    """One shop never renders a price (its script waits 60 s) and is not declared: its first
    static miss is retried in the browser, the wait times out, the SKU ends as no_price and
    (one try allowed) the domain is not retried again. The other, declared, drops every
    connection: the navigation fails, the SKU ends as error in the errback. Every page
    opened is closed either way."""
    shop = sandbox_factory(
        shops=0, js_shops=2, products=3, js_delay=60, js_weight="light", mode=["127.0.0.3=drop"]
    )
    silent, dropping = (s["host"] for s in shop.js_shops)
    assert dropping == "127.0.0.3"
    env = scrapy_env(tmp_path)
    silent_urls = shop.urls(host=silent)[:2]
    dropped_urls = shop.urls(host=dropping)[:1]
    seed(env, silent_urls + dropped_urls)
    started = time.monotonic()
    stats = crawl(
        tmp_path,
        env,
        *ONE_AT_A_TIME,
        f"PRICEWATCH_JS_DOMAINS={dropping}",
        "PRICEWATCH_BROWSER_LEARN_TRIES=1",
        "PRICEWATCH_BROWSER_WAIT_TIMEOUT=1.5",
        "PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT=5000",
    )
    assert time.monotonic() - started < 60
    assert stats["pricewatch/outcome/no_price"] == len(silent_urls)
    assert stats["pricewatch/outcome/error"] == len(dropped_urls)
    assert "pricewatch/outcome/ok" not in stats
    assert stats["pricewatch/browser/routed/retry"] == 1
    assert stats["pricewatch/browser/wait_timeout"] == 1
    assert stats["pricewatch/browser/no_price"] == 1
    assert stats["pricewatch/browser/learn_gave_up"] == 1
    assert "pricewatch/browser/learned" not in stats
    assert stats["pricewatch/browser/failed"] == len(dropped_urls)
    opened = stats["playwright/page_count"]
    assert opened >= 1 + len(dropped_urls)
    assert (
        stats["pricewatch/browser/pages_closed"] + stats.get("playwright/page_count/closed", 0)
        == opened
    )
    assert not [p for p in paths(shop, silent) if p.startswith("/api/offer/")]
    assert stored(tmp_path) == {}


def test_js_pages_with_recommendations_store_the_products_own_price(
    tmp_path: Path, sandbox_factory: Any
) -> None:
    """A JS-only shop whose pages carry a "Customers also bought" block with other
    products' prices in the static HTML, while the product's own offer arrives by XHR a
    moment later; no XHR pattern configured. Every stored price is the product's own; a
    price-on-request page, whose own JSON has no valid price, ends as no_price at once
    (no wait for a price that never comes), never with a recommendation's price."""
    shop = sandbox_factory(
        seed=7,
        shops=0,
        js_shops=1,
        products=8,
        js_weight="light",
        recommendations="mixed",
        cases=True,
    )
    js_host = shop.js_shops[0]["host"]
    truth = shop.truth()
    allowed = set(shop.urls(host=js_host))
    ordinary = [u for u in allowed if not truth[u].get("case")]
    on_request = [u for u in allowed if truth[u].get("expect") == "no_price"]
    priced = [u for u in allowed if truth[u].get("case") and truth[u]["price"] is not None]
    assert len(ordinary) >= 6 and len(on_request) == 7 and len(priced) >= 8
    urls = sorted(ordinary + on_request + priced)
    env = scrapy_env(tmp_path)
    seed(env, urls)
    stats = crawl(tmp_path, env, f"PRICEWATCH_JS_DOMAINS={js_host}")
    assert stats["pricewatch/outcome/ok"] == len(ordinary) + len(priced)
    assert stats["pricewatch/outcome/no_price"] == len(on_request)
    assert stats["pricewatch/browser/offer/xhr"] == len(ordinary) + len(priced)
    assert stats["pricewatch/browser/xhr_no_price"] == len(on_request)
    assert "pricewatch/browser/wait_timeout" not in stats
    rows = stored(tmp_path)
    assert_matches_truth(rows, truth, ordinary + priced, full=False)
    assert not set(on_request) & set(rows)


def test_dom_wait_reads_only_the_products_region(tmp_path: Path, sandbox_factory: Any) -> None:
    """DOM only (an empty XHR pattern list): the recommendations' prices are in the static
    HTML from the start, the product's own price shows a moment later; the wait ends on
    the product's price, never on theirs."""
    shop = sandbox_factory(
        seed=8, shops=0, js_shops=1, products=8, js_weight="light", recommendations="mixed"
    )
    js_host = shop.js_shops[0]["host"]
    urls = shop.urls(host=js_host)
    env = scrapy_env(tmp_path)
    seed(env, urls)
    stats = crawl(
        tmp_path,
        env,
        f"PRICEWATCH_JS_DOMAINS={js_host}",
        f'PRICEWATCH_BROWSER_XHR_PATTERNS={{"{js_host}": []}}',
    )
    assert stats["pricewatch/outcome/ok"] == len(urls)
    assert stats["pricewatch/browser/offer/dom"] == len(urls)
    assert "pricewatch/browser/wait_timeout" not in stats
    assert_matches_truth(stored(tmp_path), shop.truth(), urls, full=False)


class _Counting(BaseHTTPRequestHandler):
    """A product page that loads a script and calls an API on another address
    (``self.server.other``); every path served is counted in ``self.server.hits``."""

    def do_GET(self) -> None:
        self.server.hits[self.path] += 1  # type: ignore[attr-defined]
        other = self.server.other  # type: ignore[attr-defined]
        if self.path.startswith("/p/"):
            body = (
                "<html><head><script type='application/ld+json'>"
                '{"@type": "Product", "name": "Kettle", "sku": "K1", "offers": {"@type": '
                '"Offer", "price": "24.90", "priceCurrency": "EUR", "availability": '
                '"https://schema.org/InStock"}}</script>'
                f"<script src='{other}/probe.js'></script></head><body><h1>Kettle</h1>"
                "<p class='price'>24,90 €</p>"
                f"<script>fetch('{other}/api/probe').catch(() => null)</script></body></html>"
            ).encode()
            content_type = "text/html"
        elif self.path == "/robots.txt":
            body, content_type = b"", "text/plain"
        else:
            body, content_type = b"/* probe */", "application/javascript"
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(address: str, other: str = "") -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((address, 0), _Counting)
    server.hits = Counter()  # type: ignore[attr-defined]
    server.other = other  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize(
    ("allowed", "probed"),
    [
        pytest.param("127.0.0.1/32", False, id="other-address-refused"),
        pytest.param("127.0.0.0/8", True, id="other-address-allowed"),
    ],
)
def test_browser_subrequests_go_only_where_the_crawl_may(
    tmp_path: Path, allowed: str, probed: bool
) -> None:
    # The page (127.0.0.1) makes the browser load a script from, and call an API on,
    # 127.0.0.2: outside PRICEWATCH_ALLOWED_NETWORKS nothing reaches it, the page's
    # own price is still read; allowed, both requests arrive (the test can fail).
    probe = _serve("127.0.0.2")
    shop = _serve("127.0.0.1", other=f"http://127.0.0.2:{probe.server_address[1]}")
    try:
        env = scrapy_env(tmp_path, PRICEWATCH_ALLOWED_NETWORKS=allowed)
        url = f"http://127.0.0.1:{shop.server_address[1]}/p/1"
        seed(env, [url])
        stats = crawl(tmp_path, env, "PRICEWATCH_JS_DOMAINS=127.0.0.1")
        assert stats["pricewatch/outcome/ok"] == 1
        assert stored(tmp_path)[url][:2] == ("24.90", "EUR")
        hits = dict(probe.hits)  # type: ignore[attr-defined]
        if probed:
            assert hits.get("/probe.js") == 1 and hits.get("/api/probe") == 1, hits
        else:
            assert hits == {}
            assert "Browser request refused: 127.0.0.2 is 127.0.0.2 (loopback)" in stats["_log"]
            assert stats["playwright/request_count/aborted"] >= 2
    finally:
        for server in (shop, probe):
            server.shutdown()
            server.server_close()
