"""Measure per-host concurrency at the server: peak requests in flight per host.

    .venv/bin/python bench/politeness.py --hosts 5 --limit 2 --downloader stock
    .venv/bin/python bench/politeness.py --hosts 5 --limit 2 --downloader fixed
    .venv/bin/python bench/politeness.py --reactor epoll --downloader stock

Starts an aiohttp server on 127.0.0.2 .. 127.0.0.(hosts+1) (one port, so every host is
its own Scrapy download slot), which answers each request after ``--latency`` seconds and
counts requests in flight per Host header. Then runs ``scrapy runspider`` with a spider
that requests ``--per-host`` pages of every host, with ``DOWNLOAD_DELAY = --delay`` and
AutoThrottle off, and prints the peak in flight per host, the pages/s and the limit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path

from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
REACTORS = {
    "asyncio": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
    "epoll": "twisted.internet.epollreactor.EPollReactor",
}
DOWNLOADERS = {
    "stock": "scrapy.core.downloader.Downloader",
    "fixed": "pricewatch.downloader.SlotAccountingDownloader",
}
SPIDER = textwrap.dedent(
    """
    import json, os
    import scrapy

    class Burst(scrapy.Spider):
        name = "burst"

        async def start(self):
            for url in json.loads(os.environ["BURST_URLS"]):
                yield scrapy.Request(url, dont_filter=True)

        def parse(self, response):
            pass
    """
)


def shared_port(addresses: list[str]) -> int:
    for _ in range(20):
        socks: list[socket.socket] = []
        try:
            for address in addresses:
                s = socket.socket()
                socks.append(s)
                s.bind((address, socks[0].getsockname()[1] if len(socks) > 1 else 0))
            return socks[0].getsockname()[1]
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no port free on every loopback address")


async def run(args: argparse.Namespace) -> dict[str, object]:
    hosts = [f"127.0.0.{i + 2}" for i in range(args.hosts)]
    inflight: Counter[str] = Counter()
    peak: Counter[str] = Counter()

    async def handle(request: web.Request) -> web.Response:
        host = request.url.host or ""
        inflight[host] += 1
        peak[host] = max(peak[host], inflight[host])
        try:
            await asyncio.sleep(args.latency)
            return web.Response(text="x" * 2048)
        finally:
            inflight[host] -= 1

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = shared_port(hosts)
    for host in hosts:
        await web.TCPSite(runner, host, port).start()
    urls = [f"http://{h}:{port}/p/{i}" for i in range(args.per_host) for h in hosts]
    settings = {
        "TWISTED_REACTOR": REACTORS[args.reactor],
        "DOWNLOADER": DOWNLOADERS[args.downloader],
        "CONCURRENT_REQUESTS": args.total,
        "CONCURRENT_REQUESTS_PER_DOMAIN": args.limit,
        "DOWNLOAD_DELAY": args.delay,
        "AUTOTHROTTLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
    }
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(ROOT)
    env["BURST_URLS"] = json.dumps(urls)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            spider = Path(tmp, "burst.py")
            await asyncio.to_thread(spider.write_text, SPIDER)
            cmd = [sys.executable, "-m", "scrapy", "runspider", str(spider)]
            for name, value in settings.items():
                cmd += ["-s", f"{name}={value}"]
            started = time.monotonic()
            proc = await asyncio.create_subprocess_exec(
                *cmd, cwd=tmp, env=env, stderr=asyncio.subprocess.PIPE
            )
            _, err = await proc.communicate()
            elapsed = time.monotonic() - started
    finally:
        await runner.cleanup()
    if proc.returncode:
        sys.stderr.write(err.decode()[-3000:])
    return {
        "reactor": args.reactor,
        "downloader": args.downloader,
        "hosts": args.hosts,
        "limit": args.limit,
        "delay": args.delay,
        "max_peak": max(peak.values(), default=0),
        "peaks": dict(sorted(peak.items())),
        "pages_per_s": round(len(urls) / elapsed, 1),
        "returncode": proc.returncode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reactor", choices=REACTORS, default="asyncio")
    parser.add_argument("--downloader", choices=DOWNLOADERS, default="fixed")
    parser.add_argument("--hosts", type=int, default=1)
    parser.add_argument("--limit", type=int, default=12, help="CONCURRENT_REQUESTS_PER_DOMAIN")
    parser.add_argument("--total", type=int, default=64, help="CONCURRENT_REQUESTS")
    parser.add_argument("--per-host", type=int, default=300)
    parser.add_argument("--delay", type=float, default=0.0, help="DOWNLOAD_DELAY")
    parser.add_argument("--latency", type=float, default=0.05, help="server seconds/request")
    result = asyncio.run(run(parser.parse_args()))
    print(json.dumps(result))
    sys.exit(int(bool(result["returncode"])))


if __name__ == "__main__":
    main()
