"""The whole stack against bare Scrapy, and against the politeness ceiling, in one run.

    .venv/bin/python bench/throughput.py            # full size (~5 minutes on a quiet machine)
    .venv/bin/python bench/throughput.py --quick    # a smoke run (seconds)
    .venv/bin/python bench/throughput.py --rounds 3 --skip-latency   # medians of 3 rounds

Every figure is measured in this run, so the ratios hold however loaded the machine is.

1. Zero latency, one sandbox host: ``--pages`` product pages of about ``--page-kb`` KB (50,
   as shops' pages weigh; 0 for the sandbox's own ~26 KB) crawled by a bare Scrapy spider
   (``scrapy runspider``: parse the page's JSON-LD price, nothing else) and by ``scrapy crawl
   products`` with pricewatch's default ``PRICEWATCH_*`` settings, both with
   ``CONCURRENT_REQUESTS=64``, ``CONCURRENT_REQUESTS_PER_DOMAIN=64``, ``DOWNLOAD_DELAY=0``
   and AutoThrottle off; pricewatch on the embedded default (SQLite) and on Redis +
   PostgreSQL (``--redis``, ``--postgres``; ``--no-servers`` skips them). ``--rounds N``
   repeats the sequence (bare, SQLite, SQLite with the audit trail, Redis + PostgreSQL) N
   times and runs the bare spider once more at the end; every ratio is of the medians of
   the runs of each kind (with one round, the bare figure is the mean of its two runs). On a
   2-core machine one crawl's CPU per item moves by up to a third between two identical
   runs, so a single round can land either side of a threshold. Rates are items (stored
   SKUs) over Scrapy's own ``elapsed_time_seconds`` (open to close of the spider).
2. ``--hosts`` hosts with ``--latency`` ms per request and pricewatch's default politeness
   settings: the pace at which requests reached the shops (per host, requests after the
   first over the time between the first and the last, summed), as a fraction of the
   politeness ceiling, the sum over hosts of min(CONCURRENT_REQUESTS_PER_DOMAIN / mean
   latency, 1 / delay), where the delay is DOWNLOAD_DELAY, or with AutoThrottle on the one it
   settles at, max(DOWNLOAD_DELAY, mean latency / AUTOTHROTTLE_TARGET_CONCURRENCY). The
   per-domain limit is checked at the server (``/_stats`` ``max_in_flight``).
3. CPU milliseconds per stored SKU (user + system of the crawl process, interpreter start
   included) and peak RSS of each crawl (``wait4`` rusage).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAME = {  # the Scrapy settings both sides of the zero-latency case run with
    "CONCURRENT_REQUESTS": "64",
    "CONCURRENT_REQUESTS_PER_DOMAIN": "64",
    "DOWNLOAD_DELAY": "0",
    "AUTOTHROTTLE_ENABLED": "False",
}
BARE_SPIDER = textwrap.dedent(
    """
    import json, os
    import scrapy

    class Bare(scrapy.Spider):
        name = "bare"
        custom_settings = {
            "TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
            "LOG_LEVEL": "INFO",
            "TELNETCONSOLE_ENABLED": False,
        }

        async def start(self):
            with open(os.environ["BENCH_URLS"]) as f:
                for line in f:
                    if line.strip():
                        yield scrapy.Request(line.strip(), dont_filter=True)

        def parse(self, response):
            for text in response.xpath('//script[@type="application/ld+json"]/text()').getall():
                try:
                    data = json.loads(text)
                except ValueError:
                    continue
                offers = data.get("offers") if isinstance(data, dict) else None
                if isinstance(offers, list):
                    offers = offers[0] if offers else None
                if isinstance(offers, dict) and "price" in offers:
                    yield {"url": response.url, "price": str(offers["price"])}
                    return
            yield {"url": response.url, "price": None}
    """
)


@dataclass
class Run:
    label: str
    items: int
    elapsed: float
    cpu: float
    max_rss_mb: float
    stats: dict[str, Any]

    @property
    def rate(self) -> float:
        return self.items / self.elapsed if self.elapsed else 0.0

    @property
    def cpu_ms_per_item(self) -> float:
        return 1000 * self.cpu / self.items if self.items else float("nan")


class Sandbox:
    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pricewatch.sandbox", "--port", "0", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.proc.stdout is not None
        self.shops: list[dict[str, Any]] = json.loads(self.proc.stdout.readline())["shops"]

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.shops[0]["base_url"] + path, timeout=30) as resp:
            return bytes(resp.read())

    def urls(self) -> list[str]:
        return self.get("/_urls.txt?js=0").decode().split()

    def stats(self) -> dict[str, Any]:
        return dict(json.loads(self.get("/_stats"))["hosts"])

    def reset(self) -> None:
        req = urllib.request.Request(
            self.shops[0]["base_url"] + "/_stats/reset", data=b"{}", method="POST"
        )
        urllib.request.urlopen(req, timeout=30).read()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def run_measured(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[int, float, float]:
    """Run ``cmd``; (exit code, CPU seconds, peak RSS in MB) of that process."""
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=open(cwd / "log.txt", "ab")
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def scrapy_env(workdir: Path, frontier: str, store: str) -> dict[str, str]:
    return {
        **os.environ,
        "SCRAPY_SETTINGS_MODULE": "pricewatch.settings",
        "PYTHONPATH": str(ROOT),
        "PRICEWATCH_FRONTIER_URL": frontier,
        "PRICEWATCH_STORE_URL": store,
        "PRICEWATCH_STATS_FILE": str(workdir / "stats.json"),
        "PRICEWATCH_ALLOWED_NETWORKS": "127.0.0.0/8",  # the sandbox is on loopback
    }


POLITENESS = (  # pricewatch's defaults the bare spider takes in the latency case
    "CONCURRENT_REQUESTS", "CONCURRENT_REQUESTS_PER_DOMAIN", "DOWNLOAD_DELAY",
    "DOWNLOAD_DELAY_JITTER", "AUTOTHROTTLE_ENABLED", "AUTOTHROTTLE_TARGET_CONCURRENCY",
    "AUTOTHROTTLE_START_DELAY", "AUTOTHROTTLE_MAX_DELAY", "DOWNLOADER", "ROBOTSTXT_OBEY",
)  # fmt: skip


def bare_run(urls: list[str], label: str, same: dict[str, str] = SAME) -> Run:
    with tempfile.TemporaryDirectory(prefix="pw-bench-") as tmp:
        work = Path(tmp)
        (work / "urls.txt").write_text("\n".join(urls) + "\n")
        (work / "bare.py").write_text(BARE_SPIDER)
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("SCRAPY_SETTINGS_MODULE", "SCRAPY_PROJECT")
        }
        env["BENCH_URLS"] = str(work / "urls.txt")
        args = [a for k, v in same.items() for a in ("-s", f"{k}={v}")]
        cmd = [sys.executable, "-m", "scrapy", "runspider", "bare.py", *args]
        cmd += ["-o", "items.jsonl", "-s", "STATS_DUMP=True"]
        code, cpu, rss = run_measured(cmd, env, work)
        assert code == 0, (work / "log.txt").read_text()[-3000:]
        log = (work / "log.txt").read_text()
        with (work / "items.jsonl").open() as lines:  # one item per page parsed
            items = sum(1 for line in lines if line.strip())
        elapsed = _elapsed_from_log(log)
        return Run(label, items, elapsed, cpu, rss, {})


def _elapsed_from_log(log: str) -> float:
    marker = "'elapsed_time_seconds': "
    at = log.rindex(marker) + len(marker)
    return float(log[at : log.index(",", at)])


def pricewatch_run(
    urls: list[str],
    label: str,
    frontier: str | None,
    store: str | None,
    extra: dict[str, str],
    same: dict[str, str] = SAME,
) -> Run:
    """Seed ``urls`` and crawl them with ``same`` (the settings shared with bare Scrapy) and
    ``extra``, on the given backends (one SQLite file when None)."""
    with tempfile.TemporaryDirectory(prefix="pw-bench-") as tmp:
        work = Path(tmp)
        env = scrapy_env(
            work,
            frontier or f"sqlite:///{work / 'pricewatch.db'}",
            store or f"sqlite:///{work / 'pricewatch.db'}",
        )
        (work / "seeds.txt").write_text("\n".join(urls) + "\n")
        seeded = subprocess.run(
            [sys.executable, "-m", "scrapy", "seed", "seeds.txt"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )
        assert seeded.returncode == 0, seeded.stderr[-3000:]
        args = [a for k, v in {**same, **extra}.items() for a in ("-s", f"{k}={v}")]
        cmd = [sys.executable, "-m", "scrapy", "crawl", "products", *args]
        code, cpu, rss = run_measured(cmd, env, work)
        assert code == 0, (work / "log.txt").read_text()[-3000:]
        stats = json.loads((work / "stats.json").read_text())
        items = int(stats.get("pricewatch/store/rows_written", 0))
        assert items, f"{label}: nothing stored; {stats}"
        return Run(label, items, float(stats["elapsed_time_seconds"]), cpu, rss, stats)


def latency_run(urls: list[str], extra: dict[str, str]) -> Run:
    """The full crawl with the project's politeness settings (only ``extra`` overridden)."""
    return pricewatch_run(urls, "latency", None, None, extra, same={})


async def _pg(admin: str, statement: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(admin, timeout=10)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def _delete_namespace(redis_url: str, namespace: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"pricewatch:{{{namespace}}}:*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
    finally:
        client.close()


def servers_run(urls: list[str], args: argparse.Namespace) -> Run:
    name = f"pricewatch_bench_{uuid.uuid4().hex[:10]}"
    namespace = f"bench-{uuid.uuid4().hex[:10]}"
    admin = args.postgres
    base, _, _ = admin.rpartition("/")
    asyncio.run(_pg(admin, f'CREATE DATABASE "{name}"'))  # hex name, made here
    try:
        return pricewatch_run(
            urls,
            "pricewatch, Redis + PostgreSQL",
            f"{args.redis}?namespace={namespace}",
            f"{base}/{name}",
            {},
        )
    finally:
        asyncio.run(_pg(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        _delete_namespace(args.redis, namespace)


def zero_latency(args: argparse.Namespace) -> list[Run]:
    sandbox = Sandbox(
        "--shops", "1", "--products", str(args.pages), "--seed", "11",
        "--page-kb", str(args.page_kb),
    )  # fmt: skip
    try:
        urls = sandbox.urls()[: args.pages]
        sizes = [len(sandbox.get(u[len(sandbox.shops[0]["base_url"]) :])) for u in urls[:20]]
        mean_kb = sum(sizes) / len(sizes) / 1024
        print(
            f"zero latency: {len(urls)} pages on 1 host, mean page {mean_kb:.0f} KB; "
            + ", ".join(f"{k}={v}" for k, v in SAME.items()),
            flush=True,
        )
        runs: list[Run] = []
        for _ in range(args.rounds):
            runs.append(_shown(bare_run(urls, BARE)))
            runs.append(_shown(pricewatch_run(urls, SQLITE, None, None, {})))
            # The same crawl writing its audit trail (pricewatch/audit.py), right after it.
            extra = {"PRICEWATCH_AUDIT_FILE": "audit.jsonl"}
            runs.append(_shown(pricewatch_run(urls, AUDITED, None, None, extra)))
            if not args.no_servers:
                runs.append(_shown(servers_run(urls, args)))
        runs.append(_shown(bare_run(urls, BARE)))
    finally:
        sandbox.stop()
    rate = _medians(runs, "rate")
    cpu = _medians(runs, "cpu_ms_per_item")
    records = [r.stats.get("pricewatch/audit/records", 0) for r in runs if r.label == AUDITED]
    print(
        f"AUDIT cost: {rate[AUDITED] / rate[SQLITE]:.2f} of the rate without it; CPU "
        f"{cpu[AUDITED]:.2f} vs {cpu[SQLITE]:.2f} ms per stored SKU "
        f"({(cpu[AUDITED] / cpu[SQLITE] - 1) * 100:+.1f}%); {records[-1]} records",
        flush=True,
    )
    for label in rate:
        if label != BARE:
            print(f"RATIO zero-latency {label}: {rate[label] / rate[BARE]:.2f} of bare Scrapy")
    return runs


BARE = "bare Scrapy"
SQLITE = "pricewatch, SQLite (default)"
AUDITED = "pricewatch, SQLite + audit trail"


def _medians(runs: list[Run], attribute: str) -> dict[str, float]:
    """Per label, the median of ``attribute`` over that label's runs (in first-run order)."""
    values: dict[str, list[float]] = {}
    for run in runs:
        values.setdefault(run.label, []).append(getattr(run, attribute))
    return {label: statistics.median(found) for label, found in values.items()}


def latency_case(args: argparse.Namespace) -> Run:
    from scrapy.settings import Settings

    settings = Settings()
    settings.setmodule("pricewatch.settings")
    low, high = (float(x) for x in args.latency.split("-"))
    mean_latency = (low + high) / 2000
    limit = settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")
    delay = settings.getfloat("DOWNLOAD_DELAY")
    if settings.getbool("AUTOTHROTTLE_ENABLED"):
        target = settings.getfloat("AUTOTHROTTLE_TARGET_CONCURRENCY")
        delay = max(delay, mean_latency / target)
    per_host = min(limit / mean_latency, 1 / delay if delay else float("inf"))
    ceiling = args.hosts * per_host
    sandbox = Sandbox(
        "--shops", str(args.hosts), "--products", str(args.per_host), "--seed", "12",
        "--latency", args.latency,
    )  # fmt: skip
    try:
        urls = sandbox.urls()
        print(
            f"latency: {len(urls)} pages on {args.hosts} hosts, {args.latency} ms, default "
            f"politeness (per-domain limit {limit}, delay in force {delay:.3f} s); ceiling "
            f"{ceiling:.1f} req/s",
            flush=True,
        )
        polite = {name: str(settings[name]) for name in POLITENESS}
        sandbox.reset()
        bare = bare_run(urls, "bare Scrapy, same politeness", polite)
        bare_pace, bare_peak = _pace(sandbox.stats())
        sandbox.reset()
        run = latency_run(urls, {})
        pace, peak = _pace(sandbox.stats())
    finally:
        sandbox.stop()
    _line(bare)
    _line(run)
    print(
        f"RATIO latency: {pace:.1f} req/s at the shops, {pace / ceiling:.2f} of the politeness "
        f"ceiling ({ceiling:.1f}), {pace / bare_pace:.2f} of bare Scrapy with the same "
        f"politeness settings ({bare_pace:.1f} req/s); {run.rate:.1f} stored SKUs/s over the "
        f"whole crawl; peak in flight per host at the server {peak}, bare {bare_peak} "
        f"(limit {limit}: {'held' if max(peak, bare_peak) <= limit else 'EXCEEDED'})"
    )
    return run


def _pace(hosts: dict[str, Any]) -> tuple[float, int]:
    """Requests per second reaching the shops (summed over hosts), and the peak in flight."""
    pace = 0.0
    peak = 0
    for host in hosts.values():
        if host["requests"] > 1 and host["last"] > host["first"]:
            pace += (host["requests"] - 1) / (host["last"] - host["first"])
        peak = max(peak, host["max_in_flight"])
    return pace, peak


def _shown(run: Run) -> Run:
    _line(run)
    return run


def _line(run: Run) -> None:
    print(
        f"  {run.label:34s} {run.items:6d} items in {run.elapsed:7.2f} s = {run.rate:7.1f}/s; "
        f"CPU {run.cpu_ms_per_item:6.2f} ms/item; peak RSS {run.max_rss_mb:6.1f} MB",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=3000, help="zero-latency pages (3000)")
    parser.add_argument("--page-kb", type=int, default=50, help="zero-latency page size (50)")
    parser.add_argument("--hosts", type=int, default=20, help="latency-case hosts (20)")
    parser.add_argument("--per-host", type=int, default=100, help="latency-case pages per host")
    parser.add_argument("--latency", default="300-900", help="latency-case ms (300-900)")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--postgres", default="postgresql://root@127.0.0.1/postgres")
    parser.add_argument("--no-servers", action="store_true", help="skip Redis + PostgreSQL")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes")
    parser.add_argument("--skip-latency", action="store_true", help="zero latency only")
    parser.add_argument("--skip-zero", action="store_true", help="the latency case only")
    parser.add_argument(
        "--rounds", type=int, default=1, help="zero-latency rounds; ratios of medians (1)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.pages, args.hosts, args.per_host = 60, 3, 4
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    runs = [] if args.skip_zero else zero_latency(args)
    if not args.skip_latency:
        runs.append(latency_case(args))
    zero = [r for r in runs if r.label != "latency"]
    if zero:
        cpu = _medians(zero, "cpu_ms_per_item")
        peak = {label: max(r.max_rss_mb for r in zero if r.label == label) for label in cpu}
        for label in cpu:
            if label != BARE:
                print(
                    f"CPU {label}: {cpu[label]:.2f} ms per stored SKU vs bare {cpu[BARE]:.2f} ms "
                    f"per page; peak RSS {peak[label]:.0f} MB vs {peak[BARE]:.0f} MB"
                )
    print(f"load average {os.getloadavg()[0]:.1f} at the end", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
