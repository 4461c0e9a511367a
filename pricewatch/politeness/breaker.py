"""Per-domain circuit breaker (downloader middleware), shared through the frontier.

closed -> open after ``PRICEWATCH_BREAKER_THRESHOLD`` blocks (a status in
``PRICEWATCH_BREAKER_STATUS_CODES`` or a challenge page) within
``PRICEWATCH_BREAKER_WINDOW`` seconds. Open lasts the cooldown, and at least as long as
the shop's ``Retry-After`` (seconds or HTTP date). open -> half-open when the cooldown has
passed: one request goes through as a probe, the others are deferred. A probe that
succeeds closes the circuit; one that is blocked or fails reopens it with the cooldown
multiplied by ``PRICEWATCH_BREAKER_COOLDOWN_FACTOR``.

When a circuit opens, the domain is paused in the frontier (``Frontier.pause_domain``),
so no worker is handed that domain's SKUs until the cooldown ends. Requests for an open
domain are never dropped: they raise :class:`~pricewatch.exceptions.DomainDeferred` with
``retry_after`` = the time left, so their leases complete as ``skipped`` and are
rescheduled for after it. A blocked response that arrives while the circuit is open ends
as :class:`~pricewatch.exceptions.Blocked` with the same ``retry_after``, unless the
fallback (:class:`~pricewatch.politeness.fallback.OfficialSourceMiddleware`, found with
``crawler.get_downloader_middleware()``) replaces it with a request to the domain's
official source. A challenge page always ends as ``Blocked``, whatever the circuit state.

Settings (defaults and when to change them: ``pricewatch/settings.py``):
- ``PRICEWATCH_BREAKER_ENABLED``: False keeps challenge detection only.
- ``PRICEWATCH_BREAKER_THRESHOLD``: blocks within the window that open the circuit.
- ``PRICEWATCH_BREAKER_WINDOW``: how far back blocks are counted.
- ``PRICEWATCH_BREAKER_COOLDOWN``: how long a circuit first stays open.
- ``PRICEWATCH_BREAKER_COOLDOWN_FACTOR``: cooldown multiplier after a failed probe.
- ``PRICEWATCH_BREAKER_MAX_COOLDOWN``: the longest cooldown.
- ``PRICEWATCH_BREAKER_STATUS_CODES``: statuses that count as blocks.
- ``PRICEWATCH_BREAKER_HALF_OPEN_RETRY``: ``retry_after`` of requests deferred
  while a probe is in flight.
- ``PRICEWATCH_BREAKER_PROBE_TIMEOUT`` (None: ``DOWNLOAD_TIMEOUT`` + 10 s): a probe with no
  answer after this long no longer blocks the next one.
- ``PRICEWATCH_CHALLENGE_*``: see :mod:`pricewatch.politeness.challenge`.

Request.meta: ``dont_break_circuit`` (True: neither gated nor counted).

Stats: ``pricewatch/breaker/opened``, ``pricewatch/breaker/half_open``,
``pricewatch/breaker/closed``, ``pricewatch/breaker/deferred``,
``pricewatch/breaker/blocks``, ``pricewatch/breaker/pause_failed``,
``pricewatch/challenge/detected``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, NoReturn

from scrapy import signals
from scrapy.utils.httpobj import urlparse_cached

from pricewatch._http import parse_retry_after
from pricewatch._urls import site_of
from pricewatch.audit import AuditTrail
from pricewatch.exceptions import Blocked, DomainDeferred
from pricewatch.frontier import FrontierUnavailable
from pricewatch.leases import CrawlResources
from pricewatch.meta import (
    BREAKER_COUNTED_META,
    BREAKER_PROBE_META,
    DONT_BREAK_CIRCUIT_META,
    LEASE_META,
)
from pricewatch.politeness.challenge import ChallengeDetector

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.settings import BaseSettings

    from pricewatch.politeness.fallback import OfficialSourceMiddleware

logger = logging.getLogger(__name__)


class State(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class BreakerConfig:
    """The breaker's settings, read and checked once (``PRICEWATCH_BREAKER_*``)."""

    enabled: bool
    threshold: int
    window: float
    cooldown: float
    cooldown_factor: float
    max_cooldown: float
    status_codes: frozenset[int]
    half_open_retry: float
    probe_timeout: float

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> BreakerConfig:
        codes = settings.getlist("PRICEWATCH_BREAKER_STATUS_CODES")
        try:
            status_codes = frozenset(int(code) for code in codes)
        except (TypeError, ValueError):
            raise ValueError(
                f"PRICEWATCH_BREAKER_STATUS_CODES must be HTTP status codes, got {codes!r}"
            ) from None
        config = cls(
            enabled=settings.getbool("PRICEWATCH_BREAKER_ENABLED"),
            threshold=settings.getint("PRICEWATCH_BREAKER_THRESHOLD"),
            window=settings.getfloat("PRICEWATCH_BREAKER_WINDOW"),
            cooldown=settings.getfloat("PRICEWATCH_BREAKER_COOLDOWN"),
            cooldown_factor=settings.getfloat("PRICEWATCH_BREAKER_COOLDOWN_FACTOR"),
            max_cooldown=settings.getfloat("PRICEWATCH_BREAKER_MAX_COOLDOWN"),
            status_codes=status_codes,
            half_open_retry=settings.getfloat("PRICEWATCH_BREAKER_HALF_OPEN_RETRY"),
            probe_timeout=(
                settings.getfloat("DOWNLOAD_TIMEOUT") + 10.0
                if settings.get("PRICEWATCH_BREAKER_PROBE_TIMEOUT") is None
                else settings.getfloat("PRICEWATCH_BREAKER_PROBE_TIMEOUT")
            ),
        )
        config.validate()
        return config

    def validate(self) -> None:
        if self.threshold < 1:
            raise ValueError(f"PRICEWATCH_BREAKER_THRESHOLD must be >= 1, got {self.threshold}")
        for name, value in (
            ("WINDOW", self.window),
            ("COOLDOWN", self.cooldown),
            ("PROBE_TIMEOUT", self.probe_timeout),
        ):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"PRICEWATCH_BREAKER_{name} must be > 0, got {value}")
        if not (math.isfinite(self.cooldown_factor) and self.cooldown_factor >= 1):
            raise ValueError(
                f"PRICEWATCH_BREAKER_COOLDOWN_FACTOR must be >= 1, got {self.cooldown_factor}"
            )
        if not (math.isfinite(self.max_cooldown) and self.max_cooldown >= self.cooldown):
            raise ValueError(
                "PRICEWATCH_BREAKER_MAX_COOLDOWN must be >= PRICEWATCH_BREAKER_COOLDOWN "
                f"({self.cooldown}), got {self.max_cooldown}"
            )
        if not (math.isfinite(self.half_open_retry) and self.half_open_retry >= 0):
            raise ValueError(
                f"PRICEWATCH_BREAKER_HALF_OPEN_RETRY must be >= 0, got {self.half_open_retry}"
            )
        bad = sorted(code for code in self.status_codes if not 100 <= code <= 599)
        if bad:
            raise ValueError(f"PRICEWATCH_BREAKER_STATUS_CODES must be HTTP statuses, got {bad}")


@dataclass(slots=True)
class Circuit:
    """The breaker state of one domain in this process (times are ``time.monotonic()``)."""

    state: State = State.CLOSED
    blocks: deque[float] = field(default_factory=deque)
    open_until: float = 0.0
    cooldown: float = 0.0  # the cooldown of the last opening
    opened_at: float | None = None  # when the circuit last went from closed to open
    probe_started: float | None = None
    probe: int | None = None  # token of the probe in flight (Request.meta[BREAKER_PROBE_META])

    def remaining(self, now: float) -> float:
        return max(self.open_until - now, 0.0)


def is_probe(request: Request, circuit: Circuit) -> bool:
    """Whether ``request`` is the probe ``circuit`` is waiting for (a retry copy of an
    older probe carries an older token)."""
    return circuit.probe is not None and request.meta.get(BREAKER_PROBE_META) == circuit.probe


def request_domain(request: Request) -> str:
    lease = request.meta.get(LEASE_META)
    domain = getattr(lease, "domain", None)
    if domain:
        return str(domain)
    return site_of(urlparse_cached(request).hostname or "")


class CircuitBreakerMiddleware:
    """See the module docstring. Sits between Scrapy's retry (550) and HTTP compression
    (590), so it sees every decompressed response before a retry is decided."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.config = BreakerConfig.from_settings(crawler.settings)
        self.challenges = ChallengeDetector.for_crawler(crawler)
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.circuits: dict[str, Circuit] = {}
        self._probes = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self._fallback: OfficialSourceMiddleware | None = None
        self._fallback_found = False
        self.clock = time.monotonic
        crawler.signals.connect(self.response_downloaded, signal=signals.response_downloaded)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CircuitBreakerMiddleware:
        return cls(crawler)

    # -- state queries (also used by the fallback) ---------------------------------------

    def circuit(self, domain: str) -> Circuit:
        circuit = self.circuits.get(domain)
        if circuit is None:
            circuit = self.circuits[domain] = Circuit()
        return circuit

    def open_for(self, domain: str) -> float | None:
        """Seconds the circuit of ``domain`` has been open (or half-open) without closing,
        None when it is closed."""
        circuit = self.circuits.get(domain)
        if circuit is None or circuit.state is State.CLOSED or circuit.opened_at is None:
            return None
        return self.clock() - circuit.opened_at

    # -- middleware hooks --------------------------------------------------------------------

    def process_request(self, request: Request) -> None:
        self._admit(request)

    def before_transfer(self, request: Request) -> None:
        """Asked again by ``SlotAccountingDownloader`` when the request leaves its slot
        queue: the circuit may have opened while it waited there."""
        self._admit(request)

    def _admit(self, request: Request) -> None:
        """Let the request through, make it the probe, or raise ``DomainDeferred``."""
        if not self.config.enabled or request.meta.get(DONT_BREAK_CIRCUIT_META):
            return
        if urlparse_cached(request).path == "/robots.txt":
            return
        domain = request_domain(request)
        circuit = self.circuits.get(domain)
        if circuit is None or circuit.state is State.CLOSED:
            return
        now = self.clock()
        if circuit.state is State.OPEN:
            if now < circuit.open_until:
                self._defer(request, domain, circuit.remaining(now), "circuit open")
            circuit.state = State.HALF_OPEN
            circuit.probe_started = None
            circuit.probe = None
            self.stats.inc_value("pricewatch/breaker/half_open")
            logger.info("Circuit of %s half-open: probing with %s", domain, request.url)
        if is_probe(request, circuit):
            return  # the probe itself, on its way out of the slot queue
        # Half-open: one probe at a time.
        if circuit.probe_started is not None and now - circuit.probe_started < (
            self.config.probe_timeout
        ):
            self._defer(request, domain, self.config.half_open_retry, "circuit half-open")
        circuit.probe_started = now
        circuit.probe = next(self._probes)
        request.meta[BREAKER_PROBE_META] = circuit.probe

    def response_downloaded(self, response: Response, request: Request, **kwargs: object) -> None:
        """``response_downloaded`` signal: count a blocked status as soon as it arrives.

        Scrapy frees the download slot right after this signal, before the response
        reaches ``process_response``; counting here lets the transfer gate stop the next
        queued request of a domain whose circuit this response opens."""
        if not self.config.enabled or request.meta.get(DONT_BREAK_CIRCUIT_META):
            return
        if response.status not in self.config.status_codes:
            return
        request.meta[BREAKER_COUNTED_META] = True
        domain = request_domain(request)
        hint = parse_retry_after(response.headers.get(b"Retry-After"))
        pause = self._record_block(request, domain, hint)
        if pause is not None:
            self._pause_soon(domain, pause)

    async def process_response(self, request: Request, response: Response) -> Response | Request:
        if request.meta.get(DONT_BREAK_CIRCUIT_META):
            return response
        domain = request_domain(request)
        marker = self.challenges.match(response) if response.status < 300 else None
        if marker is not None:
            self.stats.inc_value("pricewatch/challenge/detected")
            logger.info("Challenge page from %s (marker %r): %s", domain, marker, request.url)
        if not self.config.enabled:
            if marker is not None:
                raise Blocked(f"challenge page ({marker})")
            return response
        hint = parse_retry_after(response.headers.get(b"Retry-After"))
        if marker is not None or response.status in self.config.status_codes:
            if not request.meta.pop(BREAKER_COUNTED_META, False):
                pause = self._record_block(request, domain, hint)
                if pause is not None:
                    await self._pause(domain, pause)
            blocked_circuit = self.circuit(domain)
            if blocked_circuit.state is State.OPEN:
                left = blocked_circuit.remaining(self.clock())
                blocked = Blocked(f"{_what(response, marker)}, circuit open", retry_after=left)
                alternative = self._alternative(request, blocked)
                if alternative is not None:
                    return alternative
                raise blocked
            if marker is not None:
                raise Blocked(f"challenge page ({marker})", retry_after=hint)
            return response
        circuit = self.circuits.get(domain)
        if (
            circuit is None
            or circuit.state is not State.HALF_OPEN
            or not is_probe(request, circuit)
        ):
            return response
        if response.status < 500:
            self._close(domain, circuit)
        else:
            logger.info("Probe of %s failed with a server error: circuit reopens", domain)
            await self._pause(domain, self._open(domain, circuit, None, reopen=True))
        return response

    async def process_exception(self, request: Request, exception: Exception) -> None:
        if isinstance(exception, DomainDeferred | Blocked):
            return
        if BREAKER_PROBE_META in request.meta and not request.meta.get(DONT_BREAK_CIRCUIT_META):
            domain = request_domain(request)
            circuit = self.circuit(domain)
            if circuit.state is State.HALF_OPEN and is_probe(request, circuit):
                logger.info("Probe of %s failed (%r): circuit reopens", domain, exception)
                await self._pause(domain, self._open(domain, circuit, None, reopen=True))

    # -- transitions (synchronous; the frontier pause is awaited or scheduled by callers) ----

    def _alternative(self, request: Request, exception: Exception) -> Request | None:
        """A replacement for a request of an open domain: the domain's official source,
        same lease, when the fallback middleware is enabled."""
        fallback = self.fallback()
        return None if fallback is None else fallback.alternative_for(request, exception)

    def fallback(self) -> OfficialSourceMiddleware | None:
        """The crawl's :class:`~pricewatch.politeness.fallback.OfficialSourceMiddleware`,
        None when it is off (or the breaker runs without an engine)."""
        if not self._fallback_found:
            # Imported here: the fallback module builds on this one.
            from pricewatch.politeness.fallback import OfficialSourceMiddleware

            try:
                self._fallback = self.crawler.get_downloader_middleware(OfficialSourceMiddleware)
            except RuntimeError:  # no engine: the middleware used on its own
                self._fallback = None
            self._fallback_found = True
        return self._fallback

    def _defer(self, request: Request, domain: str, retry_after: float, why: str) -> NoReturn:
        self.stats.inc_value("pricewatch/breaker/deferred")
        AuditTrail.of(self.crawler).decision(
            request, "deferred", why=why, retry_after=round(retry_after, 3)
        )
        raise DomainDeferred(f"{why} for {domain}", retry_after=retry_after)

    def _record_block(self, request: Request, domain: str, hint: float | None) -> float | None:
        """Count one block; the seconds to pause the domain for, if it must be paused."""
        self.stats.inc_value("pricewatch/breaker/blocks")
        circuit = self.circuit(domain)
        now = self.clock()
        if circuit.state is State.HALF_OPEN:
            if is_probe(request, circuit):
                logger.info("Probe of %s was blocked: circuit reopens", domain)
                cooldown = self._open(domain, circuit, hint, reopen=True)
                AuditTrail.of(self.crawler).decision(
                    request, "breaker", cooldown=round(cooldown, 3), reopened=True
                )
                return cooldown
            return None
        if circuit.state is State.OPEN:
            if hint is not None and now + hint > circuit.open_until:
                # The shop asks for longer than our cooldown: honour it everywhere.
                circuit.open_until = now + hint
                return hint
            return None
        circuit.blocks.append(now)
        while circuit.blocks and circuit.blocks[0] <= now - self.config.window:
            circuit.blocks.popleft()
        if len(circuit.blocks) >= self.config.threshold:
            cooldown = self._open(domain, circuit, hint, reopen=False)
            AuditTrail.of(self.crawler).decision(request, "breaker", cooldown=round(cooldown, 3))
            return cooldown
        return None

    def _close(self, domain: str, circuit: Circuit) -> None:
        circuit.state = State.CLOSED
        circuit.blocks.clear()
        circuit.opened_at = None
        circuit.probe_started = None
        circuit.probe = None
        circuit.cooldown = 0.0
        self.stats.inc_value("pricewatch/breaker/closed")
        logger.info("Circuit of %s closed: the probe succeeded", domain)

    def _open(self, domain: str, circuit: Circuit, hint: float | None, *, reopen: bool) -> float:
        """Open (or reopen) the circuit; returns how long, in seconds."""
        now = self.clock()
        if reopen and circuit.cooldown > 0:
            cooldown = circuit.cooldown * self.config.cooldown_factor
        else:
            cooldown = self.config.cooldown
        cooldown = min(cooldown, self.config.max_cooldown)
        circuit.cooldown = cooldown
        if hint is not None:
            cooldown = max(cooldown, hint)
        circuit.state = State.OPEN
        circuit.open_until = now + cooldown
        circuit.probe_started = None
        circuit.probe = None
        circuit.blocks.clear()
        if circuit.opened_at is None:
            circuit.opened_at = now
        self.stats.inc_value("pricewatch/breaker/opened")
        logger.warning(
            "Circuit of %s open for %.1fs (%s)",
            domain,
            cooldown,
            "probe failed" if reopen else f"{self.config.threshold} blocks",
        )
        return cooldown

    def _pause_soon(self, domain: str, seconds: float) -> None:
        """Pause the domain in the frontier from synchronous code (a signal handler)."""
        task = asyncio.get_running_loop().create_task(self._pause(domain, seconds))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pause(self, domain: str, seconds: float) -> None:
        try:
            frontier = await CrawlResources.of(self.crawler).frontier()
            await frontier.pause_domain(domain, seconds)
        except FrontierUnavailable as exc:
            # This process still defers the domain; other workers find out by themselves.
            self.stats.inc_value("pricewatch/breaker/pause_failed")
            logger.warning("Could not pause %s in the frontier: %s", domain, exc)


def _what(response: Response, marker: str | None) -> str:
    return f"challenge page ({marker})" if marker is not None else f"HTTP {response.status}"
