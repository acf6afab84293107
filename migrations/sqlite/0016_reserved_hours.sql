-- What a pod reserved beside its GPUs, for invoice quantities (vCPU-hours and GB-hours):
-- the split usage of its vCPU and memory rows, per pod-day and per cost rollup row. Periods
-- stored before this are read again by the next `ingest cur` (reader version 5).
ALTER TABLE cost_pod_days ADD COLUMN vcpu_hours REAL NOT NULL DEFAULT 0;
ALTER TABLE cost_pod_days ADD COLUMN memory_gb_hours REAL NOT NULL DEFAULT 0;
ALTER TABLE rollup_costs ADD COLUMN vcpu_hours REAL NOT NULL DEFAULT 0;
ALTER TABLE rollup_costs ADD COLUMN memory_gb_hours REAL NOT NULL DEFAULT 0;
