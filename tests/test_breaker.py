"""Unit tests of the circuit breaker middleware: built with get_crawler, a fake monotonic
clock, and a real SQLite frontier (the shared pause)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from scrapy import signals
from scrapy.http import HtmlResponse, Request, Response
from scrapy.utils.test import get_crawler

from pricewatch.exceptions import Blocked, DomainDeferred
from pricewatch.frontier import Entry, Lease
from pricewatch.leases import CrawlResources
from pricewatch.meta import BREAKER_PROBE_META as PROBE_META
from pricewatch.politeness.breaker import CircuitBreakerMiddleware, State
from pricewatch.politeness.challenge import ChallengeDetector

from .fixtures.redis import MakeFrontier
from .helpers import project_settings

THRESHOLD_IN_BUILD = 3
SHOP = "shop-a.test"
OTHER = "shop-b.test"
PRODUCT = (
    b"<html><head><title>Kettle</title></head><body><span class=price>19.99</span></body></html>"
)
CHALLENGE = (
    b"<html><head><title>Just a moment</title></head><body><h1>Please verify you are human</h1>"
    b'<div class="g-recaptcha" data-sitekey="x"></div></body></html>'
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def build(tmp_path: Path, **settings: Any) -> tuple[CircuitBreakerMiddleware, Clock]:
    base: dict[str, Any] = {
        "PRICEWATCH_FRONTIER_URL": f"sqlite:///{tmp_path / 'frontier.db'}",
        "PRICEWATCH_BREAKER_THRESHOLD": THRESHOLD_IN_BUILD,
        "PRICEWATCH_BREAKER_WINDOW": 30.0,
        "PRICEWATCH_BREAKER_COOLDOWN": 10.0,
        "PRICEWATCH_BREAKER_COOLDOWN_FACTOR": 2.0,
        "PRICEWATCH_BREAKER_MAX_COOLDOWN": 25.0,
        "PRICEWATCH_BREAKER_HALF_OPEN_RETRY": 3.0,
    }
    base.update(settings)
    crawler = get_crawler(settings_dict=project_settings(base))
    mw = CircuitBreakerMiddleware.from_crawler(crawler)
    clock = Clock()
    mw.clock = clock
    return mw, clock


@pytest.fixture
async def closing(tmp_path: Path) -> AsyncIterator[list[CircuitBreakerMiddleware]]:
    built: list[CircuitBreakerMiddleware] = []
    yield built
    for mw in built:
        await CrawlResources.of(mw.crawler)._spider_closed()


def req(host: str = SHOP, path: str = "/p/1", **meta: Any) -> Request:
    return Request(f"http://{host}/{path.lstrip('/')}", meta=meta)


def resp(request: Request, status: int = 200, body: bytes = PRODUCT, **headers: str) -> Response:
    return HtmlResponse(
        request.url, status=status, body=body, headers=headers, request=request, encoding="utf-8"
    )


def stat(mw: CircuitBreakerMiddleware, name: str) -> int:
    return int(mw.stats.get_value(f"pricewatch/{name}", 0))


async def block(mw: CircuitBreakerMiddleware, host: str = SHOP, **headers: str) -> Response:
    """One request that the shop answers 429; returns the response if it got through."""
    request = req(host)
    mw.process_request(request)
    return await mw.process_response(request, resp(request, 429, b"slow down", **headers))


async def trip(mw: CircuitBreakerMiddleware, host: str = SHOP, **headers: str) -> Blocked:
    for _ in range(mw.config.threshold - 1):
        await block(mw, host)
    with pytest.raises(Blocked) as info:
        await block(mw, host, **headers)
    return info.value


# -- settings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PRICEWATCH_BREAKER_THRESHOLD", 0, "PRICEWATCH_BREAKER_THRESHOLD must be >= 1, got 0"),
        ("PRICEWATCH_BREAKER_WINDOW", -1, "PRICEWATCH_BREAKER_WINDOW must be > 0, got -1.0"),
        ("PRICEWATCH_BREAKER_COOLDOWN", 0, "PRICEWATCH_BREAKER_COOLDOWN must be > 0, got 0.0"),
        (
            "PRICEWATCH_BREAKER_COOLDOWN_FACTOR",
            0.5,
            "PRICEWATCH_BREAKER_COOLDOWN_FACTOR must be >= 1, got 0.5",
        ),
        (
            "PRICEWATCH_BREAKER_MAX_COOLDOWN",
            5,
            "PRICEWATCH_BREAKER_MAX_COOLDOWN must be >= PRICEWATCH_BREAKER_COOLDOWN (10.0), "
            "got 5.0",
        ),
        ("PRICEWATCH_BREAKER_STATUS_CODES", ["abc"], "PRICEWATCH_BREAKER_STATUS_CODES must be"),
        (
            "PRICEWATCH_BREAKER_STATUS_CODES",
            [42],
            "PRICEWATCH_BREAKER_STATUS_CODES must be HTTP statuses, got [42]",
        ),
        ("PRICEWATCH_BREAKER_HALF_OPEN_RETRY", -1, "PRICEWATCH_BREAKER_HALF_OPEN_RETRY must be"),
        ("PRICEWATCH_CHALLENGE_MARKERS", ["ok", " "], "PRICEWATCH_CHALLENGE_MARKERS must hold"),
        ("PRICEWATCH_CHALLENGE_SCAN_BYTES", 0, "PRICEWATCH_CHALLENGE_SCAN_BYTES must be >= 1"),
    ],
    ids=lambda v: str(v)[:40],
)
def test_invalid_settings_name_the_setting_and_value(
    tmp_path: Path, name: str, value: Any, message: str
) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        build(tmp_path, **{name: value})


# -- closed -> open -----------------------------------------------------------------------


async def test_opens_after_threshold_blocks_and_defers_without_losing_the_url(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware]
) -> None:
    mw, clock = build(tmp_path)
    closing.append(mw)
    # Below the threshold a 429 goes on to the retry middleware.
    assert (await block(mw)).status == 429
    assert (await block(mw)).status == 429
    assert mw.circuit(SHOP).state is State.CLOSED
    with pytest.raises(Blocked) as opened:  # the third block opens the circuit
        await block(mw)
    assert opened.value.retry_after == pytest.approx(10.0)
    assert mw.circuit(SHOP).state is State.OPEN
    assert stat(mw, "breaker/opened") == 1
    assert stat(mw, "breaker/blocks") == 3

    clock.now += 4
    with pytest.raises(DomainDeferred) as info:
        mw.process_request(req())
    assert info.value.retry_after == pytest.approx(6.0)
    assert stat(mw, "breaker/deferred") == 1
    # Other domains are untouched.
    assert mw.process_request(req(OTHER)) is None
    assert mw.open_for(SHOP) == pytest.approx(4.0)
    assert mw.open_for(OTHER) is None


async def test_blocks_outside_the_window_do_not_add_up(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware]
) -> None:
    mw, clock = build(tmp_path)
    closing.append(mw)
    for _ in range(5):
        await block(mw)
        await block(mw)
        clock.now += 31  # the window is 30 s
    assert mw.circuit(SHOP).state is State.CLOSED
    assert stat(mw, "breaker/opened") == 0


async def test_opening_pauses_the_domain_for_every_worker(
    tmp_path: Path,
    closing: list[CircuitBreakerMiddleware],
    frontier_url: str,
    make_frontier: MakeFrontier,
) -> None:
    """On SQLite and Redis: another worker sharing the schedule is handed nothing of the
    domain until the cooldown ends."""
    mw, _ = build(tmp_path, PRICEWATCH_FRONTIER_URL=frontier_url)
    closing.append(mw)
    other_worker = await make_frontier()
    await other_worker.add(
        [Entry(f"http://{SHOP}/p/{i}") for i in range(3)]
        + [Entry(f"http://{OTHER}/p/{i}") for i in range(3)]
    )
    await trip(mw)
    leases = await other_worker.claim(10)
    assert {lease.domain for lease in leases} == {OTHER}
    assert len(leases) == 3
    # What is left (the paused domain) is due when the cooldown ends.
    next_due = await other_worker.next_due_in()
    assert next_due is not None and 8.5 < next_due <= 10.0


async def test_blocked_response_while_open_ends_blocked_with_time_left(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware]
) -> None:
    mw, clock = build(tmp_path)
    closing.append(mw)
    inflight = req()
    mw.process_request(inflight)  # sent before the circuit opened
    await trip(mw)
    clock.now += 2
    with pytest.raises(Blocked) as info:
        await mw.process_response(inflight, resp(inflight, 503, b"busy"))
    assert info.value.retry_after == pytest.approx(8.0)
    assert stat(mw, "breaker/opened") == 1


# -- Retry-After ----------------------------------------------------------------------------


def http_date(seconds: float) -> str:
    return format_datetime(datetime.now(UTC) + timedelta(seconds=seconds), usegmt=True)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("120", 120.0),
        (None, 10.0),  # no header: the cooldown
        ("3", 10.0),  # shorter than the cooldown: the cooldown
        ("soon", 10.0),  # malformed: ignored
        ("-5", 10.0),
        ("Wed, 32 Foo 2026 99:00:00 GMT", 10.0),
    ],
    ids=["seconds", "absent", "short", "malformed", "negative", "bad-date"],
)
async def test_open_lasts_at_least_retry_after(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware], header: str | None, expected: float
) -> None:
    mw, _ = build(tmp_path)
    closing.append(mw)
    blocked = await trip(mw, **({"Retry-After": header} if header is not None else {}))
    assert blocked.retry_after == pytest.approx(expected)
    with pytest.raises(DomainDeferred) as info:
        mw.process_request(req())
    assert info.value.retry_after == pytest.approx(expected)


async def test_open_honours_retry_after_as_http_date(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware]
) -> None:
    mw, _ = build(tmp_path)
    closing.append(mw)
    blocked = await trip(mw, **{"Retry-After": http_date(90)})
    assert blocked.retry_after is not None
    assert 88.0 <= blocked.retry_after <= 90.5


async def test_longer_retry_after_while_open_extends_the_pause(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware]
) -> None:
    mw, _ = build(tmp_path)
    closing.append(mw)
    inflight = req()
    mw.process_request(inflight)
    await trip(mw)
    with pytest.raises(Blocked) as info:
        await mw.process_response(inflight, resp(inflight, 429, b"", **{"Retry-After": "40"}))
    assert info.value.retry_after == pytest.approx(40.0)
    frontier = await CrawlResources.of(mw.crawler).frontier()
    await frontier.add([Entry(f"http://{SHOP}/p/9")])
    next_due = await frontier.next_due_in()
    assert next_due is not None and 38.0 <= next_due <= 40.5


# -- open -> half-open -> closed / reopened --------------------------------------------------


async def test_half_open_lets_one_probe_through_and_success_closes(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware]
) -> None:
    mw, clock = build(tmp_path)
    closing.append(mw)
    await trip(mw)
    clock.now += 10.5
    probe = req()
    assert mw.process_request(probe) is None
    assert probe.meta[PROBE_META] == mw.circuit(SHOP).probe is not None
    assert mw.circuit(SHOP).state is State.HALF_OPEN
    assert stat(mw, "breaker/half_open") == 1
    with pytest.raises(DomainDeferred) as info:  # one probe at a time
        mw.process_request(req(path="/p/2"))
    assert info.value.retry_after == pytest.approx(3.0)
    await mw.process_response(probe, resp(probe))
    assert mw.circuit(SHOP).state is State.CLOSED
    assert stat(mw, "breaker/closed") == 1
    assert mw.open_for(SHOP) is None
    after = req(path="/p/3")
    assert mw.process_request(after) is None
    assert PROBE_META not in after.meta


@pytest.mark.parametrize(
    ("status", "body"), [(429, b""), (503, b""), (200, CHALLENGE), (500, b"")], ids=str
)
async def test_failed_probe_reopens_with_a_longer_cooldown(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware], status: int, body: bytes
) -> None:
    mw, clock = build(tmp_path)
    closing.append(mw)
    await trip(mw)
    for cooldown in (20.0, 25.0, 25.0):  # x2, then capped at MAX_COOLDOWN
        clock.now += mw.circuit(SHOP).remaining(clock.now) + 0.1
        probe = req()
        mw.process_request(probe)
        try:
            await mw.process_response(probe, resp(probe, status, body))
        except Blocked as exc:
            assert exc.retry_after == pytest.approx(cooldown)
        circuit = mw.circuit(SHOP)
        assert circuit.state is State.OPEN
        assert circuit.remaining(clock.now) == pytest.approx(cooldown)
    assert stat(mw, "breaker/opened") == 4
    assert stat(mw, "breaker/half_open") == 3
    assert stat(mw, "breaker/closed") == 0
    # It has been open, without closing, since the first trip.
    assert mw.open_for(SHOP) == pytest.approx(clock.now - 1000.0)


async def test_probe_network_error_reopens(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware]
) -> None:
    mw, clock = build(tmp_path)
    closing.append(mw)
    await trip(mw)
    clock.now += 11
    probe = req()
    mw.process_request(probe)
    await mw.process_exception(probe, TimeoutError("read timed out"))
    assert mw.circuit(SHOP).state is State.OPEN
    assert mw.circuit(SHOP).remaining(clock.now) == pytest.approx(20.0)


async def test_lost_probe_does_not_wedge_half_open(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware]
) -> None:
    mw, clock = build(tmp_path, PRICEWATCH_BREAKER_PROBE_TIMEOUT=15)
    closing.append(mw)
    await trip(mw)
    clock.now += 11
    mw.process_request(req())  # a probe that never answers
    with pytest.raises(DomainDeferred):
        mw.process_request(req(path="/p/2"))
    clock.now += 16
    second = req(path="/p/3")
    assert mw.process_request(second) is None
    assert second.meta[PROBE_META] == mw.circuit(SHOP).probe is not None


# -- challenge pages -------------------------------------------------------------------------


async def test_challenge_page_is_blocked_and_counts_toward_the_circuit(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware]
) -> None:
    mw, _ = build(tmp_path)
    closing.append(mw)
    for _ in range(2):
        request = req()
        with pytest.raises(Blocked, match="challenge page"):
            await mw.process_response(request, resp(request, 200, CHALLENGE))
    assert stat(mw, "challenge/detected") == 2
    assert mw.circuit(SHOP).state is State.CLOSED
    with pytest.raises(Blocked):  # the third block of any kind opens it
        await block(mw)
    assert mw.circuit(SHOP).state is State.OPEN


@pytest.mark.parametrize(
    ("markers", "body", "challenge"),
    [
        (None, PRODUCT, False),
        (None, CHALLENGE, True),
        (None, b"<html><body>Please VERIFY YOU ARE HUMAN</body></html>", True),
        (["px-block"], CHALLENGE, False),
        (["px-block"], b"<html><div id=px-block>wall</div></html>", True),
        ([], CHALLENGE, False),
    ],
    ids=["product", "default-markers", "case-insensitive", "custom-misses", "custom-hits", "off"],
)
async def test_challenge_markers_are_configurable(
    tmp_path: Path,
    closing: list[CircuitBreakerMiddleware],
    markers: list[str] | None,
    body: bytes,
    challenge: bool,
) -> None:
    extra = {} if markers is None else {"PRICEWATCH_CHALLENGE_MARKERS": markers}
    mw, _ = build(tmp_path, **extra)
    closing.append(mw)
    request = req()
    if challenge:
        with pytest.raises(Blocked):
            await mw.process_response(request, resp(request, 200, body))
    else:
        assert (await mw.process_response(request, resp(request, 200, body))).status == 200
    assert stat(mw, "challenge/detected") == int(challenge)


async def test_challenge_detected_with_the_breaker_disabled(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware]
) -> None:
    mw, _ = build(tmp_path, PRICEWATCH_BREAKER_ENABLED=False)
    closing.append(mw)
    for _ in range(5):
        assert (await block(mw)).status == 429
    request = req()
    with pytest.raises(Blocked):
        await mw.process_response(request, resp(request, 200, CHALLENGE))
    assert mw.process_request(req()) is None
    assert stat(mw, "breaker/opened") == 0


async def test_dont_break_circuit_meta_is_neither_gated_nor_counted(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware]
) -> None:
    mw, _ = build(tmp_path)
    closing.append(mw)
    await trip(mw)
    exempt = req(dont_break_circuit=True)
    assert mw.process_request(exempt) is None
    response = resp(exempt, 429, b"")
    assert await mw.process_response(exempt, response) is response
    assert stat(mw, "breaker/blocks") == 3


async def test_lease_domain_is_the_circuit_key(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware]
) -> None:
    mw, _ = build(tmp_path)
    closing.append(mw)
    lease = Lease(url=f"http://{SHOP}/p/1", domain=SHOP, token="t", deadline=time.time() + 60)
    await trip(mw)
    with pytest.raises(DomainDeferred):
        mw.process_request(req(pricewatch_lease=lease))
    # robots.txt is never gated (Scrapy's robots middleware fetches it for the domain).
    assert mw.process_request(req(path="/robots.txt")) is None


async def test_requests_queued_before_the_circuit_opened_are_deferred_at_transfer(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware]
) -> None:
    """process_request ran while closed, then the request waited in the slot queue: the
    downloader asks again (before_transfer) as it leaves the queue."""
    mw, _ = build(tmp_path)
    closing.append(mw)
    queued = req(path="/p/9")
    assert mw.process_request(queued) is None
    await trip(mw)
    with pytest.raises(DomainDeferred):
        mw.before_transfer(queued)
    assert stat(mw, "breaker/deferred") == 1


async def test_the_probe_passes_its_transfer_gate_but_a_stale_probe_copy_does_not(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware]
) -> None:
    mw, clock = build(tmp_path)
    closing.append(mw)
    await trip(mw)
    clock.now += 11
    first = req()
    mw.process_request(first)
    mw.before_transfer(first)  # the probe on its way out of the slot queue
    with pytest.raises(Blocked):  # a failed probe: reopens for 20 s
        await mw.process_response(first, resp(first, 503))
    clock.now += 21
    second = req(path="/p/2")
    mw.process_request(second)  # the new probe
    stale = first.copy()  # e.g. a retry of the first probe, meta copied
    with pytest.raises(DomainDeferred):
        mw.process_request(stale)
    mw.before_transfer(second)
    await mw.process_response(second, resp(second))
    assert mw.circuit(SHOP).state is State.CLOSED


async def test_blocks_count_when_downloaded_so_the_gate_closes_before_process_response(
    tmp_path: Path, closing: list[CircuitBreakerMiddleware]
) -> None:
    """Scrapy frees the slot (and sends the next queued request) between the
    response_downloaded signal and process_response: the block counts at the signal."""
    mw, _ = build(tmp_path)
    closing.append(mw)
    sent = [req(path=f"/p/{i}") for i in range(THRESHOLD_IN_BUILD)]
    for request in sent:
        mw.process_request(request)
    queued = req(path="/p/queued")
    mw.process_request(queued)
    responses = [resp(request, 429, b"") for request in sent]
    for request, response in zip(sent, responses, strict=True):
        mw.crawler.signals.send_catch_log(
            signal=signals.response_downloaded, response=response, request=request, spider=None
        )
    assert mw.circuit(SHOP).state is State.OPEN
    with pytest.raises(DomainDeferred):
        mw.before_transfer(queued)
    for request, response in zip(sent, responses, strict=True):
        with pytest.raises(Blocked):
            await mw.process_response(request, response)
    assert stat(mw, "breaker/blocks") == THRESHOLD_IN_BUILD  # each counted once
    assert stat(mw, "breaker/opened") == 1
    await asyncio.sleep(0.2)  # the frontier pause runs as a task
    frontier = await CrawlResources.of(mw.crawler).frontier()
    await frontier.add([Entry(f"http://{SHOP}/p/77")])
    assert await frontier.claim(5) == []


def test_one_detector_per_crawler_scans_a_response_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The adaptive limit, the breaker and the sessions middleware read one detector: a
    response is searched once, however many of them ask; the next response is searched."""
    crawler = get_crawler(settings_dict=project_settings())
    detector = ChallengeDetector.for_crawler(crawler)
    assert ChallengeDetector.for_crawler(crawler) is detector
    other = get_crawler(settings_dict=project_settings())
    assert ChallengeDetector.for_crawler(other) is not detector
    scans: list[Response] = []
    scan = ChallengeDetector._scan

    def counted(self: ChallengeDetector, response: Response) -> str | None:
        scans.append(response)
        return scan(self, response)

    monkeypatch.setattr(ChallengeDetector, "_scan", counted)
    wall, page = req(), req(path="/p/2")
    wall_response, page_response = resp(wall, 200, CHALLENGE), resp(page)
    assert detector.match(wall_response) == detector.match(wall_response) == "g-recaptcha"
    assert detector.match(page_response) is None
    assert detector.match(page_response) is None
    assert scans == [wall_response, page_response]
