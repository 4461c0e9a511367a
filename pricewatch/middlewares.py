"""The project's downloader middlewares, registered in ``DOWNLOADER_MIDDLEWARES``.

- ``DestinationMiddleware`` (50, :mod:`pricewatch.destinations`): refuses hosts that resolve
  to non-public addresses outside ``PRICEWATCH_ALLOWED_NETWORKS``.

Politeness and resilience (:mod:`pricewatch.politeness`):
- ``CircuitBreakerMiddleware`` (570): per-domain circuit breaker shared through the
  frontier, and challenge-page detection.
- ``BackoffRetryMiddleware`` (550, in place of Scrapy's ``RetryMiddleware``): retries of
  429/5xx with exponential backoff, full jitter and Retry-After.
- ``OfficialSourceMiddleware`` (560, :mod:`pricewatch.politeness.fallback`): the official API of a
  domain whose circuit has been open too long.
"""

from __future__ import annotations

from pricewatch.destinations import DestinationMiddleware
from pricewatch.politeness.backoff import BackoffRetryMiddleware
from pricewatch.politeness.breaker import CircuitBreakerMiddleware
from pricewatch.politeness.fallback import OfficialSourceMiddleware

__all__ = [
    "BackoffRetryMiddleware",
    "CircuitBreakerMiddleware",
    "DestinationMiddleware",
    "OfficialSourceMiddleware",
]
