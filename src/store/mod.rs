//! The store: the only place that speaks SQL.
//!
//! [`Store`] is one trait with two implementations, [`sqlite::SqliteStore`] (the embedded
//! default) and [`postgres::PgStore`] (for teams). Each backend has its own migrations under
//! `migrations/<backend>/`, embedded in the binary and applied on [`connect`].
//!
//! Invariants every implementation keeps:
//! - a billing period is replaced whole in one transaction ([`Store::replace_cost_period`]):
//!   readers see the old period or the new one, never a mix, and a failure leaves the old one;
//! - money is integer micro-dollars, time is UTC epoch seconds.

mod migrations;
pub mod model;
pub mod postgres;
mod shared;
mod sql;
pub mod sqlite;

use async_trait::async_trait;

pub use model::*;

/// Errors from the store, already saying which backend and operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error while {context}: {source}")]
    Sql {
        context: &'static str,
        #[source]
        source: sqlx::Error,
    },
    #[error("could not apply migration {version} ({name}): {source}")]
    Migration {
        version: i64,
        name: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("unsupported database URL {0:?}: expected sqlite:PATH or postgres://...")]
    UnsupportedUrl(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Adds what was being done to a sqlx error.
pub(crate) trait SqlContext<T> {
    fn context(self, context: &'static str) -> StoreResult<T>;
}

impl<T> SqlContext<T> for Result<T, sqlx::Error> {
    fn context(self, context: &'static str) -> StoreResult<T> {
        self.map_err(|source| StoreError::Sql { context, source })
    }
}

/// Supplies cost facts batch by batch, so a large month is written without ever being
/// materialized as rows.
pub trait FactBatches {
    /// The next batch, or `None` when done. Pod ids are unique within a period; a batch
    /// carries the pods its facts are the first to mention.
    fn next_batch(&mut self) -> Option<FactBatch>;
}

/// A source with nothing more to give.
pub struct NoMoreFacts;

impl FactBatches for NoMoreFacts {
    fn next_batch(&mut self) -> Option<FactBatch> {
        None
    }
}

/// Everything gpuledger keeps, behind one interface so SQLite and Postgres pass the same tests.
#[async_trait]
pub trait Store: Send + Sync {
    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

    /// Applies the embedded migrations that are not applied yet; returns how many ran.
    async fn migrate(&self) -> StoreResult<usize>;

    /// Records the start of an ingest run and returns its id.
    async fn begin_ingest_run(&self, run: &NewIngestRun) -> StoreResult<i64>;

    /// Records how an ingest run ended.
    async fn finish_ingest_run(&self, id: i64, outcome: &IngestOutcome) -> StoreResult<()>;

    /// Ingest runs, newest first.
    async fn ingest_runs(&self, limit: i64) -> StoreResult<Vec<IngestRun>>;

    /// The data version of the last successful ingest of `kind` for `period`, if any.
    async fn last_data_version(&self, kind: &str, period: &str) -> StoreResult<Option<String>>;

    /// Replaces a billing period whole, in one transaction: the period's previous cost facts,
    /// instance hours and other costs are removed and the new ones written.
    async fn replace_cost_period(&self, period: &CostPeriod) -> StoreResult<()> {
        self.replace_cost_period_streamed(period, &mut NoMoreFacts).await
    }

    /// [`Store::replace_cost_period`] for months too large to hold as rows: the facts
    /// `more_facts` yields are written in the same transaction (and `period.cost_facts` must
    /// then be empty, since pod ids are numbered by the source).
    async fn replace_cost_period_streamed(
        &self,
        period: &CostPeriod,
        more_facts: &mut (dyn FactBatches + Send),
    ) -> StoreResult<()>;

    /// Reads a billing period back, rows in a stable order (hour, then keys).
    async fn cost_period(&self, period: &str) -> StoreResult<Option<CostPeriod>>;

    /// Cost per namespace (per cluster and namespace when `by_cluster`) for a period,
    /// optionally limited to one cluster; ordered by cluster, then namespace.
    async fn namespace_costs(
        &self,
        period: &str,
        cluster: Option<&str>,
        by_cluster: bool,
    ) -> StoreResult<Vec<NamespaceCost>>;

    /// Stored billing periods, newest first.
    async fn periods(&self) -> StoreResult<Vec<PeriodSummary>>;

    /// Replaces GPU usage and inference usage for hours in `[from, to)`, in one transaction.
    async fn replace_usage_window(
        &self,
        from: i64,
        to: i64,
        gpu: &[GpuUsage],
        inference: &[InferenceUsage],
    ) -> StoreResult<()>;

    /// GPU usage rows with `from <= hour < to`, in a stable order.
    async fn gpu_usage(&self, from: i64, to: i64) -> StoreResult<Vec<GpuUsage>>;

    /// Inference rows with `from <= hour < to`, in a stable order.
    async fn inference_usage(&self, from: i64, to: i64) -> StoreResult<Vec<InferenceUsage>>;

    /// Replaces all client mapping rules.
    async fn set_client_rules(&self, rules: &[ClientRule]) -> StoreResult<()>;

    /// Client mapping rules by priority.
    async fn client_rules(&self) -> StoreResult<Vec<ClientRule>>;
}

/// Opens the database named by `url` and applies pending migrations.
///
/// `sqlite:PATH` (created when missing) or `postgres://...`.
pub async fn connect(url: &str) -> StoreResult<Box<dyn Store>> {
    let store: Box<dyn Store> = if url.starts_with("sqlite:") {
        Box::new(sqlite::SqliteStore::open(url).await?)
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Box::new(postgres::PgStore::open(url).await?)
    } else {
        return Err(StoreError::UnsupportedUrl(url.to_string()));
    };
    store.migrate().await?;
    Ok(store)
}
