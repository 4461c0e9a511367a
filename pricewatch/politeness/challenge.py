"""Challenge detection: a page answered with 200 that is a CAPTCHA or bot wall.

Settings (defaults: ``pricewatch/settings.py``):
- ``PRICEWATCH_CHALLENGE_MARKERS``: case-insensitive substrings; a text response whose
  first ``PRICEWATCH_CHALLENGE_SCAN_BYTES`` contain any of them is a challenge page
  (outcome ``blocked``, never ``no_price`` nor "out of stock"). Add the markers of the
  walls your shops use; an empty list disables detection.
- ``PRICEWATCH_CHALLENGE_SCAN_BYTES``: how much of the body is searched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from scrapy.http import TextResponse

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings


class ChallengeDetector:
    """Decides whether a response is a challenge page.

    The middlewares that read it (adaptive limit, breaker, sessions) share one per crawler
    (``for_crawler``) and see the same response one after the other, so it remembers the
    answer for the last response: a page is scanned once, not once per middleware.
    """

    __slots__ = ("_last", "markers", "scan_bytes")

    def __init__(self, markers: tuple[bytes, ...], scan_bytes: int) -> None:
        self.markers = markers
        self.scan_bytes = scan_bytes
        self._last: tuple[Response, str | None] | None = None

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> ChallengeDetector:
        raw = settings.getlist("PRICEWATCH_CHALLENGE_MARKERS")
        markers = []
        for marker in raw:
            if not isinstance(marker, str) or not marker.strip():
                raise ValueError(
                    f"PRICEWATCH_CHALLENGE_MARKERS must hold non-empty strings, got {marker!r}"
                )
            markers.append(marker.strip().lower().encode("utf-8"))
        scan_bytes = settings.getint("PRICEWATCH_CHALLENGE_SCAN_BYTES")
        if scan_bytes < 1:
            raise ValueError(f"PRICEWATCH_CHALLENGE_SCAN_BYTES must be >= 1, got {scan_bytes}")
        return cls(tuple(markers), scan_bytes)

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> ChallengeDetector:
        """The crawler's one detector, built from its settings on first use."""
        detector = _DETECTORS.get(crawler)
        if detector is None:
            detector = _DETECTORS[crawler] = cls.from_settings(crawler.settings)
        return detector

    def match(self, response: Response) -> str | None:
        """The marker a challenge page contains, None for any other response."""
        last = self._last
        if last is not None and last[0] is response:
            return last[1]
        found = self._scan(response)
        self._last = (response, found)
        return found

    def _scan(self, response: Response) -> str | None:
        if not self.markers or not isinstance(response, TextResponse):
            return None
        head = response.body[: self.scan_bytes].lower()
        for marker in self.markers:
            if marker in head:
                return marker.decode("utf-8")
        return None


_DETECTORS: WeakKeyDictionary[Crawler, ChallengeDetector] = WeakKeyDictionary()
