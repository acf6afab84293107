//! Exchange rates with the month they take effect: how a bill in one currency is shown in the
//! reporting currency. A rate is exact: the decimal as given, kept as parts per billion.

use crate::period::Period;

/// The currency every page and report converts to.
pub const REPORTING_CURRENCY: &str = "USD";

/// One version of a rate: `1 from_currency = rate to_currency` from `effective_from` on,
/// until a later version of the same pair.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct FxRate {
    pub from_currency: String,
    pub to_currency: String,
    /// `YYYY-MM`.
    pub effective_from: String,
    /// The rate as given (`1.0842`).
    pub rate: String,
    /// The rate in parts per billion (`1_084_200_000`).
    pub rate_ppb: i64,
    /// Where it came from: `cli`, or the file of reference rates.
    pub source: String,
    /// UTC epoch seconds.
    pub set_at: i64,
}

/// Why a rate is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FxError {
    #[error("{0:?} is not a currency code (three capital letters, ISO 4217)")]
    Currency(String),
    #[error("{0:?} is not a positive decimal rate")]
    Rate(String),
    #[error("a rate from {0} to {0} is always 1")]
    Same(String),
}

/// A currency as written (`eur`): its ISO 4217 code, three capital letters.
pub fn currency_code(text: &str) -> Result<String, FxError> {
    let text = text.trim().to_ascii_uppercase();
    (text.len() == 3 && text.bytes().all(|b| b.is_ascii_uppercase()))
        .then_some(text.clone())
        .ok_or(FxError::Currency(text))
}

impl FxRate {
    /// A rate as the command line or a file gives it, checked.
    pub fn new(
        from: &str,
        to: &str,
        rate: &str,
        effective_from: Period,
        source: &str,
    ) -> Result<FxRate, FxError> {
        let (from, to) = (currency_code(from)?, currency_code(to)?);
        if from == to {
            return Err(FxError::Same(from));
        }
        // Parts per billion of a decimal are its nano-units.
        let rate_ppb = crate::money::nanos_from_decimal(rate)
            .filter(|ppb| *ppb > 0)
            .ok_or_else(|| FxError::Rate(rate.to_string()))?;
        Ok(FxRate {
            from_currency: from,
            to_currency: to,
            effective_from: effective_from.to_string(),
            rate: rate.trim().to_string(),
            rate_ppb,
            source: source.to_string(),
            set_at: chrono::Utc::now().timestamp(),
        })
    }

    /// `amount` nano-units of `from_currency` in `to_currency`, rounded half away from zero.
    pub fn convert(&self, nanos: i64) -> i64 {
        let product = i128::from(nanos) * i128::from(self.rate_ppb);
        let half = if product < 0 { -500_000_000 } else { 500_000_000 };
        ((product + half) / 1_000_000_000) as i64
    }
}

impl FxRate {
    /// `nanos` of the reporting currency in the other currency of this pair: multiplied when
    /// the rate is quoted from the reporting currency (`1 USD = 0.9223 EUR`), divided when it
    /// is quoted to it (`1 EUR = 1.0842 USD`); rounded once, half away from zero.
    pub fn from_reporting(&self, nanos: i64) -> i64 {
        if self.from_currency == REPORTING_CURRENCY {
            return self.convert(nanos);
        }
        let numerator = i128::from(nanos) * 1_000_000_000;
        let divisor = i128::from(self.rate_ppb);
        let rounded = (numerator.abs() + divisor / 2) / divisor;
        (if numerator < 0 { -rounded } else { rounded }) as i64
    }

    /// `1 EUR = 1.0842 USD`.
    pub fn quote(&self) -> String {
        format!("1 {} = {} {}", self.from_currency, self.rate, self.to_currency)
    }
}

/// The rate an invoice in `currency` for `period` converts the chargeback (in the reporting
/// currency) with: the newest version in force for the month of either quote, from the
/// reporting currency to `currency` or back (the direct quote when both take effect the
/// same month). `Ok(None)` for the reporting currency itself; an error that says which rate
/// to set when there is none.
pub fn invoice_rate(rates: &[FxRate], currency: &str, period: &str) -> Result<Option<FxRate>, String> {
    if currency == REPORTING_CURRENCY {
        return Ok(None);
    }
    let direct = rate_for(rates, REPORTING_CURRENCY, currency, period).map(|r| (r, true));
    let inverse = rate_for(rates, currency, REPORTING_CURRENCY, period).map(|r| (r, false));
    direct
        .into_iter()
        .chain(inverse)
        .max_by(|(a, a_direct), (b, b_direct)| {
            (a.effective_from.as_str(), *a_direct).cmp(&(b.effective_from.as_str(), *b_direct))
        })
        .map(|(rate, _)| Some(rate.clone()))
        .ok_or_else(|| {
            format!(
                "no exchange rate between {REPORTING_CURRENCY} and {currency} in force for {period}: \
                 set one (gpuledger fx set {REPORTING_CURRENCY} {currency} RATE --from {period}) to invoice in {currency}"
            )
        })
}

/// The rate in force for `period` from `from` to `to`: the newest version taking effect at or
/// before it. `None` when no version does (the month says so and shows nothing converted).
pub fn rate_for<'a>(rates: &'a [FxRate], from: &str, to: &str, period: &str) -> Option<&'a FxRate> {
    rates
        .iter()
        .filter(|r| r.from_currency == from && r.to_currency == to && r.effective_from.as_str() <= period)
        .max_by(|a, b| a.effective_from.cmp(&b.effective_from))
}

/// How far a new rate may lie from the one in force before it, in percent, without a
/// confirmation.
pub const MAX_JUMP_PERCENT: i128 = 50;

/// Refuses a rate more than [`MAX_JUMP_PERCENT`] above or below the version of its pair in
/// force for its month (or the inverse pair's, inverted), saying both: `1000000` typed for
/// `1.0842` would multiply every euro bill a million times. A first rate has nothing to be
/// compared with.
pub fn refuse_a_jump(rates: &[FxRate], new: &FxRate) -> Result<(), String> {
    let month = new.effective_from.as_str();
    // The rate before, as parts per billion of `new`'s quote.
    let before = match rate_for(rates, &new.from_currency, &new.to_currency, month) {
        Some(same) => Some((same, i128::from(same.rate_ppb))),
        None => rate_for(rates, &new.to_currency, &new.from_currency, month)
            .map(|inverse| (inverse, 1_000_000_000_000_000_000 / i128::from(inverse.rate_ppb.max(1)))),
    };
    let Some((before, ppb)) = before else { return Ok(()) };
    let change = (i128::from(new.rate_ppb) - ppb) * 10_000 / ppb.max(1);
    if change.abs() <= MAX_JUMP_PERCENT * 100 {
        return Ok(());
    }
    Err(format!(
        "{} from {} is {}{}.{:02} % {} the rate in force for {month} ({}, from {}): refused. \
         Check it; pass --confirm if it is right",
        new.quote(),
        new.effective_from,
        if change > 0 { "+" } else { "" },
        change / 100,
        (change % 100).abs(),
        if change > 0 { "above" } else { "below" },
        before.quote(),
        before.effective_from,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(from: &str, to: &str, value: &str, month: &str) -> FxRate {
        FxRate::new(from, to, value, month.parse().unwrap(), "cli").unwrap()
    }

    #[test]
    fn a_rate_converts_exactly_and_rounds_once() {
        let eur = rate("eur", "USD", "1.0842", "2026-10");
        assert_eq!((eur.from_currency.as_str(), eur.rate_ppb), ("EUR", 1_084_200_000));
        // 100.25 EUR × 1.0842 = 108.69105 USD.
        assert_eq!(eur.convert(100_250_000_000), 108_691_050_000);
        // 0.000000001 EUR × 1.0842 = 1.0842 nano-dollars → 1; the negative rounds the same way.
        assert_eq!(eur.convert(1), 1);
        assert_eq!(eur.convert(-1), -1);
    }

    #[test]
    fn the_rate_in_force_is_the_newest_taking_effect_by_the_month() {
        let rates = vec![rate("EUR", "USD", "1.05", "2026-01"), rate("EUR", "USD", "1.0842", "2026-10")];
        assert_eq!(rate_for(&rates, "EUR", "USD", "2026-09").unwrap().rate, "1.05");
        assert_eq!(rate_for(&rates, "EUR", "USD", "2026-10").unwrap().rate, "1.0842");
        assert_eq!(rate_for(&rates, "EUR", "USD", "2026-12").unwrap().rate, "1.0842");
        assert_eq!(rate_for(&rates, "EUR", "USD", "2025-12"), None);
        assert_eq!(rate_for(&rates, "GBP", "USD", "2026-10"), None);
    }

    #[test]
    fn an_invoice_converts_at_the_newest_quote_either_way() {
        let inverse = rate("EUR", "USD", "1.0842", "2026-10");
        // $108.42 at 1 EUR = 1.0842 USD is EUR 100 exactly; $1 is EUR 0.922339051...
        assert_eq!(inverse.from_reporting(108_420_000_000), 100_000_000_000);
        assert_eq!(inverse.from_reporting(1_000_000_000), 922_339_052);
        assert_eq!(inverse.from_reporting(-1_000_000_000), -922_339_052);
        let direct = rate("USD", "EUR", "0.92", "2026-10");
        assert_eq!(direct.from_reporting(100_000_000_000), 92_000_000_000);
        assert_eq!(invoice_rate(&[], "USD", "2026-10"), Ok(None));
        let missing = invoice_rate(std::slice::from_ref(&inverse), "GBP", "2026-10").unwrap_err();
        assert!(missing.contains("fx set USD GBP RATE --from 2026-10"), "{missing}");
        // The newest month wins whichever way it is quoted; the same month, the direct quote.
        let older = rate("USD", "EUR", "0.95", "2026-09");
        let chosen = invoice_rate(&[older.clone(), inverse.clone()], "EUR", "2026-10").unwrap().unwrap();
        assert_eq!(chosen.quote(), "1 EUR = 1.0842 USD");
        let chosen = invoice_rate(&[older, inverse.clone(), direct], "EUR", "2026-11").unwrap().unwrap();
        assert_eq!(chosen.quote(), "1 USD = 0.92 EUR");
        assert!(invoice_rate(&[inverse], "EUR", "2026-09").is_err(), "not in force yet");
    }

    #[test]
    fn a_rate_far_from_the_one_in_force_is_refused_without_a_confirmation() {
        let rates = vec![rate("EUR", "USD", "1.0842", "2026-10")];
        let typo = rate("EUR", "USD", "1000000", "2026-11");
        let said = refuse_a_jump(&rates, &typo).unwrap_err();
        assert!(said.contains("1 EUR = 1000000 USD from 2026-11 is +92233805.18 % above"), "{said}");
        assert!(said.contains("(1 EUR = 1.0842 USD, from 2026-10)") && said.contains("--confirm"), "{said}");
        // ±50 % passes: 1.6263 is +50.00 %, 0.5421 is -50.00 %; 1.6265 is past it.
        assert!(refuse_a_jump(&rates, &rate("EUR", "USD", "1.6263", "2026-11")).is_ok());
        assert!(refuse_a_jump(&rates, &rate("EUR", "USD", "0.5421", "2026-11")).is_ok());
        assert!(refuse_a_jump(&rates, &rate("EUR", "USD", "1.6265", "2026-11")).is_err());
        // Quoted the other way round: 1 USD = 0.9223 EUR is the same rate.
        assert!(refuse_a_jump(&rates, &rate("USD", "EUR", "0.9223", "2026-11")).is_ok());
        assert!(
            refuse_a_jump(&rates, &rate("USD", "EUR", "92.23", "2026-11")).unwrap_err().contains("above")
        );
        assert!(refuse_a_jump(&rates, &rate("USD", "EUR", "0.1", "2026-11")).unwrap_err().contains("below"));
        // A first rate, or one for a month before any: nothing to compare with.
        assert!(refuse_a_jump(&rates, &rate("GBP", "USD", "1000", "2026-11")).is_ok());
        assert!(refuse_a_jump(&rates, &rate("EUR", "USD", "1000", "2026-01")).is_ok());
    }

    #[test]
    fn bad_rates_are_refused() {
        let october = "2026-10".parse().unwrap();
        assert_eq!(FxRate::new("EURO", "USD", "1", october, "cli"), Err(FxError::Currency("EURO".into())));
        assert_eq!(FxRate::new("EUR", "USD", "-1", october, "cli"), Err(FxError::Rate("-1".into())));
        assert_eq!(FxRate::new("EUR", "USD", "1,08", october, "cli"), Err(FxError::Rate("1,08".into())));
        assert_eq!(FxRate::new("USD", "usd", "1", october, "cli"), Err(FxError::Same("USD".into())));
    }
}
