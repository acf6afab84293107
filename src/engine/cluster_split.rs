//! One cluster's split for a period, loaded from the store: the node-hours' cost from the
//! bill that pays for them (the CUR's amortized cost of each instance-hour for a cluster the
//! CUR names, else the FOCUS bills' `EffectiveCost` of each virtual machine its nodes'
//! `provider_id` name, or its tags name the cluster on, in the bill's currency), divided among
//! the pods by [`super::kube_split`] (method `gpuledger-split-v1`), grouped per namespace,
//! workload and client, with the reconciliation to the bill. `report split`, `report
//! split-check`, compute and `export focus` all read it from here.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Value, json};

use super::kube_split::{KubeSplit, instance_key, split_node_hours, spread_vm_costs};
use crate::money::{micros_from_nanos, usd_decimal};
use crate::period::Period;
use crate::store::{
    BillVmCost, GpuPodHour, KubeNodeHour, KubePodHour, PodDay, PodRecord, PurchaseOption, Store, StoreError,
};

/// The method id FOCUS 1.3's `AllocatedMethodId` names gpuledger's split by.
pub const METHOD_ID: &str = "gpuledger-split-v1";

/// Why a cluster's split cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No Kubernetes series stored for the cluster and period.
    #[error(
        "no Kubernetes nodes of cluster {cluster:?} in {period}: run `gpuledger ingest prometheus --kube-state-metrics` first"
    )]
    NoKubernetes { cluster: String, period: Period },
    /// Neither the CUR nor a FOCUS bill has a cost for the cluster's nodes.
    #[error(
        "no bill of {period} has a cost for the nodes of cluster {cluster:?}: run `gpuledger ingest cur` or `gpuledger ingest focus` for the bill that pays for them"
    )]
    NoNodeCosts { cluster: String, period: Period },
    /// The cluster's VMs are billed in more than one currency.
    #[error(
        "the virtual machines of cluster {cluster:?} are billed in {} currencies ({}): one split is in one currency",
        currencies.len(),
        currencies.join(", ")
    )]
    TwoCurrencies { cluster: String, currencies: Vec<String> },
}

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

/// What the split could not place, and the sums that tie it to the bill.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reconciliation {
    /// Σ the cluster's instance-hours in the bill.
    pub bill_node_nanos: i64,
    /// Σ gpuledger's split + unused cost of the pods.
    pub pods_nanos: i64,
    /// The node-hours' cost no pod was given (no pod ran, or no pod asked for a resource).
    pub unallocated_nanos: i64,
    pub node_hours: usize,
    pub node_hours_without_pods: usize,
    pub node_hours_without_pods_nanos: i64,
    /// Node-hours Prometheus reported that the bill has no cost for, and the pod-hours on them.
    pub node_hours_not_in_bill: usize,
    pub pod_hours_not_in_bill: usize,
    /// Instance-hours of the cluster in the bill that no node reported.
    pub bill_hours_not_in_prometheus: usize,
    pub bill_hours_not_in_prometheus_nanos: i64,
    /// AWS's split + unused of the cluster's pods.
    pub aws_pods_nanos: i64,
}

impl Reconciliation {
    pub fn of(split: &KubeSplit, costs: &HashMap<(String, i64), i64>, aws_pods_nanos: i64) -> Reconciliation {
        Reconciliation {
            bill_node_nanos: costs.values().sum(),
            pods_nanos: split.pods.iter().map(|p| p.split_nanos + p.unused_nanos).sum(),
            unallocated_nanos: split.unallocated.iter().map(|(_, n)| n).sum(),
            node_hours: costs.len(),
            node_hours_without_pods: split.node_hours_without_pods,
            node_hours_without_pods_nanos: split.node_hours_without_pods_nanos,
            node_hours_not_in_bill: split.nodes_without_bill.len(),
            pod_hours_not_in_bill: split.pods_without_bill.len(),
            bill_hours_not_in_prometheus: split.bill_without_nodes.len(),
            bill_hours_not_in_prometheus_nanos: split.bill_without_nodes.iter().map(|b| b.2).sum(),
            aws_pods_nanos,
        }
    }

    /// The sums as exact decimal strings, and the counts.
    pub fn to_json(&self) -> Value {
        let money = |nanos: i64| json!(usd_decimal(micros_from_nanos(nanos)));
        json!({
            "bill_node_cost": money(self.bill_node_nanos),
            "pods_cost": money(self.pods_nanos),
            "unallocated_cost": money(self.unallocated_nanos),
            "aws_pods_cost": money(self.aws_pods_nanos),
            "node_hours": self.node_hours,
            "node_hours_without_pods": self.node_hours_without_pods,
            "node_hours_without_pods_cost": money(self.node_hours_without_pods_nanos),
            "node_hours_not_in_bill": self.node_hours_not_in_bill,
            "pod_hours_not_in_bill": self.pod_hours_not_in_bill,
            "bill_hours_not_in_prometheus": self.bill_hours_not_in_prometheus,
            "bill_hours_not_in_prometheus_cost": money(self.bill_hours_not_in_prometheus_nanos),
        })
    }
}

/// A pod's value of a label (`(none)` without it), from its labels' JSON.
pub fn client_of(labels: &str, key: &str) -> String {
    serde_json::from_str::<BTreeMap<String, String>>(labels)
        .ok()
        .and_then(|l| l.get(key).cloned())
        .unwrap_or_else(|| "(none)".into())
}

/// The split, timed in the log with the read before it.
pub fn split_logged(
    cluster: &str,
    nodes: &[KubeNodeHour],
    pods: &[KubePodHour],
    costs: &HashMap<(String, i64), i64>,
    read_seconds: f64,
) -> KubeSplit {
    let started = std::time::Instant::now();
    let split = split_node_hours(nodes, pods, costs);
    tracing::info!(
        cluster,
        node_hours = nodes.len(),
        pod_hours = pods.len(),
        read_seconds = (read_seconds * 10.0).round() / 10.0,
        split_seconds = (started.elapsed().as_secs_f64() * 100.0).round() / 100.0,
        "split"
    );
    split
}

/// What the CUR says of a cluster's instance-hours, per (instance, hour) in nanos of USD: the
/// amortized cost a split divides, the public on-demand and net amortized cost, and each
/// instance's usage account. Empty when the CUR does not pay for the cluster's nodes.
#[derive(Debug, Default)]
pub struct CurNodeHours {
    pub costs: HashMap<(String, i64), i64>,
    pub list_costs: HashMap<(String, i64), i64>,
    pub net_costs: HashMap<(String, i64), i64>,
    pub accounts: HashMap<String, String>,
}

impl CurNodeHours {
    pub async fn read(store: &dyn Store, period: Period, cluster: &str) -> Result<CurNodeHours, StoreError> {
        let mut read = CurNodeHours::default();
        for hour in store.cluster_instance_hours(&period.to_string(), cluster).await? {
            let key = (hour.instance_id.clone(), hour.hour);
            *read.list_costs.entry(key.clone()).or_default() += hour.public_on_demand_cost_micros * 1000;
            *read.net_costs.entry(key.clone()).or_default() += hour.net_amortized_cost_micros * 1000;
            *read.costs.entry(key).or_default() += hour.amortized_cost_micros * 1000;
            read.accounts.entry(hour.instance_id).or_insert(hour.usage_account_id);
        }
        Ok(read)
    }
}

/// The month's clusters gpuledger splits itself, each loaded: a cluster with Kubernetes series
/// and its nodes' cost in a bill (a FOCUS bill, or the CUR without AWS's split). A cluster the
/// CUR has AWS's own split for is not one; a split that cannot be made is left off (compute
/// says why).
pub async fn our_splits(store: &dyn Store, period: Period) -> Result<Vec<ClusterSplit>, StoreError> {
    let name = period.to_string();
    let mut splits = Vec::new();
    for cluster in store.kube_clusters(period.start(), period.end()).await? {
        if !store.namespace_costs(&name, Some(&cluster), false).await?.is_empty() {
            continue;
        }
        match ClusterSplit::load(store, period, &cluster).await {
            Ok(split) => splits.push(split),
            Err(SplitError::Store(e)) => return Err(e),
            Err(_) => {}
        }
    }
    Ok(splits)
}

/// A cluster's split for one period, and what it was made of.
#[derive(Debug, Clone)]
pub struct ClusterSplit {
    pub period: Period,
    pub cluster: String,
    pub provider: String,
    pub currency: String,
    /// `cur` or `focus`.
    pub node_costs_from: &'static str,
    pub nodes: Vec<KubeNodeHour>,
    pub pods: Vec<KubePodHour>,
    /// (instance key, hour) → the node-hour's cost in nanos of `currency`.
    pub costs: HashMap<(String, i64), i64>,
    /// The FOCUS bills' virtual machines' charge periods `costs` were spread from (none when
    /// the CUR paid for the nodes).
    pub vms: Vec<BillVmCost>,
    /// The node-hours' public on-demand cost: the FOCUS bills' `ListCost` spread over the same
    /// node-hours as `costs`, or the CUR's.
    pub list_costs: HashMap<(String, i64), i64>,
    /// Their net cost: the CUR's net amortized, or `costs` (FOCUS's is net already).
    pub net_costs: HashMap<(String, i64), i64>,
    /// The account each instance is billed to, from the CUR (empty from FOCUS bills).
    pub accounts: HashMap<String, String>,
    pub split: KubeSplit,
    pub reconciliation: Reconciliation,
    /// The pods' costs summed per distinct [namespace, workload, labels] (a pod's repeat
    /// every hour), that [`ClusterSplit::group`] groups further.
    by_names: Vec<([String; 3], Part)>,
}

impl ClusterSplit {
    pub async fn load(store: &dyn Store, period: Period, cluster: &str) -> Result<ClusterSplit, SplitError> {
        let name = period.to_string();
        let started = std::time::Instant::now();
        let (nodes, pods) = store.kube_hours(period.start(), period.end(), cluster).await?;
        let read_kube = started.elapsed().as_secs_f64();
        if cluster.is_empty() || nodes.is_empty() {
            return Err(SplitError::NoKubernetes { cluster: cluster.to_string(), period });
        }
        let CurNodeHours { mut costs, mut list_costs, mut net_costs, accounts } =
            CurNodeHours::read(store, period, cluster).await?;
        let mut vms = Vec::new();
        let (provider, currency, node_costs_from) = if !costs.is_empty() {
            ("aws".to_string(), "USD".to_string(), "cur")
        } else {
            let keys: HashSet<String> = nodes.iter().map(|n| instance_key(&n.provider_id)).collect();
            vms = store
                .bill_vm_costs(&name)
                .await?
                .into_iter()
                .filter(|vm| vm.cluster == cluster || keys.contains(&vm.instance))
                .collect::<Vec<_>>();
            let bills: BTreeMap<(String, String), String> = store
                .bills(Some(&name))
                .await?
                .into_iter()
                .filter(|b| {
                    vms.iter().any(|vm| vm.provider == b.provider && vm.billing_account == b.billing_account)
                })
                .map(|b| ((b.provider, b.billing_account), b.currency))
                .collect();
            let currencies: std::collections::BTreeSet<&String> = bills.values().collect();
            if currencies.len() > 1 {
                return Err(SplitError::TwoCurrencies {
                    cluster: cluster.to_string(),
                    currencies: currencies.into_iter().cloned().collect(),
                });
            }
            let Some(((provider, _), currency)) = bills.into_iter().next() else {
                return Err(SplitError::NoNodeCosts { cluster: cluster.to_string(), period });
            };
            costs = spread_vm_costs(&vms, &nodes);
            // A FOCUS bill's EffectiveCost is already net of its negotiated discounts.
            net_costs.clone_from(&costs);
            let listed: Vec<BillVmCost> =
                vms.iter().map(|vm| BillVmCost { effective_nanos: vm.list_nanos, ..vm.clone() }).collect();
            list_costs = spread_vm_costs(&listed, &nodes);
            (provider, currency, "focus")
        };
        tracing::debug!(cluster, read_kubernetes_seconds = (read_kube * 10.0).round() / 10.0, "read");
        let split = split_logged(cluster, &nodes, &pods, &costs, started.elapsed().as_secs_f64());
        let reconciliation = Reconciliation::of(&split, &costs, 0);
        let by_names = Self::sum_by_names(&pods, &split);
        Ok(ClusterSplit {
            by_names,
            period,
            cluster: cluster.to_string(),
            provider,
            currency,
            node_costs_from,
            nodes,
            pods,
            costs,
            vms,
            list_costs,
            net_costs,
            accounts,
            split,
            reconciliation,
        })
    }

    /// The pod-hours' costs summed per namespace, workload and labels.
    fn sum_by_names(pods: &[KubePodHour], split: &KubeSplit) -> Vec<([String; 3], Part)> {
        let mut by_names: rustc_hash::FxHashMap<[&str; 3], Part> = Default::default();
        for cost in &split.pods {
            let p = &pods[cost.pod];
            let part = by_names.entry([&p.namespace, &p.workload, &p.labels]).or_default();
            part.split_nanos += cost.split_nanos;
            part.unused_nanos += cost.unused_nanos;
            part.pod_hours += 1;
        }
        by_names.into_iter().map(|(names, part)| (names.map(String::from), part)).collect()
    }

    /// The pod-hours' costs summed by `key` of their namespace, workload and client, from
    /// their sums per distinct namespace, workload and labels: a month's labels are read as
    /// JSON once per pod, not once per hour.
    fn group(&self, key: fn(&[&str; 3]) -> Vec<String>) -> Vec<Part> {
        let mut clients: HashMap<&str, String> = HashMap::new();
        let mut groups: BTreeMap<Vec<String>, Part> = BTreeMap::new();
        for ([namespace, workload, labels], sums) in &self.by_names {
            let client = clients.entry(labels).or_insert_with(|| client_of(labels, "client"));
            let part = groups.entry(key(&[namespace, workload, client.as_str()])).or_default();
            part.split_nanos += sums.split_nanos;
            part.unused_nanos += sums.unused_nanos;
            part.pod_hours += sums.pod_hours;
        }
        groups.into_iter().map(|(key, part)| Part { key, ..part }).collect()
    }

    pub fn namespaces(&self) -> Vec<Part> {
        self.group(|n| vec![n[0].to_string()])
    }

    pub fn workloads(&self) -> Vec<Part> {
        self.group(|n| vec![n[0].to_string(), n[1].to_string()])
    }

    pub fn clients(&self) -> Vec<Part> {
        self.group(|n| vec![n[2].to_string()])
    }

    /// Pod-hours the split gave a cost to.
    pub fn pod_hours(&self) -> usize {
        self.split.pods.len()
    }

    /// The split's pods as the ledger's pods and pod-days, for chargeback, Costs and the
    /// invoices on a cluster whose nodes gpuledger splits: a pod is its namespace, name and
    /// uid; a day sums its hours' split and unused cost (in nanos of `currency`), the GPUs it
    /// requested, and the cores and GiB it reserved (max of request and use, as the split
    /// weighs them) times the hours it ran, and its public on-demand cost (its node-hour's
    /// `ListCost` in the share of the node-hour's cost it was given). Labels read as the CUR
    /// names them (`user_client`), so the same client rules place them. A day also holds the
    /// accelerator's part of its cost and the accelerator's and vCPU's parts of its split, and
    /// each pod-hour that held GPUs is a [`GpuPodHour`] (its GPU-hours, accelerator cost and
    /// whole cost), as a CUR's split rows make them: so idle GPU cost and cost per inference
    /// reach these pods. `PodRecord::id` is the index, numbered afresh by whoever adds them to
    /// a period's pods.
    pub fn ledger_pods(&self) -> (Vec<PodRecord>, Vec<PodDay>, Vec<GpuPodHour>) {
        let nodes: HashMap<&str, &KubeNodeHour> = self.nodes.iter().map(|n| (n.node.as_str(), n)).collect();
        let instances: HashMap<&str, String> =
            nodes.iter().map(|(name, n)| (*name, instance_key(&n.provider_id))).collect();
        let mut ids: rustc_hash::FxHashMap<[&str; 3], usize> = Default::default();
        let mut records: Vec<PodRecord> = Vec::new();
        let mut days: rustc_hash::FxHashMap<(usize, i64), PodDay> = Default::default();
        let mut hours: Vec<GpuPodHour> = Vec::new();
        for cost in &self.split.pods {
            let p = &self.pods[cost.pod];
            let id = *ids.entry([&p.namespace, &p.pod, &p.uid]).or_insert_with(|| {
                records.push(self.ledger_pod(p, nodes.get(p.node.as_str()).copied()));
                records.len() - 1
            });
            let day = p.hour.div_euclid(86_400) * 86_400;
            let sums = days.entry((id, day)).or_insert_with(|| PodDay {
                pod_id: id as i64,
                day,
                ..PodDay::default()
            });
            let ran = p.seconds / 3600.0;
            sums.split_cost_nanos += cost.split_nanos;
            sums.unused_cost_nanos += cost.unused_nanos;
            sums.gpu_cost_nanos += cost.gpu_nanos;
            sums.gpu_split_nanos += cost.gpu_split_nanos;
            sums.cpu_split_nanos += cost.cpu_split_nanos;
            sums.gpu_hours += p.gpu_request * ran;
            if p.gpu_request > 0.0 {
                hours.push(GpuPodHour {
                    pod_id: id as i64,
                    hour: p.hour,
                    gpu_hours: p.gpu_request * ran,
                    gpu_cost_nanos: cost.gpu_nanos,
                    pod_cost_nanos: cost.split_nanos + cost.unused_nanos,
                });
            }
            sums.vcpu_hours += p.cpu_request.max(p.cpu_usage) * ran;
            sums.memory_gb_hours += p.memory_request_gib.max(p.memory_usage_gib) * ran;
            if let Some(instance) = instances.get(p.node.as_str()) {
                let key = (instance.clone(), p.hour);
                let given = i128::from(cost.split_nanos + cost.unused_nanos);
                // The node-hour's `of` in the share of its cost the pod was given.
                let share = |of: &HashMap<(String, i64), i64>| match (self.costs.get(&key), of.get(&key)) {
                    (Some(&hour_cost), Some(&amount)) if hour_cost > 0 => {
                        (given * i128::from(amount) / i128::from(hour_cost)) as i64
                    }
                    _ => given as i64,
                };
                sums.public_on_demand_cost_nanos += share(&self.list_costs);
                sums.net_cost_nanos += share(&self.net_costs);
            }
        }
        let mut days: Vec<PodDay> = days.into_values().collect();
        days.sort_by_key(|d| (d.pod_id, d.day));
        hours.sort_by_key(|h| (h.pod_id, h.hour));
        (records, days, hours)
    }

    fn ledger_pod(&self, p: &KubePodHour, node: Option<&KubeNodeHour>) -> PodRecord {
        let instance_type = node.map(|n| n.instance_type.clone()).unwrap_or_default();
        let gpu_model = crate::catalog::cloud_gpu_type(&self.provider, &instance_type)
            .map(|t| t.gpu_model)
            .or_else(|| crate::catalog::instance_type(&instance_type).map(|t| t.gpu_model))
            .unwrap_or_default();
        let purchase_option = match node.map(|n| n.capacity_type.as_str()) {
            Some("spot") => PurchaseOption::Spot,
            Some("on_demand") => PurchaseOption::OnDemand,
            _ => PurchaseOption::Unknown,
        };
        let labels: BTreeMap<String, String> = serde_json::from_str::<BTreeMap<String, String>>(&p.labels)
            .unwrap_or_default()
            .into_iter()
            .map(|(key, value)| (format!("user_{key}"), value))
            .collect();
        PodRecord {
            id: 0,
            cluster: p.cluster.clone(),
            namespace: p.namespace.clone(),
            workload: p.workload.clone(),
            workload_type: p.workload_type.clone(),
            pod: p.pod.clone(),
            node: p.node.clone(),
            instance_id: node.map(|n| instance_key(&n.provider_id)).unwrap_or_default(),
            instance_type,
            gpu_model: gpu_model.to_string(),
            purchase_option,
            usage_account_id: node
                .and_then(|n| self.accounts.get(&instance_key(&n.provider_id)))
                .cloned()
                .unwrap_or_default(),
            labels: serde_json::to_string(&labels).unwrap_or_default(),
        }
    }
}
