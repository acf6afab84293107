//! The tables of the aggregates the CUR ingest writes and the rollups `compute`
//! materializes ([`table!`]: one column list per table), and the sums `compute` reads.

use super::model::{
    AccountRollup, CapacityRollup, ClientRollup, CostRollup, GpuPodHour, HeatmapCell, KubeSplitRollup,
    MeasuredPodHour, Opportunity, OtherCostGroup, PeriodRollup, PodDay, PodDayOption, ServedPodHour,
    UtilizationBucket,
};
use super::table::{Table, TableSql, from_row, table};

table!(PodDay in "cost_pod_days" keyed by period {
    pod_id, day, gpu_hours, gpu_cost_nanos, cpu_cost_nanos, memory_cost_nanos, split_cost_nanos,
    unused_cost_nanos, net_cost_nanos, public_on_demand_cost_nanos, gpu_split_nanos, cpu_split_nanos,
    vcpu_hours, memory_gb_hours,
} order by "pod_id, day");

table!(PodDayOption in "cost_pod_day_options" keyed by period {
    pod_id, day, purchase_option, cost_weight, gpu_hours_weight,
} order by "pod_id, day, purchase_option");

table!(GpuPodHour in "cost_gpu_pod_hours" keyed by period {
    pod_id, hour, gpu_hours, gpu_cost_nanos, pod_cost_nanos,
} order by "pod_id, hour");

table!(CostRollup in "rollup_costs" {
    period, day, cluster, namespace, workload, workload_class, client, team, gpu_model,
    purchase_option, split_cost_nanos, unused_cost_nanos, net_cost_nanos,
    public_on_demand_cost_nanos, gpu_cost_nanos, idle_gpu_cost_nanos, gpu_hours_allocated,
    gpu_hours_used, gpu_hours_idle, gpu_hours_unmeasured, spot_gpu_hours, peak_fb_used_mib,
    requests, prompt_tokens, generation_tokens, inference_hours, inference_hours_above_p95,
    gpu_split_nanos, cpu_split_nanos, idle_cost_nanos, serving_cost_nanos, account, vcpu_hours,
    memory_gb_hours,
} order by "day, cluster, namespace, workload, workload_class, client, team, gpu_model, purchase_option, account");

table!(CapacityRollup in "rollup_capacity" {
    period, day, cluster, instance_type, gpu_model, purchase_option, instance_hours,
    gpu_hours_provisioned, amortized_cost_micros, public_on_demand_cost_micros, account, provider,
    currency, amortized_in_currency_nanos,
} order by "day, provider, cluster, instance_type, gpu_model, purchase_option, account");

table!(AccountRollup in "rollup_accounts" {
    period, account, provider, name, bill_unblended_micros, instance_cost_micros, other_cost_micros,
    kubernetes_cost_nanos, unused_savings_plan_micros, unused_reservation_micros,
    gpu_fleet_in_other_micros, currency, amortized_in_currency_nanos,
} order by "provider, account");

table!(KubeSplitRollup in "rollup_kube_splits" {
    period, cluster, provider, currency, method, node_costs_from, node_hours, pod_hours,
    bill_node_nanos, pods_nanos, unallocated_nanos, node_hours_without_pods, node_hours_not_in_bill,
    pod_hours_not_in_bill, bill_hours_not_in_prometheus, bill_hours_not_in_prometheus_nanos,
} order by "cluster");

table!(HeatmapCell in "rollup_heatmap" {
    period, day, hour_of_day, gpu_hours_allocated, gpu_hours_used,
} order by "day, hour_of_day");

table!(UtilizationBucket in "rollup_utilization" {
    period, gpu_model, bucket, gpu_hours,
} order by "gpu_model, bucket");

table!(PeriodRollup in "rollup_periods" {
    period, computed_at, idle_threshold, p95_cost_per_inference, bill_unblended_micros,
    bill_amortized_micros, kubernetes_cost_nanos, unallocated_ec2_micros, other_cost_micros,
    unattributed_gpu_hours, input_revision, revision, settings, measured_unbilled_gpu_hours,
    unused_savings_plan_micros, unused_reservation_micros, storage_micros, network_micros,
    gpu_fleet_in_other_micros,
} order by "period");

table!(ClientRollup in "rollup_clients" {
    period, client, share_policy, markup_basis_points, direct_cost_nanos, gpu_cost_nanos,
    shared_platform_nanos, shared_idle_nanos, markup_nanos, non_kubernetes_direct_nanos,
    shared_infrastructure_nanos, gpu_split_nanos, cpu_split_nanos, memory_split_nanos,
    storage_nanos, network_nanos, other_direct_nanos, training_nanos, inference_nanos, exempt,
    shared_unallocated_nanos, storage_gb_months, charge_basis, discount_nanos, provider_direct,
} order by "client");

table!(Opportunity in "rollup_opportunities" {
    period, kind, namespace, workload, gpu_model, purchase_option, monthly_nanos, evidence, family,
} order by "monthly_nanos DESC, kind, namespace, workload");

from_row!(OtherCostGroup {
    cluster,
    tags,
    service,
    usage_type,
    amortized_cost_micros,
    usage_amount,
    provider
});

from_row!(MeasuredPodHour { cluster, namespace, pod, hour, busy, weight, idle_weight, peak_fb_used_mib });

from_row!(ServedPodHour { cluster, namespace, pod, hour, requests, prompt_tokens, generation_tokens });

/// What a compute run replaces.
pub(crate) fn rollup_tables() -> [&'static TableSql; 9] {
    [
        KubeSplitRollup::sql(),
        CostRollup::sql(),
        CapacityRollup::sql(),
        HeatmapCell::sql(),
        PeriodRollup::sql(),
        ClientRollup::sql(),
        Opportunity::sql(),
        AccountRollup::sql(),
        UtilizationBucket::sql(),
    ]
}

/// What a re-ingested period invalidates: its aggregates and rollups.
pub(crate) fn period_tables() -> [&'static TableSql; 12] {
    let [a, b, c, d, e, f, g, h, i] = rollup_tables();
    [PodDay::sql(), PodDayOption::sql(), GpuPodHour::sql(), a, b, c, d, e, f, g, h, i]
}

/// Other cost per cluster, tags, service and usage type (amortized), for chargeback.
pub(crate) const SELECT_OTHER_COST_GROUPS: &str = "SELECT cluster, tags, service, usage_type, \
     CAST(SUM(amortized_cost_micros) AS BIGINT) AS amortized_cost_micros, \
     CAST(SUM(usage_amount) AS DOUBLE PRECISION) AS usage_amount, 'aws' AS provider FROM other_costs \
     WHERE period = $1 GROUP BY cluster, tags, service, usage_type ORDER BY cluster, tags, service, usage_type";

pub(crate) const COUNT_POD_DAYS: &str = "SELECT COUNT(*) AS n FROM cost_pod_days WHERE period = $1";

/// Rebuilds a period's aggregates from its facts: for periods ingested before the ingest
/// wrote them (a one-time scan of the facts).
pub(crate) const BACKFILL_AGGREGATES: [&str; 2] = [
    "INSERT INTO cost_pod_days (period, pod_id, day, gpu_hours, gpu_cost_nanos, cpu_cost_nanos, \
     memory_cost_nanos, split_cost_nanos, unused_cost_nanos, net_cost_nanos, public_on_demand_cost_nanos, \
     gpu_split_nanos, cpu_split_nanos, vcpu_hours, memory_gb_hours) \
     SELECT period, pod_id, hour - (hour % 86400), \
     SUM(CASE WHEN resource = 'gpu' THEN split_usage ELSE 0 END), \
     SUM(CASE WHEN resource = 'gpu' THEN split_cost_nanos + unused_cost_nanos ELSE 0 END), \
     SUM(CASE WHEN resource = 'vcpu' THEN split_cost_nanos + unused_cost_nanos ELSE 0 END), \
     SUM(CASE WHEN resource = 'memory' THEN split_cost_nanos + unused_cost_nanos ELSE 0 END), \
     SUM(split_cost_nanos), SUM(unused_cost_nanos), SUM(net_split_cost_nanos + net_unused_cost_nanos), \
     SUM(public_on_demand_split_cost_nanos + public_on_demand_unused_cost_nanos), \
     SUM(CASE WHEN resource = 'gpu' THEN split_cost_nanos ELSE 0 END), \
     SUM(CASE WHEN resource = 'vcpu' THEN split_cost_nanos ELSE 0 END), \
     SUM(CASE WHEN resource = 'vcpu' THEN split_usage ELSE 0 END), \
     SUM(CASE WHEN resource = 'memory' THEN split_usage ELSE 0 END) \
     FROM cost_facts WHERE period = $1 GROUP BY period, pod_id, hour - (hour % 86400)",
    "INSERT INTO cost_gpu_pod_hours (period, pod_id, hour, gpu_hours, gpu_cost_nanos, pod_cost_nanos) \
     SELECT period, pod_id, hour, \
     SUM(CASE WHEN resource = 'gpu' THEN split_usage ELSE 0 END), \
     SUM(CASE WHEN resource = 'gpu' THEN split_cost_nanos + unused_cost_nanos ELSE 0 END), \
     SUM(split_cost_nanos + unused_cost_nanos) \
     FROM cost_facts WHERE period = $1 GROUP BY period, pod_id, hour \
     HAVING SUM(CASE WHEN resource = 'gpu' THEN split_usage ELSE 0 END) > 0",
];

/// Instance-hours per day, cluster, account, type and purchase option ($1 the period; the
/// period name is selected back so the row reads as a [`CapacityRollup`], in the CUR's
/// dollars: no other currency). CAST: Postgres
/// sums BIGINT as NUMERIC.
pub(crate) const SELECT_CAPACITY_SUMS: &str = "SELECT period, hour - (hour % 86400) AS day, 'aws' AS provider, \
     cluster, usage_account_id AS account, instance_type, gpu_model, purchase_option, \
     SUM(usage_hours) AS instance_hours, SUM(gpu_count * usage_hours) AS gpu_hours_provisioned, \
     CAST(SUM(amortized_cost_micros) AS BIGINT) AS amortized_cost_micros, \
     CAST(SUM(public_on_demand_cost_micros) AS BIGINT) AS public_on_demand_cost_micros, \
     '' AS currency, CAST(0 AS BIGINT) AS amortized_in_currency_nanos \
     FROM instance_hours WHERE period = $1 \
     GROUP BY period, hour - (hour % 86400), cluster, usage_account_id, instance_type, gpu_model, purchase_option \
     ORDER BY day, cluster, instance_type, gpu_model, purchase_option, account";

/// Each usage account's invoice lines: its name, unblended total and unused commitment.
pub(crate) const SELECT_ACCOUNT_BILLS: &str = "SELECT usage_account_id AS account, \
     MAX(usage_account_name) AS name, \
     CAST(SUM(unblended_micros) AS BIGINT) AS bill_unblended_micros, \
     CAST(SUM(CASE WHEN line_item_type = 'SavingsPlanRecurringFee' THEN amortized_micros ELSE 0 END) AS BIGINT) \
     AS unused_savings_plan_micros, \
     CAST(SUM(CASE WHEN line_item_type = 'RIFee' THEN amortized_micros ELSE 0 END) AS BIGINT) \
     AS unused_reservation_micros \
     FROM bill_lines WHERE period = $1 GROUP BY usage_account_id ORDER BY usage_account_id";

/// Amortized instance cost per usage account.
pub(crate) const SELECT_ACCOUNT_INSTANCE_COST: &str = "SELECT usage_account_id AS account, \
     CAST(SUM(amortized_cost_micros) AS BIGINT) AS total FROM instance_hours WHERE period = $1 \
     GROUP BY usage_account_id ORDER BY usage_account_id";

/// Amortized other cost per usage account.
pub(crate) const SELECT_ACCOUNT_OTHER_COST: &str = "SELECT usage_account_id AS account, \
     CAST(SUM(amortized_cost_micros) AS BIGINT) AS total FROM other_costs WHERE period = $1 \
     GROUP BY usage_account_id ORDER BY usage_account_id";

/// Attributed GPU usage per pod-hour in `[$1, $2)`; `idle_weight` is the GPU-hours of the
/// pod-hour's GPUs (or MIG instances) whose own mean is below `$3`.
pub(crate) const SELECT_MEASURED_POD_HOURS: &str = "SELECT cluster, namespace, pod, hour, \
     SUM(mean_utilization * gpu_hours) AS busy, SUM(gpu_hours) AS weight, \
     SUM(CASE WHEN mean_utilization < $3 THEN gpu_hours ELSE 0.0 END) AS idle_weight, \
     MAX(peak_fb_used_mib) AS peak_fb_used_mib \
     FROM gpu_usage WHERE hour >= $1 AND hour < $2 AND pod <> '' \
     GROUP BY cluster, namespace, pod, hour ORDER BY cluster, namespace, pod, hour";

/// GPU-hours no pod held in `[$1, $2)`, per GPU model.
pub(crate) const SELECT_UNATTRIBUTED: &str = "SELECT gpu_model, SUM(gpu_hours) AS gpu_hours \
     FROM gpu_usage WHERE hour >= $1 AND hour < $2 AND pod = '' GROUP BY gpu_model ORDER BY gpu_model";

/// Requests and tokens per pod-hour in `[$1, $2)`.
pub(crate) const SELECT_SERVED_POD_HOURS: &str = "SELECT cluster, namespace, pod, hour, \
     SUM(requests) AS requests, SUM(prompt_tokens) AS prompt_tokens, SUM(generation_tokens) AS generation_tokens \
     FROM inference_usage WHERE hour >= $1 AND hour < $2 \
     GROUP BY cluster, namespace, pod, hour ORDER BY cluster, namespace, pod, hour";
