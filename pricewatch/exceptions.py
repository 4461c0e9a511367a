"""Exceptions that carry a fetch outcome from the downloader middlewares to the spider's
errback, which completes the lease exactly once."""

from __future__ import annotations

from scrapy.exceptions import IgnoreRequest


class Blocked(IgnoreRequest):
    """The shop refused us (429/403 after retries, a challenge page): outcome ``blocked``.
    ``retry_after`` (seconds) is the earliest time to try again, if the shop said so."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class DomainDeferred(IgnoreRequest):
    """Not fetched now (open circuit): outcome ``skipped``, rescheduled after
    ``retry_after`` seconds; the URL is never lost."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class ProxiesBenched(DomainDeferred):
    """Not fetched now: every proxy of the domain's pool is benched. Outcome ``skipped``
    (reason ``proxies_benched``), rescheduled after ``retry_after`` seconds, never sent
    without a proxy."""


class DestinationRefused(IgnoreRequest):
    """The URL's host resolves outside the public internet and outside
    ``PRICEWATCH_ALLOWED_NETWORKS``: outcome ``skipped``, nothing was sent."""

    def __init__(self, reason: str, kind: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


class RobotsDisallowed(IgnoreRequest):
    """The shop's robots.txt disallows the URL: outcome ``skipped`` (reason ``robots_txt``),
    never fetched."""
