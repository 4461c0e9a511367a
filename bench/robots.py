"""Count robots.txt violations at the server over many randomised crawls.

    .venv/bin/python bench/robots.py                         # 50 runs, the project's middleware
    .venv/bin/python bench/robots.py --middleware stock --runs 9   # Scrapy's own, for comparison

One sandbox shop (``/robots.txt`` Disallows ``/private/``), every request delayed by a random
latency so that robots.txt is still pending when the other first requests arrive. Each run
seeds a fresh SQLite frontier with a random number of allowed product URLs and as many
``/private/`` ones, shuffled, then runs ``scrapy crawl products`` and reads the shop's
``/_stats``: a request to a ``/private/`` path is a disallowed fetch. Prints one line per run
and the total, which must be 0 (docs/robots-txt-race.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from pricewatch import settings
from pricewatch.sandbox import BackgroundSandbox

ROOT = Path(__file__).resolve().parents[1]
MIDDLEWARES = {
    "fixed": {},
    "stock": {
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": 100,
        "pricewatch.robotstxt.RobotsTxtMiddleware": None,
    },
}


def run_once(sb: BackgroundSandbox, rng: random.Random, middleware: str) -> tuple[int, int, int]:
    """One crawl; returns (disallowed seeded, disallowed fetched, robotstxt/forbidden)."""
    host = sb.shops[0]["host"]
    products = sb.urls()
    count = rng.randint(5, min(30, len(products)))
    allowed = rng.sample(products, count)
    disallowed = [u.replace("/products/", "/private/products/", 1) for u in allowed]
    urls = allowed + disallowed
    rng.shuffle(urls)
    low = rng.randint(20, 150)
    sb.control(latency=f"{low}-{low + rng.randint(0, 150)}")
    sb.reset_stats()
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{tmp}/pricewatch.db"
        env = {
            **os.environ,
            "SCRAPY_SETTINGS_MODULE": "pricewatch.settings",
            "PYTHONPATH": str(ROOT),
            "PRICEWATCH_FRONTIER_URL": db,
            "PRICEWATCH_STORE_URL": db,
            "PRICEWATCH_STATS_FILE": f"{tmp}/stats.json",
            "PRICEWATCH_ALLOWED_NETWORKS": "127.0.0.0/8",  # the sandbox is on loopback
        }
        Path(tmp, "seeds.txt").write_text("\n".join(urls) + "\n")
        scrapy = [sys.executable, "-m", "scrapy"]
        subprocess.run(
            [*scrapy, "seed", "seeds.txt"], cwd=tmp, env=env, check=True, capture_output=True
        )
        args = [
            "-s",
            "DOWNLOAD_DELAY=0",
            "-s",
            "AUTOTHROTTLE_ENABLED=False",
            "-s",
            f"CONCURRENT_REQUESTS_PER_DOMAIN={rng.choice([2, 8, 12, 32])}",
        ]
        if MIDDLEWARES[middleware]:
            merged = {**settings.DOWNLOADER_MIDDLEWARES, **MIDDLEWARES[middleware]}
            args += ["-s", f"DOWNLOADER_MIDDLEWARES={json.dumps(merged)}"]
        proc = subprocess.run(
            [*scrapy, "crawl", "products", *args],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-3000:])
        stats = json.loads(Path(tmp, "stats.json").read_text())
    paths = sb.stats()["hosts"][host]["paths"]
    fetched = sum(n for path, n in paths.items() if path.startswith("/private/"))
    return len(disallowed), fetched, int(stats.get("robotstxt/forbidden", 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--middleware", choices=sorted(MIDDLEWARES), default="fixed")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    opts = parser.parse_args()
    seed = opts.seed if opts.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    print(f"middleware={opts.middleware} runs={opts.runs} seed={seed}")
    total_seeded = total_fetched = runs_with_violations = 0
    with BackgroundSandbox(seed=11, shops=1, products=60, js_shops=0) as sb:
        for i in range(opts.runs):
            seeded, fetched, forbidden = run_once(sb, rng, opts.middleware)
            total_seeded += seeded
            total_fetched += fetched
            runs_with_violations += fetched > 0
            print(
                f"run {i + 1:2d}: disallowed seeded {seeded:2d}  fetched {fetched:2d}  "
                f"robotstxt/forbidden {forbidden:2d}",
                flush=True,
            )
    print(
        f"disallowed fetches: {total_fetched} of {total_seeded} disallowed URLs seeded, "
        f"in {runs_with_violations} of {opts.runs} runs"
    )
    sys.exit(1 if total_fetched else 0)


if __name__ == "__main__":
    main()
