//! What runs a step: one of the thirteen skills, or a tool (an MCP server, by name).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The thirteen skills of SPEC §7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Skill {
    Planning,
    Reflection,
    Summary,
    InstructionGeneration,
    Think,
    QuickThink,
    Decision,
    SendMessage,
    ProcessMessage,
    TaskManager,
    AgentManager,
    AskInfo,
    ToolDecision,
}

impl Skill {
    pub const ALL: [Skill; 13] = [
        Skill::Planning,
        Skill::Reflection,
        Skill::Summary,
        Skill::InstructionGeneration,
        Skill::Think,
        Skill::QuickThink,
        Skill::Decision,
        Skill::SendMessage,
        Skill::ProcessMessage,
        Skill::TaskManager,
        Skill::AgentManager,
        Skill::AskInfo,
        Skill::ToolDecision,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Skill::Planning => "planning",
            Skill::Reflection => "reflection",
            Skill::Summary => "summary",
            Skill::InstructionGeneration => "instruction_generation",
            Skill::Think => "think",
            Skill::QuickThink => "quick_think",
            Skill::Decision => "decision",
            Skill::SendMessage => "send_message",
            Skill::ProcessMessage => "process_message",
            Skill::TaskManager => "task_manager",
            Skill::AgentManager => "agent_manager",
            Skill::AskInfo => "ask_info",
            Skill::ToolDecision => "tool_decision",
        }
    }

    /// Whether a decision on a message that asks a manager to act (an operator's goal, a runtime
    /// notice) may plan this: what acts through the team (tasks, hiring, asking, messages), not
    /// the work itself. A real 1.5B model answered a goal with a quick_think that wrote the
    /// haiku, and the goal never became a task.
    pub fn acts_through_the_team(self) -> bool {
        matches!(
            self,
            Skill::TaskManager | Skill::AgentManager | Skill::AskInfo | Skill::SendMessage
        )
    }

    /// Skills an agent may put in a plan (planning/reflection/decision/tool_decision).
    /// `summary` only reflection may plan; `tool_decision` is never planned: the runtime
    /// inserts it after every tool step.
    pub fn plannable_by(self, planner: Skill) -> bool {
        match self {
            Skill::ToolDecision => false,
            Skill::Summary => planner == Skill::Reflection,
            // A decision that plans reading messages or deciding again loops: a model circles
            // between the two until something times out.
            Skill::ProcessMessage | Skill::Decision => planner != Skill::Decision,
            // A plan that plans planning again never starts the work (a real 0.5B model did).
            Skill::Planning => planner != Skill::Planning,
            _ => true,
        }
    }
}

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
    Skill(Skill),
    Tool(String),
}

impl Executor {
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

    #[test]
    fn only_reflection_may_plan_a_summary_and_nobody_plans_tool_decision() {
        assert!(Skill::Summary.plannable_by(Skill::Reflection));
        assert!(!Skill::Summary.plannable_by(Skill::Planning));
        assert!(!Skill::Planning.plannable_by(Skill::Planning));
        assert!(Skill::Planning.plannable_by(Skill::Reflection));
        assert!(!Skill::Summary.plannable_by(Skill::Decision));
        assert!(!Skill::ToolDecision.plannable_by(Skill::Planning));
        assert!(!Skill::ToolDecision.plannable_by(Skill::Reflection));
        assert!(Skill::Think.plannable_by(Skill::Planning));
    }
}
