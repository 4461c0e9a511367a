"""The live progress line: drawn on a terminal, never in a pipe (cron, scrapyd)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .fixtures.sandbox import SandboxProcess, sandbox_args
from .helpers import scrapy, scrapy_env

# Slow pages, one at a time per shop: the crawl lasts a few progress ticks.
SLOW = [
    *("-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False"),
    *("-s", "CONCURRENT_REQUESTS_PER_DOMAIN=1", "-s", "PRICEWATCH_PROGRESS_INTERVAL=0.2"),
    *("-s", "PRICEWATCH_FLUSH_INTERVAL=0.2", "-s", "PRICEWATCH_MAX_OUTSTANDING=2"),
]
LINE = re.compile(
    r"\r\x1b\[Kclaimed (\d+) · stored (\d+) · no price (\d+) · failed (\d+) · "
    r"in flight (\d+) · due (\d+)"
)


@pytest.fixture(scope="module")
def shop() -> Iterator[SandboxProcess]:
    proc = SandboxProcess(sandbox_args(port=0, seed=17, shops=1, products=12, latency="100-200"))
    try:
        yield proc
    finally:
        proc.stop()


def seed(tmp_path: Path, shop: SandboxProcess) -> list[str]:
    urls = shop.urls()
    (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
    assert scrapy(tmp_path, "seed", "seeds.txt").returncode == 0
    return urls


def test_a_terminal_sees_a_live_line(shop: SandboxProcess, tmp_path: Path) -> None:
    urls = seed(tmp_path, shop)
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "scrapy", "crawl", "products", *SLOW],
        cwd=tmp_path,
        env=scrapy_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
    )
    os.close(slave)
    output = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the crawl closed the terminal
            break
        if not chunk:
            break
        output += chunk
    os.close(master)
    assert proc.wait(timeout=30) == 0
    text = output.decode()
    lines = [tuple(map(int, m.groups())) for m in LINE.finditer(text)]
    assert len(lines) >= 2, text[-3000:]
    claimed = [line[0] for line in lines]
    stored = [line[1] for line in lines]
    assert claimed == sorted(claimed) and stored == sorted(stored)
    assert max(claimed) == len(urls)
    due = [line[5] for line in lines]
    assert due[0] > 0 and due == sorted(due, reverse=True), "what is left to claim"
    # Log records never start in the middle of the progress line: it is cleared first.
    for match in LINE.finditer(text):
        rest = text[match.end() :]
        assert rest == "" or rest.startswith("\r\x1b[K"), rest[:200]


def test_a_pipe_gets_no_progress_line(shop: SandboxProcess, tmp_path: Path) -> None:
    seed(tmp_path, shop)
    proc = scrapy(tmp_path, "crawl", "products", *SLOW)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "\x1b[K" not in proc.stderr and "claimed " not in proc.stderr
