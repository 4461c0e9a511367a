"""Extraction against the project's storefront: every markup the sandbox serves, and its
official API, read back exactly as its ground truth (``/_truth``) says."""

from __future__ import annotations

import argparse
import json
import urllib.request
from decimal import Decimal
from typing import Any

import pytest
from scrapy.settings import Settings

from pricewatch.commands.extract import Command
from pricewatch.extract import extract_offer, extract_offer_from_json


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


def expected(truth: dict[str, Any]) -> dict[str, Any]:
    regular = truth.get("regular_price")
    return {
        "price": Decimal(truth["price"]),
        "currency": truth["currency"],
        "regular_price": Decimal(regular) if regular else None,
        "availability": truth["availability"],
    }


@pytest.fixture(scope="module")
def truth(sandbox: Any) -> dict[str, dict[str, Any]]:
    return sandbox.truth()


def test_every_html_markup_is_read(truth: dict[str, dict[str, Any]]) -> None:
    pages = {
        url: item
        for url, item in truth.items()
        if not item["js"] and not item["disallowed"] and not item.get("gone")
    }
    markups = {item["markup"] for item in pages.values()}
    assert {
        "jsonld",
        "jsonld_graph",
        "jsonld_aggregate",
        "microdata",
        "opengraph",
        "visible",
    } <= markups
    wrong = []
    for url, item in pages.items():
        offer = extract_offer(fetch(url), url)
        got = (
            None
            if offer is None
            else {
                "price": offer.price,
                "currency": offer.currency,
                "regular_price": offer.regular_price,
                "availability": offer.availability,
            }
        )
        if got != expected(item) or offer is None or offer.sku != item["sku"]:
            wrong.append(f"{item['markup']} {url}: {got} sku={offer and offer.sku}")
    assert not wrong, "\n".join(wrong[:20])


def test_official_api_payloads(truth: dict[str, dict[str, Any]]) -> None:
    items = [item for item in truth.values() if item.get("api_url") and not item.get("gone")]
    assert any(item["js"] for item in items)
    for item in items[::5]:
        offer = extract_offer_from_json(fetch(item["api_url"]), item["api_url"], source="api")
        assert offer is not None and offer.source == "api"
        assert (offer.price, offer.currency, offer.availability) == (
            expected(item)["price"],
            item["currency"],
            item["availability"],
        ), item["api_url"]


def test_extract_command_fetches_a_url(
    truth: dict[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, item = next(
        (url, item)
        for url, item in truth.items()
        if not item["js"] and not item["disallowed"] and not item.get("gone")
    )
    cmd = Command()
    cmd.settings = Settings()
    cmd.settings.setmodule("pricewatch.settings")
    # The sandbox is on loopback, which the command refuses unless allowed (as a crawl).
    cmd.settings.set("PRICEWATCH_ALLOWED_NETWORKS", ["127.0.0.0/8"])
    cmd.run([url], argparse.Namespace(url=None))
    assert cmd.exitcode == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["price"], data["currency"]) == (item["price"], item["currency"])
