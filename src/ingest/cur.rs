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
use crate::sources::cur::reader::{self, Col, Columns};
use crate::sources::cur::{CurError, invalid};
use crate::split::Resource;
use crate::store::{CostPeriod, FactBatch, FactRecord, InstanceHour, OtherCost, PodAttributes, PodRecord};

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
    strings: Interner,
    /// Pod dimensions (cluster, namespace, workload, workload type, pod, node, labels) as
    /// interned ids; facts point at them by index.
    pods: HashMap<[u32; 7], u32>,
    /// Store pod id per (pod dimensions, instance), and where each stored pod was first seen
    /// (instance, hour), to give it the instance's attributes at the end.
    pod_ids: HashMap<(u32, u32), i64>,
    pod_first_seen: Vec<(u32, i64)>,
    /// Facts (and new pods) read but not yet handed to the store.
    pending: FactBatch,
    allocated_nanos: i64,
    /// Keyed by (interned instance id, hour).
    instances: HashMap<(u32, i64), InstanceBuilder>,
    pod_sums: HashMap<(u32, i64), f64>,
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
            strings: Interner::default(),
            pods: HashMap::new(),
            pod_ids: HashMap::new(),
            pod_first_seen: Vec::new(),
            pending: FactBatch::default(),
            allocated_nanos: 0,
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
    /// Reads one data file into the period, handing facts to `emit` as batches fill; `emit`
    /// returns false when the store has stopped taking them.
    pub fn add_file(
        &mut self,
        path: &Path,
        location: &str,
        progress: &indicatif::ProgressBar,
        emit: &mut dyn FnMut(FactBatch) -> bool,
    ) -> Result<(), CurError> {
        reader::read_file(path, location, |columns| {
            for row in 0..columns.rows {
                self.add_row(columns, row)?;
            }
            progress.inc(columns.rows as u64);
            if self.pending.facts.len() >= FACT_BATCH {
                self.flush(emit)?;
            }
            Ok(())
        })?;
        Ok(())
    }

    /// Hands the pending facts to the store.
    pub fn flush(&mut self, emit: &mut dyn FnMut(FactBatch) -> bool) -> Result<(), CurError> {
        if !self.pending.facts.is_empty() && !emit(std::mem::take(&mut self.pending)) {
            return Err(invalid(self.period.to_string(), "the store stopped taking facts"));
        }
        Ok(())
    }

    fn add_row(&mut self, c: &Columns<'_>, row: usize) -> Result<(), CurError> {
        self.rows += 1;
        let operation = c.text(Col::LineItemOperation, row);
        if operation == "EKSPod-EC2" || operation == "ECSTask-EC2" {
            self.split_rows += 1;
            return self.add_split_row(c, row, operation == "ECSTask-EC2");
        }
        let line_type = c.text(Col::LineItemLineItemType, row);
        let unblended = c.amount(Col::LineItemUnblendedCost, row)?;
        let amortized = amortized_cost(c, row, line_type, unblended)?;
        self.unblended_micros += micros_from_usd(unblended);
        self.amortized_micros += micros_from_usd(amortized);
        let start = c.epoch_seconds(Col::LineItemUsageStartDate, row)?;
        let is_instance = operation.contains("RunInstances")
            && c.text(Col::ProductProductFamily, row).contains("Compute Instance")
            && matches!(line_type, "Usage" | "SavingsPlanCoveredUsage" | "DiscountedUsage");
        if is_instance {
            return self.add_instance_line(c, row, start, line_type, unblended, amortized);
        }
        let key = (
            start - start.rem_euclid(86_400),
            c.text(Col::LineItemProductCode, row).to_string(),
            line_type.to_string(),
            c.text(Col::LineItemUsageType, row).to_string(),
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
        let instance_id = c.text(Col::LineItemResourceId, row);
        let net_amortized = net_amortized_cost(c, row, line_type, amortized)?;
        let public_on_demand = c.amount(Col::PricingPublicOnDemandCost, row)?;
        let usage = c.amount(Col::LineItemUsageAmount, row)?;
        let key = (self.strings.id(instance_id), hour);
        if let Some(existing) = self.instances.get_mut(&key) {
            // Several lines for one instance-hour (part Savings Plan, part On-Demand): add up.
            existing.amortized += amortized;
            existing.net_amortized += net_amortized;
            existing.unblended += unblended;
            existing.public_on_demand += public_on_demand;
            existing.hour.usage_hours += usage;
            return Ok(());
        }
        let product = c.map(Col::Product, row)?;
        let tags = c.map(Col::ResourceTags, row)?;
        let product_value = |name: &str| product.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_ref());
        let usage_type = c.text(Col::LineItemUsageType, row);
        let mut instance_type = c.text(Col::ProductInstanceType, row).to_string();
        if instance_type.is_empty() {
            // Spot lines may omit the type; CID reads it from the description.
            let described = c.text(Col::LineItemLineItemDescription, row).split(' ').next().unwrap_or("");
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
        let purchase_option = if !c.text(Col::SavingsPlanSavingsPlanARN, row).is_empty() {
            "Savings Plans"
        } else if !c.text(Col::ReservationReservationARN, row).is_empty() {
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
                    instance_id: instance_id.to_string(),
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
        let parent = c.text(Col::SplitLineItemParentResourceId, row);
        let split_cost = c.amount(Col::SplitLineItemSplitCost, row)?;
        let unused_cost = c.amount(Col::SplitLineItemUnusedCost, row)?;
        let resource = Resource::from_usage_type(c.text(Col::LineItemUsageType, row));
        // CID drops split rows with no parent and no cost: they are noise.
        if ecs || resource.is_none() || (parent.is_empty() && split_cost == 0.0) {
            self.split_rows_skipped += 1;
            return Ok(());
        }
        let start = c.epoch_seconds(Col::LineItemUsageStartDate, row)?;
        let hour = start - start.rem_euclid(3600);
        let tags = c.map(Col::ResourceTags, row)?;
        let tag = |name: &str| tags.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_ref());
        // arn:aws:eks:<region>:<account>:pod/<cluster>/<namespace>/<pod>/<uid>
        let arn = c.text(Col::LineItemResourceId, row);
        let mut parts = arn.split('/');
        let (cluster, namespace, pod) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(_), Some(cluster), Some(namespace), Some(pod)) => (cluster, namespace, pod),
            _ if !tag("aws_eks_namespace").is_empty() => {
                (tag("aws_eks_cluster_name"), tag("aws_eks_namespace"), "")
            }
            _ => {
                return Err(invalid(
                    c.location(),
                    format!(
                        "split row with resource id {arn:?}: neither a pod ARN nor an aws_eks_namespace tag"
                    ),
                ));
            }
        };
        let deployment = tag("aws_eks_deployment");
        let workload = if deployment.is_empty() { tag("aws_eks_workload_name") } else { deployment };
        let labels: BTreeMap<&str, &str> = tags
            .iter()
            .filter(|(k, _)| k.starts_with("user_"))
            .map(|(k, v)| (k.as_ref(), v.as_ref()))
            .collect();
        let labels = serde_json::to_string(&labels).unwrap_or_else(|_| "{}".into());
        let dimensions = [
            self.strings.id(cluster),
            self.strings.id(namespace),
            self.strings.id(workload),
            self.strings.id(tag("aws_eks_workload_type")),
            self.strings.id(pod),
            self.strings.id(tag("aws_eks_node")),
            self.strings.id(&labels),
        ];
        let next_pod = self.pods.len() as u32;
        let pod_index = *self.pods.entry(dimensions).or_insert(next_pod);
        let instance = self.strings.id(parent);
        let next_id = self.pod_ids.len() as i64;
        let pod_id = *self.pod_ids.entry((pod_index, instance)).or_insert(next_id);
        if pod_id == next_id {
            self.pod_first_seen.push((instance, hour));
            let text = |id: u32| self.strings.get(id).to_string();
            self.pending.pods.push(PodRecord {
                id: pod_id,
                cluster: text(dimensions[0]),
                namespace: text(dimensions[1]),
                workload: text(dimensions[2]),
                workload_type: text(dimensions[3]),
                pod: text(dimensions[4]),
                node: text(dimensions[5]),
                instance_id: parent.to_string(),
                instance_type: String::new(),
                gpu_model: String::new(),
                purchase_option: String::new(),
                labels: text(dimensions[6]),
            });
        }
        // Net costs only when present and positive, else gross (CID rule).
        let net = |column: Col, gross: f64| -> Result<f64, CurError> {
            Ok(c.number(column, row)?.filter(|v| *v > 0.0).unwrap_or(gross))
        };
        *self.pod_sums.entry((instance, hour)).or_default() += split_cost + unused_cost;
        let (split_nanos, unused_nanos) = (nanos_from_usd(split_cost), nanos_from_usd(unused_cost));
        self.allocated_nanos += split_nanos + unused_nanos;
        self.pending.facts.push(FactRecord {
            pod_id,
            hour,
            resource: resource.unwrap_or(Resource::Vcpu).as_str(),
            reserved_usage: c.amount(Col::SplitLineItemReservedUsage, row)?,
            actual_usage: c.amount(Col::SplitLineItemActualUsage, row)?,
            split_usage: c.amount(Col::SplitLineItemSplitUsage, row)?,
            split_usage_ratio: c.amount(Col::SplitLineItemSplitUsageRatio, row)?,
            split_cost_nanos: split_nanos,
            unused_cost_nanos: unused_nanos,
            net_split_cost_nanos: nanos_from_usd(net(Col::SplitLineItemNetSplitCost, split_cost)?),
            net_unused_cost_nanos: nanos_from_usd(net(Col::SplitLineItemNetUnusedCost, unused_cost)?),
            public_on_demand_split_cost_nanos: nanos_from_usd(
                c.amount(Col::SplitLineItemPublicOnDemandSplitCost, row)?,
            ),
            public_on_demand_unused_cost_nanos: nanos_from_usd(
                c.amount(Col::SplitLineItemPublicOnDemandUnusedCost, row)?,
            ),
        });
        Ok(())
    }

    /// The finished period (without its facts, which went to the store as they were read),
    /// how it reconciles, and the instance attributes of the pods written so far.
    pub fn finish(mut self) -> (CostPeriod, Reconciliation, Vec<PodAttributes>) {
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
                note(self.strings.get(key.0), key.1, 0.0, *pods);
            }
        }
        let mut with_pods = 0i64;
        let mut without_pods = 0i64;
        let mut instance_hours = Vec::with_capacity(self.instances.len());
        let mut parents = HashMap::with_capacity(self.instances.len());
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
                        note(&hour.instance_id, key.1, builder.amortized, pods);
                    }
                }
                None => without_pods += hour.amortized_cost_micros,
            }
            let attributes =
                [&hour.instance_type, &hour.gpu_model, &hour.purchase_option].map(|t| self.strings.id(t));
            parents.insert(key, attributes);
            instance_hours.push(hour);
        }
        instance_hours.sort_by(|a, b| (a.hour, &a.instance_id).cmp(&(b.hour, &b.instance_id)));
        let checked = self.pod_sums.len() as u64;
        let allocated = micros_from_nanos(self.allocated_nanos);
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
            cost_facts: Vec::new(),
            instance_hours,
            other_costs,
        };
        let text = |id: u32| self.strings.get(id).to_string();
        let pod_attributes = self
            .pod_first_seen
            .iter()
            .enumerate()
            .filter_map(|(pod_id, key)| {
                parents.get(key).map(|ids| {
                    let [instance_type, gpu_model, purchase_option] = ids.map(text);
                    PodAttributes { pod_id: pod_id as i64, instance_type, gpu_model, purchase_option }
                })
            })
            .collect();
        (period, reconciliation, pod_attributes)
    }
}

/// Strings seen in a period, each stored once and named by a small id.
#[derive(Default)]
struct Interner {
    ids: HashMap<Box<str>, u32>,
    texts: Vec<Box<str>>,
}

impl Interner {
    fn id(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.ids.get(text) {
            return id;
        }
        let id = self.texts.len() as u32;
        self.texts.push(text.into());
        self.ids.insert(text.into(), id);
        id
    }

    fn get(&self, id: u32) -> &str {
        &self.texts[id as usize]
    }
}

/// Facts per batch handed to the store.
const FACT_BATCH: usize = 50_000;

/// AWS's amortized ("effective") cost of a line (CID summary view, reference §2.3).
fn amortized_cost(c: &Columns<'_>, row: usize, line_type: &str, unblended: f64) -> Result<f64, CurError> {
    Ok(match line_type {
        "SavingsPlanCoveredUsage" => c.amount(Col::SavingsPlanSavingsPlanEffectiveCost, row)?,
        "SavingsPlanRecurringFee" => {
            c.amount(Col::SavingsPlanTotalCommitmentToDate, row)?
                - c.amount(Col::SavingsPlanUsedCommitment, row)?
        }
        "SavingsPlanNegation" | "SavingsPlanUpfrontFee" => 0.0,
        "DiscountedUsage" => c.amount(Col::ReservationEffectiveCost, row)?,
        "RIFee" => {
            c.amount(Col::ReservationUnusedAmortizedUpfrontFeeForBillingPeriod, row)?
                + c.amount(Col::ReservationUnusedRecurringFee, row)?
        }
        "Fee" if !c.text(Col::ReservationReservationARN, row).is_empty() => 0.0,
        "Refund"
            if c.text(Col::LineItemProductCode, row) == "ComputeSavingsPlans"
                && c.text(Col::LineItemLineItemDescription, row)
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
        "SavingsPlanCoveredUsage" => Col::SavingsPlanNetSavingsPlanEffectiveCost,
        "DiscountedUsage" => Col::ReservationNetEffectiveCost,
        _ => Col::LineItemNetUnblendedCost,
    };
    Ok(c.number(column, row)?.filter(|v| *v > 0.0).unwrap_or(amortized))
}

/// Where downloaded or local data files are read from during one period's ingest.
pub struct Scratch {
    pub dir: PathBuf,
}

/// Scratch folders are named `gpuledger-ingest-PID-NANOS` in the temporary folder.
const SCRATCH_PREFIX: &str = "gpuledger-ingest-";

impl Scratch {
    pub fn new() -> std::io::Result<Scratch> {
        remove_abandoned_scratch();
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("{SCRATCH_PREFIX}{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch { dir })
    }
}

/// Removes the scratch folders of ingests whose process is gone (killed before its `Drop`
/// could run): a downloaded month is gigabytes.
fn remove_abandoned_scratch() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(pid) = name.strip_prefix(SCRATCH_PREFIX).and_then(|rest| rest.split('-').next()) else {
            continue;
        };
        if pid.parse::<i64>().is_ok_and(|pid| !crate::store::process_alive(pid)) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
