//! Cost alerts as stored: a rule firing or resolved for a subject, the events of its
//! changes, the webhooks they go to; and the thresholds the rules fire at.

use serde::{Deserialize, Serialize};

/// The thresholds, a setting with effective dates (`gpuledger alerts thresholds`); the
/// defaults are the FinOps playbook's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Thresholds {
    /// Idle over allocated GPU-hours above this fires `idle_gpu_hours`.
    pub idle_share_max: f64,
    /// Spot over training GPU-hours below this fires `training_spot_adoption`.
    pub spot_adoption_min: f64,
    /// Used over measured allocated GPU-hours below this fires `gpu_utilization`.
    pub utilization_min: f64,
    /// A serving workload whose hours above the fleet's P95 of hourly cost per inference are
    /// more than this share of its serving hours fires `cost_per_inference` (5 % is normal).
    pub above_p95_share_max: f64,
    /// Cost per 1M tokens up by more than this on the month before fires `token_cost_rise`.
    pub token_cost_rise_max: f64,
    /// The newest successful CUR ingest older than this many hours fires `cur_stale`.
    pub cur_max_age_hours: i64,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            idle_share_max: 0.20,
            spot_adoption_min: 0.30,
            utilization_min: 0.40,
            above_p95_share_max: 0.20,
            token_cost_rise_max: 0.20,
            cur_max_age_hours: 48,
        }
    }
}

/// A cost alert as stored: a rule and a subject, firing or resolved.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Alert {
    pub rule: String,
    pub subject: String,
    /// `info`, `warning` or `critical`.
    pub severity: String,
    /// `firing` or `resolved`.
    pub state: String,
    pub value: String,
    pub threshold: String,
    pub link: String,
    pub evidence: String,
    /// When it last started firing (UTC epoch seconds).
    pub since: i64,
    pub resolved_at: Option<i64>,
    pub updated_at: i64,
}

/// A change of an alert's state, as delivered.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct AlertEvent {
    pub id: i64,
    pub rule: String,
    pub subject: String,
    pub severity: String,
    /// `firing` or `resolved`.
    pub state: String,
    pub at: i64,
    pub value: String,
    pub threshold: String,
    pub link: String,
    pub evidence: String,
}

/// Where alerts go.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Webhook {
    pub id: i64,
    /// A secret (Slack's URLs carry their token): shown only as [`Webhook::label`].
    #[serde(skip)]
    pub url: String,
    /// `slack` or `alertmanager`.
    pub format: String,
    pub min_severity: String,
    pub created_at: i64,
}

impl Webhook {
    /// The URL without its path, query or credentials: what a page or a log may show.
    pub fn label(&self) -> String {
        let (scheme, rest) = self.url.split_once("://").unwrap_or(("", self.url.as_str()));
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host = authority.rsplit('@').next().unwrap_or("");
        format!("{scheme}://{host}/…")
    }
}

/// A delivery still to make: the event, the webhook, the attempts so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingDelivery {
    pub event: AlertEvent,
    pub webhook: Webhook,
    pub attempts: i64,
}
