//! A tiny migration runner shared by both backends.
//!
//! Each backend's SQL files under `migrations/<backend>/` are embedded in the binary, so a
//! deployed gpuledger never looks for them on disk. Applied versions are recorded in
//! `schema_migrations`; each pending file runs in its own transaction, so a failing file
//! leaves the schema as the previous one left it.

use sqlx::{Database, Encode, Executor, IntoArguments, Pool, Type};

use super::sql::ReadRow;
use super::{SqlContext, StoreError, StoreResult};

/// One embedded migration file.
pub(crate) struct Migration {
    /// The number the file name starts with; applied in increasing order.
    pub(crate) version: i64,
    pub(crate) name: &'static str,
    pub(crate) sql: &'static str,
}

/// SQLite migrations, oldest first.
pub(crate) const SQLITE: &[Migration] = &[
    Migration { version: 1, name: "init", sql: include_str!("../../migrations/sqlite/0001_init.sql") },
    Migration {
        version: 2,
        name: "gpu_usage_share",
        sql: include_str!("../../migrations/sqlite/0002_gpu_usage_share.sql"),
    },
    Migration { version: 3, name: "rollups", sql: include_str!("../../migrations/sqlite/0003_rollups.sql") },
    Migration {
        version: 4,
        name: "pod_days_by_pod",
        sql: include_str!("../../migrations/sqlite/0004_pod_days_by_pod.sql"),
    },
];

/// Postgres migrations, oldest first; same versions and names as [`SQLITE`].
pub(crate) const POSTGRES: &[Migration] = &[
    Migration { version: 1, name: "init", sql: include_str!("../../migrations/postgres/0001_init.sql") },
    Migration {
        version: 2,
        name: "gpu_usage_share",
        sql: include_str!("../../migrations/postgres/0002_gpu_usage_share.sql"),
    },
    Migration {
        version: 3,
        name: "rollups",
        sql: include_str!("../../migrations/postgres/0003_rollups.sql"),
    },
    Migration {
        version: 4,
        name: "pod_days_by_pod",
        sql: include_str!("../../migrations/postgres/0004_pod_days_by_pod.sql"),
    },
];

const CREATE_SCHEMA_MIGRATIONS: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (\
     version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)";

const SELECT_APPLIED: &str = "SELECT version FROM schema_migrations ORDER BY version";

const RECORD_APPLIED: &str = "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)";

/// Applies the migrations not yet recorded in `schema_migrations`; returns how many ran.
pub(crate) async fn apply<DB>(pool: &Pool<DB>, migrations: &[Migration]) -> StoreResult<usize>
where
    DB: Database,
    DB::Row: ReadRow,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    i64: Type<DB> + for<'q> Encode<'q, DB>,
    String: Type<DB> + for<'q> Encode<'q, DB>,
{
    // `Executor::execute`, not `RawSql::execute`: the latter's future is not `Send` here, so
    // `Store::migrate` would not compile (sqlx issue #3150).
    pool.execute(sqlx::raw_sql(CREATE_SCHEMA_MIGRATIONS)).await.context("creating schema_migrations")?;
    let applied = sqlx::query(SELECT_APPLIED)
        .fetch_all(pool)
        .await
        .context("reading schema_migrations")?
        .iter()
        .map(|row| row.int("version"))
        .collect::<Result<Vec<i64>, _>>()
        .context("reading schema_migrations")?;

    let mut count = 0;
    for migration in migrations {
        if applied.contains(&migration.version) {
            continue;
        }
        let failed = |source| StoreError::Migration {
            version: migration.version,
            name: migration.name.to_string(),
            source,
        };
        let mut tx = pool.begin().await.map_err(failed)?;
        tx.execute(sqlx::raw_sql(migration.sql)).await.map_err(failed)?;
        sqlx::query(RECORD_APPLIED)
            .bind(migration.version)
            .bind(migration.name.to_string())
            .bind(chrono::Utc::now().timestamp())
            .execute(&mut *tx)
            .await
            .map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        count += 1;
    }
    Ok(count)
}
