//! The web edge as a newcomer meets it: every page bare and filtered, every download link on
//! it followed (right content type, same totals as the page's JSON twin), every bad parameter
//! a 400 that names it and lists the choices (JSON for JSON requests), unknown paths a
//! themed 404, and a filter form that shows the range in use.

use axum::http::StatusCode;
use serde_json::Value;

use crate::app::TestApp;
use gpuledger::web::registry;

/// The download and JSON links of a page, unescaped (`&#38;` → `&`).
fn format_links(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(|href| href.replace("&#38;", "&").replace("&amp;", "&"))
        .filter(|href| href.contains("format="))
        .collect()
}

async fn fetch(app: &TestApp, uri: &str, accept: Option<&str>) -> (StatusCode, String, Vec<u8>) {
    let answer = app.fetch(uri, accept).await;
    (answer.status, answer.content_type, answer.body)
}

#[tokio::test]
async fn every_download_on_every_page_works_bare_and_filtered() {
    let state = TestApp::demo().await;
    let mut followed = 0;
    // The fleet's dashboards (every role but client users, cached), the Plan and one client's
    // page.
    let dashboards = registry::PAGES.iter().filter(|p| p.get.who == registry::Who::Staff && p.cached);
    let pages: Vec<&str> = dashboards.map(|p| p.path).chain(["/plan", "/clients/acme"]).collect();
    assert_eq!(
        pages,
        ["/", "/costs", "/clients", "/gpus", "/inference", "/savings", "/plan", "/clients/acme"]
    );
    for page in pages {
        for filters in ["", "?period=2026-09", "?from=2026-10-01&to=2026-10-15", "?group=client"] {
            if filters == "?group=client" && page != "/costs" {
                continue;
            }
            let uri = format!("{page}{filters}");
            let (status, _, html) = fetch(&state, &uri, None).await;
            let html = String::from_utf8(html).unwrap();
            assert_eq!(status, StatusCode::OK, "{uri}: {html}");
            let links = format_links(&html);
            assert!(links.iter().any(|l| l.contains("format=json")), "{uri} links its JSON twin");
            for link in &links {
                assert!(link.starts_with(page), "{uri}: {link} starts from the page's own path");
                let (status, content_type, body) = fetch(&state, link, None).await;
                assert_eq!(status, StatusCode::OK, "{uri}: {link}");
                followed += 1;
                if link.contains("format=json") {
                    assert!(content_type.starts_with("application/json"), "{link}: {content_type}");
                    continue;
                }
                let table = link.split("table=").nth(1).unwrap().split('&').next().unwrap().to_string();
                let twin = link.replace("format=csv", "format=json").replace("format=xlsx", "format=json");
                let (_, _, json) = fetch(&state, &twin, None).await;
                let json: Value = serde_json::from_slice(&json).unwrap();
                let rows = json[&table]["rows"].as_array().unwrap_or_else(|| panic!("{twin}: {table}"));
                let totals = json[&table]["totals"].as_array().map_or(0, |t| t.len());
                if link.contains("format=xlsx") {
                    assert!(content_type.contains("spreadsheetml"), "{link}: {content_type}");
                    zip::ZipArchive::new(std::io::Cursor::new(body)).expect("an XLSX is a zip archive");
                    continue;
                }
                assert!(content_type.starts_with("text/csv"), "{link}: {content_type}");
                let csv = String::from_utf8(body).unwrap();
                let lines: Vec<&str> = csv.lines().collect();
                assert_eq!(lines.len() - 1, rows.len() + totals, "{link}: header + rows + totals");
                // Where the table has a total, the CSV's rows add up to the page's.
                let header: Vec<&str> = lines[0].split(',').collect();
                if let Some(column) = header.iter().position(|c| *c == "total_cost") {
                    let csv_sum: f64 = lines[1..=rows.len()]
                        .iter()
                        .map(|l| l.split(',').nth(column).unwrap().parse::<f64>().unwrap_or(0.0))
                        .sum();
                    // Money in a JSON twin is an exact decimal string, never a float.
                    let json_sum: f64 = rows
                        .iter()
                        .map(|r| match &r["total_cost"] {
                            Value::String(decimal) => decimal.parse::<f64>().unwrap(),
                            Value::Null => 0.0,
                            other => panic!("{link}: total_cost {other} is not a decimal string"),
                        })
                        .sum();
                    assert!(
                        (csv_sum - json_sum).abs() < 1e-6 * (rows.len() as f64 + 1.0),
                        "{link}: {csv_sum} vs {json_sum}"
                    );
                }
            }
        }
    }
    assert!(followed > 60, "followed {followed} links");
}

#[tokio::test]
async fn bad_parameters_are_400s_naming_the_parameter_and_the_choices() {
    let state = TestApp::demo().await;
    let cases = [
        ("/costs?period=2026-13", "period", "2026-10"),
        ("/costs?period=2026-9", "period", "2026-09"),
        ("/?period=2025-01", "period", "2026-10"),
        ("/costs?from=2026-10-05&to=2026-10-01", "to", "2026-10"),
        ("/costs?from=2026-02-30&to=2026-03-02", "from", "2026-10"),
        ("/costs?from=2026-10-01", "to", "2026-10"),
        ("/costs?to=2026-10-01", "from", "2026-10"),
        ("/costs?group=bogus", "group", "namespace"),
        ("/costs?format=csv&table=bogus", "table", "costs"),
        ("/costs?format=pdf", "format", "xlsx"),
        ("/costs?cluster=nope", "cluster", "ml-prod"),
        ("/costs?namespace=nope", "namespace", "acme-llm"),
        ("/costs?group=pod&namespace=acme-llm", "group", "workload"),
        ("/plan?months=4", "months", "3"),
    ];
    for (uri, parameter, choice) in cases {
        let (status, content_type, body) = fetch(&state, uri, None).await;
        let html = String::from_utf8(body).unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {html}");
        assert!(content_type.starts_with("text/html"), "{uri}: {content_type}");
        assert!(
            html.contains(&format!("<code>{parameter}</code>")) && html.contains(choice),
            "{uri}: {html}"
        );
        // The same for a script: JSON with the parameter and the valid choices.
        let (status, content_type, body) = fetch(&state, uri, Some("application/json")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}");
        assert!(content_type.starts_with("application/json"), "{uri}: {content_type}");
        let error: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(error["parameter"], parameter, "{uri}: {error}");
        assert!(
            error["choices"].as_array().unwrap().iter().any(|c| c.as_str().unwrap().contains(choice)),
            "{uri}: {error}"
        );
    }
    // A parameter given twice (#37: a plain-text 400): themed, and JSON for a script.
    let (status, content_type, body) = fetch(&state, "/costs?period=2026-10&period=2026-09", None).await;
    let html = String::from_utf8(body).unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(
        content_type.starts_with("text/html") && html.contains("duplicate field"),
        "{content_type}: {html}"
    );
    let (status, _, body) =
        fetch(&state, "/costs?period=2026-10&period=2026-09", Some("application/json")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (error["status"].as_u64(), error["parameter"].as_str()),
        (Some(400), Some("query")),
        "{error}"
    );
    // Unknown paths and clients: themed 404s that say what exists.
    let (status, _, body) = fetch(&state, "/nope", None).await;
    let html = String::from_utf8(body).unwrap();
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(html.contains("There is no page at /nope") && html.contains("href=\"/costs\""), "{html}");
    let (status, _, body) = fetch(&state, "/nope?format=json", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap()["status"], 404);
    let (status, _, body) = fetch(&state, "/clients/ACME", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(String::from_utf8(body).unwrap().contains("did you mean &#34;acme&#34;?"));
}

#[tokio::test]
async fn the_filter_form_shows_the_range_in_use_and_a_month_wins_over_dates() {
    let state = TestApp::demo().await;
    let page = |uri: &'static str| {
        let state = &state;
        async move { String::from_utf8(fetch(state, uri, None).await.2).unwrap() }
    };
    // A range: "custom range" chosen, its dates filled, its label in the heading.
    let html = page("/costs?from=2026-10-01&to=2026-10-15").await;
    assert!(html.contains("<option value=\"\" selected>custom range"), "{html}");
    assert!(html.contains("value=\"2026-10-01\"") && html.contains("value=\"2026-10-15\""));
    // A month picked while the form still holds dates: the month, and the dates cleared.
    let html = page("/costs?period=2026-09&from=2026-10-01&to=2026-10-15").await;
    assert!(html.contains("<option value=\"2026-09\" selected>"), "{html}");
    assert!(!html.contains("value=\"2026-10-01\""), "the stale dates are not shown again");
    let json: Value =
        serde_json::from_str(&page("/costs?period=2026-09&from=2026-10-01&to=2026-10-15&format=json").await)
            .unwrap();
    assert_eq!(json["period"], "2026-09");
}

/// A client that sends its request headers too slowly is cut off (the header-read timeout,
/// here one second), while a whole request on another connection is answered, with the
/// peer's address known to the handlers (the login form's rate limit counts by it).
#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_disconnected() {
    use std::io::{Read, Write};
    let app = crate::app::TestApp::empty().await;
    // Signed in through a proxy trusted at 127.0.0.1: only a server that knows the peer's
    // address lets the header through.
    let header = axum::http::HeaderName::from_static("x-forwarded-email");
    let mode = gpuledger::web::AuthMode::Proxy { header, trusted: vec!["127.0.0.1".parse().unwrap()] };
    let mut config = gpuledger::web::AuthConfig::local();
    config.mode = mode;
    let state = gpuledger::web::AppState::new(
        crate::helpers::connect(&format!("sqlite:{}", app.data().join("proxy.db").display())).await,
        config,
    );
    let viewer = gpuledger::auth::User::new("dana", gpuledger::auth::Role::Viewer, Vec::new(), String::new());
    state.store.create_user(&viewer).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let router = gpuledger::web::router(state);
    let timeout = std::time::Duration::from_secs(1);
    tokio::spawn(gpuledger::web::listen::serve(listener, router, timeout, std::future::pending()));

    let slow = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ").unwrap();
        let mut answer = Vec::new();
        // The server closes the connection (after a 408, or without a word); a server that
        // waited for ever would make this read time out with an error instead.
        let outcome = stream.read_to_end(&mut answer);
        (outcome.is_ok(), String::from_utf8_lossy(&answer).to_string())
    });
    let whole = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        let request =
            "GET /account HTTP/1.1\r\nHost: x\r\nX-Forwarded-Email: dana\r\nConnection: close\r\n\r\n";
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    });
    let answer = whole.await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains("dana"), "{answer}");
    let (closed, said) = slow.await.unwrap();
    assert!(closed, "the slow client's connection was closed by the server");
    assert!(said.is_empty() || said.starts_with("HTTP/1.1 408"), "{said}");
}

#[tokio::test]
async fn every_page_of_the_registry_answers_its_json_keys_and_sits_in_the_navigation() {
    let state = TestApp::demo().await;
    let mut checked = 0;
    for page in registry::PAGES.iter().filter(|p| !p.json.is_empty()) {
        let path = page.path.replace("{client}", "acme");
        let (status, content_type, body) =
            fetch(&state, &format!("{path}?period=2026-10&format=json"), None).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(content_type.starts_with("application/json"), "{path}: {content_type}");
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        for key in page.json {
            assert!(json.get(key).is_some(), "{path}'s JSON lacks {key:?}: {json}");
        }
        checked += 1;
    }
    assert_eq!(checked, 10, "pages with a JSON contract");
    // The navigation lists the registry's entries in its order, the current one marked.
    let (_, _, html) = fetch(&state, "/costs", None).await;
    let html = String::from_utf8(html).unwrap();
    let nav = &html[html.find(r#"<nav aria-label="Main">"#).unwrap()..html.find("</nav>").unwrap()];
    let links: Vec<&str> = nav.split("href=\"").skip(1).map(|rest| rest.split('"').next().unwrap()).collect();
    let expected: Vec<&str> = registry::nav().map(|(path, _, _)| path).collect();
    assert_eq!(links, expected);
    assert_eq!(links.len(), 10);
    assert!(nav.contains(r#"<a href="/costs" aria-current="page">Costs</a>"#), "{nav}");
}
