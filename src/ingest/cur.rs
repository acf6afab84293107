//! CUR 2.0 ingest: classify every line item the way AWS's own dashboards do (CUR reference
//! §2.3, §2.4, §3, §4), build one billing period, reconcile it against the bill, and replace
//! the period in the store in one transaction.
//!
//! Classification:
//! - split rows (`EKSPod-EC2`): one [`CostFact`] per pod, resource and hour; never added to
//!   the bill (the parent EC2 rows already carry it);
//! - parent EC2 rows (`RunInstances`, `Compute Instance`, usage line types): one
//!   [`InstanceHour`] per instance and hour, purchase option by the CID rule;
//! - everything else: [`OtherCost`] per day, service, line type and usage type.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::catalog;
use crate::money::{micros_from_nanos, micros_from_usd, nanos_from_usd, usd_decimal};
use crate::period::Period;
use crate::sources::cur::reader::{self, Columns};
use crate::sources::cur::{CurError, invalid};
use crate::split::Resource;
use crate::store::{CostFact, CostPeriod, InstanceHour, OtherCost};

/// Σ(split + unused) may differ from the parent's amortized cost by this fraction.
pub const SPLIT_TOLERANCE: f64 = 1e-4;

/// How the bill reconciles, printed after every ingest and stored with the run.
#[derive(Debug, Clone, Serialize)]
pub struct Reconciliation {
    pub period: String,
    pub rows_read: u64,
    pub split_rows: u64,
    /// Split rows not turned into facts (ECS tasks, no parent and no cost, unknown usage type).
    pub split_rows_skipped: u64,
    pub bill_unblended_total: String,
    pub bill_amortized_total: String,
    /// Σ over pods of split + unused: Kubernetes cost pushed down to pods.
    pub kubernetes_allocated_cost: String,
    /// Amortized cost of the instance-hours that hosted pods.
    pub instance_cost_with_pods: String,
    /// Amortized cost of instance-hours with no pods (stays unallocated).
    pub instance_cost_without_pods: String,
    /// bill amortized − Kubernetes allocated.
    pub other_cost: String,
    pub instance_hours_checked: u64,
    pub instance_hours_disagreeing: u64,
    /// Up to 20 instance-hours whose pods do not add up to the instance, for the report.
    pub disagreements: Vec<Disagreement>,
    /// Σ(split + unused) agrees with the parents within 0.01 % for every instance-hour.
    pub split_matches_parents: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Disagreement {
    pub instance_id: String,
    pub hour: i64,
    pub instance_amortized: f64,
    pub pods_split_plus_unused: f64,
}

/// Running state of one instance-hour from its (possibly several) parent lines.
struct InstanceBuilder {
    hour: InstanceHour,
    amortized: f64,
    net_amortized: f64,
    unblended: f64,
    public_on_demand: f64,
}

/// Builds one billing period from its data files, chunk by chunk.
pub struct PeriodBuilder {
    period: Period,
    data_version: String,
    facts: Vec<CostFact>,
    /// Parent instance and hour of each fact, to fill its instance attributes at the end.
    fact_parents: Vec<(String, i64)>,
    instances: HashMap<(String, i64), InstanceBuilder>,
    pod_sums: HashMap<(String, i64), f64>,
    other: BTreeMap<(i64, String, String, String), (i64, i64)>,
    unblended_micros: i64,
    amortized_micros: i64,
    rows: u64,
    split_rows: u64,
    split_rows_skipped: u64,
}

impl PeriodBuilder {
    pub fn new(period: Period, data_version: &str) -> PeriodBuilder {
        PeriodBuilder {
            period,
            data_version: data_version.to_string(),
            facts: Vec::new(),
            fact_parents: Vec::new(),
            instances: HashMap::new(),
            pod_sums: HashMap::new(),
            other: BTreeMap::new(),
            unblended_micros: 0,
            amortized_micros: 0,
            rows: 0,
            split_rows: 0,
            split_rows_skipped: 0,
        }
    }

    /// Reads one data file into the period.
    pub fn add_file(
        &mut self,
        path: &Path,
        location: &str,
        progress: &indicatif::ProgressBar,
    ) -> Result<(), CurError> {
        reader::read_file(path, location, |columns| {
            for row in 0..columns.rows {
                self.add_row(columns, row)?;
            }
            progress.inc(columns.rows as u64);
            Ok(())
        })?;
        Ok(())
    }

    fn add_row(&mut self, c: &Columns<'_>, row: usize) -> Result<(), CurError> {
        self.rows += 1;
        let operation = c.text("line_item_operation", row);
        if operation == "EKSPod-EC2" || operation == "ECSTask-EC2" {
            self.split_rows += 1;
            return self.add_split_row(c, row, operation == "ECSTask-EC2");
        }
        let line_type = c.text("line_item_line_item_type", row);
        let unblended = c.amount("line_item_unblended_cost", row)?;
        let amortized = amortized_cost(c, row, line_type, unblended)?;
        self.unblended_micros += micros_from_usd(unblended);
        self.amortized_micros += micros_from_usd(amortized);
        let start = c.epoch_seconds("line_item_usage_start_date", row)?;
        let is_instance = operation.contains("RunInstances")
            && c.text("product_product_family", row).contains("Compute Instance")
            && matches!(line_type, "Usage" | "SavingsPlanCoveredUsage" | "DiscountedUsage");
        if is_instance {
            return self.add_instance_line(c, row, start, line_type, unblended, amortized);
        }
        let key = (
            start - start.rem_euclid(86_400),
            c.text("line_item_product_code", row).to_string(),
            line_type.to_string(),
            c.text("line_item_usage_type", row).to_string(),
        );
        let entry = self.other.entry(key).or_default();
        entry.0 += micros_from_usd(unblended);
        entry.1 += micros_from_usd(amortized);
        Ok(())
    }

    fn add_instance_line(
        &mut self,
        c: &Columns<'_>,
        row: usize,
        start: i64,
        line_type: &str,
        unblended: f64,
        amortized: f64,
    ) -> Result<(), CurError> {
        let hour = start - start.rem_euclid(3600);
        let instance_id = c.text("line_item_resource_id", row).to_string();
        let net_amortized = net_amortized_cost(c, row, line_type, amortized)?;
        let public_on_demand = c.amount("pricing_public_on_demand_cost", row)?;
        let usage = c.amount("line_item_usage_amount", row)?;
        let key = (instance_id.clone(), hour);
        if let Some(existing) = self.instances.get_mut(&key) {
            // Several lines for one instance-hour (part Savings Plan, part On-Demand): add up.
            existing.amortized += amortized;
            existing.net_amortized += net_amortized;
            existing.unblended += unblended;
            existing.public_on_demand += public_on_demand;
            existing.hour.usage_hours += usage;
            return Ok(());
        }
        let product = c.map("product", row)?;
        let tags = c.map("resource_tags", row)?;
        let product_value = |name: &str| product.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_ref());
        let usage_type = c.text("line_item_usage_type", row);
        let mut instance_type = c.text("product_instance_type", row).to_string();
        if instance_type.is_empty() {
            // Spot lines may omit the type; CID reads it from the description.
            let described = c.text("line_item_line_item_description", row).split(' ').next().unwrap_or("");
            instance_type = if described.contains('.') {
                described.to_string()
            } else {
                usage_type.rsplit(':').next().unwrap_or("").to_string()
            };
        }
        let known = catalog::instance_type(&instance_type);
        let number = |text: Option<&str>| {
            text.and_then(|t| t.split(' ').next()).and_then(|t| t.parse::<f64>().ok()).map(|v| v as i64)
        };
        let purchase_option = if !c.text("savings_plan_savings_plan_a_r_n", row).is_empty() {
            "Savings Plans"
        } else if !c.text("reservation_reservation_a_r_n", row).is_empty() {
            "Reserved"
        } else if usage_type.contains("Spot") {
            "Spot"
        } else {
            "On-Demand"
        };
        let cluster = tags
            .iter()
            .find(|(k, _)| k == "aws_eks_cluster_name")
            .map(|(_, v)| v.to_string())
            .unwrap_or_default();
        self.instances.insert(
            key,
            InstanceBuilder {
                hour: InstanceHour {
                    hour,
                    cluster,
                    instance_id,
                    gpu_model: known.map(|t| t.gpu_model.to_string()).unwrap_or_default(),
                    gpu_count: number(product_value("gpu")).or(known.map(|t| i64::from(t.gpus))).unwrap_or(0),
                    vcpu: number(product_value("vcpu")).or(known.map(|t| i64::from(t.vcpu))).unwrap_or(0),
                    memory_gib: number(product_value("memory"))
                        .or(known.map(|t| i64::from(t.memory_gib)))
                        .unwrap_or(0),
                    instance_type,
                    purchase_option: purchase_option.to_string(),
                    usage_hours: usage,
                    unblended_cost_micros: 0,
                    amortized_cost_micros: 0,
                    net_amortized_cost_micros: 0,
                    public_on_demand_cost_micros: 0,
                },
                amortized,
                net_amortized,
                unblended,
                public_on_demand,
            },
        );
        Ok(())
    }

    fn add_split_row(&mut self, c: &Columns<'_>, row: usize, ecs: bool) -> Result<(), CurError> {
        let parent = c.text("split_line_item_parent_resource_id", row);
        let split_cost = c.amount("split_line_item_split_cost", row)?;
        let unused_cost = c.amount("split_line_item_unused_cost", row)?;
        let resource = Resource::from_usage_type(c.text("line_item_usage_type", row));
        // CID drops split rows with no parent and no cost: they are noise.
        if ecs || resource.is_none() || (parent.is_empty() && split_cost == 0.0) {
            self.split_rows_skipped += 1;
            return Ok(());
        }
        let start = c.epoch_seconds("line_item_usage_start_date", row)?;
        let hour = start - start.rem_euclid(3600);
        let tags = c.map("resource_tags", row)?;
        let tag =
            |name: &str| tags.iter().find(|(k, _)| k == name).map(|(_, v)| v.to_string()).unwrap_or_default();
        // arn:aws:eks:<region>:<account>:pod/<cluster>/<namespace>/<pod>/<uid>
        let arn = c.text("line_item_resource_id", row);
        let parts: Vec<&str> = arn.split('/').collect();
        let (cluster, namespace, pod) = match parts.as_slice() {
            [_, cluster, namespace, pod, ..] => (cluster.to_string(), namespace.to_string(), pod.to_string()),
            _ => {
                let namespace = tag("aws_eks_namespace");
                if namespace.is_empty() {
                    return Err(invalid(
                        c.location(),
                        format!(
                            "split row with resource id {arn:?}: neither a pod ARN nor an aws_eks_namespace tag"
                        ),
                    ));
                }
                (tag("aws_eks_cluster_name"), namespace, String::new())
            }
        };
        let deployment = tag("aws_eks_deployment");
        let workload = if deployment.is_empty() { tag("aws_eks_workload_name") } else { deployment };
        let labels: BTreeMap<&str, &str> = tags
            .iter()
            .filter(|(k, _)| k.starts_with("user_"))
            .map(|(k, v)| (k.as_ref(), v.as_ref()))
            .collect();
        // Net costs only when present and positive, else gross (CID rule).
        let net = |column: &'static str, gross: f64| -> Result<f64, CurError> {
            Ok(c.number(column, row)?.filter(|v| *v > 0.0).unwrap_or(gross))
        };
        let net_split = net("split_line_item_net_split_cost", split_cost)?;
        let net_unused = net("split_line_item_net_unused_cost", unused_cost)?;
        *self.pod_sums.entry((parent.to_string(), hour)).or_default() += split_cost + unused_cost;
        self.facts.push(CostFact {
            hour,
            cluster,
            namespace,
            workload,
            workload_type: tag("aws_eks_workload_type"),
            pod,
            node: tag("aws_eks_node"),
            instance_id: parent.to_string(),
            instance_type: String::new(),
            gpu_model: String::new(),
            purchase_option: String::new(),
            resource: resource.map(Resource::as_str).unwrap_or_default().to_string(),
            reserved_usage: c.amount("split_line_item_reserved_usage", row)?,
            actual_usage: c.amount("split_line_item_actual_usage", row)?,
            split_usage: c.amount("split_line_item_split_usage", row)?,
            split_usage_ratio: c.amount("split_line_item_split_usage_ratio", row)?,
            split_cost_nanos: nanos_from_usd(split_cost),
            unused_cost_nanos: nanos_from_usd(unused_cost),
            net_split_cost_nanos: nanos_from_usd(net_split),
            net_unused_cost_nanos: nanos_from_usd(net_unused),
            public_on_demand_split_cost_nanos: nanos_from_usd(
                c.amount("split_line_item_public_on_demand_split_cost", row)?,
            ),
            public_on_demand_unused_cost_nanos: nanos_from_usd(
                c.amount("split_line_item_public_on_demand_unused_cost", row)?,
            ),
            labels: serde_json::to_string(&labels).unwrap_or_else(|_| "{}".into()),
        });
        self.fact_parents.push((parent.to_string(), hour));
        Ok(())
    }

    /// The finished period and how it reconciles.
    pub fn finish(mut self) -> (CostPeriod, Reconciliation) {
        for (fact, parent) in self.facts.iter_mut().zip(&self.fact_parents) {
            if let Some(instance) = self.instances.get(parent) {
                fact.instance_type.clone_from(&instance.hour.instance_type);
                fact.gpu_model.clone_from(&instance.hour.gpu_model);
                fact.purchase_option.clone_from(&instance.hour.purchase_option);
            }
        }
        let mut disagreements = Vec::new();
        let mut disagreeing = 0;
        let mut note = |instance_id: &str, hour: i64, instance_amortized: f64, pods: f64| {
            disagreeing += 1;
            if disagreements.len() < 20 {
                disagreements.push(Disagreement {
                    instance_id: instance_id.to_string(),
                    hour,
                    instance_amortized,
                    pods_split_plus_unused: pods,
                });
            }
        };
        // Split rows whose parent line is not in the bill: their cost has no source.
        for (key, pods) in &self.pod_sums {
            if !self.instances.contains_key(key) {
                note(&key.0, key.1, 0.0, *pods);
            }
        }
        let mut with_pods = 0i64;
        let mut without_pods = 0i64;
        let mut instance_hours = Vec::with_capacity(self.instances.len());
        for (key, builder) in self.instances.drain() {
            let mut hour = builder.hour;
            hour.amortized_cost_micros = micros_from_usd(builder.amortized);
            hour.net_amortized_cost_micros = micros_from_usd(builder.net_amortized);
            hour.unblended_cost_micros = micros_from_usd(builder.unblended);
            hour.public_on_demand_cost_micros = micros_from_usd(builder.public_on_demand);
            match self.pod_sums.get(&key) {
                Some(&pods) => {
                    with_pods += hour.amortized_cost_micros;
                    if (pods - builder.amortized).abs() > SPLIT_TOLERANCE * builder.amortized.abs().max(1e-6)
                    {
                        note(&key.0, key.1, builder.amortized, pods);
                    }
                }
                None => without_pods += hour.amortized_cost_micros,
            }
            instance_hours.push(hour);
        }
        instance_hours.sort_by(|a, b| (a.hour, &a.instance_id).cmp(&(b.hour, &b.instance_id)));
        let checked = self.pod_sums.len() as u64;
        let allocated =
            micros_from_nanos(self.facts.iter().map(|f| f.split_cost_nanos + f.unused_cost_nanos).sum());
        let other_costs: Vec<OtherCost> = self
            .other
            .into_iter()
            .map(|((day, service, line_item_type, usage_type), (unblended, amortized))| OtherCost {
                day,
                service,
                line_item_type,
                usage_type,
                unblended_cost_micros: unblended,
                amortized_cost_micros: amortized,
            })
            .collect();
        let reconciliation = Reconciliation {
            period: self.period.to_string(),
            rows_read: self.rows,
            split_rows: self.split_rows,
            split_rows_skipped: self.split_rows_skipped,
            bill_unblended_total: usd_decimal(self.unblended_micros),
            bill_amortized_total: usd_decimal(self.amortized_micros),
            kubernetes_allocated_cost: usd_decimal(allocated),
            instance_cost_with_pods: usd_decimal(with_pods),
            instance_cost_without_pods: usd_decimal(without_pods),
            other_cost: usd_decimal(self.amortized_micros - allocated),
            instance_hours_checked: checked,
            instance_hours_disagreeing: disagreeing,
            disagreements,
            split_matches_parents: disagreeing == 0,
        };
        let period = CostPeriod {
            period: self.period.to_string(),
            data_version: self.data_version,
            bill_unblended_micros: self.unblended_micros,
            bill_amortized_micros: self.amortized_micros,
            cost_facts: self.facts,
            instance_hours,
            other_costs,
        };
        (period, reconciliation)
    }
}

/// AWS's amortized ("effective") cost of a line (CID summary view, reference §2.3).
fn amortized_cost(c: &Columns<'_>, row: usize, line_type: &str, unblended: f64) -> Result<f64, CurError> {
    Ok(match line_type {
        "SavingsPlanCoveredUsage" => c.amount("savings_plan_savings_plan_effective_cost", row)?,
        "SavingsPlanRecurringFee" => {
            c.amount("savings_plan_total_commitment_to_date", row)?
                - c.amount("savings_plan_used_commitment", row)?
        }
        "SavingsPlanNegation" | "SavingsPlanUpfrontFee" => 0.0,
        "DiscountedUsage" => c.amount("reservation_effective_cost", row)?,
        "RIFee" => {
            c.amount("reservation_unused_amortized_upfront_fee_for_billing_period", row)?
                + c.amount("reservation_unused_recurring_fee", row)?
        }
        "Fee" if !c.text("reservation_reservation_a_r_n", row).is_empty() => 0.0,
        "Refund"
            if c.text("line_item_product_code", row) == "ComputeSavingsPlans"
                && c.text("line_item_line_item_description", row)
                    .starts_with("Refund for one-time fee for Savings Plan ID") =>
        {
            0.0
        }
        _ => unblended,
    })
}

/// The net variant of an instance line's amortized cost, when the export has one.
fn net_amortized_cost(c: &Columns<'_>, row: usize, line_type: &str, amortized: f64) -> Result<f64, CurError> {
    let column = match line_type {
        "SavingsPlanCoveredUsage" => "savings_plan_net_savings_plan_effective_cost",
        "DiscountedUsage" => "reservation_net_effective_cost",
        _ => "line_item_net_unblended_cost",
    };
    Ok(c.number(column, row)?.filter(|v| *v > 0.0).unwrap_or(amortized))
}

/// Where downloaded or local data files are read from during one period's ingest.
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub fn new() -> std::io::Result<Scratch> {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("gpuledger-ingest-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch { dir })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
