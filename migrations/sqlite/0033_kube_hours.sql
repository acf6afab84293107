-- Kubernetes pods and nodes per hour from kube-state-metrics and cAdvisor (issue 41): what
-- gpuledger's own split of a node's cost among its pods takes, on any cloud.
CREATE TABLE kube_node_hours (
    hour BIGINT NOT NULL,
    cluster TEXT NOT NULL DEFAULT '',
    node TEXT NOT NULL DEFAULT '',
    provider_id TEXT NOT NULL DEFAULT '',
    instance_type TEXT NOT NULL DEFAULT '',
    capacity_type TEXT NOT NULL DEFAULT '',
    cpu_cores REAL NOT NULL DEFAULT 0,
    memory_gib REAL NOT NULL DEFAULT 0,
    gpus REAL NOT NULL DEFAULT 0,
    seconds REAL NOT NULL DEFAULT 0
);
CREATE INDEX kube_node_hours_hour_idx ON kube_node_hours (hour);

CREATE TABLE kube_pod_hours (
    hour BIGINT NOT NULL,
    cluster TEXT NOT NULL DEFAULT '',
    namespace TEXT NOT NULL DEFAULT '',
    pod TEXT NOT NULL DEFAULT '',
    uid TEXT NOT NULL DEFAULT '',
    node TEXT NOT NULL DEFAULT '',
    workload TEXT NOT NULL DEFAULT '',
    workload_type TEXT NOT NULL DEFAULT '',
    labels TEXT NOT NULL DEFAULT '{}',
    seconds REAL NOT NULL DEFAULT 0,
    cpu_request REAL NOT NULL DEFAULT 0,
    memory_request_gib REAL NOT NULL DEFAULT 0,
    gpu_request REAL NOT NULL DEFAULT 0,
    cpu_usage REAL NOT NULL DEFAULT 0,
    memory_usage_gib REAL NOT NULL DEFAULT 0
);
CREATE INDEX kube_pod_hours_hour_idx ON kube_pod_hours (hour);
