//! `gpuledger report split`: gpuledger's own split of a cluster's node cost among its pods
//! ([`crate::engine::kube_split`], method `gpuledger-split-v1`) on any cloud, per namespace,
//! workload and client, with the reconciliation to the bill. The node-hours' cost is the
//! CUR's amortized cost of each instance-hour for a cluster the CUR names, else the FOCUS
//! bills' `EffectiveCost` of each virtual machine its nodes' `provider_id` name (or its tags
//! name the cluster on), in the bill's currency.
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

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Value, json};

use super::split_check::{Reconciliation, client_of, reconcile, split_logged};
use super::table::{Cell, Table};
use super::{OutputFormat, ReportError};
use crate::engine::kube_split::{instance_key, spread_vm_costs};
use crate::money::{Nanos, format_usd_nanos};
use crate::period::Period;
use crate::store::Store;

/// The method id FOCUS 1.3's `AllocatedMethodId` names gpuledger's split by.
pub const METHOD_ID: &str = "gpuledger-split-v1";

/// One group's part of the split (a namespace, a workload, a client).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Part {
    pub key: Vec<String>,
    pub split_nanos: i64,
    pub unused_nanos: i64,
    pub pod_hours: u64,
}

impl Part {
    pub fn cost_nanos(&self) -> i64 {
        self.split_nanos + self.unused_nanos
    }
}

/// A cluster's split for one period.
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
        let name = period.to_string();
        let started = std::time::Instant::now();
        let (nodes, pods) = store.kube_hours(period.start(), period.end(), cluster).await?;
        let read_kube = started.elapsed().as_secs_f64();
        if cluster.is_empty() || nodes.is_empty() {
            return Err(ReportError::NoKubernetes { cluster: cluster.to_string(), period });
        }
        // The CUR's instance-hours when it names the cluster, else the FOCUS bills'.
        let mut costs: HashMap<(String, i64), i64> = HashMap::new();
        for hour in store.cluster_instance_hours(&name, cluster).await? {
            *costs.entry((hour.instance_id, hour.hour)).or_default() += hour.amortized_cost_micros * 1000;
        }
        let (provider, currency, node_costs_from) = if !costs.is_empty() {
            ("aws".to_string(), "USD".to_string(), "cur")
        } else {
            let keys: HashSet<String> = nodes.iter().map(|n| instance_key(&n.provider_id)).collect();
            let vms: Vec<_> = store
                .bill_vm_costs(&name)
                .await?
                .into_iter()
                .filter(|vm| vm.cluster == cluster || keys.contains(&vm.instance))
                .collect();
            let bills: BTreeMap<(String, String), String> = store
                .bills(Some(&name))
                .await?
                .into_iter()
                .filter(|b| {
                    vms.iter().any(|vm| vm.provider == b.provider && vm.billing_account == b.billing_account)
                })
                .map(|b| ((b.provider, b.billing_account), b.currency))
                .collect();
            let currencies: HashSet<&String> = bills.values().collect();
            if currencies.len() > 1 {
                return Err(ReportError::Settings(format!(
                    "the virtual machines of cluster {cluster:?} are billed in {} currencies ({}): one split is in one currency",
                    currencies.len(),
                    bills.values().cloned().collect::<Vec<_>>().join(", ")
                )));
            }
            let Some(((provider, _), currency)) = bills.into_iter().next() else {
                return Err(ReportError::NoNodeCosts { cluster: cluster.to_string(), period });
            };
            costs = spread_vm_costs(&vms, &nodes);
            (provider, currency, "focus")
        };
        tracing::debug!(cluster, read_kubernetes_seconds = (read_kube * 10.0).round() / 10.0, "read");
        let split = split_logged(cluster, &nodes, &pods, &costs, started.elapsed().as_secs_f64());
        let parts: Vec<(Vec<String>, i64, i64)> = split
            .pods
            .iter()
            .map(|cost| {
                let p = &pods[cost.pod];
                (
                    vec![p.namespace.clone(), p.workload.clone(), client_of(&p.labels, "client")],
                    cost.split_nanos,
                    cost.unused_nanos,
                )
            })
            .collect();
        let group = |key: fn(&[String]) -> Vec<String>| -> Vec<Part> {
            let mut groups: BTreeMap<Vec<String>, Part> = BTreeMap::new();
            for (names, split, unused) in &parts {
                let part = groups.entry(key(names)).or_default();
                part.split_nanos += split;
                part.unused_nanos += unused;
                part.pod_hours += 1;
            }
            groups.into_iter().map(|(key, part)| Part { key, ..part }).collect()
        };
        Ok(PodSplitReport {
            period,
            cluster: cluster.to_string(),
            provider,
            currency,
            node_costs_from,
            namespaces: group(|n| vec![n[0].clone()]),
            workloads: group(|n| vec![n[0].clone(), n[1].clone()]),
            clients: group(|n| vec![n[2].clone()]),
            reconciliation: reconcile(&split, &costs, 0),
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
