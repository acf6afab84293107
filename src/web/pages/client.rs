//! One client's page. The agency sees its chargeback for the range asked for, how it came
//! about (the policy and markup in force, its workloads), and its trend over every computed
//! month with the cost to serve and the margin. The client's own users see "Your charges" at
//! the same URL: what it is charged, at its prices, never what it cost the agency. Same
//! filters and twins (JSON, CSV, XLSX) as the other pages.

use std::collections::BTreeMap;

use axum::extract::Path;
use axum::response::Response;
use serde_json::json;

use super::WebError;
use super::{Card, Content, Opening, answer, money, percent, url_escape, usd};
use crate::domain::settings::{ChargeBasis, Pool, policy_text};
use crate::money::Cents;
use crate::report::rollup::{self, Report, RollupRange};
use crate::report::table::{Cell, Nanos, Table};
use crate::store::ClientRollup;
use crate::web::charts;

fn total(c: &ClientRollup) -> i64 {
    c.total_nanos()
}

/// `/clients/{client}`: the client's chargeback, workloads and monthly trend.
pub async fn page(Path(client): Path<String>, page: Opening) -> Result<Response, WebError> {
    let Opening { state, filters, headers, view } = page;
    // The rollups are already scoped: a client outside the viewer's scope is not among them
    // (client users), or only as part of "(other clients)" (managers).
    let known = view.computed.iter().any(|r| r.clients.iter().any(|c| c.client == client));
    if !known {
        let mut names: Vec<String> =
            view.computed.iter().flat_map(|r| r.clients.iter().map(|c| c.client.clone())).collect();
        names.sort();
        names.dedup();
        // A name that differs only in case is the likely one: offer it first.
        names.sort_by_key(|name| !name.eq_ignore_ascii_case(&client));
        // A scoped viewer is not told the name back: the answer is the same whether or not
        // a client outside their scope has it.
        let scoped = view.viewer.scope != crate::auth::Scope::All;
        let message = match names.first().filter(|n| n.eq_ignore_ascii_case(&client)) {
            _ if scoped => "No client by that name among the clients your account sees.".to_string(),
            Some(close) => {
                format!("No client named \"{client}\" in any computed month; did you mean \"{close}\"?")
            }
            None => format!("No client named \"{client}\" in any computed month."),
        };
        let choices = names.iter().map(|n| format!("/clients/{}", url_escape(n))).collect();
        return Err(WebError::NotFound { message, choices });
    }
    let path = format!("/clients/{}", url_escape(&client));
    let mut content = Content::new(&format!("Client {client}"), "clients", &path);
    let Some(range) = &view.range else {
        return answer(&state, &filters, &headers, &view, content).await;
    };
    // A client user sees what it is charged, never what it cost the agency.
    if view.viewer.role == crate::auth::Role::Client {
        content = own_view(&state, &client, range, &view.computed, content).await?;
        return answer(&state, &filters, &headers, &view, content).await;
    }
    let clients = format!("/clients?{}", super::range_query(range));
    content.crumbs = vec![("Clients".into(), Some(clients)), (client.clone(), None)];
    let sum = rollup::client_sums(range).remove(&client).unwrap_or_default();
    let card = |label: &str, value: String| Card { label: label.into(), value, ..Card::default() };
    content.cards = vec![card("Direct cost (its pods and tagged resources)", usd(sum.direct_total_nanos()))];
    content.cards.extend(sum.shares().iter().map(|(pool, nanos)| card(pool.card(), usd(nanos))));
    content.cards.extend([
        card(
            "Markup",
            format!(
                "{} ({})",
                usd(sum.markup_nanos),
                percent(Some(sum.markup_basis_points as f64 / 10_000.0))
            ),
        ),
        card("Total to charge", usd(total(&sum))),
    ]);
    if sum.discount_nanos != 0 {
        let discount = card("Its share of AWS's discounts (charged net)", usd(sum.discount_nanos));
        let at = content.cards.len() - 2;
        content.cards.insert(at, discount);
    }
    budget_card(&state, &client, range, &mut content).await?;
    content.notes.push(format!(
        "Rules in force: \"{}\" — {client} {}. Charged {}. Markup {} applies to direct and shared cost{}. \
         Totals cover the whole billing months in the range.",
        sum.share_policy,
        policy_text(&sum.share_policy),
        match sum.charge_basis {
            ChargeBasis::Amortized => "on the amortized bill (AWS's discounts are not passed on)",
            ChargeBasis::Net => "net of AWS's discounts (EDP, private pricing), its share in proportion to its direct and shared cost",
        },
        percent(Some(sum.markup_basis_points as f64 / 10_000.0)),
        if sum.charge_basis == ChargeBasis::Net { " less its discount" } else { "" },
    ));
    content.json.insert("client".into(), json!(client));
    content.json.insert("share_policy".into(), json!(sum.share_policy));
    content.json.insert("markup_rate".into(), json!(sum.markup_basis_points as f64 / 10_000.0));
    content.json.insert("charge_basis".into(), json!(sum.charge_basis.as_str()));
    content.json.insert("total_cost".into(), json!(Nanos(total(&sum)).decimal()));
    // What the direct cost paid for: what an invoice itemizes.
    let line = |what: &str, nanos: i64| vec![Cell::Text(what.into()), money(nanos)];
    let breakdown = Table {
        title: format!("{client}: what the charge is made of"),
        totals: vec![line("Total to charge", total(&sum))],
        columns: vec!["line", "cost"],
        rows: [
            line("GPU (pods' accelerator split cost)", sum.gpu_split_nanos),
            line("CPU (pods' vCPU split cost)", sum.cpu_split_nanos),
            line("Memory (pods' memory split cost)", sum.memory_split_nanos),
            line("Storage (tagged S3, EBS, EFS, FSx)", sum.storage_nanos),
            line("Network (tagged data transfer)", sum.network_nanos),
            line("Other tagged cost", sum.other_direct_nanos),
        ]
        .into_iter()
        .chain(sum.shares().iter().map(|(pool, nanos)| line(pool.line(), nanos)))
        .chain((sum.discount_nanos != 0).then(|| line("Its share of AWS's discounts", sum.discount_nanos)))
        .chain([line("Markup", sum.markup_nanos)])
        .collect(),
    };
    content.table(
        "breakdown",
        &format!(
            "What the charge is made of; of the pods' cost, training {} and inference {}",
            usd(sum.training_nanos),
            usd(sum.inference_nanos)
        ),
        Report::of(breakdown),
    );

    // Every computed month, for the trend.
    let months: Vec<&ClientRollup> =
        view.computed.iter().flat_map(|r| r.clients.iter().filter(|c| c.client == client)).collect();
    let labels: Vec<String> = months.iter().map(|c| c.period.clone()).collect();
    let totals: Vec<f64> = months.iter().map(|c| total(c) as f64 / 1e9).collect();
    content.charts.push(charts::bars(&format!("{client}: total charged by month"), "USD", &labels, &totals));
    // What stands invoiced for each month (the invoice with its notes), beside the charge.
    let invoices = standing_invoices(&state, &client).await?;
    let trend = Table {
        title: format!("{client} by month"),
        totals: Vec::new(),
        columns: ["month", "share_policy", "direct_cost"]
            .into_iter()
            .chain(Pool::ALL.map(Pool::column))
            .chain(["markup", "total_cost", "cost_to_serve", "margin_rate", "invoice", "invoiced_total"])
            .collect(),
        rows: months
            .iter()
            .map(|c| {
                let cost = c.direct_total_nanos() + c.shared_total_nanos() + c.discount_nanos;
                let margin = (total(c) != 0).then(|| c.markup_nanos as f64 / total(c) as f64);
                let standing = invoices.iter().find(|s| s.invoice.period == c.period);
                let shares = c.shares().iter().map(|(_, nanos)| money(nanos)).collect::<Vec<_>>();
                [
                    Cell::Text(c.period.clone()),
                    Cell::Text(c.share_policy.clone()),
                    money(c.direct_total_nanos()),
                ]
                .into_iter()
                .chain(shares)
                .chain([
                    money(c.markup_nanos),
                    money(total(c)),
                    money(cost),
                    Cell::Ratio(margin),
                    Cell::Text(standing.map(|s| s.invoice.number.clone()).unwrap_or_default()),
                    Cell::Usd(standing.map(|s| Nanos::from_cents(s.total()))),
                ])
                .collect()
            })
            .collect(),
    };
    let trend = Report::of(trend);
    content.table(
        "months",
        "By month (every computed month; the numbers behind the chart): what it cost to serve, the \
         margin (markup over the charge) and what stands invoiced; a month links to its invoice",
        trend,
    );
    // Each month links to what an invoice of it is: its draft (and from there what was issued).
    let invoice_links = months
        .iter()
        .map(|c| {
            let (client, period) = (url_escape(&client), &c.period);
            crate::invoice::invoiceable(&c.client)
                .then(|| format!("/invoices/draft?client={client}&period={period}"))
        })
        .collect();
    if let Some(table) = content.tables.last_mut() {
        table.3 = invoice_links;
    }
    // The workloads report, kept to this client's rows; a CronJob's runs are one row.
    let mut workloads = rollup::workload_families(range);
    let column = workloads.table.column("client").unwrap_or(usize::MAX);
    workloads.table.rows.retain(|row| matches!(row.get(column), Some(Cell::Text(c)) if *c == client));
    workloads.extra.clear();
    content.table("workloads", &format!("{client}'s workloads in {}", range.label), workloads);
    answer(&state, &filters, &headers, &view, content).await
}

/// The invoice standing for each month of `client` that has one.
async fn standing_invoices(
    state: &crate::web::AppState,
    client: &str,
) -> Result<Vec<crate::invoice::Standing>, WebError> {
    let documents = state.store.documents(Some(client), None).await?;
    let periods: std::collections::BTreeSet<&str> = documents.iter().map(|d| d.period.as_str()).collect();
    Ok(periods
        .iter()
        .filter_map(|p| {
            let family: Vec<_> = documents.iter().filter(|d| d.period == *p).cloned().collect();
            crate::invoice::Standing::find(&family)
        })
        .collect())
}

/// The latest whole month of the range against the client's budget, if it has one: a card,
/// and `budget` in the JSON.
async fn budget_card(
    state: &crate::web::AppState,
    client: &str,
    range: &RollupRange,
    content: &mut Content,
) -> Result<(), WebError> {
    let history = state.store.settings().await?;
    let latest = range.parts.iter().rev().find(|(_, whole)| *whole).map(|(rollups, _)| rollups);
    if let Some(rollups) = latest
        && let Ok(period) = rollups.period.period.parse()
        && let Some(budget) =
            history.budget(client, period).map_err(|e| WebError::bad("client", e, Vec::new()))?
        && let Some(check) = crate::invoice::BudgetCheck::new(rollups, client, budget)
    {
        content.cards.push(Card {
            label: format!("Budget {period}"),
            value: check.describe(),
            previous: String::new(),
            target: format!("at most {} a month", budget.usd()),
            status: if check.over() { "bad" } else { "ok" }.into(),
            ..Card::default()
        });
        content.json.insert(
            "budget".into(),
            json!({"period": period.to_string(), "budget": budget, "actual": check.actual, "forecast": check.forecast, "over": check.over()}),
        );
    }
    Ok(())
}

/// A client user's own page, "Your charges": the total first, what it is charged for (the
/// lines its invoices carry, at its prices, over the whole months of the range), its budget,
/// its months with what stands invoiced, and its workloads' use. Nothing of what the agency
/// pays: no cost, markup, margin or discount (the lines already carry the markup and any
/// discount passed on, as its invoices do).
async fn own_view(
    state: &crate::web::AppState,
    client: &str,
    range: &RollupRange,
    computed: &[std::sync::Arc<crate::store::Rollups>],
    mut content: Content,
) -> Result<Content, WebError> {
    content.title = format!("Your charges: {client}");
    let whole: Vec<&crate::store::Rollups> =
        range.parts.iter().filter(|(_, whole)| *whole).map(|(rollups, _)| rollups.as_ref()).collect();
    let invoices = standing_invoices(state, client).await?;
    let fx = state.store.fx_rates().await?;
    let (currency, rates) = own_currency(state, client, computed, &invoices, &fx, &mut content).await?;
    let rate_of = |month: &str| rates.get(month).cloned();
    // The lines of every whole month, added up by kind of use.
    let mut lines: Vec<crate::invoice::Line> = Vec::new();
    let mut workloads: BTreeMap<(String, String, String), (f64, Cents)> = BTreeMap::new();
    for rollups in &whole {
        let rate = rate_of(&rollups.period.period);
        let Ok(month) = crate::invoice::priced_lines_in(rollups, client, rate.as_ref()) else { continue };
        let bills = state.store.bills(Some(&rollups.period.period)).await?;
        for said in crate::invoice::bill_conversions(&month, &bills, &fx) {
            if !content.notes.contains(&said) {
                content.notes.push(said);
            }
        }
        for line in month {
            match lines.iter_mut().find(|l| l.category == line.category) {
                Some(sum) => {
                    sum.amount = sum.amount + line.amount;
                    sum.quantity = match (sum.quantity, line.quantity) {
                        (None, None) => None,
                        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
                    };
                }
                None => lines.push(line),
            }
        }
        for row in crate::invoice::priced_workloads_in(rollups, client, rate.as_ref()).unwrap_or_default() {
            let entry = workloads.entry((row.namespace, row.workload, row.workload_class)).or_default();
            entry.0 += row.gpu_hours;
            entry.1 = entry.1 + row.amount;
        }
    }
    for line in &mut lines {
        line.quantity = line.quantity.map(|q| (q * 100.0).round() / 100.0);
        line.unit_price = crate::invoice::unit_price(line.quantity, line.amount);
    }
    let charged: Cents = lines.iter().map(|l| l.amount).sum();
    let gpu_hours: f64 =
        lines.iter().filter(|l| l.unit.as_deref() == Some("GPU-hour")).filter_map(|l| l.quantity).sum();
    let card = |label: &str, value: String| Card { label: label.into(), value, ..Card::default() };
    content.cards = vec![
        card(&format!("Charged for {}", range.label), charged.money(&currency)),
        card("GPU-hours", crate::report::table::thousands(gpu_hours, 2)),
    ];
    let months_in_range: Vec<&str> = whole.iter().map(|r| r.period.period.as_str()).collect();
    let standing: Vec<(&str, Cents)> = invoices
        .iter()
        .filter(|s| months_in_range.contains(&s.invoice.period.as_str()))
        .map(|s| (s.invoice.currency.as_str(), s.total()))
        .collect();
    let invoiced = if standing.is_empty() {
        "Not invoiced yet".to_string()
    } else {
        crate::invoice::totals_in_words(standing)
    };
    content.cards.push(card("Invoiced (with tax)", invoiced));
    budget_card(state, client, range, &mut content).await?;
    let cents = |amount: Cents| amount_cell(&currency, amount);
    let breakdown = Table {
        title: format!("{client}: what you are charged for"),
        columns: vec!["line", "quantity", "unit", "unit_price", "amount"],
        rows: lines
            .iter()
            .map(|l| {
                vec![
                    Cell::Text(l.description.clone()),
                    Cell::Decimal(l.quantity.map(|q| format!("{q:.2}")).unwrap_or_default()),
                    Cell::Text(l.unit.clone().unwrap_or_default()),
                    Cell::Decimal(l.unit_price.clone().unwrap_or_default()),
                    cents(l.amount),
                ]
            })
            .collect(),
        totals: vec![vec![
            Cell::Text("Total before tax".into()),
            Cell::Text(String::new()),
            Cell::Text(String::new()),
            Cell::Text(String::new()),
            cents(charged),
        ]],
    };
    content.table(
        "breakdown",
        &format!(
            "What you are charged for in {}, as your invoices put it: each line's quantity × its \
             unit price is its amount; shares of the platform and of idle capacity follow your \
             agreement",
            range.label
        ),
        Report::of(breakdown),
    );
    // Its invoice lines read as one card each on a phone, as on the invoice itself.
    content.stack("breakdown");
    let months: Vec<&ClientRollup> =
        computed.iter().flat_map(|r| r.clients.iter().filter(|c| c.client == client)).collect();
    let labels: Vec<String> = months.iter().map(|c| c.period.clone()).collect();
    // Each month in the invoices' currency at its rate (the one its invoice was issued at).
    let charged_in = |c: &ClientRollup| match rate_of(&c.period) {
        Some(rate) => rate.from_reporting(total(c)),
        None => total(c),
    };
    let totals: Vec<f64> = months.iter().map(|c| charged_in(c) as f64 / 1e9).collect();
    content.charts.push(charts::bars(&format!("{client}: charged by month"), &currency, &labels, &totals));
    let trend = Table {
        title: format!("{client} by month"),
        totals: Vec::new(),
        columns: vec!["month", "charged", "invoice", "invoiced_total"],
        rows: months
            .iter()
            .map(|c| {
                let standing = invoices.iter().find(|s| s.invoice.period == c.period);
                vec![
                    Cell::Text(c.period.clone()),
                    amount_cell(&currency, Cents::from_nanos(charged_in(c))),
                    Cell::Text(standing.map(|s| s.invoice.number.clone()).unwrap_or_default()),
                    match standing {
                        Some(s) => amount_cell(&s.invoice.currency, s.total()),
                        None => Cell::Usd(None),
                    },
                ]
            })
            .collect(),
    };
    content.table(
        "months",
        "By month (every month billed so far; the numbers behind the chart) with what stands \
         invoiced; a month links to its invoices",
        Report::of(trend),
    );
    let links = months
        .iter()
        .map(|c| Some(format!("/invoices?client={}&period={}", url_escape(client), c.period)))
        .collect();
    if let Some(table) = content.tables.last_mut() {
        table.3 = links;
    }
    let mut rows: Vec<_> = workloads.into_iter().collect();
    rows.sort_by(|a, b| b.1.1.cmp(&a.1.1).then_with(|| a.0.cmp(&b.0)));
    let usage = Table {
        title: format!("{client}'s workloads in {}", range.label),
        totals: Vec::new(),
        columns: vec!["namespace", "workload", "workload_class", "gpu_hours", "charged"],
        rows: rows
            .into_iter()
            .map(|((namespace, workload, class), (hours, amount))| {
                vec![
                    Cell::Text(namespace),
                    Cell::Text(workload),
                    Cell::Text(class),
                    Cell::Hours((hours * 100.0).round() / 100.0),
                    cents(amount),
                ]
            })
            .collect(),
    };
    content.table(
        "workloads",
        "Your workloads: the GPU-hours each was allocated and its part of the GPU, CPU and memory lines",
        Report::of(usage),
    );
    content.json.insert("client".into(), json!(client));
    content.json.insert("total_charged".into(), json!(charged.decimal()));
    content.json.insert("currency".into(), json!(currency));
    Ok(content)
}

/// An amount a client reads: dollars as every page shows them, another currency's hundredths
/// as a decimal (the page names the currency).
fn amount_cell(currency: &str, amount: Cents) -> Cell {
    match currency {
        crate::domain::fx::REPORTING_CURRENCY => Cell::Usd(Some(Nanos::from_cents(amount))),
        _ => Cell::Decimal(amount.decimal()),
    }
}

/// The currency a client's own view reads in, its invoices' (its billing details'), and the
/// rate of each computed month: the one its standing invoice was issued at, else the one in
/// force for the month. When a month has neither, the view stays in dollars and says why.
async fn own_currency(
    state: &crate::web::AppState,
    client: &str,
    computed: &[std::sync::Arc<crate::store::Rollups>],
    invoices: &[crate::invoice::Standing],
    rates: &[crate::domain::fx::FxRate],
    content: &mut Content,
) -> Result<(String, BTreeMap<String, crate::domain::fx::FxRate>), WebError> {
    use crate::domain::fx::{REPORTING_CURRENCY, invoice_rate};
    let currency = state.store.billing_details().await?.remove(client).unwrap_or_default().currency;
    if currency == REPORTING_CURRENCY {
        return Ok((currency, BTreeMap::new()));
    }
    let mut by_month = BTreeMap::new();
    for month in computed.iter().map(|r| r.period.period.as_str()) {
        let issued = invoices.iter().find(|s| s.invoice.period == month && s.invoice.currency == currency);
        let rate = match issued {
            Some(standing) => standing.invoice.exchange_rate.clone(),
            None => invoice_rate(rates, &currency, month).ok().flatten(),
        };
        let Some(rate) = rate else {
            content.notes.push(format!(
                "Your invoices are in {currency}, but {month} has no exchange rate yet: amounts here are in {REPORTING_CURRENCY}."
            ));
            return Ok((REPORTING_CURRENCY.to_string(), BTreeMap::new()));
        };
        by_month.insert(month.to_string(), rate);
    }
    content.notes.push(format!(
        "Amounts in {currency}, each month at the rate its invoice was issued at (or, not invoiced yet, the rate in force for it)."
    ));
    Ok((currency, by_month))
}
