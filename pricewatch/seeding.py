"""Reading seed files as operators write them.

A seed file is CSV (RFC 4180, read with the :mod:`csv` module, so a quoted field may hold
commas and newlines). With a header naming a ``url`` column, the ``sku`` and
``importance`` columns are read by name and other columns are ignored; without one, the
columns are ``url[,sku[,importance]]`` in that order (a URL holding a comma must then be
quoted). Blank lines and lines starting with ``#`` are skipped.

Every URL is checked and put in its canonical form by
:func:`pricewatch._urls.product_url` (the frontier applies the same checks). A line that
cannot be scheduled is reported with its line number (the first line of a record) and
the reason, never fatal: the good lines are kept. Bytes that are not UTF-8 spoil their
own line only (open the file with ``errors="surrogateescape"``).
"""

from __future__ import annotations

import csv
import math
import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pricewatch._urls import BadURL, mask_userinfo, product_url
from pricewatch.frontier import Entry
from pricewatch.frontier._entries import check_entry

MAX_IMPORTANCE = 1000.0
# Characters one record may span (a URL is at most URLLENGTH_LIMIT): beyond it, an open
# quote is taken as a stray quote rather than a field running on.
MAX_RECORD_CHARS = 65536
HEADERLESS_COLUMNS = ("url", "sku", "importance")
# Bytes that were not UTF-8, as errors="surrogateescape" decodes them.
_UNDECODED = re.compile("[\udc80-\udcff]")


@dataclass(frozen=True, slots=True)
class BadLine:
    lineno: int
    reason: str
    text: str

    def __str__(self) -> str:
        # repr() makes control characters visible (a byte that is not UTF-8 as \xff);
        # credentials are never echoed.
        shown = re.sub(r"\\udc([89a-f][0-9a-f])", r"\\x\1", repr(mask_userinfo(self.text[:120])))
        return f"line {self.lineno}: {self.reason}: {shown}"


def check_url(url: str, max_length: int = 0) -> str | None:
    """The reason ``url`` cannot be scheduled, or None if it can."""
    try:
        product_url(url, max_length=max_length)
    except BadURL as exc:
        return exc.reason
    return None


def _records(lines: Iterable[str]) -> Iterator[tuple[int, str, bool]]:
    """(first line number, text, complete) of each CSV record, blank and comment lines
    skipped. A quote left open to the end of the file (or for MAX_RECORD_CHARS) gives
    its first line, not complete; the lines after it are read again as records."""
    source = enumerate(lines, 1)
    again: deque[tuple[int, str]] = deque()

    def read() -> tuple[int, str] | None:
        return again.popleft() if again else next(source, None)

    while (first := read()) is not None:
        lineno, line = first
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        held = [first]
        quotes, size = line.count('"'), len(line)
        while quotes % 2 and size <= MAX_RECORD_CHARS and (more := read()) is not None:
            held.append(more)
            quotes += more[1].count('"')
            size += len(more[1])
        if quotes % 2:
            again.extendleft(reversed(held[1:]))
            yield lineno, line, False
            continue
        yield lineno, "".join(text for _, text in held), True


def _row(text: str) -> list[str] | str:
    """The fields of one record, or why it cannot be read."""
    if _UNDECODED.search(text):
        return "not valid UTF-8"
    if len(text) > MAX_RECORD_CHARS:
        return f"line longer than {MAX_RECORD_CHARS} characters"
    if '"' not in text:  # what the csv module would make of it, several times faster
        return [field.strip() for field in text.rstrip("\r\n").split(",")]
    try:
        return [field.strip() for field in next(csv.reader([text], strict=True))]
    except (csv.Error, StopIteration) as exc:
        return f"bad CSV ({exc})"


def _entry(
    lineno: int, text: str, url: str, sku: str, importance: str, max_length: int
) -> Entry | BadLine:
    if not url:
        return BadLine(lineno, "no URL", text)
    value = 1.0
    if importance:
        try:
            value = float(importance)
        except ValueError:
            return BadLine(lineno, "importance is not a number", text)
        if not math.isfinite(value) or not 0 < value <= MAX_IMPORTANCE:
            return BadLine(lineno, f"importance must be in (0, {MAX_IMPORTANCE:g}]", text)
    try:
        entry, _ = check_entry(Entry(url, sku or None, value), max_length=max_length)
    except BadURL as exc:
        return BadLine(lineno, exc.reason, text)
    return entry


def parse_seed(lines: Iterable[str], *, max_url_length: int = 0) -> Iterator[Entry | BadLine]:
    """Entries (canonical URLs) and bad lines of a seed file, in order.

    ``lines`` are the file's lines with their line ends (a file opened with
    ``newline=""``); ``max_url_length`` (0: no limit) is Scrapy's ``URLLENGTH_LIMIT``.
    """
    col: dict[str, int] | None = None
    width = len(HEADERLESS_COLUMNS)
    for lineno, text, complete in _records(lines):
        if not complete:
            yield BadLine(lineno, "unterminated quoted field", text.strip())
            continue
        row = _row(text)
        if isinstance(row, str):
            yield BadLine(lineno, row, text.strip())
            continue
        if col is None:  # the first record: a header, or the first URL
            header = [name.lower() for name in row]
            if "url" in header:
                col = {name: header.index(name) for name in HEADERLESS_COLUMNS if name in header}
                width = len(header)
                continue
            col = {name: i for i, name in enumerate(HEADERLESS_COLUMNS)}
        if len(row) > width:
            yield BadLine(
                lineno,
                f"{len(row)} fields, more than the {width} columns; quote a URL that holds a comma",
                text.strip(),
            )
            continue
        fields = {name: row[i] if i < len(row) else "" for name, i in col.items()}
        yield _entry(
            lineno,
            text.strip(),
            fields.get("url", ""),
            fields.get("sku", ""),
            fields.get("importance", ""),
            max_url_length,
        )
