//! Realistic synthetic data: a CUR 2.0 export with EKS split cost allocation rows, DCGM and
//! inference metrics, and `truth.json` with the answers — the world the demo, the tests and
//! the benchmarks stand on.
//!
//! Layout written under `--out` (CUR reference §1):
//!
//! ```text
//! <out>/<prefix>/<export>/data/BILLING_PERIOD=YYYY-MM/<export>-00001.snappy.parquet
//! <out>/<prefix>/<export>/metadata/BILLING_PERIOD=YYYY-MM/<export>-Manifest.json
//! <out>/metrics/YYYY-MM.om
//! <out>/metrics/YYYY-MM-kube.om   (with --kube-state-metrics: kube-state-metrics and cAdvisor)
//! <out>/cost-explorer.json   (GetCostAndUsage, daily, by SERVICE and LINKED_ACCOUNT)
//! <out>/savings-plans-recommendation.json   (GetSavingsPlansPurchaseRecommendation, Compute SP)
//! <out>/reservation-recommendation.json      (GetReservationPurchaseRecommendation, EC2 reservations)
//! <out>/instance-savings-plans-recommendation.json (GetSavingsPlansPurchaseRecommendation, EC2 Instance SP)
//! <out>/truth.json
//! <out>/azure/gpu-overflow-focus/<YYYYMMDD-YYYYMMDD>/<run>/{manifest.json,part_0_0001.csv.gz}
//! <out>/gcp/gcp_billing_export_focus_<account>/<YYYY-MM>-000000000000.parquet
//! <out>/oci/FOCUS Reports/YYYY/MM/DD/<YYYYMMDD>_0001.csv.gz
//! <out>/metrics/YYYY-MM-kube-<cluster>.om   (their clusters' Kubernetes series)
//! ```
//!
//! The last four with `--providers` (the agency's overflow clouds, `clouds`), the last with
//! `--kube-state-metrics` too (`cloud_kube`).

pub mod bill;
pub mod cloud_kube;
pub mod clouds;
pub mod cost_explorer;
pub mod cur_file;
pub mod fleet;
pub mod focus_file;
pub mod kube;
pub mod metrics;
pub mod rng;
pub mod truth;

use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::json;

use crate::period::Period;
use crate::sources::focus_file::FileError;

pub use cur_file::CurFormat;
pub use fleet::Scale;

/// The generator's defaults, shared by `generate`'s options and `demo`.
pub const DEFAULT_SEED: u64 = 42;
pub const DEFAULT_BUCKET: &str = "example-cur-bucket";
pub const DEFAULT_PREFIX: &str = "cur";
pub const DEFAULT_EXPORT_NAME: &str = "gpuledger-cur2";
/// How many months `demo` generates.
pub const DEMO_MONTHS: u32 = 6;

/// The agency's agreements with the demo world's clients, from the first month: a markup on
/// each (acme 15 %, globex 12 % charged net of AWS's discounts, initech 10 %, umbrella
/// 8 %), as an agency reselling GPU capacity would have. The settings to save, none when the
/// clients already have terms.
pub fn demo_terms(
    history: &crate::domain::settings::SettingsHistory,
) -> Result<Vec<crate::domain::settings::SettingVersion>, String> {
    use crate::domain::settings::{ChargeBasis, EffectiveFrom, SettingKind};
    if history.versions.iter().any(|v| v.kind == SettingKind::Client) {
        return Ok(Vec::new());
    }
    [
        ("acme", 1_500, ChargeBasis::Amortized),
        ("globex", 1_200, ChargeBasis::Net),
        ("initech", 1_000, ChargeBasis::Amortized),
        ("umbrella", 800, ChargeBasis::Amortized),
    ]
    .into_iter()
    .map(|(client, basis_points, basis)| {
        history.client_version(client, EffectiveFrom::BEGINNING, |terms| {
            terms.markup_basis_points = basis_points;
            terms.basis = basis;
        })
    })
    .collect()
}
/// How many months of Cost Explorer history before them.
pub const DEMO_HISTORY_MONTHS: u32 = 3;

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    pub out: PathBuf,
    pub seed: u64,
    pub months: u32,
    pub end: Period,
    pub scale: Scale,
    pub format: CurFormat,
    pub bucket: String,
    pub prefix: String,
    pub export_name: String,
    /// Write the metrics files too (they dominate the size at large scale).
    pub metrics: bool,
    /// Write the Kubernetes series too (kube-state-metrics and cAdvisor, the inputs of a pod
    /// split): `metrics/YYYY-MM-kube.om`.
    pub kube_state_metrics: bool,
    /// The other clouds' clusters' Kubernetes series from this month on (with
    /// `kube_state_metrics`, every month's): `metrics/YYYY-MM-kube-<cluster>.om`.
    pub cloud_kube_from: Option<Period>,
    /// The month the demo's world applies its fixes (Spot training, L4 inference, small GPUs
    /// for notebooks); earlier months are the wasteful world. `None`: always fixed.
    pub fixes_from: Option<Period>,
    /// Months of Cost Explorer history before the first CUR month (the export did not exist
    /// yet), in `cost-explorer.json`.
    pub history_months: u32,
    /// The last month is in progress: billed and measured through this day only.
    pub through_day: Option<u32>,
    /// Every pool's node count at this percentage of the scale's (100: the scale as it is),
    /// for scale models.
    pub fleet_percent: u32,
    /// Write AWS's FOCUS 1.2 export of the same bill too (`<prefix>/<export>-focus/`).
    pub focus: bool,
    /// The clouds besides AWS whose FOCUS bills to write (AWS, the CUR world, always is).
    pub providers: Vec<clouds::Provider>,
    /// EKS clusters whose owner never turned on split cost allocation data: the CUR has no
    /// split rows for their pods, only their instances (the truth still holds the split
    /// AWS's rules give them, what gpuledger's own split must find).
    pub without_cur_split: Vec<String>,
    /// Every other cloud's sub-account id, when not its world's own: one string may be an id
    /// on several clouds (and an AWS usage account's).
    pub sub_account: Option<String>,
    /// The column Azure's export names a VM's size in ([`clouds::MachineColumn`]).
    pub azure_machine_column: clouds::MachineColumn,
    /// The planning world ([`fleet::Growth`]): the months generated are a year in which
    /// demand grows, people start work on weekdays, umbrella onboards part-way and acme
    /// retrains every weekend.
    pub growth: bool,
    /// The last this many months are written under `<out>/held-back/` (same layout), not
    /// `<out>`: what happened after the history a forecast is made from, for tests to compare
    /// with. `truth.json` has every month and names these in `held_back`.
    pub hold_back: u32,
}

impl GenerateOptions {
    /// The demo's data: six demo-scale months ending at `end`, Parquet, with metrics; the
    /// fixes land in the fourth month, so three months before and three after.
    pub fn demo(out: PathBuf, end: Period) -> GenerateOptions {
        GenerateOptions {
            fixes_from: Some(end.previous().previous()),
            history_months: DEMO_HISTORY_MONTHS,
            out,
            seed: DEFAULT_SEED,
            months: DEMO_MONTHS,
            end,
            scale: Scale::Demo,
            format: CurFormat::Parquet,
            bucket: DEFAULT_BUCKET.into(),
            prefix: DEFAULT_PREFIX.into(),
            export_name: DEFAULT_EXPORT_NAME.into(),
            metrics: true,
            kube_state_metrics: false,
            // The demo's last month: AKS, GKE and OKE split by gpuledger on Costs and Data.
            cloud_kube_from: Some(end),
            through_day: None,
            fleet_percent: 100,
            focus: false,
            providers: vec![clouds::Provider::Aws],
            without_cur_split: Vec::new(),
            sub_account: None,
            azure_machine_column: clouds::MachineColumn::SkuMeter,
            growth: false,
            hold_back: 0,
        }
    }
}

/// What was generated, for the command's summary.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GenerateSummary {
    pub periods: Vec<String>,
    pub cur_rows: u64,
    pub cur_bytes: u64,
    pub metric_samples: u64,
    pub metric_bytes: u64,
    pub seconds: f64,
}

/// Errors while generating: the file that could not be written and why.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// A file that could not be written or encoded (the FOCUS writer's error, shared).
    #[error(transparent)]
    File(#[from] FileError),
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> GenerateError + '_ {
    move |source| FileError::Io { path: path.to_path_buf(), source }.into()
}

fn encode_error(path: &Path) -> impl FnOnce(polars::prelude::PolarsError) -> GenerateError + '_ {
    move |source| FileError::Encode { path: path.to_path_buf(), source }.into()
}

/// Rows per data file before the export starts a new chunk, as AWS splits large months.
const ROWS_PER_FILE: usize = 4_000_000;

/// Generates the months ending at `options.end`, oldest first.
pub fn generate(
    options: &GenerateOptions,
    progress: &indicatif::MultiProgress,
) -> Result<GenerateSummary, GenerateError> {
    let started = Instant::now();
    let mut periods = vec![options.end];
    for _ in 1..options.months.max(1) {
        periods.push(periods[periods.len() - 1].previous());
    }
    periods.reverse();
    let mut summary = GenerateSummary {
        periods: periods.iter().map(Period::to_string).collect(),
        cur_rows: 0,
        cur_bytes: 0,
        metric_samples: 0,
        metric_bytes: 0,
        seconds: 0.0,
    };
    let mut truths = serde_json::Map::new();
    let mut cost_explorer = cost_explorer::CeTally::default();
    let first = periods[0];
    let growth = options.growth.then_some(fleet::Growth { first, months: periods.len() as u32 });
    let held_back: Vec<Period> =
        periods.iter().rev().take(options.hold_back as usize).rev().copied().collect();
    let held_options = GenerateOptions { out: options.out.join("held-back"), ..options.clone() };
    for period in periods {
        let held = held_back.contains(&period);
        let options = if held { &held_options } else { options };
        let mut world = fleet::World::build_sized(
            options.seed,
            period,
            options.scale,
            options.fixes_from,
            options.fleet_percent,
            growth,
        );
        if let Some(days) = options.through_day.filter(|_| period == options.end) {
            world.through_day(days);
        }
        let bar = progress.add(indicatif::ProgressBar::new_spinner());
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} {human_pos} CUR rows ({per_sec})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        bar.set_message(format!("{period}"));
        let mut truth = truth::Truth::new(period.to_string());
        let (rows, files, bytes) = write_cur(options, &world, &mut truth, &bar)?;
        truth.cur_rows = rows;
        truth.finish();
        write_manifest(options, &world, &files)?;
        summary.cur_rows += rows;
        summary.cur_bytes += bytes;
        // The month's OpenMetrics files: DCGM and inference, and the Kubernetes series.
        type Writer = fn(&fleet::World, &mut BufWriter<File>) -> std::io::Result<u64>;
        let metric_files: [(bool, &str, &str, Writer); 2] = [
            (options.metrics, "", "metrics", metrics::write_month),
            (options.kube_state_metrics, "-kube", "Kubernetes metrics", kube::write_month),
        ];
        for (_, suffix, what, write) in metric_files.into_iter().filter(|(wanted, ..)| *wanted) {
            let path = options.out.join("metrics").join(format!("{period}{suffix}.om"));
            fs::create_dir_all(path.parent().unwrap_or(&options.out)).map_err(io_error(&path))?;
            let file = File::create(&path).map_err(io_error(&path))?;
            let mut out = BufWriter::with_capacity(1 << 20, file);
            bar.set_message(format!("{period} {what}"));
            summary.metric_samples += write(&world, &mut out).map_err(io_error(&path))?;
            std::io::Write::flush(&mut out).map_err(io_error(&path))?;
            summary.metric_bytes += fs::metadata(&path).map_err(io_error(&path))?.len();
        }
        if !held {
            cost_explorer.merge(std::mem::take(&mut truth.cost_explorer));
        }
        let mut value = serde_json::to_value(&truth).unwrap_or_default();
        let mut providers = serde_json::Map::new();
        for provider in &options.providers {
            bar.set_message(format!("{period} {} FOCUS bill", provider.id()));
            if let Some(bill) = clouds::write_month(
                &options.out,
                options.seed,
                *provider,
                period,
                world.billed_hours,
                options.kube_state_metrics || options.cloud_kube_from.is_some_and(|from| period >= from),
                clouds::Variant {
                    sub_account: options.sub_account.as_deref(),
                    machine: options.azure_machine_column,
                },
            )? {
                providers.insert(provider.id().into(), serde_json::to_value(bill).unwrap_or_default());
            }
        }
        value["providers"] = providers.into();
        bar.finish_with_message(format!("{period} done"));
        truths.insert(period.to_string(), value);
    }
    let ce_path = options.out.join("cost-explorer.json");
    let ce = cost_explorer::response(first, options.history_months, &cost_explorer);
    fs::write(&ce_path, serde_json::to_string(&ce).unwrap_or_default()).map_err(io_error(&ce_path))?;
    if let Some(answer) =
        cost_explorer::savings_plans_recommendation(&cost_explorer, bill::PAYER_ACCOUNT.0, options.seed)
    {
        let path = options.out.join("savings-plans-recommendation.json");
        fs::write(&path, serde_json::to_string_pretty(&answer).unwrap_or_default())
            .map_err(io_error(&path))?;
    }
    if let Some(answer) =
        cost_explorer::reservation_recommendation(&cost_explorer, bill::PAYER_ACCOUNT.0, options.seed)
    {
        let path = options.out.join("reservation-recommendation.json");
        fs::write(&path, serde_json::to_string_pretty(&answer).unwrap_or_default())
            .map_err(io_error(&path))?;
    }
    if let Some(answer) =
        cost_explorer::instance_plans_recommendation(&cost_explorer, bill::PAYER_ACCOUNT.0, options.seed)
    {
        let path = options.out.join("instance-savings-plans-recommendation.json");
        fs::write(&path, serde_json::to_string_pretty(&answer).unwrap_or_default())
            .map_err(io_error(&path))?;
    }
    let truth_path = options.out.join("truth.json");
    let document = json!({
        "generator": {
            "seed": options.seed,
            "scale": format!("{:?}", options.scale).to_lowercase(),
            "format": format!("{:?}", options.format).to_lowercase(),
            "sample_interval_seconds": options.scale.sample_interval(),
        },
        "conventions": {
            "money": "USD at full double precision, summed from the same values written to the CUR",
            "gpu_hours_allocated": "sum of split_line_item_split_usage on ...EKS-EC2-Accelerator-Hours rows",
            "gpu_hours_used": "sum over GPU-hours of hourly mean utilization (0..1) x allocated hours",
            "gpu_hours_idle": "allocated GPU-hours whose hourly mean utilization is below idle_threshold",
            "requests": "counter increase between consecutive samples, attributed to the hour the interval lies in: a sample at t counts for hour floor((t-1)/3600)",
            "other_cost": "bill_amortized - kubernetes_allocated_cost",
        },
        "periods": truths,
        "held_back": held_back.iter().map(Period::to_string).collect::<Vec<_>>(),
    });
    let text = serde_json::to_string_pretty(&document).unwrap_or_default();
    fs::write(&truth_path, text).map_err(io_error(&truth_path))?;
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

fn export_root(options: &GenerateOptions) -> PathBuf {
    options.out.join(&options.prefix).join(&options.export_name)
}

fn partition(period: Period) -> String {
    format!("BILLING_PERIOD={period}")
}

/// Writes the month's data files; returns (rows, file names, bytes).
fn write_cur(
    options: &GenerateOptions,
    world: &fleet::World,
    truth: &mut truth::Truth,
    bar: &indicatif::ProgressBar,
) -> Result<(u64, Vec<String>, u64), GenerateError> {
    let dir = export_root(options).join("data").join(partition(world.period));
    // A re-generation replaces the period whole, like an OVERWRITE delivery.
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(io_error(&dir))?;
    }
    fs::create_dir_all(&dir).map_err(io_error(&dir))?;
    let mut files = Vec::new();
    let mut sink = ChunkedSink {
        name: options.export_name.clone(),
        format: options.format,
        dir: dir.clone(),
        files: &mut files,
        writer: None,
        rows_in_file: 0,
    };
    // The same bill as AWS's FOCUS 1.2 export, always Parquet (AWS's default).
    let focus_name = focus_export_name(options);
    let focus_dir =
        options.out.join(&options.prefix).join(&focus_name).join("data").join(partition(world.period));
    let mut focus_files = Vec::new();
    let mut focus_sink = options.focus.then(|| ChunkedSink {
        name: focus_name.clone(),
        format: CurFormat::Parquet,
        dir: focus_dir.clone(),
        files: &mut focus_files,
        writer: None,
        rows_in_file: 0,
    });
    if focus_sink.is_some() {
        if focus_dir.exists() {
            fs::remove_dir_all(&focus_dir).map_err(io_error(&focus_dir))?;
        }
        fs::create_dir_all(&focus_dir).map_err(io_error(&focus_dir))?;
    }
    let rows = bill::write_month(
        world,
        options.format,
        &options.without_cur_split,
        &mut sink,
        focus_sink.as_mut(),
        truth,
        bar,
    )
    .map_err(encode_error(&dir))?;
    sink.close().map_err(encode_error(&dir))?;
    if let Some(mut focus_sink) = focus_sink {
        focus_sink.close().map_err(encode_error(&focus_dir))?;
        write_manifest_of(options, world, &focus_name, &focus_files, Vec::new())?;
    }
    let mut bytes = 0;
    for name in &files {
        let path = dir.join(name);
        bytes += fs::metadata(&path).map_err(io_error(&path))?.len();
    }
    Ok((rows, files, bytes))
}

/// Starts a new numbered chunk once a file holds [`ROWS_PER_FILE`] rows.
pub struct ChunkedSink<'a> {
    /// The export's name, which its files are named after.
    name: String,
    format: CurFormat,
    dir: PathBuf,
    files: &'a mut Vec<String>,
    writer: Option<cur_file::CurWriter>,
    rows_in_file: usize,
}

impl ChunkedSink<'_> {
    pub fn write(&mut self, frame: &mut polars::prelude::DataFrame) -> polars::prelude::PolarsResult<()> {
        if self.writer.is_none() || self.rows_in_file >= ROWS_PER_FILE {
            self.close()?;
            let name = format!("{}-{:05}.{}", self.name, self.files.len() + 1, self.format.extension());
            self.writer = Some(cur_file::CurWriter::create(&self.dir.join(&name), self.format));
            self.files.push(name);
        }
        self.rows_in_file += frame.height();
        match &mut self.writer {
            Some(writer) => writer.write(frame),
            None => Ok(()),
        }
    }

    fn close(&mut self) -> polars::prelude::PolarsResult<()> {
        self.rows_in_file = 0;
        match self.writer.take() {
            Some(writer) => writer.finish(),
            None => Ok(()),
        }
    }
}

fn write_manifest(
    options: &GenerateOptions,
    world: &fleet::World,
    files: &[String],
) -> Result<(), GenerateError> {
    let columns: Vec<serde_json::Value> = cur_file::manifest_columns(world.has_discount)
        .into_iter()
        .map(|(name, kind)| json!({ "name": name, "type": kind }))
        .collect();
    write_manifest_of(options, world, &options.export_name, files, columns)
}

/// The AWS FOCUS export's name beside the CUR's.
pub fn focus_export_name(options: &GenerateOptions) -> String {
    format!("{}-focus", options.export_name)
}

/// An export's manifest for the period, as AWS Data Exports writes it.
fn write_manifest_of(
    options: &GenerateOptions,
    world: &fleet::World,
    export_name: &str,
    files: &[String],
    columns: Vec<serde_json::Value>,
) -> Result<(), GenerateError> {
    let period = world.period;
    // The CUR's manifest ids as before; the FOCUS export's from a stream of their own.
    let stream = if export_name == options.export_name { 50 } else { 51 };
    let mut id_rng = rng::Rng::derive(world.seed, &[stream]);
    let key_prefix = format!("{}/{}", options.prefix, export_name);
    let data_files: Vec<String> = files
        .iter()
        .map(|name| format!("s3://{}/{key_prefix}/data/{}/{name}", options.bucket, partition(period)))
        .collect();
    let manifest = json!({
        "executionId": id_rng.uuid(),
        "exportArn": format!(
            "arn:aws:bcm-data-exports:us-east-1:{}:export/{}-{}",
            bill::PAYER_ACCOUNT.0, export_name, id_rng.uuid()
        ),
        "billingPeriod": period.to_string(),
        "columns": columns,
        "dataFiles": data_files,
        "additionalOutputFiles": [],
    });
    let dir = options.out.join(&options.prefix).join(export_name).join("metadata").join(partition(period));
    fs::create_dir_all(&dir).map_err(io_error(&dir))?;
    let path = dir.join(format!("{export_name}-Manifest.json"));
    let text = serde_json::to_string_pretty(&manifest).unwrap_or_default();
    fs::write(&path, text).map_err(io_error(&path))
}
