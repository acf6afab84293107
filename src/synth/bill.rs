//! One month of the bill: every CUR 2.0 line item the world produces, computed with AWS's
//! own rules (parent EC2 rows per purchase option, split rows by §3.3, other services,
//! commitment fees, tax, credit, discount), streamed into a [`CurWriter`] day by day while
//! the [`Truth`] is accumulated from the same numbers.

use chrono::{TimeZone, Utc};
use polars::prelude::PolarsResult;

use crate::split::{self, Capacity, PodUsage, Resource};

use super::ChunkedSink;
use super::cur_file::{CurBatch, CurFormat, CurRow};
use super::fleet::{
    CLUSTERS, INSTANCE_PLAN_RATE, Purchase, RESERVED_RATE, SAVINGS_PLAN_RATE, WORKLOADS, World,
};
use super::rng;
use super::truth::Truth;

pub use super::fleet::PAYER_ACCOUNT;
/// The linked account of lines outside any cluster (shared storage, transfer, monitoring,
/// the bastion, tax, credits): the main cluster's account. Each cluster's own lines are
/// billed to its account ([`super::fleet::Cluster::account`]), and the clients' dataset
/// buckets to the second cluster's (research) account.
pub const USAGE_ACCOUNT: (&str, &str) = (CLUSTERS[0].account, CLUSTERS[0].account_name);
/// Enterprise discount in the months that have one.
pub const EDP_RATE: f64 = 0.03;
/// Prices of one instance for the month, fixed per node.
struct NodePricing {
    on_demand: f64,
    /// What the hour costs amortized: spot price, Savings Plan or RI effective rate.
    effective: f64,
    usage_type: String,
    description: String,
    on_demand_rate: String,
    effective_rate: String,
    product: Vec<(String, String)>,
    tags: Vec<(String, String)>,
    commitment_arn: String,
}

fn round4(value: f64) -> f64 {
    (value * 1e4).round() / 1e4
}

fn pricing(world: &World, node_index: usize) -> NodePricing {
    let node = &world.nodes[node_index];
    let cluster = &CLUSTERS[node.cluster];
    let itype = node.instance_type;
    let on_demand = itype.on_demand_hourly;
    // Spot discounts drift a little from month to month and differ by type.
    let spot_factor =
        0.30 + 0.12 * rng::unit(world.seed, &[20, itype.name.len() as u64, u64::from(itype.vcpu)]);
    let effective = match node.purchase {
        Purchase::OnDemand => on_demand,
        Purchase::Spot => round4(on_demand * spot_factor),
        Purchase::SavingsPlan if world.instance_plan(node.pool).is_some() => {
            round4(on_demand * INSTANCE_PLAN_RATE)
        }
        Purchase::SavingsPlan => round4(on_demand * SAVINGS_PLAN_RATE),
        Purchase::Reserved => round4(on_demand * RESERVED_RATE),
    };
    let box_usage = if node.purchase == Purchase::Spot { "SpotUsage" } else { "BoxUsage" };
    let description = match node.purchase {
        Purchase::Spot => format!(
            "{} Linux/UNIX Spot Instance-hour in {} in {}",
            itype.name, cluster.region_name, node.availability_zone
        ),
        Purchase::SavingsPlan => format!(
            "{}: {effective} per hour for Linux {} Instance Hour in {}",
            if world.instance_plan(node.pool).is_some() { "EC2InstanceSP" } else { "ComputeSP" },
            itype.name,
            cluster.region
        ),
        Purchase::Reserved => {
            format!("USD 0.0 per Linux/UNIX (Amazon VPC), {} reserved instance applied", itype.name)
        }
        Purchase::OnDemand => format!("${on_demand} per On Demand Linux {} Instance Hour", itype.name),
    };
    let commitment_arn = match node.purchase {
        Purchase::SavingsPlan => world.plan_of(node.pool).map(|c| c.arn.clone()),
        Purchase::Reserved => world.reservation(node.pool).map(|c| c.arn.clone()),
        Purchase::OnDemand | Purchase::Spot => None,
    }
    .unwrap_or_default();
    let pair = |k: &str, v: String| (k.to_string(), v);
    NodePricing {
        on_demand,
        effective,
        usage_type: format!("{}{box_usage}:{}", cluster.usage_prefix, itype.name),
        description,
        on_demand_rate: on_demand.to_string(),
        effective_rate: effective.to_string(),
        product: vec![
            pair("gpu", itype.gpus.to_string()),
            pair("instance_type_family", itype.family.to_string()),
            pair("memory", format!("{} GiB", itype.memory_gib)),
            pair("operating_system", "Linux".into()),
            pair("physical_processor", itype.physical_processor.into()),
            pair("product_name", "Amazon Elastic Compute Cloud".into()),
            pair("region", cluster.region.into()),
            pair("tenancy", "Shared".into()),
            pair("vcpu", itype.vcpu.to_string()),
        ],
        tags: vec![
            pair("aws_eks_cluster_name", cluster.name.into()),
            pair("user_eks_amazonaws_com_nodegroup", node.pool.into()),
        ],
        commitment_arn,
    }
}

/// Whether a node is covered by the Compute Savings Plan (a Savings Plan node without an EC2
/// Instance plan of its pool's).
fn compute_plan_node(world: &World, node: &super::fleet::Node) -> bool {
    node.purchase == Purchase::SavingsPlan && world.instance_plan(node.pool).is_none()
}

/// Whether a node's hour is billed, and if so whether it is booting: a GPU node comes up
/// the hour before its first pod lands (billed, no split rows).
fn billed(node: &super::fleet::Node, hour: u32) -> Option<bool> {
    let running = node.running[hour as usize];
    let booting = node.instance_type.gpus > 0
        && !running
        && node.running.get(hour as usize + 1).copied().unwrap_or(false);
    (running || booting).then_some(booting)
}

/// The share of each hour of a Compute Savings Plan node that the plan covers: all of it
/// while the plan's nodes cost no more than its hourly commitment at its rate, else the
/// commitment's share of what they cost, the rest billed On-Demand in a line of its own, as
/// AWS does. The share is a whole percent, rounded down (the plan is never overspent): rates
/// of four decimals times it are whole micro-dollars, so every line is exact where the ingest
/// keeps micro-dollars. (An EC2 Instance plan is sized for all its pool's nodes: it covers
/// every hour of them.)
fn savings_plan_coverage(world: &World, pricing: &[NodePricing]) -> Vec<f64> {
    let commitment = world.savings_plan().map_or(0.0, |plan| plan.hourly);
    (0..world.billed_hours)
        .map(|hour| {
            let at_plan_rate: f64 = world
                .nodes
                .iter()
                .zip(pricing)
                .filter(|(node, _)| compute_plan_node(world, node) && billed(node, hour).is_some())
                .map(|(_, price)| price.effective)
                .sum();
            if at_plan_rate <= commitment { 1.0 } else { (commitment / at_plan_rate * 100.0).floor() / 100.0 }
        })
        .collect()
}

/// Resource tags EKS sets on a pod's split rows, plus imported labels.
fn pod_tags(world: &World, pod_index: usize) -> Vec<(String, String)> {
    let pod = &world.pods[pod_index];
    let workload = &WORKLOADS[pod.workload];
    let node = &world.nodes[pod.node];
    let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
    let mut tags = vec![
        pair("aws_eks_cluster_name", CLUSTERS[node.cluster].name),
        pair("aws_eks_namespace", workload.namespace),
        pair("aws_eks_node", &node.node_name),
        pair("aws_eks_workload_name", &pod.controller),
        pair("aws_eks_workload_type", workload.kind),
    ];
    if workload.kind == "ReplicaSet" {
        tags.push(pair("aws_eks_deployment", workload.name));
    }
    tags.push(pair("user_app_kubernetes_io_name", workload.name));
    if let Some(client) = workload.client {
        tags.push(pair("user_client", client));
    }
    tags.push(pair("user_team", workload.team));
    if let Some(model) = workload.model {
        tags.push(pair("user_model", &model.replace('/', "_")));
    }
    tags
}

/// Running sums the bill needs for its monthly rows and totals.
#[derive(Default)]
struct BillTotals {
    unblended: f64,
    amortized: f64,
    /// Σ unblended of usage rows, the base of the enterprise discount.
    discountable: f64,
    /// Per Savings Plan (its ARN), the commitment its covered hours used.
    savings_plan_used: std::collections::BTreeMap<String, f64>,
    /// Reserved-instance hours used, per reserved pool.
    reserved_hours: std::collections::BTreeMap<&'static str, f64>,
}

/// Writes the month's line items and fills `truth`; returns the number of rows written.
pub fn write_month(
    world: &World,
    format: CurFormat,
    without_split: &[String],
    writer: &mut ChunkedSink<'_>,
    mut focus: Option<&mut ChunkedSink<'_>>,
    truth: &mut Truth,
    progress: &indicatif::ProgressBar,
) -> PolarsResult<u64> {
    let period = world.period;
    let start = period.start();
    let end = period.end();
    // A month in progress is billed through its cut.
    let hours = world.billed_hours;
    let pricing: Vec<NodePricing> = (0..world.nodes.len()).map(|n| pricing(world, n)).collect();
    let tags: Vec<Vec<(String, String)>> = (0..world.pods.len()).map(|p| pod_tags(world, p)).collect();
    let resource_ids: Vec<String> = world
        .pods
        .iter()
        .map(|pod| {
            let node = &world.nodes[pod.node];
            let cluster = &CLUSTERS[node.cluster];
            let namespace = WORKLOADS[pod.workload].namespace;
            format!(
                "arn:aws:eks:{}:{}:pod/{}/{namespace}/{}/{}",
                cluster.region, cluster.account, cluster.name, pod.name, pod.uid
            )
        })
        .collect();
    // Split usage types per cluster (region prefix + AWS suffix), in `Resource` order, built
    // once rather than per row.
    let split_usage_types: Vec<[String; 3]> = CLUSTERS
        .iter()
        .map(|cluster| {
            [Resource::Accelerator, Resource::Vcpu, Resource::Memory]
                .map(|resource| format!("{}{}", cluster.usage_prefix, resource.usage_type_suffix()))
        })
        .collect();
    // Which clusters exist at this scale (a cluster with no nodes is not billed).
    let clusters: Vec<usize> =
        (0..CLUSTERS.len()).filter(|&c| world.nodes.iter().any(|n| n.cluster == c)).collect();
    let edp = if world.has_discount { EDP_RATE } else { 0.0 };
    let net = |value: f64| world.has_discount.then_some(value * (1.0 - edp));
    let invoice_id = format!("{}", 100_000_000 + u64::from(period.month()) * 1000 + period.year() as u64);
    let base = CurRow {
        bill_bill_type: "Anniversary",
        bill_billing_entity: "AWS",
        bill_billing_period_start_date: start,
        bill_billing_period_end_date: end,
        bill_invoice_id: &invoice_id,
        bill_invoicing_entity: "Amazon Web Services, Inc.",
        bill_payer_account_id: PAYER_ACCOUNT.0,
        bill_payer_account_name: PAYER_ACCOUNT.1,
        line_item_currency_code: "USD",
        line_item_legal_entity: "Amazon Web Services, Inc.",
        line_item_usage_account_id: USAGE_ACCOUNT.0,
        line_item_usage_account_name: USAGE_ACCOUNT.1,
        ..CurRow::default()
    };
    let bastion = bastion(world);
    let mut totals = BillTotals::default();
    let mut row_id = String::new();
    let mut rows_written = 0u64;
    let mut counter = 0u64;
    let mut next_id = |buffer: &mut String| {
        counter += 1;
        buffer.clear();
        use std::fmt::Write;
        let _ = write!(buffer, "{:016x}{:010x}", rng::hash(world.seed, &[30, counter]), counter);
    };

    let plan_coverage = savings_plan_coverage(world, &pricing);
    for day in 0..hours / 24 {
        let mut batch = CurBatch::new(format);
        if focus.is_some() {
            batch = batch.with_twin(Box::new(super::focus_file::FocusBatch::new()));
        }
        for hour in day * 24..day * 24 + 24 {
            let hour_start = start + i64::from(hour) * 3600;
            let interval = time_interval(hour_start, hour_start + 3600);
            let hour_row = CurRow {
                identity_time_interval: &interval,
                line_item_usage_start_date: hour_start,
                line_item_usage_end_date: hour_start + 3600,
                ..base
            };
            for (node_index, node) in world.nodes.iter().enumerate() {
                let Some(booting) = billed(node, hour) else { continue };
                let price = &pricing[node_index];
                let cluster = &CLUSTERS[node.cluster];
                let itype = node.instance_type;
                let parent = CurRow {
                    line_item_availability_zone: &node.availability_zone,
                    line_item_line_item_description: &price.description,
                    line_item_operation: "RunInstances",
                    line_item_product_code: "AmazonEC2",
                    line_item_resource_id: &node.instance_id,
                    line_item_usage_amount: Some(1.0),
                    line_item_usage_type: &price.usage_type,
                    pricing_public_on_demand_cost: Some(price.on_demand),
                    pricing_public_on_demand_rate: &price.on_demand_rate,
                    pricing_term: "OnDemand",
                    pricing_unit: "Hrs",
                    product: &price.product,
                    product_instance_family: itype.family,
                    product_instance_type: itype.name,
                    product_product_family: "Compute Instance",
                    product_region_code: cluster.region,
                    product_servicecode: "AmazonEC2",
                    resource_tags: &price.tags,
                    line_item_usage_account_id: cluster.account,
                    line_item_usage_account_name: cluster.account_name,
                    ..hour_row
                };
                let covered = if compute_plan_node(world, node) { plan_coverage[hour as usize] } else { 1.0 };
                let amortized = price.effective * covered + price.on_demand * (1.0 - covered);
                next_id(&mut row_id);
                let parent_row = match node.purchase {
                    Purchase::OnDemand | Purchase::Spot => CurRow {
                        identity_line_item_id: &row_id,
                        line_item_line_item_type: "Usage",
                        line_item_unblended_cost: Some(price.effective),
                        line_item_unblended_rate: &price.effective_rate,
                        line_item_blended_cost: Some(price.effective),
                        line_item_blended_rate: &price.effective_rate,
                        line_item_net_unblended_cost: net(price.effective),
                        product_instance_type: if node.purchase == Purchase::Spot { "" } else { itype.name },
                        pricing_term: if node.purchase == Purchase::Spot { "" } else { "OnDemand" },
                        ..parent
                    },
                    Purchase::SavingsPlan => CurRow {
                        identity_line_item_id: &row_id,
                        line_item_line_item_type: "SavingsPlanCoveredUsage",
                        line_item_usage_amount: Some(covered),
                        line_item_unblended_cost: Some(price.on_demand * covered),
                        line_item_unblended_rate: &price.on_demand_rate,
                        line_item_blended_cost: Some(price.on_demand * covered),
                        line_item_blended_rate: &price.on_demand_rate,
                        line_item_net_unblended_cost: net(price.on_demand * covered),
                        pricing_public_on_demand_cost: Some(price.on_demand * covered),
                        savings_plan_savings_plan_a_r_n: &price.commitment_arn,
                        savings_plan_savings_plan_effective_cost: Some(price.effective * covered),
                        savings_plan_net_savings_plan_effective_cost: net(price.effective * covered),
                        savings_plan_savings_plan_rate: Some(price.effective),
                        ..parent
                    },
                    Purchase::Reserved => CurRow {
                        identity_line_item_id: &row_id,
                        line_item_line_item_type: "DiscountedUsage",
                        line_item_unblended_cost: Some(0.0),
                        line_item_unblended_rate: "0",
                        line_item_blended_cost: Some(0.0),
                        line_item_blended_rate: "0",
                        line_item_net_unblended_cost: net(0.0),
                        pricing_term: "Reserved",
                        reservation_reservation_a_r_n: &price.commitment_arn,
                        reservation_effective_cost: Some(price.effective),
                        reservation_net_effective_cost: net(price.effective),
                        ..parent
                    },
                };
                batch.push(&parent_row);
                let unblended = parent_row.line_item_unblended_cost.unwrap_or(0.0);
                totals.unblended += unblended;
                totals.discountable += unblended;
                totals.amortized += amortized;
                match node.purchase {
                    Purchase::SavingsPlan => {
                        *totals.savings_plan_used.entry(price.commitment_arn.clone()).or_default() +=
                            price.effective * covered;
                        next_id(&mut row_id);
                        batch.push(&CurRow {
                            identity_line_item_id: &row_id,
                            line_item_line_item_type: "SavingsPlanNegation",
                            line_item_line_item_description: "Savings Plan Negation",
                            line_item_unblended_cost: Some(-price.on_demand * covered),
                            line_item_blended_cost: Some(-price.on_demand * covered),
                            line_item_net_unblended_cost: net(-price.on_demand * covered),
                            line_item_unblended_rate: &price.on_demand_rate,
                            savings_plan_savings_plan_a_r_n: &price.commitment_arn,
                            pricing_public_on_demand_cost: Some(0.0),
                            ..parent
                        });
                        totals.unblended -= price.on_demand * covered;
                        totals.discountable -= price.on_demand * covered;
                        if covered < 1.0 {
                            // The rest of the hour, On-Demand.
                            let rest = price.on_demand * (1.0 - covered);
                            next_id(&mut row_id);
                            batch.push(&CurRow {
                                identity_line_item_id: &row_id,
                                line_item_line_item_type: "Usage",
                                line_item_usage_amount: Some(1.0 - covered),
                                line_item_unblended_cost: Some(rest),
                                line_item_unblended_rate: &price.on_demand_rate,
                                line_item_blended_cost: Some(rest),
                                line_item_blended_rate: &price.on_demand_rate,
                                line_item_net_unblended_cost: net(rest),
                                pricing_public_on_demand_cost: Some(rest),
                                ..parent
                            });
                            totals.unblended += rest;
                            totals.discountable += rest;
                        }
                    }
                    Purchase::Reserved => *totals.reserved_hours.entry(node.pool).or_default() += 1.0,
                    Purchase::OnDemand | Purchase::Spot => {}
                }
                let split_rows = if booting {
                    Vec::new()
                } else {
                    split_node_hour(world, node_index, hour, amortized, price.on_demand)
                };
                // A cluster without split cost allocation data: its pods are not in the CUR.
                let written =
                    if without_split.iter().any(|c| c == cluster.name) { &[][..] } else { &split_rows[..] };
                for split_row in written {
                    next_id(&mut row_id);
                    batch.push(&CurRow {
                        identity_line_item_id: &row_id,
                        line_item_line_item_type: "Usage",
                        line_item_operation: "EKSPod-EC2",
                        line_item_product_code: "AmazonEKS",
                        line_item_resource_id: &resource_ids[split_row.pod],
                        line_item_usage_type: &split_usage_types[node.cluster][split_row.resource as usize],
                        line_item_usage_amount: Some(split_row.split.split_usage),
                        line_item_unblended_cost: Some(0.0),
                        line_item_blended_cost: Some(0.0),
                        line_item_availability_zone: &node.availability_zone,
                        product_region_code: cluster.region,
                        product_servicecode: "AmazonEKS",
                        pricing_unit: "Hrs",
                        resource_tags: &tags[split_row.pod],
                        split_line_item_parent_resource_id: &node.instance_id,
                        split_line_item_reserved_usage: Some(split_row.usage.reserved),
                        split_line_item_actual_usage: Some(split_row.usage.actual),
                        split_line_item_split_usage: Some(split_row.split.split_usage),
                        split_line_item_split_usage_ratio: Some(split_row.split.ratio),
                        split_line_item_split_cost: Some(split_row.split.split_cost),
                        split_line_item_unused_cost: Some(split_row.split.unused_cost),
                        split_line_item_net_split_cost: net(split_row.split.split_cost),
                        split_line_item_net_unused_cost: net(split_row.split.unused_cost),
                        split_line_item_public_on_demand_split_cost: Some(split_row.public_split),
                        split_line_item_public_on_demand_unused_cost: Some(split_row.public_unused),
                        line_item_usage_account_id: cluster.account,
                        line_item_usage_account_name: cluster.account_name,
                        ..hour_row
                    });
                }
                let kubernetes: f64 =
                    split_rows.iter().map(|r| r.split.split_cost + r.split.unused_cost).sum();
                truth.add_account_line((cluster.account, cluster.account_name), amortized, true, kubernetes);
                if booting {
                    let gpu = Some((itype.gpu_model, itype.gpus));
                    truth.add_instance_hour_without_pods(node.purchase.label(), gpu, true, amortized);
                } else {
                    truth.add_node_hour(world, node_index, hour, amortized, covered, &split_rows);
                }
            }
            // A bastion host outside Kubernetes: EC2 instance-hours with no split rows at all.
            next_id(&mut row_id);
            batch.push(&CurRow {
                identity_line_item_id: &row_id,
                line_item_line_item_type: "Usage",
                line_item_unblended_cost: Some(bastion.cost),
                line_item_unblended_rate: &bastion.rate,
                line_item_blended_cost: Some(bastion.cost),
                line_item_blended_rate: &bastion.rate,
                line_item_net_unblended_cost: net(bastion.cost),
                line_item_availability_zone: &bastion.availability_zone,
                line_item_line_item_description: &bastion.description,
                line_item_operation: "RunInstances",
                line_item_product_code: "AmazonEC2",
                line_item_resource_id: &bastion.instance_id,
                line_item_usage_amount: Some(1.0),
                line_item_usage_type: &bastion.usage_type,
                pricing_public_on_demand_cost: Some(bastion.cost),
                pricing_public_on_demand_rate: &bastion.rate,
                pricing_term: "OnDemand",
                pricing_unit: "Hrs",
                product: &bastion.product,
                product_instance_family: bastion.family,
                product_instance_type: bastion.instance_type,
                product_product_family: "Compute Instance",
                product_region_code: CLUSTERS[0].region,
                product_servicecode: "AmazonEC2",
                resource_tags: &bastion.tags,
                ..hour_row
            });
            totals.unblended += bastion.cost;
            totals.amortized += bastion.cost;
            totals.discountable += bastion.cost;
            truth.add_instance_hour_without_pods("On-Demand", None, false, bastion.cost);
            truth.add_account_line(USAGE_ACCOUNT, bastion.cost, true, 0.0);
            for &cluster_index in &clusters {
                let cluster = &CLUSTERS[cluster_index];
                let resource =
                    format!("arn:aws:eks:{}:{}:cluster/{}", cluster.region, cluster.account, cluster.name);
                let usage_type = format!("{}AmazonEKS-Hours:perCluster", cluster.usage_prefix);
                next_id(&mut row_id);
                let cost = 0.10;
                batch.push(&CurRow {
                    identity_line_item_id: &row_id,
                    line_item_line_item_type: "Usage",
                    line_item_line_item_description: "Amazon EKS cluster usage",
                    line_item_operation: "CreateOperation",
                    line_item_product_code: "AmazonEKS",
                    line_item_resource_id: &resource,
                    line_item_usage_type: &usage_type,
                    line_item_usage_amount: Some(1.0),
                    line_item_unblended_cost: Some(cost),
                    line_item_unblended_rate: "0.1",
                    line_item_blended_cost: Some(cost),
                    line_item_net_unblended_cost: net(cost),
                    pricing_public_on_demand_cost: Some(cost),
                    pricing_public_on_demand_rate: "0.1",
                    pricing_unit: "Hours",
                    product_region_code: cluster.region,
                    product_servicecode: "AmazonEKS",
                    line_item_usage_account_id: cluster.account,
                    line_item_usage_account_name: cluster.account_name,
                    ..hour_row
                });
                totals.add_other(truth, "AmazonEKS", cost);
                truth.add_account_line((cluster.account, cluster.account_name), cost, false, 0.0);
                truth.add_cluster_line(cluster.name, cost);
            }
        }
        let day_start = start + i64::from(day) * 86_400;
        let day_interval = time_interval(day_start, day_start + 86_400);
        let day_row = CurRow {
            identity_time_interval: &day_interval,
            line_item_usage_start_date: day_start,
            line_item_usage_end_date: day_start + 86_400,
            line_item_line_item_type: "Usage",
            ..base
        };
        for line in daily_services(world, day) {
            let DailyLine { service, usage_type, operation, amount, rate, unit, account, .. } = line;
            let cost = round_micro(amount * rate);
            let rate_text = rate.to_string();
            next_id(&mut row_id);
            batch.push(&CurRow {
                identity_line_item_id: &row_id,
                line_item_product_code: service,
                line_item_usage_type: usage_type,
                line_item_operation: operation,
                line_item_resource_id: &line.resource_id,
                resource_tags: &line.tags,
                line_item_usage_amount: Some(amount),
                line_item_unblended_cost: Some(cost),
                line_item_unblended_rate: &rate_text,
                line_item_blended_cost: Some(cost),
                line_item_net_unblended_cost: net(cost),
                pricing_public_on_demand_cost: Some(cost),
                pricing_public_on_demand_rate: &rate_text,
                pricing_unit: unit,
                product_servicecode: service,
                line_item_usage_account_id: account.0,
                line_item_usage_account_name: account.1,
                ..day_row
            });
            totals.add_other(truth, service, cost);
            *truth.other_cost_by_category.entry(line.category.to_string()).or_default() += cost;
            truth.add_account_line(account, cost, false, 0.0);
            let tag = |key: &str| line.tags.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
            match (tag("user_client"), tag("aws_eks_cluster_name")) {
                (Some(client), _) => {
                    // Storage held is priced per GB-month: its usage amount is the quantity.
                    let gb_months = if unit == "GB-Mo" { amount } else { 0.0 };
                    truth.add_client_line(client, line.category, cost, gb_months)
                }
                (None, Some(cluster)) => truth.add_cluster_line(cluster, cost),
                (None, None) => {}
            }
        }
        if day + 1 == hours / 24 {
            monthly_rows(world, &base, &mut batch, &mut totals, truth, &mut next_id, &mut row_id, edp);
        }
        rows_written += batch.len() as u64;
        progress.inc(batch.len() as u64);
        truth.cost_explorer.merge(batch.take_tally());
        if let (Some(rows), Some(sink)) = (batch.take_twin(), focus.as_deref_mut()) {
            sink.write(&mut rows.into_frame()?)?;
        }
        let mut frame = batch.into_frame(world.has_discount)?;
        writer.write(&mut frame)?;
    }
    truth.bill_unblended += totals.unblended;
    truth.bill_amortized += totals.amortized;
    if world.has_discount {
        let a = &truth.adjustments;
        truth.net_amortized = Some(truth.bill_amortized + a.discounts + a.credits + a.refunds);
    }
    Ok(rows_written)
}

impl BillTotals {
    /// A non-Kubernetes cost whose unblended and amortized cost are the same.
    fn add_other(&mut self, truth: &mut Truth, service: &str, cost: f64) {
        self.unblended += cost;
        self.discountable += cost;
        self.amortized += cost;
        truth.add_other(service, cost);
    }

    /// A discount, credit, refund or tax line: on the invoice, outside the amortized bill.
    fn add_adjustment(&mut self, truth: &mut Truth, line_type: &str, cost: f64) {
        self.unblended += cost;
        let adjustments = &mut truth.adjustments;
        match line_type {
            "Tax" => adjustments.tax += cost,
            "Credit" => adjustments.credits += cost,
            "Refund" => adjustments.refunds += cost,
            _ => adjustments.discounts += cost,
        }
    }
}

fn round_micro(value: f64) -> f64 {
    (value * 1e6).round() / 1e6
}

/// One day's non-Kubernetes usage line.
struct DailyLine {
    service: &'static str,
    usage_type: &'static str,
    operation: &'static str,
    amount: f64,
    rate: f64,
    unit: &'static str,
    resource_id: String,
    tags: Vec<(String, String)>,
    /// What a client is charged for it as: `storage`, `network` or `other`.
    category: &'static str,
    /// The account it is billed to: the main cluster's unless said otherwise.
    account: (&'static str, &'static str),
}

/// The clients the workloads name, in catalog order, once each.
fn clients() -> Vec<&'static str> {
    let mut clients: Vec<&'static str> = Vec::new();
    for client in WORKLOADS.iter().filter_map(|w| w.client) {
        if !clients.contains(&client) {
            clients.push(client);
        }
    }
    clients
}

/// Daily non-Kubernetes usage: shared storage, transfer and monitoring; node root volumes of
/// the main cluster; and per client a tagged S3 bucket and a tagged EBS volume (a PVC).
fn daily_services(world: &World, day: u32) -> Vec<DailyLine> {
    let noise = |k: u64| 0.9 + 0.2 * rng::unit(world.seed, &[40, u64::from(day), k]);
    let nodes = world.nodes.len() as f64;
    let days = f64::from(world.period.days());
    let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
    let line = |service, usage_type, operation, amount, rate, unit, category| DailyLine {
        service,
        usage_type,
        operation,
        amount,
        rate,
        unit,
        resource_id: String::new(),
        tags: Vec::new(),
        category,
        account: USAGE_ACCOUNT,
    };
    let main_cluster = CLUSTERS[0].name;
    let mut lines = vec![
        // 0.023 USD per GB-month of S3 Standard, charged daily.
        DailyLine {
            resource_id: "shared-artifacts".into(),
            ..line(
                "AmazonS3",
                "TimedStorage-ByteHrs",
                "StandardStorage",
                (nodes * 4000.0 * noise(1)).round() / days,
                0.023,
                "GB-Mo",
                "storage",
            )
        },
        // Requests are S3 cost too: storage, as FOCUS's service category files all of S3.
        line(
            "AmazonS3",
            "Requests-Tier1",
            "PutObject",
            (nodes * 9000.0 * noise(2)).round(),
            0.000005,
            "Requests",
            "storage",
        ),
        line(
            "AWSDataTransfer",
            "DataTransfer-Out-Bytes",
            "",
            (nodes * 35.0 * noise(3)).round(),
            0.09,
            "GB",
            "network",
        ),
        // The nodes' root volumes: the cluster's, no client's.
        DailyLine {
            resource_id: "vol-0root0volumes0".into(),
            tags: vec![pair("aws_eks_cluster_name", main_cluster)],
            ..line(
                "AmazonEC2",
                "EBS:VolumeUsage.gp3",
                "CreateVolume-Gp3",
                (nodes * 250.0).round() / days,
                0.08,
                "GB-Mo",
                "storage",
            )
        },
        line(
            "AmazonCloudWatch",
            "CW:MetricMonitorUsage",
            "MetricStorage",
            (nodes * 40.0 / days * 100.0).round() / 100.0,
            0.30,
            "Metrics",
            "other",
        ),
    ];
    // The clients' datasets live in the research account (whatever the scale, so every
    // world bills a payer and two linked accounts).
    let research = (CLUSTERS[1].account, CLUSTERS[1].account_name);
    for (index, client) in clients().into_iter().enumerate() {
        let k = 10 + index as u64;
        lines.push(DailyLine {
            resource_id: format!("{client}-datasets"),
            tags: vec![pair("user_client", client), pair("user_team", "data")],
            account: research,
            ..line(
                "AmazonS3",
                "TimedStorage-ByteHrs",
                "StandardStorage",
                (nodes * 900.0 * noise(k)).round() / days,
                0.023,
                "GB-Mo",
                "storage",
            )
        });
        lines.push(DailyLine {
            resource_id: format!("vol-0{client}0pvc"),
            tags: vec![pair("aws_eks_cluster_name", main_cluster), pair("user_client", client)],
            ..line(
                "AmazonEC2",
                "EBS:VolumeUsage.gp3",
                "CreateVolume-Gp3",
                (nodes * 60.0).round() / days,
                0.08,
                "GB-Mo",
                "storage",
            )
        });
    }
    lines
}

/// The one EC2 instance outside Kubernetes (a bastion host), on-demand all month.
struct Bastion {
    instance_id: String,
    instance_type: &'static str,
    family: &'static str,
    availability_zone: String,
    usage_type: String,
    description: String,
    cost: f64,
    rate: String,
    product: Vec<(String, String)>,
    tags: Vec<(String, String)>,
}

fn bastion(world: &World) -> Bastion {
    let itype = crate::catalog::instance_type("m5.xlarge").expect("m5.xlarge is in the catalog");
    let pair = |k: &str, v: String| (k.to_string(), v);
    Bastion {
        instance_id: format!("i-0{:016x}", rng::hash(world.seed, &[50]) >> 4),
        instance_type: itype.name,
        family: itype.family,
        availability_zone: format!("{}a", CLUSTERS[0].region),
        usage_type: format!("BoxUsage:{}", itype.name),
        description: format!("${} per On Demand Linux {} Instance Hour", itype.on_demand_hourly, itype.name),
        cost: itype.on_demand_hourly,
        rate: itype.on_demand_hourly.to_string(),
        product: vec![
            pair("instance_type_family", itype.family.to_string()),
            pair("memory", format!("{} GiB", itype.memory_gib)),
            pair("operating_system", "Linux".into()),
            pair("region", CLUSTERS[0].region.into()),
            pair("vcpu", itype.vcpu.to_string()),
        ],
        tags: vec![pair("user_team", "platform".into()), pair("user_name", "bastion".into())],
    }
}

/// Commitment fees, tax, credit and discount, once a month.
#[allow(clippy::too_many_arguments)]
fn monthly_rows(
    world: &World,
    base: &CurRow<'_>,
    batch: &mut CurBatch,
    totals: &mut BillTotals,
    truth: &mut Truth,
    next_id: &mut impl FnMut(&mut String),
    row_id: &mut String,
    edp: f64,
) {
    let start = world.period.start();
    let end = world.period.end();
    let interval = time_interval(start, end);
    let month = CurRow {
        identity_time_interval: &interval,
        line_item_usage_start_date: start,
        line_item_usage_end_date: end,
        ..*base
    };
    let net = |value: f64| world.has_discount.then_some(value * (1.0 - edp));
    // A commitment's fee is due every hour of its term, used or not.
    for commitment in &world.commitments {
        let (start_time, end_time) = (iso_time(commitment.start), iso_time(commitment.end));
        let count = commitment.count.to_string();
        let hours = f64::from(world.billed_hours);
        let (fee, used, row) = match (commitment.purchase, commitment.instance_type) {
            (Purchase::Reserved, Some(instance_type)) => {
                let reserved_hours = f64::from(commitment.count) * hours;
                let used_hours =
                    commitment.pool.and_then(|pool| totals.reserved_hours.get(pool)).copied().unwrap_or(0.0);
                let fee = round_micro(commitment.hourly * reserved_hours);
                let unused = round_micro(commitment.hourly * (reserved_hours - used_hours));
                // A reservation is bought in the account of the cluster its pool belongs to.
                let cluster = &CLUSTERS[commitment.cluster];
                let row = CurRow {
                    line_item_line_item_type: "RIFee",
                    line_item_line_item_description: "Reserved instance fee, 1 year No Upfront",
                    line_item_product_code: "AmazonEC2",
                    line_item_usage_amount: Some(reserved_hours),
                    product_instance_type: instance_type.name,
                    product_instance_family: instance_type.family,
                    product_region_code: cluster.region,
                    reservation_reservation_a_r_n: &commitment.arn,
                    reservation_unused_recurring_fee: Some(unused),
                    reservation_unused_amortized_upfront_fee_for_billing_period: Some(0.0),
                    reservation_amortized_upfront_fee_for_billing_period: Some(0.0),
                    reservation_start_time: &start_time,
                    reservation_end_time: &end_time,
                    reservation_number_of_reservations: &count,
                    line_item_usage_account_id: cluster.account,
                    line_item_usage_account_name: cluster.account_name,
                    ..month
                };
                (fee, fee - unused, row)
            }
            _ => {
                let fee = round_micro(commitment.hourly * hours);
                let used = totals.savings_plan_used.get(&commitment.arn).copied().unwrap_or(0.0);
                // An EC2 Instance plan names its family and region.
                let (description, usage_type, offering, family, region) = match commitment.instance_type {
                    Some(t) => (
                        "1 year No Upfront EC2 Instance Savings Plan",
                        "EC2InstanceSP:1yrNoUpfront",
                        "EC2InstanceSavingsPlans",
                        t.family,
                        CLUSTERS[commitment.cluster].region,
                    ),
                    None => (
                        "1 year No Upfront Compute Savings Plan",
                        "ComputeSP:1yrNoUpfront",
                        "ComputeSavingsPlans",
                        "",
                        "",
                    ),
                };
                let row = CurRow {
                    line_item_line_item_type: "SavingsPlanRecurringFee",
                    line_item_line_item_description: description,
                    line_item_product_code: "ComputeSavingsPlans",
                    line_item_usage_type: usage_type,
                    line_item_usage_amount: Some(hours),
                    savings_plan_savings_plan_a_r_n: &commitment.arn,
                    savings_plan_total_commitment_to_date: Some(fee),
                    savings_plan_used_commitment: Some(used),
                    savings_plan_recurring_commitment_for_billing_period: Some(fee),
                    savings_plan_offering_type: offering,
                    savings_plan_instance_type_family: family,
                    savings_plan_region: region,
                    savings_plan_purchase_term: "1yr",
                    savings_plan_payment_option: "No Upfront",
                    savings_plan_start_time: &start_time,
                    savings_plan_end_time: &end_time,
                    line_item_usage_account_id: PAYER_ACCOUNT.0,
                    line_item_usage_account_name: PAYER_ACCOUNT.1,
                    ..month
                };
                (fee, used, row)
            }
        };
        let usage_type = commitment
            .instance_type
            .filter(|_| commitment.purchase == Purchase::Reserved)
            .map(|t| format!("HeavyUsage:{}", t.name));
        next_id(row_id);
        batch.push(&CurRow {
            identity_line_item_id: row_id,
            line_item_usage_type: usage_type.as_deref().unwrap_or(row.line_item_usage_type),
            line_item_unblended_cost: Some(fee),
            line_item_blended_cost: Some(fee),
            line_item_net_unblended_cost: net(fee),
            ..row
        });
        let unused = fee - used;
        totals.unblended += fee;
        totals.discountable += fee;
        totals.amortized += unused;
        let account = (row.line_item_usage_account_id, row.line_item_usage_account_name);
        let service = if commitment.purchase == Purchase::Reserved {
            "AmazonEC2 (unused reservations)"
        } else {
            "ComputeSavingsPlans"
        };
        truth.add_other(service, unused);
        truth.add_account_line(account, unused, false, 0.0);
        truth.commitments.push(super::truth::CommitmentTruth::of(commitment, fee, used));
    }
    let scale = world.nodes.len() as f64;
    let simple_rows: [(&str, &str, &str, f64); 3] = [
        ("Tax", "AWSDataTransfer", "Sales tax", round_micro(scale * 3.75)),
        ("Credit", "AmazonEC2", "AWS Activate credit", round_micro(-scale * 12.5)),
        ("Refund", "AmazonS3", "Refund for a duplicated S3 request charge", round_micro(-scale * 1.5)),
    ];
    for (line_type, service, description, cost) in simple_rows {
        next_id(row_id);
        batch.push(&CurRow {
            identity_line_item_id: row_id,
            line_item_line_item_type: line_type,
            line_item_line_item_description: description,
            line_item_product_code: service,
            line_item_tax_type: if line_type == "Tax" { "SalesTax" } else { "" },
            line_item_unblended_cost: Some(cost),
            line_item_blended_cost: Some(cost),
            // Discounts do not apply to tax, credits or refunds: their net cost is their cost.
            line_item_net_unblended_cost: world.has_discount.then_some(cost),
            ..month
        });
        totals.add_adjustment(truth, line_type, cost);
    }
    if world.has_discount {
        let discount = round_micro(-edp * totals.discountable);
        next_id(row_id);
        batch.push(&CurRow {
            identity_line_item_id: row_id,
            line_item_line_item_type: "EdpDiscount",
            line_item_line_item_description: "Enterprise Discount Program",
            line_item_product_code: "AmazonEC2",
            line_item_unblended_cost: Some(discount),
            line_item_blended_cost: Some(discount),
            line_item_net_unblended_cost: Some(0.0),
            ..month
        });
        totals.add_adjustment(truth, "EdpDiscount", discount);
    }
}

/// `identity_time_interval`: `2026-10-01T00:00:00Z/2026-10-01T01:00:00Z`.
/// A commitment's term boundary as the CUR writes it: ISO-8601 text.
fn iso_time(t: i64) -> String {
    Utc.timestamp_opt(t, 0)
        .single()
        .map(|d| d.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_default()
}

fn time_interval(start: i64, end: i64) -> String {
    let format = |t: i64| {
        Utc.timestamp_opt(t, 0)
            .single()
            .map(|d| d.format("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default()
    };
    format!("{}/{}", format(start), format(end))
}

/// One split row: a pod's share of one resource of its node for one hour.
pub struct SplitRow {
    pub pod: usize,
    pub resource: Resource,
    pub usage: PodUsage,
    pub split: split::PodSplit,
    pub public_split: f64,
    pub public_unused: f64,
}

/// Splits one node-hour's amortized and public on-demand cost between its pods (§3.3).
pub fn split_node_hour(
    world: &World,
    node_index: usize,
    hour: u32,
    amortized: f64,
    public_on_demand: f64,
) -> Vec<SplitRow> {
    let node = &world.nodes[node_index];
    let itype = node.instance_type;
    let capacity = Capacity {
        accelerators: f64::from(itype.gpus),
        vcpu: f64::from(itype.vcpu),
        memory_gib: f64::from(itype.memory_gib),
    };
    let active: Vec<(usize, f64)> = node
        .pods
        .iter()
        .map(|&pod| (pod, world.pod_fraction(pod, hour)))
        .filter(|&(_, fraction)| fraction > 0.0)
        .collect();
    let mut rows = Vec::with_capacity(active.len() * 3);
    for &resource in capacity.resources() {
        let usages: Vec<PodUsage> = active
            .iter()
            .map(|&(pod, fraction)| {
                let p = &world.pods[pod];
                let (cpu_actual, memory_actual) = world.actual_usage(pod, hour, fraction);
                let reserved = |request: f64| super::fleet::round6(request * fraction);
                match resource {
                    Resource::Accelerator => {
                        let gpus = reserved(f64::from(p.gpus));
                        PodUsage { reserved: gpus, actual: gpus }
                    }
                    Resource::Vcpu => PodUsage { reserved: reserved(p.vcpu_request), actual: cpu_actual },
                    Resource::Memory => {
                        PodUsage { reserved: reserved(p.memory_request_gib), actual: memory_actual }
                    }
                }
            })
            .collect();
        let rate = capacity.rate(resource, amortized);
        let public_scale = public_on_demand / amortized;
        for (&(pod, _), (usage, split)) in
            active.iter().zip(usages.iter().zip(split::split_resource(capacity.of(resource), rate, &usages)))
        {
            rows.push(SplitRow {
                pod,
                resource,
                usage: *usage,
                split,
                public_split: split.split_cost * public_scale,
                public_unused: split.unused_cost * public_scale,
            });
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::Scale;

    #[test]
    fn the_savings_plan_covers_its_nodes_up_to_its_commitment_and_never_beyond() {
        let world = World::build(42, "2026-10".parse().unwrap(), Scale::Small);
        let pricing: Vec<NodePricing> = (0..world.nodes.len()).map(|n| pricing(&world, n)).collect();
        let commitment = world.savings_plan().unwrap().hourly;
        let coverage = savings_plan_coverage(&world, &pricing);
        let (mut whole, mut part) = (0, 0);
        for (hour, &covered) in coverage.iter().enumerate() {
            let at_plan_rate: f64 = world
                .nodes
                .iter()
                .zip(&pricing)
                .filter(|(n, _)| compute_plan_node(&world, n) && billed(n, hour as u32).is_some())
                .map(|(_, p)| p.effective)
                .sum();
            let used = at_plan_rate * covered;
            assert!(used <= commitment + 1e-9, "hour {hour}: {used} of {commitment}");
            if covered < 1.0 {
                // Spent to within a hundredth of the nodes' hour.
                assert!(commitment - used < at_plan_rate * 1e-2, "hour {hour}");
                part += 1;
            } else {
                whole += 1;
            }
        }
        // Both happen in a month: the H100 nodes' busy hours overrun the plan, their idle ones
        // leave some of it unused.
        assert!(whole > 0 && part > 0, "{whole} {part}");
    }
}
