//! The store "story": one scenario run against every backend, so SQLite and Postgres are
//! held to the same behaviour. SQLite always runs; Postgres runs when
//! `GPULEDGER_TEST_POSTGRES_URL` is set (see `helpers`).

use gpuledger::domain::settings::{ClientTerms, EffectiveFrom, Pool, ShareRule};
use gpuledger::store::prelude::*;
use gpuledger::store::sqlite::SqliteStore;
use gpuledger::store::{
    BillDay, BillLine, ClientRule, CommitmentMonth, CostFact, CostPeriod, GpuUsage, InferenceUsage,
    IngestOutcome, IngestRun, InstanceHour, NewIngestRun, OtherCost, PeriodSummary, RunStatus, connect,
};

use crate::helpers;

/// 2025-05-01T00:00:00Z.
const MAY_FIRST: i64 = 1_746_057_600;
/// 2025-06-01T00:00:00Z: May has 31 days, 1_746_057_600 + 31 * 86_400.
const JUNE_FIRST: i64 = 1_748_736_000;
/// 2025-07-01T00:00:00Z: 1_748_736_000 + 30 * 86_400.
const JULY_FIRST: i64 = 1_751_328_000;
const HOUR: i64 = 3_600;

const CLUSTER: &str = "prod-use1";
const INSTANCE_ID: &str = "i-0a1b2c3d4e5f60001";
/// g5.12xlarge On-Demand in us-east-1: $5.672 an hour.
const INSTANCE_HOUR_MICROS: i64 = 5_672_000;

/// Which pod a cost fact belongs to: (namespace, workload, workload type, pod).
type Pod = (&'static str, &'static str, &'static str, &'static str);
const TRAINER: Pod = ("team-a", "trainer", "StatefulSet", "trainer-0");
const INFERENCE: Pod = ("team-b", "chat-api", "ReplicaSet", "chat-api-5d8f7c9b6-x2k4q");

/// One On-Demand cost fact on the test instance; reserved, actual and split usage are equal,
/// and the net and public prices equal the split cost because nothing is discounted.
fn fact(
    hour: i64,
    pod: Pod,
    resource: &str,
    usage: f64,
    ratio: f64,
    split_cost_nanos: i64,
    unused_cost_nanos: i64,
) -> CostFact {
    let (namespace, workload, workload_type, pod) = pod;
    CostFact {
        hour,
        cluster: CLUSTER.to_string(),
        namespace: namespace.to_string(),
        workload: workload.to_string(),
        workload_type: workload_type.to_string(),
        pod: pod.to_string(),
        node: "ip-10-0-12-34.ec2.internal".to_string(),
        instance_id: INSTANCE_ID.to_string(),
        instance_type: "g5.12xlarge".to_string(),
        gpu_model: "A10G".to_string(),
        purchase_option: gpuledger::store::PurchaseOption::OnDemand,
        resource: resource.to_string(),
        reserved_usage: usage,
        actual_usage: usage,
        split_usage: usage,
        split_usage_ratio: ratio,
        split_cost_nanos,
        unused_cost_nanos,
        net_split_cost_nanos: split_cost_nanos,
        net_unused_cost_nanos: unused_cost_nanos,
        public_on_demand_split_cost_nanos: split_cost_nanos,
        public_on_demand_unused_cost_nanos: unused_cost_nanos,
        labels: format!(r#"{{"user_team":"{namespace}"}}"#),
    }
}

fn instance_hour(hour: i64, amortized_cost_micros: i64) -> InstanceHour {
    InstanceHour {
        hour,
        cluster: CLUSTER.to_string(),
        instance_id: INSTANCE_ID.to_string(),
        instance_type: "g5.12xlarge".to_string(),
        gpu_model: "A10G".to_string(),
        gpu_count: 4,
        vcpu: 48,
        memory_gib: 192,
        purchase_option: gpuledger::store::PurchaseOption::OnDemand,
        usage_account_id: "111122223333".to_string(),
        region: "us-east-1".to_string(),
        usage_hours: 1.0,
        unblended_cost_micros: INSTANCE_HOUR_MICROS,
        amortized_cost_micros,
        net_amortized_cost_micros: amortized_cost_micros,
        public_on_demand_cost_micros: INSTANCE_HOUR_MICROS,
    }
}

fn other_cost(service: &str, usage_type: &str, cost_micros: i64) -> OtherCost {
    OtherCost {
        day: MAY_FIRST,
        service: service.to_string(),
        line_item_type: "Usage".to_string(),
        usage_type: usage_type.to_string(),
        usage_account_id: "111122223333".to_string(),
        cluster: "ml-prod".to_string(),
        tags: r#"{"user_client":"acme"}"#.to_string(),
        unblended_cost_micros: cost_micros,
        amortized_cost_micros: cost_micros,
        // 0.023 USD per GB-month: the usage amount round-trips with the cost.
        usage_amount: cost_micros as f64 / 23_000.0,
    }
}

fn bill_day(service: &str, micros: i64) -> BillDay {
    BillDay {
        day: MAY_FIRST - MAY_FIRST.rem_euclid(86_400),
        service: service.into(),
        usage_account_id: "222222222222".into(),
        unblended_micros: micros,
        amortized_micros: micros,
    }
}

fn bill_line(service: &str, line_item_type: &str, category: &str, micros: i64, net: Option<i64>) -> BillLine {
    BillLine {
        billing_entity: "AWS".into(),
        invoice_id: "INV-1".into(),
        usage_account_id: "111122223333".into(),
        usage_account_name: "story".into(),
        service: service.into(),
        line_item_type: line_item_type.into(),
        category: category.parse().unwrap(),
        unblended_micros: micros,
        amortized_micros: micros,
        net_amortized_micros: net,
    }
}

/// May 2025 as first delivered: one g5.12xlarge (4 GPUs, 48 vCPU, 192 GiB) shared by a
/// trainer (3 GPUs, 32 vCPU, 144 GiB) and an inference pod (1 GPU, 8 vCPU, 48 GiB) for the
/// first hour, rows in the order the store returns them (hour, instance, namespace, pod,
/// resource).
///
/// The hour's $5.672 splits 80 % GPU, 15 % vCPU, 5 % memory:
/// - GPU 4_537_600, 3:1 -> 3_403_200 + 1_134_400;
/// - vCPU 850_800 = 17_725 per vCPU -> 32 * 17_725 = 567_200 and 8 * 17_725 = 141_800; the 8
///   idle vCPU (141_800) are unused cost shared 32:8 -> 113_440 + 28_360;
/// - memory 283_600, 144:48 -> 212_700 + 70_900.
fn may_first_delivery() -> CostPeriod {
    CostPeriod {
        period: "2025-05".to_string(),
        data_version: "exec-1".to_string(),
        // Two instance hours, EKS control plane and S3:
        // 2 * 5_672_000 + 2_400_000 + 1_234_567 = 14_978_567.
        bill_unblended_micros: 14_978_567 - 500_000,
        bill_amortized_micros: 14_978_567,
        net_amortized_micros: Some(14_478_567),
        // The first hour's pods; the second hour has none (unallocated).
        kubernetes_micros: 5_672_000,
        unallocated_ec2_micros: 5_672_000,
        currency: "USD".into(),
        billing_account: "999999999999".into(),
        bill_lines: vec![
            bill_line("AmazonEC2", "Credit", "credit", -500_000, Some(-500_000)),
            bill_line("AmazonEC2", "Usage", "usage", 11_344_000, Some(11_344_000)),
            bill_line("AmazonEKS", "Usage", "usage", 2_400_000, Some(2_400_000)),
            bill_line("AmazonS3", "Usage", "usage", 1_234_567, Some(1_234_567)),
        ],
        // The day's bill per service: EC2's two hours less the credit.
        bill_days: vec![
            bill_day("AmazonEC2", 11_344_000 - 500_000),
            bill_day("AmazonEKS", 2_400_000),
            bill_day("AmazonS3", 1_234_567),
        ],
        cost_facts: vec![
            fact(MAY_FIRST, TRAINER, "gpu", 3.0, 0.75, 3_403_200, 0),
            fact(MAY_FIRST, TRAINER, "memory", 144.0, 0.75, 212_700, 0),
            fact(MAY_FIRST, TRAINER, "vcpu", 32.0, 32.0 / 48.0, 567_200, 113_440),
            fact(MAY_FIRST, INFERENCE, "gpu", 1.0, 0.25, 1_134_400, 0),
            fact(MAY_FIRST, INFERENCE, "memory", 48.0, 0.25, 70_900, 0),
            fact(MAY_FIRST, INFERENCE, "vcpu", 8.0, 8.0 / 48.0, 141_800, 28_360),
        ],
        instance_hours: vec![
            instance_hour(MAY_FIRST, INSTANCE_HOUR_MICROS),
            instance_hour(MAY_FIRST + HOUR, INSTANCE_HOUR_MICROS),
        ],
        other_costs: vec![
            // $0.10 an hour for 24 hours.
            other_cost("AmazonEKS", "USE1-AmazonEKS-Hours:perCluster", 2_400_000),
            other_cost("AmazonS3", "USE1-TimedStorage-ByteHrs", 1_234_567),
        ],
        commitments: Vec::new(),
    }
}

/// The Savings Plan of May restated: $4 an hour for the month's 744 hours, of which the
/// instance's hour at the plan's rate was used.
fn may_savings_plan() -> CommitmentMonth {
    CommitmentMonth {
        id: "arn:aws:savingsplans::999999999999:savingsplan/5a3c".into(),
        kind: "savings_plan".into(),
        offering: "ComputeSavingsPlans".into(),
        family: "Compute".into(),
        purchase_term: "1yr".into(),
        payment_option: "No Upfront".into(),
        // 2025-01-01 to 2026-01-01.
        term_start: 1_735_689_600,
        term_end: 1_767_225_600,
        count: 1,
        hours: 744.0,
        fee_micros: 4_000_000 * 744,
        used_micros: 3_970_400,
        ..CommitmentMonth::default()
    }
}

/// May 2025 restated after a Savings Plan covered the instance: amortized 30 % lower,
/// 5_672_000 * 0.7 = 3_970_400, of which GPU 80 % = 3_176_320, 3:1 -> 2_382_240 + 794_080.
fn may_restated() -> CostPeriod {
    CostPeriod {
        period: "2025-05".to_string(),
        data_version: "exec-2".to_string(),
        bill_unblended_micros: 5_672_000,
        bill_amortized_micros: 3_970_400,
        kubernetes_micros: 3_176_320,
        unallocated_ec2_micros: 794_080,
        currency: "USD".into(),
        billing_account: String::new(),
        cost_facts: vec![
            fact(MAY_FIRST, TRAINER, "gpu", 3.0, 0.75, 2_382_240, 0),
            fact(MAY_FIRST, INFERENCE, "gpu", 1.0, 0.25, 794_080, 0),
        ],
        instance_hours: vec![instance_hour(MAY_FIRST, 3_970_400)],
        other_costs: vec![],
        commitments: vec![may_savings_plan()],
        ..CostPeriod::default()
    }
}

/// June 2025 so far: one hour of the instance, of which the inference pod's GPU share as in
/// May: 4_537_600 / 4 = 1_134_400.
fn june() -> CostPeriod {
    CostPeriod {
        period: "2025-06".to_string(),
        data_version: "exec-7".to_string(),
        bill_unblended_micros: INSTANCE_HOUR_MICROS,
        bill_amortized_micros: INSTANCE_HOUR_MICROS,
        cost_facts: vec![fact(JUNE_FIRST, INFERENCE, "gpu", 1.0, 0.25, 1_134_400, 0)],
        instance_hours: vec![instance_hour(JUNE_FIRST, INSTANCE_HOUR_MICROS)],
        other_costs: vec![],
        currency: "USD".into(),
        billing_account: String::new(),
        ..CostPeriod::default()
    }
}

/// July 2025 at full scale: four inference replicas, one GPU each, on the instance for all
/// 744 hours: 4 * 744 = 2_976 facts, more than one INSERT carries on either backend.
fn july() -> CostPeriod {
    let replicas = ["chat-api-7c9d-a", "chat-api-7c9d-b", "chat-api-7c9d-c", "chat-api-7c9d-d"];
    let cost_facts = (0..744)
        .flat_map(|hour| {
            replicas.iter().map(move |replica| CostFact {
                pod: replica.to_string(),
                ..fact(JULY_FIRST + hour * HOUR, INFERENCE, "gpu", 1.0, 0.25, 1_134_400, 0)
            })
        })
        .collect();
    CostPeriod {
        period: "2025-07".to_string(),
        data_version: "exec-9".to_string(),
        // 744 * 5_672_000 = 4_219_968_000.
        bill_unblended_micros: 4_219_968_000,
        bill_amortized_micros: 4_219_968_000,
        cost_facts,
        instance_hours: vec![],
        other_costs: vec![],
        currency: "USD".into(),
        billing_account: String::new(),
        ..CostPeriod::default()
    }
}

/// A period as the store keeps it: everything but the line-level facts.
fn without_facts(period: &CostPeriod) -> CostPeriod {
    CostPeriod { cost_facts: Vec::new(), ..period.clone() }
}

/// Writes the period with its rows reversed, so reading it back equal also proves the
/// store sorts rather than returning insertion order.
async fn write_shuffled(store: &dyn Store, period: &CostPeriod) {
    let mut shuffled = period.clone();
    shuffled.cost_facts.reverse();
    shuffled.instance_hours.reverse();
    shuffled.other_costs.reverse();
    shuffled.bill_lines.reverse();
    shuffled.bill_days.reverse();
    store.replace_cost_period(&shuffled).await.unwrap();
}

fn gpu_usage(hour: i64, pod: &str, mean_utilization: f64) -> GpuUsage {
    GpuUsage {
        hour,
        hostname: "ip-10-0-12-34.ec2.internal".to_string(),
        gpu_uuid: "GPU-3f2a9c1e-7b44-4a0d-9e2f-5c6b7a8d9e01".to_string(),
        gpu_instance: String::new(),
        gpu_model: "NVIDIA A10G".to_string(),
        namespace: "team-a".to_string(),
        pod: pod.to_string(),
        container: "main".to_string(),
        mean_utilization,
        peak_fb_used_mib: 18_432.0,
        // One sample every 15 s.
        samples: 240,
        gpu_profile: String::new(),
        gpu_hours: 1.0,
        cluster: "ml-prod".to_string(),
    }
}

fn inference_usage(hour: i64, requests: f64) -> InferenceUsage {
    InferenceUsage {
        cluster: "ml-prod".to_string(),
        hour,
        namespace: "team-b".to_string(),
        pod: INFERENCE.3.to_string(),
        workload: INFERENCE.1.to_string(),
        model: "llama-3.1-8b-instruct".to_string(),
        requests,
        prompt_tokens: requests * 512.0,
        generation_tokens: requests * 128.0,
    }
}

fn rule(client: &str, match_kind: &str, pattern: &str, label_key: &str, priority: i64) -> ClientRule {
    ClientRule {
        client: client.to_string(),
        match_kind: match_kind.parse().unwrap(),
        pattern: pattern.to_string(),
        label_key: label_key.to_string(),
        priority,
    }
}

/// The scenario every backend must pass, on a freshly connected (so migrated) store.
pub async fn story(store: &dyn Store) {
    // (a) `connect` applied every migration, so applying them again does nothing, twice.
    assert_eq!(store.migrate().await.unwrap(), 0);
    assert_eq!(store.migrate().await.unwrap(), 0);

    // (b) Ingest runs: one succeeds, a later one fails, a third is still running.
    let cur_run = |data_version: &str, started_at: i64| NewIngestRun {
        kind: gpuledger::domain::runs::RunKind::Cur,
        source: "s3://acme-billing/cur/gpuledger/".to_string(),
        period: "2025-05".to_string(),
        data_version: data_version.to_string(),
        started_at,
        host: "ingest-host".to_string(),
        pid: 4242,
    };
    let started = 1_748_800_000;
    let succeeded_id = store.begin_ingest_run(&cur_run("exec-1", started)).await.unwrap();
    let succeeded = IngestOutcome {
        status: RunStatus::Succeeded,
        rows_read: 14_212,
        rows_written: 10,
        finished_at: started + 42,
        error: None,
        reconciliation: Some(r#"{"bill_unblended_micros":14978567}"#.to_string()),
    };
    store.finish_ingest_run(succeeded_id, &succeeded).await.unwrap();
    let failed_id = store.begin_ingest_run(&cur_run("exec-2", started + 60)).await.unwrap();
    let failed = IngestOutcome {
        status: RunStatus::Failed,
        rows_read: 0,
        rows_written: 0,
        finished_at: started + 61,
        error: Some("S3 GetObject: AccessDenied".to_string()),
        reconciliation: None,
    };
    store.finish_ingest_run(failed_id, &failed).await.unwrap();
    let running = NewIngestRun {
        kind: gpuledger::domain::runs::RunKind::Prometheus,
        source: "http://prometheus.monitoring:9090".to_string(),
        period: "2025-05-31".to_string(),
        data_version: String::new(),
        started_at: started + 120,
        host: "ingest-host".to_string(),
        pid: 4343,
    };
    let running_id = store.begin_ingest_run(&running).await.unwrap();

    let expected_runs = vec![
        IngestRun {
            id: running_id,
            kind: running.kind,
            source: running.source.clone(),
            period: running.period.clone(),
            data_version: String::new(),
            status: RunStatus::Running,
            rows_read: 0,
            rows_written: 0,
            started_at: started + 120,
            finished_at: None,
            error: None,
            reconciliation: None,
            host: "ingest-host".to_string(),
            pid: 4343,
        },
        IngestRun {
            id: failed_id,
            kind: gpuledger::domain::runs::RunKind::Cur,
            source: "s3://acme-billing/cur/gpuledger/".to_string(),
            period: "2025-05".to_string(),
            data_version: "exec-2".to_string(),
            status: RunStatus::Failed,
            rows_read: 0,
            rows_written: 0,
            started_at: started + 60,
            finished_at: Some(started + 61),
            error: failed.error.clone(),
            reconciliation: None,
            host: "ingest-host".to_string(),
            pid: 4242,
        },
        IngestRun {
            id: succeeded_id,
            kind: gpuledger::domain::runs::RunKind::Cur,
            source: "s3://acme-billing/cur/gpuledger/".to_string(),
            period: "2025-05".to_string(),
            data_version: "exec-1".to_string(),
            status: RunStatus::Succeeded,
            rows_read: 14_212,
            rows_written: 10,
            started_at: started,
            finished_at: Some(started + 42),
            error: None,
            reconciliation: succeeded.reconciliation.clone(),
            host: "ingest-host".to_string(),
            pid: 4242,
        },
    ];
    assert_eq!(store.ingest_runs(10).await.unwrap(), expected_runs);
    assert_eq!(store.ingest_runs(1).await.unwrap(), expected_runs[..1].to_vec());
    // The failed exec-2 must not count as delivered.
    assert_eq!(
        store.last_data_version(gpuledger::domain::runs::RunKind::Cur, "2025-05").await.unwrap(),
        Some("exec-1".to_string())
    );
    assert_eq!(
        store.last_data_version(gpuledger::domain::runs::RunKind::Cur, "2025-06").await.unwrap(),
        None
    );
    assert!(store.finish_ingest_run(running_id + 1_000, &succeeded).await.is_err());
    // Another host's runs are not this host's to close; of this host's, only dead processes'.
    assert_eq!(store.close_abandoned_runs("other-host", &|_| false).await.unwrap(), 0);
    assert_eq!(store.close_abandoned_runs("ingest-host", &|pid| pid == 4343).await.unwrap(), 0);
    assert_eq!(store.close_abandoned_runs("ingest-host", &|_| false).await.unwrap(), 1);
    let interrupted = store.ingest_runs(1).await.unwrap().remove(0);
    assert_eq!((interrupted.id, interrupted.status), (running_id, RunStatus::Interrupted));
    assert!(interrupted.error.unwrap().contains("4343 on ingest-host"));

    // (c) A period written whole reads back whole, sorted; its facts are kept as pod-day and
    // GPU pod-hour sums (the CUR is the line-level record), not line by line.
    assert_eq!(store.cost_period("2025-05").await.unwrap(), None);
    let first = may_first_delivery();
    let before_write = chrono::Utc::now().timestamp();
    write_shuffled(store, &first).await;
    let read = store.cost_period("2025-05").await.unwrap().expect("May was just written");
    assert_eq!(read, without_facts(&first));
    // Every split and unused cost of the first hour adds up to what the instance cost.
    let inputs = store.compute_inputs("2025-05", 0.10).await.unwrap().unwrap();
    let hour_total: i64 = inputs.pod_days.iter().map(|d| d.split_cost_nanos + d.unused_cost_nanos).sum();
    assert_eq!(hour_total, INSTANCE_HOUR_MICROS);
    // The trainer's three GPUs and the inference pod's one, in that hour's GPU pod-hours.
    let gpu_hours: f64 = inputs.gpu_pod_hours.iter().map(|h| h.gpu_hours).sum();
    assert_eq!((inputs.pod_days.len(), gpu_hours), (2, 4.0));
    // The instance's two On-Demand hours, hour by hour, as commitment advice reads them.
    let hours = store.usage_hours("2025-05", "2025-05").await.unwrap();
    let by_hour: Vec<(i64, &str, f64, i64)> = hours
        .iter()
        .map(|h| (h.hour, h.purchase_option.as_str(), h.usage_hours, h.public_on_demand_cost_micros))
        .collect();
    assert_eq!(
        by_hour,
        vec![
            (MAY_FIRST, "On-Demand", 1.0, INSTANCE_HOUR_MICROS),
            (MAY_FIRST + HOUR, "On-Demand", 1.0, INSTANCE_HOUR_MICROS)
        ]
    );
    assert!(store.commitment_months().await.unwrap().is_empty());

    // (d) Replacing the period leaves none of the old rows.
    let restated = may_restated();
    write_shuffled(store, &restated).await;
    assert_eq!(store.cost_period("2025-05").await.unwrap(), Some(without_facts(&restated)));
    // Its Savings Plan's month, and its $4 an hour.
    let plans = store.commitment_months().await.unwrap();
    assert_eq!(plans, vec![("2025-05".to_string(), may_savings_plan())]);
    assert_eq!(plans[0].1.hourly_micros(), 4_000_000.0);
    let periods = store.periods().await.unwrap();
    assert_eq!(periods.len(), 1, "{periods:?}");
    let ingested_at = periods[0].ingested_at;
    assert!(ingested_at >= before_write, "ingested_at {ingested_at} < {before_write}");
    assert_eq!(
        periods,
        vec![PeriodSummary {
            period: "2025-05".to_string(),
            data_version: "exec-2".to_string(),
            bill_unblended_micros: 5_672_000,
            bill_amortized_micros: 3_970_400,
            unallocated_ec2_micros: 794_080,
            cost_fact_rows: 2,
            ingested_at,
        }]
    );

    // (e) A second period is listed first (newest first) and leaves May alone.
    write_shuffled(store, &june()).await;
    let listed: Vec<(String, i64)> = store
        .periods()
        .await
        .unwrap()
        .into_iter()
        .map(|summary| (summary.period, summary.cost_fact_rows))
        .collect();
    assert_eq!(listed, vec![("2025-06".to_string(), 1), ("2025-05".to_string(), 2)]);
    assert_eq!(store.cost_period("2025-05").await.unwrap(), Some(without_facts(&restated)));
    // Its Savings Plan's month, and its $4 an hour.
    let plans = store.commitment_months().await.unwrap();
    assert_eq!(plans, vec![("2025-05".to_string(), may_savings_plan())]);
    assert_eq!(plans[0].1.hourly_micros(), 4_000_000.0);
    assert_eq!(store.cost_period("2025-06").await.unwrap(), Some(without_facts(&june())));

    // (f) Replacing the usage window [hour 1, hour 2) touches neither hour 0 nor hour 2.
    let hours = [MAY_FIRST, MAY_FIRST + HOUR, MAY_FIRST + 2 * HOUR];
    let gpu: Vec<GpuUsage> = hours.iter().map(|&hour| gpu_usage(hour, "trainer-0", 0.87)).collect();
    let inference: Vec<InferenceUsage> = hours.iter().map(|&hour| inference_usage(hour, 1_200.0)).collect();
    let (from, to) = (MAY_FIRST, MAY_FIRST + 3 * HOUR);
    store.replace_usage_window(from, to, &[""], &gpu, &inference).await.unwrap();
    assert_eq!(store.gpu_usage(from, to).await.unwrap(), gpu);
    assert_eq!(store.inference_usage(from, to).await.unwrap(), inference);

    let gpu_rerun = gpu_usage(hours[1], "trainer-1", 0.42);
    let inference_rerun = inference_usage(hours[1], 950.0);
    store
        .replace_usage_window(
            hours[1],
            hours[2],
            &[""],
            std::slice::from_ref(&gpu_rerun),
            std::slice::from_ref(&inference_rerun),
        )
        .await
        .unwrap();
    assert_eq!(
        store.gpu_usage(from, to).await.unwrap(),
        vec![gpu[0].clone(), gpu_rerun.clone(), gpu[2].clone()]
    );
    assert_eq!(
        store.inference_usage(from, to).await.unwrap(),
        vec![inference[0].clone(), inference_rerun, inference[2].clone()]
    );
    // Half-open: a window ending at hour 2 excludes hour 2.
    assert_eq!(store.gpu_usage(hours[1], hours[2]).await.unwrap(), vec![gpu_rerun]);
    // One cluster's window (a Prometheus per cluster) leaves the other clusters' rows alone.
    let west = GpuUsage { cluster: "ml-west".into(), gpu_uuid: "GPU-west".into(), ..gpu[2].clone() };
    store
        .replace_usage_window(hours[2], hours[2] + HOUR, &["ml-west"], std::slice::from_ref(&west), &[])
        .await
        .unwrap();
    assert_eq!(store.gpu_usage(hours[2], hours[2] + HOUR).await.unwrap().len(), 2, "ml-prod's row kept");
    store.replace_usage_window(hours[2], hours[2] + HOUR, &["ml-west"], &[], &[]).await.unwrap();
    assert_eq!(store.gpu_usage(hours[2], hours[2] + HOUR).await.unwrap(), vec![gpu[2].clone()]);
    // Idle is counted per GPU: an 8-GPU pod-hour with seven GPUs at 0 % and one at 90 %
    // (mean 11.25 %) has 7 of its 8 GPU-hours below a 10 % threshold, none below 0 %.
    let stalled_hour = MAY_FIRST + 5 * HOUR;
    let eight: Vec<GpuUsage> = (0..8)
        .map(|gpu| GpuUsage {
            gpu_uuid: format!("GPU-{gpu}"),
            ..gpu_usage(stalled_hour, "stalled-0", if gpu == 0 { 0.9 } else { 0.0 })
        })
        .collect();
    store.replace_usage_window(stalled_hour, stalled_hour + HOUR, &[""], &eight, &[]).await.unwrap();
    for (threshold, idle) in [(0.10, 7.0), (0.0, 0.0)] {
        let inputs = store.compute_inputs("2025-05", threshold).await.unwrap().unwrap();
        let pod_hour = inputs.measured.iter().find(|m| m.pod == "stalled-0").unwrap();
        assert_eq!((pod_hour.weight, pod_hour.idle_weight), (8.0, idle), "{}", store.backend());
        assert!((pod_hour.busy - 0.9).abs() < 1e-12);
    }

    // (g) Settings: versions saved, read back, and the one in force for each month; saving
    // the same (setting, month) again replaces it, and a rule list saved from a month reaches
    // that month only.
    let rules = vec![
        rule("acme", "label", "acme", "user_client", 5),
        rule("acme", "namespace", "team-b", "", 10),
        rule("research", "prefix", "team-a", "", 20),
    ];
    let september = EffectiveFrom::month("2026-09".parse().unwrap());
    let mut history = store.settings().await.unwrap();
    let markup = history.client_version("acme", EffectiveFrom::BEGINNING, |t| t.markup_basis_points = 1_250);
    store.save_settings(&[markup.unwrap()]).await.unwrap();
    history = store.settings().await.unwrap();
    let exempt = history.client_version("acme", september, |t| t.exempt = true).unwrap();
    let even = history.pool_version(Pool::Platform, ShareRule::Even, september);
    let mut versions = vec![exempt, even];
    versions.extend(history.mapping_versions(september, |r| r.extend(rules.clone())).unwrap());
    store.save_settings(&versions).await.unwrap();
    let replaced = store.settings().await.unwrap().pool_version(Pool::Platform, ShareRule::Total, september);
    store.save_settings(&[replaced]).await.unwrap();
    let history = store.settings().await.unwrap();
    assert_eq!(history.versions.len(), 4, "{:?}", history.versions);
    let august = history.in_force("2026-08".parse().unwrap()).unwrap();
    assert_eq!(
        august.terms("acme"),
        ClientTerms { markup_basis_points: 1_250, exempt: false, ..ClientTerms::default() }
    );
    assert_eq!((august.pools.platform, august.rules.len()), (ShareRule::Gpu, 0));
    let october = history.in_force("2026-10".parse().unwrap()).unwrap();
    assert_eq!(
        october.terms("acme"),
        ClientTerms { markup_basis_points: 1_250, exempt: true, ..ClientTerms::default() }
    );
    assert_eq!((october.pools.platform, october.rules), (ShareRule::Total, rules));

    // (h) A month of facts (2_976) is summed into pod-days (4 replicas × 31 days) and GPU
    // pod-hours (4 × 744, more than one INSERT carries on either backend) and read back.
    let july = july();
    write_shuffled(store, &july).await;
    assert_eq!(store.cost_period("2025-07").await.unwrap(), Some(without_facts(&july)));
    let july_rows = store.periods().await.unwrap()[0].cost_fact_rows;
    assert_eq!(july_rows, 2_976);
    let inputs = store.compute_inputs("2025-07", 0.10).await.unwrap().unwrap();
    assert_eq!((inputs.pod_days.len(), inputs.gpu_pod_hours.len()), (124, 2_976));

    // (i) A workload's pods over July's first ten days, from the pod-day sums: each replica
    // holds one GPU for 240 hours at 1_134_400 nano-USD an hour = 272_256_000.
    let ten_days = JULY_FIRST + 10 * 24 * HOUR;
    let pods = store.pod_costs("2025-07", "team-b", "chat-api", JULY_FIRST, ten_days).await.unwrap();
    let names: Vec<&str> = pods.iter().map(|p| p.pod.as_str()).collect();
    assert_eq!(names, ["chat-api-7c9d-a", "chat-api-7c9d-b", "chat-api-7c9d-c", "chat-api-7c9d-d"]);
    for pod in &pods {
        assert_eq!(
            (pod.gpu_hours, pod.split_cost_nanos, pod.gpu_cost_nanos),
            (240.0, 272_256_000, 272_256_000)
        );
        assert_eq!(
            (pod.unused_cost_nanos, pod.cluster.as_str(), pod.instance_type.as_str()),
            (0, CLUSTER, "g5.12xlarge")
        );
    }
    // Another namespace's workload, or a window outside the period, has no pods.
    assert!(store.pod_costs("2025-07", "team-a", "chat-api", JULY_FIRST, ten_days).await.unwrap().is_empty());
    assert!(
        store.pod_costs("2025-07", "team-b", "chat-api", JUNE_FIRST, JULY_FIRST).await.unwrap().is_empty()
    );
}

#[tokio::test]
async fn story_sqlite() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite:{}", dir.path().join("t.db").display());
    let store = connect(&url).await.expect("open the SQLite store");
    assert_eq!(store.backend(), "sqlite");
    story(store.as_ref()).await;
}

#[tokio::test]
async fn story_postgres() {
    let Some(database) = helpers::fresh_postgres().await else {
        println!("story_postgres skipped: set {} to run it", helpers::POSTGRES_URL_VAR);
        return;
    };
    let store = connect(&database.url).await.expect("open the Postgres store");
    assert_eq!(store.backend(), "postgres");
    story(store.as_ref()).await;
    // `store` drops first (declared last), then `database` drops the database.
}

#[tokio::test]
async fn sqlite_in_memory_applies_migrations_once() {
    let store = SqliteStore::open("sqlite::memory:").await.expect("open in memory");
    assert!(store.migrate().await.unwrap() >= 1, "a new database needs the initial schema");
    assert_eq!(store.migrate().await.unwrap(), 0);
    assert!(store.periods().await.unwrap().is_empty());
}
