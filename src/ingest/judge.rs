//! A CUR delivery judged before it replaces anything: a broken re-delivery (its data files
//! hold no rows, or far less cost than the bill it would replace) looks exactly like a real
//! one, new `executionId` and all, and replacing a billed month with it loses the month.

use serde::Serialize;

use crate::money::{format_usd, usd_decimal};

/// The largest fall of a period's amortized bill, in percent of the stored one, that a
/// re-delivery may bring without `--force`, unless the operator sets another.
pub const DEFAULT_MAX_DROP_PERCENT: u32 = 50;

/// What the operator allows a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowance {
    /// `--allow-empty`: a delivery with no rows may replace the period.
    pub allow_empty: bool,
    /// `--force`: a bill that falls by more than `max_drop_percent` may replace the period.
    pub force: bool,
    /// `--max-drop PERCENT`; 100 accepts any fall.
    pub max_drop_percent: u32,
}

impl Default for Allowance {
    fn default() -> Allowance {
        Allowance { allow_empty: false, force: false, max_drop_percent: DEFAULT_MAX_DROP_PERCENT }
    }
}

/// The period as stored: its delivery and amortized bill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stored {
    pub data_version: String,
    pub bill_amortized_micros: i64,
}

/// A refused delivery, with the numbers it was judged on (stored with the refused run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub period: String,
    pub data_version: String,
    pub rows_read: u64,
    /// USD as exact decimal strings, as every JSON twin writes money.
    pub bill_amortized: String,
    pub stored_data_version: Option<String>,
    pub stored_bill_amortized: Option<String>,
    /// How far the bill falls, in percent of the stored one.
    pub drop_percent: Option<String>,
    /// What would accept it: `--allow-empty` or `--force`.
    pub override_with: &'static str,
    pub message: String,
}

/// Judges a delivery of `period` that read `rows_read` rows into an amortized bill of
/// `bill_amortized_micros`, against what is stored: `None` when it may replace the period.
pub fn judge(
    period: &str,
    data_version: &str,
    rows_read: u64,
    bill_amortized_micros: i64,
    stored: Option<&Stored>,
    allowance: Allowance,
) -> Option<Refusal> {
    let refusal = |override_with: &'static str, drop_percent: Option<String>, message: String| Refusal {
        period: period.to_string(),
        data_version: data_version.to_string(),
        rows_read,
        bill_amortized: usd_decimal(bill_amortized_micros),
        stored_data_version: stored.map(|s| s.data_version.clone()),
        stored_bill_amortized: stored.map(|s| usd_decimal(s.bill_amortized_micros)),
        drop_percent,
        override_with,
        message,
    };
    let replacing = match stored {
        Some(s) => format!(
            "the stored bill of {} (data version {})",
            format_usd(s.bill_amortized_micros),
            s.data_version
        ),
        None => "nothing: the period is not stored yet".to_string(),
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
                "refused: the delivery of {period} (data version {data_version}) has data files but no rows; \
                 it would replace {replacing} with an empty month. A broken delivery looks like this: \
                 wait for AWS to deliver again, or pass --allow-empty if the period really has no cost"
            ),
        ));
    }
    let stored = stored?;
    let before = i128::from(stored.bill_amortized_micros);
    let after = i128::from(bill_amortized_micros);
    if allowance.force || before <= 0 || after >= before {
        return None;
    }
    // Basis points, exactly: (before - after) / before.
    let drop_bp = (before - after) * 10_000 / before;
    if drop_bp <= i128::from(allowance.max_drop_percent) * 100 {
        return None;
    }
    let drop = format!("{}.{:02}", drop_bp / 100, drop_bp % 100);
    Some(refusal(
        "--force",
        Some(drop.clone()),
        format!(
            "refused: the delivery of {period} (data version {data_version}, {rows_read} rows) brings an \
             amortized bill of {}, {drop} % below {replacing}, more than the {} % a re-delivery may fall \
             (--max-drop). Check the export; pass --force to replace the period all the same",
            format_usd(bill_amortized_micros),
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
) -> Result<(), crate::sources::cur::CurError> {
    let invalid = |location: &str, message: String| crate::sources::cur::CurError::Invalid {
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

    fn stored(micros: i64) -> Stored {
        Stored { data_version: "exec-1".into(), bill_amortized_micros: micros }
    }

    #[test]
    fn no_rows_is_refused_with_or_without_a_stored_bill_unless_allowed() {
        let refused =
            judge("2026-10", "exec-2", 0, 0, Some(&stored(26_083_850_000)), Allowance::default()).unwrap();
        assert_eq!(refused.override_with, "--allow-empty");
        assert_eq!(refused.stored_bill_amortized.as_deref(), Some("26083.850000"));
        assert!(refused.message.contains("$26,083.85 (data version exec-1)"), "{}", refused.message);
        assert!(judge("2026-10", "exec-1", 0, 0, None, Allowance::default()).is_some());
        let allowed = Allowance { allow_empty: true, ..Allowance::default() };
        assert_eq!(judge("2026-10", "exec-2", 0, 0, Some(&stored(26_083_850_000)), allowed), None);
    }

    #[test]
    fn a_fall_beyond_the_limit_is_refused_and_one_at_it_is_not() {
        let limit = Allowance::default();
        // $100 -> $50: exactly 50 %, accepted; $49.99: 50.01 %, refused.
        assert_eq!(judge("2026-10", "b", 10, 50_000_000, Some(&stored(100_000_000)), limit), None);
        let refused = judge("2026-10", "b", 10, 49_990_000, Some(&stored(100_000_000)), limit).unwrap();
        assert_eq!(refused.drop_percent.as_deref(), Some("50.01"));
        assert_eq!(refused.override_with, "--force");
        assert_eq!(
            judge(
                "2026-10",
                "b",
                10,
                49_990_000,
                Some(&stored(100_000_000)),
                Allowance { force: true, ..limit }
            ),
            None
        );
        let strict = Allowance { max_drop_percent: 5, ..limit };
        assert_eq!(
            judge("2026-10", "b", 10, 94_000_000, Some(&stored(100_000_000)), strict)
                .unwrap()
                .drop_percent
                .as_deref(),
            Some("6.00")
        );
        // A bill that grows, or a stored period with no cost, is never refused for its total.
        assert_eq!(judge("2026-10", "b", 10, 200_000_000, Some(&stored(100_000_000)), strict), None);
        assert_eq!(judge("2026-10", "b", 10, 0, Some(&stored(0)), strict), None);
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
        let files = [file("a.csv", "1,2,3"), file("b.csv", "4,5,6"), file("c.csv", "12")];
        assert!(refuse_same_contents(&files).is_ok());
        let copied = [files[0].clone(), files[1].clone(), file("a-copy.csv", "1,2,3")];
        let message = refuse_same_contents(&copied).unwrap_err().to_string();
        assert!(message.contains("data/a-copy.csv") && message.contains("data/a.csv"), "{message}");
        assert!(message.contains("SHA-256"), "{message}");
    }
}
