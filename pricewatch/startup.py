"""Before a crawl starts: check the settings, and say where the crawl is.

``SettingsCheck`` (an add-on, ``ADDONS``) refuses settings that would make a crawl hang or
fail in an unrelated place: ``CONCURRENT_REQUESTS_PER_DOMAIN = -3`` held every lease and
ignored SIGTERM; ``"twelve"`` failed behind a playwright handler error that named neither
the setting nor where it came from. It runs in the add-on's ``update_settings``, the first
hook that sees the crawl's final settings (``settings.py``, ``-s``, environment, the
spider's), before any component or download handler is built; ``scrapy crawl`` runs the same
check before it builds the crawler at all. One line names the setting, the bad value, what
is allowed and where the value came from (:func:`setting_source`).

What is checked: the settings of :data:`RANGES` (Scrapy's and Playwright's, which Scrapy
does not validate), and the type of every ``PRICEWATCH_*`` setting that
``pricewatch/settings.py`` defines, against the type of its value there. The ranges of the
project's own settings are checked by the components that read them, with the same kind
of message.

``StartupReport`` (an extension) logs at INFO, as the crawl starts, where the pricewatch
code runs from, the frontier and the store in use (passwords masked), and the effective
politeness settings with the config version (:mod:`pricewatch.configversion`, to compare
between nodes); it warns when a node uses the default relative SQLite file outside a
project directory, or a SQLite file inside scrapyd's own folders (each job would get a
private schedule and store that nobody shares), and when a pricewatch installed in a
scrapyd node's virtualenv shadows the egg the job was started with (scrapyd appends the
egg to ``sys.path``, after site-packages, so the deployed code never ran).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.conf import closest_scrapy_cfg

import pricewatch
from pricewatch import settings as project_settings
from pricewatch._urls import mask_password, scheme, sqlite_path
from pricewatch.configversion import POLITENESS, ConfigVersion
from pricewatch.runs import InvalidSetting

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

# name: (type, lowest allowed, highest allowed); None is unbounded.
RANGES: dict[str, tuple[type, float | None, float | None]] = {
    "CONCURRENT_REQUESTS": (int, 1, None),
    "CONCURRENT_REQUESTS_PER_DOMAIN": (int, 1, None),
    "DOWNLOAD_DELAY": (float, 0, None),
    "DOWNLOAD_DELAY_JITTER": (float, 0, 1),
    "DOWNLOAD_TIMEOUT": (float, 0.001, None),
    "AUTOTHROTTLE_TARGET_CONCURRENCY": (float, 0.001, None),
    "AUTOTHROTTLE_START_DELAY": (float, 0, None),
    "AUTOTHROTTLE_MAX_DELAY": (float, 0, None),
    "RETRY_TIMES": (int, 0, None),
    "PLAYWRIGHT_MAX_CONTEXTS": (int, 1, None),
    "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": (int, 1, None),
    "PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT": (float, 0, None),
}
_URLS = ("PRICEWATCH_FRONTIER_URL", "PRICEWATCH_STORE_URL")
_SCRAPYD_FOLDERS = ("eggs", "logs", "items", "dbs")
_TYPE_WORDS = {int: "an integer", float: "a number", bool: "a boolean", list: "a list",
               dict: "a dict (JSON object)"}  # fmt: skip
_LEADING_NAME = re.compile(r"^([A-Z][A-Z0-9_]+) ")


def setting_source(settings: BaseSettings, name: str) -> str:
    """Where a setting's value came from, in an operator's words."""
    priority = settings.getpriority(name)
    if priority is None:
        return "not set"
    if priority >= SETTINGS_PRIORITIES["cmdline"]:
        return "-s on the command line"
    if priority >= SETTINGS_PRIORITIES["spider"]:
        return "the spider's custom_settings"
    if priority >= SETTINGS_PRIORITIES["project"]:
        if name in os.environ and os.environ[name] == str(settings.get(name)):
            return f"the environment variable {name}"
        module = os.environ.get("SCRAPY_SETTINGS_MODULE", project_settings.__name__)
        return f"{module.replace('.', '/')}.py"
    if priority >= SETTINGS_PRIORITIES["addon"]:
        return "an add-on"
    return "Scrapy's default"


def _invalid(settings: BaseSettings, name: str, allowed: str) -> InvalidSetting:
    return InvalidSetting(
        f"{name} = {settings.get(name)!r} (from {setting_source(settings, name)}): "
        f"must be {allowed}"
    )


def _typed(settings: BaseSettings, name: str, kind: type) -> Any:
    getters: dict[type, Callable[[str], Any]] = {
        int: settings.getint,
        float: settings.getfloat,
        bool: settings.getbool,
        list: settings.getlist,
        dict: settings.getdict,
    }
    getter = getters[kind]
    try:
        return getter(name)
    except (ValueError, TypeError) as exc:
        raise _invalid(settings, name, _TYPE_WORDS[kind]) from exc


def _project_types() -> dict[str, type]:
    """The type of every PRICEWATCH_* setting, as settings.py defines it (an int there
    may be given as any number: some are read as floats)."""
    types: dict[str, type] = {}
    for name, value in vars(project_settings).items():
        if not name.startswith("PRICEWATCH_"):
            continue
        kind = type(value)
        if kind is int:
            kind = float
        if kind in _TYPE_WORDS:
            types[name] = kind
    return types


def check_settings(settings: BaseSettings) -> None:
    """Raise :class:`InvalidSetting` for the first value a crawl cannot run with."""
    for name, kind in _project_types().items():
        if settings.get(name) is not None:
            _typed(settings, name, kind)
    for name, (kind, low, high) in RANGES.items():
        if settings.get(name) is None:
            continue
        value = _typed(settings, name, kind)
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = [f">= {low:g}" if low is not None else "", f"<= {high:g}" if high else ""]
            allowed = " and ".join(filter(None, bounds))
            raise _invalid(settings, name, f"{_TYPE_WORDS[kind]} {allowed}")


def as_setting_error(exc: BaseException, settings: BaseSettings) -> InvalidSetting | None:
    """A component's ``ValueError`` that names a setting (``NAME must be ..., got X``),
    as an :class:`InvalidSetting` that also says where the value came from."""
    if isinstance(exc, InvalidSetting):
        return exc
    if not isinstance(exc, ValueError):
        return None
    match = _LEADING_NAME.match(str(exc))
    if match is None or settings.getpriority(match.group(1)) is None:
        return None
    return InvalidSetting(f"{exc} (from {setting_source(settings, match.group(1))})")


class SettingsCheck:
    """The add-on: checks the crawl's settings before anything is built from them."""

    def update_settings(self, settings: BaseSettings) -> None:
        check_settings(settings)


class StartupReport:
    """The extension: says, at start, where this crawl reads and writes, and how politely."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        package = str(Path(pricewatch.__file__).parent)
        logger.info("pricewatch code from %s", package)
        egg = shadowed_egg(sys.path, package)
        if egg:
            logger.warning(
                "!!! this crawl runs the pricewatch installed at %s, not the deployed egg %s, "
                "which it shadows: uninstall pricewatch from the node's virtualenv (pip "
                "uninstall pricewatch) so that the code scrapyd-deploy uploads is the code "
                "that runs",
                package,
                egg,
            )
        for name in _URLS:
            url = settings.get(name)
            logger.info(
                "%s: %s%s (from %s)",
                name,
                mask_password(url),
                _where(url),
                setting_source(settings, name),
            )
            warning = backend_warning(name, url, settings, os.environ)
            if warning:
                logger.warning("%s", warning)
        shown = ", ".join(f"{name}={settings.get(name)!r}" for name in POLITENESS)
        version = ConfigVersion.of(crawler).value
        logger.info("Politeness (config version %s): %s", version, shown)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StartupReport:
        return cls(crawler)


def shadowed_egg(path: Sequence[str], package: str) -> str | None:
    """An egg on ``path`` (a scrapyd job's deployed project) that holds pricewatch while
    the code running was imported from ``package``, outside it: a copy installed in the
    node's virtualenv comes first on the path and shadows every egg deployed later."""
    for entry in path:
        if not entry.endswith(".egg") or package.startswith(entry):
            continue
        if os.path.isdir(entry):
            if os.path.isfile(os.path.join(entry, "pricewatch", "__init__.py")):
                return entry
            continue
        try:
            with zipfile.ZipFile(entry) as egg:
                if "pricewatch/__init__.py" in egg.namelist():
                    return entry
        except (OSError, zipfile.BadZipFile):
            continue
    return None


def _where(url: str) -> str:
    if scheme(url) != "sqlite":
        return ""
    try:
        return f" = {sqlite_path(url).resolve()}"
    except ValueError:
        return ""


def backend_warning(
    name: str, url: str, settings: BaseSettings, environ: Mapping[str, str]
) -> str | None:
    """Why this node's backend is probably not the one its operator meant, or None."""
    if scheme(url) != "sqlite":
        return None
    try:
        path = sqlite_path(url)
    except ValueError:
        return None
    resolved = path.resolve()
    if "SCRAPY_JOB" in environ:  # a scrapyd job: its working directory is scrapyd's
        cwd = Path.cwd().resolve()
        folders = [cwd, *(cwd / folder for folder in _SCRAPYD_FOLDERS)]
        log_file = environ.get("SCRAPY_LOG_FILE")
        if log_file:
            folders.append(Path(log_file).resolve().parent)
        if (
            not path.is_absolute()
            or any(resolved.parent == f for f in folders)
            or any(f in resolved.parents for f in folders[1:])
        ):
            return (
                f"!!! {name} is {mask_password(url)}, a SQLite file in scrapyd's own "
                f"folders ({resolved}): this scrapyd job keeps a schedule or store of its "
                f"own that no other job or node sees. Set {name} in scrapyd's environment "
                "(redis://... for the frontier, postgresql://... for the store)."
            )
        return None
    if not path.is_absolute() and not closest_scrapy_cfg():
        return (
            f"!!! {name} is {mask_password(url)} ({setting_source(settings, name)}), "
            f"relative to {Path.cwd()}, which is not a pricewatch project directory: "
            f"this crawl uses {resolved}. Set {name} (an absolute sqlite:////path, or a "
            "shared backend) or run from the project directory."
        )
    return None
