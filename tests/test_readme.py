"""The README's operator snippets work as written."""

from __future__ import annotations

import re

from .helpers import ROOT

README = (ROOT / "README.md").read_text()

# One crontab time field: *, numbers, ranges, lists and steps (crontab(5)).
_FIELD = re.compile(r"^(\*|\d+(-\d+)?)(/\d+)?(,(\*|\d+(-\d+)?)(/\d+)?)*$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\s*=")


def crontab_blocks() -> list[list[str]]:
    return [block.splitlines() for block in re.findall(r"```cron\n(.*?)```", README, re.S)]


def test_the_cron_lines_install_as_written() -> None:
    blocks = crontab_blocks()
    assert blocks, "the README shows a crontab"
    for lines in blocks:
        for line in lines:
            if not line.strip() or line.lstrip().startswith("#") or _ENV.match(line):
                continue
            # crontab has no line continuation: every job is one line.
            assert not line.rstrip().endswith("\\"), line
            fields = line.split(None, 5)
            assert len(fields) == 6, f"five time fields and a command: {line!r}"
            for field in fields[:5]:
                assert _FIELD.match(field), f"bad time field {field!r} in {line!r}"
            # In the command field cron turns an unescaped % into a newline.
            assert re.search(r"(?<!\\)%", fields[5]) is None, line
