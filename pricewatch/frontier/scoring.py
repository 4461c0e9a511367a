"""When is a SKU due again: the velocity-scored schedule shared by every frontier backend.

The score is a due time (epoch seconds), not a frozen priority, so the longer an entry
waits past it the more overdue, and the sooner it is claimed (claims take the most
overdue first): staleness raises urgency by itself. After a fetch, the next delay is

success (``ok``, ``no_price``)::

    interval / importance / (1 + velocity_weight * velocity) * (1 + health_weight * (1 - health))

failure (``blocked``, ``error``, ``gone``)::

    retry_delay * 2 ** (failures - 1) * (1 + health_weight * (1 - health))

under a request budget (``PRICEWATCH_BUDGET``, :mod:`pricewatch.frontier.budget`) a
success is due again after the interval the domain's allocation plans for the SKU from its
estimated change rate and importance, spread by the jitter, times the same health factor.

``skipped`` (robots.txt, open circuit) waits ``retry_delay``. Every delay is clamped to
``[min_interval, max_interval]`` (failures: ``max_interval`` only) and ``retry_after`` is
a floor. An ``ok`` completion with ``confirm_in`` (a held suspicious change to confirm) is
due again after ``confirm_in`` seconds, below ``min_interval`` if need be.
``velocity = changes / (checks + velocity_prior)`` is the SKU's observed rate of
price changes (``Completion.changed``), its history halved every ``velocity_window``
checks so old behaviour fades. ``health`` is the domain's success rate, an exponentially
weighted moving average (``health_alpha``) of its outcomes: a shop that blocks us or
errors has its entries pushed back.

Weights come from settings (``PRICEWATCH_FRONTIER_VELOCITY_WEIGHT``,
``PRICEWATCH_FRONTIER_VELOCITY_PRIOR``, ``PRICEWATCH_FRONTIER_VELOCITY_WINDOW``,
``PRICEWATCH_FRONTIER_HEALTH_WEIGHT``, ``PRICEWATCH_FRONTIER_HEALTH_ALPHA``,
``PRICEWATCH_FRONTIER_RETIRE_UNSEEN``) through :class:`SchedulePolicy`.
"""

from __future__ import annotations

from typing import NamedTuple

from pricewatch.frontier import budget
from pricewatch.frontier.base import Completion, Lease, SchedulePolicy
from pricewatch.outcomes import Outcome

SUCCESSES = frozenset({Outcome.OK, Outcome.NO_PRICE})
# Outcomes that say something about the shop's health (gone is the shop answering fine).
_HEALTH_SAMPLE = {
    Outcome.OK: 1.0,
    Outcome.NO_PRICE: 1.0,
    Outcome.BLOCKED: 0.0,
    Outcome.ERROR: 0.0,
}


class History(NamedTuple):
    """The counters an entry carries between fetches (a tuple: built once per completion,
    on the hot path of a batch)."""

    failures: int = 0
    gone: int = 0
    checks: int = 0
    changes: int = 0
    seen_at: float = 0.0
    rate_changes: float = 0.0
    rate_exposure: float = 0.0
    observed_at: float = 0.0


class Transition(NamedTuple):
    """What one completion does to an entry."""

    history: History
    due_at: float | None  # None: retired
    retired: str | None  # why: "gone" or "unseen"
    health_sample: float | None  # 1 success, 0 failure, None no signal about the domain


def velocity(policy: SchedulePolicy, checks: int, changes: int) -> float:
    denominator = checks + policy.velocity_prior
    if denominator <= 0:
        return 0.0
    return min(max(changes / denominator, 0.0), 1.0)


def next_delay(
    policy: SchedulePolicy,
    completion: Completion,
    failures: int,
    *,
    velocity: float | None = None,
    health: float = 1.0,
    planned: float | None = None,
) -> float:
    """Seconds from now until the entry is due again (see the module docstring);
    ``planned``: the budget's interval for the entry (before the health factor)."""
    outcome = completion.outcome
    slowdown = 1.0 + policy.health_weight * (1.0 - min(max(health, 0.0), 1.0))
    if outcome in SUCCESSES:
        if planned is not None:
            delay = planned * slowdown
        else:
            rate = (1.0 if completion.changed else 0.0) if velocity is None else velocity
            delay = policy.interval / max(completion.lease.importance, 0.01)
            delay = delay / (1.0 + policy.velocity_weight * rate) * slowdown
        delay = min(max(delay, policy.min_interval), policy.max_interval)
        if outcome is Outcome.OK and completion.confirm_in is not None:
            delay = min(max(completion.confirm_in, 0.0), delay)
    elif outcome is Outcome.SKIPPED:
        # Not fetched (open circuit, robots.txt): back when the cause says (retry_after,
        # e.g. the circuit's cooldown), else after retry_delay.
        delay = policy.retry_delay if completion.retry_after is None else 0.0
    else:
        exponent = min(max(failures - 1, 0), 60)
        delay = min(policy.retry_delay * 2**exponent * slowdown, policy.max_interval)
    if completion.retry_after is not None:
        delay = max(delay, completion.retry_after)
    return delay


def transition(
    policy: SchedulePolicy, history: History, completion: Completion, now: float, health: float
) -> Transition:
    """Apply one completion to an entry's history: new counters, and the next due time
    or the reason it retires."""
    outcome = completion.outcome
    failures, gone = history.failures, history.gone
    checks, changes, seen_at = history.checks, history.changes, history.seen_at
    estimate = budget.RateState(history.rate_changes, history.rate_exposure, history.observed_at)
    if outcome is Outcome.OK:
        estimate = budget.observe(prior(policy), estimate, now, completion.changed)
    if outcome in SUCCESSES:
        failures = gone = 0
        checks += 1
        if outcome is Outcome.OK and completion.changed:
            changes += 1
        if policy.velocity_window > 0 and checks >= policy.velocity_window:
            checks //= 2
            changes = min(changes // 2, checks)
        seen_at = now
    elif outcome is Outcome.GONE:
        failures += 1
        gone += 1
    elif outcome is not Outcome.SKIPPED:
        failures += 1
        gone = 0
    new = History(failures, gone, checks, changes, seen_at, *estimate)
    sample = _HEALTH_SAMPLE.get(outcome)
    retired: str | None = None
    if gone >= policy.gone_limit:
        retired = "gone"
    elif (
        policy.retire_unseen > 0
        and outcome not in SUCCESSES
        and outcome is not Outcome.SKIPPED
        and now - seen_at > policy.retire_unseen
    ):
        retired = "unseen"
    if retired is not None:
        return Transition(new, None, retired, sample)
    rate = velocity(policy, checks, changes)
    planned = None
    lease = completion.lease
    if lease.mu > 0 and outcome in SUCCESSES and policy.budget_for(lease.domain) > 0:
        planned = budget.planned_interval(
            budget.rate(prior(policy), estimate),
            lease.importance,
            lease.mu,
            policy.min_interval,
            policy.max_interval,
        ) * budget.jitter(lease.url, checks, policy.jitter)
    delay = next_delay(policy, completion, failures, velocity=rate, health=health, planned=planned)
    return Transition(new, now + delay, None, sample)


def prior(policy: SchedulePolicy) -> budget.RatePrior:
    """The change-rate prior and ageing of ``policy``."""
    return budget.RatePrior(policy.prior_rate, policy.prior_weight, policy.rate_memory)


def history_of(lease: Lease) -> History:
    """The history a lease carries (what its completion reschedules from)."""
    return History(
        lease.failures,
        lease.gone,
        lease.checks,
        lease.changes,
        lease.seen_at,
        lease.rate_changes,
        lease.rate_exposure,
        lease.observed_at,
    )


def updated_health(policy: SchedulePolicy, health: float, sample: float | None) -> float:
    if sample is None:
        return health
    return health + policy.health_alpha * (sample - health)
