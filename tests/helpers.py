"""Helpers for tests that run the project's commands as subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def scrapy_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Environment for a `scrapy` subprocess using SQLite files under ``tmp_path``."""
    env = dict(os.environ)
    env.update(
        SCRAPY_SETTINGS_MODULE="pricewatch.settings",
        PYTHONPATH=str(ROOT),
        PRICEWATCH_FRONTIER_URL=f"sqlite:///{tmp_path / 'pricewatch.db'}",
        PRICEWATCH_STORE_URL=f"sqlite:///{tmp_path / 'pricewatch.db'}",
        PRICEWATCH_STATS_FILE=str(tmp_path / "stats.json"),
    )
    env.update(extra)
    return env


def scrapy(
    tmp_path: Path, *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        cwd=tmp_path,
        env=env or scrapy_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_scrapy(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """A `scrapy` subprocess left running (stderr captured: ``communicate()`` it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "scrapy", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
