-- Of a period's other cost (the bill outside Kubernetes and EC2), its storage lines (S3, EBS,
-- EFS, FSx) and its data transfer, so the Overview can stack spend by category. NULL for
-- periods computed before: their storage and network stay in other cost until recomputed.
ALTER TABLE rollup_periods ADD COLUMN storage_micros BIGINT;
ALTER TABLE rollup_periods ADD COLUMN network_micros BIGINT;
