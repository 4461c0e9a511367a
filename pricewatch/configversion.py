"""The config version: one short, stable hash of the settings that decide what a crawl
fetches, how politely, and what it extracts, validates and publishes.

It is logged at start (``StartupReport``), stored with every observation (the
``config_version`` column of ``products``, ``price_changes`` and ``price_quarantine``) and
every audit record, and shown by ``scrapy prices --history``: an anomaly traces back to
the exact configuration that produced it, and two nodes compare theirs at a glance.

What is hashed: the Scrapy settings of :data:`SCRAPY_SETTINGS`, every ``PRICEWATCH_*``
setting of ``pricewatch/settings.py`` whose name starts with one of :data:`PREFIXES`
(throttle, concurrency, politeness, extraction, validation, confirmation), the content of
``PRICEWATCH_EXTRACT_RULES_FILE`` (its rules, not only its path), and the version of
pricewatch itself (the extraction code is part of what produced a price). Backend URLs,
log and stats files, metrics and other operational settings are left out: moving a
crawl to another database does not change what it would store.

The hash is the first 12 hex digits of SHA-256 over the values as canonical JSON (keys
sorted), so equal settings give the same version on every node and every run.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from scrapy.settings import BaseSettings

import pricewatch
from pricewatch import settings as project_settings
from pricewatch._crawl import per_crawl

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

# Shown at start (the politeness line of the log), and hashed.
POLITENESS = (
    "CONCURRENT_REQUESTS",
    "CONCURRENT_REQUESTS_PER_DOMAIN",
    "DOWNLOAD_DELAY",
    "DOWNLOAD_DELAY_JITTER",
    "AUTOTHROTTLE_ENABLED",
    "AUTOTHROTTLE_TARGET_CONCURRENCY",
    "AUTOTHROTTLE_MAX_DELAY",
    "ROBOTSTXT_OBEY",
    "RETRY_TIMES",
    "DOWNLOAD_SLOTS",
    "PRICEWATCH_DOMAIN_MAX_INFLIGHT",
    "PRICEWATCH_BREAKER_THRESHOLD",
    "PRICEWATCH_BREAKER_COOLDOWN",
    "USER_AGENT",
)
# Scrapy's own settings that change what is fetched or how: hashed with the above.
SCRAPY_SETTINGS = (
    *POLITENESS,
    "AUTOTHROTTLE_START_DELAY",
    "DOWNLOAD_TIMEOUT",
    "DOWNLOAD_MAXSIZE",
    "RETRY_HTTP_CODES",
    "HTTPERROR_ALLOWED_CODES",
    "REDIRECT_MAX_TIMES",
    "PLAYWRIGHT_MAX_CONTEXTS",
    "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT",
)
# PRICEWATCH_* settings hashed by prefix, so a knob added to one of these components later
# is part of the version without anyone remembering to list it here.
PREFIXES = (
    "PRICEWATCH_DOMAIN_",
    "PRICEWATCH_BREAKER_",
    "PRICEWATCH_CHALLENGE_",
    "PRICEWATCH_BACKOFF_",
    "PRICEWATCH_OFFICIAL_",
    "PRICEWATCH_FALLBACK_",
    "PRICEWATCH_JS_",
    "PRICEWATCH_BROWSER_",
    "PRICEWATCH_EXTRACT_",
    "PRICEWATCH_VALIDATE_",
    "PRICEWATCH_QUARANTINE_",
    "PRICEWATCH_ALLOWED_NETWORKS",
    "PRICEWATCH_DRIFT_",
)


def hashed_names() -> tuple[str, ...]:
    """The names of the settings the version covers, sorted."""
    own = (
        name
        for name in vars(project_settings)
        if name.startswith("PRICEWATCH_") and name.startswith(PREFIXES)
    )
    return tuple(sorted({*SCRAPY_SETTINGS, *own}))


def _plain(value: Any) -> Any:
    if isinstance(value, BaseSettings):
        return value.copy_to_dict()
    return value


def _rules_digest(path: str | None) -> str | None:
    """The SHA-256 of the rules file's bytes; ``unreadable`` when it cannot be read (the
    crawl then fails at start anyway, naming the file)."""
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return "unreadable"


def config_values(settings: BaseSettings) -> dict[str, Any]:
    """What the version is the hash of."""
    values: dict[str, Any] = {name: _plain(settings.get(name)) for name in hashed_names()}
    values["pricewatch"] = pricewatch.__version__
    values["extract_rules_sha256"] = _rules_digest(settings.get("PRICEWATCH_EXTRACT_RULES_FILE"))
    return values


def config_version(settings: BaseSettings) -> str:
    """The 12-hex-digit version of ``settings`` (see the module docstring)."""
    text = json.dumps(config_values(settings), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


class ConfigVersion:
    """The crawl's config version, computed once: ``ConfigVersion.of(crawler).value``."""

    def __init__(self, crawler: Crawler) -> None:
        self.value = config_version(crawler.settings)

    @classmethod
    def of(cls, crawler: Crawler) -> ConfigVersion:
        return per_crawl(crawler, cls)
