//! The one [`Store`] implementation both backends share, generic over a [`Backend`]: the
//! statements are the same text (`sql.rs`, `sql_rollups.rs`), and a backend names only what
//! differs — its driver, its migrations, its bind limit, how a transaction begins and how a
//! writer locks what it replaces.

use std::marker::PhantomData;

use futures_util::TryStreamExt;
use sqlx::query_builder::Separated;
use sqlx::{Database, Encode, Executor, IntoArguments, Pool, Type};

use super::migrations::{self, Migration, MigrationLock};
use super::sql::{self, ReadRow};
use super::sql_rollups;
use super::table::{FromRow, Table};
use super::{
    ChargebackSnapshot, ClientRollup, ComputeInputs, CostPeriod, GpuAllocation, GpuUsage, InferenceUsage,
    IngestOutcome, IngestRun, NamespaceCost, NewIngestRun, PeriodRollup, PeriodSummary, PodCost, PodWorkload,
    Rollups, SettingVersion, SettingsHistory, SqlContext, Store, StoreError, StoreResult, WorkloadCost,
};

/// What one database needs said that the shared SQL cannot say.
pub trait Backend: Send + Sync + 'static {
    /// The sqlx driver.
    type Db: Database;
    /// `sqlite` or `postgres`.
    const NAME: &'static str;
    /// Bound values one statement may carry.
    const MAX_BINDS: usize;
    /// How a write transaction begins.
    const WRITE_BEGIN: &'static str;
    /// How a read transaction that must see one snapshot begins.
    const READ_BEGIN: &'static str;
    /// A statement taking a transaction-scoped lock on `$1` (a [`lock_key`]), or empty where
    /// the write transaction already excludes other writers.
    const XACT_LOCK: &'static str;
    /// The embedded migrations, oldest first.
    const MIGRATIONS: &'static [Migration];
    /// How migrating processes keep apart.
    const MIGRATION_LOCK: MigrationLock;

    /// How many rows a statement changed.
    fn rows_affected(result: &<Self::Db as Database>::QueryResult) -> u64;

    /// Inserts `rows` with as few multi-row `INSERT`s as [`Backend::MAX_BINDS`] allows. Written
    /// once per backend ([`bulk_insert!`]): a `QueryBuilder` borrows the values it binds,
    /// and only a concrete driver lets that borrow end before the builder does.
    fn insert_rows<'c, 'a, T: Sync>(
        conn: &'c mut <Self::Db as Database>::Connection,
        head: &'static str,
        rows_per_statement: usize,
        rows: &'a [T],
        push_row: impl FnMut(&mut Separated<'_, 'a, Self::Db, &'static str>, &'a T) + Send + 'c,
    ) -> impl std::future::Future<Output = Result<(), sqlx::Error>> + Send + 'c
    where
        'a: 'c;
}

/// The body of [`Backend::insert_rows`] for one concrete driver.
macro_rules! bulk_insert {
    () => {
        fn insert_rows<'c, 'a, T: Sync>(
            conn: &'c mut <Self::Db as sqlx::Database>::Connection,
            head: &'static str,
            rows_per_statement: usize,
            rows: &'a [T],
            mut push_row: impl FnMut(&mut sqlx::query_builder::Separated<'_, 'a, Self::Db, &'static str>, &'a T)
            + Send
            + 'c,
        ) -> impl std::future::Future<Output = Result<(), sqlx::Error>> + Send + 'c
        where
            'a: 'c,
        {
            async move {
                for chunk in rows.chunks(rows_per_statement) {
                    let mut builder: sqlx::QueryBuilder<'a, Self::Db> = sqlx::QueryBuilder::new(head);
                    builder.push_values(chunk, |mut row, item| push_row(&mut row, item));
                    sqlx::Executor::execute(&mut *conn, builder.build()).await?;
                }
                Ok(())
            }
        }
    };
}
pub(crate) use bulk_insert;

/// A [`Store`] over one connection pool of backend `B`.
pub struct SqlStore<B: Backend> {
    pub(crate) pool: Pool<B::Db>,
    backend: PhantomData<B>,
}

impl<B: Backend> SqlStore<B> {
    pub(crate) fn with_pool(pool: Pool<B::Db>) -> SqlStore<B> {
        SqlStore { pool, backend: PhantomData }
    }
}

/// The 64-bit key of a named advisory lock (FNV-1a of the name): stable across processes and
/// versions, which is all a lock key needs.
pub(crate) fn lock_key(name: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash as i64
}

// `ReadRow` is the crate's own row reader; these helpers are private, so its narrower
// visibility leaks nothing.
#[allow(private_bounds)]
impl<B: Backend> SqlStore<B>
where
    <B::Db as Database>::Row: ReadRow,
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
    for<'q> <B::Db as Database>::Arguments<'q>: IntoArguments<'q, B::Db> + Default,
    for<'q> i64: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<i64>: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> f64: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> String: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> &'q str: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<&'q str>: Encode<'q, B::Db> + Type<B::Db>,
{
    /// Takes the named lock until the transaction ends: a second writer of the same period
    /// or window waits here, then replaces what the first wrote (never adds to it).
    async fn lock_for_transaction(
        conn: &mut <B::Db as Database>::Connection,
        name: &str,
    ) -> Result<(), sqlx::Error> {
        if B::XACT_LOCK.is_empty() {
            return Ok(());
        }
        sqlx::query(B::XACT_LOCK).bind(lock_key(name)).execute(&mut *conn).await.map(|_| ())
    }

    /// Takes the next data revision. Run last before commit: on Postgres the counter row
    /// stays locked until then.
    async fn next_revision(conn: &mut <B::Db as Database>::Connection) -> Result<i64, sqlx::Error> {
        sqlx::query(sql::NEXT_REVISION).fetch_one(&mut *conn).await?.int("value")
    }

    /// One integer column of the row `query` finds for `key`, if there is one.
    async fn optional_int(
        conn: &mut <B::Db as Database>::Connection,
        query: &'static str,
        key: &str,
        column: &'static str,
    ) -> Result<Option<i64>, sqlx::Error> {
        let row = sqlx::query(query).bind(key).fetch_optional(&mut *conn).await?;
        row.map(|row| row.int(column)).transpose()
    }

    /// Marks each billing period in `periods` as changed at `revision`.
    async fn touch_periods(
        conn: &mut <B::Db as Database>::Connection,
        periods: &[String],
        revision: i64,
    ) -> Result<(), sqlx::Error> {
        for period in periods {
            sqlx::query(sql::TOUCH_PERIOD_INPUTS)
                .bind(period.as_str())
                .bind(revision)
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    /// A stored period read in one snapshot (a concurrent replace is seen whole or not at
    /// all): its totals, other costs and bill lines, and with `whole` its facts (periods stored
    /// before facts were summed) and instance-hours.
    async fn read_period(&self, period: &str, whole: bool) -> StoreResult<Option<CostPeriod>> {
        const CONTEXT: &str = "reading a cost period";
        let mut tx = self.pool.begin_with(B::READ_BEGIN).await.context(CONTEXT)?;
        let Some(head) = sqlx::query(sql::SELECT_COST_PERIOD)
            .bind(period)
            .fetch_optional(&mut *tx)
            .await
            .context(CONTEXT)?
        else {
            return Ok(None);
        };
        let mut stored = sql::cost_period(&head).context(CONTEXT)?;
        if whole {
            stored.cost_facts = Self::fetch_rows(&mut tx, sqlx::query(sql::SELECT_COST_FACTS).bind(period))
                .await
                .context(CONTEXT)?;
            stored.instance_hours = Self::read_table(&mut tx, period).await.context(CONTEXT)?;
        }
        stored.other_costs = Self::read_table(&mut tx, period).await.context(CONTEXT)?;
        stored.bill_lines = Self::read_table(&mut tx, period).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)?;
        Ok(Some(stored))
    }

    /// Writes a batch's new pods to `cost_pods`. Its facts are not stored: the period keeps
    /// their pod-day and GPU pod-hour aggregates (what every page, report and compute reads),
    /// and the CUR itself stays the line-level record.
    async fn insert_batch_pods(
        conn: &mut <B::Db as Database>::Connection,
        period: &str,
        batch: &crate::store::FactBatch,
    ) -> Result<(), sqlx::Error> {
        Self::insert(conn, period, &batch.pods).await
    }

    /// Streams a query's rows through `map`, so the driver's rows are never all held at once.
    async fn read_all<'q, T>(
        conn: &mut <B::Db as Database>::Connection,
        query: sqlx::query::Query<'q, B::Db, <B::Db as sqlx::Database>::Arguments<'q>>,
        map: impl Fn(&<B::Db as sqlx::Database>::Row) -> Result<T, sqlx::Error>,
    ) -> Result<Vec<T>, sqlx::Error> {
        let mut rows = query.fetch(&mut *conn);
        let mut out = Vec::new();
        while let Some(row) = rows.try_next().await? {
            out.push(map(&row)?);
        }
        Ok(out)
    }

    /// Inserts `rows` into their table with as few multi-row `INSERT`s as the bind limit
    /// allows; `period` fills the leading column of a table keyed by period.
    async fn insert<'a, T: Table>(
        conn: &mut <B::Db as Database>::Connection,
        period: &'a str,
        rows: &'a [T],
    ) -> Result<(), sqlx::Error> {
        let sql = T::sql();
        let insert = sql.insert();
        B::insert_rows(conn, insert.head, insert.rows_per_statement(B::MAX_BINDS), rows, move |row, item| {
            if sql.keyed_by_period {
                sql::PushRow::text(row, period);
            }
            item.bind(row);
        })
        .await
    }

    /// Reads a query's rows as `T`, streamed.
    async fn fetch_rows<'q, T: FromRow>(
        conn: &mut <B::Db as Database>::Connection,
        query: sqlx::query::Query<'q, B::Db, <B::Db as sqlx::Database>::Arguments<'q>>,
    ) -> Result<Vec<T>, sqlx::Error> {
        Self::read_all(conn, query, |row| T::from_row(row)).await
    }

    /// A query's rows as `T`, on a connection of the pool.
    async fn rows<'q, T: FromRow>(
        &self,
        query: sqlx::query::Query<'q, B::Db, <B::Db as sqlx::Database>::Arguments<'q>>,
        context: &'static str,
    ) -> StoreResult<Vec<T>> {
        let mut conn = self.pool.acquire().await.context(context)?;
        Self::fetch_rows(&mut conn, query).await.context(context)
    }

    /// Every row of `T`'s table for `period`, in its stable order.
    async fn read_table<T: Table>(
        conn: &mut <B::Db as Database>::Connection,
        period: &str,
    ) -> Result<Vec<T>, sqlx::Error> {
        Self::fetch_rows(conn, sqlx::query(&T::sql().select_period).bind(period)).await
    }
}

#[async_trait::async_trait]
impl<B: Backend> Store for SqlStore<B>
where
    <B::Db as Database>::Row: ReadRow,
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
    for<'q> <B::Db as Database>::Arguments<'q>: IntoArguments<'q, B::Db> + Default,
    for<'q> i64: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<i64>: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> f64: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> String: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> &'q str: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<&'q str>: Encode<'q, B::Db> + Type<B::Db>,
{
    fn backend(&self) -> &'static str {
        B::NAME
    }

    async fn migrate(&self) -> StoreResult<usize> {
        migrations::apply(&self.pool, B::MIGRATIONS, &B::MIGRATION_LOCK).await
    }

    async fn schema_status(&self) -> StoreResult<migrations::SchemaStatus> {
        migrations::check(&self.pool, B::MIGRATIONS).await
    }

    async fn begin_ingest_run(&self, run: &NewIngestRun) -> StoreResult<i64> {
        let row = sqlx::query(sql::INSERT_INGEST_RUN)
            .bind(run.kind.as_str())
            .bind(run.source.as_str())
            .bind(run.period.as_str())
            .bind(run.data_version.as_str())
            .bind(run.started_at)
            .bind(run.host.as_str())
            .bind(run.pid)
            .fetch_one(&self.pool)
            .await
            .context("starting an ingest run")?;
        row.int("id").context("starting an ingest run")
    }

    async fn close_abandoned_runs(
        &self,
        host: &str,
        alive: &(dyn Fn(i64) -> bool + Sync),
    ) -> StoreResult<usize> {
        const CONTEXT: &str = "closing abandoned runs";
        let running = sqlx::query(sql::SELECT_RUNNING_RUNS)
            .bind(host)
            .fetch_all(&self.pool)
            .await
            .context(CONTEXT)?
            .iter()
            .map(|row| Ok((row.int("id")?, row.int("pid")?)))
            .collect::<Result<Vec<(i64, i64)>, sqlx::Error>>()
            .context(CONTEXT)?;
        let mut closed = 0;
        for (id, pid) in running.into_iter().filter(|(_, pid)| !alive(*pid)) {
            let error = format!("its process ({pid} on {host}) ended before the run finished");
            let result = sqlx::query(sql::INTERRUPT_RUN)
                .bind(chrono::Utc::now().timestamp())
                .bind(error)
                .bind(id)
                .execute(&self.pool)
                .await
                .context(CONTEXT)?;
            closed += B::rows_affected(&result) as usize;
        }
        Ok(closed)
    }

    async fn cost_data_version(&self, period: &str) -> StoreResult<Option<String>> {
        const CONTEXT: &str = "reading a period's data version";
        let row = sqlx::query(sql::SELECT_COST_DATA_VERSION)
            .bind(period)
            .bind(sql::READER_VERSION)
            .fetch_optional(&self.pool)
            .await
            .context(CONTEXT)?;
        row.map(|row| row.text("data_version")).transpose().context(CONTEXT)
    }

    async fn pending_periods(&self) -> StoreResult<Vec<String>> {
        const CONTEXT: &str = "listing periods to compute";
        let rows = sqlx::query(sql::SELECT_PENDING_PERIODS).fetch_all(&self.pool).await.context(CONTEXT)?;
        rows.iter().map(|row| row.text("period")).collect::<Result<Vec<_>, _>>().context(CONTEXT)
    }

    async fn data_revision(&self) -> StoreResult<i64> {
        const CONTEXT: &str = "reading the data revision";
        sqlx::query(sql::SELECT_REVISION)
            .fetch_one(&self.pool)
            .await
            .and_then(|row| row.int("value"))
            .context(CONTEXT)
    }

    async fn finish_ingest_run(&self, id: i64, outcome: &IngestOutcome) -> StoreResult<()> {
        const CONTEXT: &str = "finishing an ingest run";
        let result = sqlx::query(sql::FINISH_INGEST_RUN)
            .bind(outcome.status.as_str())
            .bind(outcome.rows_read)
            .bind(outcome.rows_written)
            .bind(outcome.finished_at)
            .bind(outcome.error.as_deref())
            .bind(outcome.reconciliation.as_deref())
            .bind(id)
            .execute(&self.pool)
            .await
            .context(CONTEXT)?;
        if B::rows_affected(&result) == 0 {
            return Err(StoreError::Sql { context: CONTEXT, source: sqlx::Error::RowNotFound });
        }
        Ok(())
    }

    async fn ingest_runs(&self, limit: i64) -> StoreResult<Vec<IngestRun>> {
        const CONTEXT: &str = "listing ingest runs";
        self.rows(sqlx::query(sql::SELECT_INGEST_RUNS).bind(limit), CONTEXT).await
    }

    async fn last_data_version(&self, kind: &str, period: &str) -> StoreResult<Option<String>> {
        const CONTEXT: &str = "reading the last ingested data version";
        let row = sqlx::query(sql::SELECT_LAST_DATA_VERSION)
            .bind(kind)
            .bind(period)
            .fetch_optional(&self.pool)
            .await
            .context(CONTEXT)?;
        row.map(|row| row.text("data_version")).transpose().context(CONTEXT)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME, period = name))]
    async fn replace_cost_period_from(
        &self,
        name: &str,
        source: &mut dyn crate::store::PeriodSource,
    ) -> StoreResult<()> {
        const CONTEXT: &str = "replacing a cost period";
        // Dropping `tx` on any early return rolls everything back.
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        Self::lock_for_transaction(&mut tx, &format!("cost:{name}")).await.context(CONTEXT)?;
        for delete in sql::DELETE_PERIOD {
            sqlx::query(delete).bind(name).execute(&mut *tx).await.context(CONTEXT)?;
        }
        for table in sql_rollups::period_tables() {
            sqlx::query(&table.delete_period).bind(name).execute(&mut *tx).await.context(CONTEXT)?;
        }
        let mut fact_rows = 0i64;
        let mut aggregates = crate::store::aggregate::FactAggregates::default();
        while let Some(batch) = source.next_batch().await {
            Self::insert_batch_pods(&mut tx, name, &batch).await.context(CONTEXT)?;
            aggregates.add(&batch.facts);
            fact_rows += batch.facts.len() as i64;
        }
        let tail = source.finish().await.map_err(StoreError::Source)?;
        let time_sliced = aggregates.share_oversubscribed_gpus(&tail.pods);
        if time_sliced > 0 {
            tracing::info!(
                instance_hours = time_sliced,
                "time-sliced GPUs: allocated GPU-hours shared by split usage"
            );
        }
        let period = &tail.period;
        sqlx::query(sql::INSERT_COST_PERIOD)
            .bind(name)
            .bind(period.data_version.as_str())
            .bind(period.bill_unblended_micros)
            .bind(period.bill_amortized_micros)
            .bind(chrono::Utc::now().timestamp())
            .bind(fact_rows)
            .bind(period.net_amortized_micros)
            .bind(period.kubernetes_micros)
            .bind(period.unallocated_ec2_micros)
            .bind(period.currency.as_str())
            .bind(sql::READER_VERSION)
            .execute(&mut *tx)
            .await
            .context(CONTEXT)?;
        Self::insert(&mut tx, name, &tail.pods).await.context(CONTEXT)?;
        Self::insert(&mut tx, name, &period.instance_hours).await.context(CONTEXT)?;
        Self::insert(&mut tx, name, &period.other_costs).await.context(CONTEXT)?;
        Self::insert(&mut tx, name, &period.bill_lines).await.context(CONTEXT)?;
        let pod_days = aggregates.pod_days();
        Self::insert(&mut tx, name, &pod_days).await.context(CONTEXT)?;
        let gpu_hours = aggregates.gpu_pod_hours();
        Self::insert(&mut tx, name, &gpu_hours).await.context(CONTEXT)?;
        let revision = Self::next_revision(&mut tx).await.context(CONTEXT)?;
        Self::touch_periods(&mut tx, &[name.to_string()], revision).await.context(CONTEXT)?;
        tracing::debug!(phase = "commit", period = name, revision, "committing the period");
        tx.commit().await.context(CONTEXT)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME, period = period))]
    async fn compute_inputs(&self, period: &str, idle_threshold: f64) -> StoreResult<Option<ComputeInputs>> {
        const CONTEXT: &str = "reading a period for compute";
        let aggregated = sqlx::query(sql_rollups::COUNT_POD_DAYS)
            .bind(period)
            .fetch_one(&self.pool)
            .await
            .and_then(|row| row.int("n"))
            .context(CONTEXT)?;
        if aggregated == 0 {
            let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
            for backfill in sql_rollups::BACKFILL_AGGREGATES {
                sqlx::query(backfill).bind(period).execute(&mut *tx).await.context(CONTEXT)?;
            }
            tx.commit().await.context(CONTEXT)?;
        }
        let mut tx = self.pool.begin_with(B::READ_BEGIN).await.context(CONTEXT)?;
        let Some(head) = sqlx::query(sql::SELECT_COST_PERIOD)
            .bind(period)
            .fetch_optional(&mut *tx)
            .await
            .context(CONTEXT)?
        else {
            return Ok(None);
        };
        let (from, to) = match period.parse::<crate::period::Period>() {
            Ok(p) => (p.start(), p.end()),
            Err(_) => (0, 0),
        };
        let by_period = |query: &'static str| sqlx::query(query).bind(period);
        let in_hours = |query: &'static str| sqlx::query(query).bind(from).bind(to);
        let unused = by_period(sql::SELECT_UNUSED_COMMITMENT).fetch_one(&mut *tx).await.context(CONTEXT)?;
        let input_revision =
            Self::optional_int(&mut tx, sql::SELECT_PERIOD_INPUT_REVISION, period, "revision")
                .await
                .context(CONTEXT)?
                .unwrap_or(1);
        let inputs = ComputeInputs {
            period: period.to_string(),
            input_revision,
            bill_unblended_micros: head.int("bill_unblended_micros").context(CONTEXT)?,
            bill_amortized_micros: head.int("bill_amortized_micros").context(CONTEXT)?,
            kubernetes_micros: head.int("kubernetes_micros").context(CONTEXT)?,
            unallocated_ec2_micros: head.int("unallocated_ec2_micros").context(CONTEXT)?,
            pods: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            pod_days: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            gpu_pod_hours: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            capacity: Self::fetch_rows(&mut tx, by_period(sql_rollups::SELECT_CAPACITY_SUMS))
                .await
                .context(CONTEXT)?,
            other_cost_micros: by_period(sql::SELECT_OTHER_COST_TOTAL)
                .fetch_one(&mut *tx)
                .await
                .and_then(|row| row.int("total"))
                .context(CONTEXT)?,
            unused_savings_plan_micros: unused.int("savings_plan").context(CONTEXT)?,
            unused_reservation_micros: unused.int("reservation").context(CONTEXT)?,
            other_groups: Self::fetch_rows(&mut tx, by_period(sql_rollups::SELECT_OTHER_COST_GROUPS))
                .await
                .context(CONTEXT)?,
            measured: Self::fetch_rows(
                &mut tx,
                in_hours(sql_rollups::SELECT_MEASURED_POD_HOURS).bind(idle_threshold),
            )
            .await
            .context(CONTEXT)?,
            unattributed: Self::read_all(&mut tx, in_hours(sql_rollups::SELECT_UNATTRIBUTED), |row| {
                Ok((row.text("gpu_model")?, row.float("gpu_hours")?))
            })
            .await
            .context(CONTEXT)?,
            served: Self::fetch_rows(&mut tx, in_hours(sql_rollups::SELECT_SERVED_POD_HOURS))
                .await
                .context(CONTEXT)?,
        };
        tx.commit().await.context(CONTEXT)?;
        Ok(Some(inputs))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME, period = %rollups.period.period))]
    async fn replace_rollups(&self, rollups: &Rollups) -> StoreResult<()> {
        const CONTEXT: &str = "writing rollups";
        let name = rollups.period.period.as_str();
        let computed_from = rollups.period.input_revision;
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        Self::lock_for_transaction(&mut tx, &format!("rollups:{name}")).await.context(CONTEXT)?;
        let inputs_now = Self::optional_int(&mut tx, sql::SELECT_PERIOD_INPUT_REVISION, name, "revision")
            .await
            .context(CONTEXT)?;
        let written = Self::optional_int(&mut tx, sql::SELECT_ROLLUP_INPUT_REVISION, name, "input_revision")
            .await
            .context(CONTEXT)?;
        if inputs_now.unwrap_or(1) > computed_from {
            return Err(StoreError::Stale(format!(
                "{name}'s data changed while it was being computed (revision {computed_from} read, {} now): compute it again",
                inputs_now.unwrap_or(1)
            )));
        }
        if written.is_some_and(|written| written > computed_from) {
            return Err(StoreError::Stale(format!(
                "{name} was already computed from newer data (revision {} written, {computed_from} read); nothing written",
                written.unwrap_or(0)
            )));
        }
        // The chargeback this write replaces, kept when it differs (invoices need the delta).
        let replaced: Vec<ClientRollup> = Self::read_table(&mut tx, name).await.context(CONTEXT)?;
        let by_client = |rows: &[ClientRollup]| -> Vec<ClientRollup> {
            let mut rows = rows.to_vec();
            rows.sort_by(|a, b| a.client.cmp(&b.client));
            rows
        };
        if !replaced.is_empty() && by_client(&replaced) != by_client(&rollups.clients) {
            let revision = Self::optional_int(&mut tx, sql::SELECT_ROLLUP_REVISION, name, "revision")
                .await
                .context(CONTEXT)?
                .unwrap_or(0);
            let clients = serde_json::to_string(&replaced).map_err(|e| StoreError::Invalid(e.to_string()))?;
            sqlx::query(sql::INSERT_CHARGEBACK_SNAPSHOT)
                .bind(name)
                .bind(revision)
                .bind(chrono::Utc::now().timestamp())
                .bind(clients)
                .execute(&mut *tx)
                .await
                .context(CONTEXT)?;
        }
        for table in sql_rollups::rollup_tables() {
            sqlx::query(&table.delete_period).bind(name).execute(&mut *tx).await.context(CONTEXT)?;
        }
        let head = PeriodRollup {
            revision: Self::next_revision(&mut tx).await.context(CONTEXT)?,
            ..rollups.period.clone()
        };
        let period = std::slice::from_ref(&head);
        Self::insert(&mut tx, name, period).await.context(CONTEXT)?;
        Self::insert(&mut tx, name, &rollups.costs).await.context(CONTEXT)?;
        Self::insert(&mut tx, name, &rollups.capacity).await.context(CONTEXT)?;
        Self::insert(&mut tx, name, &rollups.heatmap).await.context(CONTEXT)?;
        Self::insert(&mut tx, name, &rollups.clients).await.context(CONTEXT)?;
        Self::insert(&mut tx, name, &rollups.opportunities).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME, period = period))]
    async fn rollups(&self, period: &str) -> StoreResult<Option<Rollups>> {
        const CONTEXT: &str = "reading rollups";
        let mut tx = self.pool.begin_with(B::READ_BEGIN).await.context(CONTEXT)?;
        let Some(head) = Self::read_table::<PeriodRollup>(&mut tx, period).await.context(CONTEXT)?.pop()
        else {
            return Ok(None);
        };
        let rollups = Rollups {
            period: head,
            costs: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            capacity: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            heatmap: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            clients: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            opportunities: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
        };
        tx.commit().await.context(CONTEXT)?;
        Ok(Some(rollups))
    }

    async fn rollup_periods(&self) -> StoreResult<Vec<PeriodRollup>> {
        const CONTEXT: &str = "listing computed periods";
        let newest_first = PeriodRollup::sql().select_ordered("period DESC");
        self.rows(sqlx::query(&newest_first), CONTEXT).await
    }

    async fn settings(&self) -> StoreResult<SettingsHistory> {
        const CONTEXT: &str = "reading settings";
        let rows = sqlx::query(sql::SELECT_SETTINGS).fetch_all(&self.pool).await.context(CONTEXT)?;
        let versions =
            rows.iter().map(sql::setting_version).collect::<Result<Vec<_>, _>>().context(CONTEXT)?;
        Ok(SettingsHistory { versions })
    }

    async fn save_settings(&self, versions: &[SettingVersion]) -> StoreResult<()> {
        const CONTEXT: &str = "saving settings";
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        for version in versions {
            let (kind, from) = (version.kind.as_str(), version.effective_from.to_string());
            sqlx::query(sql::DELETE_SETTING)
                .bind(kind)
                .bind(version.key.as_str())
                .bind(from.as_str())
                .execute(&mut *tx)
                .await
                .context(CONTEXT)?;
            sqlx::query(sql::INSERT_SETTING)
                .bind(kind)
                .bind(version.key.as_str())
                .bind(from.as_str())
                .bind(version.value.to_string())
                .bind(version.set_at)
                .execute(&mut *tx)
                .await
                .context(CONTEXT)?;
        }
        tx.commit().await.context(CONTEXT)
    }

    async fn chargeback_snapshots(&self, period: &str) -> StoreResult<Vec<ChargebackSnapshot>> {
        const CONTEXT: &str = "reading chargeback snapshots";
        let rows = sqlx::query(sql::SELECT_CHARGEBACK_SNAPSHOTS)
            .bind(period)
            .fetch_all(&self.pool)
            .await
            .context(CONTEXT)?;
        rows.iter()
            .map(|row| {
                let clients = row.text("clients").context(CONTEXT)?;
                Ok(ChargebackSnapshot {
                    period: period.to_string(),
                    revision: row.int("revision").context(CONTEXT)?,
                    replaced_at: row.int("replaced_at").context(CONTEXT)?,
                    clients: serde_json::from_str(&clients).map_err(|e| {
                        StoreError::Invalid(format!("a chargeback snapshot of {period}: {e}"))
                    })?,
                })
            })
            .collect()
    }

    async fn cost_period(&self, period: &str) -> StoreResult<Option<CostPeriod>> {
        self.read_period(period, true).await
    }

    async fn bill(&self, period: &str) -> StoreResult<Option<CostPeriod>> {
        self.read_period(period, false).await
    }

    async fn namespace_costs(
        &self,
        period: &str,
        cluster: Option<&str>,
        by_cluster: bool,
    ) -> StoreResult<Vec<NamespaceCost>> {
        const CONTEXT: &str = "summing cost per namespace";
        self.rows(
            sqlx::query(sql::SELECT_NAMESPACE_COSTS)
                .bind(period)
                .bind(cluster.unwrap_or(""))
                .bind(i64::from(by_cluster)),
            CONTEXT,
        )
        .await
    }

    async fn periods(&self) -> StoreResult<Vec<PeriodSummary>> {
        const CONTEXT: &str = "listing cost periods";
        self.rows(sqlx::query(sql::SELECT_PERIODS), CONTEXT).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME, from = from, to = to, rows = gpu.len() + inference.len()))]
    async fn replace_usage_window(
        &self,
        from: i64,
        to: i64,
        cluster: &str,
        gpu: &[GpuUsage],
        inference: &[InferenceUsage],
    ) -> StoreResult<()> {
        const CONTEXT: &str = "replacing a usage window";
        // The billing periods the window touches, oldest first: locks are taken in
        // one order, so two overlapping windows never deadlock.
        let mut periods = Vec::new();
        let mut month = crate::period::Period::containing(from);
        while month.start() < to {
            periods.push(month.to_string());
            month = month.next();
        }
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        for period in &periods {
            Self::lock_for_transaction(&mut tx, &format!("usage:{period}")).await.context(CONTEXT)?;
        }
        for delete in [sql::DELETE_GPU_USAGE_WINDOW, sql::DELETE_INFERENCE_USAGE_WINDOW] {
            sqlx::query(delete).bind(from).bind(to).bind(cluster).execute(&mut *tx).await.context(CONTEXT)?;
        }
        Self::insert(&mut tx, "", gpu).await.context(CONTEXT)?;
        Self::insert(&mut tx, "", inference).await.context(CONTEXT)?;
        let revision = Self::next_revision(&mut tx).await.context(CONTEXT)?;
        Self::touch_periods(&mut tx, &periods, revision).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)
    }

    async fn gpu_usage(&self, from: i64, to: i64) -> StoreResult<Vec<GpuUsage>> {
        const CONTEXT: &str = "reading GPU usage";
        let window = sql::select_usage_window::<GpuUsage>();
        self.rows(sqlx::query(&window).bind(from).bind(to), CONTEXT).await
    }

    async fn inference_usage(&self, from: i64, to: i64) -> StoreResult<Vec<InferenceUsage>> {
        const CONTEXT: &str = "reading inference usage";
        let window = sql::select_usage_window::<InferenceUsage>();
        self.rows(sqlx::query(&window).bind(from).bind(to), CONTEXT).await
    }

    async fn gpu_allocations(&self, period: &str) -> StoreResult<Vec<GpuAllocation>> {
        const CONTEXT: &str = "reading GPU allocations";
        self.rows(sqlx::query(sql::SELECT_GPU_ALLOCATIONS).bind(period), CONTEXT).await
    }

    async fn workload_costs(&self, period: &str) -> StoreResult<Vec<WorkloadCost>> {
        const CONTEXT: &str = "summing cost per workload";
        self.rows(sqlx::query(sql::SELECT_WORKLOAD_COSTS).bind(period), CONTEXT).await
    }

    async fn pod_costs(
        &self,
        period: &str,
        namespace: &str,
        workload: &str,
        from: i64,
        to: i64,
    ) -> StoreResult<Vec<PodCost>> {
        const CONTEXT: &str = "summing a workload's pods";
        self.rows(
            sqlx::query(sql::SELECT_POD_COSTS)
                .bind(period)
                .bind(namespace)
                .bind(workload)
                .bind(from)
                .bind(to),
            CONTEXT,
        )
        .await
    }

    async fn pod_workloads(&self, period: &str) -> StoreResult<Vec<PodWorkload>> {
        const CONTEXT: &str = "reading pod workloads";
        self.rows(sqlx::query(sql::SELECT_POD_WORKLOADS).bind(period), CONTEXT).await
    }
}
