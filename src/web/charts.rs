//! Charts as SVG drawn on the server: a title, axis labels with units, `role="img"` and a
//! text alternative; the page shows the same numbers in a table. No script, so they print.

use std::fmt::Write as _;

/// Escapes text for SVG/HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A vertical bar chart of `values` (one bar per label), `unit` on the y axis.
pub fn bars(title: &str, unit: &str, labels: &[String], values: &[f64]) -> String {
    bars_marked(title, unit, labels, values, &[])
}

/// [`bars`] where the bars `marked` true are drawn apart (another source, e.g. Cost
/// Explorer's history before the CUR) and say so in their tooltip.
pub fn bars_marked(title: &str, unit: &str, labels: &[String], values: &[f64], marked: &[bool]) -> String {
    let (width, height, left, bottom, top) = (640.0, 260.0, 70.0, 40.0, 30.0);
    let max = values.iter().copied().fold(0.0_f64, f64::max);
    let scale_max = nice_ceiling(max);
    let plot_height = height - bottom - top;
    let slot = (width - left - 10.0) / values.len().max(1) as f64;
    let summary: Vec<String> = labels
        .iter()
        .zip(values)
        .map(|(label, value)| format!("{label}: {} {unit}", short(*value)))
        .collect();
    let mut svg = format!(
        r#"<svg class="chart" role="img" aria-label="{}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg"><title>{}</title><desc>{}</desc>"#,
        escape(&format!("{title}. {}", summary.join("; "))),
        escape(title),
        escape(&summary.join("; "))
    );
    let _ = write!(svg, r#"<text x="{left}" y="18" class="chart-title">{}</text>"#, escape(title));
    for step in 0..=4 {
        let value = scale_max * f64::from(step) / 4.0;
        let y = top + plot_height - plot_height * f64::from(step) / 4.0;
        let _ = write!(
            svg,
            r#"<line x1="{left}" x2="{}" y1="{y:.1}" y2="{y:.1}" class="grid"/><text x="{}" y="{:.1}" class="axis" text-anchor="end">{}</text>"#,
            width - 10.0,
            left - 6.0,
            y + 4.0,
            short(value)
        );
    }
    let _ = write!(
        svg,
        r#"<text x="14" y="{:.1}" class="axis" transform="rotate(-90 14 {:.1})" text-anchor="middle">{}</text>"#,
        top + plot_height / 2.0,
        top + plot_height / 2.0,
        escape(unit)
    );
    for (i, (label, value)) in labels.iter().zip(values).enumerate() {
        let bar_height = if scale_max > 0.0 { plot_height * value / scale_max } else { 0.0 };
        let x = left + slot * i as f64 + slot * 0.15;
        let (class, note) = if marked.get(i).copied().unwrap_or(false) {
            ("bar bar-history", " (Cost Explorer)")
        } else {
            ("bar", "")
        };
        let _ = write!(
            svg,
            r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{bar_height:.1}" class="{class}"><title>{}: {} {}{note}</title></rect><text x="{:.1}" y="{:.1}" class="axis" text-anchor="middle">{}</text>"#,
            top + plot_height - bar_height,
            slot * 0.7,
            escape(label),
            short(*value),
            escape(unit),
            x + slot * 0.35,
            height - bottom + 16.0,
            escape(label)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// Utilization by day (rows) and hour of day (columns): darker is busier; `None` is no
/// allocated GPU in that hour.
pub fn heatmap(title: &str, days: &[String], cells: &[[Option<f64>; 24]]) -> String {
    let (cell_w, cell_h, left, top) = (22.0, 14.0, 90.0, 40.0);
    let width = left + cell_w * 24.0 + 10.0;
    let height = top + cell_h * days.len() as f64 + 30.0;
    let mut svg = format!(
        r#"<svg class="chart heatmap" role="img" aria-label="{}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg"><title>{}</title>"#,
        escape(&format!("{title}: GPU utilization by day and hour of day (UTC), shown in the table below")),
        escape(title)
    );
    let _ = write!(svg, r#"<text x="{left}" y="18" class="chart-title">{}</text>"#, escape(title));
    for hour in (0..24).step_by(3) {
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="axis" text-anchor="middle">{hour:02}h</text>"#,
            left + cell_w * f64::from(hour) + cell_w / 2.0,
            top - 6.0
        );
    }
    for (row, (day, hours)) in days.iter().zip(cells).enumerate() {
        let y = top + cell_h * row as f64;
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="axis" text-anchor="end">{}</text>"#,
            left - 6.0,
            y + 11.0,
            escape(day)
        );
        for (hour, value) in hours.iter().enumerate() {
            let x = left + cell_w * hour as f64;
            match value {
                Some(v) => {
                    let _ = write!(
                        svg,
                        r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" class="cell" fill-opacity="{:.2}"><title>{} {hour:02}:00 UTC: {:.0} %</title></rect>"#,
                        cell_w - 1.0,
                        cell_h - 1.0,
                        0.08 + 0.92 * v.clamp(0.0, 1.0),
                        escape(day),
                        v * 100.0
                    );
                }
                None => {
                    let _ = write!(
                        svg,
                        r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" class="cell-empty"/>"#,
                        cell_w - 1.0,
                        cell_h - 1.0
                    );
                }
            }
        }
    }
    let _ = write!(
        svg,
        r#"<text x="{left}" y="{:.1}" class="axis">Hour of day (UTC); darker = higher utilization of allocated GPUs (%)</text>"#,
        height - 8.0
    );
    svg.push_str("</svg>");
    svg
}

/// A round axis maximum at or above `value`.
fn nice_ceiling(value: f64) -> f64 {
    if value <= 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * magnitude).find(|m| *m >= value).unwrap_or(10.0 * magnitude)
}

/// `12,345` / `1.2M` / `0.42` for axis labels.
fn short(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if magnitude >= 1e4 {
        format!("{:.0}k", value / 1e3)
    } else if magnitude >= 100.0 {
        format!("{value:.0}")
    } else {
        let text = format!("{value:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_carry_a_title_units_and_a_text_alternative() {
        let svg = bars("Spend", "USD", &["2026-09".into(), "2026-10".into()], &[1000.0, 2500.0]);
        assert!(svg.contains(r#"role="img""#) && svg.contains("<title>Spend</title>"));
        assert!(svg.contains("2026-10: 2500 USD"), "{svg}");
        assert_eq!(nice_ceiling(2500.0), 2500.0);
        assert_eq!(nice_ceiling(2600.0), 5000.0);
        assert!(!bars("a<b", "x", &[], &[]).contains("a<b"));
    }
}
