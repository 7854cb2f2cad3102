//! Loading prompt sets: the built-in copies embedded at compile time, or a prompts folder on
//! disk; and `check_prompt_dir`, which reports every problem of both languages at once.

use super::schema::{Headings, Phrases, PromptFile};
use super::{Language, Problem, PromptError, SkillPrompt};
use crate::state::Skill;
use crate::texts::Texts;
use serde_yaml::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One language's prompts, complete and validated: every skill has its three texts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptSet {
    language: Language,
    system_prompt: String,
    persistent_memory_prompt: String,
    mcp_base_prompt: String,
    headings: Headings,
    phrases: Phrases,
    texts: std::sync::Arc<Texts>,
    skills: BTreeMap<Skill, SkillPrompt>,
}

impl PromptSet {
    /// The prompts shipped with Cohort (`prompts/` embedded in the binary, so it runs from any
    /// directory). Their validity is pinned by a unit test.
    pub fn builtin(lang: Language) -> PromptSet {
        match load_with(Path::new("prompts"), lang, &read_embedded) {
            Ok(set) => set,
            Err(e) => panic!("the built-in prompts are invalid: {e}"),
        }
    }

    /// Loads one language from a prompts folder holding `en/` and `zh/`.
    pub fn load(dir: &Path, lang: Language) -> Result<PromptSet, PromptError> {
        load_with(dir, lang, &|rel| read_disk(dir, rel))
    }

    /// The language the set is written in.
    pub fn language(&self) -> Language {
        self.language
    }

    /// The three texts (and tool planning text) of skill `s`; every skill has them.
    pub fn skill(&self, s: Skill) -> &SkillPrompt {
        // Complete by construction: `from_fields` inserts every skill.
        &self.skills[&s]
    }

    /// The system prompt, starting with its level-1 heading.
    pub fn system_prompt(&self) -> &str {
        &self.system_prompt
    }

    /// How an agent manages its persistent memory: shown above the entries in every prompt.
    pub fn persistent_memory_prompt(&self) -> &str {
        &self.persistent_memory_prompt
    }

    /// How MCP servers are called: shown to instruction_generation and tool_decision steps.
    pub fn mcp_base_prompt(&self) -> &str {
        &self.mcp_base_prompt
    }

    /// The section headings prompts are assembled with.
    pub fn headings(&self) -> &Headings {
        &self.headings
    }

    /// The short fixed phrases prompts are assembled with.
    pub fn phrases(&self) -> &Phrases {
        &self.phrases
    }

    /// The runtime's own texts in this language (notices, the steps it adds, ...).
    pub fn texts(&self) -> &std::sync::Arc<Texts> {
        &self.texts
    }

    /// Builds the set from files that passed validation.
    fn from_fields(
        language: Language,
        mut files: Vec<(PromptFile, BTreeMap<String, String>)>,
    ) -> PromptSet {
        let mut take = |file: PromptFile| -> BTreeMap<String, String> {
            files
                .iter_mut()
                .find(|(f, _)| *f == file)
                .map(|(_, m)| std::mem::take(m))
                .unwrap_or_default()
        };
        let mut base = take(PromptFile::Base);
        let mut mcp = take(PromptFile::Mcp);
        let texts = std::sync::Arc::new(Texts::take(&mut take(PromptFile::Texts)));
        let skills = Skill::ALL
            .into_iter()
            .map(|s| {
                let mut m = take(PromptFile::Skill(s));
                let mut get = |k: &str| m.remove(k).unwrap_or_default();
                let p = SkillPrompt {
                    description: get("description"),
                    skill_prompt: get("skill_prompt"),
                    return_format: get("return_format"),
                    with_tools: get("with_tools"),
                };
                (s, p)
            })
            .collect();
        PromptSet {
            language,
            system_prompt: base.remove("system_prompt").unwrap_or_default(),
            persistent_memory_prompt: base.remove("persistent_memory_prompt").unwrap_or_default(),
            headings: Headings::take(&mut base),
            phrases: Phrases::take(&mut base),
            texts,
            mcp_base_prompt: mcp.remove("mcp_base_prompt").unwrap_or_default(),
            skills,
        }
    }
}

/// Every problem in a prompts folder, both languages: missing files, YAML syntax errors (with
/// their line), missing, empty or malformed fields, and fields that only one language has.
pub fn check_prompt_dir(dir: &Path) -> Vec<Problem> {
    let read = |rel: &str| read_disk(dir, rel);
    let mut problems = Vec::new();
    for file in PromptFile::all() {
        let mut parsed = Vec::new();
        for lang in Language::ALL {
            let (flat, mut p) = parse_file(dir, lang, file, &read);
            problems.append(&mut p);
            parsed.push((lang, flat));
        }
        for (lang, flat) in &parsed {
            let Some(flat) = flat else { continue };
            let path = path_of(dir, *lang, file);
            problems.extend(check_known_fields(&path, file, flat).1);
            let (other_lang, other) = parsed
                .iter()
                .find(|(l, _)| l != lang)
                .expect("two languages");
            for key in flat.keys().filter(|k| !file.keys().contains(&k.as_str())) {
                let message = match other {
                    Some(o) if !o.contains_key(key) => {
                        format!("present only in {lang}; {other_lang} has no such field")
                    }
                    _ => "unknown field; Cohort does not read it".to_owned(),
                };
                problems.push(problem(&path, key, message));
            }
        }
    }
    problems
}

/// What reading one file gave.
enum Read {
    Text(String),
    Missing,
    Failed(String),
}

/// A file's fields by dotted path: text, or the kind of non-text value found there.
type Flat = BTreeMap<String, Result<String, &'static str>>;

const WHOLE_FILE: &str = "(file)";

fn load_with(
    root: &Path,
    lang: Language,
    read: &dyn Fn(&str) -> Read,
) -> Result<PromptSet, PromptError> {
    let mut problems = Vec::new();
    let mut files = Vec::new();
    for file in PromptFile::all() {
        let (flat, mut p) = parse_file(root, lang, file, read);
        problems.append(&mut p);
        let Some(flat) = flat else { continue };
        let path = path_of(root, lang, file);
        let (texts, mut p) = check_known_fields(&path, file, &flat);
        problems.append(&mut p);
        for key in flat.keys().filter(|k| !file.keys().contains(&k.as_str())) {
            problems.push(problem(
                &path,
                key,
                "unknown field; Cohort does not read it",
            ));
        }
        files.push((file, texts));
    }
    if problems.is_empty() {
        Ok(PromptSet::from_fields(lang, files))
    } else {
        Err(PromptError::Invalid(problems))
    }
}

fn path_of(root: &Path, lang: Language, file: PromptFile) -> PathBuf {
    root.join(lang.code()).join(file.rel())
}

fn problem(file: &Path, field: &str, message: impl Into<String>) -> Problem {
    Problem {
        file: file.to_path_buf(),
        field: field.to_owned(),
        message: message.into(),
    }
}

/// Reads and parses one file; None (with a problem) when it is missing or not YAML.
fn parse_file(
    root: &Path,
    lang: Language,
    file: PromptFile,
    read: &dyn Fn(&str) -> Read,
) -> (Option<Flat>, Vec<Problem>) {
    let path = path_of(root, lang, file);
    let text = match read(&format!("{}/{}", lang.code(), file.rel())) {
        Read::Text(t) => t,
        Read::Missing => return (None, vec![problem(&path, WHOLE_FILE, "file is missing")]),
        Read::Failed(e) => {
            return (
                None,
                vec![problem(&path, WHOLE_FILE, format!("cannot be read: {e}"))],
            );
        }
    };
    let value: Value = match serde_yaml::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            let field = e
                .location()
                .map_or_else(|| WHOLE_FILE.to_owned(), |l| format!("line {}", l.line()));
            return (
                None,
                vec![problem(&path, &field, format!("YAML syntax error: {e}"))],
            );
        }
    };
    match value {
        Value::Null => (Some(Flat::new()), Vec::new()),
        Value::Mapping(_) => {
            let mut flat = Flat::new();
            flatten("", &value, &mut flat);
            (Some(flat), Vec::new())
        }
        _ => (
            None,
            vec![problem(&path, WHOLE_FILE, "must be a mapping of fields")],
        ),
    }
}

fn flatten(prefix: &str, value: &Value, out: &mut Flat) {
    match value {
        Value::Mapping(m) => {
            for (k, v) in m {
                let key = match k {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => "?".to_owned(),
                };
                let path = if prefix.is_empty() {
                    key
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&path, v, out);
            }
        }
        Value::String(s) => {
            out.insert(prefix.to_owned(), Ok(s.trim().to_owned()));
        }
        Value::Null => {
            out.insert(prefix.to_owned(), Ok(String::new()));
        }
        Value::Number(n) => {
            out.insert(prefix.to_owned(), Ok(n.to_string()));
        }
        Value::Bool(b) => {
            out.insert(prefix.to_owned(), Ok(b.to_string()));
        }
        Value::Sequence(_) => {
            out.insert(prefix.to_owned(), Err("a list"));
        }
        Value::Tagged(_) => {
            out.insert(prefix.to_owned(), Err("a tagged value"));
        }
    }
}

/// Checks the fields Cohort reads; returns their texts and the problems found.
fn check_known_fields(
    path: &Path,
    file: PromptFile,
    flat: &Flat,
) -> (BTreeMap<String, String>, Vec<Problem>) {
    let mut texts = BTreeMap::new();
    let mut problems = Vec::new();
    for key in file.keys() {
        match flat.get(key) {
            None => problems.push(problem(path, key, "missing")),
            Some(Err(kind)) => {
                problems.push(problem(path, key, format!("must be text, found {kind}")))
            }
            Some(Ok(t)) if t.is_empty() => problems.push(problem(path, key, "empty")),
            Some(Ok(t)) => {
                problems.extend(
                    file.check_field(key, t)
                        .into_iter()
                        .map(|m| problem(path, key, m)),
                );
                texts.insert(key.to_owned(), t.clone());
            }
        }
    }
    let both = format!(
        "{}\n{}",
        texts.get("skill_prompt").map_or("", String::as_str),
        texts.get("return_format").map_or("", String::as_str)
    );
    for word in file.contract_words() {
        if !both.contains(word) {
            let message = format!(
                "neither skill_prompt nor return_format mentions `{word}` (part of the answer contract)"
            );
            problems.push(problem(path, "return_format", message));
        }
    }
    (texts, problems)
}

fn read_disk(root: &Path, rel: &str) -> Read {
    match std::fs::read_to_string(root.join(rel)) {
        Ok(t) => Read::Text(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Read::Missing,
        Err(e) => Read::Failed(e.to_string()),
    }
}

fn read_embedded(rel: &str) -> Read {
    EMBEDDED
        .iter()
        .flat_map(|files| files.iter())
        .find(|(p, _)| *p == rel)
        .map_or(Read::Missing, |(_, t)| Read::Text((*t).to_owned()))
}

/// The shipped prompt file at `$rel` inside `prompts/`, by its path and text.
macro_rules! embed {
    ($rel:expr) => {
        (
            $rel,
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../prompts/", $rel)),
        )
    };
}

/// The shipped prompt files, by path inside `prompts/`: the base files here, each skill's
/// two from the registry (`state::for_each_skill`), so a skill without them does not build.
const EMBEDDED: &[&[(&str, &str)]] = &[
    &[
        embed!("en/base.yaml"),
        embed!("en/mcp.yaml"),
        embed!("en/texts.yaml"),
        embed!("zh/base.yaml"),
        embed!("zh/mcp.yaml"),
        embed!("zh/texts.yaml"),
    ],
    SKILL_FILES,
];

/// Makes `SKILL_FILES`, each skill's English and Chinese prompt file, from the registry.
macro_rules! skill_files {
    ($($(#[$doc:meta])* $variant:ident => $name:literal => $kind:path,)*) => {
        /// Each skill's prompt files, English and Chinese.
        const SKILL_FILES: &[(&str, &str)] = &[
            $(
                embed!(concat!("en/skills/", $name, ".yaml")),
                embed!(concat!("zh/skills/", $name, ".yaml")),
            )*
        ];
    };
}

crate::state::for_each_skill!(skill_files);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn manifest_prompts() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../prompts")
    }

    #[test]
    fn both_builtin_sets_load_with_every_skill() {
        for lang in Language::ALL {
            let set = PromptSet::builtin(lang);
            assert_eq!(set.language(), lang);
            for s in Skill::ALL {
                assert!(!set.skill(s).return_format.is_empty(), "{lang} {s}");
            }
        }
        assert_ne!(
            PromptSet::builtin(Language::En).system_prompt(),
            PromptSet::builtin(Language::Zh).system_prompt()
        );
    }

    #[test]
    fn every_shipped_file_is_embedded_and_the_folder_has_no_problems() {
        for lang in Language::ALL {
            for file in PromptFile::all() {
                let rel = format!("{}/{}", lang.code(), file.rel());
                assert!(
                    EMBEDDED
                        .iter()
                        .flat_map(|f| f.iter())
                        .any(|(p, _)| *p == rel),
                    "{rel} is not embedded"
                );
            }
        }
        assert_eq!(check_prompt_dir(&manifest_prompts()), Vec::<Problem>::new());
        assert_eq!(
            PromptSet::load(&manifest_prompts(), Language::Zh).unwrap(),
            PromptSet::builtin(Language::Zh)
        );
    }

    #[test]
    fn en_and_zh_have_identical_key_sets() {
        for file in PromptFile::all() {
            let keys = |lang: Language| -> BTreeSet<String> {
                let (flat, problems) = parse_file(Path::new("prompts"), lang, file, &read_embedded);
                assert!(problems.is_empty(), "{problems:?}");
                flat.unwrap().into_keys().collect()
            };
            let en = keys(Language::En);
            assert_eq!(en, keys(Language::Zh), "{}", file.rel());
            assert_eq!(
                en,
                file.keys().into_iter().map(String::from).collect(),
                "{}",
                file.rel()
            );
        }
    }

    /// A scratch copy of the shipped prompts folder, removed on drop.
    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy_dir(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }

    fn edit_yaml(path: &Path, edit: impl FnOnce(&mut serde_yaml::Mapping)) {
        let mut v: Value = serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        edit(v.as_mapping_mut().unwrap());
        std::fs::write(path, serde_yaml::to_string(&v).unwrap()).unwrap();
    }

    #[test]
    fn check_prompt_dir_reports_every_problem_with_file_and_field() {
        let dir = std::env::temp_dir().join(format!("cohort-prompt-check-{}", std::process::id()));
        let _cleanup = Scratch(dir.clone());
        copy_dir(&manifest_prompts(), &dir);

        edit_yaml(&dir.join("en/skills/think.yaml"), |m| {
            m.remove("skill_prompt");
        });
        let mcp = dir.join("zh/mcp.yaml");
        let broken = std::fs::read_to_string(&mcp).unwrap() + "\nextra: [unclosed\n";
        std::fs::write(&mcp, broken).unwrap();
        edit_yaml(&dir.join("zh/base.yaml"), |m| {
            let headings = m.get_mut("headings").unwrap().as_mapping_mut().unwrap();
            headings.insert("only_in_zh".into(), "仅中文".into());
        });
        std::fs::remove_file(dir.join("zh/skills/decision.yaml")).unwrap();
        edit_yaml(&dir.join("en/skills/ask_info.yaml"), |m| {
            m.insert("return_format".into(), "<ask_info>{}</ask_info>".into());
        });

        let problems = check_prompt_dir(&dir);
        let find = |file: &str, field: &str| {
            problems
                .iter()
                .find(|p| p.file.ends_with(file) && p.field == field)
                .unwrap_or_else(|| {
                    panic!("no problem for {file}: {field} in {problems:#?}");
                })
        };
        assert_eq!(
            find("en/skills/think.yaml", "skill_prompt").message,
            "missing"
        );
        let syntax = problems
            .iter()
            .find(|p| p.file.ends_with("zh/mcp.yaml"))
            .unwrap();
        assert!(syntax.field.starts_with("line "), "{syntax}");
        assert!(syntax.message.contains("YAML syntax error"), "{syntax}");
        assert!(
            find("zh/base.yaml", "headings.only_in_zh")
                .message
                .contains("only in zh")
        );
        assert_eq!(
            find("zh/skills/decision.yaml", "(file)").message,
            "file is missing"
        );
        assert!(
            find("en/skills/ask_info.yaml", "return_format")
                .message
                .contains("<persistent_memory>")
        );
        assert_eq!(problems.len(), 5, "{problems:#?}");
        let shown = find("en/skills/think.yaml", "skill_prompt").to_string();
        assert_eq!(
            shown,
            format!(
                "{}: skill_prompt: missing",
                dir.join("en/skills/think.yaml").display()
            )
        );

        // Loading one language reports that language's problems only.
        let err = PromptSet::load(&dir, Language::En).unwrap_err();
        let PromptError::Invalid(en_problems) = &err;
        assert!(
            en_problems
                .iter()
                .all(|p| p.file.starts_with(dir.join("en")))
        );
        assert!(
            err.to_string()
                .contains("think.yaml: skill_prompt: missing"),
            "{err}"
        );
        assert!(PromptSet::load(&dir, Language::Zh).is_err());
    }
}
