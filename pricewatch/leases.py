"""The backends one crawl shares between its spider, middlewares and pipelines.

``CrawlResources.of(crawler)`` returns the crawl's single holder. The frontier is built
from ``PRICEWATCH_FRONTIER_URL`` and opened on first use, and closed on ``spider_closed``,
which Scrapy sends after the pipelines have closed (so their last acknowledgements land);
what the frontier counted (``pricewatch/frontier/*``) is copied into the crawl stats then.

Every lease is completed through :meth:`CrawlResources.complete`, which counts the
outcome (stat ``pricewatch/outcome/<outcome>``) and the leases still outstanding, so the
spider knows how much work it holds; :meth:`CrawlResources.end` also counts why a lease
ended without an observation (``pricewatch/reason/<outcome>/<reason>``). A lease stays
outstanding until the frontier has taken its completion (or failed to): a cron crawl must
not end while a completion that frees a domain's cap is still on its way. A completion the
frontier cannot take (backend down) is logged and counted
(``pricewatch/frontier/complete_failed``); its lease expires and is reaped, so the SKU is
fetched again rather than lost.

A lease whose fetch ended (its offer goes to the store) is handed to
:meth:`CrawlResources.release`: the frontier stops counting it against the domain's
in-flight cap while the lease waits for its store batch to commit. Releases ride on the
spider's next claim (:meth:`CrawlResources.claim`, one round trip for both, and the claim
sees the slots free); those no claim has carried after :data:`RELEASE_DELAY` are sent on
their own, in one batch, one frontier call at a time. A release that fails is counted
(``pricewatch/frontier/release_failed``) and changes nothing (the slot frees at the
completion instead).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from scrapy import signals

from pricewatch._crawl import per_crawl
from pricewatch.frontier import (
    Completion,
    Frontier,
    FrontierUnavailable,
    Lease,
    frontier_from_settings,
)
from pricewatch.outcomes import Outcome

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

leases_claimed = object()
"""Signal sent once per :meth:`CrawlResources.claimed` call, with ``leases`` (a sequence of
:class:`~pricewatch.frontier.Lease`): the audit trail's first record of each lease."""

leases_completed = object()
"""Signal sent once per :meth:`CrawlResources.complete` call, with ``completions`` (a
sequence of :class:`~pricewatch.frontier.Completion`): per-domain outcomes for metrics."""

CLOSE_TIMEOUT = 10.0
# Seconds a release waits for a claim to carry it before it is sent on its own: until then
# only this crawl's own claims (which carry it) would see the slot free, not other workers'.
RELEASE_DELAY = 0.25


class CrawlResources:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._frontier: Frontier | None = None
        self._lock: asyncio.Lock | None = None
        self._outstanding: set[str] = set()
        self._released: set[str] = set()  # outstanding leases whose fetch ended
        self._to_release: list[Lease] = []
        self._releasing: asyncio.Task[None] | None = None
        self._release_timer: asyncio.TimerHandle | None = None
        self._settled: asyncio.Event | None = None
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)

    @classmethod
    def of(cls, crawler: Crawler) -> CrawlResources:
        return per_crawl(crawler, cls)

    async def frontier(self) -> Frontier:
        """The crawl's frontier, opened once (raises ``FrontierUnavailable``)."""
        if self._frontier is not None:
            return self._frontier
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._frontier is None:
                frontier = frontier_from_settings(self.crawler.settings)
                await frontier.open()
                self._frontier = frontier
        return self._frontier

    @property
    def outstanding(self) -> int:
        """Leases claimed by this crawl whose completion the frontier has not taken yet
        (being fetched, waiting for the store, or being acknowledged)."""
        return len(self._outstanding)

    @property
    def fetching(self) -> int:
        """Outstanding leases whose fetch has not ended."""
        return len(self._outstanding) - len(self._released)

    @property
    def settled(self) -> asyncio.Event:
        """Set whenever a completion has reached the frontier (or failed to), or a fetch
        ended (its release goes with the next claim): what the frontier would hand out may
        have changed. Clear it, claim, and if the claim found nothing, it being set says to
        claim again rather than stop."""
        if self._settled is None:
            self._settled = asyncio.Event()
        return self._settled

    def claimed(self, leases: Sequence[Lease]) -> None:
        self._outstanding.update(lease.token for lease in leases)
        self.crawler.signals.send_catch_log(leases_claimed, leases=leases)

    async def claim(self, n: int) -> list[Lease]:
        """Up to ``n`` leases, claimed in the same frontier call that releases the slots
        of the fetches that ended since (raises ``FrontierUnavailable``)."""
        frontier = await self.frontier()
        released = self._take_releases()
        try:
            leases = await frontier.release_and_claim(released, n)
        except FrontierUnavailable as exc:
            self._release_failed(released, exc)
            raise
        self.claimed(leases)
        return leases

    def release(self, lease: Lease) -> None:
        """The fetch of ``lease`` ended; its completion follows after the store commits."""
        if lease.token not in self._outstanding or lease.token in self._released:
            return
        self._released.add(lease.token)
        self._to_release.append(lease)
        self.settled.set()  # room to claim: the claim carries the release
        if self._release_timer is None and self._releasing is None:
            loop = asyncio.get_running_loop()
            self._release_timer = loop.call_later(RELEASE_DELAY, self._send_releases)

    def _take_releases(self) -> list[Lease]:
        """The releases not sent yet, but those of leases completed meanwhile (their
        completion freed their slot)."""
        if self._release_timer is not None:
            self._release_timer.cancel()
            self._release_timer = None
        batch, self._to_release = self._to_release, []
        return [lease for lease in batch if lease.token in self._released]

    def _send_releases(self) -> None:
        self._release_timer = None
        if self._releasing is None and self._to_release:
            self._releasing = asyncio.get_running_loop().create_task(self._release_loop())

    def _release_failed(self, batch: Sequence[Lease], exc: Exception) -> None:
        if not batch:
            return
        stats = self.crawler.stats
        assert stats is not None
        stats.inc_value("pricewatch/frontier/release_failed", len(batch))
        logger.warning("Could not release %d lease slot(s): %s", len(batch), exc)

    async def _release_loop(self) -> None:
        try:
            while batch := self._take_releases():
                try:
                    frontier = await self.frontier()
                    await frontier.release_slots(batch)
                except FrontierUnavailable as exc:
                    self._release_failed(batch, exc)
                self.settled.set()
        finally:
            self._releasing = None

    async def complete(self, completions: Sequence[Completion]) -> None:
        """Complete leases (exactly once each) and count their outcomes. The leases stay
        outstanding until the frontier has answered."""
        if not completions:
            return
        stats = self.crawler.stats
        assert stats is not None
        for outcome, count in Counter(c.outcome for c in completions).items():
            stats.inc_value(f"pricewatch/outcome/{outcome.value}", count)
        self.crawler.signals.send_catch_log(leases_completed, completions=completions)
        try:
            frontier = await self.frontier()
            await frontier.complete(completions)
        except FrontierUnavailable as exc:
            stats.inc_value("pricewatch/frontier/complete_failed", len(completions))
            logger.warning(
                "Could not complete %d lease(s), they will expire and be fetched again: %s",
                len(completions),
                exc,
            )
        finally:
            for completion in completions:
                token = completion.lease.token
                self._outstanding.discard(token)
                self._released.discard(token)
            self.settled.set()

    async def end(
        self, lease: Lease, outcome: Outcome, reason: str, retry_after: float | None = None
    ) -> None:
        """Complete a lease that ends without an observation, counting why it ended
        (stat ``pricewatch/reason/<outcome>/<reason>``)."""
        stats = self.crawler.stats
        assert stats is not None
        stats.inc_value(f"pricewatch/reason/{outcome.value}/{reason}")
        await self.complete([Completion(lease, outcome, retry_after=retry_after, reason=reason)])

    async def _spider_closed(self) -> None:
        self._send_releases()  # leases not completed (the store is down) free their slots
        if self._releasing is not None:  # releases on their way: let them land first
            try:
                await asyncio.wait_for(asyncio.shield(self._releasing), CLOSE_TIMEOUT)
            except TimeoutError:
                logger.warning("Lease releases still pending at close; their leases expire")
        frontier, self._frontier = self._frontier, None
        if frontier is not None:
            stats = self.crawler.stats
            assert stats is not None
            for name, value in frontier.stats.items():
                stats.set_value(name, value)
            await asyncio.wait_for(frontier.close(), CLOSE_TIMEOUT)
