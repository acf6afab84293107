-- Every dollar of the bill (issue 12): the amortized bill is Kubernetes + EC2 not allocated
-- to pods + other cost, exactly; discounts, credits, refunds and tax are bill lines outside
-- it; non-Kubernetes cost keeps its account, cluster and allocation tags.
ALTER TABLE cost_periods ADD COLUMN net_amortized_micros BIGINT;
ALTER TABLE cost_periods ADD COLUMN kubernetes_micros BIGINT NOT NULL DEFAULT 0;
ALTER TABLE cost_periods ADD COLUMN unallocated_ec2_micros BIGINT NOT NULL DEFAULT 0;
ALTER TABLE cost_periods ADD COLUMN currency TEXT NOT NULL DEFAULT 'USD';
-- Periods stored by an older reader are read again on the next ingest.
ALTER TABLE cost_periods ADD COLUMN reader_version BIGINT NOT NULL DEFAULT 1;

ALTER TABLE other_costs ADD COLUMN usage_account_id TEXT NOT NULL DEFAULT '';
ALTER TABLE other_costs ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
ALTER TABLE other_costs ADD COLUMN tags TEXT NOT NULL DEFAULT '{}';

-- The whole period's lines per invoice, billing entity, account, service and line type.
CREATE TABLE bill_lines (
    period TEXT NOT NULL,
    billing_entity TEXT NOT NULL DEFAULT '',
    invoice_id TEXT NOT NULL DEFAULT '',
    usage_account_id TEXT NOT NULL DEFAULT '',
    service TEXT NOT NULL DEFAULT '',
    line_item_type TEXT NOT NULL DEFAULT '',
    -- usage (usage and fees: the amortized bill), discount, credit, refund or tax.
    category TEXT NOT NULL DEFAULT 'usage',
    unblended_micros BIGINT NOT NULL DEFAULT 0,
    amortized_micros BIGINT NOT NULL DEFAULT 0,
    net_amortized_micros BIGINT
);
CREATE INDEX bill_lines_period_idx ON bill_lines (period);

ALTER TABLE rollup_periods ADD COLUMN unallocated_ec2_micros BIGINT NOT NULL DEFAULT 0;
