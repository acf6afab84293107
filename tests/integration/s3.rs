//! CUR ingest from S3 with the real AWS SDK against a local moto server: a generated export
//! uploaded to a bucket comes out matching truth; a missing bucket and an endpoint that stops
//! answering half-way fail clearly and change nothing.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gpuledger::synth::{CurFormat, Scale};

use crate::ingest_cur::{EXPORT, assert_matches_truth, export_root, generate, snapshot, truth};

const BUCKET: &str = "test-bucket";

/// A moto server on a free loopback port, stopped by its process id when dropped.
pub struct Moto {
    child: Child,
    pub url: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto_binary() -> Option<PathBuf> {
    let candidates = [
        std::env::var("GPULEDGER_MOTO_SERVER").ok().map(PathBuf::from),
        std::env::var("HOME").ok().map(|home| Path::new(&home).join(".cache/gpuledger-venv/bin/moto_server")),
    ];
    candidates.into_iter().flatten().find(|path| path.is_file())
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts moto (S3 and Cost Explorer), or returns `None` (test skipped) when it is not
/// installed.
pub fn start_moto() -> Option<Moto> {
    let Some(binary) = moto_binary() else {
        eprintln!("moto_server not installed: S3 test skipped (scripts/test installs it)");
        return None;
    };
    let port = free_port();
    let child = Command::new(binary)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let moto = Moto { child, url: format!("http://127.0.0.1:{port}") };
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "moto did not start on port {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(moto)
}

pub(crate) async fn client(endpoint: &str) -> aws_sdk_s3::Client {
    let credentials = aws_sdk_s3::config::Credentials::new("testing", "testing", None, None, "test");
    let config = aws_sdk_s3::config::Builder::new()
        .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .credentials_provider(credentials)
        .endpoint_url(endpoint)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// Uploads a generated export under `cur/test-export/`, as the manifest's URIs name it.
async fn upload(endpoint: &str, out: &Path) {
    let s3 = client(endpoint).await;
    s3.create_bucket().bucket(BUCKET).send().await.unwrap();
    let root = export_root(out);
    let mut pending = vec![root.clone()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let relative = path.strip_prefix(&root).unwrap().display().to_string();
            let body = aws_sdk_s3::primitives::ByteStream::from_path(&path).await.unwrap();
            s3.put_object()
                .bucket(BUCKET)
                .key(format!("cur/{EXPORT}/{relative}"))
                .body(body)
                .send()
                .await
                .unwrap();
        }
    }
}

/// Runs the binary on `database_url` with the test credentials moto accepts.
pub(crate) fn gl_moto(database_url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuledger"))
        .args(["--database-url", database_url])
        .args(args)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

/// An S3 CUR ingest against the local endpoint.
fn ingest_from(endpoint: &str, database_url: &str, source: &str) -> Output {
    gl_moto(database_url, &["ingest", "cur", source, "--endpoint-url", endpoint, "--s3-timeout", "3"])
}

#[tokio::test]
async fn an_export_in_s3_matches_truth() {
    let Some(moto) = start_moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), Scale::Demo, CurFormat::Parquet, 1, 31);
    upload(&moto.url, dir.path()).await;
    let database_url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let output = ingest_from(&moto.url, &database_url, &format!("s3://{BUCKET}/cur/{EXPORT}"));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("2026-10: ingested"), "{stdout}");
    assert!(stdout.contains("0 of"), "split rows reconcile: {stdout}");
    let store = crate::helpers::connect(&database_url).await;
    assert_matches_truth(store.as_ref(), &truth(dir.path(), "2026-10"), "2026-10").await;
    let runs = store.ingest_runs(5).await.unwrap();
    let cur = runs.iter().find(|r| r.kind == gpuledger::domain::runs::RunKind::Cur).unwrap();
    assert!(cur.source.starts_with(&format!("s3://{BUCKET}/cur/{EXPORT}/metadata/")), "{cur:?}");
}

#[tokio::test]
async fn a_bucket_that_does_not_exist_is_refused() {
    let Some(moto) = start_moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let database_url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let store = crate::helpers::connect(&database_url).await;
    let before = snapshot(store.as_ref()).await;
    let output = ingest_from(&moto.url, &database_url, "s3://no-such-bucket/cur/x");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("s3://no-such-bucket/cur/x/metadata/"), "{stderr}");
    assert!(stderr.contains("NoSuchBucket"), "{stderr}");
    assert_eq!(before, snapshot(store.as_ref()).await);
}

/// Forwards to `upstream` until `limit` response bytes have passed, then stops answering:
/// open connections go silent and new ones are accepted and never served.
fn stalling_proxy(upstream: String, limit: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let forwarded = Arc::new(AtomicUsize::new(0));
    let stalled = Arc::new(AtomicBool::new(false));
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for client in listener.incoming().flatten() {
            if stalled.load(Ordering::SeqCst) {
                held.push(client); // accepted, never answered
                continue;
            }
            let Ok(server) = TcpStream::connect(upstream.trim_start_matches("http://")) else { continue };
            let (mut client_read, mut server_write) =
                (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut client_read, &mut server_write);
            });
            let (forwarded, stalled) = (forwarded.clone(), stalled.clone());
            std::thread::spawn(move || {
                let (mut server_read, mut client_write) = (server, client);
                let mut buffer = [0u8; 16 * 1024];
                while let Ok(read) = server_read.read(&mut buffer) {
                    if read == 0 || stalled.load(Ordering::SeqCst) {
                        break;
                    }
                    if forwarded.fetch_add(read, Ordering::SeqCst) + read > limit {
                        stalled.store(true, Ordering::SeqCst);
                        // Keep the client socket open and silent until the test ends.
                        std::thread::sleep(Duration::from_secs(60));
                        break;
                    }
                    if client_write.write_all(&buffer[..read]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    address
}

#[tokio::test]
async fn an_endpoint_that_stops_answering_half_way_is_refused() {
    let Some(moto) = start_moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), Scale::Demo, CurFormat::Parquet, 1, 32);
    upload(&moto.url, dir.path()).await;
    let database_url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let store = crate::helpers::connect(&database_url).await;
    let before = snapshot(store.as_ref()).await;
    // Listing and the manifest take a few kB; the data file is megabytes: stop inside it.
    let proxy = stalling_proxy(moto.url.clone(), 256 * 1024);
    let started = Instant::now();
    let output = ingest_from(&proxy, &database_url, &format!("s3://{BUCKET}/cur/{EXPORT}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("{EXPORT}-00001.snappy.parquet")), "names the file: {stderr}");
    assert!(stderr.contains("stopped sending data"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(60), "gives up after the timeout, not never");
    assert_eq!(before, snapshot(store.as_ref()).await);
}

/// Two data files with the same base name in different folders (as CREATE_NEW deliveries
/// name them) are two files: each downloads under its whole key, neither overwrites the other.
#[tokio::test]
async fn data_files_with_the_same_base_name_stay_distinct() {
    use polars::prelude::*;
    let Some(moto) = start_moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), Scale::Demo, CurFormat::Parquet, 1, 32);
    // The month's one data file, split in two halves with the same name in two folders.
    let period = export_root(dir.path()).join("data/BILLING_PERIOD=2026-10");
    let name = format!("{EXPORT}-00001.snappy.parquet");
    let whole = ParquetReader::new(std::fs::File::open(period.join(&name)).unwrap()).finish().unwrap();
    std::fs::remove_file(period.join(&name)).unwrap();
    let half = whole.height() / 2;
    let mut keys = Vec::new();
    for (folder, mut part) in
        [("part-a", whole.slice(0, half)), ("part-b", whole.slice(half as i64, whole.height() - half))]
    {
        std::fs::create_dir_all(period.join(folder)).unwrap();
        ParquetWriter::new(std::fs::File::create(period.join(folder).join(&name)).unwrap())
            .finish(&mut part)
            .unwrap();
        keys.push(format!("s3://{BUCKET}/cur/{EXPORT}/data/BILLING_PERIOD=2026-10/{folder}/{name}"));
    }
    let manifest =
        export_root(dir.path()).join(format!("metadata/BILLING_PERIOD=2026-10/{EXPORT}-Manifest.json"));
    let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    json["dataFiles"] = serde_json::json!(keys);
    std::fs::write(&manifest, json.to_string()).unwrap();
    upload(&moto.url, dir.path()).await;
    let database_url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let output = ingest_from(&moto.url, &database_url, &format!("s3://{BUCKET}/cur/{EXPORT}"));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let store = crate::helpers::connect(&database_url).await;
    assert_matches_truth(store.as_ref(), &truth(dir.path(), "2026-10"), "2026-10").await;
}

/// A remote cluster's Spark output in S3 (`--spark-output s3://…`): the part files of each
/// output are downloaded in the order of their rows (`c000`, `c001`, …, `c1000`; not
/// `_SUCCESS`), and the run's prefix is emptied once read. Spark itself cannot write to S3
/// here (its Hadoop S3 connector is not in pyspark), so the objects are put as it would.
#[tokio::test(flavor = "multi_thread")]
async fn spark_output_in_s3_is_fetched_in_row_order_and_removed() {
    use gpuledger::sources::objects::S3Options;
    use gpuledger::sources::spark::{SparkOptions, SparkOutput};
    let Some(moto) = start_moto() else { return };
    if std::env::var("AWS_ACCESS_KEY_ID").is_err() {
        eprintln!("AWS_ACCESS_KEY_ID is not set: test skipped (scripts/test sets moto's test credentials)");
        return;
    }
    let s3 = client(&moto.url).await;
    s3.create_bucket().bucket("spark-out").send().await.unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let options = SparkOptions {
        s3_scheme: Some("s3a".into()),
        output: Some("s3://spark-out/runs/".into()),
        output_s3: S3Options { endpoint_url: Some(moto.url.clone()), ..S3Options::default() },
        ..SparkOptions::default()
    };
    let output = SparkOutput::open(&options, "2026-10".parse().unwrap(), scratch.path()).await.unwrap();
    let SparkOutput::S3 { spark_uri, .. } = &output else { panic!("an S3 output") };
    // Spark is told the s3a:// name of the run's own prefix.
    let run = spark_uri.strip_prefix("s3a://spark-out/").unwrap().to_string();
    assert!(run.starts_with("runs/gpuledger-spark-2026-10-"), "{spark_uri}");
    for (name, body) in [
        ("pods/_SUCCESS", ""),
        ("pods/part-00000-a1-c1000.snappy.parquet", "third"),
        ("pods/part-00000-a1-c000.snappy.parquet", "first"),
        ("pods/part-00000-a1-c001.snappy.parquet", "second"),
        ("pod_hours/part-00000-b2-c000.snappy.parquet", "hours"),
    ] {
        let key = format!("{run}/{name}");
        s3.put_object()
            .bucket("spark-out")
            .key(key)
            .body(body.as_bytes().to_vec().into())
            .send()
            .await
            .unwrap();
    }
    let texts = tokio::task::spawn_blocking(move || {
        let texts: Vec<String> =
            output.parts("pods").unwrap().iter().map(|path| std::fs::read_to_string(path).unwrap()).collect();
        output.remove();
        texts
    })
    .await
    .unwrap();
    assert_eq!(texts, ["first", "second", "third"]);
    let left = s3.list_objects_v2().bucket("spark-out").prefix("runs/").send().await.unwrap();
    assert!(left.contents().is_empty(), "the run's output is removed: {:?}", left.contents());
}

/// FOCUS bills from S3 through the same SDK (#40): the FinOps Foundation's sample under a
/// prefix is four bills, as from a folder.
#[tokio::test]
async fn focus_files_in_s3_are_read_as_from_a_folder() {
    let Some(moto) = start_moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let s3 = client(&moto.url).await;
    s3.create_bucket().bucket(BUCKET).send().await.unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/focus/focus_sample.csv");
    s3.put_object()
        .bucket(BUCKET)
        .key("billing/focus/2024-09/focus_sample.csv")
        .body(aws_sdk_s3::primitives::ByteStream::from_path(&sample).await.unwrap())
        .send()
        .await
        .unwrap();
    let database_url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let source = format!("s3://{BUCKET}/billing/focus");
    let output = gl_moto(
        &database_url,
        &["ingest", "focus", &source, "--endpoint-url", &moto.url, "--s3-timeout", "3"],
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let bills: Vec<(String, String, String)> = printed["bills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["period"].as_str().unwrap().into(),
                b["provider"].as_str().unwrap().into(),
                b["billed_total"].as_str().unwrap().into(),
            )
        })
        .collect();
    // The same four bills the folder gives (ingest_focus.rs works their sums by hand).
    assert_eq!(
        bills,
        vec![
            ("2024-09".into(), "aws".into(), "18.006639".into()),
            ("2024-09".into(), "azure".into(), "1.976514".into()),
            ("2024-09".into(), "oci".into(), "0.297074".into()),
            ("2024-10".into(), "oci".into(), "0.240000".into()),
        ]
    );
    let store = crate::helpers::connect(&database_url).await;
    let runs = store.ingest_runs(5).await.unwrap();
    let focus = runs.iter().find(|r| r.kind == gpuledger::domain::runs::RunKind::Focus).unwrap();
    assert_eq!(focus.source, source);
}
