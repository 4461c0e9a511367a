"""Server-side counters of the sandbox: what the crawler did, seen from the shops.

Per host: requests served, requests in flight now and at most, status codes (``"dropped"``
for connections closed without a response), requests per path, the arrival times of the
first/last request and the smallest gap between two (seconds since the last reset), and per
client address (``sources``: a proxy's, when requests come through proxies) the requests,
the Cookie headers they carried and the paths of those that carried none; once the tolerance
mode saw requests, the peak of page requests in flight it accepted (``max_accepted``) and the
peak in flight as one arrived, the refused one included (``max_demand``): what the crawler
asked of the shop at most. Control paths (``/_...``) are never counted.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class SourceStats:
    requests: int = 0
    cookies: Counter[str] = field(default_factory=Counter)  # Cookie header -> requests
    cookieless: Counter[str] = field(default_factory=Counter)  # path -> requests without one


@dataclass(slots=True)
class HostStats:
    requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    status: Counter[str] = field(default_factory=Counter)
    paths: Counter[str] = field(default_factory=Counter)
    first: float | None = None  # monotonic arrival times
    last: float | None = None
    min_gap: float | None = None
    # Per client address (a proxy's, when requests come through proxies): requests, the
    # Cookie headers they carried, and the paths of those that carried none.
    sources: dict[str, SourceStats] = field(default_factory=dict)
    accepted: int = 0  # tolerance mode: page requests in flight it accepted
    max_accepted: int = 0
    max_demand: int = 0  # ... and at most in flight as one arrived (refused ones included)

    def to_json(self, since: float) -> dict[str, Any]:
        out = {
            "requests": self.requests,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "status": dict(sorted(self.status.items())),
            "paths": dict(sorted(self.paths.items())),
            "first": None if self.first is None else round(self.first - since, 6),
            "last": None if self.last is None else round(self.last - since, 6),
            "min_gap": None if self.min_gap is None else round(self.min_gap, 6),
            "sources": {
                address: {
                    "requests": src.requests,
                    "cookies": dict(src.cookies),
                    "cookieless": dict(sorted(src.cookieless.items())),
                }
                for address, src in sorted(self.sources.items())
            },
        }
        if self.max_demand:  # the tolerance mode saw requests
            out.update(max_accepted=self.max_accepted, max_demand=self.max_demand)
        return out


class Stats:
    """Counters for every host; all calls happen on the server's event loop."""

    def __init__(self, hosts: list[str]) -> None:
        self._hosts = {host: HostStats() for host in hosts}
        self._since = time.monotonic()
        self._since_wall = time.time()

    def enter(
        self, host: str, path: str, source: str | None = None, cookie: str | None = None
    ) -> None:
        now = time.monotonic()
        s = self._hosts[host]
        s.requests += 1
        if source is not None:
            src = s.sources.get(source)
            if src is None:
                src = s.sources[source] = SourceStats()
            src.requests += 1
            if cookie:
                src.cookies[cookie] += 1
            else:
                src.cookieless[path] += 1
        s.in_flight += 1
        s.max_in_flight = max(s.max_in_flight, s.in_flight)
        s.paths[path] += 1
        if s.last is not None:
            gap = now - s.last
            s.min_gap = gap if s.min_gap is None else min(s.min_gap, gap)
        if s.first is None:
            s.first = now
        s.last = now

    def leave(self, host: str, status: int | str) -> None:
        s = self._hosts[host]
        s.in_flight -= 1
        s.status[str(status)] += 1

    def admit(self, host: str, concurrency: int) -> bool:
        """Tolerance mode: accept one more page request in flight, if fewer than
        ``concurrency`` are; the caller calls :meth:`done` when an accepted one ends."""
        s = self._hosts[host]
        s.max_demand = max(s.max_demand, s.accepted + 1)
        if s.accepted >= concurrency:
            return False
        s.accepted += 1
        s.max_accepted = max(s.max_accepted, s.accepted)
        return True

    def done(self, host: str) -> None:
        self._hosts[host].accepted -= 1

    def reset(self) -> None:
        """Zero the counters; requests still in flight stay counted as in flight."""
        for host, old in list(self._hosts.items()):
            self._hosts[host] = HostStats(
                in_flight=old.in_flight,
                max_in_flight=old.in_flight,
                accepted=old.accepted,
                max_accepted=old.accepted,
            )
        self._since = time.monotonic()
        self._since_wall = time.time()

    def to_json(self) -> dict[str, Any]:
        return {
            "since": self._since_wall,
            "elapsed": round(time.monotonic() - self._since, 6),
            "hosts": {host: s.to_json(self._since) for host, s in self._hosts.items()},
        }
