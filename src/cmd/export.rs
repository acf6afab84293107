//! `gpuledger export focus`: a month's FOCUS bills as FOCUS 1.3, with gpuledger's split.

use crate::cli::ExportCommand;
use crate::store::Store;

pub(super) async fn run(store: &dyn Store, command: ExportCommand) -> anyhow::Result<()> {
    match command {
        ExportCommand::Focus { period, out, format } => {
            let started = std::time::Instant::now();
            let summary = crate::export::focus::export_focus(store, period, &out, format).await?;
            eprintln!(
                "{}: {} rows ({} allocated, from {} origin charges) in {:.1} s",
                summary.file.display(),
                summary.rows,
                summary.allocated_rows,
                summary.origin_charges_split,
                started.elapsed().as_secs_f64()
            );
            println!("{}", serde_json::to_string_pretty(&summary)?);
            Ok(())
        }
    }
}
