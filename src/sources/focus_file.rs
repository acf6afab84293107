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

fn csv_field(value: &Option<String>) -> String {
    match value {
        None => String::new(),
        Some(text) if text.contains([',', '"', '\n']) => format!("\"{}\"", text.replace('"', "\"\"")),
        Some(text) => text.clone(),
    }
}

fn create(path: &Path) -> Result<fs::File, FileError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io_error(parent))?;
    }
    fs::File::create(path).map_err(io_error(path))
}

/// Writes rows (texts in `header`'s order, `None` for null) as gzip CSV; returns the rows.
pub fn write_csv_gz(path: &Path, header: &[&str], rows: &[Vec<Option<String>>]) -> Result<u64, FileError> {
    let file = create(path)?;
    let mut out = flate2::write::GzEncoder::new(std::io::BufWriter::new(file), flate2::Compression::fast());
    let mut line = header.join(",");
    line.push('\n');
    out.write_all(line.as_bytes()).map_err(io_error(path))?;
    for values in rows {
        line.clear();
        for (i, value) in values.iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            line.push_str(&csv_field(value));
        }
        line.push('\n');
        out.write_all(line.as_bytes()).map_err(io_error(path))?;
    }
    out.finish().map_err(io_error(path))?;
    Ok(rows.len() as u64)
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
    let encode = |source| FileError::Encode { path: path.to_path_buf(), source };
    let mut columns = Vec::with_capacity(header.len());
    for (index, name) in header.iter().enumerate() {
        let values = rows.iter().map(|r| r[index].as_deref());
        let column = if is_number(name) {
            let numbers: Vec<Option<f64>> = values.map(|v| v.and_then(|t| t.parse().ok())).collect();
            Column::new((*name).into(), numbers)
        } else if is_datetime(name) {
            let millis: Vec<Option<i64>> = values
                .map(|v| {
                    v.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()).map(|t| t.timestamp() * 1000)
                })
                .collect();
            utc_datetimes(name, millis)
        } else {
            Column::new((*name).into(), values.collect::<Vec<Option<&str>>>())
        };
        columns.push(column);
    }
    let mut frame = DataFrame::new(rows.len(), columns).map_err(encode)?;
    let file = create(path)?;
    ParquetWriter::new(file).finish(&mut frame).map_err(encode)?;
    Ok(rows.len() as u64)
}
