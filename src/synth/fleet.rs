//! The synthetic world for one month: clusters, node pools, nodes, workloads and pods, and
//! the hourly values (utilization, CPU and memory use, requests) every later pass recomputes
//! from ids alone.
//!
//! The shape follows a real AI platform: training Jobs on 8-GPU nodes mostly on Spot or
//! Savings Plans, inference Deployments with a diurnal request curve, notebooks that hold a
//! GPU and mostly idle, batch Jobs, platform DaemonSets on every node, CPU-only services.

use crate::catalog::{self, InstanceType};
use crate::period::Period;

use super::rng::{self, Rng};

/// How big a world to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scale {
    /// About 11 GPU nodes and 6 CPU nodes: the dashboard demo.
    Demo,
    /// About 25 GPU nodes and 13 CPU nodes: integration tests.
    Small,
    /// About 200 GPU nodes and 300 CPU nodes, ~10 million CUR rows a month: benchmarks.
    Large,
}

impl Scale {
    /// The column of [`PoolSpec::nodes`] for this scale in `era`.
    fn index(self, era: Era) -> usize {
        match (self, era) {
            (Scale::Demo, Era::Before) => 0,
            (Scale::Demo, Era::After) => 1,
            (Scale::Small, _) => 2,
            (Scale::Large, _) => 3,
        }
    }

    /// Seconds between metric samples; divides an hour so samples land on hour starts.
    pub fn sample_interval(self) -> i64 {
        match self {
            Scale::Demo | Scale::Small => 1800,
            Scale::Large => 3600,
        }
    }
}

/// How an instance is paid for, as CID derives it from the bill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purchase {
    OnDemand,
    Spot,
    SavingsPlan,
    Reserved,
}

impl Purchase {
    /// The label CID and gpuledger show.
    pub fn label(self) -> &'static str {
        match self {
            Purchase::OnDemand => "On-Demand",
            Purchase::Spot => "Spot",
            Purchase::SavingsPlan => "Savings Plans",
            Purchase::Reserved => "Reserved",
        }
    }
}

/// What a workload does, which shapes its GPU use and schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Training,
    Inference,
    Notebook,
    Batch,
    Service,
    Platform,
}

/// Which inference server exposes request counters for a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    None,
    Vllm,
    Triton,
}

pub struct Cluster {
    pub name: &'static str,
    pub region: &'static str,
    pub region_name: &'static str,
    /// Usage-type prefix: none in us-east-1, `USW2-` in us-west-2.
    pub usage_prefix: &'static str,
    /// The linked account the cluster runs in (its instances, pods and volumes are billed
    /// to it), and that account's name.
    pub account: &'static str,
    pub account_name: &'static str,
}

pub const CLUSTERS: &[Cluster] = &[
    Cluster {
        name: "ml-prod",
        region: "us-east-1",
        region_name: "US East (N. Virginia)",
        usage_prefix: "",
        account: "222222222222",
        account_name: "ml-platform",
    },
    Cluster {
        name: "ml-west",
        region: "us-west-2",
        region_name: "US West (Oregon)",
        usage_prefix: "USW2-",
        account: "333333333333",
        account_name: "ml-research",
    },
];

/// A workload as Kubernetes (and so the bill) names it.
pub struct Workload {
    pub namespace: &'static str,
    /// Deployment, Job or StatefulSet name (Jobs get a run suffix per pod).
    pub name: &'static str,
    /// `aws_eks_workload_type`: `ReplicaSet`, `Job`, `StatefulSet`, `DaemonSet`.
    pub kind: &'static str,
    pub class: Class,
    pub client: Option<&'static str>,
    pub team: &'static str,
    pub model: Option<&'static str>,
    pub server: Server,
    /// Peak requests per hour per replica (inference only).
    pub peak_requests_per_hour: u64,
}

macro_rules! workload {
    ($ns:literal, $name:literal, $kind:literal, $class:ident, $client:expr, $team:literal) => {
        Workload {
            namespace: $ns,
            name: $name,
            kind: $kind,
            class: Class::$class,
            client: $client,
            team: $team,
            model: None,
            server: Server::None,
            peak_requests_per_hour: 0,
        }
    };
    ($ns:literal, $name:literal, $client:expr, $team:literal, $model:literal, $server:ident, $peak:literal) => {
        Workload {
            namespace: $ns,
            name: $name,
            kind: "ReplicaSet",
            class: Class::Inference,
            client: $client,
            team: $team,
            model: Some($model),
            server: Server::$server,
            peak_requests_per_hour: $peak,
        }
    };
}

/// Every workload of the world. Pools below refer to them by index.
pub const WORKLOADS: &[Workload] = &[
    /* 0 */ workload!("acme-train", "llm-pretrain", "Job", Training, Some("acme"), "research"),
    /* 1 */ workload!("acme-train", "llm-finetune", "Job", Training, Some("acme"), "research"),
    /* 2 */ workload!("globex-vision", "detector-train", "Job", Training, Some("globex"), "vision"),
    /* 3 */ workload!("initech-research", "finetune", "Job", Training, Some("initech"), "research"),
    /* 4 */ workload!("umbrella-rag", "embedder-train", "Job", Training, Some("umbrella"), "search"),
    /* 5 */
    workload!(
        "acme-llm",
        "chat-vllm",
        Some("acme"),
        "serving",
        "meta-llama/Llama-3.1-8B-Instruct",
        Vllm,
        5200
    ),
    /* 6 */
    workload!(
        "umbrella-rag",
        "rag-vllm",
        Some("umbrella"),
        "search",
        "mistralai/Mistral-7B-Instruct-v0.3",
        Vllm,
        3100
    ),
    /* 7 */
    workload!("globex-vision", "detector-triton", Some("globex"), "vision", "yolo-detector", Triton, 42000),
    /* 8 */
    workload!("acme-llm", "summarize-vllm", Some("acme"), "serving", "Qwen/Qwen2.5-7B-Instruct", Vllm, 1800),
    /* 9 */
    workload!(
        "umbrella-rag",
        "rerank-vllm",
        Some("umbrella"),
        "search",
        "BAAI/bge-reranker-v2-m3",
        Vllm,
        900
    ),
    /* 10 */
    workload!("initech-research", "jupyter", "StatefulSet", Notebook, Some("initech"), "research"),
    /* 11 */ workload!("acme-train", "notebook", "StatefulSet", Notebook, Some("acme"), "research"),
    /* 12 */ workload!("internal-ml", "jupyter", "StatefulSet", Notebook, None, "platform"),
    /* 13 */ workload!("globex-vision", "video-batch", "Job", Batch, Some("globex"), "vision"),
    /* 14 */ workload!("internal-ml", "eval-batch", "Job", Batch, None, "platform"),
    /* 15 */ workload!("web", "frontend", "ReplicaSet", Service, None, "product"),
    /* 16 */ workload!("api", "gateway", "ReplicaSet", Service, None, "product"),
    /* 17 */ workload!("acme-llm", "chat-api", "ReplicaSet", Service, Some("acme"), "serving"),
    /* 18 */ workload!("monitoring", "prometheus", "StatefulSet", Service, None, "platform"),
    /* 19 */ workload!("internal-ml", "etl", "Job", Batch, None, "platform"),
    /* 20 */ workload!("globex-vision", "preprocess", "Job", Batch, Some("globex"), "vision"),
    /* 21 */ workload!("kube-system", "aws-node", "DaemonSet", Platform, None, "platform"),
    /* 22 */ workload!("kube-system", "kube-proxy", "DaemonSet", Platform, None, "platform"),
    /* 23 */ workload!("monitoring", "node-exporter", "DaemonSet", Platform, None, "platform"),
    /* 24 */
    workload!("gpu-operator", "nvidia-dcgm-exporter", "DaemonSet", Platform, None, "platform"),
    /* 25 */
    workload!("gpu-operator", "nvidia-device-plugin-daemonset", "DaemonSet", Platform, None, "platform"),
    /* 26 */
    workload!("kube-system", "ebs-csi-node", "DaemonSet", Platform, None, "platform"),
    /* 27 */
    workload!("logging", "fluent-bit", "DaemonSet", Platform, None, "platform"),
    /* 28 */
    workload!("kube-system", "eks-pod-identity-agent", "DaemonSet", Platform, None, "platform"),
    /* 29 */ workload!("security", "falco", "DaemonSet", Platform, None, "security"),
    /* 30 */
    // A Triton StatefulSet deployed in both clusters: its pods are `ocr-triton-0`, … in each,
    // so only the cluster tells their metrics apart.
    Workload {
        namespace: "globex-vision",
        name: "ocr-triton",
        kind: "StatefulSet",
        class: Class::Inference,
        client: Some("globex"),
        team: "vision",
        model: Some("ocr-recognizer"),
        server: Server::Triton,
        peak_requests_per_hour: 9000,
    },
    // Notebooks of two teams on time-sliced L4s: up to four pods share one GPU.
    /* 31 */
    workload!("initech-research", "jupyter-shared", "StatefulSet", Notebook, Some("initech"), "research"),
    /* 32 */ workload!("internal-ml", "jupyter-shared", "StatefulSet", Notebook, None, "platform"),
];

/// DaemonSets on every node: (workload index, vCPU request, GiB request).
const NODE_DAEMONSETS: &[(usize, f64, f64)] = &[
    (21, 0.25, 0.25),
    (22, 0.1, 0.125),
    (23, 0.1, 0.1875),
    (26, 0.01, 0.04),
    (27, 0.1, 0.25),
    (28, 0.025, 0.125),
    (29, 0.1, 0.5),
];
/// DaemonSets on GPU nodes only.
const GPU_DAEMONSETS: &[(usize, f64, f64)] = &[(24, 0.25, 0.5), (25, 0.1, 0.125)];

/// A node pool: one instance type bought one way, hosting some workloads.
struct PoolSpec {
    name: &'static str,
    cluster: usize,
    instance_type: &'static str,
    purchase: Purchase,
    /// Node count at demo scale before and after the demo's fixes, at small and at large scale.
    nodes: [u32; 4],
    /// GPUs per pod (CPU pools: pods per node).
    per_pod: u32,
    workloads: &'static [usize],
    /// At large scale, the pool runs short-lived Jobs (minutes each), as a real fleet's CI
    /// and ETL pools do: hundreds of thousands of distinct pods a month.
    churns_at_large: bool,
    /// Time-slicing: the device plugin advertises this many replicas of each GPU and each pod
    /// requests one (`nvidia.com/gpu: 1`), so up to this many pods share one GPU. 1: no sharing.
    replicas: u32,
    /// A Savings Plan pool covered by an EC2 Instance Savings Plan of its own (its family in
    /// its region, sized for all its nodes) rather than by the Compute Savings Plan.
    instance_plan: bool,
}

const POOLS: &[PoolSpec] = &[
    PoolSpec {
        name: "train-h100",
        cluster: 0,
        instance_type: "p5.48xlarge",
        purchase: Purchase::SavingsPlan,
        nodes: [0, 0, 2, 14],
        per_pod: 8,
        workloads: &[0, 3],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "train-a100-spot",
        cluster: 0,
        instance_type: "p4d.24xlarge",
        purchase: Purchase::Spot,
        nodes: [0, 0, 2, 28],
        per_pod: 8,
        workloads: &[1, 2],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "train-a100-ondemand",
        cluster: 0,
        instance_type: "p4d.24xlarge",
        purchase: Purchase::OnDemand,
        nodes: [0, 0, 1, 12],
        per_pod: 8,
        workloads: &[3, 4],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "infer-a10g",
        cluster: 0,
        instance_type: "g5.12xlarge",
        purchase: Purchase::Reserved,
        nodes: [0, 0, 3, 30],
        per_pod: 1,
        workloads: &[5, 6],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "infer-l4",
        cluster: 0,
        instance_type: "g6.12xlarge",
        purchase: Purchase::OnDemand,
        nodes: [0, 0, 2, 26],
        per_pod: 1,
        workloads: &[7, 8],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "infer-a100",
        cluster: 0,
        instance_type: "p4d.24xlarge",
        purchase: Purchase::OnDemand,
        nodes: [0, 0, 1, 6],
        per_pod: 1,
        workloads: &[9],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "notebooks",
        cluster: 0,
        instance_type: "g5.xlarge",
        purchase: Purchase::OnDemand,
        nodes: [0, 0, 4, 34],
        per_pod: 1,
        workloads: &[10, 11, 12],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "batch-l4-spot",
        cluster: 0,
        instance_type: "g6.xlarge",
        purchase: Purchase::Spot,
        nodes: [1, 1, 3, 22],
        per_pod: 1,
        workloads: &[13, 14],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "west-infer-l40s",
        cluster: 1,
        instance_type: "g6e.12xlarge",
        purchase: Purchase::OnDemand,
        nodes: [0, 0, 2, 16],
        per_pod: 1,
        workloads: &[6, 8],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "west-train-a10g-spot",
        cluster: 1,
        instance_type: "g5.48xlarge",
        purchase: Purchase::Spot,
        nodes: [0, 0, 2, 12],
        per_pod: 8,
        workloads: &[2, 4],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "general",
        cluster: 0,
        instance_type: "m5.4xlarge",
        purchase: Purchase::SavingsPlan,
        nodes: [3, 3, 5, 130],
        per_pod: 8,
        workloads: &[15, 16, 17, 18],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "general-ondemand",
        cluster: 0,
        instance_type: "m6i.8xlarge",
        purchase: Purchase::OnDemand,
        nodes: [1, 1, 2, 60],
        per_pod: 8,
        workloads: &[15, 16, 17],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "cpu-spot",
        cluster: 0,
        instance_type: "c5.2xlarge",
        purchase: Purchase::Spot,
        nodes: [2, 2, 4, 70],
        per_pod: 4,
        workloads: &[19, 20],
        churns_at_large: true,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "west-general",
        cluster: 1,
        instance_type: "m5.xlarge",
        purchase: Purchase::OnDemand,
        nodes: [0, 0, 2, 40],
        per_pod: 4,
        workloads: &[15, 16],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "infer-ocr-l4",
        cluster: 0,
        instance_type: "g6.xlarge",
        purchase: Purchase::OnDemand,
        nodes: [1, 1, 1, 4],
        per_pod: 1,
        workloads: &[30],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "west-infer-ocr-l4",
        cluster: 1,
        instance_type: "g6.xlarge",
        purchase: Purchase::OnDemand,
        nodes: [0, 0, 1, 4],
        per_pod: 1,
        workloads: &[30],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    // The demo's own pools (the story `gpuledger demo` tells): before the fixes, training on
    // On-Demand A100s and inference and notebooks on an A100 node; after, training on Spot
    // (one family left On-Demand), inference on L4s, notebooks on small L4 instances.
    PoolSpec {
        name: "demo-train-a100-ondemand",
        cluster: 0,
        instance_type: "p4d.24xlarge",
        purchase: Purchase::OnDemand,
        nodes: [1, 0, 0, 0],
        per_pod: 8,
        workloads: &[0, 1, 2, 3, 4],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "demo-infer-a100",
        cluster: 0,
        instance_type: "p4d.24xlarge",
        purchase: Purchase::OnDemand,
        nodes: [1, 0, 0, 0],
        per_pod: 1,
        workloads: &[5, 6, 7, 8, 9, 10, 11, 12],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "demo-notebooks-a10g",
        cluster: 0,
        instance_type: "g5.12xlarge",
        purchase: Purchase::OnDemand,
        nodes: [1, 0, 0, 0],
        per_pod: 1,
        workloads: &[10, 11, 12],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "demo-train-a100-spot",
        cluster: 0,
        instance_type: "p4d.24xlarge",
        purchase: Purchase::Spot,
        nodes: [0, 1, 0, 0],
        per_pod: 8,
        workloads: &[0, 1, 2, 4],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "demo-train-a10g-ondemand",
        cluster: 0,
        instance_type: "g5.12xlarge",
        purchase: Purchase::OnDemand,
        nodes: [0, 1, 0, 0],
        per_pod: 4,
        workloads: &[3],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "demo-infer-l4",
        cluster: 0,
        instance_type: "g6.12xlarge",
        purchase: Purchase::OnDemand,
        nodes: [0, 2, 0, 0],
        per_pod: 1,
        workloads: &[5, 6, 7, 8, 9],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    PoolSpec {
        name: "demo-notebooks-l4",
        cluster: 0,
        instance_type: "g6.xlarge",
        purchase: Purchase::OnDemand,
        nodes: [0, 2, 0, 0],
        per_pod: 1,
        workloads: &[10, 11, 12],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    // Time-sliced notebooks (small and large scale): each L4 advertised as four replicas, so
    // the bill sees up to four GPUs requested on a one-GPU instance and divides by them.
    PoolSpec {
        name: "notebooks-l4-shared",
        cluster: 0,
        instance_type: "g6.xlarge",
        purchase: Purchase::OnDemand,
        nodes: [0, 0, 1, 4],
        per_pod: 1,
        workloads: &[31, 32],
        churns_at_large: false,
        replicas: 4,
        instance_plan: false,
    },
];

/// One EC2 instance in the month.
pub struct Node {
    pub cluster: usize,
    pub pool: &'static str,
    pub instance_type: &'static InstanceType,
    pub purchase: Purchase,
    pub instance_id: String,
    /// Kubernetes node name, `ip-10-…ec2.internal`.
    pub node_name: String,
    pub availability_zone: String,
    pub gpu_uuids: Vec<String>,
    /// Time-slicing replicas per GPU (1: each GPU is one pod's).
    pub gpu_replicas: u32,
    /// Hours of the month (0-based) in which the instance ran; whole hours.
    pub running: Vec<bool>,
    /// Pods ever placed on the node (indices into [`World::pods`]).
    pub pods: Vec<usize>,
}

/// One pod: where and when it ran and what it asked for.
pub struct Pod {
    pub workload: usize,
    /// Name of the Kubernetes controller that owns it (`aws_eks_workload_name`).
    pub controller: String,
    pub name: String,
    pub uid: String,
    pub node: usize,
    /// First GPU index on the node, and GPU count (0 for CPU pods).
    pub first_gpu: u32,
    pub gpus: u32,
    /// On a time-sliced GPU, which of its replicas the pod holds (dcgm-exporter's `vgpu`).
    pub replica: u32,
    pub vcpu_request: f64,
    pub memory_request_gib: f64,
    /// Seconds from the month start, half-open `[start, end)`; DaemonSets run whenever the
    /// node runs and have `start = 0, end = month length`.
    pub start: i64,
    pub end: i64,
    pub daemonset: bool,
    /// Peak framebuffer use this pod settles at, MiB per GPU.
    pub framebuffer_mib: u32,
}

/// The whole month.
/// Where the demo's story stands in a month: before the fixes (training on On-Demand A100s
/// with input-bound jobs, inference and notebooks on an A100 node) or after (Spot training,
/// inference on L4s, notebooks on small L4 instances). Only the demo scale's pools differ;
/// a world built without a story is `After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    Before,
    After,
}

/// The planning world's year (issue 42), what forecasts are tested against: demand grows,
/// people start work on weekdays, a client onboards part-way and a client retrains every
/// weekend.
/// - **Trend.** Training queues fill up (the gaps between Jobs shrink to a fifth by the
///   year's end) and pools of three or more nodes grow one node at a time
///   ([`Growth::joins_at`]).
/// - **Weekly rhythm.** Training Jobs, notebooks and batch Jobs start on weekdays only (one
///   falling on a weekend waits for Monday 08:00 UTC); inference and services run on.
/// - **Onboarding.** [`ONBOARDING_CLIENT`]'s workloads start on the 15th of the year's seventh
///   month; until then its pools run the others' or stay empty.
/// - **Retraining.** acme fine-tunes on the `retrain-h100` pool's On-Demand H100 nodes from
///   Saturday 00:00 to Monday 00:00 UTC, every weekend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Growth {
    /// The year's first month.
    pub first: Period,
    pub months: u32,
}

/// The client that onboards part-way through the planning world's year.
pub const ONBOARDING_CLIENT: &str = "umbrella";

/// Seconds in a day.
const DAY: i64 = 86_400;

impl Growth {
    fn start(&self) -> i64 {
        self.first.start()
    }

    fn end(&self) -> i64 {
        (1..self.months.max(1)).fold(self.first, |p, _| p.next()).end()
    }

    /// When the `node`-th (from 0) of a pool's `count` nodes joins the fleet, on the hour: a
    /// pool of one or two nodes has them all year; a bigger pool's first is there from the
    /// start and the others join `(node - 1 + phase) / (count - 1)` of the way through the
    /// year, `phase` (0..1) the pool's own so that pools do not grow in lock-step.
    pub fn joins_at(&self, node: u32, count: u32, phase: f64) -> i64 {
        if node == 0 || count < 3 {
            return self.start();
        }
        let fraction = (f64::from(node - 1) + phase) / f64::from(count - 1);
        let offset = ((self.end() - self.start()) as f64 * fraction) as i64;
        self.start() + (offset + 3599) / 3600 * 3600
    }

    /// How much of the year has gone at a UTC epoch second, 0..1.
    fn elapsed(&self, seconds: i64) -> f64 {
        ((seconds - self.start()) as f64 / (self.end() - self.start()) as f64).clamp(0.0, 1.0)
    }

    /// When [`ONBOARDING_CLIENT`] starts: the 15th of the year's seventh month.
    pub fn onboards_at(&self) -> i64 {
        (0..self.months / 2).fold(self.first, |p, _| p.next()).start() + 14 * DAY
    }
}

fn round4(value: f64) -> f64 {
    (value * 1e4).round() / 1e4
}

/// The day of the week of a UTC epoch second, 0 for Sunday.
fn weekday(seconds: i64) -> i64 {
    (seconds.div_euclid(DAY) + 4) % 7 // 1970-01-01 was a Thursday (4)
}

/// The pools only the planning world has ([`Growth`]).
const GROWTH_POOLS: &[PoolSpec] = &[
    PoolSpec {
        name: "retrain-h100",
        cluster: 0,
        instance_type: "p5.48xlarge",
        purchase: Purchase::OnDemand,
        nodes: [1, 1, 2, 8],
        per_pod: 8,
        workloads: &[1],
        churns_at_large: false,
        replicas: 1,
        instance_plan: false,
    },
    // An EC2 Instance Savings Plan's pool: L40S inference in the west, beside the On-Demand
    // one there (west-infer-l40s), whose hours a larger plan of the family could cover.
    PoolSpec {
        name: "west-serve-l40s",
        cluster: 1,
        instance_type: "g6e.12xlarge",
        purchase: Purchase::SavingsPlan,
        nodes: [1, 1, 1, 2],
        per_pod: 1,
        workloads: &[7],
        churns_at_large: false,
        replicas: 1,
        instance_plan: true,
    },
];

pub struct World {
    pub seed: u64,
    pub period: Period,
    pub scale: Scale,
    pub era: Era,
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    /// The month has an enterprise discount, so the export carries `net_*` columns.
    pub has_discount: bool,
    /// The hours of the month billed and measured: all of them, or the first days of a month
    /// in progress ([`World::through_day`]).
    pub billed_hours: u32,
    /// The planning world's year this month is in, if it is one.
    pub growth: Option<Growth>,
    /// The Savings Plan and reservations in force this month ([`Commitment`]).
    pub commitments: Vec<Commitment>,
}

/// The payer (management) account: it buys the Savings Plan, so the plan's fee is its line.
pub const PAYER_ACCOUNT: (&str, &str) = ("111111111111", "Example Corp");

/// What an hour costs under a Savings Plan or a reservation, as a share of On-Demand.
pub const SAVINGS_PLAN_RATE: f64 = 0.71;
pub const RESERVED_RATE: f64 = 0.62;
/// An EC2 Instance Savings Plan's rate: one family in one region, so a deeper discount than
/// the Compute plan's.
pub const INSTANCE_PLAN_RATE: f64 = 0.66;
/// The Savings Plan's hourly commitment is this share of what the nodes of its pools there
/// when it was bought cost an hour at its rate: at the fleet's busy hours the rest is billed
/// On-Demand, at its quiet ones some commitment goes unused.
pub const SAVINGS_PLAN_SIZE: f64 = 0.7;
/// The month each kind of commitment is bought in, and renewed every year after: a one-year
/// term that starts on the 1st of the month at 00:00 UTC.
pub const SAVINGS_PLAN_MONTH: u32 = 12;
pub const RESERVATION_MONTH: u32 = 9;

/// A Savings Plan or a reservation the fleet pays for: one-year, No Upfront, renewed on its
/// anniversary (a new term, a new ARN). The Compute Savings Plan covers every node of the
/// Savings Plan pools up to its hourly commitment; a reservation covers its pool's nodes,
/// one instance each, and is bought for the pool's whole size (in the planning world,
/// before all of them have joined).
#[derive(Debug, Clone)]
pub struct Commitment {
    pub arn: String,
    /// [`Purchase::SavingsPlan`] or [`Purchase::Reserved`].
    pub purchase: Purchase,
    /// The reserved pool, or the EC2 Instance Savings Plan's (none for the Compute plan).
    pub pool: Option<&'static str>,
    pub instance_type: Option<&'static InstanceType>,
    /// The cluster whose account buys a reservation (the Savings Plan is the payer's).
    pub cluster: usize,
    /// The term, UTC epoch seconds.
    pub start: i64,
    pub end: i64,
    /// Dollars an hour: the plan's commitment, or one reserved instance's fee.
    pub hourly: f64,
    /// Reserved instances (1 for the Savings Plan).
    pub count: u32,
}

impl Commitment {
    /// The term in force in `period` of a commitment bought every year in `month`.
    fn term(period: Period, month: u32) -> (i64, i64) {
        let year = if period.month() >= month { period.year() } else { period.year() - 1 };
        let start = Period::new(year, month).unwrap_or(period);
        let end = Period::new(year + 1, month).unwrap_or(period);
        (start.start(), end.start())
    }
}

/// A pool's node count at `percent` % of `nodes`: rounded half up, never below one node where
/// the scale has any, so every pool (and so every kind of cost) is still there.
fn pool_nodes(nodes: u32, percent: u32) -> u32 {
    if nodes == 0 { 0 } else { ((u64::from(nodes) * u64::from(percent) + 50) / 100).max(1) as u32 }
}

/// How long pods of a class run and how long slots stay empty between them, in hours.
fn tenancy_hours(class: Class, rng: &mut Rng) -> (i64, i64) {
    match class {
        Class::Training => (rng.int(20, 96), rng.int(1, 30)),
        Class::Inference => (rng.int(150, 700), rng.int(0, 4)),
        Class::Notebook => (rng.int(3, 10), rng.int(8, 40)),
        Class::Batch => (rng.int(1, 8), rng.int(1, 14)),
        Class::Service | Class::Platform => (rng.int(200, 800), 0),
    }
}

impl World {
    /// Builds the month deterministically from the seed, period and scale (after any fixes).
    pub fn build(seed: u64, period: Period, scale: Scale) -> World {
        World::build_in(seed, period, scale, Era::After, 100, None)
    }

    /// Builds the month of a world that applies the fixes from `fixes_from` on (`None`: they
    /// always were applied).
    pub fn build_story(seed: u64, period: Period, scale: Scale, fixes_from: Option<Period>) -> World {
        World::build_sized(seed, period, scale, fixes_from, 100, None)
    }

    /// [`World::build_story`] with every pool's node count at `fleet_percent` % of the
    /// scale's (rounded, at least one node where the scale has any), for scale models: the
    /// same fleet's shape at a tenth or three times its size; a month of the planning world's
    /// year with `growth`.
    pub fn build_sized(
        seed: u64,
        period: Period,
        scale: Scale,
        fixes_from: Option<Period>,
        fleet_percent: u32,
        growth: Option<Growth>,
    ) -> World {
        let era = if fixes_from.is_some_and(|from| period < from) { Era::Before } else { Era::After };
        World::build_in(seed, period, scale, era, fleet_percent, growth)
    }

    fn build_in(
        seed: u64,
        period: Period,
        scale: Scale,
        era: Era,
        fleet_percent: u32,
        growth: Option<Growth>,
    ) -> World {
        let month_seconds = i64::from(period.hours()) * 3600;
        let interval = scale.sample_interval();
        let month_seed = rng::hash(seed, &[period.year() as u64, u64::from(period.month())]);
        let mut world = World {
            seed: month_seed,
            period,
            scale,
            era,
            nodes: Vec::new(),
            pods: Vec::new(),
            has_discount: period.month() % 2 == 0,
            billed_hours: period.hours(),
            growth,
            commitments: Vec::new(),
        };
        let (plan_start, plan_end) = Commitment::term(period, SAVINGS_PLAN_MONTH);
        let (reserved_start, reserved_end) = Commitment::term(period, RESERVATION_MONTH);
        // What the Savings Plan pools' nodes there when it was bought cost an hour at its rate.
        let mut plan_base = 0.0;
        // Node identities are stable across months (seeded without the period) so that a
        // fleet looks the same from one bill to the next.
        let pools = POOLS.iter().chain(if growth.is_some() { GROWTH_POOLS } else { &[] });
        for (pool_index, pool) in pools.enumerate() {
            let instance_type = catalog::instance_type(pool.instance_type)
                .unwrap_or_else(|| panic!("pool {} uses unknown type", pool.name));
            let count = pool_nodes(pool.nodes[scale.index(era)], fleet_percent);
            if pool.purchase == Purchase::Reserved && count > 0 {
                world.commitments.push(Commitment {
                    arn: format!(
                        "arn:aws:ec2:{}:{}:reserved-instances/{}",
                        CLUSTERS[pool.cluster].region,
                        CLUSTERS[pool.cluster].account,
                        Rng::derive(seed, &[22, pool_index as u64, reserved_start as u64]).uuid()
                    ),
                    purchase: Purchase::Reserved,
                    pool: Some(pool.name),
                    instance_type: Some(instance_type),
                    cluster: pool.cluster,
                    start: reserved_start,
                    end: reserved_end,
                    hourly: round4(instance_type.on_demand_hourly * RESERVED_RATE),
                    count,
                });
            }
            if pool.instance_plan && count > 0 {
                // Bought with the Compute plan, for every node of the pool.
                world.commitments.push(Commitment {
                    arn: format!(
                        "arn:aws:savingsplans::{}:savingsplan/{}",
                        PAYER_ACCOUNT.0,
                        Rng::derive(seed, &[24, pool_index as u64, plan_start as u64]).uuid()
                    ),
                    purchase: Purchase::SavingsPlan,
                    pool: Some(pool.name),
                    instance_type: Some(instance_type),
                    cluster: pool.cluster,
                    start: plan_start,
                    end: plan_end,
                    hourly: f64::from(count) * round4(instance_type.on_demand_hourly * INSTANCE_PLAN_RATE),
                    count: 1,
                });
            }
            for node_number in 0..count {
                // In the planning world a node is there from when it joins (on the hour).
                let phase = rng::unit(seed, &[9, pool_index as u64]);
                let bought =
                    growth.is_none_or(|g| g.joins_at(node_number, count, phase) <= plan_start.max(g.start()));
                if pool.purchase == Purchase::SavingsPlan && !pool.instance_plan && bought {
                    plan_base += round4(instance_type.on_demand_hourly * SAVINGS_PLAN_RATE);
                }
                let joins =
                    growth.map_or(0, |g| (g.joins_at(node_number, count, phase) - period.start()).max(0));
                if joins >= month_seconds {
                    continue;
                }
                let mut id_rng = Rng::derive(seed, &[1, pool_index as u64, u64::from(node_number)]);
                let cluster = &CLUSTERS[pool.cluster];
                let node_index = world.nodes.len();
                let mut node = Node {
                    cluster: pool.cluster,
                    pool: pool.name,
                    instance_type,
                    purchase: pool.purchase,
                    instance_id: format!("i-0{:016x}", id_rng.next_u64() >> 4),
                    node_name: format!(
                        "ip-10-{}-{}-{}.{}",
                        id_rng.int(0, 255),
                        id_rng.int(0, 255),
                        id_rng.int(1, 254),
                        if cluster.region == "us-east-1" {
                            "ec2.internal".to_string()
                        } else {
                            format!("{}.compute.internal", cluster.region)
                        }
                    ),
                    availability_zone: format!(
                        "{}{}",
                        cluster.region,
                        ['a', 'b', 'c'][(node_number % 3) as usize]
                    ),
                    gpu_uuids: (0..instance_type.gpus).map(|_| format!("GPU-{}", id_rng.uuid())).collect(),
                    gpu_replicas: pool.replicas,
                    running: (0..period.hours())
                        .map(|hour| instance_type.gpus == 0 && i64::from(hour) * 3600 >= joins)
                        .collect(),
                    pods: Vec::new(),
                };
                let mut schedule_rng =
                    Rng::derive(month_seed, &[2, pool_index as u64, u64::from(node_number)]);
                let slots = if instance_type.gpus > 0 {
                    instance_type.gpus * pool.replicas / pool.per_pod
                } else {
                    pool.per_pod
                };
                // The retraining pool runs acme's weekend fine-tunes; the others as any pool.
                let retrains = pool.name == "retrain-h100";
                for slot in 0..slots {
                    let place = (slot, slot + node_number * slots);
                    if retrains {
                        world.schedule_weekends(node_index, &mut node, pool, place, (joins, month_seconds));
                    } else {
                        world.schedule_slot(
                            node_index,
                            &mut node,
                            pool,
                            place,
                            &mut schedule_rng,
                            (joins, month_seconds),
                            interval,
                        );
                    }
                }
                world.nodes.push(node);
                world.add_daemonsets(node_index, month_seconds);
            }
        }
        if plan_base > 0.0 {
            world.commitments.push(Commitment {
                arn: format!(
                    "arn:aws:savingsplans::{}:savingsplan/{}",
                    PAYER_ACCOUNT.0,
                    Rng::derive(seed, &[23, plan_start as u64]).uuid()
                ),
                purchase: Purchase::SavingsPlan,
                pool: None,
                instance_type: None,
                cluster: 0,
                start: plan_start,
                end: plan_end,
                hourly: (plan_base * SAVINGS_PLAN_SIZE * 100.0).round() / 100.0,
                count: 1,
            });
        }
        world
    }

    /// The Compute Savings Plan in force, if the fleet has one.
    pub fn savings_plan(&self) -> Option<&Commitment> {
        self.commitments.iter().find(|c| c.purchase == Purchase::SavingsPlan && c.pool.is_none())
    }

    /// The EC2 Instance Savings Plan of `pool`, if it has one.
    pub fn instance_plan(&self, pool: &str) -> Option<&Commitment> {
        self.commitments.iter().find(|c| c.purchase == Purchase::SavingsPlan && c.pool == Some(pool))
    }

    /// The Savings Plan that covers a node of `pool`: its own EC2 Instance plan, else the
    /// Compute plan.
    pub fn plan_of(&self, pool: &str) -> Option<&Commitment> {
        self.instance_plan(pool).or_else(|| self.savings_plan())
    }

    /// The reservation of `pool`, if it has one.
    pub fn reservation(&self, pool: &str) -> Option<&Commitment> {
        self.commitments.iter().find(|c| c.purchase == Purchase::Reserved && c.pool == Some(pool))
    }

    /// Fills one slot of a node with a sequence of pods separated by idle gaps, from `from`
    /// (the node's joining, 0 but in the planning world) to the month's end; `ordinal` is the
    /// slot's place in its pool, which names StatefulSet pods.
    #[allow(clippy::too_many_arguments)]
    fn schedule_slot(
        &mut self,
        node_index: usize,
        node: &mut Node,
        pool: &PoolSpec,
        place: (u32, u32),
        rng: &mut Rng,
        (from, month_seconds): (i64, i64),
        interval: i64,
    ) {
        let gpu_node = node.instance_type.gpus > 0;
        // Start some slots part-way into the month so the fleet is not in lock-step.
        let mut cursor = from + rng.int(0, 36) * 3600 + rng.int(0, 3600 / interval - 1) * interval;
        if pool.replicas > 1 {
            cursor -= cursor % 3600;
        }
        let churns = pool.churns_at_large && self.scale == Scale::Large && !gpu_node;
        while cursor < month_seconds {
            let mut workload_index = pool.workloads[rng.int(0, pool.workloads.len() as i64 - 1) as usize];
            if let Some(growth) = self.growth {
                let onboards = growth.onboards_at() - self.period.start();
                if cursor < onboards && WORKLOADS[workload_index].client == Some(ONBOARDING_CLIENT) {
                    // Not a client yet: another workload of the pool, or nothing until it is.
                    match pool.workloads.iter().find(|&&w| WORKLOADS[w].client != Some(ONBOARDING_CLIENT)) {
                        Some(&other) => workload_index = other,
                        None => {
                            cursor = onboards;
                            continue;
                        }
                    }
                }
                if matches!(WORKLOADS[workload_index].class, Class::Training | Class::Notebook | Class::Batch)
                {
                    // People start these on weekdays: a weekend start waits for Monday 08:00.
                    let at = self.period.start() + cursor;
                    let wait = match weekday(at) {
                        6 => 2,
                        0 => 1,
                        _ => 0,
                    };
                    if wait > 0 {
                        cursor += wait * DAY - at.rem_euclid(DAY) + 8 * 3600 + at.rem_euclid(3600);
                        continue;
                    }
                }
            }
            let workload = &WORKLOADS[workload_index];
            let (run_seconds, gap_seconds) = if churns {
                // Short Jobs: 10 to 60 minutes each, 5 to 40 minutes apart.
                (rng.int(10, 60) * 60, rng.int(5, 40) * 60)
            } else if pool.replicas > 1 {
                // Pods sharing a GPU come and go on the hour, so that an hour's sharers are
                // plain in samples as coarse as the generator's (half an hour).
                let (run_hours, gap_hours) = tenancy_hours(workload.class, rng);
                (run_hours * 3600, gap_hours * 3600)
            } else {
                let (run_hours, gap_hours) = tenancy_hours(workload.class, rng);
                let end_offset = rng.int(0, 3600 / interval - 1) * interval;
                (run_hours * 3600 + end_offset, gap_hours * 3600 + rng.int(0, 3600 / interval - 1) * interval)
            };
            let end = (cursor + run_seconds).min(month_seconds);
            self.place_pod(node_index, node, pool, workload_index, place, (cursor, end));
            // In the planning world training queues fill up through the year: the gaps between
            // jobs shrink to a fifth by its end.
            let gap_seconds = match self.growth {
                Some(growth) if workload.class == Class::Training => {
                    let shrink = 1.0 - 0.8 * growth.elapsed(self.period.start() + end);
                    (gap_seconds as f64 * shrink) as i64 / interval * interval
                }
                _ => gap_seconds,
            };
            cursor = end + gap_seconds;
        }
    }

    /// Fills a slot of the planning world's retraining pool: acme's fine-tune from Saturday
    /// 00:00 to Monday 00:00 UTC, every weekend the node is there for ([`Growth`]).
    fn schedule_weekends(
        &mut self,
        node_index: usize,
        node: &mut Node,
        pool: &PoolSpec,
        place: (u32, u32),
        (from, month_seconds): (i64, i64),
    ) {
        let month_start = self.period.start();
        // The Saturday on or before the month's first day, then every week after it.
        let mut saturday = -((weekday(month_start) + 1) % 7) * DAY;
        while saturday < month_seconds {
            let (start, end) = (saturday.max(from), (saturday + 2 * DAY).min(month_seconds));
            if start < end {
                self.place_pod(node_index, node, pool, pool.workloads[0], place, (start, end));
            }
            saturday += 7 * DAY;
        }
    }

    /// Places one pod of `workload_index` in a slot of a node for `[start, end)` (seconds from
    /// the month's start), and marks the node running in its hours.
    fn place_pod(
        &mut self,
        node_index: usize,
        node: &mut Node,
        pool: &PoolSpec,
        workload_index: usize,
        (slot, ordinal): (u32, u32),
        (start, end): (i64, i64),
    ) {
        let instance_type = node.instance_type;
        let gpu_node = instance_type.gpus > 0;
        let share = if gpu_node {
            f64::from(pool.per_pod) / f64::from(instance_type.gpus * pool.replicas)
        } else {
            1.0 / f64::from(pool.per_pod)
        };
        let workload = &WORKLOADS[workload_index];
        let pod_index = self.pods.len();
        let mut name_rng = Rng::derive(self.seed, &[3, pod_index as u64]);
        let (controller, name) = match workload.kind {
            "ReplicaSet" => {
                let replica_set = format!("{}-{}", workload.name, name_rng.suffix(9));
                let name = format!("{replica_set}-{}", name_rng.suffix(5));
                (replica_set, name)
            }
            // A StatefulSet's ordinal is its place in the pool, the same in every cluster,
            // and kept by the next pod of the slot (the same name, a new UID).
            "StatefulSet" => (workload.name.to_string(), format!("{}-{}", workload.name, ordinal)),
            _ => {
                // A CronJob names each run by its scheduled time in minutes since the Unix
                // epoch (the slot apart, for runs of one minute): unique across months.
                let minute = (self.period.start() + start) / 60 + i64::from(slot);
                let job = format!("{}-{minute}", workload.name);
                let name = format!("{job}-{}", name_rng.suffix(5));
                (job, name)
            }
        };
        let cpu_factor = if matches!(workload.class, Class::Notebook) { 0.5 } else { 0.8 };
        self.pods.push(Pod {
            workload: workload_index,
            controller,
            name,
            uid: name_rng.uuid(),
            node: node_index,
            first_gpu: if gpu_node { slot / pool.replicas * pool.per_pod } else { 0 },
            gpus: if gpu_node { pool.per_pod } else { 0 },
            replica: slot % pool.replicas,
            vcpu_request: (f64::from(instance_type.vcpu) * share * cpu_factor).floor().max(1.0),
            memory_request_gib: (f64::from(instance_type.memory_gib) * share * 0.7).floor().max(1.0),
            start,
            end,
            daemonset: false,
            framebuffer_mib: framebuffer_for(workload.class, instance_type, &mut name_rng),
        });
        node.pods.push(pod_index);
        if gpu_node {
            for hour in start / 3600..=(end - 1) / 3600 {
                node.running[hour as usize] = true;
            }
        }
    }

    fn add_daemonsets(&mut self, node_index: usize, month_seconds: i64) {
        let gpu_node = self.nodes[node_index].instance_type.gpus > 0;
        let daemonsets = NODE_DAEMONSETS.iter().chain(if gpu_node { GPU_DAEMONSETS } else { &[] });
        for &(workload_index, vcpu, memory) in daemonsets {
            let pod_index = self.pods.len();
            let mut name_rng = Rng::derive(self.seed, &[4, node_index as u64, workload_index as u64]);
            let workload = &WORKLOADS[workload_index];
            self.pods.push(Pod {
                workload: workload_index,
                controller: workload.name.to_string(),
                name: format!("{}-{}", workload.name, name_rng.suffix(5)),
                uid: name_rng.uuid(),
                node: node_index,
                first_gpu: 0,
                gpus: 0,
                replica: 0,
                vcpu_request: vcpu,
                memory_request_gib: memory,
                start: 0,
                end: month_seconds,
                daemonset: true,
                framebuffer_mib: 0,
            });
            self.nodes[node_index].pods.push(pod_index);
        }
    }

    /// Hours in which the node ran, as month-relative hour numbers.
    pub fn node_hours(&self, node: usize) -> impl Iterator<Item = u32> + '_ {
        self.nodes[node]
            .running
            .iter()
            .enumerate()
            .filter(|(_, running)| **running)
            .map(|(hour, _)| hour as u32)
    }

    /// Cuts the month after its first `days` days, as AWS delivers a month in progress: nodes
    /// stop running and pods end at the cut, and nothing after it is billed or measured.
    pub fn through_day(&mut self, days: u32) {
        let cut = (days * 24).min(self.period.hours());
        self.billed_hours = cut;
        for node in &mut self.nodes {
            node.running.iter_mut().skip(cut as usize).for_each(|running| *running = false);
        }
        let seconds = i64::from(cut) * 3600;
        for pod in &mut self.pods {
            pod.start = pod.start.min(seconds);
            pod.end = pod.end.min(seconds);
        }
    }

    /// The fraction of `hour` a pod ran on its node (0 when it did not).
    pub fn pod_fraction(&self, pod: usize, hour: u32) -> f64 {
        let pod = &self.pods[pod];
        if pod.daemonset {
            return if self.nodes[pod.node].running[hour as usize] { 1.0 } else { 0.0 };
        }
        let hour_start = i64::from(hour) * 3600;
        let overlap = pod.end.min(hour_start + 3600) - pod.start.max(hour_start);
        overlap.max(0) as f64 / 3600.0
    }

    /// Utilization of one of a pod's GPUs (`gpu` counts from 0 within the pod) in an hour, a
    /// whole percent as a fraction (0.37), so that DCGM's percent and ratio metrics agree
    /// exactly. A multi-GPU training pod stalls in about 8 % of its hours: its first GPU keeps
    /// working while the others wait at 0–1 % (a straggler, a starved data loader), so the
    /// pod's mean (~11 %) hides seven idle GPUs of eight.
    ///
    /// On a time-sliced GPU every pod sees the device's utilization (NVML reports the device,
    /// not the replica): the sum of what its pods in the hour ask of it, at most 100 %.
    pub fn gpu_utilization_of(&self, pod: usize, gpu: u32, hour: u32) -> f64 {
        let p = &self.pods[pod];
        let node = &self.nodes[p.node];
        if node.gpu_replicas == 1 {
            return self.own_percent(pod, gpu, hour) / 100.0;
        }
        let device = p.first_gpu + gpu;
        let asked: f64 = node
            .pods
            .iter()
            .filter(|&&q| {
                let q_pod = &self.pods[q];
                q_pod.gpus > 0 && (q_pod.first_gpu..q_pod.first_gpu + q_pod.gpus).contains(&device)
            })
            .map(|&q| self.own_percent(q, device - self.pods[q].first_gpu, hour) * self.pod_fraction(q, hour))
            .sum();
        asked.floor().min(100.0) / 100.0
    }

    /// What a pod alone keeps one of its GPUs busy in an hour, a whole percent.
    fn own_percent(&self, pod: usize, gpu: u32, hour: u32) -> f64 {
        let workload = &WORKLOADS[self.pods[pod].workload];
        let noise = rng::unit(self.seed, &[5, pod as u64, u64::from(hour)]);
        if gpu > 0 && self.stalled(pod, hour) {
            return (2.0 * rng::unit(self.seed, &[6, pod as u64, u64::from(hour), u64::from(gpu)])).floor();
        }
        // The same request load keeps a big GPU less busy than a small one.
        let model = self.nodes[self.pods[pod].node].instance_type.gpu_model;
        let size = if matches!(model, "A100" | "H100") { 0.35 } else { 1.0 };
        let percent = match workload.class {
            // Before the demo's fixes, training jobs are input-bound: the data loader starves
            // the GPUs.
            Class::Training if self.era == Era::Before => 25.0 + 25.0 * noise,
            Class::Training => 80.0 + 18.0 * noise,
            Class::Inference => (12.0 + 60.0 * self.load(hour) + 6.0 * noise) * size,
            // Notebooks hold a GPU and mostly sit idle, with the odd busy hour.
            Class::Notebook if noise < 0.12 => 25.0 + 300.0 * noise,
            Class::Notebook => 4.0 * noise / 0.88,
            Class::Batch => 45.0 + 45.0 * noise,
            Class::Service | Class::Platform => 0.0,
        };
        percent.floor().clamp(0.0, 100.0)
    }

    /// A multi-GPU training pod waiting on one GPU in this hour.
    fn stalled(&self, pod: usize, hour: u32) -> bool {
        let p = &self.pods[pod];
        p.gpus > 1
            && WORKLOADS[p.workload].class == Class::Training
            && rng::unit(self.seed, &[7, pod as u64, u64::from(hour)]) < 0.08
    }

    /// The mean utilization of a pod's GPUs in an hour (0 for a pod without GPUs).
    pub fn gpu_utilization(&self, pod: usize, hour: u32) -> f64 {
        let gpus = self.pods[pod].gpus.max(1);
        (0..gpus).map(|gpu| self.gpu_utilization_of(pod, gpu, hour)).sum::<f64>() / f64::from(gpus)
    }

    /// The share of a pod's GPUs whose utilization in the hour is below `threshold`: idle is
    /// judged per GPU, never on the pod's mean.
    pub fn idle_gpu_share(&self, pod: usize, hour: u32, threshold: f64) -> f64 {
        let gpus = self.pods[pod].gpus.max(1);
        let idle = (0..gpus).filter(|&gpu| self.gpu_utilization_of(pod, gpu, hour) < threshold).count();
        idle as f64 / f64::from(gpus)
    }

    /// The diurnal request curve, 0..1, peaking mid-afternoon UTC, lower at weekends.
    pub fn load(&self, hour: u32) -> f64 {
        let epoch_hour = self.period.start() / 3600 + i64::from(hour);
        let hour_of_day = (epoch_hour % 24) as f64;
        let day_of_week = (epoch_hour / 24 + 4) % 7; // 1970-01-01 was a Thursday (4)
        let daily = (std::f64::consts::PI * (hour_of_day - 6.0) / 18.0).sin().max(0.0);
        let weekend = if day_of_week == 0 || day_of_week == 6 { 0.55 } else { 1.0 };
        (0.15 + 0.85 * daily) * weekend
    }

    /// (vCPU, GiB) the pod actually used in the hour, in resource-hours. Some hours burst
    /// above the request so that split usage = actual, as AWS computes it.
    pub fn actual_usage(&self, pod: usize, hour: u32, fraction: f64) -> (f64, f64) {
        let (cores, gib) = self.usage_while_running(pod, hour);
        (round6(cores * fraction), round6(gib * fraction))
    }

    /// The CPU cores a pod uses and its memory working set in GiB while it runs in `hour`
    /// (cAdvisor's `container_cpu_usage_seconds_total` rate and
    /// `container_memory_working_set_bytes`).
    pub fn usage_while_running(&self, pod: usize, hour: u32) -> (f64, f64) {
        let p = &self.pods[pod];
        let cpu = rng::unit(self.seed, &[6, pod as u64, u64::from(hour)]);
        let memory = rng::unit(self.seed, &[7, pod as u64, u64::from(hour)]);
        let cpu_factor = 0.2 + 1.15 * cpu;
        let memory_factor = 0.45 + 0.7 * memory;
        (p.vcpu_request * cpu_factor, p.memory_request_gib * memory_factor)
    }

    /// Framebuffer in use by the pod's GPUs in the hour, MiB.
    pub fn framebuffer_used(&self, pod: usize, hour: u32) -> u32 {
        let p = &self.pods[pod];
        let wobble = rng::unit(self.seed, &[8, pod as u64, u64::from(hour)]);
        (f64::from(p.framebuffer_mib) * (0.97 + 0.03 * wobble)) as u32
    }

    /// Successful requests a serving pod handled in the hour's share `fraction`.
    pub fn requests(&self, pod: usize, hour: u32, fraction: f64) -> u64 {
        let workload = &WORKLOADS[self.pods[pod].workload];
        if workload.server == Server::None {
            return 0;
        }
        let noise = rng::unit(self.seed, &[9, pod as u64, u64::from(hour)]);
        (workload.peak_requests_per_hour as f64 * self.load(hour) * (0.9 + 0.2 * noise) * fraction) as u64
    }
}

impl World {
    /// Metric sample times (seconds from the month start) at which a serving pod's counters
    /// step for `hour`: every sample after the pod's first with `hour < t <= hour + 1h`.
    /// The increase between consecutive samples belongs to the hour its interval lies in.
    pub fn increment_samples(&self, pod: usize, hour: u32) -> Vec<i64> {
        let p = &self.pods[pod];
        let interval = self.scale.sample_interval();
        let after = (i64::from(hour) * 3600).max(p.start);
        let last = (i64::from(hour + 1) * 3600).min(p.end - 1);
        let mut t = (after / interval + 1) * interval;
        let mut samples = Vec::new();
        while t <= last {
            samples.push(t);
            t += interval;
        }
        samples
    }

    /// (successful requests, prompt tokens, generation tokens) a pod's counters gained in
    /// `hour`; zero for pods that serve nothing or have no counter step in the hour.
    pub fn served(&self, pod: usize, hour: u32) -> (u64, u64, u64) {
        let workload = &WORKLOADS[self.pods[pod].workload];
        if workload.server == Server::None || self.increment_samples(pod, hour).is_empty() {
            return (0, 0, 0);
        }
        let requests = self.requests(pod, hour, self.pod_fraction(pod, hour));
        if workload.server == Server::Triton {
            return (requests, 0, 0);
        }
        let prompt_per_request = 300 + workload.peak_requests_per_hour % 1700;
        let generation_per_request = 120 + workload.peak_requests_per_hour % 200;
        (requests, requests * prompt_per_request, requests * generation_per_request)
    }
}

fn framebuffer_for(class: Class, instance_type: &InstanceType, rng: &mut Rng) -> u32 {
    let total = f64::from(instance_type.gpu_memory_mib);
    let share = match class {
        Class::Training => rng.range(0.78, 0.95),
        Class::Inference => rng.range(0.30, 0.90),
        Class::Notebook => rng.range(0.05, 0.35),
        Class::Batch => rng.range(0.40, 0.70),
        Class::Service | Class::Platform => 0.0,
    };
    (total * share) as u32
}

/// Rounds to six decimals, as CUR usage amounts print.
pub fn round6(value: f64) -> f64 {
    (value * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world() -> World {
        World::build(42, "2026-10".parse().unwrap(), Scale::Demo)
    }

    /// The planning world's year: November 2025 to October 2026.
    fn growth() -> Growth {
        Growth { first: "2025-11".parse().unwrap(), months: 12 }
    }

    fn grown(period: &str) -> World {
        World::build_sized(42, period.parse().unwrap(), Scale::Small, None, 100, Some(growth()))
    }

    #[test]
    fn the_planning_worlds_nodes_join_through_the_year() {
        let g = growth();
        // 365 days from 2025-11-01. Pools of one or two nodes have them all year; of four at
        // phase 0.5, the second joins after 365 x 0.5/3 = 60.83 days (2025-12-31 20:00 UTC on
        // the hour), the fourth after 365 x 2.5/3 = 304.17 days (2026-09-01 04:00).
        assert_eq!(g.joins_at(0, 4, 0.5), g.first.start());
        assert_eq!(g.joins_at(1, 2, 0.5), g.first.start());
        assert_eq!(g.joins_at(1, 4, 0.5), g.first.start() + 60 * DAY + 20 * 3600);
        assert_eq!(g.joins_at(3, 4, 0.5), g.first.start() + 304 * DAY + 4 * 3600);
        let pool_nodes = |w: &World, pool: &str| w.nodes.iter().filter(|n| n.pool == pool).count();
        let (first, last) = (grown("2025-11"), grown("2026-10"));
        assert_eq!([pool_nodes(&first, "train-h100"), pool_nodes(&last, "train-h100")], [2, 2]);
        assert_eq!(pool_nodes(&last, "notebooks"), 4);
        assert!(pool_nodes(&first, "notebooks") < 4);
        // A node that joins in a month runs nothing before it joins.
        let phase = rng::unit(42, &[9, POOLS.iter().position(|p| p.name == "notebooks").unwrap() as u64]);
        for period in ["2025-11", "2026-01", "2026-04", "2026-07", "2026-10"] {
            let world = grown(period);
            for (n, _) in world.nodes.iter().enumerate().filter(|(_, node)| node.pool == "notebooks") {
                let number = world.nodes[..n].iter().filter(|m| m.pool == "notebooks").count() as u32;
                let joins = g.joins_at(number, 4, phase) - world.period.start();
                assert!(world.node_hours(n).all(|h| i64::from(h) * 3600 >= joins), "{period} node {number}");
            }
        }
    }

    #[test]
    fn the_savings_plan_and_the_reservations_are_bought_for_a_year_on_their_anniversaries() {
        let start = |p: &str| p.parse::<Period>().unwrap().start();
        let october = World::build(42, "2026-10".parse().unwrap(), Scale::Small);
        let plan = october.savings_plan().unwrap();
        // Two p5.48xlarge at 71 % of $98.32 ($69.8072) and five m5.4xlarge at 71 % of $0.768
        // ($0.5453 to four places): 70 % of $142.3409 an hour is $99.64.
        assert_eq!(plan.hourly, 99.64);
        assert_eq!((plan.start, plan.end), (start("2025-12"), start("2026-12")));
        // Three g5.12xlarge reserved at 62 % of $5.672 ($3.5166), from September.
        let reserved = october.reservation("infer-a10g").unwrap();
        assert_eq!((reserved.count, reserved.hourly), (3, 3.5166));
        assert_eq!((reserved.start, reserved.end), (start("2026-09"), start("2027-09")));
        // The same term is the same plan in every month of it; the month before it, the term
        // before it is another.
        let december = World::build(42, "2025-12".parse().unwrap(), Scale::Small);
        let november = World::build(42, "2025-11".parse().unwrap(), Scale::Small);
        assert_eq!(december.savings_plan().unwrap().arn, plan.arn);
        assert_ne!(november.savings_plan().unwrap().arn, plan.arn);
        assert_eq!(november.savings_plan().unwrap().start, start("2024-12"));
        // In the planning world the plan bought on 2025-12-01 is sized on the nodes there then:
        // both H100 and the general pool's first: 70 % of $140.1597 is $98.11.
        let july = grown("2026-07");
        assert_eq!(july.savings_plan().unwrap().hourly, 98.11);
        // Its west-serve-l40s pool has an EC2 Instance plan of its own, not counted in the
        // Compute plan: one g6e.12xlarge at 66 % of $10.4926, $6.9251 an hour.
        let own = july.instance_plan("west-serve-l40s").unwrap();
        assert_eq!((own.hourly, own.instance_type.map(|t| t.family)), (6.9251, Some("g6e")));
        assert_eq!((own.start, own.end), (start("2025-12"), start("2026-12")));
        assert_eq!(july.plan_of("west-serve-l40s").unwrap().arn, own.arn);
        assert_eq!(july.plan_of("train-h100").unwrap().arn, july.savings_plan().unwrap().arn);
        assert!(october.instance_plan("west-serve-l40s").is_none());
    }

    #[test]
    fn in_the_planning_world_people_start_work_on_weekdays_and_umbrella_on_its_day() {
        let world = grown("2026-05");
        let onboards = growth().onboards_at();
        assert_eq!(onboards, "2026-05".parse::<Period>().unwrap().start() + 14 * DAY);
        let mut umbrella = 0;
        for pod in world.pods.iter().filter(|p| !p.daemonset) {
            let workload = &WORKLOADS[pod.workload];
            let at = world.period.start() + pod.start;
            if matches!(workload.class, Class::Training | Class::Notebook | Class::Batch)
                && world.nodes[pod.node].pool != "retrain-h100"
            {
                assert!(![0, 6].contains(&weekday(at)), "{} starts on a weekend", pod.name);
            }
            if workload.client == Some(ONBOARDING_CLIENT) {
                umbrella += 1;
                assert!(at >= onboards, "{} before umbrella onboarded", pod.name);
            }
        }
        assert!(umbrella > 0);
        // A year before, umbrella is no client yet.
        assert!(
            grown("2025-12").pods.iter().all(|p| WORKLOADS[p.workload].client != Some(ONBOARDING_CLIENT))
        );
    }

    #[test]
    fn acme_retrains_every_weekend_of_the_planning_world() {
        // May 2026 begins on a Friday: the weekends are May 2-3, 9-10, 16-17, 23-24, 30-31.
        let world = grown("2026-05");
        let first_node = world.nodes.iter().position(|n| n.pool == "retrain-h100").unwrap();
        let weekends: Vec<(i64, i64)> = world.nodes[first_node]
            .pods
            .iter()
            .filter(|&&p| !world.pods[p].daemonset)
            .map(|&p| (world.pods[p].start / DAY, world.pods[p].end / DAY))
            .collect();
        assert_eq!(weekends, [(1, 3), (8, 10), (15, 17), (22, 24), (29, 31)]);
        // Two GPU-days a weekend, eight GPUs each: 5 weekends x 48 hours the node ran.
        assert_eq!(world.node_hours(first_node).count(), 5 * 48);
        let plain = World::build(42, "2026-05".parse().unwrap(), Scale::Small);
        assert!(plain.nodes.iter().all(|n| n.pool != "retrain-h100"));
    }

    #[test]
    fn a_sized_fleet_scales_every_pool_and_keeps_each() {
        // Large's pools: 130 CPU Spot nodes at 10 % are 13; 14 are 1.4, so 1; 4 are 0.4, kept
        // at 1; 3 × 14 = 42.
        assert_eq!(pool_nodes(130, 10), 13);
        assert_eq!(pool_nodes(14, 10), 1);
        assert_eq!(pool_nodes(4, 10), 1);
        assert_eq!(pool_nodes(0, 300), 0);
        assert_eq!(pool_nodes(14, 300), 42);
        // Small's 38 nodes, three times over; the first node of each pool keeps its identity.
        let period = "2026-10".parse().unwrap();
        let small = World::build(42, period, Scale::Small);
        let tripled = World::build_sized(42, period, Scale::Small, None, 300, None);
        assert_eq!(small.nodes.len(), 38);
        assert_eq!(tripled.nodes.len(), 114);
        assert!(tripled.nodes.iter().any(|n| n.instance_id == small.nodes[0].instance_id));
    }

    #[test]
    fn a_gpu_holds_no_more_pods_than_its_replicas() {
        let world = world();
        for (node_index, node) in world.nodes.iter().enumerate() {
            for hour in world.node_hours(node_index) {
                let mut per_gpu = vec![0.0; node.instance_type.gpus as usize];
                let replicas = f64::from(node.gpu_replicas);
                for &pod in &node.pods {
                    let fraction = world.pod_fraction(pod, hour);
                    let p = &world.pods[pod];
                    for gpu in p.first_gpu..p.first_gpu + p.gpus {
                        per_gpu[gpu as usize] += fraction;
                    }
                }
                assert!(
                    per_gpu.iter().all(|&used| used <= replicas + 1e-12),
                    "node {node_index} hour {hour}"
                );
            }
        }
    }

    #[test]
    fn gpu_nodes_run_only_while_a_gpu_pod_does() {
        let world = world();
        for (node_index, node) in world.nodes.iter().enumerate().filter(|(_, n)| n.instance_type.gpus > 0) {
            for hour in world.node_hours(node_index) {
                let gpu_pods = node
                    .pods
                    .iter()
                    .filter(|&&p| world.pods[p].gpus > 0 && world.pod_fraction(p, hour) > 0.0);
                assert!(gpu_pods.count() > 0, "node {node_index} runs idle in hour {hour}");
            }
        }
    }

    #[test]
    fn utilization_is_whole_percent_and_in_range() {
        let world = world();
        for pod in 0..world.pods.len().min(50) {
            for gpu in 0..world.pods[pod].gpus {
                let u = world.gpu_utilization_of(pod, gpu, 10);
                assert!((0.0..=1.0).contains(&u));
                assert_eq!((u * 100.0).round() / 100.0, u);
            }
        }
    }

    #[test]
    fn the_demo_fixes_its_fleet_in_the_month_it_is_told() {
        let (period, fixes) = ("2026-07".parse().unwrap(), Some("2026-08".parse().unwrap()));
        let before = World::build_story(42, period, Scale::Demo, fixes);
        let after = World::build_story(42, "2026-08".parse().unwrap(), Scale::Demo, fixes);
        let gpu_pools = |w: &World| -> Vec<(&str, Purchase)> {
            let mut pools: Vec<(&str, Purchase)> = w
                .nodes
                .iter()
                .filter(|n| n.instance_type.gpus > 0)
                .map(|n| (n.instance_type.gpu_model, n.purchase))
                .collect();
            pools.dedup();
            pools
        };
        assert_eq!((before.era, after.era), (Era::Before, Era::After));
        // Before: A100s On-Demand for training, inference and notebooks; no Spot A100.
        assert!(gpu_pools(&before).contains(&("A100", Purchase::OnDemand)));
        assert!(!gpu_pools(&before).contains(&("A100", Purchase::Spot)));
        // After: training on Spot A100s, inference on L4s, no On-Demand A100 left.
        assert!(gpu_pools(&after).contains(&("A100", Purchase::Spot)));
        assert!(!gpu_pools(&after).contains(&("A100", Purchase::OnDemand)));
        assert!(after.nodes.iter().any(|n| n.pool == "demo-infer-l4"));
    }

    #[test]
    fn time_sliced_l4s_are_shared_on_the_hour_and_report_the_device() {
        let world = World::build(42, "2026-10".parse().unwrap(), Scale::Small);
        let shared: Vec<usize> =
            (0..world.nodes.len()).filter(|&n| world.nodes[n].gpu_replicas == 4).collect();
        assert_eq!(shared.len(), 1, "one time-sliced node at small scale");
        let node = &world.nodes[shared[0]];
        let holders: Vec<usize> = node.pods.iter().copied().filter(|&p| world.pods[p].gpus == 1).collect();
        // Every pod comes and goes on the hour and holds GPU 0 under one of four replicas.
        for &p in &holders {
            let pod = &world.pods[p];
            assert_eq!((pod.start % 3600, pod.end % 3600, pod.first_gpu), (0, 0, 0), "{}", pod.name);
            assert!(pod.replica < 4);
        }
        // Some hour has three or more pods on the GPU; each sees the device's utilization,
        // the sum of what they ask of it (at most 100 %).
        let (hour, sharers) = world
            .node_hours(shared[0])
            .map(|hour| {
                let on: Vec<usize> =
                    holders.iter().copied().filter(|&p| world.pod_fraction(p, hour) > 0.0).collect();
                (hour, on)
            })
            .max_by_key(|(_, on)| on.len())
            .unwrap();
        assert!(sharers.len() >= 3, "{} pods at most", sharers.len());
        let asked: f64 = sharers.iter().map(|&p| world.own_percent(p, 0, hour)).sum();
        for &p in &sharers {
            assert_eq!(world.gpu_utilization_of(p, 0, hour), asked.min(100.0) / 100.0);
        }
    }

    #[test]
    fn a_stalled_training_pod_idles_seven_gpus_behind_a_mean_above_the_threshold() {
        let world = world();
        let stalled = (0..world.pods.len())
            .flat_map(|pod| (0..world.period.hours()).map(move |hour| (pod, hour)))
            .find(|&(pod, hour)| world.pods[pod].gpus == 8 && world.stalled(pod, hour))
            .expect("the demo world has a stalled 8-GPU training hour");
        let (pod, hour) = stalled;
        assert!(world.gpu_utilization_of(pod, 0, hour) >= 0.80);
        assert!((1..8).all(|gpu| world.gpu_utilization_of(pod, gpu, hour) <= 0.01));
        assert!(world.gpu_utilization(pod, hour) >= 0.10, "the pod's mean is not idle");
        assert_eq!(world.idle_gpu_share(pod, hour, 0.10), 7.0 / 8.0);
    }
}
