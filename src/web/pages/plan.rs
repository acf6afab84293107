//! Plan (leadership and platform owners): the next one to three months of GPU demand and
//! spend with their 80 % intervals and the planned changes on top, the backtest's error beside
//! them, each pool's capacity, the commitments and what to buy, the Spot budgets, and alerts
//! where a forecast crosses a client's budget or a pool's capacity.
//!
//! The same reports as `report forecast`, `capacity`, `commitments` and `spot-budgets`,
//! computed from the stored history once per data revision (the page cache keeps them).
//!
//! Who sees what: the fleet (every series, capacity, commitments, Spot) to those who see
//! every client; a manager the series, budgets and planned changes of its clients; a client
//! user its own GPU-hours only (no cost of the agency's, so no cost forecast).

use std::collections::{BTreeMap, HashMap};

use axum::response::Response;
use chrono::{Datelike, NaiveDate};

use super::*;
use crate::auth::{Role, Scope};
use crate::report::capacity::CapacityReport;
use crate::report::commitments::CommitmentsReport;
use crate::report::forecast::{ForecastReport, History, SPEND, SeriesKey, SeriesReport};
use crate::report::spot::SpotReport;

/// The horizons a reader may ask for (`months=`).
const HORIZONS: [&str; 3] = ["1", "2", "3"];

/// Days of history the daily chart shows before the forecast.
const CHART_HISTORY_DAYS: usize = 56;

/// What the page computes off the async runtime.
struct Computed {
    forecast: ForecastReport,
    history: History,
    /// The fleet's parts: for a viewer who sees every client only.
    fleet: Option<(CapacityReport, SpotReport, CommitmentsReport)>,
    /// The commitments' figures in USD, for the fleet's card and spend chart.
    in_usd: Option<CommitmentsInUsd>,
}

/// The fleet's reports and its commitments in USD, as the cards and charts read them.
type Fleet<'a> = Option<(&'a (CapacityReport, SpotReport, CommitmentsReport), &'a CommitmentsInUsd)>;

/// The commitments billed and advised, in USD: another currency's at the rate in force for
/// the history's last month (the rate shown), one without a rate left out and named.
#[derive(Debug, Clone, Default)]
struct CommitmentsInUsd {
    /// Σ the advice's monthly net savings bought together ([`CommitmentsReport::together`]).
    monthly_net_savings: f64,
    /// The same against the forecast of each one's hours, when any has a forecast.
    forecast_monthly_net_savings: Option<f64>,
    /// Σ the commitments billed in the latest month, an hour.
    hourly_commitment: f64,
    /// Each currency converted: (currency, rate, the month it took effect).
    rates: Vec<(String, String, String)>,
    /// The currencies with no rate for the month.
    left_out: Vec<String>,
}

impl CommitmentsInUsd {
    fn of(commitments: &CommitmentsReport, rates: &[crate::domain::fx::FxRate], period: &str) -> Self {
        let mut out = CommitmentsInUsd::default();
        let mut usd = |currency: &str, amount: f64| -> f64 {
            if currency == "USD" {
                return amount;
            }
            match crate::domain::fx::rate_for(rates, currency, "USD", period) {
                Some(rate) => {
                    let used = (currency.to_string(), rate.rate.clone(), rate.effective_from.clone());
                    if !out.rates.contains(&used) {
                        out.rates.push(used);
                    }
                    rate.convert(crate::money::nanos_from_usd(amount)) as f64 / 1e9
                }
                None => {
                    if !out.left_out.iter().any(|c| c == currency) {
                        out.left_out.push(currency.to_string());
                    }
                    0.0
                }
            }
        };
        // The advice bought together: alone, the plans and reservations count the same hours.
        let savings: f64 = commitments
            .advice
            .iter()
            .zip(commitments.together())
            .map(|(a, t)| usd(&a.currency, t.advice.chosen.monthly_net_savings))
            .sum();
        let ahead: Vec<f64> = commitments
            .advice
            .iter()
            .zip(commitments.together())
            .filter_map(|(a, t)| t.forecast.map(|f| usd(&a.currency, f.monthly_net_savings)))
            .collect();
        out.forecast_monthly_net_savings = (!ahead.is_empty()).then(|| ahead.iter().sum());
        let hourly: f64 =
            commitments.current.iter().map(|c| usd(&c.currency, c.latest.hourly_micros() / 1e6)).sum();
        out.monthly_net_savings = savings;
        out.hourly_commitment = hourly;
        out
    }

    /// What a reader is told of the conversion, empty when all is in USD.
    fn said(&self) -> String {
        let mut parts: Vec<String> = self
            .rates
            .iter()
            .map(|(currency, rate, from)| format!("{currency} at {rate} USD (the rate from {from})"))
            .collect();
        parts.extend(self.left_out.iter().map(|c| format!("{c} left out (no rate for the month)")));
        if parts.is_empty() { String::new() } else { format!(" In USD: {}.", parts.join(", ")) }
    }

    fn to_json(&self) -> Value {
        json!({
            "monthly_net_savings": (self.monthly_net_savings * 1e6).round() / 1e6,
            "forecast_monthly_net_savings": self.forecast_monthly_net_savings.map(|v| (v * 1e6).round() / 1e6),
            "hourly_commitment": (self.hourly_commitment * 1e6).round() / 1e6,
            "rates": self.rates.iter().map(|(currency, rate, from)| json!({"currency": currency, "rate": rate, "effective_from": from})).collect::<Vec<_>>(),
            "left_out": self.left_out,
        })
    }
}

/// Plan: forecasts, capacity, commitments and their advice, Spot budgets, alerts.
pub async fn plan(page: Opening) -> Result<Response, WebError> {
    let Opening { state, filters, headers, view } = page;
    let mut content = Content::new("Plan", "plan", "/plan");
    content.ranged = false;
    let months: u32 = match filters.months.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
        None => 3,
        Some(m) => m.parse().ok().filter(|m| (1..=3).contains(m)).ok_or_else(|| {
            WebError::bad(
                "months",
                format!("{m:?} is not 1, 2 or 3 months"),
                HORIZONS.map(String::from).to_vec(),
            )
        })?,
    };
    let viewer = &view.viewer;
    let whole_fleet = matches!(viewer.scope, Scope::All);
    let client_user = viewer.role == Role::Client;
    if client_user {
        content.title = format!("Your forecast: {}", viewer.clients.join(", "));
    }
    let generation = super::super::generation(state.store.as_ref()).await?;
    let computed = state
        .plans
        .get_or_compute(&generation, plan_key(months, &viewer.scope), || {
            compute(state.clone(), months, viewer.scope.clone())
        })
        .await?;
    let Some(computed) = computed.as_ref() else {
        content.notes.push("Nothing is computed before this month yet: nothing to forecast from.".into());
        empty_keys(&mut content, whole_fleet);
        return answer(&state, &filters, &headers, &view, content).await;
    };
    let Computed { forecast, history, fleet, in_usd } = computed;
    let (mut forecast, history, fleet) = (forecast.clone(), history, fleet.as_ref());
    // The page's series: the fleet, each pool and each client (a client in a pool is in the
    // JSON twin and the CLI, not on the page).
    forecast.series.retain(|s| s.key.pool.is_empty() || s.key.client.is_empty());
    let mut alerts = budget_alerts(&state, &view, history, &forecast).await?;
    if client_user {
        forecast.series.retain(|s| s.metric != "cost");
    }
    if let Some((capacity, ..)) = fleet {
        alerts.extend(capacity_alerts(capacity));
    }
    cards(&mut content, &forecast, fleet.zip(in_usd.as_ref()), &alerts, client_user);
    charts_of(&mut content, &filters, history, &forecast, fleet.zip(in_usd.as_ref()), client_user)?;
    if let Some(in_usd) = in_usd {
        content.json.insert("commitments_in_usd".into(), in_usd.to_json());
    }
    content.json.insert("history_end".into(), json!(forecast.history_end.to_string()));
    content.json.insert("horizon_months".into(), json!(months));
    content.json.insert("series".into(), forecast.to_json()["series"].clone());
    content.table(
        "alerts",
        "Alerts: a forecast that crosses a budget or a pool's capacity within the horizon",
        alert_report(&alerts),
    );
    content.stack("alerts");
    if let Some((capacity, spot, commitments)) = fleet {
        // The pool first, a link to the page with its daily chart.
        let mut table = capacity.table();
        for row in &mut table.rows {
            row.swap(0, 1);
        }
        table.columns.swap(0, 1);
        let links = capacity
            .pools
            .iter()
            .map(|p| {
                Some(format!("/plan?pool={}&months={months}", url_escape(&pool_label(&p.provider, &p.pool))))
            })
            .collect();
        content.tables.push((
            "capacity".into(),
            "Capacity per pool against the forecast's demand (GPUs; a pool opens its daily chart)".into(),
            Report::of(table),
            links,
        ));
        let [current, advice] = commitments.tables();
        content.table(
            "advice",
            "What to buy, simulated hour by hour (AWS's own recommendation beside it; together: each sized on the hours left by those AWS applies first)",
            Report::of(advice),
        );
        content.stack("advice");
        // The purchase alone and bought together; the term, count, coverage, break-even,
        // lookback and the forecast's outcome behind "all columns" (the downloads have every
        // one), so the table fits a laptop's width.
        content.default_columns(
            "advice",
            &[
                "provider",
                "kind",
                "family",
                "instance_type",
                "region",
                "hourly_commitment",
                "currency",
                "utilization",
                "monthly_net_savings",
                "aws_hourly_commitment",
                "together_hourly_commitment",
                "together_monthly_net_savings",
            ],
        );
        for aws in commitments.advice.iter().filter_map(|a| a.aws.as_ref()) {
            for reason in &aws.reasons {
                content.notes.push(format!("Against AWS's recommendation ({}): {reason}", aws.source));
            }
        }
        content.notes.extend(commitments.notes.iter().cloned());
        content.table(
            "commitments",
            "Savings Plans and reservations billed in the latest month",
            Report::of(current),
        );
        // Their ids (an ARN, an Azure reservation's path) behind "all columns".
        content.default_columns("commitments", &crate::report::commitments::CURRENT_COLUMNS);
        content.table(
            "spot",
            "Spot budgets: training on Spot against the 50 % target",
            Report::of(spot.table()),
        );
    }
    content.table(
        "plans",
        "Planned changes in force in the horizon (gpuledger plan add)",
        plans_report(&forecast),
    );
    content.stack("plans");
    content.table(
        "forecast",
        "Forecast per month: the statistical forecast (80 % interval), the planned changes apart, and the backtest's one-month MAPE",
        Report::of(forecast.table()),
    );
    content.default_columns(
        "forecast",
        &[
            "pool",
            "client",
            "metric",
            "month",
            "value",
            "lower",
            "upper",
            "planned",
            "mape_1m",
            "baseline_mape_1m",
        ],
    );
    content.fold("forecast");
    content.table(
        "backtest",
        "Backtest: each method's MAPE of the monthly total, 1, 2 and 3 months ahead (the chosen one marked)",
        backtest_report(&forecast),
    );
    content.fold("backtest");
    content.notes.push(format!(
        "Forecast from the history {} to {}; each series' method chosen by its rolling-origin backtest. {}",
        forecast.history_start,
        forecast.history_end,
        if client_user {
            "GPU-hours only."
        } else {
            "Planned changes are shown apart from the statistical forecast."
        }
    ));
    answer(&state, &filters, &headers, &view, content).await
}

/// The forecast, capacity, Spot budgets and commitments of one horizon and scope, from the
/// stored history (none when nothing before this month is computed). A scoped viewer's
/// history is its clients' alone before anything is forecast.
async fn compute(state: AppState, months: u32, scope: Scope) -> Result<Option<Computed>, WebError> {
    let whole_fleet = matches!(scope, Scope::All);
    let today = chrono::Utc::now().date_naive();
    let mut history = match History::load(state.store.as_ref(), today).await {
        Ok(history) => history,
        Err(crate::report::ReportError::NotComputed(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    // A scoped viewer's series are its clients' alone, and so are the planned changes it
    // reads. (A client user's cost is forecast for its budget alone, then dropped.)
    if !whole_fleet {
        history.series.retain(|(key, _), _| !key.client.is_empty() && scope.allows(&key.client));
        history.plans.retain(|p| scope.allows(&p.client));
        history.provisioned.clear();
        history.training.clear();
    }
    let stored = if whole_fleet {
        Some(crate::report::commitments::CommitmentInputs::read(state.store.as_ref()).await?)
    } else {
        None
    };
    let aws = state.aws_recommendation.clone();
    let rates = state.store.fx_rates().await?;
    let computed = tokio::task::spawn_blocking(move || {
        let forecast = ForecastReport::build(&history, months, None, None);
        let fleet = stored.map(|inputs| {
            let mut report = CommitmentsReport::from_inputs(&inputs, months);
            if let Some(aws) = aws.as_deref() {
                report.compare_with_aws(aws);
            }
            (CapacityReport::build(&history, &forecast), SpotReport::build(&history, &forecast), report)
        });
        let last_month = forecast.history_end.format("%Y-%m").to_string();
        let in_usd = fleet.as_ref().map(|(_, _, c)| CommitmentsInUsd::of(c, &rates, &last_month));
        Computed { forecast, history, fleet, in_usd }
    })
    .await
    .map_err(|e| WebError::not_found(format!("the forecast could not be computed: {e}")))?;
    Ok(Some(computed))
}

/// The key of a horizon's computation for a scope: what [`compute`] reads depends on the
/// scope alone (a role sees less of it, after).
fn plan_key(months: u32, scope: &Scope) -> String {
    format!("{months}|{}", scope.key())
}

/// Computes the Plan page's default horizon (three months) for the whole fleet as its first
/// view would, so that view reads it: the server does so in the background when it starts
/// and whenever the data changes (about a second on the demo).
pub async fn warm_plan(state: &AppState) {
    let started = std::time::Instant::now();
    let Ok(generation) = super::super::generation(state.store.as_ref()).await else { return };
    let computed = state
        .plans
        .get_or_compute(&generation, plan_key(3, &Scope::All), || compute(state.clone(), 3, Scope::All))
        .await;
    match computed {
        Ok(_) => tracing::info!(seconds = started.elapsed().as_secs_f64(), "plan forecast warm"),
        Err(error) => tracing::warn!(%error, "warming the plan forecast"),
    }
}

/// What the Plan page computed, per horizon and scope, kept while the data
/// generation it was computed at holds: the page's downloads, pools and tables read it instead
/// of forecasting again (about a second on the demo). A crowd of first views computes it once.
/// One key's computation: empty until its first view computed it (others wait on it).
type PlanSlot = tokio::sync::OnceCell<Arc<Option<Computed>>>;

#[derive(Default)]
pub struct PlanCache {
    /// The generation the entries are of, and per key its computation (done or under way).
    entries: tokio::sync::Mutex<(String, HashMap<String, Arc<PlanSlot>>)>,
    /// Computations run (for tests and `/metrics`-style checks).
    computations: std::sync::atomic::AtomicU64,
}

impl PlanCache {
    /// The computation of `key` at `generation`: the kept one, else `compute`'s (kept when it
    /// succeeds). A new generation forgets every entry of the old.
    async fn get_or_compute<F, Fut>(
        &self,
        generation: &str,
        key: String,
        compute: F,
    ) -> Result<Arc<Option<Computed>>, WebError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Option<Computed>, WebError>>,
    {
        let cell = {
            let mut entries = self.entries.lock().await;
            if entries.0 != generation {
                *entries = (generation.to_string(), HashMap::new());
            }
            entries.1.entry(key).or_default().clone()
        };
        cell.get_or_try_init(|| async {
            self.computations.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            compute().await.map(Arc::new)
        })
        .await
        .cloned()
    }

    /// How many times the page computed its forecast.
    pub fn computations(&self) -> u64 {
        self.computations.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The JSON keys a page without history still answers.
fn empty_keys(content: &mut Content, whole_fleet: bool) {
    let mut keys = vec!["alerts", "backtest", "forecast", "plans", "series"];
    if whole_fleet {
        keys.extend(["capacity", "commitments", "advice", "spot"]);
    }
    for key in keys {
        content.json.insert(key.into(), json!([]));
    }
    content.json.insert("history_end".into(), Value::Null);
    content.json.insert("horizon_months".into(), Value::Null);
}

/// A forecast crossing a limit: a client's budget or a pool's capacity.
struct Alert {
    kind: &'static str,
    /// The client or the pool.
    subject: String,
    /// The month (budget) or the day (capacity) it happens.
    when: String,
    limit: f64,
    forecast: f64,
    /// The forecast's 80 % upper bound, where the alert knows it.
    upper: Option<f64>,
    unit: &'static str,
    /// The point forecast crosses (else only its 80 % upper bound does).
    likely: bool,
}

/// Each client with a monthly budget whose forecast charge crosses it in a month of the
/// horizon. The forecast charge is the client's forecast Kubernetes cost with its planned
/// changes, times what the client was charged for each dollar of it in the last month of the
/// history (its markup, shares and non-Kubernetes lines, as its invoices carry them).
async fn budget_alerts(
    state: &AppState,
    view: &View,
    history: &History,
    forecast: &ForecastReport,
) -> Result<Vec<Alert>, WebError> {
    let settings = state.store.settings().await?;
    let last_month = forecast.history_end.format("%Y-%m").to_string();
    let Some(rollups) = view.computed.iter().find(|r| r.period.period == last_month) else {
        return Ok(Vec::new());
    };
    let days = forecast.history_end.day() as usize;
    let mut alerts = Vec::new();
    for client in &rollups.clients {
        if !view.viewer.scope.allows(&client.client) {
            continue;
        }
        let key = SeriesKey { provider: String::new(), pool: String::new(), client: client.client.clone() };
        // The client's cost last month (a client user's history has none: the full one is read).
        let cost: f64 = history
            .series
            .get(&(key.clone(), "cost"))
            .map(|v| v[v.len().saturating_sub(days)..].iter().sum())
            .unwrap_or(0.0);
        let charged = client.total_nanos() as f64 / 1e9;
        let Some(series) = forecast.series.iter().find(|s| s.key == key && s.metric == "cost") else {
            continue;
        };
        if cost <= 0.0 {
            continue;
        }
        let ratio = charged / cost;
        for (m, month) in forecast.months.iter().enumerate() {
            let Ok(period) = month.format("%Y-%m").to_string().parse::<Period>() else { continue };
            let Some(budget) = settings
                .budget(&client.client, period)
                .map_err(|e| WebError::bad("client", e, Vec::new()))?
            else {
                continue;
            };
            let (value, upper) = month_value(series, m);
            let limit = budget.0 as f64 / 100.0;
            if upper * ratio > limit {
                alerts.push(Alert {
                    kind: "budget",
                    subject: client.client.clone(),
                    when: period.to_string(),
                    limit,
                    forecast: value * ratio,
                    upper: Some(upper * ratio),
                    unit: "USD",
                    likely: value * ratio > limit,
                });
            }
        }
    }
    Ok(alerts)
}

/// A series' month `m` of the horizon with its planned changes: (value, upper bound).
fn month_value(series: &SeriesReport, m: usize) -> (f64, f64) {
    let planned = series.planned.get(m).copied().unwrap_or(0.0);
    let point =
        series.forecast.as_ref().ok().and_then(|f| f.months.get(m)).map(|(_, p)| *p).unwrap_or_default();
    (point.value + planned, point.upper + planned)
}

/// Each pool whose forecast demand (or its upper bound) passes the most GPUs it ever had.
fn capacity_alerts(capacity: &CapacityReport) -> Vec<Alert> {
    capacity
        .pools
        .iter()
        .filter_map(|p| {
            let day = p.first_exceeds.or(p.first_upper_exceeds)?;
            Some(Alert {
                kind: "capacity",
                subject: pool_label(&p.provider, &p.pool),
                when: day.to_string(),
                limit: p.gpus_peak,
                forecast: p.demand_peak,
                upper: None,
                unit: "GPUs",
                likely: p.first_exceeds.is_some(),
            })
        })
        .collect()
}

fn alert_report(alerts: &[Alert]) -> Report {
    let rows = alerts
        .iter()
        .map(|a| {
            vec![
                Cell::Text(a.kind.into()),
                Cell::Text(a.subject.clone()),
                Cell::Text(a.when.clone()),
                Cell::Hours(a.limit),
                Cell::Hours(a.forecast),
                a.upper.map_or(Cell::Text(String::new()), Cell::Hours),
                Cell::Text(a.unit.into()),
                Cell::Text(if a.likely { "likely" } else { "possible" }.into()),
            ]
        })
        .collect();
    Report::of(Table {
        title: "Alerts (likely: the forecast crosses the limit; possible: only its 80 % upper bound does)"
            .into(),
        columns: vec!["kind", "subject", "when", "limit", "forecast", "upper", "unit", "status"],
        rows,
        totals: Vec::new(),
    })
}

/// The series a reader starts from: the fleet's spend and GPU-hours, or (scoped) its clients'.
fn headline<'a>(forecast: &'a ForecastReport, metric: &str) -> Option<&'a SeriesReport> {
    let fleet = SeriesKey { provider: String::new(), pool: String::new(), client: String::new() };
    forecast
        .series
        .iter()
        .find(|s| s.key == fleet && s.metric == metric)
        .or_else(|| forecast.series.iter().find(|s| s.key.pool.is_empty() && s.metric == metric))
}

fn cards(
    content: &mut Content,
    forecast: &ForecastReport,
    fleet: Fleet<'_>,
    alerts: &[Alert],
    client_user: bool,
) {
    let metrics: &[(&str, &str, &str)] = if client_user {
        &[("gpu_hours", "GPU-hours", "")]
    } else {
        &[(SPEND, "Spend", "USD"), ("gpu_hours", "GPU-hours", "")]
    };
    for (metric, label, unit) in metrics {
        let Some(series) = headline(forecast, metric) else { continue };
        let Some(month) = forecast.months.first() else { continue };
        let (value, upper) = month_value(series, 0);
        let lower =
            series.forecast.as_ref().ok().and_then(|f| f.months.first()).map_or(0.0, |(_, p)| p.lower)
                + series.planned.first().copied().unwrap_or(0.0);
        let amount = |v: f64| {
            let grouped = crate::report::table::thousands(v, 0);
            if unit.is_empty() { grouped } else { format!("${grouped}") }
        };
        let accuracy = match &series.forecast {
            Ok(f) if f.backtest.mape[0].is_some() => format!(
                "backtest MAPE 1 month ahead {} ({}; baseline {})",
                percent(f.backtest.mape[0]),
                f.method.name(),
                percent(f.baseline.mape[0])
            ),
            Ok(f) => format!("{}; too little history to backtest", f.method.name()),
            Err(_) => "planned changes only".into(),
        };
        let whose =
            if series.key.client.is_empty() { String::new() } else { format!(" ({})", series.key.client) };
        content.cards.push(Card {
            label: format!("{label}{whose}, {}", month.format("%b %Y")),
            value: amount(value),
            previous: format!("80 %: {}–{} · {accuracy}", amount(lower), amount(upper)),
            definition: format!(
                "The next month's {} forecast with the planned changes, its 80 % interval, and how far off the \
                 chosen method was one month ahead in the rolling-origin backtest on this series' own history.",
                if *metric == SPEND { "spend" } else { label }
            ),
            ..Card::default()
        });
    }
    if let Some(((capacity, _, commitments), in_usd)) = fleet {
        let short = capacity.pools.iter().filter(|p| p.first_exceeds.is_some()).count();
        content.cards.push(Card {
            label: "Capacity".into(),
            value: format!("{short} of {} pools short", capacity.pools.len()),
            previous: format!("within {} month(s)", forecast.horizon_months),
            status: if short > 0 { "bad" } else { "ok" }.into(),
            definition: "Pools whose forecast demand passes the most GPUs the bill ever showed them holding."
                .into(),
            ..Card::default()
        });
        let ending = commitments.current.iter().filter(|c| c.ends_within_horizon).count();
        content.cards.push(Card {
            label: "Commitments".into(),
            value: format!("{} a month to gain", usd(crate::money::nanos_from_usd(in_usd.monthly_net_savings))),
            previous: format!(
                "{} billed; {ending} end within the horizon{}",
                commitments.current.len(),
                in_usd.forecast_monthly_net_savings.map_or(String::new(), |f| format!(
                    "; {} against the forecast",
                    usd(crate::money::nanos_from_usd(f))
                ))
            ),
            definition: format!(
                "The advice's monthly net savings bought together (Savings Plans, reservations and committed use \
                 discounts, renewals included), simulated hour by hour over the bill's hours: in the order AWS \
                 applies them (reservations, EC2 Instance Savings Plans, the Compute plan), each sized on the \
                 hours those before it leave; against the forecast: each simulated over the forecast of the \
                 hours left to it.{}",
                in_usd.said()
            ),
            ..Card::default()
        });
    }
    content.cards.push(Card {
        label: "Alerts".into(),
        value: alerts.len().to_string(),
        previous: format!("{} likely", alerts.iter().filter(|a| a.likely).count()),
        status: if alerts.iter().any(|a| a.likely) { "bad" } else { "ok" }.into(),
        definition:
            "Budgets and capacities a forecast crosses within the horizon (likely: the forecast itself, \
                     else only its 80 % upper bound)."
                .into(),
        ..Card::default()
    });
}

/// The charts: the monthly spend (commitments' monthly fees as a line), and the GPU-hours a
/// day of the fleet or the pool asked for (`pool=`; its capacity as a line); a scoped reader's
/// clients' GPU-hours a day.
fn charts_of(
    content: &mut Content,
    filters: &Filters,
    history: &History,
    forecast: &ForecastReport,
    fleet: Fleet<'_>,
    client_user: bool,
) -> Result<(), WebError> {
    if !client_user && let Some(spend) = headline(forecast, SPEND) {
        let mut levels = Vec::new();
        if let Some((_, in_usd)) = fleet {
            // In USD, another currency's at the month's rate (the card says which).
            let hourly = in_usd.hourly_commitment;
            if hourly > 0.0 {
                // The commitments' fees a month (730 hours).
                levels.push((hourly * 730.0, "commitments"));
            }
        }
        let title = format!("Monthly spend, history and forecast{}", accuracy(spend));
        content.charts.push(charts::forecast(&title, "USD", &monthly_steps(history, spend), &levels));
    }
    let pools: Vec<String> = fleet
        .map(|((c, ..), _)| c.pools.iter().map(|p| pool_label(&p.provider, &p.pool)).collect())
        .unwrap_or_default();
    let asked = filters.pool.as_deref().map(str::trim).filter(|p| !p.is_empty());
    if let Some(pool) = asked
        && !pools.iter().any(|p| p == pool)
    {
        return Err(WebError::bad("pool", format!("no pool {pool:?}"), pools));
    }
    let mut shown: Vec<&SeriesReport> = Vec::new();
    match asked {
        Some(pool) => shown.extend(forecast.series.iter().find(|s| {
            pool_label(&s.key.provider, &s.key.pool) == pool
                && s.key.client.is_empty()
                && s.metric == "gpu_hours"
        })),
        None if fleet.is_some() => shown.extend(headline(forecast, "gpu_hours")),
        None => shown.extend(
            forecast.series.iter().filter(|s| s.key.pool.is_empty() && s.metric == "gpu_hours").take(4),
        ),
    }
    for series in shown {
        let mut levels = Vec::new();
        if let Some(((capacity, ..), _)) = fleet {
            let peak: f64 = capacity
                .pools
                .iter()
                .filter(|p| {
                    series.key.pool.is_empty()
                        || (p.provider == series.key.provider && p.pool == series.key.pool)
                })
                .map(|p| p.gpus_peak * 24.0)
                .sum();
            if peak > 0.0 {
                // The most GPU-hours a day the pool held (the fleet: each pool's most, summed).
                levels.push((peak, "capacity"));
            }
        }
        let whose = match (&series.key.pool, &series.key.client) {
            (p, _) if !p.is_empty() => pool_label(&series.key.provider, p),
            (_, c) if !c.is_empty() => c.clone(),
            _ => "every pool".into(),
        };
        let title = format!("GPU-hours a day, {whose}{}", accuracy(series));
        content.charts.push(charts::forecast(
            &title,
            "GPU-hours",
            &daily_steps(history, forecast, series),
            &levels,
        ));
    }
    Ok(())
}

/// A pool as the page names it (`pool=`, alerts, chart titles): AWS's by its name, another
/// provider's with the provider after it (`A100 Spot (gcp)`), since clouds share pool names.
fn pool_label(provider: &str, pool: &str) -> String {
    if provider.is_empty() || provider == "aws" { pool.to_string() } else { format!("{pool} ({provider})") }
}

/// What a chart's title says of its forecast's accuracy: the chosen method's MAPE of the
/// monthly total one month ahead in the backtest.
fn accuracy(series: &SeriesReport) -> String {
    match &series.forecast {
        Ok(f) if f.backtest.mape[0].is_some() => {
            format!(" (backtest MAPE, 1 month: {})", percent(f.backtest.mape[0]))
        }
        Ok(_) => " (too little history to backtest)".into(),
        Err(_) => String::new(),
    }
}

/// A series' whole months of history, then its months of forecast with their planned changes.
fn monthly_steps(history: &History, series: &SeriesReport) -> Vec<charts::Step> {
    let mut by_month: BTreeMap<(i32, u32), f64> = BTreeMap::new();
    if let Some(values) = history.series.get(&(series.key.clone(), series.metric)) {
        for (i, v) in values.iter().enumerate() {
            let day = history.first + chrono::Days::new(i as u64);
            *by_month.entry((day.year(), day.month())).or_default() += v;
        }
    }
    let mut steps: Vec<charts::Step> = by_month
        .into_iter()
        .map(|((y, m), v)| charts::Step {
            label: format!("{y:04}-{m:02}"),
            actual: Some(v),
            forecast: None,
            planned: 0.0,
        })
        .collect();
    if let Ok(f) = &series.forecast {
        for (m, (month, p)) in f.months.iter().enumerate() {
            steps.push(charts::Step {
                label: month.format("%Y-%m").to_string(),
                actual: None,
                forecast: Some((p.value, p.lower, p.upper)),
                planned: series.planned.get(m).copied().unwrap_or(0.0),
            });
        }
    }
    steps
}

/// A series' last days of history, then its forecast days, each month's planned changes
/// spread evenly over its days.
fn daily_steps(history: &History, forecast: &ForecastReport, series: &SeriesReport) -> Vec<charts::Step> {
    let values = history.series.get(&(series.key.clone(), series.metric)).map(Vec::as_slice).unwrap_or(&[]);
    let start = values.len().saturating_sub(CHART_HISTORY_DAYS);
    let mut steps: Vec<charts::Step> = values[start..]
        .iter()
        .enumerate()
        .map(|(i, v)| charts::Step {
            label: (history.first + chrono::Days::new((start + i) as u64)).to_string(),
            actual: Some(*v),
            forecast: None,
            planned: 0.0,
        })
        .collect();
    if let Ok(f) = &series.forecast {
        for (i, p) in f.days.iter().enumerate() {
            let date: NaiveDate = forecast.history_end + chrono::Days::new(i as u64 + 1);
            let month =
                forecast.months.iter().position(|m| m.year() == date.year() && m.month() == date.month());
            let days_in_month = Period::new(date.year(), date.month()).map_or(30.0, |p| f64::from(p.days()));
            let planned = month.and_then(|m| series.planned.get(m)).copied().unwrap_or(0.0) / days_in_month;
            steps.push(charts::Step {
                label: date.to_string(),
                actual: None,
                forecast: Some((p.value, p.lower, p.upper)),
                planned,
            });
        }
    }
    steps
}

/// Every method's backtest of the headline series: MAPE at 1, 2 and 3 months, the chosen one
/// marked.
fn backtest_report(forecast: &ForecastReport) -> Report {
    let mut rows = Vec::new();
    for metric in [SPEND, "gpu_hours", "cost"] {
        let Some(series) = headline(forecast, metric) else { continue };
        let Ok(f) = &series.forecast else { continue };
        for (method, backtest) in &f.methods {
            rows.push(vec![
                Cell::Text(if series.key.client.is_empty() {
                    "every pool".into()
                } else {
                    series.key.client.clone()
                }),
                Cell::Text(metric.into()),
                Cell::Text(method.name().into()),
                Cell::Flag(*method == f.method),
                Cell::Count(backtest.origins as f64),
                Cell::Ratio(backtest.mape[0]),
                Cell::Ratio(backtest.mape[1]),
                Cell::Ratio(backtest.mape[2]),
                Cell::Ratio(backtest.wape[0]),
            ]);
        }
    }
    Report::of(Table {
        title: "Backtest".into(),
        columns: vec![
            "series", "metric", "method", "chosen", "origins", "mape_1m", "mape_2m", "mape_3m", "wape_1m",
        ],
        rows,
        totals: Vec::new(),
    })
}

fn plans_report(forecast: &ForecastReport) -> Report {
    let rows = forecast
        .plans
        .iter()
        .map(|p| {
            let created =
                chrono::DateTime::from_timestamp(p.created_at, 0).map(|t| t.date_naive().to_string());
            vec![
                Cell::Count(p.id as f64),
                Cell::Text(p.client.clone()),
                Cell::Text(p.pool.clone()),
                Cell::Text(p.kind.clone()),
                Cell::Hours(p.amount),
                Cell::Text(p.from_month.clone()),
                Cell::Text(p.to_month.clone()),
                Cell::Text(p.note.clone()),
                Cell::Text(p.author.clone()),
                Cell::Text(created.unwrap_or_default()),
            ]
        })
        .collect();
    Report::of(Table {
        title: "Planned changes".into(),
        columns: vec!["id", "client", "pool", "kind", "amount", "from", "to", "note", "author", "added"],
        rows,
        totals: Vec::new(),
    })
}
