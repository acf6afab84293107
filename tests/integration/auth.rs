//! Accounts, roles and client scopes at the web edge, on the demo data, through the router:
//! who may open what (every route the pages link to, with every twin and download, for each
//! role and for a client user of every client, on SQLite and Postgres), that a scoped user
//! never sees another client's name or number, that a client user never sees what it cost the
//! agency (cost to serve, markup, margin, discounts) in any page, twin, CSV, XLSX or PDF, and
//! how sign-in behaves (brute force,
//! fixation, disabled users, CSRF, `/metrics`).

use std::collections::{BTreeMap, BTreeSet};

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use gpuledger::auth::{Role, User, password};
use gpuledger::store::Store;
use gpuledger::web::{AppState, AuthConfig, router};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use crate::app::Amount;
use crate::helpers;

/// An HTTP answer with its headers.
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
    bytes: Vec<u8>,
}

impl Reply {
    fn header(&self, name: header::HeaderName) -> String {
        self.headers.get_all(name).iter().map(|v| v.to_str().unwrap_or("")).collect::<Vec<_>>().join("\n")
    }
}

/// The dashboard with local sign-in over `store`.
fn signed_in_app(store: Box<dyn Store>) -> AppState {
    let mut auth = AuthConfig::local();
    auth.metrics_token = Some("metrics-secret-token".into());
    AppState::new(store, auth)
}

async fn send(state: &AppState, method: Method, uri: &str, cookie: &str, form: Option<&str>) -> Reply {
    send_with(state, method, uri, cookie, form, &[]).await
}

async fn send_with(
    state: &AppState,
    method: Method,
    uri: &str,
    cookie: &str,
    form: Option<&str>,
    extra: &[(&str, &str)],
) -> Reply {
    let mut request = Request::builder().method(method).uri(uri).header(header::HOST, "localhost");
    if !cookie.is_empty() {
        request = request.header(header::COOKIE, cookie);
    }
    if form.is_some() {
        request = request.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    }
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let body = form.map(|f| Body::from(f.to_string())).unwrap_or_else(Body::empty);
    let response = router(state.clone()).oneshot(request.body(body).unwrap()).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Reply { status, headers, body: String::from_utf8_lossy(&bytes).into_owned(), bytes: bytes.to_vec() }
}

/// A form field's value in a page.
fn field(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker).unwrap_or_else(|| panic!("no field {name} in {html}")) + marker.len();
    html[start..].split('"').next().unwrap().to_string()
}

/// The `name=value` of a `Set-Cookie` named `name`.
fn set_cookie(reply: &Reply, name: &str) -> Option<String> {
    reply
        .header(header::SET_COOKIE)
        .lines()
        .find(|c| c.starts_with(&format!("{name}=")))
        .map(|c| c.split(';').next().unwrap().to_string())
}

fn escape(text: &str) -> String {
    gpuledger::web::url_escape(text)
}

/// Signs in through the login form (CSRF cookie and field, as a browser would); returns the
/// reply to the POST and the `Cookie` header to send afterwards.
async fn sign_in(state: &AppState, name: &str, password: &str, before: &str) -> (Reply, String) {
    let form = send(state, Method::GET, "/login", before, None).await;
    assert_eq!(form.status, StatusCode::OK, "{}", form.body);
    let csrf_cookie = set_cookie(&form, "gpuledger_login_csrf").expect("the login form sets its CSRF cookie");
    let csrf = field(&form.body, "csrf");
    let cookies = if before.is_empty() { csrf_cookie.clone() } else { format!("{before}; {csrf_cookie}") };
    let body = format!("csrf={csrf}&next=%2F&username={}&password={}", escape(name), escape(password));
    let reply = send(state, Method::POST, "/login", &cookies, Some(&body)).await;
    let session = set_cookie(&reply, "gpuledger_session").unwrap_or_default();
    (reply, session)
}

fn secret(name: &str) -> String {
    format!("a long password for {name}")
}

/// Adds a user with the password [`secret`]`(name)`.
async fn add_user(store: &dyn Store, name: &str, role: Role, clients: &[&str]) {
    let user = User::new(
        name,
        role,
        clients.iter().map(|c| c.to_string()).collect(),
        password::hash(&secret(name)).unwrap(),
    );
    store.create_user(&user).await.unwrap();
}

/// Every URL the pages link to, as an administrator sees them: the pages, their twins and
/// downloads, drill-downs and client pages (breadth first, at most `limit`).
async fn crawl(state: &AppState, cookie: &str, limit: usize) -> Vec<String> {
    // Every page of the navigation (the registry's), the admin and account pages, and:
    let pages = gpuledger::web::registry::nav().map(|(path, _, _)| path).chain(["/admin", "/account"]);
    let start = pages.chain([
        // The account filter and grouping (the demo's main linked account runs every pod).
        "/costs?account=222222222222",
        "/costs?group=account",
        "/clients?account=222222222222",
        "/gpus?account=222222222222",
        // Sorting reorders what a page shows, never what it holds: two sorted pages stand
        // for the heading links, which the crawl does not follow (they would crowd it out).
        // (A client user gets 403 for these fleet pages, as for the unsorted ones.)
        "/costs?sort=total_cost",
        "/clients?sort=total_cost&dir=asc",
        // Likewise the one-click ranges: one of them stands for all (followed, they multiply
        // every page by every range).
        "/costs?from=2026-09-01&to=2026-11-01",
        // And the pages of a long table (a CronJob's pods): the second stands for them all.
        "/costs?group=pod&namespace=internal-ml&workload=etl&page=2",
    ]);
    let start: Vec<&str> = start.collect();
    let mut seen: BTreeSet<String> = start.iter().map(|s| s.to_string()).collect();
    let mut queue: std::collections::VecDeque<String> = start.iter().map(|s| s.to_string()).collect();
    let mut order = Vec::new();
    while let Some(url) = queue.pop_front() {
        order.push(url.clone());
        if order.len() >= limit {
            break;
        }
        let reply = send(state, Method::GET, &url, cookie, None).await;
        if !reply.header(header::CONTENT_TYPE).starts_with("text/html") {
            continue;
        }
        for piece in reply.body.split("href=\"").skip(1) {
            // The templates escape `&` as `&#38;` (askama) or `&amp;`.
            let link = piece.split('"').next().unwrap().replace("&#38;", "&").replace("&amp;", "&");
            let local = link.starts_with('/') && !link.starts_with("//") && !link.starts_with("/static/");
            let local = local && !["sort=", "from=", "page="].iter().any(|p| link.contains(p));
            if local && seen.insert(link.clone()) {
                queue.push_back(link);
            }
        }
    }
    order
}

/// The demo's clients with each one's charged total for the latest month (from the
/// administrator's Clients JSON), and which client each namespace's cost belongs to.
async fn clients_and_namespaces(
    state: &AppState,
    cookie: &str,
) -> (BTreeMap<String, f64>, BTreeMap<String, String>) {
    let reply = send(state, Method::GET, "/clients?format=json", cookie, None).await;
    let json: Value = serde_json::from_str(&reply.body).unwrap();
    let clients = json["clients"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["client"].as_str().unwrap().to_string(), r["total_cost"].amount()))
        .filter(|(c, _)| !c.starts_with('('))
        .collect();
    let mut namespaces = BTreeMap::new();
    for period in state.store.rollup_periods().await.unwrap() {
        for c in state.store.rollups(&period.period).await.unwrap().unwrap().costs {
            namespaces.insert(c.namespace.clone(), c.client.clone());
        }
    }
    (clients, namespaces)
}

thread_local! {
    /// The matrix's issued documents: number → client.
    static INVOICED: std::cell::RefCell<BTreeMap<String, String>> = const { std::cell::RefCell::new(BTreeMap::new()) };
}

/// What `role` (seeing `own` clients) must get for `url`.
fn expected(role: Role, own: &[String], namespaces: &BTreeMap<String, String>, url: &str) -> StatusCode {
    let path = url.split('?').next().unwrap();
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    let scoped = matches!(role, Role::Manager | Role::Client);
    if path == "/invoices" {
        return StatusCode::OK;
    }
    if path == "/invoices/draft" {
        let client = query.split('&').find_map(|p| p.strip_prefix("client=")).unwrap_or_default();
        return match role {
            Role::Client => StatusCode::FORBIDDEN,
            Role::Manager if !own.iter().any(|c| c == client) => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        };
    }
    if let Some(document) = path.strip_prefix("/invoices/") {
        // Documents are numbered `GL-YYYY-NNNN`; the matrix issues one per client, in the
        // order of the clients' names, so the number says whose it is.
        let number = document.split('/').next().unwrap();
        let client = INVOICED.with(|invoiced| invoiced.borrow().get(number).cloned()).unwrap_or_default();
        return if !scoped || own.contains(&client) { StatusCode::OK } else { StatusCode::NOT_FOUND };
    }
    let client_page = path.strip_prefix("/clients/").map(|c| c.replace("%28", "(").replace("%29", ")"));
    if path == "/admin" {
        return if role == Role::Admin { StatusCode::OK } else { StatusCode::FORBIDDEN };
    }
    if path == "/account" {
        return StatusCode::OK;
    }
    // The bill, every run, and alerts that name every client.
    if (path == "/data" || path == "/alerts") && scoped {
        return StatusCode::FORBIDDEN;
    }
    // The Plan's fleet tables and pools are not in a scoped user's view of it: asking for one
    // names what its view has.
    let fleet_table = ["capacity", "advice", "commitments", "spot"]
        .iter()
        .any(|t| query.split('&').any(|p| p == format!("table={t}")));
    if path == "/plan" && scoped && (fleet_table || query.contains("pool=")) {
        return StatusCode::BAD_REQUEST;
    }
    if role == Role::Client {
        return match (path, &client_page) {
            ("/", _) => StatusCode::SEE_OTHER,
            // Its own forecast: the page narrows itself to the user's clients.
            ("/plan", _) => StatusCode::OK,
            (_, Some(client)) if own.contains(client) => StatusCode::OK,
            (_, Some(_)) => StatusCode::NOT_FOUND,
            _ => StatusCode::FORBIDDEN,
        };
    }
    if role == Role::Manager {
        if let Some(client) = &client_page
            && !client.starts_with('(')
            && !own.contains(client)
        {
            return StatusCode::NOT_FOUND;
        }
        // A drill-down into another client's namespace names nothing the manager may see (the
        // platform namespaces are no client's: a manager sees them).
        let namespace = query.split('&').find_map(|p| p.strip_prefix("namespace="));
        if let Some(namespace) = namespace
            && namespaces.get(namespace).is_some_and(|client| !own.contains(client) && client != "(platform)")
        {
            return StatusCode::BAD_REQUEST;
        }
    }
    StatusCode::OK
}

/// What a person reads in an answer: a page, twin or CSV as it is (without stylesheets and
/// scripts), an XLSX's cells (the text of its XML, unzipped), a PDF's text (`pdftotext`).
fn readable(reply: &Reply) -> String {
    let kind = reply.header(header::CONTENT_TYPE);
    if kind.starts_with("application/pdf") {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &reply.bytes).unwrap();
        let output = std::process::Command::new("pdftotext")
            .arg(file.path())
            .arg("-")
            .output()
            .expect("pdftotext (poppler-utils)");
        assert!(output.status.success(), "pdftotext: {}", String::from_utf8_lossy(&output.stderr));
        return String::from_utf8_lossy(&output.stdout).into_owned();
    }
    if kind.contains("spreadsheetml") {
        let mut archive = zip::ZipArchive::new(std::io::Cursor::new(&reply.bytes)).unwrap();
        let mut text = String::new();
        for i in 0..archive.len() {
            let mut file = archive.by_index(i).unwrap();
            if file.name().ends_with(".xml") {
                let mut xml = String::new();
                std::io::Read::read_to_string(&mut file, &mut xml).unwrap();
                // The cells' text, not the markup's names (a sheet has `pageMargins`).
                for piece in xml.split('<') {
                    text.push_str(piece.split_once('>').map(|(_, t)| t).unwrap_or(""));
                    text.push(' ');
                }
            }
        }
        return text;
    }
    let mut text = reply.body.clone();
    for (open, close) in [("<style", "</style>"), ("<script", "</script>")] {
        while let Some(start) = text.find(open) {
            let end = text[start..].find(close).map(|e| start + e + close.len()).unwrap_or(text.len());
            text.replace_range(start..end, "");
        }
    }
    text
}

/// Words that tell of the agency's economics, which a client user must never read. An
/// invoice's JSON and CSV keep their interface's `markup` total, at zero on documents whose
/// prices carry the markup: those two exact forms are allowed.
const AGENCY_WORDS: [&str; 7] =
    ["cost to serve", "cost_to_serve", "margin", "markup", "discount", "amortized", "net of"];

fn agency_words(text: &str) -> Vec<&'static str> {
    let text = text
        .to_lowercase()
        .replace("\"markup\":\"0.00\",", "")
        .replace("markup_total,markup_total,,,,0.00", "");
    AGENCY_WORDS.into_iter().filter(|word| text.contains(word)).collect()
}

/// The ways a client's total can be printed (JSON, CSV, the page's money).
fn printed(total: f64) -> Vec<String> {
    let plain = format!("{total:.2}");
    let (whole, cents) = plain.split_once('.').unwrap();
    let mut grouped = String::new();
    for (i, digit) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    vec![plain.clone(), format!("{grouped}.{cents}")]
}

/// The demo's markups (and a client charged net), so that a client's charge differs from what
/// it cost the agency.
async fn with_demo_terms(store: &dyn Store) {
    let terms = gpuledger::synth::demo_terms(&store.settings().await.unwrap()).unwrap();
    store.save_settings(&terms).await.unwrap();
}

/// The matrix on one database holding the demo data.
async fn the_matrix(store: Box<dyn Store>, what: &str) {
    let state = signed_in_app(store);
    let admin = "admin";
    add_user(state.store.as_ref(), admin, Role::Admin, &[]).await;
    let (_, admin_cookie) = sign_in(&state, admin, &secret(admin), "").await;
    let (clients, namespaces) = clients_and_namespaces(&state, &admin_cookie).await;
    assert!(clients.len() >= 3, "{what}: the demo has several clients: {clients:?}");
    let names: Vec<String> = clients.keys().cloned().collect();
    let manager_clients = vec![names[0].clone()];
    let mut users: Vec<(String, Role, Vec<String>)> = vec![
        (admin.into(), Role::Admin, vec![]),
        ("finance".into(), Role::Finance, vec![]),
        ("viewer".into(), Role::Viewer, vec![]),
        ("manager".into(), Role::Manager, manager_clients.clone()),
    ];
    for client in &names {
        users.push((format!("user-of-{client}"), Role::Client, vec![client.clone()]));
    }
    for (name, role, own) in &users[1..] {
        let own: Vec<&str> = own.iter().map(String::as_str).collect();
        add_user(state.store.as_ref(), name, *role, &own).await;
    }
    // An invoice for every client of the latest month, so their documents and downloads are
    // crawled too.
    let latest = state.store.rollup_periods().await.unwrap().first().unwrap().period.parse().unwrap();
    for client in &names {
        let document = gpuledger::invoice::ledger::issue(state.store.as_ref(), client, latest, "admin", true)
            .await
            .unwrap();
        INVOICED.with(|invoiced| invoiced.borrow_mut().insert(document.number, client.clone()));
    }
    // What each client cost the agency, month by month, and its markup: a client user must
    // not read these figures either (as the agency's page prints them). A month without
    // markup cost what it was charged: nothing to hide there.
    let mut costs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for client in &names {
        let reply =
            send(&state, Method::GET, &format!("/clients/{client}?format=json"), &admin_cookie, None).await;
        let json: Value = serde_json::from_str(&reply.body).unwrap();
        let figures = costs.entry(client.clone()).or_default();
        for row in json["months"]["rows"].as_array().unwrap().iter().filter(|r| r["markup"].amount() != 0.0) {
            for key in ["cost_to_serve", "markup"] {
                figures.extend(printed(row[key].amount()).into_iter().filter(|t| t.len() >= 6));
            }
        }
    }
    assert!(costs.values().filter(|f| f.len() >= 4).count() >= 2, "{what}: clients with a markup: {costs:?}");
    let urls = crawl(&state, &admin_cookie, 5000).await;
    let documents = urls.iter().filter(|u| u.starts_with("/invoices/GL-")).count();
    assert!(
        documents >= names.len() * 5,
        "{what}: every document and its downloads are crawled: {documents}"
    );
    let twins = urls.iter().filter(|u| u.contains("format=")).count();
    assert!(urls.len() > 40 && twins > 20, "{what}: crawled {} URLs, {twins} twins", urls.len());
    let mut checked = 0;
    for (name, role, own) in &users {
        let (_, cookie) = sign_in(&state, name, &secret(name), "").await;
        assert!(!cookie.is_empty(), "{what}: {name} signs in");
        // Others: every client the user may not see, with the ways its total is printed.
        let others: Vec<(&String, Vec<String>)> = if matches!(role, Role::Manager | Role::Client) {
            clients.iter().filter(|(c, _)| !own.contains(c)).map(|(c, total)| (c, printed(*total))).collect()
        } else {
            Vec::new()
        };
        for url in &urls {
            let reply = send(&state, Method::GET, url, &cookie, None).await;
            let want = expected(*role, own, &namespaces, url);
            assert_eq!(
                reply.status,
                want,
                "{what}: {name} ({role}) GET {url}: {}",
                &reply.body[..reply.body.len().min(300)]
            );
            // Downloads as a person reads them (a PDF's text, an XLSX's cells).
            let text = if others.is_empty() { String::new() } else { readable(&reply) };
            for (other, totals) in &others {
                assert!(
                    !reply.body.contains(other.as_str()) && !text.contains(other.as_str()),
                    "{what}: {name} ({role}) sees the name of {other} in {url}"
                );
                for total in totals.iter().filter(|t| t.len() >= 6) {
                    assert!(
                        !reply.body.contains(total.as_str()) && !text.contains(total.as_str()),
                        "{what}: {name} ({role}) sees {other}'s total {total} in {url}"
                    );
                }
            }
            checked += 1;
        }
        // Every download this user made is in the audit log (a cached one too); the
        // administrator crawled them as well, so only the others are counted exactly.
        let downloads = urls
            .iter()
            .filter(|u| u.contains("format=csv") || u.contains("format=xlsx"))
            .filter(|u| expected(*role, own, &namespaces, u) == StatusCode::OK)
            .count() as i64;
        let audited = state.store.count_audit("download", 0, Some(name), None).await.unwrap();
        if name != admin {
            assert_eq!(audited, downloads, "{what}: {name}'s downloads in the audit log");
        }
        // A client user reads what it is charged, never what it cost: no such word or figure
        // in anything it can get, from the administrator's links or its own pages' links.
        if *role == Role::Client {
            let own_urls = crawl(&state, &cookie, 2000).await;
            let mut read = 0;
            for url in urls.iter().chain(&own_urls) {
                let reply = send(&state, Method::GET, url, &cookie, None).await;
                assert!(!reply.status.is_server_error(), "{what}: {name} GET {url}: {}", reply.status);
                if reply.status != StatusCode::OK {
                    continue;
                }
                let text = readable(&reply);
                let words = agency_words(&text);
                assert!(words.is_empty(), "{what}: {name} reads {words:?} in {url}");
                for figure in own.iter().flat_map(|c| &costs[c]) {
                    assert!(
                        !text.contains(figure.as_str()),
                        "{what}: {name} reads the agency's figure {figure} in {url}"
                    );
                }
                read += 1;
            }
            assert!(read >= 10, "{what}: {name} read {read} answers");
            checked += read;
            // Its own view's JSON answers the keys the registry promises for it.
            let page = gpuledger::web::registry::find("/clients/x").unwrap();
            for client in own {
                let reply =
                    send(&state, Method::GET, &format!("/clients/{client}?format=json"), &cookie, None).await;
                let json: Value = serde_json::from_str(&reply.body).unwrap();
                for key in page.client_json {
                    assert!(json.get(key).is_some(), "{what}: {name}'s own view lacks {key:?}: {json}");
                }
            }
            // Its forecast: its own clients' GPU-hours, nothing of the fleet or of a cost.
            let reply = send(&state, Method::GET, "/plan?format=json", &cookie, None).await;
            let json: Value = serde_json::from_str(&reply.body).unwrap();
            let page = gpuledger::web::registry::find("/plan").unwrap();
            for key in page.client_json {
                assert!(json.get(key).is_some(), "{what}: {name}'s forecast lacks {key:?}");
            }
            for key in ["capacity", "advice", "commitments", "spot"] {
                assert!(json.get(key).is_none(), "{what}: {name}'s forecast has the fleet's {key}");
            }
            for series in json["series"].as_array().unwrap() {
                assert!(
                    own.iter().any(|c| series["key"]["client"] == c.as_str()),
                    "{what}: {name} reads {series}"
                );
                assert!(
                    series["metric"].as_str().unwrap().contains("gpu_hours"),
                    "{what}: {name} reads {series}"
                );
            }
        }
    }
    eprintln!(
        "{what}: {} URLs ({twins} twins and downloads) × {} users = {checked} answers checked",
        urls.len(),
        users.len()
    );
}

#[tokio::test]
async fn every_route_answers_each_role_as_it_should_and_scoped_users_see_no_other_client_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::helpers::connect(&format!("sqlite:{}", dir.path().join("matrix.db").display())).await;
    with_demo_terms(store.as_ref()).await;
    crate::engine::generate_and_load(store.as_ref(), dir.path(), 2, 44).await;
    the_matrix(store, "sqlite").await;
}

#[tokio::test]
async fn every_route_answers_each_role_as_it_should_and_scoped_users_see_no_other_client_on_postgres() {
    let Some(database) = helpers::fresh_postgres().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = crate::helpers::connect(&database.url).await;
    with_demo_terms(store.as_ref()).await;
    crate::engine::generate_and_load(store.as_ref(), dir.path(), 2, 44).await;
    the_matrix(store, "postgres").await;
}

#[tokio::test]
async fn sign_in_is_slowed_after_failures_fixation_is_impossible_and_disabled_users_are_out() {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::helpers::connect(&format!("sqlite:{}", dir.path().join("auth.db").display())).await;
    let state = signed_in_app(store);
    add_user(state.store.as_ref(), "dana", Role::Finance, &[]).await;

    // Not signed in: a page goes to the login form (and back afterwards), JSON gets 401.
    let page = send(&state, Method::GET, "/costs?period=2026-10", "", None).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(page.header(header::LOCATION), "/login?next=%2Fcosts%3Fperiod%3D2026-10");
    let json = send(&state, Method::GET, "/costs?format=json", "", None).await;
    assert_eq!(json.status, StatusCode::UNAUTHORIZED);
    assert_eq!(serde_json::from_str::<Value>(&json.body).unwrap()["login"], "/login");

    // Fixation: a session id planted before login is never the one after it.
    let planted = "gpuledger_session=0000000000000000000000000000000000000000000000000000000000000000";
    let (reply, session) = sign_in(&state, "dana", &secret("dana"), planted).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert!(
        reply.header(header::SET_COOKIE).contains("HttpOnly")
            && reply.header(header::SET_COOKIE).contains("SameSite=Lax")
    );
    assert_ne!(session, planted);
    assert_eq!(send(&state, Method::GET, "/account", planted, None).await.status, StatusCode::SEE_OTHER);
    let account = send(&state, Method::GET, "/account", &session, None).await;
    assert_eq!(account.status, StatusCode::OK);
    assert_eq!(account.header(header::CACHE_CONTROL), "private, no-store");
    assert!(account.header(header::VARY).starts_with("Cookie, Accept"), "{}", account.header(header::VARY));
    assert!(account.body.contains("dana (finance)"), "the page names who is signed in");

    // A POST without the session's CSRF token, or from another site, is refused.
    let csrf = field(&account.body, "csrf");
    let no_token = send(&state, Method::POST, "/logout", &session, Some("")).await;
    assert_eq!(no_token.status, StatusCode::FORBIDDEN);
    let wrong = send(&state, Method::POST, "/logout", &session, Some("csrf=deadbeef")).await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    let cross_site = send_with(
        &state,
        Method::POST,
        "/logout",
        &session,
        Some(&format!("csrf={csrf}")),
        &[("origin", "https://evil.example")],
    )
    .await;
    assert_eq!(cross_site.status, StatusCode::FORBIDDEN);
    assert_eq!(
        send(&state, Method::GET, "/account", &session, None).await.status,
        StatusCode::OK,
        "still signed in"
    );

    // Brute force: five wrong passwords, then even the right one is refused for 15 minutes.
    let started = std::time::Instant::now();
    for _ in 0..5 {
        let (wrong, cookie) = sign_in(&state, "dana", "not the password at all", "").await;
        assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
        assert!(cookie.is_empty());
    }
    let per_attempt = started.elapsed() / 5;
    let (blocked, cookie) = sign_in(&state, "dana", &secret("dana"), "").await;
    assert_eq!(blocked.status, StatusCode::TOO_MANY_REQUESTS);
    // Until the window that began with the first failure ends: at most 15 minutes.
    let wait: i64 = blocked.header(header::RETRY_AFTER).parse().unwrap();
    assert!((1..=900).contains(&wait), "{wait}");
    assert!(cookie.is_empty());
    // The five are counted in one row of their account, address and window, not logged each.
    let failures = state.store.login_failures(0, 10).await.unwrap();
    assert_eq!(failures.iter().map(|f| (f.username.as_str(), f.failures)).collect::<Vec<_>>(), [("dana", 5)]);
    assert_eq!(state.store.count_audit("login_failed", 0, Some("dana"), None).await.unwrap(), 0);
    assert_eq!(state.store.count_audit("login_blocked", 0, Some("dana"), None).await.unwrap(), 1);
    eprintln!("a failed sign-in took {per_attempt:?} (argon2id verify included); the 6th was refused");

    // Disabling a user ends the sessions it has.
    let mut dana = state.store.user("dana").await.unwrap().unwrap();
    dana.disabled = true;
    state.store.update_user(&dana, true).await.unwrap();
    assert_eq!(send(&state, Method::GET, "/account", &session, None).await.status, StatusCode::SEE_OTHER);

    // /metrics wants its bearer token.
    assert_eq!(send(&state, Method::GET, "/metrics", "", None).await.status, StatusCode::UNAUTHORIZED);
    let metrics = send_with(
        &state,
        Method::GET,
        "/metrics",
        "",
        None,
        &[("authorization", "Bearer metrics-secret-token")],
    )
    .await;
    assert_eq!(metrics.status, StatusCode::OK);
    assert!(metrics.body.contains("gpuledger_http_requests_total"));
}

#[tokio::test]
async fn logout_ends_the_session_and_the_audit_log_has_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::helpers::connect(&format!("sqlite:{}", dir.path().join("auth.db").display())).await;
    let state = signed_in_app(store);
    add_user(state.store.as_ref(), "root", Role::Admin, &[]).await;
    let (_, session) = sign_in(&state, "root", &secret("root"), "").await;
    let admin = send(&state, Method::GET, "/admin", &session, None).await;
    assert_eq!(admin.status, StatusCode::OK);
    let csrf = field(&admin.body, "csrf");
    // An administrator adds a client user through the admin page.
    let add = format!(
        "csrf={csrf}&action=add&username=carol&role=client&clients=acme&password={}",
        escape(&secret("carol"))
    );
    // Not before gpuledger knows a client acme: a misspelt client would show carol nothing.
    let refused = send(&state, Method::POST, "/admin/users", &session, Some(&add)).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(
        refused.body.contains("no client named") && refused.body.contains("knows are none yet"),
        "{}",
        refused.body
    );
    assert!(state.store.user("carol").await.unwrap().is_none());
    let history = state.store.settings().await.unwrap();
    let terms = history
        .client_version("acme", gpuledger::domain::settings::EffectiveFrom::BEGINNING, |t| {
            t.markup_basis_points = 1_000
        })
        .unwrap();
    state.store.save_settings(&[terms]).await.unwrap();
    let added = send(&state, Method::POST, "/admin/users", &session, Some(&add)).await;
    assert_eq!(added.status, StatusCode::SEE_OTHER, "{}", added.body);
    let carol = state.store.user("carol").await.unwrap().unwrap();
    assert_eq!((carol.role, carol.clients.clone()), (Role::Client, vec!["acme".to_string()]));
    let out = send(&state, Method::POST, "/logout", &session, Some(&format!("csrf={csrf}"))).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(send(&state, Method::GET, "/admin", &session, None).await.status, StatusCode::SEE_OTHER);
    let log = state.store.audit_log(&gpuledger::store::AuditQuery::newest(10)).await.unwrap();
    let actions: Vec<&str> = log.iter().rev().map(|a| a.action.as_str()).collect();
    assert_eq!(actions, ["login", "user_changed", "logout"]);
    assert!(log[1].detail.contains("carol (client)"), "{:?}", log[1]);
}

/// A dashboard signing users in through a proxy trusted at 127.0.0.1.
fn behind_proxy(store: Box<dyn Store>) -> AppState {
    let mut auth = AuthConfig::local();
    let header = header::HeaderName::from_static("x-forwarded-email");
    auth.mode = gpuledger::web::AuthMode::Proxy { header, trusted: vec!["127.0.0.1".parse().unwrap()] };
    AppState::new(store, auth)
}

/// A request from the proxy at 127.0.0.1 on behalf of `user`.
async fn through_proxy(state: &AppState, method: Method, uri: &str, user: &str, form: Option<&str>) -> Reply {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, "localhost")
        .header("x-forwarded-email", user);
    if form.is_some() {
        request = request.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    }
    let mut request =
        request.body(form.map(|f| Body::from(f.to_string())).unwrap_or_else(Body::empty)).unwrap();
    let peer: std::net::SocketAddr = "127.0.0.1:50000".parse().unwrap();
    request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
    let response = router(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Reply { status, headers, body: String::from_utf8_lossy(&bytes).into_owned(), bytes: bytes.to_vec() }
}

/// Two replicas of one database behind one proxy: a form rendered by one is accepted by the
/// other (the CSRF key of proxy users is the database's, made with the schema), while a
/// dashboard on another database, or a forged token, is refused.
async fn proxy_forms_cross_replicas(url: &str, other_url: &str) {
    let (one, two) = (behind_proxy(helpers::connect(url).await), behind_proxy(helpers::connect(url).await));
    let elsewhere = behind_proxy(helpers::connect(other_url).await);
    for state in [&one, &elsewhere] {
        add_user(state.store.as_ref(), "pat", Role::Admin, &[]).await;
    }
    let (ours, theirs) = (
        one.store.web_secret("proxy_csrf").await.unwrap(),
        elsewhere.store.web_secret("proxy_csrf").await.unwrap(),
    );
    // 32 random bytes in hex on SQLite, two UUIDs' hex digits on Postgres.
    assert!(
        ours.as_ref().is_some_and(|s| s.len() >= 60 && s.chars().all(|c| c.is_ascii_hexdigit())),
        "{ours:?}"
    );
    assert_ne!(ours, theirs, "each database makes its own secret");

    let admin = through_proxy(&one, Method::GET, "/admin", "pat", None).await;
    assert_eq!(admin.status, StatusCode::OK, "{}", admin.body);
    let csrf = field(&admin.body, "csrf");
    let add = |name: &str, token: &str| {
        format!(
            "csrf={token}&action=add&username={name}&role=viewer&clients=&password={}",
            escape(&secret(name))
        )
    };
    let added = through_proxy(&two, Method::POST, "/admin/users", "pat", Some(&add("vera", &csrf))).await;
    assert_eq!(added.status, StatusCode::SEE_OTHER, "the other replica refused the form: {}", added.body);
    assert!(two.store.user("vera").await.unwrap().is_some());

    let forged = "0".repeat(csrf.len());
    let refused =
        through_proxy(&two, Method::POST, "/admin/users", "pat", Some(&add("mallory", &forged))).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let refused =
        through_proxy(&elsewhere, Method::POST, "/admin/users", "pat", Some(&add("mallory", &csrf))).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "a token of another database's dashboard");
    assert!(two.store.user("mallory").await.unwrap().is_none());
    assert!(elsewhere.store.user("mallory").await.unwrap().is_none());
}

#[tokio::test]
async fn proxy_users_forms_rendered_by_one_replica_are_accepted_by_another_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = |name: &str| format!("sqlite:{}", dir.path().join(name).display());
    proxy_forms_cross_replicas(&url("shared.db"), &url("other.db")).await;
}

#[tokio::test]
async fn proxy_users_forms_rendered_by_one_replica_are_accepted_by_another_on_postgres() {
    let (Some(shared), Some(other)) = (helpers::fresh_postgres().await, helpers::fresh_postgres().await)
    else {
        return;
    };
    proxy_forms_cross_replicas(&shared.url, &other.url).await;
}

/// A page's text as read: the entities askama writes for quotes and ampersands undone.
fn plain(html: &str) -> String {
    html.replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&quot;", "\"")
        .replace("&#34;", "\"")
        .replace("&#38;", "&")
        .replace("&amp;", "&")
}

/// The draft's total of `client` and `period` as the pages print it ("$1,234.56").
async fn draft_total(state: &AppState, cookie: &str, client: &str, period: &str) -> String {
    let url = format!("/invoices/draft?client={client}&period={period}&format=json");
    let json: Value = serde_json::from_str(&send(state, Method::GET, &url, cookie, None).await.body).unwrap();
    let cents: gpuledger::money::Cents = json["total"].as_str().unwrap().parse().unwrap();
    cents.usd()
}

/// Issuing asks first: a POST without `confirm` says what will happen (the number it takes,
/// the total, who sees it) and issues nothing; confirmed, the invoice takes that number and
/// its page says what was done. A void asks for its reason, which the credit note prints. A
/// month is issued in one action under consecutive numbers, or not at all when one of its
/// invoices cannot be (here: issued meanwhile), and no number is used then.
#[tokio::test]
async fn issuing_and_voiding_confirm_first_and_a_month_is_issued_all_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::helpers::connect(&format!("sqlite:{}", dir.path().join("confirm.db").display())).await;
    with_demo_terms(store.as_ref()).await;
    crate::engine::generate_and_load(store.as_ref(), dir.path(), 2, 45).await;
    let state = signed_in_app(store);
    add_user(state.store.as_ref(), "fin", Role::Finance, &[]).await;
    add_user(state.store.as_ref(), "vic", Role::Viewer, &[]).await;
    let (_, cookie) = sign_in(&state, "fin", &secret("fin"), "").await;
    let csrf = field(&send(&state, Method::GET, "/account", &cookie, None).await.body, "csrf");
    let post = |url: &'static str, form: String| {
        let (state, cookie) = (state.clone(), cookie.clone());
        async move { send(&state, Method::POST, url, &cookie, Some(&form)).await }
    };
    let issued = || async { state.store.documents(None, None).await.unwrap().len() };

    // Issue acme's October: first the confirmation, then the invoice.
    let total = draft_total(&state, &cookie, "acme", "2026-10").await;
    let asked = post("/invoices/issue", format!("csrf={csrf}&client=acme&period=2026-10")).await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.body);
    assert!(plain(&asked.body).contains("Issue invoice GL-2026-0001 to acme?"), "{}", asked.body);
    assert!(
        plain(&asked.body).contains(&format!("The draft for acme, Oct 2026: {total} (USD)")),
        "{}",
        asked.body
    );
    assert!(plain(&asked.body).contains("acme's users see it"), "who will see it");
    assert_eq!(issued().await, 0, "a confirmation issues nothing");
    let done = post("/invoices/issue", format!("csrf={csrf}&client=acme&period=2026-10&confirm=yes")).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER);
    assert_eq!(done.header(header::LOCATION), "/invoices/GL-2026-0001?done=1");
    let page = send(&state, Method::GET, "/invoices/GL-2026-0001?done=1", &cookie, None).await;
    assert!(
        plain(&page.body)
            .contains(&format!("Invoice GL-2026-0001 issued to acme for Oct 2026: {total}, due ")),
        "{}",
        page.body
    );

    // Void it: the reason is asked for, since the client reads it on the credit note.
    let asked = post("/invoices/GL-2026-0001/credit", format!("csrf={csrf}&reason=")).await;
    assert_eq!(asked.status, StatusCode::OK);
    assert!(
        plain(&asked.body).contains("Void invoice GL-2026-0001?")
            && plain(&asked.body).contains("credit note GL-2026-0002"),
        "{}",
        asked.body
    );
    assert!(
        plain(&asked.body).contains("name=\"reason\"")
            && plain(&asked.body).contains("acme's users see and download"),
        "{}",
        asked.body
    );
    let refused = post("/invoices/GL-2026-0001/credit", format!("csrf={csrf}&reason=&confirm=yes")).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(plain(&refused.body).contains("A void needs a reason"), "{}", refused.body);
    let asked = post("/invoices/GL-2026-0001/credit", format!("csrf={csrf}&reason=Wrong+PO+number")).await;
    assert!(
        plain(&asked.body).contains("“Wrong PO number”"),
        "the reason is shown as the client will read it"
    );
    assert_eq!(issued().await, 1, "nothing voided before the confirmation");
    let done =
        post("/invoices/GL-2026-0001/credit", format!("csrf={csrf}&reason=Wrong+PO+number&confirm=yes"))
            .await;
    assert_eq!(done.header(header::LOCATION), "/invoices/GL-2026-0002?done=1");
    let page = send(&state, Method::GET, "/invoices/GL-2026-0002?done=1", &cookie, None).await;
    assert!(
        page.body
            .contains(&format!("Credit note GL-2026-0002 issued: invoice GL-2026-0001 is voided (-{total})")),
        "{}",
        page.body
    );

    // The month: every client's draft with the number it would take.
    let clients: Vec<String> = {
        let rollups = state.store.rollups("2026-10").await.unwrap().unwrap();
        let mut names: Vec<String> =
            rollups.clients.iter().map(|c| c.client.clone()).filter(|c| !c.starts_with('(')).collect();
        names.sort();
        names
    };
    assert!(clients.len() >= 3, "{clients:?}");
    let asked = post("/invoices/issue-month", format!("csrf={csrf}&period=2026-10")).await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.body);
    let n = clients.len();
    assert!(plain(&asked.body).contains(&format!("Issue {n} invoices for Oct 2026?")), "{}", asked.body);
    for (i, client) in clients.iter().enumerate() {
        let total = draft_total(&state, &cookie, client, "2026-10").await;
        let row = format!(
            "<th scope=\"row\">{client}</th><td>GL-2026-{:04}</td><td class=\"num\">{total}</td>",
            3 + i
        );
        assert!(plain(&asked.body).contains(&row), "{row} in {}", asked.body);
    }
    let listed = field(&asked.body, "clients");
    assert_eq!(listed, clients.join(","));
    // Meanwhile one of them is issued on its own: the batch is refused whole.
    let second = &clients[1];
    post("/invoices/issue", format!("csrf={csrf}&client={second}&period=2026-10&confirm=yes")).await;
    let refused =
        post("/invoices/issue-month", format!("csrf={csrf}&period=2026-10&clients={listed}&confirm=yes"))
            .await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert!(
        plain(&refused.body).contains(&format!(
            "invoice GL-2026-0003 already stands for {second} in 2026-10: nothing was issued"
        )),
        "{}",
        refused.body
    );
    assert_eq!(issued().await, 3, "none of the batch was issued");
    assert_eq!(state.store.series().await.unwrap().0, 3, "and no number was used");
    // Confirmed again, the rest take the next numbers, consecutive, in the order listed.
    let asked = post("/invoices/issue-month", format!("csrf={csrf}&period=2026-10")).await;
    assert!(
        plain(&asked.body).contains(&format!("{second} (invoice GL-2026-0003 stands)")),
        "{}",
        asked.body
    );
    let rest = field(&asked.body, "clients");
    let done =
        post("/invoices/issue-month", format!("csrf={csrf}&period=2026-10&clients={rest}&confirm=yes")).await;
    let last = format!("GL-2026-{:04}", 3 + n - 1);
    assert_eq!(done.header(header::LOCATION), format!("/invoices?period=2026-10&done=GL-2026-0004,{last}"));
    let documents = state.store.documents(None, Some("2026-10")).await.unwrap();
    let batch: Vec<(&str, &str)> =
        documents[3..].iter().map(|d| (d.number.as_str(), d.client.as_str())).collect();
    let expected: Vec<String> = (4..=3 + n - 1).map(|i| format!("GL-2026-{i:04}")).collect();
    let others: Vec<&String> = clients.iter().filter(|c| *c != second).collect();
    assert_eq!(batch.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>(), expected);
    assert_eq!(
        batch.iter().map(|(_, c)| c.to_string()).collect::<Vec<_>>(),
        others.iter().map(|c| c.to_string()).collect::<Vec<_>>()
    );
    let sum: gpuledger::money::Cents = documents[3..].iter().map(|d| d.total).sum();
    let page = send(&state, Method::GET, &done.header(header::LOCATION), &cookie, None).await;
    let notice =
        format!("Issued {} invoices of Oct 2026, GL-2026-0004 to {last}: {} in all.", n - 1, sum.usd());
    assert!(plain(&page.body).contains(&notice), "{notice} in {}", page.body);

    // A viewer may not issue a month.
    let (_, viewer) = sign_in(&state, "vic", &secret("vic"), "").await;
    let csrf = field(&send(&state, Method::GET, "/account", &viewer, None).await.body, "csrf");
    let refused = send(
        &state,
        Method::POST,
        "/invoices/issue-month",
        &viewer,
        Some(&format!("csrf={csrf}&period=2026-10")),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
}

/// The links of a page's main navigation.
fn nav_links(html: &str) -> Vec<String> {
    let nav = html
        .split("<nav aria-label=\"Main\">")
        .nth(1)
        .and_then(|rest| rest.split("</nav>").next())
        .unwrap_or("");
    nav.split("href=\"").skip(1).map(|link| link.split('"').next().unwrap().to_string()).collect()
}

/// A refusal keeps the user's navigation and Sign out (the account block, never its raw
/// placeholder); the navigation lists only the pages the role may open; an unknown path is a
/// 404 for every role, offering what the viewer may open.
#[tokio::test]
async fn a_refusal_keeps_the_users_way_around_and_an_unknown_path_is_not_found_for_every_role() {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::helpers::connect(&format!("sqlite:{}", dir.path().join("nav.db").display())).await;
    let state = signed_in_app(store);
    for (name, role, clients) in [
        ("ada", Role::Admin, vec![]),
        ("max", Role::Manager, vec!["acme"]),
        ("cid", Role::Client, vec!["acme"]),
    ] {
        add_user(state.store.as_ref(), name, role, &clients).await;
    }
    let (_, admin) = sign_in(&state, "ada", &secret("ada"), "").await;
    let (_, manager) = sign_in(&state, "max", &secret("max"), "").await;
    let (_, client) = sign_in(&state, "cid", &secret("cid"), "").await;

    let everything = nav_links(&send(&state, Method::GET, "/costs", &admin, None).await.body);
    assert_eq!(
        everything,
        [
            "/",
            "/costs",
            "/clients",
            "/gpus",
            "/inference",
            "/savings",
            "/plan",
            "/invoices",
            "/alerts",
            "/data"
        ]
    );
    let refused = send(&state, Method::GET, "/alerts", &manager, None).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(!refused.body.contains("gpuledger:account"), "{}", refused.body);
    assert!(
        refused.body.contains("max (manager)") && refused.body.contains(">Sign out</button>"),
        "{}",
        refused.body
    );
    assert_eq!(
        nav_links(&refused.body),
        ["/", "/costs", "/clients", "/gpus", "/inference", "/savings", "/plan", "/invoices"],
        "a manager's navigation has no page that would refuse it"
    );
    let refused = send(&state, Method::GET, "/costs", &client, None).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(refused.body.contains("cid (client)") && refused.body.contains(">Sign out</button>"));
    assert_eq!(nav_links(&refused.body), ["/clients/acme", "/plan", "/invoices"]);

    for (cookie, offered) in [(&admin, "/data"), (&manager, "/costs"), (&client, "/clients/acme")] {
        let missing = send(&state, Method::GET, "/no/such/page", cookie, None).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.body);
        assert!(
            missing.body.contains(&format!("<a href=\"{offered}\">")),
            "{offered} offered in {}",
            missing.body
        );
    }
    let missing = send(&state, Method::GET, "/no/such/page", &manager, None).await;
    assert!(!missing.body.contains("<a href=\"/data\">"), "not a page the manager may open");
}

/// Managers invoice their clients when an administrator lets them: by default they may not
/// issue; an administrator's setting (audited) lets them, for the clients they see only; they
/// fix a client's PO number, terms and tax rate on the draft (audited), and download the
/// draft as a PDF marked DRAFT.
#[tokio::test]
async fn an_administrator_lets_managers_invoice_their_clients_and_billing_details_are_edited_on_the_web() {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::helpers::connect(&format!("sqlite:{}", dir.path().join("issuers.db").display())).await;
    with_demo_terms(store.as_ref()).await;
    crate::engine::generate_and_load(store.as_ref(), dir.path(), 1, 46).await;
    let state = signed_in_app(store);
    for (name, role, clients) in
        [("ada", Role::Admin, vec![]), ("mia", Role::Manager, vec!["acme"]), ("vic", Role::Viewer, vec![])]
    {
        add_user(state.store.as_ref(), name, role, &clients).await;
    }
    let session = |name: &'static str| {
        let state = state.clone();
        async move {
            let (_, cookie) = sign_in(&state, name, &secret(name), "").await;
            let csrf = field(&send(&state, Method::GET, "/account", &cookie, None).await.body, "csrf");
            (cookie, csrf)
        }
    };
    let (admin, admin_csrf) = session("ada").await;
    let (manager, csrf) = session("mia").await;
    let (viewer, viewer_csrf) = session("vic").await;
    let issue = format!("csrf={csrf}&client=acme&period=2026-10");

    // By default a manager sees the draft, and downloads it as a PDF marked DRAFT, but does
    // not issue it.
    let refused = send(&state, Method::POST, "/invoices/issue", &manager, Some(&issue)).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(plain(&refused.body).contains("Finance and administrators issue, adjust or void invoices"));
    let draft = send(&state, Method::GET, "/invoices/draft?client=acme&period=2026-10", &manager, None).await;
    assert!(
        plain(&draft.body).contains(
            "href=\"/invoices/draft?client=acme&period=2026-10&format=pdf\" download>PDF (draft)</a>"
        ),
        "{}",
        draft.body
    );
    assert!(!draft.body.contains("action=\"/invoices/billing\""), "no billing form for who may not issue");
    let pdf =
        send(&state, Method::GET, "/invoices/draft?client=acme&period=2026-10&format=pdf", &manager, None)
            .await;
    assert_eq!(pdf.header(header::CONTENT_TYPE), "application/pdf");
    let text = readable(&pdf);
    assert!(text.contains("DRAFT invoice") && text.contains("DRAFT: not issued and not payable"), "{text}");

    // The administrator lets managers issue (and names the seller): audited.
    let form = format!(
        "csrf={admin_csrf}&issuers=managers&seller_name=Northwind+ML&seller_address=1+Main+St&seller_tax_id=&seller_email=&number_format=NW-{{seq:04}}"
    );
    let saved = send(&state, Method::POST, "/admin/invoicing", &admin, Some(&form)).await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    assert_eq!(state.store.issuers().await.unwrap(), gpuledger::domain::invoices::Issuers::Managers);
    assert_eq!(state.store.seller().await.unwrap().name, "Northwind ML");
    assert_eq!(state.store.count_audit("settings.invoicing", 0, Some("ada"), None).await.unwrap(), 1);
    let refused = send(
        &state,
        Method::POST,
        "/admin/invoicing",
        &manager,
        Some(&format!("csrf={csrf}&issuers=managers&number_format=X{{seq}}")),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "only administrators change it");

    // The manager fixes acme's PO number, terms and tax rate; the draft shows them.
    let billing = format!(
        "csrf={csrf}&client=acme&period=2026-10&legal_name=Acme+Corp&address=1+Road&tax_id=&po_number=PO-77&payment_terms_days=45&tax_percent=10"
    );
    let saved = send(&state, Method::POST, "/invoices/billing", &manager, Some(&billing)).await;
    assert_eq!(saved.header(header::LOCATION), "/invoices/draft?client=acme&period=2026-10&done=billing");
    let json: Value = serde_json::from_str(
        &send(&state, Method::GET, "/invoices/draft?client=acme&period=2026-10&format=json", &manager, None)
            .await
            .body,
    )
    .unwrap();
    assert_eq!(
        (json["buyer"]["po_number"].as_str(), json["buyer"]["payment_terms_days"].as_i64()),
        (Some("PO-77"), Some(45))
    );
    let cents = |v: &Value| v.as_str().unwrap().parse::<gpuledger::money::Cents>().unwrap().0;
    assert_eq!(
        cents(&json["tax"]),
        (cents(&json["subtotal"]) * 10 + 50).div_euclid(100),
        "10 % of the subtotal"
    );
    assert_eq!(state.store.count_audit("invoice.billing", 0, Some("mia"), None).await.unwrap(), 1);
    let other = billing.replace("client=acme", "client=globex");
    let unseen = send(&state, Method::POST, "/invoices/billing", &manager, Some(&other)).await;
    assert_eq!(unseen.status, StatusCode::NOT_FOUND, "not a client the manager sees");

    // The manager issues acme's invoice (after the confirmation), under the new format.
    let done =
        send(&state, Method::POST, "/invoices/issue", &manager, Some(&format!("{issue}&confirm=yes"))).await;
    assert_eq!(done.header(header::LOCATION), "/invoices/NW-0001?done=1");
    let issued = state.store.document("NW-0001").await.unwrap().unwrap();
    assert_eq!((issued.actor.as_str(), issued.buyer.po_number.as_str()), ("mia", "PO-77"));
    // A month's batch holds only the clients the manager sees (acme: invoiced now).
    let batch = send(
        &state,
        Method::POST,
        "/invoices/issue-month",
        &manager,
        Some(&format!("csrf={csrf}&period=2026-10")),
    )
    .await;
    assert!(plain(&batch.body).contains("Nothing to issue for Oct 2026"), "{}", batch.body);
    assert!(!batch.body.contains("globex"), "no other client named");
    // A viewer never issues; back to finance only, neither does the manager.
    let refused = send(
        &state,
        Method::POST,
        "/invoices/issue",
        &viewer,
        Some(&format!("csrf={viewer_csrf}&client=acme&period=2026-10")),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let form = format!(
        "csrf={admin_csrf}&issuers=finance&seller_name=Northwind+ML&seller_address=1+Main+St&number_format=NW-{{seq:04}}"
    );
    send(&state, Method::POST, "/admin/invoicing", &admin, Some(&form)).await;
    let refused = send(&state, Method::POST, "/invoices/adjust", &manager, Some(&issue)).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
}

/// A client invoiced in euros (its currency set on the billing form) reads its own page in
/// euros: before the month has a rate, in dollars and told why; once its invoice is issued,
/// at the rate the invoice froze, so the page's charge is the invoice's subtotal to the cent,
/// even after the month's rate is corrected.
#[tokio::test]
async fn a_client_invoiced_in_euros_reads_its_own_page_in_euros_at_its_invoices_rate() {
    use gpuledger::domain::fx::FxRate;
    let dir = tempfile::tempdir().unwrap();
    let store = crate::helpers::connect(&format!("sqlite:{}", dir.path().join("eur.db").display())).await;
    with_demo_terms(store.as_ref()).await;
    crate::engine::generate_and_load(store.as_ref(), dir.path(), 1, 46).await;
    let state = signed_in_app(store);
    add_user(state.store.as_ref(), "ada", Role::Admin, &[]).await;
    add_user(state.store.as_ref(), "cid", Role::Client, &["acme"]).await;
    let (_, admin) = sign_in(&state, "ada", &secret("ada"), "").await;
    let (_, client) = sign_in(&state, "cid", &secret("cid"), "").await;
    let csrf = field(&send(&state, Method::GET, "/account", &admin, None).await.body, "csrf");
    let billing = |currency: &str| {
        format!(
            "csrf={csrf}&client=acme&period=2026-10&legal_name=Acme+GmbH&address=&tax_id=&po_number=&payment_terms_days=30&tax_percent=19&currency={currency}"
        )
    };
    let refused = send(&state, Method::POST, "/invoices/billing", &admin, Some(&billing("euro"))).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    let saved = send(&state, Method::POST, "/invoices/billing", &admin, Some(&billing("eur"))).await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    assert_eq!(state.store.billing_details().await.unwrap()["acme"].currency, "EUR");

    let own = |state: AppState, cookie: String| async move {
        let reply =
            send(&state, Method::GET, "/clients/acme?period=2026-10&format=json", &cookie, None).await;
        serde_json::from_str::<Value>(&reply.body).unwrap()
    };
    let before = own(state.clone(), client.clone()).await;
    assert_eq!(before["currency"], "USD", "no rate yet: {before}");
    let html = send(&state, Method::GET, "/clients/acme?period=2026-10", &client, None).await.body;
    assert!(plain(&html).contains("Your invoices are in EUR, but"), "{html}");

    let rate = |value: &str| FxRate::new("EUR", "USD", value, "2026-10".parse().unwrap(), "test").unwrap();
    state.store.set_fx_rates(&[rate("1.0842")], "test").await.unwrap();
    let issue = format!("csrf={csrf}&client=acme&period=2026-10&confirm=yes");
    let done = send(&state, Method::POST, "/invoices/issue", &admin, Some(&issue)).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    let issued = state.store.documents(Some("acme"), Some("2026-10")).await.unwrap().remove(0);
    assert_eq!(
        (issued.currency.as_str(), issued.exchange_rate.as_ref().unwrap().rate.as_str()),
        ("EUR", "1.0842")
    );
    let page = send(&state, Method::GET, &format!("/invoices/{}", issued.number), &client, None).await;
    assert!(plain(&page.body).contains("Total (EUR)"), "{}", page.body);
    // Corrected afterwards: the page keeps the invoice's rate.
    state.store.set_fx_rates(&[rate("1.2")], "test").await.unwrap();
    let after = own(state.clone(), client.clone()).await;
    assert_eq!(after["currency"], "EUR");
    assert_eq!(after["total_charged"].as_str(), Some(issued.subtotal.decimal().as_str()), "{after}");
    // Back to dollars: the page (cached until the data changes) follows at once.
    let saved = send(&state, Method::POST, "/invoices/billing", &admin, Some(&billing("usd"))).await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    assert_eq!(own(state.clone(), client.clone()).await["currency"], "USD");
}

/// Finance changes a client's markup and budget on the web, from a month on: a confirmation
/// says what changes and which months are computed again; then the month's chargeback carries
/// the new markup (12 % of direct + shared cost, to the micro-dollar), the month before keeps
/// 15 %, the change is audited, and a viewer or a bad amount changes nothing.
#[tokio::test]
async fn a_clients_markup_and_budget_change_on_the_web_from_a_month_on_confirmed_audited_and_recomputed() {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::helpers::connect(&format!("sqlite:{}", dir.path().join("terms.db").display())).await;
    with_demo_terms(store.as_ref()).await;
    crate::engine::generate_and_load(store.as_ref(), dir.path(), 2, 47).await;
    let state = signed_in_app(store);
    for (name, role) in [("fin", Role::Finance), ("vic", Role::Viewer)] {
        add_user(state.store.as_ref(), name, role, &[]).await;
    }
    let (_, finance) = sign_in(&state, "fin", &secret("fin"), "").await;
    let csrf = field(&send(&state, Method::GET, "/account", &finance, None).await.body, "csrf");
    let (_, viewer) = sign_in(&state, "vic", &secret("vic"), "").await;
    let viewer_csrf = field(&send(&state, Method::GET, "/account", &viewer, None).await.body, "csrf");
    let versions = state.store.settings().await.unwrap().versions.len();

    let register = send(&state, Method::GET, "/invoices", &finance, None).await;
    assert!(
        plain(&register.body)
            .contains("<th scope=\"row\">acme</th><td class=\"num\">15 %</td><td class=\"num\">none</td>")
    );
    let form = format!("csrf={csrf}&client=acme&markup_percent=12&monthly_budget=9000&from=2026-10");
    let asked = send(&state, Method::POST, "/invoices/terms", &finance, Some(&form)).await;
    assert_eq!(asked.status, StatusCode::OK);
    let text = plain(&asked.body);
    assert!(
        text.contains("acme, Oct 2026 on: markup 15 % → 12 %; monthly budget none → $9,000.00."),
        "{text}"
    );
    assert!(text.contains("Computed again with the new terms: Oct 2026."), "{text}");
    assert_eq!(
        state.store.settings().await.unwrap().versions.len(),
        versions,
        "nothing saved before confirming"
    );

    // Refused: a viewer; a markup that is no number; a negative budget. Nothing saved.
    let refused = send(
        &state,
        Method::POST,
        "/invoices/terms",
        &viewer,
        Some(&format!("csrf={viewer_csrf}&client=acme&markup_percent=1&confirm=yes")),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    for (bad, said) in [
        ("markup_percent=abc", "&#34;abc&#34; is not a number"),
        ("monthly_budget=-5", "&#34;-5&#34; is not an amount of USD"),
    ] {
        let body = format!("csrf={csrf}&client=acme&{bad}&confirm=yes");
        let refused = send(&state, Method::POST, "/invoices/terms", &finance, Some(&body)).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(refused.body.contains(said), "{}", refused.body);
    }
    assert_eq!(state.store.settings().await.unwrap().versions.len(), versions);

    let done =
        send(&state, Method::POST, "/invoices/terms", &finance, Some(&format!("{form}&confirm=yes"))).await;
    assert_eq!(done.header(header::LOCATION), "/invoices?done=terms:acme#terms");
    assert_eq!(state.store.count_audit("settings.client", 0, Some("fin"), None).await.unwrap(), 1);
    let micros = |v: &Value| gpuledger::money::nanos_from_decimal(v.as_str().unwrap()).unwrap() / 1000;
    for (period, rate) in [("2026-09", 0.15), ("2026-10", 0.12)] {
        let json: Value = serde_json::from_str(
            &send(&state, Method::GET, &format!("/clients?period={period}&format=json"), &finance, None)
                .await
                .body,
        )
        .unwrap();
        let acme = json["clients"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["client"] == "acme")
            .unwrap()
            .clone();
        assert_eq!(acme["markup_rate"].as_f64(), Some(rate), "{period}");
        // The markup is the rate on direct + shared cost (the two as printed, each rounded to the
        // micro-dollar, so within 2 micro-dollars).
        let base = micros(&acme["direct_cost"]) + micros(&acme["shared_cost"]);
        let expected = (base as f64 * rate).round() as i64;
        assert!(
            (micros(&acme["markup"]) - expected).abs() <= 2,
            "{period}: {} vs {expected}",
            acme["markup"]
        );
    }
    let register = send(&state, Method::GET, "/invoices", &finance, None).await;
    assert!(
        plain(&register.body).contains(
            "<th scope=\"row\">acme</th><td class=\"num\">12 %</td><td class=\"num\">$9,000.00</td>"
        )
    );
}

/// #69: a manager's "(other clients)" line gave away one client's column (its inference cost,
/// to the nano-dollar, where the other had none). That column is withheld (no figure, in the
/// page, its JSON and its downloads alike), the columns two clients make up stay, and the page
/// says figures were withheld; an administrator sees every client's own.
#[tokio::test]
async fn a_managers_other_clients_line_withholds_a_column_one_other_client_alone_makes_up() {
    use gpuledger::store::{ClientRollup, PeriodRollup, Rollups};
    let dir = tempfile::tempdir().unwrap();
    let store = crate::helpers::connect(&format!("sqlite:{}", dir.path().join("k.db").display())).await;
    let line = |client: &str, direct: i64, inference: i64| ClientRollup {
        period: "2026-10".into(),
        client: client.into(),
        direct_cost_nanos: direct,
        gpu_split_nanos: direct,
        inference_nanos: inference,
        ..ClientRollup::default()
    };
    let rollups = Rollups {
        period: PeriodRollup {
            period: "2026-10".into(),
            bill_amortized_micros: gpuledger::money::Micros(2_000_000_000),
            input_revision: store.input_revision("2026-10").await.unwrap(),
            ..PeriodRollup::default()
        },
        clients: vec![
            line("acme", 1_000_000_000_000, 5_000_000_000),
            line("initech", 300_000_000_000, 0),
            line("umbrella", 700_000_000_000, 2_102_803_748_000),
        ],
        ..Rollups::default()
    };
    store.replace_rollups(&rollups).await.unwrap();
    let state = signed_in_app(store);
    add_user(state.store.as_ref(), "ada", Role::Admin, &[]).await;
    add_user(state.store.as_ref(), "max", Role::Manager, &["acme"]).await;
    let (_, admin) = sign_in(&state, "ada", &secret("ada"), "").await;
    let (_, manager) = sign_in(&state, "max", &secret("max"), "").await;
    let rows = |cookie: &str| {
        let state = state.clone();
        let cookie = cookie.to_string();
        async move {
            let reply = send(&state, Method::GET, "/clients?period=2026-10&format=json", &cookie, None).await;
            let json: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
            (json["clients"]["rows"].as_array().cloned().unwrap_or_default(), json)
        }
    };
    let (seen, json) = rows(&manager).await;
    let others = seen.iter().find(|r| r["client"] == "(other clients)").unwrap_or_else(|| panic!("{json}"));
    assert_eq!(others["inference_cost"], serde_json::Value::Null, "{others}");
    assert_eq!(others["gpu_cost"], "1000.000000", "two clients make it up: {others}");
    assert!(!json.to_string().contains("2102.803748"), "{json}");
    assert!(json["withheld_others"].is_string(), "the page says figures were withheld: {json}");
    let csv = send(&state, Method::GET, "/clients?period=2026-10&format=csv", &manager, None).await;
    assert!(!csv.body.contains("2102.803748") && csv.body.contains("(other clients)"), "{}", csv.body);
    let (all, _) = rows(&admin).await;
    let umbrella = all.iter().find(|r| r["client"] == "umbrella").unwrap();
    assert_eq!(umbrella["inference_cost"], "2102.803748");

    // Downloads in a loop: one audit row per user, page and hour, counting them (#69: 10,569
    // rows in 30 s from one manager); the administrator's log filters by user and action.
    for _ in 0..24 {
        let again = send(&state, Method::GET, "/clients?period=2026-10&format=csv", &manager, None).await;
        assert_eq!(again.status, StatusCode::OK);
    }
    let log = send(&state, Method::GET, "/admin?user=max&action=download&format=json", &admin, None).await;
    let log: serde_json::Value = serde_json::from_str(&log.body).unwrap();
    let entries = log["audit"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{log}");
    assert_eq!((entries[0]["detail"].as_str(), entries[0]["count"].as_i64()), (Some("/clients"), Some(25)));
    assert_eq!(log["audit_older"], false);
    let page = send(&state, Method::GET, "/admin?user=max&action=download", &admin, None).await.body;
    assert!(page.contains("<td>/clients</td><td class=\"num\">25</td>"), "{page}");
    assert!(!page.contains(">Older entries<"), "{page}");
}

/// Signs in as [`sign_in`] does, with a one-time code in the form.
async fn sign_in_with_code(state: &AppState, name: &str, password: &str, code: &str) -> (Reply, String) {
    let form = send(state, Method::GET, "/login", "", None).await;
    assert!(form.body.contains("name=\"code\""), "the form offers the code");
    let csrf_cookie = set_cookie(&form, "gpuledger_login_csrf").unwrap();
    let csrf = field(&form.body, "csrf");
    let body = format!(
        "csrf={csrf}&next=%2F&username={}&password={}&code={}",
        escape(name),
        escape(password),
        escape(code)
    );
    let reply = send(state, Method::POST, "/login", &csrf_cookie, Some(&body)).await;
    let session = set_cookie(&reply, "gpuledger_session").unwrap_or_default();
    (reply, session)
}

/// #69: anyone could lock any account, the only administrator's included, by failing its
/// sign-in on purpose. The lock stands, but a one-time code made on the command line lets its
/// user past it with the password, once; an unknown, used or other user's code does not.
#[tokio::test]
async fn a_one_time_code_lets_a_locked_out_administrator_in_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("lock.db").display());
    let state = signed_in_app(crate::helpers::connect(&url).await);
    add_user(state.store.as_ref(), "ada", Role::Admin, &[]).await;
    add_user(state.store.as_ref(), "dana", Role::Finance, &[]).await;
    for _ in 0..6 {
        let (wrong, _) = sign_in(&state, "ada", "an attacker's guess", "").await;
        assert_ne!(wrong.status, StatusCode::SEE_OTHER);
    }
    let (locked, _) = sign_in(&state, "ada", &secret("ada"), "").await;
    assert_eq!(locked.status, StatusCode::TOO_MANY_REQUESTS);
    let (guessed, _) = sign_in_with_code(&state, "ada", &secret("ada"), "not-a-code").await;
    assert_eq!(guessed.status, StatusCode::TOO_MANY_REQUESTS);

    let made = crate::ingest_cur::run(&["--database-url", &url, "users", "sign-in-code", "ada"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let code = String::from_utf8_lossy(&made.stdout).split_whitespace().last().unwrap().to_string();
    assert!(code.len() >= 32, "{code}");
    // Another user's code is not this one's.
    let (elsewhere, _) = sign_in_with_code(&state, "dana", "a wrong password", &code).await;
    assert_eq!(elsewhere.status, StatusCode::UNAUTHORIZED);
    let (signed_in, session) = sign_in_with_code(&state, "ada", &secret("ada"), &code).await;
    assert_eq!(signed_in.status, StatusCode::SEE_OTHER, "{}", signed_in.body);
    assert!(!session.is_empty());
    let (again, _) = sign_in_with_code(&state, "ada", &secret("ada"), &code).await;
    assert_eq!(again.status, StatusCode::TOO_MANY_REQUESTS, "a code is used once");
    let log = state.store.audit_log(&gpuledger::store::AuditQuery::newest(50)).await.unwrap();
    assert!(log.iter().any(|e| e.action == "sign_in_code" && e.detail.contains("ada")), "{log:?}");
    assert!(log.iter().any(|e| e.action == "sign_in_code_used" && e.username == "ada"), "{log:?}");
}
