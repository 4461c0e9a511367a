"""The audit trail: every fetch decision of a crawl in order, one final outcome per lease,
no secret and no personal data; ``scrapy audit SKU|URL`` prints one SKU's story."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pricewatch.audit import safe_url
from pricewatch.commands.audit import parse_since

from .helpers import scrapy, scrapy_env
from .test_politeness_fallback import official_source

SECRET_QUERY = "?ref=mail&token=s3cr3t-t0ken&email=jane.doe%40example.com&tel=%2B442079460958"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://shop.test/p/1", "https://shop.test/p/1"),
        (
            "https://shop.test/p/1?api_key=abc&colour=red",
            "https://shop.test/p/1?api_key=***&colour=red",
        ),
        ("https://user:pw@shop.test/p?sessionid=9", "https://***@shop.test/p?sessionid=***"),
        ("https://shop.test/p?contact=jane.doe%40example.com", "https://shop.test/p?contact=***"),
        (
            "https://shop.test/p/1234567890123?id=98765432",
            "https://shop.test/p/1234567890123?id=98765432",
        ),
        ("https://shop.test/u/jane@example.com/p", "https://shop.test/u/[email]/p"),
    ],
)
def test_urls_lose_their_secrets_and_personal_data(url: str, shown: str) -> None:
    assert safe_url(url) == shown


def test_since_reads_times_and_durations() -> None:
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert parse_since("90m", now) == now - timedelta(minutes=90)
    assert parse_since("2d", now) == now - timedelta(days=2)
    assert parse_since("2026-03-01T10:00") == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def events(records: list[dict[str, Any]]) -> list[str]:
    return [r["event"] for r in records]


def test_a_blocked_sku_s_story_and_one_outcome_per_lease(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    shop = sandbox_factory(seed=7, shops=2, products=6)
    host, calm = (s["host"] for s in shop.shops)
    truth = {u: t for u, t in shop.truth().items() if u in set(shop.urls())}
    lines = ["url,sku"] + [f"{u},{t['sku']}" for u, t in truth.items()]
    (tmp_path / "seeds.txt").write_text("\n".join(lines) + "\n")
    # On the calm shop, a URL carrying a token, an e-mail and a phone number.
    secret = f"{shop.shops[1]['base_url']}/contact{SECRET_QUERY}"
    (tmp_path / "seeds.txt").write_text("\n".join([*lines, f"{secret},NOPE-1"]) + "\n")
    audit_file = str(tmp_path / "audit" / "%(name)s-%(pid)s.jsonl")
    env = scrapy_env(tmp_path, PRICEWATCH_AUDIT_FILE=audit_file)
    assert scrapy(tmp_path, "seed", "seeds.txt", env=env).returncode == 0
    # Every page answers 429 with Retry-After: 1; the API does not.
    shop.control(host=host, mode="ratelimit", rate=0, retry_after=1)
    sources = {host: official_source(shop, host, "price.amount")}
    proc = scrapy(
        tmp_path,
        "crawl", "products",
        "-s", "DOWNLOAD_DELAY=0",
        "-s", "AUTOTHROTTLE_ENABLED=False",
        "-s", "PRICEWATCH_MAX_OUTSTANDING=1",  # one SKU at a time: a story in order
        "-s", "PRICEWATCH_FRONTIER_CLAIM_BATCH=1",
        "-s", "PRICEWATCH_BACKOFF_BASE=0.05",
        "-s", "PRICEWATCH_BREAKER_THRESHOLD=2",
        "-s", "PRICEWATCH_BREAKER_COOLDOWN=0.5",
        "-s", "PRICEWATCH_BREAKER_MAX_COOLDOWN=0.5",
        "-s", "PRICEWATCH_FALLBACK_AFTER=0",
        "-s", f"PRICEWATCH_OFFICIAL_SOURCES={json.dumps(sources)}",
        env=env,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    [path] = list((tmp_path / "audit").iterdir())
    text = path.read_text()
    records = [json.loads(line) for line in text.splitlines()]

    # One final outcome per lease claimed, and nothing else ends a lease.
    claimed = Counter(r["lease"] for r in records if r["event"] == "claimed")
    outcomes = Counter(r["lease"] for r in records if r["event"] == "outcome")
    assert claimed and outcomes == claimed
    assert all(n == 1 for n in outcomes.values())
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert sum(outcomes.values()) == sum(
        v for k, v in stats.items() if k.startswith("pricewatch/outcome/")
    )
    assert stats["pricewatch/audit/records"] == len(records)
    # Context on every record; no secret, no e-mail, no phone number anywhere.
    assert {r["config"] for r in records} == {records[0]["config"]} and len(
        records[0]["config"]
    ) == 12
    assert all(r["host"] and r["pid"] for r in records)
    for leaked in ("s3cr3t", "jane.doe", "example.com", "2079460958", "442079"):
        assert leaked not in text, leaked

    # The first SKU: a 429 with Retry-After, a retry honouring it, a second 429 that
    # opens the breaker, the official source, stored. (The secret URL's records are found
    # by the URL as given: it is masked the same way to match.)
    nope = scrapy(tmp_path, "audit", secret, env=env)
    assert nope.returncode == 0 and "outcome=gone" in nope.stdout, nope.stderr
    first = next(r["url"] for r in records if r["event"] == "claimed" and r["domain"] == host)
    story = scrapy(tmp_path, "audit", first, "--json", env=env)
    assert story.returncode == 0, story.stderr
    mine = [json.loads(line) for line in story.stdout.splitlines()]
    assert events(mine) == [
        "claimed", "response", "retry", "response", "breaker", "fallback",
        "response", "stored", "outcome",
    ]  # fmt: skip
    assert (mine[1]["status"], mine[1]["retry_after"]) == (429, 1.0)
    assert mine[2]["retry_after"] == 1.0 and mine[2]["delay"] >= 1.0
    assert mine[3]["status"] == 429
    assert mine[5]["source_host"] == host
    assert mine[6]["status"] == 200 and "/api/products/" in mine[6]["resolved_url"]
    assert (
        mine[7]["status"] in ("changed", "unchanged") and mine[7]["price"] == truth[first]["price"]
    )
    assert (mine[8]["outcome"], mine[8]["price"]) == ("ok", truth[first]["price"])
    assert mine[8]["raw_hash"] == mine[7]["raw_hash"]
    # As text: one decision a line, in the same order.
    shown = scrapy(tmp_path, "audit", truth[first]["sku"], env=env)
    assert shown.returncode == 0, shown.stderr
    assert [line.split()[3] for line in shown.stdout.splitlines()] == events(mine)
    assert "retry_after=1.0" in shown.stdout.splitlines()[2]

    later = scrapy(tmp_path, "audit", first, "--since", "2099-01-01T00:00", env=env)
    assert later.returncode == 3 and "nothing recorded" in later.stderr
