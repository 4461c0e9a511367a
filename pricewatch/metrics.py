"""``Metrics``: Prometheus metrics of one crawl process (off by default).

Serves ``/metrics`` over HTTP from a thread of prometheus-client, on
``PRICEWATCH_METRICS_HOST`` (loopback by default: the page names the shops crawled) and the
first free port of ``PRICEWATCH_METRICS_PORT`` (a number, or a range ``9410-9417`` so that
the processes of one scrapyd node each find one). Exposed:

- ``pricewatch_outcomes_total{domain, outcome}``: fetches ended, per domain and outcome;
- ``pricewatch_breaker_open{domain}``: 1 while the domain's circuit is open or half-open;
- ``pricewatch_frontier_entries{domain, state}``: the frontier's entries (``due``,
  ``scheduled``, ``inflight``, ``retired``, ``dead``), refreshed every
  ``PRICEWATCH_METRICS_INTERVAL`` seconds (for the whole frontier, shared by every worker);
- ``pricewatch_frontier_next_due_seconds``: seconds until the next entry is due (0: work is
  waiting);
- ``pricewatch_leases_outstanding``: leases this process holds.

Settings: ``PRICEWATCH_METRICS_ENABLED``, ``PRICEWATCH_METRICS_HOST``,
``PRICEWATCH_METRICS_PORT``, ``PRICEWATCH_METRICS_INTERVAL``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from scrapy import signals
from scrapy.exceptions import NotConfigured

from pricewatch.frontier import Completion, FrontierUnavailable
from pricewatch.leases import CrawlResources, leases_completed
from pricewatch.politeness.breaker import CircuitBreakerMiddleware, State

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

_STATES = ("due", "scheduled", "inflight", "retired", "dead")


def port_range(value: str) -> range:
    """``"9410"`` or ``"9410-9417"`` as the ports to try, in order."""
    text = str(value).strip()
    low, _, high = text.partition("-")
    try:
        first, last = int(low), int(high or low)
    except ValueError:
        first, last = -1, -1
    if not 1 <= first <= last <= 65535:
        raise ValueError(
            f"PRICEWATCH_METRICS_PORT must be a port or a range like 9410-9417, got {value!r}"
        )
    return range(first, last + 1)


class Metrics:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("PRICEWATCH_METRICS_ENABLED"):
            raise NotConfigured
        self.host = settings.get("PRICEWATCH_METRICS_HOST")
        self.ports = port_range(settings.get("PRICEWATCH_METRICS_PORT"))
        self.interval = settings.getfloat("PRICEWATCH_METRICS_INTERVAL")
        if self.interval <= 0:
            raise ValueError(f"PRICEWATCH_METRICS_INTERVAL must be > 0, got {self.interval}")
        self.crawler = crawler
        self.registry = CollectorRegistry()
        self.outcomes = Counter(
            "pricewatch_outcomes",
            "Fetches ended, per domain and outcome",
            ["domain", "outcome"],
            registry=self.registry,
        )
        self.breaker_open = Gauge(
            "pricewatch_breaker_open",
            "1 while the domain's circuit is open or half-open in this process",
            ["domain"],
            registry=self.registry,
        )
        self.entries = Gauge(
            "pricewatch_frontier_entries",
            "Frontier entries per domain and state (the whole frontier)",
            ["domain", "state"],
            registry=self.registry,
        )
        self.next_due = Gauge(
            "pricewatch_frontier_next_due_seconds",
            "Seconds until the next frontier entry is due (0: work is waiting)",
            registry=self.registry,
        )
        self.outstanding = Gauge(
            "pricewatch_leases_outstanding",
            "Leases this process holds (claimed, not completed)",
            registry=self.registry,
        )
        self.address: tuple[str, int] | None = None
        self._server: WSGIServer | None = None
        self._task: asyncio.Task[None] | None = None
        crawler.signals.connect(self.engine_started, signal=signals.engine_started)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(self.completed, signal=leases_completed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Metrics:
        return cls(crawler)

    def engine_started(self) -> None:
        if self.listen() is not None:
            self._task = asyncio.get_running_loop().create_task(self._refresh_loop())

    def listen(self) -> tuple[str, int] | None:
        """Serve /metrics on the first free port of the range; None if none is free."""
        for port in self.ports:
            try:
                self._server, _ = start_http_server(port, self.host, registry=self.registry)
            except OSError:
                continue
            self.address = (self.host, port)
            logger.info("Prometheus metrics on http://%s:%d/metrics", self.host, port)
            return self.address
        logger.error(
            "No free port for the Prometheus metrics in %s-%s on %s: metrics are off",
            self.ports.start,
            self.ports.stop - 1,
            self.host,
        )
        return None

    def spider_closed(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def completed(self, completions: Sequence[Completion], **kwargs: Any) -> None:
        for completion in completions:
            self.outcomes.labels(completion.lease.domain, completion.outcome.value).inc()

    async def _refresh_loop(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.interval)

    async def refresh(self) -> None:
        resources = CrawlResources.of(self.crawler)
        self.outstanding.set(resources.outstanding)
        try:
            breaker = self.crawler.get_downloader_middleware(CircuitBreakerMiddleware)
        except RuntimeError:  # no engine yet
            breaker = None
        if breaker is not None:
            for domain, circuit in list(breaker.circuits.items()):
                self.breaker_open.labels(domain).set(int(circuit.state is not State.CLOSED))
        try:
            frontier = await resources.frontier()
            counts = await frontier.counts()
            due_in = await frontier.next_due_in()
        except FrontierUnavailable as exc:
            logger.debug("Metrics: frontier unavailable: %s", exc)
            return
        for row in counts:
            for state in _STATES:
                self.entries.labels(row.domain, state).set(getattr(row, state))
        if due_in is not None:
            self.next_due.set(due_in)
