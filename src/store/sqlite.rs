//! The SQLite store: one file next to the binary, the default for a single team.
//!
//! The file runs in WAL mode so pages can read while an ingest writes. Writes begin with
//! `BEGIN IMMEDIATE`: a writer takes the lock up front (waiting up to the busy timeout)
//! instead of failing half-way when a read lock cannot be upgraded.

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::migrations::{self, Migration, MigrationLock};
use super::sql_store::{Backend, SqlStore};
use super::{SqlContext, StoreResult};

/// The SQLite backend.
pub struct Sqlite;

impl Backend for Sqlite {
    type Db = sqlx::Sqlite;
    const NAME: &'static str = "sqlite";
    /// SQLite limits one statement to 32,766 bound values.
    const MAX_BINDS: usize = 32_766;
    /// Take the write lock up front rather than fail half-way when a read lock cannot be upgraded.
    const WRITE_BEGIN: &'static str = "BEGIN IMMEDIATE";
    /// WAL gives a read transaction one snapshot.
    const READ_BEGIN: &'static str = "BEGIN";
    /// `BEGIN IMMEDIATE` already excludes every other writer.
    const XACT_LOCK: &'static str = "";
    const MIGRATIONS: &'static [Migration] = migrations::SQLITE;
    fn rows_affected(result: &sqlx::sqlite::SqliteQueryResult) -> u64 {
        result.rows_affected()
    }

    super::sql_store::bulk_insert!();

    const MIGRATION_LOCK: MigrationLock = MigrationLock { acquire: "", begin: "BEGIN IMMEDIATE" };
    const PARTITIONS_BY_PERIOD: bool = false;
}

/// A [`super::Store`] in one SQLite file (or in memory, for tests).
pub type SqliteStore = SqlStore<Sqlite>;

impl SqlStore<Sqlite> {
    /// Opens `sqlite:PATH`, creating the file when missing, or `sqlite::memory:`.
    ///
    /// Does not migrate; [`super::connect`] does.
    pub async fn open(url: &str) -> StoreResult<Self> {
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        let mut options = SqliteConnectOptions::from_str(url)
            .context("reading the SQLite URL")?
            .create_if_missing(true)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5))
            // Measured on a 10-million-row month: with the 2 MiB default cache, most of the
            // write time went to spilling pages and to the on-disk statement journal; 64 MiB
            // and an in-memory statement journal remove most of it.
            .pragma("cache_size", "-65536")
            .pragma("temp_store", "memory");
        let pool_options = if in_memory {
            // An in-memory database lives only as long as a connection to it: keep exactly one,
            // forever.
            SqlitePoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None::<Duration>)
                .max_lifetime(None::<Duration>)
        } else {
            options = options.journal_mode(SqliteJournalMode::Wal).synchronous(SqliteSynchronous::Normal);
            SqlitePoolOptions::new()
        };
        let pool = pool_options.connect_with(options).await.context("opening the SQLite database")?;
        Ok(SqlStore::with_pool(pool))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::settings::{ChargeBasis, ClientTerms};
    use crate::store::{ClientRule, MatchKind, SettingsStore, Store};

    /// A database made before settings had effective dates (migrations 1–6) keeps its clients
    /// through migration 7: the markup from the beginning, the per-client policy `none` as
    /// exempt, `total` (now a per-pool rule) as the default terms, and its mapping rules as one
    /// list; the terms read today (with a charge basis, added later) are amortized.
    #[tokio::test]
    async fn clients_and_rules_from_before_migration_7_become_settings_versions() {
        let store = SqliteStore::open("sqlite::memory:").await.unwrap();
        let before = &migrations::SQLITE[..6];
        assert_eq!(before.last().map(|m| m.version), Some(6));
        migrations::apply(&store.pool, before, &Sqlite::MIGRATION_LOCK).await.unwrap();
        for sql in [
            "INSERT INTO clients (name, share_policy, markup_basis_points) \
             VALUES ('acme', 'none', 1250), ('globex', 'total', 0)",
            "INSERT INTO client_rules (client, match_kind, pattern, label_key, priority) \
             VALUES ('acme', 'prefix', 'acme-', '', 10), ('globex', 'label', 'globex', 'user_client', 20)",
        ] {
            sqlx::query(sql).execute(&store.pool).await.unwrap();
        }
        assert_eq!(store.migrate().await.unwrap(), migrations::SQLITE.len() - 6);
        let history = store.settings().await.unwrap();
        let october = history.in_force("2026-10".parse().unwrap()).unwrap();
        assert_eq!(
            october.terms("acme"),
            ClientTerms { markup_basis_points: 1_250, exempt: true, basis: ChargeBasis::Amortized }
        );
        assert_eq!(october.terms("globex"), ClientTerms::default());
        let rule = |client: &str, match_kind, pattern: &str, label_key: &str, priority| ClientRule {
            client: client.into(),
            match_kind,
            pattern: pattern.into(),
            label_key: label_key.into(),
            priority,
        };
        assert_eq!(
            october.rules,
            vec![
                rule("acme", MatchKind::Prefix, "acme-", "", 10),
                rule("globex", MatchKind::Label, "globex", "user_client", 20)
            ]
        );
        // Every later migration ran too: the schema is current.
        assert!(store.schema_status().await.unwrap().is_current());
    }
}
