"""Prices you can trust (issue 10): example tables of the pages that fooled extraction.

Each table is named after where its cases came from: the issue's measurements on pages the
team had not seen (price on request next to "Customers also bought", exponent amounts,
three-decimal dinars, net/gross pairs, sold-out sizes). Every case failed before the
product-region, structured-authority, minor-unit and product-level-stock rules.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from pricewatch.extract import REASONS, extract_offer, extract_offer_from_json
from pricewatch.extract._money import parse_amount, read_machine

URL = "https://shop.example.com/p/lc-417"


def ld(data: dict[str, Any]) -> str:
    return f"<script type='application/ld+json'>{json.dumps(data)}</script>"


def product(offers: dict[str, Any] | list[dict[str, Any]] | None, **extra: Any) -> str:
    data: dict[str, Any] = {"@context": "https://schema.org", "@type": "Product"}
    data.update(name="Industrial Laser Cutter", sku="LC-417", **extra)
    if offers is not None:
        data["offers"] = offers
    return ld(data)


def offer(price: Any = "1299.00", availability: str = "InStock", **extra: Any) -> dict[str, Any]:
    data = {
        "@type": "Offer",
        "priceCurrency": "EUR",
        "availability": "https://schema.org/" + availability,
    }
    if price is not None:
        data["price"] = price
    data.update(extra)
    return data


RECOMMENDATIONS = {
    "cards": (
        "<section class='recommendations'><h2>Customers also bought</h2><ul>"
        "<li class='card'><a href='/p/1'>Fume extractor</a><span class='price'>349,00 €</span></li>"
        "<li class='card'><a href='/p/2'>Safety goggles</a><span class='price'>19,90 €</span></li>"
        "<li class='card'><a href='/p/3'>Lens kit</a><span class='price'>89,00 €</span></li>"
        "</ul></section>"
    ),
    "microdata": (
        "<div class='also'><h2>You may also like</h2>"
        + "".join(
            f"<div itemscope itemtype='https://schema.org/Product'><a href='/p/{n}' itemprop='url'>"
            f"<span itemprop='name'>Item {n}</span></a><div itemprop='offers' itemscope "
            "itemtype='https://schema.org/Offer'><span itemprop='price' "
            f"content='{n}9.00'>{n}9,00 €</span><meta itemprop='priceCurrency' content='EUR'>"
            "</div></div>"
            for n in (1, 2, 3)
        )
        + "</div>"
    ),
    "unnamed-card-grid": (
        "<div><h2>More from this brand</h2><div class='grid'>"
        + "".join(
            f"<div class='tile'><a href='/p/{n}'>Item {n}</a><b class='price'>{n}9,00 €</b></div>"
            for n in (1, 2, 3, 4)
        )
        + "</div></div>"
    ),
    "jsonld-item-list": ld(
        {
            "@context": "https://schema.org",
            "@type": "ItemList",
            "itemListElement": [
                {
                    "@type": "ListItem",
                    "position": 1,
                    "item": {
                        "@type": "Product",
                        "name": "Fume extractor",
                        "offers": offer("349.00"),
                    },
                }
            ],
        }
    ),
}


def page(head: str, buybox: str, recommendations: str = RECOMMENDATIONS["cards"]) -> str:
    return (
        f"<html lang='de-DE'><head>{head}</head><body><header><a href='/cart'>Cart 0,00 €</a>"
        f"</header><main><h1>Industrial Laser Cutter</h1><div class='buybox'>{buybox}</div>"
        f"</main>{recommendations}<footer>Gift cards from 10,00 €</footer></body></html>"
    )


ON_REQUEST_BOX = (
    "<p class='price-on-request'>Price on request</p><a href='/quote'>Request a quote</a>"
)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        pytest.param(0, "price_not_positive", id="zero"),
        pytest.param("-5.00", "price_not_positive", id="negative"),
        pytest.param("NaN", "price_not_finite", id="nan"),
        pytest.param("Infinity", "price_not_finite", id="infinity"),
        pytest.param("1e400", "price_out_of_range", id="overflow-string"),
        pytest.param("call for price", "price_not_a_number", id="words"),
        pytest.param(None, "price_missing", id="offer-without-price"),
    ],
)
@pytest.mark.parametrize("recs", sorted(RECOMMENDATIONS))
def test_price_on_request_never_takes_a_recommended_price(raw: Any, reason: str, recs: str) -> None:
    # issue 10, measured: 5 of 6 such pages stored the recommended product's price.
    body = page(product(offer(raw)), ON_REQUEST_BOX, RECOMMENDATIONS[recs])
    result = extract_offer(body, URL)
    assert result is not None
    assert result.price is None and result.currency is None
    assert result.no_price_reason == reason
    assert result.no_price_reason in REASONS
    assert result.availability is None  # a refused offer makes no stock claim


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        pytest.param(0, "price_not_positive", id="zero"),
        pytest.param("NaN", "price_not_finite", id="nan"),
        pytest.param({"amount": "call for price"}, "price_not_a_number", id="words-in-object"),
        pytest.param(None, "price_missing", id="null"),
    ],
)
@pytest.mark.parametrize("shape", ["generic", "schema.org"])
def test_product_json_without_a_valid_price_never_takes_a_nested_price(
    raw: Any, reason: str, shape: str
) -> None:
    # A browser page's own product JSON (XHR) says "price on request"; the products it
    # recommends, nested in it, have prices that must not stand in.
    related = [{"sku": "REC-1", "name": "Other kettle", "price": 19.99, "currency": "EUR"}]
    if shape == "generic":
        data: dict[str, Any] = {"sku": "PW-1", "name": "Kettle", "price": raw}
    else:
        data = {
            "@type": "Product",
            "sku": "PW-1",
            "name": "Kettle",
            "offers": {"@type": "Offer", "price": raw, "priceCurrency": "EUR"},
        }
    data["related"] = related
    result = extract_offer_from_json(json.dumps(data), URL)
    assert result is not None
    assert result.price is None and result.currency is None
    assert result.no_price_reason == reason
    assert result.sku == "PW-1"
    assert result.availability is None


def test_overflowing_json_number_is_refused_not_truncated() -> None:
    body = page(
        "<script type='application/ld+json'>"
        '{"@type": "Product", "name": "X", "offers": {"@type": "Offer", "price": 1e400,'
        ' "priceCurrency": "EUR"}}</script>',
        ON_REQUEST_BOX,
    )
    result = extract_offer(body, URL)
    assert result is not None and result.price is None
    assert result.no_price_reason == "price_out_of_range"


@pytest.mark.parametrize("recs", sorted(RECOMMENDATIONS))
def test_visible_price_comes_from_the_product_region(recs: str) -> None:
    body = page(
        "",
        "<span class='price'>1.299,00 €</span><button>In den Warenkorb</button>",
        RECOMMENDATIONS[recs],
    )
    result = extract_offer(body, URL)
    assert result is not None
    assert (result.price, result.currency, result.source) == (Decimal("1299.00"), "EUR", "visible")


def test_a_page_with_only_other_products_prices_has_no_price() -> None:
    body = page("", "<p>Currently not listed.</p>")
    result = extract_offer(body, URL)
    assert result is None or result.price is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param("1e-2", "price_exponent", id="issue-10-1e-2-was-1"),
        pytest.param("1.5e2", "price_exponent", id="issue-10-1.5e2-was-1.5"),
        pytest.param("1E+2", "price_exponent", id="issue-10-1E+2-was-1"),
        pytest.param("1e400", "price_out_of_range", id="issue-10-1e400-was-1"),
        pytest.param(Decimal("1E+400"), "price_out_of_range", id="json-number-overflow"),
        pytest.param(float("nan"), "price_not_finite", id="json-nan"),
        pytest.param("", "price_missing", id="empty"),
        pytest.param("0.00", "price_not_positive", id="zero-text"),
    ],
)
def test_structured_amounts_refused_with_a_reason(value: object, reason: str) -> None:
    assert read_machine(value) == (None, reason)


@pytest.mark.parametrize(
    ("text", "amount", "symbol"),
    [
        pytest.param("423.923 KD", "423.923", "KD", id="issue-10-kwd-was-423923"),
        pytest.param("123,456.789 OMR", "123456.789", "OMR", id="issue-10-omr-was-123456789"),
        pytest.param("‏1,234.500 د.ك.‏", "1234.500", "د.ك.", id="ar-KW-cldr"),
        pytest.param("0.001 د.ب.", "0.001", "د.ب.", id="ar-BH-one-fils"),
        pytest.param("TND 12.500", "12.500", "TND", id="tnd-three-decimals"),
        pytest.param("¥1,234", "1234", "¥", id="jpy-no-minor-units"),
        pytest.param("₫1.234", "1234", "₫", id="vnd-no-minor-units"),
        pytest.param("1.234 €", "1234", "€", id="eur-thousands-as-before"),
    ],
)
def test_amounts_follow_the_currency_minor_units(text: str, amount: str, symbol: str) -> None:
    assert parse_amount(text) == (Decimal(amount), symbol)


@pytest.mark.parametrize(
    ("box", "price", "currency"),
    [
        pytest.param("<span class='price'>423.923 KD</span>", "423.923", "KWD", id="kwd-visible"),
        pytest.param(
            "<span class='price'>OMR 123,456.789</span>", "123456.789", "OMR", id="omr-visible"
        ),
    ],
)
def test_three_decimal_shops(box: str, price: str, currency: str) -> None:
    body = f"<html lang='ar'><body><h1>Coffee machine</h1>{box}</body></html>"
    result = extract_offer(body, "https://shop.example.com/p")
    assert result is not None and (result.price, result.currency) == (Decimal(price), currency)


def test_kwd_structured_price_keeps_its_three_decimals() -> None:
    data = offer("423.923")
    data["priceCurrency"] = "KWD"
    body = page(product(data), "<span class='price'>423.923 KD</span>", "")
    result = extract_offer(body, "https://shop.example.com.kw/p")
    assert result is not None and (result.price, result.currency) == (Decimal("423.923"), "KWD")


@pytest.mark.parametrize(
    ("box", "lang", "price", "currency"),
    [
        pytest.param(
            "<span class='now'>KD 18.500</span>", "en", "18.500", "KWD", id="kd-plain-span"
        ),
        pytest.param("<span class='price'>RO 0.450</span>", "en", "0.450", "OMR", id="ro-was-450"),
        pytest.param("<b class='price'>JD 9.750</b>", "ar-JO", "9.750", "JOD", id="jd-was-9750"),
        pytest.param("<span class='price'>KWD 2,400</span>", "en", None, None, id="kwd-comma-en"),
    ],
)
def test_three_decimal_abbreviations(
    box: str, lang: str, price: str | None, currency: str | None
) -> None:
    body = f"<html lang='{lang}'><body><h1>Coffee machine</h1>{box}<button>Add to cart</button>"
    result = extract_offer(body + "</body></html>", "https://shop.example.com/p")
    expected = Decimal(price) if price is not None else None
    assert result is not None and (result.price, result.currency) == (expected, currency)


# Markup price strings with one separator before three digits: the currency's minor units
# decide ("59.990" CLP is 59990), else the page's own text (a "1.099" EUR is 1099 where the
# page shows 1.099,00 €, and no price where it shows neither reading).
GROUPED_MARKUP = [
    pytest.param(
        product(offer("149.990", priceCurrency="CLP")),
        "<span class='price'>$149.990</span>",
        "https://tienda.example.cl/p/lc-417",
        ("149990", None),
        id="clp-jsonld-string-was-149.99",
    ),
    pytest.param(
        "",
        "<div itemscope itemtype='https://schema.org/Product'><h2 itemprop='name'>Cutter</h2>"
        "<div itemprop='offers' itemscope itemtype='https://schema.org/Offer'>"
        "<span itemprop='price'>7.490</span> kr.<meta itemprop='priceCurrency' content='ISK'>"
        "</div></div>",
        "https://verslun.example.is/p/lc-417",
        ("7490", None),
        id="isk-microdata-text-was-7.49",
    ),
    pytest.param(
        product(offer("2.349")),
        "<span class='price'>2.349,00 €</span>",
        URL,
        ("2349", None),
        id="eur-jsonld-german-grouping-shown-on-page",
    ),
    pytest.param(
        "",
        "<div itemscope itemtype='https://schema.org/Product'><h2 itemprop='name'>Cutter</h2>"
        "<div itemprop='offers' itemscope itemtype='https://schema.org/Offer'>"
        "<p class='amount'><span itemprop='price'>3.499</span>,– €</p>"
        "<meta itemprop='priceCurrency' content='EUR'></div></div>",
        URL,
        ("3499", None),
        id="eur-microdata-text-before-dash-cents",
    ),
    pytest.param(
        product(offer("2.349")),
        "<p>Ask our sales team.</p>",
        URL,
        (None, "price_ambiguous"),
        id="eur-jsonld-neither-reading-shown",
    ),
    pytest.param(
        product(offer("12,750", priceCurrency="KWD")),
        "<span class='price'>12.750 KD</span>",
        "https://shop.example.com.kw/p/lc-417",
        ("12.750", None),
        id="kwd-jsonld-comma-string-was-12750",
    ),
]


# Markup and page a power of ten apart, the markup price shown nowhere on the page.
SCALE = [
    pytest.param(
        product(offer(34900)),
        "<span class='price'>349,00 €</span>",
        URL,
        ("349.00", None),
        id="eur-markup-in-cents-takes-the-page",
    ),
    pytest.param(
        product(offer(12750, priceCurrency="KWD")),
        "<span class='price'>12.750 KD</span>",
        "https://shop.example.com.kw/p/lc-417",
        ("12.750", None),
        id="kwd-markup-in-fils-takes-the-page",
    ),
    pytest.param(
        product(offer(3490)),
        "<span class='price'>349,00 €</span>",
        URL,
        (None, "price_scale"),
        id="eur-x10-is-no-minor-unit-refused",
    ),
    pytest.param(
        product(offer("3.49")),
        "<span class='price'>349,00 €</span>",
        URL,
        (None, "price_scale"),
        id="eur-markup-a-hundredth-refused",
    ),
    pytest.param(
        product(offer(129800, priceCurrency="JPY")),
        "<span class='price'>1,298 JPY</span>",
        "https://shop.example.jp/p/lc-417",
        (None, "price_scale"),
        id="jpy-has-no-minor-units-refused",
    ),
]


@pytest.mark.parametrize(("head", "box", "url", "expected"), GROUPED_MARKUP + SCALE)
def test_markup_amounts_follow_minor_units_and_the_page(
    head: str, box: str, url: str, expected: tuple[str | None, str | None]
) -> None:
    # Grouped markup strings ("59.990" CLP) and markup a power of ten off the page.
    price, reason = expected
    result = extract_offer(page(head, box + "<button>Add to cart</button>", ""), url)
    assert result is not None
    assert result.price == (Decimal(price) if price is not None else None)
    assert result.no_price_reason == reason
    if reason is not None:
        assert reason in REASONS and result.availability is None


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("ab 1.199,00", id="de-ab"),
        pytest.param("from 49.99", id="en-from"),
        pytest.param("à partir de 89,90", id="fr-a-partir-de"),
        pytest.param("desde 120,00", id="es-desde"),
        pytest.param("vanaf 15,95", id="nl-vanaf"),
    ],
)
def test_from_price_in_markup_is_not_the_price(raw: str) -> None:
    assert read_machine(raw) == (None, "price_from")
    body = page(product(offer(raw)), f"<span class='price'>{raw} €</span>", "")
    result = extract_offer(body, URL)
    assert result is not None and result.price is None
    assert result.no_price_reason == "price_from"


NET_GROSS = [
    pytest.param(
        "<div><span class='price price--net'>1.000,00 €</span> <span>excl. VAT</span></div>"
        "<div><span class='price price--gross'>1.190,00 €</span> <span>incl. 19% VAT</span></div>",
        ("1000.00", "net", "1190.00"),
        id="net-first-labels-after",
    ),
    pytest.param(
        "<div><span class='price'>1.190,00 €</span> <small>inkl. MwSt.</small></div>"
        "<div class='price-net'>(<span class='price'>1.000,00 €</span> zzgl. MwSt.)</div>",
        ("1190.00", "gross", "1000.00"),
        id="gross-first-de",
    ),
    pytest.param(
        "<span class='price'>40.00€</span><span class='price-tax small'>Brez DDV: 32.79€</span>",
        ("40.00", "gross", "32.79"),
        id="sl-net-beside-a-plain-price",
    ),
    pytest.param(
        "<p>Prix HT <span class='price'>100,00 €</span></p>"
        "<p>Prix TTC <span class='price'>120,00 €</span></p>",
        ("100.00", "net", "120.00"),
        id="fr-ht-ttc",
    ),
]


@pytest.mark.parametrize(("box", "expected"), NET_GROSS)
def test_net_and_gross_give_the_first_and_keep_the_other(
    box: str, expected: tuple[str, str, str]
) -> None:
    # issue 10, measured: such pages gave no price at all.
    price, kind, other = expected
    result = extract_offer(page("", box + "<button>Add to cart</button>"), URL)
    assert result is not None
    assert (result.price, result.price_kind, result.other_price) == (
        Decimal(price),
        kind,
        Decimal(other),
    )


@pytest.mark.parametrize(
    "box",
    [
        pytest.param(
            "<span class='rrp-label'>RRP</span> <s class='price price--list'>1.499,00 €</s> "
            "<span class='price price--sale'>1.299,00 €</span>",
            id="list-first-struck",
        ),
        pytest.param(
            "<span class='price-old' style='text-decoration: line-through'>1.499,00 €</span> "
            "<span class='price-now'>1.299,00 €</span><p class='saving'>You save 200,00 €</p>",
            id="list-first-css-strike",
        ),
    ],
)
def test_sale_price_beside_list_price(box: str) -> None:
    result = extract_offer(page("", box + "<button>Add to cart</button>"), URL)
    assert result is not None
    assert (result.price, result.regular_price) == (Decimal("1299.00"), Decimal("1499.00"))


SIZES = (
    "<fieldset class='sizes'><legend>Size</legend><button type='button' class='size'>S</button>"
    "<button type='button' class='size size--unavailable' disabled>M "
    "<span class='size__stock'>Out of stock</span></button></fieldset>"
    "<select name='size'><option>S</option><option disabled>M - sold out</option></select>"
    "<div class='notify-me'>Your size is sold out? <form class='back-in-stock'>"
    "<input name='email' type='email'><button type='submit'>Notify me when available</button>"
    "</form></div>"
)
CART = "<form class='add-to-cart'><input type='hidden' name='sku' value='LC-417'>{button}</form>"


@pytest.mark.parametrize(
    ("head", "box", "state"),
    [
        pytest.param(
            "",
            "<span class='price'>49,00 €</span>"
            + SIZES
            + CART.format(button="<button>Add to cart</button>"),
            "InStock",
            id="sold-out-sizes-visible-only",
        ),
        pytest.param(
            product(offer("49.00")),
            "<span class='price'>49,00 €</span>"
            + SIZES
            + CART.format(button="<button>Add to cart</button>"),
            "InStock",
            id="sold-out-sizes-with-markup",
        ),
        pytest.param(
            product(
                [
                    offer("49.00", "InStock", sku="LC-417-S"),
                    offer("49.00", "OutOfStock", sku="LC-417-M"),
                ]
            ),
            "<span class='price'>49,00 €</span>"
            + SIZES
            + CART.format(button="<button>Add to cart</button>"),
            "InStock",
            id="one-offer-per-size",
        ),
        pytest.param(
            "",
            "<span class='price'>49,00 €</span>"
            + SIZES
            + CART.format(button="<button disabled>Add to cart</button>"),
            "InStock",
            id="cart-disabled-until-a-size-is-chosen",
        ),
        pytest.param(
            "",
            "<span class='price'>49,00 €</span><p class='availability'>In stock</p>"
            + CART.format(button="<button>Add to cart</button>")
            + "<section class='related'><div class='card'><a href='/p/9'>Other</a>"
            "<p class='stock'>Sold out</p><button disabled>Sold out</button></div></section>",
            "InStock",
            id="another-product-sold-out",
        ),
        pytest.param(
            product(offer("49.00", "OutOfStock")),
            "<span class='price'>49,00 €</span>"
            "<p class='availability availability--out'>Sold out</p>"
            + CART.format(button="<button type='submit' disabled>Sold out</button>"),
            "OutOfStock",
            id="sold-out-for-real",
        ),
        pytest.param(
            "",
            "<span class='price'>49,00 €</span>"
            "<p class='availability availability--out'>Sold out</p>"
            "<p class='stock-note'>This item is currently out of stock.</p>"
            + CART.format(button="<button type='submit' disabled>Sold out</button>"),
            "OutOfStock",
            id="sold-out-visible-only",
        ),
    ],
)
def test_stock_from_product_level_evidence(head: str, box: str, state: str) -> None:
    # issue 10, measured: 5 of 74 in-stock products came out OutOfStock.
    result = extract_offer(page(head, box), URL)
    assert result is not None and result.availability == state


def titleless_page(name_block: str) -> str:
    """A page without an <h1>: the name is in <title>; a deal of another product comes
    first in the page, and a block of other products follows."""
    return (
        "<html lang='de-DE'><head><title>Akku-Bohrschrauber X200 | Werkzeughaus</title></head>"
        "<body><div class='topdeal'><a href='/p/9'>Bit-Set</a> nur <b>9,99 €</b></div>"
        "<nav class='breadcrumb'><a href='/'>Start</a> <span>Akku-Bohrschrauber X200</span>"
        f"</nav><div class='product'>{name_block}"
        "<p class='info'>18 V, 2 Akkus</p><div class='pdeal'>Preis: <b>129,00 €</b></div>"
        "<button>In den Warenkorb</button></div>"
        f"{RECOMMENDATIONS['cards']}</body></html>"
    )


def test_page_without_h1_anchors_on_the_element_showing_its_name() -> None:
    body = titleless_page("<div class='title'>Akku-Bohrschrauber X200</div>")
    result = extract_offer(body, URL)
    assert result is not None
    assert (result.price, result.currency, result.source) == (Decimal("129.00"), "EUR", "visible")
    assert result.name == "Akku-Bohrschrauber X200"


def test_a_name_shown_only_in_links_and_breadcrumbs_anchors_nothing() -> None:
    # Without an element of its own showing the name, the page is read whole: two
    # competing prices and no anchor, so no price rather than a guess.
    body = titleless_page("<a class='title' href='/p/1'>Akku-Bohrschrauber X200</a>")
    result = extract_offer(body, URL)
    assert result is None or result.price is None
