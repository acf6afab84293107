//! Billing periods: the bill, its pods and aggregates, and what compute reads of them.

use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::{Backend, SqlStore, partitions};
use crate::money::Micros;
use crate::store::sql::{self, ReadRow};
use crate::store::sql_rollups;
use crate::store::table::Table;
use crate::store::*;

/// A period's CUR bill among the month's bills.
const DELETE_CUR_BILL: &str = "DELETE FROM bills WHERE period = $1 AND format = 'cur'";

#[async_trait::async_trait]
impl<B: Backend> CostStore for SqlStore<B>
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
        // Postgres: the period's partitioned tables are written as new partitions and
        // swapped in before commit; the others lose the period's rows here.
        let staging = if B::PARTITIONS_BY_PERIOD {
            Self::lock_for_transaction(&mut tx, partitions::SWAP_LOCK).await.context(CONTEXT)?;
            let staging = partitions::Staging::new(name)?;
            for create in staging.create_statements() {
                sqlx::query(&create).execute(&mut *tx).await.context(CONTEXT)?;
            }
            Some(staging)
        } else {
            None
        };
        // A partitioned table's rows of the period go with the partition the swap replaces.
        let partitioned = |table: &str| staging.is_some() && partitions::PERIOD_TABLES.contains(&table);
        for table in sql::PERIOD_ROW_TABLES.into_iter().filter(|t| !partitioned(t)) {
            sqlx::query(&format!("DELETE FROM {table} WHERE period = $1"))
                .bind(name)
                .execute(&mut *tx)
                .await
                .context(CONTEXT)?;
        }
        for table in sql_rollups::period_tables().into_iter().filter(|t| !partitioned(&t.table)) {
            sqlx::query(&table.delete_period).bind(name).execute(&mut *tx).await.context(CONTEXT)?;
        }
        let mut fact_rows = 0i64;
        let mut aggregates = crate::store::aggregate::FactAggregates::default();
        while let Some(batch) = source.next_batch().await {
            // A batch's new pods; its facts are not stored: the period keeps their pod-day and
            // GPU pod-hour aggregates (what every page, report and compute reads), and the CUR
            // itself stays the line-level record.
            Self::insert_staged(&mut tx, staging.as_ref(), name, &batch.pods).await.context(CONTEXT)?;
            aggregates.add(&batch.facts);
            fact_rows += batch.facts.len() as i64;
        }
        let tail = source.finish().await.map_err(StoreError::Source)?;
        let started_tail = std::time::Instant::now();
        // Each step of the tail timed (`RUST_LOG=gpuledger=debug`): it runs after the last file
        // was read, so it is what the ingest's "write" time is made of.
        let mut step = started_tail;
        let mut done = |what: &str, rows: usize| {
            tracing::debug!(phase = "write", rows, seconds = step.elapsed().as_secs_f64(), "{what}");
            step = std::time::Instant::now();
        };
        let time_sliced = aggregates.share_oversubscribed_gpus(&tail.pods);
        done("time-sliced GPUs shared", time_sliced);
        if time_sliced > 0 {
            tracing::info!(
                instance_hours = time_sliced,
                "time-sliced GPUs: allocated GPU-hours shared by split usage"
            );
        }
        // The pod-days, their options and the GPU pod-hours are summed on another thread while
        // this one writes the pods and instance-hours: the two overlap on two cores.
        let PeriodTail { mut period, pods, bill } = tail;
        let pods = std::sync::Arc::new(pods);
        let instance_hours = std::sync::Arc::new(std::mem::take(&mut period.instance_hours));
        let sums = {
            let (pods, instance_hours) = (pods.clone(), instance_hours.clone());
            tokio::task::spawn_blocking(move || {
                let pod_days = aggregates.pod_days();
                let options = aggregates.pod_day_options(&pods, &instance_hours);
                (pod_days, options, aggregates.gpu_pod_hours())
            })
        };
        let period = &period;
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
            .bind(period.billing_account.as_str())
            .execute(&mut *tx)
            .await
            .context(CONTEXT)?;
        // The period's bill, with every other source's: one CUR a period, whatever its payer.
        sqlx::query(DELETE_CUR_BILL).bind(name).execute(&mut *tx).await.context(CONTEXT)?;
        Self::insert(&mut tx, "", std::slice::from_ref(&bill)).await.context(CONTEXT)?;
        done("period and its bill written", 1);
        Self::insert_staged(&mut tx, staging.as_ref(), name, &pods).await.context(CONTEXT)?;
        done("pods written", pods.len());
        Self::insert_staged(&mut tx, staging.as_ref(), name, &instance_hours).await.context(CONTEXT)?;
        done("instance-hours written", instance_hours.len());
        Self::insert_staged(&mut tx, staging.as_ref(), name, &period.other_costs).await.context(CONTEXT)?;
        Self::insert_staged(&mut tx, staging.as_ref(), name, &period.bill_lines).await.context(CONTEXT)?;
        Self::insert_staged(&mut tx, staging.as_ref(), name, &period.bill_days).await.context(CONTEXT)?;
        Self::insert_staged(&mut tx, staging.as_ref(), name, &period.commitments).await.context(CONTEXT)?;
        done("other costs, bill lines and days written", period.other_costs.len());
        let (pod_days, options, gpu_hours) = sums.await.map_err(|e| StoreError::Source(e.to_string()))?;
        done("pod-days, options and GPU pod-hours summed (waited for)", pod_days.len());
        Self::insert_staged(&mut tx, staging.as_ref(), name, &pod_days).await.context(CONTEXT)?;
        done("pod-days written", pod_days.len());
        Self::insert_staged(&mut tx, staging.as_ref(), name, &options).await.context(CONTEXT)?;
        done("pod-day options written", options.len());
        Self::insert_staged(&mut tx, staging.as_ref(), name, &gpu_hours).await.context(CONTEXT)?;
        done("GPU pod-hours written", gpu_hours.len());
        if let Some(staging) = &staging {
            Self::swap_partitions(&mut tx, staging).await?;
            done("partitions indexed, analyzed and swapped in", partitions::PERIOD_TABLES.len());
        }
        let revision = Self::next_revision(&mut tx).await.context(CONTEXT)?;
        Self::touch_periods(&mut tx, &[name.to_string()], revision).await.context(CONTEXT)?;
        tracing::debug!(phase = "commit", period = name, revision, "committing the period");
        tx.commit().await.context(CONTEXT)?;
        tracing::debug!(
            phase = "write",
            seconds = started_tail.elapsed().as_secs_f64(),
            "the period's tail committed"
        );
        Ok(())
    }

    async fn cost_period(&self, period: &str) -> StoreResult<Option<CostPeriod>> {
        self.read_period(period, true).await
    }

    async fn cluster_instance_hours(&self, period: &str, cluster: &str) -> StoreResult<Vec<InstanceHour>> {
        self.refuse_archived_period(period).await?;
        let sql = InstanceHour::sql().select_where("period = $1 AND cluster = $2");
        self.rows(sqlx::query(&sql).bind(period).bind(cluster), "reading a cluster's instance-hours").await
    }

    async fn commitment_months(&self) -> StoreResult<Vec<(String, CommitmentMonth)>> {
        const CONTEXT: &str = "reading commitments";
        let mut conn = self.pool.acquire().await.context(CONTEXT)?;
        let periods =
            Self::read_all(&mut conn, sqlx::query(sql::SELECT_COMMITMENT_PERIODS), |row| row.text("period"))
                .await
                .context(CONTEXT)?;
        let mut months = Vec::new();
        for period in periods {
            let rows: Vec<CommitmentMonth> = Self::read_table(&mut conn, &period).await.context(CONTEXT)?;
            months.extend(rows.into_iter().map(|row| (period.clone(), row)));
        }
        Ok(months)
    }

    async fn usage_hours(&self, from: &str, to: &str) -> StoreResult<Vec<UsageHour>> {
        self.rows(sqlx::query(sql::SELECT_USAGE_HOURS).bind(from).bind(to), "reading instance-hours by hour")
            .await
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
        self.refuse_archived_period(period).await?;
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

    async fn gpu_allocations(&self, period: &str) -> StoreResult<Vec<GpuAllocation>> {
        const CONTEXT: &str = "reading GPU allocations";
        self.refuse_archived_period(period).await?;
        self.rows(sqlx::query(sql::SELECT_GPU_ALLOCATIONS).bind(period), CONTEXT).await
    }

    async fn workload_costs(&self, period: &str) -> StoreResult<Vec<WorkloadCost>> {
        const CONTEXT: &str = "summing cost per workload";
        self.refuse_archived_period(period).await?;
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
        self.refuse_archived_period(period).await?;
        self.rows(
            sqlx::query(sql::SELECT_POD_COSTS)
                .bind(period)
                .bind(namespace)
                .bind(workload)
                .bind(from)
                .bind(to)
                .bind(format!("{workload}-")),
            CONTEXT,
        )
        .await
    }

    async fn pod_workloads(&self, period: &str) -> StoreResult<Vec<PodWorkload>> {
        const CONTEXT: &str = "reading pod workloads";
        self.refuse_archived_period(period).await?;
        self.rows(sqlx::query(sql::SELECT_POD_WORKLOADS).bind(period), CONTEXT).await
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
        let mut tx = self.begin_period_read().await.context(CONTEXT)?;
        Self::refuse_archived(&mut tx, period).await?;
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
        let unused = by_period(sql::SELECT_UNUSED_COMMITMENT).fetch_one(&mut *tx).await.context(CONTEXT)?;
        let input_revision =
            Self::optional_int(&mut tx, sql::SELECT_PERIOD_INPUT_REVISION, period, "revision")
                .await
                .context(CONTEXT)?
                .unwrap_or(1);
        let mut accounts: std::collections::BTreeMap<String, AccountRollup> =
            std::collections::BTreeMap::new();
        for row in by_period(sql_rollups::SELECT_ACCOUNT_BILLS).fetch_all(&mut *tx).await.context(CONTEXT)? {
            let account = row.text("account").context(CONTEXT)?;
            accounts.insert(
                account.clone(),
                AccountRollup {
                    period: period.to_string(),
                    account,
                    provider: "aws".into(),
                    name: row.text("name").context(CONTEXT)?,
                    bill_unblended_micros: Micros(row.int("bill_unblended_micros").context(CONTEXT)?),
                    unused_savings_plan_micros: Micros(
                        row.int("unused_savings_plan_micros").context(CONTEXT)?,
                    ),
                    unused_reservation_micros: Micros(row.int("unused_reservation_micros").context(CONTEXT)?),
                    ..AccountRollup::default()
                },
            );
        }
        for (query, instance) in [
            (sql_rollups::SELECT_ACCOUNT_INSTANCE_COST, true),
            (sql_rollups::SELECT_ACCOUNT_OTHER_COST, false),
        ] {
            for row in by_period(query).fetch_all(&mut *tx).await.context(CONTEXT)? {
                let account = row.text("account").context(CONTEXT)?;
                let entry = accounts.entry(account.clone()).or_insert_with(|| AccountRollup {
                    period: period.to_string(),
                    account,
                    provider: "aws".into(),
                    ..AccountRollup::default()
                });
                let total = Micros(row.int("total").context(CONTEXT)?);
                if instance {
                    entry.instance_cost_micros += total;
                } else {
                    entry.other_cost_micros += total;
                }
            }
        }
        let mut inputs = ComputeInputs {
            accounts: accounts.into_values().collect(),
            period: period.to_string(),
            input_revision,
            cur_billing_account: head.text("billing_account").context(CONTEXT)?,
            bill_unblended_micros: head.int("bill_unblended_micros").context(CONTEXT)?,
            bill_amortized_micros: head.int("bill_amortized_micros").context(CONTEXT)?,
            kubernetes_micros: head.int("kubernetes_micros").context(CONTEXT)?,
            unallocated_ec2_micros: head.int("unallocated_ec2_micros").context(CONTEXT)?,
            pods: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            pod_days: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            pod_day_options: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
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
            discount_micros: unused.int("discount").context(CONTEXT)?,
            other_groups: Self::fetch_rows(&mut tx, by_period(sql_rollups::SELECT_OTHER_COST_GROUPS))
                .await
                .context(CONTEXT)?,
            ..ComputeInputs::default()
        };
        Self::read_measured(&mut tx, (from, to), idle_threshold, &mut inputs).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)?;
        Ok(Some(inputs))
    }

    async fn metrics_inputs(&self, period: &str, idle_threshold: f64) -> StoreResult<ComputeInputs> {
        const CONTEXT: &str = "reading a period's metrics for compute";
        let month =
            period.parse::<crate::period::Period>().map_err(|e| StoreError::Invalid(e.to_string()))?;
        let mut tx = self.begin_period_read().await.context(CONTEXT)?;
        Self::refuse_archived(&mut tx, period).await?;
        let input_revision =
            Self::optional_int(&mut tx, sql::SELECT_PERIOD_INPUT_REVISION, period, "revision")
                .await
                .context(CONTEXT)?
                .unwrap_or(1);
        let mut inputs =
            ComputeInputs { period: period.to_string(), input_revision, ..ComputeInputs::default() };
        Self::read_measured(&mut tx, (month.start(), month.end()), idle_threshold, &mut inputs)
            .await
            .context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)?;
        Ok(inputs)
    }
}
