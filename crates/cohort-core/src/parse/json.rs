//! Lenient JSON: the almost-JSON models write (comments, trailing commas, Python literals, single
//! or smart quotes, raw newlines in strings, prose around the value) → `serde_json::Value`.

use super::json_fault::JsonFault;
use super::json_scan::OutsideStrings;
use super::tags::strip_fences;
use serde_json::Value;

/// How many `{`/`[` positions are tried as the start of a value embedded in prose. Bounds the
/// work on bracket-heavy prose; the value is almost always among the first few.
const MAX_SPAN_STARTS: usize = 32;

/// Parses `s` as JSON, repairing what models commonly get wrong.
///
/// Strict `serde_json` first, so valid JSON is never altered; then the repaired text; then the
/// longest balanced `{…}`/`[…]` embedded in the text, strict and repaired. On failure the error is
/// the strict parser's, whose line and column point into the text the model wrote.
pub fn lenient_json(s: &str) -> Result<Value, JsonFault> {
    let text = strip_fences(s);
    let strict_err = match serde_json::from_str::<Value>(text) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    if let Ok(v) = serde_json::from_str(&repair(text)) {
        return Ok(v);
    }
    embedded_value(text).ok_or_else(|| JsonFault::of(&strict_err))
}

fn parse_either(s: &str) -> Option<Value> {
    serde_json::from_str(s)
        .ok()
        .or_else(|| serde_json::from_str(&repair(s)).ok())
}

/// The longest top-level `{…}` or `[…]` inside `text` that parses. Longest, because prose such
/// as "see note [1]" also holds a valid value.
///
/// Only top-level spans count: the inside of a broken list is not the answer (a plan with one
/// bad step must fail, not shrink to its first step). An opening bracket that never closes ends
/// the search for the same reason: everything after it is inside a truncated value.
fn embedded_value(text: &str) -> Option<Value> {
    let mut best: Option<(usize, Value)> = None;
    let mut covered_to = 0;
    let starts = text.match_indices(['{', '[']).map(|(i, _)| i);
    for start in starts.take(MAX_SPAN_STARTS) {
        if start < covered_to {
            continue;
        }
        let Some(end) = balanced_end(text, start) else {
            break;
        };
        covered_to = end;
        if let Some(v) = parse_either(&text[start..end])
            && best.as_ref().is_none_or(|(len, _)| end - start > *len)
        {
            best = Some((end - start, v));
        }
    }
    best.map(|(_, v)| v)
}

/// The byte index just after the bracket that closes the one at `start`, skipping `"` strings.
fn balanced_end(text: &str, start: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in OutsideStrings::new(&text[start..]) {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(start + i + c.len_utf8());
                }
            }
            _ => {}
        }
    }
    None
}

/// Rewrites almost-JSON into JSON in one pass over the chars. Best effort: the result may still be
/// invalid, and then the caller reports the strict error.
fn repair(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 16);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        i = match c {
            '"' => copy_string(&chars, i + 1, &['"'], &mut out),
            '\'' => copy_string(&chars, i + 1, &['\''], &mut out),
            // Models and word processors turn quotes into “ ” or ‘ ’; outside a string they can
            // only be delimiters. Inside a "…" string they stay text (common in Chinese).
            '“' | '”' => copy_string(&chars, i + 1, &['”', '“', '"'], &mut out),
            '‘' => copy_string(&chars, i + 1, &['’', '‘'], &mut out),
            '/' if next == Some('/') => skip_line(&chars, i),
            '#' => skip_line(&chars, i),
            '/' if next == Some('*') => skip_block_comment(&chars, i + 2),
            '}' | ']' => {
                drop_trailing_comma(&mut out);
                out.push(c);
                i + 1
            }
            c if c.is_ascii_digit() || c == '-' => copy_number(&chars, i, &mut out),
            c if c.is_ascii_alphabetic() || c == '_' => copy_word(&chars, i, &mut out),
            _ => {
                out.push(c);
                i + 1
            }
        };
    }
    out
}

/// Copies a string whose opening quote is just before `start`, ending at any of `closers`, as a
/// `"…"` JSON string. Returns the index after the closing quote.
fn copy_string(chars: &[char], start: usize, closers: &[char], out: &mut String) -> usize {
    out.push('"');
    let mut i = start;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            match chars.get(i + 1) {
                Some('\'') => out.push('\''),
                Some(&e) if matches!(e, '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' | 'u') => {
                    out.push('\\');
                    out.push(e);
                }
                // A lone backslash (a Windows path, a regex) is meant literally.
                _ => {
                    out.push_str("\\\\");
                    i += 1;
                    continue;
                }
            }
            i += 2;
            continue;
        }
        if closers.contains(&c) {
            out.push('"');
            return i + 1;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
        i += 1;
    }
    // Unterminated: close it, so that a truncated answer fails on its missing bracket instead.
    out.push('"');
    chars.len()
}

fn copy_number(chars: &[char], start: usize, out: &mut String) -> usize {
    let mut i = start;
    while let Some(&c) = chars.get(i) {
        if !(c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E')) {
            break;
        }
        out.push(c);
        i += 1;
    }
    i
}

/// A bare word outside strings: a Python or JSON literal, or an unquoted key or value.
fn copy_word(chars: &[char], start: usize, out: &mut String) -> usize {
    let mut i = start;
    while chars
        .get(i)
        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
    {
        i += 1;
    }
    let word: String = chars[start..i].iter().collect();
    match word.as_str() {
        "true" | "True" | "TRUE" => out.push_str("true"),
        "false" | "False" | "FALSE" => out.push_str("false"),
        "null" | "None" | "NULL" | "nil" => out.push_str("null"),
        _ => {
            out.push('"');
            out.push_str(&word);
            out.push('"');
        }
    }
    i
}

fn skip_line(chars: &[char], start: usize) -> usize {
    let mut i = start;
    while chars.get(i).is_some_and(|c| *c != '\n') {
        i += 1;
    }
    i
}

fn skip_block_comment(chars: &[char], start: usize) -> usize {
    let mut i = start;
    while i < chars.len() {
        if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
            return i + 2;
        }
        i += 1;
    }
    chars.len()
}

fn drop_trailing_comma(out: &mut String) {
    let kept = out.trim_end().len();
    if out[..kept].ends_with(',') {
        out.truncate(kept - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strict_json_is_taken_as_is() {
        assert_eq!(
            lenient_json(r#"{"a": [1, "x # not a comment"]}"#).unwrap(),
            json!({"a": [1, "x # not a comment"]})
        );
    }

    #[test]
    fn trailing_commas_are_dropped() {
        assert_eq!(lenient_json("[1, 2, ]").unwrap(), json!([1, 2]));
        assert_eq!(
            lenient_json("{\"a\": {\"b\": 1,\n},\n}").unwrap(),
            json!({"a": {"b": 1}})
        );
    }

    #[test]
    fn comments_outside_strings_are_dropped() {
        let text =
            "{\n  // the receiver\n  \"a\": \"http://x#y\", # why\n  /* block */ \"b\": 2\n}";
        assert_eq!(
            lenient_json(text).unwrap(),
            json!({"a": "http://x#y", "b": 2})
        );
    }

    #[test]
    fn python_literals_become_json_literals_outside_strings_only() {
        let text = "{'need_reply': True, 'waiting': False, 'x': None, 'text': 'True story'}";
        assert_eq!(
            lenient_json(text).unwrap(),
            json!({"need_reply": true, "waiting": false, "x": null, "text": "True story"})
        );
    }

    #[test]
    fn single_quoted_strings_are_converted() {
        assert_eq!(
            lenient_json(r#"{'a': 'say "hi"', 'b': 'it\'s'}"#).unwrap(),
            json!({"a": "say \"hi\"", "b": "it's"})
        );
    }

    #[test]
    fn smart_quotes_delimit_outside_strings_and_stay_text_inside() {
        let text = "{“message”: “你好”, \"quote\": \"他说“好”\"}";
        assert_eq!(
            lenient_json(text).unwrap(),
            json!({"message": "你好", "quote": "他说“好”"})
        );
    }

    #[test]
    fn raw_newlines_and_bare_keys_are_repaired() {
        let text = "{action: \"add_task\", \"text\": \"line one\nline two\"}";
        assert_eq!(
            lenient_json(text).unwrap(),
            json!({"action": "add_task", "text": "line one\nline two"})
        );
    }

    #[test]
    fn numbers_survive_repair() {
        assert_eq!(
            lenient_json("[1e5, -2.5E-3, 3,]").unwrap(),
            json!([1e5, -2.5e-3, 3])
        );
    }

    #[test]
    fn prose_around_the_value_is_ignored() {
        let text = "Here's the plan (see note [1]):\n[{\"a\": 1}, {\"b\": [2]}]\nThat's all!";
        assert_eq!(lenient_json(text).unwrap(), json!([{"a": 1}, {"b": [2]}]));
    }

    #[test]
    fn fenced_json_is_read() {
        assert_eq!(
            lenient_json("```json\n{\"a\": 1,}\n```").unwrap(),
            json!({"a": 1})
        );
    }

    #[test]
    fn multibyte_text_is_kept_intact() {
        let text = "{'目标': '写一首诗 🎉', 'n': 1,}";
        assert_eq!(
            lenient_json(text).unwrap(),
            json!({"目标": "写一首诗 🎉", "n": 1})
        );
    }

    #[test]
    fn broken_json_reports_the_strict_error_position() {
        let err = lenient_json("{\"a\": 1\n    \"b\": 2}").unwrap_err();
        assert_eq!(err.to_string(), "expected `,` or `}` at line 2 column 5");
        assert!(
            lenient_json("[{\"a\": 1}")
                .unwrap_err()
                .to_string()
                .contains("EOF")
        );
        assert!(lenient_json("").is_err());
    }
}
