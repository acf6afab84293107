-- Exchange rates with the month they take effect (issue 40): 1 from_currency = rate
-- to_currency from effective_from on, until a later version of the same pair. The rate is
-- kept as given and in parts per billion.
CREATE TABLE fx_rates (
    from_currency TEXT NOT NULL,
    to_currency TEXT NOT NULL,
    effective_from TEXT NOT NULL,
    rate TEXT NOT NULL,
    rate_ppb BIGINT NOT NULL,
    source TEXT NOT NULL DEFAULT '',
    set_at BIGINT NOT NULL,
    PRIMARY KEY (from_currency, to_currency, effective_from)
);
