"""No password reaches a log, an error message or the stats file, whatever its characters:
the backend URLs carry passwords with unencoded ``#``, ``/``, ``@``, ``%`` and ``:``, and
real ``scrapy`` subprocesses are run with them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pricewatch._urls import mask_password, url_problem

from .helpers import scrapy, scrapy_env

# Every piece between delimiters is three characters long and found nowhere else, so a
# leaked fragment ("port 'Zq9'") is caught as surely as the whole password.
PASSWORDS = {
    "hash and slash": "Zq9#Kv7/Wm3",
    "at and colon": "Zq9@Kv7:Wm3",
    "percent": "Zq9%Kv7%Wm3",
    "all of them": "Zq9/Kv7@Wm3:Tx5%Pj4#Rb1?Hd6",
}


def pieces(password: str) -> list[str]:
    return [p for p in re.split(r"[#/@%:?]", password) if p]


def output_of(tmp_path: Path, *args: str, env: dict[str, str]) -> str:
    proc = scrapy(tmp_path, *args, env=env)
    stats = tmp_path / "stats.json"
    text = proc.stdout + proc.stderr + (stats.read_text() if stats.exists() else "")
    stats.unlink(missing_ok=True)
    return text


def assert_no_secret(text: str, password: str) -> None:
    for piece in pieces(password):
        assert piece not in text, f"{piece!r} of the password leaked:\n{text[-3000:]}"


@pytest.mark.parametrize("password", PASSWORDS.values(), ids=PASSWORDS.keys())
def test_mask_password_hides_every_character_of_it(password: str) -> None:
    for url in (
        f"redis://:{password}@127.0.0.1:6379/0",
        f"postgresql://root:{password}@db.internal:5432/prices?sslmode=require",
        f"postgresql://root@db.internal/prices?password={password}",
    ):
        assert_no_secret(mask_password(url), password)
    assert mask_password(f"redis://:{password}@h:6379/0") == "redis://:***@h:6379/0"


def test_url_problem_says_what_to_encode_without_quoting_the_password() -> None:
    problem = url_problem("redis://:Zq9#Kv7/Wm3@127.0.0.1:6379/0")
    assert problem is not None and "%23" in problem and "%2F" in problem
    assert url_problem("redis://:Zq9%23Kv7%2FWm3@127.0.0.1:6379/0") is None
    assert url_problem("postgresql://root:Zq9@Kv7:Wm3@127.0.0.1/db") is None


@pytest.mark.parametrize("password", PASSWORDS.values(), ids=PASSWORDS.keys())
def test_redis_password_never_printed(tmp_path: Path, redis_namespace: str, password: str) -> None:
    url = f"redis://:{password}@127.0.0.1:6379/0?namespace={redis_namespace}"
    env = scrapy_env(tmp_path, PRICEWATCH_FRONTIER_URL=url)
    (tmp_path / "seeds.txt").write_text("https://shop.example/p/1\n")
    for args in (("seed", "seeds.txt"), ("frontier",), ("crawl", "products")):
        assert_no_secret(output_of(tmp_path, *args, env=env), password)


@pytest.mark.parametrize("password", PASSWORDS.values(), ids=PASSWORDS.keys())
def test_postgresql_password_never_printed(
    tmp_path: Path, postgres_url: str, password: str
) -> None:
    # The test server trusts local connections, so a URL that parses connects and the
    # crawl runs with it; one that does not parse fails with a masked message.
    url = postgres_url.replace("postgresql://root@", f"postgresql://root:{password}@")
    env = scrapy_env(tmp_path, PRICEWATCH_STORE_URL=url)
    for args in (("db", "upgrade"), ("crawl", "products"), ("prices",)):
        text = output_of(tmp_path, *args, env=env)
        assert_no_secret(text, password)
        assert "Traceback" not in text, text[-3000:]
