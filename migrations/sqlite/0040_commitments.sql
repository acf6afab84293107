-- Each Savings Plan's and reservation's month, from the CUR's fee lines (issue 42): what it
-- is, its term, and what it cost and used. A period's rows are replaced with the period.
CREATE TABLE commitments (
    period TEXT NOT NULL,
    id TEXT NOT NULL,
    kind TEXT NOT NULL,
    offering TEXT NOT NULL DEFAULT '',
    family TEXT NOT NULL DEFAULT '',
    instance_type TEXT NOT NULL DEFAULT '',
    region TEXT NOT NULL DEFAULT '',
    purchase_term TEXT NOT NULL DEFAULT '',
    payment_option TEXT NOT NULL DEFAULT '',
    term_start BIGINT NOT NULL DEFAULT 0,
    term_end BIGINT NOT NULL DEFAULT 0,
    count BIGINT NOT NULL DEFAULT 0,
    hours DOUBLE PRECISION NOT NULL DEFAULT 0,
    fee_micros BIGINT NOT NULL DEFAULT 0,
    used_micros BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX commitments_period_idx ON commitments (period);
