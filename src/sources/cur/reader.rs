//! Reading CUR 2.0 data files with polars, in chunks, into typed column views that accept
//! both encodings: Parquet (numbers, timestamps, maps as `list<struct<key,value>>`) and gzip
//! CSV (everything text, maps as JSON objects). Numbers may be text in
//! either; every bad value is reported with its file, row and column.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read};
use std::path::Path;

use polars::prelude::*;
use polars_arrow::array::{Array, ListArray, PrimitiveArray, StructArray, Utf8ViewArray};

use super::{CurError, invalid};

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
}

/// How many of [`Col`]'s columns a file must have (they come first).
pub const REQUIRED: usize = 8;

/// Column names in [`Col`] order.
pub const COLUMN_NAMES: [&str; 39] = [
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
];

impl Col {
    pub fn name(self) -> &'static str {
        COLUMN_NAMES[self as usize]
    }
}

/// The largest magnitude a CUR number may have: a billion (dollars, hours or ratios). Nano-
/// dollar sums of millions of such lines still fit in an `i64`.
pub const MAX_ABS_AMOUNT: f64 = 1e9;

/// Rows per chunk at most (a larger Parquet row group is read in parts): bounds memory
/// whatever the file size.
pub const CHUNK_ROWS: usize = 100_000;

/// Reads a data file chunk by chunk; returns the rows read.
pub fn read_file(
    path: &Path,
    location: &str,
    mut visit: impl FnMut(&Columns<'_>) -> Result<(), CurError>,
) -> Result<usize, CurError> {
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    if name.ends_with(".parquet") {
        read_parquet(path, location, &mut visit)
    } else if name.ends_with(".csv.gz") || name.ends_with(".csv") {
        read_csv(path, location, name.ends_with(".gz"), &mut visit)
    } else {
        Err(invalid(location, "unknown data file type (expected .parquet, .csv.gz or .csv)"))
    }
}

fn read_parquet(
    path: &Path,
    location: &str,
    visit: &mut dyn FnMut(&Columns<'_>) -> Result<(), CurError>,
) -> Result<usize, CurError> {
    let open = || File::open(path).map_err(|e| invalid(location, e));
    let not_parquet =
        |e: PolarsError| invalid(location, format!("not a readable Parquet file (truncated?): {e}"));
    refuse_empty(path, location)?;
    let mut reader = ParquetReader::new(open()?);
    let schema = reader.schema().map_err(not_parquet)?;
    let rows = reader.num_rows().map_err(not_parquet)?;
    let present: Vec<String> = schema.iter_names().map(|n| n.to_string()).collect();
    check_required(&present, location)?;
    let wanted: Vec<String> =
        COLUMN_NAMES.iter().filter(|c| present.iter().any(|p| p == *c)).map(|c| c.to_string()).collect();
    // Chunks follow the row groups (a slice across two decodes both), a large group split in
    // equal parts of at most CHUNK_ROWS.
    let groups: Vec<usize> =
        reader.get_metadata().map_err(not_parquet)?.row_groups.iter().map(|g| g.num_rows()).collect();
    let mut chunks = Vec::new();
    let mut offset = 0;
    for group in groups {
        let parts = group.div_ceil(CHUNK_ROWS).max(1);
        let size = group.div_ceil(parts);
        let mut start = 0;
        while start < group {
            let length = size.min(group - start);
            chunks.push((offset + start, length));
            start += length;
        }
        offset += group;
    }
    // One thread decodes the next chunk while this one visits the last: decoding and the
    // row-by-row work overlap.
    std::thread::scope(|scope| {
        let (sender, receiver) = std::sync::mpsc::sync_channel::<Result<(usize, DataFrame), CurError>>(0);
        scope.spawn(move || {
            for (offset, length) in chunks {
                let frame = open().and_then(|file| {
                    ParquetReader::new(file)
                        .with_columns(Some(wanted.clone()))
                        .with_slice(Some((offset, length)))
                        .finish()
                        .map_err(not_parquet)
                });
                let failed = frame.is_err();
                if sender.send(frame.map(|frame| (offset, frame))).is_err() || failed {
                    return;
                }
            }
        });
        for decoded in receiver {
            let (offset, mut frame) = decoded?;
            frame.rechunk_mut();
            visit(&Columns::new(&frame, location, offset)?)?;
        }
        Ok::<(), CurError>(())
    })?;
    Ok(rows)
}

/// A data file the manifest lists is never empty: zero bytes is a cut download or a broken
/// delivery (the chunks an OVERWRITE refresh blanks out are not in its manifest).
fn refuse_empty(path: &Path, location: &str) -> Result<(), CurError> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.len() == 0 => Err(invalid(
            location,
            "the data file is empty (0 bytes): a cut download or a broken delivery; nothing was ingested",
        )),
        Ok(_) => Ok(()),
        Err(e) => Err(invalid(location, e)),
    }
}

fn check_required(present: &[String], location: &str) -> Result<(), CurError> {
    let missing: Vec<&str> =
        COLUMN_NAMES[..REQUIRED].iter().copied().filter(|c| !present.iter().any(|p| p == c)).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(invalid(location, format!("required column(s) missing: {}", missing.join(", "))))
    }
}

fn read_csv(
    path: &Path,
    location: &str,
    gzip: bool,
    visit: &mut dyn FnMut(&Columns<'_>) -> Result<(), CurError>,
) -> Result<usize, CurError> {
    refuse_empty(path, location)?;
    let file = File::open(path).map_err(|e| invalid(location, e))?;
    let raw: Box<dyn Read> =
        if gzip { Box::new(flate2::read::MultiGzDecoder::new(file)) } else { Box::new(file) };
    let mut lines = BufReader::with_capacity(1 << 20, raw);
    let mut header = Vec::new();
    let broken = |row: usize, e: std::io::Error| {
        invalid(location, format!("the file is cut short or corrupt after data row {row}: {e}"))
    };
    if lines.read_until(b'\n', &mut header).map_err(|e| broken(0, e))? == 0 {
        return Ok(0);
    }
    let names: Vec<String> = String::from_utf8_lossy(&header)
        .trim_end()
        .split(',')
        .map(|n| n.trim_matches('"').to_string())
        .collect();
    check_required(&names, location)?;
    let mut rows = 0;
    loop {
        // A chunk is the header plus up to CHUNK_ROWS lines, parsed by polars as text.
        let mut buffer = header.clone();
        let mut in_chunk = 0;
        while in_chunk < CHUNK_ROWS {
            let read = lines.read_until(b'\n', &mut buffer).map_err(|e| broken(rows + in_chunk, e))?;
            if read == 0 {
                break;
            }
            in_chunk += 1;
        }
        if in_chunk == 0 {
            break;
        }
        let mut frame = CsvReadOptions::default()
            .with_has_header(true)
            .with_infer_schema_length(Some(0))
            .into_reader_with_file_handle(Cursor::new(buffer))
            .finish()
            .map_err(|e| invalid(location, format!("rows {}..{}: {e}", rows + 1, rows + in_chunk)))?;
        frame.rechunk_mut();
        visit(&Columns::new(&frame, location, rows)?)?;
        rows += in_chunk;
    }
    Ok(rows)
}

/// The key/value pairs of a map cell, borrowed from Parquet or owned from CSV JSON.
pub type Pairs<'a> = Vec<(Cow<'a, str>, Cow<'a, str>)>;

/// One column of a chunk, in whichever physical type the file used.
enum View<'a> {
    Missing,
    Text(&'a Utf8ViewArray),
    Float(&'a PrimitiveArray<f64>),
    Int(&'a PrimitiveArray<i64>),
    /// Timestamps in some unit, with units per second.
    Time(&'a PrimitiveArray<i64>, i64),
    Map {
        list: &'a ListArray<i64>,
        keys: &'a Utf8ViewArray,
        values: &'a Utf8ViewArray,
    },
}

/// A chunk's columns by name, with row accessors that name the file, row and column of any
/// bad value.
pub struct Columns<'a> {
    /// One view per [`Col`], in its order.
    views: Vec<View<'a>>,
    location: &'a str,
    first_row: usize,
    pub rows: usize,
}

impl<'a> Columns<'a> {
    fn new(frame: &'a DataFrame, location: &'a str, first_row: usize) -> Result<Columns<'a>, CurError> {
        let mut views = Vec::with_capacity(COLUMN_NAMES.len());
        for name in COLUMN_NAMES {
            views.push(match frame.column(name) {
                Ok(column) => view_of(column.as_materialized_series())
                    .map_err(|e| invalid(location, format!("column {name}: {e}")))?,
                Err(_) => View::Missing,
            });
        }
        Ok(Columns { views, location, first_row, rows: frame.height() })
    }

    /// The file these columns come from, as the messages name it.
    pub fn location(&self) -> &'a str {
        self.location
    }

    /// An error naming this chunk's file, the row and the column.
    pub fn bad(&self, row: usize, column: Col, message: impl std::fmt::Display) -> CurError {
        invalid(
            self.location,
            format!("data row {}, column {}: {message}", self.first_row + row + 1, column.name()),
        )
    }

    /// Text of a cell; empty for nulls and absent columns.
    pub fn text(&self, column: Col, row: usize) -> &'a str {
        match self.views.get(column as usize) {
            Some(View::Text(array)) if array.is_valid(row) => array.value(row),
            _ => "",
        }
    }

    /// A number; `None` for nulls, empty text and absent columns. Not-a-number, infinities
    /// and amounts beyond [`MAX_ABS_AMOUNT`] are refused: they would wrap or vanish in sums.
    pub fn number(&self, column: Col, row: usize) -> Result<Option<f64>, CurError> {
        let value = self.raw_number(column, row)?;
        match value {
            Some(v) if !v.is_finite() => Err(self.bad(row, column, format!("{v} is not a finite number"))),
            Some(v) if v.abs() > MAX_ABS_AMOUNT => Err(self.bad(
                row,
                column,
                format!("{v} is beyond any plausible amount (±{MAX_ABS_AMOUNT:e})"),
            )),
            _ => Ok(value),
        }
    }

    fn raw_number(&self, column: Col, row: usize) -> Result<Option<f64>, CurError> {
        match self.views.get(column as usize) {
            Some(View::Float(array)) => Ok(array.is_valid(row).then(|| array.value(row))),
            Some(View::Int(array)) => Ok(array.is_valid(row).then(|| array.value(row) as f64)),
            Some(View::Text(array)) if array.is_valid(row) => {
                let text = array.value(row).trim();
                if text.is_empty() {
                    return Ok(None);
                }
                text.parse::<f64>()
                    .map(Some)
                    .map_err(|_| self.bad(row, column, format!("{text:?} is not a number")))
            }
            _ => Ok(None),
        }
    }

    /// A number, 0 when absent.
    pub fn amount(&self, column: Col, row: usize) -> Result<f64, CurError> {
        Ok(self.number(column, row)?.unwrap_or(0.0))
    }

    /// A timestamp as UTC epoch seconds, `None` when the column is absent or the cell empty.
    pub fn optional_epoch_seconds(&self, column: Col, row: usize) -> Result<Option<i64>, CurError> {
        match self.views.get(column as usize) {
            Some(View::Missing) | None => Ok(None),
            Some(View::Text(array)) if !array.is_valid(row) || array.value(row).trim().is_empty() => Ok(None),
            Some(View::Time(array, _) | View::Int(array)) if !array.is_valid(row) => Ok(None),
            Some(_) => self.epoch_seconds(column, row).map(Some),
        }
    }

    /// A timestamp as UTC epoch seconds.
    pub fn epoch_seconds(&self, column: Col, row: usize) -> Result<i64, CurError> {
        match self.views.get(column as usize) {
            Some(View::Time(array, per_second)) if array.is_valid(row) => {
                Ok(array.value(row).div_euclid(*per_second))
            }
            // A bare INT64 is epoch milliseconds (CUR reference §2.2).
            Some(View::Int(array)) if array.is_valid(row) => Ok(array.value(row).div_euclid(1000)),
            Some(View::Text(array)) if array.is_valid(row) => parse_timestamp(array.value(row))
                .ok_or_else(|| self.bad(row, column, format!("{:?} is not a timestamp", array.value(row)))),
            _ => Err(self.bad(row, column, "missing timestamp")),
        }
    }

    /// The pairs of a map cell (Parquet struct list or CSV JSON object).
    pub fn map(&self, column: Col, row: usize) -> Result<Pairs<'a>, CurError> {
        match self.views.get(column as usize) {
            Some(View::Map { list, keys, values }) if list.is_valid(row) => {
                let (start, end) = list.offsets().start_end(row);
                Ok((start..end)
                    .map(|i| {
                        let value = if values.is_valid(i) { values.value(i) } else { "" };
                        (Cow::Borrowed(keys.value(i)), Cow::Borrowed(value))
                    })
                    .collect())
            }
            Some(View::Text(array)) if array.is_valid(row) => {
                let text = array.value(row).trim();
                if text.is_empty() {
                    return Ok(Vec::new());
                }
                let parsed: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)
                    .map_err(|e| self.bad(row, column, format!("not a JSON object of tags: {e}")))?;
                parsed
                    .into_iter()
                    .map(|(key, value)| match value {
                        serde_json::Value::String(text) => Ok((Cow::Owned(key), Cow::Owned(text))),
                        other => {
                            Err(self.bad(row, column, format!("tag {key:?} has a non-text value {other}")))
                        }
                    })
                    .collect()
            }
            _ => Ok(Vec::new()),
        }
    }
}

fn view_of(series: &Series) -> PolarsResult<View<'_>> {
    Ok(match series.dtype() {
        DataType::String => series.str()?.downcast_iter().next().map_or(View::Missing, View::Text),
        DataType::Float64 => series.f64()?.downcast_iter().next().map_or(View::Missing, View::Float),
        DataType::Int64 => series.i64()?.downcast_iter().next().map_or(View::Missing, View::Int),
        DataType::Datetime(unit, _) => {
            let per_second = match unit {
                TimeUnit::Milliseconds => 1_000,
                TimeUnit::Microseconds => 1_000_000,
                TimeUnit::Nanoseconds => 1_000_000_000,
            };
            series
                .datetime()?
                .physical()
                .downcast_iter()
                .next()
                .map_or(View::Missing, |a| View::Time(a, per_second))
        }
        DataType::List(_) => {
            let Some(list) = series.list()?.downcast_iter().next() else { return Ok(View::Missing) };
            let entries = list.values().as_any().downcast_ref::<StructArray>();
            let field = |i: usize| {
                entries
                    .and_then(|s| s.values().get(i))
                    .and_then(|a| a.as_any().downcast_ref::<Utf8ViewArray>())
            };
            match (field(0), field(1)) {
                (Some(keys), Some(values)) => View::Map { list, keys, values },
                _ => polars_bail!(ComputeError: "map column is not a list of key/value text structs"),
            }
        }
        DataType::Null => View::Missing,
        other => polars_bail!(ComputeError: "unsupported column type {other}"),
    })
}

/// Parses the textual timestamp formats seen in CUR exports (all UTC).
pub fn parse_timestamp(text: &str) -> Option<i64> {
    let text = text.trim();
    let trimmed = text.trim_end_matches('Z');
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d %H:%M:%S"] {
        if let Ok(t) = chrono::NaiveDateTime::parse_from_str(trimmed, format) {
            return Some(t.and_utc().timestamp());
        }
    }
    chrono::DateTime::parse_from_rfc3339(text).ok().map(|t| t.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_in_every_observed_format() {
        // 2023-11-01T00:00:00Z = 1698796800
        for text in [
            "2023-11-01T00:00:00.000Z",
            "2023-11-01T00:00:00Z",
            "2023-11-01 00:00:00.000",
            "2023-11-01 00:00:00",
        ] {
            assert_eq!(parse_timestamp(text), Some(1_698_796_800), "{text}");
        }
        assert_eq!(parse_timestamp("yesterday"), None);
    }
}
