//! The home page: what is in the database (billing periods, ingest runs), and a plain
//! sentence when there is nothing yet. `?format=json` returns the same as JSON.

use askama::Template;
use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;

use crate::domain::runs::RunKind;
use crate::money::{format_usd, usd_decimal};
use crate::period::Period;
use crate::report::ReportError;
use crate::report::bill::BillReport;
use crate::report::cross_check::{CrossCheck, Tolerance};
use crate::store::{IngestRun, PeriodSummary, RunStatus, StoreError};
use crate::web::filters;
use crate::web::{AppState, WebError};

#[derive(Deserialize)]
pub struct HomeQuery {
    format: Option<String>,
    /// The month whose bill is tied out (the newest when none).
    period: Option<String>,
}

struct PeriodLine {
    period: String,
    data_version: String,
    bill_unblended: String,
    bill_amortized: String,
    rows: i64,
    ingested_at: String,
    /// `archived 2026-11-26 10:24 UTC to /backups/2025-11`, or empty.
    archived: String,
}

/// One FOCUS bill of a month, as stored.
struct BillLine {
    period: String,
    provider: String,
    billing_account: String,
    /// `CUR 2.0` or `FOCUS 1.2`: the export the bill was read from.
    format: String,
    billed: String,
    effective: String,
    rows: i64,
    /// What the files did that FOCUS does not allow but whose meaning is plain, in words.
    deviations: String,
}

/// Nano-units of a currency as people read them: `1,234.56 EUR`.
fn amount(nanos: i64, currency: &str) -> String {
    let cents = crate::money::Cents::from_nanos(nanos);
    format!("{} {currency}", crate::text::grouped(&cents.decimal()))
}

impl BillLine {
    fn of(bill: &crate::store::Bill) -> BillLine {
        let deviations: crate::sources::focus::Deviations =
            serde_json::from_str(&bill.deviations).unwrap_or_default();
        BillLine {
            period: bill.period.clone(),
            provider: bill.provider.clone(),
            billing_account: bill.billing_account.clone(),
            format: match bill.format.as_str() {
                "cur" => "CUR 2.0".into(),
                _ => format!("FOCUS {}", bill.focus_version),
            },
            billed: amount(bill.billed_nanos, &bill.currency),
            effective: amount(bill.effective_nanos, &bill.currency),
            rows: bill.rows_read,
            deviations: deviations.summary(),
        }
    }
}

struct RunLine {
    id: i64,
    kind: RunKind,
    source: String,
    period: String,
    status: String,
    rows_written: i64,
    started_at: String,
    error: String,
}

/// A billing period's latest CUR reconciliation, as the ingest stored it.
#[derive(serde::Serialize)]
struct ReconciliationLine {
    period: String,
    run: i64,
    bill_amortized: String,
    kubernetes_allocated: String,
    unallocated_ec2: String,
    other_cost: String,
    instance_hours_checked: u64,
    instance_hours_disagreeing: u64,
    reconciles: bool,
}

/// One line of the newest period's tie-out bridge.
#[derive(serde::Serialize)]
struct BridgeLine {
    step: String,
    amount: String,
    subtotal: bool,
}

/// The bridge as printed, in cents that foot: each subtotal is its exact amount rounded once
/// to the cent, and the changes between two subtotals are rounded by largest remainder so
/// that they add up to the difference of the rounded subtotals (a column a finance team adds
/// up by hand gives its printed subtotals).
fn footed(bridge: &[crate::report::bill::Step]) -> Vec<BridgeLine> {
    use crate::money::Cents;
    let cents = |micros: i64| Cents::from_nanos(micros.saturating_mul(1_000));
    let mut lines = Vec::with_capacity(bridge.len());
    let mut previous = Cents(0);
    let mut changes: Vec<&crate::report::bill::Step> = Vec::new();
    let flush = |changes: &mut Vec<&crate::report::bill::Step>,
                 to: Cents,
                 previous: Cents,
                 lines: &mut Vec<BridgeLine>| {
        let nanos: Vec<i64> = changes.iter().map(|c| c.micros.saturating_mul(1_000)).collect();
        for (step, amount) in changes.iter().zip(crate::money::apportion_cents(&nanos, to - previous)) {
            lines.push(BridgeLine { step: step.step.clone(), amount: amount.usd(), subtotal: false });
        }
        changes.clear();
    };
    for step in bridge {
        if step.kind == "change" {
            changes.push(step);
            continue;
        }
        let total = cents(step.micros);
        flush(&mut changes, total, previous, &mut lines);
        lines.push(BridgeLine { step: step.step.clone(), amount: total.usd(), subtotal: true });
        previous = total;
    }
    // Changes after the last subtotal (none today) foot to their own sum.
    let rest: i64 = changes.iter().map(|c| c.micros).sum();
    let to = previous + cents(rest);
    flush(&mut changes, to, previous, &mut lines);
    lines
}

/// When each kind of data last arrived.
#[derive(serde::Serialize)]
struct FreshnessLine {
    kind: String,
    last_success: String,
    age_hours: i64,
    last_status: String,
}

/// One period's CUR against Cost Explorer.
struct CrossCheckLine {
    period: String,
    days_checked: usize,
    days_missing: usize,
    cur: String,
    cost_explorer: String,
    differences: usize,
    within_tolerance: bool,
}

/// A difference above the tolerance.
struct DifferenceLine {
    day: String,
    service: String,
    metric: String,
    cur: String,
    cost_explorer: String,
    difference: String,
}

/// The cross-check of every stored period Cost Explorer has days for, newest first.
async fn cross_checks(state: &AppState, periods: &[PeriodSummary]) -> Result<Vec<CrossCheck>, WebError> {
    let mut checks = Vec::new();
    for summary in periods {
        let Ok(period) = summary.period.parse::<Period>() else { continue };
        if state.store.ce_days(period.start(), period.end()).await?.is_empty() {
            continue;
        }
        match CrossCheck::load(state.store.as_ref(), period, Tolerance::default()).await {
            Ok(check) => checks.push(check),
            // A period stored before the bill was kept per day: nothing to compare yet.
            Err(ReportError::Store(StoreError::Invalid(reason))) => {
                tracing::debug!(%reason, "no cross-check")
            }
            Err(ReportError::Store(error)) => return Err(error.into()),
            Err(other) => return Err(WebError::not_found(other.to_string())),
        }
    }
    Ok(checks)
}

#[derive(Template)]
#[template(path = "home.html")]
struct HomePage {
    active: &'static str,
    banner: Option<String>,
    backend: &'static str,
    periods: Vec<PeriodLine>,
    /// Every FOCUS bill stored, newest month first.
    bills: Vec<BillLine>,
    reconciliations: Vec<ReconciliationLine>,
    /// The newest period's bill: its period, the bridge, and the net total from the net_*
    /// columns when the export has them.
    bill_period: String,
    bridge: Vec<BridgeLine>,
    /// Every stored month to tie out, the one shown marked.
    bill_periods: Vec<(String, bool)>,
    /// The month's compute charges of GPU machines the catalog does not know, a line each.
    unknown_gpu_machines: Vec<String>,
    /// The AWS invoices of the month shown: "AWS invoice 100010026 ($108,138.71)".
    aws_invoices: Vec<String>,
    net_from_columns: String,
    freshness: Vec<FreshnessLine>,
    /// `gpuledger run`'s last cycle and its next, in a sentence; empty when it never ran.
    pipeline: String,
    cross_checks: Vec<CrossCheckLine>,
    /// Per cluster of the month shown, whose split divides its node cost, and its
    /// reconciliation to the bill.
    splits: Vec<SplitLine>,
    /// The differences above the tolerance, newest period first (at most 50).
    differences: Vec<DifferenceLine>,
    runs: Vec<RunLine>,
}

/// One cluster's split on the Data page.
struct SplitLine {
    cluster: String,
    provider: String,
    /// "AWS's (the CUR's split cost allocation data)" or "gpuledger's, from metrics (…)".
    method: String,
    /// Whether gpuledger's split found a bill for the nodes (else the sums are blank).
    reconciled: bool,
    bill_node_cost: String,
    pods_cost: String,
    unallocated: String,
    not_in_prometheus: String,
    node_hours: i64,
    pod_hours: i64,
    node_hours_without_pods: i64,
    not_in_bill: String,
}

impl SplitLine {
    fn of(split: &crate::store::KubeSplitRollup) -> SplitLine {
        let money = |nanos: i64| amount(nanos, &split.currency);
        let ours = split.method != crate::store::KubeSplitRollup::AWS;
        let method = match (ours, split.node_costs_from.as_str()) {
            (false, _) => "AWS's (the CUR's split cost allocation data)".to_string(),
            (true, "none") => "gpuledger's, from metrics: no bill has a cost for its nodes".to_string(),
            (true, from) => format!(
                "gpuledger's, from metrics (node costs from the {} bill; its pods are in chargeback)",
                from.to_uppercase()
            ),
        };
        SplitLine {
            cluster: split.cluster.clone(),
            provider: split.provider.clone(),
            method,
            reconciled: ours && split.node_costs_from != "none",
            bill_node_cost: money(split.bill_node_nanos),
            pods_cost: money(split.pods_nanos),
            unallocated: money(split.unallocated_nanos),
            not_in_prometheus: format!(
                "{} ({} hours)",
                money(split.bill_hours_not_in_prometheus_nanos),
                split.bill_hours_not_in_prometheus
            ),
            node_hours: split.node_hours,
            pod_hours: split.pod_hours,
            node_hours_without_pods: split.node_hours_without_pods,
            not_in_bill: format!(
                "{} node-hours, {} pod-hours",
                split.node_hours_not_in_bill, split.pod_hours_not_in_bill
            ),
        }
    }
}

/// The newest CUR reconciliation of each period among `runs` (newest first).
fn reconciliations(runs: &[IngestRun]) -> Vec<ReconciliationLine> {
    let mut seen = std::collections::BTreeMap::new();
    for run in runs.iter().filter(|r| r.status == RunStatus::Succeeded) {
        let Some(r) = run.cur_reconciliation() else { continue };
        seen.entry(run.period.clone()).or_insert_with(|| ReconciliationLine {
            period: run.period.clone(),
            run: run.id,
            bill_amortized: r.bill_amortized_total,
            kubernetes_allocated: r.kubernetes_allocated_cost,
            unallocated_ec2: r.unallocated_ec2_cost,
            other_cost: r.other_cost,
            instance_hours_checked: r.instance_hours_checked,
            instance_hours_disagreeing: r.instance_hours_disagreeing,
            reconciles: r.split_matches_parents,
        });
    }
    seen.into_values().rev().collect()
}

/// Per kind of ingest: the last success and its age, and how the newest run ended.
fn freshness(runs: &[IngestRun], now: i64) -> Vec<FreshnessLine> {
    let mut kinds: Vec<&str> = runs.iter().map(|r| r.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    kinds
        .into_iter()
        .map(|kind| {
            let of_kind = || runs.iter().filter(move |r| r.kind.as_str() == kind);
            let success = of_kind().find(|r| r.status == RunStatus::Succeeded);
            FreshnessLine {
                kind: kind.to_string(),
                last_success: success
                    .map(|r| utc(r.finished_at.unwrap_or(r.started_at)))
                    .unwrap_or_else(|| "never".into()),
                age_hours: success
                    .map(|r| (now - r.finished_at.unwrap_or(r.started_at)) / 3600)
                    .unwrap_or(-1),
                last_status: of_kind().next().map(|r| r.status.to_string()).unwrap_or_default(),
            }
        })
        .collect()
}

use crate::period::human::epoch as utc;

pub async fn page(
    State(state): State<AppState>,
    Query(query): Query<HomeQuery>,
) -> Result<Response, WebError> {
    let periods: Vec<PeriodSummary> = state.store.periods().await?;
    let archived: std::collections::BTreeMap<String, crate::store::ArchivedPeriod> =
        state.store.archived_periods().await?.into_iter().map(|a| (a.period.clone(), a)).collect();
    let runs: Vec<IngestRun> = state.store.ingest_runs(50).await?;
    let mut bills = state.store.bills(None).await?;
    let rates = state.store.fx_rates().await?;
    bills.sort_by(|a, b| {
        b.period
            .cmp(&a.period)
            .then_with(|| (&a.provider, &a.billing_account).cmp(&(&b.provider, &b.billing_account)))
    });
    let reconciliations = reconciliations(&runs);
    let freshness = freshness(&runs, Utc::now().timestamp());
    // The bill of the month asked for (the newest by default) and its bridge.
    // The months with a CUR or a FOCUS bill (a month may have FOCUS bills alone), newest first.
    let months: std::collections::BTreeSet<&str> =
        periods.iter().map(|p| p.period.as_str()).chain(bills.iter().map(|b| b.period.as_str())).collect();
    let chosen = match query.period.as_deref().filter(|p| !p.is_empty()) {
        Some(asked) => Some(months.get(asked).copied().ok_or_else(|| {
            WebError::bad(
                "period",
                format!("{asked} is not a stored period"),
                months.iter().rev().map(|p| p.to_string()).collect(),
            )
        })?),
        None => months.last().copied(),
    };
    let bill = match chosen {
        Some(month) => match month.parse() {
            Ok(period) => Some(BillReport::load(state.store.as_ref(), period, None).await?),
            Err(_) => None,
        },
        None => None,
    };
    let checks = cross_checks(&state, &periods).await?;
    // Whose split divides each cluster's node cost in the month shown (compute writes it).
    let splits = match chosen {
        Some(month) => state.store.rollups(month).await?.map(|r| r.kube_splits).unwrap_or_default(),
        None => Vec::new(),
    };
    // The scheduled pipeline: its newest cycle, how it ended, and when the next is due.
    let cycle = runs.iter().find(|r| r.kind == RunKind::Pipeline);
    let next_run_at = cycle.and_then(IngestRun::next_run_at);
    let pipeline = match cycle {
        Some(run) => format!(
            "The pipeline (gpuledger run): last cycle started {} and {}; {}.",
            utc(run.started_at),
            run.status,
            next_run_at.map_or_else(
                || "no next cycle is scheduled (--once)".into(),
                |at| format!("next at {}", utc(at))
            )
        ),
        None => String::new(),
    };
    if query.format.as_deref() == Some("json") {
        // One money format in every JSON twin: USD as a decimal string ("108138.708318").
        let periods: Vec<serde_json::Value> = periods
            .iter()
            .map(|p| {
                serde_json::json!({
                    "period": p.period,
                    "data_version": p.data_version,
                    "bill_unblended": usd_decimal(p.bill_unblended_micros),
                    "bill_amortized": usd_decimal(p.bill_amortized_micros),
                    "cost_fact_rows": p.cost_fact_rows,
                    "ingested_at": p.ingested_at,
                    "archived": archived.get(&p.period).map(|a| serde_json::json!({
                        "archived_at": a.archived_at,
                        "location": a.location,
                        "detail_rows": a.detail_rows,
                    })),
                })
            })
            .collect();
        // A run's reconciliation is a JSON object, not JSON text inside a string.
        let runs: Vec<serde_json::Value> = runs
            .iter()
            .map(|run| {
                let mut value = serde_json::to_value(run).unwrap_or_default();
                value["reconciliation"] = run
                    .reconciliation
                    .as_deref()
                    .and_then(|text| serde_json::from_str(text).ok())
                    .unwrap_or(serde_json::Value::Null);
                value
            })
            .collect();
        return Ok(axum::Json(serde_json::json!({
            "database": state.store.backend(),
            "periods": periods,
            "bills": bills.iter().map(|b| crate::report::bill::bill_json(b, &rates, None)).collect::<Vec<_>>(),
            "reconciliation": reconciliations,
            "freshness": freshness,
            "pending_compute": state.store.pending_periods().await?,
            "bill": bill.as_ref().map(BillReport::to_json),
            "cross_check": checks.iter().map(CrossCheck::to_json).collect::<Vec<_>>(),
            "kubernetes_splits": splits.iter().map(|s| serde_json::json!({
                "cluster": s.cluster,
                "provider": s.provider,
                "currency": s.currency,
                "method": s.method,
                "node_costs_from": s.node_costs_from,
                "node_hours": s.node_hours,
                "pod_hours": s.pod_hours,
                "bill_node_cost": crate::money::Nanos(s.bill_node_nanos).decimal(),
                "pods_cost": crate::money::Nanos(s.pods_nanos).decimal(),
                "unallocated_cost": crate::money::Nanos(s.unallocated_nanos).decimal(),
                "node_hours_without_pods": s.node_hours_without_pods,
                "node_hours_not_in_bill": s.node_hours_not_in_bill,
                "pod_hours_not_in_bill": s.pod_hours_not_in_bill,
                "bill_hours_not_in_prometheus": s.bill_hours_not_in_prometheus,
                "bill_hours_not_in_prometheus_cost": crate::money::Nanos(s.bill_hours_not_in_prometheus_nanos).decimal(),
            })).collect::<Vec<_>>(),
            "pipeline": cycle.map(|run| serde_json::json!({
                "last_run_at": run.started_at,
                "status": run.status.to_string(),
                "next_run_at": next_run_at,
            })),
            "ingest_runs": runs,
        }))
        .into_response());
    }
    let stored: Vec<(String, bool)> = periods
        .iter()
        .map(|p| (p.period.clone(), bill.as_ref().is_some_and(|b| b.period.period == p.period)))
        .collect();
    let page = HomePage {
        active: "data",
        banner: crate::web::banner(&state).await?,
        backend: state.store.backend(),
        periods: periods
            .into_iter()
            .map(|p| PeriodLine {
                data_version: p.data_version,
                bill_unblended: format_usd(p.bill_unblended_micros),
                bill_amortized: format_usd(p.bill_amortized_micros),
                rows: p.cost_fact_rows,
                ingested_at: utc(p.ingested_at),
                archived: archived.get(&p.period).map_or_else(String::new, |a| {
                    format!("archived {} to {}", utc(a.archived_at), a.location)
                }),
                period: p.period,
            })
            .collect(),
        bills: bills.iter().map(BillLine::of).collect(),
        reconciliations,
        bill_period: bill.as_ref().map(|b| b.period.period.clone()).unwrap_or_default(),
        bridge: bill.as_ref().map(|b| footed(&b.bridge)).unwrap_or_default(),
        unknown_gpu_machines: bill.as_ref().map(BillReport::unknown_gpu_machines).unwrap_or_default(),
        bill_periods: stored.clone(),
        aws_invoices: bill
            .as_ref()
            .map(|b| {
                b.invoices
                    .iter()
                    .map(|((entity, id), (_, amortized, _))| {
                        format!(
                            "{entity} invoice {} ({})",
                            if id.is_empty() { "not yet issued" } else { id },
                            format_usd(*amortized)
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
        net_from_columns: bill
            .as_ref()
            .and_then(|b| b.period.net_amortized_micros)
            .map(format_usd)
            .unwrap_or_default(),
        freshness,
        pipeline,
        cross_checks: checks
            .iter()
            .map(|check| CrossCheckLine {
                period: check.period.to_string(),
                days_checked: check.days_checked.len(),
                days_missing: check.days_without_cost_explorer.len(),
                cur: format_usd(check.amortized_total(false)),
                cost_explorer: format_usd(check.amortized_total(true)),
                differences: check.beyond_tolerance().len(),
                within_tolerance: check.within_tolerance(),
            })
            .collect(),
        splits: splits.iter().map(SplitLine::of).collect(),
        differences: checks
            .iter()
            .flat_map(|check| check.beyond_tolerance())
            .take(50)
            .map(|d| DifferenceLine {
                day: d.day.to_string(),
                service: d.service.clone(),
                metric: d.metric.to_string(),
                cur: format_usd(d.cur_micros),
                cost_explorer: format_usd(d.cost_explorer_micros),
                difference: format_usd(d.micros()),
            })
            .collect(),
        runs: runs
            .into_iter()
            .map(|r| RunLine {
                id: r.id,
                kind: r.kind,
                source: r.source,
                period: r.period,
                status: r.status.to_string(),
                rows_written: r.rows_written,
                started_at: utc(r.started_at),
                error: r.error.unwrap_or_default(),
            })
            .collect(),
    };
    Ok(Html(page.render()?).into_response())
}
