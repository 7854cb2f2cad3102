//! The four planners as skills: planning, reflection, decision and tool_decision share their
//! answer (`<planned_step>`), its schema and its effects, and differ in the history they see
//! and in what may plan them.

use super::{interpret, plan_key, schema};
use crate::clock::Now;
use crate::skills::{HistoryKind, SkillError, SkillKind, SkillOutcome};
use crate::state::{Agent, PlannedStep, Skill, StepState};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// What every planner's prompt must name: the fields of a planned step.
const CONTRACT: &[&str] = &["step_intention", "executor", "text_content"];

/// The items every planner implements alike, for `$skill`.
macro_rules! plans {
    ($skill:expr) => {
        fn answer_tags(&self) -> &'static [&'static str] {
            &["<planned_step>"]
        }

        fn contract_words(&self) -> &'static [&'static str] {
            CONTRACT
        }

        fn answer_schema(&self, agent: &Agent, step: &StepState, _agents: &[String]) -> Value {
            schema::answer_schema($skill, agent, step)
        }

        fn interpret(
            &self,
            agent: &mut Agent,
            step: &StepState,
            answer: &str,
            _now: Now,
        ) -> Result<SkillOutcome, SkillError> {
            interpret($skill, agent, step, answer)
        }

        /// The plan as each step's outline (each planned step has an entry of its own, with
        /// its text).
        fn history_output(&self, output: &mut Map<String, Value>) {
            outline(output, $skill);
        }
    };
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

/// planning: plans the agent's steps towards its goal in a stage, appended to its queue.
pub struct Planning;

impl SkillKind for Planning {
    plans!(Skill::Planning);

    fn history(&self) -> HistoryKind {
        HistoryKind::None
    }

    fn with_tools(&self) -> bool {
        true
    }

    /// A plan that plans planning again never starts the work (a real 0.5B model did).
    fn plannable_by(&self, planner: Skill) -> bool {
        planner != Skill::Planning
    }
}

/// reflection: looks back on the stage's work and plans fixes, or a summary when done.
pub struct Reflection;

impl SkillKind for Reflection {
    plans!(Skill::Reflection);

    fn history(&self) -> HistoryKind {
        HistoryKind::Stage
    }

    fn with_tools(&self) -> bool {
        true
    }
}

/// decision: inserts the next steps, outside any stage's plan.
pub struct Decision;

impl SkillKind for Decision {
    plans!(Skill::Decision);

    fn history(&self) -> HistoryKind {
        HistoryKind::Stage
    }

    /// A decision that plans deciding again loops: a model circles between reading messages
    /// and deciding until something times out.
    fn plannable_by(&self, planner: Skill) -> bool {
        planner != Skill::Decision
    }
}

/// tool_decision: after a tool step, plans how to go on with the tool (an empty plan stops).
pub struct ToolDecision;

impl SkillKind for ToolDecision {
    plans!(Skill::ToolDecision);

    fn history(&self) -> HistoryKind {
        HistoryKind::ToolChain
    }

    fn calls_tools(&self) -> bool {
        true
    }

    /// Never planned: the runtime inserts it after every tool step.
    fn plannable_by(&self, _planner: Skill) -> bool {
        false
    }
}
