//! The rules that mend a plan: a stage plan or reflection with no step doing the work
//! (`work_step_inserted`, `work_before_summary`), a reflection that plans nothing new or is the
//! last a stage allows (`reflection_nothing_new`, `reflection_cap`), a step planned twice
//! (`doubled_step_dropped`). A skill named as a tool (`skill_named_as_tool`) is one guard
//! where a planned step gets its executor, and stays there (`skills::plan`).

use crate::policy::{Fired, Repair};
use crate::skills::RawPlannedStep;
use crate::state::{
    Agent, Executor, PlannedStep, Skill, StepExecutionState, StepOrigin, StepState,
};

/// Whether a planned step does (part of) the work itself, rather than plan, check, read,
/// ask about or report it.
fn does_work(planned: &PlannedStep) -> bool {
    works(&planned.executor)
}

/// Whether a step of `executor` does (part of) the work itself (see [`does_work`]).
pub(in crate::skills) fn works(executor: &Executor) -> bool {
    match executor {
        Executor::Tool(_) => true,
        Executor::Skill(s) => s.does_work(),
    }
}

/// The step that does the agent's goal in the stage of `step` by thinking, when it may think.
/// Its text is the goal as the stage gave it, nothing around it: asked "Do my goal … and write
/// the result itself in full …: write a haiku about autumn rain", Qwen2.5 0.5B handed the text
/// back 3 times in 3; asked "Write a haiku about autumn rain." in the same prompt, it wrote a
/// haiku 3 times in 3 (the skill's rules already say the answer is the result itself).
fn work_step(agent: &Agent, step: &StepState) -> Option<PlannedStep> {
    let skill = [Skill::Think, Skill::QuickThink]
        .into_iter()
        .find(|s| agent.skills.contains(s))?;
    let goal = crate::skills::goal_in_stage(agent, step)?;
    Some(PlannedStep::new(
        Executor::Skill(skill),
        agent.settings.texts.work_step_intention(),
        goal,
    ))
}

/// Puts a step doing the goal's work first in a stage plan that has none (not in a plan made
/// again after a replan point: the work may be done).
pub(in crate::skills) fn insert_work_step(
    planner: Skill,
    agent: &Agent,
    step: &StepState,
    accepted: &mut Vec<PlannedStep>,
    graph: bool,
    repairs: &mut Vec<Fired>,
) {
    // A stage plan with no step that does the work, only checks of it (a 0.5B writer planned
    // two reflections, and its summary then handed back its goal), gets one first: the goal
    // itself, done by thinking.
    if planner == Skill::Planning
        && agent.settings.repairs.allows(Repair::WorkStepInserted)
        && !matches!(step.origin, StepOrigin::Replan { .. })
        && !accepted.iter().any(does_work)
        && let Some(work) = work_step(agent, step)
    {
        let work = work_first(work, accepted, graph);
        accepted.insert(0, work);
        let what = agent.settings.texts.repair_work_step_inserted();
        repairs.push(Fired::new(Repair::WorkStepInserted, what));
    }
}

/// The work step a repair puts first in a plan with none. In a graph plan it gets an id of its
/// own, and the plan's steps that waited for nothing wait for it.
fn work_first(mut work: PlannedStep, plan: &mut [PlannedStep], graph: bool) -> PlannedStep {
    if !graph {
        return work;
    }
    let mut id = "work".to_owned();
    while plan.iter().any(|p| p.id.as_deref() == Some(&id)) {
        id.push('_');
    }
    for p in plan.iter_mut().filter(|p| p.depends_on.is_empty()) {
        p.depends_on.push(id.clone());
    }
    work.id = Some(id);
    work
}

/// Puts a step doing the goal's work before the summary a reflection plans, when none of the
/// agent's steps in the stage did any work (not on the last reflection the stage allows, which
/// must close it).
pub(in crate::skills) fn work_before_summary(
    planner: Skill,
    agent: &Agent,
    step: &StepState,
    accepted: &mut Vec<PlannedStep>,
    repairs: &mut Vec<Fired>,
) {
    // A 0.5B writer whose one work step failed reflected, planned the summary, had it refused
    // for handing back its goal (there was nothing else to report), and did so again and again
    // until the stage's step limit: with nothing done, a summary can only echo its goal.
    if planner != Skill::Reflection || !agent.settings.repairs.allows(Repair::WorkBeforeSummary) {
        return;
    }
    let summary = Executor::Skill(Skill::Summary);
    let Some(at) = accepted.iter().position(|p| p.executor == summary) else {
        return;
    };
    let worked = agent
        .agent_step
        .ended_beside(step)
        .any(|s| s.execution_state == StepExecutionState::Finished && works(&s.executor));
    if worked || accepted[..at].iter().any(does_work) || last_reflection(agent, step) {
        return;
    }
    if let Some(work) = work_step(agent, step) {
        accepted.insert(at, work);
        let what = agent.settings.texts.repair_work_before_summary();
        repairs.push(Fired::new(Repair::WorkBeforeSummary, what));
    }
}

/// Whether `step`, a reflection, is the last one `step_limits.reflections` allows in its stage.
pub(in crate::skills) fn last_reflection(agent: &Agent, step: &StepState) -> bool {
    reflections_before(agent, step) + 1 >= agent.settings.step_limits.reflections
}

/// How many reflections the agent ran in the task and stage of `step` before it.
fn reflections_before(agent: &Agent, step: &StepState) -> usize {
    agent
        .agent_step
        .ended_beside(step)
        .filter(|s| s.executor == Executor::Skill(Skill::Reflection))
        .count()
}

/// Whether `planned` repeats a step the agent finished in the same task and stage as `step`.
fn ran_before(agent: &Agent, step: &StepState, planned: &PlannedStep) -> bool {
    agent.agent_step.steps().iter().any(|s| {
        s.task_id == step.task_id
            && s.stage_id == step.stage_id
            && s.execution_state == StepExecutionState::Finished
            && s.executor == planned.executor
            && s.step_intention == planned.step_intention
    })
}

/// Whether a reflection's plan `accepted` plans nothing new: only steps this agent already ran
/// here, or only more reflecting (`reflection_nothing_new`). A real 1.5B model re-planned
/// "check the result" and "summarise my work" (as quick_think) after every reflection, for
/// ever, and another planned only "check the corrected result" three times over. Like an empty
/// one, such a reflection closes the stage.
pub(in crate::skills) fn plans_nothing_new(
    agent: &Agent,
    step: &StepState,
    accepted: &[PlannedStep],
) -> bool {
    !accepted.is_empty()
        && accepted
            .iter()
            .all(|p| p.executor == Executor::Skill(Skill::Reflection) || ran_before(agent, step, p))
}

/// Whether the plan's step `r`, to be run by `executor`, repeats the step planned before it
/// (`doubled_step_dropped`). A graph's steps may do the same work side by side on purpose,
/// under ids of their own; one repeating the step before it id and all is that step written
/// twice.
pub(in crate::skills) fn doubled(
    before: Option<&PlannedStep>,
    executor: &Executor,
    r: &RawPlannedStep,
) -> bool {
    let in_graph = r.id.is_some() || !r.depends_on.is_empty();
    before.is_some_and(|p| {
        p.executor == *executor
            && p.step_intention == r.step_intention
            && p.text_content == r.text_content
            && (!in_graph || (p.id == r.id && p.depends_on == r.depends_on))
    })
}
