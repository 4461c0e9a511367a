"""Amounts: price text and structured-data values -> ``Decimal``.

Visible text goes through price-parser after a small normalisation it does not do itself
(Arabic-Indic and Persian digits and separators, exotic spaces, direction marks). What a
separator before exactly three digits means (:func:`three_digit_readings`): never a
thousands group after a lone ``0`` (``RO 0.950`` is 0.950); else the currency's ISO 4217
minor units (:mod:`pricewatch.currency`) decide: the decimal point for a three-decimal
currency (``423.923 KD`` is 423.923), unless it is a lone comma on a page whose language
groups thousands with commas (``KWD 1,250`` on an English page: 1250 or 1.250, so no
price); a thousands separator for a currency without minor units (``¥1,234``) and, in
visible text, for the rest (``1.234 €`` is 1234, as price-parser reads it).

Structured data (JSON-LD, microdata, OpenGraph, JSON payloads) is read strictly: a plain
decimal number, or a number in a string (``"1299.00"``, ``"1,299.00"``). Exponent forms
(``"1e-2"``, ``"1.5E+2"``), overflowing values (``1e400``), NaN and infinities, zero,
negative amounts, "from" prices (``"ab 2.499,00"``: a lower bound, not the price) and
words ("call for price") are rejected with a reason (:data:`REASONS`), never truncated to
their leading digits. Once the offer's currency is known, :func:`machine_readings` says
what a string such as ``"59.990"`` means under its minor units (59990 CLP; 1.099 or 1099
EUR, for the page to decide). Nothing here raises.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from decimal import Decimal, InvalidOperation

from babel import Locale, UnknownLocaleError
from price_parser import Price

from pricewatch.currency import (
    CurrencyHints,
    minor_units,
    resolve_currency,
    symbol_codes,
    territories_of,
)

# Largest amount accepted from a page: anything above is a phone number or an id.
_MAX_AMOUNT = Decimal("1e10")

# Every decimal digit of the Basic Multilingual Plane (Arabic-Indic, Persian, Devanagari,
# Bengali, Thai, Myanmar, fullwidth...) to its ASCII digit.
_DIGITS: dict[int, str | None] = {
    code: str(unicodedata.decimal(chr(code)))
    for code in range(0x80, 0x10000)
    if unicodedata.category(chr(code)) == "Nd"
}
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
_EXPONENT = re.compile(r"\d\s*[eE]\s*[-+]?\d")
_HAS_DIGIT = re.compile(r"\d")
_NEGATIVE = re.compile(r"^\D{0,5}?[-\u2212]\s?\d")
# "30.-", "30,-", "30,–": Swiss/German whole amounts.
_DASH_CENTS = re.compile(r"(\d)[.,][-\u2013\u2014]+")
# A lower bound over variants, not the product's price: "from 19.99", "ab 2.499,00",
# "à partir de", "a partire da", "desde", "vanaf", "od", "von", "starting at". One list
# for visible text (``_visible`` excludes such prices) and structured-data values.
FROM_WORDING = (
    r"\bfrom\b|\bab\b|à partir|\ba partir|a partire|desde|\bvanaf\b|\bod\b|\bvon\b|starting"
)
_FROM = re.compile(FROM_WORDING, re.I)


def normalise_text(text: str) -> str:
    """Digits to ASCII, exotic spaces to plain ones, direction marks removed."""
    return text.translate(_NORMALISE)


# Why a structured-data price was not accepted (the ``no_price`` reason codes).
PRICE_MISSING = "price_missing"  # the offer has no price
PRICE_NOT_POSITIVE = "price_not_positive"  # 0, -5.00
PRICE_NOT_FINITE = "price_not_finite"  # NaN, Infinity
PRICE_OUT_OF_RANGE = "price_out_of_range"  # 1e400, 1e12: an id or an overflow
PRICE_EXPONENT = "price_exponent"  # "1e-2", "1.5E+2": nobody writes prices so
PRICE_NOT_A_NUMBER = "price_not_a_number"  # "call for price", "", a list of junk
PRICE_FROM = "price_from"  # "ab 2.499,00", "from 19.99": a lower bound, not the price
# "1.099" EUR (1.099 or 1099), "29,500" KWD on an English page, that the page's own text
# does not settle.
PRICE_AMBIGUOUS = "price_ambiguous"
# The markup price is the page's price times 10, 100 or 1000, and not in minor units.
PRICE_SCALE = "price_scale"
# The product's own buy box withholds the price ("price on request", "log in to see
# prices") and no structured offer of its own gives one: no visible amount stands in.
PRICE_WITHHELD = "price_on_request"
# Nothing on the page gave a price (and no structured offer of its own refused one).
NOT_FOUND = "not_found"
REASONS = (
    PRICE_MISSING,
    PRICE_NOT_POSITIVE,
    PRICE_NOT_FINITE,
    PRICE_OUT_OF_RANGE,
    PRICE_EXPONENT,
    PRICE_NOT_A_NUMBER,
    PRICE_FROM,
    PRICE_AMBIGUOUS,
    PRICE_SCALE,
    PRICE_WITHHELD,
)


def _checked(amount: Decimal) -> tuple[Decimal | None, str | None]:
    if not amount.is_finite():
        return None, PRICE_NOT_FINITE
    if amount <= 0:
        return None, PRICE_NOT_POSITIVE
    if amount >= _MAX_AMOUNT:
        return None, PRICE_OUT_OF_RANGE
    return amount, None


def _valid(amount: Decimal | None) -> Decimal | None:
    return None if amount is None else _checked(amount)[0]


def read_machine(value: object) -> tuple[Decimal | None, str | None]:
    """``(amount, None)`` for a valid structured-data price value, else ``(None, reason)``
    (a :data:`REASONS` code; ``PRICE_MISSING`` for None and empty strings)."""
    if value is None or isinstance(value, bool):
        return None, PRICE_MISSING if value is None else PRICE_NOT_A_NUMBER
    if isinstance(value, (int, float, Decimal)):
        try:
            amount = (
                value
                if isinstance(value, Decimal)
                else Decimal(value if isinstance(value, int) else repr(value))
            )
        except (InvalidOperation, ValueError, OverflowError):
            return None, PRICE_NOT_A_NUMBER
        return _checked(amount)
    if not isinstance(value, str):
        return None, PRICE_NOT_A_NUMBER
    text = normalise_text(value).strip()
    if not text:
        return None, PRICE_MISSING
    match = _MACHINE.match(text)
    if match:
        return _checked(Decimal(match.group(1)))
    lowered = text.lower().lstrip("+-")
    if lowered in ("nan", "inf", "infinity"):
        return None, PRICE_NOT_FINITE
    if _EXPONENT.search(text):
        try:
            huge = abs(Decimal(text.replace(" ", ""))) >= _MAX_AMOUNT
        except InvalidOperation:
            huge = False
        return None, PRICE_OUT_OF_RANGE if huge else PRICE_EXPONENT
    if _NEGATIVE.match(text) or text.startswith(("0", "0.", "0,")) and _ZERO.match(text):
        return None, PRICE_NOT_POSITIVE
    if _FROM.search(text):
        return None, PRICE_FROM
    parsed, _ = parse_amount(text)
    return (None, PRICE_NOT_A_NUMBER) if parsed is None else (parsed, None)


_ZERO = re.compile(r"^0+(?:[.,]0*)?\s*\D{0,5}$")


def parse_machine(value: object) -> Decimal | None:
    """A valid structured-data price value (see :func:`read_machine`), else None."""
    return read_machine(value)[0]


def parse_amount(
    text: str, hints: CurrencyHints | None = None
) -> tuple[Decimal | None, str | None]:
    """``(amount, currency_text)`` read from visible price text; ``(None, ...)`` when it
    holds no positive finite amount. Short texts only (a price label, not a paragraph).
    ``hints`` resolve an ambiguous symbol to the currency whose minor units apply."""
    if not text or len(text) > 200:
        return None, None
    return _parse_amount(text, hints or CurrencyHints())


def _parse_amount(text: str, hints: CurrencyHints) -> tuple[Decimal | None, str | None]:
    text = normalise_text(text)
    if not _HAS_DIGIT.search(text) or _EXPONENT.search(text):
        return None, None
    if _NEGATIVE.match(text):
        return None, None  # "-5,00 €": a discount or a refund, never a price
    text = _DASH_CENTS.sub(r"\1", text)
    try:
        price = Price.fromstring(text)
        # The whole text beside the amount when it is a known symbol ("Bs.S", "د.ك."),
        # else what price-parser recognised.
        symbol = _symbol_beside(text, price.amount_text) or price.currency
        separator = _decimal_separator(price.amount_text, symbol, hints)
        if separator == _NO_READING:
            return None, symbol
        if separator is not None:
            price = Price.fromstring(text, decimal_separator=separator)
    except Exception:  # price-parser on arbitrary text: never let it escape
        return None, None
    amount = price.amount
    if amount is not None:
        try:
            amount = _valid(Decimal(amount))
        except (InvalidOperation, ValueError):
            amount = None
    return amount, symbol


def _symbol_beside(text: str, amount_text: str | None) -> str | None:
    """The currency symbol price-parser does not know (``د.ك.``, ``KD``) written right
    before or after the amount: the rest of a short price text, when it names one."""
    if not amount_text:
        return None
    before, _, after = text.partition(amount_text)
    for rest in (before.strip(), after.strip()):
        if rest and len(rest) <= 12 and symbol_codes(rest):
            return rest
    return None


_LAST_SEPARATOR = re.compile(r"([.,'\u00a0 ])(\d+)\s*$")
_DECIMAL, _GROUP = "decimal", "group"


@functools.cache
def _group_separator(language: str | None, code: str) -> str | None:
    """The separator ``language`` groups thousands with in Latin digits (CLDR) where
    ``code`` is the currency: Arabic in Libya or Tunisia (``ar_LY``) groups with ``.``,
    in Kuwait with ``,``; the language alone (English: ``,``) where CLDR has no locale for
    it there. None for no or an unknown language."""
    if not language:
        return None
    for identifier in (*(f"{language}_{t}" for t in territories_of(code)), language):
        try:
            locale = Locale.parse(identifier)
        except (UnknownLocaleError, ValueError, TypeError):
            continue
        group = locale.number_symbols.get("latn", {}).get("group")
        return group if isinstance(group, str) else None
    return None


def three_digit_readings(
    whole: str, separator: str, code: str | None, language: str | None, *, machine: bool = False
) -> frozenset[str] | None:
    """What ``separator`` is in an amount written ``<whole><separator><three digits>``
    with no other separator: ``{"decimal"}``, ``{"group"}``, both (the amount is
    ambiguous), neither (no amount), or None when nothing here decides.

    - ``0.950``: a thousands group is never "0", so it is the decimal point (and no
      amount at all in a currency without minor units).
    - Three minor units (KWD, BHD, OMR, JOD, TND, LYD): the decimal point, except a comma
      on a page whose language groups thousands with commas in the currency's country
      (CLDR): ``KWD 1,250`` on an English page is 1250 (a TV) as well as 1.250, and no
      price beats a guess; ``1,000 د.ل`` in Libyan Arabic is 1.000. A point stays the
      decimal point in every language (``423.923 KD`` on a German page): the shops of
      these currencies write their three decimals with one.
    - No minor units (JPY, KRW, CLP, ISK): a thousands separator.
    - Two minor units: in visible text, a thousands separator (price-parser's reading;
      shops display two decimals). In structured data, both: a string comes from a
      template (``"1.099"``, German grouping) or a database column with three decimals
      (``"24.990"`` for 24.99) alike, so only the page can tell.
    """
    minor = None if code is None else minor_units(code)
    if not whole.strip("0"):
        return frozenset() if minor == 0 else frozenset({_DECIMAL})
    if minor is None:
        return None
    if minor == 0:
        return frozenset({_GROUP})
    if minor == 3:
        if separator == "," and _group_separator(language, code) == ",":
            return frozenset({_DECIMAL, _GROUP})
        return frozenset({_DECIMAL})
    return frozenset({_DECIMAL, _GROUP}) if machine else None


_LONE_MACHINE = re.compile(r"\s*\+?(\d{1,3})([.,])(\d{3})\s*\Z")


def machine_readings(
    text: str | None, code: str | None, language: str | None = None
) -> tuple[Decimal, ...] | None:
    """The amounts a structured-data price string such as ``"59.990"`` (one separator
    before three digits) can mean in currency ``code``, smallest first: one, two (the
    page must decide) or none; None when the string is not of that form or nothing
    decides (the plain reading stands)."""
    if not text:
        return None
    match = _LONE_MACHINE.match(normalise_text(text))
    if match is None:
        return None
    whole, separator, fraction = match.groups()
    kinds = three_digit_readings(whole, separator, code, language, machine=True)
    if kinds is None:
        return None
    readings = []
    if _DECIMAL in kinds:
        readings.append(Decimal(f"{whole}.{fraction}"))
    if _GROUP in kinds:
        readings.append(Decimal(whole + fraction))
    return tuple(amount for amount in readings if _valid(amount) is not None)


# The amount text has no reading under the currency's rules (``_decimal_separator``).
_NO_READING = ""


def _decimal_separator(
    amount_text: str | None, currency_text: str | None, hints: CurrencyHints
) -> str | None:
    """The decimal separator :func:`three_digit_readings` gives ``amount_text`` when its
    last separator stands before exactly three digits; ``_NO_READING`` when it gives none
    or two; None to leave price-parser's reading."""
    if not amount_text:
        return None
    text = amount_text.strip()
    match = _LAST_SEPARATOR.search(text)
    if match is None or len(match.group(2)) != 3 or match.group(1) not in ".,":
        return None
    separator = match.group(1)
    whole = text[: match.start()].strip()
    code = resolve_currency(currency_text, hints) if currency_text else None
    # With other separators before it ("123,456.789", "1 249,500") it is not a group
    # separator, whatever the language.
    language = hints.language if whole.isdigit() else None
    kinds = three_digit_readings(whole, separator, code, language)
    if kinds is None:
        return None
    if kinds == {_DECIMAL}:
        return separator
    if kinds == {_GROUP}:
        return "," if separator == "." else "."
    return _NO_READING
