"""Reading one listing page: example tables of the shapes shops and APIs use, and the
state machine's stop conditions."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace

import pytest

from pricewatch.listings.define import parse_listings
from pricewatch.listings.model import Listing, Traversal
from pricewatch.listings.parse import (
    Item,
    Page,
    find_endpoint,
    parse_html,
    parse_json,
    parse_sitemap,
)
from pricewatch.listings.traversal import advance, begin, end, fetch_failed
from pricewatch.listings.xhr import EndpointCapture
from pricewatch.seeding import BadLine

BASE = "https://shop.test/api/list"

# -- JSON shapes --------------------------------------------------------------------------

JSON_CASES = [
    pytest.param(
        {"items": [{"url": "https://shop.test/p/1", "sku": "A1"}], "next_cursor": "xyz"},
        {},
        [Item("https://shop.test/p/1", "A1")],
        "https://shop.test/api/list?cursor=xyz",
        id="items+next_cursor",
    ),
    pytest.param(
        {"products": [{"href": "/p/2"}], "nextPageToken": "t2"},
        {},
        [Item("https://shop.test/p/2")],
        "https://shop.test/api/list?pageToken=t2",
        id="google-style-nextPageToken",
    ),
    pytest.param(
        {"data": [{"link": "/p/3"}], "links": {"next": "https://shop.test/api/list?page=2"}},
        {},
        [Item("https://shop.test/p/3")],
        "https://shop.test/api/list?page=2",
        id="json-api-links.next-url",
    ),
    pytest.param(
        {
            "data": {
                "products": {
                    "edges": [{"node": {"url": "/p/4"}}],
                    "pageInfo": {"endCursor": "c4", "hasNextPage": True},
                }
            }
        },
        {},
        [Item("https://shop.test/p/4")],
        "https://shop.test/api/list?after=c4",
        id="graphql-edges-endCursor",
    ),
    pytest.param(
        {
            "edges": [{"node": {"url": "/p/5"}}],
            "pageInfo": {"endCursor": "c", "hasNextPage": False},
        },
        {},
        [Item("https://shop.test/p/5")],
        None,
        id="graphql-last-page",
    ),
    pytest.param(
        {"results": [{"permalink": "/p/6"}], "after": "a6"},
        {},
        [Item("https://shop.test/p/6")],
        "https://shop.test/api/list?after=a6",
        id="after-token",
    ),
    pytest.param(
        [{"url": "/p/7"}],
        {},
        [Item("https://shop.test/p/7")],
        None,
        id="bare-list-no-next",
    ),
    pytest.param(
        {"data": [{"id": 8}], "nextPageToken": "n8"},
        {"url_template": "/product/{id}"},
        [Item("https://shop.test/product/8")],
        "https://shop.test/api/list?pageToken=n8",
        id="ids-plus-url-template",
    ),
    pytest.param(
        {"payload": {"rows": [{"web": "/p/9", "code": "X9"}]}, "meta": {"continue": "k"}},
        {
            "items_path": "payload.rows",
            "url_field": "web",
            "sku_field": "code",
            "cursor_field": "meta.continue",
            "cursor_param": "from_token",
        },
        [Item("https://shop.test/p/9", "X9")],
        "https://shop.test/api/list?from_token=k",
        id="every-guess-overridden",
    ),
    pytest.param(
        {"items": [], "next_cursor": "never"},
        {},
        [],
        None,
        id="empty-page-ends",
    ),
]


@pytest.mark.parametrize(("doc", "options", "items", "next_url"), JSON_CASES)
def test_json_shapes_are_read_without_configuration(
    doc: object, options: dict[str, str], items: list[Item], next_url: str | None
) -> None:
    page = parse_json(json.dumps(doc).encode(), BASE, options)
    assert page.error is None
    assert page.items == items
    assert page.next_url == next_url


def test_a_token_goes_back_in_the_parameter_the_request_already_carries() -> None:
    page = parse_json(b'{"items": ["/p/1"], "next": "t2"}', BASE + "?token=t1", {})
    assert page.next_url == "https://shop.test/api/list?token=t2"
    assert page.cursor == "t2"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"", "not JSON"),
        (b"not json", "not JSON"),
        (b'{"items": [{"name": "no url"}]}', "no product URL"),
        (b"\xff\xfe", "not JSON"),
        (b"[[[", "not JSON"),
        (b'{"items": 5, "next": "x"}', None),
    ],
    ids=["empty", "text", "no-url-field", "bad-bytes", "truncated", "items-not-a-list"],
)
def test_bad_json_pages_are_errors_never_exceptions(body: bytes, error: str | None) -> None:
    page = parse_json(body, BASE, {})
    assert page.items == [] and page.next_url is None  # an unreadable page ends nothing silently
    assert (page.error is None) if error is None else (error in (page.error or ""))


# -- HTML ---------------------------------------------------------------------------------


def test_html_listing_product_links_and_rel_next() -> None:
    html = (
        '<html><body><nav><a href="/cart">Cart</a><a href="/about">About</a></nav><ul>'
        '<li><a href="/products/red-shoe">Red</a></li><li><a href="/products/blue-shoe">Blue</a>'
        '</li><li><a href="/products/red-shoe#reviews">Red again</a></li></ul>'
        '<a rel="next" href="/c/shoes?page=2">Next</a></body></html>'
    )
    page = parse_html(html.encode(), "https://shop.test/c/shoes?page=1")
    assert [i.url for i in page.items] == [
        "https://shop.test/products/red-shoe",
        "https://shop.test/products/blue-shoe",
        "https://shop.test/products/red-shoe#reviews",
    ]
    assert page.next_url == "https://shop.test/c/shoes?page=2"
    assert not page.guessed


@pytest.mark.parametrize(
    ("url", "param", "count", "expected"),
    [
        ("https://s.test/c?page=3", None, 10, "https://s.test/c?page=4"),
        ("https://s.test/c?offset=40", None, 20, "https://s.test/c?offset=60"),
        ("https://s.test/c", None, 10, "https://s.test/c?page=2"),
        ("https://s.test/c?pg=1", "pg", 10, "https://s.test/c?pg=2"),
        ("https://s.test/c", "start", 24, "https://s.test/c?start=24"),
    ],
    ids=["page", "offset", "first-page", "page-param", "offset-param-first"],
)
def test_html_next_page_by_number_or_offset_is_guessed(
    url: str, param: str | None, count: int, expected: str
) -> None:
    links = "".join(f'<a href="/p/{i}">{i}</a>' for i in range(count))
    page = parse_html(links.encode(), url, {"page_param": param} if param else {})
    assert page.next_url == expected and page.guessed


def test_link_css_overrides_the_product_link_guess() -> None:
    html = b'<div class="tile"><a href="/shoe-1">1</a></div><a href="/p/ignored">x</a>'
    page = parse_html(html, "https://s.test/c", {"link_css": ".tile a"})
    assert [i.url for i in page.items] == ["https://s.test/shoe-1"]


def test_jsonld_itemlist_is_read_first() -> None:
    ld = {
        "@type": "ItemList",
        "itemListElement": [{"@type": "ListItem", "position": 1, "url": "/shoe-a"}],
    }
    html = f'<script type="application/ld+json">{json.dumps(ld)}</script><a href="/p/x">x</a>'
    page = parse_html(html.encode(), "https://s.test/c")
    assert [i.url for i in page.items] == ["https://s.test/shoe-a"]


@pytest.mark.parametrize(
    ("html", "endpoint"),
    [
        ('<div data-endpoint="/api/grid.json"></div>', "https://s.test/api/grid.json"),
        ('<section data-src="https://api.s.test/feed?x=1">', "https://api.s.test/feed?x=1"),
        ("<script>fetch('/api/more?cursor=')</script>", "https://s.test/api/more?cursor="),
        ("<p>nothing here</p>", None),
    ],
    ids=["data-endpoint", "data-src", "fetch-call", "none"],
)
def test_scroll_page_endpoint_is_found(html: str, endpoint: str | None) -> None:
    assert find_endpoint(html.encode(), "https://s.test/c") == endpoint


CONFIG = {"data": [{"feature": "wishlist", "on": True}]}
GRID = {"products": [{"id": 1, "link": "/p/1"}, {"id": 2, "link": "/p/2"}], "next": "/g?c=2"}
ONE_PAGE = {"items": [{"url": f"/p/{i}"} for i in range(5)]}
ELSEWHERE = {"items": [{"url": f"https://ads.test/p/{i}"} for i in range(9)], "next": "x"}
IDS = {"data": [{"id": 7}, {"id": 8}], "nextPageToken": "t"}


@pytest.mark.parametrize(
    ("responses", "options", "endpoint"),
    [
        ([("/config.json", CONFIG), ("/g", GRID)], {}, "https://s.test/g"),
        ([("/config.json", CONFIG)], {}, None),
        ([("/ads.json", ELSEWHERE), ("/g", GRID)], {}, "https://s.test/g"),
        ([("/one.json", ONE_PAGE), ("/g", GRID)], {}, "https://s.test/g"),
        ([("/one.json", ONE_PAGE)], {}, "https://s.test/one.json"),
        ([("/ids.json", IDS)], {}, None),
        ([("/ids.json", IDS)], {"url_template": "/p/{id}"}, "https://s.test/ids.json"),
        ([], {}, None),
    ],
    ids=[
        "grid-beside-config",
        "config-only",
        "another-sites-products",
        "a-paginated-list-first",
        "one-page-list",
        "ids-without-template",
        "ids-with-template",
        "no-json",
    ],
)
def test_scroll_endpoint_is_picked_from_the_json_the_page_requested(
    responses: list[tuple[str, object]], options: dict[str, str], endpoint: str | None
) -> None:
    listing = Listing("https://s.test/c", "scroll", "s.test", 86400.0, options)
    capture = EndpointCapture(listing, [])
    for path, doc in responses:
        capture.read("https://s.test" + path, json.dumps(doc).encode())
    found = capture.endpoint()
    assert (found and found.url) == endpoint
    if endpoint is None:
        reason = capture.reason()
        assert reason.startswith("no JSON endpoint in the page's markup, and ")
        assert reason.endswith("; give --endpoint")
        assert all(path in reason for path, _ in responses)


# -- sitemaps -----------------------------------------------------------------------------


def test_sitemap_index_children_newest_lastmod_first_and_gzip_urlset() -> None:
    index = (
        b'<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<sitemap><loc>https://s.test/a.xml.gz</loc><lastmod>2025-01-01</lastmod></sitemap>"
        b"<sitemap><loc>https://s.test/b.xml.gz</loc><lastmod>2025-06-01</lastmod></sitemap>"
        b"</sitemapindex>"
    )
    page = parse_sitemap(index, "https://s.test/sitemap.xml")
    assert page.children == ["https://s.test/b.xml.gz", "https://s.test/a.xml.gz"]
    urlset = (
        b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc>https://s.test/p/old</loc><lastmod>2020-01-01</lastmod></url>"
        b"<url><loc>https://s.test/p/new</loc><lastmod>2026-01-01</lastmod></url></urlset>"
    )
    page = parse_sitemap(gzip.compress(urlset), "https://s.test/b.xml.gz")
    assert [i.url for i in page.items] == ["https://s.test/p/new", "https://s.test/p/old"]


def test_a_gzip_sitemap_over_the_size_bound_is_an_error() -> None:
    urlset = b"<urlset>" + b"<url><loc>https://s.test/p</loc></url>" * 5000 + b"</urlset>"
    page = parse_sitemap(gzip.compress(urlset), "https://s.test/s.xml.gz", max_size=10_000)
    assert page.error is not None and page.items == []


@pytest.mark.parametrize(
    "body",
    [b"", b"\x1f\x8bnot gzip", b"<html>not a sitemap</html>", b'<!DOCTYPE x [<!ENTITY a "b">]>'],
    ids=["empty", "bad-gzip", "html", "entity"],
)
def test_bad_sitemaps_are_errors_never_exceptions(body: bytes) -> None:
    page = parse_sitemap(body, "https://s.test/sitemap.xml")
    assert page.items == [] and page.children == []


# -- the state machine --------------------------------------------------------------------

LISTING = Listing("https://s.test/api", "cursor", "s.test", 3600.0)


def page(n: int, cursor: str | None) -> Page:
    items = [Item(f"https://s.test/p/{cursor}-{i}") for i in range(n)]
    nxt = None if cursor is None else f"https://s.test/api?cursor={cursor}"
    return Page(items=items, next_url=nxt, cursor=cursor)


def walk(pages: list[Page], max_pages: int = 100) -> tuple[Traversal, int]:
    t = begin(LISTING, Traversal(), 0.0)
    shorts = 0
    for p in pages:
        step = advance(LISTING, t, p, new=0, max_pages=max_pages, now=1.0)
        t = step.traversal
        shorts += step.short_page
        if t.ended:
            break
    return t, shorts


def test_traversal_ends_done_on_an_empty_page() -> None:
    t, _ = walk([page(10, "a"), page(10, "b"), page(0, "c")])
    assert (t.state, t.pages, t.items, t.complete) == ("done", 3, 20, 1)
    assert t.done_numbers == (1,)


def test_traversal_ends_done_without_a_next_cursor() -> None:
    t, _ = walk([page(10, "a"), page(4, None)])
    assert (t.state, t.pages, t.short_pages) == ("done", 2, 0)  # a short last page is normal


def test_a_repeated_cursor_ends_looped_and_incomplete() -> None:
    t, _ = walk([page(5, "a"), page(5, "b"), page(5, "a")])
    assert (t.state, t.pages, t.complete) == ("looped", 3, 0)
    assert "seen before" in (t.error or "")


def test_the_page_bound_ends_truncated() -> None:
    t, _ = walk([page(5, c) for c in "abcdefgh"], max_pages=4)
    assert (t.state, t.pages, t.complete) == ("truncated", 4, 0)


def test_a_short_page_mid_listing_is_counted_and_not_a_stop() -> None:
    t, shorts = walk([page(10, "a"), page(6, "b"), page(10, "c"), page(0, None)])
    assert (t.state, t.short_pages, shorts, t.expected) == ("done", 1, 1, 10)


def test_failed_fetches_keep_the_cursor_until_the_limit() -> None:
    t = begin(LISTING, Traversal(), 0.0)
    t = advance(LISTING, t, page(10, "a"), new=10, max_pages=100, now=1.0).traversal
    once = fetch_failed(t, "http_503", max_failures=3, now=2.0)
    assert (once.state, once.next_url, once.failures) == ("running", t.next_url, 1)
    thrice = fetch_failed(
        fetch_failed(once, "x", max_failures=3, now=3.0), "y", max_failures=3, now=4
    )
    assert thrice.state == "failed" and thrice.complete == 0


def test_the_state_survives_its_json_form() -> None:
    t = begin(LISTING, Traversal(), 5.0)
    t = advance(LISTING, t, page(10, "a"), new=3, max_pages=100, now=6.0).traversal
    assert Traversal.from_json(t.to_json()) == t
    done = end(t, "done", 7.0)
    assert Traversal.from_json(done.to_json()) == done
    # A scroll page's endpoint found in the browser outlives its traversal.
    found = replace(done, endpoint="https://s.test/feed.json")
    assert Traversal.from_json(found.to_json()) == found
    assert begin(LISTING, found, 8.0).endpoint == "https://s.test/feed.json"


# -- the seed file's listings section -----------------------------------------------------

HOSTILE_LISTINGS = [
    pytest.param("https://s.test/c,carousel", "kind must be one of", id="unknown-kind"),
    pytest.param("https://s.test/c", "needs a URL and a kind", id="no-kind"),
    pytest.param("https://s.test/c,pages,often", "period must be", id="bad-period"),
    pytest.param("https://s.test/c,pages,0s", "period must be > 0", id="zero-period"),
    pytest.param("https://s.test/c,pages,1d,colour=red", "unknown option", id="unknown-option"),
    pytest.param("https://s.test/c,pages,1d,max_pages=-1", "max_pages must be", id="bad-bound"),
    pytest.param("https://s.test/c,pages,1d,importance=1e9", "importance must be", id="importance"),
    pytest.param("https://s.test/c,pages,1d,link_css", "is not name=value", id="bare-option"),
    pytest.param("ftp://s.test/c,pages", "http", id="not-http"),
    pytest.param("https://user:pw@s.test/c,pages", "credentials", id="credentials"),
    pytest.param('"https://s.test/c,pages', "bad CSV", id="open-quote"),
    pytest.param("https://s.test/c\x07,pages", "control", id="control-character"),
    pytest.param("https://s.test/c,pages,1d,endpoint=javascript:x", "endpoint must be", id="js"),
]


@pytest.mark.parametrize(("line", "reason"), HOSTILE_LISTINGS)
def test_hostile_listing_lines_are_reported_by_number(line: str, reason: str) -> None:
    [result] = parse_listings([(7, line)], default_every=60.0)
    assert isinstance(result, BadLine), result
    assert result.lineno == 7 and reason in result.reason, result.reason
    assert "pw@" not in str(result)  # credentials never echoed


def test_good_listing_lines_are_canonical_with_their_options() -> None:
    found = list(
        parse_listings(
            [
                (1, "# a comment"),
                (2, ""),
                (3, "HTTPS://S.test/api?b=2&a=1,cursor,12h,items_path=data,cursor_param=after"),
                (4, "https://s.test/sitemap.xml,sitemap"),
            ],
            default_every=60.0,
        )
    )
    assert found == [
        Listing(
            "https://s.test/api?a=1&b=2",
            "cursor",
            "s.test",
            43200.0,
            {"items_path": "data", "cursor_param": "after"},
        ),
        Listing("https://s.test/sitemap.xml", "sitemap", "s.test", 60.0, {}),
    ]
