"""Products that disappear from a listing: retired with reason ``delisted``.

After a traversal ends ``done``, a member of the listing that none of its last ``K``
complete traversals listed (``PRICEWATCH_LISTING_DELIST_AFTER``) leaves the listing; it is
retired from the frontier unless another listing still lists it. Incomplete traversals
(``looped``, ``truncated``, ``failed``) neither trigger this nor count towards ``K``: a
product a traversal did not reach is never taken for a product that is gone. A retired
product that a listing lists again is put back on the schedule
(:meth:`~pricewatch.frontier.Frontier.reinstate`).
"""

from __future__ import annotations

import logging

from pricewatch.frontier import Frontier
from pricewatch.listings.model import Traversal
from pricewatch.listings.store import ListingStore

logger = logging.getLogger(__name__)

REASON = "delisted"


async def delist(
    store: ListingStore, frontier: Frontier, listing: str, t: Traversal, after: int
) -> int:
    """Retire what ``listing`` stopped listing; returns how many products were retired."""
    if after <= 0 or t.state != "done" or len(t.done_numbers) < after:
        return 0
    threshold = t.done_numbers[-after]
    stale = await store.stale_members(listing, threshold)
    if not stale:
        return 0
    kept = await store.listed_elsewhere(listing, stale)
    gone = [url for url in stale if url not in kept]
    retired = await frontier.retire(gone, REASON) if gone else 0
    await store.drop_members(listing, stale)
    logger.info(
        "Listing %s: %d products no longer listed (%d kept: another listing has them), "
        "%d retired as delisted",
        listing,
        len(stale),
        len(kept),
        retired,
    )
    return retired
