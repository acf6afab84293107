//! One ledger (issue 70): on the generator's four-cloud month and on each provider's month
//! alone, on SQLite and on Postgres, every page tells the same month. The Overview's cards
//! are the sums of their breakdowns (spend and the GPU fleet by provider, idle GPU cost by
//! GPU model and account, or "not measured" where no GPU-hour was); each provider's row is its bills alone, in dollars and in the bill's currency;
//! the Costs, GPUs and Clients pages tie to the same totals; no unallocated, idle or unused
//! amount is negative; AWS's FOCUS export of the CUR's own bill is not counted twice.

use gpuledger::synth::clouds::Provider;
use serde_json::Value;

use crate::helpers;
use crate::ingest_cur::run;
use crate::ingest_focus::{cloud_world, euro_rate};

/// Dollars (or euros) as a page's twin writes them: a decimal string, `$1,234.56`, a number.
fn amount(value: &Value) -> f64 {
    match value {
        Value::String(text) => {
            let figure = text.split_whitespace().next().unwrap_or("");
            figure.replace(['$', ','], "").parse().unwrap_or_else(|_| panic!("{text} is not an amount"))
        }
        Value::Null => 0.0,
        other => other.as_f64().unwrap_or_else(|| panic!("{other} is not an amount")),
    }
}

/// Every amount under a key naming what cannot be negative (unallocated, idle, unused cost),
/// and every `-0.0`, anywhere in a page's twin.
fn negatives(value: &Value, key: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                negatives(v, k, found);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| negatives(v, key, found)),
        // A float sum of nothing is −0, which JSON prints as `-0.0`: nothing prints so.
        Value::Number(n) if n.as_f64().is_some_and(|x| x == 0.0 && x.is_sign_negative()) => {
            found.push(format!("{key} = -0.0"));
        }
        Value::String(_) | Value::Number(_)
            if ["unallocated", "idle", "unused"].iter().any(|w| key.contains(w)) =>
        {
            let text = value.as_str().map_or_else(|| value.to_string(), str::to_string);
            if text.replace(['$', ','], "").parse::<f64>().is_ok_and(|n| n < 0.0) {
                found.push(format!("{key} = {text}"));
            }
        }
        _ => {}
    }
}

fn rows<'a>(page: &'a Value, table: &str) -> &'a Vec<Value> {
    page[table]["rows"].as_array().unwrap_or_else(|| panic!("no table {table}: {page}"))
}

/// Ingests `providers`' October (the CUR for AWS, with AWS's FOCUS export of it too in the
/// four-cloud world) into `database`, computes it, and checks every identity.
async fn one_month(providers: &[Provider], database: &str) {
    let (dir, generate, _truth) = cloud_world(providers, None);
    let gl = |args: &[&str]| -> Vec<u8> {
        let out = run(&[&["--database-url", database], args].concat());
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let store = helpers::connect(database).await;
    euro_rate(store.as_ref()).await;
    let names: Vec<&str> = providers.iter().map(|p| p.id()).collect();
    for provider in providers {
        if *provider == Provider::Aws {
            gl(&[
                "ingest",
                "cur",
                &dir.path().join(&generate.prefix).join(&generate.export_name).display().to_string(),
            ]);
            if providers.len() > 1 {
                let twin =
                    dir.path().join(&generate.prefix).join(gpuledger::synth::focus_export_name(&generate));
                gl(&["ingest", "focus", &twin.display().to_string()]);
            }
        } else {
            gl(&["ingest", "focus", &dir.path().join(provider.id()).display().to_string()]);
        }
    }
    gl(&["compute", "--period", "2026-10"]);
    let web = gpuledger::web::AppState::new(store, gpuledger::web::AuthConfig::off());
    let page = |uri: String| {
        let web = web.clone();
        async move {
            let (status, body) = crate::web::get(&web, &uri).await;
            assert_eq!(status, axum::http::StatusCode::OK, "{uri}: {body}");
            serde_json::from_str::<Value>(&body).unwrap()
        }
    };
    let overview = page("/?period=2026-10&format=json".into()).await;
    // The breakdown by provider (the Overview shows it once there are two).
    let report: Value =
        serde_json::from_slice(&gl(&["report", "providers", "--period", "2026-10", "--format", "json"]))
            .unwrap();
    let by_provider = report["rows"].as_array().unwrap_or_else(|| panic!("no rows: {report}"));
    if names.len() > 1 {
        // The page writes dollars as decimal strings, the command as numbers: the same figures.
        let shown = rows(&overview, "providers");
        assert_eq!(shown.len(), by_provider.len());
        for (page_row, row) in shown.iter().zip(by_provider) {
            for column in ["amortized_cost", "gpu_fleet_cost", "amortized_in_bill_currency"] {
                assert_eq!(amount(&page_row[column]), amount(&row[column]), "{column}: {page_row} {row}");
            }
        }
    } else {
        assert!(overview.get("providers").is_none(), "{overview}");
    }
    let listed: Vec<&str> = by_provider.iter().map(|r| r["provider"].as_str().unwrap()).collect();
    assert_eq!(listed, names, "{names:?}: a row per provider");
    let sum = |rows: &[Value], column: &str| -> f64 { rows.iter().map(|r| amount(&r[column])).sum() };
    let cents = |a: f64, b: f64| (a - b).abs() < 0.005 + 1e-9;
    // The cards are their breakdowns' sums (the card rounded to the cent).
    let card = |label: &str| -> f64 {
        let card = overview["cards"].as_array().unwrap().iter().find(|c| c["label"] == label);
        amount(&card.unwrap_or_else(|| panic!("no card {label}: {overview}"))["value"])
    };
    let spend = sum(by_provider, "amortized_cost");
    assert!(spend > 0.0);
    assert!(cents(card("Total spend (amortized bill)"), spend), "{names:?}: spend card against {spend}");
    assert!((amount(&report["amortized_total"]) - spend).abs() < 1e-6);
    let fleet = sum(by_provider, "gpu_fleet_cost");
    assert!(fleet > 0.0 && cents(card("GPU fleet cost"), fleet), "{names:?}: fleet card against {fleet}");
    let gpus = page("/gpus?period=2026-10&format=json".into()).await;
    let all: Vec<Value> = rows(&gpus, "gpu").iter().filter(|r| r["namespace"] == "(all)").cloned().collect();
    let month = rows(&overview, "trend").iter().find(|r| r["month"] == "2026-10").unwrap();
    let idle = overview["cards"].as_array().unwrap().iter().find(|c| c["label"] == "Idle GPU cost").unwrap();
    if all.iter().all(|r| r["utilization"].is_null()) {
        // No GPU-hour has a utilization series (these worlds have no DCGM metrics): idle cost
        // is not known, so it is said, never $0.00.
        assert!(idle["value"].as_str().unwrap().starts_with("not measured"), "{idle}");
        assert!(all.iter().all(|r| r["idle_cost"].is_null()), "{names:?}: {all:?}");
        assert!(month["idle_cost"].is_null() && month["idle_accelerator_cost"].is_null(), "{month}");
    } else {
        assert!(
            cents(card("Idle GPU cost"), sum(&all, "idle_cost")),
            "{names:?}: idle card against the models'"
        );
        if let Some(accounts) = gpus["accounts"]["rows"].as_array() {
            let by_account = sum(accounts, "idle_cost");
            assert!((by_account - sum(&all, "idle_cost")).abs() < 1e-5, "{names:?}: idle by account");
        }
    }
    // The trend's month is one definition: its parts are its spend, none negative.
    let parts = ["gpu_fleet_cost", "cpu_and_memory_cost", "storage_cost", "network_cost", "other_cost"];
    let summed: f64 = parts.iter().map(|c| amount(&month[*c])).sum();
    assert!((summed - amount(&month["spend"])).abs() < 1e-5 && cents(summed, spend), "{names:?}: {month}");
    // Each provider's row is its bills alone: in dollars as `report bill --provider` bridges
    // them, and in the bill's currency as the bills say it.
    for row in by_provider {
        let provider = row["provider"].as_str().unwrap();
        let bill: Value = serde_json::from_slice(&gl(&[
            "report",
            "bill",
            "--period",
            "2026-10",
            "--provider",
            provider,
            "--format",
            "json",
        ]))
        .unwrap();
        assert!((amount(&row["amortized_cost"]) - amount(&bill["amortized_total"])).abs() < 1e-6, "{row}");
        let counted: Vec<&Value> = bill["bills"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["format"] == "cur" || !(provider == "aws" && names.len() > 1))
            .collect();
        assert_eq!(counted.len(), 1, "{provider}: {bill}");
        assert_eq!(row["bill_currency"], counted[0]["currency"], "{row}");
        assert!(
            (amount(&row["amortized_in_bill_currency"]) - amount(&counted[0]["effective_total"])).abs()
                < 1e-6,
            "{provider}: {row} against its bill {}",
            counted[0]
        );
    }
    // The Costs page's accounts, the GPUs page's models and the Clients page tie to the same.
    let costs = page("/costs?period=2026-10&format=json".into()).await;
    let totals = costs["costs"]["totals"].as_array().unwrap();
    let billed = totals.iter().find(|t| t["namespace"] == "Bill (amortized)").unwrap();
    assert!((amount(&billed["total_cost"]) - spend).abs() < 1e-5, "{names:?}: the Costs page's bill");
    let parts: f64 = totals
        .iter()
        .filter(|t| t["namespace"] != "Bill (amortized)")
        .map(|t| amount(&t["total_cost"]))
        .sum();
    assert!((parts - spend).abs() < 1e-5, "{names:?}: Kubernetes + not allocated + other = the bill");
    if let Some(accounts) = costs["accounts"]["rows"].as_array() {
        assert!((sum(accounts, "amortized_cost") - spend).abs() < 1e-5, "{names:?}: the accounts");
    }
    assert!((sum(&all, "gpu_fleet_cost") - fleet).abs() < 1e-5, "{names:?}: GPU models' fleet");
    let hours: f64 = by_provider.iter().map(|r| r["gpu_hours"].as_f64().unwrap()).sum();
    assert!((sum(&all, "provisioned_gpu_hours") - hours).abs() < 1e-6, "{names:?}: provisioned GPU-hours");
    let clients = page("/clients?period=2026-10&format=json".into()).await;
    let charged =
        sum(rows(&clients, "clients"), "direct_cost") + sum(rows(&clients, "clients"), "shared_cost");
    assert!((charged - spend).abs() < 1e-5, "{names:?}: clients' direct + shared {charged} against {spend}");
    // Nothing that cannot be negative is, on any of them.
    let mut found = Vec::new();
    for twin in [&overview, &gpus, &costs, &clients] {
        negatives(twin, "", &mut found);
    }
    assert!(found.is_empty(), "{names:?}: {found:?}");
}

/// The four-cloud month, then each provider's alone, each in a database of its own.
async fn every_month(postgres: bool) {
    let dir = tempfile::tempdir().unwrap();
    let worlds = std::iter::once(Provider::ALL.to_vec()).chain(Provider::ALL.iter().map(|p| vec![*p]));
    for (i, world) in worlds.enumerate() {
        let fresh = if postgres { helpers::fresh_postgres().await } else { None };
        let url = match &fresh {
            Some(database) => database.url.clone(),
            None => format!("sqlite:{}", dir.path().join(format!("ledger{i}.db")).display()),
        };
        one_month(&world, &url).await;
    }
}

#[tokio::test]
async fn every_page_tells_the_same_month_for_four_clouds_and_each_alone_on_sqlite() {
    every_month(false).await;
}

#[tokio::test]
async fn every_page_tells_the_same_month_for_four_clouds_and_each_alone_on_postgres() {
    if helpers::fresh_postgres().await.is_none() {
        eprintln!("skipped: {} is not set", helpers::POSTGRES_URL_VAR);
        return;
    }
    every_month(true).await;
}
