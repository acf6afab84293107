-- A client's charge basis (amortized, or net of AWS's discounts) as it was computed, and a
-- net client's share of the period's discounts (≤ 0). Rows computed before are amortized.
ALTER TABLE rollup_clients ADD COLUMN charge_basis TEXT NOT NULL DEFAULT 'amortized';
ALTER TABLE rollup_clients ADD COLUMN discount_nanos BIGINT NOT NULL DEFAULT 0;
