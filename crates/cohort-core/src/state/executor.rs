//! What runs a step: one of the skills (listed once, in `for_each_skill`), or a tool (an MCP
//! server, by name).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The registry of skills, one line each: the `Skill` variant, its wire name, and its kind
/// under `skills/` (a value implementing `skills::SkillKind`: a unit struct, or a constant of a
/// kind several skills share; the path read from `skills/mod.rs`).
/// It hands the list to `$callback`, a macro that makes one thing of it: the [`Skill`] enum
/// here, the dispatch to each skill's kind in `skills`, the embedded prompt files in `prompt`.
/// Adding a skill is one line here, its folder `skills/<name>/` (declared in `skills/mod.rs`)
/// and its two prompt files (`prompts/en/skills/<name>.yaml`, `prompts/zh/…`); the compiler
/// names any of them missing.
macro_rules! for_each_skill {
    ($callback:ident) => {
        $callback! {
            /// Plans the agent's steps towards its goal in a stage (`<planned_step>`).
            Planning => "planning" => plan::PLANNING,
            /// Looks back on the work and plans corrective steps, or a `summary` when done.
            Reflection => "reflection" => plan::REFLECTION,
            /// Writes the agent's completion summary of a stage.
            Summary => "summary" => summary::Summary,
            /// Writes the next tool step's `instruction_content` (`<tool_instruction>`).
            InstructionGeneration => "instruction_generation" => instruction_generation::InstructionGeneration,
            /// Thinks about the stage's history (`<think>`).
            Think => "think" => think::THINK,
            /// Thinks without history (`<quick_think>`).
            QuickThink => "quick_think" => think::QUICK_THINK,
            /// Inserts the next steps, outside any stage's plan.
            Decision => "decision" => plan::DECISION,
            /// Sends a message, or asks for more information first (`<send_message>`).
            SendMessage => "send_message" => send_message::SendMessage,
            /// Digests a received message, optionally inserting a decision step.
            ProcessMessage => "process_message" => process_message::ProcessMessage,
            /// Manages tasks: add_task, add_stage, finish_stage, finish_task, retry_stage.
            TaskManager => "task_manager" => task_manager::TaskManager,
            /// Manages agents: init_new_agent, add_task_participant.
            AgentManager => "agent_manager" => agent_manager::AgentManager,
            /// Asks SyncState one of the ask_info queries and waits for the answer.
            AskInfo => "ask_info" => ask_info::AskInfo,
            /// After a tool step, decides whether and how to go on with the tool.
            ToolDecision => "tool_decision" => plan::TOOL_DECISION,
        }
    };
}
pub(crate) use for_each_skill;

/// Makes the [`Skill`] enum, [`Skill::ALL`] and [`Skill::name`] from the registry's lines.
macro_rules! skill_enum {
    ($($(#[$doc:meta])* $variant:ident => $name:literal => $kind:path,)*) => {
        /// The skills of SPEC §7, as the registry (`for_each_skill`) lists them.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum Skill {
            $($(#[$doc])* #[serde(rename = $name)] $variant,)*
        }

        impl Skill {
            /// How many skills there are.
            pub const COUNT: usize = [$($name),*].len();

            /// Every skill, in the SPEC's order.
            pub const ALL: [Skill; Skill::COUNT] = [$(Skill::$variant),*];

            /// The skill's wire name (`planning`, `quick_think`, …).
            pub fn name(self) -> &'static str {
                match self {
                    $(Skill::$variant => $name,)*
                }
            }
        }
    };
}

for_each_skill!(skill_enum);

impl fmt::Display for Skill {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Skill {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        Skill::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown skill `{s}`"))
    }
}

/// The step's `type` and `executor` together: `{"type": "skill", "executor": "planning"}` or
/// `{"type": "tool", "executor": "<mcp server name>"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "executor", rename_all = "snake_case")]
pub enum Executor {
    /// A skill step, run by one of the skills (`for_each_skill`).
    Skill(Skill),
    /// A tool step, run on the MCP server of this name.
    Tool(String),
}

impl Executor {
    /// The skill, for a skill step; `None` for a tool step.
    pub fn skill(&self) -> Option<Skill> {
        match self {
            Executor::Skill(s) => Some(*s),
            Executor::Tool(_) => None,
        }
    }

    /// The executor's name as the SPEC writes it: a skill name or a server name.
    pub fn name(&self) -> &str {
        match self {
            Executor::Skill(s) => s.name(),
            Executor::Tool(t) => t,
        }
    }
}

impl fmt::Display for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executor_serializes_as_type_and_executor_fields() {
        let e = Executor::Skill(Skill::QuickThink);
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type": "skill", "executor": "quick_think"})
        );
        let t: Executor =
            serde_json::from_value(serde_json::json!({"type": "tool", "executor": "workspace"}))
                .unwrap();
        assert_eq!(t, Executor::Tool("workspace".into()));
    }

    #[test]
    fn skill_names_round_trip() {
        for s in Skill::ALL {
            assert_eq!(s.name().parse::<Skill>().unwrap(), s);
            assert_eq!(
                serde_json::to_value(s).unwrap(),
                serde_json::json!(s.name())
            );
        }
        assert!("dance".parse::<Skill>().is_err());
    }

    /// The SPEC's skills come first, in its order (a skill added later goes after them);
    /// no name is given twice.
    #[test]
    fn the_registry_lists_the_specs_thirteen_wire_names_first_in_its_order() {
        let names: Vec<&str> = Skill::ALL.into_iter().map(Skill::name).collect();
        let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert_eq!(
            names[..13],
            [
                "planning",
                "reflection",
                "summary",
                "instruction_generation",
                "think",
                "quick_think",
                "decision",
                "send_message",
                "process_message",
                "task_manager",
                "agent_manager",
                "ask_info",
                "tool_decision",
            ]
        );
    }
}
