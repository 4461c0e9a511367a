"""Many crawler processes sharing one Redis frontier and one PostgreSQL store.

What each worker fetched is counted at the sandbox (server side), so "exactly once" is
measured where it matters, not inferred from the crawler's own logs.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest
import redis

from .fixtures.sandbox import SandboxProcess, sandbox_args
from .helpers import scrapy, scrapy_env, start_scrapy

pytestmark = pytest.mark.long

REDIS = "redis://127.0.0.1:6379/0"
WORKERS = 3
# Small lease holdings per worker, so that the schedule is shared out between them.
FAST = [
    *("-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False"),
    *("-s", "CONCURRENT_REQUESTS_PER_DOMAIN=2", "-s", "PRICEWATCH_MAX_OUTSTANDING=6"),
    *("-s", "PRICEWATCH_FRONTIER_CLAIM_BATCH=3", "-s", "PRICEWATCH_FLUSH_INTERVAL=0.3"),
]


@pytest.fixture
def frontier_url() -> Iterator[str]:
    namespace = f"test-{uuid.uuid4().hex[:12]}"
    yield f"{REDIS}?namespace={namespace}"
    client = redis.Redis.from_url(REDIS)
    try:
        keys = list(client.scan_iter(match=f"pricewatch:{{{namespace}}}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
def shop() -> Iterator[SandboxProcess]:
    # Slow enough pages that the workers' crawls overlap even if one starts seconds late.
    proc = SandboxProcess(sandbox_args(port=0, seed=11, shops=3, products=30, latency="300-600"))
    try:
        yield proc
    finally:
        proc.stop()


def product_fetches(shop: SandboxProcess) -> dict[str, int]:
    """Requests served per product URL, counted by the sandbox."""
    counts: dict[str, int] = {}
    for host, stats in shop.stats()["hosts"].items():
        base = next(s["base_url"] for s in shop.shops if s["host"] == host)
        for path, path_stats in stats["paths"].items():
            if path.startswith("/products/"):
                requests = path_stats["requests"] if isinstance(path_stats, dict) else path_stats
                counts[base + path] = int(requests)
    return counts


def start_worker(tmp_path: Path, env: dict[str, str], n: int, *args: str) -> subprocess.Popen[str]:
    worker_env = dict(env, PRICEWATCH_STATS_FILE=str(tmp_path / f"stats-{n}.json"))
    return start_scrapy(tmp_path, "crawl", "products", *FAST, *args, env=worker_env)


def stored(postgres_url: str) -> tuple[int, int, int]:
    async def query() -> tuple[int, int, int]:
        conn = await asyncpg.connect(postgres_url)
        try:
            products = await conn.fetchval("SELECT count(*) FROM products")
            changes = await conn.fetchrow("SELECT count(*), count(DISTINCT url) FROM price_changes")
            return int(products), int(changes[0]), int(changes[1])
        finally:
            await conn.close()

    return asyncio.run(query())


def seed_all(tmp_path: Path, env: dict[str, str], urls: list[str]) -> None:
    (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
    proc = scrapy(tmp_path, "seed", "seeds.txt", env=env)
    assert proc.returncode == 0, proc.stderr


def held(shop: SandboxProcess) -> int:
    """Page requests the sandbox's ``hold`` mode keeps waiting, over every shop."""
    modes = shop.control()["modes"].values()
    return sum(m.get("held", 0) for host_modes in modes for m in host_modes)


def test_three_workers_fetch_every_due_sku_exactly_once(
    shop: SandboxProcess, frontier_url: str, postgres_url: str, tmp_path: Path
) -> None:
    urls = shop.urls()
    env = scrapy_env(
        tmp_path, PRICEWATCH_FRONTIER_URL=frontier_url, PRICEWATCH_STORE_URL=postgres_url
    )
    seed_all(tmp_path, env, urls)
    shop.reset_stats()
    # The shops' shared limit (3 domains x 2 being fetched) is the three workers' holdings
    # together (2 each), so no worker can take it all. The shops hold every page request
    # until each worker has its 2 waiting: however late a process starts on a busy machine,
    # it has claimed its share before anything is fetched. (Held fetches stay within
    # DOWNLOAD_TIMEOUT, which is above the wait.)
    holding = 2
    shared = ["-s", f"PRICEWATCH_MAX_OUTSTANDING={holding}", "-s", "DOWNLOAD_TIMEOUT=90"]
    shop.control(mode="hold")
    workers = [start_worker(tmp_path, env, n, *shared) for n in range(WORKERS)]
    try:
        deadline = time.monotonic() + 60
        while held(shop) < WORKERS * holding:
            ended = [w.args for w in workers if w.poll() is not None]
            assert not ended and time.monotonic() < deadline, (
                f"{held(shop)} page requests held, workers ended: {ended}"
            )
            time.sleep(0.05)
    except BaseException:
        for worker in workers:
            worker.kill()
            worker.communicate()
        raise
    finally:
        shop.control(clear="hold")
    for worker in workers:
        _, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err[-3000:]
    fetched = product_fetches(shop)
    assert sorted(fetched) == sorted(urls)
    assert set(fetched.values()) == {1}, "a SKU was fetched by two workers"
    claimed = [
        json.loads((tmp_path / f"stats-{n}.json").read_text()).get("pricewatch/frontier/claimed", 0)
        for n in range(WORKERS)
    ]
    assert sum(claimed) == len(urls)
    assert all(c >= holding for c in claimed), f"the work was not shared: {claimed}"
    assert stored(postgres_url) == (len(urls), len(urls), len(urls))


def test_worker_killed_midway_loses_no_sku(
    shop: SandboxProcess, frontier_url: str, postgres_url: str, tmp_path: Path
) -> None:
    urls = shop.urls()
    env = scrapy_env(
        tmp_path, PRICEWATCH_FRONTIER_URL=frontier_url, PRICEWATCH_STORE_URL=postgres_url
    )
    seed_all(tmp_path, env, urls)
    shop.reset_stats()
    # Short enough that the killed worker's leases expire soon, long enough that a live
    # worker's lease outlasts its wait for the domain's (adaptive) limit on a busy machine.
    lease = ["-s", "PRICEWATCH_FRONTIER_LEASE_TTL=8"]
    workers = [start_worker(tmp_path, env, n, *lease) for n in range(WORKERS)]
    deadline = time.monotonic() + 60
    while sum(product_fetches(shop).values()) < 10 and time.monotonic() < deadline:
        time.sleep(0.05)
    workers[0].send_signal(signal.SIGKILL)
    workers[0].communicate(timeout=10)
    for worker in workers[1:]:
        _, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err[-3000:]
    time.sleep(8.5)  # the killed worker's leases expire
    final = start_worker(tmp_path, env, 9, *lease)
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err[-3000:]
    fetched = product_fetches(shop)
    assert sorted(fetched) == sorted(urls), "a SKU was never fetched"
    assert stored(postgres_url) == (len(urls), len(urls), len(urls))
    # Only what the killed worker held (PRICEWATCH_MAX_OUTSTANDING) can be fetched twice.
    assert sum(fetched.values()) - len(urls) <= 6
    hosts = {urlsplit(u).hostname for u in urls}
    assert len(hosts) == 3
