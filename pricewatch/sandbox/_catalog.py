"""The sandbox catalogue: shops and products generated deterministically from a seed.

Everything here is plain data; rendering lives in ``_pages`` and serving in ``_server``.
The same seed, shop count and product count always give the same catalogue (random
generators are seeded with strings, which Python hashes the same way in every process).
"""

from __future__ import annotations

import ipaddress
import random
from dataclasses import dataclass, field
from decimal import Decimal

from pricewatch.sandbox._locale import BY_CURRENCY, LOCALES, Locale

# How a product page carries its offer. Every HTML shop with 6+ products has each of them.
MARKUPS: tuple[str, ...] = (
    "jsonld",  # <script type="application/ld+json"> Product with an Offer
    "jsonld_graph",  # the Product inside an "@graph" array next to WebPage/BreadcrumbList
    "jsonld_aggregate",  # Product with an AggregateOffer (lowPrice is the price)
    "microdata",  # itemprop price/priceCurrency/availability
    "opengraph",  # <meta property="product:price:amount|currency">
    "visible",  # no markup at all: the visible price, often beside a struck-through list price
)
JS_MARKUP = "js"  # JS-only shop: the price arrives from /api/offer/{sku} after load

IN_STOCK = "InStock"
OUT_OF_STOCK = "OutOfStock"

_SHOP_FIRST = (
    "Nordwind",
    "Blue Heron",
    "Kestrel",
    "Maple",
    "Harbor",
    "Copper",
    "Lumen",
    "Alpen",
    "Sakura",
    "Tidewater",
    "Granite",
    "Vela",
    "Orchard",
    "Brightline",
    "Fjord",
    "Cedar",
)
_SHOP_SECOND = (
    "Markt",
    "Supply",
    "Outfitters",
    "Store",
    "Emporium",
    "Depot",
    "Trading",
    "Goods",
    "Hardware",
    "Electronics",
    "Home",
    "Co.",
)
_BRANDS = (
    "Aurex",
    "Belmont",
    "Corvid",
    "Dunmore",
    "Elara",
    "Fenwick",
    "Garrow",
    "Halden",
    "Ionis",
    "Jarvik",
    "Korsa",
    "Lindqvist",
    "Morrow",
    "Norell",
    "Ostara",
    "Pellman",
)
_ADJECTIVES = (
    "Pro",
    "Compact",
    "Ultra",
    "Classic",
    "Smart",
    "Eco",
    "Max",
    "Lite",
    "Plus",
    "Air",
    "Studio",
    "Travel",
    "Heavy-Duty",
    "Wireless",
    "Digital",
    "Premium",
)
_NOUNS = (
    ("Espresso Machine", "Kitchen"),
    ("Cordless Drill", "Tools"),
    ("Headphones", "Audio"),
    ("Backpack", "Outdoor"),
    ("Desk Lamp", "Home"),
    ("Blender", "Kitchen"),
    ("Running Shoes", "Sports"),
    ("Monitor", "Computers"),
    ("Robot Vacuum", "Home"),
    ("Tent", "Outdoor"),
    ("Smartwatch", "Electronics"),
    ("Air Fryer", "Kitchen"),
    ("Keyboard", "Computers"),
    ("Bluetooth Speaker", "Audio"),
    ("Office Chair", "Furniture"),
    ("Electric Kettle", "Kitchen"),
    ("Camera Lens", "Photo"),
    ("Router", "Computers"),
    ("Sleeping Bag", "Outdoor"),
    ("Toaster", "Kitchen"),
    ("Trail Bike Helmet", "Sports"),
)
_WORDS = (
    "durable design everyday comfort precision engineered lightweight frame premium materials "
    "quick setup reliable performance energy efficient quiet operation easy cleaning compact "
    "storage versatile use intuitive controls long lasting battery tested quality warranty "
    "ergonomic grip modern look sturdy build fast charging smooth finish balanced sound "
    "weather resistant breathable fabric adjustable fit powerful motor stainless steel "
    "recycled packaging certified safe detachable parts low maintenance crisp display"
).split()
_REVIEWERS = (
    "Anna Schmidt",
    "James Carter",
    "Lucía Fernández",
    "Kenji Watanabe",
    "Olivia Brown",
    "Mateus Oliveira",
    "Sophie Müller",
    "Liam O'Connor",
    "Chloé Martin",
    "Noah Fischer",
)


@dataclass(slots=True)
class Review:
    author: str
    rating: int
    title: str
    body: str


@dataclass(frozen=True, slots=True)
class Details:
    description: list[str]
    specs: list[tuple[str, str]]
    reviews: list[Review]


@dataclass(slots=True)
class Product:
    shop: int  # index into the sandbox's shops
    index: int  # position in its shop's catalogue
    sku: str
    name: str
    brand: str
    category: str
    gtin13: str
    path: str  # URL path on the shop's host
    markup: str
    disallowed: bool  # under /private/, which robots.txt disallows
    price: Decimal
    regular_price: Decimal | None
    availability: str
    high_price: Decimal  # AggregateOffer highPrice
    offer_count: int  # AggregateOffer offerCount
    strike_tag: str  # "del" or "s" for the list price beside the price
    text_key: str  # seeds the page text, generated on first render (keeps start-up fast)
    model: str
    related: list[int] = field(default_factory=list)  # indexes of recommended products
    case: str = ""  # a trust case of ``_trust.CASES`` ("" = an ordinary product page)

    def details(self, extra_reviews: int = 0) -> Details:
        """Description, specifications and reviews: filler that makes pages weigh like a shop's;
        ``extra_reviews`` more reviews on top (heavier pages, same offer).

        Generated on each call (not kept: 10,000 products would hold ~100 MB of text);
        pages are cached by the server instead.
        """
        return _details(self, extra_reviews)


@dataclass(slots=True)
class Shop:
    index: int
    name: str
    code: str  # SKU prefix
    host: str  # loopback IP the shop listens on
    locale: Locale
    js: bool  # JS-only shop (prices filled by a script)
    products: list[Product]
    by_path: dict[str, Product] = field(default_factory=dict)
    by_sku: dict[str, Product] = field(default_factory=dict)
    base_url: str = ""  # set once the shop listens

    def index_products(self) -> None:
        self.by_path = {p.path: p for p in self.products}
        self.by_sku = {p.sku: p for p in self.products}

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"


def _gtin13(rng: random.Random) -> str:
    digits = [rng.randrange(10) for _ in range(12)]
    total = sum(d * (3 if i % 2 else 1) for i, d in enumerate(digits))
    return "".join(map(str, digits)) + str((10 - total % 10) % 10)


def random_price(rng: random.Random, locale: Locale) -> Decimal:
    """A shop-like price: mostly ending in .99/.90/.00, a third of them above 1,000."""
    tier = rng.random()
    if tier < 0.35:
        whole = rng.randint(5, 99)
    elif tier < 0.68:
        whole = rng.randint(100, 999)
    else:
        whole = rng.randint(1000, 4999)
    whole *= locale.scale
    if locale.decimals == 0:
        return Decimal(whole - whole % 10 + rng.choice((0, 9, 0, 9, 5)))
    if locale.decimals == 3:  # fils and baisa: shops print all three digits (423.923 KD)
        return locale.quantize(Decimal(whole) + Decimal(rng.randint(1, 999)) / 1000)
    cents = rng.choice((99, 99, 90, 0, 50, rng.randint(1, 98)))
    return locale.quantize(Decimal(whole) + Decimal(cents) / 100)


def list_price_above(rng: random.Random, locale: Locale, price: Decimal) -> Decimal:
    """A regular (list) price 10-45% above ``price``, rounded as shops round it."""
    raised = price * Decimal(100 + rng.randint(10, 45)) / 100
    if locale.decimals == 0:
        value = Decimal(int(raised) // 10 * 10 + 9)
    else:
        value = locale.quantize(Decimal(int(raised)) + Decimal("0.99"))
    return value if value > price else locale.quantize(price + 1)


def _sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(_WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + "."


def _paragraph(rng: random.Random) -> str:
    return " ".join(_sentence(rng, rng.randint(8, 16)) for _ in range(rng.randint(4, 7)))


def _details(product: Product, extra_reviews: int = 0) -> Details:
    prng = random.Random(product.text_key)
    reviews = [
        Review(
            author=prng.choice(_REVIEWERS),
            rating=prng.randint(2, 5),
            title=_sentence(prng, prng.randint(3, 6)).rstrip("."),
            body=_paragraph(prng),
        )
        for _ in range(prng.randint(3, 7))
    ]
    more = random.Random(f"{product.text_key}:more")
    reviews += [
        Review(
            author=more.choice(_REVIEWERS),
            rating=more.randint(1, 5),
            title=_sentence(more, more.randint(3, 6)).rstrip("."),
            body=_paragraph(more),
        )
        for _ in range(extra_reviews)
    ]
    specs = [
        ("Brand", product.brand),
        ("Model", product.model),
        ("Weight", f"{prng.randint(1, 90) / 10} kg"),
        ("Dimensions", " x ".join(str(prng.randint(10, 80)) for _ in range(3)) + " cm"),
        ("Colour", prng.choice(("Black", "White", "Graphite", "Navy", "Sand", "Red"))),
        ("Warranty", f"{prng.choice((1, 2, 3, 5))} years"),
        ("Power", f"{prng.randint(5, 2200)} W"),
        ("Material", prng.choice(("Aluminium", "Steel", "ABS plastic", "Nylon", "Oak"))),
        ("Country of origin", prng.choice(("Germany", "Japan", "Portugal", "Vietnam", "USA"))),
        ("EAN", product.gtin13),
    ]
    description = [_paragraph(prng) for _ in range(prng.randint(3, 5))]
    return Details(description=description, specs=specs, reviews=reviews)


def host_for(host_base: str, index: int) -> str:
    return str(ipaddress.IPv4Address(host_base) + index)


def build_shops(
    seed: int,
    shops: int,
    products: int,
    js_shops: int,
    host_base: str,
    currencies: tuple[str, ...] = (),
) -> list[Shop]:
    """The HTML shops first, then the JS-only shops, on consecutive loopback IPs.

    Shop ``i`` sells in ``currencies[i]`` when given (ISO codes of ``_locale.BY_CURRENCY``),
    else in the ``LOCALES`` rotation."""
    result = []
    for index in range(shops + js_shops):
        locale = (
            BY_CURRENCY[currencies[index]]
            if index < len(currencies)
            else LOCALES[index % len(LOCALES)]
        )
        result.append(
            _build_shop(
                seed,
                index,
                products,
                js=index >= shops,
                host=host_for(host_base, index),
                locale=locale,
            )
        )
    return result


def _build_shop(seed: int, index: int, count: int, *, js: bool, host: str, locale: Locale) -> Shop:
    rng = random.Random(f"pricewatch-sandbox:{seed}:shop:{index}")
    name = f"{rng.choice(_SHOP_FIRST)} {rng.choice(_SHOP_SECOND)}"
    code = f"{''.join(w[0] for w in name.split() if w[0].isalpha()).upper()}{index + 1}"
    offset = rng.randrange(len(MARKUPS))
    disallowed = set(rng.sample(range(count), max(1, count // 16))) if count >= 4 else set()
    out_of_stock = {i for i in range(count) if rng.random() < 0.15}
    with_list_price = {i for i in range(count) if rng.random() < 0.35}
    # Guarantee both states and a list price somewhere, even in small catalogues.
    if count >= 3:
        out_of_stock.add(1)
        with_list_price.add(2)
    items = []
    for i in range(count):
        prng = random.Random(f"pricewatch-sandbox:{seed}:shop:{index}:product:{i}")
        markup = JS_MARKUP if js else MARKUPS[(i + offset) % len(MARKUPS)]
        # Visible-only pages are where a struck-through list price matters most.
        has_list = i in with_list_price or (markup == "visible" and prng.random() < 0.75)
        noun, category = prng.choice(_NOUNS)
        brand = prng.choice(_BRANDS)
        model = f"{prng.choice('ABCDEFGHKLMXZ')}{prng.randint(10, 990)}"
        pname = f"{brand} {prng.choice(_ADJECTIVES)} {noun} {model}"
        sku = f"{code}-{10000 + i * 7 + prng.randint(0, 6)}"
        slug = "-".join(pname.lower().replace("-", " ").split()) + f"-{sku.lower()}"
        is_private = i in disallowed
        path = f"/private/products/{slug}" if is_private else f"/products/{slug}"
        price = random_price(prng, locale)
        regular = list_price_above(prng, locale, price) if has_list else None
        high = list_price_above(prng, locale, regular or price)
        gtin = _gtin13(prng)
        items.append(
            Product(
                shop=index,
                index=i,
                sku=sku,
                name=pname,
                brand=brand,
                category=category,
                gtin13=gtin,
                path=path,
                markup=markup,
                disallowed=is_private,
                price=price,
                regular_price=regular,
                availability=OUT_OF_STOCK if i in out_of_stock else IN_STOCK,
                high_price=high,
                offer_count=prng.randint(2, 6),
                strike_tag=prng.choice(("del", "s")),
                text_key=f"pricewatch-sandbox:{seed}:shop:{index}:text:{i}",
                model=model,
            )
        )
    for p in items:
        prng = random.Random(f"pricewatch-sandbox:{seed}:shop:{index}:related:{p.index}")
        picks = prng.sample(range(count - 1), min(10, count - 1))
        p.related = [j if j < p.index else j + 1 for j in picks]  # never the product itself
    shop = Shop(index=index, name=name, code=code, host=host, locale=locale, js=js, products=items)
    shop.index_products()
    return shop
