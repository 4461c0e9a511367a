"""Failed runs look failed: `scrapy crawl`'s exit code and the run record of
PRICEWATCH_STATS_FILE, on every exit path, with real crawls against real backends that
are stopped (a loopback port nothing listens on) or shops that refuse every connection.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from pricewatch.runs import ExitCode

from .helpers import scrapy, scrapy_env

STALE = {"status": "finished", "finish_reason": "finished", "exit_code": 0, "pid": 1}


def closed_port() -> int:
    """A loopback port nothing listens on (a stopped backend)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def record(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def assert_one_clear_failure(stderr: str, code: ExitCode, reason: str) -> None:
    assert "Traceback" not in stderr, stderr[-3000:]
    failed = [line for line in stderr.splitlines() if "Crawl failed" in line]
    assert len(failed) == 1, stderr[-3000:]
    assert f"exit code {int(code)}, {reason}" in failed[0]


def assert_run_fields(data: dict[str, Any], code: ExitCode) -> None:
    assert data["status"] == ("finished" if code is ExitCode.OK else "failed")
    assert data["exit_code"] == int(code)
    assert data["host"] == socket.gethostname()
    assert isinstance(data["pid"], int) and data["pid"] not in (1, os.getpid())
    assert data["start_time"] <= data["finish_time"]
    assert set(data["outcomes"]) == {"ok", "no_price", "blocked", "gone", "error", "skipped"}


@pytest.mark.parametrize(
    ("variable", "url", "code", "reason", "shown"),
    [
        pytest.param(
            "PRICEWATCH_STORE_URL",
            "postgresql://crawler:s3cret@127.0.0.1:{port}/prices",
            ExitCode.STORE_UNAVAILABLE,
            "store_unavailable",
            "postgresql://crawler:***@127.0.0.1:{port}/prices",
            id="store-postgresql",
        ),
        pytest.param(
            "PRICEWATCH_FRONTIER_URL",
            "redis://:s3cret@127.0.0.1:{port}/0",
            ExitCode.FRONTIER_UNAVAILABLE,
            "frontier_unavailable",
            "redis://:***@127.0.0.1:{port}/0",
            id="frontier-redis",
        ),
        pytest.param(
            "PRICEWATCH_FRONTIER_URL",
            "sqlite:////nonexistent-{port}/pricewatch.db",
            ExitCode.FRONTIER_UNAVAILABLE,
            "frontier_unavailable",
            "sqlite:////nonexistent-{port}/pricewatch.db",
            id="frontier-sqlite",
        ),
    ],
)
def test_backend_down_at_start_fails_with_one_line_and_its_record(
    tmp_path: Path, variable: str, url: str, code: ExitCode, reason: str, shown: str
) -> None:
    port = closed_port()
    stats = tmp_path / "missing" / "dir" / "stats.json"
    env = scrapy_env(
        tmp_path, **{variable: url.format(port=port)}, PRICEWATCH_STATS_FILE=str(stats)
    )
    proc = scrapy(tmp_path, "crawl", "products", env=env)
    assert proc.returncode == code, proc.stderr[-3000:]
    assert_one_clear_failure(proc.stderr, code, reason)
    assert shown.format(port=port) in proc.stderr
    assert "s3cret" not in proc.stderr + stats.read_text()
    data = record(stats)
    assert_run_fields(data, code)
    assert data["finish_reason"] == reason
    assert shown.format(port=port) in data["error"]
    assert data["pricewatch/run/error"] == data["error"]
    assert list(stats.parent.iterdir()) == [stats], "no temporary file left behind"


def test_a_run_failing_at_start_replaces_the_previous_runs_record(tmp_path: Path) -> None:
    stats = tmp_path / "stats.json"
    stats.write_text(json.dumps(STALE))
    env = scrapy_env(
        tmp_path, PRICEWATCH_STORE_URL=f"postgresql://root@127.0.0.1:{closed_port()}/x"
    )
    proc = scrapy(tmp_path, "crawl", "products", env=env)
    assert proc.returncode == ExitCode.STORE_UNAVAILABLE
    data = record(stats)
    assert data["status"] == "failed" and data["finish_reason"] == "store_unavailable"


def test_every_fetch_failing_exits_non_zero(tmp_path: Path) -> None:
    port = closed_port()
    (tmp_path / "seeds.txt").write_text(
        "".join(f"http://127.0.0.1:{port}/p/{i}\n" for i in range(3))
    )
    assert scrapy(tmp_path, "seed", "seeds.txt").returncode == 0
    proc = scrapy(tmp_path, "crawl", "products", "-s", "RETRY_TIMES=0")
    code = ExitCode.ALL_FETCHES_FAILED
    assert proc.returncode == code, proc.stderr[-3000:]
    failed = [line for line in proc.stderr.splitlines() if "Crawl failed" in line]
    assert failed and "every fetch failed: 0 blocked, 3 error" in failed[0]
    data = record(tmp_path / "stats.json")
    assert_run_fields(data, code)
    assert data["finish_reason"] == "finished"
    assert data["outcomes"]["error"] == 3 and data["outcomes"]["ok"] == 0


def test_a_run_with_nothing_due_is_a_success(tmp_path: Path) -> None:
    stats = tmp_path / "stats.json"
    stats.write_text(json.dumps({**STALE, "status": "failed", "exit_code": 5}))
    proc = scrapy(tmp_path, "crawl", "products")
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    assert "Crawl failed" not in proc.stderr
    data = record(stats)
    assert_run_fields(data, ExitCode.OK)
    assert data["finish_reason"] == "finished" and data["error"] is None


def test_overlapping_runs_keep_one_record_each(tmp_path: Path) -> None:
    template = str(tmp_path / "runs" / "%(name)s-%(time)s-%(pid)s.json")
    env = scrapy_env(tmp_path, PRICEWATCH_STATS_FILE=template)
    first = scrapy(tmp_path, "crawl", "products", env=env)
    second = scrapy(tmp_path, "crawl", "products", env=env)
    assert first.returncode == second.returncode == 0
    records = [record(p) for p in sorted((tmp_path / "runs").iterdir())]
    assert len(records) == 2
    assert len({r["pid"] for r in records}) == 2
    assert all(r["status"] == "finished" for r in records)


def test_a_shared_record_of_a_run_still_running_is_reported(tmp_path: Path) -> None:
    stats = tmp_path / "stats.json"
    # A run on this host, still alive (this test process), wrote the same file.
    stats.write_text(
        json.dumps({"status": "running", "pid": os.getpid(), "host": socket.gethostname()})
    )
    proc = scrapy(tmp_path, "crawl", "products")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"is also written by run {os.getpid()}, still running" in proc.stderr


def test_an_unusable_stats_file_template_is_a_setting_error(tmp_path: Path) -> None:
    env = scrapy_env(tmp_path, PRICEWATCH_STATS_FILE=str(tmp_path / "%(nope)s.json"))
    proc = scrapy(tmp_path, "crawl", "products", env=env)
    assert proc.returncode != 0
    assert "PRICEWATCH_STATS_FILE" in proc.stderr and "%(nope)s" in proc.stderr
    assert "Traceback" not in proc.stderr
