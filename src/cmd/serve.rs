//! `gpuledger serve`, `demo` and `generate`.

use anyhow::Context;

use crate::cli::{DemoArgs, GenerateArgs, ServeArgs, last_complete_month};
use crate::ingest::CurIngestOptions;
use crate::store::Store;
use crate::synth::{self, GenerateOptions};
use crate::web;

/// Serves the dashboard until Ctrl-C or SIGTERM.
pub(super) async fn serve(store: Box<dyn Store>, args: ServeArgs) -> anyhow::Result<()> {
    web::serve(web::AppState::new(store), args.listen).await
}

/// Generates the demo data on the first run, ingests what is new (nothing on a later run),
/// and serves.
pub(super) async fn demo(store: Box<dyn Store>, args: DemoArgs) -> anyhow::Result<()> {
    if !args.data.join("truth.json").exists() {
        let summary =
            generate_blocking(GenerateOptions::demo(args.data.clone(), last_complete_month())).await?;
        eprintln!(
            "generated {} CUR rows for {} in {}",
            summary.cur_rows,
            summary.periods.join(", "),
            args.data.display()
        );
    }
    let options = CurIngestOptions {
        source: args.data.join("cur").join(synth::DEFAULT_EXPORT_NAME).display().to_string(),
        period: None,
        ..CurIngestOptions::default()
    };
    super::ingest::run_cur_ingest(store.as_ref(), &options).await?;
    super::ingest::ingest_demo_metrics(store.as_ref(), &args.data.join("metrics")).await?;
    web::serve(web::AppState::new(store), args.listen).await
}

/// Writes a synthetic export; the summary is for scripts (JSON on stdout).
pub(super) async fn generate(args: GenerateArgs) -> anyhow::Result<()> {
    let options = GenerateOptions {
        out: args.out,
        seed: args.seed,
        months: args.months,
        end: args.end.unwrap_or_else(last_complete_month),
        scale: args.scale,
        format: args.format,
        bucket: args.bucket,
        prefix: args.prefix,
        export_name: args.export_name,
        metrics: !args.no_metrics,
        fixes_from: args.fixes_from,
    };
    let summary = generate_blocking(options).await?;
    println!("{}", serde_json::to_string(&summary)?);
    Ok(())
}

/// Generation is CPU-bound: run it off the async runtime, with progress on stderr.
async fn generate_blocking(options: GenerateOptions) -> anyhow::Result<synth::GenerateSummary> {
    let out = options.out.clone();
    tokio::task::spawn_blocking(move || {
        let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
        synth::generate(&options, &progress)
    })
    .await?
    .with_context(|| format!("generating into {}", out.display()))
}
