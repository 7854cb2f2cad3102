//! A streamed chat completion (`stream: true`): one attempt that reads the chunks as they come,
//! and their assembly. Each chunk's delta adds to the answer's text and tool calls, the last
//! chunks bring `finish_reason` and `usage`. Chunks are read as plain JSON, leniently, so a local
//! server's (fields missing or extra) do as well as OpenAI's.

use super::cache::Body;
use super::{AttemptFailure, Inner, classify};
use crate::{ChatReply, ChatRequest, Cut, LlmError, ToolCall};
use async_openai::error::OpenAIError;
use async_openai::types::chat::ChatCompletionStreamOptions;
use cohort_core::state::TokenUsage;
use serde_json::Value;
use std::time::Duration;

/// How often a streamed answer's growing text is passed on: often enough to watch it being
/// written, seldom enough that a fast model does not flood the event stream.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// How much the text grows between two looks for a loop (`repetition`).
const LOOP_CHECK_BYTES: usize = 96;

/// One streamed `client.chat().create_stream(..)`: chunks are read as they come and put
/// together ([`Assembly`]), the text so far goes to the request's progress. The answer's
/// first piece must come within `request_timeout` (the endpoint reads the prompt first, which
/// takes a CPU model minutes), and each later one within `idle` of the one before: a hung
/// endpoint is noticed after `idle`, while a slow one that keeps writing is never cut off
/// (`max_tokens` bounds how long it writes). An answer that falls into a loop, writing one
/// passage again and again, is stopped there and comes back cut (`Cut::Repetition`).
pub(super) async fn attempt(
    inner: &Inner,
    mut body: Body,
    request: &ChatRequest,
    idle: Duration,
) -> Result<ChatReply, AttemptFailure> {
    use futures::StreamExt;
    use tokio::time::{Instant, timeout_at};
    body.chat.stream = Some(true);
    body.chat.stream_options = Some(ChatCompletionStreamOptions {
        include_usage: Some(true),
        include_obfuscation: None,
    });
    let first_by = Instant::now() + inner.settings.request_timeout;
    let chat = inner.client.chat();
    let opened = timeout_at(first_by, chat.create_stream_byot::<_, Value>(body)).await;
    let mut chunks = match opened {
        Err(_) => return Err(AttemptFailure::Timeout),
        Ok(Err(error)) => return classify(error),
        Ok(Ok(chunks)) => chunks,
    };
    let mut answer = Assembly::default();
    let mut told = Instant::now();
    let mut looked_at = 0;
    loop {
        let writing = answer.has_output();
        let wait_until = if writing {
            Instant::now() + idle
        } else {
            first_by
        };
        let chunk = match timeout_at(wait_until, chunks.next()).await {
            Err(_) if writing => return Err(AttemptFailure::Stalled(idle)),
            Err(_) => return Err(AttemptFailure::Timeout),
            Ok(None) => break,
            Ok(Some(Err(OpenAIError::StreamError(e)))) => {
                return Err(AttemptFailure::Connection(format!("the stream broke: {e}")));
            }
            Ok(Some(Err(error))) => {
                return Err(AttemptFailure::BadAnswer(LlmError::InvalidResponse(
                    error.to_string(),
                )));
            }
            Ok(Some(Ok(chunk))) => chunk,
        };
        let grew = answer.push(&chunk).map_err(AttemptFailure::BadAnswer)?;
        if let Some(limits) = request.mending.loop_cut
            && grew
            && answer.text().len() >= looked_at + LOOP_CHECK_BYTES
        {
            looked_at = answer.text().len();
            if let Some(at) = crate::repetition::loop_start(answer.text(), limits) {
                return Ok(answer.stopped_in_loop(at));
            }
        }
        if grew
            && told.elapsed() >= PROGRESS_EVERY
            && let Some(progress) = &request.progress
        {
            progress.tell(answer.text());
            told = Instant::now();
        }
    }
    answer
        .finish()
        .map(|r| r.without_loop(request.mending.loop_cut))
        .map_err(AttemptFailure::BadAnswer)
}

/// What the chunks so far make.
#[derive(Debug, Default)]
pub(super) struct Assembly {
    text: String,
    /// Tool calls by their `index` in the deltas; the id and name come in the first piece, the
    /// arguments in any number of pieces.
    calls: Vec<ToolCall>,
    /// The delta `index` of each call in `calls`.
    indices: Vec<Option<u64>>,
    usage: Option<TokenUsage>,
    finish_reason: Option<String>,
    /// Chunks that carried a choice: none at all is an empty answer, not an empty text.
    choices_seen: usize,
}

impl Assembly {
    /// Adds one chunk; true when it added text (the answer grew). A chunk that reports an error
    /// instead (some servers do so mid-stream) ends the answer with that error.
    pub(super) fn push(&mut self, chunk: &Value) -> Result<bool, LlmError> {
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| error.to_string());
            return Err(LlmError::InvalidResponse(format!(
                "the stream reported an error: {message}"
            )));
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(super::reply::usage_of(usage));
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(false);
        };
        self.choices_seen += 1;
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(false);
        };
        for piece in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.add_call_piece(piece);
        }
        match delta.get("content").and_then(Value::as_str) {
            Some(text) if !text.is_empty() => {
                self.text.push_str(text);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn add_call_piece(&mut self, piece: &Value) {
        let id = piece
            .get("id")
            .and_then(Value::as_str)
            .filter(|i| !i.is_empty());
        // One slot per `index`, in the order first seen. A server that leaves the index out
        // goes on with the last call unless the piece brings a new id.
        let slot = match piece.get("index").and_then(Value::as_u64) {
            Some(i) => self.indices.iter().position(|&k| k == Some(i)),
            None => self.calls.len().checked_sub(1).filter(|&last| {
                id.is_none_or(|id| self.calls[last].id.is_empty() || self.calls[last].id == id)
            }),
        };
        let slot = slot.unwrap_or_else(|| {
            self.indices
                .push(piece.get("index").and_then(Value::as_u64));
            self.calls.push(ToolCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
            self.calls.len() - 1
        });
        let call = &mut self.calls[slot];
        if let Some(id) = id {
            call.id = id.to_owned();
        }
        let function = piece.get("function");
        let field = |name: &str| {
            function
                .and_then(|f| f.get(name))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        if !field("name").is_empty() {
            call.name = field("name").to_owned();
        }
        // Arguments come as pieces of JSON text; a server that sends them as an object whole
        // is read the same.
        match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(piece)) => call.arguments.push_str(piece),
            Some(whole @ Value::Object(_)) => call.arguments = whole.to_string(),
            _ => {}
        }
    }

    /// Whether the answer has begun: some text or a tool call.
    pub(super) fn has_output(&self) -> bool {
        !self.text.is_empty() || !self.calls.is_empty()
    }

    /// The answer so far.
    pub(super) fn text(&self) -> &str {
        &self.text
    }

    /// The answer so far, stopped where it began to loop (`at`, see `repetition`): reading on
    /// would only cost minutes until `max_tokens`. Usage the server never got to send stays
    /// zero (the caller estimates it); a tool call begun in a looping answer is dropped.
    pub(super) fn stopped_in_loop(mut self, at: usize) -> ChatReply {
        self.text.truncate(at);
        ChatReply {
            text: self.text,
            usage: self.usage.unwrap_or_default(),
            cut: Some(Cut::Repetition),
            tool_calls: Vec::new(),
        }
    }

    /// The whole reply, once the stream ended. Usage the server did not send stays zero (the
    /// caller estimates it).
    pub(super) fn finish(self) -> Result<ChatReply, LlmError> {
        let cut = (self.finish_reason.as_deref() == Some("length")).then_some(Cut::TokenLimit);
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .filter(|c| !c.name.is_empty())
            .enumerate()
            .map(|(i, mut c)| {
                if c.id.is_empty() {
                    c.id = format!("call_{i}");
                }
                if c.arguments.trim().is_empty() {
                    c.arguments = "{}".into();
                }
                c
            })
            .collect();
        if self.choices_seen == 0 {
            return Err(LlmError::EmptyAnswer("the stream sent no choices".into()));
        }
        // A stream that ends without saying why was cut (a proxy, a dropped connection): its
        // text may end mid-tag, and must not pass for a whole answer.
        if self.finish_reason.is_none() {
            return Err(LlmError::InvalidResponse(
                "the stream ended before the answer was finished (no finish_reason)".into(),
            ));
        }
        if self.text.trim().is_empty() && tool_calls.is_empty() {
            let mut why = String::from("the streamed answer has no content");
            if let Some(reason) = &self.finish_reason {
                why.push_str(&format!(" (finish_reason: {reason})"));
            }
            return Err(LlmError::EmptyAnswer(why));
        }
        Ok(ChatReply {
            text: self.text,
            usage: self.usage.unwrap_or_default(),
            cut,
            tool_calls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn assemble(chunks: &[Value]) -> Result<ChatReply, LlmError> {
        let mut a = Assembly::default();
        for c in chunks {
            a.push(c)?;
        }
        a.finish()
    }

    fn text(t: &str) -> Value {
        json!({"choices": [{"index": 0, "delta": {"content": t}, "finish_reason": null}]})
    }

    #[test]
    fn text_pieces_finish_reason_and_usage_make_one_reply() {
        let reply = assemble(&[
            json!({"choices": [{"delta": {"role": "assistant"}}]}),
            text("<think>Cold "),
            text("rain</think>"),
            json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 9,
                "prompt_tokens_details": {"cached_tokens": 96}}}),
        ])
        .unwrap();
        assert_eq!(reply.text, "<think>Cold rain</think>");
        assert_eq!(reply.usage.prompt_tokens, 120);
        assert_eq!(reply.usage.cached_prompt_tokens, 96);
        assert_eq!(reply.usage.completion_tokens, 9);
        assert_eq!(reply.cut, None);
    }

    #[test]
    fn a_push_says_whether_the_answer_grew() {
        let mut a = Assembly::default();
        assert!(
            !a.push(&json!({"choices": [{"delta": {"role": "assistant"}}]}))
                .unwrap()
        );
        assert!(a.push(&text("Hi")).unwrap());
        assert!(!a.push(&json!({"usage": null, "choices": []})).unwrap());
        assert_eq!(a.text(), "Hi");
    }

    #[test]
    fn tool_call_pieces_join_by_index() {
        let reply = assemble(&[
            json!({"choices": [{"delta": {"tool_calls": [
                {"index": 0, "id": "c1", "function": {"name": "file_read", "arguments": "{\"pa"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [
                {"index": 0, "function": {"arguments": "th\": \"a.txt\"}"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [
                {"index": 1, "function": {"name": "file_save"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [
                {"index": 2, "id": "c3", "function": {"name": "file_read", "arguments": {"path": "b"}}}]}}]}),
            json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
        ])
        .unwrap();
        assert_eq!(reply.text, "");
        assert_eq!(reply.tool_calls.len(), 3);
        assert_eq!(reply.tool_calls[0].id, "c1");
        assert_eq!(reply.tool_calls[0].arguments, r#"{"path": "a.txt"}"#);
        assert_eq!(reply.tool_calls[1].name, "file_save");
        assert_eq!(
            reply.tool_calls[1].id, "call_1",
            "an id the server left out is made up"
        );
        assert_eq!(
            reply.tool_calls[1].arguments, "{}",
            "no arguments: an empty object"
        );
        assert_eq!(reply.tool_calls[2].arguments, r#"{"path":"b"}"#);
    }

    #[test]
    fn a_cut_off_an_empty_and_an_erroring_stream_say_so() {
        let cut = assemble(&[
            text("<planned_step>[{\"a"),
            json!({"choices": [{"delta": {}, "finish_reason": "length"}]}),
        ])
        .unwrap();
        assert_eq!(cut.cut, Some(Cut::TokenLimit));
        let empty = assemble(&[json!({"choices": [{"delta": {}, "finish_reason": "stop"}]})]);
        assert!(
            matches!(&empty, Err(LlmError::EmptyAnswer(why)) if why.contains("stop")),
            "{empty:?}"
        );
        assert!(matches!(assemble(&[]), Err(LlmError::EmptyAnswer(_))));
        let unfinished = assemble(&[text("<think>Cold rai")]);
        assert!(
            matches!(&unfinished, Err(LlmError::InvalidResponse(why)) if why.contains("finish_reason")),
            "{unfinished:?}"
        );
        assert!(
            Assembly::default()
                .push(&json!({"error": null, "choices": []}))
                .is_ok()
        );
        let error = assemble(&[text("x"), json!({"error": {"message": "out of memory"}})]);
        assert!(
            matches!(&error, Err(LlmError::InvalidResponse(why)) if why.contains("out of memory")),
            "{error:?}"
        );
    }
}
