//! Reading a bill source's data files with polars, in chunks, into typed column views that
//! accept both encodings: Parquet (numbers, timestamps, maps as `list<struct<key,value>>`) and
//! gzip CSV (everything text, maps as JSON objects). Numbers may be text in either; every bad
//! value is reported with its file, row and column. The CUR's columns are a [`ColumnSet`]
//! (`cur::reader::CUR`), and so are FOCUS's (`focus::COLUMNS`).

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read};
use std::path::Path;

use polars::prelude::*;
use polars_arrow::array::{Array, ListArray, PrimitiveArray, StructArray, Utf8ViewArray};

use super::map_column;
use super::{SourceError, invalid};

/// One column of a [`ColumnSet`]: its place in the set's names and its name.
pub trait ColumnId: Copy {
    fn index(self) -> usize;
    fn column_name(self) -> &'static str;
}

/// The columns a reader decodes (only these), in the order a [`ColumnId`] numbers them: the
/// first `required` must be in every file; `maps` name the map columns (tags), which Parquet
/// may store nested.
#[derive(Debug, Clone, Copy)]
pub struct ColumnSet {
    pub names: &'static [&'static str],
    pub required: usize,
    pub maps: &'static [&'static str],
    /// What kind of file the messages call it ("CUR", "FOCUS").
    pub kind: &'static str,
}

/// The largest magnitude a bill's number may have: a billion (dollars, hours or ratios). Nano-
/// dollar sums of millions of such lines still fit in an `i64`.
pub const MAX_ABS_AMOUNT: f64 = 1e9;

/// Rows per chunk at most (a larger Parquet row group is read in parts): bounds memory
/// whatever the file size.
pub const CHUNK_ROWS: usize = 100_000;

/// Bounds on one data file, whatever it holds or claims: a file past one is refused in
/// seconds with memory bounded, naming the file (a gzip bomb, a file of one endless line,
/// or a month repeated a thousand times inside one small file).
pub mod bounds {
    /// Decompressed bytes per compressed byte. CUR's gzip CSV expands 10-30 times and its
    /// Parquet column data 2-10 times; a bomb expands a thousand times.
    pub const MAX_EXPANSION: u64 = 100;
    /// A small file may always expand this far, whatever its ratio.
    pub const MIN_DECOMPRESSED_BYTES: u64 = 64 << 20;
    /// One CSV line (and so any field of it). A CUR line with many tags is a few kB.
    pub const MAX_LINE_BYTES: usize = 1 << 20;
    /// Rows in one data file (AWS splits an export into files far smaller).
    pub const MAX_ROWS_PER_FILE: usize = 100_000_000;

    /// How many bytes a file of `compressed` bytes may decompress to.
    pub fn decompressed_limit(compressed: u64) -> u64 {
        compressed.saturating_mul(MAX_EXPANSION).max(MIN_DECOMPRESSED_BYTES)
    }
}

/// Reads a data file of `set`'s columns chunk by chunk; returns the rows read.
pub fn read_columns(
    path: &Path,
    location: &str,
    set: &ColumnSet,
    visit: &mut dyn FnMut(&Columns<'_>) -> Result<(), SourceError>,
) -> Result<usize, SourceError> {
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    if name.ends_with(".parquet") {
        read_parquet(path, location, set, visit)
    } else if name.ends_with(".csv.gz") || name.ends_with(".csv") {
        read_csv(path, location, set, name.ends_with(".gz"), visit)
    } else {
        Err(invalid(location, "unknown data file type (expected .parquet, .csv.gz or .csv)"))
    }
}

fn read_parquet(
    path: &Path,
    location: &str,
    set: &ColumnSet,
    visit: &mut dyn FnMut(&Columns<'_>) -> Result<(), SourceError>,
) -> Result<usize, SourceError> {
    let open = || File::open(path).map_err(|e| invalid(location, e));
    let not_parquet =
        |e: PolarsError| invalid(location, format!("not a readable Parquet file (truncated?): {e}"));
    refuse_empty(path, location)?;
    let mut reader = ParquetReader::new(open()?);
    let schema = reader.schema().map_err(not_parquet)?;
    let rows = reader.num_rows().map_err(not_parquet)?;
    let present: Vec<String> = schema.iter_names().map(|n| n.to_string()).collect();
    check_required(&present, set, location)?;
    let wanted: Vec<String> =
        set.names.iter().filter(|c| present.iter().any(|p| p == *c)).map(|c| c.to_string()).collect();
    // Map columns stored nested are read by `map_column` (a row's pairs looked up when
    // asked for), not built by polars; a row group it cannot read falls back to polars.
    let nested_maps: Vec<&'static str> = set
        .maps
        .iter()
        .copied()
        .filter(|c| {
            schema.get(c).is_some_and(|f| {
                matches!(
                    f.dtype(),
                    ArrowDataType::List(_) | ArrowDataType::LargeList(_) | ArrowDataType::Map(..)
                )
            })
        })
        .collect();
    let metadata = reader.get_metadata().map_err(not_parquet)?.clone();
    check_parquet_bounds(path, location, &metadata, rows)?;
    // Chunks follow the row groups (a slice across two decodes both), a large group split in
    // equal parts of at most CHUNK_ROWS.
    let mut groups = Vec::new();
    let mut offset = 0;
    for (index, group) in metadata.row_groups.iter().enumerate() {
        let rows = group.num_rows();
        let parts = rows.div_ceil(CHUNK_ROWS).max(1);
        let size = rows.div_ceil(parts);
        let mut chunks = Vec::new();
        let mut start = 0;
        while start < rows {
            let length = size.min(rows - start);
            chunks.push((offset + start, start, length));
            start += length;
        }
        groups.push((index, chunks));
        offset += rows;
    }
    // One thread decodes the next chunk while this one visits the last: decoding and the
    // row-by-row work overlap.
    std::thread::scope(|scope| {
        let (sender, receiver) = std::sync::mpsc::sync_channel::<Result<Decoded, SourceError>>(0);
        scope.spawn(move || {
            let file = match open() {
                Ok(file) => file,
                Err(error) => return drop(sender.send(Err(error))),
            };
            for (index, chunks) in groups {
                let group = &metadata.row_groups[index];
                let mut maps = Vec::new();
                let mut columns = wanted.clone();
                for &column in &nested_maps {
                    match map_column::MapChunk::read(&file, group, column) {
                        Ok(chunk) => {
                            columns.retain(|c| c != column);
                            maps.push((column, std::sync::Arc::new(chunk)));
                        }
                        Err(map_column::Unsupported(why)) => {
                            tracing::debug!(location, column, why, "map column read by polars")
                        }
                    }
                }
                for (offset, in_group, length) in chunks {
                    let frame = open().and_then(|file| {
                        ParquetReader::new(file)
                            .with_columns(Some(columns.clone()))
                            .with_slice(Some((offset, length)))
                            .finish()
                            .map_err(not_parquet)
                    });
                    let failed = frame.is_err();
                    let decoded = frame.map(|frame| Decoded {
                        offset,
                        frame,
                        maps: maps.iter().map(|(c, chunk)| (*c, chunk.clone(), in_group)).collect(),
                    });
                    if sender.send(decoded).is_err() || failed {
                        return;
                    }
                }
            }
        });
        for decoded in receiver {
            let Decoded { offset, mut frame, maps } = decoded?;
            frame.rechunk_mut();
            visit(&Columns::new(&frame, set, location, offset, &maps)?)?;
        }
        Ok::<(), SourceError>(())
    })?;
    Ok(rows)
}

/// A decoded chunk: its first row in the file, its columns, and the map columns read apart
/// (each with the chunk's first row in its row group).
struct Decoded {
    offset: usize,
    frame: DataFrame,
    maps: Vec<(&'static str, std::sync::Arc<map_column::MapChunk>, usize)>,
}

/// A Parquet file's own word on its size: rows, and each row group's column data once
/// decompressed (the larger of what the row group and its column chunks declare).
fn check_parquet_bounds(
    path: &Path,
    location: &str,
    metadata: &polars_parquet::parquet::metadata::FileMetadata,
    rows: usize,
) -> Result<(), SourceError> {
    if rows > bounds::MAX_ROWS_PER_FILE {
        return Err(invalid(
            location,
            format!(
                "the file declares {rows} rows, more than the {} a data file may hold",
                bounds::MAX_ROWS_PER_FILE
            ),
        ));
    }
    let size = std::fs::metadata(path).map_err(|e| invalid(location, e))?.len();
    let declared: u64 = metadata
        .row_groups
        .iter()
        .map(|group| {
            let columns: u64 =
                group.parquet_columns().iter().map(|c| c.uncompressed_size().max(0) as u64).sum();
            columns.max(group.total_byte_size() as u64)
        })
        .sum();
    let limit = bounds::decompressed_limit(size);
    if declared > limit {
        return Err(invalid(
            location,
            format!(
                "the file's column data decompresses to {declared} bytes, more than {} times its {size} bytes \
                 (at most {limit}): a corrupt or malicious file; nothing was ingested",
                bounds::MAX_EXPANSION
            ),
        ));
    }
    Ok(())
}

/// Counts the bytes a decoder gives out and fails once they pass `limit`.
struct Bounded<R> {
    inner: R,
    read: u64,
    limit: u64,
    compressed: u64,
}

/// The error [`Bounded`] fails with, told apart from a corrupt stream.
#[derive(Debug)]
struct Expanded(String);

impl std::fmt::Display for Expanded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Expanded {}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.limit {
            return Err(std::io::Error::other(Expanded(format!(
                "the file decompresses to more than {} bytes, over {} times its {} compressed bytes: a \
                 corrupt or malicious file (a gzip bomb, or rows repeated past any real export); nothing was ingested",
                self.limit,
                bounds::MAX_EXPANSION,
                self.compressed
            ))));
        }
        Ok(n)
    }
}

/// Appends one line (its `\n` included) to `buffer`, refusing one longer than
/// [`bounds::MAX_LINE_BYTES`] before it is held; 0 at the end of the file. `after` is the
/// number of data rows before it (`None` for the header).
fn read_line(
    lines: &mut impl BufRead,
    buffer: &mut Vec<u8>,
    location: &str,
    after: Option<usize>,
) -> Result<usize, SourceError> {
    let row = after.unwrap_or(0);
    let start = buffer.len();
    loop {
        let available = match lines.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(match e.get_ref().and_then(|inner| inner.downcast_ref::<Expanded>()) {
                    Some(expanded) => invalid(location, expanded),
                    None => invalid(
                        location,
                        format!("the file is cut short or corrupt after data row {row}: {e}"),
                    ),
                });
            }
        };
        if available.is_empty() {
            return Ok(buffer.len() - start);
        }
        let (take, done) = match memchr::memchr(b'\n', available) {
            Some(end) => (end + 1, true),
            None => (available.len(), false),
        };
        if buffer.len() - start + take > bounds::MAX_LINE_BYTES {
            let what = match after {
                None => "the header line".to_string(),
                Some(before) => format!("data row {}", before + 1),
            };
            return Err(invalid(
                location,
                format!(
                    "{what} is longer than {} bytes: a corrupt or malicious file (no CUR line comes near); nothing was ingested",
                    bounds::MAX_LINE_BYTES
                ),
            ));
        }
        buffer.extend_from_slice(&available[..take]);
        lines.consume(take);
        if done {
            return Ok(buffer.len() - start);
        }
    }
}

/// A data file the manifest lists is never empty: zero bytes is a cut download or a broken
/// delivery (the chunks an OVERWRITE refresh blanks out are not in its manifest).
fn refuse_empty(path: &Path, location: &str) -> Result<(), SourceError> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.len() == 0 => Err(invalid(
            location,
            "the data file is empty (0 bytes): a cut download or a broken delivery; nothing was ingested",
        )),
        Ok(_) => Ok(()),
        Err(e) => Err(invalid(location, e)),
    }
}

fn check_required(present: &[String], set: &ColumnSet, location: &str) -> Result<(), SourceError> {
    // A column named twice: which of the two holds the figures is anyone's guess.
    for (i, name) in present.iter().enumerate() {
        if let Some(j) = present[..i].iter().position(|p| p == name) {
            return Err(invalid(
                location,
                format!(
                    "the header names column {name} twice (columns {} and {}): which one holds its values \
                     is not known; nothing was ingested",
                    j + 1,
                    i + 1
                ),
            ));
        }
    }
    let missing: Vec<&str> =
        set.names[..set.required].iter().copied().filter(|c| !present.iter().any(|p| p == c)).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(invalid(location, format!("required column(s) missing: {}", missing.join(", "))))
    }
}

fn read_csv(
    path: &Path,
    location: &str,
    set: &ColumnSet,
    gzip: bool,
    visit: &mut dyn FnMut(&Columns<'_>) -> Result<(), SourceError>,
) -> Result<usize, SourceError> {
    refuse_empty(path, location)?;
    let file = File::open(path).map_err(|e| invalid(location, e))?;
    let compressed = file.metadata().map_err(|e| invalid(location, e))?.len();
    let raw: Box<dyn Read> = if gzip {
        Box::new(Bounded {
            inner: flate2::read::MultiGzDecoder::new(file),
            read: 0,
            limit: bounds::decompressed_limit(compressed),
            compressed,
        })
    } else {
        Box::new(file)
    };
    let mut lines = BufReader::with_capacity(1 << 20, raw);
    let mut header = Vec::new();
    if read_line(&mut lines, &mut header, location, None)? == 0 {
        return Ok(0);
    }
    let names: Vec<String> = String::from_utf8_lossy(&header)
        .trim_end()
        .split(',')
        .map(|n| n.trim_matches('"').to_string())
        .collect();
    check_required(&names, set, location)?;
    let mut rows = 0;
    loop {
        // A chunk is the header plus up to CHUNK_ROWS lines, parsed by polars as text.
        let mut buffer = header.clone();
        let mut in_chunk = 0;
        while in_chunk < CHUNK_ROWS {
            if read_line(&mut lines, &mut buffer, location, Some(rows + in_chunk))? == 0 {
                break;
            }
            in_chunk += 1;
        }
        if in_chunk == 0 {
            break;
        }
        if rows + in_chunk > bounds::MAX_ROWS_PER_FILE {
            return Err(invalid(
                location,
                format!(
                    "the file holds more than {} rows, more than a data file may hold",
                    bounds::MAX_ROWS_PER_FILE
                ),
            ));
        }
        let mut frame = CsvReadOptions::default()
            .with_has_header(true)
            .with_infer_schema_length(Some(0))
            .into_reader_with_file_handle(Cursor::new(buffer))
            .finish()
            .map_err(|e| invalid(location, format!("rows {}..{}: {e}", rows + 1, rows + in_chunk)))?;
        frame.rechunk_mut();
        visit(&Columns::new(&frame, set, location, rows, &[])?)?;
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
    /// A map column read apart, from this row of its row group on.
    LazyMap(&'a map_column::MapChunk, usize),
}

/// A chunk's columns by name, with row accessors that name the file, row and column of any
/// bad value.
pub struct Columns<'a> {
    /// One view per column of the set, in its order.
    views: Vec<View<'a>>,
    location: &'a str,
    first_row: usize,
    pub rows: usize,
}

impl<'a> Columns<'a> {
    fn new(
        frame: &'a DataFrame,
        set: &ColumnSet,
        location: &'a str,
        first_row: usize,
        maps: &'a [(&'static str, std::sync::Arc<map_column::MapChunk>, usize)],
    ) -> Result<Columns<'a>, SourceError> {
        let mut views = Vec::with_capacity(set.names.len());
        for &name in set.names {
            if let Some((_, chunk, first)) = maps.iter().find(|(c, ..)| *c == name) {
                views.push(View::LazyMap(chunk, *first));
                continue;
            }
            views.push(match frame.column(name) {
                Ok(column) => view_of(column.as_materialized_series())
                    .map_err(|e| invalid(location, format!("column {name}: {e}")))?,
                Err(_) => View::Missing,
            });
        }
        Ok(Columns { views, location, first_row, rows: frame.height() })
    }

    /// The chunk's first row in its file (0-based).
    pub fn first_row(&self) -> usize {
        self.first_row
    }

    /// Whether the file has the column.
    pub fn has(&self, column: impl ColumnId) -> bool {
        !matches!(self.views.get(column.index()), Some(View::Missing) | None)
    }

    /// The file these columns come from, as the messages name it.
    pub fn location(&self) -> &'a str {
        self.location
    }

    /// An error naming this chunk's file, the row and the column.
    pub fn bad(&self, row: usize, column: impl ColumnId, message: impl std::fmt::Display) -> SourceError {
        invalid(
            self.location,
            format!("data row {}, column {}: {message}", self.first_row + row + 1, column.column_name()),
        )
    }

    /// The column as text, when the file holds it as text.
    pub fn text_array(&self, column: impl ColumnId) -> Option<&'a Utf8ViewArray> {
        match self.views.get(column.index()) {
            Some(View::Text(array)) => Some(array),
            _ => None,
        }
    }

    /// The column as floating-point numbers, when the file holds it so.
    pub fn float_array(&self, column: impl ColumnId) -> Option<&'a PrimitiveArray<f64>> {
        match self.views.get(column.index()) {
            Some(View::Float(array)) => Some(array),
            _ => None,
        }
    }

    /// The column as timestamps, with their units per second, when the file holds it so.
    pub fn time_array(&self, column: impl ColumnId) -> Option<(&'a PrimitiveArray<i64>, i64)> {
        match self.views.get(column.index()) {
            Some(View::Time(array, per_second)) => Some((array, *per_second)),
            _ => None,
        }
    }

    /// Text of a cell; empty for nulls and absent columns.
    pub fn text(&self, column: impl ColumnId, row: usize) -> &'a str {
        match self.views.get(column.index()) {
            Some(View::Text(array)) if array.is_valid(row) => array.value(row),
            _ => "",
        }
    }

    /// A number; `None` for nulls, empty text and absent columns. Not-a-number, infinities
    /// and amounts beyond [`MAX_ABS_AMOUNT`] are refused: they would wrap or vanish in sums.
    pub fn number(&self, column: impl ColumnId, row: usize) -> Result<Option<f64>, SourceError> {
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

    fn raw_number(&self, column: impl ColumnId, row: usize) -> Result<Option<f64>, SourceError> {
        match self.views.get(column.index()) {
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
    pub fn amount(&self, column: impl ColumnId, row: usize) -> Result<f64, SourceError> {
        Ok(self.number(column, row)?.unwrap_or(0.0))
    }

    /// A timestamp as UTC epoch seconds, `None` when the column is absent or the cell empty.
    pub fn optional_epoch_seconds(
        &self,
        column: impl ColumnId,
        row: usize,
    ) -> Result<Option<i64>, SourceError> {
        match self.views.get(column.index()) {
            Some(View::Missing) | None => Ok(None),
            Some(View::Text(array)) if !array.is_valid(row) || array.value(row).trim().is_empty() => Ok(None),
            Some(View::Time(array, _) | View::Int(array)) if !array.is_valid(row) => Ok(None),
            Some(_) => self.epoch_seconds(column, row).map(Some),
        }
    }

    /// A timestamp as UTC epoch seconds.
    pub fn epoch_seconds(&self, column: impl ColumnId, row: usize) -> Result<i64, SourceError> {
        match self.views.get(column.index()) {
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
    pub fn map(&self, column: impl ColumnId, row: usize) -> Result<Pairs<'a>, SourceError> {
        match self.views.get(column.index()) {
            Some(View::Map { list, keys, values }) if list.is_valid(row) => {
                let (start, end) = list.offsets().start_end(row);
                Ok((start..end)
                    .map(|i| {
                        let value = if values.is_valid(i) { values.value(i) } else { "" };
                        (Cow::Borrowed(keys.value(i)), Cow::Borrowed(value))
                    })
                    .collect())
            }
            Some(View::LazyMap(chunk, first)) => chunk
                .pairs(first + row)
                .map_err(|e| self.bad(row, column, format!("a key or value that is not UTF-8 text: {e}"))),
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
    use crate::sources::cur::reader::{COLUMN_NAMES, CUR, Col, REQUIRED, read_file};
    use polars_arrow::array::{MutableBinaryViewArray, StructArray as ArrowStruct};
    use polars_arrow::bitmap::Bitmap;
    use polars_arrow::offset::OffsetsBuffer;

    /// Every row's pairs of both map columns, as polars decodes them (the reference) and as
    /// `read_file` gives them (read apart by `map_column` wherever it can).
    /// Also returns the chunks read and how many map columns of them were read apart.
    fn both_ways(path: &Path) -> (Vec<[Pairs<'static>; 2]>, Vec<[Pairs<'static>; 2]>, usize, usize) {
        let owned = |pairs: Pairs<'_>| -> Pairs<'static> {
            pairs.into_iter().map(|(k, v)| (Cow::Owned(k.into_owned()), Cow::Owned(v.into_owned()))).collect()
        };
        let mut frame = ParquetReader::new(File::open(path).unwrap()).finish().unwrap();
        frame.rechunk_mut();
        let columns = Columns::new(&frame, &CUR, "reference", 0, &[]).unwrap();
        let expected: Vec<[Pairs<'static>; 2]> = (0..columns.rows)
            .map(|row| [Col::ResourceTags, Col::Product].map(|c| owned(columns.map(c, row).unwrap())))
            .collect();
        let (mut read, mut chunks, mut lazy) = (Vec::new(), 0, 0);
        read_file(path, "lazy", |columns| {
            chunks += 1;
            lazy += [Col::ResourceTags, Col::Product]
                .iter()
                .filter(|&&c| matches!(columns.views[c as usize], View::LazyMap(..)))
                .count();
            for row in 0..columns.rows {
                read.push([Col::ResourceTags, Col::Product].map(|c| owned(columns.map(c, row).unwrap())));
            }
            Ok(())
        })
        .unwrap();
        (expected, read, chunks, lazy)
    }

    /// A map column of `rows` rows: row r has r % 5 entries (none when r % 5 == 0; null when
    /// r % 7 == 3), the value of every fourth entry null and, in the second column, the key of
    /// every ninth; keys from a few names, values from `value(r, e)`.
    fn map_series(
        name: &str,
        rows: usize,
        null_keys: bool,
        value: impl Fn(usize, usize) -> String,
    ) -> Series {
        let (mut keys, mut values) =
            (MutableBinaryViewArray::<str>::new(), MutableBinaryViewArray::<str>::new());
        let mut offsets = vec![0i64];
        let mut validity = Vec::new();
        let mut entry = 0;
        for row in 0..rows {
            let valid = row % 7 != 3;
            if valid {
                for e in 0..row % 5 {
                    keys.push((!(null_keys && entry % 9 == 8)).then(|| format!("key_{e}")));
                    values.push((entry % 4 != 3).then(|| value(row, e)));
                    entry += 1;
                }
            }
            validity.push(valid);
            offsets.push(keys.len() as i64);
        }
        let entry_type = ArrowDataType::Struct(vec![
            polars_arrow::datatypes::Field::new("key".into(), ArrowDataType::Utf8View, null_keys),
            polars_arrow::datatypes::Field::new("value".into(), ArrowDataType::Utf8View, true),
        ]);
        let (keys, values): (Utf8ViewArray, Utf8ViewArray) = (keys.into(), values.into());
        let entries =
            ArrowStruct::new(entry_type.clone(), keys.len(), vec![keys.boxed(), values.boxed()], None);
        let list_type = ArrowDataType::LargeList(Box::new(polars_arrow::datatypes::Field::new(
            "item".into(),
            entry_type,
            true,
        )));
        let list = ListArray::<i64>::new(
            list_type,
            OffsetsBuffer::try_from(offsets).unwrap(),
            entries.boxed(),
            Some(Bitmap::from(validity)),
        );
        Series::from_arrow(name.into(), list.boxed()).unwrap()
    }

    #[test]
    fn map_columns_read_apart_match_polars_on_every_row() {
        // Several row groups, many small pages; tags from a handful of values (dictionary
        // pages), products unique per row (PLAIN pages), null rows, empty maps, null values and
        // null keys.
        let rows = 5_000;
        let required = COLUMN_NAMES[..REQUIRED]
            .iter()
            .map(|name| Column::new((*name).into(), vec!["x"; rows]))
            .collect::<Vec<_>>();
        let mut frame = DataFrame::new(rows, required).unwrap();
        frame
            .with_column(
                map_series("resource_tags", rows, false, |r, e| format!("team-{}", (r + e) % 3)).into(),
            )
            .unwrap();
        frame
            .with_column(
                map_series("product", rows, true, |r, e| format!("{r}-{e}-{}", "x".repeat(r % 40))).into(),
            )
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("maps.parquet");
        ParquetWriter::new(File::create(&path).unwrap())
            .with_row_group_size(Some(1_500))
            .with_data_page_size(Some(2_048))
            .finish(&mut frame)
            .unwrap();
        let (expected, read, chunks, lazy) = both_ways(&path);
        assert_eq!(read.len(), rows);
        assert_eq!(read, expected);
        // Several chunks, and both map columns of each went the new way.
        assert!(chunks > 1);
        assert_eq!(lazy, 2 * chunks);
        // Row 4: 4 entries (the 4th to 7th), the first's value null; row 3 is null; row 5 is
        // empty.
        assert_eq!(read[4][0].len(), 4);
        assert_eq!(read[4][0][0], (Cow::Borrowed("key_0"), Cow::Borrowed("")));
        assert_eq!(read[4][0][3], (Cow::Borrowed("key_3"), Cow::Borrowed("team-1")));
        assert!(read[3][0].is_empty() && read[5][0].is_empty());
    }

    /// [`both_ways`] of a fixture: the same rows both ways, and as many (rows, chunks, map
    /// columns read apart) as `expected`.
    fn same_both_ways(path: &Path, expected: (usize, usize, usize)) -> Vec<[Pairs<'static>; 2]> {
        let (polars, read, chunks, lazy) = both_ways(path);
        assert_eq!((read.len(), chunks, lazy), expected);
        assert_eq!(read, polars);
        read
    }

    #[test]
    fn map_columns_with_dictionary_overflow_match_polars() {
        // pyarrow's MAP columns whose dictionaries overflow: dictionary pages, then PLAIN
        // pages, in one column chunk (tests/fixtures/parquet-map-fallback/make.py).
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/parquet-map-fallback/map-fallback.parquet");
        let read = same_both_ways(&path, (3_000, 3, 6));
        let metadata = polars_parquet::parquet::read::read_metadata(&mut File::open(&path).unwrap()).unwrap();
        let tags =
            map_column::MapChunk::read(&File::open(&path).unwrap(), &metadata.row_groups[0], "resource_tags")
                .map_err(|e| e.0)
                .unwrap();
        assert!(tags.pages.0 > 0 && tags.pages.1 > 0, "dictionary and PLAIN pages: {:?}", tags.pages);
        // Row 7: 3 entries, the first value null ((7 + 0) % 6 == 1).
        assert_eq!(read[7][0][0], (Cow::Borrowed("key_0"), Cow::Borrowed("")));
        assert_eq!(read[7][0][2], (Cow::Borrowed("key_2"), Cow::Borrowed("pod-7-2")));
    }

    #[test]
    fn a_map_column_in_an_encoding_read_apart_does_not_know_is_left_to_polars() {
        // The tags' values DELTA_BYTE_ARRAY-encoded: polars reads that column, the product
        // map is still read apart, and every row matches.
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/parquet-map-fallback/map-delta.parquet");
        let read = same_both_ways(&path, (500, 1, 1));
        assert_eq!(read[2][0][1], (Cow::Borrowed("key_1"), Cow::Borrowed("pod-2-1")));
    }

    #[test]
    fn aws_map_columns_read_apart_match_polars() {
        // The fixture's MAP columns, written as AWS writes them.
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "tests/fixtures/aws-parquet-map/gpuledger-cur2/data/BILLING_PERIOD=2026-10/gpuledger-cur2-00001.snappy.parquet",
        );
        let read = same_both_ways(&path, (2_500, 1, 2));
        assert!(read.iter().any(|row| row[0].iter().any(|(k, _)| k == "aws_eks_workload_name")));
    }

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
