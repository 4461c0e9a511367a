"""Reading seed files: one URL per line, or CSV with a header (``url`` required; ``sku``
and ``importance`` optional). Bad lines are reported with their line number, never
fatal: the good lines are kept."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from pricewatch.frontier import Entry

MAX_IMPORTANCE = 1000.0


@dataclass(frozen=True, slots=True)
class BadLine:
    lineno: int
    reason: str
    text: str

    def __str__(self) -> str:
        return f"line {self.lineno}: {self.reason}: {self.text[:120]!r}"


def check_url(url: str) -> str | None:
    """The reason ``url`` cannot be scheduled, or None if it can."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "not a URL"
    if parts.scheme.lower() not in ("http", "https"):
        return "not an http(s) URL"
    if not parts.hostname:
        return "no host"
    if any(c.isspace() for c in url):
        return "whitespace in URL"
    return None


def _entry(lineno: int, text: str, url: str, sku: str, importance: str) -> Entry | BadLine:
    url = url.strip()
    reason = check_url(url)
    if reason:
        return BadLine(lineno, reason, text)
    value = 1.0
    if importance.strip():
        try:
            value = float(importance)
        except ValueError:
            return BadLine(lineno, "importance is not a number", text)
        if not math.isfinite(value) or not 0 < value <= MAX_IMPORTANCE:
            return BadLine(lineno, f"importance must be in (0, {MAX_IMPORTANCE:g}]", text)
    return Entry(url=url, sku=sku.strip() or None, importance=value)


def parse_seed(lines: Iterable[str]) -> Iterator[Entry | BadLine]:
    """Entries and bad lines of a seed file, in order (blank and ``#`` lines skipped)."""
    it = iter(enumerate(lines, 1))
    for lineno, first in it:  # noqa: B007 - lineno is used after the loop
        if first.strip() and not first.lstrip().startswith("#"):
            break
    else:
        return
    header = [h.strip().lower() for h in next(csv.reader([first]))]
    if "url" not in header:  # a plain list of URLs
        yield _entry(lineno, first.strip(), first, "", "")
        for lineno, line in it:
            if line.strip() and not line.lstrip().startswith("#"):
                yield _entry(lineno, line.strip(), line, "", "")
        return
    col = {name: header.index(name) for name in ("url", "sku", "importance") if name in header}
    for lineno, line in it:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            row = next(csv.reader([line]))
        except csv.Error as exc:
            yield BadLine(lineno, f"bad CSV ({exc})", line.strip())
            continue
        if len(row) < len(header):
            row += [""] * (len(header) - len(row))

        def field(name: str, row: list[str] = row) -> str:
            return row[col[name]] if name in col else ""

        yield _entry(lineno, line.strip(), field("url"), field("sku"), field("importance"))
