"""Retries of 429/5xx with exponential backoff and full jitter, never before Retry-After.

Replaces Scrapy's ``RetryMiddleware`` (same priority, 550) and keeps its semantics:
``RETRY_ENABLED``, ``RETRY_TIMES`` (and the ``max_retry_times`` meta), ``RETRY_HTTP_CODES``,
``RETRY_PRIORITY_ADJUST``, ``RETRY_EXCEPTIONS``, the ``dont_retry`` meta and the
``retry/*`` stats. Network errors are retried as Scrapy does (at once); a response whose
status is in ``RETRY_HTTP_CODES`` is retried after

    delay = max(uniform(0, min(PRICEWATCH_BACKOFF_MAX, PRICEWATCH_BACKOFF_BASE * 2 ** (n - 1))),
                Retry-After)

for the n-th retry. The retry waits in the scheduler (it needs
``pricewatch.politeness.scheduler.BackoffScheduler``), not in the downloader, so it holds
no slot while it waits. When the wait would outlive the request's lease (its deadline
minus ``DOWNLOAD_TIMEOUT``), the frontier becomes the retry queue: a 429 ends as
``Blocked`` with ``retry_after`` = the delay, any other status reaches the spider (outcome
``error``, rescheduled by the frontier's own failure backoff, never before Retry-After).
When the retries are exhausted, the response reaches the spider as it does with Scrapy.

Settings (defaults and when to change them: ``pricewatch/settings.py``):
- ``PRICEWATCH_BACKOFF_BASE``: the first retry waits up to this long.
- ``PRICEWATCH_BACKOFF_MAX``: cap of the jittered backoff (Retry-After may ask more).

Stats: ``pricewatch/backoff/delayed``, ``pricewatch/backoff/retry_after`` (retries whose
wait was set by Retry-After), ``pricewatch/backoff/to_frontier``; the scheduler adds
``pricewatch/backoff/held``/``released``/``abandoned``.
"""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.retry import RetryMiddleware
from scrapy.utils.misc import load_object
from scrapy.utils.response import response_status_message

from pricewatch._http import parse_retry_after
from pricewatch.audit import AuditTrail
from pricewatch.exceptions import Blocked
from pricewatch.meta import LEASE_META, NOT_BEFORE_META
from pricewatch.politeness.scheduler import BackoffScheduler

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    base: float
    cap: float

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> BackoffPolicy:
        policy = cls(
            base=settings.getfloat("PRICEWATCH_BACKOFF_BASE"),
            cap=settings.getfloat("PRICEWATCH_BACKOFF_MAX"),
        )
        if not (math.isfinite(policy.base) and policy.base > 0):
            raise ValueError(f"PRICEWATCH_BACKOFF_BASE must be > 0, got {policy.base}")
        if not (math.isfinite(policy.cap) and policy.cap >= policy.base):
            raise ValueError(
                f"PRICEWATCH_BACKOFF_MAX must be >= PRICEWATCH_BACKOFF_BASE ({policy.base}), "
                f"got {policy.cap}"
            )
        return policy

    def ceiling(self, attempt: int) -> float:
        """The largest backoff of the ``attempt``-th retry (1-based)."""
        exponent = min(max(attempt - 1, 0), 64)
        return min(self.cap, self.base * 2.0**exponent)

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Full jitter over the exponential ceiling, floored at ``retry_after``."""
        jittered = rng.uniform(0.0, self.ceiling(attempt))
        if retry_after is not None:
            return max(jittered, retry_after)
        return jittered


class BackoffRetryMiddleware(RetryMiddleware):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler.settings)
        self.crawler = crawler
        settings = crawler.settings
        self.policy = BackoffPolicy.from_settings(settings)
        self.download_timeout = settings.getfloat("DOWNLOAD_TIMEOUT")
        scheduler = settings.get("SCHEDULER")
        scheduler_cls = load_object(scheduler) if isinstance(scheduler, str) else scheduler
        # Not issubclass(): Scrapy's scheduler metaclass answers it by duck typing.
        if BackoffScheduler not in getattr(scheduler_cls, "__mro__", ()):
            raise ValueError(
                "BackoffRetryMiddleware needs SCHEDULER = "
                f"'pricewatch.politeness.scheduler.BackoffScheduler', got {scheduler!r}"
            )
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.rng = random.Random()
        self.clock = time.monotonic
        self.audit = AuditTrail.of(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BackoffRetryMiddleware:  # type: ignore[override]
        return cls(crawler)

    def process_response(  # type: ignore[override]
        self, request: Request, response: Response
    ) -> Request | Response:
        if request.meta.get("dont_retry", False) or response.status not in self.retry_http_codes:
            return response
        retry = self._retry(request, response_status_message(response.status))
        if retry is None:
            return response  # retries exhausted: the spider records the outcome
        hint = parse_retry_after(response.headers.get(b"Retry-After"))
        delay = self.policy.delay(retry.meta["retry_times"], hint, self.rng)
        lease = request.meta.get(LEASE_META)
        deadline = getattr(lease, "deadline", None)
        if deadline is not None and time.time() + delay + self.download_timeout > deadline:
            # Waiting here would outlive the lease: let the frontier schedule the retry.
            self.stats.inc_value("pricewatch/backoff/to_frontier")
            self.audit.decision(
                request,
                "retry",
                status=response.status,
                delay=round(delay, 3),
                retry_after=hint,
                to_frontier=True,
            )
            if response.status == 429:
                raise Blocked(
                    f"HTTP 429, retry in {delay:.1f}s (after the lease)", retry_after=delay
                )
            return response
        if hint is not None and delay == hint:
            self.stats.inc_value("pricewatch/backoff/retry_after")
        self.stats.inc_value("pricewatch/backoff/delayed")
        self.audit.decision(
            request, "retry", status=response.status, delay=round(delay, 3), retry_after=hint
        )
        retry.meta[NOT_BEFORE_META] = self.clock() + delay
        logger.debug("Retrying %s in %.2fs (HTTP %d)", request.url, delay, response.status)
        return retry
