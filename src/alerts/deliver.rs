//! Webhook delivery: every pending delivery sent as its webhook's format, retried with
//! backoff, each marked once delivered. A delivery that still fails after its attempts stays
//! pending for the next run, up to [`MAX_ATTEMPTS`].

use std::time::Duration;

use serde_json::{Value, json};

use crate::store::{AlertEvent, PendingDelivery, Store, StoreError};

/// Attempts at one delivery across runs before it is given up.
pub const MAX_ATTEMPTS: i64 = 10;

/// Attempts within one run, with a doubling wait between them.
const ATTEMPTS_PER_RUN: u32 = 3;

/// What a delivery run did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Delivered {
    pub delivered: usize,
    pub failed: usize,
}

fn rfc3339(epoch: i64) -> String {
    chrono::DateTime::from_timestamp(epoch, 0).map(|t| t.to_rfc3339()).unwrap_or_default()
}

/// A Slack-compatible incoming-webhook message.
pub fn slack_body(event: &AlertEvent, base_url: &str) -> Value {
    let mark = if event.state == "firing" { "FIRING" } else { "RESOLVED" };
    json!({
        "text": format!(
            "[{mark}] {} ({}) {}: {} ({}). {} {base_url}{}",
            event.rule, event.severity, event.subject, event.value, event.threshold, event.evidence, event.link
        ),
    })
}

/// Alertmanager's webhook body (version 4), so existing receivers work.
pub fn alertmanager_body(event: &AlertEvent, base_url: &str) -> Value {
    let labels = json!({
        "alertname": event.rule,
        "severity": event.severity,
        "subject": event.subject,
        "source": "gpuledger",
    });
    let (starts, ends) = if event.state == "firing" {
        (rfc3339(event.at), "0001-01-01T00:00:00Z".to_string())
    } else {
        (String::new(), rfc3339(event.at))
    };
    json!({
        "version": "4",
        "groupKey": format!("{{}}:{{alertname=\"{}\", subject=\"{}\"}}", event.rule, event.subject),
        "truncatedAlerts": 0,
        "status": event.state,
        "receiver": "gpuledger",
        "groupLabels": {"alertname": event.rule},
        "commonLabels": labels,
        "commonAnnotations": {"summary": event.evidence},
        "externalURL": base_url,
        "alerts": [{
            "status": event.state,
            "labels": labels,
            "annotations": {
                "summary": event.evidence,
                "value": event.value,
                "threshold": event.threshold,
            },
            "startsAt": starts,
            "endsAt": ends,
            "generatorURL": format!("{base_url}{}", event.link),
            "fingerprint": crate::auth::sha256_hex(format!("{}\u{0}{}", event.rule, event.subject).as_bytes())[..16].to_string(),
        }],
    })
}

/// Sends every pending delivery; `base_url` prefixes the links (the dashboard's address).
pub async fn deliver(store: &dyn Store, base_url: &str, timeout: Duration) -> Result<Delivered, StoreError> {
    let pending = store.pending_deliveries(MAX_ATTEMPTS).await?;
    let mut outcome = Delivered::default();
    if pending.is_empty() {
        return Ok(outcome);
    }
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| StoreError::Invalid(e.to_string()))?;
    for PendingDelivery { event, webhook, .. } in pending {
        let body = match webhook.format.as_str() {
            "slack" => slack_body(&event, base_url),
            _ => alertmanager_body(&event, base_url),
        };
        let mut wait = Duration::from_millis(500);
        let mut error = String::new();
        for attempt in 1..=ATTEMPTS_PER_RUN {
            match client.post(&webhook.url).json(&body).send().await {
                Ok(response) if response.status().is_success() => {
                    error.clear();
                    break;
                }
                // Never the URL itself: it is a secret.
                Ok(response) => error = format!("{} answered {}", webhook.label(), response.status()),
                Err(e) => error = format!("{}: {}", webhook.label(), e.without_url()),
            }
            if attempt < ATTEMPTS_PER_RUN {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
        if error.is_empty() {
            store.mark_delivery(event.id, webhook.id, Some(chrono::Utc::now().timestamp()), "").await?;
            outcome.delivered += 1;
        } else {
            tracing::warn!(rule = %event.rule, subject = %event.subject, webhook = webhook.id, %error, "alert not delivered; tried again next run");
            store.mark_delivery(event.id, webhook.id, None, &error).await?;
            outcome.failed += 1;
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(state: &str) -> AlertEvent {
        AlertEvent {
            id: 7,
            rule: "idle_gpu_hours".into(),
            subject: "fleet".into(),
            severity: "warning".into(),
            state: state.into(),
            at: 1_790_812_800,
            value: "23.1 %".into(),
            threshold: "above 20.0 %".into(),
            link: "/gpus?period=2026-09".into(),
            evidence: "2026-09: 2628 of 11358 allocated GPU-hours were idle".into(),
        }
    }

    #[test]
    fn slack_and_alertmanager_bodies_say_what_fired_and_where_to_look() {
        let slack = slack_body(&event("firing"), "https://ledger.example");
        assert_eq!(
            slack["text"],
            "[FIRING] idle_gpu_hours (warning) fleet: 23.1 % (above 20.0 %). 2026-09: 2628 of 11358 allocated \
             GPU-hours were idle https://ledger.example/gpus?period=2026-09"
        );
        let firing = alertmanager_body(&event("firing"), "https://ledger.example");
        assert_eq!((firing["version"].as_str(), firing["status"].as_str()), (Some("4"), Some("firing")));
        let alert = &firing["alerts"][0];
        assert_eq!(alert["labels"]["alertname"], "idle_gpu_hours");
        assert_eq!(alert["startsAt"], "2026-10-01T00:00:00+00:00");
        assert_eq!(alert["endsAt"], "0001-01-01T00:00:00Z");
        let resolved = alertmanager_body(&event("resolved"), "https://ledger.example");
        assert_eq!(resolved["alerts"][0]["endsAt"], "2026-10-01T00:00:00+00:00");
        // One alert keeps one fingerprint across its firing and its resolve.
        assert_eq!(alert["fingerprint"], resolved["alerts"][0]["fingerprint"]);
    }
}
