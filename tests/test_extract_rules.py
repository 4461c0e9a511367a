"""Per-domain override rules (``PRICEWATCH_EXTRACT_RULES_FILE``) and JSON payloads."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from pricewatch.extract import extract_offer, extract_offer_from_json, load_rules

PAGE = """<html><body>
<script type="application/ld+json">
{"@type": "Product", "name": "Kettle", "offers": {"price": "99.00", "priceCurrency": "EUR"}}
</script>
<h1>Kettle</h1>
<div id="buybox"><span class="now">1.049,00</span> <span class="cur">EUR</span>
<del class="was">1.199,00</del><p class="state">Ausverkauft</p><i data-sku="KT-7"></i></div>
</body></html>"""

RULES_TOML = """
["shop.example.de"]
price_css = "#buybox .now"
regular_price_xpath = "//del[@class='was']/text()"
currency_css = "#buybox .cur"
availability_css = ".state"
sku_xpath = "//i/@data-sku"

["other.example.com"]
price_css = ".p"
currency = "USD"
"""


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(RULES_TOML, encoding="utf-8")
    return path


def test_rule_beats_markup_and_heuristics(rules_file: Path) -> None:
    rules = load_rules(rules_file)
    offer = extract_offer(PAGE, "https://www.shop.example.de/p/1", rules=rules)
    assert offer is not None
    assert offer.source == "rule"
    assert (offer.price, offer.regular_price) == (Decimal("1049.00"), Decimal("1199.00"))
    assert (offer.currency, offer.availability, offer.sku) == ("EUR", "OutOfStock", "KT-7")


def test_rule_for_other_host_is_not_applied(rules_file: Path) -> None:
    offer = extract_offer(PAGE, "https://shop.example.fr/p/1", rules=load_rules(rules_file))
    assert offer is not None and offer.source == "jsonld" and offer.price == Decimal("99.00")


def test_rule_literal_currency(rules_file: Path) -> None:
    html = "<html><body><h1>K</h1><b class='p'>12.50</b></body></html>"
    offer = extract_offer(html, "https://other.example.com/x", rules=load_rules(rules_file))
    assert offer is not None and (offer.price, offer.currency) == (Decimal("12.50"), "USD")


def test_rule_that_finds_nothing_falls_back(rules_file: Path) -> None:
    html = PAGE.replace('id="buybox"', 'id="elsewhere"')
    offer = extract_offer(html, "https://shop.example.de/p", rules=load_rules(rules_file))
    assert offer is not None and offer.source == "jsonld"


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        pytest.param('["a.example"]\nprice_css = "div[["\n', "invalid price_css", id="bad-css"),
        pytest.param(
            '["a.example"]\nprice_xpath = "//div[" \n', "invalid price_xpath", id="bad-xpath"
        ),
        pytest.param(
            '["a.example"]\ncolour_css = ".c"\n', "unknown key 'colour_css'", id="unknown-field"
        ),
        pytest.param('["a.example"]\ncurrency = "EURO"\n', "ISO 4217", id="bad-currency"),
        pytest.param('["a.example"\n', "not valid TOML", id="bad-toml"),
        pytest.param('"a.example" = 3\n', "must be a table", id="not-a-table"),
    ],
)
def test_invalid_rules_name_the_setting(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(toml, encoding="utf-8")
    with pytest.raises(ValueError, match="PRICEWATCH_EXTRACT_RULES_FILE") as info:
        load_rules(path)
    assert message in str(info.value)


def test_missing_rules_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="PRICEWATCH_EXTRACT_RULES_FILE: cannot read"):
        load_rules(tmp_path / "nope.toml")
    assert load_rules("") is None


JSON_CASES = [
    pytest.param(
        {
            "@type": "Product",
            "name": "K",
            "sku": "S",
            "offers": {
                "@type": "Offer",
                "price": "10.00",
                "priceCurrency": "EUR",
                "availability": "https://schema.org/InStock",
            },
        },
        {"price": "10.00", "currency": "EUR", "availability": "InStock", "sku": "S"},
        id="schema.org-shaped-api",
    ),
    pytest.param(
        {
            "data": {
                "product": {
                    "id": 1,
                    "name": "Kettle",
                    "sku": "K-1",
                    "price": {"value": 1299, "currency": "PLN"},
                    "listPrice": {"value": 1499},
                    "inStock": False,
                }
            }
        },
        {
            "price": "1299",
            "currency": "PLN",
            "regular_price": "1499",
            "availability": "OutOfStock",
            "sku": "K-1",
            "name": "Kettle",
        },
        id="graphql-nested-price-object",
    ),
    pytest.param(
        {
            "item": {
                "title": "Kettle",
                "salePrice": "19,99",
                "originalPrice": "24,99",
                "currencyCode": "EUR",
                "availability": "in_stock",
            }
        },
        {"price": "19.99", "regular_price": "24.99", "currency": "EUR", "availability": "InStock"},
        id="rest-sale-and-original",
    ),
    pytest.param(
        {"variants": [{"price": {"centAmount": 4599, "currencyCode": "USD"}}]},
        {"price": "45.99", "currency": "USD"},
        id="commercetools-cent-amount",
    ),
    pytest.param(
        '{"price": 7.5}', {"price": "7.5", "currency": "EUR"}, id="text-payload-currency-from-tld"
    ),
]


@pytest.mark.parametrize(("payload", "expected"), JSON_CASES)
def test_extract_offer_from_json(payload: object, expected: dict[str, str]) -> None:
    offer = extract_offer_from_json(payload, "https://shop.example.de/p", source="api")
    assert offer is not None and offer.source == "api"
    for key, value in expected.items():
        got = getattr(offer, key)
        assert (got == Decimal(value)) if isinstance(got, Decimal) else got == value, key


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"\xff\xfe not json", id="bytes-garbage"),
        pytest.param("[]", id="empty-list"),
        pytest.param({"price": 0}, id="zero-price"),
        pytest.param({"price": "NaN"}, id="nan"),
        pytest.param({"price": -3}, id="negative"),
        pytest.param(None, id="none"),
        pytest.param("[" * 5000 + "]" * 5000, id="deep-nesting"),
    ],
)
def test_json_payload_without_offer(payload: object) -> None:
    assert extract_offer_from_json(payload, "https://shop.example.de/p") is None
