//! Sources: the outside world gpuledger reads — CUR 2.0 exports in a folder or in S3, and
//! GPU and inference metrics from Prometheus or an OpenMetrics file. Nothing here writes to
//! the store.

pub mod cur;
pub mod objects;
pub mod prometheus;
