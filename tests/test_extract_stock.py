"""Stock state: schema.org and shop spellings, and the evidence that overrules a markup
"OutOfStock", as example tables.

The page shapes come from the availability errors of the product-extraction benchmark
corpus: a fashion shop that marks up every size as its own Product (most sizes sold out,
some in stock), a department store whose single markup offer is the sold-out default size
while its order form, posting the product's SKU, takes orders, a Hebrew shop whose price
box says "the product is not in stock", and a classified-ads site whose status reads
"NOT SOLD". Each rule has cases where it must not fire.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pricewatch.extract import extract_offer
from pricewatch.extract._candidate import normalise_availability

URL = "https://shop.example.com/p/boots-p1002710.html"


@pytest.mark.parametrize(
    ("value", "state"),
    [
        # schema.org ItemAvailability, every value.
        pytest.param("https://schema.org/InStock", "InStock", id="schema-InStock"),
        pytest.param("http://schema.org/OutOfStock", "OutOfStock", id="schema-OutOfStock-http"),
        pytest.param("https://schema.org/SoldOut", "OutOfStock", id="schema-SoldOut"),
        pytest.param("https://schema.org/Discontinued", "OutOfStock", id="schema-Discontinued"),
        pytest.param("https://schema.org/Reserved", "OutOfStock", id="schema-Reserved"),
        pytest.param("https://schema.org/PreOrder", "InStock", id="schema-PreOrder"),
        pytest.param("https://schema.org/PreSale", "InStock", id="schema-PreSale"),
        pytest.param("https://schema.org/BackOrder", "InStock", id="schema-BackOrder"),
        pytest.param("https://schema.org/MadeToOrder", "InStock", id="schema-MadeToOrder"),
        pytest.param(
            "https://schema.org/LimitedAvailability", "InStock", id="schema-LimitedAvailability"
        ),
        pytest.param("https://schema.org/OnlineOnly", "InStock", id="schema-OnlineOnly"),
        pytest.param("https://schema.org/InStoreOnly", "InStock", id="schema-InStoreOnly"),
        # Prefixes and spellings seen in shop markup and feeds.
        pytest.param("schema:InStock", "InStock", id="curie-prefix"),
        pytest.param("https://schema.org/InStock/", "InStock", id="trailing-slash"),
        pytest.param("InStock", "InStock", id="bare-name-john-lewis"),
        pytest.param(" instock ", "InStock", id="lowercase-padded"),
        pytest.param("in stock", "InStock", id="opengraph-in-stock"),
        pytest.param("Out of stock", "OutOfStock", id="words-out-of-stock"),
        pytest.param("out_of_stock", "OutOfStock", id="feed-out_of_stock"),
        pytest.param("Sold-Out", "OutOfStock", id="hyphen-sold-out"),
        pytest.param("Pre-Order", "InStock", id="hyphen-pre-order"),
        pytest.param("oos", "OutOfStock", id="opengraph-oos"),
        pytest.param(True, "InStock", id="boolean-true"),
        pytest.param(False, "OutOfStock", id="boolean-false"),
        pytest.param({"@id": "https://schema.org/SoldOut"}, "OutOfStock", id="node-with-id"),
        # Classified ads: a status, not a stock level.
        pytest.param("NOT SOLD", "InStock", id="classified-not-sold-usedvictoria"),
        pytest.param("SOLD", "OutOfStock", id="classified-sold"),
        # Unknown words are no evidence.
        pytest.param("Status", None, id="unknown-word"),
        pytest.param("sold by Example Ltd", None, id="seller-phrase-not-a-state"),
        pytest.param("", None, id="empty"),
        pytest.param(None, None, id="none"),
    ],
)
def test_normalise_availability(value: object, state: str | None) -> None:
    assert normalise_availability(value) == state


def _ld(data: Any) -> str:
    return f"<script type='application/ld+json'>{json.dumps(data)}</script>"


def _product(name: str, sku: str, state: str, price: str = "69.95", **extra: Any) -> dict[str, Any]:
    return {
        "@context": "http://schema.org/",
        "@type": "Product",
        "name": name,
        "sku": sku,
        "offers": {
            "@type": "Offer",
            "price": price,
            "priceCurrency": "EUR",
            "availability": f"http://schema.org/{state}",
        },
        **extra,
    }


def _page(head: str, body: str = "") -> str:
    return (
        f"<html lang='en'><head>{head}</head><body>"
        f"<h1>Flat boots</h1><p class='price'>69.95 EUR</p>{body}</body></html>"
    )


BOOTS = "Flat boots"


@pytest.mark.parametrize(
    ("data", "state"),
    [
        pytest.param(
            [
                _product(BOOTS, "840-35", "OutOfStock"),
                _product(BOOTS, "840-36", "InStock"),
                _product(BOOTS, "840-37", "OutOfStock"),
            ],
            "InStock",
            id="zara-sizes-as-products-one-in-stock",
        ),
        pytest.param(
            [_product(BOOTS, "840-35", "OutOfStock"), _product(BOOTS.upper(), "840-36", "InStock")],
            "InStock",
            id="sizes-name-case-differs",
        ),
        pytest.param(
            [_product(BOOTS, "840-35", "OutOfStock"), _product(BOOTS, "840-36", "OutOfStock")],
            "OutOfStock",
            id="must-not-fire-every-size-sold-out",
        ),
        pytest.param(
            [_product(BOOTS, "840-35", "OutOfStock"), _product("Leather belt", "77", "InStock")],
            "OutOfStock",
            id="must-not-fire-other-product-in-stock",
        ),
        pytest.param(
            [
                _product(BOOTS, "840-35", "OutOfStock", url=URL),
                _product(BOOTS, "840-36", "InStock"),
            ],
            "OutOfStock",
            id="must-not-fire-url-names-the-sold-out-variant",
        ),
        pytest.param(
            {
                "@graph": [
                    _product(BOOTS, "840-35", "OutOfStock"),
                    {
                        "@type": "ItemList",
                        "itemListElement": [_product(BOOTS, "840-99", "InStock")],
                    },
                ]
            },
            "OutOfStock",
            id="must-not-fire-namesake-in-a-product-list",
        ),
    ],
)
def test_product_in_stock_when_a_sibling_variant_is(data: Any, state: str) -> None:
    offer = extract_offer(_page(_ld(data)), URL)
    assert offer is not None and offer.availability == state


def _sold_out_default_size(sku: str = "238887908") -> str:
    data = {
        "@context": "https://schema.org/",
        "@type": "product",
        "name": "Chelsea Boot",
        "sku": sku,
        "offers": {
            "@type": "Offer",
            "availability": "OutOfStock",
            "priceCurrency": "GBP",
            "price": "136.00",
        },
    }
    return _ld(data)


@pytest.mark.parametrize(
    ("form", "state"),
    [
        pytest.param(
            "<form><input type='text' name='sku' readonly hidden value='238887908'>"
            "<button type='submit'>Add to your basket</button></form>",
            "InStock",
            id="john-lewis-order-form-posts-the-sku",
        ),
        pytest.param(
            "<form action='/cart'><input type='hidden' name='id' value='238887908'>"
            "<input type='submit' value='In den Warenkorb'></form>",
            "InStock",
            id="de-submit-input-posts-the-sku",
        ),
        pytest.param(
            "<form><input type='hidden' name='sku' value='238887908'>"
            "<button type='submit' disabled>Add to your basket</button></form>",
            "OutOfStock",
            id="must-not-fire-button-disabled",
        ),
        pytest.param(
            "<form><input type='hidden' name='sku' value='555001'>"
            "<button type='submit'>Add to basket</button></form>",
            "OutOfStock",
            id="must-not-fire-form-posts-another-product-carousel",
        ),
        pytest.param(
            "<input type='hidden' name='sku' value='238887908'>"
            "<button type='button'>Add to basket</button>",
            "OutOfStock",
            id="must-not-fire-button-outside-any-form",
        ),
        pytest.param(
            "<form style='display: none'><input type='hidden' name='sku' value='238887908'>"
            "<button type='submit'>Add to basket</button></form>",
            "OutOfStock",
            id="must-not-fire-form-hidden",
        ),
        pytest.param(
            "<form><input type='hidden' name='sku' value='238887908'>"
            "<p class='msg'>Out of stock online</p>"
            "<button type='submit'>Add to basket</button></form>",
            "OutOfStock",
            id="must-not-fire-form-says-out-of-stock",
        ),
        pytest.param(
            "<form><input type='hidden' name='sku' value='238887908'>"
            "<button type='submit'>Email me when in stock</button></form>",
            "OutOfStock",
            id="must-not-fire-notify-me-button",
        ),
    ],
)
def test_order_form_for_the_product_overrules_markup_out_of_stock(form: str, state: str) -> None:
    body = f"<html><head>{_sold_out_default_size()}</head><body><h1>Chelsea Boot</h1>"
    body += f"<p class='price'>£136.00</p>{form}</body></html>"
    offer = extract_offer(body, "https://shop.example.co.uk/chelsea-boot/p5095418")
    assert offer is not None and offer.availability == state


@pytest.mark.parametrize(
    ("label", "state"),
    [
        pytest.param("המוצר אינו במלאי", "OutOfStock", id="he-is-not-in-stock-getit"),
        pytest.param("לא במלאי", "OutOfStock", id="he-not-in-stock"),
        pytest.param("אזל מהמלאי", "OutOfStock", id="he-sold-out"),
        pytest.param("במלאי", "InStock", id="he-in-stock-must-stay-in-stock"),
    ],
)
def test_hebrew_stock_labels(label: str, state: str) -> None:
    body = (
        "<html lang='he'><body><h1>עט נובע</h1>"
        f"<p class='price'>₪ 249.00</p><div class='stock availability'>{label}</div>"
        "</body></html>"
    )
    offer = extract_offer(body, "https://shop.example.co.il/Prod/1/")
    assert offer is not None and offer.availability == state


@pytest.mark.parametrize(
    ("buttons", "state"),
    [
        pytest.param(
            "<button disabled>Add to your basket</button><p class='stock'>Sold out</p>",
            "OutOfStock",
            id="en-gb-add-to-your-basket-disabled",
        ),
        pytest.param(
            "<button>Add to your bag</button>", "InStock", id="en-gb-add-to-your-bag-enabled"
        ),
    ],
)
def test_add_to_your_basket_is_a_buy_button(buttons: str, state: str) -> None:
    data = _product("Kettle", "K1", "InStock", price="40.00")
    body = f"<html><head>{_ld(data)}</head><body><h1>Kettle</h1>"
    body += f"<p class='price'>40.00 EUR</p>{buttons}</body></html>"
    offer = extract_offer(body, "https://shop.example.ie/p")
    assert offer is not None and offer.availability == state


@pytest.mark.parametrize(
    ("label", "button", "state"),
    [
        pytest.param(
            "Momentálne nie je možné produkt kúpiť, ale je možné ho rezervovať",
            "<button class='btn-buy' disabled>Do košíka</button>",
            "OutOfStock",
            id="sk-cannot-be-bought-button-disabled",
        ),
        pytest.param(
            "Tento produkt nelze koupit",
            "<button disabled>Do košíku</button>",
            "OutOfStock",
            id="cs-cannot-be-bought",
        ),
        pytest.param(
            "Derzeit nicht bestellbar",
            "<button disabled>In den Warenkorb</button>",
            "OutOfStock",
            id="de-not-orderable",
        ),
        pytest.param(
            "This item cannot be ordered online",
            "<button disabled>Add to cart</button>",
            "OutOfStock",
            id="en-cannot-be-ordered",
        ),
        pytest.param(
            "Momentálne nie je možné produkt kúpiť, ale je možné ho rezervovať",
            "<button class='btn-buy'>Do košíka</button>",
            "InStock",
            id="sk-wording-with-an-enabled-buy-button-stays-in-stock",
        ),
    ],
)
def test_cannot_be_bought_wording_beside_a_disabled_button(
    label: str, button: str, state: str
) -> None:
    # The offer's markup says InStock (a stale template); the product's availability box
    # says it cannot be bought and its buy button is disabled.
    data = _product("Stojan", "S1", "InStock", price="54.50")
    body = f"<html lang='sk'><head>{_ld(data)}</head><body><h1>Stojan</h1>"
    body += f"<p class='price'>54,50 €</p><ul class='availability-box'><li>{label}</li></ul>"
    body += f"{button}</body></html>"
    offer = extract_offer(body, "https://shop.example.sk/stojan")
    assert offer is not None and offer.availability == state
