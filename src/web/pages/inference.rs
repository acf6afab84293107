//! Inference: cost per inference and per 1M tokens per workload.

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;

use super::*;
use crate::report::rollup;

/// Inference: cost per inference and per 1M tokens per workload, hours above the fleet P95.
pub async fn inference(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<crate::web::Viewer>,
    Query(filters): Query<Filters>,
    headers: HeaderMap,
) -> Result<Response, WebError> {
    let view = resolve(&state, &viewer, &filters).await?;
    let range = &view.range;
    let mut content = Content::new("Inference", "inference", "/inference");
    if let Some(range) = &range {
        let p95: Vec<String> =
            range.periods().map(|(p, _)| format!("{}: ${:.6}", p.period, p.p95_cost_per_inference)).collect();
        content.notes.push(format!(
            "Cost per inference = the workload's cost (GPU, CPU, memory; split + unused) / successful requests. \
             Fleet P95 of hourly cost per inference per serving pod-hour — {}.",
            p95.join(", ")
        ));
        content.table("inference", "Cost per inference by workload", rollup::inference(range));
    }
    answer(&state, &filters, &headers, &view, content).await
}
