"""The adaptive per-domain limit end to end: `scrapy crawl products` against sandbox shops
whose tolerance is a number of requests in flight (429 with Retry-After beyond it),
checked at the server (``/_stats``) and in the shared limit.

Small and fast versions of the measured scenarios; ``bench/limits.py`` runs them at the
issue's sizes (60 SKUs at 600 ms, default settings).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pricewatch.frontier import frontier_from_url
from pricewatch.politeness.limits import DomainLimit

from .fixtures.sandbox import SandboxProcess
from .helpers import scrapy, scrapy_env, start_scrapy

pytestmark = pytest.mark.timeout(240)  # ~15-25 s each on a quiet machine


def seed(tmp_path: Path, urls: list[str], env: dict[str, str]) -> None:
    (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
    seeded = scrapy(tmp_path, "seed", "seeds.txt", env=env)
    assert seeded.returncode == 0, seeded.stderr[-2000:]


def args(settings: dict[str, Any]) -> list[str]:
    return [a for name, value in settings.items() for a in ("-s", f"{name}={value}")]


def test_a_shop_tolerating_one_request_gets_one(
    tmp_path: Path, sandbox_factory: Callable[..., SandboxProcess]
) -> None:
    """Default settings: every SKU stored in one run, at most 10 % of requests answered
    429, the breaker never opened, and the learned limit (1) is stored."""
    shop = sandbox_factory(
        shops=1, products=50, latency="250", mode=["tolerance:concurrency=1,retry_after=2"]
    )
    host = shop.shops[0]["host"]
    urls = shop.urls()[:40]
    env = scrapy_env(tmp_path)
    seed(tmp_path, urls, env)
    shop.reset_stats()
    crawl = scrapy(tmp_path, "crawl", "products", env=env)
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    stats = json.loads((tmp_path / "stats.json").read_text())
    served = shop.host_stats(host)
    assert stats["pricewatch/store/rows_written"] == len(urls)
    page_requests = served["requests"] - served["paths"].get("/robots.txt", 0)
    rejected = served["status"].get("429", 0)
    assert 1 <= rejected <= 0.1 * page_requests, served
    assert served["max_demand"] <= 2
    assert "pricewatch/breaker/opened" not in stats
    assert stats[f"pricewatch/limit/domain/{host}"]["concurrency"] == 1
    assert stats[f"pricewatch/limit/domain/{host}"]["reason"].startswith("http_429")
    assert stats["elapsed_time_seconds"] <= 2 * len(urls) * 0.25  # twice the ideal

    shown = scrapy(tmp_path, "frontier", "--limits", env=env)
    assert shown.returncode == 0, shown.stderr
    assert f"{host}\n  concurrency 1, delay 0.2s" in shown.stdout
    assert "http_429: concurrency 2 -> 1" in shown.stdout


async def watch(
    url: str, domain: str, ok: Callable[[DomainLimit], bool], seconds: float, shop: SandboxProcess
) -> tuple[DomainLimit, dict[str, Any]]:
    """Poll the shared limit of ``domain`` (one connection) until ``ok``; then at once the
    shop's counters: what it had served by then."""
    frontier = frontier_from_url(url)
    async with frontier:
        deadline = time.monotonic() + seconds
        last = None
        while time.monotonic() < deadline:
            stored = (await frontier.limits()).get(domain)
            last = None if stored is None else DomainLimit.from_json(stored)
            if last is not None and ok(last):
                return last, shop.host_stats(domain)
            await asyncio.sleep(0.02)
    raise AssertionError(f"limit of {domain} never got there: {last}")


def wait_for(
    url: str, domain: str, ok: Callable[[DomainLimit], bool], timeout: float, shop: SandboxProcess
) -> tuple[DomainLimit, dict[str, Any]]:
    return asyncio.run(watch(url, domain, ok, timeout, shop))


def test_three_workers_share_one_limit_that_follows_the_tolerance(
    tmp_path: Path,
    sandbox_factory: Callable[..., SandboxProcess],
    redis_frontier_url: str,
) -> None:
    """Three workers on one Redis frontier: the shop never has more requests in flight than
    its tolerance + 1; when the tolerance drops from 8 to 2 the shared limit follows within
    20 requests, and when it rises again the limit recovers."""
    shop = sandbox_factory(
        shops=1, products=1200, latency="200", mode=["tolerance:concurrency=8,retry_after=1"]
    )
    host = shop.shops[0]["host"]
    env = scrapy_env(tmp_path, PRICEWATCH_FRONTIER_URL=redis_frontier_url)
    seed(tmp_path, shop.urls(), env)
    settings = {
        "DOWNLOAD_DELAY": 0,  # paced by the shop's latency and the limit alone
        "PRICEWATCH_LIMIT_INCREASE_INTERVAL": 0.5,
        "PRICEWATCH_LIMIT_MAX_HOLD": 2,
        "PRICEWATCH_BACKOFF_BASE": 0.2,
        # The drop answers a whole burst with 429 at once, which can reach one worker's
        # breaker threshold (5) and pause the shop for a minute: this test is about the limit.
        "PRICEWATCH_BREAKER_THRESHOLD": 50,
        "PRICEWATCH_STATS_FILE": "",
    }
    workers: list[subprocess.Popen[str]] = []
    try:
        for _ in range(3):
            workers.append(start_scrapy(tmp_path, "crawl", "products", *args(settings), env=env))
        reached, _ = wait_for(redis_frontier_url, host, lambda s: s.concurrency >= 8, 90, shop)
        assert reached.concurrency <= 9
        before = shop.host_stats(host)["requests"]
        shop.control(mode="tolerance", concurrency=2, retry_after=1)
        _, then = wait_for(redis_frontier_url, host, lambda s: s.concurrency <= 2, 20, shop)
        followed_in = then["requests"] - before
        assert followed_in <= 20
        demand_at_2 = shop.host_stats(host)
        shop.reset_stats()
        time.sleep(2)
        at_two = shop.host_stats(host)
        assert at_two["max_demand"] <= 3, at_two  # tolerance + 1, across the three workers
        shop.control(mode="tolerance", concurrency=8, retry_after=1)
        recovered, _ = wait_for(redis_frontier_url, host, lambda s: s.concurrency >= 7, 60, shop)
        assert recovered.concurrency <= 9
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            _, err = worker.communicate(timeout=30)
            assert "Traceback" not in err, err[-3000:]
    assert demand_at_2["status"].get("429", 0) >= 1
