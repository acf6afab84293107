//! `gpuledger report …`: every report printed in the format asked for (a table for people,
//! CSV or JSON for scripts) on stdout.

use crate::auth::Scope;
use crate::cli::{RangeArgs, ReportCommand, UsageError};
use crate::period::Range;
use crate::report::NamespaceReport;
use crate::report::cross_check::{CrossCheck, Tolerance};
use crate::report::pod_split::PodSplitReport;
use crate::report::rollup::{self, Report, RollupRange};
use crate::report::split_check::SplitCheck;
use crate::report::usage::{InferenceReport, gpu_report};
use crate::store::Store;

/// Prints one report.
pub(super) async fn run(store: &dyn Store, command: ReportCommand) -> anyhow::Result<()> {
    // The reports over rollups differ only in which table they build.
    let (args, build): (RangeArgs, fn(&RollupRange) -> Report) = match command {
        ReportCommand::Namespaces(args) if args.account.is_some() || args.provider.is_some() => {
            // The account of pods is in the rollups: the period's, narrowed to the account.
            let range = RollupRange::period(store, &Scope::All, args.period)
                .await?
                .narrowed(args.provider.as_deref(), args.account.as_deref())?;
            let report = NamespaceReport::from_rollups(&range, args.cluster.as_deref(), args.by_cluster);
            print!("{}", report.render(args.format));
            return Ok(());
        }
        ReportCommand::Namespaces(args) => {
            let report =
                NamespaceReport::load(store, args.period, args.cluster.as_deref(), args.by_cluster).await?;
            print!("{}", report.render(args.format));
            return Ok(());
        }
        ReportCommand::Bill(args) => {
            print!(
                "{}",
                crate::report::bill::BillReport::load(store, args.period, args.provider.as_deref())
                    .await?
                    .render(args.format)
            );
            return Ok(());
        }
        ReportCommand::Restatements(args) => {
            let period = args.period.to_string();
            let current = store.rollups(&period).await?.map(|r| r.clients).unwrap_or_default();
            match store.chargeback_snapshots(&period).await?.first() {
                Some(snapshot) => {
                    print!("{}", rollup::restatement(&current, snapshot).render(args.format, &period))
                }
                None => {
                    eprintln!("{period}: no compute has changed its chargeback since it was first computed")
                }
            }
            return Ok(());
        }
        ReportCommand::Gpu(args) => {
            let (provider, account) = (args.provider.as_deref(), args.account.as_deref());
            print!(
                "{}",
                gpu_report(store, args.period, args.idle_threshold, provider, account, args.format).await?
            );
            return Ok(());
        }
        ReportCommand::Inference(args) => {
            print!("{}", InferenceReport::load(store, args.period).await?.render(args.format));
            return Ok(());
        }
        ReportCommand::CrossCheck(args) => {
            let tolerance = Tolerance { percent: args.tolerance_percent, usd: args.tolerance_usd };
            print!("{}", CrossCheck::load(store, args.period, tolerance).await?.render(args.format));
            return Ok(());
        }
        ReportCommand::SplitCheck(args) => {
            let check = SplitCheck::load(store, args.period, &args.cluster, args.tolerance_percent).await?;
            print!("{}", check.render(args.format));
            return Ok(());
        }
        ReportCommand::Forecast(args) => {
            let history =
                crate::report::forecast::History::load(store, chrono::Utc::now().date_naive()).await?;
            let (months, pool, client) = (args.months, args.pool.clone(), args.client.clone());
            // Hundreds of model fits: off the async runtime.
            let report = tokio::task::spawn_blocking(move || {
                crate::report::forecast::ForecastReport::build(
                    &history,
                    months,
                    pool.as_deref(),
                    client.as_deref(),
                )
            });
            print!("{}", report.await?.render(args.format));
            return Ok(());
        }
        ReportCommand::Capacity(args) => {
            let report = against_forecast(store, args.months, crate::report::capacity::CapacityReport::build);
            print!("{}", report.await?.render(args.format));
            return Ok(());
        }
        ReportCommand::SpotBudgets(args) => {
            let report = against_forecast(store, args.months, crate::report::spot::SpotReport::build);
            print!("{}", report.await?.render(args.format));
            return Ok(());
        }
        ReportCommand::Commitments(args) => {
            use crate::sources::cost_explorer::{CeOptions, CostExplorer};
            let aws = if args.aws_cost_explorer {
                // Three requests: the Compute Savings Plan's recommendation, the EC2 Instance
                // Savings Plans' and the reservations'.
                use crate::sources::cost_explorer::SavingsPlansType;
                let options =
                    CeOptions { endpoint_url: args.ce_endpoint_url.clone(), ..CeOptions::default() };
                let client = CostExplorer::connect(&options).await;
                let lookback = crate::report::commitments::LONG_LOOKBACK_DAYS as u32;
                let source = || "Cost Explorer".to_string();
                let plans = |kind| client.savings_plans_recommendation(kind, lookback);
                crate::report::commitments::AwsRecommendations {
                    savings_plan: Some((plans(SavingsPlansType::ComputeSp).await?, source())),
                    instance_plans: Some((plans(SavingsPlansType::Ec2InstanceSp).await?, source())),
                    reservations: Some((client.reservation_recommendation(lookback).await?, source())),
                }
            } else {
                saved_recommendations(&args.aws_recommendation)?
            };
            let mut report = crate::report::commitments::CommitmentsReport::load(store, args.months).await?;
            report.compare_with_aws(&aws);
            print!("{}", report.render(args.format));
            return Ok(());
        }
        ReportCommand::Split(args) => {
            let split = PodSplitReport::load(store, args.period, &args.cluster).await?;
            print!("{}", split.render(args.format));
            return Ok(());
        }
        ReportCommand::Workloads(args) => (args, rollup::workloads),
        ReportCommand::Clients(args) => (args, rollup::clients),
        ReportCommand::Spot(args) => (args, rollup::spot),
        ReportCommand::Savings(args) => (args, rollup::savings),
        ReportCommand::Opportunities(args) => (args, rollup::opportunities),
        ReportCommand::Accounts(args) => (args, rollup::accounts),
        ReportCommand::Providers(args) => (args, rollup::providers),
    };
    let range = load_range(store, &args).await?;
    print!("{}", build(&range).render(args.format, &range.label));
    Ok(())
}

/// AWS's recommendations saved in `paths` (`--aws-recommendation`, each a Compute or EC2
/// Instance Savings Plan answer or a reservation answer, told apart by what it holds), and
/// where each came from.
pub(super) fn saved_recommendations(
    paths: &[std::path::PathBuf],
) -> anyhow::Result<crate::report::commitments::AwsRecommendations> {
    use crate::sources::{cost_explorer, reservation_recommendation as reservations};
    let mut found = crate::report::commitments::AwsRecommendations::default();
    for path in paths {
        let text = std::fs::read_to_string(path)
            .map_err(|e| UsageError(format!("--aws-recommendation {}: {e}", path.display())))?;
        let location = path.display().to_string();
        let source = format!("saved answer {location}");
        let twice =
            |what: &str| UsageError(format!("--aws-recommendation {location}: a second {what} answer"));
        if reservations::is_reservation_answer(&text) {
            let answer = reservations::read_saved(&text, &location)?;
            if found.reservations.replace((answer, source)).is_some() {
                return Err(twice("reservation").into());
            }
        } else {
            let answer = cost_explorer::read_saved_recommendation(&text, &location)?;
            let (slot, what) = if answer.savings_plans_type == "EC2_INSTANCE_SP" {
                (&mut found.instance_plans, "EC2 Instance Savings Plan")
            } else {
                (&mut found.savings_plan, "Compute Savings Plan")
            };
            if slot.replace((answer, source)).is_some() {
                return Err(twice(what).into());
            }
        }
    }
    Ok(found)
}

/// The rollups of `--period`, or of `--from`/`--to`; a bad range is a usage error (exit 2).
async fn load_range(store: &dyn Store, args: &RangeArgs) -> anyhow::Result<RollupRange> {
    let range = Range::parse(args.period.as_deref(), args.from.as_deref(), args.to.as_deref())
        .map_err(|e| UsageError(format!("--{e}")))?
        .ok_or_else(|| UsageError("give --period YYYY-MM, or --from and --to".into()))?;
    let loaded = RollupRange::load(store, &Scope::All, range.label(), range.start(), range.end()).await?;
    Ok(loaded.narrowed(args.provider.as_deref(), args.account.as_deref())?)
}

/// A report built from the history and the forecast of every series `months` ahead (the
/// fits off the async runtime).
async fn against_forecast<R: Send + 'static>(
    store: &dyn Store,
    months: u32,
    build: fn(&crate::report::forecast::History, &crate::report::forecast::ForecastReport) -> R,
) -> anyhow::Result<R> {
    let history = crate::report::forecast::History::load(store, chrono::Utc::now().date_naive()).await?;
    Ok(tokio::task::spawn_blocking(move || {
        let forecast = crate::report::forecast::ForecastReport::build(&history, months, None, None);
        build(&history, &forecast)
    })
    .await?)
}
