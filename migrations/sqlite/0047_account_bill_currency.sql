-- Every number per provider in the bill's currency too (issue 70): a FOCUS bill's account keeps
-- the bill's currency and its amortized cost in it, unconverted, beside the dollars.
ALTER TABLE rollup_accounts ADD COLUMN currency TEXT NOT NULL DEFAULT '';
ALTER TABLE rollup_accounts ADD COLUMN amortized_in_currency_nanos BIGINT NOT NULL DEFAULT 0;
-- A month computed with another provider's bill lacks them: it is computed again
-- (`gpuledger compute`, `run`), and shown as pending until it is.
UPDATE rollup_periods SET input_revision = 0
 WHERE period IN (SELECT period FROM rollup_accounts WHERE provider NOT IN ('', 'aws'));
