"""Visible-price heuristics (placeholder: structured data only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pricewatch.extract._candidate import Candidate


@dataclass(slots=True)
class VisibleReading:
    price: Decimal | None = None
    price_text: str | None = None
    currency: str | None = None
    regular: Decimal | None = None
    regular_text: str | None = None
    availability: str | None = None
    buy_button: bool = False
    strong: bool = False
    title: str | None = None
    amounts: set[Decimal] = field(default_factory=set)

    def as_candidate(self) -> Candidate | None:
        if self.price is None or not self.strong:
            return None
        return Candidate(
            source="visible",
            price=self.price,
            price_text=self.price_text,
            currency_raw=self.currency,
            regular_price=self.regular,
            regular_price_text=self.regular_text,
            availability=self.availability,
        )


def read_visible(root: Any, hints: tuple[str | None, ...]) -> VisibleReading:
    return VisibleReading()
