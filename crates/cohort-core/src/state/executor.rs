//! What runs a step: one of the thirteen skills, or a tool (an MCP server, by name).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The thirteen skills of SPEC §7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Skill {
    /// Plans the agent's steps towards its goal in a stage (`<planned_step>`).
    Planning,
    /// Looks back on the work and plans corrective steps, or a `summary` when done.
    Reflection,
    /// Writes the agent's completion summary of a stage.
    Summary,
    /// Writes the next tool step's `instruction_content` (`<tool_instruction>`).
    InstructionGeneration,
    /// Thinks about the stage's history (`<think>`).
    Think,
    /// Thinks without history (`<quick_think>`).
    QuickThink,
    /// Inserts the next steps, outside any stage's plan.
    Decision,
    /// Sends a message, or asks for more information first (`<send_message>`).
    SendMessage,
    /// Digests a received message, optionally inserting a decision step.
    ProcessMessage,
    /// Manages tasks: add_task, add_stage, finish_stage, finish_task, retry_stage.
    TaskManager,
    /// Manages agents: init_new_agent, add_task_participant.
    AgentManager,
    /// Asks SyncState one of the ask_info queries and waits for the answer.
    AskInfo,
    /// After a tool step, decides whether and how to go on with the tool.
    ToolDecision,
}

impl Skill {
    /// Every skill, in the SPEC's order.
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

    /// The skill's wire name (`planning`, `quick_think`, …).
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
    /// A skill step, run by one of the thirteen skills.
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
