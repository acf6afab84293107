//! Helpers shared by the integration tests.
//!
//! Postgres tests run only when `GPULEDGER_TEST_POSTGRES_URL` names a server (CI sets it),
//! and each gets a database of its own, so tests never see each other's rows.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::{Connection, PgConnection};

/// The variable naming a Postgres server the tests may create databases on, e.g.
/// `postgres://postgres:postgres@localhost:5432/postgres`.
pub const POSTGRES_URL_VAR: &str = "GPULEDGER_TEST_POSTGRES_URL";

/// A throwaway Postgres database, dropped with any connections still open to it (Postgres 13+
/// `WITH (FORCE)`) when this guard is dropped, even if the test panicked.
pub struct FreshPostgres {
    /// The URL of the new database, for `gpuledger::store::connect`.
    pub url: String,
    admin_url: String,
    name: String,
}

/// Creates an empty database on the server named by [`POSTGRES_URL_VAR`], or returns `None`
/// when the variable is unset. Panics when it is set but the server cannot be used, so a CI
/// misconfiguration fails loudly instead of skipping.
pub async fn fresh_postgres() -> Option<FreshPostgres> {
    let admin_url = std::env::var(POSTGRES_URL_VAR).ok()?;
    let name = unique_database_name();
    let mut admin = PgConnection::connect(&admin_url)
        .await
        .unwrap_or_else(|error| panic!("{POSTGRES_URL_VAR} is set but unusable: {error}"));
    sqlx::raw_sql(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|error| panic!("could not create database {name}: {error}"));
    admin.close().await.ok();
    Some(FreshPostgres { url: with_database(&admin_url, &name), admin_url, name })
}

impl Drop for FreshPostgres {
    fn drop(&mut self) {
        // Drop cannot await, so the cleanup gets a thread and a small runtime of its own.
        let admin_url = self.admin_url.clone();
        let drop_database = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for dropping the test database");
            runtime.block_on(async {
                let mut admin = PgConnection::connect(&admin_url).await?;
                sqlx::raw_sql(&drop_database).execute(&mut admin).await?;
                admin.close().await
            })
        });
        if let Ok(Err(error)) = cleanup.join() {
            eprintln!("could not drop test database {}: {error}", self.name);
        }
    }
}

/// `gpuledger_test_<pid>_<nanos>_<n>`: unique across parallel test processes and tests.
fn unique_database_name() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos())
        .unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("gpuledger_test_{}_{nanos}_{n}", std::process::id())
}

/// Replaces the database (the URL's path) in a Postgres URL, keeping any `?params`.
fn with_database(url: &str, database: &str) -> String {
    let (base, params) = match url.split_once('?') {
        Some((base, params)) => (base, Some(params)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |scheme_end| scheme_end + 3);
    let path_start = base[authority_start..].find('/').map_or(base.len(), |slash| authority_start + slash);
    let mut replaced = format!("{}/{database}", &base[..path_start]);
    if let Some(params) = params {
        replaced.push('?');
        replaced.push_str(params);
    }
    replaced
}

#[test]
fn with_database_replaces_only_the_path() {
    assert_eq!(
        with_database("postgres://u:p@db:5432/postgres?sslmode=disable", "t1"),
        "postgres://u:p@db:5432/t1?sslmode=disable"
    );
    assert_eq!(with_database("postgres://localhost", "t1"), "postgres://localhost/t1");
}

/// Opens (and migrates) the database at `url` as the generated world needs it: every pod
/// there carries its client in its `user_client` label, and the administrator trusts those
/// labels everywhere (`gpuledger clients labels '*'`). A new database trusts them nowhere.
pub async fn connect(url: &str) -> Box<dyn gpuledger::store::Store> {
    let store = gpuledger::store::connect(url).await.unwrap();
    trust_labels(store.as_ref()).await;
    store
}

/// Trusts pods' labels everywhere, once (a database that has a `labels` setting keeps it).
pub async fn trust_labels(store: &dyn gpuledger::store::Store) {
    use gpuledger::domain::settings::{EffectiveFrom, SettingKind};
    let history = store.settings().await.unwrap();
    if history.versions.iter().any(|v| v.kind == SettingKind::Labels) {
        return;
    }
    let version = history.labels_version(EffectiveFrom::BEGINNING, &["*".to_string()]).unwrap();
    store.save_settings(&[version]).await.unwrap();
}
