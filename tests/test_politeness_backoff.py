"""Backoff retries: full jitter, capped, never before Retry-After; the wait happens in the
scheduler, and a wait longer than the lease goes back to the frontier."""

from __future__ import annotations

import asyncio
import random
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scrapy import Spider
from scrapy.http import HtmlResponse, Request, Response
from scrapy.utils.test import get_crawler

from pricewatch.exceptions import Blocked
from pricewatch.frontier import Lease
from pricewatch.meta import NOT_BEFORE_META
from pricewatch.politeness.backoff import BackoffPolicy, BackoffRetryMiddleware
from pricewatch.politeness.scheduler import BackoffScheduler

from .helpers import project_settings

SCHEDULER = "pricewatch.politeness.scheduler.BackoffScheduler"
# Scrapy's default DownloaderAwarePriorityQueue needs a running engine.
SCHEDULER_SETTINGS = {
    "SCHEDULER": SCHEDULER,
    "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
}


def build(**settings: Any) -> BackoffRetryMiddleware:
    base: dict[str, Any] = {
        "SCHEDULER": SCHEDULER,
        "RETRY_TIMES": 2,
        "RETRY_HTTP_CODES": [429, 500, 502, 503, 504],
        "PRICEWATCH_BACKOFF_BASE": 1.0,
        "PRICEWATCH_BACKOFF_MAX": 8.0,
        "DOWNLOAD_TIMEOUT": 30,
    }
    base.update(settings)
    crawler = get_crawler(Spider, settings_dict=project_settings(base))
    crawler.spider = Spider("test")  # what get_retry_request reads its settings from
    crawler.spider.crawler = crawler
    mw = BackoffRetryMiddleware.from_crawler(crawler)
    mw.rng = random.Random(1)
    return mw


def lease(ttl: float = 300.0) -> Lease:
    return Lease(
        url="http://shop.test/p/1", domain="shop.test", token="t", deadline=time.time() + ttl
    )


def req(**meta: Any) -> Request:
    return Request("http://shop.test/p/1", meta=meta)


def resp(request: Request, status: int, **headers: str) -> Response:
    return HtmlResponse(request.url, status=status, body=b"", headers=headers, request=request)


def stat(mw: BackoffRetryMiddleware, name: str) -> int:
    return int(mw.stats.get_value(name, 0))


# -- the policy --------------------------------------------------------------------------------


def test_ceiling_doubles_and_is_capped() -> None:
    policy = BackoffPolicy(base=0.5, cap=3.0)
    assert [policy.ceiling(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert policy.ceiling(10_000) == 3.0


@given(
    attempt=st.integers(min_value=1, max_value=100),
    retry_after=st.one_of(st.none(), st.floats(min_value=0, max_value=86400)),
    seed=st.integers(),
)
def test_delay_is_full_jitter_and_never_before_retry_after(
    attempt: int, retry_after: float | None, seed: int
) -> None:
    policy = BackoffPolicy(base=1.0, cap=30.0)
    delay = policy.delay(attempt, retry_after, random.Random(seed))
    assert 0.0 <= delay <= max(policy.ceiling(attempt), retry_after or 0.0)
    if retry_after is not None:
        assert delay >= retry_after


def test_full_jitter_spreads_over_the_whole_range() -> None:
    policy = BackoffPolicy(base=1.0, cap=30.0)
    rng = random.Random(7)
    delays = [policy.delay(4, None, rng) for _ in range(2000)]
    assert min(delays) < 0.5 and max(delays) > 7.5  # uniform over [0, 8]
    assert 3.6 < sum(delays) / len(delays) < 4.4


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"PRICEWATCH_BACKOFF_BASE": 0}, "PRICEWATCH_BACKOFF_BASE must be > 0, got 0.0"),
        (
            {"PRICEWATCH_BACKOFF_BASE": 2, "PRICEWATCH_BACKOFF_MAX": 1},
            "PRICEWATCH_BACKOFF_MAX must be >= PRICEWATCH_BACKOFF_BASE (2.0), got 1.0",
        ),
        (
            {"SCHEDULER": "scrapy.core.scheduler.Scheduler"},
            "BackoffRetryMiddleware needs SCHEDULER = "
            "'pricewatch.politeness.scheduler.BackoffScheduler', "
            "got 'scrapy.core.scheduler.Scheduler'",
        ),
    ],
    ids=["base", "max", "scheduler"],
)
def test_invalid_settings_name_the_setting_and_value(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as info:
        build(**settings)
    assert str(info.value) == message


# -- the middleware ---------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_retryable_status_is_retried_after_a_jittered_backoff(status: int) -> None:
    mw = build()
    first = req(pricewatch_lease=lease())
    before = time.monotonic()
    retry = mw.process_response(first, resp(first, status))
    assert isinstance(retry, Request)
    assert retry.meta["retry_times"] == 1
    wait = retry.meta[NOT_BEFORE_META] - before
    assert 0.0 <= wait <= 1.0 + 0.1  # ceiling of the 1st retry: BASE
    second = mw.process_response(retry, resp(retry, status))
    assert isinstance(second, Request)
    assert second.meta["retry_times"] == 2
    assert second.meta[NOT_BEFORE_META] - time.monotonic() <= 2.0 + 0.1
    # RETRY_TIMES = 2: the third failure reaches the spider.
    final = resp(second, status)
    assert mw.process_response(second, final) is final
    assert stat(mw, "retry/count") == 2
    assert stat(mw, "retry/max_reached") == 1
    assert stat(mw, "pricewatch/backoff/delayed") == 2


@pytest.mark.parametrize(
    ("header", "floor"),
    [("5", 5.0), ("date", 20.0), ("banana", None), ("", None), ("1e9", None)],
    ids=["seconds", "http-date", "malformed", "empty", "not-digits"],
)
def test_retry_waits_at_least_retry_after(header: str, floor: float | None) -> None:
    mw = build()
    if header == "date":
        when = datetime.now(UTC) + timedelta(seconds=21)
        header = format_datetime(when.replace(microsecond=0), usegmt=True)
    request = req(pricewatch_lease=lease())
    before = time.monotonic()
    retry = mw.process_response(request, resp(request, 429, **{"Retry-After": header}))
    assert isinstance(retry, Request)
    wait = retry.meta[NOT_BEFORE_META] - before
    if floor is None:  # ignored: the jittered backoff alone
        assert 0.0 <= wait <= 1.1
        assert stat(mw, "pricewatch/backoff/retry_after") == 0
    else:
        assert floor - 0.1 <= wait <= floor + 1.5
        assert stat(mw, "pricewatch/backoff/retry_after") == 1


def test_dont_retry_and_other_statuses_pass_through() -> None:
    mw = build()
    request = req(dont_retry=True)
    response = resp(request, 503)
    assert mw.process_response(request, response) is response
    ok = req()
    response = resp(ok, 404)
    assert mw.process_response(ok, response) is response
    assert stat(mw, "retry/count") == 0


def test_max_retry_times_meta_beats_the_setting() -> None:
    mw = build()
    request = req(max_retry_times=0)
    response = resp(request, 503)
    assert mw.process_response(request, response) is response


def test_a_wait_that_outlives_the_lease_goes_to_the_frontier() -> None:
    mw = build()
    # 40 s left on the lease; a 429 asks for 60 s: the frontier must schedule it.
    request = req(pricewatch_lease=lease(ttl=40))
    with pytest.raises(Blocked) as info:
        mw.process_response(request, resp(request, 429, **{"Retry-After": "60"}))
    assert info.value.retry_after == pytest.approx(60.0)
    # A 5xx reaches the spider (outcome error; the frontier reads Retry-After itself).
    request = req(pricewatch_lease=lease(ttl=40))
    response = resp(request, 503, **{"Retry-After": "60"})
    assert mw.process_response(request, response) is response
    assert stat(mw, "pricewatch/backoff/to_frontier") == 2
    assert stat(mw, "pricewatch/backoff/delayed") == 0


# -- the scheduler ----------------------------------------------------------------------------


async def test_scheduler_holds_a_request_until_its_time() -> None:
    crawler = get_crawler(Spider, settings_dict=project_settings(SCHEDULER_SETTINGS))
    scheduler = BackoffScheduler.from_crawler(crawler)
    scheduler.open(Spider("test"))
    try:
        later = Request("http://shop.test/later", meta={NOT_BEFORE_META: time.monotonic() + 0.3})
        now = Request("http://shop.test/now", meta={NOT_BEFORE_META: time.monotonic() - 1})
        assert scheduler.enqueue_request(later)
        assert scheduler.enqueue_request(now)
        assert len(scheduler) == 2 and scheduler.has_pending_requests()
        assert scheduler.next_request() is now
        assert scheduler.next_request() is None  # held back, but still pending
        assert scheduler.has_pending_requests()
        await asyncio.sleep(0.45)
        assert scheduler.next_request() is later
        assert not scheduler.has_pending_requests()
        assert crawler.stats.get_value("pricewatch/backoff/held") == 1
        assert crawler.stats.get_value("pricewatch/backoff/released") == 1
    finally:
        scheduler.close("finished")


async def test_scheduler_releases_in_time_order_and_counts_abandoned_on_close() -> None:
    crawler = get_crawler(Spider, settings_dict=project_settings(SCHEDULER_SETTINGS))
    scheduler = BackoffScheduler.from_crawler(crawler)
    scheduler.open(Spider("test"))
    t = time.monotonic()
    for name, offset in (("c", 0.25), ("a", 0.05), ("b", 0.15), ("z", 60.0)):
        scheduler.enqueue_request(
            Request(f"http://shop.test/{name}", meta={NOT_BEFORE_META: t + offset})
        )
    released = []
    for _ in range(3):
        await asyncio.sleep(0.1)
        request = scheduler.next_request()
        assert request is not None
        released.append(request.url[-1])
        assert scheduler.next_request() is None  # the next one is not due yet
    assert released == ["a", "b", "c"]
    assert len(scheduler) == 1  # "z" is still held
    scheduler.close("finished")
    assert crawler.stats.get_value("pricewatch/backoff/abandoned") == 1
