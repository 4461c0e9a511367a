"""What a listing is, and the traversal state every backend persists for it.

A *listing* is a page (or API) that lists products: a sitemap, a category's numbered
pages, a cursor JSON API, an infinite-scroll page and its JSON endpoint. It is registered
once (``scrapy listing add`` or the ``listings:`` section of a seed file) and traversed on
its own schedule (``every`` seconds) by the ``listings`` spider.

A *traversal* walks a listing from its first page to a stable end. Its state is saved
after every page, so a crash resumes at the saved cursor:

``idle``       never traversed
``running``    under way: ``next_url`` is the page to fetch next
``done``       ended on a stable condition (an empty page, no next page): complete
``looped``     a cursor or a page came back: stopped, incomplete
``truncated``  the page-count bound was reached: stopped, incomplete
``failed``     the listing could not be read (errors, nothing to follow): incomplete

Only ``done`` traversals count as complete (delisting waits for those).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

KINDS = ("sitemap", "pages", "cursor", "scroll")
STATES = ("idle", "running", "done", "looped", "truncated", "failed")
ENDED = frozenset({"done", "looped", "truncated", "failed"})

# Options of `scrapy listing add` that override a guess (see pricewatch/listings/parse.py).
OPTIONS = (
    "items_path",  # dotted path to the list of items in a JSON page ("data.products")
    "url_field",  # the item field holding the product URL ("link")
    "sku_field",  # the item field holding the SKU ("sku")
    "url_template",  # product URL from an item's fields, e.g. "https://s.example/p/{id}"
    "cursor_field",  # dotted path to the next cursor or next-page URL ("meta.next")
    "cursor_param",  # the query parameter the cursor is sent back in ("after")
    "page_param",  # the query parameter of the page number or offset ("page", "offset")
    "link_css",  # CSS selector of the product links of an HTML page ("li.card > a")
    "endpoint",  # the JSON endpoint of an infinite-scroll page
    "max_pages",  # page-count bound of one traversal (else PRICEWATCH_LISTING_MAX_PAGES)
    "importance",  # importance of the products it adds that are new to the frontier (1)
    "top",  # only the first TOP products in the listing's order get that importance
)


@dataclass(frozen=True, slots=True)
class Listing:
    """A registered listing: its canonical URL, kind, revisit period and options."""

    url: str
    kind: str
    domain: str
    every: float
    options: dict[str, str] = field(default_factory=dict)

    def option(self, name: str) -> str | None:
        return self.options.get(name) or None


@dataclass(frozen=True, slots=True)
class Traversal:
    """The persisted state machine of one listing (see the module docstring)."""

    state: str = "idle"
    number: int = 0  # traversals started
    complete: int = 0  # traversals that ended `done`
    done_numbers: tuple[int, ...] = ()  # numbers of the last complete traversals (delisting)
    next_url: str | None = None  # the page to fetch next (running)
    guessed: bool = False  # next_url is a guessed page number: a 404 there ends the listing
    pages: int = 0  # pages fetched in this traversal
    cursors: tuple[str, ...] = ()  # cursors (or page URLs) seen in this traversal
    expected: int | None = None  # the page size, from the first non-empty page
    items: int = 0  # product URLs found in this traversal (repeats included)
    new: int = 0  # of which new to the frontier
    short_pages: int = 0  # non-empty pages shorter than expected, followed by more
    last_short: bool = False  # the last page was short (a warning if more follow)
    pending: tuple[str, ...] = ()  # sitemap: child sitemaps still to fetch, first next
    failures: int = 0  # consecutive failed fetches
    started_at: float | None = None
    finished_at: float | None = None
    error: str | None = None
    # scroll: the JSON endpoint found in the page's requests in the browser, kept across
    # traversals (dropped when one ends failed, so the next one looks again).
    endpoint: str | None = None
    # The last traversal that ended: state, pages, items, new, delisted, finished_at.
    last: dict[str, Any] = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    def to_json(self) -> str:
        data = asdict(self)
        data["cursors"] = list(self.cursors)
        data["pending"] = list(self.pending)
        data["done_numbers"] = list(self.done_numbers)
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes | None) -> Traversal:
        if not text:
            return cls()
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["cursors"] = tuple(values.get("cursors") or ())
        values["pending"] = tuple(values.get("pending") or ())
        values["done_numbers"] = tuple(values.get("done_numbers") or ())
        return replace(cls(), **values)


@dataclass(frozen=True, slots=True)
class ListingLease:
    """A claimed listing: the right to traverse it until ``deadline`` (epoch seconds);
    each saved page extends it."""

    listing: Listing
    traversal: Traversal
    token: str
    deadline: float


@dataclass(frozen=True, slots=True)
class ListingInfo:
    """A listing as stored (``scrapy listing list|show``)."""

    listing: Listing
    traversal: Traversal
    due_at: float
    leased: bool
    members: int  # product URLs this listing lists (as of its traversals)


def options_to_json(options: dict[str, str]) -> str:
    return json.dumps(dict(sorted(options.items())), separators=(",", ":"))


def options_from_json(text: str | bytes | None) -> dict[str, str]:
    if not text:
        return {}
    data = json.loads(text)
    return {str(k): str(v) for k, v in data.items() if k in OPTIONS}
