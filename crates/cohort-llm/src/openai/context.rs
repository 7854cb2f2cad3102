//! An endpoint that refuses a prompt as longer than its context window says how long the window
//! is (llama.cpp: `"n_ctx": 8192`; OpenAI and vLLM: "maximum context length is 8192 tokens").
//! The model learns it, so the step is asked again with its prompt built under that budget,
//! and every later prompt is too, even when the team file states no `context_window`.

/// The context window a refusal names, when the body is a context-length refusal.
pub fn window_from_refusal(body: &str) -> Option<u32> {
    let lower = body.to_ascii_lowercase();
    let about_context = lower.contains("context")
        && (lower.contains("exceed") || lower.contains("maximum") || lower.contains("too long"));
    if !about_context {
        return None;
    }
    for key in [
        "\"n_ctx\":",
        "maximum context length is ",
        "context length of ",
        "context window of ",
    ] {
        if let Some(at) = lower.find(key) {
            let digits: String = lower[at + key.len()..]
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(n) = digits.parse::<u32>()
                && n > 0
            {
                return Some(n);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_read_from_the_usual_refusals() {
        let llama = r#"{"error":{"code":400,"message":"request (8527 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":8527,"n_ctx":8192}}"#;
        assert_eq!(window_from_refusal(llama), Some(8192));
        let openai = r#"{"error": {"message": "This model's maximum context length is 4096 tokens. However, your messages resulted in 5000 tokens.", "code": "context_length_exceeded"}}"#;
        assert_eq!(window_from_refusal(openai), Some(4096));
        assert_eq!(
            window_from_refusal(r#"{"error": "model `x` does not support this"}"#),
            None
        );
        assert_eq!(
            window_from_refusal("context length exceeded"),
            None,
            "no number, nothing learned"
        );
    }
}
