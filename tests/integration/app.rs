//! `TestApp`: a database, the router over it and the generator's truth, so a web test reads
//! as a story ("given two demo months, the Costs JSON holds…").
//!
//! `TestApp::demo()` gives each test its own copy of one demo database (two months, CUR and
//! metrics ingested and computed), built once per test binary: tests stay independent (each
//! may write) without paying for generate → ingest → compute every time.

use std::path::{Path, PathBuf};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use gpuledger::store::Store;
use gpuledger::web::{AppState, AuthConfig, router};
use http_body_util::BodyExt;
use serde_json::Value;
use tokio::sync::OnceCell;
use tower::ServiceExt;

/// The shared demo: its folder (generated files, truth.json) and the database file in it.
struct Demo {
    dir: tempfile::TempDir,
    database: PathBuf,
}

static DEMO: OnceCell<Demo> = OnceCell::const_new();

/// A database behind the dashboard's router, with the truth of the data in it.
pub struct TestApp {
    pub state: AppState,
    /// Where the generated data (and `truth.json`) lives.
    data: PathBuf,
    _dir: tempfile::TempDir,
}

/// A number read from JSON: page twins write money as exact decimal strings (`"1234.567891"`),
/// the command-line reports and `truth.json` as numbers; both read as the same `f64` here.
pub trait Amount {
    fn amount(&self) -> f64;
}

impl Amount for Value {
    fn amount(&self) -> f64 {
        match self {
            Value::String(text) => text.parse().unwrap_or_else(|_| panic!("not a decimal: {self}")),
            _ => self.as_f64().unwrap_or_else(|| panic!("not a number: {self}")),
        }
    }
}

/// An HTTP answer: status, content type and body.
pub struct Answer {
    pub status: StatusCode,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.text()))
    }
}

impl TestApp {
    /// An empty SQLite database.
    pub async fn empty() -> TestApp {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("app.db").display());
        let state = AppState::new(crate::helpers::connect(&url).await, AuthConfig::off());
        TestApp { state, data: dir.path().to_path_buf(), _dir: dir }
    }

    /// A copy of the shared demo database: 2026-09 and 2026-10, seed 44, computed.
    pub async fn demo() -> TestApp {
        let demo = DEMO
            .get_or_init(|| async {
                let dir = tempfile::tempdir().unwrap();
                let database = dir.path().join("demo.db");
                let store = crate::helpers::connect(&format!("sqlite:{}", database.display())).await;
                crate::engine::generate_and_load(store.as_ref(), dir.path(), 2, 44).await;
                drop(store);
                // Everything into the main file, so a plain copy of it is the whole database.
                let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&format!(
                    "sqlite:{}",
                    database.display()
                ))
                .await
                .unwrap();
                sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut conn).await.unwrap();
                Demo { dir, database }
            })
            .await;
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("app.db");
        std::fs::copy(&demo.database, &copy).unwrap();
        let state = AppState::new(
            crate::helpers::connect(&format!("sqlite:{}", copy.display())).await,
            AuthConfig::off(),
        );
        TestApp { state, data: demo.dir.path().to_path_buf(), _dir: dir }
    }

    /// One small-scale month (2026-10, both clusters, so both linked accounts run pods),
    /// CUR and metrics ingested and computed, in a database of its own.
    pub async fn small() -> TestApp {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("app.db").display());
        let store = crate::helpers::connect(&url).await;
        crate::ingest_cur::generate_with(
            dir.path(),
            gpuledger::synth::Scale::Small,
            gpuledger::synth::CurFormat::Parquet,
            1,
            45,
            true,
        );
        crate::engine::load(store.as_ref(), dir.path(), &["2026-10"]).await;
        let state = AppState::new(store, AuthConfig::off());
        TestApp { state, data: dir.path().to_path_buf(), _dir: dir }
    }

    /// An app of `state` (its own database, built by the caller).
    pub fn with_state(state: AppState) -> TestApp {
        TestApp { state, data: PathBuf::new(), _dir: tempfile::tempdir().unwrap() }
    }

    pub fn store(&self) -> &dyn Store {
        self.state.store.as_ref()
    }

    /// The generator's truth for `period`.
    pub fn truth(&self, period: &str) -> Value {
        crate::ingest_cur::truth(&self.data, period)
    }

    /// The URL of this app's own copy of the database (for the command line).
    pub fn database_url(&self) -> String {
        format!("sqlite:{}", self._dir.path().join("app.db").display())
    }

    pub fn data(&self) -> &Path {
        &self.data
    }

    /// GET `uri` through the router (no socket), optionally with an `Accept` header.
    pub async fn fetch(&self, uri: &str, accept: Option<&str>) -> Answer {
        let mut request = Request::builder().uri(uri);
        if let Some(accept) = accept {
            request = request.header(header::ACCEPT, accept);
        }
        let response =
            router(self.state.clone()).oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let body = response.into_body().collect().await.unwrap().to_bytes().to_vec();
        Answer { status, content_type, body }
    }

    /// GET `uri`, which must answer 200 with JSON.
    pub async fn json(&self, uri: &str) -> Value {
        let answer = self.fetch(uri, None).await;
        assert_eq!(answer.status, StatusCode::OK, "{uri}: {}", answer.text());
        answer.json()
    }

    /// GET `uri`, which must answer 200; its body as text.
    pub async fn page(&self, uri: &str) -> String {
        let answer = self.fetch(uri, None).await;
        assert_eq!(answer.status, StatusCode::OK, "{uri}: {}", answer.text());
        answer.text()
    }
}
