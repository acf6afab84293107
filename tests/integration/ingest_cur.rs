//! CUR ingest end to end: generated exports go in through the real readers and come out of
//! the store matching `truth.json`; re-deliveries replace, repeats change nothing, and every
//! kind of bad input fails with a message naming the file and leaves the database as it was.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpuledger::ingest::{self, CurIngestOptions};
use gpuledger::period::Period;
use gpuledger::report::NamespaceReport;
use gpuledger::store::Store;
use gpuledger::synth::{self, CurFormat, GenerateOptions, Scale};
use serde_json::Value;

use crate::helpers;

pub const EXPORT: &str = "test-export";

/// Generates `months` months ending 2026-10 into `out`, CUR only.
pub fn generate(out: &Path, scale: Scale, format: CurFormat, months: u32, seed: u64) {
    generate_with(out, scale, format, months, seed, false);
}

/// Generates `months` months ending 2026-10 into `out`, with the metrics files when `metrics`.
pub fn generate_with(out: &Path, scale: Scale, format: CurFormat, months: u32, seed: u64, metrics: bool) {
    let options = GenerateOptions {
        out: out.to_path_buf(),
        seed,
        months,
        end: "2026-10".parse::<Period>().unwrap(),
        scale,
        format,
        bucket: "test-bucket".into(),
        prefix: "cur".into(),
        export_name: EXPORT.into(),
        metrics,
        fixes_from: None,
        history_months: 2,
        through_day: None,
        fleet_percent: 100,
        kube_state_metrics: false,
        cloud_kube_from: None,
        focus: false,
        providers: vec![gpuledger::synth::clouds::Provider::Aws],
        without_cur_split: Vec::new(),
        sub_account: None,
        azure_machine_column: Default::default(),
        growth: false,
        hold_back: 0,
    };
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
    synth::generate(&options, &progress).expect("generate");
}

pub fn export_root(out: &Path) -> PathBuf {
    out.join("cur").join(EXPORT)
}

pub fn truth(out: &Path, period: &str) -> Value {
    let text = std::fs::read_to_string(out.join("truth.json")).unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["periods"][period].clone()
}

pub async fn ingest(store: &dyn Store, source: &str, force: bool) -> Vec<ingest::PeriodResult> {
    let options = CurIngestOptions { source: source.into(), force, ..Default::default() };
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
    ingest::ingest_cur(store, &options, &progress).await.expect("ingest")
}

/// Checks a stored period against truth: every namespace within a cent, the bill to the
/// micro-dollar, and Kubernetes + other = bill exactly.
pub async fn assert_matches_truth(store: &dyn Store, truth: &Value, period: &str) {
    let report = NamespaceReport::load(store, period.parse().unwrap(), None, false).await.unwrap();
    let json = report.to_json();
    let namespaces = truth["namespaces"].as_object().unwrap();
    assert_eq!(json["rows"].as_array().unwrap().len(), namespaces.len(), "{period}: same namespaces");
    for row in json["rows"].as_array().unwrap() {
        let expected = &namespaces[row["namespace"].as_str().unwrap()];
        for field in
            ["split_cost", "unused_cost", "total_cost", "net_total_cost", "public_on_demand_total_cost"]
        {
            let got = row[field].as_f64().unwrap();
            let want = expected[field].as_f64().unwrap();
            assert!(
                (got - want).abs() < 0.01,
                "{period} {} {field}: {got} vs truth {want}",
                row["namespace"]
            );
        }
    }
    for (field, truth_field) in
        [("bill_unblended_total", "bill_unblended"), ("bill_amortized_total", "bill_amortized")]
    {
        let got = json[field].as_f64().unwrap();
        let want = truth[truth_field].as_f64().unwrap();
        assert!((got - want).abs() < 1e-6, "{period} {field}: {got} vs truth {want}");
    }
    let kubernetes = json["kubernetes_total"].as_f64().unwrap();
    assert!((kubernetes - truth["kubernetes_allocated_cost"].as_f64().unwrap()).abs() < 0.01);
    // Kubernetes + EC2 not allocated to pods + other cost = the bill, to the micro-dollar.
    assert_eq!(
        report.kubernetes_total_micros() + report.unallocated_ec2_micros + report.other_cost_micros(),
        report.bill_amortized_micros,
        "{period}: Kubernetes + unallocated EC2 + other = bill"
    );
    // The rows as printed add up too: rounded so that they sum to the Kubernetes total.
    let rows: i64 = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["total_cost"].as_f64().unwrap() * 1e6).round() as i64)
        .sum();
    assert_eq!(rows, report.kubernetes_total_micros(), "{period}: printed rows add up");
    assert_bill_matches_truth(store, truth, period).await;
}

/// Dollars of a decimal-string amount, as micro-dollars.
pub fn micros(value: &Value) -> i64 {
    let text = value.as_str().unwrap_or_else(|| panic!("{value} is not a decimal string"));
    let (whole, fraction) = text.split_once('.').unwrap_or((text, "0"));
    let negative = whole.starts_with('-');
    let magnitude = whole.trim_start_matches('-').parse::<i64>().unwrap() * 1_000_000
        + format!("{fraction:0<6}")[..6].parse::<i64>().unwrap();
    if negative { -magnitude } else { magnitude }
}

/// `report bill` against truth: every dollar placed (Kubernetes, unallocated EC2, other) to
/// the cent and adding up exactly; discounts, credits, refunds, tax and the net bill to the
/// cent; each client's tagged non-Kubernetes cost and each cluster's unclaimed cost.
pub async fn assert_bill_matches_truth(store: &dyn Store, truth: &Value, period: &str) {
    let report =
        gpuledger::report::bill::BillReport::load(store, period.parse().unwrap(), None).await.unwrap();
    let bill = report.to_json();
    let close = |got: i64, want: &Value, what: &str| {
        let want = want.as_f64().unwrap_or_else(|| panic!("{period}: truth has no {what}"));
        assert!((got as f64 / 1e6 - want).abs() < 0.01, "{period} {what}: {got} µ$ vs truth {want}");
    };
    close(micros(&bill["kubernetes_cost"]), &truth["kubernetes_allocated_cost"], "Kubernetes cost");
    close(micros(&bill["unallocated_ec2_cost"]), &truth["unallocated_ec2_cost"], "unallocated EC2");
    close(micros(&bill["other_cost"]), &truth["other_cost"], "other cost");
    close(micros(&bill["amortized_total"]), &truth["bill_amortized"], "amortized bill");
    close(micros(&bill["unblended_total"]), &truth["bill_unblended"], "unblended bill");
    assert_eq!(
        micros(&bill["kubernetes_cost"])
            + micros(&bill["unallocated_ec2_cost"])
            + micros(&bill["other_cost"]),
        micros(&bill["amortized_total"]),
        "{period}: Kubernetes + unallocated EC2 + other = amortized, exactly"
    );
    let other_by_service: i64 =
        bill["other_by_service"].as_array().unwrap().iter().map(|r| micros(&r["amount"])).sum();
    assert_eq!(other_by_service, micros(&bill["other_cost"]), "{period}: other cost by service adds up");
    let step = |name: &str| {
        let found = bill["bridge"].as_array().unwrap().iter().find(|s| s["step"] == name);
        micros(&found.unwrap_or_else(|| panic!("{period}: no bridge step {name}"))["amount"])
    };
    let adjustments = &truth["adjustments"];
    close(step("Discounts"), &adjustments["discounts"], "discounts");
    close(step("Credits"), &adjustments["credits"], "credits");
    close(step("Refunds"), &adjustments["refunds"], "refunds");
    close(step("Tax"), &adjustments["tax"], "tax");
    assert_eq!(step("Amortized cost"), micros(&bill["amortized_total"]));
    // The bridge's last line is the invoice: amortized equals unblended for no-upfront plans.
    close(step("Net amortized cost with tax"), &truth["bill_unblended"], "invoice total");
    match truth["net_amortized"].as_f64() {
        Some(_) => {
            close(micros(&bill["net_amortized_total"]), &truth["net_amortized"], "net amortized");
            close(step("Net amortized cost"), &truth["net_amortized"], "net amortized (bridge)");
        }
        None => assert!(bill["net_amortized_total"].is_null(), "{period}: no net columns, no net total"),
    }
    // Tagged non-Kubernetes cost: per client, and per cluster for what no client claims.
    let stored = store.bill(period).await.unwrap().unwrap();
    let mut by_client: std::collections::BTreeMap<String, i64> = Default::default();
    let mut by_cluster: std::collections::BTreeMap<String, i64> = Default::default();
    for cost in &stored.other_costs {
        let tags: Value = serde_json::from_str(&cost.tags).unwrap();
        match tags["user_client"].as_str() {
            Some(client) => *by_client.entry(client.to_string()).or_default() += cost.amortized_cost_micros,
            None if !cost.cluster.is_empty() => {
                *by_cluster.entry(cost.cluster.clone()).or_default() += cost.amortized_cost_micros
            }
            None => {}
        }
    }
    let clients = truth["non_kubernetes_by_client"].as_object().unwrap();
    assert_eq!(by_client.len(), clients.len(), "{period}: clients with tagged cost");
    for (client, expected) in clients {
        close(by_client[client], &expected["total"], &format!("{client}'s tagged cost"));
    }
    let clusters = truth["cluster_shared_cost"].as_object().unwrap();
    assert_eq!(by_cluster.len(), clusters.len(), "{period}: clusters with unclaimed cost");
    for (cluster, expected) in clusters {
        close(by_cluster[cluster], expected, &format!("{cluster}'s unclaimed cost"));
    }
}

/// The data the store holds, for "nothing changed" checks: periods, their bills and the data
/// revision (which any write raises). The run log is not data: a failed run is recorded there.
pub async fn snapshot(store: &dyn Store) -> String {
    let mut text =
        format!("{:?}\nrevision {}\n", store.periods().await.unwrap(), store.data_revision().await.unwrap());
    for period in store.periods().await.unwrap() {
        text.push_str(&format!("{:?}\n", store.cost_period(&period.period).await.unwrap()));
    }
    text
}

async fn sqlite(dir: &Path) -> Box<dyn Store> {
    crate::helpers::connect(&format!("sqlite:{}", dir.join("ledger.db").display())).await
}

#[tokio::test]
async fn demo_parquet_matches_truth_on_sqlite_and_postgres() {
    let dir = tempfile::tempdir().unwrap();
    // September has no discount (no net_* columns), October has one.
    generate(dir.path(), Scale::Demo, CurFormat::Parquet, 2, 11);
    let source = export_root(dir.path()).display().to_string();
    let mut stores: Vec<Box<dyn Store>> = vec![sqlite(dir.path()).await];
    let postgres = helpers::fresh_postgres().await;
    if let Some(database) = &postgres {
        stores.push(crate::helpers::connect(&database.url).await);
    }
    for store in &stores {
        let results = ingest(store.as_ref(), &source, false).await;
        assert_eq!(results.len(), 2);
        for result in &results {
            let reconciliation = result.reconciliation.as_ref().unwrap();
            assert!(reconciliation.split_matches_parents, "{}: {reconciliation:?}", result.period);
            assert_eq!(
                reconciliation.rows_read,
                truth(dir.path(), &result.period)["cur_rows"].as_u64().unwrap(),
                "every row of the files was read"
            );
            assert_matches_truth(store.as_ref(), &truth(dir.path(), &result.period), &result.period).await;
        }
    }
}

#[tokio::test]
async fn demo_csv_matches_truth() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), Scale::Demo, CurFormat::Csv, 1, 12);
    let store = sqlite(dir.path()).await;
    ingest(store.as_ref(), &export_root(dir.path()).display().to_string(), false).await;
    assert_matches_truth(store.as_ref(), &truth(dir.path(), "2026-10"), "2026-10").await;
}

#[tokio::test]
async fn small_parquet_matches_truth() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), Scale::Small, CurFormat::Parquet, 1, 13);
    let store = sqlite(dir.path()).await;
    // A billing-period folder as SOURCE limits the ingest to that period.
    let period_folder = export_root(dir.path()).join("data").join("BILLING_PERIOD=2026-10");
    let results = ingest(store.as_ref(), &period_folder.display().to_string(), false).await;
    assert_eq!(results.len(), 1);
    assert_matches_truth(store.as_ref(), &truth(dir.path(), "2026-10"), "2026-10").await;
}

#[tokio::test]
async fn only_the_files_the_manifest_lists_count() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), Scale::Demo, CurFormat::Parquet, 1, 17);
    let export = export_root(dir.path());
    let data = export.join("data/BILLING_PERIOD=2026-10");
    // A CREATE_NEW folder left by an earlier refresh: a full second copy of the month.
    let stale = data.join("2026-10-28T23:48:02.356Z-9b6b32ef-2b70-3d10-9448-07e23ebce6b9");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::copy(
        data.join(format!("{EXPORT}-00001.snappy.parquet")),
        stale.join(format!("{EXPORT}-00001.snappy.parquet")),
    )
    .unwrap();
    // An OVERWRITE refresh that needed fewer chunks blanks the extra one; its manifest no
    // longer lists it (a listed empty file is refused: see `a_zero_byte_data_file_is_refused`).
    std::fs::write(data.join(format!("{EXPORT}-00002.snappy.parquet")), b"").unwrap();

    let store = sqlite(dir.path()).await;
    let results = ingest(store.as_ref(), &export.display().to_string(), false).await;
    let truth = truth(dir.path(), "2026-10");
    assert_eq!(results[0].reconciliation.as_ref().unwrap().rows_read, truth["cur_rows"].as_u64().unwrap());
    assert_matches_truth(store.as_ref(), &truth, "2026-10").await;
}

#[tokio::test]
async fn repeats_change_nothing_and_unchanged_versions_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), Scale::Demo, CurFormat::Parquet, 1, 14);
    let store = sqlite(dir.path()).await;
    let source = export_root(dir.path()).display().to_string();
    ingest(store.as_ref(), &source, false).await;
    let first = store.cost_period("2026-10").await.unwrap().unwrap();
    let again = ingest(store.as_ref(), &source, false).await;
    assert_eq!(again[0].status, "skipped");
    assert_eq!(store.ingest_runs(10).await.unwrap().len(), 1, "a skipped period records no run");
    let forced = ingest(store.as_ref(), &source, true).await;
    assert_eq!(forced[0].status, "ingested");
    let second = store.cost_period("2026-10").await.unwrap().unwrap();
    assert_eq!(first, second, "ingesting the same export twice leaves identical data");
    assert_eq!(store.periods().await.unwrap().len(), 1);
}

/// On Postgres the period's tables are partitioned by period: a redelivery swaps in new
/// partitions (new relations) and leaves no staged table behind.
#[tokio::test]
async fn a_redelivery_with_different_numbers_replaces_the_period() {
    let dir = tempfile::tempdir().unwrap();
    let postgres = helpers::fresh_postgres().await;
    let mut stores: Vec<Box<dyn Store>> = vec![sqlite(dir.path()).await];
    if let Some(database) = &postgres {
        stores.push(crate::helpers::connect(&database.url).await);
    }
    let source = export_root(dir.path()).display().to_string();
    generate(dir.path(), Scale::Demo, CurFormat::Parquet, 1, 15);
    let before = truth(dir.path(), "2026-10");
    for store in &stores {
        ingest(store.as_ref(), &source, false).await;
        assert_matches_truth(store.as_ref(), &before, "2026-10").await;
    }
    let partitions_before = match &postgres {
        Some(database) => partitions(&database.url).await,
        None => Vec::new(),
    };
    // AWS re-delivers the month: a new execution with different numbers.
    generate(dir.path(), Scale::Demo, CurFormat::Parquet, 1, 16);
    let after = truth(dir.path(), "2026-10");
    assert_ne!(before["bill_amortized"], after["bill_amortized"]);
    for store in &stores {
        let results = ingest(store.as_ref(), &source, false).await;
        assert_eq!(results[0].status, "ingested", "a new executionId is a new data version");
        assert_matches_truth(store.as_ref(), &after, "2026-10").await;
        assert_eq!(store.periods().await.unwrap().len(), 1);
    }
    if let Some(database) = &postgres {
        let partitions_after = partitions(&database.url).await;
        let names = |list: &[(String, String, i64)]| {
            list.iter().map(|(t, p, _)| (t.clone(), p.clone())).collect::<Vec<_>>()
        };
        // One partition of 2026-10 for each of the seven tables, before and after.
        assert_eq!(partitions_before.len(), 7, "{partitions_before:?}");
        assert!(partitions_before.iter().all(|(_, p, _)| p.ends_with("_p2026_10")), "{partitions_before:?}");
        assert_eq!(names(&partitions_after), names(&partitions_before));
        for ((table, _, old), (_, _, new)) in partitions_before.iter().zip(&partitions_after) {
            assert_ne!(old, new, "{table}: the redelivery swapped in a new partition");
        }
        let mut pg = <sqlx::PgConnection as sqlx::Connection>::connect(&database.url).await.unwrap();
        let (staged,): (i64,) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM pg_class WHERE relname LIKE '%\\_next%') \
             + (SELECT COUNT(*) FROM pg_constraint WHERE conname LIKE '%\\_next%')",
        )
        .fetch_one(&mut pg)
        .await
        .unwrap();
        assert_eq!(staged, 0, "no staged table, index or check is left behind under its staging name");
    }
}

/// Each partitioned table's partitions on Postgres: (parent, partition, its oid), by name.
async fn partitions(url: &str) -> Vec<(String, String, i64)> {
    let mut pg = <sqlx::PgConnection as sqlx::Connection>::connect(url).await.unwrap();
    sqlx::query_as(
        "SELECT parent.relname::text, child.relname::text, CAST(child.oid AS BIGINT) FROM pg_inherits i \
         JOIN pg_class parent ON parent.oid = i.inhparent JOIN pg_class child ON child.oid = i.inhrelid \
         WHERE parent.relkind = 'p' ORDER BY 1, 2",
    )
    .fetch_all(&mut pg)
    .await
    .unwrap()
}

// ---- Bad input: through the binary, as a user meets it ----

/// A database holding one good period (2026-09), and the export of 2026-10 to break.
pub struct BadInputCase {
    pub dir: tempfile::TempDir,
    pub database_url: String,
}

impl BadInputCase {
    pub async fn new(format: CurFormat) -> BadInputCase {
        let dir = tempfile::tempdir().unwrap();
        generate(dir.path(), Scale::Demo, format, 2, 21);
        let database_url = format!("sqlite:{}", dir.path().join("ledger.db").display());
        let store = crate::helpers::connect(&database_url).await;
        let options = CurIngestOptions {
            source: export_root(dir.path()).display().to_string(),
            period: Some("2026-09".parse().unwrap()),
            ..Default::default()
        };
        let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
        let job =
            gpuledger::pipeline::ingest_cur_and_compute(store.as_ref(), &options, &progress).await.unwrap();
        assert!(job.failure.is_none() && job.computed.len() == 1, "September ingested and computed");
        BadInputCase { dir, database_url }
    }

    pub fn export(&self) -> PathBuf {
        export_root(self.dir.path())
    }

    pub fn data_file(&self, extension: &str) -> PathBuf {
        self.export().join(format!("data/BILLING_PERIOD=2026-10/{EXPORT}-00001.{extension}"))
    }

    pub fn manifest(&self) -> PathBuf {
        self.export().join(format!("metadata/BILLING_PERIOD=2026-10/{EXPORT}-Manifest.json"))
    }

    /// Runs `gpuledger ingest cur SOURCE` and checks it fails, says `expected`, and leaves
    /// the database exactly as it was.
    pub async fn assert_fails(&self, source: &Path, expected: &[&str]) {
        let store = crate::helpers::connect(&self.database_url).await;
        let before = snapshot(store.as_ref()).await;
        let output =
            run(&["--database-url", &self.database_url, "ingest", "cur", &source.display().to_string()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "the ingest must fail; stderr: {stderr}");
        for text in expected {
            assert!(stderr.contains(text), "stderr should mention {text:?}: {stderr}");
        }
        assert_eq!(before, snapshot(store.as_ref()).await, "the data must be left as it was");
        // The run that failed is recorded as failed, with the same message.
        let run = store.ingest_runs(1).await.unwrap().remove(0);
        assert_eq!((run.kind.as_str(), run.status), ("cur", gpuledger::store::RunStatus::Failed), "{run:?}");
        let error = run.error.unwrap_or_default();
        for text in expected {
            assert!(error.contains(text), "the failed run's error should mention {text:?}: {error}");
        }
    }
}

pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuledger")).args(args).env("RUST_LOG", "warn").output().unwrap()
}

pub fn gunzip(path: &Path) -> String {
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap()),
        &mut text,
    )
    .unwrap();
    text
}

pub fn gzip(path: &Path, text: &str) {
    let mut encoder = flate2::write::GzEncoder::new(std::fs::File::create(path).unwrap(), Default::default());
    std::io::Write::write_all(&mut encoder, text.as_bytes()).unwrap();
    encoder.finish().unwrap();
}

/// Splits a CSV line at commas outside quotes, keeping each field's raw text.
pub fn raw_csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    for ch in line.chars() {
        match ch {
            '"' => {
                quoted = !quoted;
                fields.last_mut().unwrap().push(ch);
            }
            ',' if !quoted => fields.push(String::new()),
            _ => fields.last_mut().unwrap().push(ch),
        }
    }
    fields
}

#[tokio::test]
async fn truncated_parquet_is_refused() {
    let case = BadInputCase::new(CurFormat::Parquet).await;
    let file = case.data_file("snappy.parquet");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    case.assert_fails(&case.export(), &[&format!("{EXPORT}-00001.snappy.parquet"), "Parquet"]).await;
}

#[tokio::test]
async fn gzip_csv_cut_mid_stream_is_refused() {
    let case = BadInputCase::new(CurFormat::Csv).await;
    let file = case.data_file("csv.gz");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() * 2 / 3]).unwrap();
    case.assert_fails(&case.export(), &[&format!("{EXPORT}-00001.csv.gz"), "cut short or corrupt"]).await;
}

#[tokio::test]
async fn csv_missing_a_required_column_is_refused() {
    let case = BadInputCase::new(CurFormat::Csv).await;
    let file = case.data_file("csv.gz");
    let text = gunzip(&file);
    let (header, body) = text.split_once('\n').unwrap();
    gzip(
        &file,
        &format!("{}\n{body}", header.replace("line_item_unblended_cost", "line_item_unblended_kost")),
    );
    case.assert_fails(
        &case.export(),
        &["00001.csv.gz", "required column(s) missing: line_item_unblended_cost"],
    )
    .await;
}

#[tokio::test]
async fn a_manifest_listing_a_missing_file_is_refused() {
    let case = BadInputCase::new(CurFormat::Parquet).await;
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(case.manifest()).unwrap()).unwrap();
    let first = manifest["dataFiles"][0].as_str().unwrap().to_string();
    manifest["dataFiles"].as_array_mut().unwrap().push(Value::String(first.replace("00001", "00002")));
    std::fs::write(case.manifest(), manifest.to_string()).unwrap();
    case.assert_fails(&case.export(), &[&format!("{EXPORT}-00002.snappy.parquet"), "does not exist"]).await;
}

#[tokio::test]
async fn a_manifest_that_is_not_json_is_refused() {
    let case = BadInputCase::new(CurFormat::Parquet).await;
    std::fs::write(case.manifest(), "{\"executionId\": \"x\", dataFiles: [").unwrap();
    case.assert_fails(&case.export(), &[&format!("{EXPORT}-Manifest.json"), "not valid JSON"]).await;
}

#[tokio::test]
async fn a_period_folder_without_a_manifest_is_refused() {
    let case = BadInputCase::new(CurFormat::Parquet).await;
    std::fs::remove_file(case.manifest()).unwrap();
    let period_folder = case.export().join("data/BILLING_PERIOD=2026-10");
    case.assert_fails(&period_folder, &["BILLING_PERIOD=2026-10", "no manifest"]).await;
}

#[tokio::test]
async fn a_malformed_tags_map_is_refused() {
    let case = BadInputCase::new(CurFormat::Csv).await;
    let file = case.data_file("csv.gz");
    // In CSV the map is a JSON object in a quoted field; drop a value's opening quote.
    let broken = gunzip(&file).replacen("\"\"aws_eks_namespace\"\":\"\"", "\"\"aws_eks_namespace\"\":", 1);
    gzip(&file, &broken);
    case.assert_fails(&case.export(), &["00001.csv.gz", "column resource_tags", "not a JSON object"]).await;
}

#[tokio::test]
async fn a_cost_that_is_not_a_number_is_refused() {
    let case = BadInputCase::new(CurFormat::Csv).await;
    let file = case.data_file("csv.gz");
    let text = gunzip(&file);
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let column = lines[0].split(',').position(|c| c == "line_item_unblended_cost").unwrap();
    // The month's last EKS control-plane hour (no map cells that hold commas): by then
    // several batches of facts are already in the open transaction, which must roll back.
    let index = lines.iter().rposition(|l| l.contains("perCluster")).unwrap();
    let mut fields = raw_csv_fields(&lines[index]);
    assert_eq!(fields[column], "0.1", "the control plane costs $0.10 an hour");
    fields[column] = "0.1O".into();
    lines[index] = fields.join(",");
    gzip(&file, &(lines.join("\n") + "\n"));
    case.assert_fails(
        &case.export(),
        &[
            "00001.csv.gz",
            &format!("data row {index}"),
            "line_item_unblended_cost",
            "\"0.1O\" is not a number",
        ],
    )
    .await;
}

/// An EC2 instance type that looks like a GPU instance but is not in the catalog is listed by
/// `report bill` and the Data page with its hours and amortized cost, never counted as CPU
/// without a word; an operator's catalog row names it without a rebuild, and its GPUs join the
/// fleet (issue 70). The generated October's 1-GPU `….xlarge` instances are renamed
/// `….2xlarge` (a real type the built-in catalog lacks).
#[tokio::test]
async fn an_unknown_gpu_instance_type_is_listed_until_an_operators_catalog_names_it() {
    let case = BadInputCase::new(CurFormat::Csv).await;
    let catalog = case.dir.path().join("gpus.csv");
    let gl = |args: &[&str], with_catalog: bool| -> Vec<u8> {
        let mut command = Command::new(env!("CARGO_BIN_EXE_gpuledger"));
        command.arg("--database-url").arg(&case.database_url).args(args).env("RUST_LOG", "warn");
        if with_catalog {
            command.env("GPULEDGER_GPU_CATALOG", &catalog);
        }
        let out = command.output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let export = case.export().display().to_string();
    let fleet = |with_catalog: bool| -> (f64, f64) {
        let report: Value = serde_json::from_slice(&gl(
            &["report", "providers", "--period", "2026-10", "--format", "json"],
            with_catalog,
        ))
        .unwrap();
        let aws = report["rows"].as_array().unwrap().iter().find(|r| r["provider"] == "aws").unwrap().clone();
        (aws["gpu_hours"].as_f64().unwrap(), aws["gpu_fleet_cost"].as_f64().unwrap())
    };
    // October as generated: a 1-GPU type's hours and amortized cost, and the AWS fleet.
    gl(&["ingest", "cur", &export], false);
    let store = crate::helpers::connect(&case.database_url).await;
    let hours = store.usage_hours("2026-10", "2026-10").await.unwrap();
    let known = hours
        .iter()
        .map(|h| h.instance_type.clone())
        .find(|t| t.ends_with(".xlarge") && gpuledger::catalog::gpu_count(t) == 1)
        .expect("a 1-GPU xlarge instance in October");
    let renamed = known.replace(".xlarge", ".2xlarge");
    assert!(gpuledger::catalog::instance_type(&renamed).is_none());
    let model = gpuledger::catalog::instance_type(&known).unwrap().gpu_model;
    std::fs::write(&catalog, format!("provider,name,gpus,gpu_model\naws,{renamed},1,{model}\n")).unwrap();
    let g5: Vec<_> = hours.into_iter().filter(|h| h.instance_type == known).collect();
    let g5_micros: i64 = g5.iter().map(|h| h.amortized_cost_micros).sum();
    let g5_gpu_hours: f64 = g5.iter().map(|h| h.usage_hours).sum();
    assert!(!g5.is_empty() && g5_micros > 0);
    let whole = fleet(false);
    // The same month, its g5.xlarge renamed.
    let folder = case.export().join("data/BILLING_PERIOD=2026-10");
    for file in std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().path()) {
        let text = gunzip(&file);
        gzip(&file, &text.replace(&known, &renamed));
    }
    gl(&["ingest", "cur", "--force", &export], false);
    let bill: Value =
        serde_json::from_slice(&gl(&["report", "bill", "--period", "2026-10", "--format", "json"], false))
            .unwrap();
    let cur = bill["bills"].as_array().unwrap().iter().find(|b| b["format"] == "cur").unwrap();
    assert_eq!(
        cur["unknown_gpu_machines"],
        serde_json::json!([{
            "machine": renamed,
            "charges": g5.len(),
            "effective_total": format!("{}.{:06}", g5_micros / 1_000_000, g5_micros % 1_000_000),
        }]),
        "{cur}"
    );
    let table = String::from_utf8_lossy(&gl(&["report", "bill", "--period", "2026-10"], false)).to_string();
    assert!(table.contains(&format!("unknown GPU machine `{renamed}`")), "{table}");
    let web = gpuledger::web::AppState::new(store, gpuledger::web::AuthConfig::off());
    let (_, page) = crate::web::get(&web, "/data?period=2026-10").await;
    assert!(page.contains(&format!("unknown GPU machine `{renamed}`")), "{page}");
    // Its GPU-hours are out of the fleet, 1 GPU an hour.
    let without = fleet(false);
    assert!((whole.0 - without.0 - g5_gpu_hours).abs() < 1e-6, "{whole:?} {without:?} {g5_gpu_hours}");
    // The operator's catalog names it: the fleet is whole again and nothing is unknown.
    gl(&["ingest", "cur", "--force", &export], true);
    assert_eq!(fleet(true), whole);
    let bill: Value =
        serde_json::from_slice(&gl(&["report", "bill", "--period", "2026-10", "--format", "json"], true))
            .unwrap();
    let cur = bill["bills"].as_array().unwrap().iter().find(|b| b["format"] == "cur").unwrap();
    assert_eq!(cur["unknown_gpu_machines"], serde_json::json!([]), "{cur}");
}

/// The CUR's bill is one of the month's bills (issue 70): its period's replacement writes it
/// among every source's bills, which `report bill`, the Data page and `export focus` read as
/// one list; a re-delivery replaces it, and a ledger stored before is given each period's
/// bill from the ingest that wrote it.
#[tokio::test]
async fn a_cur_bill_is_stored_among_the_months_bills_and_replaced_with_its_period() {
    let case = BadInputCase::new(CurFormat::Csv).await;
    // The rows of September's files, counted by hand: every line but each file's header.
    let folder = case.export().join("data/BILLING_PERIOD=2026-09");
    let rows: i64 = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| gunzip(&e.unwrap().path()).lines().skip(1).filter(|l| !l.is_empty()).count() as i64)
        .sum();
    let store = helpers::connect(&case.database_url).await;
    let want = expected_cur_bill(store.as_ref(), rows).await;
    assert!(want.billed_nanos > 0 && want.source.ends_with("-Manifest.json"), "{want:?}");
    assert_eq!(stored_bills(store.as_ref()).await, vec![want.clone()]);
    // The Data page lists it with the other sources' bills; `report bill` reads it from there.
    let web = gpuledger::web::AppState::new(
        helpers::connect(&case.database_url).await,
        gpuledger::web::AuthConfig::off(),
    );
    let (_, page) = crate::web::get(&web, "/data?period=2026-09").await;
    assert!(
        page.contains("<h2 id=\"bills-heading\">Bills</h2>") && page.contains("<td>CUR 2.0</td>"),
        "{page}"
    );
    let report = run(&[
        "--database-url",
        &case.database_url,
        "report",
        "bill",
        "--period",
        "2026-09",
        "--format",
        "json",
    ]);
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    let cur: Vec<&Value> =
        report["bills"].as_array().unwrap().iter().filter(|b| b["format"] == "cur").collect();
    assert_eq!(cur.len(), 1, "{report}");
    // A re-delivery replaces it: still one CUR bill of September, October's beside it.
    let export = case.export().display().to_string();
    for args in
        [vec!["ingest", "cur", "--force", "--period", "2026-09", &export], vec!["ingest", "cur", &export]]
    {
        let out = run(&[&["--database-url", case.database_url.as_str()], args.as_slice()].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let bills = stored_bills(store.as_ref()).await;
    assert_eq!(
        bills.iter().map(|b| (b.period.as_str(), b.format.as_str())).collect::<Vec<_>>(),
        [("2026-09", "cur"), ("2026-10", "cur")]
    );
    assert_eq!(bills[0], expected_cur_bill(store.as_ref(), rows).await);
    // A ledger whose periods were stored before CUR bills were kept: the migration gives each
    // period its bill, with the rows and location of the ingest that wrote it.
    drop(web);
    let mut db = <sqlx::SqliteConnection as sqlx::Connection>::connect(&case.database_url).await.unwrap();
    for sql in ["DELETE FROM bills", "DELETE FROM schema_migrations WHERE version = 48"] {
        sqlx::query(sql).execute(&mut db).await.unwrap();
    }
    drop(db);
    let migrated = helpers::connect(&case.database_url).await;
    assert_eq!(stored_bills(migrated.as_ref()).await, bills);
}

/// September's CUR bill as its stored period and succeeded run say it is, `rows` read.
async fn expected_cur_bill(store: &dyn Store, rows: i64) -> gpuledger::store::Bill {
    use gpuledger::store::{RunKind, RunStatus};
    let period = store.bill("2026-09").await.unwrap().unwrap();
    let runs = store.ingest_runs(20).await.unwrap();
    let run = runs
        .into_iter()
        .find(|r| r.kind == RunKind::Cur && r.period == "2026-09" && r.status == RunStatus::Succeeded)
        .unwrap();
    gpuledger::store::Bill {
        period: "2026-09".into(),
        provider: "aws".into(),
        billing_account: period.billing_account.clone(),
        format: "cur".into(),
        currency: "USD".into(),
        source: run.source,
        data_version: period.data_version.clone(),
        rows_read: rows,
        billed_nanos: period.bill_unblended_micros * 1000,
        effective_nanos: period.bill_amortized_micros * 1000,
        deviations: "{}".into(),
        ..Default::default()
    }
}

/// Every stored bill, each stamped with when it was ingested (set to 0 here).
async fn stored_bills(store: &dyn Store) -> Vec<gpuledger::store::Bill> {
    let bills = store.bills(None).await.unwrap();
    assert!(bills.iter().all(|b| b.ingested_at > 0), "{bills:?}");
    bills.into_iter().map(|b| gpuledger::store::Bill { ingested_at: 0, ..b }).collect()
}
