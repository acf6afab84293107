//! `gpuledger report spot-budgets`: per GPU model, the Spot share of training against the 50 %
//! target, and what moving the forecast On-Demand training hours would save (issue 42).
//!
//! - **Spot share**: training GPU-hours on Spot over all training GPU-hours of the model, over
//!   the last 28 days (the Overview's "Spot adoption", per model).
//! - **Training ahead**, per pool of the model (`A100 Spot`, `A100 On-Demand`, …): the pool's
//!   forecast GPU-hours over the horizon with its planned changes, times the pool's training
//!   share of its GPU-hours over the last 28 days.
//! - **Movable**: the On-Demand training hours ahead that would bring Spot to the target
//!   (`target × all − Spot`, at most all the On-Demand ones). Hours under a Savings Plan or a
//!   reservation are not counted: moving them would leave the commitment unused.
//! - **Savings**: movable × (On-Demand − Spot cost per GPU-hour), each the pool's over the last
//!   28 days (the bill's amortized prices); none without a Spot pool of the model to price it.
//!
//! JSON: `{"history_end", "horizon_months", "target", "models": [{"provider", "gpu_model",
//! "spot_share", "training_gpu_hours", "spot_gpu_hours", "on_demand_gpu_hours",
//! "movable_gpu_hours", "on_demand_rate", "spot_rate", "savings", "monthly_savings", "note"}]}`.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde_json::{Value, json};

use super::OutputFormat;
use super::forecast::{ForecastReport, History, SeriesKey};
use super::table::{Cell, Table};

/// The Spot share of training GPU-hours to aim for (the Overview's target).
pub const TARGET: f64 = 0.5;

const RECENT_DAYS: usize = 28;

/// A model's pools by purchase option: (training GPU-hours of the last 28 days, all its
/// GPU-hours then, its GPU-hours ahead with the plans).
type Mix = BTreeMap<String, (f64, f64, f64)>;

#[derive(Debug, Clone, PartialEq)]
pub struct ModelBudget {
    pub provider: String,
    pub gpu_model: String,
    pub spot_share: Option<f64>,
    /// Training GPU-hours ahead, all of them, on Spot, and On-Demand.
    pub training_gpu_hours: f64,
    pub spot_gpu_hours: f64,
    pub on_demand_gpu_hours: f64,
    pub movable_gpu_hours: f64,
    /// USD per GPU-hour.
    pub on_demand_rate: Option<f64>,
    pub spot_rate: Option<f64>,
    pub savings: Option<f64>,
}

#[derive(Debug, Clone)]
pub struct SpotReport {
    pub history_end: NaiveDate,
    pub horizon_months: u32,
    pub models: Vec<ModelBudget>,
}

impl SpotReport {
    /// Every GPU model with training in the last 28 days, against `forecast` (built from
    /// `history` for every series).
    pub fn build(history: &History, forecast: &ForecastReport) -> SpotReport {
        let mut models: BTreeMap<(String, String), Mix> = BTreeMap::new();
        for ((provider, pool), days) in &history.training {
            let recent_training = tail_sum(days);
            let key = SeriesKey { provider: provider.clone(), pool: pool.clone(), client: String::new() };
            let recent_all =
                history.recent_mean(&key, "gpu_hours", RECENT_DAYS) * RECENT_DAYS.min(days.len()) as f64;
            let ahead =
                forecast.series.iter().find(|s| s.metric == "gpu_hours" && s.key == key).map_or(0.0, |s| {
                    let statistical: f64 =
                        s.forecast.as_ref().map_or(0.0, |f| f.months.iter().map(|(_, p)| p.value).sum());
                    statistical + s.planned.iter().sum::<f64>()
                });
            let (model, option) = pool.split_once(' ').unwrap_or((pool.as_str(), ""));
            models
                .entry((provider.clone(), model.to_string()))
                .or_default()
                .insert(option.to_string(), (recent_training, recent_all, ahead));
        }
        let models = models
            .into_iter()
            .filter(|(_, options)| options.values().any(|(training, ..)| *training > 0.0))
            .map(|((provider, gpu_model), options)| {
                let training_ahead = |option: &str| {
                    options.get(option).map_or(
                        0.0,
                        |(training, all, ahead)| if *all > 0.0 { ahead * training / all } else { 0.0 },
                    )
                };
                let recent: f64 = options.values().map(|(training, ..)| training).sum();
                let recent_spot = options.get("Spot").map_or(0.0, |(training, ..)| *training);
                let training_gpu_hours: f64 = options.keys().map(|o| training_ahead(o)).sum();
                let spot_gpu_hours = training_ahead("Spot");
                let on_demand_gpu_hours = training_ahead("On-Demand");
                let movable_gpu_hours =
                    (TARGET * training_gpu_hours - spot_gpu_hours).clamp(0.0, on_demand_gpu_hours);
                let rate = |option: &str| {
                    let key = SeriesKey {
                        provider: provider.clone(),
                        pool: format!("{gpu_model} {option}"),
                        client: String::new(),
                    };
                    history.rates(&key).map(|(cost, _)| cost)
                };
                let (on_demand_rate, spot_rate) = (rate("On-Demand"), rate("Spot"));
                let savings = on_demand_rate.zip(spot_rate).map(|(od, spot)| movable_gpu_hours * (od - spot));
                ModelBudget {
                    provider,
                    gpu_model,
                    spot_share: (recent > 0.0).then(|| recent_spot / recent),
                    training_gpu_hours,
                    spot_gpu_hours,
                    on_demand_gpu_hours,
                    movable_gpu_hours,
                    on_demand_rate,
                    spot_rate,
                    savings,
                }
            })
            .collect();
        SpotReport { history_end: forecast.history_end, horizon_months: forecast.horizon_months, models }
    }

    pub fn to_json(&self) -> Value {
        let round = |v: f64| (v * 1e6).round() / 1e6 + 0.0;
        let months = f64::from(self.horizon_months.max(1));
        json!({
            "history_end": self.history_end.to_string(),
            "horizon_months": self.horizon_months,
            "target": TARGET,
            "models": self.models.iter().map(|m| json!({
                "provider": m.provider,
                "gpu_model": m.gpu_model,
                "spot_share": m.spot_share.map(round),
                "training_gpu_hours": round(m.training_gpu_hours),
                "spot_gpu_hours": round(m.spot_gpu_hours),
                "on_demand_gpu_hours": round(m.on_demand_gpu_hours),
                "movable_gpu_hours": round(m.movable_gpu_hours),
                "on_demand_rate": m.on_demand_rate.map(round),
                "spot_rate": m.spot_rate.map(round),
                "savings": m.savings.map(round),
                "monthly_savings": m.savings.map(|s| round(s / months)),
                "note": (m.savings.is_none() && m.movable_gpu_hours > 0.0).then(|| format!(
                    "no {} Spot hours in the bill's last 28 days to price the move", m.gpu_model
                )),
            })).collect::<Vec<_>>(),
        })
    }

    pub fn render(&self, format: OutputFormat) -> String {
        if format == OutputFormat::Json {
            return serde_json::to_string_pretty(&self.to_json()).unwrap_or_default() + "\n";
        }
        self.table().render(format, &self.history_end.to_string(), serde_json::Map::new())
    }

    /// A row per GPU model, as the CLI prints it and the Plan page shows it.
    pub fn table(&self) -> Table {
        let usd = |v: Option<f64>| Cell::Rate(v);
        let rows = self
            .models
            .iter()
            .map(|m| {
                vec![
                    Cell::Text(m.provider.clone()),
                    Cell::Text(m.gpu_model.clone()),
                    Cell::Ratio(m.spot_share),
                    Cell::Hours(m.training_gpu_hours),
                    Cell::Hours(m.spot_gpu_hours),
                    Cell::Hours(m.on_demand_gpu_hours),
                    Cell::Hours(m.movable_gpu_hours),
                    usd(m.on_demand_rate),
                    usd(m.spot_rate),
                    Cell::Usd(m.savings.map(crate::money::Nanos::from_usd)),
                ]
            })
            .collect();
        Table {
            title: format!(
                "Spot budgets: training on Spot against the {:.0} % target, {} month(s) after {}",
                TARGET * 100.0,
                self.horizon_months,
                self.history_end
            ),
            columns: vec![
                "provider",
                "gpu_model",
                "spot_share",
                "training_gpu_hours",
                "spot_gpu_hours",
                "on_demand_gpu_hours",
                "movable_gpu_hours",
                "on_demand_rate",
                "spot_rate",
                "savings",
            ],
            rows,
            totals: Vec::new(),
        }
    }
}

/// The sum of the last 28 days.
fn tail_sum(days: &[f64]) -> f64 {
    days[days.len().saturating_sub(RECENT_DAYS)..].iter().sum()
}
