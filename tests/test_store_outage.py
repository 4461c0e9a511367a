"""PostgreSQL stopped and started again in the middle of a crawl: nothing lost, nothing
duplicated.

The shared server is left alone: the test runs a private PostgreSQL cluster of its own
(``tests/fixtures/servers.py``) that it can stop for real.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from pricewatch.runs import ExitCode

from .fixtures.sandbox import SandboxProcess, sandbox_args
from .fixtures.servers import PrivateCluster
from .helpers import scrapy, scrapy_env, start_scrapy

pytestmark = pytest.mark.long


def _product_fetches(shop: SandboxProcess) -> int:
    hosts = shop.stats()["hosts"].values()
    return sum(n for h in hosts for path, n in h["paths"].items() if path.startswith("/products/"))


def _seed(tmp_path: Path, urls: list[str], env: dict[str, str]) -> None:
    (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
    assert scrapy(tmp_path, "seed", "seeds.txt", env=env).returncode == 0


def _wait_for_rows(cluster: PrivateCluster, rows: int) -> None:
    """Wait (at most a minute) until ``products`` holds ``rows``."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _count(cluster, "products") < rows:
        time.sleep(0.05)


def _assert_each_stored_once(cluster: PrivateCluster, urls: list[str]) -> None:
    rows = cluster.query("SELECT count(*), count(DISTINCT url) FROM price_changes").split("|")
    assert [int(r) for r in rows] == [len(urls), len(urls)]


def _count(cluster: PrivateCluster, table: str) -> int:
    try:
        return int(cluster.query(f"SELECT count(*) FROM {table}") or 0)
    except subprocess.CalledProcessError:  # not there yet, or the server is down
        return 0


@pytest.mark.timeout(180)
def test_postgres_down_midway_loses_and_duplicates_nothing(
    cluster: PrivateCluster, tmp_path: Path
) -> None:
    shop = SandboxProcess(sandbox_args(port=0, seed=5, shops=3, products=20, latency="100-300"))
    try:
        urls = shop.urls()
        env = scrapy_env(tmp_path, PRICEWATCH_STORE_URL=cluster.url)
        _seed(tmp_path, urls, env)
        crawl = start_scrapy(
            tmp_path, "crawl", "products",
            "-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False",
            "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=1", "-s", "PRICEWATCH_BATCH_SIZE=5",
            "-s", "PRICEWATCH_FLUSH_INTERVAL=0.2", "-s", "PRICEWATCH_STORE_RETRY_MAX_DELAY=1",
            env=env,
        )  # fmt: skip

        def products() -> int:
            return _count(cluster, "products")

        _wait_for_rows(cluster, 5)
        cluster.stop()
        time.sleep(3)  # the crawl keeps fetching and buffers while the store is down
        cluster.start()
        _, err = crawl.communicate(timeout=120)
        assert crawl.returncode == 0, err[-3000:]
        stats: dict[str, Any] = json.loads((tmp_path / "stats.json").read_text())
        assert stats["pricewatch/store/write_retries"] >= 1
        assert "Store write failed" in err
        _assert_each_stored_once(cluster, urls)
        assert products() == len(urls)
        truth = shop.truth()
        for line in cluster.query("SELECT url, price::text, currency FROM products").splitlines():
            url, price, currency = line.split("|")
            want = (Decimal(truth[url]["price"]), truth[url]["currency"])
            assert (Decimal(price), currency) == want, url
    finally:
        shop.stop()


@pytest.mark.timeout(180)
def test_store_down_for_good_ends_the_crawl_and_the_next_run_catches_up(
    cluster: PrivateCluster, tmp_path: Path
) -> None:
    # Slow pages, one at a time per shop: the crawl outlasts the moment the store stops.
    shop = SandboxProcess(sandbox_args(port=0, seed=6, shops=2, products=20, latency="100-200"))
    try:
        urls = shop.urls()
        env = scrapy_env(tmp_path, PRICEWATCH_STORE_URL=cluster.url)
        _seed(tmp_path, urls, env)
        assert scrapy(tmp_path, "db", "upgrade", env=env).returncode == 0
        cluster.stop()
        settings = [
            *("-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False"),
            *("-s", "PRICEWATCH_BATCH_SIZE=5", "-s", "PRICEWATCH_STORE_MAX_BUFFER=10"),
            *(
                "-s",
                "PRICEWATCH_STORE_OUTAGE_TIMEOUT=2",
                "-s",
                "PRICEWATCH_STORE_RETRY_MAX_DELAY=0.5",
            ),
            *("-s", "PRICEWATCH_FRONTIER_LEASE_TTL=3", "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=1"),
        ]
        # The store is down at start: a clear error, nothing fetched.
        down = scrapy(tmp_path, "crawl", "products", *settings, env=env)
        assert down.returncode == ExitCode.STORE_UNAVAILABLE
        assert f"127.0.0.1:{cluster.port}" in down.stderr
        # Down mid-crawl and never back: the crawl ends instead of hanging.
        cluster.start()
        crawl = start_scrapy(tmp_path, "crawl", "products", *settings, env=env)
        _wait_for_rows(cluster, 1)
        cluster.stop()
        _, err = crawl.communicate(timeout=120)
        assert crawl.returncode == ExitCode.STORE_UNAVAILABLE, err[-3000:]
        stats: dict[str, Any] = json.loads((tmp_path / "stats.json").read_text())
        assert stats["finish_reason"] == "store_unavailable", err[-3000:]
        assert stats["status"] == "failed"
        assert "store unreachable for more than 2s" in stats["pricewatch/run/error"]
        assert stats["pricewatch/store/unwritten"] >= 1
        assert stats["pricewatch/store/backpressure_waits"] >= 1
        assert "Store unreachable for more than 2s" in err
        # Back up: the next run (after the leases expired) stores every SKU once.
        cluster.start()
        time.sleep(3.2)
        final = scrapy(tmp_path, "crawl", "products", *settings, env=env)
        assert final.returncode == 0, final.stderr[-3000:]
        _assert_each_stored_once(cluster, urls)
    finally:
        shop.stop()


@pytest.mark.timeout(180)
def test_shutdown_while_the_store_is_down_leaves_the_rest_unacknowledged_not_lost(
    cluster: PrivateCluster, tmp_path: Path
) -> None:
    shop = SandboxProcess(sandbox_args(port=0, seed=8, shops=2, products=20, latency="100-200"))
    try:
        urls = shop.urls()
        env = scrapy_env(tmp_path, PRICEWATCH_STORE_URL=cluster.url)
        _seed(tmp_path, urls, env)
        settings = [
            *("-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False"),
            *("-s", "CONCURRENT_REQUESTS_PER_DOMAIN=1", "-s", "PRICEWATCH_BATCH_SIZE=5"),
            *(
                "-s",
                "PRICEWATCH_STORE_CLOSE_TIMEOUT=1",
                "-s",
                "PRICEWATCH_STORE_RETRY_MAX_DELAY=0.5",
            ),
            *("-s", "PRICEWATCH_FRONTIER_LEASE_TTL=3"),
        ]
        crawl = start_scrapy(tmp_path, "crawl", "products", *settings, env=env)
        _wait_for_rows(cluster, 1)
        cluster.stop()
        # Every page fetched, the rest of the observations buffered: the operator stops
        # the crawl (scrapyd cancel, Ctrl-C) while the store is still down.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _product_fetches(shop) < len(urls):
            time.sleep(0.05)
        crawl.send_signal(signal.SIGINT)
        _, err = crawl.communicate(timeout=120)
        assert crawl.returncode == 0, err[-3000:]
        stats: dict[str, Any] = json.loads((tmp_path / "stats.json").read_text())
        assert stats["finish_reason"] == "shutdown"
        assert stats["pricewatch/store/unwritten_at_close"] >= 1
        assert "Store still unreachable at close" in err
        cluster.start()
        time.sleep(3.2)  # the unacknowledged leases expire
        final = scrapy(tmp_path, "crawl", "products", *settings, env=env)
        assert final.returncode == 0, final.stderr[-3000:]
        _assert_each_stored_once(cluster, urls)
    finally:
        shop.stop()
