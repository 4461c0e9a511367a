"""A fixed request budget per domain, spent where it keeps the most important prices fresh.

Settings (through :class:`SchedulePolicy`; defaults: ``pricewatch/settings.py``):
``PRICEWATCH_BUDGET``, ``PRICEWATCH_BUDGET_DOMAINS``, ``PRICEWATCH_BUDGET_PRIOR_RATE``,
``PRICEWATCH_BUDGET_PRIOR_WEIGHT``, ``PRICEWATCH_BUDGET_MEMORY``,
``PRICEWATCH_BUDGET_REALLOCATE``, ``PRICEWATCH_BUDGET_JITTER``, ``PRICEWATCH_BUDGET_BURST``.

Two parts, both pure functions shared by every backend and ``bench/freshness.py``:

**The change rate of a SKU** (:func:`observe`, :func:`rate`). A price is assumed to change
as a Poisson process of rate ``λ``. Fetches come at irregular intervals and each says only
whether the price changed since the previous one. Each interval is an observation of the
first change time ``τ ~ Exp(λ)``: censored at ``t`` when nothing changed, somewhere in
``[0, t]`` when it did. The maximum-likelihood rate is then ``changes / exposure``, where
an unchanged interval adds ``t`` of exposure and a changed one the expected time to its
first change, ``E[τ | τ < t] = 1/λ - t / (e^{λt} - 1)`` (the EM fixed point of the censored
exponential; it is exact at the true rate for any mix of intervals). The two sums are
kept per SKU and aged by ``1 - 1/memory`` per observation, so a SKU whose rate shifts (a
sale starts) is re-estimated within a few fetches. A prior of ``prior_weight`` changes in
``prior_weight / prior_rate`` seconds starts the sums of a new SKU and ages with the data
(a prior that never aged would cap every estimate at ``(memory + weight) / weight`` times
the prior rate). O(1) per fetch.

**The allocation** (:func:`planned_interval`, :func:`solve`): Cho & Garcia-Molina's
optimal refresh policy for *importance-weighted freshness*: maximise
``sum_i w_i F(λ_i, f_i)`` subject to ``sum_i f_i = budget``, where a SKU fetched every
``1/f`` seconds is fresh a share ``F = f (1 - e^{-λ/f}) / λ`` of the time. The Lagrange
condition ``w ∂F/∂f = μ`` gives every SKU its interval from its own ``λ``, ``w`` and one
number per domain, the multiplier ``μ``: ``interval = g⁻¹(μ λ / w) / λ`` with
``g(r) = 1 - (1 + r) e^{-r}``; a SKU with ``μ λ / w >= 1`` changes too often for its
importance to be worth fetching (it is checked every ``max_interval``). Reallocation
only finds ``μ`` so that the planned rates add up to the budget: a histogram of
``λ / w`` per domain (built by one scan) and a bisection over its bins, milliseconds
whatever the number of SKUs. Between reallocations each completion plans its SKU's next
interval from the stored ``μ``, so a changed estimate takes effect at once.

**The pace** (:func:`refill`): the planned rates add up to the budget, but a new seed (all
due at once), a requeue or a backlog would still be fetched as fast as the crawl can. Claims
of a budgeted domain therefore draw on a token bucket filled at the budget's rate and
holding ``PRICEWATCH_BUDGET_BURST`` seconds of it, so no hour takes more than its budget.
Fetches then land later than planned, so planning exactly the budget would spend less than
it: each reallocation plans ``gain`` (at least 1.05) times the budget, the gain following
what the domain actually took since the last one (:func:`next_gain`).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

HOUR = 3600.0
DAY = 86400.0
BINS_PER_E = 8  # histogram bins per factor e of λ / w: ~13 % wide
_MU_NONE = 0.0  # stored when a domain has no allocation yet: plan with the prior's μ


class _RateRowLike(Protocol):
    @property
    def rate_changes(self) -> float: ...
    @property
    def rate_exposure(self) -> float: ...
    @property
    def importance(self) -> float: ...


class RateState(NamedTuple):
    """What a SKU carries for its rate estimate: aged sums of changes and exposure
    (seconds), and when its last observation was made (epoch seconds, 0 = none yet)."""

    changes: float = 0.0
    exposure: float = 0.0
    observed_at: float = 0.0


@dataclass(frozen=True, slots=True)
class RatePrior:
    rate: float  # changes per second a new SKU is assumed to make
    weight: float  # pseudo-changes the prior counts for
    memory: float  # observations after which old ones weigh 1/e (ageing)


def rate(prior: RatePrior, state: RateState) -> float:
    """The estimated change rate (per second) of a SKU: the prior until its first
    observation."""
    if state.exposure <= 0.0:
        return prior.rate
    return state.changes / state.exposure


def expected_first_change(lam: float, t: float) -> float:
    """``E[τ | τ < t]`` for ``τ ~ Exp(lam)``: the exposure of an interval with a change."""
    x = lam * t
    if x < 1e-6:
        return t / 2.0
    if x > 700.0:
        return 1.0 / lam
    return 1.0 / lam - t / math.expm1(x)


def observe(prior: RatePrior, state: RateState, now: float, changed: bool) -> RateState:
    """The state after a fetch at ``now`` that saw the price change (or not) since the
    previous observation. The first observation only starts the clock."""
    if state.observed_at <= 0.0 or state.exposure <= 0.0:
        # The prior's pseudo-observations start the sums, and age with the data.
        return RateState(prior.weight, prior.weight / prior.rate, now)
    t = now - state.observed_at
    if t <= 0.0:
        return RateState(state.changes, state.exposure, max(now, state.observed_at))
    keep = 1.0 - 1.0 / prior.memory if prior.memory > 1.0 else 0.0
    if changed:
        exposure = expected_first_change(rate(prior, state), t)
        return RateState(state.changes * keep + 1.0, state.exposure * keep + exposure, now)
    return RateState(state.changes * keep, state.exposure * keep + t, now)


# -- the allocation ------------------------------------------------------------------------------


def _g(r: float) -> float:
    return -math.expm1(-r) - r * math.exp(-r)


def g_inverse(y: float) -> float:
    """The ``r >= 0`` with ``1 - (1 + r) e^{-r} = y`` (``y`` in ``[0, 1)``)."""
    if y <= 0.0:
        return 0.0
    if y >= 1.0:
        return math.inf
    # Start from the small-r series (g ~ r²/2 - r³/3) or the tail (1 - g ~ (1 + r) e^-r),
    # then Newton: g'(r) = r e^-r, g convex then concave, so a few steps suffice.
    if y < 0.5:
        r = math.sqrt(2.0 * y) * (1.0 + math.sqrt(2.0 * y) / 3.0)
    else:
        r = -math.log(1.0 - y)
        r += math.log1p(r)
    for _ in range(8):
        slope = r * math.exp(-r)
        if slope <= 0.0:
            break
        step = (_g(r) - y) / slope
        r = max(r - step, r / 4.0)
        if abs(step) <= 1e-10 * r:
            break
    return r


def planned_interval(lam: float, importance: float, mu: float, lo: float, hi: float) -> float:
    """Seconds between fetches of a SKU (rate ``lam`` per second, ``importance``) under the
    multiplier ``mu`` of its domain's allocation, within ``[lo, hi]``."""
    if lam <= 0.0 or importance <= 0.0:
        return hi
    y = mu * lam / importance
    if y >= 1.0:
        return hi
    r = g_inverse(y)
    if r <= 0.0:
        return lo
    return min(max(r / lam, lo), hi)


def freshness(lam: float, interval: float) -> float:
    """Expected share of time a SKU (rate ``lam``) fetched every ``interval`` is fresh."""
    x = lam * interval
    if x <= 0.0:
        return 1.0
    return -math.expm1(-x) / x


def jitter(url: str, n: int, spread: float) -> float:
    """A factor in ``[1 - spread, 1 + spread]`` from the URL and the SKU's fetch count:
    the same on every backend, different from one fetch to the next, so SKUs planned
    alike do not fall due together."""
    if spread <= 0.0:
        return 1.0
    u = zlib.crc32(f"{n}:{url}".encode()) / 4294967295.0
    return 1.0 + spread * (2.0 * u - 1.0)


@dataclass(slots=True)
class Histogram:
    """Per bin of ``log(λ / w)``: SKUs and the sum of their rates. Built by one scan."""

    bins: dict[int, list[float]] = field(default_factory=dict)  # bin -> [count, sum of λ]

    def add(self, lam: float, importance: float) -> None:
        if lam <= 0.0 or importance <= 0.0:
            return
        key = math.floor(math.log(lam / importance) * BINS_PER_E)
        cell = self.bins.get(key)
        if cell is None:
            self.bins[key] = [1.0, lam]
        else:
            cell[0] += 1.0
            cell[1] += lam

    @property
    def count(self) -> int:
        return int(sum(cell[0] for cell in self.bins.values()))

    def planned_rate(self, mu: float, lo: float, hi: float) -> float:
        """Fetches per second the domain's SKUs are planned at under ``mu``."""
        total = 0.0
        for key, (count, lam_sum) in self.bins.items():
            x = math.exp((key + 0.5) / BINS_PER_E)  # λ / w at the bin's centre
            lam = lam_sum / count
            interval = planned_interval(lam, lam / x, mu, lo, hi)
            total += count / interval
        return total


def histogram(rows: Iterable[_RateRowLike], prior: RatePrior) -> Histogram:
    """The histogram of a domain's entries (anything with ``rate_changes``,
    ``rate_exposure`` and ``importance``), their rates estimated under ``prior``."""
    hist = Histogram()
    for row in rows:
        state = RateState(row.rate_changes, row.rate_exposure)
        hist.add(rate(prior, state), row.importance)
    return hist


def solve(hist: Histogram, budget: float, lo: float, hi: float) -> float:
    """The multiplier ``μ`` whose planned rates add up to ``budget`` (fetches per second).
    When the budget cannot be met (every SKU at ``hi`` already costs more) the largest
    useful ``μ``; when it buys more than every SKU at ``lo``, ``0``."""
    if not hist.bins or budget <= 0.0:
        return _MU_NONE
    keys = list(hist.bins)
    # μ beyond 1 / min(λ/w) plans every SKU at hi; at ~e^-40 of it, every one at lo.
    top = -(min(keys) / BINS_PER_E)
    low_log, high_log = top - 40.0, top + 1.0
    if hist.planned_rate(math.exp(high_log), lo, hi) >= budget:
        return math.exp(high_log)
    if hist.planned_rate(math.exp(low_log), lo, hi) <= budget:
        return math.exp(low_log)
    for _ in range(60):
        mid = (low_log + high_log) / 2.0
        if hist.planned_rate(math.exp(mid), lo, hi) > budget:
            low_log = mid
        else:
            high_log = mid
        if high_log - low_log < 1e-6:
            break
    return math.exp((low_log + high_log) / 2.0)


def refill(tokens: float, at: float, now: float, pace: float, burst: float) -> float:
    """The requests a domain paced at ``pace`` per second may make at ``now``: its
    ``tokens`` left at ``at`` plus what the pace added since, at most ``burst`` seconds'
    worth (and at least one request's)."""
    cap = max(pace * burst, 1.0)
    if at <= 0.0:
        return cap
    return min(tokens + max(now - at, 0.0) * pace, cap)


MIN_GAIN, MAX_GAIN = 1.05, 1.5


def next_gain(gain: float, per_hour: float, claimed: float, seconds: float) -> float:
    """The share of its budget a domain's next allocation plans, from the requests it
    took (``claimed``) in the ``seconds`` since the last one. Fetches land later than
    planned (a burst waits for the pace, a lease for its fetch, an estimate moves between
    two fetches), so planning exactly the budget spends less than it. Plans are at least
    ``MIN_GAIN`` times the budget, so that the pace rather than the estimates decides what
    is spent; the gain rises while the domain spends under 99 % of its budget and decays
    towards ``MIN_GAIN`` once it spends it (the pace keeps it from spending more), up to
    ``MAX_GAIN``."""
    if seconds <= 0.0 or per_hour <= 0.0:
        return gain
    realized = claimed / seconds * HOUR
    if realized >= 0.99 * per_hour:
        return max(MIN_GAIN, gain * 0.97)
    return min(MAX_GAIN, gain * math.sqrt(per_hour / max(realized, per_hour / 4.0)))


def allocate(
    rows: Iterable[tuple[float, float]], budget_per_hour: float, lo: float, hi: float
) -> float:
    """``μ`` for SKUs given as ``(rate per second, importance)`` and a budget in
    requests per hour."""
    hist = Histogram()
    for lam, importance in rows:
        hist.add(lam, importance)
    return solve(hist, budget_per_hour / HOUR, lo, hi)


@dataclass(frozen=True, slots=True)
class SkuPlan:
    """What the allocation plans for one SKU (``scrapy frontier --plan``)."""

    url: str
    rate: float  # estimated changes per second
    importance: float
    interval: float  # planned seconds between fetches
    freshness: float  # expected share of time its stored price is the live one


@dataclass(frozen=True, slots=True)
class DomainPlan:
    domain: str
    budget: float  # requests per hour (0: none)
    mu: float
    skus: int
    planned: float  # requests per hour the planned intervals add up to
    freshness: float  # expected importance-weighted freshness
    importance: float  # total importance


def plan(
    domain: str,
    rows: Iterable[tuple[str, float, RateState]],
    per_hour: float,
    mu: float,
    prior: RatePrior,
    lo: float,
    hi: float,
) -> tuple[DomainPlan, list[SkuPlan]]:
    """The allocation of a domain's SKUs (``(url, importance, rate state)``) under ``mu``
    (0: solved here from the rows)."""
    items = [(url, importance, rate(prior, state)) for url, importance, state in rows]
    if mu <= 0.0 and per_hour > 0.0:
        mu = allocate(((lam, w) for _, w, lam in items), per_hour, lo, hi)
    skus = []
    for url, importance, lam in items:
        interval = planned_interval(lam, importance, mu, lo, hi) if mu > 0 else hi
        skus.append(SkuPlan(url, lam, importance, interval, freshness(lam, interval)))
    weight = sum(s.importance for s in skus)
    summary = DomainPlan(
        domain=domain,
        budget=per_hour,
        mu=mu,
        skus=len(skus),
        planned=sum(HOUR / s.interval for s in skus),
        freshness=(sum(s.importance * s.freshness for s in skus) / weight) if weight else 0.0,
        importance=weight,
    )
    return summary, skus
