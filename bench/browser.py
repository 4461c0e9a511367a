"""Browser pages per second and memory, with and without resource blocking, beside plain HTTP.

    .venv/bin/python bench/browser.py [--pages 2000] [--early 200] [--js-delay 0.3]
        [--js-weight real|light] [--asset-latency 30-150|none] [--json OUT]

One run, three crawls (``scrapy crawl products`` subprocesses, SQLite frontier and store in
a temporary directory) against one in-process sandbox with one HTML shop and one JS-only
shop of ``--pages`` products each. The JS shop's product pages carry the weight of a real
one by default (``--js-weight real``: ~70 requests, ~2.3 MB of images, fonts, stylesheets,
first-party bundles and third-party scripts, each static asset delayed 30-150 ms like a
CDN round trip; see ``pricewatch.sandbox._assets``):

1. ``http``: the HTML shop over plain HTTP;
2. ``browser, blocking``: the JS shop through the browser (PRICEWATCH_JS_DOMAINS), with
   images, media, fonts, stylesheets and trackers aborted (the default);
3. ``browser, no blocking``: the same with PRICEWATCH_BROWSER_BLOCK_* emptied.

Pages/s is counted at the shop: product pages served divided by the time between the first
and the last one (browser launch and crawl shutdown excluded; wall time is shown too).
Memory is sampled every 0.25 s over the crawl process and all its descendants (Playwright's
driver, Chromium's browser, renderer, GPU and utility processes): the peak of the summed
RSS, and PSS (shared pages counted once, a truer total for Chromium's many processes).
"RSS @early" and "RSS @end" are the median summed RSS while the shop served ``--early``
+-10 % pages and the last 10 % of them: the memory-flatness check. "req/page" counts every
request the shop served per product page (blocked ones never reach it). The load average
(1, 5, 15 min) is printed from before and after the run: the machine's other work slows
all crawls alike only if it stays level.
Crawl settings are the project's, without politeness delays (DOWNLOAD_DELAY=0, no
AutoThrottle), with a 0.5 s store flush and no per-domain lease cap, so that the fetch path,
not the delay or the lease cycle, is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pricewatch.sandbox import BackgroundSandbox  # noqa: E402

SAMPLE_EVERY = 0.25
# No politeness delays; leases are acknowledged after each store batch, so a short flush
# interval and no per-domain lease cap keep one shop's throughput from being bounded by
# PRICEWATCH_DOMAIN_MAX_INFLIGHT / PRICEWATCH_FLUSH_INTERVAL (32 / 5 s) rather than the fetch.
FAST = [
    "-s",
    "DOWNLOAD_DELAY=0",
    "-s",
    "AUTOTHROTTLE_ENABLED=False",
    "-s",
    "LOG_LEVEL=INFO",
    "-s",
    "PRICEWATCH_FLUSH_INTERVAL=0.5",
    "-s",
    "PRICEWATCH_DOMAIN_MAX_INFLIGHT=0",
]
NO_BLOCKING = ["-s", "PRICEWATCH_BROWSER_BLOCK_RESOURCES=", "-s", "PRICEWATCH_BROWSER_BLOCK_URLS="]


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _tree(pid: int) -> list[int]:
    children = _children()
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(children.get(current, []))
    return out


def _kb(path: str, field_name: str) -> int:
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.startswith(field_name):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory(pid: int) -> tuple[int, int, int]:
    """(RSS KiB, PSS KiB, processes) of ``pid`` and its descendants."""
    pids = _tree(pid)
    rss = sum(_kb(f"/proc/{p}/status", "VmRSS:") for p in pids)
    pss = sum(_kb(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids)
    return rss, pss, len(pids)


@dataclass
class Result:
    name: str
    pages: int = 0
    ok: int = 0
    rate: float = 0.0
    wall: float = 0.0
    peak_rss_mb: float = 0.0
    peak_pss_mb: float = 0.0
    rss_early_mb: float | None = None
    rss_end_mb: float | None = None
    processes: int = 0
    aborted: int = 0
    shop_requests: int = 0
    stats: dict[str, Any] = field(default_factory=dict)


def _served(sandbox: BackgroundSandbox, host: str) -> tuple[int, dict[str, Any]]:
    stats = sandbox.stats()["hosts"][host]
    pages = sum(n for path, n in stats["paths"].items() if path.startswith("/products/"))
    return pages, stats


def run(
    name: str,
    sandbox: BackgroundSandbox,
    host: str,
    urls: list[str],
    extra: list[str],
    early: int,
) -> Result:
    with tempfile.TemporaryDirectory(prefix="pw-bench-browser-") as tmp:
        db = Path(tmp) / "pricewatch.db"
        env = {
            **os.environ,
            "SCRAPY_SETTINGS_MODULE": "pricewatch.settings",
            "PYTHONPATH": str(REPO),
            "PRICEWATCH_FRONTIER_URL": f"sqlite:///{db}",
            "PRICEWATCH_STORE_URL": f"sqlite:///{db}",
            "PRICEWATCH_STATS_FILE": str(Path(tmp) / "stats.json"),
            "PRICEWATCH_ALLOWED_NETWORKS": "127.0.0.0/8",  # the sandbox is on loopback
        }
        (Path(tmp) / "seeds.txt").write_text("\n".join(urls) + "\n")
        scrapy = [sys.executable, "-m", "scrapy"]
        subprocess.run(
            [*scrapy, "seed", "seeds.txt"], cwd=tmp, env=env, check=True, capture_output=True
        )
        sandbox.reset_stats()
        log = open(Path(tmp) / "crawl.log", "wb")
        started = time.monotonic()
        proc = subprocess.Popen(
            [*scrapy, "crawl", "products", *FAST, *extra], cwd=tmp, env=env, stderr=log
        )
        result = Result(name)
        samples: list[tuple[int, int]] = []  # (pages served, RSS KiB)
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                rss, pss, count = memory(proc.pid)
                pages, _ = _served(sandbox, host)
                samples.append((pages, rss))
                result.peak_rss_mb = max(result.peak_rss_mb, rss / 1024)
                result.peak_pss_mb = max(result.peak_pss_mb, pss / 1024)
                result.processes = max(result.processes, count)
                stop.wait(SAMPLE_EVERY)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        code = proc.wait()
        stop.set()
        sampler.join()
        log.close()
        result.wall = time.monotonic() - started
        if code != 0:
            tail = (Path(tmp) / "crawl.log").read_text(errors="replace")[-3000:]
            raise SystemExit(f"{name}: crawl exited {code}\n{tail}")
        stats = json.loads((Path(tmp) / "stats.json").read_text())
    pages, shop = _served(sandbox, host)
    result.pages = pages
    result.ok = int(stats.get("pricewatch/outcome/ok", 0))
    result.aborted = int(stats.get("playwright/request_count/aborted", 0))
    result.shop_requests = int(shop["requests"])
    span = (shop["last"] or 0) - (shop["first"] or 0)
    result.rate = (pages - 1) / span if span > 0 and pages > 1 else 0.0
    result.stats = {k: v for k, v in stats.items() if k.startswith(("playwright/", "pricewatch/"))}

    def median_rss(low: float, high: float) -> float | None:
        window = [rss for served, rss in samples if low <= served <= high]
        return statistics.median(window) / 1024 if window else None

    if len(urls) >= early:
        result.rss_early_mb = median_rss(early * 0.9, early * 1.1)
        result.rss_end_mb = median_rss(len(urls) * 0.9, len(urls))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000, help="pages per crawl (2000)")
    parser.add_argument("--early", type=int, default=200, help="early memory mark (200)")
    parser.add_argument("--js-delay", type=float, default=0.3, help="JS shop price delay (0.3 s)")
    parser.add_argument(
        "--latency",
        default=None,
        metavar="MIN-MAX",
        help="sandbox latency per request in ms, e.g. 20-60 (a network; default none)",
    )
    parser.add_argument(
        "--pages-per-context",
        type=int,
        default=None,
        help="PLAYWRIGHT_MAX_PAGES_PER_CONTEXT for the browser crawls (default: the setting)",
    )
    parser.add_argument(
        "--js-weight",
        choices=("real", "light"),
        default="real",
        help="resource weight of the JS shop's product pages (real)",
    )
    parser.add_argument(
        "--asset-latency",
        default="auto",
        metavar="MIN-MAX|none",
        help="latency per static-asset request of the JS shop in ms (default: 30-150 with "
        "the real weight, none with light)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--only",
        choices=("http", "blocking", "no-blocking"),
        action="append",
        help="run only these crawls (repeatable)",
    )
    args = parser.parse_args()
    only = set(args.only or ("http", "blocking", "no-blocking"))
    results: list[Result] = []
    load_before = os.getloadavg()
    with BackgroundSandbox(
        shops=1,
        js_shops=1,
        products=args.pages,
        seed=3,
        js_delay=args.js_delay,
        latency=args.latency,
        js_weight=args.js_weight,
        asset_latency=args.asset_latency,
    ) as sandbox:
        asset_latency = sandbox.sandbox.asset_latency_ms
        html_host, js_host = (s["host"] for s in sandbox.shops)
        html_urls = sandbox.urls(host=html_host)
        js_urls = sandbox.urls(host=js_host)
        js = ["-s", f"PRICEWATCH_JS_DOMAINS={js_host}"]
        if args.pages_per_context:
            js += ["-s", f"PLAYWRIGHT_MAX_PAGES_PER_CONTEXT={args.pages_per_context}"]
        if "http" in only:
            results.append(run("http (HTML shop)", sandbox, html_host, html_urls, [], args.early))
        if "blocking" in only:
            results.append(run("browser, blocking", sandbox, js_host, js_urls, js, args.early))
        if "no-blocking" in only:
            results.append(
                run("browser, no blocking", sandbox, js_host, js_urls, js + NO_BLOCKING, args.early)
            )
    load_after = os.getloadavg()
    print(
        f"\n{args.pages} product URLs per crawl (robots.txt-allowed ones fetched), JS weight "
        f"{args.js_weight}, asset latency {asset_latency or 'none'} ms, JS price delay "
        f"{args.js_delay}s, latency {args.latency or 'none'} ms, pages per context "
        f"{args.pages_per_context or 'default'}, {os.cpu_count()} CPUs, load average "
        f"{' '.join(f'{v:.2f}' for v in load_before)} before, "
        f"{' '.join(f'{v:.2f}' for v in load_after)} after\n"
    )
    print(
        "| crawl | pages | ok | pages/s | wall s | shop requests | req/page | aborted "
        f"| peak RSS MB | peak PSS MB | procs | RSS @{args.early} MB | RSS @end MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        early = "-" if r.rss_early_mb is None else f"{r.rss_early_mb:.0f}"
        end = "-" if r.rss_end_mb is None else f"{r.rss_end_mb:.0f}"
        print(
            f"| {r.name} | {r.pages} | {r.ok} | {r.rate:.1f} | {r.wall:.1f} | {r.shop_requests} "
            f"| {r.shop_requests / max(r.pages, 1):.1f} | {r.aborted} | {r.peak_rss_mb:.0f} "
            f"| {r.peak_pss_mb:.0f} | {r.processes} "
            f"| {early} | {end} |"
        )
    by_name = {r.name: r for r in results}
    blocking, plain = by_name.get("browser, blocking"), by_name.get("browser, no blocking")
    if blocking and plain and plain.rate:
        print(f"\nblocking speed-up: {blocking.rate / plain.rate:.2f}x pages/s")
    if blocking and blocking.rss_early_mb and blocking.rss_end_mb:
        growth = blocking.rss_end_mb / blocking.rss_early_mb - 1
        print(
            f"RSS after {args.early} vs after {blocking.pages} pages (blocking): "
            f"{blocking.rss_early_mb:.0f} -> {blocking.rss_end_mb:.0f} MB, {growth:+.1%}"
        )
    if plain and plain.rss_early_mb and plain.rss_end_mb:
        growth = plain.rss_end_mb / plain.rss_early_mb - 1
        print(
            f"RSS after {args.early} vs after {plain.pages} pages (no blocking): "
            f"{plain.rss_early_mb:.0f} -> {plain.rss_end_mb:.0f} MB, {growth:+.1%}"
        )
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=1, default=str))


if __name__ == "__main__":
    main()
