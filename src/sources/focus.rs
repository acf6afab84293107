//! FOCUS bills (the FinOps Foundation's FinOps Open Cost and Usage Specification, 1.0–1.3):
//! where a provider's export keeps its files, which version a file is, and its rows read and
//! checked against the specification's rules, each bad value named by file, row and column.
//!
//! Real exports deviate from the specification in ways that are not ambiguous: nulls written
//! as the text `NULL`, timestamps without `T` and `Z`, enumerated values in another case,
//! extra columns without the `x_` prefix. Those are accepted and counted ([`Deviations`]);
//! anything that could mean two things is refused.

use std::collections::BTreeSet;
use std::path::Path;

use super::columns::{self, ColumnId, ColumnSet, Columns};
use super::objects::ObjectStore;
use super::row_identity::{RowIdentities, RowKey};
use super::{SourceError, invalid};
use crate::period::Period;

/// The FOCUS columns gpuledger reads (only these are decoded); the first [`REQUIRED`] must be
/// in every file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    BilledCost,
    EffectiveCost,
    BillingCurrency,
    BillingAccountId,
    BillingPeriodStart,
    ChargePeriodStart,
    ChargePeriodEnd,
    ChargeCategory,
    BillingPeriodEnd,
    ListCost,
    ContractedCost,
    ProviderName,
    ServiceProviderName,
    BillingAccountName,
    SubAccountId,
    SubAccountName,
    ServiceName,
    ServiceCategory,
    RegionId,
    ResourceId,
    ResourceType,
    SkuId,
    SkuMeter,
    PricingCategory,
    ChargeClass,
    ChargeFrequency,
    CommitmentDiscountId,
    CommitmentDiscountType,
    CommitmentDiscountCategory,
    CommitmentDiscountStatus,
    ConsumedQuantity,
    ConsumedUnit,
    PricingQuantity,
    InvoiceId,
    Tags,
    /// The SKU's description where a provider leaves `SkuMeter` out (Oracle's `GPU Standard
    /// - A10`).
    ChargeDescription,
    /// AWS's usage type (`USE1-BoxUsage:p4d.24xlarge`): the instance type of an EC2 hour.
    XUsageType,
    /// The SKU's properties as JSON (FOCUS 1.1), where an export may name the instance type
    /// (`{"InstanceType":"Standard_NC24ads_A100_v4"}`).
    SkuPriceDetails,
    /// Azure's SKU details (`{"ServiceType":"Standard_NC24ads_A100_v4","VCPUs":24}`), meter
    /// name and SKU description: where its exports may name a VM's size instead of `SkuMeter`.
    XSkuDetails,
    XSkuMeterName,
    XSkuDescription,
}

/// How many of [`Col`]'s columns a file must have (they come first).
pub const REQUIRED: usize = 8;

/// Column names in [`Col`] order.
pub const COLUMN_NAMES: [&str; 41] = [
    "BilledCost",
    "EffectiveCost",
    "BillingCurrency",
    "BillingAccountId",
    "BillingPeriodStart",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ChargeCategory",
    "BillingPeriodEnd",
    "ListCost",
    "ContractedCost",
    "ProviderName",
    "ServiceProviderName",
    "BillingAccountName",
    "SubAccountId",
    "SubAccountName",
    "ServiceName",
    "ServiceCategory",
    "RegionId",
    "ResourceId",
    "ResourceType",
    "SkuId",
    "SkuMeter",
    "PricingCategory",
    "ChargeClass",
    "ChargeFrequency",
    "CommitmentDiscountId",
    "CommitmentDiscountType",
    "CommitmentDiscountCategory",
    "CommitmentDiscountStatus",
    "ConsumedQuantity",
    "ConsumedUnit",
    "PricingQuantity",
    "InvoiceId",
    "Tags",
    "ChargeDescription",
    "x_UsageType",
    "SkuPriceDetails",
    "x_SkuDetails",
    "x_SkuMeterName",
    "x_SkuDescription",
];

impl ColumnId for Col {
    fn index(self) -> usize {
        self as usize
    }
    fn column_name(self) -> &'static str {
        COLUMN_NAMES[self as usize]
    }
}

/// FOCUS's columns as the reader decodes them.
pub const COLUMNS: ColumnSet =
    ColumnSet { names: &COLUMN_NAMES, required: REQUIRED, maps: &["Tags"], kind: "FOCUS" };

/// Every column name of the Cost and Usage dataset from 1.0 to 1.3: a name outside these
/// and without the `x_` prefix is an extra column, counted.
const SPEC_COLUMNS: [&str; 65] = [
    "AvailabilityZone",
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceIssuerName",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "SkuId",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
    // 1.1
    "CapacityReservationId",
    "CapacityReservationStatus",
    "CommitmentDiscountQuantity",
    "CommitmentDiscountUnit",
    "ServiceSubcategory",
    "SkuMeter",
    "SkuPriceDetails",
    // 1.2
    "BillingAccountType",
    "InvoiceId",
    "PricingCurrency",
    "PricingCurrencyContractedUnitPrice",
    "PricingCurrencyEffectiveCost",
    "PricingCurrencyListUnitPrice",
    "SubAccountType",
    // 1.3
    "AllocatedMethodDetails",
    "AllocatedMethodId",
    "AllocatedResourceId",
    "AllocatedResourceName",
    "AllocatedTags",
    "ContractApplied",
    "HostProviderName",
    "ServiceProviderName",
];

/// A FOCUS version, as a file's columns show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    V1_0,
    V1_1,
    V1_2,
    V1_3,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1_0 => "1.0",
            Version::V1_1 => "1.1",
            Version::V1_2 => "1.2",
            Version::V1_3 => "1.3",
        }
    }

    /// The version a header shows: 1.3's mandatory provider columns say 1.3; otherwise the
    /// newest version one of whose (optional) columns is present, 1.0 at least. A 1.1 or 1.2
    /// file that leaves every new column out reads as 1.0, which is what its columns are.
    pub fn of_header(names: &[String]) -> Version {
        let has = |wanted: &[&str]| names.iter().any(|n| wanted.contains(&n.as_str()));
        if has(&["ServiceProviderName", "HostProviderName", "AllocatedMethodId", "ContractApplied"]) {
            Version::V1_3
        } else if has(&[
            "InvoiceId",
            "PricingCurrency",
            "PricingCurrencyEffectiveCost",
            "PricingCurrencyListUnitPrice",
            "PricingCurrencyContractedUnitPrice",
            "BillingAccountType",
            "SubAccountType",
        ]) {
            Version::V1_2
        } else if has(&[
            "SkuPriceDetails",
            "SkuMeter",
            "ServiceSubcategory",
            "CommitmentDiscountQuantity",
            "CommitmentDiscountUnit",
            "CapacityReservationId",
            "CapacityReservationStatus",
        ]) {
            Version::V1_1
        } else {
            Version::V1_0
        }
    }
}

/// The columns of a data file that are neither FOCUS's (1.0–1.3) nor custom (`x_`).
pub fn extra_columns(names: &[String]) -> Vec<String> {
    names.iter().filter(|n| !n.starts_with("x_") && !SPEC_COLUMNS.contains(&n.as_str())).cloned().collect()
}

/// The cloud a bill is from, as gpuledger names it (`aws`, `azure`, `gcp`, `oci`), from a
/// FOCUS `ProviderName` / `ServiceProviderName` or a `--provider` argument.
pub fn provider_id(name: &str) -> Option<&'static str> {
    // Compared in any case without lowercasing a copy: every row names its provider.
    const NAMES: [(&str, &str); 14] = [
        ("aws", "aws"),
        ("amazon web services", "aws"),
        ("amazon", "aws"),
        ("azure", "azure"),
        ("microsoft", "azure"),
        ("microsoft azure", "azure"),
        ("gcp", "gcp"),
        ("google", "gcp"),
        ("google cloud", "gcp"),
        ("google cloud platform", "gcp"),
        ("oci", "oci"),
        ("oracle", "oci"),
        ("oracle cloud", "oci"),
        ("oracle cloud infrastructure", "oci"),
    ];
    let name = name.trim();
    NAMES.iter().find(|(known, _)| known.eq_ignore_ascii_case(name)).map(|(_, id)| *id)
}

/// The providers gpuledger knows, for messages.
pub const PROVIDERS: [&str; 4] = ["aws", "azure", "gcp", "oci"];

/// How a page or report names a provider gpuledger knows (`gcp` → `Google Cloud`); another
/// as it is.
pub fn provider_name(id: &str) -> &str {
    match id {
        "aws" => "AWS",
        "azure" => "Azure",
        "gcp" => "Google Cloud",
        "oci" => "OCI",
        other => other,
    }
}

/// The allowed values of the enumerated columns gpuledger reads.
pub const CHARGE_CATEGORIES: [&str; 5] = ["Usage", "Purchase", "Tax", "Credit", "Adjustment"];
pub const PRICING_CATEGORIES: [&str; 4] = ["Standard", "Dynamic", "Committed", "Other"];
pub const COMMITMENT_STATUSES: [&str; 2] = ["Used", "Unused"];
/// FOCUS's `CommitmentDiscountCategory` values.
pub const COMMITMENT_CATEGORIES: [&str; 2] = ["Spend", "Usage"];
pub const CHARGE_CLASSES: [&str; 1] = ["Correction"];
pub const CHARGE_FREQUENCIES: [&str; 3] = ["One-Time", "Recurring", "Usage-Based"];

/// What a file did that the specification does not allow but whose meaning is plain; counted
/// in the run's reconciliation.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Deviations {
    /// Cells holding the text `NULL` (or `null`) for a null.
    pub null_as_text: u64,
    /// Timestamps written other than `YYYY-MM-DDTHH:MM:SSZ` (no `T`, no `Z`, fractions, an
    /// explicit `+00:00`).
    pub timestamps_not_iso: u64,
    /// Enumerated values in another case (`Usage-based` for `Usage-Based`).
    pub values_in_another_case: u64,
    /// `ListCost` or `ContractedCost` cells left null (FOCUS says never; Oracle's sample
    /// does): read as 0, so the bill's list and contracted totals leave those rows out.
    pub null_list_or_contracted_costs: u64,
    /// Charges that started before their billing period (late usage billed later, or
    /// corrections).
    pub charges_before_billing_period: u64,
    /// Billing periods that do not start on a month's first midnight (UTC).
    pub billing_periods_not_calendar_months: u64,
    /// Columns neither FOCUS's nor prefixed `x_`.
    pub extra_columns: BTreeSet<String>,
}

impl Deviations {
    /// What was accepted, in words ("4,000 timestamps without T or Z; an extra column: Id"),
    /// empty when the files kept to the specification.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        let counted = [
            (self.null_as_text, "nulls written as NULL"),
            (self.timestamps_not_iso, "timestamps not written YYYY-MM-DDTHH:MM:SSZ"),
            (self.values_in_another_case, "values in another case"),
            (self.null_list_or_contracted_costs, "list or contracted costs left null"),
            (self.charges_before_billing_period, "charges from before their billing period"),
            (self.billing_periods_not_calendar_months, "billing periods not starting on the 1st"),
        ];
        for (count, what) in counted {
            if count > 0 {
                parts.push(format!("{} {what}", crate::text::grouped(&count.to_string())));
            }
        }
        if !self.extra_columns.is_empty() {
            let names: Vec<&str> = self.extra_columns.iter().map(String::as_str).collect();
            parts.push(format!("columns neither FOCUS's nor x_: {}", names.join(", ")));
        }
        parts.join("; ")
    }

    pub fn add(&mut self, other: &Deviations) {
        self.null_as_text += other.null_as_text;
        self.timestamps_not_iso += other.timestamps_not_iso;
        self.values_in_another_case += other.values_in_another_case;
        self.null_list_or_contracted_costs += other.null_list_or_contracted_costs;
        self.charges_before_billing_period += other.charges_before_billing_period;
        self.billing_periods_not_calendar_months += other.billing_periods_not_calendar_months;
        self.extra_columns.extend(other.extra_columns.iter().cloned());
    }
}

/// One row of a FOCUS file, read and checked. Text borrows from the chunk.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Charge<'a> {
    pub provider: &'a str,
    pub billing_account_id: &'a str,
    pub billing_account_name: &'a str,
    pub billing_currency: &'a str,
    pub billing_period_start: i64,
    /// `None` when the file has no `BillingPeriodEnd`.
    pub billing_period_end: Option<i64>,
    pub charge_period_start: i64,
    pub charge_period_end: i64,
    pub charge_category: &'static str,
    pub charge_class: Option<&'static str>,
    pub charge_frequency: Option<&'static str>,
    pub pricing_category: Option<&'static str>,
    pub commitment_discount_status: Option<&'static str>,
    pub commitment_discount_id: &'a str,
    pub commitment_discount_type: &'a str,
    pub commitment_discount_category: Option<&'static str>,
    pub sub_account_id: &'a str,
    pub sub_account_name: &'a str,
    pub service_name: &'a str,
    pub service_category: &'a str,
    pub region: &'a str,
    pub resource_id: &'a str,
    pub resource_type: &'a str,
    pub sku_id: &'a str,
    pub sku_meter: &'a str,
    pub charge_description: &'a str,
    pub usage_type: &'a str,
    pub sku_price_details: &'a str,
    pub x_sku_details: &'a str,
    pub x_sku_meter_name: &'a str,
    pub x_sku_description: &'a str,
    pub invoice_id: &'a str,
    pub consumed_unit: &'a str,
    pub consumed_quantity: Option<f64>,
    pub pricing_quantity: Option<f64>,
    pub billed_cost: f64,
    pub effective_cost: f64,
    /// 0 when the file has no such column (the spec makes both mandatory; AWS's 1.0 export
    /// leaves some out).
    pub list_cost: f64,
    pub contracted_cost: f64,
    /// The row's tags as a JSON object with sorted keys (`{}` for none).
    pub tags: std::sync::Arc<str>,
    /// A number for the row's tags, the same for the same tags within one file (a key to
    /// group by without hashing their text).
    pub tags_id: u32,
}

/// The header of a data file: its column names, for the version and extra columns.
pub fn header(path: &Path, location: &str) -> Result<Vec<String>, SourceError> {
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    if name.ends_with(".parquet") {
        let file = std::fs::File::open(path).map_err(|e| invalid(location, e))?;
        let mut reader = <polars::prelude::ParquetReader<_> as polars::prelude::SerReader<_>>::new(file);
        let schema = reader
            .schema()
            .map_err(|e| invalid(location, format!("not a readable Parquet file (truncated?): {e}")))?;
        return Ok(schema.iter_names().map(|n| n.to_string()).collect());
    }
    let file = std::fs::File::open(path).map_err(|e| invalid(location, e))?;
    let raw: Box<dyn std::io::Read> = if name.ends_with(".gz") {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let mut lines = std::io::BufReader::new(std::io::Read::take(raw, columns::bounds::MAX_LINE_BYTES as u64));
    let mut first = String::new();
    std::io::BufRead::read_line(&mut lines, &mut first)
        .map_err(|e| invalid(location, format!("the header line cannot be read: {e}")))?;
    Ok(first
        .trim_start_matches('\u{feff}')
        .trim_end()
        .split(',')
        .map(|n| n.trim().trim_matches('"').to_string())
        .filter(|n| !n.is_empty())
        .collect())
}

/// A row's amounts, checked: what a bill sums; with what a row's place does not say (the
/// place is shared by rows alike in their texts and day): its charge period and resource.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Amounts<'a> {
    pub billed_cost: f64,
    pub effective_cost: f64,
    pub list_cost: f64,
    pub contracted_cost: f64,
    pub consumed_quantity: Option<f64>,
    pub charge_period_start: i64,
    pub charge_period_end: i64,
    pub resource_id: &'a str,
    /// `resource_id`'s XXH3-128 hash, worked out once a row: what its identity and the VM
    /// it names are found by (two of a month's resource ids share it with a probability of
    /// about 10⁻²⁷).
    pub resource_key: u128,
}

/// [`Amounts::resource_key`] of a resource id.
fn resource_key(resource_id: &str) -> u128 {
    xxhash_rust::xxh3::xxh3_128(resource_id.as_bytes())
}

impl<'a> Charge<'a> {
    pub fn amounts(&self) -> Amounts<'a> {
        Amounts {
            billed_cost: self.billed_cost,
            effective_cost: self.effective_cost,
            list_cost: self.list_cost,
            contracted_cost: self.contracted_cost,
            consumed_quantity: self.consumed_quantity,
            charge_period_start: self.charge_period_start,
            charge_period_end: self.charge_period_end,
            resource_id: self.resource_id,
            resource_key: resource_key(self.resource_id),
        }
    }
}

/// Where the rows of a file go ([`read_file`]): each row has a place (a bill's charge group,
/// say), found from its charge, and adds its amounts there.
pub trait Visitor {
    type Place: Copy;
    /// The place of `charge`, row `row` of `columns` (for errors naming it). It must depend
    /// only on the charge's texts, its billing period's start and the day its charge starts:
    /// rows alike in those share the place asked for the first of them.
    fn place(
        &mut self,
        charge: &Charge<'_>,
        columns: &Columns<'_>,
        row: usize,
    ) -> Result<Self::Place, SourceError>;
    /// Adds a row's amounts at its place.
    fn add(&mut self, place: Self::Place, amounts: &Amounts<'_>);
}

/// Reads a FOCUS data file's rows, checked, into `visitor`. `names` is the file's
/// [`header`], read once by the caller. Returns the rows read.
///
/// A month repeats a few thousand namings (the texts of a row) millions of times: a chunk
/// whose columns allow it is read by [`Alike`] (each naming checked once, each row's times and
/// amounts checked on their own); any other chunk row by row. Both give the same places, sums,
/// counts and the same refusal, naming the same row.
///
/// Each row's identity ([`row_identity`]) goes to `identities`; a row equal to the one
/// before it is refused there.
pub fn read_file<V: Visitor>(
    path: &Path,
    location: &str,
    names: &[String],
    deviations: &mut Deviations,
    visitor: &mut V,
    identities: &mut RowIdentities,
) -> Result<usize, SourceError> {
    deviations.extra_columns.extend(extra_columns(names));
    let mut tags = TagCache::default();
    let mut alike = Alike::default();
    let mut key = RowKey::default();
    let mut naming = Vec::new();
    identities.begin_file(location);
    columns::read_columns(path, location, &COLUMNS, &mut |columns| {
        if alike.read_chunk(columns, deviations, &mut tags, visitor, identities)? {
            return Ok(());
        }
        for row in 0..columns.rows {
            let charge = read_row(columns, row, deviations, &mut tags)?;
            let tags_as_text = columns.text_array(Col::Tags).is_some() || !columns.has(Col::Tags);
            naming_bytes(&mut naming, columns, row, (!tags_as_text).then_some(&*charge.tags));
            let naming_hash = xxhash_rust::xxh3::xxh3_128(&naming);
            let amounts = charge.amounts();
            let ungrouped = ungrouped_hash(&mut key, columns, row);
            let identity =
                row_identity(&mut key, naming_hash, ungrouped, &amounts, charge.billing_period_start);
            identities.add(identity, columns.first_row() + row)?;
            let place = visitor.place(&charge, columns, row)?;
            visitor.add(place, &amounts);
        }
        Ok(())
    })
}

/// A row's [`NAMING`] texts as they are written, each after its length: `tags` stands for
/// the `Tags` column's text when the file holds them as a map.
fn naming_bytes(bytes: &mut Vec<u8>, c: &Columns<'_>, row: usize, tags: Option<&str>) {
    bytes.clear();
    for column in NAMING {
        let text = match (column, tags) {
            (Col::Tags, Some(tags)) => tags,
            _ => c.text(column, row),
        };
        bytes.extend_from_slice(&(text.len() as u32).to_le_bytes());
        bytes.extend_from_slice(text.as_bytes());
    }
}

/// A FOCUS row's identity. Providers give a row no id, so it is every value gpuledger reads of
/// it: its naming (by the hash of [`naming_bytes`]), the resource (by its hash), the SKU,
/// invoice and commitment it names (by [`ungrouped_hash`]), its billing period, charge period
/// and amounts.
fn row_identity(
    key: &mut RowKey,
    naming_hash: u128,
    ungrouped_hash: u128,
    amounts: &Amounts<'_>,
    billing_period_start: i64,
) -> u128 {
    let halves = |hash: u128| [hash as i64, (hash >> 64) as i64];
    let [naming_low, naming_high] = halves(naming_hash);
    let [resource_low, resource_high] = halves(amounts.resource_key);
    let [ungrouped_low, ungrouped_high] = halves(ungrouped_hash);
    key.clear()
        .int(naming_low)
        .int(naming_high)
        .int(resource_low)
        .int(resource_high)
        .int(ungrouped_low)
        .int(ungrouped_high)
        .int(billing_period_start)
        .int(amounts.charge_period_start)
        .int(amounts.charge_period_end)
        .number(Some(amounts.billed_cost))
        .number(Some(amounts.effective_cost))
        .number(Some(amounts.list_cost))
        .number(Some(amounts.contracted_cost))
        .number(amounts.consumed_quantity)
        .identity()
}

/// The hash of a row's [`UNGROUPED`] texts but the resource (hashed on its own), as written;
/// `key` is scratch space.
fn ungrouped_hash(key: &mut RowKey, c: &Columns<'_>, row: usize) -> u128 {
    key.clear();
    for &column in &UNGROUPED[1..] {
        key.text(c.text(column, row));
    }
    key.identity()
}

/// A number per row of a chunk, equal for two rows exactly when their views are equal in
/// every column of `texts` (a null and an empty text have one view): each column is read on
/// its own, its views numbered in the order first seen, and the numbers combined in mixed
/// radix; when the next column's numbers would not fit, the combined numbers are renumbered
/// densely first (a chunk's rows have at most as many distinct ones as rows).
fn naming_keys(texts: &[Option<&polars_arrow::array::Utf8ViewArray>], rows: usize) -> Vec<u64> {
    use polars_arrow::array::Array;
    let mut keys = vec![0u64; rows];
    // How many distinct values the keys may take so far.
    let mut radix = 1u64;
    let mut codes: rustc_hash::FxHashMap<u128, u64> = Default::default();
    // Each row's number in the column at hand (every column writes every row).
    let mut numbered = vec![0u64; rows];
    for array in texts.iter().flatten() {
        codes.clear();
        let views = &array.views()[..rows];
        let mut number = |view: u128| {
            let next = codes.len() as u64;
            *codes.entry(view).or_insert(next)
        };
        let key_of = |view: &polars_arrow::array::View| if view.length == 0 { 0 } else { view.as_u128() };
        // A row whose view is the row before's takes its number without a lookup: most of a
        // naming's columns hold one value, or long runs of one, in a chunk.
        let mut last: Option<(u128, u64)> = None;
        let mut code_of = |key: u128| match last {
            Some((before, code)) if before == key => code,
            _ => {
                let code = number(key);
                last = Some((key, code));
                code
            }
        };
        match array.validity().filter(|_| array.null_count() > 0) {
            None => {
                for (code, view) in numbered.iter_mut().zip(views) {
                    *code = code_of(key_of(view));
                }
            }
            Some(valid) => {
                for ((code, view), valid) in numbered.iter_mut().zip(views).zip(valid.iter()) {
                    *code = code_of(if valid { key_of(view) } else { 0 });
                }
            }
        }
        let distinct = codes.len() as u64;
        if distinct <= 1 {
            // One value: every row's number is 0, the keys stay as they are.
            continue;
        }
        if radix.checked_mul(distinct).is_none() {
            let mut dense: rustc_hash::FxHashMap<u64, u64> = Default::default();
            for key in keys.iter_mut() {
                let next = dense.len() as u64;
                *key = *dense.entry(*key).or_insert(next);
            }
            radix = dense.len() as u64;
        }
        for (key, code) in keys.iter_mut().zip(&numbered) {
            *key += code * radix;
        }
        radix *= distinct.max(1);
    }
    keys
}

/// The text columns [`read_row`] reads whose values it keeps: a row's naming.
const NAMING: [Col; 27] = [
    Col::ServiceProviderName,
    Col::ProviderName,
    Col::ChargeCategory,
    Col::BillingCurrency,
    Col::BillingAccountId,
    Col::BillingAccountName,
    Col::ChargeClass,
    Col::ChargeFrequency,
    Col::PricingCategory,
    Col::CommitmentDiscountStatus,
    Col::CommitmentDiscountCategory,
    Col::SubAccountId,
    Col::SubAccountName,
    Col::ServiceName,
    Col::ServiceCategory,
    Col::RegionId,
    Col::ResourceType,
    Col::SkuMeter,
    Col::ChargeDescription,
    Col::XUsageType,
    Col::SkuId,
    Col::SkuPriceDetails,
    Col::XSkuDetails,
    Col::XSkuMeterName,
    Col::XSkuDescription,
    Col::ConsumedUnit,
    Col::Tags,
];

/// The other text columns [`read_row`] reads: a visitor's place cannot depend on them (they
/// name one resource, invoice or commitment among thousands); only their `NULL` texts are
/// counted. (The SKU is a naming: a VM's size may be told by its SKU alone.)
const UNGROUPED: [Col; 4] =
    [Col::ResourceId, Col::InvoiceId, Col::CommitmentDiscountId, Col::CommitmentDiscountType];

// The resource comes first: rows' identities take it by its hash ([`row_identity`]).
const _: () = assert!(matches!(UNGROUPED[0], Col::ResourceId));

/// Rows read by their naming: within a chunk, rows of equal views in every [`NAMING`] column
/// have equal texts (a dictionary-encoded column's equal values share one view), so a row's
/// naming is found by hashing its views, without reading its texts. Each naming is checked
/// by [`read_row`] once per file; each row's periods and amounts are checked as `read_row`
/// checks them. A chunk this cannot read exactly as `read_row` would is left to it: columns
/// of other kinds (text timestamps or numbers, map tags), a naming with something counted
/// (`NULL` texts, values in another case) or refused.
struct Alike<P> {
    /// Each naming checked in this file, by its texts (each after its length).
    namings: rustc_hash::FxHashMap<Box<[u8]>, u32>,
    /// The hash of each naming's texts, by its number: the rows' identities start from it.
    naming_hashes: Vec<u128>,
    /// The place of the rows of a naming, billing period start and day.
    places: rustc_hash::FxHashMap<(u32, i64, i64), P>,
}

impl<P> Default for Alike<P> {
    fn default() -> Self {
        Alike { namings: Default::default(), naming_hashes: Vec::new(), places: Default::default() }
    }
}

impl<P: Copy> Alike<P> {
    /// Reads the chunk into `visitor` and says so, or leaves it untouched (nothing added or
    /// counted) and says it could not.
    fn read_chunk<V: Visitor<Place = P>>(
        &mut self,
        c: &Columns<'_>,
        deviations: &mut Deviations,
        tags: &mut TagCache,
        visitor: &mut V,
        identities: &mut RowIdentities,
    ) -> Result<bool, SourceError> {
        use polars_arrow::array::Array;
        let texts = NAMING.map(|column| c.text_array(column));
        if NAMING.iter().chain(&UNGROUPED).any(|&column| c.has(column) && c.text_array(column).is_none()) {
            return Ok(false);
        }
        let times = |column: Col| c.time_array(column).filter(|(array, _)| array.null_count() == 0);
        let (Some(billing_start), Some(charge_start), Some(charge_end)) =
            (times(Col::BillingPeriodStart), times(Col::ChargePeriodStart), times(Col::ChargePeriodEnd))
        else {
            return Ok(false);
        };
        let billing_end = times(Col::BillingPeriodEnd);
        if c.has(Col::BillingPeriodEnd) && billing_end.is_none() {
            return Ok(false);
        }
        const NUMBERS: [Col; 6] = [
            Col::ConsumedQuantity,
            Col::PricingQuantity,
            Col::BilledCost,
            Col::EffectiveCost,
            Col::ListCost,
            Col::ContractedCost,
        ];
        if NUMBERS.iter().any(|&column| c.has(column) && c.float_array(column).is_none()) {
            return Ok(false);
        }
        let numbers = NUMBERS.map(|column| c.float_array(column));
        let null_text = |view: &polars_arrow::array::View| {
            view.length == 4 && view.prefix.to_ne_bytes().eq_ignore_ascii_case(b"null")
        };
        if UNGROUPED
            .iter()
            .filter_map(|&column| c.text_array(column))
            .any(|a| a.views().iter().any(null_text))
        {
            return Ok(false);
        }

        // Each row's naming; a naming new to the file is checked on its first row.
        let keys = naming_keys(&texts, c.rows);
        // The SKU, invoice and commitment texts the same way: each distinct set hashed once.
        let ungrouped_texts: [_; UNGROUPED.len() - 1] =
            std::array::from_fn(|i| c.text_array(UNGROUPED[i + 1]));
        let ungrouped_keys = naming_keys(&ungrouped_texts, c.rows);
        let mut ungrouped_hashes: rustc_hash::FxHashMap<u64, u128> = Default::default();
        let mut last_ungrouped: Option<(u64, u128)> = None;
        let mut in_chunk: rustc_hash::FxHashMap<u64, u32> = Default::default();
        let mut naming_of = Vec::with_capacity(c.rows);
        let mut bytes = Vec::new();
        for (row, key) in keys.into_iter().enumerate() {
            let naming = match in_chunk.get(&key) {
                Some(&naming) => naming,
                None => {
                    naming_bytes(&mut bytes, c, row, None);
                    let naming = match self.namings.get(bytes.as_slice()) {
                        Some(&naming) => naming,
                        None => {
                            let mut seen = Deviations::default();
                            if read_row(c, row, &mut seen, tags).is_err()
                                || seen.null_as_text > 0
                                || seen.values_in_another_case > 0
                            {
                                return Ok(false);
                            }
                            let naming = self.namings.len() as u32;
                            self.namings.insert(bytes.clone().into_boxed_slice(), naming);
                            self.naming_hashes.push(xxhash_rust::xxh3::xxh3_128(&bytes));
                            naming
                        }
                    };
                    in_chunk.insert(key, naming);
                    naming
                }
            };
            naming_of.push(naming);
        }

        // Each row's periods and amounts, checked in read_row's order, its identity and its
        // place.
        let mut key = RowKey::default();
        let seconds = |(array, per_second): (&polars_arrow::array::PrimitiveArray<i64>, i64), row: usize| {
            array.value(row).div_euclid(per_second)
        };
        for (row, &naming) in naming_of.iter().enumerate() {
            let start = seconds(billing_start, row);
            let end = billing_end.map(|end| seconds(end, row));
            let (charge_start, charge_end) = (seconds(charge_start, row), seconds(charge_end, row));
            check_periods(c, row, (start, end), (charge_start, charge_end), deviations)?;
            let mut values = [0.0; NUMBERS.len()];
            let mut consumed = None;
            for (i, (&column, array)) in NUMBERS.iter().zip(&numbers).enumerate() {
                let quick = array.filter(|a| a.is_valid(row)).map(|a| a.value(row));
                values[i] = match quick {
                    Some(value) if value.is_finite() && value.abs() <= columns::MAX_ABS_AMOUNT => value,
                    _ if i < 2 => quantity(c, column, row, deviations)?.unwrap_or(0.0),
                    _ => cost(c, column, row, deviations)?,
                };
                if i == 0 {
                    consumed = quick;
                }
            }
            let day = charge_start - charge_start.rem_euclid(86_400);
            let place = match self.places.get(&(naming, start, day)) {
                Some(&place) => place,
                None => {
                    let charge = read_row(c, row, &mut Deviations::default(), tags)?;
                    let place = visitor.place(&charge, c, row)?;
                    self.places.insert((naming, start, day), place);
                    place
                }
            };
            let resource_id = c.text(Col::ResourceId, row);
            let amounts = Amounts {
                billed_cost: values[2],
                effective_cost: values[3],
                list_cost: values[4],
                contracted_cost: values[5],
                consumed_quantity: consumed,
                charge_period_start: charge_start,
                charge_period_end: charge_end,
                resource_id,
                resource_key: resource_key(resource_id),
            };
            let naming_hash = self.naming_hashes[naming as usize];
            let ungrouped = match last_ungrouped {
                Some((known, hash)) if known == ungrouped_keys[row] => hash,
                _ => {
                    let hash = *ungrouped_hashes
                        .entry(ungrouped_keys[row])
                        .or_insert_with(|| ungrouped_hash(&mut key, c, row));
                    last_ungrouped = Some((ungrouped_keys[row], hash));
                    hash
                }
            };
            identities
                .add(row_identity(&mut key, naming_hash, ungrouped, &amounts, start), c.first_row() + row)?;
            visitor.add(place, &amounts);
        }
        Ok(true)
    }
}

/// Text of a cell with the two null spellings real exports use turned into empty text (and
/// counted).
fn text<'a>(c: &Columns<'a>, column: Col, row: usize, deviations: &mut Deviations) -> &'a str {
    let value = c.text(column, row);
    if value.eq_ignore_ascii_case("null") {
        deviations.null_as_text += 1;
        ""
    } else {
        value
    }
}

/// An enumerated value: exactly one of `allowed`, or one in another case (counted); `None`
/// for null. Anything else is refused.
fn one_of(
    c: &Columns<'_>,
    column: Col,
    row: usize,
    allowed: &[&'static str],
    deviations: &mut Deviations,
) -> Result<Option<&'static str>, SourceError> {
    let value = text(c, column, row, deviations).trim();
    if value.is_empty() {
        return Ok(None);
    }
    if let Some(exact) = allowed.iter().find(|a| **a == value) {
        return Ok(Some(exact));
    }
    if let Some(folded) = allowed.iter().find(|a| a.eq_ignore_ascii_case(value)) {
        deviations.values_in_another_case += 1;
        return Ok(Some(folded));
    }
    Err(c.bad(row, column, format!("{value:?} is not one of FOCUS's values ({})", allowed.join(", "))))
}

/// A cost: a decimal number, never null (FOCUS's rule); the reader refuses non-finite and
/// absurd amounts. A null BilledCost or EffectiveCost is refused (the bill would be unknown);
/// a null ListCost or ContractedCost reads as 0 and is counted.
fn cost(c: &Columns<'_>, column: Col, row: usize, deviations: &mut Deviations) -> Result<f64, SourceError> {
    if !c.has(column) {
        return Ok(0.0);
    }
    let null = if text(c, column, row, deviations).is_empty() && !c.text(column, row).is_empty() {
        None
    } else {
        c.number(column, row)?
    };
    match (null, column) {
        (Some(value), _) => Ok(value),
        (None, Col::ListCost | Col::ContractedCost) => {
            deviations.null_list_or_contracted_costs += 1;
            Ok(0.0)
        }
        (None, _) => Err(c.bad(row, column, "a cost is never null in FOCUS")),
    }
}

/// An optional quantity; the text `NULL` is a null.
fn quantity(
    c: &Columns<'_>,
    column: Col,
    row: usize,
    deviations: &mut Deviations,
) -> Result<Option<f64>, SourceError> {
    if text(c, column, row, deviations).is_empty() && !c.text(column, row).is_empty() {
        return Ok(None);
    }
    c.number(column, row)
}

/// A timestamp, UTC: `YYYY-MM-DDTHH:MM:SSZ` as FOCUS writes it, or (counted) the same
/// instant written without `T` and `Z`, with fractions or with `+00:00`. Another offset is
/// refused: FOCUS's periods are UTC, and a local time would shift the charge's day.
fn timestamp(
    c: &Columns<'_>,
    column: Col,
    row: usize,
    deviations: &mut Deviations,
) -> Result<i64, SourceError> {
    let raw = c.text(column, row);
    if !raw.is_empty() {
        let value = raw.trim();
        if value.eq_ignore_ascii_case("null") {
            return Err(c.bad(row, column, "a period's bound is never null in FOCUS"));
        }
        let canonical =
            value.len() == 20 && value.as_bytes()[10] == b'T' && value.ends_with('Z') && !value.contains('.');
        if !canonical {
            let offset = value.get(19..).unwrap_or("");
            let offset = offset.trim_start_matches(|ch: char| ch == '.' || ch.is_ascii_digit());
            if !matches!(offset, "" | "Z" | "+00:00" | "+0000" | "-00:00") {
                return Err(c.bad(row, column, format!("{value:?} is not in UTC (FOCUS's periods are UTC)")));
            }
            deviations.timestamps_not_iso += 1;
        }
        let trimmed = value.trim_end_matches("+00:00").trim_end_matches("+0000").trim_end_matches("-00:00");
        return columns::parse_timestamp(trimmed)
            .ok_or_else(|| c.bad(row, column, format!("{value:?} is not a timestamp")));
    }
    c.epoch_seconds(column, row)
}

/// The row's tags as a JSON object with sorted keys; FOCUS allows flat values of any JSON
/// kind, so numbers and booleans are written as text (a tag without a value is `true`).
/// Tags as text normalized once per distinct text: a month repeats a few thousand tag sets
/// millions of times. At most [`TagCache::MAX`] texts are kept; the rest are normalized each
/// time. Each distinct normalized text has a number ([`Charge::tags_id`]).
#[derive(Default)]
struct TagCache {
    normalized: rustc_hash::FxHashMap<String, (std::sync::Arc<str>, u32)>,
    ids: rustc_hash::FxHashMap<std::sync::Arc<str>, u32>,
}

impl TagCache {
    const MAX: usize = 100_000;

    /// The number of a normalized text, and the text kept once.
    fn id(&mut self, normalized: String) -> (std::sync::Arc<str>, u32) {
        if let Some((kept, id)) = self.ids.get_key_value(normalized.as_str()) {
            return (kept.clone(), *id);
        }
        let kept: std::sync::Arc<str> = normalized.into();
        let id = self.ids.len() as u32;
        self.ids.insert(kept.clone(), id);
        (kept, id)
    }
}

fn tags(
    c: &Columns<'_>,
    row: usize,
    deviations: &mut Deviations,
    cache: &mut TagCache,
) -> Result<(std::sync::Arc<str>, u32), SourceError> {
    let raw = c.text(Col::Tags, row).trim();
    if let Some(known) = cache.normalized.get(raw) {
        if raw.eq_ignore_ascii_case("null") {
            deviations.null_as_text += 1;
        }
        return Ok(known.clone());
    }
    let normalized = cache.id(normalized_tags(c, row, raw, deviations)?);
    if !raw.is_empty() && cache.normalized.len() < TagCache::MAX {
        cache.normalized.insert(raw.to_string(), normalized.clone());
    }
    Ok(normalized)
}

/// A row's tags as a JSON object with sorted keys, from its text (`raw`) or its map column.
fn normalized_tags(
    c: &Columns<'_>,
    row: usize,
    raw: &str,
    deviations: &mut Deviations,
) -> Result<String, SourceError> {
    let pairs: Vec<(String, String)> = if raw.eq_ignore_ascii_case("null") {
        deviations.null_as_text += 1;
        Vec::new()
    } else if !raw.is_empty() {
        let parsed: serde_json::Map<String, serde_json::Value> = serde_json::from_str(raw)
            .map_err(|e| c.bad(row, Col::Tags, format!("not a JSON object of tags: {e}")))?;
        parsed
            .into_iter()
            .map(|(key, value)| match value {
                serde_json::Value::String(text) => Ok((key, text)),
                serde_json::Value::Number(n) => Ok((key, n.to_string())),
                serde_json::Value::Bool(b) => Ok((key, b.to_string())),
                serde_json::Value::Null => Ok((key, String::new())),
                other => Err(c.bad(row, Col::Tags, format!("tag {key:?} has a nested value {other}"))),
            })
            .collect::<Result<_, _>>()?
    } else {
        c.map(Col::Tags, row)?.into_iter().map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
    };
    let sorted: std::collections::BTreeMap<String, String> = pairs.into_iter().collect();
    Ok(serde_json::to_string(&sorted).unwrap_or_else(|_| "{}".into()))
}

/// A row's periods against FOCUS's rules: a charge period that ends before it starts, or
/// that starts after its billing period's (exclusive) end, is refused; one that starts before
/// its billing period is counted.
fn check_periods(
    c: &Columns<'_>,
    row: usize,
    (billing_start, billing_end): (i64, Option<i64>),
    (charge_start, charge_end): (i64, i64),
    deviations: &mut Deviations,
) -> Result<(), SourceError> {
    if charge_end < charge_start {
        return Err(c.bad(row, Col::ChargePeriodEnd, "the charge period ends before it starts"));
    }
    if let Some(end) = billing_end
        && end <= billing_start
    {
        return Err(c.bad(row, Col::BillingPeriodEnd, "the billing period ends before it starts"));
    }
    // The end is exclusive: a charge starting at the billing period's end is the next one's,
    // and refused here. One starting before its billing period is late usage billed in a
    // later period (Oracle's sample has one; corrections are others): its bill is plain,
    // so it is counted, not refused.
    if let Some(end) = billing_end
        && charge_start >= end
    {
        return Err(c.bad(
            row,
            Col::ChargePeriodStart,
            format!(
                "the charge starts at {}, after its billing period [{}, {}) ends (FOCUS's ends are exclusive)",
                iso(charge_start),
                iso(billing_start),
                iso(end)
            ),
        ));
    }
    if charge_end - charge_start > MAX_CHARGE_PERIOD_SECONDS {
        return Err(c.bad(
            row,
            Col::ChargePeriodEnd,
            format!(
                "the charge period [{}, {}) spans more than five years: a charge covers an hour, a day, a \
                 billing period or a commitment's term",
                iso(charge_start),
                iso(charge_end)
            ),
        ));
    }
    if charge_start < billing_start {
        deviations.charges_before_billing_period += 1;
    }
    Ok(())
}

/// The longest charge period a row may have: a commitment's term (one or three years, five
/// at most), not `9999-12-31`.
const MAX_CHARGE_PERIOD_SECONDS: i64 = 5 * 366 * 86_400;

fn read_row<'a>(
    c: &Columns<'a>,
    row: usize,
    deviations: &mut Deviations,
    tag_cache: &mut TagCache,
) -> Result<Charge<'a>, SourceError> {
    // A NUL byte in a text is no export's: a file cut or joined wrongly.
    for column in NAMING.iter().chain(&UNGROUPED) {
        if c.text(*column, row).contains('\0') {
            return Err(c.bad(row, *column, "holds a NUL byte: the file is damaged; nothing was ingested"));
        }
    }
    let provider = match text(c, Col::ServiceProviderName, row, deviations) {
        "" => text(c, Col::ProviderName, row, deviations),
        named => named,
    };
    let charge_category = one_of(c, Col::ChargeCategory, row, &CHARGE_CATEGORIES, deviations)?
        .ok_or_else(|| c.bad(row, Col::ChargeCategory, "ChargeCategory is never null in FOCUS"))?;
    let billing_currency = text(c, Col::BillingCurrency, row, deviations).trim();
    if billing_currency.len() != 3 || !billing_currency.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(c.bad(
            row,
            Col::BillingCurrency,
            format!("{billing_currency:?} is not an ISO 4217 currency code (three capital letters)"),
        ));
    }
    let billing_period_start = timestamp(c, Col::BillingPeriodStart, row, deviations)?;
    let billing_period_end = if c.has(Col::BillingPeriodEnd) {
        Some(timestamp(c, Col::BillingPeriodEnd, row, deviations)?)
    } else {
        None
    };
    let charge_period_start = timestamp(c, Col::ChargePeriodStart, row, deviations)?;
    let charge_period_end = timestamp(c, Col::ChargePeriodEnd, row, deviations)?;
    check_periods(
        c,
        row,
        (billing_period_start, billing_period_end),
        (charge_period_start, charge_period_end),
        deviations,
    )?;
    let (tags, tags_id) = tags(c, row, deviations, tag_cache)?;
    Ok(Charge {
        provider,
        billing_account_id: text(c, Col::BillingAccountId, row, deviations),
        billing_account_name: text(c, Col::BillingAccountName, row, deviations),
        billing_currency,
        billing_period_start,
        billing_period_end,
        charge_period_start,
        charge_period_end,
        charge_category,
        charge_class: one_of(c, Col::ChargeClass, row, &CHARGE_CLASSES, deviations)?,
        charge_frequency: one_of(c, Col::ChargeFrequency, row, &CHARGE_FREQUENCIES, deviations)?,
        pricing_category: one_of(c, Col::PricingCategory, row, &PRICING_CATEGORIES, deviations)?,
        commitment_discount_status: one_of(
            c,
            Col::CommitmentDiscountStatus,
            row,
            &COMMITMENT_STATUSES,
            deviations,
        )?,
        commitment_discount_id: text(c, Col::CommitmentDiscountId, row, deviations),
        commitment_discount_type: text(c, Col::CommitmentDiscountType, row, deviations),
        commitment_discount_category: one_of(
            c,
            Col::CommitmentDiscountCategory,
            row,
            &COMMITMENT_CATEGORIES,
            deviations,
        )?,
        sub_account_id: text(c, Col::SubAccountId, row, deviations),
        sub_account_name: text(c, Col::SubAccountName, row, deviations),
        service_name: text(c, Col::ServiceName, row, deviations),
        service_category: text(c, Col::ServiceCategory, row, deviations),
        region: text(c, Col::RegionId, row, deviations),
        resource_id: text(c, Col::ResourceId, row, deviations),
        resource_type: text(c, Col::ResourceType, row, deviations),
        sku_id: text(c, Col::SkuId, row, deviations),
        sku_meter: text(c, Col::SkuMeter, row, deviations),
        charge_description: text(c, Col::ChargeDescription, row, deviations),
        usage_type: text(c, Col::XUsageType, row, deviations),
        sku_price_details: text(c, Col::SkuPriceDetails, row, deviations),
        x_sku_details: text(c, Col::XSkuDetails, row, deviations),
        x_sku_meter_name: text(c, Col::XSkuMeterName, row, deviations),
        x_sku_description: text(c, Col::XSkuDescription, row, deviations),
        invoice_id: text(c, Col::InvoiceId, row, deviations),
        consumed_unit: text(c, Col::ConsumedUnit, row, deviations),
        consumed_quantity: quantity(c, Col::ConsumedQuantity, row, deviations)?,
        pricing_quantity: quantity(c, Col::PricingQuantity, row, deviations)?,
        billed_cost: cost(c, Col::BilledCost, row, deviations)?,
        effective_cost: cost(c, Col::EffectiveCost, row, deviations)?,
        list_cost: cost(c, Col::ListCost, row, deviations)?,
        contracted_cost: cost(c, Col::ContractedCost, row, deviations)?,
        tags,
        tags_id,
    })
}

/// An epoch second as FOCUS writes it.
pub fn iso(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .map_or_else(|| seconds.to_string(), |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// The billing period (`YYYY-MM`) a `BillingPeriodStart` falls in; whether it is a calendar
/// month's first midnight.
pub fn billing_month(start: i64) -> Option<(Period, bool)> {
    chrono::DateTime::from_timestamp(start, 0)?;
    let period = Period::containing(start);
    Some((period, period.start() == start))
}

/// How a provider lays out its FOCUS export, told from what the source holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// AWS Data Exports: `metadata/BILLING_PERIOD=YYYY-MM/…-Manifest.json` and `data/…`, as CUR 2.0.
    AwsDataExport,
    /// Azure Cost Management exports: per run, a folder of `part_N_NNNN` files and the
    /// `manifest.json` listing them, under a folder per date range; the latest run of a range
    /// replaces the ones before.
    AzureExport,
    /// Oracle Cloud's cost reports: `FOCUS Reports/YYYY/MM/DD/*.csv.gz`, a file per day.
    OciReports,
    /// Data files with no manifest: each row's provider and billing period columns say whose
    /// and which month it is.
    Plain,
}

impl Layout {
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::AwsDataExport => "AWS Data Exports",
            Layout::AzureExport => "Azure Cost Management export",
            Layout::OciReports => "OCI FOCUS reports",
            Layout::Plain => "FOCUS files",
        }
    }
}

/// One Azure export run, as its `manifest.json` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AzureRun {
    /// The manifest's key.
    pub manifest_key: String,
    /// The run's date-range folder (`…/20261001-20261031`): a later run of it replaces this one.
    pub range: String,
    /// `runInfo.runId`, else the submitted time, else the manifest's key.
    pub run_id: String,
    pub submitted: String,
    /// `exportConfig.dataVersion` (`1.0`, `1.0r2`, `1.2-preview`) as a FOCUS version.
    pub version: Option<Version>,
    /// The run's data files, as keys of the store.
    pub files: Vec<String>,
    /// How many data rows each file holds, as the manifest says (`dataRowCount`).
    pub rows: Vec<Option<u64>>,
    /// The month its date-range folder (`20261001-20261031`) is of, when it names one.
    pub month: Option<Period>,
}

/// The month an Azure export's date-range folder (`…/20261001-20261031`) starts in.
pub fn range_month(range: &str) -> Option<Period> {
    let name = range.rsplit('/').next()?;
    let (start, _) = name.split_once('-')?;
    if start.len() != 8 || !start.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    format!("{}-{}", &start[..4], &start[4..6]).parse().ok()
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AzureManifest {
    #[serde(default)]
    export_config: Option<AzureExportConfig>,
    #[serde(default)]
    run_info: Option<AzureRunInfo>,
    blobs: Vec<AzureBlob>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AzureExportConfig {
    #[serde(default)]
    data_version: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AzureRunInfo {
    #[serde(default)]
    run_id: Option<String>,
    #[serde(default)]
    submitted_time: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AzureBlob {
    blob_name: String,
    #[serde(default)]
    data_row_count: Option<u64>,
}

/// Azure's `dataVersion` as a FOCUS version: `1.0` and `1.0r2` (a re-release of 1.0's
/// columns) are 1.0, `1.2-preview` is 1.2.
pub fn azure_data_version(text: &str) -> Option<Version> {
    let numbers = text.trim().trim_start_matches(['v', 'V']);
    match numbers.get(..3)? {
        "1.0" => Some(Version::V1_0),
        "1.1" => Some(Version::V1_1),
        "1.2" => Some(Version::V1_2),
        "1.3" => Some(Version::V1_3),
        _ => None,
    }
}

/// The Azure export runs under `prefix` (a few folders down), the latest run of each date
/// range only, oldest range first. Empty when there is no `manifest.json` of Azure's shape.
pub async fn azure_runs(
    store: &dyn ObjectStore,
    prefix: &str,
    depth: u32,
) -> Result<Vec<AzureRun>, SourceError> {
    let mut runs = Vec::new();
    find_azure_runs(store, prefix, depth, &mut runs).await?;
    // The latest run of a range replaces the earlier ones (a new month-to-date run).
    runs.sort_by(|a, b| (&a.range, &a.submitted, &a.run_id).cmp(&(&b.range, &b.submitted, &b.run_id)));
    let mut latest: Vec<AzureRun> = Vec::new();
    for run in runs {
        match latest.last_mut() {
            Some(last) if last.range == run.range => *last = run,
            _ => latest.push(run),
        }
    }
    Ok(latest)
}

async fn find_azure_runs(
    store: &dyn ObjectStore,
    prefix: &str,
    depth: u32,
    runs: &mut Vec<AzureRun>,
) -> Result<(), SourceError> {
    if store.files(prefix).await?.iter().any(|f| f == "manifest.json") {
        let key = format!("{prefix}manifest.json");
        if let Some(object) = store.get(&key).await? {
            // Another tool's manifest.json is not an Azure run: it has no `blobs`.
            if let Ok(manifest) = serde_json::from_slice::<AzureManifest>(&object.bytes) {
                let config = manifest.export_config.as_ref();
                if let Some(kind) = config.and_then(|c| c.kind.as_deref())
                    && !kind.eq_ignore_ascii_case("FocusCost")
                {
                    return Err(invalid(
                        store.locate(&key),
                        format!("an Azure export of type {kind}, not FocusCost: export the FOCUS dataset"),
                    ));
                }
                let folder = prefix.trim_end_matches('/');
                let range = folder.rsplit_once('/').map_or("", |(parent, _)| parent).to_string();
                let month = range_month(&range);
                let info = manifest.run_info.as_ref();
                let submitted = info.and_then(|i| i.submitted_time.clone()).unwrap_or_default();
                let mut files = Vec::new();
                let mut rows = Vec::new();
                for blob in &manifest.blobs {
                    // The parts lie beside their manifest, whatever container path it names.
                    let name = blob.blob_name.rsplit('/').next().unwrap_or(&blob.blob_name);
                    if !is_data_file(name) {
                        return Err(invalid(
                            store.locate(&key),
                            format!(
                                "lists {:?}, which is not a CSV, gzip CSV or Parquet file",
                                blob.blob_name
                            ),
                        ));
                    }
                    files.push(format!("{prefix}{name}"));
                    rows.push(blob.data_row_count);
                }
                runs.push(AzureRun {
                    manifest_key: key.clone(),
                    range,
                    run_id: info.and_then(|i| i.run_id.clone()).filter(|r| !r.is_empty()).unwrap_or_else(
                        || {
                            if submitted.is_empty() { key.clone() } else { submitted.clone() }
                        },
                    ),
                    submitted,
                    version: config.and_then(|c| c.data_version.as_deref()).and_then(azure_data_version),
                    files,
                    rows,
                    month,
                });
                return Ok(());
            }
        }
    }
    if depth > 0 {
        for folder in store.folders(prefix).await? {
            Box::pin(find_azure_runs(store, &format!("{prefix}{folder}/"), depth - 1, runs)).await?;
        }
    }
    Ok(())
}

/// Oracle's report folder under a source, when it is one: `FOCUS Reports/` at its root, or
/// the source itself (then `""`).
pub async fn oci_reports(store: &dyn ObjectStore) -> Result<Option<String>, SourceError> {
    if store.folders("").await?.iter().any(|f| f == "FOCUS Reports") {
        return Ok(Some("FOCUS Reports/".into()));
    }
    let described = store.describe();
    Ok(described.trim_end_matches('/').ends_with("FOCUS Reports").then(String::new))
}

/// The data files of a plain FOCUS source under `prefix` (recursively, a few levels), sorted.
pub async fn plain_files(
    store: &dyn ObjectStore,
    prefix: &str,
    depth: u32,
) -> Result<Vec<String>, SourceError> {
    let mut found: Vec<String> = store
        .files(prefix)
        .await?
        .into_iter()
        .filter(|f| is_data_file(f))
        .map(|f| format!("{prefix}{f}"))
        .collect();
    if depth > 0 {
        for folder in store.folders(prefix).await? {
            found.extend(Box::pin(plain_files(store, &format!("{prefix}{folder}/"), depth - 1)).await?);
        }
    }
    found.sort();
    Ok(found)
}

/// A FOCUS data file by its name: CSV, gzip CSV or Parquet.
pub fn is_data_file(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".csv") || lower.ends_with(".csv.gz") || lower.ends_with(".parquet")
}

#[cfg(test)]
mod tests {
    use super::*;
    use polars::prelude::*;
    use std::path::PathBuf;

    /// One row of [`month`]'s files.
    struct Row {
        billed: f64,
        effective: f64,
        consumed: Option<f64>,
        category: &'static str,
        service: &'static str,
        tags: &'static str,
        /// Hours after 2026-10-01T00:00:00Z the charge starts and ends.
        hours: (i64, i64),
    }

    /// `rows` rows of 4 namings (2 services, tagged or not) on 3 days, each its own resource:
    /// billed 1.25, effective (row % 4) × 0.5, consumed 1 (null every 10th row), an hour
    /// long; `tweak` may change any. Written twice: Parquet of typed columns in row groups of
    /// 500 rows, and CSV (every cell text, read row by row).
    fn month(dir: &Path, rows: usize, tweak: impl Fn(usize, &mut Row)) -> [PathBuf; 2] {
        let all: Vec<Row> = (0..rows)
            .map(|i| {
                let hour = (i % 3) as i64 * 24 + (i % 24) as i64;
                let mut row = Row {
                    billed: 1.25,
                    effective: (i % 4) as f64 * 0.5,
                    consumed: (i % 10 != 9).then_some(1.0),
                    category: "Usage",
                    service: ["Compute Engine", "Cloud Storage"][i % 2],
                    tags: [r#"{"team":"a"}"#, ""][(i / 2) % 2],
                    hours: (hour, hour + 1),
                };
                tweak(i, &mut row);
                row
            })
            .collect();
        let start = 1_790_812_800_i64; // 2026-10-01T00:00:00Z
        let text = |name: &str, f: &dyn Fn(&Row) -> String| {
            Column::new(
                name.into(),
                all.iter().map(|r| Some(f(r)).filter(|t| !t.is_empty())).collect::<Vec<_>>(),
            )
        };
        let number = |name: &str, f: &dyn Fn(&Row) -> Option<f64>| {
            Column::new(name.into(), all.iter().map(f).collect::<Vec<_>>())
        };
        let time = |name: &str, f: &dyn Fn(&Row) -> i64| {
            Series::new(name.into(), all.iter().map(|r| f(r) * 1000).collect::<Vec<_>>())
                .cast(&DataType::Datetime(TimeUnit::Milliseconds, Some(TimeZone::UTC)))
                .unwrap()
                .into_column()
        };
        let columns = vec![
            number("BilledCost", &|r| Some(r.billed)),
            number("EffectiveCost", &|r| Some(r.effective)),
            number("ConsumedQuantity", &|r| r.consumed),
            text("BillingCurrency", &|_| "USD".into()),
            text("BillingAccountId", &|_| "A".into()),
            time("BillingPeriodStart", &|_| start),
            time("BillingPeriodEnd", &|_| start + 31 * 86_400),
            time("ChargePeriodStart", &|r| start + r.hours.0 * 3_600),
            time("ChargePeriodEnd", &|r| start + r.hours.1 * 3_600),
            text("ChargeCategory", &|r| r.category.into()),
            text("ProviderName", &|_| "Google Cloud".into()),
            text("ServiceName", &|r| r.service.into()),
            text("ResourceId", &|r| format!("vm-{}", r.hours.0 * 7 + r.billed as i64)),
            text("Tags", &|r| r.tags.into()),
        ];
        let mut frame = DataFrame::new(rows, columns).unwrap();
        let parquet = dir.join("month.parquet");
        ParquetWriter::new(std::fs::File::create(&parquet).unwrap())
            .with_row_group_size(Some(500))
            .finish(&mut frame)
            .unwrap();
        let iso = |hours: i64| iso(start + hours * 3_600);
        let mut csv = String::from(
            "BilledCost,EffectiveCost,ConsumedQuantity,BillingCurrency,BillingAccountId,BillingPeriodStart,\
             BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ProviderName,ServiceName,\
             ResourceId,Tags\n",
        );
        for r in &all {
            csv.push_str(&format!(
                "{},{},{},USD,A,{},{},{},{},{},Google Cloud,{},vm-{},\"{}\"\n",
                r.billed,
                r.effective,
                r.consumed.map(|c| c.to_string()).unwrap_or_default(),
                iso(0),
                iso(31 * 24),
                iso(r.hours.0),
                iso(r.hours.1),
                r.category,
                r.service,
                r.hours.0 * 7 + r.billed as i64,
                r.tags.replace('"', "\"\""),
            ));
        }
        let text_file = dir.join("month.csv");
        std::fs::write(&text_file, csv).unwrap();
        [parquet, text_file]
    }

    /// A place's service, tags and day.
    type PlaceKey = (String, String, i64);
    /// A place's rows and sums: billed, effective, consumed.
    type Sums = (usize, f64, f64, f64);

    /// Each place with its sums, and how often the reader asked for a place.
    #[derive(Default, Debug, PartialEq)]
    struct Tally {
        asked: usize,
        places: Vec<(PlaceKey, Sums)>,
    }

    impl Visitor for Tally {
        type Place = usize;
        fn place(&mut self, charge: &Charge<'_>, _: &Columns<'_>, _: usize) -> Result<usize, SourceError> {
            self.asked += 1;
            let day = charge.charge_period_start.div_euclid(86_400);
            let key = (charge.service_name.to_string(), charge.tags.to_string(), day);
            Ok(self.places.iter().position(|(k, _)| *k == key).unwrap_or_else(|| {
                self.places.push((key, (0, 0.0, 0.0, 0.0)));
                self.places.len() - 1
            }))
        }
        fn add(&mut self, place: usize, amounts: &Amounts<'_>) {
            let sums = &mut self.places[place].1;
            sums.0 += 1;
            sums.1 += amounts.billed_cost;
            sums.2 += amounts.effective_cost;
            sums.3 += amounts.consumed_quantity.unwrap_or(0.0);
        }
    }

    fn tally(path: &Path) -> Result<(Tally, Deviations), SourceError> {
        let location = path.file_name().unwrap().to_string_lossy().to_string();
        let names = header(path, &location)?;
        let (mut tally, mut deviations) = (Tally::default(), Deviations::default());
        read_file(path, &location, &names, &mut deviations, &mut tally, &mut RowIdentities::default())?;
        Ok((tally, deviations))
    }

    /// The places' sums in all: rows, billed, effective, consumed.
    fn totals(tally: &Tally) -> Sums {
        tally.places.iter().fold((0, 0.0, 0.0, 0.0), |t, (_, s)| (t.0 + s.0, t.1 + s.1, t.2 + s.2, t.3 + s.3))
    }

    /// Column `n` of [`NAMED`].
    #[derive(Clone, Copy)]
    struct Nth(usize);
    const NAMED: [&str; 10] = ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"];
    impl ColumnId for Nth {
        fn index(self) -> usize {
            self.0
        }
        fn column_name(self) -> &'static str {
            NAMED[self.0]
        }
    }

    #[test]
    fn rows_have_one_naming_key_exactly_when_their_texts_are_equal() {
        // 1,000 rows, 10 columns of 97 values each (more combinations than a u64 holds, so the
        // keys are renumbered on the way), short and long texts, written as Parquet
        // (dictionary-encoded, as exports are); in the first column a null and an empty text
        // are the same.
        let rows = 1_000;
        let columns: Vec<Column> = (0..NAMED.len())
            .map(|c| {
                let values: Vec<Option<String>> = (0..rows)
                    .map(|row| {
                        let value = (row * (c + 3) + row / 7) % 97;
                        match (c, value) {
                            (0, 0) => None,
                            (0, 1) => Some(String::new()),
                            _ if c % 2 == 0 => Some(format!("{value}")),
                            _ => Some(format!("a text longer than twelve bytes {value}")),
                        }
                    })
                    .collect();
                Column::new(NAMED[c].into(), values)
            })
            .collect();
        let mut frame = DataFrame::new(rows, columns).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("namings.parquet");
        ParquetWriter::new(std::fs::File::create(&path).unwrap()).finish(&mut frame).unwrap();
        let set = ColumnSet { names: &NAMED, required: 0, maps: &[], kind: "test" };
        let mut same = 0;
        columns::read_columns(&path, "namings.parquet", &set, &mut |c| {
            let texts: Vec<_> = (0..NAMED.len()).map(|n| c.text_array(Nth(n))).chain([None]).collect();
            let distinct = (0..NAMED.len())
                .map(|n| (0..c.rows).map(|row| c.text(Nth(n), row)).collect::<BTreeSet<_>>().len() as f64);
            assert!(distinct.product::<f64>() > u64::MAX as f64);
            let keys = naming_keys(&texts, c.rows);
            let text = |row: usize| -> Vec<&str> { (0..NAMED.len()).map(|n| c.text(Nth(n), row)).collect() };
            for a in 0..c.rows {
                for b in a + 1..c.rows {
                    // Equal keys are equal texts; equal texts of one dictionary, equal keys.
                    assert_eq!(keys[a] == keys[b], text(a) == text(b), "rows {a} and {b}");
                    same += usize::from(keys[a] == keys[b]);
                }
            }
            Ok(())
        })
        .unwrap();
        // Rows whose values agree in every column: some (row % 97 repeats), not all.
        assert!(same > 0 && same < rows * (rows - 1) / 2, "{same} pairs alike");
    }

    #[test]
    fn a_row_has_one_identity_whether_read_by_its_naming_or_on_its_own() {
        // The Parquet file is read by namings, its CSV twin row by row: the same rows in other
        // bytes, so the twin's first row is the Parquet file's first again. Each row's billed
        // cost tells it from the others (in binary fractions, written exactly as text).
        let dir = tempfile::tempdir().unwrap();
        let [parquet, csv] = month(dir.path(), 3_000, |i, row| row.billed = 1.25 + i as f64 / 64.0);
        let mut identities = RowIdentities::default();
        for path in [&parquet, &csv] {
            let location = path.file_name().unwrap().to_string_lossy().to_string();
            let names = header(path, &location).unwrap();
            let (mut tally, mut deviations) = (Tally::default(), Deviations::default());
            read_file(path, &location, &names, &mut deviations, &mut tally, &mut identities).unwrap();
        }
        let message = identities.check().unwrap_err().to_string();
        let parquet_name = parquet.file_name().unwrap().to_string_lossy().to_string();
        assert!(message.contains(&format!("data row 1 is data row 1 of {parquet_name} again")), "{message}");
    }

    #[test]
    fn rows_read_by_their_naming_sum_as_rows_read_one_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let [parquet, csv] = month(dir.path(), 3_000, |_, _| {});
        let (by_naming, parquet_deviations) = tally(&parquet).unwrap();
        let (one_by_one, csv_deviations) = tally(&csv).unwrap();
        // 4 namings on 3 days: each place asked for once in the typed file, every row in the
        // text one.
        assert_eq!(by_naming.asked, 12);
        assert_eq!(one_by_one.asked, 3_000);
        assert_eq!(by_naming.places, one_by_one.places);
        // 3,000 × 1.25; 750 × (0 + 0.5 + 1 + 1.5); 3,000 − 300 nulls.
        assert_eq!(totals(&by_naming), (3_000, 3_750.0, 2_250.0, 2_700.0));
        assert_eq!(parquet_deviations, csv_deviations);
    }

    #[test]
    fn a_chunk_with_a_null_written_as_text_is_read_row_by_row_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let [parquet, csv] = month(dir.path(), 3_000, |i, row| {
            if i == 1_700 {
                row.service = "NULL";
            }
        });
        let (by_naming, parquet_deviations) = tally(&parquet).unwrap();
        let (one_by_one, _) = tally(&csv).unwrap();
        // Rows 1,500–1,999 (a row group) one by one; the 12 places once before them.
        assert_eq!(by_naming.asked, 12 + 500);
        assert_eq!(by_naming.places, one_by_one.places);
        assert_eq!(parquet_deviations.null_as_text, 1);
        let nameless = by_naming.places.iter().find(|((service, ..), _)| service.is_empty()).unwrap();
        assert_eq!(nameless.1.0, 1);
    }

    #[test]
    fn a_typed_file_refuses_the_row_a_row_by_row_reading_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let nan = |at: usize| {
            move |i: usize, row: &mut Row| {
                if i == at {
                    row.billed = f64::NAN
                }
            }
        };
        let category = |at: usize| {
            move |i: usize, row: &mut Row| {
                if i == at {
                    row.category = "Usag"
                }
            }
        };
        type Tweak<'t> = Box<dyn Fn(usize, &mut Row) + 't>;
        let cases: Vec<(Tweak<'_>, &str)> = vec![
            (Box::new(nan(2_100)), "data row 2101, column BilledCost: NaN is not a finite number"),
            (
                Box::new(|i, row: &mut Row| {
                    nan(1_300)(i, row);
                    category(1_200)(i, row);
                }),
                "data row 1201, column ChargeCategory: \"Usag\" is not one of FOCUS's values \
                 (Usage, Purchase, Tax, Credit, Adjustment)",
            ),
            (
                Box::new(|i, row: &mut Row| {
                    nan(1_100)(i, row);
                    category(1_200)(i, row);
                }),
                "data row 1101, column BilledCost: NaN is not a finite number",
            ),
            (
                Box::new(|i, row: &mut Row| {
                    if i == 2_999 {
                        row.hours = (5, 4);
                    }
                    if i == 2_998 {
                        row.effective = 2e9;
                    }
                }),
                "data row 2999, column EffectiveCost: 2000000000 is beyond any plausible amount (±1e9)",
            ),
        ];
        for (tweak, message) in cases {
            let [parquet, csv] = month(dir.path(), 3_000, tweak);
            for (path, name) in [(parquet, "month.parquet"), (csv, "month.csv")] {
                let error = tally(&path).expect_err("refused").to_string();
                assert_eq!(error, format!("{name}: {message}"));
            }
        }
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_files_version_is_the_newest_its_columns_show() {
        let base = ["BilledCost", "EffectiveCost", "ChargeClass", "ContractedCost", "ProviderName"];
        assert_eq!(Version::of_header(&names(&base)), Version::V1_0);
        let with = |extra: &str| {
            let mut list = names(&base);
            list.push(extra.into());
            Version::of_header(&list)
        };
        assert_eq!(with("SkuPriceDetails"), Version::V1_1);
        assert_eq!(with("InvoiceId"), Version::V1_2);
        assert_eq!(with("ServiceProviderName"), Version::V1_3);
        assert_eq!(with("x_Discounts"), Version::V1_0);
    }

    #[test]
    fn extra_columns_are_those_neither_focus_nor_custom() {
        let header = names(&["BilledCost", "Id", "x_ServiceCode", "ServiceProviderName", "Foo"]);
        assert_eq!(extra_columns(&header), vec!["Id".to_string(), "Foo".to_string()]);
    }

    #[test]
    fn an_azure_date_range_folder_names_its_month() {
        assert_eq!(range_month("exports/focus/20261001-20261031"), Some("2026-10".parse().unwrap()));
        assert_eq!(range_month("20260201-20260228"), Some("2026-02".parse().unwrap()));
        assert_eq!(range_month("exports/focus/daily"), None);
        assert_eq!(range_month("2026100-20261031"), None);
    }

    #[test]
    fn azures_data_versions_are_focus_versions() {
        assert_eq!(azure_data_version("1.0"), Some(Version::V1_0));
        assert_eq!(azure_data_version("1.0r2"), Some(Version::V1_0));
        assert_eq!(azure_data_version("1.2-preview"), Some(Version::V1_2));
        assert_eq!(azure_data_version("2023-05-01"), None);
    }

    #[test]
    fn a_billing_period_is_the_month_it_starts_in() {
        // 2026-10-01T00:00:00Z = 1790812800.
        assert_eq!(billing_month(1_790_812_800), Some(("2026-10".parse().unwrap(), true)));
        assert_eq!(billing_month(1_790_812_800 + 5 * 86_400), Some(("2026-10".parse().unwrap(), false)));
    }

    #[test]
    fn providers_are_named_as_gpuledger_names_them() {
        assert_eq!(provider_id("AWS"), Some("aws"));
        assert_eq!(provider_id("Microsoft"), Some("azure"));
        assert_eq!(provider_id("Google Cloud"), Some("gcp"));
        assert_eq!(provider_id("Oracle"), Some("oci"));
        assert_eq!(provider_id("Datadog"), None);
    }
}
