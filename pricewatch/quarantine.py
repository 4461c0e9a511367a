"""Confirm before publishing: a suspicious change of a stored price is held until a
second fetch agrees.

The store knows the last published offer of a SKU; when a new observation would change
it suspiciously, the store does not publish it but records it as *held* (table
``price_quarantine``) with its reason, and the write result names the URL so that the
pipeline completes its lease with ``Completion.confirm_in``: the frontier makes the SKU
due again after ``PRICEWATCH_QUARANTINE_CONFIRM_DELAY`` instead of its normal interval.
The next observation then decides:

- it agrees with the held one (same price and currency): the hold is ``confirmed`` and
  the observation is published as a normal change;
- it is not suspicious against the published offer (the glitch went away, or a normal
  move): the hold is ``rejected`` and the observation is written as usual;
- it is suspicious again but different: the hold is ``rejected`` and the new one is held
  in its place, as the next attempt of the same chain; after
  ``PRICEWATCH_QUARANTINE_MAX_CONFIRMATIONS`` attempts the last one is ``rejected`` too
  and the SKU goes back to its normal schedule (a later fetch may start a new chain).

Suspicious (reason codes, also in the stats ``pricewatch/quarantine/held/<reason>``):

- ``currency_change``: another currency than the published one;
- ``ratio_up`` / ``ratio_down``: the price is more than ``PRICEWATCH_QUARANTINE_RATIO``
  times the published one, or less than the published one divided by it;
- ``new_minimum``: a price below ``PRICEWATCH_QUARANTINE_MINIMUM_FLOOR`` times the lowest
  price ever published for the SKU in that currency;
- ``mass_change`` / ``mass_out_of_stock``: the SKU's domain is in a mass change (more than
  ``PRICEWATCH_DRIFT_MASS_CHANGE_RATE`` of its observations in the window changed price,
  or more than ``PRICEWATCH_DRIFT_MASS_OUT_OF_STOCK_RATE`` went out of stock; counted by
  the store's :class:`MassGuard`, see :mod:`pricewatch.drift`) and this observation is part
  of it. A genuine shop-wide sale is published by the confirming fetch, a broken template
  that reverts is never published.

Nothing is held for a SKU's first observation (there is nothing to compare with).
Decisions are pure (:func:`decide`), shared by every store backend, and idempotent under
replays (a held observation replayed is recognised by its ``(url, observed_at)``).

Settings (read once by :meth:`QuarantineConfig.from_settings`):
``PRICEWATCH_QUARANTINE_ENABLED``, ``PRICEWATCH_QUARANTINE_RATIO``,
``PRICEWATCH_QUARANTINE_MINIMUM_FLOOR``, ``PRICEWATCH_QUARANTINE_CONFIRM_DELAY``,
``PRICEWATCH_QUARANTINE_MAX_CONFIRMATIONS``; defaults in ``pricewatch/settings.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from pricewatch import settings as defaults

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from pricewatch.storage.base import Observation

# Statuses of a row of ``price_quarantine``.
HELD = "held"  # waiting for a confirming fetch; not published
CONFIRMED = "confirmed"  # a second fetch agreed: published (as that fetch's change)
REJECTED = "rejected"  # never published: the next fetch disagreed, or attempts ran out
STATUSES = (HELD, CONFIRMED, REJECTED)

REASONS = (
    "currency_change",
    "ratio_up",
    "ratio_down",
    "new_minimum",
    "mass_change",
    "mass_out_of_stock",
)
OUT_OF_STOCK = "OutOfStock"

STATS = (
    "pricewatch/quarantine/held",  # observations held (not published), and per reason
    "pricewatch/quarantine/confirmed",  # holds a second fetch confirmed (then published)
    "pricewatch/quarantine/rejected",  # holds closed unpublished
)


def _decimal(settings: BaseSettings, name: str) -> Decimal:
    raw = settings.get(name)
    try:
        value = Decimal(str(raw))
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite():
        raise ValueError(f"{name} must be a number, got {raw!r}")
    return value


@dataclass(frozen=True, slots=True)
class QuarantineConfig:
    """The thresholds of :func:`decide` and the confirmation schedule."""

    ratio: Decimal = Decimal(defaults.PRICEWATCH_QUARANTINE_RATIO)
    minimum_floor: Decimal = Decimal(defaults.PRICEWATCH_QUARANTINE_MINIMUM_FLOOR)
    confirm_delay: float = defaults.PRICEWATCH_QUARANTINE_CONFIRM_DELAY
    max_confirmations: int = defaults.PRICEWATCH_QUARANTINE_MAX_CONFIRMATIONS

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> QuarantineConfig | None:
        """The configuration, or None when ``PRICEWATCH_QUARANTINE_ENABLED`` is off."""
        if not settings.getbool("PRICEWATCH_QUARANTINE_ENABLED"):
            return None
        config = cls(
            ratio=_decimal(settings, "PRICEWATCH_QUARANTINE_RATIO"),
            minimum_floor=_decimal(settings, "PRICEWATCH_QUARANTINE_MINIMUM_FLOOR"),
            confirm_delay=settings.getfloat("PRICEWATCH_QUARANTINE_CONFIRM_DELAY"),
            max_confirmations=settings.getint("PRICEWATCH_QUARANTINE_MAX_CONFIRMATIONS"),
        )
        if config.ratio <= 1:
            raise ValueError(f"PRICEWATCH_QUARANTINE_RATIO must be > 1, got {config.ratio}")
        if not 0 <= config.minimum_floor < 1:
            raise ValueError(
                "PRICEWATCH_QUARANTINE_MINIMUM_FLOOR must be >= 0 and < 1, got "
                f"{config.minimum_floor}"
            )
        if config.confirm_delay < 0:
            raise ValueError(
                f"PRICEWATCH_QUARANTINE_CONFIRM_DELAY must be >= 0, got {config.confirm_delay}"
            )
        if config.max_confirmations < 1:
            raise ValueError(
                "PRICEWATCH_QUARANTINE_MAX_CONFIRMATIONS must be >= 1, got "
                f"{config.max_confirmations}"
            )
        return config

    def suspicion(self, published: Published, price: Decimal, currency: str) -> str | None:
        """Why publishing ``price currency`` over ``published`` is suspicious, or None."""
        if currency != published.currency:
            return "currency_change"
        old = published.price
        if old > 0 and price > old * self.ratio:
            return "ratio_up"
        if price * self.ratio < old:
            return "ratio_down"
        low = published.min_price
        if low is not None and price < low and price < low * self.minimum_floor:
            return "new_minimum"
        return None


@dataclass(frozen=True, slots=True)
class Published:
    """What the store holds for a SKU: the published offer and its lowest price."""

    price: Decimal
    currency: str
    checked_at: datetime
    min_price: Decimal | None  # lowest published price in ``currency``
    availability: str | None = None


@dataclass(frozen=True, slots=True)
class Hold:
    """The open hold of a SKU (status ``held``)."""

    observed_at: datetime
    price: Decimal
    currency: str
    reason: str
    attempt: int  # 1 for the first suspicious observation of a chain


class Action(StrEnum):
    PUBLISH = "publish"  # write as usual (no hold involved, or a late replay)
    HOLD = "hold"  # record as held, do not publish; confirm soon
    CONFIRM = "confirm"  # close the open hold as confirmed, publish the observation
    REVERT = "revert"  # close the open hold as rejected, write the observation as usual
    REPLACE = "replace"  # close the open hold as rejected, hold this one instead
    GIVE_UP = "give_up"  # close the open hold as rejected, record this one as rejected
    DISCARD = "discard"  # record this one as rejected, leave the open hold as it is


@dataclass(frozen=True, slots=True)
class Verdict:
    action: Action
    reason: str | None = None  # the suspicion of the observation held / rejected
    attempt: int = 0  # its attempt number in the chain


class MassGuard(Protocol):
    """Counts a domain's observations and says when one is part of a mass change
    (:class:`pricewatch.drift.MassChanges`); called from the store's writer, any thread."""

    def observe(self, domain: str, changed: bool, out_of_stock: bool) -> str | None: ...


def mass_reason(
    guard: MassGuard | None, published: Published, hold: Hold | None, obs: Observation
) -> str | None:
    """Count ``obs`` in its domain's window and return ``mass_change`` or
    ``mass_out_of_stock`` when it is part of one. A confirming fetch (an open hold) and a
    late replay are not counted."""
    if guard is None or hold is not None or obs.observed_at <= published.checked_at:
        return None
    changed = obs.price != published.price or obs.currency != published.currency
    out_of_stock = obs.availability == OUT_OF_STOCK and published.availability != OUT_OF_STOCK
    return guard.observe(obs.domain, changed, out_of_stock)


def decide(
    config: QuarantineConfig,
    published: Published | None,
    hold: Hold | None,
    obs: Observation,
    mass: str | None = None,
) -> Verdict:
    """What the store does with ``obs`` (not yet recorded in ``price_quarantine``);
    ``mass`` is its :func:`mass_reason`.

    The caller handles replays first: an observation already in ``price_quarantine``
    changes nothing."""
    if published is None or obs.observed_at <= published.checked_at:
        return Verdict(Action.PUBLISH)  # first sighting, or older than what is stored
    if hold is not None and obs.observed_at > hold.observed_at:
        if obs.currency == hold.currency and obs.price == hold.price:
            return Verdict(Action.CONFIRM, hold.reason, hold.attempt)
        reason = config.suspicion(published, obs.price, obs.currency)
        if reason is None:
            return Verdict(Action.REVERT)
        if hold.attempt >= config.max_confirmations:
            return Verdict(Action.GIVE_UP, reason, hold.attempt + 1)
        return Verdict(Action.REPLACE, reason, hold.attempt + 1)
    reason = config.suspicion(published, obs.price, obs.currency) or mass
    if reason is None:
        return Verdict(Action.PUBLISH)
    if hold is not None:  # older than the open hold but newer than the published offer
        return Verdict(Action.DISCARD, reason, hold.attempt)
    return Verdict(Action.HOLD, reason, 1)
