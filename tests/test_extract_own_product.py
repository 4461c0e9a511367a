"""Only the page's own product supplies its price: example tables of pages where another
product's structured reading stood in for it.

The cases came from probing extraction with shop pages none of the corpus has: a JSON-LD
product without offers next to a recommended product in a script of its own, a "deal of the
day" script before the product's, an empty JSON-LD price beside a two-item "bought together"
block in microdata, RDFa add-on cards, an accessory card's microdata on a page whose product
has none. Each "another product" case stored the other product's price before the own-product
rules (``_jsonld.page_products``, ``_markup._anchored``, ``core._chosen``).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from pricewatch.extract import extract_offer

URL = "https://shop.example.com/p/8841"
TITLE = "Aurora Standing Desk 160"


def ld(data: dict[str, Any]) -> str:
    return f"<script type='application/ld+json'>{json.dumps(data)}</script>"


def ld_product(name: str, offers: dict[str, Any] | None = None, **extra: Any) -> str:
    data: dict[str, Any] = {"@context": "https://schema.org", "@type": "Product", "name": name}
    data.update(extra)
    if offers is not None:
        data["offers"] = offers
    return ld(data)


def ld_offer(price: Any, currency: str = "EUR") -> dict[str, Any]:
    return {
        "@type": "Offer",
        "price": price,
        "priceCurrency": currency,
        "availability": "https://schema.org/InStock",
    }


def page(head: str = "", box: str = "", below: str = "", header: str = "") -> bytes:
    """A shop page: ``header`` inside <header>, the product's ``box`` beside its <h1>, and
    ``below`` after the buy box inside the product's <main>."""
    return (
        "<!DOCTYPE html><html lang='en'><head><title>" + TITLE + " | Office Shop</title>"
        f"{head}</head><body><header><a href='/'>Office Shop</a>{header}</header>"
        f"<main class='product'><div class='buybox'><h1>{TITLE}</h1>{box}</div>{below}</main>"
        "<footer>Imprint</footer></body></html>"
    ).encode()


BUY = "<form action='/cart'><button type='submit'>Add to cart</button></form>"
SHOWN = "<p class='price'>1.299,00 €</p>" + BUY
ON_REQUEST = "<p class='price-note'>Price on request</p>"


def bought_together_microdata(prices: tuple[str, ...] = ("79.00", "24.50")) -> str:
    items = "".join(
        f"<div itemscope itemtype='https://schema.org/Product'><span itemprop='name'>Cable "
        f"tray {n}</span><div itemprop='offers' itemscope itemtype='https://schema.org/Offer'>"
        f"<meta itemprop='price' content='{price}'><meta itemprop='priceCurrency' "
        f"content='EUR'><span>{price.replace('.', ',')} €</span></div></div>"
        for n, price in enumerate(prices, 1)
    )
    return f"<div class='fbt'><h3>Often ordered with it</h3>{items}</div>"


ADDON_RDFA = "".join(
    f"<div class='extra' vocab='https://schema.org/' typeof='Product'><span property='name'>"
    f"Monitor arm {n}</span><span property='offers' typeof='Offer'><span property='price' "
    f"content='{price}'>{price} €</span><meta property='priceCurrency' content='EUR'></span>"
    "</div>"
    for n, price in ((1, "34.99"), (2, "24.99"))
)

ACCESSORY_CARD = (
    "<aside class='extra'><div itemscope itemtype='https://schema.org/Product'>"
    "<a href='/p/77' itemprop='url'><span itemprop='name'>Desk mat</span></a>"
    "<div itemprop='offers' itemscope itemtype='https://schema.org/Offer'>"
    "<meta itemprop='price' content='29.90'><meta itemprop='priceCurrency' content='EUR'>"
    "<span>29,90 €</span></div></div></aside>"
)

# What the own product's structured data says, and what the page carries besides it: none of
# these pages gives the product a price of its own, so whatever comes out must not be one of
# the other products' prices.
OTHER_PRODUCTS_ONLY = {
    "ld-without-offers, recommended product in its own script": page(
        head=ld_product(TITLE, sku="AUR-160")
        + ld_product("Monitor light bar", ld_offer("349.00"), sku="ML-2"),
        box=ON_REQUEST,
    ),
    "ld-price-empty, two-item bought-together microdata": page(
        head=ld_product(TITLE, ld_offer(""), sku="AUR-160"),
        box=ON_REQUEST,
        below=bought_together_microdata(),
    ),
    "ld-price-missing, rdfa add-on cards": page(
        head=ld_product(TITLE, {"@type": "Offer", "priceCurrency": "EUR"}, sku="AUR-160"),
        box=ON_REQUEST,
        below=ADDON_RDFA,
    ),
}


@pytest.mark.parametrize("body", list(OTHER_PRODUCTS_ONLY.values()), ids=list(OTHER_PRODUCTS_ONLY))
def test_another_products_structured_price_never_stands_in(body: bytes) -> None:
    offer = extract_offer(body, URL)
    price = offer.price if offer is not None else None
    assert price not in {Decimal(p) for p in ("349.00", "79.00", "24.50", "34.99", "24.99")}
    assert price is None


def test_an_invalid_own_price_is_refused_with_its_reason_beside_other_products() -> None:
    body = OTHER_PRODUCTS_ONLY["ld-price-empty, two-item bought-together microdata"]
    offer = extract_offer(body, URL)
    assert offer is not None and offer.price is None
    assert offer.no_price_reason == "price_missing"


# Pages whose own product does have a price, shown or structured, beside another product's
# structured reading: the own one is read.
OWN_PRICE = {
    "accessory card microdata, product's price shown": (
        page(box=SHOWN, below=ACCESSORY_CARD),
        "1299.00",
    ),
    "accessory script first, the product's named on the h1 with other spacing": (
        page(
            head=ld_product("Desk cable tray", ld_offer("24.99"), sku="DCT-2")
            + ld_product("Aurora standing-desk 160", ld_offer("1299.00"), sku="AUR-160"),
            box=SHOWN,
        ),
        "1299.00",
    ),
    "deal-of-the-day script before the product's": (
        page(
            head=ld_product("Ergonomic chair Basic", ld_offer("99.00"), sku="ECB-1")
            + ld_product(TITLE, ld_offer("1299.00"), sku="AUR-160"),
            header="<div class='deal'>Deal of the day: Ergonomic chair Basic 99,00 €</div>",
            box=SHOWN,
        ),
        "1299.00",
    ),
    "same product written twice, the first without offers": (
        page(
            head=ld_product(TITLE, sku="AUR-160", aggregateRating={"ratingValue": 4.6})
            + ld_product(TITLE, ld_offer("1299.00"), sku="AUR-160"),
            box=SHOWN,
        ),
        "1299.00",
    ),
    "graph product whose offer is a node of its own": (
        page(
            head=ld(
                {
                    "@context": "https://schema.org",
                    "@graph": [
                        {"@type": "Product", "@id": "#p", "name": TITLE, "offers": {"@id": "#o"}},
                        {"@id": "#o", **ld_offer("1299.00")},
                    ],
                }
            ),
            box=SHOWN,
        ),
        "1299.00",
    ),
    "microdata scope around the title": (
        page(
            box="<div itemprop='offers' itemscope itemtype='https://schema.org/Offer'>"
            "<meta itemprop='price' content='1299.00'><meta itemprop='priceCurrency' "
            "content='EUR'><p class='price'>1.299,00 €</p></div>" + BUY,
        ).replace(
            b"<div class='buybox'>",
            b"<div class='buybox' itemscope itemtype='https://schema.org/Product'>",
        ),
        "1299.00",
    ),
    "microdata scope beside the title, named like it": (
        page(
            box="<div itemscope itemtype='https://schema.org/Product'>"
            f"<meta itemprop='name' content='{TITLE}'><div itemprop='offers' itemscope "
            "itemtype='https://schema.org/Offer'><meta itemprop='price' content='1299.00'>"
            "<meta itemprop='priceCurrency' content='EUR'><p>1.299,00 €</p></div></div>" + BUY,
            below=bought_together_microdata(),
        ),
        "1299.00",
    ),
}


@pytest.mark.parametrize(("body", "price"), list(OWN_PRICE.values()), ids=list(OWN_PRICE))
def test_the_own_products_price_is_read_beside_other_products(body: bytes, price: str) -> None:
    offer = extract_offer(body, URL)
    assert offer is not None
    assert (offer.price, offer.currency) == (Decimal(price), "EUR")


# Visible-only pages whose own box withholds the price, with other amounts nearby: a
# recommendation or two (too few to read as a card list), a deposit, an add-on.
TWO_CARDS = (
    "<div class='look'><h3>Complete the look</h3>"
    "<div class='tile'><a href='/p/5'>Desk lamp</a><span class='price'>145,00 €</span></div>"
    "<div class='tile'><a href='/p/6'>Cable box</a><span class='price'>39,00 €</span></div></div>"
)
WITHHELD = {
    "price on request, two recommended tiles": f"<p>Price on request</p>{TWO_CARDS}",
    "preis auf anfrage, two recommended tiles": f"<p>Preis auf Anfrage</p>{TWO_CARDS}",
    "prix sur demande, a deposit": (
        "<p>Prix sur demande</p><p>Acompte de réservation <span class='deposit'>500,00 €</span></p>"
    ),
    "log in to see prices, one tile": (
        "<div class='price-box'><a href='/login'>Log in to see prices</a></div>"
        "<div class='extra'><a href='/p/5'>Desk lamp</a><span class='mini-price'>24,00 €</span>"
        "</div>"
    ),
    "enquire for price, a refundable deposit": (
        "<button class='btn'>Enquire for price</button>"
        "<p>Hold it with a refundable deposit of <b>500,00 €</b></p>"
    ),
    "members only, one pairing tile": (
        "<p>Members only. Join the club to unlock member pricing.</p>"
        "<div class='pairing'><a href='/p/7'>Wine glasses</a><span class='price'>24,00 €</span>"
        "</div>"
    ),
    "price slot in words, one tile": (
        f"<div class='product-price'>Available to registered trade customers</div>{TWO_CARDS}"
    ),
}


@pytest.mark.parametrize("box", list(WITHHELD.values()), ids=list(WITHHELD))
def test_a_withheld_price_is_no_price_whatever_else_the_page_shows(box: str) -> None:
    offer = extract_offer(page(box=box), URL)
    assert offer is None or offer.price is None
    assert offer is not None and offer.no_price_reason == "price_on_request"


def test_a_placeholder_markup_price_the_page_does_not_show_is_withheld_too() -> None:
    # The template's 0.01 in JSON-LD; the buy box says the price is given on application.
    body = page(head=ld_product(TITLE, ld_offer("0.01")), box="<p>Price on application</p>")
    offer = extract_offer(body, URL)
    assert offer is not None and offer.price is None
    assert offer.no_price_reason == "price_on_request"


@pytest.mark.parametrize(
    "head",
    [
        pytest.param("", id="visible-only"),
        pytest.param(ld_product(TITLE, ld_offer("1299.00")), id="jsonld"),
    ],
)
def test_an_option_on_request_beside_a_shown_price_withholds_nothing(head: str) -> None:
    box = f"{SHOWN}<p class='note'>Custom sizes: price on request</p>"
    offer = extract_offer(page(head=head, box=box), URL)
    assert offer is not None and offer.price == Decimal("1299.00")


ADD_ON = (
    "<label><input type='checkbox' name='kit'> Add a cleaning kit "
    "<span class='money'>25,00 €</span></label>"
)


@pytest.mark.parametrize(
    ("box", "price"),
    [
        pytest.param(f"<p>Made to order, ask us for a quote.</p>{ADD_ON}", None, id="add-on-only"),
        pytest.param(
            "<p>Made to order.</p><label><input type='checkbox'> Gift wrap (+ 3,50 €)</label>",
            None,
            id="fee-as-the-label-own-text",
        ),
        pytest.param(f"{SHOWN}{ADD_ON}", "1299.00", id="add-on-beside-the-price"),
        pytest.param(
            f"{SHOWN}<p>Ordering 50 or more? <a href='/quote'>Request a quote</a></p>",
            "1299.00",
            id="bulk-quote-beside-the-price",
        ),
    ],
)
def test_an_add_on_price_is_never_the_products(box: str, price: str | None) -> None:
    offer = extract_offer(page(box=box), URL)
    got = offer.price if offer is not None else None
    assert got == (Decimal(price) if price else None)


# A sold-out choice is not a sold-out product: a size's radio button beside its label, a
# colour chip, one of the product's microdata offers; and the real sell-out still reads.
RADIO_SIZES = (
    "<ul class='choices'>"
    + "".join(
        f"<li><input type='radio' name='s' value='{s}'><label>{s}</label></li>" for s in "SML"
    )
    + "<li><input type='radio' name='s' value='XL' disabled><label>XL</label>"
    "<span class='stock-msg'>Sold out</span></li></ul>"
)
COLOUR_CHIPS = (
    "<div class='colours'><span class='chip'>Green</span>"
    "<span class='chip chip--out'>Orange <em class='stock-flag'>Out of stock</em></span></div>"
)
MICRODATA_SIZES = (
    "<div itemscope itemtype='https://schema.org/Product'>"
    f"<meta itemprop='name' content='{TITLE}'>"
    + "".join(
        f"<div itemprop='offers' itemscope itemtype='https://schema.org/Offer'>"
        f"<meta itemprop='price' content='1299.00'><meta itemprop='priceCurrency' content='EUR'>"
        f"<link itemprop='availability' href='https://schema.org/{state}'></div>"
        for state in ("OutOfStock", "InStock", "InStock")
    )
    + "</div>"
)
DISABLED_UNTIL_CHOSEN = (
    "<form action='/cart'><button type='submit' disabled>Add to cart</button></form>"
    "<p>Please choose a size</p>"
)


@pytest.mark.parametrize(
    ("head", "box", "state"),
    [
        pytest.param(
            ld_product(TITLE, ld_offer("1299.00")),
            "<p class='price'>1.299,00 €</p>" + RADIO_SIZES + DISABLED_UNTIL_CHOSEN,
            "InStock",
            id="size-radio-sold-out-button-disabled-until-chosen",
        ),
        pytest.param("", SHOWN + COLOUR_CHIPS, "InStock", id="colour-chip-out-of-stock"),
        pytest.param(
            "",
            "<p class='price'>1.299,00 €</p>"
            + COLOUR_CHIPS
            + "<a class='button' href='/cart/add?p=8841'>Add to cart</a>",
            "InStock",
            id="colour-chip-out-of-stock-link-to-cart",
        ),
        pytest.param(
            "",
            MICRODATA_SIZES + SHOWN,
            "InStock",
            id="microdata-first-offer-sold-out",
        ),
        pytest.param(
            "",
            MICRODATA_SIZES.replace("InStock", "OutOfStock")
            + "<p class='price'>1.299,00 €</p><p class='stock'>Sold out</p>"
            "<form action='/cart'><button type='submit' disabled>Sold out</button></form>",
            "OutOfStock",
            id="microdata-every-offer-sold-out",
        ),
    ],
)
def test_a_sold_out_choice_is_not_a_sold_out_product(head: str, box: str, state: str) -> None:
    offer = extract_offer(page(head=head, box=box), URL)
    assert offer is not None and offer.price == Decimal("1299.00")
    assert offer.availability == state


@pytest.mark.parametrize(
    "beside",
    [
        pytest.param(
            "<div class='pair'><h4>Pairs well with</h4><div class='it'><a href='/p/4'>Lamp</a>"
            "<div class='pp'><s>1.599,00 €</s> <span>1.299,00 €</span></div></div></div>",
            id="one-tile-same-price",
        ),
        pytest.param(
            "<div class='kombi'><div><a href='/p/5'>Hocker</a> <span class='preis'>"
            "<s>1.499,00 €</s> 1.299,00 €</span></div></div>",
            id="unnamed-tile-struck-inside-the-price",
        ),
    ],
)
def test_a_list_price_comes_from_the_products_box_not_a_tile_at_the_same_price(
    beside: str,
) -> None:
    body = page(head=ld_product(TITLE, ld_offer("1299.00")), box=SHOWN, below=beside)
    offer = extract_offer(body, URL)
    assert offer is not None and offer.price == Decimal("1299.00")
    assert offer.regular_price is None


def test_the_products_own_struck_list_price_is_still_read() -> None:
    box = "<p class='price'><del>1.599,00 €</del> <span>1.299,00 €</span></p>" + BUY
    offer = extract_offer(page(head=ld_product(TITLE, ld_offer("1299.00")), box=box), URL)
    assert offer is not None and offer.price == Decimal("1299.00")
    assert offer.regular_price == Decimal("1599.00")


@pytest.mark.parametrize(
    "logo",
    [
        pytest.param(
            "<h1><a href='/'>Office Shop - Desks and Chairs Since 1998</a></h1>", id="home-link"
        ),
        pytest.param("<h1 class='logo'>Office Shop, Desks and Chairs</h1>", id="named-logo"),
    ],
)
def test_an_h1_that_is_the_shops_logo_anchors_nothing(logo: str) -> None:
    # Old layouts: the logo in the page's only <h1>, a weekly special beside it, the
    # product's name in an <h2> further down.
    body = (
        "<html><head><title>" + TITLE + " | Office Shop</title></head><body>"
        f"<table><tr><td>{logo}<div class='special'>Special of the week: Lamp "
        "<span class='price'>49,00 €</span></div></td></tr>"
        f"<tr><td><h2>{TITLE}</h2><p class='price'>1.299,00 €</p>{BUY}</td></tr></table>"
        "</body></html>"
    ).encode()
    offer = extract_offer(body, URL)
    assert offer is None or offer.price in (None, Decimal("1299.00"))


# Ordinary pages the own-product and withheld-price rules must not cost their price: each
# lost it (or had it read x100, or another variant's) in a draft of those rules or before.
KEEPS_ITS_PRICE: dict[str, tuple[dict[str, str], str]] = {
    "reviews plugin's product first, named like the h1, no offers": (
        {
            "head": ld_product(TITLE, sku="rv-99812", aggregateRating={"ratingValue": 4.8})
            + ld_product(TITLE + " (black)", ld_offer("1299.00"), sku="AUR-160"),
            "box": SHOWN,
        },
        URL,
    ),
    "price box linking the shipping costs, custom sizes on request": (
        {
            "box": "<div class='price-box'><p class='price'>1.299,00 €</p><a href='/versand'>"
            "zzgl. Versandkosten</a></div><ul><li>Sondermaße auf Anfrage</li></ul>" + BUY
        },
        URL,
    ),
    "price-match badge beside the title, the price further out": (
        {
            "box": "<div class='price-match-badge'>Price Match Guarantee</div>",
            "below": "<div class='price-box'><p class='price'>1.299,00 €</p></div>" + BUY,
        },
        URL,
    ),
    "wholesale note and a quote link in the price box": (
        {
            "box": "<div class='b2b-pricing'><p class='price'>1.299,00 €</p><p>Wholesale "
            "pricing available for orders over 50. <a href='/quote'>Request a quote</a></p>"
            "</div>" + BUY
        },
        URL,
    ),
    "woocommerce product block named shipping-taxable": (
        {
            "box": "<div class='product type-product shipping-taxable'><p class='price'>"
            "<span class='woocommerce-Price-amount'>1.299,00 €</span></p>" + BUY + "</div>"
        },
        URL,
    ),
    "cents in a sup inside a price wrapper": (
        {
            "box": "<div class='price-box'><span class='price-wrapper'><span class='price'>"
            "<span class='currency'>€</span>1299<sup>00</sup></span></span></div>" + BUY
        },
        URL,
    ),
    "variant page naming its offer, both prices in the size menu": (
        {
            "head": ld_product(
                TITLE,
                [
                    {**ld_offer(price), "url": f"/p/8841?variant={n}"}
                    for n, price in ((1, "1099.00"), (2, "1299.00"))
                ],
            ),
            "box": "<select><option>Small - 1.099,00 €</option><option selected>Large - "
            "1.299,00 €</option></select>" + BUY,
        },
        URL + "?variant=2",
    ),
}


@pytest.mark.parametrize(
    ("parts", "url"), list(KEEPS_ITS_PRICE.values()), ids=list(KEEPS_ITS_PRICE)
)
def test_ordinary_pages_keep_their_price(parts: dict[str, str], url: str) -> None:
    offer = extract_offer(page(**parts), url)
    assert offer is not None and offer.price == Decimal("1299.00"), offer


# Which variant, which dollar, which amount: a probe of pages with several readings of one
# product found each of these stored wrong.
def _group_ld() -> str:
    variants = [
        {
            "@type": "Product",
            "name": f"{TITLE} {size}",
            "sku": f"AUR-{size}",
            "offers": {**ld_offer(price), "url": f"https://shop.example.com/p/8841?variant={n}"},
        }
        for n, size, price in ((1, "140", "1099.00"), (2, "160", "1299.00"))
    ]
    return ld(
        {
            "@context": "https://schema.org",
            "@type": "ProductGroup",
            "name": TITLE,
            "hasVariant": variants,
        }
    )


READINGS = {
    "product group, the variant named by its offer's url": (
        {"head": _group_ld(), "box": BUY},
        URL + "?variant=2",
        ("1299.00", "EUR"),
    ),
    "the product's script and a bundle named with its title": (
        {
            "head": ld_product(TITLE + " + Monitor Arm Bundle", ld_offer("1499.00"))
            + ld_product(TITLE, ld_offer("1299.00")),
            "box": BUY,
        },
        URL,
        ("1299.00", "EUR"),
    ),
    "the page's price stands in, the markup's currency stays": (
        {
            "head": ld_product(TITLE, {**ld_offer("1399.00", "CAD")}),
            "box": "<p class='price'><del>$1,399.00</del> <span class='sale'>$1,299.00</span></p>"
            + BUY,
        },
        "https://shop.example.com/p/8841",
        ("1299.00", "CAD"),
    ),
    "a code written beside a dollar sign": (
        {"box": "<p class='price'>$1,299.00 NZD</p>" + BUY},
        "https://shop.example.co/p/8841",
        ("1299.00", "NZD"),
    ),
    "a monthly rate shown larger than the price": (
        {
            "box": "<p><span>$1,299.00</span></p><p>or <b style='font-size:2em'>$58</b> /mo "
            "with Affirm</p>" + BUY
        },
        "https://shop.example.com/p/8841",
        ("1299.00", "USD"),
    ),
    "a pre-order deposit in bold": (
        {
            "box": "<p><span>£1,299.00</span></p><p>Reserve yours: "
            "<b style='font-size:2em'>£50</b> deposit today</p>" + BUY
        },
        "https://shop.example.co.uk/p/8841",
        ("1299.00", "GBP"),
    ),
}


@pytest.mark.parametrize(("parts", "url", "expected"), list(READINGS.values()), ids=list(READINGS))
def test_the_pages_own_reading_of_price_and_currency(
    parts: dict[str, str], url: str, expected: tuple[str, str]
) -> None:
    offer = extract_offer(page(**parts), url)
    assert offer is not None
    assert (offer.price, offer.currency) == (Decimal(expected[0]), expected[1])
