-- A workload's pods, for the Costs page's pods drill-down (a churny month's namespace of Jobs
-- holds hundreds of thousands of pods).
CREATE INDEX cost_pods_workload_idx ON cost_pods (period, namespace, workload);
