//! The templates' own filters, in scope of every module that derives a page:
//! `{{ period|when }}` writes a month, a day, a time or a range of days as people write them (`Oct 2026`,
//! `27 Nov 2026`, `27 Nov 2026 00:56 UTC`); `{{ sentence|dated }}` does so for each one inside
//! a text. Form values and links keep ISO 8601.

use std::fmt::Display;

use crate::period::human;

pub fn when<T: Display>(value: T, _: &dyn askama::Values) -> askama::Result<String> {
    let text = value.to_string();
    Ok(human::text(&text).unwrap_or_else(|| human::range(&text)))
}

pub fn dated<T: Display>(value: T, _: &dyn askama::Values) -> askama::Result<String> {
    Ok(human::within(&value.to_string()))
}

/// A whole number or exact decimal with its thousands grouped: `1234567` → `1,234,567`;
/// other text as it is.
pub fn grouped<T: Display>(value: T, _: &dyn askama::Values) -> askama::Result<String> {
    let text = value.to_string();
    let number = text.strip_prefix('-').unwrap_or(&text);
    let is_number = !number.is_empty()
        && number.chars().all(|c| c.is_ascii_digit() || c == '.')
        && number.chars().filter(|c| *c == '.').count() <= 1;
    Ok(if is_number { crate::report::table::grouped(&text) } else { text })
}
