//! Kubernetes pods and nodes per hour from kube-state-metrics and cAdvisor (issue 41): what
//! gpuledger's own split of a node's cost among its pods takes, on a cloud whose bill names
//! only the VM.
//!
//! - **Labels.** A pod is named by kube-state-metrics' `namespace` and `pod`, or by
//!   `exported_namespace` and `exported_pod` where the scrape kept the target's own labels
//!   (Google Managed Prometheus, any `honor_labels: false`); cAdvisor before Kubernetes 1.16
//!   says `pod_name` and `container_name`. A series' cluster is its `cluster`, `cluster_name`
//!   or `k8s_cluster_name` label (Azure Monitor and GMP add `cluster`), else the one the
//!   source was given. A pod's cgroup series (`container=""`) and its pause container
//!   (`POD`) are not containers and are left out.
//! - **The time a pod ran.** A sample holds until the next scrape: a pod seen at `t` ran in
//!   `[t, t + interval)`. `kube_pod_start_time` moves the start back to when it started;
//!   `kube_pod_completion_time` ends a Job's pod when it completed, and
//!   `kube_pod_deletion_timestamp` a pod when its deletion was asked for; a pod that vanished
//!   between two scrapes without either is counted to the next scrape (at most one interval
//!   more).
//! - **CPU.** A container's mean cores in an hour is its counter's increase over the seconds
//!   the increases cover in the hour (a drop is a restart: the new value is the increase).
//!   A counter's first value counts from the pod's start when it started in the interval
//!   before (cAdvisor counts from the container's start). An hour the counter does not cover
//!   takes the container's mean over the window.
//! - **Memory.** The hour's mean working set, summed over containers.

use std::collections::{BTreeMap, HashMap};

use crate::sources::prometheus::{Collector, Labels, Role, label};
use crate::store::{KubeNodeHour, KubePodHour};

const GIB: f64 = 1_073_741_824.0;

/// The window's Kubernetes nodes and pods, hour by hour.
#[derive(Debug, Default)]
pub struct KubeFolded {
    pub nodes: Vec<KubeNodeHour>,
    pub pods: Vec<KubePodHour>,
    /// The series families the split takes that the source has none of.
    pub missing: Vec<&'static str>,
    /// The Kubernetes series' scrape interval, seconds.
    pub interval_seconds: f64,
    /// cAdvisor series of a pod's cgroup or pause container, left out.
    pub skipped_container_series: usize,
}

/// The families without which no pod or node can be split, and those it is less exact
/// without (usage is then taken as zero, capacity from the instance type).
const NEEDED: &[(&str, &[Role])] = &[
    ("kube_pod_info", &[Role::KubePodInfo]),
    ("kube_node_info", &[Role::KubeNodeInfo]),
    ("kube_pod_container_resource_requests", &[Role::KubePodRequests, Role::KubePodCpuRequestCores]),
    ("container_cpu_usage_seconds_total", &[Role::ContainerCpuSeconds]),
    ("container_memory_working_set_bytes", &[Role::ContainerMemoryBytes]),
    ("kube_node_labels", &[Role::KubeNodeLabels]),
    ("kube_pod_start_time", &[Role::KubePodStartTime]),
];

/// The first non-empty value of `keys`.
fn first<'a>(labels: &'a Labels, keys: &[&str]) -> &'a str {
    keys.iter().map(|k| label(labels, k)).find(|v| !v.is_empty()).unwrap_or("")
}

/// A series' pod: (namespace, pod). A scrape that keeps its target's labels renames only
/// those the target has too: Google Managed Prometheus's targets have a `namespace` and no
/// `pod`, so kube-state-metrics' series come with `exported_namespace` beside `pod`.
fn pod_of(labels: &Labels) -> (&str, &str) {
    let pod = first(labels, &["exported_pod", "pod", "pod_name"]);
    let namespace = if label(labels, "exported_namespace").is_empty() {
        first(labels, &["namespace", "pod_namespace"])
    } else {
        label(labels, "exported_namespace")
    };
    (namespace, pod)
}

/// `spot`, `on_demand` or empty, from the labels EKS, Karpenter, AKS and GKE put on nodes.
fn capacity_type(labels: &Labels) -> &'static str {
    let eks = first(labels, &["label_eks_amazonaws_com_capacity_type", "label_karpenter_sh_capacity_type"]);
    let spot = eks.eq_ignore_ascii_case("spot")
        || label(labels, "label_kubernetes_azure_com_scalesetpriority") == "spot"
        || label(labels, "label_cloud_google_com_gke_spot") == "true"
        || label(labels, "label_cloud_google_com_gke_preemptible") == "true";
    if spot {
        "spot"
    } else if !eks.is_empty() || !label(labels, "label_kubernetes_azure_com_mode").is_empty() {
        "on_demand"
    } else {
        ""
    }
}

/// A pod's workload as the CUR's split data names it: its controller, but a Deployment's
/// rather than the ReplicaSet's (`chat-vllm`, not `chat-vllm-7d9f8c6b5`: a ReplicaSet is
/// named by its Deployment and pod-template hash).
pub fn workload_of(kind: &str, controller: &str) -> String {
    if kind == "ReplicaSet"
        && let Some((deployment, hash)) = controller.rsplit_once('-')
        && (6..=10).contains(&hash.len())
        && hash.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return deployment.to_string();
    }
    controller.to_string()
}

/// The time `[from, to)` (ms) something was up, from the times it was seen at: a sample
/// holds for one interval; a gap of more than 1.5 intervals ends a segment. A start time in
/// the interval before the first sample moves the start back to it; a completion time ends
/// the segments there.
pub fn segments(
    times: &[i64],
    interval_ms: i64,
    started: Option<i64>,
    completed: Option<i64>,
) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < times.len() {
        let first = times[i];
        let mut last = first;
        i += 1;
        while i < times.len() && times[i] - last <= interval_ms * 3 / 2 {
            last = times[i];
            i += 1;
        }
        let from = match started {
            Some(s) if s < first && s > first - interval_ms => s,
            _ => first,
        };
        let to = completed.map_or(last + interval_ms, |c| c.min(last + interval_ms));
        if to > from {
            out.push((from, to));
        }
    }
    out
}

/// Seconds of each hour (epoch seconds) in `[from, to)` the segments cover.
fn seconds_by_hour(segments: &[(i64, i64)], from: i64, to: i64) -> BTreeMap<i64, f64> {
    let mut hours = BTreeMap::new();
    for &(start, end) in segments {
        let (start, end) = (start.max(from * 1000), end.min(to * 1000));
        let mut hour = start.div_euclid(3_600_000) * 3600;
        while hour * 1000 < end {
            let overlap = end.min((hour + 3600) * 1000) - start.max(hour * 1000);
            if overlap > 0 {
                *hours.entry(hour).or_insert(0.0) += overlap as f64 / 1000.0;
            }
            hour += 3600;
        }
    }
    hours
}

/// One container's use per hour: CPU (increase, seconds covered) and memory (sum, samples).
#[derive(Default)]
struct ContainerUse {
    cpu: BTreeMap<i64, (f64, f64)>,
    memory: BTreeMap<i64, (f64, f64)>,
}

impl ContainerUse {
    /// Spreads a counter increase over `[from, to)` ms into hours.
    fn add_cpu(&mut self, from: i64, to: i64, increase: f64) {
        let span = (to - from) as f64;
        if span <= 0.0 {
            return;
        }
        let mut hour = from.div_euclid(3_600_000) * 3600;
        while hour * 1000 < to {
            let overlap = (to.min((hour + 3600) * 1000) - from.max(hour * 1000)) as f64;
            if overlap > 0.0 {
                let acc = self.cpu.entry(hour).or_default();
                acc.0 += increase * overlap / span;
                acc.1 += overlap / 1000.0;
            }
            hour += 3600;
        }
    }

    /// Mean cores in `hour`, else over every hour seen.
    fn cores(&self, hour: i64) -> f64 {
        match self.cpu.get(&hour) {
            Some(&(increase, seconds)) if seconds > 0.0 => increase / seconds,
            _ => {
                let (increase, seconds) =
                    self.cpu.values().fold((0.0, 0.0), |(i, s), &(di, ds)| (i + di, s + ds));
                if seconds > 0.0 { increase / seconds } else { 0.0 }
            }
        }
    }

    /// Mean working set in `hour` (bytes), else over every hour seen.
    fn memory(&self, hour: i64) -> f64 {
        match self.memory.get(&hour) {
            Some(&(sum, n)) if n > 0.0 => sum / n,
            _ => {
                let (sum, n) = self.memory.values().fold((0.0, 0.0), |(s, c), &(ds, dc)| (s + ds, c + dc));
                if n > 0.0 { sum / n } else { 0.0 }
            }
        }
    }
}

/// What is known of a pod name in a cluster (its uids share the name in turn).
#[derive(Default)]
struct Named {
    labels: BTreeMap<String, String>,
    /// (container, resource) → value: cpu cores, memory bytes, GPUs.
    requests: BTreeMap<(String, &'static str), f64>,
    started: HashMap<String, i64>,
    completed: HashMap<String, i64>,
    containers: BTreeMap<String, ContainerUse>,
}

/// One pod (uid): where it ran and when it was seen.
#[derive(Default)]
struct Seen {
    node: String,
    workload: String,
    workload_type: String,
    times: Vec<i64>,
}

/// One node: its instance, labels, capacity and when it was seen.
#[derive(Default)]
struct NodeSeen {
    provider_id: String,
    instance_type: String,
    capacity_type: &'static str,
    cpu_cores: f64,
    memory_gib: f64,
    gpus: f64,
    times: Vec<i64>,
}

type PodName = (String, String, String); // cluster, namespace, pod

/// Folds the collector's Kubernetes series into node-hours and pod-hours of `[from, to)`.
pub fn fold_kube(
    collector: &Collector,
    from: i64,
    to: i64,
    interval_hint: Option<f64>,
    default_cluster: &str,
) -> KubeFolded {
    let kube = || collector.series.iter().filter(|s| s.role.is_kube());
    let missing = NEEDED
        .iter()
        .filter(|(_, roles)| !kube().any(|s| roles.contains(&s.role)))
        .map(|(name, _)| *name)
        .collect();
    // The scrape interval: the most common gap between samples of the info series.
    let mut gaps: HashMap<i64, u64> = HashMap::new();
    for series in kube().filter(|s| matches!(s.role, Role::KubePodInfo | Role::KubeNodeInfo)) {
        for pair in series.raw.windows(2) {
            *gaps.entry(pair[1].0 - pair[0].0).or_default() += 1;
        }
    }
    let interval_ms = interval_hint.map(|s| (s * 1000.0).round() as i64).unwrap_or_else(|| {
        gaps.iter().max_by_key(|(gap, count)| (**count, std::cmp::Reverse(**gap))).map_or(60_000, |(g, _)| *g)
    });
    let cluster_of = |labels: &Labels| -> String {
        match first(labels, &["cluster", "cluster_name", "k8s_cluster_name"]) {
            "" => default_cluster.to_string(),
            value => value.to_string(),
        }
    };
    let in_window = |t: i64| t >= from * 1000 && t < to * 1000;

    let mut names: BTreeMap<PodName, Named> = BTreeMap::new();
    let mut pods: BTreeMap<(PodName, String), Seen> = BTreeMap::new();
    let mut nodes: BTreeMap<(String, String), NodeSeen> = BTreeMap::new();
    let mut skipped_container_series = 0;
    let mean = |raw: &[(i64, f64)]| {
        let values: Vec<f64> = raw.iter().filter(|(t, _)| in_window(*t)).map(|(_, v)| *v).collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    let last = |raw: &[(i64, f64)]| raw.iter().rev().find(|(t, _)| in_window(*t)).map(|(_, v)| *v);

    // cAdvisor's series last: a counter's first value counts from its pod's start time.
    let mut ordered: Vec<_> = kube().collect();
    ordered.sort_by_key(|s| matches!(s.role, Role::ContainerCpuSeconds | Role::ContainerMemoryBytes));
    for series in ordered {
        let labels = &series.labels;
        let cluster = cluster_of(labels);
        let node_name = first(labels, &["exported_node", "node"]).to_string();
        let node_key = (cluster.clone(), node_name.clone());
        match series.role {
            Role::KubeNodeInfo => {
                let seen = nodes.entry(node_key).or_default();
                if seen.provider_id.is_empty() {
                    seen.provider_id = label(labels, "provider_id").to_string();
                }
                seen.times.extend(series.raw.iter().map(|(t, _)| *t).filter(|t| in_window(*t)));
                continue;
            }
            Role::KubeNodeLabels => {
                let seen = nodes.entry(node_key).or_default();
                seen.instance_type = first(
                    labels,
                    &["label_node_kubernetes_io_instance_type", "label_beta_kubernetes_io_instance_type"],
                )
                .to_string();
                seen.capacity_type = capacity_type(labels);
                continue;
            }
            Role::KubeNodeCapacity | Role::KubeNodeCpuCores | Role::KubeNodeMemoryBytes => {
                let Some(value) = last(&series.raw) else { continue };
                let resource = match series.role {
                    Role::KubeNodeCpuCores => "cpu",
                    Role::KubeNodeMemoryBytes => "memory",
                    _ => label(labels, "resource"),
                };
                let seen = nodes.entry(node_key).or_default();
                match resource {
                    "cpu" => seen.cpu_cores = value,
                    "memory" => seen.memory_gib = value / GIB,
                    r if r.contains("gpu") => seen.gpus = value,
                    _ => {}
                }
                continue;
            }
            _ => {}
        }
        let (namespace, pod) = pod_of(labels);
        if pod.is_empty() {
            continue;
        }
        let name: PodName = (cluster.clone(), namespace.to_string(), pod.to_string());
        let uid = label(labels, "uid").to_string();
        match series.role {
            Role::KubePodInfo => {
                let seen = pods.entry((name.clone(), uid)).or_default();
                if seen.node.is_empty() {
                    seen.node = node_name.clone();
                    seen.workload_type = label(labels, "created_by_kind").to_string();
                    seen.workload = workload_of(&seen.workload_type, label(labels, "created_by_name"));
                }
                seen.times.extend(series.raw.iter().map(|(t, _)| *t).filter(|t| in_window(*t)));
                names.entry(name).or_default();
            }
            Role::KubePodLabels => {
                let named = names.entry(name).or_default();
                for (key, value) in labels {
                    if let Some(key) = key.strip_prefix("label_") {
                        named.labels.insert(key.to_string(), value.clone());
                    }
                }
            }
            Role::KubePodRequests | Role::KubePodCpuRequestCores | Role::KubePodMemoryRequestBytes => {
                let resource = match series.role {
                    Role::KubePodCpuRequestCores => "cpu",
                    Role::KubePodMemoryRequestBytes => "memory",
                    _ => match label(labels, "resource") {
                        "cpu" => "cpu",
                        "memory" => "memory",
                        r if r.ends_with("gpu") => "gpu",
                        _ => continue,
                    },
                };
                if let Some(value) = mean(&series.raw) {
                    let container = label(labels, "container").to_string();
                    names.entry(name).or_default().requests.insert((container, resource), value);
                }
            }
            Role::KubePodStartTime => {
                let Some(value) = last(&series.raw) else { continue };
                names.entry(name).or_default().started.insert(uid, (value * 1000.0).round() as i64);
            }
            Role::KubePodCompletionTime | Role::KubePodDeletionTimestamp => {
                let Some(value) = last(&series.raw) else { continue };
                let ended = names.entry(name).or_default().completed.entry(uid).or_insert(i64::MAX);
                *ended = (*ended).min((value * 1000.0).round() as i64);
            }
            Role::ContainerCpuSeconds | Role::ContainerMemoryBytes => {
                let container = first(labels, &["container", "container_name"]);
                if container.is_empty() || container == "POD" {
                    skipped_container_series += 1;
                    continue;
                }
                let named = names.entry(name).or_default();
                // cAdvisor counts from the container's start, which is about the pod's.
                let started = named.started.values().copied().collect::<Vec<_>>();
                let usage = named.containers.entry(container.to_string()).or_default();
                if series.role == Role::ContainerMemoryBytes {
                    for &(t, v) in series.raw.iter().filter(|(t, _)| in_window(*t)) {
                        let acc = usage.memory.entry(t.div_euclid(3_600_000) * 3600).or_default();
                        acc.0 += v;
                        acc.1 += 1.0;
                    }
                    continue;
                }
                let Some(&(t0, v0)) = series.raw.first() else { continue };
                if let Some(&s) = started.iter().find(|&&s| s < t0 && s > t0 - 2 * interval_ms) {
                    usage.add_cpu(s, t0, v0);
                }
                for pair in series.raw.windows(2) {
                    let ((t_prev, v_prev), (t, v)) = (pair[0], pair[1]);
                    let increase = if v >= v_prev { v - v_prev } else { v };
                    // Across a gap the container was not running all of it: the increase is
                    // the last interval's.
                    usage.add_cpu(t_prev.max(t - interval_ms), t, increase);
                }
            }
            _ => {}
        }
    }

    // Node-hours.
    let mut node_hours = Vec::new();
    for ((cluster, node), mut seen) in nodes {
        seen.times.sort_unstable();
        seen.times.dedup();
        for (hour, seconds) in seconds_by_hour(&segments(&seen.times, interval_ms, None, None), from, to) {
            node_hours.push(KubeNodeHour {
                hour,
                cluster: cluster.clone(),
                node: node.clone(),
                provider_id: seen.provider_id.clone(),
                instance_type: seen.instance_type.clone(),
                capacity_type: seen.capacity_type.to_string(),
                cpu_cores: seen.cpu_cores,
                memory_gib: seen.memory_gib,
                gpus: seen.gpus,
                seconds,
            });
        }
    }
    // Pod-hours.
    let mut pod_hours = Vec::new();
    for ((name, uid), mut seen) in pods {
        let named = &names[&name];
        seen.times.sort_unstable();
        seen.times.dedup();
        let started = named.started.get(&uid).or_else(|| named.started.get("")).copied();
        let completed = named.completed.get(&uid).or_else(|| named.completed.get("")).copied();
        let labels = serde_json::to_string(&named.labels).unwrap_or_else(|_| "{}".into());
        let request = |resource: &str| -> f64 {
            named.requests.iter().filter(|((_, r), _)| *r == resource).map(|(_, v)| v).sum()
        };
        let (cpu_request, memory_request_gib, gpu_request) =
            (request("cpu"), request("memory") / GIB, request("gpu"));
        for (hour, seconds) in
            seconds_by_hour(&segments(&seen.times, interval_ms, started, completed), from, to)
        {
            pod_hours.push(KubePodHour {
                hour,
                cluster: name.0.clone(),
                namespace: name.1.clone(),
                pod: name.2.clone(),
                uid: uid.clone(),
                node: seen.node.clone(),
                workload: seen.workload.clone(),
                workload_type: seen.workload_type.clone(),
                labels: labels.clone(),
                seconds: seconds.min(3600.0),
                cpu_request,
                memory_request_gib,
                gpu_request,
                cpu_usage: named.containers.values().map(|c| c.cores(hour)).sum(),
                memory_usage_gib: named.containers.values().map(|c| c.memory(hour)).sum::<f64>() / GIB,
            });
        }
    }
    pod_hours.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
    node_hours.sort_by(|a, b| (a.hour, &a.cluster, &a.node).cmp(&(b.hour, &b.cluster, &b.node)));
    KubeFolded {
        nodes: node_hours,
        pods: pod_hours,
        missing,
        interval_seconds: interval_ms as f64 / 1000.0,
        skipped_container_series,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 1_790_812_800; // 2026-10-01T00:00:00Z

    #[test]
    fn a_pod_runs_from_its_start_to_its_completion_and_a_sample_holds_one_interval() {
        let ms = |s: i64| s * 1000;
        // Seen at H+1800 and H+3600 (every 1800 s); started at H+100, completed at H+5000.
        let times = [ms(H + 1800), ms(H + 3600)];
        let exact = segments(&times, 1_800_000, Some(ms(H + 100)), Some(ms(H + 5000)));
        assert_eq!(exact, vec![(ms(H + 100), ms(H + 5000))]);
        let hours = seconds_by_hour(&exact, H, H + 7200);
        assert_eq!(hours.into_iter().collect::<Vec<_>>(), vec![(H, 3500.0), (H + 3600, 1400.0)]);
        // Without start and completion: [H+1800, H+5400).
        let held = segments(&times, 1_800_000, None, None);
        assert_eq!(
            seconds_by_hour(&held, H, H + 7200).into_values().collect::<Vec<_>>(),
            vec![1800.0, 1800.0]
        );
        // A start time older than one interval before the first sample is another life.
        assert_eq!(segments(&times, 1_800_000, Some(ms(H - 3600)), None)[0].0, ms(H + 1800));
        // A gap of two intervals ends a segment (a DaemonSet's node was down).
        let gapped = [ms(H), ms(H + 1800), ms(H + 7200)];
        assert_eq!(
            segments(&gapped, 1_800_000, None, None),
            vec![(ms(H), ms(H + 3600)), (ms(H + 7200), ms(H + 9000))]
        );
    }

    #[test]
    fn cpu_cores_are_the_counters_increase_over_the_seconds_it_covers() {
        let mut usage = ContainerUse::default();
        // 2 cores from H+600 (start) to H+1800: 2400 CPU-seconds at the first sample; then
        // 1.5 cores to H+3600 (2700 more); then a restart: 900 at H+5400 (0.5 core).
        usage.add_cpu((H + 600) * 1000, (H + 1800) * 1000, 2400.0);
        usage.add_cpu((H + 1800) * 1000, (H + 3600) * 1000, 2700.0);
        usage.add_cpu((H + 3600) * 1000, (H + 5400) * 1000, 900.0);
        assert!((usage.cores(H) - 5100.0 / 3000.0).abs() < 1e-12);
        assert!((usage.cores(H + 3600) - 0.5).abs() < 1e-12);
        // An hour it does not cover takes the mean of all it does: 6000 / 4800.
        assert!((usage.cores(H + 7200) - 1.25).abs() < 1e-12);
    }

    /// Google Managed Prometheus (`exported_*` pod labels, a `cluster` label),
    /// kube-state-metrics 1.x names and cAdvisor's pre-1.16 `pod_name`/`container_name`:
    /// two hours of one pod on one node, every 1800 s.
    #[test]
    fn label_variants_of_real_installs_give_the_pods_hours() {
        use crate::sources::prometheus::{MetricNames, openmetrics};
        let gib = 1_073_741_824_i64;
        let pod = r#"cluster="gke-1",namespace="gmp-public",exported_namespace="ml",exported_pod="train-0""#;
        let mut text = String::new();
        let mut line = |name: &str, labels: &str, values: &[f64]| {
            for (i, v) in values.iter().enumerate() {
                text.push_str(&format!("{name}{{{labels}}} {v} {}\n", H + 1800 * i as i64));
            }
        };
        let info =
            format!(r#"{pod},uid="u1",node="n1",created_by_kind="StatefulSet",created_by_name="train""#);
        line("kube_pod_info", &info, &[1.0; 4]);
        line("kube_pod_labels", &format!(r#"{pod},uid="u1",label_client="acme""#), &[1.0; 4]);
        line(
            "kube_pod_container_resource_requests_cpu_cores",
            &format!(r#"{pod},container="main""#),
            &[2.0; 4],
        );
        let memory = (4 * gib) as f64;
        line(
            "kube_pod_container_resource_requests_memory_bytes",
            &format!(r#"{pod},container="main""#),
            &[memory; 4],
        );
        line(
            "kube_pod_container_resource_requests",
            &format!(r#"{pod},container="main",resource="nvidia_com_gpu",unit="integer""#),
            &[1.0; 4],
        );
        let node = r#"cluster="gke-1",node="n1""#;
        line("kube_node_info", &format!(r#"{node},provider_id="gce://proj/us-central1-a/n1""#), &[1.0; 4]);
        line(
            "kube_node_labels",
            &format!(
                r#"{node},label_node_kubernetes_io_instance_type="g2-standard-8",label_cloud_google_com_gke_spot="true""#
            ),
            &[1.0; 4],
        );
        line("kube_node_status_capacity_cpu_cores", node, &[8.0; 4]);
        line("kube_node_status_capacity_memory_bytes", node, &[(32 * gib) as f64; 4]);
        line("kube_node_status_capacity", &format!(r#"{node},resource="nvidia_com_gpu""#), &[1.0; 4]);
        // CPU: 2700 then 900 CPU-seconds in the first hour (1 core), 1800 in the second.
        let cadvisor = r#"cluster="gke-1",namespace="ml",pod_name="train-0""#;
        line(
            "container_cpu_usage_seconds_total",
            &format!(r#"{cadvisor},container_name="main""#),
            &[1000.0, 3700.0, 4600.0, 6400.0],
        );
        // The pause container and the pod's cgroup are not containers.
        line(
            "container_cpu_usage_seconds_total",
            &format!(r#"{cadvisor},container_name="POD""#),
            &[0.0, 9e3, 9e4, 9e5],
        );
        line("container_memory_working_set_bytes", &format!(r#"{cadvisor},container_name="""#), &[9e12; 4]);
        let g = gib as f64;
        line(
            "container_memory_working_set_bytes",
            &format!(r#"{cadvisor},container_name="main""#),
            &[2.0 * g, 4.0 * g, g, g],
        );
        text.push_str("# EOF\n");

        let mut collector = Collector::new(H, H + 7200);
        let names = MetricNames::default().with_kube();
        openmetrics::read_into(text.as_bytes(), "gmp.om", &names, &mut collector, &|_| {}).unwrap();
        let folded = fold_kube(&collector, H, H + 7200, None, "");
        assert_eq!(folded.interval_seconds, 1800.0);
        assert_eq!(folded.missing, vec!["kube_pod_start_time"]);
        assert_eq!(folded.skipped_container_series, 2);
        let nodes: Vec<_> =
            folded.nodes.iter().map(|n| (n.hour, n.seconds, n.cpu_cores, n.memory_gib, n.gpus)).collect();
        assert_eq!(nodes, vec![(H, 3600.0, 8.0, 32.0, 1.0), (H + 3600, 3600.0, 8.0, 32.0, 1.0)]);
        assert_eq!(
            (folded.nodes[0].instance_type.as_str(), folded.nodes[0].capacity_type.as_str()),
            ("g2-standard-8", "spot")
        );
        let pods: Vec<_> = folded
            .pods
            .iter()
            .map(|p| {
                (
                    p.hour,
                    p.seconds,
                    p.cpu_request,
                    p.memory_request_gib,
                    p.gpu_request,
                    p.cpu_usage,
                    p.memory_usage_gib,
                )
            })
            .collect();
        assert_eq!(
            pods,
            vec![(H, 3600.0, 2.0, 4.0, 1.0, 1.0, 3.0), (H + 3600, 3600.0, 2.0, 4.0, 1.0, 1.0, 1.0)]
        );
        let first = &folded.pods[0];
        assert_eq!(
            (first.cluster.as_str(), first.namespace.as_str(), first.pod.as_str(), first.node.as_str()),
            ("gke-1", "ml", "train-0", "n1")
        );
        assert_eq!((first.workload.as_str(), first.labels.as_str()), ("train", r#"{"client":"acme"}"#));
    }

    #[test]
    fn node_labels_of_each_cloud_say_spot_or_on_demand() {
        let labels = |pairs: &[(&str, &str)]| -> Labels {
            let mut l: Labels = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            l.sort();
            l
        };
        assert_eq!(capacity_type(&labels(&[("label_eks_amazonaws_com_capacity_type", "SPOT")])), "spot");
        assert_eq!(capacity_type(&labels(&[("label_karpenter_sh_capacity_type", "on-demand")])), "on_demand");
        assert_eq!(
            capacity_type(&labels(&[("label_kubernetes_azure_com_scalesetpriority", "spot")])),
            "spot"
        );
        assert_eq!(capacity_type(&labels(&[("label_cloud_google_com_gke_spot", "true")])), "spot");
        assert_eq!(capacity_type(&labels(&[("label_team", "ml")])), "");
        let gmp =
            labels(&[("namespace", "gmp-public"), ("exported_namespace", "ml"), ("exported_pod", "p-0")]);
        assert_eq!(pod_of(&gmp), ("ml", "p-0"));
        // GMP's targets have no `pod`: only the namespace is renamed.
        let gmp = labels(&[("namespace", "gke-gmp-system"), ("exported_namespace", "ml"), ("pod", "p-0")]);
        assert_eq!(pod_of(&gmp), ("ml", "p-0"));
        let old = labels(&[("namespace", "ml"), ("pod_name", "p-0"), ("container_name", "c")]);
        assert_eq!(pod_of(&old), ("ml", "p-0"));
        assert_eq!(workload_of("ReplicaSet", "chat-vllm-7d9f8c6b5"), "chat-vllm");
        assert_eq!(workload_of("Job", "etl-29340000"), "etl-29340000");
        assert_eq!(workload_of("StatefulSet", "triton-ocr"), "triton-ocr");
    }
}
