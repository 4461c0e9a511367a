"""Extraction: pure functions from a page to an :class:`Offer`."""

from __future__ import annotations

from pricewatch.extract.offer import Offer

__all__ = ["Offer"]
