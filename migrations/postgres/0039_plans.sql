-- Planned changes (issue 42): demand known before any bill shows it, layered onto the
-- forecast as a scenario. kind: gpu_hours (a month) or percent; pool '' for wherever the
-- client runs; to_month '' for every month on.
CREATE TABLE plans (
    id BIGSERIAL PRIMARY KEY,
    client TEXT NOT NULL,
    pool TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL,
    amount DOUBLE PRECISION NOT NULL,
    from_month TEXT NOT NULL,
    to_month TEXT NOT NULL DEFAULT '',
    note TEXT NOT NULL,
    author TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
