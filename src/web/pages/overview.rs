//! Overview (leadership): this month against last, trends against targets, the top
//! opportunities.

use axum::response::Response;

use super::*;
use crate::report::rollup::{self, Report};
use crate::report::table::{Cell, Nanos, Table};

/// What the Idle GPU cost card says of a month none of whose GPU-hours was measured.
const NOT_MEASURED: &str = "not measured (no GPU utilization series)";

fn status(value: Option<f64>, good: impl Fn(f64) -> bool, bad: impl Fn(f64) -> bool) -> String {
    match value {
        Some(v) if bad(v) => "bad".into(),
        Some(v) if good(v) => "ok".into(),
        Some(_) => "warn".into(),
        None => String::new(),
    }
}

/// The trend of the three ratios leadership is judged on, each against its targets (the same
/// as the cards'): utilization in its 60–85 % band, the idle share under 10 % (above 20 %
/// flagged, the idle cost in each point's tooltip), Spot adoption of training above 50 %
/// (under 30 % flagged). A month in progress is drawn hollow.
fn target_charts(
    content: &mut Content,
    trend: &[&std::sync::Arc<crate::store::Rollups>],
    heads: &[rollup::Headline],
) {
    let points = |value: fn(&rollup::Headline) -> Option<f64>, note: fn(&rollup::Headline) -> String| {
        trend
            .iter()
            .zip(heads)
            .map(|(r, h)| charts::Point {
                label: r.period.period.clone(),
                value: value(h).map(|v| v * 100.0),
                note: note(h),
                partial: rollup::month_progress(r).is_some(),
                flagged: false,
            })
            .collect::<Vec<_>>()
    };
    let none = |_: &rollup::Headline| String::new();
    content.charts.push(charts::line(
        "GPU utilization of measured allocated GPU-hours",
        "%",
        &points(rollup::Headline::utilization, none),
        &charts::Targets { band: Some((60.0, 85.0, "target")), thresholds: &[] },
    ));
    content.charts.push(charts::line(
        "Idle share of GPU-hours",
        "%",
        &points(rollup::Headline::idle_share, |h| format!("idle cost {}", usd(h.idle_cost_nanos))),
        &charts::Targets { band: None, thresholds: &[(10.0, "target"), (20.0, "flagged")] },
    ));
    content.charts.push(charts::line(
        "Spot adoption of training GPU-hours",
        "%",
        &points(rollup::Headline::spot_adoption, none),
        &charts::Targets { band: None, thresholds: &[(50.0, "target"), (30.0, "flagged")] },
    ));
}

/// A month's amortized bill by what it bought, in micro-dollars: the GPU fleet (every
/// instance-hour of every provider's GPU machines, pods or not), CPU and memory (every other
/// machine the clusters' split or the CUR's instances count), storage, network, and the rest
/// (the control plane, unused commitments, other services, machines outside the clusters).
/// The five add up to the bill exactly. `split` is false when the month was computed before
/// storage and network were kept apart (they are then in the rest).
pub(super) struct SpendByCategory {
    pub parts: [i64; 5],
    pub split: bool,
}

impl SpendByCategory {
    pub const NAMES: [&'static str; 5] = ["GPU fleet", "CPU/memory", "storage", "network", "other"];

    pub fn of(rollups: &crate::store::Rollups, head: &rollup::Headline) -> SpendByCategory {
        let p = &rollups.period;
        let gpu = crate::money::micros_from_nanos(head.gpu_fleet_nanos);
        let ec2 = (p.kubernetes_cost_nanos.rounded_micros() + p.unallocated_ec2_micros).0;
        let (storage, network) =
            (p.storage_micros.unwrap_or_default().0, p.network_micros.unwrap_or_default().0);
        // The fleet is in the instances' cost but for a GPU machine no cluster took, in other.
        let outside = p.gpu_fleet_in_other_micros.0;
        SpendByCategory {
            parts: [
                gpu,
                ec2 - (gpu - outside),
                storage,
                network,
                p.bill_amortized_micros.0 - ec2 - storage - network - outside,
            ],
            split: p.storage_micros.is_some() && p.network_micros.is_some(),
        }
    }
}

/// Monthly spend stacked by category, realized savings as a line over it; months before the
/// CUR export as Cost Explorer's total, unsplit.
fn spend_chart_by_category(
    content: &mut Content,
    history: &[(String, i64)],
    months: &[String],
    spend: &[SpendByCategory],
    savings: &[i64],
    fleet: bool,
) {
    let usd = |micros: i64| micros as f64 / 1e6;
    let mut names: Vec<&str> = SpendByCategory::NAMES.to_vec();
    if !history.is_empty() {
        names.push("Cost Explorer");
    }
    let width = names.len();
    let mut values: Vec<Vec<f64>> = history
        .iter()
        .map(|(_, micros)| {
            let mut parts = vec![0.0; width];
            parts[5] = usd(*micros);
            parts
        })
        .collect();
    values.extend(spend.iter().map(|s| {
        let mut parts: Vec<f64> = s.parts.iter().map(|m| usd(*m)).collect();
        parts.resize(width, 0.0);
        parts
    }));
    let line: Vec<Option<f64>> =
        history.iter().map(|_| None).chain(savings.iter().map(|n| Some(*n as f64 / 1e9))).collect();
    let labels: Vec<String> = history.iter().map(|(m, _)| m.clone()).chain(months.iter().cloned()).collect();
    content.charts.push(charts::stacked_columns_with_line(
        "Monthly spend by category (the line: realized savings)",
        "USD",
        &labels,
        &names,
        &values,
        Some(charts::Overlay { name: "savings", values: &line }),
    ));
    if !history.is_empty() {
        content.notes.push(HISTORY_NOTE.into());
    }
    // (A client user sees no fleet figure: nothing is split for them, and nothing to say.)
    if fleet && spend.iter().any(|s| !s.split) {
        content.notes.push(
            "Months computed before gpuledger kept storage and network apart show them under other; \
             `gpuledger compute` splits them."
                .into(),
        );
    }
}

/// Overview (leadership): this month against last, trends, the top opportunities.
pub async fn overview(page: Opening) -> Result<Response, WebError> {
    let Opening { state, filters, headers, view } = page;
    let range = &view.range;
    let mut content = Content::new("Overview", "overview", "/");
    if let Some(range) = &range {
        let computed = &view.computed;
        let current_period = range.parts.last().map(|(r, _)| r.period.period.clone()).unwrap_or_default();
        let index = computed.iter().position(|r| r.period.period == current_period).unwrap_or(0);
        // The cards describe the range: its whole months together (or the month a range of
        // days lies in), against as many computed months just before it.
        let whole: Vec<&str> =
            range.parts.iter().filter(|(_, whole)| *whole).map(|(r, _)| r.period.period.as_str()).collect();
        let (first, months) = match whole.first() {
            Some(first) => {
                (computed.iter().position(|r| r.period.period == *first).unwrap_or(index), whole.len())
            }
            None => (index, 1),
        };
        let heads: Vec<rollup::Headline> = computed[first..(first + months).min(computed.len())]
            .iter()
            .map(|r| rollup::Headline::of(r))
            .collect();
        let now = rollup::Headline::sum(&heads);
        let before = first.checked_sub(months).map(|start| {
            rollup::Headline::sum(
                &computed[start..first].iter().map(|r| rollup::Headline::of(r)).collect::<Vec<_>>(),
            )
        });
        let before_label =
            if months == 1 { "last month".to_string() } else { format!("the {months} months before") };
        let prev = |f: fn(&rollup::Headline) -> String| {
            format!("{before_label}: {}", before.as_ref().map(f).unwrap_or_else(|| "n/a".into()))
        };
        // A month in progress is compared with the month before at the same day, with a run-rate.
        if let Some((days, of)) = rollup::month_progress(&computed[index]) {
            let so_far = rollup::cost_through(&computed[index], days);
            let earlier = index.checked_sub(1).map(|i| rollup::cost_through(&computed[i], days));
            content.notes.push(format!(
                "{current_period} is in progress: data through day {days} of {of}. Its Kubernetes cost so far is {} \
                 ({} through the same day of the month before); at this rate the month comes to {}. The cards and \
                 opportunities show the month to date.",
                usd(so_far),
                earlier.map_or_else(|| "n/a".to_string(), usd),
                usd((i128::from(so_far) * i128::from(of) / i128::from(days)) as i64),
            ));
            content.json.insert(
                "in_progress".into(),
                serde_json::json!({"period": current_period, "days": days, "of": of,
                    "cost_to_date": Nanos(so_far).decimal(),
                    "previous_to_same_day": earlier.map(|e| Nanos(e).decimal()),
                    "run_rate": Nanos((i128::from(so_far) * i128::from(of) / i128::from(days)) as i64).decimal()}),
            );
        }
        if months > 1 {
            content.notes.push(format!(
                "The cards total the {months} whole months of the range ({}–{}); ratios are over the whole range.",
                whole[0],
                whole[whole.len() - 1]
            ));
        }
        // The bill in its three parts, as on the Costs and Data pages and in `report bill`.
        let bill = &computed[index].period;
        let kubernetes = bill.kubernetes_cost_nanos.rounded_micros();
        content.notes.push(format!(
            "The amortized bill of {current_period}, {} = Kubernetes {} + EC2 not allocated to pods {} + \
             other AWS cost {}.",
            bill.bill_amortized_micros.usd(),
            kubernetes.usd(),
            bill.unallocated_ec2_micros.usd(),
            bill.other_cost_micros.usd(),
        ));
        content.json.insert(
            "bill".into(),
            serde_json::json!({
                "period": current_period,
                "amortized_total": bill.bill_amortized_micros.decimal(),
                "kubernetes_cost": kubernetes.decimal(),
                "unallocated_ec2_cost": bill.unallocated_ec2_micros.decimal(),
                "other_cost": bill.other_cost_micros.decimal(),
            }),
        );
        content.cards = vec![
            Card {
                label: "Total spend (amortized bill)".into(),
                value: crate::money::format_usd(now.bill_amortized_micros),
                previous: prev(|h| crate::money::format_usd(h.bill_amortized_micros)),
                definition: "The month's amortized bill: Savings Plans and reservations spread over the hours \
                    they cover, as AWS's amortized cost; credits, refunds and tax are on the Data page's tie-out."
                    .into(),
                ..Card::default()
            }
            .with_delta(money_delta(now.bill_amortized_micros, before.as_ref().map(|h| h.bill_amortized_micros), Better::Down)),
            Card {
                label: "GPU fleet cost".into(),
                value: usd(now.gpu_fleet_nanos),
                previous: prev(|h| usd(h.gpu_fleet_nanos)),
                definition: format!(
                    "Every GPU instance-hour, whole: its pods' GPU, CPU and memory and the capacity no pod \
                     requested ({} of it). AWS's accelerator rows alone, the accelerator share, are {}.",
                    usd(now.unallocated_gpu_nanos),
                    usd(now.gpu_cost_nanos)
                ),
                ..Card::default()
            }
            .with_delta(money_delta(now.gpu_fleet_nanos, before.as_ref().map(|h| h.gpu_fleet_nanos), Better::Down)),
            Card {
                label: "GPU utilization".into(),
                value: match now.unmeasured_share() {
                    Some(unmeasured) if unmeasured > 0.0 => {
                        format!(
                            "{} ({} of GPU-hours unmeasured)",
                            percent(now.utilization()),
                            percent(Some(unmeasured))
                        )
                    }
                    _ => percent(now.utilization()),
                },
                previous: prev(|h| percent(h.utilization())),
                target: "60–85 %; below 40 % flagged".into(),
                definition: "GPU-hours used (each hour's mean utilization × the GPUs allocated) over the \
                    GPU-hours allocated to pods."
                    .into(),
                status: status(now.utilization(), |v| (0.60..=0.85).contains(&v), |v| v < 0.40),
                ..Card::default()
            }
            .with_delta(ratio_delta(now.utilization(), before.as_ref().and_then(|h| h.utilization()), Better::Up)),
            Card {
                label: "Idle GPU cost".into(),
                value: match now.idle_costs() {
                    Some((idle, _)) => format!("{} ({} of GPU-hours)", usd(idle), percent(now.idle_share())),
                    None => NOT_MEASURED.into(),
                },
                previous: prev(|h| h.idle_costs().map_or_else(|| NOT_MEASURED.into(), |(idle, _)| usd(idle))),
                target: "under 10 % of GPU-hours; above 20 % flagged".into(),
                definition: match now.idle_costs() {
                    Some((_, accelerator)) => format!(
                        "The full cost (GPU, CPU and memory) of the pod-hours whose GPUs averaged under 10 % \
                         utilization; their accelerator rows alone are {}.",
                        usd(accelerator)
                    ),
                    None => "The full cost of the pod-hours whose GPUs averaged under 10 % utilization: not \
                        known for a month none of whose GPU-hours has a utilization series (DCGM)."
                        .into(),
                },
                status: status(now.idle_share(), |v| v < 0.10, |v| v > 0.20),
                ..Card::default()
            }
            .with_delta(match now.idle_costs() {
                Some((idle, _)) => {
                    money_delta(idle, before.as_ref().and_then(|h| h.idle_costs()).map(|b| b.0), Better::Down)
                }
                None => (String::new(), ""),
            }),
            Card {
                label: "Spot adoption (training)".into(),
                value: percent(now.spot_adoption()),
                previous: prev(|h| percent(h.spot_adoption())),
                target: "above 50 %; under 30 % flagged".into(),
                definition: "Training GPU-hours on Spot over all training GPU-hours.".into(),
                status: status(now.spot_adoption(), |v| v > 0.50, |v| v < 0.30),
                ..Card::default()
            }
            .with_delta(ratio_delta(now.spot_adoption(), before.as_ref().and_then(|h| h.spot_adoption()), Better::Up)),
            Card {
                label: "Realized savings".into(),
                value: usd(now.realized_savings_nanos()),
                previous: prev(|h| usd(h.realized_savings_nanos())),
                definition: "What the same hours cost at public on-demand prices − what they cost \
                    (Spot, Savings Plans and reservations) − the commitment left unused."
                    .into(),
                ..Card::default()
            }
            .with_delta(money_delta(now.realized_savings_nanos(), before.as_ref().map(|h| h.realized_savings_nanos()), Better::Up)),
        ];
        let cards: Vec<serde_json::Value> = content
            .cards
            .iter()
            .map(|c| {
                serde_json::json!({"label": c.label, "value": c.value, "previous": c.previous,
                    "target": c.target, "definition": c.definition, "delta": c.delta})
            })
            .collect();
        content.json.insert("cards".into(), serde_json::Value::Array(cards));
        let trend: Vec<&std::sync::Arc<crate::store::Rollups>> =
            computed.iter().rev().take(12).rev().collect();
        let months: Vec<String> = trend.iter().map(|r| r.period.period.clone()).collect();
        let heads: Vec<rollup::Headline> = trend.iter().map(|r| rollup::Headline::of(r)).collect();
        let history = history(&state, &view, 12usize.saturating_sub(months.len())).await?;
        let spend: Vec<SpendByCategory> =
            trend.iter().zip(&heads).map(|(r, h)| SpendByCategory::of(r, h)).collect();
        let savings: Vec<i64> = heads.iter().map(rollup::Headline::realized_savings_nanos).collect();
        let fleet = view.viewer.scope.sees_fleet();
        spend_chart_by_category(&mut content, &history, &months, &spend, &savings, fleet);
        target_charts(&mut content, &trend, &heads);
        // Each card's figure over the same months, as a sparkline (cards in their fixed order).
        let series: [fn(&rollup::Headline) -> Option<f64>; 6] = [
            |h| Some(h.bill_amortized_micros as f64 / 1e6),
            |h| Some(h.gpu_fleet_nanos as f64 / 1e9),
            |h| h.utilization().map(|v| v * 100.0),
            |h| Some(h.idle_cost_nanos as f64 / 1e9),
            |h| h.spot_adoption().map(|v| v * 100.0),
            |h| Some(h.realized_savings_nanos() as f64 / 1e9),
        ];
        for (card, series) in content.cards.iter_mut().zip(series) {
            let values: Vec<Option<f64>> = heads.iter().map(series).collect();
            card.spark = charts::sparkline(&card.label, &months, &values);
        }
        let table = Table {
            title: "Trend".into(),
            totals: Vec::new(),
            columns: vec![
                "month",
                "spend",
                "gpu_fleet_cost",
                "accelerator_cost",
                "gpu_utilization",
                "unmeasured_share",
                "idle_cost",
                "idle_accelerator_cost",
                "unallocated_gpu_cost",
                "spot_adoption",
                "realized_savings",
                "cpu_and_memory_cost",
                "storage_cost",
                "network_cost",
                "other_cost",
                "source",
            ],
            rows: history
                .iter()
                .map(|(m, micros)| {
                    let mut row = vec![Cell::Text(m.clone()), Cell::Usd(Some(Nanos::from_micros(*micros)))];
                    row.extend([Cell::Usd(None), Cell::Usd(None), Cell::Ratio(None), Cell::Ratio(None)]);
                    row.extend([Cell::Usd(None), Cell::Usd(None), Cell::Usd(None), Cell::Ratio(None)]);
                    // Realized savings and the four categories: Cost Explorer's total is unsplit.
                    row.extend((0..5).map(|_| Cell::Usd(None)));
                    row.push(Cell::Text("cost explorer".into()));
                    row
                })
                .chain(months.iter().zip(&heads).zip(&spend).map(|((m, h), by)| {
                    let part = |i: usize| Cell::Usd(Some(Nanos::from_micros(by.parts[i])));
                    // Storage and network of a month computed before they were kept: unknown.
                    let split = |i: usize| if by.split { part(i) } else { Cell::Usd(None) };
                    vec![
                        Cell::Text(m.clone()),
                        Cell::Usd(Some(Nanos::from_micros(h.bill_amortized_micros))),
                        Cell::Usd(Some(Nanos(h.gpu_fleet_nanos))),
                        Cell::Usd(Some(Nanos(h.gpu_cost_nanos))),
                        Cell::Ratio(h.utilization()),
                        Cell::Ratio(h.unmeasured_share()),
                        Cell::Usd(h.idle_costs().map(|c| Nanos(c.0))),
                        Cell::Usd(h.idle_costs().map(|c| Nanos(c.1))),
                        Cell::Usd(Some(Nanos(h.unallocated_gpu_nanos))),
                        Cell::Ratio(h.spot_adoption()),
                        Cell::Usd(Some(Nanos(h.realized_savings_nanos()))),
                        part(1),
                        split(2),
                        split(3),
                        part(4),
                        // Computed from the month's bills, whichever sources they came from.
                        Cell::Text("bills".into()),
                    ]
                }))
                .collect(),
        };
        content.table("trend", "Monthly trend (the numbers behind the charts)", Report::of(table));
        // The printed page says whose report it is, of what and when it was prepared.
        let company = state.store.seller().await?.name;
        content.print_head = [
            company.as_str(),
            "GPU cost report",
            &crate::period::human::range(&range.label),
            &format!("prepared {}", crate::period::human::day(chrono::Utc::now().date_naive())),
        ]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" · ");
        // Where the money goes, cloud by cloud, for those who see the whole fleet.
        if view.viewer.scope.sees_fleet() && view.providers.len() > 1 && range.only.is_none() {
            let (labels, values): (Vec<String>, Vec<f64>) = rollup::spend_by_provider(range)
                .into_iter()
                .map(|(name, nanos)| (name, nanos as f64 / 1e9))
                .unzip();
            content.charts.push(charts::bars("Spend by provider (amortized, USD)", "USD", &labels, &values));
            content.table(
                "providers",
                "Spend by provider (amortized bill in USD, each bill at its month's rate)",
                rollup::providers(range),
            );
            if let Some(note) = rollup::unmeasured_providers_note(range) {
                content.notes.push(note);
            }
        }
        let mut top = rollup::opportunities(range);
        let listed = top.table.rows.len();
        content.cards.push(savings::open_card(&top, listed.min(5)));
        top.table.rows.truncate(5);
        content.table("opportunities", "Top 5 opportunities (USD per month)", top);
        content.stack("opportunities");
    }
    answer(&state, &filters, &headers, &view, content).await
}
