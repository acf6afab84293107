//! The month's Kubernetes series as a Prometheus scraping kube-state-metrics and the kubelet's
//! cAdvisor would hold them, in OpenMetrics text with timestamps: what each node is (its
//! instance, capacity and labels), which pods ran on it and what they requested, and what
//! their containers used. They are the inputs of the split AWS computes for the CUR's split
//! cost allocation rows, so a split from them can be checked against AWS's (issue #41).
//!
//! Samples fall on the metrics' grid (every [`super::fleet::Scale::sample_interval`] from the
//! month's start), as Prometheus scrapes: a pod is seen at the samples it is running at. A
//! container's CPU counter at a sample is the CPU seconds it used since it started (its cores
//! in each hour times the seconds it ran in it); its working set is constant within an hour.
//! cAdvisor also exports each pod's cgroup (`container=""`, no `image`) and its pause
//! container; the kube-prometheus-stack's default relabelling drops both (series without an
//! image), and so does this file. Opt-in (`generate --kube-state-metrics`): text with a
//! timestamp per sample is large (a demo-scale month is a few hundred MB).

use std::io::{self, Write};

use super::fleet::{CLUSTERS, Purchase, WORKLOADS, World};

const GIB: f64 = 1_073_741_824.0;

/// The target labels of kube-state-metrics' series in a cluster's Prometheus.
fn state_target(cluster: usize) -> String {
    format!("job=\"kube-state-metrics\",instance=\"10.0.0.10:8080\",cluster=\"{}\"", CLUSTERS[cluster].name)
}

/// The target labels of a node's kubelet (cAdvisor) series.
fn kubelet_target(world: &World, node: usize) -> String {
    let node = &world.nodes[node];
    format!(
        "job=\"kubelet\",metrics_path=\"/metrics/cadvisor\",instance=\"{}:10250\",node=\"{}\",cluster=\"{}\"",
        super::metrics::node_ip(&node.node_name),
        node.node_name,
        CLUSTERS[node.cluster].name
    )
}

/// The sample times (seconds from the month's start) of the grid in `[from, to)`.
fn grid(interval: i64, from: i64, to: i64) -> impl Iterator<Item = i64> {
    let first = (from + interval - 1).div_euclid(interval) * interval;
    (0..).map(move |i| first + i * interval).take_while(move |&t| t < to)
}

/// Whether a pod runs at `t` (seconds from the month's start).
fn pod_runs(world: &World, pod: usize, t: i64) -> bool {
    let p = &world.pods[pod];
    if p.daemonset {
        let hour = (t / 3600) as usize;
        world.nodes[p.node].running.get(hour).copied().unwrap_or(false)
    } else {
        p.start <= t && t < p.end
    }
}

/// How often the Prometheus this file stands for scrapes, seconds.
const SCRAPE: i64 = 30;

/// The times a pod is seen at: the grid while it runs, and its first and last scrapes (a
/// pod shorter than the grid's interval is still seen, as a 30 s scrape sees it). Between
/// them a 30 s scrape repeats what the grid says (gauges constant within an hour, the CPU
/// counter linear in it), so the split takes the same inputs from this file as from every
/// scrape.
fn pod_samples(world: &World, pod: usize) -> Vec<i64> {
    let p = &world.pods[pod];
    let mut times: Vec<i64> =
        grid(world.scale.sample_interval(), p.start, p.end).filter(|&t| pod_runs(world, pod, t)).collect();
    if !p.daemonset && p.end > p.start {
        let first = (p.start + SCRAPE - 1).div_euclid(SCRAPE) * SCRAPE;
        let last = (p.end - 1).div_euclid(SCRAPE) * SCRAPE;
        times.extend([first, last].into_iter().filter(|&t| p.start <= t && t < p.end));
        times.sort_unstable();
        times.dedup();
    }
    times
}

/// The times a node is seen at.
fn node_samples(world: &World, node: usize) -> Vec<i64> {
    let month = i64::from(world.period.hours()) * 3600;
    grid(world.scale.sample_interval(), 0, month)
        .filter(|&t| world.nodes[node].running.get((t / 3600) as usize).copied().unwrap_or(false))
        .collect()
}

/// The seconds a pod ran in `hour` before `t` (all of them when `t` is past the hour).
fn seconds_run(world: &World, pod: usize, hour: u32, t: i64) -> f64 {
    let start = i64::from(hour) * 3600;
    let p = &world.pods[pod];
    let (from, to) = if p.daemonset {
        let running = world.nodes[p.node].running.get(hour as usize).copied().unwrap_or(false);
        if !running {
            return 0.0;
        }
        (start, start + 3600)
    } else {
        (p.start.max(start), p.end.min(start + 3600))
    };
    (to.min(t) - from).max(0) as f64
}

/// A container's CPU counter at each of its sample times: the CPU seconds it used from its
/// start (its cores in each hour times the seconds it ran in it), to the microsecond.
fn cpu_counter(world: &World, pod: usize, times: &[i64]) -> Vec<f64> {
    let p = &world.pods[pod];
    // The seconds of the hours before `summed`, all of them.
    let (mut done, mut summed) = (0.0, if p.daemonset { 0 } else { (p.start / 3600) as u32 });
    let cores = |hour: u32| world.usage_while_running(pod, hour).0;
    times
        .iter()
        .map(|&t| {
            let hour = (t / 3600) as u32;
            while summed < hour {
                done += cores(summed) * seconds_run(world, pod, summed, i64::MAX);
                summed += 1;
            }
            ((done + cores(hour) * seconds_run(world, pod, hour, t)) * 1e6).round() / 1e6
        })
        .collect()
}

/// One family's header.
fn family(out: &mut impl Write, name: &str, kind: &str, help: &str) -> io::Result<()> {
    writeln!(out, "# TYPE {name} {kind}")?;
    writeln!(out, "# HELP {name} {help}")
}

/// Writes the month's kube-state-metrics and cAdvisor series; returns the sample lines.
pub fn write_month(world: &World, out: &mut impl Write) -> io::Result<u64> {
    let mut lines = 0u64;
    let month_start = world.period.start();
    let node_times: Vec<Vec<i64>> = (0..world.nodes.len()).map(|n| node_samples(world, n)).collect();
    let pod_times: Vec<Vec<i64>> = (0..world.pods.len()).map(|p| pod_samples(world, p)).collect();
    let mut series =
        |out: &mut dyn Write, name: &str, labels: &str, samples: &mut dyn Iterator<Item = (i64, f64)>| {
            for (t, value) in samples {
                writeln!(out, "{name}{{{labels}}} {value} {}", month_start + t)?;
                lines += 1;
            }
            Ok::<(), io::Error>(())
        };

    // The nodes: what each is, its labels, its capacity and what pods may be given.
    family(out, "kube_node_info", "gauge", "Information about a cluster node.")?;
    for (n, node) in world.nodes.iter().enumerate() {
        let labels = format!(
            "node=\"{}\",provider_id=\"aws:///{}/{}\",internal_ip=\"{}\",kubelet_version=\"v1.31.2-eks-94953ac\",\
             container_runtime_version=\"containerd://1.7.23\",{}",
            node.node_name,
            node.availability_zone,
            node.instance_id,
            super::metrics::node_ip(&node.node_name),
            state_target(node.cluster)
        );
        series(out, "kube_node_info", &labels, &mut node_times[n].iter().map(|&t| (t, 1.0)))?;
    }
    family(out, "kube_node_labels", "gauge", "Kubernetes labels converted to Prometheus labels.")?;
    for (n, node) in world.nodes.iter().enumerate() {
        let capacity_type = if node.purchase == Purchase::Spot { "SPOT" } else { "ON_DEMAND" };
        let labels = format!(
            "node=\"{}\",label_node_kubernetes_io_instance_type=\"{}\",label_eks_amazonaws_com_capacity_type=\"{capacity_type}\",\
             label_eks_amazonaws_com_nodegroup=\"{}\",label_topology_kubernetes_io_zone=\"{}\",{}",
            node.node_name,
            node.instance_type.name,
            node.pool,
            node.availability_zone,
            state_target(node.cluster)
        );
        series(out, "kube_node_labels", &labels, &mut node_times[n].iter().map(|&t| (t, 1.0)))?;
    }
    // Allocatable is capacity less what the kubelet and system reserve (EKS's defaults, roughly).
    for (name, help, reserved_cpu, reserved_memory) in [
        ("kube_node_status_capacity", "The capacity for different resources of a node.", 0.0, 0.0),
        ("kube_node_status_allocatable", "The allocatable for different resources of a node.", 0.08, 0.07),
    ] {
        family(out, name, "gauge", help)?;
        for (n, node) in world.nodes.iter().enumerate() {
            let itype = node.instance_type;
            let mut resources = vec![
                ("cpu", "core", f64::from(itype.vcpu) - reserved_cpu),
                ("memory", "byte", (f64::from(itype.memory_gib) * GIB * (1.0 - reserved_memory)).round()),
            ];
            if itype.gpus > 0 {
                resources.push(("nvidia_com_gpu", "integer", f64::from(itype.gpus)));
            }
            for (resource, unit, value) in resources {
                let labels = format!(
                    "node=\"{}\",resource=\"{resource}\",unit=\"{unit}\",{}",
                    node.node_name,
                    state_target(node.cluster)
                );
                series(out, name, &labels, &mut node_times[n].iter().map(|&t| (t, value)))?;
            }
        }
    }

    // The pods: where each ran, its labels and what its container requested.
    let pod_labels = |p: usize| {
        let pod = &world.pods[p];
        format!(
            "namespace=\"{}\",pod=\"{}\",uid=\"{}\"",
            WORKLOADS[pod.workload].namespace, pod.name, pod.uid
        )
    };
    family(out, "kube_pod_info", "gauge", "Information about pod.")?;
    for (p, pod) in world.pods.iter().enumerate() {
        let node = &world.nodes[pod.node];
        let labels = format!(
            "{},node=\"{}\",host_ip=\"{}\",created_by_kind=\"{}\",created_by_name=\"{}\",{}",
            pod_labels(p),
            node.node_name,
            super::metrics::node_ip(&node.node_name),
            WORKLOADS[pod.workload].kind,
            pod.controller,
            state_target(node.cluster)
        );
        series(out, "kube_pod_info", &labels, &mut pod_times[p].iter().map(|&t| (t, 1.0)))?;
    }
    // When each pod started, and when a Job's pod completed (kube-state-metrics reports a
    // completion time for pods that terminated; a Deployment's deleted pod just disappears).
    family(out, "kube_pod_start_time", "gauge", "Start time in unix timestamp for a pod.")?;
    for (p, pod) in world.pods.iter().enumerate() {
        let started = (month_start + pod.start) as f64;
        let labels = format!("{},{}", pod_labels(p), state_target(world.nodes[pod.node].cluster));
        series(out, "kube_pod_start_time", &labels, &mut pod_times[p].iter().map(|&t| (t, started)))?;
    }
    family(out, "kube_pod_completion_time", "gauge", "Completion time in unix timestamp for a pod.")?;
    let month = i64::from(world.period.hours()) * 3600;
    for (p, pod) in world.pods.iter().enumerate() {
        if pod.daemonset || pod.end >= month || WORKLOADS[pod.workload].kind != "Job" {
            continue;
        }
        // Seen from the first scrape after it completed until the Job is cleaned up.
        let completed = (month_start + pod.end) as f64;
        let labels = format!("{},{}", pod_labels(p), state_target(world.nodes[pod.node].cluster));
        let first = (pod.end + SCRAPE - 1).div_euclid(SCRAPE) * SCRAPE;
        let mut after: Vec<i64> =
            grid(world.scale.sample_interval(), pod.end, (pod.end + 3600).min(month)).collect();
        if first < month && after.first() != Some(&first) {
            after.insert(0, first);
        }
        series(out, "kube_pod_completion_time", &labels, &mut after.into_iter().map(|t| (t, completed)))?;
    }
    // A Deployment's or StatefulSet's pod replaced in the month is seen terminating, with
    // the time its deletion was asked for, at its last scrape.
    family(out, "kube_pod_deletion_timestamp", "gauge", "Unix deletion timestamp.")?;
    for (p, pod) in world.pods.iter().enumerate() {
        if pod.daemonset || pod.end >= month || WORKLOADS[pod.workload].kind == "Job" {
            continue;
        }
        let deleted = (month_start + pod.end) as f64;
        let labels = format!("{},{}", pod_labels(p), state_target(world.nodes[pod.node].cluster));
        let last = pod_times[p].last().copied();
        series(out, "kube_pod_deletion_timestamp", &labels, &mut last.into_iter().map(|t| (t, deleted)))?;
    }
    family(out, "kube_pod_labels", "gauge", "Kubernetes labels converted to Prometheus labels.")?;
    for (p, pod) in world.pods.iter().enumerate() {
        let workload = &WORKLOADS[pod.workload];
        let client = workload.client.map(|c| format!(",label_client=\"{c}\"")).unwrap_or_default();
        let labels = format!(
            "{},label_app_kubernetes_io_name=\"{}\",label_team=\"{}\"{client},{}",
            pod_labels(p),
            workload.name,
            workload.team,
            state_target(world.nodes[pod.node].cluster)
        );
        series(out, "kube_pod_labels", &labels, &mut pod_times[p].iter().map(|&t| (t, 1.0)))?;
    }
    family(
        out,
        "kube_pod_container_resource_requests",
        "gauge",
        "The number of requested request resource by a container.",
    )?;
    for (p, pod) in world.pods.iter().enumerate() {
        let workload = &WORKLOADS[pod.workload];
        let mut resources = vec![
            ("cpu", "core", pod.vcpu_request),
            ("memory", "byte", (pod.memory_request_gib * GIB).round()),
        ];
        if pod.gpus > 0 {
            resources.push(("nvidia_com_gpu", "integer", f64::from(pod.gpus)));
        }
        for (resource, unit, value) in resources {
            let labels = format!(
                "{},container=\"{}\",node=\"{}\",resource=\"{resource}\",unit=\"{unit}\",{}",
                pod_labels(p),
                super::metrics::container_for(workload.class, workload.server),
                world.nodes[pod.node].node_name,
                state_target(world.nodes[pod.node].cluster)
            );
            series(
                out,
                "kube_pod_container_resource_requests",
                &labels,
                &mut pod_times[p].iter().map(|&t| (t, value)),
            )?;
        }
    }

    // cAdvisor: each container's CPU seconds and working set.
    let cadvisor_labels = |p: usize| {
        let pod = &world.pods[p];
        let workload = &WORKLOADS[pod.workload];
        format!(
            "container=\"{}\",id=\"/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{}.scope\",\
             image=\"registry.example.com/{}:1\",namespace=\"{}\",pod=\"{}\",{}",
            super::metrics::container_for(workload.class, workload.server),
            pod.uid.replace('-', "_"),
            pod.uid.replace('-', ""),
            workload.name,
            workload.namespace,
            pod.name,
            kubelet_target(world, pod.node)
        )
    };
    family(out, "container_cpu_usage_seconds", "counter", "Cumulative cpu time consumed in seconds.")?;
    for (p, times) in pod_times.iter().enumerate() {
        let counter = cpu_counter(world, p, times);
        series(
            out,
            "container_cpu_usage_seconds_total",
            &cadvisor_labels(p),
            &mut times.iter().copied().zip(counter.iter().copied()),
        )?;
    }
    family(out, "container_memory_working_set_bytes", "gauge", "Current working set in bytes.")?;
    for (p, times) in pod_times.iter().enumerate() {
        let working_set = |t: i64| (world.usage_while_running(p, (t / 3600) as u32).1 * GIB).round();
        series(
            out,
            "container_memory_working_set_bytes",
            &cadvisor_labels(p),
            &mut times.iter().map(|&t| (t, working_set(t))),
        )?;
    }
    writeln!(out, "# EOF")?;
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::sources::prometheus::{label, openmetrics::parse_labels};
    use crate::synth::fleet::Scale;

    /// A series' labels and its samples (seconds from the month's start, value).
    type Samples = (crate::sources::prometheus::Labels, Vec<(i64, f64)>);

    /// Each series by its name and pod (empty for a node's).
    fn read(world: &World, text: &str) -> HashMap<(String, String), Vec<Samples>> {
        let mut series: HashMap<String, Samples> = HashMap::new();
        let mut names = HashMap::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, rest) = line.split_once('{').unwrap();
            let (labels, sample) = rest.rsplit_once('}').unwrap();
            let mut parts = sample.split_whitespace();
            let value: f64 = parts.next().unwrap().parse().unwrap();
            let t: i64 = parts.next().unwrap().parse().unwrap();
            let key = format!("{name}{{{labels}}}");
            names.entry(key.clone()).or_insert(name.to_string());
            let entry = series.entry(key).or_insert_with(|| (parse_labels(labels), Vec::new()));
            entry.1.push((t - world.period.start(), value));
        }
        let mut by_pod: HashMap<(String, String), Vec<Samples>> = HashMap::new();
        for (key, (labels, samples)) in series {
            let pod = label(&labels, "pod").to_string();
            by_pod.entry((names[&key].clone(), pod)).or_default().push((labels, samples));
        }
        by_pod
    }

    #[test]
    fn the_kubernetes_series_carry_the_inputs_of_awss_split() {
        let world = World::build(7, "2026-10".parse().unwrap(), Scale::Demo);
        let mut text = Vec::new();
        let lines = write_month(&world, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        let series = read(&world, &text);
        assert_eq!(series.values().flatten().map(|(_, s)| s.len() as u64).sum::<u64>(), lines);
        let find = |name: &str, pod: &str, extra: &[(&str, &str)]| -> &Vec<(i64, f64)> {
            let found: Vec<_> = series[&(name.to_string(), pod.to_string())]
                .iter()
                .filter(|(labels, _)| extra.iter().all(|(k, v)| label(labels, k) == *v))
                .collect();
            assert_eq!(found.len(), 1, "one {name} series for {pod} {extra:?}");
            &found[0].1
        };

        // Every node is named with its instance, as the bill names it.
        for node in &world.nodes {
            let provider_id = format!("aws:///{}/{}", node.availability_zone, node.instance_id);
            assert!(text.contains(&format!(
                "kube_node_info{{node=\"{}\",provider_id=\"{provider_id}\"",
                node.node_name
            )));
        }

        // For every pod and every hour it ran whole (samples at both ends), the series give
        // what AWS's split takes: requests, and the CPU and memory used in the hour.
        let mut hours_checked = 0;
        for (p, pod) in world.pods.iter().enumerate().filter(|(p, _)| *p % 5 == 0) {
            let info = find("kube_pod_info", &pod.name, &[("uid", &pod.uid)]);
            let node = &world.nodes[pod.node];
            assert!(
                text.contains(&format!(
                    "pod=\"{}\",uid=\"{}\",node=\"{}\"",
                    pod.name, pod.uid, node.node_name
                ))
            );
            let requests = |resource: &str| {
                find(
                    "kube_pod_container_resource_requests",
                    &pod.name,
                    &[("uid", &pod.uid), ("resource", resource)],
                )
            };
            assert!(requests("cpu").iter().all(|&(_, v)| v == pod.vcpu_request));
            assert!(requests("memory").iter().all(|&(_, v)| v == (pod.memory_request_gib * GIB).round()));
            if pod.gpus > 0 {
                assert!(requests("nvidia_com_gpu").iter().all(|&(_, v)| v == f64::from(pod.gpus)));
            }
            let container = super::super::metrics::container_for(
                WORKLOADS[pod.workload].class,
                WORKLOADS[pod.workload].server,
            );
            let image = format!("registry.example.com/{}:1", WORKLOADS[pod.workload].name);
            let id = format!(
                "/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{}.scope",
                pod.uid.replace('-', "_"),
                pod.uid.replace('-', "")
            );
            let cadvisor = [
                ("container", container),
                ("image", image.as_str()),
                ("id", id.as_str()),
                ("node", node.node_name.as_str()),
            ];
            let cpu = find("container_cpu_usage_seconds_total", &pod.name, &cadvisor);
            let memory = find("container_memory_working_set_bytes", &pod.name, &cadvisor);
            assert_eq!(cpu.len(), info.len());
            let at =
                |samples: &Vec<(i64, f64)>, t: i64| samples.iter().find(|(s, _)| *s == t).map(|(_, v)| *v);
            for hour in 0..world.period.hours() {
                let (start, end) = (i64::from(hour) * 3600, i64::from(hour) * 3600 + 3600);
                let (Some(before), Some(after)) = (at(cpu, start), at(cpu, end)) else { continue };
                if world.pod_fraction(p, hour) < 1.0 {
                    continue;
                }
                let (cores, gib) = world.actual_usage(p, hour, 1.0);
                assert!(
                    ((after - before) / 3600.0 - cores).abs() < 2e-6,
                    "pod {p} hour {hour}: {} cores, split {cores}",
                    (after - before) / 3600.0
                );
                let in_hour: Vec<f64> =
                    memory.iter().filter(|(t, _)| (start..end).contains(t)).map(|(_, v)| *v).collect();
                let mean = in_hour.iter().sum::<f64>() / in_hour.len() as f64 / GIB;
                assert!((mean - gib).abs() < 2e-6, "pod {p} hour {hour}: {mean} GiB, split {gib}");
                hours_checked += 1;
            }
        }
        assert!(hours_checked > 1_000, "{hours_checked} pod-hours checked");
    }
}
