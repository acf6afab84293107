-- One `gpuledger run` at a time: the holder of a named lock, and when it last said it was
-- alive. A lock whose heartbeat is old, or whose process is gone from its host, is taken over.
CREATE TABLE job_locks (
    name TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid BIGINT NOT NULL,
    acquired_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL
);
