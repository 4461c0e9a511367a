"""Whose price is it: the page's own product, told by its SKU, name or URL.

A browser page loads JSON for many things: the product's offer, but also recommendations,
"recently viewed", a featured product, the mini-cart. Without a per-host URL pattern
(``PRICEWATCH_BROWSER_XHR_PATTERNS``), a JSON payload's price is used only when the
payload names the page's own product:

- by URL: the payload's ``url``/``link``/``href`` has the path of the page, of its
  ``<link rel=canonical>`` or of its ``og:url``;
- by SKU: the payload's ``sku``/``id``/``productId``/``mpn``/``gtin`` equals an identifier
  the page gives its product (``data-sku``/``data-product-id``/``data-id`` on the product
  title's own block, ``itemprop=sku`` there, ``product:retailer_item_id``), or is a run of
  whole words of the page's URL path (``/products/kettle-ab-1234`` names ``AB-1234``);
- by name: the payload's ``name``/``title`` equals the page's product title (its
  ``<h1>``) or ``og:title``, ignoring case, spacing and punctuation.

Pure functions; they never raise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from lxml import etree, html

_SKU_KEYS = frozenset(
    {
        "sku",
        "id",
        "productid",
        "productsku",
        "itemid",
        "itemnumber",
        "articlenumber",
        "partnumber",
        "mpn",
        "gtin",
        "gtin8",
        "gtin12",
        "gtin13",
        "gtin14",
        "ean",
        "upc",
    }
)
_NAME_KEYS = frozenset({"name", "title", "productname", "producttitle"})
_URL_KEYS = frozenset({"url", "link", "href", "producturl", "canonicalurl", "canonical", "path"})
_ID_ATTRS = ("data-sku", "data-product-id", "data-product-sku", "data-id", "data-item-id")
_WORD = re.compile(r"[^\W_]+")
# An identifier found in the URL path must be this long (a bare "12" names nothing).
_MIN_URL_ID = 4


def _norm_id(value: object) -> str:
    return "".join(_WORD.findall(str(value).lower())) if value is not None else ""


def _norm_name(value: object) -> str:
    return " ".join(_WORD.findall(str(value).casefold())) if value is not None else ""


def _norm_path(url: str) -> str:
    try:
        path = urlsplit(url.strip()).path
    except ValueError:
        return ""
    return path.rstrip("/").lower()


def _key(key: object) -> str:
    return str(key).replace("_", "").replace("-", "").lower()


@dataclass(frozen=True, slots=True)
class PageIdentity:
    """What a page says about its own product."""

    paths: frozenset[str] = frozenset()  # URL paths: the page's, canonical, og:url
    ids: frozenset[str] = frozenset()  # normalised identifiers (alphanumerics, lower case)
    names: frozenset[str] = frozenset()  # normalised titles
    words: tuple[str, ...] = field(default=())  # the page URL path's words, in order

    def merge(self, other: PageIdentity) -> PageIdentity:
        if other == self:
            return self
        return PageIdentity(
            self.paths | other.paths,
            self.ids | other.ids,
            self.names | other.names,
            self.words or other.words,
        )

    def names_product(
        self, ids: Iterable[object], names: Iterable[object], urls: Iterable[str]
    ) -> bool:
        """Do these identifiers, names or URLs (of a JSON payload) name this page's product?"""
        for url in urls:
            path = _norm_path(url)
            if path and path in self.paths:
                return True
        for raw in ids:
            key = _norm_id(raw)
            if not key:
                continue
            if key in self.ids or (len(key) >= _MIN_URL_ID and self._in_url(str(raw))):
                return True
        return any(_norm_name(n) and _norm_name(n) in self.names for n in names)

    def _in_url(self, raw: str) -> bool:
        """``raw``'s words appear, in order and whole, in the page URL path."""
        parts = [w.lower() for w in _WORD.findall(raw)]
        if not parts or not self.words:
            return False
        n = len(parts)
        return any(list(self.words[i : i + n]) == parts for i in range(len(self.words) - n + 1))


def page_identity(body: bytes | str, url: str) -> PageIdentity:
    """The identity of the product of the page ``body`` at ``url``."""
    paths = {_norm_path(url)}
    words = tuple(w.lower() for w in _WORD.findall(urlsplit(url).path))
    ids: set[str] = set()
    names: set[str] = set()
    if isinstance(body, str):
        body = body.encode("utf-8", "replace")
    try:
        root = html.fromstring(body) if body.strip() else None
    except (etree.ParserError, ValueError):
        root = None
    if root is not None:
        for href in root.xpath(
            "//link[@rel='canonical']/@href | //meta[@property='og:url']/@content"
        ):
            paths.add(_norm_path(str(href)))
        for title in root.xpath("//meta[@property='og:title']/@content"):
            names.add(_norm_name(title))
        for content in root.xpath("//meta[@property='product:retailer_item_id']/@content"):
            ids.add(_norm_id(content))
        h1s = root.xpath("//body//h1")
        if h1s:
            title = h1s[0]
            names.add(_norm_name(title.text_content()))
            # The title's own block (its ancestors) carries the product's identifiers.
            for block in [title, *title.iterancestors()]:
                for attr in _ID_ATTRS:
                    value = block.get(attr)
                    if value:
                        ids.add(_norm_id(value))
            # itemprop=sku beside the title, in the title's own item (not a card's).
            parent = title.getparent()
            own = set(title.iterancestors())
            if parent is not None and parent.tag not in ("body", "html"):
                for el in parent.xpath(".//*[@itemprop='sku']"):
                    scope = next(
                        (a for a in el.iterancestors() if a.get("itemscope") is not None), None
                    )
                    if scope is None or scope in own:
                        ids.add(_norm_id(el.get("content") or el.text_content()))
    return PageIdentity(
        paths=frozenset(p for p in paths if p),
        ids=frozenset(i for i in ids if i),
        names=frozenset(n for n in names if n),
        words=words,
    )


def payload_identity(data: Any) -> tuple[list[object], list[object], list[str]]:
    """The identifiers, names and URLs a JSON payload gives the product whose price it
    carries: the keys of the object holding the price (top level or one object down)."""
    objects: list[Mapping[str, Any]] = []
    if isinstance(data, Mapping):
        objects.append(data)
        objects.extend(v for v in data.values() if isinstance(v, Mapping))
    ids: list[object] = []
    names: list[object] = []
    urls: list[str] = []
    for obj in objects:
        for key, value in obj.items():
            if isinstance(value, Mapping | list) or value is None or isinstance(value, bool):
                continue
            k = _key(key)
            if k in _SKU_KEYS:
                ids.append(value)
            elif k in _NAME_KEYS:
                names.append(value)
            elif k in _URL_KEYS and isinstance(value, str):
                urls.append(value)
    return ids, names, urls
