-- A FOCUS bill's GPU instances per account (issue 40): GPU fleet cost and Spot GPU-hours per
-- provider. Periods computed before carry none until computed again.
ALTER TABLE rollup_accounts ADD COLUMN gpu_hours REAL NOT NULL DEFAULT 0;
ALTER TABLE rollup_accounts ADD COLUMN spot_gpu_hours REAL NOT NULL DEFAULT 0;
ALTER TABLE rollup_accounts ADD COLUMN gpu_fleet_micros BIGINT NOT NULL DEFAULT 0;
