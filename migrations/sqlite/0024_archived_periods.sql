-- Billing periods whose detail rows (pods, instance-hours, pod-days, their purchase options
-- and GPU pod-hours) were moved out to Parquet files by `gpuledger archive create`: where,
-- when, of which delivery (data version), and the SHA-256 of the archive's manifest. The
-- period's bill, other costs, rollups and issued invoices stay. A new ingest of the period
-- or `gpuledger archive restore` removes its row.
CREATE TABLE archived_periods (
    period TEXT PRIMARY KEY,
    data_version TEXT NOT NULL,
    archived_at BIGINT NOT NULL,
    location TEXT NOT NULL,
    detail_rows BIGINT NOT NULL,
    manifest_sha256 TEXT NOT NULL
);
