-- Each virtual machine's charge period keeps the charge group of `bill_charges` it was summed
-- into and every summable amount, so that `export focus` can write it as an origin charge
-- split into its pods' allocated charges (FOCUS 1.3), and the rest of its group apart.
ALTER TABLE bill_vm_costs ADD COLUMN charge_key TEXT NOT NULL DEFAULT '';
ALTER TABLE bill_vm_costs ADD COLUMN consumed_quantity REAL NOT NULL DEFAULT 0;
ALTER TABLE bill_vm_costs ADD COLUMN billed_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE bill_vm_costs ADD COLUMN list_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE bill_vm_costs ADD COLUMN contracted_nanos BIGINT NOT NULL DEFAULT 0;
