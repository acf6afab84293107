//! Cost alerts through the binary: the demo's story (a wasteful September, a fixed October)
//! fires the waste alerts when September arrives and resolves them when October does, each
//! delivered to a local receiver exactly once (a first 503 retried), and a forced re-run of
//! both months sends nothing again.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use gpuledger::period::Period;
use gpuledger::synth::{self, CurFormat, GenerateOptions, Scale};
use serde_json::Value;

use crate::ingest_cur::{EXPORT, export_root, truth};

/// A webhook receiver on a free port: answers its first request 503, every later one 200,
/// and keeps the bodies it accepted.
fn receiver() -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook/secret-token", listener.local_addr().unwrap());
    let accepted = Arc::new(Mutex::new(Vec::new()));
    let kept = accepted.clone();
    std::thread::spawn(move || {
        let mut first = true;
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let status = if std::mem::take(&mut first) { "503 Service Unavailable" } else { "200 OK" };
            if status.starts_with("200") {
                kept.lock().unwrap().push(serde_json::from_slice(&body).unwrap());
            }
            let mut stream = stream;
            let _ = stream.write_all(
                format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").as_bytes(),
            );
        }
    });
    (url, accepted)
}

fn gpuledger(database_url: &str, args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_gpuledger"))
        .args(["--database-url", database_url])
        .args(args)
        .env("GPULEDGER_PUBLIC_URL", "https://ledger.example")
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    output
}

/// (rule, status) of every accepted delivery, in order.
fn received(accepted: &Mutex<Vec<Value>>) -> Vec<(String, String)> {
    accepted
        .lock()
        .unwrap()
        .iter()
        .map(|body| {
            let alert = &body["alerts"][0];
            (
                alert["labels"]["alertname"].as_str().unwrap().to_string(),
                body["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn alerts(database_url: &str) -> Vec<Value> {
    let output = gpuledger(database_url, &["alerts", "list", "--format", "json"]);
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    json["alerts"].as_array().unwrap().clone()
}

fn find<'a>(alerts: &'a [Value], rule: &str) -> &'a Value {
    alerts.iter().find(|a| a["rule"] == rule).unwrap_or_else(|| panic!("no {rule} in {alerts:?}"))
}

/// The fleet's idle share of allocated GPU-hours in `period`, from the generator's truth, as
/// the alert writes it.
fn idle_share(out: &Path, period: &str) -> String {
    let namespaces = truth(out, period)["namespaces"].as_object().unwrap().clone();
    let sum = |field: &str| namespaces.values().map(|n| n[field].as_f64().unwrap()).sum::<f64>();
    format!("{:.1} %", sum("gpu_hours_idle") / sum("gpu_hours_allocated") * 100.0)
}

#[tokio::test]
async fn the_demo_story_fires_and_resolves_each_alert_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    let options = GenerateOptions {
        out: out.to_path_buf(),
        seed: 42,
        months: 2,
        end: "2026-10".parse::<Period>().unwrap(),
        scale: Scale::Demo,
        format: CurFormat::Parquet,
        bucket: "test-bucket".into(),
        prefix: "cur".into(),
        export_name: EXPORT.into(),
        metrics: true,
        fixes_from: Some("2026-10".parse().unwrap()),
        history_months: 0,
    };
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
    synth::generate(&options, &progress).unwrap();
    let url = format!("sqlite:{}", out.join("ledger.db").display());
    let store = crate::helpers::connect(&url).await;
    drop(store);
    let (hook, accepted) = receiver();
    gpuledger(
        &url,
        &[
            "alerts",
            "webhook",
            "add",
            "--url",
            &hook,
            "--format",
            "alertmanager",
            "--min-severity",
            "warning",
        ],
    );
    let listed = String::from_utf8(gpuledger(&url, &["alerts", "webhook", "list"]).stdout).unwrap();
    assert!(!listed.contains("secret-token"), "the URL is a secret: {listed}");
    for period in ["2026-09", "2026-10"] {
        let file = out.join("metrics").join(format!("{period}.om")).display().to_string();
        gpuledger(&url, &["ingest", "prometheus", "--file", &file, "--period", period]);
    }
    let export = export_root(out).display().to_string();

    // September, the wasteful month, arrives: the waste alerts fire.
    let september = gpuledger(&url, &["ingest", "cur", &export, "--period", "2026-09"]);
    assert!(!String::from_utf8_lossy(&september.stderr).contains("secret-token"), "never in a log");
    let now = alerts(&url);
    for rule in ["idle_gpu_hours", "gpu_utilization", "training_spot_adoption"] {
        let alert = find(&now, rule);
        assert_eq!(
            (alert["state"].as_str(), alert["subject"].as_str()),
            (Some("firing"), Some("fleet")),
            "{alert}"
        );
        assert_eq!(alert["severity"], "warning");
        assert!(alert["since"].as_str().unwrap().starts_with("20"), "{alert}");
    }
    assert_eq!(find(&now, "idle_gpu_hours")["value"], idle_share(out, "2026-09"));
    assert_eq!(find(&now, "idle_gpu_hours")["link"], "/gpus?period=2026-09");
    let mut fired = received(&accepted);
    fired.sort();
    assert_eq!(
        fired,
        [
            ("gpu_utilization".to_string(), "firing".to_string()),
            ("idle_gpu_hours".into(), "firing".into()),
            ("training_spot_adoption".into(), "firing".into()),
        ],
        "each once, the first one after a 503"
    );
    let body = accepted.lock().unwrap()[0].clone();
    assert_eq!(body["version"], "4");
    assert!(
        body["alerts"][0]["generatorURL"].as_str().unwrap().starts_with("https://ledger.example/"),
        "{body}"
    );

    // October, with the fixes, arrives: they resolve.
    gpuledger(&url, &["ingest", "cur", &export, "--period", "2026-10"]);
    let now = alerts(&url);
    for rule in ["idle_gpu_hours", "gpu_utilization", "training_spot_adoption"] {
        assert_eq!(find(&now, rule)["state"], "resolved");
        assert!(find(&now, rule)["resolved_at"].is_string());
    }
    let after_october = received(&accepted);
    for rule in ["idle_gpu_hours", "gpu_utilization", "training_spot_adoption"] {
        for status in ["firing", "resolved"] {
            let count = after_october.iter().filter(|(r, s)| r == rule && s == status).count();
            assert_eq!(count, 1, "{rule} {status} delivered once: {after_october:?}");
        }
    }
    // Info alerts (a workload's cost per inference) do not reach a warning webhook.
    assert!(after_october.iter().all(|(rule, _)| rule != "cost_per_inference"));

    // Both months delivered again and recomputed: nothing new is sent.
    gpuledger(&url, &["ingest", "cur", &export, "--force"]);
    gpuledger(&url, &["alerts", "evaluate"]);
    assert_eq!(received(&accepted), after_october);

    // The page says the same as the command.
    let state =
        gpuledger::web::AppState::new(crate::helpers::connect(&url).await, gpuledger::web::AuthConfig::off());
    let page = {
        use http_body_util::BodyExt;
        use tower::ServiceExt;
        let request = axum::http::Request::builder()
            .uri("/alerts?format=json")
            .body(axum::body::Body::empty())
            .unwrap();
        let response = gpuledger::web::router(state).oneshot(request).await.unwrap();
        assert_eq!(response.status(), 200);
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice::<Value>(&bytes).unwrap()
    };
    assert_eq!(page["alerts"].as_array().unwrap(), &alerts(&url));
}
