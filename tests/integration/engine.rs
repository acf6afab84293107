//! The engine against `truth.json`: costs within a cent, GPU-hours exact, ratios within
//! 0.1 %, chargeback shares included, and the reconciliation Σ clients = Σ namespaces =
//! Kubernetes cost, + other cost = the bill. On demo data (two months, SQLite and Postgres)
//! and small data (one month), then the report contracts through the binary.

use std::collections::BTreeMap;
use std::path::Path;

use gpuledger::engine::compute::compute_period;
use gpuledger::ingest::metrics::{MetricsIngestOptions, ingest_metrics};
use gpuledger::period::Period;
use gpuledger::report::NamespaceReport;
use gpuledger::store::{self, CostRollup, Store};
use gpuledger::synth::{CurFormat, Scale};
use serde_json::Value;

use crate::helpers;
use crate::ingest_cur::{export_root, generate_with, ingest, run, truth};

fn generate(out: &Path, scale: Scale, months: u32, seed: u64) {
    generate_with(out, scale, CurFormat::Parquet, months, seed, true);
}

/// Ingests the export and each month's metrics file, then computes every month.
pub async fn load(store: &dyn Store, out: &Path, periods: &[&str]) {
    ingest(store, &export_root(out).display().to_string(), false).await;
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
    for period in periods {
        let options = MetricsIngestOptions::file(out.join("metrics").join(format!("{period}.om")), None);
        ingest_metrics(store, &options, &progress).await.expect("metrics");
        compute_period(store, period.parse().unwrap()).await.expect("compute");
    }
}

fn usd(nanos: i64) -> f64 {
    nanos as f64 / 1e9
}

pub fn close(actual: f64, expected: f64, what: &str) {
    assert!((actual - expected).abs() < 0.01, "{what}: {actual} vs {expected} (within a cent)");
}

fn hours(actual: f64, expected: f64, what: &str) {
    assert!((actual - expected).abs() < 1e-6, "{what}: {actual} vs {expected} GPU-hours");
}

fn ratio(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= expected.abs() * 0.001 + 1e-12,
        "{what}: {actual} vs {expected} (0.1 %)"
    );
}

/// Sums of rollup rows grouped by `key`.
fn group<'a>(rows: &'a [CostRollup], key: impl Fn(&'a CostRollup) -> String) -> BTreeMap<String, CostRollup> {
    let mut out: BTreeMap<String, CostRollup> = BTreeMap::new();
    for r in rows {
        let g = out.entry(key(r)).or_default();
        g.split_cost_nanos += r.split_cost_nanos;
        g.unused_cost_nanos += r.unused_cost_nanos;
        g.gpu_cost_nanos += r.gpu_cost_nanos;
        g.idle_gpu_cost_nanos += r.idle_gpu_cost_nanos;
        g.idle_cost_nanos += r.idle_cost_nanos;
        g.serving_cost_nanos += r.serving_cost_nanos;
        g.public_on_demand_cost_nanos += r.public_on_demand_cost_nanos;
        g.gpu_hours_allocated += r.gpu_hours_allocated;
        g.gpu_hours_used += r.gpu_hours_used;
        g.gpu_hours_idle += r.gpu_hours_idle;
        g.gpu_hours_unmeasured += r.gpu_hours_unmeasured;
        g.spot_gpu_hours += r.spot_gpu_hours;
        g.requests += r.requests;
        g.prompt_tokens += r.prompt_tokens;
        g.generation_tokens += r.generation_tokens;
    }
    out
}

/// Every figure of one period's truth against the rollups.
pub async fn assert_period_matches_truth(store: &dyn Store, truth: &Value, period: &str) {
    let rollups = store.rollups(period).await.unwrap().expect("computed");
    let namespaces = group(&rollups.costs, |r| r.namespace.clone());
    for (namespace, t) in truth["namespaces"].as_object().unwrap() {
        let r = &namespaces[namespace];
        let what = |field: &str| format!("{period} {namespace} {field}");
        close(usd(r.split_cost_nanos), t["split_cost"].as_f64().unwrap(), &what("split"));
        close(usd(r.unused_cost_nanos), t["unused_cost"].as_f64().unwrap(), &what("unused"));
        close(usd(r.gpu_cost_nanos), t["gpu_cost"].as_f64().unwrap(), &what("GPU cost"));
        close(usd(r.idle_gpu_cost_nanos), t["idle_gpu_cost"].as_f64().unwrap(), &what("idle GPU cost"));
        close(usd(r.idle_cost_nanos), t["idle_cost"].as_f64().unwrap(), &what("idle cost, every resource"));
        hours(r.gpu_hours_allocated, t["gpu_hours_allocated"].as_f64().unwrap(), &what("allocated"));
        hours(r.gpu_hours_idle, t["gpu_hours_idle"].as_f64().unwrap(), &what("idle"));
        hours(r.spot_gpu_hours, t["spot_gpu_hours"].as_f64().unwrap(), &what("spot"));
        // What the pods reserved beside the GPUs (the invoices' vCPU-hour and GB-hour
        // quantities): the split usage of their vCPU and memory rows.
        let of_namespace = || rollups.costs.iter().filter(|c| &c.namespace == namespace);
        hours(
            of_namespace().map(|c| c.vcpu_hours).sum(),
            t["vcpu_hours"].as_f64().unwrap(),
            &what("vCPU-hours"),
        );
        let memory: f64 = of_namespace().map(|c| c.memory_gb_hours).sum();
        hours(memory, t["memory_gb_hours"].as_f64().unwrap(), &what("memory GB-hours"));
        assert!(t["vcpu_hours"].as_f64().unwrap() > 0.0, "{}", what("every namespace reserves vCPUs"));
        assert_eq!(r.gpu_hours_unmeasured, 0.0, "{}", what("every GPU pod-hour has metrics"));
        ratio(r.gpu_hours_used, t["gpu_hours_used"].as_f64().unwrap(), &what("used"));
        if r.gpu_hours_allocated > 0.0 {
            let expected = t["spot_gpu_hours"].as_f64().unwrap() / t["gpu_hours_allocated"].as_f64().unwrap();
            ratio(r.spot_gpu_hours / r.gpu_hours_allocated, expected, &what("spot adoption"));
        }
        let saved = usd(r.public_on_demand_cost_nanos - r.split_cost_nanos - r.unused_cost_nanos);
        let expected = t["public_on_demand_total_cost"].as_f64().unwrap() - t["total_cost"].as_f64().unwrap();
        close(saved, expected, &what("realized savings"));
    }
    // The pods' cost and GPU-hours by purchase option. At the peak hours a Savings Plan covers
    // 60 % of its instances' hours and the rest is billed On-Demand in a line of its own: those
    // pod-hours take each option by the lines' usage amounts, so On-Demand holds 40 % of them.
    let by_option = group(&rollups.costs, |r| r.purchase_option.as_str().to_string());
    let options = truth["pods_by_purchase_option"].as_object().unwrap();
    assert_eq!(by_option.keys().collect::<Vec<_>>(), options.keys().collect::<Vec<_>>(), "{period} options");
    for (option, t) in options {
        let r = &by_option[option];
        let what = format!("{period} pods under {option}");
        close(
            usd(r.split_cost_nanos + r.unused_cost_nanos),
            t["cost"].as_f64().unwrap(),
            &format!("{what}: cost"),
        );
        hours(r.gpu_hours_allocated, t["gpu_hours"].as_f64().unwrap(), &format!("{what}: GPU-hours"));
    }
    // The GPU fleet per model: every instance-hour, AWS's accelerator share, the full cost of
    // idle GPU pod-hours (idle judged per GPU) and what no pod requested.
    let format = gpuledger::report::OutputFormat::Json;
    let gpu = gpuledger::report::usage::gpu_report(store, period.parse().unwrap(), None, None, None, format)
        .await
        .unwrap();
    let gpu: Value = serde_json::from_str(&gpu).unwrap();
    for (model, t) in truth["gpu_models"].as_object().unwrap() {
        let rows = gpu["rows"].as_array().unwrap();
        let all =
            rows.iter().find(|r| r["namespace"] == "(all)" && r["gpu_model"] == model.as_str()).unwrap();
        let what = |field: &str| format!("{period} {model} {field}");
        for (column, truth_field) in [
            ("gpu_fleet_cost", "fleet_cost"),
            ("accelerator_cost", "accelerator_cost"),
            ("idle_cost", "idle_cost"),
            ("idle_accelerator_cost", "idle_accelerator_cost"),
            ("unallocated_gpu_cost", "unallocated_cost"),
        ] {
            close(all[column].as_f64().unwrap(), t[truth_field].as_f64().unwrap(), &what(column));
        }
        let (idle, accelerator) =
            (all["idle_cost"].as_f64().unwrap(), all["idle_accelerator_cost"].as_f64().unwrap());
        assert!(
            idle > accelerator || idle == 0.0,
            "{}: the CPU and memory beside idle GPUs count",
            what("idle")
        );
    }
    // The distribution of hourly utilization per GPU model: each measured pod-hour's GPU-hours
    // in the 5 % step of its mean, as the generator's model utilizes them.
    for (model, t) in truth["gpu_models"].as_object().unwrap() {
        let expected: Vec<f64> =
            t["utilization_gpu_hours"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        let mut steps = [0.0; gpuledger::store::UTILIZATION_BUCKETS];
        for b in rollups.utilization.iter().filter(|b| &b.gpu_model == model) {
            steps[b.bucket as usize] += b.gpu_hours;
        }
        if expected.is_empty() {
            assert!(steps.iter().all(|h| *h == 0.0), "{period} {model}: no allocated GPU-hours");
            continue;
        }
        for (bucket, (shown, expected)) in steps.iter().zip(&expected).enumerate() {
            hours(*shown, *expected, &format!("{period} {model} utilization step {bucket}"));
        }
    }
    // Realized savings subtract the month's unused commitment (Savings Plans and RIs).
    let period_of: gpuledger::period::Period = period.parse().unwrap();
    let range = gpuledger::report::rollup::RollupRange::load(
        store,
        &gpuledger::auth::Scope::All,
        period.into(),
        period_of.start(),
        period_of.end(),
    )
    .await
    .unwrap();
    let savings = gpuledger::report::rollup::savings(&range).render(format, period);
    let savings: Value = serde_json::from_str(&savings).unwrap();
    let month = &savings["rows"][0];
    let by_service = &truth["other_cost_by_service"];
    let unused = ["ComputeSavingsPlans", "AmazonEC2 (unused reservations)"]
        .iter()
        .map(|s| by_service.get(*s).and_then(Value::as_f64).unwrap_or(0.0))
        .sum::<f64>();
    assert!(unused > 0.0, "{period}: the fleet leaves some commitment unused");
    close(month["unused_commitment"].as_f64().unwrap(), unused, &format!("{period} unused commitment"));
    let gross = month["public_on_demand_cost"].as_f64().unwrap() - month["actual_cost"].as_f64().unwrap();
    close(month["realized_savings"].as_f64().unwrap(), gross - unused, &format!("{period} realized savings"));
    // Every pod the metrics saw on a GPU has accelerator rows in the bill for that hour.
    assert_eq!(rollups.period.measured_unbilled_gpu_hours, 0.0, "{period}: measured but unbilled");
    let workloads = group(&rollups.costs, |r| format!("{}/{}", r.namespace, r.workload));
    let mut served = 0;
    for (key, t) in truth["workloads"].as_object().unwrap() {
        let r = &workloads[key];
        assert_eq!(r.requests, t["requests"].as_f64().unwrap(), "{period} {key} requests");
        if let Some(expected) = t.get("cost_per_inference").and_then(Value::as_f64) {
            // The cost of the hours that served, over their requests.
            ratio(usd(r.serving_cost_nanos) / r.requests, expected, &format!("{key} cost/inference"));
            served += 1;
        }
    }
    assert!(served >= 3, "{period}: vLLM and Triton workloads served");
    // Requests per cluster: `ocr-triton-0` runs in both clusters at small scale, and each
    // cluster's requests are its own pod's (matched by cluster), never counted twice.
    for (key, expected) in truth["requests_by_cluster"].as_object().unwrap() {
        let mut parts = key.splitn(3, '/');
        let (cluster, namespace, workload) =
            (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
        let requests: f64 = rollups
            .costs
            .iter()
            .filter(|c| c.cluster == cluster && c.namespace == namespace && c.workload == workload)
            .map(|c| c.requests)
            .sum();
        assert_eq!(requests, expected.as_f64().unwrap(), "{period} requests of {key}");
    }
    // Chargeback, with shares, against truth's default-policy figures.
    let chargeback = truth["chargeback"].as_object().unwrap();
    assert_eq!(rollups.clients.len(), chargeback.len(), "{period}: same clients");
    for c in &rollups.clients {
        let t = &chargeback[&c.client];
        let what = |field: &str| format!("{period} client {} {field}", c.client);
        close(usd(c.direct_cost_nanos), t["direct_cost"].as_f64().unwrap(), &what("direct"));
        close(usd(c.shared_platform_nanos), t["shared_platform"].as_f64().unwrap(), &what("platform share"));
        close(usd(c.shared_idle_nanos), t["shared_idle"].as_f64().unwrap(), &what("idle share"));
        close(
            usd(c.non_kubernetes_direct_nanos),
            t["non_kubernetes_direct"].as_f64().unwrap(),
            &what("tagged"),
        );
        let infrastructure = t["shared_infrastructure"].as_f64().unwrap();
        close(usd(c.shared_infrastructure_nanos), infrastructure, &what("shared cluster cost share"));
        let unallocated = t["shared_unallocated"].as_f64().unwrap();
        close(usd(c.shared_unallocated_nanos), unallocated, &what("unallocated EC2 share"));
        close(usd(c.total_nanos()), t["total_cost"].as_f64().unwrap(), &what("total"));
        // The breakdown adds up: pods' cost by resource, tagged cost by category.
        assert_eq!(c.gpu_split_nanos + c.cpu_split_nanos + c.memory_split_nanos, c.direct_cost_nanos);
        assert_eq!(c.storage_nanos + c.network_nanos + c.other_direct_nanos, c.non_kubernetes_direct_nanos);
        assert!(c.training_nanos + c.inference_nanos <= c.direct_cost_nanos, "{}", what("classes"));
        if c.client != "(unassigned)" {
            let tagged = &truth["non_kubernetes_by_client"][&c.client];
            close(usd(c.storage_nanos), tagged["storage"].as_f64().unwrap(), &what("storage"));
            // Its bucket and volume held this many GB-months (the invoice's storage quantity).
            let held = tagged["storage_gb_months"].as_f64().unwrap();
            assert!(
                held > 0.0 && (c.storage_gb_months - held).abs() < 1e-6,
                "{}: {} vs {held}",
                what("GB-months"),
                c.storage_gb_months
            );
        }
    }
    // Clients + unassigned = the whole amortized bill (to the half micro-dollar that rounds
    // the Kubernetes cost once).
    let whole: i64 = rollups.clients.iter().map(|c| c.total_nanos() - c.markup_nanos).sum();
    let bill_nanos = rollups.period.bill_amortized_micros.nanos().0;
    assert!((whole - bill_nanos).abs() <= 500, "{period}: clients {whole} vs bill {bill_nanos} nano-dollars");
    // Σ clients (with shares) = Σ namespaces = Kubernetes cost, exactly; + other = the bill.
    let clients: i64 = rollups
        .clients
        .iter()
        .map(|c| c.direct_cost_nanos + c.shared_platform_nanos + c.shared_idle_nanos)
        .sum();
    // (Kubernetes cost only: direct pods' cost and the two pools made of it.)
    let namespaces_total: i64 = namespaces.values().map(|r| r.split_cost_nanos + r.unused_cost_nanos).sum();
    assert_eq!(clients, namespaces_total, "{period}: clients = namespaces to the nano-dollar");
    assert_eq!(namespaces_total, rollups.period.kubernetes_cost_nanos.0);
    close(usd(namespaces_total), truth["kubernetes_allocated_cost"].as_f64().unwrap(), "Kubernetes cost");
    let report = NamespaceReport::load(store, period.parse().unwrap(), None, false).await.unwrap();
    assert_eq!(
        report.kubernetes_total_micros()
            + rollups.period.unallocated_ec2_micros.0
            + report.other_cost_micros(),
        rollups.period.bill_amortized_micros.0,
        "{period}: namespaces + unallocated EC2 + other = bill"
    );
    close(report.other_cost_micros() as f64 / 1e6, truth["other_cost"].as_f64().unwrap(), "other cost");
    let unallocated = rollups.period.unallocated_ec2_micros.usd_f64();
    close(unallocated, truth["unallocated_ec2_cost"].as_f64().unwrap(), "unallocated EC2");
    // Every usage account's share of the bill: the payer's Savings Plan fee, each linked
    // account's instances, pods and lines; together the amortized bill, exactly.
    let accounts = truth["accounts"].as_object().unwrap();
    let stored: Vec<&str> = rollups.accounts.iter().map(|a| a.account.as_str()).collect();
    assert_eq!(stored, accounts.keys().map(String::as_str).collect::<Vec<_>>(), "{period}: accounts");
    for a in &rollups.accounts {
        let t = &accounts[&a.account];
        let what = |name: &str| format!("{period} account {}: {name}", a.account);
        assert_eq!(a.name, t["name"].as_str().unwrap(), "{}", what("name"));
        close(a.amortized_micros().usd_f64(), t["amortized_cost"].as_f64().unwrap(), &what("amortized"));
        close(a.kubernetes_cost_nanos.usd_f64(), t["kubernetes_cost"].as_f64().unwrap(), &what("Kubernetes"));
        close(a.instance_cost_micros.usd_f64(), t["instance_cost"].as_f64().unwrap(), &what("instances"));
    }
    let amortized: gpuledger::money::Micros = rollups.accounts.iter().map(|a| a.amortized_micros()).sum();
    assert_eq!(amortized, rollups.period.bill_amortized_micros, "{period}: Σ accounts = the amortized bill");
    let kubernetes: gpuledger::money::Nanos = rollups.accounts.iter().map(|a| a.kubernetes_cost_nanos).sum();
    assert_eq!(kubernetes, rollups.period.kubernetes_cost_nanos, "{period}: Σ accounts' pods = Kubernetes");
}

/// Generates `months` demo months ending 2026-10 with metrics, ingests and computes them.
pub async fn generate_and_load(store: &dyn Store, out: &Path, months: u32, seed: u64) {
    generate(out, Scale::Demo, months, seed);
    let periods: Vec<String> = (0..months)
        .map(|back| {
            let mut p: Period = "2026-10".parse().unwrap();
            for _ in 0..back {
                p = p.previous();
            }
            p.to_string()
        })
        .collect();
    let periods: Vec<&str> = periods.iter().rev().map(String::as_str).collect();
    load(store, out, &periods).await;
}

#[tokio::test]
async fn demo_rollups_match_truth_on_sqlite_and_postgres() {
    let dir = tempfile::tempdir().unwrap();
    // September has no enterprise discount, October has one.
    generate(dir.path(), Scale::Demo, 2, 41);
    let postgres = helpers::fresh_postgres().await;
    let mut urls = vec![format!("sqlite:{}", dir.path().join("ledger.db").display())];
    urls.extend(postgres.as_ref().map(|p| p.url.clone()));
    for url in &urls {
        let store = crate::helpers::connect(url).await;
        load(store.as_ref(), dir.path(), &["2026-09", "2026-10"]).await;
        for period in ["2026-09", "2026-10"] {
            assert_period_matches_truth(store.as_ref(), &truth(dir.path(), period), period).await;
        }
        // Computing again replaces, never adds.
        let before = store.rollups("2026-10").await.unwrap().unwrap();
        compute_period(store.as_ref(), "2026-10".parse().unwrap()).await.unwrap();
        let after = store.rollups("2026-10").await.unwrap().unwrap();
        assert!(
            before.costs == after.costs && before.clients == after.clients,
            "{url}: a rerun changed rollups"
        );
    }
}

#[tokio::test]
async fn small_rollups_match_truth() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), Scale::Small, 1, 42);
    let store = crate::helpers::connect(&format!("sqlite:{}", dir.path().join("ledger.db").display())).await;
    load(store.as_ref(), dir.path(), &["2026-10"]).await;
    let truth = truth(dir.path(), "2026-10");
    let same_name = ["ml-prod", "ml-west"].map(|c| format!("{c}/globex-vision/ocr-triton"));
    assert!(
        same_name.iter().all(|k| truth["requests_by_cluster"].get(k).is_some()),
        "ocr-triton-0 in both clusters"
    );
    assert_period_matches_truth(store.as_ref(), &truth, "2026-10").await;
    time_sliced_gpus_hold_one_gpu_hour_an_hour(store.as_ref(), &truth).await;
}

/// Small scale has one g6.xlarge whose L4 is time-sliced into four replicas: the notebook
/// pods of two teams ask for more GPU-hours than it has. Each counts its split usage ratio
/// of the GPU (the bill divides by what the pods asked), so the node's pods hold at most one
/// GPU-hour an hour, and the engine agrees with truth.
async fn time_sliced_gpus_hold_one_gpu_hour_an_hour(store: &dyn Store, truth: &Value) {
    use gpuledger::synth::fleet::World;
    let world = World::build(42, "2026-10".parse().unwrap(), Scale::Small);
    let node = world.nodes.iter().position(|n| n.gpu_replicas == 4).expect("a time-sliced node");
    let node_hours = world.node_hours(node).count() as f64;
    let mut asked = 0.0;
    for &p in &world.nodes[node].pods {
        if world.pods[p].gpus > 0 {
            asked += world.node_hours(node).map(|hour| world.pod_fraction(p, hour)).sum::<f64>();
        }
    }
    let rollups = store.rollups("2026-10").await.unwrap().unwrap();
    let workloads = group(&rollups.costs, |r| format!("{}/{}", r.namespace, r.workload));
    let mut held = 0.0;
    for key in ["initech-research/jupyter-shared", "internal-ml/jupyter-shared"] {
        let (r, t) = (&workloads[key], &truth["workloads"][key]);
        hours(r.gpu_hours_allocated, t["gpu_hours_allocated"].as_f64().unwrap(), &format!("{key} allocated"));
        hours(r.gpu_hours_idle, t["gpu_hours_idle"].as_f64().unwrap(), &format!("{key} idle"));
        ratio(r.gpu_hours_used, t["gpu_hours_used"].as_f64().unwrap(), &format!("{key} used"));
        close(usd(r.idle_cost_nanos), t["idle_cost"].as_f64().unwrap(), &format!("{key} idle cost"));
        held += r.gpu_hours_allocated;
    }
    assert!(
        asked > node_hours + 24.0,
        "the pods asked for {asked} GPU-hours of a GPU that ran {node_hours} hours"
    );
    // The node runs only while a pod holds its GPU, and pods come and go on the hour: every
    // hour it ran is exactly one GPU-hour held, however many pods shared it.
    hours(held, node_hours, "GPU-hours the time-sliced node's pods held");
}

fn report_json(database_url: &str, args: &[&str]) -> Value {
    let mut all = vec!["--database-url", database_url, "report"];
    all.extend(args);
    let output = run(&all);
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test]
async fn chargeback_pools_exempt_clients_settings_from_a_month_and_the_report_contracts() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), Scale::Demo, 2, 43);
    let url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let store = crate::helpers::connect(&url).await;
    load(store.as_ref(), dir.path(), &["2026-09", "2026-10"]).await;
    let cli = |args: &[&str]| {
        let mut all = vec!["--database-url", url.as_str()];
        all.extend(args);
        let output = run(&all);
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        output.stdout
    };
    let september = ["report", "clients", "--period", "2026-09", "--format", "json"];
    let september_before = cli(&september);
    // From October: acme pays 12.5 % markup and is exempt; the platform pool is shared evenly.
    cli(&["clients", "set", "acme", "--exempt", "--markup-percent", "12.5", "--from", "2026-10"]);
    cli(&["pools", "set", "platform", "--rule", "even", "--from", "2026-10"]);
    cli(&["compute"]);
    assert_eq!(
        String::from_utf8(cli(&september)).unwrap(),
        String::from_utf8(september_before).unwrap(),
        "a change from October leaves September's chargeback byte-identical after computing every month"
    );
    let settings_of = |period: &'static str| {
        let store = store.as_ref();
        async move { store.rollups(period).await.unwrap().unwrap().period.settings }
    };
    assert!(
        settings_of("2026-10").await.contains(r#""exempt":true"#),
        "October records the settings in force"
    );
    assert!(!settings_of("2026-09").await.contains(r#""exempt":true"#));
    // The October chargeback the settings replaced is kept; September's, unchanged, is not.
    assert!(store.chargeback_snapshots("2026-09").await.unwrap().is_empty());
    let snapshots = store.chargeback_snapshots("2026-10").await.unwrap();
    assert_eq!(snapshots.len(), 1);
    let before = snapshots[0].clients.iter().find(|c| c.client == "acme").unwrap();
    assert!(!before.exempt && before.shared_total_nanos() > 0, "acme shared before October's change");
    let restated = report_json(&url, &["restatements", "--period", "2026-10", "--format", "json"]);
    let acme = restated["rows"].as_array().unwrap().iter().find(|r| r["client"] == "acme").unwrap();
    close(acme["shared_cost_before"].as_f64().unwrap(), before.shared_total_nanos() as f64 / 1e9, "before");
    assert_eq!(acme["shared_cost_after"].as_f64(), Some(0.0));
    let (was, is) = (acme["total_cost_before"].as_f64().unwrap(), acme["total_cost_after"].as_f64().unwrap());
    close(acme["difference"].as_f64().unwrap(), is - was, "the difference a note would carry");
    let clients = report_json(&url, &["clients", "--period", "2026-10", "--format", "json"]);
    let rows = clients["rows"].as_array().unwrap();
    let row = |name: &str| rows.iter().find(|r| r["client"] == name).unwrap().clone();
    let acme = row("acme");
    assert_eq!(
        (acme["shared_cost"].as_f64(), acme["share_policy"].as_str(), acme["exempt"].as_bool()),
        (Some(0.0), Some("exempt"), Some(true))
    );
    // markup = 12.5 % of the direct cost (nothing shared), to the cent.
    close(acme["markup"].as_f64().unwrap(), acme["direct_cost"].as_f64().unwrap() * 0.125, "acme markup");
    // Even: the platform pool in equal parts over the clients (not `(unassigned)`); acme's
    // part stays with `(house)`, which takes no other pool's share but acme's.
    let named: Vec<&Value> =
        rows.iter().filter(|r| !r["client"].as_str().unwrap().starts_with('(')).collect();
    let platform: f64 = rows.iter().map(|r| r["shared_platform_cost"].as_f64().unwrap()).sum();
    let part = platform / named.len() as f64;
    let house = row("(house)");
    for r in named.iter().filter(|r| r["client"] != "acme") {
        close(r["shared_platform_cost"].as_f64().unwrap(), part, "an even platform share");
        assert_eq!(r["share_policy"], "platform:even idle:gpu unallocated:gpu shared:gpu");
    }
    close(house["shared_platform_cost"].as_f64().unwrap(), part, "acme's platform share, kept by the house");
    assert!(house["shared_idle_cost"].as_f64().unwrap() > 0.0, "acme's idle share, kept by the house");
    assert_eq!(row("(unassigned)")["shared_platform_cost"].as_f64(), Some(0.0), "not a client: no even part");
    // Σ (total − markup), (unassigned) included, = the amortized bill to the micro-dollar.
    let micros = |v: &Value| (v.as_f64().unwrap() * 1e6).round() as i64;
    let placed: i64 = rows.iter().map(|r| micros(&r["total_cost"]) - micros(&r["markup"])).sum();
    let bill = store.rollups("2026-10").await.unwrap().unwrap().period.bill_amortized_micros.0;
    assert_eq!(placed, bill, "clients + unassigned = the amortized bill");
    assert_eq!(micros(&clients["amortized_total"]), bill);
    for row in rows {
        let sum = |fields: &[&str]| fields.iter().map(|f| micros(&row[*f])).sum::<i64>();
        let kubernetes = micros(&row["kubernetes_direct_cost"]);
        assert!((sum(&["gpu_cost", "cpu_cost", "memory_cost"]) - kubernetes).abs() <= 2, "{row}");
        let tagged = micros(&row["non_kubernetes_direct_cost"]);
        assert!((sum(&["storage_cost", "network_cost", "other_cost"]) - tagged).abs() <= 2, "{row}");
    }
    for field in [
        "client",
        "direct_cost",
        "shared_cost",
        "markup",
        "total_cost",
        "kubernetes_direct_cost",
        "non_kubernetes_direct_cost",
        "gpu_cost",
        "cpu_cost",
        "memory_cost",
        "storage_cost",
        "network_cost",
        "training_cost",
        "inference_cost",
    ] {
        assert!(acme.get(field).is_some(), "clients row has {field}");
    }
    // The other contracts' fields, and a range of days reads the same rollups.
    let contracts: [(&str, &[&str]); 3] = [
        (
            "gpu",
            &[
                "namespace",
                "gpu_model",
                "provisioned_gpu_hours",
                "allocated_gpu_hours",
                "used_gpu_hours",
                "idle_gpu_hours",
                "unallocated_gpu_hours",
                "utilization",
            ],
        ),
        ("spot", &["namespace", "workload_class", "gpu_hours", "spot_gpu_hours", "spot_adoption"]),
        (
            "inference",
            &[
                "namespace",
                "workload",
                "model",
                "requests",
                "tokens",
                "cost",
                "cost_per_inference",
                "cost_per_million_tokens",
            ],
        ),
    ];
    for (report, fields) in contracts {
        let json = report_json(&url, &[report, "--period", "2026-10", "--format", "json"]);
        assert_eq!(json["period"], "2026-10");
        let first = &json["rows"][0];
        for field in fields {
            assert!(first.get(*field).is_some(), "{report} row has {field}: {first}");
        }
    }
    let month = report_json(&url, &["workloads", "--period", "2026-10", "--format", "json"]);
    let range =
        report_json(&url, &["workloads", "--from", "2026-10-01", "--to", "2026-11-01", "--format", "json"]);
    assert_eq!(range["period"], "2026-10-01/2026-11-01");
    assert_eq!(month["rows"], range["rows"]);
    let first_week =
        report_json(&url, &["workloads", "--from", "2026-10-01", "--to", "2026-10-08", "--format", "json"]);
    let week: f64 =
        first_week["rows"].as_array().unwrap().iter().map(|r| r["total_cost"].as_f64().unwrap()).sum();
    assert!(week > 0.0 && week < month["kubernetes_total"].as_f64().unwrap(), "a week is part of the month");

    // From October globex is charged net of AWS's discounts: its share of October's
    // enterprise discount in proportion to its direct + shared cost among all the rows'
    // (which add up to the amortized bill).
    cli(&["clients", "set", "globex", "--basis", "net", "--from", "2026-10"]);
    cli(&["compute", "--period", "2026-10"]);
    let clients = report_json(&url, &["clients", "--period", "2026-10", "--format", "json"]);
    let rows = clients["rows"].as_array().unwrap();
    let globex = rows.iter().find(|r| r["client"] == "globex").unwrap();
    assert_eq!(globex["charge_basis"], "net");
    let discounts = truth(dir.path(), "2026-10")["adjustments"]["discounts"].as_f64().unwrap();
    assert!(discounts < -1.0, "October has an enterprise discount: {discounts}");
    let charge = globex["direct_cost"].as_f64().unwrap() + globex["shared_cost"].as_f64().unwrap();
    let discount = globex["discount"].as_f64().unwrap();
    close(discount, discounts * charge / (bill as f64 / 1e6), "globex's share of the discounts");
    for r in rows.iter().filter(|r| r["client"] != "globex") {
        assert_eq!(
            (r["charge_basis"].as_str(), r["discount"].as_f64()),
            (Some("amortized"), Some(0.0)),
            "{r}"
        );
    }
    close(
        globex["total_cost"].as_f64().unwrap(),
        charge + discount + globex["markup"].as_f64().unwrap(),
        "globex's total is net",
    );
    let placed: i64 = rows.iter().map(|r| micros(&r["total_cost"]) - micros(&r["markup"])).sum();
    assert_eq!(placed, bill + micros(&globex["discount"]), "the amortized bill less the discount passed on");
    assert_eq!(micros(&clients["discounts_passed_on"]), micros(&globex["discount"]));
    // September, before the change, is untouched; the invoice's prices carry the discount (and
    // the markup): no line names them, the lines add up to the charge to the cent.
    let september_rows = report_json(&url, &["clients", "--period", "2026-09", "--format", "json"]);
    assert!(september_rows["rows"].as_array().unwrap().iter().all(|r| r["discount"].as_f64() == Some(0.0)));
    let draft: Value = serde_json::from_slice(&cli(&[
        "invoice", "draft", "--client", "globex", "--period", "2026-10", "--format", "json",
    ]))
    .unwrap();
    let lines = draft["lines"].as_array().unwrap();
    assert!(
        lines.iter().all(|l| !["discount", "markup"].contains(&l["category"].as_str().unwrap())),
        "{draft}"
    );
    let subtotal: f64 = draft["subtotal"].as_str().unwrap().parse().unwrap();
    let charged = globex["total_cost"].as_f64().unwrap();
    assert!((subtotal - charged).abs() < 0.005, "the lines {subtotal} add up to the charge {charged}");
}

/// A new database trusts no pod's label: the generated world labels every pod with its client,
/// yet with only a namespace rule for acme, acme's direct cost is exactly its namespaces' and
/// every other client's pods stay unassigned. Trusting labels in one cluster brings them back.
#[tokio::test]
async fn pod_labels_name_clients_only_where_an_administrator_trusts_them() {
    use gpuledger::domain::settings::EffectiveFrom;
    let dir = tempfile::tempdir().unwrap();
    let store = store::connect(&format!("sqlite:{}", dir.path().join("ledger.db").display())).await.unwrap();
    let store = store.as_ref();
    let history = store.settings().await.unwrap();
    let acme = store::ClientRule {
        client: "acme".into(),
        match_kind: store::MatchKind::Prefix,
        pattern: "acme-".into(),
        label_key: String::new(),
        priority: 10,
    };
    let rules = history.mapping_versions(EffectiveFrom::BEGINNING, |rules| rules.push(acme.clone())).unwrap();
    store.save_settings(&rules).await.unwrap();
    generate_and_load(store, dir.path(), 1, 48).await;
    let rollups = store.rollups("2026-10").await.unwrap().unwrap();
    // Pods: only acme's namespaces are anyone's. (The others still have their tagged S3 and
    // EBS lines: AWS resource tags are the account owner's, not a tenant's.)
    let kubernetes =
        |client: &str| rollups.clients.iter().find(|c| c.client == client).map_or(0, |c| c.direct_cost_nanos);
    let acme_namespaces: i64 =
        rollups.costs.iter().filter(|c| c.namespace.starts_with("acme-")).map(|c| c.split_cost_nanos).sum();
    assert!(acme_namespaces > 0);
    assert_eq!(kubernetes("acme"), acme_namespaces, "acme's pods are its namespaces'");
    for other in ["globex", "initech", "umbrella"] {
        assert_eq!(kubernetes(other), 0, "{other}'s pods name it only by label");
    }

    // Trust labels in the cluster the pods run in, and only labels: every client's direct
    // cost is truth's again.
    let cluster = rollups.costs.iter().find(|c| c.namespace.starts_with("acme-")).unwrap().cluster.clone();
    let history = store.settings().await.unwrap();
    let mut versions = vec![history.labels_version(EffectiveFrom::BEGINNING, &[cluster]).unwrap()];
    // Truth names clients by label alone: drop the namespace rule too.
    versions.extend(history.mapping_versions(EffectiveFrom::BEGINNING, |rules| rules.clear()).unwrap());
    store.save_settings(&versions).await.unwrap();
    compute_period(store, "2026-10".parse().unwrap()).await.unwrap();
    let rollups = store.rollups("2026-10").await.unwrap().unwrap();
    let truth = truth(dir.path(), "2026-10");
    for (client, expected) in
        truth["chargeback"].as_object().unwrap().iter().filter(|(c, _)| !c.starts_with('('))
    {
        let row = rollups
            .clients
            .iter()
            .find(|c| &c.client == client)
            .unwrap_or_else(|| panic!("{client} is back"));
        close(usd(row.direct_cost_nanos), expected["direct_cost"].as_f64().unwrap(), client);
    }
}

/// Upgrading a database that already computed months keeps its pods' labels trusted (from
/// the beginning, visible in the settings), so the upgrade re-attributes nothing; a database
/// with nothing computed gets no such setting.
#[tokio::test]
async fn the_upgrade_keeps_labels_trusted_where_months_were_computed_with_them() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let store = crate::helpers::connect(&url).await;
    generate_and_load(store.as_ref(), dir.path(), 1, 49).await;
    let before = store.rollups("2026-10").await.unwrap().unwrap().clients;
    drop(store);
    // Back to the schema before migration 10, as an older gpuledger left it.
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("DELETE FROM settings WHERE kind = 'labels'").execute(&mut conn).await.unwrap();
    sqlx::query("DELETE FROM schema_migrations WHERE version = 10").execute(&mut conn).await.unwrap();
    conn.close().await.unwrap();

    let store = store::connect(&url).await.unwrap();
    let labels: Vec<_> = store
        .settings()
        .await
        .unwrap()
        .versions
        .into_iter()
        .filter(|v| v.kind.as_str() == "labels")
        .collect();
    assert_eq!(labels.len(), 1);
    assert_eq!(labels[0].value, serde_json::json!(["*"]));
    assert_eq!(labels[0].effective_from.to_string(), "");
    compute_period(store.as_ref(), "2026-10".parse().unwrap()).await.unwrap();
    let after = store.rollups("2026-10").await.unwrap().unwrap().clients;
    assert_eq!(after, before, "the same chargeback after the upgrade");

    let fresh = store::connect(&format!("sqlite:{}", dir.path().join("fresh.db").display())).await.unwrap();
    assert!(fresh.settings().await.unwrap().versions.is_empty(), "a new database trusts no label");
}
