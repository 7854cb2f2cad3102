//! A `scripted` LLM's script (see `llm::scripted`): replies by agent id or template name and
//! skill, read and checked with the team file (an unknown agent, skill or placeholder names its
//! field).

use crate::state::Skill;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

/// One reply in a script: a plain string, or a map with `text` and optionally `delay_ms` or `when`.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
#[serde(expecting = "must be a text, or a mapping with `text` (and `delay_ms` or `when`)")]
pub enum Entry {
    /// A reply used as it is, at once.
    Text(String),
    /// A reply with a pause before it (`delay_ms`) or a condition (`when`).
    Timed {
        /// The reply; may name `{{task_id}}`, `{{stage_id}}`, `{{step_id}}`, `{{agent_id}}`.
        text: String,
        /// A pause before the answer, its text written out over it as if streamed (default 0).
        #[serde(default)]
        delay_ms: u64,
        /// Makes the entry a rule: never used up, it answers every step whose intention or text
        /// contains this string.
        #[serde(default)]
        when: Option<String>,
    },
}

impl Entry {
    /// The reply's text, placeholders not filled in yet.
    pub fn text(&self) -> &str {
        match self {
            Entry::Text(t) | Entry::Timed { text: t, .. } => t,
        }
    }
    /// How long the answer takes to come (`delay_ms`; none for a plain string).
    pub fn delay(&self) -> Duration {
        match self {
            Entry::Text(_) => Duration::ZERO,
            Entry::Timed { delay_ms, .. } => Duration::from_millis(*delay_ms),
        }
    }
    /// The rule's condition, if the entry is a rule.
    pub fn when(&self) -> Option<&str> {
        match self {
            Entry::Timed { when: Some(w), .. } => Some(w),
            _ => None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(expecting = "a script: a mapping with `replies`")]
struct ScriptFile {
    replies: BTreeMap<String, BTreeMap<String, Vec<Entry>>>,
}

/// Model calls that are not a skill's step but can be scripted like one: the judgement of a
/// tool call's risk (`tool_approval.judge_with_llm`), the summary of older history, and the
/// judgement of a tool's refusal and the arguments written anew after one.
pub const OTHER_CALLS: &[&str] = &[
    RISK_JUDGE,
    SUMMARIZE_HISTORY,
    REFUSAL_JUDGE,
    CORRECT_ARGUMENTS,
];

/// The `skill` of a tool call's risk judgement.
pub const RISK_JUDGE: &str = "risk_judge";

/// The `skill` of the judgement of a tool's refusal (`Repair::RefusalJudged`).
pub const REFUSAL_JUDGE: &str = "refusal_judge";

/// The `skill` of a refused call's arguments written anew (`Repair::ArgumentsReasked`).
pub const CORRECT_ARGUMENTS: &str = "correct_arguments";

/// The `skill` of the summary of a stage's older history (`step::history_summary`).
pub const SUMMARIZE_HISTORY: &str = "summarize_history";

/// A loaded script: `agent id or template name → skill → replies in order`.
#[derive(Clone, Debug)]
pub struct Script {
    /// `replies:` as written: agent id or template name → skill (or one of [`OTHER_CALLS`]) →
    /// entries.
    pub replies: BTreeMap<String, BTreeMap<String, Vec<Entry>>>,
    /// The same, each list split once into its rules and the replies taken in order.
    pub split: BTreeMap<String, BTreeMap<String, Replies>>,
}

/// One key's entries for one skill, split by kind.
#[derive(Clone, Debug, Default)]
pub struct Replies {
    /// Entries with `when`: the first whose string the step's text contains answers it, and stays.
    pub rules: Vec<Entry>,
    /// Entries without `when`, used up one per call in order; when they run out, the step fails.
    pub in_order: Vec<Entry>,
}

const PLACEHOLDERS: [&str; 4] = ["task_id", "stage_id", "step_id", "agent_id"];

impl Script {
    /// The script in `path`; an error names the file.
    pub fn load(path: &Path) -> Result<Script, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// A script from its YAML text (only `replies:`; any other key is refused).
    pub fn parse(text: &str) -> Result<Script, String> {
        let read = super::yaml::read::<ScriptFile>(text);
        let f = match read.value {
            Some(f) if read.slips.is_empty() => f,
            _ => {
                let said: Vec<String> = read
                    .slips
                    .iter()
                    .map(|s| format!("{}: {}", s.field, s.message))
                    .collect();
                return Err(said.join("; "));
            }
        };
        let split = f
            .replies
            .iter()
            .map(|(key, skills)| {
                let skills = skills
                    .iter()
                    .map(|(skill, entries)| {
                        let (rules, in_order) =
                            entries.iter().cloned().partition(|e| e.when().is_some());
                        (skill.clone(), Replies { rules, in_order })
                    })
                    .collect();
                (key.clone(), skills)
            })
            .collect();
        Ok(Script {
            replies: f.replies,
            split,
        })
    }

    /// Problems as (field, message): replies keyed by a name that is neither one of `keys` (the
    /// team's agent ids and template names), unknown skills, and placeholders that do not exist.
    pub fn check_against(&self, keys: &[String]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (agent, skills) in &self.replies {
            if !keys.iter().any(|a| a == agent) {
                out.push((
                    format!("replies.{agent}"),
                    format!("the team has no agent or agent template `{agent}`"),
                ));
            }
            for (skill, entries) in skills {
                if skill.parse::<Skill>().is_err() && !OTHER_CALLS.contains(&skill.as_str()) {
                    out.push((
                        format!("replies.{agent}.{skill}"),
                        format!("unknown skill `{skill}`"),
                    ));
                }
                for (i, e) in entries.iter().enumerate() {
                    if let Err(bad) = render(e.text(), &HashMap::new(), true) {
                        out.push((format!("replies.{agent}.{skill}[{i}]"), bad));
                    }
                }
            }
        }
        out
    }
}

/// Replaces `{{name}}` placeholders. With `dry`, only checks that every name is known.
pub fn render(text: &str, vars: &HashMap<&str, String>, dry: bool) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let name = after[..end].trim();
        if !PLACEHOLDERS.contains(&name) {
            return Err(format!(
                "unknown placeholder {{{{{name}}}}} (known: {})",
                PLACEHOLDERS.join(", ")
            ));
        }
        if !dry {
            out.push_str(&vars[name]);
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}
