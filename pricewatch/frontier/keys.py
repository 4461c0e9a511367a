"""Every Redis key of the frontier, in one place.

All keys share one hash tag, ``pricewatch:{<namespace>}:…`` (namespace from
``PRICEWATCH_FRONTIER_REDIS_NAMESPACE``, default ``pw``), so every key lives in one Redis
Cluster slot and the Lua scripts, which also touch the per-domain keys they build from
``prefix``, run on a cluster as on a single server.

==========================  ======  ===============================================
key                         type    holds
==========================  ======  ===============================================
``entries``                 HASH    entry id -> msgpack record (url, its scheme as one
                                    byte; sku, importance, attempts, failures, gone,
                                    checks, changes, seen_at, and once fetched the
                                    change-rate estimate: rate_changes, rate_exposure,
                                    observed_at); the domain is the set holding the id
``sched:<domain>``          ZSET    scheduled entry ids of a domain, by due time
``ready``                   ZSET    domains with scheduled entries, by their earliest
                                    due time (or the end of their pause, if later)
``inflight``                ZSET    leased entry ids, by lease deadline
``leases``                  HASH    entry id -> "token<TAB>due<TAB>domain"
``domain_inflight``         HASH    domain -> leases held (claimed, not completed)
``domain_fetched``          HASH    domain -> of those, leases whose fetch ended; the
                                    global cap counts the difference (being fetched)
``paused``                  HASH    domain -> paused until (epoch seconds, Redis TIME)
``health``                  HASH    domain -> health (EWMA of fetch success)
``domains``                 SET     every domain ever added
``retired:<domain>``        ZSET    retired entry ids, by retirement time
``retired_reason``          HASH    entry id -> why ``retire()`` retired it (``delisted``)
``dead:<domain>``           ZSET    dead-lettered entry ids, by time
``malformed``               HASH    entry id -> the undecodable record, set aside
``budget``                  HASH    domain -> "mu allocated_at pace gain mark": the
                                    multiplier of its request budget's allocation, when
                                    it was computed, the requests per second its claims
                                    are paced at, the share of the budget it planned and
                                    its paced claims then (:mod:`pricewatch.frontier.budget`)
``budget_tokens``           HASH    domain -> "tokens at claimed": its pace's token
                                    bucket, and its paced claims so far
``browser_domains``         SET     domains learned to need a browser
                                    (:mod:`pricewatch.browser.learned`)
``session:<id>``            HASH    one session (domain, slot, proxy id, user agent,
                                    created, requests, cookies as JSON), with a TTL
                                    (:mod:`pricewatch.sessions.store`)
``sessions:<domain>``       HASH    slot -> id of the session holding it
``proxy_health:<domain>``   HASH    ``<proxy id>:<field>`` -> ok, failures, blocks,
                                    latency_sum, benched_until, cooldown, benchings
``session_domains``         SET     domains with sessions or proxy health
``listings``                HASH    listing URL -> its definition, JSON (url, kind,
                                    domain, every, options) (:mod:`pricewatch.listings`)
``listing_state``           HASH    listing URL -> its traversal state, JSON
``listing_due``             ZSET    listing URLs, by due time
``listing_leases``          HASH    listing URL -> "token<TAB>deadline"
``members:<listing id>``    HASH    product URL -> number of the traversal of the
                                    listing that last listed it
``drift``                   HASH    "<domain> <kind>" -> JSON drift alarm
                                    (:mod:`pricewatch.driftstate`)
``limits``                  HASH    domain -> its adaptive limit, JSON
                                    (:mod:`pricewatch.politeness.limits`)
``limit_caps``              HASH    domain -> its learned cap of leases being fetched
==========================  ======  ===============================================

An entry id is in exactly one of ``sched:<domain>``, ``inflight``, ``retired:<domain>``,
``dead:<domain>`` or ``malformed`` at a time: there is no dupefilter set.
"""

from __future__ import annotations

import base64
import hashlib
import re

PREFIX = "pricewatch"
_NAMESPACE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def entry_id(url: str) -> str:
    """The 12-character id of ``url`` (72 bits of BLAKE2b, URL-safe base64)."""
    digest = hashlib.blake2b(url.encode("utf-8"), digest_size=9).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii")


class Keys:
    def __init__(self, namespace: str) -> None:
        if not _NAMESPACE.match(namespace):
            raise ValueError(
                "PRICEWATCH_FRONTIER_REDIS_NAMESPACE must be 1-64 characters of "
                f"[A-Za-z0-9_.:-], got {namespace!r}"
            )
        self.namespace = namespace
        self.prefix = f"{PREFIX}:{{{namespace}}}:"
        self.entries = self.prefix + "entries"
        self.ready = self.prefix + "ready"
        self.inflight = self.prefix + "inflight"
        self.leases = self.prefix + "leases"
        self.domain_inflight = self.prefix + "domain_inflight"
        self.domain_fetched = self.prefix + "domain_fetched"
        self.paused = self.prefix + "paused"
        self.health = self.prefix + "health"
        self.domains = self.prefix + "domains"
        self.malformed = self.prefix + "malformed"
        self.budget = self.prefix + "budget"
        self.budget_tokens = self.prefix + "budget_tokens"
        self.browser_domains = self.prefix + "browser_domains"  # SET, pricewatch/browser/learned.py
        self.session_domains = self.prefix + "session_domains"  # SET, pricewatch/sessions/
        self.retired_reason = self.prefix + "retired_reason"  # HASH, retire()
        self.listings = self.prefix + "listings"  # pricewatch/listings/redis.py
        self.listing_state = self.prefix + "listing_state"
        self.listing_due = self.prefix + "listing_due"
        self.listing_leases = self.prefix + "listing_leases"
        self.drift = self.prefix + "drift"  # HASH, pricewatch/driftstate.py
        self.limits = self.prefix + "limits"
        self.limit_caps = self.prefix + "limit_caps"
        self.pattern = self.prefix + "*"

    def script_keys(self) -> list[str]:
        """The KEYS every script receives, in the order ``lua/common.lua`` names them."""
        return [
            self.entries,
            self.ready,
            self.inflight,
            self.leases,
            self.domain_inflight,
            self.paused,
            self.health,
            self.domains,
            self.malformed,
            self.domain_fetched,
            self.budget,
            self.limit_caps,
            self.budget_tokens,
        ]

    def session(self, session_id: str) -> str:
        return f"{self.prefix}session:{session_id}"

    def slots(self, domain: str) -> str:
        return f"{self.prefix}sessions:{domain}"

    def proxy_health(self, domain: str) -> str:
        return f"{self.prefix}proxy_health:{domain}"

    def sched(self, domain: str) -> str:
        return f"{self.prefix}sched:{domain}"

    def retired(self, domain: str) -> str:
        return f"{self.prefix}retired:{domain}"

    def members(self, listing: str) -> str:
        return f"{self.prefix}members:{entry_id(listing)}"

    def dead(self, domain: str) -> str:
        return f"{self.prefix}dead:{domain}"
