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
}
