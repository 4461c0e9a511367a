"""``scrapy prices``: what the store holds, for an operator.

- ``scrapy prices [--domain D]``: the latest offer of every SKU as an aligned table.
- ``scrapy prices --history URL_OR_SKU``: the changes of one SKU, oldest first: the
  published ones (status ``published``) and those the store did not publish at once
  (:mod:`pricewatch.quarantine`): ``held (reason)`` waiting for a confirming fetch,
  ``confirmed (reason)`` published by the fetch that confirmed it, ``rejected (reason)``
  never published. Each row names the config version of the crawl that observed it
  (:mod:`pricewatch.configversion`; empty for rows stored before it was recorded).
- ``scrapy prices --history URL_OR_SKU --csv``: the same rows as CSV with a header
  (``observed_at, price, currency, regular_price, availability, status, reason, url,
  config_version``),
  times ISO-8601 UTC, prices the decimal text as stored.
- ``scrapy prices --csv [--domain D]``: the latest offers as CSV with a header on standard
  output (``url, domain, sku, name, price, currency, regular_price, availability,
  first_seen_at, checked_at, changed_at``), streamed in constant memory (``COPY TO STDOUT``
  on PostgreSQL); prices are the decimal text exactly as stored.

Reads ``PRICEWATCH_STORE_URL`` (settings or environment); ``--store URL`` overrides it.
Exit codes: 0 done, 1 the store is unreachable, 3 ``--history`` found nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from pricewatch._text import csv_cell, visible
from pricewatch._urls import scheme, sqlite_path
from pricewatch.storage import Store, StoreUnavailable, store_from_settings
from pricewatch.storage._values import canonical_decimal, iso_utc
from pricewatch.storage.base import HeldRow

EXIT_UNAVAILABLE = 1
EXIT_NOT_FOUND = 3

LATEST_HEADER = (
    "url",
    "sku",
    "price",
    "currency",
    "regular",
    "availability",
    "checked (UTC)",
    "changed (UTC)",
)
HISTORY_HEADER = (
    "observed (UTC)",
    "price",
    "currency",
    "regular",
    "availability",
    "status",
    "config",
    "url",
)
NUMERIC = {"price", "regular"}
HISTORY_CSV_COLUMNS = (
    "observed_at",
    "price",
    "currency",
    "regular_price",
    "availability",
    "status",
    "reason",
    "url",
    "config_version",
)


def _money_cell(value: Decimal | None) -> str:
    return "" if value is None else canonical_decimal(value)


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell; amounts right-aligned; control characters
    shown as escapes, never sent to the terminal."""
    rows = [[visible(c) for c in r] for r in rows]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        padded = [
            c.rjust(w) if h in NUMERIC else c.ljust(w)
            for c, w, h in zip(cells, widths, header, strict=True)
        ]
        return "  ".join(padded).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)]) + "\n"


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[--domain D] [--history URL_OR_SKU] [--csv] [--store URL]"

    def short_desc(self) -> str:
        return "Show the latest price of every SKU, one SKU's history, or export them as CSV"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--domain", metavar="D", help="only the SKUs of this host")
        parser.add_argument(
            "--history", metavar="URL_OR_SKU", help="the price changes of one SKU, oldest first"
        )
        parser.add_argument(
            "--csv",
            action="store_true",
            help="as CSV on standard output (the latest offers, or with --history the changes)",
        )
        parser.add_argument(
            "--store", metavar="URL", help="store URL (default: PRICEWATCH_STORE_URL)"
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if args:
            raise UsageError("scrapy prices takes no positional arguments")
        if opts.history and opts.domain:
            raise UsageError("--history cannot be combined with --domain")
        assert self.settings is not None
        try:
            store = store_from_settings(self.settings, url=opts.store)
            if scheme(store.url) == "sqlite" and not sqlite_path(store.url).exists():
                # Reading must not create an empty store at a mistyped path.
                raise StoreUnavailable(f"no store at {store.url} ({sqlite_path(store.url)})")
            self.exitcode = asyncio.run(self._run(store, opts))
        except (StoreUnavailable, ValueError) as exc:
            print(f"prices: {exc}", file=sys.stderr)
            self.exitcode = EXIT_UNAVAILABLE
        except BrokenPipeError:  # `scrapy prices --csv | head`
            sys.stderr.close()

    async def _run(self, store: Store, opts: argparse.Namespace) -> int:
        async with store:
            if opts.history:
                return await self._history(store, opts.history, as_csv=opts.csv)
            if opts.csv:
                out = sys.stdout.buffer
                await store.export_csv(out.write, domain=opts.domain)
                out.flush()
                return 0
            rows = [
                (
                    r.url,
                    r.sku or "",
                    canonical_decimal(r.price),
                    r.currency,
                    _money_cell(r.regular_price),
                    r.availability or "",
                    _when(r.checked_at),
                    _when(r.changed_at),
                )
                async for r in store.latest(opts.domain)
            ]
        sys.stdout.write(format_table(LATEST_HEADER, rows))
        print(f"{len(rows)} SKUs", file=sys.stderr)
        return 0

    @staticmethod
    async def _history(store: Store, url_or_sku: str, as_csv: bool = False) -> int:
        changes = await store.history(url_or_sku)
        quarantined = await store.quarantine(url_or_sku)
        if not changes and not quarantined:
            print(f"prices: no history for {visible(url_or_sku)!r}", file=sys.stderr)
            return EXIT_NOT_FOUND
        timeline = sorted(
            [(c, "published") for c in changes]
            + [(h, f"{h.status} ({h.reason})") for h in quarantined],
            key=lambda pair: (pair[0].observed_at, pair[0].url),
        )
        if as_csv:
            writer = csv.writer(sys.stdout, lineterminator="\n")
            writer.writerow(HISTORY_CSV_COLUMNS)
            for c, _ in timeline:
                status, reason = (
                    (c.status, c.reason) if isinstance(c, HeldRow) else ("published", "")
                )
                writer.writerow(
                    (
                        iso_utc(c.observed_at),
                        canonical_decimal(c.price),
                        c.currency,
                        _money_cell(c.regular_price),
                        csv_cell(c.availability),
                        status,
                        reason,
                        csv_cell(c.url),
                        c.config_version or "",
                    )
                )
            return 0
        rows = [
            (
                _when(c.observed_at),
                canonical_decimal(c.price),
                c.currency,
                _money_cell(c.regular_price),
                c.availability or "",
                status,
                c.config_version or "",
                c.url,
            )
            for c, status in timeline
        ]
        sys.stdout.write(format_table(HISTORY_HEADER, rows))
        return 0
