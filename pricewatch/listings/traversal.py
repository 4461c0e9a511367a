"""The traversal state machine of a listing: pure transitions, persisted by the caller.

``begin`` starts a traversal at the listing's URL; ``advance`` takes one page read by
:mod:`pricewatch.listings.parse` and says where the traversal goes next; ``fetch_failed``
counts a page that could not be fetched. The stop conditions, in order: an unreadable
page (``failed``), an empty page (``done``), no next page (``done``), a next cursor or page
seen before in this traversal (``looped``), the page-count bound (``truncated``). A
non-empty page shorter than the first page's size followed by more pages is a short page
mid-listing: a warning and a count, not a stop.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pricewatch.listings.model import Listing, Traversal
from pricewatch.listings.parse import Page

KEEP_DONE = 20  # complete traversal numbers kept (PRICEWATCH_LISTING_DELIST_AFTER at most)


@dataclass(frozen=True, slots=True)
class Step:
    traversal: Traversal
    short_page: bool = False  # the previous page was short and more followed
    events: list[str] = field(default_factory=list)


def begin(listing: Listing, t: Traversal, now: float) -> Traversal:
    return replace(
        t,
        state="running",
        number=t.number + 1,
        next_url=listing.url,
        guessed=False,
        pages=0,
        cursors=(listing.url,),
        expected=None,
        items=0,
        new=0,
        short_pages=0,
        last_short=False,
        pending=(),
        failures=0,
        started_at=now,
        finished_at=None,
        error=None,
    )


def end(t: Traversal, state: str, now: float, error: str | None = None) -> Traversal:
    """The traversal stops in ``state`` (one of the ended states)."""
    last = {
        "number": t.number,
        "state": state,
        "pages": t.pages,
        "items": t.items,
        "new": t.new,
        "short_pages": t.short_pages,
        "started_at": t.started_at,
        "finished_at": now,
        "error": error,
        "delisted": 0,
    }
    return replace(
        t,
        state=state,
        next_url=None,
        pending=(),
        finished_at=now,
        error=error,
        complete=t.complete + (state == "done"),
        done_numbers=(t.done_numbers + (t.number,))[-KEEP_DONE:]
        if state == "done"
        else (t.done_numbers),
        last=last,
    )


def advance(
    listing: Listing, t: Traversal, page: Page, *, new: int, max_pages: int, now: float
) -> Step:
    """The traversal after one fetched page (``new``: its items new to the frontier)."""
    t = replace(t, pages=t.pages + 1, items=t.items + len(page.items), new=t.new + new)
    if page.error:
        return Step(end(t, "failed", now, page.error))
    if listing.kind == "sitemap":
        return _sitemap(t, page, max_pages, now)
    if listing.kind == "scroll" and t.pages == 1 and page.endpoint is None and not page.items:
        return Step(end(t, "failed", now, "no JSON endpoint found on the page (give --endpoint)"))
    if listing.kind == "scroll" and page.endpoint is not None:
        # The page itself: its endpoint is the next page (items it rendered are counted).
        page = replace(page, next_url=page.endpoint, cursor=page.endpoint)
    elif not page.items:
        return Step(end(t, "done", now))
    short_page = False
    if page.items:
        short_page = t.last_short  # a short page followed by a non-empty one
        expected = t.expected if t.expected is not None else len(page.items)
        t = replace(
            t,
            expected=expected,
            last_short=len(page.items) < expected,
            short_pages=t.short_pages + short_page,
        )
    if page.next_url is None:
        return Step(end(t, "done", now), short_page)
    key = page.cursor or page.next_url
    if key in t.cursors or page.next_url in t.cursors:
        return Step(end(t, "looped", now, f"cursor {key[:200]!r} seen before"), short_page)
    if t.pages >= max_pages:
        return Step(end(t, "truncated", now, f"{max_pages} pages"), short_page)
    cursors = t.cursors + ((key,) if key == page.next_url else (key, page.next_url))
    return Step(
        replace(t, next_url=page.next_url, guessed=page.guessed, cursors=cursors, failures=0),
        short_page,
    )


def _sitemap(t: Traversal, page: Page, max_pages: int, now: float) -> Step:
    pending = [c for c in page.children if c not in t.cursors] + list(t.pending)
    if not pending:
        return Step(end(t, "done", now))
    if t.pages >= max_pages:
        return Step(end(t, "truncated", now, f"{max_pages} pages"))
    nxt, rest = pending[0], tuple(pending[1:])
    cursors = t.cursors + tuple(c for c in page.children if c not in t.cursors)
    return Step(replace(t, next_url=nxt, pending=rest, cursors=cursors, failures=0))


def fetch_failed(t: Traversal, reason: str, *, max_failures: int, now: float) -> Traversal:
    """A page could not be fetched: retried later from the same cursor, until
    ``max_failures`` in a row end the traversal as ``failed``."""
    failures = t.failures + 1
    t = replace(t, failures=failures, error=reason)
    if failures >= max_failures:
        return end(t, "failed", now, f"{failures} failed fetches, the last: {reason}")
    return t
