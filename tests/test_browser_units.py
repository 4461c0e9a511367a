"""The browser component without a browser: client-rendering signs, product-like JSON,
resource blocking, browser discovery, the addon's wiring and the router's decisions."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from scrapy import Request
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from pricewatch.browser import BrowserAddon, BrowserNotFound, BrowserRouter, ResourceBlocker
from pricewatch.browser._signals import client_rendering_signs, product_like
from pricewatch.browser.blocking import skip_favicon
from pricewatch.browser.discovery import chromium_args, launch_options
from pricewatch.meta import BROWSER_CAPTURE_META as CAPTURE_META
from pricewatch.meta import BROWSER_META
from pricewatch.settings import PRICEWATCH_BROWSER_BLOCK_RESOURCES as BLOCK_RESOURCES
from pricewatch.settings import PRICEWATCH_BROWSER_BLOCK_URLS as BLOCK_URLS
from pricewatch.spiders.products import ProductSpider

from .helpers import project_settings

SYSTEM_CHROMIUM = "/usr/lib/chromium/chromium"
needs_chromium = pytest.mark.skipif(
    not os.access(SYSTEM_CHROMIUM, os.X_OK), reason="Debian's chromium is not installed"
)

# --- client-side rendering signs -----------------------------------------------------------
SIGNS = [
    pytest.param(
        '<div id="app" data-sku="A1"><span class="price price--current" id="price"></span></div>',
        ["empty_price_node", "app_root"],
        id="sandbox-js-shop-empty-price-node-in-app-root",
    ),
    pytest.param(
        '<div id="__next"></div><script>fetch("/api/products/42").then(r => r.json())</script>',
        ["app_root", "price_api"],
        id="nextjs-root-and-product-api-fetch",
    ),
    pytest.param(
        '<main><meta itemprop="price" content=""><div data-v-app></div></main>',
        ["empty_price_node", "app_root"],
        id="vue-app-with-empty-microdata-price",
    ),
    pytest.param(
        '<div class="product"><span class="price">$12.99</span></div>',
        [],
        id="server-rendered-price",
    ),
    pytest.param(
        '<div class="product"><h1>Sold out</h1></div><script>console.log("hi")</script>',
        [],
        id="plain-page-without-price-or-app",
    ),
    pytest.param("", [], id="empty-body"),
    pytest.param(b"\x00\xff<<<", [], id="garbage-bytes"),
]


@pytest.mark.parametrize(("body", "expected"), SIGNS)
def test_client_rendering_signs(body: str | bytes, expected: list[str]) -> None:
    assert client_rendering_signs(body) == expected


def test_sandbox_pages_signs(sandbox: Any) -> None:
    """The sandbox's JS-only product page shows client rendering; its HTML pages do not.
    (Its recommendations carry prices in the static HTML, so the empty price node shows
    only on the plain variant of the page.)"""
    import urllib.request

    from pricewatch.sandbox import BackgroundSandbox

    js_url = sandbox.urls(host=sandbox.js_shops[0]["host"])[0]
    with urllib.request.urlopen(js_url, timeout=10) as resp:
        assert "app_root" in client_rendering_signs(resp.read())
    plain = {"shops": 0, "js_shops": 1, "products": 2, "js_weight": "light"}
    with BackgroundSandbox(**plain, recommendations="plain") as shop:
        with urllib.request.urlopen(shop.urls()[0], timeout=10) as resp:
            signs = set(client_rendering_signs(resp.read()))
        assert {"empty_price_node", "app_root"} <= signs
    for shop in sandbox.html_shops:
        url = sandbox.urls(host=shop["host"])[0]
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert client_rendering_signs(resp.read()) == [], url


# --- product-like JSON ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            {"sku": "A1", "price": {"amount": "12.99", "currency": "USD"}},
            True,
            id="sandbox-api-offer",
        ),
        pytest.param({"data": {"salePrice": 9.5, "currency": "EUR"}}, True, id="wrapped-object"),
        pytest.param({"@type": "Product", "offers": {}}, True, id="schema-org-product"),
        pytest.param(
            {"items": [{"price": 1}, {"price": 2}], "next_cursor": "x"}, False, id="listing"
        ),
        pytest.param([{"price": 1}], False, id="top-level-list"),
        pytest.param({"user": {"name": "x"}}, False, id="no-price-key"),
        pytest.param("12.99", False, id="bare-string"),
    ],
)
def test_product_like(data: Any, expected: bool) -> None:
    assert product_like(data) is expected


# --- resource blocking ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "resource_type", "blocked"),
    [
        ("http://shop/static/img/a.png", "image", True),
        ("http://shop/static/fonts/shop.woff2", "font", True),
        ("http://shop/static/css/shop.css", "stylesheet", True),
        ("http://shop/video.mp4", "media", True),
        ("http://shop/vendor/tagmanager/gtm.js", "script", True),
        ("https://www.googletagmanager.com/gtm.js?id=GTM-1", "script", True),
        ("http://shop/vendor/collect?ev=page_view", "image", True),
        ("http://shop/static/js/app.js", "script", False),
        ("http://shop/api/offer/A1", "fetch", False),
        ("http://shop/products/a", "document", False),
        ("http://shop/collection/shoes", "document", False),
    ],
)
def test_default_blocker(url: str, resource_type: str, blocked: bool) -> None:
    assert ResourceBlocker(BLOCK_RESOURCES, BLOCK_URLS).blocks(url, resource_type) is blocked


def test_blocker_lists_can_be_emptied() -> None:
    blocker = ResourceBlocker([], [])
    assert not blocker.blocks("http://shop/vendor/tagmanager/gtm.js", "image")


def test_blocker_rejects_bad_patterns() -> None:
    with pytest.raises(ValueError, match="PRICEWATCH_BROWSER_BLOCK_URLS"):
        ResourceBlocker([], ["("])


# --- browser discovery ----------------------------------------------------------------------
def _executable(path: Path) -> str:
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_configured_launch_options_win(tmp_path: Path) -> None:
    exe = _executable(tmp_path / "my-chrome")
    options = {"executable_path": exe, "headless": False}
    assert launch_options(options, [SYSTEM_CHROMIUM]) == options


def test_configured_executable_must_exist(tmp_path: Path) -> None:
    with pytest.raises(BrowserNotFound, match="PLAYWRIGHT_LAUNCH_OPTIONS executable_path"):
        launch_options({"executable_path": str(tmp_path / "missing")}, [])


def test_system_chromium_is_used_with_closed_network_flags(tmp_path: Path) -> None:
    exe = _executable(tmp_path / "chromium")
    options = launch_options(None, [str(tmp_path / "absent"), exe], browsers_path=str(tmp_path))
    assert options["executable_path"] == exe
    assert options["headless"] is True
    for flag in (
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--disable-sync",
        "--disable-gpu",
    ):
        assert flag in options["args"]
    assert ("--no-sandbox" in options["args"]) is (os.geteuid() == 0)
    assert options["args"] == chromium_args()


def test_playwright_download_is_the_last_resort(tmp_path: Path) -> None:
    _executable(_mkdirs(tmp_path / "chromium-1234" / "chrome-linux") / "chrome")
    options = launch_options(None, [str(tmp_path / "absent")], browsers_path=str(tmp_path))
    assert "executable_path" not in options  # Playwright finds its own
    assert options["headless"] is True


def _mkdirs(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def test_no_browser_names_the_three_options(tmp_path: Path) -> None:
    with pytest.raises(BrowserNotFound) as info:
        launch_options(None, [str(tmp_path / "absent")], browsers_path=str(tmp_path))
    message = str(info.value)
    assert "PLAYWRIGHT_LAUNCH_OPTIONS" in message
    assert "apt-get install chromium" in message and str(tmp_path / "absent") in message
    assert "playwright install chromium" in message


# --- the addon ------------------------------------------------------------------------------
def _addon_settings(**values: Any) -> Settings:
    settings = Settings()
    settings.setmodule("pricewatch.settings", priority="project")
    for key, value in values.items():
        settings.set(key, value, priority="cmdline")
    BrowserAddon().update_settings(settings)
    return settings


@needs_chromium
def test_addon_discovers_system_chromium_and_installs_the_blocker() -> None:
    settings = _addon_settings()
    assert settings.getdict("PLAYWRIGHT_LAUNCH_OPTIONS")["executable_path"] == SYSTEM_CHROMIUM
    blocker = settings.get("PLAYWRIGHT_ABORT_REQUEST")
    assert isinstance(blocker, ResourceBlocker)
    assert blocker.resource_types == set(BLOCK_RESOURCES)
    assert BrowserRouter in settings.getdict("EXTENSIONS")


def test_addon_keeps_the_operators_choices(tmp_path: Path) -> None:
    exe = _executable(tmp_path / "chrome")
    settings = _addon_settings(
        PLAYWRIGHT_LAUNCH_OPTIONS={"executable_path": exe},
        PLAYWRIGHT_ABORT_REQUEST="my.module.abort",
    )
    assert settings.getdict("PLAYWRIGHT_LAUNCH_OPTIONS") == {"executable_path": exe}
    assert settings.get("PLAYWRIGHT_ABORT_REQUEST") == "my.module.abort"


def test_addon_blocks_no_resource_when_both_lists_are_empty_but_checks_destinations() -> None:
    settings = _addon_settings(
        PRICEWATCH_BROWSER_BLOCK_RESOURCES=[],
        PRICEWATCH_BROWSER_BLOCK_URLS=[],
        PRICEWATCH_ALLOWED_NETWORKS=["10.20.0.0/16"],
    )
    blocker = settings.get("PLAYWRIGHT_ABORT_REQUEST")
    assert isinstance(blocker, ResourceBlocker)
    assert not blocker.blocks("http://shop/vendor/tagmanager/gtm.js", "image")
    assert blocker.allowed == (ipaddress.ip_network("10.20.0.0/16"),)


class _BrowserRequest:
    """What the predicate reads of a Playwright request."""

    def __init__(self, url: str, resource_type: str = "script", main: bool = False) -> None:
        self.url = url
        self.resource_type = resource_type
        self.frame = SimpleNamespace(parent_frame=None if main else object())
        self._main = main

    def is_navigation_request(self) -> bool:
        return self._main


@pytest.mark.parametrize(
    ("url", "main", "aborted"),
    [
        pytest.param("http://169.254.169.254/latest/meta-data/", False, True, id="metadata-xhr"),
        pytest.param("http://10.1.2.3/admin", False, True, id="private-script"),
        pytest.param("http://127.0.0.2:8080/x.js", False, True, id="loopback-not-allowed"),
        pytest.param("http://169.254.169.254/", True, True, id="page-navigates-to-metadata"),
        pytest.param("http://10.20.0.7/api/offer", False, False, id="allowed-network"),
        pytest.param("http://93.184.215.14/app.js", False, False, id="public-address"),
        pytest.param("data:text/plain,hello", False, False, id="data-url"),
        pytest.param("http://no-such-host.invalid/x.js", False, False, id="unresolvable"),
    ],
)
def test_blocker_keeps_the_browser_where_the_crawl_may_go(
    url: str, main: bool, aborted: bool
) -> None:
    blocker = ResourceBlocker([], [], allowed=[ipaddress.ip_network("10.20.0.0/16")])
    assert asyncio.run(blocker(_BrowserRequest(url, main=main))) is aborted


def test_blocker_without_networks_checks_no_destination() -> None:
    blocker = ResourceBlocker([], [])
    assert asyncio.run(blocker(_BrowserRequest("http://10.1.2.3/admin"))) is False


# --- the router -----------------------------------------------------------------------------
def _router(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **settings: Any) -> BrowserRouter:
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path))
    base = {
        "PRICEWATCH_FRONTIER_URL": f"sqlite:///{tmp_path / 'pw.db'}",
        "PRICEWATCH_BROWSER_SYSTEM_CHROMIUM": [_executable(tmp_path / "chromium")],
    }
    crawler = get_crawler(ProductSpider, settings_dict=project_settings(base, **settings))
    return BrowserRouter.of(crawler)


def test_declared_domains_and_subdomains_go_through_the_browser(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    router = _router(
        monkeypatch,
        tmp_path,
        PRICEWATCH_JS_DOMAINS=["shop.example"],
        PLAYWRIGHT_ABORT_REQUEST=ResourceBlocker(BLOCK_RESOURCES, []),
    )
    for url in ("https://shop.example/p/1", "https://www.shop.example/p/2"):
        request = router.route(Request(url))
        assert request.meta["playwright"] is True
        assert request.meta["playwright_include_page"] is True
        assert request.meta[BROWSER_META] == "declared"
        assert request.meta["playwright_page_event_handlers"]["response"]
    # Images are blocked: the favicon (fetched outside request routing) is skipped too.
    assert request.meta["playwright_page_init_callback"] is skip_favicon
    plain = router.route(Request("https://othershop.example/p/1"))
    assert "playwright" not in plain.meta and BROWSER_META not in plain.meta
    assert router.crawler.stats.get_value("pricewatch/browser/routed/declared") == 2


def test_favicon_is_fetched_when_images_are(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    router = _router(
        monkeypatch,
        tmp_path,
        PRICEWATCH_JS_DOMAINS=["shop.example"],
        PLAYWRIGHT_ABORT_REQUEST=ResourceBlocker(["font"], []),
    )
    assert (
        "playwright_page_init_callback" not in router.route(Request("https://shop.example/")).meta
    )


def test_contexts_rotate_after_context_pages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    router = _router(
        monkeypatch,
        tmp_path,
        PRICEWATCH_JS_DOMAINS=["a.example"],
        PRICEWATCH_BROWSER_CONTEXT_PAGES=2,
    )
    names = [
        router.route(Request(f"https://a.example/{i}")).meta["playwright_context"] for i in range(5)
    ]
    assert names == ["pricewatch-0", "pricewatch-0", "pricewatch-1", "pricewatch-1", "pricewatch-2"]


def test_xhr_patterns_per_host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    router = _router(
        monkeypatch,
        tmp_path,
        PRICEWATCH_JS_DOMAINS=["a.example", "b.example"],
        PRICEWATCH_BROWSER_XHR_PATTERNS={"a.example": [r"/api/offer/"], "b.example": []},
    )
    a = router.route(Request("https://a.example/p")).meta[CAPTURE_META]
    assert a.wanted("https://a.example/api/offer/1", "fetch", "text/plain")
    assert not a.wanted("https://a.example/api/other", "fetch", "application/json")
    b = router.route(Request("https://b.example/p")).meta
    assert not b[CAPTURE_META].enabled and "playwright_page_event_handlers" not in b


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("PRICEWATCH_BROWSER_LEARN_TRIES", 0, "PRICEWATCH_BROWSER_LEARN_TRIES must be >= 1, got 0"),
        ("PRICEWATCH_BROWSER_CONTEXT_PAGES", 0, "PRICEWATCH_BROWSER_CONTEXT_PAGES must be >= 1"),
        ("PRICEWATCH_BROWSER_WAIT_TIMEOUT", 0, "PRICEWATCH_BROWSER_WAIT_TIMEOUT must be > 0"),
        ("PRICEWATCH_BROWSER_WAIT_UNTIL", "never", "PRICEWATCH_BROWSER_WAIT_UNTIL must be one"),
        ("PRICEWATCH_BROWSER_XHR_PATTERNS", {"a": ["("]}, "PRICEWATCH_BROWSER_XHR_PATTERNS"),
    ],
)
def test_invalid_settings_are_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, setting: str, value: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        _router(monkeypatch, tmp_path, **{setting: value})


def test_declared_domains_without_a_browser_fail_at_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(BrowserNotFound, match="playwright install chromium"):
        _router(
            monkeypatch,
            tmp_path,
            PRICEWATCH_JS_DOMAINS=["a.example"],
            PRICEWATCH_BROWSER_SYSTEM_CHROMIUM=[str(tmp_path / "absent")],
        )


def test_without_a_browser_learned_routes_stay_static(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    router = _router(
        monkeypatch, tmp_path, PRICEWATCH_BROWSER_SYSTEM_CHROMIUM=[str(tmp_path / "absent")]
    )
    assert router.unavailable and "PLAYWRIGHT_LAUNCH_OPTIONS" in router.unavailable
    router.learned.add("a.example")
    assert "playwright" not in router.route(Request("https://a.example/p")).meta


async def test_refresh_loads_routes_learned_by_other_workers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from pricewatch.browser.learned import SQLiteBrowserDomains

    other = SQLiteBrowserDomains(f"sqlite:///{tmp_path / 'pw.db'}")
    await other.add("spa.example")
    router = _router(monkeypatch, tmp_path)
    await router.refresh(force=True)
    request = router.route(Request("https://spa.example/p/1"))
    assert request.meta[BROWSER_META] == "learned"
    assert router.crawler.stats.get_value("pricewatch/browser/routed/learned") == 1


async def test_a_route_that_cannot_be_saved_is_still_used_and_counted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    router = _router(
        monkeypatch,
        tmp_path,
        PRICEWATCH_FRONTIER_URL=f"sqlite:///{tmp_path / 'missing' / 'pw.db'}",
    )
    await router.learn("spa.example")
    assert router.crawler.stats.get_value("pricewatch/browser/learned") == 1
    assert router.crawler.stats.get_value("pricewatch/browser/learn_not_saved") == 1
    assert router.route(Request("https://spa.example/p")).meta[BROWSER_META] == "learned"


async def test_a_browser_page_takes_its_own_products_json_and_counts_the_others(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without an XHR pattern, another product's JSON (captured first) is ignored and
    counted; the JSON naming the page's product is the offer."""
    from scrapy.http import HtmlResponse

    from pricewatch.meta import BROWSER_CAPTURE_META

    router = _router(monkeypatch, tmp_path, PRICEWATCH_JS_DOMAINS=["shop.example"])
    router.crawler.stats.open_spider()
    url = "https://shop.example/products/kettle-kt-2000"
    request = router.route(Request(url))
    capture = request.meta[BROWSER_CAPTURE_META]
    assert capture.patterns is None
    capture._read({"sku": "MUG-7", "name": "Mug", "price": 4.5, "currency": "EUR"})
    capture._read({"sku": "KT-2000", "name": "Kettle", "price": 39.9, "currency": "EUR"})
    body = b'<html><body><div data-sku="KT-2000"><h1>Kettle</h1></div></body></html>'
    response = HtmlResponse(url, body=body, request=request)
    offer = await router.extract(response)
    assert offer is not None and str(offer.price) == "39.9" and offer.source == "xhr"
    stats = router.crawler.stats
    assert stats.get_value("pricewatch/browser/xhr_ignored") == 1
    assert stats.get_value("pricewatch/browser/offer/xhr") == 1


async def test_a_browser_page_whose_own_json_has_no_price_has_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """ "Price on request": the product's own JSON has no valid price; the page's other
    prices (recommendations) are not read."""
    from scrapy.http import HtmlResponse

    from pricewatch.meta import BROWSER_CAPTURE_META

    router = _router(monkeypatch, tmp_path, PRICEWATCH_JS_DOMAINS=["shop.example"])
    router.crawler.stats.open_spider()
    url = "https://shop.example/products/laser-cutter-lc-9"
    request = router.route(Request(url))
    capture = request.meta[BROWSER_CAPTURE_META]
    capture._read({"sku": "LC-9", "name": "Laser Cutter", "price": None})
    body = (
        b'<html><body><div data-sku="LC-9"><h1>Laser Cutter</h1><p>Price on request</p>'
        b'</div><ul><li itemscope itemtype="https://schema.org/Product"><span itemprop="name">'
        b'Mug</span><span itemprop="price" content="4.50">4,50</span><meta '
        b'itemprop="priceCurrency" content="EUR"></li></ul></body></html>'
    )
    offer = await router.extract(HtmlResponse(url, body=body, request=request))
    assert offer is not None and offer.price is None
    stats = router.crawler.stats
    assert stats.get_value("pricewatch/browser/xhr_no_price") == 1
    assert stats.get_value("pricewatch/browser/no_price") == 1
