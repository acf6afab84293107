//! Commitment simulation (issue 42): what an hourly commitment (a Savings Plan's dollars an
//! hour, a reservation's instances) would have done against a series of hours of
//! commitment-eligible usage, and the commitment that saves the most.
//!
//! A commitment of `c` dollars an hour at a discount `d` (its rate is the on-demand rate ×
//! (1 − d)) covers, each hour, usage worth up to `c / (1 − d)` at on-demand prices. In an hour
//! whose eligible usage costs `x` on demand:
//! - **used** = min(c, x × (1 − d)): the commitment spent;
//! - **cost** = c + (x − used / (1 − d)): the whole commitment, and the rest on demand;
//! - **savings** = x − cost = used / (1 − d) − c (negative when most of `c` goes unused).
//!
//! Over the hours: **coverage** = Σ used / (1 − d) ÷ Σ x (the share of eligible usage the
//! commitment pays for), **utilization** = Σ used ÷ (c × hours), **net savings** = Σ savings,
//! a month's = net × 730 ÷ hours. **Break-even** is the months of the covered usage, at
//! on-demand prices, that the whole term's commitment costs: `c × 730 × term months ÷
//! (covered on-demand a month)` (8.4 of 12 at a 30 % discount fully used).
//!
//! The best commitment maximizes net savings. Net savings rise with `c` while more than
//! (1 − d) of the hours use all of it, so the best is the `d` quantile of the hours'
//! discounted usage `x × (1 − d)`; [`best`] checks every hour's value as a candidate (net
//! savings are piecewise linear between them), from sorted values and prefix sums.
//!
//! To avoid committing to a peak that has passed, [`advise`] takes the lower of the best
//! commitments over a short and a long lookback (what Azure's reservation recommendations do),
//! and simulates it hour by hour over the long one.

/// Hours in a month, as AWS and Azure count them for commitments (8,760 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;

/// What a commitment did over a series of hours.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Outcome {
    /// Dollars an hour at the commitment's rate.
    pub hourly_commitment: f64,
    pub hours: usize,
    /// Σ eligible usage at on-demand prices.
    pub on_demand: f64,
    /// Σ commitment spent.
    pub used: f64,
    pub coverage: f64,
    pub utilization: f64,
    pub net_savings: f64,
    pub monthly_net_savings: f64,
    /// Months of covered usage at on-demand prices the term's commitment costs; `None` when
    /// it covers nothing.
    pub break_even_months: Option<f64>,
}

/// A commitment's amortized cost an hour: its one-time payment spread evenly over the term's
/// hours, plus its recurring payment an hour (FOCUS: "the amortization of a commitment
/// discount's purchase applies evenly ... over each charge period of the term").
pub fn amortized_hourly(one_time: f64, recurring_per_hour: f64, term_hours: u32) -> f64 {
    one_time / f64::from(term_hours.max(1)) + recurring_per_hour
}

/// One hour of a commitment of `commitment` dollars (at its rate) against eligible usage worth
/// `eligible` at the commitment's rate: (used, unused, beyond it), as FOCUS's `Used` and
/// `Unused` rows and the usage left to on-demand rates.
pub fn hour(commitment: f64, eligible: f64) -> (f64, f64, f64) {
    let used = commitment.min(eligible);
    (used, commitment - used, eligible - used)
}

/// Each hour's eligible usage (at on-demand prices) that `commitment` at `discount` leaves
/// uncovered: what a commitment applied after it can still cover. Less than a billionth of
/// the currency is the rates' rounding, not usage: none.
pub fn uncovered(on_demand: &[f64], discount: f64, commitment: f64) -> Vec<f64> {
    let keep = 1.0 - discount;
    on_demand
        .iter()
        .map(|&x| hour(commitment, x * keep).2 / keep)
        .map(|left| if left < 1e-9 { 0.0 } else { left })
        .collect()
}

/// Simulates `commitment` hour by hour against `on_demand` (each hour's eligible usage at
/// on-demand prices) at `discount` (0 ≤ d < 1), for a term of `term_months`.
pub fn simulate(on_demand: &[f64], discount: f64, commitment: f64, term_months: u32) -> Outcome {
    let keep = 1.0 - discount;
    let (mut total, mut used, mut savings) = (0.0, 0.0, 0.0);
    for &x in on_demand {
        let (spent, _, _) = hour(commitment, x * keep);
        total += x;
        used += spent;
        savings += spent / keep - commitment;
    }
    outcome(on_demand.len(), (total, used, savings), discount, commitment, term_months)
}

fn outcome(
    hours: usize,
    (total, used, savings): (f64, f64, f64),
    discount: f64,
    commitment: f64,
    term_months: u32,
) -> Outcome {
    let covered = used / (1.0 - discount);
    let per_month = HOURS_PER_MONTH / hours.max(1) as f64;
    Outcome {
        hourly_commitment: commitment,
        hours,
        on_demand: total,
        used,
        coverage: if total > 0.0 { covered / total } else { 0.0 },
        utilization: if commitment > 0.0 && hours > 0 { used / (commitment * hours as f64) } else { 0.0 },
        net_savings: savings,
        monthly_net_savings: savings * per_month,
        break_even_months: (covered > 0.0)
            .then(|| commitment * HOURS_PER_MONTH * f64::from(term_months) / (covered * per_month)),
    }
}

/// The commitment with the most net savings over `on_demand` at `discount` (0 when none
/// saves anything), and its outcome; every hour's discounted usage is a candidate.
pub fn best(on_demand: &[f64], discount: f64, term_months: u32) -> Outcome {
    let keep = 1.0 - discount;
    let mut values: Vec<f64> = on_demand.iter().map(|x| x * keep).collect();
    values.sort_by(f64::total_cmp);
    let hours = values.len();
    let total: f64 = on_demand.iter().sum();
    // Σ min(c, y) for c = values[i]: the values below it, and c for it and every one above.
    let mut below = 0.0;
    let mut chosen = (0.0, 0.0, 0.0);
    for (i, &c) in values.iter().enumerate() {
        let used = below + c * (hours - i) as f64;
        let savings = used / keep - c * hours as f64;
        if savings > chosen.2 + 1e-12 {
            chosen = (c, used, savings);
        }
        below += c;
    }
    let (commitment, used, savings) = chosen;
    outcome(hours, (total, used, savings), discount, commitment, term_months)
}

/// Advice from two lookbacks: the best commitment over the last `short` hours and over the
/// last `long`, the lower of the two simulated over the long one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Advice {
    pub short: Outcome,
    pub long: Outcome,
    /// The lower commitment, hour by hour over the long lookback.
    pub chosen: Outcome,
    /// The lookback (hours) whose choice was taken.
    pub lookback_hours: usize,
}

/// The best commitment in whole units of `unit` (one reserved instance's rate an hour): net
/// savings are concave in the commitment, so it is the whole number of units just below or
/// just above [`best`]'s, whichever saves more (the fewer when equal).
pub fn best_in_units(on_demand: &[f64], discount: f64, term_months: u32, unit: f64) -> Outcome {
    let free = best(on_demand, discount, term_months);
    if unit <= 0.0 {
        return free;
    }
    let units = free.hourly_commitment / unit;
    // An hour of n instances is n units to within the rates' rounding: n, not n - 1.
    let (below, above) = if (units - units.round()).abs() < 1e-9 {
        (units.round(), units.round())
    } else {
        (units.floor(), units.ceil())
    };
    let (fewer, more) = (
        simulate(on_demand, discount, below * unit, term_months),
        simulate(on_demand, discount, above * unit, term_months),
    );
    if more.net_savings > fewer.net_savings + 1e-12 { more } else { fewer }
}

pub fn advise(on_demand: &[f64], discount: f64, lookbacks: (usize, usize), term_months: u32) -> Advice {
    advise_with(on_demand, discount, lookbacks, term_months, &|hours| best(hours, discount, term_months))
}

/// [`advise`] in whole units of `unit` ([`best_in_units`]): a reservation's whole instances.
pub fn advise_in_units(
    on_demand: &[f64],
    discount: f64,
    lookbacks: (usize, usize),
    term_months: u32,
    unit: f64,
) -> Advice {
    let best = |hours: &[f64]| best_in_units(hours, discount, term_months, unit);
    advise_with(on_demand, discount, lookbacks, term_months, &best)
}

fn advise_with(
    on_demand: &[f64],
    discount: f64,
    (short, long): (usize, usize),
    term_months: u32,
    best: &dyn Fn(&[f64]) -> Outcome,
) -> Advice {
    let tail = |hours: usize| &on_demand[on_demand.len().saturating_sub(hours)..];
    let (short_best, long_best) = (best(tail(short)), best(tail(long)));
    let (commitment, lookback_hours) = if short_best.hourly_commitment < long_best.hourly_commitment {
        (short_best.hourly_commitment, tail(short).len())
    } else {
        (long_best.hourly_commitment, tail(long).len())
    };
    Advice {
        short: short_best,
        long: long_best,
        chosen: simulate(tail(long), discount, commitment, term_months),
        lookback_hours,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reservation_is_bought_in_whole_instances() {
        // An instance at $1 On-Demand, $0.60 reserved (40 % off); 20 hours of 1.5 instances,
        // then 10 of one. A free commitment takes 1.5 instances ($0.90: 40 - 27 = 13 saved).
        // In whole instances: one saves 30 - 0.6 × 30 = 12; two save (20 × 1.5 + 10) - 1.2 ×
        // 30 = 40 - 36 = 4. So one.
        let hours: Vec<f64> = (0..30).map(|h| if h < 20 { 1.5 } else { 1.0 }).collect();
        assert!((best(&hours, 0.4, 12).hourly_commitment - 0.9).abs() < 1e-12);
        let whole = best_in_units(&hours, 0.4, 12, 0.6);
        assert!(
            (whole.hourly_commitment - 0.6).abs() < 1e-12 && (whole.net_savings - 12.0).abs() < 1e-9,
            "{whole:?}"
        );
        assert!((simulate(&hours, 0.4, 1.2, 12).net_savings - 4.0).abs() < 1e-9);
        // Three instances an hour at rates that do not divide exactly are three, not two.
        let rate = 3.5166;
        let three = vec![3.0 * 5.672; 48];
        let bought = best_in_units(&three, 1.0 - rate / 5.672, 12, rate);
        assert!((bought.hourly_commitment / rate - 3.0).abs() < 1e-9, "{bought:?}");
    }

    #[test]
    fn what_a_commitment_leaves_is_what_it_does_not_cover() {
        // $0.60 an hour at 40 % off covers $1 of on-demand usage an hour: of $1.50 it leaves
        // 0.50, of $0.80 nothing, of nothing nothing.
        let left = uncovered(&[1.5, 0.8, 0.0], 0.4, 0.6);
        assert!(left.iter().zip([0.5, 0.0, 0.0]).all(|(l, e)| (l - e).abs() < 1e-12), "{left:?}");
        // Three reserved instances at $3.5166 (of $5.672 On-Demand) cover three instances'
        // hour whole, though the rates do not divide exactly: nothing is left for the next.
        let three = 3.0 * 5.672;
        assert_eq!(uncovered(&[three], 1.0 - 3.5166 / 5.672, 3.0 * 3.5166), vec![0.0]);
    }

    #[test]
    fn a_commitment_hour_by_hour_as_worked_by_hand() {
        // Three hours of $10 on demand and one idle, at a 50 % discount: $5 an hour covers the
        // busy hours whole. Used 15 of 20 committed (75 %); cost 4 × 5 = 20 against 30 on
        // demand: 10 saved, covering all of it.
        let hours = [10.0, 10.0, 10.0, 0.0];
        let o = simulate(&hours, 0.5, 5.0, 12);
        assert_eq!((o.on_demand, o.used, o.net_savings), (30.0, 15.0, 10.0));
        assert_eq!((o.coverage, o.utilization), (1.0, 0.75));
        // A month of such hours (730 / 4 of them) saves 1,825; the year's commitment (5 × 730 ×
        // 12 = 43,800) costs what 8 months of the covered usage (30 × 730 / 4 = 5,475 a month)
        // would on demand.
        assert_eq!(o.monthly_net_savings, 1825.0);
        assert_eq!(o.break_even_months, Some(8.0));
        // Half of it: half the usage covered, 75 % used (not in the idle hour), 3 × 2.5 saved
        // less the idle hour's 2.5; twice: 10 unused, 5 lost.
        let half = simulate(&hours, 0.5, 2.5, 12);
        assert_eq!((half.coverage, half.utilization, half.net_savings), (0.5, 0.75, 5.0));
        let double = simulate(&hours, 0.5, 10.0, 12);
        assert_eq!((double.utilization, double.net_savings), (0.375, -10.0));
        assert_eq!(simulate(&hours, 0.5, 0.0, 12).break_even_months, None);
    }

    /// The FOCUS specification's commitment discount scenarios
    /// (`specification/data/commitment_discount_scenarios/` in FOCUS_Spec): a one-year,
    /// spend-based commitment of $1.00 an hour bought on 2023-01-01.
    #[test]
    fn the_focus_specifications_commitment_scenarios_come_out() {
        let term_hours = 24 * 365;
        // Purchase scenarios 1-3: all upfront (8,760.00 once), no upfront (1.00 an hour),
        // partial (4,380.00 once and 0.50 an hour) each amortize to 1.00 an hour.
        assert_eq!(amortized_hourly(8760.0, 0.0, term_hours), 1.0);
        assert_eq!(amortized_hourly(0.0, 1.0, term_hours), 1.0);
        assert_eq!(amortized_hourly(4380.0, 0.5, term_hours), 1.0);
        // Usage scenario 1: a resource consumes the whole 1.00 (a Used row of 1.00).
        assert_eq!(hour(1.0, 1.0), (1.0, 0.0, 0.0));
        // Scenario 2: nothing eligible runs (an Unused row of 1.00).
        assert_eq!(hour(1.0, 0.0), (0.0, 1.0, 0.0));
        // Scenario 3: 0.75 consumed (Used 0.75, Unused 0.25).
        assert_eq!(hour(1.0, 0.75), (0.75, 0.25, 0.0));
        // Scenario 4: 1.00 consumed and an overage billed at the standard rate, 0.50: the hour
        // costs 1.50 (its rows' EffectiveCost). At a 50 % discount, usage worth 2.50 on demand
        // is 1.25 at the commitment's rate: 1.00 covered, 0.25 beyond it, 0.50 on demand.
        assert_eq!(hour(1.0, 2.5 * 0.5), (1.0, 0.0, 0.25));
        let o = simulate(&[2.5], 0.5, 1.0, 12);
        assert_eq!(o.on_demand - o.net_savings, 1.5);
        assert_eq!((o.utilization, o.coverage), (1.0, 0.8));
    }

    #[test]
    fn the_best_commitment_is_the_discounts_quantile_of_the_hours() {
        // 100 hours using 1, 2, ..., 100 dollars on demand, at 27.5 % off: savings rise while
        // more than 72.5 of the hours use all of the commitment, up to the 28th hour's
        // 28 × 0.725 = 20.3 (72 hours above it).
        let hours: Vec<f64> = (1..=100).map(f64::from).collect();
        let chosen = best(&hours, 0.275, 12);
        assert!((chosen.hourly_commitment - 28.0 * 0.725).abs() < 1e-9, "{chosen:?}");
        // It is the hour-by-hour simulation's, and no other commitment saves more.
        let simulated = simulate(&hours, 0.275, chosen.hourly_commitment, 12);
        assert!((simulated.net_savings - chosen.net_savings).abs() < 1e-9);
        for step in 0..=800 {
            let other = simulate(&hours, 0.275, f64::from(step) * 0.1, 12);
            assert!(other.net_savings <= chosen.net_savings + 1e-9, "{other:?}");
        }
        // Nothing eligible, or no discount: commit to nothing.
        assert_eq!(best(&[0.0; 24], 0.3, 12).hourly_commitment, 0.0);
        assert_eq!(best(&hours, 0.0, 12).hourly_commitment, 0.0);
    }

    #[test]
    fn advice_takes_the_lower_of_the_short_and_long_lookbacks() {
        // Thirty days at $100 an hour, then seven at $40: the long lookback would commit to
        // the old level, the short one to the new; the advice takes the short one's 40 × 0.7
        // and simulates it over the long lookback (all used, savings on every hour).
        let hours: Vec<f64> =
            std::iter::repeat_n(100.0, 30 * 24).chain(std::iter::repeat_n(40.0, 7 * 24)).collect();
        let advice = advise(&hours, 0.3, (7 * 24, 30 * 24), 12);
        assert!((advice.short.hourly_commitment - 28.0).abs() < 1e-9);
        assert!((advice.long.hourly_commitment - 70.0).abs() < 1e-9);
        assert_eq!(advice.lookback_hours, 7 * 24);
        assert!((advice.chosen.hourly_commitment - 28.0).abs() < 1e-9);
        assert_eq!(advice.chosen.hours, 30 * 24);
        assert!((advice.chosen.utilization - 1.0).abs() < 1e-12);
        // Each hour saves 40 - 28 = 12.
        assert!((advice.chosen.net_savings - 12.0 * 720.0).abs() < 1e-6);
    }

    /// `scripts/bench-commitments`: a year of hours (8,760) for 30 families, each family's
    /// best commitment over a short and a long lookback and the chosen one simulated hour by
    /// hour, and every tenth of a dollar up to twice the best simulated too. Prints the time;
    /// no threshold.
    #[test]
    #[ignore]
    fn bench_a_year_of_hours() {
        let mut state = 7u64;
        let mut noise = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let families: Vec<Vec<f64>> = (0..30)
            .map(|f| {
                (0..8760)
                    .map(|h| {
                        (50.0 + f as f64) * (0.6 + 0.4 * ((h % 24) as f64 / 24.0)) * (0.8 + 0.4 * noise())
                    })
                    .collect()
            })
            .collect();
        let started = std::time::Instant::now();
        let mut simulations = 0usize;
        for hours in &families {
            let advice = advise(hours, 0.28, (7 * 24, 8760), 12);
            let ceiling = (advice.long.hourly_commitment * 2.0 * 10.0) as usize;
            for step in 0..ceiling {
                std::hint::black_box(simulate(std::hint::black_box(hours), 0.28, step as f64 / 10.0, 12));
            }
            simulations += ceiling + 1;
        }
        let seconds = started.elapsed().as_secs_f64();
        println!(
            "{{\"families\": {}, \"hours\": 8760, \"simulations\": {simulations}, \"seconds\": {seconds:.3}}}",
            families.len()
        );
        assert_eq!(families.len(), 30);
    }
}
