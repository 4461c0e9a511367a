"""The adaptive per-domain limit: its rule (pure), its storage in both frontier backends
(shared by workers, capping their claims), and the sandbox's tolerance mode it is
measured against."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import replace

import pytest
from scrapy.settings import Settings

from pricewatch.frontier import Entry, Frontier, Lease, policy_from_settings
from pricewatch.politeness.limits import DomainLimit, LimitConfig, Report, hour_of_week, step
from tests.fixtures.redis import MakeFrontier
from tests.fixtures.sandbox import SandboxProcess
from tests.helpers import project_settings

MONDAY = 1_796_601_600.0  # 2026-12-07 00:00 UTC, a Monday


def config(**overrides: object) -> LimitConfig:
    values = project_settings(CONCURRENT_REQUESTS_PER_DOMAIN=12, DOWNLOAD_DELAY=0.2)
    values.update(overrides)
    return LimitConfig.from_settings(Settings(values))


def healthy(n: int) -> Report:
    return Report(healthy=n)


def pushback(generation: int, why: str = "http_429") -> Report:
    report = Report()
    report.merge_pushback(generation, why)
    return report


def test_hour_of_week_starts_monday_midnight_utc() -> None:
    assert hour_of_week(MONDAY) == 0
    assert hour_of_week(MONDAY + 3600 * 25) == 25
    assert hour_of_week(MONDAY - 1) == 167


def test_a_new_domain_starts_at_start_and_ramps_one_per_round_trip() -> None:
    cfg = config()
    state = step(None, None, MONDAY, cfg)
    assert (state.concurrency, state.delay, state.slow_start) == (2, 0.2, True)
    state = step(state, healthy(1), MONDAY + 0.1, cfg)
    assert state.concurrency == 2  # one answer per request allowed in flight first
    state = step(state, healthy(1), MONDAY + 0.2, cfg)
    assert state.concurrency == 3
    state = step(state, healthy(3 + 4), MONDAY + 0.5, cfg)  # two round trips in one sync
    assert state.concurrency == 5
    assert state.reason == "healthy (ramp): concurrency 3 -> 5"
    for i in range(20):
        state = step(state, healthy(12), MONDAY + 1 + i, cfg)
    assert state.concurrency == 12  # the ceiling, CONCURRENT_REQUESTS_PER_DOMAIN
    assert not state.slow_start


def test_pushback_halves_once_per_generation_and_holds_growth() -> None:
    cfg = config(PRICEWATCH_LIMIT_INCREASE_INTERVAL=10.0)
    state = replace(DomainLimit.initial(cfg, MONDAY), limit=8.0)
    state = step(state, pushback(0), MONDAY + 1, cfg)
    assert (state.concurrency, state.generation, state.slow_start) == (4, 1, False)
    assert state.reason == "http_429: concurrency 8 -> 4"
    # Answers to the same burst (sent under generation 0) lower nothing more.
    assert step(state, pushback(0), MONDAY + 1.1, cfg).concurrency == 4
    # Healthy answers before the hold ends raise nothing; after it, +1.
    assert step(state, healthy(50), MONDAY + 5, cfg).concurrency == 4
    grown = step(state, healthy(4), MONDAY + 11.5, cfg)
    assert grown.concurrency == 5
    assert grown.reason == "healthy: concurrency 4 -> 5"
    # The level just reached fails again: back down, and twice as long before the next try.
    failed = step(grown, pushback(1), MONDAY + 12, cfg)
    assert (failed.concurrency, failed.hold) == (2, 20.0)
    assert step(failed, healthy(10), MONDAY + 25, cfg).concurrency == 2
    assert step(failed, healthy(10), MONDAY + 33, cfg).concurrency == 3


def test_at_the_floor_pushback_raises_the_delay_and_health_lowers_it_first() -> None:
    cfg = config(PRICEWATCH_LIMIT_INCREASE_INTERVAL=1.0, PRICEWATCH_LIMIT_MAX_DELAY=3.0)
    state = replace(DomainLimit.initial(cfg, MONDAY), limit=1.0, slow_start=False)
    state = step(state, pushback(0), MONDAY, cfg)
    assert (state.concurrency, state.delay) == (1, 1.0)
    state = step(state, pushback(1, "challenge"), MONDAY + 0.5, cfg)
    state = step(state, pushback(2), MONDAY + 0.6, cfg)
    assert state.delay == 3.0  # MAX_DELAY
    assert state.reason == "http_429: at the floor, delay 2s -> 3s"
    t = MONDAY + 1000
    state = step(state, healthy(1), t, cfg)
    assert (state.concurrency, state.delay) == (1, 1.5)
    delays = []
    for i in range(1, 5):
        state = step(state, healthy(1), t + 2 * i, cfg)
        delays.append((state.concurrency, state.delay))
    # Halved, never below DOWNLOAD_DELAY, and only then the concurrency goes up.
    assert delays == [(1, 0.75), (1, 0.375), (1, 0.2), (2, 0.2)]


def test_each_hour_of_the_week_starts_from_what_was_learned_in_it() -> None:
    cfg = config()
    state = replace(DomainLimit.initial(cfg, MONDAY), limit=8.0, slow_start=False)
    state = step(state, None, MONDAY + 10, cfg)  # Monday 00:xx: 8
    state = step(state, pushback(0), MONDAY + 3600 + 10, cfg)  # Monday 01:xx: peak, 4
    state = step(state, pushback(1), MONDAY + 3600 + 20, cfg)  # ... 2
    assert state.profile == {"0": 8.0, "1": 2.0}
    next_week = step(state, None, MONDAY + 7 * 86400 + 60, cfg)  # Monday 00:xx again
    assert next_week.concurrency == 8
    assert next_week.reason == "profile: hour 0 of the week"
    peak = step(next_week, None, MONDAY + 7 * 86400 + 3600 + 1, cfg)  # before any 429
    assert peak.concurrency == 2
    unknown = step(peak, None, MONDAY + 7 * 86400 + 2 * 3600, cfg)
    assert unknown.concurrency == 2  # nothing learned for 02:xx: keep the current limit


def test_the_start_follows_a_lower_per_domain_limit() -> None:
    assert config(CONCURRENT_REQUESTS_PER_DOMAIN=1).start == 1
    policy = policy_from_settings(Settings(project_settings(CONCURRENT_REQUESTS_PER_DOMAIN=1)))
    assert (policy.adaptive_limits, policy.limit_start) == (True, 1)


def test_operator_bounds_win_over_a_stored_limit() -> None:
    stored = replace(DomainLimit.initial(config(), MONDAY), limit=12.0, delay=0.0)
    lowered = step(stored, None, MONDAY, config(CONCURRENT_REQUESTS_PER_DOMAIN=4))
    assert (lowered.concurrency, lowered.delay) == (4, 0.2)
    explicit = config(PRICEWATCH_LIMIT_CEILING=3, PRICEWATCH_LIMIT_FLOOR=2)
    assert step(stored, None, MONDAY, explicit).concurrency == 3


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PRICEWATCH_LIMIT_FLOOR", 0, "PRICEWATCH_LIMIT_FLOOR must be >= 1, got 0"),
        ("PRICEWATCH_LIMIT_START", 0, "PRICEWATCH_LIMIT_START must be >= PRICEWATCH_LIMIT_FLOOR"),
        ("PRICEWATCH_LIMIT_DECREASE", 1.0, "PRICEWATCH_LIMIT_DECREASE must be in (0, 1)"),
        ("PRICEWATCH_LIMIT_LATENCY_FACTOR", 0.5, "PRICEWATCH_LIMIT_LATENCY_FACTOR must be > 1"),
        ("PRICEWATCH_LIMIT_PUSHBACK_CODES", [99], "must be HTTP statuses, got [99]"),
        ("PRICEWATCH_LIMIT_MAX_HOLD", 1.0, "PRICEWATCH_LIMIT_MAX_HOLD must be >="),
    ],
)
def test_invalid_settings_are_refused_by_name(name: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        config(**{name: value})


def test_a_stored_record_round_trips_and_ignores_unknown_fields() -> None:
    state = step(None, pushback(0), MONDAY, config())
    text = state.to_json()
    assert DomainLimit.from_json(text) == state
    data = json.loads(text)
    data["from_a_newer_version"] = 1
    assert DomainLimit.from_json(json.dumps(data)) == state


# -- storage: both frontier backends --------------------------------------------------------


def updater(cfg: LimitConfig, reports: dict[str, Report]) -> Callable[..., tuple[int, str]]:
    def update(domain: str, stored: str | None, now: float) -> tuple[int, str]:
        old = DomainLimit.from_json(stored) if stored else None
        state = step(old, reports.get(domain), now, cfg)
        return state.concurrency, state.to_json()

    return update


async def fetching(frontier: Frontier, n: int = 50) -> list[Lease]:
    return await frontier.claim(n)


async def test_claims_start_at_the_start_limit_and_follow_the_learned_one(
    make_frontier: MakeFrontier,
) -> None:
    frontier = await make_frontier(adaptive_limits=True, limit_start=2, domain_max_inflight=64)
    await frontier.add([Entry(f"https://a.test/p/{i}") for i in range(20)])
    await frontier.add([Entry(f"https://b.test/p/{i}") for i in range(20)])
    first = await fetching(frontier)
    assert sorted(lease.domain for lease in first) == ["a.test"] * 2 + ["b.test"] * 2
    cfg = config()
    # a.test ramps to 5, b.test pushed back to 1.
    reports = {"a.test": healthy(2 + 3 + 4), "b.test": pushback(0)}
    stored = await frontier.adjust_limits(["a.test", "b.test"], updater(cfg, reports))
    assert DomainLimit.from_json(stored["a.test"]).concurrency == 5
    assert DomainLimit.from_json(stored["b.test"]).concurrency == 1
    more = await fetching(frontier)
    assert sorted(lease.domain for lease in more) == ["a.test"] * 3  # 5 - 2 being fetched
    await frontier.release_slots(first)
    after = await fetching(frontier)
    # a.test: 3 of 5 still being fetched, 2 more; b.test: both fetches ended, 1 more.
    assert sorted(lease.domain for lease in after) == ["a.test"] * 2 + ["b.test"]
    assert set(await frontier.limits()) == {"a.test", "b.test"}


async def test_the_configured_cap_stays_the_upper_bound(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(adaptive_limits=True, limit_start=2, domain_max_inflight=3)
    await frontier.add([Entry(f"https://a.test/p/{i}") for i in range(20)])
    up = replace(DomainLimit.initial(config(), MONDAY), limit=10.0)
    await frontier.adjust_limits(["a.test"], lambda d, s, now: (10, up.to_json()))
    assert len(await fetching(frontier)) == 3


async def test_limits_are_ignored_when_the_limiter_is_off(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(limit_start=2, adaptive_limits=False, domain_max_inflight=5)
    await frontier.add([Entry(f"https://a.test/p/{i}") for i in range(20)])
    low = replace(DomainLimit.initial(config(), MONDAY), limit=1.0)
    await frontier.adjust_limits(["a.test"], lambda d, s, now: (1, low.to_json()))
    assert len(await fetching(frontier)) == 5


async def test_concurrent_updates_of_workers_are_never_lost(make_frontier: MakeFrontier) -> None:
    workers = [await make_frontier() for _ in range(3)]

    def plus_one(domain: str, stored: str | None, now: float) -> tuple[int, str]:
        count = 0 if stored is None else int(stored)
        return 1, str(count + 1)

    await asyncio.gather(
        *(w.adjust_limits(["a.test", "b.test"], plus_one) for w in workers for _ in range(10))
    )
    assert await workers[0].limits() == {"a.test": "30", "b.test": "30"}


async def test_purging_a_domain_forgets_its_limit(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier()
    await frontier.add([Entry("https://a.test/p/1")])
    await frontier.adjust_limits(["a.test"], lambda d, s, now: (1, "{}"))
    await frontier.purge_domain("a.test")
    assert await frontier.limits() == {}


# -- the sandbox's tolerance mode -----------------------------------------------------------


def test_the_sandbox_tolerance_answers_429_beyond_it_and_changes_at_run_time(
    sandbox_factory: Callable[..., SandboxProcess],
) -> None:
    shop = sandbox_factory(
        shops=1, products=12, latency="300", mode=["tolerance:concurrency=2,retry_after=3"]
    )
    urls = shop.urls()[:6]

    async def burst() -> list[tuple[int, str | None]]:
        def get(url: str) -> tuple[int, str | None]:
            try:
                with urllib.request.urlopen(url, timeout=10) as resp:
                    return resp.status, None
            except urllib.error.HTTPError as exc:
                return exc.code, exc.headers.get("Retry-After")

        return list(await asyncio.gather(*(asyncio.to_thread(get, u) for u in urls)))

    answers = asyncio.run(burst())
    assert sorted(answers, key=str) == [(200, None)] * 2 + [(429, "3")] * 4
    shop.control(mode="tolerance", concurrency=5)
    assert sorted(status for status, _ in asyncio.run(burst())) == [200] * 5 + [429]
    [stats] = shop.stats()["hosts"].values()
    assert stats["status"] == {"200": 7, "429": 5}
    assert stats["max_accepted"] == 5
