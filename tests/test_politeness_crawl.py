"""Politeness end to end: `scrapy crawl products` against the sandbox, checked from the
server's side (``/_stats``) and in the store.

A 429 storm on one of four shops: its circuit opens within the threshold, the shop sees no
request during the cooldown, the other shops keep their pace, and after the cooldown a
probe closes the circuit and every SKU is stored.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .fixtures.sandbox import SandboxProcess
from .helpers import scrapy, scrapy_env

THRESHOLD = 3
COOLDOWN = 3.0
PER_DOMAIN = 2

# Paced by the shops (fixed latency, 2 requests in flight per shop), not by the CPU.
CRAWL_SETTINGS = {
    "DOWNLOAD_DELAY": 0,
    "AUTOTHROTTLE_ENABLED": False,
    "CONCURRENT_REQUESTS_PER_DOMAIN": PER_DOMAIN,
    "ROBOTSTXT_OBEY": True,
    "RETRY_TIMES": 2,
    "PRICEWATCH_BACKOFF_BASE": 0.2,
    "PRICEWATCH_BACKOFF_MAX": 1.0,
    "PRICEWATCH_BREAKER_THRESHOLD": THRESHOLD,
    "PRICEWATCH_BREAKER_WINDOW": 30,
    "PRICEWATCH_BREAKER_COOLDOWN": COOLDOWN,
    "PRICEWATCH_BREAKER_MAX_COOLDOWN": 12,
    "PRICEWATCH_BREAKER_HALF_OPEN_RETRY": 0.3,
    "PRICEWATCH_FRONTIER_RETRY_DELAY": 0.3,
    "PRICEWATCH_FRONTIER_POLL_INTERVAL": 0.2,
    "PRICEWATCH_FRONTIER_HEALTH_WEIGHT": 0,
}


def settings_args(extra: dict[str, Any] | None = None) -> list[str]:
    args: list[str] = []
    for name, value in {**CRAWL_SETTINGS, **(extra or {})}.items():
        args += ["-s", f"{name}={value}"]
    return args


def stored_count(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return int(conn.execute("SELECT count(*) FROM products").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet, or busy
        return 0


@dataclass
class Sample:
    t: float
    hosts: dict[str, dict[str, Any]]


class FollowCrawl:
    """``scrapy crawl products -a follow=1`` in a subprocess, sampling the shop's /_stats,
    stopped (SIGINT, graceful) once ``expected`` SKUs are stored."""

    def __init__(
        self,
        tmp_path: Path,
        shop: SandboxProcess,
        expected: int,
        settings: dict[str, Any] | None = None,
    ) -> None:
        self.tmp_path, self.shop, self.expected = tmp_path, shop, expected
        self.samples: list[Sample] = []
        self.done_at: float | None = None
        self.log = open(tmp_path / "crawl.log", "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "scrapy", "crawl", "products", "-a", "follow=1"]
            + settings_args(settings),
            cwd=tmp_path,
            env=scrapy_env(tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            text=True,
        )

    def poll(self) -> Sample | None:
        """Take a sample; None once the crawl is done (or died)."""
        if self.done_at is not None or self.proc.poll() is not None:
            return None
        sample = Sample(time.monotonic(), self.shop.stats()["hosts"])
        self.samples.append(sample)
        if stored_count(self.tmp_path / "pricewatch.db") >= self.expected:
            self.done_at = sample.t
        return sample

    def stop(self) -> dict[str, Any]:
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)  # graceful: pipelines flush, leases complete
                self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.log.close()
        log = (self.tmp_path / "crawl.log").read_text()
        assert self.proc.returncode == 0, log[-3000:]
        assert "Traceback" not in log, log[-3000:]
        stats: dict[str, Any] = json.loads((self.tmp_path / "stats.json").read_text())
        return stats


def throughput(stats: dict[str, Any]) -> float:
    """Product pages per second one host served, from its first to its last request."""
    pages = sum(n for path, n in stats["paths"].items() if path != "/robots.txt")
    return (pages - 1) / (stats["last"] - stats["first"])


def start_shop(factory: Callable[..., SandboxProcess]) -> SandboxProcess:
    # Paced by the shops (150 ms each, 2 in flight per shop), not by the CPU.
    return factory(seed=3, shops=4, products=30, latency="150-150")


def seed(tmp_path: Path, urls: list[str]) -> None:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
    proc = scrapy(tmp_path, "seed", "seeds.txt")
    assert proc.returncode == 0, proc.stderr


def test_429_storm_trips_one_breaker_and_spares_the_other_shops(
    sandbox_factory: Callable[..., SandboxProcess], tmp_path: Path
) -> None:
    # Two identical sandboxes crawled at the same time, so both crawls share the machine's
    # load: one calm (the baseline), one with a 429 storm on its first shop.
    calm_shop, storm_shop = start_shop(sandbox_factory), start_shop(sandbox_factory)
    urls = {"calm": calm_shop.urls(), "storm": storm_shop.urls()}
    assert len(urls["calm"]) == len(urls["storm"])
    for name in urls:
        seed(tmp_path / name, urls[name])
    hosts = [s["host"] for s in storm_shop.shops]
    stormy, others = hosts[0], hosts[1:]
    # Every request to the stormy shop answers 429 (Retry-After: 1 s, shorter than the
    # cooldown) until the test calls the storm off.
    storm_shop.control(host=stormy, mode="ratelimit", rate=0, retry_after=1)
    calm_shop.reset_stats()
    storm_shop.reset_stats()

    crawls = {
        "calm": FollowCrawl(tmp_path / "calm", calm_shop, len(urls["calm"])),
        "storm": FollowCrawl(tmp_path / "storm", storm_shop, len(urls["storm"])),
    }
    opened_at: float | None = None
    called_off = False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            samples = {name: crawl.poll() for name, crawl in crawls.items()}
            if all(sample is None for sample in samples.values()):
                break
            sample = samples["storm"]
            if sample is not None:
                if opened_at is None and sample.hosts[stormy]["status"].get("429", 0) >= THRESHOLD:
                    opened_at = sample.t
                # Call the storm off during the cooldown: the probe finds the shop recovered.
                if opened_at is not None and not called_off and sample.t - opened_at > 1.5:
                    storm_shop.control(host=stormy, mode=None)
                    called_off = True
            time.sleep(0.05)
    finally:
        stats = {name: crawl.stop() for name, crawl in crawls.items()}
    assert opened_at is not None, "the storm never reached the breaker threshold"

    # Tripped within the threshold: at most THRESHOLD 429s, plus the requests already in
    # flight to that shop when the threshold-th one arrived, reached the shop.
    storm = storm_shop.host_stats(stormy)
    assert THRESHOLD <= storm["status"]["429"] <= THRESHOLD + PER_DOMAIN - 1
    assert stats["storm"]["pricewatch/breaker/opened"] == 1
    assert stats["storm"]["pricewatch/breaker/half_open"] >= 1
    assert stats["storm"]["pricewatch/breaker/closed"] == 1
    assert stats["storm"]["pricewatch/breaker/deferred"] >= 1

    # Zero requests to the stormy shop during the cooldown (once what was in flight landed).
    samples = crawls["storm"].samples

    def requests_at(t: float) -> int:
        return int([s for s in samples if s.t <= t][-1].hosts[stormy]["requests"])

    assert requests_at(opened_at + COOLDOWN - 0.3) - requests_at(opened_at + 0.3) == 0

    # The other shops kept >= 90% of the pace they have without a storm.
    calm_hosts = [s["host"] for s in calm_shop.shops][1:]
    baseline = sum(throughput(calm_shop.host_stats(h)) for h in calm_hosts)
    during = sum(throughput(storm_shop.host_stats(h)) for h in others)
    assert during >= 0.9 * baseline, (during, baseline)
    for host in others:
        assert storm_shop.host_stats(host)["status"].get("429", 0) == 0

    # The per-domain limit held at every shop of both crawls, counted by the shops.
    for shop in (calm_shop, storm_shop):
        for host, host_stats in shop.stats()["hosts"].items():
            assert host_stats["max_in_flight"] <= PER_DOMAIN, (host, host_stats)

    # Nothing lost: every SKU is stored, the stormy shop's too.
    for name, crawl in crawls.items():
        assert crawl.done_at is not None, f"{name}: not every SKU was stored"
        assert stored_count(tmp_path / name / "pricewatch.db") == len(urls[name])
        assert stats[name]["pricewatch/outcome/ok"] == len(urls[name])
    assert stats["calm"].get("pricewatch/breaker/opened", 0) == 0
