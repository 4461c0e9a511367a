-- Confirm before publishing (pricewatch/quarantine.py): a suspicious change is held here
-- until a second fetch agrees; only then does it reach products and price_changes.

-- The lowest price published for the SKU in its current currency: the `new_minimum` rule
-- compares against it. Back-filled from the history.
ALTER TABLE products ADD COLUMN min_price numeric;

UPDATE products p SET min_price = coalesce(
    (SELECT min(c.price) FROM price_changes c
     WHERE c.url = p.url AND c.currency = p.currency),
    p.price
);

-- One row per observation that was not published at once. status: held (waiting for a
-- confirming fetch), confirmed (published as the confirming fetch's change), rejected
-- (never published). reason: currency_change, ratio_up, ratio_down, new_minimum.
CREATE TABLE price_quarantine (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url           text NOT NULL,
    sku           text,
    price         numeric NOT NULL,
    currency      char(3) NOT NULL,
    regular_price numeric,
    availability  text,
    raw_hash      text NOT NULL,
    observed_at   timestamptz NOT NULL,
    reason        text NOT NULL,
    status        text NOT NULL
        CONSTRAINT quarantine_status CHECK (status IN ('held', 'confirmed', 'rejected')),
    attempt       integer NOT NULL,
    resolved_at   timestamptz,
    -- A replayed observation adds no row.
    CONSTRAINT price_quarantine_url_observed UNIQUE (url, observed_at)
);

-- At most one open hold per SKU.
CREATE UNIQUE INDEX price_quarantine_open ON price_quarantine (url) WHERE status = 'held';
