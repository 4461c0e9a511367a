"""Amounts, currencies and identifiers: locale formats as example tables.

The amount cases come from how shops in each locale write prices (CLDR number formats
and the shops of the product-extraction benchmark); currency cases from ISO 4217 and the
symbols those shops use.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from pricewatch.currency import CurrencyHints, resolve_currency
from pricewatch.extract import extract_offer
from pricewatch.extract._candidate import valid_gtin
from pricewatch.extract._ids import code_from_label, sku_from_url
from pricewatch.extract._money import parse_amount, parse_machine

AMOUNTS = [
    pytest.param("1.299,00 €", "1299.00", id="de-DE"),
    pytest.param("1 299,00 zł", "1299.00", id="pl-PL-nbsp"),
    pytest.param("1\u202f299,00\u00a0€", "1299.00", id="fr-FR-narrow-nbsp"),
    pytest.param("CHF 1'234.50", "1234.50", id="de-CH-apostrophe"),
    pytest.param("CHF 1’234.50", "1234.50", id="de-CH-right-quote"),
    pytest.param("₹1,23,456.00", "123456.00", id="en-IN-lakh"),
    pytest.param("¥1,299", "1299", id="ja-JP"),
    pytest.param("R$ 1.234,56", "1234.56", id="pt-BR"),
    pytest.param("US$30 000,00", "30000.00", id="es-AR-us-dollars"),
    pytest.param("٣٤٥٫٦٧ ر.س", "345.67", id="ar-SA-arabic-indic-digits"),
    pytest.param("۱۲۳٬۴۵۶ تومان", "123456", id="fa-IR-persian-digits"),
    pytest.param("$87.11", "87.11", id="en-US"),
    pytest.param("206,-", "206", id="de-AT-dash-cents"),
    pytest.param("19,95 Kč", "19.95", id="cs-CZ"),
    pytest.param("£1,049.99", "1049.99", id="en-GB"),
]


@pytest.mark.parametrize(("text", "amount"), AMOUNTS)
def test_parse_amount_locales(text: str, amount: str) -> None:
    assert parse_amount(text)[0] == Decimal(amount)


# A lone separator before exactly three digits, read by the currency's minor units and,
# for a comma, the page's language (CLDR number symbols).
THREE_DIGIT_GROUPS = [
    pytest.param("RO 0.450", (), None, "0.450", id="omr-ro-prefix-was-450"),
    pytest.param("JD 9.750", (), "ar", "9.750", id="jod-jd-prefix-was-9750"),
    pytest.param("LD 3.750", (), None, "3.750", id="lyd-ld-prefix-was-3750"),
    pytest.param("0,950 €", (), None, "0.950", id="zero-is-never-a-thousands-group"),
    pytest.param("0.125", (), None, "0.125", id="zero-group-without-currency"),
    pytest.param("¥0.500", ("JPY",), None, None, id="zero-group-in-yen-is-no-amount"),
    pytest.param("KWD 2,400", (), "en", None, id="kwd-english-comma-is-1.25-or-1250"),
    pytest.param("KWD 2,400", (), "ar", None, id="kwd-arabic-latin-comma-groups-too"),
]


@pytest.mark.parametrize(("text", "codes", "language", "amount"), THREE_DIGIT_GROUPS)
def test_three_digit_groups(
    text: str, codes: tuple[str, ...], language: str | None, amount: str | None
) -> None:
    expected = Decimal(amount) if amount is not None else None
    assert parse_amount(text, CurrencyHints(codes, language))[0] == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("free", id="no-digits"),
        pytest.param("0,00 €", id="zero"),
        pytest.param("-5.00", id="negative"),
        pytest.param("99999999999999", id="absurd"),
        pytest.param("x" * 500, id="too-long"),
    ],
)
def test_parse_amount_rejects(text: str) -> None:
    assert parse_amount(text)[0] is None


@pytest.mark.parametrize(
    ("value", "amount"),
    [
        pytest.param("1299.00", "1299.00", id="machine-dot"),
        pytest.param("1.299", "1.299", id="machine-three-decimals-stays-decimal"),
        pytest.param(19.9, "19.9", id="json-float-via-repr"),
        pytest.param(25, "25", id="json-int"),
        pytest.param("19,99", "19.99", id="decimal-comma-string"),
        pytest.param(True, None, id="bool-is-not-a-price"),
        pytest.param("NaN", None, id="nan"),
        pytest.param("Infinity", None, id="infinity"),
        pytest.param(float("inf"), None, id="float-infinity"),
        pytest.param(0, None, id="zero"),
    ],
)
def test_parse_machine(value: object, amount: str | None) -> None:
    expected = Decimal(amount) if amount is not None else None
    assert parse_machine(value) == expected


CURRENCIES = [
    pytest.param("€", (), None, "EUR", id="euro-sign"),
    pytest.param("eur", (), None, "EUR", id="code-lowercase"),
    pytest.param("zł", (), None, "PLN", id="zloty"),
    pytest.param("R$", (), None, "BRL", id="real"),
    pytest.param("US$", (), None, "USD", id="us-dollar"),
    pytest.param("$", (), None, None, id="dollar-without-evidence-is-no-currency"),
    pytest.param("$", (), "en", "USD", id="dollar-in-english"),
    pytest.param("$", ("CAD",), None, "CAD", id="dollar-on-ca-tld"),
    pytest.param("$", ("AUD", "USD"), None, "AUD", id="dollar-domain-setting-first"),
    pytest.param("kr", ("NOK",), None, "NOK", id="krone-on-no-tld"),
    pytest.param("kr", (), "da", "DKK", id="krone-in-danish"),
    pytest.param("¥", ("CNY",), None, "CNY", id="yuan-on-cn-tld"),
    pytest.param("¥", (), None, None, id="yen-or-yuan-without-evidence"),
    pytest.param("¥", (), "ja", "JPY", id="yen-in-japanese"),
    pytest.param("R", (), None, "ZAR", id="rand"),
    pytest.param("Rs", ("PKR",), None, "PKR", id="rupee-on-pk-tld"),
    pytest.param("ر.س", (), None, "SAR", id="riyal"),
    pytest.param("Lei", (), "ro", "RON", id="leu"),
    pytest.param("NT$", (), None, "TWD", id="taiwan-dollar"),
    pytest.param("CA$", (), None, "CAD", id="prefixed-dollar"),
    pytest.param("₪", (), None, "ILS", id="shekel"),
    pytest.param("doubloons", (), None, None, id="unknown"),
    # issue 10: symbols that resolved to no currency.
    pytest.param("Р", (), None, "RUB", id="cyrillic-er"),
    pytest.param("руб.", (), None, "RUB", id="rub-abbreviation"),
    pytest.param("₸", (), None, "KZT", id="tenge"),
    pytest.param("Br", ("BYN",), None, "BYN", id="belarusian-ruble-on-by"),
    pytest.param("KM", (), None, "BAM", id="convertible-mark"),
    pytest.param("Lek", (), None, "ALL", id="lek"),
    pytest.param("₡", (), None, "CRC", id="colon"),
    pytest.param("RD$", (), None, "DOP", id="dominican-peso"),
    pytest.param("S/.", (), None, "PEN", id="sol-with-dot"),
    pytest.param("KD", (), None, "KWD", id="kuwaiti-dinar"),
    # Gulf and Levant shops' abbreviations of the three-decimal currencies.
    pytest.param("RO", (), None, "OMR", id="omani-rial-ro"),
    pytest.param("JD", (), None, "JOD", id="jordanian-dinar-jd"),
    pytest.param("LD", (), None, "LYD", id="libyan-dinar-ld"),
    pytest.param("ƒ", ("AWG",), None, "AWG", id="florin-on-aw"),
    # One list of currencies in use: withdrawn ones are no currency, everywhere.
    pytest.param("kn", ("EUR",), "hr", None, id="kuna-withdrawn-2023"),
    pytest.param("HRK", (), None, None, id="kuna-code-withdrawn"),
]


@pytest.mark.parametrize(("raw", "codes", "language", "code"), CURRENCIES)
def test_resolve_currency(
    raw: str, codes: tuple[str, ...], language: str | None, code: str | None
) -> None:
    assert resolve_currency(raw, CurrencyHints(codes, language)) == code


@pytest.mark.parametrize(
    ("url", "domain_currency", "code"),
    [
        pytest.param("https://shop.example.ca/p", None, "CAD", id="tld-ca"),
        pytest.param("https://shop.example.com/p", None, None, id="com-says-nothing"),
        pytest.param(
            "https://www.shop.example.com/p",
            {"shop.example.com": "AUD"},
            "AUD",
            id="setting-matches-parent-domain",
        ),
        pytest.param("https://shop.example.com.au/p", None, "AUD", id="tld-au"),
    ],
)
def test_dollar_sign_resolved_by_domain(
    url: str, domain_currency: dict[str, str] | None, code: str | None
) -> None:
    html = "<html><body><h1>Garden hose</h1><p class='price'>$49.00</p></body></html>"
    offer = extract_offer(html, url, domain_currency=domain_currency)
    assert offer is not None and offer.price == Decimal("49.00")
    assert offer.currency == code


def test_page_language_region_resolves_dollar() -> None:
    html = "<html lang='es-MX'><body><h1>Manguera</h1><p class='price'>$1,299.00</p></body></html>"
    offer = extract_offer(html, "https://tienda.example.com/p")
    assert offer is not None and offer.currency == "MXN"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("4006381333931", "4006381333931", id="ean13"),
        pytest.param("036000291452", "036000291452", id="upc-a"),
        pytest.param("96385074", "96385074", id="ean8"),
        pytest.param("4006381333932", None, id="bad-check-digit"),
        pytest.param("400638133393", None, id="wrong-length"),
        pytest.param("ABC", None, id="letters"),
        pytest.param("0000000000000", None, id="all-zero"),
    ],
)
def test_gtin_checksum(value: str, expected: str | None) -> None:
    assert valid_gtin(value) == expected


@pytest.mark.parametrize(
    ("url", "sku"),
    [
        pytest.param("https://www.example.com/dp/B01GOH7PKA", "B01GOH7PKA", id="asin-path"),
        pytest.param("https://www.example.com/itm/302474151804", "302474151804", id="item-number"),
        pytest.param(
            "https://city.example.org/app/d/washer/7235216655.html", "7235216655", id="numeric-html"
        ),
        pytest.param(
            "https://www.example.at/regal-p400105394.html", "400105394", id="letter-prefixed"
        ),
        pytest.param("https://www.example.ch/de/pen-24718?sku=1049084", "1049084", id="sku-query"),
        pytest.param("https://www.example.com/cheap_1131.html", None, id="too-short"),
        pytest.param("https://www.example.com/products/red-kettle", None, id="slug-only"),
    ],
)
def test_sku_from_url(url: str, sku: str | None) -> None:
    assert sku_from_url(url) == sku


@pytest.mark.parametrize(
    ("text", "following", "code"),
    [
        pytest.param("Product code: 83810610", None, "83810610", id="en-product-code"),
        pytest.param("SKU:", " 0638", "0638", id="label-then-tail"),
        pytest.param("Šifra:", " 0638", "0638", id="sl-sifra"),
        pytest.param("Art.-Nr. 12345-AB", None, "12345-AB", id="de-art-nr"),
        pytest.param("Cod produs: DR2401", None, "DR2401", id="ro-cod-produs"),
        pytest.param("Bestellnummer", "79961", "79961", id="de-bestellnummer-next"),
        pytest.param("Product code: none", None, None, id="no-digit-no-code"),
        pytest.param("Colour: red", None, None, id="not-a-label"),
    ],
)
def test_labelled_codes(text: str, following: str | None, code: str | None) -> None:
    assert code_from_label(text, following) == code
