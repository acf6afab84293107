//! `gpuledger export focus`: a month's FOCUS bills as FOCUS 1.3, with gpuledger's split, into
//! a folder or to S3.

use std::path::{Path, PathBuf};

use anyhow::bail;

use crate::cli::ExportCommand;
use crate::export::focus::{ExportSummary, export_focus};
use crate::sources::objects::{ObjectStore, S3Options, S3Store};
use crate::store::Store;

pub(super) async fn run(store: &dyn Store, command: ExportCommand) -> anyhow::Result<()> {
    match command {
        ExportCommand::Focus { period, out, format, endpoint_url } => {
            let started = std::time::Instant::now();
            let summary = if out.starts_with("s3://") {
                let s3 = S3Store::connect(&out, &S3Options { endpoint_url, ..S3Options::default() }).await?;
                // Written to a folder of its own first (the writers take a path), then uploaded.
                let staging =
                    std::env::temp_dir().join(format!("gpuledger-export-{}-{period}", std::process::id()));
                let uploaded = match export_focus(store, period, &staging, format).await {
                    Ok(summary) => upload(&s3, summary).await,
                    Err(e) => Err(e.into()),
                };
                let _ = std::fs::remove_dir_all(&staging);
                uploaded?
            } else {
                export_focus(store, period, Path::new(&out), format).await?
            };
            eprintln!(
                "{}: {} rows ({} allocated, from {} origin charges) in {:.1} s",
                summary.file.display(),
                summary.rows,
                summary.allocated_rows,
                summary.origin_charges_split,
                started.elapsed().as_secs_f64()
            );
            println!("{}", serde_json::to_string_pretty(&summary)?);
            Ok(())
        }
    }
}

/// Uploads the written file under its name and reads it back; the summary then names the
/// object.
async fn upload(s3: &S3Store, mut summary: ExportSummary) -> anyhow::Result<ExportSummary> {
    let name = summary.file.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    eprintln!("uploading {name} to {}", s3.describe());
    let bytes = std::fs::read(&summary.file)?;
    s3.put(&name, bytes.clone()).await?;
    let back = s3.get(&name).await?.map(|object| object.bytes);
    if back.as_deref() != Some(bytes.as_slice()) {
        bail!("{}: the object read back differs from the file written", s3.locate(&name));
    }
    summary.file = PathBuf::from(s3.locate(&name));
    Ok(summary)
}
