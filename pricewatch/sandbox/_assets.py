"""Static resources of the sandbox shops: scripts, stylesheet, images, web font, tracker.

They give the JS-only shop the resource weight of a real shop (a browser loads images, a
font, a stylesheet and a third-party-looking tag manager) and carry the scripts that fill
in its prices (``/static/js/app.js``) and its infinite-scroll listing (``/static/js/list.js``).
"""

from __future__ import annotations

import random
import struct
import zlib
from functools import lru_cache

# Fills the empty price node of a JS-only product page from /api/offer/{sku}, after the delay
# the page asks for (data-delay, ms). Sets data-loaded="1" on #app when done.
APP_JS = """\
(function () {
  var app = document.getElementById("app");
  if (!app) { return; }
  var sku = app.getAttribute("data-sku");
  var delay = parseInt(app.getAttribute("data-delay") || "300", 10);
  function show(offer) {
    document.getElementById("price").textContent = offer.display.price;
    var was = document.getElementById("was");
    was.textContent = offer.display.regular_price || "";
    document.getElementById("availability").textContent =
      offer.availability === "InStock" ? "In stock" : "Out of stock";
    var spinner = document.getElementById("loading");
    if (spinner) { spinner.remove(); }
    app.setAttribute("data-loaded", "1");
  }
  setTimeout(function () {
    fetch("/api/offer/" + encodeURIComponent(sku), {headers: {"Accept": "application/json"}})
      .then(function (r) { return r.json(); })
      .then(show)
      .catch(function (e) { app.setAttribute("data-error", String(e)); });
  }, delay);
})();
"""

# Infinite scroll: loads the first page of /api/list, then the next one (?cursor=...) each time
# the sentinel at the end of the page comes into view.
LIST_JS = """\
(function () {
  var grid = document.getElementById("grid");
  var sentinel = document.getElementById("sentinel");
  if (!grid || !sentinel) { return; }
  var cursor = "";
  var loading = false;
  var done = false;
  function card(item) {
    var li = document.createElement("li");
    li.className = "card";
    var a = document.createElement("a");
    a.className = "card__link";
    a.href = item.url;
    a.textContent = item.name;
    li.appendChild(a);
    var price = document.createElement("span");
    price.className = "price";
    price.textContent = item.display_price;
    li.appendChild(price);
    return li;
  }
  function more() {
    if (loading || done) { return; }
    loading = true;
    fetch("/api/list?cursor=" + encodeURIComponent(cursor))
      .then(function (r) { return r.json(); })
      .then(function (page) {
        page.items.forEach(function (item) { grid.appendChild(card(item)); });
        cursor = page.next_cursor || "";
        done = !page.next_cursor;
        grid.setAttribute("data-count", String(grid.children.length));
        if (done) { grid.setAttribute("data-complete", "1"); }
        loading = false;
        // Observe afresh: if the sentinel is still in view, the next page loads too.
        observer.unobserve(sentinel);
        observer.observe(sentinel);
      });
  }
  var observer = new IntersectionObserver(function (entries) {
    if (entries.some(function (e) { return e.isIntersecting; })) { more(); }
  });
  observer.observe(sentinel);
  more();
})();
"""

# Present on HTML pages too; a crawler without a browser never loads it.
SHOP_JS = """\
(function () {
  var cfg = window.__SHOP_CONFIG__ || {};
  document.documentElement.setAttribute("data-shop", cfg.shop || "");
})();
"""

# A third-party-looking tag manager served by the sandbox itself: it beacons a pixel.
TRACKER_JS = (
    """\
(function (w, d) {
  w.dataLayer = w.dataLayer || [];
  w.dataLayer.push({event: "page_view", ts: Date.now(), path: location.pathname});
  var img = new Image(1, 1);
  img.src = "/vendor/collect?ev=page_view&p=" + encodeURIComponent(location.pathname) +
    "&r=" + Math.random().toString(36).slice(2);
  d.documentElement.setAttribute("data-tracked", "1");
})(window, document);
"""
    + "/* "
    + "tag manager runtime padding " * 900
    + "*/\n"
)


def _css() -> str:
    rules = []
    for i in range(260):
        rules.append(
            f".c{i}, .grid .card:nth-child({i}) .card__name {{ margin: {i % 7}px {i % 5}px; "
            f"padding: {i % 3}px; color: #{(i * 2654435761) % 0xFFFFFF:06x}; "
            f"font-family: ShopSans, sans-serif; }}"
        )
    return (
        "@font-face { font-family: ShopSans; src: url(/static/fonts/shop.woff2) "
        'format("woff2"); font-display: swap; }\n'
        "body { font-family: ShopSans, sans-serif; margin: 0; }\n"
        ".price--was { color: #888; } .price--current { font-weight: 700; font-size: 1.6em; }\n"
        ".grid { display: grid; grid-template-columns: repeat(4, 1fr); gap: 16px; }\n"
        ".card { min-height: 320px; }\n" + "\n".join(rules)
    )


SHOP_CSS = _css()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@lru_cache(maxsize=16)
def png(variant: int, width: int, height: int) -> bytes:
    """A valid noise PNG (noise does not compress, so it weighs like a photo)."""
    rng = random.Random(f"pricewatch-sandbox:png:{variant}:{width}x{height}")
    rows = b"".join(b"\x00" + rng.randbytes(width * 3) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows, 1))
        + _chunk(b"IEND", b"")
    )


@lru_cache(maxsize=1)
def font() -> bytes:
    """Web-font-sized bytes (a browser rejects them and falls back, as with a broken font)."""
    return b"wOF2" + random.Random("pricewatch-sandbox:font").randbytes(24 * 1024)


PIXEL_GIF = bytes.fromhex(
    "47494638396101000100800000ffffff00000021f90401000000002c00000000010001000002024401003b"
)


def image_for(name: str) -> bytes:
    """Product images ~58 KB, thumbnails/logo/favicon small; 8 variants of each."""
    variant = zlib.crc32(name.encode()) % 8
    if name.startswith(("thumb-", "logo", "favicon")):
        return png(variant, 48, 48)
    return png(variant, 160, 120)
