//! The command line: one typed configuration (`clap` derive), every option also readable
//! from a `GPULEDGER_*` environment variable. What each command does is in [`crate::cmd`].

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::domain::settings::{EffectiveFrom, Pool, ShareRule};
use crate::period::Period;
use crate::report::OutputFormat;
use crate::synth::{self, CurFormat, Scale};

/// Bill-accurate GPU cost, usage and savings for Kubernetes GPU fleets on AWS, Azure, Google
/// Cloud and Oracle Cloud.
///
/// gpuledger reads AWS CUR 2.0 exports with EKS split cost allocation data, FOCUS bills from
/// every provider and Prometheus DCGM metrics into SQLite (default) or Postgres and serves a
/// dashboard for finance, agency managers, leadership and the agency's clients.
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
    /// Clients for chargeback: their markup, exemption and mapping rules.
    #[command(subcommand)]
    Clients(ClientsCommand),
    /// The shared pools' rules: how each is divided among the clients.
    #[command(subcommand)]
    Pools(PoolsCommand),
    /// The engine's settings (idle threshold, platform namespaces) and every setting's
    /// versions.
    #[command(subcommand)]
    Settings(SettingsCommand),
    /// Accounts of the dashboard: roles and the clients a manager or client user sees.
    #[command(subcommand)]
    Users(UsersCommand),
    /// Per-client invoices: drafts, issued invoices, credit and debit notes, their PDFs.
    #[command(subcommand)]
    Invoice(InvoiceCommand),
    /// Cost alerts: what fires, where it is delivered, the thresholds.
    #[command(subcommand)]
    Alerts(AlertsCommand),
    /// Old billing periods' detail rows (pods, pod-days, instance-hours) moved out of the
    /// database into Parquet files, and back. Their bill, rollups and issued invoices stay:
    /// every page still shows them.
    #[command(subcommand)]
    Archive(ArchiveCommand),
    /// Exchange rates, each from a month on: how bills in other currencies are shown in USD.
    #[command(subcommand)]
    Fx(FxCommand),
    /// Planned changes to demand (a client onboarding, another scaling, a retraining
    /// schedule), layered onto `report forecast` as a scenario apart from the statistical
    /// forecast; each addition and removal is in the audit log with its author.
    #[command(subcommand)]
    Plan(PlanCommand),
    /// The pipeline that runs itself: checks each source for new data, ingests what changed,
    /// computes, evaluates alerts; every --every (one instance at a time), or --once (a
    /// Kubernetes CronJob).
    Run(RunArgs),
    /// Write what gpuledger knows in formats other tools read.
    #[command(subcommand)]
    Export(ExportCommand),
}

#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// A month's FOCUS bills as one FOCUS 1.3 file, each Kubernetes node's cost split among
    /// its pods as allocated charges (`AllocatedMethodId` gpuledger-split-v1). Prints what it
    /// wrote as JSON: the file, its rows, and each bill's totals (equal to the bill's).
    Focus {
        #[arg(long)]
        period: Period,
        /// The folder to write into (created if missing), or `s3://bucket/prefix` (the file is
        /// written, uploaded under the prefix and read back to check it).
        #[arg(long)]
        out: String,
        #[arg(long, value_enum, default_value = "parquet")]
        format: crate::export::focus::FocusFormat,
        /// An S3-compatible endpoint, for an `s3://` --out.
        #[arg(long, env = "GPULEDGER_S3_ENDPOINT_URL")]
        endpoint_url: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum FxCommand {
    /// Set a rate from a month on: 1 FROM = RATE TO (`fx set EUR USD 1.0842 --from 2026-10`),
    /// until a later version of the pair; replaces the pair's version of that month.
    Set {
        from_currency: String,
        to_currency: String,
        rate: String,
        /// The first month the rate applies to.
        #[arg(long = "from")]
        effective_from: Period,
        /// Accept a rate more than 50 % away from the one in force before it (a typo looks
        /// like that: `1000000` for `1.0842`).
        #[arg(long)]
        confirm: bool,
    },
    /// Load reference rates from a CSV file of `from_currency,to_currency,rate,effective_from`
    /// lines (a header line allowed), all or none.
    Load {
        file: std::path::PathBuf,
        /// Accept rates more than 50 % away from the one in force before each.
        #[arg(long)]
        confirm: bool,
    },
    /// Every rate version.
    List {
        #[arg(long, value_enum, default_value = "table")]
        format: crate::report::OutputFormat,
    },
}

#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Add a planned change: GPU-hours a month added to a client's demand (--gpu-hours,
    /// negative to take away) or a percentage of its forecast (--percent), in one pool or
    /// wherever it runs, for the months from --from to --to. Prints its id.
    Add(PlanAddArgs),
    /// Every planned change, with its author and when it was added.
    List {
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
    /// Remove a planned change by its id (`plan list`).
    Remove { id: i64 },
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("change").required(true).args(["gpu_hours", "percent"])))]
pub struct PlanAddArgs {
    /// The client (a client with no history yet is forecast from its planned changes alone).
    #[arg(long)]
    pub client: String,
    /// GPU-hours a month.
    #[arg(long, allow_hyphen_values = true)]
    pub gpu_hours: Option<f64>,
    /// Percent of the client's forecast (-100 and up).
    #[arg(long, allow_hyphen_values = true)]
    pub percent: Option<f64>,
    /// A pool as `report forecast` names it (`"A100 Spot"`); without it, wherever the client
    /// runs.
    #[arg(long, default_value = "")]
    pub pool: String,
    /// The first month, YYYY-MM.
    #[arg(long)]
    pub from: Period,
    /// The last month, YYYY-MM (default: every month on).
    #[arg(long)]
    pub to: Option<Period>,
    /// What it is ("globex onboards its vision team").
    #[arg(long)]
    pub note: String,
}

#[derive(Debug, Subcommand)]
pub enum ArchiveCommand {
    /// Archive periods: each to a folder of its own under --to (Parquet files and a
    /// manifest.json). The rows leave the database only once the files were read back and
    /// found equal to them.
    Create(ArchiveCreateArgs),
    /// Put an archived period's rows back from its folder (the one holding manifest.json).
    Restore {
        /// The period's archive folder, as `gpuledger archive list` shows it: a local folder
        /// or s3://bucket/prefix/YYYY-MM.
        folder: String,
        /// An S3-compatible endpoint.
        #[arg(long, env = "GPULEDGER_S3_ENDPOINT_URL")]
        endpoint_url: Option<String>,
    },
    /// Archived periods: when, where, how many rows.
    List {
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["periods", "before"]))]
pub struct ArchiveCreateArgs {
    /// Where the archives go: a local folder (created when missing) or s3://bucket/prefix;
    /// each period gets a folder of its own in it, named YYYY-MM.
    #[arg(long)]
    pub to: String,
    /// An S3-compatible endpoint.
    #[arg(long, env = "GPULEDGER_S3_ENDPOINT_URL")]
    pub endpoint_url: Option<String>,
    /// A billing period to archive, YYYY-MM (may be given several times).
    #[arg(long = "period")]
    pub periods: Vec<Period>,
    /// Archive every stored period before this one (YYYY-MM) that is not archived yet.
    #[arg(long)]
    pub before: Option<Period>,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("schedule").required(true).args(["every", "once"]))]
pub struct RunArgs {
    /// The CUR 2.0 export: a folder or s3://bucket/prefix/export-name.
    #[arg(long, env = "GPULEDGER_CUR_SOURCE")]
    pub cur: Option<String>,
    /// Refuse a CUR re-delivery whose amortized bill falls by more than this percent of the
    /// stored one (`ingest cur --force` replaces it all the same). Without it: the bound in
    /// force for the period (`settings bounds`; 50 until set).
    #[arg(long, env = "GPULEDGER_CUR_MAX_DROP_PERCENT", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub max_drop: Option<u32>,
    /// Refuse a CUR re-delivery that raises the days the stored bill already covers by more
    /// than this percent (`ingest cur --force` replaces it all the same). Without it: the
    /// bound in force for the period (`settings bounds`; 50 until set).
    #[arg(long, env = "GPULEDGER_CUR_MAX_RISE_PERCENT")]
    pub max_rise: Option<u32>,
    /// Prometheus base URL: the metrics since the last successful run are ingested.
    #[arg(long, env = "GPULEDGER_PROMETHEUS_URL")]
    pub prometheus: Option<String>,
    #[arg(long, env = "GPULEDGER_PROMETHEUS_BEARER_TOKEN", hide_env_values = true)]
    pub bearer_token: Option<String>,
    /// Read Cost Explorer's open days too (12 months back on the first run).
    #[arg(long, env = "GPULEDGER_RUN_COST_EXPLORER")]
    pub cost_explorer: bool,
    /// Time between cycles: 30s, 15m, 8h.
    #[arg(long, env = "GPULEDGER_RUN_EVERY", value_parser = parse_duration)]
    pub every: Option<std::time::Duration>,
    /// One cycle, then exit (non-zero when a source failed).
    #[arg(long)]
    pub once: bool,
    /// An S3-compatible endpoint for the CUR.
    #[arg(long, env = "GPULEDGER_S3_ENDPOINT_URL")]
    pub endpoint_url: Option<String>,
    /// A Cost Explorer-compatible endpoint.
    #[arg(long, env = "GPULEDGER_CE_ENDPOINT_URL")]
    pub ce_endpoint_url: Option<String>,
}

/// `30s`, `15m`, `8h`, `1d`, or plain seconds.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let number: u64 =
        number.parse().map_err(|_| format!("{text:?} is not a duration: write 30s, 15m, 8h or 1d"))?;
    let seconds = match unit {
        "" | "s" => number,
        "m" => number * 60,
        "h" => number * 3600,
        "d" => number * 86_400,
        _ => return Err(format!("{text:?} is not a duration: write 30s, 15m, 8h or 1d")),
    };
    if seconds == 0 {
        return Err("the time between cycles must be more than 0".into());
    }
    Ok(std::time::Duration::from_secs(seconds))
}

#[derive(Debug, Subcommand)]
pub enum AlertsCommand {
    /// Alerts with their state, first-seen time, evidence and link.
    List {
        /// Only alerts in this state.
        #[arg(long, value_parser = ["firing", "resolved"])]
        state: Option<String>,
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
    /// Evaluates the alerts now and delivers what is pending (ingest and compute do it too).
    Evaluate,
    /// The thresholds in force for the newest month; with options, sets them from --from on.
    Thresholds(AlertThresholdArgs),
    /// Webhooks that receive alerts as they fire and resolve.
    #[command(subcommand)]
    Webhook(WebhookCommand),
    /// Writes Prometheus alerting rules for live GPU alerts (0 % on inference GPUs, > 90 °C,
    /// XID and memory errors, < 20 % for an hour, > 95 % for 30 minutes, inference latency
    /// above 5x its p95, Spot interruptions), with the names detected in a Prometheus.
    PrometheusRules(PrometheusRulesArgs),
}

#[derive(Debug, Args)]
pub struct PrometheusRulesArgs {
    /// Detect metric and label names in this Prometheus (else the dcgm-exporter defaults).
    #[arg(long, env = "GPULEDGER_PROMETHEUS_URL")]
    pub url: Option<String>,
    #[arg(long, env = "GPULEDGER_PROMETHEUS_BEARER_TOKEN", hide_env_values = true)]
    pub bearer_token: Option<String>,
    /// Write the rules here (stdout otherwise).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// The GPU utilization metric (a ratio, or a percent when it is DCGM_FI_DEV_GPU_UTIL).
    #[arg(long)]
    pub utilization_metric: Option<String>,
    #[arg(long)]
    pub host_label: Option<String>,
    #[arg(long)]
    pub namespace_label: Option<String>,
    /// Namespaces of inference workloads, a regular expression (detected from the
    /// namespaces that count inference requests).
    #[arg(long)]
    pub inference_namespaces: Option<String>,
    /// Karpenter runs the nodes (adds the Spot interruption rule).
    #[arg(long)]
    pub karpenter: bool,
}

#[derive(Debug, Args)]
pub struct AlertThresholdArgs {
    /// Idle over allocated GPU-hours above this fraction fires (default 0.20).
    #[arg(long)]
    pub idle_share_max: Option<f64>,
    /// Spot over training GPU-hours below this fraction fires (default 0.30).
    #[arg(long)]
    pub spot_adoption_min: Option<f64>,
    /// GPU utilization below this fraction fires (default 0.40).
    #[arg(long)]
    pub utilization_min: Option<f64>,
    /// A serving workload with more than this fraction of its hours above the fleet's P95 of
    /// hourly cost per inference fires (default 0.20).
    #[arg(long)]
    pub above_p95_share_max: Option<f64>,
    /// Cost per 1M tokens up by more than this fraction on the month before fires (default 0.20).
    #[arg(long)]
    pub token_cost_rise_max: Option<f64>,
    /// The newest successful CUR ingest older than this many hours fires (default 48).
    #[arg(long)]
    pub cur_max_age_hours: Option<i64>,
    /// The first month the change applies to (default: from the beginning).
    #[arg(long)]
    pub from: Option<Period>,
}

#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Adds a webhook (the URL is a secret: it is never shown again, only its host).
    Add {
        /// The receiver's URL (a Slack incoming webhook, an Alertmanager-compatible receiver).
        #[arg(long, env = "GPULEDGER_WEBHOOK_URL", hide_env_values = true)]
        url: String,
        /// `slack` (a text message) or `alertmanager` (Alertmanager's webhook body).
        #[arg(long, value_parser = ["slack", "alertmanager"], default_value = "alertmanager")]
        format: String,
        /// Alerts of this severity and above: info, warning or critical.
        #[arg(long, default_value = "warning")]
        min_severity: crate::alerts::Severity,
    },
    /// The webhooks, their hosts only.
    List,
    /// Removes a webhook and its pending deliveries.
    Remove { id: i64 },
}

#[derive(Debug, Subcommand)]
pub enum InvoiceCommand {
    /// A client's draft invoice for a period, from its chargeback (nothing is stored), and
    /// the difference from the invoice already issued for them, if any.
    Draft {
        #[arg(long)]
        client: String,
        #[arg(long)]
        period: Period,
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
    /// Issue a client's invoice for a period under the next number (printed on stdout); it
    /// never changes afterwards.
    Issue {
        #[command(flatten)]
        of: ClientPeriodArgs,
        /// Allow a month that is not over yet (its bill can still change).
        #[arg(long)]
        allow_open: bool,
    },
    /// Issued invoices and notes, oldest first.
    List {
        #[arg(long)]
        client: Option<String>,
        #[arg(long)]
        period: Option<Period>,
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
    /// One issued document.
    Show {
        number: String,
        #[arg(long, value_enum, default_value = "json")]
        format: OutputFormat,
    },
    /// Write an issued document as PDF (the bytes stored at issue), CSV, XLSX or JSON.
    Export {
        number: String,
        #[arg(long, value_enum)]
        format: ExportFormat,
        #[arg(long)]
        out: PathBuf,
    },
    /// Void an invoice: a credit note for everything it still stands for (printed number).
    Credit {
        number: String,
        #[arg(long, default_value = "")]
        reason: String,
        #[command(flatten)]
        actor: ActorArgs,
    },
    /// After a restatement, issue the difference between the period's charge now and the
    /// standing invoice as a credit or debit note (printed number).
    Adjust(ClientPeriodArgs),
    /// The seller's details on every document and the number format; unchanged when not given.
    Seller(SellerArgs),
}

/// The client and period a document is issued for, and who issues it.
#[derive(Debug, Args)]
pub struct ClientPeriodArgs {
    #[arg(long)]
    pub client: String,
    #[arg(long)]
    pub period: Period,
    #[command(flatten)]
    pub actor: ActorArgs,
}

#[derive(Debug, Args)]
pub struct ActorArgs {
    /// Who does it, for the document and the audit log (default: the OS user).
    #[arg(long)]
    pub actor: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    Pdf,
    Csv,
    Xlsx,
    Json,
}

#[derive(Debug, Args)]
pub struct SellerArgs {
    #[arg(long)]
    pub name: Option<String>,
    /// Lines separated by `\n` or newlines.
    #[arg(long)]
    pub address: Option<String>,
    #[arg(long)]
    pub tax_id: Option<String>,
    #[arg(long)]
    pub email: Option<String>,
    /// `{year}` and `{seq}` or `{seq:0N}`, e.g. `GL-{year}-{seq:04}`.
    #[arg(long)]
    pub number_format: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Add a user. The password is read from stdin (`--password-stdin`); without it the user
    /// can sign in only through a trusted proxy.
    Add(UserAddArgs),
    /// Every user with its role, clients and state.
    List {
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
    /// Change a user's role (and the clients of a manager or client user).
    SetRole {
        name: String,
        role: crate::auth::Role,
        /// Comma-separated clients, for the manager and client roles.
        #[arg(long, default_value = "")]
        clients: String,
    },
    /// Disable a user: signing in is refused and its sessions end at once.
    Disable { name: String },
    /// Enable a disabled user again.
    Enable { name: String },
    /// Set a new password, read from stdin; the user's sessions end.
    ResetPassword {
        name: String,
        #[arg(long)]
        password_stdin: bool,
    },
    /// A one-time code that lets the user sign in (with its password) while failed sign-ins
    /// by others hold its account locked; printed once, as the last word of the output.
    SignInCode {
        name: String,
        /// Minutes the code stays valid.
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(i64).range(1..=1440))]
        minutes: i64,
    },
}

#[derive(Debug, Args)]
pub struct UserAddArgs {
    pub name: String,
    #[arg(long)]
    pub role: crate::auth::Role,
    /// Comma-separated clients, for the manager and client roles.
    #[arg(long, default_value = "")]
    pub clients: String,
    /// Read the password from stdin (one line).
    #[arg(long)]
    pub password_stdin: bool,
}

#[derive(Debug, Args)]
pub struct ComputeArgs {
    /// Only this billing period (default: every ingested period). Each period is computed
    /// with the settings in force for it (`gpuledger settings list`).
    #[arg(long, env = "GPULEDGER_COMPUTE_PERIOD")]
    pub period: Option<Period>,
}

/// The month a change takes effect.
#[derive(Debug, Clone, Args)]
pub struct FromArgs {
    /// The first month the change applies to (YYYY-MM); earlier months keep what was in
    /// force for them. Without it, the change applies from the beginning, up to the next
    /// dated change of the same setting.
    #[arg(long, value_parser = parse_effective_from)]
    pub from: Option<EffectiveFrom>,
}

impl FromArgs {
    pub fn effective_from(&self) -> EffectiveFrom {
        self.from.unwrap_or(EffectiveFrom::BEGINNING)
    }
}

fn parse_effective_from(text: &str) -> Result<EffectiveFrom, String> {
    text.parse::<Period>().map(EffectiveFrom::month).map_err(|e| format!("{e} (expected YYYY-MM)"))
}

#[derive(Debug, Subcommand)]
pub enum PoolsCommand {
    /// The rule of each pool, every version.
    List,
    /// Set how a pool is divided among the clients that take part.
    Set(PoolSetArgs),
}

#[derive(Debug, Args)]
pub struct PoolSetArgs {
    #[arg(value_enum)]
    pub pool: Pool,
    /// gpu (by GPU cost), total (by direct cost) or even.
    #[arg(long, value_enum)]
    pub rule: ShareRule,
    #[command(flatten)]
    pub from: FromArgs,
}

#[derive(Debug, Subcommand)]
pub enum SettingsCommand {
    /// Every version of every setting, and what is in force for --period (JSON).
    List {
        #[arg(long)]
        period: Option<Period>,
    },
    /// Change the engine's settings.
    Set(EngineSetArgs),
    /// How far a re-delivered bill (a CUR period, a FOCUS bill) may move from the stored one
    /// before it is refused unless forced, from a month on; unchanged when not given.
    Bounds(BoundsArgs),
}

#[derive(Debug, Args)]
pub struct BoundsArgs {
    /// The largest fall of the bill's total, in percent of the stored one (100: any).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub max_drop: Option<u32>,
    /// The largest rise of the days the stored bill already covers, in percent.
    #[arg(long)]
    pub max_rise: Option<u32>,
    #[command(flatten)]
    pub from: FromArgs,
}

#[derive(Debug, Args)]
pub struct EngineSetArgs {
    /// GPU-hours whose hourly mean utilization is below this fraction are idle (0..1).
    #[arg(long)]
    pub idle_threshold: Option<f64>,
    /// Namespaces whose cost is shared between clients (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub platform_namespaces: Option<Vec<String>>,
    #[command(flatten)]
    pub from: FromArgs,
}

#[derive(Debug, Subcommand)]
pub enum ClientsCommand {
    /// Clients with their settings, and the mapping rules.
    List,
    /// Create or change a client's terms: markup, exempt from the shared pools, charge basis.
    Set(ClientSetArgs),
    /// Add a mapping rule: pods matching it belong to CLIENT.
    Map(ClientMapArgs),
    /// Where pods' own labels (`user_client`, and `map --label-value` rules) may name their
    /// client: comma-separated `*`, CLUSTER or CLUSTER/NAMESPACE; "" for nowhere, the default.
    /// Elsewhere a tenant could bill itself to another client by labelling its pods.
    Labels {
        scopes: String,
        #[command(flatten)]
        from: FromArgs,
    },
    /// A client's billing details for its invoices; unchanged when not given.
    Billing(ClientBillingArgs),
    /// A client's monthly budget (USD; 0 removes it), from a month on: its pages flag a month
    /// whose run-rate forecast exceeds it.
    Budget {
        name: String,
        #[arg(long)]
        monthly: crate::money::Cents,
        #[command(flatten)]
        from: FromArgs,
    },
    /// Remove every mapping rule of CLIENT.
    Unmap {
        client: String,
        #[command(flatten)]
        from: FromArgs,
    },
}

#[derive(Debug, Args)]
pub struct ClientBillingArgs {
    pub name: String,
    #[arg(long)]
    pub legal_name: Option<String>,
    /// Lines separated by `\n` or newlines.
    #[arg(long)]
    pub address: Option<String>,
    #[arg(long)]
    pub tax_id: Option<String>,
    /// Purchase order number, printed on its invoices.
    #[arg(long)]
    pub po: Option<String>,
    /// The invoice currency (ISO 4217: USD, EUR, GBP). Another than USD converts the charge
    /// at the rate in force for the period (`gpuledger fx set USD EUR RATE --from YYYY-MM`, or
    /// the inverse quote), printed on the invoice and fixed when it is issued.
    #[arg(long)]
    pub currency: Option<String>,
    #[arg(long)]
    pub payment_terms_days: Option<i64>,
    /// Tax on the subtotal with markup, in percent (e.g. 20 or 8.875).
    #[arg(long)]
    pub tax_percent: Option<f64>,
}

#[derive(Debug, Args)]
pub struct ClientSetArgs {
    pub name: String,
    /// Markup in percent on direct + shared cost (e.g. 12.5); unchanged when not given.
    #[arg(long)]
    pub markup_percent: Option<f64>,
    /// Takes no share of the shared pools: its shares stay with the house.
    #[arg(long, overrides_with = "no_exempt")]
    pub exempt: bool,
    /// Takes its shares again.
    #[arg(long)]
    pub no_exempt: bool,
    /// What its charge is based on: `amortized` (the default) or `net` of AWS's discounts
    /// (EDP, private pricing), its share in proportion to its direct + shared cost; unchanged
    /// when not given. Credits, refunds and tax are never passed on.
    #[arg(long, value_enum)]
    pub basis: Option<crate::domain::settings::ChargeBasis>,
    #[command(flatten)]
    pub from: FromArgs,
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
    #[command(flatten)]
    pub from: FromArgs,
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
    /// Only this provider's accounts (`aws`, `azure`, `gcp`, `oci`): their pods, instances and bills.
    #[arg(long, env = "GPULEDGER_REPORT_PROVIDER")]
    pub provider: Option<String>,
    /// Only this usage account (an AWS account, Azure subscription, Google project, Oracle
    /// compartment): its pods, instances and bill.
    #[arg(long, env = "GPULEDGER_REPORT_ACCOUNT")]
    pub account: Option<String>,
    #[arg(long, env = "GPULEDGER_REPORT_FORMAT", value_enum, default_value = "table")]
    pub format: OutputFormat,
}

/// A command line that asks for something impossible (a bad period or range): exit code 2,
/// as for clap's own usage errors.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

#[derive(Debug, Subcommand)]
pub enum IngestCommand {
    /// Ingest a CUR 2.0 data export (Parquet or gzip CSV) found through its manifests.
    Cur(CurArgs),
    /// Ingest FOCUS bills (1.0–1.3; CSV, gzip CSV or Parquet): an AWS Data Exports root, a
    /// folder of FOCUS files, or one file. Each bill found (a provider's billing account for a
    /// billing period) replaces its stored self; no other bill moves. Prints the bills as JSON.
    Focus(FocusArgs),
    /// Ingest GPU (DCGM) and inference metrics from a Prometheus server or an OpenMetrics
    /// file with timestamps; the window [--from, --to) is replaced whole.
    Prometheus(Box<PrometheusArgs>),
    /// Read AWS Cost Explorer's daily cost per service and linked account for [--from, --to):
    /// only the days not stored yet or still open (each request is billed by AWS).
    CostExplorer(CostExplorerArgs),
}

#[derive(Debug, Args)]
pub struct FocusArgs {
    /// A FOCUS file, a folder of FOCUS files, an AWS Data Exports root (holding metadata/ and
    /// data/), or s3://bucket/prefix.
    #[arg(env = "GPULEDGER_FOCUS_SOURCE")]
    pub source: String,
    /// Whose bill this is when the rows do not say: aws, azure, gcp or oci. Rows naming another
    /// provider are refused.
    #[arg(long, env = "GPULEDGER_FOCUS_PROVIDER")]
    pub provider: Option<String>,
    /// Only this billing period; rows of other periods are skipped and counted.
    #[arg(long, env = "GPULEDGER_FOCUS_PERIOD")]
    pub period: Option<Period>,
    /// Ingest an unchanged delivery again, and accept a bill that falls by more than
    /// --max-drop or rises by more than --max-rise.
    #[arg(long)]
    pub force: bool,
    /// Refuse a re-delivered bill whose effective cost falls by more than this percent of the
    /// stored one (a broken delivery), unless --force: the CUR's rule. Without it: the bound in
    /// force for the month (`settings bounds`; 50 until set).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub max_drop: Option<u32>,
    /// Refuse a re-delivered bill that raises the days the stored one already covers (all but
    /// its last) by more than this percent (the same rows counted twice), unless --force: the
    /// CUR's rule. Without it: the bound in force for the month (`settings bounds`; 50 until
    /// set).
    #[arg(long)]
    pub max_rise: Option<u32>,
    /// An S3-compatible endpoint (switches to path-style addressing).
    #[arg(long, env = "GPULEDGER_S3_ENDPOINT_URL")]
    pub endpoint_url: Option<String>,
    /// Seconds to wait for S3 to connect, answer, or send the next bytes of a file.
    #[arg(long, env = "GPULEDGER_S3_TIMEOUT_SECONDS", default_value_t = 30)]
    pub s3_timeout: u64,
}

#[derive(Debug, Args)]
pub struct CostExplorerArgs {
    /// First day, YYYY-MM-DD.
    #[arg(long, required_unless_present = "file")]
    pub from: Option<chrono::NaiveDate>,
    /// First day after the range, YYYY-MM-DD (exclusive); days from today on are not asked
    /// for, their cost is still being written.
    #[arg(long, required_unless_present = "file")]
    pub to: Option<chrono::NaiveDate>,
    /// Read a saved GetCostAndUsage answer instead (JSON as `aws ce get-cost-and-usage`
    /// prints it, daily, grouped by SERVICE and LINKED_ACCOUNT): its days are replaced.
    #[arg(long, conflicts_with_all = ["from", "to", "force", "endpoint_url"])]
    pub file: Option<std::path::PathBuf>,
    /// Fetch settled days again too (months closed and fetched after they closed).
    #[arg(long)]
    pub force: bool,
    /// A Cost Explorer-compatible endpoint (a local test server).
    #[arg(long, env = "GPULEDGER_CE_ENDPOINT_URL")]
    pub endpoint_url: Option<String>,
    /// Seconds to wait for Cost Explorer to connect or answer.
    #[arg(long, env = "GPULEDGER_CE_TIMEOUT_SECONDS", default_value_t = 30)]
    pub timeout: u64,
    /// The day counted as today (tests; the real date otherwise).
    #[arg(long, hide = true)]
    pub today: Option<chrono::NaiveDate>,
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
    /// The label naming each series' cluster (default: detected, `cluster`, `cluster_name`
    /// or `k8s_cluster_name`).
    #[arg(long, env = "GPULEDGER_CLUSTER_LABEL")]
    pub cluster_label: Option<String>,
    /// The EKS cluster of series without a cluster label (one Prometheus per cluster): pods
    /// are matched in this cluster, and the window is replaced for this cluster only.
    #[arg(long, env = "GPULEDGER_CLUSTER")]
    pub cluster: Option<String>,
    /// Only print what the source exports (JSON on stdout); write nothing.
    #[arg(long, env = "GPULEDGER_PROMETHEUS_DETECT")]
    pub detect: bool,
    /// Also read kube-state-metrics and cAdvisor (pods, their nodes, requests and usage) and
    /// replace the window's Kubernetes pods and nodes: what gpuledger's own split of node cost
    /// takes on clusters whose bill has no split. A source of these series alone leaves the
    /// window's GPU usage as it was.
    #[arg(long, env = "GPULEDGER_KUBE_STATE_METRICS")]
    pub kube_state_metrics: bool,
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
    /// Ingest even when the manifest's data version has not changed, and accept a bill that
    /// falls by more than --max-drop.
    #[arg(long, env = "GPULEDGER_CUR_FORCE")]
    pub force: bool,
    /// Accept a delivery with no data files or no rows (the period becomes empty).
    #[arg(long, env = "GPULEDGER_CUR_ALLOW_EMPTY")]
    pub allow_empty: bool,
    /// Refuse a re-delivery whose amortized bill falls by more than this percent of the stored
    /// one (a broken delivery), unless --force. Without it: the bound in force for the period
    /// (`settings bounds`; 50 until set).
    #[arg(long, env = "GPULEDGER_CUR_MAX_DROP_PERCENT", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub max_drop: Option<u32>,
    /// Refuse a re-delivery that raises the days the stored bill already covers (all but its
    /// last, which may still be filling) by more than this percent (the same rows counted
    /// twice), unless --force. New days are never a rise. Without it: the bound in force for
    /// the period (`settings bounds`; 50 until set).
    #[arg(long, env = "GPULEDGER_CUR_MAX_RISE_PERCENT")]
    pub max_rise: Option<u32>,
    /// An S3-compatible endpoint (switches to path-style addressing).
    #[arg(long, env = "GPULEDGER_S3_ENDPOINT_URL")]
    pub endpoint_url: Option<String>,
    /// Seconds to wait for S3 to connect, answer, or send the next bytes of a file.
    #[arg(long, env = "GPULEDGER_S3_TIMEOUT_SECONDS", default_value_t = 30)]
    pub s3_timeout: u64,
    /// Where the split rows are aggregated: `local` (this process reads every row) or `spark`
    /// (a Spark Connect server reads the export's files and hands back pods, pod-hours and
    /// the other lines; the stored period is the same).
    #[arg(long, value_enum, default_value = "local", env = "GPULEDGER_CUR_ENGINE")]
    pub engine: CurEngine,
    /// The Spark Connect server for `--engine spark`: sc://HOST:PORT (add `/;use_ssl=true`
    /// for TLS). Spark writes its output where gpuledger reads it: see --spark-output.
    #[arg(long, env = "GPULEDGER_SPARK_REMOTE", default_value = "sc://127.0.0.1:15002")]
    pub spark_remote: String,
    /// A bearer token for a managed Spark Connect endpoint (sent only over TLS or to this
    /// machine; never printed).
    #[arg(long, env = "GPULEDGER_SPARK_TOKEN", hide_env_values = true)]
    pub spark_token: Option<String>,
    /// The scheme Spark reads s3:// data files with (`s3a` for open-source Spark's Hadoop S3
    /// connector; EMR and Databricks read s3:// as it is).
    #[arg(long, env = "GPULEDGER_SPARK_S3_SCHEME")]
    pub spark_s3_scheme: Option<String>,
    /// Where Spark writes its output for gpuledger: a folder both share, or
    /// s3://bucket/prefix for a remote cluster (downloaded with the AWS SDK, --endpoint-url
    /// applies). Default: the ingest's scratch folder (Spark on this machine). Each run
    /// writes a folder of its own there and removes it once read.
    #[arg(long, env = "GPULEDGER_SPARK_OUTPUT")]
    pub spark_output: Option<String>,
}

/// Where `ingest cur` aggregates the split rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CurEngine {
    Local,
    Spark,
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Kubernetes cost per namespace with other AWS cost and the bill total.
    Namespaces(NamespacesArgs),
    /// The period's bill: Kubernetes, EC2 not allocated to pods, other cost, and the bridge
    /// from unblended to amortized, net and tax.
    Bill(BillReportArgs),
    /// GPU-hours per namespace and GPU model: provisioned, allocated, used, idle,
    /// unallocated, unattributed.
    Gpu(GpuReportArgs),
    /// Inference requests, tokens and cost per inference per workload and model.
    Inference(InferenceReportArgs),
    /// Cost, GPU-hours, idle and Spot per workload.
    Workloads(RangeArgs),
    /// Chargeback per client: direct cost, shares of the pools, markup.
    Clients(RangeArgs),
    /// A period's chargeback before and after the compute that last changed it, per client.
    Restatements(BillArgs),
    /// Spot adoption of GPU-hours per namespace and workload class.
    Spot(RangeArgs),
    /// Realized savings per month (public on-demand − actual), by Spot and commitments.
    Savings(RangeArgs),
    /// Savings still on the table, ranked, with evidence.
    Opportunities(RangeArgs),
    /// The bill per usage account (payer and linked accounts): Kubernetes, EC2 not
    /// allocated to pods, other cost.
    Accounts(RangeArgs),
    /// The bill per provider (AWS, Azure, Google Cloud, OCI), in USD: its accounts summed.
    Providers(RangeArgs),
    /// The CUR against Cost Explorer, per day and service: the differences above the
    /// tolerance (a day or a service the export misses shows up here).
    CrossCheck(CrossCheckArgs),
    /// gpuledger's own split of a cluster's node cost among its pods (from kube-state-metrics
    /// and cAdvisor) against AWS's split in the CUR, per namespace, workload and client.
    SplitCheck(SplitCheckArgs),
    /// gpuledger's own split of a cluster's node cost among its pods on any cloud (AKS, GKE,
    /// OKE from the FOCUS bill; EKS from the CUR), per namespace, workload and client, with
    /// its reconciliation to the bill.
    Split(SplitArgs),
    /// GPU-hours and cost forecast one to three months ahead, for the fleet, each GPU pool
    /// and each client, with each series' backtest error (MAPE, WAPE) against the baseline.
    Forecast(ForecastArgs),
    /// Each GPU pool's GPUs (from the bill's instance-hours, at peak and on average) against
    /// the forecast's demand with the planned changes: headroom, the first day demand passes
    /// the peak, and the clients driving it.
    Capacity(CapacityArgs),
    /// Per GPU model, the Spot share of training GPU-hours against the 50 % target, the
    /// forecast On-Demand training hours that could move to Spot, and what that would save at
    /// the bill's prices.
    SpotBudgets(CapacityArgs),
    /// The bill's Savings Plans and reservations (commitment an hour, term, utilization per
    /// month, those ending within the horizon), and what to buy: per kind and family, the
    /// commitment with the best net savings over the bill's hours of eligible On-Demand
    /// usage, the lower of a 7-day and a 30-day lookback's, against the forecast too.
    Commitments(CommitmentsArgs),
}

#[derive(Debug, Args)]
pub struct CommitmentsArgs {
    /// Months ahead, after the last hour of the bill.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=3))]
    pub months: u32,
    /// AWS's own recommendation to compare with, saved from `aws ce
    /// get-savings-plans-purchase-recommendation --savings-plans-type COMPUTE_SP` (or
    /// `EC2_INSTANCE_SP`) `--term-in-years ONE_YEAR --payment-option NO_UPFRONT
    /// --lookback-period-in-days THIRTY_DAYS`, or from `aws ce
    /// get-reservation-purchase-recommendation --service "Amazon Elastic Compute Cloud -
    /// Compute" --term-in-years ONE_YEAR --payment-option NO_UPFRONT
    /// --lookback-period-in-days THIRTY_DAYS`; give it once for each.
    #[arg(long, conflicts_with = "aws_cost_explorer")]
    pub aws_recommendation: Vec<std::path::PathBuf>,
    /// Ask Cost Explorer for its Compute and EC2 Instance Savings Plan and reservation
    /// recommendations (three requests, which AWS charges for).
    #[arg(long)]
    pub aws_cost_explorer: bool,
    /// A Cost Explorer-compatible endpoint.
    #[arg(long, env = "GPULEDGER_CE_ENDPOINT_URL")]
    pub ce_endpoint_url: Option<String>,
    #[arg(long, env = "GPULEDGER_REPORT_FORMAT", value_enum, default_value = "table")]
    pub format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// Months ahead, after the last complete computed month.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=3))]
    pub months: u32,
    #[arg(long, env = "GPULEDGER_REPORT_FORMAT", value_enum, default_value = "table")]
    pub format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct ForecastArgs {
    /// Months ahead, after the last complete computed month.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=3))]
    pub months: u32,
    /// Only this GPU pool's series (its GPU model and purchase option, `"A100 Spot"`).
    #[arg(long)]
    pub pool: Option<String>,
    /// Only this client's series.
    #[arg(long)]
    pub client: Option<String>,
    #[arg(long, env = "GPULEDGER_REPORT_FORMAT", value_enum, default_value = "table")]
    pub format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct SplitArgs {
    /// Billing period, YYYY-MM.
    #[arg(long, env = "GPULEDGER_REPORT_PERIOD")]
    pub period: Period,
    /// The cluster, as the series' `cluster` label (or `ingest prometheus --cluster`) named it.
    #[arg(long, env = "GPULEDGER_REPORT_CLUSTER")]
    pub cluster: String,
    #[arg(long, env = "GPULEDGER_REPORT_FORMAT", value_enum, default_value = "table")]
    pub format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct SplitCheckArgs {
    /// Billing period, YYYY-MM.
    #[arg(long, env = "GPULEDGER_REPORT_PERIOD")]
    pub period: Period,
    /// The EKS cluster (its name in the bill and in the series' cluster label).
    #[arg(long, env = "GPULEDGER_REPORT_CLUSTER")]
    pub cluster: String,
    /// A namespace is within tolerance up to this percentage of AWS's cost (or a cent).
    #[arg(long, default_value_t = 0.5)]
    pub tolerance_percent: f64,
    #[arg(long, env = "GPULEDGER_REPORT_FORMAT", value_enum, default_value = "table")]
    pub format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct CrossCheckArgs {
    /// Billing period, YYYY-MM.
    #[arg(long, env = "GPULEDGER_REPORT_PERIOD")]
    pub period: Period,
    /// A difference is within tolerance up to this percentage of the CUR's cost...
    #[arg(long, default_value_t = 0.5)]
    pub tolerance_percent: f64,
    /// ...or up to this many dollars, whichever is larger.
    #[arg(long, default_value = "1.00")]
    pub tolerance_usd: crate::money::Cents,
    #[arg(long, env = "GPULEDGER_REPORT_FORMAT", value_enum, default_value = "table")]
    pub format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct GpuReportArgs {
    /// Billing period, YYYY-MM.
    #[arg(long, env = "GPULEDGER_REPORT_PERIOD")]
    pub period: Period,
    /// GPU-hours whose hourly mean utilization is below this fraction are idle (default: the
    /// threshold the period was computed with).
    #[arg(long, env = "GPULEDGER_IDLE_THRESHOLD")]
    pub idle_threshold: Option<f64>,
    /// Only this provider's accounts (`aws`, `azure`, `gcp`, `oci`; computed periods only).
    #[arg(long, env = "GPULEDGER_REPORT_PROVIDER")]
    pub provider: Option<String>,
    /// Only this usage account (12 digits): its pods and instances (computed periods only).
    #[arg(long, env = "GPULEDGER_REPORT_ACCOUNT")]
    pub account: Option<String>,
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
pub struct BillArgs {
    /// Billing period, YYYY-MM.
    #[arg(long, env = "GPULEDGER_REPORT_PERIOD")]
    pub period: Period,
    #[arg(long, env = "GPULEDGER_REPORT_FORMAT", value_enum, default_value = "table")]
    pub format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct BillReportArgs {
    /// Billing period, YYYY-MM.
    #[arg(long, env = "GPULEDGER_REPORT_PERIOD")]
    pub period: Period,
    /// One provider's bills only (`aws`, `azure`, `gcp`, `oci`): the totals are theirs.
    #[arg(long)]
    pub provider: Option<String>,
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
    /// Only this provider's accounts (`aws`, `azure`, `gcp`, `oci`; computed periods only).
    #[arg(long, env = "GPULEDGER_REPORT_PROVIDER")]
    pub provider: Option<String>,
    /// Only this usage account (12 digits): its pods and its own bill (computed periods only).
    #[arg(long, env = "GPULEDGER_REPORT_ACCOUNT")]
    pub account: Option<String>,
    #[arg(long, env = "GPULEDGER_REPORT_FORMAT", value_enum, default_value = "table")]
    pub format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Folder to write into (created if missing).
    #[arg(long, env = "GPULEDGER_GENERATE_OUT")]
    pub out: PathBuf,
    /// Random seed: the same seed gives byte-identical data.
    #[arg(long, env = "GPULEDGER_GENERATE_SEED", default_value_t = synth::DEFAULT_SEED)]
    pub seed: u64,
    /// Number of months, ending at --end.
    #[arg(long, env = "GPULEDGER_GENERATE_MONTHS", default_value_t = 1)]
    pub months: u32,
    /// Demo scale: the month the fleet applies its fixes (Spot training, L4 inference, small
    /// GPUs for notebooks); earlier months are the wasteful world. Default: always fixed.
    #[arg(long, env = "GPULEDGER_GENERATE_FIXES_FROM")]
    pub fixes_from: Option<Period>,
    /// Months of Cost Explorer history before the first CUR month, in cost-explorer.json.
    #[arg(long, env = "GPULEDGER_GENERATE_HISTORY_MONTHS", default_value_t = 3)]
    pub history_months: u32,
    /// Last billing period, YYYY-MM (default: the last complete month).
    #[arg(long, env = "GPULEDGER_GENERATE_END")]
    pub end: Option<Period>,
    /// The planning world: the months are a year in which the fleet grows node by node,
    /// people start training, notebooks and batch on weekdays, umbrella onboards on the 15th of
    /// the seventh month and acme retrains on H100s every weekend (what forecasts are tested
    /// against).
    #[arg(long, env = "GPULEDGER_GENERATE_GROWTH")]
    pub growth: bool,
    /// Write the last N months under `<out>/held-back/` instead (same layout), so that the
    /// history ingested from `<out>` stops before them; `truth.json` keeps every month.
    #[arg(long, env = "GPULEDGER_GENERATE_HOLD_BACK", default_value_t = 0)]
    pub hold_back: u32,
    /// EKS clusters (comma-separated) whose owner never turned on split cost allocation data:
    /// the CUR has no split rows for their pods, only their instances; `truth.json` still
    /// holds the split AWS's rules give them.
    #[arg(long, value_delimiter = ',')]
    pub without_cur_split: Vec<String>,
    /// Every other cloud's bill names its sub-account (Azure's subscription, Google's
    /// project, Oracle's compartment) by this one id: ids are each cloud's own, and one string
    /// (`sub-ml-prod`, or an AWS account's 12 digits) can be an id on several.
    #[arg(long)]
    pub sub_account: Option<String>,
    /// The column Azure's export names a VM's size in: `sku-meter` (the 1.2 export's), or
    /// only `sku-price-details`, `x-sku-details`, `x-sku-meter-name`, `x-sku-description` or
    /// an opaque `sku-id` (an operator's catalog names the machine by it).
    #[arg(long, value_enum, default_value = "sku-meter")]
    pub azure_machine_column: crate::synth::clouds::MachineColumn,
    /// Fleet size: demo (~11 GPU nodes), small (~25), large (~200 GPU + 300 CPU nodes,
    /// ~10 million CUR rows a month).
    #[arg(long, env = "GPULEDGER_GENERATE_SCALE", value_enum, default_value = "demo")]
    pub scale: Scale,
    /// CUR data file format.
    #[arg(long, env = "GPULEDGER_GENERATE_FORMAT", value_enum, default_value = "parquet")]
    pub format: CurFormat,
    /// S3 bucket named in the manifest's dataFiles URIs.
    #[arg(long, env = "GPULEDGER_GENERATE_BUCKET", default_value = synth::DEFAULT_BUCKET)]
    pub bucket: String,
    /// Key prefix before the export name.
    #[arg(long, env = "GPULEDGER_GENERATE_PREFIX", default_value = synth::DEFAULT_PREFIX)]
    pub prefix: String,
    /// Data export name.
    #[arg(long, env = "GPULEDGER_GENERATE_EXPORT_NAME", default_value = synth::DEFAULT_EXPORT_NAME)]
    pub export_name: String,
    /// Skip the OpenMetrics files.
    #[arg(long, env = "GPULEDGER_GENERATE_NO_METRICS")]
    pub no_metrics: bool,
    /// Write each month's Kubernetes series too (`metrics/YYYY-MM-kube.om`): kube-state-metrics
    /// (nodes with their instance ids, pods with their node, labels and requests) and cAdvisor
    /// (containers' CPU seconds and working set), the inputs of a pod split.
    #[arg(long, env = "GPULEDGER_GENERATE_KUBE_STATE_METRICS")]
    pub kube_state_metrics: bool,
    /// The last month is in progress, as AWS delivers the current month: billed and measured
    /// through this day (1-31) only.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=31))]
    pub through_day: Option<u32>,
    /// Every node pool at this percentage of the scale's node count (rounded, at least one
    /// node per pool): `--scale large --fleet-percent 10` is a ~1M-row month, 300 a ~30M-row
    /// one, for scale models.
    #[arg(long, env = "GPULEDGER_GENERATE_FLEET_PERCENT", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub fleet_percent: u32,
    /// Write AWS's FOCUS 1.2 export of the same bill beside the CUR (`<prefix>/<export>-focus/`,
    /// Parquet, with its manifests), as AWS Data Exports writes a `FOCUS_1_2_AWS` table.
    #[arg(long, env = "GPULEDGER_GENERATE_FOCUS")]
    pub focus: bool,
    /// The clouds of the world, comma-separated: `aws` (the CUR world, always written), and
    /// the overflow clouds `azure` (AKS, billed in EUR, an Azure Cost Management FOCUS
    /// export), `gcp` (GKE, the FOCUS table as Parquet files) and `oci` (OKE, Oracle's daily
    /// FOCUS reports). Any cloud besides AWS writes AWS's FOCUS export too.
    #[arg(
        long,
        env = "GPULEDGER_GENERATE_PROVIDERS",
        value_enum,
        value_delimiter = ',',
        default_value = "aws"
    )]
    pub providers: Vec<crate::synth::clouds::Provider>,
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
    /// AWS's Savings Plan (Compute or EC2 Instance) or reservation recommendation saved from
    /// Cost Explorer (the JSON answer of `GetSavingsPlansPurchaseRecommendation` or
    /// `GetReservationPurchaseRecommendation`), shown beside the Plan page's advice; give it
    /// once for each (in the environment, the paths separated by commas).
    #[arg(long, env = "GPULEDGER_AWS_RECOMMENDATION", value_delimiter = ',')]
    pub aws_recommendation: Vec<PathBuf>,
    #[command(flatten)]
    pub auth: AuthArgs,
}

/// How visitors sign in.
#[derive(Debug, Clone, Args)]
pub struct AuthArgs {
    /// `local` (accounts with passwords), `proxy` (a trusted reverse proxy names the user in
    /// --proxy-user-header) or `none` (no sign-in, everyone an administrator: loopback only).
    #[arg(long, env = "GPULEDGER_AUTH", default_value = "local", value_parser = ["local", "proxy", "none"])]
    pub auth: String,
    /// The header a trusted proxy names the signed-in user in.
    #[arg(long, env = "GPULEDGER_PROXY_USER_HEADER", default_value = "X-Forwarded-Email")]
    pub proxy_user_header: String,
    /// Comma-separated addresses of the trusted proxies (required with --auth proxy).
    #[arg(long, env = "GPULEDGER_TRUSTED_PROXIES", default_value = "")]
    pub trusted_proxies: String,
    /// Mark cookies Secure: set when served over TLS or behind a proxy that terminates it.
    #[arg(long, env = "GPULEDGER_SECURE_COOKIES")]
    pub secure_cookies: bool,
    /// The bearer token /metrics asks for (without one, /metrics is open only with --auth none).
    #[arg(long, env = "GPULEDGER_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Folder for the generated demo data.
    #[arg(long, env = "GPULEDGER_DEMO_DATA", default_value = "gpuledger-demo-data")]
    pub data: PathBuf,
    /// Address to listen on.
    #[arg(long, env = "GPULEDGER_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub auth: AuthArgs,
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
