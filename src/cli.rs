//! The command line: one typed configuration (`clap` derive), every option also readable
//! from a `GPULEDGER_*` environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::ingest::{self, CurIngestOptions};
use crate::period::Period;
use crate::report::{NamespaceReport, OutputFormat};
use crate::sources::objects::S3Options;
use crate::store;
use crate::synth::{self, CurFormat, GenerateOptions, Scale};
use crate::web;

/// Bill-accurate GPU cost, usage and savings for Kubernetes GPU fleets on AWS.
///
/// gpuledger reads AWS CUR 2.0 exports with EKS split cost allocation data and Prometheus
/// DCGM metrics into SQLite (default) or Postgres and serves a dashboard for finance,
/// agency managers and leadership.
#[derive(Debug, Parser)]
#[command(name = "gpuledger", version, propagate_version = true)]
pub struct Cli {
    /// Database: `sqlite:PATH` (embedded, the default) or `postgres://user:pass@host/db`.
    #[arg(
        long,
        global = true,
        env = "GPULEDGER_DATABASE_URL",
        default_value = "sqlite:gpuledger.db",
        hide_env_values = true
    )]
    pub database_url: String,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create or upgrade the database schema (every command also does this on start).
    Migrate,
    /// Write a realistic synthetic CUR 2.0 export, DCGM/inference metrics and truth.json.
    Generate(GenerateArgs),
    /// Serve the dashboard.
    Serve(ServeArgs),
    /// Ingest data into the database.
    #[command(subcommand)]
    Ingest(IngestCommand),
    /// Print a report from the database (table for people, CSV or JSON for scripts).
    #[command(subcommand)]
    Report(ReportCommand),
    /// Generate demo data (first run only), ingest it into the embedded database and serve
    /// the dashboard on http://127.0.0.1:8080.
    Demo(DemoArgs),
}

#[derive(Debug, Subcommand)]
pub enum IngestCommand {
    /// Ingest a CUR 2.0 data export (Parquet or gzip CSV) found through its manifests.
    Cur(CurArgs),
}

#[derive(Debug, Args)]
pub struct CurArgs {
    /// An export root (holding metadata/ and data/), one BILLING_PERIOD=YYYY-MM folder, or
    /// s3://bucket/prefix/export-name.
    #[arg(env = "GPULEDGER_CUR_SOURCE")]
    pub source: String,
    /// Only this billing period.
    #[arg(long, env = "GPULEDGER_CUR_PERIOD")]
    pub period: Option<Period>,
    /// Ingest even when the manifest's data version has not changed.
    #[arg(long, env = "GPULEDGER_CUR_FORCE")]
    pub force: bool,
    /// An S3-compatible endpoint (switches to path-style addressing).
    #[arg(long, env = "GPULEDGER_S3_ENDPOINT_URL")]
    pub endpoint_url: Option<String>,
    /// Seconds to wait for S3 to connect, answer, or send the next bytes of a file.
    #[arg(long, env = "GPULEDGER_S3_TIMEOUT_SECONDS", default_value_t = 30)]
    pub s3_timeout: u64,
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Kubernetes cost per namespace with other AWS cost and the bill total.
    Namespaces(NamespacesArgs),
}

#[derive(Debug, Args)]
pub struct NamespacesArgs {
    /// Billing period, YYYY-MM.
    #[arg(long, env = "GPULEDGER_REPORT_PERIOD")]
    pub period: Period,
    /// Only this cluster.
    #[arg(long, env = "GPULEDGER_REPORT_CLUSTER")]
    pub cluster: Option<String>,
    /// One row per cluster and namespace.
    #[arg(long, env = "GPULEDGER_REPORT_BY_CLUSTER")]
    pub by_cluster: bool,
    #[arg(long, env = "GPULEDGER_REPORT_FORMAT", value_enum, default_value = "table")]
    pub format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Folder to write into (created if missing).
    #[arg(long, env = "GPULEDGER_GENERATE_OUT")]
    pub out: PathBuf,
    /// Random seed: the same seed gives byte-identical data.
    #[arg(long, env = "GPULEDGER_GENERATE_SEED", default_value_t = 42)]
    pub seed: u64,
    /// Number of months, ending at --end.
    #[arg(long, env = "GPULEDGER_GENERATE_MONTHS", default_value_t = 1)]
    pub months: u32,
    /// Last billing period, YYYY-MM (default: the last complete month).
    #[arg(long, env = "GPULEDGER_GENERATE_END")]
    pub end: Option<Period>,
    /// Fleet size: demo (~11 GPU nodes), small (~25), large (~200 GPU + 300 CPU nodes,
    /// ~10 million CUR rows a month).
    #[arg(long, env = "GPULEDGER_GENERATE_SCALE", value_enum, default_value = "demo")]
    pub scale: Scale,
    /// CUR data file format.
    #[arg(long, env = "GPULEDGER_GENERATE_FORMAT", value_enum, default_value = "parquet")]
    pub format: CurFormat,
    /// S3 bucket named in the manifest's dataFiles URIs.
    #[arg(long, env = "GPULEDGER_GENERATE_BUCKET", default_value = "example-cur-bucket")]
    pub bucket: String,
    /// Key prefix before the export name.
    #[arg(long, env = "GPULEDGER_GENERATE_PREFIX", default_value = "cur")]
    pub prefix: String,
    /// Data export name.
    #[arg(long, env = "GPULEDGER_GENERATE_EXPORT_NAME", default_value = "gpuledger-cur2")]
    pub export_name: String,
    /// Skip the OpenMetrics files.
    #[arg(long, env = "GPULEDGER_GENERATE_NO_METRICS")]
    pub no_metrics: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "GPULEDGER_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Folder for the generated demo data.
    #[arg(long, env = "GPULEDGER_DEMO_DATA", default_value = "gpuledger-demo-data")]
    pub data: PathBuf,
    /// Address to listen on.
    #[arg(long, env = "GPULEDGER_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`, with sqlx's per-statement
/// notices and slow-query warnings left out: a month-sized report is slow by nature).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=error"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

/// The last complete calendar month, the default end of generated data (never the future).
pub fn last_complete_month() -> Period {
    Period::containing(chrono::Utc::now().timestamp()).previous()
}

/// Runs one command.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Migrate => {
            let store = store::connect(&cli.database_url).await?;
            println!("database ready ({})", store.backend());
            Ok(())
        }
        Command::Generate(args) => {
            let options = GenerateOptions {
                out: args.out,
                seed: args.seed,
                months: args.months,
                end: args.end.unwrap_or_else(last_complete_month),
                scale: args.scale,
                format: args.format,
                bucket: args.bucket,
                prefix: args.prefix,
                export_name: args.export_name,
                metrics: !args.no_metrics,
            };
            let summary = generate_blocking(options).await?;
            // The summary is for scripts: JSON on stdout; progress went to stderr.
            println!("{}", serde_json::to_string(&summary)?);
            Ok(())
        }
        Command::Serve(args) => {
            let store = store::connect(&cli.database_url).await?;
            web::serve(web::AppState::new(store), args.listen).await
        }
        Command::Ingest(IngestCommand::Cur(args)) => {
            let store = store::connect(&cli.database_url).await?;
            let options = CurIngestOptions {
                source: args.source,
                period: args.period,
                force: args.force,
                s3: S3Options {
                    endpoint_url: args.endpoint_url,
                    timeout: std::time::Duration::from_secs(args.s3_timeout.max(1)),
                },
            };
            run_cur_ingest(store.as_ref(), &options).await
        }
        Command::Report(ReportCommand::Namespaces(args)) => {
            let store = store::connect(&cli.database_url).await?;
            let report =
                NamespaceReport::load(store.as_ref(), args.period, args.cluster.as_deref(), args.by_cluster)
                    .await?;
            print!("{}", report.render(args.format));
            Ok(())
        }
        Command::Demo(args) => {
            if !args.data.join("truth.json").exists() {
                let options = GenerateOptions {
                    out: args.data.clone(),
                    seed: 42,
                    months: 6,
                    end: last_complete_month(),
                    scale: Scale::Demo,
                    format: CurFormat::Parquet,
                    bucket: "example-cur-bucket".into(),
                    prefix: "cur".into(),
                    export_name: "gpuledger-cur2".into(),
                    metrics: true,
                };
                let summary = generate_blocking(options).await?;
                eprintln!(
                    "generated {} CUR rows for {} in {}",
                    summary.cur_rows,
                    summary.periods.join(", "),
                    args.data.display()
                );
            }
            let store = store::connect(&cli.database_url).await?;
            let options = CurIngestOptions {
                source: args.data.join("cur").join("gpuledger-cur2").display().to_string(),
                period: None,
                force: false,
                s3: S3Options::default(),
            };
            run_cur_ingest(store.as_ref(), &options).await?;
            web::serve(web::AppState::new(store), args.listen).await
        }
    }
}

/// Runs a CUR ingest and prints each period's outcome and reconciliation.
async fn run_cur_ingest(store: &dyn store::Store, options: &CurIngestOptions) -> anyhow::Result<()> {
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
    let results = ingest::ingest_cur(store, options, &progress).await?;
    for result in &results {
        match &result.reconciliation {
            None => {
                println!("{}: skipped, data version {} already ingested", result.period, result.data_version)
            }
            Some(r) => {
                println!(
                    "{}: ingested {} rows in {:.1} s (read {:.1} s, write {:.1} s; data version {})",
                    result.period,
                    r.rows_read,
                    result.seconds,
                    result.read_seconds,
                    result.write_seconds,
                    result.data_version
                );
                println!(
                    "  bill: unblended {} USD, amortized {} USD; Kubernetes (split + unused) {} USD + other {} USD",
                    r.bill_unblended_total, r.bill_amortized_total, r.kubernetes_allocated_cost, r.other_cost
                );
                println!(
                    "  split vs parent instances: {} of {} instance-hours disagree by more than 0.01 %{}",
                    r.instance_hours_disagreeing,
                    r.instance_hours_checked,
                    if r.split_matches_parents { "" } else { " (see the ingest run for which)" }
                );
                for d in r.disagreements.iter().take(5) {
                    println!(
                        "    {} at {}: instance {:.6} USD, pods {:.6} USD",
                        d.instance_id, d.hour, d.instance_amortized, d.pods_split_plus_unused
                    );
                }
            }
        }
    }
    Ok(())
}

/// Generation is CPU-bound: run it off the async runtime, with progress on stderr.
async fn generate_blocking(options: GenerateOptions) -> anyhow::Result<synth::GenerateSummary> {
    let out = options.out.clone();
    tokio::task::spawn_blocking(move || {
        let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
        synth::generate(&options, &progress)
    })
    .await?
    .with_context(|| format!("generating into {}", out.display()))
}
