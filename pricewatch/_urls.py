"""Backend connection URLs: parsing, and masking passwords before they are logged."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit


def mask_password(url: str) -> str:
    """``redis://:secret@host/0`` -> ``redis://:***@host/0``; URLs without one unchanged."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def sqlite_path(url: str) -> Path:
    """The file of a SQLAlchemy-style SQLite URL.

    ``sqlite:///pricewatch.db`` is relative to the working directory,
    ``sqlite:////var/lib/pricewatch.db`` is absolute.
    """
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise ValueError(
            f"not a SQLite URL: {url!r} (expected sqlite:///relative.db or sqlite:////abs.db)"
        )
    return Path(url[len(prefix) :])


def scheme(url: str) -> str:
    return urlsplit(url).scheme.lower()
