//! The invoice jobs the command line and the dashboard share: draft, issue, adjust after a
//! restatement, void with a credit note. Each issues through
//! [`crate::store::InvoiceStore::issue_document`], so the number, the check that nothing
//! else stands and the stored document happen in one transaction.

use chrono::{DateTime, Days, Utc};

use super::{Invoice, Kind, Standing, Status, adjustment, draft, format_number, pdf, void};
use crate::period::Period;
use crate::store::{Store, StoreError};

/// Why an invoice job did not happen; the message is safe to show.
#[derive(Debug, thiserror::Error)]
pub enum InvoiceError {
    /// What was asked for is not there (a period not computed, an unknown client or number).
    #[error("{0}")]
    NotFound(String),
    /// The job would break a rule (issuing twice, issuing an open month, nothing to adjust).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for InvoiceError {
    fn from(error: StoreError) -> InvoiceError {
        match error {
            StoreError::Invalid(message) => InvoiceError::Refused(message),
            other => InvoiceError::Store(other),
        }
    }
}

/// A client's draft for a period, next to what is already issued for them.
#[derive(Debug, Clone)]
pub struct DraftView {
    pub draft: Invoice,
    /// The invoice that stands for the client and period, with its notes.
    pub standing: Option<Standing>,
    /// The note that would bring the standing invoice to the draft, when they differ.
    pub delta: Option<Invoice>,
    /// Every document of the client and period, with statuses.
    pub documents: Vec<Invoice>,
}

impl DraftView {
    /// The draft's JSON, with the number of the invoice that stands (`standing`) and the
    /// note that would bring it to the draft (`difference`), both null when there is none.
    pub fn json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(&self.draft).expect("a draft serializes");
        value["standing"] = serde_json::json!(self.standing.as_ref().map(|s| s.invoice.number.clone()));
        value["difference"] = serde_json::to_value(&self.delta).expect("a note serializes");
        value
    }
}

/// `client`'s draft for `period` from the period's chargeback, with what stands.
pub async fn draft_view(store: &dyn Store, client: &str, period: Period) -> Result<DraftView, InvoiceError> {
    let key = period.to_string();
    let rollups = store.rollups(&key).await?.ok_or_else(|| {
        InvoiceError::NotFound(format!("{key} is not computed: ingest its CUR export first"))
    })?;
    let mut billing = store.billing_details().await?.remove(client).unwrap_or_default();
    let seller = store.seller().await?;
    let cur = store.cost_data_version(&key).await?.unwrap_or_else(|| "unknown".into());
    let data_version = format!("{cur} (inputs revision {})", rollups.period.input_revision);
    let documents = store.documents(Some(client), Some(&key)).await?;
    let standing = Standing::find(&documents);
    // A standing invoice's currency and rate are frozen: its draft is compared in them, so a
    // difference is the data's, never the rate's.
    let rates = store.fx_rates().await?;
    let rate = match &standing {
        Some(standing) => {
            billing.currency = standing.invoice.currency.clone();
            standing.invoice.exchange_rate.clone()
        }
        None => {
            crate::domain::fx::invoice_rate(&rates, &billing.currency, &key).map_err(InvoiceError::Refused)?
        }
    };
    let mut draft = draft(&rollups, client, &billing, &seller, &data_version, rate.as_ref())
        .map_err(InvoiceError::NotFound)?;
    draft.conversions = super::bill_conversions(&draft.lines, &store.bills(Some(&key)).await?, &rates);
    let delta = standing.as_ref().and_then(|s| adjustment(s, &draft));
    Ok(DraftView { draft, standing, delta, documents })
}

/// Issues `client`'s invoice for `period` under the series' next number. Refused while an
/// invoice stands for them, for a month not over yet (unless `allow_open`), and when there is
/// nothing to charge.
pub async fn issue(
    store: &dyn Store,
    client: &str,
    period: Period,
    actor: &str,
    allow_open: bool,
) -> Result<Invoice, InvoiceError> {
    let now = Utc::now();
    if period.end() > now.timestamp() && !allow_open {
        return Err(InvoiceError::Refused(format!(
            "{period} is not over yet: its bill can still change (issue it after the month ends, or allow an open month)"
        )));
    }
    let view = draft_view(store, client, period).await?;
    if view.draft.lines.is_empty() {
        return Err(InvoiceError::Refused(format!("{client} has nothing to charge in {period}")));
    }
    let (draft, actor) = (view.draft, actor.to_string());
    let build = move |seq: i64, seller: &super::Seller, existing: &[Invoice]| {
        if let Some(standing) = Standing::find(existing) {
            return Err(format!(
                "invoice {} already stands for {} in {}: issue the difference as a note (adjust) or void it first (credit)",
                standing.invoice.number, draft.client, draft.period
            ));
        }
        finish(draft.clone(), seller, seq, &actor, now)
    };
    Ok(store.issue_document(client, &period.to_string(), &build).await?)
}

/// What issuing a whole month would do for the clients `sees` allows: the drafts to issue
/// (no invoice stands, something to charge), in the order of the clients' names, and the
/// clients left out with why.
#[derive(Debug, Clone, Default)]
pub struct MonthBatch {
    pub drafts: Vec<Invoice>,
    pub skipped: Vec<(String, String)>,
}

/// The month's batch: every client of `period`'s chargeback that `sees` allows.
pub async fn month_batch(
    store: &dyn Store,
    period: Period,
    sees: &(dyn Fn(&str) -> bool + Sync),
) -> Result<MonthBatch, InvoiceError> {
    let key = period.to_string();
    let rollups = store.rollups(&key).await?.ok_or_else(|| {
        InvoiceError::NotFound(format!("{key} is not computed: ingest its CUR export first"))
    })?;
    let mut clients: Vec<&str> = rollups
        .clients
        .iter()
        .map(|c| c.client.as_str())
        .filter(|c| super::invoiceable(c) && sees(c))
        .collect();
    clients.sort();
    let mut batch = MonthBatch::default();
    for client in clients {
        let view = match draft_view(store, client, period).await {
            Ok(view) => view,
            // A client in a currency without its rate: the others go on.
            Err(InvoiceError::Refused(why)) => {
                batch.skipped.push((client.to_string(), why));
                continue;
            }
            Err(other) => return Err(other),
        };
        if let Some(standing) = &view.standing {
            batch.skipped.push((client.to_string(), format!("invoice {} stands", standing.invoice.number)));
        } else if view.draft.lines.is_empty() {
            batch.skipped.push((client.to_string(), "nothing to charge".into()));
        } else {
            batch.drafts.push(view.draft);
        }
    }
    Ok(batch)
}

/// Issues `clients`' invoices for `period` together, under consecutive numbers in the
/// order given: all of them, or none (a client invoiced meanwhile, or with nothing to
/// charge, refuses the whole batch and no number is used).
pub async fn issue_month(
    store: &dyn Store,
    clients: &[String],
    period: Period,
    actor: &str,
    allow_open: bool,
) -> Result<Vec<Invoice>, InvoiceError> {
    let now = Utc::now();
    if period.end() > now.timestamp() && !allow_open {
        return Err(InvoiceError::Refused(format!(
            "{period} is not over yet: its bill can still change (issue it after the month ends, or allow an open month)"
        )));
    }
    if clients.is_empty() {
        return Err(InvoiceError::Refused(format!("no invoice of {period} to issue")));
    }
    let mut drafts = Vec::with_capacity(clients.len());
    for client in clients {
        let view = draft_view(store, client, period).await?;
        if view.draft.lines.is_empty() {
            return Err(InvoiceError::Refused(format!(
                "{client} has nothing to charge in {period}: nothing was issued"
            )));
        }
        drafts.push(view.draft);
    }
    let actor = actor.to_string();
    let build = move |i: usize, seq: i64, seller: &super::Seller, existing: &[Invoice]| {
        let draft = &drafts[i];
        if let Some(standing) = Standing::find(existing) {
            return Err(format!(
                "invoice {} already stands for {} in {}: nothing was issued",
                standing.invoice.number, draft.client, draft.period
            ));
        }
        finish(draft.clone(), seller, seq, &actor, now)
    };
    let batch: Vec<(String, String)> = clients.iter().map(|c| (c.clone(), period.to_string())).collect();
    Ok(store.issue_documents(&batch, &build).await?)
}

/// The numbers the series' next `count` documents would take if issued now (a preview: a
/// document issued meanwhile takes the first).
pub async fn next_numbers(store: &dyn Store, count: usize) -> Result<Vec<String>, InvoiceError> {
    use chrono::Datelike;
    let (last, seller) = store.series().await?;
    let year = Utc::now().year();
    (1..=count as i64)
        .map(|i| format_number(&seller.number_format, last + i, year).map_err(InvoiceError::Refused))
        .collect()
}

/// Issues the note that brings the standing invoice of `client` and `period` to today's
/// draft: a credit note when the charge fell, a debit note when it rose.
pub async fn adjust(
    store: &dyn Store,
    client: &str,
    period: Period,
    actor: &str,
) -> Result<Invoice, InvoiceError> {
    let view = draft_view(store, client, period).await?;
    let now = Utc::now();
    let (draft, actor) = (view.draft, actor.to_string());
    let build = move |seq: i64, seller: &super::Seller, existing: &[Invoice]| {
        let standing = Standing::find(existing).ok_or_else(|| {
            format!("no invoice stands for {} in {}: issue one", draft.client, draft.period)
        })?;
        let note = adjustment(&standing, &draft).ok_or_else(|| {
            format!(
                "the charge of {} in {} is what invoice {} and its notes already say",
                draft.client, draft.period, standing.invoice.number
            )
        })?;
        finish(note, seller, seq, &actor, now)
    };
    Ok(store.issue_document(client, &period.to_string(), &build).await?)
}

/// Voids invoice `number` with a credit note for everything it still stands for.
pub async fn credit(
    store: &dyn Store,
    number: &str,
    reason: &str,
    actor: &str,
) -> Result<Invoice, InvoiceError> {
    let original = store
        .document(number)
        .await?
        .ok_or_else(|| InvoiceError::NotFound(format!("no invoice numbered {number}")))?;
    if original.kind != Kind::Invoice {
        return Err(InvoiceError::Refused(format!(
            "{number} is a {}, not an invoice",
            original.kind.title().to_lowercase()
        )));
    }
    let now = Utc::now();
    let (reason, actor) = (reason.to_string(), actor.to_string());
    let wanted = number.to_string();
    let build = move |seq: i64, seller: &super::Seller, existing: &[Invoice]| {
        let standing = Standing::find(existing)
            .filter(|s| s.invoice.number == wanted)
            .ok_or_else(|| format!("invoice {wanted} is already voided"))?;
        let note = void(&standing, &reason)?;
        finish(note, seller, seq, &actor, now)
    };
    Ok(store.issue_document(&original.client, &original.period, &build).await?)
}

/// A document being issued, numbered, dated and signed by `seller`, with its PDF.
fn finish(
    mut document: Invoice,
    seller: &super::Seller,
    seq: i64,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<(Invoice, Vec<u8>), String> {
    document.seller = seller.clone();
    stamp(&mut document, seq, actor, now)?;
    let bytes = pdf::render(&document)?;
    Ok((document, bytes))
}

/// Numbers and dates a document being issued.
fn stamp(document: &mut Invoice, seq: i64, actor: &str, now: DateTime<Utc>) -> Result<(), String> {
    use chrono::Datelike;
    document.number = format_number(&document.seller.number_format, seq, now.year())?;
    document.status = Status::Issued;
    document.issued_at = Some(now.format("%Y-%m-%d").to_string());
    let terms = u64::try_from(document.buyer.payment_terms_days.max(0)).unwrap_or(0);
    let due = now.checked_add_days(Days::new(terms)).unwrap_or(now);
    document.due_at = Some(due.format("%Y-%m-%d").to_string());
    document.actor = actor.to_string();
    Ok(())
}
