"""Drift alarms: a shop whose pages stop yielding prices, start yielding bad ones, block
the crawler, or move all at once, is noticed within one window, per domain.

Every lease's outcome (signal ``leases_completed``) and every observation the store
compares with a published offer are counted per domain over a rolling window of
``PRICEWATCH_DRIFT_WINDOW`` seconds (to within a step of 1/360 of it). With at least
``PRICEWATCH_DRIFT_MIN_SAMPLE`` events in the window, a rate at or over its threshold
raises an alarm:

================= =================================================== ========================
kind              rate of                                             setting PRICEWATCH_DRIFT_
================= =================================================== ========================
no_price          fetched pages (ok, no_price, invalid) with no       ``NO_PRICE_RATE``
                  price: schema drift, 200 OK but nothing extracted
invalid           fetched pages whose offer validation dropped, or    ``INVALID_RATE``
                  the store refused
blocked           fetches (all but skipped) that ended blocked        ``BLOCKED_RATE``
mass_change       observations that changed the published price       ``MASS_CHANGE_RATE``
mass_out_of_stock observations that went out of stock                 ``MASS_OUT_OF_STOCK_RATE``
================= =================================================== ========================

(settings ``PRICEWATCH_DRIFT_*``; 0 turns one off; defaults in ``pricewatch/settings.py``).
An alarm logs an ERROR naming the domain, the rate, its sample and its baseline (the rate
over the domain's events that left the window in this process; until there are enough,
over the first ``MIN_SAMPLE`` events of the window), counts ``pricewatch/drift/alarms``
and ``pricewatch/drift/alarms/<kind>``, sends an alert through the alert channels
(``PRICEWATCH_ALERT_URLS``, :mod:`pricewatch.alerts`) and is recorded beside the frontier
(:mod:`pricewatch.driftstate`) until the window ends, so ``scrapy frontier`` shows the
domain as drifting. It is raised once while the rate stays over the threshold; when the
rate falls back under it, an INFO line and ``pricewatch/drift/recovered`` say so.

**Mass changes are held.** The two mass rates are counted by the store's writer as it
compares each observation with the published offer (:class:`MassChanges`, given to the
store as its ``mass_guard``); while a domain is over a threshold, each observation that is
part of the movement is held by the confirm-before-publishing mechanism
(:mod:`pricewatch.quarantine`, reasons ``mass_change`` and ``mass_out_of_stock``) and
published only when a second fetch confirms it. The first events of the window, before the
minimum sample is reached, are published as usual: at most ``MIN_SAMPLE`` observations of
a domain go out before its mass change is recognised. Counts are per crawl process.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured

from pricewatch._crawl import per_crawl
from pricewatch.alerts import Alerter
from pricewatch.driftstate import (
    DriftAlarm,
    DriftStates,
    DriftStateUnavailable,
    drift_states_from_settings,
)
from pricewatch.leases import leases_completed
from pricewatch.outcomes import Outcome

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

    from pricewatch.frontier import Completion

logger = logging.getLogger(__name__)

KINDS = ("no_price", "invalid", "blocked", "mass_change", "mass_out_of_stock")
STATS = (
    "pricewatch/drift/alarms",  # and pricewatch/drift/alarms/<kind>
    "pricewatch/drift/recovered",
    "pricewatch/drift/persist_failed",
)
_FETCHED = frozenset({"ok", "no_price", "invalid"})
_ATTEMPTED = _FETCHED | {"blocked", "failed"}
_OBSERVED = frozenset({"same", "price", "stock", "both"})
# kind -> (labels counted, labels it is a rate of)
RATES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "no_price": (frozenset({"no_price"}), _FETCHED),
    "invalid": (frozenset({"invalid"}), _FETCHED),
    "blocked": (frozenset({"blocked"}), _ATTEMPTED),
    "mass_change": (frozenset({"price", "both"}), _OBSERVED),
    "mass_out_of_stock": (frozenset({"stock", "both"}), _OBSERVED),
}
CLOSE_TIMEOUT = 10.0


def _rate(settings: BaseSettings, name: str) -> float:
    value = settings.getfloat(name)
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must be between 0 and 1 (0: off), got {value}")
    return value


@dataclass(frozen=True, slots=True)
class DriftConfig:
    window: float
    min_sample: int
    thresholds: dict[str, float]  # kind -> rate (kinds switched off are left out)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> DriftConfig | None:
        if not settings.getbool("PRICEWATCH_DRIFT_ENABLED"):
            return None
        window = settings.getfloat("PRICEWATCH_DRIFT_WINDOW")
        if window <= 0:
            raise ValueError(f"PRICEWATCH_DRIFT_WINDOW must be > 0, got {window}")
        min_sample = settings.getint("PRICEWATCH_DRIFT_MIN_SAMPLE")
        if min_sample < 1:
            raise ValueError(f"PRICEWATCH_DRIFT_MIN_SAMPLE must be >= 1, got {min_sample}")
        thresholds = {
            kind: _rate(settings, f"PRICEWATCH_DRIFT_{kind.upper()}_RATE") for kind in KINDS
        }
        return cls(window, min_sample, {k: v for k, v in thresholds.items() if v > 0})


@dataclass(frozen=True, slots=True)
class Reading:
    """A rate over a domain's window, and its baseline."""

    kind: str
    rate: float
    count: int
    total: int
    baseline: float | None
    baseline_from: str

    def describe(self, window: float, threshold: float) -> str:
        baseline = "n/a" if self.baseline is None else f"{self.baseline:.0%}"
        return (
            f"{self.kind} rate {self.rate:.0%} ({self.count} of {self.total}) over the last "
            f"{window:g} s, baseline {baseline} ({self.baseline_from}), threshold {threshold:.0%}"
        )


# A window keeps its events in steps of 1/STEPS of its length: events of one label in one
# step are one entry, so a busy domain holds at most STEPS x labels entries (an hour's window
# at 50 SKUs a second held 180,000 events per guard); an event leaves the window within one
# step of its time.
STEPS = 360


class _Window:
    """One domain's labelled events over the last ``seconds`` (to within one step)."""

    __slots__ = ("before", "counts", "events")

    def __init__(self) -> None:
        # [step, label, events] entries, oldest first.
        self.events: deque[list[Any]] = deque()
        self.counts: Counter[str] = Counter()
        self.before: Counter[str] = Counter()  # events that left the window

    def add(self, now: float, label: str, seconds: float) -> None:
        width = seconds / STEPS
        step = int(now // width)
        self.counts[label] += 1
        same = None
        for entry in reversed(self.events):  # this step's entries: one per label at most
            if entry[0] != step:
                break
            if entry[1] == label:
                same = entry
                break
        if same is None:
            self.events.append([step, label, 1])
        else:
            same[2] += 1
        oldest = int((now - seconds) // width)
        while self.events and self.events[0][0] < oldest:
            _, old, n = self.events.popleft()
            self.counts[old] -= n
            self.before[old] += n

    def _first(self, of: frozenset[str], n: int) -> Counter[str]:
        """The labels of the window's first ``n`` events among ``of``."""
        first: Counter[str] = Counter()
        taken = 0
        for _, label, count in self.events:
            if label in of:
                take = min(count, n - taken)
                first[label] += take
                taken += take
                if taken == n:
                    break
        return first

    def read(self, kind: str, min_sample: int) -> Reading | None:
        """The rate of ``kind``, or None below the minimum sample."""
        counted, of = RATES[kind]
        total = sum(self.counts[label] for label in of)
        if total < min_sample:
            return None
        count = sum(self.counts[label] for label in counted)
        earlier = sum(self.before[label] for label in of)
        if earlier >= min_sample:
            baseline: float | None = sum(self.before[label] for label in counted) / earlier
            baseline_from = f"{earlier} earlier events"
        else:
            first = self._first(of, min_sample)
            size = sum(first.values())
            baseline = sum(first[label] for label in counted) / size
            baseline_from = f"the first {size} of the window"
        return Reading(kind, count / total, count, total, baseline, baseline_from)


class MassChanges:
    """The store's mass-change guard (:class:`pricewatch.quarantine.MassGuard`): counts the
    observations of each domain as the store's writer compares them with the published
    offer, and names those that are part of a mass change. Thread-safe (the SQLite store
    calls it from its writer thread); alarms wait in :meth:`take_raised` for the loop."""

    def __init__(self, config: DriftConfig) -> None:
        self.config = config
        self.kinds = [k for k in ("mass_change", "mass_out_of_stock") if k in config.thresholds]
        self._windows: dict[str, _Window] = {}
        self._over: set[tuple[str, str]] = set()
        self._raised: list[tuple[str, Reading]] = []  # (domain, reading); total 0: cleared
        self._lock = threading.Lock()

    def observe(self, domain: str, changed: bool, out_of_stock: bool) -> str | None:
        label = {(False, False): "same", (True, False): "price", (False, True): "stock"}.get(
            (changed, out_of_stock), "both"
        )
        with self._lock:
            window = self._windows.get(domain)
            if window is None:
                window = self._windows[domain] = _Window()
            window.add(time.monotonic(), label, self.config.window)
            reason = None
            for kind in self.kinds:
                reading = window.read(kind, self.config.min_sample)
                over = reading is not None and reading.rate >= self.config.thresholds[kind]
                key = (domain, kind)
                if over and key not in self._over:
                    assert reading is not None
                    self._over.add(key)
                    self._raised.append((domain, reading))
                elif not over and key in self._over:
                    self._over.discard(key)
                    self._raised.append((domain, Reading(kind, 0, 0, 0, None, "")))
                if over and label in RATES[kind][0] and reason is None:
                    reason = kind
            return reason

    def take_raised(self) -> list[tuple[str, Reading]]:
        """Alarms raised (a reading with a total) and cleared (total 0) since last asked."""
        with self._lock:
            raised, self._raised = self._raised, []
        return raised


def label_of(completion: Completion) -> str | None:
    """How a lease's ending counts for the rates (None: not at all)."""
    outcome = completion.outcome
    if outcome is Outcome.OK:
        return "ok"
    if outcome is Outcome.NO_PRICE:
        reason = completion.reason or ""
        return "invalid" if reason.startswith(("invalid_", "rejected_")) else "no_price"
    if outcome is Outcome.BLOCKED:
        return "blocked"
    if outcome in (Outcome.ERROR, Outcome.GONE):
        return "failed"
    return None  # skipped: nothing was fetched


class DriftMonitor:
    """The crawl's drift alarms (an extension; the store pipeline gives its
    :attr:`mass` guard to the store)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.config = DriftConfig.from_settings(crawler.settings)
        self.mass: MassChanges | None = None
        if self.config is None:
            return
        if "mass_change" in self.config.thresholds or "mass_out_of_stock" in self.config.thresholds:
            self.mass = MassChanges(self.config)
        self._windows: dict[str, _Window] = {}
        self._over: set[tuple[str, str]] = set()
        self._states: DriftStates | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.alerter: Alerter | None
        try:
            self.alerter = Alerter.from_crawler(crawler)
        except NotConfigured:
            self.alerter = None
        crawler.signals.connect(self.completed, signal=leases_completed)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def of(cls, crawler: Crawler) -> DriftMonitor:
        return per_crawl(crawler, cls)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DriftMonitor:
        monitor = cls.of(crawler)
        if monitor.config is None:
            raise NotConfigured  # PRICEWATCH_DRIFT_ENABLED is off: an operator's choice
        return monitor

    def completed(self, completions: Sequence[Completion]) -> None:
        config = self.config
        assert config is not None
        now = time.monotonic()
        for completion in completions:
            label = label_of(completion)
            if label is None:
                continue
            domain = completion.lease.domain
            window = self._windows.get(domain)
            if window is None:
                window = self._windows[domain] = _Window()
            window.add(now, label, config.window)
            for kind in ("no_price", "invalid", "blocked"):
                threshold = config.thresholds.get(kind)
                if threshold is None:
                    continue
                reading = window.read(kind, config.min_sample)
                over = reading is not None and reading.rate >= threshold
                key = (domain, kind)
                if over and key not in self._over:
                    self._over.add(key)
                    assert reading is not None
                    self._alarm(domain, reading)
                elif not over and key in self._over:
                    self._over.discard(key)
                    self._recovered(domain, kind)
        if self.mass is not None:  # the store pipeline completes leases after each write
            for domain, reading in self.mass.take_raised():
                if reading.total:
                    self._alarm(domain, reading)
                else:
                    self._recovered(domain, reading.kind)

    def _alarm(self, domain: str, reading: Reading) -> None:
        config = self.config
        assert config is not None
        stats = self.crawler.stats
        assert stats is not None
        detail = reading.describe(config.window, config.thresholds[reading.kind])
        held = " (its changes are held until confirmed)" if reading.kind.startswith("mass") else ""
        logger.error("Drift alarm on %s: %s%s", domain, detail, held)
        stats.inc_value("pricewatch/drift/alarms")
        stats.inc_value(f"pricewatch/drift/alarms/{reading.kind}")
        if self.alerter is not None:
            self.alerter.send(
                f"pricewatch: drift ({reading.kind}) on {domain}",
                f"{domain}: {detail}{held}",
                f"drift {reading.kind} of {domain}",
            )
        now = time.time()
        alarm = DriftAlarm(domain, reading.kind, detail, now, now + config.window)
        task = asyncio.get_running_loop().create_task(self._persist(alarm))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _recovered(self, domain: str, kind: str) -> None:
        stats = self.crawler.stats
        assert stats is not None
        stats.inc_value("pricewatch/drift/recovered")
        logger.info("Drift alarm on %s cleared: the %s rate is under its threshold", domain, kind)

    async def _persist(self, alarm: DriftAlarm) -> None:
        try:
            if self._states is None:
                self._states = drift_states_from_settings(self.crawler.settings)
            await self._states.raise_alarm(alarm)
        except (DriftStateUnavailable, ValueError) as exc:
            stats = self.crawler.stats
            assert stats is not None
            stats.inc_value("pricewatch/drift/persist_failed")
            logger.warning("Could not record the drift alarm of %s: %s", alarm.domain, exc)

    async def spider_closed(self) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=CLOSE_TIMEOUT)
        try:
            if self.alerter is not None:
                await self.alerter.close()
        finally:
            if self._states is not None:
                await asyncio.wait_for(self._states.close(), CLOSE_TIMEOUT)
