"""How fresh a fixed request budget keeps the important prices, policy by policy.

    .venv/bin/python bench/freshness.py                  # the three variants, 1,000 SKUs, 72 h
    .venv/bin/python bench/freshness.py --variant base --seed 2
    .venv/bin/python bench/freshness.py --crawl          # a real crawl of the Poisson sandbox
    .venv/bin/python bench/freshness.py --reallocation 1000000 [--redis redis://127.0.0.1/15]

A simulation: ``--skus`` SKUs of one shop whose prices change as Poisson processes with
rates log-uniform between 1/10 and 1/1000 per minute, importance Pareto(1.2) capped at
100, a budget of one fetch per SKU-hour, ``--hours`` simulated hours. Every policy sees
the same change times. Variants: ``base``; ``shift``, where 10 % of the SKUs draw a new
rate every 12 hours; ``correlated``, where importance follows the change rate (Gaussian
copula, rank correlation ~0.7).

Policies:

- ``today``: :func:`pricewatch.frontier.scoring.transition` with the default
  :class:`SchedulePolicy` (no budget); its intervals add up to more than the budget, so
  the budget's fetches always go to the most overdue entry;
- ``uniform``: every SKU once per ``SKUs / budget`` hours;
- ``importance``: fetch rate proportional to importance;
- ``velocity``: fetch rate proportional to the true change rate;
- ``budget``: the frontier's budget schedule: ``transition`` with ``PRICEWATCH_BUDGET``
  set, rates estimated from the fetches alone (:mod:`pricewatch.frontier.budget`), the
  allocation redone every ``PRICEWATCH_BUDGET_REALLOCATE`` seconds;
- ``optimum``: Cho & Garcia-Molina's optimal allocation with the true rates (re-solved
  when rates shift), within the same interval bounds.

A seed's first pass is spread over the first hour for every policy.

``--crawl``: a real crawl (``scrapy crawl products -a follow=1`` with ``PRICEWATCH_BUDGET``,
SQLite frontier and store) of one sandbox shop in its Poisson mode (``--poisson``: the same
rate range, time accelerated ``--speed`` times; every time setting is scaled by it), for
``--crawl-hours`` simulated hours. From the sandbox's own log of price changes and page
fetches it computes the crawl's freshness and its requests per simulated hour, then
replays the same shop (same rates, importance and change times, the crawl's first fetch
times) through the simulation above, and prints both. Freshness is the
time-averaged importance-weighted share of SKUs whose stored price is the live one
(nothing stored before the first fetch counts as stale). Also printed: requests per hour
(the mean over the run, and the busiest hour), and the mean detection delay (a change to
the fetch that stores it; changes still undetected at the end count until the end) of
the top 1 % of SKUs by importance.
"""

from __future__ import annotations

import argparse
import bisect
import csv
import heapq
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pricewatch.frontier import Completion, Lease, SchedulePolicy
from pricewatch.frontier import budget as alloc
from pricewatch.frontier.scoring import History, history_of, transition
from pricewatch.outcomes import Outcome

DOMAIN = "shop.test"
HOUR = 3600.0
SHIFT_EVERY = 12 * HOUR
SHIFT_SHARE = 0.10
POLICIES = ("today", "uniform", "importance", "velocity", "budget", "optimum")
LABELS = {
    "today": "pricewatch's schedule without a budget",
    "uniform": "uniform round robin",
    "importance": "fetch rate proportional to importance",
    "velocity": "fetch rate proportional to change rate",
    "budget": "budget allocation, estimated rates",
    "optimum": "optimal allocation, true rates",
}


@dataclass
class World:
    """The shop: importance per SKU, rate pieces [(from, rate per second)], change times."""

    importance: list[float]
    pieces: list[list[tuple[float, float]]]
    changes: list[list[float]]
    horizon: float

    def rates_at(self, t: float) -> list[float]:
        out = []
        for pieces in self.pieces:
            lam = pieces[0][1]
            for start, r in pieces:
                if start <= t:
                    lam = r
            out.append(lam)
        return out

    def shift_times(self) -> list[float]:
        return sorted({start for p in self.pieces for start, _ in p[1:]})


def draw_rate(rng: random.Random) -> float:
    return 10 ** rng.uniform(-3.0, -1.0) / 60.0  # 1/1000 .. 1/10 per minute, per second


def make_world(n: int, hours: float, variant: str, seed: int) -> World:
    rng = random.Random(seed)
    horizon = hours * HOUR
    rates = [draw_rate(rng) for _ in range(n)]
    importance = [min(rng.paretovariate(1.2), 100.0) for _ in range(n)]
    if variant == "correlated":
        # Gaussian copula: importance ranks follow rate ranks with correlation ~0.7.
        z_rate = [math.log(r) for r in rates]
        mean = sum(z_rate) / n
        sd = math.sqrt(sum((z - mean) ** 2 for z in z_rate) / n)
        rho = 0.7
        score = [rho * (z - mean) / sd + math.sqrt(1 - rho**2) * rng.gauss(0, 1) for z in z_rate]
        order = sorted(range(n), key=lambda i: score[i])
        ranked = sorted(importance)
        for rank, i in enumerate(order):
            importance[i] = ranked[rank]
    pieces = [[(0.0, r)] for r in rates]
    if variant == "shift":
        t = SHIFT_EVERY
        while t < horizon:
            for i in rng.sample(range(n), int(n * SHIFT_SHARE)):
                pieces[i].append((t, draw_rate(rng)))
            t += SHIFT_EVERY
    changes = []
    for p in pieces:
        times: list[float] = []
        for k, (start, lam) in enumerate(p):
            end = p[k + 1][0] if k + 1 < len(p) else horizon
            t = start + rng.expovariate(lam)
            while t < end:
                times.append(t)
                t += rng.expovariate(lam)
        changes.append(times)
    return World(importance, pieces, changes, horizon)


def changed_between(world: World, i: int, a: float, b: float) -> bool:
    """Did SKU ``i``'s price change in ``(a, b]``?"""
    times = world.changes[i]
    k = bisect.bisect_right(times, a)
    return k < len(times) and times[k] <= b


# -- the policies --------------------------------------------------------------------------------

PlanFn = Callable[[float], list[float]]  # now -> interval per SKU (seconds)


def run_fixed(world: World, plan: PlanFn, first: list[float]) -> list[list[float]]:
    """Fetch each SKU when due, every planned interval (re-planned at rate shifts)."""
    n = len(world.importance)
    intervals = plan(0.0)
    shifts = world.shift_times()
    fetches: list[list[float]] = [[] for _ in range(n)]
    heap = [(first[i], i) for i in range(n)]
    heapq.heapify(heap)
    while heap:
        t, i = heapq.heappop(heap)
        if t >= world.horizon:
            break
        while shifts and shifts[0] <= t:
            intervals = plan(shifts.pop(0))
        fetches[i].append(t)
        heapq.heappush(heap, (t + intervals[i], i))
    return fetches


def run_frontier(
    world: World, policy: SchedulePolicy, first: list[float], capacity: float | None
) -> list[list[float]]:
    """Drive ``transition`` as the frontier does. ``capacity`` (fetches per second): a
    fixed fetch rate always spent on the most overdue entry (for a schedule with no
    budget); None: fetch each entry when due, and with a budget no faster than its pace
    (the frontier's token bucket). A budget's allocation is redone every
    ``policy.reallocate`` seconds from the entries' estimates, as the frontier does."""
    n = len(world.importance)
    prior = alloc.RatePrior(policy.prior_rate, policy.prior_weight, policy.rate_memory)
    histories = [History() for _ in range(n)]
    last = [-1.0] * n
    fetches: list[list[float]] = [[] for _ in range(n)]
    heap = [(first[i], i) for i in range(n)]
    heapq.heapify(heap)
    budgeted = policy.budget > 0
    mu = 0.0
    gain, claimed, mark, last_realloc = alloc.MIN_GAIN, 0, 0, 0.0
    next_realloc = 0.0
    slot = 0.0
    pace = policy.budget / HOUR
    tokens, tokens_at = 0.0, 0.0
    while heap:
        due, i = heap[0]
        t = max(due, slot) if capacity else due
        if budgeted:
            t = max(t, tokens_at)  # claims happen in time order
            available = alloc.refill(tokens, tokens_at, t, pace, policy.burst)
            if available < 1.0:
                t += (1.0 - available) / pace
                available = 1.0
            tokens, tokens_at = available - 1.0, t
        if t >= world.horizon:
            break
        heapq.heappop(heap)
        if capacity:
            slot = t + 1.0 / capacity
        if budgeted and t >= next_realloc:
            rows = (
                (alloc.rate(prior, alloc.RateState(h.rate_changes, h.rate_exposure)), w)
                for h, w in zip(histories, world.importance, strict=True)
            )
            if mu > 0:
                gain = alloc.next_gain(gain, policy.budget, claimed - mark, t - last_realloc)
            mu = alloc.allocate(
                rows, policy.budget * gain, policy.min_interval, policy.max_interval
            )
            mark, last_realloc = claimed, t
            next_realloc = t + policy.reallocate
        claimed += 1
        h = histories[i]
        lease = Lease(
            url=f"https://{DOMAIN}/p/{i}",
            domain=DOMAIN,
            token="t",
            deadline=t,
            importance=world.importance[i],
            mu=mu,
            **_lease_history(h),
        )
        changed = last[i] < 0 or changed_between(world, i, last[i], t)
        step = transition(policy, history_of(lease), Completion(lease, Outcome.OK, changed), t, 1.0)
        histories[i] = step.history
        last[i] = t
        fetches[i].append(t)
        assert step.due_at is not None
        heapq.heappush(heap, (step.due_at, i))
    return fetches


def _lease_history(h: History) -> dict[str, float]:
    return {
        "failures": h.failures,
        "gone": h.gone,
        "checks": h.checks,
        "changes": h.changes,
        "seen_at": h.seen_at,
        "rate_changes": h.rate_changes,
        "rate_exposure": h.rate_exposure,
        "observed_at": h.observed_at,
    }


def optimal_intervals(
    world: World, budget_per_hour: float, lo: float, hi: float, t: float, rates: list[float] | None
) -> list[float]:
    lams = rates if rates is not None else world.rates_at(t)
    rows = list(zip(lams, world.importance, strict=True))
    mu = alloc.allocate(rows, budget_per_hour, lo, hi)
    return [alloc.planned_interval(lam, w, mu, lo, hi) for lam, w in rows]


# -- measuring -----------------------------------------------------------------------------------


def measure(world: World, fetches: list[list[float]]) -> dict[str, float]:
    n = len(world.importance)
    total_w = sum(world.importance)
    fresh = 0.0
    for i in range(n):
        times = world.changes[i]
        fs = fetches[i]
        for k, a in enumerate(fs):
            b = fs[k + 1] if k + 1 < len(fs) else world.horizon
            j = bisect.bisect_right(times, a)
            upto = min(times[j], b) if j < len(times) else b
            fresh += world.importance[i] * (upto - a)
    top = sorted(range(n), key=lambda i: -world.importance[i])[: max(1, n // 100)]
    delays = []
    for i in top:
        fs = fetches[i]
        for c in world.changes[i]:
            k = bisect.bisect_right(fs, c)
            delays.append((fs[k] if k < len(fs) else world.horizon) - c)
    hours = int(world.horizon // HOUR)
    per_hour = [0] * hours
    for fs in fetches:
        for t in fs:
            per_hour[min(int(t // HOUR), hours - 1)] += 1
    return {
        "freshness": fresh / (total_w * world.horizon),
        "requests_per_hour": sum(per_hour) / hours,
        "busiest_hour": max(per_hour),
        "top_delay_min": (sum(delays) / len(delays) / 60.0) if delays else 0.0,
    }


def simulate(
    n: int, hours: float, variant: str, seed: int, base: SchedulePolicy
) -> dict[str, dict[str, float]]:
    world = make_world(n, hours, variant, seed)
    budget_per_hour = float(n)  # one fetch per SKU-hour
    rng = random.Random(seed + 1)
    first = [rng.uniform(0.0, HOUR) for _ in range(n)]
    lo, hi = base.min_interval, base.max_interval
    total_w = sum(world.importance)
    results = {}
    for name in POLICIES:
        if name == "today":
            fetches = run_frontier(world, SchedulePolicy(), first, budget_per_hour / HOUR)
        elif name == "budget":
            fetches = run_frontier(world, replace(base, budget=budget_per_hour), first, None)
        elif name == "uniform":
            fetches = run_fixed(world, lambda t: [n / budget_per_hour * HOUR] * n, first)
        elif name == "importance":
            fetches = run_fixed(
                world,
                lambda t: [total_w / (w * budget_per_hour) * HOUR for w in world.importance],
                first,
            )
        elif name == "velocity":

            def by_rate(t: float) -> list[float]:
                lams = world.rates_at(t)
                return [sum(lams) / (lam * budget_per_hour) * HOUR for lam in lams]

            fetches = run_fixed(world, by_rate, first)
        else:
            fetches = run_fixed(
                world,
                lambda t: optimal_intervals(world, budget_per_hour, lo, hi, t, None),
                first,
            )
        results[name] = measure(world, fetches)
    return results


# -- what a reallocation costs ------------------------------------------------------------------


def reallocation(skus: int, redis_url: str | None) -> None:
    """Time one reallocation of a domain of ``skus`` entries with rate estimates, on an
    SQLite frontier (rows written directly) or a Redis one (namespace ``budgetbench``,
    added through the frontier, deleted afterwards)."""
    import asyncio

    from pricewatch.frontier import Entry
    from pricewatch.frontier.redis import RedisFrontier
    from pricewatch.frontier.sqlite import SQLiteFrontier

    policy = replace(SchedulePolicy(), budget=float(skus) / 10)
    rng = random.Random(1)

    async def run() -> None:
        with tempfile.TemporaryDirectory(prefix="pw-realloc-") as tmp:
            frontier: Any
            if redis_url:
                frontier = RedisFrontier(redis_url, policy, namespace="budgetbench")
            else:
                frontier = SQLiteFrontier(f"sqlite:///{tmp}/f.db", policy)
            await frontier.open()
            try:
                started = time.perf_counter()
                if redis_url:
                    for start in range(0, skus, 100_000):
                        await frontier.add(
                            Entry(f"https://shop.test/p/{i}", importance=rng.paretovariate(1.2))
                            for i in range(start, min(start + 100_000, skus))
                        )
                else:

                    def fill() -> None:
                        conn = frontier._db()
                        conn.execute("BEGIN")
                        conn.executemany(
                            "INSERT INTO frontier_entries (url, domain, importance, due_at, "
                            "seen_at, rate_changes, rate_exposure) VALUES (?, ?, ?, 0, 0, ?, ?)",
                            (
                                (f"https://shop.test/p/{i}", "shop.test",
                                 rng.paretovariate(1.2), rng.uniform(0.5, 8.0),
                                 rng.uniform(3600.0, 360000.0))
                                for i in range(skus)
                            ),
                        )  # fmt: skip
                        conn.execute("INSERT INTO frontier_domains (domain) VALUES ('shop.test')")
                        conn.execute("COMMIT")

                    await frontier._run(fill)
                print(f"{skus:,} entries written in {time.perf_counter() - started:.1f} s")
                started = time.perf_counter()
                cpu = time.process_time()
                done = await frontier.reallocate(force=True)
                print(
                    f"reallocation of {len(done)} domain of {skus:,} SKUs "
                    f"({'Redis' if redis_url else 'SQLite'}): "
                    f"{time.perf_counter() - started:.2f} s wall, "
                    f"{time.process_time() - cpu:.2f} s CPU of this process"
                )
            finally:
                if redis_url:
                    await frontier.purge_domain("shop.test")
                await frontier.close()

    asyncio.run(run())


# -- a real crawl of the Poisson sandbox ---------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def crawl(skus: int, hours: float, speed: float, seed: int) -> None:
    from pricewatch.sandbox._server import BackgroundSandbox

    base = SchedulePolicy()
    budget_per_hour = float(skus)  # one fetch per SKU-hour, simulated
    rng = random.Random(seed)
    poisson = f"{1 / 1000!r}-{1 / 10!r}:speed={speed!r}"
    with BackgroundSandbox(shops=1, products=skus, seed=seed, poisson=poisson) as sandbox:
        urls = sandbox.urls()
        importance = {url: round(min(rng.paretovariate(1.2), 100.0), 3) for url in urls}
        with tempfile.TemporaryDirectory(prefix="pw-freshness-") as tmp:
            work = Path(tmp)
            with (work / "seeds.csv").open("w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["url", "importance"])
                writer.writerows(importance.items())
            env = {
                **os.environ,
                "SCRAPY_SETTINGS_MODULE": "pricewatch.settings",
                "PYTHONPATH": str(ROOT),
                "PRICEWATCH_FRONTIER_URL": f"sqlite:///{work / 'pricewatch.db'}",
                "PRICEWATCH_STORE_URL": f"sqlite:///{work / 'pricewatch.db'}",
                "PRICEWATCH_STATS_FILE": str(work / "stats.json"),
                "PRICEWATCH_ALLOWED_NETWORKS": "127.0.0.0/8",
            }
            seeded = subprocess.run(
                [sys.executable, "-m", "scrapy", "seed", "seeds.csv"],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
            )
            assert seeded.returncode == 0, seeded.stderr[-3000:]
            scaled = {  # every time setting in simulated seconds, divided by the speed
                "PRICEWATCH_BUDGET": budget_per_hour * speed,
                "PRICEWATCH_BUDGET_PRIOR_RATE": base.prior_rate * 86400 * speed,
                "PRICEWATCH_BUDGET_REALLOCATE": base.reallocate / speed,
                "PRICEWATCH_BUDGET_BURST": base.burst / speed,
                "PRICEWATCH_FRONTIER_MIN_INTERVAL": base.min_interval / speed,
                "PRICEWATCH_FRONTIER_MAX_INTERVAL": base.max_interval / speed,
                "PRICEWATCH_FRONTIER_RETRY_DELAY": base.retry_delay / speed,
                "PRICEWATCH_FRONTIER_POLL_INTERVAL": 0.02,
                "PRICEWATCH_FLUSH_INTERVAL": 0.02,
                "PRICEWATCH_VALIDATE_MAX_WAIT": 0.01,
                "PRICEWATCH_QUARANTINE_ENABLED": False,
                "DOWNLOAD_DELAY": 0,
                "AUTOTHROTTLE_ENABLED": False,
                "CLOSESPIDER_TIMEOUT": hours * HOUR / speed + 2,
                "LOG_LEVEL": "INFO",
            }
            args = [a for k, v in scaled.items() for a in ("-s", f"{k}={v}")]
            started = time.perf_counter()
            with (work / "log.txt").open("w") as log:
                subprocess.run(
                    [sys.executable, "-m", "scrapy", "crawl", "products", "-a", "follow=1", *args],
                    cwd=work,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            wall = time.perf_counter() - started
            stats = json.loads((work / "stats.json").read_text())
            host_stats = sandbox.stats()
            record = sandbox.poisson_log()
    report_crawl(record, importance, hours, budget_per_hour, base, wall, stats, host_stats)


def report_crawl(
    record: dict,  # type: ignore[type-arg]
    importance: dict[str, float],
    hours: float,
    budget_per_hour: float,
    base: SchedulePolicy,
    wall: float,
    stats: dict,  # type: ignore[type-arg]
    host_stats: dict,  # type: ignore[type-arg]
) -> None:
    products = record["products"]
    urls = sorted(url for url in products if url in importance)  # not robots.txt-disallowed
    fetch_times = [t for url in urls for t, _ in products[url]["fetches"]]
    assert fetch_times, f"the crawl fetched nothing: {stats}"
    t0 = min(fetch_times)
    horizon = hours * HOUR
    world = World(
        importance=[importance[url] for url in urls],
        pieces=[[(0.0, products[url]["rate"])] for url in urls],
        changes=[
            [t - t0 for t in products[url]["changes"] if t0 < t <= t0 + horizon] for url in urls
        ],
        horizon=horizon,
    )
    fetched = [[t - t0 for t, _ in products[url]["fetches"] if t - t0 < horizon] for url in urls]
    real = measure(world, fetched)
    per_hour = [0] * int(hours)
    for fs in fetched:
        for t in fs:
            per_hour[min(int(t // HOUR), len(per_hour) - 1)] += 1
    first = [fs[0] if fs else horizon for fs in fetched]
    simulated = measure(
        world, run_frontier(world, replace(base, budget=budget_per_hour), first, None)
    )
    optimum = measure(
        world,
        run_fixed(
            world,
            lambda t: optimal_intervals(
                world, budget_per_hour, base.min_interval, base.max_interval, t, None
            ),
            first,
        ),
    )
    steady = per_hour[1:] or per_hour
    outcomes = {k.rsplit("/", 1)[1]: v for k, v in stats.items() if "/outcome/" in k}
    print(
        f"crawl: {len(urls)} SKUs, {hours:g} simulated h at x{record['speed']:g} "
        f"({wall:.0f} s wall), budget {budget_per_hour:g} requests per simulated hour; "
        f"outcomes {outcomes}"
    )
    print()
    print("| | freshness | top 1 % delay |")
    print("|---|---|---|")
    print(f"| real crawl, measured at the sandbox | {real['freshness']:.3f} | "
          f"{real['top_delay_min']:.1f} min |")  # fmt: skip
    print(f"| simulation of the same shop and budget | {simulated['freshness']:.3f} | "
          f"{simulated['top_delay_min']:.1f} min |")  # fmt: skip
    print(f"| optimum, true rates | {optimum['freshness']:.3f} | "
          f"{optimum['top_delay_min']:.1f} min |")  # fmt: skip
    print()
    print(
        f"difference crawl - simulation: {real['freshness'] - simulated['freshness']:+.3f}; "
        f"product-page requests per simulated hour: mean {sum(per_hour) / len(per_hour):.0f}, "
        f"hours 2-{len(per_hour)}: {min(steady)}-{max(steady)} "
        f"(mean {sum(steady) / len(steady):.0f}), first hour {per_hour[0]}; "
        f"every request to the shop: {sum(h['requests'] for h in host_stats['hosts'].values())}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skus", type=int, default=1000)
    parser.add_argument("--hours", type=float, default=72.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--variant", action="append", choices=("base", "shift", "correlated"))
    parser.add_argument("--crawl", action="store_true", help="a real crawl of the sandbox")
    parser.add_argument("--crawl-skus", type=int, default=200)
    parser.add_argument("--crawl-hours", type=float, default=12.0)
    parser.add_argument("--speed", type=float, default=240.0, help="simulated s per real s")
    parser.add_argument("--reallocation", type=int, metavar="SKUS", help="time a reallocation")
    parser.add_argument("--redis", metavar="URL", help="--reallocation on this Redis")
    args = parser.parse_args()
    if args.reallocation:
        reallocation(args.reallocation, args.redis)
        return
    if args.crawl:
        crawl(args.crawl_skus, args.crawl_hours, args.speed, args.seed)
        return
    variants = args.variant or ["base", "shift", "correlated"]
    base = SchedulePolicy()
    print(
        f"{args.skus} SKUs, {args.hours:g} h, budget {args.skus} requests/hour, seed {args.seed}; "
        f"bounds [{base.min_interval:g} s, {base.max_interval:g} s], "
        f"prior {base.prior_rate * 86400:g}/day x {base.prior_weight:g}, "
        f"memory {base.rate_memory:g}, reallocation every {base.reallocate:g} s, "
        f"jitter {base.jitter:g}"
    )
    for variant in variants:
        started = time.perf_counter()
        results = simulate(args.skus, args.hours, variant, args.seed, base)
        optimum = results["optimum"]["freshness"]
        print(f"\n### {variant} ({time.perf_counter() - started:.1f} s)\n")
        print("| policy | freshness | of optimum | requests/h (busiest hour) | top 1 % delay |")
        print("|---|---|---|---|---|")
        for name in POLICIES:
            r = results[name]
            print(
                f"| {LABELS[name]} | {r['freshness']:.3f} | {r['freshness'] / optimum:.1%} | "
                f"{r['requests_per_hour']:.0f} ({r['busiest_hour']:.0f}) | "
                f"{r['top_delay_min']:.1f} min |"
            )


if __name__ == "__main__":
    main()
