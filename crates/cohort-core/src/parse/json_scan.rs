//! Walking JSON text outside its strings: the brackets and commas that give its shape, whatever
//! the strings hold.

use std::str::CharIndices;

/// The characters of a JSON text outside its strings, with their byte index; the quotes that
/// open and close strings are not given. After the last one, `in_string` (and `escaped`, a
/// backslash waiting for its character) tell whether the text stops inside a string.
pub(super) struct OutsideStrings<'a> {
    chars: CharIndices<'a>,
    pub in_string: bool,
    pub escaped: bool,
}

impl<'a> OutsideStrings<'a> {
    pub fn new(text: &'a str) -> Self {
        Self {
            chars: text.char_indices(),
            in_string: false,
            escaped: false,
        }
    }
}

impl Iterator for OutsideStrings<'_> {
    type Item = (usize, char);

    fn next(&mut self) -> Option<(usize, char)> {
        for (i, c) in self.chars.by_ref() {
            if self.in_string {
                match c {
                    _ if self.escaped => self.escaped = false,
                    '\\' => self.escaped = true,
                    '"' => self.in_string = false,
                    _ => {}
                }
            } else if c == '"' {
                self.in_string = true;
            } else {
                return Some((i, c));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_inside_strings_and_escaped_quotes_are_skipped() {
        let text = r#"{"a": "x}\"]", "b": [1]"#;
        let shape: String = OutsideStrings::new(text).map(|(_, c)| c).collect();
        assert_eq!(shape, "{: , : [1]");
        let mut scan = OutsideStrings::new(r#"{"a": "half \"#);
        scan.by_ref().for_each(drop);
        assert!(scan.in_string && scan.escaped);
    }
}
