-- Numbers that survive an audit (issue 13): settings with the month they take effect, the
-- sharing rule on each pool instead of on each client, exempt clients, and the chargeback a
-- recompute replaced.

-- Every version of every setting. kind: client (key = the client, value = {markup_basis_points,
-- exempt}), pool (key = platform|idle|unallocated|shared, value = "gpu"|"total"|"even"),
-- mapping (key '', value = the whole list of mapping rules), engine (key '', value =
-- {idle_threshold, platform_namespaces}). effective_from is YYYY-MM, or '' for the beginning;
-- a period is computed with the latest version of each setting that covers it.
CREATE TABLE settings (
    kind TEXT NOT NULL,
    key TEXT NOT NULL DEFAULT '',
    effective_from TEXT NOT NULL DEFAULT '',
    value TEXT NOT NULL,
    set_at BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, key, effective_from)
);

-- Clients set before: their markup from the beginning; the per-client policy `none` becomes
-- exempt (`total` and `even` were per client and are now per pool: those clients take the
-- default rule, `gpu`).
INSERT INTO settings (kind, key, effective_from, value, set_at)
SELECT 'client', name, '', json_build_object('markup_basis_points', markup_basis_points,
       'exempt', share_policy = 'none')::text, 0
FROM clients;
INSERT INTO settings (kind, key, effective_from, value, set_at)
SELECT 'mapping', '', '', (SELECT json_agg(json_build_object('client', client, 'match_kind', match_kind,
       'pattern', pattern, 'label_key', label_key, 'priority', priority))::text FROM client_rules), 0
WHERE EXISTS (SELECT 1 FROM client_rules);
DROP TABLE clients;
DROP TABLE client_rules;

ALTER TABLE rollup_clients ADD COLUMN exempt BIGINT NOT NULL DEFAULT 0;
-- The full cost of idle GPU pod-hours (every resource the pod reserved), idle judged per GPU.
ALTER TABLE rollup_costs ADD COLUMN idle_cost_nanos BIGINT NOT NULL DEFAULT 0;
-- The cost of the pod-hours that served requests: cost per inference divides this.
ALTER TABLE rollup_costs ADD COLUMN serving_cost_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_clients ADD COLUMN shared_unallocated_nanos BIGINT NOT NULL DEFAULT 0;
-- Metrics keep their cluster (a `cluster` label or the source's --cluster), so a pod name
-- present in two clusters is told apart.
ALTER TABLE gpu_usage ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
ALTER TABLE inference_usage ADD COLUMN cluster TEXT NOT NULL DEFAULT '';

-- Opportunities are per workload family (a CronJob's Jobs are one family).
ALTER TABLE rollup_opportunities ADD COLUMN family TEXT NOT NULL DEFAULT '';
-- The settings in force when the period was computed, as JSON.
ALTER TABLE rollup_periods ADD COLUMN settings TEXT NOT NULL DEFAULT '';
-- Commitment paid for and not used (Savings Plans, reservations): realized savings subtract it.
ALTER TABLE rollup_periods ADD COLUMN unused_savings_plan_micros BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_periods ADD COLUMN unused_reservation_micros BIGINT NOT NULL DEFAULT 0;
-- GPU-hours the metrics measured on pods with no accelerator rows in the bill.
ALTER TABLE rollup_periods ADD COLUMN measured_unbilled_gpu_hours DOUBLE PRECISION NOT NULL DEFAULT 0;

-- A period's chargeback as it stood before a compute changed it (a re-delivered bill, new
-- metrics, a setting for that month): the rows as JSON, the revision they were written at.
CREATE TABLE chargeback_snapshots (
    period TEXT NOT NULL,
    revision BIGINT NOT NULL,
    replaced_at BIGINT NOT NULL,
    clients TEXT NOT NULL,
    PRIMARY KEY (period, revision)
);
