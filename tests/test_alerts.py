"""Alerts (pricewatch/alerts.py): the real StorePipeline and store (SQLite and the real
PostgreSQL) deliver through Apprise to a webhook receiver on 127.0.0.1; every rule fires
exactly once, a replayed batch sends nothing more, a held change sends nothing until a
second fetch confirms it, and a failing channel is counted without stopping anything."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from scrapy.settings import Settings
from scrapy.statscollectors import StatsCollector
from scrapy.utils.test import get_crawler

from pricewatch.alerts import AlertConfig, rules_matched
from pricewatch.items import ObservationItem
from pricewatch.pipelines import StorePipeline
from pricewatch.storage import Observation, PublishedChange
from tests.helpers import project_settings

from .test_store_contract import T0, obs


class Receiver:
    """A webhook endpoint: ``/ok`` takes every message, ``/fail`` answers 500."""

    def __init__(self) -> None:
        self.ok: list[dict[str, str]] = []
        self.failed = 0
        self.port = 0

    async def handle_ok(self, request: web.Request) -> web.Response:
        self.ok.append(json.loads(await request.text()))
        return web.Response(text="ok")

    async def handle_fail(self, request: web.Request) -> web.Response:
        await request.read()
        self.failed += 1
        return web.Response(status=500, text="down")

    def titles(self) -> list[str]:
        return sorted(m["title"] for m in self.ok)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    received = Receiver()
    app = web.Application()
    app.router.add_post("/ok", received.handle_ok)
    app.router.add_post("/fail", received.handle_fail)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    received.port = runner.addresses[0][1]
    try:
        yield received
    finally:
        await runner.cleanup()


def at(minutes: int):  # type: ignore[no-untyped-def]
    return T0 + timedelta(minutes=minutes)


def url(name: str) -> str:
    return f"https://shop.test/p/{name}"


async def committed(pipeline: StorePipeline, batches: int) -> None:
    """Wait until the pipeline has committed ``batches`` batches."""
    stats = pipeline.crawler.stats
    assert stats is not None
    deadline = time.monotonic() + 20
    while stats.get_value("pricewatch/store/batches", 0) < batches:
        assert time.monotonic() < deadline, "the batch was not written"
        await asyncio.sleep(0.02)


async def written(pipeline: StorePipeline, batch: list[Observation]) -> None:
    """Hand ``batch`` to the pipeline, wait for its commit and for the alerts it sent."""
    stats = pipeline.crawler.stats
    assert stats is not None
    before = stats.get_value("pricewatch/store/batches", 0)
    for observation in batch:
        await pipeline.process_item(ObservationItem(observation, None))
    await committed(pipeline, before + 1)
    assert pipeline.alerts is not None
    await pipeline.alerts.close()  # waits for the deliveries in flight


def alerting_pipeline(
    store_url: str, tmp_path: Path, **alerts: Any
) -> tuple[StorePipeline, StatsCollector]:
    """The real store pipeline on ``store_url``, flushing fast, with the alert settings
    ``alerts`` (``PRICEWATCH_ALERT_*``); opened by the test."""
    crawler = get_crawler(
        settings_dict=project_settings(
            PRICEWATCH_STORE_URL=store_url,
            PRICEWATCH_FRONTIER_URL=f"sqlite:///{tmp_path / 'frontier.db'}",
            PRICEWATCH_FLUSH_INTERVAL=0.05,
            **alerts,
        )
    )
    assert crawler.stats is not None
    return StorePipeline(crawler), crawler.stats


async def test_each_rule_alerts_once_replays_and_held_changes_send_nothing(
    store_url: str, tmp_path: Path, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    base = f"json://127.0.0.1:{receiver.port}"
    pipeline, stats = alerting_pipeline(
        store_url,
        tmp_path,
        PRICEWATCH_ALERT_URLS=f"{base}/ok, {base}/fail",
        PRICEWATCH_ALERT_DROP_PERCENT="10",
        PRICEWATCH_ALERT_RISE_PERCENT="10",
        PRICEWATCH_ALERT_TARGET_PRICES={"S-target": "15.00"},
        PRICEWATCH_ALERT_TIMEOUT=10.0,
    )
    await pipeline.open_spider()
    try:
        # First sightings: nothing to compare with, no alert.
        await written(
            pipeline,
            [
                obs(url("drop"), "20.00", at(0)),
                obs(url("rise"), "20.00", at(0)),
                obs(url("target"), "16.00", at(0), sku="S-target"),
                obs(url("back"), "20.00", at(0), availability="OutOfStock"),
                obs(url("out"), "20.00", at(0)),
                obs(url("held"), "20.00", at(0)),
                obs(url("same"), "20.00", at(0)),
            ],
        )
        assert receiver.ok == [] and receiver.failed == 0
        second = [
            obs(url("drop"), "17.00", at(1)),  # -15 %
            obs(url("rise"), "23.00", at(1)),  # +15 %
            obs(url("target"), "15.00", at(1), sku="S-target"),  # -6.25 %, reaches 15.00
            obs(url("back"), "20.00", at(1), availability="InStock"),
            obs(url("out"), "20.00", at(1), availability="OutOfStock"),
            obs(url("held"), "100.00", at(1)),  # x5: held by the quarantine
            obs(url("same"), "20.50", at(1)),  # +2.5 %: a change, but no rule
        ]
        await written(pipeline, second)
        assert receiver.titles() == [
            "pricewatch: back_in_stock: https://shop.test/p/back",
            "pricewatch: drop: https://shop.test/p/drop",
            "pricewatch: out_of_stock: https://shop.test/p/out",
            "pricewatch: rise: https://shop.test/p/rise",
            "pricewatch: target: S-target",
        ]
        assert "17.00 EUR" in next(m["message"] for m in receiver.ok if "drop" in m["title"])
        assert stats.get_value("pricewatch/quarantine/held") == 1
        assert (stats.get_value("pricewatch/alerts/sent"), receiver.failed) == (5, 5)
        assert stats.get_value("pricewatch/alerts/failed") == 5

        await written(pipeline, second)  # the same batch replayed: nothing new is sent
        assert len(receiver.ok) == 5 and receiver.failed == 5

        confirm = [obs(url("held"), "100.00", at(2))]  # a second fetch agrees: published
        await written(pipeline, confirm)
        assert stats.get_value("pricewatch/quarantine/confirmed") == 1
        assert len(receiver.ok) == 6
        assert receiver.ok[-1]["title"] == "pricewatch: rise: https://shop.test/p/held"
        await written(pipeline, confirm)  # replayed confirmation: no second alert
        await written(pipeline, second)
        assert len(receiver.ok) == 6
    finally:
        await pipeline.close_spider()
    assert stats.get_value("pricewatch/alerts/sent") == 6
    assert stats.get_value("pricewatch/alerts/failed") == 6 == receiver.failed
    failures = [r.getMessage() for r in caplog.records if "not delivered" in r.getMessage()]
    assert len(failures) == 6
    assert all(f"127.0.0.1:{receiver.port}/fail" in f for f in failures)


async def test_an_unreachable_channel_times_out_and_the_writer_goes_on(
    sqlite_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A channel that accepts the connection and never answers costs at most the timeout,
    counted as failed; the store keeps writing meanwhile."""
    hung: list[asyncio.StreamWriter] = []

    async def never_answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hung.append(writer)

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pipeline, stats = alerting_pipeline(
        sqlite_url,
        tmp_path,
        PRICEWATCH_ALERT_URLS=f"json://127.0.0.1:{port}/hook",
        PRICEWATCH_ALERT_TIMEOUT=3.0,
    )
    await pipeline.open_spider()
    try:
        await written(pipeline, [obs(url("a"), "20.00", at(0))])
        for minute, price in ((1, "17.00"), (2, "14.00")):  # two drops, two alerts
            await pipeline.process_item(ObservationItem(obs(url("a"), price, at(minute)), None))
            await committed(pipeline, minute + 1)
        # Both batches committed while the first alert was still waiting for its channel.
        assert stats.get_value("pricewatch/alerts/failed") is None
        assert pipeline.alerts is not None
        await pipeline.alerts.close()
    finally:
        await pipeline.close_spider()
        server.close()
        for writer in hung:
            writer.close()
    assert stats.get_value("pricewatch/alerts/failed") == 2
    assert stats.get_value("pricewatch/alerts/sent") is None
    assert any("no answer within 3s" in r.getMessage() for r in caplog.records)


async def test_tokens_never_reach_the_log_even_at_debug(
    sqlite_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Apprise's Slack service logs its webhook URL (three tokens) at DEBUG; with alerts on,
    a DEBUG log of the crawl carries no token. The webhook is unreachable from here: the
    delivery fails and is counted."""
    caplog.set_level(logging.DEBUG)
    logging.getLogger("apprise").setLevel(logging.NOTSET)
    token = "TIiajkdnlazkcOXrIdevi7FQ"
    pipeline, stats = alerting_pipeline(
        sqlite_url,
        tmp_path,
        PRICEWATCH_ALERT_URLS=f"slack://T1JJ3T3L2/A1BRTD4JD/{token}/#general",
        PRICEWATCH_ALERT_TIMEOUT=2.0,
    )
    await pipeline.open_spider()
    try:
        await written(pipeline, [obs(url("a"), "20.00", at(0))])
        await written(pipeline, [obs(url("a"), "17.00", at(1))])
    finally:
        await pipeline.close_spider()
    assert stats.get_value("pricewatch/alerts/failed") == 1
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "not delivered to slack://" in text
    assert token not in text and "A1BRTD4JD" not in text


def change(old: str, new: str, *, sku: str | None = None, **more: str) -> PublishedChange:
    return PublishedChange(
        url("x"),
        sku,
        Decimal(new),
        more.get("currency", "EUR"),
        more.get("availability", "InStock"),
        T0,
        Decimal(old),
        more.get("previous_currency", "EUR"),
        more.get("previous_availability", "InStock"),
    )


def test_rules_at_their_boundaries() -> None:
    config = AlertConfig(
        urls=("json://127.0.0.1/",),
        drop_percent=Decimal(10),
        rise_percent=None,
        targets={"S1": Decimal("15.00")},
    )
    assert rules_matched(config, change("20.00", "18.00")) == ("drop",)  # exactly -10 %
    assert rules_matched(config, change("20.00", "18.01")) == ()
    assert rules_matched(config, change("20.00", "40.00")) == ()  # rise rule off
    assert rules_matched(config, change("15.00", "14.00", sku="S1")) == ()  # already below
    assert rules_matched(config, change("15.50", "15.00", sku="S1")) == ("target",)
    assert (
        rules_matched(config, change("20.00", "10.00", currency="USD", previous_currency="EUR"))
        == ()
    )  # another currency: no percentage
    assert (
        rules_matched(
            config,
            change("20.00", "20.00", availability="InStock", previous_availability="OutOfStock"),
        )
        == ()
    )  # stock rules off


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PRICEWATCH_ALERT_DROP_PERCENT", "-5", "PRICEWATCH_ALERT_DROP_PERCENT .*'-5'"),
        ("PRICEWATCH_ALERT_RISE_PERCENT", "ten", "PRICEWATCH_ALERT_RISE_PERCENT .*'ten'"),
        ("PRICEWATCH_ALERT_TARGET_PRICES", {"S1": "x"}, r"PRICEWATCH_ALERT_TARGET_PRICES\['S1'\]"),
        ("PRICEWATCH_ALERT_TIMEOUT", 0, "PRICEWATCH_ALERT_TIMEOUT must be > 0, got 0"),
    ],
)
def test_invalid_settings_name_the_setting(name: str, value: object, message: str) -> None:
    settings = Settings(project_settings({name: value}, PRICEWATCH_ALERT_URLS="json://h/"))
    with pytest.raises(ValueError, match=message):
        AlertConfig.from_settings(settings)


def test_off_without_urls_and_secrets_never_logged() -> None:
    assert AlertConfig.from_settings(Settings(project_settings(PRICEWATCH_ALERT_URLS=""))) is None
    crawler = get_crawler(settings_dict=project_settings(PRICEWATCH_ALERT_URLS=""))
    assert StorePipeline(crawler).alerts is None
    from pricewatch.alerts import channel_name

    shown = channel_name("json://user:hunter2@127.0.0.1:9/hook?token=s3cret")
    assert "hunter2" not in shown and "s3cret" not in shown and "127.0.0.1" in shown
    bad = get_crawler(settings_dict=project_settings(PRICEWATCH_ALERT_URLS="nosuch://t:hunter2@x/"))
    with pytest.raises(ValueError, match="PRICEWATCH_ALERT_URLS") as caught:
        StorePipeline(bad)
    assert "hunter2" not in str(caught.value)
