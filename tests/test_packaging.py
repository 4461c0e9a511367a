"""What scrapyd deploys: the built distribution carries the data files the code loads
(SQL migrations, Lua scripts) and the entry point scrapyd reads the settings from."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .helpers import ROOT

# What a checkout holds besides its sources: git, virtualenvs, builds, caches.
NOT_SOURCE = (".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".*cache*",
              ".hypothesis", "demo-run")  # fmt: skip


@pytest.mark.timeout(180)
def test_wheel_carries_migrations_lua_scripts_and_scrapy_entry_point(tmp_path: Path) -> None:
    # Built from a copy of the checkout: pip builds in the source tree (build/,
    # pricewatch.egg-info/), where the scrapyd tests build too while other workers run.
    source, dist = tmp_path / "source", tmp_path / "dist"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=170,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (wheel,) = dist.glob("pricewatch-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    wanted = [
        p.relative_to(ROOT).as_posix()
        for p in ROOT.glob("pricewatch/**/*")
        if p.suffix in (".sql", ".lua")
    ]
    assert wanted
    assert sorted(set(wanted) - set(names)) == []
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[scrapy]" in text and "settings = pricewatch.settings" in text
