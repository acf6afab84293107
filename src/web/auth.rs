//! Sign-in at the web edge: who is asking ([`Viewer`]), what their role lets them open, and
//! the CSRF check on every state-changing request.
//!
//! - **Local accounts**: `/login` checks an argon2id hash, starts a server-side session (a
//!   fresh random token each time, so a session id planted before login is worthless) and
//!   sets an `HttpOnly; SameSite=Lax` cookie (`Secure` when configured). Sessions end after
//!   [`AuthConfig::idle_timeout`] without use or [`AuthConfig::absolute_timeout`] after login,
//!   at logout, and when the user is disabled or changes password.
//! - **Trusted proxy**: a reverse proxy that authenticated the user (oauth2-proxy, an
//!   ingress) names them in a header; honoured only from the configured proxy addresses, and
//!   only for users that exist here (their role and clients come from the users table).
//! - **Off**: no sign-in; everyone is an administrator. `serve` allows it only on a loopback
//!   address; tests of page content use it.
//!
//! Sign-in attempts are limited to 20 per address and 5 per account in 15 minutes, counted
//! before the password is checked (a success gives its attempt back); the next attempt is
//! refused with 429 until the window has passed. Refused sign-ins are counted per account,
//! address and window (`/admin` lists them), not logged one row each.

use std::net::{IpAddr, SocketAddr};

use askama::Template;
use axum::extract::{ConnectInfo, Form, FromRequest, Query, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{AppState, WebError};
use crate::auth::{self, AuditEntry, Role, Scope, Session, User, password};

/// The session cookie.
pub const SESSION_COOKIE: &str = "gpuledger_session";
/// The login form's CSRF cookie (double submit: the form carries the same value).
const LOGIN_CSRF_COOKIE: &str = "gpuledger_login_csrf";
/// Failed logins counted per account and per address, in this window (seconds).
const FAILURE_WINDOW: i64 = 15 * 60;
const FAILURES_PER_ACCOUNT: i64 = 5;
const FAILURES_PER_ADDRESS: i64 = 20;

/// How visitors sign in.
#[derive(Clone)]
pub enum AuthMode {
    /// Local accounts with passwords.
    Local,
    /// A trusted reverse proxy names the user in `header`; only requests from `trusted`
    /// addresses are believed.
    Proxy { header: HeaderName, trusted: Vec<IpAddr> },
    /// No sign-in: every visitor is an administrator (loopback only).
    Off,
}

/// The sign-in settings of a dashboard.
pub struct AuthConfig {
    pub mode: AuthMode,
    /// Mark cookies `Secure` (served over TLS, or behind a proxy that terminates it).
    pub secure_cookies: bool,
    /// The bearer token `/metrics` asks for; without one, `/metrics` is open only when
    /// sign-in is off.
    pub metrics_token: Option<String>,
    /// Seconds a session may go unused.
    pub idle_timeout: i64,
    /// Seconds a session lasts at most.
    pub absolute_timeout: i64,
    /// The one-time token of `/setup`, while no user exists.
    pub setup_token: std::sync::Mutex<Option<String>>,
    /// The key of the CSRF tokens of users signed in through a proxy (they have no session
    /// here; a token is derived from it and their name): the database's `proxy_csrf` secret,
    /// read once, so every replica of one database accepts the forms another rendered.
    proxy_csrf_secret: tokio::sync::OnceCell<String>,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = match &self.mode {
            AuthMode::Local => "local".to_string(),
            AuthMode::Proxy { header, trusted } => format!("proxy (header {header}, trusted {trusted:?})"),
            AuthMode::Off => "off".to_string(),
        };
        f.debug_struct("AuthConfig")
            .field("mode", &mode)
            .field("secure_cookies", &self.secure_cookies)
            .field("metrics_token", &self.metrics_token.as_ref().map(|_| "[redacted]"))
            .field("idle_timeout", &self.idle_timeout)
            .field("absolute_timeout", &self.absolute_timeout)
            .finish_non_exhaustive()
    }
}

impl AuthConfig {
    /// Local accounts, 2 hours idle, 12 hours at most.
    pub fn local() -> AuthConfig {
        AuthConfig {
            mode: AuthMode::Local,
            secure_cookies: false,
            metrics_token: None,
            idle_timeout: 2 * 3600,
            absolute_timeout: 12 * 3600,
            setup_token: std::sync::Mutex::new(None),
            proxy_csrf_secret: tokio::sync::OnceCell::new(),
        }
    }

    /// No sign-in.
    pub fn off() -> AuthConfig {
        AuthConfig { mode: AuthMode::Off, ..AuthConfig::local() }
    }

    pub fn is_off(&self) -> bool {
        matches!(self.mode, AuthMode::Off)
    }
}

/// Who is asking, as every page handler receives it.
#[derive(Debug, Clone)]
pub struct Viewer {
    /// The user's name; empty when sign-in is off.
    pub name: String,
    pub role: Role,
    pub scope: Scope,
    /// The session's CSRF token; empty without a session.
    pub csrf: String,
    /// The session's token hash, for logout.
    session: Option<String>,
    /// The clients a scoped user may see, for links.
    pub clients: Vec<String>,
}

impl Viewer {
    /// Everyone, when sign-in is off.
    fn unsigned() -> Viewer {
        Viewer {
            name: String::new(),
            role: Role::Admin,
            scope: Scope::All,
            csrf: String::new(),
            session: None,
            clients: Vec::new(),
        }
    }

    fn of(user: &User, session: Option<&Session>) -> Viewer {
        Viewer {
            name: user.name.clone(),
            role: user.role,
            scope: user.scope(),
            csrf: session.map(|s| s.csrf.clone()).unwrap_or_default(),
            session: session.map(|s| s.token_hash.clone()),
            clients: user.clients.clone(),
        }
    }

    /// A text naming what this viewer's pages depend on, for the page cache.
    pub fn cache_key(&self) -> String {
        format!("{}|{}", self.role, self.scope.key())
    }
}

/// Paths open without signing in.
fn is_public(path: &str) -> bool {
    super::registry::is_public(path)
}

/// The request's peer address, when the server recorded it.
fn peer(request: &Request) -> Option<SocketAddr> {
    request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0)
}

fn address_text(request: &Request) -> String {
    peer(request).map(|p| p.ip().to_string()).unwrap_or_default()
}

/// A cookie's value from the request's `Cookie` headers.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_string())
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Middleware: finds the viewer (session, proxy header, or nobody when sign-in is off),
/// sends visitors who are not signed in to `/login` (401 for JSON), refuses what the role
/// may not open, and marks every personal answer private.
pub async fn authenticate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    if path == "/metrics" {
        return metrics_gate(&state, request, next).await;
    }
    if is_public(&path) {
        return next.run(request).await;
    }
    let (headers, from) = (request.headers().clone(), peer(&request));
    let viewer = match find_viewer(&state, &headers, from).await {
        Ok(Some(viewer)) => viewer,
        Ok(None) => return sign_in_first(&request),
        Err(error) => return error.into_response(),
    };
    if let Some(refused) = refusal(&viewer, request.method(), &path) {
        return dress(Some(&viewer), refused).await;
    }
    let signed_in = !state.auth.is_off();
    request.extensions_mut().insert(viewer);
    let mut response = next.run(request).await;
    if signed_in {
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
        headers.insert(header::VARY, HeaderValue::from_static("Cookie, Accept"));
    }
    response
}

/// The database's key for proxy users' CSRF tokens. A database without one (its row deleted
/// by hand) gets a key of this process alone: forms then work on one replica only, as said.
async fn proxy_csrf_secret(state: &AppState) -> Result<String, WebError> {
    match state.store.web_secret("proxy_csrf").await? {
        Some(secret) if !secret.is_empty() => Ok(secret),
        _ => {
            tracing::warn!(
                "the database has no proxy_csrf secret (table web_secrets): proxy users' forms \
                 are accepted only by the replica that rendered them"
            );
            Ok(auth::random_token())
        }
    }
}

/// The viewer of a request, or `None` when nobody is signed in.
async fn find_viewer(
    state: &AppState,
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
) -> Result<Option<Viewer>, WebError> {
    match &state.auth.mode {
        AuthMode::Off => Ok(Some(Viewer::unsigned())),
        AuthMode::Proxy { header, trusted } => {
            let from_proxy = peer.is_some_and(|p| trusted.contains(&p.ip()));
            let named = headers.get(header).and_then(|v| v.to_str().ok()).map(str::trim);
            let (true, Some(name)) = (from_proxy, named.filter(|n| !n.is_empty())) else { return Ok(None) };
            let user = state.store.user(name).await?.filter(|u| !u.disabled);
            let Some(user) = user else { return Ok(None) };
            let secret = state.auth.proxy_csrf_secret.get_or_try_init(|| proxy_csrf_secret(state)).await?;
            let mut viewer = Viewer::of(&user, None);
            viewer.csrf = auth::token_hash(&format!("{secret}:{}", user.name));
            Ok(Some(viewer))
        }
        AuthMode::Local => {
            let Some(token) = cookie(headers, SESSION_COOKIE) else { return Ok(None) };
            let hash = auth::token_hash(&token);
            let Some((session, user)) = state.store.session(&hash).await? else { return Ok(None) };
            let now = now();
            let expired = now - session.last_seen > state.auth.idle_timeout
                || now - session.created_at > state.auth.absolute_timeout;
            if expired || user.disabled {
                state.store.delete_session(&hash).await?;
                return Ok(None);
            }
            // One write a minute at most per session, not one per request.
            if now - session.last_seen >= 60 {
                state.store.touch_session(&hash, now).await?;
            }
            Ok(Some(Viewer::of(&user, Some(&session))))
        }
    }
}

/// 401 for a JSON request, else a redirect to the login form that comes back here.
fn sign_in_first(request: &Request) -> Response {
    if super::error::wants_json(request) {
        let body = serde_json::json!({"status": 401, "error": "sign in first", "login": "/login"});
        return (StatusCode::UNAUTHORIZED, [(header::CACHE_CONTROL, "no-store")], axum::Json(body))
            .into_response();
    }
    let back = request.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/");
    Redirect::to(&format!("/login?next={}", super::pages::url_escape(back))).into_response()
}

/// The answer refusing what a role may not open, if it may not: the rules of the path's
/// page in [`super::registry::PAGES`]. Client users see only their own clients' pages (and
/// issued invoices); a client user's home is their first client's page.
fn refusal(viewer: &Viewer, method: &Method, path: &str) -> Option<Response> {
    use super::registry;
    let client = viewer.role == Role::Client;
    let refused = match registry::find(path) {
        Some(page) => {
            let rule = if method == Method::POST { page.post } else { page.get };
            if rule.who.allows(viewer.role) {
                return None;
            }
            if client && path == "/" && method == Method::GET {
                return Some(match viewer.clients.first() {
                    Some(first) => {
                        Redirect::to(&format!("/clients/{}", super::pages::url_escape(first))).into_response()
                    }
                    None => WebError::Forbidden {
                        message: "Your account has no client assigned; ask an administrator.".into(),
                        choices: Vec::new(),
                    }
                    .into_response(),
                });
            }
            rule.refused
        }
        // No page: a 404 for every role (the 404 page offers what the viewer may open).
        None => return None,
    };
    let choices = if refused.own_pages {
        viewer.clients.iter().map(|c| format!("/clients/{}", super::pages::url_escape(c))).collect()
    } else {
        refused.choices.iter().map(|c| c.to_string()).collect()
    };
    Some(WebError::Forbidden { message: refused.message.into(), choices }.into_response())
}

/// `/metrics`: behind its bearer token when one is set; open without one only when sign-in
/// is off.
async fn metrics_gate(state: &AppState, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let allowed = match (&state.auth.metrics_token, given) {
        (Some(token), Some(given)) => auth::same_secret(token, given),
        (Some(_), None) => false,
        (None, _) => state.auth.is_off(),
    };
    if allowed {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "/metrics needs the bearer token given to serve (--metrics-token or GPULEDGER_METRICS_TOKEN)\n",
    )
        .into_response()
}

/// Middleware: every POST must come from this site (`Origin`, when sent, names this host)
/// and carry the CSRF token: the session's, or for the login form the one in its cookie.
pub async fn csrf_guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    // Another site's form is refused in every mode, sign-in off included (a page on the web
    // must not drive a dashboard on the visitor's own machine).
    let host = request.headers().get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    if let Some(origin) = request.headers().get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
        if origin_host != host {
            return WebError::Forbidden {
                message: "This form was sent from another site.".into(),
                choices: Vec::new(),
            }
            .into_response();
        }
    }
    // Without sign-in there is no session to hold a token.
    if state.auth.is_off() {
        return next.run(request).await;
    }
    let expected = if request.uri().path() == "/login" || request.uri().path() == "/setup" {
        cookie(request.headers(), LOGIN_CSRF_COOKIE)
    } else {
        request.extensions().get::<Viewer>().map(|v| v.csrf.clone()).filter(|c| !c.is_empty())
    };
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 10).await else {
        return WebError::bad("body", "the form is larger than 64 KiB", Vec::new()).into_response();
    };
    let sent = parts
        .headers
        .get("x-csrf-token")
        .and_then(|v| v.to_str().ok())
        .map(String::from)
        .or_else(|| form_field(&bytes, "csrf"));
    let valid = matches!((&expected, &sent), (Some(e), Some(s)) if auth::same_secret(e, s));
    if !valid {
        return WebError::Forbidden {
            message: "The form's security token is missing or out of date; reload the page and try again."
                .into(),
            choices: Vec::new(),
        }
        .into_response();
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await
}

/// One field of a URL-encoded form body.
fn form_field(body: &[u8], name: &str) -> Option<String> {
    serde_urlencoded::from_bytes::<Vec<(String, String)>>(body)
        .ok()?
        .into_iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value)
}

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    active: &'static str,
    heading: &'static str,
    action: &'static str,
    csrf: String,
    next: String,
    message: String,
    setup_token: String,
}

#[derive(Debug, Default, Deserialize)]
pub struct LoginQuery {
    next: Option<String>,
    token: Option<String>,
}

/// Where to go after signing in: a path on this site only. No `//host` or `/\host`, and no
/// control character, space or backslash anywhere: browsers drop tabs and line breaks from a
/// URL, so `/\t/evil.example/` would be `//evil.example/`, and a line break would end the
/// `Location` header.
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && n.chars().all(|c| !c.is_control() && !c.is_whitespace() && c != '\\') =>
        {
            n.to_string()
        }
        _ => "/".into(),
    }
}

/// The login form. Its CSRF token is the one already in the browser's cookie when there is
/// one (a second tab, or a request the browser makes on its own such as `/favicon.ico`, must
/// not invalidate the form on screen), else a new one.
fn login_form(
    headers: &HeaderMap,
    heading: &'static str,
    action: &'static str,
    next: &str,
    message: &str,
    setup: &str,
) -> Response {
    let csrf = cookie(headers, LOGIN_CSRF_COOKIE)
        .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(auth::random_token);
    let page = LoginPage {
        active: "",
        heading,
        action,
        csrf: csrf.clone(),
        next: next.to_string(),
        message: message.to_string(),
        setup_token: setup.to_string(),
    };
    let status = if message.is_empty() { StatusCode::OK } else { StatusCode::UNAUTHORIZED };
    match page.render() {
        Ok(html) => (
            status,
            [
                (
                    header::SET_COOKIE,
                    format!("{LOGIN_CSRF_COOKIE}={csrf}; Path=/; HttpOnly; SameSite=Strict"),
                ),
                (header::CACHE_CONTROL, "no-store".into()),
            ],
            Html(html),
        )
            .into_response(),
        Err(e) => WebError::from(e).into_response(),
    }
}

/// `GET /login`.
pub async fn login_page(Query(query): Query<LoginQuery>, headers: HeaderMap) -> Response {
    login_form(&headers, "Sign in", "/login", &safe_next(query.next.as_deref()), "", "")
}

#[derive(Debug, Deserialize)]
pub struct LoginForm {
    username: String,
    password: String,
    next: Option<String>,
    /// A one-time code from `users sign-in-code`: past the account's lockout.
    code: Option<String>,
}

/// `POST /login`: checks the password (as slowly for an unknown user as for a wrong
/// password), refuses after too many failures, and starts a new session.
pub async fn login(State(state): State<AppState>, request: Request) -> Response {
    let address = address_text(&request);
    let secure = state.auth.secure_cookies;
    let old = cookie(request.headers(), SESSION_COOKIE);
    let headers = request.headers().clone();
    let Ok(Form(form)) = Form::<LoginForm>::from_request(request, &()).await else {
        return WebError::bad("username", "the form needs username and password", Vec::new()).into_response();
    };
    let next = safe_next(form.next.as_deref());
    match sign_in(&state, &headers, &form, &address).await {
        Ok(Ok(user)) => {
            // A fresh token: a session id planted before login is never promoted.
            if let Some(old) = old {
                let _ = state.store.delete_session(&auth::token_hash(&old)).await;
            }
            let token = auth::random_token();
            let now = now();
            let session = Session {
                token_hash: auth::token_hash(&token),
                user_id: user.id,
                csrf: auth::random_token(),
                created_at: now,
                last_seen: now,
                address: address.clone(),
            };
            if let Err(e) = state.store.create_session(&session).await {
                return WebError::from(e).into_response();
            }
            let _ = record(&state, &user.name, &address, "login", "").await;
            let secure = if secure { "; Secure" } else { "" };
            (
                StatusCode::SEE_OTHER,
                [
                    (header::LOCATION, next),
                    (
                        header::SET_COOKIE,
                        format!("{SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax{secure}"),
                    ),
                    (header::CACHE_CONTROL, "no-store".into()),
                ],
            )
                .into_response()
        }
        Ok(Err(refusal)) => refusal,
        Err(e) => e.into_response(),
    }
}

/// The user a login form names, or the answer that refuses it. The attempt is counted
/// against the address and then the account before the password is checked, each in one
/// statement, so simultaneous attempts are counted one after another and only the first
/// [`FAILURES_PER_ACCOUNT`] of an account's window are checked at all; a sign-in that
/// succeeds gives its attempts back. A refused sign-in is counted in its account, address
/// and window ([`crate::store::LoginFailures`]), not logged once per attempt; a block is
/// logged once, when a limit is first passed in a window.
async fn sign_in(
    state: &AppState,
    headers: &HeaderMap,
    form: &LoginForm,
    address: &str,
) -> Result<Result<User, Response>, WebError> {
    let now = now();
    let mut taken = Vec::new();
    let limits = [
        ("address", address, FAILURES_PER_ADDRESS),
        ("account", form.username.as_str(), FAILURES_PER_ACCOUNT),
    ];
    // Failures from elsewhere lock an account for everyone; its user's one-time code (made on
    // the command line) lets the user past that lock, used up by this attempt.
    let code = form.code.as_deref().map(str::trim).filter(|c| !c.is_empty());
    let unlocked = match code {
        Some(code) => {
            let used =
                state.store.take_sign_in_code(&form.username, &crate::auth::token_hash(code), now).await?;
            if used {
                record(state, &form.username, address, "sign_in_code_used", "").await?;
            }
            used
        }
        None => false,
    };
    for (scope, subject, limit) in limits {
        if subject.is_empty() || (unlocked && scope == "account") {
            continue;
        }
        let (attempts, window_start) =
            state.store.take_login_attempt(scope, subject, now, FAILURE_WINDOW).await?;
        if attempts > limit {
            if attempts == limit + 1 {
                let detail = format!("more than {limit} sign-in attempts for this {scope} in 15 minutes");
                record(state, &form.username, address, "login_blocked", &detail).await?;
            }
            let wait = (window_start + FAILURE_WINDOW - now).clamp(1, FAILURE_WINDOW);
            let minutes = (wait + 59) / 60;
            let body = format!(
                "Too many failed sign-ins for this account or address: wait {minutes} minutes and try again.\n"
            );
            let refusal = (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, wait.to_string())], body);
            return Ok(Err(refusal.into_response()));
        }
        taken.push((scope, subject, window_start));
    }
    let user = state.store.user(&form.username).await?;
    let (password, stored) = (form.password.clone(), user.as_ref().map(|u| u.password_hash.clone()));
    // Verifying costs tens of milliseconds of CPU: off the async workers.
    let matches = tokio::task::spawn_blocking(move || match stored {
        Some(stored) if !stored.is_empty() => password::verify(&password, &stored),
        _ => {
            password::verify(&password, password::decoy());
            false
        }
    })
    .await
    .unwrap_or(false);
    match user {
        Some(user) if matches && !user.disabled => {
            for (scope, subject, window_start) in taken {
                state.store.return_login_attempt(scope, subject, window_start).await?;
            }
            Ok(Ok(user))
        }
        _ => {
            // Counted in the account's window (the one its limit runs in).
            let window = taken
                .iter()
                .find(|(scope, ..)| *scope == "account")
                .map_or(now - now.rem_euclid(FAILURE_WINDOW), |(.., start)| *start);
            state.store.record_login_failure(&form.username, address, window, now).await?;
            Ok(Err(login_form(
                headers,
                "Sign in",
                "/login",
                &safe_next(form.next.as_deref()),
                "Wrong user name or password.",
                "",
            )))
        }
    }
}

/// Appends to the audit log.
pub async fn record(
    state: &AppState,
    username: &str,
    address: &str,
    action: &str,
    detail: &str,
) -> Result<(), WebError> {
    let entry = AuditEntry::new(username, address, action, detail);
    state.store.audit(&entry).await.map_err(WebError::from)
}

/// `POST /logout`: ends the session and clears the cookie.
pub async fn logout(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
) -> Response {
    if let Some(hash) = &viewer.session {
        let _ = state.store.delete_session(hash).await;
    }
    let _ = record(&state, &viewer.name, "", "logout", "").await;
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, "/login".to_string()),
            (header::SET_COOKIE, format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0")),
        ],
    )
        .into_response()
}

#[derive(Template)]
#[template(path = "account.html")]
struct AccountPage<'a> {
    active: &'static str,
    viewer: &'a Viewer,
    links: Vec<(String, String)>,
    message: String,
}

impl AccountPage<'_> {
    fn new<'v>(viewer: &'v Viewer, message: &str) -> AccountPage<'v> {
        let links = viewer
            .clients
            .iter()
            .map(|c| (format!("/clients/{}", super::pages::url_escape(c)), c.clone()))
            .collect();
        AccountPage { active: "", viewer, links, message: message.into() }
    }
}

/// `GET /account`: who you are, what you may see, and the password form.
pub async fn account(axum::Extension(viewer): axum::Extension<Viewer>) -> Result<Response, WebError> {
    let page = AccountPage::new(&viewer, "");
    Ok(Html(page.render()?).into_response())
}

#[derive(Debug, Deserialize)]
pub struct PasswordForm {
    current: String,
    new: String,
}

/// `POST /account/password`: checks the current password, saves the new one and ends every
/// session of the user (this one too: sign in again with the new password).
pub async fn change_password(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    Form(form): Form<PasswordForm>,
) -> Result<Response, WebError> {
    let refuse = |message: &str| -> Result<Response, WebError> {
        let page = AccountPage::new(&viewer, message);
        Ok((StatusCode::BAD_REQUEST, Html(page.render()?)).into_response())
    };
    let Some(mut user) = state.store.user(&viewer.name).await? else {
        return refuse("Passwords of users signed in through a proxy are not kept here.");
    };
    let (current, stored) = (form.current.clone(), user.password_hash.clone());
    let matches =
        tokio::task::spawn_blocking(move || password::verify(&current, &stored)).await.unwrap_or(false);
    if !matches {
        return refuse("The current password is wrong.");
    }
    let new = form.new.clone();
    user.password_hash = match tokio::task::spawn_blocking(move || password::hash(&new)).await {
        Ok(Ok(hash)) => hash,
        Ok(Err(e)) => return refuse(&e.to_string()),
        Err(_) => return refuse("hashing the password failed"),
    };
    user.updated_at = now();
    state.store.update_user(&user, true).await?;
    record(&state, &user.name, "", "password_changed", "").await?;
    Ok(Redirect::to("/login").into_response())
}

#[derive(Template)]
#[template(path = "admin.html")]
struct AdminPage<'a> {
    active: &'static str,
    viewer: &'a Viewer,
    users: Vec<User>,
    /// Each entry of the page with its time as UTC text.
    audit: Vec<(String, AuditEntry)>,
    /// The log's filters, its page, and the links to the pages beside it (empty for none).
    audit_user: String,
    audit_action: String,
    audit_page: i64,
    newer: String,
    older: String,
    /// Refused sign-ins: the window's start and the last failure as UTC text.
    refused: Vec<(String, String, crate::store::LoginFailures)>,
    roles: [Role; 5],
    /// Who may issue invoices, the choices, and the seller printed on them.
    issuers: crate::domain::invoices::Issuers,
    issuer_choices: [crate::domain::invoices::Issuers; 2],
    seller: crate::domain::invoices::Seller,
    notice: String,
}

#[derive(Debug, Default, Deserialize)]
pub struct AdminQuery {
    format: Option<String>,
    done: Option<String>,
    /// The audit log's filters and page (from 1).
    user: Option<String>,
    action: Option<String>,
    page: Option<i64>,
}

/// Audit entries a page of the admin page shows (the JSON twin: five times as many).
const AUDIT_PAGE: i64 = 100;

/// `GET /admin`: users and the newest audit entries; `?format=json` for the audit log.
pub async fn admin(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    Query(query): Query<AdminQuery>,
    headers: HeaderMap,
) -> Result<Response, WebError> {
    let json = query.format.as_deref() == Some("json") || super::error::accepts_json(&headers);
    let per_page = if json { 5 * AUDIT_PAGE } else { AUDIT_PAGE };
    let page = query.page.unwrap_or(1).clamp(1, 1_000_000);
    let filter = |value: &Option<String>| value.as_deref().unwrap_or("").trim().to_string();
    let (user, action) = (filter(&query.user), filter(&query.action));
    // One more than a page: whether there is an older page.
    let mut audit = state
        .store
        .audit_log(&crate::store::AuditQuery {
            username: user.clone(),
            action: action.clone(),
            offset: (page - 1) * per_page,
            limit: per_page + 1,
        })
        .await?;
    let older = audit.len() as i64 > per_page;
    audit.truncate(per_page as usize);
    // Refused sign-ins of the last day, a row per account, address and window.
    let failures = state.store.login_failures(now() - 24 * 3600, 200).await?;
    if json {
        let users = state.store.users().await?;
        return Ok(axum::Json(serde_json::json!({
            "users": users,
            "audit": audit,
            "audit_page": page,
            "audit_older": older,
            "refused_sign_ins": failures,
        }))
        .into_response());
    }
    let link = |to: i64| {
        let mut href = format!("/admin?page={to}");
        for (key, value) in [("user", &user), ("action", &action)] {
            if !value.is_empty() {
                href.push_str(&format!("&{key}={}", super::pages::url_escape(value)));
            }
        }
        href
    };
    let utc = crate::period::human::epoch_second;
    let page = AdminPage {
        active: "admin",
        viewer: &viewer,
        users: state.store.users().await?,
        audit: audit.into_iter().map(|a| (utc(a.at), a)).collect(),
        audit_user: user.clone(),
        audit_action: action.clone(),
        audit_page: page,
        newer: if page > 1 { link(page - 1) } else { String::new() },
        older: if older { link(page + 1) } else { String::new() },
        refused: failures.into_iter().map(|f| (utc(f.window_start), utc(f.last_at), f)).collect(),
        roles: Role::ALL,
        issuers: state.store.issuers().await?,
        issuer_choices: crate::domain::invoices::Issuers::ALL,
        seller: state.store.seller().await?,
        notice: if query.done.is_some() {
            "Invoicing settings saved (see the audit log).".into()
        } else {
            String::new()
        },
    };
    Ok(Html(page.render()?).into_response())
}

#[derive(Debug, Deserialize)]
pub struct UserForm {
    action: String,
    username: String,
    role: Option<String>,
    clients: Option<String>,
    password: Option<String>,
}

/// A user's clients: none for a role that sees every client, some for one that does not,
/// each a client gpuledger knows.
async fn check_clients(state: &AppState, user: &User) -> Result<(), WebError> {
    let bad = |e| WebError::bad("clients", e, Vec::new());
    crate::domain::users::check_clients(user).map_err(bad)?;
    let known = crate::store::known_clients(state.store.as_ref()).await?;
    crate::domain::users::check_clients_exist(user, &known).map_err(bad)
}

/// `POST /admin/users`: add a user, change a role, disable or enable one.
pub async fn change_user(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    Form(form): Form<UserForm>,
) -> Result<Response, WebError> {
    let role = || -> Result<Role, WebError> {
        let text = form.role.as_deref().unwrap_or("");
        text.parse().map_err(|e: String| WebError::bad("role", e, Role::ALL.map(|r| r.to_string()).to_vec()))
    };
    let clients = crate::domain::users::client_list(form.clients.as_deref().unwrap_or(""));
    let now = now();
    let detail = match form.action.as_str() {
        "add" => {
            let password = form.password.clone().unwrap_or_default();
            let hash = tokio::task::spawn_blocking(move || password::hash(&password))
                .await
                .map_err(|_| WebError::bad("password", "hashing failed", Vec::new()))?
                .map_err(|e| WebError::bad("password", e.to_string(), Vec::new()))?;
            let user = User::new(&form.username, role()?, clients, hash);
            check_clients(&state, &user).await?;
            state
                .store
                .create_user(&user)
                .await
                .map_err(|e| WebError::bad("username", e.to_string(), Vec::new()))?;
            format!("added {user}")
        }
        "role" | "disable" | "enable" => {
            let Some(mut user) = state.store.user(&form.username).await? else {
                return Err(WebError::not_found(format!("No user named {:?}.", form.username)));
            };
            let end_sessions = form.action != "enable";
            match form.action.as_str() {
                "role" => {
                    user.role = role()?;
                    user.clients = clients;
                    check_clients(&state, &user).await?;
                }
                "disable" => user.disabled = true,
                _ => user.disabled = false,
            }
            user.updated_at = now;
            crate::domain::users::check_an_admin_remains(&state.store.users().await?, &user)
                .map_err(|e| WebError::bad("username", e, Vec::new()))?;
            state.store.update_user(&user, end_sessions).await?;
            format!("{} {user} clients {:?}", form.action, user.clients)
        }
        other => {
            return Err(WebError::bad(
                "action",
                format!("{other:?} is not an action"),
                ["add", "role", "disable", "enable"].map(String::from).to_vec(),
            ));
        }
    };
    record(&state, &viewer.name, "", "user_changed", &detail).await?;
    Ok(Redirect::to("/admin").into_response())
}

/// `GET /setup?token=…`: the first administrator, while no user exists, with the one-time
/// token `serve` printed.
pub async fn setup_page(
    State(state): State<AppState>,
    Query(query): Query<LoginQuery>,
    headers: HeaderMap,
) -> Response {
    match setup_allowed(&state, query.token.as_deref()).await {
        Ok(true) => login_form(
            &headers,
            "Create the first administrator",
            "/setup",
            "/",
            "",
            query.token.as_deref().unwrap_or(""),
        ),
        Ok(false) => WebError::not_found("Setup is done: sign in at /login.").into_response(),
        Err(e) => e.into_response(),
    }
}

#[derive(Debug, Deserialize)]
pub struct SetupForm {
    username: String,
    password: String,
    token: String,
}

/// `POST /setup`: creates the first administrator.
pub async fn setup(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<SetupForm>,
) -> Response {
    match setup_allowed(&state, Some(&form.token)).await {
        Ok(true) => {}
        Ok(false) => return WebError::not_found("Setup is done: sign in at /login.").into_response(),
        Err(e) => return e.into_response(),
    }
    let password = form.password.clone();
    let hash = match tokio::task::spawn_blocking(move || password::hash(&password)).await {
        Ok(Ok(hash)) => hash,
        Ok(Err(e)) => {
            let message = e.to_string();
            return login_form(
                &headers,
                "Create the first administrator",
                "/setup",
                "/",
                &message,
                &form.token,
            );
        }
        Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    };
    let user = User::new(&form.username, Role::Admin, Vec::new(), hash);
    if let Err(e) = state.store.create_user(&user).await {
        return WebError::from(e).into_response();
    }
    if let Ok(mut token) = state.auth.setup_token.lock() {
        *token = None;
    }
    let _ = record(&state, &user.name, "", "user_added", "first administrator, through /setup").await;
    Redirect::to("/login").into_response()
}

async fn setup_allowed(state: &AppState, given: Option<&str>) -> Result<bool, WebError> {
    let expected = state.auth.setup_token.lock().ok().and_then(|t| t.clone());
    let (Some(expected), Some(given)) = (expected, given) else { return Ok(false) };
    Ok(auth::same_secret(&expected, given) && state.store.users().await?.is_empty())
}

/// The signed-in part of every page (the account link and the sign-out form, with this
/// session's CSRF token), put in after the page cache so a cached page never carries
/// another session's token; client users' navigation lists only their own pages. Downloads
/// are written to the audit log here.
pub async fn personalize(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let viewer = request.extensions().get::<Viewer>().cloned();
    let query = request.uri().query().unwrap_or("").to_string();
    let download = query.split('&').any(|p| p == "format=csv" || p == "format=xlsx");
    // Rolled up per user, page and hour: a loop of downloads is one row that counts them.
    let what = request.uri().path().to_string();
    let response = next.run(request).await;
    // Downloads are audited here, outside the page cache, so a cached one counts too.
    if download && response.status() == StatusCode::OK && !state.auth.is_off() {
        let who = viewer.as_ref().map(|v| v.name.as_str()).unwrap_or("");
        if let Err(e) = state.store.audit_download(who, &what, now()).await {
            tracing::warn!(error = %e, "could not audit a download");
        }
    }
    dress(viewer.as_ref(), response).await
}

/// An HTML answer with the viewer's account block (name, role, Sign out) and the navigation
/// the viewer's role may open: the pages whose rules let it in, or a client user's own pages.
/// Refusals (403) are dressed too, so they keep the user's way around and out.
async fn dress(viewer: Option<&Viewer>, response: Response) -> Response {
    let is_html = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/html"));
    if !is_html {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 20).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let html = String::from_utf8_lossy(&bytes);
    let account = match viewer {
        Some(v) if !v.name.is_empty() => {
            let admin = if v.role == Role::Admin { r#"<a href="/admin">Admin</a> "# } else { "" };
            format!(
                r#"<div class="account">{admin}<a href="/account">{} ({})</a> <form method="post" action="/logout"><input type="hidden" name="csrf" value="{}"><button type="submit" class="secondary">Sign out</button></form></div>"#,
                askama::filters::escape(&v.name, askama::filters::Html)
                    .map(|e| e.to_string())
                    .unwrap_or_default(),
                v.role,
                v.csrf
            )
        }
        _ => String::new(),
    };
    let mut html = html.replace("<!--gpuledger:account-->", &account);
    match viewer {
        Some(v) if v.role != Role::Client => html = staff_nav(&html, v.role),
        _ => html = client_nav(&html, viewer),
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(html))
}

/// The main navigation without the pages `role` may not open (a manager has no Alerts or
/// Data; every link of the navigation answers the one who sees it).
fn staff_nav(html: &str, role: Role) -> String {
    const OPEN: &str = r#"<nav aria-label="Main">"#;
    let (Some(start), Some(end)) = (html.find(OPEN), html.find("</nav>")) else { return html.to_string() };
    let inner = &html[start + OPEN.len()..end];
    let links: String = inner
        .split("<a ")
        .skip(1)
        .filter(|link| {
            let path = link.split("href=\"").nth(1).and_then(|rest| rest.split('"').next()).unwrap_or("");
            super::registry::find(path).is_none_or(|page| page.get.who.allows(role))
        })
        .map(|link| format!("<a {}", link.trim_end()))
        .collect();
    format!("{}{OPEN}{links}{}", &html[..start], &html[end..])
}

/// The main navigation replaced by links to the viewer's own client pages, its forecast and
/// its invoices (none before sign-in).
fn client_nav(html: &str, viewer: Option<&Viewer>) -> String {
    const OPEN: &str = r#"<nav aria-label="Main">"#;
    let (Some(start), Some(end)) = (html.find(OPEN), html.find("</nav>")) else { return html.to_string() };
    let links: String = viewer
        .map(|v| v.clients.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let name =
                askama::filters::escape(c, askama::filters::Html).map(|e| e.to_string()).unwrap_or_default();
            format!(r#"<a href="/clients/{}">{name}</a>"#, super::pages::url_escape(c))
        })
        .chain(viewer.map(|_| r#"<a href="/plan">Forecast</a>"#.to_string()))
        .chain(viewer.map(|_| r#"<a href="/invoices">Invoices</a>"#.to_string()))
        .collect();
    format!("{}{OPEN}{links}{}", &html[..start], &html[end..])
}

/// The users, when sign-in is local and none exists yet: the administrator from
/// `GPULEDGER_ADMIN_PASSWORD`, or a one-time `/setup` link printed for the operator.
pub async fn first_start(state: &AppState, base: &str) -> anyhow::Result<()> {
    if !matches!(state.auth.mode, AuthMode::Local) || !state.store.users().await?.is_empty() {
        return Ok(());
    }
    if let Ok(password) = std::env::var("GPULEDGER_ADMIN_PASSWORD") {
        let hash = tokio::task::spawn_blocking(move || password::hash(&password)).await??;
        let admin = User::new("admin", Role::Admin, Vec::new(), hash);
        state.store.create_user(&admin).await?;
        record(state, "admin", "", "user_added", "first administrator, from GPULEDGER_ADMIN_PASSWORD")
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        eprintln!("created the administrator \"admin\" with the password in GPULEDGER_ADMIN_PASSWORD");
        return Ok(());
    }
    let token = auth::random_token();
    if let Ok(mut slot) = state.auth.setup_token.lock() {
        *slot = Some(token.clone());
    }
    println!(
        "No user exists yet. Create the first administrator (this link works once): {base}/setup?token={token}"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn next_is_a_path_on_this_site_or_home() {
        assert_eq!(safe_next(Some("/costs?period=2026-10")), "/costs?period=2026-10");
        // #37: a tab or line break that a browser drops, or that ends the Location header.
        for bad in [
            "/\t/evil.example/",
            "//evil.example",
            "/\\evil.example",
            "/a\r\nSet-Cookie: x=1",
            "https://evil.example",
            "/a b",
        ] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(safe_next(None), "/");
    }
}
