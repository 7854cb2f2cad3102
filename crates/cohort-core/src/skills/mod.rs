//! The skills: each turns an LLM answer into effects on the agent (new steps, memory, step
//! lock) and into what SyncState must do. Prompt assembly lives in `prompt/`, the LLM call in
//! the actor; `interpret` here is pure, so every skill is unit-tested on plain data.
//!
//! A skill is a folder (`plan/` serves the four planners, `think/` think and quick_think): its
//! [`SkillKind`] (answer tags, schema, history, effects, repair, what it reports), the reading
//! of its answer and its schema. The registry (`state::for_each_skill`) lists each skill
//! once, by variant, wire name and kind; the `Skill` enum, `Skill::kind` here and the embedded
//! prompt files are made from it. A new skill is a line there, its folder declared below, and
//! its two prompt files (`prompts/en/skills/<name>.yaml`, `prompts/zh/…`): the compiler names
//! whichever is missing. `repairs/` (the mends, grouped by what they mend) and `refusal.rs`
//! are not skills.

// The skills' folders (each names its kinds in the registry), then what they share.
mod agent_manager;
pub mod answer_schema;
mod ask_info;
mod instruction_generation;
mod kind;
mod plan;
mod process_message;
mod refusal;
mod repairs;
mod send_message;
mod summary;
mod task_manager;
mod think;

pub use instruction_generation::next_tool_step;
pub use kind::{HistoryKind, SkillKind};
pub use plan::graph as plan_graph;
pub use plan::{RawPlan, RawPlannedStep, check_plan, plan_key, queue_plan};
pub use refusal::{Refusal, RejectedStep, StepRefusal};
use repairs::summaries::results_in_stage;
pub use task_manager::{Instructed, closing, judges};

/// Makes `Skill::kind` from the registry's lines (`state::for_each_skill`): each skill's
/// [`SkillKind`], at the path its line names (a folder of this module).
macro_rules! skill_kinds {
    ($($(#[$doc:meta])* $variant:ident => $name:literal => $kind:path,)*) => {
        impl Skill {
            /// The skill's kind: its answer, schema, history and effects (`skills/<name>/`).
            pub fn kind(self) -> &'static dyn SkillKind {
                match self {
                    $(Skill::$variant => &$kind,)*
                }
            }
        }
    };
}

crate::state::for_each_skill!(skill_kinds);

use crate::clock::Now;
use crate::message::{AgentInstruction, AskInfoRequest, Message, TaskInstruction};
use crate::parse::{self, ParseError};
use crate::policy::Repair;
use crate::state::{Agent, Skill, StageAgentState, StepState};
use serde_json::Value;

/// What a skill made of an answer.
#[derive(Debug, Default)]
pub struct SkillOutcome {
    /// Stored in the step's `execute_result`.
    pub result: Value,
    /// The agent's state in the stage after this step: `working`, or `finished` for summary.
    pub stage_state: StageAgentState,
    /// A message for SyncState to deliver (send_message skill).
    pub send_message: Option<Message>,
    /// A change to a task for SyncState to make (task_manager skill).
    pub task_instruction: Option<TaskInstruction>,
    /// An agent for SyncState to start or end (agent_manager skill).
    pub agent_instruction: Option<AgentInstruction>,
    /// A query for SyncState; its wait id is already on the agent's step lock.
    pub ask_info: Option<AskInfoRequest>,
    /// The agent's completion report for the stage (summary skill).
    pub completion: Option<crate::report::Completion>,
    /// The repairs made to the answer on the way (`policy::repairs`).
    pub repairs: Vec<crate::policy::Fired>,
}

impl SkillOutcome {
    /// What `rule` changed, when it fired on the answer.
    pub fn fired(&self, rule: Repair) -> Option<&str> {
        self.repairs
            .iter()
            .find(|f| f.rule == rule)
            .map(|f| f.what.as_str())
    }
}

/// Why a skill could not use an answer. The message ([`SkillError::render`], in the team's
/// language) is written for the model: while re-asks remain the step is asked again with it,
/// so it says what to write instead.
#[derive(Debug)]
pub enum SkillError {
    /// The answer's tag is missing or cannot be read.
    Parse(ParseError),
    /// Every planned step was rejected, each for its reason.
    EmptyPlan(Vec<RejectedStep>),
    /// The answer reads but asks for something the skill cannot do.
    Refused(Refusal),
    /// The answer (this text) only hands back the step's instruction or goal.
    Echo(String),
    /// The step runs an MCP server, not a skill (its executor named here); never re-asked.
    NoTools(String),
    /// A judgement whose verdict (`reached`) and action disagree; the action is kept so that
    /// the runtime can carry out the verdict when the re-asks do not mend it.
    Disagrees {
        /// The verdict the answer's `<goal_reached>` gave.
        reached: bool,
        /// The action the answer gave with it.
        instruction: Box<TaskInstruction>,
    },
}

impl SkillError {
    /// The message, in the language of `t`.
    pub fn render(&self, t: &crate::texts::Texts) -> String {
        match self {
            SkillError::Parse(e) => e.render(t),
            SkillError::EmptyPlan(rejected) => t.empty_plan(RejectedStep::join(rejected, t)),
            SkillError::Refused(refusal) => refusal.render(t),
            SkillError::Echo(_) => t.echo(),
            SkillError::NoTools(executor) => t.no_tools(executor),
            SkillError::Disagrees { reached, .. } => task_manager::disagreement(*reached, t),
        }
    }
}

impl From<ParseError> for SkillError {
    fn from(e: ParseError) -> Self {
        SkillError::Parse(e)
    }
}

impl From<Refusal> for SkillError {
    fn from(r: Refusal) -> Self {
        SkillError::Refused(r)
    }
}

/// In English, as logs show it.
impl std::fmt::Display for SkillError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let en = crate::texts::Texts::english();
        f.write_str(&self.render(&en))
    }
}

impl std::error::Error for SkillError {}

/// Interprets `answer` as the result of `step` (a skill step of `agent`), applying the agent's
/// local effects. Persistent-memory instructions in the answer are applied when the skill's
/// own answer is good; a broken memory block is recorded in the result, not fatal.
pub fn interpret(
    agent: &mut Agent,
    step: &StepState,
    answer: &str,
    now: Now,
) -> Result<SkillOutcome, SkillError> {
    let skill = match step.executor.skill() {
        Some(s) => s,
        None => return Err(SkillError::NoTools(step.executor.to_string())),
    };
    let mut outcome = skill.kind().interpret(agent, step, answer, now)?;
    match parse::persistent_memory(answer) {
        Ok(ops) if !ops.is_empty() => {
            agent.apply_memory_ops(&ops, now.local);
            set(
                &mut outcome.result,
                "persistent_memory",
                serde_json::to_value(&ops).unwrap_or_default(),
            );
        }
        Ok(_) => {}
        Err(e) => set(
            &mut outcome.result,
            "persistent_memory_error",
            Value::String(e.render(&agent.settings.texts)),
        ),
    }
    Ok(outcome)
}

/// An answer still unusable after its re-asks, repaired where the runtime can do the skill's
/// job itself ([`SkillKind::repair`]): a summary is composed from the agent's own results in
/// the stage; a manager's judgement whose action kept disagreeing with its verdict is carried
/// out as the verdict says. A thought that kept handing back its instruction or goal is not
/// repaired: its step fails (it produced nothing, and the agent's next decision sees why).
pub fn repair(agent: &Agent, step: &StepState, error: &SkillError) -> Option<SkillOutcome> {
    step.executor.skill()?.kind().repair(agent, step, error)
}

/// The agent's goal in the stage of `step`, as the stage's start gave it (the origin of the
/// stage's first plan step); `None` outside a stage or once that step is gone.
pub fn goal_in_stage(agent: &Agent, step: &StepState) -> Option<String> {
    step.stage_id.stage()?;
    agent
        .agent_step
        .steps()
        .iter()
        .filter(|s| s.task_id == step.task_id && s.stage_id == step.stage_id)
        .find_map(|s| s.origin.stage_goal())
        .map(|g| g.trim().to_owned())
        .filter(|g| !g.is_empty())
}

fn set(result: &mut Value, key: &str, v: Value) {
    if !result.is_object() {
        *result = serde_json::json!({ "result": result.take() });
    }
    if let Some(map) = result.as_object_mut() {
        map.insert(key.to_owned(), v);
    }
}

fn working(result: Value) -> SkillOutcome {
    SkillOutcome {
        result,
        stage_state: StageAgentState::Working,
        ..Default::default()
    }
}

/// Feeds `text` to every skill's answer reader, for `parse`'s test that no reader panics (each
/// skill of the registry is also fed malformed answers in its own tags: `skills::kind`'s
/// tests).
#[cfg(test)]
pub(crate) fn read_every_answer(text: &str) {
    let _ = plan::answer::planned_steps(text);
    let _ = send_message::answer::read(text);
    let _ = process_message::answer::react_action(text);
    let _ = process_message::answer::digest(text);
    let _ = task_manager::answer::read(text);
    let _ = instruction_generation::answer::read(text);
    let _ = agent_manager::read(text);
    let _ = ask_info::read(text);
    for tag in ["think", "quick_think", "completion_summary"] {
        let _ = parse::tagged_text(text, tag);
    }
}

/// Agents, running steps and a fixed clock for the skills' unit tests.
#[cfg(test)]
pub mod test_support {
    use crate::ids::{StageId, StageRef};
    use crate::state::{
        Agent, AgentState, Executor, Skill, StepExecutionState, StepOrigin, StepState,
    };

    /// An agent with `skills` whose model's slips are all mended (`repairs: small_model`), as
    /// the tests of each rule need.
    pub fn agent(skills: &[Skill]) -> Agent {
        let mut a = Agent::from(AgentState::new(
            "w".into(),
            "Wren".into(),
            "writer".into(),
            "writes".into(),
        ));
        a.skills = skills.to_vec();
        a.settings_mut().repairs =
            crate::policy::Repairs::preset(crate::policy::Preset::SmallModel);
        a
    }

    /// Adds a running step of `skill` in task t / stage s and returns a copy of it.
    pub fn running(a: &mut Agent, skill: Skill, text: &str) -> StepState {
        running_for(a, skill, text, StepOrigin::Unknown)
    }

    /// A running step of `skill` acting on the operator's goal `text`.
    pub fn acting(a: &mut Agent, skill: Skill, text: &str) -> StepState {
        let origin = StepOrigin::Act {
            from: "operator".into(),
            notice: None,
            goal: Some(text.into()),
            attachments: Vec::new(),
            second_try: false,
        };
        running_for(a, skill, text, origin)
    }

    /// The running plan step of a stage that gave the agent `goal`.
    pub fn planning_for(a: &mut Agent, goal: &str) -> StepState {
        let origin = StepOrigin::StageStart {
            stage_id: "s".into(),
            goal: goal.into(),
        };
        running_for(a, Skill::Planning, &format!("Plan for: {goal}"), origin)
    }

    /// Ends `step` of `a` in `state` (finished, failed, …).
    pub fn end(a: &mut Agent, step: &StepState, state: StepExecutionState) {
        a.update_step(
            &step.step_id,
            crate::event::StepUpdate {
                execution_state: Some(state),
                ..Default::default()
            },
        );
    }

    /// A running step of `skill` with its origin.
    pub fn running_for(a: &mut Agent, skill: Skill, text: &str, origin: StepOrigin) -> StepState {
        let s = StepState::new(
            "t".into(),
            StageRef::Stage(StageId::from("s")),
            a.agent_id.clone(),
            Executor::Skill(skill),
            "do it",
            text,
        )
        .with_origin(origin);
        a.add_steps(vec![s]);
        a.start_next().unwrap()
    }

    /// A fixed moment, 2025-06-13 10:30:22 local time, so memory keys and timestamps in tests
    /// are known.
    pub fn now() -> crate::clock::Now {
        let local = chrono::NaiveDate::from_ymd_opt(2025, 6, 13)
            .unwrap()
            .and_hms_opt(10, 30, 22)
            .unwrap();
        crate::clock::Now {
            local,
            unix_ms: local.and_utc().timestamp_millis(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    #[test]
    fn memory_instructions_are_applied_alongside_the_answer() {
        let mut a = agent(&[Skill::Think]);
        let step = running(&mut a, Skill::Think, "");
        let o = interpret(
            &mut a,
            &step,
            "<think>ok</think><persistent_memory>[{\"add\": \"remember\"}]</persistent_memory>",
            now(),
        )
        .unwrap();
        assert_eq!(
            a.persistent_memory.get("20250613T103022").unwrap(),
            "remember"
        );
        assert!(o.result.get("persistent_memory").is_some());
    }

    #[test]
    fn a_broken_memory_block_is_recorded_not_fatal() {
        let mut a = agent(&[Skill::Think]);
        let step = running(&mut a, Skill::Think, "");
        let o = interpret(
            &mut a,
            &step,
            "<think>ok</think><persistent_memory>[{\"add\": </persistent_memory>",
            now(),
        )
        .unwrap();
        assert!(a.persistent_memory.is_empty());
        assert!(o.result.get("persistent_memory_error").is_some());
    }
}
