"""``scrapy extract PATH_OR_URL [--url URL]``: print the offer of one page as JSON.

Reads a local file (``.gz`` is decompressed) or fetches an ``http(s)://`` URL, runs
``extract_offer`` with the project's ``PRICEWATCH_DOMAIN_CURRENCY`` and
``PRICEWATCH_EXTRACT_RULES_FILE``, and prints one JSON object (prices as decimal strings,
``null`` fields kept). ``--url`` gives a local file's original URL, used for the domain's
currency and rules. Exit codes: 0 an offer with a price, 2 no price found, 1 the input
could not be read or the rules file is invalid.

The crawl's limits hold here too: a page over ``DOWNLOAD_MAXSIZE`` bytes (after gzip
decompression, for a URL or a ``.gz`` file) and a fetch longer than ``DOWNLOAD_TIMEOUT``
seconds in total (a server trickling its page) end with exit code 1 and the reason
(``too_large``, ``timeout``) on stderr; over ``DOWNLOAD_WARNSIZE`` a warning is printed.
A URL, or a redirect, to a non-public address outside ``PRICEWATCH_ALLOWED_NETWORKS`` is
refused (exit code 1), as the crawl refuses it.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import socket
import sys
import time
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from pricewatch.destinations import IPNetwork, allowed_networks, refused
from pricewatch.exceptions import DestinationRefused
from pricewatch.extract import extract_offer, load_rules

EXIT_NO_PRICE = 2


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
        limits = _Limits(
            maxsize=self.settings.getint("DOWNLOAD_MAXSIZE"),
            warnsize=self.settings.getint("DOWNLOAD_WARNSIZE"),
            timeout=self.settings.getfloat("DOWNLOAD_TIMEOUT"),
        )
        try:
            rules = load_rules(self.settings.get("PRICEWATCH_EXTRACT_RULES_FILE"))
            if target.startswith(("http://", "https://")):
                user_agent = self.settings.get("USER_AGENT") or "pricewatch"
                allowed = allowed_networks(self.settings.getlist("PRICEWATCH_ALLOWED_NETWORKS"))
                body, url = _fetch(target, user_agent, limits, allowed)
                url = opts.url or url
            else:
                body = _read_file(Path(target), limits)
                url = opts.url or Path(target).resolve().as_uri()
        except DestinationRefused as exc:
            print(f"extract: destination refused: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        except (OSError, ValueError, EOFError, zlib.error) as exc:
            print(f"extract: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        if limits.warnsize and len(body) > limits.warnsize:
            print(
                f"extract: warning: the page has {len(body)} bytes "
                f"(DOWNLOAD_WARNSIZE {limits.warnsize})",
                file=sys.stderr,
            )
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


@dataclass(frozen=True, slots=True)
class _Limits:
    maxsize: int  # bytes after decompression, 0 = none (DOWNLOAD_MAXSIZE)
    warnsize: int  # bytes (DOWNLOAD_WARNSIZE)
    timeout: float  # seconds for the whole fetch (DOWNLOAD_TIMEOUT)


class FetchLimitError(ValueError):
    """A fetch or file over DOWNLOAD_MAXSIZE or DOWNLOAD_TIMEOUT; the message starts with
    the reason (``too_large``, ``timeout``)."""


class _Body:
    """Collects a body, inflating gzip as it arrives, never past ``maxsize`` bytes."""

    def __init__(self, maxsize: int, gzipped: bool) -> None:
        self.maxsize = maxsize
        self._inflater = zlib.decompressobj(wbits=31) if gzipped else None
        self._parts: list[bytes] = []
        self._size = 0

    def add(self, data: bytes) -> None:
        if self._inflater is not None:
            # Inflate at most one byte more than allowed: a bomb never expands in memory.
            room = self.maxsize + 1 - self._size if self.maxsize else 0
            data = self._inflater.decompress(data, room)
            if self._inflater.unconsumed_tail:
                self._too_large()
        self._size += len(data)
        if self.maxsize and self._size > self.maxsize:
            self._too_large()
        self._parts.append(data)

    def _too_large(self) -> None:
        raise FetchLimitError(
            f"too_large: the page is over DOWNLOAD_MAXSIZE ({self.maxsize} bytes)"
            + (" after decompression" if self._inflater is not None else "")
        )

    def bytes(self) -> bytes:
        if self._inflater is not None and not self._inflater.eof:
            raise EOFError("the gzip stream is truncated")
        return b"".join(self._parts)


def _read_file(path: Path, limits: _Limits) -> bytes:
    with path.open("rb") as f:
        gzipped = path.name.endswith(".gz") or f.peek(2)[:2] == b"\x1f\x8b"
        body = _Body(limits.maxsize, gzipped)
        while data := f.read(65536):
            body.add(data)
    return body.bytes()


def _check_destination(url: str, allowed: tuple[IPNetwork, ...]) -> None:
    """Refuse ``url`` (DestinationRefused) when its host resolves to a non-public address
    outside ``allowed``, as the crawl would; a host that does not resolve is left to the
    fetch's own DNS error."""
    host = urlsplit(url).hostname or ""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        refusal = refused(host, address, allowed)
        if refusal is not None:
            raise refusal


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to a destination the crawl may reach."""

    def __init__(self, allowed: tuple[IPNetwork, ...]) -> None:
        self.allowed = allowed

    def redirect_request(  # type: ignore[no-untyped-def]
        self, req, fp, code, msg, headers, newurl
    ):
        _check_destination(newurl, self.allowed)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _fetch(
    url: str, user_agent: str, limits: _Limits, allowed: tuple[IPNetwork, ...]
) -> tuple[bytes, str]:
    """GET ``url`` within ``limits``: the whole fetch, trickled or not, ends by the deadline
    (checked as data arrives; a silent server fails after ``timeout`` of silence). The URL
    and every redirect must lead to an address the crawl may reach (``allowed``)."""
    deadline = time.monotonic() + limits.timeout
    _check_destination(url, allowed)
    request = urllib.request.Request(
        url, headers={"User-Agent": user_agent, "Accept-Encoding": "gzip"}
    )
    opener = urllib.request.build_opener(_CheckedRedirects(allowed))
    with opener.open(request, timeout=limits.timeout) as response:
        gzipped = response.headers.get("Content-Encoding", "").lower() == "gzip"
        body = _Body(limits.maxsize, gzipped)
        while data := response.read1(65536):
            body.add(data)
            if time.monotonic() > deadline:
                raise FetchLimitError(
                    f"timeout: the fetch took longer than DOWNLOAD_TIMEOUT ({limits.timeout} s)"
                )
        return body.bytes(), response.geturl()
