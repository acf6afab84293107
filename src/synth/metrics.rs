//! The month's GPU and inference metrics as an OpenMetrics text file with timestamps, in the
//! shape dcgm-exporter (GPU Operator labels), vLLM and Triton expose them, ready for
//! `promtool tsdb create-blocks-from openmetrics` (prometheus reference §3, §7).
//!
//! Within an hour a GPU's values are constant, so the hourly mean of the samples in
//! `[h, h+1)` is exactly the model's utilization.

use std::collections::HashMap;
use std::io::{self, Write};

use super::fleet::{CLUSTERS, Class, Server, WORKLOADS, World};

struct Family {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
}

const GR_ENGINE_ACTIVE: Family = Family {
    name: "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    help: "Ratio of time the graphics engine is active.",
    kind: "gauge",
};
const GPU_UTIL: Family =
    Family { name: "DCGM_FI_DEV_GPU_UTIL", help: "GPU utilization (in %).", kind: "gauge" };
const FB_USED: Family =
    Family { name: "DCGM_FI_DEV_FB_USED", help: "Framebuffer memory used (in MiB).", kind: "gauge" };

pub(super) fn container_for(class: Class, server: Server) -> &'static str {
    match (class, server) {
        (_, Server::Vllm) => "vllm",
        (_, Server::Triton) => "triton",
        (Class::Training, _) => "trainer",
        (Class::Notebook, _) => "jupyter",
        _ => "worker",
    }
}

/// Writes every family for the month; returns the number of sample lines.
pub fn write_month(world: &World, out: &mut impl Write) -> io::Result<u64> {
    let mut lines = 0;
    for family in [GR_ENGINE_ACTIVE, GPU_UTIL, FB_USED] {
        writeln!(out, "# TYPE {} {}", family.name, family.kind)?;
        writeln!(out, "# HELP {} {}", family.name, family.help)?;
        for node_index in 0..world.nodes.len() {
            for gpu in 0..world.nodes[node_index].instance_type.gpus {
                lines += write_gpu_series(world, node_index, gpu, family.name, out)?;
            }
        }
    }
    lines += write_counters(world, out)?;
    writeln!(out, "# EOF")?;
    Ok(lines)
}

/// All series of one GPU for one family: one per pod that held it, one without pod labels
/// for the samples when nobody did.
fn write_gpu_series(
    world: &World,
    node_index: usize,
    gpu: u32,
    family: &str,
    out: &mut impl Write,
) -> io::Result<u64> {
    let node = &world.nodes[node_index];
    let interval = world.scale.sample_interval();
    let month_start = world.period.start();
    let holders: Vec<usize> = node
        .pods
        .iter()
        .copied()
        .filter(|&p| (world.pods[p].first_gpu..world.pods[p].first_gpu + world.pods[p].gpus).contains(&gpu))
        .collect();
    // Series in order of first appearance; each keeps its samples in time order.
    let mut order: Vec<Option<usize>> = Vec::new();
    let mut samples: HashMap<Option<usize>, Vec<(i64, f64)>> = HashMap::new();
    // A time-sliced GPU is exported in virtual-GPU mode (`--kubernetes-virtual-gpus`): a copy
    // of each series per pod holding a replica, labelled `vgpu`, every copy with the device's
    // values (prometheus reference §1.5).
    let shared = node.gpu_replicas > 1;
    for hour in world.node_hours(node_index) {
        let mut t = i64::from(hour) * 3600;
        while t < i64::from(hour + 1) * 3600 {
            let on: Vec<usize> = holders
                .iter()
                .copied()
                .filter(|&p| world.pods[p].start <= t && t < world.pods[p].end)
                .take(if shared { usize::MAX } else { 1 })
                .collect();
            let framebuffer = on
                .iter()
                .map(|&p| world.framebuffer_used(p, hour))
                .sum::<u32>()
                .min(node.instance_type.gpu_memory_mib);
            let keys: Vec<Option<usize>> =
                if on.is_empty() { vec![None] } else { on.iter().map(|&p| Some(p)).collect() };
            for holder in keys {
                // Two pods of one StatefulSet slot can share a name; key series by labels.
                let key = holder.map(|p| series_owner(world, &holders, p));
                let value = match (family, holder) {
                    (_, None) => 0.0,
                    ("DCGM_FI_DEV_FB_USED", Some(_)) => f64::from(framebuffer),
                    ("DCGM_FI_DEV_GPU_UTIL", Some(p)) => {
                        (world.gpu_utilization_of(p, gpu - world.pods[p].first_gpu, hour) * 100.0).round()
                    }
                    (_, Some(p)) => world.gpu_utilization_of(p, gpu - world.pods[p].first_gpu, hour),
                };
                if !samples.contains_key(&key) {
                    order.push(key);
                }
                samples.entry(key).or_default().push((month_start + t, value));
            }
            t += interval;
        }
    }
    let itype = node.instance_type;
    let base_labels = format!(
        "gpu=\"{gpu}\",UUID=\"{}\",pci_bus_id=\"00000000:{:02X}:00.0\",device=\"nvidia{gpu}\",modelName=\"{}\",Hostname=\"{}\"",
        node.gpu_uuids[gpu as usize],
        0x10 + gpu * 0x10,
        itype.gpu_model_name,
        node.node_name
    );
    // The central Prometheus (or its remote-write target) labels every series with its cluster.
    let exporter = format!(
        "job=\"dcgm-exporter\",instance=\"{}:9400\",cluster=\"{}\"",
        node_ip(&node.node_name),
        CLUSTERS[node.cluster].name
    );
    let mut lines = 0;
    for key in order {
        let labels = match key {
            Some(p) => {
                let pod = &world.pods[p];
                let workload = &WORKLOADS[pod.workload];
                let vgpu = if shared { format!(",vgpu=\"{}\"", pod.replica) } else { String::new() };
                format!(
                    "{base_labels},container=\"{}\",namespace=\"{}\",pod=\"{}\"{vgpu},{exporter}",
                    container_for(workload.class, workload.server),
                    workload.namespace,
                    pod.name
                )
            }
            None => format!("{base_labels},{exporter}"),
        };
        for (t, value) in &samples[&key] {
            if family == "DCGM_FI_PROF_GR_ENGINE_ACTIVE" {
                writeln!(out, "{family}{{{labels}}} {value:.6} {t}")?;
            } else {
                writeln!(out, "{family}{{{labels}}} {value} {t}")?;
            }
            lines += 1;
        }
    }
    Ok(lines)
}

/// The first pod on this GPU with the same namespace and name: one series per label set.
fn series_owner(world: &World, holders: &[usize], pod: usize) -> usize {
    let target = &world.pods[pod];
    holders
        .iter()
        .copied()
        .find(|&p| world.pods[p].name == target.name && world.pods[p].workload == target.workload)
        .unwrap_or(pod)
}

pub(super) fn node_ip(node_name: &str) -> String {
    node_name.trim_start_matches("ip-").split('.').next().unwrap_or("").replace('-', ".")
}

/// vLLM and Triton counters for every serving pod, monotonic from 0 at pod start.
fn write_counters(world: &World, out: &mut impl Write) -> io::Result<u64> {
    let serving: Vec<usize> =
        (0..world.pods.len()).filter(|&p| WORKLOADS[world.pods[p].workload].server != Server::None).collect();
    let families: [(&str, &str, Server, usize); 5] = [
        ("vllm:request_success", "Count of successfully processed requests.", Server::Vllm, 0),
        ("vllm:prompt_tokens", "Number of prefill tokens processed.", Server::Vllm, 1),
        ("vllm:generation_tokens", "Number of generation tokens processed.", Server::Vllm, 2),
        (
            "nv_inference_request_success",
            "Number of successful inference requests, all batch sizes",
            Server::Triton,
            0,
        ),
        (
            "nv_inference_count",
            "Number of inferences performed (does not include cached requests)",
            Server::Triton,
            0,
        ),
    ];
    let interval = world.scale.sample_interval();
    let month_start = world.period.start();
    let mut lines = 0;
    for (family, help, server, measure) in families {
        writeln!(out, "# TYPE {family} counter")?;
        writeln!(out, "# HELP {family} {help}")?;
        let sample_name = if server == Server::Vllm { format!("{family}_total") } else { family.to_string() };
        for &p in serving.iter().filter(|&&p| WORKLOADS[world.pods[p].workload].server == server) {
            let pod = &world.pods[p];
            let workload = &WORKLOADS[pod.workload];
            let node = &world.nodes[pod.node];
            let model = workload.model.unwrap_or("");
            let target = format!(
                "namespace=\"{}\",pod=\"{}\",container=\"{}\",job=\"{}\",instance=\"{}:8000\",cluster=\"{}\"",
                workload.namespace,
                pod.name,
                container_for(workload.class, server),
                workload.name,
                node_ip(&node.node_name),
                CLUSTERS[node.cluster].name
            );
            let labels = match server {
                Server::Vllm if measure == 0 => {
                    format!("model_name=\"{model}\",engine=\"0\",finished_reason=\"stop\",{target}")
                }
                Server::Vllm => format!("model_name=\"{model}\",engine=\"0\",{target}"),
                _ => format!("model=\"{model}\",version=\"1\",{target}"),
            };
            // Increments per sample time: each hour's count spread over its counter steps.
            let mut steps: HashMap<i64, u64> = HashMap::new();
            let first_hour = (pod.start / 3600) as u32;
            let last_hour = ((pod.end - 1) / 3600) as u32;
            for hour in first_hour..=last_hour {
                let samples = world.increment_samples(p, hour);
                if samples.is_empty() {
                    continue;
                }
                let served = world.served(p, hour);
                let count = [served.0, served.1, served.2][measure];
                let share = count / samples.len() as u64;
                for (i, &t) in samples.iter().enumerate() {
                    let extra = if i + 1 == samples.len() { count - share * samples.len() as u64 } else { 0 };
                    steps.insert(t, share + extra);
                }
            }
            let mut total = 0u64;
            let mut t = pod.start;
            while t < pod.end {
                total += steps.get(&t).copied().unwrap_or(0);
                writeln!(out, "{sample_name}{{{labels}}} {total} {}", month_start + t)?;
                lines += 1;
                t += interval;
            }
        }
    }
    Ok(lines)
}
