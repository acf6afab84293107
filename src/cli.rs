//! The command line: one typed configuration (`clap` derive), every option also readable
//! from a `GPULEDGER_*` environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::engine::compute::{ComputeOptions, ComputeSummary};
use crate::ingest::CurIngestOptions;
use crate::ingest::metrics::{Detected, MetricsIngestOptions, MetricsSource};
use crate::period::{Period, Range};
use crate::pipeline;
use crate::report::rollup::{self, RollupRange};
use crate::report::usage::{GpuReport, InferenceReport};
use crate::report::{NamespaceReport, OutputFormat};
use crate::sources::objects::S3Options;
use crate::sources::prometheus::api::ApiOptions;
use crate::sources::prometheus::{LabelOverrides, MetricNames, Role};
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
    /// Compute a period's rollups (cost, GPU-hours, idle, spot, inference, chargeback,
    /// opportunities); every ingest runs it for the periods it touched.
    Compute(ComputeArgs),
    /// Clients for chargeback: their share policy, markup and mapping rules.
    #[command(subcommand)]
    Clients(ClientsCommand),
}

#[derive(Debug, Args)]
pub struct ComputeArgs {
    /// Only this billing period (default: every ingested period).
    #[arg(long, env = "GPULEDGER_COMPUTE_PERIOD")]
    pub period: Option<Period>,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Settings the engine computes with.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// GPU-hours whose hourly mean utilization is below this fraction are idle.
    #[arg(long, env = "GPULEDGER_IDLE_THRESHOLD", default_value_t = 0.10)]
    pub idle_threshold: f64,
    /// Namespaces whose cost is shared between clients (comma-separated).
    #[arg(
        long,
        env = "GPULEDGER_PLATFORM_NAMESPACES",
        value_delimiter = ',',
        default_value = "kube-system,monitoring,gpu-operator"
    )]
    pub platform_namespaces: Vec<String>,
}

impl EngineArgs {
    fn options(&self) -> ComputeOptions {
        ComputeOptions {
            idle_threshold: self.idle_threshold,
            platform_namespaces: self.platform_namespaces.clone(),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum ClientsCommand {
    /// Clients with their settings, and the mapping rules.
    List,
    /// Create or change a client: share policy and markup.
    Set(ClientSetArgs),
    /// Add a mapping rule: pods matching it belong to CLIENT.
    Map(ClientMapArgs),
    /// Remove every mapping rule of CLIENT.
    Unmap { client: String },
}

#[derive(Debug, Args)]
pub struct ClientSetArgs {
    pub name: String,
    /// How the client shares platform and idle cost: gpu (by GPU cost), total (by direct
    /// cost), even, or none.
    #[arg(long, default_value = "gpu")]
    pub policy: String,
    /// Markup in percent on direct + shared cost (e.g. 12.5).
    #[arg(long, default_value_t = 0.0)]
    pub markup_percent: f64,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("rule").required(true).args(["namespace", "prefix", "regex", "label_value"]))]
pub struct ClientMapArgs {
    pub client: String,
    /// Exact namespace.
    #[arg(long)]
    pub namespace: Option<String>,
    /// Namespace prefix.
    #[arg(long)]
    pub prefix: Option<String>,
    /// Namespace regular expression (whole name).
    #[arg(long)]
    pub regex: Option<String>,
    /// Pods whose --label-key label has this value.
    #[arg(long)]
    pub label_value: Option<String>,
    #[arg(long, default_value = "user_client")]
    pub label_key: String,
    /// Lower numbers are tried first.
    #[arg(long, default_value_t = 100)]
    pub priority: i64,
}

/// A billing period or a range of whole days.
#[derive(Debug, Args)]
pub struct RangeArgs {
    /// Billing period, YYYY-MM.
    #[arg(long, env = "GPULEDGER_REPORT_PERIOD", conflicts_with_all = ["from", "to"])]
    pub period: Option<String>,
    /// First day (YYYY-MM-DD, UTC).
    #[arg(long, env = "GPULEDGER_REPORT_FROM", requires = "to")]
    pub from: Option<String>,
    /// Day after the last (YYYY-MM-DD, exclusive).
    #[arg(long, env = "GPULEDGER_REPORT_TO", requires = "from")]
    pub to: Option<String>,
    #[arg(long, env = "GPULEDGER_REPORT_FORMAT", value_enum, default_value = "table")]
    pub format: OutputFormat,
}

/// A command line that asks for something impossible (a bad period or range): exit code 2,
/// as for clap's own usage errors.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl RangeArgs {
    async fn load(&self, store: &dyn store::Store) -> anyhow::Result<RollupRange> {
        let range = Range::parse(self.period.as_deref(), self.from.as_deref(), self.to.as_deref())
            .map_err(|e| UsageError(format!("--{e}")))?
            .ok_or_else(|| UsageError("give --period YYYY-MM, or --from and --to".into()))?;
        Ok(RollupRange::load(store, range.label(), range.start(), range.end()).await?)
    }
}

#[derive(Debug, Subcommand)]
pub enum IngestCommand {
    /// Ingest a CUR 2.0 data export (Parquet or gzip CSV) found through its manifests.
    Cur(CurArgs),
    /// Ingest GPU (DCGM) and inference metrics from a Prometheus server or an OpenMetrics
    /// file with timestamps; the window [--from, --to) is replaced whole.
    Prometheus(Box<PrometheusArgs>),
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("metrics_source").required(true).args(["url", "file"]))]
pub struct PrometheusArgs {
    /// Prometheus base URL, e.g. http://prometheus:9090.
    #[arg(long, env = "GPULEDGER_PROMETHEUS_URL")]
    pub url: Option<String>,
    /// An OpenMetrics/Prometheus text file whose samples carry timestamps (offline import).
    #[arg(long, env = "GPULEDGER_PROMETHEUS_FILE")]
    pub file: Option<PathBuf>,
    /// Window start: RFC 3339, YYYY-MM-DD, or unix seconds; rounded down to the hour.
    #[arg(long, env = "GPULEDGER_PROMETHEUS_FROM", value_parser = parse_time)]
    pub from: Option<i64>,
    /// Window end (exclusive); rounded up to the hour.
    #[arg(long, env = "GPULEDGER_PROMETHEUS_TO", value_parser = parse_time)]
    pub to: Option<i64>,
    /// A whole billing month as the window, instead of --from/--to.
    #[arg(long, env = "GPULEDGER_PROMETHEUS_PERIOD", conflicts_with_all = ["from", "to"])]
    pub period: Option<Period>,
    /// Bearer token for the Prometheus API.
    #[arg(long, env = "GPULEDGER_PROMETHEUS_BEARER_TOKEN", hide_env_values = true)]
    pub bearer_token: Option<String>,
    /// Basic auth as USER:PASSWORD.
    #[arg(long, env = "GPULEDGER_PROMETHEUS_BASIC_AUTH", hide_env_values = true)]
    pub basic_auth: Option<String>,
    /// Seconds per request before it is retried.
    #[arg(long, env = "GPULEDGER_PROMETHEUS_TIMEOUT_SECONDS", default_value_t = 60)]
    pub timeout: u64,
    /// Attempts per request (backoff 0.5 s, 1 s, 2 s, ...).
    #[arg(long, env = "GPULEDGER_PROMETHEUS_ATTEMPTS", default_value_t = 4)]
    pub attempts: u32,
    /// Hours of samples per query (1–3: at most 11,000 points per series at a 1 s scrape).
    #[arg(long, env = "GPULEDGER_PROMETHEUS_CHUNK_HOURS", default_value_t = 2)]
    pub chunk_hours: i64,
    /// Scrape interval in seconds, when detecting it from the samples would be wrong.
    #[arg(long, env = "GPULEDGER_PROMETHEUS_SAMPLE_INTERVAL")]
    pub sample_interval: Option<f64>,
    /// Extra GPU utilization metric reporting a 0–1 ratio.
    #[arg(long, env = "GPULEDGER_UTILIZATION_METRIC")]
    pub utilization_metric: Vec<String>,
    /// Extra GPU utilization metric reporting percent (0–100).
    #[arg(long, env = "GPULEDGER_UTILIZATION_PERCENT_METRIC")]
    pub utilization_percent_metric: Vec<String>,
    /// Extra framebuffer-used metric in MiB.
    #[arg(long, env = "GPULEDGER_MEMORY_METRIC")]
    pub memory_metric: Vec<String>,
    /// Extra counter of successful inference requests.
    #[arg(long, env = "GPULEDGER_REQUESTS_METRIC")]
    pub requests_metric: Vec<String>,
    /// Extra counter of prompt tokens.
    #[arg(long, env = "GPULEDGER_PROMPT_TOKENS_METRIC")]
    pub prompt_tokens_metric: Vec<String>,
    /// Extra counter of generated tokens.
    #[arg(long, env = "GPULEDGER_GENERATION_TOKENS_METRIC")]
    pub generation_tokens_metric: Vec<String>,
    /// PromQL whose result series count successful requests (with namespace and pod labels);
    /// --url only.
    #[arg(long, env = "GPULEDGER_REQUESTS_QUERY")]
    pub requests_query: Option<String>,
    /// GPU UUID label (default: detected, `UUID` or `uuid`).
    #[arg(long, env = "GPULEDGER_UUID_LABEL")]
    pub uuid_label: Option<String>,
    /// Node label (default: detected, `node`, `Hostname` or `hostname`).
    #[arg(long, env = "GPULEDGER_HOST_LABEL")]
    pub host_label: Option<String>,
    /// Workload pod label on DCGM series (default: `exported_pod`, `pod` or `pod_name`).
    #[arg(long, env = "GPULEDGER_POD_LABEL")]
    pub pod_label: Option<String>,
    /// Workload namespace label on DCGM series.
    #[arg(long, env = "GPULEDGER_NAMESPACE_LABEL")]
    pub namespace_label: Option<String>,
    /// Workload container label on DCGM series.
    #[arg(long, env = "GPULEDGER_CONTAINER_LABEL")]
    pub container_label: Option<String>,
    /// Only print what the source exports (JSON on stdout); write nothing.
    #[arg(long, env = "GPULEDGER_PROMETHEUS_DETECT")]
    pub detect: bool,
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
    /// GPU-hours per namespace and GPU model: provisioned, allocated, used, idle,
    /// unallocated, unattributed.
    Gpu(GpuReportArgs),
    /// Inference requests, tokens and cost per inference per workload and model.
    Inference(InferenceReportArgs),
    /// Cost, GPU-hours, idle and Spot per workload.
    Workloads(RangeArgs),
    /// Chargeback per client: direct cost, shared platform and idle cost, markup.
    Clients(RangeArgs),
    /// Spot adoption of GPU-hours per namespace and workload class.
    Spot(RangeArgs),
    /// Realized savings per month (public on-demand − actual), by Spot and commitments.
    Savings(RangeArgs),
    /// Savings still on the table, ranked, with evidence.
    Opportunities(RangeArgs),
}

#[derive(Debug, Args)]
pub struct GpuReportArgs {
    /// Billing period, YYYY-MM.
    #[arg(long, env = "GPULEDGER_REPORT_PERIOD")]
    pub period: Period,
    /// GPU-hours whose hourly mean utilization is below this fraction are idle.
    #[arg(long, env = "GPULEDGER_IDLE_THRESHOLD", default_value_t = 0.10)]
    pub idle_threshold: f64,
    #[arg(long, env = "GPULEDGER_REPORT_FORMAT", value_enum, default_value = "table")]
    pub format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct InferenceReportArgs {
    /// Billing period, YYYY-MM.
    #[arg(long, env = "GPULEDGER_REPORT_PERIOD")]
    pub period: Period,
    #[arg(long, env = "GPULEDGER_REPORT_FORMAT", value_enum, default_value = "table")]
    pub format: OutputFormat,
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
    /// Do not touch the schema (for a database role that may not change it); refuse to start
    /// when the schema is older than this gpuledger.
    #[arg(long, env = "GPULEDGER_NO_MIGRATE")]
    pub no_migrate: bool,
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
    // Colours only for a terminal: a log file or a pipe gets plain `key=value` fields.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .try_init();
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
            let store = if args.no_migrate {
                store::connect_without_migrating(&cli.database_url).await?
            } else {
                store::connect(&cli.database_url).await?
            };
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
        Command::Ingest(IngestCommand::Prometheus(args)) => {
            let store = store::connect(&cli.database_url).await?;
            let detect = args.detect;
            let options = args.into_options()?;
            let progress =
                indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
            let (result, computed) = pipeline::ingest_metrics_and_compute(
                store.as_ref(),
                &options,
                &ComputeOptions::default(),
                &progress,
            )
            .await?;
            print_detected(&result.detected);
            print_computed(&computed);
            if detect {
                println!("{}", serde_json::to_string_pretty(&result.detected)?);
            } else {
                eprintln!(
                    "wrote {} GPU rows and {} inference rows for {} in {:.1} s ({} samples, {} invalid)",
                    result.gpu_rows,
                    result.inference_rows,
                    result.detected.source,
                    result.seconds,
                    result.samples,
                    result.invalid_samples
                );
                println!("{}", serde_json::to_string(&result)?);
            }
            Ok(())
        }
        Command::Report(ReportCommand::Gpu(args)) => {
            let store = store::connect(&cli.database_url).await?;
            let computed = store.rollups(&args.period.to_string()).await?;
            // Rollups carry provisioned hours and the compute run's threshold; without them
            // (or with another threshold) the bill and the metrics are joined now.
            match computed.filter(|r| (r.period.idle_threshold - args.idle_threshold).abs() < 1e-12) {
                Some(rollups) => {
                    let (start, end) = (args.period.start(), args.period.end());
                    let parts = vec![std::sync::Arc::new(rollups)];
                    let range = RollupRange::from_parts(args.period.to_string(), start, end, parts)?;
                    let mut unattributed: std::collections::BTreeMap<String, f64> = Default::default();
                    for u in store.gpu_usage(args.period.start(), args.period.end()).await? {
                        if u.pod.is_empty() {
                            *unattributed.entry(u.gpu_model).or_default() += u.gpu_hours;
                        }
                    }
                    print!("{}", rollup::gpu(&range, &unattributed).render(args.format, &range.label));
                }
                None => {
                    let report = GpuReport::load(store.as_ref(), args.period, args.idle_threshold).await?;
                    print!("{}", report.render(args.format));
                }
            }
            Ok(())
        }
        Command::Report(ReportCommand::Workloads(args)) => {
            let store = store::connect(&cli.database_url).await?;
            let range = args.load(store.as_ref()).await?;
            print!("{}", rollup::workloads(&range).render(args.format, &range.label));
            Ok(())
        }
        Command::Report(ReportCommand::Clients(args)) => {
            let store = store::connect(&cli.database_url).await?;
            let range = args.load(store.as_ref()).await?;
            print!("{}", rollup::clients(&range).render(args.format, &range.label));
            Ok(())
        }
        Command::Report(ReportCommand::Spot(args)) => {
            let store = store::connect(&cli.database_url).await?;
            let range = args.load(store.as_ref()).await?;
            print!("{}", rollup::spot(&range).render(args.format, &range.label));
            Ok(())
        }
        Command::Report(ReportCommand::Savings(args)) => {
            let store = store::connect(&cli.database_url).await?;
            let range = args.load(store.as_ref()).await?;
            print!("{}", rollup::savings(&range).render(args.format, &range.label));
            Ok(())
        }
        Command::Report(ReportCommand::Opportunities(args)) => {
            let store = store::connect(&cli.database_url).await?;
            let range = args.load(store.as_ref()).await?;
            print!("{}", rollup::opportunities(&range).render(args.format, &range.label));
            Ok(())
        }
        Command::Compute(args) => {
            let store = store::connect(&cli.database_url).await?;
            pipeline::close_abandoned_runs(store.as_ref()).await?;
            let periods: Vec<Period> = match args.period {
                Some(period) => vec![period],
                None => store.periods().await?.iter().filter_map(|p| p.period.parse().ok()).collect(),
            };
            print_computed(&pipeline::compute(store.as_ref(), &periods, &args.engine.options()).await?);
            Ok(())
        }
        Command::Clients(command) => {
            let store = store::connect(&cli.database_url).await?;
            run_clients(store.as_ref(), command).await
        }
        Command::Report(ReportCommand::Inference(args)) => {
            let store = store::connect(&cli.database_url).await?;
            let report = InferenceReport::load(store.as_ref(), args.period).await?;
            print!("{}", report.render(args.format));
            Ok(())
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
            ingest_demo_metrics(store.as_ref(), &args.data.join("metrics")).await?;
            web::serve(web::AppState::new(store), args.listen).await
        }
    }
}

impl PrometheusArgs {
    fn into_options(self) -> anyhow::Result<MetricsIngestOptions> {
        let source = match (self.url, self.file) {
            (Some(url), _) => {
                let basic_auth = match self.basic_auth {
                    Some(pair) => {
                        let (user, password) =
                            pair.split_once(':').context("--basic-auth must be USER:PASSWORD")?;
                        Some((user.to_string(), password.to_string()))
                    }
                    None => None,
                };
                MetricsSource::Prometheus(ApiOptions {
                    url,
                    bearer_token: self.bearer_token,
                    basic_auth,
                    timeout: std::time::Duration::from_secs(self.timeout.max(1)),
                    attempts: self.attempts.max(1),
                })
            }
            (None, Some(file)) => MetricsSource::File(file),
            (None, None) => anyhow::bail!("give --url or --file"),
        };
        let mut names = MetricNames::default();
        let extra = [
            (self.utilization_metric, Role::EngineActive),
            (self.utilization_percent_metric, Role::UtilPercent),
            (self.memory_metric, Role::FramebufferMib),
            (self.requests_metric, Role::Requests),
            (self.prompt_tokens_metric, Role::PromptTokens),
            (self.generation_tokens_metric, Role::GenerationTokens),
        ];
        for (list, role) in extra {
            for name in list {
                names.add(&name, role);
            }
        }
        let (from, to) = match self.period {
            Some(period) => (Some(period.start()), Some(period.end())),
            None => (self.from, self.to),
        };
        Ok(MetricsIngestOptions {
            source,
            from,
            to,
            names,
            labels: LabelOverrides {
                uuid: self.uuid_label,
                host: self.host_label,
                pod: self.pod_label,
                namespace: self.namespace_label,
                container: self.container_label,
            },
            requests_query: self.requests_query,
            chunk_seconds: self.chunk_hours.clamp(1, 3) * 3600,
            sample_interval: self.sample_interval,
            detect_only: self.detect,
        })
    }
}

/// A time for --from/--to: RFC 3339, `YYYY-MM-DD` (midnight UTC), `YYYY-MM-DDTHH:MM` (UTC)
/// or unix seconds.
pub fn parse_time(text: &str) -> Result<i64, String> {
    if let Ok(seconds) = text.parse::<i64>() {
        return Ok(seconds);
    }
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(at.timestamp());
    }
    if let Ok(at) = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M") {
        return Ok(at.and_utc().timestamp());
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map(|day| day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc().timestamp())
        .map_err(|_| format!("{text:?} is not a time: use RFC 3339, YYYY-MM-DD or unix seconds"))
}

/// What the source exports, for people (stderr).
fn print_detected(detected: &Detected) {
    let labels = &detected.labels;
    eprintln!(
        "detected in {}: utilization {} (fallback {}); labels pod={} namespace={} host={} gpu={}; \
         {} GPUs, {} MIG instances {:?}; sample interval {} s",
        detected.source,
        detected.utilization_metric.as_deref().unwrap_or("none"),
        detected.fallback_utilization_metric.as_deref().unwrap_or("none"),
        labels.pod,
        labels.namespace,
        labels.host,
        labels.uuid,
        detected.gpus,
        detected.mig_instances,
        detected.mig_profiles,
        detected.sample_interval_seconds.unwrap_or(0.0)
    );
}

/// The demo's metrics files, each ingested once (a month already ingested is kept).
async fn ingest_demo_metrics(store: &dyn store::Store, folder: &std::path::Path) -> anyhow::Result<()> {
    let Ok(entries) = std::fs::read_dir(folder) else { return Ok(()) };
    let mut files: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "om")).collect();
    files.sort();
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
    for file in files {
        let Some(period) = file.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse::<Period>().ok())
        else {
            continue;
        };
        if store.last_data_version("prometheus", &period.to_string()).await?.is_some() {
            continue;
        }
        let options = MetricsIngestOptions::file(file, Some(period));
        let (result, computed) =
            pipeline::ingest_metrics_and_compute(store, &options, &ComputeOptions::default(), &progress)
                .await?;
        println!(
            "{period}: ingested {} GPU rows and {} inference rows of metrics",
            result.gpu_rows, result.inference_rows
        );
        print_computed(&computed);
    }
    Ok(())
}

/// What each computed period took, for people (stderr).
fn print_computed(summaries: &[ComputeSummary]) {
    for summary in summaries {
        eprintln!(
            "{}: computed {} rollup rows, {} clients, {} opportunities (read {:.1} s, compute {:.1} s, write {:.1} s)",
            summary.period,
            summary.cost_rows,
            summary.client_rows,
            summary.opportunities,
            summary.read_seconds,
            summary.compute_seconds,
            summary.write_seconds
        );
    }
}

async fn run_clients(store: &dyn store::Store, command: ClientsCommand) -> anyhow::Result<()> {
    match command {
        ClientsCommand::List => {
            let out = serde_json::json!({
                "clients": store.client_settings().await?,
                "rules": store.client_rules().await?,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        ClientsCommand::Set(args) => {
            anyhow::ensure!(
                crate::engine::chargeback::POLICIES.contains(&args.policy.as_str()),
                "--policy must be one of {:?}",
                crate::engine::chargeback::POLICIES
            );
            anyhow::ensure!(args.markup_percent >= 0.0, "--markup-percent must not be negative");
            store
                .set_client_settings(&store::ClientSettings {
                    name: args.name.clone(),
                    share_policy: args.policy,
                    markup_basis_points: (args.markup_percent * 100.0).round() as i64,
                })
                .await?;
            eprintln!("client {} saved; run `gpuledger compute` to apply it", args.name);
        }
        ClientsCommand::Map(args) => {
            let (kind, pattern, label_key) =
                match (&args.namespace, &args.prefix, &args.regex, &args.label_value) {
                    (Some(n), ..) => ("namespace", n.clone(), String::new()),
                    (_, Some(p), ..) => ("prefix", p.clone(), String::new()),
                    (_, _, Some(r), _) => {
                        regex::Regex::new(r).with_context(|| format!("--regex {r:?}"))?;
                        ("regex", r.clone(), String::new())
                    }
                    (_, _, _, Some(v)) => ("label", v.clone(), args.label_key.clone()),
                    _ => anyhow::bail!("give --namespace, --prefix, --regex or --label-value"),
                };
            let mut rules = store.client_rules().await?;
            rules.push(store::ClientRule {
                client: args.client.clone(),
                match_kind: kind.into(),
                pattern,
                label_key,
                priority: args.priority,
            });
            store.set_client_rules(&rules).await?;
            eprintln!("rule added for {}; run `gpuledger compute` to apply it", args.client);
        }
        ClientsCommand::Unmap { client } => {
            let mut rules = store.client_rules().await?;
            rules.retain(|r| r.client != client);
            store.set_client_rules(&rules).await?;
        }
    }
    Ok(())
}

/// Runs a CUR ingest and the computes it calls for, and prints each period's outcome and
/// reconciliation; a failed period is the command's error.
async fn run_cur_ingest(store: &dyn store::Store, options: &CurIngestOptions) -> anyhow::Result<()> {
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
    let job = pipeline::ingest_cur_and_compute(store, options, &ComputeOptions::default(), &progress).await?;
    print_computed(&job.computed);
    if let Some(failure) = job.failure {
        return Err(failure.into());
    }
    for result in &job.ingested {
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
