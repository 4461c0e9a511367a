"""Amounts and currencies: price text -> ``Decimal``, symbols and hints -> ISO 4217.

Amounts go through price-parser (the project's parser) after a small normalisation it
does not do itself: Arabic-Indic and Persian digits and separators, exotic spaces, and
strict machine-format values (``"1299.00"`` in structured data) that must not be read
with European thousands rules. Nothing here raises: bad input gives ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

from price_parser import Price

# Largest amount accepted from a page: anything above is a phone number or an id.
_MAX_AMOUNT = Decimal("1e10")

_DIGITS: dict[int, str | None] = {}
for _i in range(10):
    _DIGITS[0x0660 + _i] = str(_i)  # Arabic-Indic
    _DIGITS[0x06F0 + _i] = str(_i)  # Extended Arabic-Indic (Persian, Urdu)
    _DIGITS[0x0966 + _i] = str(_i)  # Devanagari
    _DIGITS[0xFF10 + _i] = str(_i)  # fullwidth
_DIGITS[0x066B] = "."  # Arabic decimal separator
_DIGITS[0x066C] = ","  # Arabic thousands separator
_DIGITS[0x060C] = ","  # Arabic comma
for _space in (0x00A0, 0x2007, 0x2009, 0x200A, 0x202F, 0x2002, 0x2003, 0x3000):
    _DIGITS[_space] = " "
_DIGITS[0x2019] = "'"  # right single quote as Swiss thousands separator
_DIGITS[0x02BC] = "'"
_DIGITS[0x200F] = None  # right-to-left mark
_DIGITS[0x200E] = None  # left-to-right mark
_DIGITS[0x200B] = None  # zero-width space
_DIGITS[0xFF0C] = ","  # fullwidth comma
_DIGITS[0xFF0E] = "."  # fullwidth full stop
_NORMALISE = str.maketrans(_DIGITS)

_MACHINE = re.compile(r"\s*\+?(\d{1,12}(?:\.\d{1,6})?)\s*\Z")
_HAS_DIGIT = re.compile(r"\d")
_NEGATIVE = re.compile(r"^\D{0,5}?[-\u2212]\s?\d")
# "30.-", "30,-", "30,–": Swiss/German whole amounts.
_DASH_CENTS = re.compile(r"(\d)[.,][-\u2013\u2014]+")


def normalise_text(text: str) -> str:
    """Digits to ASCII, exotic spaces to plain ones, direction marks removed."""
    return text.translate(_NORMALISE)


def _valid(amount: Decimal | None) -> Decimal | None:
    if amount is None or not amount.is_finite() or amount <= 0 or amount >= _MAX_AMOUNT:
        return None
    return amount


def parse_machine(value: object) -> Decimal | None:
    """A structured-data value: numbers and ``"1299.00"``-style strings, else the text
    rules of :func:`parse_amount`."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        try:
            return _valid(Decimal(value))
        except (InvalidOperation, ValueError, OverflowError):
            return None
    if isinstance(value, float):
        try:
            return _valid(Decimal(repr(value)))
        except (InvalidOperation, ValueError, OverflowError):
            return None
    if not isinstance(value, str):
        return None
    text = normalise_text(value)
    match = _MACHINE.match(text)
    if match:
        try:
            return _valid(Decimal(match.group(1)))
        except InvalidOperation:
            return None
    return parse_amount(text)[0]


def parse_amount(
    text: str, decimal_separator: str | None = None
) -> tuple[Decimal | None, str | None]:
    """``(amount, currency_text)`` read from visible price text; ``(None, ...)`` when it
    holds no positive finite amount. Short texts only (a price label, not a paragraph)."""
    if not text or len(text) > 200:
        return None, None
    return _parse_amount(text, decimal_separator)


def _parse_amount(text: str, decimal_separator: str | None) -> tuple[Decimal | None, str | None]:
    text = normalise_text(text)
    if not _HAS_DIGIT.search(text):
        return None, None
    if _NEGATIVE.match(text):
        return None, None  # "-5,00 €": a discount or a refund, never a price
    text = _DASH_CENTS.sub(r"\1", text)
    try:
        price = Price.fromstring(text, decimal_separator=decimal_separator)
    except Exception:  # price-parser on arbitrary text: never let it escape
        return None, None
    amount = price.amount
    if amount is not None:
        try:
            amount = _valid(Decimal(amount))
        except (InvalidOperation, ValueError):
            amount = None
    return amount, price.currency


# --- currencies -------------------------------------------------------------------------

ISO_CODES = frozenset(
    """AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD
    BTN BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR
    FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD
    JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK
    MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN
    PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB
    TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD UYU UZS VES VND VUV WST XAF XCD XOF XPF YER
    ZAR ZMW ZWL""".split()
)

# Symbols and words that name exactly one currency.
_UNAMBIGUOUS = {
    "€": "EUR",
    "eur": "EUR",
    "euro": "EUR",
    "euros": "EUR",
    "£": "GBP",
    "gbp": "GBP",
    "us$": "USD",
    "usd": "USD",
    "u$s": "USD",
    "₹": "INR",
    "inr": "INR",
    "zł": "PLN",
    "zl": "PLN",
    "pln": "PLN",
    "r$": "BRL",
    "brl": "BRL",
    "chf": "CHF",
    "fr.": "CHF",
    "sfr.": "CHF",
    "kč": "CZK",
    "czk": "CZK",
    "ft": "HUF",
    "huf": "HUF",
    "lei": "RON",
    "ron": "RON",
    "₽": "RUB",
    "руб": "RUB",
    "руб.": "RUB",
    "р.": "RUB",
    "rub": "RUB",
    "₴": "UAH",
    "грн": "UAH",
    "грн.": "UAH",
    "₺": "TRY",
    "tl": "TRY",
    "₪": "ILS",
    'ש"ח': "ILS",
    "ils": "ILS",
    "nis": "ILS",
    "ر.س": "SAR",
    "ر.س.": "SAR",
    "sar": "SAR",
    "د.إ": "AED",
    "aed": "AED",
    "nt$": "TWD",
    "twd": "TWD",
    "hk$": "HKD",
    "s$": "SGD",
    "a$": "AUD",
    "au$": "AUD",
    "c$": "CAD",
    "ca$": "CAD",
    "nz$": "NZD",
    "mx$": "MXN",
    "₩": "KRW",
    "원": "KRW",
    "฿": "THB",
    "₫": "VND",
    "₦": "NGN",
    "₱": "PHP",
    "rm": "MYR",
    "rp": "IDR",
    "лв": "BGN",
    "лв.": "BGN",
    "kn": "HRK",
    "din": "RSD",
    "дин.": "RSD",
    "₸": "KZT",
    "₼": "AZN",
    "₾": "GEL",
    "৳": "BDT",
    "円": "JPY",
    "元": "CNY",
}
# Symbols shared by several currencies: the TLD decides, else the first is assumed.
_AMBIGUOUS = {
    "$": ("USD", "CAD", "AUD", "NZD", "MXN", "ARS", "CLP", "COP", "SGD", "HKD", "TWD"),
    "¥": ("JPY", "CNY"),
    "kr": ("SEK", "NOK", "DKK", "ISK"),
    "kr.": ("DKK", "SEK", "NOK", "ISK"),
    "rs": ("INR", "PKR", "LKR", "NPR"),
    "rs.": ("INR", "PKR", "LKR", "NPR"),
    "r": ("ZAR",),
}

# Country-code TLD (or second-level suffix) -> local currency.
_TLD_CURRENCY = {
    "at": "EUR",
    "be": "EUR",
    "cy": "EUR",
    "de": "EUR",
    "ee": "EUR",
    "es": "EUR",
    "fi": "EUR",
    "fr": "EUR",
    "gr": "EUR",
    "hr": "EUR",
    "ie": "EUR",
    "it": "EUR",
    "lt": "EUR",
    "lu": "EUR",
    "lv": "EUR",
    "mt": "EUR",
    "nl": "EUR",
    "pt": "EUR",
    "si": "EUR",
    "sk": "EUR",
    "eu": "EUR",
    "uk": "GBP",
    "us": "USD",
    "ca": "CAD",
    "au": "AUD",
    "nz": "NZD",
    "mx": "MXN",
    "br": "BRL",
    "ar": "ARS",
    "cl": "CLP",
    "co": "COP",
    "pe": "PEN",
    "ch": "CHF",
    "li": "CHF",
    "pl": "PLN",
    "cz": "CZK",
    "hu": "HUF",
    "ro": "RON",
    "bg": "BGN",
    "se": "SEK",
    "no": "NOK",
    "dk": "DKK",
    "is": "ISK",
    "ru": "RUB",
    "ua": "UAH",
    "by": "BYN",
    "kz": "KZT",
    "tr": "TRY",
    "il": "ILS",
    "sa": "SAR",
    "ae": "AED",
    "qa": "QAR",
    "kw": "KWD",
    "bh": "BHD",
    "om": "OMR",
    "eg": "EGP",
    "ma": "MAD",
    "za": "ZAR",
    "ng": "NGN",
    "ke": "KES",
    "in": "INR",
    "pk": "PKR",
    "lk": "LKR",
    "bd": "BDT",
    "np": "NPR",
    "jp": "JPY",
    "cn": "CNY",
    "hk": "HKD",
    "tw": "TWD",
    "kr": "KRW",
    "sg": "SGD",
    "my": "MYR",
    "id": "IDR",
    "th": "THB",
    "vn": "VND",
    "ph": "PHP",
    "rs": "RSD",
    "ge": "GEL",
    "am": "AMD",
    "az": "AZN",
}
# Page language region (``<html lang="en-CA">``) works like a TLD.


def _host_suffixes(host: str) -> list[str]:
    parts = host.lower().rstrip(".").split(".")
    return [".".join(parts[i:]) for i in range(len(parts))]


def domain_currency(host: str, mapping: Mapping[str, str] | None) -> str | None:
    """The operator's currency for ``host`` or a parent domain (``PRICEWATCH_DOMAIN_CURRENCY``)."""
    if not mapping or not host:
        return None
    for suffix in _host_suffixes(host):
        code = mapping.get(suffix)
        if code:
            return code.upper()
    return None


def tld_currency(host: str) -> str | None:
    if not host:
        return None
    tld = host.lower().rstrip(".").rsplit(".", 1)[-1]
    return _TLD_CURRENCY.get(tld)


def region_currency(lang: str | None) -> str | None:
    """``en-CA`` / ``pt_BR`` -> the region's currency."""
    if not lang:
        return None
    parts = re.split(r"[-_]", lang.strip())
    if len(parts) >= 2 and len(parts[1]) == 2:
        return _TLD_CURRENCY.get(parts[1].lower())
    return None


def resolve_currency(raw: str | None, hints: tuple[str | None, ...] = ()) -> str | None:
    """An ISO 4217 code for ``raw`` (a code, a symbol or a word).

    ``hints`` are candidate local currencies (domain setting, TLD, page region), most
    trusted first: an ambiguous symbol (``$``, ``kr``, ``¥``) takes the first hint it can
    name; with no hint it resolves to its most common currency. ``raw`` None gives None.
    """
    if not raw:
        return None
    text = normalise_text(raw).strip()
    if not text:
        return None
    upper = text.upper()
    if upper in ISO_CODES:
        return upper
    key = text.lower()
    if key in _AMBIGUOUS or key.rstrip(".") in _AMBIGUOUS:
        options = _AMBIGUOUS.get(key) or _AMBIGUOUS[key.rstrip(".")]
        for hint in hints:
            if hint in options:
                return hint
        return options[0]
    code = _UNAMBIGUOUS.get(key)
    if code:
        return code
    # "CA$", "AU$", "US $" ...
    compact = key.replace(" ", "")
    code = _UNAMBIGUOUS.get(compact)
    if code:
        return code
    if compact.endswith("$") and compact[:-1].upper() + "D" in ISO_CODES:
        return compact[:-1].upper() + "D"
    return None
