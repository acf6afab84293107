//! Settings with effective dates.

use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::{Backend, SqlStore};
use crate::store::sql::{self, ReadRow};
use crate::store::*;

#[async_trait::async_trait]
impl<B: Backend> SettingsStore for SqlStore<B>
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
    async fn settings(&self) -> StoreResult<SettingsHistory> {
        const CONTEXT: &str = "reading settings";
        let rows = sqlx::query(sql::SELECT_SETTINGS).fetch_all(&self.pool).await.context(CONTEXT)?;
        let versions =
            rows.iter().map(sql::setting_version).collect::<Result<Vec<_>, _>>().context(CONTEXT)?;
        Ok(SettingsHistory { versions })
    }

    async fn save_settings(&self, versions: &[SettingVersion]) -> StoreResult<()> {
        const CONTEXT: &str = "saving settings";
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        for version in versions {
            let (kind, from) = (version.kind.as_str(), version.effective_from.to_string());
            sqlx::query(sql::DELETE_SETTING)
                .bind(kind)
                .bind(version.key.as_str())
                .bind(from.as_str())
                .execute(&mut *tx)
                .await
                .context(CONTEXT)?;
            sqlx::query(sql::INSERT_SETTING)
                .bind(kind)
                .bind(version.key.as_str())
                .bind(from.as_str())
                .bind(version.value.to_string())
                .bind(version.set_at)
                .execute(&mut *tx)
                .await
                .context(CONTEXT)?;
        }
        // Settings are an input of every page: a new revision tells the dashboards' caches.
        Self::next_revision(&mut tx).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)
    }
}
