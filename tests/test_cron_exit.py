"""A cron crawl ends only when nothing is due for it.

The race (issue 11): a completion that frees a domain's in-flight cap is on its way to
the frontier while ``start()`` claims; the claim finds the domain at its cap, and if the
crawl then counted the lease as done already, it ended with due SKUs never claimed. Here
the frontier's ``complete`` is held on an event, so the claim runs inside that window
every time, not by timing luck. Then a real crawl of one capped host claims everything.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scrapy.utils.test import get_crawler

from pricewatch.frontier import (
    Completion,
    Entry,
    FrontierConnectionLost,
    Lease,
    SchedulePolicy,
)
from pricewatch.frontier.sqlite import SQLiteFrontier
from pricewatch.leases import CrawlResources
from pricewatch.meta import LEASE_META
from pricewatch.outcomes import Outcome
from pricewatch.spiders.products import ProductSpider

from .fixtures.sandbox import SandboxProcess
from .helpers import project_settings, scrapy, scrapy_env

N, CAP = 8, 2


async def until(predicate: Callable[[], bool]) -> None:
    while not predicate():  # noqa: ASYNC110 - polls state that has no event of its own
        await asyncio.sleep(0.005)


class HeldFrontier(SQLiteFrontier):
    """The real SQLite frontier, whose ``complete`` waits for ``go`` (a slow commit)."""

    def __init__(self, url: str, policy: SchedulePolicy) -> None:
        super().__init__(url, policy)
        self.go = asyncio.Event()
        self.holding = False
        self.claims_while_held = 0

    async def claim(self, n: int) -> list[Lease]:
        if self.holding:
            self.claims_while_held += 1
        return await super().claim(n)

    async def complete(self, completions: Sequence[Completion]) -> int:
        self.holding = True
        await self.go.wait()
        self.holding = False
        self.go.clear()
        return await super().complete(completions)


async def test_start_keeps_claiming_while_a_completion_is_on_its_way(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'frontier.db'}"
    frontier = HeldFrontier(url, SchedulePolicy(domain_max_inflight=CAP))
    await frontier.open()
    await frontier.add([Entry(f"https://shop.test/p/{i}") for i in range(N)])
    crawler = get_crawler(ProductSpider, project_settings(PRICEWATCH_FRONTIER_URL=url))
    spider = ProductSpider.from_crawler(crawler)
    resources = CrawlResources.of(crawler)
    resources._frontier = frontier  # the crawl uses the held frontier
    claimed: list[Lease] = []

    async def consume() -> None:
        async for request in spider.start():
            claimed.append(request.meta[LEASE_META])

    crawl = asyncio.get_running_loop().create_task(consume())
    try:
        done = 0
        while done < N:
            want = min(done + CAP, N)  # the cap's worth is being fetched
            await until(lambda: len(claimed) >= want)  # noqa: B023 - awaited right here
            batch = claimed[done : done + CAP]
            done += len(batch)
            completing = asyncio.get_running_loop().create_task(
                resources.complete([Completion(lease, Outcome.OK) for lease in batch])
            )
            # start() claims at least twice while the completion is held: the domain is
            # at its cap, nothing else is due. It must not take that for the end.
            await until(lambda: frontier.claims_while_held >= 2 or crawl.done())
            frontier.claims_while_held = 0
            assert not crawl.done(), f"the crawl ended with {N - done} SKUs still due"
            assert resources.outstanding == len(batch)
            frontier.go.set()
            await completing
        await asyncio.wait_for(crawl, 5)  # nothing due, nothing outstanding: it ends
        assert sorted(lease.url for lease in claimed) == sorted(
            f"https://shop.test/p/{i}" for i in range(N)
        )
        assert resources.outstanding == 0
    finally:
        crawl.cancel()
        await frontier.close()


async def test_a_released_lease_frees_the_cap_for_the_next_claim(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'frontier.db'}"
    frontier = SQLiteFrontier(url, SchedulePolicy(domain_max_inflight=1))
    await frontier.open()
    await frontier.add([Entry(f"https://shop.test/p/{i}") for i in range(3)])
    crawler = get_crawler(ProductSpider, project_settings(PRICEWATCH_FRONTIER_URL=url))
    spider = ProductSpider.from_crawler(crawler)
    resources = CrawlResources.of(crawler)
    resources._frontier = frontier
    start = spider.start()
    try:
        first = (await asyncio.wait_for(anext(start), 5)).meta[LEASE_META]
        nxt = asyncio.get_running_loop().create_task(anext(start))
        await asyncio.sleep(0.3)
        assert not nxt.done()  # at the cap of 1 while the first is being fetched
        resources.release(first)  # its fetch ended; its store commit is still to come
        second = (await asyncio.wait_for(nxt, 5)).meta[LEASE_META]
        assert second.url != first.url
        assert (resources.outstanding, resources.fetching) == (2, 1)
        assert frontier.stats["pricewatch/frontier/released"] == 1
    finally:
        await start.aclose()
        await frontier.close()


def test_a_crawl_of_one_capped_host_claims_every_due_sku(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    shop: SandboxProcess = sandbox_factory(shops=1, products=120, seed=3)
    env = scrapy_env(tmp_path)
    (tmp_path / "seeds.txt").write_text(shop.urls_txt())
    assert scrapy(tmp_path, "seed", "seeds.txt", env=env).returncode == 0
    due = sum(1 for line in (tmp_path / "seeds.txt").read_text().splitlines() if line.strip())
    proc = scrapy(
        tmp_path,
        "crawl",
        "products",
        "-s", "DOWNLOAD_DELAY=0",
        "-s", "AUTOTHROTTLE_ENABLED=False",
        "-s", "PRICEWATCH_DOMAIN_MAX_INFLIGHT=3",
        "-s", "PRICEWATCH_FLUSH_INTERVAL=0.3",
        env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["finish_reason"] == "finished"
    assert stats["pricewatch/frontier/claimed"] == due
    assert stats["pricewatch/frontier/completed"] == due
    assert stats["pricewatch/frontier/released"] > 0
    assert shop.host_stats(shop.shops[0]["host"])["max_in_flight"] <= 3


class UnreachableOnRelease(SQLiteFrontier):
    """The real SQLite frontier, whose backend is gone when a release is sent."""

    async def release_slots(self, leases: Sequence[Lease]) -> int:
        raise FrontierConnectionLost(f"SQLite frontier {self.url}: disk I/O error")


async def test_a_release_the_frontier_cannot_take_is_counted_and_changes_nothing(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'frontier.db'}"
    frontier = UnreachableOnRelease(url, SchedulePolicy(domain_max_inflight=1))
    await frontier.open()
    await frontier.add([Entry(f"https://shop.test/p/{i}") for i in range(2)])
    crawler = get_crawler(ProductSpider, project_settings(PRICEWATCH_FRONTIER_URL=url))
    crawler.stats.open_spider()  # type: ignore[union-attr]
    resources = CrawlResources.of(crawler)
    resources._frontier = frontier
    try:
        [lease] = await frontier.claim(5)
        resources.claimed([lease])
        resources.release(lease)  # no claim carries it: it is sent on its own, and fails
        stats = crawler.stats
        assert stats is not None
        await until(lambda: stats.get_value("pricewatch/frontier/release_failed") is not None)
        assert stats.get_value("pricewatch/frontier/release_failed") == 1
        assert await frontier.claim(5) == []  # the slot is still taken, until the completion
        await resources.complete([Completion(lease, Outcome.OK)])
        assert len(await frontier.claim(5)) == 1
        assert resources.outstanding == 0
    finally:
        await frontier.close()
