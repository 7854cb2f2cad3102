//! The console's catalogs (`web/lang_en.json`, `web/lang_zh.json`) against each other and the
//! code: the same keys in both, each with the same placeholders and plural shape; every key the
//! views (`t('…')`, `tn('…')`, `tParts('…')`) and the page (`data-i18n*="…"`) name exists; every key is used;
//! and the Chinese texts hold no English words beyond the names that stay (JSON, MCP, …).

use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;

fn web() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("web")
}

fn catalog(lang: &str) -> Map<String, Value> {
    let path = web().join(format!("lang_{lang}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    match serde_json::from_str(&text) {
        Ok(Value::Object(m)) => m,
        other => panic!("{}: not a JSON object: {other:?}", path.display()),
    }
}

/// A text's `{placeholders}` (of every plural form), without the count `{n}` a plural fills.
fn placeholders(v: &Value) -> BTreeSet<String> {
    let texts: Vec<&str> = match v {
        Value::String(s) => vec![s.as_str()],
        Value::Object(forms) => forms.values().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let mut out = BTreeSet::new();
    for text in texts {
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}') else {
                break;
            };
            out.insert(rest[open + 1..open + close].to_owned());
            rest = &rest[open + close + 1..];
        }
    }
    out.remove("n");
    out
}

/// The keys a source names after each of `calls` (e.g. `t('`), up to the closing quote.
fn named_after(src: &str, call: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in src.match_indices(call) {
        // `t(` must be the whole name, not the end of `set(` or `at(`.
        let before = src[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') {
            continue;
        }
        let rest = &src[at + call.len()..];
        if let Some(end) = rest.find(['\'', '"']) {
            out.push(rest[..end].to_owned());
        }
    }
    out
}

struct Uses {
    plain: BTreeSet<String>,
    counted: BTreeSet<String>,
    /// Keys built at run time from a prefix (`t(`state.${s}`)`): every key under it counts.
    prefixes: BTreeSet<String>,
}

fn uses() -> Uses {
    let mut u = Uses {
        plain: BTreeSet::new(),
        counted: BTreeSet::new(),
        prefixes: BTreeSet::new(),
    };
    for entry in std::fs::read_dir(web()).unwrap() {
        let path = entry.unwrap().path();
        let src = std::fs::read_to_string(&path).unwrap_or_default();
        match path.extension().and_then(|e| e.to_str()) {
            Some("js") => {
                u.plain.extend(named_after(&src, "t('"));
                u.plain.extend(named_after(&src, "tParts('"));
                u.counted.extend(named_after(&src, "tn('"));
                for built in named_after(&src, "t(`") {
                    u.prefixes
                        .insert(built.split("${").next().unwrap().to_owned());
                }
            }
            Some("html") => {
                for attr in [
                    "data-i18n=\"",
                    "data-i18n-title=\"",
                    "data-i18n-placeholder=\"",
                    "data-i18n-aria-label=\"",
                ] {
                    u.plain.extend(named_after(&src, attr));
                }
            }
            _ => {}
        }
    }
    u
}

#[test]
fn both_catalogs_have_the_same_texts_with_the_same_placeholders() {
    let (en, zh) = (catalog("en"), catalog("zh"));
    let only = |a: &Map<String, Value>, b: &Map<String, Value>| -> Vec<String> {
        a.keys().filter(|k| !b.contains_key(*k)).cloned().collect()
    };
    assert!(
        only(&en, &zh).is_empty(),
        "missing from lang_zh.json: {:?}",
        only(&en, &zh)
    );
    assert!(
        only(&zh, &en).is_empty(),
        "missing from lang_en.json: {:?}",
        only(&zh, &en)
    );
    for (key, e) in &en {
        let z = &zh[key];
        assert_eq!(
            e.is_object(),
            z.is_object(),
            "{key}: a plural in one language only"
        );
        assert_eq!(
            placeholders(e),
            placeholders(z),
            "{key}: placeholders differ"
        );
        if let Value::Object(forms) = e {
            assert!(
                forms.contains_key("other"),
                "{key}: a plural needs its `other` form"
            );
        }
        for v in [e, z] {
            let empty = match v {
                Value::String(s) => s.trim().is_empty(),
                Value::Object(f) => f
                    .values()
                    .any(|x| x.as_str().is_none_or(|s| s.trim().is_empty())),
                _ => true,
            };
            assert!(!empty, "{key}: an empty or malformed text: {v}");
        }
    }
}

#[test]
fn every_text_the_console_names_exists_and_every_text_is_used() {
    let en = catalog("en");
    let u = uses();
    for key in &u.plain {
        let v = en
            .get(key)
            .unwrap_or_else(|| panic!("t('{key}') has no text in lang_en.json"));
        assert!(v.is_string(), "{key} is a plural: call it with tn()");
    }
    for key in &u.counted {
        let v = en
            .get(key)
            .unwrap_or_else(|| panic!("tn('{key}') has no text in lang_en.json"));
        assert!(v.is_object(), "{key} is not a plural: call it with t()");
    }
    let unused: Vec<&String> = en
        .keys()
        .filter(|k| !u.plain.contains(*k) && !u.counted.contains(*k))
        .filter(|k| {
            !u.prefixes
                .iter()
                .any(|p| !p.is_empty() && k.starts_with(p.as_str()))
        })
        .collect();
    assert!(unused.is_empty(), "texts no code uses: {unused:?}");
    assert!(
        u.prefixes.contains("state."),
        "the state names are looked up by prefix"
    );
}

/// Words that stay as they are in a Chinese console: names of formats, protocols and keys.
const KEPT_IN_ZH: &[&str] = &[
    "Cohort",
    "JSON",
    "YAML",
    "CSV",
    "PDF",
    "Markdown",
    "MCP",
    "LLM",
    "MB",
    "KB",
    "Ctrl",
    "Enter",
    "ID",
    "id",
    "max_tokens",
    "ask_info",
    "URL",
    "USD",
    "OpenTelemetry",
    "Jaeger",
    "Tempo",
    "Langfuse",
];

#[test]
fn the_chinese_texts_hold_no_english_words() {
    let mut found = Vec::new();
    for (key, v) in catalog("zh") {
        let texts: Vec<String> = match &v {
            Value::String(s) => vec![s.clone()],
            Value::Object(f) => f
                .values()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect(),
            _ => vec![],
        };
        for text in texts {
            // Placeholders and `code` are names, not words.
            let mut plain = String::new();
            let mut skip = None;
            for c in text.chars() {
                match (skip, c) {
                    (None, '{') => skip = Some('}'),
                    (None, '`') => skip = Some('`'),
                    (Some(end), c) if c == end => skip = None,
                    (None, c) => plain.push(c),
                    _ => {}
                }
            }
            // A file name (`TEAM.yaml`) or a flag (`--data`) is a name too.
            let words = plain
                .split(|c: char| !(c.is_ascii_alphanumeric() || "_.-".contains(c)))
                .filter(|w| !w.starts_with('-'))
                .map(|w| w.trim_matches(['.', '-']))
                .filter(|w| !w.contains('.'));
            for word in words {
                if word.chars().filter(char::is_ascii_alphabetic).count() >= 2
                    && !KEPT_IN_ZH.contains(&word)
                {
                    found.push(format!("{key}: {word}"));
                }
            }
        }
    }
    assert!(found.is_empty(), "English words in lang_zh.json: {found:?}");
}
