//! `gpuledger compute`: a billing period's cost and usage turned into rollups.
//!
//! Inputs are the period's pod-days and GPU pod-hours (aggregates the CUR ingest wrote
//! beside the facts), its pods, instance-hours and other cost, and the metrics of its hours.
//! polars joins them — GPU pod-hours with measured utilization (used, idle, unmeasured
//! GPU-hours and idle GPU cost), pod-hours with requests (cost per inference per pod-hour,
//! flagged above the fleet's 95th percentile), pod-days with everything — and sums to one
//! row per day and (cluster, namespace, workload, class, client, team, GPU model, purchase
//! option). Chargeback and opportunities are then computed from those rows in exact integer
//! arithmetic. The store writes the result in one transaction.

use std::collections::HashSet;

use polars::prelude::*;

use super::chargeback::{NonKubernetes, chargeback};
use super::classify::{ClientMatcher, PLATFORM, UNASSIGNED, label, workload_class};
use super::opportunities::{self, PodEvidence};
use super::pods::PodNames;
pub use crate::domain::settings::ComputeOptions;
use crate::domain::settings::Settings;
use crate::money::{Micros, Nanos};
use crate::period::Period;
use crate::store::{
    CapacityRollup, ComputeInputs, CostRollup, HeatmapCell, KubeSplitRollup, PeriodRollup, PurchaseOption,
    Rollups, Store, StoreError, UtilizationBucket, WorkloadClass, utilization_bucket,
};

/// Why a compute run stopped; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum ComputeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("computing {period}: {source}")]
    Polars {
        period: String,
        #[source]
        source: PolarsError,
    },
    #[error("no cost data for {0}: run `gpuledger ingest cur SOURCE` first")]
    NoData(Period),
    #[error("{0}")]
    Invalid(String),
}

/// What a compute run did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ComputeSummary {
    pub period: String,
    pub cost_rows: usize,
    pub client_rows: usize,
    pub opportunities: usize,
    pub read_seconds: f64,
    pub compute_seconds: f64,
    pub write_seconds: f64,
}

impl ComputeSummary {
    /// A period another job computed meanwhile: nothing written here.
    pub fn nothing(period: String) -> ComputeSummary {
        ComputeSummary {
            period,
            cost_rows: 0,
            client_rows: 0,
            opportunities: 0,
            read_seconds: 0.0,
            compute_seconds: 0.0,
            write_seconds: 0.0,
        }
    }
}

/// Computes one period with the settings in force for it and replaces its rollups.
#[tracing::instrument(skip_all, fields(period = %period))]
pub async fn compute_period(store: &dyn Store, period: Period) -> Result<ComputeSummary, ComputeError> {
    let started = std::time::Instant::now();
    tracing::debug!(phase = "compute", "computing rollups");
    let name = period.to_string();
    let settings = store.settings().await?.in_force(period).map_err(ComputeError::Invalid)?;
    let bills = store.bills(Some(&name)).await?;
    // A month without a CUR is its FOCUS bills alone (an Azure-only month, or AWS's FOCUS
    // export in place of the CUR): chargeback and the pages from them, the pods those of
    // gpuledger's splits.
    let (mut inputs, cur_account) = match store.compute_inputs(&name, settings.engine.idle_threshold).await? {
        Some(inputs) => {
            let payer = inputs.cur_billing_account.clone();
            (inputs, Some(payer))
        }
        None if bills.iter().any(|b| super::bills::counted(b, None)) => {
            (store.metrics_inputs(&name, settings.engine.idle_threshold).await?, None)
        }
        None => return Err(ComputeError::NoData(period)),
    };
    // Whose split divides each cluster's nodes: AWS's, else gpuledger's, whose pods then go
    // on the bill that paid for the nodes.
    let (kube_splits, split_nodes) = kube_splits(store, period, &inputs).await?;
    inputs.cluster_providers = kube_splits
        .iter()
        .map(|k| (k.cluster.clone(), k.provider.clone()))
        .filter(|(_, p)| !p.is_empty())
        .collect();
    // The month's other bills (Azure, Google, Oracle, another AWS payer), in USD.
    let providers: std::collections::BTreeSet<&str> = bills
        .iter()
        .filter(|b| super::bills::counted(b, cur_account.as_deref()))
        .map(|b| b.provider.as_str())
        .collect();
    if !providers.is_empty() {
        // Only the counted bills' charges: the CUR's FOCUS twin can be a large month.
        let mut charges = Vec::new();
        for provider in providers {
            charges.extend(store.month_charges(&name, Some(provider)).await?);
        }
        let days = store.gpu_charges(&name).await?;
        let rates = store.fx_rates().await?;
        let folded = super::bills::fold_bills(
            &mut inputs,
            cur_account.as_deref(),
            &bills,
            (&charges, &days),
            &rates,
            &split_nodes,
        )
        .map_err(|e| ComputeError::Invalid(e.to_string()))?;
        if !folded.bills.is_empty() {
            tracing::debug!(
                bills = folded.bills.join(", "),
                amortized_micros = folded.amortized_micros,
                split_clusters = folded.split_clusters.join(", "),
                "other bills counted"
            );
        }
    }
    // EKS clusters without AWS's split: gpuledger's split places their pods on the CUR's EC2.
    let cur_split = super::bills::place_cur_splits(&mut inputs, &split_nodes);
    if !cur_split.is_empty() {
        tracing::debug!(
            clusters = cur_split.join(", "),
            "pods of gpuledger's split placed on the CUR's instances"
        );
    }
    let read_seconds = started.elapsed().as_secs_f64();
    let mut rollups = tokio::task::spawn_blocking(move || build_rollups(&inputs, &settings))
        .await
        .map_err(|e| ComputeError::Invalid(format!("the compute task failed: {e}")))??;
    rollups.kube_splits = kube_splits;
    let compute_seconds = started.elapsed().as_secs_f64() - read_seconds;
    store.replace_rollups(&rollups).await?;
    Ok(ComputeSummary {
        period: name,
        cost_rows: rollups.costs.len(),
        client_rows: rollups.clients.len(),
        opportunities: rollups.opportunities.len(),
        read_seconds,
        compute_seconds,
        write_seconds: started.elapsed().as_secs_f64() - read_seconds - compute_seconds,
    })
}

/// Per cluster, whose split divides its node cost: AWS's wherever the CUR has split rows for
/// it, else gpuledger's from its Kubernetes series ([`super::cluster_split`]), with the
/// reconciliation to the bill that paid for its nodes; and the pods of gpuledger's splits
/// whose nodes one FOCUS bill paid for, for [`super::bills::fold_bills`] to place on it.
async fn kube_splits(
    store: &dyn Store,
    period: Period,
    inputs: &ComputeInputs,
) -> Result<(Vec<KubeSplitRollup>, Vec<super::bills::SplitNodes>), ComputeError> {
    use std::collections::BTreeMap;
    let name = period.to_string();
    let mut aws: BTreeMap<&str, i64> = BTreeMap::new();
    let cluster_of: std::collections::HashMap<i64, &str> =
        inputs.pods.iter().map(|p| (p.id, p.cluster.as_str())).collect();
    for day in &inputs.pod_days {
        if let Some(cluster) = cluster_of.get(&day.pod_id).filter(|c| !c.is_empty()) {
            *aws.entry(cluster).or_default() += day.split_cost_nanos + day.unused_cost_nanos;
        }
    }
    let mut out: Vec<KubeSplitRollup> = aws
        .iter()
        .map(|(cluster, nanos)| KubeSplitRollup {
            period: name.clone(),
            cluster: cluster.to_string(),
            provider: "aws".into(),
            currency: "USD".into(),
            method: KubeSplitRollup::AWS.into(),
            node_costs_from: "cur".into(),
            pods_nanos: *nanos,
            ..KubeSplitRollup::default()
        })
        .collect();
    let mut nodes = Vec::new();
    for cluster in store.kube_clusters(period.start(), period.end()).await? {
        if aws.contains_key(cluster.as_str()) {
            continue;
        }
        let row = match super::cluster_split::ClusterSplit::load(store, period, &cluster).await {
            Ok(split) => {
                nodes.extend(split_nodes(&split));
                let r = &split.reconciliation;
                KubeSplitRollup {
                    period: name.clone(),
                    cluster: cluster.clone(),
                    provider: split.provider.clone(),
                    currency: split.currency.clone(),
                    method: super::cluster_split::METHOD_ID.into(),
                    node_costs_from: split.node_costs_from.into(),
                    node_hours: r.node_hours as i64,
                    pod_hours: split.pod_hours() as i64,
                    bill_node_nanos: r.bill_node_nanos,
                    pods_nanos: r.pods_nanos,
                    unallocated_nanos: r.unallocated_nanos,
                    node_hours_without_pods: r.node_hours_without_pods as i64,
                    node_hours_not_in_bill: r.node_hours_not_in_bill as i64,
                    pod_hours_not_in_bill: r.pod_hours_not_in_bill as i64,
                    bill_hours_not_in_prometheus: r.bill_hours_not_in_prometheus as i64,
                    bill_hours_not_in_prometheus_nanos: r.bill_hours_not_in_prometheus_nanos,
                }
            }
            // Series and no bill for its nodes: said, not dropped.
            Err(super::cluster_split::SplitError::NoNodeCosts { .. }) => KubeSplitRollup {
                period: name.clone(),
                cluster: cluster.clone(),
                method: super::cluster_split::METHOD_ID.into(),
                node_costs_from: "none".into(),
                ..KubeSplitRollup::default()
            },
            Err(super::cluster_split::SplitError::Store(e)) => return Err(e.into()),
            Err(e) => return Err(ComputeError::Invalid(e.to_string())),
        };
        out.push(row);
    }
    out.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    by_month(store, &name, &mut nodes).await?;
    Ok((out, nodes))
}

/// The month's clusters gpuledger splits, as compute places them on the bill that paid for
/// their nodes (one FOCUS bill, or the CUR where AWS's split is off): for `report bill`,
/// which places each bill as compute does. A cluster the CUR has AWS's split for is not one;
/// a split that cannot be made is left off (compute says why).
pub async fn bill_split_nodes(
    store: &dyn Store,
    period: Period,
) -> Result<Vec<super::bills::SplitNodes>, crate::store::StoreError> {
    let splits = super::cluster_split::our_splits(store, period).await?;
    let mut nodes: Vec<_> = splits.iter().filter_map(split_nodes).collect();
    by_month(store, &period.to_string(), &mut nodes).await?;
    Ok(nodes)
}

/// The machines' charge groups by month ([`crate::store::BillCharge::month_key`]), as the fold
/// reads the bills.
async fn by_month(
    store: &dyn Store,
    period: &str,
    nodes: &mut [super::bills::SplitNodes],
) -> Result<(), crate::store::StoreError> {
    let providers: std::collections::BTreeSet<String> = nodes.iter().map(|n| n.provider.clone()).collect();
    for provider in providers {
        let month_key: std::collections::HashMap<String, String> = store
            .bill_charges(period, Some(&provider))
            .await?
            .iter()
            .map(|c| (c.untagged_key(), c.month_key()))
            .collect();
        for split in nodes.iter_mut().filter(|n| n.provider == provider) {
            for taken in &mut split.taken {
                if let Some(key) = month_key.get(&taken.1) {
                    taken.1.clone_from(key);
                }
            }
        }
    }
    Ok(())
}

/// A split whose node costs came from the CUR or from one FOCUS bill, as the fold takes it;
/// `None` (and a warning) where its machines are on several bills, whose pods stay off
/// chargeback.
fn split_nodes(split: &super::cluster_split::ClusterSplit) -> Option<super::bills::SplitNodes> {
    if split.node_costs_from == "cur" {
        let (pods, days, hours) = split.ledger_pods();
        return Some(super::bills::SplitNodes {
            cluster: split.cluster.clone(),
            provider: "aws".into(),
            pods,
            days,
            hours,
            from_cur: true,
            ..Default::default()
        });
    }
    let bills: std::collections::BTreeSet<(&str, &str)> =
        split.vms.iter().map(|v| (v.provider.as_str(), v.billing_account.as_str())).collect();
    if bills.len() > 1 {
        tracing::warn!(
            cluster = split.cluster,
            bills = bills.len(),
            "a cluster's machines on several bills: its pods are not placed on them"
        );
    }
    let [(provider, billing_account)] = bills.into_iter().collect::<Vec<_>>()[..] else { return None };
    let (pods, days, hours) = split.ledger_pods();
    Some(super::bills::SplitNodes {
        cluster: split.cluster.clone(),
        provider: provider.to_string(),
        billing_account: billing_account.to_string(),
        taken: split
            .vms
            .iter()
            .map(|v| (v.instance.clone(), v.charge_key.clone(), v.effective_nanos))
            .collect(),
        pods,
        days,
        hours,
        from_cur: false,
    })
}

/// Everything of one period, computed off the async runtime with the settings in force.
pub fn build_rollups(inputs: &ComputeInputs, settings: &Settings) -> Result<Rollups, ComputeError> {
    let period = inputs.period.clone();
    let polars_error = |source| ComputeError::Polars { period: period.clone(), source };
    let options = settings.compute_options();
    let matcher = ClientMatcher::new(&settings.rules, &options.platform_namespaces, &settings.client_labels)
        .map_err(ComputeError::Invalid)?;
    // Metrics name pods by (cluster, namespace, pod): resolve them to the bill's pods once.
    let names = PodNames::new(inputs);
    let served = names.served(&inputs.served);
    let serving_workloads: HashSet<(&str, &str)> = served
        .iter()
        .filter(|s| s.requests > 0.0)
        .filter_map(|s| names.pod(s.pod_id))
        .map(|p| (p.namespace.as_str(), p.workload.as_str()))
        .collect();
    let pods = {
        let p = &inputs.pods;
        let text = |f: &dyn Fn(&crate::store::PodRecord) -> String| p.iter().map(f).collect::<Vec<String>>();
        df!(
            "pod_id" => p.iter().map(|p| p.id).collect::<Vec<i64>>(),
            "cluster" => text(&|p| p.cluster.clone()),
            "namespace" => text(&|p| p.namespace.clone()),
            "pod" => text(&|p| p.pod.clone()),
            "workload" => text(&|p| p.workload.clone()),
            "workload_class" => text(&|p| workload_class(
                p,
                matcher.is_platform(&p.namespace),
                serving_workloads.contains(&(p.namespace.as_str(), p.workload.as_str())),
            )
            .to_string()),
            "client" => text(&|p| matcher.client(p)),
            "team" => text(&|p| label(&p.labels, "user_team").unwrap_or_default()),
            "gpu_model" => text(&|p| p.gpu_model.clone()),
            "purchase_option" => text(&|p| p.purchase_option.as_str().to_string()),
            "account" => text(&|p| p.usage_account_id.clone()),
        )
        .map_err(polars_error)?
    };
    let days = {
        let d = &inputs.pod_days;
        df!(
            "pod_id" => d.iter().map(|d| d.pod_id).collect::<Vec<i64>>(),
            "day" => d.iter().map(|d| d.day).collect::<Vec<i64>>(),
            "allocated" => d.iter().map(|d| d.gpu_hours).collect::<Vec<f64>>(),
            "gpu_cost" => d.iter().map(|d| d.gpu_cost_nanos).collect::<Vec<i64>>(),
            "split" => d.iter().map(|d| d.split_cost_nanos).collect::<Vec<i64>>(),
            "gpu_split" => d.iter().map(|d| d.gpu_split_nanos).collect::<Vec<i64>>(),
            "cpu_split" => d.iter().map(|d| d.cpu_split_nanos).collect::<Vec<i64>>(),
            "unused" => d.iter().map(|d| d.unused_cost_nanos).collect::<Vec<i64>>(),
            "net" => d.iter().map(|d| d.net_cost_nanos).collect::<Vec<i64>>(),
            "public" => d.iter().map(|d| d.public_on_demand_cost_nanos).collect::<Vec<i64>>(),
            "vcpu_hours" => d.iter().map(|d| d.vcpu_hours).collect::<Vec<f64>>(),
            "memory_gb_hours" => d.iter().map(|d| d.memory_gb_hours).collect::<Vec<f64>>(),
        )
        .map_err(polars_error)?
    };
    let option_weights = option_parts(&inputs.pod_day_options).map_err(polars_error)?;
    let gpu_hours = {
        let h = &inputs.gpu_pod_hours;
        df!(
            "pod_id" => h.iter().map(|h| h.pod_id).collect::<Vec<i64>>(),
            "hour" => h.iter().map(|h| h.hour).collect::<Vec<i64>>(),
            "gpu_hours" => h.iter().map(|h| h.gpu_hours).collect::<Vec<f64>>(),
            "gpu_cost" => h.iter().map(|h| h.gpu_cost_nanos).collect::<Vec<i64>>(),
            "pod_cost" => h.iter().map(|h| h.pod_cost_nanos).collect::<Vec<i64>>(),
        )
        .map_err(polars_error)?
    };
    let m = names.measured(&inputs.measured);
    let usage = df!(
        "cluster" => m.iter().map(|u| u.cluster.clone()).collect::<Vec<String>>(),
        "namespace" => m.iter().map(|u| u.namespace.clone()).collect::<Vec<String>>(),
        "pod" => m.iter().map(|u| u.pod.clone()).collect::<Vec<String>>(),
        "hour" => m.iter().map(|u| u.hour).collect::<Vec<i64>>(),
        "busy" => m.iter().map(|u| u.busy).collect::<Vec<f64>>(),
        "weight" => m.iter().map(|u| u.weight).collect::<Vec<f64>>(),
        "idle_weight" => m.iter().map(|u| u.idle_weight).collect::<Vec<f64>>(),
        "peak_fb" => m.iter().map(|u| u.peak_fb_used_mib).collect::<Vec<f64>>(),
    )
    .map_err(polars_error)?;
    let r = &served;
    let requests = df!(
        "pod_id" => r.iter().map(|i| i.pod_id).collect::<Vec<i64>>(),
        "hour" => r.iter().map(|i| i.hour).collect::<Vec<i64>>(),
        "requests" => r.iter().map(|i| i.requests).collect::<Vec<f64>>(),
        "prompt_tokens" => r.iter().map(|i| i.prompt_tokens).collect::<Vec<f64>>(),
        "generation_tokens" => r.iter().map(|i| i.generation_tokens).collect::<Vec<f64>>(),
    )
    .map_err(polars_error)?;

    let threshold = options.idle_threshold;
    let day_of = |hour: Expr| hour.clone() - hour % lit(86_400i64);
    let pod_names = pods.clone().lazy().select([col("pod_id"), col("cluster"), col("namespace"), col("pod")]);
    // GPU pod-hours with what the metrics measured (the store summed a pod-hour's GPUs, and
    // the GPU-hours of those idle on their own: idle is judged per GPU, not on the mean).
    // A pod-hour's idle share takes that share of its GPU-hours, of its accelerator cost and
    // of its full cost (costs are not negative: + 0.5 and truncation round to the nano).
    let measured = usage.lazy().with_columns([
        when(col("weight").gt(lit(0.0)))
            .then(col("busy") / col("weight"))
            .otherwise(lit(NULL))
            .alias("utilization"),
        when(col("weight").gt(lit(0.0)))
            .then(col("idle_weight") / col("weight"))
            .otherwise(lit(NULL))
            .alias("idle_share"),
    ]);
    let gpu_pod_hours = gpu_hours
        .lazy()
        .join(pod_names.clone(), [col("pod_id")], [col("pod_id")], JoinArgs::new(JoinType::Left))
        .join(
            measured,
            [col("cluster"), col("namespace"), col("pod"), col("hour")],
            [col("cluster"), col("namespace"), col("pod"), col("hour")],
            JoinArgs::new(JoinType::Left),
        )
        .with_columns([
            (col("utilization") * col("gpu_hours")).fill_null(lit(0.0)).alias("used"),
            (col("idle_share") * col("gpu_hours")).fill_null(lit(0.0)).alias("idle"),
            (col("idle_share") * col("gpu_cost").cast(DataType::Float64) + lit(0.5))
                .cast(DataType::Int64)
                .fill_null(lit(0i64))
                .alias("idle_cost"),
            (col("idle_share") * col("pod_cost").cast(DataType::Float64) + lit(0.5))
                .cast(DataType::Int64)
                .fill_null(lit(0i64))
                .alias("idle_full_cost"),
            when(col("utilization").is_null()).then(col("gpu_hours")).otherwise(lit(0.0)).alias("unmeasured"),
            day_of(col("hour")).alias("day"),
        ]);
    let heatmap = gpu_pod_hours
        .clone()
        .group_by([col("hour")])
        .agg([col("gpu_hours").sum(), col("used").sum()])
        .sort(["hour"], Default::default())
        .collect()
        .map_err(polars_error)?;
    let models = pods.clone().lazy().select([col("pod_id"), col("gpu_model")]);
    let distribution = gpu_pod_hours
        .clone()
        .filter(col("utilization").is_not_null())
        .join(models, [col("pod_id")], [col("pod_id")], JoinArgs::new(JoinType::Left))
        .select([col("gpu_model"), col("utilization"), col("gpu_hours")])
        .collect()
        .map_err(polars_error)?;
    let gpu_days = gpu_pod_hours.clone().group_by([col("pod_id"), col("day")]).agg([
        col("used").sum(),
        col("idle").sum(),
        col("idle_cost").sum(),
        col("idle_full_cost").sum(),
        col("unmeasured").sum(),
        col("peak_fb").max(),
    ]);
    // Serving pod-hours: requests, and the pod-hour's cost where it held GPUs.
    let served_hours = requests
        .lazy()
        .group_by([col("pod_id"), col("hour")])
        .agg([col("requests").sum(), col("prompt_tokens").sum(), col("generation_tokens").sum()])
        .join(
            gpu_pod_hours.select([col("pod_id"), col("hour"), col("pod_cost")]),
            [col("pod_id"), col("hour")],
            [col("pod_id"), col("hour")],
            JoinArgs::new(JoinType::Left),
        )
        .with_column(day_of(col("hour")).alias("day"))
        .collect()
        .map_err(polars_error)?;
    // The fleet's P95 of hourly cost per inference, over serving pod-hours with a cost.
    let mut per_inference: Vec<f64> = Vec::new();
    {
        let cost = served_hours.column("pod_cost").and_then(|c| c.i64()).map_err(polars_error)?;
        let count = served_hours.column("requests").and_then(|c| c.f64()).map_err(polars_error)?;
        for (cost, count) in cost.iter().zip(count.iter()) {
            if let (Some(cost), Some(count)) = (cost, count)
                && count > 0.0
            {
                per_inference.push(cost as f64 / 1e9 / count);
            }
        }
    }
    let p95 = percentile(&mut per_inference, 0.95);
    let served_days = served_hours
        .lazy()
        .with_columns([
            when(col("requests").gt(lit(0.0))).then(lit(1i64)).otherwise(lit(0i64)).alias("inference_hours"),
            when(
                col("requests").gt(lit(0.0)).and(
                    (col("pod_cost").cast(DataType::Float64) / lit(1e9) / col("requests"))
                        .gt(lit(p95.unwrap_or(f64::MAX))),
                ),
            )
            .then(lit(1i64))
            .otherwise(lit(0i64))
            .alias("inference_hours_above_p95"),
            // What the hours that served cost (every resource of the pod-hour).
            when(col("requests").gt(lit(0.0)))
                .then(col("pod_cost"))
                .otherwise(lit(0i64))
                .fill_null(lit(0i64))
                .alias("serving_cost"),
        ])
        .group_by([col("pod_id"), col("day")])
        .agg([
            col("serving_cost").sum(),
            col("requests").sum(),
            col("prompt_tokens").sum(),
            col("generation_tokens").sum(),
            col("inference_hours").sum(),
            col("inference_hours_above_p95").sum(),
        ]);
    let cost_days = days.lazy();
    let keys = [col("pod_id"), col("day")];
    let dims = [
        "cluster",
        "namespace",
        "workload",
        "workload_class",
        "client",
        "team",
        "gpu_model",
        "purchase_option",
        "account",
    ];
    let mut group: Vec<Expr> = vec![col("day")];
    group.extend(dims.iter().map(|d| col(*d)));
    // A pod-day billed under several purchase options is one row per option, each taking its
    // part of every sum: money (and counts of hours) by the cost weights, telescoped so that
    // the parts add up to the nano-dollar (trunc(m × to) − trunc(m × from)), GPU-hours by the
    // GPU-hour weights, other quantities by the cost weights.
    let whole_part = |name: &str| {
        let m = col(name).cast(DataType::Float64);
        ((m.clone() * col("cost_to")).cast(DataType::Int64) - (m * col("cost_from")).cast(DataType::Int64))
            .alias(name)
    };
    let cost_share = |name: &str| (col(name) * (col("cost_to") - col("cost_from"))).alias(name);
    let hours_part = |name: &str| (col(name) * (col("gpu_to") - col("gpu_from"))).alias(name);
    let mut parts: Vec<Expr> = [
        "split",
        "gpu_split",
        "cpu_split",
        "unused",
        "net",
        "public",
        "gpu_cost",
        "idle_cost",
        "idle_full_cost",
        "serving_cost",
        "inference_hours",
        "inference_hours_above_p95",
    ]
    .iter()
    .map(|name| whole_part(name))
    .collect();
    parts.extend(["allocated", "used", "idle", "unmeasured"].iter().map(|name| hours_part(name)));
    parts.extend(
        ["requests", "prompt_tokens", "generation_tokens", "vcpu_hours", "memory_gb_hours"]
            .iter()
            .map(|name| cost_share(name)),
    );
    parts.push(
        when(col("option").is_not_null())
            .then(col("option"))
            .otherwise(col("purchase_option"))
            .alias("purchase_option"),
    );
    let rolled = cost_days
        .join(gpu_days, keys.clone(), keys.clone(), JoinArgs::new(JoinType::Left))
        .join(served_days, keys.clone(), keys.clone(), JoinArgs::new(JoinType::Left))
        .join(pods.lazy(), [col("pod_id")], [col("pod_id")], JoinArgs::new(JoinType::Left))
        .join(option_weights.lazy(), keys.clone(), keys, JoinArgs::new(JoinType::Left))
        .with_columns([
            col("cost_from").fill_null(lit(0.0)),
            col("cost_to").fill_null(lit(1.0)),
            col("gpu_from").fill_null(lit(0.0)),
            col("gpu_to").fill_null(lit(1.0)),
        ])
        .with_columns(parts)
        .with_column(
            when(col("purchase_option").eq(lit(PurchaseOption::Spot.as_str())))
                .then(col("allocated"))
                .otherwise(lit(0.0))
                .alias("spot"),
        )
        .group_by(group)
        .agg([
            col("split").sum(),
            col("gpu_split").sum(),
            col("cpu_split").sum(),
            col("unused").sum(),
            col("net").sum(),
            col("public").sum(),
            col("gpu_cost").sum(),
            col("idle_cost").sum(),
            col("idle_full_cost").sum(),
            col("allocated").sum(),
            col("used").sum(),
            col("idle").sum(),
            col("unmeasured").sum(),
            col("spot").sum(),
            col("peak_fb").max(),
            col("requests").sum(),
            col("serving_cost").sum(),
            col("prompt_tokens").sum(),
            col("generation_tokens").sum(),
            col("inference_hours").sum(),
            col("inference_hours_above_p95").sum(),
            col("vcpu_hours").sum(),
            col("memory_gb_hours").sum(),
        ])
        .sort(
            ["day", "namespace", "workload", "client", "gpu_model", "purchase_option", "account"],
            Default::default(),
        )
        .collect()
        .map_err(polars_error)?;
    let costs = cost_rows(&period, &rolled).map_err(polars_error)?;

    let mut rollups = Rollups {
        period: PeriodRollup {
            period: period.clone(),
            computed_at: chrono::Utc::now().timestamp(),
            idle_threshold: threshold,
            p95_cost_per_inference: p95.unwrap_or(0.0),
            bill_unblended_micros: Micros(inputs.bill_unblended_micros),
            bill_amortized_micros: Micros(inputs.bill_amortized_micros),
            kubernetes_cost_nanos: Nanos(
                costs.iter().map(|c| c.split_cost_nanos + c.unused_cost_nanos).sum(),
            ),
            unallocated_ec2_micros: Micros(inputs.unallocated_ec2_micros),
            other_cost_micros: Micros(inputs.other_cost_micros),
            unattributed_gpu_hours: inputs.unattributed.iter().map(|(_, hours)| hours).sum(),
            unused_savings_plan_micros: Micros(inputs.unused_savings_plan_micros),
            unused_reservation_micros: Micros(inputs.unused_reservation_micros),
            storage_micros: Some(Micros(other_of_category(inputs, "storage"))),
            network_micros: Some(Micros(other_of_category(inputs, "network"))),
            gpu_fleet_in_other_micros: Micros(inputs.gpu_fleet_in_other_micros),
            measured_unbilled_gpu_hours: (names.unbilled_gpu_hours(&inputs.measured) * 1e9).round() / 1e9,
            input_revision: inputs.input_revision,
            // Taken by the store when it writes.
            revision: 0,
            settings: serde_json::to_string(settings).unwrap_or_default(),
        },
        heatmap: heatmap_cells(&period, &heatmap).map_err(polars_error)?,
        utilization: utilization_buckets(&period, &distribution).map_err(polars_error)?,
        // The CUR's instances, AWS's, and the other bills' GPU machines: every provider's fleet.
        capacity: inputs
            .capacity
            .iter()
            .map(|c| CapacityRollup { provider: c.provider().to_string(), ..c.clone() })
            .chain(inputs.bill_capacity.iter().cloned())
            .collect(),
        clients: chargeback(&period, &costs, &place_non_kubernetes(inputs, &matcher), settings),
        opportunities: Vec::new(),
        accounts: accounts(inputs, &costs),
        costs,
        kube_splits: Vec::new(),
        withheld_others: false,
        withheld_client_columns: 0,
    };
    check_bill_adds_up(&rollups.period, inputs.kubernetes_micros)?;
    let evidence = PodEvidence::gather(inputs);
    rollups.opportunities = opportunities::find(&period, &rollups.costs, &evidence);
    Ok(rollups)
}

/// Each split pod-day's options with their cumulative weights (`from`, `to`], the last
/// option's `to` exactly 1, so the parts of a sum telescope to the whole.
fn option_parts(options: &[crate::store::PodDayOption]) -> PolarsResult<DataFrame> {
    let (mut pod_id, mut day, mut option) = (Vec::new(), Vec::new(), Vec::new());
    let (mut cost_from, mut cost_to, mut gpu_from, mut gpu_to) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for group in options.chunk_by(|a, b| (a.pod_id, a.day) == (b.pod_id, b.day)) {
        let (mut cost, mut gpu) = (0.0, 0.0);
        for (i, part) in group.iter().enumerate() {
            let last = i + 1 == group.len();
            pod_id.push(part.pod_id);
            day.push(part.day);
            option.push(part.purchase_option.as_str());
            cost_from.push(cost);
            gpu_from.push(gpu);
            cost = if last { 1.0 } else { cost + part.cost_weight };
            gpu = if last { 1.0 } else { gpu + part.gpu_hours_weight };
            cost_to.push(cost);
            gpu_to.push(gpu);
        }
    }
    df!(
        "pod_id" => pod_id,
        "day" => day,
        "option" => option,
        "cost_from" => cost_from,
        "cost_to" => cost_to,
        "gpu_from" => gpu_from,
        "gpu_to" => gpu_to,
    )
}

/// The period's non-Kubernetes lines of one chargeback category (`storage`, `network`).
fn other_of_category(inputs: &ComputeInputs, category: &str) -> i64 {
    inputs.other_groups.iter().filter(|g| g.category() == category).map(|g| g.amortized_cost_micros).sum()
}

/// Places the period's non-Kubernetes cost for chargeback: a line a client's tag claims is
/// that client's; a cluster's line nobody claims goes to the shared pool, and EC2 of a
/// cluster not allocated to pods to the unallocated pool; the rest (untagged lines outside any cluster, EC2 outside
/// any cluster) is `(unassigned)`'s.
fn place_non_kubernetes(inputs: &ComputeInputs, matcher: &ClientMatcher) -> NonKubernetes {
    let mut placed = NonKubernetes { discount_micros: inputs.discount_micros, ..NonKubernetes::default() };
    let namespace_tag = format!("user_{}", super::bills::NAMESPACE_TAG);
    for group in &inputs.other_groups {
        let nanos = group.amortized_cost_micros * 1000;
        // Another provider's charge its Kubernetes named a namespace of (GKE's cost
        // allocation): the client a pod of that namespace with those labels would have (the
        // rules, and trusted `user_client` labels); a platform namespace's is the cluster's
        // shared cost.
        let client = match label(&group.tags, &namespace_tag) {
            Some(namespace) => {
                let pod = crate::store::PodRecord {
                    cluster: group.cluster.clone(),
                    namespace,
                    labels: super::bills::pod_labels(&group.tags),
                    ..Default::default()
                };
                match matcher.client(&pod) {
                    client if client == PLATFORM => UNASSIGNED.to_string(),
                    client => client,
                }
            }
            None => matcher.client_of_tags(&group.tags),
        };
        if client == UNASSIGNED && !group.cluster.is_empty() {
            placed.shared_pool += nanos;
        } else {
            *placed.storage_gb_months.entry(client.clone()).or_default() += group.storage_gb_months();
            *placed.direct.entry((client, group.provider.clone(), group.category())).or_default() += nanos;
        }
    }
    let outside_clusters: i64 =
        inputs.capacity.iter().filter(|c| c.cluster.is_empty()).map(|c| c.amortized_cost_micros).sum();
    *placed.direct.entry((UNASSIGNED.to_string(), "aws".to_string(), "other")).or_default() +=
        outside_clusters * 1000;
    placed.unallocated_pool += (inputs.unallocated_ec2_micros - outside_clusters) * 1000;
    placed
}

/// Each usage account's bill with the Kubernetes cost of the pods on its instances (a pod
/// whose instance line is missing counts under its own, possibly empty, account). An account
/// is its provider's (a pod's, its cluster's): the same id on two clouds is two accounts.
fn accounts(inputs: &ComputeInputs, costs: &[CostRollup]) -> Vec<crate::store::AccountRollup> {
    let mut accounts: std::collections::BTreeMap<(&str, &str), crate::store::AccountRollup> =
        std::collections::BTreeMap::new();
    for a in &inputs.accounts {
        match accounts.entry((a.provider.as_str(), a.account.as_str())) {
            std::collections::btree_map::Entry::Vacant(entry) => {
                entry.insert(a.clone());
            }
            // Two bills of one provider naming one account (two payers): one account.
            std::collections::btree_map::Entry::Occupied(mut entry) => entry.get_mut().add(a),
        }
    }
    for c in costs {
        let provider = inputs.cluster_providers.get(&c.cluster).map_or("aws", String::as_str);
        let entry =
            accounts.entry((provider, c.account.as_str())).or_insert_with(|| crate::store::AccountRollup {
                period: inputs.period.clone(),
                account: c.account.clone(),
                provider: provider.into(),
                ..Default::default()
            });
        entry.kubernetes_cost_nanos += Nanos(c.split_cost_nanos + c.unused_cost_nanos);
    }
    accounts.into_values().collect()
}

/// Kubernetes + EC2 not allocated to pods + other cost = the amortized bill, to the
/// micro-dollar, and the pods' cost rolled up is the cost the ingest read.
fn check_bill_adds_up(p: &PeriodRollup, ingested_kubernetes_micros: i64) -> Result<(), ComputeError> {
    let kubernetes = p.kubernetes_cost_nanos.rounded_micros();
    let placed = kubernetes + p.unallocated_ec2_micros + p.other_cost_micros;
    if kubernetes != Micros(ingested_kubernetes_micros) || placed != p.bill_amortized_micros {
        return Err(ComputeError::Invalid(format!(
            "{}: Kubernetes {} (ingested {ingested_kubernetes_micros}) + unallocated EC2 {} + other {} \
             = {} micro-dollars, not the amortized bill {}; ingest the period again (`ingest cur --force`)",
            p.period,
            kubernetes.0,
            p.unallocated_ec2_micros.0,
            p.other_cost_micros.0,
            placed.0,
            p.bill_amortized_micros.0
        )));
    }
    Ok(())
}

/// The nearest-rank percentile `q` of `values`; `None` when empty.
pub fn percentile(values: &mut [f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    Some(values[rank - 1])
}

fn cost_rows(period: &str, frame: &DataFrame) -> PolarsResult<Vec<CostRollup>> {
    let text = |name: &str| -> PolarsResult<Vec<String>> {
        Ok(frame.column(name)?.str()?.iter().map(|v| v.unwrap_or_default().to_string()).collect())
    };
    let int = |name: &str| -> PolarsResult<Vec<i64>> {
        Ok(frame.column(name)?.cast(&DataType::Int64)?.i64()?.iter().map(|v| v.unwrap_or(0)).collect())
    };
    // Parallel sums add floats in no fixed order: rounding to 1e-9 keeps reruns identical.
    let float = |name: &str| -> PolarsResult<Vec<f64>> {
        let values = frame.column(name)?.cast(&DataType::Float64)?;
        Ok(values.f64()?.iter().map(|v| (v.unwrap_or(0.0) * 1e9).round() / 1e9).collect())
    };
    let (day, split, unused, net, public) =
        (int("day")?, int("split")?, int("unused")?, int("net")?, int("public")?);
    let (gpu_split, cpu_split) = (int("gpu_split")?, int("cpu_split")?);
    let (gpu_cost, idle_cost, hours, above) =
        (int("gpu_cost")?, int("idle_cost")?, int("inference_hours")?, int("inference_hours_above_p95")?);
    let idle_full_cost = int("idle_full_cost")?;
    let serving_cost = int("serving_cost")?;
    let (allocated, used, idle, unmeasured, spot, peak_fb) = (
        float("allocated")?,
        float("used")?,
        float("idle")?,
        float("unmeasured")?,
        float("spot")?,
        float("peak_fb")?,
    );
    let (requests, prompt, generation) =
        (float("requests")?, float("prompt_tokens")?, float("generation_tokens")?);
    let (vcpu_hours, memory_gb_hours) = (float("vcpu_hours")?, float("memory_gb_hours")?);
    let (cluster, namespace, workload, class) =
        (text("cluster")?, text("namespace")?, text("workload")?, text("workload_class")?);
    let (client, team, model) = (text("client")?, text("team")?, text("gpu_model")?);
    let purchase = text("purchase_option")?
        .iter()
        .map(|p| p.parse::<PurchaseOption>())
        .collect::<Result<Vec<_>, String>>()
        .map_err(|e| PolarsError::ComputeError(e.into()))?;
    let account = text("account")?;
    Ok((0..frame.height())
        .map(|i| CostRollup {
            period: period.to_string(),
            day: day[i],
            cluster: cluster[i].clone(),
            namespace: namespace[i].clone(),
            workload: workload[i].clone(),
            workload_class: WorkloadClass::named(&class[i]),
            client: client[i].clone(),
            team: team[i].clone(),
            gpu_model: model[i].clone(),
            purchase_option: purchase[i],
            account: account[i].clone(),
            split_cost_nanos: split[i],
            unused_cost_nanos: unused[i],
            net_cost_nanos: net[i],
            public_on_demand_cost_nanos: public[i],
            gpu_cost_nanos: gpu_cost[i],
            idle_gpu_cost_nanos: idle_cost[i],
            idle_cost_nanos: idle_full_cost[i],
            serving_cost_nanos: serving_cost[i],
            gpu_split_nanos: gpu_split[i],
            cpu_split_nanos: cpu_split[i],
            gpu_hours_allocated: allocated[i],
            gpu_hours_used: used[i],
            gpu_hours_idle: idle[i],
            gpu_hours_unmeasured: unmeasured[i],
            spot_gpu_hours: spot[i],
            peak_fb_used_mib: peak_fb[i],
            requests: requests[i],
            prompt_tokens: prompt[i],
            generation_tokens: generation[i],
            inference_hours: hours[i],
            inference_hours_above_p95: above[i],
            vcpu_hours: vcpu_hours[i],
            memory_gb_hours: memory_gb_hours[i],
        })
        .collect())
}

/// Measured GPU pod-hours' GPU-hours by model and 5 % step of their mean utilization.
fn utilization_buckets(period: &str, frame: &DataFrame) -> PolarsResult<Vec<UtilizationBucket>> {
    let models = frame.column("gpu_model")?.str()?;
    let utilization = frame.column("utilization")?.f64()?;
    let hours = frame.column("gpu_hours")?.f64()?;
    let mut sums: std::collections::BTreeMap<(&str, usize), f64> = std::collections::BTreeMap::new();
    for ((model, utilization), hours) in models.iter().zip(utilization.iter()).zip(hours.iter()) {
        if let (Some(model), Some(utilization), Some(hours)) = (model, utilization, hours) {
            *sums.entry((model, utilization_bucket(utilization))).or_default() += hours;
        }
    }
    Ok(sums
        .into_iter()
        .map(|((model, bucket), hours)| UtilizationBucket {
            period: period.to_string(),
            gpu_model: model.to_string(),
            bucket: bucket as i64,
            gpu_hours: (hours * 1e9).round() / 1e9,
        })
        .collect())
}

fn heatmap_cells(period: &str, frame: &DataFrame) -> PolarsResult<Vec<HeatmapCell>> {
    let hours = frame.column("hour")?.i64()?;
    let allocated = frame.column("gpu_hours")?.f64()?;
    let used = frame.column("used")?.f64()?;
    Ok(hours
        .iter()
        .zip(allocated.iter())
        .zip(used.iter())
        .map(|((hour, allocated), used)| {
            let hour = hour.unwrap_or(0);
            HeatmapCell {
                period: period.to_string(),
                day: hour - hour.rem_euclid(86_400),
                hour_of_day: hour.rem_euclid(86_400) / 3600,
                gpu_hours_allocated: (allocated.unwrap_or(0.0) * 1e9).round() / 1e9,
                gpu_hours_used: (used.unwrap_or(0.0) * 1e9).round() / 1e9,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentile() {
        // 20 values 1..=20: rank ceil(0.95 × 20) = 19 → 19.
        let mut values: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&mut values, 0.95), Some(19.0));
        assert_eq!(percentile(&mut [], 0.95), None);
    }
}
