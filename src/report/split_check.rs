//! `gpuledger report split-check`: on a cluster whose bill carries AWS's split (the CUR's
//! split cost allocation data), gpuledger's own split of the same node-hours from
//! kube-state-metrics and cAdvisor ([`crate::engine::kube_split`]), compared per namespace,
//! workload and client. The node-hours' cost is the bill's amortized cost of each instance
//! and hour (what AWS splits, and FOCUS's `EffectiveCost` of the VM); both sides are split +
//! unused cost.
//!
//! JSON contract (stable; fields may be added, never renamed):
//!
//! ```json
//! {"period": "2026-10", "cluster": "ml-prod",
//!  "rows": [{"namespace": "acme-train", "aws_split_cost": "1234.567890",
//!            "gpuledger_split_cost": "1234.001234", "difference": "-0.566656",
//!            "difference_percent": -0.0459}],
//!  "within_tolerance": true, "tolerance_percent": 0.5,
//!  "workloads": [{"namespace", "workload", "aws_split_cost", …}],
//!  "clients": [{"client", "aws_split_cost", …}],
//!  "reconciliation": {"bill_node_cost", "pods_cost", "unallocated_cost", …}}
//! ```
//!
//! `difference` is gpuledger − AWS, `difference_percent` that over AWS's cost (null where
//! AWS's is zero). A row is within tolerance when its difference is at most
//! `tolerance_percent` of AWS's cost, or under a cent. Amounts are exact decimal strings of
//! micro-dollars.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

use super::table::{Cell, Table};
use super::{OutputFormat, ReportError};
use crate::engine::cluster_split::{CurNodeHours, Reconciliation, client_of, split_logged};
use crate::money::{format_usd, micros_from_nanos, usd_decimal};
use crate::period::Period;
use crate::store::Store;

/// One compared group (a namespace, a workload, a client).
#[derive(Debug, Clone, PartialEq)]
pub struct Compared {
    /// The group's names: `[namespace]`, `[namespace, workload]` or `[client]`.
    pub key: Vec<String>,
    pub aws_nanos: i64,
    pub gpuledger_nanos: i64,
}

impl Compared {
    pub fn difference_nanos(&self) -> i64 {
        self.gpuledger_nanos - self.aws_nanos
    }

    /// gpuledger − AWS over AWS, in percent; `None` where AWS's cost is zero.
    pub fn percent(&self) -> Option<f64> {
        (self.aws_nanos != 0).then(|| self.difference_nanos() as f64 / self.aws_nanos.abs() as f64 * 100.0)
    }

    pub fn within(&self, tolerance_percent: f64) -> bool {
        let allowed = (self.aws_nanos.abs() as f64 * tolerance_percent / 100.0).max(10_000_000.0);
        (self.difference_nanos().abs() as f64) <= allowed
    }
}

/// A cluster's split check for one period.
#[derive(Debug, Clone)]
pub struct SplitCheck {
    pub period: Period,
    pub cluster: String,
    pub tolerance_percent: f64,
    pub namespaces: Vec<Compared>,
    pub workloads: Vec<Compared>,
    pub clients: Vec<Compared>,
    pub reconciliation: Reconciliation,
}

impl SplitCheck {
    pub async fn load(
        store: &dyn Store,
        period: Period,
        cluster: &str,
        tolerance_percent: f64,
    ) -> Result<SplitCheck, ReportError> {
        let name = period.to_string();
        if store.periods().await?.iter().all(|p| p.period != name) {
            return Err(ReportError::NoData(period));
        }
        let costs = CurNodeHours::read(store, period, cluster).await?.costs;
        if cluster.is_empty() {
            return Err(ReportError::NoKubernetes { cluster: cluster.to_string(), period });
        }
        let started = std::time::Instant::now();
        let (nodes, pods) = store.kube_hours(period.start(), period.end(), cluster).await?;
        if nodes.is_empty() {
            return Err(ReportError::NoKubernetes { cluster: cluster.to_string(), period });
        }
        let inputs = store.compute_inputs(&name, 0.0).await?.ok_or(ReportError::NoData(period))?;
        let mut aws_by_pod: HashMap<i64, i64> = HashMap::new();
        for day in &inputs.pod_days {
            *aws_by_pod.entry(day.pod_id).or_default() += day.split_cost_nanos + day.unused_cost_nanos;
        }
        let aws: Vec<(Vec<String>, i64)> = inputs
            .pods
            .iter()
            .filter(|p| p.cluster == cluster)
            .map(|p| {
                (
                    vec![p.namespace.clone(), p.workload.clone(), client_of(&p.labels, "user_client")],
                    aws_by_pod.get(&p.id).copied().unwrap_or(0),
                )
            })
            .collect();
        if aws.is_empty() {
            return Err(ReportError::NoAwsSplit { cluster: cluster.to_string(), period });
        }
        let split = split_logged(cluster, &nodes, &pods, &costs, started.elapsed().as_secs_f64());
        let ours: Vec<(Vec<String>, i64)> = split
            .pods
            .iter()
            .map(|cost| {
                let p = &pods[cost.pod];
                (
                    vec![p.namespace.clone(), p.workload.clone(), client_of(&p.labels, "client")],
                    cost.split_nanos + cost.unused_nanos,
                )
            })
            .collect();
        let group = |key: fn(&[String]) -> Vec<String>| -> Vec<Compared> {
            let mut groups: BTreeMap<Vec<String>, (i64, i64)> = BTreeMap::new();
            for (names, nanos) in &aws {
                groups.entry(key(names)).or_default().0 += nanos;
            }
            for (names, nanos) in &ours {
                groups.entry(key(names)).or_default().1 += nanos;
            }
            groups
                .into_iter()
                .map(|(key, (aws_nanos, gpuledger_nanos))| Compared { key, aws_nanos, gpuledger_nanos })
                .collect()
        };
        let reconciliation = Reconciliation::of(&split, &costs, aws.iter().map(|(_, n)| n).sum());
        Ok(SplitCheck {
            period,
            cluster: cluster.to_string(),
            tolerance_percent,
            namespaces: group(|n| vec![n[0].clone()]),
            workloads: group(|n| vec![n[0].clone(), n[1].clone()]),
            clients: group(|n| vec![n[2].clone()]),
            reconciliation,
        })
    }

    pub fn within_tolerance(&self) -> bool {
        self.namespaces.iter().all(|c| c.within(self.tolerance_percent))
    }

    /// The namespaces furthest from AWS's split, by |percent|, largest first.
    pub fn worst(&self, n: usize) -> Vec<&Compared> {
        let mut rows: Vec<&Compared> = self.namespaces.iter().collect();
        rows.sort_by(|a, b| {
            let size = |c: &Compared| c.percent().map_or(0.0, f64::abs);
            size(b).total_cmp(&size(a))
        });
        rows.truncate(n);
        rows
    }

    fn row_json(names: &[&str], compared: &Compared) -> Value {
        let mut row = serde_json::Map::new();
        for (name, value) in names.iter().zip(&compared.key) {
            row.insert(name.to_string(), json!(value));
        }
        let money = |nanos: i64| json!(usd_decimal(micros_from_nanos(nanos)));
        row.insert("aws_split_cost".into(), money(compared.aws_nanos));
        row.insert("gpuledger_split_cost".into(), money(compared.gpuledger_nanos));
        row.insert("difference".into(), money(compared.difference_nanos()));
        row.insert(
            "difference_percent".into(),
            compared.percent().map_or(Value::Null, |p| json!((p * 10_000.0).round() / 10_000.0)),
        );
        Value::Object(row)
    }

    pub fn to_json(&self) -> Value {
        let r = &self.reconciliation;
        json!({
            "period": self.period.to_string(),
            "cluster": self.cluster,
            "rows": self.namespaces.iter().map(|c| Self::row_json(&["namespace"], c)).collect::<Vec<_>>(),
            "within_tolerance": self.within_tolerance(),
            "tolerance_percent": self.tolerance_percent,
            "workloads": self.workloads.iter().map(|c| Self::row_json(&["namespace", "workload"], c)).collect::<Vec<_>>(),
            "clients": self.clients.iter().map(|c| Self::row_json(&["client"], c)).collect::<Vec<_>>(),
            "reconciliation": r.to_json(),
        })
    }

    fn table(&self, money: fn(i64) -> String) -> Table {
        Table {
            title: format!("gpuledger's split against AWS's, cluster {}", self.cluster),
            columns: vec![
                "namespace",
                "aws_split_cost",
                "gpuledger_split_cost",
                "difference",
                "difference_percent",
            ],
            rows: self
                .namespaces
                .iter()
                .map(|c| {
                    vec![
                        Cell::Text(c.key[0].clone()),
                        Cell::Text(money(micros_from_nanos(c.aws_nanos))),
                        Cell::Text(money(micros_from_nanos(c.gpuledger_nanos))),
                        Cell::Text(money(micros_from_nanos(c.difference_nanos()))),
                        Cell::Text(c.percent().map_or_else(String::new, |p| format!("{p:.3}"))),
                    ]
                })
                .collect(),
            totals: Vec::new(),
        }
    }

    pub fn render(&self, format: OutputFormat) -> String {
        Table::render_check(
            format,
            &self.period.to_string(),
            || self.to_json(),
            |money| self.table(money),
            || self.summary(),
        )
    }

    /// What a person reads under the table.
    pub fn summary(&self) -> String {
        let r = &self.reconciliation;
        let beyond = self.namespaces.iter().filter(|c| !c.within(self.tolerance_percent)).count();
        let worst: Vec<String> = self
            .worst(3)
            .iter()
            .map(|c| format!("{} {:+.3} %", c.key[0], c.percent().unwrap_or(0.0)))
            .collect();
        format!(
            "{} {}: {} namespaces, {} beyond {} % (worst: {}); the bill's node-hours {} = pods {} + \
             unallocated {} + not in Prometheus {} ({} instance-hours); {} node-hours without pods, \
             {} node-hours and {} pod-hours not in the bill",
            self.cluster,
            self.period,
            self.namespaces.len(),
            beyond,
            self.tolerance_percent,
            worst.join(", "),
            format_usd(micros_from_nanos(r.bill_node_nanos)),
            format_usd(micros_from_nanos(r.pods_nanos)),
            format_usd(micros_from_nanos(r.unallocated_nanos)),
            format_usd(micros_from_nanos(r.bill_hours_not_in_prometheus_nanos)),
            r.bill_hours_not_in_prometheus,
            r.node_hours_without_pods,
            r.node_hours_not_in_bill,
            r.pod_hours_not_in_bill,
        )
    }
}
