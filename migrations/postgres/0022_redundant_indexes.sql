-- Two indexes that a wider index already covers (its leading columns are theirs): every
-- ingest paid for them on each pod and pod-day written, and no query needs them.
-- cost_pods (period, namespace) is the head of cost_pods_workload_idx (period, namespace,
-- workload); cost_pod_days (period) is the head of cost_pod_days_pod_idx (period, pod_id, day).
DROP INDEX cost_pods_namespace_idx;
DROP INDEX cost_pod_days_period_idx;
