"""Before the crawl: settings checked with one clear line (the setting, the value, what is
allowed, where it came from), and the crawl says where it reads and writes."""

from __future__ import annotations

import json
import os
import socket
import zipfile
from pathlib import Path

import pytest
from scrapy.utils.test import get_crawler

from pricewatch.runs import ExitCode, InvalidSetting
from pricewatch.spiders.products import ProductSpider
from pricewatch.startup import shadowed_egg

from .helpers import ROOT, scrapy, scrapy_env


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def failure_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "Crawl failed" in line]


@pytest.mark.parametrize(
    ("setting", "value", "allowed"),
    [
        # Used to hang the crawl (and SIGTERM) with its leases held.
        ("CONCURRENT_REQUESTS_PER_DOMAIN", "-3", "must be an integer >= 1"),
        # Used to fail behind a playwright handler error naming neither.
        ("CONCURRENT_REQUESTS_PER_DOMAIN", "twelve", "must be an integer"),
        ("DOWNLOAD_DELAY_JITTER", "2", "must be a number >= 0 and <= 1"),
        ("PRICEWATCH_FLUSH_INTERVAL", "soon", "must be a number"),
    ],
)
def test_a_bad_value_from_the_command_line_stops_the_crawl_in_one_line(
    tmp_path: Path, setting: str, value: str, allowed: str
) -> None:
    (tmp_path / "seeds.txt").write_text("http://127.0.0.1:9/p/1\n")
    assert scrapy(tmp_path, "seed", "seeds.txt").returncode == 0
    proc = scrapy(tmp_path, "crawl", "products", "-s", f"{setting}={value}", timeout=60)
    assert proc.returncode == ExitCode.SETTINGS, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    [line] = failure_lines(proc.stderr)
    assert f"{setting} = {value!r} (from -s on the command line): {allowed}" in line
    record = json.loads((tmp_path / "stats.json").read_text())
    assert record["status"] == "failed" and record["exit_code"] == ExitCode.SETTINGS
    assert record["finish_reason"] == "invalid_setting"
    assert setting in record["error"]


def test_a_bad_value_in_a_settings_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "nodesettings.py").write_text(
        "from pricewatch.settings import *  # noqa\nCONCURRENT_REQUESTS_PER_DOMAIN = 'twelve'\n"
    )
    env = scrapy_env(
        tmp_path,
        SCRAPY_SETTINGS_MODULE="nodesettings",
        PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}",
    )
    proc = scrapy(tmp_path, "crawl", "products", env=env, timeout=60)
    assert proc.returncode == ExitCode.SETTINGS, proc.stderr[-3000:]
    [line] = failure_lines(proc.stderr)
    assert "CONCURRENT_REQUESTS_PER_DOMAIN = 'twelve' (from nodesettings.py)" in line


def test_a_bad_url_from_the_environment_says_so(tmp_path: Path) -> None:
    env = scrapy_env(tmp_path, PRICEWATCH_STORE_URL="mysql://db/prices")
    proc = scrapy(tmp_path, "crawl", "products", env=env, timeout=60)
    assert proc.returncode == ExitCode.SETTINGS, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    [line] = failure_lines(proc.stderr)
    assert "PRICEWATCH_STORE_URL must be sqlite:///… or postgresql://…" in line
    assert "(from the environment variable PRICEWATCH_STORE_URL)" in line


def test_a_component_range_error_is_one_line_naming_its_source(tmp_path: Path) -> None:
    proc = scrapy(tmp_path, "crawl", "products", "-s", "PRICEWATCH_BATCH_SIZE=0", timeout=60)
    assert proc.returncode == ExitCode.SETTINGS, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    [line] = failure_lines(proc.stderr)
    assert "PRICEWATCH_BATCH_SIZE must be >= 1, got 0 (from -s on the command line)" in line


def test_the_addon_checks_crawls_started_in_process() -> None:
    with pytest.raises(InvalidSetting, match=r"CONCURRENT_REQUESTS_PER_DOMAIN = -3 \(from"):
        get_crawler(
            ProductSpider,
            {
                "CONCURRENT_REQUESTS_PER_DOMAIN": -3,
                "ADDONS": {"pricewatch.startup.SettingsCheck": 1000},
            },
        )


def test_the_crawl_says_where_it_reads_and_writes(tmp_path: Path) -> None:
    env = scrapy_env(
        tmp_path,
        PRICEWATCH_FRONTIER_URL=f"redis://:s3cret@127.0.0.1:{closed_port()}/0",
        PRICEWATCH_STORE_URL="postgresql://crawler:s3cret@127.0.0.1/prices",
    )
    proc = scrapy(tmp_path, "crawl", "products", "-s", "DOWNLOAD_DELAY=1.5", env=env)
    # Both backends are unreachable; whichever is found first ends the crawl.
    assert proc.returncode in (ExitCode.FRONTIER_UNAVAILABLE, ExitCode.STORE_UNAVAILABLE)
    assert "s3cret" not in proc.stderr
    assert (
        "INFO: PRICEWATCH_FRONTIER_URL: redis://:***@127.0.0.1:" in proc.stderr
        and "(from the environment variable PRICEWATCH_FRONTIER_URL)" in proc.stderr
    )
    assert "INFO: PRICEWATCH_STORE_URL: postgresql://crawler:***@127.0.0.1/prices" in proc.stderr
    assert f"INFO: pricewatch code from {ROOT / 'pricewatch'}" in proc.stderr
    [politeness] = [line for line in proc.stderr.splitlines() if "Politeness (config" in line]
    assert "CONCURRENT_REQUESTS_PER_DOMAIN=12" in politeness
    assert "DOWNLOAD_DELAY=1.5" in politeness or "DOWNLOAD_DELAY='1.5'" in politeness
    assert "ROBOTSTXT_OBEY=True" in politeness
    assert "!!!" not in proc.stderr


def test_default_urls_outside_a_project_directory_warn_loudly(tmp_path: Path) -> None:
    env = scrapy_env(tmp_path)
    del env["PRICEWATCH_FRONTIER_URL"], env["PRICEWATCH_STORE_URL"]
    proc = scrapy(tmp_path, "crawl", "products", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    warnings = [line for line in proc.stderr.splitlines() if "WARNING: !!!" in line]
    assert len(warnings) == 2
    assert all("not a pricewatch project directory" in w for w in warnings)
    assert all(str(tmp_path / "pricewatch.db") in w for w in warnings)


def test_a_sqlite_file_in_scrapyds_folders_warns_loudly(tmp_path: Path) -> None:
    # What a scrapyd job sees: its working directory is scrapyd's, SCRAPY_JOB is set.
    env = scrapy_env(
        tmp_path,
        SCRAPY_JOB="0123abcd",
        SCRAPY_LOG_FILE=str(tmp_path / "logs" / "pricewatch" / "products" / "0123abcd.log"),
        PRICEWATCH_STORE_URL=f"sqlite:///{tmp_path / 'dbs' / 'prices.db'}",
    )
    del env["PRICEWATCH_FRONTIER_URL"]
    (tmp_path / "dbs").mkdir()
    proc = scrapy(tmp_path, "crawl", "products", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    warnings = [line for line in proc.stderr.splitlines() if "WARNING: !!!" in line]
    assert len(warnings) == 2, proc.stderr[-3000:]
    assert all("in scrapyd's own folders" in w for w in warnings)


def egg(path: Path, *names: str) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(name, "")
    return str(path)


def test_an_installed_copy_shadowing_the_deployed_egg_is_named(tmp_path: Path) -> None:
    """scrapyd appends a job's egg to sys.path: a pricewatch installed in the node's
    virtualenv comes first, and the deployed code never runs."""
    installed = str(tmp_path / "venv" / "site-packages" / "pricewatch")
    deployed = egg(tmp_path / "pricewatch-1764000000.egg", "pricewatch/__init__.py")
    other = egg(tmp_path / "other-1.egg", "other/__init__.py")
    broken = tmp_path / "broken.egg"
    broken.write_bytes(b"not a zip")
    unzipped = tmp_path / "pricewatch-2.egg"
    (unzipped / "pricewatch").mkdir(parents=True)
    (unzipped / "pricewatch" / "__init__.py").write_text("")
    site = str(tmp_path / "venv" / "site-packages")
    assert shadowed_egg([site, other, str(broken), deployed], installed) == deployed
    assert shadowed_egg([site, str(unzipped)], installed) == str(unzipped)
    # Running from the egg itself, or with no egg on the path: nothing to say.
    assert shadowed_egg([site, deployed], f"{deployed}/pricewatch") is None
    assert shadowed_egg([site, other, str(broken)], installed) is None
