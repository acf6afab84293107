//! Postgres keeps the tables a billing period's bill fills partitioned by period (LIST, one
//! partition `TABLE_pYYYY_MM` per period; migration 0023). Replacing a period writes its rows
//! into new tables beside the live partitions, indexes and analyzes them, and only then, just
//! before commit, swaps them in: detach and drop the old partition, rename the new one, attach
//! it. A re-delivered 10M-row month is then a swap, not millions of deleted rows left for
//! VACUUM, and an old period can be detached and archived with plain SQL.
//!
//! Locks: detaching takes an ACCESS EXCLUSIVE lock on each parent until commit, which
//! follows at once; readers wait for that moment only. Every swap takes one advisory lock
//! first, so two periods replaced at once take turns instead of deadlocking on the parents.
//! Like TRUNCATE, a swap is not MVCC-safe for a repeatable-read reader whose snapshot predates
//! the commit but who first touches the tables after it: it would see the period empty. So
//! the store's reads of a period's tables lock them first ([`read_lock`], before their
//! snapshot is taken): such a read waits for a swap in progress and then sees the new period,
//! or a swap waits for the read. Pages read rollups, which are not partitioned.

use std::borrow::Cow;

use crate::store::{StoreError, StoreResult};

/// The tables partitioned by period, in the order every swap locks their parents.
pub(crate) const PERIOD_TABLES: [&str; 7] = [
    "cost_facts",
    "cost_pods",
    "instance_hours",
    "other_costs",
    "cost_pod_days",
    "cost_gpu_pod_hours",
    "cost_pod_day_options",
];

/// Taken first in a read transaction of a period's tables, before its snapshot (a lock is no
/// query, so it takes none): ACCESS SHARE, which only a swap's detach waits for.
pub(crate) fn read_lock() -> String {
    format!("LOCK TABLE {} IN ACCESS SHARE MODE", PERIOD_TABLES.join(", "))
}

/// The advisory lock every swap takes first.
pub(crate) const SWAP_LOCK: &str = "cost-partitions";

/// The index definitions of a partitioned table, to build the same on a new partition.
pub(crate) const SELECT_INDEXES: &str = "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1 ORDER BY indexname";

/// Whether a table of that name exists (`n` 1) and whether it is attached as a partition.
pub(crate) const SELECT_PARTITION: &str = "SELECT COUNT(*) AS n, \
     CAST(COALESCE(MAX(CASE WHEN c.relispartition THEN 1 ELSE 0 END), 0) AS BIGINT) AS attached \
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
     WHERE c.relname = $1 AND n.nspname = current_schema()";

/// One period's partitions, being rebuilt.
pub(crate) struct Staging {
    period: String,
    /// `2026_10` for `2026-10`.
    suffix: String,
    /// The tables rebuilt: all of [`PERIOD_TABLES`], or some of them in the same order.
    tables: &'static [&'static str],
}

impl Staging {
    /// A period name becomes part of table names and of a partition bound, so only
    /// `YYYY-MM` (digits and one dash) is accepted.
    pub(crate) fn new(period: &str) -> StoreResult<Staging> {
        Staging::of(period, &PERIOD_TABLES)
    }

    /// [`Staging::new`] of some of the tables (a restore), listed in [`PERIOD_TABLES`]' order.
    pub(crate) fn of(period: &str, tables: &'static [&'static str]) -> StoreResult<Staging> {
        let valid = period.len() == 7
            && period.bytes().enumerate().all(|(i, b)| if i == 4 { b == b'-' } else { b.is_ascii_digit() });
        if !valid {
            return Err(StoreError::Invalid(format!("billing period {period:?} is not YYYY-MM")));
        }
        Ok(Staging { period: period.to_string(), suffix: period.replace('-', "_"), tables })
    }

    /// The tables rebuilt, in the order their parents are locked.
    pub(crate) fn tables(&self) -> &'static [&'static str] {
        self.tables
    }

    /// The live partition of `table` for the period.
    pub(crate) fn partition(&self, table: &str) -> String {
        format!("{table}_p{}", self.suffix)
    }

    /// The table the period's new rows of `table` are written to until the swap.
    pub(crate) fn staged(&self, table: &str) -> String {
        format!("{table}_p{}_next", self.suffix)
    }

    /// Where rows of `table` go: its staged table when it is partitioned, else itself.
    pub(crate) fn target<'a>(&self, table: &'a str) -> Cow<'a, str> {
        if self.tables.contains(&table) { Cow::Owned(self.staged(table)) } else { Cow::Borrowed(table) }
    }

    /// The statements that make each staged table: the parent's columns and defaults, and a
    /// check that every row is the period's, so attaching it needs no scan.
    pub(crate) fn create_statements(&self) -> Vec<String> {
        self.tables
            .iter()
            .flat_map(|table| {
                let staged = self.staged(table);
                [
                    format!("CREATE TABLE {staged} (LIKE {table} INCLUDING DEFAULTS)"),
                    format!(
                        "ALTER TABLE {staged} ADD CONSTRAINT {staged}_period CHECK (period = '{}')",
                        self.period
                    ),
                ]
            })
            .collect()
    }

    /// The parent's index `definition` (as `pg_indexes` gives it) built on `table`'s staged
    /// table as its `ordinal`th index, so attaching finds it instead of building it under the
    /// parent's lock.
    pub(crate) fn index_statement(&self, table: &str, ordinal: usize, definition: &str) -> Option<String> {
        let unique = if definition.starts_with("CREATE UNIQUE") { "UNIQUE " } else { "" };
        let using = definition.find(" USING ")?;
        let staged = self.staged(table);
        Some(format!("CREATE {unique}INDEX {staged}_{ordinal} ON {staged}{}", &definition[using..]))
    }

    /// Detaching and dropping the period's partition of `table`, when it is `attached`.
    pub(crate) fn drop_statements(&self, table: &str, attached: bool) -> Vec<String> {
        if !attached {
            return Vec::new();
        }
        let partition = self.partition(table);
        vec![format!("ALTER TABLE {table} DETACH PARTITION {partition}"), format!("DROP TABLE {partition}")]
    }

    /// The swap of one table: the old partition out (when there is one), the staged one in
    /// under the partition's name, with its `indexes` and its check renamed to match.
    pub(crate) fn swap_statements(
        &self,
        table: &str,
        old_partition_attached: bool,
        indexes: usize,
    ) -> Vec<String> {
        let (partition, staged) = (self.partition(table), self.staged(table));
        let mut statements = self.drop_statements(table, old_partition_attached);
        statements.push(format!("ALTER TABLE {staged} RENAME TO {partition}"));
        statements
            .push(format!("ALTER TABLE {partition} RENAME CONSTRAINT {staged}_period TO {partition}_period"));
        for ordinal in 0..indexes {
            statements.push(format!("ALTER INDEX {staged}_{ordinal} RENAME TO {partition}_{ordinal}"));
        }
        statements.push(format!(
            "ALTER TABLE {table} ATTACH PARTITION {partition} FOR VALUES IN ('{}')",
            self.period
        ));
        statements
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_period_swaps_its_partitions_by_name() {
        let staging = Staging::new("2026-10").unwrap();
        assert_eq!(staging.target("cost_pods"), "cost_pods_p2026_10_next");
        assert_eq!(staging.target("bill_lines"), "bill_lines");
        assert_eq!(
            staging.index_statement(
                "cost_pods",
                0,
                "CREATE UNIQUE INDEX cost_pods_pkey ON ONLY public.cost_pods USING btree (period, pod_id)"
            ),
            Some(
                "CREATE UNIQUE INDEX cost_pods_p2026_10_next_0 ON cost_pods_p2026_10_next USING btree (period, pod_id)"
                    .into()
            )
        );
        assert_eq!(
            staging.swap_statements("cost_pods", true, 1),
            [
                "ALTER TABLE cost_pods DETACH PARTITION cost_pods_p2026_10",
                "DROP TABLE cost_pods_p2026_10",
                "ALTER TABLE cost_pods_p2026_10_next RENAME TO cost_pods_p2026_10",
                "ALTER TABLE cost_pods_p2026_10 RENAME CONSTRAINT cost_pods_p2026_10_next_period TO cost_pods_p2026_10_period",
                "ALTER INDEX cost_pods_p2026_10_next_0 RENAME TO cost_pods_p2026_10_0",
                "ALTER TABLE cost_pods ATTACH PARTITION cost_pods_p2026_10 FOR VALUES IN ('2026-10')",
            ]
        );
        // Names and bounds are built from the period: anything but YYYY-MM is refused.
        for bad in ["2026-1", "2026-10'); DROP TABLE x; --", "2026_10", "abcd-ef"] {
            assert!(Staging::new(bad).is_err(), "{bad}");
        }
    }
}
