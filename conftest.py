"""Shared pytest fixtures live in tests/fixtures/, one module per real service."""

pytest_plugins = [
    "tests.fixtures.sandbox",
    "tests.fixtures.postgres",
    "tests.fixtures.redis",
    "tests.fixtures.servers",
    "tests.fixtures.proxies",
]
