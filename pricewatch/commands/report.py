"""``scrapy report [--out report.html]``: one self-contained HTML file (no script, no
network access) with per-SKU price history charts, the biggest movers and per-domain
health (:mod:`pricewatch.report` says what each figure is based on).

Reads ``PRICEWATCH_STORE_URL`` (``--store URL`` overrides it), the frontier of
``PRICEWATCH_FRONTIER_URL`` when one is set and reachable, and the run records matching
``--runs GLOB`` (default: ``PRICEWATCH_STATS_FILE`` with each ``%(...)s`` as ``*``).
Exit codes: 0 written, 1 the store is unreachable or the file cannot be written.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import re
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from pricewatch._urls import mask_password, scheme, sqlite_path
from pricewatch.commands._output import use_help_formatter
from pricewatch.frontier import FrontierUnavailable, frontier_from_settings
from pricewatch.report import ReportData, collect, read_runs, render
from pricewatch.storage import StoreUnavailable, store_from_settings

EXIT_UNAVAILABLE = 1
FRONTIER_TIMEOUT = 10.0  # seconds to wait for the frontier's counts before leaving them out


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[--out report.html] [--domain D] [--runs GLOB] [--store URL]"

    def short_desc(self) -> str:
        return "Write a self-contained HTML report: price charts, movers, domain health"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        use_help_formatter(parser)
        parser.add_argument(
            "--out",
            metavar="FILE",
            default="report.html",
            help="where to write (default: report.html)",
        )
        parser.add_argument("--domain", metavar="D", help="only the SKUs of this host")
        parser.add_argument(
            "--runs",
            metavar="GLOB",
            help="run record files (default: PRICEWATCH_STATS_FILE, %%(...)s as *)",
        )
        parser.add_argument(
            "--store", metavar="URL", help="store URL (default: PRICEWATCH_STORE_URL)"
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if args:
            raise UsageError("scrapy report takes no positional arguments")
        assert self.settings is not None
        try:
            store = store_from_settings(self.settings, url=opts.store)
            if scheme(store.url) == "sqlite" and not sqlite_path(store.url).exists():
                raise StoreUnavailable(f"no store at {store.url} ({sqlite_path(store.url)})")
            data = asyncio.run(self._collect(store, opts))
        except (StoreUnavailable, ValueError) as exc:
            print(f"report: {exc}", file=sys.stderr)
            self.exitcode = EXIT_UNAVAILABLE
            return
        self._add_runs(data, opts)
        text = render(data)
        out = Path(opts.out)
        try:
            write_atomically(out, text)
        except OSError as exc:
            print(f"report: cannot write {out}: {exc}", file=sys.stderr)
            self.exitcode = EXIT_UNAVAILABLE
            return
        print(
            f"report: {out} ({len(data.skus)} SKUs, {out.stat().st_size:,} bytes)", file=sys.stderr
        )

    async def _collect(self, store: object, opts: argparse.Namespace) -> ReportData:
        from pricewatch.storage import Store

        assert isinstance(store, Store) and self.settings is not None
        async with store:
            skus, held = await collect(store, opts.domain)
        data = ReportData(
            generated_at=datetime.now(UTC),
            store_url=mask_password(store.url),
            skus=skus,
            quarantine=held,
        )
        url = self.settings.get("PRICEWATCH_FRONTIER_URL") or ""
        if not url:
            data.frontier_note = "PRICEWATCH_FRONTIER_URL is not set."
        elif scheme(url) == "sqlite" and not sqlite_path(url).exists():
            data.frontier_note = f"no frontier at {mask_password(url)}."
        else:
            try:
                frontier = frontier_from_settings(self.settings)
                async with frontier:
                    counts = await asyncio.wait_for(frontier.counts(), FRONTIER_TIMEOUT)
                if opts.domain:
                    counts = [c for c in counts if c.domain == opts.domain]
                data.frontier = counts
            except (FrontierUnavailable, ValueError, OSError, TimeoutError) as exc:
                data.frontier_note = f"{mask_password(url)} unavailable: {exc}"
        return data

    def _add_runs(self, data: ReportData, opts: argparse.Namespace) -> None:
        assert self.settings is not None
        pattern = opts.runs
        if not pattern:
            template = self.settings.get("PRICEWATCH_STATS_FILE") or ""
            if not template:
                data.runs_note = (
                    "PRICEWATCH_STATS_FILE is not set and --runs was not given: no runs read."
                )
                return
            pattern = re.sub(r"%\([a-z]+\)s", "*", template)
        paths = sorted(Path(p) for p in glob.glob(pattern))
        data.runs, unreadable = read_runs(paths)
        data.runs_note = f"{len(data.runs)} run records read from {pattern}."
        if unreadable:
            data.runs_note += f" Unreadable: {'; '.join(unreadable)}."


def write_atomically(path: Path, text: str) -> None:
    """Readers (a web server, a browser) never see half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
