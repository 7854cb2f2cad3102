//! The `openai` provider over real HTTP against a local OpenAI-compatible stub: what it sends,
//! what it returns, and the retry contract (which failures retry, which fail at once, how long
//! it waits, and which error each exhausted failure becomes).

use crate::support::openai_stub;

use cohort::ids::{AgentId, StageRef, StepId, TaskId};
use cohort::llm::openai::{OpenAiModel, OpenAiSettings, StructuredOutput};
use cohort::llm::{AnswerFormat, ChatModel, ChatRequest, LlmError};
use cohort::state::TokenUsage;
use openai_stub::{OpenAiStub, StubResponse};
use serde_json::json;
use std::time::{Duration, Instant};

/// Tiny backoffs so retries cost milliseconds; a generous timeout unless a test is about it.
fn settings(base_url: String) -> OpenAiSettings {
    OpenAiSettings {
        base_url,
        model: "test-model".into(),
        api_key: Some("sk-test".into()),
        temperature: Some(0.25),
        max_tokens: Some(321),
        request_timeout: Duration::from_secs(10),
        max_retries: 3,
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_millis(40),
        structured_output: StructuredOutput::Auto,
        context_window: None,
        native_tools: false,
        multimodal: false,
        stream: None,
        prompt_cache_key: true,
        cache_slots: None,
    }
}

fn model(settings: OpenAiSettings) -> OpenAiModel {
    OpenAiModel::new(settings).expect("valid settings")
}

fn request(prompt: &str) -> ChatRequest {
    ChatRequest {
        system: String::new(),
        prompt: prompt.into(),
        answer_format: None,
        tools: Vec::new(),
        rounds: Vec::new(),
        images: Vec::new(),
        agent_id: AgentId::from("writer"),
        skill: "think".into(),
        task_id: TaskId::from("task-1"),
        stage_id: StageRef::NoRelative,
        step_id: StepId::from("step-1"),
        template: None,
        step_text: String::new(),
        progress: None,
        model_wait: None,
        retry: 0,
        mending: Default::default(),
        intake: None,
    }
}

#[tokio::test]
async fn a_normal_reply_returns_text_and_usage_and_sends_the_settings() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::reply_with_usage(
        "Hello from the model",
        42,
        7,
    ));

    let reply = model(settings(stub.base_url()))
        .chat(request("SYSTEM: be brief\nUSER: say hello"))
        .await
        .expect("a reply");

    assert_eq!(reply.text, "Hello from the model");
    assert_eq!(reply.usage, TokenUsage::new(42, 7));
    let requests = stub.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.model(), Some("test-model"));
    assert_eq!(sent.body["temperature"].as_f64(), Some(0.25));
    assert_eq!(sent.body["max_tokens"].as_u64(), Some(321));
    assert_eq!(sent.authorization(), Some("Bearer sk-test"));
    // Without a fixed part, the prompt is the only message, from the user.
    let messages = sent.body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(sent.prompt(), Some("SYSTEM: be brief\nUSER: say hello"));
    assert_eq!(sent.body.get("stream").and_then(|s| s.as_bool()), None);
}

#[tokio::test]
async fn without_a_key_no_authorization_header_is_sent_and_missing_usage_is_estimated() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::reply("local answer"));
    let mut settings = settings(stub.base_url());
    settings.api_key = None;
    settings.temperature = None;
    settings.max_tokens = None;

    let reply = model(settings).chat(request("hi")).await.expect("a reply");

    assert_eq!(reply.text, "local answer");
    // About four characters a token: "hi" and "local answer".
    assert_eq!(reply.usage, TokenUsage::new(1, 3));
    let sent = &stub.requests()[0];
    assert_eq!(sent.authorization(), None);
    assert!(sent.body.get("temperature").is_none());
    assert!(sent.body.get("max_tokens").is_none());
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_after_the_asked_delay() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::rate_limited(Some(1)));
    stub.push(StubResponse::reply("after the wait"));

    let started = Instant::now();
    let reply = model(settings(stub.base_url()))
        .chat(request("hi"))
        .await
        .expect("a reply after one retry");

    assert_eq!(reply.text, "after the wait");
    let requests = stub.requests();
    assert_eq!(requests.len(), 2);
    // Retry-After: 1 wins over the 10 ms backoff.
    let gap = requests[1].received_at - requests[0].received_at;
    assert!(
        gap >= Duration::from_millis(900),
        "second attempt came {gap:?} after the first"
    );
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn a_500_is_retried() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::error(500, "The server had an error"));
    stub.push(StubResponse::reply("second time lucky"));

    let reply = model(settings(stub.base_url()))
        .chat(request("hi"))
        .await
        .expect("a reply after one retry");

    assert_eq!(reply.text, "second time lucky");
    assert_eq!(stub.attempts(), 2);
}

#[tokio::test]
async fn a_400_fails_at_once_with_the_servers_message() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::error(
        400,
        "Invalid value for 'temperature': must be <= 2",
    ));
    stub.set_default(StubResponse::reply("must not be reached"));

    let error = model(settings(stub.base_url()))
        .chat(request("hi"))
        .await
        .expect_err("a 400 is final");

    match error {
        LlmError::Http { status, body } => {
            assert_eq!(status, 400);
            assert!(
                body.contains("Invalid value for 'temperature'"),
                "body: {body}"
            );
        }
        other => panic!("expected Http 400, got {other:?}"),
    }
    assert_eq!(stub.attempts(), 1);
}

#[tokio::test]
async fn a_401_with_a_plain_text_body_fails_at_once_carrying_that_text() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::raw(401, "no such key"));

    let error = model(settings(stub.base_url()))
        .chat(request("hi"))
        .await
        .expect_err("a 401 is final");

    assert!(
        matches!(&error, LlmError::Http { status: 401, body } if body == "no such key"),
        "{error:?}"
    );
    assert_eq!(stub.attempts(), 1);
}

#[tokio::test]
async fn endless_429s_end_as_rate_limited_after_all_retries() {
    let stub = OpenAiStub::start().await;
    stub.set_default(StubResponse::rate_limited(None));
    let mut settings = settings(stub.base_url());
    settings.max_retries = 2;

    let error = model(settings)
        .chat(request("hi"))
        .await
        .expect_err("never succeeds");

    match error {
        LlmError::RateLimited { attempts, body } => {
            assert_eq!(attempts, 3);
            assert!(body.contains("Rate limit reached"), "body: {body}");
        }
        other => panic!("expected RateLimited, got {other:?}"),
    }
    assert_eq!(stub.attempts(), 3);
}

#[tokio::test]
async fn endless_503s_end_as_http_with_the_last_status() {
    let stub = OpenAiStub::start().await;
    stub.set_default(StubResponse::error(503, "overloaded"));
    let mut settings = settings(stub.base_url());
    settings.max_retries = 1;

    let error = model(settings)
        .chat(request("hi"))
        .await
        .expect_err("never succeeds");

    assert!(
        matches!(&error, LlmError::Http { status: 503, body } if body.contains("overloaded")),
        "{error:?}"
    );
    assert_eq!(stub.attempts(), 2);
}

#[tokio::test]
async fn a_refused_connection_ends_as_connection_after_retries() {
    // Bind then drop a listener: the port was free a moment ago and nothing listens on it now.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut settings = settings(format!("http://127.0.0.1:{port}/v1"));
    settings.max_retries = 2;

    let started = Instant::now();
    let error = model(settings)
        .chat(request("hi"))
        .await
        .expect_err("nothing listens");

    assert!(matches!(error, LlmError::Connection(_)), "{error:?}");
    // Two backoffs (10 ms, 20 ms) prove the retries happened.
    assert!(started.elapsed() >= Duration::from_millis(30));
}

#[tokio::test]
async fn a_server_slower_than_the_timeout_ends_as_timeout() {
    let stub = OpenAiStub::start().await;
    stub.set_default(StubResponse::reply("too late").with_delay(Duration::from_secs(30)));
    let mut settings = settings(stub.base_url());
    settings.request_timeout = Duration::from_millis(200);
    settings.max_retries = 1;

    let error = model(settings)
        .chat(request("hi"))
        .await
        .expect_err("the server hangs");

    assert!(
        matches!(error, LlmError::Timeout(t) if t == Duration::from_millis(200)),
        "{error:?}"
    );
    // Timeouts are retried too.
    assert_eq!(stub.attempts(), 2);
}

#[tokio::test]
async fn a_200_without_content_is_retried_then_an_empty_answer() {
    let stub = OpenAiStub::start().await;
    stub.set_default(StubResponse::no_content());

    let error = model(settings(stub.base_url()))
        .chat(request("hi"))
        .await
        .expect_err("no text");

    assert!(matches!(error, LlmError::EmptyAnswer(_)), "{error:?}");
    assert_eq!(stub.attempts(), 4);
}

#[tokio::test]
async fn a_200_that_is_not_a_chat_completion_is_retried_then_an_invalid_response() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::raw(200, "<html>captive portal</html>"));
    stub.push(StubResponse::reply("after the glitch"));
    let reply = model(settings(stub.base_url()))
        .chat(request("hi"))
        .await
        .expect("the second try answers");
    assert_eq!(reply.text, "after the glitch");

    let stub = OpenAiStub::start().await;
    stub.set_default(StubResponse::raw(200, "<html>captive portal</html>"));

    let error = model(settings(stub.base_url()))
        .chat(request("hi"))
        .await
        .expect_err("not JSON");

    assert!(
        matches!(&error, LlmError::InvalidResponse(why) if why.contains("captive portal")),
        "{error:?}"
    );
    assert_eq!(stub.attempts(), 4);
}

#[tokio::test]
async fn a_minimal_body_from_a_local_server_is_still_a_reply() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::raw(
        200,
        r#"{"choices":[{"message":{"role":"assistant","content":"hi"}}]}"#,
    ));
    stub.push(StubResponse::minimal_reply("again"));
    let model = model(settings(stub.base_url()));

    let reply = model.chat(request("hi")).await.expect("a lenient reply");
    assert_eq!(reply.text, "hi");
    // No usage sent: estimated.
    assert_eq!(reply.usage.completion_tokens, 1);
    let reply = model.chat(request("hi")).await.expect("a lenient reply");
    assert_eq!(reply.text, "again");
    assert_eq!(stub.attempts(), 2);
}

#[tokio::test]
async fn an_unknown_finish_reason_and_partial_usage_still_give_text_and_tokens() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::raw(
        200,
        r#"{"model":"llama","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"eos"}],"usage":{"prompt_tokens":9,"completion_tokens":4}}"#,
    ));

    let reply = model(settings(stub.base_url()))
        .chat(request("hi"))
        .await
        .expect("a lenient reply");

    assert_eq!(reply.text, "ok");
    assert_eq!(reply.usage, TokenUsage::new(9, 4));
}

#[tokio::test]
async fn no_retry_happens_beyond_ours() {
    // async-openai's default client would retry a 429 or a 500 up to 3 times on its own; with
    // `max_retries: 0` exactly one request may go out.
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::rate_limited(Some(0)));
    stub.push(StubResponse::error(500, "boom"));
    stub.set_default(StubResponse::reply("must not be reached"));
    let mut settings = settings(stub.base_url());
    settings.max_retries = 0;
    let model = model(settings);

    let error = model.chat(request("hi")).await.expect_err("one 429");
    assert!(
        matches!(&error, LlmError::RateLimited { attempts: 1, .. }),
        "{error:?}"
    );
    assert_eq!(stub.attempts(), 1);

    let error = model.chat(request("hi")).await.expect_err("one 500");
    assert!(
        matches!(&error, LlmError::Http { status: 500, body } if body.contains("boom")),
        "{error:?}"
    );
    assert_eq!(stub.attempts(), 2);
}

#[tokio::test]
async fn an_ollama_style_404_fails_at_once_with_its_message() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::raw(404, r#"{"error":"model 'x' not found"}"#));
    stub.set_default(StubResponse::reply("must not be reached"));

    let error = model(settings(stub.base_url()))
        .chat(request("hi"))
        .await
        .expect_err("a 404 is final");

    assert!(
        matches!(&error, LlmError::Http { status: 404, body } if body == "model 'x' not found"),
        "{error:?}"
    );
    assert_eq!(stub.attempts(), 1);
}

#[test]
fn settings_without_a_model_or_with_a_bad_url_are_rejected() {
    let mut no_model = settings("http://127.0.0.1:1/v1".into());
    no_model.model = " ".into();
    assert!(matches!(
        OpenAiModel::new(no_model),
        Err(LlmError::InvalidSettings(_))
    ));
    assert!(matches!(
        OpenAiModel::new(settings("localhost:11434/v1".into())),
        Err(LlmError::InvalidSettings(_))
    ));
}

#[test]
fn debug_output_never_shows_the_key() {
    let shown = format!("{:?}", settings("http://127.0.0.1:1/v1".into()));
    assert!(!shown.contains("sk-test"), "{shown}");
    assert!(shown.contains("<redacted>"));
}

fn constrained(prompt: &str) -> ChatRequest {
    ChatRequest {
        system: "SYSTEM PART".into(),
        answer_format: Some(AnswerFormat {
            name: "think".into(),
            schema: json!({"type": "object", "properties": {"think": {"type": "string"}},
                           "required": ["think"]}),
        }),
        ..request(prompt)
    }
}

#[tokio::test]
async fn the_fixed_part_goes_as_system_and_the_answer_is_constrained_by_its_schema() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::reply(r#"{"think": "rain on roofs"}"#));

    let reply = model(settings(stub.base_url()))
        .chat(constrained("STEP PART"))
        .await
        .expect("a reply");

    // The JSON answer comes back in the tag format the skills read.
    assert_eq!(reply.text, "<think>rain on roofs</think>");
    let sent = &stub.requests()[0];
    let messages = sent.body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["role"], "system");
    // How tags become keys is the prompt's (its system part), not added by the provider.
    assert_eq!(messages[0]["content"], "SYSTEM PART");
    assert_eq!(messages[1]["role"], "user");
    assert_eq!(messages[1]["content"], "STEP PART");
    let format = &sent.body["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["name"], "think");
    assert_eq!(
        format["json_schema"]["schema"]["required"],
        json!(["think"])
    );
}

#[tokio::test]
async fn an_endpoint_that_refuses_the_schema_is_asked_for_tags_from_then_on() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::error(
        400,
        "response_format json_schema is not supported",
    ));
    stub.push(StubResponse::reply("<think>first</think>"));
    stub.push(StubResponse::reply("<think>second</think>"));
    let model = model(settings(stub.base_url()));

    let first = model.chat(constrained("one")).await.expect("a reply");
    let second = model.chat(constrained("two")).await.expect("a reply");

    assert_eq!(first.text, "<think>first</think>");
    assert_eq!(second.text, "<think>second</think>");
    let sent = stub.requests();
    assert_eq!(sent.len(), 3);
    assert!(sent[0].body.get("response_format").is_some());
    for later in &sent[1..] {
        assert!(later.body.get("response_format").is_none());
        assert_eq!(later.body["messages"][0]["content"], "SYSTEM PART");
    }
}

#[tokio::test]
async fn a_400_the_plain_request_gets_too_keeps_the_schema_for_later_calls() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::error(400, "context length exceeded"));
    stub.push(StubResponse::error(400, "context length exceeded"));
    stub.push(StubResponse::reply(r#"{"think": "fits"}"#));
    let model = model(settings(stub.base_url()));

    let error = model.chat(constrained("long")).await.expect_err("a 400");
    assert!(
        matches!(error, LlmError::Http { status: 400, .. }),
        "{error:?}"
    );
    let reply = model.chat(constrained("short")).await.expect("a reply");

    assert_eq!(reply.text, "<think>fits</think>");
    assert!(stub.requests()[2].body.get("response_format").is_some());
}

#[tokio::test]
async fn with_structured_output_off_only_tags_are_asked_for() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::reply(r#"{"think": "left as it is"}"#));
    let mut settings = settings(stub.base_url());
    settings.structured_output = StructuredOutput::Off;

    let reply = model(settings)
        .chat(constrained("x"))
        .await
        .expect("a reply");

    assert_eq!(reply.text, r#"{"think": "left as it is"}"#);
    let sent = &stub.requests()[0];
    assert!(sent.body.get("response_format").is_none());
    assert_eq!(sent.body["messages"][0]["content"], "SYSTEM PART");
}

#[tokio::test]
async fn a_plain_retry_that_fails_too_goes_on_retrying_without_the_schema() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::error(400, "bad request"));
    stub.push(StubResponse::error(503, "busy"));
    stub.push(StubResponse::reply("<think>after all</think>"));
    stub.push(StubResponse::reply(r#"{"think": "next"}"#));
    let model = model(settings(stub.base_url()));

    let first = model.chat(constrained("one")).await.expect("a reply");
    let second = model.chat(constrained("two")).await.expect("a reply");

    assert_eq!(first.text, "<think>after all</think>");
    assert_eq!(second.text, "<think>next</think>");
    let sent = stub.requests();
    let schema: Vec<bool> = sent
        .iter()
        .map(|r| r.body.get("response_format").is_some())
        .collect();
    // The plain retry was not answered at once, so the schema was not blamed.
    assert_eq!(schema, [true, false, false, true]);
}

/// `request(prompt)` from `agent`.
fn from(agent: &str, prompt: &str) -> ChatRequest {
    ChatRequest {
        agent_id: AgentId::from(agent),
        ..request(prompt)
    }
}

#[tokio::test]
async fn each_agent_keeps_its_cache_key_and_slot_and_cached_tokens_are_read() {
    let stub = OpenAiStub::start().await;
    let cached = r#"{"id":"x","object":"chat.completion","created":1,"model":"m",
        "choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":2000,"completion_tokens":5,"total_tokens":2005,
                 "prompt_tokens_details":{"cached_tokens":1800}}}"#;
    stub.set_default(StubResponse::raw(200, cached));
    let m = model(OpenAiSettings {
        cache_slots: Some(2),
        ..settings(stub.base_url())
    });
    for agent in ["manager", "writer", "reviewer", "writer"] {
        let reply = m.chat(from(agent, "STEP")).await.unwrap();
        assert_eq!(reply.usage.cached_prompt_tokens, 1800);
        assert_eq!(reply.usage.uncached_prompt_tokens(), 200);
    }
    let sent: Vec<_> = stub
        .requests()
        .iter()
        .map(|r| {
            (
                r.body["prompt_cache_key"].as_str().unwrap_or("").to_owned(),
                r.body["id_slot"].as_u64(),
                r.body["cache_prompt"].as_bool(),
            )
        })
        .collect();
    // Slots in turn as agents first call (two slots: the third agent shares the first's),
    // and the same slot again for an agent's next call.
    assert_eq!(
        sent,
        [
            ("manager".into(), Some(0), Some(true)),
            ("writer".into(), Some(1), Some(true)),
            ("reviewer".into(), Some(0), Some(true)),
            ("writer".into(), Some(1), Some(true)),
        ]
    );
    // Without slots named, neither llama.cpp field is sent.
    let plain = OpenAiStub::start().await;
    plain.push(StubResponse::reply("ok"));
    model(settings(plain.base_url()))
        .chat(from("writer", "STEP"))
        .await
        .unwrap();
    let body = &plain.requests()[0].body;
    assert!(
        body.get("id_slot").is_none() && body.get("cache_prompt").is_none(),
        "{body}"
    );
    assert_eq!(body["prompt_cache_key"], "writer");
}

#[tokio::test]
async fn an_endpoint_that_refuses_the_cache_key_is_asked_again_without_it_for_good() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::error(
        400,
        "Unrecognized request argument supplied: prompt_cache_key",
    ));
    stub.set_default(StubResponse::reply("ok"));
    let m = model(settings(stub.base_url()));
    assert_eq!(m.chat(from("writer", "ONE")).await.unwrap().text, "ok");
    assert_eq!(m.chat(from("writer", "TWO")).await.unwrap().text, "ok");
    let keys: Vec<bool> = stub
        .requests()
        .iter()
        .map(|r| r.body.get("prompt_cache_key").is_some())
        .collect();
    assert_eq!(keys, [true, false, false]);
    // Turned off in the settings, it is never sent.
    let off = OpenAiStub::start().await;
    off.push(StubResponse::reply("ok"));
    model(OpenAiSettings {
        prompt_cache_key: false,
        ..settings(off.base_url())
    })
    .chat(from("writer", "STEP"))
    .await
    .unwrap();
    assert!(off.requests()[0].body.get("prompt_cache_key").is_none());
}
