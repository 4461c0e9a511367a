"""Shared pytest fixtures live in tests/fixtures/, one module per real service."""

from __future__ import annotations

import pytest

pytest_plugins = [
    "tests.fixtures.sandbox",
    "tests.fixtures.postgres",
    "tests.fixtures.redis",
    "tests.fixtures.servers",
    "tests.fixtures.proxies",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``long`` first, the rest in their usual order: parallel workers take
    tests in collection order, and a long test taken last would leave the others idle."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
