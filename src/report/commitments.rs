//! `gpuledger report commitments`: the bill's Savings Plans and reservations, and what to buy
//! (issue 42).
//!
//! **Current.** Each commitment billed in the latest stored month, from its fee lines: kind,
//! family, term, its commitment an hour (a plan's commitment, a reservation's fee for all its
//! instances), and its utilization in each month (used ÷ fee). One that ends within the
//! horizon is flagged.
//!
//! **Advice**, per kind and family the bill gives a discount for: the Compute Savings Plan
//! (from its covered lines, every region), an EC2 Instance Savings Plan of each family and
//! region billed, and a reservation of each instance type reserved in each region (from its
//! discounted lines): a reservation or EC2 Instance plan covers its own region's hours only.
//! - **Eligible usage**, hour by hour from the bill's instance-hours: the On-Demand usage a new
//!   commitment could cover, at public On-Demand prices (every instance type for the plan,
//!   the reserved type for a reservation). Usage under a commitment that ends within the
//!   horizon counts too, in the share of the kind's commitment that ends: it is On-Demand once
//!   the term is over, so the advice includes its renewal.
//! - **Discount** = 1 − Σ amortized ÷ Σ public On-Demand cost of the kind's covered
//!   instance-hours in the history.
//! - **The commitment**: the best over the last 7 days and over the last 30, the lower of the
//!   two, simulated hour by hour over the 30 days ([`engine::advise`]): coverage,
//!   utilization, a month's net savings, break-even months of the term.
//! - **Against the forecast**: the eligible usage's daily forecast over the horizon
//!   ([`forecast::forecast_series`]), spread over each day's hours by the last four weeks'
//!   shape of that weekday, and the chosen commitment simulated over it.
//! - **Azure's reservations and Google's committed use discounts** (a FOCUS bill's `Used`
//!   and `Unused` charges), per instance type they covered: the discount is 1 − Σ
//!   EffectiveCost ÷ Σ ListCost of its `Used` hours, the eligible usage the type's On-Demand
//!   (`Standard`, no commitment) ListCost hour by hour from each machine's charge periods, a
//!   day's row spread evenly over its hours; a year's term is assumed (FOCUS names none).
//!
//! JSON: `{"history_end", "horizon_months", "current": [{"id", "kind", "offering", "family",
//! "instance_type", "region", "term", "term_start", "term_end", "count", "hourly_commitment",
//! "utilization", "ends_within_horizon", "months": [{"month", "fee", "used", "utilization"}]}],
//! "advice": [{"provider", "currency", "kind", "family", "instance_type", "region", "term", "hourly_commitment", "count",
//! "coverage", "utilization", "monthly_net_savings", "break_even_months", "lookback_days",
//! "discount", "discount_from", "hours", "eligible_on_demand", "renews", "short", "long", "forecast",
//! "aws_recommendation"}], "notes"}`: `discount_from` is `bill`, or `aws_recommendation` for a
//! reservation of a type the bill has none of (an alternative to the Compute plan's advice for
//! the same hours where there is one, not counted with it on the Plan page). Money in the bill's currency (`currency`: USD for AWS's).

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, NaiveDate};
use serde_json::{Value, json};

use super::OutputFormat;
use super::table::{Cell, Table};
use crate::engine::commitments::{self as engine, Outcome};
use crate::engine::forecast;
use crate::money::{Nanos, nanos_from_usd};
use crate::period::Period;
use crate::sources::cost_explorer::PlanRecommendation;
use crate::sources::reservation_recommendation::{RecommendedReservation, ReservationRecommendation};
use crate::store::{Bill, BillCharge, CommitmentMonth, PurchaseOption, Store, UsageHour};

/// The columns of the commitments billed, but their id (the table's last).
pub const CURRENT_COLUMNS: [&str; 12] = [
    "provider",
    "kind",
    "family",
    "instance_type",
    "region",
    "term",
    "term_end",
    "count",
    "hourly_commitment",
    "currency",
    "utilization",
    "ends_within_horizon",
];

/// The two lookbacks, days: the lower of their best commitments is advised.
pub const SHORT_LOOKBACK_DAYS: usize = 7;
pub const LONG_LOOKBACK_DAYS: usize = 30;
/// Weeks whose hours give each weekday's shape, to spread a forecast day over its hours.
const SHAPE_WEEKS: usize = 4;

/// A commitment billed in the latest month, with every month of it stored.
#[derive(Debug, Clone)]
pub struct Current {
    /// `aws`, or the FOCUS bill's provider (`azure`, `gcp`, `oci`).
    pub provider: String,
    /// The bill's currency, which the commitment's money is in.
    pub currency: String,
    pub latest: CommitmentMonth,
    pub months: Vec<(String, CommitmentMonth)>,
    pub ends_within_horizon: bool,
}

/// What to buy of one kind and family.
#[derive(Debug, Clone)]
pub struct Advice {
    /// `aws`, or the FOCUS bill's provider whose commitment it is.
    pub provider: String,
    /// The bill's currency, which the advice's money is in.
    pub currency: String,
    pub kind: &'static str,
    pub family: String,
    /// A reservation's instance type, empty for the plan.
    pub instance_type: String,
    /// The region a reservation or EC2 Instance Savings Plan covers; empty for the Compute
    /// plan (every region), another cloud's, and hours stored without their region.
    pub region: String,
    pub term: String,
    pub discount: f64,
    /// Σ eligible usage at On-Demand prices over the long lookback.
    pub eligible_on_demand: f64,
    /// The commitments whose renewal the advice includes.
    pub renews: Vec<String>,
    pub advice: engine::Advice,
    /// One reserved instance's rate an hour, for a reservation.
    pub instance_rate: Option<f64>,
    /// The chosen commitment against the forecast's hours, when there is a forecast.
    pub forecast: Option<Outcome>,
    /// AWS's recommendation for the same kind, and why the two differ.
    pub aws: Option<AwsComparison>,
    pub term_months: u32,
    /// When the advice renews commitments: the eligible hours without them (what AWS
    /// recommends from); else empty, the eligible hours being those.
    pub on_demand_only: Vec<f64>,
    /// A reservation priced at AWS's recommendation's rate (the bill has none of its type).
    pub priced_by_aws: bool,
}

/// An advice bought together with the rest ([`CommitmentsReport::together`]): what it buys
/// and does on the hours the ones before it leave, or nothing when it is left out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bought {
    pub advice: engine::Advice,
    /// Its commitment against the forecast of the hours left to it (as the advice alone is
    /// against the forecast of all its hours), when there is a forecast.
    pub forecast: Option<Outcome>,
    /// Left out: buying it at all lowers what all of them save.
    pub left_out: bool,
    /// Bought smaller than the lookback rule sizes it on the hours left to it: its full size
    /// lowers what all of them save.
    pub resized: bool,
}

/// The fractions of a reservation's or EC2 Instance plan's size bought together tries
/// instead ([`CommitmentsReport::together`]); a reservation's in whole instances, and one
/// instance fewer.
pub const RESIZINGS: [f64; 4] = [0.0, 0.25, 0.5, 0.75];

/// AWS's recommendation beside gpuledger's advice.
#[derive(Debug, Clone)]
pub struct AwsComparison {
    pub recommendation: AwsRecommended,
    /// Where it came from: Cost Explorer, or a saved answer's file.
    pub source: String,
    /// gpuledger's commitment less AWS's, dollars an hour; and gpuledger's best over the same
    /// lookback as AWS's less AWS's.
    pub difference: f64,
    pub same_lookback_difference: Option<f64>,
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct CommitmentsReport {
    pub history_end: Option<NaiveDate>,
    pub horizon_months: u32,
    pub current: Vec<Current>,
    pub advice: Vec<Advice>,
    pub notes: Vec<String>,
    /// The first of the bill's hours, and per instance type billed On-Demand its rate an
    /// instance-hour and its On-Demand cost hour by hour: what a reservation AWS recommends
    /// (at its price) is simulated against.
    first_hour: i64,
    on_demand: BTreeMap<Place, (f64, Vec<f64>)>,
    /// Per instance type and region, the hours no billed commitment will cover after the
    /// horizon's endings (its On-Demand hours and the ending share of its covered ones), hour
    /// by hour from `first_hour`: what [`CommitmentsReport::together`] sizes against.
    open: BTreeMap<Place, Vec<f64>>,
    /// [`CommitmentsReport::together`], worked out on its first call (a change of the advice
    /// forgets it).
    bought: std::sync::OnceLock<Vec<Bought>>,
}

/// AWS's own recommendations to set beside the advice, each with where it came from.
#[derive(Debug, Clone, Default)]
pub struct AwsRecommendations {
    pub savings_plan: Option<(PlanRecommendation, String)>,
    /// Its EC2 Instance Savings Plans (`EC2_INSTANCE_SP`), per family and region.
    pub instance_plans: Option<(PlanRecommendation, String)>,
    pub reservations: Option<(ReservationRecommendation, String)>,
}

/// One of AWS's recommendations: its Compute Savings Plan, or its reservations of one
/// instance type (none when AWS recommends none of it).
#[derive(Debug, Clone)]
pub enum AwsRecommended {
    SavingsPlan(PlanRecommendation),
    Reservation(ReservationRecommendation),
}

impl AwsRecommended {
    /// What AWS recommends committing an hour.
    pub fn hourly_commitment(&self) -> f64 {
        match self {
            AwsRecommended::SavingsPlan(r) => r.hourly_commitment,
            AwsRecommended::Reservation(r) => r.details.iter().map(|d| d.hourly_commitment).sum(),
        }
    }

    fn lookback_days(&self) -> u32 {
        match self {
            AwsRecommended::SavingsPlan(r) => r.lookback_days,
            AwsRecommended::Reservation(r) => r.lookback_days,
        }
    }

    fn generated_at(&self) -> &str {
        match self {
            AwsRecommended::SavingsPlan(r) => &r.generated_at,
            AwsRecommended::Reservation(r) => &r.generated_at,
        }
    }
}

/// Where instance-hours ran: an instance type and a region (empty for hours stored before
/// migration 0042, which counts every region's hours together).
type Place = (String, String);

/// Whether a commitment of one region covers hours of another: the same region, or either
/// not known (hours stored before their region was).
fn same_region(a: &str, b: &str) -> bool {
    a.is_empty() || b.is_empty() || a == b
}

/// The bill's instance-hours hour by hour from `first` (UTC epoch seconds), per instance
/// type, region and purchase option: (public On-Demand cost, amortized cost), USD.
struct Hours {
    first: i64,
    len: usize,
    by: BTreeMap<(Place, PurchaseOption), Vec<(f64, f64)>>,
    /// Per instance type and region, Σ public On-Demand cost and Σ instance-hours.
    rates: BTreeMap<Place, (f64, f64)>,
}

impl Hours {
    fn new(rows: &[UsageHour]) -> Hours {
        let first = rows.iter().map(|r| r.hour).min().unwrap_or(0);
        let last = rows.iter().map(|r| r.hour).max().unwrap_or(first);
        let len = if rows.is_empty() { 0 } else { ((last - first) / 3600 + 1) as usize };
        let mut by: BTreeMap<(Place, PurchaseOption), Vec<(f64, f64)>> = BTreeMap::new();
        let mut rates: BTreeMap<Place, (f64, f64)> = BTreeMap::new();
        for row in rows {
            let place = (row.instance_type.clone(), row.region.clone());
            let rate = rates.entry(place.clone()).or_default();
            rate.0 += row.public_on_demand_cost_micros as f64 / 1e6;
            rate.1 += row.usage_hours;
            let series = by.entry((place, row.purchase_option)).or_insert_with(|| vec![(0.0, 0.0); len]);
            let cell = &mut series[((row.hour - first) / 3600) as usize];
            cell.0 += row.public_on_demand_cost_micros as f64 / 1e6;
            cell.1 += row.amortized_cost_micros as f64 / 1e6;
        }
        Hours { first, len, by, rates }
    }

    /// Each hour's Σ over the series of its public On-Demand cost × the series' `weight`
    /// (of its instance type, region and purchase option; 0: left out).
    fn eligible(&self, weight: impl Fn(&str, &str, PurchaseOption) -> f64) -> Vec<f64> {
        let mut hours = vec![0.0; self.len];
        for (((instance_type, region), option), series) in &self.by {
            let w = weight(instance_type, region, *option);
            if w > 0.0 {
                for (hour, (on_demand, _)) in hours.iter_mut().zip(series) {
                    *hour += w * on_demand;
                }
            }
        }
        hours
    }

    /// 1 − Σ amortized ÷ Σ public On-Demand of the series `select` picks; none without any.
    fn discount(&self, select: impl Fn(&str, &str, PurchaseOption) -> bool) -> Option<f64> {
        let (on_demand, amortized) = self
            .by
            .iter()
            .filter(|(((t, r), o), _)| select(t, r, *o))
            .flat_map(|(_, s)| s.iter())
            .fold((0.0, 0.0), |(a, b), (od, am)| (a + od, b + am));
        (on_demand > 0.0).then(|| 1.0 - amortized / on_demand)
    }

    /// One instance of a type in a region an hour at public On-Demand prices: Σ its public
    /// On-Demand cost ÷ Σ its instance-hours.
    fn on_demand_rate(&self, place: &Place) -> Option<f64> {
        self.rates.get(place).filter(|(_, usage)| *usage > 0.0).map(|(cost, usage)| cost / usage)
    }
}

/// A term's months from the bill's text (`1yr`, `3yr`); a year when it does not say.
fn term_months(term: &str) -> u32 {
    term.trim_end_matches("yr").parse::<u32>().map_or(12, |years| years * 12)
}

/// A FOCUS bill's commitment in a month: EffectiveCost of its `Used` and `Unused` hours
/// (nano-units), its kind, and the used ones' per instance type and GPU model.
type FocusTally = (i64, i64, &'static str, BTreeMap<(String, String), i64>);

/// A virtual machine's charge period in a FOCUS bill with a commitment (`bill_vm_costs`),
/// with what its charge group says: the usage a commitment covered or could cover, hour by
/// hour where the bill is hourly (Google), a day at a time where it is daily (Azure).
#[derive(Debug, Clone, PartialEq)]
pub struct FocusUsage {
    pub provider: String,
    pub billing_account: String,
    /// The machine (its `ResourceId`'s key).
    pub instance: String,
    /// Its instance type as stored (`Standard_NC40ads_H100_v5`; Google names none:
    /// `Compute Engine instance`) and GPU model.
    pub instance_type: String,
    pub gpu_model: String,
    pub pricing_category: String,
    pub commitment_status: String,
    /// The charge period, UTC epoch seconds, `[start, end)`.
    pub start: i64,
    pub end: i64,
    /// Hours the machine ran in the period: the period's hours, or for a longer period billed
    /// by the hour (Azure's day), its consumed hours.
    pub ran_hours: f64,
    /// Nano-units of the bill's currency.
    pub list_nanos: i64,
    pub effective_nanos: i64,
}

/// What [`CommitmentsReport::add_focus`] reads: each month's charges of the FOCUS bills
/// (summed per month), every bill, and the machines' charge periods of the bills that carry
/// a commitment.
#[derive(Debug, Clone, Default)]
pub struct FocusInputs {
    pub months: Vec<(String, Vec<BillCharge>)>,
    pub bills: Vec<Bill>,
    pub usage: Vec<FocusUsage>,
}

/// Whether a FOCUS charge is a commitment's hour (`Used` or `Unused`) on a bill other than
/// AWS's (whose commitments are the CUR's, with their ARNs and terms).
fn is_focus_commitment(c: &BillCharge) -> bool {
    c.provider != "aws" && matches!(c.commitment_discount_status.as_str(), "Used" | "Unused")
}

/// Reads [`FocusInputs`] from the store.
pub async fn focus_inputs(store: &dyn Store) -> Result<FocusInputs, crate::store::StoreError> {
    let bills = store.bills(None).await?;
    let mut periods: Vec<&str> =
        bills.iter().filter(|b| b.format == "focus").map(|b| b.period.as_str()).collect();
    periods.sort_unstable();
    periods.dedup();
    let mut inputs = FocusInputs::default();
    for period in periods {
        let charges = store.month_charges(period, None).await?;
        let committed: std::collections::BTreeSet<(&str, &str)> = charges
            .iter()
            .filter(|c| is_focus_commitment(c))
            .map(|c| (c.provider.as_str(), c.billing_account.as_str()))
            .collect();
        if !committed.is_empty() {
            // A machine's periods name their charge group by its untagged key (it holds the day).
            let groups: std::collections::HashMap<String, BillCharge> = store
                .bill_charges(period, None)
                .await?
                .into_iter()
                .filter(|c| committed.contains(&(c.provider.as_str(), c.billing_account.as_str())))
                .filter(|c| c.charge_category == "Usage")
                .map(|c| (c.untagged_key(), c))
                .collect();
            for vm in store.bill_vm_costs(period).await? {
                let Some(group) = groups.get(&vm.charge_key) else { continue };
                let hours = (vm.charge_end - vm.charge_start) as f64 / 3600.0;
                let by_the_hour = group.consumed_unit.to_ascii_lowercase().contains("hour");
                let ran_hours =
                    if hours > 1.0 && by_the_hour { vm.consumed_quantity.clamp(0.0, hours) } else { hours };
                inputs.usage.push(FocusUsage {
                    provider: vm.provider,
                    billing_account: vm.billing_account,
                    instance: vm.instance,
                    instance_type: group.resource_type.clone(),
                    gpu_model: group.gpu_model.clone(),
                    pricing_category: group.pricing_category.clone(),
                    commitment_status: group.commitment_discount_status.clone(),
                    start: vm.charge_start,
                    end: vm.charge_end,
                    ran_hours,
                    list_nanos: vm.list_nanos,
                    effective_nanos: vm.effective_nanos,
                });
            }
        }
        inputs.months.push((period.to_string(), charges));
    }
    inputs.bills = bills;
    Ok(inputs)
}

/// A FOCUS bill's usage of one instance type and GPU model (Google names no machine type:
/// its rows' type is `Compute Engine instance`) hour by hour from `first` (UTC epoch seconds):
/// each hour's On-Demand usage at list prices (what a further commitment could cover), in
/// units of the bill's currency; a period longer than an hour spread evenly over its hours.
/// With the commitment's effective rate an instance-hour.
struct FocusHours {
    first: i64,
    eligible: Vec<f64>,
    /// Σ EffectiveCost ÷ Σ instance-hours of the type's `Used` periods.
    committed_rate: Option<f64>,
    /// Whether any period is longer than an hour (a daily bill).
    daily: bool,
}

impl FocusHours {
    fn new(usage: &[&FocusUsage], (instance_type, gpu_model): (&str, &str)) -> FocusHours {
        let first = usage.iter().map(|u| u.start).min().unwrap_or(0);
        let last = usage.iter().map(|u| u.end).max().unwrap_or(first);
        let len = ((last - first).max(0) as usize).div_ceil(3600);
        let mut eligible = vec![0.0; len];
        let mut daily = false;
        // Instance-hours of the `Used` periods, once per machine and period (Google bills a
        // machine's hour as three SKUs).
        let mut used_hours: BTreeMap<(&str, i64), f64> = BTreeMap::new();
        let mut used_effective = 0i64;
        for u in usage.iter().filter(|u| u.instance_type == instance_type && u.gpu_model == gpu_model) {
            daily |= u.end - u.start > 3600;
            if u.commitment_status == "Used" {
                used_effective += u.effective_nanos;
                let ran = used_hours.entry((u.instance.as_str(), u.start)).or_default();
                *ran = ran.max(u.ran_hours);
            } else if u.commitment_status.is_empty() && u.pricing_category == "Standard" {
                let from = ((u.start - first) / 3600) as usize;
                let to = (((u.end - first) as usize).div_ceil(3600)).min(len);
                let per_hour = u.list_nanos as f64 / 1e9 / (to.saturating_sub(from)).max(1) as f64;
                for hour in &mut eligible[from.min(to)..to] {
                    *hour += per_hour;
                }
            }
        }
        let hours: f64 = used_hours.values().sum();
        FocusHours {
            first,
            eligible,
            committed_rate: (hours > 0.0).then(|| used_effective as f64 / 1e9 / hours),
            daily,
        }
    }
}

/// Everything the report reads from the store: the CUR's commitment months, its hourly
/// instance-hours over every stored period, and the FOCUS bills' [`FocusInputs`].
#[derive(Debug, Clone, Default)]
pub struct CommitmentInputs {
    pub commitments: Vec<(String, CommitmentMonth)>,
    pub usage: Vec<UsageHour>,
    pub focus: FocusInputs,
}

impl CommitmentInputs {
    pub async fn read(store: &dyn Store) -> Result<CommitmentInputs, crate::store::StoreError> {
        let commitments = store.commitment_months().await?;
        let mut periods: Vec<String> = store.periods().await?.into_iter().map(|p| p.period).collect();
        periods.sort();
        let usage = match (periods.first(), periods.last()) {
            (Some(first), Some(last)) => store.usage_hours(first, last).await?,
            _ => Vec::new(),
        };
        Ok(CommitmentInputs { commitments, usage, focus: focus_inputs(store).await? })
    }
}

impl CommitmentsReport {
    pub async fn load(store: &dyn Store, months: u32) -> anyhow::Result<CommitmentsReport> {
        let inputs = CommitmentInputs::read(store).await?;
        Ok(tokio::task::spawn_blocking(move || CommitmentsReport::from_inputs(&inputs, months)).await?)
    }

    /// The report from what [`CommitmentInputs::read`] read: the CUR's commitments and the
    /// FOCUS bills'.
    pub fn from_inputs(inputs: &CommitmentInputs, months: u32) -> CommitmentsReport {
        let mut report = CommitmentsReport::build(&inputs.commitments, &inputs.usage, months);
        report.add_focus(&inputs.focus);
        report
    }

    /// The report from the stored commitment months and instance-hours, `months` ahead of the
    /// last hour.
    pub fn build(
        commitments: &[(String, CommitmentMonth)],
        usage: &[UsageHour],
        months: u32,
    ) -> CommitmentsReport {
        let hours = Hours::new(usage);
        let mut notes = Vec::new();
        let history_end = (hours.len > 0)
            .then(|| DateTime::from_timestamp(hours.first + (hours.len as i64 - 1) * 3600, 0))
            .flatten()
            .map(|t| t.date_naive());
        // The horizon runs to the end of the `months`-th calendar month after the last day.
        let horizon_end = history_end.map(|end| {
            let next = end + chrono::Days::new(1);
            let month_start = next.with_day(1).unwrap_or(next);
            let until = month_start + chrono::Months::new(months + u32::from(next.day() > 1));
            until.and_hms_opt(0, 0, 0).map_or(0, |t| t.and_utc().timestamp())
        });
        let history_end_second = hours.first + hours.len as i64 * 3600;
        let latest_period = commitments.iter().map(|(p, _)| p.as_str()).max().unwrap_or("");
        let mut current: Vec<Current> = commitments
            .iter()
            .filter(|(p, _)| p == latest_period)
            .map(|(_, latest)| Current {
                provider: "aws".into(),
                currency: "USD".into(),
                latest: latest.clone(),
                months: commitments.iter().filter(|(_, c)| c.id == latest.id).cloned().collect(),
                ends_within_horizon: horizon_end
                    .is_some_and(|end| latest.term_end > 0 && latest.term_end <= end)
                    && latest.term_end >= history_end_second,
            })
            .collect();
        current.sort_by(|a, b| {
            (&a.latest.kind, &a.latest.family, &a.latest.id).cmp(&(
                &b.latest.kind,
                &b.latest.family,
                &b.latest.id,
            ))
        });
        // The share of a kind's (and reserved type's) commitment that ends within the horizon.
        let ending_share = |matches: &dyn Fn(&CommitmentMonth) -> bool| {
            let (all, ending) =
                current.iter().filter(|c| matches(&c.latest)).fold((0.0, 0.0), |(a, e), c| {
                    let size = c.latest.hourly_micros();
                    (a + size, e + if c.ends_within_horizon { size } else { 0.0 })
                });
            if all > 0.0 { ending / all } else { 0.0 }
        };
        let renewing = |matches: &dyn Fn(&CommitmentMonth) -> bool| {
            current
                .iter()
                .filter(|c| c.ends_within_horizon && matches(&c.latest))
                .map(|c| c.latest.id.clone())
                .collect()
        };
        let lookbacks = (SHORT_LOOKBACK_DAYS * 24, LONG_LOOKBACK_DAYS * 24);
        let mut advice = Vec::new();
        if hours.len == 0 {
            notes.push("no instance-hours stored: nothing to simulate a commitment against".into());
        }
        // The families and regions of the EC2 Instance Savings Plans billed: their covered
        // hours are taken as theirs, the other covered hours as the Compute plan's (the stored
        // instance-hours say only that a Savings Plan covered them).
        let instance_plans: std::collections::BTreeSet<(String, String)> = current
            .iter()
            .filter(|c| {
                c.latest.kind == "savings_plan"
                    && !matches!(c.latest.family.as_str(), "Compute" | "SageMaker")
            })
            .map(|c| (c.latest.family.clone(), c.latest.region.clone()))
            .collect();
        let under_instance_plan = |instance_type: &str, region: &str| {
            let family = family_of(instance_type);
            instance_plans.iter().any(|(f, r)| *f == family && same_region(r, region))
        };
        // The Compute Savings Plan.
        let is_plan = |c: &CommitmentMonth| c.kind == "savings_plan" && c.family == "Compute";
        match hours.discount(|t, r, option| option == PurchaseOption::SavingsPlans && !under_instance_plan(t, r)) {
            Some(discount) if hours.len > 0 => {
                let share = ending_share(&is_plan);
                let eligible = hours.eligible(|t, r, option| match option {
                    PurchaseOption::OnDemand => 1.0,
                    PurchaseOption::SavingsPlans if !under_instance_plan(t, r) => share,
                    _ => 0.0,
                });
                let term = current
                    .iter()
                    .find(|c| is_plan(&c.latest))
                    .map_or("1yr".to_string(), |c| c.latest.purchase_term.clone());
                let mut plan = advise(
                    ("savings_plan", "Compute", ""),
                    term,
                    discount,
                    &eligible,
                    hours.first,
                    lookbacks,
                    (months, renewing(&is_plan), None),
                );
                if !plan.renews.is_empty() {
                    plan.on_demand_only =
                        hours.eligible(|_, _, option| f64::from(option == PurchaseOption::OnDemand));
                }
                advice.push(plan);
            }
            _ if hours.len > 0 => notes.push(
                "no instance-hour under a Compute Savings Plan in the bill: its discount cannot be read from it, so no plan is advised"
                    .into(),
            ),
            _ => {}
        }
        // An EC2 Instance Savings Plan of each family and region one is billed for.
        for (family, region) in &instance_plans {
            let in_plan = |t: &str, r: &str| family_of(t) == *family && same_region(region, r);
            let Some(discount) = hours.discount(|t, r, o| in_plan(t, r) && o == PurchaseOption::SavingsPlans)
            else {
                notes.push(format!(
                    "the EC2 Instance Savings Plan of {family}{}: no instance-hour of the family under a Savings Plan in the stored hours, so no discount to advise from",
                    in_region(region)
                ));
                continue;
            };
            let of_plan = |c: &CommitmentMonth| {
                c.kind == "savings_plan" && c.family == *family && same_region(&c.region, region)
            };
            let share = ending_share(&of_plan);
            let eligible = hours.eligible(|t, r, option| match option {
                _ if !in_plan(t, r) => 0.0,
                PurchaseOption::OnDemand => 1.0,
                PurchaseOption::SavingsPlans => share,
                _ => 0.0,
            });
            let term = current
                .iter()
                .find(|c| of_plan(&c.latest))
                .map_or("1yr".to_string(), |c| c.latest.purchase_term.clone());
            let mut plan = advise(
                ("savings_plan", family, ""),
                term,
                discount,
                &eligible,
                hours.first,
                lookbacks,
                (months, renewing(&of_plan), None),
            );
            plan.region = region.clone();
            if !plan.renews.is_empty() {
                plan.on_demand_only = hours
                    .eligible(|t, r, option| f64::from(in_plan(t, r) && option == PurchaseOption::OnDemand));
            }
            advice.push(plan);
        }
        if !instance_plans.is_empty() {
            let mut families: Vec<&str> = instance_plans.iter().map(|(f, _)| f.as_str()).collect();
            families.dedup();
            notes.push(format!(
                "EC2 Instance Savings Plans of {}: the stored instance-hours say only that a Savings Plan covered them, so a family's covered hours in its plan's region are taken as its EC2 Instance plan's and the others' as the Compute plan's; their On-Demand hours count in both advices alone; bought together (the together columns, which the Plan page adds up) the EC2 Instance plan is sized first and the Compute plan on the hours it leaves",
                families.join(", ")
            ));
        }
        // A reservation of each instance type reserved, in each region it is.
        let reserved: Vec<Place> = hours
            .by
            .keys()
            .filter(|(_, option)| *option == PurchaseOption::Reserved)
            .map(|(place, _)| place.clone())
            .collect();
        for place in reserved {
            let (instance_type, region) = (&place.0, &place.1);
            let of_place = |t: &str, r: &str| t == instance_type && same_region(region, r);
            let Some(discount) = hours.discount(|t, r, o| of_place(t, r) && o == PurchaseOption::Reserved)
            else {
                continue;
            };
            let of_type = |c: &CommitmentMonth| {
                c.kind == "reservation" && c.instance_type == *instance_type && same_region(&c.region, region)
            };
            let share = ending_share(&of_type);
            let eligible = hours.eligible(|t, r, option| match option {
                _ if !of_place(t, r) => 0.0,
                PurchaseOption::OnDemand => 1.0,
                PurchaseOption::Reserved => share,
                _ => 0.0,
            });
            let term = current
                .iter()
                .find(|c| of_type(&c.latest))
                .map_or("1yr".to_string(), |c| c.latest.purchase_term.clone());
            let family = family_of(instance_type);
            let rate = hours.on_demand_rate(&place).map(|od| od * (1.0 - discount));
            let mut reservation = advise(
                ("reservation", &family, instance_type),
                term,
                discount,
                &eligible,
                hours.first,
                lookbacks,
                (months, renewing(&of_type), rate),
            );
            reservation.region = region.clone();
            if !reservation.renews.is_empty() {
                reservation.on_demand_only = hours
                    .eligible(|t, r, option| f64::from(of_place(t, r) && option == PurchaseOption::OnDemand));
            }
            advice.push(reservation);
        }
        if advice.iter().any(|a| a.forecast.is_none()) && hours.len > 0 {
            notes.push(format!(
                "fewer than {} whole days of instance-hours: the advice is not simulated against a forecast",
                forecast::MIN_HISTORY_DAYS
            ));
        }
        if hours.by.keys().any(|((_, region), _)| region.is_empty()) {
            notes.push(
                "instance-hours stored before their region was (migration 0042) count every region's hours together: a reservation or EC2 Instance Savings Plan, which covers its own region's, can be advised larger than one region can use; ingest those months again with --force to size them per region"
                    .into(),
            );
        }
        // Per instance type and region, the hours no billed commitment will cover once those
        // ending within the horizon have ended: its On-Demand hours and the ending share of its
        // covered ones (what the advice bought together is sized against).
        let compute_share = ending_share(&is_plan);
        let places: std::collections::BTreeSet<&Place> = hours.by.keys().map(|(place, _)| place).collect();
        let open = places
            .into_iter()
            .map(|place| {
                let (instance_type, region) = (&place.0, &place.1);
                let family = family_of(instance_type);
                let plan_share = if under_instance_plan(instance_type, region) {
                    ending_share(&|c| {
                        c.kind == "savings_plan" && c.family == family && same_region(&c.region, region)
                    })
                } else {
                    compute_share
                };
                let reserved_share = ending_share(&|c| {
                    c.kind == "reservation"
                        && c.instance_type == *instance_type
                        && same_region(&c.region, region)
                });
                let series = hours.eligible(|t, r, option| match option {
                    _ if t != instance_type || r != region => 0.0,
                    PurchaseOption::OnDemand => 1.0,
                    PurchaseOption::SavingsPlans => plan_share,
                    PurchaseOption::Reserved => reserved_share,
                    _ => 0.0,
                });
                (place.clone(), series)
            })
            .collect();
        let on_demand = hours
            .by
            .keys()
            .filter(|(_, option)| *option == PurchaseOption::OnDemand)
            .filter_map(|(place, _)| {
                let rate = hours.on_demand_rate(place)?;
                let series = hours.eligible(|t, r, o| {
                    f64::from(t == place.0 && r == place.1 && o == PurchaseOption::OnDemand)
                });
                Some((place.clone(), (rate, series)))
            })
            .collect();
        CommitmentsReport {
            history_end,
            horizon_months: months,
            current,
            advice,
            notes,
            first_hour: hours.first,
            on_demand,
            open,
            bought: std::sync::OnceLock::new(),
        }
    }

    /// Adds the other clouds' commitments from their FOCUS bills (each month's charges of
    /// every FOCUS bill, and the bills; AWS's are the CUR's): per bill, the hours a commitment ran (`Used`) and did not (`Unused`), at their
    /// EffectiveCost in the bill's currency. FOCUS names no term, so its end is not known.
    pub fn add_focus(&mut self, focus: &FocusInputs) {
        self.bought = std::sync::OnceLock::new();
        let (months, bills) = (&focus.months, &focus.bills);
        // Per bill and commitment (the bill's CommitmentDiscountId; one per bill where its
        // charges name none), each month of it.
        type Found = BTreeMap<(String, String, String), Vec<(String, CommitmentMonth)>>;
        let mut found: Found = BTreeMap::new();
        for (period, charges) in months {
            let Ok(month) = period.parse::<Period>() else { continue };
            let mut by_commitment: BTreeMap<(String, String, String), FocusTally> = BTreeMap::new();
            // AWS's commitments are the CUR's, with their ARNs and terms.
            for c in charges.iter().filter(|c| is_focus_commitment(c)) {
                let status = c.commitment_discount_status.as_str();
                let key = (c.provider.clone(), c.billing_account.clone(), c.commitment_discount_id.clone());
                let entry =
                    by_commitment.entry(key).or_insert_with(|| (0, 0, focus_kind(c), BTreeMap::new()));
                if status == "Used" {
                    entry.0 += c.effective_nanos;
                    let covered = (c.resource_type.clone(), c.gpu_model.clone());
                    *entry.3.entry(covered).or_default() += c.effective_nanos;
                } else {
                    entry.1 += c.effective_nanos;
                }
            }
            for ((provider, account, id), (used, unused, kind, types)) in by_commitment {
                // The type whose hours it covered most; its GPU model is the family.
                let (instance_type, gpu_model) =
                    types.into_iter().max_by_key(|(_, nanos)| *nanos).map(|(t, _)| t).unwrap_or_default();
                let commitment = CommitmentMonth {
                    id: if id.is_empty() {
                        format!("{provider}:{account}:{instance_type}")
                    } else {
                        id.clone()
                    },
                    kind: kind.into(),
                    offering: String::new(),
                    family: if gpu_model.is_empty() { instance_type.clone() } else { gpu_model },
                    instance_type,
                    region: String::new(),
                    purchase_term: String::new(),
                    payment_option: String::new(),
                    term_start: 0,
                    term_end: 0,
                    count: 0,
                    hours: f64::from(month.days()) * 24.0,
                    fee_micros: crate::money::micros_from_nanos(used + unused),
                    used_micros: crate::money::micros_from_nanos(used),
                };
                found.entry((provider, account, id)).or_default().push((period.clone(), commitment));
            }
        }
        let mut advised = std::collections::BTreeSet::new();
        for ((provider, account, _), mut stored) in found {
            stored.sort_by(|a, b| a.0.cmp(&b.0));
            let Some((_, latest)) = stored.last().cloned() else { continue };
            let currency = bills
                .iter()
                .find(|b| b.provider == provider && b.billing_account == account)
                .map_or(String::new(), |b| b.currency.clone());
            if advised.insert((provider.clone(), account.clone())) {
                self.advise_focus((&provider, &account, &currency), months, &focus.usage);
            }
            self.current.push(Current {
                provider,
                currency,
                latest,
                months: stored,
                ends_within_horizon: false,
            });
        }
    }

    /// Advice for a FOCUS bill's commitment, per instance type it covered: the lower of the
    /// two lookbacks' best commitments over the bill's On-Demand hours of that type, at the
    /// discount its `Used` hours had (1 − Σ EffectiveCost ÷ Σ ListCost), as for AWS's.
    fn advise_focus(
        &mut self,
        (provider, account, currency): (&str, &str, &str),
        months: &[(String, Vec<BillCharge>)],
        usage: &[FocusUsage],
    ) {
        // Σ EffectiveCost and ListCost of the `Used` charges per covered type and GPU model,
        // and the kind of the commitment that covered it.
        let mut covered: BTreeMap<(String, String), (i64, i64, &'static str)> = BTreeMap::new();
        for c in months.iter().flat_map(|(_, charges)| charges).filter(|c| {
            c.provider == provider && c.billing_account == account && c.commitment_discount_status == "Used"
        }) {
            let sums = covered
                .entry((c.resource_type.clone(), c.gpu_model.clone()))
                .or_insert_with(|| (0, 0, focus_kind(c)));
            sums.0 += c.effective_nanos;
            sums.1 += c.list_nanos;
        }
        let usage: Vec<&FocusUsage> =
            usage.iter().filter(|u| u.provider == provider && u.billing_account == account).collect();
        let mut daily = false;
        for ((instance_type, gpu_model), (effective, list, kind)) in covered {
            if list <= 0 || effective >= list {
                self.notes.push(format!(
                    "{provider}'s {kind} on {instance_type}: its used hours cost no less than at list prices, so no discount to advise from"
                ));
                continue;
            }
            let hours = FocusHours::new(&usage, (&instance_type, &gpu_model));
            if hours.eligible.is_empty() {
                self.notes.push(format!(
                    "{provider}'s {kind} on {instance_type}: no machine's hours are stored, so nothing to simulate against"
                ));
                continue;
            }
            daily |= hours.daily;
            let family = if gpu_model.is_empty() { instance_type.clone() } else { gpu_model };
            let mut advice = advise(
                (kind, &family, &instance_type),
                "1yr".into(),
                1.0 - effective as f64 / list as f64,
                &hours.eligible,
                hours.first,
                (SHORT_LOOKBACK_DAYS * 24, LONG_LOOKBACK_DAYS * 24),
                (self.horizon_months, Vec::new(), hours.committed_rate),
            );
            advice.provider = provider.to_string();
            advice.currency = currency.to_string();
            if advice.advice.chosen.hourly_commitment == 0.0 {
                self.notes.push(nothing_to_buy((provider, kind, &advice.family), &advice, &hours.eligible));
            }
            self.advice.push(advice);
        }
        if covered_any(&self.advice, provider) {
            self.notes.push(format!(
                "{provider}: the FOCUS bill names no commitment term, so its advice assumes one year for the break-even; money in {currency}"
            ));
        }
        if daily {
            self.notes.push(format!(
                "{provider}'s bill is daily: each day's On-Demand cost is spread evenly over its hours, so the simulation sees steady usage where the day may have had peaks, and a commitment sized on it can be too large"
            ));
        }
    }

    /// Sets AWS's recommendations beside the advice: its Compute Savings Plan beside the
    /// plan's, its reservations beside each reserved type's, and a reservation of a type the
    /// bill has none of advised at AWS's price.
    pub fn compare_with_aws(&mut self, aws: &AwsRecommendations) {
        self.bought = std::sync::OnceLock::new();
        if let Some((recommendation, source)) = &aws.savings_plan {
            self.compare_plan(recommendation.clone(), source.clone());
        }
        if let Some((recommendation, source)) = &aws.instance_plans {
            self.compare_instance_plans(recommendation, source);
        }
        if let Some((recommendation, source)) = &aws.reservations {
            self.compare_reservations(recommendation, source);
        }
    }

    /// AWS's EC2 Instance Savings Plans beside each family's plan advice (none where AWS
    /// recommends none of it); a family AWS recommends a plan of that the bill has none of is
    /// advised at the discount AWS's estimate implies ([`PlanRecommendation::discount`]),
    /// simulated over the bill's On-Demand hours of the family as any advice is.
    fn compare_instance_plans(&mut self, recommendation: &PlanRecommendation, source: &str) {
        let history_end = self.history_end;
        let is_instance_plan =
            |a: &Advice| a.provider == "aws" && a.kind == "savings_plan" && a.family != "Compute";
        for advice in self.advice.iter_mut().filter(|a| is_instance_plan(a)) {
            let pricing = "AWS prices each hour at the family's own Savings Plan rates and counts hours since the stored bill's last delivery";
            let theirs =
                AwsRecommended::SavingsPlan(recommendation.of_family(&advice.family, &advice.region));
            advice.aws = Some(comparison(advice, theirs, source.to_string(), history_end, pricing));
        }
        let mut plans: Vec<(&str, &str)> = recommendation
            .plans
            .iter()
            .map(|p| (p.instance_family.as_str(), p.region.as_str()))
            .filter(|(f, _)| !f.is_empty())
            .collect();
        plans.sort_unstable();
        plans.dedup();
        let mut priced = Vec::new();
        for (family, region) in plans {
            let covered =
                |a: &Advice| is_instance_plan(a) && a.family == family && same_region(&a.region, region);
            if self.advice.iter().any(covered) {
                continue;
            }
            // The bill's On-Demand hours of the family in the plan's region (in every region,
            // for hours stored without theirs).
            let mut eligible: Vec<f64> = Vec::new();
            let mut hours_region = region;
            for ((t, r), (_, hours)) in &self.on_demand {
                if family_of(t) == family && same_region(region, r) {
                    if r.is_empty() {
                        hours_region = "";
                    }
                    eligible.resize(hours.len(), 0.0);
                    eligible.iter_mut().zip(hours).for_each(|(e, h)| *e += h);
                }
            }
            let theirs = recommendation.of_family(family, hours_region);
            let Some(discount) = theirs.discount().filter(|_| !eligible.is_empty()) else {
                self.notes.push(format!(
                    "AWS recommends an EC2 Instance Savings Plan of {family}{} (${:.3} an hour, {source}); the stored bill has no On-Demand hour of the family there, or AWS's estimate no discount, to simulate it against",
                    in_region(region),
                    theirs.hourly_commitment
                ));
                continue;
            };
            let mut advice = advise(
                ("savings_plan", family, ""),
                "1yr".into(),
                discount,
                &eligible,
                self.first_hour,
                (SHORT_LOOKBACK_DAYS * 24, LONG_LOOKBACK_DAYS * 24),
                (self.horizon_months, Vec::new(), None),
            );
            advice.region = hours_region.to_string();
            let pricing = "both price at the discount AWS's estimate implies; gpuledger counts the stored bill's On-Demand instance-hours of the family";
            advice.aws = Some(comparison(
                &advice,
                AwsRecommended::SavingsPlan(theirs),
                source.to_string(),
                history_end,
                pricing,
            ));
            advice.priced_by_aws = true;
            priced.push(format!("{family}{}", in_region(hours_region)));
            self.advice.push(advice);
        }
        if !priced.is_empty() {
            self.notes.push(format!(
                "the bill has no EC2 Instance Savings Plan of {}: each is advised at the discount AWS's recommendation implies ({source}: 1 − its cost × its utilization ÷ the On-Demand cost it covers), simulated over the bill's On-Demand hours of the family; the Compute plan's advice counts those hours too (bought together, the EC2 Instance plan is sized first)",
                priced.join(", ")
            ));
        }
    }

    /// AWS's Compute Savings Plan recommendation beside the plan's advice, with the reasons
    /// they differ: the lookback rule, renewals, and what each prices.
    fn compare_plan(&mut self, recommendation: PlanRecommendation, source: String) {
        let history_end = self.history_end;
        let Some(advice) = self.advice.iter_mut().find(|a| a.kind == "savings_plan" && a.family == "Compute")
        else {
            self.notes.push(format!(
                "AWS recommends a Compute Savings Plan of ${:.3} an hour ({source}); gpuledger advises none without a plan's discount in the bill",
                recommendation.hourly_commitment
            ));
            return;
        };
        let pricing = "AWS prices each hour at each instance family's Savings Plan rate and counts usage the stored bill does not have (Fargate, Lambda, hours since its last delivery)";
        advice.aws = Some(comparison(
            advice,
            AwsRecommended::SavingsPlan(recommendation),
            source,
            history_end,
            pricing,
        ));
    }

    /// AWS's reservations beside each reserved type's advice (none where AWS recommends
    /// none of it); a type AWS recommends that the bill reserves none of is advised at AWS's
    /// price, simulated over the bill's On-Demand hours of it as any advice is.
    fn compare_reservations(&mut self, recommendation: &ReservationRecommendation, source: &str) {
        let history_end = self.history_end;
        let of_place = |instance_type: &str, region: &str| ReservationRecommendation {
            details: recommendation
                .details
                .iter()
                .filter(|d| d.instance_type == instance_type && same_region(region, &d.region))
                .cloned()
                .collect(),
            ..recommendation.clone()
        };
        for advice in self.advice.iter_mut().filter(|a| a.provider == "aws" && a.kind == "reservation") {
            let pricing = "AWS prices each hour at its own reservation rate and counts hours since the stored bill's last delivery";
            let theirs = AwsRecommended::Reservation(of_place(&advice.instance_type, &advice.region));
            advice.aws = Some(comparison(advice, theirs, source.to_string(), history_end, pricing));
        }
        let mut priced = Vec::new();
        for detail in &recommendation.details {
            if self.advice.iter().any(|a| {
                a.kind == "reservation"
                    && a.instance_type == detail.instance_type
                    && same_region(&a.region, &detail.region)
            }) {
                continue;
            }
            // The bill's On-Demand hours of the type in the detail's region (or, stored
            // without theirs, in every region).
            let hours = self
                .on_demand
                .iter()
                .find(|((t, r), _)| *t == detail.instance_type && same_region(&detail.region, r));
            let (Some(((_, hours_region), (on_demand_rate, eligible))), Some(rate)) =
                (hours, detail.instance_rate())
            else {
                self.notes.push(format!(
                    "AWS recommends {} {} reservations{} ({source}); the stored bill has no On-Demand hour of that type there to simulate them against",
                    detail.count,
                    detail.instance_type,
                    in_region(&detail.region)
                ));
                continue;
            };
            let family = family_of(&detail.instance_type);
            let mut advice = advise(
                ("reservation", &family, &detail.instance_type),
                "1yr".into(),
                1.0 - rate / on_demand_rate,
                eligible,
                self.first_hour,
                (SHORT_LOOKBACK_DAYS * 24, LONG_LOOKBACK_DAYS * 24),
                (self.horizon_months, Vec::new(), Some(rate)),
            );
            advice.region = hours_region.clone();
            let pricing = "both price at AWS's reservation rate; gpuledger counts the stored bill's On-Demand instance-hours";
            let theirs = AwsRecommended::Reservation(of_place(&detail.instance_type, hours_region));
            advice.aws = Some(comparison(&advice, theirs, source.to_string(), history_end, pricing));
            advice.priced_by_aws = true;
            priced.push(format!("{}{}", detail.instance_type, in_region(hours_region)));
            self.advice.push(advice);
        }
        if !priced.is_empty() {
            self.notes.push(format!(
                "the bill reserves no {}: its reservation's advice is priced at AWS's recommendation's rate ({source}), simulated over the bill's On-Demand hours of it",
                priced.join(", ")
            ));
            if self.advice.iter().any(|a| a.kind == "savings_plan" && a.provider == "aws") {
                self.notes.push(format!(
                    "the Savings Plan's advice counts the On-Demand hours of {} too: alone, each advice counts them; bought together (the together columns, which the Plan page adds up) the reservations are sized first and the Compute plan on the hours they leave",
                    priced.join(", ")
                ));
            }
        }
    }

    /// The advice bought together, one per advice (in its order). Each advice alone is sized
    /// on all the hours it could cover, so an EC2 Instance Savings Plan, a reservation and the
    /// Compute plan count the same On-Demand hours and their savings do not add up. AWS
    /// applies a bill's reservations first, then its EC2 Instance Savings Plans, then its
    /// Compute Savings Plan; bought together, each is sized (by the same lookback rule, a
    /// reservation in whole instances) on the hours those applied before it leave uncovered,
    /// from each type's [`open`](Self::open) hours. A reservation or EC2 Instance plan whose
    /// purchase at that size lowers what all of them save (it takes hours a later one would
    /// cover for more: a whole reservation half used where a plan fits the hours) is bought
    /// smaller, or left out: [`RESIZINGS`] of its size are tried, one commitment at a time,
    /// the change that saves most first, until none saves more. Each is then simulated
    /// against the forecast of the hours left to it. A FOCUS bill's advice, on other hours, is
    /// as it stands.
    pub fn together(&self) -> &[Bought] {
        self.bought.get_or_init(|| self.buy_together())
    }

    fn buy_together(&self) -> Vec<Bought> {
        let saved =
            |sized: &[engine::Advice]| -> f64 { sized.iter().map(|a| a.chosen.monthly_net_savings).sum() };
        let mut fixed: Vec<Option<f64>> = vec![None; self.advice.len()];
        let (mut sized, mut sized_on) = self.in_order(&fixed);
        // Each change saves more than the last state, so the rounds end; a bound all the same.
        for _ in 0..4 * self.advice.len() {
            type Trial = (Vec<engine::Advice>, Vec<Vec<f64>>);
            let mut better: Option<(f64, usize, f64, Trial)> = None;
            for (i, a) in self.advice.iter().enumerate() {
                let size = sized[i].chosen.hourly_commitment;
                if !matches!(stage(a), Some(0 | 1)) || size <= 0.0 {
                    continue;
                }
                let before = fixed[i];
                for smaller in a.resizings(size) {
                    fixed[i] = Some(smaller);
                    let trial = self.in_order(&fixed);
                    let total = saved(&trial.0);
                    if total > better.as_ref().map_or(saved(&sized), |b| b.0) + 1e-6 {
                        better = Some((total, i, smaller, trial));
                    }
                }
                fixed[i] = before;
            }
            let Some((_, i, smaller, trial)) = better else { break };
            fixed[i] = Some(smaller);
            (sized, sized_on) = trial;
        }
        sized
            .into_iter()
            .zip(fixed)
            .zip(sized_on.iter().zip(&self.advice))
            .map(|((bought, fixed), (hours, a))| Bought {
                forecast: if stage(a).is_none() {
                    a.forecast
                } else {
                    forecast_hours(self.first_hour, hours, self.horizon_months).map(|ahead| {
                        engine::simulate(&ahead, a.discount, bought.chosen.hourly_commitment, a.term_months)
                    })
                },
                left_out: fixed == Some(0.0),
                resized: fixed.is_some_and(|c| c > 0.0),
                advice: bought,
            })
            .collect()
    }

    /// The advice sized in AWS's order on the hours each leaves, each at the commitment
    /// `fixed` gives it or else by the lookback rule, as [`CommitmentsReport::together`]
    /// describes; with the hours each was sized on (none for another bill's).
    fn in_order(&self, fixed: &[Option<f64>]) -> (Vec<engine::Advice>, Vec<Vec<f64>>) {
        let lookbacks = (SHORT_LOOKBACK_DAYS * 24, LONG_LOOKBACK_DAYS * 24);
        let mut order: Vec<usize> = (0..self.advice.len()).collect();
        order.sort_by_key(|&i| stage(&self.advice[i]));
        let mut open = self.open.clone();
        let mut out: Vec<engine::Advice> = self.advice.iter().map(|a| a.advice).collect();
        let mut sized_on = vec![Vec::new(); self.advice.len()];
        for i in order {
            let a = &self.advice[i];
            let Some(stage) = stage(a) else { continue };
            // A reservation covers its type in its region, an EC2 Instance plan its family in
            // its region, the Compute plan every type in every region.
            let types: Vec<Place> = open
                .keys()
                .filter(|(t, r)| match stage {
                    0 => *t == a.instance_type && same_region(&a.region, r),
                    1 => family_of(t) == a.family && same_region(&a.region, r),
                    _ => true,
                })
                .cloned()
                .collect();
            let mut hours = Vec::new();
            for t in &types {
                let series = &open[t];
                hours.resize(series.len(), 0.0);
                hours.iter_mut().zip(series).for_each(|(h, x)| *h += x);
            }
            let sized = match fixed[i] {
                Some(commitment) => {
                    let long = &hours[hours.len().saturating_sub(lookbacks.1)..];
                    let at = engine::simulate(long, a.discount, commitment, a.term_months);
                    engine::Advice { short: at, long: at, chosen: at, lookback_hours: long.len() }
                }
                None => match a.instance_rate {
                    Some(rate) if a.kind == "reservation" => {
                        engine::advise_in_units(&hours, a.discount, lookbacks, a.term_months, rate)
                    }
                    _ => engine::advise(&hours, a.discount, lookbacks, a.term_months),
                },
            };
            // What it covers is taken from each type's hours in proportion to them.
            let left = engine::uncovered(&hours, a.discount, sized.chosen.hourly_commitment);
            for t in &types {
                let series = open.get_mut(t).expect("a type of the open hours");
                for ((x, all), rest) in series.iter_mut().zip(&hours).zip(&left) {
                    if *all > 0.0 {
                        *x *= rest / all;
                    }
                }
            }
            out[i] = sized;
            sized_on[i] = hours;
        }
        (out, sized_on)
    }

    pub fn to_json(&self) -> Value {
        let round = |v: f64| (v * 1e6).round() / 1e6 + 0.0;
        let time = |t: i64| {
            (t > 0)
                .then(|| DateTime::from_timestamp(t, 0))
                .flatten()
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        };
        let outcome = |o: &Outcome| {
            json!({
                "hourly_commitment": round(o.hourly_commitment),
                "hours": o.hours,
                "coverage": round(o.coverage),
                "utilization": round(o.utilization),
                "monthly_net_savings": round(o.monthly_net_savings),
                "break_even_months": o.break_even_months.map(round),
            })
        };
        let together = self.together();
        let mut together_total: BTreeMap<&str, f64> = BTreeMap::new();
        for (a, t) in self.advice.iter().zip(together) {
            *together_total.entry(a.currency.as_str()).or_default() += t.advice.chosen.monthly_net_savings;
        }
        json!({
            "history_end": self.history_end.map(|d| d.to_string()),
            "horizon_months": self.horizon_months,
            "together": together_total.iter().map(|(currency, savings)| json!({
                "currency": currency,
                "monthly_net_savings": round(*savings),
            })).collect::<Vec<_>>(),
            "current": self.current.iter().map(|c| {
                let l = &c.latest;
                json!({
                    "provider": c.provider,
                    "currency": c.currency,
                    "id": l.id,
                    "kind": l.kind,
                    "offering": l.offering,
                    "family": l.family,
                    "instance_type": l.instance_type,
                    "region": l.region,
                    "term": l.purchase_term,
                    "payment_option": l.payment_option,
                    "term_start": time(l.term_start),
                    "term_end": time(l.term_end),
                    "count": l.count,
                    "hourly_commitment": round(l.hourly_micros() / 1e6),
                    "utilization": l.utilization().map(round),
                    "ends_within_horizon": c.ends_within_horizon,
                    "months": c.months.iter().map(|(period, m)| json!({
                        "month": period,
                        "fee": round(m.fee_micros as f64 / 1e6),
                        "used": round(m.used_micros as f64 / 1e6),
                        "utilization": m.utilization().map(round),
                    })).collect::<Vec<_>>(),
                })
            }).collect::<Vec<_>>(),
            "advice": self.advice.iter().zip(together).map(|(a, t)| {
                let chosen = &a.advice.chosen;
                let mut bought = outcome(&t.advice.chosen);
                bought["count"] = a.count_of(t.advice.chosen.hourly_commitment).map(round).into();
                bought["lookback_days"] = (t.advice.lookback_hours as f64 / 24.0).into();
                bought["left_out"] = t.left_out.into();
                bought["resized"] = t.resized.into();
                bought["forecast"] = t.forecast.as_ref().map(outcome).into();
                json!({
                    "provider": a.provider,
                    "currency": a.currency,
                    "kind": a.kind,
                    "family": a.family,
                    "instance_type": a.instance_type,
                    "region": a.region,
                    "term": a.term,
                    "hourly_commitment": round(chosen.hourly_commitment),
                    "count": a.count().map(round),
                    "coverage": round(chosen.coverage),
                    "utilization": round(chosen.utilization),
                    "monthly_net_savings": round(chosen.monthly_net_savings),
                    "break_even_months": chosen.break_even_months.map(round),
                    "lookback_days": a.advice.lookback_hours as f64 / 24.0,
                    "discount": round(a.discount),
                    "discount_from": if a.priced_by_aws { "aws_recommendation" } else { "bill" },
                    "hours": chosen.hours,
                    "eligible_on_demand": round(a.eligible_on_demand),
                    "renews": a.renews,
                    "short": outcome(&a.advice.short),
                    "long": outcome(&a.advice.long),
                    "forecast": a.forecast.as_ref().map(outcome),
                    "together": bought,
                    "aws_recommendation": a.aws.as_ref().map(|aws| {
                        let mut theirs = match &aws.recommendation {
                            AwsRecommended::SavingsPlan(r) => json!({
                                "savings_plans_type": r.savings_plans_type,
                                "term": r.term,
                                "payment_option": r.payment_option,
                                "lookback_days": r.lookback_days,
                                "hourly_commitment": round(r.hourly_commitment),
                                "estimated_average_utilization": r.estimated_average_utilization.map(round),
                                "estimated_monthly_savings": r.estimated_monthly_savings.map(round),
                                "estimated_savings_percentage": r.estimated_savings_percentage.map(round),
                                "regions": r.plans.iter().filter(|p| !p.region.is_empty()).map(|p| p.region.clone()).collect::<Vec<_>>(),
                                "generated_at": r.generated_at,
                            }),
                            AwsRecommended::Reservation(r) => {
                                let sum = |f: &dyn Fn(&RecommendedReservation) -> Option<f64>| {
                                    r.details.iter().map(f).try_fold(0.0, |t, v| v.map(|v| t + v))
                                };
                                let count: f64 = r.details.iter().map(|d| d.count).sum::<f64>() + 0.0;
                                let used: Option<f64> = sum(&|d| d.average_utilization.map(|u| u * d.count));
                                json!({
                                    "term": r.term,
                                    "payment_option": r.payment_option,
                                    "lookback_days": r.lookback_days,
                                    "count": count,
                                    "hourly_commitment": round(aws.recommendation.hourly_commitment()),
                                    "estimated_average_utilization": used.filter(|_| count > 0.0).map(|u| round(u / count)),
                                    "estimated_monthly_savings": sum(&|d| d.monthly_savings).map(round),
                                    "regions": r.details.iter().map(|d| d.region.clone()).collect::<Vec<_>>(),
                                    "generated_at": r.generated_at,
                                })
                            }
                        };
                        theirs["source"] = aws.source.clone().into();
                        theirs["difference"] = round(aws.difference).into();
                        theirs["same_lookback_difference"] = aws.same_lookback_difference.map(round).into();
                        theirs["reasons"] = aws.reasons.clone().into();
                        theirs
                    }),
                })
            }).collect::<Vec<_>>(),
            "notes": self.notes,
        })
    }

    pub fn render(&self, format: OutputFormat) -> String {
        if format == OutputFormat::Json {
            return serde_json::to_string_pretty(&self.to_json()).unwrap_or_default() + "\n";
        }
        let end = self.history_end.map(|d| d.to_string()).unwrap_or_default();
        let [current, advice] = self.tables();
        let mut out = current.render(format, &end, serde_json::Map::new());
        if format == OutputFormat::Table {
            out.push('\n');
        }
        out.push_str(&advice.render(format, &end, serde_json::Map::new()));
        if format == OutputFormat::Table {
            for aws in self.advice.iter().filter_map(|a| a.aws.as_ref()) {
                for reason in &aws.reasons {
                    out.push_str(&format!("against AWS ({}): {reason}\n", aws.source));
                }
            }
            for note in &self.notes {
                out.push_str(&format!("note: {note}\n"));
            }
        }
        out
    }

    /// The commitments billed in the latest month, and the advice: as the CLI prints them and
    /// the Plan page shows them.
    pub fn tables(&self) -> [Table; 2] {
        let usd = |v: f64| Cell::Usd(Some(Nanos(nanos_from_usd(v))));
        let end = self.history_end.map(|d| d.to_string()).unwrap_or_default();
        let current = Table {
            title: format!("Savings Plans and reservations billed in the latest month (to {end})"),
            columns: CURRENT_COLUMNS.iter().copied().chain(["id"]).collect(),
            rows: self
                .current
                .iter()
                .map(|c| {
                    let l = &c.latest;
                    vec![
                        Cell::Text(c.provider.clone()),
                        Cell::Text(l.kind.clone()),
                        Cell::Text(l.family.clone()),
                        Cell::Text(l.instance_type.clone()),
                        Cell::Text(l.region.clone()),
                        Cell::Text(l.purchase_term.clone()),
                        Cell::Text(
                            (l.term_end > 0)
                                .then(|| DateTime::from_timestamp(l.term_end, 0))
                                .flatten()
                                .map(|t| t.date_naive().to_string())
                                .unwrap_or_default(),
                        ),
                        if l.count > 0 { Cell::Count(l.count as f64) } else { Cell::Text(String::new()) },
                        if c.currency == "USD" {
                            usd(l.hourly_micros() / 1e6)
                        } else {
                            Cell::Decimal(format!("{:.6}", l.hourly_micros() / 1e6))
                        },
                        Cell::Text(c.currency.clone()),
                        Cell::Ratio(l.utilization()),
                        Cell::Flag(c.ends_within_horizon),
                        Cell::Text(l.id.clone()),
                    ]
                })
                .collect(),
            totals: Vec::new(),
        };
        let advice = Table {
            title: format!(
                "What to buy: the lower of the best commitments over {SHORT_LOOKBACK_DAYS} and {LONG_LOOKBACK_DAYS} days, simulated hour by hour; together: each sized on the hours left by those AWS applies before it (reservations, then EC2 Instance Savings Plans, then the Compute plan)"
            ),
            columns: vec![
                "provider",
                "kind",
                "family",
                "instance_type",
                "region",
                "term",
                "hourly_commitment",
                "currency",
                "count",
                "coverage",
                "utilization",
                "monthly_net_savings",
                "break_even_months",
                "lookback_days",
                "forecast_utilization",
                "forecast_monthly_net_savings",
                "aws_hourly_commitment",
                "together_hourly_commitment",
                "together_count",
                "together_utilization",
                "together_monthly_net_savings",
                "together_left_out",
                "together_resized",
                "together_forecast_monthly_net_savings",
            ],
            rows: self
                .advice
                .iter()
                .zip(self.together())
                .map(|(a, t)| {
                    let c = &a.advice.chosen;
                    // Money in the bill's currency: dollars as dollars, another as a decimal.
                    let money =
                        |v: f64| if a.currency == "USD" { usd(v) } else { Cell::Decimal(format!("{v:.6}")) };
                    vec![
                        Cell::Text(a.provider.clone()),
                        Cell::Text(a.kind.to_string()),
                        Cell::Text(a.family.clone()),
                        Cell::Text(a.instance_type.clone()),
                        Cell::Text(a.region.clone()),
                        Cell::Text(a.term.clone()),
                        money(c.hourly_commitment),
                        Cell::Text(a.currency.clone()),
                        a.count().map_or(Cell::Text(String::new()), Cell::Hours),
                        Cell::Ratio(Some(c.coverage)),
                        Cell::Ratio(Some(c.utilization)),
                        money(c.monthly_net_savings),
                        c.break_even_months.map_or(Cell::Text(String::new()), Cell::Hours),
                        Cell::Count(a.advice.lookback_hours as f64 / 24.0),
                        Cell::Ratio(a.forecast.map(|f| f.utilization)),
                        a.forecast.map_or(Cell::Text(String::new()), |f| money(f.monthly_net_savings)),
                        a.aws.as_ref().map_or(Cell::Text(String::new()), |aws| {
                            usd(aws.recommendation.hourly_commitment())
                        }),
                        money(t.advice.chosen.hourly_commitment),
                        a.count_of(t.advice.chosen.hourly_commitment)
                            .map_or(Cell::Text(String::new()), Cell::Hours),
                        Cell::Ratio(Some(t.advice.chosen.utilization)),
                        money(t.advice.chosen.monthly_net_savings),
                        Cell::Flag(t.left_out),
                        Cell::Flag(t.resized),
                        t.forecast.map_or(Cell::Text(String::new()), |f| money(f.monthly_net_savings)),
                    ]
                })
                .collect(),
            totals: Vec::new(),
        };
        [current, advice]
    }
}

/// gpuledger's advice against one of AWS's recommendations, and the reasons they differ:
/// gpuledger's lower of two lookbacks, its renewals, and over AWS's own lookback of
/// On-Demand usage gpuledger's best against AWS's (`pricing` says what each prices).
fn comparison(
    advice: &Advice,
    recommendation: AwsRecommended,
    source: String,
    history_end: Option<NaiveDate>,
    pricing: &str,
) -> AwsComparison {
    let aws = recommendation.hourly_commitment();
    let days = recommendation.lookback_days();
    let ours = advice.advice.chosen.hourly_commitment;
    let lookback = days as usize * 24;
    // gpuledger's best over AWS's lookback, from what AWS recommends from: the On-Demand
    // hours without the renewals.
    let same = if advice.on_demand_only.is_empty() {
        [&advice.advice.short, &advice.advice.long]
            .into_iter()
            .find(|o| o.hours == lookback)
            .map(|o| o.hourly_commitment)
    } else {
        let hours = &advice.on_demand_only;
        let tail = &hours[hours.len().saturating_sub(lookback)..];
        Some(engine::best(tail, advice.discount, advice.term_months).hourly_commitment)
    };
    let mut reasons = Vec::new();
    // What AWS recommends of the advice's EC2 Instance plan family or reserved type in its
    // region (every region's, for hours stored without theirs), region by region.
    let per_region: Option<(String, Vec<String>)> = match &recommendation {
        AwsRecommended::SavingsPlan(r) if r.savings_plans_type == "EC2_INSTANCE_SP" => Some((
            format!("no EC2 Instance Savings Plan of {}{}", advice.family, in_region(&advice.region)),
            r.plans.iter().map(|p| format!("${:.3} in {}", p.hourly_commitment, p.region)).collect(),
        )),
        AwsRecommended::Reservation(r) => Some((
            format!("no {} reservation{}", advice.instance_type, in_region(&advice.region)),
            r.details.iter().map(|d| format!("{} in {}", d.count, d.region)).collect(),
        )),
        AwsRecommended::SavingsPlan(_) => None,
    };
    if let Some((none, each)) = per_region {
        if each.is_empty() {
            reasons
                .push(format!("AWS recommends {none}: none ran On-Demand enough of its {days} days to save"));
        }
        if each.len() > 1 {
            reasons.push(format!(
                "AWS recommends them per region ({}); these instance-hours were stored without their region (before migration 0042), so gpuledger simulates the hours of all its regions together, which can buy less where the regions' busy hours differ",
                each.join(", ")
            ));
        }
    }
    if advice.advice.lookback_hours == advice.advice.short.hours
        && advice.advice.short.hours < advice.advice.long.hours
    {
        reasons.push(format!(
            "gpuledger takes the lower of its {SHORT_LOOKBACK_DAYS}- and {LONG_LOOKBACK_DAYS}-day best commitments: the last {SHORT_LOOKBACK_DAYS} days' (${:.3}) is below the {LONG_LOOKBACK_DAYS} days' (${:.3}), so it does not commit to usage that has fallen; AWS recommends from its {days} days alone",
            advice.advice.short.hourly_commitment, advice.advice.long.hourly_commitment
        ));
    }
    if !advice.renews.is_empty() {
        reasons.push(format!(
            "gpuledger's includes renewing {} (ending within the horizon): the usage it covers is counted as On-Demand; AWS recommends for On-Demand usage only, on top of the commitments in force",
            advice.renews.join(", ")
        ));
    }
    match same {
        Some(best) if (best - aws).abs() <= 0.01 => reasons.push(format!(
            "over the same {days} days of On-Demand usage gpuledger's best commitment (${best:.3}) is AWS's to within a cent an hour"
        )),
        Some(best) => reasons.push(format!(
            "over the same {days} days of On-Demand usage the best commitments differ by ${:.3} an hour: {pricing}; gpuledger applies a discount of {:.2} % to the EC2 instance-hours it holds",
            best - aws,
            advice.discount * 100.0
        )),
        None => reasons.push(format!(
            "AWS looked back {days} days; gpuledger over {SHORT_LOOKBACK_DAYS} and {LONG_LOOKBACK_DAYS}"
        )),
    }
    let generated = recommendation.generated_at().get(..10).unwrap_or_default();
    if let Some(end) = history_end.map(|d| (d + chrono::Days::new(1)).to_string()) {
        if !generated.is_empty() && generated != end {
            reasons.push(format!(
                "AWS's answer was made on {generated}; the stored bill's hours end on {end}: different days are looked back over"
            ));
        }
    }
    AwsComparison {
        difference: ours - aws,
        same_lookback_difference: same.map(|best| best - aws),
        recommendation,
        source,
        reasons,
    }
}

/// Where AWS applies an advice's commitment: its reservations first (0), then its EC2
/// Instance Savings Plans (1), then its Compute Savings Plan (2); none for another bill's.
fn stage(a: &Advice) -> Option<u8> {
    match (a.provider.as_str(), a.kind, a.family.as_str()) {
        ("aws", "reservation", _) => Some(0),
        ("aws", "savings_plan", "Compute") => Some(2),
        ("aws", "savings_plan", _) => Some(1),
        _ => None,
    }
}

/// ` in <region>`, or nothing when the region is not known.
fn in_region(region: &str) -> String {
    if region.is_empty() { String::new() } else { format!(" in {region}") }
}

/// An EC2 instance type's family: `g6e` of `g6e.12xlarge`.
fn family_of(instance_type: &str) -> String {
    instance_type.split('.').next().unwrap_or("").to_string()
}

/// The kind of a FOCUS charge's commitment, from its CommitmentDiscountType (in the
/// provider's words: Azure's `Reservation`, Google's `Committed Use Discount`, AWS's `Savings
/// Plan`), else, for a bill ingested before the type was kept, from its provider.
fn focus_kind(c: &BillCharge) -> &'static str {
    let named = c.commitment_discount_type.to_ascii_lowercase();
    if named.contains("reserv") {
        "reservation"
    } else if named.contains("committed use") {
        "committed_use_discount"
    } else if named.contains("savings plan") {
        "savings_plan"
    } else if !named.is_empty() {
        "commitment"
    } else {
        match c.provider.as_str() {
            "azure" => "reservation",
            "gcp" => "committed_use_discount",
            _ => "commitment",
        }
    }
}

/// Why the advice for a FOCUS bill's commitment buys nothing more: no On-Demand hour in the
/// long lookback, or too few of them for any commitment to save (it saves only while more
/// than 1 − discount of the hours use it whole).
fn nothing_to_buy((provider, kind, family): (&str, &str, &str), advice: &Advice, eligible: &[f64]) -> String {
    let long = &eligible[eligible.len().saturating_sub(advice.advice.long.hours)..];
    let busy = long.iter().filter(|x| **x > 0.0).count();
    if busy == 0 {
        return format!(
            "{provider}'s {kind} on {family}: no On-Demand hour of its machines in the last {} hours: nothing more to buy",
            long.len()
        );
    }
    format!(
        "{provider}'s {kind} on {family}: On-Demand machines ran in {busy} of the last {} hours ({:.1} %), fewer than the {:.1} % a commitment {:.1} % off needs to save anything: nothing more to buy",
        long.len(),
        busy as f64 * 100.0 / long.len().max(1) as f64,
        (1.0 - advice.discount) * 100.0,
        advice.discount * 100.0
    )
}

/// Whether any advice is of `provider`'s.
fn covered_any(advice: &[Advice], provider: &str) -> bool {
    advice.iter().any(|a| a.provider == provider)
}

impl Advice {
    /// The smaller commitments bought together tries in place of `size` ([`RESIZINGS`] of
    /// it; a reservation's in whole instances, one instance fewer among them), smallest
    /// first.
    fn resizings(&self, size: f64) -> Vec<f64> {
        let mut sizes: Vec<f64> = match self.instance_rate.filter(|r| *r > 0.0 && self.kind == "reservation")
        {
            Some(rate) => {
                let count = (size / rate).round();
                RESIZINGS
                    .iter()
                    .map(|f| (count * f).floor())
                    .chain([count - 1.0])
                    .filter(|n| *n >= 0.0 && *n < count)
                    .map(|n| n * rate)
                    .collect()
            }
            None => RESIZINGS.iter().map(|f| size * f).collect(),
        };
        sizes.sort_by(f64::total_cmp);
        sizes.dedup();
        sizes
    }

    /// Reserved instances the commitment buys (a reservation's commitment ÷ one instance's
    /// rate).
    pub fn count(&self) -> Option<f64> {
        self.count_of(self.advice.chosen.hourly_commitment)
    }

    /// Reserved instances an hourly commitment of the advice's kind buys.
    fn count_of(&self, hourly_commitment: f64) -> Option<f64> {
        self.instance_rate.filter(|r| *r > 0.0).map(|rate| hourly_commitment / rate)
    }
}

/// The advice for one kind and family: the lower of the two lookbacks' best commitments,
/// simulated over the long one and over the forecast.
fn advise(
    (kind, family, instance_type): (&'static str, &str, &str),
    term: String,
    discount: f64,
    eligible: &[f64],
    first: i64,
    lookbacks: (usize, usize),
    (months, renews, instance_rate): (u32, Vec<String>, Option<f64>),
) -> Advice {
    let term = if term.is_empty() { "1yr".to_string() } else { term };
    let term_months = term_months(&term);
    // A reservation is of whole instances; a plan's or a committed use discount's commitment
    // is any amount an hour.
    let advice = match instance_rate {
        Some(rate) if kind == "reservation" => {
            engine::advise_in_units(eligible, discount, lookbacks, term_months, rate)
        }
        _ => engine::advise(eligible, discount, lookbacks, term_months),
    };
    let long = &eligible[eligible.len().saturating_sub(lookbacks.1)..];
    let forecast = forecast_hours(first, eligible, months)
        .map(|ahead| engine::simulate(&ahead, discount, advice.chosen.hourly_commitment, term_months));
    Advice {
        provider: "aws".into(),
        currency: "USD".into(),
        kind,
        family: family.to_string(),
        instance_type: instance_type.to_string(),
        region: String::new(),
        term,
        discount,
        eligible_on_demand: long.iter().sum(),
        renews,
        advice,
        instance_rate,
        forecast,
        aws: None,
        term_months,
        on_demand_only: Vec::new(),
        priced_by_aws: false,
    }
}

/// The eligible usage's hours over the horizon: each whole day's total forecast
/// ([`forecast::forecast_series`]) spread over its hours by the last [`SHAPE_WEEKS`] weeks'
/// shape of its weekday; none with too little history or a history not starting at midnight.
fn forecast_hours(first: i64, eligible: &[f64], months: u32) -> Option<Vec<f64>> {
    if first.rem_euclid(86_400) != 0 {
        return None;
    }
    let days: Vec<f64> = eligible.chunks_exact(24).map(|day| day.iter().sum()).collect();
    let first_day = DateTime::from_timestamp(first, 0)?.date_naive();
    let series = forecast::forecast_series(first_day, &days, months).ok()?;
    // Each weekday's share of its day at each hour, over the last weeks.
    let mut shape = [[0.0f64; 24]; 7];
    let recent = days.len().saturating_sub(SHAPE_WEEKS * 7);
    for (day, hours) in eligible.chunks_exact(24).enumerate().skip(recent) {
        let weekday = (first_day + chrono::Days::new(day as u64)).weekday().num_days_from_monday() as usize;
        for (hour, value) in hours.iter().enumerate() {
            shape[weekday][hour] += value;
        }
    }
    for weekday in &mut shape {
        let total: f64 = weekday.iter().sum();
        weekday.iter_mut().for_each(|v| *v = if total > 0.0 { *v / total } else { 1.0 / 24.0 });
    }
    let next = first_day + chrono::Days::new(days.len() as u64);
    Some(
        series
            .days
            .iter()
            .enumerate()
            .flat_map(|(i, point)| {
                let weekday = (next + chrono::Days::new(i as u64)).weekday().num_days_from_monday() as usize;
                shape[weekday].map(|share| point.value.max(0.0) * share)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hour(hour: i64, instance_type: &str, option: PurchaseOption, od: f64, amortized: f64) -> UsageHour {
        UsageHour {
            hour,
            instance_type: instance_type.into(),
            region: "us-east-1".into(),
            purchase_option: option,
            usage_hours: 1.0,
            amortized_cost_micros: (amortized * 1e6) as i64,
            public_on_demand_cost_micros: (od * 1e6) as i64,
        }
    }

    /// A machine's charge period of a FOCUS bill: `hours` hours from `start`, at `list` and
    /// `effective` a ran hour.
    fn period(
        instance: &str,
        start: i64,
        hours: i64,
        ran: f64,
        (status, pricing): (&str, &str),
        list: f64,
        effective: f64,
    ) -> FocusUsage {
        FocusUsage {
            provider: "azure".into(),
            billing_account: "a".into(),
            instance: instance.into(),
            instance_type: "T".into(),
            gpu_model: "H100".into(),
            pricing_category: pricing.into(),
            commitment_status: status.into(),
            start,
            end: start + hours * 3600,
            ran_hours: ran,
            list_nanos: (list * ran * 1e9).round() as i64,
            effective_nanos: (effective * ran * 1e9).round() as i64,
        }
    }

    #[test]
    fn a_focus_bills_machines_give_the_hours_a_further_commitment_could_cover() {
        const USED: (&str, &str) = ("Used", "Committed");
        const ON_DEMAND: (&str, &str) = ("", "Standard");
        // One day. A reserved machine ran 20 of its 24 hours (a daily row, as Azure bills):
        // 3.9838 a ran hour. Another ran On-Demand 8:00-20:00 billed by the hour, a third
        // On-Demand all day in one daily row, both at 6.4254 a list hour; a Spot one is not
        // eligible.
        let mut rows = vec![
            period("r", 0, 24, 20.0, USED, 6.4254, 3.9838),
            period("d", 0, 24, 24.0, ON_DEMAND, 6.4254, 6.4254),
            period("s", 0, 24, 24.0, ("", "Dynamic"), 6.4254, 1.2),
        ];
        rows.extend((8..20).map(|h| period("h", h * 3600, 1, 1.0, ON_DEMAND, 6.4254, 6.4254)));
        let refs: Vec<&FocusUsage> = rows.iter().collect();
        let hours = FocusHours::new(&refs, ("T", "H100"));
        assert_eq!((hours.first, hours.eligible.len(), hours.daily), (0, 24, true));
        // The daily row's 24 × 6.4254 spread over its hours, and the hourly rows where they ran.
        assert!((hours.eligible[0] - 6.4254).abs() < 1e-9 && (hours.eligible[7] - 6.4254).abs() < 1e-9);
        assert!(
            (hours.eligible[8] - 2.0 * 6.4254).abs() < 1e-9
                && (hours.eligible[19] - 2.0 * 6.4254).abs() < 1e-9
        );
        assert!((hours.eligible.iter().sum::<f64>() - 36.0 * 6.4254).abs() < 1e-9);
        // The reservation's rate: 20 × 3.9838 over the 20 hours it ran.
        assert!((hours.committed_rate.unwrap() - 3.9838).abs() < 1e-9);
        assert!(FocusHours::new(&refs, ("T", "")).eligible.iter().all(|h| *h == 0.0));
    }

    #[test]
    fn hour_by_hour_a_working_day_machine_is_not_worth_committing_to_spread_over_its_day_it_is() {
        // 30 days of one machine On-Demand 8:00-20:00 at $1 a list hour, at 40 % off: half the
        // hours use a commitment whole, and it pays only where more than 60 % do, so buy none.
        // Billed as daily rows of 12 hours, each hour looks like half a machine, every hour:
        // the best commitment is half a machine at the discounted rate, 0.5 × 0.6 = $0.30.
        let hourly: Vec<FocusUsage> = (0..30)
            .flat_map(|day| (8..20).map(move |h| (day, h)))
            .map(|(day, h)| period("m", day * 86_400 + h * 3600, 1, 1.0, ("", "Standard"), 1.0, 1.0))
            .collect();
        let daily: Vec<FocusUsage> =
            (0..30).map(|day| period("m", day * 86_400, 24, 12.0, ("", "Standard"), 1.0, 1.0)).collect();
        let best = |rows: &[FocusUsage]| {
            let refs: Vec<&FocusUsage> = rows.iter().collect();
            let hours = FocusHours::new(&refs, ("T", "H100"));
            engine::best(&hours.eligible, 0.4, 12).hourly_commitment
        };
        assert_eq!(best(&hourly), 0.0);
        assert!((best(&daily) - 0.3).abs() < 1e-9, "{}", best(&daily));
        // Running 20 hours a day (83 % of the hours), a whole machine is worth it: 1 × 0.6.
        let long_days: Vec<FocusUsage> = (0..30)
            .flat_map(|day| (0..20).map(move |h| (day, h)))
            .map(|(day, h)| period("m", day * 86_400 + h * 3600, 1, 1.0, ("", "Standard"), 1.0, 1.0))
            .collect();
        assert!((best(&long_days) - 0.6).abs() < 1e-9);
    }

    #[test]
    fn the_discount_and_eligible_hours_come_from_the_bills_instance_hours() {
        // Two hours: a plan covers $10 of m5 on demand for $7.10 each hour; $4 then $0 more
        // of m5 run On-Demand; a g5 reserved ($5.672 on demand for $3.5166) both hours.
        let rows = [
            hour(0, "m5.4xlarge", PurchaseOption::SavingsPlans, 10.0, 7.1),
            hour(0, "m5.4xlarge", PurchaseOption::OnDemand, 4.0, 4.0),
            hour(0, "g5.12xlarge", PurchaseOption::Reserved, 5.672, 3.5166),
            hour(3600, "m5.4xlarge", PurchaseOption::SavingsPlans, 10.0, 7.1),
            hour(3600, "g5.12xlarge", PurchaseOption::Reserved, 5.672, 3.5166),
        ];
        let hours = Hours::new(&rows);
        let plan = hours.discount(|_, _, o| o == PurchaseOption::SavingsPlans).unwrap();
        assert!((plan - 0.29).abs() < 1e-9, "{plan}");
        let reserved = hours.discount(|t, _, o| t == "g5.12xlarge" && o == PurchaseOption::Reserved).unwrap();
        // 3.5166 is 62 % of 5.672 rounded to four places, as the bill's rate is.
        assert!(
            (reserved - (1.0 - 3.5166 / 5.672)).abs() < 1e-12 && (reserved - 0.38).abs() < 1e-5,
            "{reserved}"
        );
        // On-Demand only, then with half the plan ending: its covered usage counts by half.
        assert_eq!(hours.eligible(|_, _, o| f64::from(o == PurchaseOption::OnDemand)), vec![4.0, 0.0]);
        let renewing = hours.eligible(|_, _, o| match o {
            PurchaseOption::OnDemand => 1.0,
            PurchaseOption::SavingsPlans => 0.5,
            _ => 0.0,
        });
        assert_eq!(renewing, vec![9.0, 5.0]);
        assert_eq!(hours.on_demand_rate(&("g5.12xlarge".into(), "us-east-1".into())), Some(5.672));
    }

    /// `hours` hours of: $10 of c5 under the Compute plan for $7 (30 % off), an m5 reserved
    /// ($1 On-Demand for $0.60, 40 % off), another m5 On-Demand ($1) and a t3 On-Demand ($0.50).
    fn reserved_m5_beside_a_plan(hours: i64) -> Vec<UsageHour> {
        every_hour(
            hours,
            &[
                ("c5.xlarge", PurchaseOption::SavingsPlans, 10.0, 7.0),
                ("m5.large", PurchaseOption::Reserved, 1.0, 0.6),
                ("m5.large", PurchaseOption::OnDemand, 1.0, 1.0),
                ("t3.large", PurchaseOption::OnDemand, 0.5, 0.5),
            ],
        )
    }

    /// `hours` hours of the same instance-hours: (type, purchase option, On-Demand, amortized).
    fn every_hour(hours: i64, each: &[(&str, PurchaseOption, f64, f64)]) -> Vec<UsageHour> {
        (0..hours)
            .flat_map(|h| {
                each.iter().map(move |&(t, option, od, amortized)| hour(h * 3600, t, option, od, amortized))
            })
            .collect()
    }

    #[test]
    fn bought_together_the_compute_plan_is_sized_on_the_hours_the_reservation_leaves() {
        // Two days, every hour: a Compute plan covers $10 of c5 for $7 (30 % off); one m5 is
        // reserved ($1 On-Demand for $0.60, 40 % off) and another runs On-Demand ($1); a t3
        // runs On-Demand ($0.50).
        let rows = reserved_m5_beside_a_plan(48);
        let report = CommitmentsReport::build(&[], &rows, 1);
        let [plan, reservation] = &report.advice[..] else { panic!("{:?}", report.advice) };
        assert_eq!((plan.family.as_str(), reservation.instance_type.as_str()), ("Compute", "m5.large"));
        // Alone, each counts the m5 On-Demand hour: the plan covers its $1 and the t3's $0.50
        // ($1.05 an hour, 0.45 saved), the reservation one m5 ($0.60, 0.40 saved).
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(near(plan.advice.chosen.hourly_commitment, 1.05), "{plan:?}");
        assert!(near(plan.advice.chosen.monthly_net_savings, 0.45 * 730.0));
        assert!(near(reservation.advice.chosen.hourly_commitment, 0.6), "{reservation:?}");
        assert!(near(reservation.advice.chosen.monthly_net_savings, 0.4 * 730.0));
        // Together, the reservation (applied first) takes the m5 hour and the plan is sized on
        // the t3's $0.50: $0.35 an hour, 0.15 saved. 0.55 a month-hour, not 0.85.
        let together: Vec<engine::Advice> = report.together().iter().map(|b| b.advice).collect();
        let [plan_together, reservation_together] = &together[..] else { panic!() };
        assert_eq!(reservation_together.chosen, reservation.advice.chosen);
        assert!(near(plan_together.chosen.hourly_commitment, 0.35), "{plan_together:?}");
        assert!(near(plan_together.chosen.utilization, 1.0));
        assert!(near(plan_together.chosen.monthly_net_savings, 0.15 * 730.0));
        let json = report.to_json();
        assert!(near(json["together"][0]["monthly_net_savings"].as_f64().unwrap(), 401.5), "{json}");
        assert_eq!(json["advice"][1]["together"]["count"], 1.0);
    }

    #[test]
    fn bought_together_a_reservation_that_lowers_the_savings_is_left_out() {
        // Two days: the Compute plan 30 % off (c5), an m5 reserved at only 20 % off ($1 for
        // $0.80) and another m5 On-Demand. Alone: one more reserved m5 saves 0.20 an hour, the
        // plan over the m5's $1 ($0.70) 0.30. In AWS's order the reservation would take the
        // hour and leave the plan nothing (0.20 in all): left out, the plan saves 0.30.
        let rows = every_hour(
            48,
            &[
                ("c5.xlarge", PurchaseOption::SavingsPlans, 10.0, 7.0),
                ("m5.large", PurchaseOption::Reserved, 1.0, 0.8),
                ("m5.large", PurchaseOption::OnDemand, 1.0, 1.0),
            ],
        );
        let report = CommitmentsReport::build(&[], &rows, 1);
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let [plan, reservation] = &report.advice[..] else { panic!("{:?}", report.advice) };
        assert!(near(reservation.advice.chosen.monthly_net_savings, 0.2 * 730.0), "{reservation:?}");
        assert!(near(plan.advice.chosen.monthly_net_savings, 0.3 * 730.0), "{plan:?}");
        let [plan_together, reservation_together] = report.together() else { panic!() };
        assert!(reservation_together.left_out && !plan_together.left_out);
        assert_eq!(reservation_together.advice.chosen.hourly_commitment, 0.0);
        assert_eq!(plan_together.advice.chosen, plan.advice.chosen);
    }

    #[test]
    fn bought_together_a_reservation_that_takes_hours_the_plan_fits_is_bought_smaller() {
        // 50 hours in five cycles of ten: one m5 reserved ($1 On-Demand for $0.60, 40 % off),
        // one m5 On-Demand every hour, a second m5 On-Demand the first seven hours of each
        // ten and a c5 On-Demand the other three; the Compute plan 30 % off.
        let mut rows = Vec::new();
        for h in 0..50 {
            rows.push(hour(h * 3600, "c5.xlarge", PurchaseOption::SavingsPlans, 10.0, 7.0));
            rows.push(hour(h * 3600, "m5.large", PurchaseOption::Reserved, 1.0, 0.6));
            let second = if h % 10 < 7 { "m5.large" } else { "c5.xlarge" };
            rows.push(hour(h * 3600, "m5.large", PurchaseOption::OnDemand, 1.0, 1.0));
            rows.push(hour(h * 3600, second, PurchaseOption::OnDemand, 1.0, 1.0));
        }
        let report = CommitmentsReport::build(&[], &rows, 1);
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let [plan, reservation] = &report.advice[..] else { panic!("{:?}", report.advice) };
        // Alone: two m5s reserved (the second used 70 % of the hours: 0.40 + 0.10 saved an
        // hour); the plan over the $2 every hour ($1.40, 0.60 saved).
        assert!(near(reservation.count().unwrap(), 2.0), "{reservation:?}");
        assert!(near(reservation.advice.chosen.monthly_net_savings, 0.5 * 730.0));
        assert!(near(plan.advice.chosen.hourly_commitment, 1.4), "{plan:?}");
        // In AWS's order the two m5s leave the plan the c5's three hours in ten, too few to
        // save (0.50 in all); without the reservation the plan saves 0.60; with one m5
        // reserved (0.40) the plan fits the $1 the second m5 and the c5 make every hour
        // ($0.70, 0.30 saved): 0.70 an hour, $511 a month.
        let [plan_together, reservation_together] = report.together() else { panic!() };
        assert!(reservation_together.resized && !reservation_together.left_out);
        assert!(near(
            reservation.count_of(reservation_together.advice.chosen.hourly_commitment).unwrap(),
            1.0
        ));
        assert!(near(plan_together.advice.chosen.hourly_commitment, 0.7), "{plan_together:?}");
        assert!(near(plan_together.advice.chosen.utilization, 1.0));
        let json = report.to_json();
        assert!(near(json["together"][0]["monthly_net_savings"].as_f64().unwrap(), 511.0), "{json}");
        assert_eq!(json["advice"][1]["together"]["resized"], true);
    }

    #[test]
    fn a_reservation_is_sized_on_its_own_regions_hours() {
        // Two days, every hour: one m5 reserved in us-east-1 ($1 On-Demand for $0.60, 40 %
        // off) and another On-Demand there, a third On-Demand in us-west-2; the Compute plan
        // 30 % off (c5).
        let mut rows = every_hour(
            48,
            &[
                ("c5.xlarge", PurchaseOption::SavingsPlans, 10.0, 7.0),
                ("m5.large", PurchaseOption::Reserved, 1.0, 0.6),
                ("m5.large", PurchaseOption::OnDemand, 1.0, 1.0),
                ("m5.large", PurchaseOption::OnDemand, 1.0, 1.0),
            ],
        );
        rows.iter_mut().skip(3).step_by(4).for_each(|row| row.region = "us-west-2".into());
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let report = CommitmentsReport::build(&[], &rows, 1);
        let [plan, reservation] = &report.advice[..] else { panic!("{:?}", report.advice) };
        assert_eq!((plan.region.as_str(), reservation.region.as_str()), ("", "us-east-1"));
        // The reservation covers the one On-Demand m5 of its region: 1 instance, 0.40 saved.
        assert!(near(reservation.count().unwrap(), 1.0), "{reservation:?}");
        assert!(near(reservation.advice.chosen.monthly_net_savings, 0.4 * 730.0));
        // The plan covers both regions' On-Demand m5s: $1.40 an hour, 0.60 saved.
        assert!(near(plan.advice.chosen.hourly_commitment, 1.4), "{plan:?}");
        // Together the reservation takes the east m5, the plan the west one ($0.70, 0.30
        // saved): 0.70 an hour, $511 a month.
        let together = report.to_json();
        assert!(near(together["together"][0]["monthly_net_savings"].as_f64().unwrap(), 511.0), "{together}");
        assert!(near(together["advice"][0]["together"]["hourly_commitment"].as_f64().unwrap(), 0.7));
        assert_eq!(together["advice"][1]["region"], "us-east-1");
        assert!(!report.notes.iter().any(|n| n.contains("migration 0042")), "{:?}", report.notes);
        // Hours stored without their region count both m5s for the reservation (2
        // instances), and the report says why.
        rows.iter_mut().for_each(|row| row.region.clear());
        let before = CommitmentsReport::build(&[], &rows, 1);
        let reservation = &before.advice[1];
        assert!(near(reservation.count().unwrap(), 2.0), "{reservation:?}");
        assert!(before.notes.iter().any(|n| n.contains("migration 0042")), "{:?}", before.notes);
    }

    #[test]
    fn bought_together_each_is_simulated_against_the_forecast_of_the_hours_left_to_it() {
        // 35 flat days (enough to forecast): the first test's m5 reserved at 40 % off, an m5
        // and a t3 On-Demand, the Compute plan 30 % off. Alone, the plan against the forecast
        // buys $1.05 of the m5 and t3 (0.45 saved an hour); together, the reservation first,
        // the plan is left the t3's $0.50 ($0.35, 0.15 saved) in the forecast as in the history.
        let rows = reserved_m5_beside_a_plan(35 * 24);
        let report = CommitmentsReport::build(&[], &rows, 1);
        let [plan, reservation] = &report.advice[..] else { panic!("{:?}", report.advice) };
        let near = |a: f64, b: f64| (a - b).abs() < 1e-3;
        let alone = plan.forecast.expect("35 days are enough to forecast");
        assert!(near(alone.monthly_net_savings, 0.45 * 730.0), "{alone:?}");
        let [plan_together, reservation_together] = report.together() else { panic!() };
        let ahead = plan_together.forecast.expect("a forecast of the hours left");
        assert!(near(plan_together.advice.chosen.hourly_commitment, 0.35), "{plan_together:?}");
        assert!(near(ahead.monthly_net_savings, 0.15 * 730.0) && near(ahead.utilization, 1.0), "{ahead:?}");
        let reserved = reservation_together.forecast.expect("a forecast of the m5's hours");
        assert!(near(reserved.monthly_net_savings, reservation.forecast.unwrap().monthly_net_savings));
        assert!(near(
            report.to_json()["advice"][0]["together"]["forecast"]["monthly_net_savings"].as_f64().unwrap(),
            109.5
        ));
    }

    #[test]
    fn a_commitment_ending_within_the_horizon_is_renewed_in_the_advice() {
        // 35 days of one g5 reserved all day (a month of history is what the forecast needs),
        // its reservation ending 20 days after the history: the advice renews it, one
        // instance, fully used.
        let day = 86_400;
        let rows: Vec<UsageHour> = (0..35 * 24)
            .map(|h| hour(h * 3600, "g5.12xlarge", PurchaseOption::Reserved, 5.672, 3.5166))
            .collect();
        let history_end = 35 * day;
        let commitment = CommitmentMonth {
            id: "ri-1".into(),
            kind: "reservation".into(),
            offering: "Reserved".into(),
            family: "g5".into(),
            instance_type: "g5.12xlarge".into(),
            purchase_term: "1yr".into(),
            term_start: history_end - 345 * day,
            term_end: history_end + 20 * day,
            count: 1,
            hours: 744.0,
            fee_micros: 2_616_350_400,
            used_micros: 2_616_350_400,
            ..CommitmentMonth::default()
        };
        let report = CommitmentsReport::build(&[("1970-02".into(), commitment)], &rows, 1);
        assert_eq!(report.history_end, NaiveDate::from_ymd_opt(1970, 2, 4));
        assert!(report.current[0].ends_within_horizon);
        assert_eq!(report.current[0].latest.hourly_micros(), 3_516_600.0);
        let advice = &report.advice[0];
        assert_eq!(
            (advice.kind, advice.family.as_str(), advice.renews.clone()),
            ("reservation", "g5", vec!["ri-1".to_string()])
        );
        assert!((advice.advice.chosen.hourly_commitment - 3.5166).abs() < 1e-9);
        assert!((advice.count().unwrap() - 1.0).abs() < 1e-9);
        assert!((advice.advice.chosen.utilization - 1.0).abs() < 1e-9);
        // 5.672 − 3.5166 saved each of 730 hours a month.
        assert!((advice.advice.chosen.monthly_net_savings - 2.1554 * 730.0).abs() < 1e-6);
        assert_eq!(advice.advice.lookback_hours, LONG_LOOKBACK_DAYS * 24);
        // The forecast of a flat history is flat: the same instance, fully used.
        let ahead = advice.forecast.expect("35 days are enough to forecast");
        assert!((ahead.utilization - 1.0).abs() < 1e-6, "{ahead:?}");
        // Alone in the report, bought together it is the same, against the forecast too.
        let [bought] = report.together() else { panic!() };
        assert_eq!((bought.advice.chosen, bought.forecast), (advice.advice.chosen, advice.forecast));
    }
}
