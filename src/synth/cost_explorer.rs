//! What AWS Cost Explorer would answer for the generated world: `GetCostAndUsage` at DAILY
//! granularity grouped by SERVICE and LINKED_ACCOUNT, written to `cost-explorer.json` in
//! Cost Explorer's own response shape (what `aws ce get-cost-and-usage` prints, and what a
//! test seeds into moto).
//!
//! The CUR months are tallied from the very lines written to the CUR, each line's amortized
//! cost by the CID rule of its line type (CUR reference §2.3), EKS split rows left out (AWS
//! bills the parent instance line). Months before the first CUR month (the export did not
//! exist yet) are the first month's daily cost per service scaled down, a fleet that grew.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

use super::cur_file::CurRow;
use crate::period::Period;

/// Cost Explorer's service name for a CUR line.
fn service(row: &CurRow<'_>) -> &'static str {
    if row.line_item_line_item_type == "Tax" {
        return "Tax";
    }
    match row.line_item_product_code {
        "AmazonEC2" => {
            let instance = row.product_product_family.contains("Compute Instance")
                || matches!(
                    row.line_item_line_item_type,
                    "RIFee"
                        | "DiscountedUsage"
                        | "SavingsPlanCoveredUsage"
                        | "SavingsPlanNegation"
                        | "Credit"
                        | "EdpDiscount"
                );
            if instance { "Amazon Elastic Compute Cloud - Compute" } else { "EC2 - Other" }
        }
        "AmazonEKS" => "Amazon Elastic Container Service for Kubernetes",
        "AmazonS3" => "Amazon Simple Storage Service",
        "AWSDataTransfer" => "AWS Data Transfer",
        "AmazonCloudWatch" => "AmazonCloudWatch",
        "ComputeSavingsPlans" => "Savings Plans for AWS Compute usage",
        _ => "Other",
    }
}

/// A line's amortized cost (CID summary view).
fn amortized(row: &CurRow<'_>) -> f64 {
    let value = |v: Option<f64>| v.unwrap_or(0.0);
    match row.line_item_line_item_type {
        "SavingsPlanCoveredUsage" => value(row.savings_plan_savings_plan_effective_cost),
        "SavingsPlanRecurringFee" => {
            value(row.savings_plan_total_commitment_to_date) - value(row.savings_plan_used_commitment)
        }
        "SavingsPlanNegation" | "SavingsPlanUpfrontFee" => 0.0,
        "DiscountedUsage" => value(row.reservation_effective_cost),
        "RIFee" => {
            value(row.reservation_unused_amortized_upfront_fee_for_billing_period)
                + value(row.reservation_unused_recurring_fee)
        }
        _ => value(row.line_item_unblended_cost),
    }
}

/// Daily cost per Cost Explorer service and account: [unblended, amortized, net amortized].
#[derive(Debug, Default, Clone)]
pub struct CeTally {
    accounts: Vec<(String, String)>,
    cells: HashMap<(i64, &'static str, usize), [f64; 3]>,
    /// Per hour, the public On-Demand cost of the EC2 instance usage billed On-Demand: what
    /// a new Compute Savings Plan could cover.
    on_demand_hours: BTreeMap<i64, f64>,
    /// Per instance type and region, its public On-Demand rate and its On-Demand
    /// instance-hours hour by hour: what a new reservation could cover.
    on_demand_instances: BTreeMap<(String, String), (f64, BTreeMap<i64, f64>)>,
}

impl CeTally {
    /// Adds one CUR line.
    pub fn add(&mut self, row: &CurRow<'_>) {
        if row.line_item_operation == "EKSPod-EC2" || row.line_item_operation == "ECSTask-EC2" {
            return;
        }
        let account = match self.accounts.iter().position(|(id, _)| id == row.line_item_usage_account_id) {
            Some(index) => index,
            None => {
                self.accounts.push((
                    row.line_item_usage_account_id.to_string(),
                    row.line_item_usage_account_name.to_string(),
                ));
                self.accounts.len() - 1
            }
        };
        let start = row.line_item_usage_start_date;
        if row.line_item_operation == "RunInstances"
            && row.line_item_line_item_type == "Usage"
            && row.pricing_term == "OnDemand"
            && row.product_product_family == "Compute Instance"
        {
            *self.on_demand_hours.entry(start).or_default() +=
                row.pricing_public_on_demand_cost.unwrap_or(0.0);
            let key = (row.product_instance_type.to_string(), row.product_region_code.to_string());
            let (rate, hours) = self.on_demand_instances.entry(key).or_default();
            *rate = row.pricing_public_on_demand_rate.parse().unwrap_or(*rate);
            *hours.entry(start).or_default() += row.line_item_usage_amount.unwrap_or(0.0);
        }
        let day = start - start.rem_euclid(86_400);
        let unblended = row.line_item_unblended_cost.unwrap_or(0.0);
        let amortized = amortized(row);
        let net = amortized + row.line_item_net_unblended_cost.map_or(0.0, |net| net - unblended);
        let cell = self.cells.entry((day, service(row), account)).or_default();
        cell[0] += unblended;
        cell[1] += amortized;
        cell[2] += net;
    }

    /// Adds another tally (a day's batch) to this one.
    pub fn merge(&mut self, other: CeTally) {
        for (hour, cost) in other.on_demand_hours {
            *self.on_demand_hours.entry(hour).or_default() += cost;
        }
        for (key, (rate, hours)) in other.on_demand_instances {
            let (known, mine) = self.on_demand_instances.entry(key).or_default();
            *known = rate;
            for (hour, count) in hours {
                *mine.entry(hour).or_default() += count;
            }
        }
        for ((day, service, account), sums) in other.cells {
            let (id, name) = &other.accounts[account];
            let index = match self.accounts.iter().position(|(known, _)| known == id) {
                Some(index) => index,
                None => {
                    self.accounts.push((id.clone(), name.clone()));
                    self.accounts.len() - 1
                }
            };
            let cell = self.cells.entry((day, service, index)).or_default();
            for (total, value) in cell.iter_mut().zip(sums) {
                *total += value;
            }
        }
    }

    /// Cells by day, service and account id.
    fn sorted(&self) -> BTreeMap<(i64, &'static str, &str), [f64; 3]> {
        self.cells
            .iter()
            .map(|(&(day, service, account), sums)| {
                ((day, service, self.accounts[account].0.as_str()), *sums)
            })
            .collect()
    }
}

/// An amount as Cost Explorer writes it: a decimal string with ten decimals.
fn amount(value: f64) -> Value {
    json!({"Amount": format!("{value:.10}"), "Unit": "USD"})
}

/// The months before `first` (`history` of them) from `first_month`'s tally, scaled down,
/// then every CUR month's tally: one `GetCostAndUsage` answer with every day.
pub fn response(first: Period, history: u32, months: &CeTally) -> Value {
    let mut results: BTreeMap<i64, Vec<Value>> = BTreeMap::new();
    let group = |service: &str, account: &str, sums: [f64; 3]| {
        json!({
            "Keys": [service, account],
            "Metrics": {
                "UnblendedCost": amount(sums[0]),
                "AmortizedCost": amount(sums[1]),
                "NetAmortizedCost": amount(sums[2]),
            },
        })
    };
    let cells = months.sorted();
    // A typical day of the first month per service and account: its mean daily cost.
    let mut typical: BTreeMap<(&str, &str), [f64; 3]> = BTreeMap::new();
    let first_days = f64::from(first.days());
    for (&(day, service, account), sums) in &cells {
        if day >= first.start() && day < first.end() {
            let mean = typical.entry((service, account)).or_default();
            for (total, value) in mean.iter_mut().zip(sums) {
                *total += value / first_days;
            }
        }
    }
    let mut month = first;
    for back in 1..=history {
        month = month.previous();
        // Each month further back, a fleet 12 % smaller.
        let factor = 1.0 - 0.12 * f64::from(back);
        let mut day = month.start();
        while day < month.end() {
            let groups = results.entry(day).or_default();
            for (&(service, account), sums) in &typical {
                groups.push(group(service, account, sums.map(|v| (v * factor * 1e6).round() / 1e6)));
            }
            day += 86_400;
        }
    }
    for ((day, service, account), sums) in cells {
        results.entry(day).or_default().push(group(service, account, sums));
    }
    let day_text = |day: i64| crate::sources::cost_explorer::day_of(day).to_string();
    json!({
        "ResultsByTime": results.into_iter().map(|(day, groups)| json!({
            "TimePeriod": {"Start": day_text(day), "End": day_text(day + 86_400)},
            "Total": {},
            "Groups": groups,
            "Estimated": false,
        })).collect::<Vec<_>>(),
        "DimensionValueAttributes": months.accounts.iter().map(|(id, name)| json!({
            "Value": id, "Attributes": {"description": name},
        })).collect::<Vec<_>>(),
    })
}

/// Days of On-Demand usage AWS's recommendation looks back over (`THIRTY_DAYS`).
pub const RECOMMENDATION_LOOKBACK_DAYS: i64 = 30;

/// What `GetSavingsPlansPurchaseRecommendation` would answer at the end of the tallied months
/// for a one-year, No Upfront Compute Savings Plan over the payer's last 30 days: the
/// response AWS documents (what `aws ce get-savings-plans-purchase-recommendation
/// --savings-plans-type COMPUTE_SP --term-in-years ONE_YEAR --payment-option NO_UPFRONT
/// --lookback-period-in-days THIRTY_DAYS` prints), made the way AWS says it makes it: each
/// hour's On-Demand usage priced at its Savings Plan rates, and the hourly commitment (to
/// the tenth of a cent) that would have saved the most over the lookback.
///
/// The commitment is found by trying every cent up to the busiest hour, then every tenth of
/// a cent around the best: a search of its own, apart from gpuledger's quantile.
pub fn savings_plans_recommendation(tally: &CeTally, payer: &str, seed: u64) -> Option<Value> {
    let (from, last) = lookback(tally)?;
    let on_demand: Vec<f64> = (from..=last)
        .step_by(3600)
        .map(|hour| tally.on_demand_hours.get(&hour).copied().unwrap_or(0.0))
        .collect();
    let rate = super::fleet::SAVINGS_PLAN_RATE;
    let (commitment, saved) = best_commitment(&on_demand, rate);
    let mut ids = super::rng::Rng::derive(seed, &[60, last as u64]);
    let details = json!({"OfferingId": ids.uuid()});
    let detail = plan_detail(&on_demand, rate, (commitment, saved), payer, details, &mut ids);
    plan_answer("COMPUTE_SP", vec![detail], last, &mut ids)
}

/// What `GetSavingsPlansPurchaseRecommendation` would answer for one-year, No Upfront EC2
/// Instance Savings Plans (`--savings-plans-type EC2_INSTANCE_SP`) over the payer's last 30
/// days, made as [`savings_plans_recommendation`] is, per instance family and region: its
/// On-Demand usage each hour at the fleet's EC2 Instance plan rate (66 % of On-Demand), and
/// the hourly commitment that would have saved the most. A family and region whose best is
/// nothing is not listed.
pub fn instance_plans_recommendation(tally: &CeTally, payer: &str, seed: u64) -> Option<Value> {
    let (from, last) = lookback(tally)?;
    let mut by_family: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
    for ((instance_type, region), (rate, running)) in &tally.on_demand_instances {
        let family = instance_type.split('.').next().unwrap_or_default();
        let hours = by_family
            .entry((family, region))
            .or_insert_with(|| vec![0.0; ((last - from) / 3600 + 1) as usize]);
        for (hour, cost) in (from..=last).step_by(3600).zip(hours.iter_mut()) {
            *cost += running.get(&hour).copied().unwrap_or(0.0) * rate;
        }
    }
    let rate = super::fleet::INSTANCE_PLAN_RATE;
    let mut ids = super::rng::Rng::derive(seed, &[62, last as u64]);
    let mut details = Vec::new();
    for ((family, region), on_demand) in by_family {
        let (commitment, saved) = best_commitment(&on_demand, rate);
        if commitment <= 0.0 {
            continue;
        }
        let plan = json!({"Region": region, "InstanceFamily": family, "OfferingId": ids.uuid()});
        details.push(plan_detail(&on_demand, rate, (commitment, saved), payer, plan, &mut ids));
    }
    plan_answer("EC2_INSTANCE_SP", details, last, &mut ids)
}

/// The first and last hour of AWS's lookback: the last 30 days of the tallied On-Demand
/// hours, or every hour there is when fewer.
fn lookback(tally: &CeTally) -> Option<(i64, i64)> {
    let last = *tally.on_demand_hours.keys().next_back()?;
    let first = *tally.on_demand_hours.keys().next()?;
    Some(((last + 3600 - RECOMMENDATION_LOOKBACK_DAYS * 86_400).max(first), last))
}

/// The hourly commitment (to the tenth of a cent) at `rate` × On-Demand that would have saved
/// the most over `on_demand`'s hours, and what it saves: every cent up to the busiest hour,
/// then every tenth of a cent around the best.
fn best_commitment(on_demand: &[f64], rate: f64) -> (f64, f64) {
    let at_plan_rates: Vec<f64> = on_demand.iter().map(|x| x * rate).collect();
    // Savings over the lookback of `c` an hour: the On-Demand cost it covers less its cost.
    let savings = |c: f64| -> f64 { at_plan_rates.iter().map(|v| c.min(*v) / rate - c).sum() };
    let busiest = at_plan_rates.iter().copied().fold(0.0, f64::max);
    let best_of = |candidates: &mut dyn Iterator<Item = f64>| {
        candidates.fold((0.0, 0.0), |best: (f64, f64), c| {
            let s = savings(c);
            if s > best.1 { (c, s) } else { best }
        })
    };
    let (cents, _) = best_of(&mut (0..=(busiest * 100.0).ceil() as i64).map(|c| c as f64 / 100.0));
    best_of(&mut (-10..=10).map(|m| ((cents * 1000.0).round() + f64::from(m)) / 1000.0).filter(|c| *c >= 0.0))
}

/// One `SavingsPlansPurchaseRecommendationDetail`: a plan of `commitment` an hour (saving
/// `saved` over the lookback) at `rate` × On-Demand, against `on_demand`'s hours.
fn plan_detail(
    on_demand: &[f64],
    rate: f64,
    (commitment, saved): (f64, f64),
    payer: &str,
    plan: Value,
    ids: &mut super::rng::Rng,
) -> Value {
    let hours = on_demand.len() as f64;
    let total: f64 = on_demand.iter().sum();
    let used: f64 = on_demand.iter().map(|x| commitment.min(x * rate)).sum();
    let plan_cost = commitment * hours;
    let remaining = total - used / rate;
    let text = |v: f64| format!("{v:.10}");
    let percent = |v: f64| format!("{:.2}", v * 100.0);
    json!({
        "SavingsPlansDetails": plan,
        "AccountId": payer,
        "UpfrontCost": "0.0",
        "EstimatedROI": percent(if plan_cost > 0.0 { saved / plan_cost } else { 0.0 }),
        "CurrencyCode": "USD",
        "EstimatedSPCost": text(plan_cost),
        "EstimatedOnDemandCost": text(remaining),
        "EstimatedOnDemandCostWithCurrentCommitment": text(total),
        "EstimatedSavingsAmount": text(saved),
        "EstimatedSavingsPercentage": percent(if total > 0.0 { saved / total } else { 0.0 }),
        "HourlyCommitmentToPurchase": format!("{commitment:.3}"),
        "EstimatedAverageUtilization": percent(if plan_cost > 0.0 { used / plan_cost } else { 0.0 }),
        "EstimatedMonthlySavingsAmount": text(saved * 730.0 / hours),
        "CurrentMinimumHourlyOnDemandSpend": text(on_demand.iter().copied().fold(f64::INFINITY, f64::min)),
        "CurrentMaximumHourlyOnDemandSpend": text(on_demand.iter().copied().fold(0.0, f64::max)),
        "CurrentAverageHourlyOnDemandSpend": text(total / hours),
        "RecommendationDetailId": ids.uuid(),
    })
}

/// A `GetSavingsPlansPurchaseRecommendation` answer of `details`, generated the hour after
/// `last`, with their summary.
fn plan_answer(kind: &str, details: Vec<Value>, last: i64, ids: &mut super::rng::Rng) -> Option<Value> {
    let sum =
        |key: &str| -> f64 { details.iter().filter_map(|d| d[key].as_str()?.parse::<f64>().ok()).sum() };
    let text = |v: f64| format!("{v:.10}");
    let (plan_cost, remaining, total, saved) = (
        sum("EstimatedSPCost"),
        sum("EstimatedOnDemandCost"),
        sum("EstimatedOnDemandCostWithCurrentCommitment"),
        sum("EstimatedSavingsAmount"),
    );
    let (commitment, monthly) = (sum("HourlyCommitmentToPurchase"), sum("EstimatedMonthlySavingsAmount"));
    let generated =
        chrono::DateTime::from_timestamp(last + 3600, 0)?.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let percent = |v: f64| format!("{:.2}", v * 100.0);
    Some(json!({
        "Metadata": {
            "RecommendationId": ids.uuid(),
            "GenerationTimestamp": generated,
            "LookbackPeriodInDays": "THIRTY_DAYS",
        },
        "SavingsPlansPurchaseRecommendation": {
            "AccountScope": "PAYER",
            "SavingsPlansType": kind,
            "TermInYears": "ONE_YEAR",
            "PaymentOption": "NO_UPFRONT",
            "LookbackPeriodInDays": "THIRTY_DAYS",
            "SavingsPlansPurchaseRecommendationSummary": {
                "EstimatedROI": percent(if plan_cost > 0.0 { saved / plan_cost } else { 0.0 }),
                "CurrencyCode": "USD",
                "EstimatedTotalCost": text(plan_cost + remaining),
                "CurrentOnDemandSpend": text(total),
                "EstimatedSavingsAmount": text(saved),
                "TotalRecommendationCount": details.len().to_string(),
                "DailyCommitmentToPurchase": format!("{:.3}", commitment * 24.0),
                "HourlyCommitmentToPurchase": format!("{commitment:.3}"),
                "EstimatedSavingsPercentage": percent(if total > 0.0 { saved / total } else { 0.0 }),
                "EstimatedMonthlySavingsAmount": text(monthly),
                "EstimatedOnDemandCostWithCurrentCommitment": text(total),
            },
            "SavingsPlansPurchaseRecommendationDetails": details,
        },
    }))
}

/// An instance size's normalization factor (AWS's size-flexibility table: `large` is 4,
/// each doubling doubles it), 0 for a size the table does not list.
fn normalization_factor(instance_type: &str) -> f64 {
    match instance_type.split('.').nth(1).unwrap_or("") {
        "nano" => 0.25,
        "micro" => 0.5,
        "small" => 1.0,
        "medium" => 2.0,
        "large" => 4.0,
        "xlarge" => 8.0,
        size => size.strip_suffix("xlarge").and_then(|n| n.parse::<f64>().ok()).map_or(0.0, |n| n * 8.0),
    }
}

/// What `GetReservationPurchaseRecommendation` would answer at the end of the tallied months
/// for one-year, No Upfront, Standard EC2 reservations over the payer's last 30 days (what
/// `aws ce get-reservation-purchase-recommendation --service "Amazon Elastic Compute Cloud -
/// Compute" --term-in-years ONE_YEAR --payment-option NO_UPFRONT --lookback-period-in-days
/// THIRTY_DAYS` prints), made the way AWS says it makes it: per instance type and region, the
/// On-Demand instances running each hour, and the whole number of reservations (at the
/// fleet's reservation rate, 62 % of On-Demand to four places) that would have saved the
/// most over the lookback. A type whose best number is 0 is not listed.
///
/// The number is found by trying each from 0 to the most instances run in an hour: a search
/// of its own, apart from gpuledger's quantile.
pub fn reservation_recommendation(tally: &CeTally, payer: &str, seed: u64) -> Option<Value> {
    let (from, last) = lookback(tally)?;
    let hours = ((last - from) / 3600 + 1) as f64;
    let text = |v: f64| format!("{v:.10}");
    let percent = |v: f64| format!("{:.2}", v * 100.0);
    let mut ids = super::rng::Rng::derive(seed, &[61, last as u64]);
    let (mut details, mut saved_total, mut on_demand_total) = (Vec::new(), 0.0, 0.0);
    for ((instance_type, region), (rate, running)) in &tally.on_demand_instances {
        let used: Vec<f64> =
            (from..=last).step_by(3600).map(|hour| running.get(&hour).copied().unwrap_or(0.0)).collect();
        let reserved_rate = (rate * super::fleet::RESERVED_RATE * 1e4).round() / 1e4;
        let savings = |n: f64| -> f64 { used.iter().map(|u| n.min(*u) * rate - n * reserved_rate).sum() };
        let most = used.iter().copied().fold(0.0, f64::max);
        let (count, saved) = (0..=most.ceil() as i64).map(|n| n as f64).fold((0.0, 0.0), |best, n| {
            let s = savings(n);
            if s > best.1 { (n, s) } else { best }
        });
        let on_demand: f64 = used.iter().sum::<f64>() * rate;
        on_demand_total += on_demand;
        if count == 0.0 {
            continue;
        }
        saved_total += saved;
        let covered: f64 = used.iter().map(|u| count.min(*u)).sum();
        let monthly = 730.0 / hours;
        let factor = normalization_factor(instance_type);
        let units = |n: f64| format!("{}", n * factor);
        let instances = |n: f64| format!("{n}");
        let fewest = used.iter().copied().fold(f64::INFINITY, f64::min);
        let average = used.iter().sum::<f64>() / hours;
        details.push(json!({
            "AccountId": payer,
            "InstanceDetails": {"EC2InstanceDetails": {
                "Family": instance_type.split('.').next().unwrap_or_default(),
                "InstanceType": instance_type,
                "Region": region,
                "Platform": "Linux/UNIX",
                "Tenancy": "Shared",
                "CurrentGeneration": true,
                "SizeFlexEligible": true,
            }},
            "RecommendedNumberOfInstancesToPurchase": instances(count),
            "RecommendedNormalizedUnitsToPurchase": units(count),
            "MinimumNumberOfInstancesUsedPerHour": instances(fewest),
            "MinimumNormalizedUnitsUsedPerHour": units(fewest),
            "MaximumNumberOfInstancesUsedPerHour": instances(most),
            "MaximumNormalizedUnitsUsedPerHour": units(most),
            "AverageNumberOfInstancesUsedPerHour": text(average),
            "AverageNormalizedUnitsUsedPerHour": text(average * factor),
            "AverageUtilization": percent(covered / (count * hours)),
            "EstimatedBreakEvenInMonths": "0.0",
            "CurrencyCode": "USD",
            "EstimatedMonthlySavingsAmount": text(saved * monthly),
            "EstimatedMonthlySavingsPercentage": percent(saved / on_demand),
            "EstimatedMonthlyOnDemandCost": text(on_demand * monthly),
            "EstimatedReservationCostForLookbackPeriod": text(on_demand - saved),
            "UpfrontCost": "0.0",
            "RecurringStandardMonthlyCost": text(count * reserved_rate * 730.0),
        }));
    }
    let generated =
        chrono::DateTime::from_timestamp(last + 3600, 0)?.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let monthly_savings = saved_total * 730.0 / hours;
    Some(json!({
        "Metadata": {
            "RecommendationId": ids.uuid(),
            "GenerationTimestamp": generated,
            "LookbackPeriodInDays": "THIRTY_DAYS",
        },
        "Recommendations": [{
            "AccountScope": "PAYER",
            "LookbackPeriodInDays": "THIRTY_DAYS",
            "TermInYears": "ONE_YEAR",
            "PaymentOption": "NO_UPFRONT",
            "ServiceSpecification": {"EC2Specification": {"OfferingClass": "STANDARD"}},
            "RecommendationDetails": details,
            "RecommendationSummary": {
                "TotalEstimatedMonthlySavingsAmount": text(monthly_savings),
                "TotalEstimatedMonthlySavingsPercentage":
                    percent(if on_demand_total > 0.0 { saved_total / on_demand_total } else { 0.0 }),
                "CurrencyCode": "USD",
            },
        }],
    }))
}
