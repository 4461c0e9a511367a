"""Redis restarted in the middle of a crawl: the spider backs off, resumes, loses nothing.

The shared Redis is left alone: the test runs a private ``redis-server`` (append-only
file on, as a production frontier must be configured, ``tests/fixtures/servers.py``) that it
can stop for real.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from pricewatch.frontier import DomainCounts
from pricewatch.frontier.redis import RedisFrontier

from .fixtures.sandbox import SandboxProcess, sandbox_args
from .fixtures.servers import PrivateRedis
from .helpers import scrapy, scrapy_env, start_scrapy

pytestmark = pytest.mark.long


async def frontier_counts(url: str) -> list[DomainCounts]:
    async with RedisFrontier(url) as frontier:
        return await frontier.counts()


@pytest.mark.timeout(180)
def test_redis_restart_midway_loses_nothing(private_redis: PrivateRedis, tmp_path: Path) -> None:
    shop = SandboxProcess(sandbox_args(port=0, seed=9, shops=3, products=20, latency="100-300"))
    try:
        urls = shop.urls()
        env = scrapy_env(tmp_path, PRICEWATCH_FRONTIER_URL=private_redis.url)
        (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
        assert scrapy(tmp_path, "seed", "seeds.txt", env=env).returncode == 0
        crawl = start_scrapy(
            tmp_path, "crawl", "products",
            "-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False",
            "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=1", "-s", "PRICEWATCH_FRONTIER_CLAIM_BATCH=3",
            "-s", "PRICEWATCH_MAX_OUTSTANDING=6", "-s", "PRICEWATCH_BATCH_SIZE=5",
            "-s", "PRICEWATCH_FLUSH_INTERVAL=0.2", "-s", "PRICEWATCH_FRONTIER_LEASE_TTL=4",
            env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            served = shop.stats()["hosts"]
            if sum(h["requests"] for h in served.values()) >= 10:
                break
            time.sleep(0.05)
        private_redis.stop()
        time.sleep(2)
        private_redis.start()
        _, err = crawl.communicate(timeout=120)
        assert crawl.returncode == 0, err[-3000:]
        assert "Frontier unavailable" in err or "Could not complete" in err
        # Leases whose completion was lost expire; a second run picks them up.
        time.sleep(4.5)
        assert scrapy(tmp_path, "crawl", "products", env=env).returncode == 0
        with closing(sqlite3.connect(tmp_path / "pricewatch.db")) as conn:
            rows = [row[0] for row in conn.execute("SELECT url FROM products")]
        assert sorted(rows) == sorted(urls)
        stats: dict[str, Any] = json.loads((tmp_path / "stats.json").read_text())
        assert stats["finish_reason"] == "finished"
        # Every entry is back on the schedule: none in flight, none dead-lettered.
        counts = asyncio.run(frontier_counts(private_redis.url))
        assert sum(c.scheduled + c.due for c in counts) == len(urls)
        assert sum(c.inflight + c.dead + c.retired for c in counts) == 0
    finally:
        shop.stop()


@pytest.mark.timeout(120)
def test_frontier_down_for_good_ends_the_crawl_with_exit_code_4(
    private_redis: PrivateRedis, tmp_path: Path
) -> None:
    # A cron crawl whose frontier goes away and stays away ends by itself after
    # PRICEWATCH_FRONTIER_OUTAGE_TIMEOUT (instead of retrying forever), says why, and
    # stores nothing it could not acknowledge as if it had.
    shop = SandboxProcess(sandbox_args(port=0, seed=9, shops=2, products=30, latency="200-400"))
    try:
        urls = shop.urls()
        env = scrapy_env(tmp_path, PRICEWATCH_FRONTIER_URL=private_redis.url)
        (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
        assert scrapy(tmp_path, "seed", "seeds.txt", env=env).returncode == 0
        crawl = start_scrapy(
            tmp_path, "crawl", "products",
            "-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False",
            "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=1", "-s", "PRICEWATCH_FRONTIER_CLAIM_BATCH=2",
            "-s", "PRICEWATCH_MAX_OUTSTANDING=4",
            "-s", "PRICEWATCH_FRONTIER_OUTAGE_TIMEOUT=3",
            env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if sum(h["requests"] for h in shop.stats()["hosts"].values()) >= 4:
                break
            time.sleep(0.05)
        private_redis.stop()
        stopped = time.monotonic()
        _, err = crawl.communicate(timeout=90)
        took = time.monotonic() - stopped
        assert crawl.returncode == 4, err[-3000:]
        assert "Frontier unreachable for more than 3s" in err
        assert took < 60, f"the crawl took {took:.0f}s to give up"
        stats: dict[str, Any] = json.loads((tmp_path / "stats.json").read_text())
        assert stats["finish_reason"] == "frontier_unavailable"
        assert "frontier unreachable for more than 3s" in stats["pricewatch/run/error"]
    finally:
        shop.stop()
