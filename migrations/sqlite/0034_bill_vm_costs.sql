-- A FOCUS bill's effective cost of each virtual machine per charge period (an hour, or a day
-- where the provider bills daily), as the node's `provider_id` names it (issue 41): what
-- gpuledger's own split divides among the pods on the node. Replaced with its bill.
CREATE TABLE bill_vm_costs (
    period TEXT NOT NULL,
    provider TEXT NOT NULL,
    billing_account TEXT NOT NULL,
    instance TEXT NOT NULL,
    cluster TEXT NOT NULL DEFAULT '',
    charge_start BIGINT NOT NULL,
    charge_end BIGINT NOT NULL,
    charges BIGINT NOT NULL DEFAULT 0,
    effective_nanos BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX bill_vm_costs_bill_idx ON bill_vm_costs (period, provider, billing_account);
