//! Ingest: validates what a source delivers and writes one billing period at a time, each in
//! one transaction, with a progress bar on stderr.
//!
//! A period's facts stream into one open transaction while its files are read (reading and
//! writing overlap; memory holds a few batches), and the transaction commits only once every
//! file has read cleanly, so a bad file leaves the database as it was. A period whose data
//! version has not changed since its last successful ingest is skipped unless forced.

pub mod cost_explorer;
pub mod cur;
pub mod focus;
pub mod judge;
pub mod kube;
pub mod metrics;
pub mod scratch;
pub mod source;

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use crate::domain::runs::RunKind;
use crate::period::Period;
use crate::sources::SourceError;
use crate::sources::cur::{self as cur_source, Delivery};
use crate::sources::objects::{ObjectError, ObjectStore, S3Options, S3Store};
use crate::sources::spark::{self, SparkFile, SparkOptions};
use crate::store::{
    CostPeriod, FactBatch, NewIngestRun, PeriodSource, PeriodTail, PodRecord, Store, StoreError,
};

pub use cur::Reconciliation;

/// Why an ingest stopped. Nothing of the failing period was written.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Object(#[from] ObjectError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The delivery was read and judged unfit to replace the period ([`judge`]).
    #[error("{}", .0.message)]
    Refused(Box<judge::Refusal>),
    #[error("{0}")]
    Other(String),
}

/// What `gpuledger ingest cur` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct CurIngestOptions {
    /// A local export root or billing-period folder, or `s3://bucket/prefix/export-name`.
    pub source: String,
    pub period: Option<Period>,
    /// Ingest an unchanged data version again, and accept a bill that falls by more than
    /// `max_drop_percent`.
    pub force: bool,
    /// Accept a manifest whose `dataFiles` list is empty, or data files with no rows (the
    /// period becomes empty); refused otherwise, because replacing a period with nothing
    /// wipes it.
    pub allow_empty: bool,
    /// The largest fall of a stored period's amortized bill a re-delivery may bring without
    /// `force`; `None` for the bound in force for the period (`settings bounds`).
    pub max_drop_percent: Option<u32>,
    /// The largest rise of the days a stored period covers a re-delivery may bring without
    /// `force`; `None` for the bound in force for the period (`settings bounds`).
    pub max_rise_percent: Option<u32>,
    pub s3: S3Options,
    /// Aggregate the split rows on Spark (`--engine spark`); `None` reads every row here.
    pub spark: Option<SparkOptions>,
}

/// The outcome of one billing period.
#[derive(Debug, Clone, Serialize)]
pub struct PeriodResult {
    pub period: String,
    /// `ingested` or `skipped` (data version unchanged).
    pub status: &'static str,
    pub data_version: String,
    pub seconds: f64,
    /// Of `seconds`: until the last row was fetched, read and checked (writing overlaps it).
    pub read_seconds: f64,
    /// Of `seconds`: writing that was left once reading was done.
    pub write_seconds: f64,
    pub reconciliation: Option<Reconciliation>,
}

/// Ingests every billing period the source's manifests describe (or the one asked for).
pub async fn ingest_cur(
    store: &dyn Store,
    options: &CurIngestOptions,
    progress: &indicatif::MultiProgress,
) -> Result<Vec<PeriodResult>, IngestError> {
    source::ingest(options, store, progress).await
}

/// The CUR as a bill source: a delivery is a billing period's latest manifest.
#[async_trait::async_trait]
impl source::BillSource for CurIngestOptions {
    type Delivery = Delivery;
    type Outcome = PeriodResult;

    fn kind(&self) -> RunKind {
        RunKind::Cur
    }

    fn asked(&self) -> (String, String) {
        (self.source.clone(), self.period.map(|p| p.to_string()).unwrap_or_default())
    }

    async fn discover(&self) -> Result<(Box<dyn ObjectStore>, Vec<Delivery>), IngestError> {
        discover(self).await
    }

    /// The stored period's own version, committed with it: a run killed after its commit is
    /// not ingested again, and one killed before is.
    async fn unchanged(
        &self,
        store: &dyn Store,
        _objects: &dyn ObjectStore,
        delivery: &Delivery,
    ) -> Result<Option<PeriodResult>, IngestError> {
        let period = delivery.period.to_string();
        if self.force || store.cost_data_version(&period).await?.as_deref() != Some(&delivery.data_version) {
            return Ok(None);
        }
        Ok(Some(PeriodResult {
            period,
            status: "skipped",
            data_version: delivery.data_version.clone(),
            seconds: 0.0,
            read_seconds: 0.0,
            write_seconds: 0.0,
            reconciliation: None,
        }))
    }

    fn run(&self, objects: &dyn ObjectStore, delivery: &Delivery) -> NewIngestRun {
        NewIngestRun::now(
            RunKind::Cur,
            &objects.locate(&delivery.manifest_key),
            &delivery.period.to_string(),
            &delivery.data_version,
        )
    }

    async fn ingest(
        &self,
        store: &dyn Store,
        objects: &dyn ObjectStore,
        delivery: &Delivery,
        progress: &indicatif::MultiProgress,
    ) -> Result<source::Ingested<PeriodResult>, IngestError> {
        let period = delivery.period.to_string();
        // The bounds in force for the delivery's period, unless the command gave its own.
        let bounds = store.settings().await?.ingest_bounds(delivery.period).map_err(IngestError::Other)?;
        let allowance = judge::Allowance::of(
            bounds,
            self.force,
            self.allow_empty,
            self.max_drop_percent,
            self.max_rise_percent,
        );
        // What the delivery would replace, for the judge.
        let stored = match store.periods().await?.into_iter().find(|p| p.period == period) {
            Some(stored) => Some(judge::Figures {
                data_version: stored.data_version,
                cost_nanos: crate::money::Nanos::from_micros(stored.bill_amortized_micros).0,
                days: amortized_by_day(&store.bill(&period).await?.map(|p| p.bill_days).unwrap_or_default()),
            }),
            None => None,
        };
        let judged = Judged { stored, allowance };
        let (result, rows_written) =
            ingest_period(store, objects, delivery, self.spark.as_ref(), judged, progress).await?;
        let reconciliation = result.reconciliation.as_ref();
        Ok(source::Ingested {
            rows_read: reconciliation.map_or(0, |r| r.rows_read),
            rows_written: rows_written as u64,
            reconciliation: reconciliation.and_then(|r| serde_json::to_string(r).ok()),
            outcome: result,
        })
    }
}

/// The source's object store and the deliveries its manifests describe (or the one asked for).
async fn discover(options: &CurIngestOptions) -> Result<(Box<dyn ObjectStore>, Vec<Delivery>), IngestError> {
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
    if !options.allow_empty
        && let Some(empty) = deliveries.iter().find(|d| d.data_files.is_empty())
    {
        return Err(IngestError::Source(SourceError::Invalid {
            location: objects.locate(&empty.manifest_key),
            message: "the manifest lists no data files: ingesting it would empty the period \
                      (pass --allow-empty if the period really has no cost)"
                .into(),
        }));
    }
    Ok((objects, deliveries))
}

/// A bill's amortized cost per day in nano-dollars (tax lines included, as the days keep
/// them).
fn amortized_by_day(days: &[crate::store::BillDay]) -> std::collections::BTreeMap<i64, i64> {
    let mut by_day = std::collections::BTreeMap::new();
    for day in days {
        *by_day.entry(day.day).or_insert(0) += crate::money::Nanos::from_micros(day.amortized_micros).0;
    }
    by_day
}

/// What a delivery is judged against before it replaces its period.
#[derive(Debug, Clone)]
struct Judged {
    stored: Option<judge::Figures>,
    allowance: judge::Allowance,
}

/// Reads and writes one period; returns its result and how many rows it wrote. The delivery
/// is judged once read, before the store commits: a refused one leaves the period as it was.
#[tracing::instrument(skip_all, fields(period = %delivery.period, files = delivery.data_files.len()))]
async fn ingest_period(
    store: &dyn Store,
    objects: &dyn ObjectStore,
    delivery: &Delivery,
    spark: Option<&SparkOptions>,
    judged: Judged,
    progress: &indicatif::MultiProgress,
) -> Result<(PeriodResult, usize), IngestError> {
    let started = Instant::now();
    // `phase` events say where a run is, for people reading the log and for the crash test.
    tracing::debug!(phase = "read", "fetching, reading and writing the period");
    let scratch =
        scratch::Scratch::new().map_err(|e| IngestError::Other(format!("creating a scratch folder: {e}")))?;
    // Fetch first: a manifest naming a missing file fails before any reading or writing.
    // Spark reads the files where they lie: a local export's are only checked.
    let mut files = Vec::new();
    let mut spark_files = Vec::new();
    for key in &delivery.data_files {
        let location = objects.locate(key);
        match spark {
            // The job reads Parquet (CUR 2.0's own format) only.
            Some(_) if !location.to_lowercase().ends_with(".parquet") => {
                return Err(IngestError::Source(SourceError::Invalid {
                    location,
                    message: "the Spark engine reads Parquet exports only; ingest a CSV export with                               --engine local"
                        .into(),
                }));
            }
            Some(_) if location.starts_with("s3://") => {
                spark_files.push(SparkFile { uri: location.clone(), location })
            }
            Some(_) => {
                let path = objects.local_copy(key, &scratch.dir).await?;
                let uri = std::fs::canonicalize(&path).unwrap_or(path).display().to_string();
                spark_files.push(SparkFile { uri, location });
            }
            None => files.push((objects.local_copy(key, &scratch.dir).await?, location)),
        }
    }
    // The same bytes under two names would count twice. Spark reads an S3 export where it
    // lies, so only the files here are compared.
    let local: Vec<(PathBuf, String)> = files
        .iter()
        .cloned()
        .chain(
            spark_files
                .iter()
                .filter(|f| !f.uri.starts_with("s3://"))
                .map(|f| (PathBuf::from(&f.uri), f.location.clone())),
        )
        .collect();
    judge::refuse_same_contents(&local)?;
    let spark_job = match spark {
        Some(options) => {
            let output = spark::SparkOutput::open(options, delivery.period, &scratch.dir).await?;
            Some((options.clone(), spark_files, output))
        }
        None => None,
    };
    let bar = progress.add(indicatif::ProgressBar::new_spinner());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} {human_pos} rows ({per_sec})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_message(format!("{} ({} files)", delivery.period, files.len()));
    let period = delivery.period;
    let version = delivery.data_version.clone();
    let reading_bar = bar.clone();
    // Read on a blocking thread while the store writes what it has read: the two overlap,
    // and memory holds a few batches, not the month.
    let (sender, receiver) = tokio::sync::mpsc::channel::<FactBatch>(4);
    let reader = tokio::task::spawn_blocking(move || {
        let mut emit = |batch: FactBatch| sender.blocking_send(batch).is_ok();
        let mut builder = cur::PeriodBuilder::new(period, &version);
        for (path, location) in &files {
            builder.add_file(path, location, &reading_bar, &mut emit)?;
        }
        if let Some((options, files, out)) = &spark_job {
            read_pushed_down(&mut builder, options, period, files, out, &reading_bar, &mut emit)?;
        }
        builder.flush(&mut emit)?;
        let read_seconds = started.elapsed().as_secs_f64();
        Ok::<_, SourceError>((builder.finish()?, read_seconds))
    });
    let location = objects.locate(&delivery.manifest_key);
    let mut source = StreamedPeriod { receiver, reader: Some(reader), judged, location, outcome: None };
    let written = store.replace_cost_period_from(&delivery.period.to_string(), &mut source).await;
    let outcome = source.outcome.take();
    match (written, outcome) {
        (Ok(()), Some(Ok((reconciliation, read_seconds, rows_written)))) => {
            bar.finish_with_message(format!("{} ingested", delivery.period));
            let seconds = started.elapsed().as_secs_f64();
            tracing::debug!(
                rows_read = reconciliation.rows_read,
                rows_written,
                seconds,
                read_seconds,
                "period ingested"
            );
            let result = PeriodResult {
                period: delivery.period.to_string(),
                status: "ingested",
                data_version: delivery.data_version.clone(),
                seconds,
                read_seconds,
                write_seconds: seconds - read_seconds,
                reconciliation: Some(reconciliation),
            };
            Ok((result, rows_written))
        }
        // The reader's own error says which file and what; prefer it to the store's echo.
        (_, Some(Err(error))) => Err(error),
        (Err(error), _) => Err(error.into()),
        (Ok(()), None) => Err(IngestError::Other("the reader finished without a result".into())),
    }
}

/// Runs the period's Spark job and reads what it wrote into the builder: the bill's other
/// lines as a local export's, then the pods, then the pod-hours as facts.
fn read_pushed_down(
    builder: &mut cur::PeriodBuilder,
    options: &SparkOptions,
    period: Period,
    files: &[SparkFile],
    out: &spark::SparkOutput,
    bar: &indicatif::ProgressBar,
    emit: &mut dyn FnMut(FactBatch) -> bool,
) -> Result<(), SourceError> {
    let read = read_output(builder, options, period, files, out, bar, emit);
    // What the run wrote goes once read, or once it failed.
    out.remove();
    read
}

fn read_output(
    builder: &mut cur::PeriodBuilder,
    options: &SparkOptions,
    period: Period,
    files: &[SparkFile],
    out: &spark::SparkOutput,
    bar: &indicatif::ProgressBar,
    emit: &mut dyn FnMut(FactBatch) -> bool,
) -> Result<(), SourceError> {
    let pushed = spark::run(options, period, files, out, bar)?;
    bar.set_message(format!("{period}: reading Spark's output"));
    let named =
        |part: &str, path: &std::path::Path| format!("Spark's {part} of {period} ({})", path.display());
    for path in &pushed.lines {
        builder.add_file(path, &named("other lines", path), bar, emit)?;
    }
    let mut pods = Vec::new();
    for path in &pushed.pods {
        let first = pods.len();
        pods.extend(builder.add_spark_pods(path, &named("pods", path), first)?);
    }
    for path in &pushed.pod_hours {
        builder.add_spark_pod_hours(path, &named("pod-hours", path), &pods, bar, emit)?;
    }
    builder.add_spark_counts(pushed.split_rows, pushed.split_rows_skipped);
    Ok(())
}

/// What the reading thread hands back: the period's reconciliation, when reading ended, and
/// how many rows the period wrote.
type ReadOutcome = Result<(Reconciliation, f64, usize), IngestError>;

/// The reading thread seen as the store's [`PeriodSource`].
struct StreamedPeriod {
    receiver: tokio::sync::mpsc::Receiver<FactBatch>,
    reader: Option<tokio::task::JoinHandle<Result<(PeriodParts, f64), SourceError>>>,
    judged: Judged,
    /// Where the delivery is (its manifest), for its bill.
    location: String,
    outcome: Option<ReadOutcome>,
}

/// The builder's result: the period without facts, its reconciliation, pod attributes.
type PeriodParts = (CostPeriod, Reconciliation, Vec<PodRecord>);

#[async_trait::async_trait]
impl PeriodSource for StreamedPeriod {
    async fn next_batch(&mut self) -> Option<FactBatch> {
        self.receiver.recv().await
    }

    async fn finish(&mut self) -> Result<PeriodTail, String> {
        let joined = match self.reader.take() {
            Some(reader) => reader.await.map_err(|e| SourceError::Invalid {
                location: "ingest".into(),
                message: format!("the reading task failed: {e}"),
            }),
            None => Err(SourceError::Invalid { location: "ingest".into(), message: "finished twice".into() }),
        };
        match joined.and_then(|result| result) {
            Ok(((period, reconciliation, pods), read_seconds)) => {
                let delivered = judge::Delivered {
                    period: &period.period,
                    which: None,
                    deliverer: "AWS",
                    rows_read: reconciliation.rows_read,
                    // The CUR's periods are kept in dollars.
                    currency: "USD",
                    bill: judge::Figures {
                        data_version: period.data_version.clone(),
                        cost_nanos: crate::money::Nanos::from_micros(period.bill_amortized_micros).0,
                        days: amortized_by_day(&period.bill_days),
                    },
                };
                if let Some(refusal) =
                    judge::judge(&delivered, self.judged.stored.as_ref(), self.judged.allowance)
                {
                    let message = refusal.message.clone();
                    self.outcome = Some(Err(IngestError::Refused(Box::new(refusal))));
                    return Err(message);
                }
                tracing::debug!(phase = "write", read_seconds, "read; writing the rest of the period");
                let rows = reconciliation.split_rows as usize
                    + period.instance_hours.len()
                    + period.other_costs.len()
                    + period.bill_lines.len();
                let bill = crate::store::Bill {
                    source: self.location.clone(),
                    rows_read: reconciliation.rows_read as i64,
                    ingested_at: chrono::Utc::now().timestamp(),
                    ..period.as_bill()
                };
                self.outcome = Some(Ok((reconciliation, read_seconds, rows)));
                Ok(PeriodTail { period, pods, bill })
            }
            Err(error) => {
                let message = error.to_string();
                self.outcome = Some(Err(error.into()));
                Err(message)
            }
        }
    }
}
