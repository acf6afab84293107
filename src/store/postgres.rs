//! The Postgres store, for teams that already run Postgres or share one gpuledger.
//!
//! Writes run at the default READ COMMITTED: each replace deletes and inserts inside one
//! transaction that first takes an advisory lock named for what it replaces (a billing
//! period, each month of a usage window, a period's rollups), so a second concurrent writer
//! waits, then replaces what the first wrote instead of adding to it. Multi-table reads use REPEATABLE READ, so they
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
