//! Aggregates of a period's cost facts, built while the facts stream into the store and
//! written in the same transaction, so the engine reads pod-days and GPU pod-hours (a few
//! hundred thousand rows for a ten-million-row month) instead of scanning every fact.

use std::collections::HashMap;

use super::model::{FactRecord, GpuPodHour, PodDay, PodRecord};

const DAY: i64 = 86_400;

/// Running sums over the facts seen so far.
#[derive(Debug, Default)]
pub(crate) struct FactAggregates {
    days: HashMap<(i64, i64), PodDay>,
    /// (pod, hour) → (GPU-hours, GPU cost, cost of every resource).
    hours: HashMap<(i64, i64), (f64, i64, i64)>,
}

impl FactAggregates {
    pub(crate) fn add(&mut self, facts: &[FactRecord]) {
        for f in facts {
            let day = f.hour - f.hour.rem_euclid(DAY);
            let d = self.days.entry((f.pod_id, day)).or_insert_with(|| PodDay {
                pod_id: f.pod_id,
                day,
                ..PodDay::default()
            });
            let cost = f.split_cost_nanos + f.unused_cost_nanos;
            match f.resource {
                "gpu" => {
                    d.gpu_hours += f.split_usage;
                    d.gpu_cost_nanos += cost;
                    d.gpu_split_nanos += f.split_cost_nanos;
                }
                "vcpu" => {
                    d.cpu_cost_nanos += cost;
                    d.cpu_split_nanos += f.split_cost_nanos;
                    d.vcpu_hours += f.split_usage;
                }
                _ => {
                    d.memory_cost_nanos += cost;
                    d.memory_gb_hours += f.split_usage;
                }
            }
            d.split_cost_nanos += f.split_cost_nanos;
            d.unused_cost_nanos += f.unused_cost_nanos;
            d.net_cost_nanos += f.net_split_cost_nanos + f.net_unused_cost_nanos;
            d.public_on_demand_cost_nanos +=
                f.public_on_demand_split_cost_nanos + f.public_on_demand_unused_cost_nanos;
            let h = self.hours.entry((f.pod_id, f.hour)).or_default();
            if f.resource == "gpu" {
                h.0 += f.split_usage;
                h.1 += cost;
            }
            h.2 += cost;
        }
    }

    /// Time-sliced GPUs: when the pods on an instance were allocated more GPU-hours in an
    /// hour than it has GPUs (the device plugin advertises replicas and each pod requests
    /// one), each pod's GPU-hours are scaled by GPUs / allocated — its split usage ratio of the
    /// instance's GPUs, as AWS divides the cost — so a GPU never counts more than one GPU-hour
    /// per hour; pod-days follow. Instances whose type the catalog does not know are left as
    /// the bill says. Returns the instance-hours scaled.
    pub(crate) fn share_oversubscribed_gpus(&mut self, pods: &[PodRecord]) -> usize {
        let capacity: HashMap<i64, (&str, f64)> = pods
            .iter()
            .filter_map(|p| {
                let gpus = crate::catalog::instance_type(&p.instance_type)?.gpus;
                Some((p.id, (p.instance_id.as_str(), f64::from(gpus))))
            })
            .collect();
        let mut allocated: HashMap<(&str, i64), f64> = HashMap::new();
        for (&(pod, hour), h) in &self.hours {
            if let Some((instance, _)) = capacity.get(&pod) {
                *allocated.entry((instance, hour)).or_default() += h.0;
            }
        }
        let mut scaled = std::collections::HashSet::new();
        for (&(pod, hour), h) in self.hours.iter_mut() {
            let Some(&(instance, gpus)) = capacity.get(&pod) else { continue };
            let total = allocated[&(instance, hour)];
            if gpus > 0.0 && total > gpus + 1e-9 {
                let shared = h.0 * gpus / total;
                if let Some(day) = self.days.get_mut(&(pod, hour - hour.rem_euclid(DAY))) {
                    day.gpu_hours -= h.0 - shared;
                }
                h.0 = shared;
                scaled.insert((instance, hour));
            }
        }
        scaled.len()
    }

    /// Pod-days in a stable order.
    pub(crate) fn pod_days(&self) -> Vec<PodDay> {
        let mut days: Vec<PodDay> = self.days.values().cloned().collect();
        days.sort_by_key(|d| (d.pod_id, d.day));
        days
    }

    /// Pod-hours that held a GPU, in a stable order.
    pub(crate) fn gpu_pod_hours(&self) -> Vec<GpuPodHour> {
        let mut hours: Vec<GpuPodHour> = self
            .hours
            .iter()
            .filter(|(_, h)| h.0 > 0.0)
            .map(|(&(pod_id, hour), &(gpu_hours, gpu_cost_nanos, pod_cost_nanos))| GpuPodHour {
                pod_id,
                hour,
                gpu_hours,
                gpu_cost_nanos,
                pod_cost_nanos,
            })
            .collect();
        hours.sort_by_key(|h| (h.pod_id, h.hour));
        hours
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_sliced_gpu_counts_one_gpu_hour_per_hour() {
        // A g6.xlarge (one L4) time-sliced into four replicas: pods 1–4 each requested one in
        // hour 0 (4 GPU-hours billed on 1 GPU) → a quarter each. Pod 5 on a g6.12xlarge (four
        // L4) holds two of them: not oversubscribed, left alone.
        let gpu = |pod_id, usage: f64| FactRecord {
            pod_id,
            hour: 0,
            resource: "gpu",
            split_usage: usage,
            split_cost_nanos: 1_000,
            unused_cost_nanos: 0,
            net_split_cost_nanos: 1_000,
            net_unused_cost_nanos: 0,
            public_on_demand_split_cost_nanos: 1_000,
            public_on_demand_unused_cost_nanos: 0,
        };
        let pod = |id, instance_id: &str, instance_type: &str| PodRecord {
            id,
            instance_id: instance_id.into(),
            instance_type: instance_type.into(),
            ..PodRecord::default()
        };
        let mut a = FactAggregates::default();
        a.add(&[gpu(1, 1.0), gpu(2, 1.0), gpu(3, 1.0), gpu(4, 1.0), gpu(5, 2.0)]);
        let pods = [
            pod(1, "i-shared", "g6.xlarge"),
            pod(2, "i-shared", "g6.xlarge"),
            pod(3, "i-shared", "g6.xlarge"),
            pod(4, "i-shared", "g6.xlarge"),
            pod(5, "i-big", "g6.12xlarge"),
        ];
        assert_eq!(a.share_oversubscribed_gpus(&pods), 1, "one instance-hour was oversubscribed");
        let hours: Vec<(i64, f64)> = a.gpu_pod_hours().iter().map(|h| (h.pod_id, h.gpu_hours)).collect();
        assert_eq!(hours, vec![(1, 0.25), (2, 0.25), (3, 0.25), (4, 0.25), (5, 2.0)]);
        let days: f64 = a.pod_days().iter().filter(|d| d.pod_id <= 4).map(|d| d.gpu_hours).sum();
        assert_eq!(days, 1.0, "pod-days follow: the shared L4 is one GPU-hour");
    }

    #[test]
    fn facts_fold_into_pod_days_and_gpu_pod_hours() {
        // Pod 1 holds 2 GPUs for hours 0 and 1 of day 0 ($3 + $1 unused each hour) and a vCPU
        // ($0.5); hour 90000 is on day 1. Pod 2 has only CPU, so no GPU pod-hours.
        let fact = |pod_id, hour, resource, usage: f64, split, unused| FactRecord {
            pod_id,
            hour,
            resource,
            split_usage: usage,
            split_cost_nanos: split,
            unused_cost_nanos: unused,
            net_split_cost_nanos: split,
            net_unused_cost_nanos: unused,
            public_on_demand_split_cost_nanos: split,
            public_on_demand_unused_cost_nanos: unused,
        };
        let mut a = FactAggregates::default();
        a.add(&[
            fact(1, 0, "gpu", 2.0, 3_000_000_000, 1_000_000_000),
            fact(1, 0, "vcpu", 8.0, 500_000_000, 0),
            fact(1, 3600, "gpu", 2.0, 3_000_000_000, 1_000_000_000),
            fact(1, 90_000, "gpu", 1.0, 1_500_000_000, 0),
            fact(2, 0, "vcpu", 2.0, 100_000_000, 0),
        ]);
        let days = a.pod_days();
        // Pod 1, day 0: 4 GPU-hours, $8 GPU (2 × (3 + 1)), $0.5 CPU, $6.5 split.
        let day0 = days.iter().find(|d| (d.pod_id, d.day) == (1, 0)).unwrap();
        assert_eq!(
            (day0.gpu_hours, day0.gpu_cost_nanos, day0.cpu_cost_nanos),
            (4.0, 8_000_000_000, 500_000_000)
        );
        assert_eq!(day0.split_cost_nanos, 6_500_000_000);
        assert_eq!(days.len(), 3);
        let hours: Vec<(i64, i64, f64, i64)> =
            a.gpu_pod_hours().iter().map(|h| (h.pod_id, h.hour, h.gpu_hours, h.pod_cost_nanos)).collect();
        assert_eq!(
            hours,
            vec![(1, 0, 2.0, 4_500_000_000), (1, 3600, 2.0, 4_000_000_000), (1, 90_000, 1.0, 1_500_000_000)]
        );
    }
}
