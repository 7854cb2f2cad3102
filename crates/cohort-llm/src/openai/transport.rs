//! The HTTP side of the `openai` provider: the tower service async-openai's `Client` executes
//! through, and what it reads off a non-2xx answer (status, `Retry-After`, the server's message).

use super::{RETRY_AFTER_CAP, snippet};
use async_openai::error::{OpenAIError, WrappedError};
use async_openai::middleware::HttpRequestFactory;
use futures::future::BoxFuture;
use reqwest::header::{AUTHORIZATION, HeaderMap, RETRY_AFTER};
use serde_json::Value;
use std::fmt;
use std::task::{Context, Poll};
use std::time::Duration;

/// The tower service async-openai's client executes through: one HTTP exchange per call, no
/// retry. A 2xx response goes back to async-openai to read and deserialize; any other status is
/// read here, because async-openai's own error path loses `Retry-After` (and, for a non-JSON
/// body, the status), and comes back as [`HttpStatus`] in `OpenAIError::Boxed`.
#[derive(Clone, Debug)]
pub(super) struct OneAttempt {
    pub(super) http: reqwest::Client,
    /// `false` when no key is configured: async-openai always sets `Authorization: Bearer <key>`,
    /// and a local server must not receive an empty `Bearer `.
    pub(super) authorize: bool,
}

impl tower::Service<HttpRequestFactory> for OneAttempt {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = BoxFuture<'static, Result<reqwest::Response, OpenAIError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let http = self.http.clone();
        let authorize = self.authorize;
        Box::pin(async move {
            let mut request = factory.build().await?;
            if !authorize {
                request.headers_mut().remove(AUTHORIZATION);
            }
            let response = http.execute(request).await?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let retry_after = parse_retry_after(response.headers());
            let body = response.bytes().await?;
            Err(OpenAIError::Boxed(Box::new(HttpStatus {
                status: status.as_u16(),
                body: error_text(&body),
                retry_after,
            })))
        })
    }
}

/// A non-2xx answer as [`OneAttempt`] saw it; `retry_after` is the server's `Retry-After`, if it
/// sent a usable one.
#[derive(Debug)]
pub(super) struct HttpStatus {
    pub(super) status: u16,
    pub(super) body: String,
    pub(super) retry_after: Option<Duration>,
}

impl fmt::Display for HttpStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP {}: {}", self.status, self.body)
    }
}

impl std::error::Error for HttpStatus {}

/// The server's error text: OpenAI's `{"error": {"message", "type", "code"}}` rendered the way
/// async-openai renders it, Ollama's `{"error": "…"}`, or else the raw body.
pub(super) fn error_text(body: &[u8]) -> String {
    if let Ok(wrapped) = serde_json::from_slice::<WrappedError>(body) {
        return wrapped.error.to_string();
    }
    if let Ok(value) = serde_json::from_slice::<Value>(body)
        && let Some(message) = value.get("error").and_then(|e| e.as_str())
    {
        return message.to_owned();
    }
    snippet(&String::from_utf8_lossy(body))
}

/// `Retry-After` in (possibly fractional) seconds. The HTTP-date form is ignored and falls back to
/// our backoff: LLM endpoints send seconds, and a date would need a trustworthy local clock.
fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let seconds: f64 = value.parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0)
        .then(|| Duration::from_secs_f64(seconds.min(RETRY_AFTER_CAP.as_secs_f64())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn retry_after(value: &str) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
        parse_retry_after(&headers)
    }

    #[test]
    fn retry_after_reads_whole_and_fractional_seconds_and_caps_them() {
        assert_eq!(retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(retry_after("3600"), Some(RETRY_AFTER_CAP));
        assert_eq!(retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(retry_after("-1"), None);
        assert_eq!(parse_retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn error_text_prefers_the_servers_message() {
        let openai = br#"{"error":{"message":"bad model","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#;
        assert_eq!(
            error_text(openai),
            "invalid_request_error: bad model (code: model_not_found)"
        );
        assert_eq!(
            error_text(br#"{"error":"model 'x' not found"}"#),
            "model 'x' not found"
        );
        assert_eq!(error_text(b"  upstream exploded \n"), "upstream exploded");
    }
}
