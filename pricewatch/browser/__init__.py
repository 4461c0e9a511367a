"""JavaScript storefronts through scrapy-playwright, only where needed.

Most shops are fetched over plain HTTP; only the domains listed in
``PRICEWATCH_JS_DOMAINS``, or learned (a static fetch found no price, the page showed
client-side rendering, the browser then found one), go through a pooled headless browser.
The offer is read from the page's XHR/fetch JSON when there is one, else from the
rendered DOM. Images, media, fonts, stylesheets and trackers are not downloaded, pages
are closed whatever happens, and contexts are recycled so memory stays flat.

- :mod:`pricewatch.browser.addon`: settings wiring (launch options, blocking, router).
- :mod:`pricewatch.browser.handler`: the download handler that starts Playwright on first use.
- :mod:`pricewatch.browser.router`: routing, Playwright meta, waits, page lifecycle.
- :mod:`pricewatch.browser.capture`: XHR/fetch JSON capture.
- :mod:`pricewatch.browser.blocking`: ``PLAYWRIGHT_ABORT_REQUEST`` predicate.
- :mod:`pricewatch.browser.discovery`: which browser to launch.
- :mod:`pricewatch.browser.learned`: the learned routes, persisted in the frontier backend.
"""

from __future__ import annotations

from pricewatch.browser.addon import BrowserAddon
from pricewatch.browser.blocking import ResourceBlocker
from pricewatch.browser.capture import XhrCapture
from pricewatch.browser.discovery import BrowserNotFound, launch_options
from pricewatch.browser.handler import LazyBrowserDownloadHandler
from pricewatch.browser.router import BrowserRouter

__all__ = [
    "BrowserAddon",
    "BrowserNotFound",
    "BrowserRouter",
    "LazyBrowserDownloadHandler",
    "ResourceBlocker",
    "XhrCapture",
    "launch_options",
]
