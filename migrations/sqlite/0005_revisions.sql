-- Revisions: a counter that only goes up, so caches and compute know what changed without
-- comparing clocks. Every write that changes what a page shows (a period's bill, a usage
-- window, a period's rollups) takes the next value, in its own transaction.
CREATE TABLE data_revision (
    id BIGINT NOT NULL PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO data_revision (id, value) VALUES (1, 1);

-- Per billing period: the revision at which its inputs (the bill or the metrics of its
-- hours) last changed. A period whose rollups were computed from an older revision (or not
-- at all) is pending, and the next ingest or compute computes it.
CREATE TABLE period_inputs (
    period TEXT NOT NULL PRIMARY KEY,
    revision BIGINT NOT NULL
);
-- Periods ingested before revisions existed: their rollups may be stale (a crash between
-- ingest and compute), so each is computed once more.
INSERT INTO period_inputs (period, revision) SELECT period, 1 FROM cost_periods;

-- The input revision a period's rollups were computed from (an older compute never
-- overwrites a newer one), and the revision the write itself took (the caches' key).
ALTER TABLE rollup_periods ADD COLUMN input_revision BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollup_periods ADD COLUMN revision BIGINT NOT NULL DEFAULT 0;

-- Who runs a run: a run left 'running' by a process that no longer exists is marked
-- 'interrupted' by the next run on the same host.
ALTER TABLE ingest_runs ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE ingest_runs ADD COLUMN pid BIGINT NOT NULL DEFAULT 0;
CREATE INDEX ingest_runs_status_idx ON ingest_runs (status);
