//! `gpuledger clients`, `pools` and `settings`: client terms, mapping rules, pool rules and
//! the engine's settings, each saved as a version from the month it takes effect.

use anyhow::Context;

use crate::cli::{BoundsArgs, ClientsCommand, EngineSetArgs, PoolsCommand, SettingsCommand};
use crate::domain::settings::{ClientTerms, EffectiveFrom, SettingKind, SettingVersion};
use crate::store::{self, MatchKind, Store};

/// Lists, sets, maps or unmaps clients.
pub(super) async fn run(store: &dyn Store, command: ClientsCommand) -> anyhow::Result<()> {
    let history = store.settings().await?;
    match command {
        ClientsCommand::List => {
            let kinds = [SettingKind::Client, SettingKind::Mapping, SettingKind::Labels, SettingKind::Budget];
            print_versions(history.versions.iter().filter(|v| kinds.contains(&v.kind)))?;
        }
        ClientsCommand::Set(args) => {
            crate::auth::check_name("client", &args.name).map_err(anyhow::Error::msg)?;
            let markup = args
                .markup_percent
                .map(ClientTerms::markup_from_percent)
                .transpose()
                .map_err(|e| anyhow::anyhow!("--markup-percent: {e}"))?;
            let exempt = match (args.exempt, args.no_exempt) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            };
            let from = args.from.effective_from();
            let version = history
                .client_version(&args.name, from, |terms| {
                    if let Some(points) = markup {
                        terms.markup_basis_points = points;
                    }
                    if let Some(exempt) = exempt {
                        terms.exempt = exempt;
                    }
                    if let Some(basis) = args.basis {
                        terms.basis = basis;
                    }
                })
                .map_err(anyhow::Error::msg)?;
            save(store, &[version], &format!("client {}", args.name), from).await?;
        }
        ClientsCommand::Map(args) => {
            crate::auth::check_name("client", &args.client).map_err(anyhow::Error::msg)?;
            let (kind, pattern, label_key) =
                match (&args.namespace, &args.prefix, &args.regex, &args.label_value) {
                    (Some(n), ..) => (MatchKind::Namespace, n.clone(), String::new()),
                    (_, Some(p), ..) => (MatchKind::Prefix, p.clone(), String::new()),
                    (_, _, Some(r), _) => {
                        regex::Regex::new(r).with_context(|| format!("--regex {r:?}"))?;
                        (MatchKind::Regex, r.clone(), String::new())
                    }
                    (_, _, _, Some(v)) => (MatchKind::Label, v.clone(), args.label_key.clone()),
                    _ => anyhow::bail!("give --namespace, --prefix, --regex or --label-value"),
                };
            let rule = store::ClientRule {
                client: args.client.clone(),
                match_kind: kind,
                pattern,
                label_key,
                priority: args.priority,
            };
            let from = args.from.effective_from();
            let versions = history
                .mapping_versions(from, |rules| {
                    if !rules.contains(&rule) {
                        rules.push(rule.clone());
                    }
                })
                .map_err(anyhow::Error::msg)?;
            save(store, &versions, &format!("a rule for {}", args.client), from).await?;
        }
        ClientsCommand::Labels { scopes, from } => {
            let scopes: Vec<String> =
                scopes.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
            let from = from.effective_from();
            let version = history.labels_version(from, &scopes).map_err(anyhow::Error::msg)?;
            let what = match scopes.is_empty() {
                true => "pod labels trusted nowhere".to_string(),
                false => format!("pod labels trusted in {}", scopes.join(", ")),
            };
            save(store, &[version], &what, from).await?;
        }
        ClientsCommand::Billing(args) => super::invoice::billing(store, args).await?,
        ClientsCommand::Budget { name, monthly, from } => {
            anyhow::ensure!(monthly.0 >= 0, "--monthly must not be negative");
            let from = from.effective_from();
            let version = history.budget_version(&name, from, monthly);
            save(store, &[version], &format!("{name}'s budget {}", monthly.usd()), from).await?;
        }
        ClientsCommand::Unmap { client, from } => {
            let from = from.effective_from();
            let versions = history
                .mapping_versions(from, |rules| rules.retain(|r| r.client != client))
                .map_err(anyhow::Error::msg)?;
            save(store, &versions, &format!("{client}'s rules removed"), from).await?;
        }
    }
    Ok(())
}

/// Lists or sets the pools' rules.
pub(super) async fn pools(store: &dyn Store, command: PoolsCommand) -> anyhow::Result<()> {
    let history = store.settings().await?;
    match command {
        PoolsCommand::List => {
            print_versions(history.versions.iter().filter(|v| v.kind == SettingKind::Pool))?
        }
        PoolsCommand::Set(args) => {
            let from = args.from.effective_from();
            let version = history.pool_version(args.pool, args.rule, from);
            let what = format!("the {} pool's rule ({})", args.pool.as_str(), args.rule.as_str());
            save(store, &[version], &what, from).await?;
        }
    }
    Ok(())
}

/// Lists every setting, or sets the engine's.
pub(super) async fn settings(store: &dyn Store, command: SettingsCommand) -> anyhow::Result<()> {
    let history = store.settings().await?;
    match command {
        SettingsCommand::List { period } => {
            let mut out = serde_json::json!({ "versions": history.versions });
            if let Some(period) = period {
                out["period"] = serde_json::json!(period.to_string());
                out["in_force"] =
                    serde_json::to_value(history.in_force(period).map_err(anyhow::Error::msg)?)?;
                out["ingest_bounds"] =
                    serde_json::to_value(history.ingest_bounds(period).map_err(anyhow::Error::msg)?)?;
            }
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        SettingsCommand::Set(EngineSetArgs { idle_threshold, platform_namespaces, from }) => {
            anyhow::ensure!(
                idle_threshold.is_some() || platform_namespaces.is_some(),
                "give --idle-threshold and/or --platform-namespaces"
            );
            if let Some(threshold) = idle_threshold {
                anyhow::ensure!(
                    (0.0..=1.0).contains(&threshold),
                    "--idle-threshold is a fraction between 0 and 1, not {threshold}"
                );
            }
            let from = from.effective_from();
            let version = history
                .engine_version(from, |engine| {
                    if let Some(threshold) = idle_threshold {
                        engine.idle_threshold = threshold;
                    }
                    if let Some(namespaces) = platform_namespaces {
                        engine.platform_namespaces = namespaces;
                    }
                })
                .map_err(anyhow::Error::msg)?;
            save(store, &[version], "the engine's settings", from).await?;
        }
        SettingsCommand::Bounds(BoundsArgs { max_drop, max_rise, from }) => {
            anyhow::ensure!(max_drop.is_some() || max_rise.is_some(), "give --max-drop and/or --max-rise");
            let from = from.effective_from();
            let version = history
                .ingest_bounds_version(from, |bounds| {
                    if let Some(percent) = max_drop {
                        bounds.max_drop_percent = percent;
                    }
                    if let Some(percent) = max_rise {
                        bounds.max_rise_percent = percent;
                    }
                })
                .map_err(anyhow::Error::msg)?;
            store.save_settings(&[version]).await?;
            let when =
                if from == EffectiveFrom::BEGINNING { "the beginning".to_string() } else { from.to_string() };
            eprintln!(
                "the re-delivery bounds saved, in force for the bills of {when} on: the next ingest of those \
                 months is judged by them"
            );
        }
    }
    Ok(())
}

fn print_versions<'a>(versions: impl Iterator<Item = &'a SettingVersion>) -> anyhow::Result<()> {
    let versions: Vec<&SettingVersion> = versions.collect();
    println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "versions": versions }))?);
    Ok(())
}

async fn save(
    store: &dyn Store,
    versions: &[SettingVersion],
    what: &str,
    from: EffectiveFrom,
) -> anyhow::Result<()> {
    store.save_settings(versions).await?;
    let when = if from == EffectiveFrom::BEGINNING {
        "from the beginning".to_string()
    } else {
        format!("from {from}")
    };
    eprintln!("{what} saved, in force {when}; run `gpuledger compute` to apply it to computed months");
    Ok(())
}
