"""``python -m pricewatch.demo``: the main job end to end on the embedded default.

Starts the sandbox shops, seeds their product URLs, crawls them into one SQLite file,
prints the prices table and the crawl stats, checks every stored price against the
sandbox's ``/_truth``, then crawls again to show that an unchanged catalogue adds no
price-history rows. Then it discovers products: it registers the first shop's listings of
every kind (a gzip sitemap index, numbered pages, a cursor API, an infinite-scroll page, a
cursor loop, a listing with a short page), traverses them, shows `scrapy listing list`,
and crawls the products they found. Exits non-zero if anything disagrees.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import urllib.request
from decimal import Decimal
from pathlib import Path
from typing import Any


def _scrapy(args: list[str], cwd: Path, env: dict[str, str], capture: bool = False) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.PIPE if capture else None,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"demo: `scrapy {' '.join(args)}` exited with {proc.returncode}")
    return proc.stdout or ""


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return bytes(response.read())


def _changes(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM price_changes").fetchone()[0])


def _print_stats(path: Path, title: str) -> dict[str, Any]:
    stats: dict[str, Any] = json.loads(path.read_text())
    print(f"\n{title}")
    for key in sorted(stats):
        if key.startswith(("pricewatch/", "downloader/response_count", "item_scraped_count")):
            print(f"  {key:<44} {stats[key]}")
    print(f"  {'elapsed_time_seconds':<44} {float(stats.get('elapsed_time_seconds', 0)):.1f}")
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="demo-run", help="working directory (recreated)")
    parser.add_argument("--shops", type=int, default=4)
    parser.add_argument("--products", type=int, default=50)
    parser.add_argument("--latency", default="20-120", help="sandbox latency range in ms")
    opts = parser.parse_args(argv)

    workdir = Path(opts.dir).resolve()
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    db = workdir / "pricewatch.db"
    env = dict(os.environ)
    env.update(
        SCRAPY_SETTINGS_MODULE="pricewatch.settings",
        PRICEWATCH_FRONTIER_URL=f"sqlite:///{db}",
        PRICEWATCH_STORE_URL=f"sqlite:///{db}",
        PRICEWATCH_STATS_FILE=str(workdir / "stats.json"),
    )
    sandbox = subprocess.Popen(
        [
            sys.executable, "-m", "pricewatch.sandbox", "--port", "0",
            "--shops", str(opts.shops), "--products", str(opts.products),
            "--latency", opts.latency,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert sandbox.stdout is not None
        shops = json.loads(sandbox.stdout.readline())["shops"]
        base = shops[0]["base_url"]
        print("demo: sandbox shops:", ", ".join(s["base_url"] for s in shops))
        # The shops listen on loopback, which a crawl refuses unless allowed.
        env["PRICEWATCH_ALLOWED_NETWORKS"] = ",".join(f"{s['host']}/32" for s in shops)
        (workdir / "seeds.txt").write_bytes(_get(f"{base}/_urls.txt"))
        started = time.monotonic()
        _scrapy(["seed", "seeds.txt"], workdir, env)
        _scrapy(["crawl", "products", "-L", "WARNING"], workdir, env)
        print(f"demo: first crawl done in {time.monotonic() - started:.1f}s\n")
        print(_scrapy(["prices"], workdir, env, capture=True))
        _print_stats(workdir / "stats.json", "crawl stats")

        truth = json.loads(_get(f"{base}/_truth"))
        truth = truth.get("products", truth)
        stored = {
            row["url"]: row
            for row in csv.DictReader(io.StringIO(_scrapy(["prices", "--csv"], workdir, env, True)))
        }
        wanted = {url: t for url, t in truth.items() if not t.get("disallowed")}
        wrong = [
            url
            for url, t in wanted.items()
            if url not in stored
            or Decimal(stored[url]["price"]) != Decimal(t["price"])
            or stored[url]["currency"] != t["currency"]
        ]
        print(f"\ndemo: {len(wanted) - len(wrong)} of {len(wanted)} stored prices equal /_truth")
        for url in wrong[:20]:
            print(f"  differs: {url}: stored {stored.get(url)}, truth {wanted[url]}")

        before = _changes(db)
        # Make every SKU due again now, then crawl: nothing changed, so no history rows.
        for shop in shops:
            _scrapy(["frontier", "--requeue", shop["host"]], workdir, env, capture=True)
        _scrapy(["crawl", "products", "-L", "WARNING"], workdir, env)
        after = _changes(db)
        second = _print_stats(workdir / "stats.json", "second crawl stats")
        print(
            f"\ndemo: second crawl checked {second.get('pricewatch/outcome/ok', 0)} SKUs and "
            f"added {after - before} price_changes rows ({after} in all)"
        )
        discovered = _discover(base, workdir, env)
        return 1 if wrong or after != before or not discovered else 0
    finally:
        sandbox.terminate()
        sandbox.wait(10)


# Each sandbox listing, its kind, and the state its traversal must end in.
LISTINGS = (
    ("/listing/sitemap.xml?n=300&per=100", "sitemap", "done"),
    ("/listing/offset?page=1", "pages", "done"),
    ("/listing/api", "cursor", "done"),
    ("/listing/scroll", "scroll", "done"),
    ("/listing/loop.json", "cursor", "looped"),
    ("/listing/short?page=1", "pages", "done"),
)


def _discover(base: str, workdir: Path, env: dict[str, str]) -> bool:
    """Register, traverse and show the listings of one shop; crawl what they found."""
    lines = "".join(f'"{base}{path}",{kind},1d\n' for path, kind, _ in LISTINGS)
    (workdir / "listings.csv").write_text("listings:\n" + lines)
    print("\ndemo: discovering products from listings (scrapy crawl listings)")
    _scrapy(["seed", "listings.csv"], workdir, env)
    _scrapy(["crawl", "listings", "-L", "WARNING"], workdir, env)
    print(_scrapy(["listing", "list"], workdir, env, capture=True))
    rows = {
        r["url"]: r for r in json.loads(_scrapy(["listing", "list", "--json"], workdir, env, True))
    }
    wrong = [
        f"{path}: {rows.get(base + path, {}).get('state')}, expected {state}"
        for path, _, state in LISTINGS
        if rows.get(base + path, {}).get("state") != state
    ]
    for line in wrong:
        print(f"  unexpected: {line}")
    _scrapy(["crawl", "products", "-L", "WARNING"], workdir, env)
    stats = json.loads((workdir / "stats.json").read_text())
    print(
        f"demo: {sum(r['members'] for r in rows.values())} listed products, "
        f"{stats.get('pricewatch/outcome/ok', 0)} of the new ones stored"
    )
    return not wrong


if __name__ == "__main__":
    raise SystemExit(main())
