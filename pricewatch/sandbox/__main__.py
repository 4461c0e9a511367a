"""``python -m pricewatch.sandbox``: see ``pricewatch.sandbox.cli``."""

from __future__ import annotations

import sys

from pricewatch.sandbox.cli import main

sys.exit(main())
