-- Each virtual machine's charge periods are kept packed, one row per machine, day and charge
-- group less its tags (`BillVmDay`): a month of a node's hours in a few dozen rows instead of
-- thousands (issue 41; a 10-million-row month ingested 7.9 times slower than DuckDB with one
-- row per period). A FOCUS bill stored before keeps no VM costs here: its data version is
-- marked, so that ingesting the same delivery again is not skipped as unchanged and
-- `export focus` refuses it until then.
DROP TABLE bill_vm_costs;
UPDATE bills SET data_version = data_version || ' [before 0037]' WHERE format = 'focus';
CREATE TABLE bill_vm_days (
    period TEXT NOT NULL,
    provider TEXT NOT NULL,
    billing_account TEXT NOT NULL,
    instance TEXT NOT NULL,
    cluster TEXT NOT NULL DEFAULT '',
    day BIGINT NOT NULL,
    charge_key TEXT NOT NULL,
    periods BLOB NOT NULL
);
CREATE INDEX bill_vm_days_bill_idx ON bill_vm_days (period, provider, billing_account);
