"""One way to open a Redis client for the stores kept beside the frontier (learned browser
domains, sessions, drift state): the URL checked first, and an error that names the URL
with its password masked, never the client library's message (which may quote it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pricewatch._urls import mask_password, url_problem

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


def redis_client(redis_url: str, shown_url: str, timeout: float, error: type[Exception]) -> Any:
    """A ``redis.asyncio`` client for ``redis_url`` (strings decoded, ``timeout`` seconds
    to connect and per call), or ``error`` naming ``shown_url`` masked when the URL is
    invalid. Nothing is sent until the first command."""
    import redis.asyncio as aioredis

    problem = url_problem(redis_url)
    try:
        if problem:
            raise ValueError(problem)
        return aioredis.from_url(
            redis_url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            decode_responses=True,
        )
    except ValueError:  # its message may quote pieces of the password
        raise error(
            f"invalid Redis URL {mask_password(shown_url)}: {problem or 'cannot be parsed'}"
        ) from None


def redis_options(settings: BaseSettings) -> dict[str, Any]:
    """The frontier's namespace and timeout, which the stores kept beside it on Redis share."""
    return {
        "namespace": settings["PRICEWATCH_FRONTIER_REDIS_NAMESPACE"],
        "timeout": settings.getfloat("PRICEWATCH_FRONTIER_REDIS_TIMEOUT"),
    }
