"""ISO 4217 currencies: which codes are in use, their minor units, and which currency a
price's symbol names. One module for extraction, validation and the official-API fallback.

Everything comes from the Unicode CLDR data shipped with babel (kept up to date with every
babel release), not from hand-typed tables:

- :data:`ISO_CODES`: the currencies legal tender somewhere today (CLDR's territory
  currencies with no end date, or one still ahead). A withdrawn currency (HRK since 2023,
  BGN since 2026) is no longer in it, so extraction and validation agree: ``129,00 kn`` is
  a known symbol of a withdrawn currency and resolves to no currency, never to the euro
  the host's country uses now.
- :func:`minor_units`: ISO 4217 minor units (3 for KWD, BHD, OMR..., 0 for JPY, KRW, CLP,
  ISK...), which decide what ``1.234`` means (see ``pricewatch.extract._money``).
- Symbols: for each currency in use, the symbol written by every locale of every territory
  that uses it (``$`` in ``en_US``, ``es_MX``, ``en_AU``...; ``kr`` in ``sv_SE``,
  ``nb_NO``...), English's symbols (``CA$``, ``A$``, ``US$``), the codes themselves, and
  the currencies' names in their own languages (``euros``, ``lei``). A short list of
  abbreviations shops write but CLDR does not (``KD``, ``RO``, ``JD``, ``руб.``, ``Lek``,
  ``ƒ``) completes it; each entry says what CLDR writes instead.

An ambiguous symbol (``$``, ``kr``, ``¥``, ``R``) is resolved by :class:`CurrencyHints`, in
order: the operator's ``PRICEWATCH_DOMAIN_CURRENCY`` for the host, the currency of the
host's country (its ccTLD), the currency of the page's language region
(``<html lang="en-CA">``, or the language's most likely region: ``sv`` -> Sweden), then
how the page's language writes the symbol (CLDR ``en``: ``¥`` is JPY, ``zh``: CNY). When
none of them decides, the answer is no currency, never a guess.

Cost: the code list and minor units are read at import (~20 ms, babel's global data). The
symbol table is generated from CLDR ahead of time (:mod:`pricewatch._currency_table`, a
second of CPU over ~500 locales) and read from ``currency_symbols.json`` on first use
(a few ms); every look-up after that is a dict access.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from importlib import resources

from babel import Locale, UnknownLocaleError
from babel.core import get_global
from babel.numbers import get_currency_precision

from pricewatch._urls import host_matches

__all__ = [
    "ISO_CODES",
    "CurrencyHints",
    "currency_hints",
    "domain_currency",
    "minor_units",
    "resolve_currency",
    "short_symbols",
    "symbol_codes",
    "territories_of",
]


def _codes_in_use(today: date) -> frozenset[str]:
    codes = set()
    for entries in get_global("territory_currencies").values():
        for code, _start, end, tender in entries:
            if tender and (end is None or date(*end) > today):
                codes.add(code)
    return frozenset(codes)


ISO_CODES: frozenset[str] = _codes_in_use(date.today())
_MINOR_UNITS: dict[str, int] = {code: get_currency_precision(code) for code in ISO_CODES}


def minor_units(code: str) -> int:
    """The ISO 4217 minor units of ``code`` (2 for a code CLDR does not know)."""
    return _MINOR_UNITS.get(code, 2)


# Abbreviations shops write that CLDR's symbols lack; CLDR's form in the comment.
_SHOP_SYMBOLS: dict[str, tuple[str, ...]] = {
    "руб": ("RUB",),  # ₽
    "р": ("RUB",),  # ₽ (Cyrillic er, "1 299 Р")
    "kd": ("KWD",),  # د.ك.
    "bd": ("BHD",),  # د.ب.
    "ro": ("OMR",),  # ر.ع.
    "jd": ("JOD",),  # د.أ.
    "ld": ("LYD",),  # د.ل.
    "lek": ("ALL",),  # Lekë
    "ƒ": ("AWG", "XCG"),  # Afl. (Aruba), Cg (Curaçao, Sint Maarten)
    "tl": ("TRY",),  # ₺
    "грн": ("UAH",),  # ₴
    "zl": ("PLN",),  # zł without the diacritic
    "fr": ("CHF",),  # CHF ("Fr." / "SFr.")
    "sfr": ("CHF",),
    "rs": ("INR", "PKR", "LKR", "NPR"),  # ₹, Rs (PKR/LKR/NPR)
    "din": ("RSD",),  # RSD / дин.
    "дин": ("RSD",),
    "u$s": ("USD",),  # US$ (Argentina, Uruguay)
    "lei": ("RON", "MDL"),  # RON / L (names: "lei românești", "lei moldovenești")
    "元": ("CNY", "TWD", "HKD"),  # ¥ / NT$ / HK$ (the yuan character)
    "원": ("KRW",),  # ₩
}


def _key(symbol: str) -> str:
    """The look-up form of a symbol: case-folded, spaces collapsed, without direction marks
    and trailing full stops (``S/.`` and ``S/``, ``руб.`` and ``руб`` are one key)."""
    text = unicodedata.normalize("NFKC", symbol)  # fullwidth ￥ is ¥
    text = "".join(" " if ch.isspace() else ch for ch in text if ch not in _MARKS)
    return " ".join(text.split()).casefold().rstrip(".")


def _spaceless(key: str) -> str:
    return key.replace(" ", "")


_MARKS = frozenset("\u200e\u200f\u061c\u200b")


def _territory_of(language: str) -> str | None:
    likely = get_global("likely_subtags").get(language)
    if not likely:
        return None
    parts = likely.split("_")
    return parts[-1] if len(parts) > 1 and parts[-1].isalpha() and parts[-1].isupper() else None


def _in_use(entries: list[tuple[str, object, object, bool]], today: date) -> list[str]:
    return [
        code
        for code, _start, end, tender in entries
        if tender and (end is None or date(*end) > today) and code in ISO_CODES  # type: ignore[misc]
    ]


@functools.cache
def _territory_currencies() -> dict[str, tuple[str, ...]]:
    """Territory -> the currencies legal tender there today, the main one first."""
    today = date.today()
    out = {}
    for territory, entries in get_global("territory_currencies").items():
        codes = _in_use(entries, today)
        if codes:
            out[territory] = tuple(codes)
    return out


def territories_of(code: str) -> tuple[str, ...]:
    """The territories (ISO 3166 codes, sorted) whose main currency is ``code``."""
    return tuple(
        sorted(t for t, codes in _territory_currencies().items() if codes and codes[0] == code)
    )


def _main_currency(territory: str) -> str | None:
    codes = _territory_currencies().get(territory)
    return codes[0] if codes else None


def _locale(identifier: str) -> Locale | None:
    try:
        return Locale.parse(identifier)
    except (UnknownLocaleError, ValueError):
        return None


_TABLE_FILE = "currency_symbols.json"
_TABLE_LOCK = threading.Lock()


@functools.cache
def _load_symbol_table() -> dict[str, frozenset[str]]:
    data = json.loads(resources.files(__package__).joinpath(_TABLE_FILE).read_bytes())
    table = {}
    for key, codes in data["symbols"].items():
        in_use = frozenset(codes) & ISO_CODES  # a currency withdrawn since the file was made
        if in_use:
            table[key] = in_use
    return table


def _symbol_table() -> dict[str, frozenset[str]]:
    """Symbol key -> the currencies in use that some locale writes with it, read once from
    the table generated from CLDR (``python -m pricewatch._currency_table``)."""
    with _TABLE_LOCK:
        return _load_symbol_table()


@functools.cache
def _language_symbols(language: str) -> dict[str, str]:
    """How ``language`` writes each currency: symbol key -> code, for the symbols that
    language uses for one currency only."""
    locale = _locale(language)
    if locale is None:
        return {}
    seen: dict[str, set[str]] = {}
    for code, symbol in locale.currency_symbols.items():
        if code in ISO_CODES and symbol:
            seen.setdefault(_key(symbol), set()).add(code)
    return {key: next(iter(codes)) for key, codes in seen.items() if len(codes) == 1}


def symbol_codes(symbol: str) -> frozenset[str]:
    """Every currency in use that ``symbol`` (a code, a sign, an abbreviation) can name."""
    key = _key(symbol)
    if not key:
        return frozenset()
    table = _symbol_table()
    return table.get(key) or table.get("~" + _spaceless(key), frozenset())


@functools.cache
def short_symbols(minor: int) -> tuple[str, ...]:
    """The codes and short symbols (no space, at most four characters: ``KD``, ``OMR``,
    ``د.ك``) that name only currencies with ``minor`` minor units, in their look-up form
    (case-folded), longest first: what a visible scan looks for beside an amount."""
    found = {
        key
        for key, codes in _symbol_table().items()
        if not key.startswith("~")
        and " " not in key
        and len(key) <= 4
        and all(minor_units(code) == minor for code in codes)
    }
    return tuple(sorted(found, key=lambda key: (-len(key), key)))


@dataclass(frozen=True, slots=True)
class CurrencyHints:
    """What the page tells about its currency besides the symbol: candidate local
    currencies, most trusted first, and the page's language (``en``, ``sv``...)."""

    codes: tuple[str, ...] = ()
    language: str | None = None

    def first(self) -> str | None:
        return self.codes[0] if self.codes else None


_LANG = re.compile(r"^([A-Za-z]{2,3})(?:[-_](?:[A-Za-z]{4}[-_])?([A-Za-z]{2}|\d{3}))?")


def domain_currency(host: str, mapping: Mapping[str, str] | None) -> str | None:
    """The operator's currency for ``host`` or a parent domain (``PRICEWATCH_DOMAIN_CURRENCY``);
    the most specific domain wins."""
    if not mapping or not host:
        return None
    best: tuple[int, str] | None = None
    for domain, code in mapping.items():
        if code and host_matches(host, domain) and (best is None or len(domain) > best[0]):
            best = (len(domain), code.upper())
    return best[1] if best else None


def country_currency(host: str) -> str | None:
    """The currency of the country whose ccTLD ``host`` is under (``.se`` -> SEK)."""
    tld = host.lower().rstrip(".").rsplit(".", 1)[-1]
    if len(tld) != 2 or not tld.isalpha():
        return None
    territory = {"uk": "GB", "el": "GR"}.get(tld, tld.upper())  # ccTLDs that are not ISO 3166
    return _main_currency(territory)


def currency_hints(
    host: str, mapping: Mapping[str, str] | None = None, lang: str | None = None
) -> CurrencyHints:
    """The hints for a page of ``host`` in language ``lang`` (``<html lang>``)."""
    codes: list[str] = []
    language = None
    for code in (domain_currency(host, mapping), country_currency(host) if host else None):
        if code and code not in codes:
            codes.append(code)
    match = _LANG.match(lang.strip()) if lang else None
    if match:
        language = match.group(1).lower()
        territory = (match.group(2) or "").upper() or _territory_of(language)
        code = _main_currency(territory) if territory else None
        if code and code not in codes:
            codes.append(code)
    return CurrencyHints(tuple(codes), language)


def resolve_currency(raw: str | None, hints: CurrencyHints = CurrencyHints()) -> str | None:
    """The ISO 4217 code ``raw`` (a code, a symbol, a name) names on a page with ``hints``;
    None when it is unknown, a withdrawn currency, or ambiguous and nothing decides."""
    if not raw:
        return None
    upper = raw.strip().upper()
    if upper in ISO_CODES:
        return upper
    codes = symbol_codes(raw)
    if not codes:
        return None
    if len(codes) == 1:
        return next(iter(codes))
    for code in hints.codes:
        if code in codes:
            return code
    if hints.language:
        territory = _territory_of(hints.language)
        local = _territory_currencies().get(territory, ()) if territory else ()
        for candidate in (*local[:1], _language_symbols(hints.language).get(_key(raw))):
            if candidate in codes:
                return candidate
    return None
