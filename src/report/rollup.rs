//! Reports read from rollups (`gpuledger compute`), for one billing period or any range of
//! whole days. JSON contracts (stable; fields may be added, never renamed), all shaped
//! `{"period", "rows": [...], ...}` where `period` is `YYYY-MM` or `FROM/TO` (dates, TO
//! exclusive). Money in USD, ratios as fractions (0.724), `null` where undefined:
//!
//! - `workloads`: `namespace, workload, workload_class, client, split_cost, unused_cost,
//!   total_cost, gpu_hours, used_gpu_hours, idle_gpu_hours, idle_gpu_cost, spot_gpu_hours,
//!   requests`;
//! - `clients`: `client, share_policy, direct_cost, shared_platform_cost, shared_idle_cost,
//!   shared_cost, markup_rate, markup, total_cost` (+ top-level `kubernetes_total`; Σ
//!   rows' `direct_cost + shared_cost` = `kubernetes_total`);
//! - `gpu`: `namespace, gpu_model, provisioned_gpu_hours, allocated_gpu_hours,
//!   used_gpu_hours, idle_gpu_hours, unallocated_gpu_hours, utilization,
//!   unmeasured_gpu_hours, unattributed_gpu_hours, utilization_of_provisioned, flags`; one
//!   `(all)` row per GPU model carries the fleet's provisioned and unallocated hours
//!   (namespace rows have 0 there); `(unattributed)` rows hold GPU time no pod held in the
//!   metrics;
//! - `spot`: `namespace, workload_class, gpu_hours, spot_gpu_hours, spot_adoption, flags`;
//! - `savings`: `month, public_on_demand_cost, actual_cost, realized_savings, spot_savings,
//!   commitment_savings, other_savings`;
//! - `opportunities`: `kind, namespace, workload, gpu_model, purchase_option,
//!   monthly_savings, evidence`.
//!
//! Flags follow DESIGN.md: utilization < 40 %, idle > 20 % of allocated, Spot adoption
//! < 30 % for training.

use std::collections::BTreeMap;

use serde_json::{Map, json};

use super::table::{Cell, Table};
use super::{OutputFormat, ReportError};
use crate::period::Period;
use crate::store::{CapacityRollup, ClientRollup, CostRollup, Opportunity, PeriodRollup, Store};

const NANOS: f64 = 1e9;

/// A range of whole UTC days `[from, to)` and the computed rollups that cover it.
#[derive(Debug, Clone, Default)]
pub struct RollupRange {
    /// `YYYY-MM` or `YYYY-MM-DD/YYYY-MM-DD`.
    pub label: String,
    pub from: i64,
    pub to: i64,
    pub periods: Vec<PeriodRollup>,
    /// Whether each period lies wholly in the range (its client rollups and other cost count).
    pub whole: Vec<bool>,
    pub costs: Vec<CostRollup>,
    pub capacity: Vec<CapacityRollup>,
    pub clients: Vec<ClientRollup>,
    pub opportunities: Vec<Opportunity>,
}

impl RollupRange {
    /// Loads the rollups of every billing period overlapping `[from, to)`.
    pub async fn load(
        store: &dyn Store,
        label: String,
        from: i64,
        to: i64,
    ) -> Result<RollupRange, ReportError> {
        let mut range = RollupRange { label, from, to, ..RollupRange::default() };
        let mut period = Period::containing(from);
        while period.start() < to {
            if let Some(r) = store.rollups(&period.to_string()).await? {
                let whole = period.start() >= from && period.end() <= to;
                let in_range = |day: i64| day >= from && day < to;
                range.costs.extend(r.costs.into_iter().filter(|c| in_range(c.day)));
                range.capacity.extend(r.capacity.into_iter().filter(|c| in_range(c.day)));
                if whole {
                    range.clients.extend(r.clients);
                    range.opportunities.extend(r.opportunities);
                }
                range.periods.push(r.period);
                range.whole.push(whole);
            }
            period = period.next();
        }
        if range.periods.is_empty() {
            return Err(ReportError::NotComputed(range.label));
        }
        Ok(range)
    }

    /// The range of one billing period.
    pub async fn period(store: &dyn Store, period: Period) -> Result<RollupRange, ReportError> {
        RollupRange::load(store, period.to_string(), period.start(), period.end()).await
    }

    /// Other AWS cost of the periods wholly inside the range (daily detail is not rolled up).
    pub fn other_cost_micros(&self) -> i64 {
        self.periods.iter().zip(&self.whole).filter(|(_, w)| **w).map(|(p, _)| p.other_cost_micros).sum()
    }

    fn kubernetes_nanos(&self) -> i64 {
        self.costs.iter().map(|c| c.split_cost_nanos + c.unused_cost_nanos).sum()
    }

    fn render(&self, table: Table, format: OutputFormat, extra: Map<String, serde_json::Value>) -> String {
        table.render(format, &self.label, extra)
    }
}

fn usd(nanos: i64) -> Cell {
    Cell::Usd(Some(nanos as f64 / NANOS))
}

fn ratio(part: f64, whole: f64) -> Option<f64> {
    (whole > 1e-12).then(|| part / whole)
}

fn text(s: &str) -> Cell {
    Cell::Text(s.to_string())
}

/// Per workload: cost, GPU-hours, idle, Spot, requests.
pub fn workloads(range: &RollupRange, format: OutputFormat) -> String {
    #[derive(Default)]
    struct W {
        split: i64,
        unused: i64,
        idle_cost: i64,
        allocated: f64,
        used: f64,
        idle: f64,
        spot: f64,
        requests: f64,
    }
    let mut rows: BTreeMap<(&str, &str, &str, &str), W> = BTreeMap::new();
    for c in &range.costs {
        let w = rows.entry((&c.namespace, &c.workload, &c.workload_class, &c.client)).or_default();
        w.split += c.split_cost_nanos;
        w.unused += c.unused_cost_nanos;
        w.idle_cost += c.idle_gpu_cost_nanos;
        w.allocated += c.gpu_hours_allocated;
        w.used += c.gpu_hours_used;
        w.idle += c.gpu_hours_idle;
        w.spot += c.spot_gpu_hours;
        w.requests += c.requests;
    }
    let table = Table {
        title: "Cost and GPU-hours by workload".into(),
        columns: vec![
            "namespace",
            "workload",
            "workload_class",
            "client",
            "split_cost",
            "unused_cost",
            "total_cost",
            "gpu_hours",
            "used_gpu_hours",
            "idle_gpu_hours",
            "idle_gpu_cost",
            "spot_gpu_hours",
            "requests",
        ],
        rows: rows
            .iter()
            .map(|((ns, workload, class, client), w)| {
                vec![
                    text(ns),
                    text(workload),
                    text(class),
                    text(client),
                    usd(w.split),
                    usd(w.unused),
                    usd(w.split + w.unused),
                    Cell::Hours(w.allocated),
                    Cell::Hours(w.used),
                    Cell::Hours(w.idle),
                    usd(w.idle_cost),
                    Cell::Hours(w.spot),
                    Cell::Count(w.requests),
                ]
            })
            .collect(),
    };
    let mut extra = Map::new();
    extra.insert("kubernetes_total".into(), json!(range.kubernetes_nanos() as f64 / NANOS));
    range.render(table, format, extra)
}

/// Per client: direct cost, shares of the platform and idle pools, markup, total.
pub fn clients(range: &RollupRange, format: OutputFormat) -> String {
    // Periods add up; the policy and markup shown are the latest period's.
    let mut rows: BTreeMap<&str, ClientRollup> = BTreeMap::new();
    for c in &range.clients {
        match rows.get_mut(c.client.as_str()) {
            None => {
                rows.insert(&c.client, c.clone());
            }
            Some(r) => {
                r.direct_cost_nanos += c.direct_cost_nanos;
                r.shared_platform_nanos += c.shared_platform_nanos;
                r.shared_idle_nanos += c.shared_idle_nanos;
                r.markup_nanos += c.markup_nanos;
                r.share_policy = c.share_policy.clone();
                r.markup_basis_points = c.markup_basis_points;
            }
        }
    }
    let table = Table {
        title: "Chargeback by client".into(),
        columns: vec![
            "client",
            "share_policy",
            "direct_cost",
            "shared_platform_cost",
            "shared_idle_cost",
            "shared_cost",
            "markup_rate",
            "markup",
            "total_cost",
        ],
        rows: rows
            .values()
            .map(|c| {
                let shared = c.shared_platform_nanos + c.shared_idle_nanos;
                vec![
                    text(&c.client),
                    text(&c.share_policy),
                    usd(c.direct_cost_nanos),
                    usd(c.shared_platform_nanos),
                    usd(c.shared_idle_nanos),
                    usd(shared),
                    Cell::Ratio(Some(c.markup_basis_points as f64 / 10_000.0)),
                    usd(c.markup_nanos),
                    usd(c.direct_cost_nanos + shared + c.markup_nanos),
                ]
            })
            .collect(),
    };
    let mut extra = Map::new();
    let whole_costs: i64 = range
        .periods
        .iter()
        .zip(&range.whole)
        .filter(|(_, w)| **w)
        .map(|(p, _)| p.kubernetes_cost_nanos)
        .sum();
    extra.insert("kubernetes_total".into(), json!(whole_costs as f64 / NANOS));
    extra.insert("note".into(), json!("clients are computed per whole billing period"));
    range.render(table, format, extra)
}

/// GPU-hours per namespace and GPU model, with the fleet's provisioned and unallocated hours.
pub fn gpu(range: &RollupRange, unattributed: &BTreeMap<String, f64>, format: OutputFormat) -> String {
    #[derive(Default)]
    struct G {
        provisioned: f64,
        allocated: f64,
        used: f64,
        idle: f64,
        unmeasured: f64,
        unattributed: f64,
    }
    let mut rows: BTreeMap<(String, String), G> = BTreeMap::new();
    for (model, hours) in unattributed {
        rows.entry(("(unattributed)".to_string(), model.clone())).or_default().unattributed += hours;
    }
    for c in range.costs.iter().filter(|c| c.gpu_hours_allocated > 0.0) {
        for namespace in [c.namespace.as_str(), "(all)"] {
            let g = rows.entry((namespace.to_string(), c.gpu_model.clone())).or_default();
            g.allocated += c.gpu_hours_allocated;
            g.used += c.gpu_hours_used;
            g.idle += c.gpu_hours_idle;
            g.unmeasured += c.gpu_hours_unmeasured;
        }
    }
    for c in range.capacity.iter().filter(|c| c.gpu_hours_provisioned > 0.0) {
        rows.entry(("(all)".to_string(), c.gpu_model.clone())).or_default().provisioned +=
            c.gpu_hours_provisioned;
    }
    let table = Table {
        title: "GPU-hours by namespace and GPU model".into(),
        columns: vec![
            "namespace",
            "gpu_model",
            "provisioned_gpu_hours",
            "allocated_gpu_hours",
            "used_gpu_hours",
            "idle_gpu_hours",
            "unallocated_gpu_hours",
            "unmeasured_gpu_hours",
            "unattributed_gpu_hours",
            "utilization",
            "utilization_of_provisioned",
            "flags",
        ],
        rows: rows
            .iter()
            .map(|((namespace, model), g)| {
                let utilization = ratio(g.used, g.allocated - g.unmeasured);
                let mut flags = Vec::new();
                if utilization.is_some_and(|u| u < 0.40) {
                    flags.push("utilization below 40 %");
                }
                if ratio(g.idle, g.allocated).is_some_and(|i| i > 0.20) {
                    flags.push("idle above 20 %");
                }
                vec![
                    text(namespace),
                    text(model),
                    Cell::Hours(g.provisioned),
                    Cell::Hours(g.allocated),
                    Cell::Hours(g.used),
                    Cell::Hours(g.idle),
                    Cell::Hours(if namespace == "(all)" {
                        (g.provisioned - g.allocated).max(0.0)
                    } else {
                        0.0
                    }),
                    Cell::Hours(g.unmeasured),
                    Cell::Hours(g.unattributed),
                    Cell::Ratio(utilization),
                    Cell::Ratio(if namespace == "(all)" { ratio(g.used, g.provisioned) } else { None }),
                    Cell::Text(flags.join("; ")),
                ]
            })
            .collect(),
    };
    let mut extra = Map::new();
    extra.insert("unattributed_gpu_hours".into(), json!(unattributed.values().sum::<f64>()));
    extra.insert("idle_threshold".into(), json!(range.periods.first().map_or(0.1, |p| p.idle_threshold)));
    range.render(table, format, extra)
}

/// Spot adoption of GPU-hours per namespace and workload class.
pub fn spot(range: &RollupRange, format: OutputFormat) -> String {
    let mut rows: BTreeMap<(&str, &str), (f64, f64)> = BTreeMap::new();
    for c in range.costs.iter().filter(|c| c.gpu_hours_allocated > 0.0) {
        for namespace in [c.namespace.as_str(), "(all)"] {
            let r = rows.entry((namespace, &c.workload_class)).or_default();
            r.0 += c.gpu_hours_allocated;
            r.1 += c.spot_gpu_hours;
        }
    }
    let table = Table {
        title: "Spot adoption (GPU-hours)".into(),
        columns: vec!["namespace", "workload_class", "gpu_hours", "spot_gpu_hours", "spot_adoption", "flags"],
        rows: rows
            .iter()
            .map(|((namespace, class), (hours, spot))| {
                let adoption = ratio(*spot, *hours);
                let flag = *class == "training" && adoption.is_some_and(|a| a < 0.30);
                vec![
                    text(namespace),
                    text(class),
                    Cell::Hours(*hours),
                    Cell::Hours(*spot),
                    Cell::Ratio(adoption),
                    Cell::Text(if flag { "training Spot adoption below 30 %".into() } else { String::new() }),
                ]
            })
            .collect(),
    };
    range.render(table, format, Map::new())
}

/// Realized savings per month: public on-demand cost − actual, by purchase option.
pub fn savings(range: &RollupRange, format: OutputFormat) -> String {
    // (public on-demand, actual, spot savings, commitment savings, other savings)
    let mut months: BTreeMap<&str, [i64; 5]> = BTreeMap::new();
    for c in &range.costs {
        let m = months.entry(&c.period).or_default();
        let actual = c.split_cost_nanos + c.unused_cost_nanos;
        let saved = c.public_on_demand_cost_nanos - actual;
        m[0] += c.public_on_demand_cost_nanos;
        m[1] += actual;
        match c.purchase_option.as_str() {
            "Spot" => m[2] += saved,
            "Savings Plans" | "Reserved" => m[3] += saved,
            _ => m[4] += saved,
        }
    }
    let table = Table {
        title: "Realized savings (public on-demand − actual, Kubernetes cost)".into(),
        columns: vec![
            "month",
            "public_on_demand_cost",
            "actual_cost",
            "realized_savings",
            "spot_savings",
            "commitment_savings",
            "other_savings",
        ],
        rows: months
            .iter()
            .map(|(month, m)| {
                vec![text(month), usd(m[0]), usd(m[1]), usd(m[0] - m[1]), usd(m[2]), usd(m[3]), usd(m[4])]
            })
            .collect(),
    };
    range.render(table, format, Map::new())
}

/// Opportunities ranked by dollars per month.
pub fn opportunities(range: &RollupRange, format: OutputFormat) -> String {
    let mut list = range.opportunities.clone();
    list.sort_by_key(|o| std::cmp::Reverse(o.monthly_nanos));
    let table = Table {
        title: "Opportunities (USD per month)".into(),
        columns: vec![
            "kind",
            "namespace",
            "workload",
            "gpu_model",
            "purchase_option",
            "monthly_savings",
            "evidence",
        ],
        rows: list
            .iter()
            .map(|o| {
                vec![
                    text(&o.kind),
                    text(&o.namespace),
                    text(&o.workload),
                    text(&o.gpu_model),
                    text(&o.purchase_option),
                    usd(o.monthly_nanos),
                    text(&o.evidence),
                ]
            })
            .collect(),
    };
    let total: i64 = list.iter().map(|o| o.monthly_nanos).sum();
    let mut extra = Map::new();
    extra.insert("total_monthly_savings".into(), json!(total as f64 / NANOS));
    range.render(table, format, extra)
}
