//! The dashboard pages. Each reads rollups (kept in memory per computed period, see
//! [`super::RollupCache`]), builds the same tables the command-line reports print, and answers
//! as HTML, JSON (`?format=json` or `Accept: application/json`) or CSV (`?format=csv&table=ID`).
//! Every filter is in the URL.

use std::collections::BTreeMap;
use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::charts;
use super::{AppState, WebError};
use crate::period::{Period, Range};
use crate::report::OutputFormat;
use crate::report::rollup::{self, Report, RollupRange};
use crate::report::table::{Cell, Table};
use crate::store::Rollups;

/// The filters of every page, all in the URL.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Filters {
    pub period: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub group: Option<String>,
    pub namespace: Option<String>,
    pub workload: Option<String>,
    pub cluster: Option<String>,
    pub format: Option<String>,
    pub table: Option<String>,
}

impl Filters {
    /// Every filter including format and table, in one fixed order: equal for two URLs that
    /// ask for the same thing.
    pub(super) fn canonical(&self) -> String {
        let mut query = self.query();
        for (key, value) in [("format", &self.format), ("table", &self.table)] {
            if let Some(value) = value.as_deref().filter(|v| !v.is_empty()) {
                query.push_str(&format!("&{key}={}", url_escape(value)));
            }
        }
        query
    }

    /// The query string of these filters (without format/table), for links.
    fn query(&self) -> String {
        let mut parts = Vec::new();
        for (key, value) in [
            ("period", &self.period),
            ("from", &self.from),
            ("to", &self.to),
            ("group", &self.group),
            ("namespace", &self.namespace),
            ("workload", &self.workload),
            ("cluster", &self.cluster),
        ] {
            if let Some(value) = value.as_deref().filter(|v| !v.is_empty()) {
                parts.push(format!("{key}={}", url_escape(value)));
            }
        }
        parts.join("&")
    }
}

pub(super) fn url_escape(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

const XLSX_TYPE: &str = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";

enum Wants {
    Html,
    Json,
    /// A download of one table (by id; the page's first table when none is named).
    Csv(Option<String>),
    Xlsx(Option<String>),
}

fn wants(filters: &Filters, headers: &HeaderMap) -> Wants {
    match filters.format.as_deref() {
        Some("json") => Wants::Json,
        Some("csv") => Wants::Csv(filters.table.clone()),
        Some("xlsx") => Wants::Xlsx(filters.table.clone()),
        _ if headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("application/json")) =>
        {
            Wants::Json
        }
        _ => Wants::Html,
    }
}

/// A table as the template shows it.
pub struct TableView {
    pub id: String,
    pub caption: String,
    /// Headings, each with whether its column holds numbers.
    pub headings: Vec<(String, bool)>,
    /// Cells, and a link for the row's first cell (drill-down) when there is one.
    pub rows: Vec<RowView>,
    pub csv_href: String,
    pub xlsx_href: String,
}

/// A row's cells (text, is a number) and the link of its first cell.
pub type RowView = (Vec<(String, bool)>, Option<String>);

/// A workload's serving month: cost (nano-USD), requests, tokens, serving hours, hours above P95.
#[derive(Default)]
struct Served {
    cost: i64,
    requests: f64,
    tokens: f64,
    hours: i64,
    above_p95: i64,
}

/// A headline figure with its target band.
pub struct Card {
    pub label: String,
    pub value: String,
    pub previous: String,
    pub target: String,
    /// `ok`, `warn`, `bad` or empty.
    pub status: String,
}

#[derive(Template)]
#[template(path = "report.html")]
pub struct ReportPage {
    pub title: String,
    pub active: &'static str,
    pub label: String,
    pub periods: Vec<String>,
    pub selected: String,
    pub from: String,
    pub to: String,
    pub groups: Vec<(String, bool)>,
    /// Clusters to filter by, with whether each is chosen; empty hides the filter.
    pub clusters: Vec<(String, bool)>,
    /// Drill-down filters carried through a filter change.
    pub hidden: Vec<(&'static str, String)>,
    pub banner: Option<String>,
    pub cards: Vec<Card>,
    pub charts: Vec<String>,
    pub tables: Vec<TableView>,
    pub notes: Vec<String>,
    pub json_href: String,
    pub empty: bool,
}

/// One page's content before it is answered in the format asked for.
pub(super) struct Content {
    title: String,
    active: &'static str,
    /// The page's own path, which its links (downloads, JSON twin) start from.
    path: String,
    pub(super) cards: Vec<Card>,
    pub(super) charts: Vec<String>,
    /// (id, caption, report, links for each row's first cell).
    pub(super) tables: Vec<(String, String, Report, Vec<Option<String>>)>,
    pub(super) notes: Vec<String>,
    pub(super) json: Map<String, Value>,
    /// The clusters to filter by (the Costs page), empty elsewhere.
    clusters: Vec<String>,
}

impl Content {
    pub(super) fn new(title: &str, active: &'static str, path: &str) -> Content {
        Content {
            title: title.into(),
            active,
            path: path.into(),
            cards: Vec::new(),
            charts: Vec::new(),
            tables: Vec::new(),
            notes: Vec::new(),
            json: Map::new(),
            clusters: Vec::new(),
        }
    }

    pub(super) fn table(&mut self, id: &str, caption: &str, report: Report) {
        let links = vec![None; report.table.rows.len() + report.table.totals.len()];
        self.tables.push((id.into(), caption.into(), report, links));
    }
}

/// What a page view works from: every computed period (oldest first) and the range asked for.
pub(super) struct View {
    pub(super) computed: Vec<Arc<Rollups>>,
    pub(super) range: Option<RollupRange>,
}

/// The formats a page answers in (`html` is the page itself).
const FORMATS: [&str; 4] = ["html", "json", "csv", "xlsx"];

/// The range the filters name (`period`, or `from`/`to` dates, or the latest computed period),
/// checked: a filter that names nothing valid is a 400 that names it and lists the choices,
/// never a silent fallback to the latest month.
pub(super) async fn resolve(state: &AppState, filters: &Filters) -> Result<View, WebError> {
    if let Some(format) = given(&filters.format)
        && !FORMATS.contains(&format)
    {
        return Err(WebError::bad(
            "format",
            format!("{format:?} is not a format"),
            FORMATS.map(String::from).to_vec(),
        ));
    }
    let computed = state.cache.all(state.store.as_ref()).await?;
    let months: Vec<String> = computed.iter().rev().map(|r| r.period.period.clone()).collect();
    let asked = Range::parse(filters.period.as_deref(), filters.from.as_deref(), filters.to.as_deref())
        .map_err(|e| WebError::bad(e.parameter, e.message, months.clone()))?;
    let Some(latest) = computed.last().and_then(|r| r.period.period.parse::<Period>().ok()) else {
        if let Some(asked) = asked {
            let parameter = if matches!(asked, Range::Month(_)) { "period" } else { "from" };
            return Err(WebError::bad(parameter, "nothing is computed yet", Vec::new()));
        }
        return Ok(View { computed, range: None });
    };
    let wanted = asked.unwrap_or(Range::Month(latest));
    let range = RollupRange::from_parts(wanted.label(), wanted.start(), wanted.end(), computed.to_vec())
        .map_err(|_| {
            let parameter = if matches!(wanted, Range::Month(_)) { "period" } else { "from" };
            WebError::bad(parameter, format!("nothing is computed for {}", wanted.label()), months.clone())
        })?;
    if let Some(cluster) = given(&filters.cluster) {
        let clusters: std::collections::BTreeSet<&str> = range.costs().map(|c| c.cluster.as_str()).collect();
        if !clusters.contains(cluster) {
            let choices = clusters.into_iter().map(String::from).collect();
            return Err(WebError::bad(
                "cluster",
                format!("no cluster {cluster:?} in {}", range.label),
                choices,
            ));
        }
    }
    Ok(View { computed, range: Some(range) })
}

/// A filter's value, when it is given and not empty.
fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// `path?query&extra`, or `path?extra` when there is no query.
fn href(path: &str, query: &str, extra: &str) -> String {
    match (query.is_empty(), extra.is_empty()) {
        (true, true) => path.to_string(),
        (true, false) => format!("{path}?{extra}"),
        (false, true) => format!("{path}?{query}"),
        (false, false) => format!("{path}?{query}&{extra}"),
    }
}

/// Answers a page in the format asked for.
pub(super) async fn answer(
    state: &AppState,
    filters: &Filters,
    headers: &HeaderMap,
    view: &View,
    content: Content,
) -> Result<Response, WebError> {
    let range = view.range.as_ref();
    let label = range.map(|r| r.label.clone()).unwrap_or_default();
    let wanted = wants(filters, headers);
    match &wanted {
        Wants::Json => {
            let mut top = Map::new();
            top.insert("period".into(), json!(label));
            for (id, _, report, _) in &content.tables {
                let rendered = report.render(OutputFormat::Json, &label);
                top.insert(id.clone(), serde_json::from_str(&rendered).unwrap_or(Value::Null));
            }
            top.extend(content.json);
            Ok(axum::Json(Value::Object(top)).into_response())
        }
        Wants::Csv(table) | Wants::Xlsx(table) => {
            let ids = || content.tables.iter().map(|(id, ..)| id.clone()).collect::<Vec<_>>();
            let chosen = match table.as_deref().filter(|t| !t.is_empty()) {
                Some(asked) => match content.tables.iter().find(|(id, ..)| id == asked) {
                    Some(found) => Some(found),
                    None => {
                        return Err(WebError::bad(
                            "table",
                            format!("this page has no table {asked:?}"),
                            ids(),
                        ));
                    }
                },
                None => content.tables.first(),
            };
            let Some((id, _, report, _)) = chosen else {
                return Err(WebError::not_found("this page has no table to download"));
            };
            let stem = format!("gpuledger-{id}-{}", label.replace('/', "_"));
            let (content_type, filename, body) = if matches!(wanted, Wants::Xlsx(_)) {
                let bytes = report.table.xlsx(id, &label)?;
                (XLSX_TYPE, format!("{stem}.xlsx"), bytes)
            } else {
                let csv = report.render(OutputFormat::Csv, &label);
                ("text/csv; charset=utf-8", format!("{stem}.csv"), csv.into_bytes())
            };
            Ok((
                [
                    (header::CONTENT_TYPE, content_type.to_string()),
                    (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{filename}\"")),
                ],
                body,
            )
                .into_response())
        }
        Wants::Html => {
            let computed = &view.computed;
            let query = filters.query();
            let page = ReportPage {
                title: content.title,
                active: content.active,
                label: label.clone(),
                periods: computed.iter().rev().map(|r| r.period.period.clone()).collect(),
                // A range of days shows its dates and "custom range" as the month; a month shows
                // empty dates, so picking another month is never overridden by stale ones.
                selected: if label.contains('/') { String::new() } else { label.clone() },
                from: label.split_once('/').map(|(from, _)| from.to_string()).unwrap_or_default(),
                to: label.split_once('/').map(|(_, to)| to.to_string()).unwrap_or_default(),
                groups: if content.active == "costs" {
                    let chosen = filters.group.clone().unwrap_or_else(|| "namespace".into());
                    let mut groups: Vec<(String, bool)> =
                        GROUPS.iter().map(|g| (g.to_string(), *g == chosen)).collect();
                    if chosen == "pod" {
                        groups.push(("pod".into(), true));
                    }
                    groups
                } else {
                    Vec::new()
                },
                clusters: content
                    .clusters
                    .iter()
                    .map(|c| (c.clone(), filters.cluster.as_deref() == Some(c.as_str())))
                    .collect(),
                hidden: [("namespace", &filters.namespace), ("workload", &filters.workload)]
                    .into_iter()
                    .filter_map(|(k, v)| v.clone().filter(|v| !v.is_empty()).map(|v| (k, v)))
                    .collect(),
                banner: super::banner(state).await?,
                cards: content.cards,
                charts: content.charts,
                tables: content
                    .tables
                    .iter()
                    .map(|(id, caption, report, links)| {
                        table_view(id, caption, &report.table, links, &content.path, &query)
                    })
                    .collect(),
                notes: content.notes,
                json_href: href(&content.path, &query, "format=json"),
                empty: range.is_none(),
            };
            Ok(Html(page.render()?).into_response())
        }
    }
}

fn table_view(
    id: &str,
    caption: &str,
    table: &Table,
    links: &[Option<String>],
    path: &str,
    query: &str,
) -> TableView {
    let rows = table.display_rows();
    TableView {
        id: id.into(),
        caption: caption.into(),
        headings: {
            let numeric: Vec<bool> =
                rows.first().map(|r| r.iter().map(|(_, n)| *n).collect()).unwrap_or_default();
            table
                .headings()
                .into_iter()
                .enumerate()
                .map(|(i, h)| (h, numeric.get(i).copied().unwrap_or(false)))
                .collect()
        },
        rows: rows.into_iter().zip(links.iter().cloned().chain(std::iter::repeat(None))).collect(),
        csv_href: href(path, query, &format!("format=csv&table={id}")),
        xlsx_href: href(path, query, &format!("format=xlsx&table={id}")),
    }
}

pub(super) fn usd(nanos: i64) -> String {
    crate::money::format_usd(nanos / 1000)
}

pub(super) fn percent(value: Option<f64>) -> String {
    value.map(|v| format!("{:.1} %", v * 100.0)).unwrap_or_else(|| "n/a".into())
}

/// Headline sums of one period.
#[derive(Default, Clone, Copy)]
struct Headline {
    bill_micros: i64,
    gpu_cost: i64,
    idle_cost: i64,
    allocated: f64,
    used: f64,
    idle: f64,
    training_hours: f64,
    training_spot: f64,
    public: i64,
    actual: i64,
}

impl Headline {
    fn of(rollups: &crate::store::Rollups) -> Headline {
        let mut h = Headline { bill_micros: rollups.period.bill_amortized_micros, ..Headline::default() };
        for c in &rollups.costs {
            h.gpu_cost += c.gpu_cost_nanos;
            h.idle_cost += c.idle_gpu_cost_nanos;
            h.allocated += c.gpu_hours_allocated;
            h.used += c.gpu_hours_used;
            h.idle += c.gpu_hours_idle;
            if c.workload_class == "training" {
                h.training_hours += c.gpu_hours_allocated;
                h.training_spot += c.spot_gpu_hours;
            }
            h.public += c.public_on_demand_cost_nanos;
            h.actual += c.split_cost_nanos + c.unused_cost_nanos;
        }
        h
    }

    fn utilization(&self) -> Option<f64> {
        (self.allocated > 0.0).then(|| self.used / self.allocated)
    }

    fn idle_share(&self) -> Option<f64> {
        (self.allocated > 0.0).then(|| self.idle / self.allocated)
    }

    fn spot_adoption(&self) -> Option<f64> {
        (self.training_hours > 0.0).then(|| self.training_spot / self.training_hours)
    }
}

fn status(value: Option<f64>, good: impl Fn(f64) -> bool, bad: impl Fn(f64) -> bool) -> String {
    match value {
        Some(v) if bad(v) => "bad".into(),
        Some(v) if good(v) => "ok".into(),
        Some(_) => "warn".into(),
        None => String::new(),
    }
}

/// Overview (leadership): this month against last, trends, the top opportunities.
pub async fn overview(
    State(state): State<AppState>,
    Query(filters): Query<Filters>,
    headers: HeaderMap,
) -> Result<Response, WebError> {
    let view = resolve(&state, &filters).await?;
    let range = &view.range;
    let mut content = Content::new("Overview", "overview", "/");
    if let Some(range) = &range {
        let computed = &view.computed;
        let current_period = range.parts.last().map(|(r, _)| r.period.period.clone()).unwrap_or_default();
        let index = computed.iter().position(|r| r.period.period == current_period).unwrap_or(0);
        let now = Headline::of(&computed[index]);
        let before = index.checked_sub(1).map(|i| Headline::of(&computed[i]));
        let prev = |f: fn(&Headline) -> String| before.as_ref().map(f).unwrap_or_else(|| "n/a".into());
        content.cards = vec![
            Card {
                label: "Total spend (amortized bill)".into(),
                value: crate::money::format_usd(now.bill_micros),
                previous: prev(|h| crate::money::format_usd(h.bill_micros)),
                target: String::new(),
                status: String::new(),
            },
            Card {
                label: "GPU spend".into(),
                value: usd(now.gpu_cost),
                previous: prev(|h| usd(h.gpu_cost)),
                target: String::new(),
                status: String::new(),
            },
            Card {
                label: "GPU utilization".into(),
                value: percent(now.utilization()),
                previous: prev(|h| percent(h.utilization())),
                target: "60–85 %; below 40 % flagged".into(),
                status: status(now.utilization(), |v| (0.60..=0.85).contains(&v), |v| v < 0.40),
            },
            Card {
                label: "Idle GPU cost".into(),
                value: format!("{} ({} of GPU-hours)", usd(now.idle_cost), percent(now.idle_share())),
                previous: prev(|h| usd(h.idle_cost)),
                target: "under 10 % of GPU-hours; above 20 % flagged".into(),
                status: status(now.idle_share(), |v| v < 0.10, |v| v > 0.20),
            },
            Card {
                label: "Spot adoption (training)".into(),
                value: percent(now.spot_adoption()),
                previous: prev(|h| percent(h.spot_adoption())),
                target: "above 50 %; under 30 % flagged".into(),
                status: status(now.spot_adoption(), |v| v > 0.50, |v| v < 0.30),
            },
            Card {
                label: "Realized savings".into(),
                value: usd(now.public - now.actual),
                previous: prev(|h| usd(h.public - h.actual)),
                target: "public on-demand − actual".into(),
                status: String::new(),
            },
        ];
        let trend: Vec<&std::sync::Arc<crate::store::Rollups>> =
            computed.iter().rev().take(12).rev().collect();
        let months: Vec<String> = trend.iter().map(|r| r.period.period.clone()).collect();
        let heads: Vec<Headline> = trend.iter().map(|r| Headline::of(r)).collect();
        let spend: Vec<f64> = heads.iter().map(|h| h.bill_micros as f64 / 1e6).collect();
        let utilization: Vec<f64> = heads.iter().map(|h| h.utilization().unwrap_or(0.0) * 100.0).collect();
        let idle: Vec<f64> = heads.iter().map(|h| h.idle_cost as f64 / 1e9).collect();
        content.charts.push(charts::bars("Monthly spend (amortized bill)", "USD", &months, &spend));
        content.charts.push(charts::bars(
            "GPU utilization of allocated GPU-hours",
            "%",
            &months,
            &utilization,
        ));
        content.charts.push(charts::bars("Idle GPU cost", "USD", &months, &idle));
        let table = Table {
            title: "Trend".into(),
            totals: Vec::new(),
            columns: vec![
                "month",
                "spend",
                "gpu_spend",
                "gpu_utilization",
                "idle_gpu_cost",
                "spot_adoption",
                "realized_savings",
            ],
            rows: months
                .iter()
                .zip(&heads)
                .map(|(m, h)| {
                    vec![
                        Cell::Text(m.clone()),
                        Cell::Usd(Some(h.bill_micros as f64 / 1e6)),
                        Cell::Usd(Some(h.gpu_cost as f64 / 1e9)),
                        Cell::Ratio(h.utilization()),
                        Cell::Usd(Some(h.idle_cost as f64 / 1e9)),
                        Cell::Ratio(h.spot_adoption()),
                        Cell::Usd(Some((h.public - h.actual) as f64 / 1e9)),
                    ]
                })
                .collect(),
        };
        content.table(
            "trend",
            "Monthly trend (the numbers behind the charts)",
            Report { table, extra: Map::new() },
        );
        let mut top = rollup::opportunities(range);
        top.table.rows.truncate(5);
        content.table("opportunities", "Top 5 opportunities (USD per month)", top);
    }
    answer(&state, &filters, &headers, &view, content).await
}

/// Costs (finance): grouped by namespace, workload, team, client or cluster, reconciled to
/// the bill; a namespace drills down to its workloads and a workload to its pods.
pub async fn costs(
    State(state): State<AppState>,
    Query(filters): Query<Filters>,
    headers: HeaderMap,
) -> Result<Response, WebError> {
    let view = resolve(&state, &filters).await?;
    let mut content = Content::new("Costs", "costs", "/costs");
    if let Some(range) = &view.range {
        let clusters: std::collections::BTreeSet<&str> = range.costs().map(|c| c.cluster.as_str()).collect();
        content.clusters = clusters.into_iter().map(String::from).collect();
        check_drill_down(&filters, range)?;
        let (caption, table, links) =
            match (given(&filters.group), given(&filters.namespace), given(&filters.workload)) {
                (Some("pod"), Some(namespace), Some(workload)) => {
                    pod_costs(&state, &filters, range, namespace, workload).await?
                }
                _ => grouped_costs(&filters, range, &mut content.notes),
            };
        content.tables.push(("costs".into(), caption, Report { table, extra: Map::new() }, links));
    }
    answer(&state, &filters, &headers, &view, content).await
}

/// Refuses a grouping, namespace or workload the range does not have, naming the choices.
fn check_drill_down(filters: &Filters, range: &RollupRange) -> Result<(), WebError> {
    let group = given(&filters.group);
    if let Some(group) = group
        && !GROUPS.contains(&group)
        && group != "pod"
    {
        let choices = GROUPS.map(String::from).to_vec();
        return Err(WebError::bad("group", format!("{group:?} is not a grouping"), choices));
    }
    let namespace = given(&filters.namespace);
    if let Some(namespace) = namespace {
        let namespaces: std::collections::BTreeSet<&str> =
            range.costs().map(|c| c.namespace.as_str()).collect();
        if !namespaces.contains(namespace) {
            let choices = namespaces.into_iter().map(String::from).collect();
            return Err(WebError::bad(
                "namespace",
                format!("no namespace {namespace:?} in {}", range.label),
                choices,
            ));
        }
    }
    if group == Some("pod") {
        let (Some(namespace), Some(workload)) = (namespace, given(&filters.workload)) else {
            return Err(WebError::bad(
                "group",
                "group=pod needs a namespace and a workload",
                GROUPS.map(String::from).to_vec(),
            ));
        };
        let workloads: std::collections::BTreeSet<&str> =
            range.costs().filter(|c| c.namespace == namespace).map(|c| c.workload.as_str()).collect();
        if !workloads.contains(workload) {
            let choices = workloads.into_iter().map(String::from).collect();
            return Err(WebError::bad(
                "workload",
                format!("no workload {workload:?} in {namespace}"),
                choices,
            ));
        }
    }
    Ok(())
}

/// The Costs page's own URL for a drill-down: the same range and cluster, another grouping.
fn costs_link(
    filters: &Filters,
    range: &RollupRange,
    group: &str,
    namespace: &str,
    workload: Option<&str>,
) -> String {
    let mut link = format!("/costs?{}", range_query(range));
    if let Some(cluster) = filters.cluster.as_deref().filter(|c| !c.is_empty()) {
        link.push_str(&format!("&cluster={}", url_escape(cluster)));
    }
    link.push_str(&format!("&group={group}&namespace={}", url_escape(namespace)));
    if let Some(workload) = workload {
        link.push_str(&format!("&workload={}", url_escape(workload)));
    }
    link
}

/// The query naming a range: `period=2026-10`, or `from=…&to=…` for a range of days.
pub(super) fn range_query(range: &RollupRange) -> String {
    match range.label.split_once('/') {
        Some((from, to)) => format!("from={from}&to={to}"),
        None => format!("period={}", url_escape(&range.label)),
    }
}

/// A table's caption, the table, and the link of each row's first cell.
type CostTable = (String, Table, Vec<Option<String>>);

pub(super) fn money(nanos: i64) -> Cell {
    Cell::Usd(Some(nanos as f64 / 1e9))
}

/// Kubernetes cost summed by the chosen group, with the lines that close it to the bill.
fn grouped_costs(filters: &Filters, range: &RollupRange, notes: &mut Vec<String>) -> CostTable {
    let group =
        filters.group.clone().filter(|g| GROUPS.contains(&g.as_str())).unwrap_or_else(|| "namespace".into());
    let namespace = filters.namespace.clone().filter(|n| !n.is_empty());
    let cluster = filters.cluster.clone().filter(|c| !c.is_empty());
    // Keyed by the row's label and, for workloads, the namespace and workload apart (for links).
    let mut sums: BTreeMap<(String, String, String), [i64; 6]> = BTreeMap::new();
    let chosen = range.costs().filter(|c| {
        namespace.as_ref().is_none_or(|n| &c.namespace == n)
            && cluster.as_ref().is_none_or(|k| &c.cluster == k)
    });
    for c in chosen {
        let key = match group.as_str() {
            "workload" => {
                (format!("{}/{}", c.namespace, c.workload), c.namespace.clone(), c.workload.clone())
            }
            "team" => (c.team.clone(), String::new(), String::new()),
            "client" => (c.client.clone(), String::new(), String::new()),
            "cluster" => (c.cluster.clone(), String::new(), String::new()),
            _ => (c.namespace.clone(), c.namespace.clone(), String::new()),
        };
        let s = sums.entry(key).or_default();
        s[0] += c.split_cost_nanos;
        s[1] += c.unused_cost_nanos;
        s[2] += c.net_cost_nanos;
        s[3] += c.public_on_demand_cost_nanos;
        s[4] += c.gpu_cost_nanos;
        s[5] += c.idle_gpu_cost_nanos;
    }
    let line = |label: String, s: &[i64; 6]| {
        vec![
            Cell::Text(label),
            money(s[0]),
            money(s[1]),
            money(s[0] + s[1]),
            money(s[2]),
            money(s[3]),
            money(s[4]),
            money(s[5]),
        ]
    };
    let rows: Vec<Vec<Cell>> = sums.iter().map(|((label, ..), s)| line(label.clone(), s)).collect();
    let mut links: Vec<Option<String>> = sums
        .keys()
        .map(|(_, namespace, workload)| match group.as_str() {
            "namespace" => Some(costs_link(filters, range, "workload", namespace, None)),
            "workload" => Some(costs_link(filters, range, "pod", namespace, Some(workload))),
            _ => None,
        })
        .collect();
    let total: [i64; 6] = sums.values().fold([0; 6], |mut acc, s| {
        acc.iter_mut().zip(s).for_each(|(a, b)| *a += b);
        acc
    });
    let mut totals = vec![line("Kubernetes total".into(), &total)];
    links.push(None);
    let whole = range.parts.iter().all(|(_, whole)| *whole);
    if namespace.is_none() && cluster.is_none() && whole {
        let other = range.other_cost_micros();
        let bill: i64 = range.periods().map(|(p, _)| p.bill_amortized_micros).sum();
        for (label, micros) in [("Other AWS cost (not Kubernetes)", other), ("Bill (amortized)", bill)] {
            let mut row = vec![Cell::Text(label.into()), Cell::Usd(None), Cell::Usd(None)];
            row.push(Cell::Usd(Some(micros as f64 / 1e6)));
            row.extend((0..4).map(|_| Cell::Usd(None)));
            totals.push(row);
            links.push(None);
        }
    } else if !whole {
        notes.push("Other AWS cost and the bill are shown for whole billing months only.".into());
    } else {
        notes.push("Other AWS cost and the bill are shown when no namespace or cluster is chosen.".into());
    }
    let table = Table {
        title: "Costs".into(),
        totals,
        columns: [&[column_of(&group)], &MONEY_COLUMNS[..], &["idle_gpu_cost"]].concat(),
        rows,
    };
    let scope = cluster.map(|c| format!(" in cluster {c}")).unwrap_or_default();
    let caption = match &namespace {
        Some(n) => format!("Workloads of {n}{scope}"),
        None if scope.is_empty() => format!("Kubernetes cost by {group}, reconciled to the bill"),
        None => format!("Kubernetes cost by {group}{scope}"),
    };
    (caption, table, links)
}

/// One workload's pods over the range, from the pod-day aggregates of each period in it.
async fn pod_costs(
    state: &AppState,
    filters: &Filters,
    range: &RollupRange,
    namespace: &str,
    workload: &str,
) -> Result<CostTable, WebError> {
    use crate::store::PodCost;
    let cluster = filters.cluster.clone().filter(|c| !c.is_empty());
    let mut pods: BTreeMap<[String; 5], PodCost> = BTreeMap::new();
    for (rollups, _) in &range.parts {
        let Ok(period) = rollups.period.period.parse::<Period>() else { continue };
        let (from, to) = (range.from.max(period.start()), range.to.min(period.end()));
        for pod in state.store.pod_costs(&rollups.period.period, namespace, workload, from, to).await? {
            if cluster.as_ref().is_some_and(|c| c != &pod.cluster) {
                continue;
            }
            let key = [&pod.pod, &pod.cluster, &pod.node, &pod.instance_type, &pod.purchase_option]
                .map(String::clone);
            add_pod(pods.entry(key).or_default(), &pod);
        }
    }
    let line = |labels: &[String; 5], p: &PodCost| {
        let mut row: Vec<Cell> = labels.iter().map(|t| Cell::Text(t.clone())).collect();
        row.extend([
            Cell::Hours(p.gpu_hours),
            money(p.split_cost_nanos),
            money(p.unused_cost_nanos),
            money(p.split_cost_nanos + p.unused_cost_nanos),
            money(p.net_cost_nanos),
            money(p.public_on_demand_cost_nanos),
            money(p.gpu_cost_nanos),
        ]);
        row
    };
    let rows: Vec<Vec<Cell>> = pods.iter().map(|(labels, p)| line(labels, p)).collect();
    let mut total = PodCost::default();
    pods.values().for_each(|p| add_pod(&mut total, p));
    let totals = vec![line(
        &["Workload total".into(), String::new(), String::new(), String::new(), String::new()],
        &total,
    )];
    // The total links back to the namespace's workloads.
    let mut links: Vec<Option<String>> = vec![None; rows.len()];
    links.push(Some(costs_link(filters, range, "workload", namespace, None)));
    let table = Table {
        title: "Costs".into(),
        totals,
        columns: vec!["pod", "cluster", "node", "instance_type", "purchase_option", "gpu_hours"]
            .into_iter()
            .chain(MONEY_COLUMNS)
            .collect(),
        rows,
    };
    let caption = format!("Pods of {namespace}/{workload} (the total links back to {namespace}'s workloads)");
    Ok((caption, table, links))
}

fn add_pod(sum: &mut crate::store::PodCost, pod: &crate::store::PodCost) {
    sum.gpu_hours += pod.gpu_hours;
    sum.gpu_cost_nanos += pod.gpu_cost_nanos;
    sum.split_cost_nanos += pod.split_cost_nanos;
    sum.unused_cost_nanos += pod.unused_cost_nanos;
    sum.net_cost_nanos += pod.net_cost_nanos;
    sum.public_on_demand_cost_nanos += pod.public_on_demand_cost_nanos;
}

/// The groupings of the Costs page (pods are reached by drilling down from a workload).
const GROUPS: [&str; 5] = ["namespace", "workload", "team", "client", "cluster"];

/// The money columns of the Costs tables, in the order `grouped_costs` and `pod_costs` fill them.
const MONEY_COLUMNS: [&str; 6] =
    ["split_cost", "unused_cost", "total_cost", "net_cost", "public_on_demand_cost", "gpu_cost"];

/// The first column's name for a grouping.
fn column_of(group: &str) -> &'static str {
    match group {
        "workload" => "namespace_workload",
        "team" => "team",
        "client" => "client",
        "cluster" => "cluster",
        _ => "namespace",
    }
}

/// Clients (agency): chargeback with the policy in force.
pub async fn clients(
    State(state): State<AppState>,
    Query(filters): Query<Filters>,
    headers: HeaderMap,
) -> Result<Response, WebError> {
    let view = resolve(&state, &filters).await?;
    let range = &view.range;
    let mut content = Content::new("Clients", "clients", "/clients");
    if let Some(range) = &range {
        let report = rollup::clients(range);
        let links = report
            .table
            .rows
            .iter()
            .map(|row| match row.first() {
                Some(Cell::Text(client)) => {
                    Some(format!("/clients/{}?{}", url_escape(client), range_query(range)))
                }
                _ => None,
            })
            .collect();
        content.tables.push((
            "clients".into(),
            "Chargeback by client (shares of platform and idle cost, markup); each client links to its detail"
                .into(),
            report,
            links,
        ));
        content.notes.push(
            "Direct cost is each client's pods' split cost. The platform pool (kube-system, monitoring, \
             gpu-operator) and the idle pool (unused capacity AWS pushed down to pods) are shared by each \
             client's policy; (unassigned) keeps the rest, so every shared dollar is accounted for."
                .into(),
        );
    }
    answer(&state, &filters, &headers, &view, content).await
}

/// GPUs: hours by model and namespace, a utilization heatmap, the worst-idle workloads.
pub async fn gpus(
    State(state): State<AppState>,
    Query(filters): Query<Filters>,
    headers: HeaderMap,
) -> Result<Response, WebError> {
    let view = resolve(&state, &filters).await?;
    let range = &view.range;
    let mut content = Content::new("GPUs", "gpus", "/gpus");
    if let Some(range) = &range {
        let mut unattributed: BTreeMap<String, f64> = BTreeMap::new();
        for (period, _) in range.periods() {
            if period.unattributed_gpu_hours > 0.0 {
                *unattributed.entry("(all models)".into()).or_default() += period.unattributed_gpu_hours;
            }
        }
        // Heatmap: utilization of allocated GPU-hours by day and hour of day.
        let mut days: BTreeMap<i64, [Option<(f64, f64)>; 24]> = BTreeMap::new();
        for (rollups, _) in &range.parts {
            for cell in rollups.heatmap.iter().filter(|c| c.day >= range.from && c.day < range.to) {
                let slot =
                    &mut days.entry(cell.day).or_insert([None; 24])[cell.hour_of_day.clamp(0, 23) as usize];
                let (a, u) = slot.unwrap_or((0.0, 0.0));
                *slot = Some((a + cell.gpu_hours_allocated, u + cell.gpu_hours_used));
            }
        }
        let labels: Vec<String> = days
            .keys()
            .map(|d| {
                chrono::DateTime::from_timestamp(*d, 0)
                    .map(|t| t.format("%a %m-%d").to_string())
                    .unwrap_or_default()
            })
            .collect();
        let cells: Vec<[Option<f64>; 24]> =
            days.values().map(|h| h.map(|c| c.and_then(|(a, u)| (a > 0.0).then(|| u / a)))).collect();
        content.charts.push(charts::heatmap("GPU utilization by day and hour", &labels, &cells));
        content.table("gpu", "GPU-hours by namespace and GPU model", rollup::gpu(range, &unattributed));
        let mut worst = rollup::workloads(range);
        // Sort by idle GPU cost, keep the ten worst with any idle cost.
        let idle = worst.table.column("idle_gpu_cost").unwrap_or(usize::MAX);
        let idle_cost = |r: &Vec<Cell>| if let Some(Cell::Usd(Some(v))) = r.get(idle) { *v } else { 0.0 };
        worst.table.rows.retain(|r| idle_cost(r) > 0.0);
        worst.table.rows.sort_by(|a, b| idle_cost(b).total_cmp(&idle_cost(a)));
        worst.table.rows.truncate(10);
        content.table("worst_idle", "Workloads with the most idle GPU cost", worst);
        let heat_rows: Vec<Vec<Cell>> = labels
            .iter()
            .zip(&cells)
            .map(|(day, hours)| {
                let mut row = vec![Cell::Text(day.clone())];
                row.extend(hours.iter().map(|h| Cell::Ratio(*h)));
                row
            })
            .collect();
        const HOURS: [&str; 25] = [
            "day", "h00", "h01", "h02", "h03", "h04", "h05", "h06", "h07", "h08", "h09", "h10", "h11", "h12",
            "h13", "h14", "h15", "h16", "h17", "h18", "h19", "h20", "h21", "h22", "h23",
        ];
        let heat =
            Table { title: "Heatmap".into(), columns: HOURS.to_vec(), rows: heat_rows, totals: Vec::new() };
        content.table(
            "heatmap",
            "Utilization by day and hour (UTC), the numbers behind the heatmap",
            Report { table: heat, extra: Map::new() },
        );
    }
    answer(&state, &filters, &headers, &view, content).await
}

/// Inference: cost per inference and per 1M tokens per workload, hours above the fleet P95.
pub async fn inference(
    State(state): State<AppState>,
    Query(filters): Query<Filters>,
    headers: HeaderMap,
) -> Result<Response, WebError> {
    let view = resolve(&state, &filters).await?;
    let range = &view.range;
    let mut content = Content::new("Inference", "inference", "/inference");
    if let Some(range) = &range {
        let mut sums: BTreeMap<(String, String), Served> = BTreeMap::new();
        for c in range.costs() {
            let s = sums.entry((c.namespace.clone(), c.workload.clone())).or_default();
            s.cost += c.split_cost_nanos + c.unused_cost_nanos;
            s.requests += c.requests;
            s.tokens += c.prompt_tokens + c.generation_tokens;
            s.hours += c.inference_hours;
            s.above_p95 += c.inference_hours_above_p95;
        }
        let table = Table {
            title: "Inference".into(),
            totals: Vec::new(),
            columns: vec![
                "namespace",
                "workload",
                "requests",
                "tokens",
                "cost",
                "cost_per_inference",
                "cost_per_million_tokens",
                "serving_hours",
                "hours_above_p95",
            ],
            rows: sums
                .iter()
                .filter(|(_, s)| s.requests > 0.0)
                .map(|((ns, w), s)| {
                    let cost = s.cost as f64 / 1e9;
                    vec![
                        Cell::Text(ns.clone()),
                        Cell::Text(w.clone()),
                        Cell::Count(s.requests),
                        Cell::Count(s.tokens),
                        Cell::Usd(Some(cost)),
                        Cell::Rate(Some(cost / s.requests)),
                        Cell::Usd((s.tokens > 0.0).then(|| cost / (s.tokens / 1e6))),
                        Cell::Count(s.hours as f64),
                        Cell::Count(s.above_p95 as f64),
                    ]
                })
                .collect(),
        };
        let p95: Vec<String> =
            range.periods().map(|(p, _)| format!("{}: ${:.6}", p.period, p.p95_cost_per_inference)).collect();
        content.notes.push(format!(
            "Cost per inference = the workload's cost (GPU, CPU, memory; split + unused) / successful requests. \
             Fleet P95 of hourly cost per inference per serving pod-hour — {}.",
            p95.join(", ")
        ));
        content.table("inference", "Cost per inference by workload", Report { table, extra: Map::new() });
    }
    answer(&state, &filters, &headers, &view, content).await
}

/// Savings: realized by month, and opportunities with their evidence.
pub async fn savings(
    State(state): State<AppState>,
    Query(filters): Query<Filters>,
    headers: HeaderMap,
) -> Result<Response, WebError> {
    let view = resolve(&state, &filters).await?;
    let range = &view.range;
    let mut content = Content::new("Savings", "savings", "/savings");
    if let Some(range) = &range {
        let computed = &view.computed;
        let first = computed.first().and_then(|r| r.period.period.parse::<Period>().ok());
        let last = computed.last().and_then(|r| r.period.period.parse::<Period>().ok());
        if let (Some(first), Some(last)) = (first, last) {
            let all =
                RollupRange::from_parts("all months".into(), first.start(), last.end(), computed.clone())
                    .map_err(|_| WebError::not_found("nothing computed"))?;
            let realized = rollup::savings(&all);
            let month = realized.table.column("month").unwrap_or(usize::MAX);
            let saved = realized.table.column("realized_savings").unwrap_or(usize::MAX);
            let months: Vec<String> =
                realized.table.rows.iter().map(|r| r.get(month).map(text_of).unwrap_or_default()).collect();
            let values: Vec<f64> = realized
                .table
                .rows
                .iter()
                .map(|r| if let Some(Cell::Usd(Some(v))) = r.get(saved) { *v } else { 0.0 })
                .collect();
            content.charts.push(charts::bars("Realized savings by month", "USD", &months, &values));
            content.table("realized", "Realized savings by month (all computed months)", realized);
        }
        content.table("opportunities", "Opportunities, ranked (USD per month)", rollup::opportunities(range));
    }
    answer(&state, &filters, &headers, &view, content).await
}

fn text_of(cell: &Cell) -> String {
    match cell {
        Cell::Text(t) => t.clone(),
        _ => String::new(),
    }
}
