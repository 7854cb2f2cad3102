//! Small Markdown helpers: reading heading levels and fences (to validate prompt files and to
//! test assembled prompts), and embedding untrusted text (step contents, results, memory) so
//! that it can never open a section of its own inside an assembled prompt.

/// The level of an ATX heading (`## x` → 2), or None when the line is not a heading. Like
/// CommonMark, up to three leading spaces are allowed and the hashes must be followed by a space
/// or end the line.
pub fn heading_level(line: &str) -> Option<usize> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let hashes = rest.len() - rest.trim_start_matches('#').len();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let after = &rest[hashes..];
    (after.is_empty() || after.starts_with(' ') || after.starts_with('\t')).then_some(hashes)
}

/// A code-fence line: its character (`` ` `` or `~`) and length.
fn fence_marker(line: &str) -> Option<(char, usize)> {
    let t = line.trim_start_matches(' ');
    if line.len() - t.len() > 3 {
        return None;
    }
    let c = t.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = t.len() - t.trim_start_matches(c).len();
    (n >= 3).then_some((c, n))
}

/// Every heading outside fenced code blocks: (level, heading text, byte offset of its line).
pub fn headings(text: &str) -> Vec<(usize, &str, usize)> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    let mut offset = 0;
    for line in text.split('\n') {
        let start = offset;
        offset += line.len() + 1;
        if let Some((c, n)) = fence {
            let t = line.trim();
            if !t.is_empty() && t.chars().all(|x| x == c) && t.len() >= n {
                fence = None;
            }
            continue;
        }
        if let Some(marker) = fence_marker(line) {
            fence = Some(marker);
            continue;
        }
        if let Some(level) = heading_level(line) {
            out.push((level, line.trim_start_matches([' ', '#']).trim(), start));
        }
    }
    out
}

/// Wraps text in a backtick fence longer than any backtick run inside it, so nothing in the text
/// can close the fence early.
pub fn fenced(text: &str, info: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    format!("{fence}{info}\n{}\n{fence}", text.trim_end())
}

/// Whether text can be shown as-is below a heading of level `min_level - 1`: it opens no
/// heading above `min_level`, no code fence and no setext heading.
pub fn is_plain_safe(text: &str, min_level: usize) -> bool {
    text.lines().all(|line| {
        let t = line.trim();
        let setext = !t.is_empty()
            && (t.chars().all(|c| c == '=') || (t.len() > 1 && t.chars().all(|c| c == '-')));
        !setext
            && fence_marker(line).is_none()
            && heading_level(line).is_none_or(|l| l >= min_level)
    })
}

/// Collapses text to one line; a leading character that Markdown would read as structure is
/// escaped.
pub fn one_line(text: &str) -> String {
    let s = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.starts_with(['#', '`', '~', '=']) {
        format!("\\{s}")
    } else {
        s
    }
}

/// A list item `- label: text`. Text that is empty shows `none`; multi-line text continues
/// indented below the label; text that could break the surrounding structure is fenced.
pub fn bullet(label: &str, text: &str, min_level: usize, none: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return format!("- {label}: {none}");
    }
    if !is_plain_safe(text, min_level) {
        return format!("- {label}:\n{}", fenced(text, "text"));
    }
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    let rest: Vec<_> = lines.collect();
    if rest.is_empty() {
        return format!("- {label}: {first}");
    }
    let mut out = format!("- {label}:\n  {first}");
    for l in rest {
        out.push('\n');
        if !l.trim().is_empty() {
            out.push_str("  ");
            out.push_str(l);
        }
    }
    out
}

/// Text shown as a paragraph block below a heading of level `min_level - 1`: as-is when safe,
/// fenced otherwise, `none` when empty.
pub fn block(text: &str, min_level: usize, none: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        none.to_owned()
    } else if is_plain_safe(text, min_level) {
        text.to_owned()
    } else {
        fenced(text, "text")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heading_levels_follow_commonmark() {
        assert_eq!(heading_level("# A"), Some(1));
        assert_eq!(heading_level("   ### A"), Some(3));
        assert_eq!(heading_level("##"), Some(2));
        assert_eq!(heading_level("#tag"), None);
        assert_eq!(heading_level("    # code"), None);
        assert_eq!(heading_level("####### seven"), None);
    }

    #[test]
    fn headings_inside_fences_are_not_headings() {
        let text = "# One\n````\n# not\n```\n# still not\n````\n## Two\n~~~\n# no\n~~~";
        let found: Vec<_> = headings(text).into_iter().map(|(l, t, _)| (l, t)).collect();
        assert_eq!(found, [(1, "One"), (2, "Two")]);
    }

    #[test]
    fn fences_outgrow_backticks_inside() {
        let f = fenced("a\n```\n# x\n```", "text");
        assert!(f.starts_with("````text\n"));
        assert!(headings(&f).is_empty());
    }

    #[test]
    fn unsafe_text_is_fenced_and_safe_text_is_not() {
        assert_eq!(block("plain\n### deep", 3, "-"), "plain\n### deep");
        assert!(block("# top", 3, "-").starts_with("```"));
        assert!(block("Title\n=====", 3, "-").starts_with("```"));
        assert_eq!(block("  ", 3, "(none)"), "(none)");
        assert_eq!(bullet("k", "a\nb", 3, "-"), "- k:\n  a\n  b");
        assert!(bullet("k", "a\n## b", 3, "-").contains("```text"));
        assert_eq!(one_line("# a\n b"), "\\# a b");
    }
}
