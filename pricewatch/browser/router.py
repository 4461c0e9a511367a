"""Browser routing: which requests go through scrapy-playwright, and what comes back.

:class:`BrowserRouter` is one per crawl (``BrowserRouter.of(crawler)``; the
:class:`~pricewatch.browser.BrowserAddon` registers it as an extension so that it loads
the learned routes when the spider opens). The ``products`` spider asks it to:

- ``route(request)``: send a request for a JS-only domain (``PRICEWATCH_JS_DOMAINS``, or
  learned) through the browser, with the Playwright meta built here;
- ``should_retry(response)``: after a static fetch without a price, whether the page
  shows client-side rendering and deserves one browser retry (same lease);
- ``extract(response)``: the offer of a browser page: from the captured XHR/fetch JSON
  that names the page's own product (by SKU, name or URL, see
  :mod:`pricewatch.browser._identity`), else from the rendered DOM once a price shows
  inside the product's region: the rendered page is read by
  :func:`pricewatch.extract.extract_offer`, as a static page is, again each time its DOM
  changes (at most every ``PRICEWATCH_BROWSER_POLL_INTERVAL``), so a price outside the
  product's region (a recommendations carousel in the static HTML) is never taken, however
  early it shows (explicit wait, bounded by ``PRICEWATCH_BROWSER_WAIT_TIMEOUT``); a retry
  that finds a price teaches the domain;
- ``release(meta)``: close the page (on success and on error) and recycle contexts.

Settings (defaults and when to change them: ``pricewatch/settings.py``):
- ``PRICEWATCH_JS_DOMAINS``: hosts always fetched through the browser (a listed
  domain also covers its subdomains).
- ``PRICEWATCH_BROWSER_LEARN``: learned routing on/off.
- ``PRICEWATCH_BROWSER_LEARN_TRIES``: browser retries of one domain, in one crawl,
  that find no price before the crawl stops retrying that domain.
- ``PRICEWATCH_BROWSER_ROUTES_REFRESH``: how often learned routes are reloaded
  from the frontier backend (routes learned by other workers).
- ``PRICEWATCH_BROWSER_WAIT_TIMEOUT``: wait for the XHR or the product's price.
- ``PRICEWATCH_BROWSER_POLL_INTERVAL``: the shortest time between two readings of a
  rendered page while waiting (it is read again when its DOM changes).
- ``PRICEWATCH_BROWSER_PRICE_SELECTORS``: host -> CSS selector of a node that must show a
  digit before the rendered page is read (none: no such node).
- ``PRICEWATCH_BROWSER_XHR_PATTERNS``: host -> regular expressions of the URLs whose
  JSON carries the offer ([] = capture nothing, DOM only); other hosts: product-like JSON.
- ``PRICEWATCH_BROWSER_CONTEXT_PAGES``: pages per browser context before the next
  pages go to a fresh context and the old one is closed once its pages are done.
- ``PRICEWATCH_BROWSER_WAIT_UNTIL``: the navigation's ``wait_until``.
- ``PRICEWATCH_DOMAIN_CURRENCY``: host -> ISO code, for the extractors.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.http import HtmlResponse, Response
from scrapy.utils.httpobj import urlparse_cached

from pricewatch._crawl import per_crawl
from pricewatch._urls import host_matches
from pricewatch.browser._identity import PageIdentity, page_identity
from pricewatch.browser._signals import client_rendering_signs
from pricewatch.browser.blocking import ResourceBlocker, skip_favicon
from pricewatch.browser.capture import XhrCapture
from pricewatch.browser.discovery import BrowserNotFound
from pricewatch.browser.learned import (
    BrowserDomains,
    RoutingUnavailable,
    browser_domains_from_settings,
)
from pricewatch.extract import Offer, Rules, extract_offer
from pricewatch.meta import BROWSER_CAPTURE_META, BROWSER_META, BROWSER_RELEASED_META

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

# True once a node matching the selector shows a digit (text or content attribute).
_PRICE_SHOWN_JS = """(selector) => Array.from(document.querySelectorAll(selector)).some(
  (e) => /\\d/.test(e.getAttribute("content") || e.textContent || ""))"""
# Counts the DOM's mutations from the first call on (a MutationObserver), so the wait for
# the product's price reads the page again only after it changed.
_MUTATIONS_JS = """() => {
  if (window.__pricewatchMutations === undefined) {
    window.__pricewatchMutations = 0;
    new MutationObserver(() => { window.__pricewatchMutations += 1; }).observe(
      document, {subtree: true, childList: true, characterData: true, attributes: true});
  }
  return window.__pricewatchMutations;
}"""
_CHANGED_JS = "(seen) => window.__pricewatchMutations !== seen"
WAIT_UNTIL = ("commit", "domcontentloaded", "load", "networkidle")
CLOSE_TIMEOUT = 10.0


def xhr_patterns(raw: Mapping[str, Any]) -> dict[str, list[re.Pattern[str]]]:
    """``PRICEWATCH_BROWSER_XHR_PATTERNS`` compiled, by lower-cased host."""
    compiled: dict[str, list[re.Pattern[str]]] = {}
    for host, patterns in raw.items():
        if isinstance(patterns, str):
            patterns = [patterns]
        try:
            compiled[host.lower()] = [re.compile(p) for p in patterns]
        except (re.error, TypeError) as exc:
            raise ValueError(
                "PRICEWATCH_BROWSER_XHR_PATTERNS must map hosts to lists of regular "
                f"expressions, got {host!r}: {patterns!r} ({exc})"
            ) from None
    return compiled


class BrowserRouter:
    def __init__(self, crawler: Crawler) -> None:
        from pricewatch.browser.addon import browser_availability

        self.crawler = crawler
        settings = crawler.settings
        self.declared = frozenset(
            d.strip().lower() for d in settings.getlist("PRICEWATCH_JS_DOMAINS")
        )
        self.learn_enabled = settings.getbool("PRICEWATCH_BROWSER_LEARN")
        self.learn_tries = settings.getint("PRICEWATCH_BROWSER_LEARN_TRIES")
        self.refresh_every = settings.getfloat("PRICEWATCH_BROWSER_ROUTES_REFRESH")
        self.wait_timeout = settings.getfloat("PRICEWATCH_BROWSER_WAIT_TIMEOUT")
        self.poll_interval = settings.getfloat("PRICEWATCH_BROWSER_POLL_INTERVAL")
        self.context_pages = settings.getint("PRICEWATCH_BROWSER_CONTEXT_PAGES")
        self.wait_until = settings.get("PRICEWATCH_BROWSER_WAIT_UNTIL")
        self.selectors = {
            h.lower(): str(s)
            for h, s in settings.getdict("PRICEWATCH_BROWSER_PRICE_SELECTORS").items()
        }
        self.domain_currency = {
            h.lower(): c.upper() for h, c in settings.getdict("PRICEWATCH_DOMAIN_CURRENCY").items()
        }
        self.xhr_patterns = xhr_patterns(settings.getdict("PRICEWATCH_BROWSER_XHR_PATTERNS"))
        self._check_settings()
        blocker = settings.get("PLAYWRIGHT_ABORT_REQUEST")
        self.skip_favicon = isinstance(blocker, ResourceBlocker) and blocker.blocks("", "image")
        # None: a browser is there (or the operator configured one); else why not.
        self.unavailable: str | None = browser_availability(settings)
        if self.unavailable and self.declared:
            raise BrowserNotFound(
                f"PRICEWATCH_JS_DOMAINS lists {sorted(self.declared)} but: {self.unavailable}"
            )
        self.learned: set[str] = set()
        self._store: BrowserDomains | None = None
        self._loaded_at: float | None = None
        self._refresh_lock: asyncio.Lock | None = None
        self._misses: Counter[str] = Counter()
        # Context recycling: pages handed to each context, and pages done with.
        self._generation = 0
        self._assigned: Counter[str] = Counter()
        self._finished: Counter[str] = Counter()
        self._contexts: dict[str, Any] = {}
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)
        # A request the scheduler drops reaches neither callback nor errback: release it
        # too, or its retired context would never close.
        crawler.signals.connect(self._request_dropped, signal=signals.request_dropped)

    def _check_settings(self) -> None:
        for name, value, low in (
            ("PRICEWATCH_BROWSER_LEARN_TRIES", self.learn_tries, 1),
            ("PRICEWATCH_BROWSER_CONTEXT_PAGES", self.context_pages, 1),
        ):
            if value < low:
                raise ValueError(f"{name} must be >= {low}, got {value}")
        for name, fvalue in (
            ("PRICEWATCH_BROWSER_WAIT_TIMEOUT", self.wait_timeout),
            ("PRICEWATCH_BROWSER_POLL_INTERVAL", self.poll_interval),
            ("PRICEWATCH_BROWSER_ROUTES_REFRESH", self.refresh_every),
        ):
            if fvalue <= 0:
                raise ValueError(f"{name} must be > 0, got {fvalue}")
        if self.wait_until not in WAIT_UNTIL:
            raise ValueError(
                f"PRICEWATCH_BROWSER_WAIT_UNTIL must be one of {WAIT_UNTIL}, "
                f"got {self.wait_until!r}"
            )

    @classmethod
    def of(cls, crawler: Crawler) -> BrowserRouter:
        return per_crawl(crawler, cls)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BrowserRouter:
        return cls.of(crawler)

    # --- learned routes -------------------------------------------------------------------
    async def _spider_opened(self) -> None:
        await self.refresh(force=True)

    async def _spider_closed(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            with suppress(Exception):
                await asyncio.wait_for(store.close(), CLOSE_TIMEOUT)

    async def _request_dropped(self, request: Request) -> None:
        await self.release(request.meta)

    def _routes(self) -> BrowserDomains:
        if self._store is None:
            self._store = browser_domains_from_settings(self.crawler.settings)
        return self._store

    async def refresh(self, *, force: bool = False) -> None:
        """Reload the learned routes if they are older than the refresh period."""
        if not self.learn_enabled:
            return
        now = time.monotonic()
        if not force and self._loaded_at is not None and now - self._loaded_at < self.refresh_every:
            return
        if self._refresh_lock is None:
            self._refresh_lock = asyncio.Lock()
        async with self._refresh_lock:
            if (
                not force
                and self._loaded_at is not None
                and now - self._loaded_at < self.refresh_every
            ):
                return
            self._loaded_at = time.monotonic()
            try:
                store = self._routes()
                await store.open()
                learned = await store.load()
            except (RoutingUnavailable, OSError) as exc:
                logger.warning("Could not load the learned browser routes: %s", exc)
                return
            new = learned - self.learned
            self.learned |= learned
            if new and self.unavailable:
                logger.warning(
                    "Learned JS-only domains %s are fetched statically: %s",
                    ", ".join(sorted(new)),
                    self.unavailable,
                )
            elif new:
                logger.info("Routing through the browser (learned): %s", ", ".join(sorted(new)))

    async def learn(self, host: str) -> None:
        """Remember ``host`` as JS-only, here and in the frontier backend."""
        if host in self.learned or self._declared(host):
            return
        self.learned.add(host)
        self._stats.inc_value("pricewatch/browser/learned")
        logger.info(
            "Learned that %s renders its prices in the browser: routing it through the "
            "browser from now on",
            host,
        )
        try:
            store = self._routes()
            await store.open()
            await store.add(host)
        except (RoutingUnavailable, OSError) as exc:
            self._stats.inc_value("pricewatch/browser/learn_not_saved")
            logger.warning("Could not save the learned route of %s: %s", host, exc)

    # --- routing --------------------------------------------------------------------------
    @property
    def _stats(self) -> Any:
        stats = self.crawler.stats
        assert stats is not None
        return stats

    def _declared(self, host: str) -> bool:
        return any(host_matches(host, domain) for domain in self.declared)

    def needs_browser(self, host: str) -> str | None:
        """Why ``host`` goes through the browser ("declared", "learned"), or None."""
        if self._declared(host):
            return "declared"
        if host in self.learned:
            return "learned"
        return None

    def route(self, request: Request, *, retry: bool = False) -> Request:
        """``request``, through the browser if its host needs one (or ``retry``)."""
        host = (urlparse_cached(request).hostname or "").lower()
        reason = "retry" if retry else self.needs_browser(host)
        if reason is None or request.meta.get("playwright") is False:
            return request
        if self.unavailable:
            # Only learned routes get here (declared ones fail at start): fetch statically.
            return request
        request.meta.update(self.browser_meta(request.url, host, reason))
        self._stats.inc_value("pricewatch/browser/routed")
        self._stats.inc_value(f"pricewatch/browser/routed/{reason}")
        return request

    def browser_meta(
        self,
        url: str,
        host: str,
        reason: str,
        *,
        on_response: Callable[[Any], Awaitable[None]] | None = None,
    ) -> dict[str, Any]:
        """The Request.meta of a browser fetch of ``url``. ``on_response``: the page's own
        ``response`` handler, instead of the offer's XHR capture (a listing's endpoint)."""
        name = f"pricewatch-{self._generation}"
        self._assigned[name] += 1
        if self._assigned[name] >= self.context_pages:
            self._generation += 1  # the next pages go to a fresh context
        capture = None
        if on_response is None:
            capture = XhrCapture(url, self.xhr_patterns.get(host), self.domain_currency)
            if capture.enabled:
                on_response = capture.on_response
        meta: dict[str, Any] = {
            "playwright": True,
            "playwright_include_page": True,  # closed by release(), success or error
            "playwright_context": name,
            "playwright_context_kwargs": {
                "java_script_enabled": True,
                "service_workers": "block",
                "viewport": {"width": 1280, "height": 900},
            },
            "playwright_page_goto_kwargs": {"wait_until": self.wait_until},
            BROWSER_META: reason,
        }
        if capture is not None:
            meta[BROWSER_CAPTURE_META] = capture
        if on_response is not None:
            meta["playwright_page_event_handlers"] = {"response": on_response}
        if self.skip_favicon:
            meta["playwright_page_init_callback"] = skip_favicon
        return meta

    def move_to_context(
        self, meta: MutableMapping[str, Any], name: str, options: dict[str, Any]
    ) -> None:
        """Send a browser request to context ``name`` (created by scrapy-playwright with the
        router's context options and ``options`` over them), e.g. a session's, with its
        proxy. Such a context is never the current one: it is closed once its pages are
        done, and made again, with the same options, for the next ones."""
        old = meta.get("playwright_context")
        if old == name or not meta.get(BROWSER_META):
            return
        if old and self._assigned[old] > 0:
            self._assigned[old] -= 1
        self._assigned[name] += 1
        meta["playwright_context"] = name
        meta["playwright_context_kwargs"] = {**meta.get("playwright_context_kwargs", {}), **options}

    def handles(self, response: Response) -> bool:
        """Is ``response`` a browser page of ours?"""
        return bool(response.meta.get(BROWSER_META)) and bool(response.meta.get("playwright"))

    def should_retry(self, response: Response) -> bool:
        """A static fetch without a price: retry it through the browser once?"""
        if not self.learn_enabled or self.unavailable or response.meta.get(BROWSER_META):
            return False
        if response.status != 200 or not isinstance(response, HtmlResponse):
            return False
        host = (urlparse_cached(response).hostname or "").lower()
        if self._misses[host] >= self.learn_tries:
            return False
        signs = client_rendering_signs(response.body)
        if not signs:
            return False
        logger.debug(
            "%s shows client-side rendering (%s): retrying in the browser",
            response.url,
            ", ".join(signs),
        )
        return True

    # --- browser pages --------------------------------------------------------------------
    async def extract(self, response: Response, *, rules: Rules | None = None) -> Offer | None:
        """The offer of a browser page: captured JSON first, else the rendered DOM (read
        with the operator's extraction ``rules``, as static pages are)."""
        meta = response.meta
        host = (urlparse_cached(response).hostname or "").lower()
        self._stats.inc_value("pricewatch/browser/pages")
        capture: XhrCapture | None = meta.get(BROWSER_CAPTURE_META)
        page = meta.get("playwright_page")
        offer = await self._offer(response, page, capture, host, rules)
        if offer is not None and offer.price is not None:
            kind = "xhr" if offer.source == "xhr" else "dom"
            self._stats.inc_value(f"pricewatch/browser/offer/{kind}")
            if meta.get(BROWSER_META) == "retry":
                await self.learn(host)
            return offer
        self._stats.inc_value("pricewatch/browser/no_price")
        if meta.get(BROWSER_META) == "retry":
            self._misses[host] += 1
            if self._misses[host] == self.learn_tries:
                self._stats.inc_value("pricewatch/browser/learn_gave_up")
                logger.info(
                    "%s: %d browser retries found no price either; not retrying it in the "
                    "browser for the rest of this crawl",
                    host,
                    self.learn_tries,
                )
        return offer

    async def _offer(
        self,
        response: Response,
        page: Any,
        capture: XhrCapture | None,
        host: str,
        rules: Rules | None,
    ) -> Offer | None:
        identity = page_identity(response.body, response.url)
        if capture is not None and (found := self._captured(capture, identity)) is not None:
            return self._counted(found, capture, identity)
        if page is None or page.is_closed():
            return self._counted(self._read(response.body, response.url, rules), capture, identity)
        selector = self.selectors.get(host)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_timeout
        offer: Offer | None = None
        while True:
            read_at = loop.time()
            try:
                version = await page.evaluate(_MUTATIONS_JS)
                body = await page.content()
                shown = selector is None or await page.evaluate(_PRICE_SHOWN_JS, selector)
            except Exception as exc:  # the page crashed or closed
                logger.debug("Could not read the rendered %s: %r", response.url, exc)
                return offer
            # The rendered page may name its product only now (a title filled by script).
            identity = identity.merge(page_identity(body, response.url))
            if capture is not None and (found := self._captured(capture, identity)) is not None:
                return self._counted(found, capture, identity)
            if shown:
                offer = self._read(body, response.url, rules)
                if offer is not None and offer.price is not None:
                    if capture is not None:
                        # A JSON response being read as the DOM filled is awaited, not raced.
                        with suppress(asyncio.TimeoutError):
                            await asyncio.wait_for(capture.settled(), self.wait_timeout)
                        if (found := capture.offer_for(identity)) is not None:
                            offer = found
                    return self._counted(offer, capture, identity)
            if deadline - loop.time() <= 0:
                break
            # Read again when the page changes or a JSON offer arrives, at most every
            # poll interval: no reading (nor extraction) while the page is still.
            await self._next_event(page, version, capture, deadline - loop.time())
            pause = read_at + self.poll_interval - loop.time()
            if pause > 0:
                await asyncio.sleep(min(pause, max(deadline - loop.time(), 0)))
            if deadline - loop.time() <= 0 and not await self._changed(page, version):
                break
        self._stats.inc_value("pricewatch/browser/wait_timeout")
        logger.info("%s: no price of the product within %.1fs", response.url, self.wait_timeout)
        return self._counted(offer, capture, identity)

    def _captured(self, capture: XhrCapture, identity: PageIdentity) -> Offer | None:
        """The captured JSON offer of the page's product, priced or (its own JSON says so)
        without a valid price."""
        found = capture.offer_for(identity)
        if found is None and (found := capture.priceless_for(identity)) is not None:
            # The product's own JSON says it has no valid price: authoritative, as a page's
            # own structured offer is; no price from elsewhere, no more waiting.
            self._stats.inc_value("pricewatch/browser/xhr_no_price")
        return found

    def _read(self, body: bytes | str, url: str, rules: Rules | None) -> Offer | None:
        """The offer of a rendered page, read as a static page is (the product's region)."""
        return extract_offer(body, url, domain_currency=self.domain_currency, rules=rules)

    @staticmethod
    async def _next_event(
        page: Any, version: int, capture: XhrCapture | None, seconds: float
    ) -> None:
        """Wait until the page's DOM changes after ``version``, a JSON offer arrives, or
        ``seconds`` pass, whichever comes first."""
        waits = [
            asyncio.ensure_future(
                page.wait_for_function(_CHANGED_JS, arg=version, timeout=seconds * 1000)
            )
        ]
        if capture is not None and capture.enabled:
            waits.append(asyncio.ensure_future(capture.found()))
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for future in waits:
                future.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    @staticmethod
    async def _changed(page: Any, version: int) -> bool:
        try:
            return bool(await page.evaluate(_CHANGED_JS, version))
        except Exception:  # the page crashed or closed
            return False

    def _counted(
        self, offer: Offer | None, capture: XhrCapture | None, identity: PageIdentity
    ) -> Offer | None:
        """``offer``, after counting the JSON offers ignored as another product's."""
        if capture is not None and capture.patterns is None:
            ignored = capture.ignored(identity)
            if ignored:
                self._stats.inc_value("pricewatch/browser/xhr_ignored", ignored)
        return offer

    async def release(self, meta: MutableMapping[str, Any], *, failed: bool = False) -> None:
        """Close the page of a browser request (once), whatever its outcome (``failed``:
        it ended in the errback), and close its context when it was retired and this was
        its last page."""
        if not meta.get(BROWSER_META) or meta.get(BROWSER_RELEASED_META):
            return
        meta[BROWSER_RELEASED_META] = True
        if failed:
            self._stats.inc_value("pricewatch/browser/failed")
        name = meta.get("playwright_context", "")
        page = meta.pop("playwright_page", None)
        if page is not None:
            with suppress(Exception):
                self._contexts.setdefault(name, page.context)
            if not page.is_closed():
                with suppress(Exception):
                    await page.close()
            self._stats.inc_value("pricewatch/browser/pages_closed")
        self._finished[name] += 1
        retired = name != f"pricewatch-{self._generation}"
        if retired and self._finished[name] >= self._assigned[name]:
            context = self._contexts.pop(name, None)
            del self._finished[name], self._assigned[name]
            if context is not None:
                with suppress(Exception):
                    await context.close()
                self._stats.inc_value("pricewatch/browser/contexts_recycled")
