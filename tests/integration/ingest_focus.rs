//! FOCUS bills (#40): real FOCUS files from the FinOps Foundation (its public sample, the
//! specification's commitment examples) ingested as several bills a month, each provider's
//! bill to the figure a hand sum of the file gives; re-deliveries replacing one bill alone;
//! every kind of bad input refused with its file, row and column, the database unchanged.

use std::path::{Path, PathBuf};

use gpuledger::ingest::focus::{FocusIngestOptions, ingest_focus};
use gpuledger::store::Store;
use serde_json::Value;

use crate::helpers;
use crate::ingest_cur::run;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/focus").join(name)
}

fn options(source: &Path) -> FocusIngestOptions {
    FocusIngestOptions { source: source.display().to_string(), ..FocusIngestOptions::default() }
}

fn hidden() -> indicatif::MultiProgress {
    indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden())
}

/// The stored bills and FOCUS charges, and the data revision: what "nothing changed" compares.
async fn snapshot(store: &dyn Store) -> String {
    let mut text = format!("revision {}\n", store.data_revision().await.unwrap());
    for bill in store.bills(None).await.unwrap() {
        let charges = store.bill_charges(&bill.period, Some(&bill.provider)).await.unwrap();
        text.push_str(&format!("{bill:?}\n{charges:?}\n"));
    }
    text
}

/// A rate for the euro from before any month these tests bill (a bill in euros is refused
/// without one in force).
pub(crate) async fn euro_rate(store: &dyn Store) {
    let rate = gpuledger::domain::fx::FxRate::new("EUR", "USD", "1.0842", "2020-01".parse().unwrap(), "test");
    store.set_fx_rates(&[rate.unwrap()], "test").await.unwrap();
}

/// (period, provider, account) → (billed, effective) as stored, in nano-units.
async fn bills(store: &dyn Store) -> Vec<(String, String, String, i64, i64)> {
    store
        .bills(None)
        .await
        .unwrap()
        .into_iter()
        .map(|b| (b.period, b.provider, b.billing_account, b.billed_nanos, b.effective_nanos))
        .collect()
}

#[tokio::test]
async fn the_finops_foundations_sample_is_a_bill_per_provider_on_sqlite_and_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let mut stores: Vec<Box<dyn Store>> =
        vec![helpers::connect(&format!("sqlite:{}", dir.path().join("ledger.db").display())).await];
    let postgres = helpers::fresh_postgres().await;
    if let Some(database) = &postgres {
        stores.push(helpers::connect(&database.url).await);
    }
    let sample = fixture("focus_sample.csv");
    for store in &stores {
        let results = ingest_focus(store.as_ref(), &options(&sample), &hidden()).await.unwrap();
        // One file, four bills: AWS's, Microsoft's and Oracle's of September 2024, and one
        // Oracle row billed in October. Each total is the file's column summed by hand
        // (Python's Decimal over the rows of that provider, account and billing period):
        // AWS BilledCost 18.00663861840, EffectiveCost 13.00000000000. Rows are held to the
        // nano-unit (942 rows rounded once each: 18.006638649 here, 31 nano-dollars apart).
        let got = bills(store.as_ref()).await;
        assert_eq!(
            got,
            vec![
                ("2024-09".into(), "aws".into(), "1234567890123".into(), 18_006_638_649, 13_000_000_000),
                (
                    "2024-09".into(),
                    "azure".into(),
                    "/providers/Microsoft.Billing/billingAccounts/8611537".into(),
                    1_976_514_186,
                    1_976_514_186
                ),
                ("2024-09".into(), "oci".into(), "20209880".into(), 297_073_925, 0),
                ("2024-10".into(), "oci".into(), "20209880".into(), 240_000_000, 0),
            ]
        );
        let aws = results.iter().find(|r| r.provider == "aws").unwrap();
        assert_eq!(
            (aws.rows, aws.focus_version.as_str(), aws.billed_total.as_str()),
            (942, "1.0", "18.006639")
        );
        // The sample's deviations, counted: 1,000 rows × 4 timestamps without T and Z, the
        // extra `Id` column, Oracle's `Usage-based`, its null ContractedCost, and its one
        // September hour billed in October.
        let stored = store.bills(Some("2024-09")).await.unwrap();
        let deviations: Value = serde_json::from_str(&stored[0].deviations).unwrap();
        assert_eq!(deviations["timestamps_not_iso"], 4_000);
        assert_eq!(deviations["extra_columns"], serde_json::json!(["Id"]));
        assert_eq!(deviations["values_in_another_case"], 7);
        assert_eq!(deviations["null_list_or_contracted_costs"], 7);
        assert_eq!(deviations["charges_before_billing_period"], 1);
        // The charges per day add up to their bill.
        let charges = store.bill_charges("2024-09", Some("aws")).await.unwrap();
        assert_eq!(charges.iter().map(|c| c.billed_nanos).sum::<i64>(), 18_006_638_649);
        assert_eq!(charges.iter().map(|c| c.charges).sum::<i64>(), 942);
        // Summed over the month's days: one row per group the days share, the same sums.
        let month = store.month_charges("2024-09", Some("aws")).await.unwrap();
        let without_day = |c: &gpuledger::store::BillCharge| {
            let mut c = c.clone();
            (c.day, c.gpu_hours, c.consumed_quantity, c.charges) = (0, 0.0, 0.0, 0);
            (c.billed_nanos, c.effective_nanos, c.list_nanos, c.contracted_nanos) = (0, 0, 0, 0);
            format!("{c:?}")
        };
        let groups: std::collections::BTreeSet<String> = charges.iter().map(without_day).collect();
        assert_eq!(month.len(), groups.len());
        assert!(month.len() < charges.len(), "{} groups over {} days' rows", month.len(), charges.len());
        assert_eq!(month.iter().map(without_day).collect::<std::collections::BTreeSet<_>>(), groups);
        assert_eq!(month.iter().map(|c| c.billed_nanos).sum::<i64>(), 18_006_638_649);
        assert_eq!(month.iter().map(|c| c.charges).sum::<i64>(), 942);
        let first_day = charges.iter().map(|c| c.day).min().unwrap();
        assert_eq!(month.iter().map(|c| c.day).min().unwrap(), first_day);
        // The same files again: nothing to do.
        let before = snapshot(store.as_ref()).await;
        let again = ingest_focus(store.as_ref(), &options(&sample), &hidden()).await.unwrap();
        assert!(again.iter().all(|r| r.status == "skipped"), "{again:?}");
        assert_eq!(snapshot(store.as_ref()).await, before);
    }
}

/// The specification's commitment-discount examples (a $1.00 hourly commitment): its
/// amortized numbers come out, and the unused part is where FOCUS says it is. The example
/// files leave out the columns every bill has; they are added (the same account, in USD).
#[tokio::test]
async fn the_specifications_commitment_examples_give_its_amortized_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let store = helpers::connect(&format!("sqlite:{}", dir.path().join("ledger.db").display())).await;
    // (file, account, BilledCost, EffectiveCost) in nano-dollars, as the spec's appendix
    // works them: 75 % used → $0.75 used + $0.25 unused; 100 % used plus $0.50 of on-demand
    // overage → billed $0.50, effective $1.50; all upfront → billed $8,760, effective $0 (the
    // purchase is amortized into the hours' usage).
    let cases = [
        ("commitment_discount_usage_scenario_3.csv", "usage-3", 0, 1_000_000_000),
        ("commitment_discount_usage_scenario_4.csv", "usage-4", 500_000_000, 1_500_000_000),
        ("commitment_discount_purchase_scenario_1.csv", "purchase-1", 8_760_000_000_000, 0),
    ];
    for (file, account, _, _) in cases {
        let text = std::fs::read_to_string(fixture(file)).unwrap();
        let mut lines = text.lines();
        let mut out = format!("BillingAccountId,BillingCurrency,{}\n", lines.next().unwrap());
        for line in lines {
            out.push_str(&format!("{account},USD,{line}\n"));
        }
        std::fs::write(dir.path().join(file), out).unwrap();
    }
    for (file, ..) in cases {
        let mut options = options(&dir.path().join(file));
        options.provider = Some("aws".into());
        ingest_focus(store.as_ref(), &options, &hidden()).await.unwrap();
    }
    let got: Vec<(String, i64, i64)> = bills(store.as_ref())
        .await
        .into_iter()
        .map(|(_, _, account, billed, effective)| (account, billed, effective))
        .collect();
    let mut expected: Vec<(String, i64, i64)> = cases
        .iter()
        .map(|(_, account, billed, effective)| (account.to_string(), *billed, *effective))
        .collect();
    expected.sort();
    assert_eq!(got, expected);
    // Scenario 3's unused quarter is an Unused commitment charge of $0.25 effective.
    let unused: i64 = store
        .bill_charges("2023-01", Some("aws"))
        .await
        .unwrap()
        .iter()
        .filter(|c| c.billing_account == "usage-3" && c.commitment_discount_status == "Unused")
        .map(|c| c.effective_nanos)
        .sum();
    assert_eq!(unused, 250_000_000);
}

/// A minimal FOCUS 1.2 file of two providers' bills, each row given as its varying fields.
fn write_bills(path: &Path, rows: &[(&str, &str, &str, &str, &str)]) {
    let mut text = String::from(
        "ProviderName,BillingAccountId,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,\
         ChargePeriodEnd,ChargeCategory,PricingCategory,ServiceName,BilledCost,EffectiveCost,ListCost,\
         ContractedCost,InvoiceId,Tags\n",
    );
    for (provider, currency, start, category, cost) in rows {
        // An hour's charge: it ends an hour after it starts.
        let end = start.replacen("T00:", "T01:", 1);
        text.push_str(&format!(
            "{provider},acct-{provider},{currency},2026-10-01T00:00:00Z,2026-11-01T00:00:00Z,{start},\
             {end},{category},Standard,Compute,{cost},{cost},{cost},{cost},inv-1,\
             \"{{\"\"k8s-namespace\"\":\"\"acme-train\"\"}}\"\n"
        ));
    }
    std::fs::write(path, text).unwrap();
}

/// A GPU VM whose size is only in its description is counted; one the catalog does not know
/// is listed with its text and amount, in `report bill` and on the Data page (issue 70).
#[tokio::test]
async fn a_gpu_machine_named_only_in_its_description_is_counted_and_an_unknown_one_listed() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let store = helpers::connect(&db).await;
    let file = dir.path().join("azure.csv");
    let mut text = String::from(
        "ProviderName,BillingAccountId,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,\
         ChargePeriodEnd,ChargeCategory,PricingCategory,ServiceName,ServiceCategory,ResourceType,SkuMeter,\
         ChargeDescription,ConsumedQuantity,ConsumedUnit,BilledCost,EffectiveCost,ListCost,ContractedCost,\
         InvoiceId,Tags\n",
    );
    // Two days of a 1-GPU NC24ads A100 v4 (24 hours a day) named only in ChargeDescription,
    // three of a 40-GPU-core ND40rs v2 gpuledger does not know ($10.50, $11.25, $12.00), a CPU VM.
    let rows = [
        (5, "", "Virtual Machines NC24ads A100 v4 Spot - EU West", "Dynamic", "24", "88.15"),
        (6, "", "Virtual Machines NC24ads A100 v4 Spot - EU West", "Dynamic", "24", "88.15"),
        (5, "ND40rs v2", "ND40rs v2", "Standard", "1", "10.50"),
        (6, "ND40rs v2", "ND40rs v2", "Standard", "1", "11.25"),
        (7, "ND40rs v2", "ND40rs v2", "Standard", "1", "12.00"),
        (5, "D8s v5", "D8s v5", "Standard", "24", "9.12"),
    ];
    for (day, meter, description, pricing, hours, cost) in rows {
        text.push_str(&format!(
            "Microsoft,ea-1,USD,2026-10-01T00:00:00Z,2026-11-01T00:00:00Z,2026-10-{day:02}T00:00:00Z,\
             2026-10-{:02}T00:00:00Z,Usage,{pricing},Virtual Machines,Compute,Virtual machine scale set,\
             {meter},{description},{hours},1 Hour,{cost},{cost},{cost},{cost},inv-1,{{}}\n",
            day + 1
        ));
    }
    std::fs::write(&file, text).unwrap();
    ingest_focus(store.as_ref(), &options(&file), &hidden()).await.unwrap();
    let out = run(&["--database-url", &db, "report", "bill", "--period", "2026-10", "--format", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bill: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpu = &bill["bills"][0]["gpu"];
    // 2 days × 24 hours × 1 GPU, at 2 × $88.15.
    assert_eq!(gpu["gpu_hours"], 48.0, "{gpu}");
    assert_eq!(gpu["by_model"][0]["gpu_model"], "A100-80GB", "{gpu}");
    assert_eq!(gpu["gpu_fleet_effective_total"], "176.300000", "{gpu}");
    // The unknown machine: 3 charges, $33.75, by the text naming it; the CPU VM is neither.
    let unknown = gpu["unknown_gpu_machines"].as_array().unwrap();
    assert_eq!(unknown.len(), 1, "{gpu}");
    assert_eq!(unknown[0]["machine"], "ND40rs v2");
    assert_eq!(unknown[0]["charges"], 3);
    assert_eq!(unknown[0]["effective_total"], "33.750000");
    let table = run(&["--database-url", &db, "report", "bill", "--period", "2026-10"]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("3 charges, USD 33.750000, unknown GPU machine `ND40rs v2`"), "{table}");
    let web = gpuledger::web::AppState::new(helpers::connect(&db).await, gpuledger::web::AuthConfig::off());
    let (_, page) = crate::web::get(&web, "/data?period=2026-10").await;
    assert!(page.contains("Azure ea-1: 3 charges, USD 33.750000, unknown GPU machine"), "{page}");
    // The operator adds it to the catalog without a rebuild and reads the bill again: its 3
    // hours × 8 GPUs are counted, as V100, and nothing is unknown.
    let catalog = dir.path().join("gpus.csv");
    std::fs::write(&catalog, "provider,name,gpus,gpu_model\nazure,Standard_ND40rs_v2,8,V100\n").unwrap();
    let with_catalog = |args: &[&str]| {
        let mut all = vec!["--database-url", db.as_str()];
        all.extend_from_slice(args);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpuledger"))
            .args(&all)
            .env("RUST_LOG", "warn")
            .env("GPULEDGER_GPU_CATALOG", &catalog)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    with_catalog(&["ingest", "focus", "--force", &file.display().to_string()]);
    let bill: Value =
        serde_json::from_slice(&with_catalog(&["report", "bill", "--period", "2026-10", "--format", "json"]))
            .unwrap();
    let gpu = &bill["bills"][0]["gpu"];
    assert_eq!(gpu["gpu_hours"], 72.0, "{gpu}");
    let v100 = gpu["by_model"].as_array().unwrap().iter().find(|m| m["gpu_model"] == "V100").unwrap();
    assert_eq!(
        (v100["gpu_hours"].as_f64(), v100["gpu_fleet_effective_total"].as_str()),
        (Some(24.0), Some("33.750000"))
    );
    assert_eq!(gpu["unknown_gpu_machines"], serde_json::json!([]), "{gpu}");
    // A bad catalog stops every command with its row and column, before anything is read.
    std::fs::write(&catalog, "provider,name,gpus,gpu_model\nazure,ND40rs v2,eight,V100\n").unwrap();
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_gpuledger"))
        .args(["--database-url", &db, "report", "bill", "--period", "2026-10"])
        .env("GPULEDGER_GPU_CATALOG", &catalog)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(
        error.contains("gpus.csv: row 2, column gpus: \"eight\" is not a whole number above 0"),
        "{error}"
    );
}

/// Azure's VM size written only in `SkuPriceDetails`, `x_SkuDetails`, `x_SkuMeterName` or
/// `x_SkuDescription` (its meter and description saying only "Virtual Machines") is counted to
/// the GPU-hour and the cent; an opaque `SkuId` names no machine until an operator's catalog
/// lists it by that id (issue 70).
#[tokio::test]
async fn a_gpu_machine_is_recognized_in_whichever_column_names_it() {
    use gpuledger::synth::clouds::{MachineColumn, Provider, Variant, sku_id, write_month};
    let period: gpuledger::period::Period = "2026-10".parse().unwrap();
    let micros_text = |nanos: i64| format!("{}.{:06}", nanos / 1_000_000_000, nanos % 1_000_000_000 / 1_000);
    for machine in [
        MachineColumn::SkuPriceDetails,
        MachineColumn::XSkuDetails,
        MachineColumn::XSkuMeterName,
        MachineColumn::XSkuDescription,
        MachineColumn::SkuId,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let truth = write_month(
            dir.path(),
            7,
            Provider::Azure,
            period,
            period.hours(),
            false,
            Variant { sub_account: None, machine },
        )
        .unwrap()
        .unwrap();
        let truth = serde_json::to_value(&truth).unwrap();
        let db = format!("sqlite:{}", dir.path().join("ledger.db").display());
        let catalog = dir.path().join("gpus.csv");
        std::fs::write(
            &catalog,
            format!(
                "provider,name,gpus,gpu_model\nazure,{},1,A100-80GB\nazure,{},1,H100\n",
                sku_id("Standard_NC24ads_A100_v4"),
                sku_id("Standard_NC40ads_H100_v5")
            ),
        )
        .unwrap();
        let gl = |args: &[&str], with_catalog: bool| {
            let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_gpuledger"));
            command.arg("--database-url").arg(&db).args(args).env("RUST_LOG", "warn");
            if with_catalog {
                command.env("GPULEDGER_GPU_CATALOG", &catalog);
            }
            let out = command.output().unwrap();
            assert!(out.status.success(), "{machine:?} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            out.stdout
        };
        gl(&["fx", "set", "EUR", "USD", "1.0842", "--from", "2026-10"], false);
        let source = dir.path().join("azure").display().to_string();
        let gpus = |with_catalog: bool| -> Value {
            gl(&["ingest", "focus", "--force", &source], with_catalog);
            let bill: Value = serde_json::from_slice(&gl(
                &["report", "bill", "--period", "2026-10", "--format", "json"],
                with_catalog,
            ))
            .unwrap();
            bill["bills"][0]["gpu"].clone()
        };
        let hours = truth["gpu_hours"].as_f64().unwrap();
        assert!(hours > 0.0);
        let counted = |gpu: &Value| {
            (
                gpu["gpu_hours"].as_f64().unwrap(),
                gpu["gpu_fleet_effective_total"].as_str().unwrap().to_string(),
            )
        };
        let whole = (hours, micros_text(truth_nanos(&truth["gpu_fleet_effective"])));
        let gpu = gpus(false);
        if machine == MachineColumn::SkuId {
            // Nothing in the row names a machine: no GPU-hours, and nothing that looks like
            // a GPU machine to list.
            assert!(gpu.is_null() || gpu["gpu_hours"] == 0.0, "{gpu}");
            assert_eq!(counted(&gpus(true)), whole, "{machine:?} with the catalog");
        } else {
            assert_eq!(counted(&gpu), whole, "{machine:?}: {gpu}");
            assert_eq!(gpu["unknown_gpu_machines"], serde_json::json!([]), "{gpu}");
        }
    }
}

#[tokio::test]
async fn a_re_delivery_replaces_its_own_bill_and_bad_input_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let store = helpers::connect(&db).await;
    euro_rate(store.as_ref()).await;
    let first = dir.path().join("both.csv");
    write_bills(
        &first,
        &[
            ("Microsoft", "EUR", "2026-10-05T00:00:00Z", "Usage", "100.25"),
            ("Google Cloud", "USD", "2026-10-05T00:00:00Z", "Usage", "40.10"),
        ],
    );
    ingest_focus(store.as_ref(), &options(&first), &hidden()).await.unwrap();
    // Azure re-delivers its month alone: Google's bill stays as it was.
    let azure = dir.path().join("azure.csv");
    write_bills(&azure, &[("Microsoft", "EUR", "2026-10-05T00:00:00Z", "Usage", "90.00")]);
    ingest_focus(store.as_ref(), &options(&azure), &hidden()).await.unwrap();
    let got: Vec<(String, i64)> = bills(store.as_ref())
        .await
        .into_iter()
        .map(|(_, provider, _, billed, _)| (provider, billed))
        .collect();
    assert_eq!(got, vec![("azure".into(), 90_000_000_000), ("gcp".into(), 40_100_000_000)]);
    let stored = store.bills(Some("2026-10")).await.unwrap();
    assert_eq!((stored[0].currency.as_str(), stored[0].focus_version.as_str()), ("EUR", "1.2"));
    let charges = store.bill_charges("2026-10", Some("azure")).await.unwrap();
    assert_eq!(charges.len(), 1);
    assert_eq!(charges[0].tags, r#"{"k8s-namespace":"acme-train"}"#);

    // Each kind of bad input: refused with its file, row and column, exit non-zero, the
    // database as it was (its run recorded as failed, which is not data).
    let before = snapshot(store.as_ref()).await;
    let bad = |name: &str, rows: &[(&str, &str, &str, &str, &str)]| {
        let path = dir.path().join(name);
        write_bills(&path, rows);
        path
    };
    // A good file of one row, its text changed.
    let edited = |name: &str, change: &dyn Fn(&str) -> String| {
        let path = bad(name, &[("Microsoft", "EUR", "2026-10-05T00:00:00Z", "Usage", "1")]);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, change(&text)).unwrap();
        path
    };
    let cases: Vec<(PathBuf, &str)> = vec![
        (
            bad(
                "mixed.csv",
                &[
                    ("Microsoft", "EUR", "2026-10-05T00:00:00Z", "Usage", "1"),
                    ("Microsoft", "USD", "2026-10-05T00:00:00Z", "Usage", "1"),
                ],
            ),
            "data row 2, column BillingCurrency: USD in a bill in EUR",
        ),
        (
            bad("after.csv", &[("Microsoft", "EUR", "2026-11-01T00:00:00Z", "Usage", "1")]),
            "data row 1, column ChargePeriodStart: the charge starts at 2026-11-01T00:00:00Z, after its billing period",
        ),
        (
            bad("category.csv", &[("Microsoft", "EUR", "2026-10-05T00:00:00Z", "Refund", "1")]),
            "data row 1, column ChargeCategory: \"Refund\" is not one of FOCUS's values",
        ),
        (
            bad("infinite.csv", &[("Microsoft", "EUR", "2026-10-05T00:00:00Z", "Usage", "inf")]),
            "data row 1, column BilledCost: inf is not a finite number",
        ),
        (
            bad("absurd.csv", &[("Microsoft", "EUR", "2026-10-05T00:00:00Z", "Usage", "5e12")]),
            "data row 1, column BilledCost: 5000000000000 is beyond any plausible amount",
        ),
        (
            bad("dollars.csv", &[("Microsoft", "EUR", "2026-10-05T00:00:00Z", "Usage", "$12.00")]),
            "data row 1, column BilledCost: \"$12.00\" is not a number",
        ),
        (
            bad("local.csv", &[("Microsoft", "EUR", "2026-10-05T00:00:00+02:00", "Usage", "1")]),
            "data row 1, column ChargePeriodStart: \"2026-10-05T00:00:00+02:00\" is not in UTC",
        ),
        (
            bad("unknown.csv", &[("Acme Cloud", "EUR", "2026-10-05T00:00:00Z", "Usage", "1")]),
            "data row 1, column ProviderName: \"Acme Cloud\" is not a provider gpuledger knows",
        ),
        (
            bad("currency.csv", &[("Microsoft", "euro", "2026-10-05T00:00:00Z", "Usage", "1")]),
            "data row 1, column BillingCurrency: \"euro\" is not an ISO 4217 currency code",
        ),
        // #69: accepted silently before.
        (
            edited("twice.csv", &|text| text.replacen(",Tags\n", ",BilledCost\n", 1)),
            "the header names column BilledCost twice (columns 11 and 16)",
        ),
        (
            edited("nul.csv", &|text| text.replace("acct-Microsoft", "acct-Micro\0soft")),
            "data row 1, column BillingAccountId: holds a NUL byte",
        ),
        (
            edited("forever.csv", &|text| text.replace("2026-10-05T01:00:00Z", "9999-12-31T00:00:00Z")),
            "data row 1, column ChargePeriodEnd: the charge period [2026-10-05T00:00:00Z, 9999-12-31T00:00:00Z) spans more than five years",
        ),
    ];
    for (path, message) in cases {
        let out = run(&["--database-url", &db, "ingest", "focus", &path.display().to_string()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}: accepted", path.display());
        assert!(
            stderr.contains(&path.display().to_string()),
            "{}: the file is named: {stderr}",
            path.display()
        );
        assert!(stderr.contains(message), "{}: {message:?} in {stderr}", path.display());
        assert_eq!(snapshot(store.as_ref()).await, before, "{}: the database changed", path.display());
    }
    // A re-delivery whose bill falls by more than half is refused by the CUR's judge, in the
    // bill's currency: EUR 90.00 to 10.00 is 88.88 % less. The run is recorded as refused
    // with the numbers it was judged on; --max-drop 88 is still short of it, --force takes it.
    let fallen = bad("fallen.csv", &[("Microsoft", "EUR", "2026-10-05T00:00:00Z", "Usage", "10")]);
    let fallen = fallen.display().to_string();
    for bound in [&[][..], &["--max-drop", "88"][..]] {
        let out = run(&[&["--database-url", &db, "ingest", "focus"][..], bound, &[&fallen]].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            stderr.contains("2026-10 azure")
                && stderr.contains("EUR 10.00, 88.88 % below the stored bill of EUR 90.00"),
            "{stderr}"
        );
        assert!(stderr.contains("--max-drop") && stderr.contains("--force"), "{stderr}");
        assert_eq!(snapshot(store.as_ref()).await, before);
    }
    let run_ = store.ingest_runs(1).await.unwrap().remove(0);
    assert_eq!(run_.status, gpuledger::store::RunStatus::Refused);
    let numbers: Value = serde_json::from_str(run_.reconciliation.as_deref().unwrap()).unwrap();
    assert_eq!(
        (&numbers["currency"], &numbers["drop_percent"], &numbers["stored_bill_amortized"]),
        (&serde_json::json!("EUR"), &serde_json::json!("88.88"), &serde_json::json!("90.000000"))
    );
    // A ledger of FOCUS bills alone is alerted too: once the month is computed, the refusal is
    // the critical alert focus_delivery_refused, named by the bill it would have replaced.
    let computed = run(&["--database-url", &db, "compute", "--period", "2026-10"]);
    assert!(computed.status.success(), "{}", String::from_utf8_lossy(&computed.stderr));
    let alerts = run(&["--database-url", &db, "alerts", "list", "--format", "json"]);
    let alerts: Value = serde_json::from_slice(&alerts.stdout).unwrap();
    let alert = alerts["alerts"].as_array().unwrap().iter().find(|a| a["rule"] == "focus_delivery_refused");
    let alert = alert.unwrap_or_else(|| panic!("{alerts}"));
    assert_eq!(
        (&alert["severity"], &alert["subject"]),
        (&Value::from("critical"), &Value::from("2026-10 azure acct-Microsoft"))
    );
    let out = run(&["--database-url", &db, "ingest", "focus", "--force", &fallen]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["bills"][0]["billed_total"], "10.000000");
    // report bill lists both bills of the month, each in its currency.
    let out = run(&["--database-url", &db, "report", "bill", "--period", "2026-10", "--format", "json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<(String, String, String)> = report["bills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["provider"].as_str().unwrap().into(),
                b["currency"].as_str().unwrap().into(),
                b["billed_total"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        vec![
            ("azure".into(), "EUR".into(), "10.000000".into()),
            ("gcp".into(), "USD".into(), "40.100000".into())
        ]
    );
}

/// Nano-units to cents, rounded half away from zero: where two formats' sums are compared.
fn cents(nanos: i64) -> i64 {
    let half = if nanos < 0 { -5_000_000 } else { 5_000_000 };
    (nanos + half) / 10_000_000
}

/// The same AWS month through the CUR and through AWS's FOCUS export (#40, item 7): the same
/// invoice total, the same amortized bill, tax and credits, the same Spot and commitment
/// figures and the same cost per service, to the cent. What the formats force apart: FOCUS
/// has no split rows (pods) and no negations, and its EffectiveCost includes tax and credits,
/// which the CUR's amortized bill keeps outside (the bridge).
#[tokio::test]
async fn the_aws_month_through_the_cur_and_through_focus_is_the_same_bill() {
    use gpuledger::store::{LineCategory, PurchaseOption};
    use gpuledger::synth::{self, CurFormat, GenerateOptions, Scale};
    let dir = tempfile::tempdir().unwrap();
    let mut generate = GenerateOptions::demo(dir.path().to_path_buf(), "2026-10".parse().unwrap());
    generate.months = 1;
    generate.metrics = false;
    generate.format = CurFormat::Parquet;
    generate.scale = Scale::Demo;
    generate.focus = true;
    synth::generate(&generate, &hidden()).unwrap();
    let exports = dir.path().join(&generate.prefix);
    let store = helpers::connect(&format!("sqlite:{}", dir.path().join("ledger.db").display())).await;
    let cur = gpuledger::ingest::CurIngestOptions {
        source: exports.join(&generate.export_name).display().to_string(),
        ..Default::default()
    };
    gpuledger::ingest::ingest_cur(store.as_ref(), &cur, &hidden()).await.unwrap();
    let focus_root = exports.join(synth::focus_export_name(&generate));
    let results = ingest_focus(store.as_ref(), &options(&focus_root), &hidden()).await.unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!((results[0].provider.as_str(), results[0].focus_version.as_str()), ("aws", "1.2"));

    let period = store.cost_period("2026-10").await.unwrap().unwrap();
    let charges = store.bill_charges("2026-10", Some("aws")).await.unwrap();
    let focus_sum = |keep: &dyn Fn(&gpuledger::store::BillCharge) -> bool| -> i64 {
        cents(charges.iter().filter(|c| keep(c)).map(|c| c.effective_nanos).sum())
    };
    let micros_to_cents = |micros: i64| cents(micros * 1_000);
    let bill = &store.bills(Some("2026-10")).await.unwrap()[0];
    // One bill, two formats: the CUR's payer account is the FOCUS bill's billing account.
    assert_eq!(period.billing_account, bill.billing_account);
    assert_eq!(bill.billing_account, "111111111111");
    // The invoice: Σ BilledCost is the CUR's unblended total.
    assert_eq!(cents(bill.billed_nanos), micros_to_cents(period.bill_unblended_micros));
    // Usage and purchases, amortized: the CUR's amortized bill.
    let usage = focus_sum(&|c| matches!(c.charge_category.as_str(), "Usage" | "Purchase"));
    assert_eq!(usage, micros_to_cents(period.bill_amortized_micros));
    // Tax, and credits (discounts, credits and refunds in the CUR).
    let cur_lines = |category: LineCategory| -> i64 {
        period.bill_lines.iter().filter(|l| l.category == category).map(|l| l.unblended_micros).sum()
    };
    assert_eq!(focus_sum(&|c| c.charge_category == "Tax"), micros_to_cents(cur_lines(LineCategory::Tax)));
    assert_eq!(
        focus_sum(&|c| c.charge_category == "Credit"),
        micros_to_cents(
            cur_lines(LineCategory::Discount)
                + cur_lines(LineCategory::Credit)
                + cur_lines(LineCategory::Refund)
        )
    );
    assert!(focus_sum(&|c| c.charge_category == "Tax") > 0);
    // Spot: FOCUS's Dynamic pricing is the CUR's Spot instance-hours.
    let instances = |option: PurchaseOption| -> i64 {
        period
            .instance_hours
            .iter()
            .filter(|h| h.purchase_option == option)
            .map(|h| h.amortized_cost_micros)
            .sum()
    };
    let spot = focus_sum(&|c| c.pricing_category == "Dynamic");
    assert!(spot > 0);
    assert_eq!(spot, micros_to_cents(instances(PurchaseOption::Spot)));
    // Commitments: used is the covered instance-hours at their effective cost; unused is the
    // CUR's recurring fees as amortized.
    let used = focus_sum(&|c| c.commitment_discount_status == "Used");
    assert_eq!(
        used,
        micros_to_cents(instances(PurchaseOption::SavingsPlans) + instances(PurchaseOption::Reserved))
    );
    let unused = focus_sum(&|c| c.commitment_discount_status == "Unused");
    let cur_unused: i64 = period
        .bill_lines
        .iter()
        .filter(|l| matches!(l.line_item_type.as_str(), "SavingsPlanRecurringFee" | "RIFee"))
        .map(|l| l.amortized_micros)
        .sum();
    assert!(unused > 0);
    assert_eq!(unused, micros_to_cents(cur_unused));
    // Cost per service: the usage lines' amortized cost per product code.
    let mut cur_services: std::collections::BTreeMap<String, i64> = Default::default();
    for line in period.bill_lines.iter().filter(|l| l.category == LineCategory::Usage) {
        *cur_services.entry(line.service.clone()).or_default() += line.amortized_micros * 1_000;
    }
    let mut focus_services: std::collections::BTreeMap<String, i64> = Default::default();
    for charge in charges.iter().filter(|c| matches!(c.charge_category.as_str(), "Usage" | "Purchase")) {
        *focus_services.entry(charge.service_name.clone()).or_default() += charge.effective_nanos;
    }
    let in_cents = |map: std::collections::BTreeMap<String, i64>| -> Vec<(String, i64)> {
        map.into_iter().map(|(service, nanos)| (service, cents(nanos))).filter(|(_, c)| *c != 0).collect()
    };
    assert_eq!(in_cents(focus_services), in_cents(cur_services));
}

/// Azure's export runs and Oracle's daily reports, laid out as each provider writes them: the
/// latest month-to-date run of a range replaces the run before it, the version Azure's
/// manifest names is the one stored, and Oracle's days add up to its month.
#[tokio::test]
async fn azure_export_runs_and_oracle_daily_reports_are_read_as_their_providers_lay_them_out() {
    let dir = tempfile::tempdir().unwrap();
    let store = helpers::connect(&format!("sqlite:{}", dir.path().join("ledger.db").display())).await;
    euro_rate(store.as_ref()).await;
    let csv = |rows: &[(&str, &str, &str, &str, &str)]| {
        let path = dir.path().join("scratch.csv");
        write_bills(&path, rows);
        std::fs::read_to_string(&path).unwrap()
    };
    // Azure's parts without InvoiceId: their header alone reads as FOCUS 1.0.
    let azure_csv =
        |rows: &[(&str, &str, &str, &str, &str)]| csv(rows).replace(",InvoiceId", "").replace(",inv-1", "");
    // Two runs of October's range: the first with 2 parts through the 4th, the second (later)
    // with one part holding the month to date. Only the second counts.
    let range = dir.path().join("azure/exports/focus-daily/20261001-20261031");
    let run = |id: &str, submitted: &str, parts: &[(&str, String)]| {
        let folder = range.join(id);
        std::fs::create_dir_all(&folder).unwrap();
        for (name, text) in parts {
            crate::ingest_cur::gzip(&folder.join(name), text);
        }
        let blobs: Vec<Value> = parts
            .iter()
            .map(|(name, _)| serde_json::json!({"blobName": format!("exports/focus-daily/20261001-20261031/{id}/{name}"), "byteCount": 1}))
            .collect();
        let manifest = serde_json::json!({
            "manifestVersion": "2024-04-01",
            "exportConfig": {"exportName": "focus-daily", "type": "FocusCost", "dataVersion": "1.2-preview"},
            "runInfo": {"runId": id, "submittedTime": submitted},
            "blobs": blobs,
        });
        std::fs::write(folder.join("manifest.json"), manifest.to_string()).unwrap();
    };
    let day = "2026-10-05T00:00:00Z";
    run(
        "run-a",
        "2026-10-05T06:00:00Z",
        &[
            ("part_0_0001.csv.gz", azure_csv(&[("Microsoft", "EUR", day, "Usage", "10.00")])),
            ("part_1_0001.csv.gz", azure_csv(&[("Microsoft", "EUR", day, "Usage", "5.00")])),
        ],
    );
    run(
        "run-b",
        "2026-10-06T06:00:00Z",
        &[("part_0_0001.csv.gz", azure_csv(&[("Microsoft", "EUR", day, "Usage", "21.50")]))],
    );
    let azure = ingest_focus(store.as_ref(), &options(&dir.path().join("azure")), &hidden()).await.unwrap();
    assert_eq!(azure.len(), 1);
    assert_eq!(
        (azure[0].provider.as_str(), azure[0].billed_total.as_str(), azure[0].currency.as_str()),
        ("azure", "21.500000", "EUR")
    );
    // The header reads as 1.0 (no 1.1 or 1.2 column is mandatory); the manifest says 1.2.
    assert_eq!(azure[0].focus_version, "1.2");
    let runs = store.ingest_runs(10).await.unwrap();
    assert!(runs.iter().any(|r| r.kind.as_str() == "focus" && r.data_version == "run-b"), "{runs:?}");

    // Oracle: a gzip CSV per day under FOCUS Reports/YYYY/MM/DD.
    let reports = dir.path().join("oci/FOCUS Reports/2026/10");
    for (day, cost) in [("05", "1.25"), ("06", "2.50"), ("07", "0.75")] {
        let folder = reports.join(day);
        std::fs::create_dir_all(&folder).unwrap();
        let start = format!("2026-10-{day}T00:00:00Z");
        crate::ingest_cur::gzip(
            &folder.join(format!("reports_cost-csv_0001000000{day}.csv.gz")),
            &csv(&[("Oracle", "USD", start.as_str(), "Usage", cost)]),
        );
    }
    let oci = ingest_focus(store.as_ref(), &options(&dir.path().join("oci")), &hidden()).await.unwrap();
    assert_eq!(oci.len(), 1);
    assert_eq!((oci[0].provider.as_str(), oci[0].billed_total.as_str(), oci[0].rows), ("oci", "4.500000", 3));
    let providers: Vec<String> =
        store.bills(Some("2026-10")).await.unwrap().into_iter().map(|b| b.provider).collect();
    assert_eq!(providers, vec!["azure".to_string(), "oci".to_string()]);
}

/// October 2026 of the generator's demo world with the given clouds (and AWS's FOCUS export),
/// no metrics: its folder, options and truth.
fn three_cloud_world(
    providers: &[gpuledger::synth::clouds::Provider],
) -> (tempfile::TempDir, gpuledger::synth::GenerateOptions, Value) {
    cloud_world(providers, None)
}

/// The same, every other cloud's sub-account named `sub_account` when given.
pub(crate) fn cloud_world(
    providers: &[gpuledger::synth::clouds::Provider],
    sub_account: Option<&str>,
) -> (tempfile::TempDir, gpuledger::synth::GenerateOptions, Value) {
    let dir = tempfile::tempdir().unwrap();
    let mut generate =
        gpuledger::synth::GenerateOptions::demo(dir.path().to_path_buf(), "2026-10".parse().unwrap());
    generate.months = 1;
    generate.metrics = false;
    generate.focus = true;
    generate.providers = providers.to_vec();
    generate.sub_account = sub_account.map(String::from);
    gpuledger::synth::generate(&generate, &hidden()).unwrap();
    let truth =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("truth.json")).unwrap()).unwrap();
    (dir, generate, truth)
}

/// Nano-units from the truth's exact decimal (`12.345678901`).
pub(crate) fn truth_nanos(value: &Value) -> i64 {
    let text = value.as_str().unwrap_or_else(|| panic!("{value} is not a decimal string"));
    let (units, fraction) = text.split_once('.').unwrap_or((text, "0"));
    let sign = if units.starts_with('-') { -1 } else { 1 };
    let fraction = format!("{fraction:0<9}");
    sign * (units.trim_start_matches('-').parse::<i64>().unwrap() * 1_000_000_000
        + fraction.parse::<i64>().unwrap())
}

/// Σ effective nano-units of `charges` per value of one tag (`""` where the tag is absent).
fn effective_by_tag(
    charges: &[gpuledger::store::BillCharge],
    key: &str,
) -> std::collections::BTreeMap<String, i64> {
    let mut sums = std::collections::BTreeMap::new();
    for charge in charges {
        let tags: Value = serde_json::from_str(&charge.tags).unwrap();
        let value = tags.get(key).and_then(Value::as_str).unwrap_or("").to_string();
        *sums.entry(value).or_default() += charge.effective_nanos;
    }
    sums
}

/// The generator's three-cloud world (#40): each provider's bill in its own layout (Azure's
/// export runs in EUR, Google's FOCUS table as Parquet, Oracle's daily reports, AWS's Data
/// Export) is read to the truth the generator summed while writing it, exactly; GKE's cost
/// allocation gives each namespace's cost and the agency's `client` tag each dedicated pool's;
/// every provider's GPU instances are recognised with their GPU-hours and Spot hours; the
/// month is one total in USD once the euro has a rate.
#[tokio::test]
async fn the_three_cloud_world_is_read_to_its_truth_in_every_providers_layout() {
    use gpuledger::synth;
    let (dir, generate, truth) = three_cloud_world(&gpuledger::synth::clouds::Provider::ALL);
    let month = &truth["periods"]["2026-10"];
    let store = helpers::connect(&format!("sqlite:{}", dir.path().join("ledger.db").display())).await;
    // The euro's rate, as it must be before Azure's bill is ingested.
    let rates = vec![
        gpuledger::domain::fx::FxRate::new("EUR", "USD", "1.0842", "2026-10".parse().unwrap(), "test")
            .unwrap(),
    ];
    store.set_fx_rates(&rates, "test").await.unwrap();
    let sources = [
        (
            "aws",
            dir.path().join(&generate.prefix).join(synth::focus_export_name(&generate)),
            "AWS Data Exports",
        ),
        ("azure", dir.path().join("azure"), "Azure Cost Management export"),
        ("gcp", dir.path().join("gcp"), "FOCUS files"),
        ("oci", dir.path().join("oci"), "OCI FOCUS reports"),
    ];
    for (provider, source, _) in &sources {
        let results = ingest_focus(store.as_ref(), &options(source), &hidden()).await.unwrap();
        assert_eq!(results.len(), 1, "{provider}: one bill for the month");
        assert_eq!(results[0].provider, *provider);
    }
    let runs = store.ingest_runs(20).await.unwrap();
    for (provider, _, layout) in &sources {
        assert!(
            runs.iter().any(|r| r.reconciliation.as_deref().unwrap_or("").contains(layout)),
            "{provider}: a run read the {layout} layout: {:?}",
            runs.iter().map(|r| &r.reconciliation).collect::<Vec<_>>()
        );
    }
    let report = gpuledger::report::bill::BillReport::load(store.as_ref(), "2026-10".parse().unwrap(), None)
        .await
        .unwrap();
    let stored = store.bills(Some("2026-10")).await.unwrap();
    for provider in ["azure", "gcp", "oci"] {
        let expected = &month["providers"][provider];
        let bill = stored.iter().find(|b| b.provider == provider).unwrap();
        assert_eq!(bill.billing_account, expected["billing_account"].as_str().unwrap());
        assert_eq!(bill.currency, expected["currency"].as_str().unwrap());
        // The bill per provider, exactly: what the invoices charge, amortized, at list.
        assert_eq!(bill.billed_nanos, truth_nanos(&expected["billed_total"]), "{provider} billed");
        assert_eq!(bill.effective_nanos, truth_nanos(&expected["effective_total"]), "{provider} effective");
        assert_eq!(bill.list_nanos, truth_nanos(&expected["list_total"]), "{provider} list");
        // Azure's month-to-date run of the 15th was replaced by the final run.
        assert_eq!(bill.rows_read, expected["rows"].as_i64().unwrap(), "{provider} rows");
        // GPU instances as each provider bills them: Azure's VM sizes, Google's GPU SKUs by
        // the GPU-hour, Oracle's GPU shape per GPU-hour.
        let sums = &report.gpus[&(provider.to_string(), bill.billing_account.clone())];
        // Every machine is known: a reservation's unused hours of one are not an unknown GPU.
        assert!(sums.unknown.is_empty(), "{provider}: {:?}", sums.unknown);
        let gpus = &sums.total;
        assert!(
            (gpus.gpu_hours - expected["gpu_hours"].as_f64().unwrap()).abs() < 1e-6,
            "{provider} GPU-hours"
        );
        assert!(gpus.gpu_hours > 0.0);
        assert!((gpus.spot_gpu_hours - expected["spot_gpu_hours"].as_f64().unwrap()).abs() < 1e-6);
        assert_eq!(
            gpus.fleet_effective_nanos,
            truth_nanos(&expected["gpu_fleet_effective"]),
            "{provider} fleet"
        );
        let charges = store.bill_charges("2026-10", Some(provider)).await.unwrap();
        let to_truth = |map: std::collections::BTreeMap<String, i64>| -> Vec<(String, i64)> {
            map.into_iter().filter(|(_, nanos)| *nanos != 0).collect()
        };
        let truth_map = |key: &str| -> Vec<(String, i64)> {
            expected[key]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), truth_nanos(v)))
                .filter(|(_, nanos)| *nanos != 0)
                .collect()
        };
        // The agency's `client` tag on dedicated pools (initech's H100 on Azure, umbrella's A10
        // shape on Oracle), the rest untagged.
        assert_eq!(to_truth(effective_by_tag(&charges, "client")), truth_map("by_client_tag"), "{provider}");
        if provider == "gcp" {
            // GKE cost allocation: each namespace's share of its node-hours, and the capacity
            // no pod requested as `kube:unallocated`; lines of no namespace are the cluster's.
            let mut namespaces = effective_by_tag(&charges, "k8s-namespace");
            namespaces.remove("");
            let namespaces = to_truth(namespaces);
            assert_eq!(namespaces, truth_map("by_namespace"));
            assert!(namespaces.iter().any(|(n, _)| n == "kube:unallocated"));
            assert!(namespaces.len() >= 5, "{namespaces:?}");
        }
    }
    // The agency's clients whose pools are dedicated pay what their tag says.
    let azure = &month["providers"]["azure"];
    assert!(truth_nanos(&azure["by_client_tag"]["initech"]) > 0);
    // AWS's FOCUS export: its GPU instances are the CUR world's provisioned GPU-hours per
    // model, and its Spot GPU-hours the CUR's.
    let aws = stored.iter().find(|b| b.provider == "aws").unwrap();
    let aws_gpus = &report.gpus[&("aws".to_string(), aws.billing_account.clone())];
    for (model, hours) in month["gpu_models"].as_object().unwrap() {
        let provisioned = hours["provisioned_gpu_hours"].as_f64().unwrap();
        let read = aws_gpus.by_model.get(model.as_str()).map_or(0.0, |g| g.gpu_hours);
        assert!(
            (read - provisioned).abs() < 1e-6,
            "aws {model}: {read} GPU-hours read, {provisioned} provisioned"
        );
    }
    // One month in USD: every bill at its rate (the AWS bill once).
    let json = report.to_json();
    assert_eq!(json["month"]["missing_rates"], serde_json::json!([]));
    assert!(!json["month"]["effective_total"].is_null());
    let totals = gpuledger::report::bill::month_totals(&report.bills, &rates);
    let eur = stored.iter().find(|b| b.provider == "azure").unwrap().effective_nanos;
    let usd: i64 = stored.iter().filter(|b| b.provider != "azure").map(|b| b.effective_nanos).sum();
    // 1.0842 USD a euro, rounded once to the nano-dollar.
    let converted = ((i128::from(eur) * 10_842 + 5_000) / 10_000) as i64;
    assert_eq!(totals.effective_nanos, Some(usd + converted), "{totals:?}");
    assert_eq!(totals.counted.len(), 4);

    // Azure's reservation and Google's committed use discount, from their bills: the month's
    // commitment is its used and unused hours' EffectiveCost in the bill's currency, its
    // utilization the used share (AWS's come from the CUR, not from its FOCUS export).
    let commitments =
        gpuledger::report::commitments::CommitmentsReport::load(store.as_ref(), 3).await.unwrap();
    let providers: Vec<&str> = commitments.current.iter().map(|c| c.provider.as_str()).collect();
    assert_eq!(providers, ["azure", "gcp"]);
    for (provider, kind) in [("azure", "reservation"), ("gcp", "committed_use_discount")] {
        let expected = &month["providers"][provider];
        let (used, unused) =
            (truth_nanos(&expected["commitment_used"]), truth_nanos(&expected["commitment_unused"]));
        assert!(used > 0 && unused > 0, "{provider}: {used} used, {unused} unused");
        let c = commitments.current.iter().find(|c| c.provider == provider).unwrap();
        assert_eq!(
            (c.latest.kind.as_str(), c.currency.as_str()),
            (kind, expected["currency"].as_str().unwrap())
        );
        // Under the bill's own CommitmentDiscountId, its kind from its CommitmentDiscountType.
        assert_eq!(c.latest.id, expected["commitment_id"].as_str().unwrap());
        assert!(!expected["commitment_type"].as_str().unwrap().is_empty());
        // Its charges keep the bill's CommitmentDiscountCategory.
        let charges = store.month_charges("2026-10", Some(provider)).await.unwrap();
        let categories: std::collections::BTreeSet<&str> = charges
            .iter()
            .filter(|g| g.commitment_discount_id == c.latest.id)
            .map(|g| g.commitment_discount_category.as_str())
            .collect();
        assert_eq!(
            categories.into_iter().collect::<Vec<_>>(),
            [expected["commitment_category"].as_str().unwrap()]
        );
        let micros = gpuledger::money::micros_from_nanos;
        assert_eq!(
            (c.latest.fee_micros, c.latest.used_micros),
            (micros(used + unused), micros(used)),
            "{provider}"
        );
        assert_eq!(c.latest.hours, 31.0 * 24.0);
        let utilization = c.latest.utilization().unwrap();
        assert!(
            (utilization - used as f64 / (used + unused) as f64).abs() < 1e-6,
            "{provider}: {utilization}"
        );
        assert_eq!(c.months.len(), 1);
    }
    let json = commitments.to_json();
    let azure = json["current"].as_array().unwrap().iter().find(|c| c["provider"] == "azure").unwrap();
    assert_eq!((&azure["currency"], &azure["term_end"]), (&Value::from("EUR"), &Value::Null));

    // What to buy on each, simulated hour by hour over the last 30 days of the bill's On-Demand
    // hours of the covered type, at the discount its used hours had.
    let advice = |provider: &str| {
        json["advice"].as_array().unwrap().iter().find(|a| a["provider"] == provider).unwrap().clone()
    };
    let close = |value: &Value, expected: f64| (value.as_f64().unwrap() - expected).abs() < 1e-6;
    // Google (whose rows name no machine type: the L4 machines' hours): a G2 node-hour lists at 8 × 0.024988 + 32 × 0.002927 + 0.5599 = 0.853468 and costs
    // 0.537681 under the commitment (37.00045 % off). The third node runs On-Demand on
    // weekdays 8:00-20:00: Oct 2-31 has 21 weekdays, 252 of the 720 hours, 215.073936 at list.
    // A commitment pays only where more than 63 % of the hours use it all: 35 % do, so buy
    // nothing more (spread over whole days, 21 of 30 days at half a node would have bought
    // half a node).
    let gcp = advice("gcp");
    assert_eq!(
        (&gcp["kind"], &gcp["family"], &gcp["instance_type"], &gcp["currency"]),
        (
            &Value::from("committed_use_discount"),
            &Value::from("L4"),
            &Value::from("Compute Engine instance"),
            &Value::from("USD")
        )
    );
    assert!(close(&gcp["discount"], 1.0 - 0.537681 / 0.853468), "{gcp}");
    assert!(close(&gcp["eligible_on_demand"], 252.0 * 0.853468), "{gcp}");
    assert_eq!((gcp["hours"].as_u64(), gcp["lookback_days"].as_f64()), (Some(720), Some(30.0)));
    assert!(close(&gcp["hourly_commitment"], 0.0) && close(&gcp["coverage"], 0.0), "{gcp}");
    // Azure: the one H100 node is reserved (3.9838 against 6.4254 a list hour, 38.0 % off) and
    // no H100 hour ran On-Demand beside it: nothing to cover, nothing to buy, in euros.
    let azure = advice("azure");
    assert_eq!(
        (&azure["kind"], &azure["family"], &azure["instance_type"], &azure["currency"]),
        (
            &Value::from("reservation"),
            &Value::from("H100"),
            &Value::from("Standard_NC40ads_H100_v5"),
            &Value::from("EUR")
        )
    );
    assert!(close(&azure["discount"], 1.0 - 3.9838 / 6.4254), "{azure}");
    assert!(close(&azure["eligible_on_demand"], 0.0) && close(&azure["hourly_commitment"], 0.0), "{azure}");
    let notes: Vec<&str> = json["notes"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(notes.iter().any(|n| n.starts_with("azure's bill is daily")), "{notes:?}");
    assert!(!notes.iter().any(|n| n.starts_with("gcp's bill is daily")), "{notes:?}");
    // Each zero says why: 252 of 720 hours is 35.0 %, under the 63.0 % a 37.0 % discount needs.
    assert!(notes.contains(&"gcp's committed_use_discount on L4: On-Demand machines ran in 252 of the last 720 hours (35.0 %), fewer than the 63.0 % a commitment 37.0 % off needs to save anything: nothing more to buy"), "{notes:?}");
    assert!(notes.contains(&"azure's reservation on H100: no On-Demand hour of its machines in the last 720 hours: nothing more to buy"), "{notes:?}");
}

/// The three clouds in one ledger (#40, item 4): once the other clouds' FOCUS bills are in,
/// the month's bill, the chargeback and the accounts count them, in USD: umbrella's Oracle
/// shape and initech's Azure H100 (their `client` tags) are their non-Kubernetes direct cost,
/// GKE's namespaces their clients' by the namespace rules, and every client, the house and
/// the unassigned still add up to the bill. The AWS FOCUS export of the CUR's bill is not
/// counted twice; a bill in euros waits for its rate, and the rate computes the month again.
#[tokio::test]
async fn the_other_clouds_bills_are_in_the_months_bill_and_chargeback() {
    use gpuledger::synth;
    let (dir, generate, truth) = three_cloud_world(&gpuledger::synth::clouds::Provider::ALL);
    let providers = &truth["periods"]["2026-10"]["providers"];
    let db = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let gl = |args: &[&str]| {
        let mut all = vec!["--database-url", db.as_str()];
        all.extend_from_slice(args);
        run(&all)
    };
    let ok = |args: &[&str]| {
        let out = gl(args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    for (client, prefix) in
        [("acme", "acme-"), ("globex", "globex-"), ("initech", "initech-"), ("umbrella", "umbrella-")]
    {
        ok(&["clients", "map", client, "--prefix", prefix]);
        ok(&["clients", "map", client, "--label-value", client]);
    }
    let cur = dir.path().join(&generate.prefix).join(&generate.export_name);
    ok(&["ingest", "cur", &cur.display().to_string()]);
    let store = helpers::connect(&db).await;
    let before = store.rollups("2026-10").await.unwrap().unwrap();
    let client = |rollups: &gpuledger::store::Rollups, name: &str| -> gpuledger::store::ClientRollup {
        rollups.clients.iter().find(|c| c.client == name).cloned().unwrap_or_default()
    };
    // Σ every client, the house and the unassigned, to the micro-dollar the bill is kept in.
    let everyone = |rollups: &gpuledger::store::Rollups| -> i64 {
        let nanos: i64 =
            rollups.clients.iter().map(|c| c.direct_total_nanos() + c.shared_total_nanos()).sum();
        gpuledger::money::micros_from_nanos(nanos) * 1_000
    };
    let bill_nanos = |rollups: &gpuledger::store::Rollups| rollups.period.bill_amortized_micros.0 * 1_000;
    assert_eq!(everyone(&before), bill_nanos(&before), "clients + house + unassigned = the bill");

    // The AWS FOCUS export is the CUR's own bill: nothing changes.
    ok(&[
        "ingest",
        "focus",
        &dir.path().join(&generate.prefix).join(synth::focus_export_name(&generate)).display().to_string(),
    ]);
    let twin = store.rollups("2026-10").await.unwrap().unwrap();
    assert_eq!(twin.period.bill_amortized_micros, before.period.bill_amortized_micros);

    // Google and Oracle, billed in USD.
    ok(&["ingest", "focus", &dir.path().join("gcp").display().to_string()]);
    ok(&["ingest", "focus", &dir.path().join("oci").display().to_string()]);
    let usd = store.rollups("2026-10").await.unwrap().unwrap();
    let micros = |value: &Value| gpuledger::money::micros_from_nanos(truth_nanos(value));
    let added = micros(&providers["gcp"]["effective_total"]) + micros(&providers["oci"]["effective_total"]);
    // Each bill's charges are rounded to the micro-dollar once, as a bill: a cent at most
    // apart from the truth's nano-exact sums, and the bill exactly its charges.
    assert!(
        (usd.period.bill_amortized_micros.0 - before.period.bill_amortized_micros.0 - added).abs() <= 10_000
    );
    assert_eq!(everyone(&usd), bill_nanos(&usd));
    // Oracle's A10 shape is tagged umbrella: its cost is umbrella's non-Kubernetes direct cost.
    // Charges are counted in micro-dollars, a bill's rounding on its largest charge: to the
    // cent of the truth's nano-exact sums.
    let cent = 10_000_000;
    let umbrella_oci = truth_nanos(&providers["oci"]["by_client_tag"]["umbrella"]);
    let umbrella_added = client(&usd, "umbrella").non_kubernetes_direct_nanos
        - client(&before, "umbrella").non_kubernetes_direct_nanos;
    assert!(
        (umbrella_added - umbrella_oci - gke(&providers["gcp"], "umbrella-")).abs() < cent,
        "{umbrella_added}"
    );
    assert!(umbrella_oci > 0);
    // GKE's namespaces are their clients' by the namespace rules (acme-llm, acme-train → acme).
    let acme_added = client(&usd, "acme").non_kubernetes_direct_nanos
        - client(&before, "acme").non_kubernetes_direct_nanos;
    assert!((acme_added - gke(&providers["gcp"], "acme-")).abs() < cent, "{acme_added}");
    assert!(acme_added > 0);
    // The accounts: Google's project and Oracle's compartment beside the AWS accounts.
    let accounts = gl(&["report", "accounts", "--period", "2026-10", "--format", "json"]);
    let accounts: Value = serde_json::from_slice(&accounts.stdout).unwrap();
    let rows = accounts["rows"].as_array().unwrap();
    let provider_of = |account: &str| {
        rows.iter().find(|r| r["account"] == account).map(|r| r["provider"].as_str().unwrap().to_string())
    };
    assert_eq!(provider_of("agency-gpu-us").as_deref(), Some("gcp"));
    assert_eq!(provider_of("222222222222").as_deref(), Some("aws"));
    assert!(rows.iter().any(|r| r["provider"] == "oci"));

    // Azure bills in euros: without a rate it is refused before anything is written (#69),
    // and says which rate to set.
    let azure_source = dir.path().join("azure").display().to_string();
    let azure = gl(&["ingest", "focus", &azure_source]);
    assert!(!azure.status.success());
    let said = String::from_utf8_lossy(&azure.stderr);
    assert!(
        said.contains("nothing was written") && said.contains("fx set EUR USD RATE --from 2026-10"),
        "{said}"
    );
    assert!(store.bills(Some("2026-10")).await.unwrap().iter().all(|b| b.provider != "azure"));
    assert_eq!(
        store.rollups("2026-10").await.unwrap().unwrap().period.bill_amortized_micros,
        usd.period.bill_amortized_micros
    );
    // With the rate, the ingest computes it: initech's H100 (tagged) at 1.0842 dollars a euro.
    ok(&["fx", "set", "EUR", "USD", "1.0842", "--from", "2026-10"]);
    ok(&["ingest", "focus", &azure_source]);
    let all = store.rollups("2026-10").await.unwrap().unwrap();
    let euros = truth_nanos(&providers["azure"]["effective_total"]);
    let in_usd =
        |eur: i64| gpuledger::money::micros_from_nanos(((i128::from(eur) * 10_842 + 5_000) / 10_000) as i64);
    assert!(
        (all.period.bill_amortized_micros.0 - usd.period.bill_amortized_micros.0 - in_usd(euros)).abs()
            <= 10_000
    );
    assert_eq!(everyone(&all), bill_nanos(&all));
    let initech = truth_nanos(&providers["azure"]["by_client_tag"]["initech"]);
    let initech_added = client(&all, "initech").non_kubernetes_direct_nanos
        - client(&usd, "initech").non_kubernetes_direct_nanos;
    assert!(
        (initech_added - in_usd(initech) * 1_000).abs() <= 10_000_000,
        "{initech_added} vs {}",
        in_usd(initech)
    );
    assert!(initech_added > 0);

    // `report bill`'s totals are the month's across the clouds, in USD, as compute counts them.
    let bill = |extra: &[&str]| -> Value {
        let mut args = vec!["report", "bill", "--period", "2026-10", "--format", "json"];
        args.extend_from_slice(extra);
        let out = gl(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // An amount as `report bill` writes it (a decimal string) or a rollup report (a number with
    // six decimals at most, exact as written).
    let usd_micros = |value: &Value| -> i64 {
        let text = match value {
            Value::String(text) => text.clone(),
            Value::Number(number) => number.to_string(),
            other => panic!("{other} is not an amount"),
        };
        truth_nanos(&Value::String(text)) / 1_000
    };
    let month = bill(&[]);
    assert_eq!(usd_micros(&month["amortized_total"]), all.period.bill_amortized_micros.0);
    assert_eq!(
        usd_micros(&month["kubernetes_cost"])
            + usd_micros(&month["unallocated_ec2_cost"])
            + usd_micros(&month["other_cost"]),
        usd_micros(&month["amortized_total"])
    );
    let by_service: i64 =
        month["other_by_service"].as_array().unwrap().iter().map(|r| usd_micros(&r["amount"])).sum();
    assert_eq!(by_service, usd_micros(&month["other_cost"]));
    assert!(month["other_by_service"].as_array().unwrap().iter().any(|r| r["provider"] == "oci"));
    // Every step of the bridge adds up to the subtotal after it; the last is the invoices'.
    let mut running = 0;
    for step in month["bridge"].as_array().unwrap() {
        match step["kind"].as_str().unwrap() {
            "subtotal" => assert_eq!(usd_micros(&step["amount"]), running, "{step}"),
            _ => running += usd_micros(&step["amount"]),
        }
    }
    assert_eq!(running, usd_micros(&month["unblended_total"]));
    // Azure's alone: its euros at 1.0842, the rate named in its bridge step.
    let azure = bill(&["--provider", "azure"]);
    assert_eq!(usd_micros(&azure["amortized_total"]), in_usd(euros));
    assert_eq!(
        usd_micros(&azure["unblended_total"]),
        in_usd(truth_nanos(&providers["azure"]["billed_total"]))
    );
    assert_eq!(azure["bills"].as_array().unwrap().len(), 1);
    let first = azure["bridge"][0]["step"].as_str().unwrap();
    assert!(first.contains("EUR") && first.contains("1.0842"), "{first}");
    // Google's kube:unallocated is capacity no pod was given, as EC2 not allocated is.
    let gcp = bill(&["--provider", "gcp"]);
    let unallocated = truth_nanos(&providers["gcp"]["by_namespace"]["kube:unallocated"]);
    assert!((usd_micros(&gcp["unallocated_ec2_cost"]) * 1_000 - unallocated).abs() < cent);
    // The bill per provider: its accounts summed, each equal to its bills' `report bill`.
    let report = |args: &[&str]| -> Value {
        let out = gl(args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let by_provider = report(&["report", "providers", "--period", "2026-10", "--format", "json"]);
    let rows = by_provider["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["provider"].as_str().unwrap()).collect();
    assert_eq!(names, ["aws", "azure", "gcp", "oci"]);
    // The GPU fleet per provider: each bill's GPU-hours, Spot share and GPU instances' cost
    // (Azure's euros at the month's rate), as the truth has them; utilization only where
    // gpuledger has the pods (AWS's, until issue 41 splits the other clouds' nodes).
    for row in rows.iter().filter(|r| r["provider"] != "aws") {
        let provider = row["provider"].as_str().unwrap();
        let truth = &providers[provider];
        let hours = truth["gpu_hours"].as_f64().unwrap();
        assert!(hours > 0.0 && (row["gpu_hours"].as_f64().unwrap() - hours).abs() < 1e-6, "{row}");
        let spot = truth["spot_gpu_hours"].as_f64().unwrap() / hours;
        assert!((row["spot_gpu_share"].as_f64().unwrap() - spot).abs() < 1e-6, "{row}");
        let fleet = truth_nanos(&truth["gpu_fleet_effective"]);
        let fleet =
            if provider == "azure" { in_usd(fleet) } else { gpuledger::money::micros_from_nanos(fleet) };
        assert!((usd_micros(&row["gpu_fleet_cost"]) - fleet).abs() <= 10_000, "{provider}: {row}");
        // And in the bill's own currency: Azure's euros unconverted, the truth's to the
        // nano-euro; a bill in dollars, its dollars.
        let in_currency = &row["gpu_fleet_cost_in_bill_currency"];
        if provider == "azure" {
            assert_eq!(row["bill_currency"], "EUR");
            let euros = truth_nanos(&Value::String(in_currency.to_string()));
            assert_eq!(euros, truth_nanos(&truth["gpu_fleet_effective"]), "{provider}: {row}");
        } else {
            assert_eq!(
                (&row["bill_currency"], in_currency),
                (&"USD".into(), &row["gpu_fleet_cost"]),
                "{row}"
            );
        }
        assert!(row["gpu_utilization"].is_null(), "{row}");
    }
    // Capacity: the other clouds' pools are their GPU machines' hours in the bill, each
    // provider's month summed its GPU-hours, its Spot pools its Spot GPU-hours.
    let history = gpuledger::report::forecast::History::load(
        store.as_ref(),
        chrono::NaiveDate::from_ymd_opt(2026, 11, 15).unwrap(),
    )
    .await
    .unwrap();
    for provider in ["azure", "gcp", "oci"] {
        let pools: Vec<(&String, f64)> = history
            .provisioned
            .iter()
            .filter(|((p, _), _)| p == provider)
            .map(|((_, pool), days)| (pool, days.iter().sum::<f64>()))
            .collect();
        let all: f64 = pools.iter().map(|(_, hours)| hours).sum();
        let spot: f64 = pools.iter().filter(|(pool, _)| pool.ends_with(" Spot")).map(|(_, h)| h).sum();
        let truth = &providers[provider];
        assert!((all - truth["gpu_hours"].as_f64().unwrap()).abs() < 1e-6, "{provider}: {pools:?}");
        assert!((spot - truth["spot_gpu_hours"].as_f64().unwrap()).abs() < 1e-6, "{provider}: {pools:?}");
    }
    // Google's G2 pool on a weekday: the two committed nodes all day and the third 8:00-20:00,
    // 24 + 24 + 12 = 60 L4-hours, 2.5 GPUs; Azure's one reserved H100 all day at its peak.
    let capacity = report(&["report", "capacity", "--format", "json"]);
    let peak = |provider: &str, pool: &str| {
        capacity["pools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["provider"] == provider && p["pool"] == pool)
            .map(|p| p["gpus_peak"].as_f64().unwrap())
    };
    // (GKE's namespace shares of a node-hour sum back to it within a float's rounding.)
    let near = |found: Option<f64>, gpus: f64| found.is_some_and(|g| (g - gpus).abs() < 1e-9);
    assert!(near(peak("gcp", "L4 On-Demand"), 2.5), "{capacity}");
    assert!(near(peak("azure", "H100 On-Demand"), 1.0), "{capacity}");
    // AWS's from the CUR's GPU instances (no metrics in this world: no utilization either).
    let aws_gpus = rows.iter().find(|r| r["provider"] == "aws").unwrap();
    assert!(aws_gpus["gpu_hours"].as_f64().unwrap() > 0.0 && usd_micros(&aws_gpus["gpu_fleet_cost"]) > 0);
    // One GPU fleet (issue 70): the Overview's card is the providers' fleet summed, and the
    // GPUs page's `(all)` rows provision every GPU-hour of every bill, at the same cost;
    // nothing unallocated is negative.
    let fleet: i64 = rows.iter().map(|r| usd_micros(&r["gpu_fleet_cost"])).sum();
    let fleet_hours: f64 = rows.iter().map(|r| r["gpu_hours"].as_f64().unwrap()).sum();
    let head = gpuledger::report::rollup::Headline::of(&all);
    assert_eq!(gpuledger::money::micros_from_nanos(head.gpu_fleet_nanos), fleet);
    assert!(head.unallocated_gpu_nanos >= 0, "{}", head.unallocated_gpu_nanos);
    let gpu = report(&["report", "gpu", "--period", "2026-10", "--format", "json"]);
    let models: Vec<&Value> =
        gpu["rows"].as_array().unwrap().iter().filter(|r| r["namespace"] == "(all)").collect();
    let provisioned: f64 = models.iter().map(|r| r["provisioned_gpu_hours"].as_f64().unwrap()).sum();
    assert!((provisioned - fleet_hours).abs() < 1e-6, "{provisioned} of {fleet_hours}: {gpu}");
    assert_eq!(models.iter().map(|r| usd_micros(&r["gpu_fleet_cost"])).sum::<i64>(), fleet);
    for row in gpu["rows"].as_array().unwrap() {
        assert!(usd_micros(&row["unallocated_gpu_cost"]) >= 0, "{row}");
    }
    // Azure's and Oracle's models are provisioned too (the finding: $0.00 and 0 hours).
    for model in ["H100", "A10"] {
        let row = models.iter().find(|r| r["gpu_model"] == model).unwrap_or_else(|| panic!("{model}: {gpu}"));
        assert!(
            row["provisioned_gpu_hours"].as_f64().unwrap() > 0.0 && usd_micros(&row["gpu_fleet_cost"]) > 0
        );
    }
    let summed: i64 = rows.iter().map(|r| usd_micros(&r["amortized_cost"])).sum();
    assert_eq!(summed, usd_micros(&month["amortized_total"]));
    assert_eq!(usd_micros(&by_provider["amortized_total"]), summed);
    for row in rows {
        let provider = row["provider"].as_str().unwrap();
        let alone = bill(&["--provider", provider]);
        assert_eq!(usd_micros(&row["amortized_cost"]), usd_micros(&alone["amortized_total"]), "{provider}");
    }
    // Narrowed to a provider, every report covers its accounts alone.
    let gcp_accounts =
        report(&["report", "accounts", "--period", "2026-10", "--provider", "gcp", "--format", "json"]);
    let gcp_rows = gcp_accounts["rows"].as_array().unwrap();
    assert!(!gcp_rows.is_empty() && gcp_rows.iter().all(|r| r["provider"] == "gcp"), "{gcp_accounts}");
    assert_eq!(usd_micros(&gcp_accounts["amortized_total"]), usd_micros(&gcp["amortized_total"]));
    // The namespaces of AWS's accounts are the Kubernetes cost AWS's bill has; Google's
    // accounts have no pods yet (their split is issue #41's), so their bill is all other cost.
    let aws = rows.iter().find(|r| r["provider"] == "aws").unwrap();
    let aws_namespaces =
        report(&["report", "namespaces", "--period", "2026-10", "--provider", "aws", "--format", "json"]);
    assert_eq!(usd_micros(&aws_namespaces["kubernetes_total"]), usd_micros(&aws["kubernetes_cost"]));
    assert_eq!(usd_micros(&aws_namespaces["bill_amortized_total"]), usd_micros(&aws["amortized_cost"]));
    // Each opportunity names the providers its workload's pods ran on: AWS's here.
    let opportunities = report(&["report", "opportunities", "--period", "2026-10", "--format", "json"]);
    let opportunities = opportunities["rows"].as_array().unwrap();
    assert!(
        !opportunities.is_empty() && opportunities.iter().all(|o| o["provider"] == "aws"),
        "{opportunities:?}"
    );
    // Narrowed to AWS, where every workload ran, none is lost: a CronJob's family (its runs
    // named apart) included.
    let on_aws =
        report(&["report", "opportunities", "--period", "2026-10", "--provider", "aws", "--format", "json"]);
    assert_eq!(on_aws["rows"].as_array().map(Vec::len), Some(opportunities.len()), "{on_aws}");
    let unknown = gl(&["report", "gpu", "--period", "2026-10", "--provider", "ibm"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no ibm bill in 2026-10"));
    // And every page: the Costs page's accounts, the Overview's spend by provider, a wrong name.
    let web = gpuledger::web::AppState::new(helpers::connect(&db).await, gpuledger::web::AuthConfig::off());
    let (status, page) = crate::web::get(&web, "/costs?period=2026-10&provider=oci&format=json").await;
    assert_eq!(status, axum::http::StatusCode::OK, "{page}");
    let page: Value = serde_json::from_str(&page).unwrap();
    let oci_rows = page["accounts"]["rows"].as_array().unwrap();
    assert!(!oci_rows.is_empty() && oci_rows.iter().all(|r| r["provider"] == "oci"), "{page}");
    assert!(page.get("providers").is_none(), "a provider's page has no table by provider");
    let (_, overview) = crate::web::get(&web, "/?period=2026-10&format=json").await;
    let overview: Value = serde_json::from_str(&overview).unwrap();
    assert_eq!(overview["providers"]["rows"].as_array().map(Vec::len), Some(4), "{overview}");
    let (status, refused) = crate::web::get(&web, "/costs?period=2026-10&provider=ibm").await;
    assert_eq!(status, axum::http::StatusCode::BAD_REQUEST);
    assert!(refused.contains("no ibm bill in 2026-10"), "{refused}");
    let nope = gl(&["report", "bill", "--period", "2026-10", "--provider", "ibm"]);
    assert!(!nope.status.success());
    assert!(String::from_utf8_lossy(&nope.stderr).contains("aws, azure, gcp, oci"));
    // The Plan page names another cloud's pool with its provider (Google and AWS both have an
    // `A100 Spot`): its capacity row links to it, and a wrong pool lists them so.
    let (status, plan) = crate::web::get(&web, "/plan?format=json").await;
    assert_eq!(status, axum::http::StatusCode::OK, "{plan}");
    let plan: Value = serde_json::from_str(&plan).unwrap();
    let rows = plan["capacity"]["rows"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["provider"] == "gcp" && r["pool"] == "L4 On-Demand"), "{rows:?}");
    let (status, pool) = crate::web::get(&web, "/plan?pool=L4%20On-Demand%20(gcp)&format=json").await;
    assert_eq!(status, axum::http::StatusCode::OK, "{pool}");
    let (status, wrong) = crate::web::get(&web, "/plan?pool=nope&format=json").await;
    assert_eq!(status, axum::http::StatusCode::BAD_REQUEST);
    assert!(wrong.contains("L4 On-Demand (gcp)") && wrong.contains("H100 On-Demand (azure)"), "{wrong}");
    // Its commitments in USD (the card and the spend chart's line): Azure's euros at the
    // month's 1.0842, the rate named; the rest as billed.
    let commitments = report(&["report", "commitments", "--format", "json"]);
    let hourly: f64 = commitments["current"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let rate = if c["currency"] == "EUR" { 1.0842 } else { 1.0 };
            c["hourly_commitment"].as_f64().unwrap() * rate
        })
        .sum();
    let in_usd = &plan["commitments_in_usd"];
    assert!((in_usd["hourly_commitment"].as_f64().unwrap() - hourly).abs() < 1e-5, "{in_usd} {hourly}");
    assert_eq!(
        in_usd["rates"],
        serde_json::json!([{"currency": "EUR", "rate": "1.0842", "effective_from": "2026-10"}])
    );
    assert_eq!(in_usd["left_out"], serde_json::json!([]));

    // umbrella ran on three clouds: its Oracle shape (tagged) and GKE namespaces beside its
    // AWS pods. Chargeback keeps each provider's part of its tagged cost, to the cent of the
    // truth, and its invoice itemizes the lines by provider, each provider's lines its cost
    // with its part of the markup (the lines share it in proportion to their cost).
    let umbrella = client(&all, "umbrella");
    let elsewhere = umbrella.provider_direct();
    let part = |provider: &str| elsewhere.get(provider).map_or(0, |sums| sums.iter().sum::<i64>());
    assert!((part("oci") - umbrella_oci).abs() < cent, "{elsewhere:?}");
    assert!((part("gcp") - gke(&providers["gcp"], "umbrella-")).abs() < cent, "{elsewhere:?}");
    let draft =
        report(&["invoice", "draft", "--client", "umbrella", "--period", "2026-10", "--format", "json"]);
    let lines = draft["lines"].as_array().unwrap();
    let cents_of = |value: &Value| value.as_str().unwrap().parse::<gpuledger::money::Cents>().unwrap().0;
    let amount = |line: &Value| cents_of(&line["amount"]);
    let charged = umbrella.total_nanos();
    let cost = charged - umbrella.markup_nanos - umbrella.discount_nanos;
    for (suffix, name, nanos) in [(".oci", ", OCI", part("oci")), (".gcp", ", Google Cloud", part("gcp"))] {
        let mine: Vec<&Value> =
            lines.iter().filter(|l| l["category"].as_str().unwrap().ends_with(suffix)).collect();
        assert!(!mine.is_empty() && mine.iter().all(|l| l["description"].as_str().unwrap().ends_with(name)));
        let billed: i64 = mine.iter().map(|l| amount(l)).sum();
        let expected = (i128::from(nanos) * i128::from(charged) / i128::from(cost) / 10_000_000) as i64;
        assert!((billed - expected).abs() <= mine.len() as i64 + 1, "{suffix}: {billed} vs {expected} cents");
    }
    assert!(
        lines.iter().any(|l| l["category"] == "gpu_training.aws" || l["category"] == "gpu_inference.aws"),
        "{draft}"
    );
    let pools: i64 =
        lines.iter().filter(|l| l["category"].as_str().unwrap().starts_with("shared_")).map(amount).sum();
    assert!(pools > 0, "the pools' shares stay whole lines");
    // The charge rounded once: its lines add up to it to the cent.
    assert_eq!(lines.iter().map(amount).sum::<i64>(), cents_of(&draft["total"]) - cents_of(&draft["tax"]));
    assert_eq!(cents_of(&draft["subtotal"]), gpuledger::money::Cents::from_nanos(charged).0);
    // initech's H100 ran on Azure, billed in euros: its invoice says at which rate.
    let initech =
        report(&["invoice", "draft", "--client", "initech", "--period", "2026-10", "--format", "json"]);
    assert!(
        initech["lines"].as_array().unwrap().iter().any(|l| l["category"] == "other_direct.azure"),
        "{initech}"
    );
    assert_eq!(
        initech["conversions"],
        serde_json::json!([
            "Azure's bill is in EUR, converted to USD at 1 EUR = 1.0842 USD, the rate in force for 2026-10."
        ])
    );
    assert!(draft.get("conversions").is_none(), "umbrella's bills are in USD: {draft}");
}

/// A month with no CUR is its FOCUS bills alone (an agency off AWS, or a month whose CUR has
/// not come): it computes, its chargeback and pages come from the bills (Oracle's tagged A10
/// shape and GKE's namespaces are umbrella's), and its bill is the truth's to the cent.
#[tokio::test]
async fn a_month_of_focus_bills_alone_is_computed_without_a_cur() {
    use gpuledger::synth::clouds::Provider;
    let (dir, _generate, truth) = three_cloud_world(&[Provider::Gcp, Provider::Oci]);
    let providers = &truth["periods"]["2026-10"]["providers"];
    let db = format!("sqlite:{}", dir.path().join("focus-only.db").display());
    let ok = |args: &[&str]| {
        let mut all = vec!["--database-url", db.as_str()];
        all.extend_from_slice(args);
        let out = run(&all);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    ok(&["clients", "map", "umbrella", "--prefix", "umbrella-"]);
    ok(&["clients", "map", "umbrella", "--label-value", "umbrella"]);
    for provider in ["gcp", "oci"] {
        ok(&["ingest", "focus", &dir.path().join(provider).display().to_string()]);
    }
    // `compute` without a period computes every month a source billed, a CUR or not: one
    // compute run of October more.
    let store = helpers::connect(&db).await;
    let computes = || async {
        let runs = store.ingest_runs(1_000).await.unwrap();
        runs.iter()
            .filter(|r| r.kind == gpuledger::domain::runs::RunKind::Compute && r.period == "2026-10")
            .count()
    };
    let before = computes().await;
    ok(&["compute"]);
    assert_eq!(computes().await, before + 1, "compute computes the FOCUS-only month");
    let rollups = store.rollups("2026-10").await.unwrap().expect("a month of FOCUS bills alone is computed");
    let cent = 10_000_000;
    let truth_total =
        truth_nanos(&providers["gcp"]["effective_total"]) + truth_nanos(&providers["oci"]["effective_total"]);
    // Each bill rounded to the micro-dollar once: within a cent of the truth's nano-exact sums.
    assert!(
        (rollups.period.bill_amortized_micros.0 * 1_000 - truth_total).abs() < 2 * cent,
        "{:?}",
        rollups.period
    );
    let everyone: i64 = rollups.clients.iter().map(|c| c.direct_total_nanos() + c.shared_total_nanos()).sum();
    assert_eq!(gpuledger::money::micros_from_nanos(everyone), rollups.period.bill_amortized_micros.0);
    let umbrella = rollups.clients.iter().find(|c| c.client == "umbrella").expect("umbrella is charged");
    let expected =
        truth_nanos(&providers["oci"]["by_client_tag"]["umbrella"]) + gke(&providers["gcp"], "umbrella-");
    assert!((umbrella.non_kubernetes_direct_nanos - expected).abs() < 2 * cent, "{umbrella:?}");
    // AWS has no part of it: the lines say which cloud.
    let draft: Value = serde_json::from_slice(&ok(&[
        "invoice", "draft", "--client", "umbrella", "--period", "2026-10", "--format", "json",
    ]))
    .unwrap();
    let categories: Vec<&str> =
        draft["lines"].as_array().unwrap().iter().map(|l| l["category"].as_str().unwrap()).collect();
    assert!(
        categories.contains(&"other_direct.oci") && categories.contains(&"other_direct.gcp"),
        "{categories:?}"
    );
    assert!(!categories.iter().any(|c| c.ends_with(".aws")), "{categories:?}");
    // `report bill` is the two bills; the Data page shows the month's bridge.
    let bill: Value =
        serde_json::from_slice(&ok(&["report", "bill", "--period", "2026-10", "--format", "json"])).unwrap();
    assert_eq!(bill["bills"].as_array().map(Vec::len), Some(2), "{bill}");
    let amortized = match &bill["amortized_total"] {
        Value::String(text) => truth_nanos(&Value::String(text.clone())),
        other => truth_nanos(&Value::String(other.to_string())),
    };
    assert_eq!(amortized / 1_000, rollups.period.bill_amortized_micros.0);
    let web = gpuledger::web::AppState::new(helpers::connect(&db).await, gpuledger::web::AuthConfig::off());
    let (status, page) = crate::web::get(&web, "/data").await;
    assert_eq!(status, axum::http::StatusCode::OK);
    assert!(page.contains("No CUR export yet") && page.contains("Google Cloud bill"), "{page}");
    let (status, overview) = crate::web::get(&web, "/?period=2026-10&format=json").await;
    assert_eq!(status, axum::http::StatusCode::OK, "{overview}");
    let overview: Value = serde_json::from_str(&overview).unwrap();
    assert_eq!(overview["providers"]["rows"].as_array().map(Vec::len), Some(2), "{overview}");
    // Without a CUR the GPU fleet is still the bills' (#70): the card is the providers' sum and
    // the two bills' GPU machines, and no part of the month's spend is negative.
    let usd = |value: &Value| -> f64 {
        match value {
            Value::String(text) => text.replace(['$', ','], "").parse().unwrap(),
            other => other.as_f64().unwrap(),
        }
    };
    let fleet: f64 =
        overview["providers"]["rows"].as_array().unwrap().iter().map(|r| usd(&r["gpu_fleet_cost"])).sum();
    let billed_fleet = (truth_nanos(&providers["gcp"]["gpu_fleet_effective"])
        + truth_nanos(&providers["oci"]["gpu_fleet_effective"])) as f64
        / 1e9;
    assert!(fleet > 0.0 && (fleet - billed_fleet).abs() < 0.02, "{fleet} against the bills' {billed_fleet}");
    let card = overview["cards"].as_array().unwrap().iter().find(|c| c["label"] == "GPU fleet cost").unwrap();
    assert!((usd(&card["value"]) - fleet).abs() < 0.006, "{card} against {fleet}");
    let month =
        overview["trend"]["rows"].as_array().unwrap().iter().find(|r| r["month"] == "2026-10").unwrap();
    let parts = ["gpu_fleet_cost", "cpu_and_memory_cost", "storage_cost", "network_cost", "other_cost"];
    for column in parts.iter().chain(&["unallocated_gpu_cost"]) {
        assert!(usd(&month[*column]) >= 0.0, "{column}: {month}");
    }
    let summed: f64 = parts.iter().map(|c| usd(&month[*c])).sum();
    assert!((summed - usd(&month["spend"])).abs() < 1e-5, "{month}");
}

/// #70: an id is its cloud's own. Azure's subscription, Google's project and Oracle's
/// compartment all named `222222222222`, the CUR's usage account: four accounts, each its
/// provider's, `report providers` a row per cloud equal to its bill alone, the four summing
/// to the month (the three others once vanished into one account of one provider).
#[tokio::test]
async fn one_account_id_on_four_clouds_is_four_accounts() {
    use gpuledger::synth::clouds::Provider;
    let shared = "222222222222";
    let (dir, generate, truth) = cloud_world(&Provider::ALL, Some(shared));
    let providers = &truth["periods"]["2026-10"]["providers"];
    for provider in ["azure", "gcp", "oci"] {
        let subs: Vec<&String> = providers[provider]["by_sub_account"].as_object().unwrap().keys().collect();
        assert_eq!(subs, [shared], "{provider}: the generator names the shared id");
    }
    let db = format!("sqlite:{}", dir.path().join("shared-ids.db").display());
    let gl = |args: &[&str]| -> Vec<u8> {
        let mut all = vec!["--database-url", db.as_str()];
        all.extend_from_slice(args);
        let out = run(&all);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let cur = dir.path().join(&generate.prefix).join(&generate.export_name);
    gl(&["ingest", "cur", &cur.display().to_string()]);
    euro_rate(helpers::connect(&db).await.as_ref()).await;
    for provider in ["azure", "gcp", "oci"] {
        gl(&["ingest", "focus", &dir.path().join(provider).display().to_string()]);
    }
    let json = |args: &[&str]| -> Value { serde_json::from_slice(&gl(args)).unwrap() };
    let micros = |value: &Value| -> i64 {
        let text = match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        truth_nanos(&Value::String(text)) / 1_000
    };
    let month = json(&["report", "bill", "--period", "2026-10", "--format", "json"]);
    let by_provider = json(&["report", "providers", "--period", "2026-10", "--format", "json"]);
    let rows = by_provider["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["provider"].as_str().unwrap()).collect();
    assert_eq!(names, ["aws", "azure", "gcp", "oci"], "{by_provider}");
    for row in rows {
        let provider = row["provider"].as_str().unwrap();
        let alone =
            json(&["report", "bill", "--period", "2026-10", "--provider", provider, "--format", "json"]);
        assert_eq!(micros(&row["amortized_cost"]), micros(&alone["amortized_total"]), "{provider}");
        assert!(micros(&row["amortized_cost"]) > 0, "{row}");
    }
    let summed: i64 = rows.iter().map(|r| micros(&r["amortized_cost"])).sum();
    assert_eq!(summed, micros(&month["amortized_total"]));
    // Each provider's figure in its bill's currency too: Azure's is its EUR bill unconverted
    // (the truth's EffectiveCost, to the micro-euro), its dollars that at 1.0842 to the cent;
    // the others bill in dollars, the same figure twice.
    let providers = &truth["periods"]["2026-10"]["providers"];
    for row in rows {
        let provider = row["provider"].as_str().unwrap();
        let in_bill = micros(&row["amortized_in_bill_currency"]);
        if provider == "azure" {
            assert_eq!(row["bill_currency"], "EUR", "{row}");
            let euros = truth_nanos(&providers["azure"]["effective_total"]);
            assert!((in_bill * 1_000 - euros).abs() <= 500, "{row} against the truth's {euros}");
            let dollars = in_bill as f64 * 1.0842;
            assert!((micros(&row["amortized_cost"]) as f64 - dollars).abs() <= 10_000.0, "{row}");
        } else {
            assert_eq!(
                (&row["bill_currency"], in_bill),
                (&Value::from("USD"), micros(&row["amortized_cost"]))
            );
        }
    }
    assert_eq!(by_provider["totals"][0]["bill_currency"], "", "four bills in two currencies: no one figure");
    // The accounts: the one id four times, once per provider.
    let accounts = json(&["report", "accounts", "--period", "2026-10", "--format", "json"]);
    let shared_rows: Vec<&str> = accounts["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["account"] == shared)
        .map(|r| r["provider"].as_str().unwrap())
        .collect();
    assert_eq!(shared_rows, ["aws", "azure", "gcp", "oci"], "{accounts}");
    // Narrowed to Google, the range is Google's account alone.
    let gcp = json(&["report", "accounts", "--period", "2026-10", "--provider", "gcp", "--format", "json"]);
    let gcp_rows = gcp["rows"].as_array().unwrap();
    assert_eq!(gcp_rows.len(), 1, "{gcp}");
    let gcp_row = rows.iter().find(|r| r["provider"] == "gcp").unwrap();
    assert_eq!(micros(&gcp_rows[0]["amortized_cost"]), micros(&gcp_row["amortized_cost"]));
}

/// Σ a GKE bill's effective cost over the namespaces starting with `prefix`, nano-units.
fn gke(gcp: &Value, prefix: &str) -> i64 {
    gcp["by_namespace"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .map(|(_, v)| truth_nanos(v))
        .sum()
}

/// Azurite's Blob service on a free loopback port, stopped by its process id when dropped.
struct Azurite {
    child: std::process::Child,
    endpoint: String,
    _data: tempfile::TempDir,
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The emulator's well-known account and key (public, in Microsoft's documentation).
const AZURITE_ACCOUNT: &str = "devstoreaccount1";
const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Starts Azurite (`scripts/test` installs it from npm), or `None`, the test skipped with a
/// word, when it is not installed.
fn start_azurite() -> Option<Azurite> {
    let candidates = [
        std::env::var("GPULEDGER_AZURITE_BLOB").ok().map(PathBuf::from),
        std::env::var("HOME")
            .ok()
            .map(|h| Path::new(&h).join(".cache/gpuledger-azurite/node_modules/.bin/azurite-blob")),
    ];
    let Some(binary) = candidates.into_iter().flatten().find(|p| p.is_file()) else {
        eprintln!("azurite not installed: Azure Blob test skipped (scripts/test installs it)");
        return None;
    };
    let port = crate::s3::free_port();
    let data = tempfile::tempdir().unwrap();
    let child = std::process::Command::new(binary)
        .args([
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            &port.to_string(),
            "--inMemoryPersistence",
            "--silent",
        ])
        .args(["--skipApiVersionCheck", "--debug", &data.path().join("debug.log").display().to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let azurite =
        Azurite { child, endpoint: format!("http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"), _data: data };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "azurite did not start on port {port}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Some(azurite)
}

/// HMAC-SHA256, for the Shared Key signature of the one request the object-store client
/// does not make (creating a container).
fn hmac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let mut block = [0u8; 64];
    block[..key.len()].copy_from_slice(key);
    let pad = |byte: u8| block.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let mut inner = Sha256::new();
    inner.update(pad(0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(pad(0x5c));
    outer.update(inner.finalize().as_slice());
    outer.finalize().as_slice().to_vec()
}

/// Creates a container with a Shared Key-signed `PUT ?restype=container`.
async fn create_container(endpoint: &str, container: &str) {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD;
    let date = chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S GMT").to_string();
    let version = "2021-08-06";
    let resource = format!("/{AZURITE_ACCOUNT}/{AZURITE_ACCOUNT}/{container}\nrestype:container");
    let to_sign = format!("PUT\n{}x-ms-date:{date}\nx-ms-version:{version}\n{resource}", "\n".repeat(11));
    let signature = engine.encode(hmac_sha256(&engine.decode(AZURITE_KEY).unwrap(), to_sign.as_bytes()));
    let response = reqwest::Client::new()
        .put(format!("{endpoint}/{container}?restype=container"))
        .header("x-ms-date", date)
        .header("x-ms-version", version)
        .header("Content-Length", "0")
        .header("Authorization", format!("SharedKey {AZURITE_ACCOUNT}:{signature}"))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "creating {container}: {:?}", response.text().await);
}

/// An Azure export read from Blob Storage (#40, item 2): the generated AKS bill's export runs
/// uploaded to a container in Azurite, Microsoft's emulator, through the same object-store
/// client gpuledger reads with, then `ingest focus az://…` with the account's key in the
/// environment: the same bill as from a folder, the month-to-date run replaced by the final
/// one; a container that does not exist is refused with its name, and no key is printed.
#[tokio::test]
async fn an_azure_export_is_read_from_blob_storage_through_the_real_client() {
    use gpuledger::synth::clouds::Provider;
    use object_store::ObjectStoreExt;
    let Some(azurite) = start_azurite() else { return };
    let (dir, _, truth) = three_cloud_world(&[Provider::Aws, Provider::Azure]);
    create_container(&azurite.endpoint, "exports").await;
    let blobs = object_store::azure::MicrosoftAzureBuilder::new()
        .with_account(AZURITE_ACCOUNT)
        .with_access_key(AZURITE_KEY)
        .with_container_name("exports")
        .with_endpoint(azurite.endpoint.clone())
        .with_allow_http(true)
        .build()
        .unwrap();
    let root = dir.path().join("azure");
    let mut pending = vec![root.clone()];
    let mut uploaded = 0;
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let key = format!("focus-exports/{}", path.strip_prefix(&root).unwrap().display());
            let bytes = std::fs::read(&path).unwrap();
            blobs.put(&object_store::path::Path::from(key), bytes.into()).await.unwrap();
            uploaded += 1;
        }
    }
    assert_eq!(uploaded, 4, "two runs, each a manifest and a part");

    let db = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let gl = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_gpuledger"))
            .args(["--database-url", db.as_str()])
            .args(args)
            .env("AZURE_STORAGE_ACCOUNT_NAME", AZURITE_ACCOUNT)
            .env("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY)
            .env("RUST_LOG", "warn")
            .output()
            .unwrap()
    };
    let rate = gl(&["fx", "set", "EUR", "USD", "1.0842", "--from", "2020-01"]);
    assert!(rate.status.success(), "{}", String::from_utf8_lossy(&rate.stderr));
    let out = gl(&["ingest", "focus", "az://exports/focus-exports", "--endpoint-url", &azurite.endpoint]);
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{said}");
    assert!(!said.contains(AZURITE_KEY));
    let store = helpers::connect(&db).await;
    let from_blob = store.bills(Some("2026-10")).await.unwrap();
    assert_eq!(from_blob.len(), 1);
    let expected = &truth["periods"]["2026-10"]["providers"]["azure"];
    assert_eq!(from_blob[0].provider, "azure");
    assert_eq!(from_blob[0].currency, "EUR");
    assert_eq!(from_blob[0].effective_nanos, truth_nanos(&expected["effective_total"]));
    assert_eq!(from_blob[0].rows_read, expected["rows"].as_i64().unwrap(), "the final run, not the 15th's");
    assert!(from_blob[0].source.starts_with("az://exports/focus-exports/"), "{}", from_blob[0].source);

    // A container that does not exist: refused, named, nothing changed.
    let before = snapshot(store.as_ref()).await;
    let out = gl(&["ingest", "focus", "az://missing/focus-exports", "--endpoint-url", &azurite.endpoint]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(said.contains("az://missing/focus-exports"), "{said}");
    assert!(!said.contains(AZURITE_KEY));
    assert_eq!(snapshot(store.as_ref()).await, before);
}

/// #69: nothing counted twice, nothing written before every check. Each way the same rows
/// arrive again in other bytes (Azure's part gzipped again as another part, Oracle's `.csv`
/// beside its `.csv.gz`, a row repeated inside a file, one row repeated 200,000 times), a short
/// Azure part (fewer rows than its manifest's `dataRowCount`), a bill in a currency without a
/// rate, and a re-delivery whose stored days rise by more than half: each refused naming the
/// file and rows, exit non-zero, the database as it was.
#[tokio::test]
async fn the_same_rows_again_a_short_part_or_a_bill_without_a_rate_are_refused_before_any_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let store = helpers::connect(&db).await;
    let csv = |rows: &[(&str, &str, &str, &str, &str)]| {
        let path = dir.path().join("scratch.csv");
        write_bills(&path, rows);
        std::fs::read_to_string(&path).unwrap()
    };
    let eur = |day: &'static str, cost: &'static str| ("Microsoft", "EUR", day, "Usage", cost);
    let ingest = |source: &Path, extra: &[&str]| {
        let source = source.display().to_string();
        let mut args = vec!["--database-url", db.as_str(), "ingest", "focus", source.as_str()];
        args.extend_from_slice(extra);
        run(&args)
    };
    let refused = |out: &std::process::Output, said: &[&str]| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "must be refused: {stderr}");
        for text in said {
            assert!(stderr.contains(text), "{text:?} in {stderr}");
        }
    };

    // A bill in euros with no rate in force: refused before anything is written.
    let first = csv(&[eur("2026-10-05T00:00:00Z", "10.00"), eur("2026-10-06T00:00:00Z", "20.00")]);
    let plain = dir.path().join("first.csv");
    std::fs::write(&plain, &first).unwrap();
    let empty = snapshot(store.as_ref()).await;
    refused(
        &ingest(&plain, &[]),
        &[
            "billed in EUR",
            "no exchange rate from EUR to USD",
            "nothing was written",
            "fx set EUR USD RATE --from 2026-10",
        ],
    );
    assert_eq!(snapshot(store.as_ref()).await, empty);
    assert!(store.bills(None).await.unwrap().is_empty());
    let rate = run(&["--database-url", &db, "fx", "set", "EUR", "USD", "1.0842", "--from", "2026-10"]);
    assert!(rate.status.success(), "{}", String::from_utf8_lossy(&rate.stderr));

    // Azure's run: two parts; the second is the first gzipped again at another level.
    let run_folder = dir.path().join("azure/exports/focus-daily/20261001-20261031/run-1");
    std::fs::create_dir_all(&run_folder).unwrap();
    // Each run a new one (a new runId: the delivery's data version).
    let runs = std::cell::Cell::new(0);
    let azure_run = |parts: &[(&str, Vec<u8>, usize)]| {
        runs.set(runs.get() + 1);
        for entry in std::fs::read_dir(&run_folder).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        let mut blobs = Vec::new();
        for (name, bytes, rows) in parts {
            std::fs::write(run_folder.join(name), bytes).unwrap();
            blobs.push(serde_json::json!({
                "blobName": format!("exports/focus-daily/20261001-20261031/run-1/{name}"),
                "byteCount": bytes.len(),
                "dataRowCount": rows,
            }));
        }
        let manifest = serde_json::json!({
            "exportConfig": {"exportName": "focus-daily", "type": "FocusCost", "dataVersion": "1.2-preview"},
            "runInfo": {"runId": format!("run-{}", runs.get()), "submittedTime": "2026-10-07T06:00:00Z"},
            "blobs": blobs,
        });
        std::fs::write(run_folder.join("manifest.json"), manifest.to_string()).unwrap();
    };
    let gzipped = |text: &str, level: u32| {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
        std::io::Write::write_all(&mut encoder, text.as_bytes()).unwrap();
        encoder.finish().unwrap()
    };
    let azure = dir.path().join("azure");
    azure_run(&[("part_0_0001.csv.gz", gzipped(&first, 6), 2)]);
    let ok = ingest(&azure, &[]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let billed = bills(store.as_ref()).await;
    assert_eq!(billed[0].3, 30_000_000_000, "EUR 30.00 billed");
    let before = snapshot(store.as_ref()).await;

    azure_run(&[
        ("part_0_0001.csv.gz", gzipped(&first, 6), 2),
        ("part_1_0001.csv.gz", gzipped(&first, 1), 2),
    ]);
    refused(
        &ingest(&azure, &[]),
        &[
            "part_1_0001.csv.gz: data row 1 is data row 1 of",
            "part_0_0001.csv.gz again",
            "would count its cost twice",
        ],
    );
    assert_eq!(snapshot(store.as_ref()).await, before, "the same rows in other bytes");

    // A short part: the manifest says 3 rows, the file holds 2.
    azure_run(&[("part_0_0001.csv.gz", gzipped(&first, 6), 3)]);
    refused(
        &ingest(&azure, &[]),
        &["part_0_0001.csv.gz", "holds 2 data rows, but the export's manifest says 3"],
    );
    assert_eq!(snapshot(store.as_ref()).await, before, "a short delivery");

    // A row repeated inside one file, apart from its first place, and forced: still refused.
    let repeated = format!("{first}{}", first.lines().nth(1).unwrap());
    azure_run(&[("part_0_0001.csv.gz", gzipped(&repeated, 6), 3)]);
    refused(
        &ingest(&azure, &["--force"]),
        &["part_0_0001.csv.gz: data row 3 is data row 1 of the same file again"],
    );
    assert_eq!(snapshot(store.as_ref()).await, before, "a repeated row");

    // One row 200,000 times: refused at its second row.
    let line = first.lines().nth(1).unwrap();
    let mut flood = first.lines().next().unwrap().to_string();
    for _ in 0..200_000 {
        flood.push('\n');
        flood.push_str(line);
    }
    azure_run(&[("part_0_0001.csv.gz", gzipped(&flood, 6), 200_000)]);
    refused(&ingest(&azure, &[]), &["data row 2 is data row 1 of the same file again"]);
    assert_eq!(snapshot(store.as_ref()).await, before, "a flood of one row");

    // An October run filed under September's date range.
    let september = dir.path().join("azure-september/exports/focus-daily/20260901-20260930/run-9");
    std::fs::create_dir_all(&september).unwrap();
    std::fs::write(september.join("part_0_0001.csv.gz"), gzipped(&first, 6)).unwrap();
    let manifest = serde_json::json!({
        "exportConfig": {"exportName": "focus-daily", "type": "FocusCost", "dataVersion": "1.2-preview"},
        "runInfo": {"runId": "run-9", "submittedTime": "2026-10-07T06:00:00Z"},
        "blobs": [{"blobName": "exports/focus-daily/20260901-20260930/run-9/part_0_0001.csv.gz", "dataRowCount": 2}],
    });
    std::fs::write(september.join("manifest.json"), manifest.to_string()).unwrap();
    refused(
        &ingest(&dir.path().join("azure-september"), &[]),
        &["lies in the date range of 2026-09, but holds azure acct-Microsoft's bill of 2026-10"],
    );
    assert_eq!(snapshot(store.as_ref()).await, before, "a run under another month's range");

    // Oracle's report as `.csv` beside its `.csv.gz`.
    let oci = dir.path().join("oci/FOCUS Reports/2026/10/05");
    std::fs::create_dir_all(&oci).unwrap();
    let oracle = csv(&[("Oracle", "USD", "2026-10-05T00:00:00Z", "Usage", "195.42")]);
    std::fs::write(oci.join("reports_cost-csv_0001.csv.gz"), gzipped(&oracle, 6)).unwrap();
    std::fs::write(oci.join("reports_cost-csv_0001.csv"), &oracle).unwrap();
    refused(&ingest(&dir.path().join("oci"), &[]), &["data row 1 is data row 1 of", "again"]);
    assert_eq!(snapshot(store.as_ref()).await, before, "Oracle's .csv beside its .csv.gz");

    // The days already stored billed again under new rows (another charge on the 5th): refused
    // past +50 % of what they had, unless forced; the stored bill's last day may still be
    // filling (the 6th is left out), and a new day is no rise.
    let doubled = csv(&[
        eur("2026-10-05T00:00:00Z", "10.00"),
        eur("2026-10-06T00:00:00Z", "20.00"),
        eur("2026-10-05T00:00:00Z", "12.00"),
        eur("2026-10-07T00:00:00Z", "5.00"),
    ]);
    azure_run(&[("part_0_0001.csv.gz", gzipped(&doubled, 6), 4)]);
    refused(&ingest(&azure, &[]), &["from EUR 10.00 to EUR 22.00, 120.00 % more", "--max-rise", "--force"]);
    assert_eq!(snapshot(store.as_ref()).await, before, "a rise of the stored days");
    let grown = csv(&[
        eur("2026-10-05T00:00:00Z", "10.00"),
        eur("2026-10-06T00:00:00Z", "20.00"),
        eur("2026-10-07T00:00:00Z", "5.00"),
    ]);
    azure_run(&[("part_0_0001.csv.gz", gzipped(&grown, 6), 3)]);
    let ok = ingest(&azure, &[]);
    assert!(ok.status.success(), "a month to date grows: {}", String::from_utf8_lossy(&ok.stderr));
    assert_eq!(bills(store.as_ref()).await[0].3, 35_000_000_000);

    // A rate a million times the one in force: refused unless confirmed, the rates unchanged.
    let rates = store.fx_rates().await.unwrap();
    let typo = run(&["--database-url", &db, "fx", "set", "EUR", "USD", "1000000", "--from", "2026-11"]);
    refused(
        &typo,
        &["1 EUR = 1000000 USD from 2026-11 is +92233805.18 % above", "1 EUR = 1.0842 USD", "--confirm"],
    );
    assert_eq!(store.fx_rates().await.unwrap(), rates);
    let sure =
        run(&["--database-url", &db, "fx", "set", "EUR", "USD", "1.2", "--from", "2026-11", "--confirm"]);
    assert!(sure.status.success(), "{}", String::from_utf8_lossy(&sure.stderr));
}

/// An AWS payer billed through FOCUS alone (no CUR): `report capacity` counts its GPU machines
/// once, each pool's peak the bill's GPU-hours of its busiest day / 24 (before, the capacity
/// rows compute derives from the bill were counted beside the bill's own charges: twice)
/// (issue 70).
#[tokio::test]
async fn an_aws_payer_billed_through_focus_alone_is_capacity_once() {
    use gpuledger::synth::clouds::Provider;
    let (dir, generate, _truth) = cloud_world(&[Provider::Aws], None);
    let db = format!("sqlite:{}", dir.path().join("focus-aws.db").display());
    let gl = |args: &[&str]| {
        let mut all = vec!["--database-url", db.as_str()];
        all.extend_from_slice(args);
        let out = run(&all);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let source = dir.path().join(&generate.prefix).join(gpuledger::synth::focus_export_name(&generate));
    gl(&["ingest", "focus", &source.display().to_string()]);
    gl(&["compute", "--period", "2026-10"]);
    let store = helpers::connect(&db).await;
    assert!(store.cost_period("2026-10").await.unwrap().is_none(), "no CUR");
    // The bill's GPU-hours per pool (model and purchase option) and day.
    let mut days: std::collections::BTreeMap<(String, i64), f64> = Default::default();
    for c in store.bill_charges("2026-10", Some("aws")).await.unwrap() {
        if c.charge_category == "Usage" && !c.gpu_model.is_empty() && c.gpu_hours > 0.0 {
            let option = gpuledger::store::PurchaseOption::of_pricing_category(&c.pricing_category);
            *days.entry((format!("{} {option}", c.gpu_model), c.day)).or_default() += c.gpu_hours;
        }
    }
    assert!(!days.is_empty());
    let report: Value = serde_json::from_slice(&gl(&["report", "capacity", "--format", "json"])).unwrap();
    let pools: Vec<&Value> =
        report["pools"].as_array().unwrap().iter().filter(|p| p["provider"] == "aws").collect();
    let names: std::collections::BTreeSet<&str> = days.keys().map(|(pool, _)| pool.as_str()).collect();
    assert_eq!(
        pools.iter().map(|p| p["pool"].as_str().unwrap()).collect::<std::collections::BTreeSet<_>>(),
        names
    );
    for pool in pools {
        let name = pool["pool"].as_str().unwrap();
        let peak = days.iter().filter(|((p, _), _)| p == name).map(|(_, h)| h / 24.0).fold(0.0, f64::max);
        assert!((pool["gpus_peak"].as_f64().unwrap() - peak).abs() < 1e-6, "{pool} against {peak}");
    }
    // The fleet's capacity rows are the bill's days, not its month on the 1st: per pool and
    // day the bill's GPU-hours, so a range of days (the GPUs page's `from`/`to`) holds what
    // those days billed.
    let rollups = store.rollups("2026-10").await.unwrap().unwrap();
    let mut fleet: std::collections::BTreeMap<(String, i64), f64> = Default::default();
    for c in rollups.capacity.iter().filter(|c| c.provider == "aws" && c.is_gpu()) {
        *fleet.entry((format!("{} {}", c.gpu_model, c.purchase_option), c.day)).or_default() +=
            c.gpu_hours_provisioned;
    }
    fleet.retain(|_, hours| *hours > 0.0);
    assert_eq!(fleet.keys().collect::<Vec<_>>(), days.keys().collect::<Vec<_>>());
    for (key, hours) in &days {
        assert!((fleet[key] - hours).abs() < 1e-6, "{key:?}: {} against the bill's {hours}", fleet[key]);
    }
    // October 8 to 14: what the GPUs page's range of days reads.
    let (from, to) = (1_791_417_600, 1_792_022_400);
    let week: f64 =
        days.iter().filter(|((_, day), _)| (from..to).contains(day)).map(|(_, hours)| hours).sum();
    assert!(week > 0.0);
    let range = gpuledger::report::rollup::RollupRange::load(
        store.as_ref(),
        &gpuledger::auth::Scope::All,
        "2026-10-08/2026-10-15".into(),
        from,
        to,
    )
    .await
    .unwrap();
    let in_range: f64 = range.capacity().filter(|c| c.is_gpu()).map(|c| c.gpu_hours_provisioned).sum();
    assert!((in_range - week).abs() < 1e-6, "{in_range} GPU-hours against the bill's week of {week}");
}
