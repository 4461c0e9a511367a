"""The stores kept beside the Redis frontier open their client one way
(``pricewatch._redis``): a URL that the client library would misread fails with the
store's own error, naming the URL with its password masked."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from pricewatch.browser.learned import RedisBrowserDomains, RoutingUnavailable
from pricewatch.driftstate import DriftStateUnavailable, RedisDriftStates
from pricewatch.sessions.store import RedisSessionStore, SessionStoreUnavailable

# "#" unencoded in the password: redis-py would read "s3" as the host and the rest as a
# port, and its error would quote it.
BAD_URL = "redis://:s3#cr3t@127.0.0.1:6379/0"


async def _learned(url: str) -> Any:
    return await RedisBrowserDomains(url, timeout=1.0).open()


async def _sessions(url: str) -> Any:
    return await RedisSessionStore(url, timeout=1.0).open()


async def _drift(url: str) -> Any:
    return await RedisDriftStates(url, "pricewatch", 1.0).active()


@pytest.mark.parametrize(
    ("use", "error"),
    [
        pytest.param(_learned, RoutingUnavailable, id="learned-browser-domains"),
        pytest.param(_sessions, SessionStoreUnavailable, id="sessions"),
        pytest.param(_drift, DriftStateUnavailable, id="drift-state"),
    ],
)
async def test_a_misread_url_fails_with_the_stores_error_and_a_masked_password(
    use: Callable[[str], Awaitable[Any]], error: type[Exception]
) -> None:
    with pytest.raises(error) as info:
        await use(BAD_URL)
    message = str(info.value)
    assert message.startswith("invalid Redis URL redis://:***@127.0.0.1:6379/0")
    assert "percent-encoded" in message
    assert "s3" not in message and "cr3t" not in message
