"""Alerts on published price changes, delivered through Apprise (email, Slack, webhooks, ...).

Rules (settings, read once by :meth:`AlertConfig.from_settings`; defaults and when to change
them in ``pricewatch/settings.py``), each compared with the offer the change replaced:

- ``drop``: the price fell by at least ``PRICEWATCH_ALERT_DROP_PERCENT`` % (same currency);
- ``rise``: the price rose by at least ``PRICEWATCH_ALERT_RISE_PERCENT`` % (same currency);
- ``target``: the price reached or crossed below the SKU's target in
  ``PRICEWATCH_ALERT_TARGET_PRICES`` (keyed by SKU or product URL);
- ``back_in_stock``: ``OutOfStock`` -> ``InStock`` (``PRICEWATCH_ALERT_BACK_IN_STOCK``);
- ``out_of_stock``: anything else -> ``OutOfStock`` (``PRICEWATCH_ALERT_OUT_OF_STOCK``).

One change may match several rules: one message names them all.

Which changes alert (exactly once): the store reports the ``price_changes`` rows that the
committed batch itself inserted (:attr:`pricewatch.storage.WriteResult.published`). A
replayed batch inserts nothing, so it alerts nothing; a change held by the quarantine is
not in ``price_changes`` and alerts nothing until the confirming fetch publishes it, which
inserts the row and alerts once. A SKU's first observation has no previous offer and does
not alert.

Delivery is at most once: messages go out after the commit, from tasks of the event loop
(Apprise's ``async_notify``, which sends from worker threads), never holding up the store
writer; each channel gets ``PRICEWATCH_ALERT_TIMEOUT`` seconds. A channel that fails or
times out is logged (URL masked) and counted, and the crawl goes on; the alert is not
retried. A crash between the commit and the delivery loses those alerts: the store does
not know they were not sent, and the replay after the crash inserts nothing, so it does
not send them either. Closing the crawl waits at most ``PRICEWATCH_ALERT_TIMEOUT`` for
deliveries still in flight; those still unsent are counted as failed.

Stats: ``pricewatch/alerts/sent`` and ``pricewatch/alerts/failed`` count deliveries (one
per alert and channel).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured

from pricewatch._urls import mask_password, mask_userinfo

if TYPE_CHECKING:
    import apprise
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

    from pricewatch.storage import PublishedChange

logger = logging.getLogger(__name__)

RULES = ("drop", "rise", "target", "back_in_stock", "out_of_stock")
STATS = (
    "pricewatch/alerts/sent",  # deliveries a channel accepted (one per alert and channel)
    "pricewatch/alerts/failed",  # deliveries that failed, timed out or were cut at close
)
IN_STOCK = "InStock"
OUT_OF_STOCK = "OutOfStock"


def _percent(settings: BaseSettings, name: str) -> Decimal | None:
    raw = settings.get(name)
    if raw is None or str(raw).strip() == "":
        return None
    try:
        value = Decimal(str(raw))
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value <= 0:
        raise ValueError(f"{name} must be a positive number of percent or empty, got {raw!r}")
    return value


def _targets(settings: BaseSettings) -> dict[str, Decimal]:
    name = "PRICEWATCH_ALERT_TARGET_PRICES"
    targets: dict[str, Decimal] = {}
    for key, raw in settings.getdict(name).items():
        try:
            value = Decimal(str(raw))
        except InvalidOperation:
            value = Decimal("NaN")
        if not value.is_finite() or value < 0:
            raise ValueError(f"{name}[{key!r}] must be a price >= 0, got {raw!r}")
        targets[str(key)] = value
    return targets


def channel_name(url: str) -> str:
    """``url`` as logs may show it: Apprise's privacy form (tokens and passwords
    masked), then the project's own masking on top."""
    import apprise

    plugin = apprise.Apprise.instantiate(url)
    shown = plugin.url(privacy=True) if plugin else url.partition("://")[0] + "://***"
    return mask_userinfo(mask_password(shown))


@dataclass(frozen=True, slots=True)
class AlertConfig:
    urls: tuple[str, ...]
    drop_percent: Decimal | None = None  # None: rule off
    rise_percent: Decimal | None = None
    targets: Mapping[str, Decimal] = field(default_factory=dict)  # sku or url -> price
    back_in_stock: bool = False
    out_of_stock: bool = False
    timeout: float = 10.0

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> AlertConfig | None:
        """The configuration, or None when ``PRICEWATCH_ALERT_URLS`` is empty."""
        urls = tuple(u.strip() for u in settings.getlist("PRICEWATCH_ALERT_URLS") if u.strip())
        if not urls:
            return None
        timeout = settings.getfloat("PRICEWATCH_ALERT_TIMEOUT")
        if timeout <= 0:
            raise ValueError(f"PRICEWATCH_ALERT_TIMEOUT must be > 0, got {timeout}")
        return cls(
            urls=urls,
            drop_percent=_percent(settings, "PRICEWATCH_ALERT_DROP_PERCENT"),
            rise_percent=_percent(settings, "PRICEWATCH_ALERT_RISE_PERCENT"),
            targets=_targets(settings),
            back_in_stock=settings.getbool("PRICEWATCH_ALERT_BACK_IN_STOCK"),
            out_of_stock=settings.getbool("PRICEWATCH_ALERT_OUT_OF_STOCK"),
            timeout=timeout,
        )


@dataclass(frozen=True, slots=True)
class Alert:
    change: PublishedChange
    rules: tuple[str, ...]

    @property
    def title(self) -> str:
        c = self.change
        return f"pricewatch: {', '.join(self.rules)}: {c.sku or c.url}"

    @property
    def body(self) -> str:
        c = self.change
        return (
            f"{c.url}\n"
            f"price: {c.previous_price} {c.previous_currency} -> {c.price} {c.currency}\n"
            f"availability: {c.previous_availability or 'unknown'} -> "
            f"{c.availability or 'unknown'}\n"
            f"observed at: {c.observed_at.isoformat()}\n"
            f"rules: {', '.join(self.rules)}"
        )


def rules_matched(config: AlertConfig, change: PublishedChange) -> tuple[str, ...]:
    """The rules ``change`` triggers, in :data:`RULES` order (pure)."""
    matched = []
    old, new = change.previous_price, change.price
    same_currency = change.currency == change.previous_currency
    if same_currency and old > 0:
        moved = (new - old) * 100 / old
        if config.drop_percent is not None and -moved >= config.drop_percent:
            matched.append("drop")
        if config.rise_percent is not None and moved >= config.rise_percent:
            matched.append("rise")
    target = config.targets.get(change.sku or "", config.targets.get(change.url))
    if target is not None and new <= target and (not same_currency or old > target):
        matched.append("target")
    if (
        config.back_in_stock
        and change.previous_availability == OUT_OF_STOCK
        and change.availability == IN_STOCK
    ):
        matched.append("back_in_stock")
    if (
        config.out_of_stock
        and change.availability == OUT_OF_STOCK
        and change.previous_availability != OUT_OF_STOCK
    ):
        matched.append("out_of_stock")
    return tuple(matched)


class Alerter:
    """Sends the alerts of committed changes in the background (see the module doc)."""

    def __init__(self, config: AlertConfig, stats: StatsCollector) -> None:
        import apprise

        self.config = config
        self.stats = stats
        # Apprise's services log their full target URL at DEBUG, tokens included (Slack's
        # webhook path, for one): keep its logger at INFO or above whatever LOG_LEVEL says.
        apprise_logger = logging.getLogger("apprise")
        if apprise_logger.getEffectiveLevel() < logging.INFO:
            apprise_logger.setLevel(logging.INFO)
        self.channels: list[tuple[str, apprise.Apprise]] = []
        for url in config.urls:
            channel = apprise.Apprise()
            if not channel.add(url):
                raise ValueError(
                    f"PRICEWATCH_ALERT_URLS: Apprise cannot read {channel_name(url)!r}"
                )
            self.channels.append((channel_name(url), channel))
        self._tasks: set[asyncio.Task[None]] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Alerter:
        config = AlertConfig.from_settings(crawler.settings)
        if config is None:
            raise NotConfigured("PRICEWATCH_ALERT_URLS is empty")
        assert crawler.stats is not None
        return cls(config, crawler.stats)

    def submit(self, changes: Iterable[PublishedChange]) -> int:
        """Start delivering the alerts of ``changes`` (committed); return how many."""
        loop = asyncio.get_running_loop()
        started = 0
        for change in changes:
            rules = rules_matched(self.config, change)
            if not rules:
                continue
            alert = Alert(change, rules)
            for name, channel in self.channels:
                task = loop.create_task(self._deliver(alert, name, channel))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            started += 1
        return started

    def send(self, title: str, body: str, what: str) -> None:
        """Start delivering one message that is not about a change (a drift alarm,
        :mod:`pricewatch.drift`) to every channel; ``what`` names it in the log."""
        loop = asyncio.get_running_loop()
        for name, channel in self.channels:
            task = loop.create_task(self._deliver_text(title, body, what, name, channel))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _deliver(self, alert: Alert, name: str, channel: apprise.Apprise) -> None:
        what = f"{'+'.join(alert.rules)} of {alert.change.url}"
        await self._deliver_text(alert.title, alert.body, what, name, channel)

    async def _deliver_text(
        self, title: str, body: str, what: str, name: str, channel: apprise.Apprise
    ) -> None:
        try:
            ok = bool(
                await asyncio.wait_for(
                    channel.async_notify(body=body, title=title),
                    self.config.timeout,
                )
            )
            why = "the channel refused it"
        except TimeoutError:
            ok, why = False, f"no answer within {self.config.timeout:g}s"
        except Exception as exc:  # a broken channel never stops the crawl
            ok, why = False, f"{type(exc).__name__}: {mask_userinfo(mask_password(str(exc)))}"
        if ok:
            self.stats.inc_value("pricewatch/alerts/sent")
        else:
            self.stats.inc_value("pricewatch/alerts/failed")
            logger.warning("Alert %s not delivered to %s: %s", what, name, why)

    async def close(self) -> None:
        """Wait at most ``timeout`` for the deliveries in flight; count the rest failed."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=self.config.timeout)
        for task in pending:
            task.cancel()
        if pending:
            self.stats.inc_value("pricewatch/alerts/failed", len(pending))
            logger.warning("%d alert deliveries still unsent at close: dropped", len(pending))
