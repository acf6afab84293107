//! Ingest and compute runs, revisions and pending periods.

use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::{Backend, SqlStore};
use crate::store::sql::{self, ReadRow};
use crate::store::*;

#[async_trait::async_trait]
impl<B: Backend> RunStore for SqlStore<B>
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

    async fn last_data_version(&self, kind: RunKind, period: &str) -> StoreResult<Option<String>> {
        const CONTEXT: &str = "reading the last ingested data version";
        let row = sqlx::query(sql::SELECT_LAST_DATA_VERSION)
            .bind(kind.as_str())
            .bind(period)
            .fetch_optional(&self.pool)
            .await
            .context(CONTEXT)?;
        row.map(|row| row.text("data_version")).transpose().context(CONTEXT)
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

    async fn input_revision(&self, period: &str) -> StoreResult<i64> {
        const CONTEXT: &str = "reading a period's input revision";
        let row = sqlx::query(sql::SELECT_PERIOD_INPUT_REVISION)
            .bind(period)
            .fetch_optional(&self.pool)
            .await
            .context(CONTEXT)?;
        row.map_or(Ok(1), |row| row.int("revision").context(CONTEXT))
    }

    async fn acquire_lock(
        &self,
        name: &str,
        holder: &LockHolder,
        stale_before: i64,
        alive: &(dyn Fn(i64) -> bool + Sync),
    ) -> StoreResult<Option<LockHolder>> {
        const CONTEXT: &str = "taking a job lock";
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        Self::lock_for_transaction(&mut tx, &format!("lock:{name}")).await.context(CONTEXT)?;
        let current = sqlx::query(SELECT_LOCK).bind(name).fetch_optional(&mut *tx).await.context(CONTEXT)?;
        if let Some(row) = current {
            let other = LockHolder {
                host: row.text("host").context(CONTEXT)?,
                pid: row.int("pid").context(CONTEXT)?,
                acquired_at: row.int("acquired_at").context(CONTEXT)?,
                heartbeat_at: row.int("heartbeat_at").context(CONTEXT)?,
            };
            let mine = other.host == holder.host && other.pid == holder.pid;
            let gone = other.heartbeat_at < stale_before || (other.host == holder.host && !alive(other.pid));
            if !mine && !gone {
                return Ok(Some(other));
            }
            sqlx::query(DELETE_LOCK).bind(name).execute(&mut *tx).await.context(CONTEXT)?;
        }
        sqlx::query(INSERT_LOCK)
            .bind(name)
            .bind(holder.host.as_str())
            .bind(holder.pid)
            .bind(holder.acquired_at)
            .bind(holder.heartbeat_at)
            .execute(&mut *tx)
            .await
            .context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)?;
        Ok(None)
    }

    async fn heartbeat_lock(&self, name: &str, holder: &LockHolder, at: i64) -> StoreResult<bool> {
        let result = sqlx::query(HEARTBEAT_LOCK)
            .bind(name)
            .bind(holder.host.as_str())
            .bind(holder.pid)
            .bind(at)
            .execute(&self.pool)
            .await
            .context("renewing a job lock")?;
        Ok(B::rows_affected(&result) > 0)
    }

    async fn release_lock(&self, name: &str, holder: &LockHolder) -> StoreResult<()> {
        sqlx::query(RELEASE_LOCK)
            .bind(name)
            .bind(holder.host.as_str())
            .bind(holder.pid)
            .execute(&self.pool)
            .await
            .context("releasing a job lock")
            .map(|_| ())
    }
}

const SELECT_LOCK: &str = "SELECT host, pid, acquired_at, heartbeat_at FROM job_locks WHERE name = $1";

const DELETE_LOCK: &str = "DELETE FROM job_locks WHERE name = $1";

const INSERT_LOCK: &str =
    "INSERT INTO job_locks (name, host, pid, acquired_at, heartbeat_at) VALUES ($1, $2, $3, $4, $5)";

const HEARTBEAT_LOCK: &str =
    "UPDATE job_locks SET heartbeat_at = $4 WHERE name = $1 AND host = $2 AND pid = $3";

const RELEASE_LOCK: &str = "DELETE FROM job_locks WHERE name = $1 AND host = $2 AND pid = $3";
