//! `gpuledger run`: a pipeline that runs itself picks up a re-delivered CUR period within one
//! cycle, records each cycle with the next one's time, and lets one instance run at a time.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpuledger::synth::{CurFormat, Scale};

use crate::ingest_cur::{export_root, generate};

/// The child process, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn gpuledger(database_url: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gpuledger"));
    command.args(["--database-url", database_url]).args(args).env("RUST_LOG", "info");
    command
}

/// Waits up to a minute for `check` to hold.
async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_redelivered_period_is_picked_up_within_one_cycle_and_one_run_holds_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), Scale::Demo, CurFormat::Parquet, 1, 61);
    let url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let store = crate::helpers::connect(&url).await;
    let export = export_root(dir.path()).display().to_string();
    let child = gpuledger(&url, &["run", "--cur", &export, "--every", "2s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut running = Running(child);

    // The first cycle ingests and computes October. Its rollups commit before the cycle's
    // own record is finished (alerts and deliveries come after), so wait for the record, and
    // read the first one (a later, idle cycle may have finished by then).
    let finished_cycle = async || {
        let runs = store.ingest_runs(50).await.unwrap();
        runs.into_iter()
            .filter(|r| r.kind == gpuledger::domain::runs::RunKind::Pipeline && r.finished_at.is_some())
            .min_by_key(|r| r.id)
    };
    eventually("the first cycle", async || finished_cycle().await.is_some()).await;
    let first = store.cost_data_version("2026-10").await.unwrap().unwrap();
    let cycle = finished_cycle().await.unwrap();
    let report: serde_json::Value = serde_json::from_str(cycle.reconciliation.as_deref().unwrap()).unwrap();
    assert_eq!(report["cur_ingested"], serde_json::json!(["2026-10"]), "{report}");
    assert_eq!(report["next_run_at"].as_i64().unwrap(), cycle.started_at + 2, "{report}");

    // A second instance is refused while the first holds the lock.
    let second = gpuledger(&url, &["run", "--cur", &export, "--once"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success());
    assert!(stderr.contains("another gpuledger run holds the pipeline lock"), "{stderr}");

    // AWS re-delivers October (a new execution): the next cycle replaces it.
    generate(dir.path(), Scale::Demo, CurFormat::Parquet, 1, 62);
    eventually("the re-delivered period", async || {
        store.cost_data_version("2026-10").await.unwrap().is_some_and(|version| version != first)
            && store.pending_periods().await.unwrap().is_empty()
    })
    .await;
    let truth = crate::ingest_cur::truth(dir.path(), "2026-10");
    crate::ingest_cur::assert_matches_truth(store.as_ref(), &truth, "2026-10").await;
    // Unchanged cycles keep cycling without ingesting it again.
    let ingests = || async {
        store
            .ingest_runs(500)
            .await
            .unwrap()
            .iter()
            .filter(|r| r.kind == gpuledger::domain::runs::RunKind::Cur && r.period == "2026-10")
            .count()
    };
    let before = ingests().await;
    let cycles_before = store
        .ingest_runs(500)
        .await
        .unwrap()
        .iter()
        .filter(|r| r.kind == gpuledger::domain::runs::RunKind::Pipeline)
        .count();
    eventually("two more cycles", async || {
        store
            .ingest_runs(500)
            .await
            .unwrap()
            .iter()
            .filter(|r| r.kind == gpuledger::domain::runs::RunKind::Pipeline)
            .count()
            >= cycles_before + 2
    })
    .await;
    assert_eq!(ingests().await, before, "an unchanged period is not read again");

    // The holder dies: the next run takes the lock over (its process is gone) and runs once.
    drop(running.0.kill());
    let _ = running.0.wait();
    let once = gpuledger(&url, &["run", "--cur", &export, "--once"]).output().unwrap();
    assert!(once.status.success(), "{}", String::from_utf8_lossy(&once.stderr));
}

/// The deployment examples are valid YAML and JSON and say what the README says: replicas
/// that do not migrate, a CronJob that runs one cycle at a time, IRSA, least privilege.
#[test]
fn the_deployment_examples_parse_and_hold_together() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let policy: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("iam-policy.json")).unwrap()).unwrap();
    let mut actions: Vec<&str> = policy["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["Action"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()))
        .collect();
    actions.sort();
    assert_eq!(actions, ["ce:GetCostAndUsage", "s3:GetObject", "s3:ListBucket"]);
    let python = std::env::var("HOME")
        .map(|home| std::path::Path::new(&home).join(".cache/gpuledger-venv/bin/python"))
        .ok()
        .filter(|p| p.is_file());
    let Some(python) = python else {
        eprintln!(
            "the test virtual environment (PyYAML) is missing: manifest check skipped (scripts/test makes it)"
        );
        return;
    };
    let script = "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))";
    let output = Command::new(python)
        .args(["-c", script])
        .arg(root.join("kubernetes/gpuledger.yaml"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let documents: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
    let kinds: Vec<&str> = documents.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ServiceAccount", "Secret", "Job", "Deployment", "Service", "CronJob"]);
    let web = &documents[3]["spec"]["template"]["spec"]["containers"][0];
    assert!(web["args"].as_array().unwrap().iter().any(|a| a == "--no-migrate"), "{web}");
    let cron = &documents[5]["spec"];
    assert_eq!(cron["concurrencyPolicy"], "Forbid");
    let pod = &cron["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "gpuledger");
    let args: Vec<&str> =
        pod["containers"][0]["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(&args[..2], ["run", "--once"]);
    assert!(documents[0]["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].is_string());
    // Every pod refuses to run as root (the Containerfile's user is 10001).
    for spec in [&documents[2]["spec"]["template"]["spec"], &documents[3]["spec"]["template"]["spec"], pod] {
        assert_eq!(spec["securityContext"]["runAsNonRoot"], true, "{spec}");
    }
    // Every container's arguments are a command line this gpuledger accepts.
    use clap::Parser;
    for container in [&documents[2]["spec"]["template"]["spec"]["containers"][0], web, &pod["containers"][0]]
    {
        let args = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string());
        let line: Vec<String> = std::iter::once("gpuledger".to_string()).chain(args).collect();
        if let Err(error) = gpuledger::cli::Cli::try_parse_from(&line) {
            panic!("{line:?}: {error}");
        }
    }
}

/// The image the manifest names (`Containerfile`): built in one stage, run from a slim Debian
/// in another, as a numeric non-root user (so Kubernetes' `runAsNonRoot` can check it), with
/// gpuledger as the entry point and `serve` as the default command, which this gpuledger
/// accepts; the manifest's containers replace only the command.
#[test]
fn the_containerfile_ships_the_split_binary_as_a_non_root_serve_image() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("Containerfile")).unwrap();
    let instructions: Vec<&str> =
        text.lines().filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty()).collect();
    let with = |word: &str| -> Vec<&str> {
        instructions.iter().filter_map(|l| l.strip_prefix(word)).map(str::trim).collect()
    };
    let froms = with("FROM ");
    assert_eq!(froms.len(), 2, "{froms:?}");
    assert!(froms[0].ends_with(" AS build"), "{froms:?}");
    assert!(froms[1].ends_with("debian:bookworm-slim"), "{froms:?}");
    assert!(text.contains("scripts/dist /out"), "the build stage splits the binary with scripts/dist");
    assert_eq!(with("COPY --from=build "), ["/out/gpuledger /usr/local/bin/gpuledger"]);
    let user = with("USER ");
    assert_eq!(user.len(), 1);
    let uid: u32 = user[0].split(':').next().unwrap().parse().expect("a numeric user");
    assert_ne!(uid, 0);
    let json = |word: &str| -> Vec<String> { serde_json::from_str(with(word)[0]).unwrap() };
    assert_eq!(json("ENTRYPOINT "), ["/usr/local/bin/gpuledger"]);
    let line: Vec<String> = std::iter::once("gpuledger".to_string()).chain(json("CMD ")).collect();
    use clap::Parser;
    match gpuledger::cli::Cli::try_parse_from(&line) {
        Ok(cli) => assert!(matches!(cli.command, gpuledger::cli::Command::Serve(_)), "{line:?}"),
        Err(error) => panic!("{line:?}: {error}"),
    }
}

/// `scripts/dist` on the binary the tests run: the shipped file is under 150 MB, carries no
/// DWARF but keeps its symbols and a link to `gpuledger.debug`, which holds the line tables;
/// and it is the same program (`--version`).
#[test]
fn scripts_dist_splits_the_tested_binary_into_a_small_one_and_its_debug_info() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let release = env!("CARGO_BIN_EXE_gpuledger");
    let out = tempfile::tempdir().unwrap();
    let dist = Command::new(root.join("scripts/dist"))
        .arg(out.path())
        .env("GPULEDGER_BIN", release)
        .output()
        .unwrap();
    assert!(dist.status.success(), "{}", String::from_utf8_lossy(&dist.stderr));
    let shipped = out.path().join("gpuledger");
    let shipped_size = std::fs::metadata(&shipped).unwrap().len();
    let release_size = std::fs::metadata(release).unwrap().len();
    assert!(shipped_size < 150 << 20, "{shipped_size} bytes");
    assert!(shipped_size < release_size, "{shipped_size} of {release_size} bytes");
    let sections = |path: &std::path::Path| -> String {
        let output = Command::new("readelf").args(["-S", "--wide"]).arg(path).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    let shipped_sections = sections(&shipped);
    assert!(!shipped_sections.contains(".debug_line"), "{shipped_sections}");
    assert!(shipped_sections.contains(".gnu_debuglink"), "{shipped_sections}");
    assert!(shipped_sections.contains(".symtab"), "{shipped_sections}");
    assert!(sections(&out.path().join("gpuledger.debug")).contains(".debug_line"));
    let version = |path: &std::path::Path| Command::new(path).arg("--version").output().unwrap().stdout;
    assert_eq!(version(&shipped), version(std::path::Path::new(release)));
}
