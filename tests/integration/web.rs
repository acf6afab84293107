//! The web edge through `router()` and `oneshot`, no socket: the home page says plainly when
//! the database is empty, and lists what an ingest wrote (with its JSON twin).

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use gpuledger::money::format_usd;
use gpuledger::synth::{CurFormat, Scale};
use gpuledger::web::{AppState, router};
use http_body_util::BodyExt;
use tower::ServiceExt;

use crate::app::Amount;
use crate::ingest_cur::{export_root, generate, ingest};

pub(crate) async fn get(state: &AppState, uri: &str) -> (StatusCode, String) {
    let response = router(state.clone())
        .oneshot(Request::builder().uri(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn the_home_page_says_when_the_database_is_empty_and_lists_what_was_ingested() {
    let app = crate::app::TestApp::empty().await;
    assert_eq!(app.json("/healthz").await["database"], "sqlite");
    assert!(app.page("/data").await.contains("The database is empty"));

    generate(app.data(), Scale::Demo, CurFormat::Parquet, 1, 41);
    ingest(app.store(), &export_root(app.data()).display().to_string(), false).await;
    let summary = app.store().periods().await.unwrap().remove(0);
    let state = app.state.clone();
    let (_, page) = get(&state, "/data").await;
    assert!(!page.contains("The database is empty"));
    assert!(page.contains(">Oct 2026</a></td>"), "{page}");
    // The bill total as people read it, e.g. $108,138.71.
    assert!(page.contains(&format_usd(summary.bill_amortized_micros)), "{page}");
    assert!(page.contains("succeeded"));

    let (_, json) = get(&state, "/data?format=json").await;
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["periods"][0]["period"], "2026-10");
    // Money in JSON is a USD decimal string, exact to the micro-dollar.
    assert_eq!(
        json["periods"][0]["bill_amortized"].as_str().unwrap(),
        gpuledger::money::usd_decimal(summary.bill_amortized_micros)
    );
    assert!(
        json["ingest_runs"][0]["reconciliation"]["bill_amortized_total"].is_string(),
        "an object, not text"
    );
    assert_eq!(json["ingest_runs"][0]["status"], "succeeded");
    // The newest period's bill, tied out: the bridge's amortized step is the stored bill,
    // and the page shows the bridge.
    let bill = &json["bill"];
    assert_eq!(bill["period"], "2026-10");
    assert_eq!(bill["amortized_total"], json["periods"][0]["bill_amortized"]);
    let step = |name: &str| bill["bridge"].as_array().unwrap().iter().find(|s| s["step"] == name).cloned();
    assert_eq!(step("Amortized cost").unwrap()["amount"], bill["amortized_total"]);
    assert!(step("Net amortized cost with tax").is_some(), "{bill}");
    assert!(page.contains("The bill of Oct 2026, tied out"), "{page}");
    assert_foots(&page);

    // Any stored month ties out on the page, against its AWS invoice; its column foots.
    generate(app.data(), Scale::Demo, CurFormat::Parquet, 2, 41);
    ingest(app.store(), &export_root(app.data()).display().to_string(), false).await;
    let (_, json) = get(&state, "/data?period=2026-09&format=json").await;
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["bill"]["period"], "2026-09");
    let invoice = json["bill"]["invoices"][0]["invoice_id"].as_str().unwrap().to_string();
    let (_, page) = get(&state, "/data?period=2026-09").await;
    assert!(page.contains("The bill of Sep 2026, tied out"), "{page}");
    assert!(page.contains(&format!("AWS invoice {invoice} (")), "{invoice} in {page}");
    assert_foots(&page);
    let (status, _) = get(&state, "/data?period=2025-01").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a month not stored");
}

/// The bridge on the Data page foots as printed: each subtotal is the one before it plus the
/// steps between them, to the cent.
fn assert_foots(page: &str) {
    let section = page.split("id=\"bridge-heading\"").nth(1).unwrap().split("</table>").next().unwrap();
    let cents = |text: &str| -> i64 {
        let amount = text.split('$').nth(1).unwrap().split('<').next().unwrap().replace(',', "");
        let negative = text.contains("-$");
        let value: gpuledger::money::Cents = amount.parse().unwrap();
        if negative { -value.0 } else { value.0 }
    };
    let (mut subtotal, mut running, mut checked) = (None::<i64>, 0i64, 0);
    for row in section.split("<tr").skip(2) {
        if row.contains("net_* columns") {
            continue;
        }
        let amount = cents(row.split("class=\"num\"").nth(1).unwrap());
        if row.starts_with(" class=\"subtotal\"") {
            if let Some(before) = subtotal {
                assert_eq!(before + running, amount, "the steps above {row} add up to it");
                checked += 1;
            }
            subtotal = Some(amount);
            running = 0;
        } else {
            running += amount;
        }
    }
    assert!(checked >= 2, "subtotals checked: {checked} in {section}");
}

/// GET with headers, returning status, response headers and the body bytes.
async fn get_with(
    state: &AppState,
    uri: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let mut request = Request::builder().uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = router(state.clone()).oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
    let (parts, body) = response.into_parts();
    (parts.status, parts.headers, body.collect().await.unwrap().to_bytes().to_vec())
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

#[tokio::test]
async fn costs_reconcile_each_namespace_to_truth_and_to_the_bill() {
    use crate::engine::close;
    let app = crate::app::TestApp::demo().await;
    let state = app.state.clone();
    let truth = app.truth("2026-10");

    // Costs: each namespace to the cent, the Kubernetes total, other AWS cost and the bill.
    let (status, body) = get(&state, "/costs?period=2026-10&format=json").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let costs = json(&body);
    let rows = costs["costs"]["rows"].as_array().unwrap();
    for (namespace, t) in truth["namespaces"].as_object().unwrap() {
        let row = rows.iter().find(|r| r["namespace"] == namespace.as_str()).unwrap();
        close(row["total_cost"].amount(), t["total_cost"].amount(), namespace);
    }
    // Totals sit beside the rows, so the rows alone add up to the Kubernetes total.
    assert_eq!(rows.len(), truth["namespaces"].as_object().unwrap().len(), "rows hold namespaces only");
    let totals = costs["costs"]["totals"].as_array().unwrap();
    let line = |label: &str| totals.iter().find(|r| r["namespace"] == label).unwrap()["total_cost"].amount();
    let row_sum: f64 = rows.iter().map(|r| r["total_cost"].amount()).sum();
    close(row_sum, line("Kubernetes total"), "rows add up to the Kubernetes total");
    close(line("Kubernetes total"), truth["kubernetes_allocated_cost"].amount(), "Kubernetes total");
    close(line("Bill (amortized)"), truth["bill_amortized"].amount(), "bill");
    close(line("EC2 not allocated to pods"), truth["unallocated_ec2_cost"].amount(), "unallocated EC2");
    close(line("Other AWS cost (not Kubernetes)"), truth["other_cost"].amount(), "other AWS cost");
    close(
        line("Kubernetes total")
            + line("EC2 not allocated to pods")
            + line("Other AWS cost (not Kubernetes)"),
        line("Bill (amortized)"),
        "reconciles",
    );
    // The Overview states the same three parts, and they add up to its bill exactly.
    let (_, overview) = get(&state, "/?period=2026-10&format=json").await;
    let bill = &json(&overview)["bill"];
    let micros = crate::ingest_cur::micros;
    let parts = micros(&bill["kubernetes_cost"])
        + micros(&bill["unallocated_ec2_cost"])
        + micros(&bill["other_cost"]);
    assert_eq!(parts, micros(&bill["amortized_total"]), "{bill}");
    let unallocated = micros(&bill["unallocated_ec2_cost"]) as f64 / 1e6;
    close(unallocated, line("EC2 not allocated to pods"), "the Overview's and the Costs page's");
    // The same table as HTML (people's numbers) and as CSV (a download).
    let (_, html) = get(&state, "/costs?period=2026-10").await;
    assert!(
        html.contains("Kubernetes total")
            && html.contains("href=\"/costs?period=2026-10&#38;group=workload&#38;namespace=acme-llm\""),
        "drill-down link"
    );
    let (status, headers, csv) = get_with(&state, "/costs?period=2026-10&format=csv&table=costs", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers[axum::http::header::CONTENT_DISPOSITION]
            .to_str()
            .unwrap()
            .contains("gpuledger-costs-2026-10.csv")
    );
    let csv = String::from_utf8(csv).unwrap();
    assert!(csv.starts_with("namespace,split_cost,unused_cost,total_cost"), "{csv}");
    // Drill-down: a namespace's workloads add up to its row.
    let (_, body) = get(&state, "/costs?period=2026-10&group=workload&namespace=acme-llm&format=json").await;
    let workloads = json(&body);
    let sum: f64 = workloads["costs"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["namespace_workload"] != "Kubernetes total")
        .map(|r| r["total_cost"].amount())
        .sum();
    close(sum, truth["namespaces"]["acme-llm"]["total_cost"].amount(), "acme-llm drill-down");
}

#[tokio::test]
async fn clients_match_truths_chargeback_and_accept_json_gets_the_twin() {
    use crate::engine::close;
    let app = crate::app::TestApp::demo().await;
    let state = app.state.clone();
    let truth = app.truth("2026-10");

    // Clients: totals with shared shares against truth's chargeback.
    let (_, headers, _) =
        get_with(&state, "/clients?period=2026-10", &[("accept", "application/json")]).await;
    assert_eq!(headers["content-type"], "application/json", "Accept: application/json gets the JSON twin");
    let (_, body) = get(&state, "/clients?period=2026-10&format=json").await;
    let clients = json(&body);
    for (client, t) in truth["chargeback"].as_object().unwrap() {
        let row = clients["clients"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["client"] == client.as_str())
            .unwrap();
        close(row["total_cost"].amount(), t["total_cost"].amount(), client);
    }
}

#[tokio::test]
async fn overview_gpus_and_inference_match_truth() {
    let app = crate::app::TestApp::demo().await;
    let state = app.state.clone();
    let truth = app.truth("2026-10");

    // Overview: cards, charts with text alternatives, the trend over both months.
    let (status, html) = get(&state, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("GPU utilization") && html.contains("Spot adoption (training)"), "cards");
    assert_eq!(
        html.matches("class=\"chart\" role=\"img\"").count(),
        4,
        "spend and three ratios against their targets"
    );
    // Each of the six cards carries its trend over the two months.
    assert_eq!(html.matches("<svg class=\"spark\" role=\"img\"").count(), 6, "a sparkline per card");
    let (_, body) = get(&state, "/?format=json").await;
    let overview = json(&body);
    assert_eq!(overview["trend"]["rows"].as_array().unwrap().len(), 2, "two months");
    // Each ratio's line says October's value (as the trend table has it) and its targets.
    let october =
        overview["trend"]["rows"].as_array().unwrap().iter().find(|r| r["month"] == "2026-10").unwrap();
    let percent = |v: &serde_json::Value| {
        let text = format!("{:.2}", v.amount() * 100.0);
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    for (title, column, targets) in [
        ("GPU utilization of measured allocated GPU-hours", "gpu_utilization", "target: 60–85 %"),
        ("Idle share of GPU-hours", "", "target: 10 %; flagged: 20 %"),
        ("Spot adoption of training GPU-hours", "spot_adoption", "target: 50 %; flagged: 30 %"),
    ] {
        let label = html.split(&format!("aria-label=\"{title}. ")).nth(1).unwrap().split('"').next().unwrap();
        assert!(label.ends_with(targets), "{label}");
        if !column.is_empty() {
            assert!(
                label.contains(&format!("Oct 2026: {} %", percent(&october[column]))),
                "{label} vs {}",
                october[column]
            );
        }
    }
    // GPU spend as leadership means it: the GPU fleet, not AWS's accelerator rows alone; idle
    // GPU cost as the full cost of idle GPU pod-hours.
    let october =
        overview["trend"]["rows"].as_array().unwrap().iter().find(|r| r["month"] == "2026-10").unwrap();
    let models = truth["gpu_models"].as_object().unwrap();
    let sum = |field: &str| models.values().map(|m| m[field].amount()).sum::<f64>();
    for (column, field) in [
        ("gpu_fleet_cost", "fleet_cost"),
        ("accelerator_cost", "accelerator_cost"),
        ("idle_cost", "idle_cost"),
        ("unallocated_gpu_cost", "unallocated_cost"),
    ] {
        let (shown, expected) = (october[column].amount(), sum(field));
        assert!((shown - expected).abs() < 0.01, "{column}: {shown} vs {expected}");
    }
    assert!(
        sum("fleet_cost") > 2.0 * sum("accelerator_cost"),
        "the accelerator share is a fraction of the fleet"
    );
    // Spend by category adds up to the bill to the cent: the GPU fleet, CPU and memory (every
    // other EC2 instance: Kubernetes + unallocated EC2 − the GPU fleet), storage and network as
    // the generator filed its daily lines, and the rest of other cost.
    let usd = |row: &serde_json::Value, column: &str| row[column].amount();
    let category = |name: &str| truth["other_cost_by_category"][name].amount();
    let ec2 = truth["kubernetes_allocated_cost"].amount() + truth["unallocated_ec2_cost"].amount();
    for (column, expected) in [
        ("cpu_and_memory_cost", ec2 - sum("fleet_cost")),
        ("storage_cost", category("storage")),
        ("network_cost", category("network")),
        ("other_cost", truth["other_cost"].amount() - category("storage") - category("network")),
    ] {
        assert!(
            (usd(october, column) - expected).abs() < 0.01,
            "{column}: {} vs {expected}",
            october[column]
        );
    }
    assert!(category("storage") > 0.0 && category("network") > 0.0);
    let parts: f64 = ["gpu_fleet_cost", "cpu_and_memory_cost", "storage_cost", "network_cost", "other_cost"]
        .iter()
        .map(|c| usd(october, c))
        .sum();
    assert!((parts - usd(october, "spend")).abs() < 0.005, "{parts} vs {}", october["spend"]);
    // The chart stacks them, with October's realized savings on its line.
    let label =
        html.split("aria-label=\"Monthly spend by category").nth(1).unwrap().split('"').next().unwrap();
    let money = |v: f64| gpuledger::report::table::thousands(v, 2);
    assert!(
        label.contains(&format!("GPU fleet {}", money(usd(october, "gpu_fleet_cost"))))
            && label.contains(&format!("savings {}", money(usd(october, "realized_savings")))),
        "{label}"
    );
    // The cards describe the chosen range: September and October together, not October.
    let (_, body) = get(&state, "/?from=2026-09-01&to=2026-11-01&format=json").await;
    let both = json(&body);
    let card = |label: &str| {
        both["cards"].as_array().unwrap().iter().find(|c| c["label"] == label).unwrap()["value"].clone()
    };
    let bills: i64 = ["2026-09", "2026-10"]
        .iter()
        .map(|p| (app.truth(p)["bill_amortized"].amount() * 1e6).round() as i64)
        .sum();
    assert_eq!(card("Total spend (amortized bill)"), format_usd(bills), "{}", both["cards"]);
    // A range inside a month has no chargeback of its own, and the Clients page says why.
    let (status, html) = get(&state, "/clients?from=2026-10-05&to=2026-10-20").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("Chargeback is computed per whole billing month"), "{html}");

    // GPUs, inference, savings and data pages answer, with their JSON twins.
    for page in ["/gpus", "/inference", "/savings", "/data"] {
        let (status, html) = get(&state, &format!("{page}?period=2026-10")).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert!(html.contains("<main"), "{page}");
    }
    let (_, body) = get(&state, "/gpus?period=2026-10&format=json").await;
    let gpus = json(&body);
    let allocated: f64 = gpus["gpu"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["namespace"] == "(all)")
        .map(|r| r["allocated_gpu_hours"].amount())
        .sum();
    let expected: f64 =
        truth["gpu_models"].as_object().unwrap().values().map(|m| m["allocated_gpu_hours"].amount()).sum();
    assert!((allocated - expected).abs() < 1e-6, "fleet allocated GPU-hours {allocated} vs {expected}");
    // The distribution of hourly utilization: each model's measured GPU-hours in the four bands,
    // from truth's 5 % steps (under 10 %: steps 0–1; 10–60 %: 2–11; the target 60–85 %: 12–16).
    let rows = gpus["utilization"]["rows"].as_array().unwrap();
    assert!(rows.len() >= 2, "a row per GPU model: {rows:?}");
    for row in rows {
        let model = row["gpu_model"].as_str().unwrap();
        let steps: Vec<f64> = truth["gpu_models"][model]["utilization_gpu_hours"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.amount())
            .collect();
        let total: f64 = steps.iter().sum();
        assert!((row["measured_gpu_hours"].amount() - total).abs() < 1e-6, "{model}: {row}");
        for (column, band) in
            [("share_under_10", 0..2), ("share_10_to_60", 2..12), ("share_60_to_85", 12..17)]
        {
            let expected = steps[band].iter().sum::<f64>() / total;
            assert!((row[column].amount() - expected).abs() <= 1e-6, "{model} {column}: {row}");
        }
    }
    let (_, html) = get(&state, "/gpus?period=2026-10").await;
    assert!(html.contains("aria-label=\"Hourly GPU utilization by model"), "the distribution is drawn");
    let (_, body) = get(&state, "/inference?period=2026-10&format=json").await;
    let inference = json(&body);
    for (key, t) in truth["workloads"].as_object().unwrap() {
        let Some(expected) = t.get("cost_per_inference").and_then(serde_json::Value::as_f64) else {
            continue;
        };
        let row = inference["inference"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| {
                format!("{}/{}", r["namespace"].as_str().unwrap(), r["workload"].as_str().unwrap()) == *key
            })
            .unwrap();
        let actual = row["cost_per_inference"].amount();
        assert!((actual - expected).abs() <= expected * 0.001, "{key}: {actual} vs {expected}");
    }
}

#[tokio::test]
async fn headers_metrics_and_a_recompute_seen_at_once() {
    let app = crate::app::TestApp::demo().await;
    let mut state = app.state.clone();
    // A page waits for recomputed months to be read again (a demo month takes milliseconds;
    // a generous bound keeps the test free of timing).
    state.fresh_wait = std::time::Duration::from_secs(30);

    // Security headers, gzip, metrics.
    let (_, headers, _) = get_with(&state, "/", &[("accept-encoding", "gzip")]).await;
    assert_eq!(headers["content-encoding"], "gzip");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert!(headers["content-security-policy"].to_str().unwrap().contains("default-src 'self'"));
    let (status, _) = get(&state, "/costs").await;
    assert_eq!(status, StatusCode::OK);
    let (_, metrics) = get(&state, "/metrics").await;
    assert!(
        metrics.contains("gpuledger_http_requests_total{method=\"GET\",route=\"/costs\",status=\"200\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("gpuledger_ingest_runs{kind=\"cur\",status=\"succeeded\"} 2"), "{metrics}");
    // Pages are cached per URL, and a recompute is seen at once: acme stops sharing.
    let acme_shared = |body: &str| {
        json(body)["clients"]["rows"].as_array().unwrap().iter().find(|r| r["client"] == "acme").unwrap()
            ["shared_cost"]
            .amount()
    };
    // acme exempt (or not) from the beginning, and October computed again.
    let acme_exempt = |exempt: bool| {
        let store = state.store.clone();
        async move {
            let history = store.settings().await.unwrap();
            let version = history
                .client_version("acme", gpuledger::domain::settings::EffectiveFrom::BEGINNING, |t| {
                    t.exempt = exempt
                })
                .unwrap();
            store.save_settings(&[version]).await.unwrap();
            gpuledger::engine::compute::compute_period(store.as_ref(), "2026-10".parse().unwrap())
                .await
                .unwrap();
        }
    };
    let (_, before) = get(&state, "/clients?period=2026-10&format=json").await;
    assert!(acme_shared(&before) > 0.0);
    // No sleep: the cache keys on the data revision, which every compute raises.
    acme_exempt(true).await;
    let (_, after) = get(&state, "/clients?period=2026-10&format=json").await;
    assert_eq!(acme_shared(&after), 0.0, "the cached page was refreshed");
    assert!(json(&after).get("previous_rollups").is_none(), "fresh figures say nothing more");
    // A page that may not wait answers from the previous rollups and says so, is not kept in
    // the page cache, and shows the new figures once they are read again in the background.
    acme_exempt(false).await;
    state.fresh_wait = std::time::Duration::ZERO;
    let (_, headers, body) = get_with(&state, "/clients?period=2026-10&format=json", &[]).await;
    let previous = String::from_utf8(body).unwrap();
    assert_eq!(acme_shared(&previous), 0.0, "the figures from before the compute");
    assert!(json(&previous)["previous_rollups"].as_str().unwrap().contains("Reload in a few seconds"));
    assert!(headers.get(gpuledger::web::PREVIOUS_HEADER).is_none(), "the marker stays inside");
    let mut tries = 0;
    let fresh = loop {
        let (_, body) = get(&state, "/clients?period=2026-10&format=json").await;
        if json(&body).get("previous_rollups").is_none() {
            break body;
        }
        tries += 1;
        assert!(tries < 600, "the recomputed month was never read again");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(acme_shared(&fresh) > 0.0, "the new figures, not a cached copy of the previous ones");
    // A range with nothing computed is a 400 that lists the computed months, not a 500.
    let (status, html) = get(&state, "/costs?from=2020-01-01&to=2020-02-01").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(
        html.contains("nothing is computed for 2020-01-01/2020-02-01") && html.contains("2026-09"),
        "{html}"
    );
}

/// An XLSX download's first sheet read back with a real zip reader: numbers and texts (shared
/// strings resolved) by cell reference, e.g. `D7` → 123.45, `A7` → "Kubernetes total".
fn xlsx_cells(bytes: &[u8]) -> (BTreeMap<String, f64>, BTreeMap<String, String>) {
    use std::io::Read;
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("an XLSX is a zip archive");
    let mut read = |name: &str| {
        let mut text = String::new();
        archive.by_name(name).unwrap_or_else(|e| panic!("{name}: {e}")).read_to_string(&mut text).unwrap();
        text
    };
    let sheet = read("xl/worksheets/sheet1.xml");
    let shared = read("xl/sharedStrings.xml");
    let strings: Vec<String> = regex::Regex::new(r"<si><t[^>]*>([^<]*)</t></si>")
        .unwrap()
        .captures_iter(&shared)
        .map(|c| c[1].to_string())
        .collect();
    let cell = regex::Regex::new(r#"<c r="([A-Z]+[0-9]+)"([^>]*)><v>([^<]+)</v></c>"#).unwrap();
    let (mut numbers, mut texts) = (BTreeMap::new(), BTreeMap::new());
    for c in cell.captures_iter(&sheet) {
        if c[2].contains("t=\"s\"") {
            texts.insert(c[1].to_string(), strings[c[3].parse::<usize>().unwrap()].clone());
        } else {
            numbers.insert(c[1].to_string(), c[3].parse::<f64>().unwrap());
        }
    }
    (numbers, texts)
}

#[tokio::test]
async fn costs_drill_down_to_pods_filter_by_cluster_and_download_as_xlsx_clients_have_pages() {
    use crate::engine::{close, generate_and_load};
    let dir = tempfile::tempdir().unwrap();
    let database = crate::helpers::connect(&format!("sqlite:{}", dir.path().join("web.db").display())).await;
    let state = AppState::new(database, gpuledger::web::AuthConfig::off());
    generate_and_load(state.store.as_ref(), dir.path(), 1, 45).await;
    let truth = crate::ingest_cur::truth(dir.path(), "2026-10");
    let rows_of = |body: &str| json(body)["costs"]["rows"].as_array().unwrap().clone();

    // Workloads: one row per workload as declared (a CronJob's runs, each a Job of its own,
    // are one row under the CronJob's name), each to the cent against truth, and each links
    // to its pods.
    let (_, body) = get(&state, "/costs?period=2026-10&group=workload&format=json").await;
    let workloads = rows_of(&body);
    let families = truth["workload_families"].as_object().unwrap();
    assert_eq!(workloads.len(), families.len(), "one row per workload family");
    assert!(
        families.len() < truth["workloads"].as_object().unwrap().len(),
        "some CronJob ran more than once"
    );
    for (key, t) in families {
        let row = workloads.iter().find(|r| r["namespace_workload"] == key.as_str()).unwrap();
        close(row["total_cost"].amount(), t["total_cost"].amount(), key);
    }
    // The CronJob with the most runs drills down to its runs, each to the cent against truth,
    // and they add up to its row; its pods (every run's) add up to it too; one of its Jobs,
    // named as the bill names it, drills down to that Job's pods alone, the way back passing
    // the CronJob's runs.
    // A run is a Job named `cronjob-<schedule>`.
    let runs_of = |family: &str| {
        let prefix = format!("{family}-");
        let run = |k: &String| k.strip_prefix(&prefix).is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit()));
        truth["workloads"].as_object().unwrap().iter().filter(|(k, _)| run(k)).collect::<Vec<_>>()
    };
    let (family, runs) =
        families.keys().map(|k| (k.clone(), runs_of(k))).max_by_key(|(_, runs)| runs.len()).unwrap();
    assert!(runs.len() > 1, "{family} ran {} times", runs.len());
    let (namespace, cronjob) = family.split_once('/').unwrap();
    let runs_view = format!("/costs?period=2026-10&group=workload&namespace={namespace}&workload={cronjob}");
    let (_, body) = get(&state, &format!("{runs_view}&format=json")).await;
    let run_rows = rows_of(&body);
    assert_eq!(run_rows.len(), runs.len(), "one row per run");
    for (key, t) in &runs {
        let row = run_rows.iter().find(|r| r["namespace_workload"] == key.as_str()).unwrap();
        close(row["total_cost"].amount(), t["total_cost"].amount(), key);
    }
    let sum: f64 = run_rows.iter().map(|r| r["total_cost"].amount()).sum();
    close(sum, families[&family]["total_cost"].amount(), "a CronJob's runs add up to its row");
    let (_, html) = get(&state, "/costs?period=2026-10&group=workload").await;
    assert!(html.contains(&runs_view.replace('&', "&#38;")), "the CronJob's row links to its runs");
    let pods_of =
        |workload: &str| format!("/costs?period=2026-10&group=pod&namespace={namespace}&workload={workload}");
    let (status, body) = get(&state, &format!("{}&format=json", pods_of(cronjob))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let every_run = rows_of(&body);
    assert!(every_run.len() >= runs.len(), "{} pods for {} runs", every_run.len(), runs.len());
    let sum: f64 = every_run.iter().map(|p| p["total_cost"].amount()).sum();
    close(sum, families[&family]["total_cost"].amount(), "a CronJob's pods add up to its row");
    let (_, html) = get(&state, &pods_of(cronjob)).await;
    assert!(html.contains(&format!("{} runs of a CronJob", runs.len())), "the caption counts the runs");
    let (job, job_truth) = runs[0];
    let job = job.split_once('/').unwrap().1;
    let (_, body) = get(&state, &format!("{}&format=json", pods_of(job))).await;
    let one_run = rows_of(&body);
    assert!(one_run.iter().all(|p| p["pod"].as_str().unwrap().starts_with(&format!("{job}-"))));
    let sum: f64 = one_run.iter().map(|p| p["total_cost"].amount()).sum();
    close(sum, job_truth["total_cost"].amount(), "one run's pods add up to that Job");
    let (_, html) = get(&state, &pods_of(job)).await;
    let crumb = format!(r#"<a href="{}">{cronjob}</a>"#, runs_view.replace('&', "&#38;"));
    assert!(html.contains(&crumb), "{crumb} on the way back from a run's pods");
    let (_, html) = get(&state, "/costs?period=2026-10&group=workload").await;
    let (key, expected) = families
        .iter()
        .find(|(k, _)| k.starts_with("acme-llm/"))
        .map(|(k, t)| (k.clone(), t["total_cost"].amount()))
        .unwrap();
    let (namespace, workload) = key.split_once('/').unwrap();
    let link =
        format!("/costs?period=2026-10&#38;group=pod&#38;namespace={namespace}&#38;workload={workload}");
    assert!(html.contains(&link), "{link} in the workload view");

    // Pods: a workload's pods add up to the workload (and to truth), each pod once.
    let (status, body) = get(
        &state,
        &format!("/costs?period=2026-10&group=pod&namespace={namespace}&workload={workload}&format=json"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let pods = rows_of(&body);
    let total = &json(&body)["costs"]["totals"][0];
    assert_eq!(total["pod"], "Workload total");
    assert!(pods.len() > 1, "{key} runs several pods: {}", pods.len());
    let sum: f64 = pods.iter().map(|p| p["total_cost"].amount()).sum();
    close(sum, expected, "pods add up to their workload");
    close(total["total_cost"].amount(), expected, "the workload total row");
    let names: std::collections::BTreeSet<&str> = pods.iter().map(|p| p["pod"].as_str().unwrap()).collect();
    assert_eq!(names.len(), pods.len(), "one row per pod");

    // Cluster filter: each cluster's view holds its own row of the by-cluster grouping, and
    // the clusters add up to the Kubernetes total; the bill lines need the whole fleet.
    let (_, body) = get(&state, "/costs?period=2026-10&group=cluster&format=json").await;
    let by_cluster = rows_of(&body);
    let clusters: Vec<String> = by_cluster
        .iter()
        .map(|r| r["cluster"].as_str().unwrap().to_string())
        .filter(|c| c.starts_with("ml-"))
        .collect();
    assert!(!clusters.is_empty(), "the demo fleet runs in ml-prod (and ml-west at larger scales)");
    let mut fleet = 0.0;
    for cluster in &clusters {
        let (_, body) = get(&state, &format!("/costs?period=2026-10&cluster={cluster}&format=json")).await;
        let totals = json(&body)["costs"]["totals"].as_array().unwrap().clone();
        let kubernetes =
            totals.iter().find(|r| r["namespace"] == "Kubernetes total").unwrap()["total_cost"].amount();
        let own =
            by_cluster.iter().find(|r| r["cluster"] == cluster.as_str()).unwrap()["total_cost"].amount();
        close(kubernetes, own, cluster);
        assert!(!totals.iter().any(|r| r["namespace"] == "Bill (amortized)"), "no bill line for one cluster");
        fleet += kubernetes;
    }
    close(fleet, truth["kubernetes_allocated_cost"].amount(), "clusters add up to the fleet");
    let (_, html) = get(&state, "/costs?period=2026-10&cluster=ml-prod").await;
    assert!(html.contains("<option value=\"ml-prod\" selected>"), "the chosen cluster stays chosen");

    // XLSX: the same table as numbers, the totals to the cent and the bill to the micro-dollar.
    let (status, headers, bytes) =
        get_with(&state, "/costs?period=2026-10&format=xlsx&table=costs", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet");
    assert!(headers["content-disposition"].to_str().unwrap().contains("gpuledger-costs-2026-10.xlsx"));
    let (numbers, texts) = xlsx_cells(&bytes);
    // A file to hand on: what the table is, its period and filters, when the data was
    // computed, a blank row, then human column names.
    assert_eq!(texts["A1"], "Kubernetes cost by namespace, reconciled to the bill");
    assert_eq!(texts["A2"], "Billing period Oct 2026");
    assert!(
        texts["A3"].starts_with("Data as of ")
            && texts["A3"].contains(" 2026 ")
            && texts["A3"].ends_with(" UTC (computed from the bill and metrics then)")
    );
    assert!(!texts.contains_key("A4"));
    assert_eq!((texts["A5"].as_str(), texts["D5"].as_str()), ("Namespace", "Total cost"));
    let (_, _, sorted) = get_with(
        &state,
        "/costs?period=2026-10&cluster=ml-prod&sort=total_cost&format=xlsx&table=costs",
        &[],
    )
    .await;
    assert_eq!(
        xlsx_cells(&sorted).1["A2"],
        "Billing period Oct 2026; cluster ml-prod; sorted by total_cost, descending"
    );
    // The printed page carries the same stamp.
    let (_, page) = get(&state, "/costs?period=2026-10").await;
    assert!(
        page.contains(&format!("<p class=\"muted as-of\">{}</p>", texts["A3"])),
        "the page's as-of stamp"
    );
    let row_of = |label: &str| {
        texts.iter().find(|(r, t)| r.starts_with('A') && *t == label).unwrap().0[1..].to_string()
    };
    let total = |label: &str| numbers[&format!("D{}", row_of(label))];
    close(total("Kubernetes total"), truth["kubernetes_allocated_cost"].amount(), "xlsx total");
    let bill = total("Bill (amortized)");
    assert!((bill - truth["bill_amortized"].amount()).abs() < 1e-6, "xlsx bill {bill}");
    close(
        total("Kubernetes total")
            + total("EC2 not allocated to pods")
            + total("Other AWS cost (not Kubernetes)"),
        bill,
        "xlsx reconciles",
    );
    close(total("acme-llm"), truth["namespaces"]["acme-llm"]["total_cost"].amount(), "xlsx acme-llm");

    // Clients: each links to its page; the page's total and its workloads' split (its direct
    // cost) match truth's chargeback.
    let (_, html) = get(&state, "/clients?period=2026-10").await;
    assert!(html.contains("href=\"/clients/acme?period=2026-10\""), "client links");
    assert!(html.contains("href=\"/clients/%28unassigned%29?period=2026-10\""), "(unassigned) links too");
    for (client, t) in truth["chargeback"].as_object().unwrap() {
        let escaped = client.replace('(', "%28").replace(')', "%29");
        let (status, body) = get(&state, &format!("/clients/{escaped}?period=2026-10&format=json")).await;
        assert_eq!(status, StatusCode::OK, "{client}: {body}");
        let page = json(&body);
        close(page["total_cost"].amount(), t["total_cost"].amount(), client);
        let direct: f64 =
            page["workloads"]["rows"].as_array().unwrap().iter().map(|r| r["split_cost"].amount()).sum();
        close(direct, t["direct_cost"].amount(), client);
        let months = page["months"]["rows"].as_array().unwrap();
        assert_eq!(months.len(), 1, "{client}: one computed month");
        close(months[0]["total_cost"].amount(), t["total_cost"].amount(), client);
    }
    let (status, html) = get(&state, "/clients/acme?period=2026-10").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("Total to charge") && html.contains("role=\"img\""), "cards and the trend chart");
    let (status, _) = get(&state, "/clients/nobody").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Data: the reconciliation of the period's CUR ingest, and freshness per kind of data.
    let (_, body) = get(&state, "/data?format=json").await;
    let data = json(&body);
    let reconciliation = &data["reconciliation"][0];
    assert_eq!(reconciliation["period"], "2026-10");
    assert_eq!(reconciliation["reconciles"], true);
    assert_eq!(reconciliation["instance_hours_disagreeing"], 0);
    let bill: f64 =
        reconciliation["bill_amortized"].as_str().unwrap().trim_start_matches('$').parse().unwrap();
    assert!((bill - truth["bill_amortized"].amount()).abs() < 1e-6, "reconciled bill {bill}");
    assert!(data["freshness"].as_array().unwrap().iter().any(|f| f["kind"] == "cur" && f["age_hours"] == 0));
    let (_, html) = get(&state, "/data").await;
    assert!(html.contains("Reconciliation") && html.contains(">reconciles<"), "reconciliation section");
}

#[tokio::test]
async fn opportunities_are_a_waterfall_per_workload_family() {
    use gpuledger::engine::classify::family;
    use gpuledger::report::rollup::{self, RollupRange};
    let app = crate::app::TestApp::demo().await;
    let period: gpuledger::period::Period = "2026-10".parse().unwrap();
    let range = RollupRange::load(
        app.store(),
        &gpuledger::auth::Scope::All,
        "2026-10".into(),
        period.start(),
        period.end(),
    )
    .await
    .unwrap();
    let text = rollup::savings(&range).render(gpuledger::report::OutputFormat::Json, "2026-10");
    let savings: serde_json::Value = serde_json::from_str(&text).unwrap();
    let rows = savings["opportunities"].as_array().unwrap();
    assert!(rows.len() >= 3, "{rows:?}");
    // Each family's dollars are claimed once: per family, the opportunities add up to at most
    // what it spent; so does the whole list against the month's spend.
    let mut spent: BTreeMap<(String, String, String, String), f64> = BTreeMap::new();
    for c in range.costs() {
        let key = (
            c.namespace.clone(),
            family(&c.workload).to_string(),
            c.gpu_model.clone(),
            c.purchase_option.to_string(),
        );
        *spent.entry(key).or_default() += (c.split_cost_nanos + c.unused_cost_nanos) as f64 / 1e9;
    }
    let mut claimed: BTreeMap<(String, String, String, String), f64> = BTreeMap::new();
    let text_of = |r: &serde_json::Value, f: &str| r[f].as_str().unwrap().to_string();
    let mut kinds = std::collections::BTreeSet::new();
    for r in rows {
        let key = (
            text_of(r, "namespace"),
            text_of(r, "family"),
            text_of(r, "gpu_model"),
            text_of(r, "purchase_option"),
        );
        *claimed.entry(key.clone()).or_default() += r["monthly_savings"].amount();
        assert!(kinds.insert((text_of(r, "kind"), key)), "one row per kind and family: {r}");
        // Families, not Job runs: no CronJob schedule suffix left.
        let family = text_of(r, "family");
        assert_eq!(gpuledger::engine::classify::family(&family), family, "{r}");
    }
    for (key, claimed) in &claimed {
        assert!(*claimed <= spent[key] + 1e-6, "{key:?}: {claimed} claimed of {} spent", spent[key]);
    }
    let total: f64 = claimed.values().sum();
    assert!(total > 0.0 && total <= savings["monthly_spend"].amount(), "{total}");
    assert!((savings["total_monthly_savings"].amount() - total).abs() < 1e-3);
    // The CronJob-style training Jobs are one family with their runs counted.
    assert!(rows.iter().any(|r| r["evidence"].as_str().unwrap().contains(" runs)")), "{rows:?}");
}

#[tokio::test]
async fn the_filter_bar_offers_one_click_ranges_that_keep_the_other_filters() {
    // The demo database holds 2026-09 and 2026-10.
    let app = crate::app::TestApp::demo().await;
    let page = app.page("/costs?period=2026-09&group=team").await;
    let link = |query: &str, name: &str, current: bool| {
        let query = query.replace('&', "&#38;");
        let current = if current { r#" aria-current="true""# } else { "" };
        format!(r#"<a href="/costs?{query}"{current}>{name}</a>"#)
    };
    // "This month" is the calendar month: October is named, and November said to be not
    // billed yet, while it is November (as when this was written).
    let today = gpuledger::period::Period::containing(chrono::Utc::now().timestamp());
    let latest: gpuledger::period::Period = "2026-10".parse().unwrap();
    let name = |p: gpuledger::period::Period| {
        chrono::NaiveDate::from_ymd_opt(p.year(), p.month(), 1).unwrap().format("%B").to_string()
    };
    let (this, last) = if today == latest {
        ("This month (so far)".to_string(), "Last month".to_string())
    } else if today.previous() == latest {
        (format!("October (last month; {} is not billed yet)", name(today)), "September".to_string())
    } else {
        ("October 2026 (newest billed)".to_string(), "September".to_string())
    };
    for expected in [
        link("period=2026-10&group=team", &this, false),
        link("period=2026-09&group=team", &last, true),
        link("from=2026-08-01&to=2026-11-01&group=team", "Last 3 months", false),
        link("from=2026-01-01&to=2026-11-01&group=team", "Year to date", false),
    ] {
        assert!(page.contains(&expected), "{expected} in the filter bar");
    }
    // A preset is a range like any other: the three months hold the two computed ones.
    let three = app.json("/costs?from=2026-08-01&to=2026-11-01&group=team&format=json").await;
    assert_eq!(three["period"], "2026-08-01/2026-11-01");
    let total = |json: &serde_json::Value| {
        let totals = json["costs"]["totals"].as_array().unwrap();
        totals.iter().find(|r| r["team"] == "Kubernetes total").unwrap()["total_cost"].amount()
    };
    let september = app.json("/costs?period=2026-09&group=team&format=json").await;
    let october = app.json("/costs?period=2026-10&group=team&format=json").await;
    crate::engine::close(
        total(&three),
        total(&september) + total(&october),
        "three months = the two computed",
    );
}

#[tokio::test]
async fn column_headings_sort_the_tables_in_the_url_and_links_follow_their_rows() {
    let app = crate::app::TestApp::demo().await;
    let totals = |json: &serde_json::Value| -> Vec<(String, f64)> {
        json["costs"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["namespace"].as_str().unwrap().to_string(), r["total_cost"].amount()))
            .collect()
    };
    let default = totals(&app.json("/costs?period=2026-10&format=json").await);
    let names: Vec<&String> = default.iter().map(|(n, _)| n).collect();
    assert!(names.windows(2).all(|w| w[0] < w[1]), "by name unless asked: {names:?}");
    let largest_first = totals(&app.json("/costs?period=2026-10&sort=total_cost&format=json").await);
    assert!(largest_first.windows(2).all(|w| w[0].1 >= w[1].1), "{largest_first:?}");
    let smallest_first = totals(&app.json("/costs?period=2026-10&sort=total_cost&dir=asc&format=json").await);
    assert!(smallest_first.windows(2).all(|w| w[0].1 <= w[1].1), "{smallest_first:?}");
    assert_eq!(largest_first.len(), default.len(), "the same rows, reordered");
    // The totals stay under the rows, and each row keeps its own drill-down link.
    let page = app.page("/costs?period=2026-10&sort=total_cost").await;
    let top = &largest_first[0].0;
    let first_row = page.split("<tbody>").nth(1).unwrap().split("</tr>").next().unwrap();
    assert!(
        first_row.contains(&format!("namespace={top}")) && first_row.contains(&format!(">{top}</a>")),
        "{first_row}"
    );
    assert!(page.contains(r#"aria-sort="descending"><a class="sort" href="/costs?period=2026-10&#38;sort=total_cost&#38;dir=asc">Total cost ▼</a>"#), "{page}");
    // A column no table has is refused, naming the columns there are.
    let refused = app.fetch("/costs?period=2026-10&sort=nope", Some("application/json")).await;
    assert_eq!(refused.status, axum::http::StatusCode::BAD_REQUEST);
    let refused = refused.json();
    assert_eq!(refused["parameter"], "sort");
    assert!(refused["choices"].as_array().unwrap().iter().any(|c| c == "total_cost"), "{refused}");
}

/// A long table shows 100 rows a page with links to the others; the totals under it and the
/// downloads cover every row; sorting applies before paging; a page that is not a number is a 400.
#[tokio::test]
async fn a_long_table_is_paged_in_the_url_and_its_downloads_hold_every_row() {
    let app = crate::app::TestApp::demo().await;
    // The pods of the CronJob that runs most often (a row of the workload view each run).
    let table = "/costs?period=2026-10&group=pod&namespace=internal-ml&workload=etl";
    let escaped = table.replace('&', "&#38;");
    let names = |json: &serde_json::Value| -> Vec<String> {
        let rows = json["costs"]["rows"].as_array().unwrap();
        rows.iter().map(|r| r["pod"].as_str().unwrap().to_string()).collect()
    };
    let all = names(&app.json(&format!("{table}&format=json")).await);
    let pages = all.len().div_ceil(100);
    assert!(pages >= 3, "internal-ml/etl ran {} pods in the demo's October: too few to page", all.len());
    // The first cell of each body row.
    let shown = |page: &str| -> Vec<String> {
        let body = page.split("<tbody>").nth(1).unwrap().split("</tbody>").next().unwrap();
        // A row opens `<tr>`, a total row `<tr class="total">`.
        body.split("<tr")
            .skip(1)
            .map(|row| {
                let cell = row.split("<th scope=\"row\">").nth(1).unwrap().split("</th>").next().unwrap();
                let text = cell.rsplit_once("\">").map_or(cell, |(_, t)| t);
                text.trim_end_matches("</a>").to_string()
            })
            .collect()
    };
    let first = app.page(table).await;
    let rows = shown(&first);
    let totals = rows.len() - 100;
    assert!(rows[..100] == all[..100], "the first page is the first 100 rows");
    assert!(
        rows[100..].iter().any(|r| r == "Workload total"),
        "the totals stay under the page: {:?}",
        &rows[100..]
    );
    let count = gpuledger::report::table::thousands(all.len() as f64, 0);
    assert!(first.contains(&format!("Rows 1–100 of {count}")), "{first}");
    assert!(first.contains(&format!(r#"<a href="{escaped}&#38;page=2" rel="next">"#)), "{first}");
    assert!(!first.contains("rel=\"prev\""), "no previous page before the first");
    // The second page starts at row 101; the last holds the rest and no next link.
    let second = shown(&app.page(&format!("{table}&page=2")).await);
    assert_eq!(second[0], all[100]);
    let last_page = app.page(&format!("{table}&page={pages}")).await;
    assert_eq!(shown(&last_page).len() - totals, all.len() - (pages - 1) * 100);
    assert!(last_page.contains(&format!("Rows {}–{count} of {count}", (pages - 1) * 100 + 1)));
    assert!(!last_page.contains("rel=\"next\""));
    // Sorting orders every row first: page 2 of the largest first starts at the 101st largest.
    let largest = app.json(&format!("{table}&sort=total_cost&format=json")).await;
    let second_sorted = shown(&app.page(&format!("{table}&sort=total_cost&page=2")).await);
    assert_eq!(second_sorted[0], names(&largest)[100]);
    // The page makes only the rows it shows, after ordering every row itself: each order gives
    // the rows the JSON twin (which orders the whole table) has in the same places.
    for (sort, dir) in [("total_cost", "desc"), ("gpu_cost", "asc"), ("pod", "desc"), ("net_cost", "desc")] {
        let query = format!("{table}&sort={sort}&dir={dir}");
        let whole = names(&app.json(&format!("{query}&format=json")).await);
        let page = shown(&app.page(&format!("{query}&page=2")).await);
        assert_eq!(page[..100], whole[100..200], "page 2 by {sort} {dir}");
    }
    // The downloads and the JSON twin hold every row, whatever page is shown.
    let csv = app.fetch(&format!("{table}&page=2&format=csv"), None).await.text();
    let csv_rows = csv.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).count();
    assert_eq!(csv_rows, 1 + all.len() + totals, "header, every row and the totals");
    // A page past the last shows the last (a link shared with a user who sees fewer rows still
    // answers); a page that is not a whole number from 1 is refused.
    let past = app.page(&format!("{table}&page={}", pages + 1)).await;
    assert_eq!(shown(&past), shown(&last_page));
    for page in ["0", "-1", "two"] {
        let refused = app.fetch(&format!("{table}&page={page}"), Some("application/json")).await;
        assert_eq!(refused.status, axum::http::StatusCode::BAD_REQUEST, "page={page}");
        assert_eq!(refused.json()["parameter"], "page");
    }
    // A short table ignores the page: the namespaces fit on one.
    assert!(!app.page("/costs?period=2026-10").await.contains("class=\"pager\""));
}

/// A drill-down shows the way back (Costs by namespace › namespace › workload), each step
/// keeping the range, cluster and account.
#[tokio::test]
async fn drill_downs_have_breadcrumbs_that_keep_the_range_cluster_and_account() {
    let app = crate::app::TestApp::demo().await;
    let crumbs = |page: &str| -> String {
        page.split("<nav class=\"crumbs\" aria-label=\"Breadcrumb\">")
            .nth(1)
            .unwrap()
            .split("</nav>")
            .next()
            .unwrap()
            .to_string()
    };
    let filters = "period=2026-10&cluster=ml-prod&account=222222222222";
    let pods = app.page(&format!("/costs?{filters}&group=pod&namespace=acme-llm&workload=chat-vllm")).await;
    let escaped = filters.replace('&', "&#38;");
    assert_eq!(
        crumbs(&pods),
        format!(
            r#"<ol><li><a href="/costs?{escaped}">Costs by namespace</a></li><li><a href="/costs?{escaped}&#38;group=workload&#38;namespace=acme-llm">acme-llm</a></li><li><span aria-current="page">chat-vllm</span></li></ol>"#
        )
    );
    // The workload's total row still links back to its namespace's workloads.
    assert!(
        pods.contains(&format!(r#"<th scope="row"><a href="/costs?{escaped}&#38;group=workload&#38;namespace=acme-llm">Workload total</a></th>"#)),
        "{pods}"
    );
    let workloads = app.page(&format!("/costs?{filters}&group=workload&namespace=acme-llm")).await;
    assert!(crumbs(&workloads).ends_with(r#"<li><span aria-current="page">acme-llm</span></li></ol>"#));
    // Each workload row drills down with the account kept.
    assert!(workloads.contains(&format!(
        r#"href="/costs?{escaped}&#38;group=pod&#38;namespace=acme-llm&#38;workload=chat-vllm""#
    )));
    // A top-level page has none; a client's page leads back to Clients.
    assert!(!app.page("/costs?period=2026-10").await.contains("class=\"crumbs\""));
    let client = app.page("/clients/acme?period=2026-10").await;
    assert!(
        crumbs(&client).contains(r#"<a href="/clients?period=2026-10">Clients</a>"#),
        "{}",
        crumbs(&client)
    );

    // An account that runs none of acme-llm's pods: the drill-down is refused as for any
    // namespace the range does not have (the pods by account are checked in usage_accounts).
    let pods = "/costs?period=2026-10&group=pod&namespace=acme-llm&workload=chat-vllm&account=333333333333";
    let refused = app.fetch(pods, Some("application/json")).await;
    assert_eq!(refused.status, axum::http::StatusCode::BAD_REQUEST);
}

/// Eight simultaneous first views of one page render it once; the other seven wait for that
/// render and get the same bytes from the cache (a crowd on a cold 80,000-row XLSX rendered it
/// once per request before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_of_first_views_renders_a_page_once() {
    let app = crate::app::TestApp::demo().await;
    let uri = "/costs?period=2026-10&group=workload&format=xlsx";
    let before = app.state.pages.renders();
    let crowd = tokio::join!(
        app.fetch(uri, None),
        app.fetch(uri, None),
        app.fetch(uri, None),
        app.fetch(uri, None),
        app.fetch(uri, None),
        app.fetch(uri, None),
        app.fetch(uri, None),
        app.fetch(uri, None),
    );
    let answers = [crowd.0, crowd.1, crowd.2, crowd.3, crowd.4, crowd.5, crowd.6, crowd.7];
    assert!(answers.iter().all(|a| a.status == axum::http::StatusCode::OK && a.body == answers[0].body));
    assert_eq!(app.state.pages.renders() - before, 1, "one render for eight first views");
    // Another page is another render; a repeat of either is none.
    app.fetch("/costs?period=2026-10&group=workload", None).await;
    app.fetch(uri, None).await;
    assert_eq!(app.state.pages.renders() - before, 2);
    // Data too (#37: 35 requests a second under load, each a render), and its twin apart.
    let data = app.fetch("/data", None).await;
    assert_eq!(app.fetch("/data", None).await.body, data.body);
    app.fetch("/data?format=json", None).await;
    app.fetch("/data?format=json", None).await;
    assert_eq!(app.state.pages.renders() - before, 4);
}

/// The Savings chart stacks each month's realized savings by kind (Spot, Savings Plans and
/// reservations net of their unused commitment, other): its parts are the table's and add up
/// to the month's realized savings. The waterfall ends at spend − the open opportunities.
#[tokio::test]
async fn savings_by_kind_add_up_to_each_months_realized_savings() {
    let app = crate::app::TestApp::demo().await;
    let page = app.page("/savings?period=2026-10").await;
    let json = app.json("/savings?period=2026-10&format=json").await;
    let october = &json["realized"]["rows"][0];
    assert_eq!(october["month"], "2026-10");
    let title = "Realized savings by kind (the dot: the net)";
    let label = page.split(&format!("aria-label=\"{title}. ")).nth(1).unwrap().split('"').next().unwrap();
    let said = label.split("Oct 2026: ").nth(1).unwrap().split(';').next().unwrap();
    let number = |text: &str| {
        text.trim().replace(',', "").parse::<f64>().unwrap_or_else(|_| panic!("{text:?} in {label}"))
    };
    let (net, parts) = said.split_once(" USD (").unwrap();
    // `Spot 1,234.5, Savings Plans (net of unused) -12, …`: the number after each name, up
    // to the next ", " (thousands commas have no space) or the closing parenthesis.
    let after = |name: &str| {
        let rest = parts.split_once(name).unwrap().1;
        number(rest.split(", ").next().unwrap().trim_end_matches(')'))
    };
    let parts: Vec<f64> = ["Spot ", "Savings Plans (net of unused) ", "Reserved (net of unused) ", "other "]
        .into_iter()
        .map(after)
        .collect();
    let close = |a: f64, b: f64, what: &str| assert!((a - b).abs() < 0.006, "{what}: {a} vs {b} in {label}");
    close(number(net), october["realized_savings"].amount(), "net");
    // The chart rounds each part to the cent; the table's kinds add up to the micro-dollar.
    assert!((parts.iter().sum::<f64>() - number(net)).abs() < 0.025, "the kinds add up in {label}");
    let kinds: f64 = ["spot_savings", "savings_plan_savings", "reserved_savings", "other_savings"]
        .iter()
        .map(|c| october[c].amount())
        .sum();
    assert!((kinds - october["realized_savings"].amount()).abs() < 5e-6, "{october}");

    // The waterfall falls from the month's Kubernetes spend by each kind of opportunity to
    // the spend if every one were taken: its last column is spend − the opportunities' total.
    let open = &json["opportunities"];
    let after = open["monthly_spend"].amount() - open["total_monthly_savings"].amount();
    let title = "Monthly Kubernetes spend after the open opportunities";
    let label = page.split(&format!("aria-label=\"{title}. ")).nth(1).unwrap().split('"').next().unwrap();
    let shown = number(label.rsplit("After: ").next().unwrap().trim_end_matches(" USD"));
    assert!((shown - after).abs() < 0.006, "{label} vs {after}");
    let kinds = open["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(label.matches(": −").count(), kinds.len(), "one step per kind: {label}");
    for (part, column) in
        parts.iter().zip(["spot_savings", "savings_plan_savings", "reserved_savings", "other_savings"])
    {
        close(*part, october[column].amount(), column);
    }
}

/// Inference draws the three workloads that served the most requests day by day: each day's
/// point is the cost of its serving hours per 1,000 requests, its tooltip the hours above the
/// fleet P95, drawn as a line; a range longer than two months draws none.
#[tokio::test]
async fn inference_draws_the_busiest_workloads_day_by_day_against_the_fleet_p95() {
    use gpuledger::report::rollup::RollupRange;
    let app = crate::app::TestApp::demo().await;
    let period: gpuledger::period::Period = "2026-10".parse().unwrap();
    let scope = gpuledger::auth::Scope::All;
    let range =
        RollupRange::load(app.store(), &scope, "2026-10".into(), period.start(), period.end()).await.unwrap();
    let mut requests: BTreeMap<(String, String), f64> = BTreeMap::new();
    for c in range.costs() {
        *requests.entry((c.namespace.clone(), c.workload.clone())).or_default() += c.requests;
    }
    let ((namespace, workload), _) =
        requests.iter().max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0))).unwrap();
    // 15 October, summed from the rollups by hand.
    let day = period.start() + 14 * 86_400;
    let (mut cost, mut served, mut hours, mut above) = (0i64, 0.0, 0i64, 0i64);
    for c in range.costs().filter(|c| &c.namespace == namespace && &c.workload == workload && c.day == day) {
        cost += c.serving_cost_nanos;
        served += c.requests;
        hours += c.inference_hours;
        above += c.inference_hours_above_p95;
    }
    assert!(served > 0.0 && hours > 0, "{namespace}/{workload} served on 15 October");
    let page = app.page("/inference?period=2026-10").await;
    assert_eq!(page.matches(": cost per 1,000 inferences by day. ").count(), 3, "three workloads");
    let title = format!("{namespace}/{workload}: cost per 1,000 inferences by day");
    let label = page.split(&format!("aria-label=\"{title}. ")).nth(1).unwrap().split('"').next().unwrap();
    let said = label.split("15 Oct: ").nth(1).unwrap().split(';').next().unwrap();
    let (value, rest) = said.split_once(" USD").unwrap();
    let expected = cost as f64 / 1e9 / served * 1000.0;
    assert!(
        (value.replace(',', "").parse::<f64>().unwrap() - expected).abs() < 0.006,
        "{said} vs {expected}"
    );
    assert_eq!(rest, format!(", {above} of {hours} serving hours above the fleet P95"));
    let p95 = range.periods().last().unwrap().0.p95_cost_per_inference * 1000.0;
    let line = label.rsplit("fleet P95: ").next().unwrap().trim_end_matches(" USD");
    assert!((line.replace(',', "").parse::<f64>().unwrap() - p95).abs() < 0.006, "{line} vs {p95}");
    // Its own usual range shaded: the P5–P95 (nearest rank) of its 31 daily values; and the days
    // with any serving hour above the fleet P95 ringed.
    let mut daily: BTreeMap<i64, (i64, f64, i64)> = BTreeMap::new();
    for c in
        range.costs().filter(|c| &c.namespace == namespace && &c.workload == workload && c.requests > 0.0)
    {
        let d = daily.entry(c.day).or_default();
        d.0 += c.serving_cost_nanos;
        d.1 += c.requests;
        d.2 += c.inference_hours_above_p95;
    }
    let mut values: Vec<f64> =
        daily.values().map(|(cost, served, _)| *cost as f64 / 1e9 / served * 1000.0).collect();
    values.sort_by(f64::total_cmp);
    let rank = |q: f64| values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
    let band = label.split("its P5–P95: ").nth(1).unwrap().split(" USD").next().unwrap();
    let (low, high) = band.split_once('–').unwrap();
    for (shown, expected) in [(low, rank(0.05)), (high, rank(0.95))] {
        assert!((shown.replace(',', "").parse::<f64>().unwrap() - expected).abs() < 0.006, "{band}");
    }
    let svg = page.split(&format!("aria-label=\"{title}. ")).nth(1).unwrap().split("</svg>").next().unwrap();
    let flagged = daily.values().filter(|d| d.2 > 0).count();
    // (None in the demo's October: its busiest workloads run far under the fleet P95. The
    // ring itself is drawn in `charts::tests`.)
    assert_eq!(
        svg.matches("class=\"flag\"").count(),
        flagged,
        "a ring per day with hours above the fleet P95"
    );
    // The bar chart of cost per 1,000 inferences has the busiest workload at its table's
    // rate × 1,000 (it was drawn empty: the rate cells were not read).
    let json = app.json("/inference?period=2026-10&format=json").await;
    let row = json["inference"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["namespace"] == namespace.as_str() && r["workload"] == workload.as_str())
        .unwrap();
    let bars = page
        .split("aria-label=\"Cost per 1,000 inferences (the 10 highest workloads). ")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let said = bars.split(&format!("{namespace}/{workload}: ")).nth(1).unwrap().split(" USD").next().unwrap();
    let rate = row["cost_per_inference"].amount() * 1000.0;
    assert!((said.replace(',', "").parse::<f64>().unwrap() - rate).abs() < 0.006, "{said} vs {rate}");
    // Three months of days would not read as points: none then.
    let long = app.page("/inference?from=2026-08-01&to=2026-11-01").await;
    assert!(!long.contains("inferences by day"));
}

/// A month in progress, as AWS delivers the current month: October billed and measured
/// through the 15th. Its rollups match its truth (those 15 days), and the Overview says it is
/// in progress, with its cost to date, the month before to the same day and a run-rate.
#[tokio::test]
async fn a_month_in_progress_matches_its_truth_and_the_overview_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let options = gpuledger::synth::GenerateOptions {
        through_day: Some(15),
        months: 2,
        seed: 45,
        scale: Scale::Demo,
        export_name: crate::ingest_cur::EXPORT.into(),
        ..gpuledger::synth::GenerateOptions::demo(dir.path().to_path_buf(), "2026-10".parse().unwrap())
    };
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
    gpuledger::synth::generate(&options, &progress).expect("generate");
    let url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let store = crate::helpers::connect(&url).await;
    crate::engine::load(store.as_ref(), dir.path(), &["2026-09", "2026-10"]).await;
    for period in ["2026-09", "2026-10"] {
        let truth = crate::ingest_cur::truth(dir.path(), period);
        crate::engine::assert_period_matches_truth(store.as_ref(), &truth, period).await;
    }
    let october = crate::ingest_cur::truth(dir.path(), "2026-10");
    let state = AppState::new(store, gpuledger::web::AuthConfig::off());
    let (status, body) = get(&state, "/?period=2026-10&format=json").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let progress = &json(&body)["in_progress"];
    assert_eq!((progress["days"].as_i64(), progress["of"].as_i64()), (Some(15), Some(31)), "{progress}");
    let to_date = progress["cost_to_date"].amount();
    let truth_to_date = october["kubernetes_allocated_cost"].amount();
    assert!((to_date - truth_to_date).abs() < 0.01, "{to_date} vs truth {truth_to_date}");
    assert!((progress["run_rate"].amount() - to_date * 31.0 / 15.0).abs() < 1e-6);
    assert!(progress["previous_to_same_day"].amount() > 0.0, "September to the 15th");
    // A whole month is not in progress.
    let (_, september) = get(&state, "/?period=2026-09&format=json").await;
    assert!(json(&september).get("in_progress").is_none());
}

/// Alerts are listed as they fired, not by month: their page has no month picker, dates or
/// quick ranges (a report page has them), and keeps its JSON twin.
#[tokio::test]
async fn the_alerts_page_has_no_month_picker() {
    let app = crate::app::TestApp::demo().await;
    let alerts = app.page("/alerts").await;
    assert!(!alerts.contains(r#"id="period""#) && !alerts.contains("Quick ranges"), "{alerts}");
    assert!(alerts.contains(r#"href="/alerts?format=json""#), "{alerts}");
    let costs = app.page("/costs").await;
    assert!(costs.contains(r#"id="period""#) && costs.contains("Quick ranges"));
}

/// A client's page lists a CronJob once, its runs summed: each row is the sum of the
/// per-workload report's rows of its family, and `runs` says how many.
#[tokio::test]
async fn a_clients_workloads_sum_a_cronjobs_runs_into_one_row() {
    use gpuledger::engine::classify::family;
    use gpuledger::report::rollup::{self, RollupRange};
    let app = crate::app::TestApp::demo().await;
    let period: gpuledger::period::Period = "2026-10".parse().unwrap();
    let scope = gpuledger::auth::Scope::All;
    let range =
        RollupRange::load(app.store(), &scope, "2026-10".into(), period.start(), period.end()).await.unwrap();
    let each = rollup::workloads(&range).render(gpuledger::report::OutputFormat::Json, "2026-10");
    let each: serde_json::Value = serde_json::from_str(&each).unwrap();
    let each = each["rows"].as_array().unwrap();
    let mut merged_runs = 0;
    for client in ["acme", "globex", "initech"] {
        let page = app.json(&format!("/clients/{client}?period=2026-10&format=json")).await;
        let rows = page["workloads"]["rows"].as_array().unwrap();
        let mine: Vec<&serde_json::Value> = each.iter().filter(|r| r["client"] == client).collect();
        assert!(!mine.is_empty(), "{client} runs workloads");
        let mut seen = std::collections::BTreeSet::new();
        for row in rows {
            let (namespace, workload) =
                (row["namespace"].as_str().unwrap(), row["workload"].as_str().unwrap());
            assert_eq!(family(workload), workload, "{client}: {workload} is a family");
            assert!(
                seen.insert((namespace, workload, row["workload_class"].as_str().unwrap())),
                "{client}: one row each"
            );
            let members: Vec<&&serde_json::Value> = mine
                .iter()
                .filter(|r| {
                    r["namespace"] == namespace
                        && family(r["workload"].as_str().unwrap()) == workload
                        && r["workload_class"] == row["workload_class"]
                })
                .collect();
            assert_eq!(row["runs"].as_f64().unwrap(), members.len() as f64, "{client}: {workload}");
            let total: f64 = members.iter().map(|r| r["total_cost"].amount()).sum();
            // Each row is rounded to the micro-dollar on its own.
            let slack = 1e-6 * members.len() as f64;
            let (shown, summed) = (row["total_cost"].amount(), total);
            assert!((shown - summed).abs() <= slack, "{client}: {workload}: {shown} against {summed}");
            if members.len() > 1 {
                merged_runs += members.len();
            }
        }
        let runs: f64 = rows.iter().map(|r| r["runs"].as_f64().unwrap()).sum();
        assert_eq!(runs, mine.len() as f64, "{client}: every workload in one row");
    }
    assert!(merged_runs > 10, "the demo's CronJobs run many times a month: {merged_runs}");
}
