"""Fault and politeness modes of the sandbox shops, set per host.

A mode is switched on by ``POST /_control {"host": "127.0.0.3", "mode": NAME, ...params}``
(or ``--mode HOST=NAME:key=value,...`` on the command line) and lasts ``duration`` seconds
(forever when omitted). Several modes may be on at once on one host; they are applied in
the order ``hold``, ``slow``, ``drop``, ``ratelimit``, ``burst503``, ``challenge``, ``gone``,
``loyalty``.

Modes never touch ``/robots.txt``, the official API (``/api/products/{sku}``) or control
paths (``/_...``).

=========== ============================================================================
mode        params (defaults)
=========== ============================================================================
ratelimit   ``rate`` requests per ``window`` seconds (1.0) allowed before 429s (0 = storm:
            every request is 429), ``retry_after`` seconds (1), ``retry_after_format``
            ``"seconds"``/``"date"``, ``per_source`` (false): counted per client address
            (a shop that rate-limits each IP) instead of for the whole host
tolerance   ``concurrency`` page requests in flight accepted (1); one more arriving is
            answered 429 at once (before any latency), with ``retry_after`` seconds (1).
            Set it again to change it while requests are in flight (peak hours);
            ``/_stats`` counts the 429s and the peak of accepted requests in flight
hold        page requests wait, unanswered, until the mode is switched off (``"mode": null``
            or ``"clear": "hold"``) or its ``duration`` ends; ``GET /_control`` counts
            those waiting (``held``): a test holds a crawl's first requests until every
            worker has some, or keeps a crawl alive while it restarts a backend
burst503    ``burst`` 503s (3) at the start of every ``period`` requests (10),
            ``retry_after`` seconds (none)
challenge   ``fraction`` of pages (1.0) replaced by a CAPTCHA wall, with ``status`` (200)
drop        ``fraction`` of requests (1.0) whose connection is closed without a response
slow        ``delay`` seconds (2.0) before the response
gone        ``fraction`` of products (0.2) answering ``status`` 404, 410 or ``"mixed"``
loyalty     a loyalty scheme: ``/login`` (any method) sets the cookie ``cookie``
            (``"loyalty"``) to a new member token; product pages of HTML shops requested
            with a valid token show the price less ``discount`` (0.1), also in ``/_truth``
            (``loyalty_price``)
=========== ============================================================================

Hostile modes (``bomb``, ``trickle``, ``redirect_loop``, ``huge``, ``malformed``, ``inject``,
``redesign``)
are described in ``pricewatch.sandbox._hostile``; they come after these in the order.
"""

from __future__ import annotations

import asyncio
import random
import time
import zlib
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from email.utils import format_datetime
from typing import Any

from pricewatch.sandbox import _hostile

MODE_PARAMS: dict[str, dict[str, Any]] = {
    "ratelimit": {
        "rate": 0.0,
        "retry_after": 1,
        "retry_after_format": "seconds",
        "window": 1.0,
        "per_source": False,
    },
    "tolerance": {"concurrency": 1, "retry_after": 1},
    "hold": {},
    "burst503": {"burst": 3, "period": 10, "retry_after": None},
    "challenge": {"fraction": 1.0, "status": 200},
    "drop": {"fraction": 1.0},
    "slow": {"delay": 2.0},
    "gone": {"fraction": 0.2, "status": "mixed"},
    "loyalty": {"cookie": "loyalty", "discount": 0.1},
}
# tolerance is applied on arrival, before the latency and the others (sandbox/_server.py).
ORDER: tuple[str, ...] = (
    "tolerance", "hold", "slow", "drop", "ratelimit", "burst503", "challenge", "gone", "loyalty",
)  # fmt: skip
# The hostile pages (gzip bombs, trickles, endless redirects, ...) have their own module.
MODE_PARAMS.update(_hostile.PARAMS)
ORDER += _hostile.NAMES


class ModeError(ValueError):
    """An invalid mode request; the message names the field and the value."""


@dataclass(slots=True)
class ActiveMode:
    name: str
    params: dict[str, Any]
    expires: float | None  # time.monotonic() deadline, None = until switched off
    rng: random.Random
    seen: int = 0  # requests this mode has looked at
    window: deque[float] = field(default_factory=deque)  # ratelimit: accepted request times
    # ratelimit with per_source: accepted request times per client address
    sources: dict[str, deque[float]] = field(default_factory=dict)
    tokens: set[str] = field(default_factory=set)  # loyalty: member tokens handed out
    held: int = 0  # hold: requests waiting for the mode to end
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # set when switched off

    def to_json(self) -> dict[str, Any]:
        left = None if self.expires is None else max(0.0, self.expires - time.monotonic())
        out = {"mode": self.name, **self.params, "remaining": left, "seen": self.seen}
        if self.name == "hold":
            out["held"] = self.held
        return out

    async def hold(self) -> None:
        """Wait until this mode is switched off or its duration ends."""
        left = None if self.expires is None else self.expires - time.monotonic()
        self.held += 1
        try:
            await asyncio.wait_for(self.ended.wait(), left)
        except TimeoutError:
            pass
        finally:
            self.held -= 1


def _number(name: str, key: str, value: Any, *, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ModeError(f"{name}.{key} must be a number, got {value!r}")
    if value < minimum:
        raise ModeError(f"{name}.{key} must be >= {minimum}, got {value!r}")
    return float(value)


def validate(name: str, raw: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
    """Checked params (defaults filled in) and the duration of mode ``name``."""
    if name not in MODE_PARAMS:
        raise ModeError(f"mode must be one of {sorted(MODE_PARAMS)} or null, got {name!r}")
    defaults = MODE_PARAMS[name]
    extra = set(raw) - set(defaults) - {"duration"}
    if extra:
        raise ModeError(f"unknown parameter(s) for mode {name}: {sorted(extra)}")
    params = {**defaults, **{k: v for k, v in raw.items() if k != "duration"}}
    duration = raw.get("duration")
    if duration is not None:
        duration = _number(name, "duration", duration)
    for key in ("rate", "delay", "fraction", "window", "discount"):
        if key in params:
            params[key] = _number(name, key, params[key])
    if "fraction" in params and params["fraction"] > 1:
        raise ModeError(f"{name}.fraction must be <= 1, got {params['fraction']!r}")
    for key in ("burst", "period", "retry_after", "concurrency"):
        if key in params and params[key] is not None:
            value = params[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ModeError(f"{name}.{key} must be an integer >= 0, got {value!r}")
    if name == "burst503" and params["period"] < 1:
        raise ModeError(f"burst503.period must be >= 1, got {params['period']!r}")
    if name == "ratelimit" and params["retry_after_format"] not in ("seconds", "date"):
        raise ModeError(
            "ratelimit.retry_after_format must be 'seconds' or 'date', "
            f"got {params['retry_after_format']!r}"
        )
    if name == "ratelimit" and (
        params["window"] <= 0 or not isinstance(params["per_source"], bool)
    ):
        raise ModeError(
            "ratelimit.window must be > 0 and ratelimit.per_source true or false, got "
            f"{params['window']!r}, {params['per_source']!r}"
        )
    if name == "loyalty" and not (
        params["discount"] < 1 and isinstance(params["cookie"], str) and params["cookie"].isalnum()
    ):
        raise ModeError(
            "loyalty.discount must be < 1 and loyalty.cookie a word, got "
            f"{params['discount']!r}, {params['cookie']!r}"
        )
    if name == "challenge" and params["status"] not in (200, 403, 429, 503):
        raise ModeError(f"challenge.status must be 200, 403, 429 or 503, got {params['status']!r}")
    if name == "gone" and params["status"] not in (404, 410, "mixed"):
        raise ModeError(f"gone.status must be 404, 410 or 'mixed', got {params['status']!r}")
    if name in _hostile.PARAMS:
        error = _hostile.validate(name, params)
        if error is not None:
            raise ModeError(error)
    return params, duration


def retry_after_value(seconds: int, fmt: str) -> str:
    if fmt == "date":
        # HTTP dates have whole seconds: round up so the client never comes back early.
        when = datetime.now(UTC) + timedelta(seconds=seconds + 1)
        return format_datetime(when.replace(microsecond=0), usegmt=True)
    return str(seconds)


def loyalty_price(price: Decimal, discount: float) -> Decimal:
    """A member's price: ``price`` less ``discount``, in the price's own minor units."""
    return (price * (1 - Decimal(str(discount)))).quantize(price)


def gone_status(mode: ActiveMode, seed: int, sku: str) -> int | None:
    """404/410 if product ``sku`` is gone under this mode, else None. Stable per product."""
    h = zlib.crc32(f"{seed}:gone:{sku}".encode())
    if (h % 10_000) / 10_000 >= mode.params["fraction"]:
        return None
    status = mode.params["status"]
    if status == "mixed":
        return 410 if (h >> 16) % 2 else 404
    return int(status)


class Modes:
    """The active modes of every host."""

    def __init__(self, seed: int, hosts: list[str]) -> None:
        self._seed = seed
        self._hosts: dict[str, dict[str, ActiveMode]] = {h: {} for h in hosts}

    def set(self, host: str, name: str, raw: dict[str, Any]) -> ActiveMode:
        params, duration = validate(name, raw)
        expires = None if duration is None else time.monotonic() + duration
        rng = random.Random(f"pricewatch-sandbox:{self._seed}:{host}:{name}")
        mode = ActiveMode(name=name, params=params, expires=expires, rng=rng)
        old = self._hosts[host].get(name)
        if old is not None:
            old.ended.set()
        self._hosts[host][name] = mode
        return mode

    def clear(self, host: str, name: str | None = None) -> None:
        modes = self._hosts[host]
        for key in list(modes) if name is None else [name]:
            mode = modes.pop(key, None)
            if mode is not None:
                mode.ended.set()

    def active(self, host: str) -> list[ActiveMode]:
        """The modes on ``host`` in application order; expired ones are switched off here."""
        modes = self._hosts[host]
        now = time.monotonic()
        for name in [n for n, m in modes.items() if m.expires is not None and m.expires <= now]:
            modes.pop(name).ended.set()
        return [modes[name] for name in ORDER if name in modes]

    def get(self, host: str, name: str) -> ActiveMode | None:
        for mode in self.active(host):
            if mode.name == name:
                return mode
        return None

    def to_json(self) -> dict[str, list[dict[str, Any]]]:
        return {host: [m.to_json() for m in self.active(host)] for host in self._hosts}

    @property
    def seed(self) -> int:
        return self._seed
