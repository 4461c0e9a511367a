"""URL helpers: masking secrets before anything is printed, the one rule for "this host
or a parent domain of it", the canonical form of a product URL, and the site
(registrable domain) a host belongs to."""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Collection
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from tldextract import TLDExtract
from w3lib.url import canonicalize_url

_QUERY_SECRET = re.compile(r"(?i)([?&;](?:password|passwd|pwd|secret|token)=)[^&;]*")


def mask_password(url: str) -> str:
    """``redis://:secret@host/0`` -> ``redis://:***@host/0``; URLs without one unchanged.

    Works on the raw text, not on a parsed URL: a password may hold ``#``, ``/``, ``?``,
    ``@`` or ``:`` unencoded, which ``urlsplit`` reads as a fragment, a path or a port
    and would print. Everything from the first ``:`` after the user name up to the last
    ``@`` of the URL is the password (masking too much is harmless, too little is not);
    ``password=`` (and ``token=``, ``secret=``) query parameters are masked too.
    """
    head, sep, rest = url.partition("://")
    if not sep:
        return _QUERY_SECRET.sub(r"\1***", url)
    at = rest.rfind("@")
    if at >= 0:
        userinfo, hostpart = rest[:at], rest[at + 1 :]
        user, colon, _ = userinfo.partition(":")
        if colon:
            rest = f"{user}:***@{hostpart}"
    return head + sep + _QUERY_SECRET.sub(r"\1***", rest)


def url_problem(url: str) -> str | None:
    """Why a backend URL would be misread by its client library, in words that quote no
    part of the password; None when it reads as written. A ``/``, ``?`` or ``#`` in a
    password ends the host part early (``redis://:p#w@h`` reads as host ``""``, port
    ``p``), and the libraries' errors then quote pieces of the password."""
    head, sep, rest = url.partition("://")
    at = rest.rfind("@")
    if sep and at >= 0:
        userinfo = rest[:at]
        if ":" in userinfo and any(c in userinfo for c in "/?#"):
            return (
                "a /, ? or # in the password must be percent-encoded (%2F, %3F, %23), "
                "and an @ as %40"
            )
    try:
        urlsplit(url).port  # noqa: B018 - parsing is the check
    except ValueError:
        return "the port must be a number in 0-65535"
    return None


def mask_userinfo(text: str) -> str:
    """Every ``scheme://user:password@`` in ``text`` as ``scheme://***@``: for seeded
    product URLs, where a user name may be a secret too (an API key)."""
    return re.sub(
        r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s@]*@(?=[^\s@]*(?:[/?#\s,\"]|$))", r"\1***@", text
    )


def sqlite_path(url: str) -> Path:
    """The file of a SQLAlchemy-style SQLite URL.

    ``sqlite:///pricewatch.db`` is relative to the working directory,
    ``sqlite:////var/lib/pricewatch.db`` is absolute.
    """
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise ValueError(
            f"not a SQLite URL: {url!r} (expected sqlite:///relative.db or sqlite:////abs.db)"
        )
    return Path(url[len(prefix) :])


def scheme(url: str) -> str:
    return urlsplit(url).scheme.lower()


def frontier_backend(url: str) -> str:
    """``"sqlite"`` or ``"redis"``: the backend ``PRICEWATCH_FRONTIER_URL`` names, which the
    frontier and every store kept beside it (listings, limits, sessions, learned browser
    domains, drift state) share; ValueError naming the URL, its password masked, otherwise."""
    kind = scheme(url)
    if kind == "sqlite":
        return "sqlite"
    if kind in ("redis", "rediss", "unix"):
        return "redis"
    raise ValueError(
        f"PRICEWATCH_FRONTIER_URL must be sqlite:///… or redis://…, got {mask_password(url)!r}"
    )


def _domain_name(name: str) -> str:
    return name.strip().lower().rstrip(".")


def parent_domains(host: str) -> list[str]:
    """``shop.example.com`` -> ``["shop.example.com", "example.com", "com"]``.

    The host itself, then each parent domain, most specific first; lowercased, a trailing
    dot dropped. Empty for an empty host.
    """
    labels = _domain_name(host).split(".")
    return [".".join(labels[i:]) for i in range(len(labels))] if labels != [""] else []


def host_matches(host: str, domain: str) -> bool:
    """True when ``host`` is ``domain`` or a subdomain of it (case-insensitive, a
    trailing dot ignored): ``host_matches("www.shop.example", "shop.example")``."""
    host, domain = _domain_name(host), _domain_name(domain)
    return bool(domain) and (host == domain or host.endswith("." + domain))


def matching_domain(host: str, domains: Collection[str]) -> str | None:
    """The most specific entry of ``domains`` (normalized names, e.g. the keys of a
    per-domain setting) that ``host`` matches, as :func:`host_matches` decides; None when
    none does."""
    for name in parent_domains(host):
        if name in domains:
            return name
    return None


# --- Product URLs ------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x20\x7f-\x9f\ud800-\udfff]")  # also space and bad bytes
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
_DEFAULT_PORT = {"http": 80, "https": 443}


class BadURL(ValueError):
    """A URL that cannot be scheduled; ``reason`` says why in a few words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _check_host(host: str) -> str:
    """``host`` (lower case, IDNA-encoded) if it is a valid DNS name or IP literal."""
    if ":" in host:  # an IPv6 literal (urlsplit strips the brackets)
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise BadURL("invalid IPv6 address") from None
        return f"[{host}]"
    labels = host.split(".")
    if labels[-1].isdigit():  # dotted digits are an IPv4 address or nothing
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise BadURL("invalid IPv4 address") from None
        return host
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise BadURL("invalid host name")
    return host


# The common case, already canonical: lower-case host of valid labels (not all-digit last),
# a port other than the default, a plain path, a query of sorted key=value pairs. For
# these canonicalize_url is the identity (tests/test_seeding.py compares both), and a
# seeded URL is checked again by the frontier: ~2 us here instead of ~25 us.
_FAST = re.compile(
    r"(https?)://((?:(?!-)[a-z0-9-]{1,63}(?<!-)\.)*(?!-)[a-z0-9-]*[a-z-][a-z0-9-]*(?<!-))"
    r"(?::([1-9][0-9]{0,4}))?(/[A-Za-z0-9._~/-]*)(?:\?([A-Za-z0-9._~-]+=[A-Za-z0-9._~-]*"
    r"(?:&[A-Za-z0-9._~-]+=[A-Za-z0-9._~-]*)*))?"
)


def _is_canonical(url: str) -> bool:
    match = _FAST.fullmatch(url)
    if match is None:
        return False
    kind, host, port, path, query = match.groups()
    if "/." in path or len(host) > 253 or (port and not 0 < int(port) <= 65535):
        return False
    if port and int(port) == _DEFAULT_PORT[kind]:
        return False
    if query:
        pairs = query.split("&")
        if pairs != sorted(pairs, key=lambda pair: tuple(pair.split("=", 1))):
            return False
    return True


def product_url(url: str, *, max_length: int = 0) -> str:
    """The canonical form of a product URL, or :class:`BadURL` saying why it has none.

    One product page, one form: scheme and host in lower case, an international host in
    punycode, no trailing dot on the host, no default port, no ``#fragment``, query
    arguments sorted, no empty ``?``, percent-encoding normalised (w3lib's
    ``canonicalize_url``). Refused: anything but http(s), control characters, whitespace
    or undecodable bytes, a missing or malformed host, a port outside 1-65535, and
    credentials (``user:password@``): a product page needs none, and a URL is logged,
    stored and shown everywhere. ``max_length`` (0: none) bounds the canonical form;
    pass Scrapy's ``URLLENGTH_LIMIT``, beyond which the crawl would drop the request.
    """
    if len(url) <= (max_length or len(url)) and _is_canonical(url):
        return url
    if _CONTROL.search(url):
        raise BadURL("control character, whitespace or undecodable byte in URL")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BadURL("port out of range" if "port" in str(exc).lower() else "not a URL") from None
    kind = parts.scheme.lower()
    if kind not in _DEFAULT_PORT:
        raise BadURL("not an http(s) URL")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise BadURL("credentials in URL (user:password@ is refused)")
    if not parts.hostname:
        raise BadURL("no host")
    if port is not None and not 1 <= port <= 65535:
        raise BadURL("port out of range")
    try:
        canonical = canonicalize_url(url)
        parts = urlsplit(canonical)
        hostname = (parts.hostname or "").rstrip(".")
    except (ValueError, UnicodeError):
        raise BadURL("invalid host name") from None
    if not hostname or not hostname.isascii():
        raise BadURL("invalid host name")
    netloc = _check_host(hostname)
    if port is not None and port != _DEFAULT_PORT[kind]:
        netloc = f"{netloc}:{port}"
    canonical = urlunsplit((kind, netloc, parts.path or "/", parts.query, ""))
    if max_length and len(canonical) > max_length:
        raise BadURL(f"longer than {max_length} characters (URLLENGTH_LIMIT)")
    return canonical


# --- Sites -------------------------------------------------------------------------------

# The public suffix list as bundled with tldextract: no download, no cache directory.
# Private suffixes count (myshop.myshopify.com is its own site, not myshopify.com's).
_SUFFIXES = TLDExtract(suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True)


def is_public_suffix(domain: str) -> bool:
    """Whether ``domain`` is a public suffix (``co.uk``, ``myshopify.com``), where no site may
    set a cookie for every site under it; by the bundled list, no network."""
    return not _SUFFIXES(domain.lower().rstrip(".")).domain


@functools.lru_cache(maxsize=65536)
def site_of(host: str) -> str:
    """The registrable domain of ``host`` (``www.shop.co.uk`` -> ``shop.co.uk``), by the
    public suffix list; an IP address, a name under no public suffix (``localhost``,
    ``shop.test``) or a public suffix itself is its own site. Lower case, no trailing dot.
    Per-domain limits, circuits and counts are per site: every host of one shop shares them.
    """
    host = host.lower().rstrip(".")
    if not host or host[0] == "[" or ":" in host:
        return host
    parts = _SUFFIXES(host)
    if not parts.suffix or not parts.domain:
        return host
    return parts.top_domain_under_public_suffix
