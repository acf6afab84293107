-- Pod-days on instances billed under several purchase options in an hour (part Savings
-- Plan, part On-Demand): each option's share of the pod-day's cost and GPU-hours, weighted
-- by the usage amounts of the instance-hour's lines. Periods stored before this are read
-- again by the next `ingest cur` (reader version 6).
CREATE TABLE cost_pod_day_options (
    period TEXT NOT NULL,
    pod_id BIGINT NOT NULL,
    day BIGINT NOT NULL,
    purchase_option TEXT NOT NULL,
    cost_weight DOUBLE PRECISION NOT NULL,
    gpu_hours_weight DOUBLE PRECISION NOT NULL
);
CREATE INDEX cost_pod_day_options_period_idx ON cost_pod_day_options (period);
