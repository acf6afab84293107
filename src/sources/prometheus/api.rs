//! The Prometheus HTTP API (v1): metric names, series, and raw samples of a window.
//!
//! Raw samples come from instant queries of range selectors (`metric[2h]`), which return
//! every stored sample in the range unchanged, so hour means and counter increases are
//! computed exactly here rather than approximated by `avg_over_time`/`increase`
//! extrapolation. Prometheus 2.x ranges include both ends (reference §3.1): gauges are read
//! at `end − 1 ms` so a window holds exactly `[start, end)`, and a sample read twice at a
//! window edge is dropped by the [`Collector`](super::Collector).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// How to reach Prometheus.
#[derive(Clone)]
pub struct ApiOptions {
    pub url: String,
    pub bearer_token: Option<String>,
    pub basic_auth: Option<(String, String)>,
    /// Per request.
    pub timeout: Duration,
    /// Attempts per request, with backoff 0.5 s, 1 s, 2 s, ... between them.
    pub attempts: u32,
}

impl std::fmt::Debug for ApiOptions {
    // Credentials never reach logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiOptions").field("url", &self.url).field("timeout", &self.timeout).finish()
    }
}

/// Why a request failed, after its retries.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("Prometheus at {url} could not be reached while {what}: {message}")]
    Unreachable { url: String, what: String, message: String },
    #[error("Prometheus at {url} refused the query while {what}: {message}")]
    Refused { url: String, what: String, message: String },
}

/// One series of a matrix result: labels (with `__name__`) and `(seconds, value text)`.
#[derive(Debug, Deserialize)]
pub struct MatrixSeries {
    pub metric: BTreeMap<String, String>,
    #[serde(default)]
    pub values: Vec<(f64, String)>,
}

#[derive(Debug, Deserialize)]
struct Envelope<T> {
    status: String,
    data: Option<T>,
    #[serde(rename = "errorType")]
    error_type: Option<String>,
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct MatrixData {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<MatrixSeries>,
}

/// A Prometheus server.
pub struct PrometheusApi {
    client: reqwest::Client,
    options: ApiOptions,
}

impl PrometheusApi {
    pub fn new(options: ApiOptions) -> Result<PrometheusApi, ApiError> {
        let client = reqwest::Client::builder()
            .timeout(options.timeout)
            .connect_timeout(options.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| ApiError::Unreachable {
                url: crate::text::redacted_url(&options.url),
                what: "setting up the HTTP client".into(),
                message: e.to_string(),
            })?;
        Ok(PrometheusApi { client, options })
    }

    pub fn url(&self) -> &str {
        &self.options.url
    }

    /// Every metric name with samples in `[start, end]`.
    pub async fn metric_names(&self, start: i64, end: i64) -> Result<Vec<String>, ApiError> {
        let params = [("start", start.to_string()), ("end", end.to_string())];
        self.get("/api/v1/label/__name__/values", &params, "listing metric names").await
    }

    /// Label sets of the series of `selector` with samples in `[start, end]`.
    pub async fn series(
        &self,
        selector: &str,
        start: i64,
        end: i64,
    ) -> Result<Vec<BTreeMap<String, String>>, ApiError> {
        let params =
            [("match[]", selector.to_string()), ("start", start.to_string()), ("end", end.to_string())];
        self.get("/api/v1/series", &params, &format!("listing the series of {selector}")).await
    }

    /// Evaluates a range-vector `query` at `time_ms`: raw samples per series.
    pub async fn samples(
        &self,
        query: &str,
        time_ms: i64,
        what: &str,
    ) -> Result<Vec<MatrixSeries>, ApiError> {
        let params = [("query", query.to_string()), ("time", format!("{:.3}", time_ms as f64 / 1000.0))];
        let data: MatrixData = self.post("/api/v1/query", &params, what).await?;
        if data.result_type != "matrix" {
            return Err(self.refused(what, format!("expected a matrix result, got {}", data.result_type)));
        }
        Ok(data.result)
    }

    async fn get<T: for<'de> Deserialize<'de>>(
        &self,
        path: &str,
        params: &[(&str, String)],
        what: &str,
    ) -> Result<T, ApiError> {
        self.call(|| self.authorize(self.client.get(self.endpoint(path)).query(params)), what).await
    }

    // POST keeps long queries out of URL length limits.
    async fn post<T: for<'de> Deserialize<'de>>(
        &self,
        path: &str,
        params: &[(&str, String)],
        what: &str,
    ) -> Result<T, ApiError> {
        self.call(|| self.authorize(self.client.post(self.endpoint(path)).form(params)), what).await
    }

    fn endpoint(&self, path: &str) -> String {
        format!("{}{path}", self.options.url.trim_end_matches('/'))
    }

    fn authorize(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match (&self.options.bearer_token, &self.options.basic_auth) {
            (Some(token), _) => request.bearer_auth(token),
            (None, Some((user, password))) => request.basic_auth(user, Some(password)),
            (None, None) => request,
        }
    }

    /// Sends with retries: network errors, timeouts and 5xx answers are retried with
    /// backoff; a 4xx answer (a bad query) is final.
    async fn call<T: for<'de> Deserialize<'de>>(
        &self,
        request: impl Fn() -> reqwest::RequestBuilder,
        what: &str,
    ) -> Result<T, ApiError> {
        let mut delay = Duration::from_millis(500);
        let mut last_error = String::new();
        for attempt in 1..=self.options.attempts.max(1) {
            if attempt > 1 {
                tracing::warn!("retrying Prometheus ({what}) after: {last_error}");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            let response = match request().send().await {
                Ok(response) => response,
                Err(error) => {
                    last_error = describe(&error);
                    continue;
                }
            };
            let status = response.status();
            let body = match response.bytes().await {
                Ok(body) => body,
                Err(error) => {
                    last_error = describe(&error);
                    continue;
                }
            };
            let envelope: Envelope<T> = match serde_json::from_slice(&body) {
                Ok(envelope) => envelope,
                Err(_) if status.is_server_error() || status.is_success() => {
                    last_error =
                        format!("HTTP {status}: {}", String::from_utf8_lossy(&body[..body.len().min(200)]));
                    continue;
                }
                Err(_) => {
                    let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
                    return Err(self.refused(what, format!("HTTP {status}: {text}")));
                }
            };
            match (envelope.status.as_str(), envelope.data) {
                ("success", Some(data)) => return Ok(data),
                _ => {
                    let message = format!(
                        "HTTP {status}, {}: {}",
                        envelope.error_type.unwrap_or_default(),
                        envelope.error.unwrap_or_default()
                    );
                    if status.is_client_error() {
                        return Err(self.refused(what, message));
                    }
                    last_error = message;
                }
            }
        }
        Err(ApiError::Unreachable {
            url: crate::text::redacted_url(&self.options.url),
            what: what.to_string(),
            message: last_error,
        })
    }

    fn refused(&self, what: &str, message: String) -> ApiError {
        ApiError::Refused {
            url: crate::text::redacted_url(&self.options.url),
            what: what.to_string(),
            message,
        }
    }
}

/// reqwest's error with its causes ("error sending request" alone says nothing), without
/// the credentials of the URL reqwest puts in it.
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    if let Some(url) = error.url() {
        text = text.replace(url.as_str(), &crate::text::redacted_url(url.as_str()));
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if error.is_timeout() { format!("timed out ({text})") } else { text }
}
