"""The frontier: which SKU to fetch next. See :mod:`pricewatch.frontier.base`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pricewatch._urls import frontier_backend
from pricewatch.frontier.base import (
    STATS,
    Completion,
    DomainCounts,
    Entry,
    EntryInfo,
    Frontier,
    FrontierConnectionLost,
    FrontierUnavailable,
    Lease,
    LimitUpdate,
    SchedulePolicy,
)

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


def limit_start(settings: BaseSettings) -> int:
    """The cap of a domain nothing was learned about (the adaptive limit's own rule)."""
    # Imported here: pricewatch.politeness builds on the frontier.
    from pricewatch.politeness.limits import limit_start as start

    return start(settings)


__all__ = [
    "STATS",
    "Completion",
    "DomainCounts",
    "Entry",
    "EntryInfo",
    "Frontier",
    "FrontierConnectionLost",
    "FrontierUnavailable",
    "Lease",
    "LimitUpdate",
    "SchedulePolicy",
    "frontier_from_settings",
    "frontier_from_url",
    "policy_from_settings",
]


def policy_from_settings(settings: BaseSettings) -> SchedulePolicy:
    policy = SchedulePolicy(
        interval=settings.getfloat("PRICEWATCH_FRONTIER_INTERVAL"),
        min_interval=settings.getfloat("PRICEWATCH_FRONTIER_MIN_INTERVAL"),
        max_interval=settings.getfloat("PRICEWATCH_FRONTIER_MAX_INTERVAL"),
        retry_delay=settings.getfloat("PRICEWATCH_FRONTIER_RETRY_DELAY"),
        lease_ttl=settings.getfloat("PRICEWATCH_FRONTIER_LEASE_TTL"),
        max_attempts=settings.getint("PRICEWATCH_FRONTIER_MAX_ATTEMPTS"),
        gone_limit=settings.getint("PRICEWATCH_FRONTIER_GONE_LIMIT"),
        velocity_weight=settings.getfloat("PRICEWATCH_FRONTIER_VELOCITY_WEIGHT"),
        velocity_prior=settings.getfloat("PRICEWATCH_FRONTIER_VELOCITY_PRIOR"),
        velocity_window=settings.getint("PRICEWATCH_FRONTIER_VELOCITY_WINDOW"),
        health_weight=settings.getfloat("PRICEWATCH_FRONTIER_HEALTH_WEIGHT"),
        health_alpha=settings.getfloat("PRICEWATCH_FRONTIER_HEALTH_ALPHA"),
        retire_unseen=settings.getfloat("PRICEWATCH_FRONTIER_RETIRE_UNSEEN"),
        domain_max_inflight=settings.getint("PRICEWATCH_DOMAIN_MAX_INFLIGHT"),
        budget=settings.getfloat("PRICEWATCH_BUDGET"),
        budget_domains=_budgets(settings.getdict("PRICEWATCH_BUDGET_DOMAINS")),
        prior_rate=settings.getfloat("PRICEWATCH_BUDGET_PRIOR_RATE") / 86400.0,
        prior_weight=settings.getfloat("PRICEWATCH_BUDGET_PRIOR_WEIGHT"),
        rate_memory=settings.getfloat("PRICEWATCH_BUDGET_MEMORY"),
        reallocate=settings.getfloat("PRICEWATCH_BUDGET_REALLOCATE"),
        jitter=settings.getfloat("PRICEWATCH_BUDGET_JITTER"),
        adaptive_limits=settings.getbool("PRICEWATCH_LIMIT_ENABLED"),
        limit_start=limit_start(settings),
        burst=settings.getfloat("PRICEWATCH_BUDGET_BURST"),
    )
    for name in ("interval", "lease_ttl", "retry_delay"):
        if getattr(policy, name) <= 0:
            raise ValueError(
                f"PRICEWATCH_FRONTIER_{name.upper()} must be > 0, got {getattr(policy, name)}"
            )
    if policy.max_attempts < 1:
        raise ValueError(
            f"PRICEWATCH_FRONTIER_MAX_ATTEMPTS must be >= 1, got {policy.max_attempts}"
        )
    if policy.gone_limit < 1:
        raise ValueError(f"PRICEWATCH_FRONTIER_GONE_LIMIT must be >= 1, got {policy.gone_limit}")
    if not 0 <= policy.min_interval <= policy.max_interval:
        raise ValueError(
            "PRICEWATCH_FRONTIER_MIN_INTERVAL must be >= 0 and <= "
            f"PRICEWATCH_FRONTIER_MAX_INTERVAL, got {policy.min_interval} and "
            f"{policy.max_interval}"
        )
    for name in ("velocity_weight", "velocity_prior", "health_weight", "retire_unseen"):
        if getattr(policy, name) < 0:
            raise ValueError(
                f"PRICEWATCH_FRONTIER_{name.upper()} must be >= 0, got {getattr(policy, name)}"
            )
    if policy.velocity_window < 0:
        raise ValueError(
            f"PRICEWATCH_FRONTIER_VELOCITY_WINDOW must be >= 0, got {policy.velocity_window}"
        )
    if not 0 <= policy.health_alpha <= 1:
        raise ValueError(
            f"PRICEWATCH_FRONTIER_HEALTH_ALPHA must be in [0, 1], got {policy.health_alpha}"
        )
    if policy.domain_max_inflight < 0:
        raise ValueError(
            f"PRICEWATCH_DOMAIN_MAX_INFLIGHT must be >= 0, got {policy.domain_max_inflight}"
        )
    check_budget(policy)
    return policy


def _budgets(raw: dict[object, object]) -> dict[str, float]:
    out = {}
    for domain, value in raw.items():
        try:
            out[str(domain)] = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ValueError(
                "PRICEWATCH_BUDGET_DOMAINS must map domains to budgets >= 0, got "
                f"{value!r} for {domain!r}"
            ) from None
    return out


def check_budget(policy: SchedulePolicy) -> None:
    """Raise ``ValueError`` naming the budget setting that is out of range."""
    if not (math.isfinite(policy.budget) and policy.budget >= 0):
        raise ValueError(f"PRICEWATCH_BUDGET must be >= 0, got {policy.budget}")
    for domain, value in policy.budget_domains.items():
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(
                f"PRICEWATCH_BUDGET_DOMAINS must map domains to budgets >= 0, got {value} "
                f"for {domain!r}"
            )
    checks = (
        ("PRICEWATCH_BUDGET_PRIOR_RATE", policy.prior_rate * 86400.0, policy.prior_rate > 0),
        ("PRICEWATCH_BUDGET_PRIOR_WEIGHT", policy.prior_weight, policy.prior_weight > 0),
        ("PRICEWATCH_BUDGET_MEMORY", policy.rate_memory, policy.rate_memory >= 1),
        ("PRICEWATCH_BUDGET_REALLOCATE", policy.reallocate, policy.reallocate > 0),
        ("PRICEWATCH_BUDGET_JITTER", policy.jitter, 0 <= policy.jitter <= 0.5),
        ("PRICEWATCH_BUDGET_BURST", policy.burst, policy.burst > 0),
    )
    bounds = {
        "PRICEWATCH_BUDGET_PRIOR_RATE": "> 0",
        "PRICEWATCH_BUDGET_PRIOR_WEIGHT": "> 0",
        "PRICEWATCH_BUDGET_MEMORY": ">= 1",
        "PRICEWATCH_BUDGET_REALLOCATE": "> 0",
        "PRICEWATCH_BUDGET_JITTER": "in [0, 0.5]",
        "PRICEWATCH_BUDGET_BURST": "> 0",
    }
    for name, value, ok in checks:
        if not (ok and math.isfinite(value)):
            raise ValueError(f"{name} must be {bounds[name]}, got {value}")


def frontier_from_url(
    url: str, policy: SchedulePolicy | None = None, settings: BaseSettings | None = None
) -> Frontier:
    """Build (not open) the frontier at ``url`` (``sqlite:///…`` or ``redis://…``)."""
    policy = policy or SchedulePolicy()
    if frontier_backend(url) == "sqlite":
        from pricewatch.frontier.sqlite import SQLiteFrontier

        return SQLiteFrontier(url, policy)
    from pricewatch.frontier.redis import RedisFrontier

    return RedisFrontier(url, policy, settings=settings)


def frontier_from_settings(settings: BaseSettings) -> Frontier:
    """Build (not open) the frontier named by ``PRICEWATCH_FRONTIER_URL``."""
    url = settings["PRICEWATCH_FRONTIER_URL"]
    return frontier_from_url(url, policy_from_settings(settings), settings)
