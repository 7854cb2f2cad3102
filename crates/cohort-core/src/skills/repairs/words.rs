//! How the rules tell whether a text gives a result: its words, every three of them in a row,
//! and the runtime's own words, which give none.

/// The words of `text`, lower-cased, punctuation aside.
pub(super) fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// Every three words in a row of `text` (lower-cased, punctuation aside).
pub(super) fn trigrams(text: &str) -> std::collections::HashSet<String> {
    let words: Vec<String> = words(text).collect();
    words.windows(3).map(|w| w.join(" ")).collect()
}

/// The trigrams of the runtime's own words in a summary (a composed summary's heading, and the
/// line above the results it added): they are no result of the stage's.
pub(super) fn runtime_words(t: &crate::texts::Texts) -> std::collections::HashSet<String> {
    let mut words = trigrams(&t.composed_summary("", ""));
    words.extend(trigrams(&t.results_added()));
    words
}
