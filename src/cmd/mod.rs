//! The commands: one module per subcommand, each a thin layer that turns its arguments into
//! a library call (most often a [`crate::pipeline`] job) and prints the outcome: progress and
//! people's text on stderr, what scripts read (CSV, JSON) on stdout.

mod alerts;
mod archive;
mod clients;
mod export;
mod fx;
mod ingest;
mod invoice;
mod plan;
mod report;
mod run;
mod serve;
pub mod users;

use crate::cli::{Cli, Command};
use crate::store::{self, Store};

/// Runs one command. Every command but `generate` opens the database once, here.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    // The operator's own GPU machines, before any bill is read.
    let added = crate::catalog::load_operator_catalog().map_err(anyhow::Error::msg)?;
    if added > 0 {
        tracing::info!(machines = added, "GPU machines added from {}", crate::catalog::OPERATOR_CATALOG_ENV);
    }
    let url = cli.database_url.as_str();
    match cli.command {
        Command::Generate(args) => serve::generate(args).await,
        Command::Serve(args) if args.no_migrate => {
            serve::serve(store::connect_without_migrating(url).await?, args).await
        }
        command => {
            let store = store::connect(url).await?;
            run_with(store, command).await
        }
    }
}

async fn run_with(store: Box<dyn Store>, command: Command) -> anyhow::Result<()> {
    match command {
        Command::Migrate => {
            println!("database ready ({})", store.backend());
            Ok(())
        }
        Command::Generate(_) => unreachable!("generate needs no database"),
        Command::Serve(args) => serve::serve(store, args).await,
        Command::Demo(args) => serve::demo(store, args).await,
        Command::Ingest(command) => ingest::run(store.as_ref(), command).await,
        Command::Report(command) => report::run(store.as_ref(), command).await,
        Command::Compute(args) => ingest::compute(store.as_ref(), args).await,
        Command::Clients(command) => clients::run(store.as_ref(), command).await,
        Command::Pools(command) => clients::pools(store.as_ref(), command).await,
        Command::Settings(command) => clients::settings(store.as_ref(), command).await,
        Command::Users(command) => users::run(store.as_ref(), command).await,
        Command::Invoice(command) => invoice::run(store.as_ref(), command).await,
        Command::Alerts(command) => alerts::run(store.as_ref(), command).await,
        Command::Archive(command) => archive::run(store.as_ref(), command).await,
        Command::Fx(command) => fx::run(store.as_ref(), command).await,
        Command::Plan(command) => plan::run(store.as_ref(), command).await,
        Command::Export(command) => export::run(store.as_ref(), command).await,
        Command::Run(args) => run::run(store.as_ref(), args).await,
    }
}
