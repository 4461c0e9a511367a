"""Seed files: plain URL lists and CSV, bad lines reported and skipped, idempotent."""

from __future__ import annotations

import asyncio
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
    assert entries["https://shop.example/p/7?a=1,2"].importance == 0.5
    assert bad == {
        4: "importance is not a number",
        5: "importance must be in (0, 1000]",
        6: "importance must be in (0, 1000]",
        7: "not an http(s) URL",
    }


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
