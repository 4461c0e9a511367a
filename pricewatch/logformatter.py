"""Log lines about items carry their redacted form (``LOG_FORMATTER``).

Scrapy logs an item whole when it is dropped (WARNING by default), fails in a pipeline
(ERROR) or is scraped (DEBUG). An :class:`~pricewatch.items.OfferItem` is not validated
yet, so its free text (name, SKU, price text) may hold the e-mail addresses and phone
numbers that validation redacts before anything is stored; logs are kept longer and read
by more people than the store. This formatter logs every item as
:func:`redacted_item` renders it: free text through :func:`pricewatch.validation.redact`,
everything through :func:`pricewatch._text.visible`. The rendering waits until a handler
formats the line: Scrapy builds the "Scraped from" entry of every item whatever the log
level, and at the default INFO level nobody reads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.logformatter import LogFormatter

from pricewatch._text import visible
from pricewatch.items import ObservationItem, OfferItem
from pricewatch.validation import redact

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.http import Response
    from scrapy.logformatter import LogFormatterResult
    from twisted.python.failure import Failure

_FREE_TEXT = ("sku", "gtin", "name", "price_text", "regular_price_text")


def redacted_item(item: Any) -> str:
    """One line for the log: an item's fields, personal data redacted."""
    if isinstance(item, OfferItem):
        offer = item.offer
        fields: dict[str, object] = {"url": item.url, "domain": item.domain}
        for name in ("price", "currency", "regular_price", "availability", "source"):
            fields[name] = getattr(offer, name)
        for name in _FREE_TEXT:
            fields[name] = redact(getattr(offer, name))
        return visible(f"OfferItem {fields}")
    if isinstance(item, ObservationItem):  # validated: already redacted
        return visible(f"ObservationItem {item.observation}")
    return visible(redact(repr(item)) or "")


class RedactingLogFormatter(LogFormatter):
    """Scrapy's log formatter with items rendered by :func:`redacted_item`."""

    def scraped(
        self, item: Any, response: Response | Failure | None, spider: Spider
    ) -> LogFormatterResult:
        return _redacted(super().scraped(item, response, spider), item)

    def dropped(
        self,
        item: Any,
        exception: BaseException,
        response: Response | Failure | None,
        spider: Spider,
    ) -> LogFormatterResult:
        return _redacted(super().dropped(item, exception, response, spider), item)

    def item_error(
        self,
        item: Any,
        exception: BaseException,
        response: Response | Failure | None,
        spider: Spider,
    ) -> LogFormatterResult:
        return _redacted(super().item_error(item, exception, response, spider), item)


class Redacted:
    """An item as a log argument: rendered by :func:`redacted_item` when formatted."""

    __slots__ = ("item",)

    def __init__(self, item: Any) -> None:
        self.item = item

    def __str__(self) -> str:
        return redacted_item(self.item)

    __repr__ = __str__


def _redacted(entry: LogFormatterResult, item: Any) -> LogFormatterResult:
    """Scrapy's log entry with the item rendered by :func:`redacted_item`."""
    entry["args"]["item"] = Redacted(item)  # type: ignore[index]
    return entry
