"""``scrapy report``: a self-contained HTML file, opened in headless Chromium; and
``scrapy prices --history SKU --csv``."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from pricewatch.browser.discovery import chromium_args
from pricewatch.quarantine import QuarantineConfig
from pricewatch.storage import Observation, store_from_url
from tests.test_store_commands import PROJECT, fill, scrapy

SYSTEM_CHROMIUM = "/usr/lib/chromium/chromium"
needs_chromium = pytest.mark.skipif(
    not os.access(SYSTEM_CHROMIUM, os.X_OK), reason="Debian's chromium is not installed"
)
ARTIFACTS = Path(__file__).resolve().parents[1] / "build" / "test-artifacts"
HOSTILE = '<script>window.__pwned=1</script><img src="http://203.0.113.9/x.png">'
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(days=2)


def obs(
    i: int, step: int, price: str, availability: str = "InStock", **extra: object
) -> Observation:
    domain = "hostile.test" if i == 0 else f"shop{i % 2}.test"
    return Observation(
        url=f"https://{domain}/p/{i}",
        domain=domain,
        price=Decimal(price),
        currency="EUR",
        raw_hash=f"{price}|{availability}|{extra.get('regular_price')}",
        observed_at=T0 + timedelta(hours=step),
        sku=HOSTILE if i == 0 else f"SKU-{i}",
        name=HOSTILE if i == 0 else f"Product {i}",
        availability=availability,
        **extra,  # type: ignore[arg-type]
    )


async def fill_catalogue(url: str) -> None:
    """Five SKUs on three domains, through the store's write API: movers +150 % and -40 %, one
    out of stock for a while, one with a list price, one whose change was held."""
    async with store_from_url(url, quarantine=QuarantineConfig()) as store:
        await store.write([obs(i, 0, "10.00", regular_price=Decimal("12.00")) for i in range(5)])
        await store.write(
            [obs(1, 1, "6.00"), obs(2, 1, "10.00", "OutOfStock"), obs(3, 1, "100.00")]
        )
        await store.write([obs(2, 3, "9.50"), obs(4, 4, "25.00")])


def write_runs(directory: Path) -> None:
    directory.mkdir()
    stats = {
        "pricewatch/outcome/ok": 8,
        "pricewatch/outcome/no_price": 2,
        "pricewatch/outcome/blocked": 3,
        "pricewatch/outcome/skipped": 5,
        "pricewatch/breaker/opened": 1,
        "downloader/response_status_count/429": 3,
        "downloader/response_count": 12,
        "status": "finished",
        "start_time": "2026-03-01T12:00:00+00:00",
        "host": "node-1",
        "pid": 4242,
    }
    (directory / "products-1.json").write_text(json.dumps(stats))
    (directory / "products-2.json").write_text("{not json")


def report(store_url: str, out: Path, *args: str) -> str:
    result = scrapy("report", "--out", str(out), *args, store=store_url)
    assert result.returncode == 0, result.stderr
    assert f"report: {out} (5 SKUs" in result.stderr
    return out.read_text(encoding="utf-8")


def test_report_reads_both_backends(store_url: str, tmp_path: Path) -> None:
    asyncio.run(fill_catalogue(store_url))
    runs = tmp_path / "runs"
    write_runs(runs)
    text = report(store_url, tmp_path / "r.html", "--runs", str(runs / "*.json"))

    # Shop text is escaped wherever it appears, and nothing can run or load.
    assert HOSTILE not in text
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in text
    assert "<script" not in text.lower()
    assert "http://203.0.113.9" not in text.replace("&quot;http://203.0.113.9", "")
    assert text.count("<svg") == 5  # one chart per SKU
    # Biggest movers: SKU-4 +150 %, SKU-1 -40 %, SKU-2 -5 %, in that order.
    movers = text.split("<h2>Biggest movers</h2>")[1].split("<h2>")[0]
    assert movers.index("SKU-4") < movers.index("SKU-1") < movers.index("SKU-2")
    assert "+150.0 %" in movers and "-40.0 %" in movers and "-5.0 %" in movers
    assert "SKU-3" not in movers  # its x10 change is held, not published: no move
    # Domain health: SKUs, stock, quarantine per domain; runs with their rates.
    health = text.split("<h2>Per-domain health</h2>")[1].split("<h2>")[0]
    shop0 = health.split("<td>shop0.test</td>")[1].split("</tr>")[0]
    cells = [c.split(">", 1)[1] for c in shop0.split("</td>")[:-1]]
    assert cells[:4] == ["2", "2", "0", "0"]  # SKU-2 and SKU-4; SKU-2 back in stock
    shop1 = health.split("<td>shop1.test</td>")[1].split("</tr>")[0]
    assert "<td>1 / 0 / 0</td>" in shop1  # SKU-3's change held
    assert "1 run records read" in health and "products-2.json" in health
    run = health.split("<td>node-1</td>")[1].split("</tr>")[0]
    cells = [c.split(">", 1)[1] for c in run.split("</td>")[:-1]]
    # pid, status, ok, no_price, blocked, gone, error, skipped, breaker, 429, 429 rate, no-price
    assert cells == ["4242", "finished", "8", "2", "3", "0", "0", "5", "1", "3", "25.0 %", "15.4 %"]
    assert '<h3>Frontier</h3>\n<p class="note">Not read: no frontier at' in health


def test_report_shows_the_frontier(
    sqlite_url: str, sqlite_frontier_url: str, tmp_path: Path
) -> None:
    from pricewatch.frontier import frontier_from_url
    from pricewatch.frontier.base import Entry

    async def seed() -> None:
        async with frontier_from_url(sqlite_frontier_url) as frontier:
            await frontier.add([Entry(f"https://shop0.test/p/{i}") for i in range(3)])

    asyncio.run(fill_catalogue(sqlite_url))
    asyncio.run(seed())
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRICEWATCH_")}
    env.update(PRICEWATCH_STORE_URL=sqlite_url, PRICEWATCH_FRONTIER_URL=sqlite_frontier_url)
    out = tmp_path / "r.html"
    result = subprocess.run(
        [sys.executable, "-m", "scrapy", "report", "--out", str(out)],
        cwd=PROJECT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    frontier = out.read_text(encoding="utf-8").split("<h3>Frontier</h3>")[1].split("<h3>")[0]
    row = frontier.split("<td>shop0.test</td>")[1].split("</tr>")[0]
    assert [c.split(">", 1)[1] for c in row.split("</td>")[:-1]] == ["3", "0", "0", "0", "0"]


@needs_chromium
def test_report_renders_in_chromium(sqlite_url: str, tmp_path: Path) -> None:
    from playwright.async_api import async_playwright

    asyncio.run(fill_catalogue(sqlite_url))
    out = tmp_path / "report.html"
    report(sqlite_url, out)

    async def open_in_chromium() -> tuple[list[str], list[str], int, object]:
        errors: list[str] = []
        requests: list[str] = []
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(
                executable_path=SYSTEM_CHROMIUM, headless=True, args=chromium_args()
            )
            page = await browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            await page.goto(out.as_uri(), wait_until="load")
            charts = await page.locator("svg").count()
            pwned = await page.evaluate("() => window.__pwned === undefined ? null : 1")
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            for target in (tmp_path / "report.png", ARTIFACTS / "report.png"):
                await page.screenshot(path=str(target), full_page=True)
            await browser.close()
        return errors, requests, charts, pwned

    errors, requests, charts, pwned = asyncio.run(open_in_chromium())
    assert errors == []
    assert requests == [out.as_uri()]  # nothing but the file itself
    assert charts == 5
    assert pwned is None
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_report_without_store_or_runs(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    result = scrapy("report", "--out", str(tmp_path / "r.html"), store=f"sqlite:///{missing}")
    assert result.returncode == 1
    assert "no store at" in result.stderr
    assert not missing.exists() and not (tmp_path / "r.html").exists()


def test_prices_history_csv(store_url: str) -> None:
    asyncio.run(fill(store_url))
    result = scrapy("prices", "--history", "KET-1", "--csv", store=store_url)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [
        (r["observed_at"], r["price"], r["regular_price"], r["availability"]) for r in rows
    ] == [
        ("2026-03-01T12:00:00.000000+00:00", "19.99", "24.50", "InStock"),
        ("2026-03-01T13:00:00.000000+00:00", "17.00", "", "InStock"),
        ("2026-03-01T15:00:00.000000+00:00", "17.00", "", "OutOfStock"),
    ]
    assert {(r["status"], r["reason"], r["url"], r["currency"]) for r in rows} == {
        ("published", "", "https://a.test/p/kettle", "EUR")
    }
    missing = scrapy("prices", "--history", "NOPE", "--csv", store=store_url)
    assert missing.returncode == 3 and missing.stdout == ""
