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

-- Direct (split) cost by resource, so a client's direct cost breaks down into GPU, CPU and
-- memory (memory = split − GPU − CPU).
ALTER TABLE cost_pod_days ADD COLUMN gpu_split_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE cost_pod_days ADD COLUMN cpu_split_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_costs ADD COLUMN gpu_split_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_costs ADD COLUMN cpu_split_nanos BIGINT NOT NULL DEFAULT 0;

-- Chargeback of the whole bill: tagged non-Kubernetes cost, the shared infrastructure pool
-- (cluster cost no client claims and EC2 not allocated to pods), and the direct cost by
-- resource, category and workload class.
ALTER TABLE rollup_clients ADD COLUMN non_kubernetes_direct_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_clients ADD COLUMN shared_infrastructure_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_clients ADD COLUMN gpu_split_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_clients ADD COLUMN cpu_split_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_clients ADD COLUMN memory_split_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_clients ADD COLUMN storage_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_clients ADD COLUMN network_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_clients ADD COLUMN other_direct_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_clients ADD COLUMN training_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_clients ADD COLUMN inference_nanos BIGINT NOT NULL DEFAULT 0;
