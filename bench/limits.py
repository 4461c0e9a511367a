"""The adaptive per-domain limit against shops whose tolerance is a number of requests in
flight (sandbox mode ``tolerance``: beyond it, 429 with Retry-After), measured at the shop.

    .venv/bin/python bench/limits.py one        # 60 SKUs, tolerance 1, 600 ms, defaults
    .venv/bin/python bench/limits.py shift      # tolerance 8 -> 2 -> 8, 3 workers on Redis
    .venv/bin/python bench/limits.py calibrate  # `scrapy calibrate` on tolerance 4

``one``: the scenario of a shop that accepts one request at a time (``--latency`` ms a page,
429 with ``Retry-After: 2`` beyond it), ``--skus`` SKUs, default settings, ``scrapy crawl
products`` rerun like cron until every SKU is stored (at most ``--runs``): runs, stored
SKUs, the share of the shop's answers that were 429, and the crawl time (Scrapy's
``elapsed_time_seconds``, summed) against the ideal, SKUs x latency.

``shift``: ``--workers`` crawls share one Redis frontier (``--redis``) on one shop of
tolerance 8 (``--latency`` 200 ms, ``DOWNLOAD_DELAY=0`` so that the limit alone paces
them); once the shared limit reached 8 the tolerance drops to 2: requests served until the
limit is 2 or less; then the peak in flight at the shop (as each request arrived) over
``--hold`` seconds; then the tolerance rises to 8 again: seconds until the limit is 7 or more.
Default settings otherwise (``--interval`` overrides ``PRICEWATCH_LIMIT_INCREASE_INTERVAL``).

``calibrate``: ``scrapy calibrate`` against tolerances 1 to 6 (``--tolerances``): what it
found, in how many requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pricewatch.frontier import frontier_from_url  # noqa: E402
from pricewatch.politeness.limits import DomainLimit  # noqa: E402


class Shop:
    """One sandbox shop in a subprocess."""

    def __init__(self, products: int, latency: str, tolerance: int, retry_after: int) -> None:
        mode = f"tolerance:concurrency={tolerance},retry_after={retry_after}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pricewatch.sandbox", "--port", "0", "--shops", "1"]
            + ["--products", str(products), "--seed", "19", "--latency", latency]
            + ["--mode", mode],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.proc.stdout is not None
        shop = json.loads(self.proc.stdout.readline())["shops"][0]
        self.base, self.host = shop["base_url"], shop["host"]

    def get(self, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method="POST" if data else "GET")
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"{}")

    def urls(self) -> list[str]:
        with urllib.request.urlopen(self.base + "/_urls.txt?js=0", timeout=30) as resp:
            return resp.read().decode().split()

    def stats(self) -> dict[str, Any]:
        return dict(self.get("/_stats")["hosts"][self.host])

    def tolerance(self, n: int, retry_after: int) -> None:
        self.get("/_control", {"mode": "tolerance", "concurrency": n, "retry_after": retry_after})

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def env_for(work: Path, frontier: str) -> dict[str, str]:
    return {
        **os.environ,
        "SCRAPY_SETTINGS_MODULE": "pricewatch.settings",
        "PYTHONPATH": str(ROOT),
        "PRICEWATCH_FRONTIER_URL": frontier,
        "PRICEWATCH_STORE_URL": f"sqlite:///{work / 'pricewatch.db'}",
        "PRICEWATCH_STATS_FILE": str(work / "stats-%(pid)s.json"),
        "PRICEWATCH_ALLOWED_NETWORKS": "127.0.0.0/8",
    }


def scrapy(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args], cwd=work, env=env, capture_output=True, text=True
    )


def seed(work: Path, env: dict[str, str], urls: list[str]) -> None:
    (work / "seeds.txt").write_text("\n".join(urls) + "\n")
    done = scrapy(work, env, "seed", "seeds.txt")
    assert done.returncode == 0, done.stderr[-2000:]


def one(args: argparse.Namespace) -> None:
    latency = args.latency or 600
    shop = Shop(args.skus + 20, str(latency), 1, 2)
    try:
        with tempfile.TemporaryDirectory(prefix="pw-limits-") as tmp:
            work = Path(tmp)
            env = env_for(work, f"sqlite:///{work / 'pricewatch.db'}")
            seed(work, env, shop.urls()[: args.skus])
            shop.get("/_stats/reset", {})
            elapsed, runs, stored = 0.0, 0, 0
            while stored < args.skus and runs < args.runs:
                runs += 1
                for old in work.glob("stats-*.json"):
                    old.unlink()
                done = scrapy(work, env, "crawl", "products")
                assert done.returncode == 0, done.stderr[-3000:]
                [record] = [json.loads(p.read_text()) for p in work.glob("stats-*.json")]
                elapsed += float(record["elapsed_time_seconds"])
                stored += int(record.get("pricewatch/store/rows_written", 0))
                opened = record.get("pricewatch/breaker/opened", 0)
                print(
                    f"  run {runs}: {record.get('pricewatch/store/rows_written', 0)} stored in "
                    f"{record['elapsed_time_seconds']:.1f} s; limit "
                    f"{record.get(f'pricewatch/limit/domain/{shop.host}')}; breaker opened "
                    f"{opened}",
                    flush=True,
                )
            served = shop.stats()
    finally:
        shop.stop()
    pages = served["requests"] - served["paths"].get("/robots.txt", 0)
    rejected = served["status"].get("429", 0)
    ideal = args.skus * latency / 1000
    print(
        f"RESULT one: {stored}/{args.skus} SKUs stored in {runs} run(s); {rejected} of {pages} "
        f"page requests answered 429 ({rejected / max(pages, 1):.1%}); crawl time {elapsed:.1f} s "
        f"= {elapsed / ideal:.2f} x the ideal {ideal:.0f} s; peak in flight asked of the shop "
        f"{served.get('max_demand')}"
    )


async def _limit(url: str, domain: str) -> DomainLimit | None:
    frontier = frontier_from_url(url)
    async with frontier:
        text = (await frontier.limits()).get(domain)
    return None if text is None else DomainLimit.from_json(text)


def wait_limit(url: str, domain: str, ok: Any, timeout: float) -> tuple[DomainLimit, float]:
    start = time.monotonic()
    last = None
    while time.monotonic() - start < timeout:
        last = asyncio.run(_limit(url, domain))
        if last is not None and ok(last):
            return last, time.monotonic() - start
        time.sleep(0.05)
    raise SystemExit(f"the limit of {domain} never got there in {timeout:.0f} s: {last}")


def shift(args: argparse.Namespace) -> None:
    latency = args.latency or 200
    shop = Shop(3000, str(latency), 8, 1)
    namespace = f"bench-limits-{uuid.uuid4().hex[:8]}"
    url = f"{args.redis}?namespace={namespace}"
    workers: list[subprocess.Popen[str]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="pw-limits-") as tmp:
            work = Path(tmp)
            env = env_for(work, url)
            seed(work, env, shop.urls())
            settings = ["-s", "DOWNLOAD_DELAY=0"]
            if args.interval:
                settings += ["-s", f"PRICEWATCH_LIMIT_INCREASE_INTERVAL={args.interval}"]
            for _ in range(args.workers):
                workers.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "scrapy", "crawl", "products", *settings],
                        cwd=work,
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        text=True,
                    )
                )
            reached, took = wait_limit(url, shop.host, lambda s: s.concurrency >= 8, 120)
            print(f"  limit {reached.concurrency} after {took:.1f} s ({reached.reason})")
            before = shop.stats()
            shop.tolerance(2, 1)
            low, took = wait_limit(url, shop.host, lambda s: s.concurrency <= 2, 60)
            after = shop.stats()
            followed = after["requests"] - before["requests"]
            print(
                f"  tolerance 8 -> 2: limit {low.concurrency} after {followed} requests "
                f"({after['status'].get('429', 0) - before['status'].get('429', 0)} of them "
                f"429), {took:.1f} s ({low.reason})"
            )
            shop.get("/_stats/reset", {})
            time.sleep(args.hold)
            held = shop.stats()
            print(
                f"  {args.hold:.0f} s at tolerance 2: peak in flight asked of the shop "
                f"{held.get('max_demand')}, {held['status'].get('429', 0)} of "
                f"{held['requests']} answered 429"
            )
            shop.tolerance(8, 1)
            high, recovered = wait_limit(url, shop.host, lambda s: s.concurrency >= 7, 900)
            print(f"  tolerance 2 -> 8: limit {high.concurrency} after {recovered:.1f} s")
            print(
                f"RESULT shift ({args.workers} workers): followed 8 -> 2 within {followed} "
                f"requests; peak in flight at tolerance 2: {held.get('max_demand')} "
                f"(tolerance + 1 = 3); recovered to {high.concurrency} in {recovered:.0f} s"
            )
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(60)
        shop.stop()
        import redis

        client = redis.Redis.from_url(args.redis)
        keys = list(client.scan_iter(match=f"pricewatch:{{{namespace}}}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()


def calibrate(args: argparse.Namespace) -> None:
    latency = args.latency or 300
    for tolerance in (int(t) for t in args.tolerances.split(",")):
        shop = Shop(10, str(latency), tolerance, 1)
        try:
            with tempfile.TemporaryDirectory(prefix="pw-limits-") as tmp:
                work = Path(tmp)
                env = env_for(work, f"sqlite:///{work / 'pricewatch.db'}")
                product = shop.urls()[0]
                shop.get("/_stats/reset", {})
                done = scrapy(work, env, "calibrate", product, "--json")
                assert done.returncode == 0, done.stderr[-3000:]
                result = json.loads(done.stdout.strip().splitlines()[-1])
                served = shop.stats()
        finally:
            shop.stop()
        print(
            f"RESULT calibrate: tolerance {tolerance} found as {result['concurrency']} in "
            f"{served['requests']} requests at the shop ({served['status'].get('429', 0)} "
            f"answered 429)",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("case", choices=("one", "shift", "calibrate"))
    parser.add_argument("--skus", type=int, default=60)
    parser.add_argument("--latency", type=int, help="ms per page (one: 600, shift: 200)")
    parser.add_argument("--runs", type=int, default=10, help="one: cron runs at most")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--hold", type=float, default=10.0)
    parser.add_argument("--interval", type=float, help="PRICEWATCH_LIMIT_INCREASE_INTERVAL")
    parser.add_argument("--tolerances", default="1,2,3,4,5,6")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    {"one": one, "shift": shift, "calibrate": calibrate}[args.case](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
