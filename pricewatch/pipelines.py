"""Item pipelines: validate, then store in batches and acknowledge the leases.

Defaults of the settings below, and when to change them: ``pricewatch/settings.py``.

``ValidationPipeline`` settings:
- ``PRICEWATCH_VALIDATE_MAX_PRICE``: prices above are dropped as absurd.
- ``PRICEWATCH_VALIDATE_BATCH_SIZE``: items validated per executor hop.
- ``PRICEWATCH_VALIDATE_MAX_WAIT``: how long an item waits for its batch to fill.

``StorePipeline`` settings:
- ``PRICEWATCH_STORE_URL``: the store backend.
- ``PRICEWATCH_BATCH_SIZE``: observations per write (one transaction).
- ``PRICEWATCH_FLUSH_INTERVAL``: a partial batch is written after this long.
- ``PRICEWATCH_STORE_MAX_BUFFER``: observations held while the store is down;
  when full, ``process_item`` waits, so the spider stops claiming new work.
- ``PRICEWATCH_STORE_RETRY_MAX_DELAY``: cap of the exponential backoff between
  write attempts while the store is unreachable.
- ``PRICEWATCH_STORE_CLOSE_TIMEOUT``: how long closing the crawl keeps retrying
  the last writes; what is still unwritten then is not acknowledged, so its leases
  expire and the SKUs are fetched again (nothing is lost).
- ``PRICEWATCH_STORE_OUTAGE_TIMEOUT``: a store unreachable for longer ends the
  crawl with finish reason ``store_unavailable`` instead of hanging a cron job; the
  buffered observations are not acknowledged (fetched again by the next run).
- ``PRICEWATCH_QUARANTINE_*`` (see :mod:`pricewatch.quarantine`): the store holds a
  suspicious change unpublished; its lease completes as ``ok`` with ``confirm_in`` =
  ``PRICEWATCH_QUARANTINE_CONFIRM_DELAY``, so the frontier fetches the SKU again soon.
  Stats ``pricewatch/quarantine/held`` (and ``.../held/<reason>``),
  ``pricewatch/quarantine/confirmed``, ``pricewatch/quarantine/rejected``.
- ``PRICEWATCH_ALERT_*`` (see :mod:`pricewatch.alerts`): after each commit, the changes
  the batch inserted are matched against the alert rules and delivered in the background.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Generic, TypeVar

from scrapy.exceptions import DropItem, NotConfigured

from pricewatch.alerts import Alerter
from pricewatch.audit import AuditTrail
from pricewatch.configversion import ConfigVersion
from pricewatch.drift import DriftMonitor
from pricewatch.frontier import Completion, FrontierUnavailable
from pricewatch.items import ObservationItem, OfferItem
from pricewatch.leases import CrawlResources
from pricewatch.outcomes import Outcome
from pricewatch.runs import ERROR_STAT, end_run
from pricewatch.storage import (
    Observation,
    Store,
    StoreUnavailable,
    WriteResult,
    store_from_settings,
)
from pricewatch.validation import InvalidOffer, validate_batch

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class BatchOffloader(Generic[T, R]):
    """Runs ``func(batch)`` in a worker thread, one hop per batch.

    ``await submit(x)`` returns ``func``'s result for ``x``. A batch runs when it is full
    or ``max_wait`` seconds after its first item arrived, whichever comes first.
    """

    def __init__(
        self, func: Callable[[list[T]], list[R]], batch_size: int, max_wait: float
    ) -> None:
        self.func = func
        self.batch_size = batch_size
        self.max_wait = max_wait
        self._items: list[T] = []
        self._futures: list[asyncio.Future[R]] = []
        self._timer: asyncio.TimerHandle | None = None
        self.hops = 0

    async def submit(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._items.append(item)
        self._futures.append(future)
        if len(self._items) >= self.batch_size:
            self._run()
        elif self._timer is None:
            self._timer = loop.call_later(self.max_wait, self._run)
        return await future

    def _run(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        items, futures = self._items, self._futures
        self._items, self._futures = [], []
        if items:
            self.hops += 1
            asyncio.get_running_loop().create_task(self._offload(items, futures))

    async def _offload(self, items: list[T], futures: list[asyncio.Future[R]]) -> None:
        try:
            results = await asyncio.to_thread(self.func, items)
        except BaseException as exc:  # the worker failed: every waiter sees why
            for future in futures:
                if not future.done():
                    future.set_exception(exc)
            return
        for future, result in zip(futures, results, strict=True):
            if not future.done():
                future.set_result(result)


async def _open_frontier(crawler: Crawler, resources: CrawlResources) -> None:
    """Open the crawl's frontier, or end the crawl (``frontier_unavailable``) at once."""
    try:
        await resources.frontier()
    except FrontierUnavailable as exc:
        raise end_run(crawler, "frontier_unavailable", str(exc)) from exc


class ValidationPipeline:
    """Checks every offer against the pydantic contract, off the event loop in batches.

    Invalid offers are dropped (``DropItem`` with the reason, stat
    ``pricewatch/validate/dropped/<reason>``) and their lease is completed as
    ``no_price``. Valid ones continue as :class:`ObservationItem`.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.resources = CrawlResources.of(crawler)
        settings = crawler.settings
        raw_max = settings.get("PRICEWATCH_VALIDATE_MAX_PRICE")
        try:
            self.max_price = Decimal(str(raw_max))
        except InvalidOperation:
            self.max_price = Decimal("NaN")
        if not self.max_price.is_finite() or self.max_price <= 0:
            raise ValueError(
                f"PRICEWATCH_VALIDATE_MAX_PRICE must be a positive number, got {raw_max!r}"
            )
        batch_size = settings.getint("PRICEWATCH_VALIDATE_BATCH_SIZE")
        if batch_size < 1:
            raise ValueError(f"PRICEWATCH_VALIDATE_BATCH_SIZE must be >= 1, got {batch_size}")
        max_wait = settings.getfloat("PRICEWATCH_VALIDATE_MAX_WAIT")
        # Stored with every observation: the configuration that produced it.
        self.config_version = ConfigVersion.of(crawler).value
        self.offloader: BatchOffloader[OfferItem, Observation | InvalidOffer] = BatchOffloader(
            self._validate, batch_size, max_wait
        )

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ValidationPipeline:
        return cls(crawler)

    def _validate(self, items: list[OfferItem]) -> list[Observation | InvalidOffer]:
        return validate_batch(items, self.max_price, self.config_version)

    async def open_spider(self) -> None:
        # Open the frontier here so that an unreachable backend fails the crawl at once
        # with a non-zero exit, before anything is fetched.
        await _open_frontier(self.crawler, self.resources)

    async def process_item(self, item: object) -> object:
        if not isinstance(item, OfferItem):
            return item
        result = await self.offloader.submit(item)
        stats = self.crawler.stats
        assert stats is not None
        if isinstance(result, InvalidOffer):
            stats.inc_value(f"pricewatch/validate/dropped/{result.reason}")
            if item.lease is not None:
                await self.resources.complete(
                    [Completion(item.lease, Outcome.NO_PRICE, reason=f"invalid_{result.reason}")]
                )
            raise DropItem(f"invalid offer ({result.reason}): {result.detail}")
        stats.inc_value("pricewatch/validate/passed")
        return ObservationItem(result, item.lease)


class _StoreGaveUp(Exception):
    pass


class StorePipeline:
    """Writes observations in batches and acknowledges their leases after the commit.

    A batch that cannot be written because the store is unreachable is retried with
    exponential backoff and full jitter; meanwhile observations keep buffering up to
    ``PRICEWATCH_STORE_MAX_BUFFER``, after which ``process_item`` waits (backpressure:
    the spider claims nothing new). Rows the store rejects are counted per reason
    (``pricewatch/store/rejected/<reason>``) and their leases completed as ``no_price``.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.resources = CrawlResources.of(crawler)
        settings = crawler.settings
        self.batch_size = settings.getint("PRICEWATCH_BATCH_SIZE")
        self.flush_interval = settings.getfloat("PRICEWATCH_FLUSH_INTERVAL")
        self.max_buffer = settings.getint("PRICEWATCH_STORE_MAX_BUFFER")
        self.retry_max_delay = settings.getfloat("PRICEWATCH_STORE_RETRY_MAX_DELAY")
        self.close_timeout = settings.getfloat("PRICEWATCH_STORE_CLOSE_TIMEOUT")
        self.outage_timeout = settings.getfloat("PRICEWATCH_STORE_OUTAGE_TIMEOUT")
        for name, value, low in (
            ("PRICEWATCH_BATCH_SIZE", self.batch_size, 1),
            ("PRICEWATCH_FLUSH_INTERVAL", self.flush_interval, 0.01),
            ("PRICEWATCH_STORE_RETRY_MAX_DELAY", self.retry_max_delay, 0.01),
            ("PRICEWATCH_STORE_CLOSE_TIMEOUT", self.close_timeout, 0),
            ("PRICEWATCH_STORE_OUTAGE_TIMEOUT", self.outage_timeout, 0.01),
        ):
            if value < low:
                raise ValueError(f"{name} must be >= {low}, got {value}")
        if self.max_buffer < self.batch_size:
            raise ValueError(
                f"PRICEWATCH_STORE_MAX_BUFFER must be >= PRICEWATCH_BATCH_SIZE "
                f"({self.batch_size}), got {self.max_buffer}"
            )
        self.store: Store = store_from_settings(settings)
        # Mass changes of a domain are held like a suspicious change (pricewatch/drift.py).
        if self.store.quarantine_config is not None:
            self.store.mass_guard = DriftMonitor.of(crawler).mass
        self.audit = AuditTrail.of(crawler)
        self.alerts: Alerter | None
        try:
            self.alerts = Alerter.from_crawler(crawler)
        except NotConfigured:
            self.alerts = None
        self._buffer: list[ObservationItem] = []
        self._write_lock = asyncio.Lock()
        self._room = asyncio.Event()
        self._room.set()
        self._full = asyncio.Event()  # a whole batch is waiting: write it now
        self._writer: asyncio.Task[None] | None = None
        self._closing = False
        self._gave_up = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StorePipeline:
        return cls(crawler)

    async def open_spider(self) -> None:
        # A backend down at start ends the crawl cleanly (the other components still open
        # and close), with a finish reason that `scrapy crawl` turns into its exit code.
        try:
            await self.store.open()  # raises StoreUnavailable naming the masked URL
        except StoreUnavailable as exc:
            raise end_run(self.crawler, "store_unavailable", str(exc)) from exc
        await _open_frontier(self.crawler, self.resources)
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    async def process_item(self, item: object) -> object:
        if not isinstance(item, ObservationItem):
            return item
        while len(self._buffer) >= self.max_buffer and not self._gave_up:
            self._stats.inc_value("pricewatch/store/backpressure_waits")
            self._room.clear()
            await self._room.wait()
        if self._gave_up:
            self._stats.inc_value("pricewatch/store/unwritten")
            raise DropItem(f"store unavailable, not acknowledged: {item.observation.url}")
        self._buffer.append(item)
        if len(self._buffer) >= self.batch_size:
            self._full.set()
        return item

    async def close_spider(self) -> None:
        self._closing = True
        self._full.set()
        try:
            if self._writer is not None:
                await asyncio.wait_for(self._writer, self.close_timeout)
        except TimeoutError:
            self._stats.inc_value("pricewatch/store/unwritten_at_close", len(self._buffer))
            logger.error(
                "Store still unreachable at close: %d observations not written; their "
                "leases were not acknowledged and will be fetched again",
                len(self._buffer),
            )
        finally:
            try:
                if self.alerts is not None:
                    await self.alerts.close()
            finally:
                await asyncio.wait_for(self.store.close(), 10)

    @property
    def _stats(self) -> StatsCollector:
        assert self.crawler.stats is not None
        return self.crawler.stats

    async def _write_loop(self) -> None:
        """The one writer: a batch as soon as one is full, a partial one every
        ``flush_interval``. Items never wait for a write (only for buffer room), so a
        store outage cannot hold up the crawl's shutdown."""
        while True:
            if not self._closing:
                try:
                    await asyncio.wait_for(self._full.wait(), self.flush_interval)
                except TimeoutError:
                    pass
            self._full.clear()
            try:
                await self._flush()
            except Exception:  # keep writing whatever one flush hit
                logger.exception("Store flush failed")
            if self._closing and (not self._buffer or self._gave_up):
                return

    async def _flush(self) -> None:
        """Write the buffer in batches, retrying each while the store is down."""
        async with self._write_lock:
            while self._buffer:
                batch = self._buffer[: self.batch_size]
                try:
                    result = await self._write_with_retry([i.observation for i in batch])
                except _StoreGaveUp as exc:
                    self._give_up(exc.__cause__ or exc)
                    return
                except Exception:
                    # Not a connectivity problem: a defect. Do not acknowledge: the leases
                    # expire and the SKUs are fetched again.
                    self._stats.inc_value("pricewatch/store/write_errors")
                    logger.exception(
                        "Store write failed; %d observations not acknowledged", len(batch)
                    )
                    self._take(len(batch))
                    continue
                self._take(len(batch))
                await self._acknowledge(batch, result)

    async def _acknowledge(self, batch: list[ObservationItem], result: WriteResult) -> None:
        rejected = {id(r.observation): r.reason for r in result.rejected}
        completions = []
        quarantine = self.store.quarantine_config
        for item in batch:
            url = item.observation.url
            reason = rejected.get(id(item.observation))
            if reason is not None:
                self._stats.inc_value(f"pricewatch/store/rejected/{reason}")
                logger.warning("Store rejected %s (%s)", url, reason)
            if item.lease is None:
                continue
            if self.audit.enabled:
                self._audit(item, result, reason)
            if reason is not None:
                completions.append(
                    Completion(item.lease, Outcome.NO_PRICE, reason=f"rejected_{reason}")
                )
            elif url in result.held and quarantine is not None:
                # Not published: fetch again soon to confirm or reject the change.
                completions.append(
                    Completion(item.lease, Outcome.OK, confirm_in=quarantine.confirm_delay)
                )
            else:
                changed = url in result.changed
                completions.append(Completion(item.lease, Outcome.OK, changed=changed))
        for url, why in result.held.items():
            self._stats.inc_value("pricewatch/quarantine/held")
            self._stats.inc_value(f"pricewatch/quarantine/held/{why}")
            logger.info("Held a suspicious change of %s (%s) until a second fetch", url, why)
        for url in result.confirmed:
            self._stats.inc_value("pricewatch/quarantine/confirmed")
            logger.info("A second fetch confirmed the held change of %s: published", url)
        for url, why in result.unconfirmed:
            self._stats.inc_value("pricewatch/quarantine/rejected")
            logger.warning("Quarantined an unconfirmed change of %s (%s): not published", url, why)
        self._stats.inc_value("pricewatch/store/batches")
        self._stats.inc_value("pricewatch/store/rows_written", result.written)
        self._stats.inc_value("pricewatch/store/changes", len(result.changed))
        if self.alerts is not None:  # committed: alert what this batch published
            self.alerts.submit(result.published)
        await self.resources.complete(completions)

    def _audit(self, item: ObservationItem, result: WriteResult, rejected: str | None) -> None:
        url = item.observation.url
        assert item.lease is not None
        if rejected is not None:
            status, why = "rejected", rejected
        elif url in result.held:
            status, why = "held", result.held[url]
        else:
            status, why = ("changed" if url in result.changed else "unchanged"), None
        self.audit.stored(item.lease, item.observation, status, why)

    def _give_up(self, exc: BaseException) -> None:
        """The store has been down too long: stop waiting, end the crawl."""
        self._gave_up = True
        self._stats.inc_value("pricewatch/store/unwritten", len(self._buffer))
        logger.error(
            "Store unreachable for more than %.0fs: ending the crawl; %d observations "
            "not written nor acknowledged (they will be fetched again)",
            self.outage_timeout,
            len(self._buffer),
        )
        self._stats.set_value(
            ERROR_STAT,
            f"store unreachable for more than {self.outage_timeout:g}s; last error: {exc}",
        )
        self._buffer.clear()
        self._room.set()
        engine = self.crawler.engine
        assert engine is not None
        asyncio.get_running_loop().create_task(
            engine.close_spider_async(reason="store_unavailable")
        )

    def _take(self, n: int) -> None:
        del self._buffer[:n]
        if len(self._buffer) < self.max_buffer:
            self._room.set()

    async def _write_with_retry(self, observations: Sequence[Observation]) -> WriteResult:
        attempt = 0
        down_since = time.monotonic()
        while True:
            try:
                return await self.store.write(observations)
            except StoreUnavailable as exc:
                if time.monotonic() - down_since > self.outage_timeout:
                    raise _StoreGaveUp from exc
                attempt += 1
                delay = random.uniform(0, min(self.retry_max_delay, 0.5 * 2**attempt))
                self._stats.inc_value("pricewatch/store/write_retries")
                logger.warning(
                    "Store write failed (attempt %d, %d observations buffered), retrying "
                    "in %.1fs: %s",
                    attempt,
                    len(self._buffer),
                    delay,
                    exc,
                )
                await asyncio.sleep(delay)
