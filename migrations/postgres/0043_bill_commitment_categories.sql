-- The category of the commitment discount a FOCUS bill's charges are of, as the bill names
-- it (`CommitmentDiscountCategory`: `Spend` or `Usage`), so `export focus` writes the
-- commitment as the bill did (issue 42). Bills ingested before carry none until they are
-- ingested again (`ingest focus --force`); their groups keep the keys they had.
ALTER TABLE bill_charges ADD COLUMN commitment_discount_category TEXT NOT NULL DEFAULT '';
