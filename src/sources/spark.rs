//! The CUR aggregation pushed down to Apache Spark over Spark Connect
//! (`gpuledger ingest cur --engine spark --spark-remote sc://HOST:15002`).
//!
//! A month of split cost allocation data is ~96 % split rows: one per pod, resource and hour.
//! Spark reads the export's data files where they lie (the files the manifest lists) and
//! reduces them to what the local reader needs of them; gpuledger reads Spark's Parquet output
//! with the same code as a local export, so every stored row, page and invoice is the same.
//!
//! One job, four steps, each a Spark SQL statement:
//! 1. **checks and counts** per data file (returned over Arrow, a few rows): split rows read and
//!    skipped, and every way a split row can be refused locally (a non-finite or absurd amount,
//!    a missing timestamp, a line outside the billing period, a line longer than an hour);
//! 2. **pods** (`pods/`): one row per pod ARN and parent instance (per tags, without an ARN),
//!    the tags of its first hour, numbered by (first hour, ARN, parent) — the local reader
//!    resolves each to a pod exactly as it resolves a split row;
//! 3. **pod-hours** (`pod_hours/`): per pod number and hour, each resource's usage and its
//!    split, unused, net and public on-demand costs summed in integer nano-dollars — each
//!    line's dollars turned into nano-dollars as the local reader does, so sums are exact;
//! 4. **lines** (`lines/`): every other line of the bill as it is (the columns gpuledger reads),
//!    in the export's order, one file: the local reader classifies them as in a local export.
//!
//! The output is written under one folder both Spark and gpuledger can read: a local folder
//! (a Spark Connect server on this machine or a shared file system).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use spark_connect::SparkSession;
use spark_connect::row::{Row, Value};

use super::cur::reader::{COLUMN_NAMES, Col, REQUIRED};
use super::objects::{ObjectError, ObjectStore, S3Options, S3Store, failed};
use super::{SourceError, invalid};
use crate::period::Period;
use crate::split::Resource;

/// How to reach Spark.
#[derive(Debug, Clone, Default)]
pub struct SparkOptions {
    /// A Spark Connect URL: `sc://host:port`, with `/;use_ssl=true;token=…` for a managed
    /// endpoint.
    pub remote: String,
    /// A bearer token, added to the URL the client connects with (never to messages).
    pub token: Option<String>,
    /// Rewrites `s3://` data file URIs to this scheme (`s3a` for open-source Spark's Hadoop S3
    /// connector); EMR and Databricks read `s3://` as it is.
    pub s3_scheme: Option<String>,
    /// Where Spark writes its output: `None` for the ingest's scratch folder (Spark on this
    /// machine), a folder Spark and gpuledger share, or `s3://bucket/prefix` (a remote
    /// cluster; gpuledger downloads the output with the AWS SDK). Each run writes into a
    /// folder of its own there, removed once read.
    pub output: Option<String>,
    /// How gpuledger reaches an S3 output.
    pub output_s3: S3Options,
}

/// Where one period's job writes, and where gpuledger finds what it wrote.
pub enum SparkOutput {
    /// A folder both reach; `remove` when it is the run's own folder in a shared one (the
    /// scratch folder goes with the ingest).
    Folder { dir: PathBuf, remove: bool },
    /// The run's own prefix in S3, as Spark names it (`spark_uri`, with `--spark-s3-scheme`)
    /// and as gpuledger reads it (`store`); part files are downloaded into `scratch`.
    S3 { store: S3Store, spark_uri: String, scratch: PathBuf },
}

impl SparkOutput {
    /// The output of one run of `period`'s job under `options.output` (or in `scratch`).
    pub async fn open(
        options: &SparkOptions,
        period: Period,
        scratch: &Path,
    ) -> Result<SparkOutput, SourceError> {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let run = format!("gpuledger-spark-{period}-{}-{nanos}", std::process::id());
        let Some(output) = options.output.as_deref() else {
            return Ok(SparkOutput::Folder { dir: scratch.join("spark"), remove: false });
        };
        let output = output.trim_end_matches('/');
        if output.starts_with("s3://") {
            let uri = format!("{output}/{run}");
            let store = S3Store::connect(&uri, &options.output_s3).await.map_err(|e| invalid(&uri, e))?;
            let spark_uri = spark_uri(&uri, options.s3_scheme.as_deref());
            return Ok(SparkOutput::S3 { store, spark_uri, scratch: scratch.join("spark") });
        }
        let dir = std::fs::canonicalize(output)
            .map_err(|e| invalid(output, format!("Spark's output folder: {e}")))?;
        Ok(SparkOutput::Folder { dir: dir.join(run), remove: true })
    }

    /// Where Spark writes the output `name` (`pods`, `pod_hours`, `lines`), as an SQL string.
    fn spark_location(&self, name: &str) -> Result<String, SourceError> {
        match self {
            SparkOutput::Folder { dir, .. } => path_text(&dir.join(name)),
            SparkOutput::S3 { spark_uri, .. } => {
                string_literal(&format!("{spark_uri}/{name}"), "an output location")
            }
        }
    }

    /// The part files of the output `name`, in the order of their rows, as local files.
    pub fn parts(&self, name: &str) -> Result<Vec<PathBuf>, SourceError> {
        match self {
            SparkOutput::Folder { dir, .. } => parts(&dir.join(name)),
            SparkOutput::S3 { store, scratch, .. } => {
                let prefix = format!("{name}/");
                let fetch = async {
                    let names = store.files(&prefix).await?;
                    let mut local = Vec::new();
                    std::fs::create_dir_all(scratch).map_err(|e| failed(scratch.display().to_string(), e))?;
                    for name in part_order(names) {
                        local.push(store.local_copy(&format!("{prefix}{name}"), scratch).await?);
                    }
                    Ok::<_, ObjectError>(local)
                };
                tokio::runtime::Handle::current()
                    .block_on(fetch)
                    .map_err(|e| invalid(store.locate(&prefix), e))
            }
        }
    }

    /// Removes what the run wrote, once read (a failure is logged: the data is stored).
    pub fn remove(&self) {
        let removed = match self {
            SparkOutput::Folder { dir, remove: true } => match std::fs::remove_dir_all(dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.to_string()),
                _ => Ok(()),
            },
            SparkOutput::Folder { remove: false, .. } => Ok(()),
            SparkOutput::S3 { store, .. } => tokio::runtime::Handle::current()
                .block_on(async {
                    for name in ["pods", "pod_hours", "lines"] {
                        for file in store.files(&format!("{name}/")).await? {
                            store.delete(&format!("{name}/{file}")).await?;
                        }
                    }
                    Ok::<_, ObjectError>(())
                })
                .map_err(|e| e.to_string()),
        };
        if let Err(error) = removed {
            tracing::warn!(%error, "could not remove Spark's output after reading it");
        }
    }
}

/// One data file of the delivery: where Spark reads it, and how messages name it.
#[derive(Debug, Clone)]
pub struct SparkFile {
    pub uri: String,
    pub location: String,
}

/// What the job left for the local reader.
#[derive(Debug)]
pub struct PushedDown {
    /// The bill's lines other than split rows (one file, in the export's order).
    pub lines: Vec<PathBuf>,
    /// One row per pod and parent instance, in pod-number order.
    pub pods: Vec<PathBuf>,
    /// Per pod number and hour, each resource's usage and costs.
    pub pod_hours: Vec<PathBuf>,
    /// Split rows read (EKS and ECS) and of them not made into facts.
    pub split_rows: u64,
    pub split_rows_skipped: u64,
}

/// The resources as the pod-hours output names its columns (`gpu_usage`, `gpu_split`, …).
pub const RESOURCES: [Resource; 3] = [Resource::Accelerator, Resource::Vcpu, Resource::Memory];

/// The money columns of the pod-hours output, per resource, in nano-dollars.
pub const MONEY: [&str; 6] = ["split", "unused", "net_split", "net_unused", "public_split", "public_unused"];

/// Runs the job for one period; blocking (the client runs its own runtime).
pub fn run(
    options: &SparkOptions,
    period: Period,
    files: &[SparkFile],
    out: &SparkOutput,
    progress: &indicatif::ProgressBar,
) -> Result<PushedDown, SourceError> {
    let remote = &options.remote;
    let spark = SparkSession::builder()
        .remote(&options.url())
        .get_or_create()
        .map_err(|e| invalid(remote, options.redact(&format!("cannot open a Spark Connect session: {e}"))))?;
    let job = Job { spark: &spark, options };
    for setting in [
        // Epoch seconds and hours in UTC whatever the server's zone.
        "SET spark.sql.session.timeZone=UTC",
        // Timestamps gpuledger's Parquet reader reads (Spark's default is INT96).
        "SET spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS",
        // A tag listed twice keeps its last value, as the local reader's labels do.
        "SET spark.sql.mapKeyDedupPolicy=LAST_WIN",
        // Output files of at most 200,000 rows: gpuledger reads one at a time, so its memory
        // stays bounded whatever the month's size.
        "SET spark.sql.files.maxRecordsPerFile=200000",
    ] {
        job.rows(setting)?;
    }
    let mut schemas = Vec::with_capacity(files.len());
    for file in files {
        progress.set_message(format!("Spark: reading the schema of {}", file.location));
        let uri = spark_uri(&file.uri, options.s3_scheme.as_deref());
        let rows = job.rows(&format!("DESCRIBE SELECT * FROM parquet.{}", quote_path(&uri)?))?;
        let columns: BTreeMap<String, String> =
            rows.iter().filter_map(|r| Some((text(r, 0)?.to_string(), text(r, 1)?.to_lowercase()))).collect();
        if let Some(missing) = COLUMN_NAMES[..REQUIRED].iter().find(|c| !columns.contains_key(**c)) {
            return Err(invalid(&file.location, format!("missing required column {missing}")));
        }
        schemas.push(FileSchema { uri, location: file.location.clone(), columns });
    }
    let sql = JobSql::new(period, &schemas)?;
    let started = std::time::Instant::now();
    let mut step = started;
    let mut timed = |what: &str| {
        tracing::info!(period = %period, seconds = step.elapsed().as_secs_f64(), "Spark: {what}");
        step = std::time::Instant::now();
    };
    progress.set_message("Spark: checking and counting the split rows");
    job.rows(&sql.split_view())?;
    let checks = job.rows(&sql.checks())?;
    let (split_rows, split_rows_skipped) = refuse_bad_rows(period, &checks)?;
    timed("split rows checked and counted");
    progress.set_message("Spark: numbering the pods");
    job.rows(&sql.pods_table())?;
    job.rows(&sql.write_pods(&out.spark_location("pods")?))?;
    timed("pods numbered and written");
    progress.set_message("Spark: summing pod-hours");
    job.rows(&sql.write_pod_hours(&out.spark_location("pod_hours")?))?;
    timed("pod-hours summed and written");
    progress.set_message("Spark: the bill's other lines");
    job.rows(&sql.write_lines(&out.spark_location("lines")?))?;
    timed("other lines written");
    // Temporary views and the cached table go with the session; drop them now anyway.
    job.rows("UNCACHE TABLE IF EXISTS gl_pods")?;
    tracing::info!(period = %period, seconds = started.elapsed().as_secs_f64(), "Spark: the job is done");
    progress.set_message("Spark: fetching its output");
    Ok(PushedDown {
        lines: out.parts("lines")?,
        pods: out.parts("pods")?,
        pod_hours: out.parts("pod_hours")?,
        split_rows,
        split_rows_skipped,
    })
}

impl SparkOptions {
    /// A message with the token, should the client quote the URL in it, blanked out.
    fn redact(&self, message: &str) -> String {
        match &self.token {
            Some(token) if !token.is_empty() => message.replace(token.as_str(), "[token]"),
            _ => message.to_string(),
        }
    }

    /// The URL the client connects with: the remote and, when given, the token.
    fn url(&self) -> String {
        match &self.token {
            None => self.remote.clone(),
            Some(token) if self.remote.contains("/;") => format!("{};token={token}", self.remote),
            Some(token) => format!("{}/;token={token}", self.remote.trim_end_matches('/')),
        }
    }
}

struct Job<'a> {
    spark: &'a SparkSession,
    options: &'a SparkOptions,
}

impl Job<'_> {
    /// Runs one statement and collects its (few) rows.
    fn rows(&self, statement: &str) -> Result<Vec<Row>, SourceError> {
        tracing::debug!(statement, "Spark SQL");
        // The client's error is large (clippy's result_large_err): no closure returns it.
        let collected = match self.spark.sql(statement) {
            Ok(frame) => frame.collect(),
            Err(e) => Err(e),
        };
        collected.map_err(|e| {
            invalid(&self.options.remote, self.options.redact(&format!("the Spark job failed: {e}")))
        })
    }
}

fn text(row: &Row, index: usize) -> Option<&str> {
    row.get(index).and_then(Value::as_str)
}

fn integer(row: &Row, index: usize) -> i64 {
    row.get(index).and_then(Value::as_i64).unwrap_or(0)
}

/// The Parquet part files Spark wrote into `folder`, in the order of their rows.
fn parts(folder: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let location = folder.display().to_string();
    let entries = std::fs::read_dir(folder).map_err(|e| {
        invalid(
            &location,
            format!("Spark's output is not readable here ({e}): Spark and gpuledger must share this folder"),
        )
    })?;
    let names = entries.flatten().map(|e| e.file_name().to_string_lossy().to_string()).collect();
    Ok(part_order(names).into_iter().map(|name| folder.join(name)).collect())
}

/// The Parquet part files among a Spark output folder's file names, in the order of their
/// rows: Spark numbers a partition's files `c000`, `c001`, …, `c1000`, so shorter names first.
pub fn part_order(names: Vec<String>) -> Vec<String> {
    let mut parts: Vec<String> =
        names.into_iter().filter(|name| name.starts_with("part-") && name.ends_with(".parquet")).collect();
    parts.sort_by(|a, b| (a.len(), a).cmp(&(b.len(), b)));
    parts
}

fn spark_uri(uri: &str, s3_scheme: Option<&str>) -> String {
    match (uri.strip_prefix("s3://"), s3_scheme) {
        (Some(rest), Some(scheme)) => format!("{scheme}://{rest}"),
        _ => uri.to_string(),
    }
}

/// A path in backquotes for `parquet.`…``; a backquote in it cannot be quoted.
fn quote_path(path: &str) -> Result<String, SourceError> {
    if path.contains('`') {
        return Err(invalid(path, "a data file path with a backquote cannot be handed to Spark SQL"));
    }
    Ok(format!("`{path}`"))
}

/// `text` as an SQL string literal; `what` names it when it holds a quote or backslash, which
/// Spark SQL would read as the end of the string or an escape.
fn string_literal(text: &str, what: &str) -> Result<String, SourceError> {
    if text.contains('\'') || text.contains('\\') {
        return Err(invalid(text, format!("{what} with a quote or backslash cannot be handed to Spark SQL")));
    }
    Ok(format!("'{text}'"))
}

/// A folder as an SQL string literal.
fn path_text(path: &Path) -> Result<String, SourceError> {
    string_literal(&path.display().to_string(), "an output folder")
}

/// One data file's columns and their Spark types.
struct FileSchema {
    uri: String,
    location: String,
    columns: BTreeMap<String, String>,
}

impl FileSchema {
    /// A column as a double (null when absent), parsed if the file holds it as text.
    fn number(&self, column: Col) -> String {
        let name = column.name();
        match self.columns.get(name).map(String::as_str) {
            None => "CAST(NULL AS DOUBLE)".into(),
            Some("double") => name.into(),
            Some("string") => format!("try_cast(nullif(trim({name}), '') AS DOUBLE)"),
            Some(_) => format!("CAST({name} AS DOUBLE)"),
        }
    }

    /// A text column whose value is unusable as a number (text that does not parse).
    fn unparsed(&self, column: Col) -> String {
        let name = column.name();
        match self.columns.get(name).map(String::as_str) {
            Some("string") => {
                format!("(trim({name}) <> '' AND try_cast(trim({name}) AS DOUBLE) IS NULL)")
            }
            _ => "false".into(),
        }
    }

    fn text(&self, column: Col) -> String {
        let name = column.name();
        match self.columns.get(name).map(String::as_str) {
            None => "''".into(),
            Some("string") => format!("coalesce({name}, '')"),
            Some(_) => format!("coalesce(CAST({name} AS STRING), '')"),
        }
    }

    /// A timestamp as UTC epoch seconds (a bare integer is epoch milliseconds, as locally).
    fn epoch_seconds(&self, column: Col) -> String {
        let name = column.name();
        match self.columns.get(name).map(String::as_str) {
            None => "CAST(NULL AS BIGINT)".into(),
            Some("bigint" | "int") => format!("floor({name} / 1000)"),
            Some("string") => format!("unix_seconds(try_to_timestamp(nullif(trim({name}), '')))"),
            Some(_) => format!("unix_seconds(CAST({name} AS TIMESTAMP))"),
        }
    }

    /// The tags as a map (AWS writes a MAP; gpuledger's generator a list of key/value pairs).
    fn tags(&self) -> String {
        let name = Col::ResourceTags.name();
        match self.columns.get(name).map(String::as_str) {
            None => "CAST(map() AS MAP<STRING, STRING>)".into(),
            Some(t) if t.starts_with("map") => {
                format!("coalesce({name}, CAST(map() AS MAP<STRING, STRING>))")
            }
            Some(_) => format!("coalesce(map_from_entries({name}), CAST(map() AS MAP<STRING, STRING>))"),
        }
    }
}

/// Spark SQL's `round` on a double (half away from zero) times a billion, as
/// [`crate::money::nanos_from_usd`].
fn nanos(dollars: &str) -> String {
    format!("CAST(round(({dollars}) * 1000000000D) AS BIGINT)")
}

/// The job's statements for one period's files.
struct JobSql<'a> {
    period: Period,
    files: &'a [FileSchema],
}

/// Split rows' line operations (ECS tasks' are counted and skipped, as locally).
const SPLIT_OPERATIONS: &str = "('EKSPod-EC2', 'ECSTask-EC2')";

impl<'a> JobSql<'a> {
    fn new(period: Period, files: &'a [FileSchema]) -> Result<JobSql<'a>, SourceError> {
        for file in files {
            quote_path(&file.uri)?;
            string_literal(&file.location, "a file name")?;
        }
        Ok(JobSql { period, files })
    }

    /// `gl_split`: every split row, its columns typed, with its file, hour and resource.
    fn split_view(&self) -> String {
        let selects: Vec<String> = self
            .files
            .iter()
            .map(|f| {
                let money = [
                    ("split_cost", Col::SplitLineItemSplitCost),
                    ("unused_cost", Col::SplitLineItemUnusedCost),
                    ("usage", Col::SplitLineItemSplitUsage),
                    ("net_split", Col::SplitLineItemNetSplitCost),
                    ("net_unused", Col::SplitLineItemNetUnusedCost),
                    ("public_split", Col::SplitLineItemPublicOnDemandSplitCost),
                    ("public_unused", Col::SplitLineItemPublicOnDemandUnusedCost),
                ];
                let numbers: Vec<String> =
                    money.iter().map(|(alias, col)| format!("{} AS {alias}", f.number(*col))).collect();
                let unparsed: Vec<String> = money.iter().map(|(_, col)| f.unparsed(*col)).collect();
                format!(
                    "SELECT '{location}' AS gl_file, {operation} AS operation, {arn} AS arn, \
                     {parent} AS parent, {usage_type} AS usage_type, {start} AS start_s, {end} AS end_s, \
                     {tags} AS tags, {numbers}, ({unparsed}) AS unparsed \
                     FROM parquet.`{uri}` WHERE {operation_column} IN {SPLIT_OPERATIONS}",
                    location = f.location,
                    operation = f.text(Col::LineItemOperation),
                    arn = f.text(Col::LineItemResourceId),
                    parent = f.text(Col::SplitLineItemParentResourceId),
                    usage_type = f.text(Col::LineItemUsageType),
                    start = f.epoch_seconds(Col::LineItemUsageStartDate),
                    end = f.epoch_seconds(Col::LineItemUsageEndDate),
                    tags = f.tags(),
                    numbers = numbers.join(", "),
                    unparsed = unparsed.join(" OR "),
                    uri = f.uri,
                    operation_column = Col::LineItemOperation.name(),
                )
            })
            .collect();
        let resource = RESOURCES
            .iter()
            .map(|r| format!("WHEN endswith(usage_type, '{}') THEN '{}'", r.usage_type_suffix(), r.as_str()))
            .collect::<Vec<_>>()
            .join(" ");
        format!(
            "CREATE OR REPLACE TEMPORARY VIEW gl_split AS \
             SELECT *, start_s - pmod(start_s, 3600) AS hour, \
               operation = 'EKSPod-EC2' AND resource IS NOT NULL \
                 AND NOT (parent = '' AND coalesce(split_cost, 0D) = 0D) AS kept, \
               CASE WHEN instr(arn, '/') > 0 THEN CAST(NULL AS ARRAY<STRUCT<key: STRING, value: STRING>>) \
                 ELSE array_sort(map_entries(tags)) END AS tag_key \
             FROM (SELECT *, CASE {resource} END AS resource FROM ({union}))",
            union = selects.join(" UNION ALL "),
        )
    }

    /// Per file: split rows, skipped, and each kind of row the local reader would refuse
    /// (count and the first example).
    fn checks(&self) -> String {
        let bad = |column: &str| {
            format!("({column} IS NOT NULL AND (isnan({column}) OR abs({column}) > 1000000000D))")
        };
        let any_bad = |columns: &[&str]| columns.iter().map(|c| bad(c)).collect::<Vec<_>>().join(" OR ");
        let costs = any_bad(&["split_cost", "unused_cost"]);
        let others = any_bad(&["usage", "net_split", "net_unused", "public_split", "public_unused"]);
        format!(
            "SELECT gl_file, count(*) AS split_rows, count_if(NOT kept) AS skipped, \
               count_if(unparsed) AS unparsed, \
               count_if({costs} OR (kept AND ({others}))) AS bad_amounts, \
               count_if(kept AND start_s IS NULL) AS no_start, \
               count_if(kept AND (start_s < {start} OR start_s >= {end})) AS outside, \
               min(CASE WHEN kept AND (start_s < {start} OR start_s >= {end}) THEN start_s END) AS outside_first, \
               count_if(kept AND end_s - start_s > 3600) AS not_hourly, \
               max(CASE WHEN kept THEN end_s - start_s END) AS longest \
             FROM gl_split GROUP BY gl_file",
            start = self.period.start(),
            end = self.period.end(),
        )
    }

    /// `gl_pods` (cached): one row per pod ARN and parent (per tags, without an ARN), numbered.
    fn pods_table(&self) -> String {
        "CACHE TABLE gl_pods AS \
         SELECT CAST(row_number() OVER (ORDER BY first_hour, arn, parent, tag_key) - 1 AS BIGINT) AS k, * \
         FROM (SELECT arn, parent, tag_key, min(hour) AS first_hour, min_by(tags, hour) AS tags \
               FROM gl_split WHERE kept GROUP BY arn, parent, tag_key)"
            .into()
    }

    /// The pods as CUR-shaped rows, in pod-number order, one file.
    fn write_pods(&self, folder: &str) -> String {
        format!(
            "INSERT OVERWRITE DIRECTORY {folder} USING parquet \
             SELECT /*+ REPARTITION(1) */ k AS gl_pod_key, 'Usage' AS {line_type}, 'EKSPod-EC2' AS {operation}, \
               '' AS {product}, arn AS {resource_id}, 0D AS {unblended}, 0D AS {usage}, \
               timestamp_seconds(first_hour) AS {start}, '' AS {usage_type}, tags AS {tags}, \
               parent AS {parent} \
             FROM gl_pods SORT BY k",
            line_type = Col::LineItemLineItemType.name(),
            operation = Col::LineItemOperation.name(),
            product = Col::LineItemProductCode.name(),
            resource_id = Col::LineItemResourceId.name(),
            unblended = Col::LineItemUnblendedCost.name(),
            usage = Col::LineItemUsageAmount.name(),
            start = Col::LineItemUsageStartDate.name(),
            usage_type = Col::LineItemUsageType.name(),
            tags = Col::ResourceTags.name(),
            parent = Col::SplitLineItemParentResourceId.name(),
        )
    }

    /// Per pod number and hour, each resource's usage and nano-dollar costs.
    fn write_pod_hours(&self, folder: &str) -> String {
        let costs = [
            ("split", "coalesce(split_cost, 0D)".to_string()),
            ("unused", "coalesce(unused_cost, 0D)".to_string()),
            // Net costs only when present and positive, else gross (CID rule, as locally).
            (
                "net_split",
                "CASE WHEN net_split > 0D THEN net_split ELSE coalesce(split_cost, 0D) END".to_string(),
            ),
            (
                "net_unused",
                "CASE WHEN net_unused > 0D THEN net_unused ELSE coalesce(unused_cost, 0D) END".to_string(),
            ),
            ("public_split", "coalesce(public_split, 0D)".to_string()),
            ("public_unused", "coalesce(public_unused, 0D)".to_string()),
        ];
        let mut sums = Vec::new();
        for resource in RESOURCES {
            let r = resource.as_str();
            sums.push(format!("sum(CASE WHEN s.resource = '{r}' THEN coalesce(usage, 0D) END) AS {r}_usage"));
            for (name, dollars) in &costs {
                sums.push(format!(
                    "sum(CASE WHEN s.resource = '{r}' THEN {} END) AS {r}_{name}",
                    nanos(dollars)
                ));
            }
        }
        format!(
            "INSERT OVERWRITE DIRECTORY {folder} USING parquet \
             SELECT p.k AS gl_pod_key, s.hour AS hour, {sums} \
             FROM gl_split s JOIN gl_pods p \
               ON s.arn = p.arn AND s.parent = p.parent AND s.tag_key <=> p.tag_key \
             WHERE s.kept GROUP BY p.k, s.hour",
            sums = sums.join(", "),
        )
    }

    /// Every line but the split rows, the columns gpuledger reads, in the export's order.
    fn write_lines(&self, folder: &str) -> String {
        // A column some file lacks is null there, typed as in the first file that has it.
        let mut types: BTreeMap<&str, &str> = BTreeMap::new();
        for file in self.files {
            for name in COLUMN_NAMES {
                if let Some(t) = file.columns.get(name) {
                    types.entry(name).or_insert(t.as_str());
                }
            }
        }
        let columns: Vec<&str> = COLUMN_NAMES.iter().copied().filter(|c| types.contains_key(c)).collect();
        let selects: Vec<String> = self
            .files
            .iter()
            .enumerate()
            .map(|(index, f)| {
                let projected: Vec<String> = columns
                    .iter()
                    .map(|c| match f.columns.get(*c) {
                        Some(t) if t == types[c] => c.to_string(),
                        Some(_) => format!("CAST({c} AS {}) AS {c}", types[c]),
                        None => format!("CAST(NULL AS {}) AS {c}", types[c]),
                    })
                    .collect();
                format!(
                    "SELECT {projected}, {index} AS gl_file_index, _metadata.row_index AS gl_row_index \
                     FROM parquet.`{uri}` \
                     WHERE {operation} IS NULL OR {operation} NOT IN {SPLIT_OPERATIONS}",
                    projected = projected.join(", "),
                    uri = f.uri,
                    operation = Col::LineItemOperation.name(),
                )
            })
            .collect();
        format!(
            "INSERT OVERWRITE DIRECTORY {folder} USING parquet \
             SELECT /*+ REPARTITION(1) */ * FROM ({union}) SORT BY gl_file_index, gl_row_index",
            union = selects.join(" UNION ALL "),
        )
    }
}

/// The first refused row the checks found, named by file (Spark does not number rows), or
/// the split rows read and skipped.
fn refuse_bad_rows(period: Period, checks: &[Row]) -> Result<(u64, u64), SourceError> {
    let (mut rows, mut skipped) = (0u64, 0u64);
    for check in checks {
        let file = text(check, 0).unwrap_or("");
        let count = |index: usize| integer(check, index);
        let problem = if count(3) > 0 {
            Some(format!("{} split rows have an amount that is not a number", count(3)))
        } else if count(4) > 0 {
            Some(format!(
                "{} split rows have a non-finite amount or one beyond any plausible amount (±1e9)",
                count(4)
            ))
        } else if count(5) > 0 {
            Some(format!("{} split rows have no line_item_usage_start_date", count(5)))
        } else if count(6) > 0 {
            let first =
                chrono::DateTime::from_timestamp(count(7), 0).map(|t| t.to_rfc3339()).unwrap_or_default();
            Some(format!(
                "{} split rows start outside the billing period {period} (the first at {first})",
                count(6)
            ))
        } else if count(8) > 0 {
            Some(format!(
                "{} split rows span more than an hour (up to {} hours): this is not an hourly export \
                 (create the CUR 2.0 export with time granularity HOURLY)",
                count(8),
                count(9) as f64 / 3600.0
            ))
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(invalid(file, problem));
        }
        rows += count(1) as u64;
        skipped += count(2) as u64;
    }
    Ok((rows, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(columns: &[(&str, &str)]) -> FileSchema {
        FileSchema {
            uri: "/x/a.parquet".into(),
            location: "a.parquet".into(),
            columns: columns.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect(),
        }
    }

    #[test]
    fn columns_are_read_by_their_type() {
        let f = schema(&[
            ("split_line_item_split_cost", "double"),
            ("split_line_item_unused_cost", "string"),
            ("line_item_usage_start_date", "timestamp"),
            ("line_item_usage_end_date", "bigint"),
            ("resource_tags", "array<struct<key:string,value:string>>"),
        ]);
        assert_eq!(f.number(Col::SplitLineItemSplitCost), "split_line_item_split_cost");
        assert_eq!(
            f.number(Col::SplitLineItemUnusedCost),
            "try_cast(nullif(trim(split_line_item_unused_cost), '') AS DOUBLE)"
        );
        assert_eq!(f.number(Col::SplitLineItemNetSplitCost), "CAST(NULL AS DOUBLE)");
        assert_eq!(f.epoch_seconds(Col::LineItemUsageEndDate), "floor(line_item_usage_end_date / 1000)");
        assert!(f.tags().starts_with("coalesce(map_from_entries(resource_tags)"));
        let aws = schema(&[("resource_tags", "map<string,string>")]);
        assert!(aws.tags().starts_with("coalesce(resource_tags,"));
    }

    #[test]
    fn a_token_is_added_to_the_url_only() {
        let options = |remote: &str, token: Option<&str>| SparkOptions {
            remote: remote.into(),
            token: token.map(str::to_string),
            ..SparkOptions::default()
        };
        assert_eq!(options("sc://h:15002", Some("t")).url(), "sc://h:15002/;token=t");
        assert_eq!(
            options("sc://h:15002/;use_ssl=true", Some("t")).url(),
            "sc://h:15002/;use_ssl=true;token=t"
        );
        assert_eq!(options("sc://h:15002", None).url(), "sc://h:15002");
        let with_token = options("sc://h:15002", Some("s3cr3t"));
        assert_eq!(
            with_token.redact("bad URL 'sc://h:15002/;token=s3cr3t'"),
            "bad URL 'sc://h:15002/;token=[token]'"
        );
    }

    #[tokio::test]
    async fn a_url_the_client_refuses_is_reported_without_the_token() {
        // The client quotes the whole URL when its port is not a number.
        let options = SparkOptions {
            remote: "sc://h:port".into(),
            token: Some("s3cr3t".into()),
            ..SparkOptions::default()
        };
        let period: Period = "2026-10".parse().unwrap();
        let error = tokio::task::spawn_blocking(move || {
            let out = SparkOutput::Folder { dir: "/nonexistent".into(), remove: false };
            run(&options, period, &[], &out, &indicatif::ProgressBar::hidden()).unwrap_err().to_string()
        })
        .await
        .unwrap();
        assert!(error.contains("sc://h:port"), "{error}");
        assert!(!error.contains("s3cr3t"), "{error}");
    }

    #[test]
    fn s3_uris_take_the_scheme_asked_for() {
        assert_eq!(spark_uri("s3://b/k/a.parquet", Some("s3a")), "s3a://b/k/a.parquet");
        assert_eq!(spark_uri("s3://b/k/a.parquet", None), "s3://b/k/a.parquet");
        assert_eq!(spark_uri("/data/a.parquet", Some("s3a")), "/data/a.parquet");
        assert!(quote_path("/a`b").is_err());
    }

    #[test]
    fn the_first_refused_kind_names_its_file() {
        let period: Period = "2026-10".parse().unwrap();
        let fields: Vec<String> = (0..10).map(|i| format!("c{i}")).collect();
        let row = |counts: [i64; 9]| {
            let mut values = vec![Value::String("data/x.parquet".into())];
            values.extend(counts.iter().map(|c| Value::Long(*c)));
            Row::new(fields.clone(), values)
        };
        let fine = row([10, 2, 0, 0, 0, 0, 0, 0, 3600]);
        assert_eq!(refuse_bad_rows(period, &[fine.clone(), fine]).unwrap(), (20, 4));
        let outside = row([10, 2, 0, 0, 0, 3, period.end(), 0, 3600]);
        let error = refuse_bad_rows(period, &[outside]).unwrap_err().to_string();
        assert!(
            error.starts_with("data/x.parquet: 3 split rows start outside the billing period 2026-10"),
            "{error}"
        );
        assert!(error.contains("2026-11-01T00:00:00+00:00"), "{error}");
    }
}
