//! `gpuledger ingest cur|focus|prometheus|cost-explorer` and `gpuledger compute`: each a [`pipeline`] job, its
//! outcome printed (people's lines on stderr, the metrics result as JSON on stdout).

use std::path::PathBuf;

use anyhow::Context;

use crate::cli::{ComputeArgs, IngestCommand, PrometheusArgs};
use crate::domain::runs::RunKind;
use crate::ingest::CurIngestOptions;
use crate::ingest::cost_explorer::{CeIngestOptions, ingest_cost_explorer};
use crate::ingest::focus::{FocusIngestOptions, ingest_focus};
use crate::ingest::metrics::{Detected, MetricsIngestOptions, MetricsSource};
use crate::period::Period;
use crate::pipeline;
use crate::sources::cost_explorer::CeOptions;
use crate::sources::objects::S3Options;
use crate::sources::prometheus::api::ApiOptions;
use crate::sources::prometheus::{LabelOverrides, MetricNames, Role};
use crate::sources::spark::SparkOptions;
use crate::store;

/// Runs one ingest and the computes it calls for.
pub(super) async fn run(store: &dyn store::Store, command: IngestCommand) -> anyhow::Result<()> {
    match command {
        IngestCommand::Cur(args) => {
            let s3 = S3Options {
                endpoint_url: args.endpoint_url,
                timeout: std::time::Duration::from_secs(args.s3_timeout.max(1)),
            };
            let options = CurIngestOptions {
                source: args.source,
                period: args.period,
                force: args.force,
                allow_empty: args.allow_empty,
                max_drop_percent: args.max_drop,
                max_rise_percent: args.max_rise,
                s3: s3.clone(),
                spark: (args.engine == crate::cli::CurEngine::Spark).then_some(SparkOptions {
                    remote: args.spark_remote,
                    token: args.spark_token,
                    s3_scheme: args.spark_s3_scheme,
                    output: args.spark_output,
                    output_s3: s3,
                }),
            };
            run_cur_ingest(store, &options).await
        }
        IngestCommand::Focus(args) => {
            let options = FocusIngestOptions {
                source: args.source,
                provider: args.provider,
                period: args.period,
                force: args.force,
                max_drop_percent: args.max_drop,
                max_rise_percent: args.max_rise,
                s3: S3Options {
                    endpoint_url: args.endpoint_url,
                    timeout: std::time::Duration::from_secs(args.s3_timeout.max(1)),
                },
            };
            let progress =
                indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
            pipeline::close_abandoned_runs(store).await?;
            let bills = ingest_focus(store, &options, &progress).await?;
            for bill in &bills {
                eprintln!(
                    "{} {} {}: {} ({} rows, FOCUS {}; billed {} {}, effective {} {})",
                    bill.period,
                    bill.provider,
                    bill.billing_account,
                    bill.status,
                    bill.rows,
                    bill.focus_version,
                    bill.billed_total,
                    bill.currency,
                    bill.effective_total,
                    bill.currency
                );
            }
            println!("{}", serde_json::json!({ "bills": bills }));
            // A month with a CUR counts its other bills: compute the months they changed.
            pipeline::compute_pending(store).await.map_err(|e| {
                anyhow::anyhow!("the bills are stored, but the ledger was not computed again: {e}")
            })?;
            Ok(())
        }
        IngestCommand::CostExplorer(args) => {
            let today = args.today.unwrap_or_else(|| chrono::Utc::now().date_naive());
            let options = CeIngestOptions {
                from: args.from.unwrap_or(today),
                to: args.to.unwrap_or(today),
                file: args.file,
                force: args.force,
                today,
                ce: CeOptions {
                    endpoint_url: args.endpoint_url,
                    timeout: std::time::Duration::from_secs(args.timeout.max(1)),
                },
            };
            anyhow::ensure!(
                options.file.is_some() || options.from < options.to,
                "--to {} is not after --from {}: the range is [from, to)",
                options.to,
                options.from
            );
            let progress =
                indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
            pipeline::close_abandoned_runs(store).await?;
            let result = ingest_cost_explorer(store, &options, &progress).await?;
            eprintln!(
                "Cost Explorer: {} requests, {} days fetched ({} still estimated), {} days already settled or not over yet, {} rows",
                result.requests, result.days_fetched, result.days_estimated, result.days_skipped, result.rows
            );
            println!("{}", serde_json::to_string(&result)?);
            pipeline::evaluate_alerts_after_job(store).await;
            Ok(())
        }
        IngestCommand::Prometheus(args) => {
            let detect = args.detect;
            let options = args.into_options()?;
            let progress =
                indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
            let (result, _computed) =
                pipeline::ingest_metrics_and_compute(store, &options, &progress).await?;
            print_detected(&result.detected);
            if detect {
                println!("{}", serde_json::to_string_pretty(&result.detected)?);
            } else {
                // Timings as structured fields, like the CUR's "period ingested" (stderr).
                tracing::info!(
                    source = %result.detected.source,
                    gpu_rows = result.gpu_rows,
                    inference_rows = result.inference_rows,
                    samples = result.samples,
                    invalid_samples = result.invalid_samples,
                    seconds = (result.seconds * 10.0).round() / 10.0,
                    "metrics ingested"
                );
                println!("{}", serde_json::to_string(&result)?);
            }
            Ok(())
        }
    }
}

/// `gpuledger compute`: one period, or every ingested period, each with the settings in
/// force for it.
pub(super) async fn compute(store: &dyn store::Store, args: ComputeArgs) -> anyhow::Result<()> {
    pipeline::close_abandoned_runs(store).await?;
    // An archived period keeps the rollups it had; computing it needs its rows back. Said
    // before a run is recorded: a refused compute is no failed run for the banner to show.
    let archived = store.archived_periods().await?;
    let periods: Vec<Period> = match args.period {
        Some(period) => match archived.into_iter().find(|a| a.period == period.to_string()) {
            Some(archived) => return Err(store::StoreError::Archived(Box::new(archived)).into()),
            None => vec![period],
        },
        None => {
            let archived: Vec<String> = archived.into_iter().map(|a| a.period).collect();
            if !archived.is_empty() {
                tracing::info!(archived = archived.join(", "), "archived periods left as they are");
            }
            // Every month a source billed, with a CUR or without one.
            let billed = pipeline::billed_periods(store).await?.into_iter().filter(|p| !archived.contains(p));
            billed.filter_map(|p| p.parse().ok()).collect()
        }
    };
    pipeline::compute(store, &periods).await?;
    Ok(())
}

/// Whether `url` is plain `http://` to a host other than loopback (credentials would cross
/// the network in clear).
fn sends_in_clear(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else { return false };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let host = if host.starts_with('[') {
        host.split(']').next().unwrap_or("").trim_start_matches('[')
    } else {
        host.split(':').next().unwrap_or("")
    };
    let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    !loopback
}

impl PrometheusArgs {
    /// What the metrics ingest is asked to do.
    fn into_options(self) -> anyhow::Result<MetricsIngestOptions> {
        let source = match (self.url, self.file) {
            (Some(url), _) => {
                let basic_auth = match self.basic_auth {
                    Some(pair) => {
                        let (user, password) =
                            pair.split_once(':').context("--basic-auth must be USER:PASSWORD")?;
                        Some((user.to_string(), password.to_string()))
                    }
                    None => None,
                };
                let has_secret = self.bearer_token.is_some() || basic_auth.is_some();
                if has_secret && sends_in_clear(&url) {
                    tracing::warn!(
                        url = %crate::auth::redacted_url(&url),
                        "sending Prometheus credentials over plain http:// to a host that is not this machine: use https://"
                    );
                }
                MetricsSource::Prometheus(ApiOptions {
                    url,
                    bearer_token: self.bearer_token,
                    basic_auth,
                    timeout: std::time::Duration::from_secs(self.timeout.max(1)),
                    attempts: self.attempts.max(1),
                })
            }
            (None, Some(file)) => MetricsSource::File(file),
            (None, None) => anyhow::bail!("give --url or --file"),
        };
        let mut names = MetricNames::default();
        if self.kube_state_metrics {
            names = names.with_kube();
        }
        let extra = [
            (self.utilization_metric, Role::EngineActive),
            (self.utilization_percent_metric, Role::UtilPercent),
            (self.memory_metric, Role::FramebufferMib),
            (self.requests_metric, Role::Requests),
            (self.prompt_tokens_metric, Role::PromptTokens),
            (self.generation_tokens_metric, Role::GenerationTokens),
        ];
        for (list, role) in extra {
            for name in list {
                names.add(&name, role);
            }
        }
        let (from, to) = match self.period {
            Some(period) => (Some(period.start()), Some(period.end())),
            None => (self.from, self.to),
        };
        Ok(MetricsIngestOptions {
            source,
            from,
            to,
            names,
            labels: LabelOverrides {
                uuid: self.uuid_label,
                host: self.host_label,
                pod: self.pod_label,
                namespace: self.namespace_label,
                container: self.container_label,
                cluster: self.cluster_label,
            },
            cluster: self.cluster,
            requests_query: self.requests_query,
            chunk_seconds: self.chunk_hours.clamp(1, 3) * 3600,
            sample_interval: self.sample_interval,
            detect_only: self.detect,
            kube: self.kube_state_metrics,
        })
    }
}

/// What the source exports, for people (stderr).
fn print_detected(detected: &Detected) {
    let labels = &detected.labels;
    eprintln!(
        "detected in {}: utilization {} (fallback {}); labels pod={} namespace={} host={} gpu={}; \
         {} GPUs, {} MIG instances {:?}; sample interval {} s",
        detected.source,
        detected.utilization_metric.as_deref().unwrap_or("none"),
        detected.fallback_utilization_metric.as_deref().unwrap_or("none"),
        labels.pod,
        labels.namespace,
        labels.host,
        labels.uuid,
        detected.gpus,
        detected.mig_instances,
        detected.mig_profiles,
        detected.sample_interval_seconds.unwrap_or(0.0)
    );
}

/// The demo's metrics files, each ingested once (a month already ingested is kept).
pub(super) async fn ingest_demo_metrics(
    store: &dyn store::Store,
    folder: &std::path::Path,
) -> anyhow::Result<()> {
    let Ok(entries) = std::fs::read_dir(folder) else { return Ok(()) };
    let mut files: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "om")).collect();
    // A month's DCGM file before its clusters' series: whether it was ingested is whether the
    // month has a Prometheus run.
    files.sort_by_key(|f| (f.file_name().is_some_and(|n| n.to_string_lossy().contains("-kube-")), f.clone()));
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
    for file in files {
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        // `YYYY-MM.om` (DCGM and inference), or another cloud's cluster's Kubernetes series,
        // `YYYY-MM-kube-<cluster>.om`, that gpuledger's split divides its nodes' cost by.
        let (name, cluster) = match stem.split_once("-kube-") {
            Some((name, cluster)) => (name, Some(cluster.to_string())),
            None => (stem.as_str(), None),
        };
        let Ok(period) = name.parse::<Period>() else { continue };
        let done = match &cluster {
            Some(cluster) => store.kube_clusters(period.start(), period.end()).await?.contains(cluster),
            None => store.last_data_version(RunKind::Prometheus, &period.to_string()).await?.is_some(),
        };
        if done {
            continue;
        }
        let mut options = MetricsIngestOptions::file(file, Some(period));
        if cluster.is_some() {
            options =
                MetricsIngestOptions { cluster, kube: true, names: options.names.with_kube(), ..options };
        }
        let (result, _computed) = pipeline::ingest_metrics_and_compute(store, &options, &progress).await?;
        match (&options.cluster, &result.kubernetes) {
            (Some(cluster), Some(k)) => println!(
                "{period}: ingested {} node-hours and {} pod-hours of cluster {cluster}",
                k.node_hours, k.pod_hours
            ),
            _ => println!(
                "{period}: ingested {} GPU rows and {} inference rows of metrics",
                result.gpu_rows, result.inference_rows
            ),
        }
    }
    Ok(())
}

/// Runs a CUR ingest and the computes it calls for, and prints each period's outcome and
/// reconciliation; a failed period is the command's error.
pub(super) async fn run_cur_ingest(
    store: &dyn store::Store,
    options: &CurIngestOptions,
) -> anyhow::Result<()> {
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
    let job = pipeline::ingest_cur_and_compute(store, options, &progress).await?;
    if let Some(failure) = job.failure {
        return Err(failure.into());
    }
    for result in &job.ingested {
        match &result.reconciliation {
            None => {
                println!("{}: skipped, data version {} already ingested", result.period, result.data_version)
            }
            Some(r) => {
                println!(
                    "{}: ingested {} rows in {:.1} s (read {:.1} s, write {:.1} s; data version {})",
                    result.period,
                    r.rows_read,
                    result.seconds,
                    result.read_seconds,
                    result.write_seconds,
                    result.data_version
                );
                println!(
                    "  bill: unblended {} USD, amortized {} USD = Kubernetes (split + unused) {} USD \
                     + EC2 not allocated to pods {} USD + other {} USD",
                    r.bill_unblended_total,
                    r.bill_amortized_total,
                    r.kubernetes_allocated_cost,
                    r.unallocated_ec2_cost,
                    r.other_cost
                );
                println!(
                    "  split vs parent instances: {} of {} instance-hours disagree by more than 0.01 %{}",
                    r.instance_hours_disagreeing,
                    r.instance_hours_checked,
                    if r.split_matches_parents { "" } else { " (see the ingest run for which)" }
                );
                for d in r.disagreements.iter().take(5) {
                    println!(
                        "    {} at {}: instance {:.6} USD, pods {:.6} USD",
                        d.instance_id, d.hour, d.instance_amortized, d.pods_split_plus_unused
                    );
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn credentials_in_clear_are_told_apart() {
        assert!(super::sends_in_clear("http://prom.example:9090"));
        assert!(super::sends_in_clear("http://u:p@10.0.0.5:9090/"));
        assert!(!super::sends_in_clear("https://prom.example"));
        assert!(!super::sends_in_clear("http://127.0.0.1:9090"));
        assert!(!super::sends_in_clear("http://localhost:9090"));
        assert!(!super::sends_in_clear("http://[::1]:9090"));
    }
}
