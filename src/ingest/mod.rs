//! Ingest: validates what a source delivers and writes one billing period at a time, each in
//! one transaction, with a progress bar on stderr.
//!
//! Everything a period needs is read and checked before anything is written, so a bad
//! file leaves the database as it was; a period whose data version has not changed since
//! its last successful ingest is skipped unless forced.

pub mod cur;

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use crate::period::Period;
use crate::sources::cur::{self as cur_source, CurError, Delivery};
use crate::sources::objects::{ObjectError, ObjectStore, S3Options, S3Store};
use crate::store::{IngestOutcome, NewIngestRun, Store, StoreError};

pub use cur::Reconciliation;

/// Why an ingest stopped. Nothing of the failing period was written.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Source(#[from] CurError),
    #[error(transparent)]
    Object(#[from] ObjectError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Other(String),
}

/// What `gpuledger ingest cur` was asked to do.
#[derive(Debug, Clone)]
pub struct CurIngestOptions {
    /// A local export root or billing-period folder, or `s3://bucket/prefix/export-name`.
    pub source: String,
    pub period: Option<Period>,
    pub force: bool,
    pub s3: S3Options,
}

/// The outcome of one billing period.
#[derive(Debug, Clone, Serialize)]
pub struct PeriodResult {
    pub period: String,
    /// `ingested` or `skipped` (data version unchanged).
    pub status: &'static str,
    pub data_version: String,
    pub seconds: f64,
    /// Of `seconds`: fetching, reading and checking the files.
    pub read_seconds: f64,
    /// Of `seconds`: the store's transaction.
    pub write_seconds: f64,
    pub reconciliation: Option<Reconciliation>,
}

/// Ingests every billing period the source's manifests describe (or the one asked for).
pub async fn ingest_cur(
    store: &dyn Store,
    options: &CurIngestOptions,
    progress: &indicatif::MultiProgress,
) -> Result<Vec<PeriodResult>, IngestError> {
    let (objects, folder_period): (Box<dyn ObjectStore>, Option<Period>) =
        if options.source.starts_with("s3://") {
            (Box::new(S3Store::connect(&options.source, &options.s3).await?), None)
        } else {
            let (folder, period) = cur_source::local_source(&PathBuf::from(&options.source))?;
            (Box::new(folder), period)
        };
    let only = match (options.period, folder_period) {
        (Some(asked), Some(folder)) if asked != folder => {
            return Err(IngestError::Other(format!(
                "--period {asked} does not match the billing-period folder {folder} given as SOURCE"
            )));
        }
        (asked, folder) => asked.or(folder),
    };
    let deliveries = cur_source::discover(objects.as_ref(), only).await?;
    let mut results = Vec::new();
    for delivery in deliveries {
        let period = delivery.period.to_string();
        if !options.force
            && store.last_data_version("cur", &period).await?.as_deref() == Some(&delivery.data_version)
        {
            results.push(PeriodResult {
                period,
                status: "skipped",
                data_version: delivery.data_version,
                seconds: 0.0,
                read_seconds: 0.0,
                write_seconds: 0.0,
                reconciliation: None,
            });
            continue;
        }
        results.push(ingest_period(store, objects.as_ref(), &delivery, progress).await?);
    }
    Ok(results)
}

async fn ingest_period(
    store: &dyn Store,
    objects: &dyn ObjectStore,
    delivery: &Delivery,
    progress: &indicatif::MultiProgress,
) -> Result<PeriodResult, IngestError> {
    let started = Instant::now();
    let started_at = chrono::Utc::now().timestamp();
    let scratch =
        cur::Scratch::new().map_err(|e| IngestError::Other(format!("creating a scratch folder: {e}")))?;
    // Fetch first: a manifest naming a missing file fails before any reading or writing.
    let mut files = Vec::new();
    for key in &delivery.data_files {
        files.push((objects.local_copy(key, &scratch.dir).await?, objects.locate(key)));
    }
    let bar = progress.add(indicatif::ProgressBar::new_spinner());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} {human_pos} rows ({per_sec})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_message(format!("{} ({} files)", delivery.period, files.len()));
    let period = delivery.period;
    let version = delivery.data_version.clone();
    let reading_bar = bar.clone();
    let (cost_period, reconciliation, mut facts) = tokio::task::spawn_blocking(move || {
        let mut builder = cur::PeriodBuilder::new(period, &version);
        for (path, location) in &files {
            builder.add_file(path, location, &reading_bar)?;
        }
        Ok::<_, CurError>(builder.finish())
    })
    .await
    .map_err(|e| IngestError::Other(format!("the reading task failed: {e}")))??;
    let read_seconds = started.elapsed().as_secs_f64();
    let fact_count = facts.len();
    bar.set_message(format!("{} writing {fact_count} facts", delivery.period));
    store.replace_cost_period_streamed(&cost_period, &mut facts).await?;
    drop(facts);
    let write_seconds = started.elapsed().as_secs_f64() - read_seconds;
    let run = store
        .begin_ingest_run(&NewIngestRun {
            kind: "cur".into(),
            source: objects.locate(&delivery.manifest_key),
            period: delivery.period.to_string(),
            data_version: delivery.data_version.clone(),
            started_at,
        })
        .await?;
    store
        .finish_ingest_run(
            run,
            &IngestOutcome {
                status: "succeeded".into(),
                rows_read: reconciliation.rows_read as i64,
                rows_written: (fact_count + cost_period.instance_hours.len() + cost_period.other_costs.len())
                    as i64,
                finished_at: chrono::Utc::now().timestamp(),
                error: None,
                reconciliation: serde_json::to_string(&reconciliation).ok(),
            },
        )
        .await?;
    bar.finish_with_message(format!("{} ingested", delivery.period));
    Ok(PeriodResult {
        period: delivery.period.to_string(),
        status: "ingested",
        data_version: delivery.data_version.clone(),
        seconds: started.elapsed().as_secs_f64(),
        read_seconds,
        write_seconds,
        reconciliation: Some(reconciliation),
    })
}
