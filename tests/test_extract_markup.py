"""Structured data: every markup form ``extract_offer`` reads, as example tables.

Cases are named after where their shape comes from: schema.org's own examples, Google's
product structured-data documentation, the Open Graph product namespace, and the shapes
seen in the product-extraction benchmark corpus (reduced to the part that matters).
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from pricewatch.extract import Offer, extract_offer

URL = "https://shop.example.com/p/kettle-123"


def page(head: str = "", body: str = "") -> str:
    return f"<html><head>{head}</head><body>{body}</body></html>"


def ld(data: object) -> str:
    return f'<script type="application/ld+json">{json.dumps(data)}</script>'


PRODUCT = {
    "@context": "https://schema.org",
    "@type": "Product",
    "name": "Kettle",
    "sku": "K-123",
    "gtin13": "4006381333931",
    "offers": {
        "@type": "Offer",
        "price": "19.99",
        "priceCurrency": "EUR",
        "availability": "https://schema.org/InStock",
    },
}

# (id, html, expected fields)
JSONLD_CASES = [
    pytest.param(
        page(ld(PRODUCT)),
        {
            "price": "19.99",
            "currency": "EUR",
            "sku": "K-123",
            "gtin": "4006381333931",
            "availability": "InStock",
            "name": "Kettle",
        },
        id="schema.org-product-offer",
    ),
    pytest.param(
        page(
            ld(
                {
                    "@context": "https://schema.org",
                    "@graph": [
                        {"@type": "WebSite", "name": "Shop"},
                        {"@type": "BreadcrumbList", "itemListElement": []},
                        {**PRODUCT, "@context": None},
                    ],
                }
            )
        ),
        {"price": "19.99", "currency": "EUR"},
        id="yoast-graph",
    ),
    pytest.param(
        page(ld([{"@type": "Organization", "name": "Shop"}, PRODUCT])),
        {"price": "19.99"},
        id="top-level-array",
    ),
    pytest.param(
        page(
            ld(
                {
                    **PRODUCT,
                    "offers": [
                        {
                            "@type": "Offer",
                            "price": 24.5,
                            "priceCurrency": "GBP",
                            "availability": "OutOfStock",
                        },
                        {
                            "@type": "Offer",
                            "price": 26,
                            "priceCurrency": "GBP",
                            "availability": "InStock",
                        },
                    ],
                }
            )
        ),
        {"price": "24.5", "currency": "GBP", "availability": "InStock"},
        id="google-offers-list-any-in-stock",
    ),
    pytest.param(
        page(
            ld(
                {
                    **PRODUCT,
                    "offers": {
                        "@type": "AggregateOffer",
                        "lowPrice": "9.90",
                        "highPrice": "14.90",
                        "priceCurrency": "EUR",
                        "offerCount": 3,
                    },
                }
            )
        ),
        {"price": "9.90", "currency": "EUR"},
        id="google-aggregateoffer-lowprice",
    ),
    pytest.param(
        page(
            ld(
                {
                    **PRODUCT,
                    "offers": {
                        "@type": "AggregateOffer",
                        "offers": [{"@type": "Offer", "price": "11.00", "priceCurrency": "EUR"}],
                    },
                }
            )
        ),
        {"price": "11.00"},
        id="aggregateoffer-with-nested-offers",
    ),
    pytest.param(
        page(
            ld(
                {
                    **PRODUCT,
                    "offers": {
                        "@type": "Offer",
                        "priceSpecification": [
                            {
                                "@type": "UnitPriceSpecification",
                                "price": 29.99,
                                "priceCurrency": "USD",
                            },
                            {
                                "@type": "UnitPriceSpecification",
                                "price": 39.99,
                                "priceCurrency": "USD",
                                "priceType": "https://schema.org/StrikethroughPrice",
                            },
                        ],
                    },
                }
            )
        ),
        {"price": "29.99", "currency": "USD", "regular_price": "39.99"},
        id="google-strikethrough-pricespecification",
    ),
    pytest.param(
        page(
            ld(
                {
                    **PRODUCT,
                    "offers": {
                        "@type": "Offer",
                        "price": "8.00",
                        "priceCurrency": "EUR",
                        "priceSpecification": {
                            "@type": "UnitPriceSpecification",
                            "price": "10.00",
                            "priceCurrency": "EUR",
                            "priceType": "https://schema.org/ListPrice",
                        },
                    },
                }
            )
        ),
        {"price": "8.00", "regular_price": "10.00"},
        id="schema.org-listprice",
    ),
    pytest.param(
        page(
            ld(
                {
                    **PRODUCT,
                    "offers": {
                        "@type": "Offer",
                        "price": "4.50",
                        "priceCurrency": "EUR",
                        "priceSpecification": {
                            "@type": "UnitPriceSpecification",
                            "price": "9.00",
                            "priceCurrency": "EUR",
                            "referenceQuantity": {
                                "@type": "QuantitativeValue",
                                "value": 1,
                                "unitCode": "KGM",
                            },
                        },
                    },
                }
            )
        ),
        {"price": "4.50", "regular_price": None},
        id="unit-price-per-kg-is-not-the-price",
    ),
    pytest.param(
        page(
            ld(
                {
                    "@context": "https://schema.org",
                    "@type": "ProductGroup",
                    "name": "Shirt",
                    "productGroupID": "SH",
                    "hasVariant": [
                        {
                            "@type": "Product",
                            "sku": "SH-S",
                            "url": "https://shop.example.com/p/sh?s=S",
                            "offers": {
                                "@type": "Offer",
                                "price": "20.00",
                                "priceCurrency": "EUR",
                                "availability": "https://schema.org/OutOfStock",
                            },
                        },
                        {
                            "@type": "Product",
                            "sku": "SH-M",
                            "url": URL,
                            "offers": {
                                "@type": "Offer",
                                "price": "22.00",
                                "priceCurrency": "EUR",
                                "availability": "https://schema.org/InStock",
                            },
                        },
                    ],
                }
            )
        ),
        {"price": "22.00", "sku": "SH-M", "availability": "InStock"},
        id="google-productgroup-variant-matching-url",
    ),
    pytest.param(
        page(
            ld(
                {
                    "@context": "https://schema.org",
                    "@type": "ProductGroup",
                    "name": "Shirt",
                    "hasVariant": [
                        {
                            "@type": "Product",
                            "sku": "SH-S",
                            "offers": {
                                "@type": "Offer",
                                "price": "20.00",
                                "priceCurrency": "EUR",
                                "availability": "https://schema.org/OutOfStock",
                            },
                        },
                        {
                            "@type": "Product",
                            "sku": "SH-M",
                            "offers": {
                                "@type": "Offer",
                                "price": "20.00",
                                "priceCurrency": "EUR",
                                "availability": "https://schema.org/InStock",
                            },
                        },
                    ],
                }
            )
        ),
        {"price": "20.00", "availability": "InStock"},
        id="productgroup-any-variant-in-stock",
    ),
    pytest.param(
        page(
            ld(
                {
                    "@type": "ItemList",
                    "itemListElement": [
                        {
                            "@type": "ListItem",
                            "item": {
                                "@type": "Product",
                                "name": "Other",
                                "offers": {"price": "5.00", "priceCurrency": "EUR"},
                            },
                        }
                    ],
                }
            )
            + ld(PRODUCT)
        ),
        {"price": "19.99", "name": "Kettle"},
        id="related-itemlist-comes-after-main-product",
    ),
    pytest.param(
        page(
            '<script type="application/ld+json">\n// comment\n{"@type": "Product", '
            '"name": "K", "offers": {"@type": "Offer", "price": "7,50", '
            '"priceCurrency": "EUR",},}\n</script>'
        ),
        {"price": "7.50"},
        id="lenient-json-comments-trailing-commas-decimal-comma",
    ),
    pytest.param(
        page(
            ld(
                {
                    **PRODUCT,
                    "offers": {
                        "@type": "Offer",
                        "price": "0",
                        "priceCurrency": "EUR",
                        "availability": "OutOfStock",
                    },
                }
            )
        ),
        {"price": None, "name": "Kettle"},
        id="zero-price-is-no-price",
    ),
    pytest.param(
        page(ld({**PRODUCT, "gtin13": "4006381333932"})),
        {"gtin": None},
        id="gtin-bad-check-digit-dropped",
    ),
]

MICRODATA_CASES = [
    pytest.param(
        page(
            body='<div itemscope itemtype="https://schema.org/Product">'
            '<h1 itemprop="name">Kettle</h1><meta itemprop="sku" content="K-9">'
            '<div itemprop="offers" itemscope itemtype="https://schema.org/Offer">'
            '<span itemprop="priceCurrency" content="EUR">€</span>'
            '<span itemprop="price" content="1299.00">1.299,00</span>'
            '<link itemprop="availability" href="https://schema.org/InStock"></div>'
            '<div itemprop="isRelatedTo" itemscope itemtype="https://schema.org/Product">'
            '<span itemprop="price" content="5.00">5</span></div></div>'
        ),
        {
            "price": "1299.00",
            "currency": "EUR",
            "sku": "K-9",
            "availability": "InStock",
            "source": "microdata",
            "name": "Kettle",
        },
        id="schema.org-microdata-with-related-product",
    ),
    pytest.param(
        page(
            body='<div itemscope itemtype="http://schema.org/Offer">'
            '<span itemprop="price">24,90 €</span>'
            '<meta itemprop="priceCurrency" content="EUR"></div><h1>Kettle</h1>'
        ),
        {"price": "24.90", "currency": "EUR", "source": "microdata"},
        id="offer-scope-only",
    ),
    pytest.param(
        page(
            body='<h1>Kettle</h1><meta itemprop="price" content="15.00">'
            '<meta itemprop="priceCurrency" content="GBP">'
        ),
        {"price": "15.00", "currency": "GBP", "source": "microdata"},
        id="loose-itemprop-meta-without-scope",
    ),
    pytest.param(
        page(
            body='<div vocab="https://schema.org/" typeof="Product"><h1 property="name">K</h1>'
            '<div property="offers" typeof="Offer">'
            '<span property="price" content="42.00">42 €</span>'
            '<meta property="priceCurrency" content="EUR"></div></div>'
        ),
        {"price": "42.00", "currency": "EUR", "source": "microdata"},
        id="rdfa-lite-property-price",
    ),
]

OPENGRAPH_CASES = [
    pytest.param(
        page(
            '<meta property="og:title" content="Kettle">'
            '<meta property="product:price:amount" content="89.50">'
            '<meta property="product:price:currency" content="PLN">'
            '<meta property="product:availability" content="in stock">'
            '<meta property="product:retailer_item_id" content="K-1">'
        ),
        {
            "price": "89.50",
            "currency": "PLN",
            "availability": "InStock",
            "sku": "K-1",
            "source": "opengraph",
            "name": "Kettle",
        },
        id="opengraph-product-namespace",
    ),
    pytest.param(
        page(
            '<meta property="og:price:amount" content="12.00">'
            '<meta property="og:price:currency" content="CAD">'
            '<meta property="og:availability" content="oos">'
        ),
        {"price": "12.00", "currency": "CAD", "availability": "OutOfStock"},
        id="og-price",
    ),
    pytest.param(
        page(
            '<meta property="product:price:amount" content="30.00">'
            '<meta property="product:price:currency" content="EUR">'
            '<meta property="product:sale_price:amount" content="25.00">'
            '<meta property="product:sale_price:currency" content="EUR">'
        ),
        {"price": "25.00", "currency": "EUR"},
        id="facebook-catalog-sale-price",
    ),
]


def check(offer: Offer | None, expected: dict[str, object]) -> None:
    assert offer is not None
    for key, value in expected.items():
        got = getattr(offer, key)
        if isinstance(got, Decimal):
            assert got == Decimal(str(value)), key
        else:
            assert got == value, key


@pytest.mark.parametrize(("html", "expected"), JSONLD_CASES)
def test_jsonld(html: str, expected: dict[str, object]) -> None:
    offer = extract_offer(html, URL)
    check(offer, expected)
    if expected.get("price"):
        assert offer is not None and offer.source == "jsonld"


@pytest.mark.parametrize(("html", "expected"), MICRODATA_CASES)
def test_microdata_and_rdfa(html: str, expected: dict[str, object]) -> None:
    check(extract_offer(html, URL), expected)


@pytest.mark.parametrize(("html", "expected"), OPENGRAPH_CASES)
def test_opengraph(html: str, expected: dict[str, object]) -> None:
    check(extract_offer(html, URL), expected)


def test_jsonld_beats_microdata_and_fills_gaps() -> None:
    html = page(
        ld({"@type": "Product", "name": "K", "offers": {"price": "10.00", "priceCurrency": "EUR"}}),
        '<div itemscope itemtype="https://schema.org/Product"><meta itemprop="sku" content="S1">'
        '<meta itemprop="price" content="10.00"></div><p>10,00 €</p>',
    )
    offer = extract_offer(html, URL)
    assert offer is not None
    assert (offer.price, offer.source, offer.sku) == (Decimal("10.00"), "jsonld", "S1")


def test_prices_are_decimal_and_json_keeps_strings() -> None:
    offer = extract_offer(page(ld(PRODUCT)), URL)
    assert offer is not None and isinstance(offer.price, Decimal)
    data = offer.to_json()
    assert data["price"] == "19.99" and json.loads(json.dumps(data))["price"] == "19.99"


def test_nothing_useful_is_none() -> None:
    assert extract_offer("<html><body><p>Hello</p></body></html>", URL) is None
    assert extract_offer(b"", URL) is None


@pytest.mark.parametrize(
    ("encoding", "declared", "price_text", "url", "price", "currency"),
    [
        pytest.param(
            "cp1252",
            '<meta charset="windows-1252">',
            "12,50 €",
            "https://shop.example.de/p",
            "12.50",
            "EUR",
            id="windows-1252-declared",
        ),
        pytest.param(
            "shift_jis",
            '<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">',
            "¥1,280",
            "https://shop.example.jp/p",
            "1280",
            "JPY",
            id="shift-jis-declared",
        ),
        pytest.param(
            "utf-8",
            "",
            "1 299,00 zł",
            "https://sklep.example.pl/p",
            "1299.00",
            "PLN",
            id="utf-8-undeclared",
        ),
        pytest.param(
            "cp1251",
            "",
            "1 299 руб.",
            "https://shop.example.ru/p",
            "1299",
            "RUB",
            id="windows-1251-undeclared",
        ),
    ],
)
def test_page_encodings(
    encoding: str, declared: str, price_text: str, url: str, price: str, currency: str
) -> None:
    html = (
        f"<html><head>{declared}<title>Shop</title></head><body><h1>Produkt Kettle</h1>"
        f"<p class='price'>{price_text}</p></body></html>"
    )
    offer = extract_offer(html.encode(encoding), url)
    assert offer is not None
    assert (offer.price, offer.currency) == (Decimal(price), currency)


def test_absurdly_nested_jsonld_does_not_hide_the_rest() -> None:
    html = page(
        '<script type="application/ld+json">' + "[" * 100_000 + "]" * 100_000 + "</script>",
        "<h1>Kettle</h1><meta itemprop='price' content='5.00'>"
        "<meta itemprop='priceCurrency' content='EUR'>",
    )
    offer = extract_offer(html, URL)
    assert offer is not None and offer.price == Decimal("5.00") and offer.source == "microdata"
