-- The GPUs page's distribution of hourly utilization: each GPU model's allocated, measured
-- GPU-hours by the 5 % step their pod-hour's mean utilization fell in (0: under 5 %, …,
-- 19: 95–100 %). Periods computed before have none until computed again.
CREATE TABLE rollup_utilization (
    period TEXT NOT NULL,
    gpu_model TEXT NOT NULL,
    bucket BIGINT NOT NULL,
    gpu_hours REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (period, gpu_model, bucket)
);
