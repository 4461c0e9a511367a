"""The learned browser routes persist in the frontier backend: SQLite and Redis alike."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from scrapy.settings import Settings

from pricewatch.browser.learned import (
    RedisBrowserDomains,
    RoutingUnavailable,
    SQLiteBrowserDomains,
    browser_domains_from_settings,
)

from .helpers import project_settings


def _store(url: str):
    return browser_domains_from_settings(Settings(project_settings(PRICEWATCH_FRONTIER_URL=url)))


async def test_learned_domains_survive_a_new_connection(frontier_url: str) -> None:
    first = _store(frontier_url)
    await first.open()
    try:
        assert await first.load() == set()
        assert await first.add("Shop.Example") is True
        assert await first.add("shop.example") is False  # idempotent, case-folded
        assert await first.add("spa.example") is True
    finally:
        await first.close()
    second = _store(frontier_url)  # another worker, or the same one after a restart
    await second.open()
    try:
        assert await second.load() == {"shop.example", "spa.example"}
        assert await second.remove("spa.example") is True
        assert await second.remove("spa.example") is False
        assert await second.load() == {"shop.example"}
    finally:
        await second.close()


def test_backend_follows_the_frontier_url(tmp_path: Path, redis_frontier_url: str) -> None:
    assert isinstance(_store(f"sqlite:///{tmp_path}/pw.db"), SQLiteBrowserDomains)
    store = _store(redis_frontier_url)
    assert isinstance(store, RedisBrowserDomains)
    namespace = redis_frontier_url.rsplit("namespace=", 1)[1]
    assert store.key == f"pricewatch:{{{namespace}}}:browser_domains"
    with pytest.raises(ValueError, match="PRICEWATCH_FRONTIER_URL must be"):
        _store("mysql://host/db")


async def test_redis_set_lives_beside_the_frontier_keys(
    redis_url: str, redis_frontier_url: str
) -> None:
    store = _store(redis_frontier_url)
    await store.open()
    try:
        await store.add("shop.example")
    finally:
        await store.close()
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        assert client.smembers(store.key) == {"shop.example"}  # type: ignore[attr-defined]
    finally:
        client.close()


async def test_sqlite_table_is_in_the_frontier_file(tmp_path: Path) -> None:
    import sqlite3

    store = _store(f"sqlite:///{tmp_path / 'pw.db'}")
    await store.open()
    await store.add("shop.example")
    with sqlite3.connect(tmp_path / "pw.db") as conn:
        assert conn.execute("SELECT domain FROM browser_domains").fetchall() == [("shop.example",)]


async def test_unreachable_backends_raise_with_the_masked_url(tmp_path: Path) -> None:
    missing = _store(f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}")
    with pytest.raises(RoutingUnavailable, match="does not exist"):
        await missing.open()
    down = RedisBrowserDomains("redis://:secret@127.0.0.1:1/0", timeout=1.0)
    try:
        with pytest.raises(RoutingUnavailable) as info:
            await down.load()
        assert "secret" not in str(info.value) and "***" in str(info.value)
    finally:
        await down.close()
