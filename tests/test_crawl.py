"""The main job end to end on the embedded default: seed, crawl, extract, validate, store.

Crawls run as `scrapy` subprocesses against a sandbox of this module's own, and what
was stored is compared with the sandbox's ``/_truth``.
"""

from __future__ import annotations

import csv
import io
import json
import signal
import sqlite3
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from .fixtures.sandbox import SandboxProcess, sandbox_args
from .helpers import scrapy, scrapy_env, start_scrapy

# Fast but otherwise default settings: politeness is tested on its own elsewhere.
FAST = ["-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False"]


@pytest.fixture(scope="module")
def shop() -> Iterator[SandboxProcess]:
    proc = SandboxProcess(sandbox_args(port=0, seed=7, shops=4, products=25))
    try:
        yield proc
    finally:
        proc.stop()


def seed(tmp_path: Path, urls: list[str], env: dict[str, str] | None = None) -> None:
    (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
    proc = scrapy(tmp_path, "seed", "seeds.txt", env=env)
    assert proc.returncode == 0, proc.stderr


def crawl(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = scrapy(tmp_path, "crawl", "products", *FAST, *args, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats: dict[str, Any] = json.loads((tmp_path / "stats.json").read_text())
    return stats


def stored(tmp_path: Path) -> dict[str, dict[str, str]]:
    proc = scrapy(tmp_path, "prices", "--csv")
    assert proc.returncode == 0, proc.stderr
    return {row["url"]: row for row in csv.DictReader(io.StringIO(proc.stdout))}


def sql(tmp_path: Path, query: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(tmp_path / "pricewatch.db") as conn:
        return conn.execute(query).fetchall()


def assert_matches_truth(
    rows: dict[str, dict[str, str]], truth: dict[str, Any], urls: list[str]
) -> None:
    assert sorted(rows) == sorted(urls)
    for url in urls:
        want, got = truth[url], rows[url]
        assert Decimal(got["price"]) == Decimal(want["price"]), url
        assert got["currency"] == want["currency"], url
        assert got["availability"] == want["availability"], url


def test_crawl_stores_every_seeded_sku_as_in_truth(shop: SandboxProcess, tmp_path: Path) -> None:
    urls = shop.urls()
    seed(tmp_path, urls)
    stats = crawl(tmp_path)
    assert stats["pricewatch/outcome/ok"] == len(urls)
    assert stats["pricewatch/store/rows_written"] == len(urls)
    assert stats["pricewatch/frontier/claimed"] == len(urls)
    assert_matches_truth(stored(tmp_path), shop.truth(), urls)
    # One history row per SKU, prices kept as exact decimal text.
    assert sql(tmp_path, "SELECT count(*), count(DISTINCT url) FROM price_changes") == [
        (len(urls), len(urls))
    ]


def test_recrawl_of_unchanged_catalogue_adds_no_history(
    shop: SandboxProcess, tmp_path: Path
) -> None:
    urls = shop.urls()
    seed(tmp_path, urls)
    crawl(tmp_path)
    before = sql(tmp_path, "SELECT count(*), max(last_checked_at) FROM products")[0]
    hosts = {s["host"] for s in shop.shops}
    for host in hosts:
        assert scrapy(tmp_path, "frontier", "--requeue", host).returncode == 0
    stats = crawl(tmp_path)
    assert stats["pricewatch/outcome/ok"] == len(urls)  # every SKU was fetched again
    assert stats.get("pricewatch/store/changes", 0) == 0
    after = sql(tmp_path, "SELECT count(*), max(last_checked_at) FROM products")[0]
    assert after[0] == before[0] and after[1] > before[1]  # checked again, not duplicated
    assert sql(tmp_path, "SELECT count(*) FROM price_changes") == [(len(urls),)]


def test_nothing_due_means_an_empty_cron_run(shop: SandboxProcess, tmp_path: Path) -> None:
    seed(tmp_path, shop.urls()[:5])
    crawl(tmp_path)
    stats = crawl(tmp_path)
    assert stats.get("pricewatch/frontier/claimed", 0) == 0
    assert stats["finish_reason"] == "finished"


def test_outcomes_of_pages_that_are_not_offers(shop: SandboxProcess, tmp_path: Path) -> None:
    good = shop.urls()[:3]
    disallowed = sorted(set(shop.urls(all=True)) - set(shop.urls()))[:2]
    missing = [good[0].rsplit("/", 1)[0] + "/no-such-product"]
    no_offer = [shop.base_url + "/products?page=1"]  # a listing, not a product page
    assert disallowed
    seed(tmp_path, good + disallowed + missing + no_offer)
    stats = crawl(tmp_path)
    assert stats["pricewatch/outcome/ok"] == 3
    assert stats["pricewatch/outcome/skipped"] == len(disallowed)  # robots.txt
    assert stats["pricewatch/outcome/gone"] == 1
    assert stats["pricewatch/reason/skipped/robots_txt"] == len(disallowed)
    assert stats["pricewatch/reason/gone/http_404"] == 1
    assert stats["pricewatch/outcome/no_price"] == 1
    assert stats["pricewatch/extract/no_price/not_found"] == 1  # a listing: nothing of its own
    assert sorted(stored(tmp_path)) == sorted(good)
    # Nothing left the schedule: every entry is rescheduled, none in flight.
    rows = sql(tmp_path, "SELECT count(*) FROM products")
    assert rows == [(3,)]
    proc = scrapy(tmp_path, "frontier")
    assert proc.returncode == 0, proc.stderr


def test_sigkill_midway_then_rerun_loses_nothing(sandbox_factory: Any, tmp_path: Path) -> None:
    slow = sandbox_factory(port=0, seed=3, shops=3, products=30, latency="150-400")
    urls = slow.urls()
    env = scrapy_env(tmp_path)
    seed(tmp_path, urls, env)
    short_lease = [
        *("-s", "PRICEWATCH_FRONTIER_LEASE_TTL=3", "-s", "PRICEWATCH_FLUSH_INTERVAL=0.3"),
        *("-s", "PRICEWATCH_BATCH_SIZE=10", "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=2"),
    ]
    proc = start_scrapy(tmp_path, "crawl", "products", *FAST, *short_lease, env=env)
    deadline = time.monotonic() + 60
    written = 0
    while time.monotonic() < deadline:
        try:
            written = sql(tmp_path, "SELECT count(*) FROM products")[0][0]
        except sqlite3.OperationalError:  # the table is not there yet
            written = 0
        if written >= 10:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    assert 10 <= written < len(urls), "the crawl must be killed midway"
    time.sleep(3.5)  # the killed worker's leases expire
    stats = crawl(tmp_path, *short_lease)
    assert stats["pricewatch/frontier/claimed"] >= len(urls) - written
    assert_matches_truth(stored(tmp_path), slow.truth(), urls)
    assert sql(tmp_path, "SELECT count(*), count(DISTINCT url) FROM price_changes") == [
        (len(urls), len(urls))
    ]


def test_refuses_a_reactor_other_than_asyncio(tmp_path: Path) -> None:
    proc = scrapy(
        tmp_path, "crawl", "products", "-s",
        "TWISTED_REACTOR=twisted.internet.epollreactor.EPollReactor",
    )  # fmt: skip
    assert proc.returncode != 0
    assert "pricewatch needs the asyncio reactor" in proc.stderr
    assert "EPollReactor is installed" in proc.stderr


def test_logs_the_reactor_in_use_and_no_warning_for_default_settings(tmp_path: Path) -> None:
    proc = scrapy(tmp_path, "crawl", "products")
    assert proc.returncode == 0, proc.stderr
    assert (
        "Twisted reactor in use: twisted.internet.asyncioreactor.AsyncioSelectorReactor"
        in proc.stderr
    )
    # Components that are off by default (sessions, audit trail...) say nothing about it.
    assert "WARNING: Disabled" not in proc.stderr, proc.stderr[-3000:]


@pytest.mark.parametrize(
    ("variable", "url", "shown"),
    [
        pytest.param(
            "PRICEWATCH_STORE_URL",
            "postgresql://crawler:s3cret@127.0.0.1:1/prices",
            "postgresql://crawler:***@127.0.0.1:1/prices",
            id="store",
        ),
        pytest.param(
            "PRICEWATCH_FRONTIER_URL",
            "redis://:s3cret@127.0.0.1:1/0",
            "redis://:***@127.0.0.1:1/0",
            id="frontier",
        ),
    ],
)
def test_unreachable_backend_fails_with_masked_url(
    tmp_path: Path, variable: str, url: str, shown: str
) -> None:
    proc = scrapy(tmp_path, "crawl", "products", env=scrapy_env(tmp_path, **{variable: url}))
    assert proc.returncode != 0
    assert shown in proc.stderr
    assert "s3cret" not in proc.stderr + proc.stdout


def test_follow_mode_picks_up_new_work_while_running(shop: SandboxProcess, tmp_path: Path) -> None:
    urls = shop.urls()
    first, later = urls[:5], urls[5:10]
    env = scrapy_env(tmp_path)
    seed(tmp_path, first, env)
    proc = start_scrapy(
        tmp_path, "crawl", "products", "-a", "follow=1", *FAST,
        "-s", "PRICEWATCH_FRONTIER_POLL_INTERVAL=0.2", "-s", "PRICEWATCH_FLUSH_INTERVAL=0.2",
        env=env,
    )  # fmt: skip
    try:

        def count() -> int:
            try:
                return int(sql(tmp_path, "SELECT count(*) FROM products")[0][0])
            except sqlite3.OperationalError:
                return 0

        deadline = time.monotonic() + 30
        while count() < 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert count() == 5
        seed(tmp_path, later, env)
        while count() < 10 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert count() == 10
        assert proc.poll() is None, "follow mode keeps running"
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-2000:]


def test_operator_rules_are_tried_first(shop: SandboxProcess, tmp_path: Path) -> None:
    host = shop.shops[0]["host"]
    urls = shop.urls(host=host)
    rules = tmp_path / "rules.toml"
    rules.write_text(f'["{host}"]\nprice_css = ".buybox .price--current"\n')
    seed(tmp_path, urls)
    stats = crawl(tmp_path, "-s", f"PRICEWATCH_EXTRACT_RULES_FILE={rules}")
    assert stats["pricewatch/extract/source/rule"] == len(urls)
    assert_matches_truth(stored(tmp_path), shop.truth(), urls)


def test_unreadable_rules_file_fails_the_crawl_naming_the_setting(tmp_path: Path) -> None:
    proc = scrapy(tmp_path, "crawl", "products", "-s", "PRICEWATCH_EXTRACT_RULES_FILE=missing.toml")
    assert proc.returncode != 0
    assert "PRICEWATCH_EXTRACT_RULES_FILE" in proc.stderr and "missing.toml" in proc.stderr
