//! How the rules tell whether a text gives a result: its words, and every three of them in a
//! row.

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
