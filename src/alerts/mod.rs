//! Cost alerts: gpuledger's own, evaluated after every compute and ingest against the newest
//! computed month, the client budgets, the CUR's freshness and the Cost Explorer cross-check.
//! Live GPU alerts are Prometheus's job: [`prometheus`] writes its rules file.
//!
//! An alert is a rule and a subject (`idle_gpu_hours` of `fleet`, `client_budget` of `acme`):
//! firing while the evaluation finds it, resolved once it no longer does. Each change of state
//! is an event, stored in the same transaction as the state, with one delivery per webhook
//! whose severity it reaches; [`deliver`] sends what is pending (Slack-compatible text or
//! Alertmanager's webhook body), retrying with backoff, and marks each delivery done, so a
//! re-run of the same evaluation sends nothing twice.

pub mod deliver;
pub mod prometheus;

use serde::{Deserialize, Serialize};

use crate::invoice::BudgetCheck;
use crate::report::rollup::Headline;
use crate::report::table::thousands;
use crate::store::Rollups;

pub use crate::domain::alerts::Thresholds;

/// How loud an alert is; webhooks take alerts from a severity up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    #[default]
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

impl std::str::FromStr for Severity {
    type Err = String;

    fn from_str(text: &str) -> Result<Severity, String> {
        match text {
            "info" => Ok(Severity::Info),
            "warning" => Ok(Severity::Warning),
            "critical" => Ok(Severity::Critical),
            other => Err(format!("{other:?} is not a severity: info, warning or critical")),
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one evaluation found: a rule firing for a subject, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub rule: String,
    pub severity: Severity,
    pub subject: String,
    pub value: String,
    pub threshold: String,
    /// The page that explains it.
    pub link: String,
    /// One sentence a person reads.
    pub evidence: String,
}

/// Everything the rules read.
pub struct Inputs<'a> {
    /// The newest computed month, and the one before it when computed.
    pub latest: &'a Rollups,
    pub previous: Option<&'a Rollups>,
    /// Each client with a budget in the newest month, against it.
    pub budgets: Vec<(String, BudgetCheck)>,
    /// When the newest successful CUR ingest finished, and whether the newest CUR run failed
    /// (with its error).
    pub cur_last_success: Option<i64>,
    pub cur_last_failure: Option<String>,
    /// The newest CUR run's refusal, when it was refused: its period and why.
    pub cur_refused: Option<(String, String)>,
    /// Each FOCUS source whose newest run was refused by the judge: the bill it would have
    /// replaced ("2026-10 azure ea-1"), and why.
    pub focus_refused: Vec<(String, String)>,
    /// Periods whose CUR and Cost Explorer disagree, with how many differences.
    pub disagreements: Vec<(String, usize)>,
    pub now: i64,
}

fn percent(value: f64) -> String {
    format!("{:.1} %", value * 100.0)
}

/// A serving workload's month: cost, tokens, serving hours, hours above the P95.
#[derive(Default)]
struct Serving {
    cost_nanos: i64,
    tokens: f64,
    hours: i64,
    above_p95: i64,
}

fn serving(rollups: &Rollups) -> std::collections::BTreeMap<String, Serving> {
    let mut sums: std::collections::BTreeMap<String, Serving> = std::collections::BTreeMap::new();
    for c in rollups.costs.iter().filter(|c| c.requests > 0.0) {
        let s = sums.entry(format!("{}/{}", c.namespace, c.workload)).or_default();
        s.cost_nanos += c.serving_cost_nanos;
        s.tokens += c.prompt_tokens + c.generation_tokens;
        s.hours += c.inference_hours;
        s.above_p95 += c.inference_hours_above_p95;
    }
    sums
}

/// The rules, each over what `inputs` hold: what fires now.
pub fn evaluate(inputs: &Inputs<'_>, thresholds: &Thresholds) -> Vec<Finding> {
    let mut found = Vec::new();
    let period = inputs.latest.period.period.clone();
    let head = Headline::of(inputs.latest);
    let mut fire = |rule: &str,
                    severity,
                    subject: &str,
                    value: String,
                    threshold: String,
                    link: String,
                    evidence: String| {
        found.push(Finding {
            rule: rule.into(),
            severity,
            subject: subject.into(),
            value,
            threshold,
            link,
            evidence,
        });
    };
    if let Some(idle) = head.idle_share().filter(|v| *v > thresholds.idle_share_max) {
        fire(
            "idle_gpu_hours",
            Severity::Warning,
            "fleet",
            percent(idle),
            format!("above {}", percent(thresholds.idle_share_max)),
            format!("/gpus?period={period}"),
            format!(
                "{period}: {} of {} allocated GPU-hours were idle ({}), costing {}",
                thousands(head.gpu_hours_idle, 0),
                thousands(head.gpu_hours_allocated, 0),
                percent(idle),
                crate::money::format_usd_nanos(head.idle_cost_nanos)
            ),
        );
    }
    if let Some(spot) = head.spot_adoption().filter(|v| *v < thresholds.spot_adoption_min) {
        fire(
            "training_spot_adoption",
            Severity::Warning,
            "fleet",
            percent(spot),
            format!("below {}", percent(thresholds.spot_adoption_min)),
            format!("/savings?period={period}"),
            format!(
                "{period}: {} of {} training GPU-hours ran on Spot ({})",
                thousands(head.training_spot_gpu_hours, 0),
                thousands(head.training_gpu_hours, 0),
                percent(spot)
            ),
        );
    }
    if let Some(utilization) = head.utilization().filter(|v| *v < thresholds.utilization_min) {
        fire(
            "gpu_utilization",
            Severity::Warning,
            "fleet",
            percent(utilization),
            format!("below {}", percent(thresholds.utilization_min)),
            format!("/gpus?period={period}"),
            format!(
                "{period}: {} GPU-hours used of {} measured allocated ({})",
                thousands(head.gpu_hours_used, 0),
                thousands(head.gpu_hours_allocated - head.gpu_hours_unmeasured, 0),
                percent(utilization)
            ),
        );
    }
    let now_serving = serving(inputs.latest);
    for (workload, s) in &now_serving {
        let share = if s.hours > 0 { s.above_p95 as f64 / s.hours as f64 } else { 0.0 };
        if share > thresholds.above_p95_share_max {
            fire(
                "cost_per_inference",
                Severity::Info,
                workload,
                percent(share),
                format!(
                    "above {} of serving hours over the fleet's P95",
                    percent(thresholds.above_p95_share_max)
                ),
                format!("/inference?period={period}"),
                format!(
                    "{period}: {workload} served {} hours, {} of them above the fleet's P95 of hourly cost per inference",
                    thousands(s.hours as f64, 0),
                    thousands(s.above_p95 as f64, 0)
                ),
            );
        }
    }
    if let Some(previous) = inputs.previous {
        let before = serving(previous);
        for (workload, s) in &now_serving {
            let Some(b) = before.get(workload) else { continue };
            if s.tokens <= 0.0 || b.tokens <= 0.0 || b.cost_nanos <= 0 {
                continue;
            }
            let per_million = |cost: i64, tokens: f64| cost as f64 / 1e9 / (tokens / 1e6);
            let (now, then) = (per_million(s.cost_nanos, s.tokens), per_million(b.cost_nanos, b.tokens));
            let rise = now / then - 1.0;
            if rise > thresholds.token_cost_rise_max {
                fire(
                    "token_cost_rise",
                    Severity::Warning,
                    workload,
                    percent(rise),
                    format!(
                        "above {} on {}",
                        percent(thresholds.token_cost_rise_max),
                        previous.period.period
                    ),
                    format!("/inference?period={period}"),
                    format!(
                        "{period}: {workload} cost ${now:.4} per 1M tokens, ${then:.4} in {}",
                        previous.period.period
                    ),
                );
            }
        }
    }
    for (client, check) in &inputs.budgets {
        if check.over() {
            fire(
                "client_budget",
                Severity::Warning,
                client,
                check.forecast.usd(),
                format!("budget {}", check.budget.usd()),
                format!("/clients/{client}?period={period}"),
                format!(
                    "{period}: {client} forecast {} against a budget of {}",
                    check.forecast.usd(),
                    check.budget.usd()
                ),
            );
        }
    }
    let age_hours = inputs.cur_last_success.map(|at| (inputs.now - at) / 3600);
    match (&inputs.cur_last_failure, age_hours) {
        (Some(error), _) => fire(
            "cur_stale",
            Severity::Critical,
            "cur",
            "failing".into(),
            "the newest CUR ingest succeeded".into(),
            "/data".into(),
            format!("the newest CUR ingest failed: {error}"),
        ),
        (None, Some(age)) if age > thresholds.cur_max_age_hours => fire(
            "cur_stale",
            Severity::Critical,
            "cur",
            format!("{age} hours"),
            format!("at most {} hours", thresholds.cur_max_age_hours),
            "/data".into(),
            format!("the newest successful CUR ingest finished {age} hours ago"),
        ),
        _ => {}
    }
    if let Some((period, why)) = &inputs.cur_refused {
        fire(
            "cur_delivery_refused",
            Severity::Critical,
            period,
            "refused".into(),
            "a delivery with rows, its bill within --max-drop of the stored one".into(),
            "/data".into(),
            why.clone(),
        );
    }
    for (subject, why) in &inputs.focus_refused {
        fire(
            "focus_delivery_refused",
            Severity::Critical,
            subject,
            "refused".into(),
            "a re-delivered bill within --max-drop and --max-rise of the stored one".into(),
            "/data".into(),
            why.clone(),
        );
    }
    for (period, differences) in &inputs.disagreements {
        fire(
            "cost_explorer_disagrees",
            Severity::Warning,
            period,
            format!("{differences} differences"),
            "within 0.5 % or $1 per day and service".into(),
            "/data".into(),
            format!("{period}: the CUR and Cost Explorer differ on {differences} day-and-service costs"),
        );
    }
    found
}

fn rfc3339(epoch: i64) -> String {
    chrono::DateTime::from_timestamp(epoch, 0).map(|t| t.to_rfc3339()).unwrap_or_default()
}

/// The alerts as `alerts list --format json` and `/alerts?format=json` give them:
/// `{"alerts": [{"rule", "severity", "state", "subject", "value", "threshold", "since",
/// "link", "evidence", "resolved_at"}]}`, times in RFC 3339 (UTC).
pub fn to_json(alerts: &[crate::store::Alert]) -> serde_json::Value {
    serde_json::json!({
        "alerts": alerts.iter().map(|a| serde_json::json!({
            "rule": a.rule,
            "severity": a.severity,
            "state": a.state,
            "subject": a.subject,
            "value": a.value,
            "threshold": a.threshold,
            "since": rfc3339(a.since),
            "link": a.link,
            "evidence": a.evidence,
            "resolved_at": a.resolved_at.map(rfc3339),
        })).collect::<Vec<_>>(),
    })
}

/// The alerts as a table (the page, CSV and the terminal): the rule first (the page links it
/// to the page that explains it).
pub fn table(alerts: &[crate::store::Alert]) -> crate::report::table::Table {
    use crate::report::table::Cell;
    crate::report::table::Table {
        title: "Cost alerts".into(),
        columns: vec![
            "rule",
            "subject",
            "state",
            "severity",
            "value",
            "threshold",
            "since",
            "resolved_at",
            "evidence",
            "link",
        ],
        rows: alerts
            .iter()
            .map(|a| {
                vec![
                    Cell::Text(a.rule.clone()),
                    Cell::Text(a.subject.clone()),
                    Cell::Text(a.state.clone()),
                    Cell::Text(a.severity.clone()),
                    Cell::Text(a.value.clone()),
                    Cell::Text(a.threshold.clone()),
                    Cell::Text(rfc3339(a.since)),
                    Cell::Text(a.resolved_at.map(rfc3339).unwrap_or_default()),
                    Cell::Text(a.evidence.clone()),
                    Cell::Text(a.link.clone()),
                ]
            })
            .collect(),
        totals: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{CostRollup, PeriodRollup};

    /// A month of 100 allocated GPU-hours, `idle` of them idle, `used` used; 50 training
    /// GPU-hours, `spot` of them on Spot.
    fn month(period: &str, idle: f64, used: f64, spot: f64) -> Rollups {
        Rollups {
            period: PeriodRollup { period: period.into(), ..PeriodRollup::default() },
            costs: vec![
                CostRollup {
                    workload_class: crate::store::WorkloadClass::Training,
                    gpu_hours_allocated: 50.0,
                    spot_gpu_hours: spot,
                    gpu_hours_used: used / 2.0,
                    gpu_hours_idle: idle / 2.0,
                    ..CostRollup::default()
                },
                CostRollup {
                    workload_class: crate::store::WorkloadClass::Inference,
                    gpu_hours_allocated: 50.0,
                    gpu_hours_used: used / 2.0,
                    gpu_hours_idle: idle / 2.0,
                    ..CostRollup::default()
                },
            ],
            ..Rollups::default()
        }
    }

    fn inputs(latest: &Rollups) -> Inputs<'_> {
        Inputs {
            latest,
            previous: None,
            budgets: Vec::new(),
            cur_last_success: Some(1_000_000),
            cur_last_failure: None,
            cur_refused: None,
            focus_refused: Vec::new(),
            disagreements: Vec::new(),
            now: 1_000_000 + 3600,
        }
    }

    fn rules(found: &[Finding]) -> Vec<&str> {
        found.iter().map(|f| f.rule.as_str()).collect()
    }

    #[test]
    fn each_threshold_fires_only_beyond_it() {
        let thresholds = Thresholds::default();
        // 20 % idle is the threshold itself: not above it. 40 % used, 30 % Spot: at the limits.
        let at_limits = month("2026-10", 20.0, 40.0, 15.0);
        assert!(evaluate(&inputs(&at_limits), &thresholds).is_empty());
        // 21 idle, 39 used, 14 of 50 training hours on Spot (28 %).
        let wasteful = month("2026-10", 21.0, 39.0, 14.0);
        let found = evaluate(&inputs(&wasteful), &thresholds);
        assert_eq!(rules(&found), ["idle_gpu_hours", "training_spot_adoption", "gpu_utilization"]);
        assert_eq!(found[0].value, "21.0 %");
        assert_eq!(found[1].value, "28.0 %");
        assert_eq!(found[2].value, "39.0 %");
        assert_eq!(found[0].link, "/gpus?period=2026-10");
    }

    #[test]
    fn a_stale_or_failing_cur_is_critical() {
        let fine = month("2026-10", 0.0, 60.0, 50.0);
        let mut stale = inputs(&fine);
        stale.now = 1_000_000 + 49 * 3600;
        let found = evaluate(&stale, &Thresholds::default());
        assert_eq!(rules(&found), ["cur_stale"]);
        assert_eq!((found[0].severity, found[0].value.as_str()), (Severity::Critical, "49 hours"));
        let mut failing = inputs(&fine);
        failing.cur_last_failure = Some("truncated Parquet".into());
        assert_eq!(
            evaluate(&failing, &Thresholds::default())[0].evidence,
            "the newest CUR ingest failed: truncated Parquet"
        );
        let mut refused = inputs(&fine);
        refused.cur_refused = Some(("2026-10".into(), "refused: the delivery of 2026-10 has no rows".into()));
        let found = evaluate(&refused, &Thresholds::default());
        assert_eq!(rules(&found), ["cur_delivery_refused"]);
        assert_eq!((found[0].severity, found[0].subject.as_str()), (Severity::Critical, "2026-10"));
        // A FOCUS bill refused by the same judge is its own alert, named by the bill.
        let mut focus = inputs(&fine);
        focus.focus_refused =
            vec![("2026-10 azure ea-1".into(), "refused: the delivery of 2026-10 azure ea-1".into())];
        let found = evaluate(&focus, &Thresholds::default());
        assert_eq!(rules(&found), ["focus_delivery_refused"]);
        assert_eq!(
            (found[0].severity, found[0].subject.as_str()),
            (Severity::Critical, "2026-10 azure ea-1")
        );
    }
}
