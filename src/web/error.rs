//! One error type for the web edge: logged once here, shown as a themed page without
//! internals, or as JSON (`{"status", "error", "parameter"?, "choices"?}`) when the request
//! asked for JSON ([`json_errors`]).

use askama::Template;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Serialize;

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Render(#[from] askama::Error),
    #[error("writing a spreadsheet: {0}")]
    Spreadsheet(#[from] rust_xlsxwriter::XlsxError),
    /// A compute the request ran (settings changed on a page) failed.
    #[error("computing: {0}")]
    Job(#[from] crate::pipeline::JobError),
    /// A parameter that names nothing valid; the message and choices are safe to show.
    #[error("{parameter}: {message}")]
    BadRequest { parameter: &'static str, message: String, choices: Vec<String> },
    /// Something the visitor asked for that is not there; the message is safe to show.
    #[error("{message}")]
    NotFound { message: String, choices: Vec<String> },
    /// Something the visitor's role may not open; the message is safe to show.
    #[error("{message}")]
    Forbidden { message: String, choices: Vec<String> },
}

/// A report a page reads: the store's failure as such, anything else (nothing stored for the
/// month, a filter naming nothing) is what the visitor asked for and is not there.
impl From<crate::report::ReportError> for WebError {
    fn from(error: crate::report::ReportError) -> WebError {
        match error {
            crate::report::ReportError::Store(error) => WebError::Store(error),
            other => WebError::not_found(other.to_string()),
        }
    }
}

impl WebError {
    pub fn not_found(message: impl Into<String>) -> WebError {
        WebError::NotFound { message: message.into(), choices: Vec::new() }
    }

    /// `parameter` is not one of `choices`.
    pub fn bad(parameter: &'static str, message: impl Into<String>, choices: Vec<String>) -> WebError {
        WebError::BadRequest { parameter, message: message.into(), choices }
    }
}

/// What the visitor is told, as the page shows it and as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorBody {
    pub status: u16,
    pub error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameter: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    active: &'static str,
    body: &'a ErrorBody,
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        let (status, parameter, message, choices) = match self {
            WebError::BadRequest { parameter, message, choices } => {
                (StatusCode::BAD_REQUEST, Some(parameter), message, choices)
            }
            WebError::NotFound { message, choices } => (StatusCode::NOT_FOUND, None, message, choices),
            WebError::Forbidden { message, choices } => (StatusCode::FORBIDDEN, None, message, choices),
            // What needs an archived period's pods: said plainly, without where the files are.
            WebError::Store(StoreError::Archived(archived)) => {
                let message = format!(
                    "The pods of {} were archived on {}: its costs by namespace, workload and client are \
                     all here, each pod's are not. An administrator can restore them (gpuledger archive restore).",
                    archived.period,
                    crate::period::utc_minute(archived.archived_at)
                );
                (StatusCode::GONE, None, message, Vec::new())
            }
            other => {
                // Details go to the log, never into the body.
                tracing::error!(error = %other, "request failed");
                let message = "Something went wrong on our side. It has been logged.".to_string();
                (StatusCode::INTERNAL_SERVER_ERROR, None, message, Vec::new())
            }
        };
        let body = ErrorBody { status: status.as_u16(), error: message, parameter, choices };
        let page = ErrorPage { active: "", body: &body };
        let html = page.render().unwrap_or_else(|_| "internal error".to_string());
        let mut response = (status, [(header::CACHE_CONTROL, "no-store")], Html(html)).into_response();
        response.extensions_mut().insert(body);
        response
    }
}

/// Whether the `Accept` header names JSON.
pub fn accepts_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("application/json"))
}

/// Whether a request asks for JSON: `?format=json` or an `Accept` naming JSON.
pub fn wants_json(request: &axum::extract::Request) -> bool {
    let query = request.uri().query().unwrap_or("");
    query.split('&').any(|pair| pair == "format=json") || accepts_json(request.headers())
}

/// Middleware: an error answered to a request that asked for JSON becomes JSON.
/// A 400 that an extractor answered by itself (a parameter given twice, a form that does not
/// parse) becomes a [`WebError`] too, themed or JSON like any other.
pub async fn json_errors(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let json = wants_json(&request);
    let mut response = next.run(request).await;
    if response.status() == StatusCode::BAD_REQUEST && response.extensions().get::<ErrorBody>().is_none() {
        let text = axum::body::to_bytes(response.into_body(), 4096)
            .await
            .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_string())
            .unwrap_or_default();
        response = WebError::bad("query", format!("The request could not be read: {text}."), Vec::new())
            .into_response();
    }
    if !json {
        return response;
    }
    match response.extensions().get::<ErrorBody>().cloned() {
        Some(body) => {
            let status = response.status();
            (status, [(header::CACHE_CONTROL, "no-store")], axum::Json(body)).into_response()
        }
        None => response,
    }
}

/// Any path the dashboard does not serve: a 404 for every role, offering the pages the
/// viewer may open (a client user's own pages and its invoices).
pub async fn unknown_path(uri: axum::http::Uri, viewer: Option<axum::Extension<super::Viewer>>) -> WebError {
    use crate::domain::users::Role;
    let choices = match viewer.as_ref().map(|v| &v.0) {
        Some(v) if v.role == Role::Client => v
            .clients
            .iter()
            .map(|c| format!("/clients/{}", super::pages::url_escape(c)))
            .chain(["/invoices".to_string()])
            .collect(),
        Some(v) => super::registry::listed()
            .into_iter()
            .filter(|path| super::registry::find(path).is_none_or(|page| page.get.who.allows(v.role)))
            .collect(),
        None => super::registry::listed(),
    };
    WebError::NotFound { message: format!("There is no page at {}.", uri.path()), choices }
}
