"""Confirm before publishing, end to end: ``scrapy crawl products`` subprocesses against
the sandbox's one-fetch x10 glitch products (an HTML shop and a JS-only shop).

The first crawl stores every real price. The second fetch of a glitch product shows its
price x10: the store holds it, the frontier makes the SKU due again at once (confirm
delay 0), the third fetch shows the real price again, and the glitch is rejected: never
published, kept in ``price_quarantine`` and shown by ``scrapy prices --history``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

from scrapy.settings import Settings

from pricewatch.frontier import frontier_from_settings

from .fixtures.sandbox import SandboxProcess
from .helpers import project_settings, scrapy, scrapy_env
from .test_browser_crawl import ONE_AT_A_TIME, crawl, seed, stored


def requeue(env: dict[str, str], hosts: list[str]) -> None:
    """Make every entry of ``hosts`` due now (as ``scrapy frontier --requeue`` does)."""

    async def run() -> None:
        settings = Settings(
            project_settings(PRICEWATCH_FRONTIER_URL=env["PRICEWATCH_FRONTIER_URL"])
        )
        frontier = frontier_from_settings(settings)
        await frontier.open()
        try:
            for host in hosts:
                await frontier.requeue_domain(host)
        finally:
            await frontier.close()

    asyncio.run(run())


def price_changes(tmp_path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(tmp_path / "pricewatch.db") as conn:
        return conn.execute("SELECT url, price FROM price_changes ORDER BY id").fetchall()


def test_a_one_fetch_glitch_is_held_and_never_published(
    tmp_path: Path, sandbox_factory: Any
) -> None:
    shop: SandboxProcess = sandbox_factory(
        seed=5, shops=1, js_shops=1, products=4, cases=True, js_weight="light"
    )
    html_host, js_host = shop.html_shops[0]["host"], shop.js_shops[0]["host"]
    truth = shop.truth()
    glitches = sorted(u for u, r in truth.items() if r.get("case") == "glitch")
    allowed = set(shop.urls())  # not the robots.txt-disallowed ones
    ordinary = sorted(u for u, r in truth.items() if not r.get("case") and u in allowed)[:4]
    assert len(glitches) == 2 and {truth[u]["js"] for u in glitches} == {True, False}
    urls = glitches + ordinary
    env = scrapy_env(tmp_path)
    seed(env, urls)
    settings = [*ONE_AT_A_TIME, f"PRICEWATCH_JS_DOMAINS={js_host}"]

    stats = crawl(tmp_path, env, *settings)
    assert stats["pricewatch/outcome/ok"] == len(urls)
    assert "pricewatch/quarantine/held" not in stats  # first sightings are never held
    rows = stored(tmp_path)
    for url in urls:
        assert Decimal(rows[url][0]) == Decimal(truth[url]["price"]), url

    requeue(env, [html_host, js_host])
    stats = crawl(tmp_path, env, *settings, "PRICEWATCH_QUARANTINE_CONFIRM_DELAY=0")
    # Each glitch product: held on its 2nd fetch, fetched again at once, rejected.
    assert stats["pricewatch/quarantine/held"] == len(glitches)
    assert stats["pricewatch/quarantine/held/ratio_up"] == len(glitches)
    assert stats["pricewatch/quarantine/rejected"] == len(glitches)
    assert "pricewatch/quarantine/confirmed" not in stats
    assert stats["pricewatch/outcome/ok"] == len(urls) + len(glitches)
    truth = shop.truth()
    for url in glitches:
        assert truth[url]["glitch"]["fetches"] == 3, url
    rows = stored(tmp_path)
    for url in urls:
        assert Decimal(rows[url][0]) == Decimal(truth[url]["price"]), url
    glitch_prices = {Decimal(truth[u]["glitch"]["price"]) for u in glitches}
    assert not [p for _, p in price_changes(tmp_path) if Decimal(p) in glitch_prices]

    history = scrapy(tmp_path, "prices", "--history", glitches[0], env=env)
    assert history.returncode == 0, history.stderr
    lines = history.stdout.splitlines()[2:]
    assert [" ".join(line.split()[5:-2]) for line in lines] == [
        "published",
        "rejected (ratio_up)",
    ]
    # Each row names the config version of the crawl that observed it: the second crawl
    # ran with another PRICEWATCH_QUARANTINE_CONFIRM_DELAY, so another version.
    versions = [line.split()[-2] for line in lines]
    assert len(set(versions)) == 2 and all(len(v) == 12 for v in versions)


def test_a_real_large_change_is_confirmed_by_a_second_fetch_and_published(
    tmp_path: Path, sandbox_factory: Any
) -> None:
    """The store holds a tenth of the shop's price (as if the shop had just raised it
    x10): the first fetch is held, the second one, right after, agrees, and the change is
    published with the second fetch's time."""
    from datetime import UTC, datetime, timedelta

    from pricewatch.storage import Observation, store_from_url

    shop: SandboxProcess = sandbox_factory(seed=6, shops=1, products=3)
    truth = shop.truth()
    urls = shop.urls()[:2]
    env = scrapy_env(tmp_path)
    seed(env, urls)

    async def publish_old_prices() -> None:
        async with store_from_url(env["PRICEWATCH_STORE_URL"]) as store:
            await store.write(
                [
                    Observation(
                        url=url,
                        domain=truth[url]["host"],
                        price=Decimal(truth[url]["price"]) / 10,
                        currency=truth[url]["currency"],
                        raw_hash=f"old-{url}",
                        observed_at=datetime.now(UTC) - timedelta(days=1),
                    )
                    for url in urls
                ]
            )

    asyncio.run(publish_old_prices())
    stats = crawl(tmp_path, env, *ONE_AT_A_TIME, "PRICEWATCH_QUARANTINE_CONFIRM_DELAY=0")
    assert stats["pricewatch/quarantine/held"] == len(urls)
    assert stats["pricewatch/quarantine/held/ratio_up"] == len(urls)
    assert stats["pricewatch/quarantine/confirmed"] == len(urls)
    assert "pricewatch/quarantine/rejected" not in stats
    assert stats["pricewatch/outcome/ok"] == 2 * len(urls)
    assert stats["pricewatch/store/changes"] == len(urls)  # published once each
    rows = stored(tmp_path)
    for url in urls:
        assert Decimal(rows[url][0]) == Decimal(truth[url]["price"]), url
    assert sum(
        n
        for p, n in shop.host_stats(truth[urls[0]]["host"])["paths"].items()
        if p.startswith("/products/")
    ) == 2 * len(urls)
