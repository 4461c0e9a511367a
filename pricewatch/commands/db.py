"""``scrapy db upgrade``: apply the store's pending schema migrations (idempotent).

Reads ``PRICEWATCH_STORE_URL`` (settings or environment); ``--store URL`` overrides it.
Run it at deploy time when ``PRICEWATCH_STORE_AUTO_MIGRATE`` is off. Exit codes: 0 done
(or nothing to do), 1 the store is unreachable or a migration failed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from pricewatch._urls import mask_password
from pricewatch.storage import StoreUnavailable, store_from_settings

ACTIONS = ("upgrade",)


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "upgrade [--store URL]"

    def short_desc(self) -> str:
        return "Apply the store's pending schema migrations"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--store", metavar="URL", help="store URL (default: PRICEWATCH_STORE_URL)"
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if args != ["upgrade"]:
            raise UsageError(f"expected one action of {', '.join(ACTIONS)}")
        assert self.settings is not None
        try:
            store = store_from_settings(self.settings, url=opts.store)
            applied = asyncio.run(store.migrate())
        except (StoreUnavailable, ValueError) as exc:
            print(f"db: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        where = mask_password(store.url)
        if applied:
            print(f"{where}: applied migrations {', '.join(map(str, applied))}")
        else:
            print(f"{where}: schema up to date")
