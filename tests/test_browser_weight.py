"""The default resource blocking against a JS shop page of the real weight.

The sandbox's ``--js-weight real`` page references images, web fonts, stylesheets, a tag
manager and its tracking tags the way a real product page does. With the default
``PRICEWATCH_BROWSER_BLOCK_*`` none of those reach the shop and the price still arrives;
without blocking the page makes the ~70 requests of a real one. One browser launch.
"""

from __future__ import annotations

import os
from decimal import Decimal
from typing import Any

import pytest

from pricewatch.browser.blocking import ResourceBlocker, skip_favicon
from pricewatch.browser.discovery import chromium_args
from pricewatch.sandbox import Sandbox
from pricewatch.sandbox._locale import LOCALES
from pricewatch.settings import PRICEWATCH_BROWSER_BLOCK_RESOURCES as BLOCK_RESOURCES
from pricewatch.settings import PRICEWATCH_BROWSER_BLOCK_URLS as BLOCK_URLS

SYSTEM_CHROMIUM = "/usr/lib/chromium/chromium"
pytestmark = pytest.mark.skipif(
    not os.access(SYSTEM_CHROMIUM, os.X_OK), reason="Debian's chromium is not installed"
)

# What a cheap browser must never download: every image, font and stylesheet, the tag
# manager, its tags and their beacons.
HEAVY = (
    "/cdn/img/",
    "/cdn/fonts/",
    "/cdn/css/",
    "/vendor/reviews/widget.css",
    "/vendor/tagmanager/",
    "/vendor/collect",
    "/vendor/tr/",
    "/vendor/hotjar/",
)


async def _load(browser: Any, sb: Sandbox, url: str, host: str, *, block: bool) -> dict[str, int]:
    context = await browser.new_context()
    try:
        page = await context.new_page()
        if block:
            blocker = ResourceBlocker(BLOCK_RESOURCES, BLOCK_URLS)
            await skip_favicon(page, None)

            async def route(r: Any) -> None:
                await (r.abort() if await blocker(r.request) else r.continue_())

            await page.route("**", route)
        sb.reset_stats()
        await page.goto(url, wait_until="domcontentloaded")
        await page.wait_for_selector('#app[data-loaded="1"]', timeout=10_000)
        if block:
            await page.wait_for_load_state("load")
        else:  # the tags' second beacon leaves 400 ms after they run
            await page.wait_for_function(
                "performance.getEntriesByType('resource')"
                ".filter(e => e.name.includes('ev=engaged')).length >= 3",
                timeout=10_000,
            )
        price = await page.text_content("#price")
        stats = sb.stats()["hosts"][host]
        return {"price": price, "requests": stats["requests"], **stats["paths"]}
    finally:
        await context.close()


async def test_default_blocking_keeps_a_real_pages_weight_away() -> None:
    from playwright.async_api import async_playwright

    sb = Sandbox(shops=0, js_shops=1, products=3, js_delay=0.1, asset_latency="none")
    await sb.start()
    try:
        (shop,) = sb.shops
        url, rec = next((u, r) for u, r in sb.truth().items() if not r["disallowed"])
        loc = next(loc for loc in LOCALES if loc.currency == shop["currency"])
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(
                executable_path=SYSTEM_CHROMIUM, headless=True, args=chromium_args()
            )
            try:
                full = await _load(browser, sb, url, shop["host"], block=False)
                blocked = await _load(browser, sb, url, shop["host"], block=True)
            finally:
                await browser.close()
    finally:
        await sb.stop()
    expected = loc.display(Decimal(rec["price"]))
    assert full["price"] == blocked["price"] == expected
    # Unblocked: the weight of a real page, every kind of it requested.
    assert full["requests"] >= 70, full
    for prefix in HEAVY:
        assert any(p.startswith(prefix) for p in full if p.startswith("/")), prefix
    # Blocked: nothing heavy reached the shop; scripts, the page and its API calls did.
    assert [p for p in blocked if p.startswith(HEAVY)] == []
    assert blocked[f"/api/offer/{rec['sku']}"] == 1 and blocked["/cdn/js/framework.js"] == 1
    assert blocked["requests"] <= 20, blocked
