"""The sandbox's trust cases (``pricewatch.sandbox._trust``): what the pages show and what
``/_truth`` says about them, checked from the server's side (no crawler involved)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from lxml import html as lxml_html

from pricewatch.sandbox import BackgroundSandbox, Sandbox
from pricewatch.sandbox._locale import BY_CURRENCY
from pricewatch.sandbox._trust import (
    CASES,
    GLITCH_FACTOR,
    GLITCH_FETCH,
    NO_PRICE_REASONS,
    ON_REQUEST,
    REC_STYLES,
)
from pricewatch.sandbox.cli import main as sandbox_main

CHROMIUM = Path("/usr/lib/chromium/chromium")
LD_XPATH = '//script[@type="application/ld+json"]/text()'
# Two HTML shops (three-decimal and zero-decimal currencies) and a JS-only shop.
OPTIONS: dict[str, Any] = {
    "seed": 3,
    "shops": 2,
    "js_shops": 1,
    "products": 12,
    "js_weight": "light",
    "cases": True,
    "recommendations": "mixed",
    "currencies": ["KWD", "JPY", "EUR"],
}


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


def get_json(url: str) -> Any:
    return json.loads(get(url))


@pytest.fixture(scope="module")
def shops() -> Iterator[BackgroundSandbox]:
    with BackgroundSandbox(**OPTIONS) as sb:
        yield sb


@pytest.fixture(scope="module")
def truth(shops: BackgroundSandbox) -> dict[str, dict[str, Any]]:
    return shops.truth()


def cases_of(
    truth: dict[str, dict[str, Any]], *, js: bool
) -> dict[str, tuple[str, dict[str, Any]]]:
    return {r["case"]: (u, r) for u, r in truth.items() if r.get("case") and r["js"] == js}


def page(url: str) -> Any:
    return lxml_html.fromstring(get(url))


def buybox_text(tree: Any) -> str:
    (box,) = tree.xpath('//div[@class="buybox"]')
    return " ".join(box.text_content().split())


def rec_blocks(tree: Any) -> list[Any]:
    return list(
        tree.xpath(
            '//section[contains(@class,"recommendations") or contains(@class,"related-products")]'
        )
    )


def ld_offers(tree: Any) -> list[Any]:
    found = []
    for text in tree.xpath(LD_XPATH):
        data = json.loads(text)
        if data.get("@type") == "Product":
            found.append(data["offers"])
    return found


def test_every_shop_has_every_case_after_its_ordinary_products(
    shops: BackgroundSandbox, truth: dict[str, dict[str, Any]]
) -> None:
    for shop in shops.shops:
        mine = [r for u, r in truth.items() if r["host"] == shop["host"]]
        assert [r.get("case") for r in mine] == [None] * 12 + list(CASES)
        assert shop["products"] == 12 + len(CASES)
    # The ordinary products are the ones a sandbox without cases has.
    with BackgroundSandbox(**{**OPTIONS, "cases": False}) as plain:
        before = {u.split("/", 3)[3]: r for u, r in plain.truth().items()}
    after = {u.split("/", 3)[3]: r for u, r in truth.items() if not r.get("case")}
    strip = ("api_url",)
    assert {k: {f: v for f, v in r.items() if f not in strip} for k, r in after.items()} == {
        k: {f: v for f, v in r.items() if f not in strip} for k, r in before.items()
    }


def test_three_decimal_and_zero_decimal_shops(
    shops: BackgroundSandbox, truth: dict[str, dict[str, Any]]
) -> None:
    assert [s["currency"] for s in shops.shops] == ["KWD", "JPY", "EUR"]
    kwd = [r for r in truth.values() if r["currency"] == "KWD" and r["price"]]
    assert all(re.fullmatch(r"\d+\.\d{3}", r["price"]) for r in kwd)
    assert any(not r["price"].endswith("0") for r in kwd)  # all three digits in use
    jpy = [r for r in truth.values() if r["currency"] == "JPY" and r["price"]]
    assert all(re.fullmatch(r"\d+", r["price"]) for r in jpy)
    loc = BY_CURRENCY["KWD"]
    assert loc.display(Decimal("423.923")) == "423.923 KD"
    assert loc.display(Decimal("123456.789")) == "123,456.789 KD"
    assert BY_CURRENCY["OMR"].display(Decimal("123456.789")) == "123,456.789 OMR"
    url, rec = next((u, r) for u, r in truth.items() if r["currency"] == "KWD" and r["price"])
    assert loc.display(Decimal(rec["price"])) in get(url)


@pytest.mark.parametrize(
    ("case", "raw", "reason"),
    [
        ("on_request_zero", 0, "price_not_positive"),
        ("on_request_negative", "-5.00", "price_not_positive"),
        ("on_request_nan", "NaN", "price_not_finite"),
        ("on_request_infinity", "Infinity", "price_not_finite"),
        ("on_request_overflow", "1e400", "price_out_of_range"),
        ("on_request_text", "call for price", "price_not_a_number"),
        ("on_request_missing", None, "price_missing"),
    ],
)
def test_price_on_request_pages_carry_an_invalid_structured_offer(
    truth: dict[str, dict[str, Any]], case: str, raw: Any, reason: str
) -> None:
    assert set(ON_REQUEST) == set(NO_PRICE_REASONS)
    for js in (False, True):
        url, rec = cases_of(truth, js=js)[case]
        assert rec["price"] is None and rec["expect"] == "no_price"
        assert rec["no_price_reason"] == reason
        assert rec["structured_price"] == raw
        tree = page(url)
        (offer,) = ld_offers(tree)
        assert offer.get("price") == raw and offer["priceCurrency"] == rec["currency"]
        assert ("price" in offer) == (raw is not None)
        # Nothing priced in the page's own offer area, other products' prices beside it.
        recs = rec_blocks(tree)
        assert recs and re.search(r"\d", recs[0].text_content())
        if js:
            api = get_json(url.split("/products/")[0] + f"/api/offer/{rec['sku']}")
            assert api["display"]["price"] == "Price on request"
            own = None if raw is None else {"amount": raw, "currency": rec["currency"]}
            assert api["price"] == own  # the same invalid amount as its JSON-LD
        else:
            assert "Price on request" in buybox_text(tree)
            assert not re.search(r"\d", tree.xpath('//div[contains(@class,"price-box")]')[0]
                                 .text_content())  # fmt: skip


def test_net_and_gross_prices_side_by_side(truth: dict[str, dict[str, Any]]) -> None:
    for case, first_kind in (("net_first", "net"), ("gross_first", "gross")):
        for js in (False, True):
            url, rec = cases_of(truth, js=js)[case]
            loc = BY_CURRENCY[rec["currency"]]
            assert rec["price_kind"] == first_kind
            assert rec["other_price_kind"] == ("gross" if first_kind == "net" else "net")
            net, gross = (
                (rec["price"], rec["other_price"])
                if first_kind == "net"
                else (rec["other_price"], rec["price"])
            )
            assert Decimal(gross) > Decimal(net)
            first, second = (
                loc.display(Decimal(rec["price"])),
                loc.display(Decimal(rec["other_price"])),
            )
            if js:
                api = get_json(url.split("/products/")[0] + f"/api/offer/{rec['sku']}")
                assert api["price"]["amount"] == rec["price"]
                assert api["other_price"]["amount"] == rec["other_price"]
                assert api["display"]["price"].startswith(first)
                assert api["display"]["other_price"].startswith(second)
                continue
            text = buybox_text(page(url))
            assert text.index(first) < text.index(second)
            assert "excl. VAT" in text and "incl." in text


def test_sale_price_beside_a_struck_list_price_shown_first(
    truth: dict[str, dict[str, Any]],
) -> None:
    for case in ("sale_list_first", "sale_styled"):
        url, rec = cases_of(truth, js=False)[case]
        loc = BY_CURRENCY[rec["currency"]]
        assert Decimal(rec["regular_price"]) > Decimal(rec["price"])
        tree = page(url)
        text = buybox_text(tree)
        sale, listed = (
            loc.display(Decimal(rec["price"])),
            loc.display(Decimal(rec["regular_price"])),
        )
        assert text.index(listed) < text.index(sale)
        (box,) = tree.xpath('//div[@class="price-box"]')
        struck = box.xpath('.//s | .//*[contains(@style,"line-through")]')
        assert [" ".join(s.text_content().split()) for s in struck] == [listed]
        url, rec = cases_of(truth, js=True)[case]
        tree = page(url)
        (was,) = tree.xpath('//*[@id="was"]')
        assert was.tag == "del" and was.getnext().get("id") == "price"  # list price first


def test_unavailable_sizes_of_a_product_in_stock(truth: dict[str, dict[str, Any]]) -> None:
    for case in ("sizes", "sizes_offers"):
        for js in (False, True):
            url, rec = cases_of(truth, js=js)[case]
            assert rec["availability"] == "InStock"
            states = Counter(rec["sizes"].values())
            assert states["OutOfStock"] >= 2 and states["InStock"] >= 2
            tree = page(url)
            disabled = tree.xpath('//button[contains(@class,"size--unavailable")][@disabled]')
            assert sorted(b.text.strip() for b in disabled) == sorted(
                s for s, v in rec["sizes"].items() if v == "OutOfStock"
            )
            assert "Notify me when available" in get(url)
            if js:
                continue
            assert tree.xpath('//form[@class="add-to-cart"]/button[not(@disabled)]')
            if case == "sizes_offers":
                (offers,) = ld_offers(tree)
                assert {o["availability"].rsplit("/", 1)[1] for o in offers} == {
                    "InStock",
                    "OutOfStock",
                }
            else:
                assert tree.xpath('//*[@itemprop="availability"]/@href') == [
                    "https://schema.org/InStock"
                ]


def test_sold_out_products_say_so_in_their_buy_box(truth: dict[str, dict[str, Any]]) -> None:
    for case in ("sold_out", "sold_out_visible"):
        url, rec = cases_of(truth, js=False)[case]
        assert rec["availability"] == "OutOfStock" and rec["price"]
        tree = page(url)
        assert "Sold out" in buybox_text(tree)
        assert tree.xpath('//form[@class="add-to-cart"]/button[@disabled]')
        offers = ld_offers(tree)
        if case == "sold_out":
            assert offers[0]["availability"] == "https://schema.org/OutOfStock"
        else:
            assert offers == [] and 'itemprop="price"' not in get(url)
        url, rec = cases_of(truth, js=True)[case]
        api = get_json(url.split("/products/")[0] + f"/api/offer/{rec['sku']}")
        assert api["availability"] == "OutOfStock"


def test_glitch_shows_ten_times_the_price_on_one_fetch_only() -> None:
    with BackgroundSandbox(**OPTIONS) as sb:
        for js in (False, True):
            url, rec = cases_of(sb.truth(), js=js)["glitch"]
            loc = BY_CURRENCY[rec["currency"]]
            assert rec["glitch"] == {
                "fetch": GLITCH_FETCH,
                "factor": GLITCH_FACTOR,
                "price": loc.machine(Decimal(rec["price"]) * GLITCH_FACTOR),
                "fetches": 0,
            }
            seen = []
            for _ in range(4):
                if js:
                    api = url.split("/products/")[0] + f"/api/offer/{rec['sku']}"
                    seen.append(get_json(api)["price"]["amount"])
                else:
                    (offer,) = ld_offers(page(url))
                    seen.append(offer["price"])
            real, wrong = rec["price"], rec["glitch"]["price"]
            assert seen == [real, wrong, real, real]
            after = sb.truth()[url]
            assert after["price"] == real and after["glitch"]["fetches"] == 4
        # A reset starts the count again.
        sb.control(reset=True)
        url, rec = cases_of(sb.truth(), js=False)["glitch"]
        assert rec["glitch"]["fetches"] == 0


def test_mixed_recommendations_carry_other_products_prices_in_every_style(
    truth: dict[str, dict[str, Any]],
) -> None:
    styles: Counter[str] = Counter()
    by_sku = {r["sku"]: r for r in truth.values()}
    for url, rec in truth.items():
        if rec["disallowed"]:
            continue
        body = get(url)
        tree = lxml_html.fromstring(body)
        blocks = rec_blocks(tree)
        assert blocks, url
        assert re.search(r"\d", blocks[0].text_content()), url
        if tree.xpath('//li[@itemscope][@itemtype="https://schema.org/Product"]'):
            styles["microdata"] += 1
            assert not tree.xpath("//li[@itemscope][ancestor::main]")
            assert tree.xpath('//li[@itemscope]//*[@itemprop="price"]/@content')
        elif '"ItemList"' in body:
            styles["jsonld"] += 1
            (items,) = [json.loads(t) for t in tree.xpath(LD_XPATH) if '"ItemList"' in t]
            for element in items["itemListElement"]:
                item = element["item"]
                assert item["offers"]["price"] == by_sku[item["sku"]]["price"]
                assert item["sku"] != rec["sku"]
        elif tree.xpath('//aside[@class="recently-viewed"]'):
            styles["recent"] += 1
        else:
            styles["cards"] += 1
    assert set(styles) == set(REC_STYLES)


def test_plain_recommendations_keep_js_pages_free_of_prices() -> None:
    with BackgroundSandbox(**{**OPTIONS, "recommendations": "plain"}) as sb:
        truth = sb.truth()
        for url, rec in list(truth.items())[::5]:
            tree = page(url)
            if rec["js"]:
                assert not tree.xpath('//*[contains(@class,"price")][text()]'), url
            else:
                assert not tree.xpath("//li[@itemscope]")
                assert '"ItemList"' not in get(url)


def test_options_are_checked_and_reachable_from_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(ValueError, match="recommendations must be one of .*, got 'some'"):
        Sandbox(recommendations="some")
    with pytest.raises(ValueError, match="currencies must be among .*, got 'XYZ'"):
        Sandbox(currencies=["XYZ"])
    assert sandbox_main(["--currencies", "EUR,XYZ"]) == 2
    assert "currencies must be among" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sandbox_main(["--recommendations", "some"])


def test_default_sandbox_has_no_cases() -> None:
    with BackgroundSandbox(shops=1, products=5) as sb:
        assert not any("case" in r for r in sb.truth().values())
        (url,) = sb.urls()[:1]
        with pytest.raises(urllib.error.HTTPError):
            get(url.rsplit("/", 1)[0] + "/no-such-product")


# Read at once: whether the offer JSON was shown, the price node, the recommendations.
BEFORE_LOAD_JS = """() => [
  document.getElementById("app").getAttribute("data-loaded") === "1",
  document.getElementById("price").textContent,
  document.querySelector(".recommendations").textContent]"""


async def test_js_case_pages_render_what_the_truth_says_in_a_browser() -> None:
    """In Chromium, a JS-only shop's case pages show the product's own price only after its
    offer JSON arrives, while the recommendations' prices are there from the start."""
    from playwright.async_api import async_playwright

    options = {**OPTIONS, "shops": 0, "js_shops": 1, "currencies": ["EUR"], "js_delay": 1.0}
    sandbox = Sandbox(**options)
    await sandbox.start()
    try:
        cases = cases_of(sandbox.truth(), js=True)
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=str(CHROMIUM), headless=True)
            try:
                page = await browser.new_page()
                for case in ("net_first", "on_request_nan", "sale_list_first", "sold_out"):
                    url, rec = cases[case]
                    loc = BY_CURRENCY[rec["currency"]]
                    await page.goto(url, wait_until="domcontentloaded")
                    loaded, price, recs = await page.evaluate(BEFORE_LOAD_JS)
                    assert loaded or price == ""  # nothing of its own before the JSON
                    assert re.search(r"\d", recs)  # other products' prices from the start
                    await page.wait_for_selector('#app[data-loaded="1"]', timeout=5000)
                    shown = await page.text_content("#price") or ""
                    if rec["price"] is None:
                        assert shown == "Price on request"
                        continue
                    assert shown.startswith(loc.display(Decimal(rec["price"])))
                    if case == "net_first":
                        other = await page.text_content("#other-price") or ""
                        assert other.startswith(loc.display(Decimal(rec["other_price"])))
                    if case == "sale_list_first":
                        was = loc.display(Decimal(rec["regular_price"]))
                        assert await page.text_content("#was") == was
                    stock = await page.text_content("#availability")
                    assert stock == ("Out of stock" if case == "sold_out" else "In stock")
            finally:
                await browser.close()
    finally:
        await sandbox.stop()
