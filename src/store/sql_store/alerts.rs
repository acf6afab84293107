//! Cost alerts, their events, webhooks and deliveries.

use std::collections::BTreeSet;

use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::{Backend, SqlStore};
use crate::store::sql::ReadRow;
use crate::store::table::Table;
use crate::store::*;

const UPSERT_FIRING: &str = "INSERT INTO alerts (rule, subject, severity, state, value, threshold, link, evidence, \
     since, resolved_at, updated_at) VALUES ($1, $2, $3, 'firing', $4, $5, $6, $7, $8, NULL, $8) \
     ON CONFLICT (rule, subject) DO UPDATE SET severity = excluded.severity, state = 'firing', \
     value = excluded.value, threshold = excluded.threshold, link = excluded.link, evidence = excluded.evidence, \
     since = excluded.since, resolved_at = NULL, updated_at = excluded.updated_at";

const UPDATE_FIRING: &str = "UPDATE alerts SET severity = $3, value = $4, threshold = $5, link = $6, \
     evidence = $7, updated_at = $8 WHERE rule = $1 AND subject = $2";

const RESOLVE: &str = "UPDATE alerts SET state = 'resolved', resolved_at = $3, updated_at = $3 WHERE rule = $1 AND subject = $2";

const INSERT_EVENT: &str = "INSERT INTO alert_events (rule, subject, severity, state, at, value, threshold, link, \
     evidence) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id";

const INSERT_DELIVERY: &str = "INSERT INTO alert_deliveries (event_id, webhook_id) VALUES ($1, $2)";

const INSERT_WEBHOOK: &str =
    "INSERT INTO alert_webhooks (url, format, min_severity, created_at) VALUES ($1, $2, $3, $4) RETURNING id";

const DELETE_WEBHOOK: &str = "DELETE FROM alert_webhooks WHERE id = $1";

const DELETE_PENDING: &str = "DELETE FROM alert_deliveries WHERE webhook_id = $1 AND delivered_at IS NULL";

const SELECT_PENDING: &str = "SELECT d.event_id, d.webhook_id, d.attempts FROM alert_deliveries d \
     WHERE d.delivered_at IS NULL AND d.attempts < $1 ORDER BY d.event_id, d.webhook_id";

const MARK_DELIVERY: &str = "UPDATE alert_deliveries SET attempts = attempts + 1, delivered_at = $3, \
     last_error = $4 WHERE event_id = $1 AND webhook_id = $2";

/// info < warning < critical; anything else counts as info.
fn rank(severity: &str) -> u8 {
    match severity {
        "critical" => 2,
        "warning" => 1,
        _ => 0,
    }
}

#[async_trait::async_trait]
impl<B: Backend> AlertStore for SqlStore<B>
where
    <B::Db as Database>::Row: ReadRow,
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
    for<'q> <B::Db as Database>::Arguments<'q>: IntoArguments<'q, B::Db> + Default,
    for<'q> i64: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<i64>: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> f64: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> String: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> &'q str: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> &'q [u8]: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<&'q str>: Encode<'q, B::Db> + Type<B::Db>,
{
    async fn alerts(&self) -> StoreResult<Vec<Alert>> {
        let sql = Alert::sql().select_ordered("state, rule, subject");
        self.rows(sqlx::query(&sql), "reading alerts").await
    }

    async fn record_alerts(
        &self,
        firing: &[Alert],
        resolved_by: &str,
        now: i64,
    ) -> StoreResult<Vec<AlertEvent>> {
        const CONTEXT: &str = "recording alerts";
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        Self::lock_for_transaction(&mut tx, "alerts").await.context(CONTEXT)?;
        let existing: Vec<Alert> =
            Self::fetch_rows(&mut tx, sqlx::query(&Alert::sql().select_ordered("rule, subject")))
                .await
                .context(CONTEXT)?;
        let webhooks: Vec<Webhook> =
            Self::fetch_rows(&mut tx, sqlx::query(&Webhook::sql().select_ordered("id")))
                .await
                .context(CONTEXT)?;
        let was_firing: BTreeSet<(&str, &str)> = existing
            .iter()
            .filter(|a| a.state == "firing")
            .map(|a| (a.rule.as_str(), a.subject.as_str()))
            .collect();
        let fires_now: BTreeSet<(&str, &str)> =
            firing.iter().map(|a| (a.rule.as_str(), a.subject.as_str())).collect();
        let mut changes: Vec<(&Alert, &str)> = Vec::new();
        for alert in firing {
            let key = (alert.rule.as_str(), alert.subject.as_str());
            let statement = if was_firing.contains(&key) { UPDATE_FIRING } else { UPSERT_FIRING };
            sqlx::query(statement)
                .bind(alert.rule.as_str())
                .bind(alert.subject.as_str())
                .bind(alert.severity.as_str())
                .bind(alert.value.as_str())
                .bind(alert.threshold.as_str())
                .bind(alert.link.as_str())
                .bind(alert.evidence.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await
                .context(CONTEXT)?;
            if !was_firing.contains(&key) {
                changes.push((alert, "firing"));
            }
        }
        for alert in existing.iter().filter(|a| a.state == "firing") {
            if fires_now.contains(&(alert.rule.as_str(), alert.subject.as_str())) {
                continue;
            }
            sqlx::query(RESOLVE)
                .bind(alert.rule.as_str())
                .bind(alert.subject.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await
                .context(CONTEXT)?;
            changes.push((alert, "resolved"));
        }
        let mut events = Vec::with_capacity(changes.len());
        for (alert, state) in changes {
            let evidence = if state == "resolved" {
                format!("{resolved_by}; it was: {}", alert.evidence)
            } else {
                alert.evidence.clone()
            };
            let row = sqlx::query(INSERT_EVENT)
                .bind(alert.rule.as_str())
                .bind(alert.subject.as_str())
                .bind(alert.severity.as_str())
                .bind(state)
                .bind(now)
                .bind(alert.value.as_str())
                .bind(alert.threshold.as_str())
                .bind(alert.link.as_str())
                .bind(evidence.as_str())
                .fetch_one(&mut *tx)
                .await
                .context(CONTEXT)?;
            let id = row.int("id").context(CONTEXT)?;
            for webhook in webhooks.iter().filter(|w| rank(&alert.severity) >= rank(&w.min_severity)) {
                sqlx::query(INSERT_DELIVERY)
                    .bind(id)
                    .bind(webhook.id)
                    .execute(&mut *tx)
                    .await
                    .context(CONTEXT)?;
            }
            events.push(AlertEvent {
                id,
                rule: alert.rule.clone(),
                subject: alert.subject.clone(),
                severity: alert.severity.clone(),
                state: state.to_string(),
                at: now,
                value: alert.value.clone(),
                threshold: alert.threshold.clone(),
                link: alert.link.clone(),
                evidence,
            });
        }
        tx.commit().await.context(CONTEXT)?;
        Ok(events)
    }

    async fn webhooks(&self) -> StoreResult<Vec<Webhook>> {
        let sql = Webhook::sql().select_ordered("id");
        self.rows(sqlx::query(&sql), "reading webhooks").await
    }

    async fn add_webhook(&self, webhook: &Webhook) -> StoreResult<i64> {
        const CONTEXT: &str = "adding a webhook";
        let row = sqlx::query(INSERT_WEBHOOK)
            .bind(webhook.url.as_str())
            .bind(webhook.format.as_str())
            .bind(webhook.min_severity.as_str())
            .bind(webhook.created_at)
            .fetch_one(&self.pool)
            .await
            .context(CONTEXT)?;
        row.int("id").context(CONTEXT)
    }

    async fn remove_webhook(&self, id: i64) -> StoreResult<bool> {
        const CONTEXT: &str = "removing a webhook";
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        sqlx::query(DELETE_PENDING).bind(id).execute(&mut *tx).await.context(CONTEXT)?;
        let removed = sqlx::query(DELETE_WEBHOOK).bind(id).execute(&mut *tx).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)?;
        Ok(B::rows_affected(&removed) > 0)
    }

    async fn pending_deliveries(&self, max_attempts: i64) -> StoreResult<Vec<PendingDelivery>> {
        const CONTEXT: &str = "reading pending alert deliveries";
        let mut conn = self.pool.acquire().await.context(CONTEXT)?;
        let pending =
            sqlx::query(SELECT_PENDING).bind(max_attempts).fetch_all(&mut *conn).await.context(CONTEXT)?;
        if pending.is_empty() {
            return Ok(Vec::new());
        }
        // Only the events still to deliver (pending rows come oldest event first).
        let first = pending[0].int("event_id").context(CONTEXT)?;
        let sql = AlertEvent::sql().select_where("id >= $1");
        let events: Vec<AlertEvent> =
            Self::fetch_rows(&mut conn, sqlx::query(&sql).bind(first)).await.context(CONTEXT)?;
        let webhooks: Vec<Webhook> =
            Self::fetch_rows(&mut conn, sqlx::query(&Webhook::sql().select_ordered("id")))
                .await
                .context(CONTEXT)?;
        let mut out = Vec::with_capacity(pending.len());
        for row in &pending {
            let (event, webhook) =
                (row.int("event_id").context(CONTEXT)?, row.int("webhook_id").context(CONTEXT)?);
            let (Some(event), Some(webhook)) =
                (events.iter().find(|e| e.id == event), webhooks.iter().find(|w| w.id == webhook))
            else {
                continue;
            };
            out.push(PendingDelivery {
                event: event.clone(),
                webhook: webhook.clone(),
                attempts: row.int("attempts").context(CONTEXT)?,
            });
        }
        Ok(out)
    }

    async fn mark_delivery(
        &self,
        event: i64,
        webhook: i64,
        delivered_at: Option<i64>,
        error: &str,
    ) -> StoreResult<()> {
        sqlx::query(MARK_DELIVERY)
            .bind(event)
            .bind(webhook)
            .bind(delivered_at)
            .bind(error)
            .execute(&self.pool)
            .await
            .context("recording an alert delivery")
            .map(|_| ())
    }
}
