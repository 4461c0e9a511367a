"""``scrapy audit SKU|URL [--since WHEN] [--json]``: one SKU's story from the audit trail.

Reads every file of ``PRICEWATCH_AUDIT_FILE`` (settings or environment; ``--file`` overrides
it), rotated ones included and any ``%(name)s``/``%(pid)s``/``%(host)s`` of the template,
and prints the records of the SKU (matched by its scheduled URL, the URL a redirect led to,
or its SKU code), oldest first, one decision a line: time, worker, event and what was
decided. ``--since`` keeps the records at or after an ISO-8601 time (``2026-03-01T12:00``,
UTC unless it says otherwise) or a duration before now (``90s``, ``30m``, ``6h``, ``2d``).
``--json`` prints the records as they are stored, one JSON object a line.

Exit codes: 0 found, 2 bad arguments, 3 nothing recorded for it (or no audit file).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from pricewatch._text import visible
from pricewatch._urls import BadURL, product_url
from pricewatch.audit import audit_files, read_records, safe_url

EXIT_NOT_FOUND = 3
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# Fields shown after the event, in this order (the rest of a record is context).
_SHOWN = (
    "status",
    "outcome",
    "reason",
    "attempts",
    "delay",
    "retry_after",
    "to_frontier",
    "cooldown",
    "why",
    "source_host",
    "error",
    "price",
    "currency",
    "raw_hash",
    "confirm_in",
    "changed",
    "resolved_url",
    "session",
    "proxy",
)


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``--since``: an ISO-8601 time (UTC if naive) or a duration before ``now``."""
    match = _DURATION.fullmatch(text.strip())
    if match:
        seconds = float(match[1]) * _UNITS[match[2]]
        return (now or datetime.now(UTC)) - timedelta(seconds=seconds)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"--since must be an ISO-8601 time or a duration like 30m, 6h, 2d; got {text!r}"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def line_of(record: dict[str, Any]) -> str:
    details = []
    for name in _SHOWN:
        value = record.get(name)
        if (
            value is None
            or value is False
            or (name == "resolved_url" and value == record.get("url"))
        ):
            continue
        details.append(f"{name}={value}")
    when = str(record.get("t", ""))[:23].replace("T", " ")
    worker = f"{record.get('host', '?')}:{record.get('pid', '?')}"
    return visible(f"{when}  {worker}  {record.get('event', '?'):<9} {' '.join(details)}")


def search_keys(key: str) -> set[str]:
    """What a record's ``url``, ``resolved_url`` or ``sku`` may be for ``key``: the key, and
    for a URL its canonical form (as seeding stored it), with secrets masked as recorded."""
    keys = {key}
    try:
        keys.add(product_url(key))
    except BadURL:
        pass
    return keys | {safe_url(k) or k for k in keys}


def _matches(record: dict[str, Any], keys: set[str]) -> bool:
    return not keys.isdisjoint((record.get("url"), record.get("sku"), record.get("resolved_url")))


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "SKU|URL [--since WHEN] [--json] [--file TEMPLATE]"

    def short_desc(self) -> str:
        return "Show every fetch decision recorded for one SKU, oldest first"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--since", metavar="WHEN", help="ISO-8601 time or 30m, 6h, 2d")
        parser.add_argument("--json", action="store_true", help="the records as JSON lines")
        parser.add_argument(
            "--file", metavar="TEMPLATE", help="audit file (default: PRICEWATCH_AUDIT_FILE)"
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give one SKU or URL")
        assert self.settings is not None
        template = opts.file or self.settings.get("PRICEWATCH_AUDIT_FILE")
        if not template:
            print("audit: PRICEWATCH_AUDIT_FILE is not set (no audit trail)", file=sys.stderr)
            self.exitcode = EXIT_NOT_FOUND
            return
        since = parse_since(opts.since) if opts.since else None
        key = args[0]
        keys = search_keys(key)
        found = []
        for record in read_records(audit_files(template)):
            if not _matches(record, keys):
                continue
            if since is not None:
                try:
                    moment = datetime.fromisoformat(str(record.get("t")))
                except ValueError:
                    continue
                if moment < since:
                    continue
            found.append(record)
        if not found:
            print(f"audit: nothing recorded for {visible(key)!r}", file=sys.stderr)
            self.exitcode = EXIT_NOT_FOUND
            return
        found.sort(key=lambda r: str(r.get("t", "")))  # stable: a file's order within a time
        for record in found:
            print(json.dumps(record) if opts.json else line_of(record))
        self.exitcode = 0
