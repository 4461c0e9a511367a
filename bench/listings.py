"""Benchmark catalogue discovery: a large gzip sitemap index, discovered and seeded.

    .venv/bin/python bench/listings.py                      # 100,000 URLs, SQLite frontier
    .venv/bin/python bench/listings.py --urls 20000 --redis redis://127.0.0.1:6379/0

Starts the sandbox in this process (a background thread), registers its sitemap index
(``/listing/sitemap.xml?n=URLS&per=PER``: gzip child sitemaps of PER URLs each) as a
listing, runs ``scrapy crawl listings`` once as a subprocess and reports its wall time,
CPU time and peak RSS (``wait4`` rusage, interpreter start included), the traversal's
state, pages and items, and the entries the frontier holds afterwards. Then it does the
same again (a second traversal of a known sitemap: nothing new to add), and with a
sitemap of a tenth of the size, to show that the crawl's memory does not grow with the
sitemap (it holds one child sitemap at a time).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pricewatch.sandbox import BackgroundSandbox  # noqa: E402


def scrapy(workdir: Path, env: dict[str, str], *args: str) -> tuple[int, float, float, float]:
    """(exit code, wall seconds, CPU seconds, peak RSS MB) of one scrapy command."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "scrapy", *args],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - started
    if proc.returncode:
        sys.stderr.write(err.decode(errors="replace")[-3000:])
    return proc.returncode, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def run(urls: int, per: int, frontier: str | None) -> list[dict[str, Any]]:
    out = []
    with tempfile.TemporaryDirectory() as tmp, BackgroundSandbox(shops=1, products=5) as sb:
        workdir = Path(tmp)
        env = dict(os.environ)
        env.update(
            SCRAPY_SETTINGS_MODULE="pricewatch.settings",
            PYTHONPATH=str(ROOT),
            PRICEWATCH_FRONTIER_URL=frontier or f"sqlite:///{workdir / 'pricewatch.db'}",
            PRICEWATCH_STORE_URL=f"sqlite:///{workdir / 'pricewatch.db'}",
            PRICEWATCH_STATS_FILE=str(workdir / "stats.json"),
            PRICEWATCH_ALLOWED_NETWORKS="127.0.0.0/8",
        )
        base = sb.base_urls[0]
        for n in (urls, urls // 10):
            url = f"{base}/listing/sitemap.xml?n={n}&per={per}"
            code, *_ = scrapy(
                workdir, env, "listing", "add", url, "--kind", "sitemap", "--every", "1s"
            )
            assert code == 0
            for attempt in ("first", "again"):
                time.sleep(1.1)
                code, wall, cpu, rss = scrapy(
                    workdir,
                    env,
                    "crawl",
                    "listings",
                    "-s",
                    "DOWNLOAD_DELAY=0",
                    "-s",
                    "AUTOTHROTTLE_ENABLED=False",
                    "-s",
                    "LOG_LEVEL=INFO",
                )
                assert code == 0
                record = json.loads((workdir / "stats.json").read_text())
                row = {
                    "urls": n,
                    "per_child": per,
                    "traversal": attempt,
                    "wall_s": round(wall, 1),
                    "cpu_s": round(cpu, 1),
                    "peak_rss_mb": round(rss, 1),
                    "pages": record.get("pricewatch/listing/pages"),
                    "items": record.get("pricewatch/listing/items"),
                    "new": record.get("pricewatch/listing/new", 0),
                    "state": "done" if record.get("pricewatch/listing/end/done") else "not done",
                }
                if not frontier:
                    with sqlite3.connect(workdir / "pricewatch.db") as conn:
                        row["frontier_entries"] = conn.execute(
                            "SELECT count(*) FROM frontier_entries"
                        ).fetchone()[0]
                print(json.dumps(row), flush=True)
                out.append(row)
            code, *_ = scrapy(workdir, env, "listing", "remove", url)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=100_000)
    parser.add_argument("--per", type=int, default=25_000, help="URLs per child sitemap")
    parser.add_argument("--redis", help="a Redis frontier URL (default: a SQLite file)")
    args = parser.parse_args()
    rows = run(args.urls, args.per, args.redis)
    print("| URLs | traversal | wall s | CPU s | peak RSS MB | pages | items | new |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['urls']:,} | {r['traversal']} | {r['wall_s']} | {r['cpu_s']} | "
            f"{r['peak_rss_mb']} | {r['pages']} | {r['items']:,} | {r['new']:,} |"
        )


if __name__ == "__main__":
    main()
