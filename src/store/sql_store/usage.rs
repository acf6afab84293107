//! Measured GPU and inference usage.

use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::{Backend, SqlStore};
use crate::store::sql::{self, ReadRow};
use crate::store::table::Table;
use crate::store::*;

#[async_trait::async_trait]
impl<B: Backend> UsageStore for SqlStore<B>
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
        let periods = periods_touched(from, to);
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

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME, from = from, to = to, rows = nodes.len() + pods.len()))]
    async fn replace_kube_window(
        &self,
        from: i64,
        to: i64,
        cluster: &str,
        nodes: &[KubeNodeHour],
        pods: &[KubePodHour],
    ) -> StoreResult<()> {
        const CONTEXT: &str = "replacing a Kubernetes window";
        let periods = periods_touched(from, to);
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        for period in &periods {
            Self::lock_for_transaction(&mut tx, &format!("usage:{period}")).await.context(CONTEXT)?;
        }
        for delete in [sql::DELETE_KUBE_NODES_WINDOW, sql::DELETE_KUBE_PODS_WINDOW] {
            sqlx::query(delete).bind(from).bind(to).bind(cluster).execute(&mut *tx).await.context(CONTEXT)?;
        }
        Self::insert(&mut tx, "", nodes).await.context(CONTEXT)?;
        Self::insert(&mut tx, "", pods).await.context(CONTEXT)?;
        let revision = Self::next_revision(&mut tx).await.context(CONTEXT)?;
        Self::touch_periods(&mut tx, &periods, revision).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)
    }

    async fn kube_hours(
        &self,
        from: i64,
        to: i64,
        cluster: &str,
    ) -> StoreResult<(Vec<KubeNodeHour>, Vec<KubePodHour>)> {
        const CONTEXT: &str = "reading Kubernetes hours";
        let window = "hour >= $1 AND hour < $2 AND ($3 = '' OR cluster = $3)";
        let nodes = KubeNodeHour::sql().select_where(window);
        let pods = KubePodHour::sql().select_where(window);
        Ok((
            self.rows(sqlx::query(&nodes).bind(from).bind(to).bind(cluster), CONTEXT).await?,
            self.rows(sqlx::query(&pods).bind(from).bind(to).bind(cluster), CONTEXT).await?,
        ))
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
}

/// The billing periods `[from, to)` touches, oldest first: locks are taken in one order, so
/// two overlapping windows never deadlock.
fn periods_touched(from: i64, to: i64) -> Vec<String> {
    let mut periods = Vec::new();
    let mut month = crate::period::Period::containing(from);
    while month.start() < to {
        periods.push(month.to_string());
        month = month.next();
    }
    periods
}
