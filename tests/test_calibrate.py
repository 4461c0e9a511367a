"""`scrapy calibrate URL`: a bounded, polite ramp that finds a shop's tolerance, stores it as
the domain's starting limit, and refuses what robots.txt or the destination rules refuse."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pricewatch.frontier import frontier_from_url
from pricewatch.politeness.limits import DomainLimit

from .fixtures.sandbox import SandboxProcess
from .helpers import scrapy, scrapy_env


async def stored_limit(url: str, domain: str) -> DomainLimit | None:
    frontier = frontier_from_url(url)
    async with frontier:
        text = (await frontier.limits()).get(domain)
    return None if text is None else DomainLimit.from_json(text)


def test_a_tolerance_of_four_is_found_as_four_in_at_most_60_requests(
    tmp_path: Path, sandbox_factory: Callable[..., SandboxProcess]
) -> None:
    import asyncio

    shop = sandbox_factory(
        shops=1, products=5, latency="300", mode=["tolerance:concurrency=4,retry_after=1"]
    )
    host = shop.shops[0]["host"]
    url = shop.urls()[0]
    shop.reset_stats()
    env = scrapy_env(tmp_path)
    done = scrapy(tmp_path, "calibrate", url, "--json", env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    served = shop.host_stats(host)
    assert 3 <= result["concurrency"] <= 5
    assert served["requests"] <= 60
    assert result["requests"] == served["requests"] - 1  # and robots.txt
    assert [s["concurrency"] for s in result["steps"]] == [1, 2, 3, 4, 5]
    assert result["steps"][-1]["pushback"] == "http_429"
    assert served["max_demand"] <= 5  # never more than one beyond what it tolerates
    stored = asyncio.run(stored_limit(env["PRICEWATCH_FRONTIER_URL"], host))
    assert stored is not None and stored.concurrency == result["concurrency"]
    assert stored.reason.startswith("calibrate: pushback at 5 (http_429)")

    # Human output: the evidence per step, and what was stored.
    again = scrapy(tmp_path, "calibrate", url, "--max", "2", "--dry-run", env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "concurrency  1:   2 requests (200: 2); latency mean" in again.stdout
    assert f"{host}: tolerated concurrency 2" in again.stdout
    assert "no pushback up to --max 2" in again.stdout
    assert "not stored (--dry-run)" in again.stdout


def test_it_refuses_disallowed_urls_non_public_hosts_and_a_max_above_the_ceiling(
    tmp_path: Path, sandbox: SandboxProcess
) -> None:
    env = scrapy_env(tmp_path)
    disallowed = sorted(set(sandbox.urls(all=True, js=False)) - set(sandbox.urls(js=False)))[0]
    refused = scrapy(tmp_path, "calibrate", disallowed, env=env)
    assert refused.returncode == 2
    assert "robots.txt of" in refused.stderr and "disallows" in refused.stderr
    allowed = sandbox.urls(js=False)[0]
    private = scrapy(tmp_path, "calibrate", allowed, env={**env, "PRICEWATCH_ALLOWED_NETWORKS": ""})
    assert private.returncode == 2
    assert "not a public address and not in PRICEWATCH_ALLOWED_NETWORKS" in private.stderr
    too_many = scrapy(tmp_path, "calibrate", allowed, "--max", "13", env=env)
    assert too_many.returncode == 2
    assert "--max must be between 1 and the limit's ceiling (12" in too_many.stderr


class _CrawlDelayShop(BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self) -> None:
        type(self).requests.append(self.path)
        body = b"User-agent: *\nCrawl-delay: 0.3\n" if self.path == "/robots.txt" else b"<p>ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def crawl_delay_shop() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CrawlDelayShop)
    _CrawlDelayShop.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/p/1"
    finally:
        server.shutdown()
        server.server_close()


def test_a_robots_crawl_delay_keeps_it_to_one_request_at_that_pace(
    tmp_path: Path, crawl_delay_shop: str
) -> None:
    done = scrapy(tmp_path, "calibrate", crawl_delay_shop, "--json", env=scrapy_env(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["concurrency"], result["delay"]) == (1, 0.3)
    assert result["reason"] == "robots.txt Crawl-delay 0.3 s"
    assert _CrawlDelayShop.requests == ["/robots.txt", "/p/1", "/p/1"]
