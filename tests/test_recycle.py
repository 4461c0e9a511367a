"""Worker recycling: a follow-mode worker stops claiming after N SKUs, finishes what it
holds and exits 0; the next one takes over; every SKU is fetched and stored once."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pricewatch.recycle import rss_mb

from .helpers import scrapy, scrapy_env

FAST = ["-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False"]


def test_rss_is_read_from_the_process() -> None:
    rss = rss_mb()
    assert rss is not None and 5 < rss < 4096


@pytest.mark.parametrize("value", ["-1"])
def test_a_negative_limit_is_refused_by_name(tmp_path: Path, value: str) -> None:
    proc = scrapy(tmp_path, "crawl", "products", "-s", f"PRICEWATCH_RECYCLE_AFTER_SKUS={value}")
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "PRICEWATCH_RECYCLE_AFTER_SKUS must be >= 0" in proc.stderr


def test_follow_mode_workers_recycle_after_n_skus_and_store_each_once(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    shop = sandbox_factory(seed=9, shops=3, products=80)
    urls = shop.urls()[:200]
    assert len(urls) == 200
    (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
    env = scrapy_env(tmp_path)
    assert scrapy(tmp_path, "seed", "seeds.txt", env=env).returncode == 0
    n = 100
    runs = []
    for _ in range(2):
        proc = scrapy(
            tmp_path, "crawl", "products", "-a", "follow=1", *FAST,
            "-s", f"PRICEWATCH_RECYCLE_AFTER_SKUS={n}",
            env=env, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "Recycling this worker" in proc.stderr
        runs.append(json.loads((tmp_path / "stats.json").read_text()))
    for stats in runs:
        assert stats["finish_reason"] == "finished"
        assert stats["pricewatch/recycle/reason"] == "skus"
        assert stats["pricewatch/frontier/claimed"] == n
        assert stats["pricewatch/outcome/ok"] == n
        assert stats["pricewatch/memory/rss_max_mb"] > 0
    with sqlite3.connect(tmp_path / "pricewatch.db") as db:
        stored = dict(db.execute("SELECT url, COUNT(*) FROM price_changes GROUP BY url"))
        [(leased,)] = db.execute(
            "SELECT COUNT(*) FROM frontier_entries WHERE lease_token IS NOT NULL"
        )
    assert sorted(stored) == sorted(urls) and set(stored.values()) == {1}
    assert leased == 0  # no lease left behind by either worker
    # Nothing fetched twice, seen from the shops.
    paths = {}
    for host, counts in shop.stats()["hosts"].items():
        for path, count in counts["paths"].items():
            paths[(host, path)] = count
    fetched = [count for (host, path), count in paths.items() if path.startswith("/products/")]
    assert fetched and set(fetched) == {1} and len(fetched) == len(urls)
