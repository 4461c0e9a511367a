"""The frontier interface: a schedule of recurring fetches, not a one-shot queue.

Every backend (SQLite, Redis) implements :class:`Frontier` and passes the same tests
(``tests/test_frontier_contract.py``). Nothing is ever handed out without a lease, so
a crash at any moment loses no SKU: an unacknowledged lease expires and is reaped.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

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


@dataclass(frozen=True, slots=True)
class Completion:
    """How one lease ended. ``changed`` says the stored offer changed (velocity);
    ``retry_after`` (seconds) asks not to fetch again before it (Retry-After, circuit)."""

    lease: Lease
    outcome: Outcome
    changed: bool = False
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class DomainCounts:
    domain: str
    due: int = 0
    scheduled: int = 0
    inflight: int = 0
    retired: int = 0
    dead: int = 0


@dataclass(frozen=True, slots=True)
class SchedulePolicy:
    """The simple due-time rule of the embedded frontier (settings ``PRICEWATCH_FRONTIER_*``)."""

    interval: float = 3600.0
    min_interval: float = 300.0
    max_interval: float = 7 * 86400.0
    retry_delay: float = 60.0
    lease_ttl: float = 300.0
    max_attempts: int = 5
    gone_limit: int = 3
    extra: dict[str, float] = field(default_factory=dict)

    def next_delay(self, completion: Completion, failures: int) -> float:
        """Seconds from now until the entry is due again.

        ``failures`` counts consecutive failures including this one. Success: the base
        interval divided by importance, halved when the price just changed. Failure:
        exponential from ``retry_delay``. ``retry_after`` is a floor.
        """
        outcome = completion.outcome
        if outcome in (Outcome.OK, Outcome.NO_PRICE):
            delay = self.interval / max(completion.lease.importance, 0.01)
            if completion.changed:
                delay /= 2
            delay = min(max(delay, self.min_interval), self.max_interval)
        elif outcome is Outcome.SKIPPED:
            delay = self.retry_delay
        else:
            delay = min(self.retry_delay * 2 ** max(failures - 1, 0), self.max_interval)
        if completion.retry_after is not None:
            delay = max(delay, completion.retry_after)
        return delay


class Frontier(abc.ABC):
    """A schedule of recurring fetches. All methods are coroutines; none blocks the loop."""

    url: str

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Connect and create what is missing. Raises ``FrontierUnavailable`` with the
        (password-masked) URL when the backend cannot be reached."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    @abc.abstractmethod
    async def add(self, entries: Iterable[Entry]) -> int:
        """Schedule entries, due now; idempotent: a known URL keeps its schedule (its sku
        and importance are updated). Returns how many URLs were new."""

    @abc.abstractmethod
    async def claim(self, n: int) -> list[Lease]:
        """Up to ``n`` due entries, most overdue first, round-robin across domains, never
        from a paused domain, each leased for the lease TTL."""

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

    async def __aenter__(self) -> Frontier:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class FrontierUnavailable(RuntimeError):
    """The frontier backend cannot be reached; the message names the masked URL."""
