//! A graph plan's steps wait for the steps they depend on: queued `pending`, made ready (`init`,
//! an event that says when) once every one of them finished, and failed with the reason (or
//! cancelled, when one was set aside) as soon as one of them did not, so they never run on a
//! missing result. The agent's next decision sees them in its history.

use crate::event::StepUpdate;
use crate::ids::StepId;
use crate::state::{Agent, Cancelled, StepExecutionState, StepResult, StepState};

/// What became of the pending steps: the ones now ready, and the ones that will not run.
#[derive(Debug, Default, PartialEq)]
pub struct Advanced {
    /// Steps whose dependencies all finished: they may run now.
    pub ready: Vec<StepId>,
    /// Steps that will not run, because a dependency failed or was set aside.
    pub dropped: Vec<StepId>,
}

/// Moves every pending step of the agent on by its dependencies' states (see the module doc).
/// The queue holds a plan's steps after the steps they depend on, so one pass in its order
/// carries a failure through a whole chain.
pub fn advance(agent: &mut Agent) -> Advanced {
    // Called on every turn of the agent: nothing to look through when nothing waits.
    if !agent.agent_step.has_pending() {
        return Advanced::default();
    }
    let pending: Vec<StepId> = agent
        .agent_step
        .todo()
        .filter(|id| {
            agent
                .agent_step
                .get(id)
                .is_some_and(|s| s.execution_state == StepExecutionState::Pending)
        })
        .cloned()
        .collect();
    let mut out = Advanced::default();
    for id in pending {
        let Some(step) = agent.agent_step.get(&id) else {
            continue;
        };
        match blocker(agent, step) {
            Blocker::Waits => {}
            Blocker::None => {
                agent.update_step(
                    &id,
                    StepUpdate {
                        execution_state: Some(StepExecutionState::Init),
                        ..Default::default()
                    },
                );
                out.ready.push(id);
            }
            Blocker::Ended { cancelled, why } => {
                let update = not_run(cancelled, why);
                agent.update_step(&id, update);
                out.dropped.push(id);
            }
        }
    }
    close_emptied_stages(agent, &out.dropped);
    out
}

/// A stage whose last queued steps will not run is looked back on, as one whose plan ran dry
/// (the reflection sees which steps did not run and why).
fn close_emptied_stages(agent: &mut Agent, dropped: &[StepId]) {
    let mut looked: Vec<StepState> = Vec::new();
    for id in dropped {
        let Some(step) = agent.agent_step.get(id).cloned() else {
            continue;
        };
        let Some(stage) = step.stage_id.stage() else {
            continue;
        };
        let seen = looked
            .iter()
            .any(|s| s.task_id == step.task_id && s.stage_id == step.stage_id);
        if !seen
            && agent
                .open_goals
                .contains(&(step.task_id.clone(), stage.clone()))
            && super::complete::nothing_left_in_stage(agent, &step)
        {
            super::complete::add_closing_reflection(agent, &step);
            looked.push(step);
        }
    }
}

/// The pending steps that depend on `failed` (and, through them, the steps that depend on
/// those) end now with `reason`: the step failed (or a person cancelled it), so none of them
/// can run. Used when its end is decided, before it is stored, so the agent knows at once what
/// it has left.
pub fn fail_dependents(agent: &mut Agent, failed: &StepState, reason: &str) -> Vec<StepId> {
    if !agent.agent_step.has_pending() {
        return Vec::new();
    }
    let cancelled = agent
        .agent_step
        .get(&failed.step_id)
        .and_then(|s| s.execute_result.as_ref())
        .is_some_and(|r| r.cancelled.is_some());
    let mut gone: Vec<StepId> = vec![failed.step_id.clone()];
    let queued: Vec<StepId> = agent.agent_step.todo().cloned().collect();
    let mut dropped = Vec::new();
    for id in queued {
        let Some(step) = agent.agent_step.get(&id) else {
            continue;
        };
        let Some(dep) = step.depends_on.iter().find(|d| gone.contains(d)) else {
            continue;
        };
        let why = depends_why(agent, dep, cancelled, Some(reason));
        agent.update_step(&id, not_run(cancelled, why));
        gone.push(id.clone());
        dropped.push(id);
    }
    dropped
}

/// Whether `candidate` may start while the steps `under_way` run: only a graph plan's ready
/// steps run side by side, all of one plan, at most `step_limits.parallel_steps` at once;
/// anything else waits for the agent to be free, as a plain list's steps always did.
pub fn may_run_beside(agent: &Agent, candidate: &StepState, under_way: &[&StepId]) -> bool {
    if under_way.is_empty() {
        return true;
    }
    let plan_of = |s: &StepState| match (&s.origin, &s.plan_id) {
        (crate::state::StepOrigin::Planned { by }, Some(_)) => Some(by.clone()),
        _ => None,
    };
    let Some(plan) = plan_of(candidate) else {
        return false;
    };
    under_way.len() < agent.settings.step_limits.parallel_steps
        && under_way.iter().all(|id| {
            agent
                .agent_step
                .get(id)
                .is_some_and(|s| plan_of(s).as_ref() == Some(&plan))
        })
}

/// What keeps a pending step from running.
enum Blocker {
    /// Nothing: every dependency finished.
    None,
    /// A dependency has not ended yet.
    Waits,
    /// A dependency ended without a result (or left the agent): the step will not run.
    Ended { cancelled: bool, why: String },
}

fn blocker(agent: &Agent, step: &StepState) -> Blocker {
    let t = &agent.settings.texts;
    let mut waits = false;
    for dep in &step.depends_on {
        let dep = &standing_for(agent, dep);
        let Some(d) = agent.agent_step.get(dep) else {
            return Blocker::Ended {
                cancelled: true,
                why: t.depends_not_held(dep),
            };
        };
        match d.execution_state {
            StepExecutionState::Finished => {}
            StepExecutionState::Failed => {
                return Blocker::Ended {
                    cancelled: false,
                    why: depends_why(agent, dep, false, d.failure_reason()),
                };
            }
            StepExecutionState::Cancelled => {
                return Blocker::Ended {
                    cancelled: true,
                    why: depends_why(agent, dep, true, None),
                };
            }
            _ => waits = true,
        }
    }
    if waits { Blocker::Waits } else { Blocker::None }
}

/// The step that stands for `id` now: the copy it runs again as after a restart cut it off
/// (and that copy's own copy, if another restart cut that one off too), or itself.
fn standing_for(agent: &Agent, id: &StepId) -> StepId {
    let mut at = id.clone();
    // A chain of restarts is short; the bound only guards against a loop in bad data.
    for _ in 0..16 {
        let next = agent
            .agent_step
            .get(&at)
            .and_then(|s| s.execute_result.as_ref())
            .and_then(|r| r.runs_again_as.clone());
        match next {
            Some(n) => at = n,
            None => break,
        }
    }
    at
}

/// The update that ends a step that will not run: cancelled (a dependency was set aside) or
/// failed (a dependency failed), with why.
fn not_run(cancelled: bool, why: String) -> StepUpdate {
    let (state, result) = if cancelled {
        let c = Cancelled {
            by: None,
            reason: why.clone(),
        };
        (
            StepExecutionState::Cancelled,
            StepResult {
                cancelled: Some(c),
                ..StepResult::failed(why)
            },
        )
    } else {
        (StepExecutionState::Failed, StepResult::failed(why))
    };
    StepUpdate {
        execution_state: Some(state),
        execute_result: Some(Box::new(result)),
        ..Default::default()
    }
}

/// Why a step will not run: the step `dep` it depends on failed or was `cancelled`, and why.
fn depends_why(agent: &Agent, dep: &StepId, cancelled: bool, reason: Option<&str>) -> String {
    let (t, step) = (&agent.settings.texts, named(agent, dep));
    match (cancelled, reason) {
        (true, None) => t.depends_cancelled(step),
        (true, Some(r)) => t.depends_cancelled_because(step, r),
        (false, r) => {
            let r = r.map_or_else(|| t.depends_no_reason(), str::to_owned);
            t.depends_failed(step, r)
        }
    }
}

/// A step as a reason names it: its plan id and intention when the agent holds it.
fn named(agent: &Agent, id: &StepId) -> String {
    let t = &agent.settings.texts;
    match agent.agent_step.get(id) {
        Some(s) => match &s.plan_id {
            Some(p) => t.step_named_planned(p, &s.step_intention),
            None => t.step_named(&s.step_intention),
        },
        None => id.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{StageId, StageRef};
    use crate::state::AgentState;
    use crate::state::{Executor, Skill};

    fn agent() -> Agent {
        Agent::from(AgentState::new(
            "w".into(),
            "W".into(),
            "writer".into(),
            "".into(),
        ))
    }

    fn step(id: &str, deps: &[&str]) -> StepState {
        let mut s = StepState::new(
            "t".into(),
            StageRef::Stage(StageId::from("s")),
            "w".into(),
            Executor::Skill(Skill::Think),
            format!("do {id}"),
            "",
        );
        s.step_id = StepId::from(id);
        s.plan_id = Some(id.to_owned());
        s.depends_on = deps.iter().map(|d| StepId::from(*d)).collect();
        if !deps.is_empty() {
            s.execution_state = StepExecutionState::Pending;
        }
        s
    }

    fn state(a: &Agent, id: &str) -> StepExecutionState {
        a.agent_step.get(&StepId::from(id)).unwrap().execution_state
    }

    fn end(a: &mut Agent, id: &str, to: StepExecutionState) {
        a.start_next();
        a.update_step(
            &StepId::from(id),
            StepUpdate {
                execution_state: Some(to),
                execute_result: Some(Box::new(StepResult::failed("no ink"))),
                ..Default::default()
            },
        );
    }

    #[test]
    fn a_join_is_ready_only_once_every_dependency_finished() {
        let mut a = agent();
        a.add_steps(vec![step("a", &[]), step("b", &[]), step("j", &["a", "b"])]);
        end(&mut a, "a", StepExecutionState::Finished);
        assert_eq!(advance(&mut a), Advanced::default());
        assert_eq!(state(&a, "j"), StepExecutionState::Pending);
        end(&mut a, "b", StepExecutionState::Finished);
        let moved = advance(&mut a);
        assert_eq!(moved.ready, vec![StepId::from("j")]);
        assert_eq!(state(&a, "j"), StepExecutionState::Init);
        assert_eq!(a.next_runnable().unwrap().step_id, StepId::from("j"));
    }

    #[test]
    fn a_failed_dependency_fails_the_whole_chain_after_it_with_the_reason() {
        let mut a = agent();
        a.add_steps(vec![step("a", &[]), step("b", &["a"]), step("c", &["b"])]);
        end(&mut a, "a", StepExecutionState::Failed);
        let moved = advance(&mut a);
        assert_eq!(moved.dropped, vec![StepId::from("b"), StepId::from("c")]);
        let b = a.agent_step.get(&StepId::from("b")).unwrap();
        assert_eq!(
            b.failure_reason(),
            Some("it depends on step `a` (\"do a\"), which failed: no ink")
        );
        assert_eq!(state(&a, "c"), StepExecutionState::Failed);
        assert!(
            a.next_runnable().is_none(),
            "nothing of the chain is left to run"
        );
    }

    #[test]
    fn a_failure_decided_before_it_is_stored_ends_its_dependents_at_once() {
        let mut a = agent();
        a.add_steps(vec![
            step("a", &[]),
            step("b", &["a"]),
            step("c", &[]),
            step("d", &["b"]),
        ]);
        let running = a.start_next().unwrap();
        let dropped = fail_dependents(&mut a, &running, "cut off");
        assert_eq!(dropped, vec![StepId::from("b"), StepId::from("d")]);
        assert_eq!(
            state(&a, "c"),
            StepExecutionState::Init,
            "c did not depend on a"
        );
    }

    #[test]
    fn a_step_waits_for_the_copy_a_restart_runs_its_dependency_again_as() {
        let mut a = agent();
        a.add_steps(vec![step("a", &[]), step("b", &["a"])]);
        a.start_next();
        assert_eq!(crate::step::resume_after_restart(&mut a), 1);
        let copy = a.next_runnable().unwrap().clone();
        assert_eq!(copy.plan_id.as_deref(), Some("a"));
        assert_eq!(advance(&mut a), Advanced::default(), "b waits for the copy");
        assert_eq!(state(&a, "b"), StepExecutionState::Pending);
        a.start_next();
        a.update_step(
            &copy.step_id,
            StepUpdate {
                execution_state: Some(StepExecutionState::Finished),
                ..Default::default()
            },
        );
        assert_eq!(advance(&mut a).ready, vec![StepId::from("b")]);
    }

    #[test]
    fn a_cancelled_dependency_cancels_what_waits_for_it() {
        let mut a = agent();
        a.add_steps(vec![step("a", &[]), step("b", &["a"])]);
        end(&mut a, "a", StepExecutionState::Cancelled);
        advance(&mut a);
        assert_eq!(state(&a, "b"), StepExecutionState::Cancelled);
    }
}
