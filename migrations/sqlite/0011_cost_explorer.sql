-- The bill per day, service and usage account: every line but the EKS split rows, tax under
-- the service `Tax` as Cost Explorer shows it. What the Cost Explorer cross-check compares.
CREATE TABLE bill_days (
    period TEXT NOT NULL,
    day BIGINT NOT NULL,
    service TEXT NOT NULL,
    usage_account_id TEXT NOT NULL DEFAULT '',
    unblended_micros BIGINT NOT NULL DEFAULT 0,
    amortized_micros BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (period, day, service, usage_account_id)
);

-- Cost Explorer's daily cost per service and linked account, in nano-dollars, exactly as
-- its decimal strings said.
CREATE TABLE ce_costs (
    day BIGINT NOT NULL,
    service TEXT NOT NULL,
    usage_account_id TEXT NOT NULL DEFAULT '',
    unblended_nanos BIGINT NOT NULL DEFAULT 0,
    amortized_nanos BIGINT NOT NULL DEFAULT 0,
    net_amortized_nanos BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (day, service, usage_account_id)
);

-- Every day fetched from Cost Explorer (a day without cost too), when, and whether Cost
-- Explorer still called it estimated: what decides which days a next run asks for again.
CREATE TABLE ce_days (
    day BIGINT PRIMARY KEY,
    fetched_at BIGINT NOT NULL,
    estimated BIGINT NOT NULL DEFAULT 0
);

-- Linked accounts' names as Cost Explorer gave them.
CREATE TABLE ce_accounts (
    account_id TEXT PRIMARY KEY,
    name TEXT NOT NULL DEFAULT ''
);
