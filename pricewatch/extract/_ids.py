"""Product identifiers beyond structured data: labelled codes, hidden form fields, URLs.

- A visible label ("SKU:", "Product code", "Art.-Nr.", "Bestellnummer", "Référence",
  "Codice", "Código", "Kod produktu", "Šifra", "Cod produs", "Item number", ...) followed
  by a code, in the same text or the next one.
- A hidden ``<input>`` whose name or id is an identifier name (``sku``, ``asin``,
  ``productSku``, ``itemNumber``, ...), the way shop forms post the item to the cart.
- The page URL: an identifier query parameter (``sku=``, ``pid=``, ``itemId=``...) or the
  trailing token of the last path segment when it looks like a code (digits, or upper-case
  letters and digits).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import lxml.etree

from pricewatch.extract._region import Region
from pricewatch.extract._tree import text_of

_LABEL = (
    r"sku|product\s?code|product\s?number|product\s?no\.?|item\s?(?:number|no\.?|#|code|id)|"
    r"article\s?(?:number|no\.?)|art\.?\s?-?\s?nr\.?|artikel\s?-?\s?nr\.?|artikelnummer|"
    r"bestellnummer|best\.?\s?-?\s?nr\.?|referen(?:ce|cia|za)|réf(?:érence)?\.?|ref\.|"
    r"codice(?:\s(?:articolo|prodotto))?|cod\.?\s?(?:art\.?|produs)|código(?:\sdo\sproduto)?|"
    r"kod\s?(?:produktu|towaru)?|kód(?:\s?produktu)?|šifra|cikkszám|varenummer|varenr\.?|"
    r"artikelnr\.?|tuotenumero|post\s?id|ad\s?(?:id|number)|anzeigen?-?(?:nummer|nr\.?)|"
    r"numer\s?(?:katalogowy|produktu)|katalógové\s?číslo|kat\.\s?č\.|objednací\s?číslo|"
    r"артикул|код\s?товара|מק\"ט|رمز المنتج|商品編號|商品编号|商品番号|型番"
)
_LABEL_AND_VALUE = re.compile(
    r"^\s*(?:" + _LABEL + r")\s*[:#.\-–]?\s*([A-Za-z0-9][A-Za-z0-9._/\-]{1,39})\s*$", re.I
)
_LABEL_ONLY = re.compile(r"^\s*(?:" + _LABEL + r")\s*[:#.\-–]?\s*$", re.I)
_CODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/\-]{1,39}$")
_HAS_DIGIT = re.compile(r"\d")

_INPUT_NAMES = frozenset(
    {
        "sku",
        "asin",
        "productsku",
        "itemsku",
        "skuid",
        "productcode",
        "itemnumber",
        "articlenumber",
        "itemcode",
        "product_sku",
        "item_sku",
        "sku_id",
        "product_code",
        "item_number",
        "article_number",
    }
)
_QUERY_KEYS = frozenset(
    {
        "sku",
        "childsku",
        "skuid",
        "pid",
        "productid",
        "product_id",
        "itemid",
        "item_id",
        "item",
        "articleid",
        "art",
        "artnr",
    }
)
_PATH_CODE = re.compile(r"^(?:[a-z]{0,2})(\d{5,20})$|^([A-Z0-9]*\d[A-Z0-9]*)$")
_EXTENSIONS = re.compile(r"\.(?:html?|php|aspx?|jsp)$", re.I)


def clean_code(value: str | None) -> str | None:
    if not value:
        return None
    value = value.strip().strip(".,;:")
    if not _CODE.match(value) or not _HAS_DIGIT.search(value):
        return None
    return value


def code_from_label(text: str, following: str | None) -> str | None:
    """The code in "SKU: 1234", or after a bare "SKU:" label in ``following`` text."""
    if len(text) > 70:
        return None
    match = _LABEL_AND_VALUE.match(text)
    if match:
        return clean_code(match.group(1))
    if following is not None and _LABEL_ONLY.match(text):
        return clean_code(following.strip().split(" ")[0] if following.strip() else None)
    return None


# First three letters of every label, lower-cased: a cheap gate before the regexes.
_LABEL_STARTS = frozenset(
    """sku pro ite art bes ref réf cod cód kod kód šif cik var tuo pos ad anz num kat obj
    арт код מק\" رمز 商品 型番""".split()
)


def looks_like_label(text: str) -> bool:
    stripped = text.lstrip()
    if (
        len(stripped) > 70
        or stripped[:3].lower() not in _LABEL_STARTS
        and stripped[:2] not in ("ad", "商品", "型番")
    ):
        return False
    return bool(_LABEL_ONLY.match(stripped) or _LABEL_AND_VALUE.match(stripped))


# Elements whose class names a code ("product-code", "prd-code", "sku-code"...).
_CODE_CLASSES = lxml.etree.XPath("//@class[contains(., 'ode')]")


def sku_from_code_label(root: Any, region: Region) -> str | None:
    """A labelled code ("Product code: 83810610") in an element whose class names a code,
    inside the product's ``region``."""
    for attribute in _CODE_CLASSES(root)[:50]:
        el = attribute.getparent()
        if region.excludes(el):
            continue
        text = " ".join(text_of(el, 140).split())
        if text and looks_like_label(text):
            code = code_from_label(text, None)
            if code:
                return code
    return None


def sku_from_inputs(root: Any, region: Region) -> str | None:
    """The value of a hidden identifier field (the cart form's) inside ``region``."""
    for el in region.controls:
        if el.tag != "input" or (el.get("type") or "").lower() != "hidden":
            continue
        name = (el.get("name") or el.get("id") or "").lower()
        if name in _INPUT_NAMES and not region.excludes(el):
            code = clean_code(el.get("value"))
            if code:
                return code
    return None


def sku_from_url(url: str) -> str | None:
    """An identifier written in the URL, or None."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    for key, value in parse_qsl(parts.query):
        if key.lower() in _QUERY_KEYS:
            code = clean_code(value)
            if code:
                return code
    segments = [s for s in unquote(parts.path).split("/") if s]
    if not segments:
        return None
    last = _EXTENSIONS.sub("", segments[-1])
    token = re.split(r"[-_,.~]", last)[-1]
    match = _PATH_CODE.match(token)
    if not match:
        return None
    code = match.group(1) or match.group(2)
    if len(code) < 5 or len(code) > 30:
        return None
    return code
