-- The config version (pricewatch/configversion.py) of the crawl that observed each change
-- and each held observation, as products already has it: an anomaly in the history
-- traces back to the exact configuration that produced it. NULL for older rows.
ALTER TABLE price_changes ADD COLUMN config_version TEXT;
ALTER TABLE price_quarantine ADD COLUMN config_version TEXT;
