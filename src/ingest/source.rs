//! The seam every bill source is ingested through. A source (the CUR, FOCUS; a third would be
//! a third implementation and one `ingest` subcommand) says how its deliveries are found in a
//! folder or an object store and how one is read, checked, judged ([`super::judge`]) and
//! written; [`ingest`] does the rest the same way for every source: scratch folders of killed
//! ingests removed, a source that cannot be read recorded as a failed run, each delivery
//! recorded as a run of its own (succeeded, refused with the numbers it was judged on, or
//! failed), and the first delivery that stops stopping the ingest with the ledger as it was.

use super::IngestError;
use crate::domain::runs::RunKind;
use crate::sources::objects::ObjectStore;
use crate::store::{IngestOutcome, NewIngestRun, Store};

/// One bill source, as asked for by one `ingest` command.
#[async_trait::async_trait]
pub trait BillSource: Sync {
    /// What its deliveries are: a CUR billing period's manifest, a FOCUS export run or folder.
    type Delivery: Send + Sync;
    /// What one delivery's ingest reports (printed as JSON by the command).
    type Outcome: Send;

    /// Its runs' kind.
    fn kind(&self) -> RunKind;

    /// Where it is and the billing period asked for (empty for all), for the run recorded
    /// when nothing can be found there.
    fn asked(&self) -> (String, String);

    /// The source's object store and the deliveries it holds (of the period asked for).
    async fn discover(&self) -> Result<(Box<dyn ObjectStore>, Vec<Self::Delivery>), IngestError>;

    /// A delivery already ingested as it is, and what that reports: skipped without a run.
    async fn unchanged(
        &self,
        store: &dyn Store,
        objects: &dyn ObjectStore,
        delivery: &Self::Delivery,
    ) -> Result<Option<Self::Outcome>, IngestError>;

    /// The run a delivery is recorded as (where it is, its period, its data version).
    fn run(&self, objects: &dyn ObjectStore, delivery: &Self::Delivery) -> NewIngestRun;

    /// Reads, checks, judges and writes one delivery: all of it, or nothing.
    async fn ingest(
        &self,
        store: &dyn Store,
        objects: &dyn ObjectStore,
        delivery: &Self::Delivery,
        progress: &indicatif::MultiProgress,
    ) -> Result<Ingested<Self::Outcome>, IngestError>;
}

/// What one delivery's ingest gives back, and what its run records.
#[derive(Debug)]
pub struct Ingested<T> {
    pub outcome: T,
    pub rows_read: u64,
    pub rows_written: u64,
    /// The reconciliation (bill totals, split against its parents), as JSON.
    pub reconciliation: Option<String>,
}

/// Ingests every delivery `source` holds, one run each.
pub async fn ingest<S: BillSource>(
    source: &S,
    store: &dyn Store,
    progress: &indicatif::MultiProgress,
) -> Result<Vec<S::Outcome>, IngestError> {
    super::scratch::remove_abandoned_scratch();
    let (objects, deliveries) = match source.discover().await {
        Ok(found) => found,
        Err(error) => {
            // Nothing was found to ingest: the failure is recorded as a run of the whole source.
            let (location, period) = source.asked();
            let run =
                store.begin_ingest_run(&NewIngestRun::now(source.kind(), &location, &period, "")).await?;
            store.finish_ingest_run(run, &IngestOutcome::failed(&error.to_string())).await?;
            return Err(error);
        }
    };
    let mut outcomes = Vec::new();
    for delivery in &deliveries {
        if let Some(skipped) = source.unchanged(store, objects.as_ref(), delivery).await? {
            outcomes.push(skipped);
            continue;
        }
        let run = store.begin_ingest_run(&source.run(objects.as_ref(), delivery)).await?;
        match source.ingest(store, objects.as_ref(), delivery, progress).await {
            Ok(ingested) => {
                let succeeded = IngestOutcome::succeeded(
                    ingested.rows_read as i64,
                    ingested.rows_written as i64,
                    ingested.reconciliation,
                );
                store.finish_ingest_run(run, &succeeded).await?;
                outcomes.push(ingested.outcome);
            }
            Err(error) => {
                if let Err(record) = store.finish_ingest_run(run, &refused_or_failed(&error)).await {
                    tracing::error!(run, %record, "could not record the failed ingest run");
                }
                return Err(error);
            }
        }
    }
    Ok(outcomes)
}

/// How a run that stopped on `error` is recorded: refused by the judge, with the numbers it
/// was judged on, or failed.
fn refused_or_failed(error: &IngestError) -> IngestOutcome {
    match error {
        IngestError::Refused(refusal) => {
            tracing::warn!(period = %refusal.period, "{}", refusal.message);
            IngestOutcome::refused(&refusal.message, serde_json::to_string(refusal).ok())
        }
        _ => IngestOutcome::failed(&error.to_string()),
    }
}
