-- Aggregates the CUR ingest writes beside the facts (same transaction), and the rollups
-- `gpuledger compute` materializes from them so pages never scan facts.

CREATE TABLE cost_pod_days (
    period TEXT NOT NULL,
    pod_id BIGINT NOT NULL,
    day BIGINT NOT NULL,
    gpu_hours REAL NOT NULL DEFAULT 0,
    gpu_cost_nanos BIGINT NOT NULL DEFAULT 0,
    cpu_cost_nanos BIGINT NOT NULL DEFAULT 0,
    memory_cost_nanos BIGINT NOT NULL DEFAULT 0,
    split_cost_nanos BIGINT NOT NULL DEFAULT 0,
    unused_cost_nanos BIGINT NOT NULL DEFAULT 0,
    net_cost_nanos BIGINT NOT NULL DEFAULT 0,
    public_on_demand_cost_nanos BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX cost_pod_days_period_idx ON cost_pod_days (period);

CREATE TABLE cost_gpu_pod_hours (
    period TEXT NOT NULL,
    pod_id BIGINT NOT NULL,
    hour BIGINT NOT NULL,
    gpu_hours REAL NOT NULL DEFAULT 0,
    gpu_cost_nanos BIGINT NOT NULL DEFAULT 0,
    pod_cost_nanos BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX cost_gpu_pod_hours_period_idx ON cost_gpu_pod_hours (period);

CREATE TABLE rollup_costs (
    period TEXT NOT NULL,
    day BIGINT NOT NULL,
    cluster TEXT NOT NULL DEFAULT '',
    namespace TEXT NOT NULL DEFAULT '',
    workload TEXT NOT NULL DEFAULT '',
    workload_class TEXT NOT NULL DEFAULT '',
    client TEXT NOT NULL DEFAULT '',
    team TEXT NOT NULL DEFAULT '',
    gpu_model TEXT NOT NULL DEFAULT '',
    purchase_option TEXT NOT NULL DEFAULT '',
    split_cost_nanos BIGINT NOT NULL DEFAULT 0,
    unused_cost_nanos BIGINT NOT NULL DEFAULT 0,
    net_cost_nanos BIGINT NOT NULL DEFAULT 0,
    public_on_demand_cost_nanos BIGINT NOT NULL DEFAULT 0,
    gpu_cost_nanos BIGINT NOT NULL DEFAULT 0,
    idle_gpu_cost_nanos BIGINT NOT NULL DEFAULT 0,
    gpu_hours_allocated REAL NOT NULL DEFAULT 0,
    gpu_hours_used REAL NOT NULL DEFAULT 0,
    gpu_hours_idle REAL NOT NULL DEFAULT 0,
    gpu_hours_unmeasured REAL NOT NULL DEFAULT 0,
    spot_gpu_hours REAL NOT NULL DEFAULT 0,
    peak_fb_used_mib REAL NOT NULL DEFAULT 0,
    requests REAL NOT NULL DEFAULT 0,
    prompt_tokens REAL NOT NULL DEFAULT 0,
    generation_tokens REAL NOT NULL DEFAULT 0,
    inference_hours BIGINT NOT NULL DEFAULT 0,
    inference_hours_above_p95 BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX rollup_costs_period_idx ON rollup_costs (period, day);

CREATE TABLE rollup_capacity (
    period TEXT NOT NULL,
    day BIGINT NOT NULL,
    cluster TEXT NOT NULL DEFAULT '',
    instance_type TEXT NOT NULL DEFAULT '',
    gpu_model TEXT NOT NULL DEFAULT '',
    purchase_option TEXT NOT NULL DEFAULT '',
    instance_hours REAL NOT NULL DEFAULT 0,
    gpu_hours_provisioned REAL NOT NULL DEFAULT 0,
    amortized_cost_micros BIGINT NOT NULL DEFAULT 0,
    public_on_demand_cost_micros BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX rollup_capacity_period_idx ON rollup_capacity (period, day);

CREATE TABLE rollup_heatmap (
    period TEXT NOT NULL,
    day BIGINT NOT NULL,
    hour_of_day BIGINT NOT NULL,
    gpu_hours_allocated REAL NOT NULL DEFAULT 0,
    gpu_hours_used REAL NOT NULL DEFAULT 0
);
CREATE INDEX rollup_heatmap_period_idx ON rollup_heatmap (period, day);

CREATE TABLE rollup_periods (
    period TEXT NOT NULL PRIMARY KEY,
    computed_at BIGINT NOT NULL DEFAULT 0,
    idle_threshold REAL NOT NULL DEFAULT 0,
    p95_cost_per_inference REAL NOT NULL DEFAULT 0,
    bill_unblended_micros BIGINT NOT NULL DEFAULT 0,
    bill_amortized_micros BIGINT NOT NULL DEFAULT 0,
    kubernetes_cost_nanos BIGINT NOT NULL DEFAULT 0,
    other_cost_micros BIGINT NOT NULL DEFAULT 0,
    unattributed_gpu_hours REAL NOT NULL DEFAULT 0
);

CREATE TABLE rollup_clients (
    period TEXT NOT NULL,
    client TEXT NOT NULL,
    share_policy TEXT NOT NULL DEFAULT '',
    markup_basis_points BIGINT NOT NULL DEFAULT 0,
    direct_cost_nanos BIGINT NOT NULL DEFAULT 0,
    gpu_cost_nanos BIGINT NOT NULL DEFAULT 0,
    shared_platform_nanos BIGINT NOT NULL DEFAULT 0,
    shared_idle_nanos BIGINT NOT NULL DEFAULT 0,
    markup_nanos BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX rollup_clients_period_idx ON rollup_clients (period);

CREATE TABLE rollup_opportunities (
    period TEXT NOT NULL,
    kind TEXT NOT NULL,
    namespace TEXT NOT NULL DEFAULT '',
    workload TEXT NOT NULL DEFAULT '',
    gpu_model TEXT NOT NULL DEFAULT '',
    purchase_option TEXT NOT NULL DEFAULT '',
    monthly_nanos BIGINT NOT NULL DEFAULT 0,
    evidence TEXT NOT NULL DEFAULT ''
);
CREATE INDEX rollup_opportunities_period_idx ON rollup_opportunities (period);
