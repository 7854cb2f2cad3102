//! The `openai` provider: one chat completion per call against any OpenAI-compatible endpoint
//! (OpenAI, Ollama, vLLM, llama.cpp server, DeepSeek, …), with our retry policy as the only one.
//!
//! # Why async-openai's types but not its `Client`
//!
//! async-openai 0.43 wraps every `Client` (`new`, `with_config`, `build`, `with_http_client`)
//! in its own `OpenAIRetryLayer` with 3 retries: it retries 429 (unless the body says
//! `insufficient_quota`), 5xx and connect errors with its own backoff (100 ms doubling to 8 s,
//! or `Retry-After`). Only `Client::with_http_service`, behind the crate's `middleware` feature
//! (not enabled here), can replace that layer. And what a failed call returns drops what our
//! policy needs: the headers (so `Retry-After`) are gone, and a non-JSON error body (a proxy's
//! HTML page, a plain-text 4xx from a local server) becomes `JSONDeserialize` with no status.
//! Behind that client our retries would multiply with its retries and could not honour
//! `Retry-After`. So async-openai gives us the wire format (`CreateChatCompletionRequest`,
//! `CreateChatCompletionResponse`, `WrappedError`) and the same `reqwest` it uses sends one
//! POST per attempt; everything about retrying lives in [`call_with_retries`].

use super::{ChatModel, ChatReply, ChatRequest, LlmError};
use crate::state::TokenUsage;
use async_openai::error::WrappedError;
use async_openai::types::chat::{
    ChatCompletionRequestMessage, ChatCompletionRequestUserMessage, CreateChatCompletionRequest,
    CreateChatCompletionResponse,
};
use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The longest `Retry-After` we honour: a server asking for more still gets a retry after this
/// long, so one step never sleeps for minutes on a header.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);

/// How much of an error body we keep: a proxy's HTML error page should not flood the logs and
/// the step's recorded failure reason.
const BODY_SNIPPET_CHARS: usize = 2000;

/// Everything the provider needs, already resolved from the team config (the API key is read from
/// the environment at the edge, not here).
#[derive(Clone)]
pub struct OpenAiSettings {
    /// e.g. `https://api.openai.com/v1`, `http://127.0.0.1:11434/v1` (Ollama); the provider
    /// appends `/chat/completions`.
    pub base_url: String,
    pub model: String,
    /// `None` (or empty) sends no `Authorization` header, for local servers without keys.
    pub api_key: Option<String>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// Per HTTP attempt, from sending the request to reading the whole body.
    pub request_timeout: Duration,
    /// Retries after the first attempt, so at most `max_retries + 1` requests per call.
    pub max_retries: u32,
    /// The delay before the first retry; it doubles for each further retry.
    pub backoff_base: Duration,
    /// The cap on the doubling backoff (a `Retry-After` is capped by [`RETRY_AFTER_CAP`]).
    pub backoff_max: Duration,
}

// By hand so that the key never reaches a log line through `{:?}`.
impl fmt::Debug for OpenAiSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiSettings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("request_timeout", &self.request_timeout)
            .field("max_retries", &self.max_retries)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_max", &self.backoff_max)
            .finish()
    }
}

/// A [`ChatModel`] that talks to one OpenAI-compatible endpoint. Cheap to share: the HTTP
/// connection pool and settings sit behind an `Arc`, and each call's future owns a clone of it.
#[derive(Clone, Debug)]
pub struct OpenAiModel {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: reqwest::Client,
    url: reqwest::Url,
    settings: OpenAiSettings,
}

impl OpenAiModel {
    /// Checks the settings and builds the HTTP client; sends nothing.
    pub fn new(settings: OpenAiSettings) -> Result<Self, LlmError> {
        if settings.model.trim().is_empty() {
            return Err(LlmError::InvalidSettings("the model name is empty".into()));
        }
        if settings.request_timeout.is_zero() {
            return Err(LlmError::InvalidSettings(
                "request_timeout must be greater than zero".into(),
            ));
        }
        let url = chat_completions_url(&settings.base_url)?;
        let http = reqwest::Client::builder()
            .user_agent(concat!("cohort/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::InvalidSettings(format!("HTTP client: {}", error_chain(&e))))?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                url,
                settings,
            }),
        })
    }

    pub fn settings(&self) -> &OpenAiSettings {
        &self.inner.settings
    }
}

impl ChatModel for OpenAiModel {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move { call_with_retries(&inner, &request).await })
    }
}

/// `base_url` + `/chat/completions`, accepting a base with or without a trailing slash.
fn chat_completions_url(base_url: &str) -> Result<reqwest::Url, LlmError> {
    let joined = format!("{}/chat/completions", base_url.trim_end_matches('/'));
    let url = reqwest::Url::parse(&joined)
        .map_err(|e| LlmError::InvalidSettings(format!("base_url `{base_url}`: {e}")))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(LlmError::InvalidSettings(format!(
            "base_url `{base_url}`: scheme `{other}` is not http or https"
        ))),
    }
}

/// The request body: the prompt already holds the system section, so it goes as one user message.
fn completion_request(settings: &OpenAiSettings, prompt: &str) -> CreateChatCompletionRequest {
    let message = ChatCompletionRequestUserMessage {
        content: prompt.into(),
        name: None,
    };
    #[allow(deprecated)]
    CreateChatCompletionRequest {
        model: settings.model.clone(),
        messages: vec![ChatCompletionRequestMessage::User(message)],
        temperature: settings.temperature,
        // `max_tokens`, not `max_completion_tokens`: the OpenAI-compatible servers we target
        // (Ollama, vLLM, llama.cpp, DeepSeek) all read `max_tokens`; not all read the newer name.
        max_tokens: settings.max_tokens,
        ..Default::default()
    }
}

/// Runs attempts until one succeeds, one fails in a way retrying cannot fix, or retries run out.
async fn call_with_retries(inner: &Inner, request: &ChatRequest) -> Result<ChatReply, LlmError> {
    let settings = &inner.settings;
    // Serialized once: every attempt sends the same bytes.
    let body = serde_json::to_vec(&completion_request(settings, &request.prompt))
        .map_err(|e| LlmError::InvalidSettings(format!("cannot encode the request: {e}")))?;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let failure = match attempt(inner, &body).await {
            Ok(reply) => return reply_from_body(&reply),
            Err(failure) => failure,
        };
        let retries_done = attempts - 1;
        if !failure.is_retryable() || retries_done >= settings.max_retries {
            return Err(failure.into_error(attempts, settings.request_timeout));
        }
        let delay = match failure.retry_after() {
            Some(asked) => asked.min(RETRY_AFTER_CAP),
            None => backoff_delay(settings.backoff_base, settings.backoff_max, retries_done),
        };
        tracing::warn!(
            agent = %request.agent_id,
            skill = %request.skill,
            step = %request.step_id,
            attempt = attempts,
            max_attempts = settings.max_retries + 1,
            reason = %failure,
            delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            "LLM call failed; retrying",
        );
        tokio::time::sleep(delay).await;
    }
}

/// Why one attempt did not produce a 2xx body.
#[derive(Debug)]
enum AttemptFailure {
    /// A non-2xx answer; `retry_after` is the server's `Retry-After`, if it sent a usable one.
    Status {
        status: u16,
        body: String,
        retry_after: Option<Duration>,
    },
    /// No whole answer within `request_timeout`.
    Timeout,
    /// The request never got an HTTP answer: refused, reset, DNS, TLS, a broken body…
    Connection(String),
}

impl AttemptFailure {
    /// The contract: 429, 5xx, transport failures and timeouts may pass; other statuses
    /// (400, 401, 403, 404, 422, …) will fail the same way again.
    fn is_retryable(&self) -> bool {
        match self {
            AttemptFailure::Status { status, .. } => *status == 429 || (500..600).contains(status),
            AttemptFailure::Timeout | AttemptFailure::Connection(_) => true,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            AttemptFailure::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    fn into_error(self, attempts: u32, timeout: Duration) -> LlmError {
        match self {
            AttemptFailure::Status {
                status: 429, body, ..
            } => LlmError::RateLimited { attempts, body },
            AttemptFailure::Status { status, body, .. } => LlmError::Http { status, body },
            AttemptFailure::Timeout => LlmError::Timeout(timeout),
            AttemptFailure::Connection(reason) => LlmError::Connection(reason),
        }
    }
}

impl fmt::Display for AttemptFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttemptFailure::Status { status, body, .. } => write!(f, "HTTP {status}: {body}"),
            AttemptFailure::Timeout => f.write_str("timed out"),
            AttemptFailure::Connection(reason) => write!(f, "connection failed: {reason}"),
        }
    }
}

/// One POST, bounded as a whole (connect, send, wait, read the body) by `request_timeout`, so a
/// server that stalls mid-body cannot hold the step forever.
async fn attempt(inner: &Inner, body: &[u8]) -> Result<Vec<u8>, AttemptFailure> {
    let settings = &inner.settings;
    let exchange = async {
        let mut builder = inner
            .http
            .post(inner.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        if let Some(key) = settings.api_key.as_deref().filter(|k| !k.is_empty()) {
            builder = builder.bearer_auth(key);
        }
        let response = builder.send().await.map_err(transport_failure)?;
        let status = response.status();
        let retry_after = parse_retry_after(response.headers());
        let bytes = response.bytes().await.map_err(transport_failure)?;
        if status.is_success() {
            Ok(bytes.to_vec())
        } else {
            Err(AttemptFailure::Status {
                status: status.as_u16(),
                body: error_text(&bytes),
                retry_after,
            })
        }
    };
    match tokio::time::timeout(settings.request_timeout, exchange).await {
        Ok(result) => result,
        Err(_elapsed) => Err(AttemptFailure::Timeout),
    }
}

fn transport_failure(error: reqwest::Error) -> AttemptFailure {
    // reqwest has no timeout of its own here (ours wraps the attempt), but keep the mapping
    // honest should one be configured later.
    if error.is_timeout() {
        AttemptFailure::Timeout
    } else {
        AttemptFailure::Connection(error_chain(&error))
    }
}

/// The 2xx body → text and usage. A missing first choice or empty content is `EmptyAnswer`: the
/// step failed, and retrying the same prompt is the caller's decision, not this provider's.
fn reply_from_body(body: &[u8]) -> Result<ChatReply, LlmError> {
    let response: CreateChatCompletionResponse = serde_json::from_slice(body)
        .map_err(|e| LlmError::InvalidResponse(format!("{e}; body: {}", snippet(body))))?;
    let usage = response
        .usage
        .map(|u| TokenUsage {
            prompt_tokens: u64::from(u.prompt_tokens),
            completion_tokens: u64::from(u.completion_tokens),
        })
        .unwrap_or_default();
    let Some(choice) = response.choices.into_iter().next() else {
        return Err(LlmError::EmptyAnswer("the response has no choices".into()));
    };
    match choice.message.content {
        Some(text) if !text.trim().is_empty() => Ok(ChatReply { text, usage }),
        _ => {
            let mut why = String::from("the first choice has no content");
            if let Some(reason) = &choice.finish_reason {
                why.push_str(&format!(" (finish_reason: {reason:?})"));
            }
            if let Some(refusal) = &choice.message.refusal {
                why.push_str(&format!(" (refusal: {refusal})"));
            }
            Err(LlmError::EmptyAnswer(why))
        }
    }
}

/// The server's error text: OpenAI's `{"error": {"message", "type", "code"}}` rendered the way
/// async-openai renders it, Ollama's `{"error": "…"}`, or else the raw body.
fn error_text(body: &[u8]) -> String {
    if let Ok(wrapped) = serde_json::from_slice::<WrappedError>(body) {
        return wrapped.error.to_string();
    }
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body)
        && let Some(message) = value.get("error").and_then(|e| e.as_str())
    {
        return message.to_owned();
    }
    snippet(body)
}

fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(BODY_SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// `Retry-After` in (possibly fractional) seconds. The HTTP-date form is ignored and falls back to
/// our backoff: LLM endpoints send seconds, and a date would need a trustworthy local clock.
fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let seconds: f64 = value.parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0)
        .then(|| Duration::from_secs_f64(seconds.min(RETRY_AFTER_CAP.as_secs_f64())))
}

/// The delay before retry number `retries_done + 1`: `base · 2^retries_done`, capped by `max`.
fn backoff_delay(base: Duration, max: Duration, retries_done: u32) -> Duration {
    let factor = 2u32.checked_pow(retries_done).unwrap_or(u32::MAX);
    base.checked_mul(factor).unwrap_or(max).min(max)
}

/// An error with its sources: reqwest's own message ("error sending request") hides the cause
/// ("Connection refused") in the chain.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
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
    fn backoff_doubles_from_base_and_stops_at_max() {
        let base = Duration::from_millis(100);
        let max = Duration::from_millis(500);
        let delays: Vec<_> = (0..5).map(|n| backoff_delay(base, max, n)).collect();
        assert_eq!(
            delays,
            [100, 200, 400, 500, 500]
                .map(Duration::from_millis)
                .to_vec()
        );
        assert_eq!(backoff_delay(base, max, 200), max);
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

    #[test]
    fn base_url_with_or_without_slash_gives_one_endpoint() {
        let a = chat_completions_url("http://127.0.0.1:1/v1").unwrap();
        let b = chat_completions_url("http://127.0.0.1:1/v1/").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.path(), "/v1/chat/completions");
        assert!(chat_completions_url("ftp://x/v1").is_err());
        assert!(chat_completions_url("not a url").is_err());
    }

    #[test]
    fn a_reply_without_usage_counts_zero_tokens() {
        let body = br#"{"id":"x","object":"chat.completion","created":1,"model":"m",
            "choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;
        let reply = reply_from_body(body).unwrap();
        assert_eq!(reply.text, "hi");
        assert_eq!(reply.usage, TokenUsage::default());
    }
}
