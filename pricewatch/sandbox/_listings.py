"""The sandbox's listings: one category per shop served as every kind of listing.

Each shop (host) has its own category of ``CATEGORY_SIZE`` items, deterministic from the
seed, whose order can be made to shift while a crawler walks it (``churn``: new items
inserted at the top on every listing request; ``reprice``: items whose price changes,
moving them in the price order). Served under ``/listing/``:

- ``/listing/offset?page=N``: HTML pages of ``PAGE_SIZE`` (new items first, then by price),
  a ``rel="next"`` link up to the last page: offset pagination, fragile under churn.
- ``/listing/api[?cursor=T]``: JSON ``{"items": [{"url", "sku", "name"}], "next_cursor"}``,
  keyset pagination on the item id (stable under churn: new items sort last).
- ``/listing/api?shape=ids[&pageToken=T]``: ``{"data": [{"id"}], "nextPageToken"}``, ids
  only (a crawler needs a URL template: ``/listing/item/{id}``).
- ``/listing/scroll``: an infinite-scroll page whose grid loads ``/listing/scroll.json``
  (``data-endpoint``); ``/listing/scroll.json[?after=ID]``:
  ``{"products": [{"id", "link"}], "links": {"next": URL|null}}``, keyset too.
- ``/listing/scroll-js``: the same grid, whose endpoint only a browser sees: a script
  assembles the URL and, after ``load``, fetches ``/listing/config.json`` (a list of
  objects that are not products) then ``/listing/scroll.json?after=0``, and renders the
  items; nothing in the markup names the endpoint. ``?feed=none``: the script fetches the
  configuration only (no JSON lists the products).
- ``/listing/loop.json[?cursor=C]``: a cursor API whose fourth page's cursor is the first's.
- ``/listing/short?page=N``: HTML pages without next links (``?page=`` numbering); page 2 is
  short (6 of 10); page 5 is empty.
- ``/listing/sitemap.xml?n=N&per=P``: a sitemap index of gzip child sitemaps
  (``/listing/sitemap-I.xml.gz``), N product URLs in all, P per child, each child with a
  ``lastmod`` (the last child is the newest).
- ``/listing/item/ID``: the product page of an item (JSON-LD), sitemap items included.

Control paths (never counted, on every host): ``GET /_listings?host=IP`` the category as it
is now (``items``: URLs in id order; ``removed``) and every listing request served with
its query (``fetched``); ``POST /_listings`` ``{"host": IP, "churn": N, "reprice": N,
"remove": K, "restore": true, "reset_fetched": true}``.
"""

from __future__ import annotations

import base64
import gzip
import random
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from html import escape
from typing import Any

CATEGORY_SIZE = 60
PAGE_SIZE = 10
SCROLL_SIZE = 12
LOOP_SIZE = 5
SHORT_PAGES = (10, 6, 10, 10)  # then an empty page
MAX_SITEMAP_URLS = 1_000_000
MAX_PER_SITEMAP = 50_000  # the sitemap protocol's limit per file


@dataclass(slots=True)
class Item:
    id: int
    cents: int
    new: bool = False  # inserted by churn: listed first in the offset order


class Category:
    """One shop's category, on the server's loop."""

    def __init__(self, seed: int, host: str) -> None:
        self.rng = random.Random(f"pricewatch-sandbox:{seed}:listing:{host}")
        self.items: dict[int, Item] = {
            i: Item(i, self.rng.randint(500, 99_900)) for i in range(1, CATEGORY_SIZE + 1)
        }
        self.removed: dict[int, Item] = {}
        self.next_id = CATEGORY_SIZE + 1
        self.churn = 0
        self.reprice = 0
        self.fetched: Counter[str] = Counter()

    def tick(self) -> None:
        """One listing request: the category shifts before it is answered."""
        for _ in range(self.churn):
            self.items[self.next_id] = Item(self.next_id, self.rng.randint(500, 99_900), new=True)
            self.next_id += 1
        ids = sorted(self.items)
        for _ in range(min(self.reprice, len(ids))):
            item = self.items[self.rng.choice(ids)]
            item.cents = self.rng.randint(500, 99_900)

    def offset_order(self) -> list[Item]:
        return sorted(
            self.items.values(),
            key=lambda it: (not it.new, -it.id if it.new else 0, it.cents, it.id),
        )

    def after(self, last_id: int, size: int) -> tuple[list[Item], int | None]:
        """Keyset page: items with an id above ``last_id``; the next anchor or None."""
        ids = sorted(i for i in self.items if i > last_id)
        chunk = [self.items[i] for i in ids[:size]]
        more = len(ids) > size
        return chunk, (chunk[-1].id if chunk and more else None)

    def control(self, body: dict[str, Any]) -> dict[str, Any]:
        for name in ("churn", "reprice", "remove"):
            value = body.get(name, 0)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1000:
                raise ValueError(f"{name} must be an integer 0-1000, got {value!r}")
        if "churn" in body:
            self.churn = body["churn"]
        if "reprice" in body:
            self.reprice = body["reprice"]
        if body.get("restore"):
            self.items.update(self.removed)
            self.removed.clear()
        for _ in range(min(body.get("remove", 0), len(self.items))):
            victim = self.rng.choice(sorted(self.items))
            self.removed[victim] = self.items.pop(victim)
        if body.get("reset_fetched"):
            self.fetched.clear()
        return {"churn": self.churn, "reprice": self.reprice, "items": len(self.items)}


def item_path(item_id: int | str) -> str:
    return f"/listing/item/{item_id}"


def _token(prefix: str, value: int) -> str:
    return base64.urlsafe_b64encode(f"{prefix}:{value}".encode()).decode().rstrip("=")


def read_token(prefix: str, token: str) -> int | None:
    """The anchor in a token, or None when it is not one of ours."""
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        head, _, value = text.partition(":")
        number = int(value)
    except (ValueError, UnicodeDecodeError):
        return None
    return number if head == prefix and number >= 0 else None


def _page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}'
        f"</title></head><body><main><h1>{escape(title)}</h1>{body}</main></body></html>"
    )


def _cards(items: list[Item]) -> str:
    return "".join(
        f'<li class="card"><a href="{item_path(it.id)}">Item {it.id}</a>'
        f'<span class="price">{Decimal(it.cents) / 100} EUR</span></li>'
        for it in items
    )


def offset_page(cat: Category, page: int) -> str | None:
    order = cat.offset_order()
    pages = max(1, -(-len(order) // PAGE_SIZE))
    if not 1 <= page <= pages:
        return None
    chunk = order[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    nxt = f'<a rel="next" href="/listing/offset?page={page + 1}">Next</a>' if page < pages else ""
    if page > 1:
        nxt = f'<a rel="prev" href="/listing/offset?page={page - 1}">Previous</a>' + nxt
    return _page(f"Category, page {page}", f'<ul class="grid">{_cards(chunk)}</ul>{nxt}')


def api_page(cat: Category, base: str, token: str | None, ids: bool) -> dict[str, Any] | None:
    prefix = "id" if ids else "after"
    last = 0 if not token else read_token(prefix, token)
    if last is None:
        return None
    chunk, anchor = cat.after(last, PAGE_SIZE)
    nxt = None if anchor is None else _token(prefix, anchor)
    if ids:
        return {"data": [{"id": it.id} for it in chunk], "nextPageToken": nxt}
    return {
        "items": [
            {"url": base + item_path(it.id), "sku": f"L{it.id}", "name": f"Item {it.id}"}
            for it in chunk
        ],
        "next_cursor": nxt,
    }


def scroll_page() -> str:
    return _page(
        "Category",
        '<div id="grid" class="grid" data-endpoint="/listing/scroll.json"></div>'
        "<script>/* loads more items as the reader scrolls */</script>",
    )


# Builds the endpoint's URL from parts, so that no markup heuristic (a data-* attribute, a
# literal fetch("...")) finds it: only the page's own request, in a browser, shows it.
_SCROLL_JS = """(function () {
  var root = ["", "listing"];
  var feed = %s;
  function load() {
    var config = root.concat(["config" + ".json"]).join("/");
    var items = root.concat(["scroll" + ".json"]).join("/") + "?after=" + 0;
    fetch(config).then(function (r) { return r.json(); }).then(function () {
      if (!feed) { document.getElementById("status").textContent = "No products."; return; }
      return fetch(items, {headers: {Accept: "application/json"}})
        .then(function (r) { return r.json(); })
        .then(function (data) {
          var grid = document.getElementById("grid");
          data.products.forEach(function (p) {
            var a = document.createElement("a");
            a.href = p.link;
            a.textContent = "Item " + p.id;
            grid.appendChild(a);
          });
          document.getElementById("status").textContent = "";
        });
    });
  }
  window.addEventListener("load", load);
})();"""


def scroll_js_page(feed: bool) -> str:
    script = _SCROLL_JS % ("true" if feed else "false")
    return _page(
        "Category",
        f'<div id="grid" class="grid"></div><p id="status">Loading...</p><script>{script}</script>',
    )


def config_json() -> dict[str, Any]:
    """What a shop's front end loads besides its products: a list, but of no products."""
    return {
        "currency": "EUR",
        "data": [{"feature": "wishlist", "on": True}, {"feature": "compare", "on": False}],
    }


def scroll_json(cat: Category, after: int) -> dict[str, Any]:
    chunk, anchor = cat.after(after, SCROLL_SIZE)
    return {
        "products": [{"id": it.id, "link": item_path(it.id)} for it in chunk],
        "links": {"next": None if anchor is None else f"/listing/scroll.json?after={anchor}"},
    }


def loop_json(base: str, cursor: str) -> dict[str, Any] | None:
    order = ("", "b", "c", "d")
    if cursor not in order:
        return None
    index = order.index(cursor)
    nxt = order[(index + 1) % len(order)] or "a"
    if cursor == "d":
        nxt = "b"  # the cursor of page 2 again: a loop
    start = 1000 + index * LOOP_SIZE
    return {
        "items": [{"url": base + item_path(start + i)} for i in range(LOOP_SIZE)],
        "next_cursor": nxt,
    }


def short_page(page: int) -> str | None:
    if page < 1:
        return None
    if page > len(SHORT_PAGES):
        return _page(f"Short, page {page}", '<ul class="grid"></ul><p>No more products.</p>')
    start = 2000 + sum(SHORT_PAGES[: page - 1])
    items = [Item(start + i, 1000) for i in range(SHORT_PAGES[page - 1])]
    return _page(f"Short, page {page}", f'<ul class="grid">{_cards(items)}</ul>')


def sitemap_params(query: Any) -> tuple[int, int] | None:
    try:
        n = int(query.get("n", "100"))
        per = int(query.get("per", "50"))
    except ValueError:
        return None
    if not (1 <= n <= MAX_SITEMAP_URLS and 1 <= per <= MAX_PER_SITEMAP):
        return None
    return n, per


def sitemap_index(base: str, n: int, per: int) -> str:
    children = -(-n // per)
    entries = "".join(
        f"<sitemap><loc>{base}/listing/sitemap-{i}.xml.gz?n={n}&amp;per={per}</loc>"
        f"<lastmod>2026-{1 + i // 28 % 12:02d}-{1 + i % 28:02d}</lastmod></sitemap>"
        for i in range(children)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}'
        "</sitemapindex>"
    )


def sitemap_child(base: str, index: int, n: int, per: int) -> bytes | None:
    first = index * per
    if index < 0 or first >= n:
        return None
    urls = "".join(
        f"<url><loc>{base}{item_path(f's{j}')}</loc><lastmod>2026-01-01</lastmod></url>"
        for j in range(first, min(first + per, n))
    )
    xml = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
    )
    return gzip.compress(xml.encode(), compresslevel=5, mtime=0)


def item_page(base: str, item_id: str, cat: Category) -> str | None:
    if item_id.startswith("s") and item_id[1:].isdigit():
        cents = 1000 + int(item_id[1:]) % 9000
    elif item_id.isdigit():
        number = int(item_id)
        item = cat.items.get(number)
        if item is None and (number in cat.removed or number < cat.next_id):
            return None  # removed from the category, or never in it
        # The loop and short listings' items (1000+, 2000+) are not in the category.
        cents = item.cents if item is not None else 1000 + number % 9000
    else:
        return None
    price = Decimal(cents) / 100
    ld = (
        '{"@context": "https://schema.org", "@type": "Product", '
        f'"name": "Item {item_id}", "sku": "L{item_id}", "offers": {{"@type": "Offer", '
        f'"price": "{price}", "priceCurrency": "EUR", '
        '"availability": "https://schema.org/InStock"}}'
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Item {item_id}'
        f'</title><script type="application/ld+json">{ld}</script></head><body><main>'
        f'<h1>Item {item_id}</h1><p class="price">{price} EUR</p></main></body></html>'
    )
