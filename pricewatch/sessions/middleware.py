"""Sessions on proxies (downloader middleware): one cookie jar per proxy, never shared.

A session is (proxy, cookie jar, user agent) for one domain, in one of the domain's
``PRICEWATCH_SESSIONS_PER_DOMAIN`` slots; a SKU's URL always maps to the same slot. Each
request of a domain with a proxy pool (:mod:`pricewatch.sessions.proxies`) gets its slot's
session: ``Request.meta["proxy"]`` (Scrapy's ``HttpProxyMiddleware`` turns the URL's
credentials into ``Proxy-Authorization`` and takes them out of the meta) and
``Request.meta["cookiejar"]`` = the session id (Scrapy's ``CookiesMiddleware`` keeps one jar
per id). Affinity is strict: a session's proxy never changes, so its cookies never travel
over another proxy; when a session ends, its jar ends with it.

A session ends (is retired, and the slot's next request makes a new one on another proxy)
after ``PRICEWATCH_SESSION_MAX_REQUESTS`` requests or ``PRICEWATCH_SESSION_MAX_AGE``
seconds, when it is blocked (a status in ``PRICEWATCH_SESSION_BLOCK_CODES`` or a challenge
page), and when its proxy is benched for its domain.

Sessions and cookie jars live in the frontier's backend (:mod:`pricewatch.sessions.store`):
created there, their cookies written whenever they change, read back when a worker
starts, so a restarted worker resumes them (same cookies, same proxy, no new login). A
domain's login hook (``PRICEWATCH_SESSION_LOGIN``) runs once per session, before its
first request, through the session's own proxy and jar.

Proxy health, per proxy and domain, is shared the same way: successes, latency, failures
(network errors, 5xx) and blocks. ``PRICEWATCH_PROXY_BENCH_FAILURES`` consecutive failures,
or a block with a ``Retry-After``, bench the proxy for the domain: for
``PRICEWATCH_PROXY_BENCH_COOLDOWN`` seconds (at least the ``Retry-After``), growing by
``PRICEWATCH_PROXY_BENCH_FACTOR`` after each failed probe up to
``PRICEWATCH_PROXY_BENCH_MAX_COOLDOWN``. When the bench ends, the next session may use the
proxy again: its first success unbenches it, its first failure benches it longer. A domain
whose proxies are all benched is paused in the frontier until the first bench ends, and its
requests in hand end as ``skipped`` (reason ``proxies_benched``), rescheduled, never sent
directly.

Without ``PRICEWATCH_PROXIES`` the middleware is not configured: a crawl without proxies
pays nothing for it.

Settings (defaults and when to change them: ``pricewatch/settings.py``):
``PRICEWATCH_PROXIES``, ``PRICEWATCH_SESSIONS_PER_DOMAIN``,
``PRICEWATCH_SESSION_MAX_REQUESTS``, ``PRICEWATCH_SESSION_MAX_AGE``,
``PRICEWATCH_SESSION_TTL``, ``PRICEWATCH_SESSION_USER_AGENTS``,
``PRICEWATCH_SESSION_BLOCK_CODES``, ``PRICEWATCH_SESSION_LOGIN``,
``PRICEWATCH_SESSION_REFRESH``, ``PRICEWATCH_PROXY_BENCH_FAILURES``,
``PRICEWATCH_PROXY_BENCH_COOLDOWN``, ``PRICEWATCH_PROXY_BENCH_FACTOR``,
``PRICEWATCH_PROXY_BENCH_MAX_COOLDOWN``.

Request.meta: sets ``pricewatch_session`` (session id) and ``pricewatch_proxy`` (proxy
id) on every request it routes; ``pricewatch_session_setup`` marks a login request. A
request whose ``proxy`` meta was set by someone else keeps it (and gets no session).

Stats: ``pricewatch/sessions/{created,resumed,retired,retired/<why>,logins,login_failed,
store_failed}``, ``pricewatch/proxy/{requests,ok,failures,blocks,benched,unbenched,
deferred}``.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import logging
import math
import secrets
import time
import zlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from scrapy import Request, signals
from scrapy.downloadermiddlewares.cookies import CookiesMiddleware
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import load_object

from pricewatch._http import parse_retry_after
from pricewatch._urls import matching_domain, site_of
from pricewatch.exceptions import ProxiesBenched
from pricewatch.frontier import FrontierUnavailable
from pricewatch.leases import CrawlResources
from pricewatch.meta import (
    LEASE_META,
    PROXY_META,
    SESSION_META,
    SESSION_REROUTES_META,
    SESSION_SETUP_META,
)
from pricewatch.politeness.challenge import ChallengeDetector
from pricewatch.sessions.proxies import Proxy, ProxyPools
from pricewatch.sessions.store import (
    HealthDelta,
    ProxyHealth,
    SessionRecord,
    SessionStore,
    SessionStoreUnavailable,
    session_store_from_settings,
)

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

_FLUSH_INTERVAL = 1.0  # seconds between two writes of health counts and request counts
_CLOSE_TIMEOUT = 10.0


class SessionEnded(IgnoreRequest):
    """The request's session was retired while the request waited for its slot: it goes
    back through the middlewares for a new one (never out on the old one)."""


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """The settings of sessions and proxy health, read and checked once."""

    pools: ProxyPools
    per_domain: int
    max_requests: int
    max_age: float
    user_agents: tuple[str, ...]
    block_codes: frozenset[int]
    login: dict[str, Any]
    refresh: float
    bench_failures: int
    bench_cooldown: float
    bench_factor: float
    bench_max_cooldown: float

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> SessionConfig:
        login = settings.getdict("PRICEWATCH_SESSION_LOGIN")
        config = cls(
            pools=ProxyPools.from_value(settings.get("PRICEWATCH_PROXIES")),
            per_domain=settings.getint("PRICEWATCH_SESSIONS_PER_DOMAIN"),
            max_requests=settings.getint("PRICEWATCH_SESSION_MAX_REQUESTS"),
            max_age=settings.getfloat("PRICEWATCH_SESSION_MAX_AGE"),
            user_agents=tuple(settings.getlist("PRICEWATCH_SESSION_USER_AGENTS"))
            or (str(settings.get("USER_AGENT") or ""),),
            block_codes=frozenset(
                int(code) for code in settings.getlist("PRICEWATCH_SESSION_BLOCK_CODES")
            ),
            login={str(domain).lower(): value for domain, value in login.items()},
            refresh=settings.getfloat("PRICEWATCH_SESSION_REFRESH"),
            bench_failures=settings.getint("PRICEWATCH_PROXY_BENCH_FAILURES"),
            bench_cooldown=settings.getfloat("PRICEWATCH_PROXY_BENCH_COOLDOWN"),
            bench_factor=settings.getfloat("PRICEWATCH_PROXY_BENCH_FACTOR"),
            bench_max_cooldown=settings.getfloat("PRICEWATCH_PROXY_BENCH_MAX_COOLDOWN"),
        )
        config.validate()
        return config

    def validate(self) -> None:
        for name, value, low in (
            ("PRICEWATCH_SESSIONS_PER_DOMAIN", self.per_domain, 1),
            ("PRICEWATCH_SESSION_MAX_REQUESTS", self.max_requests, 0),
            ("PRICEWATCH_SESSION_MAX_AGE", self.max_age, 0),
            ("PRICEWATCH_SESSION_REFRESH", self.refresh, 0),
            ("PRICEWATCH_PROXY_BENCH_FAILURES", self.bench_failures, 1),
            ("PRICEWATCH_PROXY_BENCH_FACTOR", self.bench_factor, 1),
        ):
            if not (math.isfinite(value) and value >= low):
                raise ValueError(f"{name} must be >= {low}, got {value}")
        if not (math.isfinite(self.bench_cooldown) and self.bench_cooldown > 0):
            raise ValueError(
                f"PRICEWATCH_PROXY_BENCH_COOLDOWN must be > 0, got {self.bench_cooldown}"
            )
        if not self.bench_max_cooldown >= self.bench_cooldown:
            raise ValueError(
                "PRICEWATCH_PROXY_BENCH_MAX_COOLDOWN must be >= PRICEWATCH_PROXY_BENCH_COOLDOWN "
                f"({self.bench_cooldown}), got {self.bench_max_cooldown}"
            )
        for domain, hook in self.login.items():
            if not isinstance(hook, str | dict) or (isinstance(hook, dict) and "url" not in hook):
                raise ValueError(
                    f"PRICEWATCH_SESSION_LOGIN[{domain!r}] must be a dict with a 'url' or the "
                    f"path of a function, got {hook!r}"
                )


@dataclass(slots=True)
class Session:
    """A session as this process uses it."""

    record: SessionRecord
    proxy: Proxy
    requests: int = 0  # sent, counted here (record.requests: the stored count)
    cookie_state: tuple[Any, ...] = ()  # the jar as last written
    retired: bool = False
    setup: asyncio.Future[None] | None = None  # the login in progress
    saving: asyncio.Lock = field(default_factory=asyncio.Lock)  # one write at a time, in order

    @property
    def id(self) -> str:
        return self.record.id


@dataclass(slots=True)
class ProxyState:
    """What this process knows of one proxy on one domain (times: the middleware's
    ``clock``, ``time.monotonic`` but in tests)."""

    failures: int = 0  # consecutive, seen here
    benched_until: float = 0.0
    cooldown: float = 0.0  # of the last bench; > 0 after a bench, until a success
    unbenching: bool = False
    # One bench or unbench write at a time, in the order they were decided: a bench written
    # late never lands over the unbench of the probe that followed it.
    writing: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(slots=True)
class DomainState:
    domain: str
    pool: tuple[Proxy, ...]
    slots: dict[int, Session] = field(default_factory=dict)
    proxies: dict[str, ProxyState] = field(default_factory=dict)
    loaded_at: float | None = None  # the middleware's clock; None: never loaded
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    paused_until: float = 0.0  # the frontier pause this process asked for

    def proxy_state(self, proxy_id: str) -> ProxyState:
        state = self.proxies.get(proxy_id)
        if state is None:
            state = self.proxies[proxy_id] = ProxyState()
        return state


def request_domain(request: Request) -> str:
    lease = request.meta.get(LEASE_META)
    domain = getattr(lease, "domain", None)
    if domain:
        return str(domain)
    return site_of(urlparse_cached(request).hostname or "")


def browser_proxy(url: str) -> dict[str, str]:
    """Playwright's ``proxy`` context option for a proxy URL (its credentials apart)."""
    parts = urlsplit(url)
    proxy = {"server": f"{parts.scheme}://{parts.hostname}:{parts.port or 80}"}
    if parts.username:
        proxy["username"] = unquote(parts.username)
        proxy["password"] = unquote(parts.password or "")
    return proxy


def _is_robots(request: Request) -> bool:
    return urlparse_cached(request).path == "/robots.txt"


def cookie_fields(cookie: http.cookiejar.Cookie) -> dict[str, Any]:
    """A cookie as JSON-ready plain fields (``http.cookiejar.Cookie``'s constructor's)."""
    return {
        "version": cookie.version,
        "name": cookie.name,
        "value": cookie.value,
        "port": cookie.port,
        "port_specified": cookie.port_specified,
        "domain": cookie.domain,
        "domain_specified": cookie.domain_specified,
        "domain_initial_dot": cookie.domain_initial_dot,
        "path": cookie.path,
        "path_specified": cookie.path_specified,
        "secure": cookie.secure,
        "expires": cookie.expires,
        "discard": cookie.discard,
        "comment": cookie.comment,
        "comment_url": cookie.comment_url,
        "rest": dict(cookie._rest),  # type: ignore[attr-defined]
        "rfc2109": cookie.rfc2109,
    }


def cookie_from_fields(values: dict[str, Any]) -> http.cookiejar.Cookie:
    return http.cookiejar.Cookie(**values)


class SessionMiddleware:
    """See the module docstring. Sits at 585: below HTTP decompression (590), so it sees
    decompressed pages (challenge markers), above the breaker (570) and the retry (550),
    so a retry of a blocked request goes out on a new session; its requests pass it before
    Scrapy's cookies (700) and proxy (750) middlewares read what it set."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        config = SessionConfig.from_settings(settings)
        if not config.pools:
            raise NotConfigured  # no PRICEWATCH_PROXIES: the default, so not a warning
        self.crawler = crawler
        self.config = config
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.challenges = ChallengeDetector.for_crawler(crawler)
        self.store: SessionStore = session_store_from_settings(settings)
        self.domains: dict[str, DomainState] = {}
        self.by_id: dict[str, Session] = {}
        self._health: dict[tuple[str, str], HealthDelta] = {}
        self._dirty: set[str] = set()  # sessions whose requests or cookies are unwritten
        self._retired: set[str] = set()  # ids of the sessions this process ended
        self._flusher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._cookies: CookiesMiddleware | None = None
        self._hooks: dict[str, Any] = {}
        self._flushing = asyncio.Lock()  # a flush returns once every earlier one is written
        self.clock = time.monotonic  # benches, pauses and refreshes of this process
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SessionMiddleware:
        return cls(crawler)

    # -- the cookie jars (Scrapy's, one per session id) --------------------------------------

    def jars(self) -> CookiesMiddleware | None:
        if self._cookies is None:
            try:
                self._cookies = self.crawler.get_downloader_middleware(CookiesMiddleware)
            except RuntimeError:  # no engine: the middleware used on its own
                return None
        return self._cookies

    def _jar_state(self, session: Session) -> tuple[Any, ...]:
        cookies = self.jars()
        if cookies is None or session.id not in cookies.jars:
            return ()
        return tuple(
            sorted((c.domain, c.path, c.name, c.value, c.expires) for c in cookies.jars[session.id])
        )

    def _restore_jar(self, session: Session) -> None:
        cookies = self.jars()
        if cookies is None or not session.record.cookies:
            return
        jar = cookies.jars[session.id]
        for values in session.record.cookies:
            jar.set_cookie(cookie_from_fields(values))
        session.cookie_state = self._jar_state(session)

    def _stored_cookies(self, session: Session) -> tuple[dict[str, Any], ...]:
        cookies = self.jars()
        if cookies is None or session.id not in cookies.jars:
            return session.record.cookies
        return tuple(cookie_fields(c) for c in cookies.jars[session.id])

    # -- requests ------------------------------------------------------------------------------

    async def process_request(self, request: Request) -> None:
        meta = request.meta
        if "proxy" in meta and SESSION_META not in meta:
            return  # someone chose this request's proxy (or none): theirs beats ours
        domain = request_domain(request)
        pool = self.config.pools.for_domain(domain)
        if not pool:
            return
        setup_id = meta.get(SESSION_SETUP_META)
        if setup_id is not None:
            session = self.by_id.get(setup_id)
            if session is None or session.retired:
                raise IgnoreRequest(f"session {setup_id} ended before its login")
        else:
            state = await self._domain(domain, pool)
            slot = zlib.crc32(request.url.encode()) % self.config.per_domain
            session = await self._session(state, slot)
            # robots.txt goes out at once: the login request itself waits for it.
            if session.setup is not None and not session.setup.done() and not _is_robots(request):
                await asyncio.shield(session.setup)
                if session.retired:  # retired while its login ran: start over with a new one
                    session = await self._session(state, slot)
        self._apply(request, session)
        if meta.get("playwright"):
            # The browser does not read Scrapy's proxy meta: the session is a browser
            # context of its own, on the same proxy, with the same user agent; its cookies
            # travel as the navigation's Cookie header from the same Scrapy jar
            # (scrapy-playwright sends Scrapy's headers), and come back into it.
            from pricewatch.browser import BrowserRouter

            BrowserRouter.of(self.crawler).move_to_context(
                meta,
                f"pricewatch-session-{session.id}",
                {
                    "proxy": browser_proxy(session.proxy.url),
                    "user_agent": session.record.user_agent,
                },
            )

    def _apply(self, request: Request, session: Session) -> None:
        meta = request.meta
        if not meta.get("playwright"):
            # (Not for the browser: Scrapy's proxy middleware would put the credentials in
            # a Proxy-Authorization header, which the browser would send to the shop.)
            meta["proxy"] = session.proxy.url
        meta["cookiejar"] = session.id
        meta[SESSION_META] = session.id
        meta[PROXY_META] = session.proxy.id
        request.headers[b"User-Agent"] = session.record.user_agent
        session.requests += 1
        self._dirty.add(session.id)
        self.stats.inc_value("pricewatch/proxy/requests")
        if self.config.max_requests and session.requests >= self.config.max_requests:
            self._retire_soon(session, "requests")
        self._start_flusher()

    def before_transfer(self, request: Request) -> None:
        """Asked by ``SlotAccountingDownloader`` as the request leaves its slot queue: a
        session retired while the request waited there (blocked, benched, worn out) must not
        carry it. The request goes back through the middlewares for its slot's next session
        (:meth:`process_exception` returns a fresh copy)."""
        session_id = request.meta.get(SESSION_META)
        if session_id is None or request.meta.get(SESSION_SETUP_META) is not None:
            return
        session = self.by_id.get(session_id)
        if session is None or session.retired:
            raise SessionEnded(f"session {session_id} ended while the request waited")

    def _reroute(self, request: Request) -> Request:
        """A copy of ``request`` with nothing of its session left (proxy, credentials,
        cookie jar and the Cookie header taken from it), to get another session."""
        meta = dict(request.meta)
        for key in ("proxy", "_auth_proxy", "cookiejar", SESSION_META, PROXY_META):
            meta.pop(key, None)
        meta[SESSION_REROUTES_META] = meta.get(SESSION_REROUTES_META, 0) + 1
        headers = request.headers.copy()
        for name in (b"Cookie", b"Proxy-Authorization"):
            headers.pop(name, None)
        self.stats.inc_value("pricewatch/sessions/rerouted")
        return request.replace(meta=meta, headers=headers, dont_filter=True)

    async def _domain(self, domain: str, pool: tuple[Proxy, ...]) -> DomainState:
        state = self.domains.get(domain)
        if state is None:
            state = self.domains[domain] = DomainState(domain, pool)
        now = self.clock()
        if state.loaded_at is not None and now - state.loaded_at < self.config.refresh:
            return state
        async with state.lock:
            if state.loaded_at is not None and self.clock() - state.loaded_at < (
                self.config.refresh
            ):
                return state
            try:
                records = await self.store.sessions(domain)
                health = await self.store.health(domain)
            except SessionStoreUnavailable as exc:
                self.stats.inc_value("pricewatch/sessions/store_failed")
                logger.warning(
                    "Sessions of %s not read, using what this worker has: %s", domain, exc
                )
                state.loaded_at = self.clock()
                return state
            self._merge(state, records, health)
            state.loaded_at = self.clock()
        return state

    def _merge(
        self, state: DomainState, records: list[SessionRecord], health: list[ProxyHealth]
    ) -> None:
        """Take what the backend holds (other workers' changes, or a previous run's)."""
        now = self.clock()
        for h in health:
            if h.proxy not in self.config.pools.by_id:
                continue
            local = state.proxy_state(h.proxy)
            left = h.benched_for
            if left > 0:
                local.benched_until = max(local.benched_until, now + left)
            if h.cooldown > local.cooldown:
                local.cooldown = h.cooldown
            elif h.cooldown == 0 and local.cooldown and local.benched_until <= now:
                local.cooldown = 0.0  # another worker's probe succeeded
        stored = {record.slot: record for record in records}
        for slot in list(state.slots):
            if slot not in stored or stored[slot].id != state.slots[slot].id:
                self._forget(state.slots.pop(slot))  # retired by another worker
        for slot, record in stored.items():
            if slot >= self.config.per_domain or slot in state.slots or record.id in self._retired:
                continue
            proxy = self.config.pools.by_id.get(record.proxy)
            if proxy is None or proxy not in state.pool:  # a proxy no longer configured
                self._retire_soon(Session(record, Proxy(record.proxy, "", "?")), "proxy_gone")
                continue
            session = Session(record, proxy, requests=record.requests)
            self._adopt(state, session)
            if not record.established and self._hook(state.domain) is not None:
                # Its worker stopped before the login ended: log it in now.
                session.setup = asyncio.get_running_loop().create_future()
                self._spawn(self._establish(session))
            self.stats.inc_value("pricewatch/sessions/resumed")
            logger.info(
                "Resumed session %s of %s on proxy %s (%d cookies)",
                record.id,
                state.domain,
                proxy.id,
                len(record.cookies),
            )

    def _adopt(self, state: DomainState, session: Session) -> None:
        state.slots[session.record.slot] = session
        self.by_id[session.id] = session
        self._restore_jar(session)

    def _forget(self, session: Session) -> None:
        session.retired = True
        self._retired.add(session.id)
        self.by_id.pop(session.id, None)
        self._dirty.discard(session.id)
        cookies = self.jars()
        if cookies is not None:
            cookies.jars.pop(session.id, None)

    async def _session(self, state: DomainState, slot: int) -> Session:
        session = state.slots.get(slot)
        if session is not None and not session.retired:
            too_old = self.config.max_age and (
                time.time() - session.record.created_at >= self.config.max_age
            )
            benched = state.proxy_state(session.proxy.id).benched_until > self.clock()
            if not too_old and not benched:
                return session
            self._retire_soon(session, "age" if too_old else "benched")
        async with state.lock:
            session = state.slots.get(slot)
            if session is not None and not session.retired:
                return session
            proxy = self._pick_proxy(state, slot)
            if proxy is None:
                await self._defer(state)
            assert proxy is not None
            record = SessionRecord(
                id=secrets.token_hex(8),
                domain=state.domain,
                slot=slot,
                proxy=proxy.id,
                user_agent=self.config.user_agents[secrets.randbelow(len(self.config.user_agents))],
                created_at=time.time(),
            )
            try:
                stored = await self.store.create(record)
                if stored.id in self._retired:
                    # Retired here, its removal from the backend still on its way: not
                    # taken back, ever.
                    await self.store.retire(stored)
                    stored = await self.store.create(record)
            except SessionStoreUnavailable as exc:
                self.stats.inc_value("pricewatch/sessions/store_failed")
                logger.warning(
                    "Session of %s not stored, kept in this worker: %s", state.domain, exc
                )
                stored = record
            chosen = self.config.pools.by_id.get(stored.proxy, proxy)
            session = Session(stored, chosen, requests=stored.requests)
            self._adopt(state, session)
            if stored.id == record.id:
                self.stats.inc_value("pricewatch/sessions/created")
                logger.info(
                    "New session %s of %s (slot %d) on proxy %s",
                    record.id,
                    state.domain,
                    slot,
                    proxy.id,
                )
                if self._hook(state.domain) is not None:
                    session.setup = asyncio.get_running_loop().create_future()
                    self._spawn(self._establish(session))
            else:
                self.stats.inc_value("pricewatch/sessions/resumed")
        return session

    def _pick_proxy(self, state: DomainState, slot: int) -> Proxy | None:
        """The usable proxy of the pool that the domain's other sessions use least, the
        healthiest first; None when every one is benched."""
        now = self.clock()
        in_use: dict[str, int] = {}
        for other in state.slots.values():
            if not other.retired:
                in_use[other.proxy.id] = in_use.get(other.proxy.id, 0) + 1
        usable = [p for p in state.pool if state.proxy_state(p.id).benched_until <= now]
        if not usable:
            return None
        # Spread slots over the pool (slot i starts at proxy i), least used first.
        n = len(state.pool)
        order = {p.id: (state.pool.index(p) - slot) % n for p in state.pool}
        return min(
            usable,
            key=lambda p: (in_use.get(p.id, 0), state.proxy_state(p.id).failures, order[p.id]),
        )

    def _usable(self, state: DomainState) -> bool:
        now = self.clock()
        return any(state.proxy_state(p.id).benched_until <= now for p in state.pool)

    async def _defer(self, state: DomainState) -> None:
        now = self.clock()
        left = min(state.proxy_state(p.id).benched_until for p in state.pool) - now
        left = max(left, 0.0)
        self.stats.inc_value("pricewatch/proxy/deferred")
        if state.paused_until < now + left - 0.5:
            state.paused_until = now + left
            logger.warning(
                "Every proxy of %s is benched: the domain waits %.1fs", state.domain, left
            )
            try:
                frontier = await CrawlResources.of(self.crawler).frontier()
                await frontier.pause_domain(state.domain, left)
            except FrontierUnavailable as exc:
                logger.warning("Could not pause %s in the frontier: %s", state.domain, exc)
        raise ProxiesBenched(f"every proxy of {state.domain} is benched", retry_after=left)

    # -- the login hook -------------------------------------------------------------------------

    def _hook(self, domain: str) -> Any:
        name = matching_domain(domain, self.config.login)
        return None if name is None else self.config.login[name]

    async def _establish(self, session: Session) -> None:
        assert session.setup is not None
        hook = self._hook(session.record.domain)
        try:
            request = self._login_request(hook, session)
            request.meta[SESSION_SETUP_META] = session.id
            request.meta["dont_break_circuit"] = True
            engine = self.crawler.engine
            assert engine is not None
            response = await engine.download_async(request)
            if response.status >= 400:
                raise ValueError(f"HTTP {response.status}")
            session.record = replace(session.record, established=True)
            self.stats.inc_value("pricewatch/sessions/logins")
            await self._save(session)
        except Exception as exc:
            self.stats.inc_value("pricewatch/sessions/login_failed")
            logger.warning(
                "Login of session %s of %s failed, its requests go on without it: %s",
                session.id,
                session.record.domain,
                exc,
            )
        finally:
            session.setup.set_result(None)

    def _login_request(self, hook: Any, session: Session) -> Request:
        if isinstance(hook, str):
            function = self._hooks.get(hook)
            if function is None:
                function = self._hooks[hook] = load_object(hook)
            request = function(session.record.domain, session.id)
            if not isinstance(request, Request):
                raise TypeError(
                    f"{hook} must return a scrapy Request, got {type(request).__name__}"
                )
            return request
        from scrapy import FormRequest

        method = str(hook.get("method", "POST" if "formdata" in hook else "GET"))
        if "formdata" in hook:
            return FormRequest(
                hook["url"], method=method, formdata=hook["formdata"], headers=hook.get("headers"),
                dont_filter=True,
            )  # fmt: skip
        return Request(
            hook["url"], method=method, body=hook.get("body"), headers=hook.get("headers"),
            dont_filter=True,
        )  # fmt: skip

    # -- responses ------------------------------------------------------------------------------

    def process_response(self, request: Request, response: Response) -> Response | Request:
        session_id = request.meta.get(SESSION_META)
        if session_id is None:
            return response
        domain = request_domain(request)
        proxy_id = request.meta.get(PROXY_META, "")
        state = self.domains.get(domain)
        session = self.by_id.get(session_id)
        status = response.status
        marker = None
        if status < 300 and request.meta.get(SESSION_SETUP_META) is None:
            marker = self.challenges.match(response)
        if marker is not None or status in self.config.block_codes:
            self._count(domain, proxy_id, blocks=1)
            self.stats.inc_value("pricewatch/proxy/blocks")
            if session is not None:
                self._retire_soon(session, "blocked")
            retry_after = parse_retry_after(response.headers.get(b"Retry-After"))
            if state is not None:
                self._failed(state, proxy_id, retry_after=retry_after, block=True)
                # The block was this session's (its address, its cookies): another session
                # on another proxy asks again at once, at most once per proxy of the pool.
                if (
                    request.meta.get(SESSION_SETUP_META) is None
                    and request.meta.get(SESSION_REROUTES_META, 0) < len(state.pool) - 1
                    and self._usable(state)
                ):
                    return self._reroute(request)
        elif status >= 500 or status == 407:  # 407: the proxy refused our credentials
            self._count(domain, proxy_id, failures=1)
            self.stats.inc_value("pricewatch/proxy/failures")
            if state is not None:
                self._failed(state, proxy_id)
        else:
            latency = float(request.meta.get("download_latency") or 0.0)
            self._count(domain, proxy_id, ok=1, latency=latency)
            self.stats.inc_value("pricewatch/proxy/ok")
            if state is not None:
                self._succeeded(state, proxy_id)
        if session is not None and not session.retired:
            jar = self._jar_state(session)
            if jar != session.cookie_state:
                session.cookie_state = jar
                self._dirty.add(session.id)
                self._spawn(self._save(session))
        return response

    def process_exception(self, request: Request, exception: Exception) -> Request | None:
        if isinstance(exception, SessionEnded):
            return self._reroute(request)
        if request.meta.get(SESSION_META) is None or isinstance(exception, IgnoreRequest):
            return None
        domain = request_domain(request)
        proxy_id = request.meta.get(PROXY_META, "")
        self._count(domain, proxy_id, failures=1)
        self.stats.inc_value("pricewatch/proxy/failures")
        state = self.domains.get(domain)
        if state is not None:
            self._failed(state, proxy_id)
        return None

    # -- health ---------------------------------------------------------------------------------

    def _count(
        self, domain: str, proxy_id: str, *, ok: int = 0, failures: int = 0, blocks: int = 0,
        latency: float = 0.0,
    ) -> None:  # fmt: skip
        delta = self._health.get((domain, proxy_id))
        if delta is None:
            delta = self._health[(domain, proxy_id)] = HealthDelta()
        delta.ok += ok
        delta.failures += failures
        delta.blocks += blocks
        delta.latency_sum += latency
        self._start_flusher()

    def _succeeded(self, state: DomainState, proxy_id: str) -> None:
        local = state.proxy_state(proxy_id)
        local.failures = 0
        if local.cooldown and local.benched_until <= self.clock() and not local.unbenching:
            local.cooldown = 0.0
            local.unbenching = True
            self.stats.inc_value("pricewatch/proxy/unbenched")
            logger.info("Proxy %s is back for %s: its probe succeeded", proxy_id, state.domain)
            self._spawn(self._unbench(state, proxy_id))

    async def _unbench(self, state: DomainState, proxy_id: str) -> None:
        local = state.proxy_state(proxy_id)
        try:
            async with local.writing:
                await self.store.unbench(state.domain, proxy_id)
        except SessionStoreUnavailable as exc:
            self.stats.inc_value("pricewatch/sessions/store_failed")
            logger.warning("Proxy health not stored: %s", exc)
        finally:
            local.unbenching = False

    def _failed(
        self,
        state: DomainState,
        proxy_id: str,
        *,
        retry_after: float | None = None,
        block: bool = False,
    ) -> None:
        local = state.proxy_state(proxy_id)
        now = self.clock()
        if local.benched_until > now:
            if retry_after is not None and now + retry_after > local.benched_until:
                local.benched_until = now + retry_after  # the shop asks for longer
                self._spawn(self._store_bench(state, proxy_id, retry_after, local.cooldown))
            return
        local.failures += 1
        probing = local.cooldown > 0  # a bench ended and this is its probe's answer
        if not (probing or local.failures >= self.config.bench_failures or retry_after is not None):
            return
        cooldown = (
            min(local.cooldown * self.config.bench_factor, self.config.bench_max_cooldown)
            if probing
            else self.config.bench_cooldown
        )
        seconds = max(cooldown, retry_after or 0.0)
        local.cooldown = cooldown
        local.failures = 0
        local.benched_until = now + seconds
        self.stats.inc_value("pricewatch/proxy/benched")
        logger.warning(
            "Proxy %s benched for %s for %.1fs (%s)",
            proxy_id,
            state.domain,
            seconds,
            "its probe failed" if probing else ("blocked" if block else "failing"),
        )
        for session in list(state.slots.values()):
            if session.proxy.id == proxy_id:
                self._retire_soon(session, "benched")
        self._spawn(self._store_bench(state, proxy_id, seconds, cooldown))

    async def _store_bench(
        self, state: DomainState, proxy_id: str, seconds: float, cooldown: float
    ) -> None:
        try:
            async with state.proxy_state(proxy_id).writing:
                await self.store.bench(state.domain, proxy_id, seconds, cooldown)
        except SessionStoreUnavailable as exc:
            self.stats.inc_value("pricewatch/sessions/store_failed")
            logger.warning("Proxy bench not stored (this worker keeps it): %s", exc)

    # -- retiring and writing -------------------------------------------------------------------

    def _retire_soon(self, session: Session, why: str) -> None:
        if session.retired:
            return
        state = self.domains.get(session.record.domain)
        if state is not None and state.slots.get(session.record.slot) is session:
            del state.slots[session.record.slot]
        self._forget(session)
        self.stats.inc_value("pricewatch/sessions/retired")
        self.stats.inc_value(f"pricewatch/sessions/retired/{why}")
        logger.info(
            "Session %s of %s on proxy %s retired (%s)",
            session.id,
            session.record.domain,
            session.proxy.id,
            why,
        )
        self._spawn(self._retire(session))

    async def _retire(self, session: Session) -> None:
        try:
            await self.store.retire(session.record)
        except SessionStoreUnavailable as exc:
            self.stats.inc_value("pricewatch/sessions/store_failed")
            logger.warning("Retired session not removed from the store (it expires): %s", exc)

    async def _save(self, session: Session) -> None:
        # One write of a session at a time, each built when its turn comes: a write built
        # earlier never lands after (and over) a later one.
        async with session.saving:
            if session.retired:
                return
            session.record = replace(
                session.record,
                requests=max(session.requests, session.record.requests),
                cookies=self._stored_cookies(session),
            )
            self._dirty.discard(session.id)
            try:
                if not await self.store.save(session.record):
                    # Retired by another worker: make a new one at the next request.
                    self._retire_soon(session, "elsewhere")
            except SessionStoreUnavailable as exc:
                self._dirty.add(session.id)
                self.stats.inc_value("pricewatch/sessions/store_failed")
                logger.warning("Session %s not stored: %s", session.id, exc)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _start_flusher(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())

    async def _flush_loop(self) -> None:
        while self._health or self._dirty:
            await asyncio.sleep(_FLUSH_INTERVAL)
            await self.flush()

    async def flush(self) -> None:
        """Write the health counts and the sessions' request counts gathered so far (after
        those of a flush already under way: when it returns, all of them are written)."""
        async with self._flushing:
            deltas, self._health = self._health, {}
            if deltas:
                try:
                    await self.store.add_health(deltas)
                except SessionStoreUnavailable as exc:
                    self.stats.inc_value("pricewatch/sessions/store_failed")
                    logger.warning("Proxy health counts not stored: %s", exc)
            for session_id in list(self._dirty):
                session = self.by_id.get(session_id)
                if session is None:
                    self._dirty.discard(session_id)
                else:
                    await self._save(session)

    async def _spider_closed(self) -> None:
        try:
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=_CLOSE_TIMEOUT)
            await asyncio.wait_for(self.flush(), _CLOSE_TIMEOUT)
        except TimeoutError:
            logger.warning("Sessions not all written at close; they are written next run")
        finally:
            if self._flusher is not None:
                self._flusher.cancel()
            await self.store.close()
