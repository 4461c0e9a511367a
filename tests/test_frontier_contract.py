"""The frontier contract, run on every backend (SQLite file, Redis namespace).

Lease expiry is tested with short TTLs (0.2 s) and real sleeps.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from pricewatch.frontier import Completion, Entry, Frontier, Lease, budget
from pricewatch.outcomes import Outcome
from tests.fixtures.redis import MakeFrontier

TTL = 0.2


def urls(domain: str, n: int, start: int = 0) -> list[str]:
    return [f"https://{domain}/p/{i}" for i in range(start, start + n)]


def entries(*groups: list[str], importance: float = 1.0) -> list[Entry]:
    return [Entry(url, importance=importance) for group in groups for url in group]


async def claim_all(frontier: Frontier, batch: int = 50) -> list[Lease]:
    out: list[Lease] = []
    while leases := await frontier.claim(batch):
        out += leases
    return out


async def delay_after(frontier: Frontier, lease: Lease, before: float) -> float:
    info = await frontier.entry(lease.url)
    assert info is not None
    return info.due_at - before


# -- add ------------------------------------------------------------------------------------


async def test_add_counts_new_urls_and_ignores_duplicates(frontier: Frontier) -> None:
    assert await frontier.add(entries(urls("a.test", 3))) == 3
    assert await frontier.add(entries(urls("a.test", 5))) == 2
    assert await frontier.add([Entry("https://a.test/x"), Entry("https://a.test/x")]) == 1
    counts = {c.domain: c for c in await frontier.counts()}
    assert counts["a.test"].due == 6


async def test_re_adding_keeps_the_schedule_and_updates_sku_and_importance(
    make_frontier: MakeFrontier,
) -> None:
    frontier = await make_frontier(interval=1000, min_interval=0, velocity_weight=0)
    await frontier.add([Entry("https://a.test/1", sku="S1", importance=1.0)])
    [lease] = await frontier.claim(1)
    assert lease.sku == "S1"
    await frontier.complete([Completion(lease, Outcome.OK)])
    before = await frontier.entry(lease.url)
    assert before is not None and before.state == "scheduled"

    assert await frontier.add([Entry("https://a.test/1", sku="S1b", importance=3.0)]) == 0
    after = await frontier.entry(lease.url)
    assert after is not None
    assert after.due_at == pytest.approx(before.due_at, abs=1e-3)  # not reset to "due now"
    assert after.state == "scheduled"
    assert (after.sku, after.importance) == ("S1b", 3.0)
    assert await frontier.claim(10) == []

    # A re-seed without a sku keeps the known one.
    await frontier.add([Entry("https://a.test/1", importance=2.0)])
    again = await frontier.entry(lease.url)
    assert again is not None and (again.sku, again.importance) == ("S1b", 2.0)


async def test_invalid_entries_are_logged_and_skipped(
    frontier: Frontier, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="pricewatch.frontier"):
        added = await frontier.add(
            [
                Entry("not a url"),
                Entry("https://a.test/zero", importance=0),
                Entry("https://a.test/nan", importance=float("nan")),
                Entry("https://a.test/tab\there"),
                Entry("https://a.test/sku", sku="line\nbreak"),
                Entry("https://a.test/ok"),
            ]
        )
    assert added == 1
    assert "control characters" in caplog.text
    assert "'not a url'" in caplog.text
    assert "importance must be > 0" in caplog.text
    assert await frontier.entry("https://a.test/zero") is None


async def test_one_entry_and_one_domain_per_product_url(frontier: Frontier) -> None:
    variants = [
        "https://Shop.example.co.uk/p/1?b=2&a=1",
        "https://shop.example.co.uk./p/1?a=1&b=2#reviews",
        "HTTPS://SHOP.EXAMPLE.CO.UK:443/p/1?a=1&b=2",
        "https://www.shop.example.co.uk/p/2?",
        "https://shop.example.co.uk/p/3",
    ]
    assert await frontier.add([Entry(url) for url in variants]) == 3
    [counts] = await frontier.counts()
    assert (counts.domain, counts.due) == ("example.co.uk", 3)
    stored = await frontier.entry(variants[0])
    assert stored is not None
    assert stored.url == "https://shop.example.co.uk/p/1?a=1&b=2"
    assert {lease.url for lease in await claim_all(frontier)} == {
        "https://shop.example.co.uk/p/1?a=1&b=2",
        "https://www.shop.example.co.uk/p/2",
        "https://shop.example.co.uk/p/3",
    }


async def test_urls_that_cannot_be_fetched_are_not_added(
    frontier: Frontier, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="pricewatch.frontier"):
        added = await frontier.add(
            [
                Entry("http://a.test:99999/x"),
                Entry("http://-a-.test/x"),
                Entry("http://operator:s3cret@a.test/x"),
                Entry("http://a.test/ok"),
            ]
        )
    assert added == 1
    assert "port out of range" in caplog.text
    assert "invalid host name" in caplog.text
    assert "credentials in URL" in caplog.text
    assert "s3cret" not in caplog.text and "operator" not in caplog.text


async def test_add_100k_entries(frontier: Frontier) -> None:
    batch = [Entry(f"https://shop{i % 7}.test/product/{i:07d}", sku=str(i)) for i in range(100_000)]
    assert await frontier.add(batch) == 100_000
    counts = await frontier.counts()
    assert sum(c.due for c in counts) == 100_000
    assert len(counts) == 7
    assert await frontier.add(batch[:1000]) == 0


# -- claim ----------------------------------------------------------------------------------


async def test_claim_takes_the_most_overdue_first(frontier: Frontier) -> None:
    for url in ["https://a.test/old", "https://a.test/mid", "https://a.test/new"]:
        await frontier.add([Entry(url)])
        await asyncio.sleep(0.02)
    leases = await frontier.claim(3)
    assert [lease.url for lease in leases] == [
        "https://a.test/old",
        "https://a.test/mid",
        "https://a.test/new",
    ]
    assert all(lease.domain == "a.test" for lease in leases)
    assert len({lease.token for lease in leases}) == 3
    assert all(lease.deadline > time.time() for lease in leases)


async def test_claim_is_fair_across_domains(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(domain_max_inflight=0)
    # big.test was added first and has the most overdue entries, and many more of them.
    await frontier.add(entries(urls("big.test", 30)))
    await asyncio.sleep(0.02)
    await frontier.add(entries(urls("b.test", 5), urls("c.test", 5)))
    leases = await frontier.claim(9)
    by_domain = [lease.domain for lease in leases]
    assert sorted(by_domain) == ["b.test"] * 3 + ["big.test"] * 3 + ["c.test"] * 3
    # Round-robin, the most overdue domain first in every round.
    assert by_domain[0] == "big.test"
    assert len(set(by_domain[:3])) == 3
    # When the small domains run dry the rest goes to the big one.
    more = await frontier.claim(20)
    assert (
        sorted(lease.domain for lease in more)
        == ["b.test"] * 2 + ["big.test"] * 16 + ["c.test"] * 2
    )


async def test_claim_returns_nothing_when_nothing_is_due(frontier: Frontier) -> None:
    assert await frontier.claim(5) == []
    assert await frontier.claim(0) == []
    await frontier.add(entries(urls("a.test", 2)))
    leases = await frontier.claim(5)
    assert len(leases) == 2
    assert await frontier.claim(5) == []  # leased, not due
    await frontier.complete([Completion(lease, Outcome.OK) for lease in leases])
    assert await frontier.claim(5) == []  # rescheduled an interval later


async def test_two_claimers_never_get_the_same_entry(make_frontier: MakeFrontier) -> None:
    first = await make_frontier(domain_max_inflight=0)
    second = await make_frontier(domain_max_inflight=0)
    await first.add(entries(urls("a.test", 150), urls("b.test", 150)))

    async def drain(frontier: Frontier) -> list[str]:
        got: list[str] = []
        while leases := await frontier.claim(7):
            got += [lease.url for lease in leases]
            await asyncio.sleep(0)
        return got

    results = await asyncio.gather(drain(first), drain(second), drain(first), drain(second))
    claimed = [url for result in results for url in result]
    assert len(claimed) == 300
    assert len(set(claimed)) == 300
    assert sum(1 for result in results if result) >= 2  # both really competed


async def test_per_domain_inflight_cap_holds_across_frontiers(
    make_frontier: MakeFrontier,
) -> None:
    first = await make_frontier(domain_max_inflight=2)
    second = await make_frontier(domain_max_inflight=2)
    await first.add(entries(urls("a.test", 5), urls("b.test", 5)))
    leases = await first.claim(10)
    assert sorted(lease.domain for lease in leases) == ["a.test"] * 2 + ["b.test"] * 2
    assert await second.claim(10) == []
    counts = {c.domain: c.inflight for c in await second.counts()}
    assert counts == {"a.test": 2, "b.test": 2}
    a_lease = next(lease for lease in leases if lease.domain == "a.test")
    assert await second.complete([Completion(a_lease, Outcome.OK)]) == 1
    [freed] = await second.claim(10)
    assert freed.domain == "a.test"


async def test_a_released_lease_frees_its_slot_and_stays_leased_until_completed(
    make_frontier: MakeFrontier,
) -> None:
    frontier = await make_frontier(domain_max_inflight=2)
    await frontier.add(entries(urls("a.test", 6)))
    first, second = await frontier.claim(10)
    assert await frontier.claim(10) == []  # two being fetched: at the cap
    assert await frontier.release_slots([first]) == 1
    assert await frontier.release_slots([first, first]) == 0  # once per lease
    assert frontier.stats["pricewatch/frontier/released"] == 1
    # Its fetch ended, its acknowledgement waits: still leased, not claimable again.
    info = await frontier.entry(first.url)
    assert info is not None and info.state == "inflight"
    [third] = await frontier.claim(10)
    assert third.url not in {first.url, second.url}
    assert await frontier.claim(10) == []
    assert {c.domain: c.inflight for c in await frontier.counts()} == {"a.test": 3}
    # Completing a released lease frees no second slot.
    assert await frontier.complete([Completion(first, Outcome.OK)]) == 1
    assert await frontier.claim(10) == []
    assert {c.domain: c.inflight for c in await frontier.counts()} == {"a.test": 2}
    # Completing an unreleased one does.
    assert await frontier.complete([Completion(second, Outcome.OK)]) == 1
    [fourth] = await frontier.claim(10)
    assert fourth.url not in {first.url, second.url, third.url}
    assert await frontier.release_slots([second]) == 0  # completed: nothing to release


async def test_a_claim_carries_the_releases_and_sees_their_slots_free(
    make_frontier: MakeFrontier,
) -> None:
    frontier = await make_frontier(domain_max_inflight=2)
    await frontier.add(entries(urls("a.test", 6)))
    first, second = await frontier.claim(10)
    assert await frontier.release_and_claim([], 10) == []  # at the cap
    # Released in the same call: the claim takes their two slots, and no more.
    third, fourth = await frontier.release_and_claim([first, second, first], 10)
    assert {third.url, fourth.url}.isdisjoint({first.url, second.url})
    assert frontier.stats["pricewatch/frontier/released"] == 2
    assert await frontier.release_and_claim([first, second], 10) == []  # once per lease
    assert frontier.stats["pricewatch/frontier/released"] == 2
    # Released leases stay leased until completed, and completing them frees nothing more.
    info = await frontier.entry(first.url)
    assert info is not None and info.state == "inflight"
    assert await frontier.complete([Completion(lease, Outcome.OK) for lease in (first, second)])
    assert await frontier.claim(10) == []
    # A completed lease's token releases nothing; an unreleased lease's completion frees it.
    assert await frontier.release_and_claim([first], 10) == []
    assert await frontier.complete([Completion(third, Outcome.OK)]) == 1
    [fifth] = await frontier.release_and_claim([third], 10)
    assert fifth.url not in {first.url, second.url, third.url, fourth.url}
    assert frontier.stats["pricewatch/frontier/released"] == 2


async def test_a_released_lease_that_expires_is_reaped_and_counted_once(
    make_frontier: MakeFrontier,
) -> None:
    frontier = await make_frontier(domain_max_inflight=1, lease_ttl=TTL)
    await frontier.add(entries(urls("a.test", 4)))
    [first] = await frontier.claim(10)
    assert await frontier.release_slots([first]) == 1
    [second] = await frontier.claim(10)
    await asyncio.sleep(TTL + 0.1)
    assert await frontier.reap() == 2  # a crash before the commit loses nothing
    info = await frontier.entry(first.url)
    assert info is not None and (info.state, info.attempts) == ("scheduled", 1)
    assert {c.domain: c.inflight for c in await frontier.counts()} == {"a.test": 0}
    # The cap is whole again: one at a time, not two.
    assert len(await frontier.claim(10)) == 1
    assert await frontier.claim(10) == []
    # The expired leases' tokens release nothing.
    assert await frontier.release_slots([first, second]) == 0
    assert await frontier.claim(10) == []


async def test_paused_domain_is_not_claimed_until_the_pause_ends(frontier: Frontier) -> None:
    await frontier.add(entries(urls("a.test", 3), urls("b.test", 3)))
    await frontier.pause_domain("a.test", 0.3)
    leases = await frontier.claim(10)
    assert {lease.domain for lease in leases} == {"b.test"}
    assert await frontier.claim(10) == []
    # Only the paused domain is left: not due before the pause ends.
    wait = await frontier.next_due_in()
    assert wait is not None and 0.05 < wait <= 0.3
    # A shorter pause does not cut a longer one.
    await frontier.pause_domain("a.test", 0.01)
    assert await frontier.claim(10) == []
    await asyncio.sleep(0.35)
    resumed = await frontier.claim(10)
    assert [lease.domain for lease in resumed] == ["a.test"] * 3


# -- complete, leases and reaping ----------------------------------------------------------


async def test_a_stale_lease_cannot_complete(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(lease_ttl=TTL)
    await frontier.add([Entry("https://a.test/1")])
    [stale] = await frontier.claim(1)
    await asyncio.sleep(TTL + 0.1)
    [fresh] = await frontier.claim(1)  # the expired lease was reaped and claimed again
    assert fresh.url == stale.url and fresh.token != stale.token
    assert fresh.attempts == 1
    assert await frontier.complete([Completion(stale, Outcome.OK)]) == 0
    forged = Lease(fresh.url, fresh.domain, "forged", fresh.deadline)
    assert await frontier.complete([Completion(forged, Outcome.OK)]) == 0
    info = await frontier.entry(fresh.url)
    assert info is not None and info.state == "inflight"
    assert await frontier.complete([Completion(fresh, Outcome.OK)]) == 1
    assert await frontier.complete([Completion(fresh, Outcome.OK)]) == 0  # exactly once


async def test_a_lease_completed_twice_in_one_batch_counts_once(frontier: Frontier) -> None:
    await frontier.add(entries(urls("a.test", 2)))
    first, second = await frontier.claim(2)
    applied = await frontier.complete(
        [
            Completion(first, Outcome.OK, changed=True),
            Completion(first, Outcome.OK, changed=True),
            Completion(second, Outcome.ERROR),
        ]
    )
    assert applied == 2
    info = await frontier.entry(first.url)
    assert info is not None and (info.checks, info.changes) == (1, 1)
    assert {c.domain: c.inflight for c in await frontier.counts()} == {"a.test": 0}


async def test_reap_returns_expired_leases_and_dead_letters(
    make_frontier: MakeFrontier,
) -> None:
    frontier = await make_frontier(lease_ttl=2 * TTL, max_attempts=2)
    await frontier.add(entries(urls("a.test", 2)))
    await asyncio.sleep(0.02)
    await frontier.add([Entry("https://a.test/late")])
    leases = await frontier.claim(2)
    assert await frontier.reap() == 0  # live leases stay
    await asyncio.sleep(2 * TTL + 0.1)
    assert await frontier.reap() == 2
    # Back at their old, overdue place: ahead of the later entry.
    info = await frontier.entry(leases[0].url)
    assert info is not None and (info.state, info.attempts) == ("scheduled", 1)
    again = await frontier.claim(2)
    assert {lease.url for lease in again} == {lease.url for lease in leases}
    assert all(lease.attempts == 1 for lease in again)
    await asyncio.sleep(2 * TTL + 0.1)
    assert await frontier.reap() == 2
    counts = {c.domain: c for c in await frontier.counts()}
    assert (counts["a.test"].dead, counts["a.test"].due, counts["a.test"].inflight) == (2, 1, 0)
    dead = await frontier.entry(leases[0].url)
    assert dead is not None and dead.state == "dead"
    [late] = await frontier.claim(5)
    assert late.url == "https://a.test/late"


async def test_success_resets_attempts_and_failures(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(lease_ttl=TTL, retry_delay=0.01, min_interval=0)
    await frontier.add([Entry("https://a.test/1")])
    await frontier.claim(1)
    await asyncio.sleep(TTL + 0.1)
    [lease] = await frontier.claim(1)
    await frontier.complete([Completion(lease, Outcome.ERROR)])
    info = await frontier.entry(lease.url)
    assert info is not None and (info.attempts, info.failures) == (0, 1)
    await asyncio.sleep(0.05)
    [lease] = await frontier.claim(1)
    assert lease.failures == 1
    await frontier.complete([Completion(lease, Outcome.OK)])
    info = await frontier.entry(lease.url)
    assert info is not None and (info.attempts, info.failures, info.checks) == (0, 0, 1)


# -- rescheduling ---------------------------------------------------------------------------


async def test_importance_shortens_the_interval(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(interval=1000, min_interval=0, velocity_weight=0)
    await frontier.add(
        [Entry("https://a.test/1", importance=1), Entry("https://a.test/4", importance=4)]
    )
    leases = await frontier.claim(2)
    now = time.time()
    await frontier.complete([Completion(lease, Outcome.OK) for lease in leases])
    delays = {lease.url: await delay_after(frontier, lease, now) for lease in leases}
    assert delays["https://a.test/1"] == pytest.approx(1000, abs=5)
    assert delays["https://a.test/4"] == pytest.approx(250, abs=5)


async def test_price_changes_shorten_the_interval(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(
        interval=1000, min_interval=0, velocity_weight=3, velocity_prior=2
    )
    await frontier.add(entries(urls("a.test", 2)))
    moving, still = await frontier.claim(2)
    now = time.time()
    await frontier.complete(
        [Completion(moving, Outcome.OK, changed=True), Completion(still, Outcome.OK)]
    )
    # velocity 1 / (1 + 2): 1000 / (1 + 3 * 1/3) = 500
    assert await delay_after(frontier, moving, now) == pytest.approx(500, abs=5)
    assert await delay_after(frontier, still, now) == pytest.approx(1000, abs=5)
    info = await frontier.entry(moving.url)
    assert info is not None and (info.checks, info.changes) == (1, 1)


async def test_failures_back_off_exponentially(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(retry_delay=0.05, health_weight=0, gone_limit=10)
    await frontier.add([Entry("https://a.test/1")])
    for outcome, expected in ((Outcome.ERROR, 0.05), (Outcome.BLOCKED, 0.1), (Outcome.ERROR, 0.2)):
        [lease] = await frontier.claim(1)
        before = time.time()
        await frontier.complete([Completion(lease, outcome)])
        after = time.time()
        info = await frontier.entry(lease.url)
        assert info is not None
        # Due `expected` seconds after the completion, which happened between the two clocks.
        assert before + expected - 0.005 <= info.due_at <= after + expected + 0.005
        await asyncio.sleep(info.due_at - time.time() + 0.02)
    info = await frontier.entry("https://a.test/1")
    assert info is not None and info.failures == 3


async def test_retry_after_is_a_floor(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(retry_delay=1, health_weight=0)
    await frontier.add(entries(urls("a.test", 2)))
    blocked, skipped = await frontier.claim(2)
    now = time.time()
    await frontier.complete(
        [
            Completion(blocked, Outcome.BLOCKED, retry_after=120),
            Completion(skipped, Outcome.SKIPPED, retry_after=30),
        ]
    )
    assert await delay_after(frontier, blocked, now) == pytest.approx(120, abs=2)
    assert await delay_after(frontier, skipped, now) == pytest.approx(30, abs=2)
    info = await frontier.entry(skipped.url)
    assert info is not None and (info.failures, info.checks) == (0, 0)  # skipped says nothing


async def test_a_failing_domain_is_pushed_back(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(
        interval=1000, min_interval=0, velocity_weight=0, health_weight=2, health_alpha=0.5
    )
    await frontier.add(entries(urls("sick.test", 2), urls("well.test", 1)))
    first = await frontier.claim(1)
    assert first[0].domain == "sick.test"
    await frontier.complete([Completion(first[0], Outcome.BLOCKED)])  # health 1 -> 0.5
    leases = await frontier.claim(2)
    now = time.time()
    await frontier.complete([Completion(lease, Outcome.OK) for lease in leases])
    delays = {lease.domain: await delay_after(frontier, lease, now) for lease in leases}
    assert delays["well.test"] == pytest.approx(1000, abs=5)
    assert delays["sick.test"] == pytest.approx(2000, abs=5)  # x (1 + 2 * (1 - 0.5))


# -- retirement -----------------------------------------------------------------------------


async def test_gone_entries_retire_after_the_limit(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(gone_limit=2, retry_delay=0.01, health_weight=0)
    await frontier.add(entries(urls("a.test", 2)))
    [gone] = await frontier.claim(1)
    await frontier.complete([Completion(gone, Outcome.GONE)])
    info = await frontier.entry(gone.url)
    assert info is not None and (info.state, info.gone) == ("scheduled", 1)
    await asyncio.sleep(0.05)
    leases = await frontier.claim(2)
    assert gone.url in {lease.url for lease in leases}
    await frontier.complete([Completion(lease, Outcome.GONE) for lease in leases])
    info = await frontier.entry(gone.url)
    assert info is not None and info.state == "retired"
    counts = {c.domain: c for c in await frontier.counts()}
    a_counts = counts["a.test"]
    assert (a_counts.retired, a_counts.due + a_counts.scheduled) == (1, 1)
    await asyncio.sleep(0.05)
    [other] = set(urls("a.test", 2)) - {gone.url}
    assert [lease.url for lease in await frontier.claim(5)] == [other]


async def test_a_success_resets_the_gone_count(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(
        gone_limit=2, retry_delay=0.01, interval=0.01, min_interval=0, health_weight=0
    )
    await frontier.add([Entry("https://a.test/1")])
    for outcome in (Outcome.GONE, Outcome.OK, Outcome.GONE):
        [lease] = await frontier.claim(1)
        await frontier.complete([Completion(lease, outcome)])
        await asyncio.sleep(0.05)
    info = await frontier.entry("https://a.test/1")
    assert info is not None and (info.state, info.gone) == ("scheduled", 1)


async def test_entries_unseen_for_too_long_retire(make_frontier: MakeFrontier) -> None:
    # One second: the Redis backend keeps seen_at in whole seconds.
    frontier = await make_frontier(retire_unseen=1, retry_delay=0.01, health_weight=0)
    await frontier.add(entries(urls("a.test", 3)))
    await asyncio.sleep(2.1)
    await frontier.add([Entry("https://a.test/p/2")])  # re-seeded: seen again
    leases = await frontier.claim(3)
    await frontier.complete([Completion(lease, Outcome.ERROR) for lease in leases])
    states = {url: (await frontier.entry(url)).state for url in urls("a.test", 3)}  # type: ignore[union-attr]
    assert states == {
        "https://a.test/p/0": "retired",
        "https://a.test/p/1": "retired",
        "https://a.test/p/2": "scheduled",
    }


async def test_requeue_and_purge_a_domain(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(gone_limit=1, lease_ttl=TTL, max_attempts=1)
    await frontier.add(entries(urls("a.test", 3), urls("b.test", 2)))
    leases = await frontier.claim(5)
    a_leases = [lease for lease in leases if lease.domain == "a.test"]
    await frontier.complete([Completion(a_leases[0], Outcome.GONE)])
    await asyncio.sleep(TTL + 0.1)
    await frontier.reap()  # the rest of the leases die (max_attempts 1)
    counts = {c.domain: c for c in await frontier.counts()}
    assert (counts["a.test"].retired, counts["a.test"].dead) == (1, 2)

    assert await frontier.requeue_domain("a.test") == 3
    counts = {c.domain: c for c in await frontier.counts()}
    assert (counts["a.test"].due, counts["a.test"].retired, counts["a.test"].dead) == (3, 0, 0)
    info = await frontier.entry(a_leases[0].url)
    assert info is not None and (info.state, info.gone, info.attempts) == ("scheduled", 0, 0)

    await frontier.claim(1)  # one of a.test in flight while purging
    assert await frontier.purge_domain("a.test") == 3
    assert [c.domain for c in await frontier.counts()] == ["b.test"]
    assert await frontier.entry(a_leases[0].url) is None
    assert {lease.domain for lease in await frontier.claim(10)} == set()  # b.test is dead
    assert await frontier.add(entries(urls("a.test", 1))) == 1  # a fresh start


async def test_requeue_brings_entries_scheduled_for_later_forward(
    make_frontier: MakeFrontier,
) -> None:
    frontier = await make_frontier()
    await frontier.add(entries(urls("a.test", 3), urls("b.test", 1)))
    leases = await frontier.claim(4)
    a = [lease for lease in leases if lease.domain == "a.test"]
    b = [lease for lease in leases if lease.domain == "b.test"]
    await frontier.complete([Completion(a[0], Outcome.OK), Completion(a[1], Outcome.OK)])
    await frontier.complete([Completion(b[0], Outcome.OK)])
    assert await frontier.claim(10) == []  # nothing due: checked a moment ago

    assert await frontier.requeue_domain("a.test") == 2  # a[2] is in flight, left leased
    counts = {c.domain: c for c in await frontier.counts()}
    assert (counts["a.test"].due, counts["a.test"].inflight) == (2, 1)
    assert (counts["b.test"].due, counts["b.test"].scheduled) == (0, 1)
    again = await frontier.claim(10)
    assert sorted(lease.url for lease in again) == sorted([a[0].url, a[1].url])


# -- counts ---------------------------------------------------------------------------------


async def test_counts_per_domain(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(gone_limit=1, lease_ttl=TTL, max_attempts=1)
    await frontier.add(entries(urls("a.test", 6), urls("b.test", 1)))
    leases = await frontier.claim(4)
    a = [lease for lease in leases if lease.domain == "a.test"]
    b = [lease for lease in leases if lease.domain == "b.test"]
    await frontier.complete([Completion(a[0], Outcome.OK), Completion(a[1], Outcome.GONE)])
    await frontier.complete([Completion(b[0], Outcome.OK)])
    # a: 1 scheduled later, 1 retired, 1 in flight (dies), 3 due.
    await asyncio.sleep(TTL + 0.1)
    await frontier.reap()
    [inflight] = await frontier.claim(1)
    counts = {c.domain: c for c in await frontier.counts()}
    a_counts = counts["a.test"]
    assert (a_counts.due, a_counts.scheduled, a_counts.inflight) == (2, 1, 1)
    assert (a_counts.retired, a_counts.dead) == (1, 1)
    b_counts = counts["b.test"]
    assert (b_counts.due, b_counts.scheduled, b_counts.inflight) == (0, 1, 0)
    assert inflight.domain == "a.test"


async def test_next_due_in(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(interval=600, min_interval=0, lease_ttl=60)
    assert await frontier.next_due_in() is None
    await frontier.add(entries(urls("a.test", 1)))
    assert await frontier.next_due_in() == 0
    [lease] = await frontier.claim(1)
    # Only a lease in flight: due again when it would expire.
    assert await frontier.next_due_in() == pytest.approx(60, abs=2)
    await frontier.complete([Completion(lease, Outcome.OK)])
    assert await frontier.next_due_in() == pytest.approx(600, abs=2)


# -- stats ----------------------------------------------------------------------------------


async def test_stats_count_what_happened(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(lease_ttl=TTL, max_attempts=1, gone_limit=1)
    await frontier.add(entries(urls("a.test", 4)))
    ok, gone, *lost = await frontier.claim(4)
    assert (
        await frontier.complete([Completion(ok, Outcome.OK), Completion(gone, Outcome.GONE)]) == 2
    )
    assert await frontier.complete([Completion(ok, Outcome.OK)]) == 0
    await asyncio.sleep(TTL + 0.1)
    assert await frontier.reap() == len(lost) == 2
    assert dict(+frontier.stats) == {  # (+ drops the zero counts)
        "pricewatch/frontier/claimed": 4,
        "pricewatch/frontier/completed": 2,
        "pricewatch/frontier/stale": 1,
        "pricewatch/frontier/retired": 1,
        "pricewatch/frontier/reaped": 2,
        "pricewatch/frontier/dead": 2,
    }


# -- the request budget ---------------------------------------------------------------------


async def test_a_budget_plans_each_interval_from_its_rate_and_importance(
    make_frontier: MakeFrontier,
) -> None:
    """The first claim allocates the budget (from the prior rates) and leases carry the
    domain's multiplier; each completion plans its SKU's interval from it, the same on
    every backend; the planned rates add up to the budget."""
    frontier = await make_frontier(
        budget=3600.0, min_interval=1, max_interval=10**6, health_weight=0, jitter=0.1
    )
    await frontier.add([Entry(url, importance=1.0 + i) for i, url in enumerate(urls("a.test", 8))])
    await frontier.add(entries(urls("b.test", 2)))
    leases = await claim_all(frontier)
    assert {lease.domain for lease in leases} == {"a.test", "b.test"}
    mus = {lease.domain: lease.mu for lease in leases}
    assert all(mu > 0 for mu in mus.values())
    allocations = await frontier.allocations()
    assert {d: a.mu for d, a in allocations.items()} == pytest.approx(mus)
    assert all(a.gain == budget.MIN_GAIN and a.claimed > 0 for a in allocations.values())
    before = time.time()
    await frontier.complete([Completion(lease, Outcome.OK) for lease in leases])
    policy = frontier.policy
    planned_rate = 0.0
    for lease in leases:
        planned = budget.planned_interval(
            policy.prior_rate, lease.importance, lease.mu, 1, 10**6
        ) * budget.jitter(lease.url, 1, 0.1)
        assert await delay_after(frontier, lease, before) == pytest.approx(planned, abs=1)
        if lease.domain == "a.test":
            planned_rate += 3600 / planned
    # The plan is MIN_GAIN x the budget (the pace holds the spend to it); 8 SKUs: +-10 % jitter.
    assert planned_rate == pytest.approx(3600 * budget.MIN_GAIN, rel=0.15)
    # Allocated once per PRICEWATCH_BUDGET_REALLOCATE: a second pass finds nothing stale.
    assert await frontier.reallocate() == {}
    assert set(await frontier.reallocate(force=True)) == {"a.test", "b.test"}
    assert frontier.stats["pricewatch/frontier/reallocated"] == 4


async def test_fetches_update_the_rate_estimate(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(budget=36_000.0, min_interval=0)
    await frontier.add(entries(urls("a.test", 1)))
    [lease] = await frontier.claim(1)
    assert (lease.rate_changes, lease.rate_exposure, lease.observed_at) == (0, 0, 0)
    await frontier.complete([Completion(lease, Outcome.OK)])
    first = await frontier.entry(lease.url)
    assert first is not None
    prior = frontier.policy.prior_weight
    assert first.rate_changes == prior
    assert first.rate_exposure == pytest.approx(prior / frontier.policy.prior_rate)
    assert first.observed_at == pytest.approx(time.time(), abs=2)
    await frontier.requeue_domain("a.test")
    await asyncio.sleep(0.05)
    [lease] = await frontier.claim(1)
    assert lease.observed_at == pytest.approx(first.observed_at, abs=1e-6)
    await frontier.complete([Completion(lease, Outcome.OK, changed=True)])
    second = await frontier.entry(lease.url)
    assert second is not None
    keep = 1 - 1 / frontier.policy.rate_memory
    assert second.rate_changes == pytest.approx(prior * keep + 1)
    assert second.observed_at > first.observed_at
    # A page without a price says nothing about the price: the estimate stays.
    await frontier.requeue_domain("a.test")
    [lease] = await frontier.claim(1)
    await frontier.complete([Completion(lease, Outcome.NO_PRICE)])
    third = await frontier.entry(lease.url)
    assert third is not None
    assert (third.rate_changes, third.rate_exposure, third.observed_at) == pytest.approx(
        (second.rate_changes, second.rate_exposure, second.observed_at)
    )


async def test_without_a_budget_nothing_is_allocated(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(interval=1000, min_interval=0, velocity_weight=0)
    await frontier.add(entries(urls("a.test", 2)))
    leases = await frontier.claim(2)
    assert [lease.mu for lease in leases] == [0.0, 0.0]
    assert await frontier.reallocate(force=True) == {}
    now = time.time()
    await frontier.complete([Completion(lease, Outcome.OK) for lease in leases])
    for lease in leases:
        assert await delay_after(frontier, lease, now) == pytest.approx(1000, abs=5)


async def test_a_domain_budget_overrides_the_default(make_frontier: MakeFrontier) -> None:
    frontier = await make_frontier(budget=100.0, budget_domains={"b.test": 0.0})
    await frontier.add(entries(urls("a.test", 2), urls("b.test", 2)))
    leases = await claim_all(frontier)
    assert {lease.domain: lease.mu > 0 for lease in leases} == {"a.test": True, "b.test": False}
    assert set(await frontier.reallocate(force=True)) == {"a.test"}


async def test_claims_of_a_budgeted_domain_keep_its_pace(make_frontier: MakeFrontier) -> None:
    """3,600 requests an hour with a 2-second burst: a seed of 20 entries, all due, goes
    out two at once, then one a second; an unbudgeted domain is not held back."""
    frontier = await make_frontier(budget=3600.0, budget_domains={"b.test": 0.0}, burst=2.0)
    await frontier.add(entries(urls("a.test", 20), urls("b.test", 5)))
    first = await frontier.claim(50)
    assert sorted(lease.domain for lease in first) == ["a.test"] * 2 + ["b.test"] * 5
    assert [lease.domain for lease in await frontier.claim(50)] == []
    await asyncio.sleep(1.2)
    assert [lease.domain for lease in await frontier.claim(50)] == ["a.test"]
