//! Savings: realized savings by month and the opportunities still open.

use axum::response::Response;

use super::*;
use crate::report::rollup::{self, RollupRange};
use crate::report::table::{Cell, Extra};

/// Savings: realized by month, and opportunities with their evidence.
pub async fn savings(page: Opening) -> Result<Response, WebError> {
    let Opening { state, filters, headers, view } = page;
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
            let table = &realized.table;
            let month = table.column("month").unwrap_or(usize::MAX);
            let months: Vec<String> =
                table.rows.iter().map(|r| r.get(month).map(text_of).unwrap_or_default()).collect();
            // Realized savings by kind, each net of its unused commitment: the parts add up
            // to the month's realized savings (the dot).
            let kinds = ["spot_savings", "savings_plan_savings", "reserved_savings", "other_savings"];
            let columns: Vec<usize> = kinds.iter().map(|k| table.column(k).unwrap_or(usize::MAX)).collect();
            let values: Vec<Vec<f64>> = table
                .rows
                .iter()
                .map(|r| columns.iter().map(|c| amount_of(r.get(*c)).unwrap_or(0.0)).collect())
                .collect();
            content.charts.push(charts::stacked_columns(
                "Realized savings by kind (the dot: the net)",
                "USD",
                &months,
                &["Spot", "Savings Plans (net of unused)", "Reserved (net of unused)", "other"],
                &values,
            ));
            // Spend beside savings, back to before the CUR export where Cost Explorer knows it.
            let history = history(&state, &view, 12usize.saturating_sub(computed.len().min(12))).await?;
            let recent = &computed[computed.len().saturating_sub(12)..];
            let billed: Vec<(String, i64)> =
                recent.iter().map(|r| (r.period.period.clone(), r.period.bill_amortized_micros.0)).collect();
            spend_chart(&mut content, &history, &billed);
        }
        content.table(
            "realized",
            &format!("Realized savings in {}, by month, with the range's total", range.label),
            rollup::savings(range),
        );
        let open = rollup::opportunities(range);
        content.cards.push(open_card(&open, open.table.rows.len()));
        content.charts.push(opportunity_waterfall(&open));
        content.table("opportunities", "Opportunities, ranked (USD per month)", open);
        content.stack("opportunities");
    }
    answer(&state, &filters, &headers, &view, content).await
}

/// The savings still open, a month, as a card: their total, how many there are and how many of
/// them the page lists.
pub(super) fn open_card(open: &rollup::Report, listed: usize) -> Card {
    let total = match open.extra.get("total_monthly_savings") {
        Some(Extra::Usd(amount)) => amount.0,
        _ => 0,
    };
    let count = open.table.rows.len();
    let previous = match (count, listed) {
        (0, _) => "nothing open".to_string(),
        (n, l) if l >= n => format!("{n} opportunities, all listed below"),
        (n, l) => format!("{n} opportunities; the top {l} are listed below"),
    };
    Card {
        label: "Open savings".into(),
        value: format!("{} a month", usd(total)),
        previous,
        definition: "What the open opportunities would save a month if taken: idle GPU cost, on-demand training \
                     that could run on Spot, GPUs larger than their workload needs (the range's monthly average)."
            .into(),
        ..Card::default()
    }
}

/// The month's Kubernetes spend falling by each kind of opportunity (their monthly savings
/// summed per kind, largest first) to the spend if all were taken.
fn opportunity_waterfall(open: &rollup::Report) -> String {
    let table = &open.table;
    let (kind, saving) = (table.column("kind"), table.column("monthly_savings"));
    let mut by_kind: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
    for row in &table.rows {
        if let (Some(Cell::Text(k)), Some(v)) =
            (kind.and_then(|i| row.get(i)), amount_of(saving.and_then(|i| row.get(i))))
        {
            *by_kind.entry(crate::report::table::heading(k)).or_default() += v;
        }
    }
    let mut steps: Vec<(String, f64)> = by_kind.into_iter().collect();
    steps.sort_by(|a, b| b.1.total_cmp(&a.1));
    let spend = match open.extra.get("monthly_spend") {
        Some(Extra::Usd(amount)) => amount.usd_f64(),
        _ => 0.0,
    };
    charts::waterfall(
        "Monthly Kubernetes spend after the open opportunities",
        "USD",
        ("Spend", spend),
        &steps,
        "After",
    )
}
