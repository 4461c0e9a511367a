"""URL helpers: backend connection URLs (parsing, masking passwords before they are
logged) and the one rule for "this host or a parent domain of it"."""

from __future__ import annotations

from collections.abc import Collection
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


def _domain_name(name: str) -> str:
    return name.strip().lower().rstrip(".")


def parent_domains(host: str) -> list[str]:
    """``shop.example.com`` -> ``["shop.example.com", "example.com", "com"]``.

    The host itself, then each parent domain, most specific first; lowercased, a trailing
    dot dropped. Empty for an empty host.
    """
    labels = _domain_name(host).split(".")
    return [".".join(labels[i:]) for i in range(len(labels))] if labels != [""] else []


def host_matches(host: str, domain: str) -> bool:
    """True when ``host`` is ``domain`` or a subdomain of it (case-insensitive, a
    trailing dot ignored): ``host_matches("www.shop.example", "shop.example")``."""
    host, domain = _domain_name(host), _domain_name(domain)
    return bool(domain) and (host == domain or host.endswith("." + domain))


def matching_domain(host: str, domains: Collection[str]) -> str | None:
    """The most specific entry of ``domains`` (normalized names, e.g. the keys of a
    per-domain setting) that ``host`` matches, as :func:`host_matches` decides; None when
    none does."""
    for name in parent_domains(host):
        if name in domains:
            return name
    return None
