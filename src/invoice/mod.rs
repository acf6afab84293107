//! Per-client invoices: a draft computed from a period's chargeback, issued under the next
//! number of one gapless series and frozen from then on (lines, buyer and seller, the data
//! and settings versions, the PDF bytes); restatements and voids become numbered credit or
//! debit notes that refer to the invoice and carry only the difference.
//!
//! Every amount is in cents. A draft's lines are the client's chargeback in nano-dollars,
//! rounded once to cents by largest remainder so that they add up to the client's charge
//! rounded to the cent ([`crate::money::apportion_cents`]); tax is computed on that
//! subtotal and rounded half away from zero. The total is the sum of the lines shown.

pub mod ledger;
pub mod pdf;

use std::collections::BTreeMap;

use crate::domain::clients::{HOUSE, PLATFORM, UNASSIGNED};
use crate::domain::fx::{FxRate, REPORTING_CURRENCY};
pub use crate::domain::invoices::{
    BillingDetails, DEFAULT_NUMBER_FORMAT, DetailRow, Invoice, Kind, Line, Seller, Status, with_status,
};
use crate::domain::settings::Pool;
use crate::money::{Cents, Nanos, apportion_cents};
use crate::store::{ClientRollup, Rollups, WorkloadClass};

/// The categories of the pods' split cost.
const POD_LINES: [&str; 5] = ["gpu_training", "gpu_inference", "gpu_other", "cpu", "memory"];

/// Direct lines, in the order a document shows them: (category, description).
const DIRECT_LINES: [(&str, &str); 8] = [
    ("gpu_training", "GPU compute, training workloads"),
    ("gpu_inference", "GPU compute, inference workloads"),
    ("gpu_other", "GPU compute, other workloads"),
    ("cpu", "vCPUs reserved by the client's pods"),
    ("memory", "Memory reserved by the client's pods"),
    ("storage", "Storage tagged to the client"),
    ("network", "Data transfer tagged to the client"),
    ("other_direct", "Other cloud cost tagged to the client"),
];

const DISCOUNT_LINE: (&str, &str) = ("discount", "Share of AWS discounts (charged net of discounts)");

/// Lines before markup and tax, in the order a document shows them: the direct lines, a
/// share of each pool, the discount.
fn cost_lines() -> impl Iterator<Item = (&'static str, &'static str)> {
    DIRECT_LINES.into_iter().chain(Pool::ALL.map(Pool::invoice_line)).chain([DISCOUNT_LINE])
}

/// Whether `client` is a client that can be invoiced (not one of the rows chargeback keeps
/// for the house, the unassigned or the platform).
pub fn invoiceable(client: &str) -> bool {
    ![HOUSE, UNASSIGNED, PLATFORM].contains(&client)
}

/// The digest the settings a period was computed with go by on a document.
pub fn settings_version(settings_json: &str) -> String {
    format!("settings-{}", &sha256_hex(settings_json.as_bytes())[..12])
}

/// A client's month against its budget: the charge so far and where it is heading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetCheck {
    pub budget: Cents,
    /// The client's charge (direct + shared + markup) for the days the bill covers.
    pub actual: Cents,
    /// `actual` at the same daily rate for the whole month (= `actual` once it is complete).
    pub forecast: Cents,
    pub days_covered: u32,
    pub days_in_month: u32,
}

impl BudgetCheck {
    /// `client`'s charge in `rollups` against `budget`; the run rate from the days the
    /// period's cost rollups cover.
    pub fn new(rollups: &Rollups, client: &str, budget: Cents) -> Option<BudgetCheck> {
        let period: crate::period::Period = rollups.period.period.parse().ok()?;
        let charge = rollups.clients.iter().find(|c| c.client == client)?;
        let days_in_month = period.days();
        let last_day = rollups.costs.iter().map(|c| c.day).max().unwrap_or(period.start());
        let days_covered =
            (((last_day - period.start()) / 86_400 + 1).clamp(1, i64::from(days_in_month))) as u32;
        let actual = Cents::from_nanos(charge.total_nanos());
        let scaled = i128::from(charge.total_nanos()) * i128::from(days_in_month) / i128::from(days_covered);
        let forecast = Cents::from_nanos(scaled as i64);
        Some(BudgetCheck { budget, actual, forecast, days_covered, days_in_month })
    }

    pub fn over(&self) -> bool {
        self.forecast > self.budget
    }

    /// "$8,200.00 of $9,000.00 (31 of 31 days); forecast $8,200.00".
    pub fn describe(&self) -> String {
        format!(
            "{} of {} ({} of {} days); forecast {}",
            self.actual.usd(),
            self.budget.usd(),
            self.days_covered,
            self.days_in_month,
            self.forecast.usd()
        )
    }
}

pub use crate::text::sha256_hex;

/// A draft of `client`'s invoice for the period of `rollups`: its chargeback as lines at the
/// client's prices ([`priced_lines`]), tax on its own line. `data_version` names the CUR
/// delivery.
pub fn draft(
    rollups: &Rollups,
    client: &str,
    billing: &BillingDetails,
    seller: &Seller,
    data_version: &str,
    rate: Option<&FxRate>,
) -> Result<Invoice, String> {
    let period = &rollups.period.period;
    if (billing.currency == REPORTING_CURRENCY) != rate.is_none() {
        return Err(format!(
            "an invoice in {} needs the rate between {REPORTING_CURRENCY} and {} (and one in {REPORTING_CURRENCY} none)",
            billing.currency, billing.currency
        ));
    }
    let mut lines = priced_lines_in(rollups, client, rate)?;
    let pods_total: Cents = lines.iter().filter(|l| is_pod_line(&l.category)).map(|l| l.amount).sum();
    let detail = detail(rollups, client, pods_total);
    let before_tax: Cents = lines.iter().map(|l| l.amount).sum();
    if billing.tax_ppm != 0 {
        let tax = before_tax.times_ppm(billing.tax_ppm);
        let percent = billing.tax_ppm as f64 / 10_000.0;
        let mut tax_line = line("tax", &format!("Tax {percent} %"), None, "");
        tax_line.amount = tax;
        lines.push(tax_line);
    }
    let mut invoice = Invoice {
        number: String::new(),
        kind: Kind::Invoice,
        refers_to: None,
        client: client.to_string(),
        period: period.clone(),
        status: Status::Draft,
        issued_at: None,
        due_at: None,
        currency: billing.currency.clone(),
        lines,
        subtotal: Cents(0),
        markup: Cents(0),
        tax: Cents(0),
        total: Cents(0),
        data_version: data_version.to_string(),
        settings_version: settings_version(&rollups.period.settings),
        pdf_sha256: None,
        buyer: billing.clone(),
        seller: seller.clone(),
        actor: String::new(),
        reason: String::new(),
        full_credit: false,
        detail,
        exchange_rate: rate.cloned(),
        conversions: Vec::new(),
    };
    invoice.add_up();
    Ok(invoice)
}

/// `client`'s charge for the period of `rollups` as the lines a client is shown, before tax:
/// what it is charged for each kind of use, at its prices. The markup and any share of AWS's
/// discounts (a net client's) are not lines of their own: they are the difference between
/// the charge and the cost, shared among the lines in proportion to their cost (largest
/// remainder), so each line is cost + its part of that difference and the lines add up to
/// the charge rounded once to the cent. A client sees what it pays per GPU-hour, never what
/// the agency pays. (Documents issued before this kept a "Markup" line; they stand as sent.)
pub fn priced_lines(rollups: &Rollups, client: &str) -> Result<Vec<Line>, String> {
    priced_lines_in(rollups, client, None)
}

/// [`priced_lines`] in another currency: each line's charge (and the total) converted from
/// the reporting currency at `rate` before the one rounding to cents, so the lines still add
/// up to the converted charge and each unit price is the converted amount's.
pub fn priced_lines_in(rollups: &Rollups, client: &str, rate: Option<&FxRate>) -> Result<Vec<Line>, String> {
    let period = &rollups.period.period;
    if !invoiceable(client) {
        return Err(format!("{client} is not a client; it cannot be invoiced"));
    }
    let charge = rollups
        .clients
        .iter()
        .find(|c| c.client == client)
        .ok_or_else(|| format!("no client named {client:?} in {period}'s chargeback"))?;
    let lines = cost_lines_of(rollups, charge);
    let mut lines: Vec<(Line, i64)> = lines.into_iter().filter(|(_, nanos)| *nanos != 0).collect();
    let total = charge.total_nanos();
    let costs: Vec<i128> = lines.iter().map(|(_, nanos)| i128::from((*nanos).max(0))).collect();
    let cost: i64 = lines.iter().map(|(_, nanos)| nanos).sum();
    match crate::money::apportion_by_weight(total - cost, &costs) {
        Some(parts) => {
            for ((_, nanos), part) in lines.iter_mut().zip(parts) {
                *nanos += part;
            }
        }
        // No line with a cost to share it by (a charge of markup alone): it stays a line.
        None if total != cost => lines.push((line("service", "Service charge", None, ""), total - cost)),
        None => {}
    }
    let convert = |nanos: i64| rate.map_or(nanos, |rate| rate.from_reporting(nanos));
    let amounts: Vec<i64> = lines.iter().map(|(_, nanos)| convert(*nanos)).collect();
    let cents = apportion_cents(&amounts, Cents::from_nanos(convert(total)));
    Ok(lines
        .into_iter()
        .zip(cents)
        .map(|((mut line, _), amount)| {
            line.amount = amount;
            line.unit_price = unit_price(line.quantity, amount);
            line
        })
        .collect())
}

/// A client's lines at cost (nano-dollars), before its markup and discount: the pods' split
/// cost by kind of use, its tagged storage, network and other cost, its share of each pool.
/// When any of its cost was billed by another provider than AWS, the pod and tagged lines
/// are itemized by provider (`gpu_training.aws`, `other_direct.azure`: "…, Azure"); the
/// pools' shares are not (a pool spans the fleet).
fn cost_lines_of(rollups: &Rollups, charge: &ClientRollup) -> Vec<(Line, i64)> {
    let client = charge.client.as_str();
    let accounts: BTreeMap<&str, &str> = rollups
        .accounts
        .iter()
        .filter(|a| !a.provider.is_empty())
        .map(|a| (a.account.as_str(), a.provider.as_str()))
        .collect();
    // (provider, category) → (nanos, quantity).
    let mut direct: BTreeMap<(String, &str), (i64, f64)> = BTreeMap::new();
    fn add(
        direct: &mut BTreeMap<(String, &str), (i64, f64)>,
        provider: &str,
        category: &'static str,
        nanos: i64,
        quantity: f64,
    ) {
        let entry = direct.entry((provider.to_string(), category)).or_default();
        entry.0 += nanos;
        entry.1 += quantity;
    }
    for row in rollups.costs.iter().filter(|r| r.client == client) {
        let provider = accounts.get(row.account.as_str()).copied().unwrap_or("aws");
        let category = match row.workload_class {
            WorkloadClass::Training => "gpu_training",
            WorkloadClass::Inference => "gpu_inference",
            _ => "gpu_other",
        };
        add(&mut direct, provider, category, row.gpu_split_nanos, row.gpu_hours_allocated);
        add(&mut direct, provider, "cpu", row.cpu_split_nanos, row.vcpu_hours);
        // Memory is the rest of the pod's split cost.
        let memory = row.split_cost_nanos - row.gpu_split_nanos - row.cpu_split_nanos;
        add(&mut direct, provider, "memory", memory, row.memory_gb_hours);
    }
    // The tagged lines: other providers' parts, and AWS the rest.
    let tagged = [
        ("storage", charge.storage_nanos, charge.storage_gb_months),
        ("network", charge.network_nanos, 0.0),
        ("other_direct", charge.other_direct_nanos, 0.0),
    ];
    let elsewhere = charge.provider_direct();
    for (index, (category, nanos, quantity)) in tagged.into_iter().enumerate() {
        let theirs: i64 = elsewhere.values().map(|sums| sums[index]).sum();
        for (provider, sums) in &elsewhere {
            add(&mut direct, provider, category, sums[index], 0.0);
        }
        // The GB-months of storage are AWS's tagged lines' (the FOCUS bills' are not kept):
        // a quantity only while no other provider's storage shares the category.
        add(&mut direct, "aws", category, nanos - theirs, if theirs == 0 { quantity } else { 0.0 });
    }
    // The pods' lines add up to the client's direct cost exactly: any rounding between the
    // rows and the chargeback is memory's, as it always was.
    let pods: i64 = direct.iter().filter(|((_, c), _)| is_pod_line(c)).map(|(_, (n, _))| n).sum();
    add(&mut direct, "aws", "memory", charge.direct_cost_nanos - pods, 0.0);
    let providers: std::collections::BTreeSet<&str> =
        direct.iter().filter(|(_, (nanos, _))| *nanos != 0).map(|((p, _), _)| p.as_str()).collect();
    let itemized = providers.iter().any(|p| *p != "aws");
    let mut lines = Vec::new();
    for provider in providers.iter().copied().filter(|_| itemized).chain((!itemized).then_some("aws")) {
        for (category, description) in DIRECT_LINES {
            let Some((nanos, quantity)) = direct.get(&(provider.to_string(), category)).copied() else {
                continue;
            };
            let unit = match category {
                "cpu" => "vCPU-hour",
                "memory" => "GB-hour",
                "storage" => "GB-month",
                _ => "GPU-hour",
            };
            let quantity = Some(quantity).filter(|q| *q > 0.0);
            let line = if itemized {
                let name = crate::sources::focus::provider_name(provider);
                line(&format!("{category}.{provider}"), &format!("{description}, {name}"), quantity, unit)
            } else {
                line(category, description, quantity, unit)
            };
            lines.push((line, nanos));
        }
    }
    for (pool, nanos) in charge.shares().iter() {
        let (category, description) = pool.invoice_line();
        lines.push((line(category, description, None, ""), nanos));
    }
    lines
}

/// What a document says of the bills its lines came from in another currency than USD: one
/// sentence per provider of its itemized lines (`other_direct.azure`) whose bill for the
/// period is, with the rate it was converted at ("Azure's bill is in EUR, converted to USD at
/// 1 EUR = 1.0842 USD, the rate in force for 2026-10").
pub fn bill_conversions(lines: &[Line], bills: &[crate::store::Bill], rates: &[FxRate]) -> Vec<String> {
    let providers: std::collections::BTreeSet<&str> =
        lines.iter().filter_map(|l| l.category.split_once('.').map(|(_, provider)| provider)).collect();
    let mut said = Vec::new();
    for bill in bills.iter().filter(|b| providers.contains(b.provider.as_str())) {
        if bill.currency.is_empty() || bill.currency == REPORTING_CURRENCY {
            continue;
        }
        let name = crate::sources::focus::provider_name(&bill.provider);
        let sentence = match crate::domain::fx::rate_for(
            rates,
            &bill.currency,
            REPORTING_CURRENCY,
            &bill.period,
        ) {
            Some(rate) => format!(
                "{name}'s bill is in {}, converted to {REPORTING_CURRENCY} at {}, the rate in force for {}.",
                bill.currency,
                rate.quote(),
                bill.period
            ),
            None => format!(
                "{name}'s bill is in {}, with no rate to {REPORTING_CURRENCY} for {}.",
                bill.currency, bill.period
            ),
        };
        if !said.contains(&sentence) {
            said.push(sentence);
        }
    }
    said
}

/// Whether an invoice line's category is one of the pods' (itemized by provider or not).
fn is_pod_line(category: &str) -> bool {
    POD_LINES.contains(&category.split('.').next().unwrap_or(category))
}

/// `client`'s workloads with their part of its pod lines at its prices (what an invoice's
/// detail shows), largest first.
pub fn priced_workloads(rollups: &Rollups, client: &str) -> Result<Vec<DetailRow>, String> {
    priced_workloads_in(rollups, client, None)
}

/// [`priced_workloads`] in another currency, at `rate` (as [`priced_lines_in`]).
pub fn priced_workloads_in(
    rollups: &Rollups,
    client: &str,
    rate: Option<&FxRate>,
) -> Result<Vec<DetailRow>, String> {
    let lines = priced_lines_in(rollups, client, rate)?;
    let pods_total = lines.iter().filter(|l| is_pod_line(&l.category)).map(|l| l.amount).sum();
    Ok(detail(rollups, client, pods_total))
}

/// `client`'s pod cost per workload, largest first, in cents that add up to `total` (the
/// invoice's pod lines) by largest remainder.
fn detail(rollups: &Rollups, client: &str, total: Cents) -> Vec<DetailRow> {
    let mut workloads: BTreeMap<(&str, &str, &str), (i64, f64)> = BTreeMap::new();
    for row in rollups.costs.iter().filter(|r| r.client == client) {
        let key = (row.namespace.as_str(), row.workload.as_str(), row.workload_class.as_str());
        let entry = workloads.entry(key).or_default();
        entry.0 += row.split_cost_nanos;
        entry.1 += row.gpu_hours_allocated;
    }
    let nanos: Vec<i64> = workloads.values().map(|(n, _)| *n).collect();
    let cents = apportion_cents(&nanos, total);
    let mut rows: Vec<DetailRow> = workloads
        .into_iter()
        .zip(cents)
        .map(|(((namespace, workload, class), (_, hours)), amount)| DetailRow {
            namespace: namespace.to_string(),
            workload: workload.to_string(),
            workload_class: class.to_string(),
            gpu_hours: (hours * 100.0).round() / 100.0,
            amount,
        })
        .filter(|row| row.amount != Cents(0) || row.gpu_hours > 0.0)
        .collect();
    rows.sort_by(|a, b| {
        b.amount.cmp(&a.amount).then_with(|| (&a.namespace, &a.workload).cmp(&(&b.namespace, &b.workload)))
    });
    rows
}

fn line(category: &str, description: &str, quantity: Option<f64>, unit: &str) -> Line {
    Line {
        category: category.to_string(),
        description: description.to_string(),
        quantity: quantity.map(|q| (q * 100.0).round() / 100.0),
        unit: quantity.map(|_| unit.to_string()),
        unit_price: None,
        amount: Cents(0),
    }
}

/// The unit price a line prints: `amount / quantity` (the quantity as printed, to the
/// hundredth) with the fewest decimals, at least 4, at which the printed quantity × the
/// printed price rounds (half away from zero) to the amount's cent — so a client who checks
/// a line's arithmetic finds its amount. Twelve decimals always do for quantities below
/// ten billion, so the search ends there.
pub fn unit_price(quantity: Option<f64>, amount: Cents) -> Option<String> {
    let hundredths = quantity.map(|q| (q * 100.0).round() as i128).filter(|h| *h > 0)?;
    let cents = i128::from(amount.0);
    let divide = |n: i128, d: i128| (n.abs() + d / 2) / d * n.signum();
    (4..=12u32)
        .map(|decimals| {
            let scale = 10i128.pow(decimals);
            // The price in units of 10^-decimals dollars: cents × 10^decimals / (quantity × 100) × 100.
            let price = divide(cents * scale, hundredths);
            (decimals, price, divide(hundredths * price, scale) == cents)
        })
        .find(|(decimals, _, exact)| *exact || *decimals == 12)
        .map(|(decimals, price, _)| {
            let scale = 10i128.pow(decimals);
            let sign = if price < 0 { "-" } else { "" };
            format!(
                "{sign}{}.{:0width$}",
                price.abs() / scale,
                price.abs() % scale,
                width = decimals as usize
            )
        })
}

impl Invoice {
    /// Sets subtotal, markup, tax and total from the lines.
    fn add_up(&mut self) {
        let of =
            |category: &str| self.lines.iter().filter(|l| l.category == category).map(|l| l.amount).sum();
        self.markup = of("markup");
        self.tax = of("tax");
        self.total = self.lines.iter().map(|l| l.amount).sum();
        self.subtotal = self.total - self.markup - self.tax;
    }

    /// The notes lines a PDF and the page show under the totals.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.number.is_empty() {
            notes.push(
                "DRAFT: not issued and not payable; its amounts follow the data until it is issued."
                    .to_string(),
            );
        }
        notes.push(format!(
            "Amounts derived from the cloud bills of billing period {} (AWS Cost and Usage Report 2.0, FOCUS exports), data version {}; {}.",
            self.period, self.data_version, self.settings_version
        ));
        notes.extend(self.conversions.iter().cloned());
        if let Some(rate) = &self.exchange_rate {
            let fixed = if self.number.is_empty() {
                "the rate in force now; issuing fixes it"
            } else {
                "fixed when the invoice was issued"
            };
            notes.push(format!(
                "Amounts in {} converted from {REPORTING_CURRENCY} at {} (in force from {}, source {}): {fixed}.",
                self.currency,
                rate.quote(),
                rate.effective_from,
                rate.source
            ));
        }
        if let Some(original) = &self.refers_to {
            let what = if self.full_credit { "Voids" } else { "Corrects" };
            notes.push(format!("{what} invoice {original}."));
        }
        if !self.reason.is_empty() {
            notes.push(format!("Reason: {}", self.reason));
        }
        notes
    }
}

/// A period's standing charge for one client: the invoice not voided, and every note that
/// refers to it, summed by line category.
#[derive(Debug, Clone)]
pub struct Standing {
    pub invoice: Invoice,
    pub notes: Vec<Invoice>,
}

impl Standing {
    /// The standing invoice of `client` and `period` among `documents` (all of that client
    /// and period), if one stands.
    pub fn find(documents: &[Invoice]) -> Option<Standing> {
        let voided =
            |number: &str| documents.iter().any(|d| d.full_credit && d.refers_to.as_deref() == Some(number));
        let invoice = documents.iter().find(|d| d.kind == Kind::Invoice && !voided(&d.number))?.clone();
        let notes = documents
            .iter()
            .filter(|d| d.refers_to.as_deref() == Some(invoice.number.as_str()))
            .cloned()
            .collect();
        Some(Standing { invoice, notes })
    }

    /// What the client owes now, by category (amounts of the invoice and its notes added).
    pub fn amounts(&self) -> BTreeMap<String, Cents> {
        let mut sums: BTreeMap<String, Cents> = BTreeMap::new();
        for line in std::iter::once(&self.invoice).chain(&self.notes).flat_map(|d| &d.lines) {
            let sum = sums.entry(line.category.clone()).or_default();
            *sum = *sum + line.amount;
        }
        sums
    }

    pub fn total(&self) -> Cents {
        std::iter::once(&self.invoice).chain(&self.notes).map(|d| d.total).sum()
    }
}

/// The note that brings `standing` to `draft`: one line per category whose amount changed,
/// carrying only the difference; a credit note when the total falls, a debit note when it
/// rises. None when nothing changed.
pub fn adjustment(standing: &Standing, draft: &Invoice) -> Option<Invoice> {
    let before = standing.amounts();
    let mut lines = Vec::new();
    for line in &draft.lines {
        let delta = line.amount - before.get(&line.category).copied().unwrap_or_default();
        if delta != Cents(0) {
            lines.push(Line { amount: delta, unit_price: unit_price(line.quantity, delta), ..line.clone() });
        }
    }
    for (category, amount) in
        before.iter().filter(|(c, a)| **a != Cents(0) && !draft.lines.iter().any(|l| &&l.category == c))
    {
        lines.push(Line {
            category: category.clone(),
            description: description_of(category, &standing.invoice),
            quantity: None,
            unit: None,
            unit_price: None,
            amount: -*amount,
        });
    }
    if lines.is_empty() {
        return None;
    }
    let mut note = note_of(&standing.invoice, draft, lines);
    note.kind = if note.total < Cents(0) { Kind::CreditNote } else { Kind::DebitNote };
    note.reason = format!(
        "the period was restated: the charge is now {} instead of {}",
        draft.total.money(&draft.currency),
        standing.total().money(&draft.currency)
    );
    Some(note)
}

/// The credit note that voids `standing`: every category's standing amount taken back.
pub fn void(standing: &Standing, reason: &str) -> Result<Invoice, String> {
    let lines: Vec<Line> = standing
        .amounts()
        .into_iter()
        .filter(|(_, amount)| *amount != Cents(0))
        .map(|(category, amount)| Line {
            description: description_of(&category, &standing.invoice),
            category,
            quantity: None,
            unit: None,
            unit_price: None,
            amount: -amount,
        })
        .collect();
    let mut note = note_of(&standing.invoice, &standing.invoice, lines);
    note.kind = Kind::CreditNote;
    note.full_credit = true;
    note.reason = if reason.is_empty() { "voided".into() } else { reason.to_string() };
    Ok(note)
}

/// A note on `original` with `lines`, versions and buyer from `source`.
fn note_of(original: &Invoice, source: &Invoice, lines: Vec<Line>) -> Invoice {
    let mut note = Invoice {
        number: String::new(),
        refers_to: Some(original.number.clone()),
        status: Status::Draft,
        issued_at: None,
        due_at: None,
        lines,
        pdf_sha256: None,
        actor: String::new(),
        full_credit: false,
        detail: Vec::new(),
        ..source.clone()
    };
    note.add_up();
    note
}

/// The description a category had on the invoice (or the standard one).
fn description_of(category: &str, invoice: &Invoice) -> String {
    invoice
        .lines
        .iter()
        .find(|l| l.category == category)
        .map(|l| l.description.clone())
        .or_else(|| cost_lines().find(|(c, _)| *c == category).map(|(_, d)| d.to_string()))
        .unwrap_or_else(|| category.to_string())
}

/// The number `format` gives the series' `seq`-th document issued in `year`.
pub fn format_number(format: &str, seq: i64, year: i32) -> Result<String, String> {
    let mut out = format.replace("{year}", &year.to_string());
    let Some(start) = out.find("{seq") else {
        return Err(format!("the invoice number format {format:?} has no {{seq}}"));
    };
    let end =
        out[start..].find('}').map(|e| start + e).ok_or_else(|| format!("{format:?}: unclosed {{seq"))?;
    let width = match &out[start + 4..end] {
        "" => 0,
        spec => spec
            .strip_prefix(":0")
            .and_then(|w| w.parse::<usize>().ok())
            .ok_or_else(|| format!("{format:?}: write {{seq}} or {{seq:0N}}"))?,
    };
    out.replace_range(start..=end, &format!("{seq:0width$}"));
    if out.contains('{') || out.contains('}') {
        return Err(format!("{format:?}: only {{year}} and {{seq}} may be in braces"));
    }
    // A number is printed, put in URLs and file names: letters, digits, '-', '_' and '.'.
    if let Some(bad) = out.chars().find(|c| !(c.is_ascii_alphanumeric() || "-_.".contains(*c))) {
        return Err(format!(
            "{format:?}: an invoice number may hold letters, digits, '-', '_' and '.' only, not {bad:?}"
        ));
    }
    if out.len() > 40 {
        return Err(format!("{format:?}: an invoice number is at most 40 characters"));
    }
    Ok(out)
}

/// A document's lines and totals as CSV (the same text every download gives).
pub fn csv(invoice: &Invoice) -> String {
    let mut out =
        String::from("number,kind,client,period,category,description,quantity,unit,unit_price,amount\n");
    let quote = |text: &str| crate::report::csv_cell(text);
    let mut row =
        |category: &str, description: &str, quantity: &str, unit: &str, price: &str, amount: Cents| {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{}\n",
                quote(&invoice.number),
                invoice.kind.as_str(),
                quote(&invoice.client),
                invoice.period,
                category,
                quote(description),
                quantity,
                quote(unit),
                price,
                amount.decimal()
            ));
        };
    for line in &invoice.lines {
        let quantity = line.quantity.map(|q| format!("{q:.2}")).unwrap_or_default();
        row(
            &line.category,
            &line.description,
            &quantity,
            line.unit.as_deref().unwrap_or(""),
            line.unit_price.as_deref().unwrap_or(""),
            line.amount,
        );
    }
    for (category, amount) in [
        ("subtotal", invoice.subtotal),
        ("markup_total", invoice.markup),
        ("tax_total", invoice.tax),
        ("total", invoice.total),
    ] {
        row(category, category, "", "", "", amount);
    }
    out
}

impl Invoice {
    /// The lines and totals as a report table: the XLSX download and the command line's
    /// table are this.
    pub fn table(&self) -> crate::report::table::Table {
        use crate::report::table::{Cell, Table};
        // Dollars as every report shows them; another currency's hundredths as a decimal (the
        // title and the XLSX heading name the currency).
        let usd = |amount: Cents| match self.currency.as_str() {
            REPORTING_CURRENCY => Cell::Usd(Some(Nanos::from_cents(amount))),
            _ => Cell::Decimal(amount.decimal()),
        };
        let rows = self
            .lines
            .iter()
            .map(|line| {
                vec![
                    Cell::Text(line.category.clone()),
                    Cell::Text(line.description.clone()),
                    // As the document prints them, so that they multiply out here too.
                    Cell::Decimal(line.quantity.map(|q| format!("{q:.2}")).unwrap_or_default()),
                    Cell::Text(line.unit.clone().unwrap_or_default()),
                    Cell::Decimal(line.unit_price.clone().unwrap_or_default()),
                    usd(line.amount),
                ]
            })
            .collect();
        let total_row = |label: &str, amount: Cents| {
            let empty = || Cell::Text(String::new());
            vec![Cell::Text(label.into()), empty(), empty(), empty(), empty(), usd(amount)]
        };
        let number = if self.number.is_empty() { "draft".to_string() } else { self.number.clone() };
        Table {
            title: match self.currency.as_str() {
                REPORTING_CURRENCY => format!("{} {number}, {}", self.kind.title(), self.client),
                currency => format!("{} {number}, {}, amounts in {currency}", self.kind.title(), self.client),
            },
            columns: vec!["category", "description", "quantity", "unit", "unit_price", "amount"],
            rows,
            totals: [
                ("subtotal", self.subtotal),
                ("markup", self.markup),
                ("tax", self.tax),
                ("total", self.total),
            ]
            .into_iter()
            // A markup stands only on documents issued before it was folded into the prices.
            .filter(|(label, amount)| *label != "markup" || amount.0 != 0)
            .map(|(label, amount)| total_row(label, amount))
            .collect(),
        }
    }
}

impl Invoice {
    /// The document as an XLSX workbook: its title, the client and period, when it was issued
    /// (or that it is a draft) and the data it was computed from, then its lines and totals.
    pub fn xlsx(&self) -> Result<Vec<u8>, rust_xlsxwriter::XlsxError> {
        let table = self.table();
        let issued = match &self.issued_at {
            Some(at) => format!("Issued {at}, due {}", self.due_at.as_deref().unwrap_or("n/a")),
            None => "Draft: not issued, it changes with the data until it is".to_string(),
        };
        let heading = [
            table.title.clone(),
            format!("Client {}, billing period {}, amounts in {}", self.client, self.period, self.currency),
            format!("{issued}; computed from data version {}", self.data_version),
        ]
        .into_iter()
        .chain(self.exchange_rate.as_ref().map(|rate| {
            format!(
                "Converted from {REPORTING_CURRENCY} at {} (in force from {})",
                rate.quote(),
                rate.effective_from
            )
        }))
        .collect::<Vec<_>>();
        table.xlsx("Invoice", &heading)
    }
}

/// Amounts (currency, cents) added up per currency, for people: `$12,345.67`, or `$12,345.67
/// + EUR 2,000.00` when they are in several (never added across currencies).
pub fn totals_in_words<'a>(amounts: impl IntoIterator<Item = (&'a str, Cents)>) -> String {
    // Dollars first, then the other currencies by code.
    let mut sums: BTreeMap<(bool, &str), Cents> = BTreeMap::new();
    for (currency, amount) in amounts {
        let sum = sums.entry((currency != REPORTING_CURRENCY, currency)).or_default();
        *sum = *sum + amount;
    }
    if sums.is_empty() {
        return Cents(0).usd();
    }
    sums.iter().map(|((_, currency), sum)| sum.money(currency)).collect::<Vec<_>>().join(" + ")
}

/// The register as a table.
pub fn register_table(documents: &[Invoice]) -> crate::report::table::Table {
    use crate::report::table::{Cell, Table};
    let text = |t: &str| Cell::Text(t.to_string());
    let rows = documents
        .iter()
        .map(|d| {
            vec![
                text(&d.number),
                text(d.kind.as_str()),
                text(d.refers_to.as_deref().unwrap_or("")),
                text(&d.client),
                text(&d.period),
                text(d.status.as_str()),
                text(d.issued_at.as_deref().unwrap_or("")),
                text(d.due_at.as_deref().unwrap_or("")),
                Cell::Decimal(d.total.decimal()),
                text(&d.currency),
            ]
        })
        .collect();
    Table {
        title: "Invoices and notes".into(),
        columns: vec![
            "number",
            "kind",
            "refers_to",
            "client",
            "period",
            "status",
            "issued_at",
            "due_at",
            "total",
            "currency",
        ],
        rows,
        totals: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line's printed quantity × printed price, rounded half away from zero, in cents.
    fn multiplied(quantity: f64, price: &str) -> i64 {
        let (units, fraction) = price.trim_start_matches('-').split_once('.').unwrap();
        let scale = 10i128.pow(fraction.len() as u32);
        let price = (units.parse::<i128>().unwrap() * scale + fraction.parse::<i128>().unwrap())
            * if price.starts_with('-') { -1 } else { 1 };
        let product = (quantity * 100.0).round() as i128 * price;
        ((product.abs() + scale / 2) / scale * product.signum()) as i64
    }

    #[test]
    fn a_unit_price_multiplies_out_to_its_amount() {
        // GL-2026-0001's memory and vCPU lines, which printed 0.0111 and 0.0370.
        let memory = unit_price(Some(521_406.48), Cents(581_233)).unwrap();
        assert_eq!(memory, "0.0111474");
        assert_eq!(multiplied(521_406.48, &memory), 581_233);
        let cpu = unit_price(Some(44_093.27), Cents(162_993)).unwrap();
        assert_eq!(multiplied(44_093.27, &cpu), 162_993);
        // A price that is exact at four decimals keeps four; a credit is negative.
        assert_eq!(unit_price(Some(12.0), Cents(3000)).as_deref(), Some("2.5000"));
        assert_eq!(unit_price(Some(12.0), Cents(-3000)).as_deref(), Some("-2.5000"));
        assert_eq!(unit_price(Some(0.004), Cents(100)), None, "no quantity to the hundredth");
        for (quantity, cents) in
            [(1.0, 1), (3.0, 100), (0.01, 999_999), (9_876_543.21, 12_345_678_901), (7.77, -1)]
        {
            let price = unit_price(Some(quantity), Cents(cents)).unwrap();
            assert_eq!(multiplied(quantity, &price), cents, "{quantity} × {price}");
        }
    }
    use crate::store::{CostRollup, PeriodRollup};

    fn rollups(charge: ClientRollup, costs: Vec<CostRollup>) -> Rollups {
        Rollups {
            period: PeriodRollup {
                period: "2026-10".into(),
                settings: "{}".into(),
                ..PeriodRollup::default()
            },
            costs,
            clients: vec![charge],
            ..Rollups::default()
        }
    }

    fn cost(class: &str, gpu_split: i64, hours: f64) -> CostRollup {
        CostRollup {
            client: "acme".into(),
            workload_class: WorkloadClass::named(class),
            gpu_split_nanos: gpu_split,
            gpu_hours_allocated: hours,
            ..CostRollup::default()
        }
    }

    /// The markup is shared among the lines in proportion to their cost, and the lines
    /// rounded once to the cent by largest remainder add up to the charge rounded once.
    #[test]
    fn lines_carry_the_markup_add_up_to_the_charge_rounded_once_and_tax_is_on_the_subtotal() {
        let charge = ClientRollup {
            client: "acme".into(),
            direct_cost_nanos: 30_003_333_333 + 20_003_333_333,
            shared_idle_nanos: 10_003_333_334,
            markup_basis_points: 1_000,
            markup_nanos: 6_001_000_000,
            ..ClientRollup::default()
        };
        // Cost: GPU training 30.003333333, CPU 10.001666666 (the pods' vCPU split), memory the
        // rest of the pods' split cost 10.001666667, idle 10.003333334: 60.01. The markup 6.001
        // goes a tenth to each: 33.003666666, 11.001833333, 11.001833334 and 11.003666667
        // (nano-dollars left over by largest remainder), 66.011 in all → $66.01; the floors
        // add up to $66.00 and the cent left goes to idle (.3666667 of a cent).
        let costs = vec![CostRollup {
            cpu_split_nanos: 10_001_666_666,
            vcpu_hours: 100.0,
            memory_gb_hours: 400.0,
            ..cost("training", 30_003_333_333, 12.0)
        }];
        let billing = BillingDetails { tax_ppm: 200_000, ..BillingDetails::default() };
        let draft = draft(&rollups(charge, costs), "acme", &billing, &Seller::default(), "v1", None).unwrap();
        let amounts: Vec<(&str, i64)> =
            draft.lines.iter().map(|l| (l.category.as_str(), l.amount.0)).collect();
        assert_eq!(
            amounts,
            [
                ("gpu_training", 3_300),
                ("cpu", 1_100),
                ("memory", 1_100),
                ("shared_idle", 1_101),
                ("tax", 1_320)
            ]
        );
        assert_eq!(
            (draft.subtotal.0, draft.markup.0, draft.tax.0, draft.total.0),
            (6_601, 0, 1_320, 7_921),
            "no markup line: it is in the prices; tax is 20 % of $66.01"
        );
        assert_eq!(draft.lines[0].quantity, Some(12.0));
        assert_eq!(draft.lines[0].unit_price.as_deref(), Some("2.7500"));
        // $11.00 for 100 vCPU-hours and for 400 GB-hours of memory.
        let quantities: Vec<_> = draft.lines[1..3]
            .iter()
            .map(|l| (l.quantity, l.unit.as_deref(), l.unit_price.as_deref()))
            .collect();
        assert_eq!(
            quantities,
            [
                (Some(100.0), Some("vCPU-hour"), Some("0.1100")),
                (Some(400.0), Some("GB-hour"), Some("0.0275"))
            ]
        );
    }

    /// A client invoiced in euros: each line's charge converted before the one rounding, so
    /// the lines add up to the converted charge, multiply out, and the rate is on the draft.
    #[test]
    fn an_invoice_in_euros_converts_each_line_and_adds_up_to_the_converted_charge() {
        let charge = ClientRollup {
            client: "acme".into(),
            direct_cost_nanos: 200_000_000_000,
            shared_idle_nanos: 16_840_000_000,
            ..ClientRollup::default()
        };
        let costs = vec![CostRollup { cpu_split_nanos: 0, ..cost("training", 200_000_000_000, 100.0) }];
        let rate = FxRate::new("EUR", "USD", "1.0842", "2026-10".parse().unwrap(), "cli").unwrap();
        let billing =
            BillingDetails { currency: "EUR".into(), tax_ppm: 190_000, ..BillingDetails::default() };
        let rollups = rollups(charge, costs);
        let eur = draft(&rollups, "acme", &billing, &Seller::default(), "v1", Some(&rate)).unwrap();
        // $200 ÷ 1.0842 = EUR 184.467810… → 184.47; $16.84 ÷ 1.0842 = EUR 15.532189… → 15.53;
        // $216.84 ÷ 1.0842 = EUR 200.00 exactly. Tax 19 % of 200.00 = 38.00.
        let amounts: Vec<(&str, i64)> = eur.lines.iter().map(|l| (l.category.as_str(), l.amount.0)).collect();
        assert_eq!(amounts, [("gpu_training", 18_447), ("shared_idle", 1_553), ("tax", 3_800)]);
        assert_eq!((eur.currency.as_str(), eur.subtotal.0, eur.total.0), ("EUR", 20_000, 23_800));
        // 100 GPU-hours at EUR 1.8447 is EUR 184.47.
        assert_eq!(eur.lines[0].unit_price.as_deref(), Some("1.8447"));
        assert_eq!(eur.exchange_rate.as_ref().map(|r| r.rate.as_str()), Some("1.0842"));
        assert!(eur.notes().iter().any(|n| n.contains("converted from USD at 1 EUR = 1.0842 USD")));
        // Without its rate, or with one for a dollar invoice, there is no draft.
        assert!(draft(&rollups, "acme", &billing, &Seller::default(), "v1", None).is_err());
        let usd = BillingDetails::default();
        assert!(draft(&rollups, "acme", &usd, &Seller::default(), "v1", Some(&rate)).is_err());
    }

    /// A client with cost on several clouds: its pod and tagged lines itemized by provider
    /// (AWS's tagged cost is what the other providers' parts leave), the pools' shares not.
    #[test]
    fn a_client_on_several_clouds_gets_its_lines_itemized_by_provider() {
        let billion = 1_000_000_000;
        let mut charge = ClientRollup {
            client: "acme".into(),
            direct_cost_nanos: 100 * billion,
            storage_nanos: 20 * billion,
            other_direct_nanos: 50 * billion,
            non_kubernetes_direct_nanos: 70 * billion,
            shared_idle_nanos: 10 * billion,
            ..ClientRollup::default()
        };
        let elsewhere = BTreeMap::from([
            ("azure".to_string(), [0, 0, 30 * billion]),
            ("gcp".to_string(), [5 * billion, 0, 0]),
        ]);
        charge.set_provider_direct(&elsewhere);
        let costs = vec![CostRollup {
            account: "111111111111".into(),
            cpu_split_nanos: 25 * billion,
            split_cost_nanos: 100 * billion,
            ..cost("training", 60 * billion, 10.0)
        }];
        let lines = priced_lines(&rollups(charge, costs), "acme").unwrap();
        let lines: Vec<(&str, &str, i64)> =
            lines.iter().map(|l| (l.category.as_str(), l.description.as_str(), l.amount.0)).collect();
        assert_eq!(
            lines,
            [
                ("gpu_training.aws", "GPU compute, training workloads, AWS", 6_000),
                ("cpu.aws", "vCPUs reserved by the client's pods, AWS", 2_500),
                ("memory.aws", "Memory reserved by the client's pods, AWS", 1_500),
                ("storage.aws", "Storage tagged to the client, AWS", 1_500),
                ("other_direct.aws", "Other cloud cost tagged to the client, AWS", 2_000),
                ("other_direct.azure", "Other cloud cost tagged to the client, Azure", 3_000),
                ("storage.gcp", "Storage tagged to the client, Google Cloud", 500),
                ("shared_idle", "Share of idle capacity (reserved, not requested)", 1_000),
            ]
        );
    }

    /// A net client's share of AWS's discounts lowers its lines, as the markup raises them.
    #[test]
    fn a_discount_passed_on_is_in_the_prices_too() {
        let charge = ClientRollup {
            client: "acme".into(),
            direct_cost_nanos: 100_000_000_000,
            storage_nanos: 0,
            discount_nanos: -10_000_000_000,
            markup_basis_points: 1_000,
            markup_nanos: 9_000_000_000,
            ..ClientRollup::default()
        };
        // $100 of GPU, $10 of discount, 10 % on the $90 left: $99 charged, on one line.
        let lines =
            priced_lines(&rollups(charge, vec![cost("inference", 100_000_000_000, 50.0)]), "acme").unwrap();
        let lines: Vec<_> =
            lines.iter().map(|l| (l.category.as_str(), l.amount.0, l.unit_price.as_deref())).collect();
        assert_eq!(lines, [("gpu_inference", 9_900, Some("1.9800"))]);
    }

    fn issued(number: &str, lines: &[(&str, i64)]) -> Invoice {
        let charge = ClientRollup { client: "acme".into(), ..ClientRollup::default() };
        let mut invoice = draft(
            &rollups(charge, Vec::new()),
            "acme",
            &BillingDetails::default(),
            &Seller::default(),
            "v1",
            None,
        )
        .unwrap();
        invoice.number = number.into();
        invoice.lines =
            lines.iter().map(|(c, a)| Line { amount: Cents(*a), ..line(c, c, None, "") }).collect();
        invoice.add_up();
        invoice
    }

    #[test]
    fn an_adjustment_carries_only_the_changed_lines_and_a_void_takes_back_what_stands() {
        let original = issued("GL-1", &[("gpu_training", 10_000), ("storage", 500), ("markup", 1_050)]);
        let now = issued("", &[("gpu_training", 9_000), ("network", 200), ("markup", 920)]);
        let standing = Standing::find(std::slice::from_ref(&original)).unwrap();
        let note = adjustment(&standing, &now).unwrap();
        let lines: Vec<(&str, i64)> = note.lines.iter().map(|l| (l.category.as_str(), l.amount.0)).collect();
        assert_eq!(lines, [("gpu_training", -1_000), ("network", 200), ("markup", -130), ("storage", -500)]);
        assert_eq!(
            (note.kind, note.total.0, note.refers_to.as_deref()),
            (Kind::CreditNote, -1_430, Some("GL-1"))
        );
        assert_eq!(original.total + note.total, now.total);

        let mut note = note;
        note.number = "GL-2".into();
        let documents = vec![original.clone(), note.clone()];
        let standing = Standing::find(&documents).unwrap();
        assert!(adjustment(&standing, &now).is_none(), "nothing changed since the note");
        let mut credit = void(&standing, "").unwrap();
        assert_eq!(credit.total, -now.total);
        credit.number = "GL-3".into();
        let documents = with_status(vec![original, note, credit]);
        let statuses: Vec<&str> = documents.iter().map(|d| d.status.as_str()).collect();
        assert_eq!(statuses, ["credited", "issued", "issued"]);
        assert!(Standing::find(&documents).is_none(), "a voided invoice no longer stands");
    }

    /// Ten days of October billed, $100.00 charged: the run rate says $310.00 for the month.
    #[test]
    fn a_budget_is_checked_against_the_run_rate_of_the_days_billed() {
        let charge = ClientRollup {
            client: "acme".into(),
            direct_cost_nanos: 100_000_000_000,
            ..ClientRollup::default()
        };
        let october: crate::period::Period = "2026-10".parse().unwrap();
        let day =
            CostRollup { client: "acme".into(), day: october.start() + 9 * 86_400, ..CostRollup::default() };
        let check = BudgetCheck::new(&rollups(charge, vec![day]), "acme", Cents(30_000)).unwrap();
        assert_eq!(
            (check.actual, check.forecast, check.days_covered, check.days_in_month),
            (Cents(10_000), Cents(31_000), 10, 31)
        );
        assert!(check.over(), "$310 forecast against a $300 budget");
        assert_eq!(check.describe(), "$100.00 of $300.00 (10 of 31 days); forecast $310.00");
    }

    #[test]
    fn numbers_follow_the_format() {
        assert_eq!(format_number(DEFAULT_NUMBER_FORMAT, 7, 2026).unwrap(), "GL-2026-0007");
        assert_eq!(format_number("INV{seq}", 12_345, 2026).unwrap(), "INV12345");
        assert!(format_number("INV-{year}", 1, 2026).is_err());
        assert!(format_number("{seq:4}", 1, 2026).is_err());
        // Nothing that breaks a header, a URL or a file name (#37: CR/LF made every download
        // of an issued invoice answer 500).
        for bad in ["NW\r\n{seq}", "NW\"{seq}", "NW/{seq}", "NW {seq}", "NW-{seq}-ü"] {
            assert!(format_number(bad, 1, 2026).is_err(), "{bad:?}");
        }
        assert_eq!(format_number("NW_{year}.{seq:03}", 1, 2026).unwrap(), "NW_2026.001");
    }

    #[test]
    fn cents_read_and_write_exact_decimals() {
        assert_eq!("12.5".parse::<Cents>().unwrap(), Cents(1_250));
        assert_eq!("-0.07".parse::<Cents>().unwrap().decimal(), "-0.07");
        assert!("1.234".parse::<Cents>().is_err());
        assert_eq!(Cents::from_nanos(4_999_999).0, 0);
        assert_eq!(Cents::from_nanos(-5_000_000).0, -1);
        assert_eq!(Cents(-123_456).usd(), "-$1,234.56");
        assert_eq!(Cents(-123_456).money("EUR"), "-EUR 1,234.56");
        assert_eq!(Cents(7).money("USD"), "$0.07");
    }
}
