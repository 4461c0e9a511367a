"""A hostile shop and a hostile seed file: every lease ends, nothing wrong is stored, and
the crawl exits by itself.

The shop (``pricewatch.sandbox._hostile``) answers a share of its product pages with gzip
bombs, trickles, endless redirects, huge pages, malformed markup and injection strings in
the product name, beside a shop that behaves. The seed file mixes good lines with what a
careless export holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..fixtures.sandbox import SandboxProcess, sandbox_args
from ..helpers import scrapy
from .checks import assert_every_lease_completed, assert_stored_right, stored_prices

pytestmark = pytest.mark.long

CRAWL = [
    *("-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False"),
    # Trickles are given up after 2 s, retried once.
    *("-s", "DOWNLOAD_TIMEOUT=2", "-s", "RETRY_TIMES=1", "-s", "PRICEWATCH_BACKOFF_BASE=0.2"),
]
HOSTILE = {
    "bomb": {"fraction": 0.15},
    "trickle": {"fraction": 0.1, "interval": 0.2},
    "redirect_loop": {"fraction": 0.15},
    "huge": {"fraction": 0.15, "chunked": True},
    "malformed": {"fraction": 0.15},
    "inject": {"fraction": 0.3},
}


@pytest.fixture(scope="module")
def shops() -> Iterator[SandboxProcess]:
    proc = SandboxProcess(sandbox_args(port=0, seed=31, shops=2, products=24))
    try:
        yield proc
    finally:
        proc.stop()


@pytest.mark.timeout(120)
def test_hostile_shop(shops: SandboxProcess, tmp_path: Path) -> None:
    hostile, calm = (s["host"] for s in shops.shops)
    for mode, params in HOSTILE.items():
        shops.control(host=hostile, mode=mode, **params)
    try:
        urls = shops.urls()
        (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
        assert scrapy(tmp_path, "seed", "seeds.txt").returncode == 0
        proc = scrapy(tmp_path, "crawl", "products", *CRAWL, timeout=90)
        assert proc.returncode == 0, proc.stderr[-3000:]
    finally:
        shops.control(host=hostile, mode=None)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["finish_reason"] == "finished"
    for reason in ("too_large", "timeout", "ignored"):  # bombs/huge, trickles, redirects
        assert stats.get(f"pricewatch/reason/error/{reason}", 0) >= 1, (reason, stats)
    assert stats.get("pricewatch/outcome/no_price", 0) >= 1  # malformed pages
    db = f"sqlite:///{tmp_path / 'pricewatch.db'}"
    stored = set(stored_prices(db))
    calm_urls = {u for u in urls if f"//{calm}:" in u}
    hostile_urls = set(urls) - calm_urls
    # The calm shop is stored in full; of the hostile one only pages with a true offer
    # (untouched or with injected names) are, and at their true price.
    assert calm_urls <= stored
    assert 0 < len(stored & hostile_urls) < len(hostile_urls)
    assert_stored_right(db, shops.truth(), stored)
    assert_every_lease_completed(db, len(urls))


@pytest.mark.timeout(120)
def test_hostile_seed_file(shops: SandboxProcess, tmp_path: Path) -> None:
    calm = shops.shops[1]
    good = shops.urls(host=calm["host"])[:8]
    base = calm["base_url"]
    lines = [
        "\ufeffurl,sku,importance",  # a BOM before the header
        *(f"{u},SKU-{i},1" for i, u in enumerate(good[:4])),
        f"{good[4]}\r",  # CRLF line ending
        f'"{good[5]}","=HYPERLINK(""http://evil.example"")",2',  # formula in the SKU
        f'"{good[6]}","multi\nline sku",1',  # a quoted newline: read as CSV, then refused
        good[7].replace("http://", "HTTP://"),  # scheme in upper case
        good[0],  # a duplicate
        f"{base.replace(':', ':x', 2)}/x",  # not a port
        "http://127.0.0.2:99999/products/x",  # port out of range
        "http://[::1/products/x",  # broken IPv6 literal
        "javascript:alert(1)",
        "ftp://127.0.0.2/products/x",
        f"{base}/products/{'a' * 5000}",  # longer than any browser takes
        f"{base}/products/x\x1b[31m",  # control characters
        f"{base}/products/x\x00y",  # a NUL byte
        f"{good[1]},SKU,not-a-number",
        f"{good[2]},SKU,-5",
        "x" * 100_000,  # one huge garbage line
        "",
        "   ",
    ]
    raw = "\n".join(lines).encode() + b"\n\xff\xfe garbage \xc3\x28\n" + f"{good[3]}\n".encode()
    (tmp_path / "seeds.csv").write_bytes(raw)
    seeded = scrapy(tmp_path, "seed", "seeds.csv")
    assert seeded.returncode in (0, 3), seeded.stderr[-3000:]  # 3: some lines were skipped
    assert "Traceback" not in seeded.stderr
    proc = scrapy(tmp_path, "crawl", "products", *CRAWL, timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    db = f"sqlite:///{tmp_path / 'pricewatch.db'}"
    stored = set(stored_prices(db))
    # Every good line is stored; the SKU with a newline in it is refused, not split.
    expected = set(good) - {good[6]}
    assert expected <= stored, sorted(expected - stored)
    assert good[6] not in stored
    assert_stored_right(db, shops.truth(), stored)
    scheduled = sum(json.loads((tmp_path / "stats.json").read_text())["outcomes"].values())
    assert_every_lease_completed(db, scheduled)
