"""Redis and PostgreSQL both restarted in the middle of one crawl of a shop with hostile
pages: the crawl rides both outages out and exits by itself, and with the next run every
SKU is stored once, at its true price, every lease completed.

The private servers are those of the outage tests (``tests/fixtures/servers.py``), each of
which restarts one backend alone (``tests/test_frontier_outage.py``,
``tests/test_store_outage.py``).
"""

from __future__ import annotations

import time
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


def product_fetches(shop: SandboxProcess) -> int:
    hosts = shop.stats()["hosts"].values()
    return sum(n for h in hosts for path, n in h["paths"].items() if path.startswith("/products/"))


def wait_until(condition: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)


@pytest.mark.timeout(240)
def test_redis_and_postgres_restarted_mid_crawl(
    private_redis: PrivateRedis, cluster: PrivateCluster, tmp_path: Path
) -> None:
    shop = SandboxProcess(sandbox_args(port=0, seed=41, shops=2, products=12, latency="200-400"))
    try:
        shop.control(host=shop.shops[0]["host"], mode="inject", fraction=0.5)
        urls = shop.urls()
        env = scrapy_env(
            tmp_path, PRICEWATCH_FRONTIER_URL=private_redis.url, PRICEWATCH_STORE_URL=cluster.url
        )
        (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
        assert scrapy(tmp_path, "seed", "seeds.txt", env=env).returncode == 0
        crawl = start_scrapy(tmp_path, "crawl", "products", *CRAWL, env=env)
        wait_until(lambda: product_fetches(shop) >= 4)
        assert crawl.poll() is None, "the crawl ended before Redis was stopped"
        private_redis.stop()
        time.sleep(2)
        private_redis.start()
        wait_until(lambda: len(stored_prices(cluster.url)) >= 12 or crawl.poll() is not None)
        assert crawl.poll() is None, "the crawl ended before PostgreSQL was stopped"
        cluster.stop()
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
