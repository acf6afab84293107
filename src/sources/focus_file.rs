//! FOCUS rows to files, as the providers write them: gzip CSV (empty for null, quoted where
//! needed) or Parquet (costs and quantities as doubles, periods as UTC datetimes). The
//! generator's bills and `export focus` write through here.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use polars::prelude::*;

/// A file that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("could not write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("could not encode {path}: {source}")]
    Encode {
        path: PathBuf,
        #[source]
        source: PolarsError,
    },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> FileError + '_ {
    move |source| FileError::Io { path: path.to_path_buf(), source }
}

/// FOCUS's decimal columns (written as doubles in Parquet).
pub fn is_number(column: &str) -> bool {
    matches!(
        column,
        "BilledCost"
            | "EffectiveCost"
            | "ListCost"
            | "ContractedCost"
            | "ConsumedQuantity"
            | "PricingQuantity"
            | "ListUnitPrice"
            | "ContractedUnitPrice"
    )
}

/// FOCUS's date-time columns (UTC datetimes in Parquet).
pub fn is_datetime(column: &str) -> bool {
    matches!(column, "BillingPeriodStart" | "BillingPeriodEnd" | "ChargePeriodStart" | "ChargePeriodEnd")
}

fn create(path: &Path) -> Result<fs::File, FileError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io_error(parent))?;
    }
    fs::File::create(path).map_err(io_error(path))
}

/// One value of a FOCUS row, written as its column wants it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    Null,
    /// Text as read or written: in a decimal or date-time column, parsed for Parquet and kept
    /// as it is in CSV.
    Text(&'a str),
    /// An amount in nano-units: a decimal with nine places.
    Nanos(i64),
    Number(f64),
    /// UTC epoch seconds.
    Time(i64),
}

/// The file formats rows are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    Parquet,
    CsvGz,
}

/// Rows in a Parquet row group: the file is written a row group at a time, so memory holds one
/// group, not the file.
const ROW_GROUP: usize = 1 << 17;

/// A FOCUS file written row by row, in [`FileFormat`]: gzip CSV (empty for null, quoted where
/// needed) or Parquet ([`is_number`] columns as doubles, [`is_datetime`] ones as UTC
/// datetimes, the rest as text).
pub struct RowWriter {
    path: PathBuf,
    rows: u64,
    out: Out,
}

// One per file written: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Out {
    Parquet(ParquetRows),
    Csv { out: flate2::write::GzEncoder<std::io::BufWriter<fs::File>>, line: String },
}

struct ParquetRows {
    /// The filled row groups go to a thread that makes their columns, encodes and writes them
    /// while the next one fills.
    groups: Option<std::sync::mpsc::SyncSender<(usize, Vec<Builder>)>>,
    encoder: Option<std::thread::JoinHandle<PolarsResult<()>>>,
    names: Vec<PlSmallStr>,
    kinds: Vec<Kind>,
    columns: Vec<Builder>,
    filled: usize,
    /// Whether a row group (or the schema alone) went to the encoder.
    started: bool,
}

#[derive(Clone, Copy)]
enum Kind {
    Number,
    Time,
    Text,
}

enum Builder {
    Number(Vec<Option<f64>>),
    Time(Vec<Option<i64>>),
    Text(Box<Texts>),
}

/// A text column's row group: a value repeated in consecutive rows (a charge group's texts, a
/// VM's id over its hours) is kept once, and each row holds its index; the column is gathered
/// from them when the group is written (the gathered values share the kept ones' bytes).
/// Copying each row's texts was a third of the export's time.
struct Texts {
    /// The distinct values in the order met; the first is null.
    values: StringChunkedBuilder,
    count: IdxSize,
    /// The last value kept, and its index.
    last: String,
    last_index: Option<IdxSize>,
    rows: Vec<IdxSize>,
}

impl Texts {
    fn new(name: &PlSmallStr) -> Texts {
        let mut values = StringChunkedBuilder::new(name.clone(), 1024);
        values.append_null();
        Texts { values, count: 1, last: String::new(), last_index: None, rows: Vec::with_capacity(ROW_GROUP) }
    }

    fn push(&mut self, text: &str) {
        let index = match self.last_index {
            Some(index) if self.last == text => index,
            _ => {
                self.values.append_value(text);
                self.last.clear();
                self.last.push_str(text);
                self.last_index = Some(self.count);
                self.count += 1;
                self.count - 1
            }
        };
        self.rows.push(index);
    }

    /// Repeats the previous row's value; false when this is the group's first row.
    fn repeat(&mut self) -> bool {
        match self.rows.last() {
            Some(&index) => {
                self.rows.push(index);
                true
            }
            None => false,
        }
    }

    fn finish(self) -> PolarsResult<Column> {
        Ok(self.values.finish().take(self.rows.as_slice())?.into_series().into_column())
    }
}

impl Builder {
    fn new(kind: Kind, name: &PlSmallStr) -> Builder {
        match kind {
            Kind::Number => Builder::Number(Vec::with_capacity(ROW_GROUP)),
            Kind::Time => Builder::Time(Vec::with_capacity(ROW_GROUP)),
            Kind::Text => Builder::Text(Box::new(Texts::new(name))),
        }
    }

    fn push(&mut self, cell: Cell) {
        match self {
            Builder::Number(values) => values.push(match cell {
                Cell::Null => None,
                Cell::Text(text) => text.parse().ok(),
                Cell::Nanos(nanos) => Some(nanos as f64 / 1e9),
                Cell::Number(number) => Some(number),
                Cell::Time(seconds) => Some(seconds as f64),
            }),
            Builder::Time(values) => values.push(match cell {
                Cell::Null | Cell::Nanos(_) | Cell::Number(_) => None,
                Cell::Text(text) => {
                    chrono::DateTime::parse_from_rfc3339(text).ok().map(|t| t.timestamp() * 1000)
                }
                Cell::Time(seconds) => Some(seconds * 1000),
            }),
            Builder::Text(texts) => match cell {
                Cell::Null => texts.rows.push(0),
                Cell::Text(text) => texts.push(text),
                other => texts.push(csv_text(other).as_ref()),
            },
        }
    }

    fn finish(self, name: &PlSmallStr) -> PolarsResult<Column> {
        Ok(match self {
            Builder::Number(values) => Column::new(name.clone(), values),
            Builder::Time(millis) => utc_datetimes(name, millis),
            Builder::Text(texts) => texts.finish()?,
        })
    }
}

/// A cell as CSV text (before quoting).
fn csv_text(cell: Cell) -> std::borrow::Cow<str> {
    match cell {
        Cell::Null => "".into(),
        Cell::Text(text) => text.into(),
        Cell::Nanos(nanos) => crate::money::Nanos(nanos).exact().into(),
        Cell::Number(number) => format!("{number}").into(),
        Cell::Time(seconds) => crate::sources::focus::iso(seconds).into(),
    }
}

impl RowWriter {
    /// Creates the file (and its folder) for rows of `header`'s columns.
    pub fn create(path: &Path, header: &[&str], format: FileFormat) -> Result<RowWriter, FileError> {
        let file = create(path)?;
        let out = match format {
            FileFormat::Parquet => {
                let names: Vec<PlSmallStr> = header.iter().map(|name| PlSmallStr::from(*name)).collect();
                let kinds: Vec<Kind> = header
                    .iter()
                    .map(|name| {
                        if is_number(name) {
                            Kind::Number
                        } else if is_datetime(name) {
                            Kind::Time
                        } else {
                            Kind::Text
                        }
                    })
                    .collect();
                let columns =
                    kinds.iter().zip(&names).map(|(kind, name)| Builder::new(*kind, name)).collect();
                let (groups, received) = std::sync::mpsc::sync_channel(1);
                let encoder = encode_groups(file, names.clone(), received);
                Out::Parquet(ParquetRows {
                    groups: Some(groups),
                    encoder: Some(encoder),
                    names,
                    kinds,
                    columns,
                    filled: 0,
                    started: false,
                })
            }
            FileFormat::CsvGz => {
                let mut out =
                    flate2::write::GzEncoder::new(std::io::BufWriter::new(file), flate2::Compression::fast());
                let mut line = header.join(",");
                line.push('\n');
                out.write_all(line.as_bytes()).map_err(io_error(path))?;
                Out::Csv { out, line }
            }
        };
        Ok(RowWriter { path: path.to_path_buf(), rows: 0, out })
    }

    /// Writes one row: a cell per column of the header, in its order.
    pub fn row(&mut self, cells: &[Cell]) -> Result<(), FileError> {
        self.write(cells, None)
    }

    /// Writes one row as [`RowWriter::row`] does, whose texts are the previous row's but in the
    /// `changed` columns (the caller's promise, as for a charge's next hour): Parquet then
    /// keeps them without reading them again.
    pub fn row_like_previous(&mut self, cells: &[Cell], changed: &[usize]) -> Result<(), FileError> {
        self.write(cells, Some(changed))
    }

    fn write(&mut self, cells: &[Cell], changed: Option<&[usize]>) -> Result<(), FileError> {
        self.rows += 1;
        match &mut self.out {
            Out::Parquet(parquet) => {
                for (i, (column, cell)) in parquet.columns.iter_mut().zip(cells).enumerate() {
                    let repeated = match (&mut *column, changed) {
                        (Builder::Text(texts), Some(changed)) => !changed.contains(&i) && texts.repeat(),
                        _ => false,
                    };
                    if !repeated {
                        column.push(*cell);
                    }
                }
                parquet.filled += 1;
                if parquet.filled == ROW_GROUP {
                    parquet.flush(&self.path)?;
                }
            }
            Out::Csv { out, line } => {
                line.clear();
                for (i, cell) in cells.iter().enumerate() {
                    if i > 0 {
                        line.push(',');
                    }
                    let text = csv_text(*cell);
                    if text.contains([',', '"', '\n']) {
                        line.push('"');
                        line.push_str(&text.replace('"', "\"\""));
                        line.push('"');
                    } else {
                        line.push_str(&text);
                    }
                }
                line.push('\n');
                out.write_all(line.as_bytes()).map_err(io_error(&self.path))?;
            }
        }
        Ok(())
    }

    /// Ends the file; returns the rows written.
    pub fn finish(self) -> Result<u64, FileError> {
        match self.out {
            Out::Parquet(mut parquet) => {
                parquet.flush(&self.path)?;
                parquet.groups = None;
                parquet.join(&self.path)?;
            }
            Out::Csv { out, .. } => {
                out.finish().map_err(io_error(&self.path))?;
            }
        }
        Ok(self.rows)
    }
}

impl ParquetRows {
    /// Sends the rows held to the encoder as a row group (the schema alone when there are none
    /// yet).
    fn flush(&mut self, path: &Path) -> Result<(), FileError> {
        if self.filled == 0 && self.started {
            return Ok(());
        }
        let columns: Vec<Builder> = self
            .columns
            .iter_mut()
            .zip(self.kinds.iter().zip(&self.names))
            .map(|(column, (kind, name))| std::mem::replace(column, Builder::new(*kind, name)))
            .collect();
        let sent = self.groups.as_ref().map(|groups| groups.send((self.filled, columns)));
        self.filled = 0;
        self.started = true;
        match sent {
            Some(Ok(())) => Ok(()),
            // The encoder stopped: its error says why.
            _ => {
                self.groups = None;
                self.join(path)
            }
        }
    }

    /// Waits for the encoder (its channel closed) and returns what went wrong in it.
    fn join(&mut self, path: &Path) -> Result<(), FileError> {
        let encode = |source| FileError::Encode { path: path.to_path_buf(), source };
        match self.encoder.take().map(|encoder| encoder.join()) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(encode(e)),
            Some(Err(_)) => Err(encode(PolarsError::ComputeError("the Parquet encoder panicked".into()))),
        }
    }
}

/// The encoder's thread: makes each row group's columns and writes them to `file`, the schema
/// from the first.
fn encode_groups(
    file: fs::File,
    names: Vec<PlSmallStr>,
    groups: std::sync::mpsc::Receiver<(usize, Vec<Builder>)>,
) -> std::thread::JoinHandle<PolarsResult<()>> {
    std::thread::spawn(move || {
        let mut file = Some(file);
        let mut writer = None;
        for (height, builders) in groups {
            let columns = builders
                .into_iter()
                .zip(&names)
                .map(|(b, name)| b.finish(name))
                .collect::<PolarsResult<_>>()?;
            let frame = DataFrame::new(height, columns)?;
            if writer.is_none() {
                let file = file.take().expect("the file is written from its first row group");
                // Snappy, as DuckDB and Spark write Parquet by default: the fastest to encode.
                writer = Some(
                    ParquetWriter::new(file)
                        .with_compression(ParquetCompression::Snappy)
                        .batched(frame.schema())?,
                );
            }
            if height > 0 {
                writer.as_mut().expect("made above").write_batch(&frame)?;
            }
        }
        match writer {
            Some(writer) => writer.finish().map(|_| ()),
            None => Ok(()),
        }
    })
}

/// Writes rows (texts in `header`'s order, `None` for null) as gzip CSV; returns the rows.
pub fn write_csv_gz(path: &Path, header: &[&str], rows: &[Vec<Option<String>>]) -> Result<u64, FileError> {
    write_texts(path, header, rows, FileFormat::CsvGz)
}

/// Epoch milliseconds as a UTC datetime column, written to Parquet as a timestamp adjusted to
/// UTC. Not through a cast: without polars' `timezones` feature (and its time-zone database) a
/// cast drops the zone, and readers took the times as local.
pub fn utc_datetimes(name: &str, millis: Vec<Option<i64>>) -> Column {
    Int64Chunked::from_iter_options(name.into(), millis.into_iter())
        .into_datetime(TimeUnit::Milliseconds, Some(TimeZone::UTC))
        .into_series()
        .into_column()
}

/// Writes rows as Parquet: [`is_number`] columns as doubles, [`is_datetime`] ones (RFC 3339
/// text) as UTC datetimes, the rest as text.
pub fn write_parquet(path: &Path, header: &[&str], rows: &[Vec<Option<String>>]) -> Result<u64, FileError> {
    write_texts(path, header, rows, FileFormat::Parquet)
}

fn write_texts(
    path: &Path,
    header: &[&str],
    rows: &[Vec<Option<String>>],
    format: FileFormat,
) -> Result<u64, FileError> {
    let mut writer = RowWriter::create(path, header, format)?;
    let mut cells = Vec::with_capacity(header.len());
    for values in rows {
        cells.clear();
        cells.extend(values.iter().map(|v| v.as_deref().map_or(Cell::Null, Cell::Text)));
        writer.row(&cells)?;
    }
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Parquet file's column as texts (null as `None`).
    fn texts(frame: &DataFrame, column: &str) -> Vec<Option<String>> {
        let column = frame.column(column).unwrap().cast(&DataType::String).unwrap();
        column.str().unwrap().iter().map(|v| v.map(str::to_string)).collect()
    }

    #[test]
    fn rows_like_the_previous_keep_its_texts_and_their_own_changed_columns_and_amounts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.parquet");
        let header = ["ResourceId", "Tags", "BilledCost"];
        let mut writer = RowWriter::create(&path, &header, FileFormat::Parquet).unwrap();
        // A VM's three hours (the second and third "like the previous", their tags changed:
        // the writer must not take the stale id `vm-b`), then a null id and a repeated text.
        let b = String::from("vm-b");
        writer
            .row(&[Cell::Text("vm-a-with-a-long-name"), Cell::Text("{}"), Cell::Nanos(1_500_000_000)])
            .unwrap();
        writer.row_like_previous(&[Cell::Text(&b), Cell::Text("{\"x\":1}"), Cell::Nanos(2)], &[1]).unwrap();
        writer.row_like_previous(&[Cell::Text(&b), Cell::Null, Cell::Number(0.25)], &[1]).unwrap();
        writer.row(&[Cell::Null, Cell::Text("{}"), Cell::Null]).unwrap();
        writer.row(&[Cell::Text("vm-a-with-a-long-name"), Cell::Text("{}"), Cell::Nanos(-3)]).unwrap();
        assert_eq!(writer.finish().unwrap(), 5);
        let frame = ParquetReader::new(std::fs::File::open(&path).unwrap()).finish().unwrap();
        let name = Some("vm-a-with-a-long-name".to_string());
        assert_eq!(texts(&frame, "ResourceId"), [name.clone(), name.clone(), name.clone(), None, name]);
        let tags = texts(&frame, "Tags");
        assert_eq!(
            tags,
            [Some("{}".into()), Some("{\"x\":1}".into()), None, Some("{}".into()), Some("{}".into())]
        );
        let billed: Vec<Option<f64>> = frame.column("BilledCost").unwrap().f64().unwrap().iter().collect();
        assert_eq!(billed, [Some(1.5), Some(2e-9), Some(0.25), None, Some(-3e-9)]);
    }

    #[test]
    fn a_file_without_rows_has_the_columns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.parquet");
        let writer =
            RowWriter::create(&path, &["ResourceId", "ChargePeriodStart"], FileFormat::Parquet).unwrap();
        assert_eq!(writer.finish().unwrap(), 0);
        let frame = ParquetReader::new(std::fs::File::open(&path).unwrap()).finish().unwrap();
        assert_eq!((frame.height(), frame.get_column_names().len()), (0, 2));
    }
}
