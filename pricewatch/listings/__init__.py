"""Catalogue discovery: listings (sitemaps, category pages, cursor APIs, infinite scroll)
traversed on their own schedule, the products they list added to the frontier.

See :mod:`pricewatch.listings.model` (what is stored), :mod:`~pricewatch.listings.parse`
(reading one page), :mod:`~pricewatch.listings.traversal` (the state machine),
:mod:`~pricewatch.listings.store` (the backends), :mod:`~pricewatch.listings.delisting`,
and the ``listings`` spider (:mod:`pricewatch.spiders.listings`).
"""

from __future__ import annotations

from pricewatch.listings.model import (
    KINDS,
    OPTIONS,
    STATES,
    Listing,
    ListingInfo,
    ListingLease,
    Traversal,
)
from pricewatch.listings.store import (
    ListingStore,
    listing_store_from_settings,
    listing_store_from_url,
)

__all__ = [
    "KINDS",
    "OPTIONS",
    "STATES",
    "Listing",
    "ListingInfo",
    "ListingLease",
    "ListingStore",
    "Traversal",
    "listing_store_from_settings",
    "listing_store_from_url",
]
