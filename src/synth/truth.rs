//! `truth.json`: the answers, computed from the generator's own model while it writes the
//! bill — never by reading its files back — so tests of ingest and the engine have an
//! independent figure to meet.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::split::Resource;

use super::bill::SplitRow;
use super::fleet::{Purchase, WORKLOADS, World};

/// Sums for one namespace, workload or client. Costs in USD at full precision.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Sums {
    pub split_cost: f64,
    pub unused_cost: f64,
    pub total_cost: f64,
    pub net_total_cost: f64,
    pub public_on_demand_total_cost: f64,
    pub gpu_hours_allocated: f64,
    pub gpu_hours_used: f64,
    pub gpu_hours_idle: f64,
    pub spot_gpu_hours: f64,
    pub requests: u64,
    pub prompt_tokens: u64,
    pub generation_tokens: u64,
    /// `total_cost / requests`, when the workload served requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_per_inference: Option<f64>,
}

/// Fleet-level GPU-hours for one GPU model.
#[derive(Debug, Default, Clone, Serialize)]
pub struct GpuModelHours {
    pub provisioned_gpu_hours: f64,
    pub allocated_gpu_hours: f64,
    pub unallocated_gpu_hours: f64,
}

/// The answers for one billing period.
#[derive(Debug, Default, Serialize)]
pub struct Truth {
    pub period: String,
    pub cur_rows: u64,
    pub bill_unblended: f64,
    pub bill_amortized: f64,
    /// Σ pods (split + unused): the Kubernetes cost pushed down to pods.
    pub kubernetes_allocated_cost: f64,
    /// Σ amortized cost of the instance-hours that hosted pods.
    pub instance_amortized_cost: f64,
    /// Everything on the bill that is not a pod's split + unused cost.
    pub other_cost: f64,
    pub other_cost_by_service: BTreeMap<String, f64>,
    /// Largest |Σ(split + unused) − amortized| over all instance-hours, USD.
    pub max_instance_hour_error: f64,
    pub instance_hours_by_purchase_option: BTreeMap<String, f64>,
    pub gpu_models: BTreeMap<String, GpuModelHours>,
    pub namespaces: BTreeMap<String, Sums>,
    /// Keyed `namespace/workload` (Deployment, Job, StatefulSet or DaemonSet name).
    pub workloads: BTreeMap<String, Sums>,
    /// Keyed by the `user_client` label; pods without one under `(unassigned)`.
    pub clients: BTreeMap<String, Sums>,
    pub idle_threshold: f64,
}

/// GPU-hours under this hourly mean utilization count as idle.
pub const IDLE_THRESHOLD: f64 = 0.10;

impl Truth {
    pub fn new(period: String) -> Truth {
        Truth { period, idle_threshold: IDLE_THRESHOLD, ..Truth::default() }
    }

    /// Adds one instance-hour and its pods' split rows.
    pub fn add_node_hour(
        &mut self,
        world: &World,
        node_index: usize,
        hour: u32,
        amortized: f64,
        rows: &[SplitRow],
    ) {
        let node = &world.nodes[node_index];
        let net_factor = if world.has_discount { 1.0 - super::bill::EDP_RATE } else { 1.0 };
        *self.instance_hours_by_purchase_option.entry(node.purchase.label().to_string()).or_default() += 1.0;
        self.instance_amortized_cost += amortized;
        let gpus = node.instance_type.gpus;
        let mut allocated_here = 0.0;
        let mut hour_total = 0.0;
        for row in rows {
            let pod = &world.pods[row.pod];
            let workload = &WORKLOADS[pod.workload];
            let total = row.split.split_cost + row.split.unused_cost;
            hour_total += total;
            let (allocated, used, idle) = if row.resource == Resource::Accelerator {
                let utilization = world.gpu_utilization(row.pod, hour);
                let allocated = row.split.split_usage;
                let idle = if utilization < IDLE_THRESHOLD { allocated } else { 0.0 };
                (allocated, utilization * allocated, idle)
            } else {
                (0.0, 0.0, 0.0)
            };
            allocated_here += allocated;
            let spot = if node.purchase == Purchase::Spot { allocated } else { 0.0 };
            // Requests and tokens are counted once per pod-hour, on its vCPU row.
            let (requests, prompt, generation) =
                if row.resource == Resource::Vcpu { world.served(row.pod, hour) } else { (0, 0, 0) };
            let workload_key = format!("{}/{}", workload.namespace, workload_name(world, row.pod));
            let client = workload.client.unwrap_or("(unassigned)").to_string();
            for sums in [
                self.namespaces.entry(workload.namespace.to_string()).or_default(),
                self.workloads.entry(workload_key.clone()).or_default(),
                self.clients.entry(client.clone()).or_default(),
            ] {
                sums.split_cost += row.split.split_cost;
                sums.unused_cost += row.split.unused_cost;
                sums.total_cost += total;
                sums.net_total_cost += total * net_factor;
                sums.public_on_demand_total_cost += row.public_split + row.public_unused;
                sums.gpu_hours_allocated += allocated;
                sums.gpu_hours_used += used;
                sums.gpu_hours_idle += idle;
                sums.spot_gpu_hours += spot;
                sums.requests += requests;
                sums.prompt_tokens += prompt;
                sums.generation_tokens += generation;
            }
        }
        self.kubernetes_allocated_cost += hour_total;
        self.max_instance_hour_error = self.max_instance_hour_error.max((hour_total - amortized).abs());
        if gpus > 0 {
            let model = self.gpu_models.entry(node.instance_type.gpu_model.to_string()).or_default();
            model.provisioned_gpu_hours += f64::from(gpus);
            model.allocated_gpu_hours += allocated_here;
            model.unallocated_gpu_hours += f64::from(gpus) - allocated_here;
        }
    }

    /// Adds a non-Kubernetes cost line (amortized USD).
    pub fn add_other(&mut self, service: &str, amortized: f64) {
        *self.other_cost_by_service.entry(service.to_string()).or_default() += amortized;
    }

    /// Derives ratios and totals once the month is written.
    pub fn finish(&mut self) {
        self.other_cost = self.bill_amortized - self.kubernetes_allocated_cost;
        for sums in
            self.workloads.values_mut().chain(self.namespaces.values_mut()).chain(self.clients.values_mut())
        {
            if sums.requests > 0 {
                sums.cost_per_inference = Some(sums.total_cost / sums.requests as f64);
            }
        }
    }
}

/// The workload a pod belongs to as people name it: the Deployment for ReplicaSet pods,
/// else the controller (Job, StatefulSet, DaemonSet).
pub fn workload_name(world: &World, pod: usize) -> String {
    let p = &world.pods[pod];
    let workload = &WORKLOADS[p.workload];
    if workload.kind == "ReplicaSet" { workload.name.to_string() } else { p.controller.clone() }
}
