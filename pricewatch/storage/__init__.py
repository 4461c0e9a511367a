"""Where observations are kept. See :mod:`pricewatch.storage.base`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pricewatch._urls import mask_password, scheme
from pricewatch.storage.base import (
    ChangeRow,
    Observation,
    ProductRow,
    Rejected,
    Store,
    StoreUnavailable,
    WriteResult,
)

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = [
    "ChangeRow",
    "Observation",
    "ProductRow",
    "Rejected",
    "Store",
    "StoreUnavailable",
    "WriteResult",
    "store_from_settings",
    "store_from_url",
]


def store_from_url(url: str) -> Store:
    kind = scheme(url)
    if kind == "sqlite":
        from pricewatch.storage.sqlite import SQLiteStore

        return SQLiteStore(url)
    if kind in ("postgresql", "postgres"):
        from pricewatch.storage.postgres import PostgresStore

        return PostgresStore(url)
    raise ValueError(
        f"PRICEWATCH_STORE_URL must be sqlite:///… or postgresql://…, got {mask_password(url)!r}"
    )


def store_from_settings(settings: BaseSettings) -> Store:
    """Build (not open) the store named by ``PRICEWATCH_STORE_URL``."""
    return store_from_url(settings.get("PRICEWATCH_STORE_URL") or "sqlite:///pricewatch.db")
