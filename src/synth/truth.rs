//! `truth.json`: the answers, computed from the generator's own model while it writes the
//! bill — never by reading its files back — so tests of ingest and the engine have an
//! independent figure to meet.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::split::Resource;

use super::bill::SplitRow;
use super::fleet::{Purchase, Server, WORKLOADS, World};

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
    /// Split usage of the vCPU and memory rows: vCPU-hours and GB-hours reserved.
    pub vcpu_hours: f64,
    pub memory_gb_hours: f64,
    /// Split + unused cost of accelerator rows, and of those in idle GPU-hours.
    pub gpu_cost: f64,
    pub idle_gpu_cost: f64,
    /// The full cost (GPU, vCPU and memory rows) of idle GPU pod-hours, judged per GPU.
    pub idle_cost: f64,
    /// Public on-demand − actual (split + unused), on Spot nodes and on Savings Plans/RI nodes.
    pub spot_savings: f64,
    pub commitment_savings: f64,
    pub requests: u64,
    pub prompt_tokens: u64,
    pub generation_tokens: u64,
    /// Split + unused of the pod-hours that served requests (every row of those hours).
    pub serving_cost: f64,
    /// `serving_cost / requests`, when the workload served requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_per_inference: Option<f64>,
}

/// Fleet-level GPU-hours for one GPU model.
#[derive(Debug, Default, Clone, Serialize)]
pub struct GpuModelHours {
    pub provisioned_gpu_hours: f64,
    pub allocated_gpu_hours: f64,
    pub unallocated_gpu_hours: f64,
    /// Of the unallocated hours, those of nodes still booting: billed, but before any pod
    /// (dcgm-exporter included) ran, so no metrics see them.
    pub booting_gpu_hours: f64,
    /// GPU fleet cost: every instance-hour of this model (amortized), pods or not.
    pub fleet_cost: f64,
    /// Split + unused of the accelerator rows on these instances (AWS's accelerator share).
    pub accelerator_cost: f64,
    /// The full cost (every resource) of idle GPU pod-hours, judged per GPU.
    pub idle_cost: f64,
    /// The accelerator rows of idle GPU pod-hours alone.
    pub idle_accelerator_cost: f64,
    /// What no pod requested: fleet cost − the pods' split cost on these instances.
    pub unallocated_cost: f64,
    /// Allocated GPU-hours by their pod-hour's mean utilization, in twenty 5 % steps (the
    /// last holds 95–100 %).
    pub utilization_gpu_hours: Vec<f64>,
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
    /// EC2 instance cost no pod was given: instance-hours with no split rows (a node's
    /// hours before its first pod, an instance outside Kubernetes), plus any parent cost the
    /// split rows of an hour do not cover.
    pub unallocated_ec2_cost: f64,
    /// Instance-hours with no split rows.
    pub instance_hours_without_pods: f64,
    /// Of the unallocated EC2 cost, that of instances outside any cluster (the bastion).
    pub ec2_outside_clusters_cost: f64,
    /// The amortized bill less Kubernetes and unallocated EC2 cost: every other usage and
    /// fee line (S3, data transfer, control plane, unused commitments).
    pub other_cost: f64,
    pub other_cost_by_service: BTreeMap<String, f64>,
    /// The daily non-Kubernetes lines by what they bought (`storage`, `network`, `other`); the
    /// rest of other cost (the control plane, unused commitments, fees) is none of these.
    pub other_cost_by_category: BTreeMap<String, f64>,
    /// Discounts, credits, refunds and tax: on the invoice, outside the amortized bill.
    pub adjustments: Adjustments,
    /// The amortized bill net of discounts, credits and refunds; only in months whose export
    /// has `net_*` columns.
    pub net_amortized: Option<f64>,
    /// Non-Kubernetes lines tagged `user_client`, per client and category.
    pub non_kubernetes_by_client: BTreeMap<String, NonKubernetes>,
    /// Non-Kubernetes lines of a cluster that no client tag claims (control plane, node
    /// root volumes), per cluster.
    pub cluster_shared_cost: BTreeMap<String, f64>,
    /// Largest |Σ(split + unused) − amortized| over all instance-hours, USD.
    pub max_instance_hour_error: f64,
    pub instance_hours_by_purchase_option: BTreeMap<String, f64>,
    /// The pods' cost (split + unused) and GPU-hours by purchase option, an instance-hour
    /// billed in several lines weighted by their usage amounts (part Savings Plan, part
    /// On-Demand at the peak hours).
    pub pods_by_purchase_option: BTreeMap<String, OptionSums>,
    pub gpu_models: BTreeMap<String, GpuModelHours>,
    pub namespaces: BTreeMap<String, Sums>,
    /// Keyed `namespace/workload` (Deployment, Job, StatefulSet or DaemonSet name).
    pub workloads: BTreeMap<String, Sums>,
    /// Keyed `namespace/family`: the workloads as declared, a CronJob's Jobs (one per run,
    /// named with the run's schedule) summed under the CronJob's name, any other workload alone.
    pub workload_families: BTreeMap<String, Sums>,
    /// Keyed by the `user_client` label; pods without one under `(unassigned)`.
    pub clients: BTreeMap<String, Sums>,
    /// Chargeback with every client on the default policy (shares proportional to GPU cost,
    /// no markup): platform namespaces' cost and all other pods' unused cost are shared.
    pub chargeback: BTreeMap<String, Chargeback>,
    pub platform_namespaces: Vec<String>,
    pub idle_threshold: f64,
    /// Requests per `cluster/namespace/workload`: a StatefulSet in two clusters has pods of
    /// the same name in each, and each cluster's requests are its own.
    pub requests_by_cluster: BTreeMap<String, u64>,
    /// The amortized bill per usage account (the payer's own lines included); Σ
    /// `amortized_cost` = `bill_amortized`.
    pub accounts: BTreeMap<String, AccountTruth>,
    /// The Savings Plan and reservations billed in the month.
    pub commitments: Vec<CommitmentTruth>,
    /// What Cost Explorer says of the month's lines (written to `cost-explorer.json`).
    #[serde(skip)]
    pub cost_explorer: super::cost_explorer::CeTally,
}

/// One commitment's month: its term, what it cost and how much of that was used, USD.
#[derive(Debug, Serialize)]
pub struct CommitmentTruth {
    pub id: String,
    /// `savings_plan` or `reservation`.
    pub kind: &'static str,
    /// `Compute` for the Compute Savings Plan, the instance family for a reservation.
    pub family: &'static str,
    pub instance_type: Option<&'static str>,
    /// The plan's commitment, or the reservation's fee for all its instances, USD an hour.
    pub hourly_commitment: f64,
    pub count: u32,
    /// RFC 3339.
    pub term_start: String,
    pub term_end: String,
    pub fee: f64,
    pub used: f64,
    pub utilization: f64,
}

impl CommitmentTruth {
    pub fn of(commitment: &super::fleet::Commitment, fee: f64, used: f64) -> CommitmentTruth {
        let time = |t: i64| {
            chrono::DateTime::from_timestamp(t, 0)
                .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                .unwrap_or_default()
        };
        let reservation = commitment.purchase == super::fleet::Purchase::Reserved;
        CommitmentTruth {
            id: commitment.arn.clone(),
            kind: if reservation { "reservation" } else { "savings_plan" },
            family: commitment.instance_type.map_or("Compute", |t| t.family),
            instance_type: commitment.instance_type.filter(|_| reservation).map(|t| t.name),
            hourly_commitment: commitment.hourly * f64::from(commitment.count),
            count: commitment.count,
            term_start: time(commitment.start),
            term_end: time(commitment.end),
            fee,
            used,
            utilization: if fee > 0.0 { used / fee } else { 0.0 },
        }
    }
}

/// One usage account's share of the amortized bill, USD.
#[derive(Debug, Default, Serialize)]
pub struct AccountTruth {
    pub name: String,
    /// Every amortized line billed to the account.
    pub amortized_cost: f64,
    /// Σ split + unused of the pods on the account's instances.
    pub kubernetes_cost: f64,
    /// Amortized cost of the account's EC2 instance-hours (with pods or not).
    pub instance_cost: f64,
}

/// One client's chargeback under the default policy, USD.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Chargeback {
    /// The client's pods' split cost.
    pub direct_cost: f64,
    /// Lines tagged to the client; for `(unassigned)`, every line nobody claims and EC2
    /// outside any cluster.
    pub non_kubernetes_direct: f64,
    pub shared_platform: f64,
    pub shared_idle: f64,
    /// Share of cluster cost no client claims (control plane, root volumes).
    pub shared_infrastructure: f64,
    /// Share of EC2 of clusters not allocated to pods.
    pub shared_unallocated: f64,
    pub total_cost: f64,
}

/// The pods' cost and GPU-hours under one purchase option.
#[derive(Debug, Default, Clone, Serialize)]
pub struct OptionSums {
    pub cost: f64,
    pub gpu_hours: f64,
}

/// Lines of the invoice outside the amortized bill, USD.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Adjustments {
    pub discounts: f64,
    pub credits: f64,
    pub refunds: f64,
    pub tax: f64,
}

/// One client's tagged non-Kubernetes cost by category, USD.
#[derive(Debug, Default, Clone, Serialize)]
pub struct NonKubernetes {
    pub storage_gb_months: f64,
    pub storage: f64,
    pub network: f64,
    pub other: f64,
    pub total: f64,
}

/// Namespaces whose cost is shared out (the engine's default list).
const PLATFORM_NAMESPACES: &[&str] = &["kube-system", "monitoring", "gpu-operator"];

/// GPU-hours under this hourly mean utilization count as idle.
pub const IDLE_THRESHOLD: f64 = 0.10;

impl Truth {
    pub fn new(period: String) -> Truth {
        Truth {
            period,
            idle_threshold: IDLE_THRESHOLD,
            platform_namespaces: PLATFORM_NAMESPACES.iter().map(|s| s.to_string()).collect(),
            ..Truth::default()
        }
    }

    /// Adds one instance-hour and its pods' split rows.
    /// An amortized line billed to `account`: `instance` when it is an EC2 instance-hour,
    /// `kubernetes` the split + unused cost its pods were given.
    pub fn add_account_line(
        &mut self,
        account: (&str, &str),
        amortized: f64,
        instance: bool,
        kubernetes: f64,
    ) {
        let entry = self.accounts.entry(account.0.to_string()).or_default();
        entry.name = account.1.to_string();
        entry.amortized_cost += amortized;
        entry.kubernetes_cost += kubernetes;
        if instance {
            entry.instance_cost += amortized;
        }
    }

    pub fn add_node_hour(
        &mut self,
        world: &World,
        node_index: usize,
        hour: u32,
        amortized: f64,
        covered: f64,
        rows: &[SplitRow],
    ) {
        let node = &world.nodes[node_index];
        let net_factor = if world.has_discount { 1.0 - super::bill::EDP_RATE } else { 1.0 };
        // The options the hour was billed under, with their shares of its usage.
        let options: Vec<(&str, f64)> = if covered < 1.0 {
            vec![(node.purchase.label(), covered), (Purchase::OnDemand.label(), 1.0 - covered)]
        } else {
            vec![(node.purchase.label(), 1.0)]
        };
        for (option, share) in &options {
            *self.instance_hours_by_purchase_option.entry(option.to_string()).or_default() += share;
        }
        self.instance_amortized_cost += amortized;
        let gpus = node.instance_type.gpus;
        let mut allocated_here = 0.0;
        let mut hour_total = 0.0;
        for row in rows {
            let pod = &world.pods[row.pod];
            let workload = &WORKLOADS[pod.workload];
            let total = row.split.split_cost + row.split.unused_cost;
            hour_total += total;
            // Idle is judged per GPU: the share of the pod's GPUs below the threshold.
            let idle_share =
                if pod.gpus > 0 { world.idle_gpu_share(row.pod, hour, IDLE_THRESHOLD) } else { 0.0 };
            let (allocated, used, idle, gpu_cost, idle_cost) = if row.resource == Resource::Accelerator {
                let utilization = world.gpu_utilization(row.pod, hour);
                // The pod's share of the instance's GPUs: its split usage, or, when the pods
                // asked for more GPUs than there are (time-slicing), its split usage ratio of
                // them, so a GPU never holds more than one GPU-hour an hour.
                let allocated = row.split.split_usage.min(row.split.ratio * f64::from(gpus));
                let idle_share = if allocated > 0.0 { idle_share } else { 0.0 };
                (allocated, utilization * allocated, allocated * idle_share, total, total * idle_share)
            } else {
                (0.0, 0.0, 0.0, 0.0, 0.0)
            };
            // The full cost of idle GPU pod-hours: every resource the pod reserved.
            let idle_full_cost = total * idle_share;
            if gpus > 0 {
                let model = self.gpu_models.entry(node.instance_type.gpu_model.to_string()).or_default();
                if allocated > 0.0 {
                    let utilization = world.gpu_utilization(row.pod, hour);
                    model.utilization_gpu_hours.resize(crate::store::UTILIZATION_BUCKETS, 0.0);
                    model.utilization_gpu_hours[crate::store::utilization_bucket(utilization)] += allocated;
                }
                model.accelerator_cost += gpu_cost;
                model.idle_cost += idle_full_cost;
                model.idle_accelerator_cost += idle_cost;
                model.unallocated_cost -= row.split.split_cost;
            }
            for (option, share) in &options {
                let sums = self.pods_by_purchase_option.entry(option.to_string()).or_default();
                sums.cost += total * share;
                sums.gpu_hours += allocated * share;
            }
            let saved = row.public_split + row.public_unused - total;
            let (spot_saved, commitment_saved) = match node.purchase {
                Purchase::Spot => (saved, 0.0),
                Purchase::OnDemand => (0.0, 0.0),
                _ => (0.0, saved * covered),
            };
            allocated_here += allocated;
            let spot = if node.purchase == Purchase::Spot { allocated } else { 0.0 };
            // Requests and tokens are counted once per pod-hour, on its vCPU row.
            let served = if WORKLOADS[pod.workload].server == Server::None {
                (0, 0, 0)
            } else {
                world.served(row.pod, hour)
            };
            let serving_cost = if served.0 > 0 { total } else { 0.0 };
            let (requests, prompt, generation) =
                if row.resource == Resource::Vcpu { served } else { (0, 0, 0) };
            if requests > 0 {
                let key = format!(
                    "{}/{}/{}",
                    super::fleet::CLUSTERS[node.cluster].name,
                    workload.namespace,
                    workload_name(world, row.pod)
                );
                *self.requests_by_cluster.entry(key).or_default() += requests;
            }
            let workload_key = format!("{}/{}", workload.namespace, workload_name(world, row.pod));
            let client = workload.client.unwrap_or("(unassigned)").to_string();
            for sums in [
                self.namespaces.entry(workload.namespace.to_string()).or_default(),
                self.workloads.entry(workload_key.clone()).or_default(),
                self.workload_families
                    .entry(format!("{}/{}", workload.namespace, workload.name))
                    .or_default(),
                self.clients.entry(client.clone()).or_default(),
            ] {
                sums.split_cost += row.split.split_cost;
                sums.unused_cost += row.split.unused_cost;
                sums.total_cost += total;
                sums.net_total_cost += total * net_factor;
                sums.public_on_demand_total_cost += row.public_split + row.public_unused;
                sums.gpu_hours_allocated += allocated;
                match row.resource {
                    Resource::Vcpu => sums.vcpu_hours += row.split.split_usage,
                    Resource::Memory => sums.memory_gb_hours += row.split.split_usage,
                    Resource::Accelerator => {}
                }
                sums.gpu_hours_used += used;
                sums.gpu_hours_idle += idle;
                sums.spot_gpu_hours += spot;
                sums.gpu_cost += gpu_cost;
                sums.idle_gpu_cost += idle_cost;
                sums.idle_cost += idle_full_cost;
                sums.spot_savings += spot_saved;
                sums.commitment_savings += commitment_saved;
                sums.requests += requests;
                sums.serving_cost += serving_cost;
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
            model.fleet_cost += amortized;
            model.unallocated_cost += amortized;
        }
    }

    /// Adds a non-Kubernetes cost line (amortized USD).
    pub fn add_other(&mut self, service: &str, amortized: f64) {
        *self.other_cost_by_service.entry(service.to_string()).or_default() += amortized;
    }

    /// Adds an instance-hour no pod was given (booting node, instance outside Kubernetes).
    pub fn add_instance_hour_without_pods(
        &mut self,
        purchase_option: &str,
        gpu: Option<(&str, u32)>,
        in_cluster: bool,
        cost: f64,
    ) {
        if !in_cluster {
            self.ec2_outside_clusters_cost += cost;
        }
        *self.instance_hours_by_purchase_option.entry(purchase_option.to_string()).or_default() += 1.0;
        self.instance_hours_without_pods += 1.0;
        self.unallocated_ec2_cost += cost;
        if let Some((model, gpus)) = gpu.filter(|(_, gpus)| *gpus > 0) {
            let model = self.gpu_models.entry(model.to_string()).or_default();
            model.provisioned_gpu_hours += f64::from(gpus);
            model.unallocated_gpu_hours += f64::from(gpus);
            model.booting_gpu_hours += f64::from(gpus);
            model.fleet_cost += cost;
            model.unallocated_cost += cost;
        }
    }

    /// Adds a non-Kubernetes line carrying a `user_client` tag, with the GB-months of storage
    /// it held (0 for anything else).
    pub fn add_client_line(&mut self, client: &str, category: &str, cost: f64, gb_months: f64) {
        let entry = self.non_kubernetes_by_client.entry(client.to_string()).or_default();
        entry.storage_gb_months += gb_months;
        match category {
            "storage" => entry.storage += cost,
            "network" => entry.network += cost,
            _ => entry.other += cost,
        }
        entry.total += cost;
    }

    /// Adds a non-Kubernetes line of a cluster that no client claims.
    pub fn add_cluster_line(&mut self, cluster: &str, cost: f64) {
        *self.cluster_shared_cost.entry(cluster.to_string()).or_default() += cost;
    }

    /// Derives ratios and totals once the month is written.
    pub fn finish(&mut self) {
        // Parent cost the split rows of hosting hours do not cover is unallocated too.
        self.unallocated_ec2_cost += self.instance_amortized_cost - self.kubernetes_allocated_cost;
        self.other_cost = self.bill_amortized - self.kubernetes_allocated_cost - self.unallocated_ec2_cost;
        for sums in
            self.workloads.values_mut().chain(self.namespaces.values_mut()).chain(self.clients.values_mut())
        {
            if sums.requests > 0 {
                sums.cost_per_inference = Some(sums.serving_cost / sums.requests as f64);
            }
        }
        self.chargeback = self.default_chargeback();
    }

    /// Per client: split cost and tagged non-Kubernetes cost direct; the platform pool
    /// (platform namespaces' split + unused), the idle pool (everyone else's unused) and the
    /// shared pool (clusters' unclaimed lines) and the unallocated pool (EC2 of clusters not
    /// allocated to pods) shared by GPU cost over all recipients, `(unassigned)` included
    /// (the default rule of every pool), which also keeps every line nobody claims. Σ totals
    /// = the amortized bill.
    fn default_chargeback(&self) -> BTreeMap<String, Chargeback> {
        let platform = |f: fn(&Sums) -> f64| -> f64 {
            PLATFORM_NAMESPACES.iter().filter_map(|ns| self.namespaces.get(*ns)).map(f).sum()
        };
        let platform_pool = platform(|s| s.total_cost);
        let platform_unused = platform(|s| s.unused_cost);
        let platform_split = platform_pool - platform_unused;
        let platform_gpu = platform(|s| s.gpu_cost);
        // Platform pods carry no client label: they sit in `(unassigned)` in `clients`.
        let mut direct: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
        for (client, sums) in &self.clients {
            let mut entry = (sums.split_cost, sums.unused_cost, sums.gpu_cost);
            if client == "(unassigned)" {
                entry = (entry.0 - platform_split, entry.1 - platform_unused, entry.2 - platform_gpu);
            }
            direct.insert(client.clone(), entry);
        }
        for client in self.non_kubernetes_by_client.keys() {
            direct.entry(client.clone()).or_default();
        }
        direct.entry("(unassigned)".into()).or_default();
        let idle_pool: f64 = direct.values().map(|d| d.1).sum();
        let gpu_total: f64 = direct.values().map(|d| d.2).sum();
        let clusters: f64 = self.cluster_shared_cost.values().sum();
        let unallocated_pool = self.unallocated_ec2_cost - self.ec2_outside_clusters_cost;
        let tagged = |client: &str| self.non_kubernetes_by_client.get(client).map_or(0.0, |n| n.total);
        let mut out = BTreeMap::new();
        let (mut platform_given, mut idle_given, mut infrastructure_given, mut unallocated_given) =
            (0.0, 0.0, 0.0, 0.0);
        for (client, (split, _, gpu)) in direct.iter().filter(|(c, _)| *c != "(unassigned)") {
            let weight = if gpu_total > 0.0 { gpu / gpu_total } else { 0.0 };
            let (platform, idle, infrastructure, unallocated) =
                (platform_pool * weight, idle_pool * weight, clusters * weight, unallocated_pool * weight);
            platform_given += platform;
            idle_given += idle;
            infrastructure_given += infrastructure;
            unallocated_given += unallocated;
            let non_kubernetes = tagged(client);
            out.insert(
                client.clone(),
                Chargeback {
                    direct_cost: *split,
                    non_kubernetes_direct: non_kubernetes,
                    shared_platform: platform,
                    shared_idle: idle,
                    shared_infrastructure: infrastructure,
                    shared_unallocated: unallocated,
                    total_cost: split + non_kubernetes + platform + idle + infrastructure + unallocated,
                },
            );
        }
        let house = direct["(unassigned)"].0;
        let claimed: f64 = self.non_kubernetes_by_client.values().map(|n| n.total).sum();
        let unclaimed = self.other_cost - claimed - clusters + self.ec2_outside_clusters_cost;
        let (platform, idle, infrastructure, unallocated) = (
            platform_pool - platform_given,
            idle_pool - idle_given,
            clusters - infrastructure_given,
            unallocated_pool - unallocated_given,
        );
        out.insert(
            "(unassigned)".into(),
            Chargeback {
                direct_cost: house,
                non_kubernetes_direct: unclaimed,
                shared_platform: platform,
                shared_idle: idle,
                shared_infrastructure: infrastructure,
                shared_unallocated: unallocated,
                total_cost: house + unclaimed + platform + idle + infrastructure + unallocated,
            },
        );
        out
    }
}

/// The workload a pod belongs to as people name it: the Deployment for ReplicaSet pods,
/// else the controller (Job, StatefulSet, DaemonSet).
pub fn workload_name(world: &World, pod: usize) -> String {
    let p = &world.pods[pod];
    let workload = &WORKLOADS[p.workload];
    if workload.kind == "ReplicaSet" { workload.name.to_string() } else { p.controller.clone() }
}
