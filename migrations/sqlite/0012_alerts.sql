-- Cost alerts: one row per rule and subject, firing or resolved.
CREATE TABLE alerts (
    rule TEXT NOT NULL,
    subject TEXT NOT NULL,
    severity TEXT NOT NULL,
    state TEXT NOT NULL,
    value TEXT NOT NULL DEFAULT '',
    threshold TEXT NOT NULL DEFAULT '',
    link TEXT NOT NULL DEFAULT '',
    evidence TEXT NOT NULL DEFAULT '',
    -- When it last started firing.
    since BIGINT NOT NULL,
    resolved_at BIGINT,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (rule, subject)
);

-- Every change of state (firing, resolved), written with the state.
CREATE TABLE alert_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    rule TEXT NOT NULL,
    subject TEXT NOT NULL,
    severity TEXT NOT NULL,
    state TEXT NOT NULL,
    at BIGINT NOT NULL,
    value TEXT NOT NULL DEFAULT '',
    threshold TEXT NOT NULL DEFAULT '',
    link TEXT NOT NULL DEFAULT '',
    evidence TEXT NOT NULL DEFAULT ''
);

-- Where alerts go: a Slack-compatible incoming webhook or an Alertmanager-style receiver,
-- for alerts of min_severity and above. The URL is a secret: never shown whole.
CREATE TABLE alert_webhooks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    url TEXT NOT NULL,
    format TEXT NOT NULL,
    min_severity TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

-- One delivery of an event to a webhook: pending until delivered_at is set.
CREATE TABLE alert_deliveries (
    event_id BIGINT NOT NULL,
    webhook_id BIGINT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    delivered_at BIGINT,
    last_error TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (event_id, webhook_id)
);
