//! The Postgres store, for teams that already run Postgres or share one gpuledger.
//!
//! Writes run at the default READ COMMITTED: each replace deletes and inserts inside one
//! transaction that first takes an advisory lock named for what it replaces (a billing
//! period, each month of a usage window, a period's rollups), so a second concurrent writer
//! waits, then replaces what the first wrote instead of adding to it. Multi-table reads use REPEATABLE READ, so they
//! see one snapshot.

use sqlx::Postgres;
use sqlx::postgres::{PgConnection, PgPool, PgPoolOptions};

use super::sql::{self, ReadRow};
use super::sql_rollups;
use super::{
    ClientRule, ClientSettings, ComputeInputs, CostPeriod, GpuAllocation, GpuUsage, InferenceUsage,
    IngestOutcome, IngestRun, NamespaceCost, NewIngestRun, PeriodRollup, PeriodSummary, PodCost, PodWorkload,
    Rollups, SqlContext, Store, StoreError, StoreResult, WorkloadCost, migrations,
};

/// The Postgres wire protocol counts bound values in 16 bits.
const MAX_BINDS: usize = 65_535;

/// Held (per session) while migrating, so dashboard replicas starting together take turns.
/// The key is arbitrary but fixed: ASCII "gpuledgr".
const MIGRATION_LOCK: &str = "SELECT pg_advisory_lock(7453586491716167538)";

/// How many connections the pool opens at most: pages read in parallel, ingests write alone.
const MAX_CONNECTIONS: u32 = 10;

/// A [`Store`] in a Postgres database.
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects to `postgres://USER:PASSWORD@HOST:PORT/DATABASE`.
    ///
    /// Does not migrate; [`super::connect`] does.
    pub async fn open(url: &str) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect(url)
            .await
            .context("connecting to Postgres")?;
        Ok(Self { pool })
    }
}

super::shared::store_impl!(
    PgStore,
    name: "postgres",
    migrations: migrations::POSTGRES,
    migration_lock: migrations::MigrationLock { acquire: MIGRATION_LOCK, begin: "BEGIN" },
    write_begin: "BEGIN",
    xact_lock: "SELECT pg_advisory_xact_lock($1)",
    connection: PgConnection,
    database: Postgres,
    read_begin: "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
);
