"""Listings end to end: `scrapy listing add`, `scrapy crawl listings`, against the
sandbox's listings (pricewatch/sandbox/_listings.py), counted at the server."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from .fixtures.sandbox import SandboxProcess
from .helpers import scrapy, scrapy_env, start_scrapy

FAST = ["-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False"]
SYSTEM_CHROMIUM = "/usr/lib/chromium/chromium"
needs_chromium = pytest.mark.skipif(
    not os.access(SYSTEM_CHROMIUM, os.X_OK), reason="Debian's chromium is not installed"
)


def add(
    tmp_path: Path, url: str, kind: str, *options: str, env: dict[str, str] | None = None
) -> None:
    proc = scrapy(tmp_path, "listing", "add", url, "--kind", kind, *options, env=env)
    assert proc.returncode == 0, proc.stderr


def crawl(tmp_path: Path, *settings: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = scrapy(tmp_path, "crawl", "listings", *FAST, *settings, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record: dict[str, Any] = json.loads((tmp_path / "stats.json").read_text())
    return record


def listings(tmp_path: Path, env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    proc = scrapy(tmp_path, "listing", "list", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return {row["url"]: row for row in json.loads(proc.stdout)}


def category(sb: SandboxProcess) -> dict[str, Any]:
    return json.loads(sb._request("/_listings"))


def members(tmp_path: Path, listing: str) -> set[str]:
    with sqlite3.connect(tmp_path / "pricewatch.db") as conn:
        rows = conn.execute("SELECT url FROM listing_members WHERE listing = ?", (listing,))
        return {url for (url,) in rows}


def entry_states(tmp_path: Path) -> dict[str, tuple[str, str | None]]:
    with sqlite3.connect(tmp_path / "pricewatch.db") as conn:
        rows = conn.execute("SELECT url, state, state_reason FROM frontier_entries")
        return {url: (state, reason) for url, state, reason in rows}


def test_every_kind_is_traversed_to_its_stable_end(sandbox_factory: Any, tmp_path: Path) -> None:
    sb = sandbox_factory(shops=1, products=5)
    base = sb.base_url
    add(tmp_path, base + "/listing/api?shape=ids", "cursor", "--url-template", "/listing/item/{id}")
    (tmp_path / "seeds.csv").write_text(
        f"{base}/listing/item/1001,,7\n"  # seeded by hand: its importance stays
        "listings:\n"
        f"{base}/listing/api,cursor\n"
        f"{base}/listing/scroll,scroll\n"
        f"{base}/listing/offset?page=1,pages\n"
        f"{base}/listing/loop.json,cursor,1d,importance=3,top=5\n"
        f"{base}/listing/short?page=1,pages\n"
        f'"{base}/listing/sitemap.xml?n=1000&per=300",sitemap\n'
    )
    assert scrapy(tmp_path, "seed", "seeds.csv").returncode == 0
    record = crawl(tmp_path)
    rows = listings(tmp_path)
    expected = {
        "/listing/api": ("done", 6, 60),
        "/listing/api?shape=ids": ("done", 6, 60),
        "/listing/scroll": ("done", 6, 60),
        "/listing/offset?page=1": ("done", 6, 60),
        "/listing/loop.json": ("looped", 4, 20),
        "/listing/short?page=1": ("done", 5, 36),
        "/listing/sitemap.xml?n=1000&per=300": ("done", 5, 1000),
    }
    got = {
        path: (
            rows[base + path]["state"],
            rows[base + path]["last"]["pages"],
            rows[base + path]["last"]["items"],
        )
        for path in expected
    }
    assert got == expected
    assert rows[base + "/listing/short?page=1"]["last"]["short_pages"] == 1
    assert record["pricewatch/listing/short_page"] == 1
    assert record["pricewatch/listing/end/done"] == 6
    assert record["pricewatch/listing/end/looped"] == 1
    # The scroll page names its endpoint in its markup: no browser, no Playwright driver.
    assert [k for k in record if k.startswith(("playwright/", "pricewatch/browser/"))] == []
    assert "pricewatch/listing/browser_pages" not in record
    # The category's 60 items (4 listings over the same items) + 20 loop + 36 short + 1000.
    states = entry_states(tmp_path)
    assert len(states) == 60 + 20 + 36 + 1000
    with sqlite3.connect(tmp_path / "pricewatch.db") as conn:
        importance = dict(conn.execute("SELECT url, importance FROM frontier_entries"))
    loop = [importance[f"{base}/listing/item/{i}"] for i in range(1000, 1008)]
    assert loop == [3.0, 7.0, 3.0, 3.0, 3.0, 1.0, 1.0, 1.0]  # the top 5 of its order
    assert set(category(sb)["items"]) <= set(states)
    fetched = category(sb)["fetched"]
    assert fetched["/listing/sitemap.xml?n=1000&per=300"] == 1
    assert sum(1 for p in fetched if p.startswith("/listing/sitemap-")) == 4
    assert all(count == 1 for count in fetched.values())  # no page fetched twice


def test_cursor_traversal_under_resorting_misses_nothing_offset_does(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    sb = sandbox_factory(shops=1, products=5)
    # Every listing request inserts 2 new items at the top and moves 5 prices.
    sb._request("/_listings", {"churn": 2, "reprice": 5})
    base = sb.base_url
    kinds = {
        "cursor": "/listing/api",
        "scroll": "/listing/scroll",
        "pages": "/listing/offset?page=1",
    }
    (tmp_path / "seeds.csv").write_text(
        "listings:\n" + "".join(f"{base}{path},{kind}\n" for kind, path in kinds.items())
    )
    assert scrapy(tmp_path, "seed", "seeds.csv").returncode == 0
    before = set(category(sb)["items"])
    # One listing at a time: the same requests in the same order on every run.
    crawl(tmp_path, "-s", "PRICEWATCH_LISTING_CONCURRENCY=1")
    after = set(category(sb)["items"])
    rows = listings(tmp_path)
    # Missed: items listed from the start to the end of the traversals and never found;
    # duplicates: items found more than once in one traversal.
    figures = {}
    for kind, path in kinds.items():
        found = members(tmp_path, base + path)
        figures[kind] = (
            len((before & after) - found),
            rows[base + path]["last"]["items"] - len(found),
            len(found),
            len(after),
        )
    print(f"under re-sorting (missed, duplicates, found, listed at the end): {figures}")
    assert figures["cursor"][:2] == (0, 0)
    assert figures["scroll"][:2] == (0, 0)
    assert figures["pages"][0] > 0 and figures["pages"][1] > 0  # why cursors


def test_sigkill_mid_listing_resumes_at_the_saved_cursor(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    sb = sandbox_factory(shops=1, products=5, latency="300-300")
    url = sb.base_url + "/listing/api"
    env = scrapy_env(tmp_path)
    ttl = ["-s", "PRICEWATCH_LISTING_LEASE_TTL=2"]
    add(tmp_path, url, "cursor", env=env)
    proc = start_scrapy(tmp_path, "crawl", "listings", *FAST, *ttl, env=env)
    try:
        deadline = time.monotonic() + 60
        while sum(category(sb)["fetched"].values()) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = Counter(category(sb)["fetched"])
    assert sum(before.values()) < 6, before  # killed mid-listing
    running = listings(tmp_path, env)[url]
    assert running["state"] == "running"
    time.sleep(2.2)  # the dead worker's lease expires
    record = crawl(tmp_path, *ttl, env=env)
    assert record["pricewatch/listing/resumed"] == 1
    after = Counter(category(sb)["fetched"])
    row = listings(tmp_path, env)[url]
    assert (row["state"], row["last"]["items"]) == ("done", 60)
    assert members(tmp_path, url) == set(category(sb)["items"])
    twice = [path for path, n in after.items() if n > 1]
    assert len(after) == 6 and len(twice) <= 1, after  # at most the page in flight, again


def test_delisting_waits_for_a_complete_traversal(sandbox_factory: Any, tmp_path: Path) -> None:
    sb = sandbox_factory(shops=1, products=5)
    url = sb.base_url + "/listing/api"
    add(tmp_path, url, "cursor", "--every", "1s")
    k1 = ["-s", "PRICEWATCH_LISTING_DELIST_AFTER=1"]
    crawl(tmp_path, *k1)  # traversal 1: 60 members
    sb._request("/_listings", {"remove": 5})
    removed = set(category(sb)["removed"])
    assert len(removed) == 5
    # An incomplete traversal (here: truncated by the page bound) never delists.
    time.sleep(1.1)
    record = crawl(tmp_path, *k1, "-s", "PRICEWATCH_LISTING_MAX_PAGES=3")
    assert record["pricewatch/listing/end/truncated"] == 1
    assert "pricewatch/listing/delisted" not in record
    assert all(entry_states(tmp_path)[u] == ("scheduled", None) for u in removed)
    time.sleep(1.1)
    record = crawl(tmp_path, *k1)  # a complete traversal without them: delisted
    assert record["pricewatch/listing/delisted"] == 5
    states = entry_states(tmp_path)
    assert {u for u, s in states.items() if s == ("retired", "delisted")} == removed
    assert listings(tmp_path)[url]["last"]["delisted"] == 5
    # Listed again: back on the schedule.
    sb._request("/_listings", {"restore": True})
    time.sleep(1.1)
    record = crawl(tmp_path, *k1)
    assert record["pricewatch/listing/reinstated"] == 5
    assert all(entry_states(tmp_path)[u] == ("scheduled", None) for u in removed)


def test_seed_file_listings_section(sandbox_factory: Any, tmp_path: Path) -> None:
    sb = sandbox_factory(shops=1, products=5)
    base = sb.base_url
    (tmp_path / "seeds.csv").write_text(
        f"{base}/products/a\n"
        "listings:\n"
        f"{base}/listing/api,cursor,12h\n"
        f"{base}/listing/api?shape=ids,cursor,1d,url_template=/listing/item/{{id}}\n"
        f"{base}/listing/x,carousel\n"
        f"{base}/listing/y,pages,often\n"
        f"{base}/listing/z,pages,1d,colour=red\n"
        "ftp://example.com/list,pages\n"
    )
    proc = scrapy(tmp_path, "seed", "seeds.csv")
    assert proc.returncode == 3, proc.stderr
    for lineno, reason in (
        (5, "kind must be one of"),
        (6, "period must be"),
        (7, "unknown option 'colour'"),
        (8, "line 8:"),
    ):
        assert f"line {lineno}: {reason}" in proc.stderr or reason in proc.stderr, proc.stderr
    rows = listings(tmp_path)
    assert rows[base + "/listing/api"]["every"] == 43200
    assert rows[base + "/listing/api?shape=ids"]["options"] == {
        "url_template": "/listing/item/{id}"
    }
    assert len(rows) == 2
    assert f"{base}/products/a" in entry_states(tmp_path)
    assert scrapy(tmp_path, "listing", "remove", f"{base}/listing/api").returncode == 0
    assert list(listings(tmp_path)) == [f"{base}/listing/api?shape=ids"]
    assert scrapy(tmp_path, "listing", "remove", f"{base}/listing/api").returncode == 3
    # A next page whose URL Scrapy's UrlLengthMiddleware would drop ends the traversal.
    record = crawl(tmp_path, "-s", "URLLENGTH_LIMIT=45")
    row = listings(tmp_path)[f"{base}/listing/api?shape=ids"]
    assert (row["state"], row["last"]["error"]) == ("failed", "next page URL too long")
    assert record["pricewatch/listing/end/failed"] == 1


def test_listings_on_the_redis_frontier(
    sandbox_factory: Any, tmp_path: Path, redis_frontier_url: str
) -> None:
    sb = sandbox_factory(shops=1, products=5)
    base = sb.base_url
    env = scrapy_env(tmp_path, PRICEWATCH_FRONTIER_URL=redis_frontier_url)
    (tmp_path / "seeds.csv").write_text(
        "listings:\n"
        f"{base}/listing/api,cursor\n"
        f"{base}/listing/loop.json,cursor\n"
        f'"{base}/listing/sitemap.xml?n=500&per=200",sitemap\n'
    )
    assert scrapy(tmp_path, "seed", "seeds.csv", env=env).returncode == 0
    record = crawl(tmp_path, env=env)
    assert record["pricewatch/listing/new"] == 60 + 20 + 500
    rows = listings(tmp_path, env)
    got = {url.removeprefix(base): (r["state"], r["members"]) for url, r in rows.items()}
    assert got == {
        "/listing/api": ("done", 60),
        "/listing/loop.json": ("looped", 20),
        "/listing/sitemap.xml?n=500&per=200": ("done", 500),
    }
    show = scrapy(tmp_path, "listing", "show", base + "/listing/loop.json", env=env)
    assert show.returncode == 0 and "looped" in show.stdout and "seen before" in show.stdout
    missing = scrapy(tmp_path, "listing", "show", base + "/listing/nope", env=env)
    assert missing.returncode == 3


@needs_chromium
def test_scroll_endpoint_only_the_browser_sees_is_found_saved_and_followed(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    """`/listing/scroll-js` builds its endpoint's URL in a script and fetches it after
    `load`; `?feed=none` fetches only a configuration (a list of no products). One browser
    load each; the endpoint found is followed over HTTP and saved, and the next traversal
    needs no browser."""
    sb = sandbox_factory(shops=1, products=5)
    found_url = sb.base_url + "/listing/scroll-js"
    none_url = sb.base_url + "/listing/scroll-js?feed=none"
    # The second one is due again tomorrow: not in the second crawl.
    (tmp_path / "seeds.csv").write_text(f"listings:\n{found_url},scroll,1s\n{none_url},scroll\n")
    assert scrapy(tmp_path, "seed", "seeds.csv").returncode == 0
    started = time.monotonic()
    record = crawl(tmp_path, "-s", "LOG_LEVEL=INFO")
    first = time.monotonic() - started
    assert record["pricewatch/listing/browser_pages"] == 2
    assert record["pricewatch/listing/endpoint_found"] == 1
    assert record["pricewatch/listing/end/done"] == 1
    assert record["pricewatch/listing/end/failed"] == 1
    assert record["pricewatch/browser/handler_started"] == 1
    assert record["playwright/page_count"] == 2
    assert record["pricewatch/browser/pages"] == record["pricewatch/browser/pages_closed"] == 2
    truth = set(category(sb)["items"])
    assert len(truth) == 60
    assert members(tmp_path, found_url) == truth
    assert truth <= set(entry_states(tmp_path))
    rows = listings(tmp_path)
    endpoint = sb.base_url + "/listing/scroll.json?after=0"
    assert rows[found_url]["traversal"]["endpoint"] == endpoint
    # The page, then the endpoint's 5 pages of 12 (the first one from its start again).
    assert (rows[found_url]["state"], rows[found_url]["last"]["pages"]) == ("done", 6)
    failed = rows[none_url]
    assert failed["state"] == "failed" and failed["traversal"]["endpoint"] is None
    reason = failed["last"]["error"]
    assert reason.startswith("no JSON endpoint in the page's markup, and none of the 1 JSON")
    assert "/listing/config.json: no product URL in the items" in reason
    assert reason.endswith("give --endpoint")
    show = scrapy(tmp_path, "listing", "show", found_url)
    assert show.returncode == 0 and f"endpoint:   {endpoint}" in show.stdout
    fetched = category(sb)["fetched"]
    assert fetched["/listing/scroll-js"] == 2  # over HTTP, then in the browser
    assert fetched["/listing/scroll-js?feed=none"] == 2
    assert fetched["/listing/config.json"] == 2  # one browser load of each page
    assert fetched["/listing/scroll.json?after=0"] == 2  # by the page, then by the traversal

    # The next traversal follows the saved endpoint: no browser, no driver.
    sb._request("/_listings", {"reset_fetched": True})
    time.sleep(1.1)
    started = time.monotonic()
    record = crawl(tmp_path)
    second = time.monotonic() - started
    assert [k for k in record if k.startswith(("playwright/", "pricewatch/browser/"))] == []
    assert "pricewatch/listing/browser_pages" not in record
    assert record["pricewatch/listing/endpoint_saved"] == 1
    assert record["pricewatch/listing/end/done"] == 1
    assert record["pricewatch/listing/items"] == 60
    fetched = category(sb)["fetched"]
    assert "/listing/config.json" not in fetched and fetched["/listing/scroll-js"] == 1
    assert sum(fetched.values()) == 6
    print(f"crawl with the browser's discovery {first:.1f}s, with the saved endpoint {second:.1f}s")


def test_without_a_browser_a_scroll_page_without_endpoint_fails_saying_so(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    sb = sandbox_factory(shops=1, products=5)
    url = sb.base_url + "/listing/scroll-js"
    env = scrapy_env(tmp_path, PLAYWRIGHT_BROWSERS_PATH=str(tmp_path / "none"))
    add(tmp_path, url, "scroll", env=env)
    absent = str(tmp_path / "absent")
    record = crawl(tmp_path, "-s", f"PRICEWATCH_BROWSER_SYSTEM_CHROMIUM={absent}", env=env)
    assert record["pricewatch/listing/end/failed"] == 1
    assert [k for k in record if k.startswith(("playwright/", "pricewatch/browser/"))] == []
    assert "pricewatch/listing/browser_pages" not in record
    error = listings(tmp_path, env)[url]["last"]["error"]
    assert error.startswith("no JSON endpoint in the page's markup, and no browser to find one")
    assert error.endswith("give --endpoint")
    assert category(sb)["fetched"] == {"/listing/scroll-js": 1}
