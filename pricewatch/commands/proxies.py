"""``scrapy proxies``: the proxy pool, its health per domain, and the live sessions.

- ``scrapy proxies [--domain D] [--json]``: per configured proxy (``PRICEWATCH_PROXIES``,
  by id and masked URL) and per domain it served: successes, failures, blocks, success
  rate, mean latency, benched until (and for how long still), and the sessions it holds;
  then the sessions (domain, slot, id, proxy, age, requests, cookies, logged in).
- ``--json``: one object ``{"proxies": [...], "sessions": [...]}``.

Reads ``PRICEWATCH_FRONTIER_URL`` (sessions and health live beside the frontier) and
``PRICEWATCH_PROXIES``. Never prints a proxy's credentials. Exit codes: 0 done, 1 the
backend is unreachable or a setting is invalid.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from pricewatch.commands._output import reader_went_away, use_help_formatter
from pricewatch.sessions.proxies import ProxyPools
from pricewatch.sessions.store import (
    ProxyHealth,
    SessionRecord,
    SessionStore,
    SessionStoreUnavailable,
    session_store_from_settings,
)

EXIT_UNAVAILABLE = 1


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


def proxy_rows(
    pools: ProxyPools, health: Sequence[ProxyHealth], sessions: Sequence[SessionRecord]
) -> list[dict[str, Any]]:
    """One row per (proxy, domain) with health, and one per configured proxy never used."""
    held: dict[tuple[str, str], int] = {}
    for record in sessions:
        held[(record.proxy, record.domain)] = held.get((record.proxy, record.domain), 0) + 1
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for h in health:
        proxy = pools.by_id.get(h.proxy)
        seen.add(h.proxy)
        rate = h.success_rate
        latency = h.latency
        rows.append(
            {
                "proxy": h.proxy,
                "url": proxy.display if proxy is not None else "(no longer configured)",
                "domain": h.domain,
                "ok": h.ok,
                "failures": h.failures,
                "blocks": h.blocks,
                "success_rate": None if rate is None else round(rate, 3),
                "latency": None if latency is None else round(latency, 3),
                "benched_until": h.benched_until if h.benched_for > 0 else None,
                "benched_for": round(h.benched_for, 1),
                "benchings": h.benchings,
                "sessions": held.get((h.proxy, h.domain), 0),
            }
        )
    for proxy_id, proxy in pools.by_id.items():
        if proxy_id not in seen:
            rows.append({"proxy": proxy_id, "url": proxy.display, "domain": None, "ok": 0,
                         "failures": 0, "blocks": 0, "success_rate": None, "latency": None,
                         "benched_until": None, "benched_for": 0.0, "benchings": 0,
                         "sessions": 0})  # fmt: skip
    return rows


def session_rows(sessions: Sequence[SessionRecord], now: float) -> list[dict[str, Any]]:
    return [
        {
            "domain": r.domain,
            "slot": r.slot,
            "session": r.id,
            "proxy": r.proxy,
            "age": round(now - r.created_at, 1),
            "requests": r.requests,
            "cookies": len(r.cookies),
            "logged_in": r.established,
        }
        for r in sessions
    ]


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:,.3f}".rstrip("0").rstrip(".")
        return str(value)

    cells = [[cell(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines) + "\n"


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[--domain D] [--json]"

    def short_desc(self) -> str:
        return "Show the proxy pool: health per domain, benched proxies, live sessions"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        use_help_formatter(parser)
        parser.add_argument("--domain", metavar="D", help="only this domain")
        parser.add_argument("--json", action="store_true", help="as one JSON object")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if args:
            raise UsageError(f"unexpected arguments: {' '.join(args)}")
        assert self.settings is not None
        try:
            pools = ProxyPools.from_value(self.settings.get("PRICEWATCH_PROXIES"))
            store = session_store_from_settings(self.settings)
            self.exitcode = asyncio.run(self._run(pools, store, opts))
            sys.stdout.flush()
        except (SessionStoreUnavailable, ValueError) as exc:
            print(f"proxies: {exc}", file=sys.stderr)
            self.exitcode = EXIT_UNAVAILABLE
        except BrokenPipeError:
            reader_went_away()

    async def _run(self, pools: ProxyPools, store: SessionStore, opts: argparse.Namespace) -> int:
        async with store:
            health = await store.health(opts.domain)
            sessions = await store.sessions(opts.domain)
        proxies = proxy_rows(pools, health, sessions)
        live = session_rows(sessions, time.time())
        if opts.json:
            print(json.dumps({"proxies": proxies, "sessions": live}))
            return 0
        if not pools:
            print("no proxies configured (PRICEWATCH_PROXIES)")
        for row in proxies:
            row["benched_until"] = (
                None if row["benched_until"] is None else f"{_when(row['benched_until'])} UTC"
            )
        sys.stdout.write(
            table(
                proxies,
                (
                    "proxy",
                    "url",
                    "domain",
                    "ok",
                    "failures",
                    "blocks",
                    "success_rate",
                    "latency",
                    "benched_until",
                    "benched_for",
                    "sessions",
                ),
            )  # fmt: skip
        )
        print()
        sys.stdout.write(
            table(
                live,
                ("domain", "slot", "session", "proxy", "age", "requests", "cookies", "logged_in"),
            )
        )
        return 0
