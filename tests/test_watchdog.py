"""The reactor watchdog: lag in the stats, and a warning naming the code that blocked the
event loop, sampled from another thread."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pricewatch.watchdog import percentile

from .helpers import scrapy, scrapy_env

PIPELINES = {
    "pricewatch.pipelines.ValidationPipeline": 300,
    "tests.blocking.BlockingPipeline": 500,
    "pricewatch.pipelines.StorePipeline": 800,
}


def test_percentiles_of_a_millisecond_histogram() -> None:
    histogram = Counter({0: 90, 3: 9, 700: 1})
    assert percentile(histogram, 0.5) == 0
    assert percentile(histogram, 0.99) == 3
    assert percentile(histogram, 1.0) == 700
    assert percentile(Counter(), 0.99) == 0


def test_a_blocking_pipeline_is_named_in_a_warning(sandbox: Any, tmp_path: Path) -> None:
    urls = sandbox.urls(host=sandbox.shops[0]["host"])[:6]
    (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
    env = scrapy_env(tmp_path)
    assert scrapy(tmp_path, "seed", "seeds.txt", env=env).returncode == 0
    proc = scrapy(
        tmp_path,
        "crawl", "products",
        "-s", "DOWNLOAD_DELAY=0",
        "-s", "AUTOTHROTTLE_ENABLED=False",
        "-s", f"ITEM_PIPELINES={json.dumps(PIPELINES)}",
        "-s", "PRICEWATCH_WATCHDOG_THRESHOLD=0.6",
        # Every stall logged: on a loaded machine the loop may also stall by itself, and a
        # rate limit could then keep the blocking call's warning out.
        "-s", "PRICEWATCH_WATCHDOG_LOG_INTERVAL=0",
        env=env,
        timeout=90,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    warnings = [line for line in proc.stderr.splitlines() if "WARNING: Event loop blocked" in line]
    named = [w for w in warnings if "running look_up_competitor_price_synchronously (" in w]
    assert len(named) == 1, proc.stderr[-3000:]  # one stall of it, one warning
    assert "tests/blocking.py:" in named[0]
    # The stack follows the headline: the pipeline's frame calls the blocking function.
    tail = proc.stderr.split(named[0], 1)[1]
    assert "in process_item" in tail
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["pricewatch/outcome/ok"] == 6
    assert stats["pricewatch/watchdog/lag_max_ms"] >= 1000
    assert stats["pricewatch/watchdog/stalls"] >= 1
    assert stats["pricewatch/watchdog/samples"] >= 2
    assert 0 <= stats["pricewatch/watchdog/lag_p50_ms"] <= stats["pricewatch/watchdog/lag_p99_ms"]
    assert stats["pricewatch/watchdog/lag_p99_ms"] <= stats["pricewatch/watchdog/lag_max_ms"]


@pytest.mark.parametrize(
    ("name", "value"),
    [("PRICEWATCH_WATCHDOG_INTERVAL", "0"), ("PRICEWATCH_WATCHDOG_THRESHOLD", "-1")],
)
def test_bad_settings_are_refused_by_name(tmp_path: Path, name: str, value: str) -> None:
    proc = scrapy(tmp_path, "crawl", "products", "-s", f"{name}={value}", timeout=60)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert f"{name} must be >= " in proc.stderr
