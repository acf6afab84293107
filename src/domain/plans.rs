//! Planned changes (issue 42): demand the people who run the fleet know of before any bill
//! shows it — a client onboarding, another scaling up or down, a retraining schedule — kept
//! apart from the statistical forecast and layered onto it as a scenario.
//!
//! A change is either GPU-hours a month added to a client's demand (in one pool, or wherever
//! the client runs) or a percentage of the client's forecast, for the months from `from` to
//! `to` (open-ended without `to`). Who added it and when is in the row and in the audit log.

use crate::period::Period;

/// What a planned change changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanKind {
    /// GPU-hours a month added (negative: taken away).
    GpuHours,
    /// A percentage of the client's forecast added (negative: taken away).
    Percent,
}

impl PlanKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanKind::GpuHours => "gpu_hours",
            PlanKind::Percent => "percent",
        }
    }

    pub fn parse(text: &str) -> Option<PlanKind> {
        match text {
            "gpu_hours" => Some(PlanKind::GpuHours),
            "percent" => Some(PlanKind::Percent),
            _ => None,
        }
    }
}

/// One planned change, as stored.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct Plan {
    pub id: i64,
    pub client: String,
    /// A pool as `report forecast` names it (`A100 Spot`), or empty: wherever the client runs.
    pub pool: String,
    /// [`PlanKind::as_str`].
    pub kind: String,
    /// GPU-hours a month, or percent.
    pub amount: f64,
    /// `YYYY-MM`: the first month it applies to.
    pub from_month: String,
    /// `YYYY-MM`: the last, or empty for every month on.
    pub to_month: String,
    pub note: String,
    pub author: String,
    /// UTC epoch seconds.
    pub created_at: i64,
}

/// Why a planned change is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("a planned change needs a client")]
    NoClient,
    #[error("a planned change needs a note saying what it is (--note)")]
    NoNote,
    #[error("--to {to} is before --from {from}")]
    Backwards { from: Period, to: Period },
    #[error("{0} is not a number of GPU-hours a month")]
    GpuHours(f64),
    #[error("{0} % would take away more than the whole forecast (the least is -100)")]
    Percent(f64),
}

impl Plan {
    /// A new change, checked: a client and a note, `to` not before `from`, a finite amount and
    /// no percentage below -100.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: &str,
        pool: &str,
        kind: PlanKind,
        amount: f64,
        (from, to): (Period, Option<Period>),
        note: &str,
        author: &str,
        created_at: i64,
    ) -> Result<Plan, PlanError> {
        if client.trim().is_empty() {
            return Err(PlanError::NoClient);
        }
        if note.trim().is_empty() {
            return Err(PlanError::NoNote);
        }
        if let Some(to) = to.filter(|to| *to < from) {
            return Err(PlanError::Backwards { from, to });
        }
        match kind {
            PlanKind::GpuHours if !amount.is_finite() => return Err(PlanError::GpuHours(amount)),
            PlanKind::Percent if !amount.is_finite() || amount < -100.0 => {
                return Err(PlanError::Percent(amount));
            }
            _ => {}
        }
        Ok(Plan {
            id: 0,
            client: client.trim().to_string(),
            pool: pool.trim().to_string(),
            kind: kind.as_str().to_string(),
            amount,
            from_month: from.to_string(),
            to_month: to.map(|t| t.to_string()).unwrap_or_default(),
            note: note.trim().to_string(),
            author: author.to_string(),
            created_at,
        })
    }

    pub fn kind(&self) -> PlanKind {
        PlanKind::parse(&self.kind).unwrap_or(PlanKind::GpuHours)
    }

    /// Whether it applies to `month`.
    pub fn applies(&self, month: Period) -> bool {
        let month = month.to_string();
        self.from_month <= month && (self.to_month.is_empty() || month <= self.to_month)
    }

    /// The audit log's line for it.
    pub fn describe(&self) -> String {
        let what = match self.kind() {
            PlanKind::GpuHours => format!("{:+} GPU-hours a month", self.amount),
            PlanKind::Percent => format!("{:+} %", self.amount),
        };
        let pool = if self.pool.is_empty() { String::new() } else { format!(" in {}", self.pool) };
        let to = if self.to_month.is_empty() { "on".to_string() } else { format!("to {}", self.to_month) };
        format!("plan {} {}: {what}{pool} from {} {to}: {}", self.id, self.client, self.from_month, self.note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn month(text: &str) -> Period {
        text.parse().unwrap()
    }

    #[test]
    fn a_plan_applies_from_its_first_month_to_its_last() {
        let plan = Plan::new(
            "acme",
            "",
            PlanKind::GpuHours,
            500.0,
            (month("2026-12"), Some(month("2027-02"))),
            "x",
            "a",
            0,
        )
        .unwrap();
        let applies: Vec<bool> =
            ["2026-11", "2026-12", "2027-01", "2027-02", "2027-03"].map(|m| plan.applies(month(m))).to_vec();
        assert_eq!(applies, [false, true, true, true, false]);
        let open =
            Plan::new("acme", "", PlanKind::Percent, 20.0, (month("2026-12"), None), "x", "a", 0).unwrap();
        assert!(open.applies(month("2030-01")) && !open.applies(month("2026-11")));
        assert_eq!(open.describe(), "plan 0 acme: +20 % from 2026-12 on: x");
    }

    #[test]
    fn a_plan_without_client_or_note_or_running_backwards_is_refused() {
        let span = (month("2026-12"), None);
        assert_eq!(Plan::new(" ", "", PlanKind::GpuHours, 1.0, span, "x", "a", 0), Err(PlanError::NoClient));
        assert_eq!(Plan::new("acme", "", PlanKind::GpuHours, 1.0, span, "", "a", 0), Err(PlanError::NoNote));
        let backwards = (month("2026-12"), Some(month("2026-11")));
        assert_eq!(
            Plan::new("acme", "", PlanKind::GpuHours, 1.0, backwards, "x", "a", 0).unwrap_err().to_string(),
            "--to 2026-11 is before --from 2026-12"
        );
        assert_eq!(
            Plan::new("acme", "", PlanKind::Percent, -101.0, span, "x", "a", 0),
            Err(PlanError::Percent(-101.0))
        );
        assert!(Plan::new("acme", "", PlanKind::Percent, -100.0, span, "x", "a", 0).is_ok());
    }
}
