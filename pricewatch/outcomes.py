"""The outcome of one fetch: every fetch ends in exactly one of these."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    OK = "ok"  # an offer was extracted (only this one produces an observation)
    NO_PRICE = "no_price"  # fetched, nothing extracted
    BLOCKED = "blocked"  # 429, 403, challenge page
    GONE = "gone"  # 404 / 410
    ERROR = "error"  # network error, timeout, 5xx after retries
    SKIPPED = "skipped"  # robots.txt, open circuit: not fetched, rescheduled
