//! Reading a prompt sent to the OpenAI stub: the current step's fields and content (shared by
//! tests that answer by what each prompt asks).

/// The first `- key: value` line of a prompt: the current step's, which comes before history.
pub fn field<'a>(prompt: &'a str, key: &str) -> &'a str {
    let tag = format!("- {key}: ");
    prompt
        .lines()
        .find_map(|l| l.strip_prefix(&tag))
        .unwrap_or_default()
        .split(' ')
        .next()
        .unwrap_or_default()
}

/// The current step's content: what this step is about (history and rules left out).
pub fn content(prompt: &str) -> String {
    prompt
        .lines()
        .skip_while(|l| l.trim() != "## Content")
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}
