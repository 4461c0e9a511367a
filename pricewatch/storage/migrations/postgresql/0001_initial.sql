-- Store schema, PostgreSQL. Money is numeric (unconstrained: it keeps the scale it was
-- given, see pricewatch/storage/_values.py), currencies char(3), times timestamptz.
-- CHECK constraint names are the reason codes of rejected rows.

CREATE TABLE products (
    url             text PRIMARY KEY,
    domain          text NOT NULL,
    sku             text,
    price           numeric NOT NULL
        CONSTRAINT price_nonnegative CHECK (price >= 0)
        CONSTRAINT price_finite CHECK (price < 'Infinity'),
    currency        char(3) NOT NULL
        CONSTRAINT currency_format CHECK (currency ~ '^[A-Z]{3}$'),
    regular_price   numeric
        CONSTRAINT regular_price_nonnegative CHECK (regular_price >= 0)
        CONSTRAINT regular_price_finite CHECK (regular_price < 'Infinity'),
    availability    text,
    name            text,
    source          text,
    raw_hash        text NOT NULL,
    config_version  text,
    first_seen_at   timestamptz NOT NULL,
    last_checked_at timestamptz NOT NULL,
    last_changed_at timestamptz NOT NULL
)
-- Every observation updates its row (last_checked_at): free space in each page lets
-- PostgreSQL update in place (HOT) without touching the indexes.
WITH (fillfactor = 75);

-- `scrapy prices --domain D` and latest(domain): rows of one domain in url order.
CREATE INDEX products_domain_url ON products (domain, url);
-- history(sku)
CREATE INDEX products_sku ON products (sku) WHERE sku IS NOT NULL;

CREATE TABLE price_changes (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url           text NOT NULL,
    sku           text,
    price         numeric NOT NULL
        CONSTRAINT price_nonnegative CHECK (price >= 0)
        CONSTRAINT price_finite CHECK (price < 'Infinity'),
    currency      char(3) NOT NULL
        CONSTRAINT currency_format CHECK (currency ~ '^[A-Z]{3}$'),
    regular_price numeric
        CONSTRAINT regular_price_nonnegative CHECK (regular_price >= 0)
        CONSTRAINT regular_price_finite CHECK (regular_price < 'Infinity'),
    availability  text,
    raw_hash      text NOT NULL,
    observed_at   timestamptz NOT NULL,
    -- One change per SKU and instant: a replayed batch adds no row; also history(url).
    CONSTRAINT price_changes_url_observed UNIQUE (url, observed_at)
);

CREATE INDEX price_changes_sku ON price_changes (sku, observed_at) WHERE sku IS NOT NULL;
