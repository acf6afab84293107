//! A billing period's detail rows as files (`gpuledger archive`): one Parquet file per table
//! and a `manifest.json` that says what they hold.
//!
//! Layout: `<folder>/<period>/` holds `cost_pods.parquet`, `instance_hours.parquet`,
//! `cost_pod_days.parquet`, `cost_pod_day_options.parquet`, `cost_gpu_pod_hours.parquet` and
//! `manifest.json`, written last: a folder without a manifest is an archive that did not
//! finish, and is never read. Each file holds its table's columns as the database has them,
//! without the period (so DuckDB, Spark or Athena read them as they are); the manifest holds
//! each file's rows, bytes and SHA-256, the delivery (data version) they came from, and sums
//! a person can hold against the bill.
//!
//! A file's columns come from the store's own column list and binders ([`Table`]), and are
//! read back through its own readers: what is restored is typed exactly as what was archived,
//! floats to the bit.

use std::io::Write;
use std::path::{Path, PathBuf};

use polars::prelude::{
    Column, DataFrame, DataType, NamedFrom, ParquetReader, ParquetWriter, SerReader, Series,
};
use serde::{Deserialize, Serialize};

use crate::store::PeriodDetail;
use crate::store::sql::{PushRow, ReadRow};
use crate::store::table::Table;

/// The file that completes an archive.
pub const MANIFEST: &str = "manifest.json";
/// The manifest's `format`.
pub const FORMAT: &str = "gpuledger-period-archive";
/// The manifest's `version`: what this gpuledger writes and reads.
pub const VERSION: u32 = 1;

/// What an archive folder holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    pub period: String,
    /// The delivery of the bill the rows were read from.
    pub data_version: String,
    pub archived_at: i64,
    /// `gpuledger <version>`.
    pub written_by: String,
    pub files: Vec<ArchiveFile>,
    pub totals: Totals,
}

/// One table's file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchiveFile {
    pub table: String,
    pub file: String,
    pub rows: u64,
    pub bytes: u64,
    pub sha256: String,
}

/// Sums of the archived rows, to hold against the bill and the rollups.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Totals {
    /// The instance-hours' amortized cost: the bill's EC2 instances.
    pub instance_amortized_micros: i64,
    /// The pod-days' split cost (nano-dollars).
    pub pod_split_cost_nanos: i64,
    /// The pod-days' share of their instances' unused capacity (nano-dollars).
    pub pod_unused_cost_nanos: i64,
}

impl Totals {
    pub fn of(detail: &PeriodDetail) -> Totals {
        Totals {
            instance_amortized_micros: detail.instance_hours.iter().map(|h| h.amortized_cost_micros).sum(),
            pod_split_cost_nanos: detail.pod_days.iter().map(|d| d.split_cost_nanos).sum(),
            pod_unused_cost_nanos: detail.pod_days.iter().map(|d| d.unused_cost_nanos).sum(),
        }
    }
}

/// What went wrong with an archive's files, saying which.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {message}", .path.display())]
    Invalid { path: PathBuf, message: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ArchiveError + '_ {
    move |source| ArchiveError::Io { path: path.to_path_buf(), source }
}

fn invalid(path: &Path, message: impl std::fmt::Display) -> ArchiveError {
    ArchiveError::Invalid { path: path.to_path_buf(), message: message.to_string() }
}

/// The folder of `period`'s archive under `root`.
pub fn folder(root: &Path, period: &str) -> PathBuf {
    root.join(period)
}

/// Writes `detail` as `period`'s archive under `root`, reads it back and compares every row,
/// and only then writes the manifest; returns the folder and the manifest's bytes. Refused
/// when the folder already holds a finished archive (it is never overwritten).
pub fn write(
    root: &Path,
    period: &str,
    data_version: &str,
    archived_at: i64,
    detail: &PeriodDetail,
) -> Result<(PathBuf, Vec<u8>), ArchiveError> {
    let dir = folder(root, period);
    let manifest_path = dir.join(MANIFEST);
    if manifest_path.exists() {
        return Err(invalid(
            &manifest_path,
            "an archive of this period is already there: move it away or archive to another folder",
        ));
    }
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    // Each file is read back from disk and compared with its rows before the next is written
    // (one table's copy held at a time), and all before the manifest makes the archive whole.
    let files = vec![
        write_checked(&dir, &detail.pods)?,
        write_checked(&dir, &detail.instance_hours)?,
        write_checked(&dir, &detail.pod_days)?,
        write_checked(&dir, &detail.pod_day_options)?,
        write_checked(&dir, &detail.gpu_pod_hours)?,
    ];
    let manifest = Manifest {
        format: FORMAT.to_string(),
        version: VERSION,
        period: period.to_string(),
        data_version: data_version.to_string(),
        archived_at,
        written_by: format!("gpuledger {}", env!("CARGO_PKG_VERSION")),
        files,
        totals: Totals::of(detail),
    };
    let mut bytes = serde_json::to_vec_pretty(&manifest).map_err(|e| invalid(&manifest_path, e))?;
    bytes.push(b'\n');
    write_durably(&manifest_path, &bytes)?;
    sync_folder(&dir)?;
    Ok((dir, bytes))
}

/// Reads the archive in `dir`: its manifest, and every file checked against it (bytes,
/// SHA-256, rows) and the manifest's sums; returns the manifest, its bytes and the rows.
pub fn read(dir: &Path) -> Result<(Manifest, Vec<u8>, PeriodDetail), ArchiveError> {
    let manifest_path = dir.join(MANIFEST);
    let bytes = std::fs::read(&manifest_path).map_err(io(&manifest_path))?;
    let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|e| invalid(&manifest_path, e))?;
    if manifest.format != FORMAT || manifest.version != VERSION {
        return Err(invalid(
            &manifest_path,
            format!(
                "a {:?} version {} manifest; this gpuledger reads {FORMAT:?} version {VERSION}",
                manifest.format, manifest.version
            ),
        ));
    }
    let detail = read_files(dir, &manifest)?;
    let totals = Totals::of(&detail);
    if totals != manifest.totals {
        return Err(invalid(
            &manifest_path,
            format!("the files sum to {totals:?}, the manifest says {:?}", manifest.totals),
        ));
    }
    Ok((manifest, bytes, detail))
}

fn read_files(dir: &Path, manifest: &Manifest) -> Result<PeriodDetail, ArchiveError> {
    Ok(PeriodDetail {
        pods: read_table(dir, manifest)?,
        instance_hours: read_table(dir, manifest)?,
        pod_days: read_table(dir, manifest)?,
        pod_day_options: read_table(dir, manifest)?,
        gpu_pod_hours: read_table(dir, manifest)?,
    })
}

/// [`write_table`], then the file read back and compared with `rows`.
fn write_checked<T: Table + Default + PartialEq>(
    dir: &Path,
    rows: &[T],
) -> Result<ArchiveFile, ArchiveError> {
    let file = write_table(dir, rows)?;
    if read_file::<T>(dir, &file)? != rows {
        return Err(invalid(
            &dir.join(&file.file),
            "read back, it differs from the rows written: archive not finished",
        ));
    }
    Ok(file)
}

/// Writes one table's rows as `<table>.parquet` in `dir` (through a temporary name, synced).
fn write_table<T: Table + Default>(dir: &Path, rows: &[T]) -> Result<ArchiveFile, ArchiveError> {
    let table = &T::sql().table;
    let file = format!("{table}.parquet");
    let path = dir.join(&file);
    let mut frame = to_frame(rows).map_err(|e| invalid(&path, e))?;
    let partial = dir.join(format!("{file}.partial"));
    let out = std::fs::File::create(&partial).map_err(io(&partial))?;
    let mut out = std::io::BufWriter::new(out);
    ParquetWriter::new(&mut out).finish(&mut frame).map_err(|e| invalid(&partial, e))?;
    let out = out.into_inner().map_err(|e| io(&partial)(e.into_error()))?;
    out.sync_all().map_err(io(&partial))?;
    std::fs::rename(&partial, &path).map_err(io(&path))?;
    let bytes = std::fs::read(&path).map_err(io(&path))?;
    Ok(ArchiveFile {
        table: table.clone(),
        file,
        rows: rows.len() as u64,
        bytes: bytes.len() as u64,
        sha256: crate::text::sha256_hex(&bytes),
    })
}

/// Reads `T`'s table from `dir` as the manifest lists it.
fn read_table<T: Table + Default>(dir: &Path, manifest: &Manifest) -> Result<Vec<T>, ArchiveError> {
    let table = &T::sql().table;
    let Some(entry) = manifest.files.iter().find(|f| &f.table == table) else {
        return Err(invalid(&dir.join(MANIFEST), format!("no file of {table} listed")));
    };
    read_file(dir, entry)
}

/// Reads the file of `entry` in `dir`, checking its bytes, SHA-256 and rows.
fn read_file<T: Table + Default>(dir: &Path, entry: &ArchiveFile) -> Result<Vec<T>, ArchiveError> {
    if entry.file.contains(['/', '\\']) || entry.file.starts_with('.') {
        return Err(invalid(
            &dir.join(MANIFEST),
            format!("{:?} is not a file name of this folder", entry.file),
        ));
    }
    let path = dir.join(&entry.file);
    let bytes = std::fs::read(&path).map_err(io(&path))?;
    if bytes.len() as u64 != entry.bytes || crate::text::sha256_hex(&bytes) != entry.sha256 {
        return Err(invalid(
            &path,
            format!(
                "{} bytes with SHA-256 {}, but the manifest lists {} bytes with SHA-256 {}: the file changed since it was archived",
                bytes.len(),
                crate::text::sha256_hex(&bytes),
                entry.bytes,
                entry.sha256
            ),
        ));
    }
    let frame = ParquetReader::new(std::io::Cursor::new(bytes)).finish().map_err(|e| invalid(&path, e))?;
    let rows: Vec<T> = from_frame(&frame).map_err(|e| invalid(&path, e))?;
    if rows.len() as u64 != entry.rows {
        return Err(invalid(&path, format!("{} rows, the manifest lists {}", rows.len(), entry.rows)));
    }
    Ok(rows)
}

fn write_durably(path: &Path, bytes: &[u8]) -> Result<(), ArchiveError> {
    let partial = path.with_extension("partial");
    let mut file = std::fs::File::create(&partial).map_err(io(&partial))?;
    file.write_all(bytes).map_err(io(&partial))?;
    file.sync_all().map_err(io(&partial))?;
    std::fs::rename(&partial, path).map_err(io(path))
}

/// Makes the folder's new names durable (a no-op where folders cannot be opened).
fn sync_folder(dir: &Path) -> Result<(), ArchiveError> {
    match std::fs::File::open(dir) {
        Ok(folder) => folder.sync_all().or(Ok(())),
        Err(_) => Ok(()),
    }
}

/// One column's values, as a table's binder gives them.
#[derive(Debug, PartialEq)]
enum Values {
    Int(Vec<Option<i64>>),
    Float(Vec<f64>),
    Text(Vec<String>),
}

/// Collects the rows a [`Table`] binds into columns, in its field order.
#[derive(Default)]
struct Collector {
    columns: Vec<Values>,
    next: usize,
}

/// One bound value.
enum Value {
    Int(Option<i64>),
    Float(f64),
    Text(String),
}

impl Collector {
    fn push(&mut self, value: Value) -> &mut Self {
        if self.columns.len() == self.next {
            self.columns.push(match value {
                Value::Int(_) => Values::Int(Vec::new()),
                Value::Float(_) => Values::Float(Vec::new()),
                Value::Text(_) => Values::Text(Vec::new()),
            });
        }
        match (&mut self.columns[self.next], value) {
            (Values::Int(column), Value::Int(value)) => column.push(value),
            (Values::Float(column), Value::Float(value)) => column.push(value),
            (Values::Text(column), Value::Text(value)) => column.push(value),
            _ => unreachable!("field {} bound as another type than in the first row", self.next),
        }
        self.next += 1;
        self
    }

    fn row<T: Table>(&mut self, row: &T) {
        self.next = 0;
        row.bind(self);
    }
}

impl<'a> PushRow<'a> for Collector {
    fn int(&mut self, value: i64) -> &mut Self {
        self.push(Value::Int(Some(value)))
    }

    fn nullable_int(&mut self, value: Option<i64>) -> &mut Self {
        self.push(Value::Int(value))
    }

    fn float(&mut self, value: f64) -> &mut Self {
        self.push(Value::Float(value))
    }

    fn text(&mut self, value: &'a str) -> &mut Self {
        self.push(Value::Text(value.to_string()))
    }

    fn bytes(&mut self, _value: &'a [u8]) -> &mut Self {
        unreachable!("the archived tables (a CUR period's) have no bytes column")
    }

    fn literal(&mut self, _sql: &str) -> &mut Self {
        unreachable!("a table's binder binds values, not SQL")
    }
}

/// `rows` as a frame of their table's columns. A default row is bound first (and dropped),
/// so an empty table still has its columns' types.
fn to_frame<T: Table + Default>(rows: &[T]) -> polars::prelude::PolarsResult<DataFrame> {
    let mut collector = Collector::default();
    collector.row(&T::default());
    for column in &mut collector.columns {
        match column {
            Values::Int(v) => v.clear(),
            Values::Float(v) => v.clear(),
            Values::Text(v) => v.clear(),
        }
    }
    for row in rows {
        collector.row(row);
    }
    let names = &T::sql().fields;
    let columns = names
        .iter()
        .zip(collector.columns)
        .map(|(name, values)| {
            let name = name.as_str().into();
            let series = match values {
                Values::Int(v) if v.iter().all(Option::is_some) => {
                    Series::new(name, v.into_iter().flatten().collect::<Vec<i64>>())
                }
                Values::Int(v) => Series::new(name, v),
                Values::Float(v) => Series::new(name, v),
                Values::Text(v) => Series::new(name, v),
            };
            Column::from(series)
        })
        .collect();
    DataFrame::new(rows.len(), columns)
}

/// The rows of a frame written by [`to_frame`], read by their table's own reader.
fn from_frame<T: Table + Default>(frame: &DataFrame) -> Result<Vec<T>, String> {
    // The kind of each column, from an empty row's values.
    let mut kinds = Collector::default();
    kinds.row(&T::default());
    let mut columns = Vec::new();
    for (name, kind) in T::sql().fields.iter().zip(&kinds.columns) {
        let Ok(column) = frame.column(name) else {
            // A text column added after the archive was written (an instance-hour's region)
            // reads as empty, as its migration's default gives the rows stored before it.
            if matches!(kind, Values::Text(_)) {
                columns.push((name.as_str(), Values::Text(vec![String::new(); frame.height()])));
                continue;
            }
            return Err(format!("no column {name}"));
        };
        let values = match column.dtype() {
            DataType::Int64 => Values::Int(column.i64().map_err(|e| e.to_string())?.iter().collect()),
            DataType::Float64 => {
                let values: Option<Vec<f64>> = column.f64().map_err(|e| e.to_string())?.iter().collect();
                Values::Float(values.ok_or_else(|| format!("column {name} has nulls"))?)
            }
            DataType::String => {
                let values: Option<Vec<String>> =
                    column.str().map_err(|e| e.to_string())?.iter().map(|v| v.map(str::to_string)).collect();
                Values::Text(values.ok_or_else(|| format!("column {name} has nulls"))?)
            }
            other => return Err(format!("column {name} is {other}, not an integer, float or text")),
        };
        columns.push((name.as_str(), values));
    }
    (0..frame.height())
        .map(|index| {
            T::from_row(&FrameRow { columns: &columns, index }).map_err(|e| format!("row {index}: {e}"))
        })
        .collect()
}

/// One row of [`from_frame`]'s columns, read by name as a database row is.
struct FrameRow<'a> {
    columns: &'a [(&'a str, Values)],
    index: usize,
}

impl FrameRow<'_> {
    fn values(&self, column: &str) -> Result<&Values, sqlx::Error> {
        self.columns
            .iter()
            .find(|(name, _)| *name == column)
            .map(|(_, values)| values)
            .ok_or_else(|| sqlx::Error::ColumnNotFound(column.to_string()))
    }

    fn mismatch(column: &str, wanted: &str) -> sqlx::Error {
        sqlx::Error::Decode(format!("column {column} is not {wanted}").into())
    }
}

impl ReadRow for FrameRow<'_> {
    fn int(&self, column: &str) -> Result<i64, sqlx::Error> {
        self.nullable_int(column)?.ok_or_else(|| {
            sqlx::Error::Decode(format!("column {column} is null in row {}", self.index).into())
        })
    }

    fn float(&self, column: &str) -> Result<f64, sqlx::Error> {
        match self.values(column)? {
            Values::Float(v) => Ok(v[self.index]),
            _ => Err(Self::mismatch(column, "a float")),
        }
    }

    fn text(&self, column: &str) -> Result<String, sqlx::Error> {
        match self.values(column)? {
            Values::Text(v) => Ok(v[self.index].clone()),
            _ => Err(Self::mismatch(column, "text")),
        }
    }

    fn nullable_int(&self, column: &str) -> Result<Option<i64>, sqlx::Error> {
        match self.values(column)? {
            Values::Int(v) => Ok(v[self.index]),
            _ => Err(Self::mismatch(column, "an integer")),
        }
    }

    fn nullable_text(&self, column: &str) -> Result<Option<String>, sqlx::Error> {
        self.text(column).map(Some)
    }

    fn bytes(&self, column: &str) -> Result<Vec<u8>, sqlx::Error> {
        Err(Self::mismatch(column, "bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{GpuPodHour, InstanceHour, PodDay, PodRecord, PurchaseOption};

    fn detail() -> PeriodDetail {
        let pod = |id: i64, pod: &str| PodRecord {
            id,
            cluster: "prod".into(),
            namespace: "ml".into(),
            workload: "trainer".into(),
            pod: pod.into(),
            purchase_option: PurchaseOption::Spot,
            labels: r#"{"team":"vision","ü":"✓"}"#.into(),
            ..PodRecord::default()
        };
        PeriodDetail {
            pods: vec![pod(1, "trainer-0"), pod(2, "trainer-1, \"quoted\"")],
            instance_hours: vec![InstanceHour {
                hour: 1_790_812_800,
                instance_id: "i-0abc".into(),
                gpu_count: 8,
                purchase_option: PurchaseOption::SavingsPlans,
                usage_hours: 1.0 / 3.0,
                amortized_cost_micros: 32_772_000,
                region: "us-east-1".into(),
                ..InstanceHour::default()
            }],
            pod_days: vec![PodDay {
                pod_id: 1,
                day: 1_790_812_800,
                gpu_hours: 0.1 + 0.2,
                split_cost_nanos: 1_234_567_891,
                unused_cost_nanos: -3,
                vcpu_hours: f64::MIN_POSITIVE,
                ..PodDay::default()
            }],
            pod_day_options: Vec::new(),
            gpu_pod_hours: vec![GpuPodHour {
                pod_id: 2,
                hour: 7,
                gpu_hours: 1e-300,
                ..GpuPodHour::default()
            }],
        }
    }

    #[test]
    fn an_archive_reads_back_exactly_what_was_written() {
        let root = tempfile::tempdir().unwrap();
        let detail = detail();
        let (dir, manifest) = write(root.path(), "2026-10", "exec-1", 1_790_000_000, &detail).unwrap();
        assert_eq!(dir, root.path().join("2026-10"));
        let (read_manifest, read_bytes, read_detail) = read(&dir).unwrap();
        // Floats to the bit, text with quotes and non-ASCII, enums by name, an empty table.
        assert_eq!(read_detail, detail);
        assert_eq!(read_bytes, manifest);
        assert_eq!(read_manifest.data_version, "exec-1");
        let rows: Vec<(&str, u64)> = read_manifest.files.iter().map(|f| (f.table.as_str(), f.rows)).collect();
        assert_eq!(
            rows,
            [
                ("cost_pods", 2),
                ("instance_hours", 1),
                ("cost_pod_days", 1),
                ("cost_pod_day_options", 0),
                ("cost_gpu_pod_hours", 1)
            ]
        );
        assert_eq!(
            read_manifest.totals,
            Totals {
                instance_amortized_micros: 32_772_000,
                pod_split_cost_nanos: 1_234_567_891,
                pod_unused_cost_nanos: -3
            }
        );
        // The files are plain Parquet of the table's columns: polars reads the enum by name.
        let pods =
            ParquetReader::new(std::fs::File::open(dir.join("cost_pods.parquet")).unwrap()).finish().unwrap();
        assert_eq!(pods.column("purchase_option").unwrap().str().unwrap().get(0), Some("Spot"));
        assert_eq!(pods.column("pod_id").unwrap().i64().unwrap().get(1), Some(2));
        // A finished archive is never written over.
        let again = write(root.path(), "2026-10", "exec-2", 1_790_000_001, &detail).unwrap_err();
        assert!(again.to_string().contains("already there"), "{again}");
    }

    #[test]
    fn a_text_column_added_since_the_archive_reads_as_empty_and_no_other_is_made_up() {
        let written = detail().instance_hours;
        let frame = to_frame(&written).unwrap();
        // An archive written before migration 0042 has no region.
        let before = frame.drop("region").unwrap();
        let read: Vec<InstanceHour> = from_frame(&before).unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].region, "");
        assert_eq!(read[0], InstanceHour { region: String::new(), ..written[0].clone() });
        // A number is not guessed.
        let error = from_frame::<InstanceHour>(&frame.drop("usage_hours").unwrap()).unwrap_err();
        assert_eq!(error, "no column usage_hours");
    }

    #[test]
    fn a_changed_or_missing_file_is_refused_saying_which() {
        let root = tempfile::tempdir().unwrap();
        let (dir, _) = write(root.path(), "2026-10", "exec-1", 1_790_000_000, &detail()).unwrap();
        let path = dir.join("cost_pod_days.parquet");
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let error = read(&dir).unwrap_err().to_string();
        assert!(
            error.contains("cost_pod_days.parquet") && error.contains("changed since it was archived"),
            "{error}"
        );
        std::fs::remove_file(&path).unwrap();
        let error = read(&dir).unwrap_err().to_string();
        assert!(error.contains("cost_pod_days.parquet"), "{error}");
        // Without its manifest a folder is no archive.
        std::fs::remove_file(dir.join(MANIFEST)).unwrap();
        let error = read(&dir).unwrap_err().to_string();
        assert!(error.contains(MANIFEST), "{error}");
    }
}
