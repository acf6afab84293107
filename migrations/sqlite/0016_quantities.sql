-- Quantities for invoices. What a pod reserved beside its GPUs (vCPU-hours and GB-hours):
-- the split usage of its vCPU and memory rows, per pod-day and per cost rollup row. Periods
-- stored before this are read again by the next `ingest cur` (reader version 5).
ALTER TABLE cost_pod_days ADD COLUMN vcpu_hours REAL NOT NULL DEFAULT 0;
ALTER TABLE cost_pod_days ADD COLUMN memory_gb_hours REAL NOT NULL DEFAULT 0;
ALTER TABLE rollup_costs ADD COLUMN vcpu_hours REAL NOT NULL DEFAULT 0;
ALTER TABLE rollup_costs ADD COLUMN memory_gb_hours REAL NOT NULL DEFAULT 0;
-- The usage amount of other (non-Kubernetes) lines, in their usage type's unit, and the
-- storage a client's tagged lines held (GB-months of S3, EBS, EFS and snapshot storage).
ALTER TABLE other_costs ADD COLUMN usage_amount REAL NOT NULL DEFAULT 0;
ALTER TABLE rollup_clients ADD COLUMN storage_gb_months REAL NOT NULL DEFAULT 0;
