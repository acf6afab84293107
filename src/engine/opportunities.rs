//! Savings still on the table, in dollars per month, each with the evidence behind it:
//!
//! - `idle_gpu`: the cost of allocated GPU-hours whose hourly mean utilization was below the
//!   idle threshold;
//! - `spot_training`: On-Demand training cost × the Spot discount this bill shows for the same
//!   instance type (none offered when the bill has no Spot hours of that type);
//! - `mig_or_time_slicing`: inference or notebook workloads on A100/H100 GPUs using under 30 %
//!   of the GPU and under half its memory: the GPU cost beyond the 1/7 slices they need;
//! - `right_size`: workloads under 50 % utilization whose peak framebuffer (+20 %) fits a
//!   GPU with a lower per-GPU price in the built-in catalog (`src/catalog.rs`).

use std::collections::{BTreeMap, HashMap};

use crate::catalog::{INSTANCE_TYPES, InstanceType, instance_type};
use crate::store::{ComputeInputs, CostRollup, Opportunity};

/// What the bill says about instance types: each workload's type, and Spot discounts.
pub struct PodEvidence {
    /// (namespace, workload, gpu model, purchase option) → instance type.
    instance_types: HashMap<(String, String, String, String), String>,
    /// Instance type → 1 − Spot amortized cost / public on-demand cost of its Spot hours.
    spot_discount: HashMap<String, f64>,
}

impl PodEvidence {
    pub fn gather(inputs: &ComputeInputs) -> PodEvidence {
        let mut instance_types = HashMap::new();
        for p in inputs.pods.iter().filter(|p| !p.gpu_model.is_empty()) {
            let key =
                (p.namespace.clone(), p.workload.clone(), p.gpu_model.clone(), p.purchase_option.clone());
            instance_types.entry(key).or_insert_with(|| p.instance_type.clone());
        }
        let mut spot: HashMap<&str, (i64, i64)> = HashMap::new();
        for i in inputs.capacity.iter().filter(|i| i.purchase_option == "Spot") {
            let e = spot.entry(i.instance_type.as_str()).or_default();
            e.0 += i.amortized_cost_micros;
            e.1 += i.public_on_demand_cost_micros;
        }
        let spot_discount = spot
            .into_iter()
            .filter(|(_, (_, public))| *public > 0)
            .map(|(t, (paid, public))| (t.to_string(), 1.0 - paid as f64 / public as f64))
            .collect();
        PodEvidence { instance_types, spot_discount }
    }
}

/// A workload's month, summed from its daily rollups.
#[derive(Default)]
struct WorkloadMonth {
    class: String,
    cost: i64,
    gpu_cost: i64,
    idle_cost: i64,
    allocated: f64,
    used: f64,
    idle: f64,
    peak_fb: f64,
}

/// Opportunities of a period from its cost rollups, ranked by dollars per month.
pub fn find(period: &str, costs: &[CostRollup], evidence: &PodEvidence) -> Vec<Opportunity> {
    let mut months: BTreeMap<(String, String, String, String), WorkloadMonth> = BTreeMap::new();
    for c in costs.iter().filter(|c| c.gpu_hours_allocated > 0.0) {
        let key = (c.namespace.clone(), c.workload.clone(), c.gpu_model.clone(), c.purchase_option.clone());
        let m = months.entry(key).or_default();
        m.class = c.workload_class.clone();
        m.cost += c.split_cost_nanos + c.unused_cost_nanos;
        m.gpu_cost += c.gpu_cost_nanos;
        m.idle_cost += c.idle_gpu_cost_nanos;
        m.allocated += c.gpu_hours_allocated;
        m.used += c.gpu_hours_used;
        m.idle += c.gpu_hours_idle;
        m.peak_fb = m.peak_fb.max(c.peak_fb_used_mib);
    }
    let mut found = Vec::new();
    for ((namespace, workload, gpu_model, purchase), m) in &months {
        let utilization = m.used / m.allocated;
        let current = evidence
            .instance_types
            .get(&(namespace.clone(), workload.clone(), gpu_model.clone(), purchase.clone()))
            .and_then(|name| instance_type(name));
        let mut add = |kind: &str, monthly_nanos: i64, evidence: String| {
            if monthly_nanos > 0 {
                found.push(Opportunity {
                    period: period.to_string(),
                    kind: kind.to_string(),
                    namespace: namespace.clone(),
                    workload: workload.clone(),
                    gpu_model: gpu_model.clone(),
                    purchase_option: purchase.clone(),
                    monthly_nanos,
                    evidence,
                });
            }
        };
        add(
            "idle_gpu",
            m.idle_cost,
            format!(
                "{:.1} of {:.1} GPU-hours idle (hourly mean below the threshold); utilization {:.1} %",
                m.idle,
                m.allocated,
                utilization * 100.0
            ),
        );
        if m.class == "training" && purchase == "On-Demand" {
            let discount = current.and_then(|t| evidence.spot_discount.get(t.name));
            if let (Some(t), Some(&discount)) = (current, discount) {
                add(
                    "spot_training",
                    (m.cost as f64 * discount).round() as i64,
                    format!(
                        "On-Demand {}; Spot hours of it cost {:.0} % less in this bill",
                        t.name,
                        discount * 100.0
                    ),
                );
            }
        }
        let Some(current) = current else { continue };
        let memory = f64::from(current.gpu_memory_mib);
        let memory_share = if memory > 0.0 { m.peak_fb / memory } else { 1.0 };
        let sliceable = matches!(current.gpu_model, "A100" | "H100");
        if sliceable
            && matches!(m.class.as_str(), "inference" | "other")
            && utilization < 0.30
            && memory_share < 0.5
        {
            let slices = (7.0 * utilization.max(memory_share)).ceil().clamp(1.0, 7.0);
            add(
                "mig_or_time_slicing",
                (m.gpu_cost as f64 * (1.0 - slices / 7.0)).round() as i64,
                format!(
                    "utilization {:.1} %, peak framebuffer {:.0} of {:.0} MiB: fits {} of 7 MIG slices of a {}",
                    utilization * 100.0,
                    m.peak_fb,
                    memory,
                    slices,
                    current.gpu_model
                ),
            );
            continue;
        }
        if utilization < 0.5
            && m.peak_fb > 0.0
            && let Some(smaller) = cheaper_fit(current, m.peak_fb * 1.2)
        {
            let ratio = per_gpu_price(smaller) / per_gpu_price(current);
            add(
                "right_size",
                (m.gpu_cost as f64 * (1.0 - ratio)).round() as i64,
                format!(
                    "utilization {:.1} %, peak framebuffer {:.0} MiB: fits {} ({}, {} MiB, ${:.2}/GPU-hour vs ${:.2})",
                    utilization * 100.0,
                    m.peak_fb,
                    smaller.name,
                    smaller.gpu_model,
                    smaller.gpu_memory_mib,
                    per_gpu_price(smaller),
                    per_gpu_price(current)
                ),
            );
        }
    }
    found.sort_by(|a, b| b.monthly_nanos.cmp(&a.monthly_nanos).then_with(|| a.kind.cmp(&b.kind)));
    found
}

fn per_gpu_price(t: &InstanceType) -> f64 {
    t.on_demand_hourly / f64::from(t.gpus.max(1))
}

/// The GPU instance type with the lowest per-GPU price whose GPU holds `needed_mib`, if it is
/// cheaper per GPU than `current`.
fn cheaper_fit(current: &InstanceType, needed_mib: f64) -> Option<&'static InstanceType> {
    INSTANCE_TYPES
        .iter()
        .filter(|t| t.gpus > 0 && f64::from(t.gpu_memory_mib) >= needed_mib)
        .filter(|t| per_gpu_price(t) < per_gpu_price(current) * 0.95)
        .min_by(|a, b| per_gpu_price(a).total_cmp(&per_gpu_price(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_model_on_a_big_gpu_fits_a_cheaper_one() {
        // 10 GiB peak (+20 % = 12,288 MiB) on an H100 fits the cheapest per-GPU type with ≥ 12 GiB.
        let h100 = instance_type("p5.48xlarge").unwrap();
        let fit = cheaper_fit(h100, 12_288.0).unwrap();
        assert!(fit.gpu_memory_mib >= 12_288 && per_gpu_price(fit) < per_gpu_price(h100));
        assert!(
            INSTANCE_TYPES
                .iter()
                .filter(|t| t.gpus > 0 && t.gpu_memory_mib >= 12_288)
                .all(|t| per_gpu_price(t) >= per_gpu_price(fit))
        );
        // Nothing holds 200 GiB on one GPU.
        assert!(cheaper_fit(h100, 200_000.0).is_none());
    }
}
