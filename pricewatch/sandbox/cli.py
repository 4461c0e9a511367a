"""Command line of the sandbox: ``python -m pricewatch.sandbox`` and ``scrapy sandbox``.

Once every host listens, one line of JSON goes to stdout (``{"shops": [...]}``), then the
shops are served until SIGTERM/SIGINT, after which the process exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from typing import Any

from pricewatch.sandbox._modes import ModeError
from pricewatch.sandbox._server import Sandbox


def parse_mode(text: str) -> dict[str, Any]:
    """``[HOST=]MODE[:key=value,...]`` -> a control body, e.g.
    ``127.0.0.3=ratelimit:rate=5,retry_after=2`` -> ``{"host": "127.0.0.3", "mode":
    "ratelimit", "rate": 5, "retry_after": 2}``. Without HOST the mode is set on every shop.
    """
    host, sep, rest = text.partition("=")
    if not sep or ":" in host:
        host, rest = "", text
    name, _, params_text = rest.partition(":")
    body: dict[str, Any] = {"mode": name}
    if host:
        body["host"] = host
    for item in filter(None, params_text.split(",")):
        key, sep, raw = item.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"--mode parameter must be key=value, got {item!r}")
        try:
            body[key] = json.loads(raw)
        except ValueError:
            body[key] = raw
    return body


def parse_control(text: str) -> dict[str, Any]:
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--control must be a JSON object: {exc}") from None
    if not isinstance(body, dict):
        raise argparse.ArgumentTypeError(f"--control must be a JSON object, got {text!r}")
    return body


def add_arguments(parser: argparse._ActionsContainer) -> None:
    parser.add_argument("--seed", type=int, default=1, help="catalogue seed (default: 1)")
    parser.add_argument("--shops", type=int, default=4, help="HTML shops (default: 4)")
    parser.add_argument("--products", type=int, default=50, help="products per shop (default: 50)")
    parser.add_argument(
        "--js-shops", type=int, default=0, help="JS-only shops after the HTML ones (default: 0)"
    )
    parser.add_argument(
        "--js-delay",
        type=float,
        default=0.3,
        help="seconds before a JS-only page fetches its price (default: 0.3)",
    )
    parser.add_argument(
        "--js-weight",
        choices=("light", "real"),
        default="real",
        help="resources of a JS-only product page: real (~70 requests, ~2.2 MB: images, "
        "fonts, stylesheets, first-party bundles, a tag manager and its trackers) or light "
        "(a few small ones, for fast tests) (default: real)",
    )
    parser.add_argument(
        "--asset-latency",
        metavar="MIN-MAX|none",
        default="auto",
        help="added latency per static-asset request of a JS shop, uniform in milliseconds "
        "(a CDN round trip); default 30-150 with --js-weight real, none with light",
    )
    parser.add_argument(
        "--recommendations",
        choices=("plain", "mixed"),
        default="mixed",
        help='"Customers also bought" blocks: plain (visible prices on HTML shops, none on '
        "JS-only ones) or mixed (microdata and JSON-LD products, carousels, recently viewed; "
        "prices in JS-only pages' static HTML too) (default: mixed)",
    )
    parser.add_argument(
        "--page-kb",
        type=int,
        default=0,
        metavar="KB",
        help="HTML product pages padded with more reviews to about KB kilobytes, the same "
        "offer (default: 0, pages as generated, ~20-50 KB)",
    )
    parser.add_argument(
        "--cases",
        action="store_true",
        help="append the trust cases to every shop: price-on-request pages with invalid "
        "structured offers, net/gross pairs, sale prices, sold-out sizes, sold-out products, "
        "a one-fetch x10 price glitch (see pricewatch.sandbox._trust)",
    )
    parser.add_argument(
        "--currencies",
        metavar="CODE,...",
        default="",
        help="currencies of the shops in order, e.g. EUR,KWD (the rest follow the default "
        "rotation EUR,USD,CHF,JPY,BRL,GBP); also KWD and OMR (three decimals)",
    )
    parser.add_argument(
        "--poisson",
        metavar="MIN-MAX[:speed=S]",
        default=None,
        help="HTML shops' prices change as Poisson processes, each product at a rate "
        "log-uniform in MIN-MAX changes per simulated minute, simulated time S times the "
        "wall clock (default 360); GET /_poisson logs changes and fetches",
    )
    parser.add_argument(
        "--latency",
        metavar="MIN-MAX",
        default=None,
        help="added latency per request, uniform in milliseconds, e.g. 300-900",
    )
    parser.add_argument(
        "--host-base",
        default="127.0.0.2",
        help="IP of the first shop; the others follow (default: 127.0.0.2)",
    )
    parser.add_argument(
        "--port", type=int, default=0, help="port of every shop; 0 = a free port each (default)"
    )
    parser.add_argument(
        "--mode",
        action="append",
        default=[],
        type=parse_mode,
        metavar="[HOST=]MODE[:k=v,...]",
        help="switch a fault mode on (repeatable): ratelimit, tolerance, burst503, challenge, "
        "drop, slow, gone; e.g. 127.0.0.3=ratelimit:rate=5,retry_after=2 or "
        "tolerance:concurrency=1,retry_after=2",
    )
    parser.add_argument(
        "--control",
        action="append",
        default=[],
        type=parse_control,
        metavar="JSON",
        help="a /_control body applied at start (repeatable)",
    )


def sandbox_from_args(args: argparse.Namespace) -> Sandbox:
    return Sandbox(
        seed=args.seed,
        shops=args.shops,
        products=args.products,
        latency=args.latency,
        host_base=args.host_base,
        port=args.port,
        js_shops=args.js_shops,
        js_delay=args.js_delay,
        js_weight=args.js_weight,
        asset_latency=args.asset_latency,
        recommendations=args.recommendations,
        cases=args.cases,
        currencies=[c.strip().upper() for c in args.currencies.split(",") if c.strip()],
        modes=[*args.mode, *args.control],
        poisson=args.poisson,
        page_kb=args.page_kb,
    )


async def serve(sandbox: Sandbox) -> None:
    """Start, announce the shops on stdout, serve until SIGTERM/SIGINT, stop."""
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    try:
        shops = await sandbox.start()
        sys.stdout.write(json.dumps({"shops": shops}) + "\n")
        sys.stdout.flush()
        await done.wait()
    finally:
        await sandbox.stop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def run(args: argparse.Namespace) -> int:
    try:
        sandbox = sandbox_from_args(args)
    except ValueError as exc:  # ModeError included
        print(f"pricewatch sandbox: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(sandbox))
    except OSError as exc:
        print(f"pricewatch sandbox: cannot listen: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pricewatch.sandbox",
        description="Local shops for pricewatch demos, tests and benchmarks.",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    return run(args)


__all__ = ["ModeError", "add_arguments", "main", "parse_mode", "run", "serve"]
