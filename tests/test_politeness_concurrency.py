"""Per-domain concurrency, counted at the server: in-flight requests per host never
exceed the slot's limit under the asyncio reactor (docs/per-domain-concurrency.md).

Each host is its own loopback address (127.0.0.2, 127.0.0.3, ...) on one port, so
Scrapy gives each its own download slot. The crawls run as ``scrapy runspider``
subprocesses with the settings under test given on the command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
import textwrap
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web
from scrapy import Request
from scrapy.core.downloader import Slot
from twisted.internet.defer import Deferred

import pricewatch.settings as project_settings
from pricewatch.downloader import SlotAccountingDownloader

ROOT = Path(__file__).resolve().parents[1]
ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
FIXED = "pricewatch.downloader.SlotAccountingDownloader"
STOCK = "scrapy.core.downloader.Downloader"


@dataclass
class InflightServer:
    """Counts requests in flight per Host at the server side."""

    port: int = 0
    hosts: list[str] = field(default_factory=list)
    inflight: Counter[str] = field(default_factory=Counter)
    peak: Counter[str] = field(default_factory=Counter)
    served: Counter[str] = field(default_factory=Counter)
    latency: float = 0.08
    # Per host, how many requests the crawl may have in flight at once: the host's first
    # requests are held until that many overlap (at most `hold` seconds), so that reaching
    # the limit does not depend on the crawler sending them within `latency` of each other,
    # which a loaded machine does not always do.
    targets: dict[str, int] = field(default_factory=dict)
    hold: float = 5.0
    reached: dict[str, asyncio.Event] = field(default_factory=dict)

    async def handle(self, request: web.Request) -> web.Response:
        host = request.url.host or ""
        self.inflight[host] += 1
        self.peak[host] = max(self.peak[host], self.inflight[host])
        reached = self.reached.setdefault(host, asyncio.Event())
        if self.peak[host] >= self.targets.get(host, 1):
            reached.set()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(reached.wait(), self.hold)
            await asyncio.sleep(self.latency)
            self.served[host] += 1
            return web.Response(text="<html><body>ok</body></html>", content_type="text/html")
        finally:
            self.inflight[host] -= 1


def _free_port_on(addresses: list[str]) -> int:
    """A port number free on every address (bound and released at once)."""
    for _ in range(20):
        socks: list[socket.socket] = []
        try:
            first = socket.socket()
            first.bind((addresses[0], 0))
            socks.append(first)
            port = first.getsockname()[1]
            for address in addresses[1:]:
                s = socket.socket()
                socks.append(s)
                s.bind((address, port))
            return port
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no port free on all loopback addresses")


@contextlib.asynccontextmanager
async def inflight_server(n_hosts: int) -> AsyncIterator[InflightServer]:
    server = InflightServer(hosts=[f"127.0.0.{i + 2}" for i in range(n_hosts)])
    app = web.Application()
    app.router.add_get("/{tail:.*}", server.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    server.port = _free_port_on(server.hosts)
    for host in server.hosts:
        await web.TCPSite(runner, host, server.port).start()
    try:
        yield server
    finally:
        await runner.cleanup()


SPIDER = textwrap.dedent(
    """
    import json, os
    import scrapy

    class Burst(scrapy.Spider):
        name = "burst"

        async def start(self):
            urls = json.loads(os.environ["BURST_URLS"])
            for url in urls:
                yield scrapy.Request(url, dont_filter=True)

        def parse(self, response):
            pass
    """
)


async def crawl(
    tmp_path: Path, server: InflightServer, per_host: int, settings: dict[str, object]
) -> None:
    urls = [f"http://{host}:{server.port}/p/{i}" for i in range(per_host) for host in server.hosts]
    spider = tmp_path / "burst.py"
    await asyncio.to_thread(spider.write_text, SPIDER)
    base: dict[str, object] = {
        "TWISTED_REACTOR": ASYNCIO_REACTOR,
        "CONCURRENT_REQUESTS": 64,
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
    }
    base.update(settings)
    args = []
    for name, value in base.items():
        args += ["-s", f"{name}={json.dumps(value) if isinstance(value, dict) else value}"]
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(ROOT)
    env["BURST_URLS"] = json.dumps(urls)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scrapy", "runspider", str(spider), *args,
        cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert b"Traceback" not in err, err.decode()[-3000:]
    assert sum(server.served.values()) == len(urls), server.served


@pytest.mark.parametrize(
    ("n_hosts", "limit", "per_host"),
    [(1, 3, 36), (5, 2, 16), (20, 1, 10)],
    ids=["1-host", "5-hosts", "20-hosts"],
)
async def test_inflight_per_host_never_exceeds_the_limit(
    tmp_path: Path, n_hosts: int, limit: int, per_host: int
) -> None:
    settings: dict[str, object] = {"DOWNLOADER": FIXED, "CONCURRENT_REQUESTS_PER_DOMAIN": limit}
    async with inflight_server(n_hosts) as server:
        limits = dict.fromkeys(server.hosts, limit)
        if n_hosts == 5:
            # A fragile host with its own DOWNLOAD_SLOTS limit, beside the default one.
            fragile = server.hosts[0]
            settings["DOWNLOAD_SLOTS"] = {fragile: {"concurrency": 1, "delay": 0}}
            limits[fragile] = 1
        server.targets = limits
        await crawl(tmp_path, server, per_host, settings)
    assert set(server.peak) == set(server.hosts)
    over = {host: peak for host, peak in server.peak.items() if peak > limits[host]}
    assert not over, f"in flight above the per-host limit {limits}: {over}"
    # The limits are used, not just respected: requests do overlap up to them.
    assert max(server.peak[host] for host in server.hosts if limits[host] == limit) == limit
    assert all(server.peak[host] == 1 for host in server.hosts if limits[host] == 1)


async def test_stock_downloader_still_overshoots(tmp_path: Path) -> None:
    """The reproduction: Scrapy's own downloader under the asyncio reactor lets a whole
    slot queue out at once. If this starts failing, Scrapy fixed the defect upstream and
    SlotAccountingDownloader can go (docs/per-domain-concurrency.md)."""
    async with inflight_server(1) as server:
        await crawl(
            tmp_path, server, 40, {"DOWNLOADER": STOCK, "CONCURRENT_REQUESTS_PER_DOMAIN": 2}
        )
    assert server.peak[server.hosts[0]] > 2


def test_project_settings_use_the_fixed_downloader() -> None:
    assert project_settings.DOWNLOADER == FIXED
    assert project_settings.TWISTED_REACTOR == ASYNCIO_REACTOR


class _ScriptedSlot(Slot):
    """A slot whose jittered delays come from a script, not from random."""

    def __init__(self, draws: list[float]) -> None:
        super().__init__(concurrency=1, delay=0.2, jitter=0.5)
        self.draws = draws

    def download_delay(self) -> float:
        return self.draws.pop(0)


async def test_a_delayed_slot_draws_its_jittered_delay_once_per_gap() -> None:
    """Scrapy draws the delay again when the timer for the previous draw fires, and waits
    more if the new draw is longer: the gap is the largest of several draws. The fixed
    downloader keeps the draw until the request leaves."""
    # Only the queue logic runs: no crawler, no download handlers.
    downloader = SlotAccountingDownloader.__new__(SlotAccountingDownloader)
    downloader.gaps = {}
    sent: list[Request] = []
    downloader._wait_for_download = (  # type: ignore[method-assign]
        lambda slot, request, dfd: _record(sent, request)
    )
    slot = _ScriptedSlot([0.1, 0.3, 0.3])
    slot.queue.append((Request("http://a.test/1"), Deferred()))
    slot.lastseen = time.monotonic()
    downloader._process_queue(slot)  # draws 0.1: a timer for 0.1 s
    assert slot.latercall is not None and sent == []
    slot.latercall.cancel()
    slot.latercall = None
    slot.lastseen = time.monotonic() - 0.11  # the timer fired, 0.11 s after the last request
    downloader._process_queue(slot)  # Scrapy would draw 0.3 here and wait 0.19 s more
    await asyncio.sleep(0)
    assert [r.url for r in sent] == ["http://a.test/1"]
    assert slot.draws == [0.3, 0.3]  # one draw for that gap


async def _record(sent: list[Request], request: Request) -> None:
    sent.append(request)
