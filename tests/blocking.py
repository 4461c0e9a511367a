"""A pipeline that blocks the event loop once, as a synchronous client call in a pipeline
would, for ``tests/test_watchdog.py``."""

from __future__ import annotations

import time


def look_up_competitor_price_synchronously(seconds: float) -> None:
    time.sleep(seconds)  # the blocking call the watchdog must name


class BlockingPipeline:
    """Blocks the event loop for 1.2 s on the first item, then passes items through."""

    def __init__(self) -> None:
        self.blocked = False

    def process_item(self, item: object) -> object:
        if not self.blocked:
            self.blocked = True
            look_up_competitor_price_synchronously(1.2)
        return item
