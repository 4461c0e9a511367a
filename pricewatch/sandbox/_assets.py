"""Static resources of the sandbox shops: scripts, stylesheet, images, web font, tracker.

They give the JS-only shop the resource weight of a shop page and carry the scripts that
fill in its prices (``/static/js/app.js``) and its infinite-scroll listing
(``/static/js/list.js``). Two weights: ``light`` (a few small images, a font, a stylesheet,
a tag manager: quick tests) and ``real`` (the median real product page, see below).
"""

from __future__ import annotations

import hashlib
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
    var other = document.getElementById("other-price");
    if (other) { other.textContent = offer.display.other_price || ""; }
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


# --- the real weight (``js_weight="real"``, the JS shops' default) -----------------------------
# A JS shop's product page as the median real one (HTTP Archive, product pages): ~70 requests
# and ~2.2 MB: ~1.3 MB of images over ~35 requests (five gallery photos of ~150-250 KB, small
# thumbnails, card images, icons), ~520 KB of JavaScript over 16 files (first-party bundles
# that boot a framework, a tag manager that loads three tracking tags, a consent manager and
# a reviews widget), ~120 KB of CSS over 4 files, 3 web fonts of 35-70 KB, and the tracking
# beacons. Shared assets live under /cdn/ (first-party), third parties under /vendor/.
# Everything is generated from fixed seeds, once per process.

WEIGHTS = ("light", "real")

# First-party bundles, in load order (all ``defer``): name -> KiB.
FIRST_PARTY_JS = (
    ("runtime", 4),
    ("polyfills", 20),
    ("framework", 110),
    ("vendors", 60),
    ("app", 50),
    ("product", 25),
    ("gallery", 10),
    ("reviews", 12),
    ("cart", 10),
    ("search", 8),
)
# Tags the tag manager injects (a tracker each): name -> (KiB, beacon path).
TRACKER_TAGS = (
    ("analytics", 40, "/vendor/collect"),
    ("fbevents", 30, "/vendor/tr/pixel"),
    ("hotjar", 25, "/vendor/hotjar/beacon"),
)
TAG_MANAGER_KB = 70
CONSENT_KB = 30
REVIEWS_WIDGET_KB = 20
# Stylesheets: path -> KiB.
STYLESHEETS = (
    ("/cdn/css/base.css", 50),
    ("/cdn/css/product.css", 35),
    ("/cdn/css/components.css", 25),
    ("/vendor/reviews/widget.css", 12),
)
# Web fonts: name -> KiB (WOFF2-sized; Chromium's font sanitiser rejects them and falls back).
FONTS = (("sans-regular", 70), ("sans-bold", 65), ("icons", 35))
GALLERY_IMAGES = 5
CARD_IMAGES = 16
PAYMENT_ICONS = ("visa", "mastercard", "amex", "paypal", "klarna", "applepay")
TRUST_BADGES = ("secure", "returns", "shipping")


def _js_module(name: str, size: int) -> str:
    """A bundle of ~``size`` bytes of real code: a module table of small functions that the
    bundle calls once each at start (as a framework boots), so the browser parses, compiles
    and runs all of it."""
    rng = random.Random(f"pricewatch-sandbox:js:{name}")
    parts = [f'(function (w) {{\n"use strict";\nvar M = {{}};\nvar K = "{name}";\n']
    length = sum(len(p) for p in parts)
    i = 0
    while length < size - 400:
        a, b, c = rng.randint(3, 97), rng.randint(1, 31), rng.randint(2, 9)
        key = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6))
        kind = i % 3
        if kind == 0:
            body = (
                f"M.{key}{i} = function (x, y) {{ var h = (x * {a} + y) | 0; "
                f"for (var j = 0; j < {c}; j++) "
                f"{{ h = ((h << {b % 7 + 1}) ^ (h >>> 3)) + j | 0; }} "
                "return h; };\n"
            )
        elif kind == 1:
            body = (
                f'M.{key}{i} = function (x, y) {{ var s = "{key}" + x; var o = {{}}; '
                f"for (var j = 0; j < s.length; j++) {{ o[s.charAt(j)] = (o[s.charAt(j)] || 0) + "
                f"{c}; }} return Object.keys(o).length * {a} + y; }};\n"
            )
        else:
            body = (
                f"M.{key}{i} = function (x, y) {{ var a = [x, y, {a}, {b}, {c}]; "
                f"return a.map(function (v) {{ return v * {c} + {b}; }}).reduce("
                "function (p, q) { return (p + q) | 0; }, 0); };\n"
            )
        parts.append(body)
        length += len(body)
        i += 1
    parts.append(
        "var acc = 0, n = 0;\n"
        "for (var k in M) { acc = (acc + M[k](n++, K.length)) | 0; }\n"
        "w.__bundles = w.__bundles || {}; w.__bundles[K] = acc;\n"
        "})(window);\n"
    )
    return "".join(parts)


def _tag_manager_js() -> str:
    """Like a tag manager container: records the page, hashes the DOM, injects its tags."""
    tags = ", ".join(f'"/vendor/tagmanager/tags/{name}.js"' for name, _, _ in TRACKER_TAGS)
    head = (
        "(function (w, d) {\n"
        "  w.dataLayer = w.dataLayer || [];\n"
        '  w.dataLayer.push({event: "gtm.js", "gtm.start": Date.now()});\n'
        "  function scan() {\n"
        '    var nodes = d.getElementsByTagName("*"), h = 0;\n'
        "    for (var i = 0; i < nodes.length; i++) {\n"
        "      var t = nodes[i].tagName + (nodes[i].className || '');\n"
        "      for (var j = 0; j < t.length; j++) { h = (h * 31 + t.charCodeAt(j)) | 0; }\n"
        "    }\n"
        '    w.dataLayer.push({event: "gtm.dom", nodes: nodes.length, hash: h});\n'
        "  }\n"
        f"  [{tags}].forEach(function (src) {{\n"
        '    var s = d.createElement("script"); s.async = true; s.src = src;\n'
        "    d.head.appendChild(s);\n"
        "  });\n"
        '  if (d.readyState === "loading") { d.addEventListener("DOMContentLoaded", scan); }\n'
        "  else { scan(); }\n"
        '  var img = new Image(1, 1); img.src = "/vendor/collect?v=2&t=gtm&p=" +\n'
        "    encodeURIComponent(location.pathname);\n"
        '  d.documentElement.setAttribute("data-tracked", "1");\n'
        "})(window, document);\n"
    )
    return head + _js_module("gtm", TAG_MANAGER_KB * 1024 - len(head))


def _tracker_tag_js(name: str, size_kb: int, beacon: str) -> str:
    """A tracking tag: fingerprints the browser (navigator, screen, a canvas), watches the
    DOM for a while, and sends its beacons."""
    head = (
        "(function (w, d) {\n"
        '  var c = d.createElement("canvas"); c.width = 220; c.height = 40;\n'
        '  var g = c.getContext("2d"), fp = "";\n'
        '  if (g) { g.font = "14px sans-serif"; g.fillStyle = "#f60"; g.fillRect(5, 5, 100, 20);\n'
        f'    g.fillStyle = "#069"; g.fillText("{name} fp \\u2603", 2, 15);\n'
        "    fp = c.toDataURL(); }\n"
        "  var h = 0, s = fp + navigator.userAgent + screen.width + 'x' + screen.height;\n"
        "  for (var i = 0; i < s.length; i++) { h = (h * 33 + s.charCodeAt(i)) | 0; }\n"
        "  var seen = 0;\n"
        "  if (w.MutationObserver && d.body) {\n"
        "    new MutationObserver(function (r) { seen += r.length; })\n"
        "      .observe(d.body, {childList: true, subtree: true, attributes: true});\n"
        "  }\n"
        "  function send(ev) {\n"
        "    var img = new Image(1, 1);\n"
        f'    img.src = "{beacon}?ev=" + ev + "&fp=" + h + "&m=" + seen\n'
        '      + "&p=" + encodeURIComponent(location.pathname);\n'
        "  }\n"
        '  send("page_view");\n'
        '  setTimeout(function () { send("engaged"); }, 400);\n'
        "})(window, document);\n"
    )
    return head + _js_module(f"tag-{name}", size_kb * 1024 - len(head))


def _consent_js() -> str:
    head = (
        "(function (w, d) {\n"
        '  var banner = d.createElement("div"); banner.id = "consent-banner";\n'
        '  banner.textContent = "We use cookies to improve your experience.";\n'
        "  function show() { d.body.appendChild(banner); }\n"
        '  if (d.body) { show(); } else { d.addEventListener("DOMContentLoaded", show); }\n'
        '  fetch("/vendor/consent/config.json").then(function (r) { return r.json(); })\n'
        "    .then(function (cfg) { w.__consent = cfg; });\n"
        "})(window, document);\n"
    )
    return head + _js_module("consent", CONSENT_KB * 1024 - len(head))


def _reviews_widget_js() -> str:
    head = (
        "(function (w, d) {\n"
        '  var root = d.getElementById("reviews-widget");\n'
        "  if (!root) { return; }\n"
        '  var sku = encodeURIComponent(root.getAttribute("data-sku"));\n'
        '  fetch("/vendor/reviews/summary?sku=" + sku)\n'
        "    .then(function (r) { return r.json(); })\n"
        "    .then(function (s) { root.textContent = s.rating + ' / 5 (' + s.count + ')'; });\n"
        "})(window, document);\n"
    )
    return head + _js_module("reviews-widget", REVIEWS_WIDGET_KB * 1024 - len(head))


def _stylesheet(path: str, size: int) -> str:
    rng = random.Random(f"pricewatch-sandbox:css:{path}")
    parts = []
    if path == "/cdn/css/base.css":
        for name, _ in FONTS:
            family = "ShopIcons" if name == "icons" else "ShopSans"
            weight = 700 if name.endswith("bold") else 400
            parts.append(
                f"@font-face {{ font-family: {family}; font-weight: {weight}; "
                f'src: url(/cdn/fonts/{name}.woff2) format("woff2"); font-display: swap; }}\n'
            )
        parts.append(
            "body { font-family: ShopSans, sans-serif; margin: 0; }\n"
            "h1, .price--current { font-weight: 700; }\n.icon { font-family: ShopIcons; }\n"
        )
    length = sum(len(p) for p in parts)
    i = 0
    while length < size:
        sel = "".join(rng.choice("abcdefghijklmnop") for _ in range(5))
        rule = (
            f".{sel}-{i}, .{sel}-{i}:hover > .c{i % 40} {{ margin: {rng.randint(0, 24)}px "
            f"{rng.randint(0, 24)}px; padding: {rng.randint(0, 16)}px; color: "
            f"#{rng.randrange(0x1000000):06x}; background: #{rng.randrange(0x1000000):06x}; "
            f"border-radius: {rng.randint(0, 8)}px; transition: opacity .{rng.randint(1, 9)}s; }}\n"
        )
        parts.append(rule)
        length += len(rule)
        i += 1
    return "".join(parts)


def _png_photo(variant: int, width: int, height: int, size: int) -> bytes:
    """A valid PNG of ``width`` x ``height`` weighing ~``size`` bytes: noise rows (which do not
    compress) for the weight, a gradient (which does) for the rest of the picture."""
    rng = random.Random(f"pricewatch-sandbox:photo:{variant}:{width}x{height}:{size}")
    noisy = max(1, min(height, size // (width * 3)))
    rows = []
    for y in range(height):
        if y < noisy:
            rows.append(b"\x00" + rng.randbytes(width * 3))
        else:
            shade = bytes(((y * 255 // height + variant * 37) % 256, 200, 180))
            rows.append(b"\x00" + shade * width)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(b"".join(rows), 1))
        + _chunk(b"IEND", b"")
    )


@lru_cache(maxsize=64)
def _image(kind: str, variant: int) -> bytes:
    if kind == "gallery":  # 1000 x 1000 product photo, ~150-250 KB
        return _png_photo(variant, 1000, 1000, 150_000 + variant * 25_000)
    if kind == "thumb":  # gallery thumbnail, ~10-16 KB
        return _png_photo(variant, 120, 120, 10_000 + variant * 1_500)
    if kind == "card":  # recommendation card, ~20-35 KB
        return _png_photo(variant, 300, 300, 20_000 + variant * 3_500)
    if kind == "logo":
        return _png_photo(variant, 240, 80, 8_000)
    return _png_photo(variant, 64, 40, 2_500)  # icons, badges, favicon


def real_image(name: str) -> bytes | None:
    """Bytes of ``/cdn/img/{name}`` (None: unknown), by the name's kind, from 4 variants."""
    if not name.endswith(".png"):
        return None
    variant = hashlib.blake2b(name.encode(), digest_size=1).digest()[0] % 4
    stem = name[:-4]
    if stem.startswith("p/"):
        for kind in ("thumb", "card"):
            if stem.endswith("-" + kind) or f"-{kind}-" in stem:
                return _image(kind, variant)
        return _image("gallery", variant)
    if stem == "logo":
        return _image("logo", variant)
    if stem.startswith(("pay/", "badge/")) or stem == "favicon":
        return _image("icon", variant)
    return None


@lru_cache(maxsize=1)
def real_assets() -> dict[str, tuple[bytes, str]]:
    """Path -> (body, content type) of the real weight's scripts, stylesheets and fonts."""
    js = "application/javascript"
    out: dict[str, tuple[bytes, str]] = {}
    for name, kb in FIRST_PARTY_JS:
        out[f"/cdn/js/{name}.js"] = (_js_module(name, kb * 1024).encode(), js)
    out["/vendor/tagmanager/gtm.js"] = (_tag_manager_js().encode(), js)
    for name, kb, beacon in TRACKER_TAGS:
        out[f"/vendor/tagmanager/tags/{name}.js"] = (
            _tracker_tag_js(name, kb, beacon).encode(),
            js,
        )
    out["/vendor/consent/cmp.js"] = (_consent_js().encode(), js)
    out["/vendor/reviews/widget.js"] = (_reviews_widget_js().encode(), js)
    for path, kb in STYLESHEETS:
        out[path] = (_stylesheet(path, kb * 1024).encode(), "text/css")
    for name, kb in FONTS:
        body = b"wOF2" + random.Random(f"pricewatch-sandbox:font:{name}").randbytes(kb * 1024 - 4)
        out[f"/cdn/fonts/{name}.woff2"] = (body, "font/woff2")
    out["/vendor/consent/config.json"] = (
        b'{"version": 3, "purposes": ["analytics", "marketing"], "region": "EU"}',
        "application/json",
    )
    return out
