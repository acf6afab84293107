//! Live GPU alerts are Prometheus's job: an alerting-rules file for the metric and label
//! names the user's Prometheus has (detected, or given), with the operational rules the
//! FinOps playbooks name. It passes `promtool check rules`; `tests/prometheus/` holds the
//! `promtool test rules` cases for it.

use std::fmt::Write;

/// The names the rules are written with.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleNames {
    /// GPU utilization and its scale: 1 for a ratio (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`), 100
    /// for a percent (`DCGM_FI_DEV_GPU_UTIL`).
    pub utilization: String,
    pub utilization_full: f64,
    pub temperature: String,
    pub xid: String,
    pub remapped_rows: String,
    /// The node and namespace labels on DCGM series (`Hostname`, `exported_namespace`).
    pub host_label: String,
    pub namespace_label: String,
    /// Namespaces of inference workloads, a regular expression.
    pub inference_namespaces: String,
    /// Request-latency histograms (`…_bucket`) of the inference servers present.
    pub latency_histograms: Vec<String>,
    /// Karpenter's interruption counter is there (Spot interruption rate).
    pub karpenter: bool,
}

impl Default for RuleNames {
    fn default() -> RuleNames {
        RuleNames {
            utilization: "DCGM_FI_PROF_GR_ENGINE_ACTIVE".into(),
            utilization_full: 1.0,
            temperature: "DCGM_FI_DEV_GPU_TEMP".into(),
            xid: "DCGM_FI_DEV_XID_ERRORS".into(),
            remapped_rows: "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS".into(),
            host_label: "Hostname".into(),
            namespace_label: "exported_namespace".into(),
            inference_namespaces: ".*(infer|serv|llm|rag).*".into(),
            latency_histograms: vec!["vllm:e2e_request_latency_seconds_bucket".into()],
            karpenter: false,
        }
    }
}

/// Latency histograms gpuledger knows, by server: vLLM, TGI, KServe.
pub const LATENCY_HISTOGRAMS: [&str; 3] = [
    "vllm:e2e_request_latency_seconds_bucket",
    "tgi_request_duration_bucket",
    "request_predict_seconds_bucket",
];

/// The Karpenter counter of interruption messages, by `message_type`.
pub const KARPENTER_INTERRUPTIONS: &str = "karpenter_interruption_received_messages_total";

impl RuleNames {
    /// The names as far as a Prometheus's metric names tell them: the utilization metric it
    /// has (ratio preferred), the latency histograms present, Karpenter.
    pub fn detected(mut self, names: &[String]) -> RuleNames {
        let has = |name: &str| names.iter().any(|n| n == name);
        if !has(&self.utilization) {
            if has("DCGM_FI_DEV_GPU_UTIL_RATIO") {
                self.utilization = "DCGM_FI_DEV_GPU_UTIL_RATIO".into();
            } else if has("DCGM_FI_DEV_GPU_UTIL") {
                self.utilization = "DCGM_FI_DEV_GPU_UTIL".into();
                self.utilization_full = 100.0;
            }
        }
        let present: Vec<String> =
            LATENCY_HISTOGRAMS.iter().filter(|h| has(h)).map(|h| h.to_string()).collect();
        if !present.is_empty() {
            self.latency_histograms = present;
        }
        self.karpenter |= has(KARPENTER_INTERRUPTIONS);
        self
    }
}

/// The names a live Prometheus has: its metric names over the last day, the node and
/// namespace labels on the utilization series, and the namespaces whose pods count
/// inference requests (`overrides` and an explicit `inference_namespaces` win).
pub async fn detect(
    api: &crate::sources::prometheus::api::PrometheusApi,
    names: RuleNames,
    overrides: &crate::sources::prometheus::LabelOverrides,
    inference_namespaces: Option<String>,
) -> Result<RuleNames, crate::sources::prometheus::api::ApiError> {
    let now = chrono::Utc::now().timestamp();
    let metric_names = api.metric_names(now - 86_400, now).await?;
    let mut names = names.detected(&metric_names);
    let series = api.series(&names.utilization, now - 3600, now).await?;
    let style = crate::sources::prometheus::LabelStyle::detect(
        series.iter().flat_map(|labels| labels.keys().map(String::as_str)),
        overrides,
    );
    if !style.host.is_empty() {
        names.host_label = style.host;
    }
    if !style.namespace.is_empty() {
        names.namespace_label = style.namespace;
    }
    match inference_namespaces {
        Some(given) => names.inference_namespaces = given,
        None => {
            let defaults = crate::sources::prometheus::MetricNames::default();
            let counters: Vec<&String> = metric_names
                .iter()
                .filter(|n| defaults.role(n) == Some(crate::sources::prometheus::Role::Requests))
                .collect();
            let mut namespaces = std::collections::BTreeSet::new();
            for counter in counters {
                for labels in api.series(counter, now - 86_400, now).await? {
                    if let Some(namespace) =
                        labels.get("namespace").or_else(|| labels.get("exported_namespace"))
                    {
                        namespaces.insert(regex::escape(namespace));
                    }
                }
            }
            if !namespaces.is_empty() {
                names.inference_namespaces = namespaces.into_iter().collect::<Vec<_>>().join("|");
            }
        }
    }
    Ok(names)
}

/// A YAML double-quoted string.
fn quoted(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

struct Rule<'a> {
    alert: &'a str,
    expr: String,
    for_: &'a str,
    severity: &'a str,
    summary: String,
}

/// The rules file.
pub fn rules_yaml(names: &RuleNames) -> String {
    let (u, host, ns) = (&names.utilization, &names.host_label, &names.namespace_label);
    let inference = format!("{ns}=~{}", quoted(&names.inference_namespaces));
    let full = names.utilization_full;
    let fraction = |f: f64| {
        let v = f * full;
        if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v}") }
    };
    let mut rules = vec![
        Rule {
            alert: "GpuIdleOnInferenceNode",
            expr: format!("max by ({host}, gpu) ({u}{{{inference}}}) == 0"),
            for_: "15m",
            severity: "critical",
            summary: format!(
                "GPU {{{{ $labels.gpu }}}} on {{{{ $labels.{host} }}}} serves inference at 0 % for 15 minutes: the model server may have crashed"
            ),
        },
        Rule {
            alert: "GpuTemperatureHigh",
            expr: format!("max by ({host}, gpu) ({}) > 90", names.temperature),
            for_: "5m",
            severity: "warning",
            summary: format!("GPU {{{{ $labels.gpu }}}} on {{{{ $labels.{host} }}}} is above 90 °C"),
        },
        Rule {
            alert: "GpuXidErrorOnInferenceNode",
            expr: format!("max by ({host}, gpu) (max_over_time({}{{{inference}}}[10m])) > 0", names.xid),
            for_: "0m",
            severity: "critical",
            summary: format!(
                "GPU {{{{ $labels.gpu }}}} on {{{{ $labels.{host} }}}} reported XID {{{{ $value }}}}"
            ),
        },
        Rule {
            alert: "GpuMemoryErrorOnInferenceNode",
            expr: format!("sum by ({host}, gpu) (increase({}{{{inference}}}[1h])) > 0", names.remapped_rows),
            for_: "0m",
            severity: "critical",
            summary: format!(
                "GPU {{{{ $labels.gpu }}}} on {{{{ $labels.{host} }}}} remapped rows after uncorrectable memory errors"
            ),
        },
        Rule {
            alert: "GpuUtilizationLow",
            expr: format!("avg by ({host}, gpu) ({u}) < {}", fraction(0.20)),
            for_: "1h",
            severity: "warning",
            summary: format!(
                "GPU {{{{ $labels.gpu }}}} on {{{{ $labels.{host} }}}} below 20 % for an hour: idle capacity"
            ),
        },
        Rule {
            alert: "GpuUtilizationHigh",
            expr: format!("avg by ({host}, gpu) ({u}) > {}", fraction(0.95)),
            for_: "30m",
            severity: "warning",
            summary: format!(
                "GPU {{{{ $labels.gpu }}}} on {{{{ $labels.{host} }}}} above 95 % for 30 minutes: saturated"
            ),
        },
    ];
    for histogram in &names.latency_histograms {
        let quantile = |window: &str| {
            format!("histogram_quantile(0.95, sum by (le, namespace) (rate({histogram}[{window}])))")
        };
        rules.push(Rule {
            alert: "InferenceLatencyHigh",
            expr: format!("{} > 5 * {}", quantile("5m"), quantile("1d")),
            for_: "10m",
            severity: "warning",
            summary: format!(
                "p95 latency of {histogram} in {{{{ $labels.namespace }}}} above 5x its 24-hour p95"
            ),
        });
    }
    if names.karpenter {
        rules.push(Rule {
            alert: "SpotInterruptionRateHigh",
            expr: format!(
                "sum(increase({KARPENTER_INTERRUPTIONS}{{message_type=\"spot_interrupted\"}}[24h])) \
                 / clamp_min(count(count by (node_name) (karpenter_nodes_allocatable{{capacity_type=\"spot\"}})), 1) > 0.2"
            ),
            for_: "0m",
            severity: "warning",
            summary: "More than 20 % of Spot nodes interrupted in 24 hours: spread instance types or fall back".into(),
        });
    }
    let mut out = String::from(
        "# Generated by `gpuledger alerts prometheus-rules`: live GPU alerts, evaluated by Prometheus.\n",
    );
    let _ = writeln!(
        out,
        "# Utilization {u} (full = {full}); node label {host}; inference namespaces {}.",
        names.inference_namespaces
    );
    if !names.karpenter {
        out.push_str(
            "# No Spot interruption rule: Karpenter's interruption metrics were not found (--karpenter).\n",
        );
    }
    out.push_str("groups:\n  - name: gpuledger-gpu\n    rules:\n");
    for rule in rules {
        let _ = write!(
            out,
            "      - alert: {}\n        expr: {}\n        for: {}\n        labels:\n          severity: {}\n          source: gpuledger\n        annotations:\n          summary: {}\n",
            rule.alert,
            quoted(&rule.expr),
            rule.for_,
            rule.severity,
            quoted(&rule.summary)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_percent_utilization_scales_the_thresholds_and_detects_what_is_there() {
        let names = RuleNames::default().detected(&[
            "DCGM_FI_DEV_GPU_UTIL".into(),
            "tgi_request_duration_bucket".into(),
            KARPENTER_INTERRUPTIONS.into(),
        ]);
        assert_eq!((names.utilization.as_str(), names.utilization_full), ("DCGM_FI_DEV_GPU_UTIL", 100.0));
        assert_eq!(names.latency_histograms, ["tgi_request_duration_bucket"]);
        let yaml = rules_yaml(&names);
        assert!(yaml.contains("avg by (Hostname, gpu) (DCGM_FI_DEV_GPU_UTIL) < 20\""), "{yaml}");
        assert!(yaml.contains("(DCGM_FI_DEV_GPU_UTIL) > 95\""), "{yaml}");
        assert!(yaml.contains("SpotInterruptionRateHigh"));
        let ratio = rules_yaml(&RuleNames::default());
        assert!(ratio.contains("(DCGM_FI_PROF_GR_ENGINE_ACTIVE) < 0.2\""), "{ratio}");
        assert!(!ratio.contains("SpotInterruptionRateHigh"));
    }
}
