//! `gpuledger export focus --period P --out DIR [--format parquet|csv]`: the month's bills
//! written back as one FOCUS 1.3 Cost and Usage file, with gpuledger's split of each
//! Kubernetes node's cost among its pods as FOCUS 1.3's split cost allocation.
//!
//! - **Every charge of every FOCUS bill**, as gpuledger keeps it: one row per day and charge
//!   group (the dimensions a page groups by), its amounts the sum of the bill's rows.
//! - **A node's virtual machine** is written per charge period (an hour, or Azure's day) with
//!   its `ResourceId`, taken out of its group (of the groups differing only in their tags,
//!   when Google's cost allocation wrote one per namespace: in proportion to each, exactly;
//!   the origin then keeps no tags). Where gpuledger split it ([`crate::engine::cluster_split`]), that
//!   origin charge is replaced by its allocated charges: one per pod that ran on it, and one
//!   for what no pod was given (`AllocatedResourceName` `(unallocated)`). Each carries
//!   `AllocatedMethodId` `gpuledger-split-v1`, `AllocatedMethodDetails` (its share of the
//!   origin and the pod's hours and usage by resource), `AllocatedResourceId` (the pod's uid),
//!   `AllocatedResourceName` (namespace/pod) and `AllocatedTags` (cluster, namespace,
//!   workload, client). Every summable column of the allocated charges adds up to the origin
//!   charge's exactly (largest remainder on nano-units), so the file still sums to the bill.
//! - **A commitment discount's** id, type and category are the bill's (`CommitmentDiscountId`,
//!   `CommitmentDiscountType`, `CommitmentDiscountCategory`), null for a bill ingested before
//!   they were kept (migrations 0041 and 0043) and for the CUR's lines.
//! - **What the stored bill does not keep** is null (`PricingQuantity`/`PricingUnit`, `SkuId`,
//!   `SkuPriceId`, unit prices, the commitment's name, `RegionName`, `AvailabilityZone`) or
//!   derived: `ChargeFrequency` from the charge category, `ChargeDescription` from the
//!   service and resource type, the provider's names from its id.
//!
//! - **Streamed**: rows go to the file as they are made, typed (amounts as nano-units, times
//!   as seconds, texts borrowed from the stored charge), a Parquet row group at a time; the
//!   VMs' periods are read packed per day and unpacked one day at a time. It is written under
//!   a hidden name and renamed when whole, so a failed export leaves no file.
//!
//! - **The CUR** ([`write_cur`]): its instance-hours (a cluster's allocated to its pods where
//!   gpuledger split it, AWS's split being off; an instance's day allocated to its pods by
//!   AWS's split where AWS split it, at the granularity gpuledger keeps that split: per pod and
//!   day, [`CUR_SPLIT_METHOD_ID`]), its other costs per day and its invoices' discounts,
//!   credits, refunds and tax; AWS's FOCUS export of the same bill is then left out.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::engine::bills::counted;
use crate::engine::cluster_split::{ClusterSplit, METHOD_ID, SplitError, client_of, our_splits};
use crate::engine::kube_split::instance_key;
use crate::money::{Nanos, apportion_by_weight};
use crate::period::Period;
use crate::sources::focus_file::{Cell, FileError, FileFormat, RowWriter};
use crate::store::{
    Bill, BillCharge, BillVmDay, CostPeriod, InstanceHour, LineCategory, PurchaseOption, Store, StoreError,
    VmPeriod,
};

/// The columns written, in order: FOCUS 1.3's (no custom `x_` column).
pub const COLUMNS: [&str; 50] = [
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "ContractedCost",
    "BillingCurrency",
    "BillingAccountId",
    "BillingAccountName",
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ChargeCategory",
    "ChargeClass",
    "ChargeFrequency",
    "ChargeDescription",
    "PricingCategory",
    "CommitmentDiscountStatus",
    "ConsumedQuantity",
    "ConsumedUnit",
    "InvoiceIssuerName",
    "ProviderName",
    "PublisherName",
    "ServiceProviderName",
    "HostProviderName",
    "RegionId",
    "ResourceId",
    "ResourceType",
    "ServiceName",
    "ServiceCategory",
    "SubAccountId",
    "SubAccountName",
    "Tags",
    "AvailabilityZone",
    "CommitmentDiscountCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountType",
    "ContractedUnitPrice",
    "ListUnitPrice",
    "PricingQuantity",
    "PricingUnit",
    "RegionName",
    "ResourceName",
    "SkuId",
    "SkuPriceId",
    "AllocatedMethodId",
    "AllocatedMethodDetails",
    "AllocatedResourceId",
    "AllocatedResourceName",
    "AllocatedTags",
];

/// The position of a column in [`COLUMNS`] (at compile time: a name not there fails the build).
const fn column(name: &str) -> usize {
    let mut i = 0;
    while i < COLUMNS.len() {
        let (a, b) = (COLUMNS[i].as_bytes(), name.as_bytes());
        let mut same = a.len() == b.len();
        let mut k = 0;
        while same && k < a.len() {
            same = a[k] == b[k];
            k += 1;
        }
        if same {
            return i;
        }
        i += 1;
    }
    panic!("no such FOCUS column")
}

const BILLED: usize = column("BilledCost");
const EFFECTIVE: usize = column("EffectiveCost");
const LIST: usize = column("ListCost");
const CONTRACTED: usize = column("ContractedCost");
const CONSUMED: usize = column("ConsumedQuantity");
const RESOURCE_NAME: usize = column("ResourceName");
const COMMITMENT_CATEGORY: usize = column("CommitmentDiscountCategory");
const COMMITMENT_ID: usize = column("CommitmentDiscountId");
const COMMITMENT_TYPE: usize = column("CommitmentDiscountType");
const METHOD: usize = column("AllocatedMethodId");
const DETAILS: usize = column("AllocatedMethodDetails");
const ALLOCATED_ID: usize = column("AllocatedResourceId");
const ALLOCATED_NAME: usize = column("AllocatedResourceName");
const ALLOCATED_TAGS: usize = column("AllocatedTags");
/// The columns an allocated charge's rows differ in from its origin's and each other's.
const ALLOCATED: [usize; 5] = [METHOD, DETAILS, ALLOCATED_ID, ALLOCATED_NAME, ALLOCATED_TAGS];

/// File formats of the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FocusFormat {
    Parquet,
    /// Gzip CSV.
    Csv,
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Split(#[from] SplitError),
    #[error(transparent)]
    File(#[from] FileError),
    #[error("no bill of {0} is stored: run `gpuledger ingest focus` or `gpuledger ingest cur` first")]
    NoBills(Period),
    /// Virtual machines' costs stored before they kept their charge group (migration 0036).
    #[error(
        "the {provider} bill {billing_account} of {period} was stored before gpuledger kept each VM's charge periods by day (migration 0037): run `gpuledger ingest focus` on its delivery again"
    )]
    IngestAgain { provider: String, billing_account: String, period: Period },
    #[error("{0}")]
    Inconsistent(String),
}

/// What an export wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExportSummary {
    pub period: String,
    pub focus_version: &'static str,
    pub format: FocusFormat,
    pub file: PathBuf,
    pub rows: usize,
    /// Origin charges (a VM's charge period) replaced by their allocated charges, and those.
    pub origin_charges_split: usize,
    pub allocated_rows: usize,
    /// Each allocation method in the file: its id, the granularity it allocates at, and the
    /// clusters it allocated.
    pub allocation: Vec<Allocation>,
    pub bills: Vec<BillWritten>,
}

/// An allocation method of the file (`AllocatedMethodId`) and what it allocates.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Allocation {
    pub method_id: &'static str,
    pub granularity: &'static str,
    pub clusters: Vec<String>,
}

/// `AllocatedMethodId` of the CUR's EKS instances allocated by AWS's split cost allocation
/// data, as gpuledger keeps it: per pod and day.
pub const CUR_SPLIT_METHOD_ID: &str = "aws-split-cost-allocation-pod-day";

/// AWS's split of the CUR's EKS instances as gpuledger keeps it: each pod's cost (split +
/// unused) per day on the instance it ran on.
#[derive(Default)]
struct CurSplit {
    pods: HashMap<i64, crate::store::PodRecord>,
    /// (instance id, day) → the pod-days on it.
    days: HashMap<(String, i64), Vec<crate::store::PodDay>>,
}

impl CurSplit {
    async fn load(store: &dyn Store, period: Period) -> Result<CurSplit, ExportError> {
        let Some(inputs) = store.compute_inputs(&period.to_string(), 0.0).await? else {
            return Ok(CurSplit::default());
        };
        let pods: HashMap<i64, crate::store::PodRecord> =
            inputs.pods.into_iter().map(|p| (p.id, p)).collect();
        let mut days: HashMap<(String, i64), Vec<crate::store::PodDay>> = HashMap::new();
        for day in inputs.pod_days {
            if let Some(pod) = pods.get(&day.pod_id) {
                days.entry((pod.instance_id.clone(), day.day)).or_default().push(day);
            }
        }
        Ok(CurSplit { pods, days })
    }

    /// Whether AWS's split gave any pod a day of this instance.
    fn covers(&self, instance: &str, day: i64) -> bool {
        self.days.contains_key(&(instance.to_string(), day))
    }

    /// The pods an instance's day under one purchase option went to, weighted by their cost
    /// under it, and what they were not given of `origin_effective` (never a negative amount).
    /// A pod-day's cost is under each option in the part (`option_share`) of the instance's
    /// day's cost billed under it, so its parts add up to it whatever the options' prices (the
    /// stored [`crate::store::PodDayOption`]s weigh by usage, as AWS's dashboard does, which
    /// would give the cheaper option's origin more than it holds).
    fn targets(
        &self,
        instance: &str,
        (day, option_share): (i64, f64),
        cluster: &str,
        origin_effective: i64,
    ) -> Vec<Target> {
        let round = |x: f64| (x * 1e6).round() / 1e6;
        let mut targets = Vec::new();
        for pod_day in self.days.get(&(instance.to_string(), day)).into_iter().flatten() {
            let Some(p) = self.pods.get(&pod_day.pod_id) else { continue };
            let share = option_share;
            let weight =
                ((pod_day.split_cost_nanos + pod_day.unused_cost_nanos) as f64 * share).round() as i64;
            if weight <= 0 {
                continue;
            }
            let mut tags = json!({"cluster": p.cluster, "namespace": p.namespace, "workload": p.workload});
            let client = client_of(&p.labels, "client");
            if client != "(none)" {
                tags["client"] = json!(client);
            }
            let (unit, quantity) = if pod_day.gpu_hours > 0.0 {
                ("GPU-Hours", pod_day.gpu_hours * share)
            } else {
                ("vCPU-Hours", pod_day.vcpu_hours * share)
            };
            targets.push(Target {
                method: CUR_SPLIT_METHOD_ID,
                id: format!("{}/{}/{}", p.cluster, p.namespace, p.pod),
                name: format!("{}/{}", p.namespace, p.pod),
                tags,
                unit,
                quantity,
                usage: json!([
                    {"UsageUnit": "GPU-Hours", "UsageQuantity": round(pod_day.gpu_hours * share)},
                    {"UsageUnit": "vCPU-Hours", "UsageQuantity": round(pod_day.vcpu_hours * share)},
                    {"UsageUnit": "GB-Hours", "UsageQuantity": round(pod_day.memory_gb_hours * share)},
                ]),
                weight,
            });
        }
        let given: i64 = targets.iter().map(|t| t.weight).sum();
        if !targets.is_empty() && origin_effective > given {
            targets.push(unallocated(CUR_SPLIT_METHOD_ID, cluster, origin_effective - given));
        }
        targets
    }
}

/// One bill's totals in the file: a FOCUS bill's equal to the stored bill's, exactly; the CUR's
/// billed cost its unblended total, its effective cost the amortized bill and the lines outside it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BillWritten {
    pub provider: String,
    pub billing_account: String,
    /// `focus`, or `cur` for the CUR's bill.
    pub format: String,
    pub currency: String,
    pub billed_cost: String,
    pub effective_cost: String,
}

/// The four summable amounts of a row, in nano-units of its currency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Amounts {
    billed: i64,
    effective: i64,
    list: i64,
    contracted: i64,
}

/// A charge group's rows, amounts and consumed quantity not yet written.
#[derive(Debug, Clone, Copy, Default)]
struct Rest {
    rows: i64,
    amounts: Amounts,
    consumed: f64,
}

impl Rest {
    fn of(group: &BillCharge) -> Rest {
        Rest {
            rows: group.charges,
            amounts: Amounts {
                billed: group.billed_nanos,
                effective: group.effective_nanos,
                list: group.list_nanos,
                contracted: group.contracted_nanos,
            },
            consumed: group.consumed_quantity,
        }
    }

    fn sum<'a>(periods: impl Iterator<Item = &'a VmPeriod>) -> Rest {
        let mut sum = Rest::default();
        for vm in periods {
            let amounts = Amounts::of_vm(vm);
            sum.rows += vm.charges;
            sum.amounts.billed += amounts.billed;
            sum.amounts.effective += amounts.effective;
            sum.amounts.list += amounts.list;
            sum.amounts.contracted += amounts.contracted;
            sum.consumed += vm.consumed_quantity;
        }
        sum
    }
}

/// Takes `taken` out of the groups `set` (indices into `rest`): from the one group, or, when
/// several groups differ in their tags alone, from each in proportion to what it has of each
/// column (by its rows where a column cannot weigh), exactly by largest remainder.
fn take_out(rest: &mut [Rest], set: &[usize], taken: &Rest) {
    let split = |total: i64, value: fn(&Rest) -> i64, rest: &[Rest]| -> Vec<i64> {
        let weights: Vec<i128> = set.iter().map(|&i| i128::from(value(&rest[i]))).collect();
        apportion_by_weight(total, &weights)
            .or_else(|| {
                apportion_by_weight(
                    total,
                    &set.iter().map(|&i| i128::from(rest[i].rows.max(0))).collect::<Vec<_>>(),
                )
            })
            .unwrap_or_else(|| std::iter::once(total).chain(std::iter::repeat(0)).take(set.len()).collect())
    };
    let rows = split(taken.rows, |r| r.rows, rest);
    let billed = split(taken.amounts.billed, |r| r.amounts.billed, rest);
    let effective = split(taken.amounts.effective, |r| r.amounts.effective, rest);
    let list = split(taken.amounts.list, |r| r.amounts.list, rest);
    let contracted = split(taken.amounts.contracted, |r| r.amounts.contracted, rest);
    let consumed: f64 = set.iter().map(|&i| rest[i].consumed).sum();
    for (k, &i) in set.iter().enumerate() {
        let share = if consumed != 0.0 {
            rest[i].consumed / consumed
        } else if k == 0 {
            1.0
        } else {
            0.0
        };
        let r = &mut rest[i];
        r.rows -= rows[k];
        r.amounts.billed -= billed[k];
        r.amounts.effective -= effective[k];
        r.amounts.list -= list[k];
        r.amounts.contracted -= contracted[k];
        r.consumed -= taken.consumed * share;
    }
}

impl Amounts {
    fn of_vm(vm: &VmPeriod) -> Amounts {
        Amounts {
            billed: vm.billed_nanos,
            effective: vm.effective_nanos,
            list: vm.list_nanos,
            contracted: vm.contracted_nanos,
        }
    }
}

/// Who an allocated charge is for: a pod (its index among the cluster's pod-hours, the first
/// hour seen) or what no pod was given.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Who {
    Pod { cluster: usize, uid: String },
    Unallocated { cluster: usize },
}

/// A pod's part of a node-hour, and its hours and usage there.
#[derive(Debug, Clone, Copy, Default)]
struct Share {
    nanos: i64,
    hours: f64,
    gpu_hours: f64,
    vcpu_hours: f64,
    memory_gib_hours: f64,
    /// Index of one of its pod-hours (for its names and labels).
    pod: usize,
}

/// The splits of the month, by instance and hour: who got what of the node-hour.
struct Splits {
    clusters: Vec<ClusterSplit>,
    by_hour: HashMap<String, BTreeMap<i64, Vec<(Who, Share)>>>,
}

impl Splits {
    async fn load(store: &dyn Store, period: Period) -> Result<Splits, ExportError> {
        let clusters = our_splits(store, period).await?;
        let mut by_hour: HashMap<String, BTreeMap<i64, Vec<(Who, Share)>>> = HashMap::new();
        for (c, split) in clusters.iter().enumerate() {
            let instance_of: HashMap<(&str, i64), String> = split
                .nodes
                .iter()
                .map(|n| ((n.node.as_str(), n.hour), instance_key(&n.provider_id)))
                .collect();
            for cost in &split.split.pods {
                let p = &split.pods[cost.pod];
                let Some(instance) = instance_of.get(&(p.node.as_str(), p.hour)) else { continue };
                let hours = p.seconds / 3600.0;
                let uid = if p.uid.is_empty() { format!("{}/{}", p.namespace, p.pod) } else { p.uid.clone() };
                by_hour.entry(instance.clone()).or_default().entry(p.hour).or_default().push((
                    Who::Pod { cluster: c, uid },
                    Share {
                        nanos: cost.split_nanos + cost.unused_nanos,
                        hours,
                        gpu_hours: p.gpu_request * hours,
                        vcpu_hours: p.cpu_request.max(p.cpu_usage) * hours,
                        memory_gib_hours: p.memory_request_gib.max(p.memory_usage_gib) * hours,
                        pod: cost.pod,
                    },
                ));
            }
            let unallocated = split
                .split
                .unallocated
                .iter()
                .map(|&(node, nanos)| {
                    (instance_key(&split.nodes[node].provider_id), split.nodes[node].hour, nanos)
                })
                .chain(split.split.bill_without_nodes.iter().cloned());
            for (instance, hour, nanos) in unallocated {
                by_hour
                    .entry(instance)
                    .or_default()
                    .entry(hour)
                    .or_default()
                    .push((Who::Unallocated { cluster: c }, Share { nanos, ..Share::default() }));
            }
        }
        Ok(Splits { clusters, by_hour })
    }

    /// Who got what of a VM's charge period, summed per pod over its hours.
    fn of(&self, instance: &str, vm: &VmPeriod) -> BTreeMap<Who, Share> {
        let mut shares: BTreeMap<Who, Share> = BTreeMap::new();
        let Some(hours) = self.by_hour.get(instance) else { return shares };
        // The hours that start in the period (the hour it starts in, for one shorter).
        let first = vm.start.div_euclid(3600) * 3600;
        for (who, share) in hours.range(first..vm.end.max(vm.start + 1)).flat_map(|(_, s)| s) {
            let sum = shares.entry(who.clone()).or_insert(Share { pod: share.pod, ..Share::default() });
            sum.nanos += share.nanos;
            sum.hours += share.hours;
            sum.gpu_hours += share.gpu_hours;
            sum.vcpu_hours += share.vcpu_hours;
            sum.memory_gib_hours += share.memory_gib_hours;
        }
        shares
    }
}

/// The provider's names as FOCUS writes them.
fn provider_name(provider: &str) -> &str {
    match provider {
        "aws" => "AWS",
        "azure" => "Microsoft",
        "gcp" => "Google Cloud",
        "oci" => "Oracle",
        other => other,
    }
}

/// FOCUS's `ChargeFrequency`, which the stored bill does not keep, from the charge category.
fn charge_frequency(category: &str) -> &'static str {
    match category {
        "Usage" => "Usage-Based",
        "Purchase" => "Recurring",
        _ => "One-Time",
    }
}

/// Empty text is null.
fn text(text: &str) -> Cell<'_> {
    if text.is_empty() { Cell::Null } else { Cell::Text(text) }
}

/// What a charge group's rows share: the texts the stored bill does not keep, derived once.
struct Derived<'a> {
    provider: &'a str,
    frequency: &'static str,
    description: String,
}

impl<'a> Derived<'a> {
    fn of(bill: &'a Bill, charge: &BillCharge) -> Derived<'a> {
        Derived {
            provider: provider_name(&bill.provider),
            frequency: charge_frequency(&charge.charge_category),
            description: [charge.service_name.as_str(), charge.resource_type.as_str()]
                .into_iter()
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// A charge group's row with `amounts`, over `[start, end)`, of `resource_id`.
#[allow(clippy::too_many_arguments)]
fn charge_row<'a>(
    bill: &'a Bill,
    period: Period,
    charge: &'a BillCharge,
    derived: &'a Derived<'a>,
    (start, end): (i64, i64),
    amounts: Amounts,
    consumed: f64,
    resource_id: &'a str,
) -> [Cell<'a>; COLUMNS.len()] {
    let provider = Cell::Text(derived.provider);
    let tags = if charge.tags == "{}" { Cell::Null } else { text(&charge.tags) };
    let consumed = if charge.consumed_unit.is_empty() { Cell::Null } else { Cell::Number(consumed) };
    let mut row = [Cell::Null; COLUMNS.len()];
    let named = [
        Cell::Nanos(amounts.billed),
        Cell::Nanos(amounts.effective),
        Cell::Nanos(amounts.list),
        Cell::Nanos(amounts.contracted),
        Cell::Text(&bill.currency),
        Cell::Text(&bill.billing_account),
        text(&bill.billing_account_name),
        Cell::Time(period.start()),
        Cell::Time(period.end()),
        Cell::Time(start),
        Cell::Time(end),
        text(&charge.charge_category),
        text(&charge.charge_class),
        Cell::Text(derived.frequency),
        text(&derived.description),
        text(&charge.pricing_category),
        text(&charge.commitment_discount_status),
        consumed,
        text(&charge.consumed_unit),
        provider,
        provider,
        provider,
        provider,
        provider,
        text(&charge.region),
        text(resource_id),
        text(&charge.resource_type),
        text(&charge.service_name),
        text(&charge.service_category),
        text(&charge.sub_account_id),
        text(&charge.sub_account_name),
        tags,
    ];
    row[..named.len()].copy_from_slice(&named);
    // The commitment discount as the bill named it (a bill ingested before migrations 0041 and
    // 0043 kept none).
    row[COMMITMENT_CATEGORY] = text(&charge.commitment_discount_category);
    row[COMMITMENT_ID] = text(&charge.commitment_discount_id);
    row[COMMITMENT_TYPE] = text(&charge.commitment_discount_type);
    // AvailabilityZone to SkuPriceId are not kept, but a VM's name (its id); the Allocated*
    // columns are filled on allocated charges.
    row[RESOURCE_NAME] = text(resource_id);
    row
}

/// The file being written, and each bill's sums of what went into it.
struct Written {
    file: RowWriter,
    billed: i64,
    effective: i64,
    /// Whether the last row written is of the charge (group and resource) being written: its
    /// texts are then the last row's but in the [`ALLOCATED`] columns.
    same_charge: bool,
}

impl Written {
    fn new(file: RowWriter) -> Written {
        Written { file, billed: 0, effective: 0, same_charge: false }
    }

    /// The rows after this are of another charge.
    fn next_charge(&mut self) {
        self.same_charge = false;
    }

    fn row(&mut self, row: &[Cell]) -> Result<(), FileError> {
        for (i, sum) in [(BILLED, &mut self.billed), (EFFECTIVE, &mut self.effective)] {
            if let Cell::Nanos(nanos) = row[i] {
                *sum += nanos;
            }
        }
        if self.same_charge {
            self.file.row_like_previous(row, &ALLOCATED)
        } else {
            self.same_charge = true;
            self.file.row(row)
        }
    }
}

/// Whom an allocated charge is for, as FOCUS names it, and how it was allocated.
struct Target {
    /// `AllocatedMethodId`.
    method: &'static str,
    /// `AllocatedResourceId`, `AllocatedResourceName`, `AllocatedTags`.
    id: String,
    name: String,
    tags: serde_json::Value,
    /// The element's usage unit and quantity, and its usage by resource.
    unit: &'static str,
    quantity: f64,
    usage: serde_json::Value,
    /// Its weight: what it was given of the origin, in nano-units (≥ 0).
    weight: i64,
}

impl Splits {
    /// A share of gpuledger's split as its allocated charge's target.
    fn target(&self, who: &Who, share: &Share) -> Target {
        let round = |x: f64| (x * 1e6).round() / 1e6;
        match who {
            Who::Pod { cluster, uid } => {
                let split = &self.clusters[*cluster];
                let p = &split.pods[share.pod];
                let mut tags =
                    json!({"cluster": split.cluster, "namespace": p.namespace, "workload": p.workload});
                // A pod without a client label has no `client` tag (FOCUS's tags hold values).
                let client = client_of(&p.labels, "client");
                if client != "(none)" {
                    tags["client"] = json!(client);
                }
                Target {
                    method: METHOD_ID,
                    id: uid.clone(),
                    name: format!("{}/{}", p.namespace, p.pod),
                    tags,
                    unit: "Hours",
                    quantity: share.hours,
                    usage: json!([
                        {"UsageUnit": "GPU-Hours", "UsageQuantity": round(share.gpu_hours)},
                        {"UsageUnit": "vCPU-Hours", "UsageQuantity": round(share.vcpu_hours)},
                        {"UsageUnit": "GiB-Hours", "UsageQuantity": round(share.memory_gib_hours)},
                    ]),
                    weight: share.nanos,
                }
            }
            Who::Unallocated { cluster } => {
                let cluster = &self.clusters[*cluster].cluster;
                unallocated(METHOD_ID, cluster, share.nanos)
            }
        }
    }
}

/// What no pod was given of an origin charge, as an allocated charge's target.
fn unallocated(method: &'static str, cluster: &str, weight: i64) -> Target {
    Target {
        method,
        id: format!("{cluster}/unallocated"),
        name: "(unallocated)".to_string(),
        tags: json!({"cluster": cluster}),
        unit: "Hours",
        quantity: 0.0,
        usage: json!([]),
        weight,
    }
}

/// Writes an origin charge's allocated charges: its amounts and consumed quantity divided by
/// the targets' weights, exactly; returns how many, or `None` (writing nothing) when the
/// weights cannot divide it (no weight, or a negative one).
fn allocate(
    origin: &[Cell; COLUMNS.len()],
    vm: &VmPeriod,
    targets: &[Target],
    out: &mut Written,
) -> Result<Option<usize>, FileError> {
    let weights: Vec<i128> = targets.iter().map(|t| i128::from(t.weight)).collect();
    let total: i128 = weights.iter().sum();
    let divided = |amount: i64| apportion_by_weight(amount, &weights);
    let (Some(billed), Some(effective), Some(list), Some(contracted)) = (
        divided(vm.billed_nanos),
        divided(vm.effective_nanos),
        divided(vm.list_nanos),
        divided(vm.contracted_nanos),
    ) else {
        return Ok(None);
    };
    let round = |x: f64| (x * 1e6).round() / 1e6;
    for (i, target) in targets.iter().enumerate() {
        let mut row = *origin;
        let ratio = weights[i] as f64 / total as f64;
        row[BILLED] = Cell::Nanos(billed[i]);
        row[EFFECTIVE] = Cell::Nanos(effective[i]);
        row[LIST] = Cell::Nanos(list[i]);
        row[CONTRACTED] = Cell::Nanos(contracted[i]);
        if origin[CONSUMED] != Cell::Null {
            row[CONSUMED] = Cell::Number(vm.consumed_quantity * ratio);
        }
        let details = json!({"Elements": [{
            "AllocatedRatio": ratio,
            "UsageUnit": target.unit,
            "UsageQuantity": round(target.quantity),
            "Usage": target.usage,
        }]})
        .to_string();
        let tags = target.tags.to_string();
        row[METHOD] = Cell::Text(target.method);
        row[DETAILS] = Cell::Text(&details);
        row[ALLOCATED_ID] = Cell::Text(&target.id);
        row[ALLOCATED_NAME] = Cell::Text(&target.name);
        row[ALLOCATED_TAGS] = Cell::Text(&tags);
        out.row(&row)?;
    }
    Ok(Some(targets.len()))
}

/// Origin charges split and the allocated rows written for them, and the clusters each method
/// allocated.
#[derive(Debug, Default)]
struct Counts {
    origins: usize,
    allocated: usize,
    clusters: BTreeMap<&'static str, std::collections::BTreeSet<String>>,
}

/// Writes a VM's charge period: its allocated charges where a split gave it to pods, the
/// origin charge itself otherwise.
fn write_vm(
    splits: &Splits,
    origin: &[Cell; COLUMNS.len()],
    instance: &str,
    vm: &VmPeriod,
    out: &mut Written,
    counts: &mut Counts,
) -> Result<(), FileError> {
    let targets: Vec<Target> =
        splits.of(instance, vm).iter().map(|(who, share)| splits.target(who, share)).collect();
    write_allocated(origin, vm, &targets, out, counts)
}

/// Writes an origin charge's allocated charges to `targets`, or the origin itself when there
/// are none or they cannot divide it.
fn write_allocated(
    origin: &[Cell; COLUMNS.len()],
    vm: &VmPeriod,
    targets: &[Target],
    out: &mut Written,
    counts: &mut Counts,
) -> Result<(), FileError> {
    let allocated = match targets.is_empty() {
        true => None,
        false => allocate(origin, vm, targets, out)?,
    };
    match allocated {
        Some(count) => {
            counts.origins += 1;
            counts.allocated += count;
            for target in targets {
                if let Some(cluster) = target.tags["cluster"].as_str() {
                    counts.clusters.entry(target.method).or_default().insert(cluster.to_string());
                }
            }
            Ok(())
        }
        None => out.row(origin),
    }
}

/// Consecutive hours of one instance under one purchase option as one charge period: from the
/// first hour to the end of the last, their usage and costs summed.
fn vm_of(hours: &[&InstanceHour]) -> VmPeriod {
    let sum = |cost: fn(&InstanceHour) -> i64| hours.iter().map(|h| cost(h) * 1000).sum::<i64>();
    VmPeriod {
        start: hours.first().map_or(0, |h| h.hour),
        end: hours.last().map_or(0, |h| h.hour + 3600),
        charges: hours.len() as i64,
        consumed_quantity: hours.iter().map(|h| h.usage_hours).sum(),
        billed_nanos: sum(|h| h.unblended_cost_micros),
        effective_nanos: sum(|h| h.amortized_cost_micros),
        list_nanos: sum(|h| h.public_on_demand_cost_micros),
        contracted_nanos: sum(|h| h.unblended_cost_micros),
    }
}

/// The UTC midnight of the day an hour is in.
fn day_of(hour: i64) -> i64 {
    hour - hour.rem_euclid(86_400)
}

/// A CUR charge's row: the CUR's stored form keeps no contracted cost, nor a list cost but an
/// instance-hour's (its public on-demand cost); both are its unblended cost, the cost at the
/// account's rates before commitments (FOCUS allows neither to be null).
fn with_unblended_as_unkept(mut row: [Cell<'_>; COLUMNS.len()], list: bool) -> [Cell<'_>; COLUMNS.len()] {
    row[CONTRACTED] = row[BILLED];
    if !list {
        row[LIST] = row[BILLED];
    }
    row
}

/// FOCUS's charge category and class of a CUR line type.
fn cur_charge_category(line_item_type: &str) -> (&'static str, &'static str) {
    match line_item_type {
        "Tax" => ("Tax", ""),
        "Credit" => ("Credit", ""),
        "Refund" => ("Credit", "Correction"),
        t if t.ends_with("Discount") => ("Credit", ""),
        "Fee" | "RIFee" | "SavingsPlanRecurringFee" | "SavingsPlanUpfrontFee" => ("Purchase", ""),
        _ => ("Usage", ""),
    }
}

/// FOCUS's pricing category and commitment discount status of an instance-hour.
fn cur_pricing(option: PurchaseOption) -> (&'static str, &'static str) {
    match option {
        PurchaseOption::OnDemand => ("Standard", ""),
        PurchaseOption::Spot => ("Dynamic", ""),
        PurchaseOption::SavingsPlans | PurchaseOption::Reserved => ("Committed", "Used"),
        PurchaseOption::Unknown => ("", ""),
    }
}

/// A CUR line's allocation tags (a JSON object) with its EKS cluster's, as AWS tags a node.
fn cur_tags(cluster: &str, tags: &str) -> String {
    let mut object = match serde_json::from_str::<serde_json::Value>(tags) {
        Ok(serde_json::Value::Object(object)) => object,
        _ => serde_json::Map::new(),
    };
    if !cluster.is_empty() {
        object.insert("aws:eks:cluster-name".into(), json!(cluster));
    }
    serde_json::Value::Object(object).to_string()
}

/// Writes the month's CUR bill: each instance-hour (a node's allocated to its pods where
/// gpuledger split its cluster, AWS's split being off), each day's other cost, and the
/// invoices' discounts, credits, refunds and tax for the month. What the CUR's stored form does
/// not keep is its unblended cost ([`with_unblended_as_unkept`]).
fn write_cur(
    (cur, bill): (&CostPeriod, Bill),
    period: Period,
    (splits, cur_split): (&Splits, &CurSplit),
    out: &mut Written,
    counts: &mut Counts,
) -> Result<BillWritten, ExportError> {
    (out.billed, out.effective) = (0, 0);
    let names: HashMap<&str, &str> = cur
        .bill_lines
        .iter()
        .filter(|l| !l.usage_account_name.is_empty())
        .map(|l| (l.usage_account_id.as_str(), l.usage_account_name.as_str()))
        .collect();
    let charge = |account: &str, service: &str, category: (&str, &str), tags: String| BillCharge {
        sub_account_id: account.to_string(),
        sub_account_name: names.get(account).map(|n| n.to_string()).unwrap_or_default(),
        service_name: service.to_string(),
        service_category: crate::catalog::aws_service_category(service).to_string(),
        charge_category: category.0.to_string(),
        charge_class: category.1.to_string(),
        tags,
        ..BillCharge::default()
    };
    // Each instance's day's amortized cost under every option: what each option's part of a
    // pod-day is in proportion to.
    let mut day_totals: HashMap<(&str, i64), i64> = HashMap::new();
    for hour in &cur.instance_hours {
        *day_totals.entry((hour.instance_id.as_str(), day_of(hour.hour))).or_default() +=
            hour.amortized_cost_micros * 1000;
    }
    // Each instance's hours at one purchase option are a run of one charge's texts.
    let mut hours: Vec<&InstanceHour> = cur.instance_hours.iter().collect();
    hours.sort_by(|a, b| {
        (&a.instance_id, a.purchase_option, a.hour).cmp(&(&b.instance_id, b.purchase_option, b.hour))
    });
    for run in hours.chunk_by(|a, b| a.instance_id == b.instance_id && a.purchase_option == b.purchase_option)
    {
        let first = run[0];
        let (pricing, status) = cur_pricing(first.purchase_option);
        let template = BillCharge {
            pricing_category: pricing.into(),
            commitment_discount_status: status.into(),
            resource_type: "Virtual Machine".into(),
            consumed_unit: "Hours".into(),
            ..charge(&first.usage_account_id, "AmazonEC2", ("Usage", ""), cur_tags(&first.cluster, "{}"))
        };
        let derived = Derived {
            provider: provider_name("aws"),
            frequency: charge_frequency("Usage"),
            description: format!("{} {}", first.instance_type, first.purchase_option.as_str()),
        };
        let instance = first.instance_id.as_str();
        let origin_of = |vm: &VmPeriod| {
            let amounts = Amounts::of_vm(vm);
            let row = charge_row(
                &bill,
                period,
                &template,
                &derived,
                (vm.start, vm.end),
                amounts,
                vm.consumed_quantity,
                instance,
            );
            with_unblended_as_unkept(row, true)
        };
        // An EKS instance AWS split (and gpuledger did not): its days, each divided among the
        // pods AWS's split gave it that day, at the granularity gpuledger keeps it.
        if !splits.by_hour.contains_key(instance)
            && run.iter().any(|h| cur_split.covers(instance, day_of(h.hour)))
        {
            for day in run.chunk_by(|a, b| day_of(a.hour) == day_of(b.hour)) {
                let vm = vm_of(day);
                let whole = day_totals.get(&(instance, day_of(vm.start))).copied().unwrap_or_default();
                let option_share = if whole > 0 { vm.effective_nanos as f64 / whole as f64 } else { 1.0 };
                let targets = cur_split.targets(
                    instance,
                    (day_of(vm.start), option_share),
                    &first.cluster,
                    vm.effective_nanos,
                );
                out.next_charge();
                write_allocated(&origin_of(&vm), &vm, &targets, out, counts)?;
            }
            continue;
        }
        out.next_charge();
        for hour in run {
            let vm = vm_of(std::slice::from_ref(hour));
            write_vm(splits, &origin_of(&vm), instance, &vm, out, counts)?;
        }
    }
    // A line of no resource over `span`, its unblended and amortized cost in micro-dollars.
    let line = |out: &mut Written, template: &BillCharge, description: &str, span, (unblended, amortized)| {
        let derived = Derived {
            provider: provider_name("aws"),
            frequency: charge_frequency(&template.charge_category),
            description: description.to_string(),
        };
        let amounts = Amounts { billed: unblended * 1000, effective: amortized * 1000, ..Amounts::default() };
        let row = charge_row(&bill, period, template, &derived, span, amounts, 0.0, "");
        out.next_charge();
        out.row(&with_unblended_as_unkept(row, false))
    };
    for other in &cur.other_costs {
        let category = cur_charge_category(&other.line_item_type);
        let template =
            charge(&other.usage_account_id, &other.service, category, cur_tags(&other.cluster, &other.tags));
        let amounts = (other.unblended_cost_micros, other.amortized_cost_micros);
        line(out, &template, &other.usage_type, (other.day, other.day + 86_400), amounts)?;
    }
    for bill_line in cur.bill_lines.iter().filter(|l| l.category != LineCategory::Usage) {
        let category = match bill_line.category {
            LineCategory::Tax => ("Tax", ""),
            LineCategory::Refund => ("Credit", "Correction"),
            _ => ("Credit", ""),
        };
        let template = charge(&bill_line.usage_account_id, &bill_line.service, category, "{}".into());
        let amounts = (bill_line.unblended_micros, bill_line.amortized_micros);
        line(out, &template, &bill_line.line_item_type, (period.start(), period.end()), amounts)?;
    }
    Ok(BillWritten {
        provider: bill.provider,
        billing_account: bill.billing_account,
        format: bill.format,
        currency: bill.currency,
        billed_cost: Nanos(out.billed).exact(),
        effective_cost: Nanos(out.effective).exact(),
    })
}

/// Writes `period`'s FOCUS bills with gpuledger's allocation as one file under `out`.
pub async fn export_focus(
    store: &dyn Store,
    period: Period,
    out: &Path,
    format: FocusFormat,
) -> Result<ExportSummary, ExportError> {
    let name = period.to_string();
    let cur = store.cost_period(&name).await?;
    // The CUR's own bill through AWS's FOCUS export is the CUR's: written once, from the CUR.
    let payer = cur.as_ref().map(|c| c.billing_account.as_str());
    let stored = store.bills(Some(&name)).await?;
    let cur_bill = stored.iter().find(|b| b.format == "cur").cloned();
    let bills: Vec<Bill> = stored.into_iter().filter(|b| counted(b, payer)).collect();
    if bills.is_empty() && cur.is_none() {
        return Err(ExportError::NoBills(period));
    }
    if let Some(bill) = bills.iter().find(|b| b.data_version.ends_with(crate::store::BEFORE_VM_DAYS)) {
        return Err(ExportError::IngestAgain {
            provider: bill.provider.clone(),
            billing_account: bill.billing_account.clone(),
            period,
        });
    }
    let file = match format {
        FocusFormat::Parquet => out.join(format!("gpuledger-focus-1.3-{name}.parquet")),
        FocusFormat::Csv => out.join(format!("gpuledger-focus-1.3-{name}.csv.gz")),
    };
    // Written under another name and renamed when whole: a failed export leaves no file.
    let partial = out.join(format!(".gpuledger-focus-1.3-{name}.partial"));
    match write_file(store, period, &bills, cur.as_ref().zip(cur_bill), &partial, format).await {
        Ok(mut summary) => {
            std::fs::rename(&partial, &file)
                .map_err(|source| FileError::Io { path: file.clone(), source })?;
            summary.file = file;
            Ok(summary)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            Err(e)
        }
    }
}

/// Writes the export to `file` (see [`export_focus`]).
async fn write_file(
    store: &dyn Store,
    period: Period,
    bills: &[Bill],
    cur: Option<(&CostPeriod, Bill)>,
    file: &Path,
    format: FocusFormat,
) -> Result<ExportSummary, ExportError> {
    let name = period.to_string();
    let splits = Splits::load(store, period).await?;
    let charges = store.bill_charges(&name, None).await?;
    let vm_days = store.bill_vm_days(&name).await?;
    let file_format = match format {
        FocusFormat::Parquet => FileFormat::Parquet,
        FocusFormat::Csv => FileFormat::CsvGz,
    };
    let mut written = Written::new(RowWriter::create(file, &COLUMNS, file_format)?);
    let mut counts = Counts::default();
    let mut sums = Vec::new();
    for bill in bills {
        let ours =
            |provider: &str, account: &str| provider == bill.provider && account == bill.billing_account;
        (written.billed, written.effective) = (0, 0);
        // The VMs' days by the groups (less tags) their rows were summed into.
        let mut vm_of_key: HashMap<&str, Vec<&BillVmDay>> = HashMap::new();
        for day in vm_days.iter().filter(|v| ours(&v.provider, &v.billing_account)) {
            vm_of_key.entry(day.charge_key.as_str()).or_default().push(day);
        }
        let groups: Vec<&BillCharge> =
            charges.iter().filter(|c| ours(&c.provider, &c.billing_account)).collect();
        let mut sets: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, group) in groups.iter().enumerate() {
            sets.entry(group.untagged_key()).or_default().push(i);
        }
        // What each group keeps once its VMs' charge periods are written on their own.
        let mut rest: Vec<Rest> = groups.iter().map(|g| Rest::of(g)).collect();
        for group in &groups {
            let key = group.untagged_key();
            let Some(days) = vm_of_key.remove(key.as_str()) else { continue };
            let unpacked: Vec<(&str, Vec<VmPeriod>)> = days
                .iter()
                .map(|day| -> Result<_, String> { Ok((day.instance.as_str(), day.unpack()?)) })
                .collect::<Result<_, String>>()
                .map_err(ExportError::Inconsistent)?;
            let set = &sets[&key];
            take_out(&mut rest, set, &Rest::sum(unpacked.iter().flat_map(|(_, periods)| periods)));
            // Several groups differing in their tags alone: the origin keeps no tags.
            let template = BillCharge {
                tags: if set.len() == 1 { group.tags.clone() } else { String::new() },
                ..(*group).clone()
            };
            let derived = Derived::of(bill, &template);
            for (instance, periods) in &unpacked {
                written.next_charge();
                for vm in periods {
                    let origin = charge_row(
                        bill,
                        period,
                        &template,
                        &derived,
                        (vm.start, vm.end),
                        Amounts::of_vm(vm),
                        vm.consumed_quantity,
                        instance,
                    );
                    write_vm(&splits, &origin, instance, vm, &mut written, &mut counts)?;
                }
            }
        }
        if let Some(key) = vm_of_key.keys().next() {
            return Err(ExportError::Inconsistent(format!(
                "the {} bill {} of {period} has virtual machines' costs of charge group {key} and no such group: run `gpuledger ingest focus --force` on it again",
                bill.provider, bill.billing_account
            )));
        }
        for (group, rest) in groups.iter().zip(&rest) {
            if rest.rows > 0 || rest.amounts != Amounts::default() {
                let derived = Derived::of(bill, group);
                let row = charge_row(
                    bill,
                    period,
                    group,
                    &derived,
                    (group.day, group.day + 86_400),
                    rest.amounts,
                    rest.consumed,
                    "",
                );
                written.next_charge();
                written.row(&row)?;
            }
        }
        sums.push(BillWritten {
            provider: bill.provider.clone(),
            billing_account: bill.billing_account.clone(),
            format: bill.format.clone(),
            currency: bill.currency.clone(),
            billed_cost: Nanos(written.billed).exact(),
            effective_cost: Nanos(written.effective).exact(),
        });
    }
    if let Some(cur) = cur {
        let cur_split = CurSplit::load(store, period).await?;
        sums.push(write_cur(cur, period, (&splits, &cur_split), &mut written, &mut counts)?);
    }
    let count = written.file.finish()?;
    Ok(ExportSummary {
        period: name,
        focus_version: "1.3",
        format,
        file: file.to_path_buf(),
        rows: count as usize,
        origin_charges_split: counts.origins,
        allocated_rows: counts.allocated,
        allocation: counts
            .clusters
            .into_iter()
            .map(|(method, clusters)| Allocation {
                method_id: method,
                granularity: if method == CUR_SPLIT_METHOD_ID {
                    "pod-day: an EKS instance's day under one purchase option, divided among the pods AWS's split \
                     cost allocation data gave it that day (gpuledger keeps AWS's split per pod and day)"
                } else {
                    "node charge period: a VM's hour (Azure's day), divided among the pods gpuledger's split gave it"
                },
                clusters: clusters.into_iter().collect(),
            })
            .collect(),
        bills: sums,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rest(rows: i64, effective: i64, billed: i64) -> Rest {
        Rest {
            rows,
            amounts: Amounts { billed, effective, list: effective, contracted: effective },
            consumed: rows as f64,
        }
    }

    #[test]
    fn a_vms_rows_come_out_of_one_group_whole_and_of_groups_differing_in_tags_in_proportion() {
        // One group: 10 rows, 1.000 of which a VM's 4 rows are 0.400.
        let mut groups = vec![rest(10, 1_000, 1_000)];
        take_out(&mut groups, &[0], &rest(4, 400, 400));
        assert_eq!((groups[0].rows, groups[0].amounts.effective, groups[0].consumed), (6, 600, 6.0));
        // Three groups differing in their tags (namespaces a, b, c: 1, 2 and 3 units, billed 0
        // in c): 5 of the 6 units go out, 5/6 of each by largest remainder, exactly.
        let mut groups = vec![rest(1, 1, 1), rest(2, 2, 2), rest(3, 3, 0)];
        take_out(&mut groups, &[0, 1, 2], &rest(5, 5, 2));
        let effective: Vec<i64> = groups.iter().map(|g| g.amounts.effective).collect();
        assert_eq!(effective, [0, 0, 1]);
        assert_eq!(effective.iter().sum::<i64>(), 6 - 5);
        let billed: Vec<i64> = groups.iter().map(|g| g.amounts.billed).collect();
        assert_eq!(billed, [0, 1, 0]);
    }

    #[test]
    fn a_charge_groups_untagged_key_ignores_its_tags_alone() {
        let group = BillCharge {
            day: 86_400,
            service_name: "Compute Engine".into(),
            tags: "{\"a\":\"1\"}".into(),
            ..BillCharge::default()
        };
        let other_tags = BillCharge { tags: "{\"a\":\"2\"}".into(), ..group.clone() };
        let other_day = BillCharge { day: 2 * 86_400, ..group.clone() };
        assert_eq!(group.untagged_key(), other_tags.untagged_key());
        assert_ne!(group.untagged_key(), other_day.untagged_key());
        assert_eq!(group.untagged_key().len(), 16);
    }
}
