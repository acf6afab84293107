//! gpuledger's own split of each node-hour's cost among the pods that ran on it (issue 41),
//! from what Prometheus knows of them, by the rules AWS publishes for its split cost
//! allocation data ([`crate::split`]): per resource, a pod's split usage is max(request,
//! usage) × the share of the hour it ran (GPUs by request); the node's cost is weighted
//! 9 : 1 vCPU : GB, or 9 : 0.9 : 0.1 GPU : vCPU : GB on accelerated nodes, over the
//! instance type's capacity; the capacity no pod used is shared among the pods in proportion
//! to their split usage. What no pod is given (an hour without pods, a GPU no pod asked for)
//! is the node's unallocated cost.
//!
//! Exact money: each node-hour's cost (nano-dollars) is divided by largest remainder among
//! its pods' split costs, their unused costs and the node's unallocated part, so that those
//! add up to the node-hour's cost exactly (FOCUS 1.3's rule for allocated costs).

use std::collections::HashMap;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::catalog::instance_type;
use crate::money::apportion_by_weight;
use crate::split::{Capacity, PodUsage, Resource, split_resource};
use crate::store::{BillVmCost, KubeNodeHour, KubePodHour};

/// The instance a node's `provider_id` names, as bills name it: EC2's `i-…`
/// (`aws:///us-east-1a/i-0abc`), a GCE instance's name (`gce://project/zone/name`), an OCI
/// instance's OCID (`oci://ocid1.instance…`), an Azure VM or scale-set instance's resource id
/// in lower case (`azure:///subscriptions/…`, as Azure's exports write ids).
pub fn instance_key(provider_id: &str) -> String {
    let Some((scheme, rest)) = provider_id.split_once("://") else { return provider_id.to_string() };
    match scheme {
        "aws" | "gce" => rest.rsplit('/').next().unwrap_or(rest).to_string(),
        "azure" => rest.trim_start_matches('/').to_ascii_lowercase().replace("//", "/"),
        _ => rest.trim_start_matches('/').to_string(),
    }
}

/// The virtual machine a bill's `ResourceId` names, as [`instance_key`] names a node's, or
/// `None` for anything else (a disk, a commitment, a cluster's control plane): an EC2
/// instance (`i-…`, or its ARN), an Azure VM or scale-set instance (in lower case), a Compute
/// Engine instance (`…/instances/NAME`), an OCI instance's OCID.
pub fn vm_key(resource_id: &str) -> Option<String> {
    let id = resource_id.trim();
    if let Some(instance) =
        id.rsplit_once(":instance/").map(|(_, i)| i).or(Some(id)).filter(|i| i.starts_with("i-"))
    {
        return Some(instance.to_string());
    }
    let lower = id.to_ascii_lowercase();
    if lower.contains("/providers/microsoft.compute/virtualmachines/")
        || (lower.contains("/virtualmachinescalesets/") && lower.contains("/virtualmachines/"))
    {
        return Some(lower.trim_start_matches('/').replace("//", "/"));
    }
    if let Some((_, name)) = id.rsplit_once("/instances/") {
        return Some(name.to_string());
    }
    id.starts_with("ocid1.instance.").then(|| id.to_string())
}

/// The Kubernetes cluster a bill's tags name its node's machine for: AKS's
/// `aks-managed-cluster-name`, GKE's `goog-k8s-cluster-name`, OKE's `oke-cluster-name`,
/// EKS's `eks:cluster-name` (and `aws:eks:cluster-name`).
pub fn cluster_of_tags(tags: &str) -> String {
    const KEYS: [&str; 5] = [
        "aks-managed-cluster-name",
        "goog-k8s-cluster-name",
        "oke-cluster-name",
        "eks:cluster-name",
        "aws:eks:cluster-name",
    ];
    let Ok(map) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(tags) else {
        return String::new();
    };
    KEYS.iter().find_map(|k| map.get(*k).and_then(|v| v.as_str()).map(str::to_string)).unwrap_or_default()
}

/// The node-hours' costs (instance key, hour) → nano-units from a bill's virtual machines'
/// charge periods: each period's cost spread over the hours in it its node was seen, by the
/// seconds seen (a daily row over the day's hours), exactly; a period no node was seen in
/// stays whole at its start's hour, for the reconciliation's "in the bill, not in
/// Prometheus".
pub fn spread_vm_costs<'a>(
    vms: impl IntoIterator<Item = &'a BillVmCost>,
    nodes: &[KubeNodeHour],
) -> HashMap<(String, i64), i64> {
    let mut seen: HashMap<String, Vec<(i64, f64)>> = HashMap::new();
    for node in nodes {
        seen.entry(instance_key(&node.provider_id)).or_default().push((node.hour, node.seconds));
    }
    for hours in seen.values_mut() {
        hours.sort_by_key(|h| h.0);
        hours.dedup_by_key(|h| h.0);
    }
    let mut costs: HashMap<(String, i64), i64> = HashMap::new();
    for vm in vms {
        let start_hour = vm.charge_start.div_euclid(3600) * 3600;
        let within: Vec<(i64, f64)> = seen
            .get(&vm.instance)
            .map(|hours| {
                hours
                    .iter()
                    .copied()
                    .filter(|&(h, _)| h >= start_hour && h < vm.charge_end.max(start_hour + 1))
                    .collect()
            })
            .unwrap_or_default();
        let weights: Vec<i128> = within.iter().map(|&(_, s)| (s.max(0.0) * 1000.0).round() as i128).collect();
        match apportion_by_weight(vm.effective_nanos, &weights) {
            Some(parts) if !within.is_empty() => {
                for ((hour, _), part) in within.iter().zip(parts) {
                    *costs.entry((vm.instance.clone(), *hour)).or_default() += part;
                }
            }
            _ => *costs.entry((vm.instance.clone(), start_hour)).or_default() += vm.effective_nanos,
        }
    }
    costs
}

/// One pod-hour's part of its node-hour's cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodHourCost {
    /// Index into the pod-hours split.
    pub pod: usize,
    pub split_nanos: i64,
    pub unused_nanos: i64,
    /// Of split + unused, the accelerator's part (as a CUR's accelerator rows' split + unused).
    pub gpu_nanos: i64,
    /// Of split, the accelerator's and the vCPU's parts (memory's is the rest).
    pub gpu_split_nanos: i64,
    pub cpu_split_nanos: i64,
}

/// A month's split, with what it could not split.
#[derive(Debug, Clone, Default)]
pub struct KubeSplit {
    pub pods: Vec<PodHourCost>,
    /// Node-hours (index) whose cost no pod was given in whole or part, and that part.
    pub unallocated: Vec<(usize, i64)>,
    /// Node-hours with a cost and no pod on them, and their cost.
    pub node_hours_without_pods: usize,
    pub node_hours_without_pods_nanos: i64,
    /// Pod-hours on node-hours the bill has no cost for (index).
    pub pods_without_bill: Vec<usize>,
    /// Node-hours the bill has no cost for (index).
    pub nodes_without_bill: Vec<usize>,
    /// The bill's instance-hours of the cluster no node reported: (instance, hour, nanos).
    pub bill_without_nodes: Vec<(String, i64, i64)>,
}

/// The capacity AWS divides: the instance type's, else what the kubelet reports.
fn capacity(node: &KubeNodeHour) -> Capacity {
    match instance_type(&node.instance_type) {
        Some(t) => Capacity {
            accelerators: f64::from(t.gpus),
            vcpu: f64::from(t.vcpu),
            memory_gib: f64::from(t.memory_gib),
        },
        None => Capacity { accelerators: node.gpus, vcpu: node.cpu_cores, memory_gib: node.memory_gib },
    }
}

/// Splits every node-hour with a cost in `costs` ((instance key, hour) → nano-dollars; the
/// cluster's instance-hours) among the pods on it.
pub fn split_node_hours(
    nodes: &[KubeNodeHour],
    pods: &[KubePodHour],
    costs: &HashMap<(String, i64), i64>,
) -> KubeSplit {
    let mut on_node: FxHashMap<(&str, &str, i64), Vec<usize>> = FxHashMap::default();
    for (i, pod) in pods.iter().enumerate() {
        on_node.entry((pod.cluster.as_str(), pod.node.as_str(), pod.hour)).or_default().push(i);
    }
    let mut out = KubeSplit::default();
    let mut matched: FxHashSet<(String, i64)> = FxHashSet::default();
    let mut placed: FxHashSet<(&str, &str, i64)> = FxHashSet::default();
    for (n, node) in nodes.iter().enumerate() {
        let key = (node.cluster.as_str(), node.node.as_str(), node.hour);
        placed.insert(key);
        let on = on_node.get(&key).map(Vec::as_slice).unwrap_or(&[]);
        let instance = (instance_key(&node.provider_id), node.hour);
        let Some(&cost) = costs.get(&instance) else {
            out.nodes_without_bill.push(n);
            out.pods_without_bill.extend_from_slice(on);
            continue;
        };
        // An instance-hour is split once: a second node on it (a node object recreated
        // under another name within the hour) is not in the bill a second time.
        if !matched.insert(instance) {
            out.nodes_without_bill.push(n);
            out.pods_without_bill.extend_from_slice(on);
            continue;
        }
        if on.is_empty() {
            out.node_hours_without_pods += 1;
            out.node_hours_without_pods_nanos += cost;
            out.unallocated.push((n, cost));
            continue;
        }
        let (parts, unallocated) = split_one(node, on.iter().map(|&p| &pods[p]), cost);
        for (&pod, part) in on.iter().zip(parts) {
            out.pods.push(PodHourCost { pod, ..part });
        }
        if unallocated != 0 {
            out.unallocated.push((n, unallocated));
        }
    }
    // Pods whose node reported no hour (a node scraped apart from its pods).
    for (key, on) in &on_node {
        if !placed.contains(key) {
            out.pods_without_bill.extend_from_slice(on);
        }
    }
    out.pods_without_bill.sort_unstable();
    let mut missing: Vec<(String, i64, i64)> = costs
        .iter()
        .filter(|(key, _)| !matched.contains(*key))
        .map(|((instance, hour), nanos)| (instance.clone(), *hour, *nanos))
        .collect();
    missing.sort();
    out.bill_without_nodes = missing;
    out
}

/// One node-hour: each pod's split and unused nano-dollars (with their parts by resource) and
/// the node's unallocated rest, adding up to `cost` exactly.
fn split_one<'a>(
    node: &KubeNodeHour,
    pods: impl Iterator<Item = &'a KubePodHour>,
    cost: i64,
) -> (Vec<PodHourCost>, i64) {
    let pods: Vec<&KubePodHour> = pods.collect();
    let capacity = capacity(node);
    let dollars = cost as f64 / 1e9;
    let mut shares = vec![(0.0f64, 0.0f64); pods.len()];
    // Each pod's accelerator (split + unused, split) and vCPU split, in dollars.
    let mut parts_of = vec![(0.0f64, 0.0f64, 0.0f64); pods.len()];
    for &resource in capacity.resources() {
        let usages: Vec<PodUsage> = pods
            .iter()
            .map(|p| {
                let ran = p.seconds / 3600.0;
                match resource {
                    Resource::Accelerator => {
                        PodUsage { reserved: p.gpu_request * ran, actual: p.gpu_request * ran }
                    }
                    Resource::Vcpu => PodUsage { reserved: p.cpu_request * ran, actual: p.cpu_usage * ran },
                    Resource::Memory => {
                        PodUsage { reserved: p.memory_request_gib * ran, actual: p.memory_usage_gib * ran }
                    }
                }
            })
            .collect();
        let rate = capacity.rate(resource, dollars);
        let splits = split_resource(capacity.of(resource), rate, &usages);
        for ((share, part), split) in shares.iter_mut().zip(&mut parts_of).zip(splits) {
            share.0 += split.split_cost;
            share.1 += split.unused_cost;
            match resource {
                Resource::Accelerator => {
                    part.0 += split.split_cost + split.unused_cost;
                    part.1 += split.split_cost;
                }
                Resource::Vcpu => part.2 += split.split_cost,
                Resource::Memory => {}
            }
        }
    }
    // Weights in pico-dollars; the node's rest is what the shares leave of the cost.
    let given: f64 = shares.iter().map(|(s, u)| s + u).sum();
    let pico = |usd: f64| (usd.max(0.0) * 1e12).round() as i128;
    let mut weights: Vec<i128> = shares.iter().flat_map(|&(s, u)| [pico(s), pico(u)]).collect();
    weights.push(pico(dollars - given));
    let Some(parts) = apportion_by_weight(cost, &weights) else {
        let nothing = PodHourCost {
            pod: 0,
            split_nanos: 0,
            unused_nanos: 0,
            gpu_nanos: 0,
            gpu_split_nanos: 0,
            cpu_split_nanos: 0,
        };
        return (vec![nothing; pods.len()], cost);
    };
    let rest = *parts.last().unwrap_or(&0);
    // A resource's part of a pod's exact nanos: in the ratio of its dollars to the whole's.
    let part = |nanos: i64, of: f64, whole: f64| {
        if whole > 0.0 { (nanos as f64 * (of / whole).min(1.0)).round() as i64 } else { 0 }
    };
    let pods = parts
        .chunks(2)
        .zip(shares.iter().zip(&parts_of))
        .map(|(c, (&(split, unused), &(gpu, gpu_split, cpu_split)))| PodHourCost {
            pod: 0,
            split_nanos: c[0],
            unused_nanos: c[1],
            gpu_nanos: part(c[0] + c[1], gpu, split + unused),
            gpu_split_nanos: part(c[0], gpu_split, split),
            cpu_split_nanos: part(c[0], cpu_split, split),
        })
        .collect();
    (pods, rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(node: &str, seconds: f64, cpu: (f64, f64), memory: (f64, f64), gpus: f64) -> KubePodHour {
        KubePodHour {
            hour: 0,
            node: node.into(),
            seconds,
            cpu_request: cpu.0,
            cpu_usage: cpu.1,
            memory_request_gib: memory.0,
            memory_usage_gib: memory.1,
            gpu_request: gpus,
            ..KubePodHour::default()
        }
    }

    fn node(name: &str, instance_type: &str, provider_id: &str) -> KubeNodeHour {
        KubeNodeHour {
            hour: 0,
            node: name.into(),
            instance_type: instance_type.into(),
            provider_id: provider_id.into(),
            seconds: 3600.0,
            ..KubeNodeHour::default()
        }
    }

    #[test]
    fn a_bills_resource_id_and_a_nodes_provider_id_meet_on_the_same_key() {
        let pairs = [
            ("i-0abc123", "aws:///us-east-1a/i-0abc123"),
            ("arn:aws:ec2:us-east-1:123456789012:instance/i-0abc123", "aws:///us-east-1a/i-0abc123"),
            (
                "/subscriptions/S/resourceGroups/MC_rg_aks_weu/providers/Microsoft.Compute/virtualMachineScaleSets/aks-gpu-1-vmss/virtualMachines/3",
                "azure:///subscriptions/S/resourceGroups/mc_rg_aks_weu/providers/Microsoft.Compute/virtualMachineScaleSets/aks-gpu-1-vmss/virtualMachines/3",
            ),
            (
                "//compute.googleapis.com/projects/p/zones/us-central1-a/instances/gke-c-pool-1a2b-0",
                "gce://p/us-central1-a/gke-c-pool-1a2b-0",
            ),
            ("ocid1.instance.oc1.iad.anuwcljrxyz", "ocid1.instance.oc1.iad.anuwcljrxyz"),
        ];
        for (resource_id, provider_id) in pairs {
            assert_eq!(vm_key(resource_id), Some(instance_key(provider_id)), "{resource_id}");
        }
        for not_a_vm in ["vol-0abc", "aks-weu/standard-uptime-sla", "projects/p/regions/r/commitments/c", ""]
        {
            assert_eq!(vm_key(not_a_vm), None, "{not_a_vm}");
        }
        assert_eq!(cluster_of_tags(r#"{"aks-managed-cluster-name":"aks-weu","client":"x"}"#), "aks-weu");
        assert_eq!(cluster_of_tags("{}"), "");
    }

    #[test]
    fn a_daily_vm_cost_is_spread_over_the_hours_its_node_was_seen_exactly() {
        let provider_id = "azure:///subscriptions/s/resourcegroups/mc/providers/microsoft.compute/virtualmachinescalesets/v/virtualmachines/0";
        let instance = instance_key(provider_id);
        let day = 86_400 * 20_000;
        let nodes: Vec<KubeNodeHour> = [(0, 3600.0), (1, 3600.0), (5, 1800.0)]
            .into_iter()
            .map(|(h, seconds)| KubeNodeHour { hour: day + h * 3600, seconds, ..node("n", "x", provider_id) })
            .collect();
        let vm = |instance: &str, effective_nanos| BillVmCost {
            instance: instance.into(),
            charge_start: day,
            charge_end: day + 86_400,
            effective_nanos,
            ..BillVmCost::default()
        };
        let costs = spread_vm_costs(&[vm(&instance, 1_000), vm("ocid1.instance.gone", 700)], &nodes);
        // 3600 : 3600 : 1800 of 1,000 nano-units, the remainder to the largest fraction.
        assert_eq!(costs[&(instance.clone(), day)], 400);
        assert_eq!(costs[&(instance.clone(), day + 3600)], 400);
        assert_eq!(costs[&(instance.clone(), day + 5 * 3600)], 200);
        // No node seen: whole, at the day's start.
        assert_eq!(costs[&("ocid1.instance.gone".to_string(), day)], 700);
        assert_eq!(costs.values().sum::<i64>(), 1_700);
    }

    #[test]
    fn provider_ids_of_each_cloud_name_the_instance_the_bill_names() {
        assert_eq!(instance_key("aws:///us-east-1a/i-0abc123"), "i-0abc123");
        assert_eq!(instance_key("gce://my-project/us-central1-a/gke-pool-1-abcd"), "gke-pool-1-abcd");
        assert_eq!(instance_key("oci://ocid1.instance.oc1.iad.abc"), "ocid1.instance.oc1.iad.abc");
        assert_eq!(
            instance_key(
                "azure:///subscriptions/S/resourceGroups/MC_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-gpu-1-vmss/virtualMachines/3"
            ),
            "subscriptions/s/resourcegroups/mc_rg/providers/microsoft.compute/virtualmachinescalesets/aks-gpu-1-vmss/virtualmachines/3"
        );
    }

    /// AWS's first example (m5.xlarge, 4 vCPU, 16 GB, $1.00 an hour) from pods' requests and
    /// usage as Prometheus gives them: the same totals, 0.2292, 0.4003, 0.1852, 0.1852.
    #[test]
    fn awss_m5_example_from_pod_hours_adds_up_to_the_node_cost_exactly() {
        let pods = vec![
            pod("n", 3600.0, (1.0, 0.1), (4.0, 3.0), 0.0),
            pod("n", 3600.0, (1.0, 1.9), (4.0, 6.0), 0.0),
            pod("n", 3600.0, (1.0, 0.5), (2.0, 2.0), 0.0),
            pod("n", 3600.0, (1.0, 0.5), (2.0, 2.0), 0.0),
            pod("other", 3600.0, (1.0, 1.0), (1.0, 1.0), 0.0),
        ];
        let nodes = vec![
            node("n", "m5.xlarge", "aws:///us-east-1a/i-1"),
            node("idle", "m5.xlarge", "aws:///us-east-1b/i-2"),
            node("idle-again", "m5.xlarge", "aws:///us-east-1b/i-2"),
        ];
        let costs: HashMap<(String, i64), i64> = [
            (("i-1".to_string(), 0), 1_000_000_000),
            (("i-2".to_string(), 0), 1_000_000_000),
            (("i-3".to_string(), 0), 500_000_000),
        ]
        .into();
        let split = split_node_hours(&nodes, &pods, &costs);
        let totals: Vec<i64> = split.pods.iter().map(|p| p.split_nanos + p.unused_nanos).collect();
        let expected = [0.2292, 0.4003, 0.1852, 0.1852];
        for (total, expected) in totals.iter().zip(expected) {
            assert!((*total as f64 / 1e9 - expected).abs() < 5e-5, "{total} against {expected}");
        }
        assert_eq!(
            totals.iter().sum::<i64>()
                + split.unallocated.iter().filter(|u| u.0 == 0).map(|u| u.1).sum::<i64>(),
            1_000_000_000
        );
        // The idle node's hour is unallocated whole; the pod on a node without an hour, and
        // the bill's instance no node reported, are named.
        // The same instance-hour named by a second node is split once, and the second node
        // named as not in the bill.
        assert_eq!(split.nodes_without_bill, vec![2]);
        assert_eq!(split.node_hours_without_pods, 1);
        assert!(split.unallocated.contains(&(1, 1_000_000_000)));
        assert_eq!(split.pods_without_bill, vec![4]);
        assert_eq!(split.bill_without_nodes, vec![("i-3".to_string(), 0, 500_000_000)]);
    }

    /// AWS's second example (p3.16xlarge: 8 GPUs, 64 vCPU, 488 GB, $10): split 1.8477,
    /// 3.1788, 2.3522, 2.3522 and unused 0.0611, 0.0856, 0.0611, 0.0611.
    #[test]
    fn awss_accelerated_example_weights_gpus_nine_to_one() {
        let pods = vec![
            pod("n", 3600.0, (16.0, 4.0), (100.0, 60.0), 1.0),
            pod("n", 3600.0, (16.0, 18.0), (100.0, 140.0), 3.0),
            pod("n", 3600.0, (16.0, 4.0), (100.0, 60.0), 2.0),
            pod("n", 3600.0, (16.0, 4.0), (100.0, 40.0), 2.0),
        ];
        // Requests stand for GPUs (AWS's example has pod 2 reserving 2 and using 3: GPUs are
        // split by allocation, so its 3 are the request here).
        // Not in gpuledger's catalog: the capacity the kubelet reports is what is divided.
        let nodes = vec![KubeNodeHour {
            cpu_cores: 64.0,
            memory_gib: 488.0,
            gpus: 8.0,
            ..node("n", "p3.16xlarge", "aws:///us-east-1a/i-9")
        }];
        let costs: HashMap<(String, i64), i64> = [(("i-9".to_string(), 0), 10_000_000_000)].into();
        let split = split_node_hours(&nodes, &pods, &costs);
        let got: Vec<(f64, f64)> =
            split.pods.iter().map(|p| (p.split_nanos as f64 / 1e9, p.unused_nanos as f64 / 1e9)).collect();
        for ((split, unused), (s, u)) in
            got.iter().zip([(1.8477, 0.0611), (3.1788, 0.0856), (2.3522, 0.0611), (2.3522, 0.0611)])
        {
            assert!(
                (split - s).abs() < 5e-5 && (unused - u).abs() < 5e-5,
                "{split} {unused} against {s} {u}"
            );
        }
        let sum: i64 = split.pods.iter().map(|p| p.split_nanos + p.unused_nanos).sum();
        assert_eq!(sum + split.unallocated.iter().map(|u| u.1).sum::<i64>(), 10_000_000_000);
        // The accelerator's part: $10 × 9 / (9·8 + 0.9·64 + 0.1·488 = 178.4) a GPU-hour, all 8
        // GPUs asked for (none unused): $0.504484 for pod 1's one GPU, $1.513453 for pod 2's
        // three. Pod 1's vCPU split: pod 2 uses 18 cores, so the pods' 66 exceed the 64 and
        // pod 1's 16 are 16/66 of the 64 cores at $10 × 0.9 / 178.4 a core-hour, $0.782715.
        let near = |nanos: i64, usd: f64| (nanos as f64 / 1e9 - usd).abs() < 2e-9;
        let (one, two) = (&split.pods[0], &split.pods[1]);
        assert!(near(one.gpu_nanos, 10.0 * 9.0 / 178.4), "{}", one.gpu_nanos);
        assert!(near(two.gpu_nanos, 3.0 * 10.0 * 9.0 / 178.4), "{}", two.gpu_nanos);
        assert_eq!(one.gpu_split_nanos, one.gpu_nanos);
        assert!(
            near(one.cpu_split_nanos, 16.0 / 66.0 * 64.0 * 10.0 * 0.9 / 178.4),
            "{}",
            one.cpu_split_nanos
        );
    }
}
