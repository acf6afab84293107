//! GPUs (platform): GPU-hours by model and namespace, the utilization heatmap, the
//! worst-idle workloads.

use std::collections::BTreeMap;

use axum::response::Response;

use super::*;
use crate::report::rollup::{self, Report};
use crate::report::table::{Cell, Table};

/// Utilization bands of the distribution, as 5 % steps from..to: idle (under 10 %, the default
/// idle threshold), low, the 60–85 % target band, and above it.
const BANDS: [(&str, &str, std::ops::Range<usize>); 4] = [
    ("under 10 %", "share_under_10", 0..2),
    ("10–60 %", "share_10_to_60", 2..12),
    ("60–85 % (target)", "share_60_to_85", 12..17),
    ("85 % and over", "share_85_and_over", 17..20),
];

/// Each GPU model's measured GPU-hours by the band their pod-hour's mean utilization fell
/// in, as shares: a bar per model (of 100 %) and its table (GPU-hours and shares). None
/// without measured GPU-hours in the range.
fn distribution(range: &rollup::RollupRange) -> Option<(String, Table)> {
    let mut models: BTreeMap<&str, [f64; crate::store::UTILIZATION_BUCKETS]> = BTreeMap::new();
    for (rollups, _) in &range.parts {
        for b in &rollups.utilization {
            let steps =
                models.entry(b.gpu_model.as_str()).or_insert([0.0; crate::store::UTILIZATION_BUCKETS]);
            steps[(b.bucket.max(0) as usize).min(crate::store::UTILIZATION_BUCKETS - 1)] += b.gpu_hours;
        }
    }
    models.retain(|_, steps| steps.iter().sum::<f64>() > 0.0);
    if models.is_empty() {
        return None;
    }
    let mut bars = Vec::new();
    let mut rows = Vec::new();
    for (model, steps) in &models {
        let total: f64 = steps.iter().sum();
        let shares: Vec<f64> =
            BANDS.iter().map(|(_, _, r)| steps[r.clone()].iter().sum::<f64>() / total).collect();
        bars.push(charts::StackedBar {
            label: model.to_string(),
            parts: shares.iter().map(|s| s * 100.0).collect(),
            mark: None,
            href: None,
        });
        let mut row = vec![Cell::Text(model.to_string()), Cell::Hours(total)];
        row.extend(shares.iter().map(|s| Cell::Ratio(Some(*s))));
        rows.push(row);
    }
    let names: Vec<&str> = BANDS.iter().map(|(name, ..)| *name).collect();
    let chart = charts::stacked_bars(
        "Hourly GPU utilization by model (share of measured GPU-hours)",
        "%",
        &names,
        "",
        &bars,
    );
    let mut columns = vec!["gpu_model", "measured_gpu_hours"];
    columns.extend(BANDS.iter().map(|(_, column, _)| *column));
    Some((chart, Table { title: "Utilization".into(), columns, rows, totals: Vec::new() }))
}

/// GPUs: hours by model and namespace, a utilization heatmap, the worst-idle workloads.
pub async fn gpus(page: Opening) -> Result<Response, WebError> {
    let Opening { state, filters, headers, view } = page;
    let range = &view.range;
    let mut content = Content::new("GPUs", "gpus", "/gpus");
    content.account_filter = true;
    if let Some(range) = &range {
        if let Some(narrowed) = range.narrowed_to() {
            content.notes.push(format!(
                "In {narrowed}: the instances' capacity and the pods' GPU-hours. The heatmap and GPU time \
                 no pod held come from the metrics, which name no account, and are shown for all accounts only."
            ));
        }
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
                    .map(|t| t.format("%a %-d %b").to_string())
                    .unwrap_or_default()
            })
            .collect();
        let cells: Vec<[Option<f64>; 24]> =
            days.values().map(|h| h.map(|c| c.and_then(|(a, u)| (a > 0.0).then(|| u / a)))).collect();
        content.charts.push(charts::heatmap("GPU utilization by day and hour", &labels, &cells));
        if let Some((chart, table)) = distribution(range) {
            content.charts.push(chart);
            content.notes.push(
                "The distribution files each pod-hour by the mean of its GPUs. Idle GPU-hours (the table \
                 below) are judged per GPU, so a stalled 8-GPU pod's idle GPUs count there even when its \
                 mean is above 10 %."
                    .into(),
            );
            if !range.parts.iter().all(|(_, whole)| *whole) {
                content.notes.push("The utilization distribution covers the range's whole months.".into());
            }
            content.table(
                "utilization",
                "Measured GPU-hours by hourly utilization, per GPU model (the numbers behind the distribution)",
                Report::of(table),
            );
        }
        let unbilled: f64 = range.periods().map(|(p, _)| p.measured_unbilled_gpu_hours).sum();
        if unbilled > 0.0 {
            content.notes.push(format!(
                "{unbilled:.1} GPU-hours were measured on pods the bill gave no accelerator rows in those hours \
                 (a MIG resource AWS does not report as an accelerator, or a pod the bill does not name): \
                 measured but unbilled, outside the allocated hours above."
            ));
        }
        content.table("gpu", "GPU-hours by namespace and GPU model", rollup::gpu(range, &unattributed));
        content.default_columns(
            "gpu",
            &[
                "gpu_model",
                "allocated_gpu_hours",
                "used_gpu_hours",
                "idle_gpu_hours",
                "utilization",
                "gpu_fleet_cost",
                "idle_cost",
                "flags",
            ],
        );
        if range.only.is_none() && view.providers.len() > 1 && view.viewer.scope.sees_fleet() {
            let caption = "The GPU fleet by provider: the GPU-hours each provider's bills name (Spot or \
                           preemptible share), their amortized cost in USD and its cost per GPU-hour; \
                           utilization of the pods' measured GPU-hours (n/a where none was measured)";
            content.table("providers", caption, rollup::providers(range));
            if let Some(note) = rollup::unmeasured_providers_note(range) {
                content.notes.push(note);
            }
            content.default_columns(
                "providers",
                &[
                    "provider",
                    "name",
                    "gpu_hours",
                    "spot_gpu_share",
                    "gpu_fleet_cost",
                    "cost_per_gpu_hour",
                    "gpu_utilization",
                ],
            );
        }
        if range.only.is_none() && view.accounts.len() > 1 {
            let caption = "GPU-hours and GPU fleet cost by usage account (utilization of measured hours)";
            content.table("accounts", caption, rollup::gpu_by_account(range));
        }
        let mut worst = rollup::workloads(range);
        // Sort by idle GPU cost, keep the ten worst with any idle cost.
        let idle = worst.table.column("idle_gpu_cost").unwrap_or(usize::MAX);
        let idle_cost = |r: &Vec<Cell>| amount_of(r.get(idle)).unwrap_or(0.0);
        worst.table.rows.retain(|r| idle_cost(r) > 0.0);
        worst.table.rows.sort_by(|a, b| idle_cost(b).total_cmp(&idle_cost(a)));
        worst.table.rows.truncate(10);
        content.table("worst_idle", "Workloads with the most idle GPU cost", worst);
        content.default_columns(
            "worst_idle",
            &["workload", "client", "gpu_hours", "idle_gpu_hours", "idle_gpu_cost", "total_cost"],
        );
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
            Report::of(heat),
        );
        content.fold("heatmap");
    }
    answer(&state, &filters, &headers, &view, content).await
}
