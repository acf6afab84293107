//! Cost Explorer ingest: asks only for the days not stored yet or still open, reads every
//! page, and stores what came back in one transaction (a failure on any page stores nothing).
//!
//! A stored day is *settled*, and not asked for again without `--force`, when Cost Explorer
//! no longer called it estimated and it was fetched at least [`SETTLE_DAYS`] days after its
//! month ended (AWS finalizes a month's bill in the first days of the next). Every other day
//! of the asked range, up to yesterday, is fetched: today's cost is still being written.

use chrono::{Datelike, NaiveDate};
use serde::Serialize;

use crate::domain::runs::RunKind;
use crate::sources::cost_explorer::{CeError, CeOptions, CostExplorer, day_of, day_start, read_saved};
use crate::store::{CeDay, CeWindow, IngestOutcome, NewIngestRun, Store, StoreError};

/// Days after a month's end before its days count as settled.
pub const SETTLE_DAYS: i64 = 5;

/// What to fetch.
#[derive(Debug, Clone)]
pub struct CeIngestOptions {
    /// First day asked for.
    pub from: NaiveDate,
    /// First day not asked for.
    pub to: NaiveDate,
    /// A saved `GetCostAndUsage` answer to read instead of asking Cost Explorer.
    pub file: Option<std::path::PathBuf>,
    /// Fetch settled days again too.
    pub force: bool,
    /// The day the run counts as today (the real one unless a test says otherwise).
    pub today: NaiveDate,
    pub ce: CeOptions,
}

/// Why a Cost Explorer ingest stopped; nothing was stored.
#[derive(Debug, thiserror::Error)]
pub enum CeIngestError {
    #[error(transparent)]
    Source(#[from] CeError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a run did, printed as JSON for scripts.
#[derive(Debug, Clone, Serialize)]
pub struct CeIngestResult {
    pub from: NaiveDate,
    pub to: NaiveDate,
    /// Requests made to Cost Explorer (each one billed by AWS).
    pub requests: u32,
    /// The ranges asked for, `[from, to)` each.
    pub ranges: Vec<(NaiveDate, NaiveDate)>,
    pub days_fetched: usize,
    /// Days of the asked range not fetched: settled already, or today and later.
    pub days_skipped: usize,
    /// Days Cost Explorer still called estimated.
    pub days_estimated: usize,
    pub rows: usize,
}

/// The first day of the month after `day`'s.
fn next_month(day: NaiveDate) -> NaiveDate {
    let (year, month) = if day.month() == 12 { (day.year() + 1, 1) } else { (day.year(), day.month() + 1) };
    NaiveDate::from_ymd_opt(year, month, 1).expect("the first of a month exists")
}

/// Whether a stored day is settled: final in Cost Explorer and fetched after its month closed.
pub fn settled(day: &CeDay) -> bool {
    let month_end = day_start(next_month(day_of(day.day)));
    !day.estimated && day.fetched_at >= month_end + SETTLE_DAYS * 86_400
}

/// The ranges `[from, to)` to ask Cost Explorer for: the days of `[from, min(to, today))`
/// that are not settled in `stored` (every day with `force`), joined where they touch.
pub fn ranges_to_fetch(
    from: NaiveDate,
    to: NaiveDate,
    today: NaiveDate,
    stored: &[CeDay],
    force: bool,
) -> Vec<(NaiveDate, NaiveDate)> {
    let settled_days: std::collections::HashSet<i64> =
        stored.iter().filter(|day| settled(day)).map(|day| day.day).collect();
    let mut ranges: Vec<(NaiveDate, NaiveDate)> = Vec::new();
    let end = to.min(today);
    let mut day = from;
    while day < end {
        let next = day.succ_opt().expect("a next day exists");
        if force || !settled_days.contains(&day_start(day)) {
            match ranges.last_mut() {
                Some(last) if last.1 == day => last.1 = next,
                _ => ranges.push((day, next)),
            }
        }
        day = next;
    }
    ranges
}

/// Fetches what `options` calls for and stores it in one transaction, recorded as a
/// `cost-explorer` run.
pub async fn ingest_cost_explorer(
    store: &dyn Store,
    options: &CeIngestOptions,
    progress: &indicatif::MultiProgress,
) -> Result<CeIngestResult, CeIngestError> {
    let label = match &options.file {
        Some(_) => String::new(),
        None => format!("{}/{}", options.from, options.to),
    };
    let source = match (&options.file, &options.ce.endpoint_url) {
        (Some(file), _) => file.display().to_string(),
        (None, Some(endpoint)) => endpoint.clone(),
        (None, None) => "aws-cost-explorer".into(),
    };
    let run = store.begin_ingest_run(&NewIngestRun::now(RunKind::CostExplorer, &source, &label, "")).await?;
    let outcome = fetch_and_store(store, options, progress).await;
    let recorded = match &outcome {
        Ok(result) => IngestOutcome::succeeded(
            i64::from(result.requests),
            result.rows as i64,
            serde_json::to_string(result).ok(),
        ),
        Err(error) => IngestOutcome::failed(&error.to_string()),
    };
    store.finish_ingest_run(run, &recorded).await?;
    outcome
}

async fn fetch_and_store(
    store: &dyn Store,
    options: &CeIngestOptions,
    progress: &indicatif::MultiProgress,
) -> Result<CeIngestResult, CeIngestError> {
    if let Some(file) = &options.file {
        return store_saved(store, file).await;
    }
    let stored = store.ce_days(day_start(options.from), day_start(options.to)).await?;
    let ranges = ranges_to_fetch(options.from, options.to, options.today, &stored, options.force);
    let days_asked = (options.to - options.from).num_days().max(0) as usize;
    let mut result = CeIngestResult {
        from: options.from,
        to: options.to,
        requests: 0,
        ranges: ranges.clone(),
        days_fetched: 0,
        days_skipped: days_asked,
        days_estimated: 0,
        rows: 0,
    };
    if ranges.is_empty() {
        return Ok(result);
    }
    let client = CostExplorer::connect(&options.ce).await;
    let bar = progress.add(indicatif::ProgressBar::new_spinner());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} Cost Explorer {msg} [{elapsed}]")
            .expect("a valid template"),
    );
    let fetched_at = chrono::Utc::now().timestamp();
    let mut windows = Vec::with_capacity(ranges.len());
    for &(from, to) in &ranges {
        bar.set_message(format!("{from} to {to}"));
        let mut on_page = |page: u32| bar.set_message(format!("{from} to {to}: page {page}"));
        let answer = client.daily_costs(from, to, &mut on_page).await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(error) => {
                bar.abandon();
                return Err(error.into());
            }
        };
        result.requests += answer.requests;
        let days: Vec<CeDay> = answer.days.into_iter().map(|day| CeDay { fetched_at, ..day }).collect();
        result.days_fetched += days.len();
        result.days_estimated += days.iter().filter(|day| day.estimated).count();
        result.rows += answer.costs.len();
        windows.push(CeWindow {
            from: day_start(from),
            to: day_start(to),
            days,
            costs: answer.costs,
            accounts: answer.accounts.into_iter().collect(),
        });
    }
    bar.finish_and_clear();
    result.days_skipped = days_asked.saturating_sub(result.days_fetched);
    store.replace_ce_windows(&windows).await?;
    Ok(result)
}

/// Stores the days of a saved answer, replacing what was stored for them.
async fn store_saved(store: &dyn Store, file: &std::path::Path) -> Result<CeIngestResult, CeIngestError> {
    let location = file.display().to_string();
    let text = std::fs::read_to_string(file)
        .map_err(|e| CeError::Invalid { request: 0, message: format!("{location}: {e}") })?;
    let (from, to, answer) = read_saved(&text, &location)?;
    let fetched_at = chrono::Utc::now().timestamp();
    let days: Vec<CeDay> = answer.days.into_iter().map(|day| CeDay { fetched_at, ..day }).collect();
    let result = CeIngestResult {
        from,
        to,
        requests: 0,
        ranges: vec![(from, to)],
        days_fetched: days.len(),
        days_skipped: 0,
        days_estimated: days.iter().filter(|day| day.estimated).count(),
        rows: answer.costs.len(),
    };
    let window = CeWindow {
        from: day_start(from),
        to: day_start(to),
        days,
        costs: answer.costs,
        accounts: answer.accounts.into_iter().collect(),
    };
    store.replace_ce_windows(&[window]).await?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap()
    }

    fn stored(day: &str, fetched: &str, estimated: bool) -> CeDay {
        CeDay { day: day_start(date(day)), fetched_at: day_start(date(fetched)), estimated }
    }

    #[test]
    fn only_days_not_settled_are_fetched_again() {
        let (from, to, today) = (date("2026-09-01"), date("2026-12-01"), date("2026-11-24"));
        // Nothing stored: every day up to yesterday, one range.
        assert_eq!(ranges_to_fetch(from, to, today, &[], false), vec![(from, today)]);
        // September and October fetched on 11-24: settled (October closed on 11-01, + 5 days
        // is 11-06); November fetched on 11-24 is open.
        let mut days = Vec::new();
        let mut day = from;
        while day < today {
            days.push(stored(&day.to_string(), "2026-11-24", day >= date("2026-11-01")));
            day = day.succ_opt().unwrap();
        }
        assert_eq!(ranges_to_fetch(from, to, today, &days, false), vec![(date("2026-11-01"), today)]);
        // --force: everything again.
        assert_eq!(ranges_to_fetch(from, to, today, &days, true), vec![(from, today)]);
        // October fetched on 11-03 (before it settled) and not estimated: asked again, as is
        // a gap in September.
        for day in days.iter_mut().filter(|d| day_of(d.day).month() == 10) {
            day.fetched_at = day_start(date("2026-11-03"));
        }
        days.retain(|d| day_of(d.day) != date("2026-09-15"));
        assert_eq!(
            ranges_to_fetch(from, to, today, &days, false),
            vec![(date("2026-09-15"), date("2026-09-16")), (date("2026-10-01"), today)]
        );
    }

    #[test]
    fn a_day_fetched_late_enough_and_final_is_settled() {
        assert!(settled(&stored("2026-10-31", "2026-11-06", false)));
        assert!(!settled(&stored("2026-10-31", "2026-11-05", false)), "fetched before the month closed");
        assert!(!settled(&stored("2026-10-31", "2026-12-01", true)), "still estimated");
        assert!(settled(&stored("2026-12-31", "2027-01-06", false)), "across a year");
    }
}
