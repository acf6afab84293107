//! Computed rollups and the chargeback snapshots they replace.

use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::{Backend, SqlStore};
use crate::store::sql::{self, ReadRow};
use crate::store::sql_rollups;
use crate::store::table::Table;
use crate::store::*;

#[async_trait::async_trait]
impl<B: Backend> RollupStore for SqlStore<B>
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
        Self::insert(&mut tx, name, &rollups.utilization).await.context(CONTEXT)?;
        Self::insert(&mut tx, name, &rollups.clients).await.context(CONTEXT)?;
        Self::insert(&mut tx, name, &rollups.opportunities).await.context(CONTEXT)?;
        Self::insert(&mut tx, name, &rollups.accounts).await.context(CONTEXT)?;
        Self::insert(&mut tx, name, &rollups.kube_splits).await.context(CONTEXT)?;
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
            utilization: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            clients: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            opportunities: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            accounts: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            kube_splits: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            withheld_others: false,
            withheld_client_columns: 0,
        };
        tx.commit().await.context(CONTEXT)?;
        Ok(Some(rollups))
    }

    async fn rollup_periods(&self) -> StoreResult<Vec<PeriodRollup>> {
        const CONTEXT: &str = "listing computed periods";
        let newest_first = PeriodRollup::sql().select_ordered("period DESC");
        self.rows(sqlx::query(&newest_first), CONTEXT).await
    }

    async fn rollup_client_names(&self) -> StoreResult<Vec<String>> {
        const CONTEXT: &str = "listing the clients of computed periods";
        let rows = sqlx::query("SELECT DISTINCT client FROM rollup_clients ORDER BY client")
            .fetch_all(&self.pool)
            .await
            .context(CONTEXT)?;
        Ok(rows.iter().map(|row| row.text("client")).collect::<Result<_, _>>().context(CONTEXT)?)
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
}
