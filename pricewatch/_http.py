"""HTTP helpers shared by the spider and the downloader middlewares."""

from __future__ import annotations

import math
import time
from email.utils import parsedate_to_datetime

# Longest Retry-After we honour, in seconds: a shop asking for more is capped, not obeyed
# for weeks.
MAX_RETRY_AFTER = 86400.0


def parse_retry_after(value: bytes | str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date).

    Returns None when the header is absent or malformed; never negative, capped at
    ``MAX_RETRY_AFTER``. ``now`` is epoch seconds (defaults to the current time).
    """
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("latin-1", "replace")
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:  # HTTP dates are GMT
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)
