//! task_manager: a `<task_instruction>` for SyncState (add_task, add_stage, finish_stage,
//! finish_task, retry_stage). A new task's id is chosen here, so the step records it.

pub(super) mod answer;
mod schema;

use super::repairs::instructions;
use super::{HistoryKind, Refusal, SkillError, SkillKind, SkillOutcome, working};

use crate::clock::Now;
use crate::ids::{AgentId, StageId, TaskId};
use crate::message::{TaskInstruction, TaskOutcome};
use crate::notice::{Notice, stages_for_operator};
use crate::policy::{Fired, Repair, Repairs};
use crate::report::TaskWritten;
use crate::state::{Agent, StepState};
use serde_json::{Map, Value, json};

/// The stage a step must decide on: a runtime notice about one stage of a task the agent
/// manages (its agents all reported, or one is stuck). Such a stage stays open until it is
/// finished or retried, so `add_stage` is no answer there: a real 1.5B model re-added the stage
/// it judged unmet, and the task waited for ever on the old one.
pub fn stage_decided<'a>(agent: &Agent, step: &'a StepState) -> Option<&'a StageId> {
    step.origin
        .notice()
        .and_then(Notice::stage_decided)
        .filter(|_| in_a_task(agent, step))
}

/// Whether `step` works in one of the team's tasks, not in the agent's base task.
fn in_a_task(agent: &Agent, step: &StepState) -> bool {
    agent
        .settings
        .base_task
        .as_ref()
        .is_some_and(|b| *b != step.task_id)
}

/// The key of a judgement's verdict in a constrained answer (and its tag): whether the stage's
/// or the task's goal is reached, stated before the action that follows from it.
pub const VERDICT: &str = "goal_reached";

/// Whether the step judges work done: a stage whose agents all reported, or a task with no
/// stage left to run.
pub fn judges(agent: &Agent, step: &StepState) -> bool {
    stage_decided(agent, step).is_some() || judged_task(step).is_some()
}

/// The notice a step acts on when it asks to judge a whole task (its stages' reports).
pub fn judged_task(step: &StepState) -> Option<&Notice> {
    step.origin.notice().filter(|n| n.judged_stages().is_some())
}

/// The stages of a judged task and what they reported, as an operator reads them.
pub(super) fn stage_reports(notice: &Notice, t: &crate::texts::Texts) -> Option<String> {
    notice.judged_stages().map(|s| stages_for_operator(s, t))
}

/// What the model is told when its verdict (`reached`) and its action disagree.
pub(super) fn disagreement(reached: bool, t: &crate::texts::Texts) -> String {
    match reached {
        true => t.disagree_reached(),
        false => t.disagree_not_reached(),
    }
}

/// When a manager's second try at a notice failed too, or SyncState refused it too: what the
/// runtime does in its place, so that the task ends instead of waiting for ever on a manager
/// that cannot act (seen on Qwen2.5 1.5B: a stage re-added past its run limit, twice). A
/// stage it was deciding on is finished (what its agents gave is kept, and the task's own
/// judgement follows); a task it was judging or planning ends failed, the runtime's part of its
/// summary (`TaskWritten::ClosedByRuntime`) saying why and what the stages gave. `None` outside
/// a task (an operator's goal: its failed steps say what happened).
pub fn closing(agent: &Agent, step: &StepState, reason: &str) -> Option<TaskInstruction> {
    if let Some(stage) = stage_decided(agent, step) {
        return Some(TaskInstruction::FinishStage {
            task_id: step.task_id.clone(),
            stage_id: stage.clone(),
        });
    }
    if !in_a_task(agent, step) || !step.origin.asks_to_act() {
        return None;
    }
    let reports = step
        .origin
        .notice()
        .and_then(|n| stage_reports(n, &agent.settings.texts));
    Some(TaskInstruction::FinishTask {
        task_id: step.task_id.clone(),
        task_summary: String::new(),
        outcome: TaskOutcome::Failed,
        summary_written: Some(Box::new(TaskWritten::ClosedByRuntime {
            reason: reason.to_owned(),
            reports,
        })),
    })
}

/// What a task_manager answer is read against.
#[derive(Clone, Debug)]
pub struct Asked<'a> {
    /// An `add_stage` waits for a person's check (see `step::plan_check`) instead of going
    /// to SyncState.
    pub check_stages: bool,
    /// The stage the step must decide on, if any.
    pub decided: Option<&'a StageId>,
    /// An answer of this step's first try that SyncState refused: its action may not be given
    /// again.
    pub refused: Option<&'a TaskInstruction>,
    /// The notice the step acts on, when it asks to judge a whole task (its stages' reports).
    pub judged_task: Option<&'a Notice>,
    /// Which of the model's slips are mended.
    pub repairs: Repairs,
    /// The person whose goal the step acts on: a task it creates is theirs to hear about.
    pub requester: Option<AgentId>,
    /// That goal, as the person gave it.
    pub goal: Option<String>,
    /// The step a task it creates comes from: the one acting on the goal (or notice), or this
    /// step on the manager's own initiative.
    pub goal_step: Option<crate::ids::StepId>,
    /// The trace that step is in: a task it creates joins it.
    pub goal_trace: Option<crate::event::trace::TraceId>,
    /// The files attached to that goal: a task it creates lists them.
    pub goal_attachments: Vec<crate::attachment::Attachment>,
    /// The runtime's texts in the agent's language (what a repair adds to a summary).
    pub texts: std::sync::Arc<crate::texts::Texts>,
}

/// Nothing asked beyond the answer itself, in English (the unit tests' starting point).
#[cfg(test)]
impl Default for Asked<'_> {
    fn default() -> Self {
        Asked {
            check_stages: false,
            decided: None,
            refused: None,
            judged_task: None,
            repairs: Repairs::default(),
            requester: None,
            goal: None,
            goal_step: None,
            goal_trace: None,
            goal_attachments: Vec::new(),
            texts: crate::texts::Texts::english(),
        }
    }
}

impl<'a> Asked<'a> {
    pub fn of(agent: &Agent, step: &'a StepState) -> Self {
        let acted_on = acted_on(agent, step);
        let goal_of = acted_on.unwrap_or(step);
        Asked {
            check_stages: crate::state::plan_check::checks_stages(agent),
            decided: stage_decided(agent, step),
            refused: step.refused_instruction.as_ref(),
            judged_task: judged_task(step),
            repairs: agent.settings.repairs.clone(),
            texts: agent.settings.texts.clone(),
            requester: requester(agent, step),
            goal: acted_on
                .and_then(|s| s.origin.persons_goal())
                .map(str::to_owned),
            goal_step: Some(goal_of.step_id.clone()),
            goal_trace: goal_of.trace_id,
            goal_attachments: goal_of.origin.goal_attachments().to_vec(),
        }
    }
}

/// What a task_manager step keeps: `{"task_instruction": …}`, the instruction it gave.
#[derive(Debug, serde::Deserialize)]
pub struct Instructed {
    /// The instruction.
    pub task_instruction: TaskInstruction,
}

/// Reads the manager's action, checks it against what it was asked and completes what it
/// leaves out (the requester, the goal's trace).
pub fn interpret(answer: &str, asked: Asked<'_>) -> Result<SkillOutcome, SkillError> {
    let Asked {
        check_stages,
        decided,
        refused,
        judged_task,
        repairs,
        requester,
        goal,
        goal_step,
        goal_trace,
        goal_attachments,
        texts,
    } = asked;
    let mut instruction = answer::read(answer)?;
    instructions::check_not_refused(refused, &repairs, &instruction)?;
    if repairs.allows(Repair::VerdictAgrees) {
        instructions::check_verdict(answer, &instruction)?;
    }
    // A task summary that only hands back the task's goal produced nothing: asked again (the
    // echo rule), before any report is added to it (a 1.5B manager's summary was its goal, and
    // the writer's report only described a poem nobody wrote).
    if let Some(notice) = judged_task
        && repairs.allows(Repair::Echo)
        && let Some(summary) = instructions::summary_echoing_goal(&instruction, notice, &repairs)
    {
        return Err(SkillError::Echo(summary));
    }
    let mut fired = Vec::new();
    if let Some(notice) = judged_task
        && repairs.allows(Repair::StageReportsAppended)
        && instructions::with_results(&mut instruction, notice, &texts)
    {
        let what = texts.repair_stage_reports_appended();
        fired.push(Fired::new(Repair::StageReportsAppended, what));
    }
    check_stage_decided(&instruction, decided)?;
    name_new_task(
        &mut instruction,
        requester,
        (goal_step, goal_trace),
        goal_attachments,
    )?;
    if let Some(goal) = goal.filter(|_| repairs.allows(Repair::GoalKeptAsIntention))
        && instructions::keep_goal_as_intention(&mut instruction, &goal)
    {
        let what = texts.repair_goal_kept_as_intention();
        fired.push(Fired::new(Repair::GoalKeptAsIntention, what));
    }
    instructions::check_goals(&instruction, &repairs)?;
    if let TaskInstruction::AddStage { stages, task_id } = &instruction {
        if stages.is_empty() {
            return Err(Refusal::NoStages.into());
        }
        if check_stages {
            let check =
                crate::state::plan_check::PlanCheck::of_stages(task_id.clone(), stages.clone());
            return Ok(working(json!({
                "task_instruction": instruction,
                crate::state::plan_check::KEY: check,
            })));
        }
    }
    Ok(SkillOutcome {
        task_instruction: Some(instruction.clone()),
        repairs: fired,
        ..working(json!({ "task_instruction": instruction }))
    })
}

/// Refuses add_stage from a step that decides on stage `decided`, which it would leave open.
fn check_stage_decided(
    instruction: &TaskInstruction,
    decided: Option<&StageId>,
) -> Result<(), SkillError> {
    if let (TaskInstruction::AddStage { .. }, Some(stage)) = (instruction, decided) {
        return Err(Refusal::StageUndecided(stage.clone()).into());
    }
    Ok(())
}

/// Who gave the goal `step` acts on: the person whose goal the step (or the decision step
/// that planned it) acts on; `None` for a task made on the manager's own initiative.
fn requester(agent: &Agent, step: &StepState) -> Option<AgentId> {
    acted_on(agent, step).and_then(|s| s.origin.goal_from().cloned())
}

/// The step that acts on a message asking to act: `step` itself, or the decision step that
/// planned it.
fn acted_on<'a>(agent: &'a Agent, step: &'a StepState) -> Option<&'a StepState> {
    match &step.origin {
        crate::state::StepOrigin::Act { .. } => Some(step),
        crate::state::StepOrigin::Planned { by } => {
            agent.agent_step.get(by).filter(|s| s.origin.asks_to_act())
        }
        _ => None,
    }
}

/// Gives an add_task a fresh id (and a name if it has none) and the person whose goal it
/// serves (never what the model wrote); refuses one without intention.
fn name_new_task(
    instruction: &mut TaskInstruction,
    requester: Option<AgentId>,
    (goal_step, goal_trace): (
        Option<crate::ids::StepId>,
        Option<crate::event::trace::TraceId>,
    ),
    goal_attachments: Vec<crate::attachment::Attachment>,
) -> Result<(), SkillError> {
    if let TaskInstruction::AddTask {
        task_id,
        task_name,
        task_intention,
        requested_by,
        goal_step: from,
        attachments,
        trace_id,
    } = instruction
    {
        *requested_by = requester;
        *from = goal_step;
        *trace_id = goal_trace;
        *attachments = goal_attachments;
        if task_intention.trim().is_empty() {
            return Err(Refusal::NoTaskIntention.into());
        }
        // Never trust a model-made id for a new task: it could collide with an existing one.
        *task_id = TaskId::random();
        if task_name.trim().is_empty() {
            *task_name = task_intention.chars().take(48).collect();
        }
    }
    Ok(())
}

/// task_manager: manages tasks (add_task, add_stage, finish_stage, finish_task, retry_stage).
pub struct TaskManager;

impl SkillKind for TaskManager {
    fn answer_tags(&self) -> &'static [&'static str] {
        &["<task_instruction>"]
    }

    fn contract_words(&self) -> &'static [&'static str] {
        &[
            "add_task",
            "add_stage",
            "finish_stage",
            "finish_task",
            "retry_stage",
        ]
    }

    /// What the skill sets on a new task (whose goal, the trace) and the runtime's part of a
    /// task's summary are not the model's to repeat.
    fn history_output(&self, output: &mut Map<String, Value>) {
        if let Some(Value::Object(task)) = output.get_mut("task_instruction") {
            for key in ["requested_by", "goal_step", "trace_id", "summary_written"] {
                task.remove(key);
            }
        }
    }

    fn history(&self) -> HistoryKind {
        HistoryKind::Stage
    }

    fn answer_schema(&self, agent: &Agent, step: &StepState, agents: &[String]) -> Value {
        schema::answer_schema(agent, step, agents)
    }

    fn interpret(
        &self,
        agent: &mut Agent,
        step: &StepState,
        answer: &str,
        _now: Now,
    ) -> Result<SkillOutcome, SkillError> {
        interpret(answer, Asked::of(agent, step))
    }

    fn acts_through_the_team(&self) -> bool {
        true
    }

    /// A judgement whose action kept disagreeing with its verdict is carried out as the
    /// verdict says.
    fn repair(&self, agent: &Agent, step: &StepState, error: &SkillError) -> Option<SkillOutcome> {
        let SkillError::Disagrees {
            reached,
            instruction,
        } = error
        else {
            return None;
        };
        if !agent.settings.repairs.allows(Repair::VerdictCarriedOut) {
            return None;
        }
        instructions::carry_out_verdict(agent, step, *reached, instruction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Written;
    use crate::state::AgentState;

    /// Asked to decide on `stage`.
    fn at(stage: &StageId) -> Asked<'_> {
        Asked {
            decided: Some(stage),
            ..Asked::default()
        }
    }

    #[test]
    fn add_task_gets_a_fresh_id_and_a_name() {
        let o = interpret(r#"<task_instruction>{"action": "add_task", "task_id": "t1", "task_intention": "write a poem"}</task_instruction>"#, Asked::default()).unwrap();
        match o.task_instruction.unwrap() {
            TaskInstruction::AddTask {
                task_id, task_name, ..
            } => {
                assert_ne!(task_id.as_str(), "t1");
                assert_eq!(task_name, "write a poem");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(o.result["task_instruction"]["action"], "add_task");
    }

    /// A task is the goal-giver's: found from the step acting on their goal, or from the
    /// decision step that planned it; never from what the model wrote.
    #[test]
    fn a_new_task_records_whose_goal_it_serves() {
        use crate::state::{Executor, Skill, StepOrigin};
        let mut manager = Agent::from(AgentState::new(
            "m".into(),
            "M".into(),
            "manager".into(),
            "p".into(),
        ));
        let step = |skill, origin| {
            StepState::new(
                "base".into(),
                crate::ids::StageRef::NoRelative,
                "m".into(),
                Executor::Skill(skill),
                "x",
                "",
            )
            .with_origin(origin)
        };
        let goal = StepOrigin::Act {
            from: "op".into(),
            notice: None,
            goal: Some("a poem".into()),
            attachments: Vec::new(),
            second_try: false,
        };
        let decision = step(Skill::Decision, goal.clone());
        let by = decision.step_id.clone();
        manager.add_steps(vec![decision]);
        let answer = r#"<task_instruction>{"action": "add_task", "task_intention": "a poem", "requested_by": "mallory"}</task_instruction>"#;
        let asked_by = |s: &StepState| match interpret(answer, Asked::of(&manager, s))
            .unwrap()
            .task_instruction
        {
            Some(TaskInstruction::AddTask { requested_by, .. }) => requested_by,
            other => panic!("{other:?}"),
        };
        let direct = step(Skill::TaskManager, goal);
        assert_eq!(asked_by(&direct), Some("op".into()));
        let planned = step(Skill::TaskManager, StepOrigin::Planned { by });
        assert_eq!(asked_by(&planned), Some("op".into()));
        let own = step(Skill::TaskManager, StepOrigin::Unknown);
        assert_eq!(asked_by(&own), None);
        // The trace is the goal step's, whatever the model wrote there (even no string).
        let goal_trace = manager.agent_step.steps()[0].trace_id;
        assert!(goal_trace.is_some());
        for written in [r#""ffffffffffffffffffffffffffffffff""#, "5", r#""x""#] {
            let answer = format!(
                r#"<task_instruction>{{"action": "add_task", "task_intention": "a poem", "trace_id": {written}}}</task_instruction>"#
            );
            let made = interpret(&answer, Asked::of(&manager, &planned)).unwrap();
            match made.task_instruction {
                Some(TaskInstruction::AddTask { trace_id, .. }) => {
                    assert_eq!(trace_id, goal_trace, "{written}")
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_task_for_a_persons_goal_keeps_the_goal_as_its_intention() {
        let asked = |preset| Asked {
            goal: Some("Write a haiku about autumn rain".into()),
            repairs: crate::policy::Repairs::preset(preset),
            ..Asked::default()
        };
        let add = |intention: &str| {
            format!(
                r#"<task_instruction>{{"action": "add_task", "task_name": "Rain", "task_intention": "{intention}"}}</task_instruction>"#
            )
        };
        let intention = |o: &SkillOutcome| match &o.task_instruction {
            Some(TaskInstruction::AddTask { task_intention, .. }) => task_intention.clone(),
            other => panic!("{other:?}"),
        };
        // A 0.5B manager's intention, words of its own rules: the goal replaces it.
        let rules = add("Create a task with a short name and a clear intention.");
        let o = interpret(&rules, asked(crate::policy::Preset::SmallModel)).unwrap();
        assert_eq!(intention(&o), "Write a haiku about autumn rain");
        assert!(
            o.fired(Repair::GoalKeptAsIntention)
                .unwrap()
                .contains("as they gave it")
        );
        // An intention that carries the goal (and adds to it) is the model's.
        let more = add("Write a haiku about autumn rain, then have it reviewed");
        let o = interpret(&more, asked(crate::policy::Preset::SmallModel)).unwrap();
        assert_eq!(
            intention(&o),
            "Write a haiku about autumn rain, then have it reviewed"
        );
        assert!(o.repairs.is_empty());
        // Off in `auto`.
        let o = interpret(&rules, asked(crate::policy::Preset::Auto)).unwrap();
        assert!(intention(&o).starts_with("Create a task"));
        assert!(o.repairs.is_empty());
    }

    #[test]
    fn empty_stage_lists_and_unknown_actions_fail() {
        assert!(interpret(r#"<task_instruction>{"action": "add_stage", "task_id": "t", "stages": []}</task_instruction>"#, Asked::default()).is_err());
        assert!(
            interpret(
                r#"<task_instruction>{"action": "explode"}</task_instruction>"#,
                Asked::default()
            )
            .is_err()
        );
    }

    #[test]
    fn an_allocation_that_names_its_agent_or_a_placeholder_gives_no_goal() {
        let stage = |goal: &str| {
            format!(
                r#"<task_instruction>{{"action": "add_stage", "task_id": "t", "stages": [{{"stage_intention": "Write a haiku", "agent_allocation": {{"reviewer": "Review it", "writer": "{goal}"}}}}]}}</task_instruction>"#
            )
        };
        for named in ["writer", " Writer.", "", "…"] {
            let why = interpret(&stage(named), Asked::default())
                .err()
                .unwrap()
                .to_string();
            assert!(why.contains("gives `writer` no goal"), "{named:?}: {why}");
            // The example to follow is the stage's own intention, not a fixed text.
            assert!(why.ends_with(r#"e.g. {"writer":"Write a haiku"}"#), "{why}");
        }
        assert!(interpret(&stage("Write the haiku as the writer"), Asked::default()).is_ok());
        let retry = r#"<task_instruction>{"action": "retry_stage", "task_id": "t", "stage_id": "s1", "agent_allocation": {"w": "w"}}</task_instruction>"#;
        assert!(interpret(retry, Asked::default()).is_err());
    }

    #[test]
    fn a_stage_the_step_decides_on_is_finished_or_retried_never_left_open() {
        let add = r#"<task_instruction>{"action": "add_stage", "task_id": "t", "stages": [{"stage_intention": "again", "agent_allocation": {"w": "write"}}]}</task_instruction>"#;
        let stage = StageId::from("s1");
        let why = interpret(add, at(&stage)).err().unwrap().to_string();
        assert!(
            why.contains("finish_stage") && why.contains("retry_stage"),
            "{why}"
        );
        assert!(interpret(add, Asked::default()).is_ok());
        let finish = r#"<task_instruction>{"action": "finish_stage", "task_id": "t", "stage_id": "s1"}</task_instruction>"#;
        assert!(interpret(finish, at(&stage)).is_ok());
    }

    #[test]
    fn a_verdict_and_its_action_must_agree() {
        let stage = StageId::from("s1");
        let finish = r#"<task_instruction>{"action": "finish_stage", "task_id": "t", "stage_id": "s1"}</task_instruction>"#;
        let retry = r#"<task_instruction>{"action": "retry_stage", "task_id": "t", "stage_id": "s1", "agent_allocation": {"w": "again"}}</task_instruction>"#;
        let with = |verdict: bool, action: &str| {
            format!("<goal_reached>{verdict}</goal_reached>\n{action}")
        };
        assert!(interpret(&with(true, finish), at(&stage)).is_ok());
        assert!(interpret(&with(false, retry), at(&stage)).is_ok());
        let why = interpret(&with(true, retry), at(&stage))
            .err()
            .unwrap()
            .to_string();
        assert!(why.contains("judged the goal reached"), "{why}");
        let why = interpret(&with(false, finish), at(&stage))
            .err()
            .unwrap()
            .to_string();
        assert!(why.contains("not reached"), "{why}");
        // A failed task closes a goal not reached; no verdict, no check.
        let failed = r#"<task_instruction>{"action": "finish_task", "task_id": "t", "task_summary": "no", "outcome": "failed"}</task_instruction>"#;
        assert!(interpret(&with(false, failed), Asked::default()).is_ok());
        assert!(interpret(retry, at(&stage)).is_ok());
    }

    /// The summary task `t` (intention `intention`) finishes with, as people read it, when its
    /// manager answers `summary`, judging it after one stage "Write it" whose writer reported
    /// `report`.
    fn finished_with(intention: &str, report: &str, summary: &str) -> (String, StageId) {
        finished_with_results(intention, (report, &[], Written::Own), summary)
    }

    /// As [`finished_with`], the writer's work steps having produced `results`, which the
    /// runtime added to its report as `written` says.
    fn finished_with_results(
        intention: &str,
        (report, results, written): (&str, &[&str], Written),
        summary: &str,
    ) -> (String, StageId) {
        let task =
            crate::state::TaskState::new("t".into(), "h".into(), intention.into(), "m".into());
        let mut stage = crate::state::StageState::new(
            "t".into(),
            "Write it".into(),
            [("w".into(), "write".into())].into(),
        );
        let update = crate::message::CompletionUpdate {
            task_id: "t".into(),
            stage_id: stage.stage_id.clone(),
            agent_id: "w".into(),
            completion_summary: report.into(),
            results: results.iter().map(|r| r.to_string()).collect(),
            written,
        };
        let change = stage.completion_change(&update);
        crate::event::apply_stage(&mut stage, &change.unwrap());
        let message = crate::team::notices::judge_task(
            &task,
            [&stage].into_iter(),
            &crate::texts::Texts::english(),
        );
        let notice = message.notice_body().unwrap();
        let asked = Asked {
            judged_task: Some(notice),
            repairs: Repairs::preset(crate::policy::Preset::SmallModel),
            ..Asked::default()
        };
        let answer = format!(
            r#"<task_instruction>{{"action": "finish_task", "task_id": "t", "task_summary": "{summary}", "outcome": "finished"}}</task_instruction>"#
        );
        match interpret(&answer, asked).unwrap().task_instruction {
            Some(TaskInstruction::FinishTask {
                task_summary,
                summary_written,
                ..
            }) => {
                // The manager's words are kept as written; the runtime's part is beside them.
                assert_eq!(task_summary, summary);
                let t = crate::texts::Texts::english();
                let whole = TaskWritten::whole(&task_summary, summary_written.as_deref(), &t);
                (whole, stage.stage_id)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_finished_task_whose_summary_gives_no_result_gets_the_stage_reports() {
        let poem = "Cold rain on the eaves\nthe maple lets go its red\none leaf at a time";
        let finish = |summary: &str| finished_with("a haiku", poem, summary);
        let (news, stage_id) = finish("The haiku is written and submitted by the writer.");
        assert!(news.starts_with("The haiku is written"), "{news}");
        assert!(news.contains("added by the runtime"), "{news}");
        assert!(news.contains("the maple lets go its red"), "{news}");
        assert!(news.contains("- stage (init): Write it"), "{news}");
        assert!(!news.contains(stage_id.as_str()), "no stage id: {news}");
        // A summary that gives the poem (punctuation and case aside), or part of it, is left
        // as it is.
        let (given, _) =
            finish("Cold rain on the eaves, The maple lets go its red; one leaf at a time.");
        assert!(!given.contains("added by the runtime"), "{given}");
        let (part, _) = finish("The writer wrote: the maple lets go.");
        assert!(!part.contains("added by the runtime"), "{part}");
        // The line the runtime shows above results it added to a report is no result either:
        // a summary that copies it gives none.
        let heading = crate::texts::Texts::english().results_added();
        let added = ("Done.", &[poem][..], Written::ResultsAdded);
        let (copied, _) = finished_with_results("a haiku", added, &format!("Finished. {heading}."));
        assert!(copied.contains("the maple lets go its red"), "{copied}");
    }

    #[test]
    fn a_task_summary_sharing_only_a_reports_news_of_the_work_gets_what_the_stages_produced() {
        let poem = "Cold rain on the eaves\nthe maple lets go its red\none leaf at a time";
        let report = format!("I wrote the haiku and the result was sent to the manager.\n\n{poem}");
        let news = "The haiku is done and the result was sent to the manager.";
        let (summary, _) = finished_with_results("a haiku", (&report, &[poem], Written::Own), news);
        assert!(summary.contains("added by the runtime"), "{summary}");
        // What the work produced is added, not the report's news of it.
        assert!(
            summary.contains("- `w` produced:\n    Cold rain on the eaves"),
            "{summary}"
        );
        assert_eq!(
            summary.matches("sent to the manager").count(),
            1,
            "{summary}"
        );
        // Without recorded results the report's own words count, news and all.
        let (summary, _) = finished_with("a haiku", &report, news);
        assert!(!summary.contains("added by the runtime"), "{summary}");
        // A summary giving the result is left as it is.
        let (summary, _) = finished_with_results(
            "a haiku",
            (&report, &[poem], Written::Own),
            "The maple lets go its red.",
        );
        assert!(!summary.contains("added by the runtime"), "{summary}");
    }

    #[test]
    fn the_goals_own_words_in_a_summary_are_no_result() {
        let (summary, _) = finished_with(
            "Write a haiku about autumn rain",
            "Here is a haiku about autumn rain: cold drops on the eaves",
            "A haiku about autumn rain is written.",
        );
        assert!(summary.contains("cold drops on the eaves"), "{summary}");
    }

    #[test]
    fn a_task_summary_that_only_hands_back_the_goal_is_asked_again_not_given_reports() {
        let task = crate::state::TaskState::new(
            "t".into(),
            "h".into(),
            "Write a haiku about autumn rain".into(),
            "m".into(),
        );
        let stage = crate::state::StageState::new(
            "t".into(),
            "Write it".into(),
            [("w".into(), "write".into())].into(),
        );
        let message = crate::team::notices::judge_task(
            &task,
            [&stage].into_iter(),
            &crate::texts::Texts::english(),
        );
        let asked = || Asked {
            judged_task: message.notice_body(),
            repairs: Repairs::preset(crate::policy::Preset::SmallModel),
            ..Asked::default()
        };
        let echo = r#"<task_instruction>{"action": "finish_task", "task_id": "t", "task_summary": "Write a haiku about autumn rain", "outcome": "finished"}</task_instruction>"#;
        assert!(matches!(interpret(echo, asked()), Err(SkillError::Echo(_))));
        let failed = echo.replace("\"finished\"", "\"failed\"");
        assert!(
            interpret(&failed, asked()).is_ok(),
            "a failed task may say its goal"
        );
    }
}
