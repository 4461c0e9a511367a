"""``scrapy extract PATH_OR_URL [--url URL]``: print the offer of one page as JSON.

Reads a local file (``.gz`` is decompressed) or fetches an ``http(s)://`` URL, runs
``extract_offer`` with the project's ``PRICEWATCH_DOMAIN_CURRENCY`` and
``PRICEWATCH_EXTRACT_RULES_FILE``, and prints one JSON object (prices as decimal strings,
``null`` fields kept). ``--url`` gives a local file's original URL, used for the domain's
currency and rules. Exit codes: 0 an offer with a price, 2 no price found, 1 the input
could not be read or the rules file is invalid.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import urllib.request
from pathlib import Path

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from pricewatch.extract import extract_offer, load_rules

EXIT_NO_PRICE = 2
FETCH_TIMEOUT = 30.0


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "PATH_OR_URL [--url URL]"

    def short_desc(self) -> str:
        return "Extract the offer of one product page (file or URL) and print it as JSON"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--url", metavar="URL", help="the page's URL, for a local file")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give one file path or URL")
        assert self.settings is not None
        target = args[0]
        try:
            rules = load_rules(self.settings.get("PRICEWATCH_EXTRACT_RULES_FILE"))
            if target.startswith(("http://", "https://")):
                body, url = _fetch(target, self.settings.get("USER_AGENT") or "pricewatch")
                url = opts.url or url
            else:
                body = Path(target).read_bytes()
                if target.endswith(".gz") or body[:2] == b"\x1f\x8b":
                    body = gzip.decompress(body)
                url = opts.url or Path(target).resolve().as_uri()
        except (OSError, ValueError, EOFError) as exc:
            print(f"extract: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        offer = extract_offer(
            body,
            url,
            domain_currency=self.settings.getdict("PRICEWATCH_DOMAIN_CURRENCY"),
            rules=rules,
        )
        data = offer.to_json() if offer is not None else {"price": None}
        print(json.dumps(data, ensure_ascii=False))
        if offer is None or offer.price is None:
            self.exitcode = EXIT_NO_PRICE


def _fetch(url: str, user_agent: str) -> tuple[bytes, str]:
    request = urllib.request.Request(url, headers={"User-Agent": user_agent})
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT) as response:
        body = response.read()
        if response.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return body, response.geturl()
