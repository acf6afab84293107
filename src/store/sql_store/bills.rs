//! Bills from every provider and format, several a month, each replaced alone.

use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::accounts::INSERT_AUDIT;
use super::{Backend, SqlStore};
use crate::store::sql::ReadRow;
use crate::store::table::Table;
use crate::store::*;

const DELETE_BILL: &str =
    "DELETE FROM bills WHERE period = $1 AND provider = $2 AND billing_account = $3 AND format = $4";

const DELETE_RATE: &str =
    "DELETE FROM fx_rates WHERE from_currency = $1 AND to_currency = $2 AND effective_from = $3";

const SELECT_PERIODS_IN_CURRENCY: &str =
    "SELECT DISTINCT period FROM bills WHERE currency = $1 AND period >= $2 ORDER BY period";

/// The columns a charge group is summed by over the month's days.
macro_rules! month_group {
    () => {
        "provider, billing_account, sub_account_id, sub_account_name, service_name, service_category, \
         charge_category, charge_class, pricing_category, commitment_discount_status, region, resource_type, \
         consumed_unit, tags, gpu_model, commitment_discount_id, commitment_discount_type, \
         commitment_discount_category"
    };
}
const MONTH_CHARGES: &str = concat!(
    "SELECT ",
    month_group!(),
    ", MIN(day) AS day, SUM(gpu_hours) AS gpu_hours, SUM(consumed_quantity) AS consumed_quantity, \
     CAST(SUM(charges) AS BIGINT) AS charges, CAST(SUM(billed_nanos) AS BIGINT) AS billed_nanos, \
     CAST(SUM(effective_nanos) AS BIGINT) AS effective_nanos, CAST(SUM(list_nanos) AS BIGINT) AS list_nanos, \
     CAST(SUM(contracted_nanos) AS BIGINT) AS contracted_nanos \
     FROM bill_charges WHERE period = $1 AND ($2 = '' OR provider = $2) GROUP BY ",
    month_group!(),
    " ORDER BY ",
    month_group!()
);

const DELETE_VM_DAYS: &str =
    "DELETE FROM bill_vm_days WHERE period = $1 AND provider = $2 AND billing_account = $3";

const DELETE_CHARGES: &str =
    "DELETE FROM bill_charges WHERE period = $1 AND provider = $2 AND billing_account = $3";

#[async_trait::async_trait]
impl<B: Backend> BillStore for SqlStore<B>
where
    <B::Db as Database>::Row: ReadRow,
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
    for<'q> <B::Db as Database>::Arguments<'q>: IntoArguments<'q, B::Db> + Default,
    for<'q> i64: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<i64>: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> f64: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> String: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> &'q str: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> &'q [u8]: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<&'q str>: Encode<'q, B::Db> + Type<B::Db>,
{
    async fn bills(&self, period: Option<&str>) -> StoreResult<Vec<Bill>> {
        const CONTEXT: &str = "reading the stored bills";
        match period {
            Some(period) => {
                let sql = Bill::sql().select_where("period = $1");
                self.rows(sqlx::query(&sql).bind(period), CONTEXT).await
            }
            None => {
                let sql = Bill::sql().select_where("1 = 1");
                self.rows(sqlx::query(&sql), CONTEXT).await
            }
        }
    }

    async fn bill_charges(&self, period: &str, provider: Option<&str>) -> StoreResult<Vec<BillCharge>> {
        let sql = BillCharge::sql().select_where("period = $1 AND ($2 = '' OR provider = $2)");
        self.rows(
            sqlx::query(&sql).bind(period).bind(provider.unwrap_or("")),
            "reading a period's FOCUS charges",
        )
        .await
    }

    async fn gpu_charges(&self, period: &str) -> StoreResult<Vec<BillCharge>> {
        let sql = BillCharge::sql().select_where("period = $1 AND gpu_model <> ''");
        self.rows(sqlx::query(&sql).bind(period), "reading a period's GPU machines' charges").await
    }

    async fn month_charges(&self, period: &str, provider: Option<&str>) -> StoreResult<Vec<BillCharge>> {
        self.rows(
            sqlx::query(MONTH_CHARGES).bind(period).bind(provider.unwrap_or("")),
            "reading a period's FOCUS charges by month",
        )
        .await
    }

    async fn bill_vm_costs(&self, period: &str) -> StoreResult<Vec<BillVmCost>> {
        const CONTEXT: &str = "reading a period's virtual machines' costs";
        let days = self.bill_vm_days(period).await?;
        let mut costs = Vec::with_capacity(days.len() * 24);
        for day in &days {
            let unpacked = day.costs().map_err(|e| sqlx::Error::Decode(e.into())).context(CONTEXT)?;
            costs.extend(unpacked);
        }
        Ok(costs)
    }

    async fn bill_vm_days(&self, period: &str) -> StoreResult<Vec<BillVmDay>> {
        // Sorted here: SQLite sorting the month's packed days (87 MB in a large month) took
        // six times the read.
        let sql = BillVmDay::sql().select_where_unordered("period = $1");
        let mut days: Vec<BillVmDay> =
            self.rows(sqlx::query(&sql).bind(period), "reading a period's virtual machines' costs").await?;
        days.sort_unstable_by(|a, b| {
            (&a.provider, &a.billing_account, &a.instance, a.day, &a.charge_key).cmp(&(
                &b.provider,
                &b.billing_account,
                &b.instance,
                b.day,
                &b.charge_key,
            ))
        });
        Ok(days)
    }

    async fn replace_bills(&self, bills: &[BillReplacement]) -> StoreResult<()> {
        const CONTEXT: &str = "storing the bills";
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        Self::lock_for_transaction(&mut tx, "bills").await.context(CONTEXT)?;
        for (bill, charges, vms) in bills {
            let key = [bill.period.as_str(), bill.provider.as_str(), bill.billing_account.as_str()];
            sqlx::query(DELETE_BILL)
                .bind(key[0])
                .bind(key[1])
                .bind(key[2])
                .bind(bill.format.as_str())
                .execute(&mut *tx)
                .await
                .context(CONTEXT)?;
            // Only FOCUS bills have charges here; a CUR bill's lines are its period's tables.
            if bill.format == "focus" {
                for delete in [DELETE_CHARGES, DELETE_VM_DAYS] {
                    sqlx::query(delete)
                        .bind(key[0])
                        .bind(key[1])
                        .bind(key[2])
                        .execute(&mut *tx)
                        .await
                        .context(CONTEXT)?;
                }
                Self::insert(&mut tx, &bill.period, charges).await.context(CONTEXT)?;
                Self::insert(&mut tx, &bill.period, vms).await.context(CONTEXT)?;
            }
            Self::insert(&mut tx, "", std::slice::from_ref(bill)).await.context(CONTEXT)?;
        }
        // The months whose bills changed are computed again.
        let mut periods: Vec<String> = bills.iter().map(|(bill, ..)| bill.period.clone()).collect();
        periods.dedup();
        let revision = Self::next_revision(&mut tx).await.context(CONTEXT)?;
        Self::touch_periods(&mut tx, &periods, revision).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)
    }

    async fn fx_rates(&self) -> StoreResult<Vec<FxRate>> {
        let sql = FxRate::sql().select_where("1 = 1");
        self.rows(sqlx::query(&sql), "reading the exchange rates").await
    }

    async fn set_fx_rates(&self, rates: &[FxRate], username: &str) -> StoreResult<()> {
        const CONTEXT: &str = "storing exchange rates";
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        Self::lock_for_transaction(&mut tx, "fx-rates").await.context(CONTEXT)?;
        for rate in rates {
            sqlx::query(DELETE_RATE)
                .bind(rate.from_currency.as_str())
                .bind(rate.to_currency.as_str())
                .bind(rate.effective_from.as_str())
                .execute(&mut *tx)
                .await
                .context(CONTEXT)?;
            Self::insert(&mut tx, "", std::slice::from_ref(rate)).await.context(CONTEXT)?;
            let detail = format!(
                "exchange rate {} → {} = {} from {} ({})",
                rate.from_currency, rate.to_currency, rate.rate, rate.effective_from, rate.source
            );
            sqlx::query(INSERT_AUDIT)
                .bind(rate.set_at)
                .bind(username)
                .bind("")
                .bind("settings_changed")
                .bind(detail.as_str())
                .execute(&mut *tx)
                .await
                .context(CONTEXT)?;
        }
        // Months with a bill in a currency whose rates changed are computed again.
        let mut periods = Vec::new();
        for rate in rates {
            let rows = sqlx::query(SELECT_PERIODS_IN_CURRENCY)
                .bind(rate.from_currency.as_str())
                .bind(rate.effective_from.as_str())
                .fetch_all(&mut *tx)
                .await
                .context(CONTEXT)?;
            for row in rows {
                periods.push(row.text("period").context(CONTEXT)?);
            }
        }
        periods.sort();
        periods.dedup();
        let revision = Self::next_revision(&mut tx).await.context(CONTEXT)?;
        Self::touch_periods(&mut tx, &periods, revision).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)
    }
}
