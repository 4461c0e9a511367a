"""The storage interface: ``products`` (latest offer per SKU) and ``price_changes``
(append-only, one row per change, idempotent under replays).

Every backend (SQLite, PostgreSQL) implements :class:`Store` and passes the same tests
(``tests/test_store_contract.py``).
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal


@dataclass(frozen=True, slots=True)
class Observation:
    """One validated offer, as the validation stage hands it to the store.

    ``raw_hash`` is the deterministic hash of the normalised offer (price, regular price,
    currency, availability): equal hashes mean nothing changed.
    """

    url: str
    domain: str
    price: Decimal
    currency: str
    raw_hash: str
    observed_at: datetime  # timezone-aware UTC
    sku: str | None = None
    regular_price: Decimal | None = None
    availability: str | None = None
    name: str | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class Rejected:
    observation: Observation
    reason: str  # short code, used in the stat pricewatch/store/rejected/<reason>


@dataclass(slots=True)
class WriteResult:
    written: int = 0  # observations committed (changed or not)
    changed: set[str] = field(default_factory=set)  # urls whose offer changed (history row)
    rejected: list[Rejected] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ProductRow:
    url: str
    domain: str
    sku: str | None
    price: Decimal
    currency: str
    regular_price: Decimal | None
    availability: str | None
    name: str | None
    source: str | None
    first_seen_at: datetime
    checked_at: datetime
    changed_at: datetime


@dataclass(frozen=True, slots=True)
class ChangeRow:
    url: str
    sku: str | None
    price: Decimal
    currency: str
    regular_price: Decimal | None
    availability: str | None
    observed_at: datetime
    raw_hash: str


class Store(abc.ABC):
    url: str

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Connect and apply migrations. Raises ``StoreUnavailable`` naming the masked URL."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    @abc.abstractmethod
    async def write(self, batch: Sequence[Observation]) -> WriteResult:
        """Write a batch in one transaction: upsert ``products``; append a
        ``price_changes`` row only when ``raw_hash`` differs from the stored one; an
        unchanged observation only bumps ``checked_at``. Replaying a batch adds no row.
        A row that violates a constraint is rejected with a reason; the rest commits."""

    @abc.abstractmethod
    def latest(self, domain: str | None = None) -> AsyncIterator[ProductRow]:
        """The latest offer of every SKU, ordered by url, streamed."""

    @abc.abstractmethod
    async def history(self, url_or_sku: str) -> list[ChangeRow]:
        """The changes of one SKU (matched by url or sku), oldest first."""

    async def __aenter__(self) -> Store:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class StoreUnavailable(RuntimeError):
    """The store cannot be reached; the message names the masked URL."""
