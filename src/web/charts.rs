//! Charts as SVG drawn on the server: a title, axis labels with units, `role="img"` and a
//! text alternative; the page shows the same numbers in a table. No script, so they print.

use std::fmt::Write as _;

/// Escapes text for SVG/HTML.
/// Text to draw or say, escaped for SVG, its months, days and times as people write them
/// (`2026-10` → `Oct 2026`); a link's query keeps its ISO dates.
fn escape(text: &str) -> String {
    crate::period::human::within(text)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The opening of a chart: an image (or a group of links) whose text alternative says
/// `said`, its `defs`, and its title drawn at `title_x`.
fn frame(
    title: &str,
    said: &[String],
    (width, height): (f64, f64),
    role: &str,
    defs: &str,
    title_x: f64,
) -> String {
    let said = said.join("; ");
    let mut svg = format!(
        r#"<svg class="chart" role="{role}" aria-label="{}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg"><title>{}</title><desc>{}</desc>{defs}"#,
        escape(&format!("{title}. {said}")),
        escape(title),
        escape(&said)
    );
    let _ = write!(svg, r#"<text x="{title_x}" y="18" class="chart-title">{}</text>"#, escape(title));
    svg
}

/// Horizontal grid lines from x `left` to `right`, each (value, y) labelled on the left, and
/// the unit turned beside the axis at the height given.
fn value_axis(
    svg: &mut String,
    ticks: impl Iterator<Item = (f64, f64)>,
    (left, right): (f64, f64),
    unit: Option<(&str, f64)>,
) {
    for (value, y) in ticks {
        let _ = write!(
            svg,
            r#"<line x1="{left}" x2="{right}" y1="{y:.1}" y2="{y:.1}" class="grid"/><text x="{}" y="{:.1}" class="axis" text-anchor="end">{}</text>"#,
            left - 6.0,
            y + 4.0,
            short(value)
        );
    }
    if let Some((unit, middle)) = unit {
        let _ = write!(
            svg,
            r#"<text x="14" y="{middle:.1}" class="axis" transform="rotate(-90 14 {middle:.1})" text-anchor="middle">{}</text>"#,
            escape(unit)
        );
    }
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
    let (step, steps) = axis(max);
    let scale_max = step * steps as f64;
    let plot_height = height - bottom - top;
    let slot = (width - left - 10.0) / values.len().max(1) as f64;
    let summary: Vec<String> = labels
        .iter()
        .zip(values)
        .map(|(label, value)| format!("{label}: {} {unit}", exact(*value)))
        .collect();
    let mut svg = frame(title, &summary, (width, height), "img", "", left);
    let ticks = (0..=steps)
        .map(|tick| (step * tick as f64, top + plot_height - plot_height * tick as f64 / steps as f64));
    value_axis(&mut svg, ticks, (left, width - 10.0), Some((unit, top + plot_height / 2.0)));
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
            exact(*value),
            escape(unit),
            x + slot * 0.35,
            height - bottom + 16.0,
            escape(label)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A card's trend as a small line (no axes), the last point dotted; its text alternative says
/// every value. Empty for fewer than two months.
pub fn sparkline(what: &str, labels: &[String], values: &[Option<f64>]) -> String {
    if values.len() < 2 {
        return String::new();
    }
    let (width, height, pad) = (120.0, 28.0, 3.0);
    let known: Vec<f64> = values.iter().flatten().copied().collect();
    let (low, high) =
        known.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
    let span = if high > low { high - low } else { 1.0 };
    let x = |i: usize| pad + (width - 2.0 * pad) * i as f64 / (values.len() - 1) as f64;
    let y = |v: f64| height - pad - (height - 2.0 * pad) * if high > low { (v - low) / span } else { 0.5 };
    let mut path = String::new();
    let mut pen_down = false;
    for (i, value) in values.iter().enumerate() {
        match value {
            Some(v) => {
                let _ = write!(path, "{}{:.1} {:.1} ", if pen_down { "L" } else { "M" }, x(i), y(*v));
                pen_down = true;
            }
            None => pen_down = false,
        }
    }
    let said: Vec<String> = labels
        .iter()
        .zip(values)
        .map(|(label, v)| format!("{label}: {}", v.map_or_else(|| "n/a".to_string(), exact)))
        .collect();
    let last = values.iter().enumerate().rev().find_map(|(i, v)| v.map(|v| (x(i), y(v))));
    let dot =
        last.map_or_else(String::new, |(cx, cy)| format!(r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="2.5"/>"#));
    format!(
        r#"<svg class="spark" role="img" aria-label="{}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg"><path d="{}"/>{dot}</svg>"#,
        escape(&format!("{what} by month: {}", said.join("; "))),
        path.trim_end()
    )
}

/// A waterfall: the `start` column from zero, each step falling (or rising) from where the one
/// before ended, drawn light, and the `end` column from zero at what is left.
pub fn waterfall(title: &str, unit: &str, start: (&str, f64), steps: &[(String, f64)], end: &str) -> String {
    let (width, height, left, bottom, top) = (640.0, 272.0, 70.0, 56.0, 42.0);
    let mut levels = vec![(start.0.to_string(), 0.0, start.1, "bar")];
    let mut level = start.1;
    for (label, change) in steps {
        levels.push((label.clone(), level, level - change, "bar-unused"));
        level -= change;
    }
    levels.push((end.to_string(), 0.0, level, "bar"));
    let highest = levels.iter().map(|(_, a, b, _)| a.max(*b)).fold(0.0, f64::max);
    let (step, steps_up) = axis(highest);
    let plot_height = height - bottom - top;
    let y = |v: f64| top + plot_height - plot_height * (v / (step * steps_up as f64)).clamp(0.0, 1.0);
    let slot = (width - left - 10.0) / levels.len() as f64;
    let mut said = vec![format!("{}: {} {unit}", start.0, exact(start.1))];
    said.extend(steps.iter().map(|(label, change)| format!("{label}: −{} {unit}", exact(*change))));
    said.push(format!("{end}: {} {unit}", exact(level)));
    let mut svg = frame(title, &said, (width, height), "img", "", left);
    let ticks = (0..=steps_up).map(|tick| (step * tick as f64, y(step * tick as f64)));
    value_axis(&mut svg, ticks, (left, width - 10.0), Some((unit, top + plot_height / 2.0)));
    for (i, ((label, from, to, class), tip)) in levels.iter().zip(&said).enumerate() {
        let x = left + slot * i as f64 + slot * 0.15;
        let _ = write!(
            svg,
            r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" class="{class}"><title>{}</title></rect><text x="{:.1}" y="{:.1}" class="axis" text-anchor="middle">{}</text>"#,
            y(from.max(*to)),
            slot * 0.7,
            (y(from.min(*to)) - y(from.max(*to))).abs(),
            escape(tip),
            x + slot * 0.35,
            height - bottom + 16.0 + 12.0 * (i % 2) as f64,
            escape(label)
        );
        // Each bar's amount above it: the spend at either end, the saving of each step.
        let amount =
            if *class == "bar" { format!("${}", short(*to)) } else { format!("−${}", short(from - to)) };
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="axis bar-value" text-anchor="middle">{amount}</text>"#,
            x + slot * 0.35,
            y(from.max(*to)) - 4.0
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A dashed line across the plot from `left` to `right` at height `y`, for `value` (its name
/// and unit in its tooltip), named with its short value at the right.
fn level_line(
    svg: &mut String,
    (left, right): (f64, f64),
    y: f64,
    class: &str,
    (value, name, unit): (f64, &str, &str),
) {
    let _ = write!(
        svg,
        r#"<line x1="{left}" x2="{right:.1}" y1="{y:.1}" y2="{y:.1}" class="{class}"><title>{}: {} {}</title></line><text x="{:.1}" y="{:.1}" class="axis">{}</text>"#,
        escape(name),
        exact(value),
        escape(unit),
        right + 4.0,
        y + 4.0,
        escape(&format!("{name} {}", short(value))),
    );
}

/// One point of a [`line`]: its label (a month), its value (none where nothing was measured:
/// the line breaks there), what its tooltip adds, and whether its month is still in progress
/// (drawn hollow, the segment to it dashed), and whether it is flagged (a ring in the bad
/// colour around it, and its tooltip says why in its note).
pub struct Point {
    pub label: String,
    pub value: Option<f64>,
    pub note: String,
    pub partial: bool,
    pub flagged: bool,
}

/// What a [`line`] is judged against: a shaded target band and dashed threshold lines, each
/// with its name.
#[derive(Default)]
pub struct Targets<'a> {
    pub band: Option<(f64, f64, &'a str)>,
    pub thresholds: &'a [(f64, &'a str)],
}

/// A line over months against its targets; `unit` on the y axis.
pub fn line(title: &str, unit: &str, points: &[Point], targets: &Targets) -> String {
    let (width, height, left, right, bottom, top) = (640.0, 260.0, 70.0, 96.0, 40.0, 30.0);
    let highest = points.iter().filter_map(|p| p.value).fold(0.0_f64, f64::max);
    // A threshold far above the line (more than four times its highest point) would flatten
    // it: the axis stops short and the threshold is named at the top with an arrow.
    let fits = |v: f64| highest <= 0.0 || v <= 4.0 * highest;
    let targets_max = targets
        .thresholds
        .iter()
        .map(|(v, _)| *v)
        .filter(|v| fits(*v))
        .chain(targets.band.map(|(_, hi, _)| hi));
    let (step, steps) = axis(targets_max.fold(highest, f64::max));
    let scale_max = step * steps as f64;
    let plot_height = height - bottom - top;
    let y = |value: f64| top + plot_height - plot_height * (value / scale_max).clamp(0.0, 1.0);
    let slot = (width - left - right) / points.len().max(1) as f64;
    let x = |i: usize| left + slot * (i as f64 + 0.5);
    let said = |p: &Point| {
        let value = p.value.map_or_else(|| "not measured".to_string(), |v| format!("{} {unit}", exact(v)));
        let partial = if p.partial { " (in progress)" } else { "" };
        let note = if p.note.is_empty() { String::new() } else { format!(", {}", p.note) };
        format!("{}: {value}{partial}{note}", p.label)
    };
    let mut summary: Vec<String> = points.iter().map(said).collect();
    if let Some((low, high, name)) = targets.band {
        summary.push(format!("{name}: {}–{} {unit}", exact(low), exact(high)));
    }
    summary.extend(targets.thresholds.iter().map(|(v, name)| format!("{name}: {} {unit}", exact(*v))));
    let mut svg = frame(title, &summary, (width, height), "img", "", left);
    let ticks = (0..=steps).map(|tick| (step * tick as f64, y(step * tick as f64)));
    value_axis(&mut svg, ticks, (left, width - right), Some((unit, top + plot_height / 2.0)));
    if let Some((low, high, name)) = targets.band {
        let _ = write!(
            svg,
            r#"<rect x="{left}" y="{:.1}" width="{:.1}" height="{:.1}" class="band"><title>{}: {}–{} {}</title></rect><text x="{:.1}" y="{:.1}" class="axis">{}</text>"#,
            y(high),
            width - left - right,
            y(low) - y(high),
            escape(name),
            exact(low),
            exact(high),
            escape(unit),
            width - right + 4.0,
            (y(low) + y(high)) / 2.0 + 4.0,
            escape(name)
        );
    }
    for (value, name) in targets.thresholds {
        if *value > scale_max {
            let _ = write!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" class="axis"><title>{}: {} {} (above the chart)</title>{} ↑</text>"#,
                width - right + 4.0,
                top + 4.0,
                escape(name),
                exact(*value),
                escape(unit),
                escape(&format!("{name} {}", short(*value)))
            );
            continue;
        }
        // The target is drawn in the good colour, a flag line in the bad one.
        let class = if *name == "target" { "threshold threshold-target" } else { "threshold" };
        level_line(&mut svg, (left, width - right), y(*value), class, (*value, name, unit));
    }
    // Segments between measured neighbours; one that ends in a month in progress is dashed.
    for (i, pair) in points.windows(2).enumerate() {
        if let (Some(a), Some(b)) = (pair[0].value, pair[1].value) {
            let class = if pair[1].partial { "line line-partial" } else { "line" };
            let _ = write!(
                svg,
                r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" class="{class}"/>"#,
                x(i),
                y(a),
                x(i + 1),
                y(b)
            );
        }
    }
    // At most about twelve labels on the x axis (a month of days would overlap).
    let every = points.len().div_ceil(12).max(1);
    for (i, point) in points.iter().enumerate() {
        if let Some(value) = point.value {
            let class = if point.partial { "point point-partial" } else { "point" };
            if point.flagged {
                let _ = write!(svg, r#"<circle cx="{:.1}" cy="{:.1}" r="7" class="flag"/>"#, x(i), y(value));
            }
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="4" class="{class}"><title>{}</title></circle>"#,
                x(i),
                y(value),
                escape(&said(point))
            );
        }
        if i % every == 0 {
            let _ = write!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" class="axis" text-anchor="middle">{}</text>"#,
                x(i),
                height - bottom + 16.0,
                escape(&point.label)
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

/// One step of a [`forecast`] chart (a day or a month): what happened, or the forecast with
/// its 80 % interval (value, lower, upper) and what the planned changes add on top of it.
pub struct Step {
    pub label: String,
    pub actual: Option<f64>,
    pub forecast: Option<(f64, f64, f64)>,
    pub planned: f64,
}

/// What happened, then the forecast: the history as a line, the forecast dashed in its shaded
/// 80 % interval, the planned changes hatched on top of it, and `levels` (a pool's capacity,
/// the commitments) as dashed lines across, each with its name.
pub fn forecast(title: &str, unit: &str, steps: &[Step], levels: &[(f64, &str)]) -> String {
    let (width, height, left, right, bottom, top) = (640.0, 260.0, 70.0, 110.0, 40.0, 44.0);
    let highest = steps
        .iter()
        .map(|s| s.actual.unwrap_or(0.0).max(s.forecast.map_or(0.0, |(v, _, u)| u.max(v + s.planned))))
        .chain(levels.iter().map(|(v, _)| *v))
        .fold(0.0_f64, f64::max);
    let (step, ticks) = axis(highest);
    let scale_max = step * ticks as f64;
    let plot_height = height - bottom - top;
    let y = |value: f64| top + plot_height - plot_height * (value / scale_max).clamp(0.0, 1.0);
    let slot = (width - left - right) / steps.len().max(1) as f64;
    let x = |i: usize| left + slot * (i as f64 + 0.5);
    let mut said: Vec<String> = steps
        .iter()
        .map(|s| match (s.actual, s.forecast) {
            (Some(a), _) => format!("{}: {} {unit}", s.label, exact(a)),
            (None, Some((v, lo, hi))) if s.planned != 0.0 => format!(
                "{}: forecast {} ({}–{}) {unit}, planned changes {}",
                s.label,
                exact(v),
                exact(lo),
                exact(hi),
                exact(s.planned)
            ),
            (None, Some((v, lo, hi))) => {
                format!("{}: forecast {} ({}–{}) {unit}", s.label, exact(v), exact(lo), exact(hi))
            }
            (None, None) => format!("{}: none", s.label),
        })
        .collect();
    said.extend(levels.iter().map(|(v, name)| format!("{name}: {} {unit}", exact(*v))));
    let (defs, fill) = hatch(title);
    let mut svg = frame(title, &said, (width, height), "img", &defs, left);
    let axis_ticks = (0..=ticks).map(|t| (step * t as f64, y(step * t as f64)));
    value_axis(&mut svg, axis_ticks, (left, width - right), Some((unit, top + plot_height / 2.0)));
    let polyline = |points: &[(usize, f64)]| {
        points.iter().map(|(i, v)| format!("{:.1},{:.1}", x(*i), y(*v))).collect::<Vec<_>>().join(" ")
    };
    // The forecast starts where the history ends, so the two lines join.
    let last_actual = steps.iter().rposition(|s| s.actual.is_some());
    let joined = |f: &dyn Fn(&Step) -> Option<f64>| -> Vec<(usize, f64)> {
        let start = last_actual.and_then(|i| steps[i].actual.map(|a| (i, a)));
        start.into_iter().chain(steps.iter().enumerate().filter_map(|(i, s)| f(s).map(|v| (i, v)))).collect()
    };
    let upper = joined(&|s| s.forecast.map(|(_, _, u)| u));
    let lower = joined(&|s| s.forecast.map(|(_, l, _)| l));
    let point = joined(&|s| s.forecast.map(|(v, _, _)| v));
    let planned = joined(&|s| s.forecast.map(|(v, _, _)| v + s.planned));
    if upper.len() > 1 {
        let band: Vec<(usize, f64)> = upper.iter().chain(lower.iter().rev()).copied().collect();
        let _ = write!(svg, r#"<polygon points="{}" class="band-forecast"/>"#, polyline(&band));
    }
    if planned.iter().zip(&point).any(|(p, v)| p.1 != v.1) {
        let area: Vec<(usize, f64)> = planned.iter().chain(point.iter().rev()).copied().collect();
        let _ = write!(
            svg,
            r#"<polygon points="{}" class="bar-hatched"{}/>"#,
            polyline(&area),
            fill("bar-hatched")
        );
    }
    let history: Vec<(usize, f64)> =
        steps.iter().enumerate().filter_map(|(i, s)| s.actual.map(|a| (i, a))).collect();
    if history.len() > 1 {
        let _ = write!(svg, r#"<polyline points="{}" class="line" fill="none"/>"#, polyline(&history));
    }
    if point.len() > 1 {
        let _ =
            write!(svg, r#"<polyline points="{}" class="line line-partial" fill="none"/>"#, polyline(&point));
    }
    for (value, name) in levels {
        level_line(&mut svg, (left, width - right), y(*value), "threshold", (*value, name, unit));
    }
    // The legend: a swatch for each of the history, the forecast and its interval, the plans.
    let mut lx = left;
    for (swatch, name) in [
        (r#"<line x1="0" x2="12" y1="31" y2="31" class="line"/>"#.to_string(), "history"),
        (
            r#"<rect y="26" width="12" height="10" class="band-forecast"/>"#.to_string(),
            "forecast, 80 % interval",
        ),
        (
            format!(r#"<rect y="26" width="12" height="10" class="bar-hatched"{}/>"#, fill("bar-hatched")),
            "planned changes",
        ),
    ] {
        let _ = write!(
            svg,
            r#"<g transform="translate({lx:.1} 0)">{swatch}</g><text x="{:.1}" y="35" class="axis">{}</text>"#,
            lx + 16.0,
            escape(name)
        );
        lx += 24.0 + 7.0 * name.chars().count() as f64;
    }
    // At most about twelve labels on the x axis, six of dates.
    let wide = steps.first().is_some_and(|s| s.label.len() >= 7);
    let every = steps.len().div_ceil(if wide { 6 } else { 12 }).max(1);
    for (i, s) in steps.iter().enumerate().filter(|(i, _)| i % every == 0) {
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="axis" text-anchor="middle">{}</text>"#,
            x(i),
            height - bottom + 16.0,
            escape(&s.label)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// One bar of [`stacked_bars`]: its label, its parts (in the chart's order), an optional
/// mark (a budget) and where clicking it leads.
#[derive(Clone)]
pub struct StackedBar {
    pub label: String,
    pub parts: Vec<f64>,
    pub mark: Option<f64>,
    pub href: Option<String>,
}

/// The `n` largest bars (by their parts' sum), the rest summed into one unlinked bar.
pub fn top(bars: Vec<StackedBar>, n: usize) -> Vec<StackedBar> {
    let parts: Vec<&[f64]> = bars.iter().map(|b| b.parts.as_slice()).collect();
    let (order, rest) = top_indices(&parts, n);
    let mut bars: Vec<Option<StackedBar>> = bars.into_iter().map(Some).collect();
    let mut top: Vec<StackedBar> = order.into_iter().filter_map(|i| bars[i].take()).collect();
    top.extend(rest);
    top
}

/// The indices of the bars [`top`] keeps, largest first (ties in the order given), and the bar
/// that sums the rest when there are more than `n`: the top is chosen without sorting every
/// bar (a churny month has some 80,000 workloads).
pub fn top_indices(parts: &[&[f64]], n: usize) -> (Vec<usize>, Option<StackedBar>) {
    let total = |i: usize| parts[i].iter().sum::<f64>();
    // Largest first, ties by position: a total order, so selecting then sorting the head keeps
    // exactly what a stable sort of every bar would.
    let order = |a: &usize, b: &usize| total(*b).total_cmp(&total(*a)).then(a.cmp(b));
    let mut indices: Vec<usize> = (0..parts.len()).collect();
    if parts.len() <= n {
        indices.sort_by(order);
        return (indices, None);
    }
    let keep = n.saturating_sub(1);
    if keep > 0 {
        indices.select_nth_unstable_by(keep - 1, order);
    }
    let (head, rest) = indices.split_at_mut(keep);
    head.sort_by(order);
    let mut sums = vec![0.0; rest.iter().map(|&i| parts[i].len()).max().unwrap_or(0)];
    for &i in rest.iter() {
        sums.iter_mut().zip(parts[i]).for_each(|(sum, v)| *sum += v);
    }
    let more = StackedBar { label: format!("{} more", rest.len()), parts: sums, mark: None, href: None };
    (head.to_vec(), Some(more))
}

/// The `n` largest bars, the others left out (for ratios, where a sum of the rest means nothing).
pub fn largest(mut bars: Vec<StackedBar>, n: usize) -> Vec<StackedBar> {
    bars.sort_by(|a, b| b.parts.iter().sum::<f64>().total_cmp(&a.parts.iter().sum::<f64>()));
    bars.truncate(n);
    bars
}

/// The fill of a part: solid, light and outlined, hatched; so the parts never rest on colour
/// alone.
const PART_CLASSES: [&str; 6] =
    ["bar", "bar-unused", "bar-hatched", "bar-outline", "bar-dotted", "bar bar-history"];

/// The hatch pattern of a chart (its id unique per chart, as a page holds several) and the
/// `fill` attribute a part of `class` takes.
fn hatch(title: &str) -> (String, impl Fn(&str) -> String) {
    let id =
        format!("hatch-{:x}", title.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))));
    let defs = format!(
        r#"<defs><pattern id="{id}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="2.5" height="6" class="hatch"/></pattern><pattern id="{id}-dots" width="5" height="5" patternUnits="userSpaceOnUse"><circle cx="2.5" cy="2.5" r="1.2" class="hatch"/></pattern></defs>"#
    );
    let fill = move |class: &str| match class {
        "bar-hatched" => format!(r#" fill="url(#{id})""#),
        "bar-dotted" => format!(r#" fill="url(#{id}-dots)""#),
        _ => String::new(),
    };
    (defs, fill)
}

/// The legend of a chart's parts: a swatch and a name each, from `x` along y 26–36; returns
/// where it ends.
fn legend(svg: &mut String, names: &[&str], mut x: f64, fill: &impl Fn(&str) -> String) -> f64 {
    for (name, class) in names.iter().zip(PART_CLASSES) {
        let _ = write!(
            svg,
            r#"<rect x="{x:.1}" y="26" width="12" height="10" class="{class}"{}/><text x="{:.1}" y="35" class="axis">{}</text>"#,
            fill(class),
            x + 16.0,
            escape(name)
        );
        x += 24.0 + 7.0 * name.chars().count() as f64;
    }
    x
}

/// Columns over months, each stacked from its parts (`names`, at most six, told apart by
/// fill and pattern, not colour alone): positive parts above zero, negative ones below it
/// (an unused commitment can make a kind's net saving negative); a dot marks each column's
/// net total.
pub fn stacked_columns(
    title: &str,
    unit: &str,
    labels: &[String],
    names: &[&str],
    values: &[Vec<f64>],
) -> String {
    stacked_columns_with_line(title, unit, labels, names, values, None)
}

/// A series drawn as a line over columns: its name and a value per column (none: a gap).
pub struct Overlay<'a> {
    pub name: &'a str,
    pub values: &'a [Option<f64>],
}

/// [`stacked_columns`] with a line over them on the same axis (realized savings over spend).
pub fn stacked_columns_with_line(
    title: &str,
    unit: &str,
    labels: &[String],
    names: &[&str],
    values: &[Vec<f64>],
    line: Option<Overlay>,
) -> String {
    let (width, height, left, bottom, top) = (640.0, 280.0, 70.0, 40.0, 46.0);
    let sums = |positive: bool| {
        values.iter().map(move |v| v.iter().filter(|x| (**x > 0.0) == positive).sum::<f64>())
    };
    let line_values = || line.iter().flat_map(|l| l.values.iter().flatten().copied());
    let highest = sums(true).chain(line_values()).fold(0.0, f64::max);
    let lowest = sums(false).chain(line_values()).fold(0.0, f64::min);
    let (step, _) = axis(highest.max(-lowest));
    let (up, down) = ((highest / step - 1e-9).ceil().max(0.0), (-lowest / step - 1e-9).ceil().max(0.0));
    let ticks = (up + down).max(1.0);
    let plot_height = height - bottom - top;
    let zero = top + plot_height * up.max(if down == 0.0 { 1.0 } else { 0.0 }) / ticks;
    let y = |v: f64| zero - plot_height * v / (step * ticks);
    let slot = (width - left - 10.0) / labels.len().max(1) as f64;
    let summary: Vec<String> = labels
        .iter()
        .zip(values)
        .map(|(label, parts)| {
            let each: Vec<String> =
                names.iter().zip(parts).map(|(n, v)| format!("{n} {}", exact(*v))).collect();
            format!("{label}: {} {unit} ({})", exact(parts.iter().sum()), each.join(", "))
        })
        .enumerate()
        .map(|(i, text)| match line.as_ref().and_then(|l| l.values.get(i).copied().flatten()) {
            Some(v) => format!("{text}; {} {}", line.as_ref().map_or("", |l| l.name), exact(v)),
            None => text,
        })
        .collect();
    let (defs, fill) = hatch(title);
    let mut svg = frame(title, &summary, (width, height), "img", &defs, left);
    let end = legend(&mut svg, &names[..names.len().min(PART_CLASSES.len())], left, &fill);
    if let Some(l) = &line {
        let _ = write!(
            svg,
            r#"<line x1="{end:.1}" y1="31" x2="{:.1}" y2="31" class="overlay"/><text x="{:.1}" y="35" class="axis">{}</text>"#,
            end + 14.0,
            end + 18.0,
            escape(l.name)
        );
    }
    let values_at = (0..=ticks as usize).map(|tick| step * (tick as f64 - down));
    value_axis(
        &mut svg,
        values_at.map(|v| (v, y(v))),
        (left, width - 10.0),
        Some((unit, top + plot_height / 2.0)),
    );
    for (i, (label, parts)) in labels.iter().zip(values).enumerate() {
        let x = left + slot * i as f64 + slot * 0.15;
        let (mut above, mut below) = (0.0, 0.0);
        for (value, class) in parts.iter().zip(PART_CLASSES) {
            let (from, to) = if *value >= 0.0 {
                above += value;
                (above - value, above)
            } else {
                below += value;
                (below - value, below)
            };
            let _ = write!(
                svg,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" class="{class}"{}><title>{}</title></rect>"#,
                y(from.max(to)),
                slot * 0.7,
                (y(from.min(to)) - y(from.max(to))).abs(),
                fill(class),
                escape(&summary[i])
            );
        }
        let _ = write!(
            svg,
            r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" class="point"><title>{}</title></circle><text x="{:.1}" y="{:.1}" class="axis" text-anchor="middle">{}</text>"#,
            x + slot * 0.35,
            y(parts.iter().sum()),
            escape(&summary[i]),
            x + slot * 0.35,
            height - bottom + 16.0,
            escape(label)
        );
    }
    if let Some(l) = &line {
        let centre = |i: usize| left + slot * i as f64 + slot * 0.5;
        // Consecutive values joined; a missing one breaks the line.
        let mut run: Vec<String> = Vec::new();
        let mut runs: Vec<Vec<String>> = Vec::new();
        for (i, value) in l.values.iter().enumerate() {
            match value {
                Some(v) => run.push(format!("{:.1},{:.1}", centre(i), y(*v))),
                None => runs.push(std::mem::take(&mut run)),
            }
        }
        runs.push(run);
        for points in runs.iter().filter(|r| r.len() > 1) {
            let _ = write!(svg, r#"<polyline points="{}" class="overlay"/>"#, points.join(" "));
        }
        for (i, value) in l.values.iter().enumerate() {
            if let Some(v) = value {
                let _ = write!(
                    svg,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" class="overlay-point"><title>{}</title></circle>"#,
                    centre(i),
                    y(*v),
                    escape(&summary[i])
                );
            }
        }
    }
    svg.push_str("</svg>");
    svg
}

/// Horizontal bars, one per row, each stacked from its parts (`names`, at most three); a bar
/// with a mark shows it as a tick (`mark_name`, e.g. a budget); a bar with a link is a link
/// (click or Enter drills down).
pub fn stacked_bars(title: &str, unit: &str, names: &[&str], mark_name: &str, bars: &[StackedBar]) -> String {
    let (width, left, right, top, row_h) = (640.0, 170.0, 20.0, 46.0, 22.0);
    let height = top + row_h * bars.len().max(1) as f64 + 30.0;
    let max = bars
        .iter()
        .map(|b| b.parts.iter().map(|p| p.max(0.0)).sum::<f64>().max(b.mark.unwrap_or(0.0)))
        .fold(0.0_f64, f64::max);
    let (step, steps) = axis(max);
    let scale = (width - left - right) / (step * steps as f64);
    let summary: Vec<String> = bars
        .iter()
        .map(|b| {
            let mut text = format!("{}: {} {unit}", b.label, exact(b.parts.iter().sum()));
            if names.len() > 1 {
                let parts: Vec<String> =
                    names.iter().zip(&b.parts).map(|(n, v)| format!("{n} {}", exact(*v))).collect();
                text.push_str(&format!(" ({})", parts.join(", ")));
            }
            if let Some(mark) = b.mark {
                text.push_str(&format!("; {mark_name} {}", exact(mark)));
            }
            text
        })
        .collect();
    // A chart whose bars are links is a group of links (an image may hold nothing to click).
    let role = if bars.iter().any(|b| b.href.is_some()) { "group" } else { "img" };
    let (defs, fill) = hatch(title);
    let mut svg = frame(title, &summary, (width, height), role, &defs, 10.0);
    // The legend: a swatch per part (none for a single part), and the mark's tick.
    let x = if names.len() > 1 { legend(&mut svg, names, left, &fill) } else { left };
    if bars.iter().any(|b| b.mark.is_some()) {
        let _ = write!(
            svg,
            r#"<line x1="{:.1}" x2="{:.1}" y1="25" y2="37" class="mark"/><text x="{:.1}" y="35" class="axis">{}</text>"#,
            x + 4.0,
            x + 4.0,
            x + 10.0,
            escape(mark_name)
        );
    }
    for tick in 0..=steps {
        let x = left + step * tick as f64 * scale;
        let _ = write!(
            svg,
            r#"<line x1="{x:.1}" x2="{x:.1}" y1="{top}" y2="{:.1}" class="grid"/><text x="{x:.1}" y="{:.1}" class="axis" text-anchor="middle">{}</text>"#,
            height - 26.0,
            height - 12.0,
            short(step * tick as f64)
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" class="axis" text-anchor="end">{}</text>"#,
        width - right,
        height - 1.0,
        escape(unit)
    );
    for (i, bar) in bars.iter().enumerate() {
        let y = top + row_h * i as f64;
        let tip = escape(&summary[i]);
        let mut shapes = format!(
            r#"<text x="{:.1}" y="{:.1}" class="axis" text-anchor="end">{}</text>"#,
            left - 6.0,
            y + row_h * 0.65,
            escape(&bar.label)
        );
        let mut x = left;
        for (value, class) in bar.parts.iter().zip(PART_CLASSES) {
            let w = value.max(0.0) * scale;
            let _ = write!(
                shapes,
                r#"<rect x="{x:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" class="{class}"{}><title>{tip}</title></rect>"#,
                y + 3.0,
                row_h - 6.0,
                fill(class)
            );
            x += w;
        }
        if let Some(mark) = bar.mark {
            let mx = left + mark * scale;
            let _ = write!(
                shapes,
                r#"<line x1="{mx:.1}" x2="{mx:.1}" y1="{:.1}" y2="{:.1}" class="mark"><title>{tip}</title></line>"#,
                y,
                y + row_h
            );
        }
        match &bar.href {
            Some(href) => {
                let _ = write!(svg, r#"<a href="{}" aria-label="{tip}">{shapes}</a>"#, escape(href));
            }
            None => svg.push_str(&shapes),
        }
    }
    svg.push_str("</svg>");
    svg
}

/// Utilization by day (rows) and hour of day (columns): darker is busier; `None` is no
/// allocated GPU in that hour.
pub fn heatmap(title: &str, days: &[String], cells: &[[Option<f64>; 24]]) -> String {
    let (cell_w, cell_h, left, top) = (22.0, 14.0, 90.0, 40.0);
    let width = left + cell_w * 24.0 + 10.0;
    let height = top + cell_h * days.len() as f64 + 52.0;
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
        r#"<text x="{left}" y="{:.1}" class="axis">Hour of day (UTC); darker = higher utilization of allocated GPUs</text>"#,
        height - 30.0
    );
    // The legend: the shade of 0, 25, 50, 75 and 100 % utilization, and an hour not measured.
    let y = height - 18.0;
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" class="axis" text-anchor="end">Utilization</text>"#,
        left - 6.0,
        y + 10.0
    );
    for (i, share) in [0.0_f64, 0.25, 0.5, 0.75, 1.0].iter().enumerate() {
        let x = left + 62.0 * i as f64;
        let _ = write!(
            svg,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" class="cell" fill-opacity="{:.2}"/><text x="{:.1}" y="{:.1}" class="axis">{:.0} %</text>"#,
            cell_w - 1.0,
            cell_h - 1.0,
            0.08 + 0.92 * share,
            x + cell_w + 3.0,
            y + 10.0,
            share * 100.0
        );
    }
    let x = left + 62.0 * 5.0;
    let _ = write!(
        svg,
        r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" class="cell-empty"/><text x="{:.1}" y="{:.1}" class="axis">not measured</text>"#,
        cell_w - 1.0,
        cell_h - 1.0,
        x + cell_w + 3.0,
        y + 10.0
    );
    svg.push_str("</svg>");
    svg
}

/// Round axis ticks for values up to `max`: a step of 1, 2 or 5 × 10ⁿ that gives at most
/// five intervals, and how many intervals reach `max` (so every tick label is a round number).
pub(crate) fn axis(max: f64) -> (f64, usize) {
    if max <= 0.0 || !max.is_finite() {
        return (0.25, 4);
    }
    let raw = max / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step =
        [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * magnitude).find(|s| *s >= raw).unwrap_or(10.0 * magnitude);
    (step, ((max / step - 1e-9).ceil() as usize).max(1))
}

/// `1.2M` / `50k` / `2.5k` / `150` / `0.42` for axis labels.
fn short(value: f64) -> String {
    let trimmed = |text: String| {
        if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text }
    };
    let magnitude = value.abs();
    if magnitude >= 1e6 {
        format!("{}M", trimmed(format!("{:.2}", value / 1e6)))
    } else if magnitude >= 1e3 {
        format!("{}k", trimmed(format!("{:.1}", value / 1e3)))
    } else if magnitude >= 100.0 {
        format!("{value:.0}")
    } else {
        trimmed(format!("{value:.2}"))
    }
}

/// The value as hover and text alternatives give it: `47,031.68`, `61.9`.
fn exact(value: f64) -> String {
    let text = format!("{:.2}", value.abs());
    let (whole, cents) = text.split_once('.').unwrap_or((&text, "00"));
    let mut grouped = String::new();
    for (i, digit) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    let sign = if value < 0.0 && text != "0.00" { "-" } else { "" };
    match cents {
        "00" => format!("{sign}{grouped}"),
        _ => format!("{sign}{grouped}.{}", cents.trim_end_matches('0')),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_carry_a_title_units_and_a_text_alternative() {
        let svg = bars("Spend", "USD", &["2026-09".into(), "2026-10".into()], &[1000.0, 12_500.5]);
        assert!(svg.contains(r#"role="img""#) && svg.contains("<title>Spend</title>"));
        // Months read as people write them: `2026-10` is `Oct 2026`.
        assert!(svg.contains("Oct 2026: 12,500.5 USD"), "{svg}");
        // 12,500.5 → steps of 5k up to 15k: labels 0, 5k, 10k, 15k and nothing in between.
        for label in [">0<", ">5k<", ">10k<", ">15k<"] {
            assert!(svg.contains(label), "{label} in {svg}");
        }
        assert!(!svg.contains(">12.5k<") && !svg.contains(">20k<"), "{svg}");
        assert!(!bars("a<b", "x", &[], &[]).contains("a<b"));
    }

    #[test]
    fn the_top_bars_are_the_largest_ties_in_order_and_the_rest_is_summed() {
        // Totals 5, 9, 5, 1, 9, 2 (parts summed): the top 4 is three bars and "3 more".
        // Largest first, ties in the order given: b (9), e (9), a (5); then c (5), f (2) and d
        // (1) summed: [1 + 0 + 0, 4 + 2 + 1] = [1, 7].
        let bar = |label: &str, parts: [f64; 2]| StackedBar {
            label: label.into(),
            parts: parts.to_vec(),
            mark: None,
            href: None,
        };
        let bars = vec![
            bar("a", [5.0, 0.0]),
            bar("b", [4.0, 5.0]),
            bar("c", [1.0, 4.0]),
            bar("d", [0.0, 1.0]),
            bar("e", [9.0, 0.0]),
            bar("f", [0.0, 2.0]),
        ];
        let top = top(bars.clone(), 4);
        let seen: Vec<(&str, &[f64])> = top.iter().map(|b| (b.label.as_str(), b.parts.as_slice())).collect();
        assert_eq!(
            seen,
            vec![
                ("b", &[4.0, 5.0][..]),
                ("e", &[9.0, 0.0][..]),
                ("a", &[5.0, 0.0][..]),
                ("3 more", &[1.0, 7.0][..])
            ]
        );
        let all: Vec<String> = super::top(bars, 6).into_iter().map(|b| b.label).collect();
        assert_eq!(all, ["b", "e", "a", "c", "f", "d"], "no more than n: every bar, sorted");
    }

    #[test]
    fn stacked_bars_link_each_bar_and_say_every_part_and_the_mark() {
        let bars = [
            StackedBar {
                label: "acme".into(),
                parts: vec![3000.0, 500.0, 200.0],
                mark: Some(4200.0),
                href: Some("/clients/acme?a=1&b=2".into()),
            },
            StackedBar { label: "(rest)".into(), parts: vec![100.0, 0.0, 0.0], mark: None, href: None },
        ];
        let svg = stacked_bars("Top", "USD", &["direct", "shared", "markup"], "budget", &bars);
        assert!(
            svg.contains("acme: 3,700 USD (direct 3,000, shared 500, markup 200); budget 4,200"),
            "{svg}"
        );
        assert_eq!(
            svg.matches("<a href=\"/clients/acme?a=1&amp;b=2\" aria-label=\"acme: ").count(),
            1,
            "{svg}"
        );
        assert!(svg.starts_with(r#"<svg class="chart" role="group""#), "a chart of links is a group: {svg}");
        // The budget (4,200) is the largest value: ticks every 1k up to 5k.
        assert!(svg.contains(">5k<") && !svg.contains(">6k<"), "{svg}");
        assert_eq!(svg.matches(r#"class="mark""#).count(), 2, "the legend's tick and acme's budget");
        assert!(svg.contains(r#"class="bar-hatched" fill="url(#hatch-"#), "{svg}");
    }

    #[test]
    fn a_line_is_drawn_against_its_band_and_thresholds_and_breaks_where_nothing_was_measured() {
        let point = |label: &str, value: Option<f64>, partial: bool| Point {
            flagged: false,
            label: label.into(),
            value,
            note: String::new(),
            partial,
        };
        let mut points = [
            point("2026-08", Some(40.0), false),
            point("2026-09", None, false),
            point("2026-10", Some(62.5), false),
            point("2026-11", Some(70.0), true),
        ];
        points[3].flagged = true;
        let targets = Targets { band: Some((60.0, 85.0, "target")), thresholds: &[(20.0, "flagged")] };
        let svg = line("GPU utilization", "%", &points, &targets);
        // The axis reaches the band's top (85 → 0..100 by 20s).
        assert!(svg.contains(">100</text>") && !svg.contains(">120</text>"), "{svg}");
        // One segment only: 08 → 09 and 09 → 10 break at the unmeasured month; 10 → 11 is
        // dashed, as 11 is in progress.
        assert_eq!(svg.matches("class=\"line").count(), 1);
        assert_eq!(svg.matches("class=\"line line-partial\"").count(), 1);
        // Three points, and a ring around the flagged one: slots of 118.5 px from x 70, so
        // 2026-11 sits at 484.8; 70 on the 0–100 axis of 190 px from y 30 is y 87.0.
        assert_eq!(svg.matches("<circle").count(), 4);
        assert!(svg.contains(r#"<circle cx="484.8" cy="87.0" r="7" class="flag"/>"#), "{svg}");
        assert!(svg.contains("<title>Nov 2026: 70 % (in progress)</title>"));
        // The band spans 60–85 on a 0–100 axis of 190 px: y 58.5 to 106.0.
        assert!(svg.contains(r#"<rect x="70" y="58.5" width="474.0" height="47.5" class="band">"#), "{svg}");
        assert!(svg.contains("<title>flagged: 20 %</title>"));
        assert!(svg.contains("aria-label=\"GPU utilization. Aug 2026: 40 %; Sep 2026: not measured; Oct 2026: 62.5 %; Nov 2026: 70 % (in progress); target: 60–85 %; flagged: 20 %\""), "{svg}");
        // A threshold more than four times the highest point is named at the top, off the axis.
        let low = [point("09", Some(0.5), false), point("10", Some(0.7), false)];
        let far = Targets { band: None, thresholds: &[(7.4, "fleet P95")] };
        let svg = line("Cost", "USD", &low, &far);
        assert!(
            svg.contains(">0.8</text>") && !svg.contains(">8</text>"),
            "the axis follows the line: {svg}"
        );
        assert!(
            svg.contains("<title>fleet P95: 7.4 USD (above the chart)</title>fleet P95 7.4 ↑</text>"),
            "{svg}"
        );
        assert!(!svg.contains("class=\"threshold"), "{svg}");
    }

    #[test]
    fn a_sparkline_scales_its_values_between_its_lowest_and_highest_and_breaks_at_gaps() {
        let labels: Vec<String> = ["07", "08", "09", "10"].map(String::from).to_vec();
        let svg = sparkline("Spend", &labels, &[Some(10.0), Some(30.0), None, Some(20.0)]);
        // 120 × 28 with 3 px of padding: x at 3, 41, 79, 117; 10 at the bottom (25), 30 at the top (3).
        assert!(svg.contains(r#"<path d="M3.0 25.0 L41.0 3.0 M117.0 14.0"/>"#), "{svg}");
        assert!(svg.contains(r#"<circle cx="117.0" cy="14.0" r="2.5"/>"#), "the last point dotted");
        assert!(svg.contains(r#"aria-label="Spend by month: 07: 10; 08: 30; 09: n/a; 10: 20""#), "{svg}");
        assert_eq!(sparkline("Spend", &labels[..1], &[Some(1.0)]), "", "no trend from one month");
    }

    #[test]
    fn stacked_columns_put_negative_parts_below_zero_and_dot_the_net() {
        let labels: Vec<String> = ["09", "10"].map(String::from).to_vec();
        let values = vec![vec![30.0, -10.0], vec![50.0, 20.0]];
        let svg = stacked_columns("Savings", "USD", &labels, &["Spot", "SP"], &values);
        // Highest stack 70, lowest −10: steps of 20, 4 above zero and 1 below over 194 px
        // (top 46, bottom 240): zero at y 201.2, 38.8 px per step, −20 to 80.
        assert!(svg.contains(r#"y1="201.2" y2="201.2" class="grid"/><text x="64" y="205.2" class="axis" text-anchor="end">0</text>"#), "{svg}");
        assert!(svg.contains(">-20</text>") && svg.contains(">80</text>") && !svg.contains(">100</text>"));
        assert!(svg.contains("09: 20 USD (Spot 30, SP -10)"), "{svg}");
        // September: Spot 0..30 above zero, Savings Plans hanging below it, the net dot at 20.
        assert!(svg.contains(r#"<rect x="112.0" y="143.0" width="196.0" height="58.2" class="bar">"#));
        assert!(svg.contains(r#"<rect x="112.0" y="201.2" width="196.0" height="19.4" class="bar-unused">"#));
        assert!(svg.contains(r#"<circle cx="210.0" cy="162.4" r="3.5" class="point">"#));
        // October stacks 50 then 20 above zero; its dot sits at 70.
        assert!(svg.contains(r#"<rect x="392.0" y="65.4" width="196.0" height="38.8" class="bar-unused">"#));
        assert!(svg.contains(r#"<circle cx="490.0" cy="65.4" r="3.5" class="point">"#));
    }

    #[test]
    fn a_line_over_stacked_columns_shares_their_axis_and_breaks_where_a_value_is_missing() {
        let labels: Vec<String> = ["08", "09", "10"].map(String::from).to_vec();
        let values = vec![vec![40.0, 10.0], vec![50.0, 20.0], vec![60.0, 20.0]];
        let line = [None, Some(40.0), Some(48.0)];
        let overlay = Overlay { name: "savings", values: &line };
        let svg = stacked_columns_with_line("Spend", "USD", &labels, &["a", "b"], &values, Some(overlay));
        // Highest stack 80: 0..80 by 20s over 194 px (top 46, bottom 240), 2.425 px a dollar;
        // three slots of 186.7 px from x 70, centred at 163.3, 350.0 and 536.7.
        assert!(svg.contains(r#"<polyline points="350.0,143.0 536.7,123.6" class="overlay"/>"#), "{svg}");
        assert!(svg.contains(r#"<circle cx="350.0" cy="143.0" r="3" class="overlay-point"><title>09: 70 USD (a 50, b 20); savings 40</title>"#));
        // August has no value: no point, and the line starts in September.
        assert_eq!(svg.matches("class=\"overlay-point\"").count(), 2);
    }

    #[test]
    fn a_waterfall_falls_from_the_spend_by_each_step_to_what_is_left() {
        let steps = [("spot".to_string(), 30.0), ("idle".to_string(), 20.0)];
        let svg = waterfall("Opportunities", "USD", ("spend", 100.0), &steps, "after");
        // 0..100 by 20s over 174 px (top 42, bottom 216): 1.74 px a dollar.
        assert!(svg.contains(r#"y="42.0" width="98.0" height="174.0" class="bar""#), "{svg}");
        // Spot falls from 100 to 70, idle from 70 to 50, and 50 is left.
        assert!(svg.contains(r#"y="42.0" width="98.0" height="52.2" class="bar-unused""#), "{svg}");
        assert!(svg.contains(r#"y="94.2" width="98.0" height="34.8" class="bar-unused""#), "{svg}");
        assert!(svg.contains(r#"y="129.0" width="98.0" height="87.0" class="bar""#), "{svg}");
        // Each bar says its amount above it: the ends what they are, the steps what they save.
        for amount in [">$100<", ">−$30<", ">−$20<", ">$50<"] {
            assert!(svg.contains(amount), "{amount} in {svg}");
        }
        assert!(svg.contains("Opportunities. spend: 100 USD; spot: −30 USD; idle: −20 USD; after: 50 USD"));
    }

    #[test]
    fn axis_ticks_are_round_numbers() {
        // The Overview's spend (a $53.4k month): 0, 20k, 40k, 60k.
        assert_eq!(axis(53_411.55), (20_000.0, 3));
        // An idle-cost axis that once read 188 and 62.5: 0, 50, …, 200.
        assert_eq!(axis(188.0), (50.0, 4));
        // Utilization in percent up to 62.6: 0, 20, 40, 60, 80.
        assert_eq!(axis(62.6), (20.0, 4));
        // A maximum on a tick stays the top tick.
        assert_eq!(axis(100.0), (20.0, 5));
        assert_eq!(axis(0.0), (0.25, 4));
        assert_eq!(
            [short(5000.0), short(12_500.0), short(1_250_000.0), short(0.5)],
            ["5k", "12.5k", "1.25M", "0.5"]
        );
        assert_eq!([exact(47_031.68), exact(61.9), exact(-1234.0)], ["47,031.68", "61.9", "-1,234"]);
    }
}
