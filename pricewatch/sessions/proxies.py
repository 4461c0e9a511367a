"""The proxy pools of ``PRICEWATCH_PROXIES``: which proxies a domain's sessions may use.

``PRICEWATCH_PROXIES`` is one of:

- a list of proxy URLs (``http://user:password@proxy1:3128``, ``https://proxy2:443``), used
  for every domain;
- a dict of pools per domain, ``{"shop.example": [...], "*": [...]}`` (a domain covers its
  subdomains; ``"*"`` is every other domain; a domain without a pool and no ``"*"`` is
  fetched directly);
- a string: a JSON list or dict as above, URLs separated by commas or whitespace, or the
  path of a file holding either (JSON, or one URL per line, ``#`` comments).

Credentials live only in the URLs (or the environment the setting is read from). Nothing
prints a proxy URL: logs, stats, commands and ``Request.meta`` name a proxy by its id, a
stable short hash of its URL (:func:`proxy_id`), and show it, when they must, as
``scheme://***@host:port`` (:attr:`Proxy.display`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pricewatch._urls import matching_domain

_SCHEMES = ("http", "https")
SETTING = "PRICEWATCH_PROXIES"


def proxy_id(url: str) -> str:
    """The id of a proxy: 8 hex digits of BLAKE2b over its whole URL (credentials
    included, so two accounts on one proxy host are two proxies), the same in every
    process and every run."""
    return hashlib.blake2b(url.encode("utf-8"), digest_size=4).hexdigest()


@dataclass(frozen=True, slots=True)
class Proxy:
    id: str
    url: str  # with its credentials: for Request.meta["proxy"] only, never printed
    display: str  # scheme://[***@]host:port

    def __repr__(self) -> str:  # a Proxy in a traceback or a debugger shows no secret
        return f"Proxy({self.id}, {self.display})"

    @classmethod
    def parse(cls, url: str) -> Proxy:
        url = url.strip()
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port
        except ValueError:
            host = port = None
            parts = None
        if parts is None or parts.scheme not in _SCHEMES or not host:
            raise ValueError(
                f"{SETTING} must hold http:// or https:// proxy URLs with a host, got "
                f"{_masked(url)!r}"
            )
        userinfo = "***@" if "@" in parts.netloc else ""
        hostport = f"[{host}]" if ":" in host else host
        if port is not None:
            hostport += f":{port}"
        return cls(id=proxy_id(url), url=url, display=f"{parts.scheme}://{userinfo}{hostport}")


def _masked(text: str) -> str:
    head, sep, rest = text.partition("://")
    at = rest.rfind("@")
    return head + sep + ("***@" + rest[at + 1 :] if at >= 0 else rest) if sep else text


class ProxyPools:
    """Per-domain pools of proxies; empty when ``PRICEWATCH_PROXIES`` is empty."""

    def __init__(self, pools: Mapping[str, Sequence[Proxy]]) -> None:
        self._pools = {domain.lower(): tuple(proxies) for domain, proxies in pools.items()}
        self._default = self._pools.pop("*", ())
        self._cache: dict[str, tuple[Proxy, ...]] = {}
        self.by_id: dict[str, Proxy] = {
            proxy.id: proxy for pool in (*self._pools.values(), self._default) for proxy in pool
        }

    def __bool__(self) -> bool:
        return bool(self.by_id)

    def for_domain(self, domain: str) -> tuple[Proxy, ...]:
        """The pool of ``domain`` (a site or a host); () means: fetched directly."""
        pool = self._cache.get(domain)
        if pool is None:
            match = matching_domain(domain, self._pools)
            pool = self._pools[match] if match is not None else self._default
            self._cache[domain] = pool
        return pool

    @classmethod
    def from_value(cls, value: Any) -> ProxyPools:
        """Pools from a ``PRICEWATCH_PROXIES`` value; ValueError naming the setting."""
        value = _load(value)
        if isinstance(value, Mapping):
            raw = {str(domain): _urls(urls) for domain, urls in value.items()}
        else:
            raw = {"*": _urls(value)}
        pools: dict[str, list[Proxy]] = {}
        for domain, urls in raw.items():
            seen: dict[str, Proxy] = {}
            for url in urls:
                proxy = Proxy.parse(url)
                seen.setdefault(proxy.id, proxy)
            if seen:
                pools[domain] = list(seen.values())
        return cls(pools)


def _load(value: Any) -> Any:
    if value is None:
        return []
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        return []
    if text[0] in "[{":
        return _json(text, "the JSON of the setting")
    if "://" in text:
        return text.replace(",", " ").split()
    path = Path(text).expanduser()
    try:
        content = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(
            f"{SETTING} must be proxy URLs or a readable file, got {text!r}: {exc.strerror}"
        ) from None
    stripped = content.strip()
    if stripped[:1] in ("[", "{"):
        return _json(stripped, f"the JSON of {path}")
    return [
        line.split("#", 1)[0].strip()
        for line in content.splitlines()
        if line.split("#", 1)[0].strip()
    ]


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:  # the message quotes no part of the text
        raise ValueError(f"{SETTING} must be valid JSON, {what} is not: {exc.msg}") from None


def _urls(value: Any) -> list[str]:
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, Sequence) or not all(isinstance(url, str) for url in value):
        raise ValueError(
            f"{SETTING} must be a list of proxy URLs or a dict of such lists per domain, got "
            f"a {type(value).__name__}"
        )
    return list(value)
