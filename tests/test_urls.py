"""The one host-matching rule shared by browser routing, extraction rules and currencies."""

from __future__ import annotations

import pytest

from pricewatch._urls import frontier_backend, host_matches, matching_domain, parent_domains


@pytest.mark.parametrize(
    ("host", "domain", "expected"),
    [
        pytest.param("shop.example", "shop.example", True, id="same"),
        pytest.param("www.shop.example", "shop.example", True, id="subdomain"),
        pytest.param("a.b.shop.example", "shop.example", True, id="deep-subdomain"),
        pytest.param("WWW.Shop.Example", "shop.EXAMPLE", True, id="case-insensitive"),
        pytest.param("www.shop.example.", "shop.example", True, id="host-trailing-dot"),
        pytest.param("www.shop.example", "shop.example.", True, id="domain-trailing-dot"),
        pytest.param("myshop.example", "shop.example", False, id="suffix-not-at-label"),
        pytest.param("shop.example", "www.shop.example", False, id="parent-of-domain"),
        pytest.param("shop.example.org", "shop.example", False, id="other-tld"),
        pytest.param("shop.example", "", False, id="empty-domain"),
        pytest.param("", "shop.example", False, id="empty-host"),
    ],
)
def test_host_matches(host: str, domain: str, expected: bool) -> None:
    assert host_matches(host, domain) is expected


def test_parent_domains_most_specific_first() -> None:
    assert parent_domains("WWW.Shop.Example.") == ["www.shop.example", "shop.example", "example"]
    assert parent_domains("") == []


def test_matching_domain_picks_the_most_specific_entry_host_matches_agrees() -> None:
    domains = {"shop.example", "eu.shop.example", "other.example"}
    assert matching_domain("www.eu.shop.example", domains) == "eu.shop.example"
    assert matching_domain("www.shop.example", domains) == "shop.example"
    assert matching_domain("myshop.example", domains) is None
    for host in ("www.eu.shop.example", "www.shop.example", "myshop.example", "x.other.example"):
        found = matching_domain(host, domains)
        assert (found is not None) == any(host_matches(host, d) for d in domains)


@pytest.mark.parametrize(
    ("url", "backend"),
    [
        ("sqlite:///var/lib/pricewatch.db", "sqlite"),
        ("SQLite:///pricewatch.db", "sqlite"),
        ("redis://127.0.0.1:6379/0", "redis"),
        ("rediss://:pw@cache.example:6380/1", "redis"),
        ("unix:///run/redis.sock?db=2", "redis"),
    ],
)
def test_frontier_backend_names_the_backend_of_the_frontier_url(url: str, backend: str) -> None:
    assert frontier_backend(url) == backend


@pytest.mark.parametrize(
    "url", ["postgresql://u:s3cret@db/x", "ftp://u:s3cret@host/", "redis-host:6379", ""]
)
def test_frontier_backend_refuses_other_urls_without_their_password(url: str) -> None:
    with pytest.raises(ValueError, match="must be sqlite:///… or redis://…") as refused:
        frontier_backend(url)
    assert "s3cret" not in str(refused.value)
