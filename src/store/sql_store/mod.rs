//! The one [`Store`] implementation both backends share, generic over a [`Backend`]: the
//! statements are the same text (`sql.rs`, `sql_rollups.rs`), and a backend names only what
//! differs — its driver, its migrations, its bind limit, how a transaction begins and how a
//! writer locks what it replaces. Each domain's trait is implemented in its own file.

mod accounts;
mod alerts;
mod archive;
mod bills;
mod cost_explorer;
mod costs;
mod invoices;
mod partitions;
mod plans;
mod rollups;
mod runs;
mod settings;
mod usage;

use std::marker::PhantomData;

use futures_util::TryStreamExt;
use sqlx::query_builder::Separated;
use sqlx::{Database, Encode, Executor, IntoArguments, Pool, Type};

use super::migrations::{self, Migration, MigrationLock};
use super::sql::{self, ReadRow};
use super::table::{FromRow, Table};
use super::{CostPeriod, SqlContext, Store, StoreError, StoreResult};

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
    /// Whether a billing period's tables are partitioned by period, so that replacing a
    /// period swaps partitions ([`partitions`]) instead of deleting its rows.
    const PARTITIONS_BY_PERIOD: bool;

    /// How many rows a statement changed.
    fn rows_affected(result: &<Self::Db as Database>::QueryResult) -> u64;

    /// Inserts `rows` with as few multi-row `INSERT`s as [`Backend::MAX_BINDS`] allows. Written
    /// once per backend ([`bulk_insert!`]): a `QueryBuilder` borrows the values it binds,
    /// and only a concrete driver lets that borrow end before the builder does.
    fn insert_rows<'c, 'a, T: Sync>(
        conn: &'c mut <Self::Db as Database>::Connection,
        head: &'c str,
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
            head: &'c str,
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
                let mut build = |chunk: &'a [T]| {
                    let mut builder: sqlx::QueryBuilder<'a, Self::Db> = sqlx::QueryBuilder::new(head);
                    builder.push_values(chunk, |mut row, item| push_row(&mut row, item));
                    builder
                };
                let mut chunks = rows.chunks(rows_per_statement);
                let mut current = chunks.next().map(&mut build);
                // The next statement is built while the database runs this one: the first poll
                // of `execute` hands the statement to the driver, then `join!` builds the next.
                while let Some(mut builder) = current {
                    let (done, next) = tokio::join!(
                        sqlx::Executor::execute(&mut *conn, builder.build()),
                        async { chunks.next().map(&mut build) },
                    );
                    done?;
                    current = next;
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
    for<'q> &'q [u8]: Encode<'q, B::Db> + Type<B::Db>,
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

    /// A read transaction over a period's tables, in one snapshot taken after any partition
    /// swap in progress has committed ([`partitions::read_lock`]).
    async fn begin_period_read(&self) -> Result<sqlx::Transaction<'static, B::Db>, sqlx::Error> {
        let mut tx = self.pool.begin_with(B::READ_BEGIN).await?;
        if B::PARTITIONS_BY_PERIOD {
            sqlx::query(&partitions::read_lock()).execute(&mut *tx).await?;
        }
        Ok(tx)
    }

    /// A stored period read in one snapshot (a concurrent replace is seen whole or not at
    /// all): its totals, other costs and bill lines, and with `whole` its facts (periods stored
    /// before facts were summed) and instance-hours.
    async fn read_period(&self, period: &str, whole: bool) -> StoreResult<Option<CostPeriod>> {
        const CONTEXT: &str = "reading a cost period";
        let mut tx = self.begin_period_read().await.context(CONTEXT)?;
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
            Self::refuse_archived(&mut tx, period).await?;
            stored.cost_facts = Self::fetch_rows(&mut tx, sqlx::query(sql::SELECT_COST_FACTS).bind(period))
                .await
                .context(CONTEXT)?;
            stored.instance_hours = Self::read_table(&mut tx, period).await.context(CONTEXT)?;
        }
        stored.other_costs = Self::read_table(&mut tx, period).await.context(CONTEXT)?;
        stored.bill_lines = Self::read_table(&mut tx, period).await.context(CONTEXT)?;
        stored.bill_days = Self::read_table(&mut tx, period).await.context(CONTEXT)?;
        stored.commitments = Self::read_table(&mut tx, period).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)?;
        Ok(Some(stored))
    }

    /// [`SqlStore::insert`] of a period's rows being replaced: into the table's staged
    /// partition when the period's tables are partitioned ([`partitions`]), else the table.
    async fn insert_staged<'a, T: Table>(
        conn: &mut <B::Db as Database>::Connection,
        staging: Option<&partitions::Staging>,
        period: &'a str,
        rows: &'a [T],
    ) -> Result<(), sqlx::Error> {
        let table = T::sql().table.as_str();
        let target = staging.map_or(std::borrow::Cow::Borrowed(table), |staging| staging.target(table));
        Self::insert_into(conn, &target, period, rows).await
    }

    /// Builds the parent's indexes on each staged table of a period, analyzes it, and swaps
    /// it in for the period's old partition ([`partitions`]). Run last before commit: the
    /// parents stay locked from the first detach until then.
    async fn swap_partitions(
        conn: &mut <B::Db as Database>::Connection,
        staging: &partitions::Staging,
    ) -> StoreResult<()> {
        const CONTEXT: &str = "swapping a period's partitions";
        let mut indexes = Vec::new();
        for &table in staging.tables() {
            let definitions =
                Self::read_all(conn, sqlx::query(partitions::SELECT_INDEXES).bind(table), |row| {
                    row.text("indexdef")
                })
                .await
                .context(CONTEXT)?;
            let mut creates = Vec::new();
            for definition in &definitions {
                creates.extend(staging.index_statement(table, creates.len(), definition));
            }
            for create in &creates {
                sqlx::query(create).execute(&mut *conn).await.context(CONTEXT)?;
            }
            indexes.push(creates.len());
            sqlx::query(&format!("ANALYZE {}", staging.staged(table)))
                .execute(&mut *conn)
                .await
                .context(CONTEXT)?;
        }
        for (&table, indexes) in staging.tables().iter().zip(indexes) {
            let attached = Self::partition_attached(conn, staging, table).await?;
            for statement in staging.swap_statements(table, attached, indexes) {
                sqlx::query(&statement).execute(&mut *conn).await.context(CONTEXT)?;
            }
        }
        Ok(())
    }

    /// Whether the period's partition of `table` is there, attached. A table of its name
    /// that is not attached (detached by hand) is refused: it is not ours to drop.
    async fn partition_attached(
        conn: &mut <B::Db as Database>::Connection,
        staging: &partitions::Staging,
        table: &str,
    ) -> StoreResult<bool> {
        const CONTEXT: &str = "looking up a period's partition";
        let partition = staging.partition(table);
        let old = sqlx::query(partitions::SELECT_PARTITION)
            .bind(partition.as_str())
            .fetch_one(&mut *conn)
            .await
            .context(CONTEXT)?;
        let exists = old.int("n").context(CONTEXT)? > 0;
        let attached = old.int("attached").context(CONTEXT)? > 0;
        if exists && !attached {
            return Err(StoreError::Invalid(format!(
                "{partition} exists but is not a partition of {table} (detached by hand?): rename or drop it, then try again"
            )));
        }
        Ok(attached)
    }

    /// Replaces the hours `[from, to)` of `clusters` (every cluster for `""`) of two hourly
    /// tables in one transaction ([`SqlStore::begin_hour_window`]): `deletes` (each bound to
    /// from, to, cluster), then the rows.
    #[allow(clippy::too_many_arguments)]
    async fn replace_hour_window<X: Table, Y: Table>(
        &self,
        context: &'static str,
        from: i64,
        to: i64,
        clusters: &[&str],
        deletes: [&str; 2],
        first: &[X],
        second: &[Y],
    ) -> StoreResult<()> {
        let (mut tx, periods) = self.begin_hour_window(context, from, to).await?;
        Self::delete_hour_window(&mut tx, &deletes, from, to, clusters).await.context(context)?;
        Self::insert(&mut tx, "", first).await.context(context)?;
        Self::insert(&mut tx, "", second).await.context(context)?;
        Self::commit_hour_window(tx, &periods, context).await
    }

    /// A transaction replacing the hours `[from, to)`, under the usage locks of the billing
    /// periods the window touches (taken oldest first, so two overlapping windows never
    /// deadlock), and those periods.
    async fn begin_hour_window(
        &self,
        context: &'static str,
        from: i64,
        to: i64,
    ) -> StoreResult<(sqlx::Transaction<'static, B::Db>, Vec<String>)> {
        let mut periods = Vec::new();
        let mut month = crate::period::Period::containing(from);
        while month.start() < to {
            periods.push(month.to_string());
            month = month.next();
        }
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(context)?;
        for period in &periods {
            Self::lock_for_transaction(&mut tx, &format!("usage:{period}")).await.context(context)?;
        }
        Ok((tx, periods))
    }

    /// Runs each of `deletes`, bound to from, to and each of `clusters`.
    async fn delete_hour_window(
        conn: &mut <B::Db as Database>::Connection,
        deletes: &[&str],
        from: i64,
        to: i64,
        clusters: &[&str],
    ) -> Result<(), sqlx::Error> {
        for delete in deletes {
            for cluster in clusters {
                sqlx::query(delete).bind(from).bind(to).bind(*cluster).execute(&mut *conn).await?;
            }
        }
        Ok(())
    }

    /// Commits a [`SqlStore::begin_hour_window`] transaction, bumping its periods' revision.
    async fn commit_hour_window(
        mut tx: sqlx::Transaction<'static, B::Db>,
        periods: &[String],
        context: &'static str,
    ) -> StoreResult<()> {
        let revision = Self::next_revision(&mut tx).await.context(context)?;
        Self::touch_periods(&mut tx, periods, revision).await.context(context)?;
        tx.commit().await.context(context)
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
        Self::insert_into(conn, &T::sql().table, period, rows).await
    }

    /// [`SqlStore::insert`] into `target`, a table with `T`'s columns (a staged partition).
    async fn insert_into<'a, T: Table>(
        conn: &mut <B::Db as Database>::Connection,
        target: &str,
        period: &'a str,
        rows: &'a [T],
    ) -> Result<(), sqlx::Error> {
        let sql = T::sql();
        let insert = sql.insert_into(target);
        // The period goes into the statement as a literal when it is one (`YYYY-MM`): the same
        // value on every row, and a bound text is copied twice (into the driver's arguments,
        // then by SQLite) for each.
        let literal = sql.keyed_by_period.then(|| sql::period_literal(period)).flatten();
        let rows_per_statement = insert.rows_per_statement(B::MAX_BINDS, literal.is_some());
        B::insert_rows(conn, &insert.head, rows_per_statement, rows, move |row, item| {
            match &literal {
                Some(literal) => sql::PushRow::literal(row, literal),
                None if sql.keyed_by_period => sql::PushRow::text(row, period),
                None => row,
            };
            item.bind(row);
        })
        .await
    }

    /// The metrics' part of a period's compute inputs, hours `[from, to)`: attributed GPU
    /// pod-hours (those below `idle_threshold` counted per GPU), the GPU-hours no pod held
    /// per model, and the serving pod-hours.
    async fn read_measured(
        conn: &mut <B::Db as Database>::Connection,
        (from, to): (i64, i64),
        idle_threshold: f64,
        inputs: &mut crate::store::ComputeInputs,
    ) -> Result<(), sqlx::Error> {
        let in_hours = |query: &'static str| sqlx::query(query).bind(from).bind(to);
        let measured = in_hours(crate::store::sql_rollups::SELECT_MEASURED_POD_HOURS).bind(idle_threshold);
        inputs.measured = Self::fetch_rows(conn, measured).await?;
        inputs.unattributed =
            Self::read_all(conn, in_hours(crate::store::sql_rollups::SELECT_UNATTRIBUTED), |row| {
                Ok((row.text("gpu_model")?, row.float("gpu_hours")?))
            })
            .await?;
        inputs.served =
            Self::fetch_rows(conn, in_hours(crate::store::sql_rollups::SELECT_SERVED_POD_HOURS)).await?;
        Ok(())
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
    for<'q> &'q [u8]: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<&'q str>: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Vec<u8>: Encode<'q, B::Db> + Type<B::Db>,
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
}
