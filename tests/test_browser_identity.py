"""Whose price a browser page's JSON carries: the page product's identity (SKU, name, URL)
against the payloads a page loads, and the XHR capture that uses only the matching one."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from pricewatch.browser._identity import page_identity, payload_identity
from pricewatch.browser.capture import XhrCapture

URL = "https://shop.example/products/morrow-lite-camera-lens-x16-co1-10001"
# The sandbox JS shop's page: the SKU on the app root around the title, recommendations
# with other products' prices beside it.
SANDBOX_PAGE = """<html><head><title>Morrow Lite Camera Lens X16 | Cedar</title></head><body>
<div id="app" data-sku="CO1-10001"><h1 class="product__title">Morrow Lite Camera Lens X16</h1>
<span class="price" id="price"></span></div>
<section class="recommendations"><ul class="carousel">
<li class="card" data-sku="CO1-10009"><a href="/products/halden-robot-vacuum-co1-10009">Halden
</a><span class="price">129,00 €</span></li></ul></section></body></html>"""
CANONICAL_PAGE = """<html><head><link rel="canonical" href="https://shop.example/p/42/">
<meta property="og:title" content="Trail Helmet, Large"></head><body><main>
<h1>Trail helmet (large)</h1><div itemprop="sku" content="TH-42-L"></div></main></body></html>"""


def own(sku: str = "CO1-10001", **extra: Any) -> dict[str, Any]:
    return {"sku": sku, "price": {"amount": "864.80", "currency": "EUR"}, **extra}


MATCHES = [
    pytest.param(SANDBOX_PAGE, URL, own(), True, id="sandbox-offer-json-by-sku-on-title-block"),
    pytest.param(
        SANDBOX_PAGE, URL, own("CO1-10009"), False, id="recommendation-json-other-sku"
    ),
    pytest.param(
        SANDBOX_PAGE,
        URL,
        {"data": {"id": 77, "name": "Morrow lite camera-lens X16", "salePrice": 864.8}},
        True,
        id="nested-payload-by-name-ignoring-case-and-punctuation",
    ),
    pytest.param(
        SANDBOX_PAGE,
        URL,
        {"name": "Halden Robot Vacuum", "price": 129, "url": "/products/halden-robot-vacuum"},
        False,
        id="featured-product-json-other-name-and-url",
    ),
    pytest.param(
        "<html><body><div>no title</div></body></html>",
        URL,
        {"productId": "co1_10001", "price": 864.8},
        True,
        id="sku-as-whole-words-of-the-url-path",
    ),
    pytest.param(
        "<html><body></body></html>",
        URL,
        {"id": 16, "price": 864.8},
        False,
        id="short-numeric-id-is-no-evidence-from-the-url",
    ),
    pytest.param(
        "<html><body></body></html>",
        URL,
        {"sku": "10001-co1", "price": 864.8},
        False,
        id="url-words-out-of-order",
    ),
    pytest.param(
        CANONICAL_PAGE,
        "https://shop.example/p/42?utm=x",
        {"url": "https://cdn.shop.example/p/42", "price": 30},
        True,
        id="url-path-of-the-canonical",
    ),
    pytest.param(
        CANONICAL_PAGE, "https://shop.example/p/42", {"mpn": "th42l", "price": 30}, True,
        id="itemprop-sku-in-the-title-block",
    ),
    pytest.param(
        CANONICAL_PAGE, "https://shop.example/p/42", {"title": "Trail Helmet, Large", "price": 1},
        True, id="og-title",
    ),
    pytest.param(
        CANONICAL_PAGE, "https://shop.example/p/42", {"price": 30}, False,
        id="payload-naming-nothing",
    ),
    pytest.param(
        '<main><h1>Kettle</h1><div itemscope itemtype="https://schema.org/Product">'
        '<meta itemprop="sku" content="MUG-1"><span itemprop="price">5</span></div></main>',
        "https://shop.example/kettle", {"sku": "MUG-1", "price": 5}, False,
        id="a-recommended-items-microdata-sku-beside-the-title",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("body", "url", "payload", "expected"), MATCHES)
def test_payload_names_the_page_product(body: str, url: str, payload: Any, expected: bool) -> None:
    identity = page_identity(body, url)
    assert identity.names_product(*payload_identity(payload)) is expected


@pytest.mark.parametrize("body", [b"", b"\x00\xff<<<", "<html>"])
def test_page_identity_never_raises(body: bytes | str) -> None:
    identity = page_identity(body, URL)
    assert identity.names_product(*payload_identity(own())) is True  # the URL still names it


async def test_capture_uses_the_page_products_json_not_the_first_one() -> None:
    """Without a pattern, a recommendation's JSON arriving first is not the page's offer."""
    capture = XhrCapture(URL)
    capture._read({"sku": "CO1-10009", "name": "Halden", "price": {"amount": "129.00"}})
    identity = page_identity(SANDBOX_PAGE, URL)
    assert capture.offer_for(identity) is None
    capture._read(own())
    offer = capture.offer_for(identity)
    assert offer is not None and offer.price == Decimal("864.80") and offer.source == "xhr"
    assert capture.ignored(identity) == 1


async def test_capture_with_patterns_takes_the_first_match() -> None:
    import re

    capture = XhrCapture(URL, [re.compile(r"/api/offer/")])
    capture._read({"sku": "CO1-10009", "price": 129})
    offer = capture.offer_for(page_identity(SANDBOX_PAGE, URL))
    assert offer is not None and offer.price == Decimal(129)  # the operator said so


async def test_the_products_own_json_without_a_valid_price_says_no_price() -> None:
    """ "Price on request": the product's own JSON has a price field but no valid price. It
    is the product's answer (no price), kept apart from the priced candidates; a payload
    without any price field (a description, reviews) says nothing about the price."""
    identity = page_identity(SANDBOX_PAGE, URL)
    capture = XhrCapture(URL)
    capture._read({"@type": "Product", "sku": "CO1-10001", "description": "Lens"})
    assert capture.priceless_for(identity) is None
    capture._read({"sku": "CO1-10009", "price": None, "availability": "InStock"})
    assert capture.priceless_for(identity) is None  # another product's
    capture._read({"sku": "CO1-10001", "price": None, "availability": "InStock"})
    assert capture.offer_for(identity) is None
    refusal = capture.priceless_for(identity)
    assert refusal is not None and refusal.price is None and refusal.source == "xhr"
