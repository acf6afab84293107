//! `gpuledger report forecast`: the next one to three months of each daily series the
//! rollups hold (issue 42), with the backtest that chose its method
//! ([`crate::engine::forecast`]).
//!
//! The series, one value per day of the history (every computed month, the last complete
//! one included, back to the first of an unbroken run of them), each in three metrics:
//! `gpu_hours` (allocated), `used_gpu_hours` (measured busy) and `cost` (Kubernetes cost,
//! split + unused, USD), and `spend` (the whole amortized bill of every provider in USD, for
//! the fleet and each provider: `History::spend`):
//! - the whole fleet: key `{"provider": "", "pool": "", "client": ""}`;
//! - each GPU pool, its provider, GPU model and purchase option (`"A100 Spot"`);
//! - each client, and each client in each pool.
//!
//! JSON contract (stable; fields may be added, never renamed):
//!
//! ```json
//! {"history_start": "2026-05-01", "history_end": "2026-10-31", "horizon_months": 3,
//!  "series": [{"key": {"provider": "aws", "pool": "A100 Spot", "client": "acme"},
//!    "metric": "gpu_hours", "method": "mstl_ets",
//!    "backtest": {"origins": 4, "mape_1m": 0.061, "mape_2m": 0.08, "mape_3m": 0.11,
//!                 "wape_1m": 0.058, "wape_2m": …, "wape_3m": …,
//!                 "baseline_mape_1m": 0.094, "baseline_mape_2m": …, "baseline_mape_3m": …,
//!                 "methods": {"seasonal_naive": {"mape_1m": 0.094, …}, "mstl_ets": {…},
//!                             "trend_weekly": {…}}},
//!    "months": [{"month": "2026-11", "value": 1234.5, "lower": 1100.2, "upper": 1380.0,
//!                "planned": 0.0}],
//!    "days": [{"date": "2026-11-01", "value": 41.2, "lower": 36.0, "upper": 46.1}],
//!    "note": null}]}
//! ```
//!
//! `method` is `seasonal_naive`, `mstl_ets` or `trend_weekly`; `insufficient_history` for a
//! series with fewer days than a forecast needs (its `note` says how many; no months or
//! days); `planned_only` for a client with planned changes and no history (its months' values
//! 0, their `planned` the plans'). MAPE and WAPE are fractions of the actual monthly total,
//! null where the backtest had no such month. `planned` is what the planned changes (`plan
//! add`) add to the month, apart from the statistical `value` ([`History::planned`]); the
//! changes in force in the horizon are listed in a top-level `"plans"`. A series that was 0
//! every day (used GPU-hours where no metrics were ingested) is left out.

use std::collections::BTreeMap;

use chrono::{Datelike, NaiveDate};
use serde_json::{Value, json};

use super::table::{Cell, Table};
use super::{OutputFormat, ReportError};
use crate::domain::plans::{Plan, PlanKind};
use crate::engine::forecast::{self, Backtest, ForecastError};
use crate::period::Period;
use crate::store::{Store, WorkloadClass};

pub const METRICS: [&str; 3] = ["gpu_hours", "used_gpu_hours", "cost"];

/// The month's whole spend, every line of every bill: the fleet's and each provider's.
pub const SPEND: &str = "spend";

/// Whose series: empty strings for "all".
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SeriesKey {
    pub provider: String,
    pub pool: String,
    pub client: String,
}

/// The daily history of every series.
#[derive(Debug, Clone)]
pub struct History {
    pub first: NaiveDate,
    /// The day after the last.
    pub end: NaiveDate,
    /// Per key and metric, a value per day from `first`.
    pub series: BTreeMap<(SeriesKey, &'static str), Vec<f64>>,
    /// The bills left out of the spend: no exchange rate into USD for their month.
    pub unconverted: Vec<String>,
    /// The planned changes (`gpuledger plan add`).
    pub plans: Vec<Plan>,
    /// Per pool (provider, pool as the series name it), the GPU-hours the bills provided each
    /// day from `first`: the CUR's instance-hours, and the FOCUS bills' GPU machines' usage
    /// (Spot where `Dynamic`, else On-Demand): what capacity is.
    pub provisioned: BTreeMap<(String, String), Vec<f64>>,
    /// Per pool (provider, pool), the GPU-hours of training workloads each day: what the Spot
    /// budgets weigh.
    pub training: BTreeMap<(String, String), Vec<f64>>,
}

impl History {
    /// The computed months before `today`'s month, back to the first of the unbroken run
    /// that ends with the latest of them.
    pub async fn load(store: &dyn Store, today: NaiveDate) -> Result<History, ReportError> {
        let this_month =
            Period::containing(today.and_hms_opt(0, 0, 0).map_or(0, |t| t.and_utc().timestamp()));
        let mut computed: Vec<Period> = store
            .rollup_periods()
            .await?
            .iter()
            .filter_map(|p| p.period.parse::<Period>().ok())
            .filter(|p| *p < this_month)
            .collect();
        computed.sort();
        let Some(&last) = computed.last() else {
            return Err(ReportError::NotComputed("any month before this one".into()));
        };
        let mut months = vec![last];
        while let Some(&previous) = months.last() {
            let before = previous.previous();
            if !computed.contains(&before) {
                break;
            }
            months.push(before);
        }
        months.reverse();
        let date = |seconds: i64| {
            chrono::DateTime::from_timestamp(seconds, 0).map_or(NaiveDate::MIN, |t| t.date_naive())
        };
        let (first, end) = (date(months[0].start()), date(last.end()));
        let days = (end - first).num_days() as usize;
        let mut series: BTreeMap<(SeriesKey, &'static str), Vec<f64>> = BTreeMap::new();
        let mut provisioned: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        let mut training: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        // Each month's instance-hours' amortized cost per day (every instance): the CUR's part
        // of the spend, read here with the rest of the rollups. Every FOCUS bill's GPU
        // machines (capacity rows too, another AWS payer's among them) come from their bills
        // with the rest of their spend, once.
        let mut instance_days: BTreeMap<Period, Vec<(i64, f64)>> = BTreeMap::new();
        for month in &months {
            let Some(rollups) = store.rollups(&month.to_string()).await? else { continue };
            let cur_capacity = || rollups.capacity.iter().filter(|c| c.from_cur());
            instance_days.insert(
                *month,
                cur_capacity().map(|c| (c.day, c.amortized_cost_micros as f64 / 1e6)).collect(),
            );
            for c in cur_capacity().filter(|c| c.is_gpu()) {
                let day = (date(c.day) - first).num_days();
                if day >= 0 && (day as usize) < days {
                    let pool = format!("{} {}", c.gpu_model, c.purchase_option.as_str());
                    provisioned.entry(("aws".into(), pool)).or_insert_with(|| vec![0.0; days])
                        [day as usize] += c.gpu_hours_provisioned;
                }
            }
            let providers: BTreeMap<&str, &str> =
                rollups.accounts.iter().map(|a| (a.account.as_str(), a.provider.as_str())).collect();
            for c in &rollups.costs {
                let day = (date(c.day) - first).num_days();
                if day < 0 || day as usize >= days {
                    continue;
                }
                let provider = providers.get(c.account.as_str()).copied().unwrap_or("aws");
                let pool = (!c.gpu_model.is_empty())
                    .then(|| format!("{} {}", c.gpu_model, c.purchase_option.as_str()).trim().to_string());
                if let Some(pool) = pool.as_ref().filter(|_| c.workload_class == WorkloadClass::Training) {
                    training
                        .entry((provider.to_string(), pool.clone()))
                        .or_insert_with(|| vec![0.0; days])[day as usize] += c.gpu_hours_allocated;
                }
                let mut keys =
                    vec![SeriesKey { provider: String::new(), pool: String::new(), client: String::new() }];
                if !c.client.is_empty() {
                    keys.push(SeriesKey {
                        provider: String::new(),
                        pool: String::new(),
                        client: c.client.clone(),
                    });
                }
                if let Some(pool) = &pool {
                    keys.push(SeriesKey {
                        provider: provider.into(),
                        pool: pool.clone(),
                        client: String::new(),
                    });
                    if !c.client.is_empty() {
                        keys.push(SeriesKey {
                            provider: provider.into(),
                            pool: pool.clone(),
                            client: c.client.clone(),
                        });
                    }
                }
                let cost = (c.split_cost_nanos + c.unused_cost_nanos) as f64 / 1e9;
                for key in keys {
                    for (metric, value) in
                        METRICS.into_iter().zip([c.gpu_hours_allocated, c.gpu_hours_used, cost])
                    {
                        series.entry((key.clone(), metric)).or_insert_with(|| vec![0.0; days])
                            [day as usize] += value;
                    }
                }
            }
        }
        let mut unconverted = Vec::new();
        for month in &months {
            let instances = instance_days.get(month).map_or(&[][..], Vec::as_slice);
            let (spend, focus_gpus) = Self::spend(store, *month, instances, &mut unconverted).await?;
            for (provider, pool, day, gpu_hours) in focus_gpus {
                let day = (date(day) - first).num_days();
                if day >= 0 && (day as usize) < days {
                    provisioned.entry((provider, pool)).or_insert_with(|| vec![0.0; days])[day as usize] +=
                        gpu_hours;
                }
            }
            for (provider, day, usd) in spend {
                let day = (date(day) - first).num_days();
                if day < 0 || day as usize >= days {
                    continue;
                }
                for provider in [String::new(), provider.clone()] {
                    let key = SeriesKey { provider, pool: String::new(), client: String::new() };
                    series.entry((key, SPEND)).or_insert_with(|| vec![0.0; days])[day as usize] += usd;
                }
            }
        }
        let plans = store.plans().await?;
        Ok(History { first, end, series, unconverted, plans, provisioned, training })
    }

    /// A month's whole amortized spend per provider and day, in USD: the CUR's instance-hours
    /// and other lines (together its amortized bill, exactly), and every FOCUS bill's usage and
    /// purchases' `EffectiveCost` (tax, credits and adjustments are not in an amortized bill:
    /// [`crate::engine::bills::in_amortized_bill`]) that compute counts (not the CUR's own
    /// bill through AWS's FOCUS export: [`crate::engine::bills::counted`]; another AWS payer's
    /// is), converted at the month's rate; a bill with no rate is named in
    /// `unconverted` and left out. Beside it, the GPU-hours the FOCUS bills' GPU machines
    /// provided per provider, pool and day (rate or none): their capacity.
    async fn spend(
        store: &dyn Store,
        month: Period,
        instances: &[(i64, f64)],
        unconverted: &mut Vec<String>,
    ) -> Result<(Vec<(String, i64, f64)>, Vec<(String, String, i64, f64)>), ReportError> {
        let period = month.to_string();
        let mut out = Vec::new();
        let cur = store.bill(&period).await?;
        if let Some(bill) = &cur {
            out.extend(
                bill.other_costs
                    .iter()
                    .map(|o| ("aws".to_string(), o.day, o.amortized_cost_micros as f64 / 1e6)),
            );
            out.extend(instances.iter().map(|&(day, usd)| ("aws".to_string(), day, usd)));
        }
        let rates = store.fx_rates().await?;
        let mut currencies = BTreeMap::new();
        let mut read = std::collections::BTreeSet::new();
        let payer = cur.as_ref().map(|c| c.billing_account.clone());
        for bill in store
            .bills(Some(&period))
            .await?
            .into_iter()
            .filter(|b| crate::engine::bills::counted(b, payer.as_deref()))
        {
            read.insert((bill.provider.clone(), bill.billing_account.clone()));
            let rate = (bill.currency != "USD")
                .then(|| crate::domain::fx::rate_for(&rates, &bill.currency, "USD", &period).cloned());
            match rate {
                Some(None) => unconverted
                    .push(format!("{period} {} {} ({})", bill.provider, bill.billing_account, bill.currency)),
                rate => {
                    currencies.insert((bill.provider, bill.billing_account), rate.flatten());
                }
            }
        }
        let mut gpus = Vec::new();
        if !read.is_empty() {
            let charges = store.bill_charges(&period, None).await?;
            for charge in
                charges.into_iter().filter(|c| crate::engine::bills::in_amortized_bill(&c.charge_category))
            {
                let bill = (charge.provider.clone(), charge.billing_account.clone());
                if !read.contains(&bill) {
                    continue;
                }
                // A GPU machine's usage: its pool as the Kubernetes split names it (a node is
                // Spot or On-Demand; a committed one runs On-Demand).
                if charge.charge_category == "Usage" && charge.gpu_hours > 0.0 && !charge.gpu_model.is_empty()
                {
                    let option = crate::store::PurchaseOption::of_pricing_category(&charge.pricing_category);
                    gpus.push((
                        charge.provider.clone(),
                        format!("{} {option}", charge.gpu_model),
                        charge.day,
                        charge.gpu_hours,
                    ));
                }
                let Some(rate) = currencies.get(&bill) else { continue };
                let nanos =
                    rate.as_ref().map_or(charge.effective_nanos, |r| r.convert(charge.effective_nanos));
                out.push((charge.provider, charge.day, nanos as f64 / 1e9));
            }
        }
        Ok((out, gpus))
    }
}

impl History {
    /// What `plans` add to `series`' month `m` of the horizon:
    /// - a plan counts for the fleet, its client's series and, when it names a pool, that
    ///   pool's and the client's in it (the fleet's spend too; a provider's spend and a pool
    ///   series for a plan without a pool do not take it);
    /// - GPU-hours add themselves to `gpu_hours`, their used share to `used_gpu_hours` and their
    ///   cost per GPU-hour to `cost` and `spend`, at the rates of the last four weeks of history
    ///   ([`History::rates`]: the client's in the pool, the pool's, the client's, the fleet's,
    ///   the first with GPU-hours);
    /// - a percentage adds itself of the client's forecast for the month (in the pool, when it
    ///   names one; `cost`'s for `spend`).
    fn planned(
        &self,
        plans: &[Plan],
        series: &[SeriesReport],
        s: &SeriesReport,
        (m, month): (usize, Period),
    ) -> f64 {
        let key = &s.key;
        if !key.provider.is_empty() && key.pool.is_empty() {
            return 0.0;
        }
        plans
            .iter()
            .filter(|p| p.applies(month))
            .filter(|p| {
                (key.client.is_empty() || key.client == p.client)
                    && (key.pool.is_empty() || key.pool == p.pool)
            })
            .map(|p| match p.kind() {
                PlanKind::GpuHours => {
                    let (cost, used) = self.plan_rates(p);
                    p.amount
                        * match s.metric {
                            "gpu_hours" => 1.0,
                            "used_gpu_hours" => used,
                            _ => cost,
                        }
                }
                PlanKind::Percent => {
                    let metric = if s.metric == SPEND { "cost" } else { s.metric };
                    let base = series
                        .iter()
                        .filter(|b| b.metric == metric && b.key.client == p.client && b.key.pool == p.pool)
                        .filter_map(|b| {
                            b.forecast
                                .as_ref()
                                .ok()
                                .and_then(|f| f.months.get(m))
                                .map(|(_, point)| point.value)
                        })
                        .sum::<f64>();
                    base * p.amount / 100.0
                }
            })
            .sum()
    }

    /// A plan's cost per GPU-hour and used share ([`History::rates`]), 0 without any history.
    fn plan_rates(&self, plan: &Plan) -> (f64, f64) {
        let in_pool = |client: &str| {
            self.series
                .keys()
                .find(|(k, _)| !plan.pool.is_empty() && k.pool == plan.pool && k.client == client)
                .and_then(|(k, _)| self.rates(k))
        };
        let key =
            |client: &str| SeriesKey { provider: String::new(), pool: String::new(), client: client.into() };
        in_pool(&plan.client)
            .or_else(|| in_pool(""))
            .or_else(|| self.rates(&key(&plan.client)))
            .or_else(|| self.rates(&key("")))
            .unwrap_or((0.0, 0.0))
    }

    /// Over the last 28 days of `key`'s history: its cost per GPU-hour and the share of its
    /// GPU-hours used; `None` without GPU-hours then.
    pub fn rates(&self, key: &SeriesKey) -> Option<(f64, f64)> {
        let tail = |metric: &'static str| self.recent_mean(key, metric, 28);
        let gpu_hours = tail("gpu_hours");
        (gpu_hours > 0.0).then(|| (tail("cost") / gpu_hours, tail("used_gpu_hours") / gpu_hours))
    }

    /// The mean day of `key`'s `metric` over the last `days` of the history (0 without it).
    pub fn recent_mean(&self, key: &SeriesKey, metric: &'static str, days: usize) -> f64 {
        self.series.get(&(key.clone(), metric)).map_or(0.0, |v| {
            let tail = &v[v.len().saturating_sub(days)..];
            tail.iter().sum::<f64>() / tail.len().max(1) as f64
        })
    }
}

/// One series' outcome.
#[derive(Debug, Clone)]
pub struct SeriesReport {
    pub key: SeriesKey,
    pub metric: &'static str,
    /// `Err`: not forecast, with the days of history it has (too few; 0 for a client with
    /// no history at all, forecast from its planned changes alone).
    pub forecast: Result<forecast::SeriesForecast, usize>,
    /// What the planned changes add to each month of the horizon.
    pub planned: Vec<f64>,
}

#[derive(Debug, Clone)]
pub struct ForecastReport {
    pub history_start: NaiveDate,
    pub history_end: NaiveDate,
    pub horizon_months: u32,
    /// The first day of each month of the horizon.
    pub months: Vec<NaiveDate>,
    pub series: Vec<SeriesReport>,
    /// [`History::unconverted`]: named in the spend series' notes.
    pub unconverted: Vec<String>,
    /// The planned changes that apply to a month of the horizon.
    pub plans: Vec<Plan>,
}

impl ForecastReport {
    /// Forecasts the series of `history` that `pool` and `client` select (a series of
    /// another pool or client, or of all of them, is left out when one is given), with what
    /// the planned changes add to each month ([`History::planned`]).
    pub fn build(history: &History, months: u32, pool: Option<&str>, client: Option<&str>) -> ForecastReport {
        let wanted =
            |key: &SeriesKey| pool.is_none_or(|p| key.pool == p) && client.is_none_or(|c| key.client == c);
        let horizon: Vec<NaiveDate> = (0..months).map(|m| history.end + chrono::Months::new(m)).collect();
        let periods: Vec<Period> =
            horizon.iter().filter_map(|d| d.format("%Y-%m").to_string().parse().ok()).collect();
        let plans: Vec<Plan> =
            history.plans.iter().filter(|p| periods.iter().any(|&m| p.applies(m))).cloned().collect();
        // A percentage plan scales its client's forecast: those series are forecast too.
        let scaled = |key: &SeriesKey| {
            plans
                .iter()
                .any(|p| p.kind() == PlanKind::Percent && p.client == key.client && p.pool == key.pool)
        };
        // A series that was 0 every day (GPU-hours never measured) has nothing to forecast.
        let chosen: Vec<_> = history
            .series
            .iter()
            .filter(|((key, _), values)| (wanted(key) || scaled(key)) && values.iter().any(|v| *v != 0.0))
            .collect();
        // Days before the series' first non-zero value are before it existed (a client
        // onboarding mid-history): its history starts there.
        let starts: Vec<usize> = chosen
            .iter()
            .map(|(_, values)| values.iter().position(|v| *v != 0.0).unwrap_or(values.len()))
            .collect();
        let inputs: Vec<(NaiveDate, &[f64])> = chosen
            .iter()
            .zip(&starts)
            .map(|((_, values), &start)| (history.first + chrono::Days::new(start as u64), &values[start..]))
            .collect();
        let mut series: Vec<SeriesReport> = chosen
            .iter()
            .zip(forecast::forecast_all(&inputs, months))
            .zip(&inputs)
            .map(|((((key, metric), _), forecast), (_, values))| SeriesReport {
                key: key.clone(),
                metric,
                forecast: match forecast {
                    Ok(f) => Ok(f),
                    Err(ForecastError::TooLittleHistory { have }) => Err(have),
                    Err(ForecastError::Model(_)) => Err(values.len()),
                },
                planned: Vec::new(),
            })
            .collect();
        // A client with planned changes and no history: forecast from them alone.
        for plan in &plans {
            let key = SeriesKey { provider: String::new(), pool: String::new(), client: plan.client.clone() };
            if !history.series.keys().any(|(k, _)| k.client == plan.client) {
                for metric in ["gpu_hours", "cost"] {
                    if !series.iter().any(|s| s.key == key && s.metric == metric) {
                        series.push(SeriesReport {
                            key: key.clone(),
                            metric,
                            forecast: Err(0),
                            planned: Vec::new(),
                        });
                    }
                }
            }
        }
        let planned: Vec<Vec<f64>> = series
            .iter()
            .map(|s| {
                periods
                    .iter()
                    .enumerate()
                    .map(|(m, &month)| history.planned(&plans, &series, s, (m, month)))
                    .collect()
            })
            .collect();
        for (s, planned) in series.iter_mut().zip(planned) {
            s.planned = planned;
        }
        series.retain(|s| wanted(&s.key));
        ForecastReport {
            history_start: history.first,
            history_end: history.end.pred_opt().unwrap_or(history.end),
            horizon_months: months,
            months: horizon,
            series,
            unconverted: history.unconverted.clone(),
            plans,
        }
    }

    pub fn to_json(&self) -> Value {
        // (+ 0.0: no "-0.0" for a change that takes nothing away.)
        let round = |v: f64| (v * 1e6).round() / 1e6 + 0.0;
        let series: Vec<Value> = self
            .series
            .iter()
            .map(|s| {
                let key = json!({"provider": s.key.provider, "pool": s.key.pool, "client": s.key.client});
                match &s.forecast {
                    Ok(f) => json!({
                        "key": key,
                        "metric": s.metric,
                        "method": f.method.name(),
                        "backtest": backtest_json(&f.backtest, &f.baseline, &f.methods),
                        "months": f.months.iter().zip(&s.planned).map(|((month, p), planned)| json!({
                            "month": format!("{:04}-{:02}", month.year(), month.month()),
                            "value": round(p.value), "lower": round(p.lower), "upper": round(p.upper),
                            "planned": round(*planned),
                        })).collect::<Vec<_>>(),
                        "days": f.days.iter().enumerate().map(|(i, p)| json!({
                            "date": (self.history_end + chrono::Days::new(i as u64 + 1)).to_string(),
                            "value": round(p.value), "lower": round(p.lower), "upper": round(p.upper),
                        })).collect::<Vec<_>>(),
                        "note": self.note(s.metric),
                    }),
                    Err(0) => json!({
                        "key": key,
                        "metric": s.metric,
                        "method": "planned_only",
                        "backtest": backtest_json(&Backtest::default(), &Backtest::default(), &[]),
                        "months": self.months.iter().zip(&s.planned).map(|(month, planned)| json!({
                            "month": format!("{:04}-{:02}", month.year(), month.month()),
                            "value": 0.0, "lower": 0.0, "upper": 0.0, "planned": round(*planned),
                        })).collect::<Vec<_>>(),
                        "days": [],
                        "note": "no history yet: forecast from its planned changes alone",
                    }),
                    Err(have) => json!({
                        "key": key,
                        "metric": s.metric,
                        "method": "insufficient_history",
                        "backtest": backtest_json(&Backtest::default(), &Backtest::default(), &[]),
                        "months": [],
                        "days": [],
                        "note": format!(
                            "{have} days of history, fewer than the {} a forecast needs: not forecast",
                            forecast::MIN_HISTORY_DAYS
                        ),
                    }),
                }
            })
            .collect();
        json!({
            "history_start": self.history_start.to_string(),
            "history_end": self.history_end.to_string(),
            "horizon_months": self.horizon_months,
            "series": series,
            "plans": self.plans,
        })
    }

    /// What a series leaves out: the spend, the bills it could not convert into USD.
    fn note(&self, metric: &str) -> Value {
        if metric != SPEND || self.unconverted.is_empty() {
            return Value::Null;
        }
        format!("left out, no exchange rate into USD for their month: {}", self.unconverted.join(", ")).into()
    }

    pub fn render(&self, format: OutputFormat) -> String {
        if format == OutputFormat::Json {
            return serde_json::to_string_pretty(&self.to_json()).unwrap_or_default() + "\n";
        }
        self.table().render(format, &self.history_end.to_string(), serde_json::Map::new())
    }

    /// A row per series and month, as the CLI prints it and the Plan page shows it.
    pub fn table(&self) -> Table {
        let mut rows = Vec::new();
        for s in &self.series {
            let key = [s.key.provider.as_str(), s.key.pool.as_str(), s.key.client.as_str()];
            let lead = key.iter().map(|k| Cell::Text(k.to_string())).chain([Cell::Text(s.metric.into())]);
            // Per month: method, month, value, lower, upper, planned and the two MAPEs.
            let month_rows: Vec<MonthRow> = match &s.forecast {
                Ok(f) => f
                    .months
                    .iter()
                    .map(|(month, p)| {
                        (
                            f.method.name(),
                            month.format("%Y-%m").to_string(),
                            *p,
                            f.backtest.mape[0],
                            f.baseline.mape[0],
                        )
                    })
                    .collect(),
                Err(0) => self
                    .months
                    .iter()
                    .map(|month| {
                        (
                            "planned_only",
                            month.format("%Y-%m").to_string(),
                            forecast::Point::default(),
                            None,
                            None,
                        )
                    })
                    .collect(),
                Err(_) => {
                    vec![("insufficient_history", String::new(), forecast::Point::default(), None, None)]
                }
            };
            for (m, (method, month, p, mape, baseline)) in month_rows.into_iter().enumerate() {
                rows.push(
                    lead.clone()
                        .chain([
                            Cell::Text(method.into()),
                            Cell::Text(month),
                            Cell::Hours(p.value),
                            Cell::Hours(p.lower),
                            Cell::Hours(p.upper),
                            Cell::Hours(s.planned.get(m).copied().unwrap_or(0.0)),
                            Cell::Ratio(mape),
                            Cell::Ratio(baseline),
                        ])
                        .collect(),
                );
            }
        }
        Table {
            title: format!(
                "Forecast from {} to {}, {} month(s) ahead (80 % intervals; MAPE one month ahead in the backtest)",
                self.history_start, self.history_end, self.horizon_months
            ),
            columns: vec![
                "provider",
                "pool",
                "client",
                "metric",
                "method",
                "month",
                "value",
                "lower",
                "upper",
                "planned",
                "mape_1m",
                "baseline_mape_1m",
            ],
            rows,
            totals: Vec::new(),
        }
    }
}

/// A line of the table: method, month, the forecast, and the chosen method's and the
/// baseline's one-month MAPE.
type MonthRow = (&'static str, String, forecast::Point, Option<f64>, Option<f64>);

/// The chosen method's backtest, the baseline's, and every method's (`methods`).
fn backtest_json(chosen: &Backtest, baseline: &Backtest, methods: &[(forecast::Method, Backtest)]) -> Value {
    let errors = |b: &Backtest| {
        json!({
            "mape_1m": b.mape[0], "mape_2m": b.mape[1], "mape_3m": b.mape[2],
            "wape_1m": b.wape[0], "wape_2m": b.wape[1], "wape_3m": b.wape[2],
        })
    };
    let methods: serde_json::Map<String, Value> =
        methods.iter().map(|(m, b)| (m.name().to_string(), errors(b))).collect();
    json!({
        "methods": methods,
        "origins": chosen.origins,
        "mape_1m": chosen.mape[0], "mape_2m": chosen.mape[1], "mape_3m": chosen.mape[2],
        "wape_1m": chosen.wape[0], "wape_2m": chosen.wape[1], "wape_3m": chosen.wape[2],
        "baseline_mape_1m": baseline.mape[0], "baseline_mape_2m": baseline.mape[1],
        "baseline_mape_3m": baseline.mape[2],
    })
}
