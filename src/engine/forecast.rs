//! Forecasts of daily series, and the backtest that picks each series' method (issue 42).
//!
//! Two methods:
//! - **Seasonal naive** (the baseline): each future day is the same weekday of the last week
//!   seen. Its 80 % interval comes from its own errors in the history (each day against the
//!   same weekday a week before): their 10th and 90th percentiles, widened by the square root
//!   of the weeks ahead.
//! - **MSTL + ETS**: MSTL takes the weekly seasonality out; AutoETS (exponential smoothing,
//!   additive errors, its trend and damping chosen by AICc) forecasts the rest, with its
//!   80 % interval; the weekly pattern is added back. Both from Grafana's augurs crates, a
//!   port of statsforecast's models.
//! - **Trend + weekday** (a classical decomposition, what `TSLM(y ~ trend() + season())` fits):
//!   over the last [`TREND_WEEKS`] whole weeks (at least four), a straight line through the
//!   weeks' means by least squares, and each weekday's mean distance from that line; a
//!   future day is the line there plus its weekday's distance. Its 80 % interval is the 10th
//!   and 90th percentiles of its residuals in the window, widened by the square root of the
//!   weeks ahead. ETS on daily values sees a fleet's slow growth (a few percent a month)
//!   under the days' noise and keeps a flat level; the line over four months does not.
//!
//! A series is forecast by the method whose **rolling-origin backtest** on its own history
//! has the lowest error one month ahead (the baseline on a tie): from each of the latest [`BACKTEST_ORIGINS`] month
//! starts with at least [`MIN_HISTORY_DAYS`] before it, forecast the next three months from
//! the days before alone, and compare each whole month's total with what happened. MAPE is
//! the mean of the months' absolute errors over their actual totals; WAPE the sum of absolute
//! errors over the sum of actual totals. A series with fewer than [`MIN_HISTORY_DAYS`] days is not forecast.
//!
//! Daily values are never negative (GPU-hours, dollars): points and bounds are clamped at 0.
//! A month's interval is the sum of its days' bounds: it assumes a day's error carries over
//! to the next (as a level error does), so it is wider than independent days would make it.

use augurs_core::{Fit, Predict};
use chrono::{Datelike, Months, NaiveDate};
use serde::Serialize;

/// Days of history a forecast needs: four weeks, the weekly pattern seen four times.
pub const MIN_HISTORY_DAYS: usize = 28;

/// The prediction interval's coverage.
pub const LEVEL: f64 = 0.8;

/// The months ahead the backtest scores.
pub const BACKTEST_MONTHS: usize = 3;

/// The weeks the trend + weekday method fits: four months, long enough for a trend to stand
/// out of a week's noise, short enough to follow a change in it.
pub const TREND_WEEKS: usize = 16;

/// The forecast origins the backtest scores: the latest six month starts (recent accuracy is
/// what the next forecast will have; a year of history has eleven).
pub const BACKTEST_ORIGINS: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    SeasonalNaive,
    MstlEts,
    TrendWeekly,
}

impl Method {
    /// The baseline first: on a tie it is chosen.
    pub const ALL: [Method; 3] = [Method::SeasonalNaive, Method::MstlEts, Method::TrendWeekly];

    pub fn name(self) -> &'static str {
        match self {
            Method::SeasonalNaive => "seasonal_naive",
            Method::MstlEts => "mstl_ets",
            Method::TrendWeekly => "trend_weekly",
        }
    }
}

/// One forecast day or month: the point and its 80 % interval.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Point {
    pub value: f64,
    pub lower: f64,
    pub upper: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum ForecastError {
    #[error("{have} days of history, fewer than the {MIN_HISTORY_DAYS} a forecast needs")]
    TooLittleHistory { have: usize },
    #[error("the model could not be fitted: {0}")]
    Model(String),
}

/// The next `horizon` days after `history` by `method`.
pub fn forecast(method: Method, history: &[f64], horizon: usize) -> Result<Vec<Point>, ForecastError> {
    if history.len() < MIN_HISTORY_DAYS {
        return Err(ForecastError::TooLittleHistory { have: history.len() });
    }
    let points = match method {
        Method::SeasonalNaive => seasonal_naive(history, horizon),
        Method::MstlEts => mstl_ets(history, horizon)?,
        Method::TrendWeekly => trend_weekly(history, horizon),
    };
    Ok(points
        .into_iter()
        .map(|p| Point { value: p.value.max(0.0), lower: p.lower.max(0.0), upper: p.upper.max(0.0) })
        .collect())
}

fn seasonal_naive(history: &[f64], horizon: usize) -> Vec<Point> {
    let n = history.len();
    let mut errors: Vec<f64> = (7..n).map(|i| history[i] - history[i - 7]).collect();
    errors.sort_by(f64::total_cmp);
    let (low, high) = (quantile(&errors, (1.0 - LEVEL) / 2.0), quantile(&errors, (1.0 + LEVEL) / 2.0));
    (0..horizon)
        .map(|k| {
            let value = history[n - 7 + k % 7];
            let weeks = ((k / 7) + 1) as f64;
            Point { value, lower: value + low * weeks.sqrt(), upper: value + high * weeks.sqrt() }
        })
        .collect()
}

fn trend_weekly(history: &[f64], horizon: usize) -> Vec<Point> {
    let weeks = (history.len() / 7).min(TREND_WEEKS);
    let window = &history[history.len() - weeks * 7..];
    // The weeks' means against their index, by least squares; a day `d` of the window (0..)
    // sits at week (d - 3) / 7 of the line, the week's middle day at its mean.
    let means: Vec<f64> = window.chunks(7).map(|w| w.iter().sum::<f64>() / 7.0).collect();
    let centre = (weeks - 1) as f64 / 2.0;
    let mean = means.iter().sum::<f64>() / weeks as f64;
    let spread: f64 = (0..weeks).map(|j| (j as f64 - centre).powi(2)).sum();
    let slope = (0..weeks).map(|j| (j as f64 - centre) * (means[j] - mean)).sum::<f64>() / spread;
    let line = |day: usize| mean + slope * ((day as f64 - 3.0) / 7.0 - centre);
    let mut weekday = [0.0; 7];
    for (d, v) in window.iter().enumerate() {
        weekday[d % 7] += (v - line(d)) / weeks as f64;
    }
    let mut residuals: Vec<f64> =
        window.iter().enumerate().map(|(d, v)| v - line(d) - weekday[d % 7]).collect();
    residuals.sort_by(f64::total_cmp);
    let (low, high) = (quantile(&residuals, (1.0 - LEVEL) / 2.0), quantile(&residuals, (1.0 + LEVEL) / 2.0));
    (0..horizon)
        .map(|k| {
            let day = window.len() + k;
            let value = line(day) + weekday[day % 7];
            let widen = (((k / 7) + 1) as f64).sqrt();
            Point { value, lower: value + low * widen, upper: value + high * widen }
        })
        .collect()
}

/// The `q` quantile of sorted `values`, linearly interpolated; 0 when empty.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = q * (sorted.len() - 1) as f64;
    let (below, above) = (at.floor() as usize, at.ceil() as usize);
    sorted[below] + (sorted[above] - sorted[below]) * (at - below as f64)
}

fn mstl_ets(history: &[f64], horizon: usize) -> Result<Vec<Point>, ForecastError> {
    // A constant series (a pool that ran the same GPUs every day) has nothing to fit: STL
    // and ETS both fail on zero variance.
    if history.iter().all(|v| (v - history[0]).abs() < 1e-9) {
        return Ok(vec![Point { value: history[0], lower: history[0], upper: history[0] }; horizon]);
    }
    // Additive errors only: a multiplicative one needs every value above 0, and GPU-hours
    // and cost have days at 0. Three candidates (no trend, trend, damped trend).
    let ets = augurs_ets::AutoETS::new(1, "AZN").map_err(|e| ForecastError::Model(e.to_string()))?;
    let model = augurs_mstl::MSTLModel::new(vec![7], ets.into_trend_model());
    let fitted = model.fit(history).map_err(|e| ForecastError::Model(e.to_string()))?;
    let forecast = fitted.predict(horizon, LEVEL).map_err(|e| ForecastError::Model(e.to_string()))?;
    let intervals =
        forecast.intervals.ok_or_else(|| ForecastError::Model("no prediction intervals".into()))?;
    Ok(forecast
        .point
        .iter()
        .zip(intervals.lower.iter().zip(&intervals.upper))
        .map(|(&value, (&lower, &upper))| Point { value, lower, upper })
        .collect())
}

/// Sums days into calendar months: `(month's first day, sum)`, days from `first` on.
pub fn monthly(first: NaiveDate, days: &[Point]) -> Vec<(NaiveDate, Point)> {
    let mut months: Vec<(NaiveDate, Point)> = Vec::new();
    for (i, day) in days.iter().enumerate() {
        let date = first + chrono::Days::new(i as u64);
        let month = date.with_day(1).unwrap_or(date);
        match months.last_mut() {
            Some((m, sum)) if *m == month => {
                sum.value += day.value;
                sum.lower += day.lower;
                sum.upper += day.upper;
            }
            _ => months.push((month, *day)),
        }
    }
    months
}

/// A method's errors on a series' history, one month to three months ahead.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Backtest {
    /// Forecast origins scored (month starts with enough history before them).
    pub origins: usize,
    /// MAPE and WAPE of the monthly total at 1, 2 and 3 months ahead; `None` where no
    /// origin had that month in the history (or every such month was 0).
    pub mape: [Option<f64>; BACKTEST_MONTHS],
    pub wape: [Option<f64>; BACKTEST_MONTHS],
}

/// Scores `method` on `values`, one per day from `first`: from each of the latest
/// [`BACKTEST_ORIGINS`] month starts with [`MIN_HISTORY_DAYS`] before it and a whole month
/// after, the next three whole months in the history are forecast from the days before the
/// start and compared with their totals.
pub fn backtest(method: Method, first: NaiveDate, values: &[f64]) -> Backtest {
    let end = first + chrono::Days::new(values.len() as u64);
    let index = |date: NaiveDate| (date - first).num_days() as usize;
    // (absolute error, actual) per horizon; APEs where the actual is not 0.
    let mut errors: [Vec<(f64, f64)>; BACKTEST_MONTHS] = Default::default();
    // Month starts with enough history before them and a whole month after, the latest six.
    let mut starts = Vec::new();
    let mut origin = first.with_day(1).unwrap_or(first);
    while origin + Months::new(1) <= end {
        if origin > first && index(origin) >= MIN_HISTORY_DAYS {
            starts.push(origin);
        }
        origin = origin + Months::new(1);
    }
    let mut origins = 0;
    for &origin in starts.iter().rev().take(BACKTEST_ORIGINS).rev() {
        let months: Vec<NaiveDate> = (1..=BACKTEST_MONTHS as u32)
            .map(|m| origin + Months::new(m))
            .take_while(|&month_end| month_end <= end)
            .collect();
        let horizon = index(*months.last().unwrap_or(&origin)) - index(origin);
        if let Ok(days) = forecast(method, &values[..index(origin)], horizon) {
            origins += 1;
            for (h, ((_, predicted), month_end)) in monthly(origin, &days).iter().zip(&months).enumerate() {
                let month_start = *month_end - Months::new(1);
                let actual: f64 = values[index(month_start)..index(*month_end)].iter().sum();
                errors[h].push(((predicted.value - actual).abs(), actual));
            }
        }
    }
    let mut result = Backtest { origins, ..Backtest::default() };
    for (h, errors) in errors.iter().enumerate() {
        let scored: Vec<f64> = errors.iter().filter(|(_, a)| *a > 0.0).map(|(e, a)| e / a).collect();
        if !scored.is_empty() {
            result.mape[h] = Some(scored.iter().sum::<f64>() / scored.len() as f64);
        }
        let actual: f64 = errors.iter().map(|(_, a)| a).sum();
        if actual > 0.0 {
            result.wape[h] = Some(errors.iter().map(|(e, _)| e).sum::<f64>() / actual);
        }
    }
    result
}

/// A series' forecast: the method its backtest chose, both methods' backtests, and the days
/// and months ahead.
#[derive(Debug, Clone)]
pub struct SeriesForecast {
    pub method: Method,
    pub backtest: Backtest,
    pub baseline: Backtest,
    /// Every method's backtest, in [`Method::ALL`]'s order.
    pub methods: Vec<(Method, Backtest)>,
    pub days: Vec<Point>,
    pub months: Vec<(NaiveDate, Point)>,
}

/// Forecasts `values` (one per day from `first`) through `months` calendar months after the
/// last day, by the method with the lower one-month MAPE in the backtest (the baseline when
/// neither could be scored, or on a tie).
pub fn forecast_series(
    first: NaiveDate,
    values: &[f64],
    months: u32,
) -> Result<SeriesForecast, ForecastError> {
    if values.len() < MIN_HISTORY_DAYS {
        return Err(ForecastError::TooLittleHistory { have: values.len() });
    }
    let next = first + chrono::Days::new(values.len() as u64);
    let month_start = next.with_day(1).unwrap_or(next);
    let until = month_start + Months::new(months + u32::from(next.day() > 1));
    let horizon = (until - next).num_days() as usize;
    let scored: Vec<(Method, Backtest)> =
        Method::ALL.iter().map(|&m| (m, backtest(m, first, values))).collect();
    let baseline = scored[0].1.clone();
    // The lowest one-month MAPE; the first (the baseline) of equals, and where none was scored.
    let methods = scored.clone();
    let (method, backtest) = scored
        .into_iter()
        .filter(|(_, b)| b.mape[0].is_some())
        .reduce(|best, next| if next.1.mape[0] < best.1.mape[0] { next } else { best })
        .unwrap_or((Method::SeasonalNaive, baseline.clone()));
    let (method, backtest, days) = match forecast(method, values, horizon) {
        Ok(days) => (method, backtest, days),
        // The model fails on some shapes: the baseline then.
        Err(ForecastError::Model(_)) if method != Method::SeasonalNaive => {
            (Method::SeasonalNaive, baseline.clone(), forecast(Method::SeasonalNaive, values, horizon)?)
        }
        Err(e) => return Err(e),
    };
    let months = monthly(next, &days);
    Ok(SeriesForecast { method, backtest, baseline, methods, days, months })
}

/// [`forecast_series`] of each `(first day, values)`, on one thread per core (each series is
/// fitted on its own), in their order.
pub fn forecast_all(
    series: &[(NaiveDate, &[f64])],
    months: u32,
) -> Vec<Result<SeriesForecast, ForecastError>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(series.len().max(1));
    let mut done: Vec<(usize, Result<SeriesForecast, ForecastError>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    let mine = series.iter().enumerate().skip(t).step_by(threads);
                    mine.map(|(i, (first, values))| (i, forecast_series(*first, values, months)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let joined =
            workers.into_iter().map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        joined.flatten().collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, f)| f).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(text: &str) -> NaiveDate {
        text.parse().unwrap()
    }

    /// Weekdays 10 plus `trend` a day, weekends 2.
    fn weekly(days: usize, trend: f64) -> Vec<f64> {
        (0..days).map(|d| if d % 7 >= 5 { 2.0 } else { 10.0 + trend * d as f64 }).collect()
    }

    #[test]
    fn seasonal_naive_repeats_last_weeks_weekdays_and_its_interval_is_its_own_errors() {
        // Every week the same: the baseline is exact and its interval has no width.
        let history = weekly(28, 0.0);
        let days = forecast(Method::SeasonalNaive, &history, 10).unwrap();
        let values: Vec<f64> = days.iter().map(|p| p.value).collect();
        assert_eq!(values, [10.0, 10.0, 10.0, 10.0, 10.0, 2.0, 2.0, 10.0, 10.0, 10.0]);
        assert!(days.iter().all(|p| p.lower == p.value && p.upper == p.value));
        // The last weekend changed: its Saturday 1 (was 2), its Sunday 9. The baseline repeats
        // them, and its errors against the week before are 19 zeros, −1 and +7.
        let mut history = weekly(28, 0.0);
        history[26] = 1.0;
        history[27] = 9.0;
        let days = forecast(Method::SeasonalNaive, &history, 8).unwrap();
        assert_eq!(days[6].value, 9.0);
        assert_eq!(days[5].value, 1.0);
        let mut errors: Vec<f64> = (7..28).map(|i| history[i] - history[i - 7]).collect();
        errors.sort_by(f64::total_cmp);
        assert_eq!(errors[0], -1.0);
        assert_eq!(errors[20], 7.0);
        // The 10th percentile is rank 2 of 0..=20 and the 90th rank 18: both 0, so the
        // interval has no width; with errors of ±7 at ranks 2 and 18 it is [−7, +7], and √2
        // wider a week on.
        assert_eq!((days[0].lower, days[0].upper), (10.0, 10.0));
        let mut spread = weekly(28, 0.0);
        for (day, change) in [(8, -7.0), (9, -7.0), (10, -7.0), (22, 7.0), (23, 7.0), (24, 7.0)] {
            spread[day] += change;
        }
        let days = forecast(Method::SeasonalNaive, &spread, 8).unwrap();
        let mut errors: Vec<f64> = (7..28).map(|i| spread[i] - spread[i - 7]).collect();
        errors.sort_by(f64::total_cmp);
        assert_eq!((errors[2], errors[18]), (-7.0, 7.0));
        assert_eq!(days[0].value, 10.0);
        assert_eq!((days[0].lower, days[0].upper), (3.0, 17.0));
        assert!((days[7].upper - (days[7].value + 7.0 * 2f64.sqrt())).abs() < 1e-12);
    }

    #[test]
    fn quantiles_interpolate_between_ranks() {
        let sorted = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(quantile(&sorted, 0.1), 1.0);
        assert_eq!(quantile(&sorted, 0.9), 9.0);
        assert_eq!(quantile(&sorted[..2], 0.25), 0.25);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn too_little_history_is_refused_not_guessed() {
        let error = forecast(Method::MstlEts, &weekly(27, 0.0), 7).unwrap_err();
        assert_eq!(error.to_string(), "27 days of history, fewer than the 28 a forecast needs");
        assert!(forecast_series(date("2026-01-01"), &weekly(20, 0.0), 1).is_err());
    }

    #[test]
    fn months_sum_their_days_and_start_on_the_first() {
        let days = vec![Point { value: 1.0, lower: 0.5, upper: 2.0 }; 5];
        let months = monthly(date("2026-01-30"), &days);
        assert_eq!(months.len(), 2);
        assert_eq!(months[0], (date("2026-01-01"), Point { value: 2.0, lower: 1.0, upper: 4.0 }));
        assert_eq!(months[1], (date("2026-02-01"), Point { value: 3.0, lower: 1.5, upper: 6.0 }));
    }

    #[test]
    fn the_backtest_scores_each_month_start_on_the_months_after_it() {
        // 2026-01-01 to 2026-04-30: 120 days, weekly with no trend. Origins with 28 days
        // before them: Feb 1 (31 days), Mar 1, Apr 1. Feb 1 scores Feb, Mar and Apr; Mar 1
        // Mar and Apr; Apr 1 April. The baseline is exact on an unchanging week.
        let values = weekly(120, 0.0);
        let result = backtest(Method::SeasonalNaive, date("2026-01-01"), &values);
        assert_eq!(result.origins, 3);
        assert_eq!(result.mape, [Some(0.0), Some(0.0), Some(0.0)]);
        assert_eq!(result.wape, [Some(0.0), Some(0.0), Some(0.0)]);
        // Doubled from March 1 (day 59): a forecast of March or April from before March 1 is
        // half of what happened (an error of half the actual).
        let stepped: Vec<f64> =
            values.iter().enumerate().map(|(d, v)| if d >= 59 { v * 2.0 } else { *v }).collect();
        let result = backtest(Method::SeasonalNaive, date("2026-01-01"), &stepped);
        // One month ahead: Feb from Feb 1 (exact), Mar from Mar 1 (half: APE 0.5), Apr from
        // Apr 1 (exact): MAPE (0 + 0.5 + 0) / 3.
        assert!((result.mape[0].unwrap() - 0.5 / 3.0).abs() < 1e-12, "{result:?}");
        // Two months ahead: Mar from Feb 1 (0.5), Apr from Mar 1 (0.5).
        assert!((result.mape[1].unwrap() - 0.5).abs() < 1e-12, "{result:?}");
        // Three: Apr from Feb 1 (0.5).
        assert!((result.mape[2].unwrap() - 0.5).abs() < 1e-12, "{result:?}");
        // WAPE one month ahead: March's error (its actual / 2) over Feb + Mar + Apr actuals.
        let total = |from: usize, to: usize| stepped[from..to].iter().sum::<f64>();
        let (feb, mar, apr) = (total(31, 59), total(59, 90), total(90, 120));
        assert!((result.wape[0].unwrap() - (mar / 2.0) / (feb + mar + apr)).abs() < 1e-12);
    }

    #[test]
    fn mstl_ets_follows_a_trend_the_baseline_cannot() {
        // Six months of weekdays growing 0.2 a day: the baseline repeats last week, the
        // model carries the trend on.
        let values = weekly(181, 0.2);
        let baseline = backtest(Method::SeasonalNaive, date("2026-01-01"), &values);
        let model = backtest(Method::MstlEts, date("2026-01-01"), &values);
        assert_eq!(model.origins, baseline.origins);
        assert!(model.mape[0].unwrap() < baseline.mape[0].unwrap(), "{model:?} against {baseline:?}");
        let chosen = forecast_series(date("2026-01-01"), &values, 2).unwrap();
        // The chosen method is the one of the lowest one-month MAPE, not the baseline.
        assert_ne!(chosen.method, Method::SeasonalNaive);
        for method in Method::ALL {
            let other = backtest(method, date("2026-01-01"), &values);
            assert!(chosen.backtest.mape[0] <= other.mape[0], "{:?} against {method:?}", chosen.method);
        }
        assert_eq!(chosen.backtest, backtest(chosen.method, date("2026-01-01"), &values));
        // From July 1: July and August, every day with its interval around the point.
        assert_eq!(chosen.days.len(), 31 + 31);
        assert_eq!(
            chosen.months.iter().map(|(m, _)| *m).collect::<Vec<_>>(),
            [date("2026-07-01"), date("2026-08-01")]
        );
        assert!(chosen.days.iter().all(|p| p.lower <= p.value && p.value <= p.upper));
        // July's total within 2 % of what the pattern goes on to give (days 181 to 211).
        let july: f64 = weekly(212, 0.2)[181..].iter().sum();
        assert!(
            (chosen.months[0].1.value / july - 1.0).abs() < 0.02,
            "{:?} against {july}",
            chosen.months[0]
        );
        // MSTL + ETS's weekdays are about 10 + 0.2 × their day number.
        let model = forecast(Method::MstlEts, &values, 62).unwrap();
        let weekday = model.iter().position(|p| p.value > 20.0).unwrap();
        let expected = 10.0 + 0.2 * (181 + weekday) as f64;
        assert!((model[weekday].value - expected).abs() < 2.0, "{:?}", model[weekday]);
    }

    #[test]
    fn trend_weekly_carries_the_line_and_the_weekdays_on() {
        // 5 + 0.5 a day, weekdays +3 and weekends -7.5 (the week's effects sum to 0): the
        // weeks' means lie on the line, so the method finds it and the weekdays exactly.
        let effect = [3.0, 3.0, 3.0, 3.0, 3.0, -7.5, -7.5];
        let values: Vec<f64> = (0..28).map(|d| 5.0 + 0.5 * d as f64 + effect[d % 7]).collect();
        let days = forecast(Method::TrendWeekly, &values, 9).unwrap();
        // Day 28: 5 + 14 + 3 = 22; day 33 (a Saturday of the pattern): 5 + 16.5 - 7.5 = 14.
        assert!((days[0].value - 22.0).abs() < 1e-9, "{:?}", days[0]);
        assert!((days[5].value - 14.0).abs() < 1e-9, "{:?}", days[5]);
        assert!((days[8].value - (5.0 + 18.0 + 3.0)).abs() < 1e-9, "{:?}", days[8]);
        // No residuals, no width.
        assert!(days.iter().all(|p| (p.upper - p.lower).abs() < 1e-9));
        // Only the last sixteen weeks count: a different first week (all 100) is not seen.
        let mut long: Vec<f64> = vec![100.0; 7];
        long.extend((0..112).map(|d| 5.0 + 0.5 * d as f64 + effect[d % 7]));
        let days = forecast(Method::TrendWeekly, &long, 1).unwrap();
        assert!((days[0].value - (5.0 + 56.0 + 3.0)).abs() < 1e-9, "{:?}", days[0]);
    }

    /// `scripts/bench-forecast`: 500 series of a year's days (trend, weekly pattern, noise),
    /// each backtested by the three methods and forecast three months ahead. Prints the time; no
    /// threshold (the machine varies).
    #[test]
    #[ignore]
    fn bench_500_series_of_a_year() {
        let first = date("2025-11-01");
        let mut state = 42u64;
        let mut noise = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let series: Vec<Vec<f64>> = (0..500)
            .map(|s| {
                let (level, trend) = (20.0 + s as f64 % 50.0, (s % 7) as f64 * 0.01);
                (0..365)
                    .map(|d| {
                        let weekend = if d % 7 >= 5 { 0.6 } else { 1.0 };
                        ((level + trend * d as f64) * weekend * (1.0 + 0.1 * noise())).max(0.0)
                    })
                    .collect()
            })
            .collect();
        let inputs: Vec<(NaiveDate, &[f64])> = series.iter().map(|s| (first, s.as_slice())).collect();
        let started = std::time::Instant::now();
        let done = forecast_all(&inputs, 3);
        let seconds = started.elapsed().as_secs_f64();
        let chosen = |m: Method| done.iter().filter(|f| f.as_ref().is_ok_and(|f| f.method == m)).count();
        println!(
            "{{\"series\": {}, \"days\": 365, \"seconds\": {seconds:.2}, \"mstl_ets\": {}, \"trend_weekly\": {}, \"seasonal_naive\": {}}}",
            done.len(),
            chosen(Method::MstlEts),
            chosen(Method::TrendWeekly),
            chosen(Method::SeasonalNaive)
        );
        assert_eq!(done.len(), 500);
    }

    #[test]
    fn a_constant_series_is_forecast_as_itself() {
        let chosen = forecast_series(date("2026-01-01"), &[24.0; 90], 1).unwrap();
        assert_eq!(chosen.months.len(), 1);
        assert_eq!(chosen.months[0].1.value, 24.0 * 30.0);
        assert_eq!(chosen.backtest.mape[0], Some(0.0));
    }
}
