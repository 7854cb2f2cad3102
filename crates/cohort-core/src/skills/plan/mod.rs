//! planning, reflection, decision and tool_decision: a `<planned_step>` list checked against
//! what the agent may use, then appended (planning, reflection) or inserted next (decision,
//! tool_decision, whose empty list means: stop using the tool).

pub(super) mod answer;
pub mod graph;
mod kind;
pub(super) mod schema;

pub use answer::{RawPlan, RawPlannedStep};
pub use kind::{DECISION, PLANNING, REFLECTION, TOOL_DECISION};

use super::repairs::plans;
use super::{Refusal, RejectedStep, SkillError, SkillOutcome, StepRefusal, working};
use crate::event::StepUpdate;
use crate::ids::StepId;
use crate::policy::{Fired, Repair};
use crate::state::plan_check;
use crate::state::{
    Agent, Cancelled, Executor, PlannedStep, Skill, StepExecutionState, StepOrigin, StepResult,
    StepState,
};
use crate::texts::Texts;
use serde_json::json;
use std::collections::HashMap;

/// Reads `planner`'s plan, checks it against what the agent may use and queues (or, when a
/// person checks plans first, holds) the steps it accepts.
pub fn interpret(
    planner: Skill,
    agent: &mut Agent,
    step: &StepState,
    answer: &str,
) -> Result<SkillOutcome, SkillError> {
    let RawPlan { steps: raw, replan } = answer::read(answer)?;
    let asked = raw.len();
    let acting = planner == Skill::Decision && step.origin.asks_to_act();
    let mut repairs = Vec::new();
    let offered: Vec<String> = crate::state::offered_tools(agent, step)
        .into_iter()
        .cloned()
        .collect();
    let (mut accepted, rejected) =
        check_plan(raw, (agent, &offered), planner, acting, &mut repairs);
    if accepted.is_empty() && asked > 0 {
        return Err(SkillError::EmptyPlan(rejected));
    }
    let graph = !replan.is_empty() || accepted.iter().any(PlannedStep::in_graph);
    if graph && !rejected.is_empty() {
        return Err(Refusal::PartGraph(rejected).into());
    }
    if acting {
        check_acts(agent, &accepted)?;
    }
    plans::insert_work_step(planner, agent, step, &mut accepted, graph, &mut repairs);
    let mut accepted = graph::arrange(accepted, &replan).map_err(Refusal::Graph)?;
    let note = close_reflection(planner, agent, step, asked, &mut accepted, &mut repairs);
    plans::work_before_summary(planner, agent, step, &mut accepted, &mut repairs);
    let rejected: Vec<String> = rejected
        .iter()
        .map(|r| r.render(&agent.settings.texts))
        .collect();
    let mut result = plan_answer(planner, asked, &accepted, &rejected, note.as_deref());
    // A plan a person checks first waits on this step (see `step::plan_check`).
    if plan_check::checks(agent, planner) && !accepted.is_empty() {
        result[plan_check::KEY] = json!(plan_check::PlanCheck::new(accepted));
    } else {
        queue_plan(agent, step, planner, accepted);
    }
    Ok(SkillOutcome {
        repairs,
        ..working(result)
    })
}

/// Refuses a plan of a manager asked to act that has no task_manager step to act with.
fn check_acts(agent: &Agent, accepted: &[PlannedStep]) -> Result<(), SkillError> {
    // A goal or notice is acted on only by a task_manager step: what else the plan does first
    // (hire, ask, message) ends without any duty to go on, and the goal would be dropped.
    let manages = agent.skills.contains(&Skill::TaskManager);
    if manages
        && !accepted
            .iter()
            .any(|p| p.executor == Executor::Skill(Skill::TaskManager))
    {
        return Err(Refusal::MustManage.into());
    }
    Ok(())
}

/// Closes the stage (a summary step) after a reflection that plans nothing (new) or is the last.
fn close_reflection(
    planner: Skill,
    agent: &Agent,
    step: &StepState,
    asked: usize,
    accepted: &mut Vec<PlannedStep>,
    repairs: &mut Vec<Fired>,
) -> Option<String> {
    let nothing_new = planner == Skill::Reflection
        && agent.settings.repairs.allows(Repair::ReflectionNothingNew)
        && plans::plans_nothing_new(agent, step, accepted);
    let last_reflection = planner == Skill::Reflection
        && agent.settings.repairs.allows(Repair::ReflectionCap)
        && plans::last_reflection(agent, step);
    if planner != Skill::Reflection || !(asked == 0 || nothing_new || last_reflection) {
        return None;
    }
    // A reflection that plans nothing means nothing is left to correct: close the stage with a
    // summary step (its text says what to report: see `Texts::summary_closing_text`).
    let t = &agent.settings.texts;
    *accepted = vec![PlannedStep::new(
        Executor::Skill(Skill::Summary),
        t.summary_closing_intention(),
        t.summary_closing_text(),
    )];
    if asked == 0 {
        return Some(t.reflection_empty_note());
    }
    if nothing_new {
        let what = t.repair_reflection_nothing_new();
        repairs.push(Fired::new(Repair::ReflectionNothingNew, what));
    } else {
        repairs.push(Fired::new(Repair::ReflectionCap, t.repair_reflection_cap()));
    }
    None
}

/// The key a planner's result holds its accepted plan under (decision for every acting skill).
pub fn plan_key(planner: Skill) -> &'static str {
    match planner {
        Skill::Planning => "planned_step",
        Skill::Reflection => "reflection_step",
        Skill::ToolDecision => "tool_decision",
        _ => "decision_step",
    }
}

/// The skill's answer: the plan under the planner's key, the rejected steps, note and stop.
fn plan_answer(
    planner: Skill,
    asked: usize,
    accepted: &[PlannedStep],
    rejected: &[String],
    note: Option<&str>,
) -> serde_json::Value {
    let mut result = json!({ plan_key(planner): accepted, "rejected": rejected });
    if let Some(n) = note {
        result["note"] = json!(n);
    }
    if planner == Skill::ToolDecision {
        // An empty list ends the long-tail use of the tool.
        result["stop"] = json!(asked == 0);
    }
    result
}

/// Gives `plan` the place of `step` (its task and stage) and queues it: decision and
/// tool_decision act right away, planning and reflection queue up. A graph plan's steps wait
/// (`pending`) for the steps they depend on, and a step named in its `replan` is followed by a
/// planning step that plans the rest again (at most `step_limits.replans` in a stage). A plan
/// made again replaces the steps of the plan before it that have not started.
pub fn queue_plan(agent: &mut Agent, step: &StepState, planner: Skill, plan: Vec<PlannedStep>) {
    if let StepOrigin::Replan { plan: earlier, .. } = &step.origin {
        set_aside_unstarted(agent, earlier, &step.step_id);
    }
    let mut replans_left = if agent.skills.contains(&Skill::Planning) {
        agent
            .settings
            .step_limits
            .replans
            .saturating_sub(replans_in(agent, step))
    } else {
        0
    };
    let shown = graph::render(&plan, &agent.settings.texts);
    let mut ids: HashMap<String, StepId> = HashMap::new();
    let mut steps: Vec<StepState> = Vec::with_capacity(plan.len());
    for p in plan {
        let replan = p.replan && replans_left > 0;
        let depends_on = p.depends_on.clone();
        let mut s = p
            .into_step(
                step.task_id.clone(),
                step.stage_id.clone(),
                agent.agent_id.clone(),
            )
            .with_origin(StepOrigin::Planned {
                by: step.step_id.clone(),
            });
        s.depends_on = depends_on
            .iter()
            .filter_map(|d| ids.get(d).cloned())
            .collect();
        if !s.depends_on.is_empty() {
            s.execution_state = StepExecutionState::Pending;
        }
        if let Some(id) = &s.plan_id {
            ids.insert(id.clone(), s.step_id.clone());
        }
        let again = replan.then(|| replan_step(step, &s, &shown, &agent.settings.texts));
        replans_left -= usize::from(replan);
        steps.push(s);
        steps.extend(again);
    }
    if matches!(planner, Skill::Decision | Skill::ToolDecision) {
        agent.add_next_steps(steps);
    } else {
        agent.add_steps(steps);
    }
}

/// The planning step that plans the rest of a graph plan again once its step `after` finished
/// (seed 001 `handleReplan`): its text holds the plan; the results so far are in its history.
fn replan_step(planner: &StepState, after: &StepState, plan: &str, t: &Texts) -> StepState {
    let name = after.plan_id.as_deref().unwrap_or("?");
    let mut s = StepState::new(
        planner.task_id.clone(),
        planner.stage_id.clone(),
        after.agent_id.clone(),
        Executor::Skill(Skill::Planning),
        t.replan_intention(name),
        t.replan_text(plan, name),
    )
    .with_origin(StepOrigin::Replan {
        after: after.step_id.clone(),
        plan: planner.step_id.clone(),
    });
    s.depends_on = vec![after.step_id.clone()];
    s.execution_state = StepExecutionState::Pending;
    s
}

/// How many replans the agent queued in the task and stage of `step`.
fn replans_in(agent: &Agent, step: &StepState) -> usize {
    agent
        .agent_step
        .steps()
        .iter()
        .filter(|s| s.task_id == step.task_id && s.stage_id == step.stage_id)
        .filter(|s| matches!(s.origin, StepOrigin::Replan { .. }))
        .count()
}

/// The steps of the plan made by `plan` that have not started (and its other replans) are
/// set aside: the plan made again by `by` replaces them.
fn set_aside_unstarted(agent: &mut Agent, plan: &StepId, by: &StepId) {
    let unstarted: Vec<StepId> = agent
        .agent_step
        .todo()
        .filter_map(|id| agent.agent_step.get(id))
        .filter(|s| match &s.origin {
            StepOrigin::Planned { by: p } => p == plan,
            StepOrigin::Replan { plan: p, .. } => p == plan && s.step_id != *by,
            _ => false,
        })
        .map(|s| s.step_id.clone())
        .collect();
    for id in unstarted {
        let why = "the plan was made again after one of its steps; the new plan replaces it";
        agent.update_step(
            &id,
            StepUpdate {
                execution_state: Some(StepExecutionState::Cancelled),
                execute_result: Some(Box::new(StepResult {
                    cancelled: Some(Cancelled {
                        by: None,
                        reason: why.into(),
                    }),
                    ..StepResult::failed(why)
                })),
                ..Default::default()
            },
        );
    }
}

/// Splits a raw plan into steps the agent may run and reasons for the ones it may not; the
/// repairs made on the way are added to `repairs`. `acting`: the plan answers a message that
/// asks a manager to act, so it may only act through the team
/// ([`Skill::acts_through_the_team`]). `tools`: the MCP servers the plan may use (the
/// agent's, or those a message chose).
pub fn check_plan(
    raw: Vec<RawPlannedStep>,
    (agent, tools): (&Agent, &[String]),
    planner: Skill,
    acting: bool,
    repairs: &mut Vec<Fired>,
) -> (Vec<PlannedStep>, Vec<RejectedStep>) {
    let mut ok: Vec<PlannedStep> = Vec::new();
    let mut rejected = Vec::new();
    for (i, r) in raw.into_iter().enumerate() {
        let executor = planned_executor(&r, i, (agent, tools), planner, acting, repairs);
        match executor {
            Ok(e)
                if agent.settings.repairs.allows(Repair::DoubledStepDropped)
                    && plans::doubled(ok.last(), &e, &r) =>
            {
                let what = agent.settings.texts.repair_doubled_step_dropped(i + 1);
                repairs.push(Fired::new(Repair::DoubledStepDropped, what));
            }
            Ok(e) => ok.push(PlannedStep {
                id: r.id,
                depends_on: r.depends_on,
                ..PlannedStep::new(e, r.step_intention, r.text_content)
            }),
            Err(why) => rejected.push(RejectedStep {
                n: i + 1,
                intention: r.step_intention,
                why,
            }),
        }
    }
    (ok, rejected)
}

/// What runs the plan's step `r` (its place `i`), if the agent may plan it; else why not. A
/// skill of the agent's named as a tool is that skill (an obvious slip, repaired rather than
/// refused, and added to `repairs`).
fn planned_executor(
    r: &RawPlannedStep,
    i: usize,
    (agent, tools): (&Agent, &[String]),
    planner: Skill,
    acting: bool,
    repairs: &mut Vec<Fired>,
) -> Result<Executor, StepRefusal> {
    let kind = r.step_type.trim().to_ascii_lowercase();
    let named_skill = r
        .executor
        .parse::<Skill>()
        .ok()
        .filter(|s| agent.skills.contains(s));
    let kind = match (kind.as_str(), named_skill) {
        ("tool", Some(s))
            if agent.settings.repairs.allows(Repair::SkillNamedAsTool)
                && !tools.iter().any(|t| t == r.executor.trim()) =>
        {
            let what = agent.settings.texts.repair_skill_named_as_tool(i + 1, s);
            repairs.push(Fired::new(Repair::SkillNamedAsTool, what));
            "skill"
        }
        (k, _) => k,
    };
    match kind {
        "skill" => match r.executor.parse::<Skill>() {
            Err(_) => Err(StepRefusal::UnknownSkill(r.executor.clone())),
            Ok(s) if !agent.skills.contains(&s) => Err(StepRefusal::NoSkill(s)),
            Ok(skill) if !skill.plannable_by(planner) => {
                Err(StepRefusal::NotPlannable { skill, planner })
            }
            Ok(s) if acting && !s.acts_through_the_team() => Err(StepRefusal::ManagerSkill(s)),
            Ok(s) => Ok(Executor::Skill(s)),
        },
        "tool" if acting => Err(StepRefusal::ManagerTool(r.executor.trim().to_owned())),
        "tool" if tools.iter().any(|t| t == r.executor.trim()) => {
            Ok(Executor::Tool(r.executor.trim().to_owned()))
        }
        "tool" => Err(StepRefusal::NoTool(r.executor.clone())),
        other => Err(StepRefusal::BadType(other.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::test_support::*;

    const PLAN: &str = r#"<planned_step>[
        {"step_intention": "think", "type": "skill", "executor": "think", "text_content": "t"},
        {"step_intention": "reflect", "type": "skill", "executor": "reflection", "text_content": "r"}
    ]</planned_step>"#;

    fn todo_executors(a: &Agent) -> Vec<String> {
        a.agent_step
            .todo()
            .map(|id| a.agent_step.get(id).unwrap().executor.to_string())
            .collect()
    }

    const FAN_OUT: &str = r#"<planned_step>{"steps": [
        {"id": "join", "depends_on": ["a", "b"], "step_intention": "join", "type": "skill", "executor": "think", "text_content": "j"},
        {"id": "a", "step_intention": "part a", "type": "skill", "executor": "think", "text_content": "a"},
        {"id": "b", "step_intention": "part b", "type": "skill", "executor": "think", "text_content": "b"}
    ], "replan": ["a"]}</planned_step>"#;

    fn todo_steps(a: &Agent) -> Vec<StepState> {
        a.agent_step
            .todo()
            .map(|id| a.agent_step.get(id).unwrap().clone())
            .collect()
    }

    #[test]
    fn a_graph_plan_queues_its_steps_after_their_dependencies_with_a_replan_after_a() {
        let mut a = agent(&[Skill::Planning, Skill::Think, Skill::Reflection]);
        let step = running(&mut a, Skill::Planning, "plan");
        interpret(Skill::Planning, &mut a, &step, FAN_OUT).unwrap();
        let queued = todo_steps(&a);
        let names: Vec<&str> = queued
            .iter()
            .map(|s| s.plan_id.as_deref().unwrap_or("replan"))
            .collect();
        assert_eq!(names, ["a", "replan", "b", "join"]);
        let (pa, again, pb, join) = (&queued[0], &queued[1], &queued[2], &queued[3]);
        assert_eq!(
            join.depends_on,
            vec![pa.step_id.clone(), pb.step_id.clone()]
        );
        assert_eq!(join.execution_state, StepExecutionState::Pending);
        assert_eq!(pb.execution_state, StepExecutionState::Init);
        assert_eq!(again.executor, Executor::Skill(Skill::Planning));
        assert_eq!(again.depends_on, vec![pa.step_id.clone()]);
        assert!(matches!(&again.origin, StepOrigin::Replan { after, plan }
            if *after == pa.step_id && *plan == step.step_id));
        assert!(
            again
                .text_content
                .contains("- `join` [think] join (after a, b)")
        );
        assert_eq!(a.next_runnable().unwrap().step_id, pa.step_id);
    }

    #[test]
    fn a_replan_replaces_the_plans_unstarted_steps_and_keeps_the_finished_ones() {
        use crate::event::StepUpdate;
        let mut a = agent(&[Skill::Planning, Skill::Think, Skill::Reflection]);
        let step = running(&mut a, Skill::Planning, "plan");
        interpret(Skill::Planning, &mut a, &step, FAN_OUT).unwrap();
        let done = a.start_next().unwrap();
        a.update_step(
            &done.step_id,
            StepUpdate {
                execution_state: Some(StepExecutionState::Finished),
                ..Default::default()
            },
        );
        crate::step::dependencies::advance(&mut a);
        let again = a.start_next().unwrap();
        assert!(matches!(again.origin, StepOrigin::Replan { .. }));
        let new = r#"<planned_step>[{"step_intention": "finish up", "type": "skill", "executor": "think", "text_content": "f"}]</planned_step>"#;
        interpret(Skill::Planning, &mut a, &again, new).unwrap();
        let queued: Vec<String> = todo_steps(&a)
            .into_iter()
            .map(|s| s.step_intention)
            .collect();
        assert_eq!(queued, ["finish up"], "b and join were replaced");
        let state = |intention: &str| {
            let s = a
                .agent_step
                .steps()
                .iter()
                .find(|s| s.step_intention == intention);
            s.unwrap().execution_state
        };
        assert_eq!(state("part a"), StepExecutionState::Finished);
        assert_eq!(state("part b"), StepExecutionState::Cancelled);
        assert_eq!(state("join"), StepExecutionState::Cancelled);
    }

    #[test]
    fn a_plan_with_a_cycle_is_refused_with_the_circle_and_queues_nothing() {
        let mut a = agent(&[Skill::Planning, Skill::Think]);
        let step = running(&mut a, Skill::Planning, "plan");
        let cyclic = r#"<planned_step>{"steps": [
            {"id": "a", "depends_on": ["b"], "step_intention": "x", "type": "skill", "executor": "think"},
            {"id": "b", "depends_on": ["a"], "step_intention": "y", "type": "skill", "executor": "think"}]}</planned_step>"#;
        let err = interpret(Skill::Planning, &mut a, &step, cyclic).unwrap_err();
        assert!(
            err.to_string()
                .contains("a → b → a depend on each other in a circle"),
            "{err}"
        );
        assert!(todo_steps(&a).is_empty());
    }

    #[test]
    fn a_graph_plan_with_a_step_it_may_not_run_is_refused_whole() {
        let mut a = agent(&[Skill::Planning, Skill::Think]);
        let step = running(&mut a, Skill::Planning, "plan");
        let bad = r#"<planned_step>{"steps": [
            {"id": "a", "step_intention": "x", "type": "skill", "executor": "think"},
            {"id": "b", "depends_on": ["a"], "step_intention": "y", "type": "tool", "executor": "web"}]}</planned_step>"#;
        let err = interpret(Skill::Planning, &mut a, &step, bad)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("may not use tool `web`") && err.contains("runs whole"),
            "{err}"
        );
        assert!(todo_steps(&a).is_empty());
    }

    #[test]
    fn a_reflection_that_plans_only_what_already_ran_here_closes_the_stage() {
        use crate::event::StepUpdate;
        let mut a = agent(&[Skill::Reflection, Skill::QuickThink, Skill::Summary]);
        let check = running(&mut a, Skill::QuickThink, "check");
        a.update_step(
            &check.step_id,
            StepUpdate {
                execution_state: Some(StepExecutionState::Finished),
                ..Default::default()
            },
        );
        let again = format!(
            r#"<planned_step>[{{"step_intention": "{}", "type": "skill", "executor": "quick_think", "text_content": "check it again"}}]</planned_step>"#,
            check.step_intention
        );
        let r = running(&mut a, Skill::Reflection, "every planned step has run");
        let o = interpret(Skill::Reflection, &mut a, &r, &again).unwrap();
        assert_eq!(todo_executors(&a), ["summary"]);
        assert!(
            o.fired(Repair::ReflectionNothingNew)
                .unwrap()
                .contains("already run")
        );
        // Something new is planned as asked.
        let new = r#"<planned_step>[{"step_intention": "look closer", "type": "skill", "executor": "quick_think", "text_content": "x"}]</planned_step>"#;
        let mut b = agent(&[Skill::Reflection, Skill::QuickThink, Skill::Summary]);
        let r = running(&mut b, Skill::Reflection, "");
        interpret(Skill::Reflection, &mut b, &r, new).unwrap();
        assert_eq!(todo_executors(&b), ["quick_think"]);
    }

    #[test]
    fn a_decision_on_a_goal_acts_through_the_team_never_does_the_work_itself() {
        let mut a = agent(&[Skill::Decision, Skill::TaskManager, Skill::Think]);
        let goal = acting(&mut a, Skill::Decision, "Write a haiku.");
        let think = r#"<planned_step>[{"step_intention": "write it", "type": "skill", "executor": "think", "text_content": "a haiku"}]</planned_step>"#;
        let e = interpret(Skill::Decision, &mut a, &goal, think).unwrap_err();
        assert!(e.to_string().contains("add_task"), "{e}");
        let empty = interpret(
            Skill::Decision,
            &mut a,
            &goal,
            "<planned_step>[]</planned_step>",
        );
        assert!(empty.unwrap_err().to_string().contains("asks you to act"));
        let task = r#"<planned_step>[{"step_intention": "make it a task", "type": "skill", "executor": "task_manager", "text_content": "add_task"}]</planned_step>"#;
        interpret(Skill::Decision, &mut a, &goal, task).unwrap();
        assert_eq!(todo_executors(&a), ["task_manager"]);
        // Any other decision may plan the work.
        let mut b = agent(&[Skill::Decision, Skill::Think]);
        let free = running(&mut b, Skill::Decision, "React to the review.");
        interpret(Skill::Decision, &mut b, &free, think).unwrap();
        assert_eq!(todo_executors(&b), ["think"]);
    }

    #[test]
    fn planning_appends_steps_in_the_same_task_and_stage() {
        let mut a = agent(&[Skill::Planning, Skill::Think, Skill::Reflection]);
        let step = running(&mut a, Skill::Planning, "");
        a.add_steps(vec![StepState::new(
            "t".into(),
            step.stage_id.clone(),
            "w".into(),
            Executor::Skill(Skill::Think),
            "old",
            "",
        )]);
        let o = interpret(Skill::Planning, &mut a, &step, PLAN).unwrap();
        assert_eq!(todo_executors(&a), ["think", "think", "reflection"]);
        assert_eq!(o.result["planned_step"].as_array().unwrap().len(), 2);
        assert!(
            a.agent_step
                .steps()
                .iter()
                .all(|s| s.stage_id == step.stage_id)
        );
    }

    #[test]
    fn decision_inserts_steps_before_pending_ones() {
        let mut a = agent(&[Skill::Decision, Skill::Think, Skill::Reflection]);
        let step = running(&mut a, Skill::Decision, "");
        a.add_steps(vec![StepState::new(
            "t".into(),
            step.stage_id.clone(),
            "w".into(),
            Executor::Skill(Skill::QuickThink),
            "old",
            "",
        )]);
        interpret(Skill::Decision, &mut a, &step, PLAN).unwrap();
        assert_eq!(todo_executors(&a), ["think", "reflection", "quick_think"]);
    }

    #[test]
    fn planning_may_not_plan_summary_or_unknown_or_unpermitted_steps() {
        let mut a = agent(&[Skill::Planning, Skill::Think, Skill::Summary]);
        let step = running(&mut a, Skill::Planning, "");
        let answer = r#"<planned_step>[
            {"step_intention": "a", "type": "skill", "executor": "summary", "text_content": ""},
            {"step_intention": "b", "type": "skill", "executor": "send_message", "text_content": ""},
            {"step_intention": "c", "type": "tool", "executor": "web", "text_content": ""},
            {"step_intention": "d", "type": "skill", "executor": "think", "text_content": ""}
        ]</planned_step>"#;
        let o = interpret(Skill::Planning, &mut a, &step, answer).unwrap();
        assert_eq!(todo_executors(&a), ["think"]);
        let rejected = o.result["rejected"].as_array().unwrap();
        assert_eq!(rejected.len(), 3);
        assert!(
            rejected[0]
                .as_str()
                .unwrap()
                .contains("may not be planned by planning")
        );
    }

    #[test]
    fn decision_may_not_plan_reading_messages_or_deciding_again() {
        let mut a = agent(&[Skill::Decision, Skill::ProcessMessage, Skill::TaskManager]);
        let step = running(&mut a, Skill::Decision, "");
        let answer = r#"<planned_step>[
            {"step_intention": "a", "type": "skill", "executor": "process_message", "text_content": ""},
            {"step_intention": "b", "type": "skill", "executor": "decision", "text_content": ""},
            {"step_intention": "c", "type": "skill", "executor": "task_manager", "text_content": "add_task"}
        ]</planned_step>"#;
        let o = interpret(Skill::Decision, &mut a, &step, answer).unwrap();
        assert_eq!(todo_executors(&a), ["task_manager"]);
        assert_eq!(o.result["rejected"].as_array().unwrap().len(), 2);
        // Only those two loop: planning may still plan a decision.
        assert!(Skill::Decision.plannable_by(Skill::Planning));
    }

    #[test]
    fn a_skill_named_as_a_tool_and_a_doubled_step_are_repaired() {
        let mut a = agent(&[Skill::Decision, Skill::QuickThink, Skill::TaskManager]);
        let step = running(&mut a, Skill::Decision, "");
        let answer = r#"<planned_step>[
            {"step_intention": "note", "type": "tool", "executor": "quick_think", "text_content": "x"},
            {"step_intention": "add", "type": "skill", "executor": "task_manager", "text_content": "add_task"},
            {"step_intention": "add", "type": "skill", "executor": "task_manager", "text_content": "add_task"}
        ]</planned_step>"#;
        let o = interpret(Skill::Decision, &mut a, &step, answer).unwrap();
        assert_eq!(todo_executors(&a), ["quick_think", "task_manager"]);
        assert!(o.result["rejected"].as_array().unwrap().is_empty());
    }

    #[test]
    fn a_graph_step_written_twice_id_and_all_is_planned_once() {
        let plan = |ids: &[&str]| {
            let steps: Vec<String> = ids
                .iter()
                .map(|id| {
                    format!(
                        r#"{{"id": "{id}", "step_intention": "Draft", "type": "skill", "executor": "think", "text_content": "Write it"}}"#
                    )
                })
                .collect();
            format!("<planned_step>[{}]</planned_step>", steps.join(","))
        };
        let decide = |a: &mut Agent, ids: &[&str]| {
            let step = running(a, Skill::Decision, "");
            interpret(Skill::Decision, a, &step, &plan(ids))
        };
        let skills = [Skill::Decision, Skill::Think];
        let mut a = agent(&skills);
        let o = decide(&mut a, &["d", "d", "d"]).unwrap();
        assert_eq!(todo_executors(&a), ["think"]);
        assert!(o.fired(Repair::DoubledStepDropped).is_some());
        // The same work under ids of their own is two steps, side by side on purpose.
        let mut b = agent(&skills);
        decide(&mut b, &["d1", "d2"]).unwrap();
        assert_eq!(todo_executors(&b), ["think", "think"]);
        // Without the repair, the repeated id refuses the plan.
        let mut c = agent(&skills);
        c.settings_mut()
            .repairs
            .switched
            .insert(Repair::DoubledStepDropped, false);
        let err = decide(&mut c, &["d", "d"]).unwrap_err();
        assert!(err.to_string().contains("`d`"), "{err}");
    }

    /// Asserts that `planned` is the think step the runtime adds to do `goal`.
    fn assert_works_on(planned: &serde_json::Value, goal: &str) {
        assert_eq!(planned["executor"], "think");
        // The goal as given, nothing around it (a small model hands back prose it is asked in).
        assert_eq!(planned["text_content"], goal);
    }

    #[test]
    fn a_stage_plan_that_only_checks_gets_a_step_doing_the_goal_first() {
        let mut a = agent(&[Skill::Planning, Skill::Think, Skill::Reflection]);
        let step = planning_for(&mut a, "Write a haiku about autumn rain");
        let only_checks = r#"<planned_step>[{"step_intention": "Check the result", "type": "skill", "executor": "reflection", "text_content": "check"}]</planned_step>"#;
        let o = interpret(Skill::Planning, &mut a, &step, only_checks).unwrap();
        assert!(
            o.fired(Repair::WorkStepInserted)
                .unwrap()
                .contains("no step that does the work")
        );
        let planned = &o.result["planned_step"];
        assert_works_on(&planned[0], "Write a haiku about autumn rain");
        assert_eq!(planned[1]["executor"], "reflection");
        // A plan that does the work is left as it is.
        let mut b = agent(&[Skill::Planning, Skill::Think, Skill::Reflection]);
        let step = planning_for(&mut b, "Write a haiku about autumn rain");
        let o = interpret(Skill::Planning, &mut b, &step, PLAN).unwrap();
        assert!(o.repairs.is_empty());
        assert_eq!(o.result["planned_step"].as_array().unwrap().len(), 2);
        // Without the rule (`repairs: auto`), the plan is the model's as it gave it.
        let mut c = agent(&[Skill::Planning, Skill::Think, Skill::Reflection]);
        c.settings_mut().repairs = crate::policy::Repairs::default();
        let step = planning_for(&mut c, "Write a haiku about autumn rain");
        let o = interpret(Skill::Planning, &mut c, &step, only_checks).unwrap();
        assert!(o.repairs.is_empty());
        assert_eq!(o.result["planned_step"][0]["executor"], "reflection");
    }

    #[test]
    fn a_summary_planned_before_any_work_gets_the_work_first() {
        let summary = r#"<planned_step>[{"step_intention": "Summarise", "type": "skill", "executor": "summary", "text_content": "report"}]</planned_step>"#;
        // A stage whose planning finished and whose think ended `think_state`; then a reflection.
        let reflect = |think_state: StepExecutionState, repairs: crate::policy::Repairs| {
            let mut a = agent(&[
                Skill::Planning,
                Skill::Think,
                Skill::Reflection,
                Skill::Summary,
            ]);
            a.settings_mut().repairs = repairs;
            a.settings_mut().step_limits.reflections = 3;
            let plan = planning_for(&mut a, "Write a haiku about autumn rain");
            end(&mut a, &plan, StepExecutionState::Finished);
            let think = running(&mut a, Skill::Think, "Write the haiku");
            end(&mut a, &think, think_state);
            let r = running(&mut a, Skill::Reflection, "check");
            interpret(Skill::Reflection, &mut a, &r, summary).unwrap()
        };
        let small = crate::policy::Repairs::preset(crate::policy::Preset::SmallModel);
        let o = reflect(StepExecutionState::Failed, small.clone());
        let plan = &o.result["reflection_step"];
        assert_works_on(&plan[0], "Write a haiku about autumn rain");
        assert_eq!(plan[1]["executor"], "summary");
        assert!(
            o.fired(Repair::WorkBeforeSummary)
                .unwrap()
                .contains("did the work")
        );
        // Once a step did the work, the summary is planned as the model gave it.
        let o = reflect(StepExecutionState::Finished, small);
        assert_eq!(o.result["reflection_step"][0]["executor"], "summary");
        assert!(o.repairs.is_empty());
        // Off in `auto`: the plan is the model's.
        let o = reflect(
            StepExecutionState::Failed,
            crate::policy::Repairs::default(),
        );
        assert_eq!(o.result["reflection_step"][0]["executor"], "summary");
        assert!(o.repairs.is_empty());
    }

    #[test]
    fn the_last_reflection_a_stage_allows_plans_the_summary() {
        let more = r#"<planned_step>[{"step_intention": "Write line 6", "type": "skill", "executor": "quick_think", "text_content": "line 6"}]</planned_step>"#;
        // An agent that already reflected `before` times in the stage reflects once more.
        let reflect_after = |before: usize| {
            let mut a = agent(&[Skill::Reflection, Skill::QuickThink, Skill::Summary]);
            a.settings_mut().step_limits.reflections = 3;
            for _ in 0..before {
                let r = running(&mut a, Skill::Reflection, "every planned step has run");
                end(&mut a, &r, StepExecutionState::Finished);
            }
            let r = running(&mut a, Skill::Reflection, "every planned step has run");
            interpret(Skill::Reflection, &mut a, &r, more).unwrap()
        };
        let o = reflect_after(1);
        assert_eq!(o.result["reflection_step"][0]["executor"], "quick_think");
        let o = reflect_after(2);
        assert_eq!(o.result["reflection_step"][0]["executor"], "summary");
        assert!(
            o.fired(Repair::ReflectionCap)
                .unwrap()
                .contains("step_limits.reflections")
        );
    }

    #[test]
    fn a_chinese_agents_closing_summary_and_repair_notes_are_chinese() {
        let zh = crate::texts::Texts::builtin(crate::texts::Language::Zh);
        let mut a = agent(&[Skill::Reflection, Skill::QuickThink, Skill::Summary]);
        a.settings_mut().texts = zh;
        a.settings_mut().step_limits.reflections = 1;
        let r = running(&mut a, Skill::Reflection, "检查结果");
        let more = r#"<planned_step>[{"step_intention": "写第六行", "type": "tool", "executor": "quick_think", "text_content": "第六行"}]</planned_step>"#;
        let o = interpret(Skill::Reflection, &mut a, &r, more).unwrap();
        let summary = a.agent_step.next().unwrap();
        let mut said = vec![summary.step_intention.clone(), summary.text_content.clone()];
        said.extend(o.repairs.iter().map(|f| f.what.clone()));
        assert_eq!(said.len(), 4, "{said:?}");
        for text in said {
            let words = crate::texts::english_words(&text, &[]);
            assert!(words.is_empty(), "{text}: {words:?}");
        }
    }

    #[test]
    fn a_plan_with_nothing_usable_fails_the_step() {
        let mut a = agent(&[Skill::Planning]);
        let step = running(&mut a, Skill::Planning, "");
        let e = interpret(Skill::Planning, &mut a, &step, PLAN).unwrap_err();
        assert!(e.to_string().contains("no `think` skill"), "{e}");
    }

    #[test]
    fn reflection_may_plan_summary_and_an_empty_reflection_closes_with_one() {
        let mut a = agent(&[Skill::Reflection, Skill::Summary]);
        let step = running(&mut a, Skill::Reflection, "");
        interpret(Skill::Reflection, &mut a, &step, r#"<planned_step>[{"step_intention": "s", "type": "skill", "executor": "summary", "text_content": ""}]</planned_step>"#).unwrap();
        assert_eq!(todo_executors(&a), ["summary"]);
        let mut b = agent(&[Skill::Reflection, Skill::Summary]);
        let step = running(&mut b, Skill::Reflection, "");
        let o = interpret(
            Skill::Reflection,
            &mut b,
            &step,
            "<planned_step>[]</planned_step>",
        )
        .unwrap();
        assert_eq!(todo_executors(&b), ["summary"]);
        assert!(o.result["note"].is_string());
        // Only more reflecting fixes nothing: it closes the same way.
        let mut c = agent(&[Skill::Reflection, Skill::Summary, Skill::Think]);
        let step = running(&mut c, Skill::Reflection, "");
        interpret(Skill::Reflection, &mut c, &step, r#"<planned_step>[{"step_intention": "Check the corrected result", "type": "skill", "executor": "reflection", "text_content": "again"}]</planned_step>"#).unwrap();
        assert_eq!(todo_executors(&c), ["summary"]);
        // A fix followed by a reflection is kept as planned.
        let mut d = agent(&[Skill::Reflection, Skill::Summary, Skill::Think]);
        let step = running(&mut d, Skill::Reflection, "");
        interpret(Skill::Reflection, &mut d, &step, r#"<planned_step>[{"step_intention": "Fix line two", "type": "skill", "executor": "think", "text_content": "fix"}, {"step_intention": "Check the corrected result", "type": "skill", "executor": "reflection", "text_content": "again"}]</planned_step>"#).unwrap();
        assert_eq!(todo_executors(&d), ["think", "reflection"]);
    }

    #[test]
    fn a_missing_tag_fails() {
        let mut a = agent(&[Skill::Planning]);
        let step = running(&mut a, Skill::Planning, "");
        assert!(interpret(Skill::Planning, &mut a, &step, "I will think about it.").is_err());
    }

    #[test]
    fn tool_decision_continues_with_a_pair_inserted_next_or_stops() {
        let mut a = agent(&[
            Skill::ToolDecision,
            Skill::InstructionGeneration,
            Skill::Reflection,
        ]);
        a.tools = vec!["ws".into()];
        let td = running(&mut a, Skill::ToolDecision, "");
        a.add_steps(vec![StepState::new(
            "t".into(),
            td.stage_id.clone(),
            "w".into(),
            Executor::Skill(Skill::Reflection),
            "later",
            "",
        )]);
        let o = interpret(Skill::ToolDecision, &mut a, &td, r#"<planned_step>[{"step_intention": "next call", "type": "skill", "executor": "instruction_generation", "text_content": "read a.txt"}, {"step_intention": "read", "type": "tool", "executor": "ws", "text_content": "read it"}]</planned_step>"#).unwrap();
        assert_eq!(o.result["stop"], false);
        let todo: Vec<String> = a
            .agent_step
            .todo()
            .map(|id| a.agent_step.get(id).unwrap().executor.to_string())
            .collect();
        assert_eq!(todo, ["instruction_generation", "ws", "reflection"]);
        let o = interpret(
            Skill::ToolDecision,
            &mut a,
            &td,
            "<planned_step>[]</planned_step>",
        )
        .unwrap();
        assert_eq!(o.result["stop"], true);
    }

    #[test]
    fn a_plan_may_use_only_the_servers_its_message_chose_and_its_steps_keep_the_choice() {
        let mut a = agent(&[Skill::Planning, Skill::InstructionGeneration]);
        a.tools = vec!["files".into(), "notes".into()];
        a.models = vec!["strong".into()];
        let mut step = running(&mut a, Skill::Planning, "");
        let choice = crate::state::Choice {
            llm: Some("strong".into()),
            mcp_servers: Some(vec!["files".into()]),
        };
        step.choice = Some(Box::new(choice.clone()));
        a.agent_step.get_mut(&step.step_id).unwrap().choice = step.choice.clone();
        let plan = |server: &str| {
            format!(
                r#"<planned_step>[{{"step_intention": "call", "type": "skill", "executor": "instruction_generation", "text_content": "x"}}, {{"step_intention": "use", "type": "tool", "executor": "{server}", "text_content": "y"}}]</planned_step>"#
            )
        };
        let o = interpret(Skill::Planning, &mut a, &step, &plan("notes")).unwrap();
        let rejected = o.result.to_string();
        assert!(rejected.contains("may not use tool `notes`"), "{rejected}");
        interpret(Skill::Planning, &mut a, &step, &plan("files")).unwrap();
        let planned: Vec<_> = a
            .agent_step
            .todo()
            .filter_map(|id| a.agent_step.get(id))
            .filter(|s| s.executor.name() == "files")
            .collect();
        assert_eq!(planned.len(), 1);
        assert_eq!(
            planned[0].choice.as_deref(),
            Some(&choice),
            "inherited from its planner"
        );
    }
}
