//! Sources: the outside world gpuledger reads — CUR 2.0 exports in a folder or in S3, FOCUS
//! bills there or in Azure Blob Storage and Google Cloud Storage (`cloud_objects`), GPU
//! and inference metrics from Prometheus or an OpenMetrics file, and daily totals from AWS
//! Cost Explorer; and FOCUS rows written back as files (`focus_file`). Nothing here writes to
//! the store.

pub mod cloud_objects;
pub mod columns;
pub mod cost_explorer;
pub mod cur;
pub mod focus;
pub mod focus_file;
pub mod map_column;
pub mod objects;
pub mod prometheus;
pub mod reservation_recommendation;
pub mod row_identity;
pub mod spark;

/// What went wrong finding or reading a bill source's files (a CUR export, a FOCUS
/// delivery, Spark's output), naming the place: the file, and its data row and column where
/// one is at fault.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Object(#[from] objects::ObjectError),
    #[error("{location}: {message}")]
    Invalid { location: String, message: String },
}

pub(crate) fn invalid(location: impl Into<String>, message: impl std::fmt::Display) -> SourceError {
    SourceError::Invalid { location: location.into(), message: message.to_string() }
}

/// The AWS SDK's shared configuration from the default chain (environment, profile, IRSA on
/// EKS), with standard retries (`attempts`, backoff from `first_backoff`) and `timeout` for a
/// connection or a response (twice that for one attempt).
pub async fn aws_config(
    attempts: u32,
    first_backoff: std::time::Duration,
    timeout: std::time::Duration,
) -> aws_config::SdkConfig {
    let retry = aws_config::retry::RetryConfig::standard()
        .with_max_attempts(attempts)
        .with_initial_backoff(first_backoff);
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(timeout)
        .read_timeout(timeout)
        .operation_attempt_timeout(timeout * 2)
        .build();
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .retry_config(retry)
        .timeout_config(timeouts)
        .load()
        .await
}
