"""Prices that change as Poisson processes at known rates, in accelerated time.

``--poisson MIN-MAX[:speed=S]``: every product of the HTML shops gets a change rate
log-uniform between MIN and MAX changes per simulated minute (deterministic from the seed),
and its price moves at the events of a Poisson process of that rate. Simulated time runs
``speed`` times faster than the wall clock (default 360: a simulated hour in 10 s), so a
crawl of minutes covers days. Prices advance lazily, when a product is fetched or the log
is read.

``GET /_poisson`` answers, in simulated seconds since the mode started: per product URL its
rate (changes per simulated second), the times its price changed and the times its page
was fetched with the price version each fetch was served. A benchmark computes from it
what a crawl kept fresh and how many requests it made, from the server's side.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

DEFAULT_SPEED = 360.0


class PoissonError(ValueError):
    pass


@dataclass
class _Track:
    rate: float  # changes per simulated second
    next_change: float  # simulated seconds
    changes: list[float] = field(default_factory=list)
    fetches: list[tuple[float, int]] = field(default_factory=list)  # (time, version served)


def parse(value: str) -> tuple[float, float, float]:
    """``"0.001-0.1"`` or ``"0.001-0.1:speed=360"`` -> (min, max per minute, speed)."""
    spec, _, options = value.partition(":")
    try:
        low_text, high_text = spec.split("-", 1)
        low, high = float(low_text), float(high_text)
    except ValueError:
        raise PoissonError(f"poisson must be MIN-MAX changes per minute, got {value!r}") from None
    speed = DEFAULT_SPEED
    if options:
        key, _, number = options.partition("=")
        if key != "speed":
            raise PoissonError(f"poisson takes speed=S only, got {options!r}")
        try:
            speed = float(number)
        except ValueError:
            raise PoissonError(f"poisson speed must be a number, got {number!r}") from None
    if not (0 < low <= high and math.isfinite(high)):
        raise PoissonError(f"poisson rates must be 0 < MIN <= MAX, got {low} and {high}")
    if not (speed > 0 and math.isfinite(speed)):
        raise PoissonError(f"poisson speed must be > 0, got {speed}")
    return low, high, speed


class PoissonPrices:
    """The Poisson price changes of a set of products (keyed by URL)."""

    def __init__(self, seed: int, keys: list[str], low: float, high: float, speed: float) -> None:
        self.speed = speed
        self._rng = random.Random(f"pricewatch-sandbox:{seed}:poisson")
        self._started = time.monotonic()
        self._tracks: dict[str, _Track] = {}
        self.rng = random.Random(f"pricewatch-sandbox:{seed}:poisson-steps")
        for url in keys:
            rate = math.exp(self._rng.uniform(math.log(low), math.log(high))) / 60.0
            self._tracks[url] = _Track(rate, self._rng.expovariate(rate))

    def now(self) -> float:
        """Simulated seconds since the mode started."""
        return (time.monotonic() - self._started) * self.speed

    def __contains__(self, url: str) -> bool:
        return url in self._tracks

    def advance(self, url: str, now: float) -> int:
        """Price changes of ``url`` due by ``now`` (simulated seconds), now recorded."""
        track = self._tracks[url]
        due = 0
        while track.next_change <= now:
            track.changes.append(track.next_change)
            track.next_change += self._rng.expovariate(track.rate)
            due += 1
        return due

    def fetched(self, url: str) -> int:
        """Record a fetch of ``url`` now; returns the changes to apply before serving it."""
        now = self.now()
        due = self.advance(url, now)
        track = self._tracks[url]
        track.fetches.append((now, len(track.changes)))
        return due

    def log(self, name: Callable[[str], str]) -> dict[str, Any]:
        """Everything so far, products named by ``name(key)`` (their URL)."""
        now = self.now()
        for key in self._tracks:
            self.advance(key, now)
        return {
            "now": now,
            "speed": self.speed,
            "products": {
                name(key): {"rate": t.rate, "changes": t.changes, "fetches": t.fetches}
                for key, t in self._tracks.items()
            },
        }


def step(rng: random.Random, price: Decimal) -> Decimal:
    """A price 3-15 % up or down (a change the quarantine lets through)."""
    factor = Decimal(rng.randint(3, 15)) / 100
    return price * (1 - factor if rng.random() < 0.5 else 1 + factor)
