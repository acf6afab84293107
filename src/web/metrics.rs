//! The dashboard's own Prometheus metrics: requests by route and status with latency
//! histograms, and ingest runs by kind and status.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{AppState, WebError};

/// Upper bounds of the latency buckets, seconds.
const BUCKETS: [f64; 10] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

#[derive(Default, Clone)]
struct Series {
    count: u64,
    sum: f64,
    buckets: [u64; BUCKETS.len()],
}

/// Counters kept in memory since the server started.
#[derive(Default)]
pub struct Metrics {
    requests: std::sync::Mutex<BTreeMap<(String, String, u16), Series>>,
}

/// Middleware: times every request and counts it under its route pattern.
pub async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", |p| p.as_str()).to_string();
    // Known methods only: an invented one must not create a new series.
    let method = match request.method().as_str() {
        known @ ("GET" | "HEAD" | "POST" | "PUT" | "DELETE" | "PATCH" | "OPTIONS") => known,
        _ => "other",
    }
    .to_string();
    let started = Instant::now();
    let response = next.run(request).await;
    let seconds = started.elapsed().as_secs_f64();
    if let Ok(mut requests) = state.metrics.requests.lock() {
        let series = requests.entry((method, route, response.status().as_u16())).or_default();
        series.count += 1;
        series.sum += seconds;
        for (bucket, bound) in series.buckets.iter_mut().zip(BUCKETS) {
            if seconds <= bound {
                *bucket += 1;
            }
        }
    }
    response
}

/// `GET /metrics` in the Prometheus text format.
pub async fn exposition(State(state): State<AppState>) -> Result<Response, WebError> {
    let mut out = String::new();
    out.push_str("# HELP gpuledger_http_requests_total Requests served, by route and status.\n");
    out.push_str("# TYPE gpuledger_http_requests_total counter\n");
    let snapshot: Vec<((String, String, u16), Series)> = state
        .metrics
        .requests
        .lock()
        .map(|r| r.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    for ((method, route, status), s) in &snapshot {
        let _ = writeln!(
            out,
            "gpuledger_http_requests_total{{method=\"{method}\",route=\"{route}\",status=\"{status}\"}} {}",
            s.count
        );
    }
    out.push_str("# HELP gpuledger_http_request_duration_seconds Request latency.\n");
    out.push_str("# TYPE gpuledger_http_request_duration_seconds histogram\n");
    for ((method, route, status), s) in &snapshot {
        let labels = format!("method=\"{method}\",route=\"{route}\",status=\"{status}\"");
        for (bound, count) in BUCKETS.iter().zip(s.buckets) {
            let _ = writeln!(
                out,
                "gpuledger_http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {count}"
            );
        }
        let _ = writeln!(
            out,
            "gpuledger_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
            s.count
        );
        let _ = writeln!(out, "gpuledger_http_request_duration_seconds_sum{{{labels}}} {}", s.sum);
        let _ = writeln!(out, "gpuledger_http_request_duration_seconds_count{{{labels}}} {}", s.count);
    }
    out.push_str("# HELP gpuledger_ingest_runs Ingest runs recorded in the database, by kind and status.\n");
    out.push_str("# TYPE gpuledger_ingest_runs gauge\n");
    let mut runs: BTreeMap<(String, String), u64> = BTreeMap::new();
    for run in state.store.ingest_runs(100_000).await? {
        *runs.entry((run.kind.to_string(), run.status.to_string())).or_default() += 1;
    }
    for ((kind, status), count) in runs {
        let _ = writeln!(out, "gpuledger_ingest_runs{{kind=\"{kind}\",status=\"{status}\"}} {count}");
    }
    out.push_str("# HELP gpuledger_pending_periods Billing periods whose rollups are missing or older than their data.\n");
    out.push_str("# TYPE gpuledger_pending_periods gauge\n");
    let _ = writeln!(out, "gpuledger_pending_periods {}", state.store.pending_periods().await?.len());
    let (pages, bytes) = state.pages.usage();
    out.push_str("# HELP gpuledger_page_cache_bytes Bytes of rendered pages held in the page cache.\n");
    out.push_str("# TYPE gpuledger_page_cache_bytes gauge\n");
    let _ = writeln!(out, "gpuledger_page_cache_bytes {bytes}");
    out.push_str("# HELP gpuledger_page_cache_pages Rendered pages held in the page cache.\n");
    out.push_str("# TYPE gpuledger_page_cache_pages gauge\n");
    let _ = writeln!(out, "gpuledger_page_cache_pages {pages}");
    out.push_str(
        "# HELP gpuledger_page_renders_total Pages rendered because the page cache did not hold them.\n",
    );
    out.push_str("# TYPE gpuledger_page_renders_total counter\n");
    let _ = writeln!(out, "gpuledger_page_renders_total {}", state.pages.renders());
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response())
}
