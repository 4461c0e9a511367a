"""The audit trail: every fetch decision of a crawl, as JSON lines, to reconstruct later
why a SKU was (or was not) fetched, retried, deferred or stored.

One record per decision, in the order they were taken, each with ``t`` (ISO-8601 UTC),
``event``, the worker (``host``, ``pid``), the crawl's ``config`` version
(:mod:`pricewatch.configversion`), the SKU (``url`` as scheduled, ``sku``, ``domain``,
``lease`` token), and for a request's decisions ``session`` and ``proxy`` (the ids of the
session and proxy it went out with, ``Request.meta["pricewatch_session"]`` and
``["pricewatch_proxy"]``; null without sessions). Events:

=============== ==========================================================================
``claimed``     the lease was handed to this worker (``attempts``)
``response``    a download answered: ``status``, ``resolved_url`` (after redirects),
                ``retry_after`` (seconds the shop asked for, if any)
``error``       a download failed: ``error`` (the exception's class)
``retry``       the retry middleware will send it again: ``delay`` (s), ``retry_after``
                honoured (s, when the shop asked), ``status``; ``to_frontier`` when the
                wait outlives the lease and the frontier reschedules it
``deferred``    the circuit breaker deferred it: ``why``, ``retry_after`` (s)
``breaker``     this request's block opened the domain's circuit: ``cooldown`` (s)
``fallback``    the domain's official source is used instead: ``source_host``
``stored``      the store's verdict: ``status`` (``changed``, ``unchanged``, ``held``,
                ``rejected``), ``reason``, ``price``, ``currency``, ``raw_hash``
``outcome``     the lease's one final outcome: ``outcome``, ``reason``, ``retry_after``,
                ``confirm_in``, ``changed``, and ``resolved_url``, ``raw_hash``, ``price``,
                ``currency`` when known
=============== ==========================================================================

Every lease of a crawl ends with exactly one ``outcome`` record (leases completed through
:class:`pricewatch.leases.CrawlResources`). Secrets and personal data are never written:
the user info of URLs and the values of query parameters named like a secret or personal
data (``password``, ``token``, ``key``, ``session``, ``auth``, ``sig``, ``mail``,
``phone``, ``tel``...) are replaced by ``***``, e-mail addresses in URLs and SKUs are
masked (a product's own path and parameters are kept, so the URL stays recognisable), and
no header, cookie, body or name is recorded.

Records are kept in memory as small tuples and written in batches by one worker thread
every ``PRICEWATCH_AUDIT_FLUSH_INTERVAL`` seconds (serialised there, off the event loop);
more than ``PRICEWATCH_AUDIT_MAX_BUFFER`` waiting records are dropped and counted
(``pricewatch/audit/dropped``) rather than grow memory while a disk stalls. The file
(``PRICEWATCH_AUDIT_FILE``; empty: off; ``%(name)s``, ``%(pid)s``, ``%(host)s`` as in
``PRICEWATCH_STATS_FILE``) is rotated when it reaches ``PRICEWATCH_AUDIT_MAX_BYTES`` or the
UTC day changes: renamed to ``<file>.<UTC time>``, keeping the newest
``PRICEWATCH_AUDIT_KEEP`` rotated files. ``scrapy audit SKU|URL [--since]`` reads them.

Stats: ``pricewatch/audit/records``, ``pricewatch/audit/dropped``,
``pricewatch/audit/write_failed``, ``pricewatch/audit/rotated``.
"""

from __future__ import annotations

import asyncio
import glob
import json
import logging
import os
import re
import socket
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_plus

from scrapy import signals
from scrapy.exceptions import NotConfigured

from pricewatch._crawl import per_crawl
from pricewatch._http import parse_retry_after
from pricewatch.configversion import ConfigVersion
from pricewatch.leases import leases_claimed, leases_completed
from pricewatch.meta import LEASE_META, PROXY_META, SESSION_META

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from pricewatch.frontier import Completion, Lease
    from pricewatch.storage import Observation

logger = logging.getLogger(__name__)

STATS = (
    "pricewatch/audit/records",
    "pricewatch/audit/dropped",
    "pricewatch/audit/write_failed",
    "pricewatch/audit/rotated",
)
CLOSE_TIMEOUT = 10.0
# Query parameters whose value is never written (matched on the name, case-insensitively).
_SECRET_NAME = re.compile(
    r"(?i)pass|pwd|secret|token|key|auth|session|sid|sig|credential|code|mail|phone|tel|mobile"
)
_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@]*@")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def safe_url(url: str | None) -> str | None:
    """``url`` with its user info, the values of secret-looking or personal query
    parameters and any e-mail address masked; the rest (host, path, other parameters)
    as it was, so that a product URL stays recognisable."""
    if not url:
        return url
    url = _USERINFO.sub(r"\1***@", url)
    base, question, rest = url.partition("?")
    base = _EMAIL.sub("[email]", base)
    if not question:
        return base
    query, hash_, fragment = rest.partition("#")
    parts = []
    for part in re.split(r"([&;])", query):
        name, equals, value = part.partition("=")
        if equals and (_SECRET_NAME.search(name) or _EMAIL.search(unquote_plus(value))):
            value = "***"
        parts.append(name + equals + value)
    return f"{base}?{''.join(parts)}{hash_}{_EMAIL.sub('[email]', fragment)}"


def audit_path(template: str, spider: str) -> Path:
    fields = {"name": spider, "pid": os.getpid(), "host": socket.gethostname()}
    try:
        return Path(template % fields)
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(
            f"PRICEWATCH_AUDIT_FILE may use %(name)s, %(pid)s and %(host)s, got {template!r}"
        ) from exc


def audit_files(template: str) -> list[Path]:
    """Every audit file of ``template`` (any spider, pid, host; rotated ones too)."""
    pattern = template.replace("%(name)s", "*").replace("%(pid)s", "*").replace("%(host)s", "*")
    found = set(glob.glob(glob.escape(pattern).replace(r"[*]", "*")))
    found |= set(glob.glob(glob.escape(pattern).replace(r"[*]", "*") + ".*"))
    return sorted(Path(p) for p in found)


# A record as kept in memory: (epoch time, event, lease or None, fields).
_Record = tuple[float, str, "Lease | None", dict[str, Any]]


class _Writer:
    """Appends lines to the audit file and rotates it; runs on one worker thread."""

    def __init__(self, path: Path, max_bytes: int, keep: int, common: dict[str, Any]) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.keep = keep
        self.common = common
        self.rotated = 0
        self._day: str | None = None

    def write(self, records: Sequence[_Record]) -> None:
        lines = []
        for when, event, lease, fields in records:
            moment = datetime.fromtimestamp(when, UTC)
            record: dict[str, Any] = {
                "t": moment.isoformat(timespec="microseconds"),
                "event": event,
                **self.common,
            }
            if lease is not None:
                record.update(
                    url=safe_url(lease.url),
                    sku=None if lease.sku is None else _EMAIL.sub("[email]", lease.sku),
                    domain=lease.domain,
                    lease=lease.token,
                )
            for name, value in fields.items():
                record[name] = safe_url(value) if name.endswith("url") else value
            lines.append(json.dumps(record, default=str, separators=(",", ":")))
        data = ("\n".join(lines) + "\n").encode("utf-8")
        self._rotate_if_due(len(data))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as handle:
            handle.write(data)

    def _rotate_if_due(self, incoming: int) -> None:
        today = datetime.now(UTC).strftime("%Y-%m-%d")
        day, self._day = self._day, today
        try:
            size = self.path.stat().st_size
            started = datetime.fromtimestamp(self.path.stat().st_mtime, UTC).strftime("%Y-%m-%d")
        except FileNotFoundError:
            return
        if size + incoming <= self.max_bytes and started == today and day in (None, today):
            return
        if size == 0:
            return
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%f")
        self.path.rename(self.path.with_name(f"{self.path.name}.{stamp}"))
        self.rotated += 1
        old = sorted(glob.glob(glob.escape(str(self.path)) + ".*"))
        for stale in old[: max(0, len(old) - self.keep)]:
            Path(stale).unlink(missing_ok=True)


class AuditTrail:
    """The crawl's audit trail (an extension; components record through
    ``AuditTrail.of(crawler)``, which is a no-op when it is off)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        settings = crawler.settings
        template = settings.get("PRICEWATCH_AUDIT_FILE") or ""
        self.enabled = bool(template)
        self._records: list[_Record] = []
        self._last_url: dict[str, str] = {}  # lease token -> last resolved URL
        self._stored: dict[str, dict[str, Any]] = {}  # lease token -> store verdict
        self._task: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._closing = False
        if not self.enabled:
            return
        self.flush_interval = settings.getfloat("PRICEWATCH_AUDIT_FLUSH_INTERVAL")
        self.max_buffer = settings.getint("PRICEWATCH_AUDIT_MAX_BUFFER")
        max_bytes = settings.getint("PRICEWATCH_AUDIT_MAX_BYTES")
        keep = settings.getint("PRICEWATCH_AUDIT_KEEP")
        for name, value, low in (
            ("PRICEWATCH_AUDIT_FLUSH_INTERVAL", self.flush_interval, 0.01),
            ("PRICEWATCH_AUDIT_MAX_BUFFER", self.max_buffer, 1),
            ("PRICEWATCH_AUDIT_MAX_BYTES", max_bytes, 1024),
            ("PRICEWATCH_AUDIT_KEEP", keep, 0),
        ):
            if value < low:
                raise ValueError(f"{name} must be >= {low}, got {value}")
        common = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "config": ConfigVersion.of(crawler).value,
        }
        spider = crawler.spidercls.name if crawler.spidercls else "crawl"
        self.path = audit_path(template, spider)
        self._writer = _Writer(self.path, max_bytes, keep, common)
        crawler.signals.connect(self.engine_started, signal=signals.engine_started)
        # Connected before the middlewares are built: recorded before the circuit breaker
        # counts the same response as a block (its own response_downloaded handler).
        crawler.signals.connect(self.response_downloaded, signal=signals.response_downloaded)
        crawler.signals.connect(self.claimed, signal=leases_claimed)
        crawler.signals.connect(self.completed, signal=leases_completed)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def of(cls, crawler: Crawler) -> AuditTrail:
        return per_crawl(crawler, cls)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AuditTrail:
        trail = cls.of(crawler)
        if not trail.enabled:
            raise NotConfigured  # PRICEWATCH_AUDIT_FILE is empty (the default): no warning
        return trail

    # -- recording (on the event loop; cheap: one tuple per decision) ----------------------

    def record(self, event: str, lease: Lease | None, **fields: Any) -> None:
        if not self.enabled:
            return
        if len(self._records) >= self.max_buffer:
            assert self.crawler.stats is not None
            self.crawler.stats.inc_value("pricewatch/audit/dropped")
            return
        self._records.append((time.time(), event, lease, fields))

    def decision(self, request: Request, event: str, **fields: Any) -> None:
        """Record a decision about ``request`` (its lease's, if it has one)."""
        if not self.enabled:
            return
        lease = request.meta.get(LEASE_META)
        self.record(
            event,
            lease,
            session=request.meta.get(SESSION_META),
            proxy=request.meta.get(PROXY_META),
            **fields,
        )

    def response_downloaded(self, response: Response, request: Request, **kwargs: Any) -> None:
        """``response_downloaded`` signal: every response as it arrives."""
        lease = request.meta.get(LEASE_META)
        if lease is not None:
            self._last_url[lease.token] = response.url
        self.decision(
            request,
            "response",
            status=response.status,
            resolved_url=response.url,
            retry_after=parse_retry_after(response.headers.get(b"Retry-After")),
        )

    def stored(
        self, lease: Lease, observation: Observation, status: str, reason: str | None
    ) -> None:
        if not self.enabled:
            return
        verdict = {
            "status": status,
            "reason": reason,
            "price": str(observation.price),
            "currency": observation.currency,
            "raw_hash": observation.raw_hash,
        }
        self._stored[lease.token] = verdict
        self.record("stored", lease, **verdict)

    def claimed(self, leases: Sequence[Lease]) -> None:
        for lease in leases:
            self.record("claimed", lease, attempts=lease.attempts)

    def completed(self, completions: Sequence[Completion]) -> None:
        for completion in completions:
            token = completion.lease.token
            verdict = self._stored.pop(token, {})
            self.record(
                "outcome",
                completion.lease,
                outcome=completion.outcome.value,
                reason=completion.reason or verdict.get("reason"),
                retry_after=completion.retry_after,
                confirm_in=completion.confirm_in,
                changed=completion.changed,
                resolved_url=self._last_url.pop(token, None),
                raw_hash=verdict.get("raw_hash"),
                price=verdict.get("price"),
                currency=verdict.get("currency"),
            )

    # -- writing (one worker thread, in batches) -------------------------------------------

    def engine_started(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pricewatch-audit")
        self._task = asyncio.get_running_loop().create_task(self._flush_loop())
        logger.info("Audit trail: %s", self.path)

    async def _flush_loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.flush_interval)
            await self.flush()

    async def flush(self) -> None:
        records, self._records = self._records, []
        if not records or self._executor is None:
            return
        stats = self.crawler.stats
        assert stats is not None
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._writer.write, records)
        except (OSError, ValueError, TypeError) as exc:
            stats.inc_value("pricewatch/audit/write_failed", len(records))
            logger.warning(
                "Could not write %d audit records to %s: %s", len(records), self.path, exc
            )
            return
        stats.inc_value("pricewatch/audit/records", len(records))
        stats.set_value("pricewatch/audit/rotated", self._writer.rotated)

    async def spider_closed(self) -> None:
        # Sent after the pipelines closed: the last outcomes are recorded.
        self._closing = True
        if self._task is not None:
            self._task.cancel()
        try:
            await asyncio.wait_for(self.flush(), CLOSE_TIMEOUT)
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=False)


def read_records(paths: Sequence[Path]) -> Iterator[dict[str, Any]]:
    """The records of the audit files, file by file (unreadable lines skipped)."""
    for path in paths:
        try:
            handle = open(path, encoding="utf-8", errors="replace")
        except OSError:
            continue
        with handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    yield record


class AuditMiddleware:
    """Downloader middleware (next to the download, after retries and the breaker in
    ``DOWNLOADER_MIDDLEWARES``): records every download error as it comes (responses are
    recorded from the ``response_downloaded`` signal)."""

    def __init__(self, crawler: Crawler) -> None:
        self.trail = AuditTrail.of(crawler)
        if not self.trail.enabled:
            raise NotConfigured  # PRICEWATCH_AUDIT_FILE is empty (the default): no warning

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AuditMiddleware:
        return cls(crawler)

    def process_exception(self, request: Request, exception: Exception) -> None:
        self.trail.decision(request, "error", error=type(exception).__name__)
