"""Reading one page of a listing: pure functions, ``(body, url, options) -> Page``.

Never raises on bad input: a page that cannot be read is a :class:`Page` with ``error``.

- **sitemap**: a sitemap index (child sitemaps, newest ``lastmod`` first) or a URL set
  (product URLs, newest ``lastmod`` first), gzip or not, read with Scrapy's own
  :class:`scrapy.utils.sitemap.Sitemap` (lxml, entities off) and ``gunzip`` (size-bounded).
- **pages**: an HTML page: product links (``link_css``, else JSON-LD ``ItemList`` URLs, else
  links whose path names a product: ``/product/``, ``/p/``, ``/item/``, ``/dp/`` ...), and
  the next page (``rel="next"``, else the page-number or offset parameter moved on).
- **cursor**/**scroll**: a JSON page: the list of items (``items_path``, else the first list
  under a usual name: ``items``, ``products``, ``results``, ``data``, ``hits``, ``edges``
  ...), each item's URL (``url_field``, else ``url``, ``href``, ``link``, ...; or
  ``url_template`` filled from the item's fields), and the next cursor (``cursor_field``,
  else ``links.next``, ``next``, ``next_cursor``, ``nextPageToken``, ``after``,
  ``pageInfo.endCursor`` ...): a URL is followed as it is, a token is sent back in
  ``cursor_param``, else the parameter the request already carries, else the usual one
  for the name it came under (``nextPageToken`` -> ``pageToken``, ``after`` -> ``after``,
  ``next_cursor`` -> ``cursor``).
- **scroll** page: its JSON endpoint (``endpoint``, else a ``data-endpoint``/``data-src``/
  ``data-url``/``data-api`` attribute, a JSON ``rel="next"`` link, or a ``fetch("...")``
  in its scripts).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urljoin, urlsplit

from parsel import Selector
from scrapy.utils.gz import gunzip
from scrapy.utils.sitemap import Sitemap
from w3lib.url import add_or_replace_parameter

ITEM_KEYS = (
    "items",
    "products",
    "results",
    "data",
    "hits",
    "records",
    "entries",
    "edges",
    "nodes",
    "docs",
    "content",
    "list",
)
URL_FIELDS = (
    "url",
    "href",
    "link",
    "product_url",
    "productUrl",
    "canonical_url",
    "canonicalUrl",
    "permalink",
    "web_url",
    "path",
    "uri",
)
SKU_FIELDS = ("sku", "SKU", "productSku")
# Where a next cursor or next-page URL usually is, and the parameter a token goes back in.
CURSOR_PATHS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("links", "next"), "cursor"),
    (("_links", "next"), "cursor"),
    (("next_cursor",), "cursor"),
    (("nextCursor",), "cursor"),
    (("next_page_token",), "page_token"),
    (("nextPageToken",), "pageToken"),
    (("next_token",), "token"),
    (("nextToken",), "token"),
    (("next",), "cursor"),
    (("cursor",), "cursor"),
    (("after",), "after"),
    (("pageInfo", "endCursor"), "after"),
    (("page_info", "end_cursor"), "after"),
    (("paging", "cursors", "after"), "after"),
    (("paging", "next"), "cursor"),
    (("pagination", "next"), "cursor"),
    (("pagination", "next_cursor"), "cursor"),
    (("meta", "next_cursor"), "cursor"),
    (("meta", "nextCursor"), "cursor"),
    (("meta", "next"), "cursor"),
    (("next_page_url",), "cursor"),
    (("next_page",), "page"),
    (("nextPage",), "page"),
)
CURSOR_PARAMS = (
    "cursor",
    "after",
    "page_token",
    "pageToken",
    "token",
    "next",
    "continuation",
    "starting_after",
)
PAGE_PARAMS = ("page", "p", "pg", "pagenum")
OFFSET_PARAMS = ("offset", "start", "skip", "from")
_PRODUCT_PATH = re.compile(
    r"/(?:product|products|produkt|produit|p|item|items|dp|prod|artikel|article)/[^/?#]+",
    re.IGNORECASE,
)
_ENDPOINT_ATTRS = ("data-endpoint", "data-src", "data-url", "data-api", "data-next", "data-feed")
_FETCH = re.compile(r"""fetch\(\s*["'`]([^"'`]+)["'`]""")


@dataclass(frozen=True, slots=True)
class Item:
    url: str  # absolute, as the page gives it (canonicalised by the caller)
    sku: str | None = None


@dataclass(frozen=True, slots=True)
class Page:
    items: list[Item] = field(default_factory=list)
    next_url: str | None = None  # the page to fetch next, absolute
    cursor: str | None = None  # what identifies the next page (a repeated one is a loop)
    children: list[str] = field(default_factory=list)  # sitemap index: child sitemaps
    endpoint: str | None = None  # scroll page: its JSON endpoint, absolute
    error: str | None = None
    guessed: bool = False  # next_url is a guess (page number moved on): 404 there is the end


# -- sitemaps ---------------------------------------------------------------------------


def parse_sitemap(body: bytes, url: str, *, max_size: int = 0) -> Page:
    if body[:2] == b"\x1f\x8b":
        try:
            body = gunzip(body, max_size=max_size)
        except (OSError, EOFError, ValueError) as exc:
            return Page(error=f"bad gzip: {exc}")
        except Exception as exc:  # _DecompressionMaxSizeExceeded
            return Page(error=f"gzip over {max_size} bytes: {type(exc).__name__}")
    try:
        sitemap = Sitemap(body)
    except Exception as exc:  # lxml raises many kinds
        return Page(error=f"not a sitemap: {exc}")
    entries = []
    for position, entry in enumerate(sitemap):
        loc = (entry.get("loc") or "").strip()
        if loc:
            entries.append(((entry.get("lastmod") or "").strip(), -position, urljoin(url, loc)))
    # Newest lastmod first (ISO 8601 dates sort as text); the file's order otherwise.
    entries.sort(reverse=True)
    if sitemap.type == "sitemapindex":
        return Page(children=[loc for _, _, loc in entries])
    if sitemap.type != "urlset":
        return Page(error=f"not a sitemap: root element {sitemap.type!r}")
    return Page(items=[Item(loc) for _, _, loc in entries])


# -- HTML pages -------------------------------------------------------------------------


def _selector(body: bytes | str, url: str) -> Selector | None:
    try:
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        return Selector(text=text, base_url=url)
    except Exception:
        return None


def _itemlist_urls(sel: Selector, url: str) -> list[str]:
    found: list[str] = []
    for raw in sel.xpath('//script[@type="application/ld+json"]/text()').getall():
        try:
            data = json.loads(raw)
        except ValueError:
            continue
        stack = [data]
        while stack:
            node = stack.pop()
            if isinstance(node, list):
                stack.extend(reversed(node))
            elif isinstance(node, dict):
                if node.get("@type") == "ItemList":
                    for element in node.get("itemListElement") or []:
                        if isinstance(element, dict):
                            target = element.get("url") or (element.get("item") or {})
                            if isinstance(target, dict):
                                target = target.get("url") or target.get("@id")
                            if isinstance(target, str) and target:
                                found.append(urljoin(url, target))
                else:
                    stack.extend(v for v in node.values() if isinstance(v, dict | list))
    return found


def parse_html(body: bytes | str, url: str, options: dict[str, str] | None = None) -> Page:
    options = options or {}
    sel = _selector(body, url)
    if sel is None:
        return Page(error="not HTML")
    css = options.get("link_css")
    if css:
        try:
            hrefs = sel.css(css).xpath("@href").getall()
        except Exception as exc:
            return Page(error=f"bad link_css {css!r}: {exc}")
        links = [urljoin(url, h.strip()) for h in hrefs if h.strip()]
    else:
        links = _itemlist_urls(sel, url)
        if not links:
            links = [
                urljoin(url, h.strip())
                for h in sel.xpath("//a/@href").getall()
                if _PRODUCT_PATH.search(urlsplit(urljoin(url, h.strip())).path)
            ]
    seen: set[str] = set()
    items = []
    for link in links:
        if link not in seen and urlsplit(link).scheme in ("http", "https"):
            seen.add(link)
            items.append(Item(link))
    nxt = sel.xpath(
        '//a[contains(concat(" ", normalize-space(@rel), " "), " next ")]/@href'
        ' | //link[@rel="next"]/@href'
    ).get()
    nxt = (nxt or "").strip()
    guessed = not nxt
    if not guessed:
        next_url: str | None = urljoin(url, nxt)
    elif sel.xpath('//*[self::a or self::link][contains(concat(" ", @rel, " "), " prev ")]'):
        next_url = None  # paginated by rel links: a page with a previous and no next is the last
    else:
        next_url = next_page_url(url, len(items), options.get("page_param"))
    if not items:
        next_url = None
    return Page(items=items, next_url=next_url, cursor=next_url, guessed=guessed)


def next_page_url(url: str, count: int, param: str | None = None) -> str | None:
    """The next page by its number or offset: ``?page=3`` -> ``?page=4``, ``?offset=40``
    with 20 items -> ``?offset=60``; a first page without either gets ``page=2``."""
    query = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
    names = (param,) if param else PAGE_PARAMS + OFFSET_PARAMS
    for name in names:
        if name in query:
            try:
                value = int(query[name])
            except ValueError:
                return None
            step = count if name in OFFSET_PARAMS else 1
            return add_or_replace_parameter(url, name, str(value + step))
    if param:  # the first page, without the parameter
        return add_or_replace_parameter(url, param, str(count if param in OFFSET_PARAMS else 2))
    return add_or_replace_parameter(url, "page", "2")


def find_endpoint(body: bytes | str, url: str) -> str | None:
    """The JSON endpoint an infinite-scroll page loads its items from, or None."""
    sel = _selector(body, url)
    if sel is None:
        return None
    for attr in _ENDPOINT_ATTRS:
        value = sel.xpath(f"//*[@{attr}]/@{attr}").get()
        if value and value.strip():
            return urljoin(url, value.strip())
    nxt = sel.xpath('//link[@rel="next"][contains(@type, "json")]/@href').get()
    if nxt:
        return urljoin(url, nxt.strip())
    for script in sel.xpath("//script/text()").getall():
        match = _FETCH.search(script)
        if match:
            return urljoin(url, match.group(1))
    return None


# -- JSON pages -------------------------------------------------------------------------


def _path(doc: Any, dotted: str) -> Any:
    node = doc
    for part in dotted.split("."):
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _find_items(doc: Any) -> tuple[list[Any] | None, Any]:
    """The first list under a usual name (breadth first, 3 levels), and the object
    holding it (where its next cursor usually is too)."""
    if isinstance(doc, list):
        return doc, None
    level: list[Any] = [doc]
    for _ in range(3):
        nxt: list[Any] = []
        for node in level:
            if not isinstance(node, dict):
                continue
            for key in ITEM_KEYS:
                value = node.get(key)
                if isinstance(value, list):
                    return value, node
            nxt.extend(v for v in node.values() if isinstance(v, dict))
        level = nxt
    return None, None


def _item(raw: Any, url: str, options: dict[str, str]) -> Item | None:
    if isinstance(raw, str):
        return Item(urljoin(url, raw)) if raw.strip() else None
    if not isinstance(raw, dict):
        return None
    if isinstance(raw.get("node"), dict) and len(raw) <= 2:  # GraphQL edges
        raw = raw["node"]
    sku_field = options.get("sku_field")
    sku = raw.get(sku_field) if sku_field else next((raw[k] for k in SKU_FIELDS if k in raw), None)
    sku_text = str(sku) if isinstance(sku, str | int) and str(sku) else None
    field_name = options.get("url_field")
    candidates = (field_name,) if field_name else URL_FIELDS
    for name in candidates:
        value = _path(raw, name) if "." in name else raw.get(name)
        if isinstance(value, dict):
            value = value.get("href") or value.get("url")
        if isinstance(value, str) and value.strip():
            return Item(urljoin(url, value.strip()), sku_text)
    template = options.get("url_template")
    if template:
        values = {k: v for k, v in raw.items() if isinstance(v, str | int)}
        try:
            return Item(urljoin(url, template.format_map(values)), sku_text)
        except (KeyError, ValueError, IndexError):
            return None
    return None


def _next(doc: Any, url: str, options: dict[str, str]) -> tuple[str | None, str | None]:
    """(next URL, cursor) of a JSON page; (None, None) at the end."""
    if not isinstance(doc, dict):
        return None, None
    given = options.get("cursor_field")
    paths = ((tuple(given.split(".")), "cursor"),) if given else CURSOR_PATHS
    for path, usual in paths:
        value: Any = doc
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, dict):
            value = value.get("href") or value.get("url")
        if value is None or value is False or value == "" or isinstance(value, dict | list):
            continue
        if path[-1] in ("endCursor", "end_cursor"):
            info = _path(doc, ".".join(path[:-1]))
            if isinstance(info, dict) and info.get("hasNextPage", info.get("has_next_page")) is (
                False
            ):
                return None, None
        text = str(value).strip()
        if not text:
            continue
        if text.startswith(("http://", "https://", "/", "?")):
            nxt = urljoin(url, text)
            return nxt, nxt
        param = options.get("cursor_param")
        if not param:
            query = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
            param = next((p for p in CURSOR_PARAMS if p in query), usual)
        return add_or_replace_parameter(url, param, text), text
    return None, None


def parse_json(body: bytes | str, url: str, options: dict[str, str] | None = None) -> Page:
    options = options or {}
    try:
        doc = json.loads(body)
    except ValueError as exc:
        return Page(error=f"not JSON: {exc}")
    path = options.get("items_path")
    holder = None
    if path:
        raw_items = _path(doc, path)
    else:
        raw_items, holder = _find_items(doc)
    if raw_items is None:
        raw_items = []
    if not isinstance(raw_items, list):
        return Page(error=f"items at {path!r} are not a list")
    items = [it for it in (_item(raw, url, options) for raw in raw_items) if it is not None]
    if raw_items and not items:
        return Page(
            error="no product URL in the items (give --url-field or --url-template)",
        )
    next_url, cursor = _next(doc, url, options)
    if next_url is None and holder is not None and holder is not doc:
        next_url, cursor = _next(holder, url, options)
    if not raw_items:
        next_url = cursor = None
    return Page(items=items, next_url=next_url, cursor=cursor)
