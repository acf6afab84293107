-- The Costs page drills a workload down to its pods: pod-days are read by pod, not only by
-- period.
CREATE INDEX cost_pod_days_pod_idx ON cost_pod_days (period, pod_id, day);
