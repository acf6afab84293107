//! The recorded runs: an ingest, a compute or a pipeline cycle, how each stands and what it
//! read and wrote; and a CUR ingest's reconciliation, stored with its run and read back here.

use serde::{Deserialize, Serialize};

/// What a run did. Stored and shown by these names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunKind {
    /// A CUR 2.0 delivery ingested for one billing period.
    Cur,
    /// FOCUS bills ingested (one or several bills of one source).
    Focus,
    /// A metrics window ingested from Prometheus or an OpenMetrics file.
    Prometheus,
    /// Cost Explorer's daily figures fetched.
    CostExplorer,
    /// A period's rollups computed.
    Compute,
    /// A cycle of `gpuledger run`.
    Pipeline,
}

impl RunKind {
    pub const ALL: [RunKind; 6] = [
        RunKind::Cur,
        RunKind::Focus,
        RunKind::Prometheus,
        RunKind::CostExplorer,
        RunKind::Compute,
        RunKind::Pipeline,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Cur => "cur",
            RunKind::Focus => "focus",
            RunKind::Prometheus => "prometheus",
            RunKind::CostExplorer => "cost-explorer",
            RunKind::Compute => "compute",
            RunKind::Pipeline => "pipeline",
        }
    }
}

parse_by_name!(RunKind, "run kind");

impl std::fmt::Display for RunKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for RunKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// How a recorded run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Started and not finished: still going, or its process died before the next run on
    /// the same host noticed.
    Running,
    Succeeded,
    Failed,
    /// Its process ended (killed, crashed) before the run finished.
    Interrupted,
    /// Read whole and judged unfit to replace what is stored (a CUR re-delivery with no rows,
    /// or a bill that falls too far): nothing was written.
    Refused,
}

impl RunStatus {
    pub const ALL: [RunStatus; 5] = [
        RunStatus::Running,
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::Interrupted,
        RunStatus::Refused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Refused => "refused",
        }
    }

    /// Failed, interrupted or refused: the run's data did not land.
    pub fn is_failure(self) -> bool {
        matches!(self, RunStatus::Failed | RunStatus::Interrupted | RunStatus::Refused)
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for RunStatus {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        RunStatus::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| format!("unknown run status {text:?}"))
    }
}

/// One ingest attempt of one source and period, kept whether it succeeded or not.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IngestRun {
    pub id: i64,
    pub kind: RunKind,
    /// Where the data came from: a folder, an `s3://` URI, a Prometheus URL.
    pub source: String,
    /// Billing period `YYYY-MM`, or the metrics window for Prometheus.
    pub period: String,
    /// The manifest's executionId (else ETag/size) that identifies the delivery.
    pub data_version: String,
    pub status: RunStatus,
    pub rows_read: i64,
    pub rows_written: i64,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    pub error: Option<String>,
    /// Reconciliation results as JSON text (bill totals, split vs parent).
    pub reconciliation: Option<String>,
    /// The host and process that ran it.
    pub host: String,
    pub pid: i64,
}

/// What a new run records when it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct NewIngestRun {
    pub kind: RunKind,
    pub source: String,
    pub period: String,
    pub data_version: String,
    pub started_at: i64,
    pub host: String,
    pub pid: i64,
}

impl NewIngestRun {
    /// A run of this process, starting now.
    pub fn now(kind: RunKind, source: &str, period: &str, data_version: &str) -> NewIngestRun {
        NewIngestRun {
            kind,
            source: source.into(),
            period: period.into(),
            data_version: data_version.into(),
            started_at: chrono::Utc::now().timestamp(),
            host: crate::host::this_host(),
            pid: i64::from(std::process::id()),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct IngestOutcome {
    pub status: RunStatus,
    pub rows_read: i64,
    pub rows_written: i64,
    pub finished_at: i64,
    pub error: Option<String>,
    pub reconciliation: Option<String>,
}

impl IngestOutcome {
    /// A run that succeeded now, with what it read and wrote and, where it has one, its
    /// reconciliation as JSON text.
    pub fn succeeded(rows_read: i64, rows_written: i64, reconciliation: Option<String>) -> IngestOutcome {
        IngestOutcome {
            status: RunStatus::Succeeded,
            rows_read,
            rows_written,
            finished_at: chrono::Utc::now().timestamp(),
            error: None,
            reconciliation,
        }
    }

    /// A delivery refused now ([`crate::ingest::judge`]), with the numbers it was judged on as
    /// JSON text, having written nothing.
    pub fn refused(message: &str, numbers: Option<String>) -> IngestOutcome {
        IngestOutcome {
            status: RunStatus::Refused,
            reconciliation: numbers,
            ..IngestOutcome::failed(message)
        }
    }

    /// A run that failed now with `error`, having written nothing.
    pub fn failed(error: &str) -> IngestOutcome {
        IngestOutcome {
            status: RunStatus::Failed,
            rows_read: 0,
            rows_written: 0,
            finished_at: chrono::Utc::now().timestamp(),
            error: Some(error.to_string()),
            reconciliation: None,
        }
    }
}

/// Who holds a job lock.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct LockHolder {
    pub host: String,
    pub pid: i64,
    pub acquired_at: i64,
    pub heartbeat_at: i64,
}

impl LockHolder {
    /// This process, now.
    pub fn this_process() -> LockHolder {
        let now = chrono::Utc::now().timestamp();
        LockHolder {
            host: crate::host::this_host(),
            pid: i64::from(std::process::id()),
            acquired_at: now,
            heartbeat_at: now,
        }
    }
}
/// How the bill reconciles, printed after every ingest and stored with the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Reconciliation {
    pub period: String,
    pub rows_read: u64,
    pub split_rows: u64,
    /// Split rows not turned into facts (ECS tasks, no parent and no cost, unknown usage type).
    pub split_rows_skipped: u64,
    pub bill_unblended_total: String,
    pub bill_amortized_total: String,
    /// Σ over pods of split + unused: Kubernetes cost pushed down to pods.
    pub kubernetes_allocated_cost: String,
    /// Amortized cost of the instance-hours that hosted pods.
    pub instance_cost_with_pods: String,
    /// Amortized cost of instance-hours with no pods (stays unallocated).
    pub instance_cost_without_pods: String,
    /// Instance cost not allocated to pods: instance-hours without split rows, and parent
    /// cost the split rows of an hour do not cover.
    pub unallocated_ec2_cost: String,
    /// bill amortized − Kubernetes − unallocated EC2.
    pub other_cost: String,
    pub instance_hours_checked: u64,
    pub instance_hours_disagreeing: u64,
    /// Up to 20 instance-hours whose pods do not add up to the instance, for the report.
    pub disagreements: Vec<Disagreement>,
    /// Σ(split + unused) agrees with the parents within 0.01 % for every instance-hour.
    pub split_matches_parents: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Disagreement {
    pub instance_id: String,
    pub hour: i64,
    pub instance_amortized: f64,
    pub pods_split_plus_unused: f64,
}

/// What a pipeline cycle records with its run: when the next cycle is due.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CycleRecord {
    /// UTC epoch seconds.
    pub next_run_at: Option<i64>,
}

impl IngestRun {
    /// A successful CUR run's reconciliation, as its ingest stored it (none for other kinds,
    /// for a run that did not succeed: a refused one stores the numbers it was judged on).
    pub fn cur_reconciliation(&self) -> Option<Reconciliation> {
        if self.kind != RunKind::Cur || self.status != RunStatus::Succeeded {
            return None;
        }
        serde_json::from_str(self.reconciliation.as_deref()?).ok()
    }

    /// When a pipeline cycle said the next one is due.
    pub fn next_run_at(&self) -> Option<i64> {
        if self.kind != RunKind::Pipeline {
            return None;
        }
        serde_json::from_str::<CycleRecord>(self.reconciliation.as_deref()?).ok()?.next_run_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_kinds_read_back_by_the_names_they_are_stored_by() {
        for kind in RunKind::ALL {
            assert_eq!(kind.as_str().parse::<RunKind>(), Ok(kind));
        }
        assert_eq!(RunKind::CostExplorer.as_str(), "cost-explorer");
        assert!("spark".parse::<RunKind>().is_err());
    }
}
