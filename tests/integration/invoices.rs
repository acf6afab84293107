//! Invoices through the binary, on both backends: a draft is the client's chargeback to the
//! cent; an issued invoice (its JSON and its PDF bytes) survives a restatement unchanged; the
//! restatement's delta becomes a numbered note; numbers are consecutive; a second invoice for
//! the same client and period is refused; concurrent issuers never share a number.

use std::path::Path;
use std::process::{Command, Output};

use gpuledger::invoice::{self, Invoice, Kind, Line};
use gpuledger::money::Cents;
use gpuledger::synth::{CurFormat, Scale};
use serde_json::Value;

use crate::helpers;
use crate::ingest_cur::{export_root, generate};

/// Runs the binary against `database`; panics with its stderr when it fails.
pub(crate) fn gl(database: &str, args: &[&str]) -> String {
    let output = try_gl(database, args);
    assert!(
        output.status.success(),
        "gpuledger {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

pub(crate) fn try_gl(database: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuledger"))
        .args(args)
        .env("GPULEDGER_DATABASE_URL", database)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

pub(crate) fn json(database: &str, args: &[&str]) -> Value {
    serde_json::from_str(&gl(database, args)).unwrap()
}

fn cents(value: &Value) -> i64 {
    value
        .as_str()
        .unwrap_or_else(|| panic!("an amount as a decimal string: {value}"))
        .parse::<Cents>()
        .unwrap()
        .0
}

/// The client's chargeback total from the clients report, rounded once to the cent.
fn charge_cents(database: &str, client: &str) -> i64 {
    // Half a cent away from zero, as the invoice rounds.
    (charge_micros(database, client) + 5_000).div_euclid(10_000)
}

/// The client's chargeback total from the clients report, in micro-dollars (as it carries it).
fn charge_micros(database: &str, client: &str) -> i64 {
    let report = json(database, &["report", "clients", "--period", "2026-10", "--format", "json"]);
    let row = report["rows"].as_array().unwrap().iter().find(|r| r["client"] == client).unwrap().clone();
    (row["total_cost"].as_f64().unwrap() * 1e6).round() as i64
}

/// `numerator / denominator` rounded half away from zero (both positive here).
fn div_round(numerator: i128, denominator: i128) -> i64 {
    ((numerator + denominator / 2) / denominator) as i64
}

fn lines_sum(document: &Value) -> i64 {
    document["lines"].as_array().unwrap().iter().map(|l| cents(&l["amount"])).sum()
}

fn pdftotext(pdf: &Path) -> String {
    let output = Command::new("pdftotext")
        .args(["-layout"])
        .arg(pdf)
        .arg("-")
        .output()
        .expect("pdftotext (poppler-utils)");
    assert!(output.status.success(), "pdftotext: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// The whole story on one database: draft, issue, refuse a second, restate, adjust, void.
fn invoice_story(database: &str, work: &Path) {
    let (first, second) = (work.join("first"), work.join("second"));
    generate(&first, Scale::Demo, CurFormat::Parquet, 1, 11);
    generate(&second, Scale::Demo, CurFormat::Parquet, 1, 12);
    gl(database, &["clients", "labels", "*"]);
    gl(database, &["ingest", "cur", &export_root(&first).display().to_string()]);
    gl(database, &["clients", "set", "acme", "--markup-percent", "12.5"]);
    gl(database, &["compute", "--period", "2026-10"]);
    gl(
        database,
        &["clients", "billing", "acme", "--legal-name", "Acme Corporation Ltd", "--tax-percent", "8.875"],
    );
    gl(database, &["invoice", "seller", "--name", "Northwind ML Agency", "--number-format", "NW-{seq:05}"]);

    // The draft is the chargeback to the cent, the 12.5 % markup in the lines' prices (no line
    // of its own); tax on top; the total is the sum of the lines.
    let draft =
        json(database, &["invoice", "draft", "--client", "acme", "--period", "2026-10", "--format", "json"]);
    assert_eq!(cents(&draft["markup"]), 0, "{draft}");
    let before_tax = cents(&draft["subtotal"]);
    assert_eq!(before_tax, charge_cents(database, "acme"), "{draft}");
    assert_eq!(cents(&draft["tax"]), (before_tax * 88_750 + 500_000).div_euclid(1_000_000));
    assert_eq!(lines_sum(&draft), cents(&draft["total"]));
    assert_eq!(draft["status"], "draft");
    // The workload detail adds up to the pod lines exactly.
    let pod_lines: i64 = draft["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| {
            ["gpu_training", "gpu_inference", "gpu_other", "cpu", "memory"]
                .contains(&l["category"].as_str().unwrap())
        })
        .map(|l| cents(&l["amount"]))
        .sum();
    let detail: i64 = draft["detail"].as_array().unwrap().iter().map(|r| cents(&r["amount"])).sum();
    assert!(draft["detail"].as_array().unwrap().len() >= 3, "acme runs several workloads");
    assert_eq!(detail, pod_lines);

    let number =
        gl(database, &["invoice", "issue", "--client", "acme", "--period", "2026-10", "--actor", "alice"]);
    assert_eq!(number.trim(), "NW-00001");
    let refused = try_gl(database, &["invoice", "issue", "--client", "acme", "--period", "2026-10"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("NW-00001 already stands"), "{refused:?}");
    assert_eq!(
        gl(database, &["invoice", "issue", "--client", "globex", "--period", "2026-10"]).trim(),
        "NW-00002"
    );

    let issued = json(database, &["invoice", "show", "NW-00001"]);
    assert_eq!(
        (issued["total"].clone(), issued["status"].clone()),
        (draft["total"].clone(), "issued".into())
    );
    assert_eq!(issued["lines"], draft["lines"]);
    let pdf = work.join("NW-00001.pdf");
    gl(database, &["invoice", "export", "NW-00001", "--format", "pdf", "--out", &pdf.display().to_string()]);
    let pdf_bytes = std::fs::read(&pdf).unwrap();
    let sha = invoice::sha256_hex(&pdf_bytes);
    assert_eq!(issued["pdf_sha256"].as_str(), Some(sha.as_str()));

    // What the PDF says, read back: number, buyer, period, every line, the total.
    let text = pdftotext(&pdf);
    for expected in [
        "Invoice",
        "NW-00001",
        "Acme Corporation Ltd",
        "Client acme",
        "Billing period",
        "Oct 2026",
        "Total (USD)",
    ] {
        assert!(text.contains(expected), "the PDF should say {expected:?}:\n{text}");
    }
    for line in issued["lines"].as_array().unwrap() {
        let description = line["description"].as_str().unwrap();
        let first_words: String = description.split(' ').take(4).collect::<Vec<_>>().join(" ");
        assert!(text.contains(&first_words), "line {description:?} missing:\n{text}");
        assert!(
            text.contains(line["amount"].as_str().unwrap()),
            "amount of {description:?} missing:\n{text}"
        );
    }
    assert!(text.contains(issued["total"].as_str().unwrap()));
    let png = work.join("page");
    let status = Command::new("pdftoppm")
        .args(["-png", "-r", "50", "-singlefile"])
        .arg(&pdf)
        .arg(&png)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        std::fs::metadata(work.join("page.png")).unwrap().len() > 5_000,
        "a rendered page, not a blank one"
    );

    // AWS restates the month: the issued invoice does not move; the draft shows the delta.
    gl(database, &["ingest", "cur", &export_root(&second).display().to_string(), "--force"]);
    let restated =
        json(database, &["invoice", "draft", "--client", "acme", "--period", "2026-10", "--format", "json"]);
    let delta = cents(&restated["total"]) - cents(&issued["total"]);
    assert_ne!(delta, 0, "a different month must change acme's charge");
    assert_eq!(cents(&restated["difference"]["total"]), delta);
    assert_eq!(restated["standing"], "NW-00001");
    assert_eq!(json(database, &["invoice", "show", "NW-00001"]), issued, "an issued invoice never changes");
    gl(database, &["invoice", "export", "NW-00001", "--format", "pdf", "--out", &pdf.display().to_string()]);
    assert_eq!(std::fs::read(&pdf).unwrap(), pdf_bytes, "nor does its PDF");

    // The note carries exactly the delta, refers to the invoice, and takes the next number.
    assert_eq!(
        gl(database, &["invoice", "adjust", "--client", "acme", "--period", "2026-10"]).trim(),
        "NW-00003"
    );
    let note = json(database, &["invoice", "show", "NW-00003"]);
    assert_eq!(cents(&note["total"]), delta);
    assert_eq!(lines_sum(&note), delta);
    assert_eq!(note["kind"], if delta < 0 { "credit_note" } else { "debit_note" });
    assert_eq!(note["refers_to"], "NW-00001");
    assert_eq!(json(database, &["invoice", "show", "NW-00001"])["status"], "superseded");
    let again =
        json(database, &["invoice", "draft", "--client", "acme", "--period", "2026-10", "--format", "json"]);
    assert!(again["difference"].is_null(), "nothing left to adjust: {}", again["difference"]);
    assert!(
        !try_gl(database, &["invoice", "adjust", "--client", "acme", "--period", "2026-10"]).status.success()
    );

    // Voiding takes back everything that stands; then a new invoice may be issued.
    assert_eq!(
        gl(database, &["invoice", "credit", "NW-00001", "--reason", "wrong client"]).trim(),
        "NW-00004"
    );
    let credit = json(database, &["invoice", "show", "NW-00004"]);
    assert_eq!(cents(&credit["total"]), -(cents(&issued["total"]) + delta));
    assert_eq!(json(database, &["invoice", "show", "NW-00001"])["status"], "credited");
    assert_eq!(
        gl(database, &["invoice", "issue", "--client", "acme", "--period", "2026-10"]).trim(),
        "NW-00005"
    );
    let register = json(database, &["invoice", "list", "--format", "json"]);
    let numbers: Vec<&str> =
        register.as_array().unwrap().iter().map(|d| d["number"].as_str().unwrap()).collect();
    assert_eq!(numbers, ["NW-00001", "NW-00002", "NW-00003", "NW-00004", "NW-00005"]);
    let audit = gl(database, &["invoice", "list", "--client", "acme", "--format", "csv"]);
    assert_eq!(audit.lines().count(), 1 + 4, "acme's four documents:\n{audit}");
}

#[tokio::test]
async fn an_issued_invoice_survives_a_restatement_and_the_delta_is_a_numbered_note_sqlite() {
    let work = tempfile::tempdir().unwrap();
    let database = format!("sqlite:{}", work.path().join("gl.db").display());
    invoice_story(&database, work.path());
}

#[tokio::test]
async fn an_issued_invoice_survives_a_restatement_and_the_delta_is_a_numbered_note_postgres() {
    let Some(postgres) = helpers::fresh_postgres().await else { return };
    let work = tempfile::tempdir().unwrap();
    let url = postgres.url.clone();
    tokio::task::spawn_blocking(move || invoice_story(&url, work.path())).await.unwrap();
}

/// The database itself refuses to change or delete an issued document.
#[tokio::test]
async fn the_database_refuses_to_change_an_issued_invoice() {
    use sqlx::Connection;
    let work = tempfile::tempdir().unwrap();
    let path = work.path().join("gl.db");
    let database = format!("sqlite:{}", path.display());
    generate(&work.path().join("data"), Scale::Demo, CurFormat::Parquet, 1, 11);
    gl(&database, &["clients", "labels", "*"]);
    gl(&database, &["ingest", "cur", &export_root(&work.path().join("data")).display().to_string()]);
    let number = gl(&database, &["invoice", "issue", "--client", "acme", "--period", "2026-10"]);
    let mut conn = sqlx::SqliteConnection::connect(&database).await.unwrap();
    for statement in ["UPDATE invoices SET total_cents = 0", "DELETE FROM invoices"] {
        let error = sqlx::query(statement).execute(&mut conn).await.unwrap_err().to_string();
        assert!(error.contains("never"), "{statement}: {error}");
    }
    let (total,): (i64,) = sqlx::query_as("SELECT total_cents FROM invoices WHERE number = ?")
        .bind(number.trim())
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert!(total > 0);
}

/// A client invoiced in euros: no draft without a rate; with one, every line converted before
/// the one rounding to the cent, each line multiplying out in euros, the rate printed on the
/// invoice and its PDF and fixed at issue: a corrected rate for the month moves the next
/// client's draft, never the issued invoice (its draft still matches it), and its credit note
/// takes it back in euros at the same rate.
#[test]
fn a_client_invoiced_in_euros_is_converted_at_the_rate_in_force_and_keeps_it() {
    let work = tempfile::tempdir().unwrap();
    let database = format!("sqlite:{}", work.path().join("gl.db").display());
    let data = work.path().join("data");
    generate(&data, Scale::Demo, CurFormat::Parquet, 1, 11);
    gl(&database, &["clients", "labels", "*"]);
    gl(&database, &["ingest", "cur", &export_root(&data).display().to_string()]);
    for client in ["acme", "globex"] {
        gl(&database, &["clients", "billing", client, "--currency", "eur", "--tax-percent", "19"]);
    }
    let draft_of = |client: &str| {
        json(&database, &["invoice", "draft", "--client", client, "--period", "2026-10", "--format", "json"])
    };
    let refused = try_gl(&database, &["invoice", "draft", "--client", "acme", "--period", "2026-10"]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("fx set USD EUR RATE --from 2026-10"), "{said}");
    let bad = try_gl(&database, &["clients", "billing", "acme", "--currency", "euro"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a currency code"), "{bad:?}");
    gl(&database, &["fx", "set", "EUR", "USD", "1.0842", "--from", "2026-10"]);

    let draft = draft_of("acme");
    assert_eq!(
        (draft["currency"].as_str(), draft["exchange_rate"]["rate"].as_str()),
        (Some("EUR"), Some("1.0842"))
    );
    // The dollar charge ÷ 1.0842, rounded once to the cent; 19 % tax on that.
    let subtotal = div_round(i128::from(charge_micros(&database, "acme")) * 100_000, 1_084_200_000);
    assert!(subtotal > 100_000, "acme is charged more than EUR 1,000: {subtotal}");
    assert_eq!(cents(&draft["subtotal"]), subtotal, "{draft}");
    assert_eq!(cents(&draft["tax"]), div_round(i128::from(subtotal) * 190_000, 1_000_000));
    assert_eq!(lines_sum(&draft), cents(&draft["total"]));
    for line in draft["lines"].as_array().unwrap().iter().filter(|l| !l["unit_price"].is_null()) {
        let (quantity, price) = (line["quantity"].as_f64().unwrap(), line["unit_price"].as_str().unwrap());
        let (units, fraction) = price.split_once('.').unwrap();
        let scale = 10i128.pow(fraction.len() as u32);
        let price = units.parse::<i128>().unwrap() * scale + fraction.parse::<i128>().unwrap();
        let product = div_round((quantity * 100.0).round() as i128 * price, scale);
        assert_eq!(product, cents(&line["amount"]), "{line}: quantity × unit price in euros");
    }

    let number = gl(&database, &["invoice", "issue", "--client", "acme", "--period", "2026-10"]);
    let number = number.trim();
    let issued = json(&database, &["invoice", "show", number]);
    assert_eq!(
        (issued["total"].clone(), issued["exchange_rate"]["rate"].clone()),
        (draft["total"].clone(), "1.0842".into())
    );
    let pdf = work.path().join("eur.pdf");
    gl(&database, &["invoice", "export", number, "--format", "pdf", "--out", &pdf.display().to_string()]);
    let text = pdftotext(&pdf);
    for expected in
        ["Total (EUR)", "converted from USD at 1 EUR = 1.0842 USD", issued["total"].as_str().unwrap()]
    {
        assert!(text.contains(expected), "the PDF should say {expected:?}:\n{text}");
    }

    // The month's rate is corrected: the issued invoice and its draft keep 1.0842; globex,
    // not invoiced yet, drafts at 1.2.
    gl(&database, &["fx", "set", "EUR", "USD", "1.2", "--from", "2026-10"]);
    assert_eq!(json(&database, &["invoice", "show", number]), issued, "an issued invoice never changes");
    let again = draft_of("acme");
    assert_eq!(
        (again["exchange_rate"]["rate"].as_str(), again["total"].clone()),
        (Some("1.0842"), issued["total"].clone())
    );
    assert!(again["difference"].is_null(), "a rate is no restatement: {}", again["difference"]);
    let globex = draft_of("globex");
    assert_eq!(globex["exchange_rate"]["rate"], "1.2");
    let globex_subtotal = div_round(i128::from(charge_micros(&database, "globex")) * 100_000, 1_200_000_000);
    assert_eq!(cents(&globex["subtotal"]), globex_subtotal);

    let credit = gl(&database, &["invoice", "credit", number, "--reason", "wrong entity"]);
    let credit = json(&database, &["invoice", "show", credit.trim()]);
    assert_eq!(
        (credit["currency"].as_str(), credit["exchange_rate"]["rate"].as_str()),
        (Some("EUR"), Some("1.0842"))
    );
    assert_eq!(cents(&credit["total"]), -cents(&issued["total"]));
    let register = gl(&database, &["invoice", "list", "--format", "csv"]);
    assert!(register.lines().next().unwrap().ends_with(",total,currency"), "{register}");
    assert_eq!(register.lines().filter(|l| l.ends_with(",EUR")).count(), 2, "{register}");
}

/// Eight issuers at once on Postgres: four clients, each asked twice. Each client gets one
/// invoice, the other request is refused, and the four numbers are 1 to 4 with no gap.
#[tokio::test]
async fn concurrent_issues_never_share_a_number_postgres() {
    let Some(postgres) = helpers::fresh_postgres().await else { return };
    let work = tempfile::tempdir().unwrap();
    generate(&work.path().join("data"), Scale::Demo, CurFormat::Parquet, 1, 11);
    let url = postgres.url.clone();
    gl(&url, &["clients", "labels", "*"]);
    gl(&url, &["ingest", "cur", &export_root(&work.path().join("data")).display().to_string()]);
    let clients = ["acme", "globex", "initech", "umbrella"];
    let children: Vec<_> = clients
        .iter()
        .chain(clients.iter())
        .map(|client| {
            Command::new(env!("CARGO_BIN_EXE_gpuledger"))
                .args(["invoice", "issue", "--client", client, "--period", "2026-10"])
                .env("GPULEDGER_DATABASE_URL", &url)
                .env("RUST_LOG", "warn")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<Output> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    let mut numbers: Vec<String> = outputs
        .iter()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .collect();
    numbers.sort();
    assert_eq!(numbers, ["GL-2026-0001", "GL-2026-0002", "GL-2026-0003", "GL-2026-0004"], "{outputs:?}");
    for refused in outputs.iter().filter(|o| !o.status.success()) {
        assert!(String::from_utf8_lossy(&refused.stderr).contains("already stands"), "{refused:?}");
    }
    let register = json(&url, &["invoice", "list", "--format", "json"]);
    let mut owners: Vec<&str> =
        register.as_array().unwrap().iter().map(|d| d["client"].as_str().unwrap()).collect();
    owners.sort();
    assert_eq!(owners, clients);
}

/// A document with more lines than a page holds repeats the table header on every page.
#[test]
fn a_long_document_repeats_the_table_header_on_every_page() {
    let lines: Vec<Line> = (0..120)
        .map(|i| Line {
            category: format!("line_{i}"),
            description: format!("Workload number {i} of a client with a great many workloads"),
            quantity: Some(f64::from(i)),
            unit: Some("GPU-hour".into()),
            unit_price: None,
            amount: Cents(100 * i64::from(i) + 1),
        })
        .collect();
    let total: Cents = lines.iter().map(|l| l.amount).sum();
    let document = Invoice {
        number: "GL-2026-0042".into(),
        kind: Kind::Invoice,
        refers_to: None,
        client: "acme".into(),
        period: "2026-10".into(),
        status: invoice::Status::Issued,
        issued_at: Some("2026-11-02".into()),
        due_at: Some("2026-12-02".into()),
        currency: "USD".into(),
        lines,
        subtotal: total,
        markup: Cents(0),
        tax: Cents(0),
        total,
        data_version: "test".into(),
        settings_version: "settings-test".into(),
        pdf_sha256: None,
        buyer: invoice::BillingDetails::default(),
        seller: invoice::Seller::default(),
        actor: String::new(),
        reason: String::new(),
        full_credit: false,
        exchange_rate: None,
        conversions: Vec::new(),
        detail: (0..90)
            .map(|i| invoice::DetailRow {
                namespace: format!("team-{}", i % 7),
                workload: format!("job-{i}"),
                workload_class: "training".into(),
                gpu_hours: f64::from(i),
                amount: Cents(i64::from(i)),
            })
            .collect(),
    };
    let bytes = invoice::pdf::render(&document).unwrap();
    let work = tempfile::tempdir().unwrap();
    let pdf = work.path().join("long.pdf");
    std::fs::write(&pdf, &bytes).unwrap();
    let text = pdftotext(&pdf);
    let pages: Vec<&str> = text.split('\u{c}').filter(|p| !p.trim().is_empty()).collect();
    assert!(pages.len() >= 3, "120 lines take several pages: {}", pages.len());
    for (i, page) in pages.iter().enumerate() {
        let header = (page.contains("Description") || page.contains("Namespace / workload"))
            && page.contains("Amount");
        assert!(header, "page {} has no table header", i + 1);
        assert!(page.contains(&format!("page {} of {}", i + 1, pages.len())), "page {} has no foot", i + 1);
    }
    for i in [0, 57, 119] {
        assert!(text.contains(&format!("Workload number {i} of")), "line {i} missing");
    }
    // The workload detail follows, its own header repeated where it breaks across pages.
    let detail_pages = pages.iter().filter(|p| p.contains("Namespace / workload")).count();
    assert!(detail_pages >= 2, "90 detail rows take more than a page: {detail_pages}");
    assert!(text.contains("team-5 / job-89"));
    assert!(text.contains(&total.decimal()));
    assert_eq!(
        invoice::pdf::render(&document).unwrap(),
        bytes,
        "the same document renders to the same bytes"
    );
}

/// A printed decimal (`-12.3456`) times a printed quantity (to the hundredth), rounded half
/// away from zero to the cent: what a client checking a line computes.
fn printed_product_cents(quantity: &str, price: &str) -> i64 {
    let exact = |text: &str| -> (i128, u32) {
        let negative = text.starts_with('-');
        let (units, fraction) = text.trim_start_matches('-').split_once('.').unwrap_or((text, ""));
        let scale = fraction.len() as u32;
        let value =
            units.parse::<i128>().unwrap() * 10i128.pow(scale) + fraction.parse::<i128>().unwrap_or(0);
        (if negative { -value } else { value }, scale)
    };
    let ((q, q_scale), (p, p_scale)) = (exact(quantity), exact(price));
    // q × p has q_scale + p_scale decimals; a cent is 2 of them.
    let divisor = 10i128.pow(q_scale + p_scale - 2);
    let product = q * p;
    ((product.abs() + divisor / 2) / divisor * product.signum()) as i64
}

#[tokio::test]
async fn every_line_of_every_demo_invoice_multiplies_out_from_its_printed_quantity_and_price() {
    let app = crate::app::TestApp::demo().await;
    let store = app.state.store.as_ref();
    let (mut lines, mut documents) = (0, 0);
    for period in store.rollup_periods().await.unwrap() {
        let rollups = store.rollups(&period.period).await.unwrap().unwrap();
        for client in
            rollups.clients.iter().map(|c| c.client.clone()).filter(|c| gpuledger::invoice::invoiceable(c))
        {
            let draft = gpuledger::invoice::draft(
                &rollups,
                &client,
                &gpuledger::invoice::BillingDetails::default(),
                &gpuledger::invoice::Seller::default(),
                "",
                None,
            )
            .unwrap();
            documents += 1;
            // The CSV prints each line as the PDF and the page do: quantity to the hundredth,
            // the unit price as stored.
            for row in gpuledger::invoice::csv(&draft).lines().skip(1) {
                let fields: Vec<&str> = row.rsplitn(4, ',').collect();
                let (amount, price, quantity) = (fields[0], fields[1], fields[3].rsplit(',').next().unwrap());
                if price.is_empty() {
                    continue;
                }
                let cents = printed_product_cents(amount, "1.00");
                assert_eq!(
                    printed_product_cents(quantity, price),
                    cents,
                    "{client} {}: {quantity} × {price} ≠ {amount}",
                    period.period
                );
                lines += 1;
            }
            for line in draft.lines.iter().filter(|l| l.unit_price.is_some()) {
                let quantity = format!("{:.2}", line.quantity.unwrap());
                assert_eq!(
                    printed_product_cents(&quantity, line.unit_price.as_deref().unwrap()),
                    line.amount.0
                );
            }
        }
    }
    assert!(documents >= 6, "{documents} drafts");
    assert!(lines >= 5 * documents, "{lines} priced lines over {documents} drafts");
}
