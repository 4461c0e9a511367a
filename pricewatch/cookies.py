"""Scrapy's cookies middleware, with public suffixes decided offline.

Scrapy's ``CookiesMiddleware`` asks tldextract, with tldextract's defaults, whether the
``Domain`` of a cookie is a public suffix (a cookie for ``co.uk`` must not reach every shop
under it). On the first such cookie of a process those defaults download the public suffix
list from publicsuffix.org, then GitHub: a blocking HTTP call on the event loop, to hosts
the crawl's destination checks never saw, logged as two tracebacks where they are
unreachable, and a cache directory written under ``$HOME``. This middleware decides with
the list bundled with tldextract, the one pricewatch already groups hosts by
(``pricewatch._urls``): the same answers, no network, no files.

Enabled in ``DOWNLOADER_MIDDLEWARES`` in place of Scrapy's, at Scrapy's order (700); the
``cookiejar`` meta key, ``COOKIES_ENABLED`` and ``COOKIES_DEBUG`` work as documented by Scrapy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.cookies import CookiesMiddleware as ScrapyCookiesMiddleware
from scrapy.utils.httpobj import urlparse_cached

from pricewatch._urls import is_public_suffix

if TYPE_CHECKING:
    from collections.abc import Iterable
    from http.cookiejar import Cookie

    from scrapy import Request
    from scrapy.http.cookies import CookieJar


class CookiesMiddleware(ScrapyCookiesMiddleware):
    def _process_cookies(
        self, cookies: Iterable[Cookie], *, jar: CookieJar, request: Request
    ) -> None:
        host = urlparse_cached(request).hostname
        if host is None:
            return
        host = host.lower()
        for cookie in cookies:
            domain = cookie.domain.removeprefix(".")
            if domain and is_public_suffix(domain):
                # A public suffix is a cookie domain only for a host that is one itself.
                if domain != host:
                    continue
                cookie.domain = host
            jar.set_cookie_if_ok(cookie, request)


__all__ = ["CookiesMiddleware"]
