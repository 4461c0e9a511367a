"""Tiered fallback: a persistently blocked shop's SKUs come from its official API, and page
offers are cross-checked against it."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from pricewatch.extract import Offer, normalise_availability, parse_machine
from pricewatch.politeness.fallback import (
    FallbackConfig,
    OfficialCrossCheckMiddleware,
    OfficialSource,
    OfficialSourceMiddleware,
    dig,
    disagree,
)

from .fixtures.sandbox import SandboxProcess
from .helpers import project_settings
from .test_politeness_crawl import FollowCrawl, seed

SOURCE = {
    "url": "http://api.shop.test/products/{sku}",
    "price": "price.amount",
    "currency": "price.currency",
    "availability": "availability",
    "regular_price": "regular_price.amount",
}


def source(**overrides: Any) -> OfficialSource:
    return OfficialSource.from_config("Shop.Test", {**SOURCE, **overrides})


# -- configuration ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("http://x/{sku}", "PRICEWATCH_OFFICIAL_SOURCES['shop.test'] must be a dict with a 'url'"),
        ({"price": "a"}, "must be a dict with a 'url' template"),
        ({"url": "http://x/products/1"}, "['url'] must use {sku} or {url}"),
        ({"url": "http://x/{sku}/{token}"}, "['url'] must use {sku} or {url}"),
        ({"url": "http://x/{sku"}, "['url'] is not a valid template"),
        ({"url": "http://x/{sku}", "price": ""}, "['price'] must be a dotted path, got ''"),
        ({"url": "http://x/{sku}", "prize": "p"}, "has unknown key(s) ['prize']"),
        ({"url": "http://x/{sku}", "headers": ["a"]}, "['headers'] must be a dict"),
    ],
    ids=["not-a-dict", "no-url", "no-placeholder", "unknown-placeholder", "bad-template",
         "empty-path", "unknown-key", "bad-headers"],
)  # fmt: skip
def test_invalid_sources_name_the_setting(raw: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        OfficialSource.from_config("shop.test", raw)
    assert message in str(info.value)
    assert str(info.value).startswith("PRICEWATCH_OFFICIAL_SOURCES['shop.test']")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"PRICEWATCH_FALLBACK_AFTER": -1}, "PRICEWATCH_FALLBACK_AFTER must be >= 0, got -1.0"),
        (
            {"PRICEWATCH_FALLBACK_TOLERANCE": -0.1},
            "PRICEWATCH_FALLBACK_TOLERANCE must be >= 0, got -0.1",
        ),
        (
            {"PRICEWATCH_FALLBACK_CROSSCHECK": 2},
            "PRICEWATCH_FALLBACK_CROSSCHECK must be between 0 and 1, got 2.0",
        ),
    ],
    ids=["after", "tolerance", "crosscheck"],
)
def test_invalid_fallback_settings(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        FallbackConfig.from_settings(get_crawler(settings_dict=project_settings(settings)).settings)
    assert str(info.value) == message


def test_components_are_off_without_sources() -> None:
    crawler = get_crawler(settings_dict=project_settings(PRICEWATCH_FALLBACK_CROSSCHECK=0.5))
    with pytest.raises(NotConfigured):
        OfficialSourceMiddleware.from_crawler(crawler)
    with pytest.raises(NotConfigured):
        OfficialCrossCheckMiddleware.from_crawler(crawler)
    crawler = get_crawler(
        settings_dict=project_settings(PRICEWATCH_OFFICIAL_SOURCES={"shop.test": SOURCE})
    )
    assert OfficialSourceMiddleware.from_crawler(crawler).config.sources["shop.test"].price
    with pytest.raises(NotConfigured):  # cross-checking is off by default
        OfficialCrossCheckMiddleware.from_crawler(crawler)


def test_api_url_fills_and_encodes_the_template() -> None:
    src = source(url="https://api.test/{domain}/p?sku={sku}&u={url}")
    assert src.api_url("http://shop.test/p/1?a=b", "A B/1") == (
        "https://api.test/shop.test/p?sku=A%20B%2F1&u=http%3A%2F%2Fshop.test%2Fp%2F1%3Fa%3Db"
    )
    assert source().api_url("http://shop.test/p/1", None) is None  # needs a SKU
    assert source(url="https://api.test/lookup?u={url}").api_url("http://s/p", None) == (
        "https://api.test/lookup?u=http%3A%2F%2Fs%2Fp"
    )


# -- reading the answer -----------------------------------------------------------------------


def test_parse_reads_dotted_paths_as_exact_decimals() -> None:
    body = (
        b'{"price": {"amount": 1299.10, "currency": "eur"}, "availability": "OutOfStock",'
        b' "regular_price": {"amount": "1499.00"}}'
    )
    offer = source().parse(body, "http://shop.test/p/1")
    assert offer == Offer(
        price=Decimal("1299.10"),
        currency="EUR",
        regular_price=Decimal("1499.00"),
        availability="OutOfStock",
        source="api",
        price_text="1299.10",
    )


@pytest.mark.parametrize(
    ("payload", "price", "availability"),
    [
        ({"price": {"amount": "19.99"}, "availability": True}, "19.99", "InStock"),
        ({"price": {"amount": 5}, "availability": "https://schema.org/InStock"}, "5", "InStock"),
        ({"price": {"amount": 5}, "availability": "sold_out"}, "5", "OutOfStock"),
        ({"price": {"amount": 5}, "availability": "maybe"}, "5", None),
        ({"price": {"amount": 0}}, None, None),
        ({"price": {"amount": -3}}, None, None),
        ({"price": {"amount": "NaN"}}, None, None),
        ({"price": {"amount": True}}, None, None),
        ({"price": "12"}, None, None),
        ({}, None, None),
        ([], None, None),
    ],
    ids=["string-price", "schema-url", "sold-out", "unknown-stock", "zero", "negative", "nan",
         "bool", "wrong-shape", "empty", "list"],
)  # fmt: skip
def test_parse_never_invents_a_price(
    payload: Any, price: str | None, availability: str | None
) -> None:
    offer = source().parse(json.dumps(payload).encode(), "http://shop.test/p/1")
    if price is None:
        assert offer is None
    else:
        assert offer is not None
        assert offer.price == Decimal(price)
        assert offer.availability == availability


@pytest.mark.parametrize(
    ("amount", "stock", "price", "availability"),
    [
        pytest.param("1,299.00", "PreOrder", "1299.00", "InStock", id="grouped-preorder"),
        pytest.param("1299", "yes", "1299", "InStock", id="yes"),
        pytest.param(7.5, "OutOfStock", "7.5", "OutOfStock", id="number-out-of-stock"),
    ],
)
def test_parse_reads_amounts_and_stock_as_the_page_reader_does(
    amount: Any, stock: str, price: str, availability: str
) -> None:
    body = json.dumps({"price": {"amount": amount}, "availability": stock}).encode()
    offer = source().parse(body, "http://shop.test/p/1")
    assert offer is not None
    assert (offer.price, offer.availability) == (Decimal(price), availability)
    assert offer.price == parse_machine(str(amount))
    assert offer.availability == normalise_availability(stock)


def test_parse_ignores_broken_json_and_bad_currency() -> None:
    assert source().parse(b"<html>blocked</html>", "http://shop.test/p/1") is None
    offer = source().parse(b'{"price": {"amount": 3, "currency": "doubloons"}}', "u")
    assert offer is not None and offer.currency is None
    # The one currency module reads what the page reader reads; withdrawn is unknown.
    offer = source().parse(b'{"price": {"amount": 3, "currency": "euro"}}', "u")
    assert offer is not None and offer.currency == "EUR"
    offer = source().parse(b'{"price": {"amount": 3, "currency": "HRK"}}', "u")
    assert offer is not None and offer.currency is None


def test_without_paths_the_generic_json_reader_is_used() -> None:
    src = OfficialSource.from_config("shop.test", {"url": "http://api/{sku}"})
    offer = src.parse(b'{"sku": "A1", "salePrice": "7.50", "currency": "GBP"}', "http://shop/p")
    assert offer is not None
    assert (offer.price, offer.currency, offer.source) == (Decimal("7.50"), "GBP", "api")


def test_dig() -> None:
    data = {"offers": [{"price": 1}, {"price": 2}], "a": {"b": None}}
    assert dig(data, "offers.1.price") == 2
    assert dig(data, "offers.2.price") is None
    assert dig(data, "a.b.c") is None
    assert dig(data, "missing") is None


@pytest.mark.parametrize(
    ("page", "api", "why"),
    [
        ("100.00", "100.50", None),
        ("100.00", "102.00", "price 100.00 vs 102.00"),
        ("100.00", "100.00", None),
    ],
    ids=["within-1pct", "above-1pct", "equal"],
)
def test_disagreement_above_tolerance(page: str, api: str, why: str | None) -> None:
    got = disagree(
        Offer(price=Decimal(page), currency="EUR"), Offer(price=Decimal(api), currency="EUR"), 0.01
    )
    assert (got or None) == why if why is None else got is not None and got.startswith(why)


def test_currency_mismatch_is_a_disagreement() -> None:
    got = disagree(
        Offer(price=Decimal(1), currency="EUR"), Offer(price=Decimal(1), currency="USD"), 0.5
    )
    assert got == "currency EUR vs USD"


# -- end to end -------------------------------------------------------------------------------

FALLBACK_SETTINGS: dict[str, Any] = {
    "PRICEWATCH_BREAKER_COOLDOWN": 1.0,
    "PRICEWATCH_BREAKER_COOLDOWN_FACTOR": 1.0,
    "PRICEWATCH_BREAKER_MAX_COOLDOWN": 1.0,
    "PRICEWATCH_FALLBACK_AFTER": 0.5,
    # The official source here is on the blocked pages' host, so in their download slot: the
    # adaptive limit's delay for a host answering challenge pages (up to 30 s) paces it too.
    "PRICEWATCH_LIMIT_MAX_DELAY": 1.0,
}


def seed_with_skus(tmp_path: Path, shop: SandboxProcess) -> dict[str, dict[str, Any]]:
    truth = {url: t for url, t in shop.truth().items() if url in set(shop.urls())}
    tmp_path.mkdir(exist_ok=True)
    lines = ["url,sku"] + [f"{url},{t['sku']}" for url, t in truth.items()]
    seed(tmp_path, lines)
    return truth


def official_source(shop: SandboxProcess, host: str, price: str) -> dict[str, str]:
    return {
        "url": shop.shop(host)["base_url"].rstrip("/") + "/api/products/{sku}",
        "price": price,
        "currency": "price.currency",
        "availability": "availability",
    }


def rows(db: Path) -> dict[str, tuple[str, str, str | None]]:
    with sqlite3.connect(db) as conn:
        return {
            url: (price, currency, source)
            for url, price, currency, source in conn.execute(
                "SELECT url, price, currency, source FROM products"
            )
        }


def test_blocked_shop_is_refreshed_from_its_api_and_pages_are_cross_checked(
    sandbox_factory: Callable[..., SandboxProcess], tmp_path: Path
) -> None:
    shop = sandbox_factory(seed=5, shops=2, products=12, latency="20-20")
    blocked, open_host = (s["host"] for s in shop.shops)
    truth = seed_with_skus(tmp_path, shop)
    # One shop's pages answer a CAPTCHA wall for the whole crawl; its API does not. The
    # other shop's "official source" reads the list price as the price: it disagrees
    # with every discounted page, which the cross-check (every page offer) must count.
    shop.control(host=blocked, mode="challenge")
    sources = {
        blocked: official_source(shop, blocked, "price.amount"),
        open_host: official_source(shop, open_host, "regular_price.amount"),
    }
    settings = {
        **FALLBACK_SETTINGS,
        "PRICEWATCH_OFFICIAL_SOURCES": json.dumps(sources),
        "PRICEWATCH_FALLBACK_CROSSCHECK": 1.0,
    }
    crawl = FollowCrawl(tmp_path, shop, len(truth), settings=settings)
    deadline = time.monotonic() + 40
    try:
        while time.monotonic() < deadline and crawl.poll() is not None:
            time.sleep(0.05)
        time.sleep(1.0)  # let the last cross-checks land
    finally:
        stats = crawl.stop()
    assert crawl.done_at is not None, "not every SKU was stored"

    # Every SKU stored with the true price: the blocked shop's from its API.
    stored = rows(tmp_path / "pricewatch.db")
    assert sorted(stored) == sorted(truth)
    for url, want in truth.items():
        price, currency, src = stored[url]
        assert Decimal(price) == Decimal(want["price"]), url
        assert currency == want["currency"], url
        assert (src == "api") == (want["host"] == blocked), (url, src)
    from_api = sum(1 for t in truth.values() if t["host"] == blocked)
    assert stats["pricewatch/fallback/ok"] == from_api
    assert stats["pricewatch/fallback/requests"] >= from_api
    assert stats["pricewatch/challenge/detected"] >= 3
    assert stats.get("pricewatch/breaker/closed", 0) == 0  # still blocked: never closed
    paths = shop.host_stats(blocked)["paths"]
    assert sum(n for path, n in paths.items() if path.startswith("/api/")) >= from_api

    # Cross-checks: every page offer (the open shop's), none of the API offers.
    pages = [t for t in truth.values() if t["host"] == open_host]
    discounted = [
        t
        for t in pages
        if t["regular_price"]
        and Decimal(t["regular_price"]) - Decimal(t["price"])
        > Decimal("0.01") * Decimal(t["regular_price"])
    ]
    assert discounted, "the catalogue should have discounted products"
    assert stats["pricewatch/fallback/crosschecks"] == len(pages)
    assert stats["pricewatch/fallback/disagreements"] == len(discounted)
