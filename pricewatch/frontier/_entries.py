"""Checks shared by every frontier backend on the entries it is asked to add."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from pricewatch.frontier.base import Entry

logger = logging.getLogger(__name__)

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def domain_of(url: str) -> str | None:
    """The lower-case host of ``url``, None when it has none."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    return host or None


def valid_entries(entries: Iterable[Entry]) -> list[tuple[Entry, str]]:
    """Entries with an http(s) host and a positive finite importance, with their domain;
    the others are logged and skipped. The last of duplicate URLs wins."""
    out: dict[str, tuple[Entry, str]] = {}
    for entry in entries:
        if _CONTROL.search(entry.url) or (entry.sku and _CONTROL.search(entry.sku)):
            logger.warning("Frontier: skipped %r: control characters in the URL or SKU", entry.url)
            continue
        domain = domain_of(entry.url)
        if domain is None:
            logger.warning("Frontier: skipped %r: no host in the URL", entry.url)
            continue
        importance = entry.importance
        if not (isinstance(importance, int | float) and math.isfinite(importance)) or (
            importance <= 0
        ):
            logger.warning(
                "Frontier: skipped %r: importance must be > 0, got %r", entry.url, importance
            )
            continue
        out[entry.url] = (entry, domain)
    return list(out.values())
