//! One error type for the web edge: logged once here, shown as a themed page without
//! internals.

use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Render(#[from] askama::Error),
    #[error("writing a spreadsheet: {0}")]
    Spreadsheet(#[from] rust_xlsxwriter::XlsxError),
    /// Something the visitor asked for that is not there; the message is safe to show.
    #[error("{0}")]
    NotFound(String),
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    active: &'static str,
    status: u16,
    message: String,
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        let (status, message) = match &self {
            WebError::NotFound(message) => (StatusCode::NOT_FOUND, message.clone()),
            _ => {
                // Details go to the log, never into the body.
                tracing::error!(error = %self, "request failed");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Something went wrong on our side. It has been logged.".into(),
                )
            }
        };
        let page = ErrorPage { active: "", status: status.as_u16(), message };
        let body = page.render().unwrap_or_else(|_| "internal error".to_string());
        (status, Html(body)).into_response()
    }
}
