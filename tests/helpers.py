"""Helpers for tests: the project's settings for components built in-process, and the
project's commands run as subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pricewatch.settings

ROOT = Path(__file__).resolve().parent.parent


def project_settings(overrides: Mapping[str, Any] | None = None, /, **more: Any) -> dict[str, Any]:
    """The project's own settings (``PRICEWATCH_*``) as ``pricewatch/settings.py`` sets them,
    then ``overrides`` and ``more``: for ``get_crawler(settings_dict=...)`` and ``Settings(...)``.

    Components read their settings without repeating the defaults, which live in
    ``settings.py`` only, while ``get_crawler`` and ``Settings()`` start from Scrapy's
    defaults. Scrapy's own settings keep Scrapy's defaults here (a unit test builds one
    component, not the project's crawl); override them as needed.
    """
    values = {
        name: getattr(pricewatch.settings, name)
        for name in dir(pricewatch.settings)
        if name.startswith("PRICEWATCH_")
    }
    values.update(overrides or {})
    values.update(more)
    return values


def scrapy_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Environment for a `scrapy` subprocess using SQLite files under ``tmp_path``, allowed
    to crawl loopback (the sandbox)."""
    env = dict(os.environ)
    env.update(
        SCRAPY_SETTINGS_MODULE="pricewatch.settings",
        PYTHONPATH=str(ROOT),
        PRICEWATCH_FRONTIER_URL=f"sqlite:///{tmp_path / 'pricewatch.db'}",
        PRICEWATCH_STORE_URL=f"sqlite:///{tmp_path / 'pricewatch.db'}",
        PRICEWATCH_STATS_FILE=str(tmp_path / "stats.json"),
        # The sandbox and the tests' own servers listen on loopback, which a crawl
        # refuses by default (pricewatch/destinations.py).
        PRICEWATCH_ALLOWED_NETWORKS="127.0.0.0/8",
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
