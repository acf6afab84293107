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
    let resolved = accepted.lock().unwrap().iter().find(|b| b["status"] == "resolved").cloned().unwrap();
    let summary = resolved["alerts"][0]["annotations"]["summary"].as_str().unwrap().to_string();
    assert!(summary.starts_with("no longer found in 2026-10; it was: 2026-09: "), "{summary}");
    assert_ne!(resolved["alerts"][0]["endsAt"], "0001-01-01T00:00:00Z");
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

/// The alert, delivery and lock bookkeeping on both backends: a start and a resolve are one
/// event each with one delivery per webhook that takes their severity; a delivered one is
/// never pending again; a lock is one holder's at a time.
#[tokio::test]
async fn alert_and_lock_bookkeeping_on_sqlite_and_postgres() {
    use gpuledger::store::{Alert, LockHolder, Webhook};
    let dir = tempfile::tempdir().unwrap();
    let postgres = crate::helpers::fresh_postgres().await;
    let mut urls = vec![format!("sqlite:{}", dir.path().join("alerts.db").display())];
    urls.extend(postgres.as_ref().map(|p| p.url.clone()));
    for url in &urls {
        let store = crate::helpers::connect(url).await;
        let hook = |min: &str| Webhook {
            id: 0,
            url: "http://127.0.0.1:9/hook".into(),
            format: "slack".into(),
            min_severity: min.into(),
            created_at: 1,
        };
        let warning_hook = store.add_webhook(&hook("warning")).await.unwrap();
        let critical_hook = store.add_webhook(&hook("critical")).await.unwrap();
        let alert = |rule: &str, severity: &str| Alert {
            rule: rule.into(),
            subject: "fleet".into(),
            severity: severity.into(),
            state: "firing".into(),
            value: "23.1 %".into(),
            evidence: "2026-09: idle".into(),
            ..Alert::default()
        };
        let started = store.record_alerts(&[alert("idle_gpu_hours", "warning")], "", 100).await.unwrap();
        assert_eq!(started.len(), 1, "{url}");
        // Still firing: no new event, the evidence updated.
        assert!(
            store.record_alerts(&[alert("idle_gpu_hours", "warning")], "", 200).await.unwrap().is_empty()
        );
        let resolved = store.record_alerts(&[], "no longer found in 2026-10", 300).await.unwrap();
        assert_eq!((resolved[0].state.as_str(), resolved[0].at), ("resolved", 300), "{url}");
        assert_eq!(resolved[0].evidence, "no longer found in 2026-10; it was: 2026-09: idle");
        let stored = store.alerts().await.unwrap();
        assert_eq!((stored[0].since, stored[0].resolved_at), (100, Some(300)), "{url}");
        // Two warning events reach the warning webhook only.
        let pending = store.pending_deliveries(10).await.unwrap();
        assert_eq!(pending.len(), 2, "{url}");
        assert!(pending.iter().all(|p| p.webhook.id == warning_hook && p.webhook.id != critical_hook));
        store.mark_delivery(pending[0].event.id, warning_hook, Some(400), "").await.unwrap();
        store.mark_delivery(pending[1].event.id, warning_hook, None, "refused").await.unwrap();
        let left = store.pending_deliveries(10).await.unwrap();
        assert_eq!((left.len(), left[0].attempts), (1, 1), "{url}");
        assert!(store.pending_deliveries(1).await.unwrap().is_empty(), "given up after its attempts");

        let me = LockHolder { host: "host-a".into(), pid: 1, acquired_at: 1000, heartbeat_at: 1000 };
        let other = LockHolder { host: "host-b".into(), pid: 2, acquired_at: 1010, heartbeat_at: 1010 };
        let alive = |_: i64| true;
        assert_eq!(store.acquire_lock("pipeline", &me, 0, &alive).await.unwrap(), None, "{url}");
        let refused = store.acquire_lock("pipeline", &other, 0, &alive).await.unwrap();
        assert_eq!(refused.map(|h| h.host), Some("host-a".to_string()));
        assert!(store.heartbeat_lock("pipeline", &me, 1020).await.unwrap());
        // host-a stops renewing: after the stale mark, host-b takes over and host-a learns it.
        assert_eq!(store.acquire_lock("pipeline", &other, 1021, &alive).await.unwrap(), None);
        assert!(!store.heartbeat_lock("pipeline", &me, 1030).await.unwrap());
        store.release_lock("pipeline", &other).await.unwrap();
        assert_eq!(store.acquire_lock("pipeline", &me, 0, &alive).await.unwrap(), None);
    }
}
