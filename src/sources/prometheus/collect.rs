//! The collector: every series seen, with its samples already folded into hours.
//!
//! Gauges keep per hour the sum, count and maximum of their samples in `[h, h+1)`; counters
//! keep per hour the increase between consecutive samples whose later sample falls in
//! `(h, h+1]`, with a drop read as a reset (the new value is the increase, as `increase()`
//! does). Samples outside the window are still used as a counter's previous value.

use std::collections::HashMap;

use super::{Labels, Role, counter_hour, gauge_hour};

/// Gauge values above this are exporter sentinels for "unsupported", not readings
/// (prometheus reference §1.1: `9223372036854775794`).
const SENTINEL: f64 = 1e15;

/// One hour of one series.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HourAcc {
    pub hour: i64,
    pub sum: f64,
    pub samples: u32,
    pub max: f64,
}

/// One series and its hours, in time order.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub role: Role,
    pub labels: Labels,
    pub hours: Vec<HourAcc>,
    /// A Kubernetes series' samples themselves (ms, value), from an hour before the window
    /// (a counter's starting value) to its end; empty for other series.
    pub raw: Vec<(i64, f64)>,
    last_ms: Option<i64>,
    last_value: Option<f64>,
}

/// What became of one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    Kept,
    /// Not after the series' previous sample: a duplicate from overlapping queries, or an
    /// out-of-order line in a file.
    NotNewer,
    /// NaN, infinite, negative or a sentinel value.
    Invalid,
}

/// All series of one ingest window `[from, to)` (epoch seconds, whole hours).
#[derive(Debug)]
pub struct Collector {
    pub from: i64,
    pub to: i64,
    keys: HashMap<String, usize>,
    pub series: Vec<Series>,
    /// How often each gap between consecutive gauge samples occurred, in ms: the most
    /// common one is the scrape interval.
    gaps: HashMap<i64, u64>,
    pub samples: u64,
    pub invalid_samples: u64,
}

impl Collector {
    pub fn new(from: i64, to: i64) -> Collector {
        Collector {
            from,
            to,
            keys: HashMap::new(),
            series: Vec::new(),
            gaps: HashMap::new(),
            samples: 0,
            invalid_samples: 0,
        }
    }

    /// The id of the series with this key (any text unique per series, e.g. its exposition
    /// `name{labels}`), creating it with `describe()` the first time.
    pub fn series_id(&mut self, key: &str, describe: impl FnOnce() -> (String, Role, Labels)) -> usize {
        if let Some(&id) = self.keys.get(key) {
            return id;
        }
        let (name, role, mut labels) = describe();
        labels.sort();
        let id = self.series.len();
        self.series.push(Series {
            name,
            role,
            labels,
            hours: Vec::new(),
            raw: Vec::new(),
            last_ms: None,
            last_value: None,
        });
        self.keys.insert(key.to_string(), id);
        id
    }

    /// Folds one sample into its series.
    pub fn observe(&mut self, id: usize, t_ms: i64, raw: f64) -> Observed {
        let series = &mut self.series[id];
        if series.last_ms.is_some_and(|last| t_ms <= last) {
            return Observed::NotNewer;
        }
        if !raw.is_finite() || raw < 0.0 || raw > SENTINEL && !series.role.is_counter() {
            self.invalid_samples += 1;
            return Observed::Invalid;
        }
        let value = raw * series.role.scale();
        self.samples += 1;
        if series.role.is_kube() {
            // Kept as samples (the pods' split reads them), not folded into hours. A counter's
            // sample at the window's end closes its last hour's increase (as a GPU counter's
            // does, `counter_hour`): without it a window's last hour lost that increase.
            let kept_from = self.from.saturating_sub(3600).saturating_mul(1000);
            let kept_to = self.to.saturating_mul(1000) + i64::from(series.role.is_counter());
            if t_ms >= kept_from && t_ms < kept_to {
                series.raw.push((t_ms, value));
            }
        } else if series.role.is_counter() {
            let increase = match series.last_value {
                Some(previous) if value >= previous => Some(value - previous),
                Some(_) => Some(value), // reset: counting started again from zero
                None => None,
            };
            let hour = counter_hour(t_ms);
            if let Some(increase) = increase.filter(|_| hour >= self.from && hour < self.to) {
                add(&mut series.hours, hour, increase, |acc, v| acc.sum += v);
            }
            series.last_value = Some(value);
        } else {
            if let Some(last) = series.last_ms {
                *self.gaps.entry(t_ms - last).or_default() += 1;
            }
            let hour = gauge_hour(t_ms);
            if hour >= self.from && hour < self.to {
                add(&mut series.hours, hour, value, |acc, v| {
                    acc.sum += v;
                    acc.max = acc.max.max(v);
                });
            }
        }
        series.last_ms = Some(t_ms);
        Observed::Kept
    }

    /// The most common gap between consecutive gauge samples, in seconds (the scrape or
    /// export interval); `None` before two samples of one series were seen.
    pub fn sample_interval(&self) -> Option<f64> {
        let (gap, _) = self.gaps.iter().max_by_key(|(gap, count)| (**count, std::cmp::Reverse(**gap)))?;
        Some(*gap as f64 / 1000.0)
    }

    /// The hours that hold data: from the first to one past the last.
    pub fn data_hours(&self) -> Option<(i64, i64)> {
        let hours = self.series.iter().flat_map(|s| {
            let kept = s.raw.iter().map(|(t, _)| gauge_hour(*t)).filter(|h| *h >= self.from);
            s.hours.iter().map(|h| h.hour).chain(kept)
        });
        let (min, max) = hours.fold((i64::MAX, i64::MIN), |(lo, hi), h| (lo.min(h), hi.max(h)));
        (min <= max).then_some((min, max + 3600))
    }
}

/// Adds to the series' last hour when it is `hour` (samples come in time order), else opens it.
fn add(hours: &mut Vec<HourAcc>, hour: i64, value: f64, fold: impl Fn(&mut HourAcc, f64)) {
    match hours.last_mut() {
        Some(acc) if acc.hour == hour => {
            acc.samples += 1;
            fold(acc, value);
        }
        _ => {
            let mut acc = HourAcc { hour, sum: 0.0, samples: 1, max: f64::MIN };
            fold(&mut acc, value);
            hours.push(acc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 1_790_812_800; // 2026-10-01T00:00:00Z

    fn one(collector: &mut Collector, role: Role) -> usize {
        collector.series_id("s", || ("m".into(), role, vec![("UUID".into(), "GPU-1".into())]))
    }

    #[test]
    fn a_gauge_sample_on_the_hour_starts_the_next_hour() {
        // Every 30 s from H to H+2h inclusive: 1.0 before H+1h, 0.0 from H+1h on. Hour H has
        // 120 samples of 1.0 (mean exactly 1); hour H+1 has 120 zeros; H+2 one zero. A closed
        // window would have given hour H 121 samples and a mean of 120/121.
        let mut c = Collector::new(H, H + 3 * 3600);
        let id = one(&mut c, Role::EngineActive);
        for k in 0..=240 {
            let t = H + 30 * k;
            assert_eq!(c.observe(id, t * 1000, if t < H + 3600 { 1.0 } else { 0.0 }), Observed::Kept);
        }
        let hours = &c.series[id].hours;
        assert_eq!(hours.len(), 3);
        assert_eq!((hours[0].samples, hours[0].sum / f64::from(hours[0].samples)), (120, 1.0));
        assert_eq!((hours[1].samples, hours[1].sum), (120, 0.0));
        assert_eq!((hours[2].hour, hours[2].samples), (H + 7200, 1));
        assert_eq!(c.sample_interval(), Some(30.0));
    }

    #[test]
    fn counter_increases_go_to_the_hour_their_interval_ends_in_and_survive_resets() {
        // Samples at H-30 s (10), H (15), H+1800 (40), H+3600 (50), H+3630 (5, a reset):
        // hour H-1h gains 5 (outside the window, dropped); hour H gains 25 + 10 = 35;
        // hour H+1 gains 5 after the reset.
        let mut c = Collector::new(H, H + 2 * 3600);
        let id = one(&mut c, Role::Requests);
        for (t, v) in [(H - 30, 10.0), (H, 15.0), (H + 1800, 40.0), (H + 3600, 50.0), (H + 3630, 5.0)] {
            c.observe(id, t * 1000, v);
        }
        let hours: Vec<(i64, f64)> = c.series[id].hours.iter().map(|h| (h.hour, h.sum)).collect();
        assert_eq!(hours, vec![(H, 35.0), (H + 3600, 5.0)]);
    }

    #[test]
    fn percent_is_scaled_sentinels_and_repeats_are_refused() {
        let mut c = Collector::new(H, H + 3600);
        let id = one(&mut c, Role::UtilPercent);
        assert_eq!(c.observe(id, H * 1000, 55.0), Observed::Kept);
        assert_eq!(c.observe(id, H * 1000, 56.0), Observed::NotNewer);
        assert_eq!(c.observe(id, H * 1000 + 30_000, 9_223_372_036_854_775_794.0), Observed::Invalid);
        assert_eq!(c.observe(id, H * 1000 + 60_000, f64::NAN), Observed::Invalid);
        assert!((c.series[id].hours[0].sum - 0.55).abs() < 1e-12);
        assert_eq!(c.invalid_samples, 2);
    }
}
