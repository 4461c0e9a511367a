"""``PLAYWRIGHT_ABORT_REQUEST``: what the browser does not download.

A price needs the document, its scripts and its XHR/fetch calls; images, media, fonts,
stylesheets and trackers only cost time and memory. :class:`ResourceBlocker` is the
predicate scrapy-playwright calls for every request a page makes (True = abort).

Settings (read by :class:`pricewatch.browser.BrowserAddon`, which installs the blocker as
``PLAYWRIGHT_ABORT_REQUEST`` unless that is set; defaults: ``pricewatch/settings.py``):
- ``PRICEWATCH_BROWSER_BLOCK_RESOURCES``: Playwright resource types aborted. Empty: none.
- ``PRICEWATCH_BROWSER_BLOCK_URLS``: regular expressions (tag managers, analytics, ad and
  session-replay hosts) searched in every request URL; a match is aborted whatever its
  type. Empty: none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any


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
    """Callable ``(playwright_request) -> bool``: abort this request?"""

    def __init__(self, resource_types: Iterable[str], url_patterns: Iterable[str]) -> None:
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

    def __call__(self, request: Any) -> bool:
        if request.is_navigation_request() and _is_main_frame(request):
            return False  # the page itself is never aborted
        return self.blocks(request.url, request.resource_type)

    def __repr__(self) -> str:
        return (
            f"ResourceBlocker({sorted(self.resource_types)}, {self._urls and self._urls.pattern!r})"
        )
