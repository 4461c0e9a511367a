"""Seed files: plain URL lists and CSV, bad lines reported and skipped, idempotent."""

from __future__ import annotations

import asyncio
import random
import subprocess
import time
from pathlib import Path

import pytest

from pricewatch.frontier import Entry
from pricewatch.seeding import BadLine, parse_seed

from .helpers import scrapy

PLAIN = """\
# competitor catalogue
https://shop.example/p/1

http://shop.example/p/2
ftp://shop.example/p/3
https:///nohost
https://other.example/p/4
"""

CSV = """\
url,sku,importance
https://shop.example/p/1,A-1,2
https://shop.example/p/2,,
https://shop.example/p/3,A-3,zero
https://shop.example/p/4,A-4,-1
https://shop.example/p/5,A-5,inf
mailto:x@example.com,A-6,1
"https://shop.example/p/7?a=1,2",A-7,0.5
"""


def test_plain_list_keeps_good_lines_and_reports_bad_ones_by_number() -> None:
    results = list(parse_seed(PLAIN.splitlines(keepends=True)))
    entries = [r for r in results if isinstance(r, Entry)]
    bad = [r for r in results if isinstance(r, BadLine)]
    assert [e.url for e in entries] == [
        "https://shop.example/p/1",
        "http://shop.example/p/2",
        "https://other.example/p/4",
    ]
    assert [(b.lineno, b.reason) for b in bad] == [
        (5, "not an http(s) URL"),
        (6, "no host"),
    ]
    assert all(e.importance == 1.0 and e.sku is None for e in entries)


def test_csv_reads_sku_and_importance_and_rejects_bad_importance() -> None:
    results = list(parse_seed(CSV.splitlines(keepends=True)))
    entries = {r.url: r for r in results if isinstance(r, Entry)}
    bad = {r.lineno: r.reason for r in results if isinstance(r, BadLine)}
    assert entries["https://shop.example/p/1"] == Entry("https://shop.example/p/1", "A-1", 2.0)
    assert entries["https://shop.example/p/2"] == Entry("https://shop.example/p/2", None, 1.0)
    assert entries["https://shop.example/p/7?a=1%2C2"].importance == 0.5  # canonical form
    assert bad == {
        4: "importance is not a number",
        5: "importance must be in (0, 1000]",
        6: "importance must be in (0, 1000]",
        7: "not an http(s) URL",
    }


def _parse(text: str) -> tuple[list[Entry], dict[int, str]]:
    results = list(parse_seed(text.splitlines(keepends=True), max_url_length=2083))
    entries = [r for r in results if isinstance(r, Entry)]
    bad = {r.lineno: r.reason for r in results if isinstance(r, BadLine)}
    return entries, bad


def test_a_quoted_field_may_hold_newlines_and_commas() -> None:
    text = (
        "url,sku,importance,notes\n"
        'https://shop.example/p/1,A-1,2,"first line\nsecond, line"\n'
        "https://shop.example/p/2,A-2,1,\n"
    )
    entries, bad = _parse(text)
    assert bad == {}
    assert [(e.url, e.sku, e.importance) for e in entries] == [
        ("https://shop.example/p/1", "A-1", 2.0),
        ("https://shop.example/p/2", "A-2", 1.0),
    ]


def test_a_csv_without_header_is_read_as_url_sku_importance() -> None:
    entries, bad = _parse(
        "https://shop.example/p/1,A-1,2\nhttps://shop.example/p/2\nhttps://shop.example/p/3,x,1,9\n"
    )
    assert [(e.url, e.sku, e.importance) for e in entries] == [
        ("https://shop.example/p/1", "A-1", 2.0),
        ("https://shop.example/p/2", None, 1.0),
    ]
    assert bad == {3: "4 fields, more than the 3 columns; quote a URL that holds a comma"}


def test_an_unterminated_quote_loses_its_own_line_only() -> None:
    entries, bad = _parse('url,sku\nhttps://shop.example/p/1,"A-1\nhttps://shop.example/p/2,A-2\n')
    assert bad == {2: "unterminated quoted field"}
    assert [(e.url, e.sku) for e in entries] == [("https://shop.example/p/2", "A-2")]


# Where the cases come from: issue 12 items 2, 10 and 11 (reproduced on loopback).
URL_CASES = {
    "port above 65535": ("http://shop.example:99999/x", "port out of range"),
    "port zero": ("http://shop.example:0/x", "port out of range"),
    "label starting with a hyphen": ("http://-shop-.example/x", "invalid host name"),
    "empty label": ("http://shop..example/x", "invalid host name"),
    "five-part address": ("http://1.2.3.4.5/x", "invalid IPv4 address"),
    "credentials": (
        "http://op:pw@shop.example/x",
        "credentials in URL (user:password@ is refused)",
    ),
    "user only": ("http://op@shop.example/x", "credentials in URL (user:password@ is refused)"),
    "over URLLENGTH_LIMIT": (
        "https://shop.example/" + "a" * 2070,
        "longer than 2083 characters (URLLENGTH_LIMIT)",
    ),
    "escape sequence": (
        "https://shop.example/\x1b[2J",
        "control character, whitespace or undecodable byte in URL",
    ),
    "NUL": (
        "https://shop.example/p\x00",
        "control character, whitespace or undecodable byte in URL",
    ),
    "not http": ("javascript:alert(1)", "not an http(s) URL"),
}


@pytest.mark.parametrize("url,reason", URL_CASES.values(), ids=URL_CASES.keys())
def test_urls_that_cannot_be_fetched_are_refused_at_seeding(url: str, reason: str) -> None:
    entries, bad = _parse(f"{url}\nhttps://shop.example/ok\n")
    assert bad == {1: reason}
    assert [e.url for e in entries] == ["https://shop.example/ok"]


CANONICAL_CASES = {
    "upper-case scheme": ("HTTP://shop.example/p", "http://shop.example/p"),
    "host case and trailing dot": ("https://Shop.Example./p", "https://shop.example/p"),
    "fragment": ("https://shop.example/p#reviews", "https://shop.example/p"),
    "query order": (
        "https://shop.example/p?size=m&color=red",
        "https://shop.example/p?color=red&size=m",
    ),
    "empty query": ("https://shop.example/p?", "https://shop.example/p"),
    "default port": ("https://shop.example:443/p", "https://shop.example/p"),
    "other port kept": ("https://shop.example:8443/p", "https://shop.example:8443/p"),
    "international host": ("https://bücher.example/p", "https://xn--bcher-kva.example/p"),
    "no path": ("https://shop.example", "https://shop.example/"),
}


@pytest.mark.parametrize("url,canonical", CANONICAL_CASES.values(), ids=CANONICAL_CASES.keys())
def test_urls_are_seeded_in_their_canonical_form(url: str, canonical: str) -> None:
    entries, bad = _parse(f"{url}\n")
    assert bad == {}
    assert [e.url for e in entries] == [canonical]


def test_empty_file_yields_nothing() -> None:
    assert list(parse_seed(["", "# only a comment\n"])) == []


def _seed(tmp_path: Path, name: str, text: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / name).write_text(text)
    return scrapy(tmp_path, "seed", name)


def _scheduled(tmp_path: Path) -> int:
    from pricewatch.frontier import SchedulePolicy
    from pricewatch.frontier.sqlite import SQLiteFrontier

    async def count() -> int:
        async with SQLiteFrontier(f"sqlite:///{tmp_path / 'pricewatch.db'}", SchedulePolicy()) as f:
            return sum(c.due + c.scheduled + c.inflight for c in await f.counts())

    return asyncio.run(count())


def test_seed_command_exit_code_says_lines_were_skipped(tmp_path: Path) -> None:
    proc = _seed(tmp_path, "seeds.txt", PLAIN)
    assert proc.returncode == 3, proc.stderr
    assert "line 5: not an http(s) URL" in proc.stderr
    assert "line 6: no host" in proc.stderr
    assert "3 URLs read, 3 new" in proc.stderr
    assert _scheduled(tmp_path) == 3


def test_seed_command_is_idempotent(tmp_path: Path) -> None:
    good = "https://shop.example/p/1\nhttps://shop.example/p/2\n"
    first = _seed(tmp_path, "a.txt", good)
    second = _seed(tmp_path, "a.txt", good)
    assert first.returncode == second.returncode == 0
    assert "2 new, 0 already scheduled" in first.stderr
    assert "0 new, 2 already scheduled" in second.stderr
    assert _scheduled(tmp_path) == 2


def test_seed_command_missing_file_fails_clearly(tmp_path: Path) -> None:
    proc = scrapy(tmp_path, "seed", "nope.txt")
    assert proc.returncode == 1
    assert "nope.txt" in proc.stderr


def test_seed_command_reports_every_rejected_line_of_a_hostile_file(tmp_path: Path) -> None:
    lines = [f"https://shop.example/p/{i}\n".encode() for i in range(1, 6001)]
    lines[1] = b"https://shop.example/p/\x1b[31mred\n"  # line 2: control characters
    lines[2] = b"https://op:hunter2@shop.example/p/3\n"  # line 3: credentials
    lines[4999] = b"https://shop.example/p/\xff\xfe\n"  # line 5000: not UTF-8
    lines[5499] = b"https://shop.example:99999/p\n"  # line 5500: port
    (tmp_path / "hostile.txt").write_bytes(b"".join(lines))
    proc = scrapy(tmp_path, "seed", "hostile.txt")
    assert proc.returncode == 3, proc.stderr
    assert "line 2: control character" in proc.stderr
    assert "line 3: credentials in URL" in proc.stderr
    assert "line 5000: not valid UTF-8: 'https://shop.example/p/\\xff\\xfe'" in proc.stderr
    assert "line 5500: port out of range" in proc.stderr
    assert "hunter2" not in proc.stderr and "\x1b" not in proc.stderr
    assert "5,996 URLs read, 5,996 new, 0 already scheduled, 4 bad lines skipped" in proc.stderr
    assert _scheduled(tmp_path) == 5996


def test_variants_of_one_product_url_are_one_sku(tmp_path: Path) -> None:
    variants = [
        "https://Shop.example/p/1?b=2&a=1",
        "https://shop.example./p/1?a=1&b=2#reviews",
        "HTTPS://SHOP.EXAMPLE:443/p/1?a=1&b=2",
    ]
    proc = _seed(tmp_path, "v.txt", "\n".join(variants) + "\n")
    assert proc.returncode == 0, proc.stderr
    assert "3 URLs read, 1 new, 2 already scheduled, 0 bad lines" in proc.stderr
    assert _scheduled(tmp_path) == 1


@pytest.mark.timeout(120)
def test_seed_100k_lines_with_progress(tmp_path: Path) -> None:
    lines = "".join(f"https://shop{i % 50}.example/p/{i}\n" for i in range(100_000))
    started = time.monotonic()
    proc = _seed(tmp_path, "big.txt", lines)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert "seed: 50,000 URLs read" in proc.stderr  # progress is shown while loading
    assert "100,000 URLs read, 100,000 new" in proc.stderr
    assert _scheduled(tmp_path) == 100_000
    print(f"seeded 100k URLs in {elapsed:.1f}s")


def test_the_fast_path_for_canonical_urls_agrees_with_canonicalize_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pricewatch import _urls

    rnd = random.Random(12)
    hosts = ["shop.example", "a-b.shop.co.uk", "127.0.0.1", "1.2.3.999", "x--y.test", "a.1"]
    urls = []
    for _ in range(20_000):
        path = "/" + "".join(rnd.choice("aZ09-._~/") for _ in range(rnd.randint(0, 10)))
        pairs = [
            f"{rnd.choice('abAB_.~-1')}={rnd.choice(['', 'x', '1', 'a.b', '-'])}"
            for _ in range(rnd.randint(0, 3))
        ]
        query = "?" + "&".join(pairs) if pairs else ""
        port = rnd.choice(["", ":80", ":443", ":8080", ":70000"])
        urls.append(f"{rnd.choice(['http', 'https'])}://{rnd.choice(hosts)}{port}{path}{query}")
    fast = [u for u in urls if _urls._is_canonical(u)]
    assert len(fast) > 2000
    monkeypatch.setattr(_urls, "_is_canonical", lambda url: False)
    assert [u for u in fast if _urls.product_url(u) != u] == []
