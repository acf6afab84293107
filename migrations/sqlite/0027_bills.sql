-- Several bills a month (issue 40): a bill is one provider's charges to one billing account
-- for one billing period, in one format (the CUR, or FOCUS). A re-delivery replaces its own
-- bill and no other. Money is integer nano-units of the bill's own currency.
CREATE TABLE bills (
    period TEXT NOT NULL,
    provider TEXT NOT NULL,
    billing_account TEXT NOT NULL,
    format TEXT NOT NULL,
    billing_account_name TEXT NOT NULL DEFAULT '',
    -- 1.0, 1.1, 1.2 or 1.3 as the files' columns show it; empty for the CUR.
    focus_version TEXT NOT NULL DEFAULT '',
    currency TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT '',
    data_version TEXT NOT NULL DEFAULT '',
    rows_read BIGINT NOT NULL DEFAULT 0,
    billed_nanos BIGINT NOT NULL DEFAULT 0,
    effective_nanos BIGINT NOT NULL DEFAULT 0,
    list_nanos BIGINT NOT NULL DEFAULT 0,
    contracted_nanos BIGINT NOT NULL DEFAULT 0,
    -- What the files did that FOCUS does not allow but whose meaning is plain, as JSON.
    deviations TEXT NOT NULL DEFAULT '{}',
    ingested_at BIGINT NOT NULL,
    PRIMARY KEY (period, provider, billing_account, format)
);

-- A FOCUS bill's charges summed per day and what they can be grouped by.
CREATE TABLE bill_charges (
    period TEXT NOT NULL,
    provider TEXT NOT NULL,
    billing_account TEXT NOT NULL,
    day BIGINT NOT NULL,
    sub_account_id TEXT NOT NULL DEFAULT '',
    sub_account_name TEXT NOT NULL DEFAULT '',
    service_name TEXT NOT NULL DEFAULT '',
    service_category TEXT NOT NULL DEFAULT '',
    charge_category TEXT NOT NULL DEFAULT '',
    charge_class TEXT NOT NULL DEFAULT '',
    pricing_category TEXT NOT NULL DEFAULT '',
    commitment_discount_status TEXT NOT NULL DEFAULT '',
    region TEXT NOT NULL DEFAULT '',
    resource_type TEXT NOT NULL DEFAULT '',
    consumed_unit TEXT NOT NULL DEFAULT '',
    tags TEXT NOT NULL DEFAULT '{}',
    consumed_quantity REAL NOT NULL DEFAULT 0,
    charges BIGINT NOT NULL DEFAULT 0,
    billed_nanos BIGINT NOT NULL DEFAULT 0,
    effective_nanos BIGINT NOT NULL DEFAULT 0,
    list_nanos BIGINT NOT NULL DEFAULT 0,
    contracted_nanos BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX bill_charges_bill_idx ON bill_charges (period, provider, billing_account);

-- The CUR's bill is one of the month's bills too: the payer account it is to.
ALTER TABLE cost_periods ADD COLUMN billing_account TEXT NOT NULL DEFAULT '';
