//! The jobs: ingest → compute as one recorded pipeline. The command line, `demo` and (later)
//! a scheduler call these functions, so each job behaves the same wherever it starts.
//!
//! - Every ingest and compute is recorded as a run: `running` when it starts, then
//!   `succeeded` or `failed` with its error. A run whose process died (SIGKILL, a crash, a
//!   reboot) is marked `interrupted` by the next job on the same host.
//! - Every job ends by computing the *pending* periods: those whose bill or metrics changed
//!   since their rollups were computed (`Store::pending_periods`, kept by revision numbers
//!   written in the same transaction as the data). So a period ingested by a run that then
//!   failed or was killed is computed by the next run, even when the next run finds nothing
//!   new to ingest.

use crate::domain::runs::RunKind;
use crate::engine::compute::{ComputeError, ComputeSummary, compute_period};
use crate::ingest::metrics::{MetricsError, MetricsIngestOptions, MetricsIngestResult, ingest_metrics};
use crate::ingest::{CurIngestOptions, IngestError, PeriodResult, ingest_cur};
use crate::period::Period;
use crate::store::{IngestOutcome, NewIngestRun, Store, StoreError};

/// Why a job stopped.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Ingest(#[from] IngestError),
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    #[error(transparent)]
    Compute(#[from] ComputeError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a CUR job did, and how it ended: periods ingested before a failure stay ingested and
/// are computed all the same.
#[derive(Debug)]
pub struct CurJob {
    pub ingested: Vec<PeriodResult>,
    pub computed: Vec<ComputeSummary>,
    /// The ingest's error, when a period failed.
    pub failure: Option<JobError>,
}

/// Closes this host's runs whose process is gone, so they read as `interrupted`.
pub async fn close_abandoned_runs(store: &dyn Store) -> Result<usize, StoreError> {
    let closed = store.close_abandoned_runs(&crate::host::this_host(), &crate::host::process_alive).await?;
    if closed > 0 {
        tracing::warn!(closed, "runs left running by processes that no longer exist were marked interrupted");
    }
    Ok(closed)
}

/// Ingests a CUR export, then computes every pending period (those it ingested, and any an
/// earlier run left ingested but not computed).
pub async fn ingest_cur_and_compute(
    store: &dyn Store,
    options: &CurIngestOptions,
    progress: &indicatif::MultiProgress,
) -> Result<CurJob, JobError> {
    close_abandoned_runs(store).await?;
    let (ingested, failure) = match ingest_cur(store, options, progress).await {
        Ok(results) => (results, None),
        Err(error) => (Vec::new(), Some(JobError::from(error))),
    };
    let computed = compute_pending(store).await?;
    if computed.is_empty() {
        // Nothing new computed: the CUR's freshness (or a failure) may still change alerts.
        evaluate_alerts_after_job(store).await;
    }
    Ok(CurJob { ingested, computed, failure })
}

/// Ingests a metrics window, then computes every pending period.
pub async fn ingest_metrics_and_compute(
    store: &dyn Store,
    options: &MetricsIngestOptions,
    progress: &indicatif::MultiProgress,
) -> Result<(MetricsIngestResult, Vec<ComputeSummary>), JobError> {
    close_abandoned_runs(store).await?;
    let result = ingest_metrics(store, options, progress).await;
    // Compute what is pending even when the ingest failed: an earlier run may have left work.
    let computed = if options.detect_only { Vec::new() } else { compute_pending(store).await? };
    Ok((result?, computed))
}

/// Computes every period whose rollups are missing or older than its data.
pub async fn compute_pending(store: &dyn Store) -> Result<Vec<ComputeSummary>, JobError> {
    let pending: Vec<Period> = store.pending_periods().await?.iter().filter_map(|p| p.parse().ok()).collect();
    compute(store, &pending).await
}

/// How often a compute is tried again when another writer changed the period meanwhile.
const STALE_ATTEMPTS: usize = 3;

/// Computes a period; when the store refuses the result because the period's data changed
/// while it was computed (a concurrent ingest), computes it again from the new data, unless
/// another job already did.
async fn compute_fresh(store: &dyn Store, period: Period) -> Result<ComputeSummary, ComputeError> {
    let mut attempt = 1;
    loop {
        match compute_period(store, period).await {
            Err(ComputeError::Store(StoreError::Stale(reason))) if attempt < STALE_ATTEMPTS => {
                let name = period.to_string();
                if !store.pending_periods().await?.contains(&name) {
                    // Someone computed it from data at least as new: nothing left to do.
                    tracing::info!(%period, %reason, "computed meanwhile by another job");
                    return Ok(ComputeSummary::nothing(name));
                }
                tracing::info!(%period, %reason, attempt, "the period changed while it was computed; again");
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Computes the given periods one after another, each recorded as a `compute` run.
pub async fn compute(store: &dyn Store, periods: &[Period]) -> Result<Vec<ComputeSummary>, JobError> {
    let mut summaries = Vec::new();
    for &period in periods {
        let run = store
            .begin_ingest_run(&NewIngestRun::now(
                RunKind::Compute,
                "gpuledger compute",
                &period.to_string(),
                "",
            ))
            .await?;
        match compute_fresh(store, period).await {
            Ok(summary) => {
                let rows = summary.cost_rows + summary.client_rows + summary.opportunities;
                let outcome = IngestOutcome::succeeded(0, rows as i64, None);
                store.finish_ingest_run(run, &outcome).await?;
                // The one line a person sees per computed period (stderr), with its timings.
                tracing::info!(
                    %period,
                    rollup_rows = summary.cost_rows,
                    clients = summary.client_rows,
                    opportunities = summary.opportunities,
                    read_seconds = tenths(summary.read_seconds),
                    compute_seconds = tenths(summary.compute_seconds),
                    write_seconds = tenths(summary.write_seconds),
                    "period computed"
                );
                summaries.push(summary);
                // Alerts follow the newest month as it is computed: months arriving one by
                // one fire and resolve in their order.
                evaluate_alerts_after_job(store).await;
            }
            Err(error) => {
                if let Err(record) =
                    store.finish_ingest_run(run, &IngestOutcome::failed(&error.to_string())).await
                {
                    tracing::error!(run, %record, "could not record the failed compute run");
                }
                return Err(error.into());
            }
        }
    }
    Ok(summaries)
}

/// What one cycle of `gpuledger run` reads.
#[derive(Debug, Clone, Default)]
pub struct CycleOptions {
    pub cur: Option<CurIngestOptions>,
    pub prometheus: Option<crate::sources::prometheus::api::ApiOptions>,
    pub cost_explorer: Option<crate::sources::cost_explorer::CeOptions>,
}

/// What one cycle did, logged as one line and stored with the cycle's run.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CycleReport {
    /// Periods whose CUR changed (a new or re-delivered manifest), ingested.
    pub cur_ingested: Vec<String>,
    /// Periods unchanged since their last ingest.
    pub cur_unchanged: usize,
    /// The metrics window ingested, `[from, to)` epoch seconds.
    pub metrics_window: Option<(i64, i64)>,
    pub cost_explorer_requests: u32,
    pub computed: Vec<String>,
    pub alerts_firing: usize,
    /// Each source that failed, with why; the others still ran.
    pub failures: Vec<String>,
    pub next_run_at: Option<i64>,
}

/// The metrics window a cycle reads: from an hour before the last successful metrics run
/// started (so an hour that was still filling is read again), at most a week back, else the
/// last day; to the current hour.
async fn metrics_window(store: &dyn Store, now: i64) -> Result<Option<(i64, i64)>, StoreError> {
    let to = now - now.rem_euclid(3600);
    let last = store
        .ingest_runs(200)
        .await?
        .into_iter()
        .find(|r| r.kind == RunKind::Prometheus && r.status == crate::store::RunStatus::Succeeded)
        .map(|r| r.started_at);
    let from = match last {
        Some(started) => (started - started.rem_euclid(3600) - 3600).max(to - 7 * 86_400),
        None => to - 86_400,
    };
    Ok((from < to).then_some((from, to)))
}

/// One cycle: each source checked for new data and what changed ingested (a source that
/// fails is reported and the others still run), pending periods computed, alerts evaluated.
pub async fn cycle(store: &dyn Store, options: &CycleOptions) -> Result<CycleReport, StoreError> {
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
    let mut report = CycleReport::default();
    close_abandoned_runs(store).await?;
    if let Some(cur) = &options.cur {
        match ingest_cur_and_compute(store, cur, &progress).await {
            Ok(job) => {
                for result in &job.ingested {
                    if result.reconciliation.is_some() {
                        report.cur_ingested.push(result.period.clone());
                    } else {
                        report.cur_unchanged += 1;
                    }
                }
                report.computed.extend(job.computed.iter().map(|c| c.period.clone()));
                if let Some(failure) = job.failure {
                    report.failures.push(format!("CUR: {failure}"));
                }
            }
            Err(error) => report.failures.push(format!("CUR: {error}")),
        }
    }
    if let Some(api) = &options.prometheus
        && let Some((from, to)) = metrics_window(store, chrono::Utc::now().timestamp()).await?
    {
        let metrics = MetricsIngestOptions {
            source: crate::ingest::metrics::MetricsSource::Prometheus(api.clone()),
            from: Some(from),
            to: Some(to),
            ..MetricsIngestOptions::file(std::path::PathBuf::new(), None)
        };
        match ingest_metrics_and_compute(store, &metrics, &progress).await {
            Ok((_, computed)) => {
                report.metrics_window = Some((from, to));
                report.computed.extend(computed.iter().map(|c| c.period.clone()));
            }
            Err(error) => report.failures.push(format!("Prometheus: {error}")),
        }
    }
    if let Some(ce) = &options.cost_explorer {
        let today = chrono::Utc::now().date_naive();
        let year_ago = today - chrono::Months::new(12);
        let from = chrono::NaiveDate::from_ymd_opt(
            chrono::Datelike::year(&year_ago),
            chrono::Datelike::month(&year_ago),
            1,
        )
        .unwrap_or(year_ago);
        let options = crate::ingest::cost_explorer::CeIngestOptions {
            from,
            to: today,
            file: None,
            force: false,
            today,
            ce: ce.clone(),
        };
        match crate::ingest::cost_explorer::ingest_cost_explorer(store, &options, &progress).await {
            Ok(result) => report.cost_explorer_requests = result.requests,
            Err(error) => report.failures.push(format!("Cost Explorer: {error}")),
        }
    }
    report.computed.extend(
        compute_pending(store)
            .await
            .map_err(|e| StoreError::Invalid(e.to_string()))?
            .iter()
            .map(|c| c.period.clone()),
    );
    report.computed.sort();
    report.computed.dedup();
    report.alerts_firing = evaluate_alerts(store).await?.firing;
    Ok(report)
}

/// What one alert evaluation changed and delivered.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct AlertsRun {
    pub firing: usize,
    pub started: usize,
    pub resolved: usize,
    pub delivered: usize,
    pub failed_deliveries: usize,
}

/// Where the dashboard answers, for the links in delivered alerts.
fn public_url() -> String {
    std::env::var("GPULEDGER_PUBLIC_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .map(|u| u.trim_end_matches('/').to_string())
        .unwrap_or_else(|| "http://127.0.0.1:8080".into())
}

/// Every billing period a source billed (a CUR period, a FOCUS bill), newest first: what
/// `compute` computes and alerts follow, for a ledger with a CUR or without one.
pub async fn billed_periods(store: &dyn Store) -> Result<Vec<String>, StoreError> {
    let mut periods: std::collections::BTreeSet<String> =
        store.periods().await?.into_iter().map(|p| p.period).collect();
    periods.extend(store.bills(None).await?.into_iter().map(|b| b.period));
    Ok(periods.into_iter().rev().collect())
}

/// The bill a refused run would have replaced, as its refusal names it ("2026-10 azure
/// ea-1"), else the run's period and source.
fn refused_bill(run: &crate::store::IngestRun) -> String {
    let refusal: serde_json::Value =
        run.reconciliation.as_deref().and_then(|text| serde_json::from_str(text).ok()).unwrap_or_default();
    let named: Vec<&str> =
        ["period", "provider", "billing_account"].iter().filter_map(|key| refusal[*key].as_str()).collect();
    if named.len() == 3 {
        named.join(" ")
    } else {
        format!("{} {}", run.period, run.source).trim().to_string()
    }
}

/// Evaluates the cost alerts against the newest computed month and what the store knows
/// (budgets, CUR runs, the Cost Explorer cross-check), records what started and what
/// resolved, and delivers the pending webhooks.
pub async fn evaluate_alerts(store: &dyn Store) -> Result<AlertsRun, StoreError> {
    use crate::alerts::{Inputs, evaluate};
    // The newest month billed by any source (a CUR period, a FOCUS bill), once computed:
    // while a re-delivered older month is recomputed (and newer ones wait their turn) nothing
    // is evaluated, so a re-run never re-fires what an older month once showed.
    let Some(newest) = billed_periods(store).await?.into_iter().next() else {
        return Ok(AlertsRun::default());
    };
    let Ok(period) = newest.parse::<Period>() else { return Ok(AlertsRun::default()) };
    if store.pending_periods().await?.contains(&newest) {
        return Ok(AlertsRun::default());
    }
    let Some(latest) = store.rollups(&newest).await? else { return Ok(AlertsRun::default()) };
    let periods = store.rollup_periods().await?;
    let previous = match periods.iter().find(|p| p.period < newest) {
        Some(p) => store.rollups(&p.period).await?,
        None => None,
    };
    let history = store.settings().await?;
    let thresholds = history.alert_thresholds(period).map_err(StoreError::Invalid)?;
    let mut budgets = Vec::new();
    for client in latest.clients.iter().map(|c| c.client.as_str()) {
        if let Some(budget) = history.budget(client, period).map_err(StoreError::Invalid)?
            && let Some(check) = crate::invoice::BudgetCheck::new(&latest, client, budget)
        {
            budgets.push((client.to_string(), check));
        }
    }
    let runs = store.ingest_runs(200).await?;
    let mut cur =
        runs.iter().filter(|r| r.kind == RunKind::Cur && r.status != crate::store::RunStatus::Running);
    let newest_cur = cur.next();
    // A refusal is its own alert: the stored bill stands, and the delivery needs a look.
    let cur_refused = newest_cur
        .filter(|r| r.status == crate::store::RunStatus::Refused)
        .map(|r| (r.period.clone(), r.error.clone().unwrap_or_default()));
    let cur_last_failure = newest_cur
        .filter(|r| {
            !matches!(r.status, crate::store::RunStatus::Succeeded | crate::store::RunStatus::Refused)
        })
        .map(|r| r.error.clone().unwrap_or_else(|| r.status.to_string()));
    // Each FOCUS source's newest run, when the judge refused it.
    let mut focus_sources = std::collections::HashSet::new();
    let focus_refused = runs
        .iter()
        .filter(|r| r.kind == RunKind::Focus && r.status != crate::store::RunStatus::Running)
        .filter(|r| focus_sources.insert(r.source.clone()))
        .filter(|r| r.status == crate::store::RunStatus::Refused)
        .map(|r| (refused_bill(r), r.error.clone().unwrap_or_default()))
        .collect();
    let cur_last_success = runs
        .iter()
        .find(|r| r.kind == RunKind::Cur && r.status == crate::store::RunStatus::Succeeded)
        .map(|r| r.finished_at.unwrap_or(r.started_at));
    let mut disagreements = Vec::new();
    for summary in periods.iter().filter(|p| p.period <= newest).take(2) {
        let Ok(checked) = summary.period.parse::<Period>() else { continue };
        if store.ce_days(checked.start(), checked.end()).await?.is_empty() {
            continue;
        }
        let tolerance = crate::report::cross_check::Tolerance::default();
        if let Ok(check) = crate::report::cross_check::CrossCheck::load(store, checked, tolerance).await {
            let beyond = check.beyond_tolerance().len();
            if beyond > 0 {
                disagreements.push((summary.period.clone(), beyond));
            }
        }
    }
    let now = chrono::Utc::now().timestamp();
    let inputs = Inputs {
        latest: &latest,
        previous: previous.as_ref(),
        budgets,
        cur_last_success,
        cur_last_failure,
        cur_refused,
        focus_refused,
        disagreements,
        now,
    };
    let firing: Vec<crate::store::Alert> = evaluate(&inputs, &thresholds)
        .into_iter()
        .map(|f| crate::store::Alert {
            rule: f.rule,
            subject: f.subject,
            severity: f.severity.to_string(),
            state: "firing".into(),
            value: f.value,
            threshold: f.threshold,
            link: f.link,
            evidence: f.evidence,
            since: now,
            resolved_at: None,
            updated_at: now,
        })
        .collect();
    let resolved_by = format!("no longer found in {period}");
    let events = store.record_alerts(&firing, &resolved_by, now).await?;
    for event in &events {
        tracing::info!(rule = %event.rule, subject = %event.subject, state = %event.state, value = %event.value, "alert");
    }
    let delivered =
        crate::alerts::deliver::deliver(store, &public_url(), std::time::Duration::from_secs(10)).await?;
    Ok(AlertsRun {
        firing: firing.len(),
        started: events.iter().filter(|e| e.state == "firing").count(),
        resolved: events.iter().filter(|e| e.state == "resolved").count(),
        delivered: delivered.delivered,
        failed_deliveries: delivered.failed,
    })
}

/// [`evaluate_alerts`] where a job has done its work: a failure is logged, never the job's.
pub async fn evaluate_alerts_after_job(store: &dyn Store) {
    if let Err(error) = evaluate_alerts(store).await {
        tracing::error!(%error, "cost alerts were not evaluated");
    }
}

/// Seconds rounded to a tenth, for log fields people read.
fn tenths(seconds: f64) -> f64 {
    (seconds * 10.0).round() / 10.0
}
