"""``scrapy seed FILE``: add product URLs to the frontier (idempotent).

The file is read as CSV (see :mod:`pricewatch.seeding`); URLs are stored in their
canonical form and refused beyond Scrapy's ``URLLENGTH_LIMIT``. Exit codes: 0 all lines
added, 3 some lines were skipped (each reported on stderr with its line number and
reason), 1 the frontier is unreachable or the file unreadable.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
import time
from collections.abc import Iterator
from typing import TextIO

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from pricewatch.frontier import Entry, FrontierUnavailable, frontier_from_settings
from pricewatch.listings import Listing, listing_store_from_settings
from pricewatch.listings.define import SECTION, parse_listings
from pricewatch.seeding import BadLine, parse_seed

CHUNK = 10_000
EXIT_SKIPPED = 3


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "FILE"

    def short_desc(self) -> str:
        return "Add product URLs (one per line, or CSV with url[,sku,importance]) to the frontier"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--frontier", metavar="URL", help="frontier URL (default: PRICEWATCH_FRONTIER_URL)"
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give one seed file ('-' for standard input)")
        assert self.settings is not None
        if opts.frontier:
            self.settings.set("PRICEWATCH_FRONTIER_URL", opts.frontier, priority="cmdline")
        path = args[0]
        try:
            # Undecodable bytes spoil their own line only (reported), not the rest of the file.
            stream = (
                io.TextIOWrapper(
                    sys.stdin.buffer, encoding="utf-8-sig", errors="surrogateescape", newline=""
                )
                if path == "-"
                else open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")
            )
            with stream:
                self.exitcode = asyncio.run(self._seed(path, stream))
        except (OSError, UnicodeDecodeError, FrontierUnavailable) as exc:
            print(f"seed: {exc}", file=sys.stderr)
            self.exitcode = 1

    async def _seed(self, path: str, stream: TextIO) -> int:
        assert self.settings is not None
        started = time.monotonic()
        frontier = frontier_from_settings(self.settings)
        seen = new = bad = 0
        chunk: list[Entry] = []
        # Lines after a `listings:` line are listings (pricewatch/listings/define.py).
        listing_lines: list[tuple[int, str]] = []
        lineno = 0

        def product_lines() -> Iterator[str]:
            nonlocal lineno
            for line in stream:
                lineno += 1
                if line.strip().lower() == SECTION:
                    listing_lines.extend(enumerate(stream, lineno + 1))
                    return
                yield line

        async with frontier:
            max_length = self.settings.getint("URLLENGTH_LIMIT")
            for result in parse_seed(product_lines(), max_url_length=max_length):
                if isinstance(result, BadLine):
                    bad += 1
                    print(f"seed: {path}: {result}", file=sys.stderr)
                    continue
                chunk.append(result)
                if len(chunk) >= CHUNK:
                    new += await frontier.add(chunk)
                    seen += len(chunk)
                    chunk = []
                    print(f"seed: {seen:,} URLs read, {new:,} new", file=sys.stderr)
            if chunk:
                new += await frontier.add(chunk)
                seen += len(chunk)
        listings: list[Listing] = []
        every = self.settings.getfloat("PRICEWATCH_LISTING_EVERY")
        for found in parse_listings(listing_lines, default_every=every, max_url_length=max_length):
            if isinstance(found, BadLine):
                bad += 1
                print(f"seed: {path}: {found}", file=sys.stderr)
            else:
                listings.append(found)
        if listings:
            async with listing_store_from_settings(self.settings) as store:
                added = await store.add(listings)
            print(f"seed: {len(listings):,} listings read, {added:,} new", file=sys.stderr)
        elapsed = time.monotonic() - started
        print(
            f"seed: {seen:,} URLs read, {new:,} new, {seen - new:,} already scheduled, "
            f"{bad:,} bad lines skipped, in {elapsed:.1f}s",
            file=sys.stderr,
        )
        return EXIT_SKIPPED if bad else 0
