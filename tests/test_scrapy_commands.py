"""Scrapy imports every module of COMMANDS_MODULE for every `scrapy` command: the
project's commands must load nothing heavy a crawl does not use (the sandbox's aiohttp
server is imported by `scrapy sandbox` only)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .helpers import scrapy_env

# Runs a `scrapy` command in a fresh interpreter, then prints the modules it imported.
_RUN = """
import json, sys
from scrapy.cmdline import execute
try:
    execute(["scrapy", *sys.argv[1:]])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"exit": code, "modules": sorted(sys.modules)}))
"""


def _run(tmp_path: Path, *args: str) -> tuple[int, str, set[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, *args],
        cwd=tmp_path,
        env=scrapy_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    *output, last = proc.stdout.strip().splitlines()
    result = json.loads(last)
    return result["exit"], "\n".join(output), set(result["modules"])


def test_commands_do_not_import_the_sandbox_server(tmp_path: Path) -> None:
    code, _, modules = _run(tmp_path, "list")
    assert code == 0
    assert "pricewatch.commands.sandbox" in modules  # Scrapy loaded the command module
    assert {m for m in modules if m.split(".")[0] == "aiohttp"} == set()
    assert {m for m in modules if m.startswith("pricewatch.sandbox")} == set()


def test_the_sandbox_command_still_loads_its_options(tmp_path: Path) -> None:
    code, output, modules = _run(tmp_path, "sandbox", "-h")
    assert code == 0
    assert "--seed" in output
    assert "pricewatch.sandbox.cli" in modules
