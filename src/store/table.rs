//! Each table's columns written once.
//!
//! [`table!`] ties a model struct to a table: the field list given to it is the column list,
//! in order, and the compiler checks it against the struct (a field missing from the list,
//! or a name that is not a field, does not build). From that one list come the table's
//! `INSERT` head, its `SELECT` of a period, the binder and the reader ([`Table`]).
//! [`from_row!`] does the reading half for the rows of a query (sums, joins).
//!
//! A field reads and binds by its Rust type ([`ReadValue`], [`BindValue`]): `i64`, `f64`,
//! `String`, `bool` (stored as 0/1), nullable integers and text, bytes, and the enums stored by name.

use std::sync::LazyLock;

use super::model::{LineCategory, PurchaseOption};
use super::sql::{BulkInsert, PushRow, ReadRow};
use crate::domain::runs::{RunKind, RunStatus};

/// A value read from a named column of either backend's row.
pub(crate) trait ReadValue: Sized {
    fn read(row: &impl ReadRow, column: &str) -> Result<Self, sqlx::Error>;
}

/// A value bound as the next parameter of an `INSERT` row.
pub(crate) trait BindValue {
    fn bind<'a>(&'a self, row: &mut impl PushRow<'a>);
}

impl ReadValue for i64 {
    fn read(row: &impl ReadRow, column: &str) -> Result<Self, sqlx::Error> {
        row.int(column)
    }
}

impl BindValue for i64 {
    fn bind<'a>(&'a self, row: &mut impl PushRow<'a>) {
        row.int(*self);
    }
}

/// Money newtypes are stored as their integer amount (nano- or micro-dollars, as the
/// column's name says).
macro_rules! stored_as_integer {
    ($($unit:ty),+) => {$(
        impl ReadValue for $unit {
            fn read(row: &impl ReadRow, column: &str) -> Result<Self, sqlx::Error> {
                row.int(column).map(<$unit>::from)
            }
        }

        impl BindValue for $unit {
            fn bind<'a>(&'a self, row: &mut impl PushRow<'a>) {
                row.int(self.0);
            }
        }

        impl ReadValue for Option<$unit> {
            fn read(row: &impl ReadRow, column: &str) -> Result<Self, sqlx::Error> {
                Ok(row.nullable_int(column)?.map(<$unit>::from))
            }
        }

        impl BindValue for Option<$unit> {
            fn bind<'a>(&'a self, row: &mut impl PushRow<'a>) {
                row.nullable_int(self.map(|amount| amount.0));
            }
        }
    )+};
}
stored_as_integer!(crate::money::Nanos, crate::money::Micros);

impl ReadValue for f64 {
    fn read(row: &impl ReadRow, column: &str) -> Result<Self, sqlx::Error> {
        row.float(column)
    }
}

impl BindValue for f64 {
    fn bind<'a>(&'a self, row: &mut impl PushRow<'a>) {
        row.float(*self);
    }
}

impl ReadValue for String {
    fn read(row: &impl ReadRow, column: &str) -> Result<Self, sqlx::Error> {
        row.text(column)
    }
}

impl BindValue for String {
    fn bind<'a>(&'a self, row: &mut impl PushRow<'a>) {
        row.text(self);
    }
}

/// Stored as a BLOB (Postgres: BYTEA).
impl ReadValue for Vec<u8> {
    fn read(row: &impl ReadRow, column: &str) -> Result<Self, sqlx::Error> {
        row.bytes(column)
    }
}

impl BindValue for Vec<u8> {
    fn bind<'a>(&'a self, row: &mut impl PushRow<'a>) {
        row.bytes(self);
    }
}

/// Stored as an integer 0 or 1 (SQLite has no boolean).
impl ReadValue for bool {
    fn read(row: &impl ReadRow, column: &str) -> Result<Self, sqlx::Error> {
        Ok(row.int(column)? != 0)
    }
}

impl BindValue for bool {
    fn bind<'a>(&'a self, row: &mut impl PushRow<'a>) {
        row.int(i64::from(*self));
    }
}

impl ReadValue for Option<i64> {
    fn read(row: &impl ReadRow, column: &str) -> Result<Self, sqlx::Error> {
        row.nullable_int(column)
    }
}

impl BindValue for Option<i64> {
    fn bind<'a>(&'a self, row: &mut impl PushRow<'a>) {
        row.nullable_int(*self);
    }
}

impl ReadValue for Option<String> {
    fn read(row: &impl ReadRow, column: &str) -> Result<Self, sqlx::Error> {
        row.nullable_text(column)
    }
}

/// Enums stored by name: read with `FromStr` (an unknown name is a decode error that says
/// which), bound with `as_str`.
macro_rules! stored_by_name {
    ($($enum:ty),+) => {$(
        impl ReadValue for $enum {
            fn read(row: &impl ReadRow, column: &str) -> Result<Self, sqlx::Error> {
                row.text(column)?.parse().map_err(|e: String| sqlx::Error::Decode(e.into()))
            }
        }

        impl BindValue for $enum {
            fn bind<'a>(&'a self, row: &mut impl PushRow<'a>) {
                row.text(self.as_str());
            }
        }
    )+};
}
stored_by_name!(
    LineCategory,
    PurchaseOption,
    RunKind,
    RunStatus,
    super::model::WorkloadClass,
    crate::domain::settings::ChargeBasis
);

/// A row type read from a query by column name.
pub(crate) trait FromRow: Sized {
    fn from_row(row: &impl ReadRow) -> Result<Self, sqlx::Error>;
}

/// A row type stored in one table, one column per field, in the order given to [`table!`].
pub(crate) trait Table: FromRow + Sync {
    /// Binds this row's fields (not the period column of a table keyed by period).
    fn bind<'a>(&'a self, row: &mut impl PushRow<'a>);

    /// The table's SQL, built once from its column list.
    fn sql() -> &'static TableSql;
}

/// The statements a [`Table`] generates.
pub(crate) struct TableSql {
    /// Whether the table's first column is `period`, bound apart from the row's fields (the
    /// rows of a period's aggregates do not carry it).
    pub(crate) keyed_by_period: bool,
    pub(crate) table: String,
    order: String,
    /// `(period, a, b) `: the columns an `INSERT` names.
    insert_columns: String,
    columns: usize,
    /// The fields' columns, comma-separated, for queries of their own.
    pub(crate) column_list: String,
    /// The fields' columns, in the order [`Table::bind`] binds them.
    pub(crate) fields: Vec<String>,
    /// Every row of the period `$1`, in the table's stable order.
    pub(crate) select_period: String,
    /// Removes the period `$1`'s rows.
    pub(crate) delete_period: String,
}

impl TableSql {
    pub(crate) fn new(table: &str, keyed_by_period: bool, fields: &[&str], order: &str) -> Self {
        let column_list = fields.join(", ");
        let key = if keyed_by_period { "period, " } else { "" };
        Self {
            keyed_by_period,
            insert_columns: format!("({key}{column_list}) "),
            columns: fields.len() + usize::from(keyed_by_period),
            select_period: format!("SELECT {column_list} FROM {table} WHERE period = $1 ORDER BY {order}"),
            delete_period: format!("DELETE FROM {table} WHERE period = $1"),
            table: table.to_string(),
            order: order.to_string(),
            column_list,
            fields: fields.iter().map(|field| field.to_string()).collect(),
        }
    }

    /// `SELECT` of every field's column with the given `WHERE …`, in the table's stable order.
    pub(crate) fn select_where(&self, condition: &str) -> String {
        format!("SELECT {} FROM {} WHERE {condition} ORDER BY {}", self.column_list, self.table, self.order)
    }

    /// `SELECT … WHERE condition` in no order: for millions of rows, sorting in the database
    /// (a temporary B-tree in SQLite) costs several times the read; the caller sorts.
    pub(crate) fn select_where_unordered(&self, condition: &str) -> String {
        format!("SELECT {} FROM {} WHERE {condition}", self.column_list, self.table)
    }

    /// `SELECT` of every row, ordered by `order`.
    pub(crate) fn select_ordered(&self, order: &str) -> String {
        format!("SELECT {} FROM {} ORDER BY {order}", self.column_list, self.table)
    }

    /// The multi-row `INSERT` head and how many values a row binds (the store writes through
    /// [`TableSql::insert_into`], naming the table it writes to).
    #[cfg(test)]
    pub(crate) fn insert(&self) -> BulkInsert {
        self.insert_into(&self.table)
    }

    /// [`TableSql::insert`] into another table with the same columns.
    pub(crate) fn insert_into(&self, table: &str) -> BulkInsert {
        BulkInsert { head: format!("INSERT INTO {table} {}", self.insert_columns), columns: self.columns }
    }
}

/// Lazily built SQL, for [`table!`]'s per-table static.
pub(crate) type LazySql = LazyLock<TableSql>;

/// The column a field reads from: its own name unless given (`field = "column"`).
macro_rules! column_name {
    ($field:ident) => {
        stringify!($field)
    };
    ($field:ident, $column:literal) => {
        $column
    };
}
pub(crate) use column_name;

/// `from_row!(Row { field, field = "column", ... })`: reads `Row` from a query's row by
/// column name.
macro_rules! from_row {
    ($row:ident { $($field:ident $(= $column:literal)?),+ $(,)? }) => {
        impl $crate::store::table::FromRow for $row {
            fn from_row(row: &impl $crate::store::sql::ReadRow) -> Result<Self, sqlx::Error> {
                Ok(Self {
                    $($field: $crate::store::table::ReadValue::read(
                        row,
                        $crate::store::table::column_name!($field $(, $column)?),
                    )?),+
                })
            }
        }
    };
}
pub(crate) use from_row;

/// `table!(Row in "table" [keyed by period] { field, ... } order by "columns")`: `Row` is
/// stored in `table`, one column per listed field in that order (after a leading `period`
/// column when keyed by period); reads of a period are ordered by `columns`.
macro_rules! table {
    ($row:ident in $table:literal keyed by period { $($fields:tt)+ } order by $order:literal) => {
        $crate::store::table::table!(@impl $row, $table, true, { $($fields)+ }, $order);
    };
    ($row:ident in $table:literal { $($fields:tt)+ } order by $order:literal) => {
        $crate::store::table::table!(@impl $row, $table, false, { $($fields)+ }, $order);
    };
    (@impl $row:ident, $table:literal, $keyed:literal, { $($field:ident $(= $column:literal)?),+ $(,)? }, $order:literal) => {
        $crate::store::table::from_row!($row { $($field $(= $column)?),+ });

        impl $crate::store::table::Table for $row {
            fn bind<'a>(&'a self, row: &mut impl $crate::store::sql::PushRow<'a>) {
                $($crate::store::table::BindValue::bind(&self.$field, row);)+
            }

            fn sql() -> &'static $crate::store::table::TableSql {
                static SQL: $crate::store::table::LazySql = $crate::store::table::LazySql::new(|| {
                    $crate::store::table::TableSql::new(
                        $table,
                        $keyed,
                        &[$($crate::store::table::column_name!($field $(, $column)?)),+],
                        $order,
                    )
                });
                &SQL
            }
        }
    };
}
pub(crate) use table;

#[cfg(test)]
mod tests {
    use super::TableSql;

    #[test]
    fn statements_come_from_one_column_list() {
        let sql = TableSql::new("t", true, &["a", "b"], "a");
        assert_eq!(sql.insert().head, "INSERT INTO t (period, a, b) ");
        assert_eq!(sql.columns, 3);
        assert_eq!(sql.select_period, "SELECT a, b FROM t WHERE period = $1 ORDER BY a");
        assert_eq!(sql.delete_period, "DELETE FROM t WHERE period = $1");
        let unkeyed = TableSql::new("u", false, &["x"], "x");
        assert_eq!(unkeyed.insert().head, "INSERT INTO u (x) ");
        assert_eq!(unkeyed.columns, 1);
    }
}
