"""Where the crawler may go: non-public destinations (seeded, redirected, meta-refreshed,
or a name that resolves to one) are refused unless PRICEWATCH_ALLOWED_NETWORKS allows
them, and end as `skipped` without a byte sent to them."""

from __future__ import annotations

import ipaddress
import json
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from scrapy.utils.test import get_crawler

from pricewatch.destinations import DestinationMiddleware, allowed_networks, non_public_kind

from .helpers import scrapy, scrapy_env

# Where the cases come from: issue 12 item 9, and the IANA special-purpose registries.
KINDS = {
    "cloud metadata": ("169.254.169.254", "link_local"),
    "loopback": ("127.0.0.1", "loopback"),
    "private 10/8": ("10.1.2.3", "private"),
    "private 192.168/16": ("192.168.1.1", "private"),
    "shared CGNAT": ("100.64.0.1", "reserved"),
    "unspecified": ("0.0.0.0", "unspecified"),
    "IPv6 loopback": ("::1", "loopback"),
    "IPv6 unique local": ("fd00::1", "private"),
    "IPv4-mapped loopback": ("::ffff:127.0.0.1", "loopback"),
    "public IPv4": ("93.184.216.34", None),
    "public IPv6": ("2606:4700::1111", None),
}


@pytest.mark.parametrize("address,kind", KINDS.values(), ids=KINDS.keys())
def test_what_counts_as_public(address: str, kind: str | None) -> None:
    assert non_public_kind(ipaddress.ip_address(address)) == kind


def test_a_bad_network_names_the_setting_and_the_value() -> None:
    with pytest.raises(ValueError, match="PRICEWATCH_ALLOWED_NETWORKS .* got '10.0.0.300/8'"):
        allowed_networks(["10.0.0.0/8", "10.0.0.300/8"])
    crawler = get_crawler(settings_dict={"PRICEWATCH_ALLOWED_NETWORKS": "127.0.0.0/8,::1"})
    middleware = DestinationMiddleware(crawler)
    assert [str(n) for n in middleware.allowed] == ["127.0.0.0/8", "::1/128"]


class Server:
    """A shop on 127.0.0.1 that sends the crawler elsewhere, counting what it serves."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.hits[self.path] += 1
                if self.path == "/redirect":
                    self.send_response(302)
                    self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
                    self.end_headers()
                    return
                if self.path == "/refresh":
                    body = b'<html><head><meta http-equiv="refresh" content="0;url=http://10.255.255.1/admin"></head></html>'
                elif self.path == "/robots.txt":
                    body = b"User-agent: *\nAllow: /\n"
                else:
                    body = b"<html><body><p>No offer here.</p></body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


def _crawl(tmp_path: Path, urls: list[str], allowed: str) -> dict[str, Any]:
    env = scrapy_env(tmp_path, PRICEWATCH_ALLOWED_NETWORKS=allowed)
    (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
    seeded = scrapy(tmp_path, "seed", "seeds.txt", env=env)
    assert seeded.returncode == 0, seeded.stderr
    proc = scrapy(tmp_path, "crawl", "products", "-s", "RETRY_TIMES=0", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats: dict[str, Any] = json.loads((tmp_path / "stats.json").read_text())
    stats["stderr"] = proc.stderr
    return stats


def test_redirects_and_meta_refreshes_to_internal_addresses_are_refused(
    server: Server, tmp_path: Path
) -> None:
    base = f"http://127.0.0.1:{server.port}"
    stats = _crawl(
        tmp_path, [f"{base}/redirect", f"{base}/refresh", f"{base}/plain"], "127.0.0.1/32"
    )
    assert server.hits["/redirect"] == server.hits["/refresh"] == server.hits["/plain"] == 1
    assert stats["pricewatch/destination/refused"] == 2
    assert stats["pricewatch/destination/refused/link_local"] == 1
    assert stats["pricewatch/destination/refused/private"] == 1
    assert stats["pricewatch/outcome/skipped"] == 2
    assert stats["pricewatch/outcome/no_price"] == 1
    assert "169.254.169.254 is 169.254.169.254 (link_local)" in stats["stderr"]


def test_a_name_that_resolves_to_loopback_is_refused_by_default(
    server: Server, tmp_path: Path
) -> None:
    stats = _crawl(tmp_path, [f"http://localhost:{server.port}/plain"], "")
    assert sum(server.hits.values()) == 0  # not even robots.txt
    assert stats["pricewatch/destination/refused/loopback"] == 1
    assert stats["pricewatch/outcome/skipped"] == 1
    assert stats["pricewatch/reason/skipped/destination"] == 1
    assert "localhost is 127.0.0.1 (loopback)" in stats["stderr"]


def test_allowed_networks_let_the_crawler_in(server: Server, tmp_path: Path) -> None:
    stats = _crawl(tmp_path, [f"http://localhost:{server.port}/plain"], "127.0.0.0/8")
    assert server.hits["/plain"] == 1
    assert "pricewatch/destination/refused" not in stats
    assert stats["pricewatch/outcome/no_price"] == 1
