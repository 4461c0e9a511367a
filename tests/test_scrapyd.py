"""A real scrapyd node, made as the README says: its own virtualenv
(``pip install -c deploy/scrapyd-constraints.txt '.[scrapyd]'``, then ``pip uninstall
pricewatch``: the dependencies only), the project deployed from this repository with
``deploy/scrapyd-deploy`` and run from that egg, ``products`` scheduled through
``schedule.json`` against the sandbox with the shared Redis frontier and PostgreSQL store,
and every stored price checked against ``/_truth``.

The node's virtualenv is built once (about a minute and a half, from the package index) into
``.venv-scrapyd/`` of the checkout and reused while ``pyproject.toml`` and the scrapyd
constraints stay the same, so the suite stays fast.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from .fixtures.sandbox import SandboxProcess, sandbox_args
from .helpers import ROOT, checkout_build_lock, scrapy, scrapy_env

VENV = ROOT / ".venv-scrapyd"
CONSTRAINTS = ROOT / "deploy" / "scrapyd-constraints.txt"
DEPLOY = ROOT / "deploy" / "scrapyd-deploy"


def _fingerprint() -> str:
    digest = hashlib.sha256(b"dependencies only")  # how the venv is made (see below)
    for path in (CONSTRAINTS, ROOT / "pyproject.toml"):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment of a node: nothing of this checkout's virtualenv or source tree."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "SCRAPY_SETTINGS_MODULE", "VIRTUAL_ENV")
        and not k.startswith("PRICEWATCH_")
    }
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def scrapyd_venv() -> Path:
    # pip builds the project in the checkout; a worker that waited here finds the venv built.
    with checkout_build_lock():
        return _build_venv()


def _build_venv() -> Path:
    stamp = VENV / ".pricewatch-fingerprint"
    if stamp.exists() and stamp.read_text() == _fingerprint():
        return VENV
    shutil.rmtree(VENV, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=120)
    proc = subprocess.run(
        [str(VENV / "bin" / "pip"), "install", "-q", "-c", str(CONSTRAINTS), f"{ROOT}[scrapyd]"],
        cwd=ROOT,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The node runs the eggs it is sent: the copy pip installed with the dependencies
    # would come first on sys.path and shadow every egg deployed later.
    proc = subprocess.run(
        [str(VENV / "bin" / "pip"), "uninstall", "-q", "-y", "pricewatch"],
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    stamp.write_text(_fingerprint())
    return VENV


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Scrapyd:
    def __init__(self, venv: Path, workdir: Path, env: dict[str, str]) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "scrapyd.conf").write_text(
            "[scrapyd]\n"
            "bind_address = 127.0.0.1\n"
            f"http_port = {self.port}\n"
            "max_proc_per_cpu = 1\n"
            "poll_interval = 0.5\n"
        )
        self._log = (workdir / "scrapyd.out").open("w")
        self.proc = subprocess.Popen(
            [str(venv / "bin" / "scrapyd")],
            cwd=workdir,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                if self.get("daemonstatus.json")["status"] == "ok":
                    break
            except OSError:
                pass
            assert self.proc.poll() is None, (workdir / "scrapyd.out").read_text()
            assert time.monotonic() < deadline, "scrapyd did not start"
            time.sleep(0.2)

    def get(self, path: str) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            data: dict[str, Any] = json.load(response)
        return data

    def post(self, path: str, fields: list[tuple[str, str]]) -> dict[str, Any]:
        # schedule.json may first list the egg's spiders in a subprocess (importing Scrapy
        # and the project): seconds of CPU, which took over 10 s on a loaded machine.
        body = urllib.parse.urlencode(fields).encode()
        with urllib.request.urlopen(self.url + path, data=body, timeout=60) as response:
            data: dict[str, Any] = json.load(response)
        return data

    def deploy(
        self, project_dir: Path, project: str, env: dict[str, str]
    ) -> subprocess.CompletedProcess[str]:
        # A deploy target of the operator's own (scrapy.cfg in $XDG_CONFIG_HOME), so the
        # repository's scrapy.cfg is used as it is.
        config = self.workdir / "config"
        config.mkdir(exist_ok=True)
        (config / "scrapy.cfg").write_text(
            f"[deploy:node]\nurl = {self.url}\nproject = {project}\n"
        )
        with checkout_build_lock():  # scrapyd-deploy builds the egg in the project
            return subprocess.run(
                [str(DEPLOY), "node"],
                cwd=project_dir,
                env={**env, "XDG_CONFIG_HOME": str(config)},
                capture_output=True,
                text=True,
                timeout=120,
            )

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self._log.close()


@pytest.fixture
def shop() -> Iterator[SandboxProcess]:
    proc = SandboxProcess(sandbox_args(port=0, seed=13, shops=2, products=10))
    try:
        yield proc
    finally:
        proc.stop()


@pytest.mark.long  # builds the node's virtualenv, which the next test reuses
@pytest.mark.timeout(900)
def test_a_scrapyd_node_crawls_into_redis_and_postgresql(
    scrapyd_venv: Path,
    shop: SandboxProcess,
    redis_frontier_url: str,
    postgres_url: str,
    tmp_path: Path,
) -> None:
    backends = {
        "PRICEWATCH_FRONTIER_URL": redis_frontier_url,
        "PRICEWATCH_STORE_URL": postgres_url,
    }
    urls = shop.urls()
    (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
    env = scrapy_env(tmp_path, **backends)
    assert scrapy(tmp_path, "seed", "seeds.txt", env=env).returncode == 0

    stats = tmp_path / "node" / "stats" / "%(name)s-%(pid)s.json"
    node = Scrapyd(
        scrapyd_venv,
        tmp_path / "node",
        # The sandbox shops are on loopback, which a node refuses by default.
        _clean_env(
            **backends,
            PRICEWATCH_STATS_FILE=str(stats),
            PRICEWATCH_ALLOWED_NETWORKS="127.0.0.0/8",
        ),
    )
    try:
        deployed = node.deploy(ROOT, "pricewatch", _clean_env())
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        assert '"status": "ok"' in deployed.stdout + deployed.stderr
        job = node.post(
            "schedule.json",
            [("project", "pricewatch"), ("spider", "products"),
             ("setting", "DOWNLOAD_DELAY=0"), ("setting", "AUTOTHROTTLE_ENABLED=False")],
        )  # fmt: skip
        assert job["status"] == "ok", job
        deadline = time.monotonic() + 300
        while True:
            jobs = node.get("listjobs.json?project=pricewatch")
            finished = [j for j in jobs["finished"] if j["id"] == job["jobid"]]
            if finished:
                break
            assert time.monotonic() < deadline, jobs
            time.sleep(0.5)
        log = tmp_path / "node" / "logs" / "pricewatch" / "products" / f"{job['jobid']}.log"
        text = log.read_text()
        assert "PRICEWATCH_FRONTIER_URL: redis://" in text, text[-3000:]
        assert "PRICEWATCH_STORE_URL: postgresql://" in text
        # The code that ran is the deployed egg's.
        [origin] = [line for line in text.splitlines() if "pricewatch code from" in line]
        assert ".egg" in origin and str(ROOT) not in origin, origin
        assert "!!!" not in text and "Crawl failed" not in text, text[-3000:]
        [record_path] = list((tmp_path / "node" / "stats").glob("products-*.json"))
        record = json.loads(record_path.read_text())
        assert record["status"] == "finished" and record["exit_code"] == 0, record
        assert record["outcomes"]["ok"] == len(urls), record
    finally:
        node.stop()

    prices = scrapy(tmp_path, "prices", "--csv", env=env)
    assert prices.returncode == 0, prices.stderr
    rows = {row["url"]: row for row in csv.DictReader(io.StringIO(prices.stdout))}
    truth = shop.truth()
    assert sorted(rows) == sorted(urls)
    for url in urls:
        assert Decimal(rows[url]["price"]) == Decimal(truth[url]["price"]), url
        assert rows[url]["currency"] == truth[url]["currency"], url
        assert rows[url]["availability"] == truth[url]["availability"], url


@pytest.mark.timeout(900)
def test_deploy_fails_when_scrapyd_refuses_the_egg(scrapyd_venv: Path, tmp_path: Path) -> None:
    # A project whose settings cannot be imported on the node: scrapyd answers HTTP 200 with
    # {"status": "error"}, which bare scrapyd-deploy reports with exit code 0.
    project = tmp_path / "broken"
    (project / "broken").mkdir(parents=True)
    (project / "broken" / "__init__.py").write_text("")
    (project / "broken" / "settings.py").write_text("import a_module_the_node_lacks\n")
    (project / "scrapy.cfg").write_text("[settings]\ndefault = broken.settings\n")
    (project / "setup.py").write_text(
        "from setuptools import setup, find_packages\n"
        "setup(name='broken', version='1.0', packages=find_packages(),\n"
        "      entry_points={'scrapy': ['settings = broken.settings']})\n"
    )
    node = Scrapyd(scrapyd_venv, tmp_path / "node", _clean_env())
    try:
        checked = node.deploy(project, "broken", _clean_env())
        bare = subprocess.run(
            [str(scrapyd_venv / "bin" / "scrapyd-deploy"), "node"],
            cwd=project,
            env={**_clean_env(), "XDG_CONFIG_HOME": str(node.workdir / "config")},
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        node.stop()
    assert bare.returncode == 0  # what operators got from scrapyd-deploy alone
    assert '"status": "error"' in checked.stdout
    assert checked.returncode == 1
    assert "scrapyd did not accept the egg" in checked.stderr


def test_the_scrapyd_constraints_follow_the_projects() -> None:
    def pins(path: Path) -> dict[str, str]:
        lines = [line.strip() for line in path.read_text().splitlines()]
        return dict(line.split("==", 1) for line in lines if line and not line.startswith("#"))

    project, node = pins(ROOT / "constraints.txt"), pins(CONSTRAINTS)
    assert {k: v for k, v in node.items() if k in project and k != "setuptools"} == {
        k: v for k, v in project.items() if k != "setuptools"
    }
    major = int(node["setuptools"].split(".")[0])
    assert 77 <= major < 81
    assert {"scrapyd", "scrapyd-client"} <= set(node)
