//! Aggregates of a period's cost facts, built while the facts stream into the store and
//! written in the same transaction, so the engine reads pod-days and GPU pod-hours (a few
//! hundred thousand rows for a ten-million-row month) instead of scanning every fact.

use std::collections::HashMap;

use super::model::{FactRecord, GpuPodHour, PodDay};

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
                }
                _ => d.memory_cost_nanos += cost,
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
