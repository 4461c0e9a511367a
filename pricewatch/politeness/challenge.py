"""Challenge detection: a page answered with 200 that is a CAPTCHA or bot wall.

Settings (defaults: ``pricewatch/settings.py``):
- ``PRICEWATCH_CHALLENGE_MARKERS``: case-insensitive substrings; a text response whose
  first ``PRICEWATCH_CHALLENGE_SCAN_BYTES`` contain any of them is a challenge page
  (outcome ``blocked``, never ``no_price`` nor "out of stock"). Add the markers of the
  walls your shops use; an empty list disables detection.
- ``PRICEWATCH_CHALLENGE_SCAN_BYTES``: how much of the body is searched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from scrapy.http import TextResponse

if TYPE_CHECKING:
    from scrapy.http import Response
    from scrapy.settings import BaseSettings


@dataclass(frozen=True, slots=True)
class ChallengeDetector:
    markers: tuple[bytes, ...]
    scan_bytes: int

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

    def match(self, response: Response) -> str | None:
        """The marker a challenge page contains, None for any other response."""
        if not self.markers or not isinstance(response, TextResponse):
            return None
        head = response.body[: self.scan_bytes].lower()
        for marker in self.markers:
            if marker in head:
                return marker.decode("utf-8")
        return None
