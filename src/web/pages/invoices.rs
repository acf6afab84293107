//! Invoices: the register (`/invoices`), a client's draft (`/invoices/draft`), an issued
//! document (`/invoices/NUMBER`) with its downloads (`/invoices/NUMBER/pdf|csv|xlsx|json`),
//! and the POST forms that issue, adjust and void. Every document is shown only to those
//! whose scope allows its client; anyone else is told there is no such document.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::super::error::accepts_json;
use super::super::{AppState, Viewer, WebError};
use super::{XLSX_TYPE, download, url_escape};
use crate::auth::{AuditEntry, Role};
use crate::invoice::ledger::{self, DraftView, InvoiceError};
use crate::invoice::{self, Invoice, Kind, Status};
use crate::period::Period;
use crate::web::filters;

/// The register's filters, and the draft's client and period.
#[derive(Debug, Default, Deserialize)]
pub struct InvoiceQuery {
    client: Option<String>,
    period: Option<String>,
    status: Option<String>,
    format: Option<String>,
    /// Set by the redirect after an action: the page says what was done.
    done: Option<String>,
}

struct RegisterRow {
    number: String,
    kind: &'static str,
    refers_to: String,
    client: String,
    period: String,
    status: &'static str,
    issued_at: String,
    due_at: String,
    total: String,
}

#[derive(Template)]
#[template(path = "invoices.html")]
struct RegisterPage {
    active: &'static str,
    client_choices: Vec<(String, bool)>,
    period_choices: Vec<(String, bool)>,
    status_choices: Vec<(&'static str, bool)>,
    rows: Vec<RegisterRow>,
    filtered: bool,
    csv_href: String,
    json_href: String,
    may_draft: bool,
    draft_clients: Vec<String>,
    draft_periods: Vec<String>,
    /// The latest computed month, and each client with a budget: client, budget, actual,
    /// forecast, over.
    budget_period: String,
    budgets: Vec<(String, String, String, String, bool)>,
    /// What a batch just issued, in words.
    notice: String,
    /// Whether the viewer may issue (the month's batch form), and its CSRF token.
    may_issue: bool,
    csrf: String,
    /// The terms of each client the viewer may invoice, in force for the latest computed
    /// month: client, markup, monthly budget (the form to change them beside).
    terms: Vec<(String, String, String)>,
}

/// A confirmation before an action that cannot be undone: what will happen, the numbers it
/// will take, who will see it.
#[derive(Template)]
#[template(path = "confirm.html")]
struct ConfirmPage {
    active: &'static str,
    heading: String,
    error: String,
    paragraphs: Vec<String>,
    rows_caption: String,
    /// Client, number it takes, total.
    rows: Vec<(String, String, String)>,
    rows_total: String,
    skipped: Vec<(String, String)>,
    /// Where the confirmed form posts; empty when there is nothing to confirm.
    action: String,
    fields: Vec<(&'static str, String)>,
    ask_reason: bool,
    danger: bool,
    button: String,
    cancel: String,
    csrf: String,
}

impl ConfirmPage {
    fn new(viewer: &Viewer, heading: String, action: String, button: String, cancel: String) -> ConfirmPage {
        ConfirmPage {
            active: "invoices",
            heading,
            error: String::new(),
            paragraphs: Vec::new(),
            rows_caption: String::new(),
            rows: Vec::new(),
            rows_total: String::new(),
            skipped: Vec::new(),
            action,
            fields: Vec::new(),
            ask_reason: false,
            danger: false,
            button,
            cancel,
            csrf: viewer.csrf.clone(),
        }
    }

    fn answer(self, status: StatusCode) -> Result<Response, WebError> {
        Ok((status, Html(self.render()?)).into_response())
    }
}

/// A POST form under a document.
struct Action {
    path: String,
    label: &'static str,
    fields: Vec<(&'static str, String)>,
    reason: bool,
}

#[derive(Template)]
#[template(path = "invoice.html")]
struct DocumentPage {
    active: &'static str,
    heading: String,
    doc: Invoice,
    message: String,
    /// What was just done (after an action), in words.
    notice: String,
    /// Description, quantity, unit, unit price, amount.
    lines: Vec<(String, String, String, String, String)>,
    totals: Vec<(String, String)>,
    /// Label, link, whether it downloads a file.
    downloads: Vec<(&'static str, String, bool)>,
    related: Vec<(String, String)>,
    /// Charge now, standing, difference, note kind, the invoice it refers to.
    difference: Option<(String, String, String, String, String)>,
    actions: Vec<Action>,
    csrf: String,
    explanation: String,
    /// The period's draft, from an issued invoice (to see whether it was restated since).
    draft_href: String,
    /// The pod lines by workload: namespace / workload, class, GPU-hours, amount.
    detail: Vec<(String, String, String, String)>,
    /// The client's billing details to edit (a draft, for those who may issue), with the tax
    /// rate as a percentage.
    billing: Option<(invoice::BillingDetails, String)>,
}

fn invoice_error(error: InvoiceError) -> WebError {
    match error {
        InvoiceError::NotFound(message) => WebError::not_found(message),
        InvoiceError::Refused(message) => WebError::bad("invoice", message, Vec::new()),
        InvoiceError::Store(error) => WebError::Store(error),
    }
}

/// The answer to a document or client outside the viewer's scope: the same as for one that
/// does not exist.
fn unseen(what: &str) -> WebError {
    WebError::not_found(format!("No {what} by that name among the clients your account sees."))
}

/// Whether the viewer may issue, adjust and void invoices (of `client`, when given):
/// finance and administrators, and managers for the clients they see when an administrator
/// lets them (`/admin`, "Who may issue invoices").
async fn may_issue(state: &AppState, viewer: &Viewer, client: Option<&str>) -> Result<bool, WebError> {
    let allowed = match viewer.role {
        Role::Admin | Role::Finance => true,
        Role::Manager => state.store.issuers().await?.allow(viewer.role),
        _ => false,
    };
    Ok(allowed && client.is_none_or(|c| viewer.scope.allows(c)))
}

/// `GET /invoices`: the register, filtered; JSON and CSV twins.
pub async fn register(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    Query(query): Query<InvoiceQuery>,
    headers: HeaderMap,
) -> Result<Response, WebError> {
    let given = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
    let (client, period, status) = (given(&query.client), given(&query.period), given(&query.status));
    let statuses = [Status::Issued, Status::Credited, Status::Superseded].map(Status::as_str);
    if let Some(status) = &status
        && !statuses.contains(&status.as_str())
    {
        return Err(WebError::bad(
            "status",
            format!("{status:?} is not a status"),
            statuses.map(String::from).to_vec(),
        ));
    }
    if let Some(period) = &period {
        period.parse::<Period>().map_err(|e| WebError::bad("period", e.to_string(), Vec::new()))?;
    }
    let all: Vec<Invoice> = state
        .store
        .documents(None, None)
        .await?
        .into_iter()
        .filter(|d| viewer.scope.allows(&d.client))
        .collect();
    let documents: Vec<Invoice> = all
        .iter()
        .filter(|d| client.as_ref().is_none_or(|c| &d.client == c))
        .filter(|d| period.as_ref().is_none_or(|p| &d.period == p))
        .filter(|d| status.as_ref().is_none_or(|s| d.status.as_str() == s))
        .cloned()
        .collect();
    let format = query.format.as_deref().unwrap_or(if accepts_json(&headers) { "json" } else { "html" });
    match format {
        "json" => return Ok(axum::Json(&documents).into_response()),
        "csv" => {
            let table = invoice::register_table(&documents);
            let text = table.render(crate::report::OutputFormat::Csv, "", Default::default());
            return Ok(download(text.into_bytes(), "text/csv; charset=utf-8", "invoices.csv"));
        }
        "html" => {}
        other => {
            return Err(WebError::bad(
                "format",
                format!("{other:?} is not a format"),
                vec!["json".into(), "csv".into()],
            ));
        }
    }
    let mut clients: Vec<String> = all.iter().map(|d| d.client.clone()).collect();
    let computed = state.cache.all(state.store.as_ref(), &viewer.scope).await?;
    let mut draft_clients: Vec<String> = computed
        .iter()
        .flat_map(|r| r.clients.iter().map(|c| c.client.clone()))
        .filter(|c| invoice::invoiceable(c) && viewer.scope.allows(c))
        .collect();
    draft_clients.sort();
    draft_clients.dedup();
    clients.extend(draft_clients.iter().cloned());
    clients.sort();
    clients.dedup();
    let mut periods: Vec<String> = all.iter().map(|d| d.period.clone()).collect();
    let draft_periods: Vec<String> = computed.iter().rev().map(|r| r.period.period.clone()).collect();
    periods.extend(draft_periods.iter().cloned());
    periods.sort_by(|a, b| b.cmp(a));
    periods.dedup();
    let (budget_period, budgets) = budget_rows(&state, &viewer, computed.last()).await?;
    let notice = match query.done.as_deref() {
        Some(done) => match done.strip_prefix("terms:") {
            Some(who) if viewer.scope.allows(who) => format!(
                "{who}'s terms are saved, and the months they apply to are computed again with them; \
                 the audit log has the change."
            ),
            Some(_) => String::new(),
            None => batch_notice(&all, done),
        },
        None => String::new(),
    };
    let may_issue = may_issue(&state, &viewer, None).await?;
    let terms = match (may_issue, computed.last().and_then(|r| r.period.period.parse::<Period>().ok())) {
        (true, Some(latest)) => {
            let history = state.store.settings().await?;
            let mut rows = Vec::new();
            for client in &draft_clients {
                let terms = history
                    .terms_in_force(client, latest)
                    .map_err(|e| WebError::bad("client", e, Vec::new()))?;
                let budget =
                    history.budget(client, latest).map_err(|e| WebError::bad("client", e, Vec::new()))?;
                rows.push((
                    client.clone(),
                    terms.markup_percent(),
                    budget.map_or("none".into(), |b| b.usd()),
                ));
            }
            rows
        }
        _ => Vec::new(),
    };
    let chosen = |choices: Vec<String>, value: &Option<String>| {
        choices.into_iter().map(|c| (c.clone(), value.as_ref() == Some(&c))).collect()
    };
    let rows = documents
        .iter()
        .map(|d| RegisterRow {
            number: d.number.clone(),
            kind: d.kind.as_str(),
            refers_to: d.refers_to.clone().unwrap_or_default(),
            client: d.client.clone(),
            period: d.period.clone(),
            status: d.status.as_str(),
            issued_at: d.issued_at.clone().unwrap_or_default(),
            due_at: d.due_at.clone().unwrap_or_default(),
            total: d.total.money(&d.currency),
        })
        .collect();
    let query_string = [("client", &client), ("period", &period), ("status", &status)]
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}&", url_escape(v))))
        .collect::<String>();
    let page = RegisterPage {
        active: "invoices",
        client_choices: chosen(clients, &client),
        period_choices: chosen(periods, &period),
        status_choices: statuses.iter().map(|s| (*s, status.as_deref() == Some(*s))).collect(),
        rows,
        filtered: client.is_some() || period.is_some() || status.is_some(),
        csv_href: format!("/invoices?{query_string}format=csv"),
        json_href: format!("/invoices?{query_string}format=json"),
        may_draft: viewer.role != Role::Client,
        draft_clients,
        draft_periods,
        budget_period,
        budgets,
        notice,
        may_issue,
        csrf: viewer.csrf.clone(),
        terms,
    };
    Ok(Html(page.render()?).into_response())
}

/// "Issued 4 invoices of 2026-10, GL-2026-0005 to GL-2026-0008: $12,345.67 in all." for
/// `done` = `FIRST,LAST`, from the documents the viewer sees (nothing for numbers it does not).
fn batch_notice(all: &[Invoice], done: &str) -> String {
    let Some((first, last)) = done.split_once(',') else { return String::new() };
    let position = |number: &str| all.iter().position(|d| d.number == number);
    let (Some(from), Some(to)) = (position(first), position(last)) else { return String::new() };
    let Some(batch) = all.get(from..=to) else { return String::new() };
    let total = invoice::totals_in_words(batch.iter().map(|d| (d.currency.as_str(), d.total)));
    let periods: std::collections::BTreeSet<&str> = batch.iter().map(|d| d.period.as_str()).collect();
    let periods: Vec<&str> = periods.into_iter().collect();
    format!(
        "Issued {} invoice{} of {}, {first} to {last}: {} in all. Each client's users see theirs now.",
        batch.len(),
        if batch.len() == 1 { "" } else { "s" },
        periods.join(", "),
        total
    )
}

/// Each client the viewer sees that has a budget for the latest computed month, against it.
async fn budget_rows(
    state: &AppState,
    viewer: &Viewer,
    latest: Option<&std::sync::Arc<crate::store::Rollups>>,
) -> Result<(String, Vec<(String, String, String, String, bool)>), WebError> {
    let Some(rollups) = latest else { return Ok((String::new(), Vec::new())) };
    let Ok(period) = rollups.period.period.parse::<Period>() else { return Ok((String::new(), Vec::new())) };
    let history = state.store.settings().await?;
    let mut rows = Vec::new();
    for client in rollups.clients.iter().map(|c| &c.client).filter(|c| viewer.scope.allows(c)) {
        let budget = history.budget(client, period).map_err(|e| WebError::bad("client", e, Vec::new()))?;
        if let Some(check) = budget.and_then(|b| invoice::BudgetCheck::new(rollups, client, b)) {
            let days =
                format!("{} ({} of {} days)", check.actual.usd(), check.days_covered, check.days_in_month);
            rows.push((client.clone(), check.budget.usd(), days, check.forecast.usd(), check.over()));
        }
    }
    Ok((period.to_string(), rows))
}

/// `GET /invoices/draft?client=C&period=P`: the draft, what stands, and the forms to issue
/// or adjust (finance and administrators).
pub async fn draft(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    Query(query): Query<InvoiceQuery>,
    headers: HeaderMap,
) -> Result<Response, WebError> {
    let client = query
        .client
        .clone()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| WebError::bad("client", "name the client to draft an invoice for", Vec::new()))?;
    if !viewer.scope.allows(&client) {
        return Err(unseen("client"));
    }
    let period: Period =
        query.period.as_deref().unwrap_or_default().parse().map_err(
            |e: crate::period::PeriodParseError| WebError::bad("period", e.to_string(), Vec::new()),
        )?;
    let view = ledger::draft_view(state.store.as_ref(), &client, period).await.map_err(invoice_error)?;
    if query.format.as_deref() == Some("json") || accepts_json(&headers) {
        return Ok(axum::Json(view.json()).into_response());
    }
    if query.format.as_deref() == Some("pdf") {
        // Marked DRAFT in its title, number and notes: never mistaken for an invoice.
        let bytes = invoice::pdf::render(&view.draft).map_err(|e| WebError::bad("format", e, Vec::new()))?;
        let entry =
            AuditEntry::new(&actor(&viewer), "", "invoice.download", &format!("draft {client} {period} pdf"));
        state.store.audit(&entry).await?;
        return Ok(download(bytes, "application/pdf", &format!("draft-{client}-{period}.pdf")));
    }
    let issuer = may_issue(&state, &viewer, Some(&client)).await?;
    let mut page = draft_page(&viewer, issuer, &view, "");
    if query.done.is_some() {
        page.notice = format!(
            "Billing details of {client} saved: the draft shows them, and so will the invoices issued from now on."
        );
    }
    Ok(Html(page.render()?).into_response())
}

fn draft_page(viewer: &Viewer, issuer: bool, view: &DraftView, message: &str) -> DocumentPage {
    let draft = &view.draft;
    let mut page = document_page(viewer, draft.clone(), &view.documents, message);
    page.heading = format!("Draft invoice for {}", draft.client);
    let fields = vec![("client", draft.client.clone()), ("period", draft.period.clone())];
    let query = format!("client={}&period={}", url_escape(&draft.client), draft.period);
    page.downloads = vec![
        ("PDF (draft)", format!("/invoices/draft?{query}&format=pdf"), true),
        ("JSON", format!("/invoices/draft?{query}&format=json"), false),
    ];
    if issuer {
        page.billing = Some((draft.buyer.clone(), format!("{}", draft.buyer.tax_ppm as f64 / 10_000.0)));
    }
    match (&view.standing, &view.delta) {
        (None, _) if issuer => {
            page.actions.push(Action {
                path: "/invoices/issue".into(),
                label: "Issue this invoice…",
                fields,
                reason: false,
            });
            page.explanation = "Issuing asks you to confirm, then takes the next number and freezes the invoice and its PDF: later deliveries of the bill or changed settings never change it.".into();
        }
        (None, _) => {
            page.explanation = "Finance or an administrator issues invoices (an administrator can let managers issue for their clients).".into()
        }
        (Some(standing), delta) => {
            if let Some(delta) = delta {
                page.difference = Some(difference(view, standing, delta));
                if issuer {
                    let label = "Issue the difference as a note…";
                    page.actions.push(Action {
                        path: "/invoices/adjust".into(),
                        label,
                        fields,
                        reason: false,
                    });
                }
            }
            page.explanation = format!(
                "Invoice {} stands for {} in {}{}.",
                standing.invoice.number,
                draft.client,
                draft.period,
                if view.delta.is_none() { " and matches this draft" } else { "" }
            );
        }
    }
    page
}

fn difference(
    view: &DraftView,
    standing: &invoice::Standing,
    delta: &Invoice,
) -> (String, String, String, String, String) {
    (
        view.draft.total.money(&view.draft.currency),
        standing.total().money(&standing.invoice.currency),
        delta.total.money(&delta.currency),
        if delta.kind == Kind::CreditNote { "credit note" } else { "debit note" }.into(),
        standing.invoice.number.clone(),
    )
}

/// The page of a document (draft or issued), without actions.
fn document_page(viewer: &Viewer, doc: Invoice, family: &[Invoice], message: &str) -> DocumentPage {
    let lines = doc
        .lines
        .iter()
        .map(|l| {
            (
                l.description.clone(),
                l.quantity.map(|q| crate::report::table::thousands(q, 2)).unwrap_or_default(),
                l.unit.clone().unwrap_or_default(),
                l.unit_price.clone().unwrap_or_default(),
                l.amount.money(&doc.currency),
            )
        })
        .collect();
    // A markup line stands only on documents issued before it was folded into the prices.
    let totals = [
        ("Subtotal".to_string(), doc.subtotal),
        ("Markup".to_string(), doc.markup),
        ("Tax".to_string(), doc.tax),
        (format!("Total ({})", doc.currency), doc.total),
    ]
    .into_iter()
    .filter(|(label, amount)| label != "Markup" || amount.0 != 0)
    .map(|(label, amount)| (label, amount.money(&doc.currency)))
    .collect();
    let related = family
        .iter()
        .filter(|d| d.number != doc.number)
        .map(|d| {
            (
                d.number.clone(),
                format!(
                    "{}, {}, {}",
                    d.kind.title().to_lowercase(),
                    d.status.as_str(),
                    d.total.money(&d.currency)
                ),
            )
        })
        .collect();
    let downloads = ["pdf", "csv", "xlsx", "json"]
        .into_iter()
        .zip(["PDF", "CSV", "XLSX", "JSON"])
        .map(|(format, label)| {
            (label, format!("/invoices/{}/{format}", url_escape(&doc.number)), format != "json")
        })
        .collect();
    let detail = doc
        .detail
        .iter()
        .map(|r| {
            (
                format!("{} / {}", r.namespace, r.workload),
                r.workload_class.clone(),
                format!("{:.2}", r.gpu_hours),
                r.amount.money(&doc.currency),
            )
        })
        .collect();
    DocumentPage {
        active: "invoices",
        heading: format!("{} {}", doc.kind.title(), doc.number),
        doc,
        message: message.to_string(),
        notice: String::new(),
        lines,
        totals,
        downloads,
        related,
        difference: None,
        actions: Vec::new(),
        csrf: viewer.csrf.clone(),
        explanation: String::new(),
        draft_href: String::new(),
        detail,
        billing: None,
    }
}

/// An issued document the viewer may see, or the same 404 as for none.
async fn visible(state: &AppState, viewer: &Viewer, number: &str) -> Result<Invoice, WebError> {
    match state.store.document(number).await? {
        Some(document) if viewer.scope.allows(&document.client) => Ok(document),
        _ => Err(unseen("invoice or note")),
    }
}

/// `GET /invoices/NUMBER`: the document, its downloads, its family and (finance) the void form.
pub async fn document(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    Path(number): Path<String>,
    Query(query): Query<InvoiceQuery>,
    headers: HeaderMap,
) -> Result<Response, WebError> {
    let doc = visible(&state, &viewer, &number).await?;
    if query.format.as_deref() == Some("json") || accepts_json(&headers) {
        return Ok(axum::Json(doc).into_response());
    }
    let family = state.store.documents(Some(&doc.client), Some(&doc.period)).await?;
    let mut page = document_page(&viewer, doc.clone(), &family, "");
    if query.done.is_some() {
        page.notice = done_notice(&doc);
    }
    let standing = invoice::Standing::find(&family);
    if doc.kind == Kind::Invoice && standing.as_ref().is_some_and(|s| s.invoice.number == doc.number) {
        if may_issue(&state, &viewer, Some(&doc.client)).await? {
            page.actions.push(Action {
                path: format!("/invoices/{}/credit", url_escape(&doc.number)),
                label: "Void with a credit note…",
                fields: Vec::new(),
                reason: true,
            });
        }
        if viewer.role != Role::Client {
            page.draft_href =
                format!("/invoices/draft?client={}&period={}", url_escape(&doc.client), doc.period);
        }
    }
    Ok(Html(page.render()?).into_response())
}

/// `GET /invoices/NUMBER/pdf|csv|xlsx|json`: the stored PDF bytes, or the lines; audited.
pub async fn export(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    Path((number, format)): Path<(String, String)>,
) -> Result<Response, WebError> {
    let doc = visible(&state, &viewer, &number).await?;
    let file = |extension: &str| format!("{}.{extension}", doc.number);
    let response = match format.as_str() {
        "pdf" => {
            let bytes = state.store.document_pdf(&number).await?.ok_or_else(|| unseen("invoice or note"))?;
            download(bytes, "application/pdf", &file("pdf"))
        }
        "csv" => download(invoice::csv(&doc).into_bytes(), "text/csv; charset=utf-8", &file("csv")),
        "xlsx" => download(doc.xlsx()?, XLSX_TYPE, &file("xlsx")),
        "json" => axum::Json(&doc).into_response(),
        other => {
            return Err(WebError::bad(
                "format",
                format!("{other:?} is not a download"),
                ["pdf", "csv", "xlsx", "json"].map(String::from).to_vec(),
            ));
        }
    };
    let who = if viewer.name.is_empty() { "(sign-in off)" } else { &viewer.name };
    let entry = AuditEntry::new(who, "", "invoice.download", &format!("{} {format}", doc.number));
    state.store.audit(&entry).await?;
    Ok(response)
}

/// What an action just issued, in words, on the document's page.
fn done_notice(doc: &Invoice) -> String {
    let refers = doc.refers_to.as_deref().unwrap_or("");
    match doc.kind {
        Kind::Invoice => format!(
            "Invoice {} issued to {} for {}: {}, due {}. {}'s users see it now.",
            doc.number,
            doc.client,
            doc.period,
            doc.total.money(&doc.currency),
            doc.due_at.as_deref().unwrap_or("on receipt"),
            doc.client
        ),
        Kind::CreditNote if doc.full_credit => {
            format!(
                "Credit note {} issued: invoice {refers} is voided ({}).",
                doc.number,
                doc.total.money(&doc.currency)
            )
        }
        kind => format!(
            "{} {} issued on invoice {refers}: {}.",
            kind.title(),
            doc.number,
            doc.total.money(&doc.currency)
        ),
    }
}

#[derive(Debug, Deserialize)]
pub struct IssueForm {
    client: String,
    period: String,
    /// `yes` once the user has seen what will happen; without it the answer asks.
    #[serde(default)]
    confirm: String,
}

#[derive(Debug, Deserialize)]
pub struct CreditForm {
    #[serde(default)]
    reason: String,
    #[serde(default)]
    confirm: String,
}

#[derive(Debug, Deserialize)]
pub struct BillingForm {
    client: String,
    period: String,
    #[serde(default)]
    legal_name: String,
    #[serde(default)]
    address: String,
    #[serde(default)]
    tax_id: String,
    #[serde(default)]
    po_number: String,
    #[serde(default)]
    payment_terms_days: String,
    #[serde(default)]
    tax_percent: String,
    /// Absent from older forms: the currency stays.
    #[serde(default)]
    currency: Option<String>,
}

/// `POST /invoices/billing`: a client's billing details (legal name, address, tax id, PO
/// number, payment terms, tax rate), by those who may issue its invoices; audited. Issued
/// documents keep the details they were issued with.
pub async fn billing(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    axum::Form(form): axum::Form<BillingForm>,
) -> Result<Response, WebError> {
    check_issuer(&state, &viewer, Some(&form.client)).await?;
    let period = form_period(&form.period)?;
    let store = state.store.as_ref();
    let mut details = store.billing_details().await?.remove(&form.client).unwrap_or_default();
    let number = |text: &str, field: &'static str| -> Result<f64, WebError> {
        text.trim()
            .parse()
            .map_err(|_| WebError::bad(field, format!("{:?} is not a number", text.trim()), Vec::new()))
    };
    let days = number(&form.payment_terms_days, "payment_terms_days")?;
    let percent = number(&form.tax_percent, "tax_percent")?;
    let days = invoice::BillingDetails::terms_days(days as i64)
        .ok()
        .filter(|_| days.fract() == 0.0)
        .ok_or_else(|| WebError::bad("payment_terms_days", "payment terms are 0 to 365 days", Vec::new()))?;
    let text = |value: &str| value.replace("\r\n", "\n").trim().to_string();
    details.legal_name = text(&form.legal_name);
    details.address = text(&form.address);
    details.tax_id = text(&form.tax_id);
    details.po_number = text(&form.po_number);
    details.payment_terms_days = days;
    details.tax_ppm = invoice::BillingDetails::tax_ppm_from_percent(percent)
        .map_err(|e| WebError::bad("tax_percent", e, Vec::new()))?;
    if let Some(currency) = &form.currency {
        details.currency = invoice::BillingDetails::currency_code(currency)
            .map_err(|e| WebError::bad("currency", e, Vec::new()))?;
    }
    details.check().map_err(|(field, e)| WebError::bad(field, e, Vec::new()))?;
    store.set_billing_details(&form.client, &details, chrono::Utc::now().timestamp()).await?;
    let detail = format!(
        "{}: legal name {:?}, PO {:?}, terms {} days, tax {} %, currency {}",
        form.client, details.legal_name, details.po_number, days, percent, details.currency
    );
    store.audit(&AuditEntry::new(&actor(&viewer), "", "invoice.billing", &detail)).await?;
    let to = format!("/invoices/draft?client={}&period={period}&done=billing", url_escape(&form.client));
    Ok(Redirect::to(&to).into_response())
}

#[derive(Debug, Deserialize)]
pub struct InvoicingForm {
    issuers: String,
    #[serde(default)]
    seller_name: String,
    #[serde(default)]
    seller_address: String,
    #[serde(default)]
    seller_tax_id: String,
    #[serde(default)]
    seller_email: String,
    #[serde(default)]
    number_format: String,
}

/// `POST /admin/invoicing` (administrators): who may issue invoices, and the seller's details
/// and number format; audited with what changed.
pub async fn settings(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    axum::Form(form): axum::Form<InvoicingForm>,
) -> Result<Response, WebError> {
    let issuers = crate::domain::invoices::Issuers::parse(&form.issuers).map_err(|e| {
        WebError::bad(
            "issuers",
            e,
            crate::domain::invoices::Issuers::ALL.map(|i| i.as_str().to_string()).to_vec(),
        )
    })?;
    let store = state.store.as_ref();
    let before = (store.issuers().await?, store.seller().await?);
    let number_format = form.number_format.trim().to_string();
    invoice::format_number(&number_format, 1, 2026)
        .map_err(|e| WebError::bad("number_format", e, Vec::new()))?;
    let line = |text: &str| text.replace("\r\n", "\n").trim().to_string();
    let seller = invoice::Seller {
        name: line(&form.seller_name),
        address: line(&form.seller_address),
        tax_id: line(&form.seller_tax_id),
        email: line(&form.seller_email),
        number_format,
    };
    let mut changed = Vec::new();
    if before.0 != issuers {
        changed.push(format!("who may issue: {} → {}", before.0.as_str(), issuers.as_str()));
        store.set_issuers(issuers).await?;
    }
    if before.1 != seller {
        changed.push(format!("seller: {:?}, number format {}", seller.name, seller.number_format));
        store.set_seller(&seller).await?;
    }
    if !changed.is_empty() {
        store.audit(&AuditEntry::new(&actor(&viewer), "", "settings.invoicing", &changed.join("; "))).await?;
    }
    Ok(Redirect::to("/admin?done=invoicing#invoicing").into_response())
}

#[derive(Debug, Deserialize)]
pub struct MonthForm {
    period: String,
    /// The clients the confirmation listed, comma separated (client names hold no comma).
    #[serde(default)]
    clients: String,
    #[serde(default)]
    confirm: String,
}

/// The viewer may issue (for `client`, when given), or the answer saying why not.
async fn check_issuer(state: &AppState, viewer: &Viewer, client: Option<&str>) -> Result<(), WebError> {
    if !may_issue(state, viewer, None).await? {
        let who = state.store.issuers().await?.describe();
        return Err(WebError::Forbidden {
            message: format!("{who} issue, adjust or void invoices; your account does not."),
            choices: Vec::new(),
        });
    }
    if client.is_some_and(|c| !viewer.scope.allows(c)) {
        return Err(unseen("client"));
    }
    Ok(())
}

fn actor(viewer: &Viewer) -> String {
    if viewer.name.is_empty() { "(sign-in off)".into() } else { viewer.name.clone() }
}

/// Audits an issued document and answers with a redirect to it.
async fn issued(
    state: &AppState,
    viewer: &Viewer,
    document: &Invoice,
    action: &str,
) -> Result<Response, WebError> {
    let detail =
        format!("{} {} {} {}", document.number, document.client, document.period, document.total.decimal());
    state.store.audit(&AuditEntry::new(&actor(viewer), "", action, &detail)).await?;
    Ok(Redirect::to(&format!("/invoices/{}?done=1", url_escape(&document.number))).into_response())
}

/// A refusal shown on the draft page, with the reason, as 409.
async fn refused_on_draft(
    state: &AppState,
    viewer: &Viewer,
    client: &str,
    period: Period,
    error: InvoiceError,
) -> Result<Response, WebError> {
    let InvoiceError::Refused(message) = error else { return Err(invoice_error(error)) };
    let view = ledger::draft_view(state.store.as_ref(), client, period).await.map_err(invoice_error)?;
    let issuer = may_issue(state, viewer, Some(client)).await?;
    Ok((StatusCode::CONFLICT, Html(draft_page(viewer, issuer, &view, &message).render()?)).into_response())
}

fn form_period(text: &str) -> Result<Period, WebError> {
    text.parse()
        .map_err(|e: crate::period::PeriodParseError| WebError::bad("period", e.to_string(), Vec::new()))
}

/// `POST /invoices/issue`: issues the client's invoice for the period (a month that is over).
pub async fn issue(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    axum::Form(form): axum::Form<IssueForm>,
) -> Result<Response, WebError> {
    issue_or_adjust(&state, &viewer, &form, false).await
}

/// `POST /invoices/adjust`: issues the restatement's difference as a note.
pub async fn adjust(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    axum::Form(form): axum::Form<IssueForm>,
) -> Result<Response, WebError> {
    issue_or_adjust(&state, &viewer, &form, true).await
}

/// Issues an invoice, or with `adjust` the note that brings the standing one to the draft;
/// a refusal is shown on the draft page.
async fn issue_or_adjust(
    state: &AppState,
    viewer: &Viewer,
    form: &IssueForm,
    adjust: bool,
) -> Result<Response, WebError> {
    check_issuer(state, viewer, Some(&form.client)).await?;
    let period = form_period(&form.period)?;
    if form.confirm != "yes" {
        return confirm_issue(state, viewer, &form.client, period, adjust).await;
    }
    let (store, who) = (state.store.as_ref(), actor(viewer));
    let (result, action) = if adjust {
        (ledger::adjust(store, &form.client, period, &who).await, "invoice.adjust")
    } else {
        (ledger::issue(store, &form.client, period, &who, false).await, "invoice.issue")
    };
    match result {
        Ok(document) => issued(state, viewer, &document, action).await,
        Err(error) => refused_on_draft(state, viewer, &form.client, period, error).await,
    }
}

/// What issuing `client`'s invoice (or with `adjust` its note) for `period` will do, to
/// confirm; a refusal (an invoice stands, nothing changed, the month is open) on the draft.
async fn confirm_issue(
    state: &AppState,
    viewer: &Viewer,
    client: &str,
    period: Period,
    adjust: bool,
) -> Result<Response, WebError> {
    let store = state.store.as_ref();
    let view = ledger::draft_view(store, client, period).await.map_err(invoice_error)?;
    let refuse = |message: String| InvoiceError::Refused(message);
    let check = match (&view.standing, &view.delta, adjust) {
        _ if !adjust && period.end() > chrono::Utc::now().timestamp() => Err(refuse(format!(
            "{period} is not over yet: its bill can still change (issue it after the month ends)"
        ))),
        (Some(standing), _, false) => Err(refuse(format!(
            "invoice {} already stands for {client} in {period}: issue the difference as a note, or void it first",
            standing.invoice.number
        ))),
        (None, _, false) if view.draft.lines.is_empty() => {
            Err(refuse(format!("{client} has nothing to charge in {period}")))
        }
        (None, _, true) => Err(refuse(format!("no invoice stands for {client} in {period}: issue one"))),
        (Some(standing), None, true) => Err(refuse(format!(
            "the charge of {client} in {period} is what invoice {} and its notes already say",
            standing.invoice.number
        ))),
        _ => Ok(()),
    };
    if let Err(error) = check {
        return refused_on_draft(state, viewer, client, period, error).await;
    }
    let number = ledger::next_numbers(store, 1).await.map_err(invoice_error)?.remove(0);
    let cancel = format!("/invoices/draft?client={}&period={period}", url_escape(client));
    let fields = vec![("client", client.to_string()), ("period", period.to_string())];
    let draft = &view.draft;
    let mut page = if let (Some(standing), Some(delta)) = (&view.standing, &view.delta) {
        let kind = delta.kind.title();
        let mut page = ConfirmPage::new(
            viewer,
            format!("Issue {} {number} to {client}?", kind.to_lowercase()),
            "/invoices/adjust".into(),
            format!("Issue {kind} {number}"),
            cancel,
        );
        page.paragraphs = vec![
            format!(
                "Invoice {} and its notes stand at {}; {client}'s charge for {period} is now {}. The {} {number} carries the difference, {}, line by line, and refers to {}.",
                standing.invoice.number,
                standing.total().money(&draft.currency),
                draft.total.money(&draft.currency),
                kind.to_lowercase(),
                delta.total.money(&draft.currency),
                standing.invoice.number
            ),
            format!(
                "It is dated today and frozen with its PDF once issued. {client}'s users see it and download it."
            ),
        ];
        page
    } else {
        let mut page = ConfirmPage::new(
            viewer,
            format!("Issue invoice {number} to {client}?"),
            "/invoices/issue".into(),
            format!("Issue invoice {number}"),
            cancel,
        );
        page.paragraphs = vec![
            format!(
                "The draft for {client}, {period}: {} ({}){}, due {} days after today.",
                draft.total.money(&draft.currency),
                draft.currency,
                draft.exchange_rate.as_ref().map_or(String::new(), |rate| format!(
                    ", converted at {} (in force for {period}; issuing fixes the rate on the invoice)",
                    rate.quote()
                )),
                draft.buyer.payment_terms_days
            ),
            format!(
                "Issuing gives it number {number}, the next of the series, dates it today and freezes it with its PDF: later deliveries of the bill or changed settings never change it (a restatement is issued as a note)."
            ),
            format!("{client}'s users see it and its PDF as soon as it is issued."),
        ];
        page
    };
    page.fields = fields;
    page.answer(StatusCode::OK)
}

/// What voiding `original` will do, to confirm; the reason is asked for when not given (it
/// is printed on the credit note the client receives).
async fn confirm_void(
    state: &AppState,
    viewer: &Viewer,
    original: &Invoice,
    reason: &str,
    tried: bool,
) -> Result<Response, WebError> {
    let store = state.store.as_ref();
    let family = store.documents(Some(&original.client), Some(&original.period)).await?;
    let Some(standing) = invoice::Standing::find(&family).filter(|s| s.invoice.number == original.number)
    else {
        return Err(WebError::bad(
            "invoice",
            format!("invoice {} is already voided", original.number),
            Vec::new(),
        ));
    };
    let credit = ledger::next_numbers(store, 1).await.map_err(invoice_error)?.remove(0);
    let (number, client) = (&original.number, &original.client);
    let mut page = ConfirmPage::new(
        viewer,
        format!("Void invoice {number}?"),
        format!("/invoices/{}/credit", url_escape(number)),
        format!("Void {number} with credit note {credit}"),
        format!("/invoices/{}", url_escape(number)),
    );
    page.danger = true;
    page.paragraphs = vec![
        format!(
            "Credit note {credit} takes back everything {number} and its notes stand for ({}): {number} then reads credited, and {client} has no invoice for {} until one is issued again.",
            standing.total().money(&original.currency),
            original.period
        ),
        if reason.is_empty() {
            format!(
                "Give the reason: it is printed on the credit note, which {client}'s users see and download."
            )
        } else {
            format!(
                "The reason is printed on the credit note, which {client}'s users see and download: “{reason}”."
            )
        },
    ];
    if reason.is_empty() {
        page.ask_reason = true;
        if tried {
            page.error = "A void needs a reason: it is printed on the credit note.".into();
        }
    } else {
        page.fields = vec![("reason", reason.to_string())];
    }
    page.answer(if tried { StatusCode::BAD_REQUEST } else { StatusCode::OK })
}

/// `POST /invoices/issue-month`: every draft of a month the viewer may issue, issued
/// together under consecutive numbers, or none; first a confirmation that lists them.
pub async fn issue_month(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    axum::Form(form): axum::Form<MonthForm>,
) -> Result<Response, WebError> {
    let period = form_period(&form.period)?;
    if form.confirm != "yes" {
        return confirm_month(&state, &viewer, period, "", StatusCode::OK).await;
    }
    let clients: Vec<String> =
        form.clients.split(',').map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect();
    for client in &clients {
        check_issuer(&state, &viewer, Some(client)).await?;
    }
    let store = state.store.as_ref();
    match ledger::issue_month(store, &clients, period, &actor(&viewer), false).await {
        Ok(documents) => {
            for document in &documents {
                let detail = format!(
                    "{} {} {} {}",
                    document.number,
                    document.client,
                    document.period,
                    document.total.decimal()
                );
                state.store.audit(&AuditEntry::new(&actor(&viewer), "", "invoice.issue", &detail)).await?;
            }
            let (first, last) = (&documents[0].number, &documents[documents.len() - 1].number);
            let to = format!("/invoices?period={period}&done={},{}", url_escape(first), url_escape(last));
            Ok(Redirect::to(&to).into_response())
        }
        Err(InvoiceError::Refused(message)) => {
            confirm_month(&state, &viewer, period, &message, StatusCode::CONFLICT).await
        }
        Err(error) => Err(invoice_error(error)),
    }
}

/// The month's batch to confirm (with `error` when the last attempt was refused).
async fn confirm_month(
    state: &AppState,
    viewer: &Viewer,
    period: Period,
    error: &str,
    status: StatusCode,
) -> Result<Response, WebError> {
    check_issuer(state, viewer, None).await?;
    let store = state.store.as_ref();
    let sees = |client: &str| viewer.scope.allows(client);
    let batch = ledger::month_batch(store, period, &sees).await.map_err(invoice_error)?;
    let numbers = ledger::next_numbers(store, batch.drafts.len()).await.map_err(invoice_error)?;
    let cancel = format!("/invoices?period={period}");
    let n = batch.drafts.len();
    let mut page = if n == 0 {
        let mut page = ConfirmPage::new(
            viewer,
            format!("Nothing to issue for {period}"),
            String::new(),
            String::new(),
            cancel,
        );
        page.paragraphs =
            vec![format!("Every client of {period} your account sees is invoiced or has nothing to charge.")];
        page
    } else {
        let mut page = ConfirmPage::new(
            viewer,
            format!("Issue {n} invoice{} for {period}?", if n == 1 { "" } else { "s" }),
            "/invoices/issue-month".into(),
            format!(
                "Issue {n} invoice{}, {} to {}",
                if n == 1 { "" } else { "s" },
                numbers[0],
                numbers[n - 1]
            ),
            cancel,
        );
        page.paragraphs = vec![
            format!(
                "Each draft below is issued as it stands, under consecutive numbers {} to {}, dated today and frozen with its PDF. All are issued together, or none if one cannot be (the reason is then shown here).",
                numbers[0],
                numbers[n - 1]
            ),
            "Each client's users see their invoice as soon as it is issued.".into(),
        ];
        page.rows_caption = format!("The drafts of {period}, in the order they are numbered");
        page.rows = batch
            .drafts
            .iter()
            .zip(&numbers)
            .map(|(d, number)| (d.client.clone(), number.clone(), d.total.money(&d.currency)))
            .collect();
        page.rows_total =
            invoice::totals_in_words(batch.drafts.iter().map(|d| (d.currency.as_str(), d.total)));
        let clients: Vec<&str> = batch.drafts.iter().map(|d| d.client.as_str()).collect();
        page.fields = vec![("period", period.to_string()), ("clients", clients.join(","))];
        page
    };
    if period.end() > chrono::Utc::now().timestamp() {
        page.action.clear();
        page.paragraphs = vec![format!(
            "{period} is not over yet: its bill can still change. Issue its invoices after the month ends."
        )];
    }
    page.skipped = batch.skipped;
    page.error = error.to_string();
    page.answer(status)
}

/// `POST /invoices/NUMBER/credit`: voids the invoice with a full credit note.
pub async fn credit(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    Path(number): Path<String>,
    axum::Form(form): axum::Form<CreditForm>,
) -> Result<Response, WebError> {
    let original = visible(&state, &viewer, &number).await?;
    check_issuer(&state, &viewer, Some(&original.client)).await?;
    let reason = form.reason.trim();
    if form.confirm != "yes" || reason.is_empty() {
        return confirm_void(&state, &viewer, &original, reason, form.confirm == "yes").await;
    }
    let document = ledger::credit(state.store.as_ref(), &number, reason, &actor(&viewer))
        .await
        .map_err(invoice_error)?;
    issued(&state, &viewer, &document, "invoice.void").await
}

#[derive(Debug, Deserialize)]
pub struct TermsForm {
    client: String,
    /// Percent (`12.5`); empty leaves the markup as it is.
    #[serde(default)]
    markup_percent: String,
    /// USD a month (`10000` or `10000.00`; `0` removes it); empty leaves the budget as it is.
    #[serde(default)]
    monthly_budget: String,
    /// The first month the terms apply to (`YYYY-MM`); empty: every month.
    #[serde(default)]
    from: String,
    #[serde(default)]
    confirm: String,
}

/// `POST /invoices/terms`: a client's markup and monthly budget from a month on, by those who
/// may issue its invoices. First a confirmation (what changes, from when, which computed
/// months are computed again); then saved as dated setting versions, audited, and the months
/// they touch recomputed, so every page and draft shows them. Issued documents never change:
/// a restated month's difference shows on its draft as a note to issue.
pub async fn terms(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    axum::Form(form): axum::Form<TermsForm>,
) -> Result<Response, WebError> {
    use crate::domain::settings::{ClientTerms, EffectiveFrom};
    let client = form.client.trim().to_string();
    check_issuer(&state, &viewer, Some(&client)).await?;
    crate::auth::check_name("client", &client).map_err(|e| WebError::bad("client", e, Vec::new()))?;
    let markup = match form.markup_percent.trim().trim_end_matches('%').trim() {
        "" => None,
        text => Some(
            text.parse::<f64>()
                .map_err(|_| format!("{text:?} is not a number"))
                .and_then(ClientTerms::markup_from_percent)
                .map_err(|e| WebError::bad("markup_percent", e, Vec::new()))?,
        ),
    };
    let budget = match form.monthly_budget.trim().trim_start_matches('$').replace(',', "").as_str() {
        "" => None,
        text => Some(text.parse::<crate::money::Cents>().ok().filter(|c| c.0 >= 0).ok_or_else(|| {
            WebError::bad("monthly_budget", format!("{text:?} is not an amount of USD"), Vec::new())
        })?),
    };
    if markup.is_none() && budget.is_none() {
        return Err(WebError::bad("markup_percent", "give a markup, a monthly budget or both", Vec::new()));
    }
    let (from, first) = match form.from.trim() {
        "" => (EffectiveFrom::BEGINNING, None),
        text => {
            let period = form_period(text).map_err(|_| {
                WebError::bad("from", format!("{text:?} is not a month (YYYY-MM)"), Vec::new())
            })?;
            (EffectiveFrom::month(period), Some(period))
        }
    };
    let store = state.store.as_ref();
    let history = store.settings().await?;
    let computed: Vec<Period> = store
        .rollup_periods()
        .await?
        .into_iter()
        .filter_map(|r| r.period.parse::<Period>().ok())
        .filter(|p| first.is_none_or(|f| *p >= f))
        .collect();
    // What is in force where the change starts: the first month it touches.
    let at = first.or(computed.first().copied());
    let before_terms = match at {
        Some(p) => history.terms_in_force(&client, p).map_err(|e| WebError::bad("client", e, Vec::new()))?,
        None => ClientTerms::default(),
    };
    let before_budget = match at {
        Some(p) => history.budget(&client, p).map_err(|e| WebError::bad("client", e, Vec::new()))?,
        None => None,
    };
    let budget_words =
        |b: Option<crate::money::Cents>| b.filter(|c| c.0 > 0).map_or("none".to_string(), |c| c.usd());
    let mut changes = Vec::new();
    let mut versions = Vec::new();
    if let Some(points) = markup {
        let after = ClientTerms { markup_basis_points: points, ..before_terms };
        changes.push(format!("markup {} → {}", before_terms.markup_percent(), after.markup_percent()));
        versions.push(
            history
                .client_version(&client, from, |terms| terms.markup_basis_points = points)
                .map_err(|e| WebError::bad("client", e, Vec::new()))?,
        );
    }
    if let Some(monthly) = budget {
        changes.push(format!(
            "monthly budget {} → {}",
            budget_words(before_budget),
            budget_words(Some(monthly))
        ));
        versions.push(history.budget_version(&client, from, monthly));
    }
    let when = first.map_or("every month".to_string(), |p| format!("{} on", crate::period::human::month(p)));
    let months = computed.iter().map(|p| crate::period::human::month(*p)).collect::<Vec<_>>().join(", ");
    if form.confirm != "yes" {
        let mut page = ConfirmPage::new(
            &viewer,
            format!("Change {client}'s terms?"),
            "/invoices/terms".into(),
            "Save the terms".into(),
            "/invoices#terms".into(),
        );
        page.paragraphs = vec![
            format!("{client}, {when}: {}.", changes.join("; ")),
            if computed.is_empty() {
                "No computed month is touched: the next compute uses the new terms.".to_string()
            } else {
                format!(
                    "Computed again with the new terms: {months}. Their charges, drafts and {client}'s pages change; \
                     invoices already issued stay as they were sent (a difference shows on the month's draft as a note to issue)."
                )
            },
            "The change and who made it go in the audit log.".into(),
        ];
        page.fields = vec![
            ("client", client.clone()),
            ("markup_percent", form.markup_percent.trim().to_string()),
            ("monthly_budget", form.monthly_budget.trim().to_string()),
            ("from", form.from.trim().to_string()),
        ];
        return page.answer(StatusCode::OK);
    }
    store.save_settings(&versions).await?;
    let detail = format!("{client}, {when}: {}", changes.join("; "));
    store.audit(&AuditEntry::new(&actor(&viewer), "", "settings.client", &detail)).await?;
    crate::pipeline::compute(store, &computed).await?;
    let to = format!("/invoices?done=terms:{}#terms", url_escape(&client));
    Ok(Redirect::to(&to).into_response())
}
