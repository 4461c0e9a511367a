"""A follow-mode soak: does a long-running crawl keep its memory flat?

    .venv/bin/python bench/soak.py                      # 50,000 SKUs, 30 minutes
    .venv/bin/python bench/soak.py --minutes 2 --skus 2000 --every 10   # a short look

Starts a sandbox of ``--hosts`` shops (zero latency), seeds ``--skus`` of their
products, and runs ``scrapy crawl products -a follow=1`` on the embedded default with
``DOWNLOAD_DELAY=0``, AutoThrottle off and a short recheck interval
(``PRICEWATCH_FRONTIER_INTERVAL=--interval``), so that the crawl keeps fetching, storing and
rescheduling the whole time. Every ``--every`` seconds it prints the crawl process's RSS
and the SKUs stored so far; at the end (SIGTERM, a graceful stop) the RSS after the
warm-up (``--warmup`` minutes) as min / mean / max and the largest deviation from the mean.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def stored(db: Path) -> tuple[int, int]:
    """(distinct SKUs stored, observations checked in total: products rows, checks)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            rows = conn.execute("SELECT count(*) FROM products").fetchone()[0]
            checks = conn.execute(
                "SELECT coalesce(sum(checks), 0) FROM frontier_entries"
            ).fetchone()[0]
            return int(rows), int(checks)
    except sqlite3.Error:
        return 0, 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skus", type=int, default=50_000)
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--every", type=float, default=60, help="seconds between samples")
    parser.add_argument("--warmup", type=float, default=5, help="minutes left out of the figures")
    parser.add_argument("--interval", type=float, default=600, help="recheck interval, s")
    args = parser.parse_args(argv)

    # robots.txt keeps ~6% of a sandbox shop's products out: make enough, crawl --skus.
    per_host = -(-args.skus * 11 // 10 // args.hosts)
    sandbox = subprocess.Popen(
        [sys.executable, "-m", "pricewatch.sandbox", "--port", "0", "--seed", "21",
         "--shops", str(args.hosts), "--products", str(per_host)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert sandbox.stdout is not None
    shops = json.loads(sandbox.stdout.readline())["shops"]
    work = Path(tempfile.mkdtemp(prefix="pw-soak-"))
    db = work / "pricewatch.db"
    env = {
        **os.environ,
        "SCRAPY_SETTINGS_MODULE": "pricewatch.settings",
        "PYTHONPATH": str(ROOT),
        "PRICEWATCH_FRONTIER_URL": f"sqlite:///{db}",
        "PRICEWATCH_STORE_URL": f"sqlite:///{db}",
        "PRICEWATCH_STATS_FILE": str(work / "stats.json"),
        "PRICEWATCH_ALLOWED_NETWORKS": "127.0.0.0/8",  # the sandbox is on loopback
    }
    crawl = None
    try:
        base = shops[0]["base_url"]
        with urllib.request.urlopen(base + "/_urls.txt?js=0", timeout=60) as resp:
            urls = resp.read().decode().split()[: args.skus]
        (work / "seeds.txt").write_text("\n".join(urls) + "\n")
        subprocess.run(
            [sys.executable, "-m", "scrapy", "seed", "seeds.txt"],
            cwd=work, env=env, check=True, capture_output=True,
        )  # fmt: skip
        settings = {
            "DOWNLOAD_DELAY": "0",
            "AUTOTHROTTLE_ENABLED": "False",
            "PRICEWATCH_FRONTIER_INTERVAL": str(args.interval),
            "PRICEWATCH_FRONTIER_MIN_INTERVAL": str(min(args.interval, 300)),
            "LOG_LEVEL": "WARNING",
        }
        cmd = [sys.executable, "-m", "scrapy", "crawl", "products", "-a", "follow=1"]
        cmd += [a for k, v in settings.items() for a in ("-s", f"{k}={v}")]
        print(
            f"soak: {len(urls)} SKUs on {args.hosts} hosts, {args.minutes:g} min, follow mode, "
            f"recheck interval {args.interval:g} s; load average {os.getloadavg()[0]:.1f} on "
            f"{os.cpu_count()} CPUs; work dir {work}",
            flush=True,
        )
        crawl = subprocess.Popen(
            cmd, cwd=work, env=env, stdout=subprocess.DEVNULL,
            stderr=open(work / "crawl.log", "wb"),
        )  # fmt: skip
        started = time.monotonic()
        samples: list[tuple[float, float]] = []
        while (elapsed := time.monotonic() - started) < args.minutes * 60:
            time.sleep(min(args.every, args.minutes * 60 - elapsed))
            if crawl.poll() is not None:
                raise RuntimeError(f"the crawl exited early ({crawl.returncode}); see {work}")
            minute = (time.monotonic() - started) / 60
            rss = rss_mb(crawl.pid)
            rows, checks = stored(db)
            samples.append((minute, rss))
            print(
                f"  t={minute:5.1f} min  RSS {rss:7.1f} MB  SKUs stored {rows:6d}  "
                f"checks {checks:7d}  load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        crawl.send_signal(signal.SIGTERM)
        crawl.wait(120)
        after = [rss for minute, rss in samples if minute >= args.warmup] or [
            rss for _, rss in samples
        ]
        mean = sum(after) / len(after)
        spread = max(abs(r - mean) / mean for r in after)
        print(
            f"RSS after {args.warmup:g} min warm-up: min {min(after):.1f} MB, mean {mean:.1f} MB, "
            f"max {max(after):.1f} MB, largest deviation from the mean {100 * spread:.1f}% "
            f"({len(after)} samples); crawl exit {crawl.returncode}; load average "
            f"{os.getloadavg()[0]:.1f}",
            flush=True,
        )
    finally:
        if crawl is not None and crawl.poll() is None:
            crawl.kill()
            crawl.wait()
        sandbox.terminate()
        sandbox.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
