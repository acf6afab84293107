//! GPU usage joined with the bill: per pod-hour, the GPU-hours the bill allocated (accelerator
//! split usage) meet the hourly mean utilization the metrics measured.
//!
//! Definitions (docs/METRICS.md, "GPU-hours", "GPU utilization", "Idle GPU-hours"): used
//! GPU-hours = Σ hourly mean utilization × allocated GPU-hours; idle GPU-hours = allocated
//! GPU-hours × the share of the pod-hour's GPUs whose own hourly mean is below the threshold
//! (judged per GPU, never on the pod's mean); utilization = used / allocated. Allocated hours with no metrics are
//! reported as unmeasured, not as idle. Without cost data for the period, the metrics'
//! own GPU-hours stand in for allocation.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::money::NANOS_PER_USD;
use crate::store::{GpuAllocation, GpuUsage, InferenceUsage, PodWorkload, WorkloadCost};

/// The namespace unattributed GPU time (no pod on the GPU) is reported under.
pub const UNATTRIBUTED: &str = "(unattributed)";

/// GPU-hours of one namespace on one GPU model.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GpuHours {
    pub namespace: String,
    pub gpu_model: String,
    pub allocated_gpu_hours: f64,
    pub used_gpu_hours: f64,
    pub idle_gpu_hours: f64,
    /// Allocated hours with no metrics to say how busy they were.
    pub unmeasured_gpu_hours: f64,
    /// GPU-hours no pod held (only on the `(unattributed)` rows).
    pub unattributed_gpu_hours: f64,
}

impl GpuHours {
    /// Used over measured allocated hours (0..1); `None` with nothing measured.
    pub fn utilization(&self) -> Option<f64> {
        let measured = if self.namespace == UNATTRIBUTED {
            self.unattributed_gpu_hours
        } else {
            self.allocated_gpu_hours - self.unmeasured_gpu_hours
        };
        (measured > 1e-12).then(|| self.used_gpu_hours / measured)
    }
}

/// The GPU side of a window, per namespace and GPU model, plus GPU-hours seen in metrics
/// for pods the bill does not name (when there is a bill).
pub fn gpu_hours(
    allocations: &[GpuAllocation],
    usage: &[GpuUsage],
    idle_threshold: f64,
) -> (Vec<GpuHours>, f64) {
    // Per pod-hour across its GPUs: busy and measured GPU-hours (the mean, weighted by the
    // GPU-hours each row holds) and the GPU-hours of GPUs idle on their own.
    let mut measured: HashMap<(&str, &str, i64), Measured> = HashMap::new();
    let mut rows: BTreeMap<(String, String), GpuHours> = BTreeMap::new();
    for u in usage {
        if u.pod.is_empty() {
            let r = row(&mut rows, UNATTRIBUTED, &u.gpu_model);
            r.unattributed_gpu_hours += u.gpu_hours;
            r.used_gpu_hours += u.mean_utilization * u.gpu_hours;
            if u.mean_utilization < idle_threshold {
                r.idle_gpu_hours += u.gpu_hours;
            }
            continue;
        }
        let entry = measured.entry((&u.namespace, &u.pod, u.hour)).or_insert(Measured {
            busy: 0.0,
            weight: 0.0,
            idle: 0.0,
            model: &u.gpu_model,
        });
        let weight = u.gpu_hours.max(1e-9);
        entry.busy += u.mean_utilization * weight;
        entry.weight += weight;
        if u.mean_utilization < idle_threshold {
            entry.idle += weight;
        }
    }
    let mut unbilled = 0.0;
    if allocations.is_empty() {
        for ((namespace, _, _), m) in &measured {
            add_pod_hour(row(&mut rows, namespace, m.model), m.weight, Some(m));
        }
    } else {
        let mut billed: std::collections::HashSet<(&str, &str, i64)> = std::collections::HashSet::new();
        // DaemonSet pods on GPU nodes have accelerator rows with no GPUs.
        for a in allocations.iter().filter(|a| a.gpu_hours > 0.0) {
            let m = measured.get(&(a.namespace.as_str(), a.pod.as_str(), a.hour));
            billed.insert((&a.namespace, &a.pod, a.hour));
            add_pod_hour(row(&mut rows, &a.namespace, &a.gpu_model), a.gpu_hours, m);
        }
        unbilled = measured.iter().filter(|(key, _)| !billed.contains(*key)).map(|(_, m)| m.weight).sum();
    }
    (rows.into_values().collect(), unbilled)
}

/// The row of a namespace and model, created empty.
fn row<'a>(
    rows: &'a mut BTreeMap<(String, String), GpuHours>,
    namespace: &str,
    model: &str,
) -> &'a mut GpuHours {
    rows.entry((namespace.to_string(), model.to_string())).or_insert_with(|| GpuHours {
        namespace: namespace.to_string(),
        gpu_model: model.to_string(),
        ..GpuHours::default()
    })
}

/// What the metrics measured of one pod-hour, summed over its GPUs.
struct Measured<'a> {
    busy: f64,
    weight: f64,
    /// Of `weight`, the GPU-hours of GPUs whose own mean was below the idle threshold.
    idle: f64,
    model: &'a str,
}

/// Adds a pod-hour's allocated GPU-hours: used at its measured mean, idle in the share of
/// its GPUs that idled on their own (an 8-GPU pod with seven GPUs at 0 % is 7/8 idle though
/// its mean is 11 %), unmeasured without metrics.
fn add_pod_hour(row: &mut GpuHours, allocated: f64, measured: Option<&Measured>) {
    row.allocated_gpu_hours += allocated;
    match measured {
        Some(m) => {
            row.used_gpu_hours += m.busy / m.weight * allocated;
            row.idle_gpu_hours += m.idle / m.weight * allocated;
        }
        None => row.unmeasured_gpu_hours += allocated,
    }
}

/// Requests and tokens of one workload and model.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct InferenceTotals {
    pub namespace: String,
    pub workload: String,
    pub model: String,
    pub requests: f64,
    pub prompt_tokens: f64,
    pub generation_tokens: f64,
    /// The workload's cost in USD (split + unused, GPU + CPU + memory), shared between its
    /// models by requests; `None` without a bill.
    pub cost: Option<f64>,
}

impl InferenceTotals {
    pub fn tokens(&self) -> f64 {
        self.prompt_tokens + self.generation_tokens
    }

    /// Cost over successful requests; `None` ("n/a") with no requests or no bill.
    pub fn cost_per_inference(&self) -> Option<f64> {
        self.cost.filter(|_| self.requests > 0.0).map(|cost| cost / self.requests)
    }

    /// Cost over millions of tokens (prompt + generated), where token counters exist.
    pub fn cost_per_million_tokens(&self) -> Option<f64> {
        self.cost.filter(|_| self.tokens() > 0.0).map(|cost| cost / (self.tokens() / 1e6))
    }
}

/// Inference per workload and model, with the workload's cost; a pod's workload comes from
/// the bill when it names the pod, else from the pod's name.
pub fn inference_totals(
    usage: &[InferenceUsage],
    pods: &[PodWorkload],
    costs: &[WorkloadCost],
) -> Vec<InferenceTotals> {
    let workloads: HashMap<(&str, &str), &str> =
        pods.iter().map(|p| ((p.namespace.as_str(), p.pod.as_str()), p.workload.as_str())).collect();
    let mut totals: BTreeMap<(String, String, String), InferenceTotals> = BTreeMap::new();
    for u in usage {
        let workload = workloads.get(&(u.namespace.as_str(), u.pod.as_str())).copied().unwrap_or(&u.workload);
        let key = (u.namespace.clone(), workload.to_string(), u.model.clone());
        let t = totals.entry(key).or_insert_with(|| InferenceTotals {
            namespace: u.namespace.clone(),
            workload: workload.to_string(),
            model: u.model.clone(),
            ..InferenceTotals::default()
        });
        t.requests += u.requests;
        t.prompt_tokens += u.prompt_tokens;
        t.generation_tokens += u.generation_tokens;
    }
    let costs: HashMap<(&str, &str), i64> =
        costs.iter().map(|c| ((c.namespace.as_str(), c.workload.as_str()), c.total_cost_nanos)).collect();
    let mut requests_per_workload: HashMap<(String, String), f64> = HashMap::new();
    for t in totals.values() {
        *requests_per_workload.entry((t.namespace.clone(), t.workload.clone())).or_default() += t.requests;
    }
    let mut totals: Vec<InferenceTotals> = totals.into_values().collect();
    for t in &mut totals {
        let Some(&nanos) = costs.get(&(t.namespace.as_str(), t.workload.as_str())) else { continue };
        let all = requests_per_workload[&(t.namespace.clone(), t.workload.clone())];
        let share = if all > 0.0 { t.requests / all } else { 1.0 };
        t.cost = Some(nanos as f64 / NANOS_PER_USD as f64 * share);
    }
    totals
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allocation(pod: &str, hour: i64, gpu_hours: f64) -> GpuAllocation {
        GpuAllocation {
            hour,
            namespace: "ml".into(),
            pod: pod.into(),
            workload: "w".into(),
            gpu_model: "H100".into(),
            purchase_option: crate::store::PurchaseOption::OnDemand,
            gpu_hours,
        }
    }

    fn usage(pod: &str, hour: i64, utilization: f64, gpu_hours: f64) -> GpuUsage {
        GpuUsage {
            hour,
            namespace: if pod.is_empty() { String::new() } else { "ml".into() },
            pod: pod.into(),
            gpu_model: "H100".into(),
            mean_utilization: utilization,
            gpu_hours,
            ..GpuUsage::default()
        }
    }

    #[test]
    fn the_bill_allocates_and_the_metrics_say_how_busy() {
        // Pod a: 2 GPU-hours in hour 0 at 0.5 (two GPUs at 0.4 and 0.6) → 1.0 used; 2 GPU-hours
        // in hour 1 at 0.05 → idle (0.1 used). Pod b: 1 GPU-hour with no metrics → unmeasured.
        // One unattributed GPU-hour at 0. Utilization = 1.1 / (5 − 1) = 0.275.
        let allocations = [allocation("a", 0, 2.0), allocation("a", 3600, 2.0), allocation("b", 0, 1.0)];
        let metrics = [
            usage("a", 0, 0.4, 1.0),
            usage("a", 0, 0.6, 1.0),
            usage("a", 3600, 0.05, 2.0),
            usage("", 0, 0.0, 1.0),
        ];
        let (rows, unbilled) = gpu_hours(&allocations, &metrics, 0.10);
        assert_eq!(unbilled, 0.0);
        let ml = rows.iter().find(|r| r.namespace == "ml").unwrap();
        assert_eq!((ml.allocated_gpu_hours, ml.idle_gpu_hours, ml.unmeasured_gpu_hours), (5.0, 2.0, 1.0));
        assert!((ml.used_gpu_hours - 1.1).abs() < 1e-12);
        assert!((ml.utilization().unwrap() - 0.275).abs() < 1e-12);
        let free = rows.iter().find(|r| r.namespace == UNATTRIBUTED).unwrap();
        assert_eq!((free.unattributed_gpu_hours, free.idle_gpu_hours), (1.0, 1.0));
    }

    #[test]
    fn a_workload_cost_is_shared_by_its_models_requests() {
        // chat serves model a (300 requests, 1M tokens) and b (100 requests): $40 of cost →
        // a $30 ($0.10 per request, $30 per 1M tokens), b $10. Its pod is named by the bill.
        let hour = |model: &str, requests: f64, tokens: f64| InferenceUsage {
            namespace: "llm".into(),
            pod: "chat-x".into(),
            workload: "guess".into(),
            model: model.into(),
            requests,
            prompt_tokens: tokens,
            ..InferenceUsage::default()
        };
        let pods = [PodWorkload { namespace: "llm".into(), pod: "chat-x".into(), workload: "chat".into() }];
        let costs = [WorkloadCost {
            namespace: "llm".into(),
            workload: "chat".into(),
            total_cost_nanos: 40_000_000_000,
        }];
        let totals = inference_totals(&[hour("a", 300.0, 1e6), hour("b", 100.0, 0.0)], &pods, &costs);
        assert_eq!(totals[0].workload, "chat");
        assert_eq!((totals[0].cost, totals[0].cost_per_inference()), (Some(30.0), Some(0.1)));
        assert_eq!(totals[0].cost_per_million_tokens(), Some(30.0));
        assert_eq!((totals[1].cost, totals[1].cost_per_million_tokens()), (Some(10.0), None));
    }

    #[test]
    fn idle_is_judged_per_gpu_not_on_the_pods_mean() {
        // An 8-GPU pod: seven GPUs at 0 % and one at 90 %. Its mean is 11.25 %, above the 10 %
        // threshold; judged per GPU, 7 of its 8 GPU-hours are idle and 0.9 is used.
        let mut metrics = vec![usage("a", 0, 0.9, 1.0)];
        metrics.extend((0..7).map(|_| usage("a", 0, 0.0, 1.0)));
        let (rows, _) = gpu_hours(&[allocation("a", 0, 8.0)], &metrics, 0.10);
        assert_eq!((rows[0].allocated_gpu_hours, rows[0].idle_gpu_hours), (8.0, 7.0));
        assert!((rows[0].used_gpu_hours - 0.9).abs() < 1e-12);
    }

    #[test]
    fn without_a_bill_the_metrics_allocate() {
        let (rows, _) = gpu_hours(&[], &[usage("a", 0, 0.8, 0.5)], 0.10);
        assert_eq!((rows[0].allocated_gpu_hours, rows[0].used_gpu_hours), (0.5, 0.4));
    }
}
