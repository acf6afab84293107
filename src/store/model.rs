//! Rows the store reads and writes. Plain data: no SQL here, no polars.
//!
//! Money is integer micro-dollars (1 USD = 1,000,000) or, for split cost, nano-dollars, as
//! each field's suffix says; where both units sit in one row (the period and account
//! rollups) the fields are typed [`Micros`] and [`Nanos`], so they cannot be added without a
//! conversion. Time is UTC epoch seconds of the start of a half-open hour
//! `[hour, hour + 3600)`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::domain::settings::PerPool;
use crate::money::{Micros, Nanos};

/// How an instance-hour was bought, by the CID rule: a Savings Plan ARN on its line, a
/// reservation ARN, a Spot usage type, or else On-Demand. Stored, shown and exported by the
/// names the dashboards of AWS use (`On-Demand`, `Spot`, `Savings Plans`, `Reserved`);
/// `Unknown` (empty) for a pod whose instance the bill does not name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum PurchaseOption {
    #[default]
    Unknown,
    OnDemand,
    Spot,
    SavingsPlans,
    Reserved,
}

impl PurchaseOption {
    pub const ALL: [PurchaseOption; 5] = [
        PurchaseOption::Unknown,
        PurchaseOption::OnDemand,
        PurchaseOption::Spot,
        PurchaseOption::SavingsPlans,
        PurchaseOption::Reserved,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PurchaseOption::Unknown => "",
            PurchaseOption::OnDemand => "On-Demand",
            PurchaseOption::Spot => "Spot",
            PurchaseOption::SavingsPlans => "Savings Plans",
            PurchaseOption::Reserved => "Reserved",
        }
    }

    /// Bought under a commitment (a Savings Plan or a reservation).
    pub fn is_commitment(self) -> bool {
        matches!(self, PurchaseOption::SavingsPlans | PurchaseOption::Reserved)
    }

    /// A FOCUS charge's, by its `PricingCategory`: `Dynamic` (Spot, preemptible) is Spot, any
    /// other On-Demand (a commitment's discount is in the charge's effective cost).
    pub fn of_pricing_category(category: &str) -> PurchaseOption {
        if category == "Dynamic" { PurchaseOption::Spot } else { PurchaseOption::OnDemand }
    }
}

parse_by_name!(PurchaseOption, "purchase option");

impl std::fmt::Display for PurchaseOption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for PurchaseOption {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// What a workload does, as Spot adoption, chargeback's training and inference columns and
/// invoices group it. A pod's `user_workload_class` label wins and may hold any value: a value
/// other than the four names is kept as it is (`Labelled`). Made by [`WorkloadClass::named`]
/// (or `parse`), so `"training"` is always `Training`; ordered by name, as the strings were.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum WorkloadClass {
    /// Jobs and CronJobs: training and batch.
    Training,
    /// Workloads that served requests.
    Inference,
    /// DaemonSets and the platform namespaces.
    Platform,
    #[default]
    Other,
    /// A `user_workload_class` label's own value.
    Labelled(String),
}

impl WorkloadClass {
    pub fn named(name: &str) -> WorkloadClass {
        match name {
            "training" => WorkloadClass::Training,
            "inference" => WorkloadClass::Inference,
            "platform" => WorkloadClass::Platform,
            "other" => WorkloadClass::Other,
            label => WorkloadClass::Labelled(label.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            WorkloadClass::Training => "training",
            WorkloadClass::Inference => "inference",
            WorkloadClass::Platform => "platform",
            WorkloadClass::Other => "other",
            WorkloadClass::Labelled(label) => label,
        }
    }
}

impl std::str::FromStr for WorkloadClass {
    type Err = String;

    /// Never fails: a name that is not one of the four is a label's value.
    fn from_str(text: &str) -> Result<Self, String> {
        Ok(WorkloadClass::named(text))
    }
}

impl Ord for WorkloadClass {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for WorkloadClass {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for WorkloadClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for WorkloadClass {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for WorkloadClass {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<WorkloadClass, D::Error> {
        Ok(WorkloadClass::named(&String::deserialize(deserializer)?))
    }
}

/// What a bill line is to the bill: usage and fees make the amortized bill; discounts,
/// credits, refunds and tax are on the invoice outside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LineCategory {
    #[default]
    Usage,
    Discount,
    Credit,
    Refund,
    Tax,
}

impl LineCategory {
    pub const ALL: [LineCategory; 5] = [
        LineCategory::Usage,
        LineCategory::Discount,
        LineCategory::Credit,
        LineCategory::Refund,
        LineCategory::Tax,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LineCategory::Usage => "usage",
            LineCategory::Discount => "discount",
            LineCategory::Credit => "credit",
            LineCategory::Refund => "refund",
            LineCategory::Tax => "tax",
        }
    }
}

parse_by_name!(LineCategory, "bill line category");

/// A pod's share of one resource of one parent instance for one hour: the grain at which a
/// pod-hour's GPU cost joins that pod's GPU metrics.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct CostFact {
    pub hour: i64,
    pub cluster: String,
    pub namespace: String,
    /// Workload name, empty for bare pods.
    pub workload: String,
    /// `ReplicaSet`, `StatefulSet`, `Job`, `DaemonSet`, ... or empty.
    pub workload_type: String,
    pub pod: String,
    pub node: String,
    pub instance_id: String,
    pub instance_type: String,
    /// e.g. `A100`, empty on CPU-only instances.
    pub gpu_model: String,
    /// `On-Demand`, `Spot`, `Savings Plans`, `Reserved`.
    pub purchase_option: PurchaseOption,
    /// `vcpu`, `memory` or `gpu`.
    pub resource: String,
    pub reserved_usage: f64,
    pub actual_usage: f64,
    pub split_usage: f64,
    pub split_usage_ratio: f64,
    pub split_cost_nanos: i64,
    pub unused_cost_nanos: i64,
    pub net_split_cost_nanos: i64,
    pub net_unused_cost_nanos: i64,
    pub public_on_demand_split_cost_nanos: i64,
    pub public_on_demand_unused_cost_nanos: i64,
    /// Imported Kubernetes labels (`user_*` resource tags) as a JSON object.
    pub labels: String,
}

/// One EC2 instance for one hour, from the parent (non-split) rows of the bill.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct InstanceHour {
    pub hour: i64,
    pub cluster: String,
    pub instance_id: String,
    pub instance_type: String,
    pub gpu_model: String,
    pub gpu_count: i64,
    pub vcpu: i64,
    pub memory_gib: i64,
    pub purchase_option: PurchaseOption,
    /// The account the instance is billed to (`line_item_usage_account_id`).
    pub usage_account_id: String,
    /// The region it ran in (`product_region_code`; empty for hours stored before migration
    /// 0042).
    pub region: String,
    /// Fraction of the hour the instance ran (CUR `line_item_usage_amount`).
    pub usage_hours: f64,
    pub unblended_cost_micros: i64,
    pub amortized_cost_micros: i64,
    pub net_amortized_cost_micros: i64,
    pub public_on_demand_cost_micros: i64,
}

/// A non-Kubernetes usage or fee line (S3, data transfer, control plane, unused
/// commitments) summed per day and what it can be charged by. Discounts, credits, refunds
/// and tax are not other cost: they are [`BillLine`]s only.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct OtherCost {
    /// UTC epoch seconds of the day's midnight.
    pub day: i64,
    /// `line_item_product_code`, e.g. `AmazonS3`.
    pub service: String,
    pub line_item_type: String,
    pub usage_type: String,
    pub usage_account_id: String,
    /// The EKS cluster the line belongs to (its `aws_eks_cluster_name` tag, or the cluster
    /// ARN of the control plane), empty for none.
    pub cluster: String,
    /// The line's `user_*` allocation tags as a JSON object with sorted keys.
    pub tags: String,
    pub unblended_cost_micros: i64,
    pub amortized_cost_micros: i64,
    /// Σ `line_item_usage_amount`, in the usage type's unit (GB-months for storage).
    pub usage_amount: f64,
}

/// The whole period's lines of one type, service and account on one invoice: what the
/// tie-out bridge and "other cost by service" are built from. Split rows are not bill lines.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct BillLine {
    /// `bill_billing_entity`: `AWS` or `AWS Marketplace`.
    pub billing_entity: String,
    pub invoice_id: String,
    pub usage_account_id: String,
    /// `line_item_usage_account_name`, empty when the export has none.
    pub usage_account_name: String,
    pub service: String,
    pub line_item_type: String,
    pub category: LineCategory,
    pub unblended_micros: i64,
    pub amortized_micros: i64,
    /// Amortized cost net of discounts (amortized + net unblended − unblended), when the
    /// export has `net_*` columns.
    pub net_amortized_micros: Option<i64>,
}

/// The bill of one day, service and usage account: every line but the EKS split rows, tax
/// under the service `Tax` (as Cost Explorer shows it). What the Cost Explorer cross-check
/// compares.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct BillDay {
    /// UTC epoch seconds of the day's midnight.
    pub day: i64,
    /// `line_item_product_code`, or `Tax` for tax lines.
    pub service: String,
    pub usage_account_id: String,
    pub unblended_micros: i64,
    pub amortized_micros: i64,
}

/// One commitment's month, from its fee lines (`SavingsPlanRecurringFee`, `RIFee`): what it
/// is, its term, and what it cost and used. Money in micro-dollars of the bill's currency.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct CommitmentMonth {
    /// The Savings Plan's or reservation's ARN.
    pub id: String,
    /// `savings_plan` or `reservation`.
    pub kind: String,
    /// `savings_plan_offering_type` (`ComputeSavingsPlans`, `EC2InstanceSavingsPlans`,
    /// `SageMakerSavingsPlans`), `Reserved` for a reservation.
    pub offering: String,
    /// `Compute` for a Compute or SageMaker plan, else the instance family (`p5`, `g5`).
    pub family: String,
    /// A reservation's instance type, empty for a plan.
    pub instance_type: String,
    pub region: String,
    /// `1yr`, `3yr`, or empty when the bill does not say.
    pub purchase_term: String,
    pub payment_option: String,
    /// The term, UTC epoch seconds (0 when the bill does not say).
    pub term_start: i64,
    pub term_end: i64,
    /// Reserved instances (1 for a plan).
    pub count: i64,
    /// Hours of the month the fee lines cover.
    pub hours: f64,
    /// What the month's commitment cost (a plan's commitment, a reservation's recurring
    /// and amortized upfront fee), and how much of it covered usage.
    pub fee_micros: i64,
    pub used_micros: i64,
}

impl CommitmentMonth {
    /// Its commitment an hour, micro-dollars (0 for no hours).
    pub fn hourly_micros(&self) -> f64 {
        if self.hours > 0.0 { self.fee_micros as f64 / self.hours } else { 0.0 }
    }

    /// Used ÷ fee, none for a month with no fee.
    pub fn utilization(&self) -> Option<f64> {
        (self.fee_micros > 0).then(|| self.used_micros as f64 / self.fee_micros as f64)
    }
}

/// An hour of one instance type's instance-hours under one purchase option, summed: what a
/// commitment is simulated against. Micro-dollars of the bill's currency.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct UsageHour {
    /// UTC epoch seconds of the hour.
    pub hour: i64,
    pub instance_type: String,
    /// The region (empty for hours stored before migration 0042).
    pub region: String,
    pub purchase_option: PurchaseOption,
    pub usage_hours: f64,
    pub amortized_cost_micros: i64,
    pub public_on_demand_cost_micros: i64,
}

/// Cost Explorer's cost of one day, service and linked account, in nano-dollars exactly as
/// its decimal strings said. `service` is Cost Explorer's name (`Amazon Elastic Compute
/// Cloud - Compute`), not the CUR's product code.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct CeCost {
    /// UTC epoch seconds of the day's midnight.
    pub day: i64,
    pub service: String,
    pub usage_account_id: String,
    pub unblended_nanos: i64,
    pub amortized_nanos: i64,
    pub net_amortized_nanos: i64,
}

/// One bill: a provider's charges to one billing account for one billing period, from one
/// format (`cur` or `focus`). Money in nano-units of the bill's own currency.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Bill {
    pub period: String,
    /// `aws`, `azure`, `gcp` or `oci`.
    pub provider: String,
    pub billing_account: String,
    /// `cur` or `focus`.
    pub format: String,
    pub billing_account_name: String,
    /// `1.0` to `1.3` as the files' columns show it; empty for the CUR.
    pub focus_version: String,
    /// ISO 4217 (`USD`, `EUR`).
    pub currency: String,
    /// Where it was read from (a folder, a manifest, a bucket).
    pub source: String,
    pub data_version: String,
    pub rows_read: i64,
    /// Σ BilledCost: what the invoices charge.
    pub billed_nanos: i64,
    /// Σ EffectiveCost: the amortized cost.
    pub effective_nanos: i64,
    pub list_nanos: i64,
    pub contracted_nanos: i64,
    /// What the files did that FOCUS does not allow but whose meaning is plain, as JSON.
    pub deviations: String,
    pub ingested_at: i64,
}

impl Bill {
    /// Its billing account's name, or its id when the bill names none.
    pub fn display_name(&self) -> &str {
        if self.billing_account_name.is_empty() { &self.billing_account } else { &self.billing_account_name }
    }
}

/// One bill to store in place of its stored self: the bill, its charges and its virtual
/// machines' costs (FOCUS bills only; a CUR bill's lines are its period's tables).
pub type BillReplacement = (Bill, Vec<BillCharge>, Vec<BillVmDay>);

/// How many texts a [`BillCharge`] is grouped by (its tags among them).
pub const TEXTS: usize = 16;

/// A FOCUS bill's charges of one day summed per what they can be grouped by.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct BillCharge {
    pub provider: String,
    pub billing_account: String,
    /// UTC epoch seconds of the day's midnight (the charge period's start).
    pub day: i64,
    pub sub_account_id: String,
    pub sub_account_name: String,
    pub service_name: String,
    pub service_category: String,
    pub charge_category: String,
    pub charge_class: String,
    pub pricing_category: String,
    pub commitment_discount_status: String,
    pub region: String,
    /// The instance type of a virtual machine's hours when the provider names one, else the
    /// row's `ResourceType`.
    pub resource_type: String,
    pub consumed_unit: String,
    /// JSON object, sorted keys.
    pub tags: String,
    /// The GPU model of the GPU instance the charges are for (`catalog::gpu_charge`), empty
    /// for anything else.
    pub gpu_model: String,
    /// The commitment discount the charges are of (its purchase, its used or unused hours) as
    /// the bill names it, its type in the provider's words (`Reservation`, `Committed Use
    /// Discount`) and its category (`Spend`, `Usage`); empty for others, and for bills
    /// ingested before they were kept (the category: migration 0043).
    pub commitment_discount_id: String,
    pub commitment_discount_type: String,
    pub commitment_discount_category: String,
    /// The GPU-hours they stand for (0 for a GPU instance's vCPU and memory lines where the
    /// provider bills GPUs apart).
    pub gpu_hours: f64,
    pub consumed_quantity: f64,
    /// Rows of the files summed here.
    pub charges: i64,
    pub billed_nanos: i64,
    pub effective_nanos: i64,
    pub list_nanos: i64,
    pub contracted_nanos: i64,
}

impl BillCharge {
    /// The charge group's identity less its tags: a 64-bit FNV-1a digest of its day and every
    /// other dimension, in hex. A [`BillVmCost`] names by it the groups its rows were summed
    /// into (one, or several differing only in their tags).
    pub fn untagged_key(&self) -> String {
        Self::key_of(self.day, &self.untagged_texts())
    }

    /// [`BillCharge::untagged_key`] without the day: the same for a group's days and for its
    /// month's sum ([`crate::store::Store::month_charges`]).
    pub fn month_key(&self) -> String {
        Self::key_of(0, &self.untagged_texts())
    }

    fn untagged_texts(&self) -> [&str; TEXTS] {
        [
            &self.sub_account_id,
            &self.sub_account_name,
            &self.service_name,
            &self.service_category,
            &self.charge_category,
            &self.charge_class,
            &self.pricing_category,
            &self.commitment_discount_status,
            &self.region,
            &self.resource_type,
            &self.consumed_unit,
            "",
            &self.gpu_model,
            &self.commitment_discount_id,
            &self.commitment_discount_type,
            &self.commitment_discount_category,
        ]
    }

    /// The digest of a day and a group's [`TEXTS`] texts in the order of its fields (the
    /// tags empty for [`BillCharge::untagged_key`]). The commitment discount's id, type and
    /// category count only when not empty, so a group without them has the key it had before
    /// they were kept (the keys stored with its machines' days still name it).
    pub fn key_of(day: i64, text: &[&str; TEXTS]) -> String {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for b in bytes {
                hash ^= u64::from(*b);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        };
        eat(&day.to_le_bytes());
        let (before, since) = text.split_at(13);
        for t in before {
            eat(t.as_bytes());
            eat(&[0x1f]);
        }
        for (i, t) in since.iter().enumerate().filter(|(_, t)| !t.is_empty()) {
            eat(&[0x1e, i as u8]);
            eat(t.as_bytes());
            eat(&[0x1f]);
        }
        format!("{hash:016x}")
    }
}

/// A day fetched from Cost Explorer: when, and whether Cost Explorer called it estimated.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct CeDay {
    /// UTC epoch seconds of the day's midnight.
    pub day: i64,
    pub fetched_at: i64,
    pub estimated: bool,
}

/// Days `[from, to)` as Cost Explorer answered them, stored in one transaction.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CeWindow {
    pub from: i64,
    pub to: i64,
    /// Every day of the window Cost Explorer answered for.
    pub days: Vec<CeDay>,
    pub costs: Vec<CeCost>,
    /// Linked account id → name, where Cost Explorer named it.
    pub accounts: Vec<(String, String)>,
}

/// Everything one billing period of the bill holds, as written and read back whole.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct CostPeriod {
    /// `YYYY-MM`.
    pub period: String,
    pub data_version: String,
    /// Σ unblended cost of every line: what the AWS invoice says, tax and credits included.
    pub bill_unblended_micros: i64,
    /// The amortized bill: usage and fee lines (no discounts, credits, refunds or tax) =
    /// Kubernetes + unallocated EC2 + other cost, exactly.
    pub bill_amortized_micros: i64,
    /// The amortized bill net of discounts, credits and refunds, when the export has `net_*`
    /// columns.
    pub net_amortized_micros: Option<i64>,
    /// Σ split + unused cost of the pods, rounded once.
    pub kubernetes_micros: i64,
    /// EC2 instance cost not allocated to pods (hours without split rows and parent cost the
    /// split rows do not cover).
    pub unallocated_ec2_micros: i64,
    pub currency: String,
    /// The payer account the bill is to (`bill_payer_account_id`), empty when the export has
    /// none or the period was stored before it was read.
    pub billing_account: String,
    /// Line-level facts: written by the caller to be summed (into pod-days and GPU pod-hours),
    /// never stored; read back only for periods stored before.
    pub cost_facts: Vec<CostFact>,
    pub instance_hours: Vec<InstanceHour>,
    pub other_costs: Vec<OtherCost>,
    pub bill_lines: Vec<BillLine>,
    /// The bill per day, service and usage account.
    pub bill_days: Vec<BillDay>,
    /// The month of each Savings Plan and reservation the bill charges a fee for.
    pub commitments: Vec<CommitmentMonth>,
}

impl CostPeriod {
    /// The CUR's bill as one of the month's bills: AWS's, in its currency, billed = unblended
    /// (what the invoices charge), effective = amortized, to its payer account. The period's
    /// replacement writes it among every source's bills ([`crate::store::BillStore::bills`]),
    /// where every reader finds it.
    pub fn as_bill(&self) -> Bill {
        Bill {
            period: self.period.clone(),
            provider: "aws".into(),
            billing_account: self.billing_account.clone(),
            format: "cur".into(),
            currency: self.currency.clone(),
            data_version: self.data_version.clone(),
            billed_nanos: self.bill_unblended_micros * 1_000,
            effective_nanos: self.bill_amortized_micros * 1_000,
            deviations: "{}".into(),
            ..Bill::default()
        }
    }

    /// Other cost: the amortized bill less Kubernetes and unallocated EC2 cost.
    pub fn other_cost_micros(&self) -> i64 {
        self.bill_amortized_micros - self.kubernetes_micros - self.unallocated_ec2_micros
    }
}

/// A short line per stored period, for the home page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeriodSummary {
    pub period: String,
    pub data_version: String,
    pub bill_unblended_micros: i64,
    pub bill_amortized_micros: i64,
    pub unallocated_ec2_micros: i64,
    pub cost_fact_rows: i64,
    pub ingested_at: i64,
}

/// A FOCUS bill's cost of one virtual machine over one charge period (an hour, or a day where
/// the provider bills daily): what gpuledger's own split divides among the pods on the node
/// whose `provider_id` names the machine, and what `export focus` writes as the origin charge
/// of their allocated charges (issue 41). Stored packed by day ([`BillVmDay`]).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct BillVmCost {
    pub provider: String,
    pub billing_account: String,
    /// The machine as a node's `provider_id` names it
    /// ([`crate::engine::kube_split::instance_key`]).
    pub instance: String,
    /// The Kubernetes cluster its tags name (AKS's `aks-managed-cluster-name`, GKE's
    /// `goog-k8s-cluster-name`, …), empty when none does.
    pub cluster: String,
    pub charge_start: i64,
    pub charge_end: i64,
    /// The charge groups of `bill_charges` these rows are part of, less their tags
    /// ([`BillCharge::untagged_key`]).
    pub charge_key: String,
    /// Rows of the files summed here.
    pub charges: i64,
    pub consumed_quantity: f64,
    pub billed_nanos: i64,
    pub effective_nanos: i64,
    pub list_nanos: i64,
    pub contracted_nanos: i64,
}

/// What one charge period of a virtual machine sums ([`BillVmCost`] less its names).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct VmPeriod {
    pub start: i64,
    pub end: i64,
    pub charges: i64,
    pub consumed_quantity: f64,
    pub billed_nanos: i64,
    pub effective_nanos: i64,
    pub list_nanos: i64,
    pub contracted_nanos: i64,
}

impl VmPeriod {
    /// Adds another's sums (of the same period).
    pub fn add(&mut self, other: &VmPeriod) {
        self.charges += other.charges;
        self.consumed_quantity += other.consumed_quantity;
        self.billed_nanos += other.billed_nanos;
        self.effective_nanos += other.effective_nanos;
        self.list_nanos += other.list_nanos;
        self.contracted_nanos += other.contracted_nanos;
    }
}

/// One virtual machine's charge periods of one day and one charge group less its tags, as
/// stored: a month of a node's hours is a few dozen rows, not thousands.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BillVmDay {
    pub provider: String,
    pub billing_account: String,
    pub instance: String,
    pub cluster: String,
    /// UTC epoch seconds of the day's midnight.
    pub day: i64,
    /// [`BillCharge::untagged_key`] (it holds the day).
    pub charge_key: String,
    /// The periods, packed ([`BillVmDay::pack`]).
    pub periods: Vec<u8>,
}

/// What migration 0037 appended to the data version of each FOCUS bill it dropped the VM costs
/// of: the bill wants ingesting again (which the changed version then allows).
pub const BEFORE_VM_DAYS: &str = " [before 0037]";

/// The packing's first byte: its layout.
const VM_PERIODS_V1: u8 = 1;

impl BillVmDay {
    /// `periods` (in order, each starting within the day) packed: a layout byte, then per
    /// period as zigzag LEB128 varints: its start's seconds after the previous period's end
    /// (after `day` for the first; 0 for an hour after another), its length in seconds, its
    /// row count, its consumed quantity (a whole number `2n`, else 1 and its 8 bytes), its
    /// effective cost, and its billed, list and contracted costs less the effective (often 0).
    pub fn pack(day: i64, periods: &[VmPeriod]) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(1 + periods.len() * 16);
        bytes.push(VM_PERIODS_V1);
        let mut previous_end = day;
        for p in periods {
            push_varint(&mut bytes, zigzag(p.start - previous_end));
            push_varint(&mut bytes, zigzag(p.end - p.start));
            push_varint(&mut bytes, zigzag(p.charges));
            let quantity = p.consumed_quantity;
            if quantity.fract() == 0.0 && quantity.abs() < 1e15 && quantity.to_bits() != (-0.0f64).to_bits() {
                push_varint(&mut bytes, zigzag(quantity as i64) << 1);
            } else {
                push_varint(&mut bytes, 1);
                bytes.extend_from_slice(&quantity.to_le_bytes());
            }
            let effective = p.effective_nanos;
            push_varint(&mut bytes, zigzag(effective));
            for amount in [p.billed_nanos, p.list_nanos, p.contracted_nanos] {
                push_varint(&mut bytes, zigzag(amount.wrapping_sub(effective)));
            }
            previous_end = p.end;
        }
        bytes
    }

    /// The periods [`BillVmDay::pack`] packed, or what is wrong with the bytes.
    pub fn unpack(&self) -> Result<Vec<VmPeriod>, String> {
        let bytes = self.periods.as_slice();
        let bad =
            |what: &str| format!("the packed periods of {} on day {} are {what}", self.instance, self.day);
        match bytes.first() {
            Some(&VM_PERIODS_V1) => {}
            Some(layout) => return Err(bad(&format!("of layout {layout}, not one this gpuledger reads"))),
            None => return Err(bad("empty")),
        }
        let mut at = 1;
        let varint = |at: &mut usize| read_varint(bytes, at).ok_or_else(|| bad("cut short"));
        let int = |at: &mut usize| varint(at).map(unzigzag);
        let mut periods = Vec::new();
        let mut previous_end = self.day;
        while at < bytes.len() {
            let start = previous_end + int(&mut at)?;
            let end = start + int(&mut at)?;
            let charges = int(&mut at)?;
            let consumed_quantity = match varint(&mut at)? {
                1 => {
                    let raw: [u8; 8] = bytes
                        .get(at..at + 8)
                        .and_then(|b| b.try_into().ok())
                        .ok_or_else(|| bad("cut short"))?;
                    at += 8;
                    f64::from_le_bytes(raw)
                }
                whole => unzigzag(whole >> 1) as f64,
            };
            let effective = int(&mut at)?;
            periods.push(VmPeriod {
                start,
                end,
                charges,
                consumed_quantity,
                effective_nanos: effective,
                billed_nanos: int(&mut at)?.wrapping_add(effective),
                list_nanos: int(&mut at)?.wrapping_add(effective),
                contracted_nanos: int(&mut at)?.wrapping_add(effective),
            });
            previous_end = end;
        }
        Ok(periods)
    }

    /// Its periods with its names, as the split and the export read them.
    pub fn costs(&self) -> Result<impl Iterator<Item = BillVmCost> + '_, String> {
        Ok(self.unpack()?.into_iter().map(|p| BillVmCost {
            provider: self.provider.clone(),
            billing_account: self.billing_account.clone(),
            instance: self.instance.clone(),
            cluster: self.cluster.clone(),
            charge_start: p.start,
            charge_end: p.end,
            charge_key: self.charge_key.clone(),
            charges: p.charges,
            consumed_quantity: p.consumed_quantity,
            billed_nanos: p.billed_nanos,
            effective_nanos: p.effective_nanos,
            list_nanos: p.list_nanos,
            contracted_nanos: p.contracted_nanos,
        }))
    }
}

fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

fn push_varint(bytes: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        bytes.push(value as u8 | 0x80);
        value >>= 7;
    }
    bytes.push(value as u8);
}

fn read_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

/// One Kubernetes node in one hour, from kube-state-metrics (issue 41).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct KubeNodeHour {
    pub hour: i64,
    pub cluster: String,
    pub node: String,
    /// `kube_node_info`'s `provider_id`: `aws:///us-east-1a/i-…`, `gce://project/zone/name`,
    /// `azure:///subscriptions/…/virtualMachines/3`, `oci://ocid1.instance…`.
    pub provider_id: String,
    pub instance_type: String,
    /// `spot`, `on_demand`, or empty when no label says.
    pub capacity_type: String,
    /// Capacity as the kubelet reports it (cores, GiB, GPUs).
    pub cpu_cores: f64,
    pub memory_gib: f64,
    pub gpus: f64,
    /// Seconds of the hour the node was up (from its samples).
    pub seconds: f64,
}

/// One pod in one hour, from kube-state-metrics and cAdvisor (issue 41): what AWS's split
/// takes (requests, usage, the time it ran), and what the cost is grouped by.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct KubePodHour {
    pub hour: i64,
    pub cluster: String,
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    pub node: String,
    /// Its controller (`created_by_name`) and kind (`created_by_kind`).
    pub workload: String,
    pub workload_type: String,
    /// Its Kubernetes labels as kube-state-metrics names them, without `label_`, as a JSON
    /// object with sorted keys (`{"client":"acme","team":"research"}`).
    pub labels: String,
    /// Seconds of the hour it ran.
    pub seconds: f64,
    /// Requests summed over its containers: cores, GiB, GPUs.
    pub cpu_request: f64,
    pub memory_request_gib: f64,
    pub gpu_request: f64,
    /// Mean use while it ran: cores, and working set in GiB.
    pub cpu_usage: f64,
    pub memory_usage_gib: f64,
}

impl KubePodHour {
    /// Its place in the stored order: hour, cluster, namespace, pod, uid.
    pub fn order_key(&self) -> (i64, &str, &str, &str, &str) {
        (self.hour, &self.cluster, &self.namespace, &self.pod, &self.uid)
    }
}

/// One pod's hours of one UTC day, as stored (`kube_pod_days`, issue 41): its names and labels
/// once, its hours packed. A month of 3.9 M pod-hours is a few hundred thousand rows, which the
/// split reads in seconds where one row per hour took half a minute in the driver.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KubePodDay {
    pub cluster: String,
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    pub node: String,
    pub workload: String,
    pub workload_type: String,
    pub labels: String,
    /// UTC epoch seconds of the day's midnight.
    pub day: i64,
    /// The hours, packed ([`KubePodDay::pack`]).
    pub hours: Vec<u8>,
}

/// The packing's first byte: its layout.
const POD_HOURS_V1: u8 = 1;

/// The UTC day's midnight of an epoch second.
pub fn day_of(epoch: i64) -> i64 {
    epoch.div_euclid(86_400) * 86_400
}

impl KubePodHour {
    /// Its measures in the packed order.
    fn measures(&self) -> [f64; 6] {
        [
            self.seconds,
            self.cpu_request,
            self.memory_request_gib,
            self.gpu_request,
            self.cpu_usage,
            self.memory_usage_gib,
        ]
    }

    /// Its names: all but the hour and the measures.
    fn names(&self) -> [&str; 8] {
        [
            &self.cluster,
            &self.namespace,
            &self.pod,
            &self.uid,
            &self.node,
            &self.workload,
            &self.workload_type,
            &self.labels,
        ]
    }
}

impl KubePodDay {
    /// Pod-hours packed per pod (all its names and labels) and UTC day, each day's hours in
    /// time order, the days in the order each first appears.
    pub fn pack_all(hours: &[KubePodHour]) -> Vec<KubePodDay> {
        let mut groups: Vec<Vec<&KubePodHour>> = Vec::new();
        let mut index: rustc_hash::FxHashMap<([&str; 8], i64), usize> = Default::default();
        for hour in hours {
            let next = groups.len();
            let at = *index.entry((hour.names(), day_of(hour.hour))).or_insert(next);
            if at == next {
                groups.push(Vec::new());
            }
            groups[at].push(hour);
        }
        groups
            .into_iter()
            .map(|mut group| {
                group.sort_by_key(|h| h.hour);
                let first = group[0];
                let day = day_of(first.hour);
                KubePodDay {
                    cluster: first.cluster.clone(),
                    namespace: first.namespace.clone(),
                    pod: first.pod.clone(),
                    uid: first.uid.clone(),
                    node: first.node.clone(),
                    workload: first.workload.clone(),
                    workload_type: first.workload_type.clone(),
                    labels: first.labels.clone(),
                    day,
                    hours: Self::pack(day, &group),
                }
            })
            .collect()
    }

    /// `hours` (in time order, each within the day) packed: a layout byte, then per hour its
    /// start's seconds after the previous hour's (after `day` for the first) as a zigzag LEB128
    /// varint, a byte whose bit `i` says measure `i` (seconds, CPU, memory and GPU requests,
    /// CPU and memory use) differs from the previous hour's (from 0 for the first), and each
    /// such measure's 8 bytes. A pod's requests are written once a day, its full hours' length
    /// not at all.
    pub fn pack(day: i64, hours: &[&KubePodHour]) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(1 + hours.len() * 20);
        bytes.push(POD_HOURS_V1);
        let mut previous_start = day;
        let mut previous = [0u64; 6];
        for hour in hours {
            push_varint(&mut bytes, zigzag(hour.hour - previous_start));
            let measures = hour.measures().map(f64::to_bits);
            let changed = (0..6).filter(|&i| measures[i] != previous[i]).fold(0u8, |bits, i| bits | 1 << i);
            bytes.push(changed);
            for i in (0..6).filter(|&i| changed & 1 << i != 0) {
                bytes.extend_from_slice(&measures[i].to_le_bytes());
            }
            previous_start = hour.hour;
            previous = measures;
        }
        bytes
    }

    /// Appends the hours [`KubePodDay::pack`] packed, with the day's names, to `out`, or says
    /// what is wrong with the bytes.
    pub fn unpack_into(&self, out: &mut Vec<KubePodHour>) -> Result<(), String> {
        let bytes = self.hours.as_slice();
        let bad = |what: &str| {
            format!("the packed hours of pod {}/{} on day {} are {what}", self.namespace, self.pod, self.day)
        };
        match bytes.first() {
            Some(&POD_HOURS_V1) => {}
            Some(layout) => return Err(bad(&format!("of layout {layout}, not one this gpuledger reads"))),
            None => return Err(bad("empty")),
        }
        let mut at = 1;
        let mut start = self.day;
        let mut measures = [0u64; 6];
        while at < bytes.len() {
            start += unzigzag(read_varint(bytes, &mut at).ok_or_else(|| bad("cut short"))?);
            let changed = *bytes.get(at).ok_or_else(|| bad("cut short"))?;
            at += 1;
            if changed >= 1 << 6 {
                return Err(bad(&format!("marked with unknown measures ({changed:#04x})")));
            }
            for (i, measure) in measures.iter_mut().enumerate() {
                if changed & 1 << i != 0 {
                    let raw: [u8; 8] = bytes
                        .get(at..at + 8)
                        .and_then(|b| b.try_into().ok())
                        .ok_or_else(|| bad("cut short"))?;
                    at += 8;
                    *measure = u64::from_le_bytes(raw);
                }
            }
            let [seconds, cpu_request, memory_request_gib, gpu_request, cpu_usage, memory_usage_gib] =
                measures.map(f64::from_bits);
            out.push(KubePodHour {
                hour: start,
                cluster: self.cluster.clone(),
                namespace: self.namespace.clone(),
                pod: self.pod.clone(),
                uid: self.uid.clone(),
                node: self.node.clone(),
                workload: self.workload.clone(),
                workload_type: self.workload_type.clone(),
                labels: self.labels.clone(),
                seconds,
                cpu_request,
                memory_request_gib,
                gpu_request,
                cpu_usage,
                memory_usage_gib,
            });
        }
        Ok(())
    }
}

/// What one GPU (or MIG instance) did for one pod in one hour.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct GpuUsage {
    pub hour: i64,
    pub hostname: String,
    pub gpu_uuid: String,
    /// MIG GPU instance id, empty for a whole GPU.
    pub gpu_instance: String,
    /// MIG profile (`3g.40gb`), empty for a whole GPU.
    pub gpu_profile: String,
    pub gpu_model: String,
    /// Empty when the GPU had no pod (unattributed).
    pub namespace: String,
    pub pod: String,
    pub container: String,
    /// Mean utilization over the hour, 0..1.
    pub mean_utilization: f64,
    pub peak_fb_used_mib: f64,
    pub samples: i64,
    /// The GPU-hours this row stands for, from observed time: at most 1 per GPU and hour,
    /// a MIG instance's slice fraction, a time-sliced pod's share.
    pub gpu_hours: f64,
    /// The cluster the series came from; empty when unknown.
    pub cluster: String,
}

/// One pod's GPU allocation in one hour, from the bill's accelerator split rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuAllocation {
    pub hour: i64,
    pub namespace: String,
    pub pod: String,
    pub workload: String,
    pub gpu_model: String,
    pub purchase_option: PurchaseOption,
    pub gpu_hours: f64,
}

/// One pod's cost over some days of a billing period, as the Costs page drills a workload
/// down to its pods. Money in nano-dollars; split, unused, net and public-on-demand cover
/// GPU, CPU and memory.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct PodCost {
    /// The pod's workload (a Job, when a CronJob's runs are asked for).
    pub workload: String,
    pub cluster: String,
    /// The usage account that ran it (empty in an export without the column).
    pub account: String,
    pub pod: String,
    pub node: String,
    pub instance_type: String,
    pub purchase_option: PurchaseOption,
    pub gpu_hours: f64,
    pub gpu_cost_nanos: i64,
    pub split_cost_nanos: i64,
    pub unused_cost_nanos: i64,
    pub net_cost_nanos: i64,
    pub public_on_demand_cost_nanos: i64,
}

/// A workload's Kubernetes cost (split + unused, GPU + CPU + memory) in a billing period.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadCost {
    pub namespace: String,
    pub workload: String,
    pub total_cost_nanos: i64,
}

/// A pod the bill knows, with its workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodWorkload {
    pub namespace: String,
    pub pod: String,
    pub workload: String,
}

/// Inference requests and tokens for one workload and model in one hour.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct InferenceUsage {
    pub hour: i64,
    /// The cluster the series came from (its `cluster` label, or the source's `--cluster`);
    /// empty when unknown.
    pub cluster: String,
    pub namespace: String,
    pub pod: String,
    pub workload: String,
    pub model: String,
    pub requests: f64,
    pub prompt_tokens: f64,
    pub generation_tokens: f64,
}

/// Kubernetes cost of one namespace (or cluster and namespace) in a period.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NamespaceCost {
    /// Empty unless grouped by cluster.
    pub cluster: String,
    pub namespace: String,
    pub split_cost_nanos: i64,
    pub unused_cost_nanos: i64,
    pub net_split_cost_nanos: i64,
    pub net_unused_cost_nanos: i64,
    pub public_on_demand_split_cost_nanos: i64,
    pub public_on_demand_unused_cost_nanos: i64,
}

/// A billing period's detail rows: what `gpuledger archive` moves out of the database to
/// Parquet files and back. Each in its table's stable order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PeriodDetail {
    pub pods: Vec<PodRecord>,
    pub instance_hours: Vec<InstanceHour>,
    pub pod_days: Vec<PodDay>,
    pub pod_day_options: Vec<PodDayOption>,
    pub gpu_pod_hours: Vec<GpuPodHour>,
}

impl PeriodDetail {
    /// Rows in all five tables.
    pub fn rows(&self) -> usize {
        self.pods.len()
            + self.instance_hours.len()
            + self.pod_days.len()
            + self.pod_day_options.len()
            + self.gpu_pod_hours.len()
    }
}

/// A billing period whose detail rows were archived: its bill, other costs, rollups and
/// issued invoices stay in the database.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArchivedPeriod {
    pub period: String,
    /// The delivery the archived rows were read from.
    pub data_version: String,
    pub archived_at: i64,
    /// The archive's folder (its `manifest.json` is there).
    pub location: String,
    pub detail_rows: i64,
    /// The SHA-256 of the archive's `manifest.json`, which holds each file's SHA-256.
    pub manifest_sha256: String,
}

/// A pod's strings as the store keeps them: once per period, facts refer to it by `id`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodRecord {
    pub id: i64,
    pub cluster: String,
    pub namespace: String,
    pub workload: String,
    pub workload_type: String,
    pub pod: String,
    pub node: String,
    pub instance_id: String,
    pub instance_type: String,
    pub gpu_model: String,
    pub purchase_option: PurchaseOption,
    /// The account of the instance the pod ran on.
    pub usage_account_id: String,
    pub labels: String,
}

/// A [`CostFact`] with its pod's strings replaced by the pod's id.
#[derive(Debug, Clone, PartialEq)]
pub struct FactRecord {
    pub pod_id: i64,
    pub hour: i64,
    /// `vcpu`, `memory` or `gpu`.
    pub resource: &'static str,
    pub split_usage: f64,
    pub split_cost_nanos: i64,
    pub unused_cost_nanos: i64,
    pub net_split_cost_nanos: i64,
    pub net_unused_cost_nanos: i64,
    pub public_on_demand_split_cost_nanos: i64,
    pub public_on_demand_unused_cost_nanos: i64,
}

/// Pods first seen in a batch, and the batch's facts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FactBatch {
    pub pods: Vec<PodRecord>,
    pub facts: Vec<FactRecord>,
}

/// One pod's facts summed over one UTC day (written by the CUR ingest). Costs are split +
/// unused unless named otherwise.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct PodDay {
    pub pod_id: i64,
    /// UTC epoch seconds of the day's midnight.
    pub day: i64,
    /// Accelerator split usage.
    pub gpu_hours: f64,
    pub gpu_cost_nanos: i64,
    pub cpu_cost_nanos: i64,
    pub memory_cost_nanos: i64,
    pub split_cost_nanos: i64,
    /// Split cost of the accelerator and vCPU rows (memory's is the rest of `split`).
    pub gpu_split_nanos: i64,
    pub cpu_split_nanos: i64,
    pub unused_cost_nanos: i64,
    pub net_cost_nanos: i64,
    pub public_on_demand_cost_nanos: i64,
    /// Split usage of the vCPU rows (vCPU-hours reserved) and of the memory rows (GB-hours).
    pub vcpu_hours: f64,
    pub memory_gb_hours: f64,
}

/// The part of a pod-day under one purchase option, where the pod's instance was billed under
/// several in some hour of the day (part Savings Plan, part On-Demand): each hour's cost and
/// GPU-hours take each option in proportion to the usage amounts of the instance-hour's lines
/// (as AWS's containers cost allocation dashboard weights them), summed over the day. A
/// pod-day with no such row is wholly under its pod's option; the rows of one pod-day add up
/// to 1.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct PodDayOption {
    pub pod_id: i64,
    pub day: i64,
    pub purchase_option: PurchaseOption,
    /// The option's share of the pod-day's cost (split + unused).
    pub cost_weight: f64,
    /// Its share of the pod-day's GPU-hours (the cost share where the day has none).
    pub gpu_hours_weight: f64,
}

/// One pod-hour that held GPUs: its GPU-hours, GPU cost and the cost of all its resources.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct GpuPodHour {
    pub pod_id: i64,
    pub hour: i64,
    pub gpu_hours: f64,
    /// Split + unused of the pod's accelerator rows.
    pub gpu_cost_nanos: i64,
    /// Split + unused of all the pod's rows in the hour.
    pub pod_cost_nanos: i64,
}

/// A pod-hour's measured GPU utilization, summed over its GPUs: `busy / weight` is the
/// mean weighted by the GPU-hours each GPU row holds.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct MeasuredPodHour {
    /// Empty when the metrics did not say.
    pub cluster: String,
    pub namespace: String,
    pub pod: String,
    pub hour: i64,
    pub busy: f64,
    pub weight: f64,
    /// Of `weight`, the GPU-hours of GPUs whose own hourly mean was below the idle threshold.
    pub idle_weight: f64,
    pub peak_fb_used_mib: f64,
}

/// A pod-hour's successful requests and tokens.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ServedPodHour {
    /// Empty when the metrics did not say.
    pub cluster: String,
    pub namespace: String,
    pub pod: String,
    pub hour: i64,
    pub requests: f64,
    pub prompt_tokens: f64,
    pub generation_tokens: f64,
}

/// What `compute` reads of a billing period, already summed by the store.
#[derive(Debug, Clone, Default)]
pub struct ComputeInputs {
    pub period: String,
    /// The revision of the inputs read (see `period_inputs`); the rollups carry it.
    pub input_revision: i64,
    /// The payer account of the CUR's bill (its FOCUS twin is not counted again).
    pub cur_billing_account: String,
    pub bill_unblended_micros: i64,
    pub bill_amortized_micros: i64,
    pub pods: Vec<PodRecord>,
    pub pod_days: Vec<PodDay>,
    /// Pod-days on instances billed under several purchase options, by option.
    pub pod_day_options: Vec<PodDayOption>,
    pub gpu_pod_hours: Vec<GpuPodHour>,
    /// Instance-hours summed per day, cluster, type and purchase option.
    pub capacity: Vec<CapacityRollup>,
    /// The FOCUS bills' GPU machines per day, cluster, account, type and purchase option, in
    /// USD ([`crate::engine::bills::fold_bills`]): the rest of the GPU fleet.
    pub bill_capacity: Vec<CapacityRollup>,
    /// Of `other_cost_micros`, the FOCUS bills' GPU machine charges placed there.
    pub gpu_fleet_in_other_micros: i64,
    /// Σ split + unused of the period's pods as the ingest rounded it, and the EC2 cost no
    /// pod was given.
    pub kubernetes_micros: i64,
    pub unallocated_ec2_micros: i64,
    pub other_cost_micros: i64,
    /// Unused commitment (amortized): Savings Plan commitment not used
    /// (`SavingsPlanRecurringFee`) and reservations not used (`RIFee`).
    pub unused_savings_plan_micros: i64,
    pub unused_reservation_micros: i64,
    /// Σ the period's discount lines (EDP, private pricing, bundled discounts; ≤ 0): what
    /// clients charged net share.
    pub discount_micros: i64,
    /// Other cost grouped by cluster, tags, service and usage type, for chargeback.
    pub other_groups: Vec<OtherCostGroup>,
    /// Each usage account's bill (its Kubernetes cost is the engine's to sum).
    pub accounts: Vec<AccountRollup>,
    /// The provider of each cluster a bill other than the CUR pays for (gpuledger's split of
    /// Azure, Google or Oracle nodes); every other cluster runs on the CUR's instances.
    pub cluster_providers: std::collections::BTreeMap<String, String>,
    /// Metrics of the period's hours: attributed GPU pod-hours, unattributed GPU-hours per
    /// GPU model, and serving pod-hours.
    pub measured: Vec<MeasuredPodHour>,
    pub unattributed: Vec<(String, f64)>,
    pub served: Vec<ServedPodHour>,
}

/// Sums for one day at the grain pages group by. Money in nano-dollars.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct CostRollup {
    pub period: String,
    pub day: i64,
    pub cluster: String,
    pub namespace: String,
    pub workload: String,
    pub workload_class: WorkloadClass,
    pub client: String,
    pub team: String,
    pub gpu_model: String,
    pub purchase_option: PurchaseOption,
    /// The usage account of the pods' instances.
    pub account: String,
    pub split_cost_nanos: i64,
    pub unused_cost_nanos: i64,
    pub net_cost_nanos: i64,
    pub public_on_demand_cost_nanos: i64,
    pub gpu_cost_nanos: i64,
    pub idle_gpu_cost_nanos: i64,
    /// The full cost (split + unused of every row: GPU, vCPU, memory) of the idle share of
    /// GPU pod-hours, idle judged per GPU.
    pub idle_cost_nanos: i64,
    /// Split + unused of the pod-hours that served requests (the cost of the serving hours).
    pub serving_cost_nanos: i64,
    /// Split cost of the accelerator and vCPU rows (memory's is the rest of `split`).
    pub gpu_split_nanos: i64,
    pub cpu_split_nanos: i64,
    pub gpu_hours_allocated: f64,
    pub gpu_hours_used: f64,
    pub gpu_hours_idle: f64,
    pub gpu_hours_unmeasured: f64,
    pub spot_gpu_hours: f64,
    pub peak_fb_used_mib: f64,
    pub requests: f64,
    pub prompt_tokens: f64,
    pub generation_tokens: f64,
    /// Workload-hours that served requests, and of those the ones whose cost per inference
    /// was above the fleet's 95th percentile.
    pub inference_hours: i64,
    pub inference_hours_above_p95: i64,
    /// vCPU-hours and memory GB-hours the pods reserved (split usage): invoice quantities.
    pub vcpu_hours: f64,
    pub memory_gb_hours: f64,
}

/// Instance capacity for one day: the CUR's instance-hours, and a FOCUS bill's GPU machines
/// (every charge `catalog::gpu_charge` recognizes, in USD; their `instance_hours` are not
/// kept, 0). The GPU fleet of every provider is these rows' ([`CapacityRollup::is_gpu`]).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct CapacityRollup {
    pub period: String,
    pub day: i64,
    /// `aws`, `azure`, `gcp`, `oci` (empty in rows written before migration 0046: `aws`).
    pub provider: String,
    pub cluster: String,
    /// With `provider`, the account the instance ran in (an AWS usage account, an Azure
    /// subscription, a Google project, an Oracle compartment).
    pub account: String,
    pub instance_type: String,
    pub gpu_model: String,
    pub purchase_option: PurchaseOption,
    pub instance_hours: f64,
    pub gpu_hours_provisioned: f64,
    pub amortized_cost_micros: i64,
    pub public_on_demand_cost_micros: i64,
    /// The bill's currency (empty for the CUR's dollars) and the amortized cost in it,
    /// unconverted: a FOCUS bill's own figures, so its fleet reads in its invoice's currency.
    pub currency: String,
    pub amortized_in_currency_nanos: i64,
}

/// A rollup row's bill currency and its amount in it: the dollars for a bill in dollars (or
/// the CUR's, which names none), else the bill's own unconverted amount.
fn in_bill_currency(currency: &str, usd_nanos: i64, own_nanos: i64) -> (&str, i64) {
    match currency {
        "" | "USD" => ("USD", usd_nanos),
        currency => (currency, own_nanos),
    }
}

impl CapacityRollup {
    /// Its bill's currency and its amortized cost in it (the CUR's: dollars).
    pub fn in_bill_currency(&self) -> (&str, i64) {
        in_bill_currency(&self.currency, self.amortized_cost_micros * 1_000, self.amortized_in_currency_nanos)
    }

    pub fn provider(&self) -> &str {
        if self.provider.is_empty() { "aws" } else { &self.provider }
    }

    /// The CUR's instance-hours (a FOCUS bill's GPU machines keep no instance-hours: 0), as
    /// against the rows `compute` adds from the FOCUS bills it counts (another AWS payer's
    /// among them).
    pub fn from_cur(&self) -> bool {
        self.provider() == "aws" && self.instance_hours > 0.0
    }

    /// A GPU machine's: part of the GPU fleet (every charge of it counts its cost, also
    /// those that carry none of its GPU-hours, as GKE's cost allocation splits a node).
    pub fn is_gpu(&self) -> bool {
        !self.gpu_model.is_empty()
    }
}

/// Steps of the utilization distribution: twenty of 5 %.
pub const UTILIZATION_BUCKETS: usize = 20;

/// The step an hourly mean utilization (0–1) falls in: 0 for under 5 %, …, 19 for 95–100 %
/// (a hair of slack, so a mean of exactly 60 % is not taken for 59.99…).
pub fn utilization_bucket(utilization: f64) -> usize {
    ((utilization * UTILIZATION_BUCKETS as f64 + 1e-9).max(0.0) as usize).min(UTILIZATION_BUCKETS - 1)
}

/// Allocated, measured GPU-hours of one GPU model whose pod-hour's mean utilization fell in
/// one 5 % step ([`utilization_bucket`]): the distribution on the GPUs page.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct UtilizationBucket {
    pub period: String,
    pub gpu_model: String,
    pub bucket: i64,
    pub gpu_hours: f64,
}

/// Fleet GPU-hours in one hour of one day, for the utilization heatmap.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct HeatmapCell {
    pub period: String,
    pub day: i64,
    pub hour_of_day: i64,
    pub gpu_hours_allocated: f64,
    pub gpu_hours_used: f64,
}

/// Period-level figures of a compute run.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct PeriodRollup {
    pub period: String,
    pub computed_at: i64,
    pub idle_threshold: f64,
    /// The fleet's 95th percentile of hourly cost per inference (USD), 0 without requests.
    pub p95_cost_per_inference: f64,
    pub bill_unblended_micros: Micros,
    pub bill_amortized_micros: Micros,
    pub kubernetes_cost_nanos: Nanos,
    /// EC2 instance cost not allocated to pods; Kubernetes (rounded to micro-dollars) +
    /// unallocated EC2 + other = the amortized bill, exactly.
    pub unallocated_ec2_micros: Micros,
    pub other_cost_micros: Micros,
    pub unattributed_gpu_hours: f64,
    /// GPU-hours the metrics measured on pods with no accelerator rows in the bill.
    pub measured_unbilled_gpu_hours: f64,
    /// Commitment paid for and not used in the period (part of other cost): realized
    /// savings subtract it.
    pub unused_savings_plan_micros: Micros,
    pub unused_reservation_micros: Micros,
    /// Of other cost, the storage lines (S3, EBS, EFS, FSx) and the data transfer lines, as
    /// chargeback categorizes them; `None` for a period computed before they were kept.
    pub storage_micros: Option<Micros>,
    pub network_micros: Option<Micros>,
    /// Of other cost, a FOCUS bill's GPU machine charges no cluster's split took (a GPU VM
    /// outside the clusters gpuledger splits): the GPU fleet's part outside the instance cost.
    pub gpu_fleet_in_other_micros: Micros,
    /// The revision of the inputs these rollups were computed from.
    pub input_revision: i64,
    /// The revision their write took: changes whenever a period is recomputed.
    pub revision: i64,
    /// The settings in force for the period, as they were computed with (JSON).
    pub settings: String,
}

/// One client's chargeback for a period. Shares add up to the shared pools exactly.
#[derive(Debug, Clone, PartialEq, Default, Serialize, serde::Deserialize)]
pub struct ClientRollup {
    pub period: String,
    pub client: String,
    /// The pools' rules in force (`gpu`, or `platform:gpu idle:even …`); `exempt` for an
    /// exempt client; `remainder` for `(house)` and `(unassigned)`.
    pub share_policy: String,
    pub markup_basis_points: i64,
    /// Takes no share of any pool: the shares it would take are the house's.
    pub exempt: bool,
    /// The client's pods' split cost (Kubernetes direct cost).
    pub direct_cost_nanos: i64,
    /// Split + unused of the client's accelerator rows: the weight of the `gpu` policy.
    pub gpu_cost_nanos: i64,
    pub shared_platform_nanos: i64,
    pub shared_idle_nanos: i64,
    pub markup_nanos: i64,
    /// Non-Kubernetes lines tagged to the client; for `(unassigned)`, every line nobody
    /// claims and EC2 outside any cluster.
    pub non_kubernetes_direct_nanos: i64,
    /// The client's share of the shared non-Kubernetes pool: cluster cost no client's tag
    /// claims (control plane, root volumes).
    pub shared_infrastructure_nanos: i64,
    /// The client's share of the unallocated pool: EC2 of a cluster not allocated to pods.
    pub shared_unallocated_nanos: i64,
    /// Direct cost by what it paid for: pods' split cost by resource, non-Kubernetes cost by
    /// category (`storage` S3/EBS/EFS/FSx, `network` data transfer, `other`).
    pub gpu_split_nanos: i64,
    pub cpu_split_nanos: i64,
    pub memory_split_nanos: i64,
    pub storage_nanos: i64,
    pub network_nanos: i64,
    pub other_direct_nanos: i64,
    /// Pods' split cost by workload class (the rest is `other`).
    pub training_nanos: i64,
    pub inference_nanos: i64,
    /// GB-months of storage held by the lines tagged to the client (its storage line's
    /// quantity on an invoice).
    pub storage_gb_months: f64,
    /// What the charge is based on: amortized (the default) or net of AWS's discounts.
    pub charge_basis: crate::domain::settings::ChargeBasis,
    /// A client charged net: its share of the period's discounts (≤ 0, whole micro-dollars),
    /// in proportion to its direct + shared cost. 0 for every other row.
    pub discount_nanos: i64,
    /// The part of `storage_nanos`, `network_nanos` and `other_direct_nanos` billed by
    /// providers other than AWS, by provider, as JSON (`{"azure":[0,0,5080582060]}`); empty
    /// when none. Read it with [`ClientRollup::provider_direct`].
    #[serde(default)]
    pub provider_direct: String,
}

/// Storage, network and other direct cost, nano-dollars (the order of a [`ClientRollup`]'s
/// non-Kubernetes columns).
pub type DirectByCategory = [i64; 3];

impl ClientRollup {
    /// Its non-Kubernetes direct cost billed by other providers than AWS, by provider.
    pub fn provider_direct(&self) -> BTreeMap<String, DirectByCategory> {
        serde_json::from_str(&self.provider_direct).unwrap_or_default()
    }

    /// Sets [`ClientRollup::provider_direct`], leaving out providers with nothing.
    pub fn set_provider_direct(&mut self, by_provider: &BTreeMap<String, DirectByCategory>) {
        let kept: BTreeMap<&String, &DirectByCategory> =
            by_provider.iter().filter(|(_, sums)| sums.iter().any(|n| *n != 0)).collect();
        self.provider_direct =
            if kept.is_empty() { String::new() } else { serde_json::to_string(&kept).unwrap_or_default() };
    }

    /// Kubernetes and non-Kubernetes direct cost.
    pub fn direct_total_nanos(&self) -> i64 {
        self.direct_cost_nanos + self.non_kubernetes_direct_nanos
    }

    /// The client's share of each pool (stored one column each).
    pub fn shares(&self) -> PerPool<i64> {
        PerPool {
            platform: self.shared_platform_nanos,
            idle: self.shared_idle_nanos,
            unallocated: self.shared_unallocated_nanos,
            shared: self.shared_infrastructure_nanos,
        }
    }

    /// Its shares of the platform, idle, unallocated and shared non-Kubernetes pools.
    pub fn shared_total_nanos(&self) -> i64 {
        self.shares().iter().map(|(_, nanos)| nanos).sum()
    }

    /// What the client is charged: direct + shared + its discount share (net basis) + markup.
    pub fn total_nanos(&self) -> i64 {
        self.direct_total_nanos() + self.shared_total_nanos() + self.discount_nanos + self.markup_nanos
    }

    /// Adds another period's money to this one (policy and markup rate are left alone).
    pub fn add(&mut self, other: &ClientRollup) {
        let pairs = [
            (&mut self.direct_cost_nanos, other.direct_cost_nanos),
            (&mut self.gpu_cost_nanos, other.gpu_cost_nanos),
            (&mut self.shared_platform_nanos, other.shared_platform_nanos),
            (&mut self.shared_idle_nanos, other.shared_idle_nanos),
            (&mut self.markup_nanos, other.markup_nanos),
            (&mut self.non_kubernetes_direct_nanos, other.non_kubernetes_direct_nanos),
            (&mut self.shared_infrastructure_nanos, other.shared_infrastructure_nanos),
            (&mut self.shared_unallocated_nanos, other.shared_unallocated_nanos),
            (&mut self.gpu_split_nanos, other.gpu_split_nanos),
            (&mut self.cpu_split_nanos, other.cpu_split_nanos),
            (&mut self.memory_split_nanos, other.memory_split_nanos),
            (&mut self.storage_nanos, other.storage_nanos),
            (&mut self.network_nanos, other.network_nanos),
            (&mut self.other_direct_nanos, other.other_direct_nanos),
            (&mut self.training_nanos, other.training_nanos),
            (&mut self.inference_nanos, other.inference_nanos),
            (&mut self.discount_nanos, other.discount_nanos),
        ];
        for (sum, value) in pairs {
            *sum += value;
        }
        self.storage_gb_months += other.storage_gb_months;
        let mut by_provider = self.provider_direct();
        for (provider, sums) in other.provider_direct() {
            let mine = by_provider.entry(provider).or_default();
            for (sum, value) in mine.iter_mut().zip(sums) {
                *sum += value;
            }
        }
        self.set_provider_direct(&by_provider);
    }
}

/// Non-Kubernetes cost of a period summed by what chargeback needs to place it.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct OtherCostGroup {
    pub cluster: String,
    /// `user_*` tags, a JSON object.
    pub tags: String,
    pub service: String,
    pub usage_type: String,
    pub amortized_cost_micros: i64,
    /// Σ usage amount, in the usage type's unit.
    pub usage_amount: f64,
    /// `aws` for the CUR's lines; the provider of a FOCUS bill's (`engine::bills`).
    pub provider: String,
}

impl OtherCostGroup {
    /// What a client is charged for it as: `storage` (S3, EBS, EFS, FSx), `network` (data
    /// transfer) or `other`.
    pub fn category(&self) -> &'static str {
        // Another provider's charge (`engine::bills`): its FOCUS service category says.
        if let Some(focus) = self.usage_type.strip_prefix("FOCUS:") {
            return match focus.split(':').next() {
                Some("Storage") => "storage",
                Some("Networking") => "network",
                _ => "other",
            };
        }
        let storage_services = ["AmazonS3", "AmazonEFS", "AmazonFSx", "AmazonS3GlacierDeepArchive"];
        if storage_services.contains(&self.service.as_str()) || self.usage_type.contains("EBS:") {
            "storage"
        } else if self.service == "AWSDataTransfer" || self.usage_type.contains("DataTransfer") {
            "network"
        } else {
            "other"
        }
    }

    /// The GB-months of storage the lines held: their usage amount where the usage type is
    /// priced per GB-month (S3 and EFS `TimedStorage`, EBS volumes and snapshots), else 0
    /// (requests, IOPS and throughput are not storage held).
    pub fn storage_gb_months(&self) -> f64 {
        let by_size = ["TimedStorage", "VolumeUsage", "SnapshotUsage"];
        if self.category() == "storage" && by_size.iter().any(|u| self.usage_type.contains(u)) {
            self.usage_amount
        } else {
            0.0
        }
    }
}

/// A saving still on the table, in dollars per month, with the evidence behind it.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Opportunity {
    pub period: String,
    /// `idle_gpu`, `spot_training`, `right_size`, `mig_or_time_slicing`.
    pub kind: String,
    pub namespace: String,
    /// The workload family (a Deployment, StatefulSet or CronJob); `workload` repeats it.
    pub workload: String,
    pub family: String,
    pub gpu_model: String,
    pub purchase_option: PurchaseOption,
    pub monthly_nanos: i64,
    pub evidence: String,
}

/// One usage account's share of a period's bill: the rows of the Accounts table and what
/// an account filter puts in place of the fleet's figures. Σ over accounts of
/// `instance_cost_micros + other_cost_micros` = the amortized bill.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct AccountRollup {
    pub period: String,
    pub account: String,
    /// `aws` for the CUR's usage accounts; the provider of a FOCUS bill's sub-account (an
    /// Azure subscription, a Google project, an Oracle compartment).
    pub provider: String,
    /// As the export names it (`line_item_usage_account_name`), empty when it does not.
    pub name: String,
    /// Every line of the account on the invoice (tax, credits and discounts included).
    pub bill_unblended_micros: Micros,
    /// Amortized cost of the account's EC2 instance-hours, with pods or not.
    pub instance_cost_micros: Micros,
    pub other_cost_micros: Micros,
    /// Σ split + unused of the pods on the account's instances.
    pub kubernetes_cost_nanos: Nanos,
    pub unused_savings_plan_micros: Micros,
    pub unused_reservation_micros: Micros,
    /// Of its other cost, a FOCUS bill's GPU machine charges no cluster's split took (its
    /// GPU fleet is its capacity rollups', every provider's: migration 0046).
    pub gpu_fleet_in_other_micros: Micros,
    /// A FOCUS bill's account: the bill's currency and the account's amortized cost in it
    /// (its charges' `EffectiveCost`, unconverted). Empty and 0 for the CUR's accounts, whose
    /// bill is in dollars (migration 0047).
    pub currency: String,
    pub amortized_in_currency_nanos: Nanos,
}

impl AccountRollup {
    /// Adds another account's bill to this one's (several accounts seen as one).
    pub fn add(&mut self, other: &AccountRollup) {
        self.bill_unblended_micros += other.bill_unblended_micros;
        self.instance_cost_micros += other.instance_cost_micros;
        self.other_cost_micros += other.other_cost_micros;
        self.kubernetes_cost_nanos += other.kubernetes_cost_nanos;
        self.unused_savings_plan_micros += other.unused_savings_plan_micros;
        self.unused_reservation_micros += other.unused_reservation_micros;
        self.gpu_fleet_in_other_micros += other.gpu_fleet_in_other_micros;
        self.amortized_in_currency_nanos += other.amortized_in_currency_nanos;
        if self.currency.is_empty() {
            self.currency = other.currency.clone();
        }
    }

    /// The account's bill currency and its amortized cost in it: a FOCUS bill's own figures,
    /// the CUR's in dollars (`usd_nanos`, the account's amortized cost as the ledger places it).
    pub fn in_bill_currency(&self, usd_nanos: i64) -> (&str, i64) {
        in_bill_currency(&self.currency, usd_nanos, self.amortized_in_currency_nanos.0)
    }

    /// The account's amortized bill.
    pub fn amortized_micros(&self) -> Micros {
        self.instance_cost_micros + self.other_cost_micros
    }

    /// Its EC2 cost no pod was given, in nano-dollars (exact: no rounding per account).
    pub fn unallocated_ec2_nanos(&self) -> Nanos {
        self.instance_cost_micros.nanos() - self.kubernetes_cost_nanos
    }

    /// Its invoice lines in nano-dollars.
    pub fn unblended_nanos(&self) -> Nanos {
        self.bill_unblended_micros.nanos()
    }

    /// `ID (name)`, or the ID alone when the export gives no name.
    pub fn label(&self) -> String {
        if self.name.is_empty() { self.account.clone() } else { format!("{} ({})", self.account, self.name) }
    }
}

/// Everything one compute run writes for a period, replaced whole.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Rollups {
    pub period: PeriodRollup,
    pub costs: Vec<CostRollup>,
    pub capacity: Vec<CapacityRollup>,
    pub heatmap: Vec<HeatmapCell>,
    pub utilization: Vec<UtilizationBucket>,
    pub clients: Vec<ClientRollup>,
    pub opportunities: Vec<Opportunity>,
    pub accounts: Vec<AccountRollup>,
    /// Per cluster, whose split and its reconciliation.
    pub kube_splits: Vec<KubeSplitRollup>,
    /// Not stored: set when a manager's scope withheld other clients' figures that fewer
    /// than two clients make up ([`crate::auth::Scope::apply`]).
    #[serde(skip)]
    pub withheld_others: bool,
    /// Not stored: the columns of the "(other clients)" chargeback line withheld because one
    /// other client alone makes them up (`auth::scope::withheld_columns`), as bits.
    #[serde(skip)]
    pub withheld_client_columns: u32,
}

/// Whose split divides a cluster's node cost among its pods in a period, and that split's
/// reconciliation to the bill (issue 41): AWS's, from the CUR's split cost allocation data, or
/// gpuledger's ([`crate::engine::kube_split`]) from kube-state-metrics and cAdvisor.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct KubeSplitRollup {
    pub period: String,
    pub cluster: String,
    pub provider: String,
    /// The bill's currency, that the amounts are in.
    pub currency: String,
    /// [`KubeSplitRollup::AWS`] or `gpuledger-split-v1`.
    pub method: String,
    /// gpuledger's split: `cur` or `focus` (the bill its node-hours' cost came from), `none`
    /// when no bill has a cost for its nodes.
    pub node_costs_from: String,
    pub node_hours: i64,
    pub pod_hours: i64,
    pub bill_node_nanos: i64,
    /// Σ split + unused of the pods.
    pub pods_nanos: i64,
    pub unallocated_nanos: i64,
    pub node_hours_without_pods: i64,
    pub node_hours_not_in_bill: i64,
    pub pod_hours_not_in_bill: i64,
    pub bill_hours_not_in_prometheus: i64,
    pub bill_hours_not_in_prometheus_nanos: i64,
}

impl KubeSplitRollup {
    /// The method of AWS's own split (the CUR's split cost allocation data).
    pub const AWS: &'static str = "aws-split-cost-allocation";
}

/// A period's chargeback as it stood before a compute replaced it with different numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChargebackSnapshot {
    pub period: String,
    /// The revision the replaced rollups were written at.
    pub revision: i64,
    /// When they were replaced (UTC epoch seconds).
    pub replaced_at: i64,
    pub clients: Vec<ClientRollup>,
}

#[cfg(test)]
mod tests {
    use super::{BillCharge, BillVmDay, KubePodDay, KubePodHour, VmPeriod};

    #[test]
    fn a_charge_group_without_a_commitment_keeps_the_key_it_had_before_commitments_were_kept() {
        // The digest as it was of 13 texts: FNV-1a over the day and each text with 0x1f after it.
        let fnv = |day: i64, texts: &[&str]| {
            let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
            let bytes = texts.iter().flat_map(|t| t.bytes().chain([0x1f]));
            for b in day.to_le_bytes().into_iter().chain(bytes) {
                hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
            format!("{hash:016x}")
        };
        let group = BillCharge {
            day: 86_400,
            service_name: "Virtual Machines".into(),
            charge_category: "Usage".into(),
            resource_type: "Standard_NC40ads_H100_v5".into(),
            gpu_model: "H100".into(),
            ..BillCharge::default()
        };
        let texts = [
            "",
            "",
            "Virtual Machines",
            "",
            "Usage",
            "",
            "",
            "",
            "",
            "Standard_NC40ads_H100_v5",
            "",
            "",
            "H100",
        ];
        assert_eq!(group.untagged_key(), fnv(86_400, &texts));
        assert_eq!(group.month_key(), fnv(0, &texts));
        // A commitment's id or type makes it another group, each its own.
        let reserved = BillCharge { commitment_discount_id: "r1".into(), ..group.clone() };
        let typed = BillCharge { commitment_discount_type: "r1".into(), ..group.clone() };
        let categorized = BillCharge { commitment_discount_category: "r1".into(), ..group.clone() };
        assert_ne!(reserved.untagged_key(), group.untagged_key());
        assert_ne!(reserved.untagged_key(), typed.untagged_key());
        assert_ne!(categorized.untagged_key(), typed.untagged_key());
        assert_ne!(categorized.untagged_key(), group.untagged_key());
    }

    #[test]
    fn vm_periods_unpack_as_packed() {
        let day = 1_790_812_800; // 2026-10-01
        let periods = [
            VmPeriod {
                start: day,
                end: day + 3_600,
                charges: 34,
                consumed_quantity: 0.1 + 0.2,
                billed_nanos: 1_234_567_000,
                effective_nanos: -5,
                list_nanos: i64::MAX,
                contracted_nanos: i64::MIN,
            },
            VmPeriod { start: day + 82_800, end: day + 86_400 * 31, charges: 1, ..VmPeriod::default() },
            VmPeriod {
                start: day + 86_400 * 31,
                end: day + 86_400 * 31 + 3_600,
                charges: 2,
                consumed_quantity: -3.0,
                effective_nanos: 7,
                billed_nanos: 7,
                list_nanos: 9,
                contracted_nanos: 7,
            },
        ];
        let packed = BillVmDay { day, periods: BillVmDay::pack(day, &periods), ..BillVmDay::default() };
        // A layout byte; the first period 39 bytes: start, length, rows (0, 7,200, 68 zigzagged:
        // 1 + 2 + 1), a fraction (1 + 8), effective -5 (1), then billed, list, contracted less
        // it (1,234,567,005: 5; i64::MAX + 5 wraps to i64::MIN + 4: 10; i64::MIN + 5: 10); the
        // second 13: 79,200 s after the first's end (3), 2,595,600 s long (4), 1 row (1), a
        // quantity of 0 (1), four zero amounts (4); the third 9: right after (1), 3,600 s (2),
        // 2 rows (1), -3 whole (1), 7 (1), then 0, 2, 0 (1 each).
        assert_eq!(packed.periods.len(), 1 + 39 + 13 + 9);
        assert_eq!(packed.unpack().unwrap(), periods);
        let mut cut = packed.clone();
        cut.periods.pop();
        assert_eq!(cut.unpack().unwrap_err(), format!("the packed periods of  on day {day} are cut short"));
        let other = BillVmDay { periods: vec![2], ..packed };
        assert!(other.unpack().unwrap_err().ends_with("of layout 2, not one this gpuledger reads"));
    }

    #[test]
    fn pod_hours_unpack_as_packed_one_row_per_pod_and_day() {
        let day = 1_790_812_800; // 2026-10-01
        let hour = |at: i64, pod: &str, labels: &str, cpu_usage: f64| KubePodHour {
            hour: at,
            cluster: "c".into(),
            namespace: "ns".into(),
            pod: pod.into(),
            uid: format!("{pod}-uid"),
            node: "n1".into(),
            labels: labels.into(),
            seconds: 3_600.0,
            cpu_request: 2.0,
            memory_request_gib: 0.1 + 0.2,
            cpu_usage,
            memory_usage_gib: -0.0,
            ..KubePodHour::default()
        };
        let hours = [
            hour(day + 3_600, "a", "{}", 1.5),
            hour(day, "a", "{}", 1.5),
            hour(day + 82_800, "a", "{}", 0.25),
            // The next day, another pod, the first pod relabelled.
            hour(day + 86_400, "a", "{}", 0.25),
            hour(day + 7_200, "b", "{}", 0.0),
            hour(day + 10_800, "a", r#"{"client":"acme"}"#, 1.5),
        ];
        let days = KubePodDay::pack_all(&hours);
        let keys: Vec<(&str, &str, i64)> =
            days.iter().map(|d| (d.pod.as_str(), d.labels.as_str(), d.day)).collect();
        assert_eq!(
            keys,
            [
                ("a", "{}", day),
                ("a", "{}", day + 86_400),
                ("b", "{}", day),
                ("a", r#"{"client":"acme"}"#, day)
            ]
        );
        // A layout byte; hour 0: its offset (0: 1 byte), the changed measures' byte (1) and
        // the five that differ from 0 (40: seconds, CPU and memory requests, CPU use, and
        // memory use -0.0, whose bits are not 0.0's); hour 1: 3,600 s later (zigzag 7,200:
        // 2 bytes), nothing changed (1); hour 23: 79,200 s later (3), CPU use changed (1 + 8).
        assert_eq!(days[0].hours.len(), 1 + (1 + 1 + 40) + (2 + 1) + (3 + 1 + 8));
        let mut unpacked = Vec::new();
        for d in &days {
            d.unpack_into(&mut unpacked).unwrap();
        }
        let mut expected = hours.to_vec();
        expected.sort_by(|a, b| (&a.labels, &a.pod, a.hour).cmp(&(&b.labels, &b.pod, b.hour)));
        unpacked.sort_by(|a, b| (&a.labels, &a.pod, a.hour).cmp(&(&b.labels, &b.pod, b.hour)));
        assert_eq!(unpacked, expected);
        assert!(unpacked.iter().all(|h| h.memory_usage_gib.is_sign_negative()));

        let mut cut = days[0].clone();
        cut.hours.pop();
        assert_eq!(
            cut.unpack_into(&mut Vec::new()).unwrap_err(),
            format!("the packed hours of pod ns/a on day {day} are cut short")
        );
        let other = KubePodDay { hours: vec![2], ..days[0].clone() };
        assert!(
            other
                .unpack_into(&mut Vec::new())
                .unwrap_err()
                .ends_with("of layout 2, not one this gpuledger reads")
        );
        let marked = KubePodDay { hours: vec![1, 0, 0x40], ..days[0].clone() };
        assert!(
            marked.unpack_into(&mut Vec::new()).unwrap_err().ends_with("marked with unknown measures (0x40)")
        );
    }
}
