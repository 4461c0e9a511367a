"""Extraction: pure functions from a page (or a JSON payload) to an :class:`Offer`."""

from __future__ import annotations

from pricewatch.extract._candidate import normalise_availability
from pricewatch.extract._money import NOT_FOUND, REASONS, parse_machine
from pricewatch.extract.core import extract_offer
from pricewatch.extract.json_payload import extract_offer_from_json
from pricewatch.extract.offer import Offer
from pricewatch.extract.rules import Rules, load_rules

__all__ = [
    "NOT_FOUND",
    "REASONS",
    "Offer",
    "Rules",
    "extract_offer",
    "extract_offer_from_json",
    "load_rules",
    "normalise_availability",
    "parse_machine",
]
