"""The sandbox server: every shop on its own loopback IP, one aiohttp application each.

All shops share one state (catalogue, stats, modes), so the control paths answer the
same on every host: ``GET /_truth``, ``GET /_stats``, ``POST /_stats/reset``,
``GET /_urls.txt[?all=1][&js=0][&host=IP]``, ``GET /_shops``, ``GET|POST /_control``,
``GET /_poisson`` (:mod:`pricewatch.sandbox._poisson`).
Control paths are never counted in stats, never delayed and never affected by modes.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import ipaddress
import logging
import random
import secrets
import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from decimal import Decimal
from typing import Any

from aiohttp import web

from pricewatch.sandbox import _assets, _hostile, _listings, _pages, _poisson, _trust
from pricewatch.sandbox._catalog import (
    IN_STOCK,
    OUT_OF_STOCK,
    Product,
    Shop,
    build_shops,
)
from pricewatch.sandbox._locale import BY_CURRENCY
from pricewatch.sandbox._modes import (
    MODE_PARAMS,
    ModeError,
    Modes,
    gone_status,
    loyalty_price,
    retry_after_value,
)
from pricewatch.sandbox._stats import Stats

logger = logging.getLogger(__name__)

SHOP_INDEX = web.AppKey("shop_index", int)
SHUTDOWN_GRACE = 0.5  # seconds in-flight requests get to finish on stop()
PAGE_CACHE_SIZE = 2048  # rendered pages kept (~50 MB); a miss costs ~1 ms
LIST_PAGE_SIZE = 12  # items per /api/list page (JS shop infinite scroll)
_EXEMPT_PREFIXES = ("/robots.txt", "/api/products/")  # modes never apply here
_ASSET_PREFIXES = ("/static/", "/cdn/", "/vendor/")  # a JS shop's static assets
DEFAULT_ASSET_LATENCY = "30-150"  # ms per asset request, JS shops of the real weight
_IMMUTABLE = {"Cache-Control": "public, max-age=31536000, immutable"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def parse_latency(value: str | tuple[float, float] | None) -> tuple[float, float] | None:
    """``"300-900"`` / ``"300"`` / ``(300, 900)`` (milliseconds) -> seconds, or None."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        low_text, _, high_text = value.partition("-")
        try:
            low = float(low_text)
            high = float(high_text) if high_text else low
        except ValueError:
            raise ValueError(f"latency must be MIN-MAX milliseconds, got {value!r}") from None
    else:
        low, high = (float(v) for v in value)
    if low < 0 or high < low:
        raise ValueError(
            f"latency must be MIN-MAX milliseconds with 0 <= MIN <= MAX, got {value!r}"
        )
    return low / 1000, high / 1000


class _Dropped(Exception):
    """The connection was closed without a response (drop mode)."""


class Sandbox:
    """Local shops for demos, tests and benchmarks, deterministic from ``seed``.

    ``await start()`` binds every shop (``host_base``, ``host_base + 1``, ...; ``port=0``
    gives each host its own free port) and returns the shop list; ``await stop()`` closes
    them. ``truth()``, ``stats()``, ``control()`` must be called on the server's loop
    (see ``BackgroundSandbox`` for use from another thread).
    """

    def __init__(
        self,
        seed: int = 1,
        shops: int = 4,
        products: int = 50,
        latency: str | tuple[float, float] | None = None,
        host_base: str = "127.0.0.2",
        port: int = 0,
        js_shops: int = 0,
        modes: Iterable[dict[str, Any]] = (),
        js_delay: float = 0.3,
        js_weight: str = "real",
        asset_latency: str | tuple[float, float] | None = "auto",
        recommendations: str = "mixed",
        cases: bool = False,
        currencies: Iterable[str] = (),
        poisson: str | None = None,
        page_kb: int = 0,
    ) -> None:
        if shops < 0 or js_shops < 0 or shops + js_shops < 1:
            raise ValueError(f"shops + js_shops must be >= 1, got {shops} + {js_shops}")
        if products < 1:
            raise ValueError(f"products must be >= 1, got {products}")
        try:
            first = ipaddress.IPv4Address(host_base)
        except ValueError:
            raise ValueError(f"host_base must be an IPv4 address, got {host_base!r}") from None
        if not (first + shops + js_shops - 1).is_loopback:
            raise ValueError(f"host_base must leave every shop in 127.0.0.0/8, got {host_base!r}")
        if not 0 <= port < 65536:
            raise ValueError(f"port must be 0-65535, got {port}")
        if not 0 <= page_kb <= 4096:
            raise ValueError(f"page_kb must be 0-4096, got {page_kb}")
        self.seed = seed
        self._n_shops = shops
        self._n_products = products
        self._n_js = js_shops
        self._host_base = host_base
        self._port = port
        self._js_delay_ms = int(js_delay * 1000)
        self._latency = parse_latency(latency)
        if js_weight not in _assets.WEIGHTS:
            raise ValueError(f"js_weight must be one of {_assets.WEIGHTS}, got {js_weight!r}")
        self._js_weight = js_weight
        if recommendations not in _trust.RECOMMENDATIONS:
            raise ValueError(
                f"recommendations must be one of {_trust.RECOMMENDATIONS}, got {recommendations!r}"
            )
        self._recommendations = recommendations  # style of the "also bought" blocks
        self._page_kb = page_kb  # HTML product pages padded to about this size (0: as made)
        self._cases = cases  # the trust cases of ``_trust`` appended to every shop
        self._currencies = tuple(currencies)
        for code in self._currencies:
            if code not in BY_CURRENCY:
                raise ValueError(f"currencies must be among {sorted(BY_CURRENCY)}, got {code!r}")
        # Fetches of each glitch product (page on HTML shops, offer JSON on JS-only ones).
        self._fetches: Counter[str] = Counter()
        if asset_latency == "auto":
            asset_latency = DEFAULT_ASSET_LATENCY if js_weight == "real" else None
        elif asset_latency == "none":
            asset_latency = None
        # Per request to a JS shop's static assets (/static/, /cdn/, /vendor/), on top of
        # ``latency``: the round trip to a CDN or a third party.
        self._asset_latency = parse_latency(asset_latency)
        self._asset_rng = random.Random(f"pricewatch-sandbox:{seed}:asset-latency")
        self._latency_rng = random.Random(f"pricewatch-sandbox:{seed}:latency")
        self._challenge_rng = random.Random(f"pricewatch-sandbox:{seed}:challenge")
        self._shops = self._build()
        hosts = [s.host for s in self._shops]
        self._stats = Stats(hosts)
        self._modes = Modes(seed, hosts)
        # Rendered pages, least recently used dropped first (~25 KB each).
        self._cache: OrderedDict[tuple[int, str], bytes] = OrderedDict()
        self._reprices = 0
        self._runners: list[web.AppRunner] = []
        self._categories: dict[str, _listings.Category] = {}  # per host, made on first use
        # Prices changing as Poisson processes (``_poisson``), from start().
        self._poisson_spec = None if poisson is None else _poisson.parse(poisson)
        self._poisson: _poisson.PoissonPrices | None = None
        self._initial_modes = list(modes)
        for body in self._initial_modes:
            self.control(body)  # validates early: a bad flag fails before binding

    # --- lifecycle ------------------------------------------------------------------------
    async def start(self) -> list[dict[str, Any]]:
        if self._n_js and self._js_weight == "real":
            _assets.real_assets()  # generated once (~0.3 s), before the first page asks
        try:
            for shop in self._shops:
                runner = web.AppRunner(
                    self._app(shop),
                    access_log=None,
                    handle_signals=False,
                    shutdown_timeout=SHUTDOWN_GRACE,
                )
                await runner.setup()
                self._runners.append(runner)
                site = web.TCPSite(runner, shop.host, self._port)
                await site.start()
                port = runner.addresses[0][1]
                shop.base_url = f"http://{shop.host}:{port}"
        except BaseException:
            await self.stop()
            raise
        self._start_poisson()
        return self.shops

    def _start_poisson(self) -> None:
        if self._poisson_spec is None:
            return
        keys = [f"{s.index}{p.path}" for s in self._shops if not s.js for p in s.products]
        self._poisson = _poisson.PoissonPrices(self.seed, keys, *self._poisson_spec)

    def poisson_log(self) -> dict[str, Any]:
        """The Poisson mode's rates, changes and fetches (``_poisson``); {} when off."""
        if self._poisson is None:
            return {}
        by_key = {f"{s.index}{p.path}": s.url(p.path) for s in self._shops for p in s.products}
        return self._poisson.log(by_key.__getitem__)

    async def stop(self) -> None:
        for shop in self._shops:  # held requests are answered, not left to the shutdown
            self._modes.clear(shop.host)
        runners, self._runners = self._runners, []
        await asyncio.gather(*(runner.cleanup() for runner in runners))

    @property
    def asset_latency_ms(self) -> str | None:
        """The static-asset latency in effect, ``"MIN-MAX"`` milliseconds, or None."""
        if self._asset_latency is None:
            return None
        low, high = (round(v * 1000) for v in self._asset_latency)
        return f"{low}-{high}"

    @property
    def shops(self) -> list[dict[str, Any]]:
        return [
            {
                "name": s.name,
                "host": s.host,
                "base_url": s.base_url,
                "currency": s.locale.currency,
                "locale": s.locale.lang,
                "js": s.js,
                "products": len(s.products),
            }
            for s in self._shops
        ]

    # --- ground truth, stats, control -----------------------------------------------------
    def truth(self) -> dict[str, dict[str, Any]]:
        """Every product of every shop: absolute URL -> offer as the pages show it now."""
        out: dict[str, dict[str, Any]] = {}
        for shop in self._shops:
            gone = self._modes.get(shop.host, "gone")
            loc = shop.locale
            for p in shop.products:
                out[shop.url(p.path)] = {
                    "sku": p.sku,
                    "name": p.name,
                    "price": loc.machine(p.price),
                    "currency": loc.currency,
                    "regular_price": (
                        None if p.regular_price is None else loc.machine(p.regular_price)
                    ),
                    "availability": p.availability,
                    "markup": p.markup,
                    "disallowed": p.disallowed,
                    "gtin13": p.gtin13,
                    "shop": shop.name,
                    "host": shop.host,
                    "js": shop.js,
                    "gone": None if gone is None else gone_status(gone, self.seed, p.sku),
                    "api_url": shop.url(f"/api/products/{p.sku}"),
                }
                if p.case:
                    out[shop.url(p.path)].update(_trust.truth_fields(loc, p, self._fetches[p.sku]))
                loyalty = self._modes.get(shop.host, "loyalty")
                if loyalty is not None and not shop.js:
                    price = loyalty_price(p.price, loyalty.params["discount"])
                    out[shop.url(p.path)]["loyalty_price"] = loc.machine(price)
        return out

    def stats(self) -> dict[str, Any]:
        return self._stats.to_json()

    def reset_stats(self) -> None:
        self._stats.reset()

    def urls(self, *, all: bool = False, js: bool = True, host: str | None = None) -> list[str]:
        """Product URLs of every shop; disallowed ones only with ``all``."""
        return [
            shop.url(p.path)
            for shop in self._shops
            if (js or not shop.js) and (host is None or shop.host == host)
            for p in shop.products
            if all or not p.disallowed
        ]

    def control(self, body: dict[str, Any]) -> dict[str, Any]:
        """Apply a control request (see the module docs of ``pricewatch.sandbox``)."""
        if not isinstance(body, dict):
            raise ModeError(f"control body must be a JSON object, got {body!r}")
        known = {"reset", "host", "hosts", "mode", "clear", "reprice", "flip_stock", "latency"}
        mode_keys = set().union(*(p.keys() for p in MODE_PARAMS.values())) | {"duration"}
        unknown = set(body) - known - mode_keys
        if unknown:
            raise ModeError(f"unknown control field(s): {sorted(unknown)}")
        result: dict[str, Any] = {}
        if body.get("reset"):
            self._reset()
            result["reset"] = True
        hosts = self._target_hosts(body)
        if "mode" in body:
            name = body["mode"]
            params = {k: v for k, v in body.items() if k in mode_keys}
            for host in hosts:
                if name in (None, "none", "off"):
                    self._modes.clear(host)
                else:
                    self._modes.set(host, name, params)
            self._cache.clear()
        elif set(body) & mode_keys:
            raise ModeError(
                f"mode parameters given without 'mode': {sorted(set(body) & mode_keys)}"
            )
        if body.get("clear"):
            for host in hosts:
                self._modes.clear(host, str(body["clear"]))
        if "latency" in body:
            self._latency = parse_latency(body["latency"])
        if "reprice" in body:
            result["repriced"] = self._reprice(_fraction("reprice", body["reprice"]), hosts)
        if "flip_stock" in body:
            result["flipped"] = self._flip_stock(_fraction("flip_stock", body["flip_stock"]), hosts)
        result["modes"] = self._modes.to_json()
        return result

    def _target_hosts(self, body: dict[str, Any]) -> list[str]:
        wanted = body.get("hosts")
        if wanted is None and body.get("host") is not None:
            wanted = [body["host"]]
        if wanted is None:
            return [s.host for s in self._shops]
        out = []
        for item in wanted:
            match = [s.host for s in self._shops if item in (s.host, s.name, s.base_url)]
            if not match:
                raise ModeError(
                    f"host must be one of {[s.host for s in self._shops]}, got {item!r}"
                )
            out.append(match[0])
        return out

    def _build(self) -> list[Shop]:
        shops = build_shops(
            self.seed, self._n_shops, self._n_products, self._n_js, self._host_base,
            self._currencies,
        )  # fmt: skip
        if self._cases:
            _trust.add_cases(shops, self.seed)
        return shops

    def _reset(self) -> None:
        base_urls = [s.base_url for s in self._shops]
        self._shops = self._build()
        self._fetches.clear()
        for shop, url in zip(self._shops, base_urls, strict=True):
            shop.base_url = url
        for shop in self._shops:
            self._modes.clear(shop.host)
        self._reprices = 0
        self._cache.clear()
        self._start_poisson()

    def _products(self, hosts: list[str]) -> Iterable[tuple[Shop, Product]]:
        for shop in self._shops:
            if shop.host in hosts:
                for p in shop.products:
                    yield shop, p

    def _reprice(
        self,
        fraction: float,  # share of the products to reprice, 0..1
        hosts: list[str],
    ) -> list[str]:
        """Change the price of ~``fraction`` of the products, the same way for the same seed."""
        self._reprices += 1
        rng = random.Random(f"pricewatch-sandbox:{self.seed}:reprice:{self._reprices}")
        changed = []
        for shop, p in self._products(hosts):
            if rng.random() >= fraction:
                continue
            loc = shop.locale
            step = Decimal(rng.randint(3, 25)) / 100
            down = rng.random() < 0.5
            new = loc.quantize(p.price * (1 - step if down else 1 + step))
            if new == p.price or new <= 0:
                new = loc.quantize(p.price + Decimal(1))
                down = False
            if down and p.regular_price is None and rng.random() < 0.5:
                p.regular_price = p.price  # a sale starts: the old price is struck through
            if p.regular_price is not None and new >= p.regular_price:
                p.regular_price = None  # the sale ended
            p.price = new
            changed.append(shop.url(p.path))
        self._cache.clear()
        return changed

    def _flip_stock(self, fraction: float, hosts: list[str]) -> list[str]:
        rng = random.Random(f"pricewatch-sandbox:{self.seed}:stock:{self._reprices}")
        self._reprices += 1
        changed = []
        for shop, p in self._products(hosts):
            if rng.random() < fraction:
                p.availability = OUT_OF_STOCK if p.availability == IN_STOCK else IN_STOCK
                changed.append(shop.url(p.path))
        self._cache.clear()
        return changed

    # --- HTTP -----------------------------------------------------------------------------
    def _app(self, shop: Shop) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        app[SHOP_INDEX] = shop.index
        r = app.router
        r.add_get("/_truth", self._h_truth)
        r.add_get("/_stats", self._h_stats)
        r.add_post("/_stats/reset", self._h_stats_reset)
        r.add_get("/_urls.txt", self._h_urls)
        r.add_get("/_shops", self._h_shops)
        r.add_get("/_poisson", self._h_poisson)
        r.add_get("/_control", self._h_control_get)
        r.add_post("/_control", self._h_control)
        r.add_get("/", self._h_home)
        r.add_get("/robots.txt", self._h_robots)
        r.add_get("/sitemap.xml", self._h_sitemap)
        r.add_get("/products", self._h_listing)
        r.add_get("/products/{slug}", self._h_product)
        r.add_get("/private/products/{slug}", self._h_product)
        r.add_get("/api/products/{sku}", self._h_api_product)
        r.add_get("/api/offer/{sku}", self._h_api_offer)
        r.add_get("/api/list", self._h_api_list)
        r.add_get("/static/js/{name}", self._h_js)
        r.add_get("/static/css/shop.css", self._h_css)
        r.add_get("/static/img/{name}", self._h_img)
        r.add_get("/static/fonts/shop.woff2", self._h_font)
        r.add_get("/vendor/tagmanager/gtm.js", self._h_tracker)
        r.add_get("/vendor/collect", self._h_collect)
        r.add_get("/vendor/tr/pixel", self._h_collect)
        r.add_get("/vendor/hotjar/beacon", self._h_collect)
        r.add_get("/vendor/reviews/summary", self._h_reviews_summary)
        r.add_get("/_listings", self._h_listings_get)
        r.add_post("/_listings", self._h_listings_post)
        r.add_get("/listing/offset", self._h_listing_offset)
        r.add_get("/listing/api", self._h_listing_api)
        r.add_get("/listing/scroll", self._h_listing_scroll)
        r.add_get("/listing/scroll.json", self._h_listing_scroll_json)
        r.add_get("/listing/scroll-js", self._h_listing_scroll_js)
        r.add_get("/listing/config.json", self._h_listing_config)
        r.add_get("/listing/loop.json", self._h_listing_loop)
        r.add_get("/listing/short", self._h_listing_short)
        r.add_get("/listing/sitemap.xml", self._h_listing_sitemap)
        r.add_get("/listing/sitemap-{index:\\d+}.xml.gz", self._h_listing_sitemap_child)
        r.add_get("/listing/item/{id}", self._h_listing_item)
        r.add_get("/cdn/img/{name:.+}", self._h_real_img)
        r.add_get("/cdn/{tail:.+}", self._h_real_asset)
        r.add_get("/vendor/{tail:.+}", self._h_real_asset)
        return app

    def _shop(self, request: web.Request) -> Shop:
        return self._shops[request.app[SHOP_INDEX]]

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        if path.startswith("/_"):
            return await handler(request)
        shop = self._shop(request)
        self._stats.enter(shop.host, path, request.remote, request.headers.get("Cookie"))
        status: int | str = "error"
        admitted = False
        try:
            tolerance = None
            if not path.startswith(_EXEMPT_PREFIXES):
                tolerance = self._modes.get(shop.host, "tolerance")
            if tolerance is not None:
                tolerance.seen += 1
                p = tolerance.params
                admitted = self._stats.admit(shop.host, p["concurrency"])
                if not admitted:
                    status = 429
                    return web.Response(
                        status=429,
                        text="Too Many Requests",
                        headers={"Retry-After": str(p["retry_after"])},
                    )
            if self._latency is not None:
                await asyncio.sleep(self._latency_rng.uniform(*self._latency))
            if self._asset_latency is not None and shop.js and path.startswith(_ASSET_PREFIXES):
                await asyncio.sleep(self._asset_rng.uniform(*self._asset_latency))
            response: web.StreamResponse | None = None
            if not path.startswith(_EXEMPT_PREFIXES):
                response = await self._apply_modes(shop, request)
            if response is None:
                response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        except _Dropped:
            status = "dropped"
            return web.Response(status=500)  # never written: the transport is gone
        finally:
            if admitted:
                self._stats.done(shop.host)
            self._stats.leave(shop.host, status)

    async def _apply_modes(self, shop: Shop, request: web.Request) -> web.StreamResponse | None:
        for mode in self._modes.active(shop.host):
            mode.seen += 1
            p = mode.params
            if mode.name == "hold":
                await mode.hold()
            elif mode.name == "slow":
                await asyncio.sleep(p["delay"])
            elif mode.name == "drop":
                if mode.rng.random() < p["fraction"]:
                    if request.transport is not None:
                        request.transport.abort()
                    raise _Dropped()
            elif mode.name == "ratelimit":
                now = asyncio.get_running_loop().time()
                window = mode.window
                if p["per_source"]:
                    window = mode.sources.setdefault(request.remote or "", deque())
                while window and window[0] <= now - p["window"]:
                    window.popleft()
                if p["rate"] <= 0 or len(window) >= p["rate"]:
                    retry = retry_after_value(p["retry_after"], p["retry_after_format"])
                    return web.Response(
                        status=429, text="Too Many Requests", headers={"Retry-After": retry}
                    )
                window.append(now)
            elif mode.name == "burst503":
                if (mode.seen - 1) % p["period"] < p["burst"]:
                    headers = {}
                    if p["retry_after"] is not None:
                        headers["Retry-After"] = str(p["retry_after"])
                    return web.Response(status=503, text="Service Unavailable", headers=headers)
            elif mode.name == "challenge":
                if mode.rng.random() < p["fraction"]:
                    return web.Response(
                        status=p["status"],
                        text=_pages.challenge_page(self._challenge_rng),
                        content_type="text/html",
                    )
            elif mode.name in _hostile.PARAMS:
                product = shop.by_path.get(request.path)
                if product is not None and _hostile.applies(
                    p["fraction"], self.seed, mode.name, product
                ):
                    return await _hostile.respond(mode.name, p, shop, product, request)
            elif mode.name == "loyalty":
                if request.path == "/login":
                    token = secrets.token_hex(8)
                    mode.tokens.add(token)
                    response = web.Response(text="Welcome, member", content_type="text/html")
                    response.set_cookie(p["cookie"], token, path="/", httponly=True)
                    return response
                product = shop.by_path.get(request.path)
                if (
                    product is not None
                    and not shop.js
                    and request.cookies.get(p["cookie"]) in mode.tokens
                ):
                    member = replace(product, price=loyalty_price(product.price, p["discount"]))
                    text = _pages.product_page(shop, member, self._recommendations, self._page_kb)
                    return web.Response(text=text, content_type="text/html")
            elif mode.name == "gone":
                product = shop.by_path.get(request.path)
                status = None if product is None else gone_status(mode, self.seed, product.sku)
                if status is not None:
                    return web.Response(
                        status=status, text="Not Found" if status == 404 else "Gone"
                    )
        return None

    def _html(self, shop: Shop, key: str, render: Callable[[], str | None]) -> web.Response:
        body = self._cache.get((shop.index, key))
        if body is None:
            text = render()
            if text is None:
                raise web.HTTPNotFound()
            body = text.encode()
            self._cache[(shop.index, key)] = body
            if len(self._cache) > PAGE_CACHE_SIZE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end((shop.index, key))
        return web.Response(body=body, content_type="text/html", charset="utf-8")

    async def _h_home(self, request: web.Request) -> web.Response:
        shop = self._shop(request)
        return self._html(shop, "/", lambda: _pages.home_page(shop))

    async def _h_robots(self, request: web.Request) -> web.Response:
        return web.Response(text=_pages.robots_txt(self._shop(request)))

    async def _h_sitemap(self, request: web.Request) -> web.Response:
        shop = self._shop(request)
        return web.Response(text=_pages.sitemap_xml(shop), content_type="application/xml")

    async def _h_listing(self, request: web.Request) -> web.Response:
        shop = self._shop(request)
        if shop.js:
            return self._html(shop, "/products", lambda: _pages.js_listing_page(shop))
        try:
            page = int(request.query.get("page", "1"))
        except ValueError:
            raise web.HTTPNotFound() from None
        return self._html(shop, f"/products?page={page}", lambda: _pages.listing_page(shop, page))

    async def _h_product(self, request: web.Request) -> web.Response:
        shop = self._shop(request)
        product = shop.by_path.get(request.path)
        if product is None:
            raise web.HTTPNotFound()
        recs = self._recommendations
        if shop.js:
            render = (
                _pages.js_product_page_real if self._js_weight == "real" else _pages.js_product_page
            )
            return self._html(
                shop, product.path, lambda: render(shop, product, self._js_delay_ms, recs)
            )
        if self._poisson is not None:
            self._poisson_fetched(shop, product)
        if self._glitching(product):
            text = _pages.product_page(shop, _trust.glitched(product), recs, self._page_kb)
            return web.Response(text=text, content_type="text/html")
        return self._html(
            shop, product.path, lambda: _pages.product_page(shop, product, recs, self._page_kb)
        )

    def _poisson_fetched(self, shop: Shop, product: Product) -> None:
        """Apply the price changes due by now to a product about to be served."""
        assert self._poisson is not None
        key = f"{shop.index}{product.path}"
        if key not in self._poisson:
            return
        due = self._poisson.fetched(key)
        for _ in range(due):
            new = shop.locale.quantize(_poisson.step(self._poisson.rng, product.price))
            if new <= 0 or new == product.price:
                new = shop.locale.quantize(product.price + Decimal(1))
            if product.regular_price is not None and new >= product.regular_price:
                product.regular_price = None
            product.price = new
        if due:
            self._cache.pop((shop.index, product.path), None)

    def _glitching(self, product: Product) -> bool:
        """Count a fetch of a glitch product; True when this one shows the glitch."""
        if product.case != "glitch":
            return False
        self._fetches[product.sku] += 1
        return self._fetches[product.sku] == _trust.GLITCH_FETCH

    def _offer_json(self, shop: Shop, product: Product) -> dict[str, Any]:
        loc = shop.locale
        regular = None
        if product.regular_price is not None:
            regular = {"amount": loc.machine(product.regular_price), "currency": loc.currency}
        return {
            "sku": product.sku,
            "name": product.name,
            "url": shop.url(product.path),
            "price": {"amount": loc.machine(product.price), "currency": loc.currency},
            "regular_price": regular,
            "availability": product.availability,
        }

    def _product_by_sku(self, request: web.Request) -> tuple[Shop, Product]:
        shop = self._shop(request)
        product = shop.by_sku.get(request.match_info["sku"])
        if product is None:
            raise web.HTTPNotFound(text='{"error": "unknown sku"}', content_type="application/json")
        return shop, product

    async def _h_api_product(self, request: web.Request) -> web.Response:
        shop, product = self._product_by_sku(request)
        data = self._offer_json(shop, product)
        if product.case:
            data = _trust.offer_json(shop, product, data)
        return web.json_response(data)

    async def _h_api_offer(self, request: web.Request) -> web.Response:
        shop, product = self._product_by_sku(request)
        if shop.js and self._glitching(product):
            product = _trust.glitched(product)
        loc = shop.locale
        data = self._offer_json(shop, product)
        data["display"] = {
            "price": loc.display(product.price),
            "regular_price": (
                None if product.regular_price is None else loc.display(product.regular_price)
            ),
        }
        if product.case:
            data = _trust.offer_json(shop, product, data)
        return web.json_response(data)

    async def _h_api_list(self, request: web.Request) -> web.Response:
        shop = self._shop(request)
        cursor = request.query.get("cursor", "")
        offset = 0
        if cursor:
            try:
                decoded = base64.urlsafe_b64decode(cursor.encode()).decode()
                offset = int(decoded.removeprefix("o:"))
                if not decoded.startswith("o:") or offset < 0:
                    raise ValueError(decoded)
            except (ValueError, binascii.Error):
                raise web.HTTPBadRequest(
                    text='{"error": "bad cursor"}', content_type="application/json"
                ) from None
        chunk = shop.products[offset : offset + LIST_PAGE_SIZE]
        nxt = offset + LIST_PAGE_SIZE
        next_cursor = (
            base64.urlsafe_b64encode(f"o:{nxt}".encode()).decode()
            if nxt < len(shop.products)
            else None
        )
        items = [
            {
                "sku": p.sku,
                "name": p.name,
                "url": shop.url(p.path),
                "display_price": shop.locale.display(p.price),
            }
            for p in chunk
        ]
        return web.json_response({"items": items, "next_cursor": next_cursor})

    async def _h_js(self, request: web.Request) -> web.Response:
        scripts = {"app.js": _assets.APP_JS, "list.js": _assets.LIST_JS, "shop.js": _assets.SHOP_JS}
        text = scripts.get(request.match_info["name"])
        if text is None:
            raise web.HTTPNotFound()
        return web.Response(text=text, content_type="application/javascript")

    async def _h_css(self, request: web.Request) -> web.Response:
        return web.Response(text=_assets.SHOP_CSS, content_type="text/css")

    async def _h_img(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if not name.endswith(".png"):
            raise web.HTTPNotFound()
        return web.Response(body=_assets.image_for(name), content_type="image/png")

    async def _h_font(self, request: web.Request) -> web.Response:
        return web.Response(body=_assets.font(), content_type="font/woff2")

    async def _h_tracker(self, request: web.Request) -> web.Response:
        if self._js_weight == "real":
            return await self._h_real_asset(request)
        return web.Response(text=_assets.TRACKER_JS, content_type="application/javascript")

    async def _h_collect(self, request: web.Request) -> web.Response:
        return web.Response(
            body=_assets.PIXEL_GIF, content_type="image/gif", headers={"Cache-Control": "no-store"}
        )

    async def _h_reviews_summary(self, request: web.Request) -> web.Response:
        sku = request.query.get("sku", "")
        rating = 3.5 + (binascii.crc32(sku.encode()) % 15) / 10
        return web.json_response({"sku": sku, "rating": rating, "count": 7 + len(sku) * 3})

    async def _h_real_img(self, request: web.Request) -> web.Response:
        body = _assets.real_image(request.match_info["name"])
        if body is None:
            raise web.HTTPNotFound()
        return web.Response(body=body, content_type="image/png", headers=_IMMUTABLE)

    async def _h_real_asset(self, request: web.Request) -> web.Response:
        found = _assets.real_assets().get(request.path)
        if found is None:
            raise web.HTTPNotFound()
        body, content_type = found
        return web.Response(body=body, content_type=content_type, headers=_IMMUTABLE)

    # control paths
    # --- listings (pricewatch/sandbox/_listings.py) -----------------------------------------
    def _category(self, host: str) -> _listings.Category:
        category = self._categories.get(host)
        if category is None:
            category = self._categories[host] = _listings.Category(self.seed, host)
        return category

    def _listing_request(self, request: web.Request) -> tuple[Shop, _listings.Category]:
        shop = self._shop(request)
        category = self._category(shop.host)
        category.fetched[request.path_qs] += 1
        return shop, category

    async def _h_listing_offset(self, request: web.Request) -> web.Response:
        _, category = self._listing_request(request)
        category.tick()
        try:
            page = int(request.query.get("page", "1"))
        except ValueError:
            raise web.HTTPNotFound() from None
        text = _listings.offset_page(category, page)
        if text is None:
            raise web.HTTPNotFound()
        return web.Response(text=text, content_type="text/html")

    async def _h_listing_api(self, request: web.Request) -> web.Response:
        shop, category = self._listing_request(request)
        category.tick()
        ids = request.query.get("shape") == "ids"
        token = request.query.get("pageToken" if ids else "cursor")
        data = _listings.api_page(category, shop.base_url, token, ids)
        if data is None:
            return web.json_response({"error": "bad cursor"}, status=400)
        return web.json_response(data)

    async def _h_listing_scroll(self, request: web.Request) -> web.Response:
        self._listing_request(request)
        return web.Response(text=_listings.scroll_page(), content_type="text/html")

    async def _h_listing_scroll_js(self, request: web.Request) -> web.Response:
        self._listing_request(request)
        feed = request.query.get("feed") != "none"
        return web.Response(text=_listings.scroll_js_page(feed), content_type="text/html")

    async def _h_listing_config(self, request: web.Request) -> web.Response:
        self._listing_request(request)
        return web.json_response(_listings.config_json())

    async def _h_listing_scroll_json(self, request: web.Request) -> web.Response:
        _, category = self._listing_request(request)
        category.tick()
        try:
            after = int(request.query.get("after", "0"))
        except ValueError:
            return web.json_response({"error": "bad after"}, status=400)
        return web.json_response(_listings.scroll_json(category, after))

    async def _h_listing_loop(self, request: web.Request) -> web.Response:
        shop, _ = self._listing_request(request)
        data = _listings.loop_json(shop.base_url, request.query.get("cursor", ""))
        if data is None:
            return web.json_response({"error": "bad cursor"}, status=400)
        return web.json_response(data)

    async def _h_listing_short(self, request: web.Request) -> web.Response:
        self._listing_request(request)
        try:
            text = _listings.short_page(int(request.query.get("page", "1")))
        except ValueError:
            text = None
        if text is None:
            raise web.HTTPNotFound()
        return web.Response(text=text, content_type="text/html")

    async def _h_listing_sitemap(self, request: web.Request) -> web.Response:
        shop, _ = self._listing_request(request)
        params = _listings.sitemap_params(request.query)
        if params is None:
            raise web.HTTPBadRequest(text="n must be 1-1000000 and per 1-50000")
        text = _listings.sitemap_index(shop.base_url, *params)
        return web.Response(text=text, content_type="application/xml")

    async def _h_listing_sitemap_child(self, request: web.Request) -> web.Response:
        shop, _ = self._listing_request(request)
        params = _listings.sitemap_params(request.query)
        if params is None:
            raise web.HTTPBadRequest(text="n must be 1-1000000 and per 1-50000")
        index = int(request.match_info["index"])
        body = await asyncio.to_thread(_listings.sitemap_child, shop.base_url, index, *params)
        if body is None:
            raise web.HTTPNotFound()
        return web.Response(body=body, content_type="application/x-gzip")

    async def _h_listing_item(self, request: web.Request) -> web.Response:
        shop = self._shop(request)
        category = self._category(shop.host)
        text = _listings.item_page(shop.base_url, request.match_info["id"], category)
        if text is None:
            raise web.HTTPNotFound()
        return web.Response(text=text, content_type="text/html")

    async def _h_listings_get(self, request: web.Request) -> web.Response:
        host = request.query.get("host") or self._shop(request).host
        shop = next((s for s in self._shops if s.host == host), None)
        if shop is None:
            return web.json_response({"error": f"unknown host {host!r}"}, status=400)
        category = self._category(host)
        return web.json_response(
            {
                "items": [shop.url(_listings.item_path(i)) for i in sorted(category.items)],
                "removed": [shop.url(_listings.item_path(i)) for i in sorted(category.removed)],
                "fetched": dict(sorted(category.fetched.items())),
                "churn": category.churn,
                "reprice": category.reprice,
            }
        )

    async def _h_listings_post(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            host = body.pop("host", None) or self._shop(request).host
            if not any(s.host == host for s in self._shops):
                raise ValueError(f"unknown host {host!r}")
            return web.json_response(self._category(host).control(body))
        except ValueError as exc:
            return web.json_response({"error": str(exc)}, status=400)

    async def _h_truth(self, request: web.Request) -> web.Response:
        return web.json_response(self.truth())

    async def _h_stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _h_stats_reset(self, request: web.Request) -> web.Response:
        self.reset_stats()
        return web.json_response({"ok": True})

    async def _h_urls(self, request: web.Request) -> web.Response:
        q = request.query
        urls = self.urls(
            all=q.get("all", "0") not in ("0", ""),
            js=q.get("js", "1") not in ("0", ""),
            host=q.get("host"),
        )
        return web.Response(text="".join(u + "\n" for u in urls))

    async def _h_poisson(self, request: web.Request) -> web.Response:
        return web.json_response(self.poisson_log())

    async def _h_shops(self, request: web.Request) -> web.Response:
        return web.json_response({"shops": self.shops})

    async def _h_control_get(self, request: web.Request) -> web.Response:
        latency = None
        if self._latency is not None:
            latency = [round(v * 1000, 3) for v in self._latency]
        return web.json_response({"modes": self._modes.to_json(), "latency_ms": latency})

    async def _h_control(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            return web.json_response(self.control(body))
        except ValueError as exc:  # ModeError, bad JSON, bad latency
            return web.json_response({"error": str(exc)}, status=400)


def _fraction(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ModeError(f"{name} must be a fraction between 0 and 1, got {value!r}")
    return float(value)


class BackgroundSandbox:
    """A ``Sandbox`` served from a background thread with its own event loop (benchmarks).

    ``with BackgroundSandbox(shops=2) as sb: sb.shops, sb.truth(), sb.stats()``.
    """

    def __init__(self, **options: Any) -> None:
        self.sandbox = Sandbox(**options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.shops: list[dict[str, Any]] = []

    def start(self) -> list[dict[str, Any]]:
        self._thread = threading.Thread(target=self._run, name="pricewatch-sandbox", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self.shops

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            try:
                self.shops = loop.run_until_complete(self.sandbox.start())
            except BaseException as exc:
                self._error = exc
                return
            finally:
                self._ready.set()
            loop.run_forever()
            loop.run_until_complete(self.sandbox.stop())
        finally:
            loop.close()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._loop is None:
            raise RuntimeError("BackgroundSandbox is not started")

        async def call() -> Any:
            return fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(timeout=30)

    @property
    def base_urls(self) -> list[str]:
        return [s["base_url"] for s in self.shops]

    def truth(self) -> dict[str, dict[str, Any]]:
        return self._call(self.sandbox.truth)

    def stats(self) -> dict[str, Any]:
        return self._call(self.sandbox.stats)

    def reset_stats(self) -> None:
        self._call(self.sandbox.reset_stats)

    def poisson_log(self) -> dict[str, Any]:
        return self._call(self.sandbox.poisson_log)  # type: ignore[no-any-return]

    def control(self, **body: Any) -> dict[str, Any]:
        return self._call(self.sandbox.control, body)

    def urls(self, *, all: bool = False, js: bool = True, host: str | None = None) -> list[str]:
        return self._call(self.sandbox.urls, all=all, js=js, host=host)

    def __enter__(self) -> BackgroundSandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
