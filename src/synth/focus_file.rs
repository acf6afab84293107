//! The AWS FOCUS 1.2 export of the generated bill: the same line items as the CUR, in the
//! columns AWS Data Exports writes for its `FOCUS_1_2_AWS` table, so the two formats of one
//! month can be compared. Every CUR row pushed becomes its FOCUS row(s) here:
//!
//! - the EKS split rows are not in FOCUS (AWS has no split-cost option for it), and the
//!   Savings Plan negations are left out with the covered usage billed at 0: what the
//!   covered hours add to the invoice is nothing either way;
//! - covered and reserved usage is `Committed`, `Used`, its EffectiveCost the plan's or the
//!   reservation's effective cost; Spot hours are `Dynamic`;
//! - a commitment's recurring fee is a `Purchase` billed in full with EffectiveCost 0, and
//!   its unused part a `Usage` row of status `Unused` billed 0 (the specification's usage
//!   scenario 2), so Σ EffectiveCost is the CUR's amortized cost;
//! - tax is `Tax`; credits, refunds and the enterprise discount are `Credit` (FOCUS has no
//!   discount category);
//! - tags keep their key without CUR's `user_` prefix.

use polars::prelude::*;

use super::cur_file::{CurRow, Twin};

/// One FOCUS row's values, borrowed from the CUR row they come from.
struct FocusRow<'a> {
    charge_category: &'static str,
    charge_frequency: &'static str,
    pricing_category: Option<&'static str>,
    commitment_id: &'a str,
    commitment_type: &'static str,
    commitment_status: Option<&'static str>,
    billed: f64,
    effective: f64,
    list: f64,
    contracted: f64,
    consumed: Option<f64>,
}

/// Column builders for one batch of FOCUS rows.
#[derive(Default)]
pub struct FocusBatch {
    text: Vec<(&'static str, Vec<Option<String>>)>,
    numbers: Vec<(&'static str, Vec<Option<f64>>)>,
    times: Vec<(&'static str, Vec<i64>)>,
    rows: usize,
}

const TEXT: [&str; 26] = [
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "ChargeCategory",
    "ChargeClass",
    "ChargeFrequency",
    "ChargeDescription",
    "PricingCategory",
    "PricingUnit",
    "CommitmentDiscountId",
    "CommitmentDiscountType",
    "CommitmentDiscountCategory",
    "CommitmentDiscountStatus",
    "ConsumedUnit",
    "InvoiceId",
    "InvoiceIssuerName",
    "ProviderName",
    "PublisherName",
    "RegionId",
    "ResourceId",
    "ServiceName",
    "ServiceCategory",
    "SubAccountId",
    "SubAccountName",
    "Tags",
    "x_UsageType",
];
const NUMBERS: [&str; 6] =
    ["BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "ConsumedQuantity", "PricingQuantity"];
const TIMES: [&str; 4] = ["BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"];

impl FocusBatch {
    pub fn new() -> FocusBatch {
        FocusBatch {
            text: TEXT.iter().map(|n| (*n, Vec::new())).collect(),
            numbers: NUMBERS.iter().map(|n| (*n, Vec::new())).collect(),
            times: TIMES.iter().map(|n| (*n, Vec::new())).collect(),
            rows: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The FOCUS rows of one CUR row (none for split rows and negations).
    pub fn push_cur(&mut self, row: &CurRow<'_>) {
        if row.line_item_operation.starts_with("EKSPod") || !row.split_line_item_parent_resource_id.is_empty()
        {
            return;
        }
        let unblended = row.line_item_unblended_cost.unwrap_or(0.0);
        let list = row.pricing_public_on_demand_cost.unwrap_or(unblended);
        let usage = row.line_item_usage_amount;
        let line = |category, frequency, pricing, billed: f64, effective: f64| FocusRow {
            charge_category: category,
            charge_frequency: frequency,
            pricing_category: pricing,
            commitment_id: "",
            commitment_type: "",
            commitment_status: None,
            billed,
            effective,
            list,
            contracted: billed,
            consumed: None,
        };
        let spot = row.line_item_usage_type.contains("SpotUsage");
        match row.line_item_line_item_type {
            "SavingsPlanNegation" => {}
            "SavingsPlanCoveredUsage" => self.push(
                row,
                FocusRow {
                    commitment_id: row.savings_plan_savings_plan_a_r_n,
                    commitment_type: "Savings Plan",
                    commitment_status: Some("Used"),
                    consumed: usage,
                    contracted: unblended,
                    ..line(
                        "Usage",
                        "Usage-Based",
                        Some("Committed"),
                        0.0,
                        row.savings_plan_savings_plan_effective_cost.unwrap_or(0.0),
                    )
                },
            ),
            "DiscountedUsage" => self.push(
                row,
                FocusRow {
                    commitment_id: row.reservation_reservation_a_r_n,
                    commitment_type: "Reservation",
                    commitment_status: Some("Used"),
                    consumed: usage,
                    ..line(
                        "Usage",
                        "Usage-Based",
                        Some("Committed"),
                        unblended,
                        row.reservation_effective_cost.unwrap_or(0.0),
                    )
                },
            ),
            fee @ ("SavingsPlanRecurringFee" | "RIFee") => {
                let (id, kind, unused) = if fee == "RIFee" {
                    (
                        row.reservation_reservation_a_r_n,
                        "Reservation",
                        row.reservation_unused_amortized_upfront_fee_for_billing_period.unwrap_or(0.0)
                            + row.reservation_unused_recurring_fee.unwrap_or(0.0),
                    )
                } else {
                    (
                        row.savings_plan_savings_plan_a_r_n,
                        "Savings Plan",
                        row.savings_plan_total_commitment_to_date.unwrap_or(0.0)
                            - row.savings_plan_used_commitment.unwrap_or(0.0),
                    )
                };
                let commitment =
                    |row: FocusRow<'_>| FocusRow { commitment_id: id, commitment_type: kind, ..row };
                self.push(row, commitment(line("Purchase", "Recurring", Some("Standard"), unblended, 0.0)));
                if unused != 0.0 {
                    self.push(
                        row,
                        FocusRow {
                            commitment_status: Some("Unused"),
                            list: 0.0,
                            contracted: 0.0,
                            ..commitment(line("Usage", "Usage-Based", Some("Committed"), 0.0, unused))
                        },
                    );
                }
            }
            "Tax" => self.push(row, line("Tax", "Recurring", None, unblended, unblended)),
            "Credit" | "Refund" => self.push(row, line("Credit", "One-Time", None, unblended, unblended)),
            discount if discount.ends_with("Discount") => {
                self.push(row, line("Credit", "Recurring", None, unblended, unblended))
            }
            _ => self.push(
                row,
                FocusRow {
                    consumed: usage,
                    ..line(
                        "Usage",
                        "Usage-Based",
                        Some(if spot { "Dynamic" } else { "Standard" }),
                        unblended,
                        unblended,
                    )
                },
            ),
        }
    }

    fn push(&mut self, cur: &CurRow<'_>, row: FocusRow<'_>) {
        let tags: std::collections::BTreeMap<&str, &str> = cur
            .resource_tags
            .iter()
            .map(|(k, v)| (k.strip_prefix("user_").unwrap_or(k), v.as_str()))
            .collect();
        let some = |text: &str| (!text.is_empty()).then(|| text.to_string());
        // A Savings Plan commits to spend, a reservation to usage.
        let category = match row.commitment_type {
            "Savings Plan" => Some("Spend".to_string()),
            "Reservation" => Some("Usage".to_string()),
            _ => None,
        };
        let text: [Option<String>; 26] = [
            some(cur.bill_payer_account_id),
            some(cur.bill_payer_account_name),
            some(cur.line_item_currency_code),
            Some(row.charge_category.into()),
            None,
            Some(row.charge_frequency.into()),
            some(cur.line_item_line_item_description),
            row.pricing_category.map(str::to_string),
            some(cur.pricing_unit),
            some(row.commitment_id),
            some(row.commitment_type),
            category,
            row.commitment_status.map(str::to_string),
            row.consumed.and(some(cur.pricing_unit)),
            some(cur.bill_invoice_id),
            some(cur.bill_invoicing_entity),
            Some("AWS".into()),
            Some("AWS".into()),
            some(cur.product_region_code),
            some(if row.commitment_status == Some("Unused") {
                row.commitment_id
            } else {
                cur.line_item_resource_id
            }),
            some(cur.line_item_product_code),
            Some(crate::catalog::aws_service_category(cur.line_item_product_code).into()),
            some(cur.line_item_usage_account_id),
            some(cur.line_item_usage_account_name),
            (!tags.is_empty()).then(|| serde_json::to_string(&tags).unwrap_or_default()),
            some(cur.line_item_usage_type),
        ];
        for ((_, column), value) in self.text.iter_mut().zip(text) {
            column.push(value);
        }
        let numbers = [
            Some(row.billed),
            Some(row.effective),
            Some(row.list),
            Some(row.contracted),
            row.consumed,
            row.consumed,
        ];
        for ((_, column), value) in self.numbers.iter_mut().zip(numbers) {
            column.push(value);
        }
        let times = [
            cur.bill_billing_period_start_date,
            cur.bill_billing_period_end_date,
            cur.line_item_usage_start_date,
            cur.line_item_usage_end_date,
        ];
        for ((_, column), value) in self.times.iter_mut().zip(times) {
            column.push(value * 1000);
        }
        self.rows += 1;
    }

    /// The batch as a DataFrame, in FOCUS's column order (alphabetical, as AWS writes it).
    pub fn frame(self) -> PolarsResult<DataFrame> {
        let mut columns: Vec<Column> = Vec::new();
        for (name, values) in self.text {
            columns.push(Column::new(name.into(), values));
        }
        for (name, values) in self.numbers {
            columns.push(Column::new(name.into(), values));
        }
        for (name, values) in self.times {
            columns.push(crate::sources::focus_file::utc_datetimes(
                name,
                values.into_iter().map(Some).collect(),
            ));
        }
        columns.sort_by(|a, b| a.name().cmp(b.name()));
        DataFrame::new(self.rows, columns)
    }
}

impl Twin for FocusBatch {
    fn push(&mut self, row: &CurRow<'_>) {
        self.push_cur(row);
    }

    fn into_frame(self: Box<Self>) -> PolarsResult<DataFrame> {
        self.frame()
    }
}
