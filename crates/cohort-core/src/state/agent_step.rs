//! AgentStep: an agent's steps in execution order (`step_list`) and the ids still to run
//! (`todo`). It holds the primitives the pure `apply` uses (insert at a place, start, remove,
//! cut loose) and answers where a change would go; `AgentState` decides the changes (append,
//! insert next, drop a stage's steps, trim history) and applies them through `event::apply`.
//! A step still running when its stage or task is finished is spared by the cleanup but cut
//! loose from that work.

use super::{StepExecutionState, StepState};
use crate::ids::{StageRef, StepId, TaskId};
use serde::{Serialize, Serializer};
use std::collections::VecDeque;

/// The agent's `agent_step`: every step in execution order, and the queue of those to run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentStep {
    step_list: Vec<StepState>,
    todo: VecDeque<StepId>,
    /// Steps that were running when finish_stage/finish_task dropped their work. They stay so
    /// their call can end and be recorded, but no longer belong to the work: if the same stage
    /// gets new steps meanwhile, its re-opened working memory must not adopt them.
    cut_loose: Vec<StepId>,
    /// How many of its steps are `pending` (a graph plan's steps waiting for others), so an
    /// agent with none does not look through its queue for them on every turn.
    pending: usize,
}

/// Which steps finishing a piece of work touches.
#[derive(Debug, Default, PartialEq)]
pub struct DropPlan {
    /// Running steps of the work, not cut loose yet.
    pub cut: Vec<StepId>,
    /// Every other step of the work, in list order.
    pub dropped: Vec<StepId>,
}

impl AgentStep {
    /// An agent's steps as the store keeps them: the list, the queue, and the ids cut loose.
    pub fn from_parts(
        step_list: Vec<StepState>,
        todo: VecDeque<StepId>,
        cut_loose: Vec<StepId>,
    ) -> Self {
        let pending = step_list
            .iter()
            .filter(|s| s.execution_state == StepExecutionState::Pending)
            .count();
        AgentStep {
            step_list,
            todo,
            cut_loose,
            pending,
        }
    }

    /// Whether any of its steps is `pending`.
    pub fn has_pending(&self) -> bool {
        self.pending > 0
    }

    /// Moves step `id` to state `to`; the state it had (None: no such step).
    pub fn set_state(&mut self, id: &StepId, to: StepExecutionState) -> Option<StepExecutionState> {
        let s = self.step_list.iter_mut().find(|s| &s.step_id == id)?;
        let was = std::mem::replace(&mut s.execution_state, to);
        let pending = StepExecutionState::Pending;
        self.pending = self.pending + usize::from(to == pending) - usize::from(was == pending);
        Some(was)
    }

    /// The list, the queue and the ids cut loose, as the store keeps them.
    pub fn parts(&self) -> (&[StepState], &VecDeque<StepId>, &[StepId]) {
        (&self.step_list, &self.todo, &self.cut_loose)
    }

    /// Every step, in execution order (`step_list`).
    pub fn steps(&self) -> &[StepState] {
        &self.step_list
    }

    /// The other steps that ended (finished, failed or cancelled) in the task and stage of
    /// `step`: what an agent has done in its part so far.
    pub fn ended_beside<'a>(&'a self, step: &'a StepState) -> impl Iterator<Item = &'a StepState> {
        self.step_list.iter().filter(|s| {
            s.step_id != step.step_id
                && s.task_id == step.task_id
                && s.stage_id == step.stage_id
                && s.execution_state.is_over()
        })
    }

    /// The ids still to run, next first (`todo`).
    pub fn todo(&self) -> impl Iterator<Item = &StepId> {
        self.todo.iter()
    }

    /// How many steps are still to run.
    pub fn todo_len(&self) -> usize {
        self.todo.len()
    }

    /// The step of this id, if the agent holds it.
    pub fn get(&self, id: &StepId) -> Option<&StepState> {
        self.step_list.iter().find(|s| &s.step_id == id)
    }

    /// The step `id` of this agent, to change in place.
    pub fn get_mut(&mut self, id: &StepId) -> Option<&mut StepState> {
        self.step_list.iter_mut().find(|s| &s.step_id == id)
    }

    /// The step that would run next.
    pub fn next(&self) -> Option<&StepState> {
        self.todo.front().and_then(|id| self.get(id))
    }

    /// The step now running, if any.
    pub fn running(&self) -> Option<&StepState> {
        self.step_list
            .iter()
            .find(|s| s.execution_state == StepExecutionState::Running)
    }

    /// Where appended steps go: the end of the list and of the queue.
    pub fn append_place(&self) -> (usize, usize) {
        (self.step_list.len(), self.todo.len())
    }

    /// Where steps inserted next go: before the next pending step in the list (the end if
    /// none is pending) and at the front of the queue. Never before or into the running step,
    /// which has already left the queue.
    pub fn next_place(&self) -> usize {
        match self.todo.front() {
            Some(next) => self.position(next).unwrap_or(self.step_list.len()),
            None => self.step_list.len(),
        }
    }

    /// Which steps finishing one stage (or a whole task, when `stage` is None) drops or cuts
    /// loose.
    pub fn drop_plan(&self, task: &TaskId, stage: Option<&StageRef>) -> DropPlan {
        let mut plan = DropPlan::default();
        for s in &self.step_list {
            if &s.task_id != task || stage.is_some_and(|st| &s.stage_id != st) {
                continue;
            }
            if s.execution_state == StepExecutionState::Running {
                if !self.cut_loose.contains(&s.step_id) {
                    plan.cut.push(s.step_id.clone());
                }
            } else {
                plan.dropped.push(s.step_id.clone());
            }
        }
        plan
    }

    /// The oldest steps of one task and stage that are over, beyond the newest `keep`.
    pub fn trim_plan(&self, task: &TaskId, stage: &StageRef, keep: usize) -> Vec<StepId> {
        let over: Vec<&StepId> = self
            .step_list
            .iter()
            .filter(|s| &s.task_id == task && &s.stage_id == stage && s.execution_state.is_over())
            .map(|s| &s.step_id)
            .collect();
        let excess = over.len().saturating_sub(keep);
        over.into_iter().take(excess).cloned().collect()
    }

    /// Whether a step of this task and stage was cut loose from it by finish_stage/finish_task
    /// while it ran.
    pub fn cut_loose_in(&self, task: &TaskId, stage: &StageRef) -> bool {
        self.cut_loose.iter().any(|id| {
            self.get(id)
                .is_some_and(|s| &s.task_id == task && &s.stage_id == stage)
        })
    }

    /// Whether the step was cut loose from its finished stage or task.
    #[cfg(test)]
    pub fn is_cut_loose(&self, id: &StepId) -> bool {
        self.cut_loose.contains(id)
    }

    // ---- primitives of `event::apply` ----

    /// Puts a step at `list_at` in the list and, if it is to run, at `todo_at` in the queue.
    pub fn insert(&mut self, step: StepState, list_at: usize, todo_at: Option<usize>) {
        if let Some(t) = todo_at {
            self.todo
                .insert(t.min(self.todo.len()), step.step_id.clone());
        }
        let at = list_at.min(self.step_list.len());
        self.pending += usize::from(step.execution_state == StepExecutionState::Pending);
        self.step_list.insert(at, step);
    }

    /// The step leaves the queue without running.
    pub fn unqueue(&mut self, id: &StepId) {
        if self.todo.contains(id) {
            self.todo.retain(|t| t != id);
        }
    }

    /// The step leaves the queue and runs.
    pub fn start(&mut self, id: &StepId) {
        if self.todo.front() == Some(id) {
            self.todo.pop_front();
        } else {
            self.todo.retain(|t| t != id);
        }
        self.set_state(id, StepExecutionState::Running);
    }

    /// Removes steps from the list, the queue and the cut-loose set; returns them.
    pub fn remove_all(&mut self, ids: &[StepId]) -> Vec<StepState> {
        if ids.is_empty() {
            return Vec::new();
        }
        self.todo.retain(|t| !ids.contains(t));
        self.cut_loose.retain(|t| !ids.contains(t));
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.step_list)
            .into_iter()
            .partition(|s| ids.contains(&s.step_id));
        self.step_list = kept;
        let pending = StepExecutionState::Pending;
        self.pending -= gone.iter().filter(|s| s.execution_state == pending).count();
        gone
    }

    /// Marks the running steps `ids` as cut loose from the work that dropped them.
    pub fn cut_loose(&mut self, ids: &[StepId]) {
        for id in ids {
            if !self.cut_loose.contains(id) {
                self.cut_loose.push(id.clone());
            }
        }
    }

    fn position(&self, id: &StepId) -> Option<usize> {
        self.step_list.iter().position(|s| &s.step_id == id)
    }
}

/// On the wire an agent lists its steps by id; the steps themselves are published as step state.
impl Serialize for AgentStep {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Ids<'a> {
            step_list: Vec<&'a StepId>,
            todo: &'a VecDeque<StepId>,
        }
        Ids {
            step_list: self.step_list.iter().map(|s| &s.step_id).collect(),
            todo: &self.todo,
        }
        .serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{AgentId, StageId};
    use crate::state::Agent;
    use crate::state::{AgentState, Executor, Skill};

    fn step(name: &str, stage: &str) -> StepState {
        StepState::new(
            TaskId::from("t"),
            StageRef::Stage(StageId::from(stage)),
            AgentId::from("a"),
            Executor::Skill(Skill::Think),
            name,
            "",
        )
    }

    fn agent() -> Agent {
        Agent::from(AgentState::new(
            "a".into(),
            "A".into(),
            "r".into(),
            "p".into(),
        ))
    }

    fn order(a: &Agent) -> Vec<String> {
        let s = &a.agent_step;
        s.steps().iter().map(|s| s.step_intention.clone()).collect()
    }

    fn todo(a: &Agent) -> Vec<String> {
        let s = &a.agent_step;
        s.todo()
            .map(|id| s.get(id).unwrap().step_intention.clone())
            .collect()
    }

    #[test]
    fn add_step_appends_in_order() {
        let mut a = agent();
        a.add_steps(vec![step("1", "s"), step("2", "s")]);
        a.add_steps(vec![step("3", "s")]);
        assert_eq!(order(&a), ["1", "2", "3"]);
        assert_eq!(todo(&a), ["1", "2", "3"]);
    }

    #[test]
    fn add_next_step_while_a_step_runs_goes_after_the_running_step_and_before_the_next() {
        let mut a = agent();
        a.add_steps(vec![step("1", "s"), step("2", "s"), step("3", "s")]);
        assert_eq!(a.start_next().unwrap().step_intention, "1");
        a.add_next_steps(vec![step("x", "s"), step("y", "s")]);
        assert_eq!(order(&a), ["1", "x", "y", "2", "3"]);
        assert_eq!(todo(&a), ["x", "y", "2", "3"]);
        assert_eq!(a.agent_step.running().unwrap().step_intention, "1");
    }

    #[test]
    fn add_next_step_with_nothing_pending_appends() {
        let mut a = agent();
        a.add_steps(vec![step("1", "s")]);
        a.start_next();
        a.add_next_steps(vec![step("x", "s")]);
        assert_eq!(order(&a), ["1", "x"]);
        assert_eq!(todo(&a), ["x"]);
    }

    #[test]
    fn dropping_a_stage_keeps_other_stages_and_the_running_step() {
        let mut a = agent();
        a.add_steps(vec![step("1", "s"), step("2", "s"), step("o", "other")]);
        a.start_next();
        let dropped = a.finish_stage(
            &TaskId::from("t"),
            &StageRef::Stage(StageId::from("s")),
            "done",
        );
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].step_intention, "2");
        assert_eq!(order(&a), ["1", "o"]);
        assert_eq!(todo(&a), ["o"]);
    }

    #[test]
    fn dropping_a_task_drops_all_its_stages() {
        let mut a = agent();
        a.add_steps(vec![step("1", "s"), step("o", "other")]);
        let mut other = step("z", "s");
        other.task_id = TaskId::from("t2");
        a.add_steps(vec![other]);
        a.finish_task(&TaskId::from("t"), "done");
        assert_eq!(order(&a), ["z"]);
    }

    #[test]
    fn serializes_as_ids() {
        let mut a = agent();
        a.add_steps(vec![step("1", "s")]);
        let v = serde_json::to_value(&a.agent_step).unwrap();
        assert_eq!(v["step_list"].as_array().unwrap().len(), 1);
        assert_eq!(v["todo"], v["step_list"]);
    }
}
