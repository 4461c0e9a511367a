"""Cookies: Scrapy's middleware with public suffixes decided by the bundled list, so the
first cookie with a ``Domain`` attribute never sends the crawl to publicsuffix.org."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse

import pricewatch.settings
from pricewatch.cookies import CookiesMiddleware


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> list[str]:
    """Any name looked up is recorded and refused; $HOME is empty, so a cache written
    there would show."""
    looked_up: list[str] = []

    def refuse(host: Any, *args: Any, **kwargs: Any) -> Any:
        looked_up.append(str(host))
        raise socket.gaierror(socket.EAI_NONAME, "offline")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    return looked_up


def exchange(mw: CookiesMiddleware, url: str, *set_cookie: str) -> None:
    request = Request(url)
    mw.process_request(request)
    headers = {"Set-Cookie": list(set_cookie)}
    mw.process_response(request, HtmlResponse(url, headers=headers, request=request))


def cookie_header(mw: CookiesMiddleware, url: str) -> list[str]:
    """The cookies a request to ``url`` carries, sorted."""
    request = Request(url)
    mw.process_request(request)
    return sorted(filter(None, (request.headers.get("Cookie") or b"").decode().split("; ")))


def test_public_suffix_domains_are_refused_and_shop_domains_kept(
    offline: list[str], tmp_path: Any
) -> None:
    mw = CookiesMiddleware()
    exchange(
        mw,
        "https://www.shop-a.co.uk/p/1",
        "everywhere=1; Domain=.co.uk; Path=/",
        "loyalty=gold; Domain=shop-a.co.uk; Path=/",
        "store=leeds; Path=/",
    )
    exchange(mw, "https://tenant.myshopify.com/p/1", "cart=9; Domain=myshopify.com; Path=/")
    assert cookie_header(mw, "https://www.shop-a.co.uk/p/2") == ["loyalty=gold", "store=leeds"]
    assert cookie_header(mw, "https://checkout.shop-a.co.uk/") == ["loyalty=gold"]
    assert cookie_header(mw, "https://www.shop-b.co.uk/p/1") == []
    assert cookie_header(mw, "https://other.myshopify.com/") == []  # a private suffix
    assert offline == []
    assert list(tmp_path.iterdir()) == []


def test_a_host_that_is_a_public_suffix_keeps_its_own_cookie(offline: list[str]) -> None:
    mw = CookiesMiddleware()
    exchange(mw, "https://myshopify.com/", "seen=1; Domain=myshopify.com; Path=/")
    assert cookie_header(mw, "https://myshopify.com/next") == ["seen=1"]
    assert offline == []


def test_the_project_uses_it_in_place_of_scrapys() -> None:
    enabled = pricewatch.settings.DOWNLOADER_MIDDLEWARES
    assert enabled["scrapy.downloadermiddlewares.cookies.CookiesMiddleware"] is None
    assert enabled["pricewatch.cookies.CookiesMiddleware"] == 700
