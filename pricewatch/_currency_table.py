"""Generates ``currency_symbols.json``, the symbol table :mod:`pricewatch.currency` reads.

Building the table walks ~500 CLDR locales of babel (about a second of CPU): too much for
every crawl process to pay at start, and a worker thread does not help, since it holds the
interpreter lock while the event loop waits. So the table is generated here, from the
babel (CLDR) version pinned in ``constraints.txt``, and shipped with the package;
``tests/test_currency.py`` checks the shipped file equals a fresh build, so a babel upgrade
without regenerating fails the suite.

    python -m pricewatch._currency_table           # rewrite the file
    python -m pricewatch._currency_table --check   # exit 1 when it is out of date
"""

from __future__ import annotations

import json
import sys
from importlib import resources

import babel
from babel import localedata
from babel.core import get_global

from pricewatch.currency import (
    _SHOP_SYMBOLS,
    _TABLE_FILE,
    ISO_CODES,
    _key,
    _locale,
    _spaceless,
    _territory_currencies,
)

# Locales whose data babel may hold at once while the table is built: babel keeps every
# locale it loaded, each merged with its parents (~250 KB), ~130 MB for all of them.
_LOCALES_HELD = 50


def build() -> dict[str, list[str]]:
    """Symbol key -> the currencies in use that some locale writes with it: the symbol of
    every official locale of every territory using the currency, its names there, English's
    symbols, the codes themselves and the shop abbreviations CLDR lacks. Keys starting with
    ``~`` are the spaceless forms (``US $`` for ``US$``)."""
    table: dict[str, set[str]] = {}
    spaceless: dict[str, set[str]] = {}

    def add(symbol: str | None, code: str) -> None:
        if symbol and code in ISO_CODES:
            key = _key(symbol)
            if key and not key.isdigit():
                table.setdefault(key, set()).add(code)
                spaceless.setdefault(_spaceless(key), set()).add(code)

    available = set(localedata.locale_identifiers())
    languages = get_global("territory_languages")
    loaded = 0
    for territory, codes in _territory_currencies().items():
        for language, info in languages.get(territory, {}).items():
            identifier = f"{language}_{territory}"
            if not info.get("official_status") or identifier not in available:
                continue
            locale = _locale(identifier)
            if locale is None:
                continue
            for code in codes:
                add(locale.currency_symbols.get(code), code)
                add(locale.currencies.get(code), code)
                for name in locale._data["currency_names_plural"].get(code, {}).values():
                    add(name, code)
            del locale
            loaded += 1
            if loaded % _LOCALES_HELD == 0:
                localedata.clear_caches()
    localedata.clear_caches()
    english = _locale("en")
    assert english is not None
    for code in ISO_CODES:
        add(code, code)
        add(english.currency_symbols.get(code), code)
    for symbol, shop_codes in _SHOP_SYMBOLS.items():
        for code in shop_codes:
            add(symbol, code)
    out = {"~" + key: sorted(codes) for key, codes in spaceless.items()}
    out.update((key, sorted(codes)) for key, codes in table.items())
    return dict(sorted(out.items()))


def render(symbols: dict[str, list[str]]) -> str:
    """The file's text: JSON with one symbol a line, so a regeneration diffs readably."""
    lines = ",\n".join(
        f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(codes)}"
        for key, codes in symbols.items()
    )
    return f'{{"babel": {json.dumps(babel.__version__)},\n"symbols": {{\n{lines}\n}}}}\n'


def main(argv: list[str]) -> int:
    path = resources.files("pricewatch").joinpath(_TABLE_FILE)
    text = render(build())
    if "--check" in argv:
        if path.read_text(encoding="utf-8") != text:
            print(f"{path} is out of date: run python -m pricewatch._currency_table")
            return 1
        return 0
    with resources.as_file(path) as file:
        file.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
