//! Measured GPU and inference usage.

use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::{Backend, SqlStore};
use crate::store::sql::{self, ReadRow};
use crate::store::table::Table;
use crate::store::*;

/// The seconds of a day.
const DAY: i64 = 86_400;

/// `kube_pod_days` rows whose day overlaps `[$1, $2)`.
const POD_DAYS_WINDOW: &str = "day > $1 - 86400 AND day < $2";

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
    for<'q> &'q [u8]: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<&'q str>: Encode<'q, B::Db> + Type<B::Db>,
{
    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME, from = from, to = to, rows = gpu.len() + inference.len()))]
    async fn replace_usage_window(
        &self,
        from: i64,
        to: i64,
        clusters: &[&str],
        gpu: &[GpuUsage],
        inference: &[InferenceUsage],
    ) -> StoreResult<()> {
        let deletes = [sql::DELETE_GPU_USAGE_WINDOW, sql::DELETE_INFERENCE_USAGE_WINDOW];
        self.replace_hour_window("replacing a usage window", from, to, clusters, deletes, gpu, inference)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME, from = from, to = to, rows = nodes.len() + pods.len()))]
    async fn replace_kube_window(
        &self,
        from: i64,
        to: i64,
        clusters: &[&str],
        nodes: &[KubeNodeHour],
        pods: &[KubePodHour],
    ) -> StoreResult<()> {
        const CONTEXT: &str = "replacing a Kubernetes window";
        let (mut tx, periods) = self.begin_hour_window(CONTEXT, from, to).await?;
        let deletes = [sql::DELETE_KUBE_NODES_WINDOW, sql::DELETE_KUBE_PODS_WINDOW];
        Self::delete_hour_window(&mut tx, &deletes, from, to, clusters).await.context(CONTEXT)?;
        // A day the window covers in part keeps its hours outside the window.
        let partial = KubePodDay::sql().select_where_unordered(&format!(
            "{POD_DAYS_WINDOW} AND (day < $1 OR day + {DAY} > $2) AND ($3 = '' OR cluster = $3)"
        ));
        let mut kept = Vec::new();
        for cluster in clusters {
            let days: Vec<KubePodDay> =
                Self::fetch_rows(&mut tx, sqlx::query(&partial).bind(from).bind(to).bind(*cluster))
                    .await
                    .context(CONTEXT)?;
            for day in &days {
                day.unpack_into(&mut kept).map_err(|e| sqlx::Error::Decode(e.into())).context(CONTEXT)?;
            }
        }
        kept.retain(|hour| hour.hour < from || hour.hour >= to);
        let delete =
            format!("DELETE FROM kube_pod_days WHERE {POD_DAYS_WINDOW} AND ($3 = '' OR cluster = $3)");
        Self::delete_hour_window(&mut tx, &[&delete], from, to, clusters).await.context(CONTEXT)?;
        Self::insert(&mut tx, "", nodes).await.context(CONTEXT)?;
        Self::insert(&mut tx, "", &KubePodDay::pack_all(&kept)).await.context(CONTEXT)?;
        Self::insert(&mut tx, "", &KubePodDay::pack_all(pods)).await.context(CONTEXT)?;
        Self::commit_hour_window(tx, &periods, CONTEXT).await
    }

    async fn kube_clusters(&self, from: i64, to: i64) -> StoreResult<Vec<String>> {
        let sql =
            "SELECT DISTINCT cluster FROM kube_node_hours WHERE hour >= $1 AND hour < $2 ORDER BY cluster";
        let mut conn = self.pool.acquire().await.context("listing Kubernetes clusters")?;
        let rows = sqlx::query(sql)
            .bind(from)
            .bind(to)
            .fetch_all(&mut *conn)
            .await
            .context("listing Kubernetes clusters")?;
        rows.iter().map(|row| row.text("cluster").context("listing Kubernetes clusters")).collect()
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
        let nodes: Vec<KubeNodeHour> =
            self.rows(sqlx::query(&nodes).bind(from).bind(to).bind(cluster), CONTEXT).await?;
        // Hours stored one per row before migration 0038, then the days.
        let hours = KubePodHour::sql().select_where_unordered(window);
        let mut pods: Vec<KubePodHour> =
            self.rows(sqlx::query(&hours).bind(from).bind(to).bind(cluster), CONTEXT).await?;
        let days = KubePodDay::sql()
            .select_where_unordered(&format!("{POD_DAYS_WINDOW} AND ($3 = '' OR cluster = $3)"));
        let mut days: Vec<KubePodDay> =
            self.rows(sqlx::query(&days).bind(from).bind(to).bind(cluster), CONTEXT).await?;
        // The table's order (hour, cluster, namespace, pod, uid), sorted here: SQLite's ORDER BY
        // sorted a month's 3.9 M pod-hours in a temporary B-tree before the first row (1 min 43 s
        // against 27 s unsorted in the sqlite3 shell). The days sorted by name, their hours
        // then sorted by hour alone (stable) are in that order, without comparing names per hour.
        days.sort_by(|a, b| {
            (&a.cluster, &a.namespace, &a.pod, &a.uid).cmp(&(&b.cluster, &b.namespace, &b.pod, &b.uid))
        });
        let legacy = !pods.is_empty();
        pods.reserve(days.len() * 12);
        for day in &days {
            day.unpack_into(&mut pods).map_err(|e| sqlx::Error::Decode(e.into())).context(CONTEXT)?;
        }
        pods.retain(|hour| hour.hour >= from && hour.hour < to);
        if legacy {
            pods.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
        } else {
            pods.sort_by_key(|hour| hour.hour);
        }
        Ok((nodes, pods))
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
