"""What one crawl run was, for cron and scrapyd monitoring: its exit code and its record.

``scrapy crawl`` exits with an :class:`ExitCode` that says whether the run worked, and
writes a :class:`RunRecord` to ``PRICEWATCH_STATS_FILE`` on every exit path: once when
the run starts (``"status": "running"``), once when it ends (``"finished"`` or
``"failed"``, the exit code, the finish reason, the one-line error, the outcome counts,
and every crawl stat). A run killed with SIGKILL leaves its ``running`` record, so a
stale record reads as what it is rather than as the previous run's success.

The path may hold ``%(name)s`` (spider), ``%(pid)s``, ``%(host)s`` and ``%(time)s`` (the
run's start, UTC, ``2026-01-31T10-00-00``), so that overlapping runs (cron, several
scrapyd processes on one node) each keep their own record. Records are written to a
temporary file in the same directory and renamed over the target (readers never see half
a file); a missing directory is created.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import CloseSpider

from pricewatch.outcomes import Outcome

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

ERROR_STAT = "pricewatch/run/error"
"""The one-line reason a crawl failed, set by the component that ended it."""


class ExitCode(IntEnum):
    """Exit codes of ``scrapy crawl products`` (documented in the README)."""

    OK = 0
    #: the crawl could not start or crashed (a start error, an unexpected exception)
    ERROR = 1
    #: bad command line (Scrapy's own code for it)
    USAGE = 2
    #: a setting has an invalid value
    SETTINGS = 3
    #: the frontier was unreachable
    FRONTIER_UNAVAILABLE = 4
    #: the store was unreachable (at start, or for longer than the outage timeout)
    STORE_UNAVAILABLE = 5
    #: pages were fetched and every one of them failed (``blocked`` or ``error``)
    ALL_FETCHES_FAILED = 6


#: Finish reasons of a run that did its job (the operator may have stopped it).
GOOD_REASONS = frozenset(
    {"finished", "shutdown", "closespider_timeout", "closespider_itemcount",
     "closespider_pagecount"}
)  # fmt: skip
_REASON_CODES = {
    "frontier_unavailable": ExitCode.FRONTIER_UNAVAILABLE,
    "store_unavailable": ExitCode.STORE_UNAVAILABLE,
    "invalid_setting": ExitCode.SETTINGS,
}
_FAILED = (Outcome.BLOCKED, Outcome.ERROR)


def outcome_counts(stats: Mapping[str, Any]) -> dict[str, int]:
    """``{"ok": 12, "error": 0, ...}``: every outcome, zeros included."""
    return {o.value: int(stats.get(f"pricewatch/outcome/{o.value}", 0)) for o in Outcome}


def all_fetches_failed(stats: Mapping[str, Any]) -> bool:
    """Pages were fetched (``skipped`` is not a fetch) and every one was blocked or failed."""
    counts = outcome_counts(stats)
    fetched = sum(n for name, n in counts.items() if name != Outcome.SKIPPED.value)
    failed = sum(counts[o.value] for o in _FAILED)
    return fetched > 0 and failed == fetched


def exit_code(finish_reason: str | None, stats: Mapping[str, Any]) -> ExitCode:
    if finish_reason in _REASON_CODES:
        return _REASON_CODES[finish_reason]
    if finish_reason not in GOOD_REASONS:
        return ExitCode.ERROR
    if all_fetches_failed(stats):
        return ExitCode.ALL_FETCHES_FAILED
    return ExitCode.OK


def failure_line(code: ExitCode, finish_reason: str | None, stats: Mapping[str, Any]) -> str:
    """One line saying why a run failed, for the log and the record."""
    error = stats.get(ERROR_STAT)
    if error:
        return str(error)
    if code is ExitCode.ALL_FETCHES_FAILED:
        counts = outcome_counts(stats)
        return (
            f"every fetch failed: {counts[Outcome.BLOCKED.value]} blocked, "
            f"{counts[Outcome.ERROR.value]} error"
        )
    return f"the crawl ended with finish reason {finish_reason}"


class RunRecord:
    """The record of one run, written to ``PRICEWATCH_STATS_FILE`` (see the module)."""

    def __init__(self, template: str, spider: str) -> None:
        self.pid = os.getpid()
        self.host = socket.gethostname()
        self.spider = spider
        self.start_time = datetime.now(UTC)
        fields = {
            "name": spider,
            "pid": self.pid,
            "host": self.host,
            "time": self.start_time.strftime("%Y-%m-%dT%H-%M-%S"),
        }
        try:
            self.path = Path(template % fields)
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(
                f"PRICEWATCH_STATS_FILE may use %(name)s, %(pid)s, %(host)s and %(time)s, "
                f"got {template!r} ({exc!r})"
            ) from exc
        self.done = False

    def started(self) -> None:
        self._warn_if_shared()
        self._write({"status": "running"})

    def finished(
        self,
        code: ExitCode,
        finish_reason: str | None,
        stats: Mapping[str, Any],
        error: str | None = None,
    ) -> None:
        if code is not ExitCode.OK and error is None:
            error = failure_line(code, finish_reason, stats)
        record: dict[str, Any] = dict(stats)
        record.update(
            status="finished" if code is ExitCode.OK else "failed",
            exit_code=int(code),
            finish_reason=finish_reason,
            error=error,
            outcomes=outcome_counts(stats),
            finish_time=datetime.now(UTC).isoformat(),
        )
        self._write(record)
        self.done = True

    def _write(self, fields: Mapping[str, Any]) -> None:
        record = dict(fields)
        record.update(
            pid=self.pid,
            host=self.host,
            spider=self.spider,
            start_time=self.start_time.isoformat(),
        )
        text = json.dumps(record, default=str, indent=1, sort_keys=True)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(
                dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp"
            )
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as file:
                    file.write(text)
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            logger.error("Could not write PRICEWATCH_STATS_FILE %s: %s", self.path, exc)

    def _warn_if_shared(self) -> None:
        """Another run still running on this host writes the same file: say so."""
        try:
            previous = json.loads(self.path.read_text(encoding="utf-8"))
            pid, host, status = previous["pid"], previous["host"], previous["status"]
        except (OSError, ValueError, KeyError, TypeError):
            return
        if status != "running" or host != self.host or pid == self.pid or not _alive(pid):
            return
        logger.warning(
            "PRICEWATCH_STATS_FILE %s is also written by run %s, still running: the last "
            "of the two to end keeps its record; put %%(pid)s or %%(time)s in the path to "
            "keep one record per run",
            self.path,
            pid,
        )


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class InvalidSetting(ValueError):
    """A setting's value is not allowed; the message names the setting, the value, what is
    allowed and where the value came from."""


def end_run(crawler: Crawler, reason: str, error: str) -> CloseSpider:
    """For a component that cannot work (a backend down at start): keep the one line that
    says why for the run's record and ``scrapy crawl``'s last log line, and return the
    ``CloseSpider`` to raise, which ends the crawl with ``reason`` as its finish reason
    (and so its exit code)."""
    assert crawler.stats is not None
    if not crawler.stats.get_value(ERROR_STAT):  # the first failure is the cause
        crawler.stats.set_value(ERROR_STAT, error)
    return CloseSpider(reason)
