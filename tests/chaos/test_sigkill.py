"""SIGKILL at random points of a crawl, on each backend: no SKU lost, no history duplicated.

Each kill point is a random time after the crawler process starts (0.2-4 s: start-up, the
first claims, fetches in flight, store batches being written); the crawl is started again
after each kill, and a last run goes to the end once the killed runs' leases expired.
``PRICEWATCH_CHAOS_KILLS`` kill points per backend (2 by default, 10 for the full run).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..fixtures.sandbox import SandboxProcess, sandbox_args
from ..helpers import scrapy, scrapy_env, start_scrapy
from .checks import assert_every_lease_completed, assert_stored_right

pytestmark = pytest.mark.long

KILLS = int(os.environ.get("PRICEWATCH_CHAOS_KILLS", "2"))
LEASE_TTL = 2
CRAWL = [
    *("-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False"),
    *("-s", "CONCURRENT_REQUESTS_PER_DOMAIN=4"),
    *("-s", "PRICEWATCH_BATCH_SIZE=5", "-s", "PRICEWATCH_FLUSH_INTERVAL=0.2"),
    # A SKU claimed by every killed run would be dead-lettered after MAX_ATTEMPTS expired
    # leases, by design; here the point is what is lost or duplicated, not poison pills.
    *("-s", "PRICEWATCH_FRONTIER_MAX_ATTEMPTS=100"),
]


@pytest.fixture(scope="module")
def shop() -> Iterator[SandboxProcess]:
    # ~2 s of fetching for a whole crawl: kill points land before, during and after it.
    proc = SandboxProcess(sandbox_args(port=0, seed=21, shops=3, products=20, latency="150-450"))
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(params=["sqlite", "redis+postgres"])
def backends(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(frontier URL, store URL) of a fresh backend pair."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'pricewatch.db'}"
        return url, url
    frontier = request.getfixturevalue("redis_frontier_url")
    return str(frontier), str(request.getfixturevalue("postgres_url"))


@pytest.mark.timeout(240)
def test_sigkill_at_random_points_loses_and_duplicates_nothing(
    shop: SandboxProcess, backends: tuple[str, str], tmp_path: Path
) -> None:
    frontier_url, store_url = backends
    env = scrapy_env(tmp_path, PRICEWATCH_FRONTIER_URL=frontier_url, PRICEWATCH_STORE_URL=store_url)
    urls = shop.urls()
    (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
    assert scrapy(tmp_path, "seed", "seeds.txt", env=env).returncode == 0
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    points = [round(rng.uniform(0.2, 4.0), 2) for _ in range(KILLS)]
    # Killed runs' leases expire soon after the kill.
    short_lease = ["-s", f"PRICEWATCH_FRONTIER_LEASE_TTL={LEASE_TTL}"]
    for point in points:
        crawl = start_scrapy(tmp_path, "crawl", "products", *CRAWL, *short_lease, env=env)
        time.sleep(point)
        crawl.send_signal(signal.SIGKILL)
        crawl.communicate(timeout=10)
    time.sleep(LEASE_TTL + 0.5)  # the last killed run's leases expire
    # The last run's own leases outlive its fetches and writes (no expiry under load).
    final = scrapy(
        tmp_path, "crawl", "products", *CRAWL, "-s", "PRICEWATCH_FRONTIER_LEASE_TTL=60",
        env=env, timeout=120,
    )  # fmt: skip
    where = f"random seed {seed}, kill points {points} s"
    assert final.returncode == 0, (where, final.stderr[-3000:])
    assert_stored_right(store_url, shop.truth(), set(urls))
    assert_every_lease_completed(frontier_url, len(urls))
