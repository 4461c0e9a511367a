"""Drift alarms: per-domain rates over a rolling window, mass changes held, and a crawl
of the sandbox in which one shop's markup breaks and another reprices everything."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from pricewatch.drift import STEPS, DriftConfig, DriftMonitor, MassChanges, _Window
from pricewatch.driftstate import drift_states_from_settings
from pricewatch.frontier import Completion, Lease
from pricewatch.outcomes import Outcome
from pricewatch.quarantine import QuarantineConfig
from pricewatch.spiders.products import ProductSpider
from pricewatch.storage import Observation, store_from_url

from .helpers import project_settings, scrapy, scrapy_env, start_scrapy

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def lease(domain: str, n: int) -> Lease:
    return Lease(url=f"https://{domain}/p/{n}", domain=domain, token=f"t{n}", deadline=0.0)


def config(**thresholds: float) -> DriftConfig:
    return DriftConfig(window=60.0, min_sample=10, thresholds=thresholds)


async def test_a_domain_over_a_rate_raises_one_alarm_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'f.db'}"
    crawler = get_crawler(
        ProductSpider,
        settings_dict=project_settings(PRICEWATCH_FRONTIER_URL=url, PRICEWATCH_DRIFT_MIN_SAMPLE=10),
    )
    crawler.stats.open_spider()  # type: ignore[union-attr]
    monitor = DriftMonitor.of(crawler)
    ok = [Completion(lease(d, i), Outcome.OK) for d in ("a.test", "b.test") for i in range(10)]
    monitor.completed(ok)
    caplog.set_level(logging.INFO, logger="pricewatch.drift")
    # b.test: its offers fail validation (invalid), not "no price"; a.test: nothing found.
    missing = [
        Completion(lease("a.test", 100 + i), Outcome.NO_PRICE, reason="not_found")
        for i in range(12)
    ]
    invalid = [
        Completion(lease("b.test", 100 + i), Outcome.NO_PRICE, reason="invalid_currency")
        for i in range(2)
    ]
    monitor.completed(missing + invalid)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, errors
    assert errors[0].startswith("Drift alarm on a.test: no_price rate 50% (10 of 20) over the")
    assert "baseline 0% (the first 10 of the window), threshold 50%" in errors[0]
    stats = crawler.stats.get_stats()  # type: ignore[union-attr]
    assert stats["pricewatch/drift/alarms"] == 1
    assert stats["pricewatch/drift/alarms/no_price"] == 1
    # Back under the threshold: cleared once.
    monitor.completed([Completion(lease("a.test", 200 + i), Outcome.OK) for i in range(3)])
    assert crawler.stats.get_value("pricewatch/drift/recovered") == 1  # type: ignore[union-attr]
    await monitor.spider_closed()
    states = drift_states_from_settings(Settings(project_settings(PRICEWATCH_FRONTIER_URL=url)))
    [alarm] = await states.active()
    assert (alarm.domain, alarm.kind) == ("a.test", "no_price")
    assert alarm.until == pytest.approx(alarm.raised_at + 3600)


def test_mass_changes_are_named_once_the_minimum_sample_is_reached() -> None:
    guard = MassChanges(config(mass_change=0.5, mass_out_of_stock=0.8))
    reasons = [guard.observe("a.test", changed=True, out_of_stock=False) for _ in range(12)]
    assert reasons == [None] * 9 + ["mass_change"] * 3
    assert [guard.observe("b.test", changed=False, out_of_stock=False) for _ in range(12)] == [
        None
    ] * 12
    oos = [guard.observe("c.test", changed=False, out_of_stock=True) for _ in range(10)]
    assert oos[-1] == "mass_out_of_stock"
    raised = guard.take_raised()
    assert [(d, r.kind) for d, r in raised] == [
        ("a.test", "mass_change"),
        ("c.test", "mass_out_of_stock"),
    ]
    assert guard.take_raised() == []


def observation(n: int, price: str, minutes: int) -> Observation:
    return Observation(
        url=f"https://a.test/p/{n}",
        domain="a.test",
        price=Decimal(price),
        currency="EUR",
        raw_hash=price,
        observed_at=T0 + timedelta(minutes=minutes),
    )


async def test_the_store_holds_the_changes_of_a_mass_change(store_url: str) -> None:
    guard = MassChanges(DriftConfig(window=60.0, min_sample=3, thresholds={"mass_change": 0.5}))
    async with store_from_url(store_url, quarantine=QuarantineConfig()) as store:
        store.mass_guard = guard
        await store.write([observation(n, "10.00", 0) for n in range(6)])
        moved = await store.write([observation(n, "10.50", 1) for n in range(6)])
        assert len(moved.changed) == 2  # before the minimum sample: published
        assert set(moved.held.values()) == {"mass_change"} and len(moved.held) == 4
        # A second fetch confirms a held change: published.
        confirmed = await store.write([observation(5, "10.50", 2)])
        assert confirmed.confirmed == {"https://a.test/p/5"}
        held = await store.quarantine()
    assert sorted((h.url[-1], h.status) for h in held) == [
        ("2", "held"),
        ("3", "held"),
        ("4", "held"),
        ("5", "confirmed"),
    ]


# -- the crawl -------------------------------------------------------------------------------

CRAWL = [
    "-s", "DOWNLOAD_DELAY=0.05",
    "-s", "AUTOTHROTTLE_ENABLED=False",
    "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=2",
    "-s", "PRICEWATCH_DRIFT_MIN_SAMPLE=10",
    # Below the default 0.5, so the alarm fires however late in the crawl the switch lands.
    "-s", "PRICEWATCH_DRIFT_NO_PRICE_RATE=0.3",
]  # fmt: skip


def frontier(tmp_path: Path, env: dict[str, str], *args: str) -> str:
    proc = scrapy(tmp_path, "frontier", *args, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_broken_shop_drifts_alone_and_a_mass_reprice_is_held(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    shop = sandbox_factory(seed=3, shops=2, products=40, latency="10-30")
    broken, repriced = (s["host"] for s in shop.shops)
    (tmp_path / "seeds.txt").write_text("\n".join(shop.urls()) + "\n")
    env = scrapy_env(tmp_path)
    assert scrapy(tmp_path, "seed", "seeds.txt", env=env).returncode == 0

    # Crawl 1: once the crawl is under way, one shop relaunches with a new template.
    proc = start_scrapy(tmp_path, "crawl", "products", *CRAWL, env=env)
    deadline = time.monotonic() + 60
    while shop.host_stats(broken)["requests"] < 8 and time.monotonic() < deadline:
        time.sleep(0.02)
    shop.control(host=broken, mode="redesign")
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    alarms = [line for line in stderr.splitlines() if "ERROR: Drift alarm on" in line]
    assert len(alarms) == 1, stderr[-3000:]
    assert f"Drift alarm on {broken}: no_price rate" in alarms[0]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["pricewatch/drift/alarms/no_price"] == 1
    assert stats["pricewatch/outcome/no_price"] >= 10
    shown = frontier(tmp_path, env)
    assert f"drifting: {broken}: no_price rate" in shown and f"drifting: {repriced}" not in shown

    # Crawl 2: the template is fixed; the other shop reprices every product at once.
    shop.control(host=broken, mode=None)
    shop.control(hosts=[repriced], reprice=1.0)
    for host in (broken, repriced):
        frontier(tmp_path, env, "--requeue", host)
    proc = start_scrapy(tmp_path, "crawl", "products", *CRAWL, env=env)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    alarms = [line for line in stderr.splitlines() if "ERROR: Drift alarm on" in line]
    assert len(alarms) == 1, stderr[-3000:]
    assert f"Drift alarm on {repriced}: mass_change rate" in alarms[0]
    assert "held until confirmed" in alarms[0]
    stats = json.loads((tmp_path / "stats.json").read_text())
    # Every change but those seen before the minimum sample (9) was held, not published.
    assert stats["pricewatch/quarantine/held/mass_change"] == len(shop.urls(host=repriced)) - 9
    shown = frontier(tmp_path, env, "--domain", repriced)
    assert f"drifting: {repriced}: mass_change rate" in shown


def test_a_busy_domain_s_window_holds_steps_not_events() -> None:
    """An hour of a domain at 50 outcomes a second is 180,000 events; the window keeps one
    entry per label and step, and its counts and baseline stay exact to within one step."""
    window = _Window()
    seconds = 3600.0
    now = 1000.0
    for i in range(180_000):
        now = 1000.0 + i / 50
        window.add(now, "no_price" if i % 10 == 0 else "ok", seconds)
    assert len(window.events) <= 2 * STEPS + 2
    assert window.counts["no_price"] + window.counts["ok"] >= 180_000 - 50 * seconds / STEPS
    reading = window.read("no_price", 20)
    assert reading is not None and reading.rate == pytest.approx(0.1, abs=0.001)
    assert reading.baseline_from.startswith("the first 20")
    # Half an hour later the first half has left the window and is the baseline.
    for i in range(90_000):
        window.add(now + (i + 1) / 50, "ok", seconds)
    reading = window.read("no_price", 20)
    assert reading is not None
    assert window.before["no_price"] + window.before["ok"] >= 90_000 - 50 * seconds / STEPS
    assert reading.baseline == pytest.approx(0.1, abs=0.001)
    assert reading.rate == pytest.approx(0.05, abs=0.002)
    assert len(window.events) <= 2 * STEPS + 2
