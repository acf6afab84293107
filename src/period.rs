//! The billing period newtype: a calendar month in UTC, parsed once at the edge.

use std::fmt;
use std::str::FromStr;

use chrono::{Datelike, NaiveDate, TimeZone, Utc};

/// A UTC epoch second to the minute, for people: `2026-11-26 10:24 UTC`.
pub fn utc_minute(epoch: i64) -> String {
    Utc.timestamp_opt(epoch, 0)
        .single()
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_default()
}

/// Dates as people write them, for pages and documents: `Oct 2026`, `27 Nov 2026`,
/// `27 Nov 2026 00:56 UTC`, `1–14 Oct 2026`. CSV, JSON, XLSX and the command line keep ISO 8601
/// (what scripts parse); URLs and form values too.
pub mod human {
    use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};

    use super::Period;

    /// `Oct 2026`.
    pub fn month(period: Period) -> String {
        NaiveDate::from_ymd_opt(period.year(), period.month(), 1)
            .map(|d| d.format("%b %Y").to_string())
            .unwrap_or_else(|| period.to_string())
    }

    /// `27 Nov 2026`.
    pub fn day(date: NaiveDate) -> String {
        date.format("%-d %b %Y").to_string()
    }

    /// `27 Nov 2026 00:56 UTC`.
    pub fn minute(at: DateTime<Utc>) -> String {
        at.format("%-d %b %Y %H:%M UTC").to_string()
    }

    /// A UTC epoch second to the minute: `27 Nov 2026 00:56 UTC`.
    pub fn epoch(seconds: i64) -> String {
        Utc.timestamp_opt(seconds, 0).single().map(minute).unwrap_or_default()
    }

    /// A UTC epoch second to the second, for an audit log: `27 Nov 2026 00:56:49 UTC`.
    pub fn epoch_second(seconds: i64) -> String {
        Utc.timestamp_opt(seconds, 0)
            .single()
            .map(|at| at.format("%-d %b %Y %H:%M:%S UTC").to_string())
            .unwrap_or_default()
    }

    /// Whole days `[from, to)` by their first and last day: `1–14 Oct 2026`,
    /// `20 Sep – 4 Oct 2026`, `20 Dec 2025 – 3 Jan 2026`; one day is that day.
    pub fn days(from: NaiveDate, to: NaiveDate) -> String {
        let last = to.pred_opt().unwrap_or(to).max(from);
        if last == from {
            day(from)
        } else if (from.year(), from.month()) == (last.year(), last.month()) {
            format!("{}–{}", from.day(), day(last))
        } else if from.year() == last.year() {
            format!("{} – {}", from.format("%-d %b"), day(last))
        } else {
            format!("{} – {}", day(from), day(last))
        }
    }

    /// A range's label (`2026-10`, or `2026-10-01/2026-10-15` with `to` exclusive) in words;
    /// anything else as it is.
    pub fn range(label: &str) -> String {
        let date = |t: &str| NaiveDate::parse_from_str(t, "%Y-%m-%d").ok();
        match label.split_once('/') {
            Some((from, to)) => match (date(from), date(to)) {
                (Some(from), Some(to)) => days(from, to),
                _ => label.to_string(),
            },
            None => label.parse::<Period>().map(month).unwrap_or_else(|_| label.to_string()),
        }
    }

    /// A whole text that is a month (`2026-10`), a day (`2026-10-27`) or a UTC time
    /// (`2026-11-27T00:56:51+00:00`, `2026-11-27 00:56 UTC`), in words; `None` for any other
    /// text, which stays as it is.
    pub fn text(text: &str) -> Option<String> {
        let text = text.trim();
        if !text.starts_with(|c: char| c.is_ascii_digit()) || text.len() < 7 {
            return None;
        }
        if let Ok(period) = text.parse::<Period>() {
            return Some(month(period));
        }
        if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
            return Some(day(date));
        }
        if let Ok(at) = DateTime::parse_from_rfc3339(text) {
            return Some(minute(at.with_timezone(&Utc)));
        }
        for format in ["%Y-%m-%d %H:%M UTC", "%Y-%m-%d %H:%M:%S UTC"] {
            if let Ok(at) = chrono::NaiveDateTime::parse_from_str(text, format) {
                return Some(minute(at.and_utc()));
            }
        }
        None
    }

    /// Every month, day and time in a text, in words: `2026-10: 24,895.55 USD` →
    /// `Oct 2026: 24,895.55 USD`. Digits inside longer words or paths stay as they are.
    pub fn within(said: &str) -> String {
        let bytes = said.as_bytes();
        let mut out = String::with_capacity(said.len());
        let mut i = 0;
        while i < said.len() {
            let boundary =
                i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || b"/=_-.".contains(&bytes[i - 1]));
            if boundary && bytes[i].is_ascii_digit() {
                // The longest date-like run from here: digits, '-', ':', 'T', '+', ' UTC'.
                let end = date_end(&said[i..]);
                if let Some(words) = (end >= 7).then(|| text(&said[i..i + end])).flatten() {
                    out.push_str(&words);
                    i += end;
                    continue;
                }
            }
            let c = said[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
        out
    }

    /// The length of the date or time that starts `text`: `YYYY-MM`, `YYYY-MM-DD`, then an
    /// optional `THH:MM:SS(+00:00|Z)` or ` HH:MM UTC`; 0 when none does.
    fn date_end(s: &str) -> usize {
        let b = s.as_bytes();
        let digits =
            |from: usize, n: usize| b.len() >= from + n && b[from..from + n].iter().all(u8::is_ascii_digit);
        if !(digits(0, 4) && b.get(4) == Some(&b'-') && digits(5, 2)) {
            return 0;
        }
        let ends_at =
            |at: usize| b.get(at).is_none_or(|c| !c.is_ascii_alphanumeric() && !b"/-_.".contains(c));
        if !(b.get(7) == Some(&b'-') && digits(8, 2)) {
            return if ends_at(7) { 7 } else { 0 };
        }
        // Times: RFC 3339 with an offset or `Z` (as the store writes them), or `HH:MM UTC`.
        for len in [25usize, 20] {
            if s.is_char_boundary(len.min(s.len()))
                && s.len() >= len
                && ends_at(len)
                && text(&s[..len]).is_some()
            {
                return len;
            }
        }
        if ends_at(10) { 10 } else { 0 }
    }
}

/// A billing period `YYYY-MM`: the half-open UTC interval `[first of month, first of next)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Period {
    year: i32,
    month: u32,
}

impl Period {
    pub fn new(year: i32, month: u32) -> Option<Period> {
        (1..=12).contains(&month).then_some(Period { year, month })
    }

    /// The period containing a UTC epoch second.
    pub fn containing(epoch_seconds: i64) -> Period {
        let date = Utc.timestamp_opt(epoch_seconds, 0).single().unwrap_or_default();
        Period { year: date.year(), month: date.month() }
    }

    pub fn year(self) -> i32 {
        self.year
    }

    pub fn month(self) -> u32 {
        self.month
    }

    /// UTC epoch seconds of the first instant of the period.
    pub fn start(self) -> i64 {
        NaiveDate::from_ymd_opt(self.year, self.month, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map_or(0, |dt| dt.and_utc().timestamp())
    }

    /// UTC epoch seconds of the first instant after the period.
    pub fn end(self) -> i64 {
        self.next().start()
    }

    pub fn hours(self) -> u32 {
        ((self.end() - self.start()) / 3600) as u32
    }

    pub fn days(self) -> u32 {
        self.hours() / 24
    }

    pub fn next(self) -> Period {
        if self.month == 12 {
            Period { year: self.year + 1, month: 1 }
        } else {
            Period { year: self.year, month: self.month + 1 }
        }
    }

    pub fn previous(self) -> Period {
        if self.month == 1 {
            Period { year: self.year - 1, month: 12 }
        } else {
            Period { year: self.year, month: self.month - 1 }
        }
    }
}

impl fmt::Display for Period {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}", self.year, self.month)
    }
}

/// Why a period string was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("invalid billing period {0:?}: expected YYYY-MM, e.g. 2026-10")]
pub struct PeriodParseError(String);

impl FromStr for Period {
    type Err = PeriodParseError;

    fn from_str(text: &str) -> Result<Period, PeriodParseError> {
        let error = || PeriodParseError(text.to_string());
        let (year, month) = text.split_once('-').ok_or_else(error)?;
        if year.len() != 4 || month.len() != 2 {
            return Err(error());
        }
        let year: i32 = year.parse().map_err(|_| error())?;
        let month: u32 = month.parse().map_err(|_| error())?;
        Period::new(year, month).ok_or_else(error)
    }
}

/// What a report or a page covers: one billing period, or whole UTC days `[from, to)`.
/// Parsed once, the same way, from the command line and from a page's URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    Month(Period),
    Days { from: NaiveDate, to: NaiveDate },
}

/// Why a range was refused: which parameter, and what is wrong with it.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
#[error("{parameter}: {message}")]
pub struct RangeError {
    /// `period`, `from` or `to`.
    pub parameter: &'static str,
    pub message: String,
}

impl Range {
    /// A range from `period`, or `from` and `to` (`YYYY-MM-DD`, `to` exclusive). Empty texts
    /// count as absent; with none of them, `None`. A period, when given, wins over days (a
    /// form that shows a range also sends it when a month is picked).
    pub fn parse(
        period: Option<&str>,
        from: Option<&str>,
        to: Option<&str>,
    ) -> Result<Option<Range>, RangeError> {
        fn given(text: Option<&str>) -> Option<&str> {
            text.map(str::trim).filter(|t| !t.is_empty())
        }
        if let Some(period) = given(period) {
            let period = period.parse::<Period>().map_err(|_| RangeError {
                parameter: "period",
                message: format!("{period:?} is not a month: use YYYY-MM, e.g. 2026-10"),
            })?;
            return Ok(Some(Range::Month(period)));
        }
        let day = |parameter: &'static str, text: &str| {
            NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| RangeError {
                parameter,
                message: format!("{text:?} is not a date: use YYYY-MM-DD, e.g. 2026-10-01"),
            })
        };
        match (given(from), given(to)) {
            (None, None) => Ok(None),
            (Some(_), None) => {
                Err(RangeError { parameter: "to", message: "give to (exclusive) with from".into() })
            }
            (None, Some(_)) => Err(RangeError { parameter: "from", message: "give from with to".into() }),
            (Some(from), Some(to)) => {
                let (from, to) = (day("from", from)?, day("to", to)?);
                if from >= to {
                    return Err(RangeError {
                        parameter: "to",
                        message: format!("{to} is not after {from}: the range is [from, to), to exclusive"),
                    });
                }
                Ok(Some(Range::Days { from, to }))
            }
        }
    }

    /// UTC epoch seconds of the first instant.
    pub fn start(self) -> i64 {
        match self {
            Range::Month(period) => period.start(),
            Range::Days { from, .. } => from.and_hms_opt(0, 0, 0).map_or(0, |t| t.and_utc().timestamp()),
        }
    }

    /// UTC epoch seconds of the first instant after.
    pub fn end(self) -> i64 {
        match self {
            Range::Month(period) => period.end(),
            Range::Days { to, .. } => to.and_hms_opt(0, 0, 0).map_or(0, |t| t.and_utc().timestamp()),
        }
    }

    /// `2026-10`, or `2026-10-01/2026-10-15`.
    /// The label of the range of days `[from, to)` (dates `YYYY-MM-DD`).
    pub fn label_of(from: &str, to: &str) -> String {
        format!("{from}/{to}")
    }

    pub fn label(self) -> String {
        match self {
            Range::Month(period) => period.to_string(),
            Range::Days { from, to } => format!("{from}/{to}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_read_as_people_write_them_and_only_whole_dates_change() {
        use human::*;
        let d = |t: &str| NaiveDate::parse_from_str(t, "%Y-%m-%d").unwrap();
        assert_eq!(month("2026-10".parse().unwrap()), "Oct 2026");
        assert_eq!(day(d("2026-11-07")), "7 Nov 2026");
        assert_eq!(epoch(1_795_740_960), "27 Nov 2026 00:56 UTC");
        assert_eq!(days(d("2026-10-01"), d("2026-10-15")), "1–14 Oct 2026");
        assert_eq!(days(d("2026-09-20"), d("2026-10-05")), "20 Sep – 4 Oct 2026");
        assert_eq!(days(d("2025-12-20"), d("2026-01-04")), "20 Dec 2025 – 3 Jan 2026");
        assert_eq!(days(d("2026-10-03"), d("2026-10-04")), "3 Oct 2026");
        assert_eq!(range("2026-10-01/2026-11-01"), "1–31 Oct 2026");
        assert_eq!(range("2026-02"), "Feb 2026");
        assert_eq!(range("all"), "all");
        assert_eq!(text("2026-11-27T00:56:51+00:00").as_deref(), Some("27 Nov 2026 00:56 UTC"));
        assert_eq!(text("2026-11-27 00:56 UTC").as_deref(), Some("27 Nov 2026 00:56 UTC"));
        assert_eq!(text("2026-13"), None);
        assert_eq!(text("acme"), None);
        assert_eq!(
            within("2026-10: $1,234.56; 2026-09-30 at 2026-11-27T00:56:51Z, see /gpus?period=2026-07"),
            "Oct 2026: $1,234.56; 30 Sep 2026 at 27 Nov 2026 00:56 UTC, see /gpus?period=2026-07"
        );
        // Invoice numbers, file names, paths and longer numbers are not dates.
        for kept in ["GL-2026-0001", "metrics/2026-10.om", "BILLING_PERIOD=2026-10", "12026-10", "2026-100"] {
            assert_eq!(within(kept), kept);
        }
    }

    #[test]
    fn ranges_parse_one_way_and_name_the_bad_parameter() {
        let month = Range::parse(Some("2026-10"), None, None).unwrap().unwrap();
        assert_eq!((month.label(), month.start()), ("2026-10".to_string(), 1_790_812_800));
        // A month wins over days the form also sent.
        assert_eq!(
            Range::parse(Some("2026-10"), Some("2026-09-01"), Some("2026-09-03")).unwrap(),
            Some(month)
        );
        let days = Range::parse(Some(""), Some("2026-10-01"), Some("2026-10-03")).unwrap().unwrap();
        assert_eq!((days.label().as_str(), days.end() - days.start()), ("2026-10-01/2026-10-03", 2 * 86_400));
        assert_eq!(Range::parse(None, None, Some("")).unwrap(), None);
        let bad = |p, f, t| Range::parse(p, f, t).unwrap_err().parameter;
        assert_eq!(bad(Some("2026-13"), None, None), "period");
        assert_eq!(bad(Some("2026-9"), None, None), "period");
        assert_eq!(bad(None, Some("2026-02-30"), Some("2026-03-02")), "from");
        assert_eq!(bad(None, Some("2026-10-01"), None), "to");
        assert_eq!(bad(None, None, Some("2026-10-01")), "from");
        assert_eq!(bad(None, Some("2026-10-05"), Some("2026-10-05")), "to");
    }

    #[test]
    fn parses_and_bounds_months() {
        let october: Period = "2026-10".parse().unwrap();
        assert_eq!(october.to_string(), "2026-10");
        // 2026-10-01T00:00:00Z
        assert_eq!(october.start(), 1_790_812_800);
        assert_eq!(october.hours(), 31 * 24);
        assert_eq!(october.next().to_string(), "2026-11");
        assert_eq!("2026-01".parse::<Period>().unwrap().previous().to_string(), "2025-12");
        assert_eq!("2024-02".parse::<Period>().unwrap().hours(), 29 * 24);
        assert!("2026-13".parse::<Period>().is_err());
        assert!("26-10".parse::<Period>().is_err());
        assert_eq!(Period::containing(october.start() + 3599), october);
    }
}
