//! The home page: what is in the database (billing periods, ingest runs), and a plain
//! sentence when there is nothing yet. `?format=json` returns the same as JSON.

use askama::Template;
use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Response};
use chrono::{TimeZone, Utc};
use serde::Deserialize;

use super::{AppState, WebError};
use crate::money::format_usd;
use crate::store::{IngestRun, PeriodSummary};

#[derive(Deserialize)]
pub struct HomeQuery {
    format: Option<String>,
}

struct PeriodLine {
    period: String,
    data_version: String,
    bill_unblended: String,
    bill_amortized: String,
    rows: i64,
    ingested_at: String,
}

struct RunLine {
    id: i64,
    kind: String,
    source: String,
    period: String,
    status: String,
    rows_written: i64,
    started_at: String,
    error: String,
}

#[derive(Template)]
#[template(path = "home.html")]
struct HomePage {
    active: &'static str,
    banner: Option<String>,
    backend: &'static str,
    periods: Vec<PeriodLine>,
    runs: Vec<RunLine>,
}

fn utc(epoch: i64) -> String {
    Utc.timestamp_opt(epoch, 0)
        .single()
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_default()
}

pub async fn page(
    State(state): State<AppState>,
    Query(query): Query<HomeQuery>,
) -> Result<Response, WebError> {
    let periods: Vec<PeriodSummary> = state.store.periods().await?;
    let runs: Vec<IngestRun> = state.store.ingest_runs(50).await?;
    if query.format.as_deref() == Some("json") {
        return Ok(axum::Json(serde_json::json!({
            "database": state.store.backend(),
            "periods": periods,
            "ingest_runs": runs,
        }))
        .into_response());
    }
    let page = HomePage {
        active: "data",
        banner: super::banner(&state).await?,
        backend: state.store.backend(),
        periods: periods
            .into_iter()
            .map(|p| PeriodLine {
                period: p.period,
                data_version: p.data_version,
                bill_unblended: format_usd(p.bill_unblended_micros),
                bill_amortized: format_usd(p.bill_amortized_micros),
                rows: p.cost_fact_rows,
                ingested_at: utc(p.ingested_at),
            })
            .collect(),
        runs: runs
            .into_iter()
            .map(|r| RunLine {
                id: r.id,
                kind: r.kind,
                source: r.source,
                period: r.period,
                status: r.status,
                rows_written: r.rows_written,
                started_at: utc(r.started_at),
                error: r.error.unwrap_or_default(),
            })
            .collect(),
    };
    Ok(Html(page.render()?).into_response())
}
