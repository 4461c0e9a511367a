"""What every frontier backend shares about entries: the checks on those it is asked to
add, and the counters its leases and entry infos carry."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, TypedDict
from urllib.parse import urlsplit

from pricewatch._urls import BadURL, mask_userinfo, product_url, site_of
from pricewatch.frontier.base import Entry

logger = logging.getLogger(__name__)

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def domain_of(url: str) -> str | None:
    """The site of ``url`` (:func:`pricewatch._urls.site_of` of its host): what
    per-domain caps, pauses and counts are kept by. None when it has no host."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    return site_of(host) if host else None


def lookup_url(url: str) -> str:
    """The form under which ``url`` is stored: its canonical form when it has one."""
    try:
        return product_url(url)
    except BadURL:
        return url


def check_entry(entry: Entry, *, max_length: int = 0) -> tuple[Entry, str]:
    """The entry as stored (canonical URL, see :func:`pricewatch._urls.product_url`) and
    its domain; :class:`BadURL` with the reason when it cannot be scheduled."""
    url = product_url(entry.url, max_length=max_length)
    if entry.sku and _CONTROL.search(entry.sku):
        raise BadURL("control characters in the SKU")
    importance = entry.importance
    if not (isinstance(importance, int | float) and math.isfinite(importance)) or (importance <= 0):
        raise BadURL(f"importance must be > 0, got {importance!r}")
    domain = domain_of(url)
    assert domain is not None  # product_url refuses URLs without a host
    return (entry if url == entry.url else replace(entry, url=url)), domain


class Counters(TypedDict):
    """The stored state of an entry that a :class:`Lease` and an :class:`EntryInfo` both
    carry (as keyword arguments)."""

    sku: str | None
    importance: float
    attempts: int
    failures: int
    gone: int
    checks: int
    changes: int
    seen_at: float
    rate_changes: float
    rate_exposure: float
    observed_at: float


def counters(
    sku: str | None,
    importance: Any,
    attempts: Any,
    failures: Any,
    gone: Any,
    checks: Any,
    changes: Any,
    seen_at: Any,
    rate_changes: Any = 0.0,
    rate_exposure: Any = 0.0,
    observed_at: Any = 0.0,
) -> Counters:
    """An entry's stored counters, typed (Redis answers text, SQLite numbers)."""
    return Counters(
        sku=sku,
        importance=float(importance),
        attempts=int(attempts),
        failures=int(failures),
        gone=int(gone),
        checks=int(checks),
        changes=int(changes),
        seen_at=float(seen_at),
        rate_changes=float(rate_changes),
        rate_exposure=float(rate_exposure),
        observed_at=float(observed_at),
    )


def valid_entries(entries: Iterable[Entry]) -> list[tuple[Entry, str]]:
    """Entries in canonical form with their domain; the others are logged and skipped.
    The last of duplicate URLs wins."""
    out: dict[str, tuple[Entry, str]] = {}
    for entry in entries:
        try:
            checked, domain = check_entry(entry)
        except BadURL as exc:
            logger.warning("Frontier: skipped %r: %s", mask_userinfo(entry.url), exc.reason)
            continue
        out[checked.url] = (checked, domain)
    return list(out.values())
