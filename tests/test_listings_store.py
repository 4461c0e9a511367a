"""The listing store contract, run on both backends (the frontier's SQLite file and its
Redis namespace), and the frontier's retire/reinstate that delisting uses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from pricewatch.frontier import Entry, Frontier
from pricewatch.listings import Listing, ListingStore, Traversal, delisting, listing_store_from_url
from pricewatch.listings.traversal import begin, end
from tests.fixtures.redis import MakeFrontier

TTL = 0.3
LISTING_1 = Listing("https://a.test/l1", "cursor", "a.test", 3600.0)


def listing(path: str, domain: str = "a.test", kind: str = "cursor") -> Listing:
    return Listing(f"https://{domain}{path}", kind, domain, 3600.0, {"items_path": "data"})


@pytest.fixture
async def store(frontier_url: str) -> AsyncIterator[ListingStore]:
    store = listing_store_from_url(frontier_url)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def test_add_is_idempotent_and_keeps_the_traversal(store: ListingStore) -> None:
    assert await store.add([listing("/l1"), listing("/l2")]) == 2
    [lease] = [x for x in await store.claim(5, 60) if x.listing.url.endswith("/l1")]
    t = begin(lease.listing, lease.traversal, 1.0)
    assert await store.save(lease, t, ttl=60, due_in=None)
    changed = Listing(lease.listing.url, "pages", "a.test", 7200.0, {"max_pages": "5"})
    assert await store.add([changed]) == 0
    info = await store.get(lease.listing.url)
    assert info is not None
    assert (info.listing.kind, info.listing.every, info.listing.options) == (
        "pages",
        7200.0,
        {"max_pages": "5"},
    )
    assert info.traversal == t and info.leased
    assert [i.listing.url for i in await store.all()] == [
        "https://a.test/l1",
        "https://a.test/l2",
    ]


async def test_a_leased_listing_is_not_claimed_twice_until_its_lease_expires(
    frontier_url: str, store: ListingStore
) -> None:
    other = listing_store_from_url(frontier_url)  # another worker
    await other.open()
    try:
        await store.add([listing("/l1")])
        [lease] = await store.claim(5, TTL)
        assert await other.claim(5, TTL) == []
        t = begin(lease.listing, lease.traversal, 1.0)
        assert await store.save(lease, t, ttl=TTL, due_in=None)  # extends the lease
        await asyncio.sleep(TTL + 0.1)
        [again] = await other.claim(5, 60)  # expired: the other worker resumes it
        assert again.traversal == t and again.token != lease.token
        assert not await store.save(lease, t, ttl=60, due_in=None)  # the old lease is stale
    finally:
        await other.close()


async def test_a_finished_listing_is_due_again_after_its_period(store: ListingStore) -> None:
    await store.add([listing("/l1")])
    [lease] = await store.claim(5, 60)
    assert await store.save(lease, Traversal(state="done"), ttl=60, due_in=0.2)
    assert await store.claim(5, 60) == []
    await asyncio.sleep(0.3)
    [again] = await store.claim(5, 60)
    assert again.traversal.state == "done"


async def test_a_paused_domain_is_not_claimed(
    make_frontier: MakeFrontier, store: ListingStore
) -> None:
    frontier = await make_frontier()
    await frontier.add([Entry("https://a.test/p/1")])
    await frontier.pause_domain("a.test", 60)
    await store.add([listing("/l1"), listing("/l2", domain="b.test")])
    claimed = await store.claim(5, 60)
    assert [x.listing.domain for x in claimed] == ["b.test"]


async def test_members_new_stale_elsewhere_and_dropped(store: ListingStore) -> None:
    a, b = "https://a.test/l1", "https://a.test/l2"
    await store.add([listing("/l1"), listing("/l2")])
    assert await store.mark_members(a, ["u1", "u2", "u3"], 1) == ["u1", "u2", "u3"]
    assert await store.mark_members(a, ["u1", "u2", "u4"], 2) == ["u4"]
    assert sorted(await store.stale_members(a, 2)) == ["u3"]
    await store.mark_members(b, ["u3"], 1)
    assert await store.listed_elsewhere(a, ["u3", "u1"]) == {"u3"}
    await store.remove(b)
    assert await store.listed_elsewhere(a, ["u3", "u1"]) == set()  # b is gone
    await store.drop_members(a, ["u3"])
    assert await store.stale_members(a, 2) == []
    info = await store.get(a)
    assert info is not None and info.members == 3
    assert await store.remove(a)
    assert await store.get(a) is None
    assert await store.stale_members(a, 100) == []


async def test_retire_and_reinstate_by_reason(make_frontier: MakeFrontier) -> None:
    frontier: Frontier = await make_frontier()
    urls = [f"https://a.test/p/{i}" for i in range(4)]
    await frontier.add([Entry(u) for u in urls])
    [leased] = await frontier.claim(1)
    assert await frontier.retire(urls, "delisted") == 3  # the leased one is left to its fetch
    assert (await frontier.entry(leased.url)).state == "inflight"  # type: ignore[union-attr]
    retired = [u for u in urls if u != leased.url]
    for url in retired:
        assert (await frontier.entry(url)).state == "retired"  # type: ignore[union-attr]
    assert await frontier.claim(10) == []
    assert await frontier.reinstate(retired[:1], "unseen") == 0  # another reason: untouched
    assert await frontier.reinstate(retired[:2], "delisted") == 2
    assert sorted(lease.url for lease in await frontier.claim(10)) == sorted(retired[:2])


async def test_delisting_counts_complete_traversals_only(
    make_frontier: MakeFrontier, store: ListingStore
) -> None:
    frontier = await make_frontier()
    url = "https://a.test/l1"
    await store.add([listing("/l1"), listing("/l2")])
    products = [f"https://a.test/p/{i}" for i in range(6)]
    await frontier.add([Entry(u) for u in products])
    await store.mark_members(url, products, 1)
    await store.mark_members("https://a.test/l2", products[5:], 1)  # listed elsewhere too
    t = end(begin(LISTING_1, Traversal(), 0.0), "done", 1.0)  # traversal 1 listed all six
    # Traversals 2 (looped) and 3 (done) list only the first three.
    t = end(begin(LISTING_1, t, 2.0), "looped", 3.0)
    await store.mark_members(url, products[:3], 2)
    assert await delisting.delist(store, frontier, url, t, 2) == 0  # incomplete: no delisting
    t = end(begin(LISTING_1, t, 4.0), "done", 5.0)
    await store.mark_members(url, products[:3], 3)
    assert t.done_numbers == (1, 3)
    # K=2: traversals 1 and 3 are the last two complete ones; products 3-5 were listed by 1.
    assert await delisting.delist(store, frontier, url, t, 2) == 0
    t = end(begin(LISTING_1, t, 6.0), "done", 7.0)
    await store.mark_members(url, products[:3], 4)
    assert await delisting.delist(store, frontier, url, t, 2) == 2  # 3 and 4; 5 is elsewhere
    states = {u: (await frontier.entry(u)).state for u in products}  # type: ignore[union-attr]
    assert [states[u] for u in products] == ["scheduled"] * 3 + ["retired"] * 2 + ["scheduled"]
    assert sorted(await store.stale_members(url, 100)) == products[:3]  # the others left


async def test_add_keep_known_leaves_a_known_entry_as_it_is(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier()
    await frontier.add([Entry("https://a.test/p/1", sku="S1", importance=5.0)])
    added = await frontier.add(
        [Entry("https://a.test/p/1", sku="X", importance=1.0), Entry("https://a.test/p/2")],
        keep_known=True,
    )
    assert added == 1
    known = await frontier.entry("https://a.test/p/1")
    assert known is not None and (known.sku, known.importance) == ("S1", 5.0)
    assert await frontier.entry("https://a.test/p/2") is not None
