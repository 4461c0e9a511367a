"""Properties of ``extract_offer``: total on any input, never a bad price."""

from __future__ import annotations

import html
import json
from decimal import Decimal

from babel.numbers import format_currency
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pricewatch.currency import ISO_CODES, minor_units
from pricewatch.extract import Offer, extract_offer, extract_offer_from_json

SOURCES = {"jsonld", "microdata", "opengraph", "rule", "visible", "xhr", "api"}
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SEED_PAGE = (
    "<html lang='de-DE'><head><meta property='product:price:amount' content='12.00'>"
    "<script type='application/ld+json'>"
    + json.dumps(
        {
            "@type": "Product",
            "name": "K",
            "sku": "S1",
            "gtin13": "4006381333931",
            "offers": {
                "@type": "AggregateOffer",
                "lowPrice": "9.99",
                "priceCurrency": "EUR",
                "availability": "InStock",
            },
        }
    )
    + "</script></head><body><h1>Wasserkocher</h1>"
    "<div itemscope itemtype='https://schema.org/Product'><span itemprop='price' "
    "content='9.99'>9,99 €</span></div><div class='price'><del>19,99 €</del>"
    "<b class='price-now'>9,99 €</b></div><p class='stock'>Auf Lager</p>"
    "<button>In den Warenkorb</button></body></html>"
)


def check(offer: Offer | None) -> None:
    if offer is None:
        return
    assert isinstance(offer, Offer)
    for amount in (offer.price, offer.regular_price):
        if amount is not None:
            assert isinstance(amount, Decimal)
            assert amount.is_finite() and amount > 0
    if offer.regular_price is not None:
        assert offer.price is not None and offer.regular_price > offer.price
    assert offer.availability in (None, "InStock", "OutOfStock")
    assert offer.source in SOURCES
    if offer.currency is not None:
        assert len(offer.currency) == 3 and offer.currency.isupper()
    json.dumps(offer.to_json())


@SETTINGS
@given(st.binary(max_size=3000))
def test_arbitrary_bytes_never_raise(body: bytes) -> None:
    check(extract_offer(body, "https://shop.example.com/p"))


@SETTINGS
@given(st.text(max_size=3000))
def test_arbitrary_text_never_raises(body: str) -> None:
    check(extract_offer(body, "https://shop.example.com/p"))


@st.composite
def mangled(draw: st.DrawFn) -> str:
    """The seed page cut, spliced and sprinkled with hostile fragments."""
    page = SEED_PAGE
    for _ in range(draw(st.integers(1, 6))):
        cut = draw(st.integers(0, len(page)))
        op = draw(st.sampled_from(["delete", "insert", "duplicate"]))
        if op == "delete":
            page = page[:cut] + page[cut + draw(st.integers(1, 40)) :]
        elif op == "insert":
            fragment = draw(
                st.sampled_from(
                    [
                        "<",
                        ">",
                        "</div>",
                        "<del>",
                        "<script>",
                        "\x00",
                        "€",
                        "-",
                        "0",
                        "NaN",
                        "Infinity",
                        "1e400",
                        "9" * 40,
                        "٫",
                        "<h1>",
                        "price",
                        "{",
                        '"price": -1,',
                        "<s>",
                        "&nbsp;",
                        "\ud800",
                        "\u202e",
                        "<meta itemprop='price' content='0'>",
                    ]
                )
                | st.text(max_size=20)
            )
            page = page[:cut] + fragment + page[cut:]
        else:
            page = page[:cut] + page[cut : cut + 200] + page[cut:]
    return page


@SETTINGS
@given(mangled(), st.sampled_from(["https://shop.example.de/p", "", "not a url", "http://[::1"]))
def test_mangled_html_never_raises_nor_gives_bad_price(page: str, url: str) -> None:
    check(extract_offer(page, url))
    check(extract_offer(page.encode("utf-8", "surrogatepass"), url))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.sampled_from(
                [
                    "price",
                    "salePrice",
                    "value",
                    "currency",
                    "offers",
                    "@type",
                    "availability",
                    "sku",
                    "name",
                    "listPrice",
                    "amount",
                ]
            )
            | st.text(max_size=8),
            children,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@SETTINGS
@given(json_values)
def test_json_payloads_never_raise(data: object) -> None:
    check(extract_offer_from_json(data, "https://shop.example.com/p"))


def test_seed_page_is_read() -> None:
    offer = extract_offer(SEED_PAGE, "https://shop.example.de/p")
    assert offer is not None and offer.price == Decimal("9.99") and offer.source == "jsonld"


# --- money round trip (issue 10) ---------------------------------------------------------
# Every currency in use, formatted the way the locales of the countries that use it write
# it (CLDR via babel), on a page in that locale's language, reads back as the same amount
# and code. Locales whose own numbering system or symbol CLDR leaves to the code are kept:
# the round trip must hold for them too.


def _locales_of(code: str) -> list[str]:
    from babel import localedata
    from babel.core import get_global

    available = set(localedata.locale_identifiers())
    languages = get_global("territory_languages")
    found = []
    for territory, entries in get_global("territory_currencies").items():
        if not any(c == code and tender and end is None for c, _s, end, tender in entries):
            continue
        main = next((c for c, _s, end, tender in entries if tender and end is None), None)
        if main != code:
            continue  # a territory where the code is legal tender beside its own currency
        for language, info in languages.get(territory, {}).items():
            identifier = f"{language}_{territory}"
            if info.get("official_status") and identifier in available:
                found.append(identifier)
    return sorted(found) + ["en"]


@st.composite
def money_in_locale(draw: st.DrawFn) -> tuple[Decimal, str, str]:
    code = draw(st.sampled_from(sorted(ISO_CODES)))
    locale = draw(st.sampled_from(_locales_of(code)))
    digits = minor_units(code)
    units = draw(st.integers(min_value=1, max_value=10**9 - 1))
    return Decimal(units).scaleb(-digits), code, locale


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(money_in_locale())
def test_money_formatted_by_cldr_reads_back(money: tuple[Decimal, str, str]) -> None:
    amount, code, locale = money
    text = format_currency(amount, code, locale=locale)
    lang = locale.replace("_", "-")
    page = (
        f"<html lang='{lang}'><body><h1>Garden hose</h1>"
        f"<p class='price'>{html.escape(text)}</p></body></html>"
    )
    offer = extract_offer(page, "https://shop.example/p/1")
    assert offer is not None, text
    assert (offer.price, offer.currency) == (amount, code), text
