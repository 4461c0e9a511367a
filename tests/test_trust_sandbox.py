"""Prices you can trust, end to end: ``scrapy crawl products`` on the embedded default
(SQLite frontier and store) against the sandbox's trust cases (``pricewatch.sandbox._trust``)
on static shops and on a JS-only shop through Chromium, checked against ``/_truth``.

What must hold on every page: the stored price (and currency, list price, stock) equals the
truth; every price-on-request page ends ``no_price`` with its reason, never with a price
from the recommendations; no product in stock is stored as OutOfStock. (That the one-fetch
×10 glitch is never published is tested in ``test_quarantine_crawl.py``.) Few products per
case keep each crawl to seconds.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings

from pricewatch.frontier import Entry, frontier_from_settings

from .fixtures.sandbox import SandboxProcess, sandbox_args
from .helpers import project_settings, scrapy, scrapy_env

# Fast but otherwise default settings; a JS page's price arrives within a second here
# (js_delay 0.3 s), so a price-on-request page need not be waited on for the default 10 s.
FAST = [
    *("-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False"),
    *("-s", "PRICEWATCH_BROWSER_WAIT_TIMEOUT=3"),
]
# Two HTML shops (a three-decimal and a zero-decimal currency) and an EUR one; a JS-only
# shop. Six ordinary products each: every markup once, every recommendation style.
SHOP = {
    "seed": 10,
    "shops": 3,
    "js_shops": 1,
    "products": 6,
    "js_weight": "light",
    "cases": True,
    "recommendations": "mixed",
    "currencies": "KWD,JPY,EUR,USD",
}


@pytest.fixture(scope="module")
def shop() -> Iterator[SandboxProcess]:
    proc = SandboxProcess(sandbox_args(port=0, **SHOP))
    try:
        yield proc
    finally:
        proc.stop()


def seed(env: dict[str, str], urls: list[str]) -> None:
    """Schedule ``urls`` in the crawl's frontier (in-process: one subprocess fewer)."""

    async def add() -> int:
        settings = Settings(
            project_settings(PRICEWATCH_FRONTIER_URL=env["PRICEWATCH_FRONTIER_URL"])
        )
        frontier = frontier_from_settings(settings)
        await frontier.open()
        try:
            return await frontier.add([Entry(url) for url in urls])
        finally:
            await frontier.close()

    assert asyncio.run(add()) == len(urls)


def crawl(tmp_path: Path, env: dict[str, str], *settings: str) -> dict[str, Any]:
    args = [*FAST]
    for item in settings:
        args += ["-s", item]
    proc = scrapy(tmp_path, "crawl", "products", *args, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    stats: dict[str, Any] = json.loads((tmp_path / "stats.json").read_text())
    return stats


def rows(tmp_path: Path, query: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(tmp_path / "pricewatch.db") as conn:
        return conn.execute(query).fetchall()


def stored(tmp_path: Path) -> dict[str, tuple[Any, ...]]:
    found = rows(tmp_path, "SELECT url, price, currency, regular_price, availability FROM products")
    return {row[0]: row[1:] for row in found}


def dec(value: str | None) -> Decimal | None:
    return None if value is None else Decimal(value)


def wrong_offers(
    got: dict[str, tuple[Any, ...]], truth: dict[str, dict[str, Any]], urls: list[str]
) -> list[str]:
    """Every way the stored offers differ from the truth, one line each."""
    wrong = []
    for url in urls:
        want = truth[url]
        label = f"{want.get('case') or want['markup']} {url}"
        row = got.get(url)
        if want["price"] is None:
            if row is not None:
                wrong.append(f"{label}: stored {row}, truth is no price")
            continue
        if row is None:
            wrong.append(f"{label}: nothing stored, truth {want['price']} {want['currency']}")
            continue
        price, currency, regular, availability = row
        expected = (
            dec(want["price"]),
            want["currency"],
            dec(want["regular_price"]),
            want["availability"],
        )
        if (dec(price), currency, dec(regular), availability) != expected:
            wrong.append(f"{label}: stored {row}, truth {expected}")
    return wrong


def false_out_of_stock(
    got: dict[str, tuple[Any, ...]], truth: dict[str, dict[str, Any]]
) -> list[str]:
    return [
        url
        for url, row in got.items()
        if row[3] == "OutOfStock" and truth[url]["availability"] == "InStock"
    ]


def no_price_reasons(stats: dict[str, Any]) -> Counter[str]:
    """``no_price`` reason counts, whatever the stage that counts them."""
    counts: Counter[str] = Counter()
    for key, value in stats.items():
        parts = key.split("/")
        if key.startswith("pricewatch/") and "no_price" in parts[:-1]:
            counts[parts[-1]] += value
    return counts


@dataclass(frozen=True)
class Crawl:
    """One crawl of some of the shop's pages, and what it left behind."""

    urls: list[str]
    truth: dict[str, dict[str, Any]]
    stats: dict[str, Any]
    stored: dict[str, tuple[Any, ...]]

    @property
    def on_request(self) -> list[str]:
        return [u for u in self.urls if self.truth[u]["price"] is None]


def run_crawl(tmp_path: Path, shop: SandboxProcess, urls: list[str], *settings: str) -> Crawl:
    env = scrapy_env(tmp_path)
    seed(env, urls)
    stats = crawl(tmp_path, env, *settings)
    return Crawl(urls, shop.truth(), stats, stored(tmp_path))


@pytest.fixture(scope="module")
def static_crawl(shop: SandboxProcess, tmp_path_factory: pytest.TempPathFactory) -> Crawl:
    urls = shop.urls(js=False)
    return run_crawl(tmp_path_factory.mktemp("static"), shop, urls)


@pytest.fixture(scope="module")
def js_crawl(shop: SandboxProcess, tmp_path_factory: pytest.TempPathFactory) -> Crawl:
    """No XHR pattern configured: the product's own offer JSON must be recognised, the
    recommendations in the static HTML never supply a price."""
    (js,) = shop.js_shops
    urls = shop.urls(host=js["host"])
    return run_crawl(
        tmp_path_factory.mktemp("js"), shop, urls, f"PRICEWATCH_JS_DOMAINS={js['host']}"
    )


def check_offers(result: Crawl) -> None:
    """Every stored offer equals the truth; price-on-request pages store nothing and end
    no_price; no product in stock is stored as OutOfStock."""
    outcomes = {k: v for k, v in result.stats.items() if k.startswith("pricewatch/outcome/")}
    wrong = wrong_offers(result.stored, result.truth, result.urls)
    assert not wrong, f"{len(wrong)} of {len(result.urls)} pages wrong ({outcomes}):\n" + (
        "\n".join(wrong)
    )
    assert false_out_of_stock(result.stored, result.truth) == []
    assert result.on_request, "the crawl must meet price-on-request pages"
    assert outcomes == {
        "pricewatch/outcome/ok": len(result.urls) - len(result.on_request),
        "pricewatch/outcome/no_price": len(result.on_request),
    }


def check_reasons(result: Crawl) -> None:
    """Each price-on-request page ends no_price with the reason its own offer gives."""
    wanted = Counter(result.truth[u]["no_price_reason"] for u in result.on_request)
    assert no_price_reasons(result.stats) == wanted


def test_static_shops_cover_every_markup_and_case(static_crawl: Crawl) -> None:
    kinds = {static_crawl.truth[u].get("case") or static_crawl.truth[u]["markup"] for u in
             static_crawl.urls}  # fmt: skip
    assert len(kinds) == 6 + 16  # every markup and every case
    assert {static_crawl.truth[u]["currency"] for u in static_crawl.urls} == {"KWD", "JPY", "EUR"}


def test_static_shops_store_only_true_offers(static_crawl: Crawl) -> None:
    check_offers(static_crawl)


def test_static_price_on_request_pages_end_with_their_reason(static_crawl: Crawl) -> None:
    check_reasons(static_crawl)


def test_js_shop_through_the_browser_stores_only_true_offers(js_crawl: Crawl) -> None:
    assert js_crawl.stats["pricewatch/browser/routed"] == len(js_crawl.urls)
    assert js_crawl.stats["playwright/browser_count"] == 1
    check_offers(js_crawl)


def test_js_price_on_request_pages_end_with_their_reason(js_crawl: Crawl) -> None:
    check_reasons(js_crawl)
