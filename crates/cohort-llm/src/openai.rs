//! The `openai` provider: one chat completion per call against any OpenAI-compatible endpoint
//! (OpenAI, Ollama, vLLM, llama.cpp server, DeepSeek, …), with our retry policy as the only one.
//!
//! # How async-openai's `Client` is used
//!
//! Every call goes through async-openai's own [`Client`]: it builds the request (URL, headers,
//! JSON body), hands it to its executor, reads the 2xx body and deserializes it into
//! `CreateChatCompletionResponse`. Two things in async-openai 0.43 do not fit our contract, and
//! both are handled at the one place the crate lets us in, `Client::with_http_service` (the
//! `middleware` feature):
//!
//! * Its default executor (every `Client::new`, `with_config`, `build`, `with_http_client`)
//!   wraps requests in its own `OpenAIRetryLayer` (3 retries, its own backoff), which would
//!   multiply with ours. `with_http_service` replaces that whole executor, so the service
//!   installed here (`OneAttempt`, plain reqwest underneath) is the only thing that sends, and
//!   it sends exactly once per `create`.
//! * A failed call's `OpenAIError` drops what our policy needs: the headers (so `Retry-After`)
//!   are gone, and a non-JSON error body (a proxy's HTML page, a plain-text 4xx from a local
//!   server) becomes `JSONDeserialize` without its status. So `OneAttempt` answers a non-2xx
//!   response itself: it reads status, `Retry-After` and body and returns them as a typed
//!   `HttpStatus` inside `OpenAIError::Boxed` (the middleware error channel), which
//!   `classify` downcasts. 2xx responses pass through to async-openai untouched.
//!
//! Everything about retrying lives in `call_with_retries`; each attempt is one
//! `client.chat().create(..)` bounded by `request_timeout`.
//!
//! Local servers (llama.cpp, Ollama, vLLM variants) sometimes omit `id`, `object`, `created` or
//! `usage.total_tokens`, or send a `finish_reason` async-openai does not know. Its strict types
//! reject such a body (`JSONDeserialize`, which still carries the body), and `reply_leniently`
//! then reads `choices[0].message.content` and `usage` from the JSON itself.

mod cache;
mod context;
mod reply;
mod request;
mod stream;
mod transport;

use super::{ChatModel, ChatReply, ChatRequest, LlmError};
use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::CreateChatCompletionResponse;
use cache::{Body, Slots};
use cohort_core::prompt::tokens::TokenCounter;
use futures::future::BoxFuture;
use reply::{reply_from_response, reply_leniently};
use request::{completion_request, finish_reply};
use reqwest::header::HeaderValue;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;
use transport::{HttpStatus, OneAttempt};

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
    /// Whether answers are constrained by the skill's JSON schema.
    pub structured_output: StructuredOutput,
    /// The model's context window in tokens, when known: prompts are built to fit it.
    pub context_window: Option<u32>,
    /// Tool steps run the native tool loop (`tool_calling: native`) instead of the
    /// instruction_generation → tool → tool_decision chain.
    pub native_tools: bool,
    /// The model takes images (`multimodal: true`): a request's images go with its prompt as
    /// image parts.
    pub multimodal: bool,
    /// `Some(idle timeout)`: answers are streamed (`stream: true`); the growing text goes to the
    /// request's `AnswerProgress`. `request_timeout` then bounds the wait for the answer's
    /// first piece, and the idle timeout each wait after it: a stream that stops is given up on
    /// (and retried) after the idle timeout, one that keeps writing is never cut off.
    pub stream: Option<Duration>,
    /// Send the asking agent's id as `prompt_cache_key` (dropped for good if refused).
    pub prompt_cache_key: bool,
    /// A llama.cpp-style server's slot count: each agent's calls go to a slot of its own
    /// (`id_slot`, `cache_prompt: true`).
    pub cache_slots: Option<u32>,
}

pub use cohort_core::config::StructuredOutput;

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
            .field("structured_output", &self.structured_output)
            .field("context_window", &self.context_window)
            .field("native_tools", &self.native_tools)
            .field("multimodal", &self.multimodal)
            .field("stream", &self.stream)
            .field("prompt_cache_key", &self.prompt_cache_key)
            .field("cache_slots", &self.cache_slots)
            .finish()
    }
}

/// A [`ChatModel`] that talks to one OpenAI-compatible endpoint. Cheap to share: the
/// async-openai client (and its HTTP connection pool) and the settings sit behind an `Arc`, and
/// each call's future owns a clone of it.
#[derive(Clone, Debug)]
pub struct OpenAiModel {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Executes through [`OneAttempt`] only: no retry layer of async-openai's own.
    client: Client<OpenAIConfig>,
    settings: OpenAiSettings,
    /// Set when, under [`StructuredOutput::Auto`], the endpoint refused `response_format`.
    schema_refused: AtomicBool,
    /// The context window the endpoint named when it refused a prompt as too long (0: none
    /// yet); prompts are built under it from then on.
    learned_window: AtomicU32,
    /// The model's tokenizer, when its name says which.
    tokens: TokenCounter,
    /// Each agent's server slot, when the settings name the server's slots.
    slots: Option<Slots>,
    /// Set when the endpoint refused `prompt_cache_key`: it is not sent again.
    key_refused: AtomicBool,
}

impl Inner {
    /// The request body for `request`: its chat completion, with the agent's cache key and
    /// slot where the settings ask for them.
    fn body(&self, request: &ChatRequest, constrained: bool) -> Body {
        let mut chat = completion_request(&self.settings, request, constrained);
        if self.settings.prompt_cache_key && !self.key_refused.load(Ordering::Relaxed) {
            chat.prompt_cache_key = Some(request.agent_id.to_string());
        }
        let slot = self.slots.as_ref().map(|s| s.of(&request.agent_id));
        Body {
            chat,
            id_slot: slot,
            cache_prompt: slot.map(|_| true),
        }
    }

    fn constrains(&self, request: &ChatRequest) -> bool {
        // A tool loop's answer is calls or free text: no schema for it.
        request.answer_format.is_some()
            && request.tools.is_empty()
            && match self.settings.structured_output {
                StructuredOutput::Off => false,
                StructuredOutput::JsonSchema => true,
                StructuredOutput::Auto => !self.schema_refused.load(Ordering::Relaxed),
            }
    }
}

impl OpenAiModel {
    /// Checks the settings and builds the client; sends nothing.
    pub fn new(settings: OpenAiSettings) -> Result<Self, LlmError> {
        if settings.model.trim().is_empty() {
            return Err(LlmError::InvalidSettings("the model name is empty".into()));
        }
        if settings.request_timeout.is_zero() {
            return Err(LlmError::InvalidSettings(
                "request_timeout must be greater than zero".into(),
            ));
        }
        chat_completions_url(&settings.base_url)?;
        let api_key = settings.api_key.as_deref().filter(|k| !k.is_empty());
        // async-openai builds `Authorization: Bearer <key>` with `parse().unwrap()`: a key that
        // cannot be a header value would panic inside it, so it is refused here.
        if let Some(key) = api_key
            && HeaderValue::from_str(&format!("Bearer {key}")).is_err()
        {
            return Err(LlmError::InvalidSettings(
                "the API key contains characters an HTTP header cannot carry".into(),
            ));
        }
        let http = reqwest::Client::builder()
            .user_agent(concat!("cohort/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::InvalidSettings(format!("HTTP client: {}", error_chain(&e))))?;
        // Every field set explicitly: `OpenAIConfig::new()` fills them from `OPENAI_BASE_URL`,
        // `OPENAI_API_KEY`, `OPENAI_ORG_ID` and `OPENAI_PROJECT_ID`, and none of those may reach
        // an endpoint the team config did not name (the org/project headers are only sent when
        // non-empty).
        let config = OpenAIConfig::new()
            .with_api_base(settings.base_url.trim_end_matches('/'))
            .with_api_key(api_key.unwrap_or_default())
            .with_org_id("")
            .with_project_id("");
        // `build` shares our reqwest client for building requests; `with_http_service` then
        // replaces its retrying executor with the single-attempt service.
        let client = Client::build(http.clone(), config).with_http_service(OneAttempt {
            http,
            authorize: api_key.is_some(),
        });
        let slots = settings.cache_slots.map(Slots::new);
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                tokens: TokenCounter::for_model(&settings.model),
                slots,
                settings,
                schema_refused: AtomicBool::new(false),
                learned_window: AtomicU32::new(0),
                key_refused: AtomicBool::new(false),
            }),
        })
    }

    pub fn settings(&self) -> &OpenAiSettings {
        &self.inner.settings
    }
}

/// Room kept for the answer when `max_tokens` is not set.
const DEFAULT_ANSWER_ROOM: u32 = 1024;
/// Tokens a chat template adds around a system and a user message (role markers, separators).
const TEMPLATE_TOKENS: usize = 32;

impl ChatModel for OpenAiModel {
    fn constrains_answers(&self) -> bool {
        match self.inner.settings.structured_output {
            StructuredOutput::Off => false,
            StructuredOutput::JsonSchema => true,
            StructuredOutput::Auto => !self.inner.schema_refused.load(Ordering::Relaxed),
        }
    }

    fn native_tools(&self) -> bool {
        self.inner.settings.native_tools
    }

    fn takes_images(&self) -> bool {
        self.inner.settings.multimodal
    }

    fn token_counter(&self) -> TokenCounter {
        self.inner.tokens
    }

    fn prompt_budget(&self) -> Option<usize> {
        let s = &self.inner.settings;
        let learned = self.inner.learned_window.load(Ordering::Relaxed);
        let window = match (s.context_window, learned) {
            (Some(w), 0) => w,
            (Some(w), l) => w.min(l),
            (None, 0) => return None,
            (None, l) => l,
        };
        let room = window.saturating_sub(s.max_tokens.unwrap_or(DEFAULT_ANSWER_ROOM)) as usize;
        Some(if self.inner.tokens.is_exact() {
            // The chat template's role markers and separators, which the count leaves out.
            room.saturating_sub(TEMPLATE_TOKENS)
        } else {
            // A tenth kept spare: an estimate of a prompt's tokens is not exact.
            room * 9 / 10
        })
    }

    fn chat(&self, request: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move { call_with_retries(&inner, &request).await })
    }
}

/// `base_url` + `/chat/completions`, accepting a base with or without a trailing slash. The
/// same join async-openai makes (`api_base` + `/chat/completions`), checked up front.
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

/// Runs attempts until one succeeds, one fails in a way retrying cannot fix, or retries run out.
async fn call_with_retries(inner: &Inner, request: &ChatRequest) -> Result<ChatReply, LlmError> {
    let settings = &inner.settings;
    let mut constrained = inner.constrains(request);
    let mut body = inner.body(request, constrained);
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut failure = match attempt(inner, body.clone(), request).await {
            Ok(reply) => return Ok(finish_reply(reply, request, constrained, inner.tokens)),
            Err(failure) => failure,
        };
        if let Some(too_long) = window_refusal(inner, &failure) {
            return Err(too_long);
        }
        if refused_cache_key(inner, &failure, &body) {
            body.chat.prompt_cache_key = None;
            continue;
        }
        if constrained
            && settings.structured_output == StructuredOutput::Auto
            && failure.may_be_schema_refusal()
        {
            // Asked once more without the schema: if that is answered, the schema was what
            // the endpoint refused, and it is not sent again.
            let plain = inner.body(request, false);
            match attempt(inner, plain.clone(), request).await {
                Ok(reply) => {
                    if !inner.schema_refused.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            model = %settings.model,
                            reason = %failure,
                            "the LLM endpoint refuses response_format json_schema; \
                             asking for the tag format from now on",
                        );
                    }
                    return Ok(finish_reply(reply, request, false, inner.tokens));
                }
                // Not answered either: this call goes on without the schema, and its own
                // failure decides what happens next (a 5xx or a timeout is retried).
                Err(plain_failure) => {
                    attempts += 1;
                    failure = plain_failure;
                    constrained = false;
                    body = plain;
                }
            }
        }
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

/// A refusal of a prompt too long for the window: no retry of the same prompt helps; the
/// caller builds a shorter one under the window the refusal named (learned for later calls).
fn window_refusal(inner: &Inner, failure: &AttemptFailure) -> Option<LlmError> {
    let AttemptFailure::Status(HttpStatus {
        status: 400 | 413 | 422,
        body,
        ..
    }) = failure
    else {
        return None;
    };
    let window = context::window_from_refusal(body)?;
    let before = inner.learned_window.load(Ordering::Relaxed);
    if before == 0 || window < before {
        inner.learned_window.store(window, Ordering::Relaxed);
        tracing::warn!(model = %inner.settings.model, window, "the LLM endpoint's context window is {window} tokens; prompts are built under it from now on");
    }
    Some(LlmError::ContextExceeded {
        window,
        body: body.clone(),
    })
}

/// Whether `failure` is an endpoint that does not know `prompt_cache_key` rejecting the one
/// `body` sent: then it is asked again without it, and the key is not sent again.
fn refused_cache_key(inner: &Inner, failure: &AttemptFailure, body: &Body) -> bool {
    let refused = matches!(failure, AttemptFailure::Status(HttpStatus {
        status: 400 | 422,
        body: refusal,
        ..
    }) if body.chat.prompt_cache_key.is_some() && cache::refuses_key(refusal));
    if refused && !inner.key_refused.swap(true, Ordering::Relaxed) {
        tracing::warn!(model = %inner.settings.model, "the LLM endpoint refuses prompt_cache_key; it is not sent from now on");
    }
    refused
}

/// One `client.chat().create(..)`, bounded as a whole (connect, send, wait, read and parse the
/// body) by `request_timeout`, so a server that stalls mid-body cannot hold the step forever.
async fn attempt(
    inner: &Inner,
    body: Body,
    request: &ChatRequest,
) -> Result<ChatReply, AttemptFailure> {
    if let Some(idle) = inner.settings.stream {
        return stream::attempt(inner, body, request, idle).await;
    }
    let chat = inner.client.chat();
    let sent = chat.create_byot::<_, CreateChatCompletionResponse>(body);
    let reply = match tokio::time::timeout(inner.settings.request_timeout, sent).await {
        Err(_elapsed) => Err(AttemptFailure::Timeout),
        Ok(Ok(response)) => reply_from_response(response).map_err(AttemptFailure::BadAnswer),
        Ok(Err(error)) => classify(error),
    };
    // A whole answer that ended in a loop (it ran to max_tokens, most likely) says so.
    reply.map(|r| r.without_loop(request.mending.loop_cut))
}

/// Why one attempt did not produce a reply.
#[derive(Debug)]
enum AttemptFailure {
    /// A non-2xx answer.
    Status(HttpStatus),
    /// No whole answer within `request_timeout` (streamed: no first piece of one).
    Timeout,
    /// A streamed answer that sent nothing for this long.
    Stalled(Duration),
    /// The request never got an HTTP answer: refused, reset, DNS, TLS, a broken body…
    Connection(String),
    /// A 2xx without text or that is no chat completion: a server's glitch, worth another try.
    BadAnswer(LlmError),
    /// A request that cannot be built: no retry can improve it.
    Final(LlmError),
}

impl AttemptFailure {
    /// The contract: 429, 5xx, transport failures and timeouts may pass; other statuses
    /// (400, 401, 403, 404, 422, …) will fail the same way again.
    fn is_retryable(&self) -> bool {
        match self {
            AttemptFailure::Status(HttpStatus { status, .. }) => {
                *status == 429 || (500..600).contains(status)
            }
            AttemptFailure::Timeout
            | AttemptFailure::Stalled(_)
            | AttemptFailure::Connection(_)
            | AttemptFailure::BadAnswer(_) => true,
            AttemptFailure::Final(_) => false,
        }
    }

    /// A 400 or 422: what an endpoint without `response_format` support answers to one.
    fn may_be_schema_refusal(&self) -> bool {
        matches!(
            self,
            AttemptFailure::Status(HttpStatus {
                status: 400 | 422,
                ..
            })
        )
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            AttemptFailure::Status(status) => status.retry_after,
            _ => None,
        }
    }

    fn into_error(self, attempts: u32, timeout: Duration) -> LlmError {
        match self {
            AttemptFailure::Status(HttpStatus {
                status: 429, body, ..
            }) => LlmError::RateLimited { attempts, body },
            AttemptFailure::Status(HttpStatus { status, body, .. }) => {
                LlmError::Http { status, body }
            }
            AttemptFailure::Timeout => LlmError::Timeout(timeout),
            AttemptFailure::Stalled(idle) => LlmError::Stalled(idle),
            AttemptFailure::Connection(reason) => LlmError::Connection(reason),
            AttemptFailure::BadAnswer(error) | AttemptFailure::Final(error) => error,
        }
    }
}

impl fmt::Display for AttemptFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttemptFailure::Status(status) => status.fmt(f),
            AttemptFailure::Timeout => f.write_str("timed out"),
            AttemptFailure::Stalled(idle) => write!(f, "the stream sent nothing for {idle:?}"),
            AttemptFailure::Connection(reason) => write!(f, "connection failed: {reason}"),
            AttemptFailure::BadAnswer(error) | AttemptFailure::Final(error) => error.fmt(f),
        }
    }
}

/// What async-openai's client returned on failure → our view of the attempt. A body its strict
/// types rejected may still be a usable reply from a less strict server.
fn classify(error: OpenAIError) -> Result<ChatReply, AttemptFailure> {
    Err(match error {
        OpenAIError::Boxed(boxed) => match boxed.downcast::<HttpStatus>() {
            Ok(status) => AttemptFailure::Status(*status),
            Err(other) => AttemptFailure::Connection(error_chain(other.as_ref())),
        },
        OpenAIError::Reqwest(error) if error.is_timeout() => AttemptFailure::Timeout,
        OpenAIError::Reqwest(error) if error.is_builder() => {
            AttemptFailure::Final(LlmError::InvalidSettings(error_chain(&error)))
        }
        OpenAIError::Reqwest(error) => AttemptFailure::Connection(error_chain(&error)),
        // Non-2xx answers are [`HttpStatus`]; this is for completeness.
        OpenAIError::ApiError(api) => AttemptFailure::Status(HttpStatus {
            status: api.status_code.as_u16(),
            body: api.api_error.to_string(),
            retry_after: None,
        }),
        // Only a 2xx body reaches async-openai's deserialization (see [`OneAttempt`]).
        OpenAIError::JSONDeserialize(strict, body) => {
            return reply_leniently(&body, &strict).map_err(AttemptFailure::BadAnswer);
        }
        OpenAIError::InvalidArgument(why) => AttemptFailure::Final(LlmError::InvalidSettings(why)),
        other => AttemptFailure::BadAnswer(LlmError::InvalidResponse(other.to_string())),
    })
}

fn snippet(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(BODY_SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
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
mod tests;
