-- Pods' own labels name their client only where an administrator trusts them (settings kind
-- `labels`, a list of `*`, CLUSTER or CLUSTER/NAMESPACE); a new database trusts them nowhere.
-- A database that already computed months kept every pod's label until now: it keeps doing so
-- (trusted everywhere, from the beginning) until an administrator narrows it with
-- `gpuledger clients labels`, so upgrading re-attributes nothing silently.
INSERT INTO settings (kind, key, effective_from, value, set_at)
SELECT 'labels', '', '', '["*"]', 0
WHERE EXISTS (SELECT 1 FROM rollup_periods);
