"""The main product's region of a page: everything except other products and page chrome.

Visible prices, stock wording, buy buttons, hidden SKU fields and microdata/RDFa offers are
read only inside the region; what sits outside never supplies a price, a list price or a
stock state. The region is the page minus these subtrees (judged by structure and by the
names a page gives its blocks; no host-specific rule):

- page chrome: ``<header>``, ``<footer>``, ``<nav>`` and their ARIA roles (``banner``,
  ``contentinfo``, ``navigation``), the mini-cart and cart drawers;
- blocks (``div``, ``section``, ``aside``, lists) named for other products, by class,
  id, ``aria-label``, ``data-widget`` or ``data-component``: related, recommended, "also
  bought/viewed/like", similar, upsell, cross-sell, recently viewed, carousels, sliders
  and swipers;
- lists of product cards: a block whose first three element children (after a heading)
  share one tag and class and each link somewhere (``<li class="card"><a href=...>``): a
  product grid, a carousel or a list of other offers, whatever it is called.

A subtree that holds the product title (the page's ``<h1>``, or without one the element
showing the product's name, see ``_visible.named_title``) is never cut out: the title
marks the product's own block, so a page wrapped in ``<div class="slider">`` or a title
inside ``<header>`` keeps its product. A reader asks :meth:`Region.excludes` about each
element it would use; the answer walks the element's ancestors once, memoised per page, so
the cost follows the few elements read, not the page size. JSON-LD has its own notion of
other products (``ItemList``, ``isRelatedTo``...; see ``_jsonld``) and OpenGraph is
page-level.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import lxml.etree

# The look-ahead lets the regex skip most positions of long class lists at C speed.
_OTHER_NAMES = re.compile(
    r"(?=[rasucmy])(?:related|recommend|also[-_ ]?(?:bought|viewed|like|purchased)|"
    r"you[-_ ]?may|similar|upsell|up-sell|cross-?sell|recent(?:ly)?[-_ ]?viewed|recently|"
    r"carousel|slider|swiper|mini-?cart|cart-?drawer|mini-?basket)",
    re.I,
)
_CARD_LIST_MIN = 3
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_CHROME_TAGS = frozenset({"header", "footer", "nav"})
_CHROME_ROLES = frozenset({"banner", "contentinfo", "navigation"})
# Blocks that wrap other content; inline elements and leaves are not looked at.
_BLOCK_SET = frozenset({"div", "section", "aside", "ul", "ol", "header", "footer", "nav"})
_LINK = lxml.etree.XPath("boolean(descendant-or-self::a[@href])")
# Links a product's own price box carries: shipping costs, tax, delivery times, size guides,
# financing, a quote form (German shops must link the shipping costs beside the price).
_INFO_LINK = re.compile(
    r"shipping|delivery|postage|\btax|\bvat\b|versand|liefer|mwst|\bust\b|porto|"
    r"livraison|frais|\btva\b|envío|envio|spedizione|\biva\b|verzend|\bbtw\b|"
    r"size guide|size chart|grö(?:ß|ss)entabelle|guide des tailles|financ|finanzier|"
    r"quote|angebot|devis",
    re.I,
)


def _leads_elsewhere(a: Any) -> bool:
    """The link ``a`` goes to another page, and not to one of the own box's notes (read by
    the link's words: a tile's product link may have anything in its address)."""
    href = (a.get("href") or "").strip()
    if not href or href.startswith(("#", "javascript:")):
        return False
    return not _INFO_LINK.search(" ".join(a.itertext()))


def _card_list(el: Any) -> bool:
    """Its first element children after a heading are alike (same tag and class) and each
    holds a link: the cards of other products."""
    children: list[Any] = []
    for child in el:
        tag = child.tag
        if not isinstance(tag, str) or (not children and tag in _HEADINGS):
            continue
        children.append(child)
        if len(children) == _CARD_LIST_MIN:
            break
    if len(children) < _CARD_LIST_MIN:
        return False
    first = children[0]
    if any(c.tag != first.tag or c.get("class") != first.get("class") for c in children[1:]):
        return False
    return all(_LINK(c) for c in children)


def _is_other(el: Any) -> bool:
    if el.tag in _CHROME_TAGS:
        return True
    attrib = el.attrib
    if attrib:
        if attrib.get("role") in _CHROME_ROLES:
            return True
        for key in ("class", "id", "aria-label", "data-widget", "data-component"):
            value = attrib.get(key)
            if value and _OTHER_NAMES.search(value):
                return True
    return len(el) >= _CARD_LIST_MIN and _card_list(el)


class Region:
    """The product's region of one page: :meth:`excludes` tells whether an element lies
    in a subtree outside it. Each ancestor is judged once (memoised), so a reader pays for
    the elements it looks at, not for the whole page."""

    __slots__ = ("_find_title", "_keep", "_memo", "_title", "controls")

    def __init__(self, find_title: Callable[[], Any | None], controls: list[Any]) -> None:
        # The title is looked for on first use: pages read from markup alone never pay.
        self._find_title = find_title
        # The page's <button> and <input> elements (document order), for the readers of
        # buy controls and form fields; collected with the page's first pass.
        self.controls = controls
        self._title: Any | None = None
        self._keep: set[Any] | None = None
        self._memo: dict[Any, bool] = {}

    @property
    def title(self) -> Any | None:
        """The product's title element (its ``<h1>`` or the element naming it), or None."""
        if self._keep is None:
            self._title = self._find_title()
            # The title's own ancestors hold the product: never cut out.
            self._keep = set(self._title.iterancestors()) if self._title is not None else set()
        return self._title

    def in_tile(self, el: Any) -> bool:
        """``el`` sits in a box beside the title's branch that links elsewhere (below the
        block that holds both): a tile of another product, however few or unnamed the
        tiles are, not the product's own price box. False on a page without a title."""
        if self.title is None:
            return False
        keep = self._keep or set()
        node = el
        while node is not None and node not in keep:
            if any(_leads_elsewhere(a) for a in node.iter("a")):
                return True
            node = node.getparent()
        return False

    def excludes(self, el: Any) -> bool:
        """``el`` or one of its ancestors is page chrome or another product's block."""
        memo = self._memo
        chain = []
        node = el
        outside = False
        while node is not None:
            known = memo.get(node)
            if known is not None:
                outside = known
                break
            chain.append(node)
            node = node.getparent()
        if self._keep is None:
            self.title  # noqa: B018 - finds the title and its ancestors
        keep = self._keep or set()
        for node in reversed(chain):
            if not outside and node not in keep and node.tag in _BLOCK_SET:
                outside = _is_other(node)
            memo[node] = outside
        return outside
