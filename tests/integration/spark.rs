//! The CUR aggregation pushed down to a real Apache Spark 4 Connect server (`local[2]`, the
//! runtime pyspark ships, Java 17): the same export ingested with `--engine spark` stores the
//! same period as the local reader, to the micro-dollar: every instance-hour, other cost, bill
//! line and day, every workload's and pod's cost, the reconciliation, and every computed
//! rollup the pages and reports read.
//!
//! `scripts/test` installs pyspark into its virtual environment and names it in
//! `GPULEDGER_SPARK_HOME`; without it, or without Java, the test says so and is skipped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpuledger::ingest::{self, CurIngestOptions};
use gpuledger::period::Period;
use gpuledger::sources::spark::SparkOptions;
use gpuledger::store::Store;
use gpuledger::synth::{CurFormat, Scale};

use crate::ingest_cur::{export_root, generate};
use crate::s3::free_port;

/// A Spark Connect server on a free loopback port, stopped when dropped.
pub struct SparkServer {
    child: Child,
    pub url: String,
    _logs: tempfile::TempDir,
}

impl Drop for SparkServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spark_home() -> Option<PathBuf> {
    let home = PathBuf::from(std::env::var("GPULEDGER_SPARK_HOME").ok()?);
    home.join("bin/spark-submit").is_file().then_some(home)
}

/// Starts a Spark Connect server, or returns `None` (test skipped, with the reason) when
/// pyspark or Java is not installed.
pub fn start_spark() -> Option<SparkServer> {
    let Some(home) = spark_home() else {
        eprintln!("GPULEDGER_SPARK_HOME is not set: Spark test skipped (scripts/test installs pyspark)");
        return None;
    };
    if Command::new("java").arg("-version").output().map_or(true, |o| !o.status.success()) {
        eprintln!("no Java runtime: Spark test skipped (scripts/test installs Java 17 where it can)");
        return None;
    }
    let port = free_port();
    let logs = tempfile::tempdir().unwrap();
    let log = std::fs::File::create(logs.path().join("spark.log")).unwrap();
    let child = Command::new(home.join("bin/spark-submit"))
        .args([
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--master",
            "local[2]",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            &format!("spark.connect.grpc.binding.port={port}"),
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            &format!("spark.local.dir={}", logs.path().display()),
        ])
        .env("SPARK_HOME", &home)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let server = SparkServer { child, url: format!("sc://127.0.0.1:{port}"), _logs: logs };
    let deadline = Instant::now() + Duration::from_secs(240);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the Spark Connect server did not start on port {port}");
        std::thread::sleep(Duration::from_millis(250));
    }
    Some(server)
}

async fn sqlite(path: &Path) -> Box<dyn Store> {
    crate::helpers::connect(&format!("sqlite:{}", path.display())).await
}

/// Ingests `source` into `store`, locally or on Spark, then computes every period.
async fn ingest_and_compute(
    store: &dyn Store,
    source: &Path,
    spark: Option<&SparkServer>,
    output: Option<&Path>,
) -> Vec<ingest::PeriodResult> {
    let options = CurIngestOptions {
        source: source.display().to_string(),
        spark: spark.map(|s| SparkOptions {
            remote: s.url.clone(),
            output: output.map(|folder| folder.display().to_string()),
            ..SparkOptions::default()
        }),
        ..Default::default()
    };
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
    let results = ingest::ingest_cur(store, &options, &progress).await.expect("ingest");
    let periods: Vec<Period> = results.iter().map(|r| r.period.parse().unwrap()).collect();
    gpuledger::pipeline::compute(store, &periods).await.expect("compute");
    results
}

/// Everything stored of a period, and everything computed from it, as text to compare
/// (the compute's own timestamp left out).
async fn stored(store: &dyn Store, period: &str) -> Vec<(String, String)> {
    let mut parts = Vec::new();
    parts.push(("bill".into(), format!("{:?}", store.cost_period(period).await.unwrap())));
    let workloads = store.workload_costs(period).await.unwrap();
    let p: Period = period.parse().unwrap();
    let mut pods = Vec::new();
    for w in &workloads {
        let mut of = store.pod_costs(period, &w.namespace, &w.workload, p.start(), p.end()).await.unwrap();
        of.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        pods.push(format!("{of:?}"));
    }
    parts.push(("workloads".into(), format!("{workloads:?}")));
    parts.push(("pods".into(), pods.join("\n")));
    let mut rollups = store.rollups(period).await.unwrap().expect("computed");
    rollups.period.computed_at = 0;
    parts.push(("rollups".into(), format!("{rollups:?}")));
    parts
}

async fn assert_same(local: &dyn Store, pushed: &dyn Store, period: &str) {
    for ((what, a), (_, b)) in stored(local, period).await.into_iter().zip(stored(pushed, period).await) {
        assert!(!a.is_empty());
        if a != b {
            let at = a.bytes().zip(b.bytes()).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
            let from = at.saturating_sub(300);
            panic!(
                "{period} {what} differs at byte {at}:\nlocal: {}\nspark: {}",
                &a[from..(at + 300).min(a.len())],
                &b[from..(at + 300).min(b.len())]
            );
        }
    }
}

/// One server for both checks (it takes 15–30 s to start).
#[tokio::test]
async fn spark_pushdown_stores_what_the_local_reader_stores_and_refuses_bad_rows() {
    let Some(spark) = start_spark() else { return };
    the_same_periods(&spark).await;
    a_split_row_outside_the_period_is_refused(&spark).await;
}

/// Each export ingested locally and on Spark stores and computes the same.
async fn the_same_periods(spark: &SparkServer) {
    let dir = tempfile::tempdir().unwrap();
    // Two demo months: September without net_* columns, October with a discount, a credit,
    // a refund, a pod-less instance, tagged storage and short-lived Jobs.
    generate(dir.path(), Scale::Demo, CurFormat::Parquet, 2, 11);
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/aws-parquet-map/gpuledger-cur2");
    // The generator's list<struct> tag columns, and AWS's MAP columns.
    for (name, source) in [("generated", export_root(dir.path())), ("aws-map", fixture)] {
        let local = sqlite(&dir.path().join(format!("{name}-local.db"))).await;
        let pushed = sqlite(&dir.path().join(format!("{name}-spark.db"))).await;
        // The AWS fixture's output goes to a folder given with --spark-output (a shared file
        // system's), the generated export's to the ingest's scratch folder.
        let shared = dir.path().join(format!("{name}-shared"));
        std::fs::create_dir_all(&shared).unwrap();
        let output = (name == "aws-map").then_some(shared.as_path());
        let here = ingest_and_compute(local.as_ref(), &source, None, None).await;
        let there = ingest_and_compute(pushed.as_ref(), &source, Some(spark), output).await;
        let left: Vec<_> = std::fs::read_dir(&shared).unwrap().collect();
        assert!(left.is_empty(), "{name}: each run's output folder is removed once read: {left:?}");
        assert_eq!(here.len(), there.len(), "{name}: same periods");
        for (a, b) in here.iter().zip(&there) {
            let (ra, rb) = (a.reconciliation.as_ref().unwrap(), b.reconciliation.as_ref().unwrap());
            assert!(ra.split_rows > 0, "{name} {}: the export has split rows", a.period);
            assert_eq!(
                serde_json::to_string(ra).unwrap(),
                serde_json::to_string(rb).unwrap(),
                "{name} {}: the reconciliation",
                a.period
            );
            assert_same(local.as_ref(), pushed.as_ref(), &a.period).await;
        }
    }
}

/// A split row outside the billing period is refused by the Spark job's checks, naming the
/// file, and nothing is written.
async fn a_split_row_outside_the_period_is_refused(spark: &SparkServer) {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), Scale::Demo, CurFormat::Parquet, 1, 12);
    let store = sqlite(&dir.path().join("ledger.db")).await;
    let before = crate::ingest_cur::snapshot(store.as_ref()).await;
    // Shift one split row a month later with polars: the file is still a valid export.
    let data = export_root(dir.path()).join("data/BILLING_PERIOD=2026-10");
    let file = std::fs::read_dir(&data).unwrap().flatten().map(|e| e.path()).next().unwrap();
    shift_first_split_row(&file, 31 * 86_400);
    let options = CurIngestOptions {
        source: export_root(dir.path()).display().to_string(),
        spark: Some(SparkOptions { remote: spark.url.clone(), ..SparkOptions::default() }),
        ..Default::default()
    };
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
    let error = ingest::ingest_cur(store.as_ref(), &options, &progress).await.unwrap_err().to_string();
    assert!(error.contains("1 split rows start outside the billing period 2026-10"), "{error}");
    assert!(error.contains(&file.display().to_string()), "names the file: {error}");
    assert_eq!(crate::ingest_cur::snapshot(store.as_ref()).await, before, "nothing written");
}

/// Moves the first split row's start and end by `seconds`.
fn shift_first_split_row(path: &Path, seconds: i64) {
    use polars::prelude::*;
    let mut frame = ParquetReader::new(std::fs::File::open(path).unwrap()).finish().unwrap();
    let operations: Vec<Option<String>> = frame
        .column("line_item_operation")
        .unwrap()
        .cast(&DataType::String)
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .map(|v| v.map(str::to_string))
        .collect();
    let row = operations.iter().position(|o| o.as_deref() == Some("EKSPod-EC2")).expect("a split row");
    for name in ["line_item_usage_start_date", "line_item_usage_end_date"] {
        let column = frame.column(name).unwrap().clone();
        let dtype = column.dtype().clone();
        let DataType::Datetime(unit, _) = &dtype else { panic!("{name} is {dtype:?}") };
        let per_second = match unit {
            TimeUnit::Milliseconds => 1_000,
            TimeUnit::Microseconds => 1_000_000,
            TimeUnit::Nanoseconds => 1_000_000_000,
        };
        let values: Vec<Option<i64>> = column
            .cast(&DataType::Int64)
            .unwrap()
            .i64()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, v)| if i == row { v.map(|v| v + seconds * per_second) } else { v })
            .collect();
        let shifted = Series::new(name.into(), values).cast(&dtype).unwrap();
        frame.replace(name, shifted.into()).unwrap();
    }
    ParquetWriter::new(std::fs::File::create(path).unwrap()).finish(&mut frame).unwrap();
}

/// A CSV export is refused before Spark is asked anything (no server needed), and nothing is
/// written.
#[tokio::test]
async fn a_csv_export_is_refused_by_the_spark_engine() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), Scale::Demo, CurFormat::Csv, 1, 12);
    let store = sqlite(&dir.path().join("ledger.db")).await;
    let before = crate::ingest_cur::snapshot(store.as_ref()).await;
    let options = CurIngestOptions {
        source: export_root(dir.path()).display().to_string(),
        spark: Some(SparkOptions { remote: "sc://127.0.0.1:9".into(), ..SparkOptions::default() }),
        ..Default::default()
    };
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
    let error = ingest::ingest_cur(store.as_ref(), &options, &progress).await.unwrap_err().to_string();
    assert!(error.contains(".csv.gz: the Spark engine reads Parquet exports only"), "{error}");
    assert_eq!(crate::ingest_cur::snapshot(store.as_ref()).await, before, "nothing written");
}
