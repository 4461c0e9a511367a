"""Where the crawler may go: never to a non-public address unless allowed.

A seeded URL, a redirect or a meta refresh may point at cloud metadata
(169.254.169.254), an internal service or the crawler's own machine. This downloader
middleware sits first (before robots.txt, which would fetch from the same host): every
request, including each redirect and refresh Scrapy follows, is checked on the address
its host *resolves* to, through Scrapy's own resolver (a thread, never the event loop;
its cache is the one the download then connects with), and remembered per host for the
crawl. A loopback, private, link-local, shared, multicast or reserved address outside
``PRICEWATCH_ALLOWED_NETWORKS`` ends the request with :class:`DestinationRefused`
(outcome ``skipped``), counted in ``pricewatch/destination/refused/<kind>``. A host that
does not resolve is let through: the download fails with the DNS error (outcome
``error``).

Settings:
- ``PRICEWATCH_ALLOWED_NETWORKS``: networks (CIDR) the crawler may reach although they
  are not public, e.g. ``["127.0.0.0/8"]`` for the sandbox.

Pages rendered in the browser (scrapy-playwright) are checked on their URL and each
redirect Scrapy sees; what the page then loads in the browser is checked with
:func:`refused` by :class:`pricewatch.browser.blocking.ResourceBlocker` (Playwright's
routing does not see redirects Chromium follows inside one request).
``scrapy extract URL`` checks its URL and every redirect it follows with :func:`refused`.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import TYPE_CHECKING

from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached

from pricewatch.exceptions import DestinationRefused

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Hosts whose verdict is remembered; beyond it the memory starts over.
_CACHE_SIZE = 65536


def allowed_networks(values: list[str]) -> tuple[IPNetwork, ...]:
    """The networks of ``PRICEWATCH_ALLOWED_NETWORKS``; ValueError naming a bad one."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValueError(
                f"PRICEWATCH_ALLOWED_NETWORKS must be CIDR networks (e.g. 10.0.0.0/8), "
                f"got {value!r}"
            ) from None
    return tuple(networks)


def non_public_kind(address: IPAddress) -> str | None:
    """Why ``address`` is not on the public internet (``loopback``, ``private``, …), or
    None when it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_global:
        return None
    for kind in ("loopback", "link_local", "unspecified", "multicast", "private"):
        if getattr(address, f"is_{kind}"):
            return kind
    return "reserved"  # shared (100.64/10), documentation, benchmarking, …


def refused(
    host: str, address: IPAddress, allowed: tuple[IPNetwork, ...]
) -> DestinationRefused | None:
    """Why ``host``, resolved to ``address``, may not be fetched; None when it may."""
    kind = non_public_kind(address)
    if kind is None or any(address in network for network in allowed):
        return None
    return DestinationRefused(
        f"{host} is {address} ({kind}), not a public address and not in "
        "PRICEWATCH_ALLOWED_NETWORKS",
        kind,
    )


class DestinationMiddleware:
    """See the module docstring."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.allowed = allowed_networks(crawler.settings.getlist("PRICEWATCH_ALLOWED_NETWORKS"))
        self._verdicts: dict[str, DestinationRefused | None] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DestinationMiddleware:
        return cls(crawler)

    @property
    def _stats(self) -> StatsCollector:
        assert self.crawler.stats is not None
        return self.crawler.stats

    async def process_request(self, request: Request) -> None:
        host = urlparse_cached(request).hostname
        if not host:
            return
        if host in self._verdicts:
            refusal = self._verdicts[host]
        else:
            address = await self._resolve(host)
            if address is None:
                return  # not resolvable: the download fails with the DNS error
            refusal = refused(host, address, self.allowed)
            if len(self._verdicts) >= _CACHE_SIZE:
                self._verdicts.clear()
            self._verdicts[host] = refusal
            if refusal is not None:
                logger.warning("Refusing %s: %s", host, refusal.reason)
        if refusal is not None:
            self._stats.inc_value("pricewatch/destination/refused")
            self._stats.inc_value(f"pricewatch/destination/refused/{refusal.kind}")
            raise DestinationRefused(f"{request.url}: {refusal.reason}", refusal.kind)

    @staticmethod
    async def _resolve(host: str) -> IPAddress | None:
        try:
            return ipaddress.ip_address(host)
        except ValueError:
            pass
        from twisted.internet import reactor

        try:
            # Scrapy's resolver (DNS_RESOLVER): a thread pool and the DNS cache that the
            # download connects with, so the address checked is the address used.
            resolved = await maybe_deferred_to_future(reactor.resolve(host))  # type: ignore[attr-defined,arg-type]
            return ipaddress.ip_address(resolved)
        except Exception:
            return None
