"""Bounded resources: product-page sized downloads, a total download time, a memory limit.

Against the sandbox's hostile modes (``pricewatch.sandbox._hostile``): a gzip bomb, pages
over ``DOWNLOAD_MAXSIZE`` with and without a Content-Length, and a page trickled a byte at
a time, in a crawl and in ``scrapy extract``.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings

from pricewatch import settings as project_settings

from .fixtures.sandbox import SandboxProcess, sandbox_args
from .helpers import scrapy
from .test_unfetchable import FAST, add_raw, entries

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def hostile() -> Iterator[SandboxProcess]:
    sb = SandboxProcess(sandbox_args(port=0, seed=9, shops=4, products=4))
    try:
        bomb, huge, chunked, trickle = (s["host"] for s in sb.shops)
        sb.control(host=bomb, mode="bomb")
        sb.control(host=huge, mode="huge")
        sb.control(host=chunked, mode="huge", chunked=True)
        sb.control(host=trickle, mode="trickle", interval=0.2)
        yield sb
    finally:
        sb.stop()


def test_project_limits_are_product_page_sized() -> None:
    settings = Settings()
    settings.setmodule(project_settings)
    assert 0 < settings.getint("DOWNLOAD_WARNSIZE") < settings.getint("DOWNLOAD_MAXSIZE")
    assert settings.getint("DOWNLOAD_MAXSIZE") <= 16 * MIB
    assert 0 < settings.getfloat("DOWNLOAD_TIMEOUT") <= 60
    assert settings.getbool("MEMUSAGE_ENABLED")
    assert 0 < settings.getint("MEMUSAGE_WARNING_MB") < settings.getint("MEMUSAGE_LIMIT_MB")


def test_bombs_huge_pages_and_trickles_end_as_errors(hostile: Any, tmp_path: Path) -> None:
    urls = {s["host"]: hostile.urls(host=s["host"])[:2] for s in hostile.shops}
    add_raw(tmp_path, [u for group in urls.values() for u in group])
    started = time.monotonic()
    proc = scrapy(tmp_path, "crawl", "products", *FAST, "-s", "DOWNLOAD_TIMEOUT=2", timeout=90)
    assert proc.returncode == 6, proc.stderr[-3000:]  # every fetch ended in error
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["finish_reason"] == "finished"
    assert stats["pricewatch/outcome/error"] == 8
    assert stats["pricewatch/reason/error/too_large"] == 6  # bomb, huge, huge chunked
    assert stats["pricewatch/reason/error/timeout"] == 2  # trickle, retried twice each
    assert stats.get("pricewatch/outcome/ok", 0) == 0
    # The bomb was never inflated in full: the process stayed far below its 32 MiB.
    assert stats["memusage/max"] - stats["memusage/startup"] < 64 * MIB
    assert time.monotonic() - started < 60
    for url, info in entries(tmp_path, [u for group in urls.values() for u in group]).items():
        assert info is None or info.state == "scheduled", url


def extract(tmp_path: Path, target: str, *args: str) -> Any:
    return scrapy(tmp_path, "extract", target, *args, timeout=30)


def test_extract_refuses_a_gzip_bomb_url(hostile: Any, tmp_path: Path) -> None:
    proc = extract(tmp_path, hostile.urls(host=hostile.shops[0]["host"])[0])
    assert proc.returncode == 1
    assert "too_large" in proc.stderr and "DOWNLOAD_MAXSIZE" in proc.stderr


def test_extract_refuses_a_huge_page_without_content_length(hostile: Any, tmp_path: Path) -> None:
    proc = extract(tmp_path, hostile.urls(host=hostile.shops[2]["host"])[0])
    assert proc.returncode == 1
    assert "too_large" in proc.stderr


def test_extract_gives_up_on_a_trickling_server(hostile: Any, tmp_path: Path) -> None:
    started = time.monotonic()
    proc = extract(
        tmp_path, hostile.urls(host=hostile.shops[3]["host"])[0], "-s", "DOWNLOAD_TIMEOUT=2"
    )
    assert proc.returncode == 1
    assert "timeout" in proc.stderr and "DOWNLOAD_TIMEOUT" in proc.stderr
    assert time.monotonic() - started < 15


def test_extract_refuses_a_gzip_bomb_file(tmp_path: Path) -> None:
    bomb = tmp_path / "page.html.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        for _ in range(32):
            f.write(b" " * MIB)
    proc = extract(tmp_path, str(bomb))
    assert proc.returncode == 1
    assert "too_large" in proc.stderr


def wait_for_leases_to_expire(tmp_path: Path) -> None:
    """Until every lease the SQLite frontier under ``tmp_path`` holds is past its deadline
    (``lease_until``, epoch seconds): the next claim reaps them all."""
    with closing(sqlite3.connect(tmp_path / "pricewatch.db")) as conn:
        (last,) = conn.execute(
            "SELECT max(lease_until) FROM frontier_entries WHERE lease_token IS NOT NULL"
        ).fetchone()
    if last is not None:
        time.sleep(max(0.0, last + 0.2 - time.time()))


def test_memory_limit_closes_the_crawl_and_loses_nothing(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # 6 MiB pages (under DOWNLOAD_MAXSIZE), 4 at once: the crawl's peak RSS grows past
    # 160 MiB from ~100 at start-up.
    sb = sandbox_factory(port=0, seed=9, shops=1, products=24)
    host = sb.shops[0]["host"]
    sb.control(host=host, mode="huge", size=6 * MIB)
    urls = sb.urls()
    add_raw(tmp_path, urls)
    ttl = 8
    lease = ["-s", f"PRICEWATCH_FRONTIER_LEASE_TTL={ttl}"]
    memory = ["-s", "MEMUSAGE_LIMIT_MB=160", "-s", "MEMUSAGE_CHECK_INTERVAL_SECONDS=0.2"]
    memory += ["-s", "CONCURRENT_REQUESTS_PER_DOMAIN=4"]
    closed = scrapy(tmp_path, "crawl", "products", *FAST, *lease, *memory, timeout=90)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert closed.returncode == 1 and stats["status"] == "failed", closed.stderr[-3000:]
    assert stats["finish_reason"] == "memusage_exceeded"
    assert stats["memusage/limit_reached"] == 1
    # The next run, once the leases the closed crawl held expire, fetches the rest. Their
    # deadlines are read from the frontier: the crawl claimed them after its start-up,
    # which a busy machine makes seconds longer than the run that follows.
    sb.control(host=host, mode=None)
    wait_for_leases_to_expire(tmp_path)
    proc = scrapy(tmp_path, "crawl", "products", *FAST, *lease, timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    infos = entries(tmp_path, urls)
    bad = {u: i for u, i in infos.items() if i is None or i.checks < 1 or i.state != "scheduled"}
    assert not bad, bad
