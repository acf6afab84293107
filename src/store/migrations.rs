//! A tiny migration runner shared by both backends.
//!
//! Each backend's SQL files under `migrations/<backend>/` are embedded in the binary, so a
//! deployed gpuledger never looks for them on disk. Applied versions are recorded in
//! `schema_migrations` with the SHA-256 of their text; each pending file runs in its own
//! transaction, so a failing file leaves the schema as the previous one left it.
//!
//! - An applied migration whose text changed since is refused: the schema it made is not the
//!   one the binary's later migrations and queries expect.
//! - Two processes starting together (dashboard replicas) do not race on DDL: Postgres
//!   migrates under a session advisory lock, SQLite inside `BEGIN IMMEDIATE`, and each
//!   migration re-checks inside its transaction whether another process applied it.
//! - [`check`] only reads, for `serve --no-migrate` under a role that may not change the schema.

use sqlx::{Connection, Database, Encode, Executor, IntoArguments, Pool, Type};

use super::sql::ReadRow;
use super::{SqlContext, StoreError, StoreResult};

/// One embedded migration file.
pub struct Migration {
    /// The number the file name starts with; applied in increasing order.
    pub(crate) version: i64,
    pub(crate) name: &'static str,
    pub(crate) sql: &'static str,
}

impl Migration {
    /// The SHA-256 of the file's text, in hex.
    pub(crate) fn checksum(&self) -> String {
        crate::text::sha256_hex(self.sql.as_bytes())
    }
}

// `SQLITE` and `POSTGRES`: every file of `migrations/sqlite/` and `migrations/postgres/`, in
// order (build.rs makes both lists from the folders and checks that they agree).
include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// How a backend keeps two migrating processes apart.
pub struct MigrationLock {
    /// Run once on the migrating connection before anything else (a session lock), or empty.
    pub(crate) acquire: &'static str,
    /// How each migration's transaction begins.
    pub(crate) begin: &'static str,
}

const CREATE_SCHEMA_MIGRATIONS: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (\
     version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL, \
     checksum TEXT NOT NULL DEFAULT '')";

/// Databases made before checksums were recorded lack the column.
const ADD_CHECKSUM_COLUMN: &str =
    "ALTER TABLE schema_migrations ADD COLUMN checksum TEXT NOT NULL DEFAULT ''";

const SELECT_APPLIED: &str = "SELECT version, name, checksum FROM schema_migrations ORDER BY version";

const SELECT_ONE_APPLIED: &str = "SELECT version, name, checksum FROM schema_migrations WHERE version = $1";

const RECORD_APPLIED: &str =
    "INSERT INTO schema_migrations (version, name, applied_at, checksum) VALUES ($1, $2, $3, $4)";

/// A migration applied before checksums existed takes the checksum of the text it has now.
const RECORD_CHECKSUM: &str =
    "UPDATE schema_migrations SET checksum = $1 WHERE version = $2 AND checksum = ''";

/// One row of `schema_migrations`.
struct Applied {
    version: i64,
    checksum: String,
}

/// Where the database's schema stands against the binary's migrations.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaStatus {
    /// The newest version applied, 0 for an empty database.
    pub applied: i64,
    /// The newest version this binary knows.
    pub latest: i64,
}

impl SchemaStatus {
    pub fn is_current(&self) -> bool {
        self.applied >= self.latest
    }
}

/// Applies the migrations not yet recorded in `schema_migrations`; returns how many ran.
pub(crate) async fn apply<DB>(
    pool: &Pool<DB>,
    migrations: &[Migration],
    lock: &MigrationLock,
) -> StoreResult<usize>
where
    DB: Database,
    DB::Row: ReadRow,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    i64: Type<DB> + for<'q> Encode<'q, DB>,
    String: Type<DB> + for<'q> Encode<'q, DB>,
{
    let mut conn = pool.acquire().await.context("connecting to migrate")?;
    if lock.acquire.is_empty() {
        return apply_on(&mut conn, migrations, lock).await;
    }
    // A session lock lives as long as its connection: the connection is closed afterwards
    // (never returned to the pool still holding it), and on an early error it closes on drop.
    // Never for SQLite: an in-memory database lives only as long as its one connection.
    conn.close_on_drop();
    (&mut *conn).execute(sqlx::raw_sql(lock.acquire)).await.context("waiting for the migration lock")?;
    let applied = apply_on(&mut conn, migrations, lock).await;
    conn.close().await.context("closing the migration connection")?;
    applied
}

/// [`apply`] on one connection, holding the backend's lock.
async fn apply_on<DB>(
    conn: &mut DB::Connection,
    migrations: &[Migration],
    lock: &MigrationLock,
) -> StoreResult<usize>
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
    (&mut *conn)
        .execute(sqlx::raw_sql(CREATE_SCHEMA_MIGRATIONS))
        .await
        .context("creating schema_migrations")?;
    let applied = match read_applied(&mut *conn).await {
        Ok(applied) => applied,
        Err(_) => {
            (&mut *conn)
                .execute(sqlx::raw_sql(ADD_CHECKSUM_COLUMN))
                .await
                .context("adding migration checksums")?;
            read_applied(&mut *conn).await.context("reading schema_migrations")?
        }
    };
    verify(&applied, migrations)?;
    for row in applied.iter().filter(|a| a.checksum.is_empty()) {
        if let Some(migration) = migrations.iter().find(|m| m.version == row.version) {
            sqlx::query(RECORD_CHECKSUM)
                .bind(migration.checksum())
                .bind(row.version)
                .execute(&mut *conn)
                .await
                .context("recording migration checksums")?;
        }
    }

    let mut count = 0;
    for migration in migrations {
        if applied.iter().any(|a| a.version == migration.version) {
            continue;
        }
        let failed = |source| StoreError::Migration {
            version: migration.version,
            name: migration.name.to_string(),
            source,
        };
        let mut tx = conn.begin_with(lock.begin).await.map_err(failed)?;
        // Another process may have applied it since the list above was read.
        let done = sqlx::query(SELECT_ONE_APPLIED).bind(migration.version).fetch_optional(&mut *tx).await;
        if done.map_err(failed)?.is_some() {
            continue;
        }
        tx.execute(sqlx::raw_sql(migration.sql)).await.map_err(failed)?;
        sqlx::query(RECORD_APPLIED)
            .bind(migration.version)
            .bind(migration.name.to_string())
            .bind(chrono::Utc::now().timestamp())
            .bind(migration.checksum())
            .execute(&mut *tx)
            .await
            .map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        count += 1;
    }
    Ok(count)
}

/// Reads where the schema stands without changing it; an edited applied migration is an error.
pub(crate) async fn check<DB>(pool: &Pool<DB>, migrations: &[Migration]) -> StoreResult<SchemaStatus>
where
    DB: Database,
    DB::Row: ReadRow,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    i64: Type<DB> + for<'q> Encode<'q, DB>,
    String: Type<DB> + for<'q> Encode<'q, DB>,
{
    let latest = migrations.iter().map(|m| m.version).max().unwrap_or(0);
    let mut conn = pool.acquire().await.context("connecting to check the schema")?;
    // No table yet (or no checksum column yet) reads as nothing applied.
    let applied = read_applied(&mut *conn).await.unwrap_or_default();
    verify(&applied, migrations)?;
    Ok(SchemaStatus { applied: applied.iter().map(|a| a.version).max().unwrap_or(0), latest })
}

async fn read_applied<'c, DB>(conn: &'c mut DB::Connection) -> Result<Vec<Applied>, sqlx::Error>
where
    DB: Database,
    DB::Row: ReadRow,
    &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
{
    sqlx::query(SELECT_APPLIED)
        .fetch_all(conn)
        .await?
        .iter()
        .map(|row| Ok(Applied { version: row.int("version")?, checksum: row.text("checksum")? }))
        .collect()
}

/// Refuses a database whose applied migrations differ from the binary's text.
fn verify(applied: &[Applied], migrations: &[Migration]) -> StoreResult<()> {
    for row in applied.iter().filter(|a| !a.checksum.is_empty()) {
        if let Some(migration) = migrations.iter().find(|m| m.version == row.version)
            && migration.checksum() != row.checksum
        {
            return Err(StoreError::EditedMigration {
                version: migration.version,
                name: migration.name.to_string(),
                recorded: row.checksum.clone(),
                embedded: migration.checksum(),
            });
        }
    }
    Ok(())
}
