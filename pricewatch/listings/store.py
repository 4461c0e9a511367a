"""Where listings and their traversal state live: the frontier's own backend.

Every backend (the frontier's SQLite file, the frontier's Redis) implements
:class:`ListingStore` and passes the same tests (``tests/test_listings_store.py``). A
listing is claimed with a lease, like a SKU: never from a domain whose circuit is open,
one worker at a time; every saved page extends the lease; a lease that expires (a crash)
lets the next claim resume the traversal from its saved cursor.

Members: which product URLs a listing listed, with the number of the traversal that last
listed each. Delisting reads them (:mod:`pricewatch.listings.delisting`).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pricewatch._urls import frontier_backend
from pricewatch.listings.model import Listing, ListingInfo, ListingLease, Traversal

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


class ListingStore(abc.ABC):
    url: str

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Connect and create what is missing (``FrontierUnavailable`` when unreachable)."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    @abc.abstractmethod
    async def add(self, listings: Iterable[Listing]) -> int:
        """Register listings, due now; idempotent: a known URL keeps its schedule and
        traversal state (its kind, period and options are updated). Returns how many
        were new."""

    @abc.abstractmethod
    async def claim(self, n: int, ttl: float) -> list[ListingLease]:
        """Up to ``n`` due listings not leased (or whose lease expired), never of a paused
        domain, each leased for ``ttl`` seconds; most overdue first."""

    @abc.abstractmethod
    async def save(
        self, lease: ListingLease, traversal: Traversal, *, ttl: float, due_in: float | None
    ) -> bool:
        """Persist ``traversal``. With ``due_in`` (seconds) the lease ends and the listing
        is due again then; without, the lease is extended by ``ttl``. False (nothing
        written) when the lease is no longer current."""

    @abc.abstractmethod
    async def get(self, url: str) -> ListingInfo | None: ...

    @abc.abstractmethod
    async def all(self) -> list[ListingInfo]: ...

    @abc.abstractmethod
    async def remove(self, url: str) -> bool:
        """Forget a listing and its members (the products it found stay scheduled)."""

    @abc.abstractmethod
    async def mark_members(self, listing: str, urls: Sequence[str], number: int) -> list[str]:
        """Record that traversal ``number`` of ``listing`` listed ``urls``; returns those
        that were not members before (new to the listing)."""

    @abc.abstractmethod
    async def stale_members(self, listing: str, before: int) -> list[str]:
        """Members last listed by a traversal numbered below ``before``."""

    @abc.abstractmethod
    async def drop_members(self, listing: str, urls: Sequence[str]) -> None: ...

    @abc.abstractmethod
    async def listed_elsewhere(self, listing: str, urls: Sequence[str]) -> set[str]:
        """Those of ``urls`` that another registered listing has as members."""

    async def __aenter__(self) -> ListingStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def listing_store_from_url(url: str, settings: BaseSettings | None = None) -> ListingStore:
    """Build (not open) the listing store of the frontier at ``url``."""
    if frontier_backend(url) == "sqlite":
        from pricewatch.listings.sqlite import SQLiteListingStore

        return SQLiteListingStore(url)
    from pricewatch.listings.redis import RedisListingStore

    return RedisListingStore(url, settings=settings)


def listing_store_from_settings(settings: BaseSettings) -> ListingStore:
    return listing_store_from_url(settings["PRICEWATCH_FRONTIER_URL"], settings)
