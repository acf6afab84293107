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
