"""The request budget's estimator and allocation (pricewatch/frontier/budget.py), and the
budget settings."""

from __future__ import annotations

import math
import random

import pytest
from scrapy.settings import Settings

from pricewatch.frontier import budget, policy_from_settings
from pricewatch.frontier.budget import RatePrior, RateState

from .helpers import project_settings

PRIOR = RatePrior(rate=1 / 3600, weight=0.5, memory=12)


@pytest.mark.parametrize("y", [1e-12, 1e-6, 1e-3, 0.1, 0.4, 0.5, 0.6, 0.9, 0.999, 1 - 1e-9])
def test_g_inverse_inverts_g(y: float) -> None:
    r = budget.g_inverse(y)
    assert -math.expm1(-r) - r * math.exp(-r) == pytest.approx(y, rel=1e-9, abs=1e-15)


def test_g_inverse_edges() -> None:
    assert budget.g_inverse(0.0) == 0.0
    assert budget.g_inverse(1.0) == math.inf


def observe_poisson(
    rng: random.Random, prior: RatePrior, lam: float, intervals: list[float], state: RateState
) -> RateState:
    now = state.observed_at or 1000.0
    if state.observed_at <= 0:
        state = budget.observe(prior, state, now, False)
    for t in intervals:
        now += t
        changed = rng.random() < -math.expm1(-lam * t)
        state = budget.observe(prior, state, now, changed)
    return state


@pytest.mark.parametrize("lam_per_hour", [0.05, 0.5, 2.0, 6.0])
def test_the_estimate_finds_the_rate_from_irregular_fetches(lam_per_hour: float) -> None:
    """Intervals log-uniform over 10 minutes .. 5 hours; a long memory so the estimate is the
    maximum-likelihood rate of many fetches."""
    prior = RatePrior(rate=1 / 3600, weight=0.5, memory=2000)
    rng = random.Random(7)
    lam = lam_per_hour / 3600
    intervals = [600 * 30 ** rng.random() for _ in range(4000)]
    state = observe_poisson(rng, prior, lam, intervals, RateState())
    assert budget.rate(prior, state) == pytest.approx(lam, rel=0.15)


def test_a_new_sku_has_the_prior_rate() -> None:
    assert budget.rate(PRIOR, RateState()) == PRIOR.rate
    first = budget.observe(PRIOR, RateState(), 5000.0, True)
    assert first == RateState(PRIOR.weight, PRIOR.weight / PRIOR.rate, 5000.0)
    assert budget.rate(PRIOR, first) == pytest.approx(PRIOR.rate)


def test_a_rate_shift_is_re_estimated_within_a_few_fetches() -> None:
    """A SKU that changed about once a day starts changing several times an hour (a sale),
    fetched hourly: one changed fetch multiplies its estimate by 3, four by 10."""
    rng = random.Random(3)
    state = observe_poisson(rng, PRIOR, 1 / 86400, [3600.0] * 100, RateState())
    before = budget.rate(PRIOR, state)
    assert 0.3 / 86400 < before < 3 / 86400
    rates = []
    for _ in range(4):
        state = budget.observe(PRIOR, state, state.observed_at + 3600, True)
        rates.append(budget.rate(PRIOR, state))
    assert rates[0] > 3 * before
    assert rates[3] > 10 * before
    assert rates[3] > 0.3 / 3600


def test_an_unchanged_fetch_lowers_and_a_changed_one_raises_the_estimate() -> None:
    state = budget.observe(PRIOR, RateState(), 1000.0, False)
    before = budget.rate(PRIOR, state)
    assert budget.rate(PRIOR, budget.observe(PRIOR, state, 4600.0, False)) < before
    assert budget.rate(PRIOR, budget.observe(PRIOR, state, 4600.0, True)) > before
    # No time passed: no information.
    assert budget.observe(PRIOR, state, 1000.0, True)[:2] == state[:2]


def skus(n: int, seed: int) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    return [(10 ** rng.uniform(-3, -1) / 60, min(rng.paretovariate(1.2), 100.0)) for _ in range(n)]


def weighted_freshness(rows: list[tuple[float, float]], intervals: list[float]) -> float:
    total = sum(w for _, w in rows)
    return (
        sum(w * budget.freshness(lam, i) for (lam, w), i in zip(rows, intervals, strict=True))
        / total
    )


def test_the_allocation_spends_the_budget_and_beats_simple_policies() -> None:
    rows = skus(2000, 1)
    lo, hi = 60.0, 7 * 86400.0
    per_hour = 2000.0
    mu = budget.allocate(rows, per_hour, lo, hi)
    planned = [budget.planned_interval(lam, w, mu, lo, hi) for lam, w in rows]
    assert sum(3600 / i for i in planned) == pytest.approx(per_hour, rel=0.01)
    total_w = sum(w for _, w in rows)
    uniform = [len(rows) / per_hour * 3600] * len(rows)
    by_importance = [total_w / (w * per_hour) * 3600 for _, w in rows]
    best = weighted_freshness(rows, planned)
    assert best > weighted_freshness(rows, uniform) + 0.05
    assert best > weighted_freshness(rows, by_importance)
    # A local optimum: moving budget between two SKUs planned in range lowers freshness.
    inside = [k for k, i in enumerate(planned) if lo * 1.5 < i < hi / 1.5][:2]
    a, b = inside
    for shift in (0.05, -0.05):
        moved = list(planned)
        fa, fb = 1 / planned[a], 1 / planned[b]
        moved[a], moved[b] = 1 / (fa * (1 + shift)), 1 / (fb - fa * shift)
        assert weighted_freshness(rows, moved) <= best + 1e-12


def test_planned_intervals_keep_their_bounds() -> None:
    lo, hi = 300.0, 86400.0
    assert budget.planned_interval(1 / 60, 100.0, 1e-12, lo, hi) == lo
    # Changes too often for its importance: checked at the bound only.
    assert budget.planned_interval(1.0, 0.01, 1.0, lo, hi) == hi
    assert budget.planned_interval(0.0, 1.0, 1.0, lo, hi) == hi


def test_an_unaffordable_budget_plans_every_sku_at_the_longest_interval() -> None:
    rows = skus(100, 2)
    hi = 3600.0
    mu = budget.allocate(rows, 1.0, 60.0, hi)  # 100 SKUs at least hourly cost 100/h
    assert all(budget.planned_interval(lam, w, mu, 60.0, hi) == hi for lam, w in rows)
    assert budget.allocate([], 100.0, 60.0, hi) == 0.0


def test_jitter_is_deterministic_and_bounded() -> None:
    factors = [budget.jitter("https://a.test/p", n, 0.1) for n in range(200)]
    assert factors == [budget.jitter("https://a.test/p", n, 0.1) for n in range(200)]
    assert all(0.9 <= f <= 1.1 for f in factors)
    assert len(set(factors)) > 150
    assert budget.jitter("https://a.test/p", 3, 0.0) == 1.0


def test_the_pace_refills_at_the_budget_up_to_the_burst() -> None:
    pace, burst = 2.0, 5.0  # 7,200 requests an hour, 5 seconds of it at once
    assert budget.refill(0.0, 0.0, 100.0, pace, burst) == 10.0  # never drawn: full
    assert budget.refill(3.0, 100.0, 101.0, pace, burst) == 5.0
    assert budget.refill(3.0, 100.0, 200.0, pace, burst) == 10.0
    assert budget.refill(0.5, 100.0, 100.0, 0.001, burst) == 0.5  # the cap is at least 1
    assert budget.refill(0.5, 100.0, 1e9, 0.001, burst) == 1.0


def test_the_gain_follows_what_the_domain_spent() -> None:
    """Planning exactly the budget spends less than it: the next allocation plans more
    while the domain spends under 99 % of its budget, and less again once it spends it,
    never under 1.05 times the budget (the pace decides what is spent)."""
    assert budget.next_gain(1.05, 1000.0, 810.0, 3600.0) == pytest.approx(
        1.05 * math.sqrt(1000 / 810)
    )
    assert budget.next_gain(1.2, 1000.0, 1000.0, 3600.0) == pytest.approx(1.2 * 0.97)
    assert budget.next_gain(1.05, 1000.0, 995.0, 3600.0) == budget.MIN_GAIN
    assert budget.next_gain(1.4, 1000.0, 0.0, 3600.0) == budget.MAX_GAIN
    assert budget.next_gain(1.1, 1000.0, 5.0, 0.0) == 1.1


def test_budget_settings_are_read_and_checked() -> None:
    policy = policy_from_settings(
        Settings(
            project_settings(
                {
                    "PRICEWATCH_BUDGET": 2000,
                    "PRICEWATCH_BUDGET_DOMAINS": {"b.test": 50},
                    "PRICEWATCH_BUDGET_PRIOR_RATE": 24,
                }
            )
        )
    )
    assert policy.budget_for("a.test") == 2000
    assert policy.budget_for("b.test") == 50
    assert policy.prior_rate == pytest.approx(1 / 3600)
    assert policy.budgeted
    assert not policy_from_settings(Settings(project_settings())).budgeted


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PRICEWATCH_BUDGET", -1, "PRICEWATCH_BUDGET must be >= 0, got -1.0"),
        ("PRICEWATCH_BUDGET_DOMAINS", {"a.test": -5}, "PRICEWATCH_BUDGET_DOMAINS must map"),
        ("PRICEWATCH_BUDGET_DOMAINS", {"a.test": "x"}, "PRICEWATCH_BUDGET_DOMAINS must map"),
        ("PRICEWATCH_BUDGET_PRIOR_RATE", 0, "PRICEWATCH_BUDGET_PRIOR_RATE must be > 0, got 0.0"),
        ("PRICEWATCH_BUDGET_PRIOR_WEIGHT", 0, "PRICEWATCH_BUDGET_PRIOR_WEIGHT must be > 0"),
        ("PRICEWATCH_BUDGET_MEMORY", 0.5, "PRICEWATCH_BUDGET_MEMORY must be >= 1, got 0.5"),
        ("PRICEWATCH_BUDGET_REALLOCATE", 0, "PRICEWATCH_BUDGET_REALLOCATE must be > 0"),
        ("PRICEWATCH_BUDGET_JITTER", 0.7, "PRICEWATCH_BUDGET_JITTER must be in [0, 0.5], got 0.7"),
        ("PRICEWATCH_BUDGET_BURST", 0, "PRICEWATCH_BUDGET_BURST must be > 0, got 0.0"),
    ],
)
def test_invalid_budget_settings_name_the_setting(name: str, value: object, message: str) -> None:
    settings = Settings(project_settings({name: value}))
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        policy_from_settings(settings)
