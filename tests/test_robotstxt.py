"""robots.txt is obeyed by every request, also those that waited for it together.

Many first requests to one host, allowed and Disallowed mixed in random order, are seeded
at once while robots.txt is slow to answer: every one of them waits for it. What the
crawler fetched is counted at the server. ``bench/robots.py`` runs the same check 50 times.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from .helpers import scrapy

FAST = ["-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False"]


def mixed_seeds(shop: Any, rng: random.Random, count: int) -> tuple[list[str], list[str]]:
    """``count`` allowed product URLs and as many under the Disallowed ``/private/``."""
    allowed = shop.urls()[:count]
    disallowed = [url.replace("/products/", "/private/products/", 1) for url in allowed]
    return allowed, disallowed


def fetched_disallowed(shop: Any) -> int:
    paths = shop.stats()["hosts"][shop.shops[0]["host"]]["paths"]
    return sum(n for path, n in paths.items() if path.startswith("/private/"))


@pytest.mark.parametrize("run", range(2))
def test_concurrent_first_requests_all_obey_robots_txt(
    sandbox_factory: Any, tmp_path: Path, run: int
) -> None:
    # Every request of a run: 150-250 ms, so robots.txt is pending while all others queue.
    shop = sandbox_factory(port=0, seed=11, shops=1, products=40, latency="150-250")
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    allowed, disallowed = mixed_seeds(shop, rng, 20)
    urls = allowed + disallowed
    rng.shuffle(urls)
    (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
    assert scrapy(tmp_path, "seed", "seeds.txt").returncode == 0
    proc = scrapy(tmp_path, "crawl", "products", *FAST)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert fetched_disallowed(shop) == 0, f"random seed {seed}"
    assert stats["robotstxt/forbidden"] == len(disallowed), f"random seed {seed}"
    assert stats["robotstxt/request_count"] == 1
    assert stats["pricewatch/outcome/skipped"] == len(disallowed)
    assert stats["pricewatch/reason/skipped/robots_txt"] == len(disallowed)
    assert stats["pricewatch/outcome/ok"] == len(allowed)
