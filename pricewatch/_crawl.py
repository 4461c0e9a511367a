"""One instance per crawl of a component that several others share."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar
from weakref import WeakKeyDictionary

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

_T = TypeVar("_T")

_INSTANCES: WeakKeyDictionary[Crawler, dict[Callable[..., Any], Any]] = WeakKeyDictionary()


def per_crawl(crawler: Crawler, cls: Callable[[Crawler], _T]) -> _T:
    """The crawl's one ``cls(crawler)``, built the first time it is asked for: whoever
    comes first (Scrapy building an extension or a download handler, the spider, a
    middleware) builds it, and everyone gets that one."""
    instances = _INSTANCES.setdefault(crawler, {})
    if cls not in instances:
        instances[cls] = cls(crawler)
    instance: _T = instances[cls]
    return instance
