"""``scrapy frontier``, run as a subprocess on each backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from scrapy.settings import Settings

from pricewatch.commands.frontier import _when
from pricewatch.driftstate import DriftAlarm, drift_states_from_settings
from pricewatch.frontier import Completion, Entry
from pricewatch.outcomes import Outcome
from tests.fixtures.redis import MakeFrontier
from tests.helpers import project_settings

ROOT = Path(__file__).resolve().parents[1]


def scrapy(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "pricewatch.settings"}
    env.pop("PRICEWATCH_FRONTIER_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "frontier", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_counts_show_requeue_and_purge(
    frontier_url: str, make_frontier: MakeFrontier
) -> None:
    frontier = await make_frontier(gone_limit=1)
    await frontier.add([Entry(f"https://a.test/p/{i}", sku=f"A{i}") for i in range(4)])
    await frontier.add([Entry(f"https://b.test/p/{i}") for i in range(2)])
    leases = await frontier.claim(3)
    gone = next(lease for lease in leases if lease.domain == "a.test")
    await frontier.complete([Completion(gone, Outcome.GONE)])
    # A drift alarm raised by a crawl (pricewatch/drift.py), and one that has expired.
    states = drift_states_from_settings(
        Settings(project_settings(PRICEWATCH_FRONTIER_URL=frontier_url))
    )
    now = time.time()
    await states.raise_alarm(DriftAlarm("b.test", "no_price", "no_price rate 60%", now, now + 60))
    await states.raise_alarm(DriftAlarm("a.test", "blocked", "old", now - 90, now - 30))
    await states.close()

    shown = scrapy("--frontier", frontier_url)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["domain", "due", "scheduled", "inflight", "retired", "dead"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:5]}
    assert rows == {
        "a.test": ["2", "0", "1", "1", "0"],
        "b.test": ["1", "0", "1", "0", "0"],
        "(total)": ["3", "0", "2", "1", "0"],
    }
    assert "next due: now" in shown.stdout
    drifting = [line for line in lines if line.startswith("drifting:")]
    assert drifting == [f"drifting: b.test: no_price rate 60% (since {_when(now)} UTC)"]

    as_json = scrapy("--frontier", frontier_url, "--json", "--domain", "a.test")
    assert [json.loads(line) for line in as_json.stdout.splitlines()] == [
        {
            "domain": "a.test",
            "due": 2,
            "scheduled": 0,
            "inflight": 1,
            "retired": 1,
            "dead": 0,
            "drifting": [],
        }
    ]
    b_json = scrapy("--frontier", frontier_url, "--json", "--domain", "b.test")
    assert json.loads(b_json.stdout)["drifting"] == ["no_price"]

    entry = scrapy("--frontier", frontier_url, "--show", gone.url)
    assert entry.returncode == 0, entry.stderr
    assert "state: retired" in entry.stdout and f"sku: {gone.sku}" in entry.stdout
    missing = scrapy("--frontier", frontier_url, "--show", "https://nowhere.test/")
    assert missing.returncode == 3 and "no entry for https://nowhere.test/" in missing.stderr

    requeued = scrapy("--frontier", frontier_url, "--requeue", "a.test")
    assert requeued.returncode == 0, requeued.stderr
    assert "1 entries of a.test requeued" in requeued.stdout
    info = await frontier.entry(gone.url)
    assert info is not None and info.state == "scheduled"

    purged = scrapy("--frontier", frontier_url, "--purge", "b.test")
    assert purged.returncode == 0, purged.stderr
    assert "2 entries of b.test deleted" in purged.stdout
    assert [c.domain for c in await frontier.counts()] == ["a.test"]


async def test_plan_shows_the_budget_allocation(
    frontier_url: str, make_frontier: MakeFrontier
) -> None:
    frontier = await make_frontier(budget=20.0)
    await frontier.add(
        [Entry(f"https://a.test/p/{i}", importance=1.0 + i) for i in range(4)]
        + [Entry("https://b.test/p/0")]
    )
    budgeted = ("-s", "PRICEWATCH_BUDGET=20", "-s", 'PRICEWATCH_BUDGET_DOMAINS={"b.test": 0}')
    shown = scrapy("--frontier", frontier_url, "--plan", *budgeted)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["domain", "skus", "budget/h", "planned/h", "freshness"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    # 4 SKUs at the prior rate share 20 requests an hour (the histogram's bins: +-10 %).
    assert rows["a.test"][:2] == ["4", "20"]
    assert 18 <= float(rows["a.test"][2]) <= 22
    assert rows["b.test"] == ["1", "-", "-", "-"]
    assert rows["(total)"][:2] == ["5", "20"]
    assert 0 < float(rows["a.test"][3]) < 1

    per_sku = scrapy("--frontier", frontier_url, "--plan", "--domain", "a.test", "--json",
                     "--top", "2", *budgeted)  # fmt: skip
    assert per_sku.returncode == 0, per_sku.stderr
    skus = [json.loads(line) for line in per_sku.stdout.splitlines()]
    assert [s["url"] for s in skus] == ["https://a.test/p/3", "https://a.test/p/2"]
    assert skus[0]["interval"] < skus[1]["interval"]  # more important, same (prior) rate
    assert all(s["rate"] == frontier.policy.prior_rate for s in skus)

    unbudgeted = scrapy("--frontier", frontier_url, "--plan")
    assert "no budget" in unbudgeted.stdout


def test_an_unreachable_frontier_exits_1_with_a_masked_url() -> None:
    result = scrapy("--frontier", "redis://:hunter2@127.0.0.1:1/0")
    assert result.returncode == 1
    assert "redis://:***@127.0.0.1:1/0" in result.stderr
    assert "hunter2" not in result.stderr + result.stdout
