"""Scrapy's robots.txt middleware with every request waiting for a host's robots.txt
given its parser, not only the first one.

Enabled in ``DOWNLOADER_MIDDLEWARES`` in place of
``scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware`` (same order, 100).

Settings read (Scrapy's own, unchanged): ``ROBOTSTXT_OBEY``, ``ROBOTSTXT_PARSER``,
``ROBOTSTXT_USER_AGENT``, ``USER_AGENT``.

The defect it fixes (see ``docs/robots-txt-race.md``): while a host's robots.txt is being
downloaded, Scrapy's ``RobotsTxtMiddleware.robot_parser`` makes every other request to that
host wait on one shared ``Deferred`` (``self._parsers[netloc]``) through
``maybe_deferred_to_future()``. Under the asyncio reactor that is
``Deferred.asFuture()``, whose callback sets the waiter's future and *returns None* (and
under other reactors Twisted's ``_inlineCallbacks`` does the same): the shared Deferred's
result becomes None for every callback added after it. So the first
waiter gets the parser and every later one gets None, which the middleware reads as "this
host has no robots.txt", and their Disallowed URLs are fetched. This class waits on a
Deferred of its own per waiter, chained off the shared one without consuming its result,
and then reads the parser from ``self._parsers``, where Scrapy stores it before firing the
shared Deferred.

A disallowed request fails with :class:`~pricewatch.exceptions.RobotsDisallowed` (an
``IgnoreRequest``), so the spider's errback can tell it from other ignored requests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as _ScrapyRobotsTxt
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

from pricewatch.exceptions import RobotsDisallowed

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.http import Request
    from scrapy.robotstxt import RobotParser

__all__ = ["RobotsTxtMiddleware"]

_T = TypeVar("_T")


class RobotsTxtMiddleware(_ScrapyRobotsTxt):
    """``scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware`` whose concurrent
    waiters for one host's robots.txt all get its parser (see the module docstring)."""

    async def process_request(  # type: ignore[override]
        self, request: Request, spider: Spider | None = None
    ) -> None:
        try:
            await super().process_request(request)
        except IgnoreRequest as exc:  # robot_parser() never raises: a Disallow rule
            raise RobotsDisallowed(str(exc)) from exc

    async def robot_parser(self, request: Request) -> RobotParser | None:
        netloc = urlparse_cached(request).netloc
        pending = self._parsers.get(netloc)
        if not isinstance(pending, Deferred):
            # Not fetched yet (the parent starts the download and returns the parser
            # itself), or already known: the parent's path is right.
            return await super().robot_parser(request)
        # Another request is downloading this robots.txt. Wait on a Deferred of our own:
        # awaiting the shared one (Deferred.asFuture, or _inlineCallbacks) would replace its
        # result with None for every later waiter, and cancelling our wait would cancel
        # the shared download.
        await maybe_deferred_to_future(_observe(pending))
        # _parse_robots()/_robots_error() store the parser (or None when robots.txt could
        # not be fetched) before they fire the shared Deferred.
        parser = self._parsers[netloc]
        assert not isinstance(parser, Deferred)
        return parser


def _observe(shared: Deferred[_T]) -> Deferred[None]:
    """A Deferred that fires (with None) when ``shared`` fires, leaving ``shared``'s result
    to its other callbacks."""
    waiter: Deferred[None] = Deferred()

    def wake(result: _T) -> _T:
        if not waiter.called:  # a cancelled waiter has already fired
            waiter.callback(None)
        return result

    shared.addBoth(wake)
    return waiter
