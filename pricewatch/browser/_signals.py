"""Signs that a page renders its price in the browser, and that a JSON payload is a product.

Pure functions over a static page or a parsed payload; they never raise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lxml import etree, html

# Element ids/attributes that single-page-application frameworks mount on.
_APP_ROOT_XPATH = (
    "//*[@id='app' or @id='root' or @id='__next' or @id='__nuxt' or @id='svelte' "
    "or @data-reactroot or @ng-app or @ng-version or @data-v-app or @data-server-rendered]"
)
# Nodes that should carry a price (class, id, itemprop or data attribute naming one).
_PRICE_NODE_XPATH = (
    "//body//*[contains(translate(@class, 'PRICE', 'price'), 'price') "
    "or contains(translate(@id, 'PRICE', 'price'), 'price') or @itemprop='price' "
    "or @data-price]"
)
# A script calling a price/offer/product endpoint.
_PRICE_API = re.compile(
    rb"""(?:fetch|axios|XMLHttpRequest|\$\.(?:get|ajax)|/api/)[^;]{0,200}?"""
    rb"""(?:price|offer|product|sku|inventory)""",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d")


def client_rendering_signs(body: bytes | str) -> list[str]:
    """Which signs of client-side price rendering ``body`` shows: ``empty_price_node``,
    ``app_root``, ``price_api``. Empty when none (or the page cannot be parsed)."""
    if isinstance(body, str):
        body = body.encode("utf-8", "replace")
    if not body.strip():
        return []
    try:
        root = html.fromstring(body)
    except (etree.ParserError, ValueError):
        return []
    signs = []
    nodes = root.xpath(_PRICE_NODE_XPATH)
    if nodes and not any(_DIGIT.search(n.text_content() or n.get("content") or "") for n in nodes):
        signs.append("empty_price_node")
    if root.xpath(_APP_ROOT_XPATH):
        signs.append("app_root")
    scripts = b"\n".join(
        (s.text or "").encode("utf-8", "replace")
        for s in root.iter("script")
        if (s.get("type") or "text/javascript").lower()
        in ("text/javascript", "module", "application/javascript")
    )
    if _PRICE_API.search(scripts):
        signs.append("price_api")
    return signs


def _norm(key: str) -> str:
    return key.replace("_", "").replace("-", "").lower()


def _has_price_key(node: Mapping[str, Any]) -> bool:
    if str(node.get("@type", "")).lower() in ("product", "offer", "productgroup"):
        return True
    return any(isinstance(k, str) and "price" in _norm(k) for k in node)


def product_like(data: Any) -> bool:
    """A JSON payload that describes one product: an object carrying a price key (or a
    schema.org Product/Offer) at its top level or one object down (``{"data": {...}}``).
    Lists of products (listings, recommendations) are not product-like: their first price
    is not this page's."""
    if not isinstance(data, Mapping):
        return False
    if _has_price_key(data):
        return True
    return any(isinstance(v, Mapping) and _has_price_key(v) for v in data.values())
