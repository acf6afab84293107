//! `gpuledger run`: the pipeline that runs itself. One instance at a time (a lock in the
//! database, renewed while it sleeps), one log line per cycle, each cycle recorded as a
//! `pipeline` run with the next run's time (the Data page shows both).

use std::time::Duration;

use crate::cli::RunArgs;
use crate::domain::runs::RunKind;
use crate::ingest::CurIngestOptions;
use crate::pipeline::{self, CycleOptions, CycleReport};
use crate::sources::objects::S3Options;
use crate::store::{IngestOutcome, LockHolder, NewIngestRun, Store};

/// The lock's name.
const LOCK: &str = "pipeline";

/// A holder silent for this long has died (it renews every [`HEARTBEAT`]).
const STALE_SECONDS: i64 = 300;

const HEARTBEAT: Duration = Duration::from_secs(30);

fn utc(epoch: i64) -> String {
    chrono::DateTime::from_timestamp(epoch, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_default()
}

pub(super) async fn run(store: &dyn Store, args: RunArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.cur.is_some() || args.prometheus.is_some() || args.cost_explorer,
        "give at least one source: --cur, --prometheus or --cost-explorer"
    );
    let options = CycleOptions {
        cur: args.cur.map(|source| CurIngestOptions {
            source,
            s3: S3Options { endpoint_url: args.endpoint_url, ..S3Options::default() },
            max_drop_percent: args.max_drop,
            max_rise_percent: args.max_rise,
            ..CurIngestOptions::default()
        }),
        prometheus: args.prometheus.map(|url| crate::sources::prometheus::api::ApiOptions {
            url,
            bearer_token: args.bearer_token,
            basic_auth: None,
            timeout: Duration::from_secs(30),
            attempts: 3,
        }),
        cost_explorer: args.cost_explorer.then(|| crate::sources::cost_explorer::CeOptions {
            endpoint_url: args.ce_endpoint_url,
            ..Default::default()
        }),
    };
    let holder = LockHolder::this_process();
    let now = chrono::Utc::now().timestamp();
    if let Some(other) =
        store.acquire_lock(LOCK, &holder, now - STALE_SECONDS, &crate::host::process_alive).await?
    {
        anyhow::bail!(
            "another gpuledger run holds the pipeline lock (process {} on {}, since {}, last alive {}): one instance at a time",
            other.pid,
            other.host,
            utc(other.acquired_at),
            utc(other.heartbeat_at)
        );
    }
    let outcome = cycles(store, &options, &holder, args.every).await;
    store.release_lock(LOCK, &holder).await?;
    outcome
}

/// Runs cycles until a signal (or once, without `every`).
async fn cycles(
    store: &dyn Store,
    options: &CycleOptions,
    holder: &LockHolder,
    every: Option<Duration>,
) -> anyhow::Result<()> {
    let mut number = 0u64;
    loop {
        number += 1;
        let started = chrono::Utc::now().timestamp();
        let run =
            store.begin_ingest_run(&NewIngestRun::now(RunKind::Pipeline, "gpuledger run", "", "")).await?;
        let result = pipeline::cycle(store, options).await;
        let next = every.map(|e| started + e.as_secs() as i64);
        let outcome = match &result {
            Ok(report) => {
                let report = CycleReport { next_run_at: next, ..report.clone() };
                log_cycle(number, &report);
                let text = serde_json::to_string(&report).ok();
                if report.failures.is_empty() {
                    IngestOutcome::succeeded(0, report.computed.len() as i64, text)
                } else {
                    IngestOutcome {
                        reconciliation: text,
                        ..IngestOutcome::failed(&report.failures.join("; "))
                    }
                }
            }
            Err(error) => {
                tracing::error!(cycle = number, %error, "cycle failed");
                IngestOutcome::failed(&error.to_string())
            }
        };
        let failed = outcome.error.clone();
        store.finish_ingest_run(run, &outcome).await?;
        let Some(every) = every else {
            return match failed {
                Some(error) => Err(anyhow::anyhow!("the cycle did not complete: {error}")),
                None => Ok(()),
            };
        };
        if sleep_until(store, holder, started + every.as_secs() as i64).await? {
            tracing::info!("stopping: signal received");
            return Ok(());
        }
    }
}

fn log_cycle(number: u64, report: &CycleReport) {
    let metrics = report
        .metrics_window
        .map(|(from, to)| format!("{} hours", (to - from) / 3600))
        .unwrap_or_else(|| "none".into());
    tracing::info!(
        cycle = number,
        cur_ingested = %report.cur_ingested.join(","),
        cur_unchanged = report.cur_unchanged,
        metrics = %metrics,
        cost_explorer_requests = report.cost_explorer_requests,
        computed = %report.computed.join(","),
        alerts_firing = report.alerts_firing,
        failures = report.failures.len(),
        next_run = %report.next_run_at.map(utc).unwrap_or_default(),
        "cycle done"
    );
    for failure in &report.failures {
        tracing::warn!(cycle = number, %failure, "a source failed; the others ran");
    }
}

/// Sleeps until `at`, renewing the lock; true when a signal (Ctrl-C, SIGTERM) asks to stop.
async fn sleep_until(store: &dyn Store, holder: &LockHolder, at: i64) -> anyhow::Result<bool> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        let now = chrono::Utc::now().timestamp();
        if now >= at {
            return Ok(false);
        }
        let nap = Duration::from_secs((at - now) as u64).min(HEARTBEAT);
        tokio::select! {
            _ = tokio::time::sleep(nap) => {}
            _ = tokio::signal::ctrl_c() => return Ok(true),
            _ = terminate.recv() => return Ok(true),
        }
        if !store.heartbeat_lock(LOCK, holder, chrono::Utc::now().timestamp()).await? {
            anyhow::bail!("the pipeline lock was taken over while this run slept: stopping");
        }
    }
}
