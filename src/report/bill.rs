//! `gpuledger report bill`: one billing period's bill across every cloud, every dollar placed,
//! and the bridge from what the invoices charge to the amortized and net bill.
//!
//! JSON contract (stable; fields may be added, never renamed):
//!
//! ```json
//! {"period": "2026-10", "currency": "USD", "provider": null,
//!  "unblended_total": "1200.000000", "amortized_total": "1150.000000",
//!  "net_amortized_total": null,
//!  "kubernetes_cost": "900.000000", "unallocated_ec2_cost": "50.000000", "other_cost": "200.000000",
//!  "missing_rates": [],
//!  "bridge": [{"step": "Unblended usage and fees", "amount": "1250.000000", "kind": "start"}, …],
//!  "other_by_service": [{"provider": "aws", "service": "AmazonS3", "line_item_type": "Usage",
//!                        "amount": "120.000000"}],
//!  "invoices": [{"billing_entity": "AWS", "invoice_id": "…", "unblended": "…", "amortized": "…"}],
//!  "month": {"reporting_currency": "USD", "billed_total", "effective_total", "missing_rates",
//!            "bills_counted"},
//!  "bills": [{"provider": "aws", "billing_account": "…", "format": "cur", "focus_version": null,
//!             "currency": "USD", "billed_total": "…", "effective_total": "…",
//!             "rate_to_reporting": "1", …,
//!             "gpu": null | {"gpu_hours", "spot_gpu_hours", "gpu_fleet_effective_total",
//!                            "by_model": [{"gpu_model", …}],
//!                            "unknown_gpu_machines": [{"machine", "charges", "effective_total"}]},
//!             "unknown_gpu_machines": [{"machine", "charges", "effective_total"}] (the CUR's)}]}
//! ```
//!
//! The top-level amounts are the month's totals in the reporting currency (USD): the CUR's bill
//! and every other bill compute counts (each FOCUS bill but the CUR's own AWS twin), each
//! converted once at the rate in force for its month, as compute converts it. With
//! `--provider`, they are that provider's alone. When a bill's rate is missing they are null
//! and `missing_rates` names the pair: nothing is shown at a guessed rate.
//!
//! - `unblended_total` is what the invoices charge: the CUR's unblended cost and each other
//!   bill's BilledCost, every charge category.
//! - `amortized_total` is the amortized bill of usage and purchases (EffectiveCost for a FOCUS
//!   bill); `kubernetes_cost + unallocated_ec2_cost + other_cost = amortized_total` exactly.
//!   A GKE bill's `kube:unallocated` is in `unallocated_ec2_cost` (capacity no pod was given).
//! - The bridge starts from the CUR's unblended usage and fee lines and moves them to
//!   amortized line type by line type; each other bill adds its usage and purchases as billed
//!   (its amount in its own currency and the rate in the step's name) and then their
//!   amortization (EffectiveCost − BilledCost); then discounts, credits, refunds, adjustments
//!   (the net amortized bill) and tax.
//! - `net_amortized_total` is the CUR's net bill as its `net_*` columns give it (null without
//!   them) plus each other bill's net; the bridge's net step is computed from the discount,
//!   credit, refund and adjustment lines, and the two agree when the export is consistent.
//!
//! `bills` lists every bill of the month, the CUR's and each FOCUS bill (the CUR's AWS twin
//! too, not counted), each in its own currency; a FOCUS bill's `gpu` holds its GPU instances
//! as its provider bills them (`catalog::gpu_charge`): GPU-hours, those at `Dynamic` prices,
//! and the GPU fleet's effective cost, and the compute charges of what looks like a GPU machine
//! the catalog does not know (`unknown_gpu_machines`, never counted as GPU-hours or silently
//! as CPU: listed with their text and amount). The CUR's bill lists its own
//! (`unknown_gpu_machines`: instance types that look like GPU instances the catalog does not
//! know, `charges` the hours of the month each was billed in, at its amortized cost; an
//! operator's catalog row `aws,TYPE,GPUS,MODEL` adds one). `month` sums the bills themselves (each bill's every
//! charge) in the reporting currency. Amounts are exact decimal strings: micro-dollars at the
//! top level, nano-units in `bills` and `month`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{OutputFormat, ReportError, csv_cell};
use crate::domain::fx::{FxRate, REPORTING_CURRENCY, rate_for};
use crate::money::{Nanos, format_usd, usd_decimal};
use crate::period::Period;
use crate::store::{Bill, BillLine, CostPeriod, LineCategory, Store};

/// The month's totals in the reporting currency, in micros (`BillReport::totals`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    /// What the invoices charge: the CUR's unblended cost and each other bill's BilledCost.
    pub unblended: i64,
    pub amortized: i64,
    /// `None` when the CUR is in and has no `net_*` columns.
    pub net_amortized: Option<i64>,
    pub kubernetes: i64,
    pub unallocated: i64,
    pub other: i64,
}

/// One step of the bridge: a starting amount, a change, or a subtotal.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub step: String,
    pub micros: i64,
    pub kind: &'static str,
}

/// A period's bill, placed and bridged.
#[derive(Debug, Clone)]
pub struct BillReport {
    pub period: CostPeriod,
    pub bridge: Vec<Step>,
    /// (provider, service, line type) → amortized micros of other cost.
    pub other_by_service: BTreeMap<(String, String, String), i64>,
    /// (billing entity, invoice) → (unblended, amortized, net amortized) micros.
    pub invoices: BTreeMap<(String, String), (i64, i64, Option<i64>)>,
    /// Every bill of the month: the CUR's (when there is one) and each FOCUS bill, each in
    /// its own currency.
    pub bills: Vec<Bill>,
    /// The exchange rates stored (every version; the one in force for the month is used).
    pub rates: Vec<FxRate>,
    /// Each FOCUS bill's GPU instances, by (provider, billing account).
    pub gpus: BTreeMap<(String, String), GpuSums>,
    /// The CUR's instance types that look like GPU machines the catalog does not know
    /// ([`cur_unknown_machines`]).
    pub cur_unknown: BTreeMap<String, (i64, i64)>,
    /// The provider asked for (`--provider`): the bills, totals and bridge are its alone.
    pub provider: Option<String>,
    /// Whether the CUR's bill is in the totals (there is one, and no other provider was asked).
    pub with_cur: bool,
    /// The month's other bills in the reporting currency, as compute counts them.
    pub others: Vec<OtherBill>,
    /// Currency pairs with no rate for the month (`EUR→USD`): nothing is converted then.
    pub missing_rates: Vec<String>,
}

/// A FOCUS bill the month counts (another cloud's, or another AWS payer's), in the reporting
/// currency: its usage and purchases placed as compute places them
/// (`engine::bills::fold_bills`), its credits, adjustments and tax for the bridge.
#[derive(Debug, Clone, Default)]
pub struct OtherBill {
    pub bill: Bill,
    /// The rate it was converted at; `None` when it is in the reporting currency.
    pub rate: Option<FxRate>,
    /// Usage and purchases' BilledCost in the bill's own currency.
    pub usage_billed_nanos: i64,
    /// Usage and purchases: what the invoice charges (BilledCost) and the amortized cost
    /// (EffectiveCost), the latter split into the unallocated pool and other cost.
    pub billed_micros: i64,
    pub effective_micros: i64,
    /// The pods of the clusters gpuledger splits on its machines (compute's Kubernetes cost).
    pub kubernetes_micros: i64,
    pub unallocated_micros: i64,
    pub other_micros: i64,
    /// Other cost by service name.
    pub by_service: BTreeMap<String, i64>,
    /// EffectiveCost of its `Credit`, `Adjustment` and `Tax` charges.
    pub credits_micros: i64,
    pub adjustments_micros: i64,
    pub tax_micros: i64,
    /// Every charge's BilledCost: its invoices' total.
    pub billed_total_micros: i64,
}

impl OtherBill {
    /// `bill` as compute counts it; its rate's pair (`EUR→USD`) when none is in force.
    fn fold(
        bill: &Bill,
        cur_billing_account: Option<&str>,
        charges: &[crate::store::BillCharge],
        rates: &[FxRate],
        splits: &[crate::engine::bills::SplitNodes],
    ) -> Result<OtherBill, String> {
        let mut inputs = crate::store::ComputeInputs { period: bill.period.clone(), ..Default::default() };
        crate::engine::bills::fold_bills(
            &mut inputs,
            cur_billing_account,
            std::slice::from_ref(bill),
            (charges, &[]),
            rates,
            splits,
        )
        .map_err(|_| format!("{}→{REPORTING_CURRENCY}", bill.currency))?;
        let rate = rate_to_reporting(bill, rates).flatten().cloned();
        let in_reporting = |nanos: i64| crate::money::micros_from_nanos(converted(nanos, rate.as_ref()));
        let own = charges
            .iter()
            .filter(|c| c.provider == bill.provider && c.billing_account == bill.billing_account);
        let (mut by_category, mut usage_billed_nanos) = (BTreeMap::<&str, i64>::new(), 0);
        for charge in own {
            *by_category.entry(charge.charge_category.as_str()).or_default() += charge.effective_nanos;
            if matches!(charge.charge_category.as_str(), "Usage" | "Purchase") {
                usage_billed_nanos += charge.billed_nanos;
            }
        }
        let category = |name: &str| in_reporting(by_category.get(name).copied().unwrap_or(0));
        let mut by_service: BTreeMap<String, i64> = BTreeMap::new();
        for group in &inputs.other_groups {
            *by_service.entry(group.service.clone()).or_default() += group.amortized_cost_micros;
        }
        Ok(OtherBill {
            bill: bill.clone(),
            usage_billed_nanos,
            billed_micros: inputs.bill_unblended_micros,
            effective_micros: inputs.bill_amortized_micros,
            kubernetes_micros: inputs.kubernetes_micros,
            unallocated_micros: inputs.unallocated_ec2_micros,
            other_micros: inputs.other_cost_micros,
            by_service,
            credits_micros: category("Credit"),
            adjustments_micros: category("Adjustment"),
            tax_micros: category("Tax"),
            billed_total_micros: in_reporting(bill.billed_nanos),
            rate,
        })
    }

    /// How the bridge names it: `Azure bill gpu-agency (EUR 5,080.582060 at 1.0842)`.
    fn label(&self) -> String {
        let provider = crate::sources::focus::provider_name(&self.bill.provider);
        let name = self.bill.display_name();
        match &self.rate {
            Some(rate) => format!(
                "{provider} bill {name}: usage and purchases billed ({} {} at {} {REPORTING_CURRENCY} per {})",
                self.bill.currency,
                crate::report::table::grouped(&Nanos(self.usage_billed_nanos).decimal()),
                rate.rate,
                self.bill.currency
            ),
            None => format!("{provider} bill {name}: usage and purchases billed"),
        }
    }
}

/// What a FOCUS bill says about its GPU instances (`catalog::gpu_charge`): GPU-hours, those
/// at `Dynamic` prices (Spot, preemptible), and the GPU fleet's effective cost in the bill's
/// currency, in total and per GPU model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuSums {
    pub total: GpuFigures,
    pub by_model: BTreeMap<String, GpuFigures>,
    /// Compute usage charges of what looks like a GPU machine the catalog does not know
    /// (`catalog::looks_like_gpu_machine`), by the text naming it: (charges, effective nanos).
    /// Their GPU-hours are not counted until the catalog knows the machine.
    pub unknown: BTreeMap<String, (i64, i64)>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GpuFigures {
    pub gpu_hours: f64,
    pub spot_gpu_hours: f64,
    pub fleet_effective_nanos: i64,
}

impl GpuFigures {
    fn add(&mut self, charge: &crate::store::BillCharge) {
        self.gpu_hours += charge.gpu_hours;
        if crate::store::PurchaseOption::of_pricing_category(&charge.pricing_category)
            == crate::store::PurchaseOption::Spot
        {
            self.spot_gpu_hours += charge.gpu_hours;
        }
        self.fleet_effective_nanos += charge.effective_nanos;
    }

    fn to_json(self) -> Value {
        json!({
            "gpu_hours": round6(self.gpu_hours),
            "spot_gpu_hours": round6(self.spot_gpu_hours),
            "gpu_fleet_effective_total": Nanos(self.fleet_effective_nanos).decimal(),
        })
    }
}

fn round6(value: f64) -> f64 {
    (value * 1e6).round() / 1e6
}

/// The GPU instances of each bill in `charges`.
pub fn gpu_sums(charges: &[crate::store::BillCharge]) -> BTreeMap<(String, String), GpuSums> {
    let mut sums: BTreeMap<(String, String), GpuSums> = BTreeMap::new();
    for charge in charges {
        let bill = || (charge.provider.clone(), charge.billing_account.clone());
        if !charge.gpu_model.is_empty() {
            let bill = sums.entry(bill()).or_default();
            bill.total.add(charge);
            bill.by_model.entry(charge.gpu_model.clone()).or_default().add(charge);
        } else if is_unknown_gpu_machine(charge) {
            let unknown =
                sums.entry(bill()).or_default().unknown.entry(charge.resource_type.clone()).or_default();
            unknown.0 += charge.charges;
            unknown.1 += charge.effective_nanos;
        }
    }
    sums
}

/// The CUR's instance-hours of what looks like a GPU instance type the catalog does not know
/// (`p3.2xlarge` until an operator's catalog lists it), by type: (hours of the month it was
/// billed in, amortized nanos). Its GPUs are in no GPU model's fleet.
pub fn cur_unknown_machines(hours: &[crate::store::UsageHour]) -> BTreeMap<String, (i64, i64)> {
    let mut unknown: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for hour in hours.iter().filter(|h| {
        !crate::catalog::is_known_machine("aws", &h.instance_type)
            && crate::catalog::looks_like_gpu_machine("aws", &h.instance_type)
    }) {
        let entry = unknown.entry(hour.instance_type.clone()).or_default();
        entry.0 += 1;
        entry.1 += hour.amortized_cost_micros * 1_000;
    }
    unknown
}

/// A compute usage charge of what looks like a GPU machine, not in the catalog (a
/// commitment's unused hours ran no machine).
pub fn is_unknown_gpu_machine(charge: &crate::store::BillCharge) -> bool {
    charge.gpu_model.is_empty()
        && charge.charge_category == "Usage"
        && charge.service_category == "Compute"
        && charge.commitment_discount_status != "Unused"
        && !crate::catalog::is_known_machine(&charge.provider, &charge.resource_type)
        && crate::catalog::looks_like_gpu_machine(&charge.provider, &charge.resource_type)
}

impl GpuSums {
    fn to_json(&self) -> Value {
        let mut value = self.total.to_json();
        value["by_model"] = self
            .by_model
            .iter()
            .map(|(model, figures)| {
                let mut row = figures.to_json();
                row["gpu_model"] = json!(model);
                row
            })
            .collect::<Vec<_>>()
            .into();
        value["unknown_gpu_machines"] = unknown_json(&self.unknown);
        value
    }
}

/// Unknown GPU machines as JSON: `[{"machine", "charges", "effective_total"}]`.
fn unknown_json(unknown: &BTreeMap<String, (i64, i64)>) -> Value {
    unknown
        .iter()
        .map(|(machine, (charges, nanos))| {
            json!({"machine": machine, "charges": charges, "effective_total": Nanos(*nanos).decimal()})
        })
        .collect::<Vec<_>>()
        .into()
}

/// Unknown GPU machines by the text naming them, (charges, effective nanos): one line each.
fn unknown_lines(unknown: &BTreeMap<String, (i64, i64)>, currency: &str) -> Vec<String> {
    unknown
        .iter()
        .map(|(machine, (charges, nanos))| {
            let amount = crate::text::grouped(&Nanos(*nanos).decimal());
            let s = if *charges == 1 { "" } else { "s" };
            format!(
                "{charges} charge{s}, {currency} {amount}, unknown GPU machine `{machine}`: not counted as \
                 GPU-hours until the catalog knows it"
            )
        })
        .collect()
}

/// The month's bills summed in the reporting currency: each (provider, billing account) once
/// (the CUR's bill when the same AWS bill also came as FOCUS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonthTotals {
    /// `None` when a bill's rate is missing: nothing is converted then.
    pub billed_nanos: Option<i64>,
    pub effective_nanos: Option<i64>,
    /// The pairs with no rate for the month (`EUR→USD`).
    pub missing_rates: Vec<String>,
    /// The bills counted, as `provider/account/format`.
    pub counted: Vec<String>,
}

/// The rate of a bill's currency to the reporting currency for its month: 1 for the same
/// currency, `None` when no rate is in force.
pub fn rate_to_reporting<'a>(bill: &Bill, rates: &'a [FxRate]) -> Option<Option<&'a FxRate>> {
    if bill.currency == REPORTING_CURRENCY || bill.currency.is_empty() {
        return Some(None);
    }
    rate_for(rates, &bill.currency, REPORTING_CURRENCY, &bill.period).map(Some)
}

fn converted(nanos: i64, rate: Option<&FxRate>) -> i64 {
    rate.map_or(nanos, |r| r.convert(nanos))
}

/// One bill in its currency, and in the reporting currency at the rate in force for its
/// month (null when there is none): how `report bill` and the Data page's twin write a bill.
pub fn bill_json(b: &Bill, rates: &[FxRate], gpus: Option<&GpuSums>) -> Value {
    let rate = rate_to_reporting(b, rates);
    let in_reporting = |nanos: i64| rate.map(|r| Nanos(converted(nanos, r)).decimal());
    json!({
        "period": b.period,
        "provider": b.provider,
        "billing_account": b.billing_account,
        "billing_account_name": b.billing_account_name,
        "format": b.format,
        "focus_version": (!b.focus_version.is_empty()).then_some(&b.focus_version),
        "currency": b.currency,
        "billed_total": Nanos(b.billed_nanos).decimal(),
        "effective_total": Nanos(b.effective_nanos).decimal(),
        "list_total": Nanos(b.list_nanos).decimal(),
        "rows": b.rows_read,
        "reporting_currency": REPORTING_CURRENCY,
        "rate_to_reporting": rate.map(|r| r.map_or_else(|| "1".to_string(), |r| r.rate.clone())),
        "rate_effective_from": rate.flatten().map(|r| r.effective_from.clone()),
        "billed_total_reporting": in_reporting(b.billed_nanos),
        "effective_total_reporting": in_reporting(b.effective_nanos),
        "data_version": b.data_version,
        "ingested_at": b.ingested_at,
        "deviations": serde_json::from_str::<Value>(&b.deviations).unwrap_or(Value::Null),
        // A FOCUS bill's GPU instances when the caller read them; the CUR's are on every
        // other report.
        "gpu": gpus.filter(|_| b.format == "focus").map(GpuSums::to_json),
    })
}

/// Sums the month's bills in the reporting currency ([`MonthTotals`]).
pub fn month_totals(bills: &[Bill], rates: &[FxRate]) -> MonthTotals {
    let with_cur: std::collections::BTreeSet<(&str, &str)> = bills
        .iter()
        .filter(|b| b.format == "cur")
        .map(|b| (b.provider.as_str(), b.billing_account.as_str()))
        .collect();
    let mut totals = MonthTotals {
        billed_nanos: Some(0),
        effective_nanos: Some(0),
        missing_rates: Vec::new(),
        counted: Vec::new(),
    };
    for bill in bills {
        if bill.format != "cur" && with_cur.contains(&(bill.provider.as_str(), bill.billing_account.as_str()))
        {
            continue;
        }
        totals.counted.push(format!("{}/{}/{}", bill.provider, bill.billing_account, bill.format));
        match rate_to_reporting(bill, rates) {
            Some(rate) => {
                totals.billed_nanos = totals.billed_nanos.map(|t| t + converted(bill.billed_nanos, rate));
                totals.effective_nanos =
                    totals.effective_nanos.map(|t| t + converted(bill.effective_nanos, rate));
            }
            None => {
                let pair = format!("{}→{REPORTING_CURRENCY}", bill.currency);
                if !totals.missing_rates.contains(&pair) {
                    totals.missing_rates.push(pair);
                }
                totals.billed_nanos = None;
                totals.effective_nanos = None;
            }
        }
    }
    totals
}

/// How the amortization of a line type reads in the bridge.
fn amortization_step(line_type: &str) -> String {
    match line_type {
        "SavingsPlanCoveredUsage" => "Savings Plan covered usage at the plan's rates".into(),
        "SavingsPlanNegation" => "Savings Plan negations removed".into(),
        "SavingsPlanRecurringFee" => "Savings Plan recurring fees: used commitment removed".into(),
        "SavingsPlanUpfrontFee" => "Savings Plan upfront fees amortized".into(),
        "DiscountedUsage" => "Reserved Instance usage at its effective rate".into(),
        "RIFee" => "Reserved Instance fees: used part removed".into(),
        "Fee" => "Reserved Instance upfront fees amortized".into(),
        other => format!("{other}: amortized − unblended"),
    }
}

/// How an other bill's services read in `other_by_service`'s line type.
const FOCUS_LINE_TYPE: &str = "FOCUS usage and purchases";

/// The bridge from what the invoices charge to the amortized and net bill: the CUR's usage
/// and fees moved to amortized line type by line type, each other bill's usage and purchases
/// billed and then amortized (EffectiveCost − BilledCost), and the discounts, credits,
/// refunds, adjustments and tax of all of them.
fn bridge(cur: Option<&CostPeriod>, others: &[OtherBill]) -> Vec<Step> {
    let mut bridge = Vec::new();
    let (mut amortized, mut discounts, mut credits, mut refunds, mut adjustments, mut tax) =
        (0, 0, 0, 0, 0, 0);
    if let Some(period) = cur {
        let usage: Vec<&BillLine> =
            period.bill_lines.iter().filter(|l| l.category == LineCategory::Usage).collect();
        let sum = |category: LineCategory| -> i64 {
            period.bill_lines.iter().filter(|l| l.category == category).map(|l| l.unblended_micros).sum()
        };
        bridge.push(Step {
            step: "Unblended usage and fees".into(),
            micros: usage.iter().map(|l| l.unblended_micros).sum(),
            kind: "start",
        });
        let mut by_type: BTreeMap<&str, i64> = BTreeMap::new();
        for line in &usage {
            *by_type.entry(&line.line_item_type).or_default() +=
                line.amortized_micros - line.unblended_micros;
        }
        for (line_type, change) in by_type.into_iter().filter(|(_, change)| *change != 0) {
            bridge.push(Step { step: amortization_step(line_type), micros: change, kind: "change" });
        }
        // The bill's amortized total is the sum of its stored instance-hour and other-cost
        // rows; the lines above are the same cost rounded in other groups.
        let lines_amortized: i64 = usage.iter().map(|l| l.amortized_micros).sum();
        if lines_amortized != period.bill_amortized_micros {
            bridge.push(Step {
                step: "Rounding (rows rounded to the micro-dollar in other groups)".into(),
                micros: period.bill_amortized_micros - lines_amortized,
                kind: "change",
            });
        }
        amortized += period.bill_amortized_micros;
        discounts += sum(LineCategory::Discount);
        credits += sum(LineCategory::Credit);
        refunds += sum(LineCategory::Refund);
        tax += sum(LineCategory::Tax);
    }
    for other in others {
        let kind = if bridge.is_empty() { "start" } else { "change" };
        bridge.push(Step { step: other.label(), micros: other.billed_micros, kind });
        if other.effective_micros != other.billed_micros {
            bridge.push(Step {
                step: format!(
                    "{} bill {}: commitments amortized (EffectiveCost − BilledCost)",
                    crate::sources::focus::provider_name(&other.bill.provider),
                    other.bill.display_name()
                ),
                micros: other.effective_micros - other.billed_micros,
                kind: "change",
            });
        }
        amortized += other.effective_micros;
        credits += other.credits_micros;
        adjustments += other.adjustments_micros;
        tax += other.tax_micros;
    }
    bridge.push(Step { step: "Amortized cost".into(), micros: amortized, kind: "subtotal" });
    for (step, micros) in [("Discounts", discounts), ("Credits", credits), ("Refunds", refunds)] {
        bridge.push(Step { step: step.into(), micros, kind: "change" });
    }
    if !others.is_empty() {
        bridge.push(Step { step: "Adjustments".into(), micros: adjustments, kind: "change" });
    }
    let net = amortized + discounts + credits + refunds + adjustments;
    bridge.push(Step { step: "Net amortized cost".into(), micros: net, kind: "subtotal" });
    bridge.push(Step { step: "Tax".into(), micros: tax, kind: "change" });
    bridge.push(Step { step: "Net amortized cost with tax".into(), micros: net + tax, kind: "subtotal" });
    bridge
}

impl BillReport {
    /// The month's bills (one provider's with `provider`): the CUR's placed and bridged, and
    /// every other bill the month counts added to the totals and the bridge in the reporting
    /// currency, as compute adds them.
    pub async fn load(
        store: &dyn Store,
        period: Period,
        provider: Option<&str>,
    ) -> Result<BillReport, ReportError> {
        let key = period.to_string();
        let cur = store.bill(&key).await?;
        let mut bills: Vec<Bill> = store.bills(Some(&key)).await?;
        if bills.is_empty() {
            return Err(ReportError::NoData(period));
        }
        if let Some(provider) = provider {
            let choices: std::collections::BTreeSet<&str> =
                bills.iter().map(|b| b.provider.as_str()).collect();
            if !choices.contains(provider) {
                return Err(ReportError::NoProvider {
                    provider: provider.to_string(),
                    label: key,
                    choices: choices.into_iter().map(String::from).collect(),
                });
            }
            bills.retain(|b| b.provider == provider);
        }
        let rates = store.fx_rates().await?;
        let charges = store.month_charges(&key, provider).await?;
        let cur_account = cur.as_ref().map(|c| c.billing_account.clone());
        let cur_account = cur_account.as_deref();
        let (mut others, mut missing_rates) = (Vec::new(), Vec::new());
        let splits = crate::engine::compute::bill_split_nodes(store, period).await?;
        for bill in bills.iter().filter(|b| crate::engine::bills::counted(b, cur_account)) {
            match OtherBill::fold(bill, cur_account, &charges, &rates, &splits) {
                Ok(other) => others.push(other),
                Err(pair) if !missing_rates.contains(&pair) => missing_rates.push(pair),
                Err(_) => {}
            }
        }
        let with_cur = cur.is_some() && provider.is_none_or(|p| p == "aws");
        let mut report = match cur.filter(|_| with_cur) {
            Some(cur) => BillReport::from_period(cur),
            None => BillReport {
                bridge: Vec::new(),
                ..BillReport::from_period(CostPeriod {
                    period: key,
                    currency: REPORTING_CURRENCY.into(),
                    ..CostPeriod::default()
                })
            },
        };
        // EKS clusters without AWS's split: their pods' cost is Kubernetes, out of the EC2 no
        // pod was given, as compute places it.
        if with_cur {
            for split in splits.iter().filter(|s| s.from_cur) {
                let micros = crate::money::micros_from_nanos(split.pods_nanos());
                report.period.kubernetes_micros += micros;
                report.period.unallocated_ec2_micros -= micros;
            }
        }
        report.bridge = bridge(with_cur.then_some(&report.period), &others);
        for other in &others {
            for (service, micros) in &other.by_service {
                *report
                    .other_by_service
                    .entry((other.bill.provider.clone(), service.clone(), FOCUS_LINE_TYPE.into()))
                    .or_default() += micros;
            }
        }
        report.gpus = gpu_sums(&charges);
        if with_cur {
            let month = period.to_string();
            report.cur_unknown = cur_unknown_machines(&store.usage_hours(&month, &month).await?);
        }
        Ok(BillReport {
            bills,
            rates,
            provider: provider.map(String::from),
            with_cur,
            others,
            missing_rates,
            ..report
        })
    }

    /// The CUR's bill alone, placed and bridged.
    pub fn from_period(period: CostPeriod) -> BillReport {
        let bridge = bridge(Some(&period), &[]);
        let mut other_by_service = BTreeMap::new();
        for cost in &period.other_costs {
            *other_by_service
                .entry(("aws".to_string(), cost.service.clone(), cost.line_item_type.clone()))
                .or_default() += cost.amortized_cost_micros;
        }
        let mut invoices: BTreeMap<(String, String), (i64, i64, Option<i64>)> = BTreeMap::new();
        for line in &period.bill_lines {
            let entry = invoices
                .entry((line.billing_entity.clone(), line.invoice_id.clone()))
                .or_insert((0, 0, None));
            entry.0 += line.unblended_micros;
            if line.category == LineCategory::Usage {
                entry.1 += line.amortized_micros;
            }
            if let Some(net) = line.net_amortized_micros.filter(|_| line.category != LineCategory::Tax) {
                entry.2 = Some(entry.2.unwrap_or(0) + net);
            }
        }
        BillReport {
            period,
            bridge,
            other_by_service,
            invoices,
            bills: Vec::new(),
            rates: Vec::new(),
            gpus: BTreeMap::new(),
            cur_unknown: BTreeMap::new(),
            provider: None,
            with_cur: true,
            others: Vec::new(),
            missing_rates: Vec::new(),
        }
    }

    pub fn other_cost_micros(&self) -> i64 {
        self.period.other_cost_micros()
    }

    pub fn render(&self, format: OutputFormat) -> String {
        match format {
            OutputFormat::Json => serde_json::to_string_pretty(&self.to_json()).unwrap_or_default() + "\n",
            OutputFormat::Csv => {
                let mut out = String::from("step,kind,amount\n");
                for step in &self.bridge {
                    out.push_str(&format!(
                        "{},{},{}\n",
                        csv_cell(&step.step),
                        step.kind,
                        usd_decimal(step.micros)
                    ));
                }
                out
            }
            OutputFormat::Table => self.to_table(),
        }
    }

    /// The month's totals in the reporting currency, in micros: the CUR's (when it is in)
    /// and every other bill's; `None` when a bill's rate is missing.
    pub fn totals(&self) -> Option<Totals> {
        if !self.missing_rates.is_empty() {
            return None;
        }
        let p = &self.period;
        let cur = |micros: i64| if self.with_cur { micros } else { 0 };
        let others = |f: fn(&OtherBill) -> i64| self.others.iter().map(f).sum::<i64>();
        let net_others = others(|o| o.effective_micros + o.credits_micros + o.adjustments_micros);
        Some(Totals {
            unblended: cur(p.bill_unblended_micros) + others(|o| o.billed_total_micros),
            amortized: cur(p.bill_amortized_micros) + others(|o| o.effective_micros),
            net_amortized: if self.with_cur {
                p.net_amortized_micros.map(|n| n + net_others)
            } else {
                Some(net_others)
            },
            kubernetes: cur(p.kubernetes_micros) + others(|o| o.kubernetes_micros),
            unallocated: cur(p.unallocated_ec2_micros) + others(|o| o.unallocated_micros),
            other: cur(self.other_cost_micros()) + others(|o| o.other_micros),
        })
    }

    pub fn to_json(&self) -> Value {
        let p = &self.period;
        let totals = month_totals(&self.bills, &self.rates);
        let month = json!({
            "reporting_currency": REPORTING_CURRENCY,
            "billed_total": totals.billed_nanos.map(|n| Nanos(n).decimal()),
            "effective_total": totals.effective_nanos.map(|n| Nanos(n).decimal()),
            "missing_rates": totals.missing_rates,
            "bills_counted": totals.counted,
        });
        let bills: Vec<Value> = self
            .bills
            .iter()
            .map(|b| {
                let key = (b.provider.clone(), b.billing_account.clone());
                let mut value =
                    bill_json(b, &self.rates, Some(self.gpus.get(&key).unwrap_or(&GpuSums::default())));
                if b.format == "cur" {
                    value["unknown_gpu_machines"] = unknown_json(&self.cur_unknown);
                }
                value
            })
            .collect();
        let sums = self.totals();
        let total = |f: fn(&Totals) -> i64| sums.as_ref().map(|t| usd_decimal(f(t)));
        json!({
            "period": p.period,
            "currency": REPORTING_CURRENCY,
            "provider": self.provider,
            "unblended_total": total(|t| t.unblended),
            "amortized_total": total(|t| t.amortized),
            "net_amortized_total": sums.as_ref().and_then(|t| t.net_amortized).map(usd_decimal),
            "kubernetes_cost": total(|t| t.kubernetes),
            "unallocated_ec2_cost": total(|t| t.unallocated),
            "other_cost": total(|t| t.other),
            "missing_rates": self.missing_rates,
            "bridge": self.bridge.iter().map(|s| json!({
                "step": s.step, "amount": usd_decimal(s.micros), "kind": s.kind,
            })).collect::<Vec<_>>(),
            "other_by_service": self.other_by_service.iter().map(|((provider, service, line_type), micros)| json!({
                "provider": provider, "service": service, "line_item_type": line_type, "amount": usd_decimal(*micros),
            })).collect::<Vec<_>>(),
            "invoices": self.invoices.iter().map(|((entity, invoice), (unblended, amortized, net))| json!({
                "billing_entity": entity, "invoice_id": invoice, "unblended": usd_decimal(*unblended),
                "amortized": usd_decimal(*amortized), "net_amortized": net.map(usd_decimal),
            })).collect::<Vec<_>>(),
            "month": month,
            "bills": bills,
        })
    }

    /// A bill's GPU machines the catalog does not know: the CUR's instance types
    /// ([`cur_unknown_machines`]), a FOCUS bill's charges ([`GpuSums::unknown`]).
    fn unknown_of(&self, b: &Bill) -> Option<&BTreeMap<String, (i64, i64)>> {
        if b.format == "cur" {
            Some(&self.cur_unknown)
        } else {
            self.gpus.get(&(b.provider.clone(), b.billing_account.clone())).map(|g| &g.unknown)
        }
    }

    /// Each bill's compute charges of a GPU machine the catalog does not know, one line per
    /// machine: `azure gpu-agency: 14 charges, EUR 3,204.110000, unknown GPU machine …`.
    pub fn unknown_gpu_machines(&self) -> Vec<String> {
        self.bills
            .iter()
            .filter_map(|b| {
                let unknown = self.unknown_of(b)?;
                Some(unknown_lines(unknown, &b.currency).into_iter().map(move |line| {
                    format!(
                        "{} {}: {line}",
                        crate::sources::focus::provider_name(&b.provider),
                        b.billing_account
                    )
                }))
            })
            .flatten()
            .collect()
    }

    fn to_table(&self) -> String {
        let p = &self.period;
        let row = |label: &str, micros: i64| format!("  {label:<58} {:>16}", format_usd(micros));
        let mut lines = vec![format!("Bill {} ({REPORTING_CURRENCY})", p.period)];
        match self.totals() {
            Some(t) => lines.extend([
                row("Kubernetes (split + unused)", t.kubernetes),
                row("Compute not allocated to pods", t.unallocated),
                row("Other cost", t.other),
                row("Amortized bill", t.amortized),
            ]),
            None => lines.push(format!(
                "  no rate for {}: nothing is converted (gpuledger fx set …)",
                self.missing_rates.join(", ")
            )),
        }
        lines.push(String::new());
        lines.push("Bridge".into());
        for step in &self.bridge {
            let label =
                if step.kind == "subtotal" { format!("= {}", step.step) } else { format!("  {}", step.step) };
            lines.push(format!("  {label:<58} {:>16}", format_usd(step.micros)));
        }
        if let Some(net) = p.net_amortized_micros.filter(|_| self.with_cur) {
            lines.push(row("(CUR's net amortized from the net_* columns)", net));
        }
        if let Some(t) = self.totals() {
            lines.push(row("(invoice total: unblended and billed)", t.unblended));
        }
        if !self.bills.is_empty() {
            lines.push(String::new());
            lines.push(format!(
                "  {:<8} {:<34} {:<10} {:<4} {:>16} {:>16}",
                "Provider", "Billing account", "Format", "Cur.", "Billed", "Effective"
            ));
            for b in &self.bills {
                let format = match b.focus_version.as_str() {
                    "" => b.format.to_uppercase(),
                    version => format!("FOCUS {version}"),
                };
                lines.push(format!(
                    "  {:<8} {:<34} {:<10} {:<4} {:>16} {:>16}",
                    b.provider,
                    b.billing_account,
                    format,
                    b.currency,
                    Nanos(b.billed_nanos).decimal(),
                    Nanos(b.effective_nanos).decimal()
                ));
                if let Some(unknown) = self.unknown_of(b) {
                    lines.extend(
                        unknown_lines(unknown, &b.currency).into_iter().map(|line| format!("    {line}")),
                    );
                }
            }
        }
        lines.join("\n") + "\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bill(provider: &str, account: &str, format: &str, currency: &str, billed: i64) -> Bill {
        Bill {
            period: "2026-10".into(),
            provider: provider.into(),
            billing_account: account.into(),
            format: format.into(),
            currency: currency.into(),
            billed_nanos: billed,
            effective_nanos: billed,
            ..Bill::default()
        }
    }

    /// The AWS bill came both ways: counted once, as the CUR's. Azure's 100 EUR at 1.10 is
    /// 110 USD; without a rate, nothing is converted and the pair is named.
    #[test]
    fn the_month_counts_each_bill_once_in_the_reporting_currency() {
        let bills = vec![
            bill("aws", "111", "cur", "USD", 1_000_000_000_000),
            bill("aws", "111", "focus", "USD", 1_000_000_000_000),
            bill("azure", "ea-1", "focus", "EUR", 100_000_000_000),
        ];
        let rate = FxRate::new("EUR", "USD", "1.10", "2026-09".parse().unwrap(), "cli").unwrap();
        let totals = month_totals(&bills, &[rate]);
        assert_eq!(totals.billed_nanos, Some(1_110_000_000_000));
        assert_eq!(totals.counted, vec!["aws/111/cur".to_string(), "azure/ea-1/focus".to_string()]);
        let missing = month_totals(&bills, &[]);
        assert_eq!((missing.billed_nanos, missing.missing_rates), (None, vec!["EUR→USD".to_string()]));
    }

    fn line(line_item_type: &str, category: LineCategory, unblended: i64, amortized: i64) -> BillLine {
        BillLine {
            line_item_type: line_item_type.into(),
            category,
            unblended_micros: unblended,
            amortized_micros: amortized,
            ..BillLine::default()
        }
    }

    /// The bill's amortized total is the sum of its stored rows, which were rounded to the
    /// micro-dollar in other groups than the lines: 3 micro-dollars apart here. The bridge
    /// shows them as a rounding step, and every subtotal is the sum of the steps before it.
    #[test]
    fn the_bridge_shows_rounding_and_adds_up_step_by_step() {
        let period = CostPeriod {
            bill_amortized_micros: 1_500_003,
            bill_lines: vec![
                line("Usage", LineCategory::Usage, 1_000_000, 1_000_000),
                line("SavingsPlanCoveredUsage", LineCategory::Usage, 700_000, 500_000),
                line("Credit", LineCategory::Credit, -100_000, -100_000),
                line("Tax", LineCategory::Tax, 50_000, 50_000),
            ],
            ..CostPeriod::default()
        };
        let bridge = BillReport::from_period(period).bridge;
        let steps: Vec<(&str, i64)> = bridge.iter().map(|s| (s.step.as_str(), s.micros)).collect();
        assert_eq!(steps[0], ("Unblended usage and fees", 1_700_000));
        assert_eq!(steps[1], ("Savings Plan covered usage at the plan's rates", -200_000));
        assert_eq!(steps[2], ("Rounding (rows rounded to the micro-dollar in other groups)", 3));
        assert_eq!(steps[3], ("Amortized cost", 1_500_003));
        let net = steps.iter().find(|(s, _)| *s == "Net amortized cost").unwrap().1;
        assert_eq!(net, 1_400_003);
        assert_eq!(steps.last().unwrap(), &("Net amortized cost with tax", 1_450_003));
        let mut running = 0;
        for step in &bridge {
            match step.kind {
                "subtotal" => assert_eq!(step.micros, running, "{} is the sum of the steps above", step.step),
                _ => running += step.micros,
            }
        }
    }
}
