"""How each sandbox shop writes its prices: one currency and one locale per shop.

Markup (JSON-LD ``price``, microdata ``content``, OpenGraph ``product:price:amount``) carries
the machine format (``"1299.00"``); the visible text is localised the way shops print it.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal


@dataclass(frozen=True, slots=True)
class Locale:
    currency: str  # ISO 4217
    lang: str  # BCP 47, for <html lang>
    decimals: int  # minor digits the currency is printed with
    group: str  # thousands separator
    point: str  # decimal separator
    pattern: str  # where the number goes, e.g. "{n} €"
    scale: int  # price level relative to EUR/USD (JPY prices are ~150x)

    def quantize(self, amount: Decimal) -> Decimal:
        exp = Decimal(1).scaleb(-self.decimals)
        return amount.quantize(exp, rounding=ROUND_HALF_UP)

    def machine(self, amount: Decimal) -> str:
        """The markup form: ``1299.00`` (``1299`` for currencies without minor units)."""
        return str(self.quantize(amount))

    def display(self, amount: Decimal) -> str:
        """The visible form: ``1.299,00 €``, ``$1,299.99``, ``CHF 1'234.50``, ``¥1,299``."""
        text = self.machine(amount)
        whole, _, frac = text.partition(".")
        groups: list[str] = []
        while len(whole) > 3:
            groups.insert(0, whole[-3:])
            whole = whole[:-3]
        groups.insert(0, whole)
        number = self.group.join(groups)
        if self.decimals:
            number = f"{number}{self.point}{frac}"
        return self.pattern.format(n=number)


# The order shops get them in: shop 0 is EUR, shop 1 USD, ... and then it wraps around.
LOCALES: tuple[Locale, ...] = (
    Locale("EUR", "de-DE", 2, ".", ",", "{n} €", 1),
    Locale("USD", "en-US", 2, ",", ".", "${n}", 1),
    Locale("CHF", "de-CH", 2, "'", ".", "CHF {n}", 1),
    Locale("JPY", "ja-JP", 0, ",", ".", "¥{n}", 150),
    Locale("BRL", "pt-BR", 2, ".", ",", "R$ {n}", 5),
    Locale("GBP", "en-GB", 2, ",", ".", "£{n}", 1),
)
# Never in the rotation (that would change existing shops): chosen with ``currencies``.
# Three-decimal currencies as their shops print them (``423.923 KD``, ``123,456.789 OMR``).
EXTRA_LOCALES: tuple[Locale, ...] = (
    Locale("KWD", "en-KW", 3, ",", ".", "{n} KD", 1),
    Locale("OMR", "en-OM", 3, ",", ".", "{n} OMR", 1),
)
BY_CURRENCY: dict[str, Locale] = {loc.currency: loc for loc in LOCALES + EXTRA_LOCALES}
