-- GPU instances recognised in every provider's bill (issue 40): the GPU model of the
-- instance a FOCUS bill's charges are for, and the GPU-hours they stand for. Bills ingested
-- before carry none until they are ingested again (`ingest focus --force`).
ALTER TABLE bill_charges ADD COLUMN gpu_model TEXT NOT NULL DEFAULT '';
ALTER TABLE bill_charges ADD COLUMN gpu_hours DOUBLE PRECISION NOT NULL DEFAULT 0;
