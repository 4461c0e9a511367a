"""The README's "Layout" section names every module and package of pricewatch/."""

from __future__ import annotations

import re

from .helpers import ROOT


def test_layout_names_every_module_and_package() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme.split("## Layout", 1)[1].split("```")[1]
    listed = set(re.findall(r"[\w.]+(?:/|\.py)", layout))
    package = ROOT / "pricewatch"
    present = {
        p.name + "/" if p.is_dir() else p.name
        for p in package.iterdir()
        if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.name != "__init__.py"
    }
    assert sorted(present - listed) == []
