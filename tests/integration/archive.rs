//! `gpuledger archive` through the binary, on both backends: an old period's detail rows go to
//! Parquet files and leave the database (on Postgres, its partitions); its bill, rollups and
//! issued invoice stay exactly as they were (and every report made of rollups); what needs the
//! rows (a compute, the GPU report at another idle threshold, the page of a workload's pods)
//! is refused, saying so; a changed file is refused; a restore brings back every row as it
//! was; a new delivery of an archived period replaces it as any other.

use std::path::Path;

use axum::http::StatusCode;
use gpuledger::store::{PeriodDetail, Store};
use gpuledger::synth::{CurFormat, Scale};
use gpuledger::web::{AppState, AuthConfig};
use serde_json::Value;

use crate::helpers;
use crate::ingest_cur::{export_root, generate};
use crate::invoices::{gl, json, try_gl};
use crate::web::get;

/// Fails with a message on stderr that contains every one of `expected`.
fn refused(database: &str, args: &[&str], expected: &[&str]) -> String {
    let output = try_gl(database, args);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(!output.status.success(), "gpuledger {args:?} should have failed");
    for text in expected {
        assert!(stderr.contains(text), "gpuledger {args:?}: {text:?} not in {stderr}");
    }
    stderr
}

/// What finance reads of September that must not change: the clients' chargeback (rollups),
/// the bill, the issued invoice.
fn finance_view(database: &str) -> [Value; 3] {
    [
        json(database, &["report", "clients", "--period", "2026-09", "--format", "json"]),
        json(database, &["report", "bill", "--period", "2026-09", "--format", "json"]),
        json(database, &["invoice", "show", "INV-0001"]),
    ]
}

fn pdf(database: &str, work: &Path, name: &str) -> Vec<u8> {
    let path = work.join(name);
    gl(database, &["invoice", "export", "INV-0001", "--format", "pdf", "--out", &path.display().to_string()]);
    std::fs::read(path).unwrap()
}

/// The partitions of September on Postgres, by name.
async fn september_partitions(url: &str) -> Vec<String> {
    let mut pg = <sqlx::PgConnection as sqlx::Connection>::connect(url).await.unwrap();
    let names: Vec<(String,)> = sqlx::query_as(
        "SELECT child.relname::text FROM pg_inherits i JOIN pg_class child ON child.oid = i.inhrelid \
         WHERE child.relname LIKE '%\\_p2026\\_09' ORDER BY 1",
    )
    .fetch_all(&mut pg)
    .await
    .unwrap();
    names.into_iter().map(|(name,)| name).collect()
}

async fn archive_story(database: &str, work: &Path, postgres: bool) {
    let data = work.join("data");
    generate(&data, Scale::Demo, CurFormat::Parquet, 2, 31);
    let source = export_root(&data).display().to_string();
    gl(database, &["clients", "labels", "*"]);
    gl(database, &["invoice", "seller", "--name", "Northwind ML Agency", "--number-format", "INV-{seq:04}"]);
    gl(database, &["ingest", "cur", &source]);
    assert_eq!(
        gl(database, &["invoice", "issue", "--client", "acme", "--period", "2026-09"]).trim(),
        "INV-0001"
    );
    let store: Box<dyn Store> = helpers::connect(database).await;
    let (version, detail): (String, PeriodDetail) = store.period_detail("2026-09").await.unwrap();
    let september = store.cost_period("2026-09").await.unwrap().unwrap();
    assert!(detail.pods.len() > 10 && detail.pod_days.len() > detail.pods.len(), "a month of pods");
    let namespaces = json(database, &["report", "namespaces", "--period", "2026-09", "--format", "json"]);
    let gpus = json(database, &["report", "gpu", "--period", "2026-09", "--format", "json"]);
    let finance = finance_view(database);
    let invoice_pdf = pdf(database, work, "before.pdf");
    let partitions_before = match postgres {
        true => september_partitions(database).await,
        false => Vec::new(),
    };

    // Archive September.
    let archives = work.join("archives");
    gl(database, &["archive", "create", "--period", "2026-09", "--to", &archives.display().to_string()]);
    let folder = archives.canonicalize().unwrap().join("2026-09");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(folder.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["data_version"], version.as_str());
    let rows: Vec<(String, u64)> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["table"].as_str().unwrap().to_string(), f["rows"].as_u64().unwrap()))
        .collect();
    let expected: Vec<(String, u64)> = [
        ("cost_pods", detail.pods.len()),
        ("instance_hours", detail.instance_hours.len()),
        ("cost_pod_days", detail.pod_days.len()),
        ("cost_pod_day_options", detail.pod_day_options.len()),
        ("cost_gpu_pod_hours", detail.gpu_pod_hours.len()),
    ]
    .into_iter()
    .map(|(table, rows)| (table.to_string(), rows as u64))
    .collect();
    assert_eq!(rows, expected);
    // The instance-hours' amortized cost, summed by hand from what was stored.
    let instances: i64 = september.instance_hours.iter().map(|h| h.amortized_cost_micros).sum();
    assert_eq!(manifest["totals"]["instance_amortized_micros"], instances);
    let listed = json(database, &["archive", "list", "--format", "json"]);
    assert_eq!(listed[0]["period"], "2026-09");
    assert_eq!(listed[0]["detail_rows"], detail.rows() as u64);
    assert_eq!(listed[0]["location"], folder.display().to_string());

    // The rows left the database; the bill, the rollups and the invoice did not change.
    if postgres {
        let left = september_partitions(database).await;
        assert_eq!(left, ["cost_facts_p2026_09", "other_costs_p2026_09"], "before: {partitions_before:?}");
        assert_eq!(partitions_before.len(), 7);
    }
    assert_eq!(finance_view(database), finance);
    assert_eq!(pdf(database, work, "after.pdf"), invoice_pdf, "the issued PDF, byte for byte");
    // What needs the rows says so, and how to bring them back.
    let restore_hint = format!("gpuledger archive restore {}", folder.display());
    assert_eq!(
        json(database, &["report", "namespaces", "--period", "2026-09", "--format", "json"]),
        namespaces
    );
    assert_eq!(json(database, &["report", "gpu", "--period", "2026-09", "--format", "json"]), gpus);
    let web = AppState::new(helpers::connect(database).await, AuthConfig::off());
    let pod = &detail.pods[0];
    let pods_page =
        format!("/costs?period=2026-09&group=pod&namespace={}&workload={}", pod.namespace, pod.workload);
    let (status, page) = get(&web, &pods_page).await;
    assert_eq!(status, StatusCode::GONE, "{page}");
    assert!(page.contains("The pods of 2026-09 were archived on"), "{page}");
    assert!(!page.contains(&folder.display().to_string()), "no server path on a page anyone may open");
    let (status, _) = get(&web, "/costs?period=2026-09&group=workload").await;
    assert_eq!(status, StatusCode::OK, "the month's costs by workload are rollups");
    let (_, data) = get(&web, "/data").await;
    assert!(data.contains(&format!("to {}</small>", folder.display())), "{data}");
    refused(database, &["compute", "--period", "2026-09"], &["2026-09 was archived", &restore_hint]);
    let runs = store.ingest_runs(100).await.unwrap();
    let failed: Vec<_> = runs.iter().filter(|run| run.status.is_failure()).collect();
    assert!(failed.is_empty(), "a refused compute is no failed run: {failed:?}");
    let other_threshold = ["report", "gpu", "--period", "2026-09", "--idle-threshold", "0.37"];
    refused(database, &other_threshold, &["2026-09 was archived", &restore_hint]);
    let open = ["archive", "create", "--period", "2099-01", "--to", &archives.display().to_string()];
    refused(database, &open, &["2099-01 has not ended"]);
    let elsewhere = work.join("elsewhere").display().to_string();
    refused(database, &["archive", "create", "--period", "2026-09", "--to", &elsewhere], &["archived"]);
    // Computing every period leaves the archived one as it was, and October computes.
    gl(database, &["compute"]);
    assert_eq!(finance_view(database), finance);
    assert!(store.pending_periods().await.unwrap().is_empty());
    // The same delivery is not ingested again over the archive.
    gl(database, &["ingest", "cur", &source]);
    assert_eq!(json(database, &["archive", "list", "--format", "json"]).as_array().unwrap().len(), 1);

    // A changed file, or a manifest that is not the one recorded, is refused; nothing changes.
    let tampered = work.join("tampered");
    std::fs::create_dir_all(&tampered).unwrap();
    for entry in std::fs::read_dir(&folder).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), tampered.join(entry.file_name())).unwrap();
    }
    let pods_file = tampered.join("cost_pods.parquet");
    let mut bytes = std::fs::read(&pods_file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    std::fs::write(&pods_file, &bytes).unwrap();
    let tampered_arg = tampered.display().to_string();
    refused(
        database,
        &["archive", "restore", &tampered_arg],
        &["cost_pods.parquet", "changed since it was archived"],
    );
    std::fs::copy(folder.join("cost_pods.parquet"), &pods_file).unwrap();
    let manifest_file = tampered.join("manifest.json");
    let text =
        std::fs::read_to_string(&manifest_file).unwrap().replace("\"written_by\": \"", "\"written_by\": \"x");
    std::fs::write(&manifest_file, text).unwrap();
    refused(
        database,
        &["archive", "restore", &tampered_arg],
        &["not the archive written when 2026-09 was archived"],
    );
    assert_eq!(json(database, &["archive", "list", "--format", "json"]).as_array().unwrap().len(), 1);

    // Restored: every row as it was, the reports as they were.
    gl(database, &["archive", "restore", &folder.display().to_string()]);
    assert_eq!(store.period_detail("2026-09").await.unwrap(), (version.clone(), detail.clone()));
    assert_eq!(store.cost_period("2026-09").await.unwrap().unwrap(), september);
    assert_eq!(json(database, &["report", "gpu", "--period", "2026-09", "--format", "json"]), gpus);
    assert!(json(database, &["archive", "list", "--format", "json"]).as_array().unwrap().is_empty());
    if postgres {
        assert_eq!(september_partitions(database).await, partitions_before);
    }
    gl(database, &["compute", "--period", "2026-09"]);
    assert_eq!(finance_view(database), finance);
    // The folder holds a finished archive: never written over.
    let archives_arg = archives.display().to_string();
    refused(
        database,
        &["archive", "create", "--period", "2026-09", "--to", &archives_arg],
        &["already there"],
    );
    assert_eq!(store.period_detail("2026-09").await.unwrap().1, detail, "a refused archive removes nothing");
    refused(database, &["archive", "restore", &folder.display().to_string()], &["not archived"]);

    // Archived again (every period before October), then delivered again: the new delivery
    // replaces the period whole, and it is no longer archived.
    let second = work.join("second").display().to_string();
    gl(database, &["archive", "create", "--before", "2026-10", "--to", &second]);
    assert_eq!(json(database, &["archive", "list", "--format", "json"])[0]["period"], "2026-09");
    gl(database, &["ingest", "cur", &source, "--period", "2026-09", "--force"]);
    assert!(json(database, &["archive", "list", "--format", "json"]).as_array().unwrap().is_empty());
    assert_eq!(store.period_detail("2026-09").await.unwrap().1, detail);
    assert_eq!(json(database, &["report", "gpu", "--period", "2026-09", "--format", "json"]), gpus);
}

#[tokio::test]
async fn an_archived_period_keeps_its_bill_rollups_and_invoice_and_comes_back_whole_on_sqlite() {
    let work = tempfile::tempdir().unwrap();
    let database = format!("sqlite:{}", work.path().join("gl.db").display());
    archive_story(&database, work.path(), false).await;
}

#[tokio::test]
async fn an_archived_period_keeps_its_bill_rollups_and_invoice_and_comes_back_whole_on_postgres() {
    let Some(postgres) = helpers::fresh_postgres().await else {
        eprintln!("skipped: {} is not set", helpers::POSTGRES_URL_VAR);
        return;
    };
    let work = tempfile::tempdir().unwrap();
    archive_story(&postgres.url, work.path(), true).await;
}

/// The binary with test credentials for a local S3 endpoint.
fn gl_aws(database: &str, endpoint: &str, args: &[&str]) -> std::process::Output {
    crate::s3::gl_moto(database, &[args, &["--endpoint-url", endpoint]].concat())
}

/// Archives in S3 (the real SDK against moto): the files and the manifest under
/// `prefix/YYYY-MM/`; a changed object is refused; the restore brings every row back; a
/// finished archive is not written over.
#[tokio::test]
async fn an_archive_in_s3_comes_back_whole() {
    let Some(moto) = crate::s3::start_moto() else { return };
    let s3 = crate::s3::client(&moto.url).await;
    s3.create_bucket().bucket("archives").send().await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let database = format!("sqlite:{}", work.path().join("gl.db").display());
    let data = work.path().join("data");
    generate(&data, Scale::Demo, CurFormat::Parquet, 2, 32);
    gl(&database, &["ingest", "cur", &export_root(&data).display().to_string()]);
    let store = helpers::connect(&database).await;
    let (_, detail) = store.period_detail("2026-09").await.unwrap();

    let create = ["archive", "create", "--period", "2026-09", "--to", "s3://archives/gpuledger"];
    let output = gl_aws(&database, &moto.url, &create);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let listed = json(&database, &["archive", "list", "--format", "json"]);
    assert_eq!(listed[0]["location"], "s3://archives/gpuledger/2026-09");
    let objects = s3.list_objects_v2().bucket("archives").prefix("gpuledger/").send().await.unwrap();
    let mut keys: Vec<&str> = objects.contents().iter().filter_map(|o| o.key()).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "gpuledger/2026-09/cost_gpu_pod_hours.parquet",
            "gpuledger/2026-09/cost_pod_day_options.parquet",
            "gpuledger/2026-09/cost_pod_days.parquet",
            "gpuledger/2026-09/cost_pods.parquet",
            "gpuledger/2026-09/instance_hours.parquet",
            "gpuledger/2026-09/manifest.json",
        ]
    );
    assert!(store.period_detail("2026-09").await.is_err(), "the rows left the database");

    // A changed object is refused, saying which; the period stays archived.
    let key = "gpuledger/2026-09/cost_pod_days.parquet";
    let original = s3.get_object().bucket("archives").key(key).send().await.unwrap();
    let original = original.body.collect().await.unwrap().into_bytes().to_vec();
    let mut changed = original.clone();
    changed[original.len() / 2] ^= 0x10;
    s3.put_object().bucket("archives").key(key).body(changed.into()).send().await.unwrap();
    let restore = ["archive", "restore", "s3://archives/gpuledger/2026-09"];
    let output = gl_aws(&database, &moto.url, &restore);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("cost_pod_days.parquet"), "{stderr}");
    assert!(stderr.contains("changed since it was archived"), "{stderr}");
    assert_eq!(json(&database, &["archive", "list", "--format", "json"]).as_array().unwrap().len(), 1);
    s3.put_object().bucket("archives").key(key).body(original.into()).send().await.unwrap();

    let output = gl_aws(&database, &moto.url, &restore);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(store.period_detail("2026-09").await.unwrap().1, detail);
    // The finished archive is still there: a second one to the same prefix is refused.
    let output = gl_aws(&database, &moto.url, &create);
    assert!(String::from_utf8_lossy(&output.stderr).contains("already there"), "{output:?}");
    assert_eq!(store.period_detail("2026-09").await.unwrap().1, detail);
}
