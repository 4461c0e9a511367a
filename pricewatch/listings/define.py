"""A listing as an operator writes it: ``scrapy listing add`` and a seed file's
``listings:`` section share these checks.

Seed file section (after a line ``listings:``; CSV like the rest of the file)::

    listings:
    https://shop.example/sitemap.xml,sitemap,1d
    https://shop.example/api/products,cursor,12h,items_path=data.items,cursor_param=after
    https://shop.example/c/shoes?page=1,pages

Fields: URL, kind, then an optional period (``90s``, ``30m``, ``12h``, ``1d``, ``1w`` or
seconds) and ``name=value`` options (:data:`pricewatch.listings.model.OPTIONS`).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Iterator, Mapping

from pricewatch._urls import BadURL, product_url
from pricewatch.frontier._entries import domain_of
from pricewatch.listings.model import KINDS, OPTIONS, Listing
from pricewatch.seeding import MAX_IMPORTANCE, BadLine

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
SECTION = "listings:"


class BadListing(ValueError):
    """Why a listing cannot be registered (the message says it)."""


def parse_duration(text: str) -> float:
    match = _DURATION.match(text)
    if not match:
        raise BadListing(f"period must be a number of seconds or like 30m, 12h, 1d, got {text!r}")
    value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if not math.isfinite(value) or value <= 0:
        raise BadListing(f"period must be > 0, got {text!r}")
    return value


def make_listing(
    url: str,
    kind: str,
    every: float,
    options: Mapping[str, str] | None = None,
    *,
    max_url_length: int = 0,
) -> Listing:
    """The listing as stored (canonical URL, its site), or :class:`BadListing`."""
    if kind not in KINDS:
        raise BadListing(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    try:
        canonical = product_url(url, max_length=max_url_length)
    except BadURL as exc:
        raise BadListing(exc.reason) from None
    opts: dict[str, str] = {}
    for name, value in (options or {}).items():
        if name not in OPTIONS:
            raise BadListing(f"unknown option {name!r} (known: {', '.join(OPTIONS)})")
        if value is None or value == "":
            continue
        if any(ord(c) < 32 for c in value):
            raise BadListing(f"control characters in option {name}")
        if name in ("max_pages", "top") and (not value.isdigit() or int(value) < 1):
            raise BadListing(f"{name} must be an integer >= 1, got {value!r}")
        if name == "importance":
            try:
                imp = float(value)
            except ValueError:
                raise BadListing(f"importance must be a number, got {value!r}") from None
            if not math.isfinite(imp) or not 0 < imp <= MAX_IMPORTANCE:
                raise BadListing(f"importance must be in (0, {MAX_IMPORTANCE:g}], got {value!r}")
        if name == "endpoint" and not value.startswith(("http://", "https://", "/")):
            raise BadListing(f"endpoint must be a URL or a path, got {value!r}")
        opts[name] = value
    domain = domain_of(canonical)
    assert domain is not None  # product_url refuses URLs without a host
    return Listing(canonical, kind, domain, float(every), opts)


def parse_listings(
    lines: Iterable[tuple[int, str]], *, default_every: float, max_url_length: int = 0
) -> Iterator[Listing | BadLine]:
    """Listings and bad lines of a seed file's ``listings:`` section: ``(line number,
    text)`` pairs after the ``listings:`` line."""
    for lineno, text in lines:
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            fields = [f.strip() for f in next(csv.reader([stripped], strict=True))]
        except (csv.Error, StopIteration) as exc:
            yield BadLine(lineno, f"bad CSV ({exc})", stripped)
            continue
        if len(fields) < 2:
            yield BadLine(lineno, "a listing needs a URL and a kind", stripped)
            continue
        url, kind, rest = fields[0], fields[1], fields[2:]
        every = default_every
        options: dict[str, str] = {}
        try:
            if rest and "=" not in rest[0]:
                every = parse_duration(rest.pop(0))
            for field in rest:
                name, sep, value = field.partition("=")
                if not sep:
                    raise BadListing(f"option {field!r} is not name=value")
                options[name.strip()] = value.strip()
            yield make_listing(url, kind, every, options, max_url_length=max_url_length)
        except BadListing as exc:
            yield BadLine(lineno, str(exc), stripped)
