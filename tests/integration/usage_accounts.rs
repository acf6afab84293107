//! Accounts in the bill: the generator's payer (its Savings Plan fee) and two linked
//! accounts (one per cluster), each reconciled to truth on the Costs page and in `report
//! accounts`; the account filter narrowing Costs, Clients, GPUs and the reports, with the
//! parts of every account adding up to the whole.

use serde_json::Value;

use crate::app::Amount;
use crate::engine::close;
use crate::ingest_cur::run;

const PAYER: &str = "111111111111";
const PLATFORM: &str = "222222222222";
const RESEARCH: &str = "333333333333";

fn usd(value: &Value) -> f64 {
    value.amount()
}

/// The row of `rows` whose `key` is `value`.
fn row<'a>(rows: &'a Value, key: &str, value: &str) -> &'a Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r[key] == value)
        .unwrap_or_else(|| panic!("no {key} {value} in {rows}"))
}

fn total(table: &Value, label_key: &str, label: &str, column: &str) -> f64 {
    usd(&row(&table["totals"], label_key, label)[column])
}

#[tokio::test]
async fn each_usage_account_reconciles_to_truth_and_narrows_pages_and_reports() {
    let app = crate::app::TestApp::small().await;
    let truth = app.truth("2026-10");
    let accounts = truth["accounts"].as_object().unwrap();
    assert_eq!(
        accounts.keys().collect::<Vec<_>>(),
        [PAYER, PLATFORM, RESEARCH],
        "a payer and two linked accounts"
    );

    // The Costs page's accounts table: each account to the cent, the total the amortized bill.
    let costs = app.json("/costs?period=2026-10&format=json").await;
    let table = &costs["accounts"];
    for (id, t) in accounts {
        let r = row(&table["rows"], "account", id);
        assert_eq!(r["name"], t["name"], "{id}'s name from the export");
        close(usd(&r["amortized_cost"]), usd(&t["amortized_cost"]), &format!("{id} amortized"));
        close(usd(&r["kubernetes_cost"]), usd(&t["kubernetes_cost"]), &format!("{id} Kubernetes"));
        let parts = usd(&r["kubernetes_cost"]) + usd(&r["unallocated_ec2_cost"]) + usd(&r["other_cost"]);
        close(parts, usd(&r["amortized_cost"]), &format!("{id}: Kubernetes + unallocated + other"));
    }
    // The payer runs no instances: its whole cost is the Savings Plan commitment it did not use.
    close(usd(&row(&table["rows"], "account", PAYER)["kubernetes_cost"]), 0.0, "the payer runs no pods");
    close(
        total(table, "account", "Total", "amortized_cost"),
        usd(&truth["bill_amortized"]),
        "Σ accounts = bill",
    );
    let kubernetes_total = total(&costs["costs"], "namespace", "Kubernetes total", "total_cost");

    // One account chosen: its pods' cost, reconciled to its own bill; the two linked
    // accounts' Kubernetes cost adds up to the fleet's.
    let mut kubernetes_by_account = 0.0;
    for id in [PLATFORM, RESEARCH] {
        let t = &accounts[id];
        let narrowed = app.json(&format!("/costs?period=2026-10&account={id}&format=json")).await;
        let costs = &narrowed["costs"];
        let kubernetes = total(costs, "namespace", "Kubernetes total", "total_cost");
        close(kubernetes, usd(&t["kubernetes_cost"]), &format!("{id}'s pods"));
        close(total(costs, "namespace", "Bill (amortized)", "total_cost"), usd(&t["amortized_cost"]), id);
        let parts = kubernetes
            + total(costs, "namespace", "EC2 not allocated to pods", "total_cost")
            + total(costs, "namespace", "Other AWS cost (not Kubernetes)", "total_cost");
        close(parts, usd(&t["amortized_cost"]), &format!("{id} reconciles to its bill"));
        assert_eq!(narrowed["accounts"]["rows"].as_array().unwrap().len(), 1, "{id}: its own row only");
        kubernetes_by_account += kubernetes;

        // Clients: each client's cost in the account, adding up to the account's pods.
        let clients = app.json(&format!("/clients?period=2026-10&account={id}&format=json")).await;
        let in_account = total(&clients["clients"], "client", "Total", "kubernetes_cost");
        close(in_account, usd(&t["kubernetes_cost"]), &format!("{id}: clients' Kubernetes cost"));
    }
    close(kubernetes_by_account, kubernetes_total, "the linked accounts' pods = the fleet's Kubernetes cost");

    // Grouped by account: one row per account that ran pods.
    let grouped = app.json("/costs?period=2026-10&group=account&format=json").await;
    let rows = &grouped["costs"]["rows"];
    assert_eq!(rows.as_array().unwrap().len(), 2, "{rows}");
    close(
        usd(&row(rows, "account", RESEARCH)["total_cost"]),
        usd(&accounts[RESEARCH]["kubernetes_cost"]),
        "group",
    );

    // GPUs: each account's provisioned GPU-hours are its own instances'; together the fleet's.
    let provisioned = |gpus: &Value| -> f64 {
        gpus["gpu"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["namespace"] == "(all)")
            .map(|r| usd(&r["provisioned_gpu_hours"]))
            .sum()
    };
    let fleet = provisioned(&app.json("/gpus?period=2026-10&format=json").await);
    let mut by_account = 0.0;
    for id in [PLATFORM, RESEARCH] {
        let hours = provisioned(&app.json(&format!("/gpus?period=2026-10&account={id}&format=json")).await);
        assert!(hours > 0.0 && hours < fleet, "{id}: {hours} of {fleet} GPU-hours");
        by_account += hours;
    }
    assert!((by_account - fleet).abs() < 1e-6, "accounts' GPU-hours {by_account} = fleet {fleet}");
    // ... and the GPUs page groups them: one row per account with GPU instances or GPU pods.
    let gpus = app.json("/gpus?period=2026-10&format=json").await;
    let grouped = &gpus["accounts"]["rows"];
    let research_hours =
        provisioned(&app.json(&format!("/gpus?period=2026-10&account={RESEARCH}&format=json")).await);
    assert!((usd(&row(grouped, "account", RESEARCH)["provisioned_gpu_hours"]) - research_hours).abs() < 1e-6);
    let grouped_total: f64 =
        grouped.as_array().unwrap().iter().map(|r| usd(&r["provisioned_gpu_hours"])).sum();
    assert!((grouped_total - fleet).abs() < 1e-6, "{grouped}");
    // The Clients page groups direct cost by client and account; each account's rows add up
    // to its pods' cost.
    let clients = app.json("/clients?period=2026-10&format=json").await;
    let by_account = clients["accounts"]["rows"].as_array().unwrap();
    for id in [PLATFORM, RESEARCH] {
        let cost: f64 =
            by_account.iter().filter(|r| r["account"] == id).map(|r| usd(&r["kubernetes_cost"])).sum();
        close(cost, usd(&accounts[id]["kubernetes_cost"]), &format!("{id}: clients by account"));
    }
    // A client's direct cost over its accounts is the chargeback's Kubernetes direct cost.
    for row in clients["clients"]["rows"].as_array().unwrap() {
        let client = row["client"].as_str().unwrap();
        let direct: f64 = by_account
            .iter()
            .filter(|r| r["client"] == client)
            .map(|r| usd(&r["kubernetes_direct_cost"]))
            .sum();
        if !client.starts_with('(') {
            close(direct, usd(&row["kubernetes_direct_cost"]), &format!("{client}'s direct cost by account"));
        }
    }

    // The filter in the page, and an account the month does not have refused with the choices.
    let page = app.page("/costs?period=2026-10").await;
    assert!(page.contains("<option value=\"333333333333\">333333333333 (ml-research)</option>"), "{page}");
    let refused = app.fetch("/costs?period=2026-10&account=999999999999", Some("application/json")).await;
    assert_eq!(refused.status, axum::http::StatusCode::BAD_REQUEST);
    let refused = refused.json();
    assert_eq!(refused["parameter"], "account", "{refused}");
    assert!(refused.to_string().contains(RESEARCH), "{refused}");

    // A workload on both clusters (aws-node runs on every node): its pods drilled down in
    // each account are that account's cluster only, and add up to its row there.
    let pods = |account: &str| {
        format!(
            "/costs?period=2026-10&group=pod&namespace=kube-system&workload=aws-node&account={account}&format=json"
        )
    };
    let mut both = 0.0;
    for (id, cluster) in [(PLATFORM, "ml-prod"), (RESEARCH, "ml-west")] {
        let drilled = app.json(&pods(id)).await;
        let rows = drilled["costs"]["rows"].as_array().unwrap();
        assert!(!rows.is_empty() && rows.iter().all(|r| r["cluster"] == cluster), "{id}: {rows:?}");
        let workloads =
            app.json(&format!("/costs?period=2026-10&group=workload&account={id}&format=json")).await;
        let own = usd(
            &row(&workloads["costs"]["rows"], "namespace_workload", "kube-system/aws-node")["total_cost"],
        );
        let pods_total = usd(&drilled["costs"]["totals"][0]["total_cost"]);
        close(pods_total, own, &format!("{id}: aws-node's pods = its row"));
        both += pods_total;
    }
    let everywhere =
        app.json("/costs?period=2026-10&group=pod&namespace=kube-system&workload=aws-node&format=json").await;
    close(
        both,
        usd(&everywhere["costs"]["totals"][0]["total_cost"]),
        "aws-node's pods in both accounts = all of them",
    );

    // The same from the command line.
    let url = app.database_url();
    let report = |args: &[&str]| -> Value {
        let mut all = vec!["--database-url", url.as_str(), "report"];
        all.extend(args);
        let output = run(&all);
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let listed = report(&["accounts", "--period", "2026-10", "--format", "json"]);
    assert_eq!(listed["rows"].as_array().unwrap().len(), 3, "{listed}");
    close(usd(&listed["amortized_total"]), usd(&truth["bill_amortized"]), "report accounts total");
    let workloads = |account: Option<&str>| {
        let mut args = vec!["workloads", "--period", "2026-10", "--format", "json"];
        args.extend(account.map(|a| ["--account", a]).into_iter().flatten());
        usd(&report(&args)["kubernetes_total"])
    };
    close(
        workloads(Some(PLATFORM)) + workloads(Some(RESEARCH)),
        workloads(None),
        "workloads by account add up",
    );
    close(workloads(Some(RESEARCH)), usd(&accounts[RESEARCH]["kubernetes_cost"]), "--account");
    // `report namespaces --account`: the account's pods, reconciled to its own bill.
    let namespaces =
        report(&["namespaces", "--period", "2026-10", "--account", RESEARCH, "--format", "json"]);
    close(
        usd(&namespaces["kubernetes_total"]),
        usd(&accounts[RESEARCH]["kubernetes_cost"]),
        "namespaces --account",
    );
    close(usd(&namespaces["bill_amortized_total"]), usd(&accounts[RESEARCH]["amortized_cost"]), "its bill");
    let output = run(&["--database-url", &url, "report", "spot", "--period", "2026-10", "--account", "42"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no usage account \"42\" in 2026-10") && stderr.contains(RESEARCH), "{stderr}");
}
