//! GPU and inference metrics from Prometheus: over its HTTP API ([`api`]) or from an
//! OpenMetrics text file with timestamps ([`openmetrics`]). Both feed one [`Collector`],
//! which buckets samples into half-open hours as they arrive, so the two paths give the same
//! answer for the same samples.
//!
//! What a cluster exports varies by dcgm-exporter version and scrape configuration
//! (prometheus reference §1): metric names come from [`MetricNames`], each with the unit it
//! reports in; label names are detected from the series themselves ([`LabelStyle::detect`]).

pub mod api;
mod collect;
pub mod openmetrics;

pub use collect::{Collector, HourAcc, Observed, Series};

use serde::Serialize;

/// What a metric measures, and in which unit, so values can be brought to one scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// GPU busy ratio 0..1 (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`): preferred, works per MIG instance.
    EngineActive,
    /// GPU busy percent 0..100 (`DCGM_FI_DEV_GPU_UTIL`): the fallback, never used for MIG.
    UtilPercent,
    /// GPU busy ratio 0..1 under the DCGM 4.7 names (`DCGM_FI_DEV_GPU_UTIL_RATIO`).
    UtilRatio,
    /// Framebuffer used, MiB.
    FramebufferMib,
    /// Framebuffer used, bytes (dcgm-exporter 4.9 units).
    FramebufferBytes,
    /// Counter of successful inference requests.
    Requests,
    /// Counter of prompt (input) tokens.
    PromptTokens,
    /// Counter of generated (output) tokens.
    GenerationTokens,
    /// kube-state-metrics (issue 41), kept sample by sample for the pods' split: a pod and
    /// its node (`kube_pod_info`), its labels, what its containers requested (by `resource`,
    /// or the 1.x names for cores and bytes), when it started, completed or was deleted.
    KubePodInfo,
    KubePodLabels,
    KubePodRequests,
    KubePodCpuRequestCores,
    KubePodMemoryRequestBytes,
    KubePodStartTime,
    KubePodCompletionTime,
    KubePodDeletionTimestamp,
    /// A node and its `provider_id`, its labels (instance and capacity type), its capacity
    /// (by `resource`, or the 1.x names).
    KubeNodeInfo,
    KubeNodeLabels,
    KubeNodeCapacity,
    KubeNodeCpuCores,
    KubeNodeMemoryBytes,
    /// cAdvisor: a container's CPU seconds (a counter) and its working set in bytes.
    ContainerCpuSeconds,
    ContainerMemoryBytes,
}

impl Role {
    pub fn is_counter(self) -> bool {
        matches!(
            self,
            Role::Requests | Role::PromptTokens | Role::GenerationTokens | Role::ContainerCpuSeconds
        )
    }

    /// A Kubernetes series (kube-state-metrics or cAdvisor), read apart from the GPU's.
    pub fn is_kube(self) -> bool {
        matches!(
            self,
            Role::KubePodInfo
                | Role::KubePodLabels
                | Role::KubePodRequests
                | Role::KubePodCpuRequestCores
                | Role::KubePodMemoryRequestBytes
                | Role::KubePodStartTime
                | Role::KubePodCompletionTime
                | Role::KubePodDeletionTimestamp
                | Role::KubeNodeInfo
                | Role::KubeNodeLabels
                | Role::KubeNodeCapacity
                | Role::KubeNodeCpuCores
                | Role::KubeNodeMemoryBytes
                | Role::ContainerCpuSeconds
                | Role::ContainerMemoryBytes
        )
    }

    /// Multiplier from the exported unit to gpuledger's (ratio 0..1, MiB, counts).
    pub fn scale(self) -> f64 {
        match self {
            Role::UtilPercent => 0.01,
            Role::FramebufferBytes => 1.0 / 1_048_576.0,
            _ => 1.0,
        }
    }
}

/// The metric names gpuledger reads, by role: the defaults cover dcgm-exporter 2.x–4.9
/// (legacy and DCGM 4.7 names, the 1.x lowercase compatibility names), vLLM, Triton and TGI;
/// `--*-metric` options add names.
#[derive(Debug, Clone)]
pub struct MetricNames {
    pub names: Vec<(String, Role)>,
}

impl Default for MetricNames {
    fn default() -> Self {
        let defaults: &[(&str, Role)] = &[
            ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", Role::EngineActive),
            ("DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", Role::EngineActive),
            ("dcgm_fi_prof_gr_engine_active", Role::EngineActive),
            ("DCGM_FI_DEV_GPU_UTIL", Role::UtilPercent),
            ("dcgm_gpu_utilization", Role::UtilPercent),
            ("DCGM_FI_DEV_GPU_UTIL_RATIO", Role::UtilRatio),
            ("DCGM_FI_DEV_FB_USED", Role::FramebufferMib),
            ("dcgm_fb_used", Role::FramebufferMib),
            ("DCGM_FI_DEV_FB_USED_BYTES", Role::FramebufferBytes),
            ("vllm:request_success_total", Role::Requests),
            ("vllm:prompt_tokens_total", Role::PromptTokens),
            ("vllm:generation_tokens_total", Role::GenerationTokens),
            ("nv_inference_request_success", Role::Requests),
            ("tgi_request_success", Role::Requests),
            ("tgi_request_input_length_sum", Role::PromptTokens),
            ("tgi_request_generated_tokens_sum", Role::GenerationTokens),
        ];
        MetricNames { names: defaults.iter().map(|(name, role)| (name.to_string(), *role)).collect() }
    }
}

/// The Kubernetes series `--kube-state-metrics` adds: kube-state-metrics 2.x names, the 1.x
/// names of requests and capacity, and cAdvisor's.
pub const KUBE_METRICS: &[(&str, Role)] = &[
    ("kube_pod_info", Role::KubePodInfo),
    ("kube_pod_labels", Role::KubePodLabels),
    ("kube_pod_container_resource_requests", Role::KubePodRequests),
    ("kube_pod_container_resource_requests_cpu_cores", Role::KubePodCpuRequestCores),
    ("kube_pod_container_resource_requests_memory_bytes", Role::KubePodMemoryRequestBytes),
    ("kube_pod_start_time", Role::KubePodStartTime),
    ("kube_pod_completion_time", Role::KubePodCompletionTime),
    ("kube_pod_deletion_timestamp", Role::KubePodDeletionTimestamp),
    ("kube_node_info", Role::KubeNodeInfo),
    ("kube_node_labels", Role::KubeNodeLabels),
    ("kube_node_status_capacity", Role::KubeNodeCapacity),
    ("kube_node_status_capacity_cpu_cores", Role::KubeNodeCpuCores),
    ("kube_node_status_capacity_memory_bytes", Role::KubeNodeMemoryBytes),
    ("container_cpu_usage_seconds_total", Role::ContainerCpuSeconds),
    ("container_memory_working_set_bytes", Role::ContainerMemoryBytes),
];

impl MetricNames {
    /// Adds the Kubernetes series ([`KUBE_METRICS`]).
    pub fn with_kube(mut self) -> MetricNames {
        for (name, role) in KUBE_METRICS {
            self.add(name, *role);
        }
        self
    }

    /// Adds (or re-assigns) a metric name.
    pub fn add(&mut self, name: &str, role: Role) {
        self.names.retain(|(known, _)| known != name);
        self.names.push((name.to_string(), role));
    }

    pub fn role(&self, name: &str) -> Option<Role> {
        self.names.iter().find(|(known, _)| known == name).map(|(_, role)| *role)
    }
}

/// Which label holds what, detected from the series seen unless overridden.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LabelStyle {
    /// GPU UUID: `UUID` (default) or `uuid` (`--use-old-namespace`).
    pub uuid: String,
    /// Node: `node`, `kubernetes_node`, `Hostname` (≤ 4.5) or `hostname` (4.6+).
    pub host: String,
    /// The workload pod's labels on DCGM series: `exported_pod` (honor_labels false, the
    /// Helm and GPU Operator default), `pod`, or `pod_name` (`--use-old-namespace`).
    pub pod: String,
    pub namespace: String,
    pub container: String,
    pub model: String,
    pub gpu_instance: String,
    pub gpu_profile: String,
    /// The cluster a series comes from: `cluster`, `cluster_name` or `k8s_cluster_name` (an
    /// external label or relabeling of a central Prometheus); empty when no series has one.
    pub cluster: String,
}

/// Label names the user fixed with options; empty means detect.
#[derive(Debug, Clone, Default)]
pub struct LabelOverrides {
    pub uuid: Option<String>,
    pub host: Option<String>,
    pub pod: Option<String>,
    pub namespace: Option<String>,
    pub container: Option<String>,
    pub cluster: Option<String>,
}

impl LabelStyle {
    /// Picks label names from the label keys present on GPU series.
    pub fn detect<'a>(keys: impl Iterator<Item = &'a str>, overrides: &LabelOverrides) -> LabelStyle {
        let present: std::collections::HashSet<&str> = keys.collect();
        let first = |candidates: &[&str], fallback: &str| {
            candidates.iter().find(|c| present.contains(**c)).unwrap_or(&fallback).to_string()
        };
        // With honor_labels false, `pod`/`namespace` name the exporter itself: when any
        // series carries `exported_pod`, only the exported_* labels identify workloads.
        let (pod, namespace, container) = if present.contains("exported_pod") {
            ("exported_pod", "exported_namespace", "exported_container")
        } else if present.contains("pod") {
            ("pod", "namespace", "container")
        } else if present.contains("pod_name") {
            ("pod_name", "pod_namespace", "container_name")
        } else {
            ("pod", "namespace", "container")
        };
        let pick = |chosen: &Option<String>, detected: String| chosen.clone().unwrap_or(detected);
        LabelStyle {
            uuid: pick(&overrides.uuid, first(&["UUID", "uuid"], "UUID")),
            host: pick(
                &overrides.host,
                first(&["node", "kubernetes_node", "Hostname", "hostname"], "Hostname"),
            ),
            pod: pick(&overrides.pod, pod.into()),
            namespace: pick(&overrides.namespace, namespace.into()),
            container: pick(&overrides.container, container.into()),
            model: "modelName".into(),
            gpu_instance: "GPU_I_ID".into(),
            gpu_profile: "GPU_I_PROFILE".into(),
            cluster: pick(&overrides.cluster, first(&["cluster", "cluster_name", "k8s_cluster_name"], "")),
        }
    }
}

/// A series' labels, sorted by name; `__name__` excluded.
pub type Labels = Vec<(String, String)>;

/// The value of `key` in sorted `labels`, or "" when absent (Prometheus treats an empty
/// label as an absent one).
pub fn label<'a>(labels: &'a Labels, key: &str) -> &'a str {
    labels.binary_search_by(|(k, _)| k.as_str().cmp(key)).map(|i| labels[i].1.as_str()).unwrap_or("")
}

/// `3600`-second hours: the hour a gauge sample at `t_ms` belongs to, half-open `[h, h+1)`.
pub fn gauge_hour(t_ms: i64) -> i64 {
    t_ms.div_euclid(3_600_000) * 3600
}

/// The hour a counter increase observed at `t_ms` belongs to: the increase covers the
/// interval ending at `t_ms`, so a sample exactly on the hour closes the previous hour.
pub fn counter_hour(t_ms: i64) -> i64 {
    (t_ms - 1).div_euclid(3_600_000) * 3600
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_on_the_hour_open_the_hour_and_close_the_counter_interval() {
        // 2026-10-01T00:00:00Z = 1_790_812_800.
        let h = 1_790_812_800_i64;
        assert_eq!(gauge_hour(h * 1000), h);
        assert_eq!(gauge_hour(h * 1000 - 1), h - 3600);
        assert_eq!(counter_hour(h * 1000), h - 3600);
        assert_eq!(counter_hour(h * 1000 + 1), h);
    }

    #[test]
    fn honor_labels_false_means_exported_labels_name_the_workload() {
        let keys = ["UUID", "Hostname", "exported_pod", "exported_namespace", "pod", "namespace"];
        let style = LabelStyle::detect(keys.into_iter(), &LabelOverrides::default());
        assert_eq!((style.pod.as_str(), style.namespace.as_str()), ("exported_pod", "exported_namespace"));
        let old = ["uuid", "hostname", "pod_name", "pod_namespace"];
        let style = LabelStyle::detect(old.into_iter(), &LabelOverrides::default());
        assert_eq!(
            (style.uuid.as_str(), style.host.as_str(), style.pod.as_str()),
            ("uuid", "hostname", "pod_name")
        );
        let forced = LabelOverrides { pod: Some("my_pod".into()), ..LabelOverrides::default() };
        assert_eq!(LabelStyle::detect(old.into_iter(), &forced).pod, "my_pod");
        // A central Prometheus labels series with their cluster; without one, no cluster.
        assert_eq!(LabelStyle::detect(old.into_iter(), &LabelOverrides::default()).cluster, "");
        let central = ["UUID", "pod", "namespace", "cluster_name"];
        assert_eq!(
            LabelStyle::detect(central.into_iter(), &LabelOverrides::default()).cluster,
            "cluster_name"
        );
    }
}
