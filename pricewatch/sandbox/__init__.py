"""The sandbox storefront: local shops for demos, tests and benchmarks.

Several shops, each on its own loopback IP (``127.0.0.2``, ``127.0.0.3``, ...; Scrapy's
per-domain slots key on the hostname), deterministic from a seed. Each shop has one
currency and locale (EUR/de ``1.299,00 €``, USD ``$1,299.99``, CHF ``CHF 1'234.50``,
JPY ``¥1,299``, BRL ``R$ 1.234,56``, GBP ``£12.99``, in that order) and product pages in
six markups (JSON-LD, JSON-LD ``@graph``, ``AggregateOffer``, microdata, OpenGraph, visible
price only beside a struck-through list price). JS-only shops fill their prices from
``/api/offer/{sku}`` after load and list products through ``/api/list?cursor=``.

Trust cases (``pricewatch.sandbox._trust``): every product page has a "Customers also
bought" block with other products' prices in microdata, JSON-LD, carousels (JS-only pages
too; ``recommendations="plain"``, ``--recommendations plain``: visible-price cards on HTML
shops only); opt-in, ``cases=True``
(``--cases``) appends price-on-request, net/gross, sale, sold-out size, sold-out and
one-fetch ×10 glitch products to every shop; ``currencies=["KWD", ...]`` (``--currencies``)
sets the shops' currencies, three-decimal ``KWD``/``OMR`` among them.

Paths of every shop: ``/``, ``/robots.txt`` (``Disallow: /private/``), ``/sitemap.xml``,
``/products?page=N``, ``/products/{slug}``, ``/private/products/{slug}``,
``/api/products/{sku}`` (official API, never affected by modes), ``/api/offer/{sku}``,
``/api/list?cursor=``, static resources under ``/static/``, ``/cdn/`` and ``/vendor/``.

A JS-only shop's product page carries the resource weight of a real one by default
(``js_weight="real"``, ``--js-weight real``: ~70 requests, ~2.3 MB of images, web fonts,
stylesheets, first-party bundles, a tag manager and its tracking tags, served under
``/cdn/`` and the third-party-looking ``/vendor/``), each static asset delayed like a CDN
round trip (``asset_latency``, ``--asset-latency``, 30-150 ms by default, ``none`` to turn
off); ``light`` is a few small resources and no asset latency, for fast tests.

Control paths (answer on every host, cover all hosts, never counted):
``GET /_truth``, ``GET /_stats``, ``POST /_stats/reset``, ``GET /_urls.txt`` (``?all=1``
adds disallowed URLs, ``?js=0`` leaves out JS-only shops, ``?host=IP`` one shop),
``GET /_shops``, ``GET /_control`` (active modes), ``POST /_control`` with a JSON object:

- ``{"reprice": 0.3}``: change the price of ~30% of the products (deterministic);
- ``{"flip_stock": 0.1}``: flip the availability of ~10% of the products;
- ``{"host": "127.0.0.3", "mode": "ratelimit", "rate": 5, "duration": 10}``: a fault mode
  (see ``pricewatch.sandbox._modes``); ``"mode": null`` switches a host's modes off,
  ``"clear": "slow"`` one of them; without ``host``/``hosts`` every shop is targeted;
- ``{"latency": "300-900"}`` / ``{"latency": null}``;
- ``{"reset": true}``: back to the seed's catalogue, all modes off.
"""

from __future__ import annotations

from pricewatch.sandbox._modes import ModeError
from pricewatch.sandbox._server import BackgroundSandbox, Sandbox

__all__ = ["BackgroundSandbox", "ModeError", "Sandbox"]
