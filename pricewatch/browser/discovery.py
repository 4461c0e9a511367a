"""Which browser scrapy-playwright launches: ``PLAYWRIGHT_LAUNCH_OPTIONS`` if set, else a
system Chromium, else Playwright's own download.

Settings:
- ``PLAYWRIGHT_LAUNCH_OPTIONS``: used as they are when not empty.
- ``PRICEWATCH_BROWSER_SYSTEM_CHROMIUM`` (default in ``pricewatch/settings.py``): system
  Chromium binaries tried in order when ``PLAYWRIGHT_LAUNCH_OPTIONS`` is empty.
- ``PLAYWRIGHT_BROWSER_TYPE`` (scrapy-playwright's, "chromium" when unset): only Chromium
  is discovered; another type needs ``PLAYWRIGHT_LAUNCH_OPTIONS`` or Playwright's own
  download.

The launch flags suit a closed network and a root user: headless, ``--no-sandbox`` when
running as root, and Chromium's background networking (component updates, sync, first-run
pings) switched off, without which its connections are refused here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CHROMIUM_ARGS = (
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


class BrowserNotFound(RuntimeError):
    """No browser for scrapy-playwright; the message names the three ways to get one."""


def chromium_args() -> list[str]:
    args = list(CHROMIUM_ARGS)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.insert(0, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
    return args


def playwright_download(browsers_path: str | None = None) -> Path | None:
    """Playwright's own Chromium (``playwright install chromium``), if downloaded."""
    root = browsers_path or os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or ""
    base = Path(root) if root and root != "0" else Path.home() / ".cache" / "ms-playwright"
    patterns = (
        "chromium-*/chrome-linux*/chrome",
        "chromium_headless_shell-*/chrome-linux*/headless_shell",
        "chromium-*/chrome-mac*/Chromium.app/Contents/MacOS/Chromium",
        "chromium-*/chrome-win*/chrome.exe",
    )
    for pattern in patterns:
        for found in sorted(base.glob(pattern)):
            if os.access(found, os.X_OK):
                return found
    return None


def not_found_message(candidates: Sequence[str]) -> str:
    tried = ", ".join(candidates) or "none"
    return (
        "No browser found for scrapy-playwright. Either set PLAYWRIGHT_LAUNCH_OPTIONS "
        '(e.g. {"executable_path": "/path/to/chromium", "headless": true}), or install a '
        f"system Chromium (Debian: apt-get install chromium; looked for {tried}, see "
        "PRICEWATCH_BROWSER_SYSTEM_CHROMIUM), or download Playwright's own with "
        "`playwright install chromium`."
    )


def launch_options(
    configured: Mapping[str, Any] | None,
    candidates: Sequence[str],
    *,
    browser_type: str = "chromium",
    browsers_path: str | None = None,
) -> dict[str, Any]:
    """The ``PLAYWRIGHT_LAUNCH_OPTIONS`` to use; raises :class:`BrowserNotFound`."""
    if configured:
        options = dict(configured)
        executable = options.get("executable_path")
        if executable and not os.access(executable, os.X_OK):
            raise BrowserNotFound(
                f"PLAYWRIGHT_LAUNCH_OPTIONS executable_path {executable!r} is not an "
                "executable file. " + not_found_message(candidates)
            )
        return options
    base: dict[str, Any] = {"headless": True}
    if browser_type != "chromium":
        return base  # Playwright's own firefox/webkit, or its error when not downloaded
    base["args"] = chromium_args()
    for path in candidates:
        if os.access(path, os.X_OK) and Path(path).is_file():
            return {**base, "executable_path": path}
    if playwright_download(browsers_path) is not None:
        return base
    raise BrowserNotFound(not_found_message(candidates))
