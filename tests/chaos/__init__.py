"""The chaos suite: crawls under SIGKILL, backend restarts, a hostile shop and a hostile
seed file, each checked from the server's side and the stores' own tables.

Every scenario ends with the same checks (:mod:`tests.chaos.checks`): every lease
completed (nothing in flight or dead-lettered in the frontier), nothing stored wrong (each
stored price is the shop's true price, one history row per SKU), and the crawl exiting on
its own. ``PRICEWATCH_CHAOS_KILLS`` sets how many random SIGKILL points each backend gets:
2 by default, to keep ``make test`` short; the full run is ``PRICEWATCH_CHAOS_KILLS=10``.
"""
