//! Metrics ingest: generated metrics through a real Prometheus 2.42 (backfilled with promtool)
//! and through the offline file path give truth's used and idle GPU-hours and requests;
//! hour buckets are half-open; the real exporter samples' label styles are detected; a
//! server stopped half-way leaves the database as it was.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

use gpuledger::period::Period;
use gpuledger::report::usage::{GpuReport, InferenceReport};
use gpuledger::store::Store;
use gpuledger::synth::{CurFormat, Scale};
use serde_json::Value;

use crate::helpers;
use crate::ingest_cur::{export_root, generate_with, ingest, run, truth};
use crate::prom_server::{Prometheus, start_prometheus, timestamped_openmetrics};

const PERIOD: &str = "2026-10";

/// One demo month ending 2026-10, with metrics.
fn generate_with_metrics(out: &Path, seed: u64) {
    generate_with(out, Scale::Demo, CurFormat::Parquet, 1, seed, true);
}

fn metrics_file(out: &Path) -> String {
    out.join("metrics").join(format!("{PERIOD}.om")).display().to_string()
}

/// Runs `gpuledger ingest prometheus` with `args` against `database_url`.
fn ingest_metrics(database_url: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--database-url", database_url, "ingest", "prometheus"];
    all.extend(args);
    run(&all)
}

/// Checks `report gpu` and `report inference` against truth: allocated and idle GPU-hours
/// exactly (sums of whole and half hours), used GPU-hours within 0.1 %, requests and tokens
/// per workload exactly, and the GPU-hours no pod held equal to truth's unallocated hours.
async fn assert_usage_matches_truth(store: &dyn Store, truth: &Value) {
    let period: Period = PERIOD.parse().unwrap();
    let report = GpuReport::load(store, period, 0.10).await.unwrap();
    assert!(report.from_bill);
    let mut namespaces = 0;
    for (namespace, expected) in truth["namespaces"].as_object().unwrap() {
        let rows: Vec<_> = report.rows.iter().filter(|r| &r.namespace == namespace).collect();
        let sum = |f: fn(&gpuledger::engine::usage::GpuHours) -> f64| rows.iter().map(|r| f(r)).sum::<f64>();
        let allocated = expected["gpu_hours_allocated"].as_f64().unwrap();
        if allocated == 0.0 {
            continue;
        }
        namespaces += 1;
        assert_eq!(sum(|r| r.allocated_gpu_hours), allocated, "{namespace}: allocated");
        assert_eq!(
            sum(|r| r.idle_gpu_hours),
            expected["gpu_hours_idle"].as_f64().unwrap(),
            "{namespace}: idle"
        );
        assert_eq!(sum(|r| r.unmeasured_gpu_hours), 0.0, "{namespace}: every pod-hour has metrics");
        let used = expected["gpu_hours_used"].as_f64().unwrap();
        assert!((sum(|r| r.used_gpu_hours) - used).abs() <= used * 0.001, "{namespace}: used {used}");
    }
    assert!(namespaces >= 4, "the demo fleet has GPU tenants");
    for (model, hours) in truth["gpu_models"].as_object().unwrap() {
        let unattributed: f64 = report
            .rows
            .iter()
            .filter(|r| r.namespace == "(unattributed)" && &r.gpu_model == model)
            .map(|r| r.unattributed_gpu_hours)
            .sum();
        // Metrics see every unallocated GPU-hour except those of nodes still booting.
        let seen =
            hours["unallocated_gpu_hours"].as_f64().unwrap() - hours["booting_gpu_hours"].as_f64().unwrap();
        assert_eq!(unattributed, seen, "{model}: unattributed");
    }
    let inference = InferenceReport::load(store, period).await.unwrap();
    let mut served = 0;
    for (key, expected) in truth["workloads"].as_object().unwrap() {
        let rows: Vec<_> =
            inference.rows.iter().filter(|r| format!("{}/{}", r.namespace, r.workload) == *key).collect();
        let requests: f64 = rows.iter().map(|r| r.requests).sum();
        let tokens: f64 = rows.iter().map(|r| r.prompt_tokens + r.generation_tokens).sum();
        assert_eq!(requests, expected["requests"].as_f64().unwrap(), "{key}: requests");
        let expected_tokens =
            expected["prompt_tokens"].as_f64().unwrap() + expected["generation_tokens"].as_f64().unwrap();
        assert_eq!(tokens, expected_tokens, "{key}: tokens");
        served += usize::from(requests > 0.0);
        // Cost per inference = the cost of the hours that served / their requests.
        if let Some(expected) = expected.get("cost_per_inference").and_then(Value::as_f64) {
            let cost: f64 = rows.iter().filter_map(|r| r.cost).sum();
            assert!((cost - expected_cost(&truth["workloads"][key])).abs() < 0.01, "{key}: cost {cost}");
            assert!(((cost / requests) - expected).abs() <= expected * 0.001, "{key}: cost per inference");
        }
    }
    assert!(served >= 3, "vLLM and Triton workloads served requests");
}

/// The cost of the hours that served.
fn expected_cost(workload: &Value) -> f64 {
    workload["serving_cost"].as_f64().unwrap()
}

/// The usage rows of the month, for "nothing changed" checks (the run log is not data: a
/// failed run is recorded there).
async fn usage_snapshot(store: &dyn Store) -> String {
    let period: Period = PERIOD.parse().unwrap();
    format!(
        "{:?}\n{:?}\n{}",
        store.gpu_usage(period.start(), period.end()).await.unwrap(),
        store.inference_usage(period.start(), period.end()).await.unwrap(),
        store.data_revision().await.unwrap()
    )
}

#[tokio::test]
async fn the_metrics_file_matches_truth_on_sqlite_and_postgres_and_reingest_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    generate_with_metrics(dir.path(), 21);
    let truth = truth(dir.path(), PERIOD);
    let sqlite_url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let postgres = helpers::fresh_postgres().await;
    let mut urls = vec![sqlite_url];
    urls.extend(postgres.as_ref().map(|p| p.url.clone()));
    for url in &urls {
        let store = crate::helpers::connect(url).await;
        ingest(store.as_ref(), &export_root(dir.path()).display().to_string(), false).await;
        let output = ingest_metrics(url, &["--file", &metrics_file(dir.path())]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        assert_usage_matches_truth(store.as_ref(), &truth).await;
        // Again: the window is replaced, not added to.
        let before = store.gpu_usage(0, i64::MAX).await.unwrap();
        let output = ingest_metrics(url, &["--file", &metrics_file(dir.path())]);
        assert!(output.status.success());
        assert_eq!(before, store.gpu_usage(0, i64::MAX).await.unwrap(), "{url}: re-ingest changes nothing");
    }
}

#[tokio::test]
async fn a_real_prometheus_gives_the_same_answers_as_truth() {
    let dir = tempfile::tempdir().unwrap();
    generate_with_metrics(dir.path(), 22);
    let Some(prometheus) = start_prometheus(Path::new(&metrics_file(dir.path()))) else { return };
    let url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let store = crate::helpers::connect(&url).await;
    ingest(store.as_ref(), &export_root(dir.path()).display().to_string(), false).await;
    let output = ingest_metrics(&url, &["--url", &prometheus.url, "--period", PERIOD]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("utilization DCGM_FI_PROF_GR_ENGINE_ACTIVE (fallback DCGM_FI_DEV_GPU_UTIL)"),
        "{stderr}"
    );
    assert_usage_matches_truth(store.as_ref(), &truth(dir.path(), PERIOD)).await;
}

/// 2026-01-01T00:00:00Z: an hour boundary, in the past.
const H: i64 = 1_767_225_600;

#[tokio::test]
async fn a_sample_on_the_hour_belongs_to_the_hour_it_opens() {
    // One GPU held by pod p, sampled every 30 s from H to H+2h inclusive: 1.0 while t < H+1h,
    // 0.0 from H+1h. Hour H: 120 samples, mean exactly 1 (Prometheus's closed range would
    // add the 0.0 at H+1h: 121 samples, mean 0.9917). Hour H+1: 120 zeros. The sample at
    // H+2h is outside [H, H+2h). A request counter steps +1 every 30 s: 120 per hour.
    let dir = tempfile::tempdir().unwrap();
    let labels = r#"UUID="GPU-1",Hostname="n1",modelName="NVIDIA A10G",namespace="ml",pod="p",container="c""#;
    let mut text = String::from("# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n");
    for k in 0..=240 {
        let t = H + 30 * k;
        let value = if t < H + 3600 { "1.000000" } else { "0.000000" };
        text.push_str(&format!("DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{labels}}} {value} {t}\n"));
    }
    text.push_str("# TYPE vllm:request_success counter\n");
    for k in 0..=240 {
        text.push_str(&format!(
            "vllm:request_success_total{{model_name=\"m\",namespace=\"ml\",pod=\"p\"}} {k} {}\n",
            H + 30 * k
        ));
    }
    text.push_str("# EOF\n");
    let file = dir.path().join("hand.om");
    std::fs::write(&file, text).unwrap();
    let Some(prometheus) = start_prometheus(&file) else { return };
    let url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let (from, to) = (H.to_string(), (H + 7200).to_string());
    let output = ingest_metrics(&url, &["--url", &prometheus.url, "--from", &from, "--to", &to]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let store = crate::helpers::connect(&url).await;
    let rows = store.gpu_usage(H - 3600, H + 3 * 3600).await.unwrap();
    let hours: Vec<(i64, f64, i64, f64)> =
        rows.iter().map(|r| (r.hour - H, r.mean_utilization, r.samples, r.gpu_hours)).collect();
    assert_eq!(hours, vec![(0, 1.0, 120, 1.0), (3600, 0.0, 120, 1.0)]);
    let requests: Vec<(i64, f64)> = store
        .inference_usage(H - 3600, H + 3 * 3600)
        .await
        .unwrap()
        .iter()
        .map(|r| (r.hour - H, r.requests))
        .collect();
    assert_eq!(requests, vec![(0, 120.0), (3600, 120.0)]);
    // The file path reads the same samples into the same hours.
    let file_url = format!("sqlite:{}", dir.path().join("file.db").display());
    let output =
        ingest_metrics(&file_url, &["--file", &file.display().to_string(), "--from", &from, "--to", &to]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let file_store = crate::helpers::connect(&file_url).await;
    assert_eq!(rows, file_store.gpu_usage(H - 3600, H + 3 * 3600).await.unwrap());
}

fn sample(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Backfills `exposition` at 30 s steps over one hour from H and runs `--detect` on it.
fn detect(exposition: &str) -> Option<Value> {
    let dir = tempfile::tempdir().unwrap();
    let timestamps: Vec<i64> = (0..120).map(|k| H + 30 * k).collect();
    let file = dir.path().join("sample.om");
    std::fs::write(&file, timestamped_openmetrics(exposition, &timestamps)).unwrap();
    let prometheus = start_prometheus(&file)?;
    let url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let (from, to) = (H.to_string(), (H + 3600).to_string());
    let output = ingest_metrics(&url, &["--url", &prometheus.url, "--from", &from, "--to", &to, "--detect"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    Some(serde_json::from_slice(&output.stdout).unwrap())
}

#[tokio::test]
async fn the_real_exporter_samples_label_styles_are_detected() {
    // NVIDIA's A100 doc sample: DCP metrics, `Hostname`, `UUID`, one 1g.5gb MIG instance, no
    // pod labels.
    let Some(mig) = detect(&sample("dcgm_exporter_a100_mig_nvidia_docs.prom")) else { return };
    assert_eq!(mig["utilization_metric"], "DCGM_FI_PROF_GR_ENGINE_ACTIVE");
    assert_eq!(
        (mig["labels"]["host"].as_str(), mig["labels"]["uuid"].as_str()),
        (Some("Hostname"), Some("UUID"))
    );
    assert_eq!((mig["gpus"].as_u64(), mig["mig_instances"].as_u64()), (Some(1), Some(1)));
    assert_eq!(mig["mig_profiles"], serde_json::json!(["1g.5gb"]));
    // Datadog's fixture: exporter 2.x T4s with GPU_UTIL, plus an A10G with pod labels.
    let Some(t4) = detect(&sample("dcgm_exporter_t4_datadog_fixture.prom")) else { return };
    assert_eq!(t4["metrics"]["DCGM_FI_DEV_GPU_UTIL"], "util_percent");
    assert_eq!(
        (t4["labels"]["pod"].as_str(), t4["labels"]["namespace"].as_str()),
        (Some("pod"), Some("namespace"))
    );
    // The same A100 sample as a 4.6+ exporter scraped with honor_labels false shows it:
    // lower-case `hostname`, the workload in exported_*, the exporter's own pod label.
    let renamed =
        sample("dcgm_exporter_a100_mig_nvidia_docs.prom").replace("Hostname=", "hostname=").replace(
            "GPU_I_ID=\"13\"",
            "GPU_I_ID=\"13\",exported_namespace=\"ml\",exported_pod=\"train-0\",pod=\"dcgm-exporter-x\"",
        );
    let Some(exported) = detect(&renamed) else { return };
    assert_eq!(
        (exported["labels"]["host"].as_str(), exported["labels"]["pod"].as_str()),
        (Some("hostname"), Some("exported_pod"))
    );
}

#[tokio::test]
async fn mig_instances_count_their_slice_and_exporter_pods_are_not_workloads() {
    // The renamed A100 sample above through a real ingest: the MIG instance (1g.5gb = 1/7 of
    // the GPU) belongs to ml/train-0 for the hour, the parent-level series is dropped, and
    // the exporter's own `pod` label attributes nothing.
    let dir = tempfile::tempdir().unwrap();
    let renamed = sample("dcgm_exporter_a100_mig_nvidia_docs.prom").replace(
        "GPU_I_ID=\"13\"",
        "GPU_I_ID=\"13\",exported_namespace=\"ml\",exported_pod=\"train-0\",pod=\"dcgm-exporter-x\"",
    );
    let timestamps: Vec<i64> = (0..120).map(|k| H + 30 * k).collect();
    let file = dir.path().join("mig.om");
    std::fs::write(&file, timestamped_openmetrics(&renamed, &timestamps)).unwrap();
    let Some(prometheus) = start_prometheus(&file) else { return };
    let url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let (from, to) = (H.to_string(), (H + 3600).to_string());
    let output = ingest_metrics(&url, &["--url", &prometheus.url, "--from", &from, "--to", &to]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let store = crate::helpers::connect(&url).await;
    let rows = store.gpu_usage(H, H + 3600).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(
        (row.namespace.as_str(), row.pod.as_str(), row.gpu_instance.as_str()),
        ("ml", "train-0", "13")
    );
    // GR_ENGINE_ACTIVE of the instance in the sample: 0.995687.
    assert!((row.mean_utilization - 0.995687).abs() < 1e-9);
    assert!((row.gpu_hours - 1.0 / 7.0).abs() < 1e-12);
}

/// Forwards HTTP to Prometheus and stops the server once `limit` queries went through.
fn stopping_proxy(prometheus: Arc<Mutex<Prometheus>>, limit: usize) -> String {
    let upstream = prometheus.lock().unwrap().url.trim_start_matches("http://").to_string();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let queries = Arc::new(Mutex::new(0usize));
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(&upstream) else { continue }; // dropped: connection closed
            let (prometheus, queries) = (prometheus.clone(), queries.clone());
            let (mut client_read, mut server_write) =
                (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || {
                let mut buffer = [0u8; 16 * 1024];
                while let Ok(read) = client_read.read(&mut buffer) {
                    let text = String::from_utf8_lossy(&buffer[..read]);
                    let mut seen = queries.lock().unwrap();
                    *seen += text.matches("/api/v1/query").count();
                    if read == 0 || *seen > limit {
                        prometheus.lock().unwrap().stop();
                        break;
                    }
                    drop(seen);
                    if server_write.write_all(&buffer[..read]).is_err() {
                        break;
                    }
                }
            });
            let (mut server_read, mut client_write) = (server, client);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut server_read, &mut client_write);
            });
        }
    });
    address
}

#[tokio::test]
async fn prometheus_stopping_half_way_leaves_the_database_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    generate_with_metrics(dir.path(), 23);
    let url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    // The month is already there from the file; the server run would replace it.
    let output = ingest_metrics(&url, &["--file", &metrics_file(dir.path())]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let store = crate::helpers::connect(&url).await;
    let before = usage_snapshot(store.as_ref()).await;
    let Some(prometheus) = start_prometheus(Path::new(&metrics_file(dir.path()))) else { return };
    // A month in 1-hour chunks is ~3,700 queries; stop after 200.
    let proxy = stopping_proxy(Arc::new(Mutex::new(prometheus)), 200);
    let output =
        ingest_metrics(&url, &["--url", &proxy, "--period", PERIOD, "--chunk-hours", "1", "--attempts", "2"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("Prometheus at {proxy} could not be reached while reading")),
        "{stderr}"
    );
    assert_eq!(before, usage_snapshot(store.as_ref()).await, "nothing of the window was written");
    // The failure itself is recorded, with what went wrong.
    let run = store.ingest_runs(1).await.unwrap().remove(0);
    assert_eq!((run.kind.as_str(), run.status), ("prometheus", gpuledger::store::RunStatus::Failed));
    assert!(run.error.unwrap().contains("could not be reached"));
}
