"""Politeness and resilience: the per-domain circuit breaker, challenge detection,
backoff retries and the scheduler that holds retries back. See each module."""

from __future__ import annotations

from pricewatch.politeness.backoff import BackoffPolicy, BackoffRetryMiddleware
from pricewatch.politeness.breaker import BreakerConfig, CircuitBreakerMiddleware, State
from pricewatch.politeness.challenge import ChallengeDetector
from pricewatch.politeness.scheduler import BackoffScheduler

__all__ = [
    "BackoffPolicy",
    "BackoffRetryMiddleware",
    "BackoffScheduler",
    "BreakerConfig",
    "ChallengeDetector",
    "CircuitBreakerMiddleware",
    "State",
]
