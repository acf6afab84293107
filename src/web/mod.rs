//! The web edge: an axum [`Router`] built in the library so tests drive it with
//! `tower::ServiceExt::oneshot` and no socket. Server-rendered askama pages read rollups
//! (kept in memory per computed period), each with JSON and CSV twins; gzip, security
//! headers, request tracing, and its own Prometheus `/metrics`.

mod charts;
mod client;
mod error;
mod home;
mod metrics;
mod pages;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::store::{Rollups, Store, StoreError};

pub use error::WebError;

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The database every page reads (SQLite or Postgres).
    pub store: Arc<dyn Store>,
    /// Computed periods' rollups in memory, refreshed when a period is recomputed.
    pub cache: Arc<RollupCache>,
    /// Request counts and latencies for `/metrics`.
    pub metrics: Arc<metrics::Metrics>,
    /// Rendered pages by URL, valid while the data they were rendered from is unchanged.
    pub pages: Arc<PageCache>,
}

impl AppState {
    pub fn new(store: Box<dyn Store>) -> AppState {
        AppState {
            store: Arc::from(store),
            cache: Arc::new(RollupCache::default()),
            metrics: Arc::new(metrics::Metrics::default()),
            pages: Arc::new(PageCache::default()),
        }
    }
}

/// Rollups of every computed period, loaded once and reloaded when `compute` ran again
/// (its `computed_at` changed), so a page costs one small query plus work in memory.
#[derive(Default)]
pub struct RollupCache {
    periods: tokio::sync::Mutex<HashMap<String, (i64, Arc<Rollups>)>>,
}

impl RollupCache {
    /// Every computed period's rollups, oldest first.
    pub async fn all(&self, store: &dyn Store) -> Result<Vec<Arc<Rollups>>, StoreError> {
        let computed = store.rollup_periods().await?;
        let mut periods = self.periods.lock().await;
        periods.retain(|name, _| computed.iter().any(|p| &p.period == name));
        let mut all = Vec::with_capacity(computed.len());
        for p in computed.iter().rev() {
            let fresh = periods.get(&p.period).filter(|(at, _)| *at == p.computed_at).map(|(_, r)| r.clone());
            let rollups = match fresh {
                Some(rollups) => rollups,
                None => {
                    let Some(loaded) = store.rollups(&p.period).await? else { continue };
                    let loaded = Arc::new(loaded);
                    periods.insert(p.period.clone(), (p.computed_at, loaded.clone()));
                    loaded
                }
            };
            all.push(rollups);
        }
        Ok(all)
    }
}

/// Rendered dashboard pages (HTML, JSON, CSV) by URL and `Accept`. An entry is served only
/// while the data generation it was rendered at still holds: the computed periods with
/// their compute times, and the newest ingest run (which drives the banner).
#[derive(Default)]
pub struct PageCache {
    entries: std::sync::Mutex<HashMap<String, CachedPage>>,
}

struct CachedPage {
    generation: String,
    status: axum::http::StatusCode,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
}

/// The most pages kept; the cache empties when full (pages are cheap to render again).
const PAGE_CACHE_ENTRIES: usize = 1024;

/// What a rendered page depends on, as a short string.
async fn generation(store: &dyn Store) -> Result<String, StoreError> {
    let computed = store.rollup_periods().await?;
    let latest = store.ingest_runs(1).await?;
    let mut key: String = computed.iter().map(|p| format!("{}@{};", p.period, p.computed_at)).collect();
    if let Some(run) = latest.first() {
        key.push_str(&format!("run {} {}", run.id, run.status));
    }
    // The staleness banner changes with the day, not only with the data.
    key.push_str(&format!(" day {}", chrono::Utc::now().timestamp() / 86_400));
    Ok(key)
}

/// Middleware: answers a dashboard page from the cache when its data has not changed.
async fn page_cache(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let cacheable = request.method() == axum::http::Method::GET
        && (matches!(
            request.uri().path(),
            "/" | "/costs" | "/clients" | "/gpus" | "/inference" | "/savings"
        ) || request.uri().path().starts_with("/clients/"));
    if !cacheable {
        return next.run(request).await;
    }
    let accept =
        request.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let key = format!("{}|{}", request.uri(), accept.contains("application/json"));
    let Ok(generation) = generation(state.store.as_ref()).await else { return next.run(request).await };
    if let Ok(entries) = state.pages.entries.lock()
        && let Some(hit) = entries.get(&key).filter(|e| e.generation == generation)
    {
        let mut response = axum::response::Response::new(axum::body::Body::from(hit.body.clone()));
        *response.status_mut() = hit.status;
        *response.headers_mut() = hit.headers.clone();
        return response;
    }
    let response = next.run(request).await;
    if response.status() != axum::http::StatusCode::OK {
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 20).await else {
        return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    if let Ok(mut entries) = state.pages.entries.lock() {
        if entries.len() >= PAGE_CACHE_ENTRIES {
            entries.clear();
        }
        entries.insert(
            key,
            CachedPage {
                generation,
                status: parts.status,
                headers: parts.headers.clone(),
                body: bytes.clone(),
            },
        );
    }
    axum::response::Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// A warning for every page: the last ingest failed, the bill's split rows did not add up to
/// their instances, or the data is more than two days old.
pub async fn banner(state: &AppState) -> Result<Option<String>, StoreError> {
    let runs = state.store.ingest_runs(20).await?;
    let Some(latest) = runs.first() else { return Ok(None) };
    if latest.status == "failed" {
        return Ok(Some(format!(
            "The latest ingest ({} {}) failed; figures may be out of date.",
            latest.kind, latest.period
        )));
    }
    let unreconciled =
        runs.iter().find(|r| r.kind == "cur").and_then(|r| r.reconciliation.as_deref()).is_some_and(|text| {
            serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .is_some_and(|v| v["split_matches_parents"] == false)
        });
    if unreconciled {
        return Ok(Some("The latest CUR ingest did not reconcile: pods' split cost does not add up to their instances. See Data.".into()));
    }
    let age_days = (chrono::Utc::now().timestamp() - latest.started_at) / 86_400;
    if age_days > 2 {
        return Ok(Some(format!("Data is {age_days} days old: the last ingest ran {age_days} days ago.")));
    }
    Ok(None)
}

/// All routes of the dashboard.
pub fn router(state: AppState) -> Router {
    let headers = [
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'",
        ),
    ];
    let mut router = Router::new()
        .route("/", get(pages::overview))
        .route("/costs", get(pages::costs))
        .route("/clients", get(pages::clients))
        .route("/clients/{client}", get(client::page))
        .route("/gpus", get(pages::gpus))
        .route("/inference", get(pages::inference))
        .route("/savings", get(pages::savings))
        .route("/data", get(home::page))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics::exposition))
        .route("/static/style.css", get(stylesheet))
        .route("/static/htmx.min.js", get(htmx))
        .layer(axum::middleware::from_fn_with_state(state.clone(), page_cache))
        .layer(axum::middleware::from_fn_with_state(state.clone(), metrics::track))
        .layer(tower_http::compression::CompressionLayer::new())
        .layer(tower_http::trace::TraceLayer::new_for_http());
    for (name, value) in headers {
        router = router.layer(SetResponseHeaderLayer::if_not_present(name, HeaderValue::from_static(value)));
    }
    router.with_state(state)
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
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8"), (header::CACHE_CONTROL, "public, max-age=3600")],
        include_str!("../../static/style.css"),
    )
}

/// htmx 2.0.4, vendored (`static/VENDORED.md`): filter changes swap the page without a full
/// reload; every page works without it.
async fn htmx() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        include_str!("../../static/htmx.min.js"),
    )
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
