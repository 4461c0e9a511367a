"""Settings of the pricewatch Scrapy project: the file operators edit.

Every threshold is grouped by stage and commented with what it does, its unit and
when to change it. Scrapy's own settings keep Scrapy's names; the project's own
knobs are ``PRICEWATCH_<COMPONENT>_<KNOB>``. The two backend URLs are also read
from the environment variables of the same name (cron, scrapyd).
"""

from __future__ import annotations

import os

BOT_NAME = "pricewatch"
SPIDER_MODULES = ["pricewatch.spiders"]
NEWSPIDER_MODULE = "pricewatch.spiders"
# Project commands: `scrapy seed`, `scrapy extract`, `scrapy prices`, `scrapy sandbox`, ...
COMMANDS_MODULE = "pricewatch.commands"

# --- Engine ---------------------------------------------------------------------------------
# The asyncio reactor, set explicitly: the pipelines, the frontier and the store are asyncio
# code. The spider refuses to crawl (non-zero exit) if another reactor is installed.
TWISTED_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
# Identify the crawler and give shops a way to reach its operator. Change the URL to yours.
USER_AGENT = "pricewatch/0.1 (+https://github.com/pricewatch/pricewatch; price monitoring bot)"
# Obey robots.txt: disallowed product URLs end as `skipped`, never fetched.
ROBOTSTXT_OBEY = True
# Scrapy's request fingerprint dupefilter is off: the frontier decides what is due, and the
# same URL is legitimately fetched again in follow mode.
DUPEFILTER_CLASS = "scrapy.dupefilters.BaseDupeFilter"
LOG_LEVEL = "INFO"
FEED_EXPORT_ENCODING = "utf-8"
# Memory of one crawl process (Scrapy's MemoryUsage extension; Linux/macOS, the process's
# peak RSS, checked every MEMUSAGE_CHECK_INTERVAL_SECONDS; a browser's own processes are not
# counted). A worker uses ~150-300 MB (64 requests in flight of at most DOWNLOAD_MAXSIZE,
# store batches, the buffer while the store is down). Over MEMUSAGE_WARNING_MB a warning is
# logged; over MEMUSAGE_LIMIT_MB the crawl is closed (finish reason `memusage_exceeded`):
# what was stored is acknowledged, the other leases expire after
# PRICEWATCH_FRONTIER_LEASE_TTL and the next run fetches them. Size it to the worker's share
# of the machine's memory (0 = no limit).
MEMUSAGE_ENABLED = True
MEMUSAGE_LIMIT_MB = 1024
MEMUSAGE_WARNING_MB = 768
MEMUSAGE_CHECK_INTERVAL_SECONDS = 15.0
# No telnet console and no remote-control HTTP server: both run code inside the crawler
# process, which a cron or scrapyd worker should not expose.
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False

# --- Fetch: concurrency and politeness -------------------------------------------------------
# Requests in flight across all shops of one process, counting those a host's slot holds
# back for its DOWNLOAD_DELAY. Politeness is per host (below); this only bounds the process's
# sockets and memory. At 64, 20 shops at 0.6 s a page reached 0.80 of the per-host ceiling
# (requests waiting out a delay filled the global count); at 128, 0.95 (bench/throughput.py).
CONCURRENT_REQUESTS = 128
# Requests in flight to one host of one process: the first anti-ban lever. Lower it for
# fragile shops (or per host with DOWNLOAD_SLOTS); raise only with the shop's consent.
CONCURRENT_REQUESTS_PER_DOMAIN = 12
# What one response's output is processed with, in parallel: Scrapy starts this many tasks per
# response whatever it yields, and a product page yields one offer (or one request), so
# Scrapy's 100 cost ~1.4 ms of CPU per page for nothing (bench/throughput.py). Raise it only
# for a spider of your own whose pages yield many items.
CONCURRENT_ITEMS = 4
# Scrapy's downloader with one fix: under the asyncio reactor the stock one lets a whole slot
# queue (up to CONCURRENT_REQUESTS) go to one host at once when the slot's delay is 0, so
# CONCURRENT_REQUESTS_PER_DOMAIN and DOWNLOAD_SLOTS concurrency did not hold. This one counts a
# request against its slot as it leaves the queue. See docs/per-domain-concurrency.md.
DOWNLOADER = "pricewatch.downloader.SlotAccountingDownloader"
# Seconds between two requests to one host (before AutoThrottle adapts it).
DOWNLOAD_DELAY = 0.2
# Spread the delay to 0.5x-1.5x so the cadence does not look robotic. This is what
# RANDOMIZE_DOWNLOAD_DELAY = True did; Scrapy 2.19 deprecates that name for this one.
DOWNLOAD_DELAY_JITTER = 0.5
# Seconds one download may take in total, from sending the request to the last byte of the
# body, before it is abandoned (outcome `error`, reason `timeout`): a shop that trickles its
# page a byte at a time cannot hold a download slot longer. Raise for slow shops.
DOWNLOAD_TIMEOUT = 30
# Bytes a response body may have, on the wire and again after gzip/deflate/brotli/zstd
# decompression, before the download is abandoned (outcome `error`, reason `too_large`). A
# product page is 50 KB to 2 MB of HTML; 8 MiB leaves room for the heaviest and stops a
# decompression bomb (Scrapy's default is 1 GiB). Raise it only for a shop whose real pages
# are bigger (DOWNLOAD_WARNSIZE warnings in the log tell you).
DOWNLOAD_MAXSIZE = 8 * 1024 * 1024
# Bytes above which a response body is logged as a warning (still processed).
DOWNLOAD_WARNSIZE = 2 * 1024 * 1024
# AutoThrottle is off: the adaptive per-domain limit below (PRICEWATCH_LIMIT_*) moves each
# shop's concurrency and delay from the shop's own pushback (429/503, challenge pages,
# timeouts, a latency rise), shared by every worker. AutoThrottle reacts to latency only and
# aims at AUTOTHROTTLE_TARGET_CONCURRENCY requests in flight per host whatever the shop
# tolerates. Turned on, it owns each slot's delay (the limit then moves concurrency only).
AUTOTHROTTLE_ENABLED = False
# Average requests in flight AutoThrottle aims for, per host (when enabled).
AUTOTHROTTLE_TARGET_CONCURRENCY = 2.0
# Delay bounds AutoThrottle moves between, in seconds (when enabled).
AUTOTHROTTLE_START_DELAY = 0.2
AUTOTHROTTLE_MAX_DELAY = 30.0
# Adaptive per-domain limit (pricewatch/politeness/limits.py, adaptive.py): each domain's
# requests in flight (and delay) follow its own answers. Healthy answers raise it (+1 per
# round trip until the first pushback, then +1 per INCREASE_INTERVAL seconds of health);
# pushback multiplies it by DECREASE, once per burst (at the floor the delay doubles
# instead, from at least 1 s up to MAX_DELAY). The limit lives in the frontier backend:
# every worker sharing it obeys one per-domain budget (the frontier hands out no more leases
# of a domain being fetched than the limit), a new worker starts from what was learned, and
# the last limit of each hour of the week is kept so a shop's peak-hour limit is used from
# the start of that hour. Hosts with DOWNLOAD_SLOTS concurrency keep that, untouched.
# `scrapy frontier --limits` shows each domain's limit and why it last changed;
# `scrapy calibrate URL` measures a shop's tolerance before the first crawl.
PRICEWATCH_LIMIT_ENABLED = True
# Requests in flight to a domain nothing was learned about yet (across all workers).
PRICEWATCH_LIMIT_START = 2
# The lowest limit; below it only the delay grows.
PRICEWATCH_LIMIT_FLOOR = 1
# The highest limit; None: CONCURRENT_REQUESTS_PER_DOMAIN (whatever it is set to). Never
# above what the shop allows you.
PRICEWATCH_LIMIT_CEILING: int | None = None
# Factor applied to the limit on pushback (0-1). Lower backs off harder.
PRICEWATCH_LIMIT_DECREASE = 0.5
# Seconds of healthy answers (at least one per request allowed in flight) before +1, after
# the first pushback; twice as long each time the level just reached fails again, up to
# MAX_HOLD seconds. Raise it for shops that ban on a few 429s.
PRICEWATCH_LIMIT_INCREASE_INTERVAL = 10.0
PRICEWATCH_LIMIT_MAX_HOLD = 600.0
# The longest delay (seconds between two requests to a domain) the limit may impose.
PRICEWATCH_LIMIT_MAX_DELAY = 30.0
# Statuses that are pushback (challenge pages and timeouts are too).
PRICEWATCH_LIMIT_PUSHBACK_CODES = [429, 503]
# A domain's recent latency above FACTOR x its usual latency, and at least MIN_RISE seconds
# above it (moving averages of Scrapy's download_latency), is pushback too: a shop that
# queues instead of answering 429. MIN_RISE keeps a busy crawler's own jitter on fast
# pages from reading as a rise. FACTOR 0 turns the latency signal off.
PRICEWATCH_LIMIT_LATENCY_FACTOR = 3.0
PRICEWATCH_LIMIT_LATENCY_MIN_RISE = 0.5
# Seconds between two syncs of a worker's observations with the shared limit (pushback is
# sent at once).
PRICEWATCH_LIMIT_SYNC_INTERVAL = 0.5
# Status codes retried by Scrapy's retry middleware; 429 and 5xx are transient.
RETRY_HTTP_CODES = [429, 500, 502, 503, 504]
# Retries per request before the outcome is `blocked` or `error` (the frontier retries later).
RETRY_TIMES = 2
# Let 404/410/403/429 reach the spider so it can record `gone`/`blocked` outcomes.
HTTPERROR_ALLOWED_CODES = [403, 404, 410, 429]

# --- Fetch: where the crawler may go (pricewatch/destinations.py) ---------------------------
# Networks (CIDR) the crawler may fetch from although they are not on the public internet.
# By default none: a seeded URL, redirect or meta refresh whose host resolves to a loopback,
# private, link-local (cloud metadata at 169.254.169.254) or other reserved address ends as
# `skipped`, counted in pricewatch/destination/refused/<kind>. Add the networks of shops you
# crawl on a private network, e.g. ["10.20.0.0/16"]; the sandbox needs ["127.0.0.0/8"].
# Read from the environment variable of the same name (comma-separated).
PRICEWATCH_ALLOWED_NETWORKS = [
    n.strip() for n in os.environ.get("PRICEWATCH_ALLOWED_NETWORKS", "").split(",") if n.strip()
]

# --- Fetch: sessions and proxies (pricewatch/sessions/) ---------------------------------------
# Proxy pools. Empty (the default): every request goes out directly and the session middleware
# is not even built. A list of proxy URLs (http://user:password@proxy:3128, https://...) for
# every domain; a dict of pools per domain, {"shop.example": [...], "*": [...]} ("*": every
# other domain; a domain with no pool and no "*" goes out directly); or a string: JSON of
# either, URLs separated by commas, or the path of a file (JSON, or one URL per line). Keep
# credentials in the URLs of the environment variable of the same name or of that file, not in
# a committed file: nothing prints them (proxies are named by an 8-hex-digit id). Proxies
# are not checked against PRICEWATCH_ALLOWED_NETWORKS (you chose them); shops still are.
PRICEWATCH_PROXIES: str | list[str] | dict[str, list[str]] = os.environ.get(
    "PRICEWATCH_PROXIES", ""
)
# Sessions (proxy, cookie jar, user agent) each domain keeps at once, each on its own proxy
# when the pool allows; a SKU always uses the same one. 1 = the most sticky: one identity per
# shop. Raise it to spread a shop's load over more addresses (a shop that rate-limits per IP).
PRICEWATCH_SESSIONS_PER_DOMAIN = 1
# A session is retired (and a new one made, on another proxy) after this many requests
# (0 = no limit) or this many seconds (0 = no limit), or as soon as it is blocked.
PRICEWATCH_SESSION_MAX_REQUESTS = 500
PRICEWATCH_SESSION_MAX_AGE = 1800.0
# Seconds a stored session lives in the backend after its last write (its cookies, its
# request count): a session nobody used for this long is forgotten. Above MAX_AGE.
PRICEWATCH_SESSION_TTL = 86400.0
# User agents a new session picks one of (it keeps it for life); [] = USER_AGENT.
PRICEWATCH_SESSION_USER_AGENTS: list[str] = []
# Statuses that mean the shop blocked this session (retired at once); challenge pages too
# (PRICEWATCH_CHALLENGE_MARKERS).
PRICEWATCH_SESSION_BLOCK_CODES = [403, 429]
# Per domain, a login/loyalty hook run once per new session, before its first request,
# through its proxy and cookie jar: {"shop.example": {"url": "https://shop.example/login",
# "method": "POST", "formdata": {"card": "..."}}} (or "body", "headers"), or the path of a
# function (domain, session_id) -> scrapy.Request, e.g. {"shop.example": "myhooks:login"}.
PRICEWATCH_SESSION_LOGIN: dict[str, object] = {}
# Seconds between two reads of a domain's sessions and proxy health from the backend (what
# other workers changed).
PRICEWATCH_SESSION_REFRESH = 5.0
# Proxy health, per proxy and domain: this many failures in a row (network errors, 5xx, or
# blocks) bench the proxy for that domain for COOLDOWN seconds (at least a block's
# Retry-After). When it ends the proxy is probed by the next session: a success brings it
# back, a failure benches it again for the last cooldown x FACTOR, up to MAX_COOLDOWN. A
# domain whose proxies are all benched waits (paused in the frontier) instead of going direct.
PRICEWATCH_PROXY_BENCH_FAILURES = 3
PRICEWATCH_PROXY_BENCH_COOLDOWN = 60.0
PRICEWATCH_PROXY_BENCH_FACTOR = 2.0
PRICEWATCH_PROXY_BENCH_MAX_COOLDOWN = 3600.0

# --- Fetch: circuit breaker, backoff, challenge pages (pricewatch/politeness/) -------------
# Fragile shops: give them their own pace with Scrapy's DOWNLOAD_SLOTS, e.g.
#   DOWNLOAD_SLOTS = {"fragile-shop.example": {"concurrency": 1, "delay": 2.0}}
# (concurrency: requests in flight to that host; delay: seconds between two of them, still
# jittered by DOWNLOAD_DELAY_JITTER; AutoThrottle never goes below it).
# Per-domain circuit breaker: after THRESHOLD blocks (a status in STATUS_CODES or a challenge
# page) within WINDOW seconds, a domain is paused for every worker (through the frontier) for
# COOLDOWN seconds, and at least as long as the shop's Retry-After. Then one probe request
# goes through: success closes the circuit, failure reopens it for COOLDOWN x COOLDOWN_FACTOR
# (up to MAX_COOLDOWN). Requests of a paused domain are rescheduled (`skipped`), never lost.
# Lower THRESHOLD / raise COOLDOWN for shops that ban quickly.
PRICEWATCH_BREAKER_ENABLED = True
PRICEWATCH_BREAKER_THRESHOLD = 5
PRICEWATCH_BREAKER_WINDOW = 60.0
PRICEWATCH_BREAKER_COOLDOWN = 60.0
PRICEWATCH_BREAKER_COOLDOWN_FACTOR = 2.0
PRICEWATCH_BREAKER_MAX_COOLDOWN = 3600.0
PRICEWATCH_BREAKER_STATUS_CODES = [403, 429, 503]
# Seconds before a request that arrived while the probe was in flight is tried again.
PRICEWATCH_BREAKER_HALF_OPEN_RETRY = 5.0
# Seconds after which a probe with no answer no longer holds back the next one. None:
# DOWNLOAD_TIMEOUT + 10 (whatever DOWNLOAD_TIMEOUT is set to), enough for any download.
PRICEWATCH_BREAKER_PROBE_TIMEOUT: float | None = None
# Case-insensitive strings that mark a 200 page as a CAPTCHA/bot wall (outcome `blocked`,
# never `no_price` nor out of stock), searched in the first PRICEWATCH_CHALLENGE_SCAN_BYTES
# of the body. Add your shops' walls; an empty list turns detection off.
# fmt: off
PRICEWATCH_CHALLENGE_MARKERS = [
    "g-recaptcha", "h-captcha", "cf-challenge", "challenge-platform", "challenge-form",
    "px-captcha", "captcha-delivery", "verify you are human", "are you a robot",
    "unusual traffic from your computer",
]
# fmt: on
PRICEWATCH_CHALLENGE_SCAN_BYTES = 65536
# Retries of RETRY_HTTP_CODES wait uniform(0, min(MAX, BASE x 2^(n-1))) seconds before the
# n-th retry (full jitter), and never less than the shop's Retry-After. They wait in the
# scheduler, holding no download slot; a wait that would outlive the lease goes back to the
# frontier instead. Raise BASE for shops that rate-limit hard.
PRICEWATCH_BACKOFF_BASE = 1.0
PRICEWATCH_BACKOFF_MAX = 30.0
# Holds back retries until their backoff time (required by the backoff retry middleware).
SCHEDULER = "pricewatch.politeness.scheduler.BackoffScheduler"
# Tiered fallback (pricewatch/politeness/fallback.py): per domain, an official JSON source
# used for the SKUs of a domain whose circuit has been open for PRICEWATCH_FALLBACK_AFTER seconds
# (observations stored with source "api"), e.g.
#   {"shop.example": {"url": "https://api.shop.example/products/{sku}",
#                     "price": "price.amount", "currency": "price.currency",
#                     "availability": "availability"}}
# ({sku}, {url} (percent-encoded) and {domain} are filled in; the values are dotted paths into
# the JSON answer; without "price" the answer is read by the generic JSON reader).
PRICEWATCH_OFFICIAL_SOURCES: dict[str, dict[str, object]] = {}
# Seconds a domain's circuit must have been open before its official source is used.
PRICEWATCH_FALLBACK_AFTER = 300.0
# Fraction (0-1) of page offers of those domains also fetched from the official source and
# compared; a relative price difference above PRICEWATCH_FALLBACK_TOLERANCE (or another
# currency) is logged and counted (pricewatch/fallback/disagreements). 0 turns it off.
PRICEWATCH_FALLBACK_CROSSCHECK = 0.0
PRICEWATCH_FALLBACK_TOLERANCE = 0.01

# --- Fetch: JavaScript storefronts (pricewatch/browser/) --------------------------------------
# Only the domains that need one go through a headless browser (3-5x the latency and memory
# of plain HTTP): those listed here, and those learned (a static fetch found no price, the
# page showed client-side rendering, a browser retry found one), remembered in the frontier
# backend. BrowserAddon sets PLAYWRIGHT_LAUNCH_OPTIONS (when unset: a system Chromium, else
# Playwright's own) and PLAYWRIGHT_ABORT_REQUEST (when unset: the PRICEWATCH_BROWSER_BLOCK_*
# and PRICEWATCH_ALLOWED_NETWORKS; an operator's own predicate replaces both checks).
# SettingsCheck (pricewatch/startup.py) refuses, before anything is built, a setting value a
# crawl cannot run with (one line: the setting, the value, what is allowed, where it came
# from); it runs last so that it sees what the other add-ons set.
ADDONS = {"pricewatch.browser.BrowserAddon": 0, "pricewatch.startup.SettingsCheck": 1000}
# http/https: Scrapy's HTTP/1.1 handler for plain requests; scrapy-playwright's handler (one
# Playwright driver) is started only when the first request with `playwright` meta appears,
# so a crawl of static shops never starts one (pricewatch/browser/handler.py).
DOWNLOAD_HANDLERS = {
    "http": "pricewatch.browser.handler.LazyBrowserDownloadHandler",
    "https": "pricewatch.browser.handler.LazyBrowserDownloadHandler",
}
# Hosts always fetched through the browser (a domain covers its subdomains), e.g.
# ["shop.example", "spa-store.example"]. Add a shop here when you know it renders prices in JS.
PRICEWATCH_JS_DOMAINS: list[str] = []
# Learn JS-only domains (one browser retry of a static miss showing client-side rendering).
PRICEWATCH_BROWSER_LEARN = True
# Browser retries of one domain finding no price, per crawl, before the crawl stops retrying
# that domain in the browser (its pages simply have no price). Lower it to save browser time.
PRICEWATCH_BROWSER_LEARN_TRIES = 3
# Seconds between reloads of the learned domains (those other workers learned).
PRICEWATCH_BROWSER_ROUTES_REFRESH = 60.0
# Seconds a browser page may take, after it loaded, to produce a price (an XHR/fetch JSON
# offer or a filled price node) before it ends as `no_price`. Also the longest a scroll
# listing's page, loaded for its endpoint, is watched for its JSON requests (it usually
# ends sooner: when the page's network is idle). Raise for slow shops.
PRICEWATCH_BROWSER_WAIT_TIMEOUT = 10.0
# While waiting for the product's own price (its XHR JSON, or a price inside the product's
# region), a rendered page is read again when its DOM changes, at most once per this many
# seconds. Lower finds prices sooner on busy pages at the cost of more page reads (each one
# a DOM serialisation and an extraction).
PRICEWATCH_BROWSER_POLL_INTERVAL = 0.2
# Per host, the CSS selector of a node that must show a digit before the rendered page is
# read, e.g. {"shop.example": "#price"}; other hosts: none. Set one for a shop whose page
# shows a placeholder price in the product's region before the real one arrives.
PRICEWATCH_BROWSER_PRICE_SELECTORS: dict[str, str] = {}
# Per host, regular expressions of the XHR/fetch URLs whose JSON carries the offer, e.g.
# {"shop.example": [r"/api/offer/"]}; [] reads the DOM only. Other hosts: product-like JSON
# (an object with a price key, not a list of products) that names the page's own product by
# SKU, name or URL (pricewatch/browser/_identity.py); another product's JSON is ignored.
PRICEWATCH_BROWSER_XHR_PATTERNS: dict[str, list[str]] = {}
# Pages per browser context before new pages go to a fresh context (the old one closes when
# its last page does), so caches and leaks do not pile up. Lower it if memory still grows.
PRICEWATCH_BROWSER_CONTEXT_PAGES = 100
# When navigation counts as done before the wait for the price: "domcontentloaded" (fast;
# the price wait follows), "load" or "networkidle" (slower, for pages that need them).
PRICEWATCH_BROWSER_WAIT_UNTIL = "domcontentloaded"
# Resource types the browser never downloads (Playwright names); [] downloads everything.
PRICEWATCH_BROWSER_BLOCK_RESOURCES = ["image", "media", "font", "stylesheet"]
# URLs (regular expressions) never downloaded: tag managers, analytics, beacons. Add a shop's
# own trackers here; [] downloads them all.
# fmt: off
PRICEWATCH_BROWSER_BLOCK_URLS = [
    r"googletagmanager\.com", r"google-analytics\.com", r"doubleclick\.net",
    r"connect\.facebook\.net", r"hotjar\.com", r"segment\.(?:io|com)", r"clarity\.ms",
    r"/gtm\.js", r"/tagmanager/", r"/(?:collect|beacon|pixel)(?:[/?]|$)",
]
# fmt: on
# System Chromium binaries tried when PLAYWRIGHT_LAUNCH_OPTIONS is unset (Debian's package).
PRICEWATCH_BROWSER_SYSTEM_CHROMIUM = ["/usr/lib/chromium/chromium"]
# Browser contexts alive at once (2: one serving, one draining after recycling), and pages
# open at once in each: the browser's memory ceiling. Raise pages for more browser pages/s.
PLAYWRIGHT_MAX_CONTEXTS = 2
PLAYWRIGHT_MAX_PAGES_PER_CONTEXT = 4
# Milliseconds a browser navigation may take before it fails (outcome `error`).
PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT = 30_000

# --- Frontier ---------------------------------------------------------------------------------
# Where the schedule lives: sqlite:///pricewatch.db (relative), sqlite:////abs/path.db, or
# redis://host:6379/0 for many workers. Read from the environment variable of the same name.
PRICEWATCH_FRONTIER_URL = os.environ.get("PRICEWATCH_FRONTIER_URL", "sqlite:///pricewatch.db")
# Seconds a claimed SKU stays leased to one worker; an unacknowledged lease returns to the
# schedule after it (a crashed worker loses nothing). Longer than the slowest fetch + write.
PRICEWATCH_FRONTIER_LEASE_TTL = 300
# Base seconds between two checks of a SKU of importance 1.0. Importance divides it
# (importance 2 -> twice as often). Shorten for fast-moving catalogues.
PRICEWATCH_FRONTIER_INTERVAL = 3600
# Bounds of the recheck interval in seconds, whatever the importance and history.
PRICEWATCH_FRONTIER_MIN_INTERVAL = 300
PRICEWATCH_FRONTIER_MAX_INTERVAL = 7 * 86400
# First retry delay after a failure (blocked/error), in seconds; doubles per consecutive
# failure up to PRICEWATCH_FRONTIER_MAX_INTERVAL.
PRICEWATCH_FRONTIER_RETRY_DELAY = 60
# Attempts (leases that expired unacknowledged) before an entry goes to the dead-letter set.
PRICEWATCH_FRONTIER_MAX_ATTEMPTS = 5
# Consecutive `gone` (404/410) outcomes before an entry is retired from the schedule.
PRICEWATCH_FRONTIER_GONE_LIMIT = 3
# SKUs the spider claims per round trip; it claims again as downloader capacity frees up.
PRICEWATCH_FRONTIER_CLAIM_BATCH = 64
# Follow mode (-a follow=1): seconds between polls when nothing is due.
PRICEWATCH_FRONTIER_POLL_INTERVAL = 5.0
# Leases one crawler process fetches at once (claimed, fetch not ended): bounds what a
# crash hands back to the lease TTL, with the offers waiting for the store (at most
# PRICEWATCH_STORE_MAX_BUFFER). None: 2 x CONCURRENT_REQUESTS (whatever that is set to,
# -s included), so the downloader never starves while the next claim is in flight.
PRICEWATCH_MAX_OUTSTANDING: int | None = None
# -- Frontier: velocity scoring, health, caps (pricewatch/frontier/scoring.py has the formula).
# After a successful fetch the next check is due in
#   INTERVAL / importance / (1 + VELOCITY_WEIGHT * velocity) * (1 + HEALTH_WEIGHT * (1 - health))
# clamped to [MIN_INTERVAL, MAX_INTERVAL]; failures back off from RETRY_DELAY, times the same
# health factor. The score is a due time, so an entry waiting past it grows more urgent.
# How much a SKU's price-change rate shortens its interval: velocity = changes / (checks +
# VELOCITY_PRIOR), in [0, 1]; weight 3 checks a SKU that changes every time 4x as often.
# 0 turns velocity off.
PRICEWATCH_FRONTIER_VELOCITY_WEIGHT = 3.0
# Pseudo-checks added to the denominator, so one early change does not read as velocity 1.
PRICEWATCH_FRONTIER_VELOCITY_PRIOR = 2.0
# Checks after which a SKU's change history is halved (old behaviour fades). 0 = never.
PRICEWATCH_FRONTIER_VELOCITY_WINDOW = 50
# How far a shop's poor health (an EWMA of blocked/error vs ok outcomes, 1 = healthy)
# pushes its entries back: weight 2 triples the delays of a shop that fails every fetch.
PRICEWATCH_FRONTIER_HEALTH_WEIGHT = 2.0
# Weight of each new outcome in a domain's health average (0..1). Higher reacts faster.
PRICEWATCH_FRONTIER_HEALTH_ALPHA = 0.1
# Seconds without a successful fetch or a re-seed after which a failing entry is retired
# (left in the retired set, `scrapy frontier --requeue DOMAIN` brings it back). 0 = never.
PRICEWATCH_FRONTIER_RETIRE_UNSEEN = 0
# Leases being fetched per domain across all workers sharing the frontier (0 = no cap). A
# lease counts from its claim until its fetch ends; then it waits for its store batch to
# commit without holding the domain back. Keep it >= CONCURRENT_REQUESTS_PER_DOMAIN x
# workers, or lower it to hold several workers on one shop to less than their sum.
PRICEWATCH_DOMAIN_MAX_INFLIGHT = 64
# -- Frontier: a request budget (pricewatch/frontier/budget.py has the estimator and the
# allocation). Requests per hour per domain (site): the schedule spreads them over the
# domain's SKUs to maximise importance-weighted freshness (Cho & Garcia-Molina's optimal
# allocation from each SKU's estimated change rate). 0 = no budget: the velocity schedule
# above. The interval bounds, failure backoff, health and Retry-After still apply.
PRICEWATCH_BUDGET = 0.0
# Per-domain budgets (requests per hour) that override PRICEWATCH_BUDGET, e.g.
# {"shop.example": 2000}; 0 for a domain leaves it on the velocity schedule.
PRICEWATCH_BUDGET_DOMAINS: dict[str, float] = {}
# What a new SKU is assumed to do until its fetches say otherwise: changes per day, and
# how many changes that prior weighs (more: estimates move more slowly away from it).
PRICEWATCH_BUDGET_PRIOR_RATE = 4.0
PRICEWATCH_BUDGET_PRIOR_WEIGHT = 0.5
# Fetches after which an old observation weighs 1/e in a SKU's rate estimate: lower
# re-estimates a rate shift (a sale starts) sooner, with noisier estimates.
PRICEWATCH_BUDGET_MEMORY = 12.0
# Seconds between two reallocations of a domain's budget (a scan of its SKUs' estimates;
# ~1 s per million SKUs). Every completion already plans from its SKU's latest estimate.
PRICEWATCH_BUDGET_REALLOCATE = 600.0
# Planned intervals are spread by +-this share (0..0.5), so SKUs planned alike do not
# fall due together.
PRICEWATCH_BUDGET_JITTER = 0.1
# Claims of a budgeted domain are paced at its budget: at most this many seconds' worth of
# it at once (a new seed, a requeue or a backlog is fetched at the budget's pace, not at
# the crawl's).
PRICEWATCH_BUDGET_BURST = 60.0
# Redis frontier: the key namespace (the hash tag of every key, pricewatch:{NAMESPACE}:...),
# so several catalogues can share one Redis (or one Redis Cluster slot each).
PRICEWATCH_FRONTIER_REDIS_NAMESPACE = "pw"
# Redis frontier: seconds a Redis command may take before the call fails as retryable.
PRICEWATCH_FRONTIER_REDIS_TIMEOUT = 10.0

# --- Listings: catalogue discovery (pricewatch/listings/) ----------------------------------
# `scrapy listing add`, `scrapy crawl listings`; see the README's "Listings".
# How often a listing is traversed again when `scrapy listing add` gives no --every (seconds).
PRICEWATCH_LISTING_EVERY = 86400
# Pages one traversal fetches at most (a listing's own max_pages option beats it); then the
# traversal ends `truncated` (incomplete: nothing is delisted). Raise it for huge categories.
PRICEWATCH_LISTING_MAX_PAGES = 1000
# Listings one crawl process traverses at once (each one page at a time, in order).
PRICEWATCH_LISTING_CONCURRENCY = 8
# Seconds a claimed listing stays leased to one worker; every saved page extends it. A worker
# that dies mid-listing hands it back after this long, and the next run resumes at the saved
# cursor. Longer than the slowest page fetch, retries included.
PRICEWATCH_LISTING_LEASE_TTL = 300
# Seconds before a listing whose page could not be fetched (error, blocked, circuit open)
# is tried again from the same cursor.
PRICEWATCH_LISTING_RETRY_DELAY = 300
# Failed fetches in a row after which a traversal ends `failed`.
PRICEWATCH_LISTING_MAX_FAILURES = 3
# Complete traversals in a row that must not list a product before it is retired with
# reason `delisted` (0 = never delist). Incomplete traversals (looped, truncated, failed)
# never count. A product another listing still lists is kept.
PRICEWATCH_LISTING_DELIST_AFTER = 2

# --- Extract ----------------------------------------------------------------------------------
# Currency for ambiguous symbols per host, e.g. {"shop.ca": "CAD"} so "$" reads as CAD.
PRICEWATCH_DOMAIN_CURRENCY: dict[str, str] = {}
# Extraction rules (owned by pricewatch/extract): path of a TOML file of per-host CSS/XPath
# selectors for price, regular_price, currency, availability, sku, gtin, name, tried before
# the heuristics (source "rule"). Empty: no rules. Use it for a shop the heuristics misread.
PRICEWATCH_EXTRACT_RULES_FILE = os.environ.get("PRICEWATCH_EXTRACT_RULES_FILE", "")

# --- Validate ---------------------------------------------------------------------------------
# Prices above this (in any currency) are rejected as absurd (`pricewatch/validate/dropped/absurd`).
PRICEWATCH_VALIDATE_MAX_PRICE = "100000000"
# Items validated per executor hop; validation runs off the event loop in batches.
PRICEWATCH_VALIDATE_BATCH_SIZE = 100
# Seconds an item waits for its validation batch to fill before the batch runs anyway.
PRICEWATCH_VALIDATE_MAX_WAIT = 0.05

# --- Store ------------------------------------------------------------------------------------
# Where observations go: sqlite:///pricewatch.db or postgresql://user@host/db. Read from the
# environment variable of the same name.
PRICEWATCH_STORE_URL = os.environ.get("PRICEWATCH_STORE_URL", "sqlite:///pricewatch.db")
# Observations written per batch (one transaction). Larger is faster, but more is replayed
# after a crash.
PRICEWATCH_BATCH_SIZE = 200
# Seconds after which a partial batch is written anyway, so a slow crawl still commits
# (and its leases, held until then, are released soon).
PRICEWATCH_FLUSH_INTERVAL = 1.0
# Observations held in memory while the store is unreachable. When full, the pipeline
# waits and the spider claims nothing new: memory stays bounded and nothing is dropped.
PRICEWATCH_STORE_MAX_BUFFER = 5000
# Cap, in seconds, of the exponential backoff (full jitter) between write attempts while
# the store is unreachable.
PRICEWATCH_STORE_RETRY_MAX_DELAY = 60.0
# Seconds closing the crawl keeps retrying the last writes. What is still unwritten then
# is not acknowledged: its leases expire and the next run fetches those SKUs again.
PRICEWATCH_STORE_CLOSE_TIMEOUT = 30.0
# Seconds of continuous frontier outage (every claim failing) after which the crawl ends
# (finish reason frontier_unavailable, exit code 4) rather than retrying forever; its
# unacknowledged leases expire and the next run fetches those SKUs again.
PRICEWATCH_FRONTIER_OUTAGE_TIMEOUT = 600.0
# Seconds of continuous store outage after which the crawl ends (finish reason
# store_unavailable) rather than hanging a cron job; raise it for long maintenance windows.
PRICEWATCH_STORE_OUTAGE_TIMEOUT = 600.0
# -- Store backends (pricewatch/storage/sqlite.py, pricewatch/storage/postgres.py).
# Apply pending schema migrations when the store opens. Turn off where the schema is
# managed by `scrapy db upgrade` at deploy time (the store then refuses an old schema).
PRICEWATCH_STORE_AUTO_MIGRATE = True
# Seconds a store call may take (connecting, one batch, a SQLite lock wait) before it fails
# as retryable (StoreConnectionLost). Raise for a remote database under heavy load.
PRICEWATCH_STORE_TIMEOUT = 30.0
# PostgreSQL: connections in the pool of one crawl process. The pipeline writes one batch at
# a time, so a few are enough; raise if other components share the store.
PRICEWATCH_STORE_POOL_SIZE = 4

# -- Store: confirm before publishing (pricewatch/quarantine.py). A suspicious change of a
# stored price is not published at once: it is held (table price_quarantine, shown by
# `scrapy prices --history`), the SKU is fetched again after CONFIRM_DELAY, and the change is
# published only if that fetch agrees; otherwise it stays quarantined, unpublished.
# Off: every change is published as soon as it is seen.
PRICEWATCH_QUARANTINE_ENABLED = True
# A new price more than RATIO times the stored one, or less than the stored one divided by
# RATIO, is held (reasons ratio_up / ratio_down). A currency change is always held. Lower it
# for catalogues whose prices never move much; raise it for flash-sale shops.
PRICEWATCH_QUARANTINE_RATIO = "3"
# A new all-time low under FLOOR times the lowest price ever published for the SKU (same
# currency) is held (reason new_minimum), even within RATIO. 0 turns this rule off.
PRICEWATCH_QUARANTINE_MINIMUM_FLOOR = "0.5"
# Seconds until the confirming fetch of a held change is due (instead of the SKU's normal
# interval; PRICEWATCH_FRONTIER_MIN_INTERVAL does not apply). Long enough for a one-off
# glitch of the shop (cache, deployment) to pass; short enough to publish a real change soon.
PRICEWATCH_QUARANTINE_CONFIRM_DELAY = 300.0
# Confirming fetches of one suspicious change: a fetch that disagrees with the held price
# but is suspicious too is held in its place, up to this many times; then it is rejected
# and the SKU returns to its normal schedule.
PRICEWATCH_QUARANTINE_MAX_CONFIRMATIONS = 2

# Alerts on published price changes (pricewatch/alerts.py), sent through Apprise. URLS: the
# Apprise URLs of the channels (mailto://..., slack://..., json://host/path, ...), a list or
# a comma-separated string; empty (the default) turns alerts off. They carry secrets: set
# them in the environment, not in a committed file; logs show them masked.
PRICEWATCH_ALERT_URLS = os.environ.get("PRICEWATCH_ALERT_URLS", "")
# A change whose price fell (rose) by at least this many percent of the previous price, in
# the same currency, alerts. Empty turns the rule off. Lower it to hear of small moves.
PRICEWATCH_ALERT_DROP_PERCENT = "10"
PRICEWATCH_ALERT_RISE_PERCENT = "10"
# Target prices, {"SKU or product URL": "19.99"}: a change that reaches the target or
# crosses below it (from above it, or from another currency) alerts.
PRICEWATCH_ALERT_TARGET_PRICES: dict[str, str] = {}
# Alert when a SKU goes from OutOfStock to InStock / from anything else to OutOfStock.
PRICEWATCH_ALERT_BACK_IN_STOCK = True
PRICEWATCH_ALERT_OUT_OF_STOCK = True
# Seconds one channel gets to accept one alert (then it counts as failed, not retried);
# closing the crawl also waits at most this long for deliveries in flight.
PRICEWATCH_ALERT_TIMEOUT = 10.0

# Items in log lines (dropped: WARNING, pipeline errors, scraped: DEBUG) are shown with their
# personal data redacted and control characters escaped (pricewatch/logformatter.py).
LOG_FORMATTER = "pricewatch.logformatter.RedactingLogFormatter"

# --- Pipelines and middlewares ----------------------------------------------------------------
# pricewatch/middlewares.py introduces every middleware of a crawl, Scrapy's included, in order.
ITEM_PIPELINES = {
    "pricewatch.pipelines.ValidationPipeline": 300,
    "pricewatch.pipelines.StorePipeline": 800,
}
# Politeness (pricewatch/politeness/): the backoff retry replaces Scrapy's RetryMiddleware at
# 550; the circuit breaker (570) and the adaptive limit (580) sit between it and HTTP
# decompression (590), so they see every decompressed response before a retry is decided.
# The destination check (pricewatch/destinations.py) comes first, at 50: before robots.txt
# (100) fetches anything from a host it would refuse.
DOWNLOADER_MIDDLEWARES = {
    "pricewatch.destinations.DestinationMiddleware": 50,
    # Scrapy's robots.txt middleware with one fix: only the first of
    # several requests waiting for a host's robots.txt got its rules, the others were fetched
    # as if there were none. See docs/robots-txt-race.md.
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "pricewatch.robotstxt.RobotsTxtMiddleware": 100,
    "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,
    "pricewatch.politeness.backoff.BackoffRetryMiddleware": 550,
    "pricewatch.politeness.fallback.OfficialSourceMiddleware": 560,
    "pricewatch.politeness.breaker.CircuitBreakerMiddleware": 570,
    # Sessions on proxies (pricewatch/sessions/): sets the proxy and cookie jar Scrapy's own
    # middlewares (700, 750) use; sees decompressed responses (below 590) before the breaker
    # and the retry. Not configured without PRICEWATCH_PROXIES.
    "pricewatch.sessions.SessionMiddleware": 585,
    # The adaptive per-domain limit sees each decompressed answer before the breaker.
    "pricewatch.politeness.adaptive.AdaptiveLimitMiddleware": 580,
    # Records every response and download error in the audit trail (pricewatch/audit.py),
    # before sessions, the breaker and the retry middleware decide about it.
    "pricewatch.audit.AuditMiddleware": 587,
    # Scrapy's cookies middleware deciding public suffixes with the bundled list: Scrapy's
    # downloads that list on the event loop at the first cookie with a Domain attribute.
    "scrapy.downloadermiddlewares.cookies.CookiesMiddleware": None,
    "pricewatch.cookies.CookiesMiddleware": 700,
}
# Checks a sample of page offers against the domain's official source
# (pricewatch/politeness/fallback.py).
SPIDER_MIDDLEWARES = {
    "pricewatch.politeness.fallback.OfficialCrossCheckMiddleware": 600,
    # Every leased request a spider middleware drops without an errback (UrlLengthMiddleware
    # over URLLENGTH_LIMIT, DepthMiddleware, ...) or the scheduler refuses ends its lease as
    # `error` (pricewatch/leaseguard.py): one pair around all the others, keep them outermost.
    "pricewatch.leaseguard.LeaseArrivalMiddleware": 0,
    "pricewatch.leaseguard.LeaseDepartureMiddleware": 10_000,
}
# Refuse to crawl (non-zero exit) on a reactor other than asyncio; logs the reactor in use.
# StatsFile writes the crawl stats as JSON to PRICEWATCH_STATS_FILE when the crawl ends.
# StartupReport logs the frontier and store in use (passwords masked) and the politeness
# settings, and warns when a node would use a private SQLite file by mistake.
# Progress draws a live line (claimed, stored, no price, failed, in flight, due) on a terminal.
EXTENSIONS = {
    "pricewatch.extensions.ReactorCheck": 0,
    "pricewatch.startup.StartupReport": 10,
    "pricewatch.progress.Progress": 600,
    "pricewatch.metrics.Metrics": 700,
    "pricewatch.watchdog.ReactorWatchdog": 800,
    "pricewatch.drift.DriftMonitor": 810,
    "pricewatch.audit.AuditTrail": 820,
    "pricewatch.recycle.WorkerRecycler": 830,
    "pricewatch.extensions.StatsFile": 500,
}
# Where StatsFile writes the run's record (JSON: status, exit code, the one-line error,
# outcome counts, pid, host, start/end, every stat) at start and at end; empty disables it.
# %(name)s, %(pid)s, %(host)s and %(time)s give overlapping runs one file each. Point your
# monitoring at it; README "Did the run work?" lists the exit codes.
PRICEWATCH_STATS_FILE = os.environ.get("PRICEWATCH_STATS_FILE", "")
# The live progress line of a crawl (pricewatch/progress.py): "auto" draws it only when
# stderr is a terminal (cron, scrapyd and pipes stay quiet), "on" always, "off" never.
PRICEWATCH_PROGRESS = "auto"
# Seconds between two redraws of the progress line.
PRICEWATCH_PROGRESS_INTERVAL = 1.0
# Prometheus metrics of each crawl process (pricewatch/metrics.py): per-domain outcome
# counters, breaker state, the frontier's entries per domain and state, the wait until the
# next due entry. Off by default. HOST is loopback by default (the page names the shops);
# PORT is a port or a range ("9410-9417"): each process of a node takes the first free one.
# INTERVAL: seconds between two refreshes of the frontier gauges.
PRICEWATCH_METRICS_ENABLED = False
PRICEWATCH_METRICS_HOST = "127.0.0.1"
PRICEWATCH_METRICS_PORT = "9410-9417"
PRICEWATCH_METRICS_INTERVAL = 15.0
# The reactor watchdog (pricewatch/watchdog.py): a timer every INTERVAL seconds measures how
# late the event loop runs (stats pricewatch/watchdog/lag_p50_ms, lag_p99_ms, lag_max_ms);
# when it has not run for THRESHOLD seconds, a thread samples what the loop is running and
# logs a WARNING naming it, at most once per LOG_INTERVAL seconds. Raise THRESHOLD on a
# machine so loaded that half-second stalls are normal; ENABLED = False turns it off.
PRICEWATCH_WATCHDOG_ENABLED = True
PRICEWATCH_WATCHDOG_INTERVAL = 0.1
PRICEWATCH_WATCHDOG_THRESHOLD = 0.5
PRICEWATCH_WATCHDOG_LOG_INTERVAL = 60.0
# Drift alarms (pricewatch/drift.py), per domain over the last WINDOW seconds, once the
# window holds MIN_SAMPLE events: the share of fetched pages with no price (NO_PRICE: the
# shop changed its markup), with an offer validation dropped (INVALID), of fetches blocked
# (BLOCKED), of observations that changed the published price (MASS_CHANGE) or went out of
# stock (MASS_OUT_OF_STOCK) at or over its rate raises an alarm: an ERROR, a stat, an alert
# (PRICEWATCH_ALERT_URLS) and `scrapy frontier` showing the domain as drifting; a mass
# change's observations are held until a second fetch confirms them. Rates are 0-1, 0 turns
# one off. Lower MIN_SAMPLE for small shops; shorten WINDOW to notice sooner.
PRICEWATCH_DRIFT_ENABLED = True
PRICEWATCH_DRIFT_WINDOW = 3600.0
PRICEWATCH_DRIFT_MIN_SAMPLE = 20
PRICEWATCH_DRIFT_NO_PRICE_RATE = 0.5
PRICEWATCH_DRIFT_INVALID_RATE = 0.3
PRICEWATCH_DRIFT_BLOCKED_RATE = 0.5
PRICEWATCH_DRIFT_MASS_CHANGE_RATE = 0.5
PRICEWATCH_DRIFT_MASS_OUT_OF_STOCK_RATE = 0.8
# The audit trail (pricewatch/audit.py): every fetch decision (claimed, response, retry and
# its delay, Retry-After honoured, deferred by the breaker, breaker opened, fallback, the
# store's verdict, the final outcome) as JSON lines in FILE, for `scrapy audit SKU|URL`.
# Empty: off. %(name)s, %(pid)s and %(host)s as in PRICEWATCH_STATS_FILE: give each process
# of a node its own file (%(pid)s). Rotated at MAX_BYTES or when the UTC day changes, the
# KEEP newest rotated files kept. Written in batches every FLUSH_INTERVAL seconds by a
# worker thread; records waiting beyond MAX_BUFFER (a stalled disk) are dropped and counted.
PRICEWATCH_AUDIT_FILE = os.environ.get("PRICEWATCH_AUDIT_FILE", "")
PRICEWATCH_AUDIT_MAX_BYTES = 100 * 1024 * 1024
PRICEWATCH_AUDIT_KEEP = 14
PRICEWATCH_AUDIT_FLUSH_INTERVAL = 1.0
PRICEWATCH_AUDIT_MAX_BUFFER = 100_000
# Worker recycling (pricewatch/recycle.py), for follow mode above all: after AFTER_SKUS
# leases claimed, AFTER_HOURS hours, or an RSS of RSS_MB (sampled every CHECK_INTERVAL
# seconds; stats pricewatch/memory/rss_mb and rss_max_mb), the worker claims nothing more,
# finishes and acknowledges what it holds, and exits 0 for scrapyd, systemd or cron to start
# a fresh one. 0 = no limit. Keep RSS_MB under MEMUSAGE_LIMIT_MB, which stops a crawl hard.
PRICEWATCH_RECYCLE_AFTER_SKUS = 0
PRICEWATCH_RECYCLE_AFTER_HOURS = 0.0
PRICEWATCH_RECYCLE_RSS_MB = 0.0
PRICEWATCH_RECYCLE_CHECK_INTERVAL = 15.0
