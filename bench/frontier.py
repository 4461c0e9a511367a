"""Benchmark the Redis frontier against a scrapy-redis-style queue on the same Redis.

    .venv/bin/python bench/frontier.py                 # 1M SKUs, 200k claim+complete
    .venv/bin/python bench/frontier.py --skus 100000   # smaller

Measures, on one dedicated Redis database (``--redis``, default db 15, which must be
empty; every key written is deleted afterwards):

- memory per scheduled SKU (``INFO memory`` used_memory delta, and the ``MEMORY USAGE``
  of the keys) after adding ``--skus`` product URLs of ~80 characters over ``--domains``
  shops;
- claim+complete throughput from one process: batches of ``--batch`` claimed, then
  completed in one call each; "sequential" waits for each complete before the next
  claim, "overlapped" keeps one claim and one complete in flight (as a crawl does);
- the same for a scrapy-redis-style priority queue, written here as scrapy-redis does it:
  requests serialised with pickle into one ZSET (``ZADD``), popped with ``ZRANGE 0 0`` +
  ``ZREMRANGEBYRANK 0 0`` in a MULTI, one request per round trip, plus its dupefilter SET
  of request fingerprints; a recurring schedule pushes each request back after the fetch.
  It is also run with 500 pops per pipeline, its best case.

and optionally (``--sqlite``) the SQLite frontier's claim+complete throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import pickle
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis.asyncio as aioredis
from scrapy import Request
from scrapy.utils.request import fingerprint

from pricewatch.frontier import Completion, Entry, Frontier, SchedulePolicy
from pricewatch.frontier.redis import RedisFrontier
from pricewatch.frontier.sqlite import SQLiteFrontier
from pricewatch.outcomes import Outcome

NAMESPACE = "bench"
BASELINE_QUEUE = "bench:requests"
BASELINE_DUPEFILTER = "bench:dupefilter"


def sku_url(i: int, domains: int) -> str:
    """A product URL of about 80 characters."""
    shop = f"https://www.shop{i % domains:04d}-example.com"
    return f"{shop}/products/kitchen/steel-kettle-1-7l-{i:09d}.html"


def entries(n: int, domains: int) -> list[Entry]:
    return [Entry(sku_url(i, domains), sku=f"SKU{i:09d}") for i in range(n)]


async def used_memory(client: aioredis.Redis) -> int:
    info = await client.info("memory")
    return int(info["used_memory"])


async def delete_matching(client: aioredis.Redis, pattern: str) -> None:
    batch: list[bytes] = []
    async for key in client.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) >= 500:
            await client.delete(*batch)  # not UNLINK: memory is measured next
            batch.clear()
    if batch:
        await client.delete(*batch)  # not UNLINK: memory is measured next


async def keys_usage(client: aioredis.Redis, pattern: str) -> int:
    total = 0
    async for key in client.scan_iter(match=pattern, count=1000):
        total += int(await client.memory_usage(key, samples=0) or 0)
    return total


async def frontier_throughput(frontier: Frontier, ops: int, batch: int, overlap: bool) -> int:
    """Claim and complete ``ops`` SKUs; returns how many were completed."""
    done = 0
    if not overlap:
        while done < ops:
            leases = await frontier.claim(min(batch, ops - done))
            if not leases:
                break
            done += await frontier.complete([Completion(lease, Outcome.OK) for lease in leases])
        return done
    pending: asyncio.Task[int] | None = None
    claimed = 0
    while claimed < ops:
        leases = await frontier.claim(min(batch, ops - claimed))
        if not leases:
            break
        claimed += len(leases)
        if pending is not None:
            done += await pending
        pending = asyncio.create_task(
            frontier.complete([Completion(lease, Outcome.OK) for lease in leases])
        )
    if pending is not None:
        done += await pending
    return done


def request_blob(template: dict[str, Any], url: str, sku: str) -> tuple[bytes, str]:
    """What scrapy-redis stores for a request: its pickled ``to_dict()``, and its 40-hex
    fingerprint in the dupefilter (a SHA-1 of the URL here: same size, built faster)."""
    fields = {**template, "url": url, "meta": {"sku": sku}}
    return pickle.dumps(fields, protocol=-1), hashlib.sha1(url.encode()).hexdigest()


def request_template() -> dict[str, Any]:
    request = Request("https://example.com/", meta={"sku": ""}, priority=0)
    assert len(fingerprint(request).hex()) == 40
    return request.to_dict()


async def baseline_fill(client: aioredis.Redis, skus: list[Entry]) -> None:
    template = request_template()
    pipe = client.pipeline(transaction=False)
    for i, entry in enumerate(skus):
        blob, fp = request_blob(template, entry.url, entry.sku or "")
        pipe.sadd(BASELINE_DUPEFILTER, fp)
        pipe.zadd(BASELINE_QUEUE, {blob: 0})
        if i % 5000 == 4999:
            await pipe.execute()
    await pipe.execute()


async def baseline_pop_one(client: aioredis.Redis) -> bytes | None:
    pipe = client.pipeline(transaction=True)
    pipe.zrange(BASELINE_QUEUE, 0, 0)
    pipe.zremrangebyrank(BASELINE_QUEUE, 0, 0)
    results, _count = await pipe.execute()
    return results[0] if results else None


async def baseline_throughput(client: aioredis.Redis, ops: int, per_pipeline: int) -> int:
    """Pop, unpickle and push back ``ops`` requests (a recurring schedule)."""
    done = 0
    while done < ops:
        if per_pipeline == 1:
            blobs = [await baseline_pop_one(client)]
        else:
            pipe = client.pipeline(transaction=True)  # one MULTI around all the pops
            for _ in range(per_pipeline):
                pipe.zrange(BASELINE_QUEUE, 0, 0)
                pipe.zremrangebyrank(BASELINE_QUEUE, 0, 0)
            replies = await pipe.execute()
            blobs = [r[0] if r else None for r in replies[0::2]]
        back = client.pipeline(transaction=False)
        for blob in blobs:
            if blob is None:
                continue
            request = pickle.loads(blob)
            back.zadd(BASELINE_QUEUE, {pickle.dumps(request, protocol=-1): request["priority"]})
            done += 1
        await back.execute()
    return done


@dataclass
class Rate:
    """Operations, and the wall-clock and CPU seconds they took (this process, and the
    Redis main thread from INFO cpu). On a shared, busy machine the wall-clock rate says
    more about the neighbours than about the code; the CPU rates say what one idle core
    for the client and one for Redis would sustain."""

    ops: int
    wall: float
    client_cpu: float
    redis_cpu: float

    @property
    def per_second(self) -> float:
        return self.ops / self.wall

    @property
    def cpu_bound(self) -> float:
        """Client and Redis overlapping (pipelined): the busier of the two limits."""
        return self.ops / max(self.client_cpu, self.redis_cpu, 1e-9)

    @property
    def cpu_serial(self) -> float:
        """Client waiting for Redis and Redis for the client: their sum limits."""
        return self.ops / max(self.client_cpu + self.redis_cpu, 1e-9)


async def redis_cpu(client: aioredis.Redis) -> float:
    info = await client.info("cpu")
    return float(info["used_cpu_user_main_thread"]) + float(info["used_cpu_sys_main_thread"])


async def timed(client: aioredis.Redis, label: str, coro: Coroutine[Any, Any, int]) -> Rate:
    print(f"  {label} ...", end=" ", file=sys.stderr, flush=True)
    redis_before, cpu_before, wall_before = await redis_cpu(client), time.process_time(), 0.0
    wall_before = time.perf_counter()
    ops = await coro
    rate = Rate(
        ops=ops,
        wall=time.perf_counter() - wall_before,
        client_cpu=time.process_time() - cpu_before,
        redis_cpu=await redis_cpu(client) - redis_before,
    )
    print(
        f"{rate.per_second:,.0f}/s wall, {rate.cpu_serial:,.0f}/s serial and "
        f"{rate.cpu_bound:,.0f}/s overlapped on CPU time (client {rate.client_cpu:.2f}s, "
        f"Redis {rate.redis_cpu:.2f}s)",
        file=sys.stderr,
        flush=True,
    )
    return rate


async def main(args: argparse.Namespace) -> None:
    # Deleting a million-member key takes a while on a busy machine.
    client = aioredis.from_url(args.redis, socket_timeout=600)
    if await client.dbsize():
        sys.exit(f"{args.redis} is not empty: give --redis a dedicated, empty database")
    skus = entries(args.skus, args.domains)
    mean_url = sum(len(e.url) for e in skus[:1000]) / min(len(skus), 1000)
    ops = min(args.ops, args.skus)
    results: dict[str, Any] = {}
    policy = SchedulePolicy(interval=3600)
    frontier = RedisFrontier(f"{args.redis}?namespace={NAMESPACE}", policy)
    await frontier.open()
    try:
        print(f"pricewatch Redis frontier: adding {args.skus:,} SKUs", file=sys.stderr)
        before = await used_memory(client)
        started = time.perf_counter()
        await frontier.add(skus)
        results["add_rate"] = args.skus / (time.perf_counter() - started)
        results["mem"] = (await used_memory(client) - before) / args.skus
        results["mem_keys"] = await keys_usage(client, frontier.keys.pattern) / args.skus
        print(
            f"  added at {results['add_rate']:,.0f}/s; {results['mem']:,.0f} B/SKU "
            f"(used_memory), {results['mem_keys']:,.0f} B/SKU (MEMORY USAGE)",
            file=sys.stderr,
        )
        results["seq"] = await timed(
            client, "sequential", frontier_throughput(frontier, ops // 2, args.batch, overlap=False)
        )
        results["overlap"] = await timed(
            client, "overlapped", frontier_throughput(frontier, ops // 2, args.batch, overlap=True)
        )
    finally:
        await frontier.close()
        await delete_matching(client, f"pricewatch:{{{NAMESPACE}}}:*")

    try:
        print(f"scrapy-redis-style queue: pushing {args.skus:,} requests", file=sys.stderr)
        before = await used_memory(client)
        await baseline_fill(client, skus)
        results["base_mem"] = (await used_memory(client) - before) / args.skus
        results["base_mem_keys"] = await keys_usage(client, "bench:*") / args.skus
        print(
            f"  {results['base_mem']:,.0f} B/request (used_memory), "
            f"{results['base_mem_keys']:,.0f} B/request (MEMORY USAGE)",
            file=sys.stderr,
        )
        results["base_one"] = await timed(
            client, "one pop per round trip", baseline_throughput(client, min(ops, 20_000), 1)
        )
        results["base_batch"] = await timed(
            client, "500 pops per pipeline", baseline_throughput(client, ops // 2, 500)
        )
    finally:
        await delete_matching(client, "bench:*")

    if args.sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            sqlite = SQLiteFrontier(f"sqlite:///{os.path.join(tmp, 'f.db')}", policy)
            await sqlite.open()
            try:
                n = min(args.skus, 100_000)
                started = time.perf_counter()
                await sqlite.add(skus[:n])
                results["sqlite_add"] = n / (time.perf_counter() - started)
                results["sqlite"] = await timed(
                    client,
                    "sqlite sequential",
                    frontier_throughput(sqlite, min(ops, n) // 2, args.batch, overlap=False),
                )
            finally:
                await sqlite.close()
    await client.aclose()
    report(args, mean_url, ops, results)


def report(args: argparse.Namespace, mean_url: float, ops: int, r: dict[str, Any]) -> None:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\n{args.skus:,} SKUs over {args.domains} domains, URLs of {mean_url:.0f} characters, "
        f"claims of {args.batch}, {ops:,} claim+complete; load average {load} "
        f"on {os.cpu_count()} CPUs\n"
    )
    seq, over, one, batch = r["seq"], r["overlap"], r["base_one"], r["base_batch"]
    rows = [
        ("", "pricewatch Redis frontier", "scrapy-redis-style ZSET", "ratio"),
        (
            "memory per SKU (used_memory)",
            f"{r['mem']:,.0f} B",
            f"{r['base_mem']:,.0f} B",
            f"{r['base_mem'] / r['mem']:.1f}x less",
        ),
        (
            "memory per SKU (MEMORY USAGE)",
            f"{r['mem_keys']:,.0f} B",
            f"{r['base_mem_keys']:,.0f} B",
            f"{r['base_mem_keys'] / r['mem_keys']:.1f}x less",
        ),
        (
            "SKUs/s, wall clock",
            f"{over.per_second:,.0f} overlapped",
            f"{one.per_second:,.0f} one pop per trip",
            f"{over.per_second / one.per_second:.1f}x",
        ),
        (
            "SKUs/s, wall clock",
            f"{seq.per_second:,.0f} sequential",
            f"{batch.per_second:,.0f} 500 pops per MULTI",
            f"{seq.per_second / batch.per_second:.1f}x",
        ),
        (
            "SKUs/s, CPU time, overlapped",
            f"{over.cpu_bound:,.0f}",
            f"{batch.cpu_bound:,.0f} (500 per MULTI)",
            f"{over.cpu_bound / batch.cpu_bound:.1f}x",
        ),
        (
            "SKUs/s, CPU time, serial",
            f"{seq.cpu_serial:,.0f}",
            f"{batch.cpu_serial:,.0f} (500 per MULTI)",
            f"{seq.cpu_serial / batch.cpu_serial:.1f}x",
        ),
        ("add (seed), SKUs/s", f"{r['add_rate']:,.0f}", "", ""),
    ]
    if "sqlite" in r:
        sqlite = r["sqlite"]
        rows.append(
            (
                "SQLite frontier, SKUs/s",
                f"{sqlite.per_second:,.0f} wall, {sqlite.cpu_serial:,.0f} CPU",
                f"add {r['sqlite_add']:,.0f}/s",
                "",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    print(
        "\nThe scrapy-redis-style queue is lossy (a popped request is gone if its worker dies) "
        "and grows its dupefilter forever; the frontier leases, reschedules and is fair."
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skus", type=int, default=1_000_000, help="SKUs scheduled")
    parser.add_argument("--ops", type=int, default=200_000, help="SKUs claimed+completed")
    parser.add_argument("--batch", type=int, default=500, help="SKUs per claim")
    parser.add_argument("--domains", type=int, default=100, help="shops")
    parser.add_argument(
        "--redis", default="redis://127.0.0.1:6379/15", help="a dedicated, empty Redis db"
    )
    parser.add_argument("--sqlite", action="store_true", help="also time the SQLite frontier")
    return parser.parse_args(argv)


def run(entry: Callable[[argparse.Namespace], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(entry(parse_args()))


if __name__ == "__main__":
    run(main)
