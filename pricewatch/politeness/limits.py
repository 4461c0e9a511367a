"""Per-domain adaptive limits: the rule that moves a domain's concurrency and delay.

Pure functions over :class:`DomainLimit`, the state the frontier backend keeps for each
domain (one JSON record, shared by every worker); :mod:`pricewatch.politeness.adaptive`
feeds them what the shops answered. Additive increase, multiplicative decrease:

- **Pushback** (a status in ``PRICEWATCH_LIMIT_PUSHBACK_CODES``, a challenge page, a
  timeout, or a sustained latency rise) from a request sent under the current generation:
  the limit is multiplied by ``PRICEWATCH_LIMIT_DECREASE`` (never below
  ``PRICEWATCH_LIMIT_FLOOR``); at the floor the delay doubles instead (at least 1 s, at most
  ``PRICEWATCH_LIMIT_MAX_DELAY``). The generation moves on, so the other answers to the
  same burst (requests sent before the decrease) decrease nothing more. No increase for
  ``PRICEWATCH_LIMIT_INCREASE_INTERVAL`` seconds after it, twice as long when the level
  it had just risen to failed again (up to ``PRICEWATCH_LIMIT_MAX_HOLD``).
- **Healthy**: a domain that has never pushed back starts at ``PRICEWATCH_LIMIT_START`` and
  grows by one after each ``limit`` healthy answers (about one round trip: a ramp that
  never sends more than one request beyond what was answered). After the first pushback
  it grows by one every ``PRICEWATCH_LIMIT_INCREASE_INTERVAL`` seconds in which at least
  ``limit`` answers were healthy and none pushed back; a raised delay comes down (halved,
  not below the configured one) before the concurrency goes up.
- **Bounds**: the limit stays within the floor and the ceiling
  (``PRICEWATCH_LIMIT_CEILING``, default ``CONCURRENT_REQUESTS_PER_DOMAIN``).
- **Hour of week**: the last limit of each hour of the week (UTC, 0 = Monday 00:00) is kept
  in ``profile``; when a new hour starts that has one, the domain starts the hour from it.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = [
    "DomainLimit",
    "LimitConfig",
    "Report",
    "hour_of_week",
    "limit_ceiling",
    "limit_start",
    "step",
]

MIN_RAISED_DELAY = 1.0  # seconds: the first delay a domain at the floor is given


def limit_ceiling(settings: BaseSettings) -> int:
    """``PRICEWATCH_LIMIT_CEILING``, or ``CONCURRENT_REQUESTS_PER_DOMAIN`` when it is None."""
    if settings.get("PRICEWATCH_LIMIT_CEILING") is None:
        return settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")
    return settings.getint("PRICEWATCH_LIMIT_CEILING")


def limit_start(settings: BaseSettings) -> int:
    """``PRICEWATCH_LIMIT_START``, never above the ceiling (nor below 1)."""
    return max(1, min(settings.getint("PRICEWATCH_LIMIT_START"), limit_ceiling(settings)))


def hour_of_week(epoch: float) -> int:
    """0 (Monday 00:00-00:59 UTC) to 167 (Sunday 23:00-23:59 UTC)."""
    t = time.gmtime(epoch)
    return t.tm_wday * 24 + t.tm_hour


@dataclass(frozen=True, slots=True)
class LimitConfig:
    """The limiter's settings, read and checked once (``PRICEWATCH_LIMIT_*``)."""

    enabled: bool
    start: int
    floor: int
    ceiling: int
    decrease: float
    interval: float
    max_hold: float
    base_delay: float
    max_delay: float
    pushback_codes: frozenset[int]
    latency_factor: float
    latency_min_rise: float
    sync_interval: float

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> LimitConfig:
        codes = settings.getlist("PRICEWATCH_LIMIT_PUSHBACK_CODES")
        try:
            pushback = frozenset(int(code) for code in codes)
        except (TypeError, ValueError):
            raise ValueError(
                f"PRICEWATCH_LIMIT_PUSHBACK_CODES must be HTTP status codes, got {codes!r}"
            ) from None
        ceiling = limit_ceiling(settings)
        floor = settings.getint("PRICEWATCH_LIMIT_FLOOR")
        config = cls(
            enabled=settings.getbool("PRICEWATCH_LIMIT_ENABLED"),
            # Within the bounds: -s CONCURRENT_REQUESTS_PER_DOMAIN=1 lowers it too.
            start=min(settings.getint("PRICEWATCH_LIMIT_START"), max(ceiling, floor)),
            floor=floor,
            ceiling=ceiling,
            decrease=settings.getfloat("PRICEWATCH_LIMIT_DECREASE"),
            interval=settings.getfloat("PRICEWATCH_LIMIT_INCREASE_INTERVAL"),
            max_hold=settings.getfloat("PRICEWATCH_LIMIT_MAX_HOLD"),
            base_delay=settings.getfloat("DOWNLOAD_DELAY"),
            max_delay=settings.getfloat("PRICEWATCH_LIMIT_MAX_DELAY"),
            pushback_codes=pushback,
            latency_factor=settings.getfloat("PRICEWATCH_LIMIT_LATENCY_FACTOR"),
            latency_min_rise=settings.getfloat("PRICEWATCH_LIMIT_LATENCY_MIN_RISE"),
            sync_interval=settings.getfloat("PRICEWATCH_LIMIT_SYNC_INTERVAL"),
        )
        config.validate()
        return config

    def validate(self) -> None:
        if self.floor < 1:
            raise ValueError(f"PRICEWATCH_LIMIT_FLOOR must be >= 1, got {self.floor}")
        if self.ceiling < self.floor:
            raise ValueError(
                f"PRICEWATCH_LIMIT_CEILING must be >= PRICEWATCH_LIMIT_FLOOR ({self.floor}), "
                f"got {self.ceiling}"
            )
        if self.start < self.floor:
            raise ValueError(
                f"PRICEWATCH_LIMIT_START must be >= PRICEWATCH_LIMIT_FLOOR ({self.floor}), "
                f"got {self.start}"
            )
        if not (math.isfinite(self.decrease) and 0 < self.decrease < 1):
            raise ValueError(f"PRICEWATCH_LIMIT_DECREASE must be in (0, 1), got {self.decrease}")
        for name, value in (
            ("INCREASE_INTERVAL", self.interval),
            ("SYNC_INTERVAL", self.sync_interval),
        ):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"PRICEWATCH_LIMIT_{name} must be > 0, got {value}")
        if not (math.isfinite(self.max_hold) and self.max_hold >= self.interval):
            raise ValueError(
                "PRICEWATCH_LIMIT_MAX_HOLD must be >= PRICEWATCH_LIMIT_INCREASE_INTERVAL "
                f"({self.interval}), got {self.max_hold}"
            )
        if not (math.isfinite(self.max_delay) and self.max_delay >= self.base_delay):
            raise ValueError(
                f"PRICEWATCH_LIMIT_MAX_DELAY must be >= DOWNLOAD_DELAY ({self.base_delay}), "
                f"got {self.max_delay}"
            )
        if not (math.isfinite(self.latency_factor) and self.latency_factor >= 0):
            raise ValueError(
                f"PRICEWATCH_LIMIT_LATENCY_FACTOR must be >= 0, got {self.latency_factor}"
            )
        if not (math.isfinite(self.latency_min_rise) and self.latency_min_rise >= 0):
            raise ValueError(
                f"PRICEWATCH_LIMIT_LATENCY_MIN_RISE must be >= 0, got {self.latency_min_rise}"
            )
        if self.latency_factor and self.latency_factor <= 1:
            raise ValueError(
                "PRICEWATCH_LIMIT_LATENCY_FACTOR must be > 1 (or 0: off), "
                f"got {self.latency_factor}"
            )
        bad = sorted(code for code in self.pushback_codes if not 100 <= code <= 599)
        if bad:
            raise ValueError(f"PRICEWATCH_LIMIT_PUSHBACK_CODES must be HTTP statuses, got {bad}")


@dataclass(frozen=True, slots=True)
class DomainLimit:
    """One domain's learned limit, as the frontier backend stores it (JSON)."""

    limit: float  # requests in flight allowed to the domain, across every worker
    delay: float  # seconds between two requests of one worker to the domain
    generation: int = 0  # moves on at every decrease
    slow_start: bool = True  # no pushback seen yet: +1 per round trip, not per interval
    grow_at: float = 0.0  # epoch seconds before which the limit does not rise
    hold: float = 0.0  # the wait after the last decrease (doubles on failed probes)
    raised_at: float = 0.0  # epoch seconds of the last increase
    healthy: int = 0  # healthy answers since the last change
    reason: str = "start"  # why it last changed
    changed_at: float = 0.0  # epoch seconds of the last change
    hour: int = -1  # hour of week of the last update
    profile: dict[str, float] = field(default_factory=dict)  # hour of week -> last limit
    pushbacks: int = 0  # pushbacks that decreased it, all time

    @property
    def concurrency(self) -> int:
        return max(1, int(self.limit))

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DomainLimit:
        data: dict[str, Any] = json.loads(text)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    @classmethod
    def initial(cls, config: LimitConfig, now: float) -> DomainLimit:
        return cls(limit=float(config.start), delay=config.base_delay, changed_at=now)


@dataclass(slots=True)
class Report:
    """What one worker saw of one domain since its last sync."""

    healthy: int = 0
    # The first pushback of a request sent under the domain's current generation, and why.
    pushback: str | None = None
    pushback_generation: int = -1
    stale: int = 0  # pushbacks of requests sent before the last decrease

    def merge_pushback(self, generation: int, reason: str) -> None:
        if generation > self.pushback_generation:
            self.pushback, self.pushback_generation = reason, generation
        elif generation < self.pushback_generation:
            self.stale += 1

    def __bool__(self) -> bool:
        return bool(self.healthy or self.pushback or self.stale)


def step(
    state: DomainLimit | None, report: Report | None, now: float, config: LimitConfig
) -> DomainLimit:
    """The domain's limit after ``report`` (None: no answers, only the hour may change)."""
    if state is None:
        state = DomainLimit.initial(config, now)
    state = _bounded(state, config)
    hour = hour_of_week(now)
    if hour != state.hour:
        learned = state.profile.get(str(hour))
        if learned is not None and state.hour >= 0 and learned != state.limit:
            state = replace(
                state,
                limit=min(max(learned, config.floor), config.ceiling),
                slow_start=False,
                healthy=0,
                reason=f"profile: hour {hour} of the week",
                changed_at=now,
            )
        state = replace(state, hour=hour)
    if report is not None:
        if report.pushback is not None and report.pushback_generation >= state.generation:
            state = _decrease(state, report.pushback, now, config)
        elif report.healthy:
            state = _grow(replace(state, healthy=state.healthy + report.healthy), now, config)
    profile = dict(state.profile)
    profile[str(hour)] = state.limit
    return replace(state, profile=profile)


def _bounded(state: DomainLimit, config: LimitConfig) -> DomainLimit:
    limit = min(max(state.limit, config.floor), config.ceiling)
    delay = min(max(state.delay, config.base_delay), config.max_delay)
    if limit == state.limit and delay == state.delay:
        return state
    return replace(state, limit=float(limit), delay=delay)


def _decrease(state: DomainLimit, why: str, now: float, config: LimitConfig) -> DomainLimit:
    failed_probe = state.raised_at and now - state.raised_at <= max(state.hold, config.interval)
    hold = min(state.hold * 2, config.max_hold) if failed_probe and state.hold else config.interval
    if state.limit > config.floor:
        limit = max(float(config.floor), math.floor(state.limit * config.decrease))
        delay = state.delay
        what = f"{why}: concurrency {state.concurrency} -> {max(1, int(limit))}"
    else:
        limit = state.limit
        delay = min(config.max_delay, max(state.delay * 2, MIN_RAISED_DELAY))
        what = f"{why}: at the floor, delay {state.delay:g}s -> {delay:g}s"
    return replace(
        state,
        limit=limit,
        delay=delay,
        generation=state.generation + 1,
        slow_start=False,
        grow_at=now + hold,
        hold=hold,
        healthy=0,
        reason=what,
        changed_at=now,
        pushbacks=state.pushbacks + 1,
    )


def _grow(state: DomainLimit, now: float, config: LimitConfig) -> DomainLimit:
    if state.slow_start:
        # +1 per `limit` healthy answers (about one per round trip), several per sync if
        # that many came: never more than one request beyond what was last answered.
        start = state
        while state.healthy >= state.concurrency and state.limit < config.ceiling:
            state = replace(
                state, limit=float(state.concurrency + 1), healthy=state.healthy - state.concurrency
            )
        if state.limit >= config.ceiling:
            state = replace(state, slow_start=False, grow_at=now + config.interval)
        if state.concurrency == start.concurrency:
            return state
        what = f"healthy (ramp): concurrency {start.concurrency} -> {state.concurrency}"
        return replace(state, raised_at=now, reason=what, changed_at=now)
    if state.healthy < state.concurrency or now < state.grow_at:
        return state  # not yet one answer per request allowed in flight, or too soon
    if state.delay > config.base_delay:
        delay = max(config.base_delay, state.delay / 2)
        what = f"healthy: delay {state.delay:g}s -> {delay:g}s"
        return _raised(replace(state, delay=delay), what, now, config)
    if state.limit >= config.ceiling:
        return replace(state, healthy=0, grow_at=now + config.interval)
    limit = float(min(config.ceiling, state.concurrency + 1))
    what = f"healthy: concurrency {state.concurrency} -> {int(limit)}"
    return _raised(replace(state, limit=limit), what, now, config)


def _raised(state: DomainLimit, what: str, now: float, config: LimitConfig) -> DomainLimit:
    return replace(
        state,
        healthy=0,
        grow_at=now + config.interval,
        raised_at=now,
        reason=what,
        changed_at=now,
    )
