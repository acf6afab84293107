//! Aggregates of a period's cost facts, built while the facts stream into the store and
//! written in the same transaction, so the engine reads pod-days and GPU pod-hours (a few
//! hundred thousand rows for a ten-million-row month) instead of scanning every fact.

use std::collections::BTreeMap;

// Maps keyed by pod ids, hours and instance ids, all read from the bill and touched once per
// fact (ten million times a month): foldhash (the hasher polars already uses) rather than
// SipHash, which showed as a tenth of the ingest's time.
use polars::prelude::{PlHashMap as HashMap, PlHashSet as HashSet};

use super::model::{FactRecord, GpuPodHour, InstanceHour, PodDay, PodDayOption, PodRecord, PurchaseOption};

const DAY: i64 = 86_400;

/// Running sums over the facts seen so far.
#[derive(Debug, Default)]
pub(crate) struct FactAggregates {
    /// Each pod-day, with its GPU, vCPU and memory usage summed in integer nano-units: the
    /// sums are the same whatever order the facts come in (a local read and a Spark job
    /// deliver them in different orders). The pod-day's own usage fields hold only the
    /// corrections made after summing (time-sliced GPUs) until [`FactAggregates::pod_days`].
    days: HashMap<(i64, i64), (PodDay, [i128; 3])>,
    /// (pod, hour) → (GPU-hours, GPU cost, cost of every resource).
    hours: HashMap<(i64, i64), (f64, i64, i64)>,
}

impl FactAggregates {
    pub(crate) fn add(&mut self, facts: &[FactRecord]) {
        for f in facts {
            let day = f.hour - f.hour.rem_euclid(DAY);
            let (d, usage) = self
                .days
                .entry((f.pod_id, day))
                .or_insert_with(|| (PodDay { pod_id: f.pod_id, day, ..PodDay::default() }, [0; 3]));
            let cost = f.split_cost_nanos + f.unused_cost_nanos;
            let nano_units = i128::from(crate::money::nanos_from_usd(f.split_usage));
            match f.resource {
                "gpu" => {
                    usage[0] += nano_units;
                    d.gpu_cost_nanos += cost;
                    d.gpu_split_nanos += f.split_cost_nanos;
                }
                "vcpu" => {
                    d.cpu_cost_nanos += cost;
                    d.cpu_split_nanos += f.split_cost_nanos;
                    usage[1] += nano_units;
                }
                _ => {
                    d.memory_cost_nanos += cost;
                    usage[2] += nano_units;
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
                (gpus > 0).then(|| (p.id, (p.instance_id.as_str(), f64::from(gpus))))
            })
            .collect();
        // Only pod-hours that held a GPU can share one (most hold none: CPU pods). They are
        // walked in (pod, hour) order, so the f64 sums are the same on every run.
        let mut held: Vec<(i64, i64)> =
            self.hours.iter().filter(|(_, h)| h.0 > 0.0).map(|(&key, _)| key).collect();
        held.sort_unstable();
        let mut allocated: HashMap<(&str, i64), f64> = HashMap::default();
        for key in &held {
            if let Some((instance, _)) = capacity.get(&key.0) {
                *allocated.entry((instance, key.1)).or_default() += self.hours[key].0;
            }
        }
        let mut scaled = HashSet::default();
        for &(pod, hour) in &held {
            let Some(&(instance, gpus)) = capacity.get(&pod) else { continue };
            let total = allocated[&(instance, hour)];
            if gpus > 0.0 && total > gpus + 1e-9 {
                let Some(h) = self.hours.get_mut(&(pod, hour)) else { continue };
                let shared = h.0 * gpus / total;
                if let Some((day, _)) = self.days.get_mut(&(pod, hour - hour.rem_euclid(DAY))) {
                    day.gpu_hours -= h.0 - shared;
                }
                h.0 = shared;
                scaled.insert((instance, hour));
            }
        }
        scaled.len()
    }

    /// The pod-days whose hours were not all billed under their pod's purchase option (an
    /// instance-hour in several lines, part Savings Plan, part On-Demand; or an hour under
    /// another option than the pod's first), split by option: each hour's cost and GPU-hours
    /// take each option in proportion to the usage amounts of the instance-hour's lines.
    pub(crate) fn pod_day_options(
        &self,
        pods: &[PodRecord],
        instance_hours: &[InstanceHour],
    ) -> Vec<PodDayOption> {
        // Only instances billed under more than one option (in one hour or across hours) can
        // have such pod-days: most months' instances are not, and are passed over cheaply.
        // Those are numbered: the pod-hours below are many, and look them up by number, not by
        // text.
        let mut first_option: HashMap<&str, PurchaseOption> = HashMap::default();
        let mut number: HashMap<&str, u32> = HashMap::default();
        for h in instance_hours {
            let first = *first_option.entry(h.instance_id.as_str()).or_insert(h.purchase_option);
            if first != h.purchase_option {
                let next = number.len() as u32;
                number.entry(h.instance_id.as_str()).or_insert(next);
            }
        }
        if number.is_empty() {
            return Vec::new();
        }
        let mut lines: HashMap<(u32, i64), Vec<(PurchaseOption, f64)>> = HashMap::default();
        for h in instance_hours {
            if let Some(&instance) = number.get(h.instance_id.as_str()) {
                lines.entry((instance, h.hour)).or_default().push((h.purchase_option, h.usage_hours));
            }
        }
        let pod_of: HashMap<i64, (u32, PurchaseOption)> = pods
            .iter()
            .filter_map(|p| Some((p.id, (*number.get(p.instance_id.as_str())?, p.purchase_option))))
            .collect();
        let own = |pod: i64, hour: i64| {
            let (instance, option) = *pod_of.get(&pod)?;
            Some((lines.get(&(instance, hour))?, option))
        };
        // One pass over every pod-hour keeps those of pods on such instances (a few percent).
        let mut mixed: HashSet<(i64, i64)> = HashSet::default();
        let mut candidates: Vec<(i64, i64, f64, i64)> = Vec::new();
        for (&(pod, hour), &(gpu_hours, _, cost)) in &self.hours {
            let Some(&(instance, option)) = pod_of.get(&pod) else { continue };
            candidates.push((pod, hour, gpu_hours, cost));
            if let Some(parts) = lines.get(&(instance, hour))
                && (parts.len() > 1 || parts[0].0 != option)
            {
                mixed.insert((pod, hour - hour.rem_euclid(DAY)));
            }
        }
        if mixed.is_empty() {
            return Vec::new();
        }
        // The hours of those pod-days in order, so that the sums (and so the weights) are the
        // same to the last bit on every run.
        let mut hours: Vec<(i64, i64, f64, i64)> = candidates
            .into_iter()
            .filter(|(pod, hour, ..)| mixed.contains(&(*pod, hour - hour.rem_euclid(DAY))))
            .collect();
        hours.sort_unstable_by_key(|&(pod, hour, ..)| (pod, hour));
        // (pod, day) → option → (cost, GPU-hours).
        let mut days: BTreeMap<(i64, i64), BTreeMap<PurchaseOption, (f64, f64)>> = BTreeMap::new();
        for (pod, hour, gpu_hours, cost) in hours {
            let day = hour - hour.rem_euclid(DAY);
            let by_option = days.entry((pod, day)).or_default();
            // An hour whose instance line is missing stays under the pod's own option.
            let whole = [(pod_of[&pod].1, 1.0)];
            let parts: &[(PurchaseOption, f64)] = own(pod, hour).map_or(&whole, |(parts, _)| parts);
            let usage: f64 = parts.iter().map(|(_, u)| u.max(0.0)).sum();
            for &(option, line_usage) in parts {
                let share = if usage > 0.0 { line_usage.max(0.0) / usage } else { 1.0 / parts.len() as f64 };
                let entry = by_option.entry(option).or_default();
                entry.0 += cost as f64 * share;
                entry.1 += gpu_hours * share;
            }
        }
        let mut rows = Vec::new();
        for ((pod_id, day), by_option) in days {
            let (cost, gpu): (f64, f64) = by_option.values().fold((0.0, 0.0), |s, v| (s.0 + v.0, s.1 + v.1));
            let count = by_option.len() as f64;
            for (purchase_option, (c, g)) in by_option {
                let cost_weight = if cost > 0.0 { c / cost } else { 1.0 / count };
                let gpu_hours_weight = if gpu > 0.0 { g / gpu } else { cost_weight };
                rows.push(PodDayOption { pod_id, day, purchase_option, cost_weight, gpu_hours_weight });
            }
        }
        rows
    }

    /// Pod-days in a stable order.
    pub(crate) fn pod_days(&self) -> Vec<PodDay> {
        let hours = |nano_units: i128| nano_units as f64 / 1e9;
        let mut days: Vec<PodDay> = self
            .days
            .values()
            .map(|(d, [gpu, vcpu, memory])| PodDay {
                gpu_hours: hours(*gpu) + d.gpu_hours,
                vcpu_hours: hours(*vcpu) + d.vcpu_hours,
                memory_gb_hours: hours(*memory) + d.memory_gb_hours,
                ..d.clone()
            })
            .collect();
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

    #[test]
    fn a_pod_day_on_an_hour_billed_part_savings_plan_part_on_demand_takes_each_by_usage() {
        // Pod 1 on i-a (its own option Savings Plans): hour 0 costs $10 for 1 GPU-hour, billed
        // 0.6 Savings Plan + 0.4 On-Demand; hour 1 costs $6 for 1 GPU-hour, all Savings Plan.
        // Savings Plans: 10 × 0.6 + 6 = $12 of $16 (0.75), 0.6 + 1 = 1.6 of 2 GPU-hours (0.8);
        // On-Demand: $4 (0.25), 0.4 GPU-hours (0.2). Pod 2 on i-b, On-Demand throughout: no row.
        let gpu = |pod_id, hour, cost| FactRecord {
            pod_id,
            hour,
            resource: "gpu",
            split_usage: 1.0,
            split_cost_nanos: cost,
            unused_cost_nanos: 0,
            net_split_cost_nanos: cost,
            net_unused_cost_nanos: 0,
            public_on_demand_split_cost_nanos: cost,
            public_on_demand_unused_cost_nanos: 0,
        };
        let mut a = FactAggregates::default();
        a.add(&[gpu(1, 0, 10_000_000_000), gpu(1, 3600, 6_000_000_000), gpu(2, 0, 5_000_000_000)]);
        let pod = |id, instance_id: &str, purchase_option| PodRecord {
            id,
            instance_id: instance_id.into(),
            purchase_option,
            ..PodRecord::default()
        };
        let pods = [pod(1, "i-a", PurchaseOption::SavingsPlans), pod(2, "i-b", PurchaseOption::OnDemand)];
        let line = |instance_id: &str, hour, purchase_option, usage_hours| InstanceHour {
            instance_id: instance_id.into(),
            hour,
            purchase_option,
            usage_hours,
            ..InstanceHour::default()
        };
        let lines = [
            line("i-a", 0, PurchaseOption::SavingsPlans, 0.6),
            line("i-a", 0, PurchaseOption::OnDemand, 0.4),
            line("i-a", 3600, PurchaseOption::SavingsPlans, 1.0),
            line("i-b", 0, PurchaseOption::OnDemand, 1.0),
        ];
        let rows: Vec<(i64, PurchaseOption, f64, f64)> = a
            .pod_day_options(&pods, &lines)
            .iter()
            .map(|r| (r.pod_id, r.purchase_option, r.cost_weight, r.gpu_hours_weight))
            .collect();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(
            (rows[0].0, rows[0].1, rows[1].1),
            (1, PurchaseOption::OnDemand, PurchaseOption::SavingsPlans)
        );
        assert!(close(rows[0].2, 0.25) && close(rows[0].3, 0.2), "{rows:?}");
        assert!(close(rows[1].2, 0.75) && close(rows[1].3, 0.8), "{rows:?}");
    }
}
