"""The item contract: what the validation stage lets through, and why it drops the rest."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from scrapy.exceptions import DropItem
from scrapy.utils.test import get_crawler

from pricewatch.extract import Offer
from pricewatch.items import ObservationItem, OfferItem
from pricewatch.pipelines import BatchOffloader, ValidationPipeline
from pricewatch.spiders.products import ProductSpider
from pricewatch.validation import InvalidOffer, redact, validate

from .helpers import project_settings

MAX = Decimal("100000000")
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def item(**offer: object) -> OfferItem:
    fields: dict[str, object] = {"price": Decimal("19.99"), "currency": "EUR"}
    fields.update(offer)
    return OfferItem(
        url="https://shop.example/p/1",
        domain="shop.example",
        offer=Offer(**fields),
        fetched_at=NOW,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("offer", "reason"),
    [
        pytest.param({"price": None}, "no_price", id="null"),
        pytest.param({"price": Decimal("0")}, "not_positive", id="zero"),
        pytest.param({"price": Decimal("-5.00")}, "not_positive", id="negative"),
        pytest.param({"price": Decimal("NaN")}, "not_finite", id="nan"),
        pytest.param({"price": Decimal("Infinity")}, "not_finite", id="infinity"),
        pytest.param({"price": Decimal("sNaN")}, "not_finite", id="signalling-nan"),
        pytest.param({"price": Decimal("1E+9")}, "absurd", id="absurd"),
        pytest.param({"price": Decimal("1.000001")}, "scale", id="too-many-decimals"),
        pytest.param({"currency": None}, "no_currency", id="no-currency"),
        pytest.param({"currency": "EURO"}, "currency", id="not-iso"),
        pytest.param({"currency": "XYZ"}, "currency", id="unknown-code"),
        pytest.param({"currency": "$"}, "currency", id="symbol"),
        pytest.param({"availability": "Maybe"}, "availability", id="availability"),
        pytest.param({"regular_price": Decimal("-1")}, "not_positive", id="negative-list-price"),
    ],
)
def test_invalid_offers_are_dropped_with_a_reason(offer: dict[str, object], reason: str) -> None:
    with pytest.raises(InvalidOffer) as info:
        validate(item(**offer), MAX)
    assert info.value.reason == reason


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        pytest.param("19.99", "19.99", id="cents"),
        pytest.param("0.10", "0.10", id="trailing-zero"),
        pytest.param("1E+2", "100", id="exponent"),
        pytest.param("1299", "1299", id="integer-yen"),
        pytest.param("1299.00", "1299.00", id="scale-kept"),
        pytest.param("19999999.99", "19999999.99", id="large"),
        pytest.param("1.2345", "1.2345", id="unit-price"),
    ],
)
def test_prices_are_decimal_and_canonical(given: str, stored: str) -> None:
    observation = validate(item(price=Decimal(given)), MAX)
    assert isinstance(observation.price, Decimal)
    assert str(observation.price) == stored


def test_currency_is_upper_cased_and_list_price_below_price_is_discarded() -> None:
    obs = validate(item(currency="chf", regular_price=Decimal("10.00")), MAX)
    assert obs.currency == "CHF"
    assert obs.regular_price is None
    obs = validate(item(regular_price=Decimal("25")), MAX)
    assert str(obs.regular_price) == "25"


def test_raw_hash_is_deterministic_and_tracks_the_offer_only() -> None:
    a = validate(item(name="Kettle"), MAX)
    b = validate(item(name="Kettle, renamed", price=Decimal("19.990")), MAX)
    c = validate(item(availability="OutOfStock"), MAX)
    d = validate(item(price=Decimal("19.98")), MAX)
    assert a.raw_hash == b.raw_hash
    assert len({a.raw_hash, c.raw_hash, d.raw_hash}) == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("Kettle 1.7 l", "Kettle 1.7 l", id="plain"),
        pytest.param("Ask jane.doe@example.com", "Ask [email]", id="email"),
        pytest.param("Call +49 (0)30 1234-5678 today", "Call [phone] today", id="phone-de"),
        pytest.param("Hotline 555-123-4567", "Hotline [phone]", id="phone-us"),
        pytest.param("Model 2024 1200W", "Model 2024 1200W", id="not-a-phone"),
        pytest.param("EAN 4006381333931", "EAN [phone]", id="long-digit-run"),
    ],
)
def test_free_text_is_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_name_and_sku_are_redacted_in_observations() -> None:
    obs = validate(item(name="Sold by john@shop.example", sku="A-1"), MAX)
    assert obs.name == "Sold by [email]"
    assert obs.sku == "A-1"


async def test_offloader_runs_one_executor_hop_per_batch() -> None:
    threads: set[int] = set()

    def double(batch: list[int]) -> list[int]:
        threads.add(threading.get_ident())
        return [x * 2 for x in batch]

    offloader: BatchOffloader[int, int] = BatchOffloader(double, batch_size=10, max_wait=0.05)
    results = await asyncio.gather(*(offloader.submit(i) for i in range(25)))
    assert results == [i * 2 for i in range(25)]
    assert offloader.hops == 3  # 10 + 10 + a partial batch flushed by the timer
    assert threading.get_ident() not in threads


async def test_offloader_propagates_worker_errors() -> None:
    def boom(batch: list[int]) -> list[int]:
        raise RuntimeError("boom")

    offloader: BatchOffloader[int, int] = BatchOffloader(boom, batch_size=2, max_wait=0.01)
    with pytest.raises(RuntimeError, match="boom"):
        await asyncio.gather(offloader.submit(1), offloader.submit(2))


def _pipeline(**settings: object) -> ValidationPipeline:
    crawler = get_crawler(ProductSpider, settings_dict=project_settings(settings))
    crawler.spider = crawler._create_spider()
    return ValidationPipeline.from_crawler(crawler)


async def test_pipeline_drops_invalid_items_with_stat_and_passes_valid_ones() -> None:
    pipeline = _pipeline()
    good = await pipeline.process_item(item())
    assert isinstance(good, ObservationItem)
    with pytest.raises(DropItem, match="not_positive"):
        await pipeline.process_item(item(price=Decimal("0")))
    stats = pipeline.crawler.stats
    assert stats is not None
    assert stats.get_value("pricewatch/validate/passed") == 1
    assert stats.get_value("pricewatch/validate/dropped/not_positive") == 1


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "PRICEWATCH_VALIDATE_MAX_PRICE",
            "-1",
            "PRICEWATCH_VALIDATE_MAX_PRICE must be a positive number, got '-1'",
        ),
        ("PRICEWATCH_VALIDATE_MAX_PRICE", "lots", "got 'lots'"),
        ("PRICEWATCH_VALIDATE_BATCH_SIZE", 0, "PRICEWATCH_VALIDATE_BATCH_SIZE must be >= 1, got 0"),
    ],
)
def test_bad_settings_name_the_setting(name: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _pipeline(**{name: value})
