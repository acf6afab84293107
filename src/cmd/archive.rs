//! `gpuledger archive`: old periods' detail rows out to Parquet files, and back.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};

use crate::archive;
use crate::cli::{ArchiveCommand, ArchiveCreateArgs};
use crate::ingest::scratch::Scratch;
use crate::period::utc_minute;
use crate::report::{OutputFormat, csv_cell};
use crate::sources::objects::{ObjectStore, S3Options, S3Store};
use crate::store::{ArchivedPeriod, PeriodDetail, Store};

pub(super) async fn run(store: &dyn Store, command: ArchiveCommand) -> anyhow::Result<()> {
    match command {
        ArchiveCommand::Create(args) => create(store, args).await,
        ArchiveCommand::Restore { folder, endpoint_url } => restore(store, &folder, endpoint_url).await,
        ArchiveCommand::List { format } => list(store, format).await,
    }
}

/// Where archives go: a local folder, or a bucket's prefix (written through a scratch folder).
enum Destination {
    Folder(PathBuf),
    S3 { store: S3Store, uri: String },
}

impl Destination {
    async fn open(to: &str, endpoint_url: Option<String>) -> anyhow::Result<Destination> {
        if to.starts_with("s3://") {
            let store = S3Store::connect(to, &S3Options { endpoint_url, ..S3Options::default() }).await?;
            let uri = store.describe().trim_end_matches('/').to_string();
            return Ok(Destination::S3 { store, uri });
        }
        std::fs::create_dir_all(to).with_context(|| format!("creating {to}"))?;
        Ok(Destination::Folder(Path::new(to).canonicalize().with_context(|| format!("opening {to}"))?))
    }
}

async fn create(store: &dyn Store, args: ArchiveCreateArgs) -> anyhow::Result<()> {
    // A month still running is still being delivered: the next delivery would replace it.
    let now = chrono::Utc::now().timestamp();
    if let Some(open) = args.periods.iter().find(|p| p.end() > now) {
        bail!("billing period {open} has not ended: AWS is still delivering it, so it cannot be archived");
    }
    let destination = Destination::open(&args.to, args.endpoint_url).await?;
    let mut periods: Vec<String> = args.periods.iter().map(|p| p.to_string()).collect();
    if let Some(before) = args.before {
        let archived: Vec<String> = store.archived_periods().await?.into_iter().map(|a| a.period).collect();
        // Only months that have ended.
        let before = before.min(crate::period::Period::containing(now)).to_string();
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
        archive_one(store, &destination, &period).await?;
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

/// Writes the archive's files under `root` (off the async threads); returns the folder, the
/// manifest's bytes and the rows back.
async fn write_files(
    root: &Path,
    period: &str,
    data_version: &str,
    archived_at: i64,
    detail: PeriodDetail,
) -> anyhow::Result<(PathBuf, Vec<u8>, PeriodDetail)> {
    let (root, period, data_version) = (root.to_path_buf(), period.to_string(), data_version.to_string());
    let written = tokio::task::spawn_blocking(move || {
        archive::write(&root, &period, &data_version, archived_at, &detail).map(|(d, m)| (d, m, detail))
    });
    Ok(written.await??)
}

/// Uploads the archive in `dir` to `period/` of `s3`, the manifest last; each object is read
/// back and compared with the file.
async fn upload(s3: &S3Store, dir: &Path, period: &str) -> anyhow::Result<()> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .map(|entry| Ok(entry?.file_name().to_string_lossy().to_string()))
        .collect::<std::io::Result<_>>()?;
    names.sort_by_key(|name| name == archive::MANIFEST);
    for name in names {
        let bytes = std::fs::read(dir.join(&name))?;
        let key = format!("{period}/{name}");
        s3.put(&key, bytes.clone()).await?;
        let back = s3.get(&key).await?.map(|object| object.bytes);
        if back.as_deref() != Some(bytes.as_slice()) {
            bail!("{}: the object read back differs from the file written", s3.locate(&key));
        }
    }
    Ok(())
}

async fn archive_one(store: &dyn Store, destination: &Destination, period: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    let bar = spinner(period);
    let manifest_key = format!("{period}/{}", archive::MANIFEST);
    if let Destination::S3 { store: s3, .. } = destination
        && s3.get(&manifest_key).await?.is_some()
    {
        bar.finish_and_clear();
        bail!(
            "{}: an archive of this period is already there: move it away or archive to another prefix",
            s3.locate(&manifest_key)
        );
    }
    bar.set_message("reading its detail rows");
    let (data_version, detail) = store.period_detail(period).await?;
    bar.set_message(format!("writing and checking {} rows", detail.rows()));
    let archived_at = chrono::Utc::now().timestamp();
    let (location, manifest, detail, bytes) = match destination {
        Destination::Folder(root) => {
            let (dir, manifest, detail) =
                write_files(root, period, &data_version, archived_at, detail).await?;
            let bytes = folder_bytes(&dir)?;
            (dir.display().to_string(), manifest, detail, bytes)
        }
        Destination::S3 { store: s3, uri } => {
            let scratch = Scratch::new().context("creating a scratch folder")?;
            let (dir, manifest, detail) =
                write_files(&scratch.dir, period, &data_version, archived_at, detail).await?;
            bar.set_message(format!("uploading to {uri}/{period}"));
            upload(s3, &dir, period).await?;
            (format!("{uri}/{period}"), manifest, detail, folder_bytes(&dir)?)
        }
    };
    let record = ArchivedPeriod {
        period: period.to_string(),
        data_version,
        archived_at,
        location,
        detail_rows: detail.rows() as i64,
        manifest_sha256: crate::text::sha256_hex(&manifest),
    };
    bar.set_message("removing its rows from the database");
    if let Err(error) = store.archive_period(&record).await {
        // The database is as it was (unless only the answer to its commit was lost): without
        // its manifest the folder is an unfinished archive, which the next attempt writes over.
        let archived = store.archived_periods().await.map(|all| all.iter().any(|a| a.period == period));
        if archived.is_ok_and(|archived| !archived) {
            let _ = match destination {
                Destination::Folder(root) => {
                    std::fs::remove_file(archive::folder(root, period).join(archive::MANIFEST))
                        .map_err(|e| e.to_string())
                }
                Destination::S3 { store: s3, .. } => {
                    s3.delete(&manifest_key).await.map_err(|e| e.to_string())
                }
            };
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
    eprintln!(
        "archived {period}: {} rows in {} ({:.1} MB) in {:.1} s; its bill, rollups and invoices stay",
        record.detail_rows,
        record.location,
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The bytes of the files in `dir`.
fn folder_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut bytes = 0;
    for entry in std::fs::read_dir(dir)? {
        bytes += entry?.metadata()?.len();
    }
    Ok(bytes)
}

/// Reads the archive at `folder` (a local folder or an S3 prefix, downloaded to `scratch`).
async fn read_archive(
    folder: &str,
    endpoint_url: Option<String>,
    scratch: &Scratch,
) -> anyhow::Result<(archive::Manifest, Vec<u8>, PeriodDetail)> {
    let dir = if folder.starts_with("s3://") {
        let s3 = S3Store::connect(folder, &S3Options { endpoint_url, ..S3Options::default() }).await?;
        let files = s3.files("").await?;
        if !files.iter().any(|name| name == archive::MANIFEST) {
            bail!("{}: not there, so no finished archive is", s3.locate(archive::MANIFEST));
        }
        for name in files.iter().filter(|name| *name == archive::MANIFEST || name.ends_with(".parquet")) {
            s3.local_copy(name, &scratch.dir).await?;
        }
        scratch.dir.clone()
    } else {
        PathBuf::from(folder)
    };
    let read = tokio::task::spawn_blocking(move || archive::read(&dir)).await?;
    read.with_context(|| format!("reading the archive at {folder}"))
}

async fn restore(store: &dyn Store, folder: &str, endpoint_url: Option<String>) -> anyhow::Result<()> {
    let started = Instant::now();
    let scratch = Scratch::new().context("creating a scratch folder")?;
    let (manifest, manifest_bytes, detail) = read_archive(folder, endpoint_url, &scratch).await?;
    let period = manifest.period.as_str();
    let Some(record) = store.archived_periods().await?.into_iter().find(|a| a.period == period) else {
        bail!("billing period {period} is not archived: its rows are in the database, nothing to restore");
    };
    let sha256 = crate::text::sha256_hex(&manifest_bytes);
    if sha256 != record.manifest_sha256 {
        bail!(
            "{folder} is not the archive written when {period} was archived on {} to {} (its manifest's SHA-256 is \
             {sha256}, the database recorded {}): nothing restored",
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
    super::users::audit(store, "period_restored", format!("{period} from {folder}")).await?;
    eprintln!(
        "restored {period}: {} rows from {folder} in {:.1} s (the files stay where they are)",
        detail.rows(),
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
