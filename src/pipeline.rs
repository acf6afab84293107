//! The jobs: ingest → compute as one recorded pipeline. The command line, `demo` and (later)
//! a scheduler call these functions, so each job behaves the same wherever it starts.
//!
//! - Every ingest and compute is recorded as a run: `running` when it starts, then
//!   `succeeded` or `failed` with its error. A run whose process died (SIGKILL, a crash, a
//!   reboot) is marked `interrupted` by the next job on the same host.
//! - Every job ends by computing the *pending* periods: those whose bill or metrics changed
//!   since their rollups were computed (`Store::pending_periods`, kept by revision numbers
//!   written in the same transaction as the data). So a period ingested by a run that then
//!   failed or was killed is computed by the next run, even when the next run finds nothing
//!   new to ingest.

use crate::engine::compute::{ComputeError, ComputeSummary, compute_period};
use crate::ingest::metrics::{MetricsError, MetricsIngestOptions, MetricsIngestResult, ingest_metrics};
use crate::ingest::{CurIngestOptions, IngestError, PeriodResult, ingest_cur};
use crate::period::Period;
use crate::store::{IngestOutcome, NewIngestRun, Store, StoreError};

/// Why a job stopped.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Ingest(#[from] IngestError),
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    #[error(transparent)]
    Compute(#[from] ComputeError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a CUR job did, and how it ended: periods ingested before a failure stay ingested and
/// are computed all the same.
#[derive(Debug)]
pub struct CurJob {
    pub ingested: Vec<PeriodResult>,
    pub computed: Vec<ComputeSummary>,
    /// The ingest's error, when a period failed.
    pub failure: Option<JobError>,
}

/// Closes this host's runs whose process is gone, so they read as `interrupted`.
pub async fn close_abandoned_runs(store: &dyn Store) -> Result<usize, StoreError> {
    let closed = store.close_abandoned_runs(&crate::store::this_host(), &crate::store::process_alive).await?;
    if closed > 0 {
        tracing::warn!(closed, "runs left running by processes that no longer exist were marked interrupted");
    }
    Ok(closed)
}

/// Ingests a CUR export, then computes every pending period (those it ingested, and any an
/// earlier run left ingested but not computed).
pub async fn ingest_cur_and_compute(
    store: &dyn Store,
    options: &CurIngestOptions,
    progress: &indicatif::MultiProgress,
) -> Result<CurJob, JobError> {
    close_abandoned_runs(store).await?;
    let (ingested, failure) = match ingest_cur(store, options, progress).await {
        Ok(results) => (results, None),
        Err(error) => (Vec::new(), Some(JobError::from(error))),
    };
    let computed = compute_pending(store).await?;
    Ok(CurJob { ingested, computed, failure })
}

/// Ingests a metrics window, then computes every pending period.
pub async fn ingest_metrics_and_compute(
    store: &dyn Store,
    options: &MetricsIngestOptions,
    progress: &indicatif::MultiProgress,
) -> Result<(MetricsIngestResult, Vec<ComputeSummary>), JobError> {
    close_abandoned_runs(store).await?;
    let result = ingest_metrics(store, options, progress).await;
    // Compute what is pending even when the ingest failed: an earlier run may have left work.
    let computed = if options.detect_only { Vec::new() } else { compute_pending(store).await? };
    Ok((result?, computed))
}

/// Computes every period whose rollups are missing or older than its data.
pub async fn compute_pending(store: &dyn Store) -> Result<Vec<ComputeSummary>, JobError> {
    let pending: Vec<Period> = store.pending_periods().await?.iter().filter_map(|p| p.parse().ok()).collect();
    compute(store, &pending).await
}

/// How often a compute is tried again when another writer changed the period meanwhile.
const STALE_ATTEMPTS: usize = 3;

/// Computes a period; when the store refuses the result because the period's data changed
/// while it was computed (a concurrent ingest), computes it again from the new data, unless
/// another job already did.
async fn compute_fresh(store: &dyn Store, period: Period) -> Result<ComputeSummary, ComputeError> {
    let mut attempt = 1;
    loop {
        match compute_period(store, period).await {
            Err(ComputeError::Store(StoreError::Stale(reason))) if attempt < STALE_ATTEMPTS => {
                let name = period.to_string();
                if !store.pending_periods().await?.contains(&name) {
                    // Someone computed it from data at least as new: nothing left to do.
                    tracing::info!(%period, %reason, "computed meanwhile by another job");
                    return Ok(ComputeSummary::nothing(name));
                }
                tracing::info!(%period, %reason, attempt, "the period changed while it was computed; again");
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Computes the given periods one after another, each recorded as a `compute` run.
pub async fn compute(store: &dyn Store, periods: &[Period]) -> Result<Vec<ComputeSummary>, JobError> {
    let mut summaries = Vec::new();
    for &period in periods {
        let run = store
            .begin_ingest_run(&NewIngestRun::now("compute", "gpuledger compute", &period.to_string(), ""))
            .await?;
        match compute_fresh(store, period).await {
            Ok(summary) => {
                let rows = summary.cost_rows + summary.client_rows + summary.opportunities;
                let outcome = IngestOutcome::succeeded(0, rows as i64, None);
                store.finish_ingest_run(run, &outcome).await?;
                // The one line a person sees per computed period (stderr), with its timings.
                tracing::info!(
                    %period,
                    rollup_rows = summary.cost_rows,
                    clients = summary.client_rows,
                    opportunities = summary.opportunities,
                    read_seconds = tenths(summary.read_seconds),
                    compute_seconds = tenths(summary.compute_seconds),
                    write_seconds = tenths(summary.write_seconds),
                    "period computed"
                );
                summaries.push(summary);
            }
            Err(error) => {
                if let Err(record) =
                    store.finish_ingest_run(run, &IngestOutcome::failed(&error.to_string())).await
                {
                    tracing::error!(run, %record, "could not record the failed compute run");
                }
                return Err(error.into());
            }
        }
    }
    Ok(summaries)
}

/// Seconds rounded to a tenth, for log fields people read.
fn tenths(seconds: f64) -> f64 {
    (seconds * 10.0).round() / 10.0
}
