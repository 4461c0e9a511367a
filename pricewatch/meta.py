"""Every ``Request.meta`` key of pricewatch, in one place.

One naming scheme: the project's own keys are lowercase ``pricewatch_<component>_<what>``;
a per-request override that beats a setting is Scrapy-style ``dont_<verb>`` (as Scrapy's
``dont_retry``, ``dont_redirect``). Components import the constant
(``from pricewatch.meta import LEASE_META``), never spell the string.
The README's "Request.meta keys" table lists the same keys.

Keys an operator or a spider may set:

- ``dont_break_circuit`` (:data:`DONT_BREAK_CIRCUIT_META`): True: the circuit breaker neither
  gates nor counts the request.

Keys the project sets and reads itself:

- ``pricewatch_lease`` (:data:`LEASE_META`): the frontier lease of the request (spider); every
  component that ends a fetch completes it exactly once.
- ``pricewatch_listing`` (:data:`LISTING_META`): the listing traversal a request fetches a page
  of (listings spider): its lease and its state after the last saved page.
- ``pricewatch_listing_xhr`` (:data:`LISTING_XHR_META`): the capture of the JSON a scroll
  listing's page requests, loaded in the browser to find its endpoint (listings spider).
- ``pricewatch_not_before`` (:data:`NOT_BEFORE_META`): ``time.monotonic()`` seconds before
  which the scheduler does not send a held retry (backoff retry).
- ``pricewatch_breaker_probe`` (:data:`BREAKER_PROBE_META`): token of the half-open probe the
  request carries (breaker).
- ``pricewatch_breaker_counted`` (:data:`BREAKER_COUNTED_META`): the block of this request was
  already counted at download time (breaker).
- ``pricewatch_limit_generation`` (:data:`LIMIT_GENERATION_META`): the generation of the
  domain's adaptive limit when the request was sent; pushback to a request sent before the
  last decrease lowers nothing more (adaptive limit).
- ``pricewatch_fallback_official`` (:data:`FALLBACK_OFFICIAL_META`): the request goes to a
  domain's official source (fallback).
- ``pricewatch_fallback_deferred`` (:data:`FALLBACK_DEFERRED_META`): ``retry_after`` of the
  deferral an official-source request replaced (fallback).
- ``pricewatch_fallback_page`` (:data:`FALLBACK_PAGE_META`): the page's item a cross-check
  request compares against (fallback).
- ``pricewatch_browser`` (:data:`BROWSER_META`): why the request goes through the browser:
  ``"declared"``, ``"learned"``, ``"retry"``, or ``"listing"`` (a scroll listing's page,
  for its endpoint) (browser routing).
- ``pricewatch_browser_capture`` (:data:`BROWSER_CAPTURE_META`): the XHR capture of a browser
  fetch (browser routing).
- ``pricewatch_browser_released`` (:data:`BROWSER_RELEASED_META`): the browser page of the
  request was already closed (browser routing).
- ``pricewatch_session`` (:data:`SESSION_META`): id of the session (proxy, cookie jar, user
  agent) the request goes out in (sessions); for the audit trail and logs.
- ``pricewatch_proxy`` (:data:`PROXY_META`): id of the session's proxy, a short hash of its
  URL, never the URL (sessions).
- ``pricewatch_session_setup`` (:data:`SESSION_SETUP_META`): the request is the login of
  this session id (sessions).
- ``pricewatch_session_reroutes`` (:data:`SESSION_REROUTES_META`): times the request was
  sent again on another session, its own being blocked or retired (sessions).
"""

from __future__ import annotations

__all__ = [
    "BREAKER_COUNTED_META",
    "BREAKER_PROBE_META",
    "BROWSER_META",
    "BROWSER_CAPTURE_META",
    "BROWSER_RELEASED_META",
    "DONT_BREAK_CIRCUIT_META",
    "FALLBACK_DEFERRED_META",
    "FALLBACK_OFFICIAL_META",
    "FALLBACK_PAGE_META",
    "LEASE_META",
    "LIMIT_GENERATION_META",
    "LISTING_META",
    "LISTING_XHR_META",
    "NOT_BEFORE_META",
    "PROXY_META",
    "SESSION_META",
    "SESSION_REROUTES_META",
    "SESSION_SETUP_META",
]

# Overrides (meta beats the setting).
DONT_BREAK_CIRCUIT_META = "dont_break_circuit"

# Frontier and scheduling.
LEASE_META = "pricewatch_lease"
LISTING_META = "pricewatch_listing"
LISTING_XHR_META = "pricewatch_listing_xhr"
NOT_BEFORE_META = "pricewatch_not_before"

# Circuit breaker.
BREAKER_PROBE_META = "pricewatch_breaker_probe"
BREAKER_COUNTED_META = "pricewatch_breaker_counted"

# Adaptive per-domain limit.
LIMIT_GENERATION_META = "pricewatch_limit_generation"

# Tiered fallback.
FALLBACK_OFFICIAL_META = "pricewatch_fallback_official"
FALLBACK_DEFERRED_META = "pricewatch_fallback_deferred"
FALLBACK_PAGE_META = "pricewatch_fallback_page"

# Browser routing.
BROWSER_META = "pricewatch_browser"
BROWSER_CAPTURE_META = "pricewatch_browser_capture"
BROWSER_RELEASED_META = "pricewatch_browser_released"

# Sessions and proxies.
SESSION_META = "pricewatch_session"
PROXY_META = "pricewatch_proxy"
SESSION_SETUP_META = "pricewatch_session_setup"
SESSION_REROUTES_META = "pricewatch_session_reroutes"
