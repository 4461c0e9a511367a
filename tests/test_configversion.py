"""The config version: stable, covering what produces a price, and carried by every
observation the validation stage hands to the store."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from pricewatch.configversion import ConfigVersion, config_version, hashed_names
from pricewatch.extract import Offer
from pricewatch.items import OfferItem
from pricewatch.pipelines import ValidationPipeline
from pricewatch.spiders.products import ProductSpider
from pricewatch.storage import Observation

from .helpers import project_settings


def version(**overrides: object) -> str:
    return config_version(Settings(project_settings(overrides)))


def test_the_version_is_stable_and_short() -> None:
    assert version() == version()
    assert len(version()) == 12 and int(version(), 16) >= 0
    # Dict settings hash by content, whatever their insertion order.
    assert version(PRICEWATCH_DOMAIN_CURRENCY={"a.test": "EUR", "b.test": "USD"}) == version(
        PRICEWATCH_DOMAIN_CURRENCY={"b.test": "USD", "a.test": "EUR"}
    )


def test_settings_that_produce_a_price_change_the_version() -> None:
    base = version()
    for name, value in (
        ("CONCURRENT_REQUESTS_PER_DOMAIN", 3),
        ("DOWNLOAD_DELAY", 2.5),
        ("PRICEWATCH_BREAKER_THRESHOLD", 9),
        ("PRICEWATCH_VALIDATE_MAX_PRICE", "5000"),
        ("PRICEWATCH_QUARANTINE_RATIO", "5"),
        ("PRICEWATCH_DOMAIN_CURRENCY", {"a.test": "CAD"}),
        ("PRICEWATCH_JS_DOMAINS", ["js.test"]),
    ):
        assert name in hashed_names()
        assert version(**{name: value}) != base, name


def test_operational_settings_do_not_change_it() -> None:
    base = version()
    for name, value in (
        ("PRICEWATCH_STORE_URL", "postgresql://elsewhere/db"),
        ("PRICEWATCH_FRONTIER_URL", "redis://elsewhere:6379/0"),
        ("PRICEWATCH_STATS_FILE", "/tmp/x.json"),
        ("PRICEWATCH_METRICS_ENABLED", True),
    ):
        assert name not in hashed_names()
        assert version(**{name: value}) == base, name


def test_the_rules_file_counts_by_its_content(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('["a.test"]\nprice_css = ".price"\n')
    first = version(PRICEWATCH_EXTRACT_RULES_FILE=str(rules))
    assert first != version()
    rules.write_text('["a.test"]\nprice_css = ".price-now"\n')
    assert version(PRICEWATCH_EXTRACT_RULES_FILE=str(rules)) != first


def test_validation_stamps_every_observation_with_the_crawls_version() -> None:
    crawler = get_crawler(ProductSpider, settings_dict=project_settings())
    pipeline = ValidationPipeline.from_crawler(crawler)
    item = OfferItem(
        url="https://shop.test/p/1",
        domain="shop.test",
        offer=Offer(price=Decimal("9.99"), currency="EUR", source="jsonld"),
        fetched_at=datetime.now(UTC),
    )
    [observation] = asyncio.run(asyncio.to_thread(pipeline._validate, [item]))
    assert isinstance(observation, Observation)
    assert observation.config_version == ConfigVersion.of(crawler).value
    assert observation.config_version == config_version(crawler.settings)
