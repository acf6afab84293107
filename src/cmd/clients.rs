//! `gpuledger clients`: share policies, markups and mapping rules.

use anyhow::Context;

use crate::cli::ClientsCommand;
use crate::store;

/// Lists, sets, maps or unmaps clients.
pub(super) async fn run(store: &dyn store::Store, command: ClientsCommand) -> anyhow::Result<()> {
    match command {
        ClientsCommand::List => {
            let out = serde_json::json!({
                "clients": store.client_settings().await?,
                "rules": store.client_rules().await?,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        ClientsCommand::Set(args) => {
            anyhow::ensure!(
                crate::engine::chargeback::POLICIES.contains(&args.policy.as_str()),
                "--policy must be one of {:?}",
                crate::engine::chargeback::POLICIES
            );
            anyhow::ensure!(args.markup_percent >= 0.0, "--markup-percent must not be negative");
            store
                .set_client_settings(&store::ClientSettings {
                    name: args.name.clone(),
                    share_policy: args.policy,
                    markup_basis_points: (args.markup_percent * 100.0).round() as i64,
                })
                .await?;
            eprintln!("client {} saved; run `gpuledger compute` to apply it", args.name);
        }
        ClientsCommand::Map(args) => {
            let (kind, pattern, label_key) =
                match (&args.namespace, &args.prefix, &args.regex, &args.label_value) {
                    (Some(n), ..) => ("namespace", n.clone(), String::new()),
                    (_, Some(p), ..) => ("prefix", p.clone(), String::new()),
                    (_, _, Some(r), _) => {
                        regex::Regex::new(r).with_context(|| format!("--regex {r:?}"))?;
                        ("regex", r.clone(), String::new())
                    }
                    (_, _, _, Some(v)) => ("label", v.clone(), args.label_key.clone()),
                    _ => anyhow::bail!("give --namespace, --prefix, --regex or --label-value"),
                };
            let mut rules = store.client_rules().await?;
            rules.push(store::ClientRule {
                client: args.client.clone(),
                match_kind: kind.into(),
                pattern,
                label_key,
                priority: args.priority,
            });
            store.set_client_rules(&rules).await?;
            eprintln!("rule added for {}; run `gpuledger compute` to apply it", args.client);
        }
        ClientsCommand::Unmap { client } => {
            let mut rules = store.client_rules().await?;
            rules.retain(|r| r.client != client);
            store.set_client_rules(&rules).await?;
        }
    }
    Ok(())
}
