//! Why a skill refuses an answer that reads (its tags parse) but asks for something the skill
//! cannot do: each refusal with its facts, rendered through the team's catalog, since the
//! model reads it in a re-ask and is to write the answer again in its own language. What is
//! wrong with a planned step ([`StepRefusal`]) is kept per step, as the plan's `rejected` list
//! shows it.

use crate::call::InstructionError;
use crate::ids::{AgentId, BadAgentId, StageId};
use crate::state::{AskError, Skill};
use crate::texts::Texts;
use std::fmt;

use super::plan_graph::GraphError;

/// Why a skill refuses an answer it could read.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// A message names no receiver (and replies to no one).
    NoReceiver,
    /// A message names its own sender as a receiver.
    MessageToSelf,
    /// A structured question (`ask`) for an agent, which only people get.
    AskToAgent(AgentId),
    /// A structured question that cannot be answered (its options or fields are malformed).
    Unanswerable(AskError),
    /// The agent asked people `step_limits.asks` questions in this stage already.
    AskLimit {
        /// Questions asked in the stage.
        asked: usize,
        /// `step_limits.asks`.
        cap: usize,
    },
    /// add_stage with no stage in it.
    NoStages,
    /// The action SyncState refused on the step's first try, given again (its name).
    RefusedJustNow(&'static str),
    /// add_stage from a step that decides on a stage, which it would leave open.
    StageUndecided(StageId),
    /// add_task without an intention.
    NoTaskIntention,
    /// An allocation that gives an agent no goal; `intention` is the stage's, the example of
    /// a goal the refusal gives (the catalog's own example when it is empty).
    NoGoal {
        /// The agent without a goal.
        agent: AgentId,
        /// The stage's intention.
        intention: String,
    },
    /// A message asking to act, digested without the `<react_action>` that acts on it.
    MustReact,
    /// A manager's plan for a message asking to act, with no task_manager step to act with.
    MustManage,
    /// A graph plan with some steps rejected: it runs whole or not at all.
    PartGraph(Vec<RejectedStep>),
    /// A plan whose structure (ids, `depends_on`, `replan`) cannot run.
    Graph(GraphError),
    /// A summary outside any stage.
    SummaryOutsideStage,
    /// A summary that only hands back the step's instruction or goal, with no result to
    /// compose one from.
    SummaryEchoes,
    /// An instruction_generation step with no tool step after it.
    NoToolStep,
    /// A tool instruction that names no call the runtime can make.
    ToolInstruction(InstructionError),
    /// A new agent's id that cannot be used.
    BadAgentId(BadAgentId),
}

impl Refusal {
    /// Why, in the language of `t`.
    pub fn render(&self, t: &Texts) -> String {
        use Refusal as R;
        match self {
            R::NoReceiver => t.refusal_no_receiver(),
            R::MessageToSelf => t.refusal_message_to_self(),
            R::AskToAgent(agent) => t.refusal_ask_to_agent(agent),
            R::Unanswerable(e) => t.refusal_unanswerable(e.render(t)),
            R::AskLimit { asked, cap } => t.refusal_ask_limit(asked, cap),
            R::NoStages => t.refusal_no_stages(),
            R::RefusedJustNow(action) => t.refusal_refused_just_now(action),
            R::StageUndecided(stage) => t.refusal_stage_undecided(stage),
            R::NoTaskIntention => t.refusal_no_task_intention(),
            R::NoGoal { agent, intention } => {
                let example = match intention.trim() {
                    "" => t.refusal_goal_example(),
                    said => said.to_owned(),
                };
                let example = serde_json::json!({ agent.as_str(): example });
                t.refusal_no_goal(agent, example)
            }
            R::MustReact => t.refusal_must_react(),
            R::MustManage => t.refusal_must_manage(),
            R::PartGraph(rejected) => t.refusal_part_graph(RejectedStep::join(rejected, t)),
            R::Graph(e) => e.render(t),
            R::SummaryOutsideStage => t.refusal_summary_outside_stage(),
            R::SummaryEchoes => t.refusal_summary_echoes(),
            R::NoToolStep => t.refusal_no_tool_step(),
            R::ToolInstruction(e) => e.render(t),
            R::BadAgentId(e) => e.render(t),
        }
    }
}

/// Why the agent may not run a planned step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepRefusal {
    /// Its executor names no skill (as written).
    UnknownSkill(String),
    /// The agent lacks the skill.
    NoSkill(Skill),
    /// The planner may not plan the skill.
    NotPlannable {
        /// The skill planned.
        skill: Skill,
        /// The skill that planned it.
        planner: Skill,
    },
    /// A manager asked to act planned a skill that does the work itself.
    ManagerSkill(Skill),
    /// A manager asked to act planned a tool (its name).
    ManagerTool(String),
    /// The agent may not use the tool (its name, as written).
    NoTool(String),
    /// The step's `type` is neither skill nor tool (as written).
    BadType(String),
}

/// A planned step the agent may not run: its place in the plan (from 1), intention and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedStep {
    /// Its place in the plan, from 1.
    pub n: usize,
    /// Its intention, as planned.
    pub intention: String,
    /// Why it may not run.
    pub why: StepRefusal,
}

impl RejectedStep {
    /// The step and why, in the language of `t`.
    pub fn render(&self, t: &Texts) -> String {
        use StepRefusal as S;
        let why = match &self.why {
            S::UnknownSkill(name) => t.plan_unknown_skill(name.trim()),
            S::NoSkill(skill) => t.plan_no_skill(skill),
            S::NotPlannable { skill, planner } => t.plan_not_plannable(skill, planner),
            S::ManagerSkill(skill) => t.plan_manager_skill(skill),
            S::ManagerTool(tool) => t.plan_manager_tool(tool),
            S::NoTool(tool) => t.plan_no_tool(tool),
            S::BadType(kind) => t.plan_bad_type(kind),
        };
        t.plan_step_rejected(self.n, &self.intention, why)
    }

    /// Every step in `rejected` and why, in one line (`; ` between them).
    pub fn join(rejected: &[RejectedStep], t: &Texts) -> String {
        let all: Vec<String> = rejected.iter().map(|r| r.render(t)).collect();
        all.join("; ")
    }
}

/// In English, as logs and the REST API show it.
impl fmt::Display for RejectedStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(&Texts::english()))
    }
}

/// In English, as logs show it.
impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(&Texts::english()))
    }
}
