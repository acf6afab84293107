//! The Postgres store, for teams that already run Postgres or share one gpuledger.
//!
//! Writes run at the default READ COMMITTED: each replace deletes and inserts inside one
//! transaction that first takes an advisory lock named for what it replaces (a billing
//! period, each month of a usage window, a period's rollups), so a second concurrent writer
//! waits, then replaces what the first wrote instead of adding to it. A billing period's
//! tables are partitioned by period, and replacing a period swaps its partitions
//! (`sql_store::partitions`). Multi-table reads use REPEATABLE READ, so they
//! see one snapshot.

use sqlx::postgres::PgPoolOptions;

use super::migrations::{self, Migration, MigrationLock};
use super::sql_store::{Backend, SqlStore};
use super::{SqlContext, StoreResult};

/// Held (per session) while migrating, so dashboard replicas starting together take turns.
/// The key is arbitrary but fixed: ASCII "gpuledgr".
const MIGRATION_LOCK: &str = "SELECT pg_advisory_lock(7453586491716167538)";

/// How many connections the pool opens at most: pages read in parallel, ingests write alone.
const MAX_CONNECTIONS: u32 = 10;

/// The Postgres backend.
pub struct Postgres;

impl Backend for Postgres {
    type Db = sqlx::Postgres;
    const NAME: &'static str = "postgres";
    /// The Postgres wire protocol counts bound values in 16 bits.
    const MAX_BINDS: usize = 65_535;
    const WRITE_BEGIN: &'static str = "BEGIN";
    const READ_BEGIN: &'static str = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY";
    const XACT_LOCK: &'static str = "SELECT pg_advisory_xact_lock($1)";
    const MIGRATIONS: &'static [Migration] = migrations::POSTGRES;
    fn rows_affected(result: &sqlx::postgres::PgQueryResult) -> u64 {
        result.rows_affected()
    }

    super::sql_store::bulk_insert!();

    const MIGRATION_LOCK: MigrationLock = MigrationLock { acquire: MIGRATION_LOCK, begin: "BEGIN" };
    const PARTITIONS_BY_PERIOD: bool = true;
}

/// A [`super::Store`] in a Postgres database.
pub type PgStore = SqlStore<Postgres>;

impl SqlStore<Postgres> {
    /// Connects to `postgres://USER:PASSWORD@HOST:PORT/DATABASE`.
    ///
    /// Does not migrate; [`super::connect`] does.
    pub async fn open(url: &str) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect(url)
            .await
            .context("connecting to Postgres")?;
        Ok(SqlStore::with_pool(pool))
    }
}

#[cfg(test)]
mod tests {
    use sqlx::Connection;

    use super::*;
    use crate::store::Store;

    /// A database from before partitions (migrations 1–22) holding two periods keeps every
    /// row through migration 23, each period in its own partition of each table, and the
    /// pods' key still refuses a second row of a pod in a period. Runs where
    /// `GPULEDGER_TEST_POSTGRES_URL` names a server (scripts/test sets it).
    #[tokio::test]
    async fn stored_periods_move_into_their_partitions() {
        let Ok(admin_url) = std::env::var("GPULEDGER_TEST_POSTGRES_URL") else { return };
        let name = format!("gpuledger_unit_{}", std::process::id());
        let mut admin = sqlx::PgConnection::connect(&admin_url).await.unwrap();
        for statement in [format!("DROP DATABASE IF EXISTS {name}"), format!("CREATE DATABASE {name}")] {
            sqlx::raw_sql(&statement).execute(&mut admin).await.unwrap();
        }
        let url = format!("{}/{name}", admin_url.rsplit_once('/').unwrap().0);
        let store = PgStore::open(&url).await.unwrap();
        let before = &migrations::POSTGRES[..22];
        assert_eq!(before.last().map(|m| m.version), Some(22));
        migrations::apply(&store.pool, before, &Postgres::MIGRATION_LOCK).await.unwrap();
        for sql in [
            "INSERT INTO cost_periods (period, ingested_at) VALUES ('2026-09', 0), ('2026-10', 0)",
            "INSERT INTO cost_pods (period, pod_id, pod) VALUES ('2026-09', 1, 'a'), ('2026-09', 2, 'b'), \
             ('2026-10', 1, 'a')",
            "INSERT INTO cost_pod_days (period, pod_id, day, split_cost_nanos) VALUES ('2026-09', 1, 0, 5), \
             ('2026-10', 1, 0, 7)",
            "INSERT INTO instance_hours (period, hour, amortized_cost_micros) VALUES ('2026-10', 0, 3)",
        ] {
            sqlx::query(sql).execute(&store.pool).await.unwrap();
        }
        assert_eq!(store.migrate().await.unwrap(), migrations::POSTGRES.len() - 22);
        let count = |table: &str| format!("SELECT COUNT(*) FROM {table}");
        for (table, rows) in [
            ("cost_pods_p2026_09", 2),
            ("cost_pods_p2026_10", 1),
            ("cost_pod_days_p2026_09", 1),
            ("cost_pod_days_p2026_10", 1),
            // Every stored period gets a partition of every table, rows or not.
            ("instance_hours_p2026_09", 0),
            ("instance_hours_p2026_10", 1),
            ("cost_facts_p2026_10", 0),
        ] {
            let (n,): (i64,) = sqlx::query_as(&count(table)).fetch_one(&store.pool).await.unwrap();
            assert_eq!(n, rows, "{table}");
        }
        let (cost,): (i64,) = sqlx::query_as(
            "SELECT CAST(SUM(split_cost_nanos) AS BIGINT) FROM cost_pod_days WHERE period = '2026-10'",
        )
        .fetch_one(&store.pool)
        .await
        .unwrap();
        assert_eq!(cost, 7);
        let duplicate = sqlx::query("INSERT INTO cost_pods (period, pod_id) VALUES ('2026-10', 1)")
            .execute(&store.pool)
            .await;
        assert!(duplicate.is_err(), "(period, pod_id) is still the pods' key");
        store.pool.close().await;
        sqlx::raw_sql(&format!("DROP DATABASE {name} WITH (FORCE)")).execute(&mut admin).await.unwrap();
    }
}
