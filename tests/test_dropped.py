"""Every request a component drops still ends its lease, and the crawl exits by itself.

One crawl walks every way an enabled component can drop a leased request:

- spider middlewares, no errback: ``UrlLengthMiddleware`` (a URL over ``URLLENGTH_LIMIT``),
  and a filtering middleware in ``process_start()`` and in ``process_spider_output()`` (a
  browser retry a callback yields), as ``DepthMiddleware`` would do (it cannot here: the
  spider's requests are at depth 0 or 1, and ``DEPTH_LIMIT`` 0 means no limit);
- downloader middlewares raising ``IgnoreRequest``: robots.txt, ``RedirectMiddleware``
  (endless redirects), ``HttpCompressionMiddleware`` (a gzip bomb over ``DOWNLOAD_MAXSIZE``),
  and any other (a marked request); ``OffsiteMiddleware`` needs ``allowed_domains``, which
  the spider does not set;
- the scheduler refusing a request (``request_dropped``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pricewatch import settings as project_settings

from . import dropping
from .helpers import scrapy
from .test_unfetchable import FAST, add_raw, entries


def test_every_dropped_request_ends_its_lease(sandbox_factory: Any, tmp_path: Path) -> None:
    sb = sandbox_factory(port=0, seed=5, shops=3, products=8, js_shops=1, js_weight="light")
    plain, loop, bomb = sb.html_shops
    sb.control(host=loop["host"], mode="redirect_loop")
    sb.control(host=bomb["host"], mode="bomb")
    products = sb.urls(host=plain["host"])
    good = products[:2]
    cases = {
        "url_length": products[2] + "?q=" + "x" * 2100,
        "robots": products[3].replace("/products/", "/private/products/", 1),
        "redirect_loop": sb.urls(host=loop["host"])[0],
        "bomb": sb.urls(host=bomb["host"])[0],
        "spider_mw_start": products[4] + "?m=" + dropping.DROP_IN_START,
        "spider_mw_output": sb.urls(host=sb.js_shops[0]["host"])[0],
        "downloader_mw": products[5] + "?m=" + dropping.IGNORE_IN_DOWNLOAD,
        "scheduler": products[6] + "?m=" + dropping.REFUSE_IN_SCHEDULER,
    }
    add_raw(tmp_path, [*good, *cases.values()])
    spider_mws = {
        **project_settings.SPIDER_MIDDLEWARES,
        "tests.dropping.DropMarkedSpiderMiddleware": 500,
    }
    downloader_mws = {
        **project_settings.DOWNLOADER_MIDDLEWARES,
        "tests.dropping.IgnoreMarkedDownloaderMiddleware": 450,
    }
    proc = scrapy(
        tmp_path,
        "crawl",
        "products",
        *FAST,
        *("-s", f"SPIDER_MIDDLEWARES={json.dumps(spider_mws)}"),
        *("-s", f"DOWNLOADER_MIDDLEWARES={json.dumps(downloader_mws)}"),
        *("-s", "SCHEDULER=tests.dropping.RefuseMarkedScheduler"),
        timeout=60,  # today's main never exits: the dropped leases stay outstanding
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["finish_reason"] == "finished"
    assert stats["pricewatch/outcome/ok"] == len(good)
    assert stats["pricewatch/outcome/skipped"] == 1
    assert stats["pricewatch/outcome/error"] == len(cases) - 1
    assert stats["pricewatch/reason/skipped/robots_txt"] == 1
    assert stats["pricewatch/reason/error/dropped"] == 4  # length, start, output, scheduler
    assert stats["pricewatch/leaseguard/dropped/spider_middleware"] == 3
    assert stats["pricewatch/leaseguard/dropped/scheduler"] == 1
    assert stats["pricewatch/reason/error/ignored"] == 2  # redirects, marked
    assert stats["pricewatch/reason/error/too_large"] == 1
    assert stats["urllength/request_ignored_count"] == 1
    # Every lease was completed: nothing is left in flight, every entry is rescheduled.
    for url, info in entries(tmp_path, [*good, *cases.values()]).items():
        assert info is not None and info.state == "scheduled", (url, info)
