"""Prometheus metrics of a crawl process: off by default, loopback, scraped for real."""

from __future__ import annotations

import signal
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from pricewatch import settings as project_settings
from pricewatch.metrics import Metrics, port_range
from pricewatch.spiders.products import ProductSpider

from .fixtures.sandbox import SandboxProcess, sandbox_args
from .helpers import scrapy, scrapy_env, start_scrapy


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.fixture
def shop() -> Iterator[SandboxProcess]:
    proc = SandboxProcess(sandbox_args(port=0, seed=19, shops=2, products=6))
    try:
        yield proc
    finally:
        proc.stop()


def test_metrics_are_off_by_default_and_on_loopback() -> None:
    assert project_settings.PRICEWATCH_METRICS_ENABLED is False
    assert project_settings.PRICEWATCH_METRICS_HOST == "127.0.0.1"
    with pytest.raises(NotConfigured):
        Metrics.from_crawler(get_crawler(ProductSpider, {"PRICEWATCH_METRICS_ENABLED": False}))


def test_each_process_takes_the_next_free_port_of_the_range() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        first = taken.getsockname()[1]
        crawler = get_crawler(
            ProductSpider,
            {
                "PRICEWATCH_METRICS_ENABLED": True,
                "PRICEWATCH_METRICS_HOST": "127.0.0.1",
                "PRICEWATCH_METRICS_PORT": f"{first}-{first + 20}",
                "PRICEWATCH_METRICS_INTERVAL": 15.0,
            },
        )
        metrics = Metrics.from_crawler(crawler)
        try:
            address = metrics.listen()
            assert address is not None and address[0] == "127.0.0.1"
            assert first < address[1] <= first + 20
        finally:
            metrics.spider_closed()


@pytest.mark.parametrize("value", ["0", "9410-9400", "http", "70000"])
def test_a_bad_port_names_the_setting(value: str) -> None:
    with pytest.raises(ValueError, match="PRICEWATCH_METRICS_PORT"):
        port_range(value)


def test_a_crawl_serves_per_domain_outcomes_and_frontier_gauges(
    shop: SandboxProcess, tmp_path: Path
) -> None:
    urls = shop.urls()
    (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
    env = scrapy_env(tmp_path)
    assert scrapy(tmp_path, "seed", "seeds.txt", env=env).returncode == 0
    port = free_port()
    proc = start_scrapy(
        tmp_path, "crawl", "products", "-a", "follow=1",
        "-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False",
        "-s", "PRICEWATCH_FLUSH_INTERVAL=0.2", "-s", "PRICEWATCH_FRONTIER_POLL_INTERVAL=0.2",
        "-s", "PRICEWATCH_METRICS_ENABLED=True", "-s", f"PRICEWATCH_METRICS_PORT={port}",
        "-s", "PRICEWATCH_METRICS_INTERVAL=0.2",
        env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        while time.monotonic() < deadline:
            try:
                samples = scrape(port)
            except OSError:
                samples = {}
            ok = sum(
                v
                for (name, labels), v in samples.items()
                if name == "pricewatch_outcomes_total" and ("outcome", "ok") in labels
            )
            scheduled = sum(
                v
                for (name, labels), v in samples.items()
                if name == "pricewatch_frontier_entries" and ("state", "scheduled") in labels
            )
            outstanding = samples.get(("pricewatch_leases_outstanding", ()))
            if ok == len(urls) and scheduled == len(urls) and outstanding == 0:
                break
            time.sleep(0.2)
        per_domain = {
            dict(labels)["domain"]: v
            for (name, labels), v in samples.items()
            if name == "pricewatch_outcomes_total" and ("outcome", "ok") in labels
        }
        assert sum(per_domain.values()) == len(urls), samples
        assert len(per_domain) == len(shop.shops)
        assert samples[("pricewatch_leases_outstanding", ())] == 0
        assert samples[("pricewatch_frontier_next_due_seconds", ())] > 0
        assert all(v == 0 for (name, _), v in samples.items() if name == "pricewatch_breaker_open")
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-3000:]
    assert f"Prometheus metrics on http://127.0.0.1:{port}/metrics" in err
