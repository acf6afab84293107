//! GPU and inference metrics ingest: collects a window `[from, to)` of samples from a
//! Prometheus server or an OpenMetrics file, folds them into one row per hour, GPU (or MIG
//! instance) and pod, and replaces that window in the store in one transaction.
//!
//! Folding rules (prometheus reference §1, §6):
//! - utilization is the hourly mean of `DCGM_FI_PROF_GR_ENGINE_ACTIVE` when the GPU reports
//!   it, else of `DCGM_FI_DEV_GPU_UTIL / 100` — never the latter for a MIG instance;
//! - a MIG GPU's parent-level series are dropped when its instances report, so device
//!   values repeated on instance series count once;
//! - the GPU-hours of one GPU (instance) in one hour never exceed one: pods sharing it
//!   (time-slicing copies) split it by observed time, and unattributed time is what the
//!   pods left;
//! - a MIG instance counts as its slices' fraction of the GPU (`3g.40gb` on an H100: 3/7).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use crate::catalog::INSTANCE_TYPES;
use crate::domain::runs::RunKind;
use crate::sources::prometheus::api::{ApiError, ApiOptions, PrometheusApi};
use crate::sources::prometheus::openmetrics::{self, ParseError};
use crate::sources::prometheus::{Collector, LabelOverrides, LabelStyle, MetricNames, Role, label};
use crate::store::{GpuUsage, InferenceUsage, IngestOutcome, NewIngestRun, Store, StoreError};

use super::kube;

/// Why a metrics ingest stopped. Nothing of its window was written.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Invalid(String),
}

/// Where the samples come from.
#[derive(Debug, Clone)]
pub enum MetricsSource {
    Prometheus(ApiOptions),
    File(PathBuf),
}

/// What `gpuledger ingest prometheus` was asked to do.
#[derive(Debug, Clone)]
pub struct MetricsIngestOptions {
    pub source: MetricsSource,
    /// Window start and end, epoch seconds; rounded out to whole hours. Required for a
    /// server; a file defaults to the hours its samples cover.
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub names: MetricNames,
    pub labels: LabelOverrides,
    /// The cluster of series without a cluster label (one Prometheus per cluster).
    pub cluster: Option<String>,
    /// Extra PromQL whose result series are counters of successful requests.
    pub requests_query: Option<String>,
    /// Seconds of samples per query (at most 11,000 points per series even at a 1 s scrape).
    pub chunk_seconds: i64,
    /// The scrape interval, when detection from the samples should be overridden.
    pub sample_interval: Option<f64>,
    /// Only detect and report what the source exports; write nothing.
    pub detect_only: bool,
    /// Also read kube-state-metrics and cAdvisor (`names` must hold their names, see
    /// [`MetricNames::with_kube`]) and replace the window's Kubernetes nodes and pods.
    pub kube: bool,
}

impl MetricsIngestOptions {
    /// An offline import of `path` with the default names and detected labels; the window is
    /// `period` when given, else the hours the file covers.
    pub fn file(path: PathBuf, period: Option<crate::period::Period>) -> MetricsIngestOptions {
        MetricsIngestOptions {
            source: MetricsSource::File(path),
            from: period.map(|p| p.start()),
            to: period.map(|p| p.end()),
            names: MetricNames::default(),
            labels: LabelOverrides::default(),
            cluster: None,
            requests_query: None,
            chunk_seconds: 7200,
            sample_interval: None,
            detect_only: false,
            kube: false,
        }
    }
}

/// What was found in the source, printed so the user can check it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Detected {
    pub source: String,
    /// Metric names read, with the role each played.
    pub metrics: BTreeMap<String, Role>,
    pub utilization_metric: Option<String>,
    pub fallback_utilization_metric: Option<String>,
    pub labels: LabelStyle,
    pub gpus: usize,
    pub mig_instances: usize,
    pub mig_profiles: Vec<String>,
    pub sample_interval_seconds: Option<f64>,
}

/// The outcome of one ingest.
#[derive(Debug, Clone, Serialize)]
pub struct MetricsIngestResult {
    pub from: i64,
    pub to: i64,
    pub detected: Detected,
    pub samples: u64,
    pub invalid_samples: u64,
    pub gpu_rows: usize,
    pub inference_rows: usize,
    pub attributed_gpu_hours: f64,
    pub unattributed_gpu_hours: f64,
    pub requests: f64,
    /// GPU (instance) hours with memory samples but no utilization, left out.
    pub hours_without_utilization: usize,
    /// With `--kube-state-metrics`: the Kubernetes node-hours and pod-hours read, and the
    /// series families the split takes that the source lacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubeSummary>,
    pub written: bool,
    pub seconds: f64,
}

/// What a Kubernetes read found.
#[derive(Debug, Clone, Serialize)]
pub struct KubeSummary {
    pub node_hours: usize,
    pub pod_hours: usize,
    pub nodes: usize,
    pub pods: usize,
    pub sample_interval_seconds: f64,
    pub missing_series: Vec<&'static str>,
    pub skipped_container_series: usize,
}

/// Runs one ingest, recorded as a run (`running`, then `succeeded` or `failed` with the
/// error) unless it only detects.
#[tracing::instrument(skip_all, fields(source = %options.source_name()))]
pub async fn ingest_metrics(
    store: &dyn Store,
    options: &MetricsIngestOptions,
    progress: &indicatif::MultiProgress,
) -> Result<MetricsIngestResult, MetricsError> {
    if options.detect_only {
        return collect_and_write(store, options, progress).await;
    }
    // The window's name when it is asked for; a file read without one is named by the file.
    let window = match (options.from, options.to) {
        (Some(from), Some(to)) => {
            let (from, to) = whole_hours(from, to);
            window_name(from, to)
        }
        _ => String::new(),
    };
    let run = store
        .begin_ingest_run(&NewIngestRun::now(RunKind::Prometheus, &options.source_name(), &window, ""))
        .await?;
    match collect_and_write(store, options, progress).await {
        Ok(result) => {
            let outcome = IngestOutcome::succeeded(
                result.samples as i64,
                (result.gpu_rows + result.inference_rows) as i64,
                serde_json::to_string(&result.detected).ok(),
            );
            store.finish_ingest_run(run, &outcome).await?;
            tracing::debug!(
                samples = result.samples,
                gpu_rows = result.gpu_rows,
                inference_rows = result.inference_rows,
                seconds = result.seconds,
                "metrics ingested"
            );
            Ok(result)
        }
        Err(error) => {
            if let Err(record) =
                store.finish_ingest_run(run, &IngestOutcome::failed(&error.to_string())).await
            {
                tracing::error!(run, %record, "could not record the failed metrics run");
            }
            Err(error)
        }
    }
}

impl MetricsIngestOptions {
    /// The Prometheus URL or the file, as runs and messages name the source.
    pub fn source_name(&self) -> String {
        match &self.source {
            MetricsSource::Prometheus(api) => crate::text::redacted_url(&api.url),
            MetricsSource::File(path) => path.display().to_string(),
        }
    }
}

/// Reads the samples, folds them into hours and replaces the window (unless detecting).
async fn collect_and_write(
    store: &dyn Store,
    options: &MetricsIngestOptions,
    progress: &indicatif::MultiProgress,
) -> Result<MetricsIngestResult, MetricsError> {
    let started = Instant::now();
    let (collector, source) = match &options.source {
        MetricsSource::Prometheus(api) => {
            (collect_from_server(api, options, progress).await?, api.url.clone())
        }
        MetricsSource::File(path) => {
            (collect_from_file(path.clone(), options, progress).await?, path.display().to_string())
        }
    };
    let (from, to) = match (options.from, options.to) {
        (Some(from), Some(to)) => whole_hours(from, to),
        _ => collector.data_hours().unwrap_or((collector.from, collector.from)),
    };
    let interval = options.sample_interval.or_else(|| collector.sample_interval()).unwrap_or(60.0);
    let (detected, style) = detect(&collector, &options.labels, &source, interval);
    let folded = fold(&collector, &style, interval, options.cluster.as_deref().unwrap_or(""));
    let mut result = MetricsIngestResult {
        from,
        to,
        detected,
        samples: collector.samples,
        invalid_samples: collector.invalid_samples,
        gpu_rows: folded.gpu.len(),
        inference_rows: folded.inference.len(),
        attributed_gpu_hours: folded.gpu.iter().filter(|r| !r.pod.is_empty()).map(|r| r.gpu_hours).sum(),
        unattributed_gpu_hours: folded.gpu.iter().filter(|r| r.pod.is_empty()).map(|r| r.gpu_hours).sum(),
        requests: folded.inference.iter().map(|r| r.requests).sum(),
        hours_without_utilization: folded.hours_without_utilization,
        kubernetes: None,
        written: false,
        seconds: 0.0,
    };
    let cluster = options.cluster.as_deref().unwrap_or("");
    let kube = options.kube.then(|| kube::fold_kube(&collector, from, to, options.sample_interval, cluster));
    if let Some(kube) = &kube {
        let distinct = |keys: Vec<(&str, &str, &str)>| keys.into_iter().collect::<HashSet<_>>().len();
        result.kubernetes = Some(KubeSummary {
            node_hours: kube.nodes.len(),
            pod_hours: kube.pods.len(),
            nodes: distinct(kube.nodes.iter().map(|n| (n.cluster.as_str(), n.node.as_str(), "")).collect()),
            pods: distinct(
                kube.pods
                    .iter()
                    .map(|p| (p.cluster.as_str(), p.namespace.as_str(), p.uid.as_str()))
                    .collect(),
            ),
            sample_interval_seconds: kube.interval_seconds,
            missing_series: kube.missing.clone(),
            skipped_container_series: kube.skipped_container_series,
        });
    }
    if options.detect_only {
        result.seconds = started.elapsed().as_secs_f64();
        return Ok(result);
    }
    if from >= to {
        return Err(MetricsError::Invalid(format!("no GPU or inference samples found in {source}")));
    }
    // A source of Kubernetes series alone leaves the window's GPU usage as it was.
    let has_gpu = collector.series.iter().any(|s| !s.role.is_kube());
    if let Some(kube) = &kube {
        let cannot_split: Vec<&str> = kube
            .missing
            .iter()
            .copied()
            .filter(|m| *m == "kube_pod_info" || *m == "kube_node_info")
            .collect();
        if !cannot_split.is_empty() {
            return Err(MetricsError::Invalid(format!(
                "{source} has no {} series in {}: pods cannot be placed on nodes without them (is \
                 kube-state-metrics scraped?)",
                cannot_split.join(" or "),
                window_name(from, to)
            )));
        }
        // A pod or node of no cluster cannot be kept apart from other clusters' (its window
        // would replace theirs).
        if cluster.is_empty()
            && (kube.nodes.iter().any(|n| n.cluster.is_empty())
                || kube.pods.iter().any(|p| p.cluster.is_empty()))
        {
            return Err(MetricsError::Invalid(format!(
                "the Kubernetes series of {source} name no cluster (no `cluster`, `cluster_name` or \
                 `k8s_cluster_name` label): pass --cluster NAME"
            )));
        }
        if !kube.missing.is_empty() {
            tracing::warn!(source = %source, missing = ?kube.missing, "Kubernetes series missing: the split is less exact without them");
        }
    }
    if has_gpu || kube.is_none() {
        store
            .replace_usage_window(from, to, &folded.clusters(cluster), &folded.gpu, &folded.inference)
            .await?;
    }
    if let Some(kube) = &kube {
        // The clusters the source names are replaced, no other: one cluster's Prometheus
        // does not erase another's.
        let mut clusters: Vec<&str> = if cluster.is_empty() {
            kube.nodes
                .iter()
                .map(|n| n.cluster.as_str())
                .chain(kube.pods.iter().map(|p| p.cluster.as_str()))
                .collect()
        } else {
            vec![cluster]
        };
        clusters.sort_unstable();
        clusters.dedup();
        store.replace_kube_window(from, to, &clusters, &kube.nodes, &kube.pods).await?;
    }
    result.written = true;
    result.seconds = started.elapsed().as_secs_f64();
    Ok(result)
}

/// `[from, to)` widened to whole hours.
fn whole_hours(from: i64, to: i64) -> (i64, i64) {
    (from.div_euclid(3600) * 3600, (to + 3599).div_euclid(3600) * 3600)
}

/// `2026-10` for a whole month, else `from/to` in RFC 3339.
fn window_name(from: i64, to: i64) -> String {
    let period = crate::period::Period::containing(from);
    if period.start() == from && period.end() == to {
        return period.to_string();
    }
    let at = |t: i64| chrono::DateTime::from_timestamp(t, 0).map(|d| d.to_rfc3339()).unwrap_or_default();
    format!("{}/{}", at(from), at(to))
}

async fn collect_from_file(
    path: PathBuf,
    options: &MetricsIngestOptions,
    progress: &indicatif::MultiProgress,
) -> Result<Collector, MetricsError> {
    let (from, to) = match (options.from, options.to) {
        (Some(from), Some(to)) => whole_hours(from, to),
        _ => (i64::MIN / 2, i64::MAX / 2),
    };
    let file = std::fs::File::open(&path)
        .map_err(|e| MetricsError::Invalid(format!("cannot open {}: {e}", path.display())))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let bar = progress.add(indicatif::ProgressBar::new(size));
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} {bar:30} {binary_bytes}/{binary_total_bytes} ({eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(format!("reading {}", path.display()));
    let names = options.names.clone();
    let reading_bar = bar.clone();
    // Parsing is CPU-bound: off the async runtime.
    let collector = tokio::task::spawn_blocking(move || {
        let mut collector = Collector::new(from, to);
        let input = std::io::BufReader::with_capacity(1 << 20, file);
        let shown = path.display().to_string();
        openmetrics::read_into(input, &shown, &names, &mut collector, &|bytes| {
            reading_bar.set_position(bytes)
        })?;
        Ok::<_, MetricsError>(collector)
    })
    .await
    .map_err(|e| MetricsError::Invalid(format!("the reading task failed: {e}")))??;
    bar.finish_with_message("read");
    Ok(collector)
}

async fn collect_from_server(
    api_options: &ApiOptions,
    options: &MetricsIngestOptions,
    progress: &indicatif::MultiProgress,
) -> Result<Collector, MetricsError> {
    let (Some(from), Some(to)) = (options.from, options.to) else {
        return Err(MetricsError::Invalid("--from and --to (or --period) are needed with --url".into()));
    };
    let (from, to) = whole_hours(from, to);
    let api = PrometheusApi::new(api_options.clone())?;
    // Counters need the sample before the window as a starting value.
    let lead = 3600;
    let present = api.metric_names(from - lead, to).await?;
    let mut wanted: Vec<(String, Role)> =
        present.iter().filter_map(|name| options.names.role(name).map(|role| (name.clone(), role))).collect();
    wanted.sort();
    let custom = options.requests_query.as_ref().map(|q| (q.clone(), Role::Requests));
    if wanted.is_empty() && custom.is_none() {
        return Err(MetricsError::Invalid(format!(
            "Prometheus at {} has none of the GPU or inference metrics gpuledger reads between {} and {} \
             (looked for {}); name yours with --utilization-metric or --requests-query",
            api.url(),
            window_name(from, to),
            window_name(to, to),
            options.names.names.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
        )));
    }
    let chunk = options.chunk_seconds.clamp(60, 3 * 3600);
    let chunks = (to - from + chunk - 1) / chunk;
    let queries = wanted.len() as u64 + u64::from(custom.is_some());
    let bar = progress.add(indicatif::ProgressBar::new(chunks as u64 * queries));
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} queries ({eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(format!("querying {}", api.url()));
    let mut collector = Collector::new(from, to);
    let mut start = from;
    while start < to {
        let end = (start + chunk).min(to);
        for (name, role) in wanted.iter().chain(custom.iter()) {
            let is_custom = custom.as_ref().is_some_and(|(q, _)| q == name);
            let lead_here = if start == from && role.is_counter() { lead } else { 0 };
            let range = end - start + lead_here;
            let (query, time_ms) = if is_custom {
                let step = options.sample_interval.unwrap_or(30.0).max(1.0) as i64;
                (format!("({name})[{range}s:{step}s]"), end * 1000)
            } else if role.is_counter() {
                (format!("{{__name__=\"{name}\"}}[{range}s]"), end * 1000)
            } else {
                // [end − range − 1 ms, end − 1 ms]: exactly the samples of [start, end).
                (format!("{{__name__=\"{name}\"}}[{range}s]"), end * 1000 - 1)
            };
            let what = format!("reading {name} for {}", window_name(start, end));
            let result = api.samples(&query, time_ms, &what).await?;
            for series in result {
                let key: String = series.metric.iter().map(|(k, v)| format!("{k}={v:?},")).collect();
                let key = format!("{name}|{key}");
                let id = collector.series_id(&key, || {
                    let labels = series
                        .metric
                        .iter()
                        .filter(|(k, v)| k.as_str() != "__name__" && !v.is_empty())
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    (name.clone(), *role, labels)
                });
                for (t, value) in &series.values {
                    let value = openmetrics::parse_value(value).unwrap_or(f64::NAN);
                    collector.observe(id, (t * 1000.0).round() as i64, value);
                }
            }
            bar.inc(1);
        }
        start = end;
    }
    bar.finish_with_message("queried");
    Ok(collector)
}

/// The label style and what the source exports.
fn detect(
    collector: &Collector,
    overrides: &LabelOverrides,
    source: &str,
    interval: f64,
) -> (Detected, LabelStyle) {
    let gpu_series = || collector.series.iter().filter(|s| !s.role.is_counter() && !s.role.is_kube());
    let style =
        LabelStyle::detect(gpu_series().flat_map(|s| s.labels.iter().map(|(k, _)| k.as_str())), overrides);
    let metrics: BTreeMap<String, Role> = collector.series.iter().map(|s| (s.name.clone(), s.role)).collect();
    let first_with = |roles: &[Role]| metrics.iter().find(|(_, r)| roles.contains(r)).map(|(n, _)| n.clone());
    let gpus: HashSet<&str> = gpu_series().map(|s| label(&s.labels, &style.uuid)).collect();
    let instances: HashSet<(&str, &str)> = gpu_series()
        .map(|s| (label(&s.labels, &style.uuid), label(&s.labels, &style.gpu_instance)))
        .filter(|(_, instance)| !instance.is_empty())
        .collect();
    let profiles: std::collections::BTreeSet<String> = gpu_series()
        .map(|s| label(&s.labels, &style.gpu_profile).to_string())
        .filter(|p| !p.is_empty())
        .collect();
    let detected = Detected {
        source: source.to_string(),
        utilization_metric: first_with(&[Role::EngineActive, Role::UtilRatio])
            .or_else(|| first_with(&[Role::UtilPercent])),
        fallback_utilization_metric: first_with(&[Role::EngineActive])
            .and_then(|_| first_with(&[Role::UtilPercent, Role::UtilRatio])),
        metrics,
        labels: style.clone(),
        gpus: gpus.len(),
        mig_instances: instances.len(),
        mig_profiles: profiles.into_iter().collect(),
        sample_interval_seconds: Some(interval),
    };
    (detected, style)
}

/// The store rows of a window.
struct Folded {
    gpu: Vec<GpuUsage>,
    inference: Vec<InferenceUsage>,
    hours_without_utilization: usize,
}

impl Folded {
    /// The clusters whose window the rows replace: the one the source was given, else those
    /// its rows name, no other (one cluster's Prometheus does not erase another's usage);
    /// every cluster's (`""`) when a row names none, or there are no rows to name one.
    fn clusters<'a>(&'a self, given: &'a str) -> Vec<&'a str> {
        let named = self
            .gpu
            .iter()
            .map(|r| r.cluster.as_str())
            .chain(self.inference.iter().map(|r| r.cluster.as_str()));
        let mut clusters: Vec<&str> = named.collect();
        if !given.is_empty() || clusters.is_empty() || clusters.contains(&"") {
            return vec![given];
        }
        clusters.sort_unstable();
        clusters.dedup();
        clusters
    }
}

/// One GPU (instance) and pod in one hour, while folding.
#[derive(Default)]
struct GpuHour {
    host: String,
    cluster: String,
    model: String,
    profile: String,
    engine: (f64, u32),
    percent: (f64, u32),
    framebuffer: Option<f64>,
    samples: u32,
}

type GpuKey = (i64, String, String, String, String, String); // hour, uuid, instance, ns, pod, container

fn fold(collector: &Collector, style: &LabelStyle, interval: f64, default_cluster: &str) -> Folded {
    let mut hours: BTreeMap<GpuKey, GpuHour> = BTreeMap::new();
    let mut inference: BTreeMap<(i64, String, String, String, String), [f64; 3]> = BTreeMap::new();
    for series in collector.series.iter().filter(|s| !s.role.is_kube()) {
        let labels = &series.labels;
        // The series' cluster label, else the one this source was given.
        let cluster = match style.cluster.as_str() {
            "" => default_cluster,
            key => match label(labels, key) {
                "" => default_cluster,
                value => value,
            },
        };
        if series.role.is_counter() {
            // Serving pods are scrape targets: their own namespace/pod labels, unless the
            // server set them and Prometheus renamed ours.
            let (namespace, pod) = if !label(labels, "exported_pod").is_empty() {
                (label(labels, "exported_namespace"), label(labels, "exported_pod"))
            } else if !label(labels, "pod").is_empty() {
                (label(labels, "namespace"), label(labels, "pod"))
            } else {
                (label(labels, "pod_namespace"), label(labels, "pod_name"))
            };
            if series.role == Role::Requests && label(labels, "finished_reason") == "abort" {
                continue;
            }
            let model =
                [label(labels, "model_name"), label(labels, "model")].into_iter().find(|m| !m.is_empty());
            let slot = match series.role {
                Role::Requests => 0,
                Role::PromptTokens => 1,
                _ => 2,
            };
            for hour in &series.hours {
                let key = (
                    hour.hour,
                    cluster.to_string(),
                    namespace.to_string(),
                    pod.to_string(),
                    model.unwrap_or("").to_string(),
                );
                inference.entry(key).or_default()[slot] += hour.sum;
            }
            continue;
        }
        let uuid = match label(labels, &style.uuid) {
            "" => format!("{}/gpu{}", label(labels, &style.host), label(labels, "gpu")),
            uuid => uuid.to_string(),
        };
        let instance = label(labels, &style.gpu_instance);
        let pod = label(labels, &style.pod);
        let (namespace, container) = if pod.is_empty() {
            ("", "")
        } else {
            (label(labels, &style.namespace), label(labels, &style.container))
        };
        for hour in &series.hours {
            let key = (
                hour.hour,
                uuid.clone(),
                instance.to_string(),
                namespace.to_string(),
                pod.to_string(),
                container.to_string(),
            );
            let acc = hours.entry(key).or_default();
            if acc.host.is_empty() {
                acc.host = label(labels, &style.host).to_string();
                acc.cluster = cluster.to_string();
                acc.model = label(labels, &style.model).to_string();
                acc.profile = label(labels, &style.gpu_profile).to_string();
            }
            match series.role {
                Role::EngineActive | Role::UtilRatio => {
                    acc.engine.0 += hour.sum;
                    acc.engine.1 += hour.samples;
                }
                Role::UtilPercent if instance.is_empty() => {
                    acc.percent.0 += hour.sum;
                    acc.percent.1 += hour.samples;
                }
                Role::FramebufferMib | Role::FramebufferBytes => {
                    acc.framebuffer = Some(acc.framebuffer.unwrap_or(0.0).max(hour.max));
                }
                _ => {}
            }
            acc.samples = acc.samples.max(hour.samples);
        }
    }
    // MIG GPUs whose instances report: their parent-level rows would count the GPU twice.
    let mig_parents: HashSet<(i64, String)> =
        hours.keys().filter(|k| !k.2.is_empty()).map(|k| (k.0, k.1.clone())).collect();
    hours.retain(|k, _| !(k.2.is_empty() && mig_parents.contains(&(k.0, k.1.clone()))));
    // Observed pod seconds per GPU (instance) and hour, to split a shared GPU-hour.
    let observed = |acc: &GpuHour| (f64::from(acc.samples) * interval).min(3600.0);
    let mut attributed: HashMap<(i64, &str, &str), f64> = HashMap::new();
    for (key, acc) in &hours {
        if !key.4.is_empty() {
            *attributed.entry((key.0, key.1.as_str(), key.2.as_str())).or_default() += observed(acc);
        }
    }
    let mut gpu = Vec::with_capacity(hours.len());
    let mut hours_without_utilization = 0;
    for (key, acc) in &hours {
        let utilization = if acc.engine.1 > 0 {
            acc.engine.0 / f64::from(acc.engine.1)
        } else if acc.percent.1 > 0 {
            acc.percent.0 / f64::from(acc.percent.1)
        } else {
            hours_without_utilization += 1;
            continue;
        };
        let fraction = mig_fraction(&acc.profile, &acc.model);
        let pods_seconds = attributed.get(&(key.0, key.1.as_str(), key.2.as_str())).copied().unwrap_or(0.0);
        let seconds = observed(acc);
        let gpu_hours = if key.4.is_empty() {
            seconds.min(3600.0 - pods_seconds.min(3600.0)) / 3600.0
        } else if pods_seconds > 3600.0 + interval {
            seconds / pods_seconds // time-sliced: shares of the one GPU-hour
        } else {
            seconds / 3600.0
        };
        gpu.push(GpuUsage {
            hour: key.0,
            hostname: acc.host.clone(),
            gpu_uuid: key.1.clone(),
            gpu_instance: key.2.clone(),
            gpu_profile: acc.profile.clone(),
            gpu_model: short_model(&acc.model),
            namespace: key.3.clone(),
            pod: key.4.clone(),
            container: key.5.clone(),
            mean_utilization: utilization.clamp(0.0, 1.0),
            peak_fb_used_mib: acc.framebuffer.unwrap_or(0.0),
            samples: i64::from(acc.samples),
            gpu_hours: gpu_hours * fraction,
            cluster: acc.cluster.clone(),
        });
    }
    let inference = inference
        .into_iter()
        .map(|((hour, cluster, namespace, pod, model), [requests, prompt, generation])| InferenceUsage {
            hour,
            cluster,
            workload: workload_of_pod(&pod),
            namespace,
            pod,
            model,
            requests,
            prompt_tokens: prompt,
            generation_tokens: generation,
        })
        .collect();
    Folded { gpu, inference, hours_without_utilization }
}

/// The share of a GPU a MIG profile holds: `3g.40gb` on a 7-slice H100 is 3/7; A30 GPUs have
/// 4 slices. A whole GPU (no profile) is 1.
pub fn mig_fraction(profile: &str, model: &str) -> f64 {
    let Some(slices) = profile.split_once('g').and_then(|(n, _)| n.parse::<f64>().ok()) else {
        return 1.0;
    };
    let total = if model.contains("A30") { 4.0 } else { 7.0 };
    (slices / total).min(1.0)
}

/// The dashboard's short GPU model (`H100`) for a `modelName`, or the name itself.
pub fn short_model(model_name: &str) -> String {
    INSTANCE_TYPES
        .iter()
        .find(|t| !t.gpu_model.is_empty() && t.gpu_model_name == model_name)
        .map_or_else(|| model_name.to_string(), |t| t.gpu_model.to_string())
}

/// A pod's workload from its name, for pods the bill does not know: Deployment pods
/// `name-<hash>-<5>` lose both suffixes, Job pods `name-<5>` one, StatefulSet pods `name-N`
/// their ordinal.
pub fn workload_of_pod(pod: &str) -> String {
    let is_suffix = |s: &str, lengths: &[usize]| {
        lengths.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    let mut parts: Vec<&str> = pod.split('-').collect();
    if parts.len() > 1 && parts.last().is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit())) {
        parts.pop();
        return parts.join("-");
    }
    if parts.len() > 1 && parts.last().is_some_and(|s| is_suffix(s, &[5])) {
        parts.pop();
        // A ReplicaSet's pod-template hash; a CronJob's minute stamp is all digits.
        let hash =
            parts.last().is_some_and(|s| is_suffix(s, &[8, 9, 10]) && !s.bytes().all(|b| b.is_ascii_digit()));
        if parts.len() > 1 && hash {
            parts.pop();
        }
    }
    parts.join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 1_790_812_800;

    fn series(c: &mut Collector, name: &str, role: Role, labels: &[(&str, &str)], points: &[(i64, f64)]) {
        let key = format!("{name}{labels:?}");
        let labels: Vec<(String, String)> =
            labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let id = c.series_id(&key, || (name.into(), role, labels));
        for (t, v) in points {
            c.observe(id, t * 1000, *v);
        }
    }

    fn style() -> LabelStyle {
        LabelStyle::detect(["UUID", "Hostname", "pod"].into_iter(), &LabelOverrides::default())
    }

    #[test]
    fn pod_churn_within_an_hour_splits_the_gpu_hour_by_observed_time() {
        // Samples every 15 min. Pod a holds GPU-1 for the first two (0.8 busy), then the GPU
        // is free for one, then pod b for one (0.2): a = 30 min, unattributed 15, b 15.
        let mut c = Collector::new(H, H + 3600);
        let gpu = [("UUID", "GPU-1"), ("Hostname", "n1"), ("modelName", "NVIDIA H100 80GB HBM3")];
        let with = |pod: &'static str| {
            let mut l = gpu.to_vec();
            l.extend([("pod", pod), ("namespace", "ml")]);
            l
        };
        series(&mut c, "E", Role::EngineActive, &with("a"), &[(H, 0.8), (H + 900, 0.8)]);
        series(&mut c, "E", Role::EngineActive, &gpu, &[(H + 1800, 0.0)]);
        series(&mut c, "E", Role::EngineActive, &with("b"), &[(H + 2700, 0.2)]);
        let folded = fold(&c, &style(), 900.0, "");
        let rows: Vec<(&str, f64, f64, &str)> = folded
            .gpu
            .iter()
            .map(|r| (r.pod.as_str(), r.gpu_hours, r.mean_utilization, r.gpu_model.as_str()))
            .collect();
        assert_eq!(rows, vec![("", 0.25, 0.0, "H100"), ("a", 0.5, 0.8, "H100"), ("b", 0.25, 0.2, "H100")]);
    }

    #[test]
    fn mig_instances_replace_their_parent_and_count_their_slices() {
        // GPU-1 is MIG: a parent series (no GPU_I_ID) and a 3g.40gb instance with a pod, a
        // full hour each at 30-minute samples. Only the instance counts: 3/7 of a GPU-hour.
        let mut c = Collector::new(H, H + 3600);
        let parent = [("UUID", "GPU-1"), ("modelName", "NVIDIA H100 80GB HBM3")];
        let mut instance = parent.to_vec();
        instance.extend([("GPU_I_ID", "2"), ("GPU_I_PROFILE", "3g.40gb"), ("pod", "p"), ("namespace", "ml")]);
        series(&mut c, "E", Role::EngineActive, &parent, &[(H, 0.9), (H + 1800, 0.9)]);
        series(&mut c, "E", Role::EngineActive, &instance, &[(H, 0.5), (H + 1800, 0.7)]);
        // GPU_UTIL is not supported for MIG instances and must not be used there.
        series(&mut c, "U", Role::UtilPercent, &instance, &[(H, 99.0), (H + 1800, 99.0)]);
        let folded = fold(&c, &style(), 1800.0, "");
        assert_eq!(folded.gpu.len(), 1);
        let row = &folded.gpu[0];
        assert_eq!((row.gpu_instance.as_str(), row.pod.as_str()), ("2", "p"));
        assert!((row.mean_utilization - 0.6).abs() < 1e-12);
        assert!((row.gpu_hours - 3.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn time_sliced_copies_share_one_gpu_hour() {
        // Virtual-GPU mode: pods a and b both appear on GPU-1 all hour with the device value,
        // plus the device-level series: each pod gets half, unattributed nothing.
        let mut c = Collector::new(H, H + 3600);
        let points = [(H, 0.4), (H + 1800, 0.4)];
        for pod in ["a", "b"] {
            series(
                &mut c,
                "E",
                Role::EngineActive,
                &[("UUID", "GPU-1"), ("pod", pod), ("vgpu", pod)],
                &points,
            );
        }
        series(&mut c, "E", Role::EngineActive, &[("UUID", "GPU-1")], &points);
        let folded = fold(&c, &style(), 1800.0, "");
        let hours: Vec<(&str, f64)> = folded.gpu.iter().map(|r| (r.pod.as_str(), r.gpu_hours)).collect();
        assert_eq!(hours, vec![("", 0.0), ("a", 0.5), ("b", 0.5)]);
    }

    #[test]
    fn aborted_requests_do_not_count_and_pods_name_their_workload() {
        let mut c = Collector::new(H, H + 3600);
        let labels =
            |reason| vec![("pod", "chat-7d9f8c6b5-abcde"), ("namespace", "llm"), ("finished_reason", reason)];
        series(&mut c, "R", Role::Requests, &labels("stop"), &[(H, 0.0), (H + 1800, 40.0)]);
        series(&mut c, "R", Role::Requests, &labels("abort"), &[(H, 0.0), (H + 1800, 3.0)]);
        let folded = fold(&c, &style(), 1800.0, "");
        assert_eq!(folded.inference.len(), 1);
        assert_eq!((folded.inference[0].requests, folded.inference[0].workload.as_str()), (40.0, "chat"));
        assert_eq!(workload_of_pod("train-llama-29012345-x7k2p"), "train-llama-29012345");
        assert_eq!(workload_of_pod("triton-ocr-3"), "triton-ocr");
    }
}
