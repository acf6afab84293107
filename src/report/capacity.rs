//! `gpuledger report capacity`: each GPU pool's capacity against the forecast's demand
//! (issue 42).
//!
//! - **Capacity** is what the bill's instance-hours provided: a day's GPUs are its
//!   provisioned GPU-hours / 24 (a pool of two 8-GPU nodes all day: 16). `gpus_peak` is the
//!   most of any day of the history, `gpus_average` the mean of its last 28 days.
//! - **Demand** is the pool's forecast `gpu_hours` (allocated to pods) a day / 24, plus what
//!   the planned changes add to its month spread evenly over the month's days.
//! - **Headroom** is `gpus_peak` less the highest day of demand (negative: demand beyond the
//!   most the pool ever had); `first_exceeds` the first day demand passes `gpus_peak`, and
//!   `first_upper_exceeds` the first day the forecast's 80 % upper bound (with the plans)
//!   does.
//! - **Drivers** are the clients whose demand in the pool grows the most: their mean forecast
//!   day (with plans) less their mean day over the last 28 days, in GPUs, largest first
//!   (growing ones only).
//!
//! Pools are the CUR's (AWS) and the FOCUS bills' (a GPU machine's usage charges' GPU-hours,
//! Spot where `PricingCategory` is `Dynamic`, else On-Demand, as the Kubernetes split names
//! its nodes' pools). A pool whose clusters have no Kubernetes series has no demand forecast.
//!
//! JSON: `{"history_end", "horizon_months", "pools": [{"provider", "pool", "gpus_peak",
//! "peak_date", "gpus_average", "demand_peak", "headroom", "first_exceeds",
//! "first_upper_exceeds", "drivers": [{"client", "gpus"}]}]}`.

use chrono::{Datelike, NaiveDate};
use serde_json::{Value, json};

use super::OutputFormat;
use super::forecast::{ForecastReport, History, SeriesReport};
use super::table::{Cell, Table};
use crate::period::Period;

/// One pool's capacity against demand.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolCapacity {
    pub provider: String,
    pub pool: String,
    pub gpus_peak: f64,
    pub peak_date: NaiveDate,
    pub gpus_average: f64,
    pub demand_peak: f64,
    pub headroom: f64,
    pub first_exceeds: Option<NaiveDate>,
    pub first_upper_exceeds: Option<NaiveDate>,
    /// (client, GPUs of growth), largest first.
    pub drivers: Vec<(String, f64)>,
}

#[derive(Debug, Clone)]
pub struct CapacityReport {
    pub history_end: NaiveDate,
    pub horizon_months: u32,
    pub pools: Vec<PoolCapacity>,
}

/// Days averaged for the recent level (capacity's average, a client's demand now).
const RECENT_DAYS: usize = 28;

impl CapacityReport {
    /// Every pool the bill provisioned, against `forecast` (built from `history` for every
    /// series: no pool or client left out).
    pub fn build(history: &History, forecast: &ForecastReport) -> CapacityReport {
        let pools = history
            .provisioned
            .iter()
            .filter(|(_, days)| days.iter().any(|h| *h > 0.0))
            .map(|((provider, pool), days)| {
                let gpus: Vec<f64> = days.iter().map(|h| h / 24.0).collect();
                let (peak_index, gpus_peak) = gpus
                    .iter()
                    .copied()
                    .enumerate()
                    .fold((0, 0.0), |best, (i, g)| if g > best.1 { (i, g) } else { best });
                let recent = &gpus[gpus.len().saturating_sub(RECENT_DAYS)..];
                let gpus_average = recent.iter().sum::<f64>() / recent.len().max(1) as f64;
                let own = forecast.series.iter().find(|s| {
                    s.metric == "gpu_hours"
                        && s.key.provider == *provider
                        && s.key.pool == *pool
                        && s.key.client.is_empty()
                });
                let demand = own.map(|s| daily_demand(s, forecast)).unwrap_or_default();
                let demand_peak = demand.iter().map(|(_, value, _)| *value).fold(0.0, f64::max);
                let first = |above: fn(&(NaiveDate, f64, f64)) -> f64| {
                    demand.iter().find(|d| above(d) > gpus_peak + 1e-9).map(|(date, ..)| *date)
                };
                let mut drivers: Vec<(String, f64)> = forecast
                    .series
                    .iter()
                    .filter(|s| {
                        s.metric == "gpu_hours"
                            && s.key.provider == *provider
                            && s.key.pool == *pool
                            && !s.key.client.is_empty()
                    })
                    .filter_map(|s| {
                        let ahead = daily_demand(s, forecast);
                        let mean_ahead =
                            ahead.iter().map(|(_, v, _)| v).sum::<f64>() / ahead.len().max(1) as f64;
                        let now = history.recent_mean(&s.key, "gpu_hours", RECENT_DAYS) / 24.0;
                        (mean_ahead - now > 1e-9).then(|| (s.key.client.clone(), mean_ahead - now))
                    })
                    .collect();
                drivers.sort_by(|a, b| b.1.total_cmp(&a.1));
                PoolCapacity {
                    provider: provider.clone(),
                    pool: pool.clone(),
                    gpus_peak,
                    peak_date: history.first + chrono::Days::new(peak_index as u64),
                    gpus_average,
                    demand_peak,
                    headroom: gpus_peak - demand_peak,
                    first_exceeds: first(|d| d.1),
                    first_upper_exceeds: first(|d| d.2),
                    drivers,
                }
            })
            .collect();
        CapacityReport { history_end: forecast.history_end, horizon_months: forecast.horizon_months, pools }
    }

    pub fn to_json(&self) -> Value {
        let round = |v: f64| (v * 1e6).round() / 1e6 + 0.0;
        let date = |d: Option<NaiveDate>| d.map(|d| d.to_string());
        json!({
            "history_end": self.history_end.to_string(),
            "horizon_months": self.horizon_months,
            "pools": self.pools.iter().map(|p| json!({
                "provider": p.provider,
                "pool": p.pool,
                "gpus_peak": round(p.gpus_peak),
                "peak_date": p.peak_date.to_string(),
                "gpus_average": round(p.gpus_average),
                "demand_peak": round(p.demand_peak),
                "headroom": round(p.headroom),
                "first_exceeds": date(p.first_exceeds),
                "first_upper_exceeds": date(p.first_upper_exceeds),
                "drivers": p.drivers.iter().map(|(client, gpus)| json!({"client": client, "gpus": round(*gpus)})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }

    pub fn render(&self, format: OutputFormat) -> String {
        if format == OutputFormat::Json {
            return serde_json::to_string_pretty(&self.to_json()).unwrap_or_default() + "\n";
        }
        self.table().render(format, &self.history_end.to_string(), serde_json::Map::new())
    }

    /// A row per pool, as the CLI prints it and the Plan page shows it.
    pub fn table(&self) -> Table {
        let date = |d: Option<NaiveDate>| Cell::Text(d.map(|d| d.to_string()).unwrap_or_default());
        let rows = self
            .pools
            .iter()
            .map(|p| {
                let drivers =
                    p.drivers.iter().take(3).map(|(c, g)| format!("{c} +{g:.1}")).collect::<Vec<_>>();
                vec![
                    Cell::Text(p.provider.clone()),
                    Cell::Text(p.pool.clone()),
                    Cell::Hours(p.gpus_peak),
                    Cell::Hours(p.gpus_average),
                    Cell::Hours(p.demand_peak),
                    Cell::Hours(p.headroom),
                    date(p.first_exceeds),
                    date(p.first_upper_exceeds),
                    Cell::Text(drivers.join(", ")),
                ]
            })
            .collect();
        Table {
            title: format!(
                "GPU capacity per pool (GPUs: GPU-hours a day / 24) against the forecast to {} months after {}",
                self.horizon_months, self.history_end
            ),
            columns: vec![
                "provider",
                "pool",
                "gpus_peak",
                "gpus_average",
                "demand_peak",
                "headroom",
                "first_exceeds",
                "first_upper_exceeds",
                "drivers",
            ],
            rows,
            totals: Vec::new(),
        }
    }
}

/// A series' forecast days as (date, GPUs, upper bound's GPUs), the planned changes of each
/// month spread over its days; the plans alone for a client with no history.
fn daily_demand(s: &SeriesReport, forecast: &ForecastReport) -> Vec<(NaiveDate, f64, f64)> {
    let first = forecast.history_end + chrono::Days::new(1);
    let last = forecast.months.last().map_or(first, |m| *m + chrono::Months::new(1));
    (0..(last - first).num_days().max(0) as usize)
        .map(|i| {
            let date = first + chrono::Days::new(i as u64);
            let month =
                forecast.months.iter().position(|m| m.year() == date.year() && m.month() == date.month());
            let days_in_month = Period::new(date.year(), date.month()).map_or(30.0, |p| f64::from(p.days()));
            let planned = month.and_then(|m| s.planned.get(m)).copied().unwrap_or(0.0) / days_in_month;
            let (value, upper) = s
                .forecast
                .as_ref()
                .ok()
                .and_then(|f| f.days.get(i))
                .map_or((0.0, 0.0), |p| (p.value, p.upper));
            (date, (value + planned) / 24.0, (upper + planned) / 24.0)
        })
        .collect()
}
