"""The adaptive per-domain limit, applied (downloader middleware, 580).

Watches every answer of every domain, reports them to the domain's shared limit in the
frontier backend (:meth:`~pricewatch.frontier.Frontier.adjust_limits`, the rule is
:func:`pricewatch.politeness.limits.step`) and applies the limit it gets back to the
domain's Scrapy download slots (``concurrency``, and ``delay`` unless AutoThrottle is on).
The frontier applies the same limit to the leases it hands out to every worker, so the
workers sharing it keep to one budget per domain.

It sits between HTTP compression (590) and the circuit breaker (570): it sees each
decompressed answer, each retry included, before the breaker counts blocks, and a request
the breaker defers never reaches it. Lowering the limit on the first pushback is meant to
keep the breaker (which pauses a domain for minutes) for persistent blocks.

Pushback: a status in ``PRICEWATCH_LIMIT_PUSHBACK_CODES``, a challenge page
(``PRICEWATCH_CHALLENGE_MARKERS``), a download timeout, or the domain's recent latency
above ``PRICEWATCH_LIMIT_LATENCY_FACTOR`` times its usual latency (and
``PRICEWATCH_LIMIT_LATENCY_MIN_RISE`` seconds above it). Healthy: any other
answer below 400, and 404/410. Each request carries the generation of its domain's limit
when it was sent (``Request.meta["pricewatch_limit_generation"]``): pushback to a request
sent before the last decrease, or of a generation whose pushback was already reported,
changes nothing: a burst of 429s answering one burst of requests is one signal. The
circuit breaker still counts every block: it stays the last resort for blocks that persist.

Hosts whose ``DOWNLOAD_SLOTS`` entry sets a ``concurrency`` keep it: not watched, not changed.

Settings (defaults and when to change them: ``pricewatch/settings.py``):
``PRICEWATCH_LIMIT_*`` (see :class:`~pricewatch.politeness.limits.LimitConfig`),
``CONCURRENT_REQUESTS_PER_DOMAIN`` (the default ceiling), ``DOWNLOAD_DELAY`` (the lowest
delay), ``DOWNLOAD_SLOTS``, ``AUTOTHROTTLE_ENABLED``.

Stats: ``pricewatch/limit/increased``, ``pricewatch/limit/decreased``,
``pricewatch/limit/pushback/<reason>`` (reason ``http_429``, ``challenge``, ``timeout``,
``latency``, ...), ``pricewatch/limit/stale_pushback``, ``pricewatch/limit/sync_failed``, and
per domain ``pricewatch/limit/domain/<domain>``: its concurrency, delay, why it last changed
and its hour-of-week profile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import DownloadTimeoutError, NotConfigured
from scrapy.utils.httpobj import urlparse_cached

from pricewatch.frontier import FrontierUnavailable
from pricewatch.leases import CrawlResources
from pricewatch.meta import LIMIT_GENERATION_META
from pricewatch.politeness.breaker import request_domain
from pricewatch.politeness.challenge import ChallengeDetector
from pricewatch.politeness.limits import DomainLimit, LimitConfig, Report, step

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response

logger = logging.getLogger(__name__)

_FAST_ALPHA = 0.3  # weight of a new latency sample in the recent average
_SLOW_ALPHA = 0.05  # ... in the usual one
_LATENCY_SAMPLES = 10  # samples before the latency signal speaks
_HEALTHY = frozenset({404, 410})


@dataclass(slots=True)
class Latency:
    """A domain's recent and usual download latency (seconds, moving averages)."""

    recent: float = 0.0
    usual: float = 0.0
    samples: int = 0

    def add(self, seconds: float, factor: float, min_rise: float) -> bool:
        """Record one sample; True when the recent latency rose above ``factor`` x usual,
        and by at least ``min_rise`` seconds."""
        if self.samples == 0:
            self.recent = self.usual = seconds
        else:
            self.recent += _FAST_ALPHA * (seconds - self.recent)
        self.samples += 1
        risen = self.recent > factor * self.usual and self.recent - self.usual >= min_rise
        if factor and self.samples >= _LATENCY_SAMPLES and risen:
            self.recent = self.usual  # one signal per rise
            return True
        self.usual += _SLOW_ALPHA * (seconds - self.usual)
        return False


class AdaptiveLimitMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        settings = crawler.settings
        self.config = LimitConfig.from_settings(settings)
        if not self.config.enabled:
            raise NotConfigured
        self.challenges = ChallengeDetector.for_crawler(crawler)
        self.fixed = {
            key
            for key, slot in settings.getdict("DOWNLOAD_SLOTS").items()
            if isinstance(slot, dict) and "concurrency" in slot
        }
        self.own_delay = not settings.getbool("AUTOTHROTTLE_ENABLED")
        self.initial = DomainLimit.initial(self.config, 0.0)  # a domain not synced yet
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.states: dict[str, DomainLimit] = {}
        self.reports: dict[str, Report] = {}
        self.latency: dict[str, Latency] = {}
        self.slots: dict[str, str] = {}  # download slot key -> domain
        # Per domain, the newest generation whose pushback was reported: the answers to
        # the rest of that burst are stale at once, before the decrease comes back.
        self.acted: dict[str, int] = {}
        self._loaded = False
        self._load_lock: asyncio.Lock | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        crawler.signals.connect(self.request_reached_downloader, signals.request_reached_downloader)
        crawler.signals.connect(self.spider_closed, signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AdaptiveLimitMiddleware:
        return cls(crawler)

    # -- middleware hooks ------------------------------------------------------------------

    async def process_request(self, request: Request) -> None:
        if self._closed or self._slot_key(request) in self.fixed:
            return
        if not self._loaded:
            await self._load()
        domain = request_domain(request)
        state = self.states.get(domain)
        request.meta[LIMIT_GENERATION_META] = 0 if state is None else state.generation
        if state is None:
            self.reports.setdefault(domain, Report())  # created in the store at the next sync
            self._start()

    def process_response(self, request: Request, response: Response) -> Response:
        generation = request.meta.get(LIMIT_GENERATION_META)
        if generation is None or self._closed:
            return response
        domain = request_domain(request)
        status = response.status
        if status in self.config.pushback_codes:
            self._pushback(domain, generation, f"http_{status}")
        elif status < 300 and self.challenges.match(response) is not None:
            self._pushback(domain, generation, "challenge")
        elif status < 400 or status in _HEALTHY:
            self._report(domain).healthy += 1
            latency = request.meta.get("download_latency")
            if latency is not None:
                tracker = self.latency.setdefault(domain, Latency())
                config = self.config
                if tracker.add(float(latency), config.latency_factor, config.latency_min_rise):
                    self._pushback(domain, generation, "latency")
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        generation = request.meta.get(LIMIT_GENERATION_META)
        if generation is None or self._closed:
            return
        if isinstance(exception, DownloadTimeoutError | TimeoutError):
            self._pushback(request_domain(request), generation, "timeout")

    def request_reached_downloader(self, request: Request, **kwargs: Any) -> None:
        """The request has its download slot now: give the slot its domain's limit."""
        if LIMIT_GENERATION_META not in request.meta:
            return
        key = request.meta.get("download_slot")
        if key is None or key in self.fixed:
            return
        domain = request_domain(request)
        if self.slots.get(key) != domain:
            self.slots[key] = domain
        self._apply_slot(key, self.states.get(domain) or self.initial)

    async def spider_closed(self) -> None:
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- observations ----------------------------------------------------------------------

    def _slot_key(self, request: Request) -> str:
        key = request.meta.get("download_slot")
        return str(key) if key is not None else urlparse_cached(request).hostname or ""

    def _report(self, domain: str) -> Report:
        report = self.reports.get(domain)
        if report is None:
            report = self.reports[domain] = Report()
            self._start()
        return report

    def _stale(self, domain: str, generation: int) -> bool:
        state = self.states.get(domain)
        current = 0 if state is None else state.generation
        return generation < current or generation <= self.acted.get(domain, -1)

    def _pushback(self, domain: str, generation: int, reason: str) -> None:
        if self._stale(domain, generation):
            self.stats.inc_value("pricewatch/limit/stale_pushback")
            return
        self.acted[domain] = generation
        self.stats.inc_value(f"pricewatch/limit/pushback/{reason}")
        self._report(domain).merge_pushback(generation, reason)
        if self._wake is not None:
            self._wake.set()  # lower the limit now, not at the next sync

    # -- sync with the shared limit --------------------------------------------------------

    async def _load(self) -> None:
        if self._load_lock is None:
            self._load_lock = asyncio.Lock()
        async with self._load_lock:
            if self._loaded:
                return
            try:
                frontier = await CrawlResources.of(self.crawler).frontier()
                stored = await frontier.limits()
            except FrontierUnavailable as exc:
                self.stats.inc_value("pricewatch/limit/sync_failed")
                logger.warning("Could not load the learned limits: %s", exc)
                stored = {}
            for domain, text in stored.items():
                state = _parse(text)
                if state is not None:
                    self.states[domain] = state
            self._loaded = True

    def _start(self) -> None:
        if self._task is None and not self._closed:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._sync_loop())

    async def _sync_loop(self) -> None:
        assert self._wake is not None
        while not self._closed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.config.sync_interval)
            self._wake.clear()
            if self.reports:
                await self.sync()

    async def sync(self) -> None:
        """Send what was seen since the last sync; apply the limits that come back."""
        reports, self.reports = self.reports, {}
        config = self.config

        def update(domain: str, stored: str | None, now: float) -> tuple[int, str]:
            state = step(_parse(stored) if stored else None, reports.get(domain), now, config)
            return state.concurrency, state.to_json()

        try:
            frontier = await CrawlResources.of(self.crawler).frontier()
            result = await frontier.adjust_limits(list(reports), update)
        except FrontierUnavailable as exc:
            self.stats.inc_value("pricewatch/limit/sync_failed")
            logger.warning("Could not sync the per-domain limits: %s", exc)
            for domain, report in reports.items():  # kept for the next sync
                mine = self._report(domain)
                mine.healthy += report.healthy
                if report.pushback is not None:
                    mine.merge_pushback(report.pushback_generation, report.pushback)
            return
        for domain, text in result.items():
            state = _parse(text)
            if state is not None:
                self._update(domain, state)

    def _update(self, domain: str, state: DomainLimit) -> None:
        old = self.states.get(domain)
        self.states[domain] = state
        if old is not None and (state.limit, state.delay) != (old.limit, old.delay):
            lower = state.limit < old.limit or state.delay > old.delay
            self.stats.inc_value(f"pricewatch/limit/{'decreased' if lower else 'increased'}")
            log = logger.info if lower else logger.debug
            log("Limit of %s: %s", domain, state.reason)
        self.stats.set_value(
            f"pricewatch/limit/domain/{domain}",
            {
                "concurrency": state.concurrency,
                "delay": state.delay,
                "reason": state.reason,
                "profile": state.profile,
            },
        )
        for key, owner in self.slots.items():
            if owner == domain:
                self._apply_slot(key, state)

    def _apply_slot(self, key: str, state: DomainLimit) -> None:
        engine = self.crawler.engine
        slot = None if engine is None else engine.downloader.slots.get(key)
        if slot is None:
            return
        slot.concurrency = state.concurrency
        if self.own_delay:
            slot.delay = state.delay


def _parse(text: str) -> DomainLimit | None:
    try:
        return DomainLimit.from_json(text)
    except (ValueError, TypeError):
        logger.warning("Ignoring an unreadable stored limit: %r", text[:200])
        return None
