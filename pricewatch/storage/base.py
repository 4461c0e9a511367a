"""The storage interface: ``products`` (latest offer per SKU) and ``price_changes``
(append-only, one row per change, idempotent under replays).

Every backend (SQLite, PostgreSQL) implements :class:`Store` and passes the same tests
(``tests/test_store_contract.py``).
"""

from __future__ import annotations

import abc
import csv
import io
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pricewatch.quarantine import MassGuard, QuarantineConfig


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
    # The configuration that produced it (pricewatch/configversion.py).
    config_version: str | None = None


@dataclass(frozen=True, slots=True)
class Rejected:
    observation: Observation
    reason: str  # short code, used in the stat pricewatch/store/rejected/<reason>


@dataclass(frozen=True, slots=True)
class PublishedChange:
    """A ``price_changes`` row this write inserted (not one a replay found already there),
    with the offer it replaced: what alerts are decided on (:mod:`pricewatch.alerts`).
    A SKU's first observation has no previous offer and is not listed."""

    url: str
    sku: str | None
    price: Decimal
    currency: str
    availability: str | None
    observed_at: datetime
    previous_price: Decimal
    previous_currency: str
    previous_availability: str | None


@dataclass(slots=True)
class WriteResult:
    written: int = 0  # observations committed (changed, unchanged or held)
    changed: set[str] = field(default_factory=set)  # urls whose offer changed (history row)
    rejected: list[Rejected] = field(default_factory=list)
    # Confirm before publishing (pricewatch/quarantine.py), when the store has a config:
    held: dict[str, str] = field(default_factory=dict)  # url -> reason: held, confirm soon
    confirmed: set[str] = field(default_factory=set)  # urls whose hold was confirmed here
    unconfirmed: list[tuple[str, str]] = field(default_factory=list)  # (url, reason) closed
    # unpublished (status rejected) by this batch
    # Changes this batch inserted into price_changes (a replay inserts none), in the order
    # written; a confirmed hold is listed here when the confirming fetch publishes it.
    published: list[PublishedChange] = field(default_factory=list)

    def merge_quarantine(self, part: WriteResult) -> None:
        """Take the quarantine outcomes and published changes of ``part`` (a piece of the
        batch that committed)."""
        self.published.extend(part.published)
        self.held.update(part.held)
        self.confirmed |= part.confirmed
        self.unconfirmed.extend(part.unconfirmed)


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
    raw_hash: str | None = None
    config_version: str | None = None


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
    # The configuration of the crawl that observed it; None for rows from before it was
    # recorded (pricewatch/configversion.py).
    config_version: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True, slots=True)
class HeldRow(ChangeRow):
    """An observation that was not published at once (table ``price_quarantine``):
    ``status`` ``held`` (waiting for a confirming fetch), ``confirmed`` (published as the
    confirming fetch's change) or ``rejected`` (never published); ``reason`` is why it
    was suspicious (see :mod:`pricewatch.quarantine`)."""

    reason: str
    status: str
    attempt: int
    resolved_at: datetime | None


CSV_COLUMNS = (
    "url",
    "domain",
    "sku",
    "name",
    "price",
    "currency",
    "regular_price",
    "availability",
    "first_seen_at",
    "checked_at",
    "changed_at",
)
"""Columns of ``scrapy prices --csv``, in order."""


class Store(abc.ABC):
    url: str
    # Holds suspicious changes until confirmed (pricewatch/quarantine.py); None: publish all.
    quarantine_config: QuarantineConfig | None = None
    # Counts each domain's changes and holds those of a mass change (pricewatch/drift.py);
    # used only with a quarantine config.
    mass_guard: MassGuard | None = None

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Connect and apply migrations. Raises ``StoreUnavailable`` naming the masked URL."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    async def migrate(self) -> list[int]:
        """Apply the pending schema migrations (idempotent); return the versions applied.
        Works on an unopened store (``scrapy db upgrade``)."""
        return []

    @abc.abstractmethod
    async def write(self, batch: Sequence[Observation]) -> WriteResult:
        """Write a batch in one transaction: upsert ``products``; append a
        ``price_changes`` row only when ``raw_hash`` differs from the stored one; an
        unchanged observation only bumps ``checked_at``. Replaying a batch adds no row.
        A row that violates a constraint is rejected with a reason; the rest commits.

        With a quarantine config (:mod:`pricewatch.quarantine`), a suspicious change is
        not published: it goes to ``price_quarantine`` as held (``WriteResult.held``) and
        is published only when a later observation agrees (``WriteResult.confirmed``)."""

    @abc.abstractmethod
    def latest(self, domain: str | None = None) -> AsyncIterator[ProductRow]:
        """The latest offer of every SKU, ordered by url, streamed."""

    @abc.abstractmethod
    async def history(self, url_or_sku: str) -> list[ChangeRow]:
        """The published changes of one SKU (matched by url or sku), oldest first."""

    @abc.abstractmethod
    async def quarantine(self, url_or_sku: str | None = None) -> list[HeldRow]:
        """The observations of one SKU (matched by url or sku; None: every SKU) that were
        not published at once, oldest first: held, confirmed or rejected."""

    async def export_csv(self, write: Callable[[bytes], object], domain: str | None = None) -> int:
        """Write the latest offers as UTF-8 CSV with a header (:data:`CSV_COLUMNS`) to
        ``write`` in chunks, in constant memory; return the number of rows. Money is the
        canonical decimal text as stored, times ISO-8601 UTC; a text cell that starts
        like a spreadsheet formula gets a leading ``'`` (:func:`pricewatch._text.csv_cell`)."""
        from pricewatch._text import csv_cell
        from pricewatch.storage._values import canonical_decimal, iso_utc

        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        rows = 0
        async for row in self.latest(domain):
            writer.writerow(
                (
                    csv_cell(row.url),
                    csv_cell(row.domain),
                    csv_cell(row.sku),
                    csv_cell(row.name),
                    canonical_decimal(row.price),
                    row.currency,
                    None if row.regular_price is None else canonical_decimal(row.regular_price),
                    row.availability,
                    iso_utc(row.first_seen_at),
                    iso_utc(row.checked_at),
                    iso_utc(row.changed_at),
                )
            )
            rows += 1
            if buffer.tell() >= 65536:
                write(buffer.getvalue().encode("utf-8"))
                buffer.seek(0)
                buffer.truncate()
        write(buffer.getvalue().encode("utf-8"))
        return rows

    async def __aenter__(self) -> Store:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class StoreUnavailable(RuntimeError):
    """The store cannot be reached; the message names the masked URL."""


class StoreConnectionLost(StoreUnavailable):
    """The connection broke during ``write`` (server restarted, network cut, timeout).

    Retryable: the batch was not committed, or (when the connection broke while the
    COMMIT itself was in flight) it was committed whole; never in part. Writes are
    idempotent under replay, so the caller retries the same batch with backoff.
    """
