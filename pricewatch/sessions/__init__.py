"""Sessions on proxies: proxy pools, sessions with their cookie jars, proxy health.

See :mod:`pricewatch.sessions.middleware` for how requests are given sessions,
:mod:`pricewatch.sessions.proxies` for ``PRICEWATCH_PROXIES`` and
:mod:`pricewatch.sessions.store` for where sessions and health are kept.
"""

from __future__ import annotations

from pricewatch.sessions.middleware import SessionConfig, SessionMiddleware
from pricewatch.sessions.proxies import Proxy, ProxyPools, proxy_id
from pricewatch.sessions.store import (
    ProxyHealth,
    SessionRecord,
    SessionStore,
    SessionStoreUnavailable,
    session_store_from_settings,
)

__all__ = [
    "Proxy",
    "ProxyHealth",
    "ProxyPools",
    "SessionConfig",
    "SessionMiddleware",
    "SessionRecord",
    "SessionStore",
    "SessionStoreUnavailable",
    "proxy_id",
    "session_store_from_settings",
]
