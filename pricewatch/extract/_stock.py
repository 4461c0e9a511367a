"""Stock: the stock-state words of the major shop languages, and the product-level
evidence of a sell-out (buy controls and wording in the product's region, never a size
selector, a "notify me" widget or another product)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pricewatch.extract._region import Region
from pricewatch.extract._tree import hidden, text_of

# Checked before the in-stock words: "not available" contains "available".
OUT_OF_STOCK_PHRASES = (
    # en
    "out of stock",
    "sold out",
    "currently unavailable",
    "no longer available",
    "not available",
    "unavailable",
    "temporarily out",
    "not in stock",
    "no stock",
    "cannot be ordered",
    "cannot be purchased",
    "can't be purchased",
    "not orderable",
    # de
    "nicht verfügbar",
    "ausverkauft",
    "nicht lieferbar",
    "nicht auf lager",
    "nicht mehr verfügbar",
    "derzeit nicht",
    "vergriffen",
    "nicht bestellbar",
    # fr
    "épuisé",
    "epuise",
    "rupture de stock",
    "indisponible",
    "plus disponible",
    "non disponible",
    "en rupture",
    # it
    "esaurito",
    "non disponibile",
    "non più disponibile",
    # es / pt
    "agotado",
    "sin stock",
    "no disponible",
    "sin existencias",
    "esgotado",
    "indisponível",
    "sem estoque",
    "fora de estoque",
    # nl
    "uitverkocht",
    "niet op voorraad",
    "niet leverbaar",
    "niet beschikbaar",
    # pl / cs / sk / hu / ro / sl / lv
    "brak w magazynie",
    "niedostępny",
    "wyprzedany",
    "wyprzedane",
    "brak towaru",
    "nie je možné kúpiť",
    "nie je možné produkt kúpiť",
    "nelze koupit",
    "není možné koupit",
    "nie można kupić",
    "nedostupné",
    "nedostupný",
    "vyprodáno",
    "vypredané",
    "není skladem",
    "nie je skladom",
    "nincs készleten",
    "elfogyott",
    "stoc epuizat",
    "indisponibil",
    "nu este in stoc",
    "nu este în stoc",
    "ni na zalogi",
    "razprodano",
    "nav noliktavā",
    "izpārdots",
    # nordic
    "slutsåld",
    "slutsålt",
    "ikke på lager",
    "udsolgt",
    "utsolgt",
    "loppuunmyyty",
    "ei varastossa",
    "finns ej i lager",
    # ru / uk / tr / el
    "нет в наличии",
    "распродано",
    "товар закончился",
    "немає в наявності",
    "stokta yok",
    "tükendi",
    "εξαντλήθηκε",
    "μη διαθέσιμο",
    # ja / zh / ko / ar / he
    "在庫切れ",
    "売り切れ",
    "品切れ",
    "缺货",
    "售罄",
    "無貨",
    "품절",
    "غير متوفر",
    "نفذت الكمية",
    "نفذ من المخزون",
    "אזל מהמלאי",
    "אזל במלאי",
    # "is not / not / none in stock": the in-stock word "במלאי" follows the negation.
    "אינו במלאי",
    "אינם במלאי",
    "לא במלאי",
    "אין במלאי",
)
IN_STOCK_PHRASES = (
    "in stock",
    "available now",
    "auf lager",
    "sofort lieferbar",
    "lieferbar",
    "verfügbar",
    "en stock",
    "disponible",
    "disponibile",
    "op voorraad",
    "na stanie",
    "dostępny",
    "skladem",
    "na sklade",
    "skladom",
    "raktáron",
    "în stoc",
    "in stoc",
    "na zalogi",
    "noliktavā",
    "på lager",
    "i lager",
    "varastossa",
    "в наличии",
    "є в наявності",
    "stokta",
    "em estoque",
    "en existencia",
    "在庫あり",
    "有货",
    "재고 있음",
    "متوفر",
    "במלאי",
)
BUY_PHRASES = (
    "add to cart",
    "add to basket",
    "add to bag",
    "add to trolley",
    "add to your basket",
    "add to your bag",
    "add to your cart",
    "add to your trolley",
    "buy now",
    "buy it now",
    "in den warenkorb",
    "in den einkaufswagen",
    "jetzt kaufen",
    "ajouter au panier",
    "aggiungi al carrello",
    "añadir al carrito",
    "añadir a la cesta",
    "agregar al carrito",
    "adicionar ao carrinho",
    "comprar",
    "in winkelwagen",
    "do koszyka",
    "dodaj do koszyka",
    "do košíku",
    "do košíka",
    "kosárba",
    "adaugă în coș",
    "adauga in cos",
    "v košarico",
    "pievienot grozam",
    "lägg i varukorgen",
    "læg i kurv",
    "legg i handlekurv",
    "lisää ostoskoriin",
    "в корзину",
    "купить",
    "до кошика",
    "sepete ekle",
    "カートに入れる",
    "加入购物车",
    "加入購物車",
    "장바구니",
    "أضف إلى",
    "أضف الى",
    "הוסף לסל",
    "acheter",
    "add to order",
    "place bid",
    "make offer",
    "購買",
    "购买",
    "購入",
    "구매",
)

_OUT_RE = re.compile("|".join(re.escape(p) for p in OUT_OF_STOCK_PHRASES), re.I)
_IN_RE = re.compile("|".join(re.escape(p) for p in IN_STOCK_PHRASES), re.I)
_BUY_RE = re.compile("|".join(re.escape(p) for p in BUY_PHRASES), re.I)


def stock_from_text(text: str | None) -> str | None:
    """ "InStock"/"OutOfStock" for a short stock label, None when it says neither."""
    if not text:
        return None
    text = " ".join(text.split())
    if len(text) > 160:
        text = text[:160]
    if _OUT_RE.search(text):
        return "OutOfStock"
    if _IN_RE.search(text):
        return "InStock"
    return None


def says_out_of_stock(text: str) -> bool:
    return bool(_OUT_RE.search(text))


def says_buy(text: str) -> bool:
    return bool(_BUY_RE.search(text))


# Class/id names of buy controls ("add-to-cart", "btn-buy", "addtobasket"...).
BUY_NAMES = re.compile(
    r"add-?to-?(?:cart|basket|bag)|add_to_(?:cart|basket)|buy[-_]?now|buy[-_]?b(?:utto)?n|"
    r"btn[-_]?buy|"
    r"btn-?cart|buybox|addtocart|addtobasket|kaufen",
    re.I,
)


# --- product-level evidence --------------------------------------------------------------
# Widgets that speak about one size or variant, or offer to tell when it is back: their
# wording and their (disabled) buttons say nothing about the product as a whole.
_WIDGET_NAMES = re.compile(
    r"\bsizes?\b|size[-_]|[-_]size|variant|swatch|notify|back-?in-?stock|waitlist|"
    r"wait-?list|stock-?alert|restock|email-?when|subscribe",
    re.I,
)
_WIDGET_TAGS = frozenset({"select", "option", "datalist"})
_WIDGET_DEPTH = 5
_STOCK_NAME = re.compile(r"stock|availab", re.I)
_WORDING_LEVELS = 4  # levels above the title that still hold the product's own block


def in_widget(el: Any) -> bool:
    """``el`` belongs to a size/variant selector or a "notify me" widget."""
    node = el
    for _ in range(_WIDGET_DEPTH):
        if node is None:
            return False
        tag = node.tag if isinstance(node.tag, str) else ""
        if tag in _WIDGET_TAGS:
            return True
        names = f"{node.get('class') or ''} {node.get('id') or ''} {node.get('name') or ''}"
        if names.strip() and _WIDGET_NAMES.search(names):
            return True
        node = node.getparent()
    return False


# Names of a colour or option chooser, for stock labels only: a buy button may well sit in
# a block named for options (Magento's "product-options-bottom").
_CHOOSER_NAMES = re.compile(
    r"colou?rs?\b|colou?r[-_]|[-_]colou?r|chip|\boptions?\b|option[-_]", re.I
)
_CHOICE_INPUTS = frozenset({"radio", "checkbox"})
_CHOOSER_DEPTH = 4


def in_chooser(el: Any) -> bool:
    """The stock label ``el`` is one choice's ("XL: sold out", "Orange: out of stock"): it
    sits in a size/variant/"notify me" widget, in a colour or option chooser, or beside the
    radio button or checkbox of one choice. A choice sold out is not the product sold out."""
    if in_widget(el):
        return True
    node = el.getparent()
    for depth in range(_CHOOSER_DEPTH):
        if node is None:
            return False
        if depth < 2 and any(
            child.tag == "input" and (child.get("type") or "").lower() in _CHOICE_INPUTS
            for child in node
        ):
            return True
        names = f"{node.get('class') or ''} {node.get('id') or ''}"
        if names.strip() and _CHOOSER_NAMES.search(names):
            return True
        node = node.getparent()
    return False


def _control_label(el: Any) -> str:
    if el.tag == "input":
        if (el.get("type") or "").lower() not in ("submit", "button"):
            return ""
        return el.get("value") or el.get("aria-label") or ""
    return " ".join(text_of(el, 80).split()) or el.get("aria-label") or ""


def _disabled(el: Any) -> bool:
    return (
        el.get("disabled") is not None
        or "disabled" in (el.get("class") or "").split()
        or el.get("aria-disabled") == "true"
    )


def _in_control(el: Any) -> bool:
    """``el`` is a state label inside a link or button (shown or not by CSS)."""
    return any(
        anc.tag in ("a", "button") for _, anc in zip(range(3), el.iterancestors(), strict=False)
    )


@dataclass(slots=True)
class BuyControls:
    """The product's buy controls: how many are enabled, how many disabled, and whether a
    disabled one says, in words, that the product is sold out."""

    enabled: int = 0
    disabled: int = 0
    sold_out_wording: bool = False


def _product_buttons(region: Region) -> list[tuple[Any, str]]:
    """The buy buttons (buttons and inputs) of the product's region, with their labels."""
    out = []
    for el in region.controls:
        label = _control_label(el)
        if not label or len(label) > 40:
            continue
        submit = (el.get("type") or "submit").lower() == "submit"
        # A buy button, or the disabled submit button that says why it cannot buy.
        if not (says_buy(label) or (submit and _disabled(el) and says_out_of_stock(label))):
            continue
        if region.excludes(el) or in_widget(el) or hidden(el):
            continue
        out.append((el, label))
    return out


def _product_controls(root: Any, region: Region, links: bool = True) -> list[tuple[Any, str]]:
    """The buy buttons of the product's region, with their labels; with ``links``, also
    the links named as buy controls when no enabled button was found."""
    out = _product_buttons(region)
    if not links or any(not _disabled(el) for el, _ in out):
        return out
    for el in root.iter("a"):
        # A link is a buy control only when named one ("add-to-basket"); its text may hold
        # every state's label, shown one at a time by the shop's CSS.
        names = el.get("class")
        if not names or not BUY_NAMES.search(names):
            continue
        if region.excludes(el) or in_widget(el) or hidden(el):
            continue
        out.append((el, " ".join(text_of(el, 120).split())[:120] or "buy"))
    return out


def enabled_buy_buttons(region: Region) -> list[Any]:
    """The enabled, visible buy buttons (buttons and inputs) of the product's region."""
    return [el for el, _ in _product_buttons(region) if not _disabled(el)]


def buy_controls(root: Any, region: Region, links: bool = True) -> BuyControls:
    """The product region's buy controls (outside size selectors and "notify me"
    widgets), and whether a disabled one says the product is sold out; ``links``: also
    the links named as buy controls when no button is enabled."""
    controls = BuyControls()
    for el, label in _product_controls(root, region, links):
        if _disabled(el):
            controls.disabled += 1
            if says_out_of_stock(label):
                controls.sold_out_wording = True
        else:
            controls.enabled += 1
    return controls


def sold_out_wording(root: Any, region: Region) -> bool:
    """A stock label of the product's region (an element named for stock or availability
    in the block a few levels above the title, outside size selectors, "notify me" widgets
    and buy controls) says it is sold out."""
    # Near the product: the block a few levels above its title (the whole page without one).
    scope = region.title
    for _ in range(_WORDING_LEVELS):
        if scope is None or scope.getparent() is None:
            break
        scope = scope.getparent()
    named = (
        el
        for el in (scope if scope is not None else root).iter()
        if _STOCK_NAME.search(f"{el.get('class') or ''} {el.get('id') or ''}")
    )
    for _, el in zip(range(40), named, strict=False):
        text = " ".join(text_of(el, 200).split())
        if not text or len(text) > 160 or not says_out_of_stock(text):
            continue
        if region.excludes(el) or in_chooser(el) or hidden(el) or _in_control(el):
            continue
        return True
    return False
