//! The store: the only place that speaks SQL.
//!
//! [`Store`] is one trait per domain ([`RunStore`], [`CostStore`], [`UsageStore`],
//! [`RollupStore`], [`SettingsStore`], [`AccountStore`], [`InvoiceStore`],
//! [`CostExplorerStore`], [`AlertStore`]) gathered under one name, with one implementation,
//! [`SqlStore<B>`], generic over a [`Backend`]: [`sqlite::Sqlite`] (the embedded default,
//! [`sqlite::SqliteStore`]) and [`postgres::Postgres`] (for teams, [`postgres::PgStore`]). Both
//! run the same SQL text (`sql.rs`, `sql_rollups.rs`, each table's columns written once with
//! `table!`); a backend names only its driver, bind limit, transaction begins, write lock and
//! migrations. Each backend has its own migrations under
//! `migrations/<backend>/`, embedded in the binary and applied on [`connect`].
//!
//! Invariants every implementation keeps:
//! - a billing period is replaced whole in one transaction ([`Store::replace_cost_period`]):
//!   readers see the old period or the new one, never a mix, and a failure leaves the old one;
//! - money is integer micro-dollars, time is UTC epoch seconds.

mod aggregate;
pub mod migrations;
pub mod model;
pub mod postgres;
pub(crate) mod sql;
mod sql_rollups;
mod sql_store;
pub mod sqlite;
pub(crate) mod table;

use async_trait::async_trait;

pub use crate::domain::alerts::{Alert, AlertEvent, PendingDelivery, Webhook};
pub use crate::domain::clients::{ClientRule, MatchKind};
pub use crate::domain::fx::FxRate;
pub use crate::domain::invoices::{BillingDetails, Invoice, Seller};
pub use crate::domain::plans::Plan;
pub use crate::domain::runs::{IngestOutcome, IngestRun, LockHolder, NewIngestRun, RunKind, RunStatus};
pub use crate::domain::settings::{SettingVersion, SettingsHistory};
pub use crate::domain::users::{AuditEntry, AuditQuery, LoginFailures, Session, User};
pub use migrations::SchemaStatus;
pub use model::*;
pub use sql_store::{Backend, SqlStore};

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
    #[error(
        "migration {version} ({name}) was edited after it was applied: the database recorded \
         checksum {recorded}, this gpuledger embeds {embedded}; restore the file and add a new migration instead"
    )]
    EditedMigration { version: i64, name: String, recorded: String, embedded: String },
    #[error(
        "the database schema is at version {applied} but this gpuledger needs version {latest}: \
         run `gpuledger migrate` with a role that may change the schema, then start again"
    )]
    SchemaOutOfDate { applied: i64, latest: i64 },
    /// A newer compute already wrote the period's rollups.
    #[error("{0}")]
    Stale(String),
    #[error("unsupported database URL {0:?}: expected sqlite:PATH or postgres://...")]
    UnsupportedUrl(String),
    /// The source of a streamed period failed; nothing was committed.
    #[error("{0}")]
    Source(String),
    /// A stored value this gpuledger cannot read or write (a setting, a snapshot).
    #[error("{0}")]
    Invalid(String),
    /// The period's detail rows were archived: what needs them is refused rather than
    /// answered from an empty period.
    #[error(
        "billing period {} was archived on {} to {}: its pods, pod-days and instance-hours are \
         not in the database (its bill, rollups and invoices are); `gpuledger archive restore {}` \
         brings them back",
        .0.period,
        crate::period::utc_minute(.0.archived_at),
        .0.location,
        .0.location
    )]
    Archived(Box<ArchivedPeriod>),
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

/// A billing period delivered as a stream, so a large month is written while it is still
/// being read: facts batch by batch first, then the period's bill rows.
#[async_trait]
pub trait PeriodSource: Send {
    /// The next batch of facts (with the pods they first mention), or `None` when done.
    async fn next_batch(&mut self) -> Option<FactBatch>;

    /// Once the facts are done: the period (bill totals, instance-hours, other costs; its
    /// `cost_facts` are ignored) and the pods not sent with the batches, with the instance
    /// attributes learned once every parent line was read.
    /// An error here (a bad file found late) abandons the whole replace.
    async fn finish(&mut self) -> Result<PeriodTail, String>;
}

/// What a [`PeriodSource`] knows only at the end.
#[derive(Debug, Clone, Default)]
pub struct PeriodTail {
    pub period: CostPeriod,
    /// The period's bill as one of the month's bills: its row in [`BillStore::bills`], with
    /// every other source's, replaced with the period.
    pub bill: Bill,
    /// Pods the batches' facts point at but did not carry: written in bulk at the end, with
    /// their instance's attributes (a churny month has hundreds of thousands).
    pub pods: Vec<PodRecord>,
}

/// A period already whole in memory, as one batch.
struct WholePeriod<'a> {
    period: &'a CostPeriod,
    sent: bool,
}

#[async_trait]
impl PeriodSource for WholePeriod<'_> {
    async fn next_batch(&mut self) -> Option<FactBatch> {
        if std::mem::replace(&mut self.sent, true) {
            return None;
        }
        Some(sql::normalize(&self.period.cost_facts))
    }

    async fn finish(&mut self) -> Result<PeriodTail, String> {
        let period = CostPeriod { cost_facts: Vec::new(), ..self.period.clone() };
        let bill = Bill { ingested_at: chrono::Utc::now().timestamp(), ..period.as_bill() };
        Ok(PeriodTail { bill, period, pods: Vec::new() })
    }
}

/// Ingest and compute runs, the data revision and the periods waiting to be computed.
#[async_trait]
pub trait RunStore: Send + Sync {
    /// Records the start of an ingest run and returns its id.
    async fn begin_ingest_run(&self, run: &NewIngestRun) -> StoreResult<i64>;

    /// Records how an ingest run ended.
    async fn finish_ingest_run(&self, id: i64, outcome: &IngestOutcome) -> StoreResult<()>;

    /// Ingest runs, newest first.
    async fn ingest_runs(&self, limit: i64) -> StoreResult<Vec<IngestRun>>;

    /// The data version of the last successful ingest of `kind` for `period`, if any.
    async fn last_data_version(&self, kind: RunKind, period: &str) -> StoreResult<Option<String>>;

    /// Marks this host's runs still `running` whose process is not `alive` as `interrupted`;
    /// returns how many.
    async fn close_abandoned_runs(
        &self,
        host: &str,
        alive: &(dyn Fn(i64) -> bool + Sync),
    ) -> StoreResult<usize>;

    /// Billing periods whose rollups are missing or older than their inputs, oldest first.
    async fn pending_periods(&self) -> StoreResult<Vec<String>>;

    /// A counter every write of data or rollups raises: what caches key on.
    async fn data_revision(&self) -> StoreResult<i64>;

    /// The revision of a period's inputs (its CUR, its bills, its metrics): what its rollups
    /// were computed from must be it to be current. 1 for a period never written.
    async fn input_revision(&self, period: &str) -> StoreResult<i64>;

    /// Takes the lock `name` for `holder` when it is free, already `holder`'s, or its holder
    /// is gone (no heartbeat since `stale_before`, or a process no longer `alive` on this
    /// host). `Ok(None)`: taken; `Ok(Some(other))`: held by another.
    async fn acquire_lock(
        &self,
        name: &str,
        holder: &LockHolder,
        stale_before: i64,
        alive: &(dyn Fn(i64) -> bool + Sync),
    ) -> StoreResult<Option<LockHolder>>;

    /// Says `holder` is still alive (`at`); false when it no longer holds the lock.
    async fn heartbeat_lock(&self, name: &str, holder: &LockHolder, at: i64) -> StoreResult<bool>;

    /// Lets the lock go, if `holder` has it.
    async fn release_lock(&self, name: &str, holder: &LockHolder) -> StoreResult<()>;
}

/// Billing periods: the bill as ingested, its pods and their aggregates, and what `compute` reads of them.
#[async_trait]
pub trait CostStore: Send + Sync {
    /// The data version of the stored bill of `period` (written in the same transaction as
    /// the bill, so it can never name data that did not land).
    async fn cost_data_version(&self, period: &str) -> StoreResult<Option<String>>;

    /// Replaces a billing period whole, in one transaction: the period's previous pods, pod-day
    /// and GPU pod-hour sums, instance hours, other costs and bill lines are removed and the new
    /// ones written. The period's facts are summed into the pod-day and GPU pod-hour sums, not
    /// stored line by line.
    async fn replace_cost_period(&self, period: &CostPeriod) -> StoreResult<()> {
        self.replace_cost_period_from(&period.period, &mut WholePeriod { period, sent: false }).await
    }

    /// [`Store::replace_cost_period`] for months too large to hold: what `source` streams is
    /// written as it comes, in the same one transaction, committed only after
    /// [`PeriodSource::finish`] succeeds.
    async fn replace_cost_period_from(&self, period: &str, source: &mut dyn PeriodSource) -> StoreResult<()>;

    /// Reads a billing period back, rows in a stable order (hour, then keys). Its `cost_facts`
    /// are empty unless the period was stored before facts were summed.
    async fn cost_period(&self, period: &str) -> StoreResult<Option<CostPeriod>>;

    /// A billing period's bill: its totals, other costs and bill lines (no facts or
    /// instance-hours).
    async fn bill(&self, period: &str) -> StoreResult<Option<CostPeriod>>;

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

    /// A billing period's instance-hours of one Kubernetes cluster (what a split divides), by
    /// hour and instance.
    async fn cluster_instance_hours(&self, period: &str, cluster: &str) -> StoreResult<Vec<InstanceHour>>;

    /// Every stored month of each Savings Plan and reservation, by period then id.
    async fn commitment_months(&self) -> StoreResult<Vec<(String, CommitmentMonth)>>;

    /// The instance-hours of the billing periods `from..=to` (`YYYY-MM`) per hour, instance
    /// type and purchase option; an archived period's are not there.
    async fn usage_hours(&self, from: &str, to: &str) -> StoreResult<Vec<UsageHour>>;

    /// Each pod's accelerator (GPU) split usage per hour in a billing period.
    async fn gpu_allocations(&self, period: &str) -> StoreResult<Vec<GpuAllocation>>;

    /// Split + unused cost per workload in a billing period.
    async fn workload_costs(&self, period: &str) -> StoreResult<Vec<WorkloadCost>>;

    /// A workload's pods with their cost over `[from, to)` (day starts) of a billing period,
    /// with the pods of every workload named `workload-…` (a CronJob's runs are Jobs named
    /// `cronjob-<schedule>`): the caller keeps those of the family it means.
    async fn pod_costs(
        &self,
        period: &str,
        namespace: &str,
        workload: &str,
        from: i64,
        to: i64,
    ) -> StoreResult<Vec<PodCost>>;

    /// The pods a billing period's bill names, with their workloads.
    async fn pod_workloads(&self, period: &str) -> StoreResult<Vec<PodWorkload>>;

    /// What `compute` needs of a billing period's bill, or `None` when it is not stored; the
    /// measured GPU-hours below `idle_threshold` are counted per GPU (or MIG instance).
    async fn compute_inputs(&self, period: &str, idle_threshold: f64) -> StoreResult<Option<ComputeInputs>>;

    /// What `compute` needs of a billing period without a CUR (its FOCUS bills alone): the
    /// metrics' part of [`ComputeInputs`] (`measured`, `unattributed`, `served`) and its
    /// input revision, so idle and cost per inference reach the pods of gpuledger's splits.
    async fn metrics_inputs(&self, period: &str, idle_threshold: f64) -> StoreResult<ComputeInputs>;
}

/// Measured GPU and inference usage, per hour.
#[async_trait]
pub trait UsageStore: Send + Sync {
    /// Replaces GPU usage and inference usage for hours in `[from, to)` of each of
    /// `clusters` (of every cluster for `""`), in one transaction.
    async fn replace_usage_window(
        &self,
        from: i64,
        to: i64,
        clusters: &[&str],
        gpu: &[GpuUsage],
        inference: &[InferenceUsage],
    ) -> StoreResult<()>;

    /// GPU usage rows with `from <= hour < to`, in a stable order.
    async fn gpu_usage(&self, from: i64, to: i64) -> StoreResult<Vec<GpuUsage>>;

    /// Inference rows with `from <= hour < to`, in a stable order.
    async fn inference_usage(&self, from: i64, to: i64) -> StoreResult<Vec<InferenceUsage>>;

    /// Replaces the Kubernetes nodes and pods of hours in `[from, to)` of each of `clusters`
    /// (of every cluster for `""`), in one transaction.
    async fn replace_kube_window(
        &self,
        from: i64,
        to: i64,
        clusters: &[&str],
        nodes: &[KubeNodeHour],
        pods: &[KubePodHour],
    ) -> StoreResult<()>;

    /// The clusters with Kubernetes nodes in `from <= hour < to`, by name.
    async fn kube_clusters(&self, from: i64, to: i64) -> StoreResult<Vec<String>>;

    /// The Kubernetes nodes and pods with `from <= hour < to`, of one `cluster` (of every
    /// cluster when empty), in a stable order.
    async fn kube_hours(
        &self,
        from: i64,
        to: i64,
        cluster: &str,
    ) -> StoreResult<(Vec<KubeNodeHour>, Vec<KubePodHour>)>;
}

/// Every client gpuledger knows: named by a setting (terms, a budget, a mapping rule), with
/// billing details, or with a chargeback line in a computed month. A user's clients are
/// checked against it.
pub async fn known_clients(store: &dyn Store) -> StoreResult<std::collections::BTreeSet<String>> {
    let mut known = store.settings().await?.client_names();
    known.extend(store.billing_details().await?.into_keys());
    known.extend(store.rollup_client_names().await?);
    Ok(known)
}

/// What `compute` materializes per period, and the chargebacks it replaced.
#[async_trait]
pub trait RollupStore: Send + Sync {
    /// Replaces a period's rollups whole, in one transaction. Refused ([`StoreError::Stale`])
    /// when the period's inputs changed since they were read, or newer rollups are stored.
    async fn replace_rollups(&self, rollups: &Rollups) -> StoreResult<()>;

    /// A period's rollups, or `None` when it was not computed.
    async fn rollups(&self, period: &str) -> StoreResult<Option<Rollups>>;

    /// Computed periods, newest first.
    async fn rollup_periods(&self) -> StoreResult<Vec<PeriodRollup>>;

    /// Every client with a chargeback line in some computed period, by name.
    async fn rollup_client_names(&self) -> StoreResult<Vec<String>>;

    /// A period's chargeback as it stood before each compute that changed it, newest first.
    async fn chargeback_snapshots(&self, period: &str) -> StoreResult<Vec<ChargebackSnapshot>>;
}

/// Settings (clients, pools, mappings, engine) with the month each takes effect.
#[async_trait]
pub trait SettingsStore: Send + Sync {
    /// Every stored version of every setting.
    async fn settings(&self) -> StoreResult<SettingsHistory>;

    /// Saves versions of settings in one transaction, each replacing the stored version of
    /// the same setting and month.
    async fn save_settings(&self, versions: &[SettingVersion]) -> StoreResult<()>;
}

/// Accounts, sessions and the audit log. Of these, a dashboard writes sessions and the audit
/// log on every login, users only from the admin pages.
#[async_trait]
pub trait AccountStore: Send + Sync {
    /// Adds a user; refused ([`StoreError::Invalid`]) when the name is taken.
    async fn create_user(&self, user: &User) -> StoreResult<i64>;

    /// Every user, by name.
    async fn users(&self) -> StoreResult<Vec<User>>;

    /// The user named `name`, if any.
    async fn user(&self, name: &str) -> StoreResult<Option<User>>;

    /// Saves a user's role, clients, password hash and disabled flag; with `end_sessions`
    /// its sessions are deleted in the same transaction.
    async fn update_user(&self, user: &User, end_sessions: bool) -> StoreResult<()>;

    /// Stores a new session.
    async fn create_session(&self, session: &Session) -> StoreResult<()>;

    /// The session with this token hash and its user, if both exist.
    async fn session(&self, token_hash: &str) -> StoreResult<Option<(Session, User)>>;

    /// Marks a session used at `now`.
    async fn touch_session(&self, token_hash: &str, now: i64) -> StoreResult<()>;

    /// Ends one session.
    async fn delete_session(&self, token_hash: &str) -> StoreResult<()>;

    /// Deletes sessions idle since before `idle_before` or created before `created_before`;
    /// returns how many.
    async fn delete_expired_sessions(&self, idle_before: i64, created_before: i64) -> StoreResult<u64>;

    /// Appends to the audit log.
    async fn audit(&self, entry: &AuditEntry) -> StoreResult<()>;

    /// Counts a download of `page` by `username` at `at` in the audit log: one row per user,
    /// page and hour, its `count` the downloads of that hour.
    async fn audit_download(&self, username: &str, page: &str, at: i64) -> StoreResult<()>;

    /// The audit entries `query` asks for, newest first.
    async fn audit_log(&self, query: &AuditQuery) -> StoreResult<Vec<AuditEntry>>;

    /// How many `action` entries since `since` name `username` (when given) or come from
    /// `address` (when given).
    async fn count_audit(
        &self,
        action: &str,
        since: i64,
        username: Option<&str>,
        address: Option<&str>,
    ) -> StoreResult<i64>;

    /// A secret every dashboard replica of this database shares (`proxy_csrf`), made with the
    /// schema; `None` when it is not there.
    async fn web_secret(&self, name: &str) -> StoreResult<Option<String>>;

    /// Takes one sign-in attempt for `subject` (an account or an address, as `scope` says) in
    /// one statement, so that simultaneous attempts are counted one after another: returns the
    /// attempts in its window, this one included, and when the window started. A window lasts
    /// `window` seconds from the first attempt after the last window ended.
    async fn take_login_attempt(
        &self,
        scope: &str,
        subject: &str,
        now: i64,
        window: i64,
    ) -> StoreResult<(i64, i64)>;

    /// Stores a one-time sign-in code of `username` (its hash) until `expires_at`.
    async fn add_sign_in_code(&self, username: &str, code_hash: &str, expires_at: i64) -> StoreResult<()>;

    /// Uses up `username`'s code of this hash if it is stored and unexpired at `now`: true
    /// when it was (and it is gone now), false otherwise.
    async fn take_sign_in_code(&self, username: &str, code_hash: &str, now: i64) -> StoreResult<bool>;

    /// Gives back an attempt of the window that started at `window_start` (one that signed in).
    async fn return_login_attempt(&self, scope: &str, subject: &str, window_start: i64) -> StoreResult<()>;

    /// Counts a refused sign-in in the row of its account, address and window.
    async fn record_login_failure(
        &self,
        username: &str,
        address: &str,
        window_start: i64,
        at: i64,
    ) -> StoreResult<()>;

    /// Refused sign-ins per account, address and window since `since`, newest first.
    async fn login_failures(&self, since: i64, limit: i64) -> StoreResult<Vec<LoginFailures>>;
}

/// Cost Explorer's daily cost per service and linked account, and which days were fetched
/// when (what decides the days a next run asks for again).
#[async_trait]
pub trait CostExplorerStore: Send + Sync {
    /// The days of `[from, to)` fetched so far, by day.
    async fn ce_days(&self, from: i64, to: i64) -> StoreResult<Vec<CeDay>>;

    /// The stored cost of the days of `[from, to)`, by day, service and account.
    async fn ce_costs(&self, from: i64, to: i64) -> StoreResult<Vec<CeCost>>;

    /// Linked accounts' names, by account id.
    async fn ce_accounts(&self) -> StoreResult<std::collections::BTreeMap<String, String>>;

    /// Replaces the days of each window's `[from, to)` whole, all in one transaction: their
    /// stored cost and fetch records are removed and the windows' written; account names are
    /// updated. Raises the data revision.
    async fn replace_ce_windows(&self, windows: &[CeWindow]) -> StoreResult<()>;
}

/// Bills from every provider and format, several a month: each keyed by (period, provider,
/// billing account, format) and replaced alone.
#[async_trait]
pub trait BillStore: Send + Sync {
    /// The stored bills of a period (every period for `None`), by period, provider, account
    /// and format.
    async fn bills(&self, period: Option<&str>) -> StoreResult<Vec<Bill>>;

    /// A period's FOCUS charges, of one provider or all.
    async fn bill_charges(&self, period: &str, provider: Option<&str>) -> StoreResult<Vec<BillCharge>>;

    /// A period's FOCUS charges summed over its days (each group's `day` its first), of one
    /// provider or all: what the month's figures need, a row per group instead of per day.
    async fn month_charges(&self, period: &str, provider: Option<&str>) -> StoreResult<Vec<BillCharge>>;

    /// A period's FOCUS charges of GPU machines (`gpu_model` not empty) by day, of every bill:
    /// the GPU fleet's days.
    async fn gpu_charges(&self, period: &str) -> StoreResult<Vec<BillCharge>>;

    /// Replaces each bill with its charges and virtual machines' costs, all in one
    /// transaction: what was stored under each bill's key goes, nothing else. Raises the data
    /// revision.
    async fn replace_bills(&self, bills: &[BillReplacement]) -> StoreResult<()>;

    /// A period's FOCUS virtual machines' costs per charge period, of every bill.
    async fn bill_vm_costs(&self, period: &str) -> StoreResult<Vec<BillVmCost>>;

    /// The same costs as stored: per machine, day and charge group, the periods packed
    /// ([`BillVmDay::unpack`]), for a reader that need not name each period.
    async fn bill_vm_days(&self, period: &str) -> StoreResult<Vec<BillVmDay>>;

    /// Every exchange rate version, by pair and month.
    async fn fx_rates(&self) -> StoreResult<Vec<FxRate>>;

    /// Stores rate versions in one transaction, each replacing the version of its pair and
    /// month; an audit entry for each. Raises the data revision.
    async fn set_fx_rates(&self, rates: &[FxRate], username: &str) -> StoreResult<()>;
}

/// Cost alerts, their events and where they are delivered.
#[async_trait]
pub trait AlertStore: Send + Sync {
    /// Every alert, firing first, then by rule and subject.
    async fn alerts(&self) -> StoreResult<Vec<Alert>>;

    /// Records one evaluation in one transaction: `firing` is everything that fires now (as
    /// alerts stamped `now`). An alert not firing before starts (`since` = now); one firing
    /// before and not now is resolved (its event's evidence says `resolved_by` and what it
    /// was). Each start and resolve is an event, with a pending delivery to every webhook
    /// whose minimum severity it reaches. Returns the events.
    async fn record_alerts(
        &self,
        firing: &[Alert],
        resolved_by: &str,
        now: i64,
    ) -> StoreResult<Vec<AlertEvent>>;

    async fn webhooks(&self) -> StoreResult<Vec<Webhook>>;

    /// Adds a webhook; returns its id.
    async fn add_webhook(&self, webhook: &Webhook) -> StoreResult<i64>;

    /// Removes a webhook and its pending deliveries; false when there is none with `id`.
    async fn remove_webhook(&self, id: i64) -> StoreResult<bool>;

    /// Deliveries not made yet with fewer than `max_attempts` attempts, oldest event first.
    async fn pending_deliveries(&self, max_attempts: i64) -> StoreResult<Vec<PendingDelivery>>;

    /// Counts an attempt at a delivery: delivered at `at`, or failed with `error`.
    async fn mark_delivery(
        &self,
        event: i64,
        webhook: i64,
        delivered_at: Option<i64>,
        error: &str,
    ) -> StoreResult<()>;
}

/// Builds the document to issue, inside the issuing transaction: given the series' next
/// number (`seq`), the seller and every document of the client and period already issued,
/// the document (numbered) and its PDF, or why it may not be issued.
pub type IssueBuilder = dyn Fn(i64, &Seller, &[Invoice]) -> Result<(Invoice, Vec<u8>), String> + Send + Sync;

/// Builds the `i`-th document of a batch (see [`IssueBuilder`]).
pub type BatchBuilder<'a> =
    dyn Fn(usize, i64, &Seller, &[Invoice]) -> Result<(Invoice, Vec<u8>), String> + Send + Sync + 'a;

/// Invoices: clients' billing details, the seller and the number series, and the issued
/// documents, which never change once stored.
#[async_trait]
pub trait InvoiceStore: Send + Sync {
    /// Every client's billing details, by client.
    async fn billing_details(&self) -> StoreResult<std::collections::BTreeMap<String, BillingDetails>>;

    async fn set_billing_details(&self, client: &str, details: &BillingDetails, at: i64) -> StoreResult<()>;

    async fn seller(&self) -> StoreResult<Seller>;

    async fn set_seller(&self, seller: &Seller) -> StoreResult<()>;

    /// Issues one document of `client` and `period` in one transaction: takes the series'
    /// next number, reads what is already issued for them, lets `build` make the document,
    /// and stores it with its PDF. Concurrent issuers wait for each other, so no two
    /// documents share a number and a failed `build` leaves no gap. `build`'s refusal is
    /// [`StoreError::Invalid`].
    async fn issue_document(&self, client: &str, period: &str, build: &IssueBuilder) -> StoreResult<Invoice> {
        let batch = |_: usize, seq: i64, seller: &Seller, existing: &[Invoice]| build(seq, seller, existing);
        let mut issued = self.issue_documents(&[(client.to_string(), period.to_string())], &batch).await?;
        Ok(issued.remove(0))
    }

    /// Issues one document for each (client, period) of `batch`, in its order, under
    /// consecutive numbers, in one transaction: all of them, or none when one `build`
    /// refuses or a write fails (no number is used then).
    async fn issue_documents(
        &self,
        batch: &[(String, String)],
        build: &BatchBuilder,
    ) -> StoreResult<Vec<Invoice>>;

    /// Who may issue, adjust and void invoices.
    async fn issuers(&self) -> StoreResult<crate::domain::invoices::Issuers>;

    async fn set_issuers(&self, issuers: crate::domain::invoices::Issuers) -> StoreResult<()>;

    /// The series' last number used (0 before the first) and the seller: what the next
    /// document would be numbered (a preview; issuing takes the number in its transaction).
    async fn series(&self) -> StoreResult<(i64, Seller)>;

    /// Issued documents (without their PDFs), in the order they were issued, of one client
    /// and/or period when given; statuses derived from their notes.
    async fn documents(&self, client: Option<&str>, period: Option<&str>) -> StoreResult<Vec<Invoice>>;

    /// One issued document by number, with its status.
    async fn document(&self, number: &str) -> StoreResult<Option<Invoice>>;

    /// The PDF stored when the document was issued.
    async fn document_pdf(&self, number: &str) -> StoreResult<Option<Vec<u8>>>;
}

/// Billing periods' detail rows moved out to files and back (`gpuledger archive`).
#[async_trait]
pub trait ArchiveStore: Send + Sync {
    /// A stored period's data version and detail rows, read in one snapshot. Refused when the
    /// period is not stored or already archived, or when an older gpuledger stored it with
    /// line-level facts (ingest it again first).
    async fn period_detail(&self, period: &str) -> StoreResult<(String, PeriodDetail)>;

    /// Removes the period's detail rows (on Postgres: detaches and drops its partitions) and
    /// records `archived`, in one transaction. Refused when the period is archived already or
    /// its data version is no longer `archived.data_version` (delivered again meanwhile).
    /// Its bill, other costs, rollups and invoices stay; the data revision rises, its inputs'
    /// revision does not (its rollups stay current).
    async fn archive_period(&self, archived: &ArchivedPeriod) -> StoreResult<()>;

    /// Puts a period's archived detail rows back and forgets the archive, in one transaction.
    /// Refused unless the period is archived from the delivery `data_version`.
    async fn restore_period(
        &self,
        period: &str,
        data_version: &str,
        detail: &PeriodDetail,
    ) -> StoreResult<()>;

    /// Archived periods, newest first.
    async fn archived_periods(&self) -> StoreResult<Vec<ArchivedPeriod>>;
}

/// Planned changes to demand (issue 42), each written with its line in the audit log.
#[async_trait]
pub trait PlanStore: Send + Sync {
    /// Every planned change, oldest first.
    async fn plans(&self) -> StoreResult<Vec<Plan>>;

    /// Stores a change with its line in the audit log (`plan_added`, by `username`) in one
    /// transaction; returns its id.
    async fn add_plan(&self, plan: &Plan, username: &str) -> StoreResult<i64>;

    /// Removes a change with its line in the audit log (`plan_removed`) in one transaction:
    /// the change removed, or `None` when there was none of that id (nothing is written).
    async fn remove_plan(&self, id: i64, username: &str) -> StoreResult<Option<Plan>>;
}

/// Everything gpuledger keeps, behind one interface so SQLite and Postgres pass the same tests:
/// one trait per domain, so each feature has a room of its own (invoices, users and alerts
/// get theirs). Bring the domain traits into scope with `use crate::store::prelude::*`.
#[async_trait]
pub trait Store:
    RunStore
    + CostStore
    + UsageStore
    + RollupStore
    + SettingsStore
    + AccountStore
    + InvoiceStore
    + CostExplorerStore
    + BillStore
    + AlertStore
    + ArchiveStore
    + PlanStore
{
    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

    /// Applies the embedded migrations that are not applied yet; returns how many ran.
    /// Concurrent callers wait for each other; an edited applied migration is refused.
    async fn migrate(&self) -> StoreResult<usize>;

    /// Where the schema stands, read without changing anything.
    async fn schema_status(&self) -> StoreResult<SchemaStatus>;
}

/// The store's traits, for callers of `dyn Store`.
pub mod prelude {
    pub use super::{
        AccountStore, AlertStore, ArchiveStore, BillStore, CostExplorerStore, CostStore, InvoiceStore,
        PlanStore, RollupStore, RunStore, SettingsStore, Store, UsageStore,
    };
}

/// Opens the database named by `url` and applies pending migrations.
///
/// `sqlite:PATH` (created when missing) or `postgres://...`.
pub async fn connect(url: &str) -> StoreResult<Box<dyn Store>> {
    let store = open(url).await?;
    store.migrate().await?;
    Ok(store)
}

/// Opens the database named by `url` without changing its schema, and refuses one whose
/// schema is older than this binary's (for a role that may only read and write data).
pub async fn connect_without_migrating(url: &str) -> StoreResult<Box<dyn Store>> {
    let store = open(url).await?;
    let status = store.schema_status().await?;
    if !status.is_current() {
        return Err(StoreError::SchemaOutOfDate { applied: status.applied, latest: status.latest });
    }
    Ok(store)
}

async fn open(url: &str) -> StoreResult<Box<dyn Store>> {
    if url.starts_with("sqlite:") {
        Ok(Box::new(sqlite::SqliteStore::open(url).await?))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Box::new(postgres::PgStore::open(url).await?))
    } else {
        Err(StoreError::UnsupportedUrl(crate::text::redacted_url(url)))
    }
}
