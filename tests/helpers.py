"""Helpers for tests: the project's settings for components built in-process, and the
project's commands run as subprocesses."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pricewatch.settings

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def checkout_build_lock() -> Iterator[None]:
    """Held while something builds in this checkout: pip and setuptools (scrapyd-deploy's
    egg, the scrapyd node's virtualenv) write ``build/`` and ``pricewatch.egg-info/`` in
    it, and the suite's parallel workers must take turns. The lock file is outside the
    checkout (``setup.py clean -a`` empties ``build/``), one per checkout."""
    key = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"pricewatch-build-{key}.lock"
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


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
