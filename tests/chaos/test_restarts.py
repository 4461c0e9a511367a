"""Redis and PostgreSQL both restarted in the middle of one crawl of a shop with hostile
pages: the crawl rides both outages out and exits by itself, and with the next run every
SKU is stored once, at its true price, every lease completed.

The private servers are those of the outage tests (``tests/fixtures/servers.py``), each of
which restarts one backend alone (``tests/test_frontier_outage.py``,
``tests/test_store_outage.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ..fixtures.sandbox import SandboxProcess, sandbox_args
from ..fixtures.servers import PrivateCluster, PrivateRedis
from ..helpers import scrapy, scrapy_env, start_scrapy
from .checks import assert_every_lease_completed, assert_stored_right, stored_prices

pytestmark = pytest.mark.long

LEASE_TTL = 4
CRAWL = [
    *("-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False"),
    *("-s", "CONCURRENT_REQUESTS_PER_DOMAIN=1", "-s", "PRICEWATCH_MAX_OUTSTANDING=6"),
    *("-s", "PRICEWATCH_FRONTIER_CLAIM_BATCH=4"),
    *("-s", f"PRICEWATCH_FRONTIER_LEASE_TTL={LEASE_TTL}"),
    *("-s", "PRICEWATCH_BATCH_SIZE=4", "-s", "PRICEWATCH_FLUSH_INTERVAL=0.2"),
    *("-s", "PRICEWATCH_STORE_RETRY_MAX_DELAY=1"),
]


def product_fetches(shop: SandboxProcess, host: str) -> int:
    paths = shop.stats()["hosts"][host]["paths"]
    return sum(n for path, n in paths.items() if path.startswith("/products/"))


def held(shop: SandboxProcess, host: str) -> int:
    """Page requests of ``host`` that the sandbox's ``hold`` mode keeps waiting."""
    return sum(m.get("held", 0) for m in shop.control()["modes"][host])


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout:g}s for {what}"
        time.sleep(0.05)


@pytest.mark.timeout(240)
def test_redis_and_postgres_restarted_mid_crawl(
    private_redis: PrivateRedis, cluster: PrivateCluster, tmp_path: Path
) -> None:
    shop = SandboxProcess(sandbox_args(port=0, seed=41, shops=2, products=12, latency="200-400"))
    try:
        free, holding = (s["host"] for s in shop.shops)
        shop.control(host=free, mode="inject", fraction=0.5)
        urls = shop.urls()
        env = scrapy_env(
            tmp_path, PRICEWATCH_FRONTIER_URL=private_redis.url, PRICEWATCH_STORE_URL=cluster.url
        )
        (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
        assert scrapy(tmp_path, "seed", "seeds.txt", env=env).returncode == 0
        # One shop holds its pages while a backend goes down, so the crawl is under way
        # (a lease in hand, the other shop fetched) at each stop, however slow the machine;
        # released during the outage, the held page's completion or store write fails.
        # (Held fetches stay within DOWNLOAD_TIMEOUT, which is above the waits.)
        shop.control(host=holding, mode="hold")
        crawl = start_scrapy(
            tmp_path, "crawl", "products", *CRAWL, "-s", "DOWNLOAD_TIMEOUT=120", env=env
        )
        wait_until(
            lambda: product_fetches(shop, free) >= 4 and held(shop, holding) >= 1,
            "4 pages fetched and one held",
            timeout=90,  # the crawl's start-up included
        )
        assert crawl.poll() is None, "the crawl ended before Redis was stopped"
        private_redis.stop()
        shop.control(host=holding, clear="hold")
        time.sleep(2)
        shop.control(host=holding, mode="hold")
        private_redis.start()
        # Claiming again after the outage, with half the SKUs stored.
        wait_until(
            lambda: len(stored_prices(cluster.url)) >= 12 and held(shop, holding) >= 1,
            "12 SKUs stored and a page held after Redis came back",
            timeout=90,
        )
        assert crawl.poll() is None, "the crawl ended before PostgreSQL was stopped"
        cluster.stop()
        shop.control(host=holding, clear="hold")
        time.sleep(2)
        cluster.start()
        _, err = crawl.communicate(timeout=150)
        assert crawl.returncode == 0, err[-3000:]
        time.sleep(LEASE_TTL + 0.5)  # completions lost while Redis was down: leases expire
        again = scrapy(tmp_path, "crawl", "products", *CRAWL, env=env, timeout=120)
        assert again.returncode == 0, again.stderr[-3000:]
        assert_stored_right(cluster.url, shop.truth(), set(urls))
        assert_every_lease_completed(private_redis.url, len(urls))
    finally:
        shop.stop()
