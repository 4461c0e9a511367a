"""``BrowserAddon``: wires scrapy-playwright in for the few domains that need a browser.

Enabled by ``ADDONS = {"pricewatch.browser.BrowserAddon": 0}``. Before the crawl's
settings freeze it:

- sets ``PLAYWRIGHT_LAUNCH_OPTIONS`` when unset, to a system Chromium if there is one, else
  Playwright's own download (see :mod:`pricewatch.browser.discovery`); when neither is
  there, crawls that never need a browser still run, and a crawl with
  ``PRICEWATCH_JS_DOMAINS`` fails at start with an error naming the three options;
- sets ``PLAYWRIGHT_ABORT_REQUEST`` when unset, to a :class:`ResourceBlocker` built from
  ``PRICEWATCH_BROWSER_BLOCK_RESOURCES``, ``PRICEWATCH_BROWSER_BLOCK_URLS`` and
  ``PRICEWATCH_ALLOWED_NETWORKS`` (the browser goes only where the crawl may);
- registers :class:`~pricewatch.browser.router.BrowserRouter` as an extension.

The download handlers themselves are in ``settings.py`` (``DOWNLOAD_HANDLERS``,
:class:`~pricewatch.browser.handler.LazyBrowserDownloadHandler`): requests without
``playwright`` meta go over plain HTTP, and Playwright starts only with the first that has it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pricewatch.browser.blocking import ResourceBlocker
from pricewatch.browser.discovery import BrowserNotFound, launch_options
from pricewatch.destinations import allowed_networks

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

_REMOTE = ("PLAYWRIGHT_CDP_URL", "PLAYWRIGHT_CONNECT_URL")


def _candidates(settings: BaseSettings) -> list[str]:
    return settings.getlist("PRICEWATCH_BROWSER_SYSTEM_CHROMIUM")


def browser_availability(settings: BaseSettings) -> str | None:
    """None if a browser can be launched (or reached), else the reason it cannot."""
    if any(settings.get(name) for name in _REMOTE):
        return None
    try:
        launch_options(
            settings.getdict("PLAYWRIGHT_LAUNCH_OPTIONS"),
            _candidates(settings),
            browser_type=settings.get("PLAYWRIGHT_BROWSER_TYPE") or "chromium",
        )
    except BrowserNotFound as exc:
        return str(exc)
    return None


class BrowserAddon:
    def update_settings(self, settings: BaseSettings) -> None:
        if not settings.getdict("PLAYWRIGHT_LAUNCH_OPTIONS") and not any(
            settings.get(name) for name in _REMOTE
        ):
            try:
                options = launch_options(
                    None,
                    _candidates(settings),
                    browser_type=settings.get("PLAYWRIGHT_BROWSER_TYPE") or "chromium",
                )
            except BrowserNotFound:
                pass  # reported by BrowserRouter if a browser is ever needed
            else:
                settings.set("PLAYWRIGHT_LAUNCH_OPTIONS", options, priority="addon")
        if not settings.get("PLAYWRIGHT_ABORT_REQUEST"):
            types = [t for t in settings.getlist("PRICEWATCH_BROWSER_BLOCK_RESOURCES") if t.strip()]
            urls = [u for u in settings.getlist("PRICEWATCH_BROWSER_BLOCK_URLS") if u.strip()]
            allowed = allowed_networks(settings.getlist("PRICEWATCH_ALLOWED_NETWORKS"))
            settings.set(
                "PLAYWRIGHT_ABORT_REQUEST", ResourceBlocker(types, urls, allowed), priority="addon"
            )
        from pricewatch.browser.router import BrowserRouter

        settings.set_in_component_priority_dict("EXTENSIONS", BrowserRouter, 100)
