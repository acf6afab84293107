//! The Kubernetes series of the clusters on the other clouds (AKS, GKE, OKE), as each
//! cluster's own Prometheus holds them, and what gpuledger's split of their nodes' cost must
//! come to (issue 41). Their bills name the VMs and what they cost, nothing about the pods:
//! the split is gpuledger's to make, from these series and the FOCUS bill.
//!
//! Each node of a pool is the VM its bill names (its `provider_id` the bill's `ResourceId` in
//! the provider's form) and is seen in the hours the bill has it running. On it run the
//! DaemonSets (and the GPU operator's exporter on GPU nodes) and the pool's workloads; a node
//! back from a Spot eviction gets new pods. Each pod's usage is constant within an hour, so
//! the samples on a 30-minute grid carry exactly what the split takes.
//!
//! Each Prometheus writes labels its own way: Azure Monitor's managed Prometheus adds
//! `cluster`; Google Managed Prometheus adds `cluster`, `location` and `project_id` and, its
//! target's `namespace` taking the name, renames kube-state-metrics' own to
//! `exported_namespace`; the OKE cluster's kube-prometheus-stack adds no `cluster` (the ingest
//! is told it).
//!
//! AKS's and GKE's Prometheus also scrape the GPU operator's dcgm-exporter and the serving
//! pods' counters ([`scrapes_gpus`]): AKS's with the exporter's own pod labels and
//! `DCGM_FI_PROF_GR_ENGINE_ACTIVE`; GKE's through a ClusterPodMonitoring, so the exporter's pod
//! labels come renamed `exported_*`, and `DCGM_FI_DEV_GPU_UTIL` in percent (the fallback
//! without profiling metrics). AKS's inference server is Triton, GKE's vLLM. The OKE cluster's
//! stack has no ServiceMonitor for the exporter: its GPUs are unmeasured, and gpuledger must
//! say so rather than show them as never idle.
//!
//! The truth splits each node-hour's cost (the bill's effective cost of the VM for that hour,
//! in the bill's currency) by AWS's published rules ([`crate::split`]) and sums pods' shares
//! per namespace, workload and client; where the GPUs are measured, each namespace's GPU-hours
//! used and idle (below 10 % busy in the hour), the cost of its idle pod-hours and of its
//! serving hours, and its requests.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use serde::Serialize;

use super::clouds::{
    CloudWorld, Provider, gke_instance_name, is_covered, nano_text, node_resource_id, node_runs, sku_price,
};
use super::fleet::Server;
use super::rng::Rng;
use super::{GenerateError, io_error};
use crate::period::Period;
use crate::split::{Capacity, PodUsage, split_resource};

const GIB: f64 = 1_073_741_824.0;

/// The scrape grid of the file, seconds.
const INTERVAL: i64 = 1_800;

/// gpuledger's default idle threshold: a GPU-hour below it is idle.
const IDLE_BELOW: f64 = 0.10;

/// What a pod asks for, and what runs it.
struct Spec {
    namespace: &'static str,
    workload: &'static str,
    /// `DaemonSet`, `Deployment` or `StatefulSet`.
    kind: &'static str,
    cpu: f64,
    memory_gib: f64,
    gpus: u32,
}

const fn spec(
    namespace: &'static str,
    workload: &'static str,
    kind: &'static str,
    cpu: f64,
    memory_gib: f64,
    gpus: u32,
) -> Spec {
    Spec { namespace, workload, kind, cpu, memory_gib, gpus }
}

/// On every node, and on every GPU node.
const DAEMONSETS: [Spec; 2] = [
    spec("kube-system", "kube-proxy", "DaemonSet", 0.1, 0.125, 0),
    spec("monitoring", "node-exporter", "DaemonSet", 0.05, 0.0625, 0),
];
const GPU_DAEMONSET: Spec = spec("gpu-operator", "nvidia-dcgm-exporter", "DaemonSet", 0.1, 0.5, 0);

/// The pods a pool's node runs besides the DaemonSets; GPU pools alternate their nodes
/// between the two namespaces GKE's cost allocation names for them.
fn workloads(pool: &str, node: u32) -> Vec<Spec> {
    let alternate = |a: &'static str, b: &'static str| if node % 2 == 0 { a } else { b };
    match pool {
        "system" => vec![
            spec("kube-system", "coredns", "Deployment", 0.1, 0.0625, 0),
            spec("monitoring", "prometheus", "StatefulSet", 1.0, 4.0, 0),
        ],
        "a100spot" => {
            vec![spec(alternate("acme-train", "globex-vision"), "trainer", "StatefulSet", 16.0, 160.0, 1)]
        }
        "h100" => vec![spec("initech-serve", "initech-llm", "Deployment", 24.0, 200.0, 1)],
        "a2spot" => {
            vec![spec(alternate("acme-train", "globex-vision"), "trainer", "StatefulSet", 10.0, 72.0, 1)]
        }
        "g2" => vec![spec(alternate("acme-llm", "umbrella-rag"), "vllm", "Deployment", 6.0, 24.0, 1)],
        "default" => vec![
            spec("kube-system", "coredns", "Deployment", 0.1, 0.0625, 0),
            spec("monitoring", "prometheus", "StatefulSet", 2.0, 8.0, 0),
            spec("acme-llm", "gateway", "Deployment", 2.0, 4.0, 0),
        ],
        "a10" => (0..4).map(|_| spec("umbrella-rag", "embedder", "Deployment", 24.0, 200.0, 1)).collect(),
        _ => Vec::new(),
    }
}

/// The inference server a workload runs, if any.
fn server_of(spec: &Spec) -> Server {
    match spec.workload {
        "vllm" => Server::Vllm,
        "initech-llm" => Server::Triton,
        _ => Server::None,
    }
}

/// The model GKE's vLLM pods serve.
const VLLM_MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";

/// Whether the cluster's Prometheus scrapes dcgm-exporter and the serving pods' counters.
fn scrapes_gpus(provider: Provider) -> bool {
    matches!(provider, Provider::Azure | Provider::Gcp)
}

/// The agency's client a namespace belongs to, as its pods' `client` label says.
fn client_of(namespace: &str) -> Option<&'static str> {
    ["acme", "globex", "initech", "umbrella"].into_iter().find(|c| namespace.starts_with(&format!("{c}-")))
}

/// vCPUs, GiB and GPUs of a VM size the catalog has no GPU entry for.
fn shape(provider: Provider, instance: &str) -> (u32, u32, u32) {
    match crate::catalog::cloud_gpu_type(provider.id(), instance) {
        Some(t) => (t.vcpu, t.memory_gib, t.gpus),
        None => (8, 32, 0), // Standard_D8s_v5, e2-standard-8
    }
}

struct Node {
    name: String,
    provider_id: String,
    pool: usize,
    instance: &'static str,
    capacity: Capacity,
    spot: bool,
    /// The bill's effective cost of one of its hours, nano-units.
    hour_nanos: i64,
    running: Vec<bool>,
}

struct Pod {
    node: usize,
    spec: Spec,
    name: String,
    uid: String,
    /// The controller kube-state-metrics names (`created_by_kind`, `created_by_name`).
    controller: (&'static str, String),
    /// The index of its first GPU on the node (it holds `spec.gpus` from there).
    first_gpu: u32,
    /// Hours of the month it runs, `[start, end)`.
    start: u32,
    end: u32,
    index: u64,
}

/// What gpuledger's split of the cluster's nodes must come to, in the bill's currency.
#[derive(Debug, Default, Clone, Serialize)]
pub struct KubeTruth {
    pub cluster: String,
    /// The series' file, from `--out`.
    pub file: String,
    /// Whether the file names the cluster (else `ingest prometheus --cluster` must).
    pub cluster_label: bool,
    pub node_hours: u64,
    pub pod_hours: u64,
    /// Σ node-hours' cost = pods + unallocated.
    pub node_cost: String,
    pub pods_cost: String,
    pub unallocated_cost: String,
    pub by_namespace: BTreeMap<String, String>,
    /// `namespace/workload`.
    pub by_workload: BTreeMap<String, String>,
    /// `""`: pods without a client label.
    pub by_client: BTreeMap<String, String>,
    /// Per namespace with GPU pods, where the cluster's GPUs are measured; else empty.
    pub gpu_by_namespace: BTreeMap<String, GpuTruth>,
}

struct Cluster {
    nodes: Vec<Node>,
    pods: Vec<Pod>,
    stream: u64,
}

fn build(world: &CloudWorld, seed: u64, period: Period, hours: u32) -> Cluster {
    let stream = world.provider as u64 + 300;
    let mut nodes = Vec::new();
    for (p, pool) in world.pools.iter().enumerate() {
        let (vcpu, memory_gib, gpus) = shape(world.provider, pool.instance);
        for n in 0..pool.nodes {
            let resource_id = node_resource_id(world, seed, p, n);
            let (name, provider_id) = match world.provider {
                Provider::Azure => (
                    format!("aks-{}-31415926-vmss{n:06}", pool.name),
                    format!("azure://{}", resource_id.replace("/resourceGroups/MC_", "/resourceGroups/mc_")),
                ),
                Provider::Gcp => {
                    let name = gke_instance_name(world, seed, p, n);
                    let provider_id = format!("gce://{}/{}-a/{name}", world.sub_account, world.region);
                    (name, provider_id)
                }
                _ => (format!("10.0.10.{}", 10 + p * 16 + n as usize), resource_id),
            };
            let covered = is_covered(pool, n);
            let hour_nanos =
                pool.skus.iter().map(|s| sku_price(pool, s, covered) * i64::from(s.per_node_hour)).sum();
            nodes.push(Node {
                name,
                provider_id,
                pool: p,
                instance: pool.instance,
                capacity: Capacity {
                    accelerators: f64::from(gpus),
                    vcpu: f64::from(vcpu),
                    memory_gib: f64::from(memory_gib),
                },
                spot: matches!(pool.pricing, super::clouds::Pricing::Spot),
                hour_nanos,
                running: (0..hours).map(|h| node_runs(world, seed, period, p, n, h)).collect(),
            });
        }
    }
    // Each stretch of hours a node runs gets its pods anew (a Spot node back from an
    // eviction runs new pods).
    let mut pods = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        let pool = &world.pools[node.pool];
        let node_index = n as u32 - world.pools[..node.pool].iter().map(|p| p.nodes).sum::<u32>();
        let mut h = 0u32;
        while h < hours {
            if !node.running[h as usize] {
                h += 1;
                continue;
            }
            let start = h;
            while h < hours && node.running[h as usize] {
                h += 1;
            }
            let mut specs: Vec<Spec> = DAEMONSETS.into_iter().collect();
            if node.capacity.accelerators > 0.0 {
                specs.push(GPU_DAEMONSET);
            }
            specs.extend(workloads(pool.name, node_index));
            let mut next_gpu = 0;
            for (s, spec) in specs.into_iter().enumerate() {
                let index = pods.len() as u64;
                let mut rng = Rng::derive(seed, &[stream, n as u64, s as u64, u64::from(start)]);
                let replica_set =
                    format!("{}-{}", spec.workload, Rng::derive(seed, &[stream, s as u64]).suffix(10));
                let (name, controller) = match spec.kind {
                    "DaemonSet" => {
                        (format!("{}-{}", spec.workload, rng.suffix(5)), ("DaemonSet", spec.workload.into()))
                    }
                    "StatefulSet" => {
                        (format!("{}-{node_index}", spec.workload), ("StatefulSet", spec.workload.into()))
                    }
                    _ => (format!("{replica_set}-{}", rng.suffix(5)), ("ReplicaSet", replica_set.clone())),
                };
                let first_gpu = next_gpu;
                next_gpu += spec.gpus;
                pods.push(Pod {
                    node: n,
                    spec,
                    name,
                    uid: rng.uuid(),
                    controller,
                    first_gpu,
                    start,
                    end: h,
                    index,
                });
            }
        }
    }
    Cluster { nodes, pods, stream }
}

/// A pod's CPU cores and working set (GiB) in `hour`: constant within the hour, some above
/// their request.
fn usage(seed: u64, cluster: &Cluster, pod: &Pod, hour: u32) -> (f64, f64) {
    let mut rng = Rng::derive(seed, &[cluster.stream, 43, pod.index, u64::from(hour)]);
    let cores = (pod.spec.cpu * rng.range(0.2, 1.4) * 1000.0).round() / 1000.0;
    let gib = (pod.spec.memory_gib * rng.range(0.5, 1.15) * 1024.0).round() / 1024.0;
    (cores, gib)
}

/// A GPU pod's busy fraction in `hour` (its GPUs' engine activity, constant within the hour,
/// in whole percent): a trainer near full but for stalls (data, checkpoints); a server
/// following the day, idle on some nights.
fn busy(seed: u64, cluster: &Cluster, pod: &Pod, hour: u32) -> f64 {
    let mut rng = Rng::derive(seed, &[cluster.stream, 47, pod.index, u64::from(hour)]);
    let busy = if server_of(&pod.spec) == Server::None {
        if rng.chance(0.08) { rng.range(0.0, 0.06) } else { rng.range(0.72, 0.97) }
    } else if hour % 24 < 6 && rng.chance(0.5) {
        rng.range(0.01, 0.07)
    } else {
        rng.range(0.25, 0.8)
    };
    (busy * 100.0).round() / 100.0
}

/// The successful requests a serving pod's counters gain in `hour`, as many as its busy
/// GPUs allow.
fn requests(seed: u64, cluster: &Cluster, pod: &Pod, hour: u32) -> u64 {
    let peak = match server_of(&pod.spec) {
        Server::Vllm => 6_000.0,
        Server::Triton => 2_400.0,
        Server::None => return 0,
    };
    (busy(seed, cluster, pod, hour) * peak).round() as u64
}

/// What DCGM and the serving pods' counters measure of a namespace's pods, and the cost of
/// the pod-hours they judge (in the bill's currency).
#[derive(Debug, Default, Clone, Serialize)]
pub struct GpuTruth {
    pub gpu_hours: f64,
    pub used_gpu_hours: f64,
    pub idle_gpu_hours: f64,
    /// The full cost of the idle GPU pod-hours.
    pub idle_cost: String,
    pub requests: u64,
    /// The full cost of the pod-hours that served requests.
    pub serving_cost: String,
}

/// Splits every node-hour by AWS's rules; sums in the bill's currency.
fn truth(world: &CloudWorld, seed: u64, cluster: &Cluster, file: String) -> KubeTruth {
    let mut by_namespace: BTreeMap<String, f64> = BTreeMap::new();
    let mut by_workload: BTreeMap<String, f64> = BTreeMap::new();
    let mut by_client: BTreeMap<String, f64> = BTreeMap::new();
    // GPU-hours, used, idle, idle cost, requests, serving cost.
    let mut gpu: BTreeMap<String, (f64, f64, f64, f64, u64, f64)> = BTreeMap::new();
    let measured = scrapes_gpus(world.provider);
    let (mut node_hours, mut pod_hours, mut node_nanos, mut pods_total) = (0u64, 0u64, 0i64, 0.0f64);
    let hours = cluster.nodes.first().map_or(0, |n| n.running.len()) as u32;
    let mut on_node: Vec<Vec<&Pod>> = vec![Vec::new(); cluster.nodes.len()];
    for pod in &cluster.pods {
        on_node[pod.node].push(pod);
    }
    for (n, node) in cluster.nodes.iter().enumerate() {
        for hour in (0..hours).filter(|&h| node.running[h as usize]) {
            node_hours += 1;
            node_nanos += node.hour_nanos;
            let pods: Vec<&Pod> =
                on_node[n].iter().copied().filter(|p| p.start <= hour && hour < p.end).collect();
            pod_hours += pods.len() as u64;
            let used: Vec<(f64, f64)> = pods.iter().map(|p| usage(seed, cluster, p, hour)).collect();
            let dollars = node.hour_nanos as f64 / 1e9;
            let mut shares = vec![0.0; pods.len()];
            for &resource in node.capacity.resources() {
                let usages: Vec<PodUsage> = pods
                    .iter()
                    .zip(&used)
                    .map(|(p, &(cores, gib))| match resource {
                        crate::split::Resource::Accelerator => {
                            PodUsage { reserved: f64::from(p.spec.gpus), actual: f64::from(p.spec.gpus) }
                        }
                        crate::split::Resource::Vcpu => PodUsage { reserved: p.spec.cpu, actual: cores },
                        crate::split::Resource::Memory => {
                            PodUsage { reserved: p.spec.memory_gib, actual: gib }
                        }
                    })
                    .collect();
                let rate = node.capacity.rate(resource, dollars);
                for (share, split) in
                    shares.iter_mut().zip(split_resource(node.capacity.of(resource), rate, &usages))
                {
                    *share += split.split_cost + split.unused_cost;
                }
            }
            for (pod, share) in pods.iter().zip(shares) {
                pods_total += share;
                *by_namespace.entry(pod.spec.namespace.into()).or_default() += share;
                *by_workload.entry(format!("{}/{}", pod.spec.namespace, pod.spec.workload)).or_default() +=
                    share;
                *by_client.entry(client_of(pod.spec.namespace).unwrap_or("").into()).or_default() += share;
                if measured && pod.spec.gpus > 0 {
                    let gpus = f64::from(pod.spec.gpus);
                    let busy = busy(seed, cluster, pod, hour);
                    let served = requests(seed, cluster, pod, hour);
                    let sums = gpu.entry(pod.spec.namespace.into()).or_default();
                    sums.0 += gpus;
                    sums.1 += gpus * busy;
                    if busy < IDLE_BELOW {
                        sums.2 += gpus;
                        sums.3 += share;
                    }
                    sums.4 += served;
                    if served > 0 {
                        sums.5 += share;
                    }
                }
            }
        }
    }
    let nanos = |usd: f64| (usd * 1e9).round() as i64;
    let texts = |map: BTreeMap<String, f64>| map.into_iter().map(|(k, v)| (k, nano_text(nanos(v)))).collect();
    KubeTruth {
        cluster: world.cluster.into(),
        file,
        cluster_label: world.provider != Provider::Oci,
        node_hours,
        pod_hours,
        node_cost: nano_text(node_nanos),
        pods_cost: nano_text(nanos(pods_total)),
        unallocated_cost: nano_text(node_nanos - nanos(pods_total)),
        by_namespace: texts(by_namespace),
        by_workload: texts(by_workload),
        by_client: texts(by_client),
        gpu_by_namespace: gpu
            .into_iter()
            .map(|(namespace, (gpu_hours, used, idle, idle_cost, requests, serving_cost))| {
                let truth = GpuTruth {
                    gpu_hours,
                    used_gpu_hours: used,
                    idle_gpu_hours: idle,
                    idle_cost: nano_text(nanos(idle_cost)),
                    requests,
                    serving_cost: nano_text(nanos(serving_cost)),
                };
                (namespace, truth)
            })
            .collect(),
    }
}

/// The labels each provider's Prometheus adds to kube-state-metrics' series, and the name
/// it gives kube-state-metrics' own `namespace` label.
fn state_target(world: &CloudWorld) -> (String, &'static str) {
    match world.provider {
        Provider::Azure => (
            format!("job=\"kube-state-metrics\",instance=\"10.244.0.12:8080\",cluster=\"{}\"", world.cluster),
            "namespace",
        ),
        Provider::Gcp => (
            format!(
                "project_id=\"{}\",location=\"{}\",cluster=\"{}\",namespace=\"gke-gmp-system\",job=\"kube-state-metrics\",instance=\"kube-state-metrics-0:k8s\"",
                world.sub_account, world.region, world.cluster
            ),
            "exported_namespace",
        ),
        _ => ("job=\"kube-state-metrics\",instance=\"10.0.10.200:8080\"".into(), "namespace"),
    }
}

fn kubelet_target(world: &CloudWorld, node: &Node) -> String {
    match world.provider {
        Provider::Oci => format!("job=\"kubelet\",metrics_path=\"/metrics/cadvisor\",node=\"{}\"", node.name),
        Provider::Gcp => format!(
            "project_id=\"{}\",location=\"{}\",cluster=\"{}\",node=\"{}\",job=\"gmp-kubelet-cadvisor\"",
            world.sub_account, world.region, world.cluster, node.name
        ),
        _ => format!(
            "job=\"kubelet\",metrics_path=\"/metrics/cadvisor\",node=\"{}\",cluster=\"{}\"",
            node.name, world.cluster
        ),
    }
}

fn family(out: &mut impl Write, name: &str, kind: &str) -> io::Result<()> {
    writeln!(out, "# TYPE {name} {kind}")
}

/// Writes the cluster's month of series.
fn write_series(
    world: &CloudWorld,
    seed: u64,
    period: Period,
    cluster: &Cluster,
    out: &mut impl Write,
) -> io::Result<()> {
    let month_start = period.start();
    let (target, namespace_label) = state_target(world);
    let node_times = |node: &Node| -> Vec<i64> {
        (0..node.running.len() as i64 * 3600)
            .step_by(INTERVAL as usize)
            .filter(|t| node.running[(t / 3600) as usize])
            .collect()
    };
    let pod_times = |pod: &Pod| -> Vec<i64> {
        (i64::from(pod.start) * 3600..i64::from(pod.end) * 3600).step_by(INTERVAL as usize).collect()
    };
    // A series' samples at `times` (seconds from the month's start).
    let series =
        |out: &mut dyn Write, name: &str, labels: &str, times: Vec<i64>, value: &dyn Fn(i64) -> f64| {
            times
                .into_iter()
                .try_for_each(|t| writeln!(out, "{name}{{{labels}}} {} {}", value(t), month_start + t))
        };
    family(out, "kube_node_info", "gauge")?;
    for node in &cluster.nodes {
        let labels = format!(
            "node=\"{}\",provider_id=\"{}\",kubelet_version=\"v1.31.2\",{target}",
            node.name, node.provider_id
        );
        series(out, "kube_node_info", &labels, node_times(node), &|_| 1.0)?;
    }
    family(out, "kube_node_labels", "gauge")?;
    for node in &cluster.nodes {
        let pool = world.pools[node.pool].name;
        let variant = match (world.provider, node.spot) {
            (Provider::Azure, true) => {
                format!(",label_agentpool=\"{pool}\",label_kubernetes_azure_com_scalesetpriority=\"spot\"")
            }
            (Provider::Azure, false) => format!(",label_agentpool=\"{pool}\""),
            (Provider::Gcp, true) => format!(
                ",label_cloud_google_com_gke_nodepool=\"{pool}\",label_cloud_google_com_gke_spot=\"true\""
            ),
            (Provider::Gcp, false) => format!(",label_cloud_google_com_gke_nodepool=\"{pool}\""),
            _ => String::new(),
        };
        let labels = format!(
            "node=\"{}\",label_node_kubernetes_io_instance_type=\"{}\"{variant},{target}",
            node.name, node.instance
        );
        series(out, "kube_node_labels", &labels, node_times(node), &|_| 1.0)?;
    }
    family(out, "kube_node_status_capacity", "gauge")?;
    for node in &cluster.nodes {
        let mut resources =
            vec![("cpu", "core", node.capacity.vcpu), ("memory", "byte", node.capacity.memory_gib * GIB)];
        if node.capacity.accelerators > 0.0 {
            resources.push(("nvidia_com_gpu", "integer", node.capacity.accelerators));
        }
        for (resource, unit, value) in resources {
            let labels = format!("node=\"{}\",resource=\"{resource}\",unit=\"{unit}\",{target}", node.name);
            series(out, "kube_node_status_capacity", &labels, node_times(node), &|_| value)?;
        }
    }
    let pod_labels = |pod: &Pod| {
        format!("{namespace_label}=\"{}\",pod=\"{}\",uid=\"{}\"", pod.spec.namespace, pod.name, pod.uid)
    };
    family(out, "kube_pod_info", "gauge")?;
    for pod in &cluster.pods {
        let labels = format!(
            "{},node=\"{}\",created_by_kind=\"{}\",created_by_name=\"{}\",{target}",
            pod_labels(pod),
            cluster.nodes[pod.node].name,
            pod.controller.0,
            pod.controller.1
        );
        series(out, "kube_pod_info", &labels, pod_times(pod), &|_| 1.0)?;
    }
    family(out, "kube_pod_start_time", "gauge")?;
    for pod in &cluster.pods {
        let started = (month_start + i64::from(pod.start) * 3600) as f64;
        let labels = format!("{},{target}", pod_labels(pod));
        series(out, "kube_pod_start_time", &labels, pod_times(pod), &|_| started)?;
    }
    family(out, "kube_pod_labels", "gauge")?;
    for pod in &cluster.pods {
        let client =
            client_of(pod.spec.namespace).map(|c| format!(",label_client=\"{c}\"")).unwrap_or_default();
        let labels = format!(
            "{},label_app_kubernetes_io_name=\"{}\"{client},{target}",
            pod_labels(pod),
            pod.spec.workload
        );
        series(out, "kube_pod_labels", &labels, pod_times(pod), &|_| 1.0)?;
    }
    family(out, "kube_pod_container_resource_requests", "gauge")?;
    for pod in &cluster.pods {
        let mut resources =
            vec![("cpu", "core", pod.spec.cpu), ("memory", "byte", pod.spec.memory_gib * GIB)];
        if pod.spec.gpus > 0 {
            resources.push(("nvidia_com_gpu", "integer", f64::from(pod.spec.gpus)));
        }
        for (resource, unit, value) in resources {
            let labels = format!(
                "{},container=\"{}\",node=\"{}\",resource=\"{resource}\",unit=\"{unit}\",{target}",
                pod_labels(pod),
                pod.spec.workload,
                cluster.nodes[pod.node].name
            );
            series(out, "kube_pod_container_resource_requests", &labels, pod_times(pod), &|_| value)?;
        }
    }
    let cadvisor = |pod: &Pod| {
        format!(
            "container=\"{}\",image=\"registry.example.com/{}:1\",namespace=\"{}\",pod=\"{}\",{}",
            pod.spec.workload,
            pod.spec.workload,
            pod.spec.namespace,
            pod.name,
            kubelet_target(world, &cluster.nodes[pod.node])
        )
    };
    family(out, "container_cpu_usage_seconds", "counter")?;
    for pod in &cluster.pods {
        // The CPU seconds used since the pod started, at each sample.
        let mut done = 0.0;
        let counter: Vec<f64> = pod_times(pod)
            .into_iter()
            .map(|t| {
                let hour = (t / 3600) as u32;
                let cores = usage(seed, cluster, pod, hour).0;
                let value = ((done + cores * (t - i64::from(hour) * 3600) as f64) * 1e6).round() / 1e6;
                if t + INTERVAL >= i64::from(hour + 1) * 3600 {
                    done += cores * 3600.0;
                }
                value
            })
            .collect();
        let first = i64::from(pod.start) * 3600;
        let at = |t: i64| counter[((t - first) / INTERVAL) as usize];
        series(out, "container_cpu_usage_seconds_total", &cadvisor(pod), pod_times(pod), &at)?;
    }
    family(out, "container_memory_working_set_bytes", "gauge")?;
    for pod in &cluster.pods {
        let working_set = |t: i64| usage(seed, cluster, pod, (t / 3600) as u32).1 * GIB;
        series(out, "container_memory_working_set_bytes", &cadvisor(pod), pod_times(pod), &working_set)?;
    }
    if scrapes_gpus(world.provider) {
        write_gpus(world, seed, period, cluster, out)?;
    }
    writeln!(out, "# EOF")
}

/// The GPU's name as dcgm-exporter's `modelName` gives it.
fn model_name(instance: &str) -> &'static str {
    match instance {
        "Standard_NC24ads_A100_v4" => "NVIDIA A100 80GB PCIe",
        "Standard_NC40ads_H100_v5" => "NVIDIA H100 NVL",
        "a2-highgpu-1g" => "NVIDIA A100-SXM4-40GB",
        "g2-standard-8" => "NVIDIA L4",
        _ => "NVIDIA A10",
    }
}

/// dcgm-exporter's busy series of every GPU pod's GPUs, and the serving pods' counters, as
/// the cluster's Prometheus labels them.
fn write_gpus(
    world: &CloudWorld,
    seed: u64,
    period: Period,
    cluster: &Cluster,
    out: &mut impl Write,
) -> io::Result<()> {
    let month_start = period.start();
    let gke = world.provider == Provider::Gcp;
    // GKE's exporter is scraped without honoring its labels: the pod's come `exported_*`, the
    // target's (the exporter's own pod) take their names.
    let (family_name, value): (&str, fn(f64) -> String) = if gke {
        ("DCGM_FI_DEV_GPU_UTIL", |busy| format!("{}", (busy * 100.0).round()))
    } else {
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", |busy| format!("{busy:.6}"))
    };
    let gmp_target = |node: &str| {
        format!(
            "project_id=\"{}\",location=\"{}\",cluster=\"{}\",job=\"nvidia-dcgm-exporter\",instance=\"{node}:metrics\"",
            world.sub_account, world.region, world.cluster
        )
    };
    family(out, family_name, "gauge")?;
    for pod in cluster.pods.iter().filter(|p| p.spec.gpus > 0) {
        let node = &cluster.nodes[pod.node];
        let exporter = cluster.pods.iter().find(|e| {
            e.node == pod.node && e.start == pod.start && e.spec.workload == GPU_DAEMONSET.workload
        });
        for gpu in pod.first_gpu..pod.first_gpu + pod.spec.gpus {
            let uuid = Rng::derive(seed, &[cluster.stream, 53, pod.node as u64, u64::from(gpu)]).uuid();
            let device = format!(
                "gpu=\"{gpu}\",UUID=\"GPU-{uuid}\",device=\"nvidia{gpu}\",modelName=\"{}\",Hostname=\"{}\"",
                model_name(node.instance),
                node.name
            );
            let (namespace, name, container) = (pod.spec.namespace, &pod.name, pod.spec.workload);
            let labels = match exporter.filter(|_| gke) {
                Some(exporter) => format!(
                    "{device},exported_container=\"{container}\",exported_namespace=\"{namespace}\",exported_pod=\"{name}\",namespace=\"{}\",pod=\"{}\",container=\"nvidia-dcgm-exporter\",{}",
                    exporter.spec.namespace,
                    exporter.name,
                    gmp_target(&node.name)
                ),
                None => format!(
                    "{device},container=\"{container}\",namespace=\"{namespace}\",pod=\"{name}\",job=\"dcgm-exporter\",instance=\"{}:9400\",cluster=\"{}\"",
                    node.name, world.cluster
                ),
            };
            let mut t = i64::from(pod.start) * 3600;
            while t < i64::from(pod.end) * 3600 {
                let busy = busy(seed, cluster, pod, (t / 3600) as u32);
                writeln!(out, "{family_name}{{{labels}}} {} {}", value(busy), month_start + t)?;
                t += INTERVAL;
            }
        }
    }
    write_counters(world, seed, period, cluster, out)
}

/// The serving pods' counters, from 0 at the pod's start. An hour's gain shows at the samples
/// in `(hour, hour + 1h]` the pod lived to: half at the half hour, the rest on the hour.
fn write_counters(
    world: &CloudWorld,
    seed: u64,
    period: Period,
    cluster: &Cluster,
    out: &mut impl Write,
) -> io::Result<()> {
    let month_start = period.start();
    // The family, its sample name, the server, and what it counts per request.
    let families: [(&str, &str, Server, u64); 5] = [
        ("vllm:request_success", "vllm:request_success_total", Server::Vllm, 1),
        ("vllm:prompt_tokens", "vllm:prompt_tokens_total", Server::Vllm, 350),
        ("vllm:generation_tokens", "vllm:generation_tokens_total", Server::Vllm, 180),
        ("nv_inference_request_success", "nv_inference_request_success", Server::Triton, 1),
        ("nv_inference_count", "nv_inference_count", Server::Triton, 1),
    ];
    for (family_name, sample, server, per_request) in families {
        let pods: Vec<&Pod> = cluster.pods.iter().filter(|p| server_of(&p.spec) == server).collect();
        if pods.is_empty() {
            continue;
        }
        family(out, family_name, "counter")?;
        for pod in pods {
            let node = &cluster.nodes[pod.node];
            let target = match world.provider {
                Provider::Gcp => format!(
                    "project_id=\"{}\",location=\"{}\",cluster=\"{}\",namespace=\"{}\",pod=\"{}\",container=\"{}\",job=\"{}\",instance=\"{}:8000\"",
                    world.sub_account,
                    world.region,
                    world.cluster,
                    pod.spec.namespace,
                    pod.name,
                    pod.spec.workload,
                    pod.spec.workload,
                    node.name
                ),
                _ => format!(
                    "namespace=\"{}\",pod=\"{}\",container=\"{}\",job=\"{}\",instance=\"{}:8000\",cluster=\"{}\"",
                    pod.spec.namespace,
                    pod.name,
                    pod.spec.workload,
                    pod.spec.workload,
                    node.name,
                    world.cluster
                ),
            };
            let labels = match (server, per_request) {
                (Server::Vllm, 1) => {
                    format!("model_name=\"{VLLM_MODEL}\",engine=\"0\",finished_reason=\"stop\",{target}")
                }
                (Server::Vllm, _) => format!("model_name=\"{VLLM_MODEL}\",engine=\"0\",{target}"),
                _ => format!("model=\"{}\",version=\"1\",{target}", pod.spec.workload),
            };
            let mut total = 0;
            let mut t = i64::from(pod.start) * 3600;
            while t < i64::from(pod.end) * 3600 {
                if t > i64::from(pod.start) * 3600 {
                    let hour = ((t - 1) / 3600) as u32;
                    let count = requests(seed, cluster, pod, hour) * per_request;
                    let two_steps = hour + 1 < pod.end;
                    total += match (two_steps, t % 3600 == 0) {
                        (false, _) => count,
                        (true, false) => count / 2,
                        (true, true) => count - count / 2,
                    };
                }
                writeln!(out, "{sample}{{{labels}}} {total} {}", month_start + t)?;
                t += INTERVAL;
            }
        }
    }
    Ok(())
}

/// Writes `metrics/<period>-kube-<cluster>.om` under `out` for a provider's cluster through
/// `hours` hours; returns what its split must come to.
pub(super) fn write_month(
    out: &Path,
    world: &CloudWorld,
    seed: u64,
    period: Period,
    hours: u32,
) -> Result<KubeTruth, GenerateError> {
    let cluster = build(world, seed, period, hours);
    let file = format!("metrics/{period}-kube-{}.om", world.cluster);
    let path = out.join(&file);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io_error(parent))?;
    }
    let mut writer = BufWriter::with_capacity(1 << 20, fs::File::create(&path).map_err(io_error(&path))?);
    write_series(world, seed, period, &cluster, &mut writer).map_err(io_error(&path))?;
    writer.flush().map_err(io_error(&path))?;
    Ok(truth(world, seed, &cluster, file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kube_split::{instance_key, vm_key};

    #[test]
    fn every_node_names_the_machine_its_bill_names_and_its_hours_are_split_whole() {
        let period: Period = "2026-10".parse().unwrap();
        for provider in [Provider::Azure, Provider::Gcp, Provider::Oci] {
            let world = super::super::clouds::world(provider).unwrap();
            let cluster = build(world, 7, period, 48);
            for node in &cluster.nodes {
                let pool_node =
                    cluster.nodes.iter().filter(|n| n.pool == node.pool).position(|n| n.name == node.name);
                let resource_id = node_resource_id(world, 7, node.pool, pool_node.unwrap() as u32);
                assert_eq!(
                    vm_key(&resource_id),
                    Some(instance_key(&node.provider_id)),
                    "{provider:?} {}",
                    node.name
                );
            }
            // Every node-hour has pods (the DaemonSets), so the whole cost goes to pods.
            let truth = truth(world, 7, &cluster, String::new());
            assert!(truth.node_hours > 0 && truth.pod_hours > truth.node_hours, "{provider:?}");
            assert_eq!(truth.node_cost, truth.pods_cost, "{provider:?}");
            let namespaces: i64 =
                truth.by_namespace.values().map(|v| crate::money::nanos_from_decimal(v).unwrap()).sum();
            let node_cost = crate::money::nanos_from_decimal(&truth.node_cost).unwrap();
            assert!((namespaces - node_cost).abs() <= truth.by_namespace.len() as i64, "{provider:?}");
        }
    }
}
