//! Sources: the outside world gpuledger reads — CUR 2.0 exports in a folder or in S3, GPU
//! and inference metrics from Prometheus or an OpenMetrics file, and daily totals from AWS
//! Cost Explorer. Nothing here writes to
//! the store.

pub mod cost_explorer;
pub mod cur;
pub mod objects;
pub mod prometheus;
