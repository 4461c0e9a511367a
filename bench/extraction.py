"""Score ``extract_offer`` on an annotated corpus of real product pages.

    .venv/bin/python bench/extraction.py [--corpus PATH] [--repeat N] [--failures]

The corpus is a directory with ``ground-truth.json`` and ``html/<key>.html.gz`` (the
product-extraction benchmark layout; default ``../shared/corpus/product-pages`` relative
to the repository). Scoring follows the benchmark: per attribute and page, a prediction
equal to one of the true values (prices compared as ``Decimal``) is a true positive, any
other prediction a false positive (and a false negative when a true value exists), no
prediction where a true value exists a false negative. The table shows F1, precision and
recall next to the published figures, then the median and p95 extraction time per page
and, in the same run, the median time lxml alone takes to parse the same pages.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import lxml.html

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pricewatch.extract import Offer, extract_offer  # noqa: E402

DEFAULT_CORPUS = REPO.parent / "shared" / "corpus" / "product-pages"
if not DEFAULT_CORPUS.exists():  # the copy kept with the tests
    DEFAULT_CORPUS = REPO / "tests" / "data" / "product-pages"
ATTRIBUTES = ("price", "availability", "sku")
# Published F1 on the whole benchmark (corpus README).
PUBLISHED = {
    "price": {"Zyte": 0.918, "Diffbot": 0.824, "extruct": 0.685},
    "availability": {"Zyte": 0.957, "Diffbot": 0.943, "extruct": 0.626},
    "sku": {"Zyte": 0.841, "Diffbot": 0.765, "extruct": 0.537},
}


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    misses: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def load_corpus(corpus: Path) -> list[tuple[str, dict[str, Any], bytes]]:
    truth = json.loads((corpus / "ground-truth.json").read_text(encoding="utf-8"))
    pages = []
    for key in sorted(truth):
        path = corpus / "html" / f"{key}.html.gz"
        pages.append((key, truth[key], gzip.decompress(path.read_bytes())))
    return pages


def _decimal(value: Any) -> Decimal | None:
    try:
        return Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        return None


def matches(attribute: str, predicted: Any, truths: list[Any]) -> bool:
    if attribute == "price":
        wanted = {_decimal(t) for t in truths}
        return _decimal(predicted) in wanted
    return str(predicted).strip() in {str(t).strip() for t in truths}


def prediction(offer: Offer | None, attribute: str) -> Any:
    if offer is None:
        return None
    return getattr(offer, attribute)


def score(
    pages: list[tuple[str, dict[str, Any], bytes]], offers: dict[str, Offer | None]
) -> dict[str, Score]:
    scores = {attribute: Score() for attribute in ATTRIBUTES}
    for key, truth, _ in pages:
        offer = offers[key]
        for attribute in ATTRIBUTES:
            result = scores[attribute]
            truths = truth.get(attribute) or []
            predicted = prediction(offer, attribute)
            if predicted is None:
                if truths:
                    result.fn += 1
                    result.misses.append(f"{key[:8]} {attribute}: none, want {truths}")
                continue
            if truths and matches(attribute, predicted, truths):
                result.tp += 1
                continue
            result.fp += 1
            if truths:
                result.fn += 1
            result.misses.append(
                f"{key[:8]} {attribute}: got {predicted!s} ({getattr(offer, 'source', '')}),"
                f" want {truths or 'none'}  {truth.get('url', '')[:60]}"
            )
    return scores


def run(
    corpus: Path, repeat: int = 3, clock_name: str = "cpu"
) -> tuple[dict[str, Score], dict[str, float]]:
    clock = time.process_time if clock_name == "cpu" else time.perf_counter
    pages = load_corpus(corpus)
    offers: dict[str, Offer | None] = {}
    extract_times: dict[str, float] = {}
    parse_times: dict[str, float] = {}
    for key, truth, body in pages:
        best_extract = best_parse = float("inf")
        for _ in range(repeat):
            start = clock()
            lxml.html.fromstring(body)
            best_parse = min(best_parse, clock() - start)
            start = clock()
            offer = extract_offer(body, truth.get("url", ""))
            best_extract = min(best_extract, clock() - start)
        offers[key] = offer
        extract_times[key] = best_extract
        parse_times[key] = best_parse
    ordered = sorted(extract_times.values())
    timing = {
        "pages": float(len(pages)),
        "extract_median_ms": statistics.median(ordered) * 1000,
        "extract_p95_ms": ordered[max(0, int(round(0.95 * len(ordered))) - 1)] * 1000,
        "parse_median_ms": statistics.median(parse_times.values()) * 1000,
    }
    return score(pages, offers), timing


def table(scores: dict[str, Score], timing: dict[str, float]) -> str:
    lines = [
        f"pricewatch extraction on {int(timing['pages'])} pages",
        "",
        "| attribute | F1 | precision | recall | TP/FP/FN | Zyte F1 | Diffbot F1 | extruct F1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for attribute, result in scores.items():
        ref = PUBLISHED[attribute]
        lines.append(
            f"| {attribute} | {result.f1:.3f} | {result.precision:.3f} | {result.recall:.3f}"
            f" | {result.tp}/{result.fp}/{result.fn} | {ref['Zyte']:.3f} | {ref['Diffbot']:.3f}"
            f" | {ref['extruct']:.3f} |"
        )
    ratio = timing["extract_median_ms"] / timing["parse_median_ms"]
    lines += [
        "",
        f"| time per page ({timing.get('clock', 'cpu')} clock, best of repeats) | ms |",
        "|---|---|",
        f"| extract_offer median | {timing['extract_median_ms']:.2f} |",
        f"| extract_offer p95 | {timing['extract_p95_ms']:.2f} |",
        f"| lxml parse alone, median | {timing['parse_median_ms']:.2f} |",
        f"| ratio extract/parse (medians) | {ratio:.2f}x |",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--repeat", type=int, default=3, help="timing runs per page (best kept)")
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu: process CPU time (steady on a shared machine); wall: elapsed time",
    )
    parser.add_argument("--failures", action="store_true", help="list every wrong or missed value")
    args = parser.parse_args(argv)
    scores, timing = run(args.corpus, max(1, args.repeat), args.clock)
    timing["clock"] = args.clock  # type: ignore[assignment]
    print(table(scores, timing))
    if args.failures:
        for attribute, result in scores.items():
            print(f"\n{attribute}:")
            for line in result.misses:
                print("  " + line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
