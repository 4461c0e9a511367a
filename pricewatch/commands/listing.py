"""``scrapy listing``: register listings and see how their traversals went. Both backends.

- ``scrapy listing add URL --kind sitemap|pages|cursor|scroll [--every 1d] [options]``:
  register (or update) a listing, due now; ``scrapy crawl listings`` traverses it.
  Options override what is otherwise guessed from the pages: ``--items-path``,
  ``--url-field``, ``--sku-field``, ``--url-template``, ``--cursor-field``,
  ``--cursor-param``, ``--page-param``, ``--link-css``, ``--endpoint``, ``--max-pages``,
  ``--importance`` (of the products it adds), ``--top`` (only the first N get it).
- ``scrapy listing list [--json]``: every listing, its state, last traversal, items found,
  new and delisted.
- ``scrapy listing show URL [--json]``: one listing in full (cursor, pages and cursors
  seen, expected page size, short pages, the error of a failed traversal, the endpoint a
  scroll page was found to request in the browser).
- ``scrapy listing remove URL``: forget a listing (the products it found stay scheduled).

Reads ``PRICEWATCH_FRONTIER_URL``; ``--frontier URL`` overrides it. Exit codes: 0 done,
1 the frontier is unreachable, 2 bad arguments, 3 ``show``/``remove`` found nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from typing import Any

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from pricewatch.commands._output import reader_went_away, use_help_formatter
from pricewatch.frontier import FrontierUnavailable
from pricewatch.listings import KINDS, OPTIONS, ListingInfo, listing_store_from_settings
from pricewatch.listings.define import BadListing, make_listing, parse_duration

EXIT_UNAVAILABLE = 1
EXIT_NOT_FOUND = 3
COLUMNS = ("listing", "kind", "state", "pages", "items", "new", "delisted", "members", "last")


def _when(epoch: float | None) -> str:
    if not epoch:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


def as_dict(info: ListingInfo) -> dict[str, Any]:
    t = info.traversal
    return {
        "url": info.listing.url,
        "kind": info.listing.kind,
        "domain": info.listing.domain,
        "every": info.listing.every,
        "options": info.listing.options,
        "state": t.state,
        "leased": info.leased,
        "due_at": info.due_at,
        "members": info.members,
        "traversal": {
            "number": t.number,
            "complete": t.complete,
            "next_url": t.next_url,
            "pages": t.pages,
            "cursors_seen": len(t.cursors),
            "expected_page_size": t.expected,
            "items": t.items,
            "new": t.new,
            "short_pages": t.short_pages,
            "pending_sitemaps": len(t.pending),
            "failures": t.failures,
            "started_at": t.started_at,
            "finished_at": t.finished_at,
            "error": t.error,
            "endpoint": t.endpoint,
        },
        "last": t.last,
    }


def table(infos: list[ListingInfo]) -> str:
    rows = []
    for info in infos:
        t, last = info.traversal, info.traversal.last
        shown = t if t.state == "running" else None
        rows.append(
            [
                info.listing.url,
                info.listing.kind,
                t.state + (" (leased)" if info.leased else ""),
                f"{(shown or t).pages if shown else last.get('pages', 0):,}",
                f"{shown.items if shown else last.get('items', 0):,}",
                f"{shown.new if shown else last.get('new', 0):,}",
                f"{last.get('delisted', 0):,}",
                f"{info.members:,}",
                _when(last.get("finished_at")),
            ]
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(COLUMNS)]

    def line(row: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()

    return (
        "\n".join([line(list(COLUMNS)), line(["-" * w for w in widths]), *map(line, rows)]) + "\n"
    )


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "add URL --kind KIND [--every 1d] [options] | list [--json] | show URL | remove URL"

    def short_desc(self) -> str:
        return "Register listings (sitemaps, category pages, cursor APIs) and show their state"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        use_help_formatter(parser)
        parser.add_argument(
            "--frontier", metavar="URL", help="frontier URL (default: PRICEWATCH_FRONTIER_URL)"
        )
        parser.add_argument("--kind", choices=KINDS, help="add: what the listing is")
        parser.add_argument(
            "--every",
            metavar="PERIOD",
            help="add: traverse again after this long (90s, 30m, 12h, 1d; default "
            "PRICEWATCH_LISTING_EVERY)",
        )
        parser.add_argument("--json", action="store_true", help="list, show: JSON output")
        for name in OPTIONS:
            parser.add_argument(
                "--" + name.replace("_", "-"), dest="opt_" + name, metavar="VALUE", default=None
            )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        if not args or args[0] not in ("add", "list", "show", "remove"):
            raise UsageError("give a subcommand: add, list, show or remove")
        if opts.frontier:
            self.settings.set("PRICEWATCH_FRONTIER_URL", opts.frontier, priority="cmdline")
        action, rest = args[0], args[1:]
        if action in ("add", "show", "remove") and len(rest) != 1:
            raise UsageError(f"listing {action} takes one URL")
        if action == "list" and rest:
            raise UsageError("listing list takes no argument")
        try:
            self.exitcode = asyncio.run(self._run(action, rest, opts))
        except FrontierUnavailable as exc:
            print(f"listing: {exc}", file=sys.stderr)
            self.exitcode = EXIT_UNAVAILABLE
        except BrokenPipeError:
            reader_went_away()

    async def _run(self, action: str, rest: list[str], opts: argparse.Namespace) -> int:
        assert self.settings is not None
        if action == "add":
            if not opts.kind:
                raise UsageError("listing add needs --kind " + "|".join(KINDS))
            try:
                every = (
                    parse_duration(opts.every)
                    if opts.every
                    else self.settings.getfloat("PRICEWATCH_LISTING_EVERY")
                )
                options = {
                    name: getattr(opts, "opt_" + name)
                    for name in OPTIONS
                    if getattr(opts, "opt_" + name) is not None
                }
                listing = make_listing(
                    rest[0],
                    opts.kind,
                    every,
                    options,
                    max_url_length=self.settings.getint("URLLENGTH_LIMIT"),
                )
            except BadListing as exc:
                raise UsageError(str(exc)) from None
        async with listing_store_from_settings(self.settings) as store:
            if action == "add":
                new = await store.add([listing])
                print(
                    f"listing: {listing.url} ({listing.kind}, every {listing.every:g}s) "
                    f"{'added' if new else 'updated'}",
                    file=sys.stderr,
                )
                return 0
            if action == "remove":
                if await store.remove(_canonical(rest[0])):
                    return 0
                print(f"listing: {rest[0]} is not a listing", file=sys.stderr)
                return EXIT_NOT_FOUND
            if action == "show":
                info = await store.get(_canonical(rest[0]))
                if info is None:
                    print(f"listing: {rest[0]} is not a listing", file=sys.stderr)
                    return EXIT_NOT_FOUND
                data = as_dict(info)
                if opts.json:
                    print(json.dumps(data, indent=2))
                else:
                    print(_show(data), end="")
                return 0
            infos = await store.all()
            if opts.json:
                print(json.dumps([as_dict(i) for i in infos], indent=2))
            elif infos:
                print(table(infos), end="")
            else:
                print("listing: no listings (scrapy listing add URL --kind ...)", file=sys.stderr)
            return 0


def _canonical(text: str) -> str:
    """The stored form of a listing URL given on the command line."""
    try:
        return make_listing(text, "pages", 1.0).url
    except BadListing:
        return text


def _show(data: dict[str, Any]) -> str:
    t = data["traversal"]
    lines = [
        f"url:        {data['url']}",
        f"kind:       {data['kind']} (every {data['every']:g}s)",
        f"options:    {json.dumps(data['options']) if data['options'] else '-'}",
        f"state:      {data['state']}{' (leased)' if data['leased'] else ''}",
        f"due:        {_when(data['due_at'])}",
        f"members:    {data['members']:,} product URLs listed",
        f"traversal:  #{t['number']} ({t['complete']} complete so far)",
        f"  next:     {t['next_url'] or '-'}",
        f"  pages:    {t['pages']:,} (cursors seen {t['cursors_seen']:,}, "
        f"expected page size {t['expected_page_size'] or '-'}, short pages {t['short_pages']})",
        f"  items:    {t['items']:,} ({t['new']:,} new)",
        f"  started:  {_when(t['started_at'])}",
        f"  error:    {t['error'] or '-'}",
    ]
    if t["endpoint"]:
        lines.append(f"endpoint:   {t['endpoint']} (found in the page's requests in the browser)")
    last = data["last"]
    if last:
        lines.append(
            f"last:       #{last.get('number')} {last.get('state')} at "
            f"{_when(last.get('finished_at'))}: {last.get('pages', 0):,} pages, "
            f"{last.get('items', 0):,} items, {last.get('new', 0):,} new, "
            f"{last.get('delisted', 0):,} delisted"
            + (f" ({last['error']})" if last.get("error") else "")
        )
    return "\n".join(lines) + "\n"
