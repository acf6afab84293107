//! The dashboard in a real headless Chromium (Debian `chromium` + `chromium-driver`), driven
//! through the W3C WebDriver protocol by the small client below (reqwest, already a
//! dependency: fantoccini's TLS features re-featured the AWS SDK stack and compiled it twice):
//! the Overview loads with its charts, changing the period
//! filter updates the Costs table, a CSV downloads, and the Overview printed to PDF holds the
//! totals (`pdftotext`). Screenshots of every page are saved under the target directory
//! (`CARGO_TARGET_TMPDIR/screenshots`). Skipped when chromedriver is not installed.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpuledger::money::format_usd;
use gpuledger::web::{AppState, router};
use serde_json::{Value, json};

use crate::engine::generate_and_load;
use crate::ingest_cur::truth;
use crate::s3::free_port;

/// chromedriver on a free port, killed by its process id when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_driver() -> Option<Driver> {
    if Command::new("chromedriver").arg("--version").output().is_err() {
        eprintln!("chromedriver not installed: browser test skipped (scripts/test installs chromium-driver)");
        return None;
    }
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not answer on port {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(Driver { child, url: format!("http://127.0.0.1:{port}") })
}

const CHROME_FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--window-size=1280,1600",
];

/// A WebDriver session: just the commands these tests need.
struct Session {
    http: reqwest::Client,
    base: String,
}

/// The W3C key under which WebDriver returns an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Session {
    async fn start(driver: &Driver, downloads: &Path) -> Session {
        let http = reqwest::Client::new();
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "args": CHROME_FLAGS,
                "prefs": {
                    "download.default_directory": downloads.display().to_string(),
                    "download.prompt_for_download": false,
                },
            },
        }}});
        let answer: Value = http
            .post(format!("{}/session", driver.url))
            .json(&capabilities)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = answer["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {answer}"));
        Session { http, base: format!("{}/session/{id}", driver.url) }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer: Value = request.send().await.unwrap().json().await.unwrap();
        assert!(answer["value"].get("error").is_none(), "{path}: {answer}");
        answer["value"].clone()
    }

    async fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url}))).await;
    }

    async fn url(&self) -> String {
        self.call(reqwest::Method::GET, "/url", None).await.as_str().unwrap_or_default().to_string()
    }

    async fn find_all(&self, using: &str, value: &str) -> Vec<String> {
        let found = self
            .call(reqwest::Method::POST, "/elements", Some(json!({"using": using, "value": value})))
            .await;
        found.as_array().unwrap().iter().map(|e| e[ELEMENT].as_str().unwrap().to_string()).collect()
    }

    /// The first element matching, waiting up to 10 s for it: a click that submits a form
    /// returns before the next page has loaded, so the element may not be there yet.
    async fn find(&self, using: &str, value: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(first) = self.find_all(using, value).await.into_iter().next() {
                return first;
            }
            assert!(
                Instant::now() < deadline,
                "no element matches {using} {value:?} on {}",
                self.url().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn attribute(&self, element: &str, name: &str) -> String {
        let path = format!("/element/{element}/attribute/{name}");
        self.call(reqwest::Method::GET, &path, None).await.as_str().unwrap_or_default().to_string()
    }

    async fn text(&self, element: &str) -> String {
        let value = self.call(reqwest::Method::GET, &format!("/element/{element}/text"), None).await;
        value.as_str().unwrap_or_default().to_string()
    }

    async fn type_into(&self, element: &str, text: &str) {
        let body = json!({"text": text});
        self.call(reqwest::Method::POST, &format!("/element/{element}/value"), Some(body)).await;
    }

    /// Runs `script` in the page (asynchronously: it calls `arguments[0]` with its result).
    async fn run_async(&self, script: &str) -> Value {
        self.call(reqwest::Method::POST, "/execute/async", Some(json!({"script": script, "args": []}))).await
    }

    async fn page_source(&self) -> String {
        self.call(reqwest::Method::GET, "/source", None).await.as_str().unwrap_or_default().to_string()
    }

    async fn click(&self, element: &str) {
        self.call(reqwest::Method::POST, &format!("/element/{element}/click"), Some(json!({}))).await;
    }

    async fn screenshot(&self) -> Vec<u8> {
        base64(self.call(reqwest::Method::GET, "/screenshot", None).await.as_str().unwrap())
    }

    /// Prints the page on landscape Letter paper, as leadership prints the Overview.
    async fn print_landscape(&self) -> Vec<u8> {
        let body = json!({"orientation": "landscape", "page": {"width": 27.94, "height": 21.59}});
        base64(self.call(reqwest::Method::POST, "/print", Some(body)).await.as_str().unwrap())
    }

    /// Emulates `prefers-color-scheme: dark` (or the system's scheme again with `None`)
    /// through chromedriver's DevTools command.
    async fn color_scheme(&self, scheme: Option<&str>) {
        let features = scheme.map_or(json!([]), |s| json!([{"name": "prefers-color-scheme", "value": s}]));
        let body = json!({"cmd": "Emulation.setEmulatedMedia", "params": {"features": features}});
        self.call(reqwest::Method::POST, "/goog/cdp/execute", Some(body)).await;
    }

    /// Makes the window `width` CSS pixels wide; returns the page's inner width.
    async fn resize(&self, width: u32) -> i64 {
        self.call(reqwest::Method::POST, "/window/rect", Some(json!({"width": width, "height": 1400}))).await;
        self.run_async("arguments[0](window.innerWidth)").await.as_i64().unwrap()
    }

    async fn close(self) {
        let _ = self.http.delete(&self.base).send().await;
    }
}

/// Waits (up to 10 s) until the browser's URL contains `part`.
async fn wait_for_url(client: &Session, part: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !client.url().await.contains(part) {
        assert!(Instant::now() < deadline, "the browser did not reach a URL with {part}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Standard base64 (screenshots and PDFs come back as text).
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let clean: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=').collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let n =
            chunk.iter().enumerate().fold(0u32, |acc, (i, c)| acc | (u32::from(value(*c)) << (18 - 6 * i)));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// axe-core's source (scripts/test installs it from the npm registry into
/// `GPULEDGER_AXE_JS`); `None`, and the audit skipped with a word, when it is missing.
fn axe_source() -> Option<String> {
    let path = std::env::var("GPULEDGER_AXE_JS").ok()?;
    match std::fs::read_to_string(&path) {
        Ok(source) => Some(source),
        Err(e) => {
            eprintln!("axe-core not readable at {path} ({e}): accessibility audit skipped");
            None
        }
    }
}

/// The page's serious and critical WCAG 2 A/AA violations by axe-core: rule, impact, help,
/// and the first offending elements.
async fn audit(client: &Session, axe: &str) -> Vec<String> {
    let script = format!(
        "{axe}\n;const done = arguments[arguments.length - 1];\
         axe.run(document, {{runOnly: {{type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}}}})\
         .then(r => done(r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')\
         .map(v => v.id + ' (' + v.impact + '): ' + v.help + ' at ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | '))))\
         .catch(e => done(['axe failed: ' + e]));"
    );
    let found = client.run_async(&script).await;
    found.as_array().unwrap_or_else(|| panic!("axe answered {found}")).iter().map(|v| v.to_string()).collect()
}

fn screenshots_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn the_dashboard_in_a_real_browser() {
    let Some(driver) = start_driver() else { return };
    let dir = tempfile::tempdir().unwrap();
    let database =
        crate::helpers::connect(&format!("sqlite:{}", dir.path().join("ledger.db").display())).await;
    let state = AppState::new(database, gpuledger::web::AuthConfig::off());
    generate_and_load(state.store.as_ref(), dir.path(), 2, 45).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = router(state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let downloads = dir.path().join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let client = Session::start(&driver, &downloads).await;

    // The Overview loads with its four charts, each an image with a text alternative.
    client.goto(&format!("{base}/?period=2026-10")).await;
    let charts = client.find_all("css selector", "svg.chart[role='img']").await;
    assert_eq!(charts.len(), 4, "four charts on the Overview");
    let label = client.attribute(&charts[0], "aria-label").await;
    assert!(label.starts_with("Monthly spend") && label.contains("Oct 2026"), "{label}");

    // Screenshots of every page at a desktop's, a tablet's and a phone's width; at none of them
    // does a page scroll sideways (wide tables scroll inside their own box), and axe-core finds
    // no serious or critical WCAG 2 A/AA violation at any of them.
    let shots = screenshots_dir();
    let axe = axe_source();
    for width in [1440, 1024, 390] {
        let inner = client.resize(width).await;
        assert!((inner - i64::from(width)).abs() <= 20, "the window is {inner} px wide, not {width}");
        for (name, path) in PAGES {
            client.goto(&format!("{base}{path}")).await;
            let overflow = client
                .run_async("arguments[0](document.documentElement.scrollWidth - window.innerWidth)")
                .await
                .as_i64()
                .unwrap();
            assert!(overflow <= 0, "{name} at {width} px scrolls sideways by {overflow} px");
            let png = client.screenshot().await;
            assert!(png.starts_with(b"\x89PNG"), "{name}: a PNG");
            std::fs::write(shots.join(format!("{name}-{width}.png")), png).unwrap();
            if let Some(axe) = axe.as_deref() {
                let serious = audit(&client, axe).await;
                assert!(serious.is_empty(), "{name} at {width} px: accessibility violations {serious:#?}");
            }
        }
    }
    // Dark mode (`prefers-color-scheme: dark`): every page again at a desktop's width, each
    // screenshot kept and audited, so the dark palette keeps AA contrast too.
    client.resize(1440).await;
    client.color_scheme(Some("dark")).await;
    for (name, path) in PAGES {
        client.goto(&format!("{base}{path}")).await;
        let background =
            client.run_async("arguments[0](getComputedStyle(document.body).backgroundColor)").await;
        assert_eq!(background, "rgb(13, 17, 23)", "{name}: the dark palette is in use");
        std::fs::write(shots.join(format!("{name}-1440-dark.png")), client.screenshot().await).unwrap();
        if let Some(axe) = axe.as_deref() {
            let serious = audit(&client, axe).await;
            assert!(serious.is_empty(), "{name} in dark mode: accessibility violations {serious:#?}");
        }
    }
    client.color_scheme(None).await;
    client.resize(1280).await;

    // Drill-down by clicking: a namespace to its workloads, a workload to its pods.
    client.goto(&format!("{base}/costs?period=2026-10")).await;
    client
        .click(&client.find("xpath", "//table[@id='costs']//th/a[normalize-space()='acme-llm']").await)
        .await;
    wait_for_url(&client, "group=workload").await;
    client.click(&client.find("xpath", "//table[@id='costs']/tbody/tr[1]/th/a").await).await;
    wait_for_url(&client, "group=pod").await;
    let caption = client.text(&client.find("css selector", "#costs caption").await).await;
    assert!(caption.starts_with("Pods of acme-llm/"), "{caption}");
    std::fs::write(shots.join("costs-pods.png"), client.screenshot().await).unwrap();

    // Changing the period filter (select a month, press Show) updates the Costs table.
    let total_of = |period: &str| {
        let micros =
            (truth(dir.path(), period)["kubernetes_allocated_cost"].as_f64().unwrap() * 1e6).round() as i64;
        format_usd(micros)
    };
    client.goto(&format!("{base}/costs?period=2026-10")).await;
    let total_row = "//table[@id='costs']//tr[th[normalize-space()='Kubernetes total']]/td[3]";
    let october = client.text(&client.find("xpath", total_row).await).await;
    assert_eq!(october, total_of("2026-10"));
    client.click(&client.find("css selector", "#period option[value='2026-09']").await).await;
    client.click(&client.find("css selector", "form.filters button[type='submit']").await).await;
    wait_for_url(&client, "period=2026-09").await;
    let september = client.text(&client.find("xpath", total_row).await).await;
    assert_eq!(september, total_of("2026-09"));
    assert_ne!(september, october);

    // The filter swaps the page in place: scrolled half-way down a table, a new month keeps
    // the reader where they were (htmx does not jump to the top) and nothing moves sideways
    // (the scrollbar's room is kept), the filter bar still stuck at the top.
    let place = "const f = document.querySelector('form.filters').getBoundingClientRect(); \
                 arguments[0]([Math.round(window.scrollY), Math.round(f.top), Math.round(f.left), \
                 Math.round(f.width), document.documentElement.clientWidth])";
    let room = "arguments[0](document.documentElement.scrollHeight - window.innerHeight)";
    client.goto(&format!("{base}/costs?period=2026-10")).await;
    let october_room = client.run_async(room).await.as_i64().unwrap();
    client.goto(&format!("{base}/costs?period=2026-09")).await;
    let september_room = client.run_async(room).await.as_i64().unwrap();
    // Half-way down the shorter of the two pages, so the new month has room to stay there.
    let down = october_room.min(september_room) / 2;
    assert!(down >= 100, "the Costs pages are long enough to scroll: {october_room}, {september_room} px");
    client.run_async(&format!("window.scrollTo(0, {down}); arguments[0](0)")).await;
    let before = client.run_async(place).await;
    client.click(&client.find("css selector", "#period option[value='2026-10']").await).await;
    client.click(&client.find("css selector", "form.filters button[type='submit']").await).await;
    wait_for_url(&client, "period=2026-10").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while client.text(&client.find("xpath", total_row).await).await != october {
        assert!(Instant::now() < deadline, "the swap did not bring October back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = client.run_async(place).await;
    assert_eq!(
        after, before,
        "[scrollY, filter bar top, left, width, page width] after the swap, and before it"
    );
    client.goto(&format!("{base}/costs?period=2026-09")).await;

    // The CSV link downloads the table.
    client.click(&client.find("css selector", "#costs caption a.download").await).await;
    let expected = downloads.join("gpuledger-costs-2026-09.csv");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !expected.exists() {
        assert!(Instant::now() < deadline, "no download at {}", expected.display());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let csv = std::fs::read_to_string(&expected).unwrap();
    assert!(csv.starts_with("namespace,split_cost,unused_cost,total_cost"), "{csv}");

    // The Overview printed to PDF (WebDriver print, landscape Letter) is board-ready: whose
    // report, of what and when it was prepared; the month's bill total, the savings still open
    // and the top opportunities; no account block; at most two pages, neither half empty.
    client.goto(&format!("{base}/?period=2026-10")).await;
    let pdf = client.print_landscape().await;
    assert!(pdf.starts_with(b"%PDF"), "a PDF");
    let pdf_path = shots.join("overview.pdf");
    std::fs::write(&pdf_path, &pdf).unwrap();
    let text = Command::new("pdftotext").arg(&pdf_path).arg("-").output().expect("pdftotext (poppler-utils)");
    let text = String::from_utf8_lossy(&text.stdout);
    let bill =
        format_usd((truth(dir.path(), "2026-10")["bill_amortized"].as_f64().unwrap() * 1e6).round() as i64);
    assert!(text.contains(&bill), "the printed Overview shows the bill {bill}: {text}");
    assert!(text.contains("Total spend"), "{text}");
    let prepared = gpuledger::period::human::day(chrono::Utc::now().date_naive());
    for said in [
        "GPU cost report · Oct 2026 · prepared ",
        &prepared,
        "Open savings",
        "a month",
        "Top 5 opportunities",
    ] {
        assert!(text.contains(said), "the printed Overview says {said:?}: {text}");
    }
    assert!(!text.contains("Sign out"), "no account block in print: {text}");
    let lowest = lowest_text_per_page(&pdf_path);
    assert!((1..=2).contains(&lowest.len()), "the Overview prints on one or two pages: {}", lowest.len());
    for (bottom, height) in lowest.iter().take(lowest.len() - 1) {
        assert!(
            *bottom > height / 2.0,
            "the Overview's first printed page ends at {bottom:.0} of {height:.0} pt"
        );
    }

    // Every other page prints without half-empty pages: on each printed page but the last,
    // the text reaches into the lower half (a chart or table pushed whole to the next page
    // would leave the page before it half blank).
    for (name, path) in PAGES.into_iter().skip(1) {
        client.goto(&format!("{base}{path}")).await;
        let pdf_path = shots.join(format!("{name}.pdf"));
        std::fs::write(&pdf_path, client.print_landscape().await).unwrap();
        let lowest = lowest_text_per_page(&pdf_path);
        assert!(!lowest.is_empty(), "{name}: a printed page");
        for (page, (bottom, height)) in lowest.iter().enumerate().take(lowest.len() - 1) {
            assert!(
                *bottom > height / 2.0,
                "{name}: printed page {} of {} ends at {bottom:.0} of {height:.0} pt",
                page + 1,
                lowest.len()
            );
        }
        eprintln!("{name}: {} printed page(s)", lowest.len());
    }
    client.close().await;
}

/// Every page of the dashboard (the Overview first), as the screenshots name them.
const PAGES: [(&str, &str); 11] = [
    ("overview", "/?period=2026-10"),
    ("costs", "/costs?period=2026-10"),
    ("clients", "/clients?period=2026-10"),
    ("client-acme", "/clients/acme?period=2026-10"),
    ("gpus", "/gpus?period=2026-10"),
    ("inference", "/inference?period=2026-10"),
    ("savings", "/savings?period=2026-10"),
    ("plan", "/plan"),
    ("data", "/data"),
    ("alerts", "/alerts"),
    ("invoices", "/invoices"),
];

/// For each page of a PDF, how far down its lowest word reaches and the page's height (pt),
/// from `pdftotext -bbox` (poppler-utils).
fn lowest_text_per_page(pdf: &Path) -> Vec<(f64, f64)> {
    let out = Command::new("pdftotext").arg("-bbox").arg(pdf).arg("-").output().expect("pdftotext -bbox");
    let html = String::from_utf8_lossy(&out.stdout);
    let number = |tag: &str, key: &str| -> f64 {
        let start = tag.find(&format!("{key}=\"")).unwrap() + key.len() + 2;
        tag[start..].split('"').next().unwrap().parse().unwrap()
    };
    let mut pages: Vec<(f64, f64)> = Vec::new();
    for tag in html.split('<').skip(1) {
        if tag.starts_with("page ") {
            pages.push((0.0, number(tag, "height")));
        } else if tag.starts_with("word ")
            && let Some(page) = pages.last_mut()
        {
            page.0 = page.0.max(number(tag, "yMax"));
        }
    }
    pages
}

/// The dashboard with sign-in on, over one generated month (`seed`), with one user (name,
/// role, clients, password), serving on a free port: its state and base URL.
async fn signed_in_dashboard(
    dir: &Path,
    seed: u64,
    (name, role, clients, password): (&str, gpuledger::auth::Role, Vec<String>, &str),
) -> (AppState, String) {
    let database = crate::helpers::connect(&format!("sqlite:{}", dir.join("ledger.db").display())).await;
    let state = AppState::new(database, gpuledger::web::AuthConfig::local());
    generate_and_load(state.store.as_ref(), dir, 1, seed).await;
    let user =
        gpuledger::auth::User::new(name, role, clients, gpuledger::auth::password::hash(password).unwrap());
    state.store.create_user(&user).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = router(state.clone()).into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (state, base)
}

#[tokio::test]
async fn a_client_user_signs_in_sees_only_its_pages_and_signs_out_in_a_real_browser() {
    let Some(driver) = start_driver() else { return };
    let dir = tempfile::tempdir().unwrap();
    let password = "acme's long password";
    let user = ("acme-finance", gpuledger::auth::Role::Client, vec!["acme".to_string()], password);
    let (_, base) = signed_in_dashboard(dir.path(), 46, user).await;
    let client = Session::start(&driver, dir.path()).await;

    // Not signed in: the Overview sends the browser to the login form.
    client.goto(&format!("{base}/")).await;
    wait_for_url(&client, "/login?next=%2F").await;
    std::fs::write(screenshots_dir().join("login.png"), client.screenshot().await).unwrap();
    if let Some(axe) = axe_source() {
        let serious = audit(&client, &axe).await;
        assert!(serious.is_empty(), "login: accessibility violations {serious:#?}");
    }
    client.type_into(&client.find("css selector", "input[name='username']").await, "acme-finance").await;
    client.type_into(&client.find("css selector", "input[name='password']").await, password).await;
    client.click(&client.find("css selector", "form.login button[type='submit']").await).await;

    // Signed in as acme's user: the Overview leads to acme's page; the navigation lists only
    // acme; no other client appears.
    wait_for_url(&client, "/clients/acme").await;
    let nav: Vec<String> = {
        let mut names = Vec::new();
        for link in client.find_all("css selector", "nav[aria-label='Main'] a").await {
            names.push(client.text(&link).await);
        }
        names
    };
    assert_eq!(nav, ["acme", "Forecast", "Invoices"]);
    let source = client.page_source().await;
    for other in ["globex", "initech", "umbrella"] {
        assert!(!source.contains(other), "acme's user sees {other}");
    }
    assert!(source.contains("acme-finance (client)"), "the page names who is signed in");
    std::fs::write(screenshots_dir().join("client-signed-in.png"), client.screenshot().await).unwrap();
    if let Some(axe) = axe_source() {
        let serious = audit(&client, &axe).await;
        assert!(serious.is_empty(), "client-signed-in: accessibility violations {serious:#?}");
    }

    // Other pages are refused; another client's page is not there.
    client.goto(&format!("{base}/costs")).await;
    let heading = client.text(&client.find("css selector", "h1").await).await;
    assert_eq!(heading, "Error 403");
    client.goto(&format!("{base}/clients/globex")).await;
    assert_eq!(client.text(&client.find("css selector", "h1").await).await, "Error 404");

    // A POST without the session's CSRF token is refused (the session survives it).
    let status = client
        .run_async(
            "const done = arguments[0]; fetch('/logout', {method: 'POST', body: new URLSearchParams({csrf: 'forged'})}).then(r => done(r.status));",
        )
        .await;
    assert_eq!(status, 403);
    client.goto(&format!("{base}/clients/acme")).await;
    assert!(client.url().await.ends_with("/clients/acme"), "still signed in");

    // Sign out: the session ends and acme's page asks for a login again.
    client.click(&client.find("css selector", "div.account button[type='submit']").await).await;
    wait_for_url(&client, "/login").await;
    client.goto(&format!("{base}/clients/acme")).await;
    wait_for_url(&client, "/login?next=").await;
    client.close().await;
}

#[tokio::test]
async fn finance_issues_an_invoice_from_the_ui_and_downloads_its_pdf_in_a_real_browser() {
    let Some(driver) = start_driver() else { return };
    let dir = tempfile::tempdir().unwrap();
    let password = "finance's long password";
    let user = ("dana", gpuledger::auth::Role::Finance, Vec::new(), password);
    let (state, base) = signed_in_dashboard(dir.path(), 47, user).await;
    let downloads = dir.path().join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let client = Session::start(&driver, &downloads).await;
    client.goto(&format!("{base}/invoices")).await;
    wait_for_url(&client, "/login").await;
    client.type_into(&client.find("css selector", "input[name='username']").await, "dana").await;
    client.type_into(&client.find("css selector", "input[name='password']").await, password).await;
    client.click(&client.find("css selector", "form.login button[type='submit']").await).await;
    wait_for_url(&client, "/invoices").await;

    // acme's page before the invoice: October is not invoiced (and the page is now cached).
    client.goto(&format!("{base}/clients/acme")).await;
    assert!(!client.page_source().await.contains("GL-2026-"), "nothing invoiced yet");
    client.goto(&format!("{base}/invoices")).await;

    // Draft acme's October (the first client and month the form offers), then issue it.
    client.click(&client.find("css selector", "form[aria-label='Draft an invoice'] button").await).await;
    wait_for_url(&client, "/invoices/draft?client=acme&period=2026-10").await;
    let draft_total = client.text(&client.find("css selector", "#lines tfoot tr:last-child td").await).await;
    client.click(&client.find("css selector", "form.invoice-action button").await).await;
    // Issuing asks first, with the number the invoice will take.
    let confirm = client.find("css selector", "form.confirm-actions button").await;
    let label = client.text(&confirm).await;
    assert!(label.starts_with("Issue invoice GL-"), "{label}");
    std::fs::write(screenshots_dir().join("invoice-confirm.png"), client.screenshot().await).unwrap();
    if let Some(axe) = axe_source() {
        let serious = audit(&client, &axe).await;
        assert!(serious.is_empty(), "invoice-confirm: accessibility violations {serious:#?}");
    }
    client.click(&confirm).await;
    wait_for_url(&client, "/invoices/GL-").await;
    let notice = client.text(&client.find("css selector", "p.success").await).await;
    let promised = label.rsplit(' ').next().unwrap();
    assert!(notice.starts_with(&format!("Invoice {promised} issued to acme for Oct 2026")), "{notice}");
    let heading = client.text(&client.find("css selector", "h1").await).await;
    assert!(heading.starts_with("Invoice GL-") && heading.contains("acme, Oct 2026"), "{heading}");
    let number = client.url().await.rsplit('/').next().unwrap().split('?').next().unwrap().to_string();
    let issued_total = client.text(&client.find("css selector", "#lines tfoot tr:last-child td").await).await;
    assert_eq!(issued_total, draft_total, "the issued invoice is the draft");
    std::fs::write(screenshots_dir().join("invoice-issued.png"), client.screenshot().await).unwrap();
    if let Some(axe) = axe_source() {
        let serious = audit(&client, &axe).await;
        assert!(serious.is_empty(), "invoice-issued: accessibility violations {serious:#?}");
    }

    // The PDF link downloads exactly the bytes stored at issue.
    let pdf_link = client.find("css selector", "#lines caption a.download").await;
    assert_eq!(client.text(&pdf_link).await, "PDF");
    client.click(&pdf_link).await;
    let expected = downloads.join(format!("{number}.pdf"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !expected.exists() {
        assert!(Instant::now() < deadline, "no download at {}", expected.display());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stored = state.store.document_pdf(&number).await.unwrap().unwrap();
    assert_eq!(std::fs::read(&expected).unwrap(), stored);

    // acme's page now shows October's invoice beside its charge (the cache did not keep the
    // page from before).
    client.goto(&format!("{base}/clients/acme")).await;
    assert!(client.page_source().await.contains(&number), "the month shows its invoice");

    // Issuing again is refused on the draft page, with the reason.
    client.goto(&format!("{base}/invoices/draft?client=acme&period=2026-10")).await;
    let source = client.page_source().await;
    assert!(source.contains(&format!("Invoice {number} stands for acme in 2026-10")), "{source}");
    assert!(
        client.find_all("css selector", "form.invoice-action").await.is_empty(),
        "nothing to issue or adjust"
    );
    let audit = state.store.count_audit("invoice.download", 0, Some("dana"), None).await.unwrap();
    assert_eq!(audit, 1, "the download is in the audit log");
    client.close().await;
}

/// Finance, an agency manager and a client user each sign in and read every page their
/// navigation offers, at a desktop's and a phone's width: each page answers (none of its
/// links is a refusal), none scrolls sideways, each is screenshot (`ROLE-PAGE-WIDTH.png`) and
/// passes the accessibility audit.
#[tokio::test]
async fn finance_a_manager_and_a_client_user_read_each_of_their_pages_at_a_desktops_and_a_phones_width() {
    let Some(driver) = start_driver() else { return };
    let dir = tempfile::tempdir().unwrap();
    let password = "a long enough password";
    let finance = ("dana", gpuledger::auth::Role::Finance, Vec::new(), password);
    let (state, base) = signed_in_dashboard(dir.path(), 48, finance).await;
    for (name, role) in
        [("mia", gpuledger::auth::Role::Manager), ("acme-user", gpuledger::auth::Role::Client)]
    {
        let hash = gpuledger::auth::password::hash(password).unwrap();
        let user = gpuledger::auth::User::new(name, role, vec!["acme".to_string()], hash);
        state.store.create_user(&user).await.unwrap();
    }
    let shots = screenshots_dir();
    let axe = axe_source();
    let client = Session::start(&driver, dir.path()).await;
    let mut read = 0;
    for (name, role) in [("dana", "finance"), ("mia", "manager"), ("acme-user", "client")] {
        client.resize(1440).await;
        client.goto(&format!("{base}/login")).await;
        client.type_into(&client.find("css selector", "input[name='username']").await, name).await;
        client.type_into(&client.find("css selector", "input[name='password']").await, password).await;
        client.click(&client.find("css selector", "form.login button[type='submit']").await).await;
        // Signed in: the browser leaves the login form (a client user for its own page).
        let deadline = Instant::now() + Duration::from_secs(10);
        while client.url().await.contains("/login") {
            assert!(Instant::now() < deadline, "{role} did not get past the login form");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut pages = Vec::new();
        for link in client.find_all("css selector", "nav[aria-label='Main'] a").await {
            pages.push(client.attribute(&link, "href").await);
        }
        assert!(pages.len() >= 2, "{role}: {pages:?}");
        for width in [1440, 390] {
            client.resize(width).await;
            for path in &pages {
                client.goto(&format!("{base}{path}")).await;
                let heading = client.text(&client.find("css selector", "h1").await).await;
                assert!(!heading.starts_with("Error"), "{role} at {path}: {heading}");
                let overflow = client
                    .run_async("arguments[0](document.documentElement.scrollWidth - window.innerWidth)")
                    .await
                    .as_i64()
                    .unwrap();
                assert!(overflow <= 0, "{role} {path} at {width} px scrolls sideways by {overflow} px");
                let page = path.trim_matches('/').replace('/', "-");
                let page = if page.is_empty() { "overview".to_string() } else { page };
                std::fs::write(shots.join(format!("{role}-{page}-{width}.png")), client.screenshot().await)
                    .unwrap();
                if let Some(axe) = axe.as_deref() {
                    let serious = audit(&client, axe).await;
                    assert!(serious.is_empty(), "{role} {path} at {width} px: {serious:#?}");
                }
                read += 1;
            }
        }
        client.click(&client.find("css selector", "div.account button[type='submit']").await).await;
        wait_for_url(&client, "/login").await;
    }
    // Finance's nine pages, the manager's and the client's fewer, at two widths.
    assert!(read >= 2 * (9 + 3 + 2), "{read} pages read");
    client.close().await;
}
