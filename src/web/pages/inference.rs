//! Inference: cost per inference and per 1M tokens per workload.

use axum::response::Response;

use super::*;
use crate::report::rollup;

/// Inference: cost per inference and per 1M tokens per workload, hours above the fleet P95.
pub async fn inference(page: Opening) -> Result<Response, WebError> {
    let Opening { state, filters, headers, view } = page;
    let range = &view.range;
    let mut content = Content::new("Inference", "inference", "/inference");
    if let Some(range) = &range {
        let p95: Vec<String> =
            range.periods().map(|(p, _)| format!("{}: ${:.6}", p.period, p.p95_cost_per_inference)).collect();
        content.notes.push(format!(
            "Cost per inference = the workload's cost (GPU, CPU, memory; split + unused) / successful requests. \
             Fleet P95 of hourly cost per inference per serving pod-hour — {}.",
            p95.join(", ")
        ));
        let report = rollup::inference(range);
        let column = |name: &str| report.table.column(name).unwrap_or(usize::MAX);
        let (per_inference, per_million) = (column("cost_per_inference"), column("cost_per_million_tokens"));
        let bars = |column: usize, scale: f64| -> Vec<charts::StackedBar> {
            let rows = report.table.rows.iter().filter_map(|row| {
                // Cost per inference is a rate (six decimals), per 1M tokens dollars.
                let value = amount_of(row.get(column))?;
                let label = format!("{}/{}", text_of(&row[0]), text_of(&row[1]));
                Some(charts::StackedBar { label, parts: vec![value * scale], mark: None, href: None })
            });
            charts::largest(rows.collect(), 10)
        };
        for (title, column, scale) in [
            ("Cost per 1,000 inferences (the 10 highest workloads)", per_inference, 1000.0),
            ("Cost per 1M tokens (the 10 highest workloads)", per_million, 1.0),
        ] {
            content.charts.push(charts::stacked_bars(title, "USD", &["cost"], "", &bars(column, scale)));
        }
        daily_charts(&mut content, range);
        content.table("inference", "Cost per inference by workload", report);
    }
    answer(&state, &filters, &headers, &view, content).await
}

/// The days a daily chart is drawn for at most: two months.
const DAILY_CHART_DAYS: i64 = 62;

/// Days with requests a workload needs before its chart shades its own P5–P95 band.
const MIN_DAYS_FOR_BAND: usize = 7;

/// For the three workloads that served the most requests, the cost per 1,000 inferences day by
/// day (the cost of the hours that served requests / the requests) against the fleet's P95 of
/// hourly cost per inference (the newest month's); each day's tooltip says how many of its
/// serving hours were above that P95 (those days ringed), and the workload's own P5–P95 of its
/// days shaded. Ranges longer than two months get none.
fn daily_charts(content: &mut Content, range: &rollup::RollupRange) {
    let days = (range.to - range.from) / 86_400;
    if days > DAILY_CHART_DAYS {
        return;
    }
    // (namespace, workload) → day → (serving cost, requests, serving hours, hours above P95).
    type Day = (i64, f64, i64, i64);
    let mut served: std::collections::BTreeMap<(&str, &str), std::collections::BTreeMap<i64, Day>> =
        std::collections::BTreeMap::new();
    for c in range.costs().filter(|c| c.requests > 0.0) {
        let day =
            served.entry((c.namespace.as_str(), c.workload.as_str())).or_default().entry(c.day).or_default();
        day.0 += c.serving_cost_nanos;
        day.1 += c.requests;
        day.2 += c.inference_hours;
        day.3 += c.inference_hours_above_p95;
    }
    let mut busiest: Vec<(&(&str, &str), f64)> =
        served.iter().map(|(key, days)| (key, days.values().map(|d| d.1).sum::<f64>())).collect();
    busiest.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let p95 = range.periods().last().map_or(0.0, |(p, _)| p.p95_cost_per_inference * 1000.0);
    for ((namespace, workload), _) in busiest.into_iter().take(3) {
        let by_day = &served[&(*namespace, *workload)];
        let points: Vec<charts::Point> = (0..days)
            .map(|i| {
                let day = range.from + i * 86_400;
                let label = chrono::DateTime::from_timestamp(day, 0).map(|d| d.format("%-d %b").to_string());
                let (cost, requests, hours, above) = by_day.get(&day).copied().unwrap_or_default();
                charts::Point {
                    label: label.unwrap_or_default(),
                    value: (requests > 0.0).then(|| cost as f64 / 1e9 / requests * 1000.0),
                    note: if hours > 0 {
                        format!("{above} of {hours} serving hours above the fleet P95")
                    } else {
                        String::new()
                    },
                    partial: false,
                    flagged: above > 0,
                }
            })
            .collect();
        // The workload's own usual range: the P5–P95 of its days (nearest rank), once it has
        // enough days for one to mean something.
        let mut daily: Vec<f64> = points.iter().filter_map(|p| p.value).collect();
        let band = if daily.len() >= MIN_DAYS_FOR_BAND {
            let low = crate::engine::compute::percentile(&mut daily, 0.05);
            let high = crate::engine::compute::percentile(&mut daily, 0.95);
            low.zip(high).map(|(low, high)| (low, high, "its P5–P95"))
        } else {
            None
        };
        content.charts.push(charts::line(
            &format!("{namespace}/{workload}: cost per 1,000 inferences by day"),
            "USD",
            &points,
            &charts::Targets { band, thresholds: &[(p95, "fleet P95")] },
        ));
    }
}
