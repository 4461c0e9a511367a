"""Items passed from the spider to the pipelines."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from pricewatch.extract import Offer
from pricewatch.frontier import Lease
from pricewatch.storage import Observation


@dataclass(slots=True)
class OfferItem:
    """What the spider extracted from one page, not yet validated."""

    url: str  # the scheduled URL (the SKU's identity), not a redirect target
    domain: str
    offer: Offer
    fetched_at: datetime  # timezone-aware UTC
    lease: Lease | None = None

    @classmethod
    def fetched(cls, lease: Lease, offer: Offer) -> OfferItem:
        """The offer just read for ``lease`` (at its scheduled URL), fetched now."""
        return cls(
            url=lease.url,
            domain=lease.domain,
            offer=offer,
            fetched_at=datetime.now(UTC),
            lease=lease,
        )


@dataclass(slots=True)
class ObservationItem:
    """A validated observation on its way to the store, with the lease to acknowledge."""

    observation: Observation
    lease: Lease | None = None
