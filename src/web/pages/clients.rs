//! Clients (agency): chargeback by client with the policy in force.

use axum::response::Response;

use super::*;
use crate::engine::classify::PLATFORM;
use crate::report::rollup::{self};
use crate::report::table::Cell;
use crate::store::PeriodRollup;

/// Clients (agency): chargeback with the policy in force.
pub async fn clients(page: Opening) -> Result<Response, WebError> {
    let Opening { state, filters, headers, view } = page;
    let range = &view.range;
    let mut content = Content::new("Clients", "clients", "/clients");
    content.account_filter = true;
    if let Some(range) = &range
        && let Some(narrowed) = range.narrowed_to()
    {
        let report = rollup::clients(range);
        // The platform namespaces' pods are no client's: no client page to link to.
        let links = client_links(&report, range)
            .into_iter()
            .zip(report.table.rows.iter())
            .map(|(link, row)| link.filter(|_| !matches!(row.first(), Some(Cell::Text(c)) if c == PLATFORM)))
            .collect();
        content.tables.push((
            "clients".into(),
            format!("Kubernetes cost by client in {narrowed}; each client links to its detail"),
            report,
            links,
        ));
        content.notes.push(
            "With a provider or an account chosen, each client's cost is that of its pods on its instances: \
             direct (split) cost as the chargeback counts it, and the unused cost its pods were given, \
             which the chargeback pools as idle capacity. The chargeback's shared pools (platform namespaces, idle capacity, unallocated EC2, \
             untagged cluster cost) are charged on the whole fleet and are not split by account: choose \
             \"all accounts\" for the chargeback."
                .into(),
        );
        return answer(&state, &filters, &headers, &view, content).await;
    }
    if let Some(range) = &range {
        if range.periods().all(|(_, whole)| !whole) {
            // Shares of a pool are fixed per billing month (the pools, the markup and the
            // settings in force are monthly), so a part of a month has no chargeback of its own.
            content.notes.push(format!(
                "Chargeback is computed per whole billing month, with the settings in force for that month, \
                 and {} holds no whole month: choose a month, or a range from the first of a month to the \
                 first of a later one.",
                range.label
            ));
        }
        let report = rollup::clients(range);
        let links = client_links(&report, range);
        content.charts.push(chargeback_chart(&state, range, &report, &links).await?);
        // What a manager reads first: cost, shares, markup and the charge; the pools' shares and
        // the cost by resource are one link away (and always in the downloads).
        content.default_columns(
            "clients",
            &["direct_cost", "shared_cost", "markup_rate", "markup", "discount", "total_cost"],
        );
        content.tables.push((
            "clients".into(),
            "Chargeback by client (direct cost, shares of the four shared pools, markup); each client links to its detail"
                .into(),
            report,
            links,
        ));
        if view.accounts.len() > 1 {
            let caption = "Kubernetes cost by client and usage account: direct (split) cost as the chargeback \
                           counts it, unused cost (pooled as idle there), and their sum; choose an account above \
                           to narrow the page to it";
            content.table("accounts", caption, rollup::clients_by_account(range));
        }
        // A single month whose chargeback a later compute changed: what changed, per client.
        let single: Vec<&PeriodRollup> =
            range.periods().filter(|(_, whole)| *whole).map(|(p, _)| p).collect();
        if let [period] = single.as_slice()
            && range.periods().count() == 1
            && let Some(stored) = state.store.chargeback_snapshots(&period.period).await?.first()
        {
            let snapshot = &crate::store::ChargebackSnapshot {
                clients: view.viewer.scope.clients_of(&stored.clients),
                ..stored.clone()
            };
            let current: Vec<_> = range.clients().cloned().collect();
            content.tables.push((
                "restatement".into(),
                format!(
                    "Restated: {}'s chargeback changed after it was first computed (a re-delivered bill, new \
                     metrics or a setting for that month); before and after, per client",
                    period.period
                ),
                rollup::restatement(&current, snapshot),
                Vec::new(),
            ));
        }
        content.notes.push(
            "Direct cost is each client's pods' split cost plus the AWS resources tagged to it (user_client). \
             Four pools are shared, each by its own rule (by GPU cost, by direct cost, or even; \
             `gpuledger pools set`): the platform namespaces, the idle capacity AWS pushed down to pods, \
             EC2 not allocated to pods, and cluster cost no client's tag claims (control plane, root \
             volumes). Shares are exact to the nano-dollar (largest remainder) and add up to each pool; \
             (unassigned) takes part by its own weight, an exempt client's shares stay with (house). \
             Clients, (house) and (unassigned) add up to the whole amortized bill."
                .into(),
        );
    }
    answer(&state, &filters, &headers, &view, content).await
}

/// Each client row's link to the client's detail for the same range.
fn client_links(report: &crate::report::rollup::Report, range: &RollupRange) -> Vec<Option<String>> {
    report
        .table
        .rows
        .iter()
        .map(|row| match row.first() {
            Some(Cell::Text(client)) => {
                Some(format!("/clients/{}?{}", url_escape(client), range_query(range)))
            }
            _ => None,
        })
        .collect()
}

/// Each client's charge stacked as direct cost (less its discount share when charged net),
/// shared cost and markup, its monthly budget marked when the range is one month and the
/// client has one; each bar links to the client.
async fn chargeback_chart(
    state: &AppState,
    range: &RollupRange,
    report: &crate::report::rollup::Report,
    links: &[Option<String>],
) -> Result<String, WebError> {
    let table = &report.table;
    let column = |name: &str| table.column(name).unwrap_or(usize::MAX);
    let (direct, shared, markup) = (column("direct_cost"), column("shared_cost"), column("markup"));
    let discount = column("discount");
    let value = |row: &[Cell], i: usize| amount_of(row.get(i)).unwrap_or(0.0);
    let month = match range.parts.as_slice() {
        [(rollups, true)] => rollups.period.period.parse::<Period>().ok(),
        _ => None,
    };
    let settings = state.store.settings().await?;
    let mut bars = Vec::new();
    for (row, href) in table.rows.iter().zip(links) {
        let client = text_of(&row[0]);
        let budget = match month {
            Some(month) => settings.budget(&client, month).ok().flatten().map(|b| b.0 as f64 / 100.0),
            None => None,
        };
        bars.push(charts::StackedBar {
            label: client,
            parts: vec![value(row, direct) + value(row, discount), value(row, shared), value(row, markup)],
            mark: budget,
            href: href.clone(),
        });
    }
    Ok(charts::stacked_bars(
        "Charge by client",
        "USD",
        &["direct cost", "shared cost", "markup"],
        "monthly budget",
        &charts::top(bars, 12),
    ))
}
