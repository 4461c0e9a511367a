"""Where observations are kept. See :mod:`pricewatch.storage.base`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pricewatch._urls import mask_password, scheme
from pricewatch.storage.base import (
    ChangeRow,
    HeldRow,
    Observation,
    ProductRow,
    PublishedChange,
    Rejected,
    Store,
    StoreConnectionLost,
    StoreUnavailable,
    WriteResult,
)

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = [
    "ChangeRow",
    "HeldRow",
    "Observation",
    "ProductRow",
    "PublishedChange",
    "Rejected",
    "Store",
    "StoreConnectionLost",
    "StoreUnavailable",
    "WriteResult",
    "store_from_settings",
    "store_from_url",
]


def store_from_url(url: str, **options: Any) -> Store:
    """Build (not open) the store of ``url``; ``options`` are the backend's keyword
    arguments (``auto_migrate``, ``timeout``, ...)."""
    kind = scheme(url)
    if kind == "sqlite":
        from pricewatch.storage.sqlite import SQLiteStore

        return SQLiteStore(url, **options)
    if kind in ("postgresql", "postgres"):
        from pricewatch.storage.postgres import PostgresStore

        return PostgresStore(url, **options)
    raise ValueError(
        f"PRICEWATCH_STORE_URL must be sqlite:///… or postgresql://…, got {mask_password(url)!r}"
    )


def store_from_settings(settings: BaseSettings, url: str | None = None) -> Store:
    """Build (not open) the store named by ``PRICEWATCH_STORE_URL`` (or ``url``), with
    the ``PRICEWATCH_STORE_*`` options and the ``PRICEWATCH_QUARANTINE_*`` config."""
    url = url or settings["PRICEWATCH_STORE_URL"]
    timeout = settings.getfloat("PRICEWATCH_STORE_TIMEOUT")
    if timeout <= 0:
        raise ValueError(f"PRICEWATCH_STORE_TIMEOUT must be > 0, got {timeout}")
    from pricewatch.quarantine import QuarantineConfig

    options: dict[str, Any] = {
        "auto_migrate": settings.getbool("PRICEWATCH_STORE_AUTO_MIGRATE"),
        "timeout": timeout,
        "quarantine": QuarantineConfig.from_settings(settings),
    }
    if scheme(url) in ("postgresql", "postgres"):
        pool_size = settings.getint("PRICEWATCH_STORE_POOL_SIZE")
        if pool_size < 1:
            raise ValueError(f"PRICEWATCH_STORE_POOL_SIZE must be >= 1, got {pool_size}")
        options["pool_size"] = pool_size
    return store_from_url(url, **options)
