-- The GPU fleet in each bill's currency too (issue 70): a FOCUS bill's GPU machines keep the
-- bill's currency and their amortized cost in it, unconverted, beside the dollars.
ALTER TABLE rollup_capacity ADD COLUMN currency TEXT NOT NULL DEFAULT '';
ALTER TABLE rollup_capacity ADD COLUMN amortized_in_currency_nanos BIGINT NOT NULL DEFAULT 0;
-- A month computed with another provider's bill lacks them: it is computed again
-- (`gpuledger compute`, `run`), and shown as pending until it is.
UPDATE rollup_periods SET input_revision = 0
 WHERE period IN (SELECT period FROM rollup_capacity WHERE provider NOT IN ('', 'aws'));
