//! Savings still on the table, in dollars per month, each with the evidence behind it, per
//! workload **family** (a Deployment or StatefulSet; for Jobs, the CronJob: the Job name
//! without its schedule suffix, `embedder-train-29012390` → `embedder-train`) — the thing
//! someone can change.
//!
//! A family's month is a **waterfall**: each dollar of its spend (split + unused, every
//! resource) is claimed by one opportunity at most, in this order, each taking from what the
//! ones before left:
//!
//! 1. `idle_gpu`: the full cost of its idle GPU pod-hours (idle judged per GPU);
//! 2. of what stays, either `mig_or_time_slicing` — inference or notebook families on
//!    A100/H100 GPUs using under 30 % of the GPU and under half its memory: the busy
//!    accelerator cost beyond the 1/7 slices they need — or `right_size` — families under
//!    50 % utilization whose peak framebuffer (+20 %) fits a GPU with a lower per-GPU price in
//!    the built-in catalog (`src/catalog.rs`): what stays × (1 − the price ratio);
//! 3. `spot_training`: of what remains of On-Demand training, × the Spot discount this bill
//!    shows for the same instance type; without Spot hours of that type, the bill's Spot
//!    discount over all its Spot instance-hours; with no Spot at all (the fleet that most needs
//!    the advice), an assumed [`ASSUMED_SPOT_DISCOUNT`], said so in the evidence.
//!
//! So a family's opportunities never add up to more than it spent.

use std::collections::{BTreeMap, HashMap};

use super::classify::family;
use crate::catalog::{INSTANCE_TYPES, InstanceType, instance_type};
use crate::store::{ComputeInputs, CostRollup, Opportunity, PurchaseOption, WorkloadClass};

/// The Spot discount assumed for a fleet whose bill has no Spot hours at all: GPU Spot
/// capacity commonly sells 60–70 % below On-Demand; the lower end is taken.
pub const ASSUMED_SPOT_DISCOUNT: f64 = 0.60;

/// What the bill says about instance types: each workload's type, and Spot discounts.
pub struct PodEvidence {
    /// (namespace, workload, gpu model, purchase option) → instance type.
    instance_types: HashMap<(String, String, String, PurchaseOption), String>,
    /// Instance type → 1 − Spot amortized cost / public on-demand cost of its Spot hours.
    spot_discount: HashMap<String, f64>,
    /// The same over every Spot instance-hour of the bill, when it has any.
    fleet_spot_discount: Option<f64>,
}

impl PodEvidence {
    pub fn gather(inputs: &ComputeInputs) -> PodEvidence {
        let mut instance_types = HashMap::new();
        for p in inputs.pods.iter().filter(|p| !p.gpu_model.is_empty()) {
            let key = (p.namespace.clone(), p.workload.clone(), p.gpu_model.clone(), p.purchase_option);
            instance_types.entry(key).or_insert_with(|| p.instance_type.clone());
        }
        let mut spot: HashMap<&str, (i64, i64)> = HashMap::new();
        for i in inputs.capacity.iter().filter(|i| i.purchase_option == PurchaseOption::Spot) {
            let e = spot.entry(i.instance_type.as_str()).or_default();
            e.0 += i.amortized_cost_micros;
            e.1 += i.public_on_demand_cost_micros;
        }
        let (paid, public) = spot.values().fold((0i64, 0i64), |(a, b), (p, q)| (a + p, b + q));
        let fleet_spot_discount = (public > 0).then(|| 1.0 - paid as f64 / public as f64);
        let spot_discount = spot
            .into_iter()
            .filter(|(_, (_, public))| *public > 0)
            .map(|(t, (paid, public))| (t.to_string(), 1.0 - paid as f64 / public as f64))
            .collect();
        PodEvidence { instance_types, spot_discount, fleet_spot_discount }
    }
}

/// A workload family's month, summed from its daily rollups.
#[derive(Default)]
struct FamilyMonth {
    class: WorkloadClass,
    /// Split + unused of every row: what the family spent.
    cost: i64,
    /// Its accelerator rows, and those of idle GPU pod-hours.
    gpu_cost: i64,
    idle_gpu_cost: i64,
    /// The full cost of idle GPU pod-hours.
    idle_cost: i64,
    allocated: f64,
    used: f64,
    idle: f64,
    unmeasured: f64,
    peak_fb: f64,
    /// Workloads (Job runs) in the family, and one of them.
    workloads: std::collections::BTreeSet<String>,
}

/// Opportunities of a period from its cost rollups, per workload family, ranked by dollars
/// per month; a family's opportunities add up to at most what it spent.
pub fn find(period: &str, costs: &[CostRollup], evidence: &PodEvidence) -> Vec<Opportunity> {
    let mut months: BTreeMap<(String, String, String, PurchaseOption), FamilyMonth> = BTreeMap::new();
    for c in costs.iter().filter(|c| c.gpu_hours_allocated > 0.0) {
        let key =
            (c.namespace.clone(), family(&c.workload).to_string(), c.gpu_model.clone(), c.purchase_option);
        let m = months.entry(key).or_default();
        m.class = c.workload_class.clone();
        m.cost += c.split_cost_nanos + c.unused_cost_nanos;
        m.gpu_cost += c.gpu_cost_nanos;
        m.idle_gpu_cost += c.idle_gpu_cost_nanos;
        m.idle_cost += c.idle_cost_nanos;
        m.allocated += c.gpu_hours_allocated;
        m.used += c.gpu_hours_used;
        m.idle += c.gpu_hours_idle;
        m.unmeasured += c.gpu_hours_unmeasured;
        m.peak_fb = m.peak_fb.max(c.peak_fb_used_mib);
        m.workloads.insert(c.workload.clone());
    }
    let mut found = Vec::new();
    for ((namespace, family, gpu_model, purchase), m) in &months {
        let measured = m.allocated - m.unmeasured;
        let utilization = if measured > 0.0 { m.used / measured } else { 0.0 };
        // Any run of the family names the instance type it ran on.
        let current = m
            .workloads
            .iter()
            .find_map(|w| {
                evidence.instance_types.get(&(namespace.clone(), w.clone(), gpu_model.clone(), *purchase))
            })
            .and_then(|name| instance_type(name));
        let runs = match m.workloads.len() {
            1 => String::new(),
            n => format!(" ({n} runs)"),
        };
        // What the opportunities before have not claimed.
        let mut left = m.cost;
        let mut claim = |kind: &str, wanted: i64, evidence: String| {
            let take = wanted.clamp(0, left.max(0));
            left -= take;
            if take > 0 {
                found.push(Opportunity {
                    period: period.to_string(),
                    kind: kind.to_string(),
                    namespace: namespace.clone(),
                    workload: family.clone(),
                    family: family.clone(),
                    gpu_model: gpu_model.clone(),
                    purchase_option: *purchase,
                    monthly_nanos: take,
                    evidence: format!("{evidence}{runs}"),
                });
            }
            left
        };
        let mut left_after_idle = claim(
            "idle_gpu",
            m.idle_cost,
            format!(
                "{:.1} of {:.1} GPU-hours idle (GPUs below the threshold); utilization {:.1} %; the full cost of those pod-hours",
                m.idle,
                m.allocated,
                utilization * 100.0
            ),
        );
        if let Some(t) = current {
            let memory = f64::from(t.gpu_memory_mib);
            let memory_share = if memory > 0.0 { m.peak_fb / memory } else { 1.0 };
            let sliceable = matches!(t.gpu_model, "A100" | "H100");
            if sliceable
                && matches!(m.class, WorkloadClass::Inference | WorkloadClass::Other)
                && utilization < 0.30
                && memory_share < 0.5
            {
                let slices = (7.0 * utilization.max(memory_share)).ceil().clamp(1.0, 7.0);
                let busy_gpu_cost = (m.gpu_cost - m.idle_gpu_cost) as f64;
                left_after_idle = claim(
                    "mig_or_time_slicing",
                    (busy_gpu_cost * (1.0 - slices / 7.0)).round() as i64,
                    format!(
                        "utilization {:.1} %, peak framebuffer {:.0} of {:.0} MiB: fits {} of 7 MIG slices of a {}",
                        utilization * 100.0,
                        m.peak_fb,
                        memory,
                        slices,
                        t.gpu_model
                    ),
                );
            } else if utilization < 0.5
                && m.peak_fb > 0.0
                && let Some(smaller) = cheaper_fit(t, m.peak_fb * 1.2)
            {
                let ratio = per_gpu_price(smaller) / per_gpu_price(t);
                left_after_idle = claim(
                    "right_size",
                    (left_after_idle as f64 * (1.0 - ratio)).round() as i64,
                    format!(
                        "utilization {:.1} %, peak framebuffer {:.0} MiB: fits {} ({}, {} MiB, ${:.2}/GPU-hour vs ${:.2})",
                        utilization * 100.0,
                        m.peak_fb,
                        smaller.name,
                        smaller.gpu_model,
                        smaller.gpu_memory_mib,
                        per_gpu_price(smaller),
                        per_gpu_price(t)
                    ),
                );
            }
        }
        if m.class == WorkloadClass::Training
            && *purchase == PurchaseOption::OnDemand
            && let Some(t) = current
        {
            let (discount, source) = match (evidence.spot_discount.get(t.name), evidence.fleet_spot_discount)
            {
                (Some(&d), _) => (d, "Spot hours of it cost".to_string()),
                (None, Some(d)) => (d, format!("no Spot {} in this bill; its Spot hours cost", t.name)),
                (None, None) => (ASSUMED_SPOT_DISCOUNT, "no Spot in this bill; assumed Spot at".to_string()),
            };
            claim(
                "spot_training",
                (left_after_idle as f64 * discount).round() as i64,
                format!("On-Demand {}; {source} {:.0} % less", t.name, discount * 100.0),
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
    fn a_cronjobs_runs_are_one_family() {
        assert_eq!(family("embedder-train-29012390"), "embedder-train");
        assert_eq!(family("llm-finetune-29022620"), "llm-finetune");
        // Not a schedule: a Deployment, a short number, a name that is only digits.
        assert_eq!(family("vllm-chat"), "vllm-chat");
        assert_eq!(family("train-h100-8"), "train-h100-8");
        assert_eq!(family("-29012390"), "-29012390");
    }

    #[test]
    fn each_dollar_of_a_family_is_claimed_once() {
        // Two runs of an On-Demand H100 training CronJob: together $1,000 spent, $600 of it
        // idle pod-hours, $400 of accelerator rows ($100 of them idle), 20 % utilization and a
        // 10 GiB peak (fits a cheaper GPU); the bill shows Spot 60 % cheaper.
        let run = |name: &str| CostRollup {
            namespace: "ml".into(),
            workload: name.into(),
            workload_class: WorkloadClass::Training,
            gpu_model: "H100".into(),
            purchase_option: PurchaseOption::OnDemand,
            split_cost_nanos: 400_000_000_000,
            unused_cost_nanos: 100_000_000_000,
            gpu_cost_nanos: 200_000_000_000,
            idle_gpu_cost_nanos: 50_000_000_000,
            idle_cost_nanos: 300_000_000_000,
            gpu_hours_allocated: 10.0,
            gpu_hours_used: 2.0,
            gpu_hours_idle: 6.0,
            peak_fb_used_mib: 10_240.0,
            ..CostRollup::default()
        };
        let costs = [run("train-29012390"), run("train-29012500")];
        let key = |w: &str| ("ml".to_string(), w.to_string(), "H100".to_string(), PurchaseOption::OnDemand);
        let evidence = PodEvidence {
            instance_types: [key("train-29012390"), key("train-29012500")]
                .into_iter()
                .map(|k| (k, "p5.48xlarge".to_string()))
                .collect(),
            spot_discount: [("p5.48xlarge".to_string(), 0.6)].into_iter().collect(),
            fleet_spot_discount: Some(0.6),
        };
        let found = find("2026-10", &costs, &evidence);
        let by_kind = |kind: &str| found.iter().find(|o| o.kind == kind).map(|o| o.monthly_nanos).unwrap();
        let p5 = instance_type("p5.48xlarge").unwrap();
        let ratio = per_gpu_price(cheaper_fit(p5, 10_240.0 * 1.2).unwrap()) / per_gpu_price(p5);
        // Idle takes $600; right-sizing takes (1 − ratio) of the $400 left; Spot 60 % of the
        // rest. Without the waterfall Spot alone would claim $600 of the $1,000.
        let idle = 600_000_000_000i64;
        let right = (400_000_000_000.0 * (1.0 - ratio)).round() as i64;
        let spot = ((400_000_000_000 - right) as f64 * 0.6).round() as i64;
        assert_eq!(
            (by_kind("idle_gpu"), by_kind("right_size"), by_kind("spot_training")),
            (idle, right, spot)
        );
        assert!(idle + right + spot <= 1_000_000_000_000);
        assert!(found.iter().all(|o| o.family == "train" && o.evidence.ends_with("(2 runs)")), "{found:?}");
    }

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
