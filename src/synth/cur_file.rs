//! Writing CUR 2.0 rows as AWS delivers them: snappy Parquet (map columns as
//! `list<struct<key, value>>`, as polars and Spark surface Parquet MAPs) or gzip CSV (map
//! columns as JSON objects), in batches so a large month never sits in memory whole.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use flate2::Compression;
use flate2::write::GzEncoder;
use polars::prelude::*;
use polars_arrow::array::{
    ListArray, MutableBinaryViewArray, MutablePrimitiveArray, StructArray, Utf8ViewArray,
};
use polars_arrow::datatypes::{ArrowDataType, Field as ArrowField, TimeUnit as ArrowTimeUnit};
use polars_arrow::offset::OffsetsBuffer;

/// The file format of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CurFormat {
    /// `<export>-00001.snappy.parquet`
    Parquet,
    /// `<export>-00001.csv.gz`, map columns as JSON strings
    Csv,
}

impl CurFormat {
    pub fn extension(self) -> &'static str {
        match self {
            CurFormat::Parquet => "snappy.parquet",
            CurFormat::Csv => "csv.gz",
        }
    }
}

/// Another export written from the same line items (AWS's FOCUS export of the bill).
pub trait Twin: Send {
    /// The twin's rows of one CUR line (none, one or several).
    fn push(&mut self, row: &CurRow<'_>);
    /// The rows pushed, as a frame to write.
    fn into_frame(self: Box<Self>) -> PolarsResult<DataFrame>;
}

/// A map column value: pairs owned by the node or pod they describe.
pub type MapRef<'a> = &'a [(String, String)];

macro_rules! cur_columns {
    ($( $column:ident : $kind:ident ),* $(,)?) => {
        /// One CUR 2.0 line item. Strings borrow from the world; absent numbers are `None`.
        #[derive(Clone, Copy)]
        pub struct CurRow<'a> {
            $( pub $column: cur_columns!(@type $kind), )*
        }

        impl Default for CurRow<'_> {
            fn default() -> Self {
                CurRow { $( $column: cur_columns!(@default $kind), )* }
            }
        }

        /// Column builders for one batch of rows.
        pub struct CurBatch {
            rows: usize,
            /// Another export of the same lines (AWS's FOCUS export), when the month writes one.
            twin: Option<Box<dyn Twin>>,
            /// What Cost Explorer makes of the rows pushed.
            tally: super::cost_explorer::CeTally,
            $( $column: cur_columns!(@builder $kind), )*
        }

        impl CurBatch {
            pub fn new(format: CurFormat) -> CurBatch {
                let json_maps = format == CurFormat::Csv;
                let _ = json_maps;
                CurBatch {
                    rows: 0,
                    twin: None,
                    tally: Default::default(),
                    $( $column: cur_columns!(@new $kind, json_maps), )*
                }
            }

            /// Hands every line pushed to `twin` too.
            pub fn with_twin(mut self, twin: Box<dyn Twin>) -> CurBatch {
                self.twin = Some(twin);
                self
            }

            /// The twin export's rows of the lines pushed so far, when there is one.
            pub fn take_twin(&mut self) -> Option<Box<dyn Twin>> {
                self.twin.take()
            }

            pub fn push(&mut self, row: &CurRow<'_>) {
                self.rows += 1;
                if let Some(twin) = &mut self.twin {
                    twin.push(row);
                }
                self.tally.add(row);
                $( self.$column.push(row.$column); )*
            }

            /// What Cost Explorer makes of the rows pushed so far.
            pub fn take_tally(&mut self) -> super::cost_explorer::CeTally {
                std::mem::take(&mut self.tally)
            }

            pub fn len(&self) -> usize {
                self.rows
            }

            pub fn is_empty(&self) -> bool {
                self.rows == 0
            }

            /// The batch as a DataFrame; `net_*` columns are left out when the export has no
            /// discounts, as AWS does.
            pub fn into_frame(self, with_net_columns: bool) -> PolarsResult<DataFrame> {
                let mut columns = Vec::new();
                $(
                    let name = stringify!($column);
                    if with_net_columns || !name.contains("net_") {
                        columns.push(self.$column.finish(name)?.into_column());
                    }
                )*
                DataFrame::new(self.rows, columns)
            }
        }

        /// The manifest's `columns` entry for every column written.
        pub fn manifest_columns(with_net_columns: bool) -> Vec<(&'static str, &'static str)> {
            let mut columns = Vec::new();
            $(
                let name = stringify!($column);
                if with_net_columns || !name.contains("net_") {
                    columns.push((name, cur_columns!(@manifest $kind)));
                }
            )*
            columns
        }
    };
    (@type S) => { &'a str };
    (@type F) => { Option<f64> };
    (@type T) => { i64 };
    (@type M) => { MapRef<'a> };
    (@default S) => { "" };
    (@default F) => { None };
    (@default T) => { 0 };
    (@default M) => { &[] };
    (@builder S) => { StringColumn };
    (@builder F) => { FloatColumn };
    (@builder T) => { TimestampColumn };
    (@builder M) => { MapColumn };
    (@new S, $json:ident) => { StringColumn::default() };
    (@new F, $json:ident) => { FloatColumn::default() };
    (@new T, $json:ident) => { TimestampColumn::default() };
    (@new M, $json:ident) => { MapColumn::new($json) };
    (@manifest S) => { "string" };
    (@manifest F) => { "double" };
    (@manifest T) => { "timestamp" };
    (@manifest M) => { "map<string,string>" };
}

cur_columns! {
    bill_bill_type: S,
    bill_billing_entity: S,
    bill_billing_period_end_date: T,
    bill_billing_period_start_date: T,
    bill_invoice_id: S,
    bill_invoicing_entity: S,
    bill_payer_account_id: S,
    bill_payer_account_name: S,
    identity_line_item_id: S,
    identity_time_interval: S,
    line_item_availability_zone: S,
    line_item_blended_cost: F,
    line_item_blended_rate: S,
    line_item_currency_code: S,
    line_item_legal_entity: S,
    line_item_line_item_description: S,
    line_item_line_item_type: S,
    line_item_net_unblended_cost: F,
    line_item_net_unblended_rate: S,
    line_item_operation: S,
    line_item_product_code: S,
    line_item_resource_id: S,
    line_item_tax_type: S,
    line_item_unblended_cost: F,
    line_item_unblended_rate: S,
    line_item_usage_account_id: S,
    line_item_usage_account_name: S,
    line_item_usage_amount: F,
    line_item_usage_end_date: T,
    line_item_usage_start_date: T,
    line_item_usage_type: S,
    pricing_public_on_demand_cost: F,
    pricing_public_on_demand_rate: S,
    pricing_term: S,
    pricing_unit: S,
    product: M,
    product_instance_family: S,
    product_instance_type: S,
    product_product_family: S,
    product_region_code: S,
    product_servicecode: S,
    reservation_amortized_upfront_fee_for_billing_period: F,
    reservation_effective_cost: F,
    reservation_end_time: S,
    reservation_net_effective_cost: F,
    reservation_number_of_reservations: S,
    reservation_reservation_a_r_n: S,
    reservation_start_time: S,
    reservation_unused_amortized_upfront_fee_for_billing_period: F,
    reservation_unused_recurring_fee: F,
    resource_tags: M,
    savings_plan_end_time: S,
    savings_plan_instance_type_family: S,
    savings_plan_net_savings_plan_effective_cost: F,
    savings_plan_offering_type: S,
    savings_plan_payment_option: S,
    savings_plan_purchase_term: S,
    savings_plan_recurring_commitment_for_billing_period: F,
    savings_plan_region: S,
    savings_plan_savings_plan_a_r_n: S,
    savings_plan_savings_plan_effective_cost: F,
    savings_plan_savings_plan_rate: F,
    savings_plan_start_time: S,
    savings_plan_total_commitment_to_date: F,
    savings_plan_used_commitment: F,
    split_line_item_actual_usage: F,
    split_line_item_net_split_cost: F,
    split_line_item_net_unused_cost: F,
    split_line_item_parent_resource_id: S,
    split_line_item_public_on_demand_split_cost: F,
    split_line_item_public_on_demand_unused_cost: F,
    split_line_item_reserved_usage: F,
    split_line_item_split_cost: F,
    split_line_item_split_usage: F,
    split_line_item_split_usage_ratio: F,
    split_line_item_unused_cost: F,
}

#[derive(Default)]
struct StringColumn(MutableBinaryViewArray<str>);

impl StringColumn {
    fn push(&mut self, value: &str) {
        self.0.push_value(value);
    }

    fn finish(self, name: &str) -> PolarsResult<Series> {
        let array: Utf8ViewArray = self.0.into();
        Series::from_arrow(name.into(), array.boxed())
    }
}

#[derive(Default)]
struct FloatColumn(MutablePrimitiveArray<f64>);

impl FloatColumn {
    fn push(&mut self, value: Option<f64>) {
        self.0.push(value);
    }

    fn finish(self, name: &str) -> PolarsResult<Series> {
        let array: polars_arrow::array::PrimitiveArray<f64> = self.0.into();
        Series::from_arrow(name.into(), array.boxed())
    }
}

/// Epoch milliseconds, written as `TIMESTAMP(MILLIS, UTC)`.
#[derive(Default)]
struct TimestampColumn(Vec<i64>);

impl TimestampColumn {
    fn push(&mut self, epoch_seconds: i64) {
        self.0.push(epoch_seconds * 1000);
    }

    fn finish(self, name: &str) -> PolarsResult<Series> {
        let dtype = ArrowDataType::Timestamp(ArrowTimeUnit::Millisecond, Some("UTC".into()));
        let array = polars_arrow::array::PrimitiveArray::<i64>::new(dtype, self.0.into(), None);
        Series::from_arrow(name.into(), array.boxed())
    }
}

/// A map column, either as key/value structs per row (Parquet) or JSON text (CSV).
struct MapColumn {
    json: Option<MutableBinaryViewArray<str>>,
    keys: MutableBinaryViewArray<str>,
    values: MutableBinaryViewArray<str>,
    offsets: Vec<i64>,
    scratch: String,
}

impl MapColumn {
    fn new(json: bool) -> MapColumn {
        MapColumn {
            json: json.then(MutableBinaryViewArray::new),
            keys: MutableBinaryViewArray::new(),
            values: MutableBinaryViewArray::new(),
            offsets: vec![0],
            scratch: String::new(),
        }
    }

    fn push(&mut self, pairs: MapRef<'_>) {
        if let Some(json) = &mut self.json {
            self.scratch.clear();
            self.scratch.push('{');
            for (i, (key, value)) in pairs.iter().enumerate() {
                if i > 0 {
                    self.scratch.push(',');
                }
                // Keys and values are plain identifiers and numbers: nothing to escape but
                // quotes, which serde_json handles when it must.
                self.scratch.push_str(&serde_json::to_string(key).unwrap_or_default());
                self.scratch.push(':');
                self.scratch.push_str(&serde_json::to_string(value).unwrap_or_default());
            }
            self.scratch.push('}');
            json.push_value(&self.scratch);
            return;
        }
        for (key, value) in pairs {
            self.keys.push_value(key);
            self.values.push_value(value);
        }
        self.offsets.push(self.keys.len() as i64);
    }

    fn finish(self, name: &str) -> PolarsResult<Series> {
        if let Some(json) = self.json {
            let array: Utf8ViewArray = json.into();
            return Series::from_arrow(name.into(), array.boxed());
        }
        let keys: Utf8ViewArray = self.keys.into();
        let values: Utf8ViewArray = self.values.into();
        let entry_type = ArrowDataType::Struct(vec![
            ArrowField::new("key".into(), ArrowDataType::Utf8View, false),
            ArrowField::new("value".into(), ArrowDataType::Utf8View, true),
        ]);
        let entries =
            StructArray::new(entry_type.clone(), keys.len(), vec![keys.boxed(), values.boxed()], None);
        let offsets = OffsetsBuffer::try_from(self.offsets)?;
        let list_type = ArrowDataType::LargeList(Box::new(ArrowField::new("item".into(), entry_type, true)));
        let list = ListArray::<i64>::new(list_type, offsets, entries.boxed(), None);
        Series::from_arrow(name.into(), list.boxed())
    }
}

/// An open data file that takes batches and is finished once.
pub enum CurWriter {
    Parquet(Box<polars::io::parquet::write::BatchedWriter<BufWriter<File>>>),
    Csv(Box<polars::io::csv::write::BatchedWriter<GzEncoder<BufWriter<File>>>>),
    /// Not opened yet: the schema comes from the first batch.
    Pending {
        path: std::path::PathBuf,
        format: CurFormat,
    },
}

impl CurWriter {
    pub fn create(path: &Path, format: CurFormat) -> CurWriter {
        CurWriter::Pending { path: path.to_path_buf(), format }
    }

    pub fn write(&mut self, frame: &mut DataFrame) -> PolarsResult<()> {
        if let CurWriter::Pending { path, format } = self {
            let file = BufWriter::with_capacity(1 << 20, File::create(&*path)?);
            *self = match format {
                CurFormat::Parquet => CurWriter::Parquet(Box::new(
                    ParquetWriter::new(file)
                        .with_compression(ParquetCompression::Snappy)
                        .batched(frame.schema())?,
                )),
                CurFormat::Csv => CurWriter::Csv(Box::new(
                    CsvWriter::new(GzEncoder::new(file, Compression::fast()))
                        .include_header(true)
                        .with_datetime_format(Some("%Y-%m-%dT%H:%M:%S%.3fZ".into()))
                        .batched(frame.schema())?,
                )),
            };
        }
        frame.rechunk_mut();
        match self {
            CurWriter::Parquet(writer) => writer.write_batch(frame),
            CurWriter::Csv(writer) => writer.write_batch(frame),
            CurWriter::Pending { .. } => Ok(()),
        }
    }

    pub fn finish(self) -> PolarsResult<()> {
        match self {
            CurWriter::Parquet(writer) => writer.finish().map(|_| ()),
            CurWriter::Csv(mut writer) => writer.finish(),
            CurWriter::Pending { .. } => Ok(()),
        }
    }
}
