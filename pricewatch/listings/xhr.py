"""The JSON endpoint of an infinite-scroll page, from the requests the page makes in a browser.

A ``scroll`` listing whose page names no endpoint in its markup (none configured with
``--endpoint``, none saved by an earlier traversal) is loaded once through the browser
(:class:`~pricewatch.browser.BrowserRouter`, scrapy-playwright). :class:`EndpointCapture` is
that page's ``response`` handler, registered before navigation: it keeps the JSON answers
to the page's own XHR/fetch GET requests (``MAX_JSON_BYTES`` at most each) and reads each
as a cursor page is read (:func:`pricewatch.listings.parse.parse_json`: the same guesses,
and the listing's options such as ``--url-template``). Only a response that lists products
of the listing's domain can be the endpoint (a list of other things, such as a
configuration, or another site's products never is); of several, one that pages on (a
next cursor) before one that does not, then the one listing the most, then the earliest.

:meth:`EndpointCapture.wait` bounds the browser's part: it returns once the page's network
is idle (no request for 500 ms after ``load``) and the responses seen are read, or after
``PRICEWATCH_BROWSER_WAIT_TIMEOUT``. Nothing is scrolled: the endpoint found is followed
over plain HTTP as a cursor API, and saved in the listing's traversal state, so later
traversals do not need the browser.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from pricewatch.browser.capture import MAX_JSON_BYTES, XHR_TYPES, BodyReads, too_large
from pricewatch.frontier._entries import domain_of
from pricewatch.listings.model import Listing
from pricewatch.listings.parse import Item, parse_json

logger = logging.getLogger(__name__)

_SHOWN = 3  # responses named in the reason of a page without an endpoint


@dataclass(frozen=True, slots=True)
class Seen:
    """One JSON response the page requested, as a cursor page."""

    url: str
    items: int  # product URLs it lists
    ours: int  # of which on the listing's domain
    error: str | None
    pages_on: bool = False  # it names a next page


class EndpointCapture:
    """The JSON a scroll page requested in one browser load. ``items``: the products its
    static markup listed (counted with the page, as for an endpoint found in the markup)."""

    def __init__(self, listing: Listing, items: list[Item]) -> None:
        self.listing = listing
        self.items = items
        self.seen: list[Seen] = []
        self.skipped = 0  # JSON answers to other methods than GET: not replayable as a cursor
        self._reads = BodyReads()

    async def on_response(self, response: Any) -> None:
        """The page's ``response`` event handler; never raises."""
        try:
            request = response.request
            if request.resource_type not in XHR_TYPES:
                return
            headers = response.headers  # lower-cased names
            if "json" not in headers.get("content-type", "").lower() or response.status >= 400:
                return
            if request.method != "GET":
                self.skipped += 1
                return
            if too_large(headers):
                return
            url = response.url
        except Exception:  # a page closed under us: nothing to read
            return
        with self._reads.reading():
            try:
                body = await response.body()
                if len(body) <= MAX_JSON_BYTES:
                    self.read(url, body)
            except Exception as exc:  # closed page, anything: this response is not the endpoint
                logger.debug("Ignoring a JSON response of %s: %r", self.listing.url, exc)

    def read(self, url: str, body: bytes) -> None:
        """One JSON response of the page, as a cursor page."""
        page = parse_json(body, url, self.listing.options)
        ours = sum(domain_of(item.url) == self.listing.domain for item in page.items)
        self.seen.append(Seen(url, len(page.items), ours, page.error, page.next_url is not None))

    async def wait(self, page: Any, seconds: float) -> None:
        """Until the page's network is idle and the responses seen are read, at most
        ``seconds``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        # A timeout, or a page that crashed or closed: what was captured by then is all.
        with suppress(Exception):
            await page.wait_for_load_state("networkidle", timeout=seconds * 1000)
        with suppress(TimeoutError):
            await asyncio.wait_for(self._reads.idle.wait(), max(deadline - loop.time(), 0.0))

    def endpoint(self) -> Seen | None:
        """The response that is the endpoint (see the module docstring), or None."""
        best: Seen | None = None
        for seen in self.seen:
            if seen.error is not None or not seen.ours:
                continue
            if best is None or (seen.pages_on, seen.ours) > (best.pages_on, best.ours):
                best = seen
        return best

    def reason(self) -> str:
        """Why no endpoint was found (for a traversal that ends ``failed``)."""
        if not self.seen:
            found = "the page requested no JSON in the browser"
        else:
            named = "; ".join(
                f"{s.url}: {s.error or f'no product of {self.listing.domain}'}"
                for s in self.seen[:_SHOWN]
            )
            more = f"; {len(self.seen) - _SHOWN} more" if len(self.seen) > _SHOWN else ""
            found = (
                f"none of the {len(self.seen)} JSON responses the page requested in the "
                f"browser lists its products ({named}{more})"
            )
        if self.skipped:
            found += f", {self.skipped} not GET (not followed)"
        return f"no JSON endpoint in the page's markup, and {found}; give --endpoint"
