"""Pages a price monitor must not be fooled by: the trust cases of the sandbox shops.

Two parts, both deterministic from the seed:

Recommendations (``recommendations="mixed"``, the default): every product page carries a
"Customers also bought" carousel with other products' prices, as real shops do, in one of
four styles chosen per product (:data:`REC_STYLES`): plain visible prices (``cards``),
cards that are each a microdata ``Product`` with its own ``Offer`` (``microdata``), a
JSON-LD ``ItemList`` of ``Product``\\s with offers beside plain cards (``jsonld``), and a
swiper carousel plus a "Recently viewed" aside (``recent``). On JS-only shops the carousel
(with prices) is in the static HTML, while the product's own price arrives by XHR.
``plain`` (``--recommendations plain``) gives the pages the sandbox served before:
visible-price cards on HTML shops, no prices on JS-only ones.

Cases (``cases=True``, ``--cases``): :data:`CASES` products appended to every shop's
catalogue (after its ordinary products, which stay as they are):

- ``on_request_*``: "Price on request" pages whose own structured offer carries an invalid
  price (``0``, ``"-5.00"``, ``"NaN"``, ``"Infinity"``, ``"1e400"``, ``"call for price"``)
  or none at all; nothing in the buy box, other products' prices in the recommendations.
  Truth: ``price`` null, ``expect`` ``"no_price"`` and ``no_price_reason``
  (:data:`NO_PRICE_REASONS`: ``price_not_positive``, ``price_not_finite``,
  ``price_out_of_range``, ``price_not_a_number``, ``price_missing``).
- ``net_first`` / ``gross_first``: the price without VAT and the price with VAT side by side;
  truth ``price`` is the one the buy box presents first, ``other_price`` the other
  (``price_kind``/``other_price_kind``: ``net``/``gross``).
- ``sale_list_first`` / ``sale_styled``: a sale price beside the list price, the list price
  first (struck through by ``<s>``, or only by CSS with a "You save" amount next to it).
- ``sizes`` / ``sizes_offers``: a size selector with sold-out sizes and a "notify me"
  widget, the product in stock (the main offer in stock; or one JSON-LD offer per size).
- ``sold_out`` / ``sold_out_visible``: genuinely sold out (schema ``OutOfStock``, a disabled
  buy button and sold-out wording in the buy box; or the wording and button only).
- ``glitch``: fetch number :data:`GLITCH_FETCH` of the page (HTML shops) or of its offer
  JSON (JS-only shops) shows the price ×:data:`GLITCH_FACTOR`; every other fetch the real
  price. Truth ``glitch``: ``{"fetch", "factor", "price", "fetches"}`` (the ×10 price and
  how many times it was fetched so far); ``price`` stays the real one.

Three-decimal currencies (``423.923 KD``) come from the ``currencies`` option
(``_locale.EXTRA_LOCALES``); JPY is the zero-decimal shop.
"""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from html import escape
from typing import Any

from pricewatch.sandbox._catalog import (
    IN_STOCK,
    JS_MARKUP,
    OUT_OF_STOCK,
    Product,
    Shop,
    _gtin13,
    list_price_above,
    random_price,
)
from pricewatch.sandbox._locale import Locale

SCHEMA = "https://schema.org/"
REC_STYLES = ("cards", "microdata", "jsonld", "recent")
RECOMMENDATIONS = ("mixed", "plain")

# The invalid structured price of each price-on-request case (None: no price at all), and
# the reason a careful crawler gives for storing no price (the ``no_price`` reason codes).
ON_REQUEST: dict[str, Any] = {
    "on_request_zero": 0,
    "on_request_negative": "-5.00",
    "on_request_nan": "NaN",
    "on_request_infinity": "Infinity",
    "on_request_overflow": "1e400",
    "on_request_text": "call for price",
    "on_request_missing": None,
}
NO_PRICE_REASONS: dict[str, str] = {
    "on_request_zero": "price_not_positive",
    "on_request_negative": "price_not_positive",
    "on_request_nan": "price_not_finite",
    "on_request_infinity": "price_not_finite",
    "on_request_overflow": "price_out_of_range",
    "on_request_text": "price_not_a_number",
    "on_request_missing": "price_missing",
}
CASES: tuple[str, ...] = (
    *ON_REQUEST,
    "net_first",
    "gross_first",
    "sale_list_first",
    "sale_styled",
    "sizes",
    "sizes_offers",
    "sold_out",
    "sold_out_visible",
    "glitch",
)
# How each case's page carries its offer on an HTML shop.
_CASE_MARKUP = {
    **dict.fromkeys(ON_REQUEST, "jsonld"),
    "net_first": "visible",
    "gross_first": "visible",
    "sale_list_first": "visible",
    "sale_styled": "visible",
    "sizes": "microdata",
    "sizes_offers": "jsonld",
    "sold_out": "jsonld",
    "sold_out_visible": "visible",
    "glitch": "jsonld",
}
GLITCH_FETCH = 2  # the fetch (1-based, per SKU) that shows the glitch
GLITCH_FACTOR = 10
SIZES = ("XS", "S", "M", "L", "XL", "XXL")
# VAT rate by currency for the net/gross pairs (a shop's home rate; 0.1 = 10 %).
_VAT = {"EUR": "0.19", "GBP": "0.20", "CHF": "0.081", "JPY": "0.10", "BRL": "0.17"}
_DEFAULT_VAT = "0.05"
_CASE_NAMES = {
    "on_request": ("Industrial Laser Cutter", "Tools"),
    "net_first": ("Workshop Compressor", "Tools"),
    "gross_first": ("Standing Desk", "Furniture"),
    "sale_list_first": ("Coffee Grinder", "Kitchen"),
    "sale_styled": ("Noise Cancelling Headphones", "Audio"),
    "sizes": ("Rain Jacket", "Outdoor"),
    "sizes_offers": ("Trail Running Shoes", "Sports"),
    "sold_out": ("Gaming Console", "Electronics"),
    "sold_out_visible": ("Limited Edition Sneakers", "Sports"),
    "glitch": ("Stand Mixer", "Kitchen"),
}


def _family(case: str) -> str:
    return "on_request" if case in ON_REQUEST else case


# --- catalogue ------------------------------------------------------------------------------


def add_cases(shops: list[Shop], seed: int) -> None:
    """Append one product per case of :data:`CASES` to every shop's catalogue."""
    for shop in shops:
        ordinary = len(shop.products)
        for number, case in enumerate(CASES):
            shop.products.append(_case_product(seed, shop, ordinary + number, case, ordinary))
        shop.index_products()


def _case_product(seed: int, shop: Shop, index: int, case: str, ordinary: int) -> Product:
    rng = random.Random(f"pricewatch-sandbox:{seed}:shop:{shop.index}:case:{case}")
    loc = shop.locale
    noun, category = _CASE_NAMES[_family(case)]
    brand = rng.choice(("Aurex", "Belmont", "Corvid", "Halden", "Korsa", "Norell"))
    model = f"{rng.choice('ABCDEFGHKLMXZ')}{rng.randint(10, 990)}"
    name = f"{brand} {noun} {model}"
    sku = f"{shop.code}-C{index}"
    slug = "-".join(name.lower().split()) + f"-{sku.lower()}"
    price = random_price(rng, loc)
    regular = list_price_above(rng, loc, price) if case.startswith("sale_") else None
    sold_out = case.startswith("sold_out")
    related = rng.sample(range(ordinary), min(8, ordinary))
    return Product(
        shop=shop.index,
        index=index,
        sku=sku,
        name=name,
        brand=brand,
        category=category,
        gtin13=_gtin13(rng),
        path=f"/products/{slug}",
        markup=JS_MARKUP if shop.js else _CASE_MARKUP[case],
        disallowed=False,
        price=price,
        regular_price=regular,
        availability=OUT_OF_STOCK if sold_out else IN_STOCK,
        high_price=list_price_above(rng, loc, price),
        offer_count=1,
        strike_tag="s",
        text_key=f"pricewatch-sandbox:{seed}:shop:{shop.index}:case-text:{case}",
        model=model,
        related=related,
        case=case,
    )


def vat_rate(loc: Locale) -> Decimal:
    return Decimal(_VAT.get(loc.currency, _DEFAULT_VAT))


def net_gross(loc: Locale, product: Product) -> tuple[Decimal, Decimal]:
    """(net, gross) of a net/gross case: its ``price`` is the one shown first."""
    rate = 1 + vat_rate(loc)
    if product.case == "net_first":
        return product.price, loc.quantize(product.price * rate)
    return loc.quantize(product.price / rate), product.price


def sizes(product: Product) -> list[tuple[str, bool]]:
    """(size, available) of a sizes case: two or three sold out, the rest in stock."""
    rng = random.Random(f"sizes:{product.sku}")
    gone = set(rng.sample(SIZES[1:], rng.randint(2, 3)))
    return [(size, size not in gone) for size in SIZES]


def glitched(product: Product) -> Product:
    """The product as the glitching fetch shows it."""
    return replace(product, price=product.price * GLITCH_FACTOR, regular_price=None)


def truth_fields(loc: Locale, product: Product, fetches: int) -> dict[str, Any]:
    """What ``/_truth`` adds to (or changes in) a case product's record."""
    case = product.case
    out: dict[str, Any] = {"case": case}
    if case in ON_REQUEST:
        raw = ON_REQUEST[case]
        out.update(
            price=None,
            regular_price=None,
            expect="no_price",
            no_price_reason=NO_PRICE_REASONS[case],
            structured_price=raw,
        )
    elif case in ("net_first", "gross_first"):
        net, gross = net_gross(loc, product)
        first_net = case == "net_first"
        out.update(
            price=loc.machine(net if first_net else gross),
            other_price=loc.machine(gross if first_net else net),
            price_kind="net" if first_net else "gross",
            other_price_kind="gross" if first_net else "net",
        )
    elif case.startswith("sizes"):
        out["sizes"] = {size: IN_STOCK if ok else OUT_OF_STOCK for size, ok in sizes(product)}
    elif case == "glitch":
        out["glitch"] = {
            "fetch": GLITCH_FETCH,
            "factor": GLITCH_FACTOR,
            "price": loc.machine(product.price * GLITCH_FACTOR),
            "fetches": fetches,
        }
    return out


# --- recommendations --------------------------------------------------------------------------


def rec_style(product: Product) -> str:
    if product.case:  # every style meets every case page across a few shops
        return REC_STYLES[(CASES.index(product.case) + product.shop) % len(REC_STYLES)]
    return REC_STYLES[zlib.crc32(product.sku.encode()) % len(REC_STYLES)]


def _ld(data: dict[str, Any]) -> str:
    text = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    return f'<script type="application/ld+json">{text}</script>'


def _micro_card(shop: Shop, product: Product, *, image: bool = True) -> str:
    loc = shop.locale
    img = (
        f'<img itemprop="image" src="/static/img/thumb-{product.index % 8}.png" alt="" '
        'loading="lazy" width="160" height="160">'
        if image
        else ""
    )
    return (
        '<li class="card" itemscope itemtype="https://schema.org/Product">'
        f'<a class="card__link" itemprop="url" href="{product.path}">'
        f'{img}<span class="card__name" itemprop="name">'
        f"{escape(product.name)}</span></a>"
        '<div itemprop="offers" itemscope itemtype="https://schema.org/Offer">'
        f'<span class="price" itemprop="price" content="{loc.machine(product.price)}">'
        f"{loc.display(product.price)}</span>"
        f'<meta itemprop="priceCurrency" content="{loc.currency}">'
        f'<link itemprop="availability" href="{SCHEMA}{product.availability}"></div></li>'
    )


def _item_list(shop: Shop, related: list[Product]) -> str:
    loc = shop.locale
    return _ld(
        {
            "@context": "https://schema.org",
            "@type": "ItemList",
            "name": "Customers also bought",
            "itemListElement": [
                {
                    "@type": "ListItem",
                    "position": n,
                    "item": {
                        "@type": "Product",
                        "name": r.name,
                        "sku": r.sku,
                        "url": shop.url(r.path),
                        "offers": {
                            "@type": "Offer",
                            "price": loc.machine(r.price),
                            "priceCurrency": loc.currency,
                            "availability": SCHEMA + r.availability,
                        },
                    },
                }
                for n, r in enumerate(related, 1)
            ],
        }
    )


def _slide(shop: Shop, product: Product) -> str:
    return (
        f'<div class="swiper-slide product-tile"><a href="{product.path}">'
        f"{escape(product.name)}</a>"
        f'<div class="product-tile__price">{shop.locale.display(product.price)}</div></div>'
    )


def recommendations(
    shop: Shop, product: Product, card: Callable[[Shop, Product], str], mode: str
) -> str:
    """The "Customers also bought" block of an HTML product page (outside its <main>)."""
    related = [shop.products[i] for i in product.related]
    style = "cards" if mode == "plain" else rec_style(product)
    if style == "microdata":
        cards = "".join(_micro_card(shop, r) for r in related)
    else:
        cards = "".join(card(shop, r) for r in related)
    block = (
        '<section class="recommendations"><h2>Customers also bought</h2>'
        f'<ul class="carousel">{cards}</ul></section>'
    )
    if style == "jsonld":
        block += _item_list(shop, related)
    elif style == "recent":
        half = len(related) // 2
        block = (
            '<section class="related-products"><h2>You may also like</h2>'
            '<div class="swiper"><div class="swiper-wrapper">'
            f"{''.join(_slide(shop, r) for r in related[:half])}</div></div></section>"
            '<aside class="recently-viewed"><h3>Recently viewed</h3><ul>'
            f"{''.join(card(shop, r) for r in related[half:])}</ul></aside>"
        )
    return block


def js_recommendations(shop: Shop, product: Product, mode: str) -> str:
    """The carousel of a JS-only page, with prices in its static HTML (``mixed``); empty
    with ``plain`` (the page template then shows its own price-less cards, if any)."""
    if mode == "plain":
        return ""
    related = [shop.products[i] for i in product.related][:6]
    style = rec_style(product)
    if style == "microdata":
        cards = "".join(_micro_card(shop, r, image=False) for r in related)
    else:
        cards = "".join(_plain_card(shop, r) for r in related)
    block = (
        '<section class="recommendations" data-widget="also-bought">'
        f'<h2>Customers also bought</h2><ul class="carousel">{cards}</ul></section>'
    )
    if style == "jsonld":
        block += _item_list(shop, related)
    return block


def _plain_card(shop: Shop, product: Product) -> str:
    return (
        f'<li class="card"><a class="card__link" href="{product.path}">'
        f'<span class="card__name">{escape(product.name)}</span></a>'
        f'<span class="price">{shop.locale.display(product.price)}</span></li>'
    )


# --- case pages: structured data and buy box ----------------------------------------------------


def case_head(shop: Shop, product: Product, product_ld: Callable[..., dict[str, Any]]) -> str:
    """The structured data of a case page on an HTML shop ("" when it has none), or the
    static JSON-LD of a JS-only case page. ``product_ld(shop, product, url, offers)`` is the
    page's Product node builder."""
    case = product.case
    loc = shop.locale
    url = shop.url(product.path)
    offer: dict[str, Any] = {
        "@type": "Offer",
        "url": url,
        "priceCurrency": loc.currency,
        "availability": SCHEMA + product.availability,
        "seller": {"@type": "Organization", "name": shop.name},
    }
    if shop.js and case not in ON_REQUEST:
        return ""  # JS-only shops ship structured data only with their price-on-request pages
    if case in ON_REQUEST:
        raw = ON_REQUEST[case]
        if raw is not None:
            offer["price"] = raw
        offers: Any = offer
    elif case == "sizes_offers":
        offers = [
            {
                **offer,
                "sku": f"{product.sku}-{size}",
                "name": f"{product.name} ({size})",
                "price": loc.machine(product.price),
                "availability": SCHEMA + (IN_STOCK if ok else OUT_OF_STOCK),
            }
            for size, ok in sizes(product)
        ]
    elif product.markup == "jsonld":
        offers = {**offer, "price": loc.machine(product.price)}
    else:
        return ""
    data = {"@context": "https://schema.org"} | product_ld(shop, product, url, offers)
    return _ld(data)


def case_buybox(shop: Shop, product: Product) -> str:
    """Price box, stock line and buy controls of a case page on an HTML shop."""
    case = product.case
    loc = shop.locale
    micro = product.markup == "microdata"
    price_attr = f' itemprop="price" content="{loc.machine(product.price)}"' if micro else ""
    currency_meta = f'<meta itemprop="priceCurrency" content="{loc.currency}">' if micro else ""
    cart = _cart(product, enabled=product.availability == IN_STOCK)
    if case in ON_REQUEST:
        return (
            '<div class="price-box price-box--request"><span class="price-on-request">'
            "Price on request</span></div>"
            '<p class="availability">Available to order · lead time 3-5 weeks</p>'
            f'<a class="button button--quote" href="/quote?sku={product.sku}">Request a quote</a>'
        )
    if case in ("net_first", "gross_first"):
        net, gross = net_gross(loc, product)
        rate = f"{vat_rate(loc) * 100:.3g}"
        net_html = (
            f'<span class="price price--net">{loc.display(net)}</span> '
            '<span class="price-label">excl. VAT</span>'
        )
        gross_html = (
            f'<span class="price price--gross">{loc.display(gross)}</span> '
            f'<span class="price-label">incl. {rate}% VAT</span>'
        )
        if case == "net_first":
            box = f'<div class="price-box"><div>{net_html}</div><div>{gross_html}</div></div>'
        else:
            box = (
                f'<div class="price-box"><div>{gross_html}</div>'
                f'<div class="price-box__net">({net_html})</div></div>'
            )
        return box + '<p class="availability">In stock</p>' + cart
    if case == "sale_list_first":
        assert product.regular_price is not None
        off = round((1 - product.price / product.regular_price) * 100)
        box = (
            '<div class="price-box"><span class="rrp-label">RRP</span> '
            f'<s class="price price--list">{loc.display(product.regular_price)}</s> '
            f'<span class="price price--sale">{loc.display(product.price)}</span> '
            f'<span class="badge badge--sale">-{off}%</span></div>'
        )
        return box + '<p class="availability">In stock</p>' + cart
    if case == "sale_styled":
        assert product.regular_price is not None
        saving = product.regular_price - product.price
        box = (
            '<div class="price-box"><span class="price-old" '
            'style="text-decoration: line-through; color: #888">'
            f"{loc.display(product.regular_price)}</span> "
            f'<span class="price-now">{loc.display(product.price)}</span>'
            f'<p class="saving">You save {loc.display(saving)}</p></div>'
        )
        return box + '<p class="availability">In stock</p>' + cart
    box = (
        f'<div class="price-box"><span class="price price--current"{price_attr}>'
        f"{loc.display(product.price)}</span>{currency_meta}</div>"
    )
    if case.startswith("sizes"):
        stock = '<p class="availability">In stock</p>'
        if micro:
            stock = f'<link itemprop="availability" href="{SCHEMA}{IN_STOCK}">' + stock
            box = (
                '<div itemprop="offers" itemscope itemtype="https://schema.org/Offer">'
                f"{box}{stock}</div>"
            )
            stock = ""
        return box + stock + size_selector(product) + cart
    if case.startswith("sold_out"):
        return (
            box + '<p class="availability availability--out">Sold out</p>'
            '<p class="stock-note">This item is currently out of stock.</p>' + _notify() + cart
        )
    return box + '<p class="availability">In stock</p>' + cart  # glitch


def size_selector(product: Product) -> str:
    buttons = "".join(
        f'<button type="button" class="size">{size}</button>'
        if ok
        else f'<button type="button" class="size size--unavailable" disabled>{size} '
        '<span class="size__stock">Out of stock</span></button>'
        for size, ok in sizes(product)
    )
    options = "".join(
        f"<option>{size}</option>" if ok else f"<option disabled>{size} - sold out</option>"
        for size, ok in sizes(product)
    )
    return (
        f'<fieldset class="sizes"><legend>Size</legend>{buttons}</fieldset>'
        f'<select name="size" class="size-select">{options}</select>'
        '<div class="notify-me">Your size is sold out? ' + _notify() + "</div>"
    )


def _notify() -> str:
    return (
        '<form class="back-in-stock" action="/notify" method="post">'
        '<input name="email" type="email" placeholder="Your e-mail">'
        '<button type="submit">Notify me when available</button></form>'
    )


def _cart(product: Product, *, enabled: bool) -> str:
    label = "Add to cart" if enabled else "Sold out"
    disabled = "" if enabled else " disabled"
    return (
        '<form class="add-to-cart" action="/cart/add" method="post"><input type="hidden" '
        f'name="sku" value="{product.sku}"><input name="qty" type="number" value="1">'
        f'<button type="submit"{disabled}>{label}</button></form>'
    )


# --- JS-only shops --------------------------------------------------------------------------


def js_price_box(product: Product) -> str:
    """The empty price nodes of a JS-only page that ``app.js`` fills from the offer JSON."""
    if product.case.startswith("sale_"):  # the list price first
        return (
            '<div class="price-box"><del class="price price--was" id="was"></del> '
            '<span class="price price--current" id="price"></span></div>'
        )
    other = ""
    if product.case in ("net_first", "gross_first"):
        other = '<div class="price-box__other" id="other-price"></div>'
    return (
        '<div class="price-box"><span class="price price--current" id="price"></span>'
        f'<del class="price price--was" id="was"></del>{other}</div>'
    )


def js_extras(product: Product) -> str:
    """What a JS-only case page shows beside its price box in the static HTML."""
    if product.case.startswith("sizes"):
        return size_selector(product)
    return ""


def offer_json(shop: Shop, product: Product, data: dict[str, Any]) -> dict[str, Any]:
    """The offer JSON of a case product (``/api/offer/{sku}``, ``/api/products/{sku}``):
    ``data``, the ordinary one, adjusted."""
    loc = shop.locale
    case = product.case
    display = data.get("display")  # only in the page's own offer JSON
    if case in ON_REQUEST:  # the same invalid amount as the page's JSON-LD, or none
        raw = ON_REQUEST[case]
        data["price"] = None if raw is None else {"amount": raw, "currency": loc.currency}
        data["regular_price"] = None
        data["price_on_request"] = True
        if display is not None:
            display.update(price="Price on request", regular_price=None)
    elif case in ("net_first", "gross_first"):
        net, gross = net_gross(loc, product)
        first, second = (net, gross) if case == "net_first" else (gross, net)
        kind, other_kind = ("net", "gross") if case == "net_first" else ("gross", "net")
        data["price"]["tax"] = kind
        data["other_price"] = {"amount": loc.machine(second), "currency": loc.currency}
        data["other_price"]["tax"] = other_kind
        label = {"net": "excl. VAT", "gross": "incl. VAT"}
        if display is not None:
            display["price"] = f"{loc.display(first)} {label[kind]}"
            display["other_price"] = f"{loc.display(second)} {label[other_kind]}"
    elif case.startswith("sizes"):
        data["variants"] = [
            {"size": size, "availability": IN_STOCK if ok else OUT_OF_STOCK}
            for size, ok in sizes(product)
        ]
    return data
