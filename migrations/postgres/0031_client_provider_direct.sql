-- A client's non-Kubernetes direct cost billed by other providers than AWS, by provider
-- (issue 40): what an invoice itemizes by provider. JSON; empty for rows computed before.
ALTER TABLE rollup_clients ADD COLUMN provider_direct TEXT NOT NULL DEFAULT '';
