"""pricewatch/middlewares.py introduces every middleware settings.py registers, with its
order, and re-exports the very classes the settings point at."""

from __future__ import annotations

import pytest
from scrapy.utils.misc import load_object

import pricewatch.middlewares
import pricewatch.settings

REGISTERED = [
    (path, order)
    for setting in ("DOWNLOADER_MIDDLEWARES", "SPIDER_MIDDLEWARES")
    for path, order in getattr(pricewatch.settings, setting).items()
    if path.startswith("pricewatch.") and order is not None
]


@pytest.mark.parametrize(("path", "order"), REGISTERED, ids=[p for p, _ in REGISTERED])
def test_every_registered_middleware_is_introduced_with_its_order(path: str, order: int) -> None:
    name = path.rsplit(".", 1)[1]
    assert not path.startswith("pricewatch.middlewares."), "settings point at the real class"
    assert f"{order} ``{name}``" in (pricewatch.middlewares.__doc__ or "")
    assert getattr(pricewatch.middlewares, name) is load_object(path)


def test_scrapy_retry_is_replaced_by_the_backoff_retry() -> None:
    assert (
        pricewatch.settings.DOWNLOADER_MIDDLEWARES[
            "scrapy.downloadermiddlewares.retry.RetryMiddleware"
        ]
        is None
    )
