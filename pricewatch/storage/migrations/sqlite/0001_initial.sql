-- Store schema, SQLite. Money is TEXT in canonical fixed-point form (see
-- pricewatch/storage/_values.py), times are ISO-8601 UTC text with microseconds.
-- CHECK constraint names are the reason codes of rejected rows.

CREATE TABLE products (
    url             TEXT PRIMARY KEY,
    domain          TEXT NOT NULL,
    sku             TEXT,
    price           TEXT NOT NULL
        CONSTRAINT price_finite CHECK (price GLOB '*[0-9]*' AND price NOT GLOB '*[^0-9.-]*')
        CONSTRAINT price_nonnegative CHECK (substr(price, 1, 1) <> '-'),
    currency        TEXT NOT NULL
        CONSTRAINT currency_format CHECK (length(currency) = 3 AND currency NOT GLOB '*[^A-Z]*'),
    regular_price   TEXT
        CONSTRAINT regular_price_finite
            CHECK (regular_price GLOB '*[0-9]*' AND regular_price NOT GLOB '*[^0-9.-]*')
        CONSTRAINT regular_price_nonnegative CHECK (substr(regular_price, 1, 1) <> '-'),
    availability    TEXT,
    name            TEXT,
    source          TEXT,
    raw_hash        TEXT NOT NULL,
    config_version  TEXT,
    first_seen_at   TEXT NOT NULL,
    last_checked_at TEXT NOT NULL,
    last_changed_at TEXT NOT NULL
);

-- `scrapy prices --domain D` and latest(domain): rows of one domain in url order.
CREATE INDEX products_domain_url ON products (domain, url);
-- history(sku)
CREATE INDEX products_sku ON products (sku) WHERE sku IS NOT NULL;

CREATE TABLE price_changes (
    id            INTEGER PRIMARY KEY,
    url           TEXT NOT NULL,
    sku           TEXT,
    price         TEXT NOT NULL
        CONSTRAINT price_finite CHECK (price GLOB '*[0-9]*' AND price NOT GLOB '*[^0-9.-]*')
        CONSTRAINT price_nonnegative CHECK (substr(price, 1, 1) <> '-'),
    currency      TEXT NOT NULL
        CONSTRAINT currency_format CHECK (length(currency) = 3 AND currency NOT GLOB '*[^A-Z]*'),
    regular_price TEXT
        CONSTRAINT regular_price_finite
            CHECK (regular_price GLOB '*[0-9]*' AND regular_price NOT GLOB '*[^0-9.-]*')
        CONSTRAINT regular_price_nonnegative CHECK (substr(regular_price, 1, 1) <> '-'),
    availability  TEXT,
    raw_hash      TEXT NOT NULL,
    observed_at   TEXT NOT NULL,
    -- One change per SKU and instant: a replayed batch adds no row; also history(url).
    CONSTRAINT price_changes_url_observed UNIQUE (url, observed_at)
);

CREATE INDEX price_changes_sku ON price_changes (sku, observed_at) WHERE sku IS NOT NULL;
