-- The commitment discount a FOCUS bill's charges are of, as the bill names it (issue 42): its
-- CommitmentDiscountId and CommitmentDiscountType, so a commitment is reported under its own
-- id and kind. Bills ingested before carry none until they are ingested again
-- (`ingest focus --force`); their groups keep the keys they had.
ALTER TABLE bill_charges ADD COLUMN commitment_discount_id TEXT NOT NULL DEFAULT '';
ALTER TABLE bill_charges ADD COLUMN commitment_discount_type TEXT NOT NULL DEFAULT '';
