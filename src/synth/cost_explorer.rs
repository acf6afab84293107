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
