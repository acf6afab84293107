-- One GPU fleet for every provider (issue 70): a FOCUS bill's GPU machines are capacity rows
-- beside the CUR's instances, keyed with their provider, so the Overview, the GPUs page, the
-- accounts and providers read one definition. The accounts' own FOCUS fleet columns go.
ALTER TABLE rollup_capacity ADD COLUMN provider TEXT NOT NULL DEFAULT 'aws';
ALTER TABLE rollup_periods ADD COLUMN gpu_fleet_in_other_micros BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_accounts ADD COLUMN gpu_fleet_in_other_micros BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_accounts DROP COLUMN gpu_hours;
ALTER TABLE rollup_accounts DROP COLUMN spot_gpu_hours;
ALTER TABLE rollup_accounts DROP COLUMN gpu_fleet_micros;
-- A month computed with another provider's bill had its fleet in those columns: it is
-- computed again (`gpuledger compute`, `run`), and shown as pending until it is.
UPDATE rollup_periods SET input_revision = 0
 WHERE period IN (SELECT period FROM rollup_accounts WHERE provider NOT IN ('', 'aws'));
