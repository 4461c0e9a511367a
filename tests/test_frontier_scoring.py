"""The due-time formula shared by the frontier backends, and its settings."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from pricewatch.frontier import Completion, Lease, SchedulePolicy, policy_from_settings
from pricewatch.frontier.scoring import History, transition, updated_health, velocity
from pricewatch.outcomes import Outcome

from .helpers import project_settings

POLICY = SchedulePolicy(
    interval=1000,
    min_interval=10,
    max_interval=100_000,
    retry_delay=60,
    velocity_weight=3,
    velocity_prior=2,
    velocity_window=10,
    health_weight=2,
    health_alpha=0.5,
    gone_limit=3,
)
NOW = 1_000_000.0


def done(outcome: Outcome, importance: float = 1.0, **kw: object) -> Completion:
    lease = Lease("https://a.test/p", "a.test", "t", NOW + 300, importance=importance)
    return Completion(lease, outcome, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("completion", "history", "health", "delay"),
    [
        pytest.param(done(Outcome.OK), History(), 1.0, 1000, id="ok-plain"),
        pytest.param(done(Outcome.NO_PRICE), History(), 1.0, 1000, id="no-price-plain"),
        pytest.param(done(Outcome.OK, importance=4), History(), 1.0, 250, id="importance-4"),
        pytest.param(done(Outcome.OK, changed=True), History(), 1.0, 500, id="first-change"),
        # 8 changes in 8 checks, + this one: 9 / (9 + 2) -> 1000 / (1 + 3 * 9/11)
        pytest.param(
            done(Outcome.OK, changed=True),
            History(checks=8, changes=8),
            1.0,
            1000 / (1 + 27 / 11),
            id="fast-mover",
        ),
        pytest.param(done(Outcome.OK), History(), 0.5, 2000, id="sick-domain"),
        pytest.param(done(Outcome.OK, importance=1000), History(), 1.0, 10, id="min-interval"),
        pytest.param(
            done(Outcome.OK, importance=0.001), History(), 1.0, 100_000, id="max-interval"
        ),
        pytest.param(done(Outcome.ERROR), History(), 1.0, 60, id="first-error"),
        pytest.param(done(Outcome.BLOCKED), History(failures=2), 1.0, 240, id="third-failure"),
        pytest.param(done(Outcome.BLOCKED), History(failures=2), 0.5, 480, id="failure-sick"),
        pytest.param(done(Outcome.ERROR), History(failures=40), 1.0, 100_000, id="backoff-cap"),
        pytest.param(done(Outcome.SKIPPED), History(failures=2), 0.0, 60, id="skipped"),
        pytest.param(
            done(Outcome.BLOCKED, retry_after=3600), History(), 1.0, 3600, id="retry-after"
        ),
        pytest.param(done(Outcome.ERROR, retry_after=5), History(), 1.0, 60, id="retry-after-low"),
    ],
)
def test_next_due_time(
    completion: Completion, history: History, health: float, delay: float
) -> None:
    step = transition(POLICY, history, completion, NOW, health)
    assert step.retired is None
    assert step.due_at == pytest.approx(NOW + delay)


def test_counters_move_with_outcomes() -> None:
    history = History(failures=2, gone=1, checks=3, changes=1, seen_at=5.0)
    ok = transition(POLICY, history, done(Outcome.OK, changed=True), NOW, 1.0)
    assert ok.history[:5] == History(failures=0, gone=0, checks=4, changes=2, seen_at=NOW)[:5]
    # The first observation starts the rate estimate from the prior.
    assert ok.history.observed_at == NOW
    assert ok.history.rate_changes == POLICY.prior_weight
    assert ok.health_sample == 1.0
    no_price = transition(POLICY, history, done(Outcome.NO_PRICE, changed=True), NOW, 1.0)
    assert (no_price.history.checks, no_price.history.changes) == (4, 1)  # no offer, no change
    error = transition(POLICY, history, done(Outcome.ERROR), NOW, 1.0)
    assert error.history == History(failures=3, gone=0, checks=3, changes=1, seen_at=5.0)
    assert error.health_sample == 0.0
    gone = transition(POLICY, history, done(Outcome.GONE), NOW, 1.0)
    assert (gone.history.failures, gone.history.gone, gone.health_sample) == (3, 2, None)
    skipped = transition(POLICY, history, done(Outcome.SKIPPED), NOW, 1.0)
    assert (skipped.history, skipped.health_sample) == (history, None)


def test_the_change_history_is_halved_at_the_window() -> None:
    step = transition(POLICY, History(checks=9, changes=9), done(Outcome.OK, changed=True), NOW, 1)
    assert (step.history.checks, step.history.changes) == (5, 5)
    assert velocity(POLICY, 5, 5) == pytest.approx(5 / 7)
    assert velocity(SchedulePolicy(velocity_prior=0), 0, 0) == 0.0


def test_retirement() -> None:
    gone = transition(POLICY, History(gone=2, failures=2), done(Outcome.GONE), NOW, 1.0)
    assert (gone.due_at, gone.retired) == (None, "gone")
    unseen = SchedulePolicy(retire_unseen=100)
    stale = History(seen_at=NOW - 101)
    assert transition(unseen, stale, done(Outcome.ERROR), NOW, 1.0).retired == "unseen"
    assert transition(unseen, stale, done(Outcome.SKIPPED), NOW, 1.0).retired is None
    assert transition(unseen, stale, done(Outcome.OK), NOW, 1.0).retired is None
    fresh = History(seen_at=NOW - 99)
    assert transition(unseen, fresh, done(Outcome.ERROR), NOW, 1.0).retired is None


def test_health_is_a_moving_average() -> None:
    assert updated_health(POLICY, 1.0, 0.0) == 0.5
    assert updated_health(POLICY, 0.5, 1.0) == 0.75
    assert updated_health(POLICY, 0.5, None) == 0.5


def test_the_policy_method_keeps_its_old_signature() -> None:
    assert POLICY.next_delay(done(Outcome.OK, changed=True), 0) == pytest.approx(250)
    assert POLICY.next_delay(done(Outcome.OK), 0, velocity=1.0) == pytest.approx(250)
    assert POLICY.next_delay(done(Outcome.ERROR), 2) == pytest.approx(120)


def test_settings_reach_the_policy() -> None:
    policy = policy_from_settings(
        Settings(
            project_settings(
                PRICEWATCH_FRONTIER_VELOCITY_WEIGHT="5",
                PRICEWATCH_FRONTIER_VELOCITY_PRIOR="1",
                PRICEWATCH_FRONTIER_VELOCITY_WINDOW="20",
                PRICEWATCH_FRONTIER_HEALTH_WEIGHT="0",
                PRICEWATCH_FRONTIER_HEALTH_ALPHA="0.3",
                PRICEWATCH_FRONTIER_RETIRE_UNSEEN="86400",
                PRICEWATCH_DOMAIN_MAX_INFLIGHT="0",
            )
        )
    )
    assert (policy.velocity_weight, policy.velocity_prior, policy.velocity_window) == (5, 1, 20)
    assert (policy.health_weight, policy.health_alpha) == (0, 0.3)
    assert (policy.retire_unseen, policy.domain_max_inflight) == (86400, 0)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PRICEWATCH_FRONTIER_VELOCITY_WEIGHT", -1, "must be >= 0, got -1.0"),
        ("PRICEWATCH_FRONTIER_VELOCITY_WINDOW", -1, "must be >= 0, got -1"),
        ("PRICEWATCH_FRONTIER_HEALTH_ALPHA", 2, "must be in [0, 1], got 2.0"),
        ("PRICEWATCH_FRONTIER_RETIRE_UNSEEN", -5, "must be >= 0, got -5.0"),
        ("PRICEWATCH_DOMAIN_MAX_INFLIGHT", -1, "must be >= 0, got -1"),
        ("PRICEWATCH_FRONTIER_GONE_LIMIT", 0, "must be >= 1, got 0"),
        ("PRICEWATCH_FRONTIER_MIN_INTERVAL", 10**9, "MIN_INTERVAL must be >= 0 and <="),
    ],
)
def test_invalid_settings_name_the_setting(name: str, value: object, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        policy_from_settings(Settings(project_settings({name: value})))
    assert name in str(caught.value)
    assert message in str(caught.value)
