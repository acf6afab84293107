-- GPU usage rows say how much of a GPU-hour they stand for: a MIG instance is a fraction
-- of its GPU, pods time-slicing one GPU share its hour, and unattributed rows hold what
-- the pods left. `gpu_profile` is the MIG profile (`3g.40gb`), empty for a whole GPU.
ALTER TABLE gpu_usage ADD COLUMN gpu_profile TEXT NOT NULL DEFAULT '';
ALTER TABLE gpu_usage ADD COLUMN gpu_hours DOUBLE PRECISION NOT NULL DEFAULT 0;
