//! Cost Explorer through the real AWS SDK against moto's Cost Explorer, seeded with what the
//! generator says AWS would answer for its world (`cost-explorer.json`): history months
//! before the CUR, pagination, the requests a repeat run makes (only the open days), the
//! cross-check finding a seeded mismatch and nothing else, and errors that store nothing.

use std::path::Path;
use std::process::Output;

use gpuledger::store::Store;
use gpuledger::synth::{CurFormat, Scale};
use gpuledger::web::{AppState, AuthConfig, router};
use serde_json::{Value, json};

use crate::ingest_cur::{export_root, generate};
use crate::s3::{Moto, start_moto};

/// The day the tests count as today: November 2026 is the open month.
const TODAY: &str = "2026-11-24";

/// The seeded mismatch: Cost Explorer has $25 more S3 on this day than the CUR.
const MISMATCH_DAY: &str = "2026-10-14";

use crate::s3::gl_moto as gpuledger;

fn succeeded(output: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn ingest_ce(moto: &Moto, database_url: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "ingest",
        "cost-explorer",
        "--from",
        "2026-07-01",
        "--to",
        "2026-12-01",
        "--endpoint-url",
        &moto.url,
        "--today",
        TODAY,
        "--timeout",
        "5",
    ];
    args.extend_from_slice(extra);
    gpuledger(database_url, &args)
}

/// Queues answers in moto: each new request (a different body) takes the next one.
async fn seed(moto: &Moto, results: Vec<Value>) {
    let response = reqwest::Client::new()
        .post(format!("{}/moto-api/static/ce/cost-and-usage-results", moto.url))
        .json(&json!({ "results": results }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201, "{:?}", response.text().await);
}

/// A day's groups with every amount scaled, as Cost Explorer's estimate of an open day.
fn estimated_copy(result: &Value, day: &str, next: &str, factor: f64) -> Value {
    let mut copy = result.clone();
    copy["TimePeriod"] = json!({"Start": day, "End": next});
    copy["Estimated"] = json!(true);
    for group in copy["Groups"].as_array_mut().unwrap() {
        for metric in group["Metrics"].as_object_mut().unwrap().values_mut() {
            let amount: f64 = metric["Amount"].as_str().unwrap().parse().unwrap();
            metric["Amount"] = json!(format!("{:.10}", amount * factor));
        }
    }
    copy
}

/// Cost Explorer's answers for the tests: the generated world (July and August are history,
/// September and October the CUR months) with the seeded mismatch, plus November 1–23 as
/// estimated days; split into two pages at the first of October.
fn answers(out: &Path) -> (Value, Value, Value) {
    let text = std::fs::read_to_string(out.join("cost-explorer.json")).unwrap();
    let generated: Value = serde_json::from_str(&text).unwrap();
    let mut results = generated["ResultsByTime"].as_array().unwrap().clone();
    assert_eq!(results.first().unwrap()["TimePeriod"]["Start"], "2026-07-01", "two months of history");
    assert_eq!(results.last().unwrap()["TimePeriod"]["Start"], "2026-10-31");
    let day = results.iter_mut().find(|r| r["TimePeriod"]["Start"] == MISMATCH_DAY).unwrap();
    let s3 = day["Groups"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|g| g["Keys"][0] == "Amazon Simple Storage Service")
        .expect("S3 every day");
    for metric in ["UnblendedCost", "AmortizedCost", "NetAmortizedCost"] {
        let amount: f64 = s3["Metrics"][metric]["Amount"].as_str().unwrap().parse().unwrap();
        s3["Metrics"][metric]["Amount"] = json!(format!("{:.10}", amount + 25.0));
    }
    let october_first = results.iter().position(|r| r["TimePeriod"]["Start"] == "2026-10-01").unwrap();
    let november = |factor: f64| -> Vec<Value> {
        (1..24)
            .map(|d| {
                let source = &results[october_first + d - 1];
                estimated_copy(source, &format!("2026-11-{d:02}"), &format!("2026-11-{:02}", d + 1), factor)
            })
            .collect()
    };
    let mut first_run = results.clone();
    first_run.extend(november(1.0));
    let attributes = generated["DimensionValueAttributes"].clone();
    let page_one = json!({
        "ResultsByTime": first_run[..october_first].to_vec(),
        "DimensionValueAttributes": attributes,
        "NextPageToken": "page-2",
    });
    let page_two = json!({
        "ResultsByTime": first_run[october_first..].to_vec(),
        "DimensionValueAttributes": attributes,
    });
    let november_again = json!({"ResultsByTime": november(1.02), "DimensionValueAttributes": attributes});
    (page_one, page_two, november_again)
}

/// Cost Explorer's amortized cost of `month` in the seeded answer, tax left out, in µ$.
fn history_total(page: &Value, month: &str) -> i64 {
    let mut nanos = 0i64;
    for result in page["ResultsByTime"].as_array().unwrap() {
        if !result["TimePeriod"]["Start"].as_str().unwrap().starts_with(month) {
            continue;
        }
        for group in result["Groups"].as_array().unwrap() {
            if group["Keys"][0] != "Tax" {
                let amount = group["Metrics"]["AmortizedCost"]["Amount"].as_str().unwrap();
                nanos += gpuledger::money::nanos_from_decimal(amount).unwrap();
            }
        }
    }
    gpuledger::money::micros_from_nanos(nanos)
}

async fn story(database_url: &str, out: &Path) {
    let Some(moto) = start_moto() else { return };
    let (page_one, page_two, november_again) = answers(out);
    seed(&moto, vec![page_one.clone(), page_two, november_again]).await;
    let cur = gpuledger(database_url, &["ingest", "cur", &export_root(out).display().to_string()]);
    assert!(cur.status.success(), "{}", String::from_utf8_lossy(&cur.stderr));

    // The first run asks for every day up to yesterday, in two pages.
    let first = succeeded(&ingest_ce(&moto, database_url, &[]));
    assert_eq!(first["requests"], 2, "{first}");
    assert_eq!(first["ranges"], json!([["2026-07-01", TODAY]]));
    assert_eq!(first["days_fetched"], 31 + 31 + 30 + 31 + 23);
    assert_eq!(first["days_estimated"], 23);
    // A repeat run asks only for the open days: November, still estimated.
    let again = succeeded(&ingest_ce(&moto, database_url, &[]));
    assert_eq!(again["requests"], 1, "{again}");
    assert_eq!(again["ranges"], json!([["2026-11-01", TODAY]]));
    assert_eq!(again["days_fetched"], 23);

    // October: the seeded $25 of S3 on the 14th and nothing else, amortized and unblended.
    let check = succeeded(&gpuledger(
        database_url,
        &["report", "cross-check", "--period", "2026-10", "--format", "json"],
    ));
    assert_eq!(check["within_tolerance"], false, "{check}");
    assert_eq!(check["days_checked"], 31);
    let rows = check["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{check}");
    for (row, metric) in rows.iter().zip(["amortized", "unblended"]) {
        assert_eq!((row["day"].as_str(), row["service"].as_str()), (Some(MISMATCH_DAY), Some("AmazonS3")));
        assert_eq!(row["metric"], metric);
        let difference: f64 = row["difference"].as_str().unwrap().parse().unwrap();
        assert!((difference - 25.0).abs() < 0.000_01, "{row}");
    }
    // September agrees day by day and service by service.
    let september = succeeded(&gpuledger(
        database_url,
        &["report", "cross-check", "--period", "2026-09", "--format", "json"],
    ));
    assert_eq!(september["within_tolerance"], true, "{september}");
    assert_eq!(september["rows"], json!([]));
    assert_eq!(september["days_checked"], 30);

    // The Overview shows July and August from Cost Explorer, marked, before the CUR months;
    // the Data page lists October's difference.
    let store = crate::helpers::connect(database_url).await;
    let state = AppState::new(store, AuthConfig::off());
    let overview = get_json(&state, "/?format=json").await;
    let trend = overview["trend"]["rows"].as_array().unwrap();
    let months: Vec<(&str, &str)> =
        trend.iter().map(|r| (r["month"].as_str().unwrap(), r["source"].as_str().unwrap())).collect();
    assert_eq!(
        months,
        [
            ("2026-07", "cost explorer"),
            ("2026-08", "cost explorer"),
            ("2026-09", "bills"),
            ("2026-10", "bills")
        ]
    );
    for (row, month) in trend.iter().zip(["2026-07", "2026-08"]) {
        // Page JSON money is an exact decimal string.
        let spend = gpuledger::money::nanos_from_decimal(row["spend"].as_str().unwrap()).unwrap() / 1000;
        assert_eq!(spend, history_total(&page_one, month), "{month}");
        assert!(row["gpu_utilization"].is_null(), "no usage split for history: {row}");
    }
    let data = get_json(&state, "/data?format=json").await;
    let checks = data["cross_check"].as_array().unwrap();
    let october = checks.iter().find(|c| c["period"] == "2026-10").unwrap();
    assert_eq!(october["rows"].as_array().unwrap().len(), 2);
    let runs = state.store.ingest_runs(10).await.unwrap();
    assert_eq!(runs.iter().filter(|r| r.kind == gpuledger::domain::runs::RunKind::CostExplorer).count(), 2);
}

async fn get_json(state: &AppState, uri: &str) -> Value {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let request = axum::http::Request::builder().uri(uri).body(axum::body::Body::empty()).unwrap();
    let response = router(state.clone()).oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200, "{uri}");
    let body = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test]
async fn history_cross_check_and_repeat_runs_on_sqlite_and_postgres() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), Scale::Demo, CurFormat::Parquet, 2, 53);
    story(&format!("sqlite:{}", dir.path().join("ledger.db").display()), dir.path()).await;
    if let Some(postgres) = crate::helpers::fresh_postgres().await {
        story(&postgres.url, dir.path()).await;
    }
}

/// What the Cost Explorer tables hold, to compare before and after a failed run.
async fn stored(store: &dyn Store) -> (usize, usize) {
    (
        store.ce_days(i64::MIN, i64::MAX).await.unwrap().len(),
        store.ce_costs(i64::MIN, i64::MAX).await.unwrap().len(),
    )
}

#[tokio::test]
async fn a_bad_answer_or_no_answer_stores_nothing() {
    let Some(moto) = start_moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let database_url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let store = crate::helpers::connect(&database_url).await;
    let day = |start: &str, end: &str, amount: &str| {
        json!({
            "TimePeriod": {"Start": start, "End": end},
            "Total": {},
            "Groups": [{
                "Keys": ["Amazon Simple Storage Service", "222222222222"],
                "Metrics": {
                    "UnblendedCost": {"Amount": amount, "Unit": "USD"},
                    "AmortizedCost": {"Amount": amount, "Unit": "USD"},
                    "NetAmortizedCost": {"Amount": amount, "Unit": "USD"},
                },
            }],
            "Estimated": false,
        })
    };
    // A good first page, then a page with an amount that is not a number.
    seed(
        &moto,
        vec![
            json!({"ResultsByTime": [day("2026-07-01", "2026-07-02", "1.25")], "NextPageToken": "2"}),
            json!({"ResultsByTime": [day("2026-07-02", "2026-07-03", "1,25")]}),
        ],
    )
    .await;
    let output = ingest_ce(&moto, &database_url, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("request 2"), "{stderr}");
    assert!(stderr.contains("2026-07-02, Amazon Simple Storage Service, account 222222222222"), "{stderr}");
    assert!(stderr.contains("\"1,25\" is not an amount"), "{stderr}");
    assert_eq!(stored(store.as_ref()).await, (0, 0), "the good first page is not kept either");

    // Nothing listening: a clear error naming the request, and nothing stored.
    let closed = format!("http://127.0.0.1:{}", crate::s3::free_port());
    let output = gpuledger(
        &database_url,
        &[
            "ingest",
            "cost-explorer",
            "--from",
            "2026-07-01",
            "--to",
            "2026-07-03",
            "--endpoint-url",
            &closed,
            "--today",
            TODAY,
            "--timeout",
            "2",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("Cost Explorer request 1 (days 2026-07-01 to 2026-07-03"), "{stderr}");
    assert_eq!(stored(store.as_ref()).await, (0, 0));
    let runs = store.ingest_runs(10).await.unwrap();
    let failed: Vec<_> =
        runs.iter().filter(|r| r.kind == gpuledger::domain::runs::RunKind::CostExplorer).collect();
    assert_eq!(failed.len(), 2);
    assert!(failed.iter().all(|r| r.status.to_string() == "failed" && r.error.is_some()), "{failed:?}");
}

/// The requests a local server saw: each one's `X-Amz-Target` and JSON body.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>;

/// A local Cost Explorer for the recommendations: answers each operation (the
/// `X-Amz-Target` after its service's name) and `SavingsPlansType` of its body (empty for
/// none) what `answers` gives them, and keeps each request's target header and body.
fn recommendation_server(answers: Vec<(&'static str, &'static str, String)>) -> (String, Seen) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut length, mut target) = (0usize, String::new());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(value) = lower.strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap_or(0);
                }
                if lower.starts_with("x-amz-target:") {
                    target = line["x-amz-target:".len()..].trim().to_string();
                }
            }
            let mut body = vec![0u8; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let operation = target.rsplit('.').next().unwrap_or_default();
            let kind = body["SavingsPlansType"].as_str().unwrap_or_default();
            let answer = answers
                .iter()
                .find(|(o, k, _)| *o == operation && *k == kind)
                .map_or("{}", |(_, _, a)| a.as_str());
            kept.lock().unwrap().push((target.clone(), body.clone()));
            let mut stream = stream;
            let _ = stream.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                )
                .as_bytes(),
            );
        }
    });
    (url, seen)
}

/// The small world's month (seed 42) generated into a temporary folder and its CUR ingested
/// into SQLite there: the folder (with the generator's saved Cost Explorer answers) and the
/// database URL.
fn small_world_ledger() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), Scale::Small, CurFormat::Parquet, 1, 42);
    let url = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let root = export_root(dir.path()).display().to_string();
    let output = crate::ingest_cur::run(&["--database-url", &url, "ingest", "cur", &root]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    (dir, url)
}

/// `report commitments --aws-cost-explorer`: AWS's Compute and EC2 Instance Savings Plan and
/// reservation recommendations asked through the real SDK (three requests, one-year No
/// Upfront over 30 days), read as the saved answers are, and set beside gpuledger's advice.
#[test]
fn aws_recommendations_through_the_sdk_are_read_as_the_saved_answers() {
    let (dir, url) = small_world_ledger();
    let saved = dir.path().join("savings-plans-recommendation.json");
    let answer = std::fs::read_to_string(&saved).unwrap();
    let saved_instance_plans = dir.path().join("instance-savings-plans-recommendation.json");
    let instance_plans = std::fs::read_to_string(&saved_instance_plans).unwrap();
    let saved_reservations = dir.path().join("reservation-recommendation.json");
    let reservations = std::fs::read_to_string(&saved_reservations).unwrap();
    let (endpoint, seen) = recommendation_server(vec![
        ("GetSavingsPlansPurchaseRecommendation", "COMPUTE_SP", answer.clone()),
        ("GetSavingsPlansPurchaseRecommendation", "EC2_INSTANCE_SP", instance_plans.clone()),
        ("GetReservationPurchaseRecommendation", "", reservations.clone()),
    ]);
    let report = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_gpuledger"))
            .args(["--database-url", &url, "report", "commitments", "--format", "json"])
            .args(args)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        succeeded(&output)
    };
    let asked = report(&["--aws-cost-explorer", "--ce-endpoint-url", &endpoint]);
    let read = report(&[
        "--aws-recommendation",
        saved.to_str().unwrap(),
        "--aws-recommendation",
        saved_instance_plans.to_str().unwrap(),
        "--aws-recommendation",
        saved_reservations.to_str().unwrap(),
    ]);
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 3, "{requests:?}");
    for (request, kind) in requests.iter().zip(["COMPUTE_SP", "EC2_INSTANCE_SP"]) {
        assert_eq!(request.0, "AWSInsightsIndexService.GetSavingsPlansPurchaseRecommendation");
        assert_eq!(
            request.1,
            json!({"SavingsPlansType": kind, "TermInYears": "ONE_YEAR", "PaymentOption": "NO_UPFRONT", "LookbackPeriodInDays": "THIRTY_DAYS"})
        );
    }
    assert_eq!(requests[2].0, "AWSInsightsIndexService.GetReservationPurchaseRecommendation");
    assert_eq!(
        requests[2].1,
        json!({"Service": "Amazon Elastic Compute Cloud - Compute", "AccountScope": "PAYER", "TermInYears": "ONE_YEAR",
            "PaymentOption": "NO_UPFRONT", "LookbackPeriodInDays": "THIRTY_DAYS",
            "ServiceSpecification": {"EC2Specification": {"OfferingClass": "STANDARD"}}})
    );
    // Every advice's AWS figures are the same asked as read.
    let (all_asked, all_read) = (asked["advice"].as_array().unwrap(), read["advice"].as_array().unwrap());
    assert_eq!(all_asked.len(), all_read.len());
    for (a, r) in all_asked.iter().zip(all_read) {
        let (mut a, r) = (a["aws_recommendation"].clone(), &r["aws_recommendation"]);
        assert!(!a.is_null(), "{r}");
        a["source"] = r["source"].clone();
        assert_eq!(&a, r);
    }
    let plan = |report: &Value| {
        let advice = report["advice"].as_array().unwrap();
        advice.iter().find(|a| a["kind"] == "savings_plan" && a["family"] == "Compute").unwrap().clone()
    };
    let (mut through_sdk, from_file) =
        (plan(&asked)["aws_recommendation"].clone(), plan(&read)["aws_recommendation"].clone());
    assert_eq!(through_sdk["source"], "Cost Explorer");
    through_sdk["source"] = from_file["source"].clone();
    assert_eq!(through_sdk, from_file);
    // The figures AWS wrote, as fractions where AWS wrote percentages.
    let aws: Value = serde_json::from_str(&answer).unwrap();
    let detail = &aws["SavingsPlansPurchaseRecommendation"]["SavingsPlansPurchaseRecommendationDetails"][0];
    let number = |v: &Value| v.as_str().unwrap().parse::<f64>().unwrap();
    assert_eq!(
        from_file["hourly_commitment"].as_f64().unwrap(),
        number(&detail["HourlyCommitmentToPurchase"])
    );
    let utilization = from_file["estimated_average_utilization"].as_f64().unwrap();
    assert!((utilization - number(&detail["EstimatedAverageUtilization"]) / 100.0).abs() < 1e-9);
    assert_eq!(
        (from_file["lookback_days"].as_u64(), from_file["term"].as_str()),
        (Some(30), Some("ONE_YEAR"))
    );
    // gpuledger's best over the same 30 days of On-Demand usage is AWS's, found by AWS's own
    // search, to the tenth of a cent AWS writes.
    let difference = from_file["same_lookback_difference"].as_f64().unwrap();
    assert!(difference.abs() <= 0.0005 + 1e-9, "{from_file}");
    // The plan ends on 2026-12-01, inside the three months after October: gpuledger's advice
    // renews it, so commits more than AWS, by about the plan's $99.64 an hour, and says why.
    let advice = plan(&read);
    let renewed = advice["renews"].as_array().unwrap();
    assert_eq!(renewed.len(), 1, "{advice}");
    let reasons = from_file["reasons"].as_array().unwrap();
    assert!(reasons.iter().any(|r| r.as_str().unwrap().contains("renewing")), "{reasons:?}");
    let more = from_file["difference"].as_f64().unwrap();
    assert!(more > 0.5 * 99.64 && more < 1.5 * 99.64, "{from_file}");
}

/// AWS's reservation recommendation on the small world: each type and region AWS recommends
/// reserving (whole instances, its own search over the counts) that the bill reserves none
/// of is advised by gpuledger at AWS's rate, on that region's hours, and over the same 30
/// days of On-Demand instance-hours gpuledger's quantile buys as many, as much used; the
/// reserved g5.12xlarge, which never ran On-Demand, AWS recommends none of, and gpuledger
/// none more.
#[test]
fn aws_reservation_recommendation_is_set_beside_the_reservations_advice() {
    let (dir, url) = small_world_ledger();
    let saved = dir.path().join("reservation-recommendation.json");
    let output = crate::ingest_cur::run(&[
        "--database-url",
        &url,
        "report",
        "commitments",
        "--format",
        "json",
        "--aws-recommendation",
        saved.to_str().unwrap(),
    ]);
    let report = succeeded(&output);
    let aws: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let details = aws["Recommendations"][0]["RecommendationDetails"].as_array().unwrap();
    assert!(!details.is_empty(), "{aws}");
    let number = |v: &Value| v.as_str().unwrap().parse::<f64>().unwrap();
    let advice = report["advice"].as_array().unwrap();
    // AWS's per type and region: its count, what they cost an hour, and the hours they would
    // have used (utilization × count × 720).
    let mut regions = std::collections::BTreeSet::new();
    for detail in details {
        let ec2 = &detail["InstanceDetails"]["EC2InstanceDetails"];
        let (instance_type, region) =
            (ec2["InstanceType"].as_str().unwrap(), ec2["Region"].as_str().unwrap());
        regions.insert(region);
        let count = number(&detail["RecommendedNumberOfInstancesToPurchase"]);
        let hourly = number(&detail["RecurringStandardMonthlyCost"]) / 730.0;
        let used_hours = number(&detail["AverageUtilization"]) / 100.0 * count * 720.0;
        let ours = advice
            .iter()
            .find(|a| {
                a["kind"] == "reservation" && a["instance_type"] == instance_type && a["region"] == region
            })
            .unwrap_or_else(|| panic!("no advice for {instance_type} in {region}: {advice:?}"));
        let theirs = &ours["aws_recommendation"];
        assert_eq!(theirs["count"].as_f64(), Some(count), "{theirs}");
        assert_eq!(ours["discount_from"], "aws_recommendation", "{ours}");
        // One reservation's rate, AWS's: its recurring monthly cost over 730 hours and its count.
        let rate = hourly / count;
        let long = &ours["long"];
        assert_eq!(long["hours"], 720, "{ours}");
        let bought = long["hourly_commitment"].as_f64().unwrap() / rate;
        assert!(
            (bought - count).abs() < 1e-6,
            "{instance_type}: gpuledger buys {bought}, AWS {count}: {ours}"
        );
        // AWS writes utilization to a hundredth of a percent.
        let used = used_hours / (count * 720.0);
        assert!((long["utilization"].as_f64().unwrap() - used).abs() <= 5e-5, "{ours} {theirs}");
        assert!(theirs["same_lookback_difference"].as_f64().unwrap().abs() < 1e-6, "{theirs}");
        assert_eq!(theirs["regions"], serde_json::json!([region]), "{theirs}");
    }
    // The world runs in two regions, and gpuledger's hours know which.
    assert_eq!(regions.into_iter().collect::<Vec<_>>(), ["us-east-1", "us-west-2"]);
    let reserved = advice.iter().find(|a| a["instance_type"] == "g5.12xlarge").unwrap();
    assert_eq!(reserved["discount_from"], "bill", "{reserved}");
    let theirs = &reserved["aws_recommendation"];
    assert_eq!(
        (&theirs["count"], &reserved["hourly_commitment"]),
        (&Value::from(0.0), &Value::from(0.0)),
        "{reserved}"
    );
    assert!(
        theirs["reasons"][0].as_str().unwrap().starts_with("AWS recommends no g5.12xlarge reservation"),
        "{theirs}"
    );
    let notes: Vec<&str> = report["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
    assert!(notes.iter().any(|n| n.contains("priced at AWS's recommendation's rate")), "{notes:?}");
}

/// AWS's EC2 Instance Savings Plan recommendation on the small world, which has no such plan:
/// each family AWS recommends one of is advised by gpuledger at the discount AWS's estimate
/// implies (the generator's 66 % of On-Demand: 34 % off, to AWS's 0.01 % of utilization),
/// over the bill's On-Demand hours of the family; over the same 30 days gpuledger's best is
/// AWS's to within a cent an hour. Bought together, each family's reservations come first and
/// the Compute plan is sized on what both leave: less than it buys alone.
#[test]
fn aws_instance_plans_recommendation_is_advised_at_its_implied_discount() {
    let (dir, url) = small_world_ledger();
    let saved: Vec<String> = [
        "savings-plans-recommendation.json",
        "instance-savings-plans-recommendation.json",
        "reservation-recommendation.json",
    ]
    .iter()
    .map(|name| dir.path().join(name).display().to_string())
    .collect();
    let mut args = vec!["--database-url", &url, "report", "commitments", "--format", "json"];
    for path in &saved {
        args.extend(["--aws-recommendation", path.as_str()]);
    }
    let report = succeeded(&crate::ingest_cur::run(&args));
    let aws: Value = serde_json::from_str(&std::fs::read_to_string(&saved[1]).unwrap()).unwrap();
    let recommendation = &aws["SavingsPlansPurchaseRecommendation"];
    assert_eq!(recommendation["SavingsPlansType"], "EC2_INSTANCE_SP");
    let details = recommendation["SavingsPlansPurchaseRecommendationDetails"].as_array().unwrap();
    assert!(details.len() > 1, "{aws}");
    let number = |v: &Value| v.as_str().unwrap().parse::<f64>().unwrap();
    let advice = report["advice"].as_array().unwrap();
    for detail in details {
        let plan = &detail["SavingsPlansDetails"];
        let (family, region) = (plan["InstanceFamily"].as_str().unwrap(), plan["Region"].as_str().unwrap());
        let hourly = number(&detail["HourlyCommitmentToPurchase"]);
        let ours = advice
            .iter()
            .find(|a| a["kind"] == "savings_plan" && a["family"] == family && a["region"] == region)
            .unwrap_or_else(|| panic!("no EC2 Instance plan advice for {family} in {region}: {advice:?}"));
        assert_eq!(ours["discount_from"], "aws_recommendation", "{ours}");
        assert!((ours["discount"].as_f64().unwrap() - 0.34).abs() < 1e-4, "{ours}");
        let theirs = &ours["aws_recommendation"];
        assert_eq!(theirs["savings_plans_type"], "EC2_INSTANCE_SP", "{theirs}");
        assert!((theirs["hourly_commitment"].as_f64().unwrap() - hourly).abs() < 1e-6, "{theirs}");
        assert_eq!(ours["long"]["hours"], 720, "{ours}");
        assert!(theirs["same_lookback_difference"].as_f64().unwrap().abs() <= 0.01, "{theirs}");
    }
    // Bought together: a reservation is sized first, on its type's On-Demand hours and the
    // share of its Compute plan hours that ends in the horizon (so no fewer than alone), the
    // Compute plan last, on fewer hours.
    for a in advice.iter().filter(|a| a["kind"] == "reservation") {
        let (alone, together) =
            (a["hourly_commitment"].as_f64().unwrap(), a["together"]["hourly_commitment"].as_f64().unwrap());
        assert!(together >= alone - 1e-9, "{a}");
    }
    let plan = advice.iter().find(|a| a["kind"] == "savings_plan" && a["family"] == "Compute").unwrap();
    let (alone, together) = (
        plan["hourly_commitment"].as_f64().unwrap(),
        plan["together"]["hourly_commitment"].as_f64().unwrap(),
    );
    assert!(together < alone, "{plan}");
    let sum = |key: &dyn Fn(&Value) -> f64| advice.iter().map(key).sum::<f64>();
    let bought_together = sum(&|a| a["together"]["monthly_net_savings"].as_f64().unwrap());
    assert!(bought_together < sum(&|a| a["monthly_net_savings"].as_f64().unwrap()));
    assert_eq!(report["together"][0]["currency"], "USD");
    assert!((report["together"][0]["monthly_net_savings"].as_f64().unwrap() - bought_together).abs() < 1e-4);
}
