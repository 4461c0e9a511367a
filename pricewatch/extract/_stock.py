"""Stock-state words of the major shop languages."""

from __future__ import annotations

import re

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
    # de
    "nicht verfügbar",
    "ausverkauft",
    "nicht lieferbar",
    "nicht auf lager",
    "nicht mehr verfügbar",
    "derzeit nicht",
    "vergriffen",
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
