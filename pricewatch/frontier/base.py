"""The frontier interface: a schedule of recurring fetches, not a one-shot queue.

Every backend (SQLite, Redis) implements :class:`Frontier` and passes the same tests
(``tests/test_frontier_contract.py``). Nothing is ever handed out without a lease, so
a crash at any moment loses no SKU: an unacknowledged lease expires and is reaped.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from pricewatch import settings as defaults
from pricewatch.frontier.budget import RateState
from pricewatch.outcomes import Outcome


@dataclass(frozen=True, slots=True)
class Entry:
    """What a seed line adds to the schedule."""

    url: str
    sku: str | None = None
    importance: float = 1.0


@dataclass(frozen=True, slots=True)
class Lease:
    """A claimed entry: the right to fetch ``url`` until ``deadline`` (epoch seconds)."""

    url: str
    domain: str
    token: str
    deadline: float
    sku: str | None = None
    importance: float = 1.0
    attempts: int = 0
    # The entry's history when it was claimed, which the frontier reschedules from: only
    # the lease holder changes it, so the snapshot is current when the lease completes.
    failures: int = 0  # consecutive failures (blocked, error, gone)
    gone: int = 0  # consecutive gone (404/410)
    checks: int = 0  # successful fetches (ok, no_price) in the velocity window
    changes: int = 0  # of which the stored offer changed
    seen_at: float = 0.0  # epoch seconds of the last successful fetch or (re-)seeding
    health: float = 1.0  # the domain's health (1 = every recent fetch succeeded)
    # The change-rate estimate (pricewatch.frontier.budget): aged changes and exposure
    # (seconds), and when the last ok fetch observed the price (0 = never).
    rate_changes: float = 0.0
    rate_exposure: float = 0.0
    observed_at: float = 0.0
    # The domain's allocation multiplier when the lease was claimed (0 = no allocation).
    mu: float = 0.0


@dataclass(frozen=True, slots=True)
class Completion:
    """How one lease ended. ``changed`` says the stored offer changed (velocity);
    ``retry_after`` (seconds) asks not to fetch again before it (Retry-After, circuit);
    ``confirm_in`` (seconds, ``ok`` only) asks to fetch again that soon, instead of the
    entry's interval: the store held a suspicious change until a second fetch confirms
    it (:mod:`pricewatch.quarantine`). ``reason`` says why a lease ended without an
    observation (``robots_txt``, ``http_429``, ``not_found``, ``invalid_<reason>`` for an
    offer validation dropped, ``rejected_<reason>`` for a row the store refused...): for the
    drift alarms and the audit trail; the frontier does not read it."""

    lease: Lease
    outcome: Outcome
    changed: bool = False
    retry_after: float | None = None
    confirm_in: float | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class DomainCounts:
    domain: str
    due: int = 0
    scheduled: int = 0
    inflight: int = 0
    retired: int = 0
    dead: int = 0


@dataclass(frozen=True, slots=True)
class EntryInfo:
    """One entry as the frontier holds it (``scrapy frontier --show URL``, tests)."""

    url: str
    domain: str
    state: str  # scheduled, inflight, retired, dead
    due_at: float
    sku: str | None = None
    importance: float = 1.0
    attempts: int = 0
    failures: int = 0
    gone: int = 0
    checks: int = 0
    changes: int = 0
    seen_at: float = 0.0
    rate_changes: float = 0.0
    rate_exposure: float = 0.0
    observed_at: float = 0.0


@dataclass(frozen=True, slots=True)
class SchedulePolicy:
    """The due-time rule shared by every backend (settings ``PRICEWATCH_FRONTIER_*``; a
    policy built without them has the defaults of ``pricewatch/settings.py``).

    The formula lives in :mod:`pricewatch.frontier.scoring`; this holds its weights.
    """

    interval: float = defaults.PRICEWATCH_FRONTIER_INTERVAL
    min_interval: float = defaults.PRICEWATCH_FRONTIER_MIN_INTERVAL
    max_interval: float = defaults.PRICEWATCH_FRONTIER_MAX_INTERVAL
    retry_delay: float = defaults.PRICEWATCH_FRONTIER_RETRY_DELAY
    lease_ttl: float = defaults.PRICEWATCH_FRONTIER_LEASE_TTL
    max_attempts: int = defaults.PRICEWATCH_FRONTIER_MAX_ATTEMPTS
    gone_limit: int = defaults.PRICEWATCH_FRONTIER_GONE_LIMIT
    # Velocity: the interval is divided by 1 + velocity_weight * changes / (checks + prior).
    velocity_weight: float = defaults.PRICEWATCH_FRONTIER_VELOCITY_WEIGHT
    velocity_prior: float = defaults.PRICEWATCH_FRONTIER_VELOCITY_PRIOR
    # Checks after which the change history is halved, so old behaviour fades.
    velocity_window: int = defaults.PRICEWATCH_FRONTIER_VELOCITY_WINDOW
    # Domain health: an EWMA of fetch success (alpha per outcome); delays are multiplied by
    # 1 + health_weight * (1 - health).
    health_weight: float = defaults.PRICEWATCH_FRONTIER_HEALTH_WEIGHT
    health_alpha: float = defaults.PRICEWATCH_FRONTIER_HEALTH_ALPHA
    # Seconds without a successful fetch or a re-seed after which a failing entry is
    # retired (0 = never).
    retire_unseen: float = defaults.PRICEWATCH_FRONTIER_RETIRE_UNSEEN
    # Leases being fetched per domain across all workers (0 = no cap): from the claim until
    # release_slots() or complete().
    domain_max_inflight: int = defaults.PRICEWATCH_DOMAIN_MAX_INFLIGHT
    # The request budget (pricewatch.frontier.budget): requests per hour per domain (0 = no
    # budget: the velocity schedule above), with overrides per domain.
    budget: float = defaults.PRICEWATCH_BUDGET
    budget_domains: Mapping[str, float] = field(default_factory=dict)
    # The change-rate prior of a new SKU (changes per second, and the changes it counts
    # for), and the observations after which old ones weigh 1/e.
    prior_rate: float = defaults.PRICEWATCH_BUDGET_PRIOR_RATE / 86400.0
    prior_weight: float = defaults.PRICEWATCH_BUDGET_PRIOR_WEIGHT
    rate_memory: float = defaults.PRICEWATCH_BUDGET_MEMORY
    # Seconds between two reallocations of a domain's budget; spread of planned intervals.
    reallocate: float = defaults.PRICEWATCH_BUDGET_REALLOCATE
    jitter: float = defaults.PRICEWATCH_BUDGET_JITTER
    # Seconds of budget a domain's claims may take at once (the pace's token bucket).
    burst: float = defaults.PRICEWATCH_BUDGET_BURST

    def budget_for(self, domain: str) -> float:
        """Requests per hour ``domain`` may take (0: no budget)."""
        return float(self.budget_domains.get(domain, self.budget))

    @property
    def budgeted(self) -> bool:
        return self.budget > 0 or any(v > 0 for v in self.budget_domains.values())

    # Each domain's learned limit (adjust_limits) caps its leases being fetched too; a
    # domain with none learned yet is capped at limit_start. A crawl's policy has it as
    # PRICEWATCH_LIMIT_ENABLED says (policy_from_settings); one built by hand leaves it off.
    adaptive_limits: bool = False
    limit_start: int = defaults.PRICEWATCH_LIMIT_START

    def next_delay(
        self,
        completion: Completion,
        failures: int,
        *,
        velocity: float | None = None,
        health: float = 1.0,
    ) -> float:
        """Seconds from now until the entry is due again.

        ``failures`` counts consecutive failures including this one; ``velocity`` is the
        entry's observed change rate in [0, 1] (``None``: 1 if it just changed, else 0);
        ``health`` the domain's. See :func:`pricewatch.frontier.scoring.next_delay`.
        """
        from pricewatch.frontier.scoring import next_delay

        return next_delay(self, completion, failures, velocity=velocity, health=health)


LimitUpdate = Callable[[str, "str | None", float], tuple[int, str]]
"""``update(domain, stored state or None, now) -> (cap, new state)``: the read-modify-write
step :meth:`Frontier.adjust_limits` applies to each domain's stored limit (an opaque string
to the frontier, see :mod:`pricewatch.politeness.limits`); ``cap`` is the domain's learned
limit of leases being fetched, ``now`` epoch seconds of the backend's clock."""


def domain_cap(configured: int, learned: int | None) -> int:
    """The in-flight cap of a domain: ``PRICEWATCH_DOMAIN_MAX_INFLIGHT`` (0: none) and its
    learned limit (or the starting one), whichever is lower (0: no cap at all)."""
    if learned is None or learned <= 0:
        return configured
    return learned if configured <= 0 else min(configured, learned)


STATS = (
    "pricewatch/frontier/claimed",  # leases handed out
    "pricewatch/frontier/released",  # leases whose fetch ended before their completion
    "pricewatch/frontier/completed",  # completions applied
    "pricewatch/frontier/stale",  # completions ignored: the lease was no longer current
    "pricewatch/frontier/retired",  # entries retired by a completion (gone, unseen)
    "pricewatch/frontier/reaped",  # expired leases returned to the schedule
    "pricewatch/frontier/dead",  # entries dead-lettered after too many expired leases
    "pricewatch/frontier/malformed",  # undecodable records set aside (Redis)
    "pricewatch/frontier/reallocated",  # domains whose budget allocation was recomputed
)


class Allocation(NamedTuple):
    """A domain's stored allocation: its multiplier, when it was computed (backend clock),
    the share of the budget it planned, and its paced claims so far and at that time."""

    mu: float
    at: float
    gain: float = 1.0
    claimed: float = 0.0
    mark: float = 0.0


@dataclass(frozen=True, slots=True)
class RateRow:
    """One scheduled entry as the budget's allocation sees it."""

    importance: float
    rate_changes: float
    rate_exposure: float
    url: str = ""

    @property
    def state(self) -> RateState:
        return RateState(self.rate_changes, self.rate_exposure)


class Frontier(abc.ABC):
    """A schedule of recurring fetches. All methods are coroutines; none blocks the loop."""

    url: str
    policy: SchedulePolicy

    @property
    def stats(self) -> Counter[str]:
        """What this frontier object did (names in :data:`STATS`), for the crawl's stats."""
        counter: Counter[str] | None = self.__dict__.get("_stats")
        if counter is None:
            counter = self.__dict__["_stats"] = Counter()
        return counter

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Connect and create what is missing. Raises ``FrontierUnavailable`` with the
        (password-masked) URL when the backend cannot be reached."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    @abc.abstractmethod
    async def add(self, entries: Iterable[Entry], *, keep_known: bool = False) -> int:
        """Schedule entries, due now; idempotent: a known URL keeps its schedule (its sku
        and importance are updated, unless ``keep_known``: then it is left as it is).
        Returns how many URLs were new."""

    @abc.abstractmethod
    async def claim(self, n: int) -> list[Lease]:
        """Up to ``n`` due entries, most overdue first, round-robin across domains, never
        from a paused domain, never more leases of a domain being fetched (claimed, neither
        released nor completed) than ``domain_max_inflight``, each leased for the TTL."""

    @abc.abstractmethod
    async def release_slots(self, leases: Sequence[Lease]) -> int:
        """The fetches of these leases ended: each stops counting against its domain's
        in-flight cap (once), while the lease stays held until it is completed (after the
        store commits) or expires (then it is reaped and fetched again, as any lease). A
        lease whose token is no longer current is ignored. Returns how many were released."""

    async def release_and_claim(self, released: Sequence[Lease], n: int) -> list[Lease]:
        """:meth:`release_slots` of ``released``, then :meth:`claim` of up to ``n``: the
        claim sees those slots free. A backend that can do both in one round trip does
        (Redis: one script call), so the releases of a crawl ride on its claims."""
        if released:
            await self.release_slots(released)
        return await self.claim(n)

    @abc.abstractmethod
    async def complete(self, completions: Sequence[Completion]) -> int:
        """Reschedule (or retire) the entries of these leases. A lease whose token is no
        longer current (it expired and was claimed again) is ignored. Returns how many
        completions were applied."""

    @abc.abstractmethod
    async def reap(self) -> int:
        """Return expired leases to the schedule (due now); entries that reached the
        attempt limit go to the dead-letter set. Returns how many leases were reaped."""

    @abc.abstractmethod
    async def pause_domain(self, domain: str, seconds: float) -> None:
        """Hand out nothing of ``domain`` for ``seconds`` (circuit open), for every worker."""

    @abc.abstractmethod
    async def counts(self) -> list[DomainCounts]:
        """Per-domain counts: due now, scheduled later, in flight, retired, dead."""

    @abc.abstractmethod
    async def next_due_in(self) -> float | None:
        """Seconds until the next entry is due (0 if one is due now), None if empty."""

    async def entry(self, url: str) -> EntryInfo | None:
        """The entry of ``url`` as stored, or None."""
        raise NotImplementedError

    async def adjust_limits(self, domains: Sequence[str], update: LimitUpdate) -> dict[str, str]:
        """Apply ``update`` to the stored limit of each domain, atomically for every worker
        (no other worker's update of the same domain is lost), and store the cap it returns:
        from then on :meth:`claim` hands out no more leases of that domain being fetched
        than it (nor than ``domain_max_inflight``) when the policy's ``adaptive_limits`` is
        on. Returns each domain's new state."""
        raise NotImplementedError

    async def limits(self) -> dict[str, str]:
        """Every domain's stored limit state (``scrapy frontier``, a worker's first look)."""
        raise NotImplementedError

    async def requeue_domain(self, domain: str) -> int:
        """Make every entry of ``domain`` that is not in flight due now: entries scheduled
        for later move forward; retired and dead ones go back on the schedule with their
        failure counters reset. Returns how many moved."""
        raise NotImplementedError

    async def purge_domain(self, domain: str) -> int:
        """Delete every entry of ``domain`` (the only way an entry leaves the frontier).
        Returns how many were deleted."""
        raise NotImplementedError

    # -- the request budget (pricewatch.frontier.budget) -----------------------------------

    async def rate_rows(self, domain: str, *, urls: bool = False) -> list[RateRow]:
        """The scheduled entries of ``domain`` with what their allocation needs (URLs
        only when asked: ``scrapy frontier --plan``)."""
        raise NotImplementedError

    async def allocations(self) -> dict[str, Allocation]:
        """Per domain: its stored allocation (see :class:`Allocation`)."""
        raise NotImplementedError

    async def set_allocation(
        self, domain: str, mu: float, per_hour: float = 0.0, gain: float = 1.0, mark: float = 0.0
    ) -> None:
        """Store ``mu`` as ``domain``'s allocation, stamped now, ``per_hour`` as the pace its
        claims are held to (0: none), the ``gain`` it planned with and its paced claims so
        far (``mark``); leases claimed from then on plan with it."""
        raise NotImplementedError

    async def domains(self) -> list[str]:
        """Every domain the frontier holds."""
        return [c.domain for c in await self.counts()]

    async def clock(self) -> float:
        """The backend's clock (epoch seconds): what due times are compared with."""
        return time.time()

    async def reallocate(self, *, force: bool = False) -> dict[str, float]:
        """Recompute the allocation of every budgeted domain whose allocation is older than
        ``PRICEWATCH_BUDGET_REALLOCATE`` (every one with ``force``). Returns the new
        multipliers. A scan of the domain's estimates, then a bisection over a histogram
        (:func:`pricewatch.frontier.budget.solve`); several workers may do it at once
        harmlessly (the last one wins, with the same figures)."""
        from pricewatch.frontier import budget as alloc
        from pricewatch.frontier.scoring import prior

        policy = self.policy
        if not policy.budgeted:
            return {}
        now = await self.clock()
        current = await self.allocations()
        done: dict[str, float] = {}
        belief = prior(policy)
        for domain in await self.domains():
            per_hour = policy.budget_for(domain)
            if per_hour <= 0:
                continue
            last = current.get(domain, Allocation(0.0, 0.0))
            if not force and now - last.at < policy.reallocate:
                continue
            gain = max(last.gain, alloc.MIN_GAIN)
            if last.at > 0 and last.mu > 0:
                gain = alloc.next_gain(gain, per_hour, last.claimed - last.mark, now - last.at)
            rows = await self.rate_rows(domain)
            # ~5 µs a SKU: off the event loop (a crawl's reactor keeps running).
            hist = await asyncio.to_thread(alloc.histogram, rows, belief)
            mu = alloc.solve(
                hist, per_hour * gain / alloc.HOUR, policy.min_interval, policy.max_interval
            )
            await self.set_allocation(domain, mu, per_hour, gain, last.claimed)
            done[domain] = mu
        if done:
            self.stats["pricewatch/frontier/reallocated"] += len(done)
        return done

    async def _reallocate_if_due(self) -> None:
        """Called before each claim: reallocate at most once per minute per process, and
        only the domains whose allocation is older than the setting."""
        if not self.policy.budgeted:
            return
        now = time.monotonic()
        if now < self.__dict__.get("_realloc_check", 0.0):
            return
        self.__dict__["_realloc_check"] = now + min(60.0, self.policy.reallocate)
        await self.reallocate()

    async def retire(self, urls: Sequence[str], reason: str) -> int:
        """Retire the entries of ``urls`` that are scheduled and not leased, with ``reason``
        (a leased entry is left to its fetch). Returns how many were retired."""
        raise NotImplementedError

    async def reinstate(self, urls: Sequence[str], reason: str) -> int:
        """Put the entries of ``urls`` retired with ``reason`` back on the schedule, due now,
        their failure counters reset. Returns how many moved."""
        raise NotImplementedError

    async def __aenter__(self) -> Frontier:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class FrontierUnavailable(RuntimeError):
    """The frontier backend cannot be reached; the message names the masked URL."""


class FrontierConnectionLost(FrontierUnavailable):
    """The backend went away mid-crawl (e.g. Redis restarted). Retryable: back off and
    call again; nothing was lost, unacknowledged leases expire and are reaped."""
