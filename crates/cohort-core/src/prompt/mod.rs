//! Prompt sets and prompt assembly: the YAML texts under `prompts/<lang>/` (loaded once at
//! start, from the built-in copies or a folder) and `build_prompt`, which assembles a skill's
//! prompt from an agent's state. Pure apart from the loaders: no clock, no other I/O.
//!
//! Every skill prompt has SPEC §7's sections, ordered from the most to the least stable for an
//! endpoint's prompt cache (see `assemble`): system → role & permissions → memory rules, then
//! the stage's history (for the skills that see one), the memory's entries, the pending steps
//! and the current step last.
//!
//! - `set`: [`PromptSet`] (builtin / load) and [`check_prompt_dir`].
//! - `schema`: the files and fields of a language, and the rules their texts must follow.
//! - `assemble`: [`build_prompt`] and [`PromptContext`].
//! - `entry`: a history entry's result as one compact line.
//! - `markdown`: heading and fence helpers that keep embedded data from breaking sections.
//! - `tokens`: a prompt's size in the model's tokens, for the context budget and usage.

mod assemble;
mod entry;
pub mod markdown;
mod schema;
mod set;
pub mod tokens;

#[cfg(test)]
mod assemble_tests;
#[cfg(test)]
mod budget_tests;

pub use crate::texts::{Language, Texts, UnknownLanguage};
pub use assemble::stage_history;
pub use assemble::{Prompt, PromptContext, build_prompt, build_tool_loop_prompt};
pub use schema::{Headings, Phrases};
pub use set::{PromptSet, check_prompt_dir};

/// The three texts of one skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillPrompt {
    /// One paragraph, shown in the skill list of every agent that has the skill: when to use it.
    pub description: String,
    /// What to do in a step of this skill, and its rules.
    pub skill_prompt: String,
    /// The exact answer tag and JSON shape the parser expects.
    pub return_format: String,
    /// How tool steps are planned, shown only to agents that have tools (planning and
    /// reflection; empty for the other skills). A small model copies what its prompt shows, so
    /// an agent without tools is never shown a tool step to copy.
    pub with_tools: String,
}

pub use crate::problem::Problem;

/// Why a prompt language could not be chosen or its prompt files loaded.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// Every problem found in the files of the language being loaded.
    #[error("invalid prompt files:{}", list(.0))]
    Invalid(Vec<Problem>),
}

fn list(problems: &[Problem]) -> String {
    problems.iter().map(|p| format!("\n  {p}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_parses_and_serializes_by_code() {
        assert_eq!("zh".parse::<Language>().unwrap(), Language::Zh);
        assert_eq!(" EN ".parse::<Language>().unwrap(), Language::En);
        assert!(matches!("fr".parse::<Language>(), Err(UnknownLanguage(s)) if s == "fr"));
        assert_eq!(
            serde_json::to_value(Language::Zh).unwrap(),
            serde_json::json!("zh")
        );
        let l: Language = serde_json::from_value(serde_json::json!("en")).unwrap();
        assert_eq!(l, Language::En);
    }

    #[test]
    fn problems_display_file_field_and_message() {
        let p = Problem {
            file: std::path::PathBuf::from("prompts/zh/skills/think.yaml"),
            field: "skill_prompt".into(),
            message: "missing".into(),
        };
        assert_eq!(
            p.to_string(),
            "prompts/zh/skills/think.yaml: skill_prompt: missing"
        );
        let e = PromptError::Invalid(vec![p]);
        assert_eq!(
            e.to_string(),
            "invalid prompt files:\n  prompts/zh/skills/think.yaml: skill_prompt: missing"
        );
    }
}
