//! `gpuledger archive`: old periods' detail rows out to Parquet files, and back.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};

use crate::archive;
use crate::cli::{ArchiveCommand, ArchiveCreateArgs};
use crate::period::utc_minute;
use crate::report::{OutputFormat, csv_cell};
use crate::store::{ArchivedPeriod, Store};

pub(super) async fn run(store: &dyn Store, command: ArchiveCommand) -> anyhow::Result<()> {
    match command {
        ArchiveCommand::Create(args) => create(store, args).await,
        ArchiveCommand::Restore { folder } => restore(store, &folder).await,
        ArchiveCommand::List { format } => list(store, format).await,
    }
}

async fn create(store: &dyn Store, args: ArchiveCreateArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.to).with_context(|| format!("creating {}", args.to.display()))?;
    let root = args.to.canonicalize().with_context(|| format!("opening {}", args.to.display()))?;
    let mut periods: Vec<String> = args.periods.iter().map(|p| p.to_string()).collect();
    if let Some(before) = args.before {
        let archived: Vec<String> = store.archived_periods().await?.into_iter().map(|a| a.period).collect();
        let before = before.to_string();
        for stored in store.periods().await?.into_iter().rev() {
            if stored.period < before
                && !archived.contains(&stored.period)
                && !periods.contains(&stored.period)
            {
                periods.push(stored.period);
            }
        }
        if periods.is_empty() {
            eprintln!("no stored period before {before} is left to archive");
        }
    }
    for period in periods {
        archive_one(store, &root, &period).await?;
    }
    Ok(())
}

/// A spinner on stderr that says which step a period is at.
fn spinner(period: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar.set_prefix(period.to_string());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {prefix} {msg} ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar
}

async fn archive_one(store: &dyn Store, root: &Path, period: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    let bar = spinner(period);
    bar.set_message("reading its detail rows");
    let (data_version, detail) = store.period_detail(period).await?;
    bar.set_message(format!("writing and checking {} rows", detail.rows()));
    let archived_at = chrono::Utc::now().timestamp();
    let (dir, manifest, detail) = {
        let (root, period, data_version) = (root.to_path_buf(), period.to_string(), data_version.clone());
        tokio::task::spawn_blocking(move || {
            archive::write(&root, &period, &data_version, archived_at, &detail).map(|(d, m)| (d, m, detail))
        })
        .await??
    };
    let record = ArchivedPeriod {
        period: period.to_string(),
        data_version,
        archived_at,
        location: dir.display().to_string(),
        detail_rows: detail.rows() as i64,
        manifest_sha256: crate::auth::sha256_hex(&manifest),
    };
    bar.set_message("removing its rows from the database");
    if let Err(error) = store.archive_period(&record).await {
        // The database is as it was (unless only the answer to its commit was lost): without
        // its manifest the folder is an unfinished archive, which the next attempt writes over.
        let archived = store.archived_periods().await.map(|all| all.iter().any(|a| a.period == period));
        if archived.is_ok_and(|archived| !archived) {
            let _ = std::fs::remove_file(dir.join(archive::MANIFEST));
        }
        bar.finish_and_clear();
        return Err(error)
            .with_context(|| format!("archiving {period}: nothing was removed from the database"));
    }
    bar.finish_and_clear();
    super::users::audit(
        store,
        "period_archived",
        format!("{period} to {} ({} rows)", record.location, record.detail_rows),
    )
    .await?;
    let bytes: u64 = std::fs::read_dir(&dir)?
        .filter_map(|entry| entry.ok()?.metadata().ok())
        .map(|metadata| metadata.len())
        .sum();
    eprintln!(
        "archived {period}: {} rows in {} ({:.1} MB) in {:.1} s; its bill, rollups and invoices stay",
        record.detail_rows,
        dir.display(),
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn restore(store: &dyn Store, folder: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    let folder: PathBuf = folder.to_path_buf();
    let (manifest, manifest_bytes, detail) = {
        let folder = folder.clone();
        tokio::task::spawn_blocking(move || archive::read(&folder)).await??
    };
    let period = manifest.period.as_str();
    let Some(record) = store.archived_periods().await?.into_iter().find(|a| a.period == period) else {
        bail!("billing period {period} is not archived: its rows are in the database, nothing to restore");
    };
    let sha256 = crate::auth::sha256_hex(&manifest_bytes);
    if sha256 != record.manifest_sha256 {
        bail!(
            "{} is not the archive written when {period} was archived on {} to {} (its manifest's SHA-256 is {sha256}, \
             the database recorded {}): nothing restored",
            folder.display(),
            utc_minute(record.archived_at),
            record.location,
            record.manifest_sha256
        );
    }
    let bar = spinner(period);
    bar.set_message(format!("writing {} rows back", detail.rows()));
    let restored = store.restore_period(period, &manifest.data_version, &detail).await;
    bar.finish_and_clear();
    restored?;
    super::users::audit(store, "period_restored", format!("{period} from {}", folder.display())).await?;
    eprintln!(
        "restored {period}: {} rows from {} in {:.1} s (the files stay where they are)",
        detail.rows(),
        folder.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn list(store: &dyn Store, format: OutputFormat) -> anyhow::Result<()> {
    let archived = store.archived_periods().await?;
    match format {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&archived)?),
        OutputFormat::Csv => {
            println!("period,data_version,archived_at,location,detail_rows,manifest_sha256");
            for a in &archived {
                println!(
                    "{},{},{},{},{},{}",
                    a.period,
                    csv_cell(&a.data_version),
                    a.archived_at,
                    csv_cell(&a.location),
                    a.detail_rows,
                    a.manifest_sha256
                );
            }
        }
        OutputFormat::Table => {
            if archived.is_empty() {
                eprintln!("no archived period");
            }
            for a in &archived {
                println!(
                    "{}  {}  {:>10} rows  {}",
                    a.period,
                    utc_minute(a.archived_at),
                    a.detail_rows,
                    a.location
                );
            }
        }
    }
    Ok(())
}
