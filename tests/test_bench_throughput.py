"""``bench/throughput.py --quick`` runs and prints its lines (no timed assertion: the
figures are for people, ratios measured in one run)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .helpers import ROOT

pytestmark = pytest.mark.long


@pytest.mark.timeout(600)
def test_throughput_bench_runs_tiny_and_prints_its_ratios() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "throughput.py"), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for line in (
        "RATIO zero-latency pricewatch, SQLite (default):",
        "AUDIT cost:",
        "RATIO zero-latency pricewatch, Redis + PostgreSQL:",
        "RATIO latency:",
        "of the politeness ceiling",
        "CPU pricewatch, SQLite (default):",
        "peak RSS",
    ):
        assert line in out, out
