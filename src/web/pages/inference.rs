//! Inference: cost per inference and per 1M tokens per workload.

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;

use super::*;
use crate::report::rollup;
use crate::report::table::Cell;

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
        let report = rollup::inference(range);
        let column = |name: &str| report.table.column(name).unwrap_or(usize::MAX);
        let (per_inference, per_million) = (column("cost_per_inference"), column("cost_per_million_tokens"));
        let bars = |column: usize, scale: f64| -> Vec<charts::StackedBar> {
            let rows = report.table.rows.iter().filter_map(|row| {
                let Some(Cell::Usd(Some(value))) = row.get(column) else { return None };
                let label = format!("{}/{}", text_of(&row[0]), text_of(&row[1]));
                Some(charts::StackedBar { label, parts: vec![value * scale], mark: None, href: None })
            });
            charts::largest(rows.collect(), 10)
        };
        for (title, column, scale) in [
            ("Cost per 1,000 inferences (the 10 highest workloads)", per_inference, 1000.0),
            ("Cost per 1M tokens (the 10 highest workloads)", per_million, 1.0),
        ] {
            content.charts.push(charts::stacked_bars(title, "USD", &["cost"], "", &bars(column, scale)));
        }
        content.table("inference", "Cost per inference by workload", report);
    }
    answer(&state, &filters, &headers, &view, content).await
}
