"""Defaults live in pricewatch/settings.py only; derived ones follow what they derive from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from scrapy.settings import Settings

import pricewatch
import pricewatch.settings
from pricewatch.politeness.breaker import BreakerConfig
from pricewatch.spiders.products import max_outstanding

PACKAGE = Path(pricewatch.__file__).parent
# A setting read by a component: settings.get*("NAME") or settings["NAME"].
READ = re.compile(r"""settings(?:\.get\w*\(|\[)\s*["']((?:PRICEWATCH)_[A-Z0-9_]+)["']""")


def command_line(**values: object) -> Settings:
    """The project's settings with ``-s NAME=VALUE`` overrides, as `scrapy crawl` builds them."""
    settings = Settings()
    settings.setmodule("pricewatch.settings", priority="project")
    for name, value in values.items():
        settings.set(name, value, priority="cmdline")
    return settings


def test_every_setting_a_component_reads_has_its_default_in_settings_py() -> None:
    read = {
        name
        for path in PACKAGE.rglob("*.py")
        for name in READ.findall(path.read_text(encoding="utf-8"))
    }
    assert read, "the pattern no longer finds the settings components read"
    missing = sorted(name for name in read if not hasattr(pricewatch.settings, name))
    assert missing == []


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param({}, 2 * pricewatch.settings.CONCURRENT_REQUESTS, id="default"),
        pytest.param({"CONCURRENT_REQUESTS": "8"}, 16, id="follows-concurrent-requests"),
        pytest.param(
            {"CONCURRENT_REQUESTS": "8", "PRICEWATCH_MAX_OUTSTANDING": "5"}, 5, id="explicit"
        ),
    ],
)
def test_max_outstanding_follows_concurrent_requests(
    overrides: dict[str, str], expected: int
) -> None:
    assert max_outstanding(command_line(**overrides)) == expected


def test_probe_timeout_follows_download_timeout() -> None:
    assert BreakerConfig.from_settings(command_line(DOWNLOAD_TIMEOUT="5")).probe_timeout == 15
    explicit = command_line(DOWNLOAD_TIMEOUT="5", PRICEWATCH_BREAKER_PROBE_TIMEOUT="7")
    assert BreakerConfig.from_settings(explicit).probe_timeout == 7
