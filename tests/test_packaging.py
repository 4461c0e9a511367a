"""What scrapyd deploys: the built distribution carries the data files the code loads
(SQL migrations, Lua scripts) and the entry point scrapyd reads the settings from."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .helpers import ROOT


@pytest.mark.timeout(180)
def test_wheel_carries_migrations_lua_scripts_and_scrapy_entry_point(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=170,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (wheel,) = tmp_path.glob("pricewatch-*.whl")
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
