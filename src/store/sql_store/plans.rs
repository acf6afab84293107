//! Planned changes to demand, each with its line in the audit log.

use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::accounts::INSERT_AUDIT;
use super::{Backend, SqlStore};
use crate::store::sql::ReadRow;
use crate::store::table::Table;
use crate::store::*;

const INSERT_PLAN: &str = "INSERT INTO plans (client, pool, kind, amount, from_month, to_month, note, author, \
     created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id";

const DELETE_PLAN: &str = "DELETE FROM plans WHERE id = $1";

#[async_trait::async_trait]
impl<B: Backend> PlanStore for SqlStore<B>
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
    async fn plans(&self) -> StoreResult<Vec<Plan>> {
        let sql = Plan::sql().select_ordered("id");
        self.rows(sqlx::query(&sql), "reading planned changes").await
    }

    async fn add_plan(&self, plan: &Plan, username: &str) -> StoreResult<i64> {
        const CONTEXT: &str = "adding a planned change";
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        let row = sqlx::query(INSERT_PLAN)
            .bind(plan.client.as_str())
            .bind(plan.pool.as_str())
            .bind(plan.kind.as_str())
            .bind(plan.amount)
            .bind(plan.from_month.as_str())
            .bind(plan.to_month.as_str())
            .bind(plan.note.as_str())
            .bind(plan.author.as_str())
            .bind(plan.created_at)
            .fetch_one(&mut *tx)
            .await
            .context(CONTEXT)?;
        let id = row.int("id").context(CONTEXT)?;
        let detail = Plan { id, ..plan.clone() }.describe();
        let audit = AuditEntry::new(username, "", "plan_added", &detail);
        Self::audit_row(&audit).execute(&mut *tx).await.context(CONTEXT)?;
        // The Plan page's cached answers hold the plans: they go stale with the revision.
        Self::next_revision(&mut tx).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)?;
        Ok(id)
    }

    async fn remove_plan(&self, id: i64, username: &str) -> StoreResult<Option<Plan>> {
        const CONTEXT: &str = "removing a planned change";
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        let sql = Plan::sql().select_where("id = $1");
        let found: Vec<Plan> =
            Self::fetch_rows(&mut tx, sqlx::query(&sql).bind(id)).await.context(CONTEXT)?;
        let Some(plan) = found.into_iter().next() else {
            return Ok(None);
        };
        sqlx::query(DELETE_PLAN).bind(id).execute(&mut *tx).await.context(CONTEXT)?;
        let audit = AuditEntry::new(username, "", "plan_removed", &plan.describe());
        Self::audit_row(&audit).execute(&mut *tx).await.context(CONTEXT)?;
        Self::next_revision(&mut tx).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)?;
        Ok(Some(plan))
    }
}

impl<B: Backend> SqlStore<B>
where
    for<'q> <B::Db as Database>::Arguments<'q>: IntoArguments<'q, B::Db> + Default,
    for<'q> i64: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> &'q str: Encode<'q, B::Db> + Type<B::Db>,
{
    /// The audit log's insert of `entry`.
    fn audit_row(entry: &AuditEntry) -> sqlx::query::Query<'_, B::Db, <B::Db as Database>::Arguments<'_>> {
        sqlx::query(INSERT_AUDIT)
            .bind(entry.at)
            .bind(entry.username.as_str())
            .bind(entry.address.as_str())
            .bind(entry.action.as_str())
            .bind(entry.detail.as_str())
    }
}
