//! A CUR delivery is judged before it replaces anything (#37): a re-delivery whose data files
//! hold no rows, or whose bill falls too far, is refused with its numbers, recorded as a
//! refused run, shown on Data and as an alert, and the stored month stays as it was.

use std::path::{Path, PathBuf};

use gpuledger::synth::{self, CurFormat, GenerateOptions, Scale};
use serde_json::Value;

use crate::app::TestApp;
use crate::ingest_cur::{EXPORT, export_root, gzip, run, snapshot};

/// The data files and manifest of 2026-10 in `data`'s export.
fn october(data: &Path) -> (Vec<PathBuf>, PathBuf) {
    let export = export_root(data);
    let manifest = export.join(format!("metadata/BILLING_PERIOD=2026-10/{EXPORT}-Manifest.json"));
    let listed: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let files = listed["dataFiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|key| {
            let key = key.as_str().unwrap();
            // s3://bucket/prefix/export/data/... -> the export folder's data/...
            export.join(&key[key.find("/data/").unwrap() + 1..])
        })
        .collect();
    (files, manifest)
}

/// AWS's mark of a new delivery: a new executionId in the manifest.
fn new_execution(manifest: &Path, id: &str) {
    let mut listed: Value = serde_json::from_slice(&std::fs::read(manifest).unwrap()).unwrap();
    listed["executionId"] = Value::String(id.into());
    std::fs::write(manifest, listed.to_string()).unwrap();
}

fn generate(data: &Path, format: CurFormat, through_day: Option<u32>) {
    let options = GenerateOptions {
        out: data.to_path_buf(),
        seed: 37,
        months: 1,
        end: "2026-10".parse().unwrap(),
        scale: Scale::Demo,
        format,
        bucket: "test-bucket".into(),
        prefix: "cur".into(),
        export_name: EXPORT.into(),
        metrics: false,
        fixes_from: None,
        history_months: 2,
        through_day,
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

fn micros(text: &str) -> i64 {
    crate::ingest_cur::micros(&Value::String(text.into()))
}

fn ingest_cur(app: &TestApp, extra: &[&str]) -> std::process::Output {
    let url = app.database_url();
    let source = export_root(app.data()).display().to_string();
    let mut args = vec!["--database-url", url.as_str(), "ingest", "cur", source.as_str()];
    args.extend_from_slice(extra);
    run(&args)
}

/// The stored month as `report bill` prints it, with the stored data.
async fn stored(app: &TestApp) -> (Value, String) {
    let url = app.database_url();
    let bill = run(&["--database-url", &url, "report", "bill", "--period", "2026-10", "--format", "json"]);
    assert!(bill.status.success(), "{}", String::from_utf8_lossy(&bill.stderr));
    (serde_json::from_slice(&bill.stdout).unwrap(), snapshot(app.store()).await)
}

/// Each way a broken delivery holds no rows, with a new executionId and no flag: refused,
/// naming the stored bill, the month and its issued invoice unchanged, the refusal on Data
/// (page, JSON twin and banner) and as an alert; `--allow-empty` still empties it.
#[tokio::test]
async fn an_empty_redelivery_is_refused_and_the_billed_month_stays() {
    type Empty = fn(&Path);
    let zero_row_parquet: Empty = |file| {
        use polars::prelude::*;
        let frame = ParquetReader::new(std::fs::File::open(file).unwrap()).finish().unwrap();
        let mut empty = frame.slice(0, 0);
        ParquetWriter::new(std::fs::File::create(file).unwrap()).finish(&mut empty).unwrap();
    };
    let header_only_csv: Empty = |file| {
        let text = crate::ingest_cur::gunzip(file);
        gzip(file, &format!("{}\n", text.lines().next().unwrap()));
    };
    let empty_gzip_member: Empty = |file| gzip(file, "");
    let cases: [(CurFormat, &str, Empty); 3] = [
        (CurFormat::Parquet, "zero-row Parquet", zero_row_parquet),
        (CurFormat::Csv, "a header-only CSV", header_only_csv),
        (CurFormat::Csv, "an empty gzip member", empty_gzip_member),
    ];
    for (format, what, empty) in cases {
        let app = TestApp::empty().await;
        generate(app.data(), format, None);
        let first = ingest_cur(&app, &[]);
        assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
        let url = app.database_url();
        let issued =
            run(&["--database-url", &url, "invoice", "issue", "--client", "acme", "--period", "2026-10"]);
        assert!(issued.status.success(), "{}", String::from_utf8_lossy(&issued.stderr));
        let (bill, data) = stored(&app).await;
        let amortized = bill["amortized_total"].as_str().unwrap().to_string();
        assert_ne!(amortized, "0.000000");
        let invoices = run(&["--database-url", &url, "invoice", "list", "--format", "json"]).stdout;

        let (files, manifest) = october(app.data());
        files.iter().for_each(|file| empty(file));
        new_execution(&manifest, "broken-redelivery");
        let refused = ingest_cur(&app, &[]);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success(), "{what}: must be refused; {stderr}");
        let people = gpuledger::money::format_usd(micros(&amortized));
        for text in ["refused", "no rows", "--allow-empty", people.as_str()] {
            assert!(stderr.contains(text), "{what}: stderr should say {text:?}: {stderr}");
        }
        assert_eq!(stored(&app).await, (bill.clone(), data.clone()), "{what}: the month is as it was");
        let after = run(&["--database-url", &url, "invoice", "list", "--format", "json"]).stdout;
        assert_eq!(invoices, after, "{what}: the issued invoices are as they were");

        // Recorded as refused, with the numbers it was judged on.
        let run_ = app.store().ingest_runs(1).await.unwrap().remove(0);
        assert_eq!(run_.status, gpuledger::store::RunStatus::Refused, "{what}");
        assert_eq!(run_.data_version, "broken-redelivery");
        let numbers: Value = serde_json::from_str(run_.reconciliation.as_deref().unwrap()).unwrap();
        assert_eq!(numbers["rows_read"], 0);
        assert_eq!(numbers["stored_bill_amortized"], amortized.as_str());
        // On Data: the run, its reason, the banner; in the twin, the numbers.
        let page = app.page("/data").await;
        assert!(page.contains("refused"), "{what}: {page}");
        assert!(page.contains("was refused"), "{what}: the banner says so");
        let json = app.json("/data?format=json").await;
        assert_eq!(json["ingest_runs"][0]["status"], "refused");
        assert_eq!(json["ingest_runs"][0]["reconciliation"]["override_with"], "--allow-empty");
        // And as a critical alert.
        let alerts = run(&["--database-url", &url, "alerts", "list", "--format", "json"]);
        let alerts: Value = serde_json::from_slice(&alerts.stdout).unwrap();
        let alert = alerts["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["rule"] == "cur_delivery_refused")
            .unwrap_or_else(|| panic!("{what}: {alerts}"))
            .clone();
        assert_eq!(
            (alert["severity"].as_str(), alert["subject"].as_str()),
            (Some("critical"), Some("2026-10"))
        );

        // Said in so many words, the period is emptied.
        let allowed = ingest_cur(&app, &["--allow-empty"]);
        assert!(allowed.status.success(), "{what}: {}", String::from_utf8_lossy(&allowed.stderr));
        assert_eq!(stored(&app).await.0["amortized_total"], "0.000000", "{what}");
    }
}

/// A re-delivery whose bill falls by more than --max-drop (default 50 %) is refused with the
/// fall in percent; `--max-drop` above the fall or `--force` accepts it.
#[tokio::test]
async fn a_redelivery_whose_bill_falls_too_far_is_refused_unless_forced() {
    let app = TestApp::empty().await;
    generate(app.data(), CurFormat::Parquet, None);
    assert!(ingest_cur(&app, &[]).status.success());
    let before = stored(&app).await;
    let full = micros(before.0["amortized_total"].as_str().unwrap());
    // The same month through its 5th day only: a delivery cut short.
    generate(app.data(), CurFormat::Parquet, Some(5));
    let (_, manifest) = october(app.data());
    new_execution(&manifest, "partial");
    let refused = ingest_cur(&app, &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains("--max-drop") && stderr.contains("--force"), "{stderr}");
    assert_eq!(stored(&app).await, before, "the month is as it was");
    let numbers: Value =
        serde_json::from_str(app.store().ingest_runs(1).await.unwrap()[0].reconciliation.as_deref().unwrap())
            .unwrap();
    let partial = micros(numbers["bill_amortized"].as_str().unwrap());
    // The fall it names is (before - after) / before, in hundredths of a percent.
    let drop_bp = (i128::from(full) - i128::from(partial)) * 10_000 / i128::from(full);
    assert!(drop_bp > 5_000, "{drop_bp}");
    assert_eq!(numbers["drop_percent"], format!("{}.{:02}", drop_bp / 100, drop_bp % 100));
    // A limit above the fall accepts it, and so does --force.
    let above = ((drop_bp / 100) + 1).to_string();
    let accepted = ingest_cur(&app, &["--max-drop", &above]);
    assert!(accepted.status.success(), "{}", String::from_utf8_lossy(&accepted.stderr));
    assert_eq!(micros(stored(&app).await.0["amortized_total"].as_str().unwrap()), partial);
}

/// On Postgres a re-delivery is written into new tables beside the live partitions and
/// swapped in at commit: a refused one leaves the period's data, and no staged table behind.
#[tokio::test]
async fn a_refused_redelivery_on_postgres_leaves_the_partitions_as_they_were() {
    let Some(database) = crate::helpers::fresh_postgres().await else {
        eprintln!("no Postgres (GPULEDGER_TEST_POSTGRES_URL): skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), CurFormat::Parquet, None);
    let source = export_root(dir.path()).display().to_string();
    let ingest = |extra: &[&str]| {
        let mut args = vec!["--database-url", database.url.as_str(), "ingest", "cur", source.as_str()];
        args.extend_from_slice(extra);
        run(&args)
    };
    assert!(ingest(&[]).status.success());
    let store = crate::helpers::connect(&database.url).await;
    let before = snapshot(store.as_ref()).await;
    generate(dir.path(), CurFormat::Parquet, Some(5));
    new_execution(&october(dir.path()).1, "partial");
    let refused = ingest(&[]);
    assert!(!refused.status.success(), "{}", String::from_utf8_lossy(&refused.stderr));
    assert_eq!(snapshot(store.as_ref()).await, before);
    assert_eq!(store.ingest_runs(1).await.unwrap()[0].status, gpuledger::store::RunStatus::Refused);
    let mut pg = <sqlx::PgConnection as sqlx::Connection>::connect(&database.url).await.unwrap();
    let (staged,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM pg_class WHERE relname LIKE '%\\_next%'")
        .fetch_one(&mut pg)
        .await
        .unwrap();
    assert_eq!(staged, 0, "no staged table is left behind");
}

/// The manifest's `dataFiles` with `name` added beside the first, and a new executionId.
fn list_beside_first(manifest: &Path, name: &str, execution: &str) {
    let mut listed: Value = serde_json::from_slice(&std::fs::read(manifest).unwrap()).unwrap();
    let first = listed["dataFiles"][0].as_str().unwrap().to_string();
    let added = format!("{}/{name}", &first[..first.rfind('/').unwrap()]);
    listed["dataFiles"].as_array_mut().unwrap().push(Value::String(added));
    std::fs::write(manifest, listed.to_string()).unwrap();
    new_execution(manifest, execution);
}

fn read_parquet(file: &Path) -> polars::prelude::DataFrame {
    use polars::prelude::*;
    ParquetReader::new(std::fs::File::open(file).unwrap()).finish().unwrap()
}

fn write_parquet(
    file: &Path,
    frame: &mut polars::prelude::DataFrame,
    compression: polars::prelude::ParquetCompression,
) {
    use polars::prelude::*;
    ParquetWriter::new(std::fs::File::create(file).unwrap())
        .with_compression(compression)
        .finish(frame)
        .unwrap();
}

/// #69: the month's rows again in other bytes (a data file rewritten uncompressed and listed
/// beside the original under a new executionId), a row repeated inside a file, one row
/// repeated 200,000 times: each refused naming both places, `--force` or not, the month as it
/// was. The same rows under new line item ids double the days already stored: refused past
/// `--max-rise` (50 %) unless forced or the bound in force for the month is raised
/// (`settings bounds`). A month to date that grows is accepted.
#[tokio::test]
async fn the_same_rows_in_other_bytes_or_a_rise_of_the_stored_days_are_refused() {
    use polars::prelude::*;
    let app = TestApp::empty().await;
    // A month to date through the 5th, then the whole month: new days are no rise.
    generate(app.data(), CurFormat::Parquet, Some(5));
    let first = ingest_cur(&app, &[]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let partial = micros(stored(&app).await.0["amortized_total"].as_str().unwrap());
    generate(app.data(), CurFormat::Parquet, None);
    let (files, manifest) = october(app.data());
    new_execution(&manifest, "whole-month");
    let whole = ingest_cur(&app, &[]);
    assert!(whole.status.success(), "a month to date grows: {}", String::from_utf8_lossy(&whole.stderr));
    let before = stored(&app).await;
    let full = micros(before.0["amortized_total"].as_str().unwrap());
    assert!(full > 2 * partial, "{full} after {partial}");
    let pristine = std::fs::read(&manifest).unwrap();
    let original = read_parquet(&files[0]);
    let name = |path: &Path| path.file_name().unwrap().to_string_lossy().to_string();
    let refused = |extra: &[&str], said: &[String]| {
        let out = ingest_cur(&app, extra);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success(), "must be refused: {stderr}");
        for text in said {
            assert!(stderr.contains(text.as_str()), "{text:?} in {stderr}");
        }
    };

    // 1. The first data file rewritten uncompressed, listed beside the original.
    let rewritten = files[0].with_file_name("rewritten-00001.parquet");
    write_parquet(&rewritten, &mut original.clone(), ParquetCompression::Uncompressed);
    list_beside_first(&manifest, "rewritten-00001.parquet", "recompressed");
    refused(
        &["--force"],
        &[
            "rewritten-00001.parquet: data row 1 is data row 1 of".to_string(),
            format!("{} again", name(&files[0])),
        ],
    );
    assert_eq!(stored(&app).await, before, "the same rows in other bytes");
    std::fs::remove_file(&rewritten).unwrap();

    // 2. A row repeated inside the file, at its end.
    std::fs::write(&manifest, &pristine).unwrap();
    new_execution(&manifest, "repeated-row");
    let rows = original.height();
    let mut repeated = original.vstack(&original.slice(7, 1)).unwrap();
    write_parquet(&files[0], &mut repeated, ParquetCompression::Snappy);
    refused(
        &[],
        &[format!("{}: data row {} is data row 8 of the same file again", name(&files[0]), rows + 1)],
    );
    assert_eq!(stored(&app).await, before, "a repeated row");

    // 3. One row 200,000 times: refused at its second row.
    let mut flood = original.slice(0, 1);
    for _ in 0..18 {
        flood = flood.vstack(&flood).unwrap();
    }
    let mut flood = flood.slice(0, 200_000);
    assert_eq!(flood.height(), 200_000);
    write_parquet(&files[0], &mut flood, ParquetCompression::Snappy);
    new_execution(&manifest, "flood");
    refused(&[], &["data row 2 is data row 1 of the same file again".to_string()]);
    assert_eq!(stored(&app).await, before, "one row repeated");

    // 4. The same rows under new line item ids, beside the original: every day doubles.
    write_parquet(&files[0], &mut original.clone(), ParquetCompression::Snappy);
    let mut again = original.clone();
    let ids: Vec<String> = again
        .column("identity_line_item_id")
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .map(|id| format!("{}-again", id.unwrap_or("")))
        .collect();
    again.replace("identity_line_item_id", Column::new("identity_line_item_id".into(), ids)).unwrap();
    let copy = files[0].with_file_name("again-00001.snappy.parquet");
    write_parquet(&copy, &mut again, ParquetCompression::Snappy);
    std::fs::write(&manifest, &pristine).unwrap();
    list_beside_first(&manifest, "again-00001.snappy.parquet", "new-ids");
    refused(&[], &["--max-rise".to_string(), "--force".to_string(), "% more".to_string()]);
    assert_eq!(stored(&app).await, before, "a rise of the stored days");
    let numbers: Value =
        serde_json::from_str(app.store().ingest_runs(1).await.unwrap()[0].reconciliation.as_deref().unwrap())
            .unwrap();
    // Every stored day but the last doubled (to the micro-dollar, each day's lines rounded
    // once): 100 %, give or take a hundredth.
    let rise: f64 = numbers["rise_percent"].as_str().unwrap().parse().unwrap();
    assert!((rise - 100.0).abs() <= 0.01, "{numbers}");
    // The bound is a setting with effective dates: one above the rise from November on does
    // not reach October; from October on it accepts the rise (as `--max-rise 101` would).
    let url = app.database_url();
    let bounds = |from: &str| {
        let set = run(&["--database-url", &url, "settings", "bounds", "--max-rise", "101", "--from", from]);
        assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    };
    bounds("2026-11");
    let bounded = stored(&app).await; // a saved setting moves the data revision on
    refused(&[], &["past the 50 % a re-delivery may rise".to_string()]);
    assert_eq!(stored(&app).await, bounded, "November's bound is not October's");
    bounds("2026-10");
    let accepted = ingest_cur(&app, &[]);
    assert!(accepted.status.success(), "{}", String::from_utf8_lossy(&accepted.stderr));
    let doubled = micros(stored(&app).await.0["amortized_total"].as_str().unwrap());
    // Twice the month, each stored row rounded to the micro-dollar once.
    assert!((doubled - 2 * full).abs() <= 1_000_000, "{doubled} against twice {full}");
}
