//! AgentStep: an agent's steps in execution order (`step_list`) and the ids still to run
//! (`todo`). `add_step` appends; `add_next_step` puts steps before the next pending one, never
//! before or into the step now running (which has already left `todo`). A step still running
//! when its stage or task is finished is spared by the cleanup but cut loose from that work.

use super::{StepExecutionState, StepState};
use crate::ids::{StageRef, StepId, TaskId};
use serde::{Serialize, Serializer};
use std::collections::VecDeque;

#[derive(Clone, Debug, Default)]
pub struct AgentStep {
    step_list: Vec<StepState>,
    todo: VecDeque<StepId>,
    /// Steps that were running when finish_stage/finish_task dropped their work. They stay so
    /// their call can end and be recorded, but no longer belong to the work: if the same stage
    /// gets new steps meanwhile, its re-opened working memory must not adopt them.
    cut_loose: Vec<StepId>,
}

impl AgentStep {
    pub fn steps(&self) -> &[StepState] {
        &self.step_list
    }

    pub fn todo(&self) -> impl Iterator<Item = &StepId> {
        self.todo.iter()
    }

    pub fn todo_len(&self) -> usize {
        self.todo.len()
    }

    pub fn get(&self, id: &StepId) -> Option<&StepState> {
        self.step_list.iter().find(|s| &s.step_id == id)
    }

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

    /// Appends steps at the end of the queue, in order.
    pub fn add_steps(&mut self, steps: Vec<StepState>) {
        for step in steps {
            self.todo.push_back(step.step_id.clone());
            self.step_list.push(step);
        }
    }

    /// Records a step that is already over (what a person did); it never enters `todo`.
    pub fn add_done(&mut self, step: StepState) {
        self.step_list.push(step);
    }

    /// Inserts steps, in order, before the next pending step (or at the end if none is pending).
    pub fn add_next_steps(&mut self, steps: Vec<StepState>) {
        let at = match self.todo.front() {
            Some(next) => self.position(next).unwrap_or(self.step_list.len()),
            None => self.step_list.len(),
        };
        for (i, step) in steps.into_iter().enumerate() {
            self.todo.insert(i, step.step_id.clone());
            self.step_list.insert(at + i, step);
        }
    }

    /// Takes the next step to run off `todo` and marks it running.
    pub fn start_next(&mut self) -> Option<&StepState> {
        let id = self.todo.pop_front()?;
        let step = self.get_mut(&id)?;
        step.execution_state = StepExecutionState::Running;
        Some(step)
    }

    /// Drops every step of one stage (or of a whole task when `stage` is None) except the one
    /// now running, and returns the dropped ones as they were (the caller marks those that never
    /// ran). The running step is cut loose: it is removed once it settles.
    pub fn drop_steps(&mut self, task: &TaskId, stage: Option<&StageRef>) -> Vec<StepState> {
        let of_work =
            |s: &StepState| &s.task_id == task && stage.is_none_or(|st| &s.stage_id == st);
        for s in &self.step_list {
            if of_work(s)
                && s.execution_state == StepExecutionState::Running
                && !self.cut_loose.contains(&s.step_id)
            {
                self.cut_loose.push(s.step_id.clone());
            }
        }
        let (dropped, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.step_list)
            .into_iter()
            .partition(|s| of_work(s) && s.execution_state != StepExecutionState::Running);
        self.step_list = kept;
        self.todo
            .retain(|id| !dropped.iter().any(|d| &d.step_id == id));
        // A cut-loose step that settled without being removed goes with its work's next cleanup.
        let list = &self.step_list;
        self.cut_loose
            .retain(|id| list.iter().any(|s| &s.step_id == id));
        dropped
    }

    /// Whether a step of this task and stage was cut loose from it by finish_stage/finish_task
    /// while it ran.
    pub fn cut_loose_in(&self, task: &TaskId, stage: &StageRef) -> bool {
        self.cut_loose.iter().any(|id| {
            self.get(id)
                .is_some_and(|s| &s.task_id == task && &s.stage_id == stage)
        })
    }

    #[cfg(test)]
    pub fn is_cut_loose(&self, id: &StepId) -> bool {
        self.cut_loose.contains(id)
    }

    /// Removes the oldest steps of one task and stage that are over, keeping the newest `keep`
    /// of them; returns the removed ids. Steps still to run and the running one stay.
    pub fn trim_over(&mut self, task: &TaskId, stage: &StageRef, keep: usize) -> Vec<StepId> {
        let over: Vec<StepId> = self
            .step_list
            .iter()
            .filter(|s| &s.task_id == task && &s.stage_id == stage && s.execution_state.is_over())
            .map(|s| s.step_id.clone())
            .collect();
        let Some(excess) = over.len().checked_sub(keep).filter(|n| *n > 0) else {
            return Vec::new();
        };
        let gone: Vec<StepId> = over.into_iter().take(excess).collect();
        self.step_list.retain(|s| !gone.contains(&s.step_id));
        gone
    }

    /// Removes one step (used for a running step whose stage was cleaned up meanwhile).
    pub fn remove(&mut self, id: &StepId) -> Option<StepState> {
        self.todo.retain(|t| t != id);
        self.cut_loose.retain(|t| t != id);
        let i = self.position(id)?;
        Some(self.step_list.remove(i))
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
    use crate::state::{Executor, Skill};

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

    fn order(a: &AgentStep) -> Vec<String> {
        a.steps().iter().map(|s| s.step_intention.clone()).collect()
    }

    fn todo(a: &AgentStep) -> Vec<String> {
        a.todo()
            .map(|id| a.get(id).unwrap().step_intention.clone())
            .collect()
    }

    #[test]
    fn add_step_appends_in_order() {
        let mut a = AgentStep::default();
        a.add_steps(vec![step("1", "s"), step("2", "s")]);
        a.add_steps(vec![step("3", "s")]);
        assert_eq!(order(&a), ["1", "2", "3"]);
        assert_eq!(todo(&a), ["1", "2", "3"]);
    }

    #[test]
    fn add_next_step_while_a_step_runs_goes_after_the_running_step_and_before_the_next() {
        let mut a = AgentStep::default();
        a.add_steps(vec![step("1", "s"), step("2", "s"), step("3", "s")]);
        assert_eq!(a.start_next().unwrap().step_intention, "1");
        a.add_next_steps(vec![step("x", "s"), step("y", "s")]);
        assert_eq!(order(&a), ["1", "x", "y", "2", "3"]);
        assert_eq!(todo(&a), ["x", "y", "2", "3"]);
        assert_eq!(a.running().unwrap().step_intention, "1");
    }

    #[test]
    fn add_next_step_with_nothing_pending_appends() {
        let mut a = AgentStep::default();
        a.add_steps(vec![step("1", "s")]);
        a.start_next();
        a.add_next_steps(vec![step("x", "s")]);
        assert_eq!(order(&a), ["1", "x"]);
        assert_eq!(todo(&a), ["x"]);
    }

    #[test]
    fn dropping_a_stage_keeps_other_stages_and_the_running_step() {
        let mut a = AgentStep::default();
        a.add_steps(vec![step("1", "s"), step("2", "s"), step("o", "other")]);
        a.start_next();
        let dropped = a.drop_steps(
            &TaskId::from("t"),
            Some(&StageRef::Stage(StageId::from("s"))),
        );
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].step_intention, "2");
        assert_eq!(order(&a), ["1", "o"]);
        assert_eq!(todo(&a), ["o"]);
    }

    #[test]
    fn dropping_a_task_drops_all_its_stages() {
        let mut a = AgentStep::default();
        a.add_steps(vec![step("1", "s"), step("o", "other")]);
        let mut other = step("z", "s");
        other.task_id = TaskId::from("t2");
        a.add_steps(vec![other]);
        a.drop_steps(&TaskId::from("t"), None);
        assert_eq!(order(&a), ["z"]);
    }

    #[test]
    fn serializes_as_ids() {
        let mut a = AgentStep::default();
        a.add_steps(vec![step("1", "s")]);
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(v["step_list"].as_array().unwrap().len(), 1);
        assert_eq!(v["todo"], v["step_list"]);
    }
}
