//! Every dollar of the bill, refused when it cannot be trusted: each kind of bad number or
//! bad manifest fails the ingest with the file, row and column named, exit status 1, and
//! the database exactly as it was. (The bill against truth is checked with every ingest in
//! `ingest_cur::assert_bill_matches_truth`.)

use serde_json::Value;

use crate::ingest_cur::{BadInputCase, EXPORT, gunzip, gzip, raw_csv_fields, run};
use gpuledger::synth::CurFormat;

/// Rewrites one cell of the first (or last) data row of 2026-10's CSV that contains
/// `marker`, and returns that row's number as the messages count it.
fn edit_cell(
    case: &BadInputCase,
    marker: &str,
    last: bool,
    column: &str,
    edit: impl Fn(&str) -> String,
) -> usize {
    let file = case.data_file("csv.gz");
    let text = gunzip(&file);
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let index = lines[0].split(',').position(|c| c == column).unwrap_or_else(|| panic!("no column {column}"));
    let row = if last {
        lines.iter().rposition(|l| l.contains(marker))
    } else {
        lines.iter().skip(1).position(|l| l.contains(marker)).map(|i| i + 1)
    }
    .unwrap_or_else(|| panic!("no row with {marker}"));
    let mut fields = raw_csv_fields(&lines[row]);
    fields[index] = edit(&fields[index]);
    lines[row] = fields.join(",");
    gzip(&file, &(lines.join("\n") + "\n"));
    row
}

fn edit_manifest(case: &BadInputCase, edit: impl Fn(&mut Vec<Value>)) {
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(case.manifest()).unwrap()).unwrap();
    edit(manifest["dataFiles"].as_array_mut().unwrap());
    std::fs::write(case.manifest(), manifest.to_string()).unwrap();
}

async fn refuses_cost(value: &str, expected: &str) {
    let case = BadInputCase::new(CurFormat::Csv).await;
    let row = edit_cell(&case, "perCluster", true, "line_item_unblended_cost", |_| value.into());
    let row = format!("data row {row}");
    case.assert_fails(&case.export(), &["00001.csv.gz", &row, "line_item_unblended_cost", expected]).await;
}

#[tokio::test]
async fn not_a_number_is_refused() {
    refuses_cost("NaN", "NaN is not a finite number").await;
}

#[tokio::test]
async fn an_infinite_cost_is_refused() {
    refuses_cost("inf", "inf is not a finite number").await;
}

#[tokio::test]
async fn an_absurd_cost_is_refused() {
    refuses_cost("4e15", "beyond any plausible amount").await;
}

#[tokio::test]
async fn a_data_file_listed_twice_is_refused() {
    let case = BadInputCase::new(CurFormat::Parquet).await;
    edit_manifest(&case, |files| files.push(files[0].clone()));
    case.assert_fails(&case.export(), &[&format!("{EXPORT}-Manifest.json"), "twice"]).await;
}

/// The same bytes under a second name (#37: it doubled the bill): refused, naming both.
#[tokio::test]
async fn a_copy_of_a_data_file_under_a_second_name_is_refused() {
    let case = BadInputCase::new(CurFormat::Parquet).await;
    let original = case.data_file("snappy.parquet");
    let copy = original.with_file_name(format!("{EXPORT}-00099.snappy.parquet"));
    std::fs::copy(&original, &copy).unwrap();
    edit_manifest(&case, |files| {
        let first = files[0].as_str().unwrap().to_string();
        files.push(Value::String(first.replace("-00001.", "-00099.")));
    });
    case.assert_fails(
        &case.export(),
        &[
            &format!("{EXPORT}-00099.snappy.parquet"),
            &format!("{EXPORT}-00001.snappy.parquet"),
            "same contents",
        ],
    )
    .await;
}

/// A gzip bomb of one endless line (#37: 5.79 GB and six minutes): refused at the line bound,
/// naming the file and the row, having held at most one line.
#[tokio::test]
async fn a_csv_line_past_the_line_bound_is_refused() {
    let case = BadInputCase::new(CurFormat::Csv).await;
    let file = case.data_file("csv.gz");
    let header = gunzip(&file).lines().next().unwrap().to_string();
    let line = "x".repeat(gpuledger::sources::columns::bounds::MAX_LINE_BYTES * 8);
    gzip(&file, &format!("{header}\n{line}\n"));
    case.assert_fails(&case.export(), &["00001.csv.gz", "data row 1 is longer than 1048576 bytes"]).await;
}

/// One real line item repeated far past any export (#37: a 10 MB gzip accepted as a $179.5M
/// month): refused once the file has expanded past 100 times its size.
#[tokio::test]
async fn a_csv_gzip_expanding_past_the_ratio_bound_is_refused() {
    use gpuledger::sources::columns::bounds;
    let case = BadInputCase::new(CurFormat::Csv).await;
    let file = case.data_file("csv.gz");
    let text = gunzip(&file);
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let row = lines.next().unwrap();
    let copies = (bounds::MIN_DECOMPRESSED_BYTES as usize * 2) / (row.len() + 1) + 1;
    let mut bomb = String::with_capacity(header.len() + copies * (row.len() + 1) + 1);
    bomb.push_str(header);
    bomb.push('\n');
    for _ in 0..copies {
        bomb.push_str(row);
        bomb.push('\n');
    }
    // At the best level, as a bomb is made: the default level's matches compress the repeated
    // line less than 100 times (93 times for a line of 1,097 bytes).
    let mut encoder =
        flate2::write::GzEncoder::new(std::fs::File::create(&file).unwrap(), flate2::Compression::best());
    std::io::Write::write_all(&mut encoder, bomb.as_bytes()).unwrap();
    encoder.finish().unwrap();
    let compressed = std::fs::metadata(&file).unwrap().len();
    // The bound is what the message names: 100 times the file, or 64 MiB for a small one.
    let limit = bounds::decompressed_limit(compressed);
    assert!((bomb.len() as u64) > limit, "{} bytes from {compressed}", bomb.len());
    case.assert_fails(
        &case.export(),
        &["00001.csv.gz", &format!("decompresses to more than {limit} bytes"), "over 100 times"],
    )
    .await;
}

/// A manifest whose own billingPeriod disagrees with the folder it lies in (#37).
#[tokio::test]
async fn a_manifest_naming_another_billing_period_is_refused() {
    let case = BadInputCase::new(CurFormat::Parquet).await;
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(case.manifest()).unwrap()).unwrap();
    manifest["billingPeriod"] = Value::String("2026-09".into());
    std::fs::write(case.manifest(), manifest.to_string()).unwrap();
    case.assert_fails(
        &case.export(),
        &[&format!("{EXPORT}-Manifest.json"), "billingPeriod is 2026-09", "folder of 2026-10"],
    )
    .await;
}

/// A data file of another bucket beside this export's (#37: accepted for a local folder).
#[tokio::test]
async fn a_data_file_of_another_bucket_is_refused() {
    let case = BadInputCase::new(CurFormat::Parquet).await;
    edit_manifest(&case, |files| {
        let first = files[0].as_str().unwrap().to_string();
        let other =
            first.replacen("s3://test-bucket/", "s3://another-bucket/", 1).replace("-00001.", "-00002.");
        files.push(Value::String(other));
    });
    case.assert_fails(&case.export(), &["more than one export", "s3://another-bucket/"]).await;
}

/// A data file that is a symbolic link to a file outside the export (#37: it was followed).
#[tokio::test]
async fn a_data_file_linked_from_outside_the_export_is_refused() {
    let case = BadInputCase::new(CurFormat::Parquet).await;
    let file = case.data_file("snappy.parquet");
    let outside = case.dir.path().join("elsewhere.parquet");
    std::fs::rename(&file, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, &file).unwrap();
    case.assert_fails(
        &case.export(),
        &[&format!("{EXPORT}-00001.snappy.parquet"), "outside the export root"],
    )
    .await;
}

/// The manifest itself a link to a file outside the export (#69: it was followed).
#[tokio::test]
async fn a_manifest_linked_from_outside_the_export_is_refused() {
    let case = BadInputCase::new(CurFormat::Parquet).await;
    let manifest = case.manifest();
    let outside = case.dir.path().join("elsewhere-Manifest.json");
    std::fs::rename(&manifest, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, &manifest).unwrap();
    case.assert_fails(&case.export(), &[&format!("{EXPORT}-Manifest.json"), "outside the export root"]).await;
}

#[tokio::test]
async fn a_data_file_outside_the_export_is_refused() {
    let case = BadInputCase::new(CurFormat::Parquet).await;
    edit_manifest(&case, |files| {
        let first = files[0].as_str().unwrap().to_string();
        let (folder, _) = first.rsplit_once('/').unwrap();
        files.push(Value::String(format!("{folder}/../../../../../etc/passwd")));
    });
    case.assert_fails(&case.export(), &["etc/passwd", "outside the export root"]).await;
}

#[tokio::test]
async fn a_zero_byte_data_file_is_refused() {
    let case = BadInputCase::new(CurFormat::Parquet).await;
    std::fs::write(case.data_file("snappy.parquet"), b"").unwrap();
    case.assert_fails(&case.export(), &[&format!("{EXPORT}-00001.snappy.parquet"), "empty (0 bytes)"]).await;
}

#[tokio::test]
async fn an_empty_manifest_is_refused_unless_allowed() {
    let case = BadInputCase::new(CurFormat::Parquet).await;
    edit_manifest(&case, |files| files.clear());
    case.assert_fails(
        &case.export(),
        &[&format!("{EXPORT}-Manifest.json"), "no data files", "--allow-empty"],
    )
    .await;
    // Asked for, the period is replaced with nothing: its bill is zero.
    let source = case.export().display().to_string();
    let output = run(&["--database-url", &case.database_url, "ingest", "cur", &source, "--allow-empty"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let bill = run(&[
        "--database-url",
        &case.database_url,
        "report",
        "bill",
        "--period",
        "2026-10",
        "--format",
        "json",
    ]);
    let bill: Value = serde_json::from_slice(&bill.stdout).unwrap();
    assert_eq!(bill["amortized_total"], "0.000000");
}

#[tokio::test]
async fn a_row_outside_the_billing_period_is_refused() {
    let case = BadInputCase::new(CurFormat::Csv).await;
    let row = edit_cell(&case, "perCluster", false, "line_item_usage_start_date", |date| {
        date.replace("2026-10-", "2026-11-")
    });
    case.assert_fails(
        &case.export(),
        &[
            "00001.csv.gz",
            &format!("data row {row}"),
            "line_item_usage_start_date",
            "outside the billing period 2026-10",
        ],
    )
    .await;
}

#[tokio::test]
async fn a_daily_export_is_refused() {
    let case = BadInputCase::new(CurFormat::Csv).await;
    // A daily export's instance lines span the day: 2026-10-01T00:00 to 2026-10-02T00:00.
    let row = edit_cell(&case, "RunInstances", false, "line_item_usage_end_date", |_| {
        "2026-10-02T00:00:00.000Z".into()
    });
    case.assert_fails(
        &case.export(),
        &["00001.csv.gz", &format!("data row {row}"), "spans 24 hours", "not an hourly export"],
    )
    .await;
}

#[tokio::test]
async fn two_currencies_in_a_period_are_refused() {
    let case = BadInputCase::new(CurFormat::Csv).await;
    let row = edit_cell(&case, "perCluster", true, "line_item_currency_code", |_| "EUR".into());
    case.assert_fails(
        &case.export(),
        &["00001.csv.gz", &format!("data row {row}"), "EUR in a period billed in USD"],
    )
    .await;
}

#[tokio::test]
async fn a_folder_holding_exports_lists_them() {
    let case = BadInputCase::new(CurFormat::Parquet).await;
    // The generator's output folder holds cur/<export>/ like a synced bucket.
    let output =
        run(&["--database-url", &case.database_url, "ingest", "cur", &case.dir.path().display().to_string()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("holds 1 CUR 2.0 export(s)"), "{stderr}");
    assert!(stderr.contains(&case.export().display().to_string()), "the export is listed: {stderr}");
}

/// AWS's own Parquet layout: key/value columns as Parquet MAP<string, string>. The fixture's
/// sums were read back with pyarrow alone (`tests/fixtures/aws-parquet-map/README.md`).
#[tokio::test]
async fn parquet_map_columns_as_aws_writes_them_are_read() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/aws-parquet-map");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("expected.json")).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let source = fixture.join("gpuledger-cur2").display().to_string();
    let output = run(&["--database-url", &url, "ingest", "cur", &source]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let store = crate::helpers::connect(&url).await;
    let period: gpuledger::period::Period = "2026-10".parse().unwrap();
    // Namespaces from the pod ARNs, to the nano-dollar rounding of 2,500 rows.
    let report = gpuledger::report::NamespaceReport::load(store.as_ref(), period, None, false).await.unwrap();
    let namespaces = expected["namespaces"].as_object().unwrap();
    assert_eq!(report.rows.len(), namespaces.len());
    for row in &report.rows {
        let got = (row.split_cost_nanos + row.unused_cost_nanos) as f64 / 1e9;
        let want = namespaces[&row.namespace].as_f64().unwrap();
        assert!((got - want).abs() < 1e-5, "{}: {got} vs pyarrow's {want}", row.namespace);
    }
    // The tags map: each pod's user_client label, through compute's client mapping.
    gpuledger::engine::compute::compute_period(store.as_ref(), period).await.unwrap();
    let rollups = store.rollups("2026-10").await.unwrap().unwrap();
    for (client, want) in expected["clients"].as_object().unwrap().iter().filter(|(c, _)| *c != "(none)") {
        let got: i64 = rollups
            .costs
            .iter()
            .filter(|c| &c.client == client)
            .map(|c| c.split_cost_nanos + c.unused_cost_nanos)
            .sum();
        assert!(
            (got as f64 / 1e9 - want.as_f64().unwrap()).abs() < 1e-5,
            "{client}: {got} nano-dollars vs {want}"
        );
    }
    let bill = run(&["--database-url", &url, "report", "bill", "--period", "2026-10", "--format", "json"]);
    let bill: Value = serde_json::from_slice(&bill.stdout).unwrap();
    let unblended: f64 = bill["unblended_total"].as_str().unwrap().parse().unwrap();
    assert!(
        (unblended - expected["unblended_total"].as_f64().unwrap()).abs() < 1e-5,
        "unblended {unblended}"
    );
}
