//! A 2xx body → text and usage: async-openai's parsed `CreateChatCompletionResponse`, or, when
//! its strict types reject what a local server sent, the few fields we need read from the JSON.

use super::snippet;
use crate::{ChatReply, Cut, LlmError, ToolCall};
use async_openai::types::chat::{ChatCompletionMessageToolCalls, CreateChatCompletionResponse};
use cohort_core::state::TokenUsage;
use serde_json::Value;

/// A parsed chat completion → text and usage. A missing first choice or empty content is
/// `EmptyAnswer`: the step failed, and retrying the same prompt is the caller's decision, not
/// this provider's.
pub(super) fn reply_from_response(
    response: CreateChatCompletionResponse,
) -> Result<ChatReply, LlmError> {
    let usage = response
        .usage
        .map(|u| {
            let cached = u.prompt_tokens_details.and_then(|d| d.cached_tokens);
            TokenUsage::new(u64::from(u.prompt_tokens), u64::from(u.completion_tokens))
                .with_cached(cached.map_or(0, u64::from))
        })
        .unwrap_or_default();
    let Some(choice) = response.choices.into_iter().next() else {
        return Err(LlmError::EmptyAnswer("the response has no choices".into()));
    };
    let cut = matches!(
        choice.finish_reason,
        Some(async_openai::types::chat::FinishReason::Length)
    )
    .then_some(Cut::TokenLimit);
    let tool_calls: Vec<ToolCall> = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| match c {
            ChatCompletionMessageToolCalls::Function(f) => Some(ToolCall {
                id: f.id,
                name: f.function.name,
                arguments: f.function.arguments,
            }),
            ChatCompletionMessageToolCalls::Custom(_) => None,
        })
        .collect();
    match choice.message.content {
        Some(text) if !text.trim().is_empty() || !tool_calls.is_empty() => Ok(ChatReply {
            text,
            usage,
            cut,
            tool_calls,
        }),
        None if !tool_calls.is_empty() => Ok(ChatReply {
            text: String::new(),
            usage,
            cut,
            tool_calls,
        }),
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

/// A `usage` object as OpenAI, vLLM and llama.cpp send it: prompt and completion tokens, and
/// the prompt tokens served from the endpoint's prompt cache
/// (`prompt_tokens_details.cached_tokens`). A missing count is 0.
pub(super) fn usage_of(usage: &Value) -> TokenUsage {
    let tokens = |path: &str| usage.pointer(path).and_then(Value::as_u64).unwrap_or(0);
    TokenUsage::new(tokens("/prompt_tokens"), tokens("/completion_tokens"))
        .with_cached(tokens("/prompt_tokens_details/cached_tokens"))
}

/// A 2xx body async-openai's strict types rejected (`strict` says why), read the way local
/// servers need: only `choices[0].message.content` and `usage.{prompt,completion}_tokens`
/// matter. A body that is not JSON or has no `choices` array is no chat completion at all.
pub(super) fn reply_leniently(
    body: &str,
    strict: &serde_json::Error,
) -> Result<ChatReply, LlmError> {
    let invalid = || LlmError::InvalidResponse(format!("{strict}; body: {}", snippet(body)));
    let value: Value = serde_json::from_str(body).map_err(|_| invalid())?;
    let choices = value
        .get("choices")
        .and_then(Value::as_array)
        .ok_or_else(invalid)?;
    tracing::debug!(error = %strict, "not a strict chat completion; reading it leniently");
    let usage = value.get("usage").map(usage_of).unwrap_or_default();
    let Some(choice) = choices.first() else {
        return Err(LlmError::EmptyAnswer("the response has no choices".into()));
    };
    let cut = (choice.get("finish_reason").and_then(Value::as_str) == Some("length"))
        .then_some(Cut::TokenLimit);
    let tool_calls = lenient_tool_calls(choice);
    match choice.pointer("/message/content") {
        Some(Value::String(text)) if !text.trim().is_empty() || !tool_calls.is_empty() => {
            Ok(ChatReply {
                text: text.clone(),
                usage,
                cut,
                tool_calls,
            })
        }
        None | Some(Value::Null) if !tool_calls.is_empty() => Ok(ChatReply {
            text: String::new(),
            usage,
            cut,
            tool_calls,
        }),
        None | Some(Value::Null | Value::String(_)) => {
            let mut why = String::from("the first choice has no content");
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                why.push_str(&format!(" (finish_reason: {reason})"));
            }
            Err(LlmError::EmptyAnswer(why))
        }
        Some(_) => Err(invalid()),
    }
}

/// `message.tool_calls[].{id, function.{name, arguments}}`; arguments some servers send as an
/// object rather than a JSON string are taken as that object's text.
fn lenient_tool_calls(choice: &Value) -> Vec<ToolCall> {
    let Some(calls) = choice
        .pointer("/message/tool_calls")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    calls
        .iter()
        .filter_map(|c| {
            let name = c.pointer("/function/name")?.as_str()?.to_owned();
            let arguments = match c.pointer("/function/arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => "{}".to_owned(),
                Some(other) => other.to_string(),
            };
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or(&name)
                .to_owned();
            Some(ToolCall {
                id,
                name,
                arguments,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the provider does with a 2xx body: async-openai's strict parse, then the fallback.
    fn parse(body: &str) -> Result<ChatReply, LlmError> {
        match serde_json::from_str::<CreateChatCompletionResponse>(body) {
            Ok(response) => reply_from_response(response),
            Err(strict) => reply_leniently(body, &strict),
        }
    }

    fn strict_rejects(body: &str) -> bool {
        serde_json::from_str::<CreateChatCompletionResponse>(body).is_err()
    }

    fn usage(prompt_tokens: u64, completion_tokens: u64) -> TokenUsage {
        TokenUsage::new(prompt_tokens, completion_tokens)
    }

    #[test]
    fn an_answer_stopped_at_the_token_limit_is_marked_cut_off() {
        for body in [
            r#"{"id":"x","object":"chat.completion","created":1,"model":"m",
               "choices":[{"index":0,"message":{"role":"assistant","content":"<plan"},"finish_reason":"length"}]}"#,
            r#"{"choices":[{"message":{"role":"assistant","content":"<plan"},"finish_reason":"length"}]}"#,
        ] {
            assert_eq!(parse(body).unwrap().cut, Some(Cut::TokenLimit), "{body}");
        }
    }

    #[test]
    fn a_reply_without_usage_counts_zero_tokens() {
        let body = r#"{"id":"x","object":"chat.completion","created":1,"model":"m",
            "choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;
        assert!(!strict_rejects(body));
        let reply = parse(body).unwrap();
        assert_eq!(reply.text, "hi");
        assert_eq!(reply.usage, TokenUsage::default());
    }

    #[test]
    fn a_minimal_body_without_id_object_created_or_index_is_read_leniently() {
        let body = r#"{"choices":[{"message":{"role":"assistant","content":"hi"}}]}"#;
        assert!(strict_rejects(body));
        let reply = parse(body).unwrap();
        assert_eq!(reply.text, "hi");
        assert_eq!(reply.usage, TokenUsage::default());
    }

    #[test]
    fn tool_calls_are_read_strictly_and_leniently() {
        let strict = r#"{"id":"x","object":"chat.completion","created":1,"model":"m",
            "choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
              "tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}}]}}]}"#;
        let reply = parse(strict).unwrap();
        assert_eq!(
            reply.tool_calls,
            [ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"a"}"#.into()
            }]
        );
        let lenient = r#"{"choices":[{"message":{"tool_calls":[{"function":{"name":"list","arguments":{"path":"."}}}]}}]}"#;
        let reply = parse(lenient).unwrap();
        assert_eq!(reply.tool_calls[0].name, "list");
        assert_eq!(reply.tool_calls[0].arguments, r#"{"path":"."}"#);
    }

    #[test]
    fn an_unknown_finish_reason_or_partial_usage_still_gives_text_and_tokens() {
        let body = r#"{"id":"x","object":"chat.completion","created":1,"model":"m",
            "choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"eos"}],
            "usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#;
        assert!(strict_rejects(body));
        assert_eq!(
            parse(body).unwrap(),
            ChatReply {
                text: "ok".into(),
                usage: usage(12, 3),
                cut: None,
                tool_calls: Vec::new(),
            }
        );

        // llama.cpp-style usage without `total_tokens`, no `model`.
        let body = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}],
            "usage":{"prompt_tokens":5,"completion_tokens":2}}"#;
        assert!(strict_rejects(body));
        assert_eq!(parse(body).unwrap().usage, usage(5, 2));
    }

    #[test]
    fn the_prompt_tokens_served_from_the_cache_are_read_strictly_and_leniently() {
        // OpenAI's shape, and llama.cpp's as its server sends it (no `total_tokens` in some
        // builds; `timings` beside `usage`).
        let openai = r#"{"id":"x","object":"chat.completion","created":1,"model":"m",
            "choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],
            "usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,
                     "prompt_tokens_details":{"cached_tokens":1920}}}"#;
        assert!(!strict_rejects(openai));
        let u = parse(openai).unwrap().usage;
        assert_eq!((u.prompt_tokens, u.cached_prompt_tokens), (2006, 1920));
        assert_eq!(u.uncached_prompt_tokens(), 86);
        let llama = r#"{"choices":[{"finish_reason":"length","index":0,"message":{"role":"assistant","content":"Hello!"}}],
            "created":1795732645,"model":"qwen","object":"chat.completion",
            "usage":{"completion_tokens":2,"prompt_tokens":31,"prompt_tokens_details":{"cached_tokens":3}},
            "timings":{"cache_n":3,"prompt_n":28}}"#;
        assert!(strict_rejects(llama));
        assert_eq!(parse(llama).unwrap().usage.cached_prompt_tokens, 3);
        // A count above the prompt's (a confused server) is held to the prompt.
        let over = r#"{"choices":[{"message":{"content":"ok"}}],"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":9}}}"#;
        assert_eq!(parse(over).unwrap().usage.cached_prompt_tokens, 5);
    }

    #[test]
    fn lenient_reading_still_reports_empty_answers() {
        let no_choices = r#"{"choices":[]}"#;
        assert!(matches!(parse(no_choices), Err(LlmError::EmptyAnswer(_))));
        let null_content = r#"{"choices":[{"message":{"role":"assistant","content":null},"finish_reason":"eos"}]}"#;
        match parse(null_content) {
            Err(LlmError::EmptyAnswer(why)) => assert!(why.contains("eos"), "{why}"),
            other => panic!("expected EmptyAnswer, got {other:?}"),
        }
        let blank = r#"{"choices":[{"message":{"content":"  "}}]}"#;
        assert!(matches!(parse(blank), Err(LlmError::EmptyAnswer(_))));
    }

    #[test]
    fn a_body_without_choices_is_no_chat_completion() {
        for body in [
            "<html>captive portal</html>",
            r#"{"object":"list","data":[]}"#,
            r#"{"choices":"nope"}"#,
            r#"{"choices":[{"message":{"content":42}}]}"#,
        ] {
            match parse(body) {
                Err(LlmError::InvalidResponse(why)) => {
                    assert!(why.contains(body.trim()), "{why}")
                }
                other => panic!("expected InvalidResponse for {body}, got {other:?}"),
            }
        }
    }
}
