//! The four planners as skills: planning, reflection, decision and tool_decision share their
//! answer (`<planned_step>`), its schema and its effects, and differ in the history they see,
//! what they show of tools and what may plan them: one kind, four settings.

use super::{interpret, plan_key, schema};
use crate::clock::Now;
use crate::skills::{HistoryKind, SkillError, SkillKind, SkillOutcome};
use crate::state::{Agent, PlannedStep, Skill, StepState};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// What every planner's prompt must name: the fields of a planned step.
const CONTRACT: &[&str] = &["step_intention", "executor", "text_content"];

/// A planner: which one, the history its prompt shows, what its prompt shows of tools, and
/// which planners may plan it.
pub struct Planner {
    skill: Skill,
    history: HistoryKind,
    /// Its prompt file has a `with_tools` text for an agent with tools.
    with_tools: bool,
    /// It writes tool calls (tool_decision).
    calls_tools: bool,
    plannable_by: fn(Skill) -> bool,
}

/// planning: plans the agent's steps towards its goal in a stage, appended to its queue.
pub const PLANNING: Planner = Planner {
    skill: Skill::Planning,
    history: HistoryKind::None,
    with_tools: true,
    calls_tools: false,
    // The contract: planning plans the work of a stage, never another planning (such a step
    // is refused, `StepRefusal::NotPlannable`, so a plan always leads to work).
    plannable_by: |planner| planner != Skill::Planning,
};

/// reflection: looks back on the stage's work and plans fixes, or a summary when done.
pub const REFLECTION: Planner = Planner {
    skill: Skill::Reflection,
    history: HistoryKind::Stage,
    with_tools: true,
    calls_tools: false,
    plannable_by: |_| true,
};

/// decision: inserts the next steps, outside any stage's plan.
pub const DECISION: Planner = Planner {
    skill: Skill::Decision,
    history: HistoryKind::Stage,
    with_tools: false,
    calls_tools: false,
    // The contract: a decision plans what follows it, never another decision (refused as
    // above, so deciding cannot follow itself for ever).
    plannable_by: |planner| planner != Skill::Decision,
};

/// tool_decision: after a tool step, plans how to go on with the tool (an empty plan stops).
pub const TOOL_DECISION: Planner = Planner {
    skill: Skill::ToolDecision,
    history: HistoryKind::ToolChain,
    with_tools: false,
    calls_tools: true,
    // Never planned: the runtime inserts it after every tool step.
    plannable_by: |_| false,
};

impl SkillKind for Planner {
    fn answer_tags(&self) -> &'static [&'static str] {
        &["<planned_step>"]
    }

    /// It plans or decides the work; the steps it plans do it.
    fn does_work(&self) -> bool {
        false
    }

    fn contract_words(&self) -> &'static [&'static str] {
        CONTRACT
    }

    fn history(&self) -> HistoryKind {
        self.history
    }

    fn answer_schema(&self, agent: &Agent, step: &StepState, _agents: &[String]) -> Value {
        schema::answer_schema(self.skill, agent, step)
    }

    fn interpret(
        &self,
        agent: &mut Agent,
        step: &StepState,
        answer: &str,
        _now: Now,
    ) -> Result<SkillOutcome, SkillError> {
        interpret(self.skill, agent, step, answer)
    }

    fn with_tools(&self) -> bool {
        self.with_tools
    }

    fn calls_tools(&self) -> bool {
        self.calls_tools
    }

    fn plannable_by(&self, planner: Skill) -> bool {
        (self.plannable_by)(planner)
    }

    /// The plan as each step's outline (each planned step has an entry of its own, with its
    /// text).
    fn history_output(&self, output: &mut Map<String, Value>) {
        outline(output, self.skill);
    }
}

/// `planner`'s plan in `output` as each step's executor and intention.
fn outline(output: &mut Map<String, Value>, planner: Skill) {
    let Some(plan) = output.get_mut(plan_key(planner)) else {
        return;
    };
    if let Ok(steps) = Vec::<PlannedStep>::deserialize(&*plan) {
        *plan = steps.iter().map(step_outline).collect();
    }
}

/// A planned step without its text (its own entry shows it).
fn step_outline(s: &PlannedStep) -> Value {
    let mut v = json!({"executor": s.executor.name(), "step_intention": s.step_intention});
    if let Some(id) = &s.id {
        v["id"] = json!(id);
        v["depends_on"] = json!(s.depends_on);
    }
    v
}
