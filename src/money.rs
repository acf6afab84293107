//! Exact money: integer micro-dollars, and how people and scripts see them.
//!
//! Split cost facts are kept in nano-dollars: AWS writes them as doubles with many decimals,
//! and rounding millions of rows to the micro-dollar drifts measurably (about a cent a month
//! at demo scale, measured), while nano-dollars keep a large month within half a cent.

/// Micro-dollars in one US dollar.
pub const MICROS_PER_USD: i64 = 1_000_000;

/// Nano-dollars in one US dollar.
pub const NANOS_PER_USD: i64 = 1_000_000_000;

/// Rounds a dollar amount to the nearest nano-dollar.
pub fn nanos_from_usd(usd: f64) -> i64 {
    (usd * NANOS_PER_USD as f64).round() as i64
}

/// Nano-dollars to micro-dollars, half away from zero (for display and totals).
pub fn micros_from_nanos(nanos: i64) -> i64 {
    let rounded = (nanos.unsigned_abs() + 500) / 1000;
    if nanos < 0 { -(rounded as i64) } else { rounded as i64 }
}

/// Rounds a dollar amount (as CUR's doubles carry it) to the nearest micro-dollar.
pub fn micros_from_usd(usd: f64) -> i64 {
    (usd * MICROS_PER_USD as f64).round() as i64
}

/// Rounds nano-dollar amounts to micro-dollars so that they add up to `total_micros`
/// exactly, by largest remainder: amounts are rounded down, and the micro-dollars still
/// missing go one each to the largest remainders (ties to the earlier amount). Used where a
/// report promises that its rows add up to the bill.
pub fn apportion_micros(nanos: &[i64], total_micros: i64) -> Vec<i64> {
    apportion(nanos, 1000, total_micros)
}

/// Rounds `values` down to whole `unit`s, then hands out what is still missing to reach
/// `total` (in units) one each to the largest remainders (ties to the earlier value).
fn apportion(values: &[i64], unit: i64, total: i64) -> Vec<i64> {
    let mut parts: Vec<i64> = values.iter().map(|n| n.div_euclid(unit)).collect();
    if parts.is_empty() {
        return parts;
    }
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[b].rem_euclid(unit).cmp(&values[a].rem_euclid(unit)).then(a.cmp(&b)));
    // What is missing goes round the amounts in that order (taken back in the reverse order
    // when there is too much): whole rounds at once, then one each for the rest, so the work
    // does not grow with the size of the difference.
    let missing = total - parts.iter().sum::<i64>();
    let n = order.len() as i64;
    let (rounds, rest) = (missing / n, (missing % n).unsigned_abs() as usize);
    for m in parts.iter_mut() {
        *m += rounds;
    }
    let step = missing.signum();
    let takers: Box<dyn Iterator<Item = &usize>> =
        if step > 0 { Box::new(order.iter()) } else { Box::new(order.iter().rev()) };
    for &i in takers.take(rest) {
        parts[i] += step;
    }
    parts
}

/// `total` divided in proportion to `weights` by largest remainder: each part is
/// `total × weight / Σ weights` rounded down, and the units left over go one each to the
/// largest remainders (ties to the earlier), so the parts add up to `total` exactly and none
/// has the other sign. Weights must not be negative; all zero (or none) gives no parts.
pub fn apportion_by_weight(total: i64, weights: &[i128]) -> Option<Vec<i64>> {
    let sum: i128 = weights.iter().sum();
    if sum <= 0 || weights.iter().any(|w| *w < 0) {
        return None;
    }
    let (sign, magnitude) = (total.signum() as i128, i128::from(total).abs());
    let mut parts: Vec<i128> = weights.iter().map(|w| magnitude * w / sum).collect();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| {
        (magnitude * weights[b] % sum).cmp(&(magnitude * weights[a] % sum)).then(a.cmp(&b))
    });
    let left = magnitude - parts.iter().sum::<i128>();
    for &i in order.iter().take(left as usize) {
        parts[i] += 1;
    }
    Some(parts.into_iter().map(|p| (sign * p) as i64).collect())
}

/// Dollars as a decimal number for JSON and CSV (`12340.501234`), exact.
pub fn usd_decimal(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let abs = micros.unsigned_abs();
    format!("{sign}{}.{:06}", abs / 1_000_000, abs % 1_000_000)
}

/// Dollars for people: `$12,340.50`, rounded half away from zero to the cent.
pub fn format_usd(micros: i64) -> String {
    format_cents(micros < 0, (micros.unsigned_abs() + 5_000) / 10_000)
}

/// Nano-dollars for people, rounded once, straight to the cent (never through micro-dollars:
/// rounding twice turns $0.0049995 into $0.01).
pub fn format_usd_nanos(nanos: i64) -> String {
    Cents::from_nanos(nanos).usd()
}

fn format_cents(negative: bool, cents: u64) -> String {
    let dollars = (cents / 100).to_string();
    let mut grouped = String::with_capacity(dollars.len() + dollars.len() / 3);
    for (i, digit) in dollars.chars().enumerate() {
        if i > 0 && (dollars.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    let sign = if negative && cents > 0 { "-" } else { "" };
    format!("{sign}${grouped}.{:02}", cents % 100)
}

/// Parses a decimal string as Cost Explorer writes it (`"12.3456789012"`, `"-0.07"`,
/// `"1.5E-7"`) into nano-dollars, exactly: digits beyond the ninth decimal are rounded once,
/// half away from zero. `None` for anything that is not a number or does not fit.
pub fn nanos_from_decimal(text: &str) -> Option<i64> {
    let text = text.trim();
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i32>().ok()?),
        None => (text, 0),
    };
    let (negative, digits) = match mantissa.as_bytes().first()? {
        b'-' => (true, &mantissa[1..]),
        b'+' => (false, &mantissa[1..]),
        _ => (false, mantissa),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit())
        || !(-40..=20).contains(&exponent)
    {
        return None;
    }
    // value = digits × 10^(exponent − fraction length); nanos = value × 10^9.
    let all: String = whole.chars().chain(fraction.chars()).collect();
    let all = all.trim_start_matches('0');
    let scale = exponent - fraction.len() as i32 + 9;
    let mut value: i128 = if all.is_empty() { 0 } else { all.parse().ok()? };
    if scale >= 0 {
        value = value.checked_mul(10i128.checked_pow(scale as u32)?)?;
    } else {
        let divisor = 10i128.checked_pow((-scale) as u32).unwrap_or(i128::MAX);
        value = (value + divisor / 2) / divisor;
    }
    let value = i64::try_from(value).ok()?;
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_decimals_keep_every_nano_unit_and_read_back_the_same() {
        for (nanos, text) in [(1_234_567_890_123, "1234.567890123"), (-5, "-0.000000005"), (0, "0.000000000")]
        {
            assert_eq!(Nanos(nanos).exact(), text);
            assert_eq!(nanos_from_decimal(text), Some(nanos));
        }
    }

    #[test]
    fn cost_explorer_decimals_become_exact_nanos() {
        assert_eq!(nanos_from_decimal("12.3456789012"), Some(12_345_678_901));
        assert_eq!(nanos_from_decimal("0.0101516483"), Some(10_151_648));
        assert_eq!(nanos_from_decimal("-0.07"), Some(-70_000_000));
        assert_eq!(nanos_from_decimal("1.5E-7"), Some(150));
        assert_eq!(nanos_from_decimal("2e3"), Some(2_000_000_000_000));
        assert_eq!(nanos_from_decimal("0.0000000005"), Some(1), "half a nano rounds away from zero");
        assert_eq!(nanos_from_decimal("-0.0000000005"), Some(-1));
        assert_eq!(nanos_from_decimal("0.00000000049"), Some(0));
        assert_eq!(nanos_from_decimal("7"), Some(7_000_000_000));
        assert_eq!(nanos_from_decimal("0"), Some(0));
        assert_eq!(nanos_from_decimal(""), None);
        assert_eq!(nanos_from_decimal("."), None);
        assert_eq!(nanos_from_decimal("1,5"), None);
        assert_eq!(nanos_from_decimal("abc"), None);
        assert_eq!(nanos_from_decimal("99999999999999999999"), None, "does not fit");
    }

    #[test]
    fn formats_for_people_and_scripts() {
        assert_eq!(format_usd(12_340_504_999), "$12,340.50");
        assert_eq!(format_usd(12_340_505_000), "$12,340.51");
        assert_eq!(format_usd(-1_500_000), "-$1.50");
        assert_eq!(format_usd(999), "$0.00");
        assert_eq!(format_usd(1_000_000_000_000), "$1,000,000.00");
        // Rounded once: 0.0049995 is under half a cent.
        assert_eq!(format_usd_nanos(4_999_500), "$0.00");
        assert_eq!(format_usd(micros_from_nanos(4_999_500)), "$0.01", "what rounding twice gave");
        assert_eq!(format_usd_nanos(-12_345_000_000), "-$12.35");
        assert_eq!(usd_decimal(-1_234_567), "-1.234567");
        assert_eq!(usd_decimal(42), "0.000042");
        assert_eq!(micros_from_usd(32.7726), 32_772_600);
        assert_eq!(nanos_from_usd(0.0000125), 12_500);
        assert_eq!(micros_from_nanos(12_500), 13);
        assert_eq!(micros_from_nanos(-12_500), -13);
        assert_eq!(micros_from_nanos(12_499), 12);
    }

    #[test]
    fn apportioned_rows_add_up_to_the_total() {
        // 1.4 + 1.4 + 1.2 µ$ = 4.0: rounded one by one they make 3; the largest remainders
        // (the first two, tie to the earlier) take the missing micro-dollar.
        assert_eq!(apportion_micros(&[1_400, 1_400, 1_200], 4), vec![2, 1, 1]);
        assert_eq!(apportion_micros(&[1_400, 1_400, 1_200], 3), vec![1, 1, 1]);
        assert_eq!(apportion_micros(&[-1_500, 2_600], 1), vec![-2, 3]);
        assert_eq!(apportion_micros(&[], 0), Vec::<i64>::new());
        // A difference far larger than the rounding (rollups from an older compute): whole
        // rounds at once, and it still adds up. 10 micros missing over 3: 3 each, and the
        // one left to the largest remainder (the third, .9); 10 too many: −3 each and the
        // extra one from the smallest remainder (the first, .1).
        assert_eq!(apportion_micros(&[1_100, 2_500, 3_900], 16), vec![4, 5, 7]);
        assert_eq!(apportion_micros(&[1_100, 2_500, 3_900], -4), vec![-3, -1, 0]);
        let huge = apportion_micros(&[5_000, 7_000], 100_000_000_000);
        assert_eq!(huge.iter().sum::<i64>(), 100_000_000_000);
    }

    #[test]
    fn a_pool_divided_by_weight_adds_up_and_is_never_negative() {
        // 100 by 1 : 1 : 1 → 33.33 each: 33, 33, 33 and the one left goes to the first (ties).
        assert_eq!(apportion_by_weight(100, &[1, 1, 1]), Some(vec![34, 33, 33]));
        // 10 by 6 : 3 : 1 → 6, 3, 1 exactly; −10 the same, negated.
        assert_eq!(apportion_by_weight(10, &[6, 3, 1]), Some(vec![6, 3, 1]));
        assert_eq!(apportion_by_weight(-10, &[6, 3, 1]), Some(vec![-6, -3, -1]));
        // 7 by 1 : 2 : 4 → 1, 2, 4; 5 by 1 : 2 : 4 → 0.714, 1.429, 2.857: floors 0, 1, 2 and
        // the two left go to the largest remainders (.857, then .714).
        assert_eq!(apportion_by_weight(5, &[1, 2, 4]), Some(vec![1, 1, 3]));
        assert_eq!(apportion_by_weight(5, &[0, 0]), None);
        assert_eq!(apportion_by_weight(5, &[2, -1]), None);
    }

    #[test]
    fn nanos_round_once_for_scripts_and_once_for_people() {
        // 1,234.5678915 USD: half a micro-dollar up for scripts, to the cent for people.
        let amount = Nanos(1_234_567_891_500);
        assert_eq!(
            (amount.micros(), amount.decimal(), amount.usd()),
            (1_234_567_892, "1234.567892".into(), "$1,234.57".into())
        );
        // $0.0049995 is not a cent: rounding through the micro-dollar ($0.005000) would say so.
        assert_eq!(Nanos(4_999_500).usd(), "$0.00");
        assert_eq!((Nanos(-4_999_500).decimal(), Nanos(-1_500).micros()), ("-0.005000".into(), -2));
        assert_eq!(Nanos::from_micros(-7), Nanos(-7_000));
        assert_eq!(Nanos::from_cents(Cents(-123)), Nanos(-1_230_000_000));
    }
}

/// An exact amount in nano-dollars: what a report cell carries from the store to the page, the
/// CSV, the XLSX and the JSON, each rounding it once by its own rule (to the micro-dollar for
/// scripts, to the cent for people). Floats are taken from it only for charts and ratios.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(pub i64);

impl Nanos {
    pub fn from_micros(micros: i64) -> Nanos {
        Nanos(micros * 1000)
    }

    pub fn from_cents(cents: Cents) -> Nanos {
        Nanos(cents.0 * 10_000_000)
    }

    /// Rounds a dollar amount computed in floating point (a live join) to the nano-dollar.
    pub fn from_usd(usd: f64) -> Nanos {
        Nanos(nanos_from_usd(usd))
    }

    /// Rounded half away from zero to the micro-dollar.
    pub fn micros(self) -> i64 {
        micros_from_nanos(self.0)
    }

    /// Dollars as a float, for charts and ratios only.
    pub fn usd_f64(self) -> f64 {
        self.0 as f64 / NANOS_PER_USD as f64
    }

    /// `12340.501234`: the micro-dollar decimal scripts read (CSV), rounded once.
    pub fn decimal(self) -> String {
        usd_decimal(self.micros())
    }

    /// `$12,340.50` for people, rounded once straight to the cent.
    pub fn usd(self) -> String {
        format_usd_nanos(self.0)
    }

    /// `12340.501234567`: every nano-unit, for files whose sums must be exact (FOCUS out).
    pub fn exact(self) -> String {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        format!("{sign}{}.{:09}", abs / NANOS_PER_USD as u64, abs % NANOS_PER_USD as u64)
    }
}

impl From<i64> for Nanos {
    fn from(nanos: i64) -> Nanos {
        Nanos(nanos)
    }
}

impl From<i64> for Micros {
    fn from(micros: i64) -> Micros {
        Micros(micros)
    }
}

impl Nanos {
    /// Rounded half away from zero to the micro-dollar, as a [`Micros`].
    pub fn rounded_micros(self) -> Micros {
        Micros(self.micros())
    }
}

/// An exact amount in micro-dollars: what the bill's own totals are kept in (CUR's line
/// costs rounded once to the micro-dollar), beside the split cost's nano-dollars ([`Nanos`])
/// in the same rollup row; the types keep the two units from being added by mistake.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Deserialize)]
#[serde(transparent)]
pub struct Micros(pub i64);

impl Micros {
    /// The same amount in nano-dollars (exact).
    pub fn nanos(self) -> Nanos {
        Nanos(self.0 * 1000)
    }

    /// `12340.501234`, exact.
    pub fn decimal(self) -> String {
        usd_decimal(self.0)
    }

    /// `$12,340.50` for people, rounded half away from zero to the cent.
    pub fn usd(self) -> String {
        format_usd(self.0)
    }

    /// Dollars as a float, for charts and ratios only.
    pub fn usd_f64(self) -> f64 {
        self.0 as f64 / MICROS_PER_USD as f64
    }
}

/// Sums, differences and negation within one unit; crossing units goes through
/// [`Micros::nanos`] or [`Nanos::rounded_micros`], never a bare `* 1000`.
macro_rules! amount_arithmetic {
    ($($unit:ident),+) => {$(
        impl std::ops::Add for $unit {
            type Output = $unit;
            fn add(self, other: $unit) -> $unit {
                $unit(self.0 + other.0)
            }
        }

        impl std::ops::Sub for $unit {
            type Output = $unit;
            fn sub(self, other: $unit) -> $unit {
                $unit(self.0 - other.0)
            }
        }

        impl std::ops::Neg for $unit {
            type Output = $unit;
            fn neg(self) -> $unit {
                $unit(-self.0)
            }
        }

        impl std::ops::AddAssign for $unit {
            fn add_assign(&mut self, other: $unit) {
                self.0 += other.0;
            }
        }

        impl std::iter::Sum for $unit {
            fn sum<I: Iterator<Item = $unit>>(amounts: I) -> $unit {
                $unit(amounts.map(|a| a.0).sum())
            }
        }

        impl serde::Serialize for $unit {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_i64(self.0)
            }
        }
    )+};
}
amount_arithmetic!(Nanos, Micros);

/// An amount in cents, the smallest unit an invoice shows. JSON and CSV carry it as an exact
/// decimal string (`"1234.50"`, `"-0.07"`), never as a float.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cents(pub i64);

impl Cents {
    /// Nano-dollars rounded once to the cent, half away from zero.
    pub fn from_nanos(nanos: i64) -> Cents {
        let rounded = (nanos.unsigned_abs() + 5_000_000) / 10_000_000;
        Cents(if nanos < 0 { -(rounded as i64) } else { rounded as i64 })
    }

    /// `self × ppm / 1,000,000`, rounded half away from zero (tax on a subtotal).
    pub fn times_ppm(self, ppm: i64) -> Cents {
        let scaled = i128::from(self.0) * i128::from(ppm);
        let rounded =
            if scaled >= 0 { (scaled + 500_000) / 1_000_000 } else { (scaled - 500_000) / 1_000_000 };
        Cents(rounded as i64)
    }

    /// `1234.50`: the decimal dollars, exact.
    pub fn decimal(self) -> String {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        format!("{sign}{}.{:02}", abs / 100, abs % 100)
    }

    /// `$1,234.50` (`-$0.07` below zero), for people.
    pub fn usd(self) -> String {
        format_cents(self.0 < 0, self.0.unsigned_abs())
    }

    /// The amount in `currency` for people: `$1,234.50` in dollars, `EUR 1,234.50` (`-EUR
    /// 0.07`) in any other currency, whose hundredths these cents are.
    pub fn money(self, currency: &str) -> String {
        let dollars = self.usd();
        match currency {
            "USD" | "" => dollars,
            code => dollars.replacen('$', &format!("{code} "), 1),
        }
    }
}

impl std::ops::Add for Cents {
    type Output = Cents;
    fn add(self, other: Cents) -> Cents {
        Cents(self.0 + other.0)
    }
}

impl std::ops::Sub for Cents {
    type Output = Cents;
    fn sub(self, other: Cents) -> Cents {
        Cents(self.0 - other.0)
    }
}

impl std::ops::Neg for Cents {
    type Output = Cents;
    fn neg(self) -> Cents {
        Cents(-self.0)
    }
}

impl std::iter::Sum for Cents {
    fn sum<I: Iterator<Item = Cents>>(iter: I) -> Cents {
        Cents(iter.map(|c| c.0).sum())
    }
}

impl std::str::FromStr for Cents {
    type Err = String;

    /// A decimal amount with at most two decimals: `12`, `12.5`, `-0.07`.
    fn from_str(text: &str) -> Result<Cents, String> {
        let bad = || format!("{text:?} is not an amount with at most two decimals");
        let (negative, digits) = match text.trim().strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.trim()),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        if whole.is_empty()
            || fraction.len() > 2
            || !(whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit()))
        {
            return Err(bad());
        }
        let whole: i64 = whole.parse().map_err(|_| bad())?;
        let fraction: i64 = format!("{fraction:0<2}").parse().map_err(|_| bad())?;
        let cents = whole.checked_mul(100).and_then(|w| w.checked_add(fraction)).ok_or_else(bad)?;
        Ok(Cents(if negative { -cents } else { cents }))
    }
}

impl serde::Serialize for Cents {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.decimal())
    }
}

impl<'de> serde::Deserialize<'de> for Cents {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Cents, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Rounds nano-dollar amounts to cents so that they add up to `total` exactly, by largest
/// remainder (as [`apportion_micros`] does for micro-dollars): the one rounding rule of an
/// invoice's lines.
pub fn apportion_cents(nanos: &[i64], total: Cents) -> Vec<Cents> {
    apportion(nanos, 10_000_000, total.0).into_iter().map(Cents).collect()
}
