"""Per-domain override rules an operator writes without code.

Setting read (by the spider, which passes the loaded rules to ``extract_offer``):

- ``PRICEWATCH_EXTRACT_RULES_FILE`` (str, default ``""``: no rules): a TOML file with one
  table per host. A table applies to the host and its subdomains. Each field is a CSS
  selector (``<field>_css``) or an XPath (``<field>_xpath``); ``currency`` may also be a
  literal ISO code. Fields: ``price``, ``regular_price``, ``currency``, ``availability``,
  ``sku``, ``name``. Rules are tried before every heuristic; a price they find has
  ``source = "rule"``.

Example::

    ["shop.example"]
    price_css = "#product .price-now"
    regular_price_xpath = "//del[@class='was']/text()"
    currency = "EUR"
    availability_css = ".stock-state"   # text read as "in stock" / "sold out" / schema.org

Selectors are compiled once when the file is loaded; an invalid one raises ``ValueError``
naming the setting, the host and the selector.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lxml.etree
from lxml.cssselect import CSSSelector, SelectorSyntaxError

from pricewatch._urls import matching_domain
from pricewatch.currency import ISO_CODES
from pricewatch.extract._candidate import Candidate, clean_text, normalise_availability, valid_gtin
from pricewatch.extract._money import parse_amount, parse_machine
from pricewatch.extract._stock import stock_from_text
from pricewatch.extract._tree import text_of

SETTING = "PRICEWATCH_EXTRACT_RULES_FILE"
FIELDS = ("price", "regular_price", "currency", "availability", "sku", "gtin", "name")


@dataclass(frozen=True, slots=True)
class DomainRule:
    """Compiled selectors for one host."""

    host: str
    selectors: dict[str, Any] = field(default_factory=dict)
    currency_code: str | None = None

    def values(self, root: Any, name: str) -> list[str]:
        selector = self.selectors.get(name)
        if selector is None:
            return []
        try:
            found = selector(root)
        except (lxml.etree.XPathError, ValueError, TypeError):
            return []
        if not isinstance(found, list):
            found = [found]
        out = []
        for item in found[:10]:
            if isinstance(item, str):
                text = str(item)
            elif isinstance(getattr(item, "tag", None), str):
                text = item.get("content") or text_of(item)
            else:
                continue
            text = " ".join(text.split())
            if text:
                out.append(text)
        return out


@dataclass(frozen=True, slots=True)
class Rules:
    """All operator rules, by host."""

    by_host: Mapping[str, DomainRule] = field(default_factory=dict)

    def for_host(self, host: str) -> DomainRule | None:
        domain = matching_domain(host, self.by_host)
        return None if domain is None else self.by_host[domain]

    def __len__(self) -> int:
        return len(self.by_host)


def _compile(host: str, key: str, expr: object) -> Any:
    if not isinstance(expr, str) or not expr.strip():
        raise ValueError(f"{SETTING}: [{host!r}] {key} must be a non-empty string, got {expr!r}")
    try:
        if key.endswith("_css"):
            return CSSSelector(expr)
        return lxml.etree.XPath(expr)
    except (SelectorSyntaxError, lxml.etree.XPathSyntaxError) as exc:
        raise ValueError(f"{SETTING}: [{host!r}] invalid {key} {expr!r}: {exc}") from exc


def rules_from_mapping(data: Mapping[str, Any]) -> Rules:
    """Rules from a parsed TOML document (``{host: {field_css: ...}}``)."""
    by_host: dict[str, DomainRule] = {}
    for host, table in data.items():
        if not isinstance(table, Mapping):
            raise ValueError(f"{SETTING}: [{host!r}] must be a table, got {table!r}")
        selectors: dict[str, Any] = {}
        code = None
        for key, expr in table.items():
            if key == "currency" and isinstance(expr, str):
                code = expr.strip().upper()
                if code not in ISO_CODES:
                    raise ValueError(
                        f"{SETTING}: [{host!r}] currency must be an ISO 4217 code, got {expr!r}"
                    )
                continue
            name, _, kind = key.rpartition("_")
            if kind not in ("css", "xpath") or name not in FIELDS:
                raise ValueError(
                    f"{SETTING}: [{host!r}] unknown key {key!r} (expected <field>_css or"
                    f" <field>_xpath with field in {', '.join(FIELDS)}, or currency)"
                )
            selectors[name] = _compile(host, key, expr)
        by_host[host.lower().strip().rstrip(".")] = DomainRule(host, selectors, code)
    return Rules(by_host)


def load_rules(path: str | Path | None) -> Rules | None:
    """Load the rules file named by ``PRICEWATCH_EXTRACT_RULES_FILE``; None when unset."""
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ValueError(f"{SETTING}: cannot read {str(path)!r}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{SETTING}: {str(path)!r} is not valid TOML: {exc}") from exc
    return rules_from_mapping(data)


def apply_rules(rules: Rules | None, root: Any, host: str) -> Candidate | None:
    """What the host's rule reads off the page; None when no rule or nothing found."""
    if rules is None:
        return None
    rule = rules.for_host(host)
    if rule is None:
        return None
    cand = Candidate(source="rule")
    currency_text = None
    for text in rule.values(root, "price"):
        amount, currency_text = parse_amount(text)
        if amount is None:
            amount = parse_machine(text)
        if amount is not None:
            cand.price, cand.price_text = amount, text
            break
    for text in rule.values(root, "regular_price"):
        amount, _ = parse_amount(text)
        if amount is not None:
            cand.regular_price, cand.regular_price_text = amount, text
            break
    currency_values = rule.values(root, "currency")
    cand.currency_raw = rule.currency_code or (currency_values[0] if currency_values else None)
    cand.currency_raw = cand.currency_raw or currency_text
    for text in rule.values(root, "availability"):
        cand.availability = normalise_availability(text) or stock_from_text(text)
        if cand.availability:
            break
    skus = rule.values(root, "sku")
    cand.sku = clean_text(skus[0], 80) if skus else None
    gtins = rule.values(root, "gtin")
    cand.gtin = valid_gtin(gtins[0]) if gtins else None
    names = rule.values(root, "name")
    cand.name = clean_text(names[0]) if names else None
    return cand if (cand.useful() or cand.name) else None
