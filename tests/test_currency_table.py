"""The shipped currency symbol table is what CLDR (the pinned babel) says today."""

from __future__ import annotations

from importlib import resources

import pytest

from pricewatch import _currency_table, currency


def test_the_shipped_table_equals_a_fresh_build_from_cldr() -> None:
    shipped = resources.files("pricewatch").joinpath(currency._TABLE_FILE).read_text("utf-8")
    assert shipped == _currency_table.render(_currency_table.build()), (
        "currency_symbols.json is out of date: run python -m pricewatch._currency_table"
    )


def test_check_reports_a_stale_table(monkeypatch: pytest.MonkeyPatch) -> None:
    real = _currency_table.build()
    stale = {key: codes for key, codes in real.items() if key != "kd"}
    monkeypatch.setattr(_currency_table, "build", lambda: stale)
    assert _currency_table.main(["--check"]) == 1
    monkeypatch.setattr(_currency_table, "build", lambda: real)
    assert _currency_table.main(["--check"]) == 0


def test_a_currency_withdrawn_after_the_table_was_made_resolves_to_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert currency.resolve_currency("KD") == "KWD"
    monkeypatch.setattr(currency, "ISO_CODES", currency.ISO_CODES - {"KWD"})
    currency._load_symbol_table.cache_clear()
    try:
        assert currency.resolve_currency("KD") is None
    finally:
        monkeypatch.undo()
        currency._load_symbol_table.cache_clear()
    assert currency.resolve_currency("KD") == "KWD"
