"""``scrapy report``: one self-contained HTML file an analyst can open anywhere.

What it shows, and what each figure is based on (the report says it too):

- **Per-SKU price history**: one chart per SKU (pygal, inline SVG, no JavaScript): the
  published price and the list (regular) price at each stored change (``price_changes``),
  extended to the last check (``products.checked_at``); the points where the stored
  availability was not "in stock" are marked; the stock states are listed under the chart.
- **Biggest movers**: SKUs ordered by the size of the move from their first published
  price to their latest one, in percent (same currency only).
- **Per-domain health**, from what the project stores:
  the store (SKUs, stock states, the age of stored prices: now minus ``checked_at``;
  quarantine rows: held/confirmed/rejected changes), the frontier when one is configured
  (``Frontier.counts``: due, scheduled, in flight, retired, dead entries), and the run
  records of ``PRICEWATCH_STATS_FILE`` (:mod:`pricewatch.runs`): outcomes, circuit-breaker
  openings, no-price rate, 429 responses. Run records count every domain of a run
  together: they hold no per-domain counts, and the report says so instead of splitting
  them.

Every text that comes from a shop (names, SKUs, URLs, domains) is HTML-escaped.
"""

from __future__ import annotations

import html
import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from pricewatch.frontier.base import DomainCounts
from pricewatch.runs import outcome_counts
from pricewatch.storage._values import canonical_decimal
from pricewatch.storage.base import ChangeRow, HeldRow, ProductRow, Store

IN_STOCK = frozenset({"in_stock", "instock", "in stock", "limited_stock", "limitedavailability"})
MOVERS = 20  # rows in the "biggest movers" table


@dataclass(slots=True)
class SkuHistory:
    product: ProductRow
    changes: list[ChangeRow]


@dataclass(frozen=True, slots=True)
class RunSummary:
    path: str
    start_time: str
    host: str
    pid: str
    status: str
    outcomes: dict[str, int]
    breaker_opened: int
    responses_429: int
    responses: int

    @property
    def fetched(self) -> int:
        return sum(n for name, n in self.outcomes.items() if name != "skipped")

    @property
    def rate_429(self) -> float | None:
        return self.responses_429 / self.responses if self.responses else None

    @property
    def no_price_rate(self) -> float | None:
        return self.outcomes.get("no_price", 0) / self.fetched if self.fetched else None


@dataclass(slots=True)
class ReportData:
    generated_at: datetime
    store_url: str
    skus: list[SkuHistory] = field(default_factory=list)
    quarantine: list[HeldRow] = field(default_factory=list)
    frontier: list[DomainCounts] | None = None
    frontier_note: str = ""
    runs: list[RunSummary] = field(default_factory=list)
    runs_note: str = ""


async def collect(
    store: Store, domain: str | None = None
) -> tuple[list[SkuHistory], list[HeldRow]]:
    """The latest offer and the published changes of every SKU (of ``domain``), and the
    quarantine rows, read through the store interface (both backends)."""
    products = [p async for p in store.latest(domain)]
    skus = [
        SkuHistory(p, [c for c in await store.history(p.url) if c.url == p.url]) for p in products
    ]
    urls = {p.url for p in products}
    held = [h for h in await store.quarantine(None) if h.url in urls]
    return skus, held


def read_runs(paths: Iterable[Path]) -> tuple[list[RunSummary], list[str]]:
    """The run records at ``paths``, newest first, and the files that could not be read."""
    runs: list[RunSummary] = []
    unreadable: list[str] = []
    for path in paths:
        try:
            record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            unreadable.append(f"{path}: {exc}")
            continue
        runs.append(
            RunSummary(
                path=str(path),
                start_time=str(record.get("start_time", "")),
                host=str(record.get("host", "")),
                pid=str(record.get("pid", "")),
                status=str(record.get("status", "")),
                outcomes=outcome_counts(record),
                breaker_opened=int(record.get("pricewatch/breaker/opened", 0) or 0),
                responses_429=int(record.get("downloader/response_status_count/429", 0) or 0),
                responses=int(record.get("downloader/response_count", 0) or 0),
            )
        )
    runs.sort(key=lambda r: r.start_time, reverse=True)
    return runs, unreadable


def in_stock(availability: str | None) -> bool | None:
    if availability is None:
        return None
    return availability.strip().lower().replace("-", "_") in IN_STOCK


def movers(
    skus: Sequence[SkuHistory], limit: int = MOVERS
) -> list[tuple[SkuHistory, Decimal, Decimal]]:
    """(sku, first price, move in percent), largest moves first; a SKU whose first change
    is in another currency than its latest offer, or whose first price is 0, is left out."""
    moves = []
    for sku in skus:
        if not sku.changes:
            continue
        first = sku.changes[0]
        if first.currency != sku.product.currency or not first.price:
            continue
        pct = (sku.product.price - first.price) / first.price * 100
        if pct:
            moves.append((sku, first.price, pct))
    moves.sort(key=lambda m: (-abs(m[2]), m[0].product.url))
    return moves[:limit]


def _e(text: object) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def _age(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f} %"


def chart_svg(sku: SkuHistory, now: datetime) -> str:
    """The price history of one SKU as an inline SVG element (no script, no external
    reference). Series labels are the project's own words; no shop text goes in."""
    import pygal
    from pygal.style import Style

    style = Style(
        background="white", plot_background="white", colors=("#1f77b4", "#999999", "#d62728")
    )
    chart = pygal.DateTimeLine(
        width=640,
        height=220,
        style=style,
        js=[],  # pygal's default tooltip script is fetched from the network: none
        disable_xml_declaration=True,
        show_dots=True,
        dots_size=2,
        legend_at_bottom=True,
        legend_box_size=10,
        x_label_rotation=20,
        truncate_label=-1,
        x_value_formatter=lambda d: d.strftime("%m-%d %H:%M"),
        include_x_axis=False,
        explicit_size=True,
    )
    points: list[tuple[datetime, ChangeRow | ProductRow]] = [
        (c.observed_at.astimezone(UTC), c) for c in sku.changes
    ]
    product = sku.product
    last = product.checked_at.astimezone(UTC)
    if not points or last > points[-1][0]:
        points.append((last, product))  # the latest offer, held since its last change
    # A price holds until the next change: steps, not slopes between changes.
    steps: list[tuple[datetime, ChangeRow | ProductRow]] = []
    for moment, row in points:
        if steps:
            steps.append((moment, steps[-1][1]))
        steps.append((moment, row))
    # Chart coordinates only (pygal scales its axes in floats); every amount the report
    # prints as text, and everything stored, stays the Decimal the store returned.
    price = [(t, float(row.price)) for t, row in steps]
    regular = [(t, None if r.regular_price is None else float(r.regular_price)) for t, r in steps]
    out = [(t, float(r.price) if in_stock(r.availability) is False else None) for t, r in steps]
    first, end = points[0][0], points[-1][0]
    if end > first:
        chart.x_labels = [first + (end - first) * i / 4 for i in range(5)]
    chart.add("price", price)
    if any(v is not None for _, v in regular):
        chart.add("list price", regular)
    if any(v is not None for _, v in out):
        chart.add("not in stock", out, stroke=False, dots_size=5)
    return _without_scripts(chart.render_tree())


def _without_scripts(tree: Any) -> str:
    """pygal always embeds its config as an inline ``<script>`` (read only by its tooltip
    JavaScript, which the report does not load); the report's Content-Security-Policy
    would refuse it, so it is removed: the charts are plain SVG."""
    from pygal.etree import etree

    for parent in list(tree.iter()):
        for child in list(parent):
            if isinstance(child.tag, str) and child.tag.rsplit("}", 1)[-1] == "script":
                parent.remove(child)
    return str(etree.tostring(tree, encoding="unicode"))


_CSS = """
body{font-family:sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;font-size:13px}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.sku{display:inline-block;vertical-align:top;margin:0 1em 1.5em 0;max-width:660px}
.sku h3{font-size:14px;margin:.2em 0;word-break:break-all}
.note{color:#555;font-size:13px;max-width:60em}
"""


def _table(
    header: Sequence[str], rows: Iterable[Sequence[str]], numeric: Collection[int] = ()
) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _domain_health(data: ReportData) -> str:
    now = data.generated_at
    by_domain: dict[str, list[ProductRow]] = defaultdict(list)
    for sku in data.skus:
        by_domain[sku.product.domain].append(sku.product)
    held: dict[str, Counter[str]] = defaultdict(Counter)
    domain_of = {s.product.url: s.product.domain for s in data.skus}
    for row in data.quarantine:
        held[domain_of.get(row.url, "")][row.status] += 1
    rows = []
    for domain in sorted(by_domain):
        products = by_domain[domain]
        ages = [(now - p.checked_at).total_seconds() for p in products]
        stock = Counter(in_stock(p.availability) for p in products)
        q = held.get(domain, Counter())
        rows.append(
            (
                _e(domain),
                str(len(products)),
                str(stock[True]),
                str(stock[False]),
                str(stock[None]),
                _age(statistics.median(ages)),
                _age(max(ages)),
                f"{q['held']} / {q['confirmed']} / {q['rejected']}",
            )
        )
    parts = [
        "<h2>Per-domain health</h2>",
        '<p class="note">From the store: the SKUs with a stored price, their stock state '
        "(stored availability), and the age of their stored prices (report time minus the "
        "last check, <code>products.checked_at</code>); quarantine rows are changes the "
        "store did not publish at once (held / confirmed / rejected).</p>",
        _table(
            ("domain", "SKUs", "in stock", "not in stock", "no stock data", "median age",
             "oldest", "quarantine h/c/r"),
            rows,
            numeric={1, 2, 3, 4, 5, 6},
        ),
    ]  # fmt: skip
    parts.append("<h3>Frontier</h3>")
    if data.frontier is None:
        parts.append(f'<p class="note">Not read: {_e(data.frontier_note)}</p>')
    else:
        parts.append(
            '<p class="note">From the frontier (<code>scrapy frontier</code>): entries per '
            "state now. Dead entries were given up after repeated failures; retired ones "
            "are gone from the shop.</p>"
        )
        parts.append(
            _table(
                ("domain", "due", "scheduled", "in flight", "retired", "dead"),
                (
                    (
                        _e(c.domain),
                        str(c.due),
                        str(c.scheduled),
                        str(c.inflight),
                        str(c.retired),
                        str(c.dead),
                    )
                    for c in data.frontier
                ),
                numeric={1, 2, 3, 4, 5},
            )
        )
    parts.append("<h3>Crawl runs</h3>")
    parts.append(
        '<p class="note">From the run records of <code>PRICEWATCH_STATS_FILE</code>. A run '
        "record counts every domain of the run together (it holds no per-domain counts): "
        "outcomes of each fetch, circuit-breaker openings (<code>pricewatch/breaker/opened"
        "</code>), HTTP 429 responses (<code>downloader/response_status_count/429</code>); "
        "the 429 rate is over every HTTP response (<code>downloader/response_count</code>, "
        "retries included); the no-price rate is no_price over fetched pages (skipped ones "
        "are not fetched). "
        f"{_e(data.runs_note)}</p>"
    )
    if data.runs:
        names = list(data.runs[0].outcomes)
        parts.append(
            _table(
                ("started", "host", "pid", "status", *names, "breaker openings", "429",
                 "429 rate", "no-price rate"),
                (
                    (_e(r.start_time), _e(r.host), _e(r.pid), _e(r.status),
                     *(str(r.outcomes.get(n, 0)) for n in names), str(r.breaker_opened),
                     str(r.responses_429), _pct(r.rate_429), _pct(r.no_price_rate))
                    for r in data.runs
                ),
                numeric=set(range(4, 4 + len(names) + 4)),
            )
        )  # fmt: skip
    return "\n".join(parts)


def render(data: ReportData) -> str:
    now = data.generated_at
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        # Nothing may leave the file: no script, no fetch, inline styles and images only.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">",
        "<title>pricewatch report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>pricewatch report</h1>",
        f'<p class="note">Generated {_e(_when(now))} UTC from the store {_e(data.store_url)}: '
        f"{len(data.skus)} SKUs.</p>",
    ]
    moves = movers(data.skus)
    parts.append("<h2>Biggest movers</h2>")
    parts.append(
        '<p class="note">From the first published price of each SKU to its latest one '
        "(same currency only), largest moves first.</p>"
    )
    parts.append(
        _table(
            ("SKU", "name", "domain", "first", "latest", "currency", "move"),
            (
                (
                    _e(m.product.sku or m.product.url),
                    _e(m.product.name),
                    _e(m.product.domain),
                    canonical_decimal(first),
                    canonical_decimal(m.product.price),
                    _e(m.product.currency),
                    f"{pct:+.1f} %",
                )
                for m, first, pct in moves
            ),
            numeric={3, 4, 6},
        )
    )
    parts.append(_domain_health(data))
    parts.append("<h2>Price history per SKU</h2>")
    parts.append(
        '<p class="note">Published changes (<code>price_changes</code>) up to the last check; '
        "red dots: the stored availability was not in stock.</p>"
    )
    for sku in data.skus:
        p = sku.product
        states: list[tuple[datetime, str]] = []
        rows: list[ChangeRow | ProductRow] = [*sku.changes, p]
        for c in rows:
            label = c.availability or "unknown"
            if not states or states[-1][1] != label:
                when = c.observed_at if isinstance(c, ChangeRow) else p.changed_at
                states.append((when, label))
        stock = ", ".join(f"{_e(label)} since {_e(_when(when))}" for when, label in states)
        parts.append(
            '<div class="sku">'
            f"<h3>{_e(p.sku or p.url)} · {_e(p.name)}</h3>"
            f'<p class="note">{_e(p.domain)} · latest {canonical_decimal(p.price)} {_e(p.currency)}'
            f" · checked {_e(_when(p.checked_at))} UTC · stock: {stock}</p>"
            f"{chart_svg(sku, now)}</div>"
        )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
