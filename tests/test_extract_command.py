"""``scrapy extract PATH_OR_URL [--url URL]``, run as a subprocess like an operator would."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scrapy.exceptions import UsageError
from scrapy.settings import Settings

from pricewatch.commands.extract import Command

REPO = Path(__file__).resolve().parent.parent
SCRAPY = [sys.executable, "-m", "scrapy.cmdline"]

PAGE = (
    "<html><body><h1>Garden hose</h1><p class='price'><del>$59.00</del> "
    "<b class='price-now'>$49.00</b></p><p class='stock'>In stock</p></body></html>"
)


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [*SCRAPY, "extract", *args],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def page_gz(tmp_path: Path) -> Path:
    path = tmp_path / "hose.html.gz"
    path.write_bytes(gzip.compress(PAGE.encode()))
    return path


def test_local_gz_file_with_url_for_currency(page_gz: Path) -> None:
    result = run(str(page_gz), "--url", "https://garden.example.ca/hose")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["price"] == "49.00" and data["regular_price"] == "59.00"
    assert data["currency"] == "CAD" and data["source"] == "visible"
    assert data["availability"] == "InStock"


def test_rules_file_and_domain_currency_settings(page_gz: Path, tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('["garden.example.com"]\nprice_css = "del"\n', encoding="utf-8")
    result = run(
        str(page_gz),
        "--url",
        "https://garden.example.com/hose",
        "-s",
        'PRICEWATCH_DOMAIN_CURRENCY={"garden.example.com": "AUD"}',
        env={"PRICEWATCH_EXTRACT_RULES_FILE": str(rules)},
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["price"], data["source"], data["currency"]) == ("59.00", "rule", "AUD")


def command(**settings: object) -> Command:
    cmd = Command()
    cmd.settings = Settings()
    cmd.settings.setmodule("pricewatch.settings")
    cmd.settings.update(settings)
    return cmd


def test_no_price_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.html"
    path.write_text("<html><body><p>nothing</p></body></html>", encoding="utf-8")
    cmd = command()
    cmd.run([str(path)], argparse.Namespace(url=None))
    assert cmd.exitcode == 2
    assert json.loads(capsys.readouterr().out)["price"] is None


@pytest.mark.parametrize(
    ("target", "settings", "message"),
    [
        pytest.param("/nonexistent/page.html", {}, "No such file", id="missing-file"),
        pytest.param("http://127.0.0.1:9/p", {}, "extract:", id="unreachable-url"),
        pytest.param(
            str(REPO / "pyproject.toml"),
            {"PRICEWATCH_EXTRACT_RULES_FILE": "/nonexistent/rules.toml"},
            "PRICEWATCH_EXTRACT_RULES_FILE",
            id="missing-rules-file",
        ),
    ],
)
def test_unreadable_input_exits_1(
    target: str, settings: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cmd = command(**settings)
    cmd.run([target], argparse.Namespace(url=None))
    assert cmd.exitcode == 1
    assert message in capsys.readouterr().err


def test_one_argument_required() -> None:
    with pytest.raises(UsageError):
        command().run([], argparse.Namespace(url=None))
