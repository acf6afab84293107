//! The billing period newtype: a calendar month in UTC, parsed once at the edge.

use std::fmt;
use std::str::FromStr;

use chrono::{Datelike, NaiveDate, TimeZone, Utc};

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

#[cfg(test)]
mod tests {
    use super::*;

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
