//! The generator, checked from its files: the bill it writes reconciles the way AWS's does,
//! its truth agrees with the files, it is deterministic, and promtool accepts its metrics.

use std::path::Path;
use std::process::Command;

use gpuledger::period::Period;
use gpuledger::synth::{self, CurFormat, GenerateOptions, Scale};
use polars::prelude::*;

fn options(out: &Path, format: CurFormat) -> GenerateOptions {
    GenerateOptions {
        out: out.to_path_buf(),
        seed: 7,
        months: 1,
        end: "2026-10".parse::<Period>().unwrap(),
        scale: Scale::Demo,
        format,
        bucket: "test-bucket".into(),
        prefix: "cur".into(),
        export_name: "test-export".into(),
        metrics: true,
        fixes_from: None,
        history_months: 2,
        through_day: None,
        fleet_percent: 100,
        kube_state_metrics: false,
        cloud_kube_from: None,
        focus: false,
        providers: vec![gpuledger::synth::clouds::Provider::Aws],
        without_cur_split: Vec::new(),
        sub_account: None,
        azure_machine_column: Default::default(),
        growth: false,
        hold_back: 0,
    }
}

fn generate(out: &Path, format: CurFormat) -> synth::GenerateSummary {
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
    synth::generate(&options(out, format), &progress).expect("generate")
}

fn truth(out: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("truth.json")).unwrap();
    serde_json::from_str::<serde_json::Value>(&text).unwrap()["periods"]["2026-10"].clone()
}

fn data_file(out: &Path, extension: &str) -> std::path::PathBuf {
    out.join(format!("cur/test-export/data/BILLING_PERIOD=2026-10/test-export-00001.{extension}"))
}

/// AWS's amortized cost of a line (CUR reference §2.3), for the line types we write.
fn amortized() -> Expr {
    let line_type = col("line_item_line_item_type");
    when(line_type.clone().eq(lit("SavingsPlanCoveredUsage")))
        .then(col("savings_plan_savings_plan_effective_cost"))
        .when(line_type.clone().eq(lit("SavingsPlanRecurringFee")))
        .then(col("savings_plan_total_commitment_to_date") - col("savings_plan_used_commitment"))
        .when(line_type.clone().eq(lit("SavingsPlanNegation")))
        .then(lit(0.0))
        .when(line_type.clone().eq(lit("DiscountedUsage")))
        .then(col("reservation_effective_cost"))
        .when(line_type.eq(lit("RIFee")))
        .then(
            col("reservation_unused_amortized_upfront_fee_for_billing_period")
                + col("reservation_unused_recurring_fee"),
        )
        .otherwise(col("line_item_unblended_cost"))
}

#[test]
fn every_instance_hour_splits_exactly_and_the_bill_matches_truth() {
    let dir = tempfile::tempdir().unwrap();
    let summary = generate(dir.path(), CurFormat::Parquet);
    let frame = LazyFrame::scan_parquet(
        data_file(dir.path(), "snappy.parquet").to_str().unwrap().into(),
        Default::default(),
    )
    .unwrap();

    let is_split = col("line_item_operation").eq(lit("EKSPod-EC2"));
    let pods = frame
        .clone()
        .filter(is_split.clone())
        .group_by([col("split_line_item_parent_resource_id"), col("line_item_usage_start_date")])
        .agg([(col("split_line_item_split_cost") + col("split_line_item_unused_cost")).sum().alias("pods")]);
    let instances = frame
        .clone()
        .filter(
            col("line_item_operation").eq(lit("RunInstances")).and(
                col("line_item_line_item_type")
                    .eq(lit("Usage"))
                    .or(col("line_item_line_item_type").eq(lit("SavingsPlanCoveredUsage")))
                    .or(col("line_item_line_item_type").eq(lit("DiscountedUsage"))),
            ),
        )
        .select([
            col("line_item_resource_id").alias("split_line_item_parent_resource_id"),
            col("line_item_usage_start_date"),
            amortized().alias("instance"),
        ])
        // An hour the Savings Plan covers only in part is two lines.
        .group_by([col("split_line_item_parent_resource_id"), col("line_item_usage_start_date")])
        .agg([col("instance").sum()]);
    let joined = instances
        .join(
            pods,
            [col("split_line_item_parent_resource_id"), col("line_item_usage_start_date")],
            [col("split_line_item_parent_resource_id"), col("line_item_usage_start_date")],
            JoinArgs::new(JoinType::Left),
        )
        .select([
            len().alias("instance_hours"),
            col("pods").null_count().alias("hours_without_pods"),
            (col("pods") - col("instance")).max().alias("max_over"),
            (col("instance") - col("pods")).max().alias("max_under"),
            col("instance").sum().alias("instance_total"),
        ])
        .collect()
        .unwrap();
    let get = |name: &str| joined.column(name).unwrap().get(0).unwrap().extract::<f64>().unwrap();
    assert!(get("instance_hours") > 1000.0, "a demo month has thousands of instance-hours");
    // Instance-hours without pods are the bastion's and the hours GPU nodes boot in (truth
    // counts them); every other hour's Σ(split + unused) over its pods = its amortized cost.
    let truth = truth(dir.path());
    assert_eq!(get("hours_without_pods"), truth["instance_hours_without_pods"].as_f64().unwrap());
    assert!(get("hours_without_pods") > 0.0, "a month has instance-hours without pods");
    let max_error = get("max_over").max(get("max_under"));
    assert!(max_error < 1e-9, "max |Σ pods − instance| = {max_error}");

    let placed = truth["kubernetes_allocated_cost"].as_f64().unwrap()
        + truth["unallocated_ec2_cost"].as_f64().unwrap();
    assert!((get("instance_total") - placed).abs() < 1e-6, "instances = Kubernetes + unallocated EC2");

    // The bill from the file (non-split rows) equals truth's, unblended and amortized.
    // Discounts, credits, refunds and tax are on the invoice, outside the amortized bill.
    let line_type = || col("line_item_line_item_type");
    let adjustment = line_type()
        .eq(lit("Tax"))
        .or(line_type().eq(lit("Credit")))
        .or(line_type().eq(lit("Refund")))
        .or(line_type().eq(lit("EdpDiscount")));
    let bill = frame
        .filter(is_split.not())
        .select([
            col("line_item_unblended_cost").sum().alias("unblended"),
            amortized().filter(adjustment.not()).sum().alias("amortized"),
            len().alias("rows"),
        ])
        .collect()
        .unwrap();
    let bill_value = |name: &str| bill.column(name).unwrap().get(0).unwrap().extract::<f64>().unwrap();
    assert!((bill_value("unblended") - truth["bill_unblended"].as_f64().unwrap()).abs() < 1e-6);
    assert!((bill_value("amortized") - truth["bill_amortized"].as_f64().unwrap()).abs() < 1e-6);
    // Kubernetes + unallocated EC2 + other cost = the amortized bill, and namespaces add up.
    let allocated = truth["kubernetes_allocated_cost"].as_f64().unwrap();
    let other = truth["other_cost"].as_f64().unwrap() + truth["unallocated_ec2_cost"].as_f64().unwrap();
    assert!((allocated + other - truth["bill_amortized"].as_f64().unwrap()).abs() < 1e-6);
    let namespaces: f64 =
        truth["namespaces"].as_object().unwrap().values().map(|n| n["total_cost"].as_f64().unwrap()).sum();
    assert!((namespaces - allocated).abs() < 1e-6);
    assert_eq!(truth["cur_rows"].as_u64().unwrap(), summary.cur_rows);
}

#[test]
fn same_seed_gives_identical_files() {
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    generate(first.path(), CurFormat::Csv);
    generate(second.path(), CurFormat::Csv);
    for relative in [
        "truth.json",
        "metrics/2026-10.om",
        "cur/test-export/metadata/BILLING_PERIOD=2026-10/test-export-Manifest.json",
        "cur/test-export/data/BILLING_PERIOD=2026-10/test-export-00001.csv.gz",
    ] {
        let a = std::fs::read(first.path().join(relative)).unwrap();
        let b = std::fs::read(second.path().join(relative)).unwrap();
        assert!(a == b, "{relative} differs between two runs with the same seed");
    }
}

#[test]
fn csv_export_has_json_maps_and_a_manifest_listing_it() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), CurFormat::Csv);
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            dir.path().join("cur/test-export/metadata/BILLING_PERIOD=2026-10/test-export-Manifest.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest["dataFiles"][0],
        "s3://test-bucket/cur/test-export/data/BILLING_PERIOD=2026-10/test-export-00001.csv.gz"
    );
    let columns: Vec<&str> =
        manifest["columns"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    // October is an even month, which the generator gives an enterprise discount: the
    // export then carries net_* columns (months without one leave them out, as AWS does).
    assert!(columns.contains(&"line_item_net_unblended_cost"));
    assert!(columns.contains(&"split_line_item_net_split_cost"));
    assert!(columns.contains(&"split_line_item_split_usage_ratio"));

    let gz = std::fs::File::open(data_file(dir.path(), "csv.gz")).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(gz), &mut text).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header, columns, "CSV header = manifest columns");
    let split_line = lines.find(|l| l.contains("EKSPod-EC2") && l.contains("Accelerator-Hours")).unwrap();
    // The tags map is a JSON object inside a quoted CSV field.
    let start = split_line.find("\"{").unwrap() + 1;
    let end = start + split_line[start..].find("}\"").unwrap() + 1;
    let tags: serde_json::Value =
        serde_json::from_str(&split_line[start..end].replace("\"\"", "\"")).unwrap();
    assert!(tags["aws_eks_namespace"].is_string());
    assert!(tags["aws_eks_cluster_name"] == "ml-prod");
}

#[test]
fn promtool_accepts_the_metrics_file() {
    let Ok(version) = Command::new("promtool").arg("--version").output() else {
        eprintln!("promtool not installed: skipped (scripts/test installs it)");
        return;
    };
    assert!(version.status.success());
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), CurFormat::Parquet);
    let output = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=24h"])
        .arg(dir.path().join("metrics/2026-10.om"))
        .arg(dir.path().join("tsdb"))
        .output()
        .unwrap();
    assert!(output.status.success(), "promtool: {}", String::from_utf8_lossy(&output.stderr));
    let blocks = std::fs::read_dir(dir.path().join("tsdb")).unwrap().count();
    // 31 days in 18-hour blocks (promtool rounds 24h down) is at least 41 blocks.
    assert!(blocks >= 41, "only {blocks} blocks");
}
