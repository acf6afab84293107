//! SQL text and row mappers for the aggregates the CUR ingest writes, the sums `compute`
//! reads, and the rollups it materializes. One column list per table (kept in the generator
//! script's shape: INSERT, SELECT, binder and reader side by side), so they cannot drift.

use super::model::{
    CapacityRollup, ClientRollup, CostRollup, GpuPodHour, HeatmapCell, MeasuredPodHour, Opportunity,
    OtherCostGroup, PeriodRollup, PodDay, ServedPodHour,
};
use super::sql::{BulkInsert, PushRow, ReadRow};

pub(crate) const INSERT_POD_DAY: BulkInsert = BulkInsert {
    head: "INSERT INTO cost_pod_days (period, pod_id, day, gpu_hours, gpu_cost_nanos, cpu_cost_nanos, memory_cost_nanos, split_cost_nanos, unused_cost_nanos, net_cost_nanos, public_on_demand_cost_nanos, gpu_split_nanos, cpu_split_nanos) ",
    columns: 13,
};

pub(crate) const SELECT_POD_DAY: &str = "SELECT pod_id, day, gpu_hours, gpu_cost_nanos, cpu_cost_nanos, memory_cost_nanos, split_cost_nanos, unused_cost_nanos, net_cost_nanos, public_on_demand_cost_nanos, gpu_split_nanos, cpu_split_nanos FROM cost_pod_days WHERE period = $1 ORDER BY pod_id, day";

pub(crate) const DELETE_POD_DAY: &str = "DELETE FROM cost_pod_days WHERE period = $1";

/// Binds one row in [`INSERT_POD_DAY`] column order.
pub(crate) fn push_pod_day<'args>(row: &mut impl PushRow<'args>, period: &'args str, r: &'args PodDay) {
    row.text(period)
        .int(r.pod_id)
        .int(r.day)
        .float(r.gpu_hours)
        .int(r.gpu_cost_nanos)
        .int(r.cpu_cost_nanos)
        .int(r.memory_cost_nanos)
        .int(r.split_cost_nanos)
        .int(r.unused_cost_nanos)
        .int(r.net_cost_nanos)
        .int(r.public_on_demand_cost_nanos)
        .int(r.gpu_split_nanos)
        .int(r.cpu_split_nanos);
}

pub(crate) fn read_pod_day(row: &impl ReadRow) -> Result<PodDay, sqlx::Error> {
    Ok(PodDay {
        pod_id: row.int("pod_id")?,
        day: row.int("day")?,
        gpu_hours: row.float("gpu_hours")?,
        gpu_cost_nanos: row.int("gpu_cost_nanos")?,
        cpu_cost_nanos: row.int("cpu_cost_nanos")?,
        memory_cost_nanos: row.int("memory_cost_nanos")?,
        split_cost_nanos: row.int("split_cost_nanos")?,
        unused_cost_nanos: row.int("unused_cost_nanos")?,
        net_cost_nanos: row.int("net_cost_nanos")?,
        public_on_demand_cost_nanos: row.int("public_on_demand_cost_nanos")?,
        gpu_split_nanos: row.int("gpu_split_nanos")?,
        cpu_split_nanos: row.int("cpu_split_nanos")?,
    })
}

pub(crate) const INSERT_GPU_POD_HOUR: BulkInsert = BulkInsert {
    head: "INSERT INTO cost_gpu_pod_hours (period, pod_id, hour, gpu_hours, gpu_cost_nanos, pod_cost_nanos) ",
    columns: 6,
};

pub(crate) const SELECT_GPU_POD_HOUR: &str = "SELECT pod_id, hour, gpu_hours, gpu_cost_nanos, pod_cost_nanos FROM cost_gpu_pod_hours WHERE period = $1 ORDER BY pod_id, hour";

pub(crate) const DELETE_GPU_POD_HOUR: &str = "DELETE FROM cost_gpu_pod_hours WHERE period = $1";

/// Binds one row in [`INSERT_GPU_POD_HOUR`] column order.
pub(crate) fn push_gpu_pod_hour<'args>(
    row: &mut impl PushRow<'args>,
    period: &'args str,
    r: &'args GpuPodHour,
) {
    row.text(period).int(r.pod_id).int(r.hour).float(r.gpu_hours).int(r.gpu_cost_nanos).int(r.pod_cost_nanos);
}

pub(crate) fn read_gpu_pod_hour(row: &impl ReadRow) -> Result<GpuPodHour, sqlx::Error> {
    Ok(GpuPodHour {
        pod_id: row.int("pod_id")?,
        hour: row.int("hour")?,
        gpu_hours: row.float("gpu_hours")?,
        gpu_cost_nanos: row.int("gpu_cost_nanos")?,
        pod_cost_nanos: row.int("pod_cost_nanos")?,
    })
}

pub(crate) const INSERT_COST_ROLLUP: BulkInsert = BulkInsert {
    head: "INSERT INTO rollup_costs (period, day, cluster, namespace, workload, workload_class, client, team, gpu_model, purchase_option, split_cost_nanos, unused_cost_nanos, net_cost_nanos, public_on_demand_cost_nanos, gpu_cost_nanos, idle_gpu_cost_nanos, gpu_hours_allocated, gpu_hours_used, gpu_hours_idle, gpu_hours_unmeasured, spot_gpu_hours, peak_fb_used_mib, requests, prompt_tokens, generation_tokens, inference_hours, inference_hours_above_p95, gpu_split_nanos, cpu_split_nanos, idle_cost_nanos, serving_cost_nanos) ",
    columns: 31,
};

pub(crate) const SELECT_COST_ROLLUP: &str = "SELECT period, day, cluster, namespace, workload, workload_class, client, team, gpu_model, purchase_option, split_cost_nanos, unused_cost_nanos, net_cost_nanos, public_on_demand_cost_nanos, gpu_cost_nanos, idle_gpu_cost_nanos, gpu_hours_allocated, gpu_hours_used, gpu_hours_idle, gpu_hours_unmeasured, spot_gpu_hours, peak_fb_used_mib, requests, prompt_tokens, generation_tokens, inference_hours, inference_hours_above_p95, gpu_split_nanos, cpu_split_nanos, idle_cost_nanos, serving_cost_nanos FROM rollup_costs WHERE period = $1 ORDER BY day, cluster, namespace, workload, workload_class, client, team, gpu_model, purchase_option";

pub(crate) const DELETE_COST_ROLLUP: &str = "DELETE FROM rollup_costs WHERE period = $1";

/// Binds one row in [`INSERT_COST_ROLLUP`] column order.
pub(crate) fn push_cost_rollup<'args>(row: &mut impl PushRow<'args>, r: &'args CostRollup) {
    row.text(&r.period)
        .int(r.day)
        .text(&r.cluster)
        .text(&r.namespace)
        .text(&r.workload)
        .text(&r.workload_class)
        .text(&r.client)
        .text(&r.team)
        .text(&r.gpu_model)
        .text(&r.purchase_option)
        .int(r.split_cost_nanos)
        .int(r.unused_cost_nanos)
        .int(r.net_cost_nanos)
        .int(r.public_on_demand_cost_nanos)
        .int(r.gpu_cost_nanos)
        .int(r.idle_gpu_cost_nanos)
        .float(r.gpu_hours_allocated)
        .float(r.gpu_hours_used)
        .float(r.gpu_hours_idle)
        .float(r.gpu_hours_unmeasured)
        .float(r.spot_gpu_hours)
        .float(r.peak_fb_used_mib)
        .float(r.requests)
        .float(r.prompt_tokens)
        .float(r.generation_tokens)
        .int(r.inference_hours)
        .int(r.inference_hours_above_p95)
        .int(r.gpu_split_nanos)
        .int(r.cpu_split_nanos)
        .int(r.idle_cost_nanos)
        .int(r.serving_cost_nanos);
}

pub(crate) fn read_cost_rollup(row: &impl ReadRow) -> Result<CostRollup, sqlx::Error> {
    Ok(CostRollup {
        period: row.text("period")?,
        day: row.int("day")?,
        cluster: row.text("cluster")?,
        namespace: row.text("namespace")?,
        workload: row.text("workload")?,
        workload_class: row.text("workload_class")?,
        client: row.text("client")?,
        team: row.text("team")?,
        gpu_model: row.text("gpu_model")?,
        purchase_option: row.text("purchase_option")?,
        split_cost_nanos: row.int("split_cost_nanos")?,
        unused_cost_nanos: row.int("unused_cost_nanos")?,
        net_cost_nanos: row.int("net_cost_nanos")?,
        public_on_demand_cost_nanos: row.int("public_on_demand_cost_nanos")?,
        gpu_cost_nanos: row.int("gpu_cost_nanos")?,
        idle_gpu_cost_nanos: row.int("idle_gpu_cost_nanos")?,
        gpu_hours_allocated: row.float("gpu_hours_allocated")?,
        gpu_hours_used: row.float("gpu_hours_used")?,
        gpu_hours_idle: row.float("gpu_hours_idle")?,
        gpu_hours_unmeasured: row.float("gpu_hours_unmeasured")?,
        spot_gpu_hours: row.float("spot_gpu_hours")?,
        peak_fb_used_mib: row.float("peak_fb_used_mib")?,
        requests: row.float("requests")?,
        prompt_tokens: row.float("prompt_tokens")?,
        generation_tokens: row.float("generation_tokens")?,
        inference_hours: row.int("inference_hours")?,
        inference_hours_above_p95: row.int("inference_hours_above_p95")?,
        gpu_split_nanos: row.int("gpu_split_nanos")?,
        cpu_split_nanos: row.int("cpu_split_nanos")?,
        idle_cost_nanos: row.int("idle_cost_nanos")?,
        serving_cost_nanos: row.int("serving_cost_nanos")?,
    })
}

pub(crate) const INSERT_CAPACITY_ROLLUP: BulkInsert = BulkInsert {
    head: "INSERT INTO rollup_capacity (period, day, cluster, instance_type, gpu_model, purchase_option, instance_hours, gpu_hours_provisioned, amortized_cost_micros, public_on_demand_cost_micros) ",
    columns: 10,
};

pub(crate) const SELECT_CAPACITY_ROLLUP: &str = "SELECT period, day, cluster, instance_type, gpu_model, purchase_option, instance_hours, gpu_hours_provisioned, amortized_cost_micros, public_on_demand_cost_micros FROM rollup_capacity WHERE period = $1 ORDER BY day, cluster, instance_type, gpu_model, purchase_option";

pub(crate) const DELETE_CAPACITY_ROLLUP: &str = "DELETE FROM rollup_capacity WHERE period = $1";

/// Binds one row in [`INSERT_CAPACITY_ROLLUP`] column order.
pub(crate) fn push_capacity_rollup<'args>(row: &mut impl PushRow<'args>, r: &'args CapacityRollup) {
    row.text(&r.period)
        .int(r.day)
        .text(&r.cluster)
        .text(&r.instance_type)
        .text(&r.gpu_model)
        .text(&r.purchase_option)
        .float(r.instance_hours)
        .float(r.gpu_hours_provisioned)
        .int(r.amortized_cost_micros)
        .int(r.public_on_demand_cost_micros);
}

pub(crate) fn read_capacity_rollup(row: &impl ReadRow) -> Result<CapacityRollup, sqlx::Error> {
    Ok(CapacityRollup {
        period: row.text("period")?,
        day: row.int("day")?,
        cluster: row.text("cluster")?,
        instance_type: row.text("instance_type")?,
        gpu_model: row.text("gpu_model")?,
        purchase_option: row.text("purchase_option")?,
        instance_hours: row.float("instance_hours")?,
        gpu_hours_provisioned: row.float("gpu_hours_provisioned")?,
        amortized_cost_micros: row.int("amortized_cost_micros")?,
        public_on_demand_cost_micros: row.int("public_on_demand_cost_micros")?,
    })
}

pub(crate) const INSERT_HEATMAP_CELL: BulkInsert = BulkInsert {
    head: "INSERT INTO rollup_heatmap (period, day, hour_of_day, gpu_hours_allocated, gpu_hours_used) ",
    columns: 5,
};

pub(crate) const SELECT_HEATMAP_CELL: &str = "SELECT period, day, hour_of_day, gpu_hours_allocated, gpu_hours_used FROM rollup_heatmap WHERE period = $1 ORDER BY day, hour_of_day";

pub(crate) const DELETE_HEATMAP_CELL: &str = "DELETE FROM rollup_heatmap WHERE period = $1";

/// Binds one row in [`INSERT_HEATMAP_CELL`] column order.
pub(crate) fn push_heatmap_cell<'args>(row: &mut impl PushRow<'args>, r: &'args HeatmapCell) {
    row.text(&r.period).int(r.day).int(r.hour_of_day).float(r.gpu_hours_allocated).float(r.gpu_hours_used);
}

pub(crate) fn read_heatmap_cell(row: &impl ReadRow) -> Result<HeatmapCell, sqlx::Error> {
    Ok(HeatmapCell {
        period: row.text("period")?,
        day: row.int("day")?,
        hour_of_day: row.int("hour_of_day")?,
        gpu_hours_allocated: row.float("gpu_hours_allocated")?,
        gpu_hours_used: row.float("gpu_hours_used")?,
    })
}

pub(crate) const INSERT_PERIOD_ROLLUP: BulkInsert = BulkInsert {
    head: "INSERT INTO rollup_periods (period, computed_at, idle_threshold, p95_cost_per_inference, bill_unblended_micros, bill_amortized_micros, kubernetes_cost_nanos, unallocated_ec2_micros, other_cost_micros, unattributed_gpu_hours, input_revision, revision, settings, measured_unbilled_gpu_hours, unused_savings_plan_micros, unused_reservation_micros) ",
    columns: 16,
};

pub(crate) const SELECT_PERIOD_ROLLUP: &str = "SELECT period, computed_at, idle_threshold, p95_cost_per_inference, bill_unblended_micros, bill_amortized_micros, kubernetes_cost_nanos, unallocated_ec2_micros, other_cost_micros, unattributed_gpu_hours, input_revision, revision, settings, measured_unbilled_gpu_hours, unused_savings_plan_micros, unused_reservation_micros FROM rollup_periods WHERE period = $1 ORDER BY period";

pub(crate) const DELETE_PERIOD_ROLLUP: &str = "DELETE FROM rollup_periods WHERE period = $1";

/// Binds one row in [`INSERT_PERIOD_ROLLUP`] column order.
pub(crate) fn push_period_rollup<'args>(row: &mut impl PushRow<'args>, r: &'args PeriodRollup) {
    row.text(&r.period)
        .int(r.computed_at)
        .float(r.idle_threshold)
        .float(r.p95_cost_per_inference)
        .int(r.bill_unblended_micros)
        .int(r.bill_amortized_micros)
        .int(r.kubernetes_cost_nanos)
        .int(r.unallocated_ec2_micros)
        .int(r.other_cost_micros)
        .float(r.unattributed_gpu_hours)
        .int(r.input_revision)
        .int(r.revision)
        .text(&r.settings)
        .float(r.measured_unbilled_gpu_hours)
        .int(r.unused_savings_plan_micros)
        .int(r.unused_reservation_micros);
}

pub(crate) fn read_period_rollup(row: &impl ReadRow) -> Result<PeriodRollup, sqlx::Error> {
    Ok(PeriodRollup {
        period: row.text("period")?,
        computed_at: row.int("computed_at")?,
        idle_threshold: row.float("idle_threshold")?,
        p95_cost_per_inference: row.float("p95_cost_per_inference")?,
        bill_unblended_micros: row.int("bill_unblended_micros")?,
        bill_amortized_micros: row.int("bill_amortized_micros")?,
        kubernetes_cost_nanos: row.int("kubernetes_cost_nanos")?,
        unallocated_ec2_micros: row.int("unallocated_ec2_micros")?,
        other_cost_micros: row.int("other_cost_micros")?,
        unattributed_gpu_hours: row.float("unattributed_gpu_hours")?,
        input_revision: row.int("input_revision")?,
        revision: row.int("revision")?,
        settings: row.text("settings")?,
        measured_unbilled_gpu_hours: row.float("measured_unbilled_gpu_hours")?,
        unused_savings_plan_micros: row.int("unused_savings_plan_micros")?,
        unused_reservation_micros: row.int("unused_reservation_micros")?,
    })
}

pub(crate) const INSERT_CLIENT_ROLLUP: BulkInsert = BulkInsert {
    head: "INSERT INTO rollup_clients (period, client, share_policy, markup_basis_points, direct_cost_nanos, gpu_cost_nanos, shared_platform_nanos, shared_idle_nanos, markup_nanos, non_kubernetes_direct_nanos, shared_infrastructure_nanos, gpu_split_nanos, cpu_split_nanos, memory_split_nanos, storage_nanos, network_nanos, other_direct_nanos, training_nanos, inference_nanos, exempt, shared_unallocated_nanos) ",
    columns: 21,
};

pub(crate) const SELECT_CLIENT_ROLLUP: &str = "SELECT period, client, share_policy, markup_basis_points, direct_cost_nanos, gpu_cost_nanos, shared_platform_nanos, shared_idle_nanos, markup_nanos, non_kubernetes_direct_nanos, shared_infrastructure_nanos, gpu_split_nanos, cpu_split_nanos, memory_split_nanos, storage_nanos, network_nanos, other_direct_nanos, training_nanos, inference_nanos, exempt, shared_unallocated_nanos FROM rollup_clients WHERE period = $1 ORDER BY client";

pub(crate) const DELETE_CLIENT_ROLLUP: &str = "DELETE FROM rollup_clients WHERE period = $1";

/// Binds one row in [`INSERT_CLIENT_ROLLUP`] column order.
pub(crate) fn push_client_rollup<'args>(row: &mut impl PushRow<'args>, r: &'args ClientRollup) {
    row.text(&r.period)
        .text(&r.client)
        .text(&r.share_policy)
        .int(r.markup_basis_points)
        .int(r.direct_cost_nanos)
        .int(r.gpu_cost_nanos)
        .int(r.shared_platform_nanos)
        .int(r.shared_idle_nanos)
        .int(r.markup_nanos)
        .int(r.non_kubernetes_direct_nanos)
        .int(r.shared_infrastructure_nanos)
        .int(r.gpu_split_nanos)
        .int(r.cpu_split_nanos)
        .int(r.memory_split_nanos)
        .int(r.storage_nanos)
        .int(r.network_nanos)
        .int(r.other_direct_nanos)
        .int(r.training_nanos)
        .int(r.inference_nanos)
        .int(i64::from(r.exempt))
        .int(r.shared_unallocated_nanos);
}

pub(crate) fn read_client_rollup(row: &impl ReadRow) -> Result<ClientRollup, sqlx::Error> {
    Ok(ClientRollup {
        period: row.text("period")?,
        client: row.text("client")?,
        share_policy: row.text("share_policy")?,
        markup_basis_points: row.int("markup_basis_points")?,
        direct_cost_nanos: row.int("direct_cost_nanos")?,
        gpu_cost_nanos: row.int("gpu_cost_nanos")?,
        shared_platform_nanos: row.int("shared_platform_nanos")?,
        shared_idle_nanos: row.int("shared_idle_nanos")?,
        markup_nanos: row.int("markup_nanos")?,
        non_kubernetes_direct_nanos: row.int("non_kubernetes_direct_nanos")?,
        shared_infrastructure_nanos: row.int("shared_infrastructure_nanos")?,
        gpu_split_nanos: row.int("gpu_split_nanos")?,
        cpu_split_nanos: row.int("cpu_split_nanos")?,
        memory_split_nanos: row.int("memory_split_nanos")?,
        storage_nanos: row.int("storage_nanos")?,
        network_nanos: row.int("network_nanos")?,
        other_direct_nanos: row.int("other_direct_nanos")?,
        training_nanos: row.int("training_nanos")?,
        inference_nanos: row.int("inference_nanos")?,
        exempt: row.int("exempt")? != 0,
        shared_unallocated_nanos: row.int("shared_unallocated_nanos")?,
    })
}

/// Other cost per cluster, tags, service and usage type (amortized), for chargeback.
pub(crate) const SELECT_OTHER_COST_GROUPS: &str = "SELECT cluster, tags, service, usage_type, \
     CAST(SUM(amortized_cost_micros) AS BIGINT) AS amortized_cost_micros FROM other_costs \
     WHERE period = $1 GROUP BY cluster, tags, service, usage_type ORDER BY cluster, tags, service, usage_type";

pub(crate) fn read_other_cost_group(row: &impl ReadRow) -> Result<OtherCostGroup, sqlx::Error> {
    Ok(OtherCostGroup {
        cluster: row.text("cluster")?,
        tags: row.text("tags")?,
        service: row.text("service")?,
        usage_type: row.text("usage_type")?,
        amortized_cost_micros: row.int("amortized_cost_micros")?,
    })
}

pub(crate) const INSERT_OPPORTUNITY: BulkInsert = BulkInsert {
    head: "INSERT INTO rollup_opportunities (period, kind, namespace, workload, gpu_model, purchase_option, monthly_nanos, evidence, family) ",
    columns: 9,
};

pub(crate) const SELECT_OPPORTUNITY: &str = "SELECT period, kind, namespace, workload, gpu_model, purchase_option, monthly_nanos, evidence, family FROM rollup_opportunities WHERE period = $1 ORDER BY monthly_nanos DESC, kind, namespace, workload";

pub(crate) const DELETE_OPPORTUNITY: &str = "DELETE FROM rollup_opportunities WHERE period = $1";

/// Binds one row in [`INSERT_OPPORTUNITY`] column order.
pub(crate) fn push_opportunity<'args>(row: &mut impl PushRow<'args>, r: &'args Opportunity) {
    row.text(&r.period)
        .text(&r.kind)
        .text(&r.namespace)
        .text(&r.workload)
        .text(&r.gpu_model)
        .text(&r.purchase_option)
        .int(r.monthly_nanos)
        .text(&r.evidence)
        .text(&r.family);
}

pub(crate) fn read_opportunity(row: &impl ReadRow) -> Result<Opportunity, sqlx::Error> {
    Ok(Opportunity {
        period: row.text("period")?,
        kind: row.text("kind")?,
        namespace: row.text("namespace")?,
        workload: row.text("workload")?,
        gpu_model: row.text("gpu_model")?,
        purchase_option: row.text("purchase_option")?,
        monthly_nanos: row.int("monthly_nanos")?,
        evidence: row.text("evidence")?,
        family: row.text("family")?,
    })
}

pub(crate) fn read_measured_pod_hour(row: &impl ReadRow) -> Result<MeasuredPodHour, sqlx::Error> {
    Ok(MeasuredPodHour {
        cluster: row.text("cluster")?,
        namespace: row.text("namespace")?,
        pod: row.text("pod")?,
        hour: row.int("hour")?,
        busy: row.float("busy")?,
        weight: row.float("weight")?,
        idle_weight: row.float("idle_weight")?,
        peak_fb_used_mib: row.float("peak_fb_used_mib")?,
    })
}

pub(crate) fn read_served_pod_hour(row: &impl ReadRow) -> Result<ServedPodHour, sqlx::Error> {
    Ok(ServedPodHour {
        cluster: row.text("cluster")?,
        namespace: row.text("namespace")?,
        pod: row.text("pod")?,
        hour: row.int("hour")?,
        requests: row.float("requests")?,
        prompt_tokens: row.float("prompt_tokens")?,
        generation_tokens: row.float("generation_tokens")?,
    })
}

/// What a re-ingested period invalidates: its aggregates and rollups.
pub(crate) const DELETE_FOR_PERIOD: [&str; 8] = [
    DELETE_POD_DAY,
    DELETE_GPU_POD_HOUR,
    DELETE_COST_ROLLUP,
    DELETE_CAPACITY_ROLLUP,
    DELETE_HEATMAP_CELL,
    DELETE_PERIOD_ROLLUP,
    DELETE_CLIENT_ROLLUP,
    DELETE_OPPORTUNITY,
];

/// What a compute run replaces.
pub(crate) const DELETE_ROLLUPS: [&str; 6] = [
    DELETE_COST_ROLLUP,
    DELETE_CAPACITY_ROLLUP,
    DELETE_HEATMAP_CELL,
    DELETE_PERIOD_ROLLUP,
    DELETE_CLIENT_ROLLUP,
    DELETE_OPPORTUNITY,
];

pub(crate) const COUNT_POD_DAYS: &str = "SELECT COUNT(*) AS n FROM cost_pod_days WHERE period = $1";

/// Rebuilds a period's aggregates from its facts: for periods ingested before the ingest
/// wrote them (a one-time scan of the facts).
pub(crate) const BACKFILL_AGGREGATES: [&str; 2] = [
    "INSERT INTO cost_pod_days (period, pod_id, day, gpu_hours, gpu_cost_nanos, cpu_cost_nanos, \
     memory_cost_nanos, split_cost_nanos, unused_cost_nanos, net_cost_nanos, public_on_demand_cost_nanos, \
     gpu_split_nanos, cpu_split_nanos) \
     SELECT period, pod_id, hour - (hour % 86400), \
     SUM(CASE WHEN resource = 'gpu' THEN split_usage ELSE 0 END), \
     SUM(CASE WHEN resource = 'gpu' THEN split_cost_nanos + unused_cost_nanos ELSE 0 END), \
     SUM(CASE WHEN resource = 'vcpu' THEN split_cost_nanos + unused_cost_nanos ELSE 0 END), \
     SUM(CASE WHEN resource = 'memory' THEN split_cost_nanos + unused_cost_nanos ELSE 0 END), \
     SUM(split_cost_nanos), SUM(unused_cost_nanos), SUM(net_split_cost_nanos + net_unused_cost_nanos), \
     SUM(public_on_demand_split_cost_nanos + public_on_demand_unused_cost_nanos), \
     SUM(CASE WHEN resource = 'gpu' THEN split_cost_nanos ELSE 0 END), \
     SUM(CASE WHEN resource = 'vcpu' THEN split_cost_nanos ELSE 0 END) \
     FROM cost_facts WHERE period = $1 GROUP BY period, pod_id, hour - (hour % 86400)",
    "INSERT INTO cost_gpu_pod_hours (period, pod_id, hour, gpu_hours, gpu_cost_nanos, pod_cost_nanos) \
     SELECT period, pod_id, hour, \
     SUM(CASE WHEN resource = 'gpu' THEN split_usage ELSE 0 END), \
     SUM(CASE WHEN resource = 'gpu' THEN split_cost_nanos + unused_cost_nanos ELSE 0 END), \
     SUM(split_cost_nanos + unused_cost_nanos) \
     FROM cost_facts WHERE period = $1 GROUP BY period, pod_id, hour \
     HAVING SUM(CASE WHEN resource = 'gpu' THEN split_usage ELSE 0 END) > 0",
];

/// Instance-hours per day, cluster, type and purchase option ($1 the period; the period
/// name is selected back so the row reads as a [`CapacityRollup`]). CAST: Postgres sums
/// BIGINT as NUMERIC.
pub(crate) const SELECT_CAPACITY_SUMS: &str = "SELECT period, hour - (hour % 86400) AS day, cluster, \
     instance_type, gpu_model, purchase_option, SUM(usage_hours) AS instance_hours, \
     SUM(gpu_count * usage_hours) AS gpu_hours_provisioned, \
     CAST(SUM(amortized_cost_micros) AS BIGINT) AS amortized_cost_micros, \
     CAST(SUM(public_on_demand_cost_micros) AS BIGINT) AS public_on_demand_cost_micros \
     FROM instance_hours WHERE period = $1 \
     GROUP BY period, hour - (hour % 86400), cluster, instance_type, gpu_model, purchase_option \
     ORDER BY day, cluster, instance_type, gpu_model, purchase_option";

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
