"""A SKU that cannot be fetched fails alone: the crawl fetches the others and exits.

The bad URLs are put in the frontier's table directly, as an older ``scrapy seed`` or
another tool may have left them: seeding refuses them today, but the spider must cope with
whatever the schedule holds.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings

from pricewatch import settings as project_settings
from pricewatch.frontier import Entry, EntryInfo, frontier_from_settings
from pricewatch.frontier._entries import domain_of
from pricewatch.frontier.sqlite import SQLiteFrontier

from .helpers import scrapy

FAST = ["-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False"]


def frontier_settings(tmp_path: Path) -> Settings:
    settings = Settings()
    settings.setmodule(project_settings)
    settings.set("PRICEWATCH_FRONTIER_URL", f"sqlite:///{tmp_path / 'pricewatch.db'}")
    return settings


def add_raw(tmp_path: Path, urls: list[str]) -> None:
    """Schedule ``urls`` as they are, without the checks ``Frontier.add`` makes today: as a
    release that did not check them, or another tool writing the schedule, left them."""

    async def add() -> None:
        frontier = frontier_from_settings(frontier_settings(tmp_path))
        assert isinstance(frontier, SQLiteFrontier)
        await frontier.open()
        rows = [(Entry(url), domain_of(url) or "") for url in urls]
        try:
            await frontier._run(frontier._transaction, lambda c: frontier._add_sync(c, rows))
        finally:
            await frontier.close()

    asyncio.run(add())


def entries(tmp_path: Path, urls: list[str]) -> dict[str, EntryInfo | None]:
    async def read() -> dict[str, EntryInfo | None]:
        frontier = frontier_from_settings(frontier_settings(tmp_path))
        await frontier.open()
        try:
            return {url: await frontier.entry(url) for url in urls}
        finally:
            await frontier.close()

    return asyncio.run(read())


def crawl(tmp_path: Path, *args: str) -> dict[str, Any]:
    proc = scrapy(tmp_path, "crawl", "products", *FAST, *args, timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats: dict[str, Any] = json.loads((tmp_path / "stats.json").read_text())
    return stats


@pytest.fixture(scope="module")
def shop(sandbox: Any) -> Any:
    return sandbox


def test_a_url_no_request_can_be_built_from_fails_its_sku_alone(shop: Any, tmp_path: Path) -> None:
    host = shop.shops[0]["host"]
    bad = [f"http://{host}:99999/x", f"http://{host}:-1/y", f"http://{host}:80:80/z"]
    good = shop.urls(host=host)[:5]
    add_raw(tmp_path, [*bad, *good])
    stats = crawl(tmp_path)
    assert stats["finish_reason"] == "finished"
    assert stats["pricewatch/outcome/ok"] == len(good)
    assert stats["pricewatch/outcome/error"] == len(bad)
    assert stats["pricewatch/reason/error/bad_url"] == len(bad)
    for url, info in entries(tmp_path, bad).items():
        assert info is not None, url
        assert (info.state, info.failures) == ("scheduled", 1), url
