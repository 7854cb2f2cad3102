//! What one language's prompt files must hold: which files, which fields in each, and the rules
//! a field's text must follow (heading levels that fit where it is placed, and the answer tags
//! and names the parser relies on, so a translation cannot silently break the contract).

use super::markdown::{heading_level, headings};
use crate::state::Skill;
use std::collections::BTreeMap;

macro_rules! text_group {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, { $($(#[$fdoc:meta])* $field:ident),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: String,)*
        }

        impl $name {
            /// The fields' keys in `base.yaml` (`<group>.<field>`), which a language's file must
            /// all have.
            pub const KEYS: &'static [&'static str] =
                &[$(concat!($prefix, ".", stringify!($field))),*];

            /// Takes this group's fields out of a validated file (missing ones stay empty).
            pub fn take(fields: &mut BTreeMap<String, String>) -> Self {
                $name {
                    $($field: fields
                        .remove(concat!($prefix, ".", stringify!($field)))
                        .unwrap_or_default(),)*
                }
            }
        }
    };
}

text_group!(
    /// Section headings of an assembled prompt (`base.yaml`, `headings.*`), without the hashes.
    Headings, "headings", {
        /// Above the role section (role info and permissions).
        role,
        /// Above the agent's id, name, role and profile.
        role_info,
        /// Above the skills and tools the agent may plan.
        permissions,
        /// Above the agent's skills, each with its description.
        skills,
        /// Above the agent's MCP servers, each with its description.
        tools,
        /// Above the current step section.
        current_step,
        /// Above the skill's rules and return format, followed by the skill's name.
        skill_at_hand,
        /// Above a step's intention.
        intention,
        /// Above a step's text content.
        content,
        /// Above the skill's prompt (what to do in the step), and a tool loop's instructions.
        rules,
        /// Above the skill's return format (the answer tag and shape the parser expects).
        return_format,
        /// instruction_generation: the tool step it writes the call for.
        tool_step,
        /// instruction_generation: the heading above the target server's description.
        server,
        /// Above the guide to calling MCP servers (instruction_generation and tool_decision).
        mcp_base,
        /// Above the stage's executed steps.
        history,
        /// Above the stage's steps still to run.
        history_pending,
        /// Above tool_decision's history: the tool's call chain.
        tool_history,
        /// Above the results of the steps the current step depends on.
        depends_on,
        /// Above the rules for managing persistent memory (in the system message).
        memory,
        /// Above the agent's memory entries.
        memory_content,
    }
);

text_group!(
    /// Short fixed phrases of an assembled prompt (`base.yaml`, `phrases.*`).
    Phrases, "phrases", {
        /// Shown for an empty list or text.
        none,
        /// Shown for an MCP server that has no description.
        no_description,
        /// The label of the agent's id in its role info.
        agent_id,
        /// Follows the agent's id: other agents address it by this id.
        own_id_note,
        /// The label of the agent's name in its role info.
        name,
        /// The label of the agent's role in its role info.
        role,
        /// The label of the agent's profile in its role info.
        profile,
        /// Introduces the stage history: the agent's other steps in this task and stage.
        history_note,
        /// Introduces the tool's call chain in tool_decision's history.
        tool_history_note,
        /// Stands before the shown executed steps when older ones are left out.
        history_omitted,
        /// Stands after the shown steps still to run when more are queued.
        pending_omitted,
        /// Introduces the target server's known capabilities (instruction_generation).
        capabilities_note,
        /// Said when the endpoint constrains the answer to a JSON schema: the answer tags become
        /// the keys of one JSON object.
        json_answer,
        /// In the system part of an agent whose model calls tools natively: how to plan them.
        native_tools_note,
        /// What a native tool loop step asks of the model.
        tool_loop,
        /// How the model judges one tool call's risk (`tool_approval.judge_with_llm`).
        risk_judge,
        /// How the model judges whether a tool's refusal is about the call's arguments
        /// (`Repair::RefusalJudged`).
        refusal_judge,
        /// How the model writes a refused call's arguments anew (`Repair::ArgumentsReasked`).
        correct_arguments,
        /// Stands before the summary of older steps left out of a history.
        history_summary_note,
        /// How the model summarizes older steps of its stage (`step::history_summary`).
        summarize_history,
        /// Says what the results of the steps the current step depends on are for.
        depends_note,
    }
);

/// One file of a language's prompt set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptFile {
    Base,
    Mcp,
    /// The runtime's own texts (`texts.yaml`, see [`super::Texts`]).
    Texts,
    Skill(Skill),
}

impl PromptFile {
    /// Every file, in the order problems are reported.
    pub fn all() -> impl Iterator<Item = PromptFile> {
        [PromptFile::Base, PromptFile::Mcp, PromptFile::Texts]
            .into_iter()
            .chain(Skill::ALL.into_iter().map(PromptFile::Skill))
    }

    /// The path inside a language folder.
    pub fn rel(self) -> String {
        match self {
            PromptFile::Base => "base.yaml".into(),
            PromptFile::Mcp => "mcp.yaml".into(),
            PromptFile::Texts => "texts.yaml".into(),
            PromptFile::Skill(s) => format!("skills/{}.yaml", s.name()),
        }
    }

    /// The fields Cohort reads from this file (dotted paths for nested ones).
    pub fn keys(self) -> Vec<&'static str> {
        match self {
            PromptFile::Base => {
                let mut k = vec!["system_prompt", "persistent_memory_prompt"];
                k.extend(Headings::KEYS);
                k.extend(Phrases::KEYS);
                k
            }
            PromptFile::Mcp => vec!["mcp_base_prompt"],
            PromptFile::Texts => super::Texts::KEYS.iter().map(|(k, _)| *k).collect(),
            PromptFile::Skill(s) if s.kind().with_tools() => {
                vec!["description", "skill_prompt", "return_format", "with_tools"]
            }
            PromptFile::Skill(_) => vec!["description", "skill_prompt", "return_format"],
        }
    }

    /// What is wrong with one present, non-empty field (nothing when it is fine).
    pub fn check_field(self, key: &str, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        match (self, key) {
            (PromptFile::Base, "system_prompt") => {
                let first = text
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or_default();
                if heading_level(first) != Some(1) {
                    out.push("must start with a level-1 heading (`# …`)".into());
                }
                if headings(text).iter().filter(|(l, _, _)| *l == 1).count() > 1 {
                    out.push("may have only one level-1 heading, its first line".into());
                }
            }
            (PromptFile::Base, k) if k.starts_with("headings.") || k.starts_with("phrases.") => {
                if text.trim().contains('\n') {
                    out.push("must be a single line".into());
                }
                if k.starts_with("headings.") && text.trim_start().starts_with('#') {
                    out.push("is written without the leading `#`".into());
                }
            }
            (PromptFile::Texts, k) => out.extend(super::Texts::problems(k, text)),
            (PromptFile::Skill(_), "description") => {
                if text.lines().any(|l| heading_level(l).is_some()) {
                    out.push("must be one paragraph without headings".into());
                }
                if text.trim().contains("\n\n") {
                    out.push("must be one paragraph (no blank line)".into());
                }
            }
            _ => {
                // Every other text sits below a level-2 heading of the assembled prompt.
                if headings(text).iter().any(|(l, _, _)| *l < 3) {
                    out.push("may only use headings of level 3 (`###`) or deeper".into());
                }
            }
        }
        for word in required_words(self, key) {
            if !text.contains(word) {
                out.push(format!(
                    "must mention `{word}` (part of the answer contract)"
                ));
            }
        }
        out
    }

    /// Words that must appear in the skill_prompt or the return_format of a skill file (names
    /// of actions, queries and fields the parser knows).
    pub fn contract_words(self) -> &'static [&'static str] {
        let PromptFile::Skill(skill) = self else {
            return &[];
        };
        skill.kind().contract_words()
    }
}

/// Markers one field must contain by itself: the answer tags in a skill's return format, the
/// memory tag, the instruction shapes of the MCP prompt.
fn required_words(file: PromptFile, key: &str) -> Vec<&'static str> {
    let words: &[&str] = match (file, key) {
        (PromptFile::Base, "persistent_memory_prompt") => {
            &["<persistent_memory>", "\"add\"", "\"delete\""]
        }
        (PromptFile::Mcp, "mcp_base_prompt") => &[
            "<tool_instruction>",
            "get_description",
            "tool_name",
            "resource_name",
            "prompt_name",
            "uri",
        ],
        (PromptFile::Skill(skill), "return_format") => {
            let mut tags = skill.kind().answer_tags().to_vec();
            tags.push("<persistent_memory>");
            return tags;
        }
        _ => &[],
    };
    words.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_is_listed_once() {
        let files: Vec<_> = PromptFile::all().map(PromptFile::rel).collect();
        assert_eq!(files.len(), 3 + Skill::COUNT);
        assert!(files.contains(&"skills/tool_decision.yaml".to_string()));
        assert!(files.contains(&"texts.yaml".to_string()));
        let mut dedup = files.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), files.len());
    }

    #[test]
    fn field_rules_catch_broken_structure_and_contract() {
        let think = PromptFile::Skill(Skill::Think);
        assert!(
            think
                .check_field("return_format", "<think>x</think> <persistent_memory>")
                .is_empty()
        );
        assert_eq!(
            think
                .check_field("return_format", "<thought>x</thought> <persistent_memory>")
                .len(),
            1
        );
        assert_eq!(think.check_field("skill_prompt", "## Big\ntext").len(), 1);
        assert!(think.check_field("skill_prompt", "### ok\ntext").is_empty());
        assert_eq!(
            PromptFile::Base
                .check_field("system_prompt", "no heading")
                .len(),
            1
        );
        assert_eq!(
            PromptFile::Base
                .check_field("system_prompt", "# A\n# B")
                .len(),
            1
        );
        assert_eq!(
            PromptFile::Base
                .check_field("headings.role", "# Role")
                .len(),
            1
        );
    }
}
