-- gpuledger schema, Postgres flavour. Table and column names match
-- migrations/sqlite/0001_init.sql exactly: both backends run the same statements
-- (src/store/sql.rs). Money is integer micro-dollars, time is UTC epoch seconds.
-- Text columns the store sorts by are COLLATE "C" (byte order, as in SQLite), so both
-- backends return rows in the same order whatever the database's locale.
-- Never edit this file once released; add 0002_*.sql instead.

CREATE TABLE ingest_runs (
    id BIGSERIAL PRIMARY KEY,
    kind TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL DEFAULT '',
    period TEXT NOT NULL DEFAULT '',
    data_version TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'running',
    rows_read BIGINT NOT NULL DEFAULT 0,
    rows_written BIGINT NOT NULL DEFAULT 0,
    started_at BIGINT NOT NULL,
    finished_at BIGINT,
    error TEXT,
    reconciliation TEXT
);
CREATE INDEX ingest_runs_kind_period_idx ON ingest_runs (kind, period);

CREATE TABLE cost_periods (
    period TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    data_version TEXT NOT NULL DEFAULT '',
    bill_unblended_micros BIGINT NOT NULL DEFAULT 0,
    bill_amortized_micros BIGINT NOT NULL DEFAULT 0,
    -- Counted while the period is written, so listing periods never scans the facts.
    cost_fact_rows BIGINT NOT NULL DEFAULT 0,
    ingested_at BIGINT NOT NULL
);

-- The fact tables carry no foreign key to cost_periods: a period is replaced whole in one
-- transaction, and a per-row check would slow the bulk insert for nothing.
-- A pod as the bill names it, once per period: the strings every fact of the pod shares,
-- kept out of cost_facts so a 10-million-row month stays small (normalized on write, joined
-- back on read). A pod runs on one node, so its instance belongs here too.
CREATE TABLE cost_pods (
    period TEXT NOT NULL,
    pod_id BIGINT NOT NULL,
    cluster TEXT COLLATE "C" NOT NULL DEFAULT '',
    namespace TEXT COLLATE "C" NOT NULL DEFAULT '',
    workload TEXT COLLATE "C" NOT NULL DEFAULT '',
    workload_type TEXT NOT NULL DEFAULT '',
    pod TEXT COLLATE "C" NOT NULL DEFAULT '',
    node TEXT NOT NULL DEFAULT '',
    instance_id TEXT COLLATE "C" NOT NULL DEFAULT '',
    instance_type TEXT NOT NULL DEFAULT '',
    gpu_model TEXT NOT NULL DEFAULT '',
    purchase_option TEXT NOT NULL DEFAULT '',
    labels TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (period, pod_id)
);
CREATE INDEX cost_pods_namespace_idx ON cost_pods (period, namespace);

-- One pod's share of one resource of its node for one hour (split cost allocation row).
CREATE TABLE cost_facts (
    period TEXT NOT NULL,
    pod_id BIGINT NOT NULL,
    hour BIGINT NOT NULL,
    resource TEXT COLLATE "C" NOT NULL DEFAULT '',
    reserved_usage DOUBLE PRECISION NOT NULL DEFAULT 0,
    actual_usage DOUBLE PRECISION NOT NULL DEFAULT 0,
    split_usage DOUBLE PRECISION NOT NULL DEFAULT 0,
    split_usage_ratio DOUBLE PRECISION NOT NULL DEFAULT 0,
    split_cost_nanos BIGINT NOT NULL DEFAULT 0,
    unused_cost_nanos BIGINT NOT NULL DEFAULT 0,
    net_split_cost_nanos BIGINT NOT NULL DEFAULT 0,
    net_unused_cost_nanos BIGINT NOT NULL DEFAULT 0,
    public_on_demand_split_cost_nanos BIGINT NOT NULL DEFAULT 0,
    public_on_demand_unused_cost_nanos BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX cost_facts_period_hour_idx ON cost_facts (period, hour);

CREATE TABLE instance_hours (
    period TEXT NOT NULL,
    hour BIGINT NOT NULL,
    cluster TEXT NOT NULL DEFAULT '',
    instance_id TEXT COLLATE "C" NOT NULL DEFAULT '',
    instance_type TEXT NOT NULL DEFAULT '',
    gpu_model TEXT NOT NULL DEFAULT '',
    gpu_count BIGINT NOT NULL DEFAULT 0,
    vcpu BIGINT NOT NULL DEFAULT 0,
    memory_gib BIGINT NOT NULL DEFAULT 0,
    purchase_option TEXT NOT NULL DEFAULT '',
    usage_hours DOUBLE PRECISION NOT NULL DEFAULT 0,
    unblended_cost_micros BIGINT NOT NULL DEFAULT 0,
    amortized_cost_micros BIGINT NOT NULL DEFAULT 0,
    net_amortized_cost_micros BIGINT NOT NULL DEFAULT 0,
    public_on_demand_cost_micros BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX instance_hours_period_idx ON instance_hours (period);

CREATE TABLE other_costs (
    period TEXT NOT NULL,
    day BIGINT NOT NULL,
    service TEXT COLLATE "C" NOT NULL DEFAULT '',
    line_item_type TEXT COLLATE "C" NOT NULL DEFAULT '',
    usage_type TEXT COLLATE "C" NOT NULL DEFAULT '',
    unblended_cost_micros BIGINT NOT NULL DEFAULT 0,
    amortized_cost_micros BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX other_costs_period_idx ON other_costs (period);

CREATE TABLE gpu_usage (
    hour BIGINT NOT NULL,
    hostname TEXT COLLATE "C" NOT NULL DEFAULT '',
    gpu_uuid TEXT COLLATE "C" NOT NULL DEFAULT '',
    gpu_instance TEXT COLLATE "C" NOT NULL DEFAULT '',
    gpu_model TEXT NOT NULL DEFAULT '',
    namespace TEXT COLLATE "C" NOT NULL DEFAULT '',
    pod TEXT COLLATE "C" NOT NULL DEFAULT '',
    container TEXT COLLATE "C" NOT NULL DEFAULT '',
    mean_utilization DOUBLE PRECISION NOT NULL DEFAULT 0,
    peak_fb_used_mib DOUBLE PRECISION NOT NULL DEFAULT 0,
    samples BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX gpu_usage_hour_idx ON gpu_usage (hour);

CREATE TABLE inference_usage (
    hour BIGINT NOT NULL,
    namespace TEXT COLLATE "C" NOT NULL DEFAULT '',
    pod TEXT COLLATE "C" NOT NULL DEFAULT '',
    workload TEXT COLLATE "C" NOT NULL DEFAULT '',
    model TEXT COLLATE "C" NOT NULL DEFAULT '',
    requests DOUBLE PRECISION NOT NULL DEFAULT 0,
    prompt_tokens DOUBLE PRECISION NOT NULL DEFAULT 0,
    generation_tokens DOUBLE PRECISION NOT NULL DEFAULT 0
);
CREATE INDEX inference_usage_hour_idx ON inference_usage (hour);

CREATE TABLE client_rules (
    client TEXT COLLATE "C" NOT NULL DEFAULT '',
    match_kind TEXT COLLATE "C" NOT NULL DEFAULT '',
    pattern TEXT COLLATE "C" NOT NULL DEFAULT '',
    label_key TEXT COLLATE "C" NOT NULL DEFAULT '',
    priority BIGINT NOT NULL DEFAULT 0
);

-- Per-client billing settings; not read by the store yet.
CREATE TABLE clients (
    name TEXT NOT NULL PRIMARY KEY,
    share_policy TEXT NOT NULL DEFAULT 'gpu',
    markup_basis_points BIGINT NOT NULL DEFAULT 0
);
