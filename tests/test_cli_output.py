"""The commands' output as a terminal or a pipe sees it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import scrapy, scrapy_env


@pytest.mark.parametrize("command", ["sandbox", "crawl", "frontier"])
def test_help_at_80_columns_underlines_only_headings(tmp_path: Path, command: str) -> None:
    env = scrapy_env(tmp_path, COLUMNS="80")
    proc = scrapy(tmp_path, command, "--help", env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for above, line in zip(lines, lines[1:], strict=False):
        if line and set(line) <= {"=", "-"}:
            # An underline belongs to a heading, never to a wrapped help line.
            assert not above.startswith(" "), f"{above!r} underlined"
            assert len(line) == len(above)
    if command == "sandbox":
        assert "(default:" in proc.stdout and "(Default" not in proc.stdout


def test_frontier_show_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/p/1"
    (tmp_path / "seeds.txt").write_text(url + "\n")
    assert scrapy(tmp_path, "seed", "seeds.txt").returncode == 0
    # `scrapy frontier --show URL | head` once head has gone: a pipe nobody reads.
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "scrapy", "frontier", "--show", url],
            cwd=tmp_path,
            env=scrapy_env(tmp_path),
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
