//! `report gpu` and `report inference`: what the GPUs did, joined with the bill.
//!
//! `report gpu` JSON contract (stable; fields may be added, never renamed):
//!
//! ```json
//! {"period": "2026-10", "idle_threshold": 0.1, "source": "bill",
//!  "rows": [{"namespace": "acme-llm", "gpu_model": "H100", "allocated_gpu_hours": 120.0,
//!            "used_gpu_hours": 61.2, "idle_gpu_hours": 10.0, "unmeasured_gpu_hours": 0.0,
//!            "unattributed_gpu_hours": 0.0, "utilization": 0.51}],
//!  "metrics_without_bill_gpu_hours": 0.0}
//! ```
//!
//! This is the live join, used before `compute` or for another idle threshold than the
//! period's; it carries the rollups' cost columns (`gpu_fleet_cost`, `accelerator_cost`,
//! `idle_cost`, `unallocated_gpu_cost`) as `null`. Idle is judged per GPU (or MIG instance).
//! `source` is `bill` when allocation comes from CUR accelerator split usage, `metrics`
//! when the period has no cost data. GPU time no pod held is on rows with namespace
//! `(unattributed)`. `utilization` is a fraction, `null` when nothing was measured.
//!
//! `report inference` JSON: `{"period", "rows": [{"namespace", "workload", "model",
//! "requests", "tokens", "prompt_tokens", "generation_tokens", "cost", "cost_per_inference",
//! "cost_per_million_tokens"}]}`: cost is the split + unused cost (GPU, CPU, memory) in USD
//! of the pod-hours that served requests, shared between the workload's models by requests
//! (before `compute`, the workload's whole cost); the ratios are `null` when there were no
//! requests (or tokens) or no bill.

use serde_json::{Map, Value, json};

use super::table::{Cell, Nanos, Table};
use super::{OutputFormat, ReportError};
use crate::engine::usage::{GpuHours, InferenceTotals, gpu_hours, inference_totals};
use crate::period::Period;
use crate::store::{Store, WorkloadCost};

/// GPU-hours per namespace and GPU model for a billing period.
#[derive(Debug, Clone)]
pub struct GpuReport {
    pub period: Period,
    pub idle_threshold: f64,
    /// Allocation from the bill (true) or from the metrics.
    pub from_bill: bool,
    pub rows: Vec<GpuHours>,
    pub metrics_without_bill_gpu_hours: f64,
}

impl GpuReport {
    pub async fn load(
        store: &dyn Store,
        period: Period,
        idle_threshold: f64,
    ) -> Result<GpuReport, ReportError> {
        let allocations = store.gpu_allocations(&period.to_string()).await?;
        let usage = store.gpu_usage(period.start(), period.end()).await?;
        if allocations.is_empty() && usage.is_empty() {
            return Err(ReportError::NoUsage(period));
        }
        let (rows, metrics_without_bill_gpu_hours) = gpu_hours(&allocations, &usage, idle_threshold);
        Ok(GpuReport {
            period,
            idle_threshold,
            from_bill: !allocations.is_empty(),
            rows,
            metrics_without_bill_gpu_hours,
        })
    }

    pub fn table(&self) -> Table {
        Table {
            title: format!(
                "GPU-hours by namespace and GPU model (idle below {:.0} %)",
                self.idle_threshold * 100.0
            ),
            totals: Vec::new(),
            columns: vec![
                "namespace",
                "gpu_model",
                "allocated_gpu_hours",
                "used_gpu_hours",
                "idle_gpu_hours",
                "unmeasured_gpu_hours",
                "unattributed_gpu_hours",
                "utilization",
                "gpu_fleet_cost",
                "accelerator_cost",
                "idle_cost",
                "unallocated_gpu_cost",
            ],
            rows: self
                .rows
                .iter()
                .map(|r| {
                    vec![
                        Cell::Text(r.namespace.clone()),
                        Cell::Text(r.gpu_model.clone()),
                        Cell::Hours(r.allocated_gpu_hours),
                        Cell::Hours(r.used_gpu_hours),
                        Cell::Hours(r.idle_gpu_hours),
                        Cell::Hours(r.unmeasured_gpu_hours),
                        Cell::Hours(r.unattributed_gpu_hours),
                        Cell::Ratio(r.utilization()),
                        // Joined live, hours only: the costs come with `compute`'s rollups.
                        Cell::Usd(None),
                        Cell::Usd(None),
                        Cell::Usd(None),
                        Cell::Usd(None),
                    ]
                })
                .collect(),
        }
    }

    pub fn render(&self, format: OutputFormat) -> String {
        let mut extra = Map::new();
        extra.insert("idle_threshold".into(), json!(self.idle_threshold));
        extra.insert("source".into(), json!(if self.from_bill { "bill" } else { "metrics" }));
        extra.insert("metrics_without_bill_gpu_hours".into(), json!(self.metrics_without_bill_gpu_hours));
        self.table().render(format, &self.period.to_string(), extra)
    }
}

/// Requests and tokens per workload and model for a billing period.
#[derive(Debug, Clone)]
pub struct InferenceReport {
    pub period: Period,
    pub rows: Vec<InferenceTotals>,
}

impl InferenceReport {
    pub async fn load(store: &dyn Store, period: Period) -> Result<InferenceReport, ReportError> {
        let usage = store.inference_usage(period.start(), period.end()).await?;
        if usage.is_empty() {
            return Err(ReportError::NoUsage(period));
        }
        let pods = store.pod_workloads(&period.to_string()).await?;
        let costs = match store.rollups(&period.to_string()).await? {
            Some(rollups) => {
                let mut sums: std::collections::BTreeMap<(String, String), i64> = Default::default();
                for c in &rollups.costs {
                    // The cost of the hours that served (compute resolved pods by cluster).
                    *sums.entry((c.namespace.clone(), c.workload.clone())).or_default() +=
                        c.serving_cost_nanos;
                }
                sums.into_iter()
                    .map(|((namespace, workload), total_cost_nanos)| WorkloadCost {
                        namespace,
                        workload,
                        total_cost_nanos,
                    })
                    .collect()
            }
            None => store.workload_costs(&period.to_string()).await?,
        };
        Ok(InferenceReport { period, rows: inference_totals(&usage, &pods, &costs) })
    }

    pub fn render(&self, format: OutputFormat) -> String {
        let table = Table {
            title: "Inference requests and tokens by workload".into(),
            totals: Vec::new(),
            columns: vec![
                "namespace",
                "workload",
                "model",
                "requests",
                "tokens",
                "prompt_tokens",
                "generation_tokens",
                "cost",
                "cost_per_inference",
                "cost_per_million_tokens",
            ],
            rows: self
                .rows
                .iter()
                .map(|r| {
                    vec![
                        Cell::Text(r.namespace.clone()),
                        Cell::Text(r.workload.clone()),
                        Cell::Text(r.model.clone()),
                        Cell::Count(r.requests),
                        Cell::Count(r.tokens()),
                        Cell::Count(r.prompt_tokens),
                        Cell::Count(r.generation_tokens),
                        Cell::Usd(r.cost.map(Nanos::from_usd)),
                        Cell::Rate(r.cost_per_inference()),
                        Cell::Usd(r.cost_per_million_tokens().map(Nanos::from_usd)),
                    ]
                })
                .collect(),
        };
        table.render(format, &self.period.to_string(), Map::<String, Value>::new())
    }
}

/// `report gpu` as text in `format`: from the period's rollups (they carry provisioned hours
/// and the costs) unless another idle threshold than theirs is asked for; else the bill and
/// the metrics joined now, hours only (the cost columns are `null`).
pub async fn gpu_report(
    store: &dyn Store,
    period: Period,
    idle_threshold: Option<f64>,
    provider: Option<&str>,
    account: Option<&str>,
    format: OutputFormat,
) -> Result<String, ReportError> {
    let computed = store.rollups(&period.to_string()).await?;
    if provider.is_some() || account.is_some() {
        // The account of pods and instances is in the rollups only.
        let rollups = computed.ok_or_else(|| ReportError::NotComputed(period.to_string()))?;
        if idle_threshold.is_some_and(|t| (rollups.period.idle_threshold - t).abs() >= 1e-12) {
            return Err(ReportError::Settings(format!(
                "{period} was computed with idle threshold {}; --account and --provider read the computed rollups, \
                 so --idle-threshold must match it (or recompute with the threshold you want)",
                rollups.period.idle_threshold
            )));
        }
        let parts = vec![std::sync::Arc::new(rollups)];
        let range =
            super::rollup::RollupRange::from_parts(period.to_string(), period.start(), period.end(), parts)?
                .narrowed(provider, account)?;
        return Ok(super::rollup::gpu(&range, &Default::default()).render(format, &range.label));
    }
    let asked = |r: &crate::store::Rollups| {
        idle_threshold.is_none_or(|t| (r.period.idle_threshold - t).abs() < 1e-12)
    };
    let Some(rollups) = computed.filter(asked) else {
        let idle_threshold = match idle_threshold {
            Some(threshold) => threshold,
            None => {
                store.settings().await?.in_force(period).map_err(ReportError::Settings)?.engine.idle_threshold
            }
        };
        return Ok(GpuReport::load(store, period, idle_threshold).await?.render(format));
    };
    let parts = vec![std::sync::Arc::new(rollups)];
    let range =
        super::rollup::RollupRange::from_parts(period.to_string(), period.start(), period.end(), parts)?;
    let mut unattributed: std::collections::BTreeMap<String, f64> = Default::default();
    for usage in store.gpu_usage(period.start(), period.end()).await? {
        if usage.pod.is_empty() {
            *unattributed.entry(usage.gpu_model).or_default() += usage.gpu_hours;
        }
    }
    Ok(super::rollup::gpu(&range, &unattributed).render(format, &range.label))
}
