//! The SQL both backends run, and the code that turns rows into model types and model types
//! into bind parameters.
//!
//! Statements use `$1, $2` placeholders and no backend-specific syntax, so SQLite and Postgres
//! run the same text against the same table and column names (`migrations/<backend>/`).
//! Reads order by every key column, so both backends return rows in the same order.
//! [`ReadRow`] and [`PushRow`] hide which backend a row comes from or goes to, so each
//! mapping below is written once.

use sqlx::query_builder::Separated;
use sqlx::{ColumnIndex, Database, Decode, Encode, Row, Type};

use crate::domain::settings::SettingVersion;

use super::table::{Table, from_row, table};

use super::model::{
    Bill, BillCharge, BillDay, BillLine, BillVmDay, CeCost, CeDay, CommitmentMonth, CostFact, CostPeriod,
    FactBatch, FactRecord, GpuAllocation, GpuUsage, InferenceUsage, InstanceHour, KubeNodeHour, KubePodDay,
    KubePodHour, NamespaceCost, OtherCost, PeriodSummary, PodCost, PodRecord, PodWorkload, UsageHour,
    WorkloadCost,
};
use crate::domain::alerts::{Alert, AlertEvent, Webhook};
use crate::domain::fx::FxRate;
use crate::domain::plans::Plan;
use crate::domain::runs::IngestRun;

// ---- Reports ----

/// Per-namespace sums from the pod-day aggregates, summed per pod before the join (one join
/// per pod; CAST: Postgres sums BIGINT as NUMERIC); `$2` is a cluster name or '' for every
/// cluster, `$3` is 1 to keep the cluster in the grouping (else it reads as ''). Pod-days keep
/// net and public on-demand cost as split + unused totals, so they read as the split part.
pub(crate) const SELECT_NAMESPACE_COSTS: &str = "SELECT \
     CASE WHEN $3 = 1 THEN p.cluster ELSE '' END AS grouped_cluster, p.namespace AS namespace, \
     CAST(SUM(d.split_cost_nanos) AS BIGINT) AS split_cost_nanos, \
     CAST(SUM(d.unused_cost_nanos) AS BIGINT) AS unused_cost_nanos, \
     CAST(SUM(d.net_cost_nanos) AS BIGINT) AS net_split_cost_nanos, \
     CAST(0 AS BIGINT) AS net_unused_cost_nanos, \
     CAST(SUM(d.public_on_demand_cost_nanos) AS BIGINT) AS public_on_demand_split_cost_nanos, \
     CAST(0 AS BIGINT) AS public_on_demand_unused_cost_nanos \
     FROM (SELECT pod_id, SUM(split_cost_nanos) AS split_cost_nanos, \
           SUM(unused_cost_nanos) AS unused_cost_nanos, SUM(net_cost_nanos) AS net_cost_nanos, \
           SUM(public_on_demand_cost_nanos) AS public_on_demand_cost_nanos \
           FROM cost_pod_days WHERE period = $1 GROUP BY pod_id) d \
     JOIN cost_pods p ON p.period = $1 AND p.pod_id = d.pod_id \
     WHERE ($2 = '' OR p.cluster = $2) \
     GROUP BY grouped_cluster, p.namespace ORDER BY grouped_cluster, p.namespace";

// ---- Ingest runs ----

pub(crate) const INSERT_INGEST_RUN: &str = "INSERT INTO ingest_runs \
     (kind, source, period, data_version, status, started_at, host, pid) \
     VALUES ($1, $2, $3, $4, 'running', $5, $6, $7) RETURNING id";

pub(crate) const SELECT_RUNNING_RUNS: &str =
    "SELECT id, pid FROM ingest_runs WHERE status = 'running' AND host = $1 ORDER BY id";

/// Closes a run whose process is gone; a run that finished meanwhile is left alone.
pub(crate) const INTERRUPT_RUN: &str = "UPDATE ingest_runs SET status = 'interrupted', finished_at = $1, \
     error = $2 WHERE id = $3 AND status = 'running'";

pub(crate) const FINISH_INGEST_RUN: &str = "UPDATE ingest_runs \
     SET status = $1, rows_read = $2, rows_written = $3, finished_at = $4, error = $5, \
     reconciliation = $6 WHERE id = $7";

pub(crate) const SELECT_INGEST_RUNS: &str = "SELECT id, kind, source, period, data_version, \
     status, rows_read, rows_written, started_at, finished_at, error, reconciliation, host, pid \
     FROM ingest_runs ORDER BY id DESC LIMIT $1";

// ---- Revisions ----

/// Takes the next revision. On Postgres the row stays locked until commit, so writers run it
/// last, just before committing.
pub(crate) const NEXT_REVISION: &str =
    "UPDATE data_revision SET value = value + 1 WHERE id = 1 RETURNING value";

pub(crate) const SELECT_REVISION: &str = "SELECT value FROM data_revision WHERE id = 1";

/// Marks a period's inputs changed at revision `$2`.
pub(crate) const TOUCH_PERIOD_INPUTS: &str = "INSERT INTO period_inputs (period, revision) VALUES ($1, $2) \
     ON CONFLICT (period) DO UPDATE SET revision = excluded.revision";

pub(crate) const SELECT_PERIOD_INPUT_REVISION: &str = "SELECT revision FROM period_inputs WHERE period = $1";

pub(crate) const SELECT_ROLLUP_REVISION: &str = "SELECT revision FROM rollup_periods WHERE period = $1";

pub(crate) const SELECT_ROLLUP_INPUT_REVISION: &str =
    "SELECT input_revision FROM rollup_periods WHERE period = $1";

/// Billing periods whose bill is stored and whose rollups are missing or older than their inputs.
pub(crate) const SELECT_PENDING_PERIODS: &str = "SELECT c.period AS period FROM cost_periods c \
     LEFT JOIN period_inputs i ON i.period = c.period \
     LEFT JOIN rollup_periods r ON r.period = c.period \
     WHERE (r.period IS NULL OR r.input_revision < COALESCE(i.revision, 1)) \
     AND NOT EXISTS (SELECT 1 FROM archived_periods a WHERE a.period = c.period) ORDER BY c.period";

/// What the CUR reader stores of a period changed at version 2 (bill lines, unallocated EC2,
/// other cost without discounts, credits, refunds and tax) and at version 3 (the bill per day,
/// service and account, for the Cost Explorer cross-check), and at version 4 (the usage
/// account of instance-hours and pods, account names), and at version 5 (the vCPU-hours and
/// memory GB-hours of pod-days), and at version 6 (instance-hours by purchase option, and
/// pod-days on instances billed under several), and at version 7 (each Savings Plan's and
/// reservation's month): a period stored by an older version is read again even when its
/// data version has not changed.
pub(crate) const READER_VERSION: i64 = 7;

pub(crate) const SELECT_COST_DATA_VERSION: &str =
    "SELECT data_version FROM cost_periods WHERE period = $1 AND reader_version >= $2";

pub(crate) const SELECT_LAST_DATA_VERSION: &str = "SELECT data_version FROM ingest_runs \
     WHERE kind = $1 AND period = $2 AND status = 'succeeded' ORDER BY id DESC LIMIT 1";

// ---- Cost periods ----

/// The tables a period's rows are cleared from besides the rollups; children first, so a
/// foreign key added later would still hold. A period delivered again is no longer archived.
pub(crate) const PERIOD_ROW_TABLES: [&str; 9] = [
    "cost_facts",
    "cost_pods",
    "instance_hours",
    "other_costs",
    "bill_lines",
    "bill_days",
    "commitments",
    "archived_periods",
    "cost_periods",
];

pub(crate) const INSERT_COST_PERIOD: &str = "INSERT INTO cost_periods \
     (period, data_version, bill_unblended_micros, bill_amortized_micros, ingested_at, cost_fact_rows, \
     net_amortized_micros, kubernetes_micros, unallocated_ec2_micros, currency, reader_version, \
     billing_account) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

pub(crate) const SELECT_COST_PERIOD: &str = "SELECT period, data_version, \
     bill_unblended_micros, bill_amortized_micros, net_amortized_micros, kubernetes_micros, \
     unallocated_ec2_micros, currency, billing_account FROM cost_periods WHERE period = $1";

pub(crate) const SELECT_PERIODS: &str = "SELECT p.period, p.data_version, \
     p.bill_unblended_micros, p.bill_amortized_micros, p.unallocated_ec2_micros, p.ingested_at, \
     p.cost_fact_rows FROM cost_periods p ORDER BY p.period DESC";

pub(crate) const SELECT_COST_FACTS: &str = "SELECT f.hour, p.cluster, p.namespace, p.workload, \
     p.workload_type, p.pod, p.node, p.instance_id, p.instance_type, p.gpu_model, p.purchase_option, \
     f.resource, f.reserved_usage, f.actual_usage, f.split_usage, f.split_usage_ratio, \
     f.split_cost_nanos, f.unused_cost_nanos, f.net_split_cost_nanos, f.net_unused_cost_nanos, \
     f.public_on_demand_split_cost_nanos, f.public_on_demand_unused_cost_nanos, p.labels \
     FROM cost_facts f JOIN cost_pods p ON p.period = f.period AND p.pod_id = f.pod_id \
     WHERE f.period = $1 \
     ORDER BY f.hour, p.instance_id, p.namespace, p.pod, f.resource";

// ---- Usage ----

/// A window's rows, of one cluster (`$3`) or of all (`$3` empty).
pub(crate) const DELETE_GPU_USAGE_WINDOW: &str =
    "DELETE FROM gpu_usage WHERE hour >= $1 AND hour < $2 AND ($3 = '' OR cluster = $3)";

pub(crate) const DELETE_INFERENCE_USAGE_WINDOW: &str =
    "DELETE FROM inference_usage WHERE hour >= $1 AND hour < $2 AND ($3 = '' OR cluster = $3)";

/// Accelerator split usage per pod and hour, with the pod's workload and instance, from the
/// GPU pod-hour aggregates.
pub(crate) const SELECT_GPU_ALLOCATIONS: &str = "SELECT h.hour, p.namespace, p.pod, p.workload, \
     p.gpu_model, p.purchase_option, SUM(h.gpu_hours) AS gpu_hours \
     FROM cost_gpu_pod_hours h JOIN cost_pods p ON p.period = h.period AND p.pod_id = h.pod_id \
     WHERE h.period = $1 \
     GROUP BY h.hour, p.namespace, p.pod, p.workload, p.gpu_model, p.purchase_option \
     ORDER BY h.hour, p.namespace, p.pod";

/// Split + unused cost per workload from the pod-day aggregates, summed per pod first (one
/// join per pod; CAST: Postgres sums BIGINT as NUMERIC).
pub(crate) const SELECT_WORKLOAD_COSTS: &str = "SELECT p.namespace, p.workload, \
     CAST(SUM(c.total_cost_nanos) AS BIGINT) AS total_cost_nanos \
     FROM (SELECT pod_id, SUM(split_cost_nanos + unused_cost_nanos) AS total_cost_nanos \
           FROM cost_pod_days WHERE period = $1 GROUP BY pod_id) c \
     JOIN cost_pods p ON p.period = $1 AND p.pod_id = c.pod_id \
     GROUP BY p.namespace, p.workload ORDER BY p.namespace, p.workload";

/// One workload's pods over `[$4, $5)` of period `$1`, from the pod-day aggregates: the
/// workload `$3` and every workload whose name starts with `$6` (`$3-`). A prefix by `substr`,
/// not by a range of names: Postgres may order text by its locale, where `-` and `.` need
/// not be neighbours.
/// A workload's pods first (by the pods' workload index), then their days: SQLite keeps the
/// order of a CROSS JOIN, where a plain JOIN led it to scan the whole month's pod-days (0.3 s
/// on a churny month against 0.03 s); Postgres plans it as any inner join.
pub(crate) const SELECT_POD_COSTS: &str = "SELECT p.workload, p.cluster, p.usage_account_id AS account, p.pod, \
     p.node, p.instance_type, p.purchase_option, CAST(SUM(d.gpu_hours) AS DOUBLE PRECISION) AS gpu_hours, \
     CAST(SUM(d.gpu_cost_nanos) AS BIGINT) AS gpu_cost_nanos, \
     CAST(SUM(d.split_cost_nanos) AS BIGINT) AS split_cost_nanos, \
     CAST(SUM(d.unused_cost_nanos) AS BIGINT) AS unused_cost_nanos, \
     CAST(SUM(d.net_cost_nanos) AS BIGINT) AS net_cost_nanos, \
     CAST(SUM(d.public_on_demand_cost_nanos) AS BIGINT) AS public_on_demand_cost_nanos \
     FROM cost_pods p CROSS JOIN cost_pod_days d \
     WHERE d.period = p.period AND d.pod_id = p.pod_id \
     AND p.period = $1 AND p.namespace = $2 \
     AND (p.workload = $3 OR substr(p.workload, 1, length($6)) = $6) AND d.day >= $4 AND d.day < $5 \
     GROUP BY p.workload, p.cluster, p.usage_account_id, p.pod, p.node, p.instance_type, p.purchase_option \
     ORDER BY p.pod, p.cluster, p.node";

pub(crate) const SELECT_POD_WORKLOADS: &str = "SELECT DISTINCT namespace, pod, workload \
     FROM cost_pods WHERE period = $1 ORDER BY namespace, pod, workload";

/// CAST: Postgres sums BIGINT as NUMERIC.
/// Unused commitment of a period by line type (Savings Plans, reservations), and its discounts.
pub(crate) const SELECT_UNUSED_COMMITMENT: &str = "SELECT \
     CAST(COALESCE(SUM(CASE WHEN line_item_type = 'SavingsPlanRecurringFee' THEN amortized_micros ELSE 0 END), 0) AS BIGINT) AS savings_plan, \
     CAST(COALESCE(SUM(CASE WHEN line_item_type = 'RIFee' THEN amortized_micros ELSE 0 END), 0) AS BIGINT) AS reservation, \
     CAST(COALESCE(SUM(CASE WHEN category = 'discount' THEN amortized_micros ELSE 0 END), 0) AS BIGINT) AS discount \
     FROM bill_lines WHERE period = $1";

pub(crate) const SELECT_OTHER_COST_TOTAL: &str = "SELECT \
     CAST(COALESCE(SUM(amortized_cost_micros), 0) AS BIGINT) AS total FROM other_costs WHERE period = $1";

// ---- Settings ----

pub(crate) const SELECT_SETTINGS: &str = "SELECT kind, key, effective_from, value, set_at FROM settings \
     ORDER BY kind, key, effective_from";

pub(crate) const DELETE_SETTING: &str =
    "DELETE FROM settings WHERE kind = $1 AND key = $2 AND effective_from = $3";

pub(crate) const INSERT_SETTING: &str =
    "INSERT INTO settings (kind, key, effective_from, value, set_at) VALUES ($1, $2, $3, $4, $5)";

// ---- Chargeback snapshots ----

pub(crate) const INSERT_CHARGEBACK_SNAPSHOT: &str =
    "INSERT INTO chargeback_snapshots (period, revision, replaced_at, clients) VALUES ($1, $2, $3, $4)";

pub(crate) const SELECT_CHARGEBACK_SNAPSHOTS: &str = "SELECT revision, replaced_at, clients \
     FROM chargeback_snapshots WHERE period = $1 ORDER BY revision DESC";

/// The head of a multi-row `INSERT` (up to `VALUES`) and how many values each row binds.
pub(crate) struct BulkInsert {
    pub(crate) head: String,
    pub(crate) columns: usize,
}

impl BulkInsert {
    /// How many rows fit in one statement without passing the backend's bind-parameter limit,
    /// when the period is written as a literal ([`period_literal`]) or bound with the rest.
    pub(crate) fn rows_per_statement(&self, max_binds: usize, literal_period: bool) -> usize {
        (max_binds / (self.columns - usize::from(literal_period))).max(1)
    }
}

/// Reads a column by name from a row of either backend.
pub(crate) trait ReadRow {
    fn int(&self, column: &str) -> Result<i64, sqlx::Error>;
    fn float(&self, column: &str) -> Result<f64, sqlx::Error>;
    fn text(&self, column: &str) -> Result<String, sqlx::Error>;
    fn nullable_int(&self, column: &str) -> Result<Option<i64>, sqlx::Error>;
    fn nullable_text(&self, column: &str) -> Result<Option<String>, sqlx::Error>;
    fn bytes(&self, column: &str) -> Result<Vec<u8>, sqlx::Error>;
}

impl<R> ReadRow for R
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    i64: Type<R::Database> + for<'r> Decode<'r, R::Database>,
    f64: Type<R::Database> + for<'r> Decode<'r, R::Database>,
    String: Type<R::Database> + for<'r> Decode<'r, R::Database>,
    Vec<u8>: Type<R::Database> + for<'r> Decode<'r, R::Database>,
{
    fn int(&self, column: &str) -> Result<i64, sqlx::Error> {
        self.try_get(column)
    }

    fn float(&self, column: &str) -> Result<f64, sqlx::Error> {
        self.try_get(column)
    }

    fn text(&self, column: &str) -> Result<String, sqlx::Error> {
        self.try_get(column)
    }

    fn nullable_int(&self, column: &str) -> Result<Option<i64>, sqlx::Error> {
        self.try_get(column)
    }

    fn nullable_text(&self, column: &str) -> Result<Option<String>, sqlx::Error> {
        self.try_get(column)
    }

    fn bytes(&self, column: &str) -> Result<Vec<u8>, sqlx::Error> {
        self.try_get(column)
    }
}

/// Binds the next value of one `VALUES (...)` tuple, for either backend.
pub(crate) trait PushRow<'args> {
    fn int(&mut self, value: i64) -> &mut Self;
    fn nullable_int(&mut self, value: Option<i64>) -> &mut Self;
    fn float(&mut self, value: f64) -> &mut Self;
    fn text(&mut self, value: &'args str) -> &mut Self;
    fn bytes(&mut self, value: &'args [u8]) -> &mut Self;
    /// A value written into the statement itself: only SQL made by [`period_literal`].
    fn literal(&mut self, sql: &str) -> &mut Self;
}

/// `'YYYY-MM'`, the period as an SQL literal, when `period` is made of digits and dashes
/// alone (so it cannot close the quotes); `None` for anything else, which is then bound.
pub(crate) fn period_literal(period: &str) -> Option<String> {
    let safe = !period.is_empty() && period.bytes().all(|b| b.is_ascii_digit() || b == b'-');
    safe.then(|| format!("'{period}'"))
}

impl<'args, DB> PushRow<'args> for Separated<'_, 'args, DB, &'static str>
where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB>,
    Option<i64>: Encode<'args, DB> + Type<DB>,
    f64: Encode<'args, DB> + Type<DB>,
    &'args str: Encode<'args, DB> + Type<DB>,
    &'args [u8]: Encode<'args, DB> + Type<DB>,
{
    fn int(&mut self, value: i64) -> &mut Self {
        self.push_bind(value)
    }

    fn nullable_int(&mut self, value: Option<i64>) -> &mut Self {
        self.push_bind(value)
    }

    fn float(&mut self, value: f64) -> &mut Self {
        self.push_bind(value)
    }

    fn text(&mut self, value: &'args str) -> &mut Self {
        self.push_bind(value)
    }

    fn bytes(&mut self, value: &'args [u8]) -> &mut Self {
        self.push_bind(value)
    }

    fn literal(&mut self, sql: &str) -> &mut Self {
        self.push(sql)
    }
}

/// A period's `cost_periods` row, without its rows in other tables.
pub(crate) fn cost_period(head: &impl ReadRow) -> Result<CostPeriod, sqlx::Error> {
    Ok(CostPeriod {
        period: head.text("period")?,
        data_version: head.text("data_version")?,
        bill_unblended_micros: head.int("bill_unblended_micros")?,
        bill_amortized_micros: head.int("bill_amortized_micros")?,
        net_amortized_micros: head.nullable_int("net_amortized_micros")?,
        kubernetes_micros: head.int("kubernetes_micros")?,
        unallocated_ec2_micros: head.int("unallocated_ec2_micros")?,
        currency: head.text("currency")?,
        billing_account: head.text("billing_account")?,
        ..CostPeriod::default()
    })
}

table!(BillLine in "bill_lines" keyed by period {
    billing_entity, invoice_id, usage_account_id, service, line_item_type, category,
    unblended_micros, amortized_micros, net_amortized_micros, usage_account_name,
} order by "billing_entity, invoice_id, usage_account_id, service, line_item_type");

table!(BillDay in "bill_days" keyed by period {
    day, service, usage_account_id, unblended_micros, amortized_micros,
} order by "day, service, usage_account_id");

table!(CommitmentMonth in "commitments" keyed by period {
    id, kind, offering, family, instance_type, region, purchase_term, payment_option, term_start, term_end,
    count, hours, fee_micros, used_micros,
} order by "id");

table!(Bill in "bills" {
    period, provider, billing_account, format, billing_account_name, focus_version, currency, source,
    data_version, rows_read, billed_nanos, effective_nanos, list_nanos, contracted_nanos, deviations,
    ingested_at,
} order by "period, provider, billing_account, format");

table!(BillCharge in "bill_charges" keyed by period {
    provider, billing_account, day, sub_account_id, sub_account_name, service_name, service_category,
    charge_category, charge_class, pricing_category, commitment_discount_status, region, resource_type,
    consumed_unit, tags, gpu_model, commitment_discount_id, commitment_discount_type,
    commitment_discount_category, gpu_hours, consumed_quantity, charges, billed_nanos,
    effective_nanos, list_nanos, contracted_nanos,
} order by "provider, billing_account, day, service_name, charge_category");

table!(BillVmDay in "bill_vm_days" keyed by period {
    provider, billing_account, instance, cluster, day, charge_key, periods,
} order by "provider, billing_account, instance, day, charge_key");

table!(FxRate in "fx_rates" {
    from_currency, to_currency, effective_from, rate, rate_ppb, source, set_at,
} order by "from_currency, to_currency, effective_from");

table!(CeCost in "ce_costs" {
    day, service, usage_account_id, unblended_nanos, amortized_nanos, net_amortized_nanos,
} order by "day, service, usage_account_id");

table!(CeDay in "ce_days" {
    day, fetched_at, estimated,
} order by "day");

table!(Alert in "alerts" {
    rule, subject, severity, state, value, threshold, link, evidence, since, resolved_at, updated_at,
} order by "rule, subject");

table!(AlertEvent in "alert_events" {
    id, rule, subject, severity, state, at, value, threshold, link, evidence,
} order by "id");

table!(Webhook in "alert_webhooks" {
    id, url, format, min_severity, created_at,
} order by "id");

table!(Plan in "plans" {
    id, client, pool, kind, amount, from_month, to_month, note, author, created_at,
} order by "id");

table!(PodRecord in "cost_pods" keyed by period {
    id = "pod_id", cluster, namespace, workload, workload_type, pod, node, instance_id,
    instance_type, gpu_model, purchase_option, labels, usage_account_id,
} order by "pod_id");

table!(InstanceHour in "instance_hours" keyed by period {
    hour, cluster, instance_id, instance_type, gpu_model, gpu_count, vcpu, memory_gib,
    purchase_option, usage_hours, unblended_cost_micros, amortized_cost_micros,
    net_amortized_cost_micros, public_on_demand_cost_micros, usage_account_id, region,
} order by "hour, instance_id");

table!(OtherCost in "other_costs" keyed by period {
    day, service, line_item_type, usage_type, usage_account_id, cluster, tags,
    unblended_cost_micros, amortized_cost_micros, usage_amount,
} order by "day, service, line_item_type, usage_type, usage_account_id, cluster, tags");

table!(GpuUsage in "gpu_usage" {
    hour, hostname, gpu_uuid, gpu_instance, gpu_profile, gpu_model, namespace, pod, container,
    mean_utilization, peak_fb_used_mib, samples, gpu_hours, cluster,
} order by "hour, hostname, gpu_uuid, gpu_instance, namespace, pod, container");

table!(InferenceUsage in "inference_usage" {
    hour, namespace, pod, workload, model, requests, prompt_tokens, generation_tokens, cluster,
} order by "hour, namespace, pod, workload, model");

table!(KubeNodeHour in "kube_node_hours" {
    hour, cluster, node, provider_id, instance_type, capacity_type, cpu_cores, memory_gib, gpus,
    seconds,
} order by "hour, cluster, node");

table!(KubePodHour in "kube_pod_hours" {
    hour, cluster, namespace, pod, uid, node, workload, workload_type, labels, seconds,
    cpu_request, memory_request_gib, gpu_request, cpu_usage, memory_usage_gib,
} order by "hour, cluster, namespace, pod, uid");

table!(KubePodDay in "kube_pod_days" {
    cluster, namespace, pod, uid, node, workload, workload_type, labels, day, hours,
} order by "day, cluster, namespace, pod, uid");

pub(crate) const DELETE_KUBE_NODES_WINDOW: &str =
    "DELETE FROM kube_node_hours WHERE hour >= $1 AND hour < $2 AND ($3 = '' OR cluster = $3)";

pub(crate) const DELETE_KUBE_PODS_WINDOW: &str =
    "DELETE FROM kube_pod_hours WHERE hour >= $1 AND hour < $2 AND ($3 = '' OR cluster = $3)";

/// Usage rows with `$1 <= hour < $2`, in the table's stable order.
pub(crate) fn select_usage_window<T: Table>() -> String {
    T::sql().select_where("hour >= $1 AND hour < $2")
}

from_row!(UsageHour {
    hour,
    instance_type,
    region,
    purchase_option,
    usage_hours,
    amortized_cost_micros,
    public_on_demand_cost_micros,
});

/// The instance-hours of periods `[$1, $2]` per hour, instance type, region and purchase
/// option.
pub(crate) const SELECT_USAGE_HOURS: &str = "SELECT hour, instance_type, region, purchase_option, \
     SUM(usage_hours) AS usage_hours, \
     CAST(SUM(amortized_cost_micros) AS BIGINT) AS amortized_cost_micros, \
     CAST(SUM(public_on_demand_cost_micros) AS BIGINT) AS public_on_demand_cost_micros \
     FROM instance_hours WHERE period >= $1 AND period <= $2 \
     GROUP BY hour, instance_type, region, purchase_option ORDER BY hour, instance_type, region, purchase_option";

pub(crate) const SELECT_COMMITMENT_PERIODS: &str = "SELECT DISTINCT period FROM commitments ORDER BY period";

from_row!(NamespaceCost {
    cluster = "grouped_cluster", namespace, split_cost_nanos, unused_cost_nanos,
    net_split_cost_nanos, net_unused_cost_nanos, public_on_demand_split_cost_nanos,
    public_on_demand_unused_cost_nanos,
});

from_row!(IngestRun {
    id,
    kind,
    source,
    period,
    data_version,
    status,
    rows_read,
    rows_written,
    started_at,
    finished_at,
    error,
    reconciliation,
    host,
    pid,
});

from_row!(PeriodSummary {
    period,
    data_version,
    bill_unblended_micros,
    bill_amortized_micros,
    unallocated_ec2_micros,
    cost_fact_rows,
    ingested_at,
});

from_row!(CostFact {
    hour,
    cluster,
    namespace,
    workload,
    workload_type,
    pod,
    node,
    instance_id,
    instance_type,
    gpu_model,
    purchase_option,
    resource,
    reserved_usage,
    actual_usage,
    split_usage,
    split_usage_ratio,
    split_cost_nanos,
    unused_cost_nanos,
    net_split_cost_nanos,
    net_unused_cost_nanos,
    public_on_demand_split_cost_nanos,
    public_on_demand_unused_cost_nanos,
    labels,
});

from_row!(GpuAllocation { hour, namespace, pod, workload, gpu_model, purchase_option, gpu_hours });

from_row!(WorkloadCost { namespace, workload, total_cost_nanos });

from_row!(PodCost {
    workload,
    cluster,
    account,
    pod,
    node,
    instance_type,
    purchase_option,
    gpu_hours,
    gpu_cost_nanos,
    split_cost_nanos,
    unused_cost_nanos,
    net_cost_nanos,
    public_on_demand_cost_nanos,
});

from_row!(PodWorkload { namespace, pod, workload });

/// Splits whole [`CostFact`]s into pods (numbered from 0 in order of first appearance) and
/// facts that refer to them.
pub(crate) fn normalize(facts: &[CostFact]) -> FactBatch {
    let mut ids: std::collections::HashMap<[&str; 11], i64> = std::collections::HashMap::new();
    let mut batch = FactBatch::default();
    for fact in facts {
        let key = [
            fact.cluster.as_str(),
            &fact.namespace,
            &fact.workload,
            &fact.workload_type,
            &fact.pod,
            &fact.node,
            &fact.instance_id,
            &fact.instance_type,
            &fact.gpu_model,
            fact.purchase_option.as_str(),
            &fact.labels,
        ];
        let next = ids.len() as i64;
        let pod_id = *ids.entry(key).or_insert(next);
        if pod_id == next {
            batch.pods.push(PodRecord {
                id: pod_id,
                cluster: fact.cluster.clone(),
                namespace: fact.namespace.clone(),
                workload: fact.workload.clone(),
                workload_type: fact.workload_type.clone(),
                pod: fact.pod.clone(),
                node: fact.node.clone(),
                instance_id: fact.instance_id.clone(),
                instance_type: fact.instance_type.clone(),
                gpu_model: fact.gpu_model.clone(),
                purchase_option: fact.purchase_option,
                // Whole facts (tests, the store story) carry no account.
                usage_account_id: String::new(),
                labels: fact.labels.clone(),
            });
        }
        batch.facts.push(FactRecord {
            pod_id,
            hour: fact.hour,
            resource: resource_name(&fact.resource),
            split_usage: fact.split_usage,
            split_cost_nanos: fact.split_cost_nanos,
            unused_cost_nanos: fact.unused_cost_nanos,
            net_split_cost_nanos: fact.net_split_cost_nanos,
            net_unused_cost_nanos: fact.net_unused_cost_nanos,
            public_on_demand_split_cost_nanos: fact.public_on_demand_split_cost_nanos,
            public_on_demand_unused_cost_nanos: fact.public_on_demand_unused_cost_nanos,
        });
    }
    batch
}

/// The stored name of a resource (`gpu`, `vcpu`, `memory`), as a static string.
fn resource_name(resource: &str) -> &'static str {
    match resource {
        "gpu" => "gpu",
        "vcpu" => "vcpu",
        "memory" => "memory",
        _ => "other",
    }
}

pub(crate) fn setting_version(row: &impl ReadRow) -> Result<SettingVersion, sqlx::Error> {
    let invalid = |what: String| sqlx::Error::Decode(what.into());
    let value = row.text("value")?;
    Ok(SettingVersion {
        kind: row.text("kind")?.parse().map_err(invalid)?,
        key: row.text("key")?,
        effective_from: row.text("effective_from")?.parse().map_err(invalid)?,
        value: serde_json::from_str(&value).map_err(|e| invalid(format!("setting value {value:?}: {e}")))?,
        set_at: row.int("set_at")?,
    })
}

#[cfg(test)]
mod normalize_tests {
    use super::*;

    #[test]
    fn facts_of_one_pod_share_an_id_and_its_strings_are_kept_once() {
        let fact = |pod: &str, resource: &str| CostFact {
            hour: 0,
            cluster: "c".into(),
            namespace: "ns".into(),
            workload: "w".into(),
            workload_type: "Job".into(),
            pod: pod.into(),
            node: "n".into(),
            instance_id: "i-1".into(),
            instance_type: "p5.48xlarge".into(),
            gpu_model: "H100".into(),
            purchase_option: crate::store::PurchaseOption::Spot,
            resource: resource.into(),
            labels: "{}".into(),
            ..CostFact::default()
        };
        let batch = normalize(&[fact("a", "gpu"), fact("a", "vcpu"), fact("b", "gpu")]);
        assert_eq!(
            batch.pods.iter().map(|p| (p.id, p.pod.as_str())).collect::<Vec<_>>(),
            vec![(0, "a"), (1, "b")]
        );
        assert_eq!(
            batch.facts.iter().map(|f| (f.pod_id, f.resource)).collect::<Vec<_>>(),
            vec![(0, "gpu"), (0, "vcpu"), (1, "gpu")]
        );
    }
}

#[cfg(test)]
mod tests {
    use sqlx::{QueryBuilder, Sqlite};

    use super::*;

    /// Builds a one-row insert of `row` and returns (columns named in the head, values bound).
    fn columns_and_binds<T: Table>(row: &T) -> (usize, usize) {
        let insert = T::sql().insert();
        let mut builder: QueryBuilder<'_, Sqlite> = QueryBuilder::new(insert.head.as_str());
        builder.push_values([row], |mut tuple, item| {
            if T::sql().keyed_by_period {
                tuple.text("2025-05");
            }
            item.bind(&mut tuple);
        });
        let named = insert.head.matches(',').count() + 1;
        // SQLite's QueryBuilder writes one `?` per bound value.
        let bound = builder.sql().matches('?').count();
        assert_eq!(insert.columns, named, "{}", insert.head);
        (named, bound)
    }

    #[test]
    fn every_table_binds_one_value_per_named_column() {
        use crate::store::model::*;
        let fact = CostFact::default();
        let normalized = normalize(std::slice::from_ref(&fact));
        let instance = InstanceHour {
            hour: 0,
            cluster: String::new(),
            instance_id: String::new(),
            instance_type: String::new(),
            gpu_model: String::new(),
            gpu_count: 0,
            vcpu: 0,
            memory_gib: 0,
            purchase_option: crate::store::PurchaseOption::Unknown,
            usage_account_id: String::new(),
            region: String::new(),
            usage_hours: 0.0,
            unblended_cost_micros: 0,
            amortized_cost_micros: 0,
            net_amortized_cost_micros: 0,
            public_on_demand_cost_micros: 0,
        };
        let checks = [
            ("cost_pods", columns_and_binds(&normalized.pods[0]), 14),
            ("instance_hours", columns_and_binds(&instance), 17),
            ("bill_lines", columns_and_binds(&BillLine::default()), 11),
            ("bill_days", columns_and_binds(&BillDay::default()), 6),
            ("commitments", columns_and_binds(&CommitmentMonth::default()), 15),
            ("ce_costs", columns_and_binds(&CeCost::default()), 6),
            ("bills", columns_and_binds(&Bill::default()), 16),
            ("fx_rates", columns_and_binds(&crate::domain::fx::FxRate::default()), 7),
            ("bill_charges", columns_and_binds(&BillCharge::default()), 27),
            ("bill_vm_days", columns_and_binds(&BillVmDay::default()), 8),
            ("ce_days", columns_and_binds(&CeDay::default()), 3),
            ("alerts", columns_and_binds(&Alert::default()), 11),
            ("alert_events", columns_and_binds(&AlertEvent::default()), 10),
            ("alert_webhooks", columns_and_binds(&Webhook::default()), 5),
            ("plans", columns_and_binds(&Plan::default()), 10),
            ("other_costs", columns_and_binds(&OtherCost::default()), 11),
            ("gpu_usage", columns_and_binds(&GpuUsage::default()), 14),
            ("inference_usage", columns_and_binds(&InferenceUsage::default()), 9),
            ("kube_node_hours", columns_and_binds(&KubeNodeHour::default()), 10),
            ("kube_pod_hours", columns_and_binds(&KubePodHour::default()), 15),
            ("kube_pod_days", columns_and_binds(&KubePodDay::default()), 10),
            ("cost_pod_days", columns_and_binds(&PodDay::default()), 15),
            ("cost_gpu_pod_hours", columns_and_binds(&GpuPodHour::default()), 6),
            ("rollup_costs", columns_and_binds(&CostRollup::default()), 34),
            ("rollup_capacity", columns_and_binds(&CapacityRollup::default()), 14),
            ("rollup_accounts", columns_and_binds(&AccountRollup::default()), 13),
            ("rollup_kube_splits", columns_and_binds(&KubeSplitRollup::default()), 16),
            ("rollup_heatmap", columns_and_binds(&HeatmapCell::default()), 5),
            ("rollup_utilization", columns_and_binds(&UtilizationBucket::default()), 4),
            ("rollup_periods", columns_and_binds(&PeriodRollup::default()), 19),
            ("rollup_clients", columns_and_binds(&ClientRollup::default()), 25),
            ("rollup_opportunities", columns_and_binds(&Opportunity::default()), 9),
        ];
        for (table, (named, bound), columns) in checks {
            assert_eq!((named, bound), (columns, columns), "{table}");
        }
    }

    #[test]
    fn rows_per_statement_stays_under_the_bind_limit() {
        let pods = PodRecord::sql().insert();
        // 32_766 / 14 = 2_340 rows, binding 32_760 values.
        assert_eq!(pods.rows_per_statement(32_766, false), 2_340);
        // 65_535 / 14 = 4_681 rows, binding 65_534 values.
        assert_eq!(pods.rows_per_statement(65_535, false), 4_681);
        // With the period written as a literal a row binds 13: 32_766 / 13 = 2_520 rows.
        assert_eq!(pods.rows_per_statement(32_766, true), 2_520);
    }

    #[test]
    fn only_a_period_of_digits_and_dashes_becomes_a_literal() {
        assert_eq!(period_literal("2026-10").as_deref(), Some("'2026-10'"));
        assert_eq!(period_literal("2026-10'; DROP TABLE cost_pods; --"), None);
        assert_eq!(period_literal(""), None);
    }
}
