//! A billing period's detail rows moved out of the database and back ([`ArchiveStore`]).
//!
//! Archiving reads the period's detail rows in one snapshot (the caller writes them to files),
//! then removes them in one transaction: on Postgres it detaches and drops the period's
//! partitions of those tables, on SQLite it deletes their rows. Restoring writes them back as
//! a re-delivery does: on Postgres into new partitions, indexed and analyzed, swapped in
//! before commit ([`partitions`]).
//!
//! What stays is what finance reads of a closed period: the bill (`cost_periods`,
//! `bill_lines`, `bill_days`, `other_costs`), the rollups every page reads, and issued
//! invoices. A read that needs the detail rows of an archived period is refused
//! ([`StoreError::Archived`]) rather than answered from an empty period.

use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::{Backend, SqlStore, partitions};
use crate::store::sql::ReadRow;
use crate::store::table::{Table, table};
use crate::store::*;

/// The tables archived, in [`partitions::PERIOD_TABLES`]' order (the order swaps lock them).
/// `other_costs` stays: a period's non-Kubernetes lines by day, service and tags are small,
/// and the bill report reads them. `cost_facts` is empty for every period a current
/// gpuledger stored (archiving a period that has some is refused).
pub(crate) const DETAIL_TABLES: [&str; 5] =
    ["cost_pods", "instance_hours", "cost_pod_days", "cost_gpu_pod_hours", "cost_pod_day_options"];

table!(ArchivedPeriod in "archived_periods" {
    period, data_version, archived_at, location, detail_rows, manifest_sha256,
} order by "period");

const COUNT_FACTS: &str = "SELECT COUNT(*) AS n FROM cost_facts WHERE period = $1";
const SELECT_DATA_VERSION: &str = "SELECT data_version FROM cost_periods WHERE period = $1";
const DELETE_ARCHIVED: &str = "DELETE FROM archived_periods WHERE period = $1";

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
    /// The archive record of `period`, if it is archived.
    async fn archived(
        conn: &mut <B::Db as Database>::Connection,
        period: &str,
    ) -> Result<Option<ArchivedPeriod>, sqlx::Error> {
        let select = ArchivedPeriod::sql().select_where("period = $1");
        Ok(Self::fetch_rows(conn, sqlx::query(&select).bind(period)).await?.pop())
    }

    /// Refuses a read of `period`'s detail rows when they are archived. Run inside the read's
    /// transaction, so an archive committed meanwhile is seen.
    pub(super) async fn refuse_archived(
        conn: &mut <B::Db as Database>::Connection,
        period: &str,
    ) -> StoreResult<()> {
        match Self::archived(conn, period).await.context("checking whether a period is archived")? {
            Some(archived) => Err(StoreError::Archived(Box::new(archived))),
            None => Ok(()),
        }
    }

    /// [`SqlStore::refuse_archived`] on a connection of the pool, for reads of one statement.
    pub(super) async fn refuse_archived_period(&self, period: &str) -> StoreResult<()> {
        let mut conn = self.pool.acquire().await.context("checking whether a period is archived")?;
        Self::refuse_archived(&mut conn, period).await
    }

    /// The delivery `period` is stored from; refused when it is not stored.
    async fn stored_delivery(
        conn: &mut <B::Db as Database>::Connection,
        period: &str,
        context: &'static str,
    ) -> StoreResult<String> {
        let row = sqlx::query(SELECT_DATA_VERSION)
            .bind(period)
            .fetch_optional(&mut *conn)
            .await
            .context(context)?;
        let stored = row.map(|row| row.text("data_version")).transpose().context(context)?;
        stored.ok_or_else(|| StoreError::Invalid(format!("billing period {period} is not stored")))
    }
}

#[async_trait::async_trait]
impl<B: Backend> ArchiveStore for SqlStore<B>
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
    async fn period_detail(&self, period: &str) -> StoreResult<(String, PeriodDetail)> {
        const CONTEXT: &str = "reading a period's detail rows";
        let mut tx = self.begin_period_read().await.context(CONTEXT)?;
        Self::refuse_archived(&mut tx, period).await?;
        let data_version = Self::stored_delivery(&mut tx, period, CONTEXT).await?;
        let facts = sqlx::query(COUNT_FACTS)
            .bind(period)
            .fetch_one(&mut *tx)
            .await
            .and_then(|row| row.int("n"))
            .context(CONTEXT)?;
        if facts > 0 {
            return Err(StoreError::Invalid(format!(
                "billing period {period} was stored line by line by an older gpuledger ({facts} cost facts): \
                 ingest it again, then archive it"
            )));
        }
        let detail = PeriodDetail {
            pods: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            instance_hours: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            pod_days: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            pod_day_options: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
            gpu_pod_hours: Self::read_table(&mut tx, period).await.context(CONTEXT)?,
        };
        tx.commit().await.context(CONTEXT)?;
        Ok((data_version, detail))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME, period = %archived.period))]
    async fn archive_period(&self, archived: &ArchivedPeriod) -> StoreResult<()> {
        const CONTEXT: &str = "removing an archived period's detail rows";
        let period = archived.period.as_str();
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        // The lock a replace of the period takes: an ingest of it waits, or is waited for.
        Self::lock_for_transaction(&mut tx, &format!("cost:{period}")).await.context(CONTEXT)?;
        let stored = Self::stored_delivery(&mut tx, period, CONTEXT).await?;
        if stored != archived.data_version {
            return Err(StoreError::Invalid(format!(
                "billing period {period} is stored from delivery {stored}, not {} (delivered again \
                 meanwhile): nothing removed",
                archived.data_version
            )));
        }
        Self::refuse_archived(&mut tx, period).await?;
        if B::PARTITIONS_BY_PERIOD {
            Self::lock_for_transaction(&mut tx, partitions::SWAP_LOCK).await.context(CONTEXT)?;
            let staging = partitions::Staging::of(period, &DETAIL_TABLES)?;
            for table in DETAIL_TABLES {
                let attached = Self::partition_attached(&mut tx, &staging, table).await?;
                for statement in staging.drop_statements(table, attached) {
                    sqlx::query(&statement).execute(&mut *tx).await.context(CONTEXT)?;
                }
            }
        } else {
            for table in DETAIL_TABLES {
                sqlx::query(&format!("DELETE FROM {table} WHERE period = $1"))
                    .bind(period)
                    .execute(&mut *tx)
                    .await
                    .context(CONTEXT)?;
            }
        }
        Self::insert(&mut tx, period, std::slice::from_ref(archived)).await.context(CONTEXT)?;
        // Caches key on the data revision; the period's inputs did not change, so its rollups
        // stay current and it is not pending.
        Self::next_revision(&mut tx).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME, period = period))]
    async fn restore_period(
        &self,
        period: &str,
        data_version: &str,
        detail: &PeriodDetail,
    ) -> StoreResult<()> {
        const CONTEXT: &str = "restoring an archived period's detail rows";
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        Self::lock_for_transaction(&mut tx, &format!("cost:{period}")).await.context(CONTEXT)?;
        let Some(archived) = Self::archived(&mut tx, period).await.context(CONTEXT)? else {
            return Err(StoreError::Invalid(format!(
                "billing period {period} is not archived (its detail rows are in the database): nothing restored"
            )));
        };
        if archived.data_version != data_version {
            return Err(StoreError::Invalid(format!(
                "this archive of {period} is of delivery {data_version}, but the database archived delivery {} \
                 (to {}): nothing restored",
                archived.data_version, archived.location
            )));
        }
        // A new delivery of the period ends its archive (`archived_periods` is cleared with
        // the period), so an archived period is still stored from the archived delivery.
        let staging = if B::PARTITIONS_BY_PERIOD {
            Self::lock_for_transaction(&mut tx, partitions::SWAP_LOCK).await.context(CONTEXT)?;
            let staging = partitions::Staging::of(period, &DETAIL_TABLES)?;
            for create in staging.create_statements() {
                sqlx::query(&create).execute(&mut *tx).await.context(CONTEXT)?;
            }
            Some(staging)
        } else {
            None
        };
        Self::insert_staged(&mut tx, staging.as_ref(), period, &detail.pods).await.context(CONTEXT)?;
        Self::insert_staged(&mut tx, staging.as_ref(), period, &detail.instance_hours)
            .await
            .context(CONTEXT)?;
        Self::insert_staged(&mut tx, staging.as_ref(), period, &detail.pod_days).await.context(CONTEXT)?;
        Self::insert_staged(&mut tx, staging.as_ref(), period, &detail.pod_day_options)
            .await
            .context(CONTEXT)?;
        Self::insert_staged(&mut tx, staging.as_ref(), period, &detail.gpu_pod_hours)
            .await
            .context(CONTEXT)?;
        if let Some(staging) = &staging {
            Self::swap_partitions(&mut tx, staging).await?;
        }
        sqlx::query(DELETE_ARCHIVED).bind(period).execute(&mut *tx).await.context(CONTEXT)?;
        Self::next_revision(&mut tx).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)?;
        Ok(())
    }

    async fn archived_periods(&self) -> StoreResult<Vec<ArchivedPeriod>> {
        self.rows(
            sqlx::query(&ArchivedPeriod::sql().select_ordered("period DESC")),
            "listing archived periods",
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detail_tables_are_partitioned_and_locked_in_the_same_order() {
        let order: Vec<_> =
            partitions::PERIOD_TABLES.iter().filter(|table| DETAIL_TABLES.contains(table)).collect();
        assert_eq!(order, DETAIL_TABLES.iter().collect::<Vec<_>>());
    }
}
