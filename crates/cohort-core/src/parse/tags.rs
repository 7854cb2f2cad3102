//! Finding `<tag>…</tag>` blocks in model answers the way models really write them: amid prose,
//! inside or around code fences, repeated, or left unclosed at the end.
//!
//! Every index used for slicing comes from `str::find`/`match_indices` on a UTF-8 pattern, so it
//! always falls on a char boundary.

const FENCE: &str = "```";

/// The raw contents of each usable occurrence of `<tag>`, the last one first.
///
/// An occurrence is usable when it is closed before the next `<tag>` opens, or when it is the
/// last one (then it runs to the end of the text: answers cut off by a token limit, or models
/// that never write the closing tag). An earlier unclosed opening is someone quoting the tag.
pub(super) fn occurrences<'a>(text: &'a str, tag: &str) -> Vec<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let starts: Vec<usize> = text
        .match_indices(open.as_str())
        .map(|(i, _)| i + open.len())
        .collect();
    let mut found = Vec::with_capacity(starts.len());
    for (n, &start) in starts.iter().enumerate() {
        let next_open = starts.get(n + 1).map_or(text.len(), |s| s - open.len());
        match text[start..].find(close.as_str()) {
            Some(len) if start + len <= next_open => found.push(&text[start..start + len]),
            None if n + 1 == starts.len() => found.push(&text[start..]),
            _ => {}
        }
    }
    found.reverse();
    found
}

/// The content of `<tag>…</tag>`, trimmed and without code fences.
///
/// When the tag appears several times the last non-empty occurrence wins (a model quoting the
/// format before answering, or a reasoning model's draft before its final answer). `None` when
/// the tag never appears; `Some("")` when every occurrence is empty.
pub fn extract_tag(text: &str, tag: &str) -> Option<String> {
    let found = occurrences(text, tag);
    if found.is_empty() {
        return None;
    }
    let content = found
        .iter()
        .map(|raw| strip_fences(raw))
        .find(|c| !c.is_empty())
        .unwrap_or("");
    Some(content.to_owned())
}

/// Whether `<tag>` appears at all (even unclosed).
pub(crate) fn has_tag(text: &str, tag: &str) -> bool {
    text.contains(&format!("<{tag}>"))
}

/// Trims `s` and removes a code fence around it.
///
/// A fence is removed only when it cannot be part of the content: the content both opens and
/// closes with one, or it holds an odd number of fences, so the other half lies outside the tag
/// (```` ```json\n<tag>[…]</tag>\n``` ```` with the tag unclosed). A fenced snippet inside prose
/// is left alone.
pub(super) fn strip_fences(s: &str) -> &str {
    let mut t = s.trim();
    let odd = t.matches(FENCE).count() % 2 == 1;
    let mut opened = false;
    if let Some(rest) = t.strip_prefix(FENCE) {
        let body = skip_info_string(rest);
        if odd || body.trim_end().ends_with(FENCE) {
            t = body.trim();
            opened = true;
        }
    }
    if (opened || odd)
        && let Some(rest) = t.strip_suffix(FENCE)
    {
        t = rest.trim();
    }
    t
}

/// Drops the language word after an opening fence (```` ```json ````), but only when it looks like
/// one; ```` ```{"a": 1} ```` keeps its content.
fn skip_info_string(rest: &str) -> &str {
    let is_info = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '.');
    let word_end = rest.find(|c: char| !is_info(c)).unwrap_or(rest.len());
    let after = &rest[word_end..];
    match after.find('\n') {
        Some(nl) if after[..nl].trim().is_empty() => &after[nl + 1..],
        _ if after.trim().is_empty() || after.starts_with(' ') => after,
        // Something other than a language word follows the fence on its line: it is content.
        _ => rest,
    }
}

/// `text` without any `<tag>…</tag>` block (an unclosed block runs to the end of the text).
pub(crate) fn remove_blocks(text: &str, tag: &str) -> String {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut out = text.to_owned();
    // Each turn removes at least the opening tag, so the loop ends.
    while let Some(start) = out.find(open.as_str()) {
        let body = start + open.len();
        let end = out[body..]
            .find(close.as_str())
            .map_or(out.len(), |len| body + len + close.len());
        out.replace_range(start..end, "");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_content_is_found_amid_prose_and_trimmed() {
        let text = "Sure! Here it is:\n<think>\n  the plan is fine  \n</think>\nHope that helps.";
        assert_eq!(
            extract_tag(text, "think").as_deref(),
            Some("the plan is fine")
        );
    }

    #[test]
    fn absent_tag_is_none_and_empty_tag_is_empty() {
        assert_eq!(extract_tag("no tags here", "think"), None);
        assert_eq!(
            extract_tag("<think>  </think>", "think").as_deref(),
            Some("")
        );
        // A closing tag alone is not an occurrence.
        assert_eq!(extract_tag("text</think>", "think"), None);
    }

    #[test]
    fn the_last_occurrence_wins_when_a_model_quotes_the_format_first() {
        let text = "Format: <think>your thoughts</think>\nAnswer:\n<think>real thoughts</think>";
        assert_eq!(extract_tag(text, "think").as_deref(), Some("real thoughts"));
    }

    #[test]
    fn an_empty_last_occurrence_falls_back_to_an_earlier_one() {
        let text = "<think>content</think> and then <think></think>";
        assert_eq!(extract_tag(text, "think").as_deref(), Some("content"));
    }

    #[test]
    fn an_unclosed_tag_at_the_end_runs_to_the_end_of_the_answer() {
        assert_eq!(
            extract_tag("intro <think>cut off here", "think").as_deref(),
            Some("cut off here")
        );
        let text = "Format: <think>x</think>\n<think>truncated answer";
        assert_eq!(
            extract_tag(text, "think").as_deref(),
            Some("truncated answer")
        );
    }

    #[test]
    fn an_earlier_unclosed_opening_is_skipped() {
        let text = "I will write <think> tags. <think>done</think>";
        assert_eq!(occurrences(text, "think"), vec!["done"]);
    }

    #[test]
    fn fences_inside_the_tag_are_removed() {
        let text = "<planned_step>\n```json\n[1, 2]\n```\n</planned_step>";
        assert_eq!(extract_tag(text, "planned_step").as_deref(), Some("[1, 2]"));
        let text = "<planned_step>```[1]```</planned_step>";
        assert_eq!(extract_tag(text, "planned_step").as_deref(), Some("[1]"));
        let text = "<planned_step>```json [1]```</planned_step>";
        assert_eq!(extract_tag(text, "planned_step").as_deref(), Some("[1]"));
    }

    #[test]
    fn a_tag_inside_a_fence_is_found_even_when_unclosed() {
        let text = "```json\n<planned_step>[1]</planned_step>\n```";
        assert_eq!(extract_tag(text, "planned_step").as_deref(), Some("[1]"));
        let text = "```xml\n<planned_step>\n[1]\n```";
        assert_eq!(extract_tag(text, "planned_step").as_deref(), Some("[1]"));
    }

    #[test]
    fn a_code_block_inside_prose_content_is_kept() {
        let text = "<think>Use this:\n```rust\nfn main() {}\n```</think>";
        assert_eq!(
            extract_tag(text, "think").as_deref(),
            Some("Use this:\n```rust\nfn main() {}\n```")
        );
    }

    #[test]
    fn multibyte_text_around_and_inside_tags_is_sliced_safely() {
        let text = "好的😀<think>中文内容🎉</think>结束";
        assert_eq!(extract_tag(text, "think").as_deref(), Some("中文内容🎉"));
        assert_eq!(
            extract_tag("😀<think>未闭合🎉", "think").as_deref(),
            Some("未闭合🎉")
        );
        assert_eq!(strip_fences("```中文\n内容\n```"), "中文\n内容");
    }

    #[test]
    fn blocks_are_removed_including_unclosed_ones() {
        let text = "a<x>1</x>b<x>2</x>c<x>3";
        assert_eq!(remove_blocks(text, "x"), "abc");
        assert_eq!(remove_blocks("中<x>文</x>😀", "x"), "中😀");
    }
}
