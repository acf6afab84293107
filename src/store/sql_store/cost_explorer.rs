//! Cost Explorer's daily totals, the days fetched and the linked accounts' names.

use std::collections::BTreeMap;

use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::{Backend, SqlStore};
use crate::store::sql::ReadRow;
use crate::store::table::Table;
use crate::store::*;

const DELETE_COSTS: &str = "DELETE FROM ce_costs WHERE day >= $1 AND day < $2";

const DELETE_DAYS: &str = "DELETE FROM ce_days WHERE day >= $1 AND day < $2";

const UPSERT_ACCOUNT: &str = "INSERT INTO ce_accounts (account_id, name) VALUES ($1, $2) \
     ON CONFLICT (account_id) DO UPDATE SET name = excluded.name";

const SELECT_ACCOUNTS: &str = "SELECT account_id, name FROM ce_accounts ORDER BY account_id";

#[async_trait::async_trait]
impl<B: Backend> CostExplorerStore for SqlStore<B>
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
    async fn ce_days(&self, from: i64, to: i64) -> StoreResult<Vec<CeDay>> {
        let sql = CeDay::sql().select_where("day >= $1 AND day < $2");
        self.rows(sqlx::query(&sql).bind(from).bind(to), "reading the days fetched from Cost Explorer").await
    }

    async fn ce_costs(&self, from: i64, to: i64) -> StoreResult<Vec<CeCost>> {
        let sql = CeCost::sql().select_where("day >= $1 AND day < $2");
        self.rows(sqlx::query(&sql).bind(from).bind(to), "reading Cost Explorer's daily cost").await
    }

    async fn ce_accounts(&self) -> StoreResult<BTreeMap<String, String>> {
        const CONTEXT: &str = "reading linked accounts' names";
        let rows = sqlx::query(SELECT_ACCOUNTS).fetch_all(&self.pool).await.context(CONTEXT)?;
        rows.iter()
            .map(|row| Ok((row.text("account_id")?, row.text("name")?)))
            .collect::<Result<_, sqlx::Error>>()
            .context(CONTEXT)
    }

    async fn replace_ce_windows(&self, windows: &[CeWindow]) -> StoreResult<()> {
        const CONTEXT: &str = "storing Cost Explorer's daily cost";
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        Self::lock_for_transaction(&mut tx, "cost-explorer").await.context(CONTEXT)?;
        for window in windows {
            for delete in [DELETE_COSTS, DELETE_DAYS] {
                sqlx::query(delete)
                    .bind(window.from)
                    .bind(window.to)
                    .execute(&mut *tx)
                    .await
                    .context(CONTEXT)?;
            }
            Self::insert(&mut tx, "", &window.days).await.context(CONTEXT)?;
            Self::insert(&mut tx, "", &window.costs).await.context(CONTEXT)?;
            for (account, name) in &window.accounts {
                sqlx::query(UPSERT_ACCOUNT)
                    .bind(account.as_str())
                    .bind(name.as_str())
                    .execute(&mut *tx)
                    .await
                    .context(CONTEXT)?;
            }
        }
        Self::next_revision(&mut tx).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)
    }
}
