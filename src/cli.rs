//! The command line: one typed configuration (`clap` derive), every option also readable
//! from a `GPULEDGER_*` environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::period::Period;
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
    /// Generate demo data (first run only), prepare the embedded database and serve the
    /// dashboard on http://127.0.0.1:8080.
    Demo(DemoArgs),
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

/// Logs to stderr, filtered by `RUST_LOG` (default `info`).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
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
            web::serve(web::AppState::new(store), args.listen).await
        }
    }
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
