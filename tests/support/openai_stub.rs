//! A local OpenAI-compatible server for tests: serves `POST /v1/chat/completions` on 127.0.0.1
//! from a queue of canned responses (then a fallback), and records every request it received.
//!
//! Self-contained (axum, tokio, serde_json only) so any test binary can include it with
//! `#[path = "support/openai_stub.rs"] mod openai_stub;`.
#![allow(dead_code)] // each test binary uses a different part of it

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
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
}

impl StubResponse {
    /// Any status and body, sent as JSON.
    pub fn raw(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.into(),
            delay: Duration::ZERO,
        }
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

    /// The `content` of the last message: what the provider asked.
    pub fn prompt(&self) -> Option<&str> {
        self.body["messages"].as_array()?.last()?["content"].as_str()
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

    pub fn addr(&self) -> SocketAddr {
        self.addr
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
    shared.log.lock().unwrap().push(request);
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
    (status, headers, canned.body).into_response()
}
