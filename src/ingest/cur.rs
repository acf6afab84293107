//! CUR 2.0 ingest: classify every line item the way AWS's own dashboards do (CUR reference
//! §2.3, §2.4, §3, §4), build one billing period, reconcile it against the bill, and replace
//! the period in the store in one transaction.
//!
//! Classification:
//! - split rows (`EKSPod-EC2`): one [`CostFact`] per pod, resource and hour; never added to
//!   the bill (the parent EC2 rows already carry it);
//! - parent EC2 rows (`RunInstances`, `Compute Instance`, usage line types): one
//!   [`InstanceHour`] per instance and hour, purchase option by the CID rule, with its usage
//!   account, which its pods take (a pod is billed to the account its node runs in);
//! - discounts, credits, refunds and tax: outside the amortized bill, bill lines only;
//! - everything else: [`OtherCost`] per day, service, line type, usage type, account,
//!   cluster and allocation tags.
//!
//! Every line but the split rows is also summed into a [`BillLine`] per invoice, billing
//! entity, account (with the name the export gives it), service and line type (the tie-out
//! bridge), and into a [`BillDay`] per
//! day, service and account (the Cost Explorer cross-check). Money is summed in integer
//! nano-dollars and rounded to micro-dollars once per stored row; the amortized bill is the
//! sum of the stored instance-hour and other-cost rows, so Kubernetes + unallocated EC2 +
//! other = the bill exactly.

use std::collections::BTreeMap;
use std::path::Path;

use polars::prelude::PlHashMap as HashMap;

use crate::catalog;
pub use crate::domain::runs::{Disagreement, Reconciliation};
use crate::money::{micros_from_nanos, nanos_from_usd, usd_decimal};
use crate::period::Period;
use crate::sources::columns::{self, Columns};
use crate::sources::cur::reader::{self, Col};
use crate::sources::row_identity::{RowIdentities, RowKey};
use crate::sources::{SourceError, invalid};
use crate::split::Resource;
use crate::store::{
    BillDay, BillLine, CommitmentMonth, CostPeriod, FactBatch, FactRecord, InstanceHour, LineCategory,
    OtherCost, PodRecord, PurchaseOption,
};

/// Σ(split + unused) may differ from the parent's amortized cost by this fraction.
pub const SPLIT_TOLERANCE: f64 = 1e-4;

/// Running state of one instance-hour from its (possibly several) parent lines; money in
/// nano-dollars, rounded once at the end.
struct InstanceBuilder {
    /// Interned cluster, instance type, GPU model, usage account and region (a month holds hundreds
    /// of thousands of instance-hours: their strings are made at the end).
    texts: [u32; 5],
    /// The option of the instance-hour's first line: its pods' own option.
    purchase_option: PurchaseOption,
    gpu_count: i64,
    vcpu: i64,
    memory_gib: i64,
    /// Σ amortized cost of every line, for the reconciliation with the pods.
    amortized: f64,
    /// The lines summed by purchase option (one part unless the hour was billed in several
    /// lines under different options: part Savings Plan, part On-Demand).
    parts: Vec<(PurchaseOption, LineParts)>,
}

/// One commitment's fee lines of the period; nano-dollars.
#[derive(Default)]
struct CommitmentBuilder {
    record: CommitmentMonth,
    fee_nanos: i128,
    used_nanos: i128,
}

/// The lines of one instance-hour under one purchase option; nano-dollars.
#[derive(Default)]
struct LineParts {
    usage_hours: f64,
    amortized_nanos: i128,
    net_amortized_nanos: i128,
    unblended_nanos: i128,
    public_on_demand_nanos: i128,
}

impl LineParts {
    fn add(&mut self, usage: f64, amortized: i128, net_amortized: i128, unblended: i128, public: i128) {
        self.usage_hours += usage;
        self.amortized_nanos += amortized;
        self.net_amortized_nanos += net_amortized;
        self.unblended_nanos += unblended;
        self.public_on_demand_nanos += public;
    }
}

/// Sums of one group of bill lines, nano-dollars.
#[derive(Default)]
struct LineSums {
    unblended: i128,
    amortized: i128,
    /// Σ (net unblended − unblended): the discount the lines carry in their net columns.
    net_delta: i128,
}

/// What a line is to the bill: usage and fees (the amortized bill), or an adjustment on the
/// invoice outside it.
fn category(line_type: &str, c: &Columns<'_>, row: usize) -> LineCategory {
    match line_type {
        "Tax" => LineCategory::Tax,
        "Credit" => LineCategory::Credit,
        // A refund of a Savings Plan's upfront fee belongs to its amortization.
        "Refund" if is_savings_plan_fee_refund(c, row) => LineCategory::Usage,
        "Refund" => LineCategory::Refund,
        other if other.ends_with("Discount") => LineCategory::Discount,
        _ => LineCategory::Usage,
    }
}

fn is_savings_plan_fee_refund(c: &Columns<'_>, row: usize) -> bool {
    c.text(Col::LineItemProductCode, row) == "ComputeSavingsPlans"
        && c.text(Col::LineItemLineItemDescription, row)
            .starts_with("Refund for one-time fee for Savings Plan ID")
}

/// A line's `user_*` tags (imported labels and cost allocation tags) as a JSON object with
/// sorted keys: how pods' labels and other costs' tags are stored.
fn user_labels(tags: &columns::Pairs<'_>) -> String {
    let labels: BTreeMap<&str, &str> =
        tags.iter().filter(|(k, _)| k.starts_with("user_")).map(|(k, v)| (k.as_ref(), v.as_ref())).collect();
    serde_json::to_string(&labels).unwrap_or_else(|_| "{}".into())
}

fn nanos(usd: f64) -> i128 {
    i128::from(nanos_from_usd(usd))
}

/// Builds one billing period from its data files, chunk by chunk.
pub struct PeriodBuilder {
    period: Period,
    data_version: String,
    strings: Interner,
    /// Pod dimensions (cluster, namespace, workload, workload type, pod, node, labels) as
    /// interned ids; facts point at them by index.
    pods: HashMap<[u32; 7], u32>,
    /// Store pod id per (pod dimensions, instance); the pods, in id order, and where each was
    /// first seen (instance, hour), to give it the instance's attributes at the end.
    pod_ids: HashMap<(u32, u32), i64>,
    /// Each stored pod's interned dimensions and instance, in id order: the records are made
    /// at the end, so a churny month's pods are not held as strings while it is read.
    pod_keys: Vec<([u32; 7], u32)>,
    pod_first_seen: Vec<(u32, i64)>,
    /// Store pod id per pod ARN and instance: the per-row shortcut past the tags. Keyed by
    /// the ARN's XXH3-128 hash (one lookup a row in a small table, not an interning and a
    /// lookup, nor a visit to the ARN's text held elsewhere): two of a month's hundred
    /// thousand ARNs share a hash with a probability of about 10⁻²⁹.
    pod_by_arn: rustc_hash::FxHashMap<(u128, u32), i64>,
    /// The last split row's parent instance and its interned id: a chunk lists an
    /// instance-hour's split rows together, so most rows skip the interner.
    last_parent: (String, u32),
    /// Σ (split + unused) of the instance-hour the last split rows belong to, not yet added
    /// to `pod_sums` (one map update per run of rows, not per row).
    pod_sum_run: Option<((u32, i64), i128)>,
    /// Facts (and new pods) read but not yet handed to the store.
    pending: FactBatch,
    allocated_nanos: i128,
    /// Keyed by (interned instance id, hour).
    instances: HashMap<(u32, i64), InstanceBuilder>,
    /// Σ (split + unused) of each instance-hour's pods, nano-dollars (the same sums whatever
    /// order the rows come in).
    pod_sums: HashMap<(u32, i64), i128>,
    /// Keyed by (day, interned service, line type, usage type, account, cluster, tags).
    other: BTreeMap<(i64, [u32; 6]), (i128, i128, f64)>,
    /// Keyed by interned (billing entity, invoice, account, service, line type) and category.
    bill: BTreeMap<([u32; 5], LineCategory), LineSums>,
    /// Unblended and amortized nanos keyed by (day, interned service or `Tax`, account).
    days: BTreeMap<(i64, [u32; 2]), (i128, i128)>,
    /// Each usage account's name (interned), as the export names it.
    account_names: HashMap<u32, u32>,
    /// Each Savings Plan's and reservation's fee lines, by ARN.
    commitments: BTreeMap<String, CommitmentBuilder>,
    /// Some line carried a net column: the export has `net_*` columns.
    has_net: bool,
    currency: Option<String>,
    /// The payer account of the first line that names one.
    billing_account: String,
    rows: u64,
    split_rows: u64,
    split_rows_skipped: u64,
    /// Every row's identity: a row the delivery holds twice is refused ([`RowIdentities`]).
    identities: RowIdentities,
    key: RowKey,
}

impl PeriodBuilder {
    pub fn new(period: Period, data_version: &str) -> PeriodBuilder {
        PeriodBuilder {
            period,
            data_version: data_version.to_string(),
            strings: Interner::default(),
            pods: HashMap::default(),
            pod_ids: HashMap::default(),
            pod_keys: Vec::new(),
            pod_first_seen: Vec::new(),
            pod_by_arn: Default::default(),
            last_parent: (String::new(), u32::MAX),
            pod_sum_run: None,
            pending: FactBatch::default(),
            allocated_nanos: 0,
            instances: HashMap::default(),
            pod_sums: HashMap::default(),
            other: BTreeMap::new(),
            bill: BTreeMap::new(),
            days: BTreeMap::new(),
            account_names: HashMap::default(),
            commitments: BTreeMap::new(),
            has_net: false,
            currency: None,
            billing_account: String::new(),
            rows: 0,
            split_rows: 0,
            split_rows_skipped: 0,
            identities: RowIdentities::default(),
            key: RowKey::default(),
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
    ) -> Result<(), SourceError> {
        self.identities.begin_file(location);
        reader::read_file(path, location, |columns| {
            for row in 0..columns.rows {
                self.add_identity(columns, row)?;
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
    pub fn flush(&mut self, emit: &mut dyn FnMut(FactBatch) -> bool) -> Result<(), SourceError> {
        if self.pending.facts.is_empty() {
            return Ok(());
        }
        // The next batch's room at once: a batch grown push by push copies itself a dozen times.
        let next = FactBatch { pods: Vec::new(), facts: Vec::with_capacity(2 * FACT_BATCH) };
        if !emit(std::mem::replace(&mut self.pending, next)) {
            return Err(invalid(self.period.to_string(), "the store stopped taking facts"));
        }
        Ok(())
    }

    /// A row's identity: its line item id and time interval, unique in a delivery (CUR
    /// reference §1); without a line item id, the values that tell lines apart in the columns
    /// read (resource, usage type, operation, line type, times, account, product, amounts,
    /// the split's parent).
    fn add_identity(&mut self, c: &Columns<'_>, row: usize) -> Result<(), SourceError> {
        let line_item_id = c.text(Col::IdentityLineItemId, row);
        let key = self.key.clear().text(line_item_id).text(c.text(Col::IdentityTimeInterval, row));
        if line_item_id.is_empty() {
            key.text(c.text(Col::LineItemResourceId, row))
                .text(c.text(Col::LineItemUsageType, row))
                .text(c.text(Col::LineItemOperation, row))
                .text(c.text(Col::LineItemLineItemType, row))
                .int(c.optional_epoch_seconds(Col::LineItemUsageStartDate, row)?.unwrap_or(i64::MIN))
                .int(c.optional_epoch_seconds(Col::LineItemUsageEndDate, row)?.unwrap_or(i64::MIN))
                .text(c.text(Col::LineItemUsageAccountId, row))
                .text(c.text(Col::LineItemProductCode, row))
                .text(c.text(Col::LineItemLineItemDescription, row))
                .number(c.number(Col::LineItemUnblendedCost, row)?)
                .number(c.number(Col::LineItemUsageAmount, row)?)
                .text(c.text(Col::SplitLineItemParentResourceId, row))
                .number(c.number(Col::SplitLineItemSplitCost, row)?)
                .number(c.number(Col::SplitLineItemUnusedCost, row)?);
        }
        let identity = key.identity();
        self.identities.add(identity, c.first_row() + row)
    }

    fn add_row(&mut self, c: &Columns<'_>, row: usize) -> Result<(), SourceError> {
        self.rows += 1;
        let operation = c.text(Col::LineItemOperation, row);
        if operation == "EKSPod-EC2" || operation == "ECSTask-EC2" {
            self.split_rows += 1;
            return self.add_split_row(c, row, operation == "ECSTask-EC2");
        }
        let line_type = c.text(Col::LineItemLineItemType, row);
        let unblended = c.amount(Col::LineItemUnblendedCost, row)?;
        let category = category(line_type, c, row);
        let adjustment = category != LineCategory::Usage;
        let amortized = if adjustment { unblended } else { amortized_cost(c, row, line_type, unblended)? };
        let net_unblended = c.number(Col::LineItemNetUnblendedCost, row)?;
        self.has_net |= net_unblended.is_some();
        self.check_currency(c, row)?;
        if self.billing_account.is_empty() {
            self.billing_account = c.text(Col::BillPayerAccountId, row).to_string();
        }
        let start = c.epoch_seconds(Col::LineItemUsageStartDate, row)?;
        // Credits and refunds may be dated at the usage they correct; everything else must
        // fall in the billing period.
        if !adjustment {
            self.check_in_period(c, row, start)?;
        }
        let (unblended_nanos, amortized_nanos) = (nanos(unblended), nanos(amortized));
        let bill_key = [
            self.strings.id(c.text(Col::BillBillingEntity, row)),
            self.strings.id(c.text(Col::BillInvoiceId, row)),
            self.strings.id(c.text(Col::LineItemUsageAccountId, row)),
            self.strings.id(c.text(Col::LineItemProductCode, row)),
            self.strings.id(line_type),
        ];
        if !self.account_names.contains_key(&bill_key[2]) {
            let name = self.strings.id(c.text(Col::LineItemUsageAccountName, row));
            self.account_names.insert(bill_key[2], name);
        }
        let sums = self.bill.entry((bill_key, category)).or_default();
        sums.unblended += unblended_nanos;
        sums.amortized += amortized_nanos;
        sums.net_delta += net_unblended.map_or(0, |net| nanos(net) - unblended_nanos);
        // Cost Explorer shows tax as a service of its own.
        let day_service = if category == LineCategory::Tax { self.strings.id("Tax") } else { bill_key[3] };
        let day =
            self.days.entry((start - start.rem_euclid(86_400), [day_service, bill_key[2]])).or_default();
        day.0 += unblended_nanos;
        day.1 += amortized_nanos;
        if adjustment {
            return Ok(());
        }
        if matches!(line_type, "SavingsPlanRecurringFee" | "RIFee") {
            self.add_commitment_fee(c, row, line_type, start, unblended)?;
        }
        let is_instance = operation.contains("RunInstances")
            && c.text(Col::ProductProductFamily, row).contains("Compute Instance")
            && matches!(line_type, "Usage" | "SavingsPlanCoveredUsage" | "DiscountedUsage");
        if is_instance {
            self.check_hourly(c, row, start)?;
            return self.add_instance_line(c, row, start, line_type, unblended, amortized);
        }
        let tags = c.map(Col::ResourceTags, row)?;
        let tag = |name: &str| tags.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_ref());
        let resource_id = c.text(Col::LineItemResourceId, row);
        // The control plane names its cluster in its ARN: arn:aws:eks:<region>:<account>:cluster/<name>.
        let cluster = match tag("aws_eks_cluster_name") {
            "" => resource_id.split_once(":cluster/").map_or("", |(_, name)| name),
            named => named,
        };
        let allocation = user_labels(&tags);
        let key = (
            start - start.rem_euclid(86_400),
            [
                bill_key[3],
                bill_key[4],
                self.strings.id(c.text(Col::LineItemUsageType, row)),
                bill_key[2],
                self.strings.id(cluster),
                self.strings.id(&allocation),
            ],
        );
        let usage = c.amount(Col::LineItemUsageAmount, row)?;
        let entry = self.other.entry(key).or_default();
        entry.0 += unblended_nanos;
        entry.1 += amortized_nanos;
        entry.2 += usage;
        Ok(())
    }

    /// One currency per period: amounts in two cannot be added.
    fn check_currency(&mut self, c: &Columns<'_>, row: usize) -> Result<(), SourceError> {
        let code = c.text(Col::LineItemCurrencyCode, row);
        match &self.currency {
            _ if code.is_empty() => Ok(()),
            None => {
                self.currency = Some(code.to_string());
                Ok(())
            }
            Some(seen) if seen == code => Ok(()),
            Some(seen) => Err(c.bad(
                row,
                Col::LineItemCurrencyCode,
                format!("{code} in a period billed in {seen}: gpuledger does not add two currencies"),
            )),
        }
    }

    fn check_in_period(&self, c: &Columns<'_>, row: usize, start: i64) -> Result<(), SourceError> {
        if start < self.period.start() || start >= self.period.end() {
            let when = chrono::DateTime::from_timestamp(start, 0).map(|t| t.to_rfc3339()).unwrap_or_default();
            return Err(c.bad(
                row,
                Col::LineItemUsageStartDate,
                format!("{when} is outside the billing period {}", self.period),
            ));
        }
        Ok(())
    }

    /// Instance and split lines span one hour in an hourly export; a daily or monthly one
    /// cannot be joined with hourly GPU metrics.
    fn check_hourly(&self, c: &Columns<'_>, row: usize, start: i64) -> Result<(), SourceError> {
        match c.optional_epoch_seconds(Col::LineItemUsageEndDate, row)? {
            Some(end) if end - start > 3600 => Err(c.bad(
                row,
                Col::LineItemUsageEndDate,
                format!(
                    "a line of instance or pod usage spans {} hours: this is not an hourly export (create the CUR 2.0 export with time granularity HOURLY)",
                    (end - start) as f64 / 3600.0
                ),
            )),
            _ => Ok(()),
        }
    }

    fn add_instance_line(
        &mut self,
        c: &Columns<'_>,
        row: usize,
        start: i64,
        line_type: &str,
        unblended: f64,
        amortized: f64,
    ) -> Result<(), SourceError> {
        let hour = start - start.rem_euclid(3600);
        let instance_id = c.text(Col::LineItemResourceId, row);
        let net_amortized = nanos(net_amortized_cost(c, row, line_type, amortized)?);
        let public_on_demand = nanos(c.amount(Col::PricingPublicOnDemandCost, row)?);
        let usage = c.amount(Col::LineItemUsageAmount, row)?;
        let usage_type = c.text(Col::LineItemUsageType, row);
        let purchase_option = if !c.text(Col::SavingsPlanSavingsPlanARN, row).is_empty() {
            PurchaseOption::SavingsPlans
        } else if !c.text(Col::ReservationReservationARN, row).is_empty() {
            PurchaseOption::Reserved
        } else if usage_type.contains("Spot") {
            PurchaseOption::Spot
        } else {
            PurchaseOption::OnDemand
        };
        let line = |parts: &mut LineParts| {
            parts.add(usage, nanos(amortized), net_amortized, nanos(unblended), public_on_demand)
        };
        let key = (self.strings.id(instance_id), hour);
        if let Some(existing) = self.instances.get_mut(&key) {
            // Several lines for one instance-hour (part Savings Plan, part On-Demand): add up,
            // by option.
            existing.amortized += amortized;
            match existing.parts.iter_mut().find(|(option, _)| *option == purchase_option) {
                Some((_, parts)) => line(parts),
                None => {
                    let mut parts = LineParts::default();
                    line(&mut parts);
                    existing.parts.push((purchase_option, parts));
                }
            }
            return Ok(());
        }
        let product = c.map(Col::Product, row)?;
        let tags = c.map(Col::ResourceTags, row)?;
        let product_value = |name: &str| product.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_ref());
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
        let cluster = tags
            .iter()
            .find(|(k, _)| k == "aws_eks_cluster_name")
            .map(|(_, v)| v.to_string())
            .unwrap_or_default();
        let texts = [
            self.strings.id(&cluster),
            self.strings.id(&instance_type),
            self.strings.id(known.map_or("", |t| t.gpu_model)),
            self.strings.id(c.text(Col::LineItemUsageAccountId, row)),
            self.strings.id(c.text(Col::ProductRegionCode, row)),
        ];
        self.instances.insert(
            key,
            InstanceBuilder {
                texts,
                purchase_option,
                gpu_count: number(product_value("gpu")).or(known.map(|t| i64::from(t.gpus))).unwrap_or(0),
                vcpu: number(product_value("vcpu")).or(known.map(|t| i64::from(t.vcpu))).unwrap_or(0),
                memory_gib: number(product_value("memory"))
                    .or(known.map(|t| i64::from(t.memory_gib)))
                    .unwrap_or(0),
                amortized,
                parts: {
                    let mut parts = LineParts::default();
                    line(&mut parts);
                    vec![(purchase_option, parts)]
                },
            },
        );
        Ok(())
    }

    /// A commitment's fee line: what the commitment is (from the first of its lines that
    /// says), the hours the line covers, what it cost and how much of that covered usage.
    /// - A Savings Plan's fee is `savings_plan_total_commitment_to_date` (recurring and
    ///   amortized upfront commitment), of which `savings_plan_used_commitment` was used.
    /// - A reservation's fee is its recurring fee plus its amortized upfront fee; the
    ///   `reservation_unused_*` columns are the part not used.
    fn add_commitment_fee(
        &mut self,
        c: &Columns<'_>,
        row: usize,
        line_type: &str,
        start: i64,
        unblended: f64,
    ) -> Result<(), SourceError> {
        let reservation = line_type == "RIFee";
        let arn = if reservation {
            c.text(Col::ReservationReservationARN, row)
        } else {
            c.text(Col::SavingsPlanSavingsPlanARN, row)
        };
        let (fee, unused) = if reservation {
            let upfront = c.amount(Col::ReservationAmortizedUpfrontFeeForBillingPeriod, row)?;
            let unused = c.amount(Col::ReservationUnusedRecurringFee, row)?
                + c.amount(Col::ReservationUnusedAmortizedUpfrontFeeForBillingPeriod, row)?;
            (unblended + upfront, unused)
        } else {
            let fee = c.amount(Col::SavingsPlanTotalCommitmentToDate, row)?;
            (fee, fee - c.amount(Col::SavingsPlanUsedCommitment, row)?)
        };
        let end = c.optional_epoch_seconds(Col::LineItemUsageEndDate, row)?.unwrap_or(start + 3600);
        let time = |column: Col| -> Result<i64, SourceError> {
            match c.text(column, row) {
                "" => Ok(0),
                text => columns::parse_timestamp(text)
                    .ok_or_else(|| c.bad(row, column, format!("{text:?} is not a date and time"))),
            }
        };
        let entry = self.commitments.entry(arn.to_string()).or_default();
        entry.fee_nanos += nanos(fee);
        entry.used_nanos += nanos(fee - unused);
        entry.record.hours += (end - start).max(0) as f64 / 3600.0;
        if !entry.record.kind.is_empty() {
            return Ok(());
        }
        let record = &mut entry.record;
        record.id = arn.to_string();
        if reservation {
            record.kind = "reservation".into();
            record.offering = "Reserved".into();
            record.instance_type = match c.text(Col::ProductInstanceType, row) {
                "" => c.text(Col::LineItemUsageType, row).rsplit(':').next().unwrap_or("").to_string(),
                named => named.to_string(),
            };
            record.family = record.instance_type.split('.').next().unwrap_or("").to_string();
            record.region = c.text(Col::ProductRegionCode, row).to_string();
            record.term_start = time(Col::ReservationStartTime)?;
            record.term_end = time(Col::ReservationEndTime)?;
            record.count = c.number(Col::ReservationNumberOfReservations, row)?.map_or(1, |n| n as i64);
        } else {
            record.kind = "savings_plan".into();
            record.offering = c.text(Col::SavingsPlanOfferingType, row).to_string();
            record.family = match (record.offering.as_str(), c.text(Col::SavingsPlanInstanceTypeFamily, row))
            {
                ("EC2InstanceSavingsPlans", family) if !family.is_empty() => family.to_string(),
                ("SageMakerSavingsPlans", _) => "SageMaker".into(),
                _ => "Compute".into(),
            };
            record.region = c.text(Col::SavingsPlanRegion, row).to_string();
            record.purchase_term = c.text(Col::SavingsPlanPurchaseTerm, row).to_string();
            record.payment_option = c.text(Col::SavingsPlanPaymentOption, row).to_string();
            record.term_start = time(Col::SavingsPlanStartTime)?;
            record.term_end = time(Col::SavingsPlanEndTime)?;
            record.count = 1;
        }
        if record.purchase_term.is_empty() && record.term_end > record.term_start {
            // A reservation's line does not name its term: its length does.
            let years = ((record.term_end - record.term_start) as f64 / (365.25 * 86_400.0)).round();
            record.purchase_term = format!("{years}yr");
        }
        Ok(())
    }

    fn add_split_row(&mut self, c: &Columns<'_>, row: usize, ecs: bool) -> Result<(), SourceError> {
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
        self.check_in_period(c, row, start)?;
        self.check_hourly(c, row, start)?;
        let hour = start - start.rem_euclid(3600);
        if self.last_parent.1 == u32::MAX || self.last_parent.0 != parent {
            self.last_parent = (parent.to_string(), self.strings.id(parent));
        }
        let instance = self.last_parent.1;
        // A pod's every row names it by the same ARN (its uid makes it unique): the tags
        // are read and the pod resolved once per pod and instance, not once per row.
        let arn = c.text(Col::LineItemResourceId, row);
        let pod_id = if arn.contains('/') {
            let key = (xxhash_rust::xxh3::xxh3_128(arn.as_bytes()), instance);
            match self.pod_by_arn.get(&key) {
                Some(&pod_id) => pod_id,
                None => {
                    let pod_id = self.resolve_pod(c, row, arn, instance, hour)?;
                    self.pod_by_arn.insert(key, pod_id);
                    pod_id
                }
            }
        } else {
            self.resolve_pod(c, row, arn, instance, hour)?
        };
        // Net costs only when present and positive, else gross (CID rule).
        let net = |column: Col, gross: f64| -> Result<f64, SourceError> {
            Ok(c.number(column, row)?.filter(|v| *v > 0.0).unwrap_or(gross))
        };
        let (split_nanos, unused_nanos) = (nanos_from_usd(split_cost), nanos_from_usd(unused_cost));
        self.add_pod_sum((instance, hour), i128::from(split_nanos) + i128::from(unused_nanos));
        self.allocated_nanos += i128::from(split_nanos) + i128::from(unused_nanos);
        self.pending.facts.push(FactRecord {
            pod_id,
            hour,
            resource: resource.unwrap_or(Resource::Vcpu).as_str(),
            split_usage: c.amount(Col::SplitLineItemSplitUsage, row)?,
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

    /// Spark's pods (`--engine spark`), in pod-number order: each resolved to a pod exactly as
    /// a split row is. Returns the store pod id and parent of each pod number.
    pub fn add_spark_pods(
        &mut self,
        path: &Path,
        location: &str,
        first: usize,
    ) -> Result<Vec<(i64, u32)>, SourceError> {
        // Facts find their pod by its place in the list: the file must hold pods first, first
        // + 1, … in that order, or costs would land on other pods.
        let (numbers, unreadable) =
            spark_frame(path, location, "Spark's pods", Some(vec!["gl_pod_key".into()]))?;
        let numbers = numbers.column("gl_pod_key").and_then(|c| c.i64().cloned()).map_err(unreadable)?;
        if let Some((row, key)) =
            numbers.iter().enumerate().find(|(row, key)| *key != Some((first + row) as i64))
        {
            return Err(invalid(
                location,
                format!(
                    "row {}: pod number {key:?} where {} was due: Spark's pods are out of order",
                    row + 1,
                    first + row
                ),
            ));
        }
        let mut keys = Vec::new();
        reader::read_file(path, location, |c| {
            for row in 0..c.rows {
                let parent = c.text(Col::SplitLineItemParentResourceId, row);
                let instance = self.strings.id(parent);
                let hour = c.epoch_seconds(Col::LineItemUsageStartDate, row)?;
                let pod_id =
                    self.resolve_pod(c, row, c.text(Col::LineItemResourceId, row), instance, hour)?;
                keys.push((pod_id, instance));
            }
            Ok(())
        })?;
        Ok(keys)
    }

    /// Spark's pod-hours (`--engine spark`): one fact per pod, hour and resource, as the split
    /// rows would have made (costs already in nano-dollars).
    pub fn add_spark_pod_hours(
        &mut self,
        path: &Path,
        location: &str,
        pods: &[(i64, u32)],
        progress: &indicatif::ProgressBar,
        emit: &mut dyn FnMut(FactBatch) -> bool,
    ) -> Result<(), SourceError> {
        use crate::sources::spark::{MONEY, RESOURCES};
        let (frame, unreadable) = spark_frame(path, location, "Spark's pod-hours", None)?;
        let integers = |name: &str| -> Result<Vec<Option<i64>>, SourceError> {
            let column = frame.column(name).map_err(unreadable)?;
            Ok(column.i64().map_err(unreadable)?.iter().collect())
        };
        let keys = integers("gl_pod_key")?;
        let hours = integers("hour")?;
        let mut columns = Vec::new();
        for resource in RESOURCES {
            let usage = frame.column(&format!("{}_usage", resource.as_str())).map_err(unreadable)?;
            let usage: Vec<Option<f64>> = usage.f64().map_err(unreadable)?.iter().collect();
            let mut money = Vec::new();
            for name in MONEY {
                money.push(integers(&format!("{}_{name}", resource.as_str()))?);
            }
            columns.push((resource, usage, money));
        }
        for row in 0..frame.height() {
            let (Some(key), Some(hour)) = (keys[row], hours[row]) else {
                return Err(invalid(location, format!("row {}: no pod number or hour", row + 1)));
            };
            let Some(&(pod_id, instance)) = usize::try_from(key).ok().and_then(|k| pods.get(k)) else {
                return Err(invalid(
                    location,
                    format!("row {}: pod number {key} is not among Spark's pods", row + 1),
                ));
            };
            for (resource, usage, money) in &columns {
                let Some(split_usage) = usage[row] else { continue };
                let nanos = |i: usize| -> i64 { money[i][row].unwrap_or(0) };
                let (split, unused) = (nanos(0), nanos(1));
                self.add_pod_sum((instance, hour), i128::from(split) + i128::from(unused));
                self.allocated_nanos += i128::from(split) + i128::from(unused);
                self.pending.facts.push(FactRecord {
                    pod_id,
                    hour,
                    resource: resource.as_str(),
                    split_usage,
                    split_cost_nanos: split,
                    unused_cost_nanos: unused,
                    net_split_cost_nanos: nanos(2),
                    net_unused_cost_nanos: nanos(3),
                    public_on_demand_split_cost_nanos: nanos(4),
                    public_on_demand_unused_cost_nanos: nanos(5),
                });
            }
            if self.pending.facts.len() >= FACT_BATCH {
                self.flush(emit)?;
            }
        }
        progress.inc(frame.height() as u64);
        Ok(())
    }

    /// The split rows Spark read and skipped (`--engine spark`).
    pub fn add_spark_counts(&mut self, split_rows: u64, skipped: u64) {
        self.rows += split_rows;
        self.split_rows += split_rows;
        self.split_rows_skipped += skipped;
    }

    /// Adds to the pods' Σ (split + unused) of an instance-hour, through the running sum of
    /// the current run of rows.
    fn add_pod_sum(&mut self, key: (u32, i64), amount: i128) {
        match &mut self.pod_sum_run {
            Some((running, sum)) if *running == key => *sum += amount,
            _ => self.flush_pod_sum_run(Some((key, amount))),
        }
    }

    /// Adds the running sum to its instance-hour's and starts `next` (none at the end).
    fn flush_pod_sum_run(&mut self, next: Option<((u32, i64), i128)>) {
        if let Some((done, sum)) = std::mem::replace(&mut self.pod_sum_run, next) {
            *self.pod_sums.entry(done).or_default() += sum;
        }
    }

    /// The store pod id of a split row's pod on `instance`: from its ARN (or, without one, its
    /// tags), its dimensions and `user_*` labels; a new pod record the first time.
    fn resolve_pod(
        &mut self,
        c: &Columns<'_>,
        row: usize,
        arn: &str,
        instance: u32,
        hour: i64,
    ) -> Result<i64, SourceError> {
        let tags = c.map(Col::ResourceTags, row)?;
        let tag = |name: &str| tags.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_ref());
        // arn:aws:eks:<region>:<account>:pod/<cluster>/<namespace>/<pod>/<uid>
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
        let labels = user_labels(&tags);
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
        let next_id = self.pod_ids.len() as i64;
        let pod_id = *self.pod_ids.entry((pod_index, instance)).or_insert(next_id);
        if pod_id == next_id {
            self.pod_first_seen.push((instance, hour));
            self.pod_keys.push((dimensions, instance));
        }
        Ok(pod_id)
    }

    /// The finished period (without its facts, which went to the store as they were read),
    /// how it reconciles, and the instance attributes of the pods written so far.
    pub fn finish(mut self) -> Result<(CostPeriod, Reconciliation, Vec<PodRecord>), SourceError> {
        self.identities.check()?;
        let period_name = self.period.to_string();
        let micros = |nanos: i128, what: &str| -> Result<i64, SourceError> {
            i64::try_from(nanos).map(micros_from_nanos).map_err(|_| {
                invalid(
                    &period_name,
                    format!("{what} sums beyond 9.2 billion dollars: the export is corrupt"),
                )
            })
        };
        self.flush_pod_sum_run(None);
        // Every disagreement is noted; the report keeps the first 20 by hour and instance (the
        // same 20 whatever order the maps hold them in).
        let mut disagreements = Vec::new();
        let mut note = |instance_id: &str, hour: i64, instance_amortized: f64, pods: f64| {
            disagreements.push(Disagreement {
                instance_id: instance_id.to_string(),
                hour,
                instance_amortized,
                pods_split_plus_unused: pods,
            });
        };
        // Split rows whose parent line is not in the bill: their cost has no source.
        let dollars = |nanos: i128| nanos as f64 / 1e9;
        for (key, pods) in &self.pod_sums {
            if !self.instances.contains_key(key) {
                note(self.strings.get(key.0), key.1, 0.0, dollars(*pods));
            }
        }
        let mut with_pods = 0i64;
        let mut without_pods = 0i64;
        let mut instance_hours = Vec::with_capacity(self.instances.len());
        let mut parents = HashMap::with_capacity_and_hasher(self.instances.len(), Default::default());
        for (key, builder) in std::mem::take(&mut self.instances) {
            let [cluster, instance_type, gpu_model, account, region] = builder.texts;
            let text = |id: u32| self.strings.get(id).to_string();
            let cost = |nanos: i128| micros(nanos, "an instance-hour's cost");
            // One row per purchase option the hour was billed under.
            let mut amortized_micros = 0;
            for (purchase_option, parts) in &builder.parts {
                let hour = InstanceHour {
                    hour: key.1,
                    cluster: text(cluster),
                    instance_id: text(key.0),
                    instance_type: text(instance_type),
                    gpu_model: text(gpu_model),
                    gpu_count: builder.gpu_count,
                    vcpu: builder.vcpu,
                    memory_gib: builder.memory_gib,
                    purchase_option: *purchase_option,
                    usage_account_id: text(account),
                    region: text(region),
                    usage_hours: parts.usage_hours,
                    unblended_cost_micros: cost(parts.unblended_nanos)?,
                    amortized_cost_micros: cost(parts.amortized_nanos)?,
                    net_amortized_cost_micros: cost(parts.net_amortized_nanos)?,
                    public_on_demand_cost_micros: cost(parts.public_on_demand_nanos)?,
                };
                amortized_micros += hour.amortized_cost_micros;
                instance_hours.push(hour);
            }
            match self.pod_sums.get(&key) {
                Some(&pods) => {
                    let pods = dollars(pods);
                    with_pods += amortized_micros;
                    if (pods - builder.amortized).abs() > SPLIT_TOLERANCE * builder.amortized.abs().max(1e-6)
                    {
                        note(self.strings.get(key.0), key.1, builder.amortized, pods);
                    }
                }
                None => without_pods += amortized_micros,
            }
            parents.insert(key, ([instance_type, gpu_model, account], builder.purchase_option));
        }
        let disagreeing = disagreements.len() as u64;
        disagreements.sort_by(|a, b| (a.hour, &a.instance_id).cmp(&(b.hour, &b.instance_id)));
        disagreements.truncate(20);
        instance_hours.sort_by(|a, b| {
            (a.hour, &a.instance_id, a.purchase_option).cmp(&(b.hour, &b.instance_id, b.purchase_option))
        });
        let checked = self.pod_sums.len() as u64;
        let kubernetes = micros(self.allocated_nanos, "the pods' split cost")?;
        let text = |id: u32| self.strings.get(id).to_string();
        let mut other_costs = Vec::with_capacity(self.other.len());
        for (
            (day, [service, line_type, usage_type, account, cluster, tags]),
            (unblended, amortized, usage),
        ) in std::mem::take(&mut self.other)
        {
            other_costs.push(OtherCost {
                day,
                service: text(service),
                line_item_type: text(line_type),
                usage_type: text(usage_type),
                usage_account_id: text(account),
                cluster: text(cluster),
                tags: text(tags),
                unblended_cost_micros: micros(unblended, "other cost")?,
                amortized_cost_micros: micros(amortized, "other cost")?,
                usage_amount: usage,
            });
        }
        let mut bill_lines = Vec::with_capacity(self.bill.len());
        for (([entity, invoice, account, service, line_type], category), sums) in
            std::mem::take(&mut self.bill)
        {
            let net = sums.amortized + sums.net_delta;
            bill_lines.push(BillLine {
                category,
                billing_entity: text(entity),
                invoice_id: text(invoice),
                usage_account_id: text(account),
                usage_account_name: self
                    .account_names
                    .get(&account)
                    .map(|&name| text(name))
                    .unwrap_or_default(),
                service: text(service),
                line_item_type: text(line_type),
                unblended_micros: micros(sums.unblended, "a bill line")?,
                amortized_micros: micros(sums.amortized, "a bill line")?,
                net_amortized_micros: if self.has_net { Some(micros(net, "a bill line")?) } else { None },
            });
        }
        let mut bill_days = Vec::with_capacity(self.days.len());
        for ((day, [service, account]), (unblended, amortized)) in std::mem::take(&mut self.days) {
            bill_days.push(BillDay {
                day,
                service: text(service),
                usage_account_id: text(account),
                unblended_micros: micros(unblended, "a day's bill")?,
                amortized_micros: micros(amortized, "a day's bill")?,
            });
        }
        // Totals are sums of the stored rows, each rounded once.
        let instance_total: i64 = instance_hours.iter().map(|h| h.amortized_cost_micros).sum();
        let other_total: i64 = other_costs.iter().map(|o| o.amortized_cost_micros).sum();
        let amortized = instance_total + other_total;
        let unallocated = instance_total - kubernetes;
        let unblended: i64 = bill_lines.iter().map(|l| l.unblended_micros).sum();
        let net_amortized: Option<i64> = self.has_net.then(|| {
            bill_lines
                .iter()
                .filter(|l| l.category != LineCategory::Tax)
                .filter_map(|l| l.net_amortized_micros)
                .sum()
        });
        let commitments = std::mem::take(&mut self.commitments)
            .into_values()
            .map(|builder| {
                Ok(CommitmentMonth {
                    fee_micros: micros(builder.fee_nanos, "a commitment's fee")?,
                    used_micros: micros(builder.used_nanos, "a commitment's use")?,
                    ..builder.record
                })
            })
            .collect::<Result<Vec<_>, SourceError>>()?;
        let reconciliation = Reconciliation {
            period: period_name.clone(),
            rows_read: self.rows,
            split_rows: self.split_rows,
            split_rows_skipped: self.split_rows_skipped,
            bill_unblended_total: usd_decimal(unblended),
            bill_amortized_total: usd_decimal(amortized),
            kubernetes_allocated_cost: usd_decimal(kubernetes),
            instance_cost_with_pods: usd_decimal(with_pods),
            instance_cost_without_pods: usd_decimal(without_pods),
            unallocated_ec2_cost: usd_decimal(unallocated),
            other_cost: usd_decimal(other_total),
            instance_hours_checked: checked,
            instance_hours_disagreeing: disagreeing,
            disagreements,
            split_matches_parents: disagreeing == 0,
        };
        let period = CostPeriod {
            period: period_name.clone(),
            data_version: self.data_version.clone(),
            bill_unblended_micros: unblended,
            bill_amortized_micros: amortized,
            net_amortized_micros: net_amortized,
            kubernetes_micros: kubernetes,
            unallocated_ec2_micros: unallocated,
            currency: self.currency.clone().unwrap_or_else(|| "USD".into()),
            billing_account: std::mem::take(&mut self.billing_account),
            cost_facts: Vec::new(),
            instance_hours,
            other_costs,
            bill_lines,
            bill_days,
            commitments,
        };
        let pods = self
            .pod_keys
            .iter()
            .zip(&self.pod_first_seen)
            .enumerate()
            .map(|(id, ((dimensions, instance), first_seen))| {
                let ([instance_type, gpu_model, usage_account_id], purchase_option) =
                    parents.get(first_seen).map(|(ids, option)| (ids.map(text), *option)).unwrap_or_default();
                PodRecord {
                    id: id as i64,
                    cluster: text(dimensions[0]),
                    namespace: text(dimensions[1]),
                    workload: text(dimensions[2]),
                    workload_type: text(dimensions[3]),
                    pod: text(dimensions[4]),
                    node: text(dimensions[5]),
                    instance_id: text(*instance),
                    instance_type,
                    gpu_model,
                    purchase_option,
                    usage_account_id,
                    labels: text(dimensions[6]),
                }
            })
            .collect();
        Ok((period, reconciliation, pods))
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
fn amortized_cost(c: &Columns<'_>, row: usize, line_type: &str, unblended: f64) -> Result<f64, SourceError> {
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
fn net_amortized_cost(
    c: &Columns<'_>,
    row: usize,
    line_type: &str,
    amortized: f64,
) -> Result<f64, SourceError> {
    let column = match line_type {
        "SavingsPlanCoveredUsage" => Col::SavingsPlanNetSavingsPlanEffectiveCost,
        "DiscountedUsage" => Col::ReservationNetEffectiveCost,
        _ => Col::LineItemNetUnblendedCost,
    };
    Ok(c.number(column, row)?.filter(|v| *v > 0.0).unwrap_or(amortized))
}

/// A Parquet file of Spark's output read whole (or its `columns`), and how to say a polars
/// error about it (`what` names the output).
fn spark_frame<'a>(
    path: &Path,
    location: &'a str,
    what: &'a str,
    columns: Option<Vec<String>>,
) -> Result<
    (polars::prelude::DataFrame, impl Fn(polars::prelude::PolarsError) -> SourceError + Copy + 'a),
    SourceError,
> {
    use polars::prelude::{ParquetReader, SerReader};
    let unreadable = move |e: polars::prelude::PolarsError| invalid(location, format!("{what}: {e}"));
    let file = std::fs::File::open(path).map_err(|e| invalid(location, e))?;
    let frame = ParquetReader::new(file).with_columns(columns).finish().map_err(&unreadable)?;
    Ok((frame, unreadable))
}
