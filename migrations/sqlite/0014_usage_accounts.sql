-- The usage account of every instance-hour and pod (a pod is billed to its node's account),
-- the account's name on the bill lines, the account on the cost and capacity rollups, and
-- each account's share of the bill. Periods stored before this are read again on the next
-- ingest (reader version 4); until then their rows carry no account.
ALTER TABLE instance_hours ADD COLUMN usage_account_id TEXT NOT NULL DEFAULT '';
ALTER TABLE cost_pods ADD COLUMN usage_account_id TEXT NOT NULL DEFAULT '';
ALTER TABLE bill_lines ADD COLUMN usage_account_name TEXT NOT NULL DEFAULT '';
ALTER TABLE rollup_costs ADD COLUMN account TEXT NOT NULL DEFAULT '';
ALTER TABLE rollup_capacity ADD COLUMN account TEXT NOT NULL DEFAULT '';

CREATE TABLE rollup_accounts (
    period TEXT NOT NULL,
    account TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    bill_unblended_micros BIGINT NOT NULL DEFAULT 0,
    instance_cost_micros BIGINT NOT NULL DEFAULT 0,
    other_cost_micros BIGINT NOT NULL DEFAULT 0,
    kubernetes_cost_nanos BIGINT NOT NULL DEFAULT 0,
    unused_savings_plan_micros BIGINT NOT NULL DEFAULT 0,
    unused_reservation_micros BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX rollup_accounts_period_idx ON rollup_accounts (period);
