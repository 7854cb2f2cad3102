//! A local OpenAI-compatible server for tests: serves `POST /v1/chat/completions` on 127.0.0.1
//! from a queue of canned responses (then a fallback), and records every request it received.
//! Self-contained: axum, tokio and serde_json only.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One canned answer.
#[derive(Clone, Debug)]
pub struct StubResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Waited before answering (after the request is recorded): simulates a slow or hung server.
    pub delay: Duration,
    /// Sent as server-sent events instead of `body`, one `data:` line each, then `[DONE]`.
    pub events: Option<Vec<String>>,
    /// Waited before each event.
    pub event_delay: Duration,
    /// After this many events the stream sends nothing more and never ends (a hung server).
    pub hang_after: Option<usize>,
}

impl StubResponse {
    /// Any status and body, sent as JSON.
    pub fn raw(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.into(),
            delay: Duration::ZERO,
            events: None,
            event_delay: Duration::ZERO,
            hang_after: None,
        }
    }

    /// A streamed answer (`stream: true`): `pieces` of text as chunks, then `finish_reason`
    /// and, when given, a usage chunk.
    pub fn streamed(pieces: &[&str], usage: Option<(u32, u32)>) -> Self {
        let chunk = |delta: Value, finish: Option<&str>| {
            json!({"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 1_700_000_000u32,
                   "model": "stub-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            .to_string()
        };
        let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        events.extend(pieces.iter().map(|p| chunk(json!({"content": p}), None)));
        events.push(chunk(json!({}), Some("stop")));
        if let Some((prompt, completion)) = usage {
            events.push(
                json!({"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 1_700_000_000u32,
                       "model": "stub-model", "choices": [],
                       "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                 "total_tokens": prompt + completion}})
                .to_string(),
            );
        }
        let mut r = Self::raw(200, "");
        r.headers = vec![("content-type".into(), "text/event-stream".into())];
        r.events = Some(events);
        r
    }

    /// Waits `delay` before each streamed event.
    pub fn with_event_delay(mut self, delay: Duration) -> Self {
        self.event_delay = delay;
        self
    }

    /// Sends `events` streamed events, then nothing, never ending the stream.
    pub fn hanging_after(mut self, events: usize) -> Self {
        self.hang_after = Some(events);
        self
    }

    /// A non-streamed 200 answer as the stream a server would send for it instead, when the
    /// request asked for one (its text in three pieces, and its usage).
    fn as_stream(&self) -> Option<Self> {
        if self.status != 200 || self.events.is_some() {
            return None;
        }
        let body: Value = serde_json::from_str(&self.body).ok()?;
        let text = body.pointer("/choices/0/message/content")?.as_str()?;
        let usage = body.get("usage").map(|u| {
            (
                u["prompt_tokens"].as_u64().unwrap_or(0) as u32,
                u["completion_tokens"].as_u64().unwrap_or(0) as u32,
            )
        });
        let third = text
            .char_indices()
            .nth(text.chars().count() / 3)
            .map_or(0, |(i, _)| i);
        let two = text
            .char_indices()
            .nth(2 * text.chars().count() / 3)
            .map_or(0, |(i, _)| i);
        let mut s = Self::streamed(&[&text[..third], &text[third..two], &text[two..]], usage);
        if body
            .pointer("/choices/0/finish_reason")
            .and_then(Value::as_str)
            == Some("length")
        {
            let events = s.events.as_mut().unwrap();
            let stop = events.len() - 1 - usize::from(usage.is_some());
            events[stop] = events[stop].replace("\"stop\"", "\"length\"");
        }
        s.delay = self.delay;
        Some(s)
    }

    /// A 200 chat completion whose first choice says `text`, without a `usage` object.
    pub fn reply(text: &str) -> Self {
        Self::completion(json!({"role": "assistant", "content": text}), None)
    }

    /// A 200 chat completion with `text` and token usage.
    pub fn reply_with_usage(text: &str, prompt_tokens: u32, completion_tokens: u32) -> Self {
        Self::completion(
            json!({"role": "assistant", "content": text}),
            Some((prompt_tokens, completion_tokens)),
        )
    }

    /// A 200 answer as some local servers (llama.cpp, Ollama, vLLM variants) send it: no `id`,
    /// `object`, `created`, `model`, `index` or `finish_reason`, only the first choice's message.
    pub fn minimal_reply(text: &str) -> Self {
        let body = json!({"choices": [{"message": {"role": "assistant", "content": text}}]});
        Self::raw(200, body.to_string())
    }

    /// A 200 chat completion whose first choice has `content: null`.
    pub fn no_content() -> Self {
        Self::completion(json!({"role": "assistant", "content": null}), None)
    }

    /// An OpenAI-style error: `{"error": {"message", "type", "param", "code"}}`.
    pub fn error(status: u16, message: &str) -> Self {
        let kind = match status {
            429 => "rate_limit_error",
            500..=599 => "server_error",
            _ => "invalid_request_error",
        };
        let body =
            json!({"error": {"message": message, "type": kind, "param": null, "code": null}});
        Self::raw(status, body.to_string())
    }

    /// A 429 with `Retry-After: <seconds>` when given.
    pub fn rate_limited(retry_after_secs: Option<u64>) -> Self {
        let response = Self::error(429, "Rate limit reached, slow down");
        match retry_after_secs {
            Some(secs) => response.with_header("retry-after", &secs.to_string()),
            None => response,
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// A 200 chat completion whose `text` the model's token limit cut off
    /// (`finish_reason: length`).
    pub fn cut_off(text: &str) -> Self {
        let mut r = Self::reply(text);
        r.body = r
            .body
            .replace("\"finish_reason\":\"stop\"", "\"finish_reason\":\"length\"");
        r
    }

    fn completion(message: Value, usage: Option<(u32, u32)>) -> Self {
        let mut body = json!({
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": 1_700_000_000u32,
            "model": "stub-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        });
        if let Some((prompt, completion)) = usage {
            body["usage"] = json!({
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            });
        }
        Self::raw(200, body.to_string())
    }
}

/// One request the stub received.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// Header names are lower-case.
    pub headers: Vec<(String, String)>,
    /// The body as sent.
    pub raw_body: String,
    /// The body parsed as JSON (`Value::Null` if it was not JSON).
    pub body: Value,
    pub received_at: Instant,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn authorization(&self) -> Option<&str> {
        self.header("authorization")
    }

    pub fn model(&self) -> Option<&str> {
        self.body["model"].as_str()
    }

    /// The `content` of the last message: what the provider asked (its text part, when it
    /// came with images).
    pub fn prompt(&self) -> Option<&str> {
        let content = &self.body["messages"].as_array()?.last()?["content"];
        content.as_str().or_else(|| {
            let parts = content.as_array()?;
            parts.iter().find(|p| p["type"] == "text")?["text"].as_str()
        })
    }
}

/// Chooses the answer when the queue is empty; sees the request so a runtime test can answer by
/// prompt (e.g. by which skill asked).
pub type Fallback = Arc<dyn Fn(&RecordedRequest) -> StubResponse + Send + Sync>;

struct Shared {
    queue: Mutex<VecDeque<StubResponse>>,
    fallback: Mutex<Fallback>,
    log: Mutex<Vec<RecordedRequest>>,
}

/// A running stub; the server stops when this is dropped.
pub struct OpenAiStub {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl OpenAiStub {
    /// Binds 127.0.0.1 on a free port and serves until dropped. With an empty queue it answers
    /// `StubResponse::reply("stub reply")`.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            fallback: Mutex::new(constant(StubResponse::reply("stub reply"))),
            log: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the stub's port");
        let addr = listener.local_addr().expect("the stub's address");
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("the stub server");
        });
        Self {
            addr,
            shared,
            server,
        }
    }

    /// What to put in the provider's `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Answers the next request with `response` (after those queued before it).
    pub fn push(&self, response: StubResponse) {
        self.shared.queue.lock().unwrap().push_back(response);
    }

    pub fn push_all(&self, responses: impl IntoIterator<Item = StubResponse>) {
        self.shared.queue.lock().unwrap().extend(responses);
    }

    /// The answer once the queue is empty.
    pub fn set_default(&self, response: StubResponse) {
        *self.shared.fallback.lock().unwrap() = constant(response);
    }

    /// Computes the answer once the queue is empty.
    pub fn set_fallback(
        &self,
        fallback: impl Fn(&RecordedRequest) -> StubResponse + Send + Sync + 'static,
    ) {
        *self.shared.fallback.lock().unwrap() = Arc::new(fallback);
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.log.lock().unwrap().clone()
    }

    /// How many requests arrived (each retry is one).
    pub fn attempts(&self) -> usize {
        self.shared.log.lock().unwrap().len()
    }
}

impl Drop for OpenAiStub {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn constant(response: StubResponse) -> Fallback {
    Arc::new(move |_| response.clone())
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw_body = String::from_utf8_lossy(&body).into_owned();
    let request = RecordedRequest {
        headers: headers
            .iter()
            .map(|(n, v)| {
                let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
                (n.as_str().to_owned(), value)
            })
            .collect(),
        body: serde_json::from_str(&raw_body).unwrap_or(Value::Null),
        raw_body,
        received_at: Instant::now(),
    };
    // Locks are taken and released before any await: the std mutexes never cross one.
    let queued = shared.queue.lock().unwrap().pop_front();
    let canned = match queued {
        Some(response) => response,
        None => {
            let fallback = Arc::clone(&shared.fallback.lock().unwrap());
            fallback(&request)
        }
    };
    let streamed = request.body["stream"] == true;
    shared.log.lock().unwrap().push(request);
    let canned = match streamed.then(|| canned.as_stream()).flatten() {
        Some(stream) => stream,
        None => canned,
    };
    if !canned.delay.is_zero() {
        tokio::time::sleep(canned.delay).await;
    }
    into_response(canned)
}

fn into_response(canned: StubResponse) -> Response {
    let status = StatusCode::from_u16(canned.status).expect("a valid status in a stub response");
    let mut headers = HeaderMap::new();
    for (name, value) in &canned.headers {
        headers.append(
            HeaderName::from_bytes(name.as_bytes()).expect("a valid header name"),
            HeaderValue::from_str(value).expect("a valid header value"),
        );
    }
    let Some(events) = canned.events else {
        return (status, headers, canned.body).into_response();
    };
    let (delay, hang_after) = (canned.event_delay, canned.hang_after);
    let count = events.len();
    let frames = events
        .into_iter()
        .map(|e| format!("data: {e}\n\n"))
        .chain(std::iter::once("data: [DONE]\n\n".to_owned()))
        .enumerate();
    let body = futures::stream::iter(frames).then(move |(i, frame)| async move {
        if hang_after.is_some_and(|n| i >= n.min(count)) {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(delay).await;
        Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(frame))
    });
    (status, headers, axum::body::Body::from_stream(body)).into_response()
}
