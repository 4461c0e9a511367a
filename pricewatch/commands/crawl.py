"""``scrapy crawl``: Scrapy's command, with an exit code that says whether the run worked.

Scrapy's own ``crawl`` exits 0 whenever the spider got as far as opening, whatever happened
next. This one exits with a :class:`pricewatch.runs.ExitCode` (0 worked; 1 could not start
or crashed; 3 invalid setting; 4 frontier unreachable; 5 store unreachable; 6 every fetch
failed), logs one ERROR line saying why when it is not 0, and makes sure
``PRICEWATCH_STATS_FILE`` holds this run's final record on every exit path, a failure to
start included. scrapyd runs jobs through ``scrapy crawl`` too, so its jobs get the same.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.exceptions import UsageError
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from pricewatch.commands._output import use_help_formatter
from pricewatch.extensions import StatsFile
from pricewatch.runs import ExitCode, RunRecord, exit_code, failure_line
from pricewatch.startup import as_setting_error, check_settings

if TYPE_CHECKING:
    import argparse

    from scrapy.crawler import Crawler

logger = logging.getLogger("pricewatch.crawl")


class Command(ScrapyCrawlCommand):
    def long_desc(self) -> str:
        return (
            "Run a spider of the project. Exit codes: 0 the run worked; 1 it could not start "
            "or crashed; 2 bad command line; 3 invalid setting; 4 frontier unreachable; "
            "5 store unreachable; 6 every fetch failed (blocked or error)."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        use_help_formatter(parser)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) < 1:
            raise UsageError
        if len(args) > 1:
            raise UsageError("running 'scrapy crawl' with more than one spider is not supported")
        assert self.crawler_process is not None
        errors: list[BaseException] = []
        crawler: Crawler | None = None
        assert self.settings is not None
        try:
            check_settings(self.settings)  # before anything is built from them
            crawler = self._create_crawler(args[0])
            started = self.crawler_process.crawl(crawler, **opts.spargs)
            _collect_errors(started, errors)
            self.crawler_process.start()
        except Exception as exc:
            errors.append(exc)
        self.exitcode = int(self._conclude(args[0], crawler, errors))

    def _conclude(
        self, spider: str, crawler: Crawler | None, errors: list[BaseException]
    ) -> ExitCode:
        stats: dict[str, Any] = {}
        if crawler is not None and crawler._stats is not None:
            stats = dict(crawler._stats.get_stats())
        reason = stats.get("finish_reason")
        error: str | None = None
        if errors:
            exc = errors[0]
            assert self.settings is not None
            setting_error = as_setting_error(exc, crawler.settings if crawler else self.settings)
            code = ExitCode.SETTINGS if setting_error else ExitCode.ERROR
            error = str(setting_error or exc) or type(exc).__name__
            reason = reason or ("invalid_setting" if setting_error else "start_error")
            logger.debug("The crawl could not start", exc_info=exc)
        else:
            code = exit_code(reason, stats)
            if code is not ExitCode.OK:
                error = failure_line(code, reason, stats)
        if error is not None:
            logger.error("Crawl failed (exit code %d, %s): %s", code, reason, error)
        self._write_record(spider, crawler, code, reason, stats, error)
        return code

    def _write_record(
        self,
        spider: str,
        crawler: Crawler | None,
        code: ExitCode,
        reason: str | None,
        stats: dict[str, Any],
        error: str | None,
    ) -> None:
        extension = None
        if crawler is not None and crawler._extensions is not None:
            extension = crawler.get_extension(StatsFile)
        if extension is not None:
            extension.reason = reason
            extension.finish(code, error)
            return
        assert self.settings is not None
        template = self.settings.get("PRICEWATCH_STATS_FILE")
        if not template:
            return
        try:
            record = RunRecord(template, spider)
        except ValueError as exc:
            logger.error("%s", exc)
            return
        record.finished(code, reason, stats, error)


def _collect_errors(started: object, errors: list[BaseException]) -> None:
    """Keep the exception a crawl failed with (instead of the event loop printing it as
    "never retrieved", with its traceback, when the process exits)."""
    if isinstance(started, asyncio.Future):

        def done(task: asyncio.Future[Any]) -> None:
            if not task.cancelled() and task.exception() is not None:
                errors.append(task.exception())  # type: ignore[arg-type]

        started.add_done_callback(done)
    elif isinstance(started, Deferred):

        def failed(failure: Failure) -> None:
            errors.append(failure.value)

        started.addErrback(failed)
