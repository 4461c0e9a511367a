"""The sandbox storefront: content, ground truth, stats, control, fault modes, CLI."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import urllib.robotparser
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from decimal import Decimal
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from lxml import html as lxml_html

from pricewatch.sandbox import BackgroundSandbox, ModeError, Sandbox
from pricewatch.sandbox._catalog import MARKUPS
from pricewatch.sandbox._locale import LOCALES
from pricewatch.sandbox.cli import parse_mode
from tests.fixtures.sandbox import ROOT, SandboxProcess

LD_XPATH = '//script[@type="application/ld+json"]/text()'


def get(url: str, timeout: float = 10) -> tuple[int, dict[str, str], str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


@asynccontextmanager
async def running(**options: Any) -> AsyncIterator[tuple[Sandbox, aiohttp.ClientSession]]:
    """An in-process sandbox and a client session (no keep-alive: each request is fresh)."""
    sandbox = Sandbox(**options)
    await sandbox.start()
    try:
        connector = aiohttp.TCPConnector(force_close=True, limit=0)
        async with aiohttp.ClientSession(connector=connector) as client:
            yield sandbox, client
    finally:
        await sandbox.stop()


def strip_base(truth: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Truth keyed by host + path (ports differ between two sandboxes on port 0)."""
    out = {}
    for url, rec in truth.items():
        parts = urlsplit(url)
        out[f"{parts.hostname}{parts.path}"] = {k: v for k, v in rec.items() if k != "api_url"}
    return out


def by_markup(truth: dict[str, dict[str, Any]], markup: str) -> list[tuple[str, dict[str, Any]]]:
    return [(u, r) for u, r in truth.items() if r["markup"] == markup and not r["disallowed"]]


# --- shops, determinism -------------------------------------------------------------------------


def test_session_sandbox_announces_one_host_per_shop(sandbox: SandboxProcess) -> None:
    hosts = [s["host"] for s in sandbox.shops]
    assert hosts == ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"]
    assert [s["currency"] for s in sandbox.shops] == ["EUR", "USD", "CHF", "JPY", "BRL"]
    assert [s["js"] for s in sandbox.shops] == [False, False, False, False, True]
    for shop in sandbox.shops:
        parts = urlsplit(shop["base_url"])
        assert parts.hostname == shop["host"] and parts.port
    truth = sandbox.truth()
    assert len(truth) == 5 * 50
    assert {urlsplit(u).hostname for u in truth} == set(hosts)


async def test_same_seed_same_truth_other_seed_other_truth() -> None:
    async with running(seed=7, shops=3, products=20) as (a, _):
        async with running(seed=7, shops=3, products=20) as (b, _):
            assert a.shops != b.shops  # other ports...
            assert strip_base(a.truth()) == strip_base(b.truth())  # ...same catalogue
        async with running(seed=8, shops=3, products=20) as (c, _):
            other = strip_base(c.truth())
    same = strip_base(a.truth())
    assert same.keys() != other.keys()
    assert [r["price"] for r in same.values()] != [r["price"] for r in other.values()]


def test_truth_records_are_complete_and_consistent(sandbox: SandboxProcess) -> None:
    truth = sandbox.truth()
    currencies = {s["host"]: s["currency"] for s in sandbox.shops}
    states: Counter[tuple[str, bool]] = Counter()
    for url, rec in truth.items():
        assert set(rec) >= {
            "sku",
            "name",
            "price",
            "currency",
            "regular_price",
            "availability",
            "markup",
            "disallowed",
        }
        assert rec["currency"] == currencies[urlsplit(url).hostname]
        price = Decimal(rec["price"])
        assert price > 0
        if rec["currency"] == "JPY":
            assert "." not in rec["price"]
        else:
            assert price == price.quantize(Decimal("0.01")) and "." in rec["price"]
        if rec["regular_price"] is not None:
            assert Decimal(rec["regular_price"]) > price
        assert rec["availability"] in ("InStock", "OutOfStock")
        assert rec["disallowed"] == ("/private/" in url)
        states[(rec["availability"], rec["regular_price"] is not None)] += 1
    assert len(states) == 4  # in/out of stock, with/without a list price all occur
    assert len({r["sku"] for r in truth.values()}) == len(truth)


# --- content ------------------------------------------------------------------------------------


def _ld_objects(tree: Any) -> list[dict[str, Any]]:
    return [json.loads(text) for text in tree.xpath(LD_XPATH)]


def _ld_products(tree: Any) -> list[dict[str, Any]]:
    found = []
    for obj in _ld_objects(tree):
        for node in obj.get("@graph", [obj]):
            if node.get("@type") == "Product":
                found.append(node)
    return found


def test_every_markup_present_and_carrying_the_truth(sandbox: SandboxProcess) -> None:
    truth = sandbox.truth()
    html_truth = {u: r for u, r in truth.items() if not r["js"]}
    assert {r["markup"] for r in html_truth.values()} == set(MARKUPS)
    for markup in MARKUPS:
        for url, rec in by_markup(html_truth, markup)[:3]:
            status, _, body = get(url)
            assert status == 200
            assert 20_000 <= len(body.encode()) <= 50_000, (url, len(body))
            tree = lxml_html.fromstring(body)
            products = _ld_products(tree)
            # The product's own microdata; recommendations may carry their own, outside <main>.
            (main,) = tree.xpath("//main")
            itemprop_price = main.xpath('.//*[@itemprop="price"]/@content')
            og_amount = tree.xpath('//meta[@property="product:price:amount"]/@content')
            og_currency = tree.xpath('//meta[@property="product:price:currency"]/@content')
            if markup in ("jsonld", "jsonld_graph"):
                (product,) = products
                offer = product["offers"]
                assert offer["@type"] == "Offer"
                assert offer["price"] == rec["price"]
                assert offer["priceCurrency"] == rec["currency"]
                assert offer["availability"] == "https://schema.org/" + rec["availability"]
                assert product["sku"] == rec["sku"]
                if markup == "jsonld_graph":
                    (graph,) = [o for o in _ld_objects(tree) if "@graph" in o]
                    assert len(graph["@graph"]) > 1
                if rec["regular_price"]:
                    (spec,) = offer["priceSpecification"]
                    assert spec["price"] == rec["regular_price"]
            elif markup == "jsonld_aggregate":
                (product,) = products
                offers = product["offers"]
                assert offers["@type"] == "AggregateOffer"
                assert offers["lowPrice"] == rec["price"]
                assert Decimal(offers["highPrice"]) > Decimal(rec["price"])
            else:
                assert products == []
            if markup == "microdata":
                assert itemprop_price == [rec["price"]]
                assert main.xpath('.//*[@itemprop="priceCurrency"]/@content') == [rec["currency"]]
                assert main.xpath('.//*[@itemprop="availability"]/@href') == [
                    "https://schema.org/" + rec["availability"]
                ]
            else:
                assert itemprop_price == []
            if markup == "opengraph":
                assert (og_amount, og_currency) == ([rec["price"]], [rec["currency"]])
            else:
                assert og_amount == []
            if markup == "visible":
                assert "product:price" not in body
                assert "itemprop" not in lxml_html.tostring(main, encoding="unicode")
            # The visible price sits in the buy box of every page, struck list price beside it.
            (current,) = tree.xpath('//div[@class="buybox"]//*[contains(@class,"price--current")]')
            was = tree.xpath('//div[@class="buybox"]//*[contains(@class,"price--was")]')
            assert current.text_content() in body
            if rec["regular_price"] is None:
                assert was == []
            else:
                (struck,) = was
                assert struck.tag in ("del", "s")
    # Visible-only pages mostly show a struck-through list price.
    visible = by_markup(html_truth, "visible")
    assert sum(r["regular_price"] is not None for _, r in visible) > len(visible) / 2


@pytest.mark.parametrize(
    ("currency", "amount", "text"),
    [
        ("EUR", "1299.00", "1.299,00 €"),
        ("USD", "1299.99", "$1,299.99"),
        ("CHF", "1234.50", "CHF 1'234.50"),
        ("JPY", "1299", "¥1,299"),
        ("BRL", "1234.56", "R$ 1.234,56"),
        ("GBP", "12.99", "£12.99"),
        ("EUR", "5.90", "5,90 €"),
        ("USD", "1234567.5", "$1,234,567.50"),
    ],
    ids=lambda v: str(v),
)
def test_locale_display_formats(currency: str, amount: str, text: str) -> None:
    (loc,) = [loc for loc in LOCALES if loc.currency == currency]
    assert loc.display(Decimal(amount)) == text


async def test_pages_show_localised_prices_of_all_six_currencies() -> None:
    patterns = {
        "EUR": r"^\d{1,3}(\.\d{3})*,\d\d €$",
        "USD": r"^\$\d{1,3}(,\d{3})*\.\d\d$",
        "CHF": r"^CHF \d{1,3}('\d{3})*\.\d\d$",
        "JPY": r"^¥\d{1,3}(,\d{3})*$",
        "BRL": r"^R\$ \d{1,3}(\.\d{3})*,\d\d$",
        "GBP": r"^£\d{1,3}(,\d{3})*\.\d\d$",
    }
    async with running(shops=6, products=12) as (sb, client):
        truth = sb.truth()
        seen_thousands = set()
        for url, rec in truth.items():
            if rec["disallowed"]:
                continue
            async with client.get(url) as resp:
                body = await resp.text()
            tree = lxml_html.fromstring(body)
            (current,) = tree.xpath('//div[@class="buybox"]//*[contains(@class,"price--current")]')
            text = current.text_content()
            assert re.match(patterns[rec["currency"]], text), (rec["currency"], text)
            digits = re.sub(r"\D", "", text)
            assert Decimal(digits) == Decimal(rec["price"].replace(".", ""))
            if Decimal(rec["price"]) >= 1000:
                seen_thousands.add(rec["currency"])
        assert seen_thousands == set(patterns)


def test_robots_txt_disallows_private_products(sandbox: SandboxProcess) -> None:
    truth = sandbox.truth()
    for shop in sandbox.shops:
        status, _, body = get(shop["base_url"] + "/robots.txt")
        assert status == 200 and "Disallow: /private/" in body
        parser = urllib.robotparser.RobotFileParser()
        parser.parse(body.splitlines())
        mine = {u: r for u, r in truth.items() if u.startswith(shop["base_url"] + "/")}
        assert any(r["disallowed"] for r in mine.values())
        for url, rec in mine.items():
            assert parser.can_fetch("pricewatch", url) is not rec["disallowed"]
    fetchable = sandbox.urls()
    everything = sandbox.urls(all=True)
    assert set(fetchable) == {u for u, r in truth.items() if not r["disallowed"]}
    assert set(everything) == set(truth)
    assert len(fetchable) == len(set(fetchable))
    assert sandbox.urls(js=False) == [u for u in fetchable if not truth[u]["js"]]
    one = sandbox.shops[1]
    assert all(u.startswith(one["base_url"]) for u in sandbox.urls(host=one["host"]))


def test_listing_pages_link_every_product_of_the_shop(sandbox: SandboxProcess) -> None:
    truth = sandbox.truth()
    for shop in sandbox.html_shops:
        base = shop["base_url"]
        url: str | None = base + "/products?page=1"
        linked: list[str] = []
        pages = 0
        while url:
            status, _, body = get(url)
            assert status == 200
            tree = lxml_html.fromstring(body)
            linked += [base + h for h in tree.xpath('//ul[@class="grid"]//a/@href')]
            nxt = tree.xpath('//a[@rel="next"]/@href')
            url = base + nxt[0] if nxt else None
            pages += 1
        assert pages == 3  # 50 products, 24 per page
        assert sorted(linked) == sorted(u for u in truth if u.startswith(base + "/"))
        assert get(base + f"/products?page={pages + 1}")[0] == 404
        assert get(base + "/products?page=x")[0] == 404


def test_official_api_answers_json_offers(sandbox: SandboxProcess) -> None:
    truth = sandbox.truth()
    for rec in list(truth.values())[::37]:
        status, headers, body = get(rec["api_url"])
        assert status == 200 and headers["Content-Type"].startswith("application/json")
        data = json.loads(body)
        assert data["sku"] == rec["sku"]
        assert data["price"] == {"amount": rec["price"], "currency": rec["currency"]}
        assert data["availability"] == rec["availability"]
    assert get(sandbox.base_url + "/api/products/NOPE-1")[0] == 404


# --- stats --------------------------------------------------------------------------------------


async def test_stats_count_concurrent_requests_in_flight() -> None:
    async with running(shops=2, products=6) as (sb, client):
        host, other = sb.shops[0]["host"], sb.shops[1]["host"]
        sb.control({"host": host, "mode": "slow", "delay": 0.5})
        url = sb.urls(host=host)[0]

        async def fetch() -> int:
            async with client.get(url) as resp:
                await resp.read()
                return resp.status

        tasks = [asyncio.ensure_future(fetch()) for _ in range(20)]
        await asyncio.sleep(0.25)
        during = sb.stats()["hosts"][host]
        assert during["in_flight"] == 20
        assert await asyncio.gather(*tasks) == [200] * 20
        after = sb.stats()["hosts"][host]
        assert after["in_flight"] == 0
        assert after["max_in_flight"] == 20
        assert after["requests"] == 20
        assert after["status"] == {"200": 20}
        assert after["paths"] == {urlsplit(url).path: 20}
        # Per client address: this test's, which sent no cookie.
        path = urlsplit(url).path
        assert after["sources"] == {
            "127.0.0.1": {"requests": 20, "cookies": {}, "cookieless": {path: 20}}
        }
        assert sb.stats()["hosts"][other]["requests"] == 0
        # Control paths are not counted; a reset zeroes the counters.
        async with client.get(sb.shops[0]["base_url"] + "/_truth") as resp:
            assert resp.status == 200
        assert sb.stats()["hosts"][host]["requests"] == 20
        sb.reset_stats()
        assert sb.stats()["hosts"][host] == {
            "requests": 0,
            "in_flight": 0,
            "max_in_flight": 0,
            "status": {},
            "paths": {},
            "first": None,
            "last": None,
            "min_gap": None,
            "sources": {},
        }
        # A Cookie header is counted as it came; a request without one, by its path.
        for headers in ({"Cookie": "member=a1"}, {}):
            async with client.get(url, headers=headers) as resp:
                assert resp.status == 200
        assert sb.stats()["hosts"][host]["sources"] == {
            "127.0.0.1": {"requests": 2, "cookies": {"member=a1": 1}, "cookieless": {path: 1}}
        }


def test_stats_over_http_cover_all_hosts(sandbox: SandboxProcess) -> None:
    sandbox.reset_stats()
    a, b = sandbox.shops[0], sandbox.shops[2]
    get(a["base_url"] + "/robots.txt")
    get(b["base_url"] + "/products?page=2")
    get(b["base_url"] + "/nope")
    stats = sandbox.stats()["hosts"]  # asked on shop 0's host, covers all hosts
    assert set(stats) == {s["host"] for s in sandbox.shops}
    assert stats[a["host"]]["paths"] == {"/robots.txt": 1}
    assert stats[b["host"]]["paths"] == {"/products": 1, "/nope": 1}
    assert stats[b["host"]]["status"] == {"200": 1, "404": 1}
    assert stats[b["host"]]["min_gap"] is not None
    _, _, body = get(b["base_url"] + "/_stats")
    assert json.loads(body)["hosts"][a["host"]]["requests"] == 1


# --- control: reprice ---------------------------------------------------------------------------


async def test_reprice_changes_about_that_share_deterministically() -> None:
    async with running(seed=5, shops=2, products=50) as (a, client):
        async with running(seed=5, shops=2, products=50) as (b, _):
            before = a.truth()
            changed = a.control({"reprice": 0.3})["repriced"]
            other = b.control({"reprice": 0.3})["repriced"]
            assert [urlsplit(u).path for u in changed] == [urlsplit(u).path for u in other]
        assert 15 <= len(changed) <= 45  # ~30% of 100
        after = a.truth()
        for url in before:
            moved = before[url]["price"] != after[url]["price"]
            assert moved is (url in changed)
            if after[url]["regular_price"] is not None:
                assert Decimal(after[url]["regular_price"]) > Decimal(after[url]["price"])
        # Pages show the new price.
        url = next(u for u in changed if not after[u]["disallowed"])
        loc = next(loc for loc in LOCALES if loc.currency == after[url]["currency"])
        async with client.get(url) as resp:
            body = await resp.text()
        assert loc.display(Decimal(after[url]["price"])) in body
        # Prices are stable until asked; a reset brings the seed's catalogue back.
        assert a.truth() == after
        a.control({"reset": True})
        assert a.truth() == before


def test_control_over_http_rejects_bad_requests(sandbox: SandboxProcess) -> None:
    for body in (
        {"reprice": 2},
        {"mode": "teleport"},
        {"host": "10.0.0.1", "mode": "slow"},
        {"mode": "slow", "delay": "long"},
        {"rate": 3},
        {"mode": "ratelimit", "bogus": 1},
    ):
        with pytest.raises(RuntimeError, match="answered 400"):
            sandbox.control(**body)
    assert all(modes == [] for modes in sandbox.control()["modes"].values())


# --- CLI, lifecycle -----------------------------------------------------------------------------


def test_parse_mode_flag() -> None:
    assert parse_mode("127.0.0.3=ratelimit:rate=5,retry_after=2") == {
        "host": "127.0.0.3",
        "mode": "ratelimit",
        "rate": 5,
        "retry_after": 2,
    }
    assert parse_mode("challenge") == {"mode": "challenge"}
    assert parse_mode("ratelimit:retry_after_format=date") == {
        "mode": "ratelimit",
        "retry_after_format": "date",
    }


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_cli_shuts_down_cleanly(sig: signal.Signals) -> None:
    proc = SandboxProcess(["--shops", "2", "--products", "3", "--port", "0"])
    try:
        assert len(proc.shops) == 2
        assert get(proc.base_url + "/robots.txt")[0] == 200
        proc.proc.send_signal(sig)
        proc.proc.wait(timeout=10)
    finally:
        code = proc.stop()
    assert code == 0
    assert proc.last_stderr == ""
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(proc.base_url + "/robots.txt", timeout=2)


def test_cli_shuts_down_promptly_with_requests_in_flight() -> None:
    delay = 30  # what a shutdown that waited for the requests in flight would take
    proc = SandboxProcess(["--shops", "3", "--products", "3", "--mode", f"slow:delay={delay}"])
    results: list[BaseException | int] = []

    def fetch(url: str) -> None:
        try:
            with urllib.request.urlopen(url, timeout=20) as resp:
                results.append(resp.status)
        except Exception as exc:  # the connection is closed on shutdown
            results.append(exc)

    threads = [threading.Thread(target=fetch, args=(u + "/",)) for u in proc.base_urls]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 5
        while sum(h["in_flight"] for h in proc.stats()["hosts"].values()) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        started = time.monotonic()
        code = proc.stop()
        # Well under the delay, with room for a loaded machine (3 s were exceeded once).
        assert time.monotonic() - started < delay / 3
    finally:
        proc.stop()
        for t in threads:
            t.join(timeout=20)
    assert code == 0
    assert len(results) == 3 and all(isinstance(r, Exception) for r in results)


def test_cli_rejects_bad_flags_naming_them() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pricewatch.sandbox", "--mode", "127.0.0.2=slow:delay=-1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "slow.delay must be >= 0.0, got -1" in result.stderr
    assert result.stdout == ""


def test_scrapy_sandbox_command(tmp_path: Any) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "scrapy.cmdline", "sandbox", "--shops", "1", "--products", "2"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        (shop,) = json.loads(line)["shops"]
        assert get(shop["base_url"] + "/_truth")[0] == 200
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err


def test_background_sandbox_from_sync_code() -> None:
    with BackgroundSandbox(shops=1, products=4, port=0) as sb:
        (shop,) = sb.shops
        url = sb.urls()[0]
        assert get(url)[0] == 200
        assert sb.stats()["hosts"][shop["host"]]["requests"] == 1
        before = sb.truth()[url]["price"]
        assert sb.control(reprice=1.0)["repriced"] == sb.urls(all=True)
        assert sb.truth()[url]["price"] != before
    started = time.monotonic()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=2)
    assert time.monotonic() - started < 2


async def test_page_kb_pads_product_pages_with_reviews_and_keeps_the_offer() -> None:
    # Benchmarks weigh pages like shops' (~50 KB): more reviews, the same offer and markup.
    async with running(seed=5, shops=1, products=12) as (light, client):
        async with running(seed=5, shops=1, products=12, page_kb=50) as (heavy, _):
            assert strip_base(light.truth()) == strip_base(heavy.truth())
            for url, rec in heavy.truth().items():
                if rec["js"]:
                    continue
                path = urlsplit(url).path
                async with client.get(url) as resp:
                    body = await resp.read()
                async with client.get(light.shops[0]["base_url"] + path) as resp:
                    plain = await resp.read()
                assert 48 * 1024 <= len(body) <= 60 * 1024, (url, len(body))
                assert len(plain) < len(body)
                tree = lxml_html.fromstring(body)
                assert len(tree.xpath("//li[@class='review']")) > len(
                    lxml_html.fromstring(plain).xpath("//li[@class='review']")
                )
                # The offer the page carries is the one the light page carries.
                base, light_base = heavy.shops[0]["base_url"], light.shops[0]["base_url"]
                heavy_ld = [t.replace(base, light_base) for t in tree.xpath(LD_XPATH)]
                assert heavy_ld == lxml_html.fromstring(plain).xpath(LD_XPATH)
                assert rec["price"]


def test_constructor_rejects_bad_options() -> None:
    with pytest.raises(ValueError, match="latency"):
        Sandbox(latency="900-300")
    with pytest.raises(ValueError, match="products must be >= 1, got 0"):
        Sandbox(products=0)
    with pytest.raises(ValueError, match="page_kb must be 0-4096, got -1"):
        Sandbox(page_kb=-1)
    with pytest.raises(ValueError, match="host_base must be an IPv4 address, got '127.0.0.x'"):
        Sandbox(host_base="127.0.0.x")
    with pytest.raises(ValueError, match="127.0.0.0/8, got '10.0.0.2'"):
        Sandbox(host_base="10.0.0.2")
    with pytest.raises(ModeError, match="burst503.period"):
        Sandbox(modes=[{"mode": "burst503", "period": 0}])


# --- fault and politeness modes -----------------------------------------------------------------


async def _statuses(client: aiohttp.ClientSession, urls: list[str]) -> list[int]:
    out = []
    for url in urls:
        async with client.get(url) as resp:
            await resp.read()
            out.append(resp.status)
    return out


async def test_ratelimit_answers_429_with_retry_after_above_the_rate() -> None:
    async with running(shops=2, products=6) as (sb, client):
        host = sb.shops[0]["host"]
        base = sb.shops[0]["base_url"]
        url = sb.urls(host=host)[0]
        sb.control({"host": host, "mode": "ratelimit", "rate": 2, "retry_after": 3})
        assert await _statuses(client, [url] * 5) == [200, 200, 429, 429, 429]
        async with client.get(url) as resp:
            assert resp.status == 429 and resp.headers["Retry-After"] == "3"
        # robots.txt, the official API and the other shop are not limited.
        sku = sb.truth()[url]["sku"]
        other = sb.urls(host=sb.shops[1]["host"])[0]
        exempt = [base + "/robots.txt", base + f"/api/products/{sku}", other, other, other]
        assert await _statuses(client, exempt) == [200] * 5
        await asyncio.sleep(1.05)  # the window slides: allowed again
        assert await _statuses(client, [url]) == [200]
        assert sb.stats()["hosts"][host]["status"]["429"] == 4


async def test_ratelimit_storm_with_http_date_for_a_duration() -> None:
    async with running(shops=1, products=6) as (sb, client):
        url = sb.urls()[0]
        sb.control({"mode": "ratelimit", "rate": 0, "retry_after": 5, "retry_after_format": "date",
                    "duration": 0.4})  # fmt: skip
        async with client.get(url) as resp:
            assert resp.status == 429
            when = parsedate_to_datetime(resp.headers["Retry-After"])
        ahead = (when - datetime.now(UTC)).total_seconds()
        assert 4 <= ahead <= 7
        await asyncio.sleep(0.45)
        assert await _statuses(client, [url]) == [200]
        assert sb.control({})["modes"] == {sb.shops[0]["host"]: []}


async def test_burst503_pattern_and_switching_modes_off() -> None:
    async with running(shops=1, products=6) as (sb, client):
        host, url = sb.shops[0]["host"], sb.urls()[0]
        sb.control({"host": host, "mode": "burst503", "burst": 2, "period": 4, "retry_after": 1})
        assert await _statuses(client, [url] * 8) == [503, 503, 200, 200] * 2
        async with client.get(url) as resp:
            assert resp.status == 503 and resp.headers["Retry-After"] == "1"
        sb.control({"host": host, "mode": None})
        assert await _statuses(client, [url] * 3) == [200] * 3


async def test_challenge_serves_a_captcha_wall_with_200() -> None:
    async with running(shops=2, products=12) as (sb, client):
        host = sb.shops[0]["host"]
        urls = sb.urls(host=host)
        sb.control({"host": host, "mode": "challenge"})
        async with client.get(urls[0]) as resp:
            assert resp.status == 200
            body = await resp.text()
        tree = lxml_html.fromstring(body)
        assert tree.findtext(".//title").startswith("Attention Required")
        assert "verify you are human" in body.lower()
        assert tree.xpath('//form[@id="challenge-form"]') and "captcha" in body
        assert tree.xpath(LD_XPATH) == [] and "itemprop" not in body
        async with client.get(sb.urls(host=sb.shops[1]["host"])[0]) as resp:
            assert "verify you are human" not in (await resp.text()).lower()
        # A fraction of the pages, or another status.
        sb.control({"host": host, "mode": "challenge", "fraction": 0.5, "status": 403})
        walls = 0
        for url in urls * 2:
            async with client.get(url) as resp:
                text = await resp.text()
                assert resp.status == (403 if "verify you are human" in text.lower() else 200)
                walls += resp.status == 403
        assert 0 < walls < len(urls) * 2


async def test_drop_closes_the_connection_without_a_response() -> None:
    async with running(shops=2, products=6) as (sb, client):
        host = sb.shops[0]["host"]
        sb.control({"host": host, "mode": "drop"})
        with pytest.raises((aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)):
            async with client.get(sb.urls(host=host)[0]) as resp:
                await resp.read()
        assert await _statuses(client, [sb.urls(host=sb.shops[1]["host"])[0]]) == [200]
        stats = sb.stats()["hosts"][host]
        # (aiohttp retries a GET once on a dropped connection: 1 or 2 requests)
        assert stats["status"] == {"dropped": stats["requests"]} and stats["in_flight"] == 0
        assert stats["requests"] >= 1


async def test_slow_delays_only_its_host() -> None:
    async with running(shops=2, products=6) as (sb, client):
        host = sb.shops[0]["host"]
        sb.control({"host": host, "mode": "slow", "delay": 0.4})
        started = time.monotonic()
        assert await _statuses(client, [sb.urls(host=host)[0]]) == [200]
        assert time.monotonic() - started >= 0.4
        started = time.monotonic()
        assert await _statuses(client, [sb.urls(host=sb.shops[1]["host"])[0]]) == [200]
        assert time.monotonic() - started < 0.3


async def test_hold_keeps_pages_waiting_until_switched_off() -> None:
    async with running(shops=2, products=6) as (sb, client):
        host, other = (s["host"] for s in sb.shops)
        sb.control({"host": host, "mode": "hold"})
        held = asyncio.ensure_future(_statuses(client, sb.urls(host=host)[:1]))
        deadline = time.monotonic() + 30
        while sb.control({})["modes"][host][0]["held"] < 1:
            assert time.monotonic() < deadline, "the request never reached the sandbox"
            await asyncio.sleep(0.01)
        assert not held.done()
        async with client.get(sb.shops[0]["base_url"] + "/robots.txt") as resp:
            assert resp.status == 200  # never held
        assert await _statuses(client, sb.urls(host=other)[:1]) == [200]
        assert sb.stats()["hosts"][host]["in_flight"] == 1
        sb.control({"host": host, "clear": "hold"})
        assert await asyncio.wait_for(held, 30) == [200]
        assert await _statuses(client, sb.urls(host=host)[1:2]) == [200]
        # A duration ends the hold by itself; a sandbox stopping answers what it holds.
        sb.control({"host": host, "mode": "hold", "duration": 0.3})
        assert await asyncio.wait_for(_statuses(client, sb.urls(host=host)[2:3]), 30) == [200]
        sb.control({"host": host, "mode": "hold"})
        held = asyncio.ensure_future(_statuses(client, sb.urls(host=host)[3:4]))
        while sb.control({})["modes"][host][0]["held"] < 1:
            assert time.monotonic() < deadline, "the request never reached the sandbox"
            await asyncio.sleep(0.01)
        await asyncio.wait_for(sb.stop(), 30)
        assert await asyncio.wait_for(held, 30) == [200]


async def test_gone_answers_404_or_410_as_the_truth_says() -> None:
    async with running(shops=1, products=40) as (sb, client):
        sb.control({"mode": "gone", "fraction": 0.5})
        truth = sb.truth()
        expected = {u: r["gone"] or 200 for u, r in truth.items() if not r["disallowed"]}
        actual = dict(zip(expected, await _statuses(client, list(expected)), strict=True))
        assert actual == expected
        assert set(actual.values()) == {200, 404, 410}
        # The official API still answers for gone products.
        gone_url = next(u for u, s in actual.items() if s != 200)
        assert await _statuses(client, [truth[gone_url]["api_url"]]) == [200]
        sb.control({"clear": "gone"})
        assert all(r["gone"] is None for r in sb.truth().values())


async def test_latency_is_added_to_shop_paths_not_control_paths() -> None:
    async with running(shops=1, products=6, latency="150-200") as (sb, client):
        base = sb.shops[0]["base_url"]
        started = time.monotonic()
        assert await _statuses(client, [base + "/robots.txt"]) == [200]
        assert 0.15 <= time.monotonic() - started < 0.5
        started = time.monotonic()
        assert await _statuses(client, [base + "/_stats"]) == [200]
        assert time.monotonic() - started < 0.1
        sb.control({"latency": None})
        started = time.monotonic()
        assert await _statuses(client, [base + "/robots.txt"]) == [200]
        assert time.monotonic() - started < 0.1


def test_modes_from_cli_flags(sandbox_factory: Any) -> None:
    sb = sandbox_factory(
        shops=2, products=6, mode=["127.0.0.2=ratelimit:rate=0,retry_after=7", "slow:delay=0.2"]
    )
    first, second = sb.urls(host="127.0.0.2")[0], sb.urls(host="127.0.0.3")[0]
    status, headers, _ = get(first)
    assert (status, headers["Retry-After"]) == (429, "7")
    started = time.monotonic()
    assert get(second)[0] == 200
    assert time.monotonic() - started >= 0.2
    modes = json.loads(get(sb.base_url + "/_control")[2])["modes"]
    assert [m["mode"] for m in modes["127.0.0.2"]] == ["slow", "ratelimit"]
    assert [m["mode"] for m in modes["127.0.0.3"]] == ["slow"]
    assert sb.host_stats("127.0.0.2")["status"] == {"429": 1}


# --- JS-only shop -------------------------------------------------------------------------------


def test_js_shop_pages_have_no_price_in_html(sandbox: SandboxProcess) -> None:
    (shop,) = sandbox.js_shops
    truth = sandbox.truth()
    mine = {u: r for u, r in truth.items() if r["host"] == shop["host"]}
    assert {r["markup"] for r in mine.values()} == {"js"} and all(r["js"] for r in mine.values())
    loc = next(loc for loc in LOCALES if loc.currency == shop["currency"])
    for url, rec in list(mine.items())[:5]:
        status, _, body = get(url)
        assert status == 200
        tree = lxml_html.fromstring(body)
        (app,) = tree.xpath('//div[@id="app"]')
        assert app.get("data-sku") == rec["sku"]
        assert tree.xpath('//span[@id="price"]')[0].text_content() == ""
        # Nothing of its own in the HTML: other products' prices only, in the recommendations.
        own = "".join(
            lxml_html.tostring(el, encoding="unicode")
            for el in tree.xpath('//div[@id="app"] | //head')
        )
        assert loc.display(Decimal(rec["price"])) not in own
        assert rec["price"] not in own
        assert not _ld_products(tree) and "itemprop" not in own
        scripts = tree.xpath("//script/@src")
        assert "/static/js/app.js" in scripts and "/vendor/tagmanager/gtm.js" in scripts
        status, _, offer = get(shop["base_url"] + f"/api/offer/{rec['sku']}")
        data = json.loads(offer)
        assert data["price"] == {"amount": rec["price"], "currency": rec["currency"]}
        assert data["display"]["price"] == loc.display(Decimal(rec["price"]))


def test_js_shop_cursor_pagination_lists_every_product(sandbox: SandboxProcess) -> None:
    (shop,) = sandbox.js_shops
    base = shop["base_url"]
    seen: list[str] = []
    cursor = ""
    pages = 0
    while True:
        status, _, body = get(base + f"/api/list?cursor={cursor}")
        assert status == 200
        page = json.loads(body)
        seen += [item["url"] for item in page["items"]]
        pages += 1
        if not page["next_cursor"]:
            break
        cursor = page["next_cursor"]
    assert pages == 5  # 50 products, 12 per page
    truth = sandbox.truth()
    assert seen == [u for u, r in truth.items() if r["host"] == shop["host"]]
    assert get(base + "/api/list?cursor=bogus!")[0] == 400
    status, _, listing = get(base + "/products")
    assert status == 200 and 'id="grid"' in listing and "/static/js/list.js" in listing


def test_js_shop_resources_weigh_like_a_shop_and_are_counted(sandbox: SandboxProcess) -> None:
    (shop,) = sandbox.js_shops
    base = shop["base_url"]
    sandbox.reset_stats()
    sizes = {}
    for path in (
        "/static/css/shop.css",
        "/static/js/app.js",
        "/static/js/list.js",
        "/static/fonts/shop.woff2",
        "/static/img/x1-10001-0.png",
        "/vendor/tagmanager/gtm.js",
        "/vendor/collect?ev=page_view",
    ):
        with urllib.request.urlopen(base + path, timeout=10) as resp:
            body = resp.read()
            sizes[path] = len(body)
            if path.endswith(".png"):
                assert body.startswith(b"\x89PNG\r\n\x1a\n")
    assert sizes["/static/img/x1-10001-0.png"] > 50_000
    assert sizes["/static/fonts/shop.woff2"] > 20_000
    assert sizes["/vendor/tagmanager/gtm.js"] > 20_000
    assert sum(sizes.values()) > 120_000
    paths = sandbox.host_stats(shop["host"])["paths"]
    assert paths["/static/css/shop.css"] == 1 and paths["/vendor/collect"] == 1
    assert sum(paths.values()) == 7


CHROMIUM = Path("/usr/lib/chromium/chromium")


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium package")
async def test_js_shop_in_a_browser_fills_prices_and_scrolls_the_listing() -> None:
    from playwright.async_api import async_playwright

    light = {"js_weight": "light", "js_delay": 0.3}
    async with running(shops=0, js_shops=1, products=30, **light) as (sb, _):
        (shop,) = sb.shops
        url, rec = next((u, r) for u, r in sb.truth().items() if not r["disallowed"])
        loc = next(loc for loc in LOCALES if loc.currency == shop["currency"])
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=str(CHROMIUM), headless=True)
            try:
                page = await browser.new_page()
                started = time.monotonic()
                await page.goto(url, wait_until="domcontentloaded")
                await page.wait_for_selector('#app[data-loaded="1"]', timeout=5000)
                assert time.monotonic() - started >= 0.3
                assert await page.text_content("#price") == loc.display(Decimal(rec["price"]))
                await page.wait_for_selector('html[data-tracked="1"]', timeout=5000)
                paths = sb.stats()["hosts"][shop["host"]]["paths"]
                for path in (
                    "/static/js/app.js",
                    f"/api/offer/{rec['sku']}",
                    "/static/css/shop.css",
                    "/vendor/tagmanager/gtm.js",
                    "/vendor/collect",
                ):
                    assert paths.get(path) == 1, (path, paths)
                assert sum(p.startswith("/static/img/") for p in paths) >= 4

                await page.goto(shop["base_url"] + "/products")
                await page.wait_for_selector("#grid[data-count]", timeout=5000)
                for _ in range(10):
                    if await page.get_attribute("#grid", "data-complete"):
                        break
                    await page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
                    await page.wait_for_timeout(150)
                assert await page.get_attribute("#grid", "data-count") == "30"
                assert sb.stats()["hosts"][shop["host"]]["paths"]["/api/list"] == 3
            finally:
                await browser.close()


# --- the real JS weight ------------------------------------------------------------------------
async def _get_bytes(client: aiohttp.ClientSession, url: str) -> tuple[int, bytes, str]:
    async with client.get(url) as resp:
        return resp.status, await resp.read(), resp.headers.get("Content-Type", "")


async def test_js_shop_real_weight_pages_weigh_like_a_real_product_page() -> None:
    """~70 requests and ~2.3 MB: 30-50 images (gallery photos of 150-250 KB, thumbnails of
    10-40 KB), ~500 KB of JS over 15-20 files, 80-150 KB of CSS, 3 fonts of 30-100 KB."""
    async with running(shops=0, js_shops=1, products=5, asset_latency="none") as (sb, client):
        assert sb.asset_latency_ms is None
        base = sb.shops[0]["base_url"]
        url = sb.urls()[0]
        status, page, _ = await _get_bytes(client, url)
        assert status == 200
        tree = lxml_html.fromstring(page)
        assert tree.xpath('//div[@id="app"]/@data-sku') and not tree.xpath("//script[@type]")
        assert tree.xpath('string(//*[@id="price"])') == ""
        scripts = tree.xpath("//script/@src")
        styles = tree.xpath('//link[@rel="stylesheet"]/@href')
        images = tree.xpath("//img/@src") + tree.xpath('//link[@rel="icon"]/@href')
        sizes: dict[str, int] = {}
        bodies: dict[str, bytes] = {}
        for path in [*scripts, *styles, *images]:
            status, body, ctype = await _get_bytes(client, base + path)
            assert status == 200, path
            sizes[path], bodies[path] = len(body), body
        # The tag manager injects its tags; the base stylesheet declares the fonts.
        gtm = bodies["/vendor/tagmanager/gtm.js"].decode()
        tags = re.findall(r'"(/vendor/tagmanager/tags/\w+\.js)"', gtm)
        css = bodies["/cdn/css/base.css"].decode()
        fonts = re.findall(r"url\((/cdn/fonts/[\w-]+\.woff2)\)", css)
        assert len(tags) == 3 and len(fonts) == 3
        for path in [*tags, *fonts]:
            status, body, _ = await _get_bytes(client, base + path)
            assert status == 200, path
            sizes[path] = len(body)

        js = [*scripts, *tags]
        assert 15 <= len(js) <= 20 and 450_000 <= sum(sizes[p] for p in js) <= 600_000
        assert len(styles) == 4 and 80_000 <= sum(sizes[p] for p in styles) <= 150_000
        assert all(30_000 <= sizes[p] <= 100_000 for p in fonts)
        assert 30 <= len(images) <= 50 and len(set(images)) == len(images)
        assert 1_000_000 <= sum(sizes[p] for p in images) <= 1_600_000
        gallery = [p for p in images if re.fullmatch(r"/cdn/img/p/[a-z0-9]+-\d+-\d\.png", p)]
        thumbs = [p for p in images if p.endswith("-thumb.png")]
        assert len(gallery) == 5 and all(150_000 <= sizes[p] <= 260_000 for p in gallery)
        assert len(thumbs) == 5 and all(10_000 <= sizes[p] <= 40_000 for p in thumbs)
        for path in images:  # valid PNGs of the size the page says
            body = bodies[path]
            assert body[:8] == b"\x89PNG\r\n\x1a\n" and body[12:16] == b"IHDR", path
        width = int.from_bytes(bodies[gallery[0]][16:20], "big")
        assert width == int(tree.xpath(f'//img[@src="{gallery[0]}"]/@width')[0]) == 1000
        total = len(page) + sum(sizes.values())
        # The page, its resources, the price API; in a browser the beacons and widget calls
        # add ~8 more (tests/test_browser_weight.py counts them).
        requests = 1 + len(sizes) + 1
        assert 2_000_000 <= total <= 3_000_000 and 60 <= requests <= 92, (total, requests)

        # Third-party beacons and widgets answer; unknown assets are 404s.
        for path in ("/vendor/collect?ev=x", "/vendor/tr/pixel?ev=x", "/vendor/hotjar/beacon"):
            status, body, ctype = await _get_bytes(client, base + path)
            assert status == 200 and ctype == "image/gif"
        status, body, _ = await _get_bytes(client, base + "/vendor/reviews/summary?sku=A1")
        assert status == 200 and "price" not in json.loads(body)
        for path in ("/cdn/js/missing.js", "/cdn/img/p/x.gif", "/cdn/img/other.png"):
            assert (await _get_bytes(client, base + path))[0] == 404, path


def test_js_shop_real_weight_is_deterministic() -> None:
    from pricewatch.sandbox import _assets

    first = {p: hash(body) for p, (body, _) in _assets.real_assets().items()}
    image = _assets.real_image("p/ab1-2.png")
    _assets.real_assets.cache_clear()
    _assets._image.cache_clear()
    assert {p: hash(body) for p, (body, _) in _assets.real_assets().items()} == first
    assert _assets.real_image("p/ab1-2.png") == image
    a = Sandbox(seed=4, shops=0, js_shops=1, products=3)
    b = Sandbox(seed=4, shops=0, js_shops=1, products=3)
    from pricewatch.sandbox import _pages

    pa, pb = (s._shops[0] for s in (a, b))
    assert _pages.js_product_page_real(pa, pa.products[0]) == _pages.js_product_page_real(
        pb, pb.products[0]
    )


def test_js_weight_and_asset_latency_options() -> None:
    assert Sandbox(js_shops=1).asset_latency_ms == "30-150"  # real weight: CDN latency on
    assert Sandbox(js_shops=1, js_weight="light").asset_latency_ms is None
    assert Sandbox(js_shops=1, asset_latency="none").asset_latency_ms is None
    assert Sandbox(js_shops=1, js_weight="light", asset_latency="5-9").asset_latency_ms == "5-9"
    with pytest.raises(ValueError, match="js_weight must be one of .*'heavy'"):
        Sandbox(js_shops=1, js_weight="heavy")
    with pytest.raises(ValueError, match="latency must be MIN-MAX"):
        Sandbox(js_shops=1, asset_latency="fast")
    proc = subprocess.run(
        [sys.executable, "-m", "pricewatch.sandbox", "--js-weight", "heavy"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and "--js-weight" in proc.stderr


async def test_asset_latency_delays_only_js_shops_static_assets() -> None:
    async with running(shops=1, js_shops=1, products=3, asset_latency="500") as (sb, client):
        html_base, js_base = (s["base_url"] for s in sb.shops)
        sku = next(r["sku"] for r in sb.truth().values() if r["js"])

        async def timed(url: str) -> float:
            started = time.monotonic()
            status, _, _ = await _get_bytes(client, url)
            assert status == 200, url
            return time.monotonic() - started

        for path in ("/cdn/js/runtime.js", "/vendor/collect", "/static/js/app.js"):
            assert await timed(js_base + path) >= 0.5, path
        for url in (
            js_base + f"/api/offer/{sku}",
            js_base + sb.urls(host=sb.shops[1]["host"])[0].split(js_base)[1],
            html_base + "/static/css/shop.css",
        ):
            assert await timed(url) < 0.45, url


def test_poisson_prices_change_at_their_rates_and_the_log_says_what_was_served() -> None:
    """Rates of 6-60 changes per simulated minute at x600: a product changes about every
    10-100 ms of wall time. Every fetch is logged with the price version it was served, the
    page shows the truth's current price, and the rates are in the asked range."""
    with BackgroundSandbox(shops=1, products=4, poisson="6-60:speed=600") as sb:
        url = sb.urls()[0]
        prices = []
        for _ in range(5):
            _, _, body = get(url)
            prices.append(sb.truth()[url]["price"])
            assert prices[-1].replace(".", "") in body.replace(",", "").replace(".", "")
            time.sleep(0.15)
        log = sb.poisson_log()
    products = log["products"]
    assert log["speed"] == 600
    assert all(6 / 60 <= p["rate"] <= 60 / 60 for p in products.values())
    mine = products[url]
    assert [t for t, _ in mine["fetches"]] == sorted(t for t, _ in mine["fetches"])
    for fetched_at, version in mine["fetches"]:
        assert version == sum(1 for t in mine["changes"] if t <= fetched_at)
    assert mine["fetches"][-1][1] > mine["fetches"][0][1]  # it changed between fetches
    assert len(set(prices)) > 1
    # Unfetched products' changes are generated too, when the log is read.
    assert all(p["changes"] for p in products.values())


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fast", "poisson must be MIN-MAX changes per minute"),
        ("0.1-0.01", "0 < MIN <= MAX"),
        ("0.01-0.1:pace=2", "speed=S only"),
        ("0.01-0.1:speed=0", "speed must be > 0"),
    ],
)
def test_poisson_mode_refuses_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Sandbox(poisson=spec)
