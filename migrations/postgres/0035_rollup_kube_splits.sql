-- Per period and cluster, whose split divides its node cost among its pods (AWS's from the
-- CUR's split cost allocation data, or gpuledger's from kube-state-metrics and cAdvisor) and
-- that split's reconciliation to the bill (issue 41). Written by compute with the rollups.
CREATE TABLE rollup_kube_splits (
    period TEXT NOT NULL,
    cluster TEXT NOT NULL,
    provider TEXT NOT NULL DEFAULT '',
    currency TEXT NOT NULL DEFAULT '',
    method TEXT NOT NULL DEFAULT '',
    node_costs_from TEXT NOT NULL DEFAULT '',
    node_hours BIGINT NOT NULL DEFAULT 0,
    pod_hours BIGINT NOT NULL DEFAULT 0,
    bill_node_nanos BIGINT NOT NULL DEFAULT 0,
    pods_nanos BIGINT NOT NULL DEFAULT 0,
    unallocated_nanos BIGINT NOT NULL DEFAULT 0,
    node_hours_without_pods BIGINT NOT NULL DEFAULT 0,
    node_hours_not_in_bill BIGINT NOT NULL DEFAULT 0,
    pod_hours_not_in_bill BIGINT NOT NULL DEFAULT 0,
    bill_hours_not_in_prometheus BIGINT NOT NULL DEFAULT 0,
    bill_hours_not_in_prometheus_nanos BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX rollup_kube_splits_period_idx ON rollup_kube_splits (period);
