//! Which of the bill's pods a metrics row names. Metrics name a pod by (cluster, namespace,
//! pod name); the bill knows each pod by its UID. The same name can belong to several pods:
//! a StatefulSet's `ocr-triton-0` in two clusters, or the next pod of the same ordinal after
//! a restart. A metrics row with a cluster matches pods of that cluster only; one without
//! (a source that says no cluster) matches the name in any cluster.
//!
//! - GPU utilization is a rate: it applies to every matching pod that held GPUs in the hour.
//! - Requests are counts: a row's requests go to the matching pods running in that hour (by
//!   their GPU pod-hours, else their pod-days), split evenly when several do, never counted
//!   twice; a row no running pod matches is left out and counted.

use std::collections::{HashMap, HashSet};

use crate::store::{ComputeInputs, MeasuredPodHour, PodRecord, ServedPodHour};

/// A serving row resolved to one pod (its share of the requests when the name was shared).
#[derive(Debug, Clone, PartialEq)]
pub struct ServedByPod {
    pub pod_id: i64,
    pub hour: i64,
    pub requests: f64,
    pub prompt_tokens: f64,
    pub generation_tokens: f64,
}

/// The period's pods by name, and when each ran.
pub struct PodNames<'a> {
    pods: HashMap<i64, &'a PodRecord>,
    by_name: HashMap<(&'a str, &'a str), Vec<&'a PodRecord>>,
    gpu_hours: HashSet<(i64, i64)>,
    days: HashSet<(i64, i64)>,
}

impl<'a> PodNames<'a> {
    pub fn new(inputs: &'a ComputeInputs) -> PodNames<'a> {
        let mut by_name: HashMap<(&str, &str), Vec<&PodRecord>> = HashMap::new();
        for p in &inputs.pods {
            by_name.entry((p.namespace.as_str(), p.pod.as_str())).or_default().push(p);
        }
        PodNames {
            pods: inputs.pods.iter().map(|p| (p.id, p)).collect(),
            by_name,
            gpu_hours: inputs.gpu_pod_hours.iter().map(|h| (h.pod_id, h.hour)).collect(),
            days: inputs.pod_days.iter().map(|d| (d.pod_id, d.day)).collect(),
        }
    }

    pub fn pod(&self, id: i64) -> Option<&'a PodRecord> {
        self.pods.get(&id).copied()
    }

    /// The pods a (cluster, namespace, pod) names, in any cluster when `cluster` is empty.
    fn named(
        &self,
        cluster: &'a str,
        namespace: &'a str,
        pod: &'a str,
    ) -> impl Iterator<Item = &'a PodRecord> + '_ {
        self.by_name
            .get(&(namespace, pod))
            .into_iter()
            .flatten()
            .copied()
            .filter(move |p| cluster.is_empty() || p.cluster == cluster)
    }

    /// Measured pod-hours keyed by the cluster of the pods they apply to: a row without a
    /// cluster becomes one row per cluster its name is found in.
    pub fn measured(&self, rows: &'a [MeasuredPodHour]) -> Vec<MeasuredPodHour> {
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            if !row.cluster.is_empty() {
                out.push(row.clone());
                continue;
            }
            let mut clusters: Vec<&str> =
                self.named("", &row.namespace, &row.pod).map(|p| p.cluster.as_str()).collect();
            clusters.sort_unstable();
            clusters.dedup();
            out.extend(
                clusters
                    .into_iter()
                    .map(|cluster| MeasuredPodHour { cluster: cluster.to_string(), ..row.clone() }),
            );
        }
        out
    }

    /// GPU-hours the metrics measured on pods with no accelerator rows in the bill in that
    /// hour (a MIG resource AWS does not report as an accelerator, a pod the bill does not
    /// name): shown as measured but unbilled, not dropped.
    pub fn unbilled_gpu_hours(&self, rows: &'a [MeasuredPodHour]) -> f64 {
        rows.iter()
            .filter(|row| {
                !self
                    .named(&row.cluster, &row.namespace, &row.pod)
                    .any(|p| self.gpu_hours.contains(&(p.id, row.hour)))
            })
            .map(|row| row.weight)
            .sum()
    }

    /// Serving rows resolved to the pods running in their hour, requests split evenly among
    /// them; rows no running pod matches are dropped (`tracing` says how many requests).
    pub fn served(&self, rows: &'a [ServedPodHour]) -> Vec<ServedByPod> {
        let mut out = Vec::with_capacity(rows.len());
        let mut unmatched = 0.0;
        for row in rows {
            let day = row.hour - row.hour.rem_euclid(86_400);
            // The pods of that name with GPUs in the hour; else those the bill has that day (a
            // pod without GPUs, billed by the day). Not both: a name run again under a new uid
            // the same day is two pods, and only the one holding the hour served it.
            let named: Vec<i64> = self.named(&row.cluster, &row.namespace, &row.pod).map(|p| p.id).collect();
            let in_hour: Vec<i64> =
                named.iter().copied().filter(|id| self.gpu_hours.contains(&(*id, row.hour))).collect();
            let running = if in_hour.is_empty() {
                named.into_iter().filter(|id| self.days.contains(&(*id, day))).collect()
            } else {
                in_hour
            };
            if running.is_empty() {
                unmatched += row.requests;
                continue;
            }
            let share = 1.0 / running.len() as f64;
            out.extend(running.into_iter().map(|pod_id| ServedByPod {
                pod_id,
                hour: row.hour,
                requests: row.requests * share,
                prompt_tokens: row.prompt_tokens * share,
                generation_tokens: row.generation_tokens * share,
            }));
        }
        if unmatched > 0.0 {
            tracing::warn!(
                requests = unmatched,
                "requests of pods the bill does not have running in that hour"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::GpuPodHour;

    fn pod(id: i64, cluster: &str, name: &str) -> PodRecord {
        PodRecord {
            id,
            cluster: cluster.into(),
            namespace: "vision".into(),
            pod: name.into(),
            ..PodRecord::default()
        }
    }

    fn served(cluster: &str, hour: i64, requests: f64) -> ServedPodHour {
        ServedPodHour {
            cluster: cluster.into(),
            namespace: "vision".into(),
            pod: "ocr-0".into(),
            hour,
            requests,
            ..ServedPodHour::default()
        }
    }

    #[test]
    fn a_pod_name_in_two_clusters_is_counted_once_per_cluster() {
        // `ocr-0` runs in east (pod 1) and west (pod 2) in hour 0.
        let inputs = ComputeInputs {
            pods: vec![pod(1, "east", "ocr-0"), pod(2, "west", "ocr-0")],
            gpu_pod_hours: [1, 2]
                .map(|pod_id| GpuPodHour { pod_id, hour: 0, ..GpuPodHour::default() })
                .to_vec(),
            ..ComputeInputs::default()
        };
        let names = PodNames::new(&inputs);
        let resolved = names.served(&[served("east", 0, 100.0), served("west", 0, 30.0)]);
        let view: Vec<(i64, f64)> = resolved.iter().map(|s| (s.pod_id, s.requests)).collect();
        assert_eq!(view, vec![(1, 100.0), (2, 30.0)], "each cluster's requests to its own pod");
        // Without a cluster label the name is shared: split, never doubled (130 in all).
        let blind = names.served(&[served("", 0, 130.0)]);
        assert_eq!(blind.iter().map(|s| s.requests).sum::<f64>(), 130.0);
        // A pod not running in the hour takes nothing.
        assert!(names.served(&[served("east", 7200, 5.0)]).is_empty());
        // GPU metrics of east's pod in hour 0 are billed; in hour 7200 (no accelerator rows)
        // and of a pod the bill does not name, they are measured but unbilled.
        let measured = |pod: &str, hour, weight| MeasuredPodHour {
            cluster: "east".into(),
            namespace: "vision".into(),
            pod: pod.into(),
            hour,
            weight,
            ..MeasuredPodHour::default()
        };
        let rows = [measured("ocr-0", 0, 1.0), measured("ocr-0", 7200, 0.5), measured("ghost", 0, 2.0)];
        assert_eq!(names.unbilled_gpu_hours(&rows), 2.5);
    }

    #[test]
    fn a_name_run_again_the_same_day_serves_from_the_pod_holding_the_hour() {
        // `ocr-0` ran as pod 1 in hour 0 and, restarted under a new uid, as pod 2 in hour
        // 3600; both have a pod-day on day 0. Hour 3600's 40 requests are pod 2's alone.
        let inputs = ComputeInputs {
            pods: vec![pod(1, "east", "ocr-0"), pod(2, "east", "ocr-0")],
            pod_days: [1, 2]
                .map(|pod_id| crate::store::PodDay { pod_id, day: 0, ..Default::default() })
                .to_vec(),
            gpu_pod_hours: vec![
                GpuPodHour { pod_id: 1, hour: 0, ..GpuPodHour::default() },
                GpuPodHour { pod_id: 2, hour: 3600, ..GpuPodHour::default() },
            ],
            ..ComputeInputs::default()
        };
        let names = PodNames::new(&inputs);
        let resolved = names.served(&[served("east", 3600, 40.0)]);
        let view: Vec<(i64, f64)> = resolved.iter().map(|s| (s.pod_id, s.requests)).collect();
        assert_eq!(view, vec![(2, 40.0)]);
        // An hour neither held GPUs in: shared by the day's pods of that name (20 each).
        let resolved = names.served(&[served("east", 7200, 40.0)]);
        assert_eq!(
            resolved.iter().map(|s| (s.pod_id, s.requests)).collect::<Vec<_>>(),
            vec![(1, 20.0), (2, 20.0)]
        );
    }
}
