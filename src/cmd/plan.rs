//! `gpuledger plan add|list|remove`: planned changes to demand (issue 42).

use crate::cli::{PlanAddArgs, PlanCommand};
use crate::domain::plans::{Plan, PlanKind};
use crate::report::{OutputFormat, csv_cell};
use crate::store::Store;

/// Who a command-line change is by: `cli:` and the operator's login (`USER`, else `LOGNAME`),
/// `cli:(unknown)` when neither is set (a container's shell).
fn author() -> String {
    let login =
        ["USER", "LOGNAME"].iter().filter_map(|name| std::env::var(name).ok()).find(|v| !v.is_empty());
    format!("cli:{}", login.as_deref().unwrap_or("(unknown)"))
}

pub(super) async fn run(store: &dyn Store, command: PlanCommand) -> anyhow::Result<()> {
    match command {
        PlanCommand::Add(args) => add(store, args).await,
        PlanCommand::List { format } => {
            let plans = store.plans().await?;
            print!("{}", render(&plans, format));
            Ok(())
        }
        PlanCommand::Remove { id } => match store.remove_plan(id, &author()).await? {
            Some(plan) => {
                eprintln!("removed {}", plan.describe());
                Ok(())
            }
            None => anyhow::bail!("no planned change {id} (`gpuledger plan list` shows them)"),
        },
    }
}

async fn add(store: &dyn Store, args: PlanAddArgs) -> anyhow::Result<()> {
    let (kind, amount) = match (args.gpu_hours, args.percent) {
        (Some(hours), None) => (PlanKind::GpuHours, hours),
        (None, Some(percent)) => (PlanKind::Percent, percent),
        _ => anyhow::bail!("give --gpu-hours or --percent, one of them"),
    };
    let now = chrono::Utc::now().timestamp();
    let author = author();
    let plan =
        Plan::new(&args.client, &args.pool, kind, amount, (args.from, args.to), &args.note, &author, now)?;
    let id = store.add_plan(&plan, &author).await?;
    eprintln!("added {}", Plan { id, ..plan }.describe());
    println!("{id}");
    Ok(())
}

/// The changes as a table, CSV or `{"plans": [...]}`.
fn render(plans: &[Plan], format: OutputFormat) -> String {
    match format {
        OutputFormat::Json => serde_json::json!({ "plans": plans }).to_string() + "\n",
        OutputFormat::Csv => {
            let mut out =
                "id,client,pool,kind,amount,from_month,to_month,note,author,created_at\n".to_string();
            for p in plans {
                out += &format!(
                    "{},{},{},{},{},{},{},{},{},{}\n",
                    p.id,
                    csv_cell(&p.client),
                    csv_cell(&p.pool),
                    p.kind,
                    p.amount,
                    p.from_month,
                    p.to_month,
                    csv_cell(&p.note),
                    csv_cell(&p.author),
                    p.created_at
                );
            }
            out
        }
        OutputFormat::Table => {
            if plans.is_empty() {
                return "No planned changes: forecasts are the statistical forecast alone.\n".into();
            }
            plans
                .iter()
                .map(|p| {
                    let at = chrono::DateTime::from_timestamp(p.created_at, 0)
                        .map_or(String::new(), |t| t.format("%Y-%m-%d %H:%M UTC").to_string());
                    format!("{} (added by {} on {at})\n", p.describe(), p.author)
                })
                .collect()
        }
    }
}
