//! The web edge: an axum [`Router`] built in the library so tests drive it with
//! `tower::ServiceExt::oneshot` and no socket, server-rendered askama pages, JSON twins.

mod error;
mod home;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::store::Store;

pub use error::WebError;

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The database every page reads (SQLite or Postgres).
    pub store: Arc<dyn Store>,
}

impl AppState {
    pub fn new(store: Box<dyn Store>) -> AppState {
        AppState { store: Arc::from(store) }
    }
}

/// All routes of the dashboard.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(home::page))
        .route("/healthz", get(healthz))
        .route("/static/style.css", get(stylesheet))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// Liveness and database reachability, as JSON.
async fn healthz(
    axum::extract::State(state): axum::extract::State<AppState>,
) -> Result<axum::Json<serde_json::Value>, WebError> {
    let runs = state.store.ingest_runs(1).await?;
    Ok(axum::Json(serde_json::json!({
        "status": "ok",
        "database": state.store.backend(),
        "ingest_runs": runs.len(),
    })))
}

/// The stylesheet is compiled in, so the binary serves the same page from any folder.
async fn stylesheet() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("../../static/style.css"))
}

/// Listens on `address` until Ctrl-C or SIGTERM, then finishes in-flight requests.
pub async fn serve(state: AppState, address: SocketAddr) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    println!("gpuledger dashboard serving on http://{}", listener.local_addr()?);
    axum::serve(listener, router(state)).with_graceful_shutdown(shutdown_signal()).await?;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
}
