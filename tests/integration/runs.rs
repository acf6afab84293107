//! Runs and revisions: every ingest and compute is recorded however it ends, a period left
//! ingested but not computed (a failure, a kill) is computed by the next run, concurrent
//! writers on Postgres never duplicate, and the schema is guarded (checksums, one migrator,
//! `serve --no-migrate`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpuledger::pipeline;
use gpuledger::report::NamespaceReport;
use gpuledger::store::{self, RunStatus, Store, StoreError};
use gpuledger::synth::{CurFormat, Scale};

use crate::app::TestApp;
use crate::helpers;
use crate::ingest_cur::{export_root, generate, generate_with, ingest, run, truth};

fn sqlite_url(dir: &Path, name: &str) -> String {
    format!("sqlite:{}", dir.join(name).display())
}

/// Each stored period as text: its namespace report and its rollups without the fields that
/// say when and at which revision they were written. Equal texts mean equal numbers.
async fn numbers(store: &dyn Store) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for period in store.periods().await.unwrap() {
        let report = NamespaceReport::load(store, period.period.parse().unwrap(), None, false).await.unwrap();
        let mut rollups = store.rollups(&period.period).await.unwrap().expect("every period is computed");
        (rollups.period.computed_at, rollups.period.revision, rollups.period.input_revision) = (0, 0, 0);
        let text = format!("{}\n{}", report.to_json(), serde_json::to_string(&rollups).unwrap());
        out.insert(period.period, text);
    }
    out
}

#[tokio::test]
async fn a_failed_ingest_is_recorded_shown_in_the_banner_and_counted_in_metrics() {
    let app = TestApp::empty().await;
    generate(app.data(), Scale::Demo, CurFormat::Parquet, 1, 51);
    let data = export_root(app.data()).join("data").join("BILLING_PERIOD=2026-10");
    let file = std::fs::read_dir(&data).unwrap().flatten().next().unwrap().path();
    let whole = std::fs::read(&file).unwrap();
    std::fs::write(&file, &whole[..whole.len() / 2]).unwrap();

    let source = export_root(app.data()).display().to_string();
    let options = gpuledger::ingest::CurIngestOptions { source, ..Default::default() };
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
    let job = || pipeline::ingest_cur_and_compute(app.store(), &options, &progress);
    let job_result = job().await.unwrap();
    let failure = job_result.failure.expect("a truncated Parquet file fails the ingest").to_string();
    assert!(failure.contains(&file.file_name().unwrap().to_string_lossy().to_string()), "{failure}");
    assert!(app.store().periods().await.unwrap().is_empty(), "nothing of the period was written");

    let data = app.json("/data?format=json").await;
    let run = &data["ingest_runs"][0];
    assert_eq!((run["kind"].as_str(), run["status"].as_str()), (Some("cur"), Some("failed")), "{run}");
    assert_eq!(run["error"].as_str(), Some(failure.as_str()));
    let html = app.page("/").await;
    assert!(html.contains("The latest ingest (cur 2026-10) failed"), "{html}");
    let metrics = app.page("/metrics").await;
    assert!(metrics.contains("gpuledger_ingest_runs{kind=\"cur\",status=\"failed\"} 1"), "{metrics}");

    // The file is delivered whole again: the next run succeeds and the banner clears.
    std::fs::write(&file, &whole).unwrap();
    let job_result = job().await.unwrap();
    assert!(job_result.failure.is_none());
    assert_eq!(job_result.computed.len(), 1, "the period it ingested is computed by the same job");
    let html = app.page("/").await;
    assert!(!html.contains("failed"), "{html}");
    let runs = app.store().ingest_runs(10).await.unwrap();
    let kinds: Vec<(&str, RunStatus)> = runs.iter().map(|r| (r.kind.as_str(), r.status)).collect();
    assert_eq!(
        kinds,
        [("compute", RunStatus::Succeeded), ("cur", RunStatus::Succeeded), ("cur", RunStatus::Failed)],
        "newest first"
    );
}

#[tokio::test]
async fn periods_left_uncomputed_are_found_and_older_rollups_never_overwrite_newer() {
    let dir = tempfile::tempdir().unwrap();
    generate_with(dir.path(), Scale::Demo, CurFormat::Parquet, 2, 52, true);
    let mut stores: Vec<Box<dyn Store>> =
        vec![crate::helpers::connect(&sqlite_url(dir.path(), "p.db")).await];
    let postgres = helpers::fresh_postgres().await;
    if let Some(database) = &postgres {
        stores.push(crate::helpers::connect(&database.url).await);
    }
    for store in &stores {
        let store = store.as_ref();
        // The ingest alone (as a run killed before its compute leaves it): both pending.
        ingest(store, &export_root(dir.path()).display().to_string(), false).await;
        assert_eq!(store.pending_periods().await.unwrap(), ["2026-09", "2026-10"], "{}", store.backend());
        let computed = pipeline::compute_pending(store).await.unwrap();
        assert_eq!(computed.len(), 2);
        assert!(store.pending_periods().await.unwrap().is_empty());
        assert!(pipeline::compute_pending(store).await.unwrap().is_empty(), "nothing left");

        // New metrics for October make October (only) pending again.
        let old = store.rollups("2026-10").await.unwrap().unwrap();
        let revision = store.data_revision().await.unwrap();
        let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
        let metrics = gpuledger::ingest::metrics::MetricsIngestOptions::file(
            dir.path().join("metrics").join("2026-10.om"),
            Some("2026-10".parse().unwrap()),
        );
        gpuledger::ingest::metrics::ingest_metrics(store, &metrics, &progress).await.unwrap();
        assert!(store.data_revision().await.unwrap() > revision, "a write raises the revision");
        assert_eq!(store.pending_periods().await.unwrap(), ["2026-10"]);
        // Rollups computed from the older inputs are refused: the data changed since.
        match store.replace_rollups(&old).await {
            Err(StoreError::Stale(message)) => assert!(message.contains("2026-10"), "{message}"),
            other => panic!("stale rollups must be refused, got {other:?}"),
        }
        pipeline::compute_pending(store).await.unwrap();
        let new = store.rollups("2026-10").await.unwrap().unwrap();
        assert!(new.period.input_revision > old.period.input_revision);
        assert!(new.period.revision > old.period.revision, "the caches see a new revision");
        assert!(matches!(store.replace_rollups(&old).await, Err(StoreError::Stale(_))), "older never wins");
        assert_eq!(store.rollups("2026-10").await.unwrap().unwrap(), new);
    }
}

/// Which phase a killed run's log last announced (`phase="read"` …), or `start`.
fn last_phase(log: &str) -> String {
    log.lines()
        .rev()
        .filter_map(|line| line.split("phase=").nth(1))
        .filter_map(|rest| rest.trim_start_matches('"').split(['"', ' ']).next())
        .next()
        .unwrap_or("start")
        .to_string()
}

#[test]
fn a_cur_ingest_killed_at_20_random_moments_recovers_on_a_plain_rerun() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), Scale::Demo, CurFormat::Parquet, 3, 53);
    let source = export_root(dir.path()).display().to_string();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let read_numbers = |url: &str| {
        runtime.block_on(async {
            let store = crate::helpers::connect(url).await;
            let pending = store.pending_periods().await.unwrap();
            let running = store
                .ingest_runs(1000)
                .await
                .unwrap()
                .iter()
                .filter(|r| r.status == RunStatus::Running)
                .count();
            (numbers(store.as_ref()).await, pending, running)
        })
    };

    // An uninterrupted ingest: the numbers every re-run must reproduce, and how long it takes
    // (the shorter of two runs, so kills land inside a run rather than after it).
    let reference_url = sqlite_url(dir.path(), "reference.db");
    let mut uninterrupted = Duration::MAX;
    for name in ["reference.db", "timing.db"] {
        let started = Instant::now();
        let output = run(&["--database-url", &sqlite_url(dir.path(), name), "ingest", "cur", &source]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        uninterrupted = uninterrupted.min(started.elapsed());
    }
    let (reference, pending, _) = read_numbers(&reference_url);
    assert_eq!(reference.keys().collect::<Vec<_>>(), ["2026-08", "2026-09", "2026-10"]);
    assert!(pending.is_empty());

    // Twenty kill moments spread over the whole run (a fixed seed: the same moments every
    // time), then three kills the moment a period announces its commit (a window too short
    // for chance to hit).
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut kills: Vec<Kill> = (0..20)
        .map(|_| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let fraction = (seed >> 11) as f64 / (1u64 << 53) as f64;
            Kill::At(uninterrupted.mul_f64(0.02 + 0.98 * fraction))
        })
        .collect();
    kills.extend((1..=3).map(Kill::OnCommit));
    let mut landed: BTreeMap<String, usize> = BTreeMap::new();
    let mut killed = Vec::new();
    for (attempt, kill) in kills.iter().enumerate() {
        let url = sqlite_url(dir.path(), &format!("crash-{attempt}.db"));
        let (phase, pid) = kill_ingest(&url, &source, kill);
        killed.push(pid.to_string());
        let key = match kill {
            Kill::At(_) => phase.clone(),
            Kill::OnCommit(_) => format!("{phase} (on commit)"),
        };
        *landed.entry(key).or_default() += 1;

        let output = run(&["--database-url", &url, "ingest", "cur", &source]);
        assert!(
            output.status.success(),
            "re-run after {kill:?} in {phase}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let (after, pending, running) = read_numbers(&url);
        assert!(pending.is_empty(), "{kill:?} in {phase}: still pending {pending:?}");
        assert_eq!(running, 0, "{kill:?} in {phase}: the killed run is marked interrupted");
        for (period, text) in &reference {
            assert_eq!(after.get(period), Some(text), "{kill:?} in {phase}: {period} differs");
        }
        assert_eq!(after.len(), reference.len());
    }
    // The killed runs' scratch folders were cleaned up by the runs after them (only this
    // test's kills count: other tests run processes of their own meanwhile).
    let scratch: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|name| name.starts_with("gpuledger-ingest-"))
        .filter(|name| {
            let pid = name.trim_start_matches("gpuledger-ingest-").split('-').next().unwrap_or("");
            killed.iter().any(|k| k == pid) && !Path::new(&format!("/proc/{pid}")).exists()
        })
        .collect();
    assert!(scratch.is_empty(), "abandoned scratch folders left: {scratch:?}");
    eprintln!(
        "crash test: uninterrupted ingest {:.2} s; {} kills landed in {:?}",
        uninterrupted.as_secs_f64(),
        kills.len(),
        landed
    );
}

/// When the crash test kills an ingest.
#[derive(Debug)]
enum Kill {
    /// This long after it started.
    At(Duration),
    /// As soon as the nth period announces its commit.
    OnCommit(usize),
}

/// Runs `ingest cur` and SIGKILLs it as `kill` says; returns the phase its log last
/// announced (or `finished` when it ended first).
fn kill_ingest(url: &str, source: &str, kill: &Kill) -> (String, u32) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpuledger"))
        .args(["--database-url", url, "ingest", "cur", source])
        .env("RUST_LOG", "gpuledger=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The log is read on a thread, line by line, so a kill can follow a line at once.
    let stderr = child.stderr.take().unwrap();
    let (lines, received) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = String::new();
    let mut finished = false;
    match kill {
        Kill::At(at) => {
            std::thread::sleep(*at);
            finished = child.try_wait().unwrap().is_some();
        }
        Kill::OnCommit(nth) => {
            let mut commits = 0;
            while let Ok(line) = received.recv_timeout(Duration::from_secs(60)) {
                log.push_str(&line);
                log.push('\n');
                if line.contains("phase=\"commit\"") {
                    commits += 1;
                    if commits == *nth {
                        break;
                    }
                }
            }
        }
    }
    child.kill().ok(); // SIGKILL on Unix
    child.wait().unwrap();
    reader.join().unwrap();
    log.extend(received.try_iter().map(|line| line + "\n"));
    let phase = if finished { "finished".to_string() } else { last_phase(&log) };
    (phase, child.id())
}

#[tokio::test]
async fn concurrent_ingests_of_one_window_and_one_period_on_postgres_never_duplicate() {
    let Some(database) = helpers::fresh_postgres().await else { return };
    let dir = tempfile::tempdir().unwrap();
    generate_with(dir.path(), Scale::Demo, CurFormat::Parquet, 1, 54, true);
    let store = crate::helpers::connect(&database.url).await;
    let source = export_root(dir.path()).display().to_string();
    let metrics = dir.path().join("metrics").join("2026-10.om").display().to_string();
    let both = |args: &[&str]| {
        let spawn = || {
            Command::new(env!("CARGO_BIN_EXE_gpuledger"))
                .args(["--database-url", &database.url])
                .args(args)
                .env("RUST_LOG", "warn")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (first, second) = (spawn(), spawn());
        [first.wait_with_output().unwrap(), second.wait_with_output().unwrap()]
    };

    // The same CUR period twice at once (forced): each succeeds, the second waits for the first.
    for output in both(&["ingest", "cur", &source, "--force"]) {
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    crate::ingest_cur::assert_matches_truth(store.as_ref(), &truth(dir.path(), "2026-10"), "2026-10").await;
    // One period's pod-days, not two: the pod-day sums equal the bill's Kubernetes cost.
    let inputs = store.compute_inputs("2026-10", 0.10).await.unwrap().unwrap();
    let kubernetes: i64 = inputs.pod_days.iter().map(|d| d.split_cost_nanos + d.unused_cost_nanos).sum();
    assert_eq!(
        gpuledger::money::micros_from_nanos(kubernetes),
        inputs.kubernetes_micros,
        "one period, not two"
    );

    // The same metrics window twice at once: the window holds one ingest's rows.
    let outputs = both(&["ingest", "prometheus", "--file", &metrics, "--period", "2026-10"]);
    let mut gpu_rows = Vec::new();
    for output in &outputs {
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        gpu_rows.push(result["gpu_rows"].as_u64().unwrap() as usize);
    }
    assert_eq!(gpu_rows[0], gpu_rows[1]);
    let period: gpuledger::period::Period = "2026-10".parse().unwrap();
    let usage = store.gpu_usage(period.start(), period.end()).await.unwrap();
    assert_eq!(usage.len(), gpu_rows[0], "no duplicated usage rows");
    let runs = store.ingest_runs(100).await.unwrap();
    for kind in [gpuledger::domain::runs::RunKind::Cur, gpuledger::domain::runs::RunKind::Prometheus] {
        let statuses: Vec<RunStatus> = runs.iter().filter(|r| r.kind == kind).map(|r| r.status).collect();
        assert_eq!(statuses, [RunStatus::Succeeded; 2], "{kind}: one clear outcome each");
    }
    assert!(store.pending_periods().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_schema_is_guarded_checksums_one_migrator_and_no_migrate() {
    let dir = tempfile::tempdir().unwrap();
    // An empty database is refused without migrating, and says what to run.
    let url = sqlite_url(dir.path(), "schema.db");
    let refused = store::connect_without_migrating(&url).await.err().expect("an empty schema is out of date");
    assert!(refused.to_string().contains("gpuledger migrate"), "{refused}");
    let output = run(&["--database-url", &url, "serve", "--no-migrate", "--listen", "127.0.0.1:0"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("schema is at version 0"));

    let store = crate::helpers::connect(&url).await;
    let status = store.schema_status().await.unwrap();
    assert!(status.is_current() && status.applied >= 5, "{status:?}");
    assert!(store::connect_without_migrating(&url).await.is_ok());
    drop(store);
    // An applied migration whose text changed is refused by name.
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url).await.unwrap();
    sqlx::query("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 3")
        .execute(&mut conn)
        .await
        .unwrap();
    let refused = store::connect(&url).await.err().expect("an edited migration is refused");
    assert!(refused.to_string().contains("migration 3 (rollups) was edited"), "{refused}");

    // Postgres: replicas starting together take turns migrating, and the schemas match.
    let Some(database) = helpers::fresh_postgres().await else { return };
    let (first, second) = tokio::join!(store::connect(&database.url), store::connect(&database.url));
    let (first, _second) = (first.unwrap(), second.unwrap());
    assert!(first.schema_status().await.unwrap().is_current());
    crate::helpers::connect(&sqlite_url(dir.path(), "fresh.db")).await;
    let mut sqlite =
        <sqlx::SqliteConnection as sqlx::Connection>::connect(&sqlite_url(dir.path(), "fresh.db"))
            .await
            .unwrap();
    let mut sqlite_columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p \
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY 1, 2",
    )
    .fetch_all(&mut sqlite)
    .await
    .unwrap();
    let mut pg = <sqlx::PgConnection as sqlx::Connection>::connect(&database.url).await.unwrap();
    let mut pg_columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text FROM information_schema.columns \
         WHERE table_schema = 'public' ORDER BY 1, 2",
    )
    .fetch_all(&mut pg)
    .await
    .unwrap();
    // Sorted here: the two databases collate names differently.
    sqlite_columns.sort();
    pg_columns.sort();
    assert!(sqlite_columns.len() > 100, "{} columns", sqlite_columns.len());
    assert_eq!(sqlite_columns, pg_columns, "SQLite and Postgres have the same tables and columns");
}
