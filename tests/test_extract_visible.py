"""Visible-price heuristics, agreement with markup, and stock states, as example tables.

The page shapes are reduced from the shops of the product-extraction benchmark corpus and
from common storefront themes (Shopify "compare at", Magento "old-price/special-price",
WooCommerce ``<del>/<ins>``), in the major shop languages.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from pricewatch.extract import extract_offer

URL = "https://shop.example.com/p/kettle"


def shop(body: str, lang: str = "en") -> str:
    return (
        f"<html lang='{lang}'><head><title>Shop</title></head><body>"
        "<nav class='menu'><a href='/'>Home</a> <span class='price'>$5.00</span></nav>"
        f"<main>{body}</main>"
        "<footer><p>Free shipping over $50.00</p></footer></body></html>"
    )


VISIBLE = [
    pytest.param(
        "<h1>Kettle Deluxe</h1><div class='price-box'><del>$49.99</del>"
        "<span class='price'>$39.99</span></div><button>Add to cart</button>",
        "39.99",
        "49.99",
        id="woocommerce-del-ins",
    ),
    pytest.param(
        "<h1>Kettle Deluxe</h1><div class='price-box'><span class='old-price'>49,99 €</span>"
        "<span class='special-price'>39,99 €</span></div>",
        "39.99",
        "49.99",
        id="magento-old-special",
    ),
    pytest.param(
        "<h1>Kettle Deluxe</h1><p><span class='price'>$30.00</span>"
        "<s class='compare-at'>$45.00</s></p>",
        "30.00",
        "45.00",
        id="shopify-compare-at-after",
    ),
    pytest.param(
        "<h1>Kettle Deluxe</h1><p class='price'>Was $50.00</p><p class='price'>Now $40.00</p>",
        "40.00",
        "50.00",
        id="was-now-text",
    ),
    pytest.param(
        "<h1>Kettle Deluxe</h1><p class='price'><span style='text-decoration: line-through'>"
        "£20.00</span></p><p class='price'>£15.00</p>",
        "15.00",
        "20.00",
        id="inline-line-through",
    ),
    pytest.param(
        "<h1>Kettle Deluxe</h1><div class='product-price'>$1,299.00</div>"
        "<p class='finance'>or $108.25 per month</p><p>Shipping: $4.99</p>"
        "<div class='related-products'><h3>You may also like</h3>"
        "<span class='price'>$19.99</span><span class='price'>$24.99</span></div>",
        "1299.00",
        None,
        id="monthly-shipping-related-excluded",
    ),
    pytest.param(
        "<h1>Wasserkocher</h1><div class='preis'><b>44,99 €</b></div>"
        "<div class='info'><span>Preis inkl. Versand:</span> <strong>49,89 €</strong></div>",
        "44.99",
        None,
        id="de-price-with-shipping-excluded",
    ),
    pytest.param(
        "<h1>Czajnik</h1><div class='cena'><b>199,00 zł</b></div>"
        "<div class='info'><span>Cena z dostawą:</span> <strong>214,99 zł</strong></div>",
        "199.00",
        None,
        id="pl-price-with-delivery-excluded",
    ),
    pytest.param(
        "<h1>Kettle Deluxe</h1><div class='price'>$12<sup>99</sup></div>",
        "12.99",
        None,
        id="superscript-cents",
    ),
    pytest.param(
        "<h1>Wasserkocher</h1><div class='preis'><span class='uvp'>UVP 59,99 €</span> "
        "<strong class='preis-aktuell'>44,99 €</strong></div>",
        "44.99",
        "59.99",
        id="de-uvp",
    ),
    pytest.param(
        "<h1>Bouilloire</h1><p>au lieu de <span class='prix'>59,99 €</span></p>"
        "<p class='prix-actuel'><b>44,99 €</b></p>",
        "44.99",
        None,
        id="fr-au-lieu-de",
    ),
    pytest.param(
        "<h1>UNIFLAME 碗籃組</h1><table><tr><td><del>$3200</del>元</td></tr>"
        "<tr><td><strong>特價</strong> <span style='font:bold 27px Verdana'>2320</span>"
        "<span> 元 </span></td></tr></table>",
        "2320",
        None,
        id="zh-TW-currency-in-next-element",
    ),
]


@pytest.mark.parametrize(("body", "price", "regular"), VISIBLE)
def test_visible_price(body: str, price: str, regular: str | None) -> None:
    offer = extract_offer(shop(body), URL)
    assert offer is not None
    assert offer.source == "visible"
    assert offer.price == Decimal(price)
    expected_regular = Decimal(regular) if regular is not None else None
    if regular is not None:
        assert offer.regular_price == expected_regular


ABSTAIN = [
    pytest.param(
        "<div class='grid'><div class='card'><span class='price'>$10.00"
        "</span></div><div class='card'><span class='price'>$12.00</span></div></div>",
        id="no-title-two-equal-prices-no-winner",
    ),
    pytest.param(
        "<h1>Kettle Deluxe</h1><p>Call us at 0800 123 456 for a quote.</p>", id="no-price"
    ),
    pytest.param("<h1>Kettle Deluxe</h1><p class='price'>from $10.00</p>", id="from-price"),
    pytest.param(
        "<h1>Kettle Deluxe</h1><div class='recommendations'><span class='price'>$10.00</span>"
        "</div>",
        id="only-other-products",
    ),
    pytest.param("<h1>Kettle Deluxe</h1><p class='price'>-5,00 €</p>", id="negative-discount"),
]


@pytest.mark.parametrize("body", ABSTAIN)
def test_visible_abstains_on_weak_evidence(body: str) -> None:
    offer = extract_offer(shop(body), URL)
    assert offer is None or offer.price is None


def ld(price: str) -> str:
    data = {
        "@type": "Product",
        "name": "Kettle",
        "offers": {"@type": "Offer", "price": price, "priceCurrency": "EUR"},
    }
    return f"<script type='application/ld+json'>{json.dumps(data)}</script>"


AGREEMENT = [
    pytest.param(
        ld("39.99") + "<h1>Kettle</h1><span class='price'>39,99 €</span>",
        "39.99",
        "jsonld",
        id="markup-shown-on-page",
    ),
    pytest.param(
        ld("219.99") + "<h1>Kettle</h1><div class='price'><span class='original-price'>"
        "EUR219.99</span> <span class='price current-price' style='font-size: 32px'>"
        "EUR110.00</span></div>",
        "110.00",
        "visible",
        id="markup-gives-list-price-page-shows-sale",
    ),
    pytest.param(
        ld("39.99") + "<h1>Kettle</h1><p>Our bestseller.</p>",
        "39.99",
        "jsonld",
        id="markup-not-contradicted",
    ),
]


@pytest.mark.parametrize(("body", "price", "source"), AGREEMENT)
def test_markup_and_visible_agreement(body: str, price: str, source: str) -> None:
    offer = extract_offer(shop(body), "https://shop.example.de/p")
    assert offer is not None
    assert (offer.price, offer.source) == (Decimal(price), source)


def test_markup_list_price_kept_as_regular() -> None:
    body = (
        ld("219.99") + "<h1>Kettle</h1><div class='price'><del>219,99 €</del> "
        "<span class='price' style='font-size: 32px'>110,00 €</span></div>"
    )
    offer = extract_offer(shop(body), "https://shop.example.de/p")
    assert offer is not None
    assert (offer.price, offer.regular_price) == (Decimal("110.00"), Decimal("219.99"))


STOCK = [
    pytest.param("en", "<p class='stock'>Out of stock</p>", "OutOfStock", id="en-out-of-stock"),
    pytest.param("en", "<p class='availability'>Sold out</p>", "OutOfStock", id="en-sold-out"),
    pytest.param(
        "en",
        "<div id='availability'>Currently unavailable.</div>",
        "OutOfStock",
        id="en-currently-unavailable",
    ),
    pytest.param(
        "de", "<p class='stock'>Derzeit nicht verfügbar</p>", "OutOfStock", id="de-nicht-verfuegbar"
    ),
    pytest.param(
        "de", "<p class='lieferstatus stock'>Ausverkauft</p>", "OutOfStock", id="de-ausverkauft"
    ),
    pytest.param("fr", "<p class='stock'>Épuisé</p>", "OutOfStock", id="fr-epuise"),
    pytest.param(
        "fr",
        "<p class='disponibilite availability'>Rupture de stock</p>",
        "OutOfStock",
        id="fr-rupture",
    ),
    pytest.param(
        "it", "<p class='availability'>Non disponibile</p>", "OutOfStock", id="it-non-disponibile"
    ),
    pytest.param("es", "<p class='stock'>Agotado</p>", "OutOfStock", id="es-agotado"),
    pytest.param("pl", "<p class='availability'>Brak w magazynie</p>", "OutOfStock", id="pl-brak"),
    pytest.param("nl", "<p class='stock'>Uitverkocht</p>", "OutOfStock", id="nl-uitverkocht"),
    pytest.param("ru", "<p class='stock'>Нет в наличии</p>", "OutOfStock", id="ru-net"),
    pytest.param("de", "<p class='stock'>Auf Lager.</p>", "InStock", id="de-auf-lager"),
    pytest.param("en", "<p class='stock'>In stock</p>", "InStock", id="en-in-stock"),
    pytest.param(
        "en",
        "<div class='stock' style='display: none'>Out of stock</div>",
        "InStock",
        id="hidden-template-ignored",
    ),
]


@pytest.mark.parametrize(("lang", "label", "state"), STOCK)
def test_visible_stock_state(lang: str, label: str, state: str) -> None:
    body = f"<h1>Kettle Deluxe</h1><p class='price'>$40.00</p>{label}"
    offer = extract_offer(shop(body, lang), URL)
    assert offer is not None and offer.availability == state


def test_out_of_stock_page_without_price() -> None:
    body = "<h1>Kettle Deluxe</h1><div id='availability'><span>Currently unavailable.</span></div>"
    offer = extract_offer(shop(body), URL)
    assert offer is not None
    assert (offer.price, offer.availability) == (None, "OutOfStock")


def test_sku_from_label_and_cart_form() -> None:
    body = (
        "<h1>Kettle Deluxe</h1><p class='price'>$40.00</p>"
        "<ul><li><strong>SKU:</strong> KT-2000</li></ul>"
    )
    offer = extract_offer(shop(body), URL)
    assert offer is not None and offer.sku == "KT-2000"
    form = (
        "<h1>Kettle Deluxe</h1><p class='price'>$40.00</p><form>"
        "<input type='hidden' name='ASIN' value='B01GOH7PKA'></form>"
    )
    offer = extract_offer(shop(form), URL)
    assert offer is not None and offer.sku == "B01GOH7PKA"


@pytest.mark.parametrize(
    ("buttons", "state"),
    [
        pytest.param(
            "<button disabled>Add to cart</button><p class='stock'>Out of stock</p>",
            "OutOfStock",
            id="only-buy-button-disabled-and-sold-out-wording",
        ),
        pytest.param(
            "<button class='btn disabled'>Do košíka</button><p class='availability'>Vypredané</p>",
            "OutOfStock",
            id="sk-disabled-class-and-wording",
        ),
        # issue 10: a disabled button alone is no product-level evidence (shops disable it
        # until a size is chosen, or until their script has loaded).
        pytest.param(
            "<button disabled>Add to cart</button>", "InStock", id="disabled-without-wording"
        ),
        pytest.param(
            "<button disabled>Add to cart</button><button>Buy now</button>",
            "InStock",
            id="another-buy-button-enabled",
        ),
        pytest.param("<button>In den Warenkorb</button>", "InStock", id="enabled"),
        pytest.param(
            "<button disabled>Subscribe</button>", "InStock", id="disabled-non-buy-button"
        ),
    ],
)
def test_disabled_cart_button_overrides_markup_stock(buttons: str, state: str) -> None:
    data = {
        "@type": "Product",
        "name": "Kettle",
        "offers": {
            "@type": "Offer",
            "price": "40.00",
            "priceCurrency": "EUR",
            "availability": "https://schema.org/InStock",
        },
    }
    body = (
        f"<script type='application/ld+json'>{json.dumps(data)}</script>"
        f"<h1>Kettle</h1><p class='price'>40,00 €</p>{buttons}"
    )
    offer = extract_offer(shop(body), "https://shop.example.de/p")
    assert offer is not None and offer.availability == state


def test_a_price_including_shipping_is_never_the_price() -> None:
    # The product's own price carries no currency sign; the only text with one is the
    # total with shipping (Hebrew "price including shipping"), which must not win.
    body = (
        "<html lang='he'><body><h1>מיטה זוגית</h1><div class='price-new'><span>רק</span>"
        "<span>1,679</span></div><div class='price-tax'><span>מחיר כולל משלוח: </span>"
        "<strong>1,718 ₪</strong></div></body></html>"
    )
    offer = extract_offer(body, "https://shop.example.co.il/Prod/1/")
    assert offer is not None and offer.price == Decimal("1679")
