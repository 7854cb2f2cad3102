//! Reading a YAML file a person wrote into its raw shape, with every schema problem it has, each
//! named by its field and worded by the YAML (never by a Rust type).
//!
//! serde stops at the first value that does not fit. To find the others, the offending node is
//! set aside and the document read again, until it reads or nothing more can be set aside (a
//! problem at its top). A node set aside from a list is remembered, so the problems after it
//! still name the entries by their place in the file (`agents[2]`, not `agents[1]`).

use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;
use serde_yaml::Value;

/// The most problems one file reports (each costs a read of the document).
const MOST: usize = 50;

/// One schema problem: the field's path (`agents[1].llm`) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Slip {
    pub field: String,
    pub message: String,
}

/// A file read into `T`: the value when the whole file fits it, else every problem found and
/// the fields set aside to find them (a value read without them, when one could be).
pub(super) struct Read<T> {
    pub value: Option<T>,
    pub slips: Vec<Slip>,
    /// The fields set aside, by their place in the file.
    pub set_aside: Vec<String>,
}

/// A place in the document as the file has it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// Reads the file `file` as a `T`, whole: else every problem it has, each naming the file and
/// the field (a file that cannot be read is one problem, of `(file)`).
pub(super) fn load<T: DeserializeOwned>(
    file: &std::path::Path,
) -> Result<T, Vec<crate::problem::Problem>> {
    let problem = |field: &str, message: String| crate::problem::Problem {
        file: file.to_path_buf(),
        field: field.into(),
        message,
    };
    let text = std::fs::read_to_string(file)
        .map_err(|e| vec![problem("(file)", format!("cannot read: {e}"))])?;
    let read = read::<T>(&text);
    match read.value {
        Some(v) if read.slips.is_empty() => Ok(v),
        _ => Err(read
            .slips
            .into_iter()
            .map(|s| problem(&s.field, s.message))
            .collect()),
    }
}

/// Reads `text` as a `T`, listing every schema problem (see the module docs).
pub(super) fn read<T: DeserializeOwned>(text: &str) -> Read<T> {
    let first = match serde_yaml::from_str::<T>(text) {
        Ok(v) => {
            return Read {
                value: Some(v),
                slips: Vec::new(),
                set_aside: Vec::new(),
            };
        }
        Err(e) => e,
    };
    let Ok(doc) = serde_yaml::from_str::<Value>(text) else {
        // Not YAML at all: there is no document to look further into.
        let (field, message) = split_yaml_message(&first.to_string());
        return Read {
            value: None,
            slips: vec![Slip {
                field,
                message: word(&message),
            }],
            set_aside: Vec::new(),
        };
    };
    let mut read = all_problems::<T>(doc);
    // serde_yaml knew where the first problem is in the text; the document read after it
    // has no lines.
    let (first_field, _) = split_yaml_message(&first.to_string());
    if let (Some(loc), Some(s)) = (first.location(), read.slips.first_mut())
        && s.field == first_field
    {
        s.message
            .push_str(&format!(" (line {}, column {})", loc.line(), loc.column()));
    }
    read
}

/// Reads `doc` again and again, setting aside each node that does not fit.
fn all_problems<T: DeserializeOwned>(mut doc: Value) -> Read<T> {
    let mut slips = Vec::new();
    let mut removed: Vec<Vec<Step>> = Vec::new();
    for _ in 0..MOST {
        let e = match serde_path_to_error::deserialize::<_, T>(doc.clone()) {
            Ok(v) => return done(Some(v), slips, &removed),
            Err(e) => e,
        };
        let here: Vec<Segment> = e.path().iter().cloned().collect();
        let message = e.inner().to_string();
        let (node, slip) = offending(&here, &message);
        let place = in_file(&node, &removed);
        let field = render(&in_file(&slip.0, &removed));
        // A required key set aside for its value is missing next: said once.
        if !slips.iter().any(|s: &Slip| s.field == field) {
            slips.push(Slip {
                field,
                message: slip.1,
            });
        }
        if node.is_empty() || !remove(&mut doc, &node) {
            break;
        }
        removed.push(place);
    }
    done(None, slips, &removed)
}

fn done<T>(value: Option<T>, slips: Vec<Slip>, removed: &[Vec<Step>]) -> Read<T> {
    Read {
        value,
        slips,
        set_aside: removed.iter().map(|p| render(p)).collect(),
    }
}

/// For an error at `here`: the node to set aside, and the field and message to report.
fn offending(here: &[Segment], message: &str) -> (Vec<Segment>, (Vec<Segment>, String)) {
    let key = |k: &str| {
        let mut p = here.to_vec();
        p.push(Segment::Map { key: k.to_owned() });
        p
    };
    if let Some(k) = quoted_after(message, "unknown field `") {
        // The path already ends at the unknown key when the reader got that far.
        let at_key = matches!(here.last(), Some(Segment::Map { key: last }) if *last == k);
        let node = if at_key { here.to_vec() } else { key(&k) };
        return (node.clone(), (node, word(message)));
    }
    if let Some(k) = quoted_after(message, "missing field `") {
        return (
            here.to_vec(),
            (key(&k), "is required but missing".to_owned()),
        );
    }
    (here.to_vec(), (here.to_vec(), word(message)))
}

/// The text between `prefix` and the next backquote, if `message` starts with `prefix`.
fn quoted_after(message: &str, prefix: &str) -> Option<String> {
    let rest = message.strip_prefix(prefix)?;
    rest.split_once('`').map(|(k, _)| k.to_owned())
}

/// Where `path` (in the document as it is now) is in the file, given the list entries set
/// aside before (`removed`, by their places in the file).
fn in_file(path: &[Segment], removed: &[Vec<Step>]) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    for seg in path {
        let step = match seg {
            Segment::Seq { index } => {
                // The index-th entry of those still there.
                let mut seen = 0;
                let mut j = 0;
                loop {
                    let mut at = out.clone();
                    at.push(Step::Index(j));
                    if !removed.contains(&at) {
                        if seen == *index {
                            break;
                        }
                        seen += 1;
                    }
                    j += 1;
                }
                Step::Index(j)
            }
            Segment::Map { key } => Step::Key(key.clone()),
            Segment::Enum { variant } => Step::Key(variant.clone()),
            Segment::Unknown => Step::Key("?".to_owned()),
        };
        out.push(step);
    }
    out
}

/// `agents[1].llm`; `(document)` for the whole file.
fn render(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Index(i) => out.push_str(&format!("[{i}]")),
            Step::Key(k) if out.is_empty() => out.push_str(k),
            Step::Key(k) => out.push_str(&format!(".{k}")),
        }
    }
    if out.is_empty() {
        "(document)".to_owned()
    } else {
        out
    }
}

/// Removes the node at `path` from the document; false when there is none to remove.
fn remove(doc: &mut Value, path: &[Segment]) -> bool {
    let Some((last, parent)) = path.split_last() else {
        return false;
    };
    let mut node = doc;
    for seg in parent {
        let next = match (seg, node) {
            (Segment::Seq { index }, Value::Sequence(s)) => s.get_mut(*index),
            (Segment::Map { key }, Value::Mapping(m)) => m.get_mut(key.as_str()),
            _ => None,
        };
        match next {
            Some(n) => node = n,
            None => return false,
        }
    }
    match (last, node) {
        (Segment::Seq { index }, Value::Sequence(s)) if *index < s.len() => {
            s.remove(*index);
            true
        }
        (Segment::Map { key }, Value::Mapping(m)) => m.remove(key.as_str()).is_some(),
        _ => false,
    }
}

/// serde_yaml writes `agents[0].skills[1]: unknown variant …`; split the path off as the field.
/// An unknown key is named in the message only, so it is appended to the path: the field a user
/// must delete is `agents[0].colour`, not `agents[0]` (and `colour`, not the whole document, at
/// the top of a file).
fn split_yaml_message(m: &str) -> (String, String) {
    let (path, rest) = match m.split_once(": ") {
        Some((path, rest)) if !path.contains(' ') => (Some(path), rest),
        _ => (None, m),
    };
    let unknown = rest
        .strip_prefix("unknown field `")
        .and_then(|r| r.split_once('`'))
        .map(|(key, _)| key);
    let field = match (path, unknown) {
        (Some(p), Some(k)) => format!("{p}.{k}"),
        (None, Some(k)) => k.to_owned(),
        (Some(p), None) => p.to_owned(),
        (None, None) => "(document)".to_owned(),
    };
    (field, rest.to_owned())
}

/// serde's message worded for the person who wrote the YAML: what the key must be, never the
/// Rust type that reads it (`expected struct RawLlm`, `expected usize`).
pub(super) fn word(message: &str) -> String {
    for (kind, said) in [
        ("invalid type: ", "must be"),
        ("invalid value: ", "must be"),
    ] {
        if let Some(rest) = message.strip_prefix(kind)
            && let Some((got, expected)) = rest.split_once(", expected ")
        {
            return format!("{said} {}, not {}", expectation(expected), found(got));
        }
    }
    if let Some(rest) = message.strip_prefix("unknown variant ")
        && let Some((got, expected)) = rest.split_once(", expected ")
    {
        return format!("{got} is not a value it takes: {}", expectation(expected));
    }
    if let Some(rest) = message.strip_prefix("invalid length ")
        && let Some((got, expected)) = rest.split_once(", expected ")
    {
        return format!("must have {}, not {got}", expectation(expected));
    }
    message.to_owned()
}

/// What serde expected, in YAML's words.
fn expectation(expected: &str) -> String {
    let whole = "a whole number of 0 or more";
    let named = match expected {
        "usize" | "u64" | "u32" | "u16" | "u8" => Some(whole),
        "isize" | "i64" | "i32" | "i16" | "i8" => Some("a whole number"),
        "f32" | "f64" => Some("a number"),
        "a sequence" => Some("a list"),
        "a map" => Some("a mapping"),
        "a YAML tag starting with '!'" | "a Value::Tagged enum" => {
            Some("a single word (one of the values this key takes)")
        }
        "a boolean" => Some("true or false"),
        "unit" => Some("empty"),
        _ => None,
    };
    if let Some(n) = named {
        return n.to_owned();
    }
    // A type no `expecting` names yet: said by its kind, never by its Rust name.
    if expected.starts_with("struct ") || expected.starts_with("map ") {
        return "a mapping".to_owned();
    }
    if expected.starts_with("enum ") || expected.starts_with("variant ") {
        return "one of the values this key takes".to_owned();
    }
    expected.to_owned()
}

/// What the file has instead, in YAML's words.
fn found(got: &str) -> String {
    let kinds = [
        ("string ", "the text "),
        ("integer ", "the number "),
        ("floating point ", "the number "),
        ("boolean ", ""),
    ];
    for (serde, yaml) in kinds {
        if let Some(v) = got.strip_prefix(serde) {
            let v = v
                .strip_prefix('`')
                .and_then(|v| v.strip_suffix('`'))
                .unwrap_or(v);
            return format!("{yaml}{v}");
        }
    }
    match got {
        "sequence" => "a list".to_owned(),
        "map" => "a mapping".to_owned(),
        "unit value" => "empty".to_owned(),
        other => other.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "read only for its problems")]
    struct Doc {
        name: String,
        #[serde(default)]
        items: Vec<Item>,
        #[serde(default)]
        count: Option<usize>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "read only for its problems")]
    struct Item {
        id: String,
        #[serde(default)]
        size: Option<u32>,
    }

    fn slips(text: &str) -> Vec<String> {
        read::<Doc>(text)
            .slips
            .iter()
            .map(|s| format!("{}: {}", s.field, s.message))
            .collect()
    }

    #[test]
    fn every_problem_is_found_each_named_by_its_place_in_the_file() {
        let got = slips(
            "name: n\ncount: -1\nitems:\n  - {id: a, colour: red}\n  - {size: 3}\n  - {id: c, size: big}\n",
        );
        assert_eq!(
            got,
            [
                "count: must be a whole number of 0 or more, not the number -1 (line 2, column 8)",
                "items[0].colour: unknown field `colour`, expected `id` or `size`",
                "items[1].id: is required but missing",
                // The entry set aside before it does not renumber it.
                "items[2].size: must be a whole number of 0 or more, not the text \"big\"",
            ]
        );
    }

    #[test]
    fn a_file_that_fits_reads_with_no_problem_and_one_with_a_broken_top_stops() {
        let r = read::<Doc>("name: n\nitems: [{id: a}]\n");
        assert!(r.value.is_some() && r.slips.is_empty());
        let r = read::<Doc>("- just a list\n");
        assert!(r.value.is_none());
        assert_eq!(r.slips.len(), 1, "{:?}", r.slips);
        assert!(r.slips[0].message.starts_with("must be"), "{:?}", r.slips);
        let r = read::<Doc>("name: [unclosed\n");
        assert_eq!(r.slips.len(), 1, "a syntax error stops reading");
    }

    #[test]
    fn messages_name_yaml_kinds_never_rust_types() {
        for (serde, person) in [
            (
                "invalid type: string \"gpt\", expected struct RawLlm",
                "must be a mapping, not the text \"gpt\"",
            ),
            (
                "invalid type: sequence, expected a YAML tag starting with '!'",
                "must be a single word (one of the values this key takes), not a list",
            ),
            (
                "invalid type: map, expected f32",
                "must be a number, not a mapping",
            ),
            (
                "unknown variant `loud`, expected one of `low`, `high`",
                "`loud` is not a value it takes: one of `low`, `high`",
            ),
        ] {
            assert_eq!(word(serde), person);
        }
    }
}
