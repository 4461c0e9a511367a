"""``PLAYWRIGHT_ABORT_REQUEST``: what the browser does not download, and where it may not go.

A price needs the document, its scripts and its XHR/fetch calls; images, media, fonts,
stylesheets and trackers only cost time and memory. :class:`ResourceBlocker` is the
predicate scrapy-playwright calls for every request a page makes (True = abort).

It also keeps the browser where the crawl may go (:mod:`pricewatch.destinations`): every
request a page makes (scripts, XHR, frames, a navigation started by the page) to a host
that resolves to a non-public address outside ``PRICEWATCH_ALLOWED_NETWORKS`` is aborted
before anything is sent, and logged once per host. Hosts are resolved off the event loop
and the verdict is kept per host. Redirects Chromium follows by itself are not seen by
request routing (a Playwright limit): the page's own URL and the redirects Scrapy sees
are checked by the downloader middleware.

Settings (read by :class:`pricewatch.browser.BrowserAddon`, which installs the blocker as
``PLAYWRIGHT_ABORT_REQUEST`` unless that is set; defaults: ``pricewatch/settings.py``):
- ``PRICEWATCH_BROWSER_BLOCK_RESOURCES``: Playwright resource types aborted. Empty: none.
- ``PRICEWATCH_BROWSER_BLOCK_URLS``: regular expressions (tag managers, analytics, ad and
  session-replay hosts) searched in every request URL; a match is aborted whatever its
  type. Empty: none.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from pricewatch.destinations import IPNetwork, refused

logger = logging.getLogger(__name__)

# Hosts whose verdict is kept; beyond it the memory starts over.
_VERDICTS_SIZE = 4096


def _is_main_frame(request: Any) -> bool:
    try:
        return request.frame.parent_frame is None
    except Exception:  # a service worker's request has no frame
        return False


# Chromium fetches a page's favicon itself, outside the page's request routing, so no
# PLAYWRIGHT_ABORT_REQUEST predicate sees it. Pointing icon links at an empty data: URL as
# the parser inserts them (before the browser reads them at load) keeps it from being fetched.
NO_FAVICON_JS = """
new MutationObserver((records) => {
  for (const record of records) for (const node of record.addedNodes)
    if (node.nodeName === "LINK" && /(^|\\s)icon(\\s|$)/i.test(node.rel || ""))
      node.href = "data:,";
}).observe(document, {childList: true, subtree: true});
"""


async def skip_favicon(page: Any, request: Any) -> None:
    """``playwright_page_init_callback`` used when images are blocked."""
    await page.add_init_script(NO_FAVICON_JS)


class ResourceBlocker:
    """Callable ``(playwright_request) -> awaitable bool``: abort this request?

    ``allowed``: the non-public networks the browser may reach (None: no destination
    check, for an operator who routes the browser through their own proxy)."""

    def __init__(
        self,
        resource_types: Iterable[str],
        url_patterns: Iterable[str],
        allowed: Iterable[IPNetwork] | None = None,
    ) -> None:
        self.allowed = tuple(allowed) if allowed is not None else None
        self._verdicts: dict[str, bool] = {}
        self.resource_types = frozenset(t.strip().lower() for t in resource_types if t.strip())
        patterns = [p for p in url_patterns if p]
        try:
            self._urls = re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None
        except re.error as exc:
            raise ValueError(
                f"PRICEWATCH_BROWSER_BLOCK_URLS must be regular expressions, got {patterns!r}: "
                f"{exc}"
            ) from None

    def blocks(self, url: str, resource_type: str) -> bool:
        if resource_type in self.resource_types:
            return True
        return self._urls is not None and self._urls.search(url) is not None

    async def __call__(self, request: Any) -> bool:
        url = request.url
        if self.allowed is not None and await self.refuses(url):
            return True
        if request.is_navigation_request() and _is_main_frame(request):
            return False  # the page itself is never aborted for its type
        return self.blocks(url, request.resource_type)

    async def refuses(self, url: str) -> bool:
        """``url``'s host resolves to an address the crawl may not reach."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
            return False  # data:, blob:, about: ... leave no machine
        host = parts.hostname
        verdict = self._verdicts.get(host)
        if verdict is None:
            verdict = await self._judge(host)
            if len(self._verdicts) >= _VERDICTS_SIZE:
                self._verdicts.clear()
            self._verdicts[host] = verdict
        return verdict

    async def _judge(self, host: str) -> bool:
        assert self.allowed is not None
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, None, proto=socket.IPPROTO_TCP
            )
        except (OSError, UnicodeError):
            return False  # does not resolve: the browser's own DNS error follows
        for info in infos:
            address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
            refusal = refused(host, address, self.allowed)
            if refusal is not None:
                logger.warning("Browser request refused: %s", refusal.reason)
                return True
        return False

    def __repr__(self) -> str:
        pattern = self._urls and self._urls.pattern
        return (
            f"ResourceBlocker({sorted(self.resource_types)}, {pattern!r}, allowed={self.allowed})"
        )
