//! The web edge: an axum [`Router`] built in the library so tests drive it with
//! `tower::ServiceExt::oneshot` and no socket. Server-rendered askama pages read rollups
//! (kept in memory per computed period), each with JSON and CSV twins; gzip, security
//! headers, request tracing, and its own Prometheus `/metrics`.

mod auth;
mod charts;
mod error;
mod filters;
pub mod listen;
mod metrics;
mod pages;
pub mod registry;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tower_http::set_header::SetResponseHeaderLayer;

use crate::auth::Scope;
use crate::domain::runs::RunKind;
use crate::store::{IngestRun, Rollups, RunStatus, Store, StoreError};

pub use auth::{AuthConfig, AuthMode, SESSION_COOKIE, Viewer, cookie, first_start};
pub use error::WebError;
pub use pages::{url_escape, warm_plan};

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The database every page reads (SQLite or Postgres).
    pub store: Arc<dyn Store>,
    /// Computed periods' rollups in memory, refreshed when a period is recomputed.
    pub cache: Arc<RollupCache>,
    /// Request counts and latencies for `/metrics`.
    pub metrics: Arc<metrics::Metrics>,
    /// Rendered pages by URL and scope, valid while the data they were rendered from is
    /// unchanged.
    pub pages: Arc<PageCache>,
    /// How visitors sign in.
    pub auth: Arc<AuthConfig>,
    /// How long a page waits for recomputed periods to be read again before it answers from
    /// the previous rollups (and says so): a demo month is read in milliseconds, a churny month
    /// of a large fleet in a second or more.
    pub fresh_wait: std::time::Duration,
    /// AWS's own Savings Plan recommendation and where it came from (`serve
    /// --aws-recommendation`), shown beside the Plan page's advice.
    pub aws_recommendation: Option<Arc<crate::report::commitments::AwsRecommendations>>,
    /// The Plan page's forecasts per horizon and scope, kept while the data generation holds,
    /// so each of its downloads, pools and tables does not forecast again.
    pub plans: Arc<pages::PlanCache>,
}

impl AppState {
    pub fn new(store: Box<dyn Store>, auth: AuthConfig) -> AppState {
        AppState {
            store: Arc::from(store),
            cache: Arc::new(RollupCache::default()),
            metrics: Arc::new(metrics::Metrics::default()),
            pages: Arc::new(PageCache::default()),
            auth: Arc::new(auth),
            fresh_wait: std::time::Duration::from_millis(200),
            aws_recommendation: None,
            plans: Arc::new(pages::PlanCache::default()),
        }
    }
}

/// Rollups of every computed period, loaded once and reloaded when `compute` wrote them again
/// (their revision changed), so a page costs one small query plus work in memory.
/// Scoped copies are kept beside them, per scope, so a scoped user's page does not filter
/// every period again.
#[derive(Default)]
pub struct RollupCache {
    periods: tokio::sync::Mutex<HashMap<String, Versioned>>,
    /// By (scope key, period).
    scoped: tokio::sync::Mutex<HashMap<(String, String), Versioned>>,
    /// A background read of recomputed periods is under way ([`RollupCache::all_or_previous`]).
    reloading: std::sync::atomic::AtomicBool,
}

/// Rollups with the revision they were read at.
type Versioned = (i64, Arc<Rollups>);

impl RollupCache {
    /// Every computed period's rollups as `scope` may see them, oldest first.
    pub async fn all(&self, store: &dyn Store, scope: &Scope) -> Result<Vec<Arc<Rollups>>, StoreError> {
        Ok(self.read(store, scope, false).await?.0)
    }

    /// [`RollupCache::all`], except that a period recomputed since it was read is answered
    /// from the rollups read before, when they are at hand (reading a churny month again takes
    /// a second or more); `true` when any was. The caller has them read again
    /// ([`RollupCache::start_reloading`]).
    pub async fn all_or_previous(
        &self,
        store: &dyn Store,
        scope: &Scope,
    ) -> Result<(Vec<Arc<Rollups>>, bool), StoreError> {
        self.read(store, scope, true).await
    }

    /// Marks a background read as started; false when one already is.
    pub fn start_reloading(&self) -> bool {
        !self.reloading.swap(true, std::sync::atomic::Ordering::AcqRel)
    }

    pub fn done_reloading(&self) {
        self.reloading.store(false, std::sync::atomic::Ordering::Release);
    }

    async fn read(
        &self,
        store: &dyn Store,
        scope: &Scope,
        keep_previous: bool,
    ) -> Result<(Vec<Arc<Rollups>>, bool), StoreError> {
        let computed = store.rollup_periods().await?;
        // What is at hand, then what must be read, read without holding the lock (another
        // page may be answered from the previous rollups meanwhile).
        let mut all: Vec<Option<Versioned>> = Vec::with_capacity(computed.len());
        let mut previous = false;
        {
            let mut periods = self.periods.lock().await;
            periods.retain(|name, _| computed.iter().any(|p| &p.period == name));
            for p in computed.iter().rev() {
                all.push(match periods.get(&p.period) {
                    Some((at, r)) if *at == p.revision => Some((*at, r.clone())),
                    Some((at, r)) if keep_previous => {
                        previous = true;
                        Some((*at, r.clone()))
                    }
                    _ => None,
                });
            }
        }
        for (slot, p) in all.iter_mut().zip(computed.iter().rev()) {
            if slot.is_none()
                && let Some(loaded) = store.rollups(&p.period).await?
            {
                let loaded = Arc::new(loaded);
                self.periods.lock().await.insert(p.period.clone(), (p.revision, loaded.clone()));
                *slot = Some((p.revision, loaded));
            }
        }
        let all: Vec<Versioned> = all.into_iter().flatten().collect();
        if *scope == Scope::All {
            return Ok((all.into_iter().map(|(_, r)| r).collect(), previous));
        }
        let key = scope.key();
        let mut scoped = self.scoped.lock().await;
        scoped.retain(|(_, name), _| computed.iter().any(|p| &p.period == name));
        let all = all
            .into_iter()
            .map(|(revision, rollups)| {
                let slot = (key.clone(), rollups.period.period.clone());
                match scoped.get(&slot).filter(|(at, _)| *at == revision) {
                    Some((_, seen)) => seen.clone(),
                    None => {
                        let seen = Arc::new(scope.apply(&rollups));
                        scoped.insert(slot, (revision, seen.clone()));
                        seen
                    }
                }
            })
            .collect();
        Ok((all, previous))
    }
}

/// Rendered dashboard pages (HTML, JSON, CSV, XLSX) by their parsed filters and `Accept`.
/// An entry is served only while the data generation it was rendered at still holds (the
/// store's data revision, which only goes up, and the newest run, which drives the banner).
/// Bounded in bytes; the least recently used pages go first. A crowd of first views of one
/// page renders it once: the others wait for that render and are answered from the cache.
pub struct PageCache {
    entries: std::sync::Mutex<PageEntries>,
    /// The most body bytes kept.
    budget: usize,
    /// A lock per key being rendered.
    rendering: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Pages rendered because the cache did not hold them (for /metrics).
    renders: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct PageEntries {
    pages: HashMap<String, CachedPage>,
    bytes: usize,
    /// Ticks on every use; an entry's `used` is the tick of its last use.
    clock: u64,
}

struct CachedPage {
    generation: String,
    status: axum::http::StatusCode,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
    used: u64,
}

/// 64 MiB of rendered pages: the largest (a workload table of a 12-month range) is ~2 MB.
const PAGE_CACHE_BYTES: usize = 64 << 20;

impl Default for PageCache {
    fn default() -> Self {
        PageCache::with_budget(PAGE_CACHE_BYTES)
    }
}

impl PageCache {
    /// A cache keeping at most `budget` bytes of page bodies.
    pub fn with_budget(budget: usize) -> PageCache {
        PageCache {
            entries: std::sync::Mutex::new(PageEntries::default()),
            budget,
            rendering: std::sync::Mutex::new(HashMap::new()),
            renders: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// How many pages and body bytes it holds.
    pub fn usage(&self) -> (usize, usize) {
        self.entries.lock().map(|e| (e.pages.len(), e.bytes)).unwrap_or((0, 0))
    }

    /// How many pages were rendered because the cache did not hold them.
    pub fn renders(&self) -> u64 {
        self.renders.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until no other request renders `key`, and holds it: the lock of a first view.
    async fn render_turn(&self, key: &str) -> RenderTurn<'_> {
        let lock = match self.rendering.lock() {
            Ok(mut rendering) => rendering.entry(key.to_string()).or_default().clone(),
            Err(_) => Arc::default(),
        };
        let guard = lock.clone().lock_owned().await;
        RenderTurn { cache: self, key: key.to_string(), guard: Some(guard), lock: Some(lock) }
    }

    fn get(&self, key: &str, generation: &str) -> Option<axum::response::Response> {
        let mut entries = self.entries.lock().ok()?;
        entries.clock += 1;
        let clock = entries.clock;
        let hit = entries.pages.get_mut(key).filter(|e| e.generation == generation)?;
        hit.used = clock;
        let mut response = axum::response::Response::new(axum::body::Body::from(hit.body.clone()));
        *response.status_mut() = hit.status;
        *response.headers_mut() = hit.headers.clone();
        Some(response)
    }

    fn put(&self, key: String, page: CachedPage) {
        if page.body.len() > self.budget {
            return;
        }
        let Ok(mut entries) = self.entries.lock() else { return };
        entries.clock += 1;
        let page = CachedPage { used: entries.clock, ..page };
        entries.bytes += page.body.len();
        if let Some(old) = entries.pages.insert(key, page) {
            entries.bytes -= old.body.len();
        }
        while entries.bytes > self.budget {
            let Some(oldest) = entries.pages.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(evicted) = entries.pages.remove(&oldest) {
                entries.bytes -= evicted.body.len();
            }
        }
    }
}

/// A request's turn to render a key; dropping it lets the next waiter in and forgets the
/// key's lock once nobody holds or waits on it.
struct RenderTurn<'a> {
    cache: &'a PageCache,
    key: String,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
    lock: Option<Arc<tokio::sync::Mutex<()>>>,
}

impl Drop for RenderTurn<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        drop(self.lock.take());
        if let Ok(mut rendering) = self.cache.rendering.lock()
            && rendering.get(&self.key).is_some_and(|lock| Arc::strong_count(lock) == 1)
        {
            rendering.remove(&self.key);
        }
    }
}

/// What a rendered page depends on, as a short string: the data revision, the newest run and
/// the day (the staleness banner changes with the day, not only with the data).
async fn generation(store: &dyn Store) -> Result<String, StoreError> {
    let revision = store.data_revision().await?;
    let latest = store.ingest_runs(1).await?;
    let run = latest.first().map(|r| format!("{}:{}", r.id, r.status)).unwrap_or_default();
    Ok(format!("r{revision} run {run} day {}", chrono::Utc::now().timestamp() / 86_400))
}

/// The cache key of a request: its path, the filters it parses to (so `?b=1&a=2`, `?a=2&b=1`
/// and unknown parameters share one entry), whether it asks for JSON, and what the viewer's
/// role and scope let them see (two users with the same scope share entries).
fn page_key(request: &axum::extract::Request) -> String {
    let filters =
        axum::extract::Query::<pages::Filters>::try_from_uri(request.uri()).map(|q| q.0).unwrap_or_default();
    let viewer = request.extensions().get::<Viewer>().map(Viewer::cache_key).unwrap_or_default();
    format!(
        "{}?{}|{}|{viewer}",
        request.uri().path(),
        filters.canonical(),
        error::accepts_json(request.headers())
    )
}

/// Middleware: answers a dashboard page from the cache when its data has not changed.
async fn page_cache(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let cacheable = request.method() == axum::http::Method::GET && registry::is_cached(request.uri().path());
    let unmarked = |mut response: axum::response::Response| {
        response.headers_mut().remove(PREVIOUS_HEADER);
        response
    };
    if !cacheable {
        return unmarked(next.run(request).await);
    }
    let mut key = page_key(&request);
    if request.uri().path() == "/data" {
        // Data says how many hours ago each source last succeeded: an entry lasts the hour.
        key.push_str(&format!("|hour {}", chrono::Utc::now().timestamp() / 3600));
    }
    let Ok(generation) = generation(state.store.as_ref()).await else {
        return unmarked(next.run(request).await);
    };
    if let Some(hit) = state.pages.get(&key, &generation) {
        return hit;
    }
    let _turn = state.pages.render_turn(&key).await;
    // Another request may have rendered it while this one waited.
    if let Some(hit) = state.pages.get(&key, &generation) {
        return hit;
    }
    state.pages.renders.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut response = next.run(request).await;
    if response.headers_mut().remove(PREVIOUS_HEADER).is_some()
        || response.status() != axum::http::StatusCode::OK
    {
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 20).await else {
        return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let page = CachedPage {
        generation,
        status: parts.status,
        headers: parts.headers.clone(),
        body: bytes.clone(),
        used: 0,
    };
    state.pages.put(key, page);
    axum::response::Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// A warning for every page: a recent run failed (or was interrupted) and nothing of its kind
/// and period has succeeded since, the bill's split rows did not add up to their instances,
/// or the data is more than two days old.
pub async fn banner(state: &AppState) -> Result<Option<String>, StoreError> {
    let runs = state.store.ingest_runs(50).await?;
    let Some(latest) = runs.first() else { return Ok(None) };
    // Runs are newest first: a failure counts until a later run of the same kind and period
    // succeeds.
    let unresolved: Vec<&crate::store::IngestRun> = runs
        .iter()
        .enumerate()
        .filter(|(i, run)| {
            run.status.is_failure()
                && !runs[..*i].iter().any(|later| {
                    // A run that failed before it knew its period is resolved by any later success.
                    later.kind == run.kind
                        && (later.period == run.period || run.period.is_empty())
                        && later.status == RunStatus::Succeeded
                })
        })
        .map(|(_, run)| run)
        .collect();
    if let Some(run) = unresolved.first() {
        let what = if run.kind == RunKind::Compute { "compute" } else { "ingest" };
        let period = if run.period.is_empty() { String::new() } else { format!(" {}", run.period) };
        let more = match unresolved.len() {
            1 => String::new(),
            n => format!(" ({} more failed runs on Data.)", n - 1),
        };
        return Ok(Some(format!(
            "The latest {what} ({}{period}) {}; figures may be out of date. See Data.{more}",
            run.kind,
            match run.status {
                RunStatus::Interrupted => "was interrupted",
                RunStatus::Refused => "was refused (the delivery would have replaced the stored bill)",
                _ => "failed",
            },
        )));
    }
    let unreconciled = runs
        .iter()
        .find(|r| r.kind == RunKind::Cur)
        .and_then(IngestRun::cur_reconciliation)
        .is_some_and(|r| !r.split_matches_parents);
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
        // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends `Origin: null` with
        // its own forms, and the CSRF guard could not tell them from a forged one.
        (header::REFERRER_POLICY, "same-origin"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        ),
    ];
    let mut router = registry::routes()
        .fallback(error::unknown_path)
        .layer(axum::middleware::from_fn_with_state(state.clone(), page_cache))
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::personalize))
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::csrf_guard))
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::authenticate))
        .layer(axum::middleware::from_fn(error::json_errors))
        .layer(axum::middleware::from_fn_with_state(state.clone(), metrics::track))
        .layer(tower_http::compression::CompressionLayer::new())
        .layer(tower_http::trace::TraceLayer::new_for_http());
    for (name, value) in headers {
        router = router.layer(SetResponseHeaderLayer::if_not_present(name, HeaderValue::from_static(value)));
    }
    if state.auth.secure_cookies {
        // Served over TLS (or behind a proxy that terminates it): browsers keep to HTTPS.
        router = router.layer(SetResponseHeaderLayer::if_not_present(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        ));
    }
    // The edge's limits: a request body of 64 KiB at most (forms are small), 30 s per
    // request, 256 requests in flight (the rest wait). A body is read whole, within
    // BODY_DEADLINE, before its request takes one of the 256: a client that sends a body a
    // byte a second holds only its own connection, and /healthz never waits for a permit.
    let in_flight = std::sync::Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    router
        .layer(tower_http::limit::RequestBodyLimitLayer::new(BODY_LIMIT))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            std::time::Duration::from_secs(30),
        ))
        .layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                in_flight_limit(in_flight.clone(), request, next)
            },
        ))
        .layer(axum::middleware::from_fn(read_body_first))
        .with_state(state)
}

/// Requests in flight at once past the body read (the rest wait for a permit).
pub const IN_FLIGHT: usize = 256;
/// The largest request body (forms are small).
pub const BODY_LIMIT: usize = 64 << 10;
/// How long a client may take to send a request's body.
pub const BODY_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// Middleware: takes one of [`IN_FLIGHT`] permits for the rest of the request, except for
/// `/healthz`, which a liveness probe must always reach.
async fn in_flight_limit(
    permits: std::sync::Arc<tokio::sync::Semaphore>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if request.uri().path() == "/healthz" {
        return next.run(request).await;
    }
    let Ok(_permit) = permits.acquire_owned().await else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    next.run(request).await
}

/// Middleware: reads a request's body whole, at most [`BODY_LIMIT`] bytes within
/// [`BODY_DEADLINE`], before anything else looks at the request: 413 past the size, 408 past
/// the deadline. A request that announces no body passes as it is.
async fn read_body_first(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let announced = request.headers().contains_key(header::CONTENT_LENGTH)
        || request.headers().contains_key(header::TRANSFER_ENCODING);
    if !announced {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(BODY_DEADLINE, axum::body::to_bytes(body, BODY_LIMIT)).await {
        Ok(Ok(bytes)) => {
            next.run(axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes))).await
        }
        Ok(Err(_)) => {
            (StatusCode::PAYLOAD_TOO_LARGE, "The request body is larger than 64 KiB, or was cut short.\n")
                .into_response()
        }
        Err(_) => (
            StatusCode::REQUEST_TIMEOUT,
            [(header::CONNECTION, "close")],
            "The request body took longer than 10 seconds to arrive.\n",
        )
            .into_response(),
    }
}

/// Loads every computed period's rollups, and their copies for each scope an enabled user
/// has, so that no visitor's first view pays for reading twelve months from the database.
/// A failure is only logged: pages load what they need themselves.
async fn warm(state: &AppState) {
    let started = std::time::Instant::now();
    let mut scopes = vec![Scope::All];
    if let Ok(users) = state.store.users().await {
        for scope in users.iter().filter(|u| !u.disabled).map(crate::auth::User::scope) {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
    }
    let mut months = 0;
    for scope in &scopes {
        match state.cache.all(state.store.as_ref(), scope).await {
            Ok(periods) => months = periods.len(),
            Err(error) => tracing::warn!(%error, "warming the rollup cache"),
        }
    }
    tracing::info!(
        months,
        scopes = scopes.len(),
        seconds = started.elapsed().as_secs_f64(),
        "rollup cache warm"
    );
}

/// Warms the cache again whenever the data revision moves (a compute, an ingest, a
/// setting), checking every 2 seconds (one small query): only the periods that changed are
/// read again, then the Plan page's default forecast is made. Meanwhile pages answer from the
/// previous rollups and say so.
async fn keep_warm(state: AppState) {
    let mut seen = state.store.data_revision().await.unwrap_or_default();
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let Ok(revision) = state.store.data_revision().await else { continue };
        if revision != seen {
            seen = revision;
            reload(state.clone()).await;
            pages::warm_plan(&state).await;
        }
    }
}

/// Reads recomputed periods again in the background, once at a time.
pub(crate) async fn reload(state: AppState) {
    if state.cache.start_reloading() {
        warm(&state).await;
        state.cache.done_reloading();
    }
}

/// Marks a response rendered from rollups older than the latest compute: the page cache does
/// not keep it.
pub const PREVIOUS_HEADER: &str = "x-gpuledger-previous-rollups";

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
    let base = format!("http://{}", listener.local_addr()?);
    auth::first_start(&state, &base).await?;
    warm(&state).await;
    tokio::spawn({
        let state = state.clone();
        async move { pages::warm_plan(&state).await }
    });
    tokio::spawn(keep_warm(state.clone()));
    println!("gpuledger dashboard serving on {base}");
    listen::serve(listener, router(state), listen::HEADER_READ_TIMEOUT, shutdown_signal()).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn page(bytes: usize) -> CachedPage {
        CachedPage {
            generation: "r1".into(),
            status: axum::http::StatusCode::OK,
            headers: axum::http::HeaderMap::new(),
            body: axum::body::Bytes::from(vec![b'x'; bytes]),
            used: 0,
        }
    }

    #[tokio::test]
    async fn a_render_turn_waits_for_the_one_before_and_forgets_its_key_when_nobody_waits() {
        let cache = PageCache::with_budget(300);
        let first = cache.render_turn("a").await;
        // A second turn for the same key waits; another key does not.
        let other = cache.render_turn("b").await;
        let waiting =
            tokio::time::timeout(std::time::Duration::from_millis(50), cache.render_turn("a")).await;
        assert!(waiting.is_err(), "the second view of a waits for the first");
        assert_eq!(cache.rendering.lock().unwrap().len(), 2);
        drop(first);
        drop(other);
        assert!(cache.rendering.lock().unwrap().is_empty(), "no lock kept once nobody renders");
        drop(cache.render_turn("a").await);
        assert!(cache.rendering.lock().unwrap().is_empty());
    }

    #[test]
    fn the_page_cache_keeps_its_byte_budget_and_evicts_the_least_recently_used() {
        let cache = PageCache::with_budget(300);
        cache.put("a".into(), page(100));
        cache.put("b".into(), page(100));
        cache.put("c".into(), page(100));
        assert_eq!(cache.usage(), (3, 300));
        // `a` is used again, so `b` is now the least recently used and goes first.
        assert!(cache.get("a", "r1").is_some());
        cache.put("d".into(), page(100));
        assert_eq!(cache.usage(), (3, 300));
        assert!(cache.get("b", "r1").is_none() && cache.get("a", "r1").is_some());
        // Another generation is a miss; a page larger than the budget is never kept.
        assert!(cache.get("a", "r2").is_none());
        cache.put("huge".into(), page(301));
        assert!(cache.get("huge", "r1").is_none());
        // Replacing an entry counts its bytes once: 100 + 100 + 50 = 250.
        cache.put("d".into(), page(50));
        assert_eq!(cache.usage(), (3, 250));
    }
}
