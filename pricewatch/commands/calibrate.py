"""``scrapy calibrate URL [--max N]``: measure how many requests in flight a shop tolerates
before its first crawl, and store it as the domain's starting limit.

A bounded, polite ramp on one product URL: ``ROUNDS`` rounds of 1 request at a time, then
2 at a time, and so on, ``DOWNLOAD_DELAY`` (or the robots.txt ``Crawl-delay``, if longer)
between rounds; it stops at the first sign of pushback (a status in
``PRICEWATCH_LIMIT_PUSHBACK_CODES``, a challenge page, a timeout, or a round whose latency
rose over ``PRICEWATCH_LIMIT_LATENCY_FACTOR`` x the latency at 1, and
``PRICEWATCH_LIMIT_LATENCY_MIN_RISE`` above it), at ``--max`` (default: the limit's ceiling,
``PRICEWATCH_LIMIT_CEILING`` or ``CONCURRENT_REQUESTS_PER_DOMAIN``) or when the next step
would exceed ``--requests`` requests in all. The tolerated concurrency is the last step
without pushback. A robots.txt ``Crawl-delay`` means one request at a time at that pace: the
ramp does not go beyond 1. A URL robots.txt disallows, or a host on a non-public address
outside ``PRICEWATCH_ALLOWED_NETWORKS``, is refused.

It prints each step's evidence (requests, 429/503/challenge answers, latency) and stores
the result in the frontier (``PRICEWATCH_FRONTIER_URL``, ``--frontier``) as the domain's
adaptive limit (:mod:`pricewatch.politeness.limits`), with the reason ``calibrate``;
``--dry-run`` stores nothing. ``--json`` prints the result as one JSON line.

Exit codes: 0 measured (and stored); 1 the frontier is unreachable or the URL could not be
fetched; 2 refused (robots.txt, destination); 3 the shop pushed back at one request at a
time (stored: concurrency 1 with a raised delay).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import socket
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from pricewatch._urls import site_of
from pricewatch.commands._output import use_help_formatter
from pricewatch.destinations import allowed_networks, non_public_kind
from pricewatch.frontier import FrontierUnavailable, frontier_from_settings
from pricewatch.politeness.limits import MIN_RAISED_DELAY, DomainLimit, LimitConfig, step

if TYPE_CHECKING:
    import aiohttp

ROUNDS = 2  # rounds of requests per step
EXIT_UNAVAILABLE = 1
EXIT_REFUSED = 2
EXIT_PUSHBACK_AT_ONE = 3


@dataclass
class Step:
    concurrency: int
    requests: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    challenges: int = 0
    timeouts: int = 0
    latency_ms: list[float] = field(default_factory=list)
    pushback: str | None = None

    @property
    def mean_ms(self) -> float:
        return sum(self.latency_ms) / len(self.latency_ms) if self.latency_ms else 0.0

    def line(self) -> str:
        codes = ", ".join(f"{code}: {n}" for code, n in sorted(self.statuses.items()))
        worst = max(self.latency_ms, default=0.0)
        extra = f", challenge pages: {self.challenges}" if self.challenges else ""
        extra += f", timeouts: {self.timeouts}" if self.timeouts else ""
        verdict = f"  <- pushback ({self.pushback})" if self.pushback else ""
        return (
            f"  concurrency {self.concurrency:2d}: {self.requests:3d} requests ({codes}{extra}); "
            f"latency mean {self.mean_ms:.0f} ms, max {worst:.0f} ms{verdict}"
        )


class Refused(Exception):
    """The command will not probe this URL (robots.txt, destination)."""


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "URL [--max N] [--requests N] [--frontier URL] [--dry-run] [--json]"

    def short_desc(self) -> str:
        return "Measure how many requests in flight a shop tolerates; store it as its limit"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        use_help_formatter(parser)
        parser.add_argument("--max", type=int, metavar="N", help="never more than N at once")
        parser.add_argument(
            "--requests",
            type=int,
            default=60,
            metavar="N",
            help="never more than N requests in all (60)",
        )
        parser.add_argument(
            "--frontier", metavar="URL", help="frontier URL (default: PRICEWATCH_FRONTIER_URL)"
        )
        parser.add_argument("--dry-run", action="store_true", help="measure, store nothing")
        parser.add_argument("--json", action="store_true", help="the result as one JSON line")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give one product URL")
        url = args[0]
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise UsageError(f"URL must be an http(s) URL, got {url!r}")
        assert self.settings is not None
        settings = self.settings
        if opts.frontier:
            settings.set("PRICEWATCH_FRONTIER_URL", opts.frontier, priority="cmdline")
        config = LimitConfig.from_settings(settings)
        most = config.ceiling if opts.max is None else opts.max
        if not 1 <= most <= config.ceiling:
            raise UsageError(
                f"--max must be between 1 and the limit's ceiling ({config.ceiling}, "
                f"PRICEWATCH_LIMIT_CEILING or CONCURRENT_REQUESTS_PER_DOMAIN), got {most}"
            )
        if opts.requests < ROUNDS:
            raise UsageError(f"--requests must be >= {ROUNDS}, got {opts.requests}")
        # Imported here: Scrapy imports every command module for every command.
        import aiohttp

        probe = Probe(url, settings, config, most, opts.requests)
        try:
            self.exitcode = asyncio.run(self._run(probe, opts))
        except Refused as exc:
            print(f"calibrate: refused: {exc}", file=sys.stderr)
            self.exitcode = EXIT_REFUSED
        except (FrontierUnavailable, OSError, aiohttp.ClientError) as exc:
            print(f"calibrate: {exc}", file=sys.stderr)
            self.exitcode = EXIT_UNAVAILABLE

    async def _run(self, probe: Probe, opts: argparse.Namespace) -> int:
        result = await probe.run(echo=not opts.json)
        concurrency, delay = result["concurrency"], result["delay"]
        if not opts.dry_run:
            await store(probe, concurrency, delay, result["reason"])
            result["stored"] = True
        if opts.json:
            print(json.dumps(result))
        else:
            where = "not stored (--dry-run)" if opts.dry_run else "stored as its starting limit"
            print(
                f"{probe.domain}: tolerated concurrency {concurrency}, delay {delay:g} s, "
                f"{result['requests']} requests ({result['reason']}); {where}"
            )
        return EXIT_PUSHBACK_AT_ONE if result["pushback_at_one"] else 0


class Probe:
    def __init__(
        self, url: str, settings: Any, config: LimitConfig, most: int, budget: int
    ) -> None:
        self.url = url
        self.settings = settings
        self.config = config
        self.most = most
        self.budget = budget
        self.host = urlsplit(url).hostname or ""
        self.domain = site_of(self.host)
        self.user_agent = settings.get("USER_AGENT")
        self.timeout = settings.getfloat("DOWNLOAD_TIMEOUT")
        self.obey_robots = settings.getbool("ROBOTSTXT_OBEY")
        self.allowed = allowed_networks(settings.getlist("PRICEWATCH_ALLOWED_NETWORKS"))
        from pricewatch.politeness.challenge import ChallengeDetector

        challenges = ChallengeDetector.from_settings(settings)
        self.markers, self.scan = challenges.markers, challenges.scan_bytes

    async def run(self, *, echo: bool) -> dict[str, Any]:
        import aiohttp

        await self._check_destination()
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        headers = {"User-Agent": self.user_agent}
        connector = aiohttp.TCPConnector(limit=self.most, limit_per_host=self.most)
        async with aiohttp.ClientSession(
            timeout=timeout, headers=headers, connector=connector
        ) as session:
            crawl_delay = await self._robots(session)
            delay = max(self.config.base_delay, crawl_delay or 0.0)
            most = 1 if crawl_delay else self.most
            if echo:
                why = f"robots.txt Crawl-delay {crawl_delay:g} s: " if crawl_delay else ""
                print(
                    f"calibrating {self.domain} on {self.url}: {why}up to {most} at once, "
                    f"{ROUNDS} rounds a step, {delay:g} s between rounds, at most "
                    f"{self.budget} requests"
                )
            steps: list[Step] = []
            used = 0
            for concurrency in range(1, most + 1):
                if used + ROUNDS * concurrency > self.budget:
                    break
                current = Step(concurrency)
                for _ in range(ROUNDS):
                    await asyncio.sleep(delay)
                    await self._round(session, current)
                    if current.pushback:
                        break
                used += current.requests
                baseline = steps[0].mean_ms if steps else None
                if current.pushback is None and baseline is not None:
                    self._check_latency(current, baseline)
                steps.append(current)
                if echo:
                    print(current.line(), flush=True)
                if current.pushback:
                    break
        clean = [s for s in steps if s.pushback is None]
        tolerated = clean[-1].concurrency if clean else 1
        pushed = next((s for s in steps if s.pushback), None)
        at_one = pushed is not None and pushed.concurrency == 1
        if at_one:
            delay = min(self.config.max_delay, max(delay * 2, MIN_RAISED_DELAY))
        if pushed is not None:
            reason = f"pushback at {pushed.concurrency} ({pushed.pushback})"
        elif crawl_delay:
            reason = f"robots.txt Crawl-delay {crawl_delay:g} s"
        elif tolerated == most:
            reason = f"no pushback up to --max {most}"
        else:
            reason = f"no pushback up to {tolerated}, request budget {self.budget} reached"
        return {
            "domain": self.domain,
            "url": self.url,
            "concurrency": tolerated,
            "delay": delay,
            "requests": used,
            "reason": reason,
            "pushback_at_one": at_one,
            "steps": [asdict(s) | {"mean_ms": round(s.mean_ms, 1)} for s in steps],
        }

    async def _check_destination(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(self.host, None, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise OSError(f"cannot resolve {self.host}: {exc}") from exc
        for info in infos:
            address = ipaddress.ip_address(info[4][0])
            kind = non_public_kind(address)
            if kind is not None and not any(address in net for net in self.allowed):
                raise Refused(
                    f"{self.host} is {address} ({kind}), not a public address and not in "
                    "PRICEWATCH_ALLOWED_NETWORKS"
                )

    async def _robots(self, session: aiohttp.ClientSession) -> float | None:
        """The robots.txt Crawl-delay for our user agent (None: none); refuses the URL if
        robots.txt disallows it (when ROBOTSTXT_OBEY)."""
        import aiohttp
        from protego import Protego

        if not self.obey_robots:
            return None
        parts = urlsplit(self.url)
        robots_url = f"{parts.scheme}://{parts.netloc}/robots.txt"
        try:
            async with session.get(robots_url) as response:
                text = await response.text(errors="replace") if response.status == 200 else ""
        except (aiohttp.ClientError, TimeoutError):
            text = ""
        rules = Protego.parse(text)
        if not rules.can_fetch(self.url, self.user_agent):
            raise Refused(f"robots.txt of {parts.netloc} disallows {self.url}")
        delay = rules.crawl_delay(self.user_agent)
        return float(delay) if delay else None

    async def _round(self, session: aiohttp.ClientSession, step: Step) -> None:
        answers = await asyncio.gather(
            *(self._fetch(session) for _ in range(step.concurrency)), return_exceptions=True
        )
        for answer in answers:
            step.requests += 1
            if isinstance(answer, BaseException):
                if isinstance(answer, TimeoutError | asyncio.TimeoutError):
                    step.timeouts += 1
                    step.pushback = step.pushback or "timeout"
                    continue
                raise answer
            status, seconds, challenge = answer
            step.statuses[str(status)] = step.statuses.get(str(status), 0) + 1
            step.latency_ms.append(seconds * 1000)
            if status in self.config.pushback_codes:
                step.pushback = step.pushback or f"http_{status}"
            elif challenge:
                step.challenges += 1
                step.pushback = step.pushback or "challenge"

    async def _fetch(self, session: aiohttp.ClientSession) -> tuple[int, float, bool]:
        started = time.monotonic()
        async with session.get(self.url, allow_redirects=True) as response:
            seconds = time.monotonic() - started  # to the response headers, as Scrapy's
            head = (await response.content.read(self.scan)).lower()
            challenge = response.status < 300 and any(m in head for m in self.markers)
            return response.status, seconds, challenge

    def _check_latency(self, step: Step, baseline_ms: float) -> None:
        factor = self.config.latency_factor
        rise = step.mean_ms - baseline_ms
        if factor and step.mean_ms > factor * baseline_ms:
            if rise >= self.config.latency_min_rise * 1000:
                step.pushback = f"latency {step.mean_ms:.0f} ms vs {baseline_ms:.0f} ms at 1"


async def store(probe: Probe, concurrency: int, delay: float, reason: str) -> None:
    """Make the measured limit the domain's starting point in the frontier."""
    config = probe.config

    def update(domain: str, stored: str | None, now: float) -> tuple[int, str]:
        old = DomainLimit.from_json(stored) if stored else None
        base = step(old, None, now, config)
        state = replace(
            base,
            limit=float(concurrency),
            delay=delay,
            generation=base.generation + 1,
            slow_start=False,
            grow_at=now + config.interval,
            hold=config.interval,
            healthy=0,
            reason=f"calibrate: {reason}",
            changed_at=now,
            profile={**base.profile, str(base.hour): float(concurrency)},
        )
        state = step(state, None, now, config)  # within the operator's bounds
        return state.concurrency, state.to_json()

    frontier = frontier_from_settings(probe.settings)
    async with frontier:
        await frontier.adjust_limits([probe.domain], update)
