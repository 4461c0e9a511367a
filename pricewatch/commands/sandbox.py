"""``scrapy sandbox``: serve the local sandbox shops (same options as
``python -m pricewatch.sandbox``) until Ctrl-C."""

from __future__ import annotations

import argparse

from scrapy.commands import ScrapyCommand

from pricewatch.commands._output import use_help_formatter

# The sandbox (an aiohttp server) is imported only when this command runs: Scrapy imports
# every module of COMMANDS_MODULE for every `scrapy` command.


class Command(ScrapyCommand):
    requires_project = False
    requires_crawler_process = False  # an aiohttp server on its own asyncio loop, no crawl

    def syntax(self) -> str:
        return "[options]"

    def short_desc(self) -> str:
        return "Serve the local sandbox shops (demo, tests, benchmarks)"

    def long_desc(self) -> str:
        return (
            "Serve deterministic local shops on 127.0.0.2, 127.0.0.3, ... Prints one line of "
            "JSON with the shops' base URLs, then serves until SIGTERM/SIGINT."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        from pricewatch.sandbox.cli import add_arguments

        super().add_options(parser)
        use_help_formatter(parser)
        add_arguments(parser.add_argument_group("Sandbox options"))

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from pricewatch.sandbox.cli import run

        self.exitcode = run(opts)
