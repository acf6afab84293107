//! One judge for every bill source: a delivery (a CUR period, a FOCUS bill) is judged before
//! it replaces anything. A broken re-delivery (its data files hold no rows, far less cost than
//! the bill it would replace, or the same rows twice) looks exactly like a real one, new
//! `executionId` and all, and replacing a billed month with it loses the month. The rules and
//! their bounds (`--max-drop`, `--max-rise`, `settings bounds`) are the same for every source;
//! amounts are in nano-units of the bill's own currency.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::money::{Cents, Nanos};

use crate::domain::settings::IngestBounds;

/// The largest fall of a bill's cost, in percent of the stored one, that a re-delivery may
/// bring without `--force`, unless the operator sets another.
pub const DEFAULT_MAX_DROP_PERCENT: u32 = IngestBounds::DEFAULT.max_drop_percent;

/// The largest rise of the days a stored bill already covers, in percent of what it had for
/// them, that a re-delivery may bring without `--force`, unless the operator sets another.
pub const DEFAULT_MAX_RISE_PERCENT: u32 = IngestBounds::DEFAULT.max_rise_percent;

/// What the operator allows a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowance {
    /// `--allow-empty`: a delivery with no rows may replace the bill.
    pub allow_empty: bool,
    /// `--force`: a bill that falls or rises past its bounds may replace the stored one.
    pub force: bool,
    /// `--max-drop PERCENT`; 100 accepts any fall.
    pub max_drop_percent: u32,
    /// `--max-rise PERCENT`: how far the days already stored may rise.
    pub max_rise_percent: u32,
}

impl Default for Allowance {
    fn default() -> Allowance {
        Allowance {
            allow_empty: false,
            force: false,
            max_drop_percent: DEFAULT_MAX_DROP_PERCENT,
            max_rise_percent: DEFAULT_MAX_RISE_PERCENT,
        }
    }
}

impl Allowance {
    /// The command's own bounds where it gave them, else the bounds in force for the bill's
    /// month (`settings bounds`).
    pub fn of(
        bounds: IngestBounds,
        force: bool,
        allow_empty: bool,
        max_drop_percent: Option<u32>,
        max_rise_percent: Option<u32>,
    ) -> Allowance {
        Allowance {
            allow_empty,
            force,
            max_drop_percent: max_drop_percent.unwrap_or(bounds.max_drop_percent),
            max_rise_percent: max_rise_percent.unwrap_or(bounds.max_rise_percent),
        }
    }
}

/// A bill as a delivery brings it, or as it is stored: its data version, its cost (the CUR's
/// amortized cost, FOCUS's `EffectiveCost`: the same cost) and that cost per day (midnight
/// UTC epoch seconds), in nano-units of its currency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Figures {
    pub data_version: String,
    pub cost_nanos: i64,
    #[serde(skip)]
    pub days: BTreeMap<i64, i64>,
}

/// A delivered bill as the judge sees it.
#[derive(Debug, Clone)]
pub struct Delivered<'a> {
    /// The billing period, `YYYY-MM`.
    pub period: &'a str,
    /// Which bill of the period, when a period holds several (FOCUS: provider and billing
    /// account); `None` for the CUR's one bill a period.
    pub which: Option<(&'a str, &'a str)>,
    /// Who would deliver it again ("AWS", "the provider"), for the advice.
    pub deliverer: &'a str,
    pub rows_read: u64,
    /// The bill's currency (`USD`, `EUR`, ...).
    pub currency: &'a str,
    pub bill: Figures,
}

/// A refused delivery, with the numbers it was judged on (stored with the refused run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub period: String,
    /// The bill's provider and billing account, when a period holds several bills.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub billing_account: Option<String>,
    pub data_version: String,
    pub rows_read: u64,
    /// The bill's currency; the amounts below are decimal strings in it, as every JSON twin
    /// writes money.
    pub currency: String,
    pub bill_amortized: String,
    pub stored_data_version: Option<String>,
    pub stored_bill_amortized: Option<String>,
    /// How far the bill falls, in percent of the stored one.
    pub drop_percent: Option<String>,
    /// How far the days the stored bill covers rise, in percent of what it had for them.
    pub rise_percent: Option<String>,
    /// What would accept it: `--allow-empty` or `--force` (a fall or a rise: also a higher
    /// `--max-drop` or `--max-rise`).
    pub override_with: &'static str,
    pub message: String,
}

/// How far a re-delivery raises the days a stored bill already covers: the sums over those
/// days but the last (a month-to-date delivery's last day is still filling), before and
/// after, and the rise in basis points; `None` when it does not rise, or the stored bill has
/// no such days or nothing on them. New days are no rise: a month-to-date bill grows.
pub fn rise_on_stored_days(
    stored: &BTreeMap<i64, i64>,
    delivered: &BTreeMap<i64, i64>,
) -> Option<(i64, i64, i128)> {
    let last = *stored.keys().next_back()?;
    let days = || stored.keys().filter(move |day| **day < last);
    let before: i64 = days().map(|day| stored[day]).sum();
    let after: i64 = days().map(|day| delivered.get(day).copied().unwrap_or(0)).sum();
    if before <= 0 || after <= before {
        return None;
    }
    Some((before, after, (i128::from(after) - i128::from(before)) * 10_000 / i128::from(before)))
}

/// Basis points as a percent with two decimals.
pub fn percent(basis_points: i128) -> String {
    format!("{}.{:02}", basis_points / 100, basis_points % 100)
}

/// Judges a delivered bill against the stored one: `None` when it may replace it.
pub fn judge(delivered: &Delivered<'_>, stored: Option<&Figures>, allowance: Allowance) -> Option<Refusal> {
    let Delivered { period, which, deliverer, rows_read, currency, .. } = *delivered;
    let new = &delivered.bill;
    let money = |nanos: i64| Cents::from_nanos(nanos).money(currency);
    let named = match which {
        Some((provider, account)) => format!("{period} {provider} {account}"),
        None => period.to_string(),
    };
    let data_version = &new.data_version;
    let refusal = |override_with: &'static str, drop_percent: Option<String>, message: String| Refusal {
        period: period.to_string(),
        provider: which.map(|(provider, _)| provider.to_string()),
        billing_account: which.map(|(_, account)| account.to_string()),
        data_version: data_version.clone(),
        rows_read,
        currency: currency.to_string(),
        bill_amortized: Nanos(new.cost_nanos).decimal(),
        stored_data_version: stored.map(|s| s.data_version.clone()),
        stored_bill_amortized: stored.map(|s| Nanos(s.cost_nanos).decimal()),
        drop_percent,
        rise_percent: None,
        override_with,
        message,
    };
    let replacing = match stored {
        Some(s) => format!("the stored bill of {} (data version {})", money(s.cost_nanos), s.data_version),
        None => "nothing: the bill is not stored yet".to_string(),
    };
    if rows_read == 0 && allowance.allow_empty {
        // Said in so many words: the period really has no cost.
        return None;
    }
    if rows_read == 0 {
        return Some(refusal(
            "--allow-empty",
            None,
            format!(
                "refused: the delivery of {named} (data version {data_version}) has data files but no rows; \
                 it would replace {replacing} with an empty month. A broken delivery looks like this: \
                 wait for {deliverer} to deliver again, or pass --allow-empty if the period really has no cost"
            ),
        ));
    }
    let stored = stored?;
    if allowance.force {
        return None;
    }
    if let Some((before, after, rise_bp)) = rise_on_stored_days(&stored.days, &new.days)
        && rise_bp > i128::from(allowance.max_rise_percent) * 100
    {
        let rise = percent(rise_bp);
        return Some(Refusal {
            rise_percent: Some(rise.clone()),
            ..refusal(
                "--force",
                None,
                format!(
                    "refused: the delivery of {named} (data version {data_version}, {rows_read} rows) raises \
                     the days {replacing} already covers from {} to {}, {rise} % more, past the {} % a \
                     re-delivery may rise (--max-rise, or `settings bounds` for the month). The same rows counted twice look like this: check \
                     the export; pass --force to replace the bill all the same",
                    money(before),
                    money(after),
                    allowance.max_rise_percent
                ),
            )
        });
    }
    let before = i128::from(stored.cost_nanos);
    let after = i128::from(new.cost_nanos);
    if before <= 0 || after >= before {
        return None;
    }
    // Basis points, exactly: (before - after) / before.
    let drop_bp = (before - after) * 10_000 / before;
    if drop_bp <= i128::from(allowance.max_drop_percent) * 100 {
        return None;
    }
    let drop = percent(drop_bp);
    Some(refusal(
        "--force",
        Some(drop.clone()),
        format!(
            "refused: the delivery of {named} (data version {data_version}, {rows_read} rows) brings a \
             bill of {}, {drop} % below {replacing}, more than the {} % a re-delivery may fall \
             (--max-drop, or `settings bounds` for the month). Check the export; pass --force to replace the bill all the same",
            money(new.cost_nanos),
            allowance.max_drop_percent
        ),
    ))
}

/// Refuses a delivery that lists the same bytes under two names (a copied data file counts
/// its cost twice). Files are compared by SHA-256, and only those whose sizes match another's
/// are read for it: a delivery with no two files of one size costs a `stat` per file.
/// `files` are (local path, location for messages).
pub fn refuse_same_contents(
    files: &[(std::path::PathBuf, String)],
) -> Result<(), crate::sources::SourceError> {
    let invalid = |location: &str, message: String| crate::sources::SourceError::Invalid {
        location: location.to_string(),
        message,
    };
    let mut by_size: std::collections::BTreeMap<u64, Vec<usize>> = std::collections::BTreeMap::new();
    for (i, (path, location)) in files.iter().enumerate() {
        let size =
            std::fs::metadata(path).map_err(|e| invalid(location, format!("reading its size: {e}")))?.len();
        by_size.entry(size).or_default().push(i);
    }
    for same_size in by_size.values().filter(|group| group.len() > 1) {
        let mut seen: std::collections::HashMap<Vec<u8>, usize> = std::collections::HashMap::new();
        for &i in same_size {
            let (path, location) = &files[i];
            // Two empty files are alike without being one file twice: the reader refuses a
            // file without rows for what it is.
            if !holds_a_data_line(path) {
                continue;
            }
            let digest = file_sha256(path).map_err(|e| invalid(location, format!("reading it: {e}")))?;
            if let Some(&first) = seen.get(&digest) {
                let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                return Err(invalid(
                    location,
                    format!(
                        "has the same contents as {} (SHA-256 {hex}): the manifest lists one file under two \
                         names, and ingesting both would count its cost twice",
                        files[first].1
                    ),
                ));
            }
            seen.insert(digest, i);
        }
    }
    Ok(())
}

/// Whether a CSV file (gzipped or not) has a line after its header; any other file is taken
/// to. Reads at most the first 64 KiB of its text.
fn holds_a_data_line(path: &std::path::Path) -> bool {
    use std::io::Read;
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    let Ok(file) = std::fs::File::open(path) else { return true };
    let mut text = Vec::new();
    let read = if name.ends_with(".csv.gz") {
        flate2::read::MultiGzDecoder::new(file).take(64 << 10).read_to_end(&mut text)
    } else if name.ends_with(".csv") {
        file.take(64 << 10).read_to_end(&mut text)
    } else {
        return true;
    };
    if read.is_err() {
        return true;
    }
    match text.iter().position(|b| *b == b'\n') {
        Some(end) => text[end + 1..].iter().any(|b| !b.is_ascii_whitespace()),
        None => false,
    }
}

/// The SHA-256 of a file, read in pieces (never held whole).
pub fn file_sha256(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut HashWriter(&mut hasher))?;
    Ok(hasher.finalize().to_vec())
}

/// Feeds what `std::io::copy` writes to a hasher.
struct HashWriter<'a>(&'a mut sha2::Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        sha2::Digest::update(self.0, bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bill's figures from micro-dollars (its days too), as the CUR stores them.
    fn figures(data_version: &str, micros: i64, days: &BTreeMap<i64, i64>) -> Figures {
        Figures {
            data_version: data_version.into(),
            cost_nanos: micros * 1_000,
            days: days.iter().map(|(day, micros)| (*day, micros * 1_000)).collect(),
        }
    }

    fn stored(micros: i64) -> Figures {
        figures("exec-1", micros, &BTreeMap::new())
    }

    /// A CUR delivery of `period` in dollars, judged.
    fn judge(
        period: &str,
        data_version: &str,
        rows_read: u64,
        micros: i64,
        days: &BTreeMap<i64, i64>,
        stored: Option<&Figures>,
        allowance: Allowance,
    ) -> Option<Refusal> {
        let delivered = Delivered {
            period,
            which: None,
            deliverer: "AWS",
            rows_read,
            currency: "USD",
            bill: figures(data_version, micros, days),
        };
        super::judge(&delivered, stored, allowance)
    }

    const NONE: &BTreeMap<i64, i64> = &BTreeMap::new();

    #[test]
    fn no_rows_is_refused_with_or_without_a_stored_bill_unless_allowed() {
        let refused =
            judge("2026-10", "exec-2", 0, 0, NONE, Some(&stored(26_083_850_000)), Allowance::default())
                .unwrap();
        assert_eq!(refused.override_with, "--allow-empty");
        assert_eq!(refused.stored_bill_amortized.as_deref(), Some("26083.850000"));
        assert!(refused.message.contains("$26,083.85 (data version exec-1)"), "{}", refused.message);
        assert!(judge("2026-10", "exec-1", 0, 0, NONE, None, Allowance::default()).is_some());
        let allowed = Allowance { allow_empty: true, ..Allowance::default() };
        assert_eq!(judge("2026-10", "exec-2", 0, 0, NONE, Some(&stored(26_083_850_000)), allowed), None);
    }

    #[test]
    fn a_fall_beyond_the_limit_is_refused_and_one_at_it_is_not() {
        let limit = Allowance::default();
        // $100 -> $50: exactly 50 %, accepted; $49.99: 50.01 %, refused.
        assert_eq!(judge("2026-10", "b", 10, 50_000_000, NONE, Some(&stored(100_000_000)), limit), None);
        let refused = judge("2026-10", "b", 10, 49_990_000, NONE, Some(&stored(100_000_000)), limit).unwrap();
        assert_eq!(refused.drop_percent.as_deref(), Some("50.01"));
        assert_eq!(refused.override_with, "--force");
        assert_eq!(
            judge(
                "2026-10",
                "b",
                10,
                49_990_000,
                NONE,
                Some(&stored(100_000_000)),
                Allowance { force: true, ..limit }
            ),
            None
        );
        let strict = Allowance { max_drop_percent: 5, ..limit };
        assert_eq!(
            judge("2026-10", "b", 10, 94_000_000, NONE, Some(&stored(100_000_000)), strict)
                .unwrap()
                .drop_percent
                .as_deref(),
            Some("6.00")
        );
        // A bill that grows, or a stored period with no cost, is never refused for its total.
        assert_eq!(judge("2026-10", "b", 10, 200_000_000, NONE, Some(&stored(100_000_000)), strict), None);
        assert_eq!(judge("2026-10", "b", 10, 0, NONE, Some(&stored(0)), strict), None);
    }

    #[test]
    fn a_focus_bill_is_judged_by_the_same_rules_in_its_own_currency() {
        // Azure's EUR bill: 90.00 stored, 10.00 delivered: 88.88 % less, past the 50 %.
        let eur = |nanos: i64, version: &str| Figures {
            data_version: version.into(),
            cost_nanos: nanos,
            days: BTreeMap::new(),
        };
        let delivered = Delivered {
            period: "2026-10",
            which: Some(("azure", "ea-1")),
            deliverer: "the provider",
            rows_read: 1,
            currency: "EUR",
            bill: eur(10_000_000_000, "sha256:b"),
        };
        let stored = eur(90_000_000_000, "sha256:a");
        let refused = super::judge(&delivered, Some(&stored), Allowance::default()).unwrap();
        assert_eq!(refused.drop_percent.as_deref(), Some("88.88"));
        assert_eq!(
            (refused.provider.as_deref(), refused.billing_account.as_deref()),
            (Some("azure"), Some("ea-1"))
        );
        assert_eq!((refused.currency.as_str(), refused.bill_amortized.as_str()), ("EUR", "10.000000"));
        assert!(
            refused.message.contains("2026-10 azure ea-1")
                && refused.message.contains("EUR 10.00, 88.88 % below the stored bill of EUR 90.00"),
            "{}",
            refused.message
        );
        // The bound is the CUR's: --max-drop 90 accepts it, as it would a CUR period.
        let wider = Allowance { max_drop_percent: 90, ..Allowance::default() };
        assert_eq!(super::judge(&delivered, Some(&stored), wider), None);
    }

    #[test]
    fn a_rise_of_the_days_already_stored_is_refused_and_new_days_are_not() {
        const DAY: i64 = 86_400;
        let days = |amounts: &[i64]| -> BTreeMap<i64, i64> {
            amounts.iter().enumerate().map(|(i, a)| (i as i64 * DAY, *a)).collect()
        };
        // Stored: three days of $100, the last still filling ($10).
        let before = figures("exec-1", 210_000_000, &days(&[100_000_000, 100_000_000, 10_000_000]));
        let limit = Allowance::default();
        // A month-to-date delivery: the last day filled in and two days more.
        let grown = days(&[100_000_000, 100_000_000, 100_000_000, 100_000_000, 100_000_000]);
        assert_eq!(judge("2026-10", "b", 50, 500_000_000, &grown, Some(&before), limit), None);
        // The same days doubled: $200 → $400 on the two full days, refused.
        let doubled = days(&[200_000_000, 200_000_000, 20_000_000]);
        let refused = judge("2026-10", "b", 60, 420_000_000, &doubled, Some(&before), limit).unwrap();
        assert_eq!((refused.rise_percent.as_deref(), refused.override_with), (Some("100.00"), "--force"));
        assert!(refused.message.contains("from $200.00 to $400.00"), "{}", refused.message);
        // At the bound (+50 %) it passes; forced, anything does.
        let half = days(&[150_000_000, 150_000_000, 10_000_000]);
        assert_eq!(judge("2026-10", "b", 60, 310_000_000, &half, Some(&before), limit), None);
        let forced = Allowance { force: true, ..limit };
        assert_eq!(judge("2026-10", "b", 60, 420_000_000, &doubled, Some(&before), forced), None);
    }

    #[test]
    fn the_same_bytes_under_two_names_are_refused_naming_both() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            (path, format!("data/{name}"))
        };
        // Same size, different bytes: fine. A copy: refused, naming the copy and the first.
        let files = [file("a.csv", "h\n1,2,3"), file("b.csv", "h\n4,5,6"), file("c.csv", "h\n12")];
        assert!(refuse_same_contents(&files).is_ok());
        // Two header-only files are alike, and left to the reader (it refuses a file without
        // rows as such).
        let empty = [file("e.csv", "a,b\n"), file("f.csv", "a,b\n")];
        assert!(refuse_same_contents(&empty).is_ok());
        let copied = [files[0].clone(), files[1].clone(), file("a-copy.csv", "h\n1,2,3")];
        let message = refuse_same_contents(&copied).unwrap_err().to_string();
        assert!(message.contains("data/a-copy.csv") && message.contains("data/a.csv"), "{message}");
        assert!(message.contains("SHA-256"), "{message}");
    }
}
