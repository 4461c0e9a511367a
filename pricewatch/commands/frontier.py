"""``scrapy frontier``: what the schedule holds, and an operator's repairs. Both backends.

- ``scrapy frontier [--domain D] [--json]``: per domain, the entries due now, scheduled
  later, in flight, retired and dead, with totals and the wait until the next one is due,
  and the domains drifting (:mod:`pricewatch.drift`: a ``drifting:`` line per alarm in
  force, the ``drifting`` list of kinds in JSON).
- ``scrapy frontier --show URL``: one entry as stored (state, due time, counters).
- ``scrapy frontier --requeue DOMAIN``: every entry of DOMAIN not in flight due now,
  retired and dead ones included (e.g. after a shop fixed its site, or after an
  extraction rule changed).
- ``scrapy frontier --purge DOMAIN``: delete every entry of DOMAIN (the shop left the
  catalogue).
- ``scrapy frontier --reap``: return expired leases to the schedule now (claims do it too).
- ``scrapy frontier --limits [--domain D] [--json]``: each domain's adaptive limit: requests
  in flight allowed, delay, when and why it last changed, and its hour-of-week profile.
- ``scrapy frontier --plan [--domain D] [--top N] [--json]``: the request budget's
  allocation (:mod:`pricewatch.frontier.budget`): per budgeted domain and in total, the
  SKUs, budget, planned requests per hour and expected importance-weighted freshness; with
  ``--domain``, its ``--top`` SKUs by importance with their estimated change rate, planned
  interval and expected freshness.

Reads ``PRICEWATCH_FRONTIER_URL`` (settings or environment); ``--frontier URL`` overrides it.
Exit codes: 0 done (also when the reader of the output stops early: ``| head``), 1 the
frontier is unreachable, 3 ``--show`` found nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.settings import BaseSettings

from pricewatch.commands._output import reader_went_away, use_help_formatter
from pricewatch.driftstate import DriftAlarm, DriftStateUnavailable, drift_states_from_settings
from pricewatch.frontier import (
    DomainCounts,
    Frontier,
    FrontierUnavailable,
    budget,
    frontier_from_settings,
)
from pricewatch.frontier.scoring import prior
from pricewatch.politeness.limits import DomainLimit

EXIT_UNAVAILABLE = 1
EXIT_NOT_FOUND = 3
COLUMNS = ("domain", "due", "scheduled", "inflight", "retired", "dead")


def counts_table(rows: Sequence[DomainCounts]) -> str:
    cells = [[c.domain, *(f"{getattr(c, n):,}" for n in COLUMNS[1:])] for c in rows]
    total = [sum(getattr(c, n) for c in rows) for n in COLUMNS[1:]]
    cells.append(["(total)", *(f"{v:,}" for v in total)])
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(COLUMNS)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )

    body = [line(COLUMNS), line(["-" * w for w in widths]), *map(line, cells)]
    return "\n".join(body) + "\n"


async def drift_alarms(settings: BaseSettings, domain: str | None) -> list[DriftAlarm]:
    """The drift alarms in force (:mod:`pricewatch.driftstate`); none if unreadable."""
    states = drift_states_from_settings(settings)
    try:
        alarms = await states.active()
    except DriftStateUnavailable as exc:
        print(f"frontier: drift alarms not read: {exc}", file=sys.stderr)
        return []
    finally:
        await states.close()
    return [a for a in alarms if domain is None or a.domain == domain]


def limits_table(limits: dict[str, DomainLimit]) -> str:
    """One line per domain: its limit, delay, last change and its hour-of-week profile."""
    lines = []
    for domain, state in sorted(limits.items()):
        profile = " ".join(
            f"{hour}:{int(limit)}" for hour, limit in sorted(state.profile.items(), key=_hour)
        )
        changed = f"{_when(state.changed_at)} UTC" if state.changed_at else "-"
        lines.append(
            f"{domain}\n  concurrency {state.concurrency}, delay {state.delay:g}s, "
            f"changed {changed}: {state.reason}\n"
            f"  hour-of-week profile (hour:limit, 0 = Monday 00 UTC): {profile or '-'}"
        )
    return "\n".join(lines) + "\n" if lines else "no limits learned yet\n"


def _hour(item: tuple[str, float]) -> int:
    return int(item[0]) if item[0].isdigit() else -1


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return (
            "[--domain D] [--json] [--limits] [--show URL] [--requeue D] [--purge D] [--reap] "
            "[--plan [--top N]]"
        )

    def short_desc(self) -> str:
        return "Show the frontier's counts per domain; requeue or purge a domain"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        use_help_formatter(parser)
        parser.add_argument(
            "--frontier", metavar="URL", help="frontier URL (default: PRICEWATCH_FRONTIER_URL)"
        )
        parser.add_argument("--domain", metavar="D", help="only this domain's counts")
        parser.add_argument("--json", action="store_true", help="counts as JSON lines")
        parser.add_argument("--show", metavar="URL", help="show one entry")
        parser.add_argument(
            "--requeue",
            metavar="D",
            help="make every entry of D due now (retired and dead ones too)",
        )
        parser.add_argument("--purge", metavar="D", help="delete every entry of D")
        parser.add_argument("--reap", action="store_true", help="return expired leases now")
        parser.add_argument(
            "--limits",
            action="store_true",
            help="each domain's adaptive limit, why it last changed, its hour-of-week profile",
        )
        parser.add_argument(
            "--plan",
            action="store_true",
            help="the request budget's allocation per domain (with --domain: per SKU)",
        )
        parser.add_argument(
            "--top", metavar="N", type=int, default=20, help="--plan --domain: SKUs shown"
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if args:
            raise UsageError(f"unexpected arguments: {' '.join(args)}")
        actions = [opts.show, opts.requeue, opts.purge, opts.reap, opts.limits, opts.plan]
        if sum(map(bool, actions)) > 1:
            raise UsageError(
                "give at most one of --show, --requeue, --purge, --reap, --limits, --plan"
            )
        assert self.settings is not None
        if opts.frontier:
            self.settings.set("PRICEWATCH_FRONTIER_URL", opts.frontier, priority="cmdline")
        try:
            frontier = frontier_from_settings(self.settings)
            self.exitcode = asyncio.run(self._run(frontier, opts))
            sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        except (FrontierUnavailable, ValueError) as exc:
            print(f"frontier: {exc}", file=sys.stderr)
            self.exitcode = EXIT_UNAVAILABLE
        except BrokenPipeError:  # `scrapy frontier --show URL | head`
            reader_went_away()

    async def _run(self, frontier: Frontier, opts: argparse.Namespace) -> int:
        async with frontier:
            if opts.show:
                return await self._show(frontier, opts.show)
            if opts.requeue:
                moved = await frontier.requeue_domain(opts.requeue)
                print(f"frontier: {moved:,} entries of {opts.requeue} requeued, due now")
                return 0
            if opts.purge:
                deleted = await frontier.purge_domain(opts.purge)
                print(f"frontier: {deleted:,} entries of {opts.purge} deleted")
                return 0
            if opts.reap:
                reaped = await frontier.reap()
                print(f"frontier: {reaped:,} expired leases returned to the schedule")
                return 0
            if opts.limits:
                return await self._limits(frontier, opts)
            if opts.plan:
                return await self._plan(frontier, opts)
            return await self._counts(frontier, opts)

    async def _counts(self, frontier: Frontier, opts: argparse.Namespace) -> int:
        rows = await frontier.counts()
        if opts.domain:
            rows = [row for row in rows if row.domain == opts.domain]
        assert self.settings is not None
        alarms = await drift_alarms(self.settings, opts.domain)
        if opts.json:
            for row in rows:
                kinds = [a.kind for a in alarms if a.domain == row.domain]
                print(json.dumps({**asdict(row), "drifting": kinds}))
            return 0
        sys.stdout.write(counts_table(rows))
        for alarm in alarms:
            print(f"drifting: {alarm.domain}: {alarm.detail} (since {_when(alarm.raised_at)} UTC)")
        wait = await frontier.next_due_in()
        if wait is None:
            print("nothing scheduled")
        elif wait == 0:
            print("next due: now")
        else:
            print(f"next due: in {wait:,.0f}s")
        malformed = getattr(frontier, "malformed_count", None)
        if malformed is not None and (bad := await malformed()):
            print(f"malformed records set aside: {bad:,}")
        return 0

    async def _limits(self, frontier: Frontier, opts: argparse.Namespace) -> int:
        limits = {
            domain: DomainLimit.from_json(text)
            for domain, text in (await frontier.limits()).items()
            if not opts.domain or domain == opts.domain
        }
        if opts.json:
            for domain, state in sorted(limits.items()):
                print(json.dumps({"domain": domain, **asdict(state)}))
            return 0
        sys.stdout.write(limits_table(limits))
        return 0

    async def _show(self, frontier: Frontier, url: str) -> int:
        info = await frontier.entry(url)
        if info is None:
            print(f"frontier: no entry for {url}", file=sys.stderr)
            return EXIT_NOT_FOUND
        for key, value in asdict(info).items():
            if key in ("due_at", "seen_at") and value:
                value = f"{_when(value)} UTC"
            print(f"{key:>10}: {value}")
        return 0

    async def _plan(self, frontier: Frontier, opts: argparse.Namespace) -> int:
        policy = frontier.policy
        belief = prior(policy)
        stored = await frontier.allocations()
        domains = [opts.domain] if opts.domain else await frontier.domains()
        summaries = []
        for domain in domains:
            per_hour = policy.budget_for(domain)
            rows = await frontier.rate_rows(domain, urls=bool(opts.domain))
            summary, skus = budget.plan(
                domain,
                ((row.url, row.importance, row.state) for row in rows),
                per_hour,
                stored.get(domain, (0.0, 0.0))[0] if per_hour > 0 else 0.0,
                belief,
                policy.min_interval,
                policy.max_interval,
            )
            summaries.append(summary)
            if opts.domain:
                top = sorted(skus, key=lambda s: -s.importance)[: max(opts.top, 0)]
                if opts.json:
                    for sku in top:
                        print(json.dumps({"domain": domain, **asdict(sku)}))
                else:
                    sys.stdout.write(sku_table(top))
        if opts.json:
            if not opts.domain:
                for summary in summaries:
                    print(json.dumps(asdict(summary)))
            return 0
        sys.stdout.write(plan_table(summaries))
        if not policy.budgeted:
            print("no budget: PRICEWATCH_BUDGET is 0, the velocity schedule applies")
        return 0


def _table(header: Sequence[str], cells: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, cells)]) + "\n"


def plan_table(rows: Sequence[budget.DomainPlan]) -> str:
    header = ("domain", "skus", "budget/h", "planned/h", "freshness")
    cells = [
        [
            r.domain,
            f"{r.skus:,}",
            f"{r.budget:,.0f}" if r.budget > 0 else "-",
            f"{r.planned:,.0f}" if r.budget > 0 else "-",
            f"{r.freshness:.3f}" if r.budget > 0 else "-",
        ]
        for r in rows
    ]
    planned = [r for r in rows if r.budget > 0]
    weight = sum(r.importance for r in planned)
    cells.append(
        [
            "(total)",
            f"{sum(r.skus for r in rows):,}",
            f"{sum(r.budget for r in planned):,.0f}",
            f"{sum(r.planned for r in planned):,.0f}",
            f"{sum(r.freshness * r.importance for r in planned) / weight:.3f}" if weight else "-",
        ]
    )
    return _table(header, cells)


def sku_table(rows: Sequence[budget.SkuPlan]) -> str:
    header = ("url", "importance", "changes/day", "interval", "freshness")
    cells = [
        [
            r.url,
            f"{r.importance:g}",
            f"{r.rate * 86400:.2f}",
            _duration(r.interval),
            f"{r.freshness:.3f}",
        ]
        for r in rows
    ]
    return _table(header, cells) if cells else "no scheduled entries\n"


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"
