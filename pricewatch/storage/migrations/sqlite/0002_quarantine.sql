-- Confirm before publishing (pricewatch/quarantine.py): a suspicious change is held here
-- until a second fetch agrees; only then does it reach products and price_changes.

-- The lowest price published for the SKU in its current currency (TEXT, canonical form):
-- the `new_minimum` rule compares against it. Back-filled from the history.
ALTER TABLE products ADD COLUMN min_price TEXT;

UPDATE products SET min_price = (
    SELECT c.price FROM price_changes c
    WHERE c.url = products.url AND c.currency = products.currency
    ORDER BY CAST(c.price AS REAL), c.observed_at LIMIT 1
);
UPDATE products SET min_price = price WHERE min_price IS NULL;

-- One row per observation that was not published at once. status: held (waiting for a
-- confirming fetch), confirmed (published as the confirming fetch's change), rejected
-- (never published). reason: currency_change, ratio_up, ratio_down, new_minimum.
CREATE TABLE price_quarantine (
    id            INTEGER PRIMARY KEY,
    url           TEXT NOT NULL,
    sku           TEXT,
    price         TEXT NOT NULL,
    currency      TEXT NOT NULL,
    regular_price TEXT,
    availability  TEXT,
    raw_hash      TEXT NOT NULL,
    observed_at   TEXT NOT NULL,
    reason        TEXT NOT NULL,
    status        TEXT NOT NULL
        CONSTRAINT quarantine_status CHECK (status IN ('held', 'confirmed', 'rejected')),
    attempt       INTEGER NOT NULL,
    resolved_at   TEXT,
    -- A replayed observation adds no row.
    CONSTRAINT price_quarantine_url_observed UNIQUE (url, observed_at)
);

-- At most one open hold per SKU.
CREATE UNIQUE INDEX price_quarantine_open ON price_quarantine (url) WHERE status = 'held';
