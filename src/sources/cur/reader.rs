//! The CUR 2.0 columns the ingest reads, as a [`ColumnSet`] of the sources' columnar reader
//! ([`crate::sources::columns`]).

use std::path::Path;

use crate::sources::SourceError;
use crate::sources::columns::{ColumnId, ColumnSet, Columns, read_columns};

/// The CUR columns the ingest reads (only these are decoded); the first [`REQUIRED`] are
/// required.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    LineItemLineItemType,
    LineItemOperation,
    LineItemProductCode,
    LineItemResourceId,
    LineItemUnblendedCost,
    LineItemUsageAmount,
    LineItemUsageStartDate,
    LineItemUsageType,
    BillBillingEntity,
    BillInvoiceId,
    LineItemCurrencyCode,
    LineItemUsageAccountId,
    LineItemUsageAccountName,
    LineItemUsageEndDate,
    LineItemLineItemDescription,
    LineItemNetUnblendedCost,
    PricingPublicOnDemandCost,
    Product,
    ProductInstanceType,
    ProductProductFamily,
    ReservationEffectiveCost,
    ReservationNetEffectiveCost,
    ReservationReservationARN,
    ReservationUnusedAmortizedUpfrontFeeForBillingPeriod,
    ReservationUnusedRecurringFee,
    ResourceTags,
    SavingsPlanNetSavingsPlanEffectiveCost,
    SavingsPlanSavingsPlanARN,
    SavingsPlanSavingsPlanEffectiveCost,
    SavingsPlanTotalCommitmentToDate,
    SavingsPlanUsedCommitment,
    SplitLineItemNetSplitCost,
    SplitLineItemNetUnusedCost,
    SplitLineItemParentResourceId,
    SplitLineItemPublicOnDemandSplitCost,
    SplitLineItemPublicOnDemandUnusedCost,
    SplitLineItemSplitCost,
    SplitLineItemSplitUsage,
    SplitLineItemUnusedCost,
    BillPayerAccountId,
    SavingsPlanStartTime,
    SavingsPlanEndTime,
    SavingsPlanOfferingType,
    SavingsPlanPurchaseTerm,
    SavingsPlanPaymentOption,
    SavingsPlanInstanceTypeFamily,
    SavingsPlanRegion,
    ReservationStartTime,
    ReservationEndTime,
    ReservationNumberOfReservations,
    ReservationAmortizedUpfrontFeeForBillingPeriod,
    ProductRegionCode,
    /// The row's identity ([`crate::sources::row_identity`]): unique within a delivery.
    IdentityLineItemId,
    IdentityTimeInterval,
}

/// How many of [`Col`]'s columns a file must have (they come first).
pub const REQUIRED: usize = 8;

/// Column names in [`Col`] order.
pub const COLUMN_NAMES: [&str; 54] = [
    "line_item_line_item_type",
    "line_item_operation",
    "line_item_product_code",
    "line_item_resource_id",
    "line_item_unblended_cost",
    "line_item_usage_amount",
    "line_item_usage_start_date",
    "line_item_usage_type",
    "bill_billing_entity",
    "bill_invoice_id",
    "line_item_currency_code",
    "line_item_usage_account_id",
    "line_item_usage_account_name",
    "line_item_usage_end_date",
    "line_item_line_item_description",
    "line_item_net_unblended_cost",
    "pricing_public_on_demand_cost",
    "product",
    "product_instance_type",
    "product_product_family",
    "reservation_effective_cost",
    "reservation_net_effective_cost",
    "reservation_reservation_a_r_n",
    "reservation_unused_amortized_upfront_fee_for_billing_period",
    "reservation_unused_recurring_fee",
    "resource_tags",
    "savings_plan_net_savings_plan_effective_cost",
    "savings_plan_savings_plan_a_r_n",
    "savings_plan_savings_plan_effective_cost",
    "savings_plan_total_commitment_to_date",
    "savings_plan_used_commitment",
    "split_line_item_net_split_cost",
    "split_line_item_net_unused_cost",
    "split_line_item_parent_resource_id",
    "split_line_item_public_on_demand_split_cost",
    "split_line_item_public_on_demand_unused_cost",
    "split_line_item_split_cost",
    "split_line_item_split_usage",
    "split_line_item_unused_cost",
    "bill_payer_account_id",
    "savings_plan_start_time",
    "savings_plan_end_time",
    "savings_plan_offering_type",
    "savings_plan_purchase_term",
    "savings_plan_payment_option",
    "savings_plan_instance_type_family",
    "savings_plan_region",
    "reservation_start_time",
    "reservation_end_time",
    "reservation_number_of_reservations",
    "reservation_amortized_upfront_fee_for_billing_period",
    "product_region_code",
    "identity_line_item_id",
    "identity_time_interval",
];

impl Col {
    pub fn name(self) -> &'static str {
        COLUMN_NAMES[self as usize]
    }
}

impl ColumnId for Col {
    fn index(self) -> usize {
        self as usize
    }
    fn column_name(self) -> &'static str {
        self.name()
    }
}

/// CUR 2.0's columns.
pub const CUR: ColumnSet =
    ColumnSet { names: &COLUMN_NAMES, required: REQUIRED, maps: &["resource_tags", "product"], kind: "CUR" };

/// Reads a data file chunk by chunk; returns the rows read.
pub fn read_file(
    path: &Path,
    location: &str,
    mut visit: impl FnMut(&Columns<'_>) -> Result<(), SourceError>,
) -> Result<usize, SourceError> {
    read_columns(path, location, &CUR, &mut visit)
}
