//! `gpuledger report cross-check`: the ingested CUR against Cost Explorer, day by day and
//! service by service, for the amortized and the unblended cost.
//!
//! JSON contract (stable; fields may be added, never renamed):
//!
//! ```json
//! {"period": "2026-10",
//!  "rows": [{"day": "2026-10-14", "service": "AmazonS3", "metric": "amortized",
//!            "cur": "12.500000", "cost_explorer": "0.000000", "difference": "-12.500000"}],
//!  "within_tolerance": false,
//!  "tolerance": {"percent": 0.5, "usd": "1.00"},
//!  "days_checked": 31, "services": 7,
//!  "days_without_cost_explorer": ["2026-10-31"],
//!  "cur_amortized_total": "…", "cost_explorer_amortized_total": "…"}
//! ```
//!
//! `rows` lists only the differences above the tolerance: |difference| above the larger of
//! `percent` of the CUR's cost and `usd`. `difference` is Cost Explorer − CUR. Cost
//! Explorer's service names are mapped to the CUR's product codes (its EC2 instances and
//! "EC2 - Other" are both `AmazonEC2`; tax is `Tax` on both sides); linked accounts are
//! summed. The days checked are the period's days up to the last one the CUR has cost for;
//! one of them Cost Explorer has not answered for is listed and fails the check. Amounts are
//! exact decimal strings of micro-dollars (Cost Explorer's nano-dollars rounded once).

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde_json::{Value, json};

use super::table::{Cell, Table};
use super::{OutputFormat, ReportError};
use crate::money::{Cents, format_usd, micros_from_nanos, usd_decimal};
use crate::period::Period;
use crate::sources::cost_explorer::{cur_service, day_of};
use crate::store::{BillDay, CeCost, CeDay, Store, StoreError};

/// How far Cost Explorer may be from the CUR before a difference is listed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    /// Percent of the CUR's cost (0.5 = 0.5 %).
    pub percent: f64,
    pub usd: Cents,
}

impl Default for Tolerance {
    fn default() -> Tolerance {
        Tolerance { percent: 0.5, usd: Cents(100) }
    }
}

impl Tolerance {
    /// Whether `difference` micros on a CUR cost of `cur` micros is within tolerance.
    pub fn allows(self, cur: i64, difference: i64) -> bool {
        let relative = (cur.unsigned_abs() as f64 * self.percent / 100.0).round() as u64;
        let absolute = self.usd.0.unsigned_abs() * 10_000;
        difference.unsigned_abs() <= relative.max(absolute)
    }
}

/// One compared cell: a day, a service, a metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub day: NaiveDate,
    pub service: String,
    /// `amortized` or `unblended`.
    pub metric: &'static str,
    pub cur_micros: i64,
    pub cost_explorer_micros: i64,
}

impl Difference {
    /// Cost Explorer − CUR.
    pub fn micros(&self) -> i64 {
        self.cost_explorer_micros - self.cur_micros
    }
}

/// A period's cross-check.
#[derive(Debug, Clone)]
pub struct CrossCheck {
    pub period: Period,
    pub tolerance: Tolerance,
    /// Every compared cell, by day, service and metric.
    pub compared: Vec<Difference>,
    pub days_checked: Vec<NaiveDate>,
    /// Checked days Cost Explorer has not answered for.
    pub days_without_cost_explorer: Vec<NaiveDate>,
}

impl CrossCheck {
    /// Reads the period's bill by day and what Cost Explorer said of its days.
    pub async fn load(
        store: &dyn Store,
        period: Period,
        tolerance: Tolerance,
    ) -> Result<CrossCheck, ReportError> {
        let name = period.to_string();
        let bill = store.bill(&name).await?.ok_or(ReportError::NoData(period))?;
        if bill.bill_days.is_empty() && !bill.other_costs.is_empty() {
            return Err(ReportError::Store(StoreError::Invalid(format!(
                "{name} was ingested before gpuledger kept the bill per day and service: \
                 run `gpuledger ingest cur SOURCE --period {name}` again"
            ))));
        }
        let ce_days = store.ce_days(period.start(), period.end()).await?;
        let ce_costs = store.ce_costs(period.start(), period.end()).await?;
        Ok(CrossCheck::compare(period, tolerance, &bill.bill_days, &ce_days, &ce_costs))
    }

    /// Compares the CUR's days with Cost Explorer's.
    pub fn compare(
        period: Period,
        tolerance: Tolerance,
        bill_days: &[BillDay],
        ce_days: &[CeDay],
        ce_costs: &[CeCost],
    ) -> CrossCheck {
        let inside = |day: i64| day >= period.start() && day < period.end();
        // (day, service) → [amortized, unblended] micros, CUR and Cost Explorer.
        let mut cells: BTreeMap<(i64, String), ([i64; 2], [i64; 2])> = BTreeMap::new();
        for row in bill_days.iter().filter(|row| inside(row.day)) {
            let cur = &mut cells.entry((row.day, row.service.clone())).or_default().0;
            cur[0] += row.amortized_micros;
            cur[1] += row.unblended_micros;
        }
        let mut ce_nanos: BTreeMap<(i64, String), [i64; 2]> = BTreeMap::new();
        for row in ce_costs.iter().filter(|row| inside(row.day)) {
            let sums = ce_nanos.entry((row.day, cur_service(&row.service).to_string())).or_default();
            sums[0] += row.amortized_nanos;
            sums[1] += row.unblended_nanos;
        }
        for (key, [amortized, unblended]) in ce_nanos {
            cells.entry(key).or_default().1 = [micros_from_nanos(amortized), micros_from_nanos(unblended)];
        }
        let last_cur_day = bill_days.iter().map(|row| row.day).filter(|&day| inside(day)).max();
        let answered: std::collections::HashSet<i64> = ce_days.iter().map(|day| day.day).collect();
        let mut days_checked = Vec::new();
        let mut days_without_cost_explorer = Vec::new();
        if let Some(last) = last_cur_day {
            let mut day = period.start();
            while day <= last {
                days_checked.push(day_of(day));
                if !answered.contains(&day) {
                    days_without_cost_explorer.push(day_of(day));
                }
                day += 86_400;
            }
        }
        let compared = cells
            .into_iter()
            .filter(|((day, _), _)| last_cur_day.is_some_and(|last| *day <= last) && answered.contains(day))
            .flat_map(|((day, service), (cur, ce))| {
                ["amortized", "unblended"].into_iter().enumerate().map(move |(i, metric)| Difference {
                    day: day_of(day),
                    service: service.clone(),
                    metric,
                    cur_micros: cur[i],
                    cost_explorer_micros: ce[i],
                })
            })
            .collect();
        CrossCheck { period, tolerance, compared, days_checked, days_without_cost_explorer }
    }

    /// The differences above the tolerance.
    pub fn beyond_tolerance(&self) -> Vec<&Difference> {
        self.compared.iter().filter(|d| !self.tolerance.allows(d.cur_micros, d.micros())).collect()
    }

    /// Every checked day answered and no difference above the tolerance.
    pub fn within_tolerance(&self) -> bool {
        !self.days_checked.is_empty()
            && self.days_without_cost_explorer.is_empty()
            && self.beyond_tolerance().is_empty()
    }

    /// The amortized cost of the days checked, by the CUR or (`cost_explorer`) by Cost Explorer.
    pub fn amortized_total(&self, cost_explorer: bool) -> i64 {
        self.compared
            .iter()
            .filter(|d| d.metric == "amortized")
            .map(|d| if cost_explorer { d.cost_explorer_micros } else { d.cur_micros })
            .sum()
    }

    pub fn to_json(&self) -> Value {
        let services: std::collections::BTreeSet<&str> =
            self.compared.iter().map(|d| d.service.as_str()).collect();
        json!({
            "period": self.period.to_string(),
            "rows": self.beyond_tolerance().iter().map(|d| json!({
                "day": d.day.to_string(),
                "service": d.service,
                "metric": d.metric,
                "cur": usd_decimal(d.cur_micros),
                "cost_explorer": usd_decimal(d.cost_explorer_micros),
                "difference": usd_decimal(d.micros()),
            })).collect::<Vec<_>>(),
            "within_tolerance": self.within_tolerance(),
            "tolerance": {"percent": self.tolerance.percent, "usd": self.tolerance.usd.decimal()},
            "days_checked": self.days_checked.len(),
            "services": services.len(),
            "days_without_cost_explorer": self.days_without_cost_explorer.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
            "cur_amortized_total": usd_decimal(self.amortized_total(false)),
            "cost_explorer_amortized_total": usd_decimal(self.amortized_total(true)),
        })
    }

    /// The differences as a table (CSV gives exact decimals, the table dollars).
    fn table(&self, money: fn(i64) -> String) -> Table {
        Table {
            title: "CUR against Cost Explorer".into(),
            columns: vec!["day", "service", "metric", "cur", "cost_explorer", "difference"],
            rows: self
                .beyond_tolerance()
                .iter()
                .map(|d| {
                    vec![
                        Cell::Text(d.day.to_string()),
                        Cell::Text(d.service.clone()),
                        Cell::Text(d.metric.into()),
                        Cell::Text(money(d.cur_micros)),
                        Cell::Text(money(d.cost_explorer_micros)),
                        Cell::Text(money(d.micros())),
                    ]
                })
                .collect(),
            totals: Vec::new(),
        }
    }

    pub fn render(&self, format: OutputFormat) -> String {
        Table::render_check(
            format,
            &self.period.to_string(),
            || self.to_json(),
            |money| self.table(money),
            || self.summary(),
        )
    }

    /// One sentence a person reads: checked what, and how it came out.
    pub fn summary(&self) -> String {
        let tolerance = format!("{} % or {}", self.tolerance.percent, self.tolerance.usd.usd());
        if self.days_checked.is_empty() {
            return format!("{}: the CUR has no daily cost to check", self.period);
        }
        let mut text = format!(
            "{}: {} days checked, CUR {} and Cost Explorer {} amortized; ",
            self.period,
            self.days_checked.len(),
            format_usd(self.amortized_total(false)),
            format_usd(self.amortized_total(true)),
        );
        let beyond = self.beyond_tolerance().len();
        if beyond == 0 {
            text.push_str(&format!("no difference above {tolerance}"));
        } else {
            text.push_str(&format!("{beyond} differences above {tolerance}"));
        }
        if !self.days_without_cost_explorer.is_empty() {
            text.push_str(&format!(
                "; {} days not fetched from Cost Explorer (run `gpuledger ingest cost-explorer`)",
                self.days_without_cost_explorer.len()
            ));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::cost_explorer::day_start;

    fn bill_day(day: &str, service: &str, amortized: i64, unblended: i64) -> BillDay {
        let day = NaiveDate::parse_from_str(day, "%Y-%m-%d").unwrap();
        BillDay {
            day: day_start(day),
            service: service.into(),
            usage_account_id: "111".into(),
            unblended_micros: unblended,
            amortized_micros: amortized,
        }
    }

    fn ce(day: &str, service: &str, account: &str, amortized: i64, unblended: i64) -> CeCost {
        let day = NaiveDate::parse_from_str(day, "%Y-%m-%d").unwrap();
        CeCost {
            day: day_start(day),
            service: service.into(),
            usage_account_id: account.into(),
            unblended_nanos: unblended,
            amortized_nanos: amortized,
            net_amortized_nanos: amortized,
        }
    }

    fn answered(days: &[&str]) -> Vec<CeDay> {
        days.iter()
            .map(|d| CeDay {
                day: day_start(NaiveDate::parse_from_str(d, "%Y-%m-%d").unwrap()),
                fetched_at: 0,
                estimated: false,
            })
            .collect()
    }

    #[test]
    fn tolerance_is_the_larger_of_percent_and_dollars() {
        let tolerance = Tolerance::default();
        // $1 absolute: 1.00 on $10 is fine, 1.01 is not.
        assert!(tolerance.allows(10_000_000, 1_000_000));
        assert!(!tolerance.allows(10_000_000, -1_010_000));
        // 0.5 % of $1,000 = $5.
        assert!(tolerance.allows(1_000_000_000, 5_000_000));
        assert!(!tolerance.allows(1_000_000_000, 5_000_001));
    }

    #[test]
    fn ec2_names_and_accounts_are_summed_and_a_missing_service_is_listed() {
        let period: Period = "2026-10".parse().unwrap();
        let bill = [
            bill_day("2026-10-01", "AmazonEC2", 100_000_000, 120_000_000),
            bill_day("2026-10-01", "AmazonS3", 3_000_000, 3_000_000),
            bill_day("2026-10-02", "AmazonEC2", 100_000_000, 120_000_000),
        ];
        // EC2 as instances + EC2 - Other, in two accounts: $60 + $40 = $100 amortized.
        let costs = [
            ce("2026-10-01", "Amazon Elastic Compute Cloud - Compute", "111", 60_000_000_000, 70_000_000_000),
            ce("2026-10-01", "EC2 - Other", "222", 40_000_000_000, 50_000_000_000),
            ce("2026-10-01", "Amazon Simple Storage Service", "111", 3_000_000_000, 3_000_000_000),
            // Day 2: Cost Explorer has S3 the CUR misses ($7), and EC2 agrees.
            ce(
                "2026-10-02",
                "Amazon Elastic Compute Cloud - Compute",
                "111",
                100_000_000_000,
                120_000_000_000,
            ),
            ce("2026-10-02", "Amazon Simple Storage Service", "111", 7_000_000_000, 7_000_000_000),
        ];
        let check = CrossCheck::compare(
            period,
            Tolerance::default(),
            &bill,
            &answered(&["2026-10-01", "2026-10-02"]),
            &costs,
        );
        assert_eq!(check.days_checked.len(), 2);
        let beyond = check.beyond_tolerance();
        assert_eq!(beyond.len(), 2, "{beyond:?}");
        assert_eq!(
            (beyond[0].service.as_str(), beyond[0].metric, beyond[0].micros()),
            ("AmazonS3", "amortized", 7_000_000)
        );
        assert_eq!(beyond[1].metric, "unblended");
        assert!(!check.within_tolerance());
        assert_eq!(check.to_json()["rows"][0]["difference"], "7.000000");
        assert_eq!(check.to_json()["cur_amortized_total"], "203.000000");
        assert_eq!(check.to_json()["cost_explorer_amortized_total"], "210.000000");
    }

    #[test]
    fn a_day_cost_explorer_has_not_answered_fails_the_check() {
        let period: Period = "2026-10".parse().unwrap();
        let bill = [
            bill_day("2026-10-01", "AmazonEC2", 1_000_000, 1_000_000),
            bill_day("2026-10-02", "AmazonEC2", 1_000_000, 1_000_000),
        ];
        let costs =
            [ce("2026-10-01", "Amazon Elastic Compute Cloud - Compute", "111", 1_000_000_000, 1_000_000_000)];
        let check =
            CrossCheck::compare(period, Tolerance::default(), &bill, &answered(&["2026-10-01"]), &costs);
        assert!(check.beyond_tolerance().is_empty());
        assert_eq!(check.days_without_cost_explorer, vec![NaiveDate::from_ymd_opt(2026, 10, 2).unwrap()]);
        assert!(!check.within_tolerance());
        let all =
            CrossCheck::compare(period, Tolerance::default(), &bill[..1], &answered(&["2026-10-01"]), &costs);
        assert!(all.within_tolerance());
    }
}
