//! `gpuledger alerts`: what fires, the thresholds, and where alerts are delivered.

use crate::alerts::prometheus::{RuleNames, detect, rules_yaml};
use crate::cli::{AlertThresholdArgs, AlertsCommand, PrometheusRulesArgs, WebhookCommand};
use crate::domain::settings::EffectiveFrom;
use crate::report::OutputFormat;
use crate::store::{Store, Webhook};

pub(super) async fn run(store: &dyn Store, command: AlertsCommand) -> anyhow::Result<()> {
    match command {
        AlertsCommand::List { state, format } => {
            let mut alerts = store.alerts().await?;
            if let Some(state) = state {
                alerts.retain(|a| a.state == state);
            }
            match format {
                OutputFormat::Json => {
                    println!("{}", serde_json::to_string_pretty(&crate::alerts::to_json(&alerts))?)
                }
                format => print!(
                    "{}",
                    crate::alerts::table(&alerts).render(format, "firing and resolved", Default::default())
                ),
            }
        }
        AlertsCommand::Evaluate => {
            let run = crate::pipeline::evaluate_alerts(store).await?;
            eprintln!(
                "{} alerts firing ({} started, {} resolved); {} deliveries made, {} failed",
                run.firing, run.started, run.resolved, run.delivered, run.failed_deliveries
            );
            println!("{}", serde_json::to_string(&run)?);
        }
        AlertsCommand::Thresholds(args) => thresholds(store, args).await?,
        AlertsCommand::PrometheusRules(args) => prometheus_rules(args).await?,
        AlertsCommand::Webhook(WebhookCommand::Add { url, format, min_severity }) => {
            anyhow::ensure!(
                url.starts_with("https://") || url.starts_with("http://"),
                "--url must be an http(s) URL"
            );
            let webhook = Webhook {
                id: 0,
                url,
                format,
                min_severity: min_severity.to_string(),
                created_at: chrono::Utc::now().timestamp(),
            };
            let id = store.add_webhook(&webhook).await?;
            eprintln!(
                "webhook {id} added: {} alerts of {} and above to {}",
                webhook.format,
                webhook.min_severity,
                webhook.label()
            );
            println!("{id}");
        }
        AlertsCommand::Webhook(WebhookCommand::List) => {
            for webhook in store.webhooks().await? {
                println!("{}\t{}\t{}\t{}", webhook.id, webhook.format, webhook.min_severity, webhook.label());
            }
        }
        AlertsCommand::Webhook(WebhookCommand::Remove { id }) => {
            anyhow::ensure!(
                store.remove_webhook(id).await?,
                "no webhook {id} (see `gpuledger alerts webhook list`)"
            );
            eprintln!("webhook {id} removed");
        }
    }
    Ok(())
}

async fn thresholds(store: &dyn Store, args: AlertThresholdArgs) -> anyhow::Result<()> {
    let history = store.settings().await?;
    let changes = [
        args.idle_share_max,
        args.spot_adoption_min,
        args.utilization_min,
        args.above_p95_share_max,
        args.token_cost_rise_max,
    ];
    if changes.iter().any(Option::is_some) || args.cur_max_age_hours.is_some() {
        for value in changes.into_iter().flatten() {
            anyhow::ensure!((0.0..=10.0).contains(&value), "{value} is not a fraction (0.2 is 20 %)");
        }
        let from = args.from.map_or(EffectiveFrom::BEGINNING, EffectiveFrom::month);
        let version = history
            .alert_thresholds_version(from, |t| {
                t.idle_share_max = args.idle_share_max.unwrap_or(t.idle_share_max);
                t.spot_adoption_min = args.spot_adoption_min.unwrap_or(t.spot_adoption_min);
                t.utilization_min = args.utilization_min.unwrap_or(t.utilization_min);
                t.above_p95_share_max = args.above_p95_share_max.unwrap_or(t.above_p95_share_max);
                t.token_cost_rise_max = args.token_cost_rise_max.unwrap_or(t.token_cost_rise_max);
                t.cur_max_age_hours = args.cur_max_age_hours.unwrap_or(t.cur_max_age_hours);
            })
            .map_err(anyhow::Error::msg)?;
        store.save_settings(&[version]).await?;
    }
    let history = store.settings().await?;
    let period = match store.rollup_periods().await?.first() {
        Some(newest) => newest.period.parse().map_err(|e| anyhow::anyhow!("{e}"))?,
        None => crate::cli::last_complete_month(),
    };
    let thresholds = history.alert_thresholds(period).map_err(anyhow::Error::msg)?;
    println!("{}", serde_json::to_string_pretty(&thresholds)?);
    Ok(())
}

async fn prometheus_rules(args: PrometheusRulesArgs) -> anyhow::Result<()> {
    let mut names = RuleNames { karpenter: args.karpenter, ..RuleNames::default() };
    if let Some(metric) = args.utilization_metric {
        names.utilization_full = if metric == "DCGM_FI_DEV_GPU_UTIL" { 100.0 } else { 1.0 };
        names.utilization = metric;
    }
    if let Some(label) = args.host_label.clone() {
        names.host_label = label;
    }
    if let Some(label) = args.namespace_label.clone() {
        names.namespace_label = label;
    }
    if let Some(url) = args.url {
        let api = crate::sources::prometheus::api::PrometheusApi::new(
            crate::sources::prometheus::api::ApiOptions {
                url,
                bearer_token: args.bearer_token,
                basic_auth: None,
                timeout: std::time::Duration::from_secs(30),
                attempts: 3,
            },
        )?;
        let overrides = crate::sources::prometheus::LabelOverrides {
            host: args.host_label,
            namespace: args.namespace_label,
            ..Default::default()
        };
        names = detect(&api, names, &overrides, args.inference_namespaces).await?;
    } else if let Some(given) = args.inference_namespaces {
        names.inference_namespaces = given;
    }
    regex::Regex::new(&names.inference_namespaces)
        .map_err(|e| anyhow::anyhow!("--inference-namespaces is not a regular expression: {e}"))?;
    let yaml = rules_yaml(&names);
    match args.out {
        Some(path) => {
            std::fs::write(&path, yaml).map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
            eprintln!("wrote {} (check it with `promtool check rules {}`)", path.display(), path.display());
        }
        None => print!("{yaml}"),
    }
    Ok(())
}
