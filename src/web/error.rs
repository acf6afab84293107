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
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    status: u16,
    message: &'static str,
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        // Details go to the log, never into the body.
        tracing::error!(error = %self, "request failed");
        let status = StatusCode::INTERNAL_SERVER_ERROR;
        let page = ErrorPage {
            status: status.as_u16(),
            message: "Something went wrong on our side. It has been logged.",
        };
        let body = page.render().unwrap_or_else(|_| "internal error".to_string());
        (status, Html(body)).into_response()
    }
}
