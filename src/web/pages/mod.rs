//! The dashboard pages, one module each. Each reads rollups (kept in memory per computed period, see
//! [`super::RollupCache`]), builds the same tables the command-line reports print, and answers
//! as HTML, JSON (`?format=json` or `Accept: application/json`) or CSV (`?format=csv&table=ID`).
//! Every filter is in the URL.

use std::sync::Arc;

use askama::Template;
use axum::http::{HeaderMap, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::charts;
use super::{AppState, Viewer, WebError};
use crate::period::{Period, Range, human};
use crate::report::OutputFormat;
use crate::report::rollup::{Report, RollupRange};
use crate::report::table::{Cell, MoneyJson, Nanos, Table};
use crate::store::Rollups;
use crate::web::filters;

mod alerts;
mod client;
mod clients;
mod costs;
mod data;
mod gpus;
mod inference;
mod invoices;
mod overview;
mod plan;
mod savings;

pub use alerts::alerts;
pub use client::page as client;
pub use clients::clients;
pub use costs::costs;
pub use data::page as data;
pub use gpus::gpus;
pub use inference::inference;
pub use invoices::{
    adjust as invoice_adjust, billing as invoice_billing, credit as invoice_credit, document as invoice,
    draft as invoice_draft, export as invoice_export, issue as invoice_issue,
    issue_month as invoice_issue_month, register as invoices, settings as invoice_settings,
    terms as invoice_terms,
};
pub use overview::overview;
pub use plan::{PlanCache, plan, warm_plan};
pub use savings::savings;

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
    /// A provider (`aws`, `azure`, `gcp`, `oci`): every figure narrowed to its accounts.
    pub provider: Option<String>,
    /// A usage account: every figure narrowed to its pods, instances and bill.
    pub account: Option<String>,
    pub format: Option<String>,
    pub table: Option<String>,
    /// A column to order every table that has it by, and `asc` or `desc` (the default).
    pub sort: Option<String>,
    pub dir: Option<String>,
    /// The page of every table longer than [`PAGE_ROWS`] (1 is the first); not carried by
    /// links to another grouping, range or order.
    pub page: Option<String>,
    /// `all` shows every column of a wide table; without it, its chosen few.
    pub columns: Option<String>,
    /// The Plan page's horizon (1, 2 or 3 months) and the pool its daily chart shows.
    pub months: Option<String>,
    pub pool: Option<String>,
}

/// Rows shown per page of a long table; the CSV and XLSX downloads and the JSON twin hold
/// every row.
pub const PAGE_ROWS: usize = 100;

impl Filters {
    /// Every filter including format and table, in one fixed order: equal for two URLs that
    /// ask for the same thing.
    pub(super) fn canonical(&self) -> String {
        let mut query = self.query();
        for (key, value) in [("format", &self.format), ("table", &self.table), ("page", &self.page)] {
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
            ("provider", &self.provider),
            ("account", &self.account),
            ("sort", &self.sort),
            ("dir", &self.dir),
            ("columns", &self.columns),
            ("months", &self.months),
            ("pool", &self.pool),
        ] {
            if let Some(value) = value.as_deref().filter(|v| !v.is_empty()) {
                parts.push(format!("{key}={}", url_escape(value)));
            }
        }
        parts.join("&")
    }
}

pub fn url_escape(value: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    // One string, no allocation per byte: a churny month's Costs page escapes some 80,000
    // workload links.
    let mut escaped = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => escaped.push(b as char),
            _ => {
                escaped.push('%');
                escaped.push(HEX[usize::from(b >> 4)] as char);
                escaped.push(HEX[usize::from(b & 15)] as char);
            }
        }
    }
    escaped
}

const XLSX_TYPE: &str = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";

enum Wants {
    Html,
    Json,
    /// A download of one table (by id; the page's first table when none is named).
    Csv(Option<String>),
    Xlsx(Option<String>),
}

/// Whether the page is asked for as HTML (not JSON, CSV or XLSX).
pub(super) fn wants_html(filters: &Filters, headers: &HeaderMap) -> bool {
    matches!(wants(filters, headers), Wants::Html)
}

fn wants(filters: &Filters, headers: &HeaderMap) -> Wants {
    match filters.format.as_deref() {
        Some("json") => Wants::Json,
        Some("csv") => Wants::Csv(filters.table.clone()),
        Some("xlsx") => Wants::Xlsx(filters.table.clone()),
        _ if crate::web::error::accepts_json(headers) => Wants::Json,
        _ => Wants::Html,
    }
}

/// A table as the template shows it.
pub struct TableView {
    pub id: String,
    pub caption: String,
    /// Headings: text, whether its column holds numbers, the link that sorts by it, and its
    /// `aria-sort` (`ascending`, `descending` or `none`).
    pub headings: Vec<(String, bool, String, &'static str)>,
    /// Cells, and a link for the row's first cell (drill-down) when there is one.
    pub rows: Vec<RowView>,
    /// The rows from this index on are the table's totals (styled apart).
    pub first_total: usize,
    /// Whether each column holds a state (an alert's, an invoice's, a run's), shown as a badge.
    pub badges: Vec<bool>,
    /// Whether each column holds short codes that read whole (a region, an instance type):
    /// not broken at their hyphens and dots.
    pub codes: Vec<bool>,
    pub csv_href: String,
    pub xlsx_href: String,
    /// Where this page of a long table sits, and links to the others.
    pub pager: Option<Pager>,
    /// A wide table's link to all its columns, or back to its chosen few (text, link).
    pub more: Option<(String, String)>,
    /// Behind "Show the numbers", closed until opened.
    pub folded: bool,
    /// A card per row on a narrow screen.
    pub stacked: bool,
}

/// The rows a page of a long table shows and the links to its first, previous, next and
/// last pages (none on the page they would name).
pub struct Pager {
    /// `Rows 101–200 of 82,048`.
    pub shown: String,
    pub first: Option<String>,
    pub previous: Option<String>,
    pub next: Option<String>,
    pub last: Option<String>,
}

/// A row's cells (text, is a number) and the link of its first cell.
pub type RowView = (Vec<(String, bool)>, Option<String>);

/// A headline figure with its target band.
#[derive(Default)]
pub struct Card {
    pub label: String,
    pub value: String,
    pub previous: String,
    /// What the figure should be (`60–85 %; below 40 % flagged`), empty when nothing is aimed at.
    pub target: String,
    /// What the figure is, exactly: a footnote under the cards and the label's tooltip.
    pub definition: String,
    /// `ok`, `warn`, `bad` or empty.
    pub status: String,
    /// The change against the previous period (`▲ 5.4 %`, `▼ 1.2 pts`), empty when there is none.
    pub delta: String,
    /// `better`, `worse`, or empty when nothing changed.
    pub delta_class: &'static str,
    /// The figure's trend by month as a small SVG, empty when there is none.
    pub spark: String,
}

impl Card {
    /// The card with its change against the previous period ([`money_delta`], [`ratio_delta`]).
    pub(super) fn with_delta(self, (delta, delta_class): (String, &'static str)) -> Card {
        Card { delta, delta_class, ..self }
    }
}

/// Which way a card's figure is better, for its delta's colour.
#[derive(Clone, Copy)]
pub(super) enum Better {
    Up,
    Down,
}

/// A money figure's change in percent against the previous period: text and class.
pub(super) fn money_delta(now: i64, before: Option<i64>, better: Better) -> (String, &'static str) {
    let Some(before) = before.filter(|b| *b != 0) else { return (String::new(), "") };
    let change = (now - before) as f64 / before.abs() as f64 * 100.0;
    delta_text(change, format!("{:.1} %", change.abs()), better)
}

/// A ratio's change in percentage points against the previous period: text and class.
pub(super) fn ratio_delta(now: Option<f64>, before: Option<f64>, better: Better) -> (String, &'static str) {
    let (Some(now), Some(before)) = (now, before) else { return (String::new(), "") };
    let points = (now - before) * 100.0;
    delta_text(points, format!("{:.1} pts", points.abs()), better)
}

fn delta_text(change: f64, magnitude: String, better: Better) -> (String, &'static str) {
    if magnitude.starts_with("0.0 ") {
        return (format!("= {magnitude}"), "");
    }
    let (arrow, up) = if change > 0.0 { ("▲", true) } else { ("▼", false) };
    let class = match (better, up) {
        (Better::Up, true) | (Better::Down, false) => "better",
        _ => "worse",
    };
    (format!("{arrow} {magnitude}"), class)
}

#[derive(Template)]
#[template(path = "report.html")]
pub struct ReportPage {
    pub title: String,
    pub active: &'static str,
    /// Whether the page shows a range of the bill (the month picker, dates and presets); the
    /// alerts are not by month.
    pub ranged: bool,
    pub label: String,
    pub periods: Vec<String>,
    pub selected: String,
    pub from: String,
    pub to: String,
    /// One-click ranges (label, link, whether it is the range shown).
    pub presets: Vec<(String, String, bool)>,
    pub groups: Vec<(String, bool)>,
    /// Clusters to filter by (name, label with whose split, whether chosen); empty hides
    /// the filter.
    pub clusters: Vec<(String, String, bool)>,
    /// Providers to filter by (id, name, chosen); empty hides the filter.
    pub providers: Vec<(String, String, bool)>,
    /// Usage accounts to filter by (id, label, chosen); empty hides the filter.
    pub accounts: Vec<(String, String, bool)>,
    /// Drill-down filters carried through a filter change.
    pub hidden: Vec<(&'static str, String)>,
    pub banner: Option<String>,
    pub cards: Vec<Card>,
    pub charts: Vec<String>,
    pub tables: Vec<TableView>,
    pub notes: Vec<String>,
    pub json_href: String,
    pub empty: bool,
    /// Breadcrumbs of a drill-down (name, link; the last is the page shown).
    pub crumbs: Vec<(String, Option<String>)>,
    /// When the numbers were computed, on screen and in print.
    pub as_of: String,
    /// A heading only the printed page shows (company, what, period, prepared when).
    pub print_head: String,
}

impl ReportPage {
    /// Whether any card has a definition (the footnotes under the cards).
    pub fn defined(&self) -> bool {
        self.cards.iter().any(|c| !c.definition.is_empty())
    }
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
    /// The clusters to filter by (the Costs page: name, label), empty elsewhere.
    clusters: Vec<(String, String)>,
    /// Whether the page offers the account filter (Costs, Clients, GPUs).
    pub(super) account_filter: bool,
    /// Whether the page shows a range of the bill, and so the range picker (all but Alerts).
    pub(super) ranged: bool,
    /// The way down to a drill-down (name, link), ending with the page itself (no link);
    /// empty on a top-level page.
    pub(super) crumbs: Vec<(String, Option<String>)>,
    /// A long table that holds only the rows its page shows, already in the order asked.
    pub(super) window: Option<Window>,
    /// Wide tables' columns shown by default (by table id): the rest behind "All N columns".
    columns: Vec<(String, &'static [&'static str])>,
    /// Tables behind "Show the numbers" (by id): the numbers behind a chart, long to read.
    folded: Vec<String>,
    /// Tables whose rows are objects (an opportunity, an invoice line): a card each on a phone.
    stacked: Vec<String>,
    /// The printed page's heading (who prepared it, for what, when), empty for none.
    pub(super) print_head: String,
}

/// The rows a long table holds when its page made only those it shows (a grouping of some
/// 80,000 workloads renders 100 rows, not all): rows `first..` of `total`, already sorted.
/// Downloads and the JSON twin always hold every row.
pub(super) struct Window {
    pub(super) table: String,
    pub(super) first: usize,
    pub(super) total: usize,
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
            account_filter: false,
            ranged: true,
            crumbs: Vec::new(),
            window: None,
            columns: Vec::new(),
            folded: Vec::new(),
            stacked: Vec::new(),
            print_head: String::new(),
        }
    }

    /// Shows each row of the table `id` as a card of labelled values on a narrow screen.
    pub(super) fn stack(&mut self, id: &str) {
        self.stacked.push(id.into());
    }

    /// Puts the table `id` behind "Show the numbers" (closed until opened).
    pub(super) fn fold(&mut self, id: &str) {
        self.folded.push(id.into());
    }

    /// Shows only `columns` of the table `id` (its first column always) until the reader asks
    /// for all of them; the downloads and the JSON twin always hold every column.
    pub(super) fn default_columns(&mut self, id: &str, columns: &'static [&'static str]) {
        self.columns.push((id.into(), columns));
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
    /// Every usage account of the range before an account filter narrowed it (id → name),
    /// those of the provider asked for when one is.
    pub(super) accounts: std::collections::BTreeMap<String, String>,
    /// Every provider with an account in the range before a filter narrowed it.
    pub(super) providers: std::collections::BTreeSet<String>,
    /// Who asks: every number above is already limited to what their scope may see.
    pub(super) viewer: Viewer,
    /// Some period was recomputed and is being read again: its figures are the previous ones.
    pub(super) previous: bool,
}

/// What every dashboard page opens with: the state, the filters and headers of the request,
/// and the view they resolve to for the viewer (range, scope, rollups). Refused as the
/// extractors it is made of refuse (a request without a viewer, filters that do not parse)
/// or as [`resolve`] does (a filter that names nothing valid).
pub(super) struct Opening {
    pub(super) state: AppState,
    pub(super) filters: Filters,
    pub(super) headers: HeaderMap,
    pub(super) view: View,
}

impl axum::extract::FromRequestParts<AppState> for Opening {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<Opening, Response> {
        let axum::Extension(viewer) = axum::Extension::<Viewer>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let axum::extract::Query(filters) = axum::extract::Query::<Filters>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let view = resolve(state, &viewer, &filters).await.map_err(IntoResponse::into_response)?;
        Ok(Opening { state: state.clone(), filters, headers: parts.headers.clone(), view })
    }
}

/// Cost Explorer's amortized cost per month before the first computed month (before the CUR
/// export existed), newest `months` of them, oldest first: only for a viewer who sees the
/// whole fleet (the totals have no client split). Tax is left out as in the amortized bill;
/// credits and refunds are in (Cost Explorer's service totals carry them).
pub(super) async fn history(
    state: &AppState,
    view: &View,
    months: usize,
) -> Result<Vec<(String, i64)>, WebError> {
    if !matches!(view.viewer.scope, crate::auth::Scope::All) || months == 0 {
        return Ok(Vec::new());
    }
    let Some(first) = view.computed.first().and_then(|r| r.period.period.parse::<Period>().ok()) else {
        return Ok(Vec::new());
    };
    let mut by_month: std::collections::BTreeMap<Period, i64> = std::collections::BTreeMap::new();
    for cost in state.store.ce_costs(i64::MIN, first.start()).await? {
        if cost.service != "Tax" {
            *by_month.entry(Period::containing(cost.day)).or_default() += cost.amortized_nanos;
        }
    }
    let mut history: Vec<(String, i64)> = by_month
        .into_iter()
        .rev()
        .take(months)
        .map(|(period, nanos)| (period.to_string(), crate::money::micros_from_nanos(nanos)))
        .collect();
    history.reverse();
    Ok(history)
}

/// The monthly spend chart: `history` (Cost Explorer, grey) before the computed `months`
/// with their amortized bill in µ$; the note that explains the grey bars when there are any.
pub(super) fn spend_chart(content: &mut Content, history: &[(String, i64)], months: &[(String, i64)]) {
    let labels: Vec<String> = history.iter().chain(months).map(|(m, _)| m.clone()).collect();
    let values: Vec<f64> = history.iter().chain(months).map(|(_, micros)| *micros as f64 / 1e6).collect();
    let marked: Vec<bool> = (0..labels.len()).map(|i| i < history.len()).collect();
    content.charts.push(charts::bars_marked(
        "Monthly spend (amortized bill)",
        "USD",
        &labels,
        &values,
        &marked,
    ));
    if !history.is_empty() {
        content.notes.push(HISTORY_NOTE.into());
    }
}

/// What a page says under a chart that shows Cost Explorer's history.
pub(super) const HISTORY_NOTE: &str = "Grey bars are Cost Explorer's totals for months before the CUR \
     export existed: amortized cost with credits and refunds, tax left out, and no namespace or client split.";

/// The formats a page answers in (`html` is the page itself).
const FORMATS: [&str; 4] = ["html", "json", "csv", "xlsx"];

/// The range the filters name (`period`, or `from`/`to` dates, or the latest computed period),
/// checked: a filter that names nothing valid is a 400 that names it and lists the choices,
/// never a silent fallback to the latest month.
pub(super) async fn resolve(state: &AppState, viewer: &Viewer, filters: &Filters) -> Result<View, WebError> {
    if let Some(format) = given(&filters.format)
        && !FORMATS.contains(&format)
    {
        return Err(WebError::bad(
            "format",
            format!("{format:?} is not a format"),
            FORMATS.map(String::from).to_vec(),
        ));
    }
    let (mut computed, mut previous) =
        state.cache.all_or_previous(state.store.as_ref(), &viewer.scope).await?;
    if previous {
        // Read the recomputed periods again; answer fresh if that is quick, else from the
        // previous rollups, said on the page.
        tokio::spawn(crate::web::reload(state.clone()));
        let deadline = std::time::Instant::now() + state.fresh_wait;
        while previous && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            (computed, previous) = state.cache.all_or_previous(state.store.as_ref(), &viewer.scope).await?;
        }
    }
    let months: Vec<String> = computed.iter().rev().map(|r| r.period.period.clone()).collect();
    let asked = Range::parse(filters.period.as_deref(), filters.from.as_deref(), filters.to.as_deref())
        .map_err(|e| WebError::bad(e.parameter, e.message, months.clone()))?;
    let Some(latest) = computed.last().and_then(|r| r.period.period.parse::<Period>().ok()) else {
        if let Some(asked) = asked {
            let parameter = if matches!(asked, Range::Month(_)) { "period" } else { "from" };
            return Err(WebError::bad(parameter, "nothing is computed yet", Vec::new()));
        }
        return Ok(View {
            computed,
            range: None,
            accounts: Default::default(),
            providers: Default::default(),
            viewer: viewer.clone(),
            previous,
        });
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
    let providers = range.provider_ids();
    let range = match given(&filters.provider) {
        Some(provider) => range.only_provider(provider).map_err(|_| {
            WebError::bad(
                "provider",
                format!("no {provider} bill in {}", range.label),
                providers.iter().cloned().collect(),
            )
        })?,
        None => range,
    };
    let accounts = range.accounts();
    let range = match given(&filters.account) {
        Some(account) => range.only_account(account).map_err(|_| {
            WebError::bad(
                "account",
                format!("no usage account {account:?} in {}", range.label),
                accounts.keys().cloned().collect(),
            )
        })?,
        None => range,
    };
    Ok(View { computed, range: Some(range), accounts, providers, viewer: viewer.clone(), previous })
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
    let mut content = content;
    sort_tables(&mut content, filters)?;
    let page = page_asked(filters)?;
    if view.previous {
        content.notes.insert(0, PREVIOUS_NOTE.into());
        content.json.insert("previous_rollups".into(), json!(PREVIOUS_NOTE));
    }
    let withheld = view.computed.iter().any(|r| r.withheld_others)
        || range.is_some_and(|r| r.parts.iter().any(|(part, _)| part.withheld_others));
    if withheld {
        content.notes.push(WITHHELD_NOTE.into());
        content.json.insert("withheld_others".into(), json!(WITHHELD_NOTE));
    }
    let mut response = render_answer(state, filters, &wanted, view, content, page, &label).await?;
    if view.previous {
        let mark = axum::http::HeaderValue::from_static("1");
        response.headers_mut().insert(crate::web::PREVIOUS_HEADER, mark);
    }
    Ok(response)
}

/// What a manager's page says when figures of other clients were withheld.
const WITHHELD_NOTE: &str = "Some figures of other clients are withheld: \"(other clients)\" lines are \
     sums of two clients or more, and a figure that only one other client makes up (a GPU model, \
     a day or an opportunity that is theirs alone) would be that client's own.";

/// What a page says while it answers from the rollups read before the latest compute.
const PREVIOUS_NOTE: &str = "New figures were computed a moment ago and are being loaded: this \
     page shows the figures from before that compute. Reload in a few seconds.";

async fn render_answer(
    state: &AppState,
    filters: &Filters,
    wanted: &Wants,
    view: &View,
    content: Content,
    page: usize,
    label: &str,
) -> Result<Response, WebError> {
    let range = view.range.as_ref();
    let label = label.to_string();
    match wanted {
        Wants::Json => {
            let mut top = Map::new();
            top.insert("period".into(), json!(label));
            for (id, _, report, _) in &content.tables {
                top.insert(id.clone(), report.json(&label, MoneyJson::Decimal));
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
                let caption =
                    content.tables.iter().find(|(i, ..)| i == id).map_or("", |(_, c, ..)| c.as_str());
                let heading = [caption.to_string(), range_and_filters(&label, filters), as_of(range)];
                let bytes = report.table.xlsx(id, &heading)?;
                (XLSX_TYPE, format!("{stem}.xlsx"), bytes)
            } else {
                let csv = report.render(OutputFormat::Csv, &label);
                ("text/csv; charset=utf-8", format!("{stem}.csv"), csv.into_bytes())
            };
            Ok(download(body, content_type, &filename))
        }
        Wants::Html => {
            let computed = &view.computed;
            let query = filters.query();
            let page = ReportPage {
                title: content.title,
                active: content.active,
                ranged: content.ranged,
                label: if content.ranged { label.clone() } else { String::new() },
                periods: computed.iter().rev().map(|r| r.period.period.clone()).collect(),
                // A range of days shows its dates and "custom range" as the month; a month shows
                // empty dates, so picking another month is never overridden by stale ones.
                selected: if label.contains('/') { String::new() } else { label.clone() },
                from: label.split_once('/').map(|(from, _)| from.to_string()).unwrap_or_default(),
                to: label.split_once('/').map(|(_, to)| to.to_string()).unwrap_or_default(),
                presets: presets(computed, filters, &content.path, &label),
                groups: if content.active == "costs" {
                    let chosen = filters.group.clone().unwrap_or_else(|| "namespace".into());
                    let mut groups: Vec<(String, bool)> =
                        costs::GROUPS.iter().map(|g| (g.to_string(), *g == chosen)).collect();
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
                    .map(|(c, label)| {
                        (c.clone(), label.clone(), filters.cluster.as_deref() == Some(c.as_str()))
                    })
                    .collect(),
                providers: if content.account_filter && view.providers.len() > 1 {
                    view.providers
                        .iter()
                        .map(|id| {
                            let name = crate::sources::focus::provider_name(id).to_string();
                            (id.clone(), name, filters.provider.as_deref() == Some(id.as_str()))
                        })
                        .collect()
                } else {
                    Vec::new()
                },
                accounts: if content.account_filter && view.accounts.len() > 1 {
                    view.accounts
                        .iter()
                        .map(|(id, name)| {
                            let label = if name.is_empty() { id.clone() } else { format!("{id} ({name})") };
                            (id.clone(), label, filters.account.as_deref() == Some(id.as_str()))
                        })
                        .collect()
                } else {
                    Vec::new()
                },
                hidden: [
                    ("namespace", &filters.namespace),
                    ("workload", &filters.workload),
                    ("columns", &filters.columns),
                ]
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
                        let window = content.window.as_ref().filter(|w| &w.table == id);
                        let chosen = content.columns.iter().find(|(t, _)| t == id).map(|(_, c)| *c);
                        let at = TableAt { path: &content.path, filters, page, window, chosen };
                        let mut view = table_view(id, caption, &report.table, links, at);
                        view.folded = content.folded.contains(id);
                        view.stacked = content.stacked.contains(id);
                        view
                    })
                    .collect(),
                notes: content.notes,
                json_href: href(&content.path, &query, "format=json"),
                empty: range.is_none(),
                crumbs: content.crumbs,
                as_of: as_of(range),
                print_head: content.print_head,
            };
            Ok(Html(page.render()?).into_response())
        }
    }
}

/// The ranges people ask for most: this calendar month (so far) when it is billed, else the
/// newest billed month by its name with the word that this one is not billed yet; the month
/// before; the last three months; the year to date (each up to the newest billed month). Each
/// link keeps the grouping, cluster, account and sort.
fn presets(
    computed: &[Arc<Rollups>],
    filters: &Filters,
    path: &str,
    shown: &str,
) -> Vec<(String, String, bool)> {
    let Some(latest) = computed.last().and_then(|r| r.period.period.parse::<Period>().ok()) else {
        return Vec::new();
    };
    let day = |t: i64| chrono::DateTime::from_timestamp(t, 0).map(|d| d.format("%Y-%m-%d").to_string());
    let days = |from: Period| match (day(from.start()), day(latest.end())) {
        (Some(from), Some(to)) => Some(Range::label_of(&from, &to)),
        _ => None,
    };
    let january = (1..latest.month()).fold(latest, |p, _| p.previous());
    let today = Period::containing(chrono::Utc::now().timestamp());
    let billed = |p: Period| computed.iter().any(|r| r.period.period == p.to_string());
    let month_name = |p: Period| {
        chrono::NaiveDate::from_ymd_opt(p.year(), p.month(), 1)
            .map(|d| d.format("%B").to_string())
            .unwrap_or_default()
    };
    let (this, last) = if latest == today {
        ("This month (so far)".to_string(), "Last month".to_string())
    } else if latest == today.previous() {
        (
            format!("{} (last month; {} is not billed yet)", month_name(latest), month_name(today)),
            month_name(latest.previous()),
        )
    } else {
        (format!("{} {} (newest billed)", month_name(latest), latest.year()), month_name(latest.previous()))
    };
    let candidates = [
        (this, Some(latest.to_string())),
        (last, billed(latest.previous()).then(|| latest.previous().to_string())),
        ("Last 3 months".to_string(), days(latest.previous().previous())),
        ("Year to date".to_string(), days(january)),
    ];
    candidates
        .into_iter()
        .filter_map(|(name, range)| {
            let range = range?;
            // A drill-down names a namespace or workload of the month shown, which another range
            // may not have: a preset goes back to the grouping's top level.
            let group = filters.group.clone().filter(|g| g != "pod");
            let mut linked = Filters {
                period: None,
                from: None,
                to: None,
                format: None,
                table: None,
                namespace: None,
                workload: None,
                group,
                ..filters.clone()
            };
            match range.split_once('/') {
                Some((from, to)) => (linked.from, linked.to) = (Some(from.to_string()), Some(to.to_string())),
                None => linked.period = Some(range.clone()),
            }
            let current = range == shown;
            Some((name, href(path, &linked.query(), ""), current))
        })
        .collect()
}

/// Orders every table that has the `sort` column (carrying each row's drill-down link);
/// a `sort` no table has, or a `dir` that is neither `asc` nor `desc`, is a 400.
fn sort_tables(content: &mut Content, filters: &Filters) -> Result<(), WebError> {
    let Some((column, descending)) = sort_asked(filters)? else { return Ok(()) };
    let mut sorted = false;
    for (id, _, report, links) in &mut content.tables {
        if content.window.as_ref().is_some_and(|w| &w.table == id) {
            // Its page sorted every row before it kept the shown ones.
            sorted |= report.table.column(column).is_some();
            continue;
        }
        if let Some(order) = report.table.sort_by_column(column, descending) {
            let rows = order.len().min(links.len());
            let moved: Vec<Option<String>> = order.iter().map(|&i| links.get(i).cloned().flatten()).collect();
            links.splice(..rows, moved.into_iter().take(rows));
            sorted = true;
        }
    }
    if !sorted && !content.tables.is_empty() {
        let mut columns: Vec<String> = content
            .tables
            .iter()
            .flat_map(|(_, _, r, _)| r.table.columns.iter().map(|c| c.to_string()))
            .collect();
        columns.sort();
        columns.dedup();
        return Err(WebError::bad("sort", format!("no table on this page has a column {column:?}"), columns));
    }
    Ok(())
}

/// The range and the filters a table was drawn with, in words, for a download's heading.
fn range_and_filters(label: &str, filters: &Filters) -> String {
    let mut said = vec![match label.split_once('/') {
        Some(_) => format!("Days {}", human::range(label)),
        None => format!("Billing period {}", human::range(label)),
    }];
    for (name, value) in [
        ("grouped by", &filters.group),
        ("cluster", &filters.cluster),
        ("provider", &filters.provider),
        ("usage account", &filters.account),
        ("namespace", &filters.namespace),
        ("workload", &filters.workload),
    ] {
        if let Some(value) = given(value) {
            said.push(format!("{name} {value}"));
        }
    }
    if let Some(column) = given(&filters.sort) {
        let order = if given(&filters.dir) == Some("asc") { "ascending" } else { "descending" };
        said.push(format!("sorted by {column}, {order}"));
    }
    said.join("; ")
}

/// When the numbers shown were computed (the latest compute of the range's months), for a
/// download's heading and the printed page: empty without data.
fn as_of(range: Option<&RollupRange>) -> String {
    let latest = range.and_then(|r| r.parts.iter().map(|(rollups, _)| rollups.period.computed_at).max());
    latest
        .and_then(|at| chrono::DateTime::from_timestamp(at, 0))
        .map(|at| format!("Data as of {} (computed from the bill and metrics then)", human::minute(at)))
        .unwrap_or_default()
}

/// The column asked to sort by and whether largest (or Z) first, the default; a `dir` that is
/// neither `asc` nor `desc` is a 400.
pub(super) fn sort_asked(filters: &Filters) -> Result<Option<(&str, bool)>, WebError> {
    let Some(column) = given(&filters.sort) else { return Ok(None) };
    match given(&filters.dir) {
        None | Some("desc") => Ok(Some((column, true))),
        Some("asc") => Ok(Some((column, false))),
        Some(other) => Err(WebError::bad(
            "dir",
            format!("{other:?} is not asc or desc"),
            vec!["asc".into(), "desc".into()],
        )),
    }
}

/// The page of the long tables asked for (1 when none is): a `page` that is not a whole number
/// from 1 up is a 400. One past a table's last page shows its last page, so a link shared
/// between users who see different numbers of rows (a manager's fleet view folds other
/// clients into one line) still answers.
pub(super) fn page_asked(filters: &Filters) -> Result<usize, WebError> {
    let Some(asked) = given(&filters.page) else { return Ok(1) };
    match asked.parse::<usize>() {
        Ok(page) if page >= 1 => Ok(page),
        _ => Err(WebError::bad(
            "page",
            format!("{asked:?} is not a page: pages are numbered from 1, {PAGE_ROWS} rows each"),
            vec!["1".into()],
        )),
    }
}

/// The pager of a table of `rows` rows on page `page` (none when it fits on one page; a page
/// past its last shows the last).
fn pager(rows: usize, page: usize, path: &str, query: &str) -> (std::ops::Range<usize>, Option<Pager>) {
    let pages = rows.div_ceil(PAGE_ROWS);
    if pages <= 1 {
        return (0..rows, None);
    }
    let page = page.min(pages);
    let shown = (page - 1) * PAGE_ROWS..(page * PAGE_ROWS).min(rows);
    let link = |to: usize| (to != page).then(|| href(path, query, &format!("page={to}")));
    let count = |n: usize| crate::report::table::thousands(n as f64, 0);
    let pager = Pager {
        shown: format!("Rows {}–{} of {}", count(shown.start + 1), count(shown.end), count(rows)),
        first: link(1),
        previous: link(page.saturating_sub(1).max(1)),
        next: link((page + 1).min(pages)),
        last: link(pages),
    };
    (shown, Some(pager))
}

/// Where a table is shown: the page's path and filters, the page of its rows asked for, and
/// its window when the page kept only the rows it shows.
struct TableAt<'a> {
    path: &'a str,
    filters: &'a Filters,
    page: usize,
    window: Option<&'a Window>,
    /// The columns shown by default, when the table has a chosen few.
    chosen: Option<&'static [&'static str]>,
}

fn table_view(id: &str, caption: &str, table: &Table, links: &[Option<String>], at: TableAt) -> TableView {
    let TableAt { path, filters, page, window, chosen } = at;
    let query = filters.query();
    let query = query.as_str();
    let (shown, pager) = match window {
        Some(w) => {
            let (_, pager) = pager(w.total, w.first / PAGE_ROWS + 1, path, query);
            (0..table.rows.len(), pager)
        }
        None => pager(table.rows.len(), page, path, query),
    };
    // The columns shown: all, or the table's chosen few (its first column always).
    let all = given(&filters.columns) == Some("all");
    let keep: Vec<bool> = table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| all || i == 0 || chosen.is_none_or(|few| few.contains(c)))
        .collect();
    let pick = |cells: Vec<(String, bool)>| -> Vec<(String, bool)> {
        cells.into_iter().zip(&keep).filter(|(_, k)| **k).map(|(c, _)| c).collect()
    };
    let rows: Vec<Vec<(String, bool)>> = table.display_rows(shown.clone()).into_iter().map(pick).collect();
    // The shown rows' links, then the totals' (a workload's total links back to its namespace).
    let totals = links.iter().skip(table.rows.len());
    let links = links.iter().skip(shown.start).take(shown.len()).chain(totals).cloned();
    let unsorted = Filters { sort: None, dir: None, ..filters.clone() }.query();
    let current = given(&filters.sort);
    let descending = given(&filters.dir) != Some("asc");
    let hidden = keep.iter().filter(|k| !**k).count();
    let more = match (chosen, all) {
        (Some(_), false) if hidden > 0 => Some((
            format!("All {} columns", table.columns.len()),
            href(path, &Filters { columns: Some("all".into()), page: None, ..filters.clone() }.query(), ""),
        )),
        (Some(few), true) if few.len() + 1 < table.columns.len() => Some((
            "Fewer columns".to_string(),
            href(path, &Filters { columns: None, page: None, ..filters.clone() }.query(), ""),
        )),
        _ => None,
    };
    let columns: Vec<&str> = table.columns.iter().zip(&keep).filter(|(_, k)| **k).map(|(c, _)| *c).collect();
    TableView {
        id: id.into(),
        caption: caption.into(),
        headings: {
            let numeric: Vec<bool> =
                rows.first().map(|r| r.iter().map(|(_, n)| *n).collect()).unwrap_or_default();
            table
                .headings()
                .into_iter()
                .zip(&table.columns)
                .zip(&keep)
                .filter(|(_, k)| **k)
                .map(|(h, _)| h)
                .enumerate()
                .map(|(i, (h, column))| {
                    let numeric = numeric.get(i).copied().unwrap_or(false);
                    let (aria, next) = match current {
                        Some(c) if c == *column && descending => ("descending", "asc"),
                        Some(c) if c == *column => ("ascending", "desc"),
                        // Numbers sort largest first, text from A.
                        _ => ("none", if numeric { "desc" } else { "asc" }),
                    };
                    let link = href(path, &unsorted, &format!("sort={column}&dir={next}"));
                    (h, numeric, link, aria)
                })
                .collect()
        },
        first_total: rows.len() - table.totals.len().min(rows.len()),
        badges: columns.iter().map(|c| ["state", "status", "severity"].contains(c)).collect(),
        codes: columns.iter().map(|c| ["region", "instance_type"].contains(c)).collect(),
        rows: rows.into_iter().zip(links.chain(std::iter::repeat(None))).collect(),
        csv_href: href(path, query, &format!("format=csv&table={id}")),
        xlsx_href: href(path, query, &format!("format=xlsx&table={id}")),
        pager,
        more,
        folded: false,
        stacked: false,
    }
}

pub(super) fn usd(nanos: i64) -> String {
    crate::money::format_usd_nanos(nanos)
}

pub(super) fn percent(value: Option<f64>) -> String {
    value.map(|v| format!("{:.1} %", v * 100.0)).unwrap_or_else(|| "n/a".into())
}

/// The query naming a range: `period=2026-10`, or `from=…&to=…` for a range of days.
pub(super) fn range_query(range: &RollupRange) -> String {
    match range.label.split_once('/') {
        Some((from, to)) => format!("from={from}&to={to}"),
        None => format!("period={}", url_escape(&range.label)),
    }
}

pub(super) fn money(nanos: i64) -> Cell {
    Cell::Usd(Some(Nanos(nanos)))
}

/// The dollars of a money or rate cell (none for an empty, missing or non-money cell).
fn amount_of(cell: Option<&Cell>) -> Option<f64> {
    match cell {
        Some(Cell::Usd(value)) => value.map(Nanos::usd_f64),
        Some(Cell::Rate(value)) => *value,
        _ => None,
    }
}

fn text_of(cell: &Cell) -> String {
    match cell {
        Cell::Text(t) => t.clone(),
        _ => String::new(),
    }
}

/// A file to save: its bytes, type and name. The name is made safe for the header (an
/// issued invoice's number never changes, so one numbered under an older, laxer format must
/// still download): anything but letters, digits, `-`, `_` and `.` becomes `_`.
pub(super) fn download(bytes: Vec<u8>, content_type: &str, filename: &str) -> Response {
    let filename: String = filename
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' })
        .collect();
    (
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{filename}\"")),
        ],
        bytes,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_download_name_with_line_breaks_or_quotes_still_makes_a_valid_header() {
        let response = super::download(Vec::new(), "text/csv", "NW\r\n\"7\".csv");
        let disposition = response.headers()[axum::http::header::CONTENT_DISPOSITION].to_str().unwrap();
        assert_eq!(disposition, "attachment; filename=\"NW___7_.csv\"");
    }

    #[test]
    fn url_escape_keeps_unreserved_bytes_and_percent_encodes_the_rest() {
        // Space 0x20, slash 0x2F, ü is 0xC3 0xBC in UTF-8, ampersand 0x26.
        assert_eq!(super::url_escape("a b/ü&x-1_2.3~"), "a%20b%2F%C3%BC%26x-1_2.3~");
    }
}
