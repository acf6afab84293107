-- The tables a billing period's bill fills are partitioned by period (LIST), one partition
-- per period named TABLE_pYYYY_MM: re-delivering a period builds its new partitions beside
-- the old ones and swaps them in at commit, instead of deleting millions of rows, and an old
-- period can be detached and archived. Existing rows are moved into their partitions here
-- (a one-time copy of every stored period).
--
-- Indexes on (period) alone go: each partition holds one period, so a period's rows are its
-- partition. The wider indexes stay, per partition.
DO $$
DECLARE
    t TEXT;
    p TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['cost_facts', 'cost_pods', 'instance_hours', 'other_costs',
                             'cost_pod_days', 'cost_gpu_pod_hours', 'cost_pod_day_options'] LOOP
        EXECUTE format('ALTER TABLE %I RENAME TO %I', t, t || '_unpartitioned');
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS) PARTITION BY LIST (period)',
                       t, t || '_unpartitioned');
        FOR p IN EXECUTE format('SELECT DISTINCT period FROM %I UNION SELECT period FROM cost_periods',
                                t || '_unpartitioned') LOOP
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES IN (%L)',
                           t || '_p' || replace(p, '-', '_'), t, p);
        END LOOP;
        EXECUTE format('INSERT INTO %I SELECT * FROM %I', t, t || '_unpartitioned');
        EXECUTE format('DROP TABLE %I', t || '_unpartitioned');
    END LOOP;
END $$;

ALTER TABLE cost_pods ADD PRIMARY KEY (period, pod_id);
CREATE INDEX cost_pods_workload_idx ON cost_pods (period, namespace, workload);
CREATE INDEX cost_facts_period_hour_idx ON cost_facts (period, hour);
CREATE INDEX cost_pod_days_pod_idx ON cost_pod_days (period, pod_id, day);
ANALYZE cost_facts, cost_pods, instance_hours, other_costs, cost_pod_days, cost_gpu_pod_hours,
    cost_pod_day_options;
