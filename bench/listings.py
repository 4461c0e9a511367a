"""Benchmark catalogue discovery: a large gzip sitemap index, discovered and seeded.

    .venv/bin/python bench/listings.py                      # 100,000 URLs, SQLite frontier
    .venv/bin/python bench/listings.py --urls 20000 --redis redis://127.0.0.1:6379/0
    .venv/bin/python bench/listings.py --scroll 5             # scroll endpoints, 5 rounds

Starts the sandbox in this process (a background thread), registers its sitemap index
(``/listing/sitemap.xml?n=URLS&per=PER``: gzip child sitemaps of PER URLs each) as a
listing, runs ``scrapy crawl listings`` once as a subprocess and reports its wall time,
CPU time and peak RSS (``wait4`` rusage, interpreter start included), the traversal's
state, pages and items, and the entries the frontier holds afterwards. Then it does the
same again (a second traversal of a known sitemap: nothing new to add), and with a
sitemap of a tenth of the size, to show that the crawl's memory does not grow with the
sitemap (it holds one child sitemap at a time).

``--scroll ROUNDS`` times instead a scroll listing of the category's 60 products, in fresh
directories: its endpoint named in the markup (``/listing/scroll``), found in the browser
(``/listing/scroll-js``: the first crawl loads the page in Chromium), then the same listing
again (its saved endpoint, no browser); with the browser's part alone, from the log line
that loads the page to the one that found the endpoint (Chromium's launch included).
Medians over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pricewatch.sandbox import BackgroundSandbox  # noqa: E402


def scrapy(
    workdir: Path, env: dict[str, str], *args: str, log: list[str] | None = None
) -> tuple[int, float, float, float]:
    """(exit code, wall seconds, CPU seconds, peak RSS MB) of one scrapy command; its log
    appended to ``log``."""
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
    if log is not None:
        log.append(err.decode(errors="replace"))
    return proc.returncode, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def environment(workdir: Path, frontier: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SCRAPY_SETTINGS_MODULE="pricewatch.settings",
        PYTHONPATH=str(ROOT),
        PRICEWATCH_FRONTIER_URL=frontier or f"sqlite:///{workdir / 'pricewatch.db'}",
        PRICEWATCH_STORE_URL=f"sqlite:///{workdir / 'pricewatch.db'}",
        PRICEWATCH_STATS_FILE=str(workdir / "stats.json"),
        PRICEWATCH_ALLOWED_NETWORKS="127.0.0.0/8",
    )
    return env


CRAWL = ("crawl", "listings", "-s", "DOWNLOAD_DELAY=0", "-s", "AUTOTHROTTLE_ENABLED=False")


def run(urls: int, per: int, frontier: str | None) -> list[dict[str, Any]]:
    out = []
    with tempfile.TemporaryDirectory() as tmp, BackgroundSandbox(shops=1, products=5) as sb:
        workdir = Path(tmp)
        env = environment(workdir, frontier)
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


_LOG_FORMAT = "%(asctime)s.%(msecs)03d [%(name)s] %(levelname)s: %(message)s"


def _logged_at(log: str, pattern: str) -> datetime:
    line = next(line for line in log.splitlines() if re.search(pattern, line))
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f")


def run_scroll(rounds: int) -> dict[str, list[float]]:
    """Wall seconds of each crawl: ``markup``, ``browser``, ``saved``; and ``step``: the
    browser's part of the ``browser`` crawls."""
    crawl = (*CRAWL, "-s", "LOG_LEVEL=INFO", "-s", f"LOG_FORMAT={_LOG_FORMAT}")
    times: dict[str, list[float]] = {"markup": [], "browser": [], "saved": [], "step": []}
    with BackgroundSandbox(shops=1, products=5) as sb:
        base = sb.base_urls[0]
        for _ in range(rounds):
            for path, kind in (("/listing/scroll", "markup"), ("/listing/scroll-js", "browser")):
                with tempfile.TemporaryDirectory() as tmp:
                    workdir = Path(tmp)
                    env = environment(workdir)
                    add = ("listing", "add", base + path, "--kind", "scroll", "--every", "1s")
                    assert scrapy(workdir, env, *add)[0] == 0
                    log: list[str] = []
                    code, wall, *_ = scrapy(workdir, env, *crawl, log=log)
                    record = json.loads((workdir / "stats.json").read_text())
                    assert code == 0 and record["pricewatch/listing/items"] == 60, record
                    times[kind].append(wall)
                    if kind == "markup":
                        continue
                    loaded = _logged_at(log[0], "loading it in the browser")
                    found = _logged_at(log[0], "endpoint found in the page's requests")
                    times["step"].append((found - loaded).total_seconds())
                    time.sleep(1.1)  # due again
                    code, wall, *_ = scrapy(workdir, env, *crawl, log=log)
                    record = json.loads((workdir / "stats.json").read_text())
                    assert code == 0 and record["pricewatch/listing/endpoint_saved"] == 1
                    assert "pricewatch/browser/handler_started" not in record
                    times["saved"].append(wall)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=100_000)
    parser.add_argument("--per", type=int, default=25_000, help="URLs per child sitemap")
    parser.add_argument("--redis", help="a Redis frontier URL (default: a SQLite file)")
    parser.add_argument("--scroll", type=int, metavar="ROUNDS", help="time scroll endpoints")
    args = parser.parse_args()
    if args.scroll:
        times = run_scroll(args.scroll)
        print("| scroll listing, 60 products | median s | each round |")
        print("|---|---|---|")
        for kind, label in (
            ("markup", "crawl: endpoint in the markup"),
            ("browser", "crawl: endpoint found in the browser"),
            ("step", "of which the browser's part"),
            ("saved", "crawl: the saved endpoint, no browser"),
        ):
            values = sorted(times[kind])
            each = ", ".join(f"{v:.2f}" for v in times[kind])
            print(f"| {label} | {values[len(values) // 2]:.2f} | {each} |")
        return
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
