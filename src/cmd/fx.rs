//! `gpuledger fx set|load|list`: exchange rates, each from a month on.

use anyhow::Context;

use crate::cli::FxCommand;
use crate::domain::fx::{FxRate, refuse_a_jump};
use crate::report::OutputFormat;
use crate::store::Store;

/// Who a command-line change is recorded as in the audit log.
const CLI_USER: &str = "(command line)";

pub(super) async fn run(store: &dyn Store, command: FxCommand) -> anyhow::Result<()> {
    match command {
        FxCommand::Set { from_currency, to_currency, rate, effective_from, confirm } => {
            let rate = FxRate::new(&from_currency, &to_currency, &rate, effective_from, "cli")?;
            if !confirm {
                refuse_a_jump(&store.fx_rates().await?, &rate).map_err(anyhow::Error::msg)?;
            }
            store.set_fx_rates(std::slice::from_ref(&rate), CLI_USER).await?;
            eprintln!(
                "1 {} = {} {} from {} on",
                rate.from_currency, rate.rate, rate.to_currency, rate.effective_from
            );
            recompute(store).await
        }
        FxCommand::Load { file, confirm } => {
            let text =
                std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            let source = file.display().to_string();
            let mut rates = Vec::new();
            for (index, line) in text.lines().enumerate() {
                let fields: Vec<&str> = line.split(',').map(str::trim).collect();
                if line.trim().is_empty() || (index == 0 && fields.first() == Some(&"from_currency")) {
                    continue;
                }
                let at = || format!("{}, line {}", file.display(), index + 1);
                let [from, to, rate, month] = fields[..] else {
                    anyhow::bail!("{}: expected from_currency,to_currency,rate,effective_from", at());
                };
                let month = month.parse().map_err(|e| anyhow::anyhow!("{}, effective_from: {e}", at()))?;
                rates.push(FxRate::new(from, to, rate, month, &source).with_context(at)?);
            }
            anyhow::ensure!(!rates.is_empty(), "{}: no rates", file.display());
            if !confirm {
                // Each against the versions stored and those of the file before it.
                let mut known = store.fx_rates().await?;
                for rate in &rates {
                    refuse_a_jump(&known, rate)
                        .map_err(|e| anyhow::anyhow!("{}: {e}; nothing was loaded", file.display()))?;
                    known.push(rate.clone());
                }
            }
            store.set_fx_rates(&rates, CLI_USER).await?;
            eprintln!("{} rates loaded from {}", rates.len(), file.display());
            recompute(store).await
        }
        FxCommand::List { format } => {
            let rates = store.fx_rates().await?;
            match format {
                OutputFormat::Json => println!("{}", serde_json::json!({ "rates": rates })),
                OutputFormat::Csv => {
                    println!("from_currency,to_currency,rate,effective_from,source");
                    for r in &rates {
                        println!(
                            "{},{},{},{},{}",
                            r.from_currency,
                            r.to_currency,
                            r.rate,
                            r.effective_from,
                            crate::report::csv_cell(&r.source)
                        );
                    }
                }
                OutputFormat::Table => {
                    if rates.is_empty() {
                        println!(
                            "No exchange rates: bills in other currencies than USD are shown unconverted."
                        );
                    }
                    for r in &rates {
                        println!(
                            "1 {} = {} {} from {} ({})",
                            r.from_currency, r.rate, r.to_currency, r.effective_from, r.source
                        );
                    }
                }
            }
            Ok(())
        }
    }
}

/// The months billed in a currency whose rate changed are computed again at it.
async fn recompute(store: &dyn Store) -> anyhow::Result<()> {
    crate::pipeline::compute_pending(store)
        .await
        .map_err(|e| anyhow::anyhow!("the rates are stored, but the ledger was not computed again: {e}"))?;
    Ok(())
}
