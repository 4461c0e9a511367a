"""HTML of the sandbox shops: product pages (one markup each), listings, bot walls.

Pages are sized like real shop pages (~20-50 KB: header, mega-menu, description, specs,
reviews, a recommendations carousel with other prices, footer) so that benchmarks
measure something close to production parsing work. Pure functions of the catalogue.
"""

from __future__ import annotations

import json
import random
from html import escape
from typing import Any

from pricewatch.sandbox import _assets, _trust
from pricewatch.sandbox._catalog import (
    IN_STOCK,
    JS_MARKUP,
    Details,
    Product,
    Shop,
)

SCHEMA = "https://schema.org/"
PER_PAGE = 24  # products per listing page

_CATEGORIES = (
    "Kitchen",
    "Home",
    "Tools",
    "Audio",
    "Outdoor",
    "Sports",
    "Computers",
    "Electronics",
    "Furniture",
    "Photo",
    "Garden",
    "Toys",
    "Beauty",
    "Office",
    "Pets",
    "Automotive",
)
_SUBCATEGORIES = (
    "New arrivals",
    "Best sellers",
    "Deals",
    "Accessories",
    "Spare parts",
    "Bundles",
    "Refurbished",
    "Gift ideas",
)


def _ld(data: dict[str, Any]) -> str:
    text = json.dumps(data, ensure_ascii=False, indent=1).replace("</", "<\\/")
    return f'<script type="application/ld+json">{text}</script>'


def _availability_text(product: Product) -> str:
    return "In stock" if product.availability == IN_STOCK else "Out of stock"


def _head_common(shop: Shop, title: str) -> str:
    config = {
        "shop": shop.code,
        "currency": shop.locale.currency,
        "locale": shop.locale.lang,
        "features": {"wishlist": True, "compare": False, "quickview": True},
        "consent": {"analytics": "pending", "marketing": "pending"},
        "experiments": [{"id": f"exp-{i}", "variant": "b" if i % 2 else "a"} for i in range(12)],
    }
    return (
        '<meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} | {escape(shop.name)}</title>"
        '<link rel="stylesheet" href="/static/css/shop.css">'
        '<link rel="icon" href="/static/img/favicon.png">'
        f"<script>window.__SHOP_CONFIG__ = {json.dumps(config)};</script>"
    )


def _header(shop: Shop) -> str:
    menu = []
    for cat in _CATEGORIES:
        subs = "".join(
            f'<li><a href="/c/{cat.lower()}/{sub.lower().replace(" ", "-")}">{sub}</a></li>'
            for sub in _SUBCATEGORIES
        )
        menu.append(
            f'<li class="menu__item"><a class="menu__link" href="/c/{cat.lower()}">{cat}</a>'
            f'<ul class="menu__sub">{subs}</ul></li>'
        )
    return (
        '<header class="site-header"><div class="topbar">Free shipping from 50 · '
        '30-day returns · <a href="/help">Help</a></div>'
        f'<a class="logo" href="/">{escape(shop.name)}</a>'
        '<form class="search" action="/search" method="get"><input name="q" '
        'placeholder="Search products"><button type="submit">Search</button></form>'
        '<a class="account" href="/account">Account</a> <a class="cart" href="/cart">Cart (0)</a>'
        f'<nav class="menu"><ul>{"".join(menu)}</ul></nav></header>'
    )


def _footer(shop: Shop) -> str:
    columns = []
    for title in ("Customer service", "About us", "Legal", "Follow us"):
        links = "".join(
            f'<li><a href="/info/{title.split()[0].lower()}-{i}">{title} link {i}</a></li>'
            for i in range(8)
        )
        columns.append(f'<div class="footer__col"><h4>{title}</h4><ul>{links}</ul></div>')
    return (
        f'<footer class="site-footer">{"".join(columns)}'
        '<form class="newsletter" action="/newsletter" method="post"><input name="email" '
        'type="email" placeholder="Your e-mail"><button>Subscribe</button></form>'
        f'<p class="contact">Questions? Write to support@{shop.code.lower()}.example or call '
        "+49 30 1234 5678.</p>"
        f"<p>&copy; 2026 {escape(shop.name)}. All prices include VAT.</p></footer>"
    )


def _price_box(shop: Shop, product: Product, *, microdata: bool) -> str:
    loc = shop.locale
    if microdata:
        current = (
            f'<span class="price price--current" itemprop="price" '
            f'content="{loc.machine(product.price)}">{loc.display(product.price)}</span>'
            f'<meta itemprop="priceCurrency" content="{loc.currency}">'
        )
    else:
        current = f'<span class="price price--current">{loc.display(product.price)}</span>'
    was = ""
    if product.regular_price is not None:
        tag = product.strike_tag
        was = f' <{tag} class="price price--was">{loc.display(product.regular_price)}</{tag}>'
    return f'<div class="price-box">{current}{was}</div>'


def _card(shop: Shop, product: Product) -> str:
    loc = shop.locale
    was = ""
    if product.regular_price is not None:
        was = f' <s class="card__was">{loc.display(product.regular_price)}</s>'
    return (
        f'<li class="card"><a class="card__link" href="{product.path}">'
        f'<img src="/static/img/thumb-{product.index % 8}.png" alt="" loading="lazy" '
        f'width="160" height="160"><span class="card__name">{escape(product.name)}</span></a>'
        f'<span class="price">{loc.display(product.price)}</span>{was}'
        f'<span class="card__stock">{_availability_text(product)}</span></li>'
    )


def _offer_ld(shop: Shop, product: Product, url: str) -> dict[str, Any]:
    loc = shop.locale
    offer: dict[str, Any] = {
        "@type": "Offer",
        "url": url,
        "price": loc.machine(product.price),
        "priceCurrency": loc.currency,
        "availability": SCHEMA + product.availability,
        "itemCondition": SCHEMA + "NewCondition",
        "seller": {"@type": "Organization", "name": shop.name},
    }
    if product.regular_price is not None:
        offer["priceSpecification"] = [
            {
                "@type": "UnitPriceSpecification",
                "priceType": SCHEMA + "ListPrice",
                "price": loc.machine(product.regular_price),
                "priceCurrency": loc.currency,
            }
        ]
    return offer


def _product_ld(shop: Shop, product: Product, url: str, offers: dict[str, Any]) -> dict[str, Any]:
    details = product.details()
    ratings = [r.rating for r in details.reviews]
    return {
        "@type": "Product",
        "@id": url + "#product",
        "name": product.name,
        "sku": product.sku,
        "gtin13": product.gtin13,
        "image": [shop.url(f"/static/img/{product.sku.lower()}-{i}.png") for i in range(3)],
        "description": details.description[0][:300],
        "brand": {"@type": "Brand", "name": product.brand},
        "category": product.category,
        "aggregateRating": {
            "@type": "AggregateRating",
            "ratingValue": f"{sum(ratings) / len(ratings):.1f}",
            "reviewCount": len(ratings),
        },
        "offers": offers,
    }


def _breadcrumb_ld(shop: Shop, product: Product) -> dict[str, Any]:
    return {
        "@type": "BreadcrumbList",
        "itemListElement": [
            {"@type": "ListItem", "position": 1, "name": "Home", "item": shop.url("/")},
            {
                "@type": "ListItem",
                "position": 2,
                "name": product.category,
                "item": shop.url(f"/c/{product.category.lower()}"),
            },
            {"@type": "ListItem", "position": 3, "name": product.name},
        ],
    }


def _markup_head(shop: Shop, product: Product) -> str:
    """The part of <head> that carries the offer, by markup type."""
    url = shop.url(product.path)
    loc = shop.locale
    org = _ld(
        {
            "@context": "https://schema.org",
            "@type": "Organization",
            "name": shop.name,
            "url": shop.url("/"),
            "logo": shop.url("/static/img/logo.png"),
        }
    )
    og = (
        f'<meta property="og:title" content="{escape(product.name)}">'
        f'<meta property="og:url" content="{url}">'
        f'<meta property="og:image" content="{shop.url("/static/img/thumb-0.png")}">'
        f'<meta property="og:site_name" content="{escape(shop.name)}">'
    )
    markup = product.markup
    if markup == "jsonld":
        data = {"@context": "https://schema.org"} | _product_ld(
            shop, product, url, _offer_ld(shop, product, url)
        )
        crumbs = {"@context": "https://schema.org"} | _breadcrumb_ld(shop, product)
        return og + org + _ld(crumbs) + _ld(data)
    if markup == "jsonld_graph":
        graph = {
            "@context": "https://schema.org",
            "@graph": [
                {"@type": "WebPage", "@id": url, "url": url, "name": product.name},
                _breadcrumb_ld(shop, product),
                _product_ld(shop, product, url, _offer_ld(shop, product, url)),
            ],
        }
        return og + _ld(graph)
    if markup == "jsonld_aggregate":
        offers = {
            "@type": "AggregateOffer",
            "lowPrice": loc.machine(product.price),
            "highPrice": loc.machine(product.high_price),
            "priceCurrency": loc.currency,
            "offerCount": product.offer_count,
            "availability": SCHEMA + product.availability,
        }
        data = {"@context": "https://schema.org"} | _product_ld(shop, product, url, offers)
        return og + org + _ld(data)
    if markup == "opengraph":
        stock = "in stock" if product.availability == IN_STOCK else "out of stock"
        return (
            '<meta property="og:type" content="product">'
            + og
            + f'<meta property="product:price:amount" content="{loc.machine(product.price)}">'
            f'<meta property="product:price:currency" content="{loc.currency}">'
            f'<meta property="product:availability" content="{stock}">'
            f'<meta property="product:retailer_item_id" content="{product.sku}">'
        )
    if markup == "microdata":
        return og + org
    # visible: nothing machine-readable about the offer
    return '<meta property="og:type" content="website">' + og


def _reviews(details: Details) -> str:
    items = "".join(
        f'<li class="review"><span class="review__stars">{"★" * r.rating}{"☆" * (5 - r.rating)}'
        f'</span><h4>{escape(r.title)}</h4><p class="review__author">by {escape(r.author)}</p>'
        f"<p>{escape(r.body)}</p></li>"
        for r in details.reviews
    )
    heading = f"<h2>Reviews ({len(details.reviews)})</h2>"
    return f'<section class="reviews">{heading}<ul>{items}</ul></section>'


def product_page(
    shop: Shop, product: Product, recommendations: str = "plain", min_kb: int = 0
) -> str:
    """An HTML product page carrying the offer in ``product.markup`` (or the trust case's
    own markup, see ``_trust``); ``recommendations`` is the style of its "Customers also
    bought" block (``_trust.RECOMMENDATIONS``). With ``min_kb``, more reviews bring the
    page to about that many KB (heavier pages, the same offer)."""
    if product.markup == JS_MARKUP:
        return js_product_page(shop, product, recommendations=recommendations)
    details = product.details()
    page = _product_page(shop, product, recommendations, details)
    missing = min_kb * 1024 - len(page.encode())
    if missing > 0:
        per_review = max(len(_reviews(details).encode()) // max(len(details.reviews), 1), 200)
        extra = -(-missing // per_review)
        page = _product_page(shop, product, recommendations, product.details(extra))
    return page


def _product_page(shop: Shop, product: Product, recommendations: str, details: Details) -> str:
    microdata = product.markup == "microdata"
    scope = ""
    offer_open = offer_close = ""
    stock_html = f'<p class="availability">{_availability_text(product)}</p>'
    if microdata:
        scope = ' itemscope itemtype="https://schema.org/Product"'
        offer_open = '<div itemprop="offers" itemscope itemtype="https://schema.org/Offer">'
        offer_close = "</div>"
        stock_html = (
            f'<link itemprop="availability" href="{SCHEMA}{product.availability}">'
            f'<p class="availability">{_availability_text(product)}</p>'
        )
    name_attr = ' itemprop="name"' if microdata else ""
    sku_attr = ' itemprop="sku"' if microdata else ""
    gallery = "".join(
        f'<img src="/static/img/{product.sku.lower()}-{i}.png" '
        f'alt="{escape(product.name)} view {i + 1}" width="600" height="600">'
        for i in range(3)
    )
    specs = "".join(f"<tr><th>{k}</th><td>{escape(v)}</td></tr>" for k, v in details.specs)
    description = "".join(f"<p>{escape(p)}</p>" for p in details.description)
    cart_disabled = "" if product.availability == IN_STOCK else " disabled"
    if product.case:
        buy = _trust.case_buybox(shop, product)
        head = _trust.case_head(shop, product, _product_ld)
    else:
        buy = (
            f"{offer_open}{_price_box(shop, product, microdata=microdata)}{stock_html}"
            f"{offer_close}"
            '<p class="vat">incl. VAT, plus shipping</p>'
            f'<form class="add-to-cart" action="/cart/add" method="post"><input type="hidden" '
            f'name="sku" value="{product.sku}"><input name="qty" type="number" value="1">'
            f'<button type="submit"{cart_disabled}>Add to cart</button></form>'
        )
        head = _markup_head(shop, product)
    body = (
        f"{_header(shop)}"
        f'<nav class="breadcrumb"><a href="/">Home</a> › <a href="/c/{product.category.lower()}">'
        f"{product.category}</a> › <span>{escape(product.name)}</span></nav>"
        f'<main class="product"{scope}>'
        f'<div class="gallery">{gallery}</div>'
        f'<div class="buybox"><h1 class="product__title"{name_attr}>{escape(product.name)}</h1>'
        f'<p class="product__sku">Item no. <span{sku_attr}>{product.sku}</span></p>'
        f"{buy}</div>"
        f'<section class="description"><h2>Description</h2>{description}</section>'
        f'<section class="specs"><h2>Specifications</h2><table>{specs}</table></section>'
        f"{_reviews(details)}</main>"
        f"{_trust.recommendations(shop, product, _card, recommendations)}"
        f"{_footer(shop)}"
        '<script src="/static/js/shop.js" defer></script>'
    )
    return (
        f'<!DOCTYPE html><html lang="{shop.locale.lang}"><head>'
        f"{_head_common(shop, product.name)}{head}</head>"
        f"<body>{body}</body></html>"
    )


def listing_page(shop: Shop, page: int) -> str | None:
    """``/products?page=N``: cards linking all products, disallowed too (None past the end)."""
    pages = max(1, -(-len(shop.products) // PER_PAGE))
    if page < 1 or page > pages:
        return None
    chunk = shop.products[(page - 1) * PER_PAGE : page * PER_PAGE]
    nav = []
    if page > 1:
        nav.append(f'<a rel="prev" href="/products?page={page - 1}">Previous</a>')
    nav.extend(
        f'<a href="/products?page={n}"{" aria-current=page" if n == page else ""}>{n}</a>'
        for n in range(1, pages + 1)
    )
    if page < pages:
        nav.append(f'<a rel="next" class="next" href="/products?page={page + 1}">Next</a>')
    return (
        f'<!DOCTYPE html><html lang="{shop.locale.lang}"><head>'
        f"{_head_common(shop, f'All products - page {page}')}</head><body>{_header(shop)}"
        f'<main class="listing"><h1>All products</h1><p>{len(shop.products)} products</p>'
        f'<ul class="grid">{"".join(_card(shop, p) for p in chunk)}</ul>'
        f'<nav class="pagination">{"".join(nav)}</nav></main>{_footer(shop)}</body></html>'
    )


def home_page(shop: Shop) -> str:
    featured = "".join(_card(shop, p) for p in shop.products[:8])
    return (
        f'<!DOCTYPE html><html lang="{shop.locale.lang}"><head>'
        f"{_head_common(shop, 'Home')}</head><body>{_header(shop)}"
        f'<main><h1>Welcome to {escape(shop.name)}</h1><p><a href="/products">All products</a></p>'
        f'<ul class="grid">{featured}</ul></main>{_footer(shop)}</body></html>'
    )


def robots_txt(shop: Shop) -> str:
    return (
        "User-agent: *\n"
        "Disallow: /private/\n"
        "Disallow: /cart\n"
        "Disallow: /account\n"
        "Disallow: /search\n"
        "\n"
        f"Sitemap: {shop.url('/sitemap.xml')}\n"
    )


def sitemap_xml(shop: Shop) -> str:
    urls = "".join(
        f"<url><loc>{shop.url(p.path)}</loc></url>" for p in shop.products if not p.disallowed
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
    )


def challenge_page(rng: random.Random) -> str:
    """A bot wall answered with 200: what a CAPTCHA interstitial looks like to a crawler."""
    ray = "".join(rng.choice("0123456789abcdef") for _ in range(16))
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>Attention Required! | Security check</title>"
        '<meta name="robots" content="noindex, nofollow"></head><body>'
        '<div id="challenge"><h1>Please verify you are human</h1>'
        "<p>Our system has detected unusual traffic from your network. Complete the "
        "check below to continue to the site.</p>"
        '<form id="challenge-form" action="/cdn-cgi/challenge-platform/verify" method="post">'
        '<div class="g-recaptcha" data-sitekey="6LcSandboxKeyNotReal000000000000000000"></div>'
        '<input type="hidden" name="cf_captcha_kind" value="h">'
        '<button type="submit">Verify</button></form>'
        f'<p class="ray">Ray ID: {ray}</p></div></body></html>'
    )


def js_product_page(
    shop: Shop, product: Product, delay_ms: int = 300, recommendations: str = "plain"
) -> str:
    """JS-only product page: an app root with an empty price node, filled by /static/js/app.js."""
    images = "".join(
        f'<img src="/static/img/{product.sku.lower()}-{i}.png" alt="" width="600" height="600">'
        for i in range(4)
    )
    description = "".join(f"<p>{escape(p)}</p>" for p in product.details().description)
    return (
        f'<!DOCTYPE html><html lang="{shop.locale.lang}"><head>'
        f"{_head_common(shop, product.name)}"
        '<link rel="preload" href="/static/fonts/shop.woff2" as="font" type="font/woff2" '
        "crossorigin>"
        '<script src="/vendor/tagmanager/gtm.js" async></script>'
        f"{_js_case_head(shop, product)}"
        f"</head><body>{_header(shop)}"
        f'<div id="app" data-sku="{product.sku}" data-delay="{delay_ms}">'
        f'<div class="gallery">{images}</div>'
        f'<h1 class="product__title">{escape(product.name)}</h1>'
        f"{_trust.js_price_box(product)}"
        '<p class="availability" id="availability"></p>'
        f"{_trust.js_extras(product)}"
        '<div class="spinner" id="loading">Loading price…</div></div>'
        f'<section class="description">{description}</section>'
        f"{_trust.js_recommendations(shop, product, recommendations)}"
        f"{_footer(shop)}"
        '<script src="/static/js/app.js" defer></script></body></html>'
    )


def _js_case_head(shop: Shop, product: Product) -> str:
    return _trust.case_head(shop, product, _product_ld) if product.case else ""


def js_product_page_real(
    shop: Shop, product: Product, delay_ms: int = 300, recommendations: str = "plain"
) -> str:
    """The same app root as :func:`js_product_page`, in a page with the resource weight of a
    real one (see ``_assets``): four stylesheets, three web fonts, sixteen scripts (ten
    first-party bundles, a tag manager that injects three tracking tags, a consent manager,
    a reviews widget), ~35 images (gallery photos and thumbnails, recommendation cards,
    logo, payment icons, badges)."""
    sku = product.sku.lower()
    css = "".join(f'<link rel="stylesheet" href="{path}">' for path, _ in _assets.STYLESHEETS)
    fonts = "".join(
        f'<link rel="preload" href="/cdn/fonts/{name}.woff2" as="font" type="font/woff2" '
        "crossorigin>"
        for name, _ in _assets.FONTS[:2]
    )
    bundles = "".join(
        f'<script src="/cdn/js/{name}.js" defer></script>' for name, _ in _assets.FIRST_PARTY_JS
    )
    gallery = "".join(
        f'<img src="/cdn/img/p/{sku}-{i}.png" alt="{escape(product.name)} view {i + 1}" '
        'width="1000" height="1000">'
        for i in range(_assets.GALLERY_IMAGES)
    )
    thumbs = "".join(
        f'<img src="/cdn/img/p/{sku}-{i}-thumb.png" alt="" width="120" height="120">'
        for i in range(_assets.GALLERY_IMAGES)
    )
    related = [shop.products[i] for i in product.related]
    cards = "".join(
        f'<li class="card"><a class="card__link" href="{r.path}">'
        f'<img src="/cdn/img/p/{r.sku.lower()}-card.png" alt="" width="300" height="300">'
        f'<span class="card__name">{escape(r.name)}</span></a></li>'
        for r in related
    ) + "".join(
        f'<li class="card card--recent"><img src="/cdn/img/p/{sku}-card-{i}.png" alt="" '
        'width="300" height="300"></li>'
        for i in range(_assets.CARD_IMAGES - len(related))
    )
    icons = "".join(
        f'<img class="pay" src="/cdn/img/pay/{name}.png" alt="{name}" width="64" height="40">'
        for name in _assets.PAYMENT_ICONS
    ) + "".join(
        f'<img class="badge" src="/cdn/img/badge/{name}.png" alt="{name}" width="64" height="40">'
        for name in _assets.TRUST_BADGES
    )
    description = "".join(f"<p>{escape(p)}</p>" for p in product.details().description)
    specs = "".join(
        f"<tr><th>{k}</th><td>{escape(v)}</td></tr>" for k, v in product.details().specs
    )
    return (
        f'<!DOCTYPE html><html lang="{shop.locale.lang}"><head>'
        '<meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(product.name)} | {escape(shop.name)}</title>"
        f"{css}{fonts}"
        '<link rel="icon" href="/cdn/img/favicon.png">'
        '<script src="/vendor/consent/cmp.js" async></script>'
        '<script src="/vendor/tagmanager/gtm.js" async></script>'
        f"{bundles}{_js_case_head(shop, product)}"
        f"</head><body>"
        f'<img class="logo-img" src="/cdn/img/logo.png" alt="{escape(shop.name)}" width="240" '
        f'height="80">{_header(shop)}'
        f'<div id="app" data-sku="{product.sku}" data-delay="{delay_ms}">'
        f'<div class="gallery">{gallery}<div class="gallery__thumbs">{thumbs}</div></div>'
        f'<h1 class="product__title">{escape(product.name)}</h1>'
        f"{_trust.js_price_box(product)}"
        '<p class="availability" id="availability"></p>'
        f"{_trust.js_extras(product)}"
        '<div class="spinner" id="loading">Loading price…</div></div>'
        f'<div class="trust"><span class="icon">&#xe001; &#xe002;</span>{icons}</div>'
        f'<section class="description">{description}</section>'
        f'<section class="specs"><table>{specs}</table></section>'
        f'<div id="reviews-widget" data-sku="{product.sku}"></div>'
        '<section class="recommendations"><h2>Customers also bought</h2>'
        f'<ul class="carousel">{cards}</ul></section>'
        f"{_trust.js_recommendations(shop, product, recommendations)}"
        f"{_footer(shop)}"
        '<script src="/vendor/reviews/widget.js" async></script>'
        '<script src="/static/js/app.js" defer></script></body></html>'
    )


def js_listing_page(shop: Shop) -> str:
    """JS-only listing: an empty grid that /static/js/list.js fills from /api/list?cursor=."""
    return (
        f'<!DOCTYPE html><html lang="{shop.locale.lang}"><head>'
        f"{_head_common(shop, 'All products')}"
        '<script src="/vendor/tagmanager/gtm.js" async></script>'
        f"</head><body>{_header(shop)}"
        '<main class="listing"><h1>All products</h1><ul class="grid" id="grid"></ul></main>'
        f"{_footer(shop)}"
        '<div id="sentinel" style="height:1px"></div>'
        '<script src="/static/js/list.js" defer></script></body></html>'
    )
