//! Unit tests of the openai provider: settings, backoff, URL joining and failure classification.
use super::*;

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
fn base_url_with_or_without_slash_gives_one_endpoint() {
    let a = chat_completions_url("http://127.0.0.1:1/v1").unwrap();
    let b = chat_completions_url("http://127.0.0.1:1/v1/").unwrap();
    assert_eq!(a, b);
    assert_eq!(a.path(), "/v1/chat/completions");
    assert!(chat_completions_url("ftp://x/v1").is_err());
    assert!(chat_completions_url("not a url").is_err());
}

#[test]
fn the_client_is_configured_from_the_settings_only() {
    let settings = OpenAiSettings {
        base_url: "http://127.0.0.1:1/v1/".into(),
        model: "m".into(),
        api_key: Some("sk-x".into()),
        temperature: None,
        max_tokens: None,
        request_timeout: Duration::from_secs(1),
        max_retries: 0,
        backoff_base: Duration::from_millis(1),
        backoff_max: Duration::from_millis(1),
        structured_output: StructuredOutput::Auto,
        context_window: None,
        native_tools: false,
        multimodal: false,
        stream: None,
        prompt_cache_key: true,
        cache_slots: None,
    };
    let model = OpenAiModel::new(settings.clone()).unwrap();
    assert_eq!(model.prompt_budget(), None, "no context window stated");
    let windowed = OpenAiModel::new(OpenAiSettings {
        context_window: Some(8192),
        max_tokens: Some(1024),
        ..settings.clone()
    })
    .unwrap();
    assert_eq!(windowed.prompt_budget(), Some((8192 - 1024) * 9 / 10));
    let config = model.inner.client.config();
    assert_eq!(
        async_openai::config::Config::url(config, "/chat/completions"),
        "http://127.0.0.1:1/v1/chat/completions"
    );
    let headers = async_openai::config::Config::headers(config);
    assert_eq!(headers.len(), 1, "{headers:?}");
    assert_eq!(headers["authorization"], "Bearer sk-x");

    // async-openai would panic building this header; we refuse it up front.
    let bad_key = OpenAiSettings {
        api_key: Some("sk-\nx".into()),
        ..settings
    };
    assert!(matches!(
        OpenAiModel::new(bad_key),
        Err(LlmError::InvalidSettings(_))
    ));
}

#[test]
fn the_services_status_error_survives_async_openai_and_keeps_retry_after() {
    let error = OpenAIError::Boxed(Box::new(HttpStatus {
        status: 429,
        body: "slow down".into(),
        retry_after: Some(Duration::from_secs(3)),
    }));
    let failure = classify(error).unwrap_err();
    assert!(failure.is_retryable());
    assert_eq!(failure.retry_after(), Some(Duration::from_secs(3)));
    assert!(matches!(
        failure.into_error(4, Duration::from_secs(1)),
        LlmError::RateLimited { attempts: 4, body } if body == "slow down"
    ));

    let not_found = OpenAIError::Boxed(Box::new(HttpStatus {
        status: 404,
        body: "no such model".into(),
        retry_after: None,
    }));
    let failure = classify(not_found).unwrap_err();
    assert!(!failure.is_retryable());
    assert!(matches!(
        failure.into_error(1, Duration::from_secs(1)),
        LlmError::Http { status: 404, .. }
    ));
}

#[test]
fn a_body_async_openai_rejected_is_read_leniently_and_retried_if_unusable() {
    let body = r#"{"choices":[{"message":{"role":"assistant","content":"hi"}}]}"#;
    let strict =
        serde_json::from_str::<async_openai::types::chat::CreateChatCompletionResponse>(body)
            .unwrap_err();
    let reply = classify(OpenAIError::JSONDeserialize(strict, body.into())).unwrap();
    assert_eq!(reply.text, "hi");

    let junk = "<html>oops</html>";
    let strict = serde_json::from_str::<serde_json::Value>(junk).unwrap_err();
    let failure = classify(OpenAIError::JSONDeserialize(strict, junk.into())).unwrap_err();
    // A server's glitch: asked again within the retry budget.
    assert!(failure.is_retryable());
}
