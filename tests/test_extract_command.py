"""``scrapy extract PATH_OR_URL [--url URL]``, run as a subprocess like an operator would."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


class _Redirector(BaseHTTPRequestHandler):
    """``/page``: the product page; ``/to?<url>``: a redirect to ``<url>``."""

    def do_GET(self) -> None:
        if self.path.startswith("/to?"):
            self.send_response(302)
            self.send_header("Location", self.path.split("?", 1)[1])
            self.end_headers()
            return
        body = PAGE.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def redirector() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# The test's server is allowed; the rest of loopback is not, like any private address.
ONLY_THE_SERVER = {"PRICEWATCH_ALLOWED_NETWORKS": "127.0.0.1/32"}


def test_url_fetch_follows_a_redirect_to_an_allowed_address(redirector: str) -> None:
    result = run(f"{redirector}/to?{redirector}/page", env=ONLY_THE_SERVER)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["price"] == "49.00"


@pytest.mark.parametrize(
    "target",
    [
        pytest.param("http://127.0.0.2:9/page", id="url-itself"),
        pytest.param("/to?http://127.0.0.2:9/latest/meta-data", id="redirect"),
        pytest.param("/to?http://169.254.169.254/latest/meta-data", id="redirect-to-metadata"),
    ],
)
def test_url_fetch_refuses_non_public_destinations(redirector: str, target: str) -> None:
    # As the crawl does (pricewatch/destinations.py): nothing is sent to the refused host.
    url = redirector + target if target.startswith("/") else target
    result = run(url, env=ONLY_THE_SERVER)
    assert result.returncode == 1
    assert "destination refused" in result.stderr
    assert "not in PRICEWATCH_ALLOWED_NETWORKS" in result.stderr
    assert result.stdout == ""
