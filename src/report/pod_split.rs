//! `gpuledger report split`: gpuledger's own split of a cluster's node cost among its pods
//! ([`crate::engine::cluster_split`], method `gpuledger-split-v1`) on any cloud, per
//! namespace, workload and client, with the reconciliation to the bill.
//!
//! JSON contract (stable; fields may be added, never renamed):
//!
//! ```json
//! {"period": "2026-10", "cluster": "aks-weu", "provider": "azure", "currency": "EUR",
//!  "method": "gpuledger-split-v1", "node_costs_from": "focus",
//!  "rows": [{"namespace": "acme-train", "cost": "146.027204", "split_cost": "140.1",
//!            "unused_cost": "5.9", "pod_hours": 96}],
//!  "workloads": [{"namespace", "workload", "cost", …}], "clients": [{"client", "cost", …}],
//!  "reconciliation": {"bill_node_cost", "pods_cost", "unallocated_cost", …}}
//! ```
//!
//! Amounts are exact decimal strings of micro-units of `currency`.

use serde_json::{Value, json};

use super::table::{Cell, Table};
use super::{OutputFormat, ReportError};
use crate::engine::cluster_split::{ClusterSplit, METHOD_ID, Part, Reconciliation};
use crate::money::{Nanos, format_usd_nanos};
use crate::period::Period;
use crate::store::Store;

/// A cluster's split for one period, as the report shows it.
#[derive(Debug, Clone)]
pub struct PodSplitReport {
    pub period: Period,
    pub cluster: String,
    pub provider: String,
    pub currency: String,
    /// `cur` or `focus`.
    pub node_costs_from: &'static str,
    pub namespaces: Vec<Part>,
    pub workloads: Vec<Part>,
    pub clients: Vec<Part>,
    pub reconciliation: Reconciliation,
}

impl PodSplitReport {
    pub async fn load(
        store: &dyn Store,
        period: Period,
        cluster: &str,
    ) -> Result<PodSplitReport, ReportError> {
        let split = ClusterSplit::load(store, period, cluster).await?;
        Ok(PodSplitReport {
            namespaces: split.namespaces(),
            workloads: split.workloads(),
            clients: split.clients(),
            period,
            cluster: split.cluster,
            provider: split.provider,
            currency: split.currency,
            node_costs_from: split.node_costs_from,
            reconciliation: split.reconciliation,
        })
    }

    fn row_json(names: &[&str], part: &Part) -> Value {
        let mut row = serde_json::Map::new();
        for (name, value) in names.iter().zip(&part.key) {
            row.insert(name.to_string(), json!(value));
        }
        row.insert("cost".into(), json!(Nanos(part.cost_nanos()).decimal()));
        row.insert("split_cost".into(), json!(Nanos(part.split_nanos).decimal()));
        row.insert("unused_cost".into(), json!(Nanos(part.unused_nanos).decimal()));
        row.insert("pod_hours".into(), json!(part.pod_hours));
        Value::Object(row)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "period": self.period.to_string(),
            "cluster": self.cluster,
            "provider": self.provider,
            "currency": self.currency,
            "method": METHOD_ID,
            "node_costs_from": self.node_costs_from,
            "rows": self.namespaces.iter().map(|p| Self::row_json(&["namespace"], p)).collect::<Vec<_>>(),
            "workloads": self.workloads.iter().map(|p| Self::row_json(&["namespace", "workload"], p)).collect::<Vec<_>>(),
            "clients": self.clients.iter().map(|p| Self::row_json(&["client"], p)).collect::<Vec<_>>(),
            "reconciliation": self.reconciliation.to_json(),
        })
    }

    /// An amount for people, in the split's currency.
    fn money(&self, nanos: i64) -> String {
        let dollars = format_usd_nanos(nanos);
        match self.currency.as_str() {
            "USD" | "" => dollars,
            code => dollars.replacen('$', &format!("{code} "), 1),
        }
    }

    pub fn render(&self, format: OutputFormat) -> String {
        if format == OutputFormat::Json {
            return serde_json::to_string_pretty(&self.to_json()).unwrap_or_default() + "\n";
        }
        let people = format == OutputFormat::Table;
        let money = |nanos: i64| if people { self.money(nanos) } else { Nanos(nanos).decimal() };
        let table = Table {
            title: format!("gpuledger's split of cluster {} ({})", self.cluster, self.currency),
            columns: vec!["namespace", "cost", "split_cost", "unused_cost", "pod_hours"],
            rows: self
                .namespaces
                .iter()
                .map(|p| {
                    vec![
                        Cell::Text(p.key[0].clone()),
                        Cell::Text(money(p.cost_nanos())),
                        Cell::Text(money(p.split_nanos)),
                        Cell::Text(money(p.unused_nanos)),
                        Cell::Text(p.pod_hours.to_string()),
                    ]
                })
                .collect(),
            totals: Vec::new(),
        };
        let mut out = table.render(format, &self.period.to_string(), serde_json::Map::new());
        if people {
            let r = &self.reconciliation;
            out.push_str(&format!(
                "{} {} ({}, node costs from the {} bill): the bill's node-hours {} = pods {} + unallocated {} + \
                 not in Prometheus {} ({} hours); {} node-hours without pods, {} node-hours and {} pod-hours not in the bill\n",
                self.cluster,
                self.period,
                METHOD_ID,
                self.node_costs_from.to_uppercase(),
                self.money(r.bill_node_nanos),
                self.money(r.pods_nanos),
                self.money(r.unallocated_nanos),
                self.money(r.bill_hours_not_in_prometheus_nanos),
                r.bill_hours_not_in_prometheus,
                r.node_hours_without_pods,
                r.node_hours_not_in_bill,
                r.pod_hours_not_in_bill,
            ));
        }
        out
    }
}
