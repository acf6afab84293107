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
    file: Option<fs::File>,
    /// The row groups go to a thread that encodes and writes them while the next one fills.
    groups: Option<std::sync::mpsc::SyncSender<DataFrame>>,
    encoder: Option<std::thread::JoinHandle<PolarsResult<()>>>,
    names: Vec<PlSmallStr>,
    kinds: Vec<Kind>,
    columns: Vec<Builder>,
    filled: usize,
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
    Text(StringChunkedBuilder),
}

impl Builder {
    fn new(kind: Kind, name: &PlSmallStr) -> Builder {
        match kind {
            Kind::Number => Builder::Number(Vec::with_capacity(ROW_GROUP)),
            Kind::Time => Builder::Time(Vec::with_capacity(ROW_GROUP)),
            Kind::Text => Builder::Text(StringChunkedBuilder::new(name.clone(), ROW_GROUP)),
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
            Builder::Text(builder) => match cell {
                Cell::Null => builder.append_null(),
                Cell::Text(text) => builder.append_value(text),
                other => builder.append_value(csv_text(other).as_ref()),
            },
        }
    }

    fn finish(self, name: &PlSmallStr) -> Column {
        match self {
            Builder::Number(values) => Column::new(name.clone(), values),
            Builder::Time(millis) => utc_datetimes(name, millis),
            Builder::Text(builder) => builder.finish().into_series().into_column(),
        }
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
                Out::Parquet(ParquetRows {
                    file: Some(file),
                    groups: None,
                    encoder: None,
                    names,
                    kinds,
                    columns,
                    filled: 0,
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
        self.rows += 1;
        match &mut self.out {
            Out::Parquet(parquet) => {
                for (column, cell) in parquet.columns.iter_mut().zip(cells) {
                    column.push(*cell);
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
    /// Writes the rows held as a row group (the schema alone when there are none yet).
    fn flush(&mut self, path: &Path) -> Result<(), FileError> {
        let encode = |source| FileError::Encode { path: path.to_path_buf(), source };
        let columns: Vec<Column> = self
            .columns
            .iter_mut()
            .zip(self.kinds.iter().zip(&self.names))
            .map(|(column, (kind, name))| std::mem::replace(column, Builder::new(*kind, name)).finish(name))
            .collect();
        let frame = DataFrame::new(self.filled, columns).map_err(encode)?;
        self.filled = 0;
        if self.groups.is_none() {
            let file = self.file.take().expect("the file is open until the encoder takes it");
            // Snappy, as DuckDB and Spark write Parquet by default: the fastest to encode.
            let mut writer = ParquetWriter::new(file)
                .with_compression(ParquetCompression::Snappy)
                .batched(frame.schema())
                .map_err(encode)?;
            let (groups, received) = std::sync::mpsc::sync_channel::<DataFrame>(1);
            self.groups = Some(groups);
            self.encoder = Some(std::thread::spawn(move || {
                for frame in received {
                    writer.write_batch(&frame)?;
                }
                writer.finish().map(|_| ())
            }));
        }
        if frame.height() > 0 {
            let sent = self.groups.as_ref().expect("made above").send(frame);
            if sent.is_err() {
                // The encoder stopped: its error says why.
                self.groups = None;
                return self.join(path);
            }
        }
        Ok(())
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
