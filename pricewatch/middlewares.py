"""The middlewares of a pricewatch crawl, in the order a request meets them.

``settings.py`` registers each one by its real path (``DOWNLOADER_MIDDLEWARES``,
``SPIDER_MIDDLEWARES``); this module introduces them and re-exports the project's own, so
``from pricewatch.middlewares import CircuitBreakerMiddleware`` works as well.

Downloader middlewares (a request goes down the orders, its response comes back up):

- 50 ``DestinationMiddleware`` (:mod:`pricewatch.destinations`): refuses hosts that resolve
  to non-public addresses outside ``PRICEWATCH_ALLOWED_NETWORKS`` (outcome ``skipped``),
  before robots.txt fetches anything from them.
- 100 ``RobotsTxtMiddleware`` (:mod:`pricewatch.robotstxt`), in place of Scrapy's
  (``ROBOTSTXT_OBEY``): disallowed product URLs end as ``skipped``, never fetched, also
  those that waited for robots.txt together (docs/robots-txt-race.md).
- 300-500 Scrapy's auth, timeout, default headers and ``USER_AGENT``.
- 550 ``BackoffRetryMiddleware`` (:mod:`pricewatch.politeness.backoff`), in place of
  Scrapy's ``RetryMiddleware``: retries 429/5xx with exponential backoff, full jitter and
  Retry-After, held in the scheduler (:class:`~pricewatch.politeness.scheduler.
  BackoffScheduler`) rather than in a download slot.
- 560 ``OfficialSourceMiddleware`` (:mod:`pricewatch.politeness.fallback`): a domain whose
  circuit has been open too long is read from its official source, same lease.
- 570 ``CircuitBreakerMiddleware`` (:mod:`pricewatch.politeness.breaker`): per-domain
  circuit breaker shared through the frontier, and challenge-page detection; it sits
  below HTTP decompression (590), so it sees every response decompressed, and above the
  retry, so a block is counted before a retry is decided.
- 580 ``AdaptiveLimitMiddleware`` (:mod:`pricewatch.politeness.adaptive`): each
  domain's concurrency and delay follow its own answers (additive increase while healthy,
  halved on 429/503, challenge pages, timeouts or a latency rise), shared through the
  frontier; above the breaker, so pushback lowers the limit before the breaker pauses the
  shop.
- 585 ``SessionMiddleware`` (:mod:`pricewatch.sessions`), only with ``PRICEWATCH_PROXIES``:
  gives each request its domain's session (a proxy, a cookie jar, a user agent) through
  Scrapy's own ``proxy`` and ``cookiejar`` meta keys, retires blocked and worn-out
  sessions, benches failing proxies per domain; below decompression (590), so it sees
  challenge pages, and above the breaker and the retry, so a blocked request is asked again
  on another proxy first.
- 587 ``AuditMiddleware`` (:mod:`pricewatch.audit`), only with ``PRICEWATCH_AUDIT_FILE``:
  records each download error in the audit trail (responses are recorded as they arrive,
  from the ``response_downloaded`` signal, before the breaker counts them).
- 580-900 Scrapy's meta refresh, decompression, redirects, proxy (750: credentials from
  the session's proxy URL), stats, cache.
- 700 ``CookiesMiddleware`` (:mod:`pricewatch.cookies`), in place of Scrapy's: one jar per
  session; whether a cookie's ``Domain`` is a public suffix is decided with the bundled
  list, never by downloading it on the event loop.
- Then the download itself: plain HTTP, or the browser (scrapy-playwright's download
  handler) for requests the browser routing marked. Routing is not a middleware: the
  spider asks :class:`~pricewatch.browser.router.BrowserRouter` (an extension that
  :class:`~pricewatch.browser.BrowserAddon` registers) for each request's meta, see
  :mod:`pricewatch.browser`.

Spider middlewares:

- 0 ``LeaseArrivalMiddleware`` and 10000 ``LeaseDepartureMiddleware``
  (:mod:`pricewatch.leaseguard`), around all the others: a leased request that leaves the
  spider and is dropped before the engine (URL length, depth, ...) or by the scheduler
  ends its lease as ``error``.
- Scrapy's start (25) and HTTP error (50) middlewares; ``HTTPERROR_ALLOWED_CODES`` lets
  404/410/403/429 reach the spider, which records ``gone``/``blocked``.
- 600 ``OfficialCrossCheckMiddleware`` (:mod:`pricewatch.politeness.fallback`): checks a
  sample of page offers against the domain's official source.
- Scrapy's referer, URL length, depth and meta-copy middlewares (700-1000).
"""

from __future__ import annotations

from pricewatch.audit import AuditMiddleware
from pricewatch.cookies import CookiesMiddleware
from pricewatch.destinations import DestinationMiddleware
from pricewatch.leaseguard import LeaseArrivalMiddleware, LeaseDepartureMiddleware
from pricewatch.politeness.adaptive import AdaptiveLimitMiddleware
from pricewatch.politeness.backoff import BackoffRetryMiddleware
from pricewatch.politeness.breaker import CircuitBreakerMiddleware
from pricewatch.politeness.fallback import OfficialCrossCheckMiddleware, OfficialSourceMiddleware
from pricewatch.robotstxt import RobotsTxtMiddleware
from pricewatch.sessions import SessionMiddleware

__all__ = [
    "AdaptiveLimitMiddleware",
    "AuditMiddleware",
    "BackoffRetryMiddleware",
    "CircuitBreakerMiddleware",
    "CookiesMiddleware",
    "DestinationMiddleware",
    "LeaseArrivalMiddleware",
    "LeaseDepartureMiddleware",
    "OfficialCrossCheckMiddleware",
    "OfficialSourceMiddleware",
    "RobotsTxtMiddleware",
    "SessionMiddleware",
]
